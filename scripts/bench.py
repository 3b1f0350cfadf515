#!/usr/bin/env python3
"""Benchmark table: bundlec bundles (linked into tests/c/run_bundle.c with cc) against onnxruntime, interleaved
in one run on the same inputs. Prints model, threads, bundlec median/min/max, peer median, ratio, compile time,
code and weights size, activation bytes and planner efficiency.

usage: bench.py [--runs 10] [--bundlec target/debug/bundlec] MODEL.onnx ..."""
import argparse, os, re, statistics, subprocess, tempfile, time
import numpy as np, onnx, onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_}


def feed(vi, rng):
    """Random input: floats N(0, 1); integers small non-negative ids (0/1 for masks)."""
    t = vi.type.tensor_type
    shape, dt = [d.dim_value for d in t.shape.dim], NP[t.elem_type]
    if dt == np.float32:
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(0, 2 if "mask" in vi.name.lower() or dt == np.bool_ else 64, shape).astype(dt)


def bench(model, bundlec, runs):
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {vi.name: feed(vi, rng) for vi in m.graph.input if vi.name not in inits}
    name = "b_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(model))[0])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        subprocess.run([bundlec, "compile", model, "-o", d, "--name", name], check=True, capture_output=True)
        compile_s = time.perf_counter() - t
        exe = os.path.join(d, "run")
        subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests/c/run_bundle.c"),
                        os.path.join(d, name + ".o"), "-o", exe], check=True)
        ins = []
        for i, v in enumerate(feeds.values()):
            p = os.path.join(d, f"in{i}.bin")
            v.tofile(p)
            ins.append(p)
        outs = [os.path.join(d, f"out{i}.bin") for i in range(len(m.graph.output))]
        hdr = open(os.path.join(d, name + ".h")).read()
        act = int(re.search(r"_ACTIVATIONS_MEM_SIZE (\d+)", hdr).group(1))
        eff = float(re.search(r"allocation efficiency ([0-9.]+)", hdr).group(1))
        code = os.path.getsize(os.path.join(d, name + ".o"))
        wts = os.path.getsize(os.path.join(d, name + ".weights"))
        t0 = time.perf_counter()
        subprocess.run([exe, os.path.join(d, name + ".weights")] + ins + outs, check=True, capture_output=True)
        first = time.perf_counter() - t0
        sessions = {}
        for threads in (1, 2):
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sessions[threads] = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
            sessions[threads].run(None, feeds)
        ours, peer = [], {1: [], 2: []}
        env = dict(os.environ, BUNDLE_REPEAT="1")
        for _ in range(runs):  # interleave so clock drift hits both alike
            r = subprocess.run([exe, os.path.join(d, name + ".weights")] + ins + outs, check=True, capture_output=True, text=True, env=env)
            ours += [float(x) for x in re.findall(r"ran in ([0-9.]+) ms", r.stdout)]
            for th, s in sessions.items():
                t = time.perf_counter()
                s.run(None, feeds)
                peer[th].append((time.perf_counter() - t) * 1e3)
        med = statistics.median(ours)
        for th in (1, 2):
            pm = statistics.median(peer[th])
            rows.append((os.path.basename(model), f"1 vs ort {th}", med, min(ours), max(ours), pm, med / pm, compile_s, first * 1e3, code, wts, act, eff))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    print("| model | threads | bundlec median ms | min | max | onnxruntime median ms | ratio | compile s | first result ms | code B | weights B | activations B | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in a.models:
        for r in bench(m, a.bundlec, a.runs):
            print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {} | {} | {} | {:.3f} |".format(*r))


if __name__ == "__main__":
    main()
