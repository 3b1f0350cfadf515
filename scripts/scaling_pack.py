#!/usr/bin/env python3
"""Packs bundles for a thread-scaling run on another machine (scripts/scaling_run.sh runs them there).

    python3 scripts/scaling_pack.py [--cpu x86-64-v4] [--out target/scaling] [--capi LIB.a] MODEL...

For each model: the bundle compiled for --cpu, tests/c/run_engine.c linked statically with bundle-rt's C library
(so the other machine needs no compiler, no Rust and no matching libc), its weights and one set of random inputs
(bench.py's feed). The folder holds everything scaling_run.sh needs; no model file, no Python, no peers: it
measures how bundle-rt's engine scales with threads and checks that every thread count gives the same bits.
Weights travel with the bundles, so a 100 MB ResNet-50 may be too large to carry where transfers are limited
(then pack on that machine: it needs bundlec, the C library, cc, numpy and onnx). --capi links another build of
bundle-rt's C library (default target/release/libbundle_rt_capi.a), to compare two engines in one run.
scripts/scaling_peers.py times onnxruntime on the same inputs at the same thread counts.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CAPI_LIB, ROOT, feed  # noqa: E402


def pack_name(model):
    """The folder and bundle name of `model` in a pack."""
    return "s_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(model))[0])


def pack_feeds(m):
    """The pack's inputs of the loaded model `m`: (input's ValueInfo, array) in input order, bench.py's feed."""
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    return [(vi, feed(vi, rng)) for vi in m.graph.input if vi.name not in inits]


def pack(model, cpu, out, bundlec, capi):
    name = pack_name(model)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    subprocess.run([bundlec, "compile", model, "-o", d, "--name", name, "--cpu", cpu], check=True)
    subprocess.run(["cc", "-O2", "-static", "-s", f"-DBUNDLE={name}", "-I", os.path.join(ROOT, "bundle-rt/include"),
                    "-I", d, os.path.join(ROOT, "tests/c/run_engine.c"), os.path.join(d, name + ".o"), capi,
                    "-lpthread", "-ldl", "-lm", "-o", os.path.join(d, "run")], check=True)
    for ext in (".o", ".h", ".recipe.json"):
        p = os.path.join(d, name + ext)
        if os.path.exists(p):
            os.remove(p)
    m = onnx.load(model, load_external_data=False)
    ins = pack_feeds(m)
    for i, (_, x) in enumerate(ins):
        x.tofile(os.path.join(d, f"in{i}.bin"))
    with open(os.path.join(d, "spec"), "w") as f:
        f.write(f"{name} {len(ins)} {len(m.graph.output)}\n")
    return name


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+")
    p.add_argument("--cpu", default="x86-64-v4")
    p.add_argument("--out", default=os.path.join(ROOT, "target/scaling"))
    p.add_argument("--bundlec", default=os.path.join(ROOT, "target/release/bundlec"))
    p.add_argument("--capi", default=CAPI_LIB, help="bundle-rt's C library to link")
    a = p.parse_args()
    if not os.path.exists(a.capi):
        sys.exit(f"{a.capi} is missing: cargo build --release -p bundle-rt-capi")
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    names = [pack(m, a.cpu, a.out, a.bundlec, a.capi) for m in a.models]
    subprocess.run(["cc", "-O2", "-static", os.path.join(ROOT, "tests/c/fma_peak.c"), "-o",
                    os.path.join(a.out, "fma_peak")], check=True)
    with open(os.path.join(a.out, "models"), "w") as f:
        f.write("\n".join(names) + "\n")
    print(f"packed {', '.join(names)} for --cpu {a.cpu} in {a.out}")


if __name__ == "__main__":
    main()
