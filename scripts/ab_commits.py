#!/usr/bin/env python3
"""Cross-commit A/B of whole models: the bundles an older commit's bundlec makes against this checkout's, each with
its own C drivers (tests/c/run_bundle.c, tests/c/run_engine.c) and bundle-rt library, in interleaved fresh
processes, so that a noisy host's slow stretches hit both sides alike. What a session's changes did in total,
where a single suite run (scripts/bench.py) says more about the host than about the code.

usage: ab_commits.py OLD_REV [--rounds 10] [--reps 5] [--cpu native] MODEL.onnx [MODEL.onnx ...]

OLD_REV is checked out as a git worktree in target/ab-commits/<rev> and built there in release (bundlec and
bundle-rt-capi, its own target directory: a first build takes minutes; later runs reuse it). This checkout's
release builds must exist (cargo build --release -p bundlec -p bundle-rt-capi). Per model and round, each side
runs one 1-thread process (the entry function) and one 2-thread process (bundle-rt's engine), each timing --reps
inferences after 200 ms of warm-up runs. Prints, per model and thread count, the 10th percentile and the median of
all runs of each side and the change; exits non-zero when the two sides' outputs differ (they should be bitwise
equal unless a change meant to alter numerics)."""
import argparse, os, re, statistics, subprocess, sys, tempfile
import numpy as np, onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAN_IN = re.compile(r"ran in ([0-9.]+) ms")


def old_tree(rev):
    """The worktree of `rev` with its release builds, made (and built) on first use: its root."""
    full = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"], capture_output=True,
                          text=True, check=True).stdout.strip()
    tree = os.path.join(ROOT, "target", "ab-commits", full[:12])
    if not os.path.isdir(tree):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", tree, full], check=True)
    subprocess.run(["cargo", "build", "--release", "-p", "bundlec", "-p", "bundle-rt-capi"], cwd=tree, check=True)
    return tree


def inputs(model, d):
    """Input files for `model` (f32 normal, integers 1: the suite's encoder takes ids and a mask) and the count of
    outputs."""
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    files = []
    for i, vi in enumerate(vi for vi in m.graph.input if vi.name not in inits):
        t = vi.type.tensor_type
        shape = [x.dim_value if x.dim_value > 0 else 1 for x in t.shape.dim]
        dt = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_}.get(t.elem_type)
        if dt is None:
            sys.exit(f"{model}: input {vi.name} has an element type this script does not feed")
        arr = rng.standard_normal(shape).astype(dt) if dt == np.float32 else np.ones(shape, dt)
        files.append(os.path.join(d, f"in{i}.bin"))
        arr.tofile(files[-1])
    return files, len(m.graph.output)


def build(side, root, model, cpu, d):
    """Compiles `model` with `root`'s bundlec and links its two drivers: (1-thread exe, 2-thread exe, weights)."""
    rel = os.path.join(root, "target", "release")
    subprocess.run([os.path.join(rel, "bundlec"), "compile", model, "-o", d, "--name", side, "--cpu", cpu],
                   check=True, capture_output=True)
    obj = os.path.join(d, side + ".o")
    one, two = os.path.join(d, "one_" + side), os.path.join(d, "two_" + side)
    subprocess.run(["cc", "-O2", f"-DBUNDLE={side}", "-I", d, os.path.join(root, "tests/c/run_bundle.c"), obj,
                    "-o", one], check=True)
    subprocess.run(["cc", "-O2", f"-DBUNDLE={side}", "-I", os.path.join(root, "bundle-rt/include"), "-I", d,
                    os.path.join(root, "tests/c/run_engine.c"), obj, os.path.join(rel, "libbundle_rt_capi.a"),
                    "-lpthread", "-ldl", "-lm", "-o", two], check=True)
    return one, two, os.path.join(d, side + ".weights")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_rev")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cpu", default="native")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    if a.rounds < 1 or a.reps < 1:
        ap.error("--rounds and --reps must be at least 1")
    roots = {"old": old_tree(a.old_rev), "new": ROOT}
    differ = False
    for model in a.models:
        with tempfile.TemporaryDirectory() as d:
            ins, nout = inputs(model, d)
            exes = {side: build(side, root, model, a.cpu, d) for side, root in roots.items()}
            outs = {side: [os.path.join(d, f"out_{side}_{o}.bin") for o in range(nout)] for side in roots}
            times = {(side, th): [] for side in roots for th in (1, 2)}
            for _ in range(a.rounds):
                for side, (one, two, weights) in exes.items():
                    for th, exe in ((1, one), (2, two)):
                        env = dict(os.environ, BUNDLE_WARMUP_MS="200", BUNDLE_REPEAT=str(a.reps),
                                   BUNDLE_THREADS=str(th), BUNDLE_WARMUP="1")
                        r = subprocess.run([exe, weights] + ins + outs[side], env=env, capture_output=True,
                                           text=True, check=True)
                        times[(side, th)] += [float(x) for x in RAN_IN.findall(r.stdout)]
            same = all(open(x, "rb").read() == open(y, "rb").read() for x, y in zip(outs["old"], outs["new"]))
            differ |= not same
            p10 = lambda xs: sorted(xs)[int(0.1 * (len(xs) - 1))]
            cells = []
            for th in (1, 2):
                o, n = times[("old", th)], times[("new", th)]
                cells.append(f"{th}t p10 {p10(o):.3f} -> {p10(n):.3f} ms ({100 * (p10(n) / p10(o) - 1):+.1f} %), "
                             f"median {statistics.median(o):.3f} -> {statistics.median(n):.3f} "
                             f"({100 * (statistics.median(n) / statistics.median(o) - 1):+.1f} %)")
            print(f"{os.path.basename(model)}: " + "; ".join(cells) + ("" if same else "; OUTPUTS DIFFER"),
                  flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
