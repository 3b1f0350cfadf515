#!/usr/bin/env bash
# The NPU half of the test command: whole models compiled with --npu vnpu. For each model: the bundle's
# transactions are read by the independent reader written from docs/npu-transaction-format.md alone
# (tests/py/read_txn.py, plus its mutation self-test on the first file), disassembled by `bundlec inspect --txn`,
# the mixed recipe is validated against XRT's schema, and npu_check runs the model through the entry function
# (CPU fallback, bitwise equal to the CPU-only bundle), the op table, the BSP engine at 1 and 2 threads and the
# recipe Runner with the emulator (within 1e-4 of the CPU-only bundle). Expects target/pymodels from test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p bundlec-tests --bin npu_check
schema=../shared/reference/xrt-recipe.schema.json
first=1
for m in mobilenetv2 encoder_ln17_erf resnet50_folded; do
  model=target/pymodels/$m.onnx
  out=target/npu/$m
  rm -rf "$out"
  ./target/debug/bundlec compile "$model" -o "$out" --name "$m" --npu vnpu --npu-strict
  python3 tests/py/read_txn.py --quiet --device 6,4,1 "$out"/*.txn
  if [ $first = 1 ]; then
    python3 tests/py/read_txn.py --selftest "$(ls "$out"/*.txn | head -1)"
    first=0
  fi
  ./target/debug/bundlec inspect --txn "$(ls "$out"/*.txn | head -1)" | tail -1
  if [ -f "$schema" ]; then
    python3 -c "import json,jsonschema,sys; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))); print('recipe valid:', sys.argv[1])" "$out/$m.recipe.json" "$schema"
  fi
  ./target/debug/npu_check "$model"
done
