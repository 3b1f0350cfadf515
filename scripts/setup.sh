#!/usr/bin/env bash
# Installs what bundlec's tests and examples need on a fresh machine (idempotent): a C compiler, make, CMake, libpng
# (the resnet50 example), and the Python
# packages used as independent references (onnx 1.22.0 ships the ONNX node tests; onnxruntime is the oracle), and
# maturin, which builds the Python package's wheel.
set -euo pipefail
need=()
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v cmake >/dev/null || need+=(cmake)   # examples/cmake (tests/py/cmake_check.py)
command -v c++ >/dev/null || need+=(g++)   # libfuzzer-sys builds libFuzzer (scripts/fuzz.sh)
dpkg -s libpng-dev >/dev/null 2>&1 || need+=(libpng-dev)
command -v chromium >/dev/null || need+=(chromium)   # renders the --report page in tests/py/report_check.py
# tests/py/cross_check.py: aarch64 bundles linked by Debian's cross gcc and run under qemu-user.
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
# tests/py/wheel_check.py installs the Python wheel into a fresh venv (Debian's python3 needs python3-venv).
python3 -c "import ensurepip" 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need[@]}"
fi
python3 - <<'PY' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check "onnx==1.22.0" onnxruntime numpy jsonschema "maturin>=1.7,<2"
import onnx, onnxruntime, numpy, jsonschema, maturin
assert onnx.__version__ == "1.22.0"
PY
