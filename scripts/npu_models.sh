#!/usr/bin/env bash
# The NPU half of the test command: whole models compiled with --npu vnpu. For each model: the bundle's
# transactions are read by the independent reader written from docs/npu-transaction-format.md alone
# (tests/py/read_txn.py, plus its mutation self-test on the first file) and by the second one written from aie-rt's
# and mlir-aie's public sources alone (tests/py/read_aie_txn.py --check: generation, tiles, DDR_PATCH onto shim BD
# word 1; its self-test decodes mlir-aie's published instruction words), disassembled by `bundlec inspect --txn`,
# the partition cache's segments are parsed as VAIP's MetaDefProto with protobuf (tests/py/check_metadef.py),
# the mixed recipe is validated against XRT's schema, and npu_check runs the model through the entry function
# (CPU fallback, bitwise equal to the CPU-only bundle), the op table, the BSP engine at 1 and 2 threads and the
# recipe Runner with the emulator (within 1e-4 of the CPU-only bundle); then the int8 QDQ models bit for bit.
# Expects target/pymodels from test.sh (and target/pymodels/q from scripts/int8_models.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p bundlec-tests --bin npu_check
schema=../shared/reference/xrt-recipe.schema.json
first=1
mkdir -p target/npu
for m in mobilenetv2 encoder_ln17_erf resnet50_folded; do
  model=target/pymodels/$m.onnx
  out=target/npu/$m
  rm -rf "$out"
  ./target/debug/bundlec compile "$model" -o "$out" --name "$m" --npu vnpu --npu-strict \
    --partition-cache "$out.partition.json"
  python3 tests/py/check_metadef.py "$out.partition.json"
  python3 tests/py/read_txn.py --quiet --device 6,4,1 "$out"/*.txn
  python3 tests/py/read_aie_txn.py --check --quiet "$out"/*.txn
  if [ $first = 1 ]; then
    python3 tests/py/read_txn.py --selftest "$(ls "$out"/*.txn | head -1)"
    python3 tests/py/read_aie_txn.py --selftest
    first=0
  fi
  ./target/debug/bundlec inspect --txn "$(ls "$out"/*.txn | head -1)" | tail -1
  if [ -f "$schema" ]; then
    python3 -c "import json,jsonschema,sys; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))); print('recipe valid:', sys.argv[1])" "$out/$m.recipe.json" "$schema"
  fi
  ./target/debug/npu_check "$model"
done
# int8: QDQ models (scripts/int8_models.sh writes them) through the virtual NPU's int8 ops must give the same
# bytes as the CPU int8 bundle (--tol 0: bit for bit).
for model in target/pymodels/q/qdq_cnn.onnx target/pymodels/q/mobilenetv2_qdq.onnx target/pymodels/q/q_qlinearadd.onnx \
  target/pymodels/q/q_qlinearmul.onnx; do
  if [ -f "$model" ]; then
    q=target/npu/int8_$(basename "$model" .onnx)
    rm -rf "$q"
    ./target/debug/bundlec compile "$model" -o "$q" --name q --npu vnpu --npu-min-gain -1 >/dev/null
    python3 tests/py/read_txn.py --quiet --device 6,4,1 "$q"/*.txn
    python3 tests/py/read_aie_txn.py --check --quiet "$q"/*.txn
    ./target/debug/npu_check "$model" --min-gain -1 --tol 0
  else
    echo "npu int8: $model missing (run scripts/int8_models.sh first)" >&2
    exit 1
  fi
done
