#!/usr/bin/env python3
"""ONNX backend node tests (the onnx==1.22.0 wheel ships onnx/backend/test/data/node/*): compiles every model
with bundlec, links it with tests/c/run_bundle.c, runs every test_data_set_* and compares with the stored
outputs (max |a-b| <= tol * max(1, |ref|), tol 1e-4 by default).

A model bundlec rejects as unsupported (an unsupported op, attribute or dtype: exit status with 'cannot be
compiled') counts as unsupported; any other compile error, link error, crash or mismatch is a failure.
bundlec computes in f32, not f64: a case it rejects only for float64 tensors (several ops' only node tests, Einsum's
among them) runs again as the same model in float32 (every double tensor, initializer, Constant and Cast/dtype
attribute turned to float, inputs rounded to f32) and is compared with the stored float64 outputs at the same
tolerance; those are counted separately (not the Cast/CastLike/BitCast tests, whose subject is the type).
Node tests feed shape-like arguments (axes, pads, starts, sizes) as graph inputs; when bundlec asks for them to be
constant, exactly the inputs it names are frozen with `--freeze` (values from the data set, as an application with fixed
axes would have them) and the other inputs stay run-time inputs; those tests are counted separately.
Prints per-op and total passed/failed/unsupported counts; exits non-zero if anything attempted failed.

usage: node_tests.py [--bundlec PATH] [--filter SUBSTR] [--jobs N] [--show-unsupported]"""
import argparse, collections, concurrent.futures as cf, glob, os, re, subprocess, sys, tempfile
import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DTYPES = {np.float32: "f32", np.int64: "i64", np.int32: "i32", np.uint8: "u8", np.int8: "i8", np.bool_: "bool"}


def load_set(ds):
    key = lambda p: int(p.rsplit("_", 1)[1][:-3])
    ins = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=key)]
    refs = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=key)]
    return ins, refs


def spec(n, a, values=False):
    s = f"{n}:{'x'.join(map(str, a.shape))}{'x' if a.ndim else ''}{DTYPES[a.dtype.type]}"
    if values:
        flat = a.reshape(-1).astype(np.float64 if a.dtype.kind == "f" else np.int64).tolist()
        s += "=" + ",".join(str(v) for v in flat)
    return s


def compile_case(bundlec, model, d, name, in_names, ins, freeze):
    """Compiles with every runtime input's shape fixed from `ins`; inputs in `freeze` become constants."""
    args = []
    for n, a in zip(in_names, ins):
        if a is None or a.dtype.type not in DTYPES or (a.ndim > 0 and not all(a.shape)):
            continue
        if n in freeze:
            args += ["--freeze", spec(n, a, values=True)]
        elif a.ndim > 0:
            args += ["--input", spec(n, a)]
    return subprocess.run([bundlec, "compile", model, "-o", d, "--name", name] + args, capture_output=True, text=True)


def link(d, name):
    """Links DIR/NAME.o with the C driver into DIR/run; returns an error message or None."""
    r = subprocess.run(["cc", "-O1", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests/c/run_bundle.c"),
                        os.path.join(d, name + ".o"), "-o", os.path.join(d, "run")], capture_output=True, text=True)
    return "link: " + r.stderr.strip()[:300] if r.returncode != 0 else None


def to_f32(model_path, out_path):
    """Writes model_path with every float64 tensor type, initializer, Constant value and dtype attribute
    (Cast `to`, `dtype`) turned to float32; returns False when the model has a double in a place this does not
    convert (a subgraph or a sparse tensor)."""
    m = onnx.load(model_path)
    F64, F32 = onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT

    def tensor(t):
        if t.data_type == F64:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))

    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type == F64:
            tt.elem_type = F32
    for t in g.initializer:
        tensor(t)
    for n in g.node:
        for at in n.attribute:
            if at.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.SPARSE_TENSOR):
                return False
            if at.type == onnx.AttributeProto.TENSOR:
                tensor(at.t)
            elif at.type == onnx.AttributeProto.INT and at.name in ("to", "dtype") and at.i == F64:
                at.i = F32
    onnx.save(m, out_path)
    return True


def run_case(case_dir, bundlec, tol):
    r = run_model(case_dir, os.path.join(case_dir, "model.onnx"), bundlec, tol, False)
    # Not the conversion tests, whose subject is the float64 type itself.
    about_f64 = "cast" in os.path.basename(case_dir).lower()
    if r[1] == "unsupported" and not about_f64 and any("data type 11 is not supported" in w for w in r[2]):
        with tempfile.TemporaryDirectory() as d:
            m32 = os.path.join(d, "model_f32.onnx")
            if to_f32(os.path.join(case_dir, "model.onnx"), m32):
                r32 = run_model(case_dir, m32, bundlec, tol, True)
                if r32[1] != "unsupported":
                    return r32[0], r32[1], [f"(run in f32) {w}" for w in r32[2]], r32[3], True
    return r + (False,)


def run_model(case_dir, model, bundlec, tol, as_f32):
    """Returns (ops, status, details, frozen): status passed / failed / unsupported; `frozen` when integer
    inputs had to be frozen to constants (shape-like inputs: axes, pads, starts, sizes...). With `as_f32` the
    model is the float32 copy of the case's and its float64 inputs are rounded to f32."""
    m = onnx.load(model)
    ops = sorted({n.op_type for n in m.graph.node}) or ["(none)"]
    name = "t_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(case_dir))
    inits = {i.name for i in m.graph.initializer}
    in_names = [i.name for i in m.graph.input if i.name not in inits]
    sets = []
    for ds in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        try:
            ins, refs = load_set(ds)
            if as_f32:
                ins = [a.astype(np.float32) if a.dtype == np.float64 else a for a in ins]
            sets.append((ds, ins, refs))
        except Exception:  # noqa: BLE001 - sequences/optionals: bundlec will report them unsupported
            sets.append((ds, [None] * len(in_names), None))
    first = sets[0][1] if sets else [None] * len(in_names)
    freeze = set()

    def fail(msg):
        return ops, "failed", [msg], bool(freeze)

    with tempfile.TemporaryDirectory() as d:
        r = compile_case(bundlec, model, d, name, in_names, first, set())
        # Freeze exactly the inputs bundlec names as needing to be constant (a few rounds: folding one can
        # expose the next).
        for _ in range(4):
            if r.returncode == 0:
                break
            named = {n for line in r.stderr.splitlines() if "must be constant" in line
                     for n in re.findall(r"'([^']+)'", line.split("): ", 1)[-1])}
            new = (named & set(in_names)) - freeze
            if not new:
                break
            freeze |= new
            r = compile_case(bundlec, model, d, name, in_names, first, freeze)
        if r.returncode != 0:
            if "cannot be compiled" in r.stderr:
                return ops, "unsupported", r.stderr.strip().splitlines()[1:2], bool(freeze)
            return fail("compile: " + r.stderr.strip()[:300])
        exe = os.path.join(d, "run")
        err = link(d, name)
        if err:
            return fail(err)
        for si, (ds, ins, refs) in enumerate(sets):
            if refs is None or len(ins) != len(in_names):
                return fail(f"cannot read {ds} or it has {len(ins)} inputs for {len(in_names)}")
            if freeze and si > 0 and any(not np.array_equal(a, b) for n, a, b in zip(in_names, ins, first) if n in freeze):
                # Frozen values differ in this data set: compile it separately.
                r = compile_case(bundlec, model, d, name, in_names, ins, freeze)
                err = "compile: " + r.stderr.strip()[:300] if r.returncode != 0 else link(d, name)
                if err:
                    return fail(err)
            paths = []
            for i, (n, a) in enumerate(zip(in_names, ins)):
                if n in freeze:
                    continue
                p = os.path.join(d, f"in{i}.bin")
                np.ascontiguousarray(a).tofile(p)
                paths.append(p)
            outs = [os.path.join(d, f"out{i}.bin") for i in range(len(refs))]
            r = subprocess.run([exe, os.path.join(d, name + ".weights")] + paths + outs, capture_output=True, text=True)
            if r.returncode != 0:
                return fail(f"run ({r.returncode}): {r.stderr.strip()[:300]}")
            for o, (p, ref) in enumerate(zip(outs, refs)):
                dt = np.float32 if as_f32 and ref.dtype == np.float64 else ref.dtype
                got = np.fromfile(p, dtype=dt).reshape(ref.shape)
                if ref.dtype.kind == "f":
                    bad = ~np.isclose(got, ref, rtol=tol, atol=tol, equal_nan=True)
                    if bad.any():
                        err = np.nanmax(np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref)))
                        return fail(f"{os.path.basename(ds)} output {o}: max scaled error {err:.3e}")
                elif not np.array_equal(got, ref):
                    return fail(f"{os.path.basename(ds)} output {o}: values differ")
    return ops, "passed", [], bool(freeze)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
    ap.add_argument("--filter", default="")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--show-unsupported", action="store_true")
    a = ap.parse_args()
    base = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    cases = sorted(c for c in glob.glob(os.path.join(base, "test_*")) if a.filter in os.path.basename(c))
    if not cases:
        sys.exit(f"no node tests under {base} (onnx {onnx.__version__}; 1.22.0 ships them)")
    per_op = collections.defaultdict(collections.Counter)
    total = collections.Counter()
    failures = []
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(run_case, c, a.bundlec, a.tol): c for c in cases}
        for f in cf.as_completed(futs):
            c = os.path.basename(futs[f])
            try:
                ops, status, why, frozen, as_f32 = f.result()
            except Exception as e:  # noqa: BLE001 - a broken test file is a failure, never a crash
                ops, status, why, frozen, as_f32 = ["?"], "failed", [f"{type(e).__name__}: {e}"], False, False
            total[status] += 1
            if frozen and status != "unsupported":
                total["frozen"] += 1
            if as_f32:
                total["f32"] += 1
            for op in ops:
                per_op[op][status] += 1
            if status == "failed":
                failures.append((c, why))
            elif status == "unsupported" and a.show_unsupported:
                print(f"unsupported {c}: {why}")
    print("| op | passed | failed | unsupported |\n|---|---|---|---|")
    for op in sorted(per_op):
        s = per_op[op]
        if s["passed"] or s["failed"]:
            print(f"| {op} | {s['passed']} | {s['failed']} | {s['unsupported']} |")
    for c, why in sorted(failures):
        print(f"FAILED {c}: {'; '.join(why)}")
    print(f"node tests: {total['passed'] + total['failed']} attempted ({total['frozen']} with shape-like inputs "
          f"frozen to constants, {total['f32']} float64 cases run in float32), {total['unsupported']} unsupported")
    print(f"{total['passed']} passed, {total['failed']} failed, {total['unsupported']} skipped")
    sys.exit(1 if total["failed"] else 0)


if __name__ == "__main__":
    main()
