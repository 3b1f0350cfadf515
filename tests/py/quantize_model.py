#!/usr/bin/env python3
"""Quantizes an f32 ONNX model into QDQ form with onnxruntime's static quantizer, with the settings gen_qdq.py uses
for its QDQ models: QuantFormat.QDQ, per_channel=True, activations QUInt8, weights QInt8, CalibrationMethod.MinMax.

usage: quantize_model.py IN.onnx OUT.onnx [--calib N] [--seed S] [--images DIR] [--size 224] [--no-preprocess]

--calib N        number of calibration inputs (default 8)
--seed S         seed of the random calibration inputs (default 0)
--images DIR     calibrate on the PNG / JPEG files in DIR (sorted by name, the first N used) instead of random
                 inputs: shorter side resized to 256, centre crop SIZE x SIZE, RGB scaled to 0..1 and normalised with
                 the ImageNet mean / std, NCHW f32. Needs PIL (Pillow); without it the option is refused with an error.
--size S         crop size for --images (default 224)
--no-preprocess  skip onnxruntime.quantization.shape_inference.quant_pre_process

Calibration inputs by default: for every f32 graph input, standard-normal tensors of the input's shape (a symbolic
or 0 first dimension is taken as 1; any other non-static dimension is an error) drawn from one numpy Generator
seeded with SEED, so the same command writes the same model. Integer graph inputs are not supported.

Steps: the model is first run through quant_pre_process (symbolic + ONNX shape inference and onnxruntime's basic
graph optimisations, which among other things fold a BatchNormalization into the Conv before it); if that raises,
the script says so on stderr and quantizes the original model. The quantizer writes its augmented calibration model
next to its input, so both the pre-processed model and the quantizer's input live in a temporary directory, never
next to IN or OUT. Afterwards the script prints the quantized model's op type counts and runs the f32 and QDQ
models with onnxruntime on one further random input (seed SEED + 1000) to print the largest absolute difference
of each output next to that output's f32 range."""
import argparse, collections, os, sys, tempfile
import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                      quantize_static)

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
IMAGE_EXTS = (".png", ".jpg", ".jpeg")


def graph_inputs(model_path):
    """[(name, shape)] of the model's non-initializer inputs; all must be f32 with static shapes (a symbolic or 0
    first dimension becomes 1)."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type != onnx.TensorProto.FLOAT:
            sys.exit(f"input {vi.name!r} is {onnx.TensorProto.DataType.Name(tt.elem_type)}: only f32 inputs can be "
                     f"calibrated")
        shape = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                shape.append(d.dim_value)
            elif i == 0:
                shape.append(1)
            else:
                sys.exit(f"input {vi.name!r} has a non-static dimension {i} ({d.dim_param or '?'})")
        out.append((vi.name, shape))
    return out


class RandomReader(CalibrationDataReader):
    """`count` feeds of standard-normal tensors for every input, from a fixed seed (rewind() restarts them)."""

    def __init__(self, inputs, count, seed):
        self.inputs, self.count, self.seed = inputs, count, seed
        self.rewind()

    def rewind(self):
        rng = np.random.default_rng(self.seed)
        self.feeds = iter([{n: rng.standard_normal(s).astype(np.float32) for n, s in self.inputs}
                           for _ in range(self.count)])

    def get_next(self):
        return next(self.feeds, None)


def load_image(path, size):
    """PIL: RGB, shorter side resized to 256 (bilinear), centre crop size x size, ImageNet-normalised, CHW f32."""
    from PIL import Image
    img = Image.open(path).convert("RGB")
    w, hgt = img.size
    s = 256 / min(w, hgt)
    img = img.resize((max(size, round(w * s)), max(size, round(hgt * s))), Image.BILINEAR)
    w, hgt = img.size
    left, top = (w - size) // 2, (hgt - size) // 2
    img = img.crop((left, top, left + size, top + size))
    a = np.asarray(img, dtype=np.float32) / 255.0
    return ((a - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1).copy()


class ImageReader(CalibrationDataReader):
    """One feed per image file (the first `count` by name) for a single NCHW input with 3 channels; the batch
    dimension is filled by repeating consecutive images."""

    def __init__(self, inputs, directory, count, size):
        if len(inputs) != 1 or len(inputs[0][1]) != 4 or inputs[0][1][1] != 3:
            sys.exit(f"--images needs a single [N, 3, H, W] input, the model has {inputs}")
        self.name, shape = inputs[0]
        if shape[2:] != [size, size]:
            sys.exit(f"input {self.name!r} is {shape}, the crop is {size}x{size} (see --size)")
        files = sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.lower().endswith(IMAGE_EXTS))
        batch = shape[0]
        need = count * batch
        if len(files) < need:
            sys.exit(f"{directory}: {len(files)} PNG/JPEG files, {need} needed ({count} inputs of batch {batch})")
        imgs = [load_image(f, size) for f in files[:need]]
        self.batches = [np.stack(imgs[i:i + batch]) for i in range(0, need, batch)]
        self.rewind()

    def rewind(self):
        self.feeds = iter({self.name: b} for b in self.batches)

    def get_next(self):
        return next(self.feeds, None)


def have_pil():
    try:
        import PIL.Image  # noqa: F401
        return True
    except ImportError:
        return False


def summarize(f32_path, qdq_path, inputs, seed):
    m = onnx.load(qdq_path)
    counts = collections.Counter(n.op_type for n in m.graph.node)
    print(f"{os.path.basename(qdq_path)}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    rng = np.random.default_rng(seed + 1000)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in inputs}
    ref = ort.InferenceSession(f32_path, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = ort.InferenceSession(qdq_path, providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    for o, r, g in zip(sess.get_outputs(), ref, got):
        print(f"  {o.name} {list(g.shape)}: max |qdq - f32| {np.abs(g - r).max():.4g}, "
              f"f32 range [{r.min():.4g}, {r.max():.4g}]")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--calib", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--images")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--no-preprocess", action="store_true")
    a = ap.parse_args()
    if a.calib < 1:
        sys.exit("--calib must be at least 1")
    if a.images and not have_pil():
        sys.exit("--images needs PIL (Pillow), which is not installed; calibrate on random inputs instead")
    inputs = graph_inputs(a.input)
    if a.images:
        reader = ImageReader(inputs, a.images, a.calib, a.size)
    else:
        reader = RandomReader(inputs, a.calib, a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "model_f32.onnx")
        if a.no_preprocess:
            onnx.save(onnx.load(a.input), src)
        else:
            try:
                from onnxruntime.quantization.shape_inference import quant_pre_process
                quant_pre_process(a.input, src)
            except Exception as e:  # noqa: BLE001 - pre-processing is optional: fall back to the model as it is
                print(f"quant_pre_process failed, quantizing the model without it: {type(e).__name__}: {e}",
                      file=sys.stderr)
                onnx.save(onnx.load(a.input), src)
        quantize_static(src, a.output, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
    summarize(a.input, a.output, inputs, a.seed)


if __name__ == "__main__":
    main()
