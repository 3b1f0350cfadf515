#!/usr/bin/env python3
"""Hostile inputs for every file the CLI reads besides the ONNX model, and for its input specs and options:
NPU target descriptions (`--npu FILE.json`), partition caches (`--partition-cache`), profiles (`--load-profile`),
calibration samples (`profile --inputs`: .npy, .npz, PNG, JPEG, directories), transaction binaries
(`inspect --txn`), and `--input` / `--freeze` / `--cpu` / `-o` / model paths.

Every case runs under a 4 GiB address-space limit and a 60 s timeout. An input that must be refused has to make
bundlec exit with status 1 and an `error:` line containing the expected words (the file, field or tensor at
fault), without a panic, an abort, a signal, an `internal error`, an allocation failure or more than 64 KiB of
error text. A few cases check that legal-but-extreme inputs are accepted (exit 0) or refused cleanly.
Every hostile file is generated at run time in a temporary directory; the baseline cache, transactions and
profile come from bundlec itself (a small Conv -> Relu -> Sigmoid -> Conv -> Relu model on `--npu vnpu`).

usage: hostile_files.py [--bundlec target/debug/bundlec] [-j 2] [-k SUBSTRING] [-v] [--keep]"""
import argparse, json, os, random, re, shutil, struct, subprocess, sys, tempfile, time, zipfile, zlib
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser()
ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
ap.add_argument("-j", type=int, default=2, help="cases run in parallel")
ap.add_argument("-k", default="", help="only cases whose name contains this")
ap.add_argument("-v", action="store_true", help="print stderr of failing cases")
ap.add_argument("--keep", action="store_true", help="keep the temporary directory of hostile files")
args = ap.parse_args()
B = os.path.abspath(args.bundlec)
MEM_KIB = 4 << 20          # RLIMIT_AS: 4 GiB
TIMEOUT = 60
MAX_ERR = 64 << 10         # an error message may not flood the terminal

# ---------------------------------------------------------------------------------------------------------------
# Expectations

def ERR(*words):
    """Refused: exit 1, `error:` first line, every word in stderr."""
    return ("err", words)

OK = ("ok", ())

def EITHER(*words):
    """Legal but odd: exit 0, or a clean refusal (exit 1, `error:`, every word in stderr)."""
    return ("either", words)


def run(argv, cwd=None, timeout=TIMEOUT):
    # ulimit in a shell that execs bundlec: no preexec_fn (unsafe with threads), same pid for the timeout kill.
    cmd = ["/bin/sh", "-c", f'ulimit -v {MEM_KIB}; exec "$0" "$@"', B] + [str(a) for a in argv]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=cwd)
        return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        return None, "", (e.stderr or b"").decode("utf-8", "replace")


def judge(rc, out, err, exp, timeout=TIMEOUT):
    """Returns '' when the run meets the expectation, else why not."""
    kind, words = exp
    lines = err.strip().splitlines()
    first = lines[0] if lines else ""
    if rc is None:
        return f"timeout after {timeout} s"
    if rc < 0:
        return f"killed by signal {-rc}"
    if "panicked at" in err or "panicked at" in out:
        return "panic"
    if "memory allocation of" in err:
        return "allocation failure"
    if "(this is a bundlec bug)" in err:
        return "internal error"
    # Words that are file names are looked for anywhere; other words must appear outside the temp paths (a field
    # name that is also part of the file name does not count).
    bare = re.sub(re.escape(D) + r"/[^\s':]*", "<path>", err)
    is_file = lambda w: re.search(r"\.(json|yaml|npy|npz|png|jpe?g|txn|onnx|txt)$|/", w) or os.path.exists(P(w))
    missing = [w for w in words if w not in (err if is_file(w) else bare)]
    if kind == "ok":
        return "" if rc == 0 else f"exit {rc}, expected 0"
    if kind == "either" and rc == 0:
        return ""
    if rc != 1:
        return f"exit {rc}, expected 1"
    if not first.startswith("error:"):
        return "no `error:` line"
    if len(err) > MAX_ERR:
        return f"{len(err)} bytes of error text (floods the terminal)"
    if missing:
        return "error does not name " + ", ".join(repr(w) for w in missing)
    return ""

# ---------------------------------------------------------------------------------------------------------------
# Fixtures

D = tempfile.mkdtemp(prefix="hostile_files_")
P = lambda *n: os.path.join(D, *n)


def write(name, data):
    p = P(name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb" if isinstance(data, (bytes, bytearray)) else "w") as f:
        f.write(data)
    return p


def build_model():
    rng = np.random.default_rng(7)
    N = h.make_node
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"), N("Relu", ["c1"], ["r1"], name="relu1"),
             N("Sigmoid", ["r1"], ["s1"], name="sig"),
             N("Conv", ["s1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"), N("Relu", ["c2"], ["y"], name="relu2")]
    inits = [nh.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in [("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (8, 8, 3, 3)), ("b2", (8,))]]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 8, 8])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, P("model.onnx"))


def setup_fail(what, rc, err):
    print(f"SETUP FAILED: {what}: exit {rc}\n{err[-4000:]}")
    shutil.rmtree(D, ignore_errors=True)
    sys.exit(1)


build_model()
MODEL = P("model.onnx")
# A model with an i64 input (Reshape's shape), for --freeze.
_g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["y"])], "r", [h.make_tensor_value_info("x", T.FLOAT, [2, 4]),
                  h.make_tensor_value_info("s", T.INT64, [2])], [h.make_tensor_value_info("y", T.FLOAT, None)])
onnx.save(h.make_model(_g, opset_imports=[h.make_opsetid("", 17)]), P("reshape.onnx"))
RESHAPE = P("reshape.onnx")
NPU = ["--npu", "vnpu", "--npu-min-gain", "-1"]
PART = ["partition", MODEL] + NPU
COMPILE = ["compile", MODEL, "-o", P("out"), "--name", "h"]
VNPU = json.load(open(os.path.join(ROOT, "compiler/targets/vnpu.json")))

# The baseline partition cache (its key matches MODEL + vnpu + --npu-min-gain -1).
rc, _, err = run(PART + ["--partition-cache", P("base_cache.json")])
if rc != 0 or not os.path.exists(P("base_cache.json")):
    setup_fail("partition --partition-cache", rc, err)
CACHE = json.load(open(P("base_cache.json")))
if len(CACHE.get("segments", [])) < 2:
    setup_fail("baseline cache should have two NPU segments (conv1, conv2)", 0, json.dumps(CACHE)[:2000])
SEG_NODES = [s["nodes"][0] for s in CACHE["segments"]]          # first output of each NPU node
CPU_NODES = [r["node"] for r in CACHE.get("rejected", [])]      # the Sigmoid

# Baseline transactions.
rc, _, err = run(COMPILE + NPU)
if rc != 0 or not os.path.exists(P("out", "h.npu0.txn")):
    setup_fail("compile --npu vnpu", rc, err)
TXN = open(P("out", "h.npu0.txn"), "rb").read()


def txn_ops(b):
    """(offset, opcode, size) of every op, as docs/npu-transaction-format.md frames them."""
    ops, at = [], 16
    for _ in range(struct.unpack_from("<I", b, 8)[0]):
        op = b[at]
        size = {0: 24, 3: 32, 4: 32}.get(op) or struct.unpack_from("<I", b, at + (12 if op == 1 else 4))[0]
        ops.append((at, op, size))
        at += size
    return ops


OPS = txn_ops(TXN)

# A calibration sample and the baseline profile.
x_sample = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
np.save(P("sample.npy"), x_sample)
rc, _, err = run(["profile", MODEL, "--inputs", P("sample.npy"), "-o", P("base_profile.yaml"), "--bins", "8"])
if rc != 0:
    setup_fail("profile", rc, err)
PROFILE_TEXT = open(P("base_profile.yaml")).read()

# ---------------------------------------------------------------------------------------------------------------
# File builders

def target_json(fname, **over):
    """The vnpu description with fields replaced (a None value deletes the field); `host__clock_mhz` reaches host.*."""
    t = json.loads(json.dumps(VNPU))
    for k, v in over.items():
        obj, key = t, k
        if "__" in k:
            a, key = k.split("__")
            obj = t[a]
        if v is None:
            obj.pop(key, None)
        else:
            obj[key] = v
    return write(fname, json.dumps(t, indent=1))


def cache_json(fname, segs=None, **over):
    """The baseline cache with `segments` replaced by segs, other fields replaced (None deletes)."""
    c = json.loads(json.dumps(CACHE))
    if segs is not None:
        c["segments"] = segs
    for k, v in over.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    return write(fname, json.dumps(c, indent=1))


def seg(nodes, **kw):
    s = {"id": "npu0", "inputs": [], "outputs": [], "nodes": nodes, "constant_initializers": [], "device": "vnpu"}
    s.update(kw)
    return s


# The f32 tensors the profile holds (graph input and every node output of the unfused graph).
TENSORS = ["x", "c1", "r1", "s1", "c2", "y"]


def stats(mn=-1.0, mx=1.0, count=192, rng=2.0, hist="3x0 100 92 3x0"):
    return {"min": mn, "max": mx, "count": count, "range": rng, "histogram": hist}


def profile_yaml(name, tensors=None, version=1, bins=8, extra="", raw_tensors=None):
    if tensors is None:
        tensors = {t: stats() for t in TENSORS}
    lines = [f"version: {version}", "model: model.onnx", "samples: 1", f"bins: {bins}"]
    if extra:
        lines.append(extra)
    if raw_tensors is not None:
        lines.append("tensors:" + raw_tensors)
    else:
        lines.append("tensors:" if tensors else "tensors: {}")
        for t, s in tensors.items():
            lines.append(f"  {t}:")
            for k, v in s.items():
                lines.append(f"    {k}: {v}")
    return write(name, "\n".join(lines) + "\n")


def npy(name, descr="<f4", shape="(1, 3, 8, 8)", data=None, fortran="False", version=1, header=None):
    if data is None:
        data = x_sample.tobytes()
    hd = header if header is not None else f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    hd = hd.encode() if isinstance(hd, str) else hd
    hd += b" " * (-(len(hd) + 11) % 64) + b"\n"
    head = b"\x93NUMPY" + bytes([version, 0]) + (struct.pack("<H", len(hd)) if version == 1 else struct.pack("<I", len(hd)))
    return write(name, head + hd + data)


def npy_bytes(a):
    import io
    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


def zip_raw(name, member, data, method=8, crc=None, usize=None, zip64_usize=None, entries=None):
    """A one-member zip written by hand, so sizes and names can lie."""
    csize = len(data)
    crc = zlib.crc32(b"") if crc is None else crc
    usize = usize if usize is not None else 0
    fn = member.encode()
    extra = b""
    if zip64_usize is not None:
        extra = struct.pack("<HHQQ", 1, 16, zip64_usize, csize)
        usize32, csize32 = 0xFFFFFFFF, 0xFFFFFFFF
    else:
        usize32, csize32 = usize, csize
    ver = 45 if extra else 20
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, ver, 0, method, 0, 0x21, crc, csize32, usize32, len(fn), len(extra)) + fn + extra
    cd = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, ver, ver, 0, method, 0, 0x21, crc, csize32, usize32, len(fn),
                     len(extra), 0, 0, 0, 0, 0) + fn + extra
    n = 1 if entries is None else entries
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(cd), len(local) + len(data), 0)
    return write(name, local + data + cd + eocd)


def zeros_deflate(mib):
    """A raw deflate stream of `mib` MiB of zeros (one 1 MiB block repeated after full flushes)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(b"\0" * (1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return block * mib + c.flush(zlib.Z_FINISH)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(name, w, hgt, idat=None, color=2):
    if idat is None:
        ch = {0: 1, 2: 3}[color]
        rows = b"".join(b"\0" + bytes((x * 7 + y * 13) % 256 for x in range(w * ch)) for y in range(hgt))
        idat = zlib.compress(rows)
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, hgt, 8, color, 0, 0, 0))
            + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b""))
    return write(name, data)


def jpeg_sof(name, w, hgt):
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, hgt, w, 3) + b"\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    dqt = b"\xff\xdb" + struct.pack(">HB", 67, 0) + bytes([1] * 64)
    return write(name, b"\xff\xd8" + dqt + sof + b"\xff\xd9")


def txn_file(name, b):
    return write(name, bytes(b))


def patched(b, at, fmt, value, fix_total=True):
    b = bytearray(b)
    struct.pack_into(fmt, b, at, value)
    if fix_total:
        struct.pack_into("<I", b, 12, len(b))
    return b

# ---------------------------------------------------------------------------------------------------------------
# Cases: name -> (prepare() -> argv, expectation, timeout). prepare() writes the case's files and returns the
# bundlec arguments; it runs in the worker, just before the case.

cases = {}


def case(name, exp):
    def deco(f):
        cases[name] = (f, exp, TIMEOUT)
        return f
    return deco


def simple(name, argv_f, exp, timeout=TIMEOUT):
    cases[name] = (argv_f, exp, timeout)


# --- NPU target description --------------------------------------------------------------------------------------
ops_npu = lambda p: ["ops", "--npu", p]
part_npu = lambda p: ["partition", MODEL, "--npu", p, "--npu-min-gain", "-1"]

simple("target_control", lambda: ops_npu(target_json("t_control.json")), OK)
simple("target_control_partition", lambda: part_npu(target_json("t_control_p.json")), OK)
simple("target_not_json", lambda: ops_npu(write("t_notjson.json", "name = vnpu\n")), ERR("t_notjson.json", "line 1"))
simple("target_empty_file", lambda: ops_npu(write("t_empty.json", "")), ERR("t_empty.json"))
simple("target_not_utf8", lambda: ops_npu(write("t_latin1.json", b'{"name": "v\xe9npu"}')), ERR("t_latin1.json"))
simple("target_top_level_array", lambda: ops_npu(write("t_array.json", "[1, 2, 3]")), ERR("t_array.json"))
simple("target_null", lambda: ops_npu(write("t_null.json", "null")), ERR("t_null.json"))
simple("target_missing_file", lambda: ops_npu(P("t_nope.json")), ERR("t_nope.json"))
simple("target_is_directory", lambda: (os.makedirs(P("t_dir.json"), exist_ok=True), ops_npu(P("t_dir.json")))[1], ERR("t_dir.json"))
simple("target_missing_clock", lambda: ops_npu(target_json("t_noclock.json", clock_mhz=None)), ERR("t_noclock.json", "clock_mhz"))
simple("target_missing_host", lambda: ops_npu(target_json("t_nohost.json", host=None)), ERR("t_nohost.json", "host"))
simple("target_missing_ops", lambda: ops_npu(target_json("t_noops.json", ops=None)), ERR("t_noops.json", "ops"))
simple("target_unknown_field", lambda: ops_npu(target_json("t_unknown.json", turbo=True)), ERR("t_unknown.json", "turbo"))
simple("target_duplicate_key", lambda: ops_npu(write("t_dupkey.json", json.dumps(VNPU)[:-1] + ', "clock_mhz": 5}')),
       ERR("t_dupkey.json", "clock_mhz"))
simple("target_clock_zero", lambda: ops_npu(target_json("t_clock0.json", clock_mhz=0)), ERR("t_clock0.json", "clock_mhz"))
simple("target_clock_negative", lambda: ops_npu(target_json("t_clockneg.json", clock_mhz=-1000)), ERR("t_clockneg.json", "-1000"))
simple("target_clock_string", lambda: ops_npu(target_json("t_clockstr.json", clock_mhz="fast")), ERR("t_clockstr.json", "clock_mhz"))
simple("target_clock_float", lambda: ops_npu(target_json("t_clockf.json", clock_mhz=1000.5)), ERR("t_clockf.json", "1000.5"))
simple("target_clock_nan", lambda: ops_npu(write("t_clocknan.json", json.dumps(VNPU).replace('"clock_mhz": 1000', '"clock_mhz": NaN', 1))),
       ERR("t_clocknan.json"))
simple("target_clock_huge", lambda: ops_npu(target_json("t_clockhuge.json", clock_mhz=10 ** 30)), ERR("t_clockhuge.json", "line"))
simple("target_clock_u64", lambda: ops_npu(target_json("t_clocku64.json", clock_mhz=1 << 40)), ERR("t_clocku64.json", "1099511627776"))
simple("target_host_clock_zero", lambda: ops_npu(target_json("t_hclock0.json", host__clock_mhz=0)), ERR("t_hclock0.json", "host.clock_mhz"))
simple("target_host_copy_zero", lambda: ops_npu(target_json("t_hcopy0.json", host__copy_bytes_per_cycle=0)),
       ERR("t_hcopy0.json", "host.copy_bytes_per_cycle"))
simple("target_dma_zero", lambda: ops_npu(target_json("t_dma0.json", dma_bytes_per_cycle=0)), ERR("t_dma0.json", "dma_bytes_per_cycle"))
simple("target_dma_negative", lambda: ops_npu(target_json("t_dmaneg.json", dma_bytes_per_cycle=-64)), ERR("t_dmaneg.json", "-64"))
simple("target_instr_zero", lambda: ops_npu(target_json("t_instr0.json", instr_bytes_per_cycle=0)), ERR("t_instr0.json", "instr_bytes_per_cycle"))
simple("target_macs_zero", lambda: ops_npu(target_json("t_macs0.json", macs_per_cycle={"f32": 0, "i8": 256})), ERR("t_macs0.json", "macs_per_cycle.f32"))
simple("target_local_memory_zero", lambda: ops_npu(target_json("t_lm0.json", local_memory_bytes=0)), ERR("t_lm0.json", "local_memory_bytes"))
simple("target_local_memory_huge", lambda: ops_npu(target_json("t_lmhuge.json", local_memory_bytes=4294967232)), ERR("t_lmhuge.json", "local_memory_bytes"))
simple("target_local_memory_unaligned", lambda: ops_npu(target_json("t_lm65.json", local_memory_bytes=65537)), ERR("t_lm65.json", "local_memory_bytes"))
simple("target_mem_tile_huge", lambda: ops_npu(target_json("t_mthuge.json", mem_tile_bytes=4294967232)), ERR("t_mthuge.json", "mem_tile_bytes"))
# A memory-tile row with no memory: the description is inconsistent and should be refused.
simple("target_mem_tile_zero", lambda: ops_npu(target_json("t_mt0.json", mem_tile_bytes=0)), ERR("t_mt0.json", "mem_tile_bytes"))
simple("target_zero_cols", lambda: ops_npu(target_json("t_cols0.json", cols=0)), ERR("t_cols0.json", "cols"))
simple("target_cols_65", lambda: ops_npu(target_json("t_cols65.json", cols=65)), ERR("t_cols65.json", "cols"))
simple("target_cols_u8_overflow", lambda: ops_npu(target_json("t_cols256.json", cols=256)), ERR("t_cols256.json", "256"))
simple("target_no_core_rows", lambda: ops_npu(target_json("t_rows2.json", rows=2)), ERR("t_rows2.json", "rows"))
simple("target_zero_rows", lambda: ops_npu(target_json("t_rows0.json", rows=0, mem_tile_rows=0)), ERR("t_rows0.json", "rows"))
simple("target_rows_32", lambda: ops_npu(target_json("t_rows32.json", rows=32)), ERR("t_rows32.json", "rows"))
simple("target_mem_rows_255", lambda: ops_npu(target_json("t_mr255.json", mem_tile_rows=255)), ERR("t_mr255.json", "rows"))
simple("target_generation_256", lambda: ops_npu(target_json("t_gen256.json", generation=256)), ERR("t_gen256.json", "generation"))
simple("target_name_empty", lambda: ops_npu(target_json("t_name0.json", name="")), ERR("t_name0.json", "name"))
simple("target_name_path", lambda: ops_npu(target_json("t_namepath.json", name="../../etc/passwd")), ERR("t_namepath.json", "name"))
simple("target_name_number", lambda: ops_npu(target_json("t_namenum.json", name=7)), ERR("t_namenum.json", "line"))
simple("target_unknown_op", lambda: ops_npu(target_json("t_gridsample.json", ops=VNPU["ops"] + [{"op": "GridSample", "dtypes": ["f32"]}])),
       ERR("t_gridsample.json", "ops[12].op", "GridSample"))
simple("target_op_empty_name", lambda: ops_npu(target_json("t_opempty.json", ops=[{"op": "", "dtypes": ["f32"]}])), ERR("t_opempty.json", "ops[0].op"))
simple("target_op_bad_dtype", lambda: ops_npu(target_json("t_f16.json", ops=[{"op": "Conv", "dtypes": ["f16"]}])), ERR("t_f16.json", "ops[0].dtypes[0]"))
simple("target_op_dtypes_string", lambda: ops_npu(target_json("t_dtstr.json", ops=[{"op": "Conv", "dtypes": "f32"}])), ERR("t_dtstr.json", "line"))
simple("target_op_unknown_field", lambda: ops_npu(target_json("t_opfield.json", ops=[{"op": "Conv", "dtypes": ["f32"], "max_pads": 3}])),
       ERR("t_opfield.json", "max_pads"))
simple("target_op_zero_stride", lambda: ops_npu(target_json("t_stride0.json", ops=[{"op": "Conv", "dtypes": ["f32"], "max_stride": 0}])),
       ERR("t_stride0.json", "ops[0].max_stride"))
simple("target_op_negative_kernel", lambda: ops_npu(target_json("t_kneg.json", ops=[{"op": "Conv", "dtypes": ["f32"], "max_kernel": -3}])),
       ERR("t_kneg.json", "ops[0].max_kernel"))
# Two entries for one op: which limits apply is ambiguous; should be refused naming the second entry.
simple("target_duplicate_op", lambda: ops_npu(target_json("t_dupop.json", ops=VNPU["ops"] + [{"op": "Conv", "dtypes": ["f32"], "max_kernel": 1}])),
       ERR("t_dupop.json", "ops[12]", "Conv"))
simple("target_ops_object", lambda: ops_npu(target_json("t_opsobj.json", ops={"Conv": {}})), ERR("t_opsobj.json", "line"))
simple("target_deep_nesting", lambda: ops_npu(write("t_deep.json", '{"name": "vnpu", "description": ' + "[" * 200000 + "]" * 200000 + "}")),
       ERR("t_deep.json"))
simple("target_deep_nesting_ops", lambda: ops_npu(write("t_deepops.json", json.dumps(VNPU)[:-1] + ', "ops2": ' + "{\"a\":" * 100000 + "1" + "}" * 100001)),
       ERR("t_deepops.json"))
simple("target_ops_100k", lambda: ops_npu(target_json("t_100k.json", ops=[{"op": "Relu", "dtypes": ["f32"]}] * 100000)), EITHER("t_100k.json", "ops"))
# Names become file names (`header.xclbin` = NAME.json) and symbols in the recipe: a 100 MB name must be refused.
simple("target_name_100mb", lambda: ops_npu(target_json("t_name100mb.json", name="v" * (100 << 20))), ERR("t_name100mb.json", "name"))
simple("target_description_100mb_nul", lambda: ops_npu(target_json("t_desc100mb.json", description="\0" * (100 << 20))),
       EITHER("t_desc100mb.json", "description"))
# Legal extremes: accepted, and the cost model / op compiler must survive them.
simple("target_extreme_rates", lambda: part_npu(target_json("t_rates.json", clock_mhz=4294967295, dma_bytes_per_cycle=1, instr_bytes_per_cycle=1,
                                                            dispatch_overhead_cycles=4294967295, macs_per_cycle={"f32": 4294967295, "i8": 1},
                                                            host={"clock_mhz": 1, "macs_per_cycle": {"f32": 4294967295, "i8": 1},
                                                                  "elements_per_cycle": 4294967295, "copy_bytes_per_cycle": 1})), OK)
simple("target_enormous_limits", lambda: part_npu(target_json("t_limits.json", ops=[dict(o, max_kernel=4294967295, max_stride=4294967295, max_dilation=4294967295)
                                                                                    if "max_kernel" in o else o for o in VNPU["ops"]])), OK)
simple("target_biggest_array", lambda: ["compile", MODEL, "-o", P("out_big"), "--name", "h", "--npu", target_json("t_bigarray.json", rows=6, cols=64, mem_tile_rows=1,
                                                                                                              local_memory_bytes=1 << 17, mem_tile_bytes=1 << 20), "--npu-min-gain", "-1"], OK)
simple("target_smallest_memory", lambda: part_npu(target_json("t_small.json", rows=3, cols=1, mem_tile_rows=1, local_memory_bytes=1024, mem_tile_bytes=8192)), OK)
# Geometries the data movement has no routes for: refused naming the field.
simple("target_no_mem_tile_row", lambda: part_npu(target_json("t_nomem.json", rows=31, cols=64, mem_tile_rows=0)), ERR("t_nomem.json", "mem_tile_rows"))
simple("target_five_core_rows", lambda: part_npu(target_json("t_5cores.json", rows=7)), ERR("t_5cores.json", "rows", "at most 4"))
simple("target_staging_too_small", lambda: part_npu(target_json("t_staging.json", local_memory_bytes=1 << 17, mem_tile_bytes=1 << 19)),
       ERR("t_staging.json", "mem_tile_bytes", "staging"))
simple("target_empty_ops", lambda: part_npu(target_json("t_noopslist.json", ops=[])), OK)

# --- partition cache ---------------------------------------------------------------------------------------------
part_cache = lambda p: PART + ["--partition-cache", p]

simple("cache_control", lambda: part_cache(cache_json("c_control.json")), OK)
simple("cache_control_compile", lambda: COMPILE + NPU + ["--partition-cache", cache_json("c_control_compile.json")], OK)
simple("cache_truncated", lambda: part_cache(write("c_trunc.json", open(P("base_cache.json")).read()[:150])), ERR("c_trunc.json", "line"))
simple("cache_empty", lambda: part_cache(write("c_empty.json", "")), ERR("c_empty.json"))
simple("cache_not_json", lambda: part_cache(write("c_notjson.json", "segments: [npu0]\n")), ERR("c_notjson.json"))
simple("cache_is_directory", lambda: (os.makedirs(P("c_dir.json"), exist_ok=True), part_cache(P("c_dir.json")))[1], ERR("c_dir.json"))
simple("cache_in_missing_dir", lambda: part_cache(P("nodir", "sub", "c.json")), ERR("c.json"))
simple("cache_without_npu", lambda: ["compile", MODEL, "-o", P("out"), "--name", "h", "--partition-cache", P("c_x.json")], ERR("--partition-cache", "--npu"))
simple("cache_version_string", lambda: part_cache(cache_json("c_verstr.json", version="1")), ERR("c_verstr.json", "version"))
simple("cache_version_future", lambda: part_cache(cache_json("c_ver3.json", version=3)), ERR("c_ver3.json", "version"))
simple("cache_version_1_rewritten", lambda: part_cache(cache_json("c_ver1.json", version=1)), OK)
simple("cache_version_huge", lambda: part_cache(cache_json("c_verhuge.json", version=10 ** 40)), ERR("c_verhuge.json", "version"))
simple("cache_version_missing", lambda: part_cache(cache_json("c_vermiss.json", version=None)), ERR("c_vermiss.json", "version"))
simple("cache_key_number", lambda: part_cache(cache_json("c_keynum.json", key=12345)), ERR("c_keynum.json", "key"))
simple("cache_key_missing", lambda: part_cache(cache_json("c_keymiss.json", key=None)), ERR("c_keymiss.json", "key"))
simple("cache_segments_object", lambda: part_cache(cache_json("c_segobj.json", segments={"npu0": []})), ERR("c_segobj.json", "segments"))
simple("cache_segments_missing", lambda: part_cache(cache_json("c_segmiss.json", segments=None)), ERR("c_segmiss.json", "segments"))
simple("cache_nodes_string", lambda: part_cache(cache_json("c_nodesstr.json", [seg(SEG_NODES[0])])), ERR("c_nodesstr.json", "segments[0].nodes"))
simple("cache_node_number", lambda: part_cache(cache_json("c_nodenum.json", [seg([SEG_NODES[0]]), seg([18446744073709551615])])),
       ERR("c_nodenum.json", "segments[1].nodes[0]"))
simple("cache_unknown_node", lambda: part_cache(cache_json("c_ghost.json", [seg([SEG_NODES[0], "ghost"])])), ERR("c_ghost.json", "segments[0].nodes[1]", "ghost"))
simple("cache_cpu_node", lambda: part_cache(cache_json("c_cpunode.json", [seg([CPU_NODES[0]])])), ERR("c_cpunode.json", "segments[0].nodes[0]", "NPU"))
simple("cache_node_in_two_segments", lambda: part_cache(cache_json("c_twice.json", [seg([SEG_NODES[0]]), seg([SEG_NODES[1], SEG_NODES[0]])])),
       ERR("c_twice.json", "segments[1].nodes[1]"))
simple("cache_node_twice_in_segment", lambda: part_cache(cache_json("c_twice1.json", [seg([SEG_NODES[0], SEG_NODES[0]])])), ERR("c_twice1.json", "segments[0].nodes[1]"))
simple("cache_not_contiguous", lambda: part_cache(cache_json("c_noncvx.json", [seg(SEG_NODES)])), ERR("c_noncvx.json", "segments", "re-enters"))
# An empty segment has no transaction to build: refused, naming it.
simple("cache_empty_segment", lambda: part_cache(cache_json("c_emptyseg.json", [seg([]), seg([SEG_NODES[0]])])), ERR("c_emptyseg.json", "segments[0]"))
simple("cache_empty_segment_compile", lambda: COMPILE + NPU + ["--partition-cache", cache_json("c_emptyseg_c.json", [seg([]), seg([SEG_NODES[0]])])],
       ERR("c_emptyseg_c.json", "segments[0]"))
simple("cache_segments_reversed", lambda: part_cache(cache_json("c_reversed.json", [seg([SEG_NODES[1]], id="npu1"), seg([SEG_NODES[0]], id="npu0")])),
       EITHER("c_reversed.json", "segments"))
simple("cache_segments_reversed_compile", lambda: COMPILE + NPU + ["--partition-cache", cache_json("c_reversed_c.json", [seg([SEG_NODES[1]]), seg([SEG_NODES[0]])])],
       EITHER("c_reversed_c.json", "segments"))
simple("cache_no_segments_compile", lambda: COMPILE + NPU + ["--partition-cache", cache_json("c_noseg_c.json", [])], OK)
simple("cache_out_of_range_ids", lambda: part_cache(cache_json("c_ids.json", [seg([SEG_NODES[0]], id="npu18446744073709551616"),
                                                                            seg([SEG_NODES[1]], id=-1)])), EITHER("c_ids.json", "segments"))
simple("cache_huge_numbers", lambda: part_cache(cache_json("c_hugenum.json", [dict(s, estimated_cycles={"total": 1e308, "cpu": -1}, bytes={"txn": 10 ** 30})
                                                                              for s in CACHE["segments"]])), EITHER("c_hugenum.json", "segments"))
simple("cache_number_overflow", lambda: part_cache(write("c_numovf.json", json.dumps(CACHE).replace('"version": 2', '"version": 1e999', 1))), ERR("c_numovf.json"))
simple("cache_node_1mb_name", lambda: part_cache(cache_json("c_bigname.json", [seg(["n" * (1 << 20)])])), ERR("c_bigname.json", "segments[0].nodes[0]"))
simple("cache_100k_segments", lambda: part_cache(cache_json("c_100k.json", [seg([]) for _ in range(100000)])), ERR("c_100k.json", "segments"))
simple("cache_deep_nesting", lambda: part_cache(write("c_deep.json", json.dumps(CACHE)[:-1] + ', "x": ' + "[" * 200000 + "]" * 200000 + "}")),
       ERR("c_deep.json"))

# --- profiles ----------------------------------------------------------------------------------------------------
LOL = ['lol0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + \
      [f"lol{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
prof = lambda p, *extra: COMPILE + ["--load-profile", p] + list(extra)

simple("profile_control", lambda: prof(P("base_profile.yaml")), OK)
simple("profile_control_written", lambda: prof(profile_yaml("p_control.yaml")), OK)
simple("profile_control_entropy", lambda: prof(profile_yaml("p_control_e.yaml"), "--calibration", "entropy"), OK)
simple("profile_not_yaml", lambda: prof(write("p_notyaml.yaml", "version: 1\ntensors: [: : {\n")), ERR("p_notyaml.yaml"))
simple("profile_empty", lambda: prof(write("p_empty.yaml", "")), ERR("p_empty.yaml"))
simple("profile_binary", lambda: prof(write("p_binary.yaml", bytes(range(256)) * 16)), ERR("p_binary.yaml"))
simple("profile_missing_file", lambda: prof(P("p_nope.yaml")), ERR("p_nope.yaml"))
simple("profile_is_directory", lambda: (os.makedirs(P("p_dir.yaml"), exist_ok=True), prof(P("p_dir.yaml")))[1], ERR("p_dir.yaml"))
simple("profile_version_2", lambda: prof(profile_yaml("p_v2.yaml", version=2)), ERR("p_v2.yaml", "version 2"))
simple("profile_version_string", lambda: prof(profile_yaml("p_vstr.yaml", version='"one"')), ERR("p_vstr.yaml", "version"))
simple("profile_version_negative", lambda: prof(profile_yaml("p_vneg.yaml", version=-1)), ERR("p_vneg.yaml", "version"))
simple("profile_tensors_list", lambda: prof(profile_yaml("p_tlist.yaml", raw_tensors=" [x, y]")), ERR("p_tlist.yaml", "tensors"))
simple("profile_min_nan", lambda: prof(profile_yaml("p_nan.yaml", {"x": stats(mn=".nan")})), ERR("p_nan.yaml", "'x'", "range"))
simple("profile_max_inf", lambda: prof(profile_yaml("p_inf.yaml", {"r1": stats(mx=".inf")})), ERR("p_inf.yaml", "'r1'", "range"))
simple("profile_range_nan", lambda: prof(profile_yaml("p_rnan.yaml", {"x": stats(rng=".nan")})), ERR("p_rnan.yaml", "'x'", "range"))
simple("profile_min_gt_max", lambda: prof(profile_yaml("p_minmax.yaml", {"x": stats(mn=5.0, mx=-5.0)})), ERR("p_minmax.yaml", "'x'", "range"))
# A negative histogram range is nonsense (the histogram covers [-range, range]): should be refused.
simple("profile_range_negative", lambda: prof(profile_yaml("p_rneg.yaml", {t: stats(rng=-2.0) for t in TENSORS}), "--calibration", "entropy"),
       ERR("p_rneg.yaml", "range"))
simple("profile_range_overflow", lambda: prof(profile_yaml("p_rbig.yaml", {t: stats(mn=-3.4e38, mx=3.4e38, rng=3.4e38) for t in TENSORS})),
       EITHER("p_rbig.yaml"))
simple("profile_count_negative", lambda: prof(profile_yaml("p_cneg.yaml", {"x": stats(count=-1)})), ERR("p_cneg.yaml", "count"))
simple("profile_bin_negative", lambda: prof(profile_yaml("p_bneg.yaml", {"x": stats(hist="3x0 100 -92 3x0")})), ERR("p_bneg.yaml", "'x'", "-92"))
simple("profile_bins_odd", lambda: prof(profile_yaml("p_odd.yaml", {"x": stats(hist="3x0 100 92 2x0")})), ERR("p_odd.yaml", "'x'", "bins"))
simple("profile_bins_one", lambda: prof(profile_yaml("p_one.yaml", {"x": stats(hist="192")})), ERR("p_one.yaml", "'x'", "bins"))
simple("profile_bins_empty", lambda: prof(profile_yaml("p_nobins.yaml", {"x": stats(hist='""')})), ERR("p_nobins.yaml", "'x'", "bins"))
# The header says 8 bins per tensor, the tensors have 16: harmless (each histogram carries its own length).
simple("profile_bins_mismatch", lambda: prof(profile_yaml("p_binsmm.yaml", {t: stats(hist="7x0 100 92 7x0") for t in TENSORS})), EITHER("p_binsmm.yaml", "bins"))
simple("profile_bins_huge_run", lambda: prof(profile_yaml("p_bhuge.yaml", {"x": stats(hist="99999999999999x1 1")})), ERR("p_bhuge.yaml", "'x'"))
simple("profile_bins_run_overflow", lambda: prof(profile_yaml("p_bovf.yaml", {"x": stats(hist="1048576x0 18446744073709551615x1")})), ERR("p_bovf.yaml", "'x'"))
simple("profile_bins_over_limit", lambda: prof(profile_yaml("p_b2m.yaml", {"x": stats(hist="1048576x0 2x1")})), ERR("p_b2m.yaml", "'x'"))
simple("profile_bin_garbage", lambda: prof(profile_yaml("p_bgarb.yaml", {"x": stats(hist="3x0 1e5 92 3x0")})), ERR("p_bgarb.yaml", "'x'", "1e5"))
# Bin counts whose sum overflows u64 (and disagrees with `count`): must be refused, not summed.
simple("profile_counts_overflow_entropy", lambda: prof(profile_yaml("p_ovfe.yaml", {t: stats(hist="8x18446744073709551615") for t in TENSORS}),
                                                      "--calibration", "entropy"), ERR("p_ovfe.yaml", "'x'"))
simple("profile_counts_overflow_percentile", lambda: prof(profile_yaml("p_ovfp.yaml", {t: stats(count=18446744073709551615, hist="9000000000000 18446744073709551615 6x0")
                                                                         for t in TENSORS}), "--calibration", "percentile"), ERR("p_ovfp.yaml", "'x'"))
simple("profile_many_max_histograms", lambda: prof(profile_yaml("p_many.yaml", {f"t{i}": stats(hist="1048576x0") for i in range(300)},
                                                               bins=1048576)), EITHER("p_many.yaml"))
simple("profile_unknown_tensors_only", lambda: prof(profile_yaml("p_ghost.yaml", {"ghost": stats()})), EITHER("p_ghost.yaml"))
simple("profile_missing_tensors", lambda: prof(profile_yaml("p_partial.yaml", {"x": stats(), "r1": stats()})), OK)
simple("profile_no_tensors", lambda: prof(profile_yaml("p_notensors.yaml", {})), EITHER("p_notensors.yaml"))
# Alias bombs and deep nesting can only sit in fields bundlec ignores (no known field nests): skipped cheaply or
# refused, never expanded.
simple("profile_billion_laughs", lambda: prof(profile_yaml("p_lol.yaml", extra="\n".join(LOL))), EITHER("p_lol.yaml"))
simple("profile_billion_laughs_as_tensors", lambda: prof(profile_yaml("p_lol3.yaml", raw_tensors=" *a9", extra="\n".join(LOL))), ERR("p_lol3.yaml", "tensors"))
simple("profile_billion_laughs_in_stats", lambda: prof(profile_yaml("p_lol2.yaml", raw_tensors="\n" + "\n".join(
    ["  x:"] + [f"    {k}: {v}" for k, v in stats().items()] + ["    " + l for l in LOL]))), EITHER("p_lol2.yaml"))
# 200 KB of '[': the YAML parser is quadratic in flow nesting depth (16 s here at 100000, 4 s at 50000) before
# serde_yaml's recursion limit of 128 is ever consulted; a file this small must be refused in well under 10 s.
simple("profile_deep_nesting", lambda: prof(write("p_deep.yaml", PROFILE_TEXT.replace("model:", "model: " + "[" * 100000 + "]" * 100000 + " #", 1))),
       ERR("p_deep.yaml", "model"), timeout=10)
simple("profile_python_tag", lambda: prof(write("p_tag.yaml", PROFILE_TEXT.replace("model:", "model: !!python/object/apply:os.system ['touch pwned'] #", 1))),
       EITHER("p_tag.yaml"))
simple("profile_100mb_model", lambda: prof(write("p_bigmodel.yaml", PROFILE_TEXT.replace("model:", "model: " + "m" * (100 << 20) + " #", 1))), EITHER("p_bigmodel.yaml"))
simple("profile_keep_f32_without", lambda: COMPILE + ["--keep-f32", "conv1"], ERR("--keep-f32", "--load-profile"))

# --- calibration inputs ------------------------------------------------------------------------------------------
calib = lambda *paths: ["profile", MODEL, "--inputs"] + list(paths) + ["-o", P("calib_out.yaml")]

simple("npy_control", lambda: calib(P("sample.npy")), OK)
simple("npy_control_f8", lambda: calib(npy("n_f8.npy", "<f8", data=x_sample.astype(np.float64).tobytes())), OK)
simple("npy_empty_file", lambda: calib(write("n_empty.npy", b"")), ERR("n_empty.npy", "not an .npy"))
simple("npy_bad_magic", lambda: calib(write("n_magic.npy", b"\x93NUMPZ\x01\x00" + open(P("sample.npy"), "rb").read()[8:])), ERR("n_magic.npy", "not an .npy"))
simple("npy_short", lambda: calib(write("n_short.npy", b"\x93NUMPY\x01")), ERR("n_short.npy"))
simple("npy_version_9", lambda: calib(write("n_v9.npy", b"\x93NUMPY\x09\x00" + b"\0" * 100)), ERR("n_v9.npy", "version"))
simple("npy_v2_short", lambda: calib(write("n_v2short.npy", b"\x93NUMPY\x02\x00\x10\x00")), ERR("n_v2short.npy"))
simple("npy_header_truncated", lambda: calib(write("n_htrunc.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'")), ERR("n_htrunc.npy", "truncated"))
simple("npy_header_len_4g", lambda: calib(write("n_h4g.npy", b"\x93NUMPY\x02\x00\xff\xff\xff\xff{'descr'")), ERR("n_h4g.npy", "truncated"))
simple("npy_header_not_text", lambda: calib(npy("n_nottext.npy", header=b"{'descr': '<f4', \xff\xfe 'shape': (1, 3, 8, 8), }")), ERR("n_nottext.npy", "header"))
simple("npy_header_garbage", lambda: calib(npy("n_hgarb.npy", header="what is this")), ERR("n_hgarb.npy", "descr"))
simple("npy_no_shape", lambda: calib(npy("n_noshape.npy", header="{'descr': '<f4', 'fortran_order': False}")), ERR("n_noshape.npy", "shape"))
simple("npy_shape_2p40_elements", lambda: calib(npy("n_2p40.npy", shape="(1048576, 1048576)")), ERR("n_2p40.npy", "2^40"))
simple("npy_shape_overflow", lambda: calib(npy("n_ovf.npy", shape="(99999999999, 99999999999, 99999999999)")), ERR("n_ovf.npy", "2^40"))
simple("npy_shape_u64_overflow", lambda: calib(npy("n_u64.npy", shape="(184467440737095516160,)")), ERR("n_u64.npy", "dimension"))
simple("npy_shape_negative", lambda: calib(npy("n_neg.npy", shape="(-1, 3, 8, 8)")), ERR("n_neg.npy", "dimension"))
simple("npy_shape_rank_64", lambda: calib(npy("n_rank64.npy", shape="(" + "1, " * 64 + ")")), ERR("n_rank64.npy", "rank"))
simple("npy_shape_zero", lambda: calib(npy("n_zero.npy", shape="(0, 3, 8, 8)", data=b"")), ERR("n_zero.npy"))
simple("npy_truncated_data", lambda: calib(npy("n_tdata.npy", data=x_sample.tobytes()[:-5])), ERR("n_tdata.npy", "data bytes"))
simple("npy_trailing_data", lambda: calib(npy("n_trail.npy", data=x_sample.tobytes() + b"\0" * 4)), ERR("n_trail.npy", "data bytes"))
simple("npy_wrong_shape", lambda: calib(npy("n_wshape.npy", shape="(1, 3, 8, 9)", data=np.zeros((1, 3, 8, 9), np.float32).tobytes())),
       ERR("n_wshape.npy", "shape"))
simple("npy_dtype_complex", lambda: calib(npy("n_c8.npy", "<c8", data=b"\0" * 8 * 192)), ERR("n_c8.npy", "dtype"))
simple("npy_dtype_half", lambda: calib(npy("n_f2.npy", "<f2", data=b"\0" * 2 * 192)), ERR("n_f2.npy", "dtype"))
simple("npy_dtype_big_endian", lambda: calib(npy("n_be.npy", ">f4", data=x_sample.byteswap().tobytes())), ERR("n_be.npy", "dtype"))
simple("npy_dtype_bool_for_f32", lambda: calib(npy("n_bool.npy", "|b1", data=b"\1" * 192)), ERR("n_bool.npy", "bool"))
simple("npy_dtype_int_for_f32", lambda: calib(npy("n_i4.npy", "<i4", data=np.arange(192, dtype=np.int32).tobytes())), OK)
simple("npy_fortran_order", lambda: calib(npy("n_fortran.npy", fortran="True")), ERR("n_fortran.npy", "Fortran"))
simple("npy_object_pickle", lambda: calib(write("n_object.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", 118)
                                                + b"{'descr': '|O', 'fortran_order': False, 'shape': (1, 3, 8, 8), }".ljust(117) + b"\n"
                                                + b"\x80\x04cos\nsystem\n(S'touch pwned'\ntR.")), ERR("n_object.npy", "dtype"))
simple("npy_structured", lambda: calib(npy("n_struct.npy", header="{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1, 3, 8, 8), }")),
       ERR("n_struct.npy", "descr"))
simple("npy_is_directory", lambda: (os.makedirs(P("ndir", "d.npy"), exist_ok=True), calib(P("ndir")))[1], ERR("d.npy"))
simple("npy_missing", lambda: calib(P("n_nope.npy")), ERR("n_nope.npy"))
simple("inputs_empty_directory", lambda: (os.makedirs(P("emptydir"), exist_ok=True), calib(P("emptydir")))[1], ERR("--inputs", "no calibration files"))
simple("inputs_unknown_extension", lambda: calib(write("n_data.txt", "1 2 3")), ERR("n_data.txt", "unknown file type"))
simple("inputs_no_extension", lambda: calib(write("n_noext", open(P("sample.npy"), "rb").read())), ERR("n_noext"))
simple("npz_control", lambda: (np.savez(P("z_control.npz"), x=x_sample), calib(P("z_control.npz")))[1], OK)
simple("npz_control_compressed", lambda: (np.savez_compressed(P("z_controlc.npz"), x=x_sample), calib(P("z_controlc.npz")))[1], OK)
simple("npz_not_zip", lambda: calib(write("z_notzip.npz", b"PK\x03\x04 this is not a zip")), ERR("z_notzip.npz"))
simple("npz_empty_file", lambda: calib(write("z_empty.npz", b"")), ERR("z_empty.npz"))
simple("npz_missing_key", lambda: (np.savez(P("z_nokey.npz"), y=x_sample), calib(P("z_nokey.npz")))[1], ERR("z_nokey.npz", "'x'"))
simple("npz_member_not_npy", lambda: calib(zip_raw("z_notnpy.npz", "x.npy", b"hello", method=0, crc=zlib.crc32(b"hello"), usize=5)),
       ERR("z_notnpy.npz", "'x'"))
simple("npz_bad_crc", lambda: calib(zip_raw("z_crc.npz", "x.npy", npy_bytes(x_sample), method=0, crc=1234, usize=len(npy_bytes(x_sample)))),
       ERR("z_crc.npz"))
simple("npz_bzip2_member", lambda: (zipfile.ZipFile(P("z_bz2.npz"), "w", zipfile.ZIP_BZIP2).writestr("x.npy", npy_bytes(x_sample)),
                                    calib(P("z_bz2.npz")))[1], ERR("z_bz2.npz"))
simple("npz_path_traversal_only", lambda: (zipfile.ZipFile(P("z_trav.npz"), "w").writestr("../../x.npy", npy_bytes(x_sample)),
                                           calib(P("z_trav.npz")))[1], ERR("z_trav.npz", "'x'"))


@case("npz_path_traversal_extra", OK)
def _():
    with zipfile.ZipFile(P("z_trav2.npz"), "w") as z:
        z.writestr("x.npy", npy_bytes(x_sample))
        z.writestr("../../../evil_hostile.npy", npy_bytes(x_sample))
        z.writestr("/tmp/evil_hostile_abs.npy", npy_bytes(x_sample))
    return calib(P("z_trav2.npz"))


simple("npz_declared_8gib", lambda: calib(zip_raw("z_decl8g.npz", "x.npy", zeros_deflate(1), zip64_usize=8 << 30)), ERR("z_decl8g.npz", "'x'"))
simple("npz_declared_2p63", lambda: calib(zip_raw("z_decl63.npz", "x.npy", zeros_deflate(1), zip64_usize=(1 << 63) + 5)), ERR("z_decl63.npz"))
# A member that lies about its size: the zip reader stops at the declared size.
simple("npz_lying_size", lambda: calib(zip_raw("z_lie.npz", "x.npy", zeros_deflate(64), usize=1000)), ERR("z_lie.npz"))
# Declares (and really holds) 4 GiB - 2 of zeros: within the reader's 4 GiB cap but 5 million times the 768-byte input.
simple("npz_bomb_4gib", lambda: calib(zip_raw("z_bomb.npz", "x.npy", zeros_deflate(4096), usize=0xFFFFFFFE)), ERR("z_bomb.npz", "'x'"))
simple("npz_entry_count_lie", lambda: calib(zip_raw("z_count.npz", "x.npy", npy_bytes(x_sample), method=0, crc=zlib.crc32(npy_bytes(x_sample)),
                                                    usize=len(npy_bytes(x_sample)), entries=65535)), EITHER("z_count.npz"))
simple("png_control", lambda: ["profile", MODEL, "--inputs", png("i_control.png", 10, 9), "-o", P("calib_out.yaml")], OK)
simple("png_corrupt", lambda: calib(write("i_corrupt.png", b"\x89PNG\r\n\x1a\n" + bytes(random.Random(5).randrange(256) for _ in range(500)))), ERR("i_corrupt.png"))
simple("png_truncated", lambda: calib(write("i_trunc.png", open(png("i_full.png", 16, 16), "rb").read()[:60])), ERR("i_trunc.png"))
simple("png_header_100000x100000", lambda: calib(png("i_huge.png", 100000, 100000, idat=zlib.compress(b"\0" * 100000))), ERR("i_huge.png"))
simple("png_header_2p31", lambda: calib(png("i_2p31.png", 0x7FFFFFFF, 0x7FFFFFFF, idat=zlib.compress(b"\0" * 1000))), ERR("i_2p31.png"))
simple("png_zero_width", lambda: calib(png("i_w0.png", 0, 10, idat=zlib.compress(b""))), ERR("i_w0.png"))
simple("png_too_small", lambda: calib(png("i_small.png", 4, 4)), ERR("i_small.png", "smaller"))
simple("png_not_png", lambda: calib(write("i_text.png", "just text")), ERR("i_text.png"))
simple("jpeg_corrupt", lambda: calib(write("i_corrupt.jpg", b"\xff\xd8\xff\xe0" + bytes(random.Random(6).randrange(256) for _ in range(500)))), ERR("i_corrupt.jpg"))
simple("jpeg_header_65535x65535", lambda: calib(jpeg_sof("i_huge.jpg", 65535, 65535)), ERR("i_huge.jpg"))
simple("jpeg_empty", lambda: calib(write("i_empty.jpeg", b"")), ERR("i_empty.jpeg"))
simple("image_nhwc_channel_mismatch", lambda: calib(png("i_ok.png", 16, 16)) + ["--nhwc"], ERR("i_ok.png", "channels"))
# --resize drives an allocation of resize^2 * 3 bytes for a 16x16 image.
simple("png_resize_100000", lambda: calib(png("i_resize.png", 16, 16)) + ["--resize", "100000"], ERR("resize"))
simple("png_resize_2p40", lambda: calib(png("i_resize2.png", 16, 16)) + ["--resize", str(1 << 40)], ERR("resize"))
simple("profile_bins_zero", lambda: calib(P("sample.npy")) + ["--bins", "0"], ERR("--bins"))
# docs/cli.md: `--mean R,G,B`, `--std R,G,B`.
simple("profile_mean_std_documented_form", lambda: calib(png("i_ms.png", 16, 16)) + ["--mean", "0.5,0.5,0.5", "--std", "0.25,0.25,0.25"], OK)
simple("profile_std_zero", lambda: calib(png("i_std.png", 16, 16)) + ["--std", "0", "1", "1"], ERR("--std"))
simple("profile_std_inf", lambda: calib(png("i_stdinf.png", 16, 16)) + ["--std", "inf", "1", "1"], ERR("--std"))
simple("profile_mean_nan", lambda: calib(png("i_mean.png", 16, 16)) + ["--mean", "nan", "0", "0"], ERR("--mean"))
simple("profile_output_is_directory", lambda: ["profile", MODEL, "--inputs", P("sample.npy"), "-o", D], ERR(D))

# --- transaction binaries ----------------------------------------------------------------------------------------
insp = lambda p: ["inspect", "--txn", p]
first_custom = next(o for o in OPS if o[1] >= 128)
first_op = OPS[0]

simple("txn_control", lambda: insp(P("out", "h.npu0.txn")), OK)
simple("txn_empty", lambda: insp(txn_file("x_empty.txn", b"")), ERR("x_empty.txn", "header"))
simple("txn_header_truncated", lambda: insp(txn_file("x_hdr.txn", TXN[:10])), ERR("x_hdr.txn", "header"))
simple("txn_truncated", lambda: insp(txn_file("x_trunc.txn", TXN[:len(TXN) // 2])), ERR("x_trunc.txn", "size"))
simple("txn_truncated_total_fixed", lambda: insp(txn_file("x_truncf.txn", patched(TXN[:len(TXN) // 2 + 3], 12, "<I", len(TXN) // 2 + 3))),
       ERR("x_truncf.txn", "op"))
simple("txn_appended", lambda: insp(txn_file("x_append.txn", patched(TXN + b"\0" * 24, 12, "<I", len(TXN) + 24))), ERR("x_append.txn", "trailing"))
# The container's version bytes (major 0, minor 1) and device generation are fixed by the format.
simple("txn_wrong_major", lambda: insp(txn_file("x_major.txn", patched(TXN, 0, "<B", 7))), ERR("x_major.txn"))
simple("txn_not_a_txn", lambda: insp(txn_file("x_elf.txn", patched(b"\x7fELF" + bytes(60), 12, "<I", 64))), ERR("x_elf.txn"))
simple("txn_op_count_huge", lambda: insp(txn_file("x_count.txn", patched(TXN, 8, "<I", 0xFFFFFFFF))), ERR("x_count.txn", "past the end"))
simple("txn_op_count_zero", lambda: insp(txn_file("x_count0.txn", patched(TXN, 8, "<I", 0))), ERR("x_count0.txn", "trailing"))
simple("txn_total_huge", lambda: insp(txn_file("x_total.txn", patched(TXN, 12, "<I", 0xFFFFFFFF, fix_total=False))), ERR("x_total.txn", "size"))
simple("txn_custom_size_0", lambda: insp(txn_file("x_size0.txn", patched(TXN, first_custom[0] + 4, "<I", 0))), ERR("x_size0.txn", f"op {OPS.index(first_custom)} at byte {first_custom[0]}", "size 0"))
simple("txn_custom_size_max", lambda: insp(txn_file("x_sizemax.txn", patched(TXN, first_custom[0] + 4, "<I", 0xFFFFFFFF))), ERR("x_sizemax.txn", f"op {OPS.index(first_custom)} at byte {first_custom[0]}", "4294967295"))
# DDR_PATCH, TCT and VNPU_KERNEL have fixed sizes (48, 16, 16): another size field is malformed.
simple("txn_custom_size_wrong", lambda: insp(txn_file("x_sizewrong.txn", patched(TXN, first_custom[0] + 4, "<I", first_custom[2] + 8))),
       ERR("x_sizewrong.txn", f"op {OPS.index(first_custom)} at byte {first_custom[0]}"))
simple("txn_unknown_opcode_2", lambda: insp(txn_file("x_op2.txn", patched(TXN, first_op[0], "<B", 2))), ERR("x_op2.txn", "op 0 at byte 16", "unknown opcode"))
# 144 and 145 were the virtual NPU's own DMA and compute commands; data moves through AIE-ML BDs now.
simple("txn_retired_opcode_144", lambda: insp(txn_file("x_op144.txn", patched(TXN, first_custom[0], "<B", 144))), ERR("x_op144.txn", "opcode 144"))
simple("txn_retired_opcode_145", lambda: insp(txn_file("x_op145.txn", patched(TXN, first_custom[0], "<B", 145))), ERR("x_op145.txn", "opcode 145"))
simple("txn_unknown_opcode_127", lambda: insp(txn_file("x_op127.txn", patched(TXN, first_op[0], "<B", 127))), ERR("x_op127.txn", "unknown opcode"))
# Opcodes 128, 130..132 are aie-rt's TCT, READ_REGS, RECORD_TIMER, MERGE_SYNC: the format says they are errors.
simple("txn_unused_custom_opcode_130", lambda: insp(txn_file("x_op130.txn", patched(TXN, first_custom[0], "<B", 130))), ERR("x_op130.txn", f"op {OPS.index(first_custom)} at byte {first_custom[0]}", "opcode 130"))
simple("txn_custom_opcode_255", lambda: insp(txn_file("x_op255.txn", patched(TXN, first_custom[0], "<B", 255))), ERR("x_op255.txn", f"op {OPS.index(first_custom)} at byte {first_custom[0]}", "opcode 255"))
simple("txn_is_directory", lambda: (os.makedirs(P("x_dir.txn"), exist_ok=True), insp(P("x_dir.txn")))[1], ERR("x_dir.txn"))
simple("txn_missing", lambda: insp(P("x_nope.txn")), ERR("x_nope.txn"))
# bundlec writes no BLOCKWRITE: the first WRITE (24 bytes) becomes an equivalent BLOCKWRITE of one word plus a
# padding word (16 + 4 * 2 = 24 bytes), then its size field is corrupted.
_w = next(o for o in OPS if o[1] == 0)
_reg, _val = struct.unpack_from("<QI", TXN, _w[0] + 8)
TXN_BW = TXN[:_w[0]] + bytes([1, TXN[_w[0] + 1], TXN[_w[0] + 2], 0, 0, 0, 0, 0]) + struct.pack("<IIII", _reg & 0xFFFFFFFF, 24, _val, 0) + TXN[_w[0] + 24:]
simple("txn_blockwrite_control", lambda: insp(txn_file("x_bw.txn", TXN_BW)), OK)
simple("txn_blockwrite_size_0", lambda: insp(txn_file("x_bw0.txn", patched(TXN_BW, _w[0] + 12, "<I", 0))), ERR("x_bw0.txn", f"op {OPS.index(_w)} at byte {_w[0]}"))
simple("txn_blockwrite_size_8", lambda: insp(txn_file("x_bw8.txn", patched(TXN_BW, _w[0] + 12, "<I", 8))), ERR("x_bw8.txn", f"op {OPS.index(_w)} at byte {_w[0]}"))
simple("txn_blockwrite_size_max", lambda: insp(txn_file("x_bwmax.txn", patched(TXN_BW, _w[0] + 12, "<I", 0xFFFFFFFF))), ERR("x_bwmax.txn", f"op {OPS.index(_w)} at byte {_w[0]}"))
simple("txn_blockwrite_size_unaligned", lambda: insp(txn_file("x_bw18.txn", patched(TXN_BW, _w[0] + 12, "<I", 18))), ERR("x_bw18.txn", f"op {OPS.index(_w)} at byte {_w[0]}"))
# MASKPOLL's size field must be 32 (docs/npu-transaction-format.md).
_mp = next(o for o in OPS if o[1] == 4)
simple("txn_maskpoll_size_field_wrong", lambda: insp(txn_file("x_mpsz.txn", patched(TXN, _mp[0] + 24, "<I", 99))), ERR("x_mpsz.txn", f"op {OPS.index(_mp)} at byte {_mp[0]}"))
rng = random.Random(20240611)
for i in range(12):
    b = bytearray(TXN)
    for _ in range(rng.choice([1, 2, 4, 8, 32])):
        b[rng.randrange(len(b))] = rng.randrange(256)
    if i % 3 == 0:
        struct.pack_into("<I", b, 12, len(b))          # keep the header consistent so the op walk is exercised
    simple(f"txn_random_mutation_{i}", (lambda b=bytes(b), i=i: insp(txn_file(f"x_mut{i}.txn", b))), EITHER(f"x_mut{i}.txn"))
for i in range(4):
    cut = rng.randrange(16, len(TXN))
    b = patched(TXN[:cut], 12, "<I", cut)
    simple(f"txn_random_cut_{i}", (lambda b=bytes(b), i=i: insp(txn_file(f"x_cut{i}.txn", b))), ERR(f"x_cut{i}.txn"))

# --- input specs and options -------------------------------------------------------------------------------------
simple("input_huge_dims", lambda: COMPILE + ["--input", "x:99999999999x99999999999xf32"], ERR("'x'", "2^40"))
simple("input_dims_u64_overflow", lambda: COMPILE + ["--input", "x:99999999999999999999999x3xf32"], ERR("--input", "99999999999999999999999"))
simple("input_bad_dtype", lambda: COMPILE + ["--input", "x:1x3xf99"], ERR("--input", "f99"))
simple("input_negative_dim", lambda: COMPILE + ["--input", "x:1x-3x8x8"], ERR("--input", "-3"))
simple("input_zero_dim", lambda: COMPILE + ["--input", "x:0x3x8x8"], ERR("'x'"))
simple("input_rank_9", lambda: COMPILE + ["--input", "x:" + "1x" * 9 + "f32"], ERR("'x'", "rank"))
simple("input_empty_name", lambda: COMPILE + ["--input", ":1x3x8x8"], ERR("--input", "name"))
simple("input_no_colon", lambda: COMPILE + ["--input", "x"], ERR("--input"))
simple("input_unknown_name", lambda: COMPILE + ["--input", "batch:1x3x8x8"], ERR("--input", "batch"))
simple("input_wrong_shape", lambda: COMPILE + ["--input", "x:1x5x8x8"], ERR("conv1"))
simple("freeze_huge_dims", lambda: COMPILE + ["--freeze", "x:99999999999x99999999999xf32=1"], ERR("x:99999999999x99999999999xf32"))
simple("freeze_bad_dtype", lambda: COMPILE + ["--freeze", "x:1x3xf99=1,2,3"], ERR("f99"))
simple("freeze_not_a_number", lambda: COMPILE + ["--freeze", "x:2xf32=1,abc"], ERR("abc"))
simple("freeze_count_mismatch", lambda: COMPILE + ["--freeze", "x:2xf32=1,2,3"], ERR("3 values"))
simple("freeze_no_values", lambda: COMPILE + ["--freeze", "x:1x3x8x8"], ERR("--freeze"))
# Reshape's shape input frozen: 4.7 and 1e300 are not i64 values; truncating or saturating them hides the mistake.
simple("freeze_i64_control", lambda: ["compile", RESHAPE, "-o", P("out_r"), "--name", "h", "--freeze", "s:2xi64=4,2"], OK)
simple("freeze_i64_fraction", lambda: ["compile", RESHAPE, "-o", P("out_r"), "--name", "h", "--freeze", "s:2xi64=4.7,2"], ERR("4.7"))
simple("freeze_i64_out_of_range", lambda: ["compile", RESHAPE, "-o", P("out_r"), "--name", "h", "--freeze", "s:2xi64=1e300,1"], ERR("1e300"))
simple("freeze_unknown_input", lambda: COMPILE + ["--freeze", "ghost:1xf32=1"], ERR("ghost"))
simple("cpu_unknown", lambda: COMPILE + ["--cpu", "pentium"], ERR("--cpu", "pentium"))
simple("cpu_empty", lambda: COMPILE + ["--cpu", ""], ERR("--cpu"))
simple("cpu_garbage", lambda: COMPILE + ["--cpu", "x86-64-v4\x01;rm -rf /"], ERR("--cpu"))
simple("target_triple_unknown", lambda: COMPILE + ["--target", "foo-bar"], ERR("--target", "foo"))
simple("npu_min_gain_nan", lambda: COMPILE + ["--npu", "vnpu", "--npu-min-gain", "NaN"], ERR("--npu-min-gain"))
simple("npu_min_gain_below", lambda: COMPILE + ["--npu", "vnpu", "--npu-min-gain", "-2"], ERR("--npu-min-gain"))
simple("name_not_identifier", lambda: ["compile", MODEL, "-o", P("out"), "--name", "9net"], ERR("--name", "9net"))
simple("output_is_a_file", lambda: ["compile", MODEL, "-o", write("o_file", "x"), "--name", "h"], ERR("o_file"))
simple("output_under_a_file", lambda: ["compile", MODEL, "-o", os.path.join(write("o_file2", "x"), "sub"), "--name", "h"], ERR("o_file2"))
simple("model_is_directory", lambda: (os.makedirs(P("m_dir.onnx"), exist_ok=True), ["compile", P("m_dir.onnx"), "-o", P("out"), "--name", "h"])[1],
       ERR("m_dir.onnx"))
simple("model_missing", lambda: ["compile", P("m_nope.onnx"), "-o", P("out"), "--name", "h"], ERR("m_nope.onnx"))
simple("model_empty", lambda: ["compile", write("m_empty.onnx", b""), "-o", P("out"), "--name", "h"], ERR("m_empty.onnx"))
simple("model_is_npy", lambda: ["compile", P("sample.npy"), "-o", P("out"), "--name", "h"], ERR("sample.npy"))
simple("partition_model_is_directory", lambda: (os.makedirs(P("m_dir2.onnx"), exist_ok=True), ["partition", P("m_dir2.onnx"), "--npu", "vnpu"])[1],
       ERR("m_dir2.onnx"))
simple("profile_model_is_directory", lambda: (os.makedirs(P("m_dir3.onnx"), exist_ok=True), ["profile", P("m_dir3.onnx"), "--inputs", P("sample.npy"),
                                                                                             "-o", P("calib_out.yaml")])[1], ERR("m_dir3.onnx"))

# ---------------------------------------------------------------------------------------------------------------

def one(item):
    name, (prep, exp, timeout) = item
    try:
        argv = prep()
    except Exception as e:                                      # a fixture bug, not a bundlec result
        return name, f"fixture error: {e!r}", None, "", "", 0.0
    t0 = time.monotonic()
    rc, out, err = run(argv, cwd=D, timeout=timeout)
    dt = time.monotonic() - t0
    for big in ("t_name100mb.json", "t_desc100mb.json", "z_bomb.npz", "p_bigmodel.yaml"):
        if big in " ".join(map(str, argv)) and os.path.exists(P(big)):
            os.remove(P(big))
    return name, judge(rc, out, err, exp, timeout), rc, out, err, dt


selected = [(n, c) for n, c in cases.items() if args.k in n]
bad = []
with ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
    for name, why, rc, out, err, dt in pool.map(one, selected):
        lines = err.strip().splitlines()
        first = lines[0] if lines else "(no error line)" if rc else "(exit 0)"
        slow = f" ({dt:.1f} s)" if dt > 5 else ""
        print(("PASS " if not why else "FAIL ") + f"{name}: exit {rc}{slow}: {first[:160]}" + (f"  <-- {why}" if why else ""))
        if why:
            bad.append(name)
            if args.v:
                print("".join(f"    | {l[:300]}\n" for l in (err or out).splitlines()[:12]), end="")
# Path traversal must never write outside.
for evil in (os.path.join(os.path.dirname(D), "evil_hostile.npy"), "/tmp/evil_hostile_abs.npy", P("pwned")):
    if os.path.exists(evil):
        print(f"FAIL npz/yaml/npy content wrote {evil}")
        bad.append(evil)
if args.keep:
    print(f"kept {D}")
else:
    shutil.rmtree(D, ignore_errors=True)
print(f"hostile files: {len(selected) - len(bad)} passed, {len(bad)} failed" + (": " + ", ".join(bad) if bad else ""))
sys.exit(1 if bad else 0)
