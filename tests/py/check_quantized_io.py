#!/usr/bin/env python3
"""`--quantized-io` against the f32-I/O bundle of the same quantised model: the integer bundle, fed the input
quantised with the scale and zero point its header gives, must return integers that dequantise (with the header's
output scale and zero point) to exactly the f32 bundle's output — the f32 bundle's first op is that QuantizeLinear
and its last that DequantizeLinear.

usage: check_quantized_io.py [--bundlec PATH] MODEL.onnx ...   (single-input, single-output QDQ models)"""
import argparse, os, re, subprocess, sys, tempfile
import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NP = {"u8": np.uint8, "i8": np.int8}


def build(bundlec, model, d, name, extra):
    subprocess.run([bundlec, "compile", model, "-o", d, "--name", name] + extra, check=True, capture_output=True)
    exe = os.path.join(d, name + "_run")
    subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests", "c", "run_bundle.c"),
                    os.path.join(d, name + ".o"), "-o", exe], check=True, capture_output=True)
    return exe, open(os.path.join(d, name + ".h")).read()


def io_params(header, prefix):
    """(dtype, scale, zero point) of the first input and output from the header comments and macros."""
    out = []
    for role in ("input", "output"):
        m = re.search(rf"/\* {role} '([^']*)': (\w+) [0-9x]+ \*/", header)
        macro = f"{prefix}_" + re.sub(r"[^A-Za-z0-9]", "_", m.group(1)).upper()
        scale = float(re.search(rf"#define {macro}_SCALE (\S+)f", header).group(1))
        zp = int(re.search(rf"#define {macro}_ZERO_POINT (-?\d+)", header).group(1))
        out.append((NP[m.group(2)], scale, zp))
    return out


def check(bundlec, model):
    m = onnx.load(model)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        f_exe, _ = build(bundlec, model, d, "qio_f", [])
        q_exe, hdr = build(bundlec, model, d, "qio_q", ["--quantized-io"])
        (idt, si, zi), (odt, so, zo) = io_params(hdr, "QIO_Q")
        info = np.iinfo(idt)
        # f32 division as QuantizeLinear does it; numpy rounds half to even.
        xq = np.clip(np.round(x / np.float32(si)) + zi, info.min, info.max).astype(idt)
        paths = {k: os.path.join(d, k) for k in ("x.bin", "xq.bin", "y.bin", "yq.bin")}
        x.tofile(paths["x.bin"])
        xq.tofile(paths["xq.bin"])
        wf, wq = os.path.join(d, "qio_f.weights"), os.path.join(d, "qio_q.weights")
        subprocess.run([f_exe, wf, paths["x.bin"], paths["y.bin"]], check=True, capture_output=True)
        subprocess.run([q_exe, wq, paths["xq.bin"], paths["yq.bin"]], check=True, capture_output=True)
        y = np.fromfile(paths["y.bin"], dtype=np.float32)
        yq = np.fromfile(paths["yq.bin"], dtype=odt)
        deq = (yq.astype(np.int32) - zo).astype(np.float32) * np.float32(so)
        return int(np.count_nonzero(deq.view(np.uint32) != y.view(np.uint32))), y.size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    failed = 0
    for model in a.models:
        diff, n = check(a.bundlec, model)
        print(f"{'PASS' if diff == 0 else 'FAIL'} {model}: {diff} of {n} outputs differ (--quantized-io vs f32 I/O)")
        failed += diff != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
