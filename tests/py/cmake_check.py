#!/usr/bin/env python3
"""The CMake integration (cmake/bundlec.cmake), as a C project uses it: configures and builds examples/cmake, whose
bundlec_add_model compiles MODEL at build time into a static library with its header, runs the example program
on a random input and compares its outputs with onnxruntime on the same input (max |diff| / output range ≤ 1e-4,
SPEC §11's f32 tolerance for whole models).

usage: cmake_check.py --bundlec target/debug/bundlec MODEL.onnx   (one f32 input `x`, one f32 output `y`)
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", required=True)
    ap.add_argument("model")
    a = ap.parse_args()
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    (inp,), (out,) = sess.get_inputs(), sess.get_outputs()
    if (inp.name, out.name) != ("x", "y"):
        sys.exit(f"{a.model}: the example needs input `x` and output `y`, not {inp.name!r}, {out.name!r}")
    x = np.random.default_rng(0).standard_normal(inp.shape).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    with tempfile.TemporaryDirectory() as d:
        build = os.path.join(d, "build")
        for cmd in (["cmake", "-S", os.path.join(ROOT, "examples/cmake"), "-B", build,
                     f"-DMODEL={os.path.abspath(a.model)}", f"-DBUNDLEC_EXECUTABLE={os.path.abspath(a.bundlec)}"],
                    ["cmake", "--build", build]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
        x.tofile(os.path.join(d, "x.bin"))
        r = subprocess.run([os.path.join(build, "classify"), os.path.join(d, "x.bin"), os.path.join(d, "y.bin")],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"FAIL: classify exited {r.returncode}: {r.stderr}")
        got = np.fromfile(os.path.join(d, "y.bin"), dtype=np.float32).reshape(want.shape)
    err = float(np.max(np.abs(got - want)) / max(float(np.ptp(want)), 1e-30))
    verdict = "PASS" if err <= 1e-4 else "FAIL"
    print(f"{verdict} cmake example on {os.path.basename(a.model)}: outputs {list(want.shape)}, "
          f"max scaled error vs onnxruntime {err:.2e}")
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()
