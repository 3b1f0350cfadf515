#!/usr/bin/env python3
"""Int8 accuracy of a real pretrained classifier: does `bundlec profile` + `bundlec compile --load-profile` keep the
f32 model's top-1 class on held-out natural images?

Given an f32 ImageNet classifier (one input [1, 3, 224, 224] f32, one output [1, classes]; made for
EfficientNet-Lite0 by tests/py/gen_efficientnet.py) this
  1. builds held-out inputs from natural photos: crops of several sizes (the whole shorter side, 7/8, 3/4, 5/8 of
     it) at several positions, each also mirrored, each rescaled to 224x224 (bilinear with antialiasing) - at least
     --min-inputs of them (default 100);
  2. builds a separate calibration set (--calib N, default 16) from the same photos with crop sizes that no held-out
     input uses (0.95, 0.8, 0.55, 0.45 of the shorter side), written as .npy files;
  3. runs onnxruntime (the f32 reference) on every input, and prints each photo's f32 top-1 class;
  4. runs `bundlec profile` on the calibration .npy files, compiles the f32 model as is (a control: the f32 bundle
     must agree with onnxruntime) and int8 with --calibration minmax, then percentile and entropy while no method
     has reached --min-top1 (all three with --all-methods), links each bundle with tests/c/run_bundle.c and runs it
     on every held-out input (one process per input);
  5. prints a table: top-1 agreement with onnxruntime, how often the f32 top-1 is in the int8 top-5, the mean
     overlap of the two top-5 sets, the mean and largest absolute logit error, and timings; plus every layer that
     the compiler's -v report keeps in f32.
Exits 1 unless some int8 method reaches --min-top1 (default 0.99) top-1 agreement and the f32 bundle agrees on
every input; exit 2 when bundlec fails.

Photos: ../shared/images/*.png (cat, dog, zebra; 224x224) and, when scikit-image is importable, its bundled
photographs chelsea (cat, CC0), coffee (CC0), rocket (public domain, SpaceX) and astronaut (public domain, NASA).
Nothing is written outside --workdir (a temporary directory unless given). Pixel mapping: (p - 127) / 128 on RGB
0..255 (--norm imagenet for mean/std models).
Needs numpy, onnxruntime, Pillow (scikit-image optional) and a C compiler: run it with the torch virtualenv's
python (target/torchvenv/bin/python), which sees the system onnx/onnxruntime/numpy as well.

With --bf16 it also compiles the f32 model with --precision bf16 and reports that row (exit 1 unless its top-1
equals the f32 one on every input where f32 is confident).

usage: int8_real.py MODEL.onnx [--bundlec PATH] [--workdir DIR] [--min-top1 0.99] [--min-inputs 100] [--calib 16]
                    [--methods minmax,percentile,entropy] [--all-methods] [--cpu CPU] [--norm tf|imagenet] [--bf16]"""
import argparse
import glob
import math
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZE = 224
# Held-out crops: (fraction of the shorter side, anchor x, anchor y) with anchors 0 = left/top, 1 = right/bottom;
# every one is also taken mirrored. The second grid is used only when there are too few photos for --min-inputs.
HELD_A = [(1.0, 0.5, 0.5)] + [(f, ax, ay) for f in (0.875, 0.75, 0.625)
                              for ax, ay in ((0.5, 0.5), (0.0, 0.0), (1.0, 1.0))]
HELD_B = [(f, ax, ay) for f in (0.9375, 0.8125, 0.6875, 0.5625)
          for ax, ay in ((1.0, 0.0), (0.0, 1.0), (0.5, 0.0), (0.5, 1.0))]
# Calibration crops: sizes disjoint from every held-out size, anchors off the held-out ones
CALIB = [(0.8, 0.25, 0.75), (0.55, 0.75, 0.25), (0.95, 0.3, 0.3), (0.45, 0.6, 0.4), (0.8, 0.7, 0.3),
         (0.55, 0.2, 0.2)]
assert not {c[0] for c in CALIB} & {h[0] for h in HELD_A + HELD_B}


def load_photos():
    """[(name, HxWx3 uint8)]: the shared sample photos, then scikit-image's when it is installed."""
    from PIL import Image
    photos = []
    for p in sorted(glob.glob(os.path.join(ROOT, "..", "shared", "images", "*.png"))):
        photos.append((os.path.splitext(os.path.basename(p))[0], np.asarray(Image.open(p).convert("RGB"))))
    try:
        import skimage.data as sd
        for name in ("chelsea", "coffee", "rocket", "astronaut"):
            photos.append(("skimage_" + name, np.asarray(getattr(sd, name)())[..., :3]))
    except ImportError:
        print("scikit-image not importable: only ../shared/images is used")
    if not photos:
        sys.exit("no photos: ../shared/images/*.png missing and scikit-image not installed")
    return photos


def make_input(img, frac, ax, ay, flip, norm):
    """Crop a square of frac x the shorter side at anchor (ax, ay), resize it to SIZE x SIZE, mirror it if flip,
    normalise; returns float32 [1, 3, SIZE, SIZE]."""
    from PIL import Image
    h, w = img.shape[:2]
    side = frac * min(h, w)
    left, top = ax * (w - side), ay * (h - side)
    im = Image.fromarray(img).resize((SIZE, SIZE), Image.BILINEAR, box=(left, top, left + side, top + side))
    if flip:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(im, dtype=np.float32)
    if norm == "tf":
        a = (a - 127.0) / 128.0
    else:
        a = (a / 255.0 - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1)[None], dtype=np.float32)


def class_names():
    try:
        from torchvision.models._meta import _IMAGENET_CATEGORIES
        return list(_IMAGENET_CATEGORIES)
    except Exception:  # noqa: BLE001 - names are only decoration
        return None


def run(cmd, **kw):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return r, time.time() - t


def bundlec_or_die(cmd):
    r, dt = run(cmd)
    if r.returncode != 0:
        print(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
        sys.exit(2)
    return r, dt


def build_and_run(a, model, wd, tag, extra, held_paths, out_shape):
    """Compile (with extra flags), link, run on every held-out input. Returns (logits [N, classes], report dict)."""
    d = os.path.join(wd, tag)
    os.makedirs(d, exist_ok=True)
    name = "effq_" + re.sub(r"\W", "_", tag)
    cmd = [a.bundlec, "compile", model, "-o", d, "--name", name, "-v"] + extra
    if a.cpu:
        cmd += ["--cpu", a.cpu]
    r, t_compile = bundlec_or_die(cmd)
    log = r.stdout + r.stderr
    with open(os.path.join(d, "compile.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + log)
    kept = [ln.strip() for ln in log.splitlines() if "kept in f32" in ln or "keep f32" in ln]
    exe = os.path.join(d, "run")
    r, t_link = run(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests", "c", "run_bundle.c"),
                     os.path.join(d, name + ".o"), "-o", exe, "-lm"])
    if r.returncode != 0:
        print(f"FAILED to link {tag}:\n{r.stderr}")
        sys.exit(2)
    outs, ms = [], []
    t0 = time.time()
    for i, p in enumerate(held_paths):
        op = os.path.join(d, f"out{i:04d}.bin")
        r = subprocess.run([exe, os.path.join(d, name + ".weights"), p, op], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAILED: {tag} bundle on {p}: rc {r.returncode}\n{r.stdout}{r.stderr}")
            sys.exit(2)
        m = re.search(r"ran in ([0-9.]+) ms", r.stdout)
        if m:
            ms.append(float(m.group(1)))
        outs.append(np.fromfile(op, dtype=np.float32).reshape(out_shape))
        os.remove(op)
    m = re.search(r"int8: \d+ ops: (.*)", log)
    int8 = set(m.group(1).split(", ")) if m else set()
    products = [n.name for n in onnx.load(model, load_external_data=False).graph.node
                if n.op_type in ("Conv", "Gemm", "MatMul")]
    kept_names = {k.split("kept in f32: ", 1)[-1].split(" (")[0] for k in kept}
    simulated = [p for p in products if p not in int8 and p not in kept_names] if "--load-profile" in extra else []
    rep = dict(compile_s=t_compile, link_s=t_link, run_s=time.time() - t0,
               ms_median=float(np.median(ms)) if ms else float("nan"), kept=kept, simulated=simulated,
               summary=[ln.strip() for ln in log.splitlines() if ln.startswith("bundle ") or "passes:" in ln][:4]
               + ([f"int8 ops: {len(int8)}"] if m else []))
    return np.concatenate(outs, 0), rep


def ort_int8(model, wd, meth, in_name, calib, held):
    """onnxruntime's own static quantisation of the model (QDQ, per-channel s8 weights, u8 activations, the same
    calibration inputs, calibration method meth), run by onnxruntime on the held-out inputs."""
    import logging
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    logging.getLogger().setLevel(logging.ERROR)  # "consider pre-processing" advice
    ort.set_default_logger_severity(3)  # unused-initializer warnings of the calibration sessions

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{in_name: x} for x in calib])

        def get_next(self):
            return next(self.it, None)

    out = os.path.join(wd, f"ort_{meth}.onnx")
    cm = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
          "entropy": CalibrationMethod.Entropy}[meth]
    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, calibrate_method=cm)
    s = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {in_name: x})[0] for x in held], 0)


def compare(ref, got):
    r1, g1 = ref.argmax(1), got.argmax(1)
    r5 = np.argsort(-ref, 1)[:, :5]
    g5 = np.argsort(-got, 1)[:, :5]
    top1 = float((r1 == g1).mean())
    in5 = float(np.mean([r1[i] in g5[i] for i in range(len(r1))]))
    overlap = float(np.mean([len(set(r5[i]) & set(g5[i])) / 5 for i in range(len(r1))]))
    err = np.abs(ref - got)
    return dict(top1=top1, in5=in5, overlap=overlap, mean_err=float(err.mean()), max_err=float(err.max()),
                bad=[(int(i), int(r1[i]), int(g1[i])) for i in np.nonzero(r1 != g1)[0]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--workdir", help="keep every file here (default: a temporary directory, removed)")
    ap.add_argument("--min-top1", type=float, default=0.99)
    ap.add_argument("--min-inputs", type=int, default=100)
    ap.add_argument("--calib", type=int, default=16)
    ap.add_argument("--methods", default="minmax,percentile,entropy")
    ap.add_argument("--all-methods", action="store_true", help="try every method even after one passes")
    ap.add_argument("--cpu", help="passed to bundlec compile --cpu")
    ap.add_argument("--norm", choices=["tf", "imagenet"], default="tf")
    ap.add_argument("--bf16", action="store_true",
                    help="also compile the f32 model with --precision bf16 (needs --cpu with AVX-512 BF16, e.g. "
                         "native there) and report its agreement; exits 1 unless its top-1 agrees on every input "
                         "where the f32 model is confident (top-1 probability >= 0.5)")
    ap.add_argument("--ort-baseline", action="store_true",
                    help="also quantise with onnxruntime's quantize_static (QDQ, per-channel s8 weights, u8 "
                         "activations) on the same calibration inputs, for each method, and report its agreement")
    a = ap.parse_args()
    t_all = time.time()
    wd = a.workdir or tempfile.mkdtemp(prefix="int8_real_")
    os.makedirs(wd, exist_ok=True)
    try:
        return body(a, wd, t_all)
    finally:
        if not a.workdir:
            shutil.rmtree(wd, ignore_errors=True)


def body(a, wd, t_all):
    m = onnx.load(a.model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits]
    if len(inp) != 1 or len(m.graph.output) != 1:
        sys.exit("expects one input and one output")
    in_name = inp[0].name
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    names = class_names()

    def label(c):
        return f"{c} {names[c]}" if names else str(c)

    photos = load_photos()
    per_photo = max(2 * len(HELD_A), math.ceil(a.min_inputs / len(photos)))
    grid = [(f, ax, ay, fl) for f, ax, ay in HELD_A + HELD_B for fl in (False, True)]
    if per_photo > len(grid):
        sys.exit(f"{len(photos)} photos give at most {len(photos) * len(grid)} held-out inputs < {a.min_inputs}")
    grid = grid[:per_photo]
    hdir, cdir = os.path.join(wd, "heldout"), os.path.join(wd, "calib")
    os.makedirs(hdir, exist_ok=True)
    os.makedirs(cdir, exist_ok=True)

    t0 = time.time()
    held, held_paths, held_desc, seen = [], [], [], set()
    for pname, img in photos:
        for f, ax, ay, fl in grid:
            x = make_input(img, f, ax, ay, fl, a.norm)
            key = x.tobytes()
            if key in seen:  # a whole-image crop of a square photo is the same at every anchor
                continue
            seen.add(key)
            p = os.path.join(hdir, f"h{len(held):04d}.bin")
            x.tofile(p)
            held.append(x)
            held_paths.append(p)
            held_desc.append(f"{pname} crop {f:g}@({ax:g},{ay:g}){' flip' if fl else ''}")
    calib_paths = []
    for i in range(a.calib):
        pname, img = photos[i % len(photos)]
        f, ax, ay = CALIB[(i // len(photos)) % len(CALIB)]
        x = make_input(img, f, ax, ay, False, a.norm)
        assert x.tobytes() not in seen, "a calibration input equals a held-out one"
        p = os.path.join(cdir, f"c{i:02d}_{pname}.npy")
        np.save(p, x)
        calib_paths.append(p)
    t_inputs = time.time() - t0
    print(f"photos: {', '.join(n for n, _ in photos)}")
    print(f"held-out inputs: {len(held)} ({len(grid)} crop/flip variants per photo, duplicates dropped); "
          f"calibration inputs: {len(calib_paths)} (crop sizes {sorted({c[0] for c in CALIB})}, none held out); "
          f"built in {t_inputs:.1f} s")
    if len(held) < a.min_inputs:
        sys.exit(f"only {len(held)} held-out inputs < {a.min_inputs}")

    print("\nf32 (onnxruntime) top-1 of each whole photo (centre crop of the shorter side):")
    for pname, img in photos:
        o = sess.run(None, {in_name: make_input(img, 1.0, 0.5, 0.5, False, a.norm)})[0][0]
        p = np.exp(o - o.max())
        p /= p.sum()
        top5 = np.argsort(-o)[:5]
        print(f"  {pname:20s} {label(int(top5[0]))} ({p[top5[0]]:.2f}); top-5 {[int(c) for c in top5]}")

    t0 = time.time()
    ref = np.concatenate([sess.run(None, {in_name: x})[0] for x in held], 0)
    t_ort = time.time() - t0
    e = np.exp(ref - ref.max(1, keepdims=True))
    ref_conf = (e / e.sum(1, keepdims=True)).max(1)
    out_shape = (1,) + ref.shape[1:]
    print(f"onnxruntime on {len(held)} inputs: {t_ort:.2f} s")

    prof = os.path.join(wd, "profile.yaml")
    cmd = [a.bundlec, "profile", a.model, "--inputs"] + calib_paths + ["-o", prof]
    print("\n$ " + " ".join(cmd[:5]) + f" <{len(calib_paths)} .npy> -o {prof}")
    r, t_prof = bundlec_or_die(cmd)
    print(f"profile: {t_prof:.1f} s {(r.stdout + r.stderr).strip()[-300:]}")

    rows = []
    got, rep = build_and_run(a, a.model, wd, "f32", [], held_paths, out_shape)
    rows.append(("f32 bundle", compare(ref, got), rep))
    logits = {"f32 bundle": got}
    bf16_ok = True
    if a.bf16:
        got16, rep16 = build_and_run(a, a.model, wd, "bf16", ["--precision", "bf16"], held_paths, out_shape)
        rows.append(("bf16", compare(ref, got16), rep16))
        logits["bf16"] = got16
        e16 = np.exp(ref - ref.max(1, keepdims=True))
        confident16 = (e16 / e16.sum(1, keepdims=True)).max(1) >= 0.5
        bf16_ok = bool(np.all(got16.argmax(1)[confident16] == ref.argmax(1)[confident16]))
    passed = None
    for meth in [s for s in a.methods.split(",") if s]:
        got, rep = build_and_run(a, a.model, wd, "int8_" + meth, ["--load-profile", prof, "--calibration", meth],
                                 held_paths, out_shape)
        c = compare(ref, got)
        rows.append((f"int8 {meth}", c, rep))
        logits[f"int8 {meth}"] = got
        if c["top1"] >= a.min_top1 and passed is None:
            passed = meth
            if not a.all_methods:
                break

    if a.ort_baseline:
        for meth in [s for s in a.methods.split(",") if s]:
            t0 = time.time()
            got = ort_int8(a.model, wd, meth, in_name, [np.load(p) for p in calib_paths], held)
            logits[f"ort int8 {meth}"] = got
            rows.append((f"ort int8 {meth}", compare(ref, got),
                         dict(compile_s=time.time() - t0, run_s=0.0, ms_median=float("nan"), kept=[], summary=[])))

    print(f"\n{'build':18s} {'top-1 agree':>14s} {'f32 top1 in top-5':>18s} {'top-5 overlap':>14s} "
          f"{'mean|dlogit|':>12s} {'max|dlogit|':>11s} {'compile s':>9s} {'runs s':>7s} {'ms/run':>7s}")
    n = len(held)
    confident = ref_conf >= 0.5
    for tag, c, rep in rows:
        k = round(c["top1"] * n)
        print(f"{tag:18s} {k:4d}/{n} {c['top1']:7.2%} {c['in5']:18.2%} {c['overlap']:14.2%} {c['mean_err']:12.4f} "
              f"{c['max_err']:11.3f} {rep['compile_s']:9.2f} {rep['run_s']:7.1f} {rep['ms_median']:7.2f}")
    for tag, c, rep in rows:
        print()
        if rep["summary"]:
            print(f"{tag}: " + " | ".join(rep["summary"]))
            print(f"{tag}: {len(rep['kept'])} 'kept in f32' lines" + "".join("\n    " + k for k in rep["kept"]))
        if rep.get("simulated"):
            print(f"{tag}: {len(rep['simulated'])} products quantised (Q/DQ around them) but not made integer ops, "
                  "so computed in f32 on dequantised values: " + ", ".join(rep["simulated"]))
        for i, r1, g1 in c["bad"][:15]:
            print(f"    top-1 differs on {held_desc[i]}: f32 {label(r1)}, {tag} {label(g1)}")
        if len(c["bad"]) > 15:
            print(f"    ... and {len(c['bad']) - 15} more")
    print(f"\n{int(confident.sum())} of {n} held-out inputs have f32 top-1 probability >= 0.5; top-1 agreement on "
          "them: " + ", ".join(f"{tag} {compare(ref[confident], got[confident])['top1']:.2%}"
                               for tag, got in logits.items()))
    srt = np.sort(e / e.sum(1, keepdims=True), 1)
    clear = srt[:, -1] - srt[:, -2] > 0.1
    print(f"{int(clear.sum())} of {n} have an f32 top-1 probability more than 0.1 above the second's; top-1 agreement "
          "on them: " + ", ".join(f"{tag} {compare(ref[clear], got[clear])['top1']:.2%}"
                                  for tag, got in logits.items()))
    print(f"\ntotal {time.time() - t_all:.1f} s")
    f32_ok = rows[0][1]["top1"] == 1.0
    if not f32_ok:
        print("FAIL: the f32 bundle disagrees with onnxruntime")
    if passed:
        print(f"PASS: int8 {passed} keeps the f32 top-1 on >= {a.min_top1:.0%} of {n} held-out inputs")
    else:
        print(f"FAIL: no calibration method reaches {a.min_top1:.0%} top-1 agreement")
    if a.bf16:
        print(("PASS" if bf16_ok else "FAIL") + ": bf16 keeps the f32 top-1 on every input where f32 is confident")
    return 0 if passed and f32_ok and bf16_ok else 1


if __name__ == "__main__":
    sys.exit(main())
