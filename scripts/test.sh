#!/usr/bin/env bash
# The test command (README, .ci/run): Rust unit and end-to-end tests (tract oracle, C linking with cc),
# the no_std build of bundle-rt, the docs of every crate (private items too, warnings are errors), and the
# onnxruntime cross-check of Python-built models (single ops, a small CNN, ResNet-50 in BatchNorm and folded forms,
# MobileNetV2, BERT-style encoders, one over 128 tokens) linked into C programs, on the default fat bundle, its AVX2
# half under qemu-user (a CPU without AVX-512), the AVX2 set's own lowering and this CPU's widest set, the CMake
# example, the Python wheel in a fresh virtual environment, the ONNX
# backend node tests (zero failures allowed among the attempted ones), the nine ONNX 'light' models, and models
# exported by torch.onnx (scripts/torch_models.sh), and the NPU path of ResNet-50, MobileNetV2 and the encoder through
# the emulator (scripts/npu_models.sh), and the int8 path (scripts/int8_models.sh: pre-quantised ONNX against
# onnxruntime, --quantized-io, the profile-guided flow's accuracy; its QDQ models then go through the NPU too),
# the hostile-input suites, the docs' runnable command blocks, and 45 s of coverage-guided fuzzing per bundle-rt
# target and of the compiler target built without a sanitizer (scripts/fuzz.sh --compiler-smoke; the compiler
# target's corpus is also replayed by tests/tests/fuzz_corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
# A fresh clone gains nothing from incremental caches, which take gigabytes of a CI machine's disk.
export CARGO_INCREMENTAL=0
bash scripts/setup.sh
cargo build --workspace --bins
cargo build -p bundle-rt --no-default-features
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items
cargo test --workspace
# The Rust tests' scratch bundles (about 1.3 GB, ResNet-50 compiles among them) are not needed past this point.
rm -rf "${TMPDIR:-/tmp}/bundlec-tests"
cargo test -p bundle-rt --features capi
make -C examples/c-api run
# Built by the workspace build above; `cargo run -p rust-app` would resolve features anew and rebuild the compiler.
target/debug/rust-app
rm -rf target/pymodels target/wheels
python3 tests/py/gen_models.py target/pymodels
python3 tests/py/gen_resnet.py target/pymodels/resnet50_bn.onnx
python3 tests/py/gen_resnet.py target/pymodels/resnet50_folded.onnx --fold-bn
python3 tests/py/gen_resnet.py target/pymodels/resnet50_v2.onnx --v2
python3 tests/py/gen_mobilenet.py target/pymodels/mobilenetv2.onnx
python3 tests/py/gen_mobilenet.py target/pymodels/mobilenetv2_clip6_b2.onnx --relu6-form clip6 --batch 2
python3 tests/py/gen_encoder.py target/pymodels/encoder_ln17_erf.onnx
python3 tests/py/gen_encoder.py target/pymodels/encoder_decomposed_tanh_chains.onnx --ln-form decomposed --gelu tanh --shape-chains
python3 tests/py/gen_encoder.py target/pymodels/encoder_ln17_erf_chains_b1.onnx --shape-chains --batch 1 --layers 4
python3 tests/py/gen_encoder.py target/pymodels/encoder_s128_b1.onnx --seq 128 --batch 1
# The default: on x86-64 the fat bundle, whose AVX-512 set this machine runs where it has AVX-512.
python3 tests/py/check_ort.py --bundlec target/debug/bundlec target/pymodels/*.onnx
# The fat bundle's AVX2 set (under the AVX-512 set's lowering) on a CPU without AVX-512: qemu-user's TCG CPU.
rm -rf target/fatmodels && mkdir -p target/fatmodels
python3 tests/py/gen_resnet.py target/fatmodels/resnet50_96.onnx --fold-bn --size 96
python3 tests/py/check_ort.py --bundlec target/debug/bundlec --runner "qemu-x86_64 -cpu max" \
  target/pymodels/mobilenetv2.onnx target/pymodels/mobilenetv2_clip6_b2.onnx target/fatmodels/resnet50_96.onnx \
  target/pymodels/encoder_ln17_erf.onnx target/pymodels/encoder_ln17_erf_chains_b1.onnx target/pymodels/small_cnn.onnx \
  target/pymodels/conv_strided_dilated.onnx target/pymodels/matmul_div_bias_relu_gemv.onnx
# The AVX2 set under its own lowering (what --cpu x86-64-v3 and AVX2-only machines get).
python3 tests/py/check_ort.py --bundlec target/debug/bundlec --cpu x86-64-v3 target/pymodels/*.onnx
# CMake: examples/cmake builds a program around a model compiled at build time by cmake/bundlec.cmake.
python3 tests/py/cmake_check.py --bundlec target/debug/bundlec target/pymodels/small_cnn.onnx
# The Python package: the abi3 wheel built by maturin, installed into a fresh venv, checked against onnxruntime.
python3 -m maturin build -q --profile dev -m python/Cargo.toml --out target/wheels
python3 tests/py/wheel_check.py --wheel 'target/wheels/bundlec-*.whl' target/pymodels/small_cnn.onnx \
  target/pymodels/encoder_ln17_erf.onnx --npu target/pymodels/mobilenetv2.onnx
# The same models with this machine's widest kernels (AVX-512 GEMM epilogues, depthwise row kernels, GEMV).
python3 tests/py/check_ort.py --bundlec target/debug/bundlec --cpu native target/pymodels/*.onnx
# --precision bf16 where this CPU has AVX-512 BF16: the encoders against onnxruntime's f32 within bf16's error
# (measured 0.7-1.0% of the outputs' scale; the f32 bundles 1e-6), and ResNet-50 and MobileNetV2, whose bf16
# convolutions compound over 50 layers of random weights (measured 2.3% and 2.6%; top-1 on photos with real
# weights: scripts/torch_models.sh).
if grep -qw avx512_bf16 /proc/cpuinfo; then
  python3 tests/py/check_ort.py --bundlec target/debug/bundlec --cpu native/bf16 --tol 0.03 target/pymodels/encoder_*.onnx
  python3 tests/py/check_ort.py --bundlec target/debug/bundlec --cpu native/bf16 --tol 0.05 \
    target/pymodels/resnet50_folded.onnx target/pymodels/mobilenetv2.onnx
else
  echo "bf16 encoders and CNNs: SKIPPED (this CPU lacks AVX-512 BF16)"
fi
# aarch64: compiled for aarch64-unknown-linux-gnu, linked by the cross gcc, run under qemu-user, vs the host bundle.
python3 tests/py/cross_check.py --bundlec target/debug/bundlec target/pymodels/mobilenetv2.onnx \
  target/pymodels/small_cnn.onnx target/pymodels/encoder_ln17_erf.onnx target/pymodels/resnet50_folded.onnx
bash scripts/int8_models.sh
bash scripts/npu_models.sh
python3 tests/py/node_tests.py --bundlec target/debug/bundlec
python3 tests/py/light_models.py --bundlec target/debug/bundlec
python3 tests/py/hostile_models.py --bundlec target/debug/bundlec
python3 tests/py/doc_commands.py --bundlec target/debug/bundlec
python3 tests/py/hostile_files.py --bundlec target/debug/bundlec
python3 tests/py/hostile_limits.py --bundlec target/debug/bundlec
python3 examples/efficientnet/test_pth_to_onnx.py
python3 tests/py/report_check.py --bundlec target/debug/bundlec target/pymodels/resnet50_folded.onnx target/pymodels/mobilenetv2.onnx
bash scripts/fuzz.sh --compiler-smoke 45
bash scripts/torch_models.sh
