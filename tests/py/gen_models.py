#!/usr/bin/env python3
"""Writes the Python-built test models (single-op models over awkward shapes and padding cases, and a small
CNN) into DIR, using the onnx package's helpers — a different tool from the Rust builders in tests/src.

usage: gen_models.py DIR"""
import os, sys
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

rng = np.random.default_rng(1)
r = lambda *s: rng.standard_normal(s).astype(np.float32)


def save(d, name, nodes, ins, outs, inits=None, opset=17):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(k, T.FLOAT, s) for k, s in ins],
                     [h.make_tensor_value_info(k, T.FLOAT, s) for k, s in outs],
                     [nh.from_array(v, k) for k, v in (inits or {}).items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(d, name + ".onnx"))


def single(d, name, node, ins, out_shape, inits=None, opset=17):
    save(d, name, [node], ins, [("y", out_shape)], inits, opset)


def main(d):
    os.makedirs(d, exist_ok=True)
    N = h.make_node
    single(d, "conv3x3", N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]), [("x", [2, 3, 7, 9])], [2, 5, 7, 9], {"w": r(5, 3, 3, 3), "b": r(5)})
    single(d, "conv1x1", N("Conv", ["x", "w"], ["y"]), [("x", [1, 6, 5, 5])], [1, 7, 5, 5], {"w": r(7, 6, 1, 1)})
    single(d, "conv_strided_dilated", N("Conv", ["x", "w"], ["y"], pads=[2, 1, 0, 3], strides=[2, 3], dilations=[2, 1]), [("x", [1, 3, 11, 13])], [1, 6, 5, 5], {"w": r(6, 3, 3, 3)})
    single(d, "conv_same_upper", N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2]), [("x", [1, 2, 9, 8])], [1, 3, 5, 4], {"w": r(3, 2, 4, 4)})
    single(d, "conv_grouped", N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=2), [("x", [2, 4, 6, 6])], [2, 6, 6, 6], {"w": r(6, 2, 3, 3), "b": r(6)})
    single(d, "dwconv", N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=4, strides=[2, 2]), [("x", [1, 4, 9, 10])], [1, 4, 5, 5], {"w": r(4, 1, 3, 3)})
    # TensorFlow-style SAME padding as an explicit asymmetric zero Pad (folded into the Conv by fold_pad), for a
    # depthwise 5x5 stride-2 conv and a dense 3x3 one.
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
    save(d, "pad_dwconv", [N("Pad", ["x", "pads"], ["xp"]), N("Conv", ["xp", "w"], ["y"], group=6, strides=[2, 2])],
         [("x", [1, 6, 21, 22])], [("y", [1, 6, 10, 11])], {"w": r(6, 1, 5, 5), "pads": pads})
    save(d, "pad_conv", [N("Pad", ["x", "pads"], ["xp"]), N("Conv", ["xp", "w", "b"], ["y"])],
         [("x", [1, 3, 11, 12])], [("y", [1, 5, 12, 13])], {"w": r(5, 3, 3, 3), "b": r(5), "pads": pads})
    single(d, "maxpool", N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), [("x", [1, 2, 9, 10])], [1, 2, 5, 5])
    single(d, "maxpool_ceil", N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), [("x", [1, 3, 10, 11])], [1, 3, 5, 5])
    single(d, "avgpool_exclude_pad", N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 1], pads=[1, 1, 0, 0]), [("x", [1, 2, 5, 5])], [1, 2, 5, 5])
    single(d, "avgpool_include_pad", N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1), [("x", [1, 2, 7, 8])], [1, 2, 4, 4])
    single(d, "avgpool_ceil_include", N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), [("x", [1, 2, 8, 8])], [1, 2, 5, 5])
    single(d, "gemm_transb", N("Gemm", ["x", "w", "b"], ["y"], transB=1), [("x", [3, 13])], [3, 10], {"w": r(10, 13), "b": r(10)})
    single(d, "gemm_transa_alpha_beta", N("Gemm", ["x", "w", "b"], ["y"], transA=1, alpha=0.5, beta=2.0), [("x", [13, 5])], [5, 11], {"w": r(13, 11), "b": r(5, 1)})
    save(d, "gemm_runtime_b", [N("Gemm", ["x", "w"], ["y"], transB=1)], [("x", [6, 9]), ("w", [7, 9])], [("y", [6, 7])])
    single(d, "matmul_batched", N("MatMul", ["x", "w"], ["y"]), [("x", [2, 3, 5, 7])], [2, 3, 5, 9], {"w": r(7, 9)})
    # A linear layer scaled by a Div (fuse_epilogues' Epilogue::scale on constant B: GEMV panels, micro-kernel tiles).
    for name, (m, k, n) in {"matmul_div_bias_relu_gemv": (1, 300, 70), "matmul_div_bias_relu": (37, 70, 45)}.items():
        save(d, name, [N("MatMul", ["x", "w"], ["p"]), N("Div", ["p", "c"], ["q"]), N("Add", ["q", "b"], ["s"]),
                       N("Relu", ["s"], ["y"])], [("x", [m, k])], [("y", [m, n])],
             {"w": r(k, n), "c": np.array(3.0, np.float32), "b": r(n)})
    # A sequence-first projection: batch dims that leave one row each, folded into one GEMM's rows.
    single(d, "matmul_seq_first", N("MatMul", ["x", "w"], ["y"]), [("x", [12, 1, 40])], [12, 1, 24], {"w": r(40, 24)})
    # The same from a batch-first activation through a copy-free Transpose (torch's MultiheadAttention export).
    save(d, "matmul_seq_first_transposed", [N("Transpose", ["x"], ["t"], perm=[1, 0, 2]), N("MatMul", ["t", "w"], ["y"])],
         [("x", [1, 12, 40])], [("y", [12, 1, 24])], {"w": r(40, 24)})
    save(d, "matmul_broadcast", [N("MatMul", ["a", "b"], ["y"])], [("a", [2, 1, 4, 6]), ("b", [3, 6, 5])], [("y", [2, 3, 4, 5])])
    single(d, "softmax_axis1", N("Softmax", ["x"], ["y"], axis=1), [("x", [3, 7, 5])], [3, 7, 5])
    single(d, "softmax_last", N("Softmax", ["x"], ["y"]), [("x", [3, 11])], [3, 11])
    single(d, "softmax_opset11", N("Softmax", ["x"], ["y"], axis=1), [("x", [2, 3, 5])], [2, 3, 5], opset=11)
    for op in ["Relu", "Exp", "Tanh", "Sigmoid", "Neg", "Abs"]:
        single(d, op.lower(), N(op, ["x"], ["y"]), [("x", [3, 11])], [3, 11])
    # Pow with small integer exponents (multiplies), and a fractional one (pow) of |x|.
    for name, e in {"pow3": 3.0, "pow2": 2.0}.items():
        single(d, name, N("Pow", ["x", "e"], ["y"]), [("x", [3, 11])], [3, 11], {"e": np.array(e, np.float32)})
    save(d, "pow_frac", [N("Abs", ["x"], ["a"]), N("Pow", ["a", "e"], ["y"])], [("x", [3, 11])], [("y", [3, 11])],
         {"e": np.array(1.5, np.float32)})
    single(d, "clip6", N("Clip", ["x", "lo", "hi"], ["y"]), [("x", [2, 19])], [2, 19], {"lo": np.array(0, np.float32), "hi": np.array(0.5, np.float32)})
    single(d, "add_channel", N("Add", ["x", "b"], ["y"]), [("x", [2, 3, 4, 5])], [2, 3, 4, 5], {"b": r(3, 1, 1)})
    single(d, "div_lastdim", N("Div", ["x", "b"], ["y"]), [("x", [2, 3, 4, 5])], [2, 3, 4, 5], {"b": r(5) + 3})
    save(d, "mul_both_broadcast", [N("Mul", ["a", "b"], ["y"])], [("a", [3, 1, 5]), ("b", [1, 4, 1])], [("y", [3, 4, 5])])
    single(d, "transpose", N("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1]), [("x", [2, 3, 4, 5])], [2, 4, 5, 3])
    # Trilu: the upper triangle above diagonal 1 of a batch of matrices, the lower one below diagonal -1.
    single(d, "trilu_upper", N("Trilu", ["x", "k"], ["y"]), [("x", [2, 5, 7])], [2, 5, 7], {"k": np.array(1, np.int64)}, opset=14)
    single(d, "trilu_lower", N("Trilu", ["x", "k"], ["y"], upper=0), [("x", [6, 4])], [6, 4], {"k": np.array(-1, np.int64)}, opset=14)
    # Einsum: MaxViT's attention pair, an implicit output, an ellipsis batch with broadcasting, a sum and
    # transpose of one operand, three operands, diagonals (a batch's traces, a diagonal times a matrix, a letter
    # three times).
    save(d, "einsum_attention", [N("Einsum", ["q", "k"], ["s"], equation="bghid,bghjd->bghij"),
                                 N("Einsum", ["s", "v"], ["y"], equation="bghij,bghjd->bghid")],
         [("q", [1, 2, 3, 5, 4]), ("k", [1, 2, 3, 6, 4]), ("v", [1, 2, 3, 6, 4])], [("y", [1, 2, 3, 5, 4])], opset=12)
    single(d, "einsum_implicit", N("Einsum", ["x", "w"], ["y"], equation="ij,jk"), [("x", [3, 5])], [3, 7], {"w": r(5, 7)}, opset=12)
    save(d, "einsum_ellipsis", [N("Einsum", ["a", "b"], ["y"], equation="...ij,...jk->...ik")],
         [("a", [2, 3, 4, 5]), ("b", [1, 3, 5, 6])], [("y", [2, 3, 4, 6])], opset=12)
    single(d, "einsum_sum_transpose", N("Einsum", ["x"], ["y"], equation="abc->ca"), [("x", [3, 4, 5])], [5, 3], opset=12)
    save(d, "einsum_three", [N("Einsum", ["a", "b", "c"], ["y"], equation="ij,jk,kl->li")],
         [("a", [3, 4]), ("b", [4, 5]), ("c", [5, 2])], [("y", [2, 3])], opset=12)
    single(d, "einsum_trace", N("Einsum", ["x"], ["y"], equation="bii->b"), [("x", [3, 5, 5])], [3], opset=12)
    save(d, "einsum_diagonal", [N("Einsum", ["a", "b"], ["y"], equation="jii,ik->jki")],
         [("a", [2, 4, 4]), ("b", [4, 3])], [("y", [2, 3, 4])], opset=12)
    single(d, "einsum_cube", N("Einsum", ["x"], ["y"], equation="iaii->ai"), [("x", [3, 2, 3, 3])], [2, 3], opset=12)
    # Indexed ops with constant indices on run-time data, and a GatherElements of constants only (folded).
    i64 = lambda lo, hi, s: rng.integers(lo, hi, s).astype(np.int64)
    single(d, "gather_elements", N("GatherElements", ["x", "i"], ["y"], axis=1), [("x", [3, 5, 4])], [3, 2, 4], {"i": i64(-5, 5, (3, 2, 4))})
    single(d, "gather_nd_batch", N("GatherND", ["x", "i"], ["y"], batch_dims=1), [("x", [2, 4, 3, 5])], [2, 3, 5], {"i": i64(0, 3, (2, 3, 2))})
    save(d, "scatter_nd", [N("ScatterND", ["x", "i", "u"], ["y"])], [("x", [4, 3, 2]), ("u", [2, 2])], [("y", [4, 3, 2])],
         {"i": np.array([[0, 1], [3, 2]], np.int64)})
    save(d, "scatter_nd_add", [N("ScatterND", ["x", "i", "u"], ["y"], reduction="add")], [("x", [5, 4]), ("u", [3, 4])], [("y", [5, 4])],
         {"i": np.array([[1], [3], [1]], np.int64)}, opset=16)
    save(d, "scatter_elements_max", [N("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="max")], [("x", [3, 5]), ("u", [3, 2])],
         [("y", [3, 5])], {"i": np.array([[0, 4], [2, 2], [-1, 1]], np.int64)}, opset=18)
    save(d, "gather_elements_folded", [N("GatherElements", ["t", "i"], ["c"], axis=0), N("Add", ["x", "c"], ["y"])], [("x", [4, 3])],
         [("y", [4, 3])], {"t": r(6, 3), "i": i64(0, 6, (4, 3))})
    # 3-D Conv (kernel depth slices as batches of 2-D convolutions): padded and strided with a bias; grouped and
    # dilated in depth.
    single(d, "conv3d", N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1, 1, 1], strides=[2, 1, 2]),
           [("x", [1, 3, 6, 7, 8])], [1, 4, 3, 7, 4], {"w": r(4, 3, 3, 3, 3), "b": r(4)})
    single(d, "conv3d_grouped_dilated", N("Conv", ["x", "w"], ["y"], group=2, dilations=[2, 1, 1]),
           [("x", [2, 4, 7, 5, 5])], [2, 6, 3, 3, 3], {"w": r(6, 2, 3, 3, 3)})
    # 3-D pooling: max with depth and plane padding and strides, average counting padding, average excluding
    # plane padding.
    single(d, "maxpool3d", N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3, 3], strides=[2, 2, 1], pads=[1, 1, 1, 1, 1, 1]),
           [("x", [1, 2, 7, 8, 6])], [1, 2, 4, 4, 6])
    single(d, "avgpool3d_include", N("AveragePool", ["x"], ["y"], kernel_shape=[2, 3, 3], strides=[1, 2, 2], pads=[1, 1, 1, 0, 1, 1],
                                      count_include_pad=1), [("x", [2, 3, 5, 7, 7])], [2, 3, 5, 4, 4])
    single(d, "avgpool3d_exclude", N("AveragePool", ["x"], ["y"], kernel_shape=[2, 3, 3], strides=[2, 1, 1], pads=[0, 1, 1, 0, 1, 1]),
           [("x", [1, 4, 6, 5, 5])], [1, 4, 3, 5, 5])
    # TopK along an inner axis (largest) and the last one (smallest), both outputs.
    for name, (axis, largest, k, out) in {"topk_axis1": (1, 1, 3, [2, 3, 9]),
                                          "topk_last_smallest": (-1, 0, 4, [2, 7, 4])}.items():
        g = h.make_graph([N("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)], name,
                         [h.make_tensor_value_info("x", T.FLOAT, [2, 7, 9])],
                         [h.make_tensor_value_info("v", T.FLOAT, out), h.make_tensor_value_info("i", T.INT64, out)],
                         [nh.from_array(np.array([k], np.int64), "k")])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(d, name + ".onnx"))
    # 1-D windowed ops (through their 2-D forms).
    single(d, "conv1d", N("Conv", ["x", "w", "b"], ["y"], pads=[1, 2], strides=[2], dilations=[2]), [("x", [2, 3, 20])], [2, 5, 10], {"w": r(5, 3, 3), "b": r(5)})
    single(d, "conv1d_grouped_same", N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", group=2), [("x", [1, 4, 9])], [1, 6, 9], {"w": r(6, 2, 3)})
    single(d, "maxpool1d", N("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1]), [("x", [2, 3, 11])], [2, 3, 6])
    single(d, "avgpool1d", N("AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[2]), [("x", [1, 4, 9])], [1, 4, 4])
    single(d, "convtranspose1d", N("ConvTranspose", ["x", "w"], ["y"], strides=[2], pads=[1, 1]), [("x", [1, 4, 7])], [1, 3, 13], {"w": r(4, 3, 3)})
    single(d, "concat", N("Concat", ["x", "b"], ["y"], axis=1), [("x", [2, 3, 4])], [2, 5, 4], {"b": r(2, 2, 4)})
    single(d, "batchnorm", N("BatchNormalization", ["x", "g", "be", "m", "v"], ["y"]), [("x", [2, 3, 4, 5])], [2, 3, 4, 5],
           {"g": r(3), "be": r(3), "m": r(3), "v": np.abs(r(3)) + .5})
    single(d, "global_avg", N("GlobalAveragePool", ["x"], ["y"]), [("x", [2, 3, 5, 7])], [2, 3, 1, 1])
    # A small CNN: conv+BN+relu, depthwise conv, residual add, pools, flatten, gemm, softmax.
    cnn_inits = {"w1": r(8, 3, 3, 3) * 0.3, "b1": r(8), "g": np.abs(r(8)) + 0.5, "be": r(8), "mu": r(8) * 0.1, "var": np.abs(r(8)) + 0.5,
                 "w2": r(8, 1, 3, 3) * 0.3, "fc": r(10, 200) * 0.1, "fcb": r(10)}
    save(d, "small_cnn", [
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["bn"]),
        N("Relu", ["bn"], ["r"]),
        N("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8, strides=[2, 2]),
        N("Add", ["c2", "c2"], ["a2"]),
        N("MaxPool", ["a2"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("AveragePool", ["p"], ["q"], kernel_shape=[2, 2], strides=[1, 1], pads=[1, 1, 0, 0]),
        N("Flatten", ["q"], ["f"]),
        N("Gemm", ["f", "fc", "fcb"], ["y0"], transB=1),
        N("Softmax", ["y0"], ["y"])], [("x", [2, 3, 17, 19])], [("y", [2, 10])], cnn_inits)


if __name__ == "__main__":
    main(sys.argv[1])
