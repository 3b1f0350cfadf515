#!/usr/bin/env python3
"""Writes ResNet-50 v1 (torchvision topology: stride on the bottleneck's 3x3 conv, Conv without bias followed by
BatchNormalization, Flatten + Gemm head) with deterministic weights, built with the onnx helper API.

usage: gen_resnet.py OUT.onnx [--batch N] [--fold-bn] [--opset 13] [--v2]
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


def classifier_model(b, x, name, batch, opset, size=224):
    """Global average pool, Flatten and Gemm to 1000 classes on x [N, 2048, size/32, size/32]; the checked
    ModelProto, whose input is [batch, 3, size, size]."""
    b.nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"], name="avgpool"))
    b.nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fw = b.const("fc.weight", b.rng.standard_normal((1000, 2048)) * np.sqrt(1.0 / 2048))
    fb = b.const("fc.bias", 0.01 * b.rng.standard_normal(1000))
    b.nodes.append(h.make_node("Gemm", ["flat", fw, fb], ["output"], name="fc", transB=1))
    g = h.make_graph(b.nodes, name, [h.make_tensor_value_info("input", T.FLOAT, [batch, 3, size, size])],
                     [h.make_tensor_value_info("output", T.FLOAT, [batch, 1000])], b.inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="bundlec-gen-resnet")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def bn_relu(b, x, c, prefix, relu=True):
    """A standalone BatchNormalization (+ Relu): pre-activation, nothing to fold it into."""
    gamma = 1.0 + 0.1 * b.rng.standard_normal(c)
    p = [b.const(prefix + "." + t, v) for t, v in (("scale", gamma), ("bias", 0.1 * b.rng.standard_normal(c)),
                                                   ("mean", 0.1 * b.rng.standard_normal(c)),
                                                   ("var", 1.0 + 0.1 * np.abs(b.rng.standard_normal(c))))]
    y = b.name(prefix)
    b.nodes.append(h.make_node("BatchNormalization", [x] + p, [y], name=y, epsilon=1e-5))
    if not relu:
        return y
    r = y + ".relu"
    b.nodes.append(h.make_node("Relu", [y], [r], name=r))
    return r


def conv(b, x, cin, cout, k, stride, prefix, gain=1.0):
    w = b.rng.standard_normal((cout, cin, k, k)) * gain * np.sqrt(2.0 / (cin * k * k))
    y = b.name(prefix)
    b.nodes.append(h.make_node("Conv", [x, b.const(y + ".weight", w)], [y], name=y, kernel_shape=[k, k],
                               pads=[k // 2] * 4, strides=[stride, stride]))
    return y


def resnet50_v2(batch, opset, seed=51):
    """ResNet-50 v2 (the model zoo's resnet50-v2-7 structure): BatchNormalization of the input, 7x7 conv, BN + Relu,
    max pool, pre-activation bottlenecks (BN + Relu before every conv; the projection shortcut reads the
    pre-activated input), a final BN + Relu, global average pool, Flatten and Gemm."""
    b = Builder(seed, False)
    x = bn_relu(b, "input", 3, "bn_data", relu=False)
    x = conv(b, x, 3, 64, 7, 2, "conv0")
    x = bn_relu(b, x, 64, "bn0")
    b.nodes.append(h.make_node("MaxPool", [x], ["pool0"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "pool0", 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for bi in range(blocks):
            p = f"stage{li + 1}.{bi}"
            s = stride if bi == 0 else 1
            pre = bn_relu(b, x, cin, p + ".bn1")
            idn = conv(b, pre, cin, width * 4, 1, s, p + ".downsample") if bi == 0 else x
            y = conv(b, pre, cin, width, 1, 1, p + ".conv1")
            y = conv(b, bn_relu(b, y, width, p + ".bn2"), width, width, 3, s, p + ".conv2")
            # A small gain on the residual branch keeps activations O(1) through 16 blocks.
            y = conv(b, bn_relu(b, y, width, p + ".bn3"), width, width * 4, 1, 1, p + ".conv3", gain=0.2)
            o = b.name(p + ".add")
            b.nodes.append(h.make_node("Add", [y, idn], [o], name=o))
            x, cin = o, width * 4
    x = bn_relu(b, x, cin, "bn_final")
    return classifier_model(b, x, "resnet50_v2", batch, opset)


def resnet50(batch, fold_bn, opset, seed=50, size=224):
    b = Builder(seed, fold_bn)
    x = b.conv_bn("input", 3, 64, 7, 2, True, "conv1")
    b.nodes.append(h.make_node("MaxPool", [x], ["pool1"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "pool1", 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for bi in range(blocks):
            x = b.bottleneck(x, cin, width, stride if bi == 0 else 1, bi == 0, f"layer{li + 1}.{bi}")
            cin = width * 4
    return classifier_model(b, x, "resnet50", batch, opset, size)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--fold-bn", action="store_true")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--v2", action="store_true", help="pre-activation ResNet-50 v2 (model zoo resnet50-v2-7 structure)")
    ap.add_argument("--size", type=int, default=224, help="input height and width (ResNet-50 v1 only)")
    a = ap.parse_args()
    onnx.save(resnet50_v2(a.batch, a.opset) if a.v2 else resnet50(a.batch, a.fold_bn, a.opset, size=a.size), a.out)
