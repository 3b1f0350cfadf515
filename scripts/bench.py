#!/usr/bin/env python3
"""Benchmark table: bundlec bundles (linked into tests/c/run_bundle.c with cc, entry function, 1 thread), one per
`--cpu` kernel set, against onnxruntime (1 and 2 threads) and OpenVINO (CPU plugin, f32, latency hint, 1 and 2
threads; skipped with a note when `openvino` is not installed), interleaved in one run on the same inputs. Prints
model, bundlec variant, median/min/max, the peers' medians, the ratio to the faster 1-thread peer, compile time,
first-result time, code and weights size, activation bytes and planner efficiency, after the machine's CPU model.

usage: bench.py [--runs 10] [--cpu x86-64-v3,native] [--bundlec target/debug/bundlec] MODEL.onnx ..."""
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


def openvino_models(model, feeds):
    """Compiled OpenVINO models at 1 and 2 threads, or {} when OpenVINO is not installed."""
    try:
        import openvino as ov
    except ImportError:
        return {}
    core = ov.Core()
    out = {}
    for th in (1, 2):
        cm = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": th, "PERFORMANCE_HINT": "LATENCY",
                                               "INFERENCE_PRECISION_HINT": "f32"})
        req = cm.create_infer_request()
        req.infer(feeds)
        out[th] = req
    return out


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def bench(model, bundlec, runs, cpus):
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {vi.name: feed(vi, rng) for vi in m.graph.input if vi.name not in inits}
    name = "b_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(model))[0])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        variants = []
        for cpu in cpus:
            vname = name + "_" + re.sub(r"\W", "_", cpu)
            t = time.perf_counter()
            subprocess.run([bundlec, "compile", model, "-o", d, "--name", vname, "--cpu", cpu], check=True, capture_output=True)
            compile_s = time.perf_counter() - t
            exe = os.path.join(d, "run_" + vname)
            subprocess.run(["cc", "-O2", f"-DBUNDLE={vname}", "-I", d, os.path.join(ROOT, "tests/c/run_bundle.c"),
                            os.path.join(d, vname + ".o"), "-o", exe], check=True)
            hdr = open(os.path.join(d, vname + ".h")).read()
            variants.append(dict(cpu=cpu, name=vname, exe=exe, compile_s=compile_s,
                                 act=int(re.search(r"_ACTIVATIONS_MEM_SIZE (\d+)", hdr).group(1)),
                                 eff=float(re.search(r"allocation efficiency ([0-9.]+)", hdr).group(1)),
                                 code=os.path.getsize(os.path.join(d, vname + ".o")),
                                 wts=os.path.getsize(os.path.join(d, vname + ".weights")), times=[]))
        ins = []
        for i, v in enumerate(feeds.values()):
            p = os.path.join(d, f"in{i}.bin")
            v.tofile(p)
            ins.append(p)
        outs = [os.path.join(d, f"out{i}.bin") for i in range(len(m.graph.output))]
        for v in variants:
            t0 = time.perf_counter()
            subprocess.run([v["exe"], os.path.join(d, v["name"] + ".weights")] + ins + outs, check=True, capture_output=True)
            v["first"] = time.perf_counter() - t0
        sessions = {}
        for threads in (1, 2):
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sessions[threads] = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
            sessions[threads].run(None, feeds)
        ovm = openvino_models(model, feeds)
        peer = {("ort", 1): [], ("ort", 2): []}
        peer.update({("ov", th): [] for th in ovm})
        env = dict(os.environ, BUNDLE_REPEAT="1")
        for _ in range(runs):  # interleave so clock drift hits everyone alike
            for v in variants:
                r = subprocess.run([v["exe"], os.path.join(d, v["name"] + ".weights")] + ins + outs, check=True,
                                   capture_output=True, text=True, env=env)
                v["times"] += [float(x) for x in re.findall(r"ran in ([0-9.]+) ms", r.stdout)]
            for th, sess in sessions.items():
                t = time.perf_counter()
                sess.run(None, feeds)
                peer[("ort", th)].append((time.perf_counter() - t) * 1e3)
            for th, req in ovm.items():
                t = time.perf_counter()
                req.infer(feeds)
                peer[("ov", th)].append((time.perf_counter() - t) * 1e3)
        pm = {k: statistics.median(x) for k, x in peer.items()}
        best1 = min(pm[("ort", 1)], pm.get(("ov", 1), float("inf")))
        for v in variants:
            med = statistics.median(v["times"])
            rows.append((os.path.basename(model), v["cpu"], med, min(v["times"]), max(v["times"]), pm[("ort", 1)],
                         pm[("ort", 2)], pm.get(("ov", 1), float("nan")), pm.get(("ov", 2), float("nan")), med / best1,
                         v["compile_s"], v["first"] * 1e3, v["code"], v["wts"], v["act"], v["eff"]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
    ap.add_argument("--cpu", default="x86-64-v3,native", help="comma-separated --cpu values to compare")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    print(f"CPU: {cpu_model()}; bundlec: entry function, 1 thread; peers: onnxruntime {ort.__version__}", end="")
    try:
        import openvino
        print(f", OpenVINO {openvino.__version__}")
    except ImportError:
        print(" (OpenVINO not installed: pip install openvino)")
    print("| model | bundlec --cpu | median ms | min | max | ort 1t | ort 2t | OpenVINO 1t | OpenVINO 2t | ratio to best 1t peer | compile s | first result ms | code B | weights B | activations B | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in a.models:
        for r in bench(m, a.bundlec, a.runs, a.cpu.split(",")):
            print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {} | {} | {} | {:.3f} |".format(*r))


if __name__ == "__main__":
    main()
