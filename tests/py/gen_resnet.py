#!/usr/bin/env python3
"""Writes ResNet-50 v1 (torchvision topology: stride on the bottleneck's 3x3 conv, Conv without bias followed by
BatchNormalization, Flatten + Gemm head) with deterministic weights, built with the onnx helper API.

usage: gen_resnet.py OUT.onnx [--batch N] [--fold-bn] [--opset 13]
--fold-bn writes Conv with bias and no BatchNormalization (the form torch.onnx.export produces in eval mode)."""
import argparse
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh


class Builder:
    def __init__(self, seed, fold_bn):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n, self.fold_bn = [], [], 0, fold_bn

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def const(self, name, a):
        self.inits.append(nh.from_array(a.astype(np.float32), name))
        return name

    def conv_bn(self, x, cin, cout, k, stride, relu, prefix, gain=1.0):
        fan_in = cin * k * k
        w = self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan_in)
        gamma = gain * (1.0 + 0.1 * self.rng.standard_normal(cout))
        beta = 0.1 * self.rng.standard_normal(cout)
        mean = 0.1 * self.rng.standard_normal(cout)
        var = 1.0 + 0.1 * np.abs(self.rng.standard_normal(cout))
        pads = [k // 2] * 4
        y = self.name(prefix)
        if self.fold_bn:
            s = gamma / np.sqrt(var + 1e-5)
            wn = self.const(y + ".weight", w * s[:, None, None, None])
            bn = self.const(y + ".bias", beta - mean * s)
            self.nodes.append(h.make_node("Conv", [x, wn, bn], [y], name=y, kernel_shape=[k, k], pads=pads, strides=[stride, stride]))
        else:
            wn = self.const(y + ".weight", w)
            self.nodes.append(h.make_node("Conv", [x, wn], [y + ".conv"], name=y, kernel_shape=[k, k], pads=pads, strides=[stride, stride]))
            p = [self.const(y + ".bn." + t, v) for t, v in (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var))]
            self.nodes.append(h.make_node("BatchNormalization", [y + ".conv"] + p, [y], name=y + ".bn", epsilon=1e-5))
        if relu:
            r = y + ".relu"
            self.nodes.append(h.make_node("Relu", [y], [r], name=r))
            return r
        return y

    def bottleneck(self, x, cin, width, stride, down, prefix):
        out = width * 4
        a = self.conv_bn(x, cin, width, 1, 1, True, prefix + ".conv1")
        b = self.conv_bn(a, width, width, 3, stride, True, prefix + ".conv2")
        # A small gain on the last BN of each residual branch keeps activations O(1) through 16 blocks
        # (as zero-init-residual training does), so the outputs are a well-conditioned test.
        c = self.conv_bn(b, width, out, 1, 1, False, prefix + ".conv3", gain=0.2)
        idn = self.conv_bn(x, cin, out, 1, stride, False, prefix + ".downsample") if down else x
        s = self.name(prefix + ".add")
        self.nodes.append(h.make_node("Add", [c, idn], [s], name=s))
        r = s + ".relu"
        self.nodes.append(h.make_node("Relu", [s], [r], name=r))
        return r


def resnet50(batch, fold_bn, opset, seed=50):
    b = Builder(seed, fold_bn)
    x = b.conv_bn("input", 3, 64, 7, 2, True, "conv1")
    b.nodes.append(h.make_node("MaxPool", [x], ["pool1"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "pool1", 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for bi in range(blocks):
            x = b.bottleneck(x, cin, width, stride if bi == 0 else 1, bi == 0, f"layer{li + 1}.{bi}")
            cin = width * 4
    b.nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"], name="avgpool"))
    b.nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fw = b.const("fc.weight", b.rng.standard_normal((1000, 2048)) * np.sqrt(1.0 / 2048))
    fb = b.const("fc.bias", 0.01 * b.rng.standard_normal(1000))
    b.nodes.append(h.make_node("Gemm", ["flat", fw, fb], ["output"], name="fc", transB=1))
    g = h.make_graph(b.nodes, "resnet50", [h.make_tensor_value_info("input", T.FLOAT, [batch, 3, 224, 224])],
                     [h.make_tensor_value_info("output", T.FLOAT, [batch, 1000])], b.inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="bundlec-gen-resnet")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--fold-bn", action="store_true")
    ap.add_argument("--opset", type=int, default=13)
    a = ap.parse_args()
    onnx.save(resnet50(a.batch, a.fold_bn, a.opset), a.out)
