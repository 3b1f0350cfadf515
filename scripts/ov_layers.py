#!/usr/bin/env python3
"""OpenVINO's own per-node times for one model, to set beside `profile_layers`: compiles MODEL on the CPU
plugin with its performance counters on (`PERF_COUNT`), runs warm-up inferences, then averages each node's
real time over RUNS inferences of one random input (bench.py's: a standard normal, seed 0) and prints the
slowest nodes with the kernel OpenVINO chose for them (`brgconv_avx512_I8`, `jit_uni_I8`, ...) and the total.
"""

import argparse
import collections

import numpy as np
import openvino as ov


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--precision", default="f32", help="INFERENCE_PRECISION_HINT: f32 or bf16")
    a = ap.parse_args()
    core = ov.Core()
    model = core.read_model(a.model)
    cfg = {
        "INFERENCE_NUM_THREADS": a.threads,
        "NUM_STREAMS": 1,
        "PERF_COUNT": True,
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": a.precision,
    }
    req = core.compile_model(model, "CPU", cfg).create_infer_request()
    shape = [int(d) for d in model.inputs[0].shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for _ in range(max(5, a.runs // 2)):
        req.infer({0: x})
    times = collections.defaultdict(float)
    kinds = {}
    for _ in range(a.runs):
        req.infer({0: x})
        for p in req.profiling_info:
            times[p.node_name] += p.real_time.total_seconds() * 1e6 / a.runs
            kinds[p.node_name] = (p.node_type, p.exec_type)
    print(f"OpenVINO {ov.get_version()}, {a.threads} thread(s), {a.precision}: {sum(times.values()):.1f} µs in "
          f"{len(times)} nodes (mean of {a.runs} runs)")
    print("| µs | node type | kernel | node |")
    print("|---|---|---|---|")
    for name, t in sorted(times.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"| {t:.1f} | {kinds[name][0]} | {kinds[name][1]} | {name} |")


if __name__ == "__main__":
    main()
