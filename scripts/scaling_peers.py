#!/usr/bin/env python3
"""The peers' side of a thread-scaling run: onnxruntime (and OpenVINO where installed) at the thread counts that
scripts/scaling_run.sh measured bundle-rt's engine at, on the same inputs, and the ratios.

    python3 scripts/scaling_peers.py [--dir target/scaling] [--threads 1 2 4 8 16] [--rounds 3] \\
        [--engine TABLE.md] MODEL...

For each MODEL (packed into DIR by scripts/scaling_pack.py, so `s_<stem>` is its folder): regenerates the pack's
inputs (bench.py's feed with the same seed, bitwise the in*.bin files; checked), times each peer at each thread
count in a fresh child process per round (bench.py's PEER_CHILD: warm-up for 200 ms, median of --reps inferences;
the median over rounds counts), and compares onnxruntime's outputs (1 thread) with the engine's 1-thread outputs
that scaling_run.sh left in the folder (max |difference|, SPEC's 1e-4 relative-to-range tolerance). With
--engine, the file holding scaling_run.sh's table, the rows also give bundlec's median and the ratio
bundlec / faster peer at each thread count. Needs numpy, onnx and onnxruntime."""
import argparse
import importlib.util
import os
import re
import statistics
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import NP, ROOT, peer_time  # noqa: E402
from scaling_pack import pack_feeds, pack_name  # noqa: E402


def engine_table(path):
    """scaling_run.sh's rows: {name: {threads: ms}}."""
    out = {}
    header = None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "model":
            header = [int(m.group(1)) if (m := re.fullmatch(r"(\d+)t ms", c)) else None for c in cells]
        elif header and cells and cells[0].startswith("s_"):
            out[cells[0]] = {t: float(c) for t, c in zip(header, cells) if t and re.fullmatch(r"[0-9.]+", c)}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+")
    p.add_argument("--dir", default=os.path.join(ROOT, "target/scaling"))
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--engine", help="scaling_run.sh's output, for bundlec's column and the ratios")
    a = p.parse_args()
    threads = [t for t in a.threads if t <= os.cpu_count()]
    peers = ["ort"] + (["ov"] if importlib.util.find_spec("openvino") else [])
    engine = engine_table(a.engine) if a.engine else {}
    tmp = tempfile.mkdtemp()
    print(f"peers: {', '.join(peers)} (onnxruntime {ort.__version__}); rounds {a.rounds}, {a.reps} timed runs each")
    cols = "".join(f" {t}t {peer} ms |" for t in threads for peer in peers)
    ratio_cols = "".join(f" {t}t ratio |" for t in threads) if engine else ""
    print(f"| model | max abs diff vs ort (range) |{cols}{ratio_cols}")
    print("|---|---|" + "---|" * (len(threads) * len(peers) + (len(threads) if engine else 0)))
    for model in a.models:
        name = pack_name(model)
        d = os.path.join(a.dir, name)
        feeds, files = {}, []
        for i, (vi, x) in enumerate(pack_feeds(onnx.load(model, load_external_data=False))):
            packed = np.fromfile(os.path.join(d, f"in{i}.bin"), dtype=NP[vi.type.tensor_type.elem_type])
            if not np.array_equal(packed, x.ravel()):
                sys.exit(f"{name}: in{i}.bin is not the feed this script makes (packed by another version?)")
            feeds[vi.name] = x
            f = os.path.join(tmp, f"{name}_{i}.npy")
            np.save(f, x)
            files.append((vi.name, f))
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        diffs = []
        for i, want in enumerate(sess.run(None, feeds)):
            got_path = os.path.join(d, f"out_t1_{i}.bin")
            if not os.path.exists(got_path):
                diffs.append("no engine output")
                continue
            got = np.fromfile(got_path, dtype=want.dtype)
            if got.size != want.size:
                diffs.append(f"size {got.size} vs {want.size}")
                continue
            diff = float(np.max(np.abs(got - want.ravel()))) if want.size else 0.0
            rng_ = float(np.ptp(want)) if want.size else 0.0
            ok = diff <= 1e-4 * max(rng_, 1.0)
            diffs.append(f"{diff:.2e} ({rng_:.3g}){'' if ok else ' OVER TOLERANCE'}")
        del sess
        times = {(peer, t): [] for peer in peers for t in threads}
        for _ in range(a.rounds):
            for t in threads:
                for peer in peers:
                    times[(peer, t)].append(peer_time((peer, t), model, files, a.reps))
        med = {k: statistics.median(v) for k, v in times.items()}
        row = f"| {name} | {'; '.join(diffs)} |" + "".join(f" {med[(peer, t)]:.2f} |" for t in threads for peer in peers)
        if engine:
            mine = engine.get(name, {})
            row += "".join(f" {mine[t] / min(med[(peer, t)] for peer in peers):.2f} |" if t in mine else " n/a |"
                           for t in threads)
        print(row)


if __name__ == "__main__":
    main()
