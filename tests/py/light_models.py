#!/usr/bin/env python3
"""The ONNX backend 'light' models (onnx==1.22.0 ships onnx/backend/test/data/light/: AlexNet, DenseNet-121,
Inception v1 and v2, ResNet-50 (Caffe2, input gpu_0/data_0), ShuffleNet, SqueezeNet, VGG-19, ZFNet-512 — real
architectures with generated weights). Each is compiled by bundlec, linked with tests/c/run_bundle.c, run on the
input the ONNX backend runner uses for them (arange(n).reshape(shape) / n, float32) and compared with the stored
light_*_output_0.pb: |a-b| <= tol * max(1, |ref|) (tol 1e-4), and with onnxruntime on the same input.

The stored outputs are softmax probabilities that the generated weights make uniform (every value 0.001), which
on their own would check little. So each model is also compiled with a dozen intermediate tensors (node outputs
spread evenly through the graph, and the final op's input) as extra outputs, run on a random input, and every one
is compared with onnxruntime's; the checked tensors' spread is printed.

usage: light_models.py [--bundlec PATH] [--tol 1e-4] [--filter SUBSTR]. Exits non-zero if any model fails."""
import argparse, glob, os, subprocess, sys, tempfile, time
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dummy_input(vi):
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def scaled_err(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))))


def run_bundle(path, bundlec, name, ins, nout):
    """Compiles `path`, links it with the C driver and runs it on `ins`; returns (outputs, compile seconds)."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [bundlec, "compile", path, "-o", d, "--name", name]
        for n, a in ins:
            cmd += ["--input", f"{n}:{'x'.join(map(str, a.shape))}xf32"]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("compile: " + r.stderr.strip()[:400])
        tc = time.time() - t0
        exe = os.path.join(d, "run")
        r = subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", d, os.path.join(ROOT, "tests/c/run_bundle.c"),
                            os.path.join(d, name + ".o"), "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("link: " + r.stderr.strip()[:400])
        paths = []
        for i, (_, a) in enumerate(ins):
            p = os.path.join(d, f"in{i}.bin")
            a.tofile(p)
            paths.append(p)
        outs = [os.path.join(d, f"out{i}.bin") for i in range(nout)]
        r = subprocess.run([exe, os.path.join(d, name + ".weights")] + paths + outs, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"run ({r.returncode}): {r.stderr.strip()[:300]}")
        return [np.fromfile(o, dtype=np.float32) for o in outs], tc


def ort_run(model_bytes, ins):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"]).run(None, dict(ins))


def check(path, bundlec, tol):
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    ins = [(vi.name, dummy_input(vi)) for vi in m.graph.input if vi.name not in inits]
    ref = numpy_helper.to_array(onnx.load_tensor(path[: -len(".onnx")] + "_output_0.pb"))
    name = "light_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(path)[6:-5])
    try:
        (got,), tc = run_bundle(path, bundlec, name, ins, 1)
    except RuntimeError as e:
        return False, str(e)
    got = got.reshape(ref.shape)
    e_ref = scaled_err(got, ref)
    e_ort = scaled_err(got, ort_run(m.SerializeToString(), ins)[0])
    # Intermediate tensors as extra outputs, on a random input.
    nodes = list(m.graph.node)
    picks = [nodes[i].output[0] for i in np.linspace(0, len(nodes) - 2, 12).astype(int)] + [nodes[-1].input[0]]
    picks = list(dict.fromkeys(p for p in picks if p not in {o.name for o in m.graph.output}))
    for t in picks:
        m.graph.output.append(onnx.helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None))
    rng = np.random.default_rng(0)
    rins = [(n, rng.random(a.shape, dtype=np.float32)) for n, a in ins]
    with tempfile.TemporaryDirectory() as d:
        ext = os.path.join(d, "ext.onnx")
        onnx.save(m, ext)
        want = ort_run(m.SerializeToString(), rins)
        try:
            outs, _ = run_bundle(ext, bundlec, name, rins, 1 + len(picks))
        except RuntimeError as e:
            return False, "with intermediate outputs: " + str(e)
    errs = [scaled_err(o.reshape(w.shape), w) for o, w in zip(outs[1:], want[1:])]
    stds = [float(np.std(w.astype(np.float64))) for w in want[1:]]
    ok = max([e_ref, e_ort] + errs) <= tol
    return ok, (f"max scaled error vs stored output {e_ref:.2e}, vs onnxruntime {e_ort:.2e}; {len(picks)} "
                f"intermediate tensors on a random input vs onnxruntime {max(errs):.2e} (their std "
                f"{min(stds):.3g} .. {max(stds):.3g}); compile {tc:.1f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--filter", default="")
    a = ap.parse_args()
    base = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    models = sorted(p for p in glob.glob(os.path.join(base, "light_*.onnx")) if a.filter in os.path.basename(p))
    if not models:
        sys.exit(f"no light models under {base} (onnx {onnx.__version__}; 1.22.0 ships them)")
    failed = 0
    for p in models:
        ok, msg = check(p, a.bundlec, a.tol)
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(p)}: {msg}", flush=True)
    print(f"light models: {len(models) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
