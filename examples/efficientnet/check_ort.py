#!/usr/bin/env python3
"""Compares the effnet bundle's logits with onnxruntime on exactly the same inputs.

`classify --dump FILE` writes one record per image, in command-line order: the input tensor (1x3x224x224 f32)
then the bundle's logits (1x1000 f32), raw little-endian. This script runs each recorded input through the ONNX
model in onnxruntime and requires, per image, max |bundle - onnxruntime| <= --tol (default 1e-3) over the logits
and the same top-1 class. Exit status 1 on any failure.

usage: check_ort.py MODEL.onnx DUMP [NAME...]   (NAMEs label the records in the printout)"""
import argparse
import os
import sys

import numpy as np
import onnxruntime as ort

INPUT, CLASSES = 3 * 224 * 224, 1000


def main():
    ap = argparse.ArgumentParser(description="bundle vs onnxruntime on classify --dump records")
    ap.add_argument("model")
    ap.add_argument("dump")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args()
    raw = np.fromfile(a.dump, dtype="<f4")
    rec = INPUT + CLASSES
    if raw.size == 0 or raw.size % rec:
        sys.exit(f"check_ort: error: {a.dump} holds {raw.size} floats, not a positive multiple of {rec}")
    raw = raw.reshape(-1, rec)
    names = a.names + [f"record {i}" for i in range(len(a.names), len(raw))]
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    worst, bad = 0.0, 0
    for name, r in zip(names, raw):
        x, got = r[:INPUT].reshape(1, 3, 224, 224), r[INPUT:]
        ref = sess.run(["logits"], {"input": x})[0].reshape(-1)
        diff = float(np.abs(got - ref).max())
        worst = max(worst, diff)
        same = int(got.argmax()) == int(ref.argmax())
        ok = diff <= a.tol and same and np.isfinite(got).all()
        bad += not ok
        print(f"  {os.path.basename(name):22s} max |bundle - onnxruntime| {diff:.2e}  top-1 bundle {int(got.argmax()):4d} "
              f"onnxruntime {int(ref.argmax()):4d}  {'ok' if ok else 'FAIL'}")
    print(f"{len(raw)} images, worst max abs diff {worst:.2e} (tolerance {a.tol:g}): {'FAIL' if bad else 'ok'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
