#!/usr/bin/env python3
"""Accuracy report of bundlec's int8 flow (`bundlec profile` + `bundlec compile --load-profile`) against the f32
model run by onnxruntime, on held-out inputs that calibration never saw.

usage: int8_accuracy.py [--bundlec PATH] MODEL.onnx --calib N --heldout M
                        [--calibration minmax|percentile|entropy] [--seed S] [--min-top1 F] [--keep-f32 NODE ...]
                        [--layers K] [--input NAME:SHAPE ...] [--profile FILE] [--workdir DIR]

Steps:
  1. N calibration inputs and M held-out inputs, from two different random streams (numpy Generator seeded with
     [S, 0] and [S, 1]). f32 inputs are standard normal; u8 / i8 inputs uniform over the type's range, other
     integers 0..63 (0/1 for bool and for inputs named like a mask). Image-like f32 inputs (rank 4, NCHW or NHWC
     with 1, 3 or 4 channels and a spatial size of at least 8x8) get held-out variants in turn:
       normal      a fresh standard-normal tensor
       hflip       a fresh one mirrored left-right
       smooth      noise drawn at 1/4 of the spatial size, upsampled bilinearly, rescaled to unit variance
                   (spatially correlated, unlike anything in the calibration set)
       vflip*0.5   a fresh one mirrored top-bottom at half amplitude
       x1.5        a fresh one at 1.5x amplitude (its tails exceed the calibrated input range)
  2. `bundlec profile MODEL --inputs <N .npy/.npz> -o profile.yaml` on the calibration inputs.
  3. `bundlec compile MODEL --load-profile profile.yaml --calibration METHOD [--keep-f32 ...] -v`, linked with
     tests/c/run_bundle.c by cc and run once per held-out input; onnxruntime runs the f32 model on the same inputs.
  4. A table per output: top-1 agreement and top-5 agreement (the f32 top-1 class among the int8 top-5) plus the
     mean overlap of the two top-5 sets, for [batch, classes] outputs; max / mean absolute error; the f32 output
     range. The compiler's '  int8: N ops: ...' line and its 'kept in f32' lines are printed as well, and the
     top-1 agreement per held-out variant.
  5. Per-layer error (skipped with --layers 0): for every node in the int8 line, the ONNX tensor that the int8 op
     writes - the node's first output, followed through a chain of single-consumer BatchNormalization / Relu /
     Clip nodes and Adds of a constant (the compiler fuses those into the int8 op, so the tensor at the end of the
     chain is what it writes; a tensor in the middle of a fused chain does not exist in the bundle) - is added as
     an extra graph output (shape from onnx.shape_inference) to one copy of the model. That copy is compiled once
     with the same profile (tensor names are unchanged) and run on the held-out inputs next to onnxruntime on the
     same copy; the K layers (default 10) with the largest relative error mean|int8 - f32| / (max - min of the
     f32 tensor over the held-out inputs) are listed. The copy's int8 op count is compared with the original's and
     its final outputs with the original bundle's (extra outputs must not change what is computed). An int8 Add
     whose output becomes a graph output may be computed in f32 in the copy (a NOTE names it); its row then shows
     the error of its int8 inputs added in f32.
  Held-out top-1 disagreements are listed with the f32 logit gap between the two classes: on random-weight
  models the top classes are near-ties, and an 'int8 gap 0' is an exact tie of the int8 logits (an int8 op that
  writes a graph output still rounds it to its u8 grid).

--profile FILE: use FILE as the profile when it exists (no profiling; handy for trying --calibration methods on a
model whose profiling is slow), else write it there.
--min-top1 F: exit 1 when the lowest top-1 agreement over the [batch, classes] outputs is below F (a fraction;
a value above 1 is read as a percentage); no such output is an error then. Exit 2 when bundlec, cc or a bundle
fails. Nothing is written outside --workdir (a temporary directory, removed, unless given) and --profile."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, shape_inference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(ROOT, "tests", "c", "run_bundle.c")
ONNX_NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT8: np.int8,
           onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.BOOL: np.bool_}
DTYPE_FLAG = {np.float32: "f32", np.uint8: "u8", np.int8: "i8", np.int32: "i32", np.int64: "i64", np.bool_: "bool"}
VARIANTS = ["normal", "hflip", "smooth", "vflip*0.5", "x1.5"]
# ops the compiler folds into the int8 op before them (the chain's last tensor is what the int8 op writes)
CHAIN_OPS = ("BatchNormalization", "Relu", "Clip")


class ToolFailure(Exception):
    pass


def run_tool(cmd, what):
    t = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise ToolFailure(f"{what}: cannot run {cmd[0]}: {e}") from e
    if r.returncode != 0:
        raise ToolFailure(f"{what} exited {r.returncode}: {' '.join(cmd)}\n{(r.stdout + r.stderr).strip()[-4000:]}")
    return r, time.time() - t


# ---------------------------------------------------------------------------------------------------------- inputs

def model_inputs(m, specs):
    """[(name, shape, numpy dtype)] of the non-initializer graph inputs. A symbolic first dimension is 1, other
    symbolic dimensions need --input NAME:SHAPE."""
    inits = {i.name for i in m.graph.initializer}
    out = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type not in ONNX_NP:
            sys.exit(f"input {vi.name!r}: unsupported element type {onnx.TensorProto.DataType.Name(tt.elem_type)}")
        if vi.name in specs:
            shape = specs[vi.name]
        else:
            shape = []
            for i, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(d.dim_value)
                elif i == 0:
                    shape.append(1)
                else:
                    sys.exit(f"input {vi.name!r}: dimension {i} is not static; give --input {vi.name}:AxBx...")
        out.append((vi.name, shape, ONNX_NP[tt.elem_type]))
    return out


def image_layout(shape):
    """'nchw' / 'nhwc' for an image-like rank-4 shape, else None."""
    if len(shape) != 4:
        return None
    if shape[1] in (1, 3, 4) and shape[2] >= 8 and shape[3] >= 8:
        return "nchw"
    if shape[3] in (1, 3, 4) and shape[1] >= 8 and shape[2] >= 8:
        return "nhwc"
    return None


def upsample_bilinear(x, axes, sizes):
    """Linear interpolation of x along each of axes to the given sizes (align-corners style)."""
    for ax, n in zip(axes, sizes):
        src = x.shape[ax]
        pos = np.linspace(0.0, src - 1, n)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, src - 1)
        w = (pos - lo).astype(np.float32)
        view = [1] * x.ndim
        view[ax] = n
        w = w.reshape(view)
        x = np.take(x, lo, axis=ax) * (1 - w) + np.take(x, hi, axis=ax) * w
    return x


def make_tensor(rng, name, shape, dt, variant):
    if dt in (np.uint8, np.int8) and "mask" not in name.lower():
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)
    if np.issubdtype(dt, np.integer) or dt == np.bool_:
        hi = 2 if "mask" in name.lower() or dt == np.bool_ else 64
        return rng.integers(0, hi, shape).astype(dt)
    layout = image_layout(shape)
    if layout is None or variant == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    hw = (2, 3) if layout == "nchw" else (1, 2)
    if variant == "hflip":
        x = np.flip(rng.standard_normal(shape), axis=hw[1])
    elif variant == "vflip*0.5":
        x = 0.5 * np.flip(rng.standard_normal(shape), axis=hw[0])
    elif variant == "x1.5":
        x = 1.5 * rng.standard_normal(shape)
    elif variant == "smooth":
        small = list(shape)
        for ax in hw:
            small[ax] = max(2, shape[ax] // 4)
        x = upsample_bilinear(rng.standard_normal(small), hw, [shape[a] for a in hw])
        x = (x - x.mean()) / x.std()
    else:
        raise ValueError(variant)
    return np.ascontiguousarray(x, dtype=np.float32)


def make_sets(inputs, n_calib, n_held, seed):
    """(calibration feeds, held-out feeds, held-out variant names); a feed is {name: array}."""
    crng, hrng = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])
    calib = [{n: make_tensor(crng, n, s, d, "normal") for n, s, d in inputs} for _ in range(n_calib)]
    imagey = any(d == np.float32 and image_layout(s) for _, s, d in inputs)
    held, desc = [], []
    for i in range(n_held):
        v = VARIANTS[i % len(VARIANTS)] if imagey else "normal"
        held.append({n: make_tensor(hrng, n, s, d, v) for n, s, d in inputs})
        desc.append(v)
    return calib, held, desc


# ---------------------------------------------------------------------------------------------------------- bundle

def bundle_io(header_path):
    """[(role, name)] of the bundle's inputs and outputs, in the symbol table order run_bundle.c uses."""
    io = []
    for ln in open(header_path):
        m = re.match(r"/\* (input|output) '(.*)': ", ln)
        if m:
            io.append((m.group(1), m.group(2)))
    return io


def compile_bundle(a, model, wd, tag, profile, specs_flags):
    """Compile int8 with -v, link. Returns (dir, name, exe, -v log, compile s, link s)."""
    d = os.path.join(wd, tag)
    os.makedirs(d, exist_ok=True)
    name = "acc_" + re.sub(r"\W", "_", tag)
    cmd = [a.bundlec, "compile", model, "-o", d, "--name", name, "-v", "--load-profile", profile,
           "--calibration", a.calibration] + specs_flags
    for k in a.keep_f32:
        cmd += ["--keep-f32", k]
    r, t_compile = run_tool(cmd, "bundlec compile")
    log = r.stdout + r.stderr
    exe = os.path.join(d, "run")
    _, t_link = run_tool(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, DRIVER, os.path.join(d, name + ".o"), "-o",
                          exe, "-lm"], "cc")
    return d, name, exe, log, cmd, t_compile, t_link


def run_bundle(d, name, exe, feeds_list, input_order, out_meta):
    """Run the linked bundle on every feed. out_meta: {output name: (dtype, shape)}. Returns
    [{output name: array}] per feed, and the median run time in ms."""
    io = bundle_io(os.path.join(d, name + ".h"))
    ins = [n for r, n in io if r == "input"]
    outs = [n for r, n in io if r == "output"]
    if sorted(ins) != sorted(input_order):
        raise ToolFailure(f"bundle inputs {ins} != model inputs {input_order}")
    missing = set(out_meta) - set(outs)
    if missing:
        raise ToolFailure(f"bundle lacks outputs {sorted(missing)[:5]}")
    results, ms = [], []
    for i, feeds in enumerate(feeds_list):
        in_paths = []
        for j, n in enumerate(ins):
            p = os.path.join(d, f"in{j}.bin")
            np.ascontiguousarray(feeds[n]).tofile(p)
            in_paths.append(p)
        out_paths = [os.path.join(d, f"out{j}.bin") for j in range(len(outs))]
        r, _ = run_tool([exe, os.path.join(d, name + ".weights")] + in_paths + out_paths, f"bundle {name}")
        m = re.search(r"ran in ([0-9.]+) ms", r.stdout)
        if m:
            ms.append(float(m.group(1)))
        got = {}
        for n, p in zip(outs, out_paths):
            if n in out_meta:
                dt, shape = out_meta[n]
                v = np.fromfile(p, dtype=dt)
                if v.size != int(np.prod(shape)):
                    raise ToolFailure(f"bundle output {n!r}: {v.size} elements, onnxruntime gives shape {shape}")
                got[n] = v.reshape(shape)
            os.remove(p)
        results.append(got)
    return results, (float(np.median(ms)) if ms else float("nan"))


def int8_lines(log):
    line = next((ln for ln in log.splitlines() if ln.startswith("  int8: ")), None)
    names = []
    if line:
        m = re.match(r"  int8: (\d+) ops:(.*)$", line)
        if m and m.group(2).strip():
            names = [s.strip() for s in m.group(2).split(", ")]
    kept = [ln.strip() for ln in log.splitlines() if ln.startswith("  kept in f32:")]
    return line, names, kept


# ---------------------------------------------------------------------------------------------------------- compare

def classification(shape):
    return len(shape) == 2 and shape[1] >= 2


def compare_output(refs, gots):
    """refs, gots: lists of arrays (one per held-out input) of one output."""
    ref = np.stack([r.astype(np.float64) for r in refs])
    got = np.stack([g.astype(np.float64) for g in gots])
    err = np.abs(got - ref)
    res = dict(max_err=float(err.max()) if err.size else 0.0, mean_err=float(err.mean()) if err.size else 0.0,
               lo=float(ref.min()), hi=float(ref.max()), nan=bool(np.isnan(got).any()))
    if classification(refs[0].shape):
        r2 = ref.reshape(-1, ref.shape[-1])
        g2 = got.reshape(-1, got.shape[-1])
        k = min(5, r2.shape[1])
        r1, g1 = r2.argmax(1), g2.argmax(1)
        r5 = np.argsort(-r2, 1, kind="stable")[:, :k]
        g5 = np.argsort(-g2, 1, kind="stable")[:, :k]
        res["rows"] = len(r1)
        res["top1_hits"] = r1 == g1
        res["top1"] = float((r1 == g1).mean())
        res["top5"] = float(np.mean([r1[i] in g5[i] for i in range(len(r1))]))
        res["overlap"] = float(np.mean([len(set(r5[i]) & set(g5[i])) / k for i in range(len(r1))]))
    return res


def fused_tail(m, node, consumers, outputs, consts):
    """The tensor the int8 op of `node` writes: node.output[0] followed through single-consumer
    BatchNormalization / Relu / Clip nodes and Adds with a constant operand."""
    t = node.output[0]
    while t not in outputs and len(consumers.get(t, [])) == 1:
        c = consumers[t][0]
        if c.op_type in CHAIN_OPS and c.input[0] == t:
            t = c.output[0]
        elif c.op_type == "Add" and len(c.input) == 2 and any(x in consts for x in c.input if x != t):
            t = c.output[0]
        else:
            break
    return t


def layer_model(m, int8_names, path):
    """Write a copy of m with the tensor of every int8 node as an extra graph output. Returns
    ([(node name, tensor)], [node names not found])."""
    by_name = {n.name: n for n in m.graph.node if n.name}
    consumers = {}
    for n in m.graph.node:
        for x in n.input:
            if x:
                consumers.setdefault(x, []).append(n)
    consts = {i.name for i in m.graph.initializer} | {n.output[0] for n in m.graph.node if n.op_type == "Constant"}
    outputs = {o.name for o in m.graph.output}
    layers, missing = [], []
    for nm in int8_names:
        node = by_name.get(nm)
        if node is None:
            missing.append(nm)
            continue
        layers.append((nm, fused_tail(m, node, consumers, outputs, consts)))
    inferred = shape_inference.infer_shapes(m)
    vi = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    added = set(outputs)
    for _, t in layers:
        if t in added:
            continue
        added.add(t)
        v = vi.get(t)
        if v is not None and v.type.tensor_type.elem_type:
            tt = v.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim] \
                if tt.HasField("shape") else None
            m2.graph.output.append(helper.make_tensor_value_info(t, tt.elem_type, shape))
        else:
            m2.graph.output.append(helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None))
    onnx.save(m2, path)
    return layers, missing


# ---------------------------------------------------------------------------------------------------------- main

def fmt_pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--calib", type=int, required=True, help="number of calibration inputs")
    ap.add_argument("--heldout", type=int, required=True, help="number of held-out inputs")
    ap.add_argument("--calibration", choices=["minmax", "percentile", "entropy"], default="minmax")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-top1", type=float, default=None)
    ap.add_argument("--keep-f32", nargs="+", action="extend", default=[], metavar="NODE")
    ap.add_argument("--layers", type=int, default=10, help="worst layers listed (0: no per-layer pass)")
    ap.add_argument("--input", action="append", default=[], metavar="NAME:SHAPE",
                    help="fix a graph input's shape, e.g. input:1x3x224x224")
    ap.add_argument("--profile", metavar="FILE",
                    help="profile file: reused when it exists (no profiling run), else written there")
    ap.add_argument("--workdir", help="keep every file here (default: a temporary directory, removed)")
    a = ap.parse_args()
    if a.calib < 1 or a.heldout < 1:
        sys.exit("--calib and --heldout must be at least 1")
    if a.min_top1 is not None and a.min_top1 > 1:
        a.min_top1 /= 100.0
    wd = a.workdir or tempfile.mkdtemp(prefix="int8_acc_")
    os.makedirs(wd, exist_ok=True)
    try:
        return body(a, wd)
    except ToolFailure as e:
        print(f"FAILED: {e}")
        return 2
    finally:
        if not a.workdir:
            shutil.rmtree(wd, ignore_errors=True)


def body(a, wd):
    t_all = time.time()
    specs = {}
    for s in a.input:
        n, shape = s.rsplit(":", 1)
        specs[n] = [int(x) for x in shape.lower().split("x") if x.isdigit()]
    m = onnx.load(a.model)
    inputs = model_inputs(m, specs)
    in_names = [n for n, _, _ in inputs]
    specs_flags = []
    for n, s, d in inputs:
        if n in specs:
            specs_flags += ["--input", f"{n}:{'x'.join(map(str, s))}x{DTYPE_FLAG[d]}"]

    t0 = time.time()
    calib, held, desc = make_sets(inputs, a.calib, a.heldout, a.seed)
    cdir = os.path.join(wd, "calib")
    os.makedirs(cdir, exist_ok=True)
    calib_paths = []
    for i, feeds in enumerate(calib):
        if len(inputs) == 1:
            p = os.path.join(cdir, f"c{i:04d}.npy")
            np.save(p, feeds[in_names[0]])
        else:
            p = os.path.join(cdir, f"c{i:04d}.npz")
            np.savez(p, **feeds)
        calib_paths.append(p)
    print(f"model {a.model}: inputs " + ", ".join(f"{n} {DTYPE_FLAG[d]}{list(s)}" for n, s, d in inputs))
    counts = {v: desc.count(v) for v in dict.fromkeys(desc)}
    print(f"calibration inputs: {a.calib} (seed [{a.seed}, 0], standard normal); held-out inputs: {a.heldout} "
          f"(seed [{a.seed}, 1]: " + ", ".join(f"{v} {c}" for v, c in counts.items()) + f"); {time.time() - t0:.1f} s")

    # f32 reference
    t0 = time.time()
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in sess.get_outputs()]
    refs = [dict(zip(out_names, sess.run(None, f))) for f in held]
    t_ort = time.time() - t0

    # profile
    prof = a.profile or os.path.join(wd, "profile.yaml")
    if a.profile and os.path.exists(a.profile):
        print(f"reusing profile {a.profile} (not re-profiled; it need not match --calib/--seed)")
    else:
        cmd = [a.bundlec, "profile", a.model, "--inputs"] + calib_paths + ["-o", prof] + specs_flags
        print(f"$ {a.bundlec} profile {a.model} --inputs <{len(calib_paths)} files> -o {prof}" +
              (" " + " ".join(specs_flags) if specs_flags else ""))
        r, t_prof = run_tool(cmd, "bundlec profile")
        msg = (r.stdout + r.stderr).strip()
        print(f"  {msg.splitlines()[-1] if msg else ''} ({t_prof:.1f} s, {t_prof / a.calib:.2f} s per sample)")

    # int8 bundle
    d, name, exe, log, ccmd, t_comp, t_link = compile_bundle(a, a.model, wd, "int8", prof, specs_flags)
    print("$ " + " ".join(ccmd))
    line, int8_names, kept = int8_lines(log)
    print(line if line else "  int8: (no int8 line in the -v report)")
    for k in kept:
        print("  " + k)
    meta = {n: (refs[0][n].dtype, refs[0][n].shape) for n in out_names}
    t0 = time.time()
    gots, ms = run_bundle(d, name, exe, held, in_names, meta)
    t_run = time.time() - t0
    print(f"compile {t_comp:.1f} s, link {t_link:.1f} s, {len(held)} runs {t_run:.1f} s (median {ms:.2f} ms per "
          f"run), onnxruntime {t_ort:.1f} s")

    # table
    print(f"\nint8 ({a.calibration}, {a.calib} calibration samples) vs f32 onnxruntime on {len(held)} held-out inputs:")
    hdr = (f"{'output':24s} {'shape':14s} {'top-1 agree':>16s} {'top-5 agree':>11s} {'top-5 overlap':>13s} "
           f"{'max|err|':>10s} {'mean|err|':>10s} {'f32 range':>22s}")
    print(hdr)
    print("-" * len(hdr))
    results = {}
    for n in out_names:
        c = compare_output([rf[n] for rf in refs], [g[n] for g in gots])
        results[n] = c
        t1 = f"{int(c['top1_hits'].sum())}/{c['rows']} {fmt_pct(c['top1'])}" if "top1" in c else "-"
        rng = f"[{c['lo']:.4g}, {c['hi']:.4g}]"
        print(f"{n[:24]:24s} {'x'.join(map(str, refs[0][n].shape))[:14]:14s} {t1:>16s} "
              f"{fmt_pct(c.get('top5')):>11s} {fmt_pct(c.get('overlap')):>13s} {c['max_err']:10.4g} "
              f"{c['mean_err']:10.4g} {rng:>22s}"
              + ("  NaN in int8 output!" if c["nan"] else ""))
    cls = [n for n in out_names if "top1" in results[n]]
    if cls and len(set(desc)) > 1:
        for n in cls:
            rows_per = results[n]["rows"] // len(held)
            hits = results[n]["top1_hits"].reshape(len(held), rows_per)
            parts = []
            for v in dict.fromkeys(desc):
                sel = np.array([x == v for x in desc])
                parts.append(f"{v} {int(hits[sel].sum())}/{hits[sel].size}")
            print(f"top-1 agreement of {n} per held-out variant: " + ", ".join(parts))
    for n in cls:
        bad = np.nonzero(~results[n]["top1_hits"])[0]
        rows_per = results[n]["rows"] // len(held)
        for k in bad[:10]:
            i, row = divmod(int(k), rows_per)
            ref, got = refs[i][n][row].astype(np.float64), gots[i][n][row].astype(np.float64)
            rc, gc = int(ref.argmax()), int(got.argmax())
            print(f"  {n}: held-out #{i} ({desc[i]}) row {row}: f32 top-1 {rc}, int8 top-1 {gc}; f32 logit gap "
                  f"{ref[rc] - ref[gc]:.4g} (int8 gap {got[gc] - got[rc]:.4g}), f32 top-2 margin "
                  f"{ref[rc] - np.sort(ref)[-2]:.4g}")
        if len(bad) > 10:
            print(f"  ... {len(bad) - 10} more")

    # per-layer
    if a.layers > 0 and int8_names:
        per_layer(a, wd, m, int8_names, prof, specs_flags, held, refs, gots, out_names)
    elif a.layers > 0:
        print("\nper-layer: no int8 ops, nothing to compare")

    print(f"\ntotal {time.time() - t_all:.1f} s")
    if a.min_top1 is not None:
        if not cls:
            print("FAIL: --min-top1 given but no output is a [batch, classes] tensor")
            return 1
        worst = min(results[n]["top1"] for n in cls)
        if worst < a.min_top1:
            print(f"FAIL: top-1 agreement {fmt_pct(worst)} < {fmt_pct(a.min_top1)}")
            return 1
        print(f"PASS: top-1 agreement {fmt_pct(worst)} >= {fmt_pct(a.min_top1)}")
    return 0


def per_layer(a, wd, m, int8_names, prof, specs_flags, held, refs, gots, out_names):
    t0 = time.time()
    lpath = os.path.join(wd, "layers.onnx")
    layers, missing = layer_model(m, int8_names, lpath)
    sess = ort.InferenceSession(lpath, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    lrefs = [dict(zip(names, sess.run(None, f))) for f in held]
    d, name, exe, log, _, t_comp, _ = compile_bundle(a, lpath, wd, "int8_layers", prof, specs_flags)
    _, int8_names2, _ = int8_lines(log)
    meta = {n: (lrefs[0][n].dtype, lrefs[0][n].shape) for n in names}
    lgots, _ = run_bundle(d, name, exe, held, [n for n in held[0]], meta)
    print(f"\nper-layer: {len(layers)} int8 ops' tensors added as graph outputs, one compile ({t_comp:.1f} s), "
          f"{time.time() - t0:.1f} s in all")
    if missing:
        print(f"  {len(missing)} int8 node names not found among the ONNX node names: {', '.join(missing[:8])}")
    if int8_names2 != int8_names:
        lost = [n for n in int8_names if n not in int8_names2]
        print(f"  NOTE: the copy has {len(int8_names2)} int8 ops (original {len(int8_names)}); not int8 in the "
              f"copy: {', '.join(lost[:8])}")
    drift = max(float(np.abs(lg[n].astype(np.float64) - g[n].astype(np.float64)).max())
                for lg, g in zip(lgots, gots) for n in out_names)
    print(f"  final outputs of the copy vs the original int8 bundle: max |diff| {drift:.3g}" +
          ("" if drift == 0 else " (the extra outputs changed the computation)"))
    rows = []
    for idx, (nm, t) in enumerate(layers):
        ref = np.stack([r[t].astype(np.float64) for r in lrefs])
        got = np.stack([g[t].astype(np.float64) for g in lgots])
        err = np.abs(got - ref)
        span = float(ref.max() - ref.min())
        rel = float(err.mean()) / span if span > 0 else float("inf") if err.mean() > 0 else 0.0
        rows.append((rel, idx, nm, t, ref.shape[1:], float(ref.min()), float(ref.max()), float(err.mean()),
                     float(err.max())))
    rels = np.array([r[0] for r in rows])
    print(f"  relative error mean|int8 - f32| / (f32 max - min) over {len(rows)} layers: median {np.median(rels):.3e}, "
          f"max {rels.max():.3e}; last int8 layer ({rows[-1][2]}) {rows[-1][0]:.3e}")
    print(f"  worst {min(a.layers, len(rows))} layers:")
    hdr = (f"  {'#':>3s} {'node':30s} {'tensor':30s} {'shape':16s} {'f32 range':>20s} {'mean|err|':>10s} "
           f"{'max|err|':>9s} {'rel err':>9s}")
    print(hdr)
    print("  " + "-" * (len(hdr) - 2))
    for rel, idx, nm, t, shape, lo, hi, me, mx in sorted(rows, key=lambda r: -r[0])[:a.layers]:
        rng = f"[{lo:.3g}, {hi:.3g}]"
        print(f"  {idx:3d} {nm[:30]:30s} {t[:30]:30s} {'x'.join(map(str, shape))[:16]:16s} {rng:>20s} {me:10.4g} "
              f"{mx:9.4g} {rel:9.3e}")


if __name__ == "__main__":
    sys.exit(main())
