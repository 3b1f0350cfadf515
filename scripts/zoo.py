#!/usr/bin/env python3
"""The model zoo: architectures people deploy, exported by torch.onnx from torchvision, timm and Hugging Face
transformers with random weights (no model hub is reachable), compiled by bundlec and checked against
onnxruntime. BatchNorm statistics are calibrated on random batches first (cumulative running averages, in
training mode, no gradients) so that activations look like a trained net's rather than blowing up.

For each model: export (opset 17), `bundlec compile`, link with tests/c/run_bundle.c, run on one seeded input,
compare with onnxruntime (max |a - b| / max(1, |ref|)); and with the torch model run in float64 on the same input,
onnxruntime's and bundlec's own distance from it. A model passes when it matches onnxruntime within 1e-4, or,
ill-conditioned in f32, when bundlec's distance from float64 is within 2x onnxruntime's (the table says which).
Times: 1 thread, the median of --reps runs after a warm-up, bundlec's entry function against an onnxruntime
session (CPU named above the table).

Detection models are their backbone and head (box regression and class logits per anchor): the data-dependent
post-processing (NMS, top-k) stays on the host, as `bundlec compile --outputs` does for a full export.

usage: zoo.py [--list ci|all] [--only NAME ...] [--bundlec PATH] [--reps N] [--out DIR]
Runs under a Python with torch, torchvision, timm and transformers (scripts/torch_models.sh's virtualenv)."""
import argparse, os, subprocess, sys, tempfile, time, traceback
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tv(name, features=False, **kw):
    """A torchvision model by name; `features`: without its classifier head (torchvision's ViT zero-initialises
    the head, whose output would then be the constant bias)."""
    def make():
        import torch
        import torchvision.models as M
        m = getattr(M, name)(weights=None, **kw)
        if features:
            m.heads = torch.nn.Identity()
        return m, [1, 3, 224, 224]
    return make


def tv_seg(name):
    def make():
        import torch
        import torchvision.models.segmentation as S

        class Out(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        return Out(getattr(S, name)(weights=None, weights_backbone=None, aux_loss=None)), [1, 3, 224, 224]
    return make


def tv_det(name, size):
    """A torchvision detector's backbone and head: the per-anchor box regressions and class logits."""
    def make():
        import torch
        import torchvision.models.detection as D

        class Head(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.backbone, self.head = m.backbone, m.head

            def forward(self, x):
                f = list(self.backbone(x).values())
                h = self.head(f)
                return h["bbox_regression"], h["cls_logits"]
        return Head(getattr(D, name)(weights=None, weights_backbone=None)), [1, 3, size, size]
    return make


def timm_model(name, size=224):
    def make():
        import timm
        return timm.create_model(name, pretrained=False), [1, 3, size, size]
    return make


def hf(kind):
    """A Hugging Face model from a config with random init; token inputs become a fixed-length id tensor."""
    def make():
        import torch
        import transformers as T
        if kind == "whisper_encoder":
            cfg = T.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                                  num_mel_bins=80, max_source_positions=1500)
            enc = T.WhisperModel(cfg).encoder

            class Enc(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.e = enc

                def forward(self, x):
                    return self.e(x).last_hidden_state
            return Enc(), [1, 80, 3000]
        if kind == "vit":
            m = T.ViTModel(T.ViTConfig(), add_pooling_layer=False)

            class V(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = m

                def forward(self, x):
                    return self.m(pixel_values=x).last_hidden_state
            return V(), [1, 3, 224, 224]
        cfgs = {
            "bert": (T.BertConfig(), T.BertModel, 128),
            "distilbert": (T.DistilBertConfig(), T.DistilBertModel, 128),
            "gpt2": (T.GPT2Config(), T.GPT2Model, 64),
        }
        cfg, cls, seq = cfgs[kind]
        m = cls(cfg)

        class Tok(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, ids):
                return self.m(input_ids=ids).last_hidden_state
        return Tok(), ("ids", [1, seq], cfg.vocab_size)
    return make


# (name, builder, in the CI subset)
ZOO = [
    ("resnet18", tv("resnet18"), True),
    ("resnet50", tv("resnet50"), False),
    ("wide_resnet50_2", tv("wide_resnet50_2"), False),
    ("resnext50_32x4d", tv("resnext50_32x4d"), False),
    ("mobilenet_v2", tv("mobilenet_v2"), True),
    ("mobilenet_v3_small", tv("mobilenet_v3_small"), True),
    ("mobilenet_v3_large", tv("mobilenet_v3_large"), False),
    ("efficientnet_b0", tv("efficientnet_b0"), False),
    ("efficientnet_v2_s", tv("efficientnet_v2_s"), False),
    ("regnet_y_400mf", tv("regnet_y_400mf"), False),
    ("densenet121", tv("densenet121"), False),
    ("squeezenet1_1", tv("squeezenet1_1"), True),
    ("shufflenet_v2_x1_0", tv("shufflenet_v2_x1_0"), True),
    ("mnasnet1_0", tv("mnasnet1_0"), False),
    ("googlenet", tv("googlenet", aux_logits=False, init_weights=True), False),
    ("inception_v3", tv("inception_v3", aux_logits=False, init_weights=True), False),
    ("alexnet", tv("alexnet"), False),
    ("convnext_tiny", tv("convnext_tiny"), False),
    ("vit_b_16", tv("vit_b_16", features=True), False),
    ("swin_t", tv("swin_t"), False),
    ("maxvit_t", tv("maxvit_t"), False),
    ("fcn_resnet50", tv_seg("fcn_resnet50"), False),
    ("deeplabv3_mobilenet_v3_large", tv_seg("deeplabv3_mobilenet_v3_large"), False),
    ("lraspp_mobilenet_v3_large", tv_seg("lraspp_mobilenet_v3_large"), True),
    ("ssdlite320_mobilenet_v3_large", tv_det("ssdlite320_mobilenet_v3_large", 320), True),
    ("ssd300_vgg16", tv_det("ssd300_vgg16", 300), False),
    ("timm_resnet50d", timm_model("resnet50d"), False),
    ("timm_efficientnet_lite0", timm_model("efficientnet_lite0"), False),
    ("timm_deit_tiny", timm_model("deit_tiny_patch16_224"), True),
    ("timm_convnext_nano", timm_model("convnext_nano"), False),
    ("timm_mobilevit_xxs", timm_model("mobilevit_xxs", 256), False),
    ("timm_regnety_002", timm_model("regnety_002"), False),
    ("bert_base", hf("bert"), False),
    ("distilbert", hf("distilbert"), True),
    ("gpt2", hf("gpt2"), False),
    ("hf_vit_base", hf("vit"), False),
    ("whisper_encoder", hf("whisper_encoder"), False),
]


def calibrate_bn(model, shape, torch):
    """BatchNorm running statistics from 4 random batches (cumulative averages), then eval mode."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn([4] + list(shape[1:]), generator=g))
    model.eval()


def export(name, make, d, torch):
    model, spec = make()
    model.eval()
    if isinstance(spec, tuple):  # token ids
        _, shape, vocab = spec
        x = torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0))
    else:
        shape = spec
        calibrate_bn(model, shape, torch)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    path = os.path.join(d, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, opset_version=17, input_names=["x"], dynamo=False)
        ref64 = model.double()(x if x.dtype == torch.int64 else x.double())
    refs64 = [r.numpy() for r in (ref64 if isinstance(ref64, (tuple, list)) else (ref64,))]
    return path, x.numpy(), refs64


def scaled(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)))) if a.size else 0.0


def run_ort(path, x, reps):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {s.get_inputs()[0].name: x}
    outs = s.run(None, feed)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        s.run(None, feed)
        ts.append((time.perf_counter() - t) * 1e3)
    return outs, float(np.median(ts))


def run_bundlec(bundlec, path, x, outs_ref, d, reps):
    name = "zoo"
    out = os.path.join(d, "b")
    dt = "i64" if x.dtype == np.int64 else "f32"
    t0 = time.perf_counter()
    r = subprocess.run([bundlec, "compile", path, "-o", out, "--name", name, "--input",
                        f"x:{'x'.join(map(str, x.shape))}x{dt}"], capture_output=True, text=True)
    compile_s = time.perf_counter() - t0
    if r.returncode != 0:
        lines = [l.strip() for l in r.stderr.splitlines() if l.strip() and not l.startswith("supported ops")]
        return None, None, compile_s, " / ".join(lines[:3]) or "compile failed"
    exe = os.path.join(out, "run")
    subprocess.run(["cc", "-O2", f"-DBUNDLE={name}", "-I", out, os.path.join(ROOT, "tests", "c", "run_bundle.c"),
                    os.path.join(out, name + ".o"), "-o", exe], check=True, capture_output=True, text=True)
    xin = os.path.join(out, "x.bin")
    x.tofile(xin)
    ys = [os.path.join(out, f"y{i}.bin") for i in range(len(outs_ref))]
    env = dict(os.environ, BUNDLE_WARMUP_MS="200", BUNDLE_REPEAT=str(reps))
    p = subprocess.run([exe, os.path.join(out, name + ".weights"), xin] + ys, capture_output=True, text=True,
                       env=env, check=True)
    ms = float(np.median([float(l.split()[-2]) for l in p.stdout.splitlines() if "ran in" in l]))
    got = [np.fromfile(y, dtype=r.dtype).reshape(r.shape) for y, r in zip(ys, outs_ref)]
    return got, ms, compile_s, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", choices=["ci", "all"], default="all")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--out", help="keep the exported models here")
    args = ap.parse_args()
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    # nn.MultiheadAttention's fused inference path has no ONNX export (torchvision's ViT).
    torch.backends.mha.set_fastpath_enabled(False)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    import onnxruntime
    print(f"CPU: {cpu}; onnxruntime {onnxruntime.__version__}, torch {torch.__version__}; 1 thread; "
          f"times: median of {args.reps} runs after warm-up")
    print("| model | compile | max error vs onnxruntime | distance from float64: bundlec / onnxruntime | result | "
          "bundlec ms | onnxruntime ms | ratio | compile s |")
    print("|---|---|---|---|---|---|---|---|---|")
    zoo = [(n, m) for n, m, ci in ZOO if (args.list == "all" or ci) and (not args.only or n in args.only)]
    failed = 0
    for name, make in zoo:
        with tempfile.TemporaryDirectory() as tmp:
            d = args.out or tmp
            os.makedirs(d, exist_ok=True)
            try:
                path, x, refs64 = export(name, make, d, torch)
            except Exception as e:  # an export the exporter cannot do is the zoo's problem, not bundlec's
                print(f"| {name} | export failed: {type(e).__name__}: {str(e).splitlines()[0][:120]} | | | skip | | | | |",
                      flush=True)
                continue
            ort_outs, ort_ms = run_ort(path, x, args.reps)
            try:
                got, ms, cs, err = run_bundlec(args.bundlec, path, x, ort_outs, tmp, args.reps)
            except Exception:
                got, ms, cs, err = None, None, 0.0, traceback.format_exc().splitlines()[-1]
            if got is None:
                failed += 1
                print(f"| {name} | {err[:160]} | | | FAIL | | {ort_ms:.2f} | | {cs:.1f} |", flush=True)
                continue
            e_ort = max(scaled(g, o) for g, o in zip(got, ort_outs))
            d_ours = max(scaled(g, r) for g, r in zip(got, refs64))
            d_ort = max(scaled(o, r) for o, r in zip(ort_outs, refs64))
            if e_ort <= args.tol:
                result = "pass"
            elif d_ours <= 2 * d_ort:
                result = "pass (ill-conditioned in f32: within 2x onnxruntime's distance from float64)"
            else:
                result, failed = "FAIL", failed + 1
            print(f"| {name} | ok | {e_ort:.2e} | {d_ours:.2e} / {d_ort:.2e} | {result} | {ms:.2f} | {ort_ms:.2f} | "
                  f"{ms / ort_ms:.2f} | {cs:.1f} |", flush=True)
    print(f"{len(zoo) - failed} of {len(zoo)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
