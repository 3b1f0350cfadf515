#!/usr/bin/env python3
"""Cross-target check: each model is compiled for the host and for another target (default
aarch64-unknown-linux-gnu), the target bundle is linked with tests/c/run_bundle.c by the cross C compiler
(Debian's aarch64-linux-gnu-gcc) and run under qemu-user, and its outputs are compared with the host bundle's and
onnxruntime's on the same random inputs (max error scaled by max(1, |reference|) within --tol). Exits 1 on any
failure; prints SKIPPED and exits 0 when the cross compiler or qemu is missing (scripts/setup.sh installs both).

usage: cross_check.py [--bundlec target/debug/bundlec] [--target TRIPLE] [--cc CC] [--qemu QEMU] MODEL.onnx ..."""
import argparse, os, shutil, subprocess, sys, tempfile
import numpy as np, onnx, onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_}
DT = {np.float32: "f32", np.int32: "i32", np.int64: "i64", np.bool_: "bool"}

ap = argparse.ArgumentParser()
ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
ap.add_argument("--target", default="aarch64-unknown-linux-gnu")
ap.add_argument("--cc", default="aarch64-linux-gnu-gcc")
ap.add_argument("--qemu", default="qemu-aarch64 -L /usr/aarch64-linux-gnu")
ap.add_argument("--tol", type=float, default=1e-4)
ap.add_argument("models", nargs="+")
a = ap.parse_args()
missing = [t for t in (a.cc, a.qemu.split()[0]) if not shutil.which(t)]
if missing:
    print(f"SKIPPED: cross check for {a.target}: {', '.join(missing)} not installed (scripts/setup.sh installs them)")
    sys.exit(0)


def build(model, d, name, feeds, target, cc):
    cmd = [a.bundlec, "compile", model, "-o", d, "--name", name]
    for k, v in feeds.items():
        cmd += ["--input", f"{k}:{'x'.join(map(str, v.shape))}x{DT[v.dtype.type]}"]
    if target:
        cmd += ["--target", target]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    exe = os.path.join(d, "run_" + name)
    subprocess.run([cc, "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200112L", f"-DBUNDLE={name}", "-I", d,
                    os.path.join(ROOT, "tests/c/run_bundle.c"), os.path.join(d, name + ".o"), "-o", exe],
                   check=True, capture_output=True, text=True)
    return exe


bad = 0
for model in a.models:
    m = onnx.load(model)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(7)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape, dt = [d.dim_value for d in t.shape.dim], NP[t.elem_type]
        feeds[vi.name] = (rng.standard_normal(shape).astype(dt) if dt == np.float32
                          else rng.integers(0, 2 if "mask" in vi.name.lower() else 16, shape).astype(dt))
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    with tempfile.TemporaryDirectory() as d:
        ins = []
        for i, v in enumerate(feeds.values()):
            ins.append(os.path.join(d, f"in{i}.bin"))
            v.tofile(ins[-1])
        outs = {}
        try:
            for label, target, cc, runner in (("host", None, "cc", []), (a.target, a.target, a.cc, a.qemu.split())):
                sub = os.path.join(d, label)
                os.makedirs(sub)
                exe = build(model, sub, "net", feeds, target, cc)
                paths = [os.path.join(sub, f"out{i}.bin") for i in range(len(want))]
                subprocess.run(runner + [exe, os.path.join(sub, "net.weights")] + ins + paths, check=True,
                               capture_output=True, text=True, timeout=600)
                outs[label] = [np.fromfile(p, dtype=w.dtype).reshape(w.shape) for p, w in zip(paths, want)]
        except subprocess.CalledProcessError as e:
            bad += 1
            print(f"FAIL {model}: {' '.join(map(str, e.cmd[:3]))} exited {e.returncode}: {(e.stderr or '')[:500]}")
            continue
        err = lambda x, ref: float(np.max(np.abs(x.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))))
        vs_host = max(err(x, h) for x, h in zip(outs[a.target], outs["host"]))
        vs_ort = max(err(x, w) for x, w in zip(outs[a.target], want))
        ok = vs_host <= a.tol and vs_ort <= a.tol
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} {model} on {a.target} (qemu): max scaled error {vs_host:.2e} vs the host "
              f"bundle, {vs_ort:.2e} vs onnxruntime (tol {a.tol:g})")
print(f"cross check: {len(a.models) - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
