#!/usr/bin/env python3
"""The Python package as a user gets it: a fresh virtual environment, `pip install` of the built wheel (which pulls
numpy), then, inside that environment, each model compiled with `bundlec.compile` (from a path and from bytes),
loaded with `bundlec.load`, run at 1 and 2 threads (and, for a model given with --npu, its NPU segments on the
emulator), and compared with onnxruntime (run by this interpreter, outside the venv) within the stated tolerance;
`python -m bundlec --version` and a usage error's exit code are checked too. Exit code 0 when everything passes.

usage: wheel_check.py --wheel target/wheels/bundlec-*.whl [--npu MODEL.onnx] MODEL.onnx ..."""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

# Runs inside the venv: argv = work dir, JSON list of cases. Writes outputs as .npy files and prints a report.
INNER = r'''
import json, os, subprocess, sys
import numpy as np
import bundlec
work, cases = sys.argv[1], json.loads(sys.argv[2])
assert bundlec.__file__.startswith(sys.prefix), ("bundlec imported from outside the venv", bundlec.__file__)
for c in cases:
    feeds = dict(np.load(os.path.join(work, c["id"] + "_in.npz")))
    model = c["model"] if c["by_path"] else open(c["model"], "rb").read()
    comp = bundlec.compile(model, name=c["id"], out_dir=os.path.join(work, c["id"]), npu=c["npu"])
    assert os.path.isfile(os.path.join(comp.dir, c["id"] + ".o")), comp.files
    assert [t.name for t in comp.inputs] == list(feeds), (comp.inputs, list(feeds))
    net = bundlec.load(comp.dir)
    assert net.npu_segments == len(comp.summary["npu_segments"])
    runs = [("1t", dict(threads=1)), ("2t", dict(threads=2))]
    if c["npu"]:
        assert net.npu_segments > 0, "no NPU segment"
        runs.append(("npu", dict(threads=1, npu=True)))
    for tag, kw in runs:
        out = net.run(feeds, **kw)
        for i, (name, arr) in enumerate(out.items()):
            np.save(os.path.join(work, f"{c['id']}_{tag}_{i}.npy"), arr)
    print(f"{c['id']}: {net!r}, cpu {comp.summary['cpu']}, {len(comp.summary['npu_segments'])} NPU segments")
    try:
        net.run({"no such input": 0})
        raise SystemExit("an unknown input was accepted")
    except bundlec.BundlecError as e:
        assert "no such input" in str(e), e
v = subprocess.run([sys.executable, "-m", "bundlec", "--version"], capture_output=True, text=True, check=True)
assert v.stdout.startswith("bundlec "), v.stdout
print("python -m bundlec --version:", v.stdout.strip())
u = subprocess.run([sys.executable, "-m", "bundlec", "compile"], capture_output=True, text=True)
assert u.returncode == 2 and "--name" in u.stderr, (u.returncode, u.stderr)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", required=True, help="the wheel (a glob is expanded)")
    ap.add_argument("--npu", action="append", default=[], help="a model also run with its NPU segments")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    wheels = sorted(glob.glob(a.wheel))
    if len(wheels) != 1:
        sys.exit(f"--wheel {a.wheel}: expected one wheel, found {wheels}")
    with tempfile.TemporaryDirectory(prefix="bundlec-wheel-") as work:
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheels[0]], check=True)
        rng = np.random.default_rng(7)
        cases, refs = [], {}
        for i, model in enumerate(a.models + a.npu):
            cid = f"m{i}_" + "".join(ch if ch.isalnum() else "_" for ch in os.path.basename(model)[:-5])
            m = onnx.load(model)
            inits = {t.name for t in m.graph.initializer}
            feeds = {}
            for vi in m.graph.input:
                if vi.name in inits:
                    continue
                tt = vi.type.tensor_type
                shape = [d.dim_value for d in tt.shape.dim]
                dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
                if np.issubdtype(dt, np.floating):
                    feeds[vi.name] = rng.standard_normal(shape).astype(dt)
                else:  # token ids, or 0/1 for a mask
                    feeds[vi.name] = rng.integers(0, 2 if "mask" in vi.name.lower() else 64, shape).astype(dt)
            np.savez(os.path.join(work, cid + "_in.npz"), **feeds)
            refs[cid] = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
            cases.append(dict(id=cid, model=os.path.abspath(model), by_path=i % 2 == 0,
                              npu="vnpu" if model in a.npu else None))
        r = subprocess.run([py, "-c", INNER, work, json.dumps(cases)], capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print(r.stderr)
            sys.exit("FAIL: the script in the venv failed")
        failed = 0
        for c in cases:
            for tag in ["1t", "2t"] + (["npu"] if c["npu"] else []):
                worst = 0.0
                for j, ref in enumerate(refs[c["id"]]):
                    got = np.load(os.path.join(work, f"{c['id']}_{tag}_{j}.npy"))
                    assert got.shape == ref.shape, (got.shape, ref.shape)
                    d = np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref.astype(np.float64)))
                    worst = max(worst, float(d.max()))
                ok = worst <= a.tol
                failed += not ok
                print(f"{'PASS' if ok else 'FAIL'} {c['model']} ({tag}, "
                      f"{'path' if c['by_path'] else 'bytes'}): max scaled error {worst:.2e} (tol {a.tol:g})")
        sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
