#!/usr/bin/env python3
"""Exports three models with torch.onnx.export (opset 17, the TorchScript exporter: dynamo=False where the argument
exists), randomly initialised under a fixed seed (the CNNs' BatchNorm
running stats recomputed from random batches so activations stay O(1)), eval mode, static shapes, batch 1:

  OUTDIR/torch_mobilenet_v2.onnx  torchvision mobilenet_v2(weights=None)   input  float32 [1, 3, 224, 224] -> output
  OUTDIR/torch_resnet50.onnx      torchvision resnet50(weights=None)       input  float32 [1, 3, 224, 224] -> output
  OUTDIR/torch_encoder.onnx       nn.Embedding token + position embeddings in front of nn.TransformerEncoder
                                  (batch_first, d_model 128, 4 heads, FFN 512, 2 layers, gelu, final LayerNorm)
                                                                           input_ids int64 [1, 16] -> last_hidden_state

Each export is run in onnxruntime against the torch model on a seeded input and the max abs difference printed.
Needs torch and torchvision (plus onnx, onnxruntime, numpy); no weights are downloaded.

usage: gen_torch.py OUTDIR [--seq 16] [--opset 17]"""
import argparse
import inspect
import os
import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vocab=1000, d_model=128, heads=4, layers=2, max_pos=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_pos, d_model)
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0), persistent=False)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)

    def forward(self, input_ids):
        pos = self.position_ids[:, : input_ids.shape[1]]
        return self.encoder(self.tok(input_ids) + self.pos(pos))


def calibrate(model, generator, batches=2, batch=4):
    """Freshly initialised torchvision CNNs have BN running stats mean 0 / var 1, and through mobilenet_v2 that
    shrinks the output to ~1e-9, useless as a test. Recompute the running stats from a few random batches (train
    mode, cumulative average) so every BN really normalises and activations stay O(1)."""
    for mod in model.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            mod.reset_running_stats()
            mod.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch, 3, 224, 224, generator=generator))
    return model.eval()


def export(model, example, path, input_name, output_name, opset):
    model.eval()
    kwargs = dict(input_names=[input_name], output_names=[output_name], opset_version=opset, do_constant_folding=True)
    params = inspect.signature(torch.onnx.export).parameters
    if "dynamo" in params:
        kwargs["dynamo"] = False
    # Grad stays enabled on purpose: with it the TransformerEncoderLayer takes its plain (exportable) path
    # rather than the fused fast path that eval + no_grad selects.
    torch.onnx.export(model, (example,), path, **kwargs)
    with torch.no_grad():
        ref = model(example).numpy()
    onnx.checker.check_model(onnx.load(path))
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {input_name: example.numpy()})[0]
    m = onnx.load(path)
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{os.path.basename(path)}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, ops {ops}; "
          f"ort vs torch max abs diff {np.abs(got - ref).max():.2e}, output std {got.std():.3f}, "
          f"finite {bool(np.isfinite(got).all())}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    image = torch.randn(1, 3, 224, 224, generator=g)
    ids = torch.randint(0, 1000, (1, a.seq), generator=g, dtype=torch.int64)
    torch.manual_seed(0)
    export(calibrate(torchvision.models.mobilenet_v2(weights=None), g), image, os.path.join(a.outdir, "torch_mobilenet_v2.onnx"),
           "input", "output", a.opset)
    torch.manual_seed(0)
    export(calibrate(torchvision.models.resnet50(weights=None), g), image, os.path.join(a.outdir, "torch_resnet50.onnx"),
           "input", "output", a.opset)
    torch.manual_seed(0)
    export(Encoder(), ids, os.path.join(a.outdir, "torch_encoder.onnx"), "input_ids", "last_hidden_state", a.opset)


if __name__ == "__main__":
    main()
