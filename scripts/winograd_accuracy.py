#!/usr/bin/env python3
"""Accuracy of the Winograd forms (`--winograd`) per 3x3 layer, against a float64 reference: for each layer shape
(channels in and out, plane) a Conv 3x3 (pad 1, bias) with Kaiming-scaled weights over a ReLU'd standard normal
input is compiled with bundlec under --winograd off, f2, f4 and auto and run (tests/c/run_bundle.c), and run by
onnxruntime; each output is compared with the same convolution computed in float64 (numpy, from the same f32
inputs and weights). Prints the RMS and maximum error of each, and each form's RMS error over onnxruntime's.

usage: winograd_accuracy.py [--bundlec PATH] [--layers C,M,HW ...]"""
import argparse, os, subprocess, sys, tempfile
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h, TensorProto as T, numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ResNet-50's, Wide-ResNet-50-2's and Inception's 3x3 layer shapes (channels in, out, plane side).
LAYERS = [(64, 64, 56), (128, 128, 56), (256, 256, 56), (128, 128, 28), (256, 256, 28), (256, 256, 14),
          (512, 512, 14), (512, 512, 7)]
MODES = ["off", "f2", "f4", "auto"]


def model(c, m, hw, rng):
    w = (rng.standard_normal((m, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    b = (rng.standard_normal(m) * 0.1).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], "conv3x3",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, c, hw, hw])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, m, hw, hw])],
                     [nh.from_array(w, "w"), nh.from_array(b, "b")])
    mp = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    mp.ir_version = 8
    return mp, w, b


def reference(x, w, b):
    """The convolution in float64: im2col over the zero-padded input, one matrix product."""
    c, hw = x.shape[1], x.shape[2]
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, ky:ky + hw, kx:kx + hw] for ky in range(3) for kx in range(3)], axis=1)
    cols = cols.reshape(c * 9, hw * hw)
    y = w.astype(np.float64).reshape(w.shape[0], c * 9) @ cols + b.astype(np.float64)[:, None]
    return y.reshape(1, w.shape[0], hw, hw)


def run_bundlec(bundlec, path, x, mode, d):
    name = f"w_{mode}"
    out = os.path.join(d, mode)
    subprocess.run([bundlec, "compile", path, "-o", out, "--name", name, "--winograd", mode], check=True,
                   capture_output=True, text=True)
    exe = os.path.join(out, "run")
    subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", out, os.path.join(ROOT, "tests", "c", "run_bundle.c"),
                    os.path.join(out, name + ".o"), "-o", exe], check=True, capture_output=True, text=True)
    xin, yout = os.path.join(out, "x.bin"), os.path.join(out, "y.bin")
    x.tofile(xin)
    subprocess.run([exe, os.path.join(out, name + ".weights"), xin, yout], check=True, capture_output=True)
    return np.fromfile(yout, dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--layers", nargs="*", help="C,M,HW triples")
    args = ap.parse_args()
    layers = [tuple(map(int, s.split(","))) for s in args.layers] if args.layers else LAYERS
    rng = np.random.default_rng(7)
    print("| layer (C, M, plane) | onnxruntime rms | " + " | ".join(f"{m} rms | {m} max | {m} / ort"
                                                              for m in MODES) + " |")
    print("|---|---|" + "---|---|---|" * len(MODES))
    for c, m, hw in layers:
        mp, w, b = model(c, m, hw, rng)
        x = np.maximum(rng.standard_normal((1, c, hw, hw)), 0).astype(np.float32)
        ref = reference(x, w, b).ravel()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "conv.onnx")
            onnx.save(mp, path)
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            o = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
            rms = lambda y: float(np.sqrt(np.mean((y.astype(np.float64).ravel() - ref) ** 2)))
            ort_rms = rms(o)
            cells = []
            for mode in MODES:
                y = run_bundlec(args.bundlec, path, x, mode, d)
                e = rms(y)
                cells.append(f"{e:.2e} | {np.abs(y.astype(np.float64) - ref).max():.2e} | {e / ort_rms:.2f}")
        print(f"| {c}, {m}, {hw}x{hw} | {ort_rms:.2e} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
