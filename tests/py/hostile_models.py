#!/usr/bin/env python3
"""Hostile but well-formed ONNX models (issue 11's classes and more): each must make `bundlec compile` exit with
status 1 and an `error:` line naming the node, attribute or tensor and containing the expected words, never a
panic, an abort or a silently compiled bundle.

usage: hostile_models.py [--bundlec target/debug/bundlec] [--save-dir DIR]"""
import argparse, os, subprocess, sys, tempfile
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
import numpy as np
ap = argparse.ArgumentParser()
ap.add_argument("--bundlec", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "target/debug/bundlec"))
ap.add_argument("--save-dir", help="also save every hostile model there (the compiler fuzz target's seeds: fuzz/seeds/compile_onnx)")
args = ap.parse_args()
B = args.bundlec
def model(nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
vi = h.make_tensor_value_info
cases = {}
x4 = vi("x", T.FLOAT, [1, 2, 8, 8])
w = nh.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
cases["conv_zero_stride"] = model([h.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1])], [x4], [vi("y", T.FLOAT, None)], [w])
cases["conv_zero_kernel_attr"] = model([h.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[0, 3])], [x4], [vi("y", T.FLOAT, None)], [w])
cases["maxpool_zero_kernel"] = model([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[0, 2])], [x4], [vi("y", T.FLOAT, None)])
cases["avgpool_zero_stride"] = model([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 1])], [x4], [vi("y", T.FLOAT, None)])
wt = nh.from_array(np.ones((2, 3, 3, 3), np.float32), "wt")
cases["convtranspose_zero_stride"] = model([h.make_node("ConvTranspose", ["x", "wt"], ["y"], strides=[0, 0])], [x4], [vi("y", T.FLOAT, None)], [wt])
cases["split_negative_outputs"] = model([h.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=-2)], [x4], [vi("a", T.FLOAT, None), vi("b", T.FLOAT, None)], opset=18)
st = nh.from_array(np.array(0, np.float32), "s"); li = nh.from_array(np.array(5, np.float32), "l"); de = nh.from_array(np.array(0, np.float32), "d")
cases["range_zero_delta"] = model([h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("Add", ["x", "r"], ["y"])], [x4], [vi("y", T.FLOAT, None)], [st, li, de])
shp = nh.from_array(np.array([2, 3], np.int64), "shp")
empty = h.make_tensor("value", T.FLOAT, [0], [])
cases["constantofshape_empty_value"] = model([h.make_node("ConstantOfShape", ["shp"], ["c"], value=empty), h.make_node("Identity", ["c"], ["y"])], [x4], [vi("y", T.FLOAT, None)], [shp])
sc = nh.from_array(np.array([2.0, 2.0], np.float32), "sc")
cases["resize_axes_out_of_range"] = model([h.make_node("Resize", ["x", "", "sc"], ["y"], axes=[7, 9], mode="nearest")], [x4], [vi("y", T.FLOAT, None)], [sc], opset=18)
pads = nh.from_array(np.array([0, 0, 0, 1 << 40, 0, 0, 0, 0], np.int64), "pads")
cases["pad_huge"] = model([h.make_node("Pad", ["x", "pads"], ["y"])], [x4], [vi("y", T.FLOAT, None)], [pads])
cases["input_numel_overflow"] = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [1 << 32, 1 << 32, 16])], [vi("y", T.FLOAT, None)])
data = vi("x", T.FLOAT, [4, 3]); idx = nh.from_array(np.array([0, 7], np.int64), "idx")
cases["gather_const_index_oob"] = model([h.make_node("Gather", ["x", "idx"], ["y"], axis=0)], [data], [vi("y", T.FLOAT, None)], [idx])
w0 = nh.from_array(np.ones((0, 2, 3, 3), np.float32), "w0")
cases["conv_zero_sized_weights"] = model([h.make_node("Conv", ["x", "w0"], ["y"])], [x4], [vi("y", T.FLOAT, None)], [w0])
cases["cyclic_graph"] = model([h.make_node("Relu", ["x", ], ["a"]), h.make_node("Add", ["a", "b"], ["b"])], [x4], [vi("b", T.FLOAT, None)])
cases["duplicate_output_names"] = model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Sigmoid", ["x"], ["a"])], [x4], [vi("a", T.FLOAT, None)])
cases["matmul_dtype_mismatch"] = model([h.make_node("MatMul", ["x", "i"], ["y"])], [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, None)], [nh.from_array(np.ones((3, 2), np.int64), "i")])
# int8: quantisation parameters a model may get wrong.
xf = vi("x", T.FLOAT, [1, 4, 5, 5])
f32 = lambda n, v: nh.from_array(np.array(v, np.float32), n)
u8 = lambda n, v: nh.from_array(np.array(v, np.uint8), n)
cases["quantize_zero_scale"] = model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [xf], [vi("y", T.UINT8, None)], [f32("s", 0.0), u8("z", 3)])
cases["quantize_nan_scale"] = model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [xf], [vi("y", T.UINT8, None)], [f32("s", np.nan), u8("z", 3)])
cases["quantize_axis_length"] = model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)], [xf], [vi("y", T.UINT8, None)], [f32("s", [0.1, 0.2, 0.3]), u8("z", [1, 2, 3])])
cases["quantize_runtime_scale"] = model([h.make_node("QuantizeLinear", ["x", "s"], ["y"])], [xf, vi("s", T.FLOAT, [])], [vi("y", T.UINT8, None)])
xq = vi("x", T.UINT8, [1, 4, 5, 5])
qc_inits = [f32("xs", 0.02), u8("xz", 128), nh.from_array(np.full((2, 4, 3, 3), 300, np.int32).astype(np.int8), "w"),
            f32("ws", 0.01), nh.from_array(np.array(0, np.int8), "wz"), f32("ys", 0.05), u8("yz", 10)]
cases["qlinearconv_runtime_weights"] = model([h.make_node("QLinearConv", ["x", "xs", "xz", "wr", "ws", "wz", "ys", "yz"], ["y"])],
                                             [xq, vi("wr", T.INT8, [2, 4, 3, 3])], [vi("y", T.UINT8, None)], qc_inits[:2] + qc_inits[3:])
cases["qlinearconv_bad_bias"] = model([h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"])],
                                      [xq], [vi("y", T.UINT8, None)], qc_inits + [nh.from_array(np.zeros(5, np.int32), "b")])
EXPECT = {
    "quantize_zero_scale": "scale", "quantize_nan_scale": "scale", "quantize_axis_length": "3 scales",
    "quantize_runtime_scale": "must be constant", "qlinearconv_runtime_weights": "must be constant",
    "qlinearconv_bad_bias": "bias",
    "conv_zero_stride": "'strides'", "conv_zero_kernel_attr": "'kernel_shape'", "maxpool_zero_kernel": "'kernel_shape'",
    "avgpool_zero_stride": "'strides'", "convtranspose_zero_stride": "'strides'", "split_negative_outputs": "'num_outputs'",
    "range_zero_delta": "delta", "constantofshape_empty_value": "'value'", "resize_axes_out_of_range": "'axes'",
    "pad_huge": "pad amount", "input_numel_overflow": "2^40", "gather_const_index_oob": "out of range",
    "conv_zero_sized_weights": "zero-sized", "cyclic_graph": "not defined", "duplicate_output_names": "already defined",
    "matmul_dtype_mismatch": "cannot be compiled",
}
bad = 0
with tempfile.TemporaryDirectory() as d:
    for name, m in cases.items():
        p = os.path.join(d, name + ".onnx")
        onnx.save(m, p)
        if args.save_dir:
            os.makedirs(args.save_dir, exist_ok=True)
            onnx.save(m, os.path.join(args.save_dir, "hostile_" + name + ".onnx"))
        r = subprocess.run([B, "compile", p, "-o", os.path.join(d, "out"), "--name", "h"], capture_output=True, text=True)
        err = r.stderr.strip().splitlines()
        ok = (r.returncode == 1 and err and err[0].startswith("error:") and "panicked" not in r.stderr
              and EXPECT[name] in r.stderr)
        bad += not ok
        print(("PASS " if ok else "FAIL ") + f"{name}: exit {r.returncode}: {err[0][:160] if err else '(no error line)'}")
print(f"hostile models: {len(cases) - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
