#!/usr/bin/env python3
"""Writes MobileNetV2 (width 1.0, torchvision topology: 3x3 stride-2 stem conv with 32 channels, 17 inverted residual
blocks of expand 1x1 conv + BN + Relu6, depthwise 3x3 conv (group = channels) + BN + Relu6, project 1x1 conv + BN,
residual Add when stride is 1 and cin == cout, last 1x1 conv to 1280 + BN + Relu6, GlobalAveragePool, Flatten and a
Gemm head for 1000 classes) with deterministic weights, built with the onnx helper API. The input is `input`
[N, 3, 224, 224] float32, the output `output` [N, 1000].

Every Conv has no bias and is followed by an explicit BatchNormalization; Relu6 is written as Clip.

usage: gen_mobilenet.py OUT.onnx [--batch N] [--relu6-form clip11|clip6] [--opset 13]
--relu6-form clip11 (default): Clip(x, min, max) with min/max as constant initializer inputs (opset >= 11).
--relu6-form clip6: Clip with min/max attributes (the opset 6-10 form); the model is then written with opset 10
(whatever --opset says), where Flatten, Gemm, BatchNormalization and GlobalAveragePool all exist as used.

The weights are scaled so activations stay O(1) through the network: He-scaled conv weights, BN gain 1 on the
expand/depthwise convs and 0.3 on each project conv that feeds a residual Add (as zero-init-residual training does).
Checked with onnxruntime 1.31.1 on a standard-normal input (seed 0), batch 1:
  clip11 opset 13: output finite, mean 0.038, std 1.56, min -5.38, max 4.77 (gap input: mean 0.98, std 1.17)
  clip6  opset 10: identical output (max abs difference 0)"""
import argparse
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

# (expand ratio t, output channels c, repeats n, first stride s), as in torchvision's mobilenet_v2
SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


class Builder:
    def __init__(self, seed, relu6_form):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n, self.relu6_form = [], [], 0, relu6_form
        if relu6_form == "clip11":
            self.const("relu6.min", np.array(0.0))
            self.const("relu6.max", np.array(6.0))

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def const(self, name, a):
        self.inits.append(nh.from_array(np.asarray(a).astype(np.float32), name))
        return name

    def relu6(self, x):
        r = x + ".relu6"
        if self.relu6_form == "clip11":
            self.nodes.append(h.make_node("Clip", [x, "relu6.min", "relu6.max"], [r], name=r))
        else:
            self.nodes.append(h.make_node("Clip", [x], [r], name=r, min=0.0, max=6.0))
        return r

    def conv_bn(self, x, cin, cout, k, stride, relu6, prefix, group=1, gain=1.0):
        fan_in = cin // group * k * k
        w = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
        gamma = gain * (1.0 + 0.1 * self.rng.standard_normal(cout))
        beta = 0.1 * self.rng.standard_normal(cout)
        mean = 0.1 * self.rng.standard_normal(cout)
        var = 1.0 + 0.1 * np.abs(self.rng.standard_normal(cout))
        y = self.name(prefix)
        wn = self.const(y + ".weight", w)
        self.nodes.append(h.make_node("Conv", [x, wn], [y + ".conv"], name=y, kernel_shape=[k, k], pads=[k // 2] * 4,
                                      strides=[stride, stride], group=group))
        p = [self.const(y + ".bn." + t, v) for t, v in (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var))]
        self.nodes.append(h.make_node("BatchNormalization", [y + ".conv"] + p, [y], name=y + ".bn", epsilon=1e-5))
        return self.relu6(y) if relu6 else y

    def inverted_residual(self, x, cin, cout, stride, t, prefix):
        hidden = cin * t
        residual = stride == 1 and cin == cout
        y = x
        if t != 1:
            y = self.conv_bn(y, cin, hidden, 1, 1, True, prefix + ".expand")
        y = self.conv_bn(y, hidden, hidden, 3, stride, True, prefix + ".dw", group=hidden)
        y = self.conv_bn(y, hidden, cout, 1, 1, False, prefix + ".project", gain=0.3 if residual else 1.0)
        if not residual:
            return y
        s = self.name(prefix + ".add")
        self.nodes.append(h.make_node("Add", [y, x], [s], name=s))
        return s


def mobilenet_v2(batch, relu6_form, opset, seed=2):
    if relu6_form == "clip6":
        opset = 10
    elif opset < 11:
        raise SystemExit("--relu6-form clip11 needs --opset >= 11")
    b = Builder(seed, relu6_form)
    x, cin = b.conv_bn("input", 3, 32, 3, 2, True, "features.0"), 32
    idx = 1
    for t, c, n, s in SETTINGS:
        for i in range(n):
            x = b.inverted_residual(x, cin, c, s if i == 0 else 1, t, f"features.{idx}")
            cin, idx = c, idx + 1
    x = b.conv_bn(x, cin, 1280, 1, 1, True, f"features.{idx}")
    b.nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"], name="avgpool"))
    b.nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fw = b.const("classifier.weight", b.rng.standard_normal((1000, 1280)) * np.sqrt(1.0 / 1280))
    fb = b.const("classifier.bias", 0.01 * b.rng.standard_normal(1000))
    b.nodes.append(h.make_node("Gemm", ["flat", fw, fb], ["output"], name="classifier", transB=1))
    g = h.make_graph(b.nodes, "mobilenet_v2", [h.make_tensor_value_info("input", T.FLOAT, [batch, 3, 224, 224])],
                     [h.make_tensor_value_info("output", T.FLOAT, [batch, 1000])], b.inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="bundlec-gen-mobilenet")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--relu6-form", choices=["clip11", "clip6"], default="clip11")
    ap.add_argument("--opset", type=int, default=13)
    a = ap.parse_args()
    onnx.save(mobilenet_v2(a.batch, a.relu6_form, a.opset), a.out)
