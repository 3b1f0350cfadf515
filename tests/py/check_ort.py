#!/usr/bin/env python3
"""Compile ONNX models with bundlec, link each with the generic C driver (tests/c/run_bundle.c) using only the
system C compiler, run it on random inputs and compare every output with onnxruntime. The driver runs the
entry function twice on an activation area filled with NaN bytes first (BUNDLE_POISON, BUNDLE_REPEAT=2): the
second run's outputs are the ones compared.

usage: check_ort.py [--bundlec PATH] [--tol 1e-4] [--qsteps N] [--input NAME:SHAPE ...] [--seed N]
                    MODEL.onnx [MODEL.onnx ...]
Also validates each NAME.recipe.json against the XRT recipe schema. Prints one line per model and
'N passed, N failed' at the end; exits non-zero on any failure.

Inputs: f32 standard normal; u8 / i8 uniform over the whole type range (0..255 / -128..127, both ends always
present); other integers 0..63, and 0/1 for bool and for any input whose name contains 'mask'.
Default check: every output's error |got - ref| / max(1, |ref|) must be <= --tol.
--qsteps N (for quantized models): an output written by a DequantizeLinear node (with a constant scale) must be
within N quantisation steps of onnxruntime, a step being that node's scale (per element, for a per-axis scale);
an integer output (u8, i8, i32, ...) must be within N in units of 1 (N = 0: exact). Steps of f32 outputs get a
slack of 1e-3 for the f32 rounding of (q - zero_point) * scale. Other f32 outputs keep the --tol check. The line
then also gives the worst error in steps."""
import argparse, json, os, subprocess, sys, tempfile
import numpy as np
import onnx, onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "..", "shared", "reference", "xrt-recipe.schema.json")
NP = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_}
# f32 rounding allowance when comparing errors in quantisation steps: |(q - zp) * scale| < 256 steps is exact to
# ~1.5e-5 steps, and integer outputs are whole numbers, so this never admits an extra step
STEP_SLACK = 1e-3
# dtype names that bundlec's --input accepts
DTYPE_NAME = {np.float32: "f32", np.uint8: "u8", np.int8: "i8", np.int32: "i32", np.int64: "i64", np.bool_: "bool"}


def worst_of(err):
    """Largest element of err (0 when empty); NaN counts as infinitely wrong (Python's max would skip it)."""
    if not err.size:
        return 0.0
    return float("inf") if np.isnan(err).any() else float(err.max())


def constant_values(m):
    """name -> numpy array for every initializer and Constant node output (tensor-valued) of the graph."""
    vals = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    vals[n.output[0]] = onnx.numpy_helper.to_array(a.t)
    return vals


def dequant_step(m, consts, out_name, rank):
    """The quantisation step of graph output out_name if a DequantizeLinear node with a constant per-tensor or
    per-axis scale writes it: a float, or for a per-axis scale an array of that rank broadcasting along the node's
    axis (default 1). None otherwise (no such node, a scale computed at run time, or a blocked scale)."""
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == out_name:
            scale = consts.get(n.input[1])
            if scale is None or scale.ndim > 1:
                return None
            scale = scale.astype(np.float64)
            if scale.size == 1:
                return float(scale.reshape(-1)[0])
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1) % rank
            view = [1] * rank
            view[axis] = scale.size
            return scale.reshape(view)
    return None


def make_feeds(m, specs, seed):
    """Random inputs for model `m`'s graph inputs that are not initializers, by name (shapes from `specs` or the
    model; the distributions of the module doc)."""
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = specs.get(vi.name) or [d.dim_value for d in tt.shape.dim]
        dt = NP[tt.elem_type]
        if dt in (np.uint8, np.int8) and "mask" not in vi.name.lower():
            # Quantized activations: uniform over the whole type range, with both ends present.
            info = np.iinfo(dt)
            v = rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)
            v.reshape(-1)[:2] = [info.min, info.max][:v.size]
            feeds[vi.name] = v
        elif np.issubdtype(dt, np.integer) or dt == np.bool_:
            # Token ids / masks: small non-negative integers (0/1 for anything named like a mask).
            hi = 2 if "mask" in vi.name.lower() or dt == np.bool_ else 64
            feeds[vi.name] = rng.integers(0, hi, shape).astype(dt)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dt)
    return feeds


def check(model, bundlec, tol, specs, seed, qsteps=None, cpu=None, runner=()):
    """Returns (worst scaled error over the outputs checked against tol, worst error in quantisation steps over the
    outputs checked in steps). Without qsteps every output is checked against tol and the second value is None;
    with qsteps either value is None when no output is checked that way."""
    m = onnx.load(model)
    feeds = make_feeds(m, specs, seed)
    name = "m_" + "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(model))[0])
    with tempfile.TemporaryDirectory() as d:
        # "C/bf16": --cpu C --precision bf16.
        cpu, _, prec = (cpu or "").partition("/")
        cmd = [bundlec, "compile", model, "-o", d, "--name", name] + (["--cpu", cpu] if cpu else [])
        cmd += ["--precision", prec] if prec else []
        for k, v in feeds.items():
            cmd += ["--input", f"{k}:{'x'.join(map(str, v.shape))}x{DTYPE_NAME[v.dtype.type]}"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        exe = os.path.join(d, "run")
        subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests", "c", "run_bundle.c"),
                        os.path.join(d, name + ".o"), "-o", exe], check=True, capture_output=True, text=True)
        ins = []
        for i, (k, v) in enumerate(feeds.items()):
            p = os.path.join(d, f"in{i}.bin")
            v.tofile(p)
            ins.append(p)
        outs_meta = [o for o in m.graph.output]
        outs = [os.path.join(d, f"out{i}.bin") for i in range(len(outs_meta))]
        # The activation area poisoned (NaN) before the first of two runs, whose second's outputs are checked: a
        # kernel reading memory the run has not written, or depending on what the previous run left, fails.
        poison = dict(os.environ, BUNDLE_POISON="1", BUNDLE_REPEAT="2")
        subprocess.run(list(runner) + [exe, os.path.join(d, name + ".weights")] + ins + outs, check=True,
                       capture_output=True, text=True, env=poison)
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        refs = sess.run(None, feeds)
        worst, worst_steps = (0.0 if qsteps is None else None), None
        consts = constant_values(m) if qsteps is not None else {}
        for o, path, ref in zip(outs_meta, outs, refs):
            got = np.fromfile(path, dtype=ref.dtype).reshape(ref.shape)
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            step = None
            if qsteps is not None:
                step = 1.0 if np.issubdtype(ref.dtype, np.integer) else dequant_step(m, consts, o.name, ref.ndim)
            if step is None:
                worst = max(worst or 0.0, worst_of(diff / np.maximum(1.0, np.abs(ref.astype(np.float64)))))
            else:
                worst_steps = max(worst_steps or 0.0, worst_of(diff / step))
        recipe = json.load(open(os.path.join(d, name + ".recipe.json")))
        if os.path.exists(SCHEMA):
            import jsonschema
            jsonschema.validate(recipe, json.load(open(SCHEMA)))
        return worst, worst_steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--qsteps", type=float, default=None,
                    help="tolerance in quantisation steps for DequantizeLinear-produced and integer outputs")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu", help="bundlec --cpu kernel set (default: bundlec's); C/bf16: --cpu C --precision bf16")
    ap.add_argument("--runner", default="",
                    help="command that runs the C driver, e.g. 'qemu-x86_64 -cpu max' (an AVX2 CPU without AVX-512: "
                         "a fat bundle then runs its base set)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    specs = {}
    for s in a.input:
        n, shape = s.rsplit(":", 1)
        specs[n] = [int(x) for x in shape.split("x") if x.isdigit()]
    passed = failed = 0
    for model in a.models:
        try:
            worst, steps = check(model, a.bundlec, a.tol, specs, a.seed, a.qsteps, a.cpu, a.runner.split())
            ok = (worst is None or worst <= a.tol) and (steps is None or steps <= a.qsteps + STEP_SLACK)
            msg = ", ".join(([] if steps is None else [f"max error {steps:.3g} steps (qsteps {a.qsteps:g})"]) +
                            ([] if worst is None else [f"max scaled error {worst:.2e} (tol {a.tol:g})"]))
            print(f"{'PASS' if ok else 'FAIL'} {model}: {msg}")
        except subprocess.CalledProcessError as e:
            ok = False
            print(f"FAIL {model}: {' '.join(e.cmd[:2])} exited {e.returncode}: {(e.stderr or e.stdout or '').strip()[:2000]}")
        except Exception as e:  # noqa: BLE001 - report every failure, keep going
            ok = False
            print(f"FAIL {model}: {type(e).__name__}: {e}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
