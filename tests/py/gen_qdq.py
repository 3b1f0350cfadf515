#!/usr/bin/env python3
"""Writes the int8 test models into OUTDIR: pre-quantized single-op models in QOperator form built with the onnx
helper API, and QDQ models produced by onnxruntime's static quantizer from small f32 models built here. Every
model has static shapes, batch 1 (the MLP takes 2 rows), opset 13 and deterministic contents (fixed seeds).

usage: gen_qdq.py OUTDIR

QOperator models (constant weights, scales and zero points are initializers; `x` is the input, `y` the output):
  q_quantizelinear         f32 [1,3,8,8] -> u8, per-tensor (scale 0.015, zero point 128)
  q_quantizelinear_axis    f32 [1,4,5,5] -> i8, per-axis on axis 1
  q_dequantizelinear       u8 [1,3,8,8] -> f32, per-tensor
  q_dequantizelinear_axis  i8 [1,4,5,5] -> f32, per-axis on axis 1
  q_qlinearconv            u8 [1,8,12,12] x s8 per-channel [16,8,3,3] + int32 bias, pads 1, stride 1 -> u8
  q_qlinearconv_dw         u8 [1,16,12,12] x s8 per-channel [16,1,3,3] + int32 bias, group 16, pads 1,
                           stride 2 -> u8 [1,16,6,6]
  q_qlinearmatmul          u8 [4,64] x s8 [64,32] per-tensor -> u8 [4,32]
  q_convinteger            u8 [1,4,10,10] (x_zero_point 121) x s8 [8,4,3,3], pads 1 -> int32 [1,8,10,10]
  q_matmulinteger          u8 [4,48] (a_zero_point 124) x s8 [48,24] -> int32 [4,24]
The int8 weights are uniform in [-127, 127] (weight zero points 0). Activation scales are 0.015..0.05 with u8 zero
points 110..128; the
per-channel weight scales are chosen so that, for a u8 input uniform over 0..255 (what check_ort.py feeds), the
real-valued output has a standard deviation of about 1/5 of the output's representable range (~50 steps):
measured with onnxruntime over 20 such inputs, 0.7-2% of the outputs saturate at 0 / 255.

QDQ models (onnxruntime.quantization.quantize_static, QuantFormat.QDQ, per_channel=True, activations QUInt8,
weights QInt8, CalibrationMethod.MinMax, 16 standard-normal calibration inputs), with their f32 sources:
  qdq_cnn / qdq_cnn_f32    x [1,3,32,32]: Conv3x3(16)+Relu, Conv3x3(32) stride 2+Relu, MaxPool 2x2/2, then a
                           residual block: depthwise Conv3x3+Relu, 1x1 Conv, Add with the MaxPool output;
                           GlobalAveragePool, Flatten, Gemm (transB=1) to 10 classes -> y [1,10]
  qdq_mlp / qdq_mlp_f32    x [2,64]: MatMul(64x128)+Add+Relu, MatMul(128x10)+Add -> y [2,10]

After writing, every model is run once with onnxruntime on a random input (integer inputs uniform over the full
type range, f32 inputs standard normal) to show that ORT accepts it, and the node op types of each QDQ model are
printed in graph order together with the initializers that feed its DequantizeLinear nodes.

What onnxruntime 1.32.0's quantizer writes (opset 13 and IR 8 kept): weights as int8 initializers + per-channel
DequantizeLinear (axis 0 for Conv and the transB Gemm, axis 1 for MatMul's [K, N]); Conv / Gemm biases as int32
initializers + DequantizeLinear with scale x_scale * w_scale (axis 0); every activation as a QuantizeLinear ->
DequantizeLinear pair (u8). A Relu after a Conv or an Add is removed: the producer writes the Relu's tensor and its
QuantizeLinear has zero point 0. MaxPool and Flatten outputs reuse their input's scale and zero point. The MLP's
Add biases are not recognised as biases: they are quantized like activations (u8 per-tensor + DequantizeLinear).
The f32 output is the DequantizeLinear of the last QuantizeLinear. onnxruntime's fused (QLinearConv, ...) and
unfused (ORT_DISABLE_ALL) runs of both QDQ models agree exactly (0 steps over 50 inputs)."""
import os, sys, tempfile
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                      quantize_static)

OPSET = 13
# QLinearConv / QLinearMatMul weight scales aim at an output standard deviation of (output range) / OUT_SPREAD
OUT_SPREAD = 5
N = h.make_node


def save(d, name, nodes, ins, outs, inits):
    """ins / outs: (name, TensorProto elem type, shape); inits: {name: numpy array} (the dtype is kept)."""
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(k, t, s) for k, t, s in ins],
                     [h.make_tensor_value_info(k, t, s) for k, t, s in outs],
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    ops = [h.make_opsetid("", OPSET)]
    if any(n.domain == "com.microsoft" for n in nodes):
        ops.append(h.make_opsetid("com.microsoft", 1))
    m = h.make_model(g, opset_imports=ops, producer_name="bundlec gen_qdq.py")
    m.ir_version = 8
    if len(ops) == 1:
        onnx.checker.check_model(m, full_check=True)
    path = os.path.join(d, name + ".onnx")
    onnx.save(m, path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# QOperator single-op models


def s8_weights(rng, shape):
    """Symmetric int8 weights, uniform over [-127, 127] (the range ORT's quantizer uses for QInt8)."""
    return rng.integers(-127, 128, shape).astype(np.int8)


def u8_rms(scale, zp):
    """Root mean square of the real value (q - zp) * scale for q uniform over 0..255."""
    q = np.arange(256, dtype=np.float64)
    return float(np.sqrt(np.mean(((q - zp) * scale) ** 2)))


def channel_scales(rng, w, x_rms, target_std):
    """Per-output-channel weight scales (w is [Cout, ...] int8) giving each output channel a standard deviation of
    about target_std (times a random factor 0.7..1.3) for inputs of RMS x_rms: std ~= sqrt(sum_k w_k^2) * x_rms."""
    w = w.reshape(w.shape[0], -1).astype(np.float64)
    norm = np.sqrt((w ** 2).sum(axis=1))
    return (target_std * rng.uniform(0.7, 1.3, w.shape[0]) / (norm * x_rms)).astype(np.float32)


def qoperator_models(d, rng):
    f32, u8, i8, i32 = T.FLOAT, T.UINT8, T.INT8, T.INT32
    paths = []
    # QuantizeLinear f32 -> u8, per-tensor; with scale 0.015 a standard-normal input saturates beyond about +-1.9
    # (some 5% of the values, at both ends).
    paths.append(save(d, "q_quantizelinear", [N("QuantizeLinear", ["x", "x_scale", "x_zp"], ["y"])],
                      [("x", f32, [1, 3, 8, 8])], [("y", u8, [1, 3, 8, 8])],
                      {"x_scale": np.float32(0.015), "x_zp": np.uint8(128)}))
    # QuantizeLinear f32 -> i8, per-axis on the channel axis; channel 0 (scale 0.02) saturates beyond about +-2.5.
    paths.append(save(d, "q_quantizelinear_axis", [N("QuantizeLinear", ["x", "x_scale", "x_zp"], ["y"], axis=1)],
                      [("x", f32, [1, 4, 5, 5])], [("y", i8, [1, 4, 5, 5])],
                      {"x_scale": np.array([0.02, 0.03, 0.04, 0.05], np.float32),
                       "x_zp": np.array([0, -5, 3, 10], np.int8)}))
    # DequantizeLinear u8 -> f32, per-tensor.
    paths.append(save(d, "q_dequantizelinear", [N("DequantizeLinear", ["x", "x_scale", "x_zp"], ["y"])],
                      [("x", u8, [1, 3, 8, 8])], [("y", f32, [1, 3, 8, 8])],
                      {"x_scale": np.float32(0.03), "x_zp": np.uint8(115)}))
    # DequantizeLinear i8 -> f32, per-axis on the channel axis.
    paths.append(save(d, "q_dequantizelinear_axis", [N("DequantizeLinear", ["x", "x_scale", "x_zp"], ["y"], axis=1)],
                      [("x", i8, [1, 4, 5, 5])], [("y", f32, [1, 4, 5, 5])],
                      {"x_scale": np.array([0.05, 0.02, 0.04, 0.03], np.float32),
                       "x_zp": np.array([2, 0, -7, 4], np.int8)}))

    def qlinearconv(name, cin, cout, group, hw, stride):
        """QLinearConv 3x3, pads 1: u8 activations, s8 per-channel weights (zero points 0), int32 bias whose scale is
        x_scale * w_scale[c] (as the operator requires)."""
        xs, xzp, ys, yzp = 0.02, 118, 0.05, 122
        w = s8_weights(rng, (cout, cin // group, 3, 3))
        ws = channel_scales(rng, w, u8_rms(xs, xzp), ys * 255 / OUT_SPREAD)
        b = np.round(rng.normal(0, 0.5, cout) / (xs * ws)).astype(np.int32)
        o = (hw + 2 - 3) // stride + 1
        return save(d, name, [N("QLinearConv", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp", "b"],
                                ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride], group=group)],
                    [("x", u8, [1, cin, hw, hw])], [("y", u8, [1, cout, o, o])],
                    {"x_scale": np.float32(xs), "x_zp": np.uint8(xzp), "w": w, "w_scale": ws,
                     "w_zp": np.zeros(cout, np.int8), "y_scale": np.float32(ys), "y_zp": np.uint8(yzp), "b": b})

    paths.append(qlinearconv("q_qlinearconv", 8, 16, 1, 12, 1))
    paths.append(qlinearconv("q_qlinearconv_dw", 16, 16, 16, 12, 2))

    # QLinearMatMul u8 [4,64] x s8 [64,32], everything per-tensor.
    a_s, a_zp, y_s, y_zp = 0.025, 126, 0.04, 110
    b = s8_weights(rng, (64, 32))
    b_s = np.float32(y_s * 255 / OUT_SPREAD / (np.sqrt(64 * np.mean(b.astype(np.float64) ** 2)) * u8_rms(a_s, a_zp)))
    paths.append(save(d, "q_qlinearmatmul",
                      [N("QLinearMatMul", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"], ["y"])],
                      [("x", u8, [4, 64])], [("y", u8, [4, 32])],
                      {"x_scale": np.float32(a_s), "x_zp": np.uint8(a_zp), "w": b, "w_scale": b_s,
                       "w_zp": np.int8(0), "y_scale": np.float32(y_s), "y_zp": np.uint8(y_zp)}))
    # ConvInteger / MatMulInteger: int32 accumulators of (x - x_zp) * w; no weight zero point (defaults to 0).
    paths.append(save(d, "q_convinteger", [N("ConvInteger", ["x", "w", "x_zp"], ["y"], kernel_shape=[3, 3],
                                            pads=[1, 1, 1, 1])],
                      [("x", u8, [1, 4, 10, 10])], [("y", i32, [1, 8, 10, 10])],
                      {"w": s8_weights(rng, (8, 4, 3, 3)), "x_zp": np.uint8(121)}))
    paths.append(save(d, "q_matmulinteger", [N("MatMulInteger", ["x", "w", "x_zp"], ["y"])],
                      [("x", u8, [4, 48])], [("y", i32, [4, 24])],
                      {"w": s8_weights(rng, (48, 24)), "x_zp": np.uint8(124)}))
    # com.microsoft QLinearAdd / QLinearMul (same-shape u8 operands) and QLinearGlobalAveragePool; onnxruntime
    # computes them with precomputed scale ratios, bundlec with the f32 DequantizeLinear-op-QuantizeLinear chain,
    # so they may differ by one output step (check_ort --qsteps 1).
    ms = lambda op, ins, outs, **kw: h.make_node(op, ins, outs, domain="com.microsoft", **kw)
    binp = {"a_scale": np.float32(0.03), "a_zp": np.uint8(120), "b_scale": np.float32(0.05), "b_zp": np.uint8(7),
            "y_scale": np.float32(0.04), "y_zp": np.uint8(30)}
    for op in ("QLinearAdd", "QLinearMul"):
        paths.append(save(d, "q_" + op.lower(),
                          [ms(op, ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"], ["y"])],
                          [("a", u8, [1, 5, 7, 3]), ("b", u8, [1, 5, 7, 3])], [("y", u8, [1, 5, 7, 3])], binp))
    paths.append(save(d, "q_qlinearglobalaveragepool",
                      [ms("QLinearGlobalAveragePool", ["x", "x_scale", "x_zp", "y_scale", "y_zp"], ["y"],
                          channels_last=0)],
                      [("x", u8, [1, 6, 9, 11])], [("y", u8, [1, 6, 1, 1])],
                      {"x_scale": np.float32(0.02), "x_zp": np.uint8(100), "y_scale": np.float32(0.01),
                       "y_zp": np.uint8(128)}))
    return paths


# ---------------------------------------------------------------------------------------------------------------
# QDQ models from onnxruntime's static quantizer


def he(rng, *shape):
    """He-scaled f32 weights for an output-channel-first shape (fan-in = product of the other dims)."""
    return (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)


def f32_cnn(d, rng):
    f32 = T.FLOAT
    inits = {"w1": he(rng, 16, 3, 3, 3), "b1": 0.1 * rng.standard_normal(16).astype(np.float32),
             "w2": he(rng, 32, 16, 3, 3), "b2": 0.1 * rng.standard_normal(32).astype(np.float32),
             "w3": he(rng, 32, 1, 3, 3), "b3": 0.1 * rng.standard_normal(32).astype(np.float32),
             # 1x1 conv of the residual branch scaled down (as zero-init-residual training would leave it)
             "w4": 0.5 * he(rng, 32, 32, 1, 1), "b4": 0.1 * rng.standard_normal(32).astype(np.float32),
             "wfc": he(rng, 10, 32), "bfc": 0.1 * rng.standard_normal(10).astype(np.float32)}
    nodes = [
        N("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"], name="relu1"),
        N("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        N("Relu", ["c2"], ["r2"], name="relu2"),
        N("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        # residual branch: depthwise 3x3 + Relu, pointwise 1x1; the other branch is the MaxPool output itself
        N("Conv", ["p", "w3", "b3"], ["c3"], name="dwconv", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
        N("Relu", ["c3"], ["r3"], name="relu3"),
        N("Conv", ["r3", "w4", "b4"], ["c4"], name="pwconv", kernel_shape=[1, 1]),
        N("Add", ["p", "c4"], ["s"], name="residual"),
        N("GlobalAveragePool", ["s"], ["g"], name="gap"),
        N("Flatten", ["g"], ["f"], name="flatten"),
        N("Gemm", ["f", "wfc", "bfc"], ["y"], name="fc", transB=1),
    ]
    return save(d, "qdq_cnn_f32", nodes, [("x", f32, [1, 3, 32, 32])], [("y", f32, [1, 10])], inits)


def f32_mlp(d, rng):
    f32 = T.FLOAT
    # MatMul weights are [K, N]: He-scaled by the fan-in K (he() expects the output dimension first).
    inits = {"w1": he(rng, 128, 64).T.copy(), "b1": 0.1 * rng.standard_normal(128).astype(np.float32),
             "w2": he(rng, 10, 128).T.copy(), "b2": 0.1 * rng.standard_normal(10).astype(np.float32)}
    nodes = [N("MatMul", ["x", "w1"], ["m1"], name="fc1"), N("Add", ["m1", "b1"], ["a1"], name="fc1_bias"),
             N("Relu", ["a1"], ["r1"], name="relu1"),
             N("MatMul", ["r1", "w2"], ["m2"], name="fc2"), N("Add", ["m2", "b2"], ["y"], name="fc2_bias")]
    return save(d, "qdq_mlp_f32", nodes, [("x", f32, [2, 64])], [("y", f32, [2, 10])], inits)


class RandomReader(CalibrationDataReader):
    """Calibration feeds: `count` standard-normal tensors for the model's single input, from a fixed seed."""

    def __init__(self, model_path, count=16, seed=0):
        m = onnx.load(model_path)
        vi = m.graph.input[0]
        self.name, self.shape = vi.name, [dim.dim_value for dim in vi.type.tensor_type.shape.dim]
        self.count, self.seed = count, seed
        self.rewind()

    def rewind(self):
        rng = np.random.default_rng(self.seed)
        self.feeds = iter([{self.name: rng.standard_normal(self.shape).astype(np.float32)} for _ in range(self.count)])

    def get_next(self):
        return next(self.feeds, None)


def quantize(f32_path, out_path):
    quantize_static(f32_path, out_path, RandomReader(f32_path), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    return out_path


def describe_qdq(path):
    """Prints the model's node op types in graph order, then each DequantizeLinear fed by an initializer (a quantized
    weight or bias) with that initializer's type, shape and the node's axis."""
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    print(f"{os.path.basename(path)}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes")
    print("  " + " ".join(n.op_type for n in m.graph.node))
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            t = inits[n.input[0]]
            axis = [a.i for a in n.attribute if a.name == "axis"]
            sc = inits.get(n.input[1])
            print(f"  DequantizeLinear({n.input[0]}: {T.DataType.Name(t.data_type).lower()}{list(t.dims)}"
                  f"{f', axis={axis[0]}' if axis else ''}, scale {list(sc.dims) if sc is not None else '?'}) -> "
                  f"{n.output[0]}")


# ---------------------------------------------------------------------------------------------------------------


def smoke(path, rng):
    """Runs the model once with onnxruntime on a random input; returns a one-line summary of each output."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        dt = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}[i.type]
        if dt == np.float32:
            feeds[i.name] = rng.standard_normal(i.shape).astype(dt)
        else:
            info = np.iinfo(dt)
            feeds[i.name] = rng.integers(info.min, info.max, i.shape, endpoint=True).astype(dt)
    outs = sess.run(None, feeds)
    return ", ".join(f"{o.name} {r.dtype}{list(r.shape)} in [{r.min()}, {r.max()}]"
                     for o, r in zip(sess.get_outputs(), outs))


def main(d):
    os.makedirs(d, exist_ok=True)
    paths = qoperator_models(d, np.random.default_rng(7))
    rng = np.random.default_rng(11)
    qdq = []
    for build in (f32_cnn, f32_mlp):
        f32_path = build(d, rng)
        paths.append(f32_path)
        # The quantizer writes its augmented calibration model next to a temporary copy, not into OUTDIR.
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, os.path.basename(f32_path))
            onnx.save(onnx.load(f32_path), src)
            qdq.append(quantize(src, f32_path.replace("_f32.onnx", ".onnx")))
    paths += qdq
    for p in qdq:
        describe_qdq(p)
    check = np.random.default_rng(0)
    for p in paths:
        print(f"ort ok {os.path.basename(p)}: {smoke(p, check)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
