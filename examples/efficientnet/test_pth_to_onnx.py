#!/usr/bin/env python3
"""Self-test of pth_to_onnx.py's .pth reader, without torch: writes small state_dicts in both container formats
(zip and legacy) with stand-in `torch` modules, checks that they read back exactly (offsets, non-contiguous
strides, storages shared by several tensors), then checks that hostile or broken files are refused with a
clear error: foreign globals (os.system, builtins.eval), path traversal in zip members, storages too small for
a tensor's size/stride/offset, truncated files, and, in the network builder, missing keys, wrong shapes and
non-finite weights.

usage: test_pth_to_onnx.py [-v]   (exit status 0 when every case behaves; -v lists the cases)"""
import collections
import io
import os
import pickle
import struct
import sys
import tempfile
import types
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pth_to_onnx as P  # noqa: E402

# Stand-in torch modules, only so that pickle writes the same GLOBAL opcodes torch.save does.
torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules.update({"torch": torch, "torch._utils": torch_utils})


def _rebuild_tensor_v2(*args):
    raise AssertionError("never called while saving")


_rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
for _n in ("FloatStorage", "LongStorage"):
    setattr(torch, _n, type(_n, (), {"__module__": "torch"}))


class FakeStorage:
    def __init__(self, key, kind, data):
        self.key, self.kind, self.data = key, kind, data


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class Evil:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


def dump_pickle(obj, legacy):
    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, FakeStorage):
                pid = ("storage", o.kind, o.key, "cpu", o.data.size)
                return pid + (None,) if legacy else pid
            return None

    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def storages_of(sd):
    out = {}
    for t in sd.values():
        if isinstance(t, FakeTensor):
            out[t.args[0].key] = t.args[0]
    return out


def write_zip(path, sd, extra=None, shrink=None):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", dump_pickle(sd, legacy=False))
        z.writestr("archive/byteorder", "little")
        for key, st in storages_of(sd).items():
            raw = st.data.tobytes()
            z.writestr(f"archive/data/{key}", raw[:-shrink] if shrink and key == "0" else raw)
        for name, data in (extra or {}).items():
            z.writestr(name, data)


def write_legacy(path, sd, truncate=0):
    parts = [dump_pickle(P.LEGACY_MAGIC, True), dump_pickle(P.LEGACY_PROTOCOL, True),
             dump_pickle({"protocol_version": 1001, "little_endian": True,
                          "type_sizes": {"short": 2, "int": 4, "long": 4}}, True),
             dump_pickle(sd, legacy=True)]
    sts = storages_of(sd)
    parts.append(dump_pickle(sorted(sts), True))
    for key in sorted(sts):
        parts.append(struct.pack("<q", sts[key].data.size) + sts[key].data.tobytes())
    blob = b"".join(parts)
    with open(path, "wb") as f:
        f.write(blob[: len(blob) - truncate])


def sample_sd():
    a = FakeStorage("0", torch.FloatStorage, np.arange(24, dtype="<f4"))
    b = FakeStorage("1", torch.LongStorage, np.array([7], dtype="<i8"))
    return collections.OrderedDict([
        ("w", FakeTensor(a, 0, (2, 3, 4), (12, 4, 1))),
        ("t", FakeTensor(a, 1, (4, 3), (1, 4))),  # transposed view with an offset, sharing storage 0
        ("n", FakeTensor(b, 0, (), ())),
    ])


FAILURES = []
VERBOSE = "-v" in sys.argv[1:]
PASSED = []


def ok(msg):
    PASSED.append(msg)
    if VERBOSE:
        print(f"  ok  {msg}")


def expect_error(what, fn, needle):
    try:
        fn()
    except P.PthError as e:
        if needle.lower() not in str(e).lower():
            FAILURES.append(f"{what}: error {e!s:.200} does not mention {needle!r}")
        else:
            ok(f"{what}: {e!s:.110}")
        return
    except Exception as e:  # any other exception type is a bug: errors must be PthError with a message
        FAILURES.append(f"{what}: {type(e).__name__}: {e}")
        return
    FAILURES.append(f"{what}: accepted")


def main():
    with tempfile.TemporaryDirectory(prefix="pth_test_") as tmp:
        run(tmp)
    if FAILURES:
        print("FAILED:\n  " + "\n  ".join(FAILURES))
        sys.exit(1)
    print(f"test_pth_to_onnx: all {len(PASSED)} .pth reader checks passed (-v lists them)")


def run(tmp):
    ref = np.arange(24, dtype=np.float32)
    for fmt, write in (("zip", write_zip), ("legacy", write_legacy)):
        p = os.path.join(tmp, f"good_{fmt}.pth")
        write(p, sample_sd())
        sd = P.load_state_dict(p)
        assert list(sd) == ["w", "t", "n"], list(sd)
        assert np.array_equal(sd["w"], ref.reshape(2, 3, 4))
        assert np.array_equal(sd["t"], np.lib.stride_tricks.as_strided(ref[1:], (4, 3), (4, 16)))
        assert sd["n"].shape == () and int(sd["n"]) == 7
        ok(f"{fmt}: reads back exactly")

    marker = os.path.join(tmp, "pwned")
    for fmt, write in (("zip", write_zip), ("legacy", write_legacy)):
        for fn in (os.system, eval):
            sd = sample_sd()
            sd["x"] = Evil(fn, f"open({marker!r}, 'w')" if fn is eval else f"touch {marker}")
            p = os.path.join(tmp, f"evil_{fmt}.pth")
            write(p, sd)
            expect_error(f"{fmt} with {fn.__module__}.{fn.__name__}", lambda: P.load_state_dict(p), "refusing global")
    if os.path.exists(marker):
        FAILURES.append("a hostile pickle ran code")

    p = os.path.join(tmp, "traversal.pth")
    write_zip(p, sample_sd(), extra={"archive/data/../../evil": b"x"})
    expect_error("zip member with ..", lambda: P.load_state_dict(p), "unsafe member name")
    write_zip(p, sample_sd(), extra={"/abs": b"x"})
    expect_error("zip member with an absolute path", lambda: P.load_state_dict(p), "unsafe member name")

    p = os.path.join(tmp, "small.pth")
    write_zip(p, sample_sd(), shrink=4)
    expect_error("zip storage file too small", lambda: P.load_state_dict(p), "needs")
    sd = sample_sd()
    sd["w"] = FakeTensor(sd["w"].args[0], 1, (2, 3, 4), (12, 4, 1))  # one element past the end
    write_zip(p, sd)
    expect_error("offset past the storage", lambda: P.load_state_dict(p), "reaches element 24")
    sd = sample_sd()
    sd["w"] = FakeTensor(sd["w"].args[0], 0, (3, 8), (8, 2))  # stride past the end
    write_legacy(p, sd)
    expect_error("stride past the storage", lambda: P.load_state_dict(p), "reaches element")
    write_legacy(p, sample_sd(), truncate=5)
    expect_error("truncated legacy file", lambda: P.load_state_dict(p), "truncated")
    with open(p, "wb") as f:
        f.write(b"not a checkpoint")
    expect_error("garbage file", lambda: P.load_state_dict(p), "neither a zip archive nor a legacy")

    # the network builder: a state_dict of the right keys and shapes, then broken variants
    good = {}
    for k, shape in expected_shapes().items():
        good[k] = np.full(shape, 0.5, np.float32)
    P.build_model(dict(good))
    ok("a synthetic state_dict with every expected key builds and checks")
    bad = dict(good)
    del bad["_blocks.3._depthwise_conv.weight"]
    expect_error("missing key", lambda: P.build_model(bad), "_blocks.3._depthwise_conv.weight")
    bad = dict(good)
    bad["_blocks.5._project_conv.weight"] = np.zeros((40, 240, 1, 3), np.float32)
    expect_error("wrong shape", lambda: P.build_model(bad), "_blocks.5._project_conv.weight")
    bad = dict(good)
    bad["_fc.bias"] = good["_fc.bias"].copy()
    bad["_fc.bias"][3] = np.nan
    expect_error("non-finite weight", lambda: P.build_model(bad), "_fc.bias")
    bad = dict(good)
    bad["_extra.weight"] = np.zeros(3, np.float32)
    expect_error("unused key", lambda: P.build_model(bad), "_extra.weight")


def expected_shapes():
    """Every key of the real checkpoint with its shape, derived from the architecture table."""
    out = {"_conv_stem.weight": (32, 3, 3, 3)}

    def bn(prefix, c):
        for a in ("weight", "bias", "running_mean", "running_var"):
            out[prefix + a] = (c,)

    bn("_bn0.", 32)
    cin, i = 32, 0
    for repeats, k, _stride, expand, cout in P.STAGES:
        for _ in range(repeats):
            p, mid = f"_blocks.{i}.", cin * expand
            if expand != 1:
                out[p + "_expand_conv.weight"] = (mid, cin, 1, 1)
                bn(p + "_bn0.", mid)
            out[p + "_depthwise_conv.weight"] = (mid, 1, k, k)
            bn(p + "_bn1.", mid)
            out[p + "_project_conv.weight"] = (cout, mid, 1, 1)
            bn(p + "_bn2.", cout)
            cin, i = cout, i + 1
    out["_conv_head.weight"] = (1280, 320, 1, 1)
    bn("_bn1.", 1280)
    out["_fc.weight"], out["_fc.bias"] = (1000, 1280), (1000,)
    return out


if __name__ == "__main__":
    main()
