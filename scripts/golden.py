#!/usr/bin/env python3
"""Behaviour-unchanged check for refactors: compiles a fixed set of models with each kernel set, records a SHA-256
of every artifact that must not change (NAME.weights, NAME.h, NAME.recipe.json, every .txn and NPU meta file), the
object's symbol names and sizes (its layout may change, its contents may not), and the bytes of the outputs of a
run of the linked bundle on seeded inputs; then compares two such manifests.

usage: golden.py --save FILE [--bundlec PATH] [--jobs N] [MODEL.onnx ...]
       golden.py --check FILE [--bundlec PATH] [--jobs N] [MODEL.onnx ...]

Without models: target/pymodels/*.onnx and target/pymodels/q/*.onnx (scripts/test.sh and scripts/int8_models.sh
write them) under --cpu default, x86-64-v3 and native, and the three NPU models with --npu vnpu. --check prints
every entry that differs and exits non-zero if any does."""
import argparse, concurrent.futures, glob, hashlib, json, os, subprocess, sys, tempfile
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
from check_ort import DTYPE_NAME, make_feeds  # noqa: E402  (the inputs and dtype names check_ort.py uses)

CPUS = ["default", "x86-64-v3", "native"]
NPU_MODELS = ["mobilenetv2", "encoder_ln17_erf", "resnet50_folded"]


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]


def feeds_for(model):
    """Seeded inputs (check_ort.py's) as (name, array) pairs, and the number of outputs."""
    m = onnx.load(model, load_external_data=False)
    return list(make_feeds(m, {}, 0).items()), len(m.graph.output)


def one(bundlec, model, flags):
    """{artifact: hash} for one model compiled with `flags`."""
    name = "g_" + "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(model))[0])
    feeds, n_out = feeds_for(model)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        cmd = [bundlec, "compile", model, "-o", d, "--name", name] + flags
        for k, v in feeds:
            cmd += ["--input", f"{k}:{'x'.join(map(str, v.shape))}x{DTYPE_NAME[v.dtype.type]}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            return {"compile": "error: " + r.stderr.strip()[-300:]}
        for f in sorted(os.listdir(d)):
            if not f.endswith(".o"):
                out[f] = sha(os.path.join(d, f))
        nm = subprocess.run(["nm", "-S", "--defined-only", os.path.join(d, name + ".o")], capture_output=True,
                            text=True, check=True).stdout.split("\n")
        syms = sorted(" ".join(l.split()[1:]) for l in nm if l.strip())
        out["symbols"] = hashlib.sha256("\n".join(syms).encode()).hexdigest()[:16]
        exe = os.path.join(d, "run")
        subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests", "c", "run_bundle.c"),
                        os.path.join(d, name + ".o"), "-o", exe], check=True, capture_output=True)
        ins = []
        for i, (_, v) in enumerate(feeds):
            p = os.path.join(d, f"in{i}.bin")
            v.tofile(p)
            ins.append(p)
        outs = [os.path.join(d, f"out{i}.bin") for i in range(n_out)]
        r = subprocess.run([exe, os.path.join(d, name + ".weights")] + ins + outs, capture_output=True, text=True)
        if r.returncode:
            out["run"] = "error: " + (r.stderr or r.stdout).strip()[-300:]
        else:
            out["outputs"] = hashlib.sha256(b"".join(open(p, "rb").read() for p in outs)).hexdigest()[:16]
    return out


def jobs(models):
    if models:
        return [(m, c) for m in models for c in CPUS]
    pm = os.path.join(ROOT, "target", "pymodels")
    ms = sorted(glob.glob(os.path.join(pm, "*.onnx"))) + sorted(glob.glob(os.path.join(pm, "q", "*.onnx")))
    js = [(m, c) for m in ms for c in CPUS]
    js += [(os.path.join(pm, m + ".onnx"), "npu") for m in NPU_MODELS]
    return js


def flags(cpu):
    if cpu == "default":
        return []
    if cpu == "npu":
        return ["--npu", "vnpu", "--cpu", "x86-64-v3"]
    return ["--cpu", cpu]


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save")
    g.add_argument("--check")
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    js = jobs(a.models)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        res = list(ex.map(lambda j: one(a.bundlec, j[0], flags(j[1])), js))
    got = {f"{os.path.relpath(m, ROOT)} [{c}]": r for (m, c), r in zip(js, res)}
    if a.save:
        json.dump(got, open(a.save, "w"), indent=1, sort_keys=True)
        errs = sum(any(v.startswith("error") for v in r.values()) for r in got.values())
        print(f"saved {len(got)} entries ({errs} with errors) to {a.save}")
        return
    want = json.load(open(a.check))
    bad = 0
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            bad += 1
            w, g_ = want.get(k) or {}, got.get(k) or {}
            diff = {f: (w.get(f), g_.get(f)) for f in sorted(set(w) | set(g_)) if w.get(f) != g_.get(f)}
            print(f"DIFF {k}: {diff}")
    print(f"{len(got)} entries, {bad} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
