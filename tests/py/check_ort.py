#!/usr/bin/env python3
"""Compile ONNX models with bundlec, link each with the generic C driver (tests/c/run_bundle.c) using only the
system C compiler, run it on random inputs and compare every output with onnxruntime.

usage: check_ort.py [--bundlec PATH] [--tol 1e-4] [--input NAME:SHAPE ...] MODEL.onnx [MODEL.onnx ...]
Also validates each NAME.recipe.json against the XRT recipe schema. Prints one line per model and
'N passed, N failed' at the end; exits non-zero on any failure."""
import argparse, json, os, subprocess, sys, tempfile
import numpy as np
import onnx, onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "..", "shared", "reference", "xrt-recipe.schema.json")
NP = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_}


def check(model, bundlec, tol, specs, seed):
    m = onnx.load(model)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = specs.get(vi.name) or [d.dim_value for d in tt.shape.dim]
        dt = NP[tt.elem_type]
        if np.issubdtype(dt, np.integer) or dt == np.bool_:
            # Token ids / masks: small non-negative integers (0/1 for anything named like a mask).
            hi = 2 if "mask" in vi.name.lower() or dt == np.bool_ else 64
            feeds[vi.name] = rng.integers(0, hi, shape).astype(dt)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dt)
    name = "m_" + "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(model))[0])
    with tempfile.TemporaryDirectory() as d:
        cmd = [bundlec, "compile", model, "-o", d, "--name", name]
        for k, v in feeds.items():
            cmd += ["--input", f"{k}:{'x'.join(map(str, v.shape))}x{ {np.float32:'f32',np.int64:'i64'}.get(v.dtype.type,'f32') }"]
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
        subprocess.run([exe, os.path.join(d, name + ".weights")] + ins + outs, check=True, capture_output=True, text=True)
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        refs = sess.run(None, feeds)
        worst = 0.0
        for o, path, ref in zip(outs_meta, outs, refs):
            got = np.fromfile(path, dtype=ref.dtype).reshape(ref.shape)
            err = np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))
            worst = max(worst, float(err.max()) if err.size else 0.0)
        recipe = json.load(open(os.path.join(d, name + ".recipe.json")))
        if os.path.exists(SCHEMA):
            import jsonschema
            jsonschema.validate(recipe, json.load(open(SCHEMA)))
        return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    specs = {}
    for s in a.input:
        n, shape = s.rsplit(":", 1)
        specs[n] = [int(x) for x in shape.split("x") if x.isdigit()]
    passed = failed = 0
    for model in a.models:
        try:
            worst = check(model, a.bundlec, a.tol, specs, a.seed)
            ok = worst <= a.tol
            print(f"{'PASS' if ok else 'FAIL'} {model}: max scaled error {worst:.2e} (tol {a.tol:g})")
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
