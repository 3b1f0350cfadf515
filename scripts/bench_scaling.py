#!/usr/bin/env python3
"""Compile-time scaling: chains of 1k to 100k trivial nodes (Add of the running value and the input, 1x64 f32),
compiled by bundlec and loaded by onnxruntime (session creation with its default graph optimisations, the step
that matches a compile) and OpenVINO (read + compile_model, when installed), in the same run. Each row gives the
wall time of one compile and its stages (`bundlec -v`), the time per node, and bundlec's time over the peer's.
A compiler whose lowering or planning is quadratic shows it here: bundlec's time per node must stay flat within
2x from 1k to 100k nodes (the last line says whether it did).

usage: bench_scaling.py [--bundlec target/release/bundlec] [--sizes 1000,3000,10000,30000,100000]
(also run by `scripts/bench.py --scaling`)"""
import argparse, os, platform, re, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGE = re.compile(r"^\s+([a-z_+]+)\s+([0-9.]+) ms$")


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def chain(path, n):
    import onnx
    from onnx import helper as h, TensorProto as T
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(h.make_node("Add", [prev, "x"], [out], name=f"n{i}"))
        prev = out
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 64])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def bundlec_time(bundlec, model, out):
    t = time.perf_counter()
    r = subprocess.run([bundlec, "compile", model, "-o", out, "--name", "chain", "-v"], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"bundlec failed on {model}:\n{r.stderr[-2000:]}")
    stages = {m.group(1): float(m.group(2)) for m in map(STAGE.match, r.stderr.splitlines()) if m}
    return wall, stages


def ort_time(model):
    code = ("import sys, time, onnxruntime as ort; t = time.perf_counter(); "
            "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); print(time.perf_counter() - t)")
    r = subprocess.run([sys.executable, "-c", code, model], capture_output=True, text=True)
    return float(r.stdout) if r.returncode == 0 else None


def ov_time(model):
    code = ("import sys, time, openvino as ov; c = ov.Core(); t = time.perf_counter(); "
            "c.compile_model(c.read_model(sys.argv[1]), 'CPU'); print(time.perf_counter() - t)")
    r = subprocess.run([sys.executable, "-c", code, model], capture_output=True, text=True)
    return float(r.stdout) if r.returncode == 0 else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/release/bundlec"))
    ap.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    print(f"compile-time scaling on {cpu_model()} ({os.cpu_count()} CPUs), bundlec {a.bundlec}")
    print("| nodes | bundlec s | us/node | import | passes | lower+plan | codegen | emit (ms) | onnxruntime s | vs ort | OpenVINO s | vs OpenVINO |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    per_node = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            m = os.path.join(d, f"chain{n}.onnx")
            chain(m, n)
            wall, st = bundlec_time(a.bundlec, m, os.path.join(d, "out"))
            o, v = ort_time(m), ov_time(m)
            per_node.append(wall / n)
            ratio = lambda p: "n/a" if not p else f"{wall / p:.2f}"
            fmt = lambda p: "n/a" if p is None else f"{p:.2f}"
            print(f"| {n} | {wall:.2f} | {wall / n * 1e6:.0f} | " +
                  " | ".join(f"{st.get(k, 0):.0f}" for k in ("import", "passes", "lower+plan", "codegen", "emit")) +
                  f" | {fmt(o)} | {ratio(o)} | {fmt(v)} | {ratio(v)} |", flush=True)
            os.remove(m)
    spread = max(per_node) / min(per_node)
    print(f"time per node, largest over smallest: {spread:.2f}x ({'flat within 2x' if spread <= 2 else 'NOT flat within 2x'})")
    return 0 if spread <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
