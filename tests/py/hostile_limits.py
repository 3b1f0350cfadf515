#!/usr/bin/env python3
"""Hostile inputs by class (docs/fuzzing.md): sizes that wrap, work without a bound, files that are not regular or
leave the model's folder, names that would become C, attributes that lie or make outputs NaN, and CLI flags that
repeat or conflict. Each case is a model or file generated here and a `bundlec` command run under a 4 GiB
address-space limit and a 60 s timeout. A refused case must exit 1 with an `error:` first line holding the
expected words, and never panic, abort, die of a signal or report an internal error; an accepted case must exit 0
(and, where the NaN policy says so, print a `warning:` line with the expected words). Name cases also compile
the generated header with `cc -Wall -Werror` and check what the preprocessor sees.

usage: hostile_limits.py [--bundlec target/debug/bundlec] [-k SUBSTRING] [-v]"""
import argparse, json, os, shutil, subprocess, sys, tempfile
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser()
ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/debug/bundlec"))
ap.add_argument("-k", default="", help="only cases whose name contains this")
ap.add_argument("-v", action="store_true", help="print stderr of failing cases")
args = ap.parse_args()
B = os.path.abspath(args.bundlec)
D = tempfile.mkdtemp(prefix="hostile_limits_")
P = lambda *n: os.path.join(D, *n)
vi = h.make_tensor_value_info
N = h.make_node


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def save(m, *path):
    p = P(*path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    return p


def raw_tensor(name, dtype, dims, raw=b"", int32=None):
    t = onnx.TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    if int32 is not None:
        t.int32_data.extend(int32)
    else:
        t.raw_data = raw
    return t


def external(name, dims, location, offset=None, length=None):
    t = onnx.TensorProto()
    t.name, t.data_type, t.data_location = name, T.FLOAT, T.EXTERNAL
    t.dims.extend(dims)
    for k, v in [("location", location), ("offset", offset), ("length", length)]:
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


X = vi("x", T.FLOAT, [1, 2, 4, 4])
Y = vi("y", T.FLOAT, None)
f32 = lambda n, v: nh.from_array(np.array(v, np.float32), n)
i64 = lambda n, v: nh.from_array(np.array(v, np.int64), n)
relu = lambda: N("Relu", ["x"], ["y"])

# Expectations: ("err", words) refused; ("ok", words) accepted, words (if any) in a `warning:` line.
ERR = lambda *w: ("err", w)
OK = lambda *w: ("ok", w)
cases = []  # (name, argv or callable returning argv, expectation, post-check or None)


def compile_case(name, m_or_path, exp, extra=(), check=None, cname="h"):
    path = m_or_path if isinstance(m_or_path, str) else save(m_or_path, name, "model.onnx")
    out = P(name, "out")
    cases.append((name, ["compile", path, "-o", out, "--name", cname, *extra], exp, check))


# ---- sizes that wrap --------------------------------------------------------------------------------------------
w = raw_tensor("w", T.FLOAT, [1 << 32, 1 << 32, 1 << 32], b"\0" * 4)
compile_case("init_dims_overflow_u64", model([N("Add", ["x", "w"], ["y"])], [X], [Y], [w]), ERR("'w'", "2^40"))
w = raw_tensor("w", T.FLOAT, [1 << 62, 4], b"")
compile_case("init_dims_wrap_to_zero_bytes", model([N("Add", ["x", "w"], ["y"])], [X], [Y], [w]), ERR("'w'", "2^40"))
w = raw_tensor("w", T.FLOAT, [3, 5], b"\0" * 56)
compile_case("init_data_shorter_than_dims", model([N("Add", ["x", "w"], ["y"])], [X], [Y], [w]), ERR("'w'", "60"))
for dt, vals, what in [(T.INT8, [1, 200], "i8"), (T.UINT8, [-1, 3], "u8"), (T.BOOL, [0, 2], "bool")]:
    t = raw_tensor("q", dt, [2], int32=vals)
    compile_case(f"int32_data_out_of_range_{what}",
                 model([N("Cast", ["q"], ["c"], to=T.FLOAT), N("Add", ["x", "c"], ["y"])], [vi("x", T.FLOAT, [2])], [Y], [t]),
                 ERR("'q'", "int32_data", "out of range"))
compile_case("tile_beyond_limit", model([N("Tile", ["x", "r"], ["y"])], [X], [Y], [i64("r", [1 << 20, 1 << 20, 1, 1])]), ERR("2^40"))
compile_case("tile_repeats_overflow", model([N("Tile", ["x", "r"], ["y"])], [X], [Y], [i64("r", [1, 1, (1 << 63) - 1, 1])]),
             ERR("overflow"))
compile_case("tile_long_axis_under_byte_limit", model([N("Tile", ["x", "r"], ["y"])], [vi("x", T.FLOAT, [1])], [Y], [i64("r", [1 << 36])]),
             ERR("index tables"))
compile_case("expand_huge", model([N("Expand", ["x", "s"], ["y"])], [X], [Y], [i64("s", [1 << 20, 1 << 20, 1, 2, 4, 4])]), ERR("2^40"))
compile_case("expand_rank_huge", model([N("Expand", ["x", "s"], ["y"])], [X], [Y], [i64("s", [1] * 100000)]), ERR("rank"))
compile_case("reshape_wrapping_product", model([N("Reshape", ["x", "s"], ["y"])], [vi("x", T.FLOAT, [4])], [Y],
                                               [i64("s", [(1 << 62) + 1, 4])]), ERR("reshape"))
for nm, st, en, sp in [("slice_step_i64_max", 0, 4, (1 << 63) - 1), ("slice_step_i64_min", -1, -100, -(1 << 63))]:
    compile_case(nm, model([N("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], [X], [Y],
                           [i64("st", [st]), i64("en", [en]), i64("ax", [3]), i64("sp", [sp])]), OK())
rng = [i64("s", -(1 << 63)), i64("l", (1 << 63) - 1), i64("d", (1 << 62) + 1)]
compile_case("range_i64_extremes", model([N("Range", ["s", "l", "d"], ["r"]), N("Cast", ["r"], ["rf"], to=T.FLOAT),
                                          N("Add", ["x", "rf"], ["y"])], [vi("x", T.FLOAT, [4])], [Y], rng), OK())

# ---- unbounded work: many large folds share one budget ---------------------------------------------------------
folds = [N("Expand", ["one", "big"], [f"e{i}"]) for i in range(4)]
compile_case("folds_share_one_budget", model(folds + [relu()], [X], [Y], [f32("one", [1.0]), i64("big", [3 << 12, 1 << 14])]),
             ERR("compile-time constants", "limit"))
cos = [N("ConstantOfShape", ["cs"], [f"c{i}"], value=h.make_tensor("value", T.INT64, [1], [7])) for i in range(6)]
compile_case("constantofshape_sum", model(cos + [relu()], [X], [Y], [i64("cs", [1 << 27])]), ERR("compile-time constants"))

# ---- files -----------------------------------------------------------------------------------------------------
os.makedirs(P("outside"), exist_ok=True)
np.ones(4, np.float32).tofile(P("outside", "secret.bin"))
ext_model = lambda loc, **kw: model([N("Add", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [4])], [Y], [external("w", [4], loc, **kw)])
for name, setup, loc, exp in [
    ("ext_symlink_out", lambda d: os.symlink(P("outside", "secret.bin"), os.path.join(d, "w.bin")), "w.bin", ERR("'w'", "outside")),
    ("ext_under_symlinked_dir", lambda d: os.symlink(P("outside"), os.path.join(d, "sub")), "sub/secret.bin", ERR("'w'", "outside")),
    ("ext_dotdot", lambda d: None, "../outside/secret.bin", ERR("'w'", "relative")),
    ("ext_dev_zero_link", lambda d: os.symlink("/dev/zero", os.path.join(d, "z.bin")), "z.bin", ERR("'w'", "outside")),
    ("ext_fifo", lambda d: os.mkfifo(os.path.join(d, "f.bin")), "f.bin", ERR("FIFO")),
    ("ext_directory", lambda d: os.mkdir(os.path.join(d, "dir.bin")), "dir.bin", ERR("directory")),
    ("ext_inside_ok", lambda d: np.arange(4, dtype=np.float32).tofile(os.path.join(d, "w.bin")), "w.bin", OK()),
]:
    p = save(ext_model(loc), name, "model.onnx")
    setup(os.path.dirname(p))
    compile_case(name, p, exp)
p = save(ext_model("sparse.bin", offset=(1 << 40) - 16, length=16), "ext_sparse_1tib", "model.onnx")
with open(os.path.join(os.path.dirname(p), "sparse.bin"), "wb") as f:
    f.truncate(1 << 40)
compile_case("ext_sparse_1tib", p, OK())
p = save(ext_model("sparse.bin", length=1 << 39), "ext_length_lies", "model.onnx")
with open(os.path.join(os.path.dirname(p), "sparse.bin"), "wb") as f:
    f.truncate(1 << 40)
compile_case("ext_length_lies", p, ERR("'w'", "length"))
good = save(model([relu()], [X], [Y]), "good", "model.onnx")
os.mkfifo(P("fifo.onnx"))
with open(P("sparse.onnx"), "wb") as f:
    f.truncate(3 << 30)
compile_case("model_fifo", P("fifo.onnx"), ERR("FIFO"))
compile_case("model_dev_zero", "/dev/zero", ERR("character device"))
compile_case("model_sparse_3gib", P("sparse.onnx"), ERR("larger than the limit"))
compile_case("model_directory", P("outside"), ERR("directory"))
compile_case("npu_target_fifo", good, ERR("FIFO"), ["--npu", P("fifo.onnx")])
compile_case("npu_target_dev_zero", good, ERR("character device"), ["--npu", "/dev/zero"])
compile_case("partition_cache_fifo", good, ERR("FIFO"), ["--npu", "vnpu", "--partition-cache", P("fifo.onnx")])
compile_case("profile_fifo", good, ERR("FIFO"), ["--load-profile", P("fifo.onnx")])
os.makedirs(P("fifo_out"), exist_ok=True)
os.mkfifo(P("fifo_out", "h.h"))
cases.append(("output_file_is_fifo", ["compile", good, "-o", P("fifo_out"), "--name", "h"], ERR("FIFO", "h.h"), None))
os.makedirs(P("dir_out", "h.o"), exist_ok=True)
cases.append(("output_file_is_directory", ["compile", good, "-o", P("dir_out"), "--name", "h"], ERR("directory", "h.o"), None))
long_name = "n" * (1 << 20)
compile_case("name_one_mib_in_error", model([N("Relu", ["x"], ["a"]), N("Add", ["a", long_name], ["y"])], [X], [Y]),
             ERR("not defined", "bytes)"))
cast = N("Cast", ["x"], ["y"])
cast.attribute.append(h.make_attribute("to", (1 << 32) + 1))
compile_case("cast_to_wraps", model([cast], [X], [Y]), ERR("'to'"))
cases.append(("inspect_txn_dev_zero", ["inspect", "--txn", "/dev/zero"], ERR("character device"), None))
cases.append(("inspect_object_fifo", ["inspect", P("fifo.onnx")], ERR("FIFO"), None))


# ---- names that become C ---------------------------------------------------------------------------------------
def header_check(name, forbidden=(), once=()):
    """The header compiles with -Wall -Werror; `forbidden` words are not seen by the compiler proper (outside
    comments); each macro in `once` is defined exactly once."""
    def check():
        hp = P(name, "out", "h.h")
        text = open(hp, encoding="utf-8", errors="replace").read()
        c = P(name, "use.c")
        with open(c, "w") as f:
            f.write('#include "h.h"\nint main(void) { return (int)(H_CONSTANT_MEM_SIZE & 1); }\n')
        r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", P(name, "out"), "-c", c, "-o", P(name, "use.o")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return "header does not compile: " + r.stderr[:400]
        pre = subprocess.run(["cc", "-E", "-P", hp], capture_output=True, text=True).stdout
        for w in forbidden:
            if w in pre:
                return f"'{w}' reaches the compiler from the header"
        for m in once:
            if text.count(f"#define {m} ") != 1:
                return f"{m} is defined {text.count(f'#define {m} ')} times"
        return ""
    return check


splice = "a*\\\n/ int injected_decl; /*"
compile_case("name_backslash_newline", model([N("Relu", ["x"], [splice])], [X], [vi(splice, T.FLOAT, None)]), OK(),
             check=header_check("name_backslash_newline", ["injected_decl"]))
trigraph = "b??/\n*/ int trigraph_decl; /*"
compile_case("name_trigraph", model([N("Relu", ["x"], [trigraph])], [X], [vi(trigraph, T.FLOAT, None)]), OK(),
             check=header_check("name_trigraph", ["trigraph_decl"]))
mac = model([N("Relu", ["constant_mem"], ["mutable_mem"]), N("Sigmoid", ["constant_mem"], ["MEM_ALIGN"])],
            [vi("constant_mem", T.FLOAT, [1, 2, 4, 4])], [vi("mutable_mem", T.FLOAT, None), vi("MEM_ALIGN", T.FLOAT, None)])
compile_case("name_redefines_size_macros", mac, OK(),
             check=header_check("name_redefines_size_macros", once=["H_CONSTANT_MEM_SIZE", "H_MUTABLE_MEM_SIZE", "H_MEM_ALIGN"]))
odd = ["int", "x-1", "1x", "ä", "a/b", "%41", "{{IO_MACROS}}", "_Bool"]
compile_case("name_odd_but_legal", model([N("Relu", ["x"], [o]) for o in odd], [X], [vi(o, T.FLOAT, None) for o in odd]), OK(),
             check=header_check("name_odd_but_legal"))
nul = model([N("Relu", ["x"], ["y\0a"]), N("Sigmoid", ["x"], ["y\0b"])], [X], [vi("y\0a", T.FLOAT, None), vi("y\0b", T.FLOAT, None)])
compile_case("name_nul_collision", nul, ERR("NUL"))
for bad in ["_Bool", "typeof", "uint8_t", "INT8_MAX", "SIZE_MAX", "fn", "BundleConfig", "__x", "class", "a-b", "x" * 200]:
    compile_case(f"bundle_name_{bad[:12]}", good, ERR("--name"), cname=bad)

# ---- attributes that lie ---------------------------------------------------------------------------------------
sm = N("Softmax", ["x"], ["y"])
sm.attribute.append(h.make_attribute("axis", "1"))
compile_case("attr_string_axis", model([sm], [X], [Y]), ERR("'axis'", "STRING", "INT"))
lr = N("LeakyRelu", ["x"], ["y"])
a = onnx.AttributeProto(); a.name, a.f = "alpha", 0.1
lr.attribute.append(a)
compile_case("attr_undefined_type", model([lr], [X], [Y]), ERR("'alpha'", "UNDEFINED"))
lr2 = N("LeakyRelu", ["x"], ["y"], alpha=0.1)
lr2.attribute.append(h.make_attribute("alpha", 0.2))
compile_case("attr_repeated", model([lr2], [X], [Y]), ERR("'alpha'", "more than once"))
rm = N("ReduceMean", ["x"], ["y"])
rm.attribute.append(h.make_attribute("axes", 1))
compile_case("attr_int_for_ints", model([rm], [X], [Y], opset=13), ERR("'axes'", "INTS"))
compile_case("leakyrelu_alpha_nan", model([N("LeakyRelu", ["x"], ["y"], alpha=float("nan"))], [X], [Y]), OK("'alpha'", "NaN"))
chain = [N("LeakyRelu", ["x" if i == 0 else f"l{i - 1}"], ["y" if i == 499 else f"l{i}"], alpha=float("nan")) for i in range(500)]
compile_case("many_warnings_are_capped", model(chain, [X], [Y]), OK("'alpha'", "more warnings"))
compile_case("elu_alpha_inf", model([N("Elu", ["x"], ["y"], alpha=float("inf"))], [X], [Y]), OK("'alpha'", "inf"))
compile_case("selu_gamma_nan", model([N("Selu", ["x"], ["y"], gamma=float("nan"))], [X], [Y]), ERR("'gamma'", "every output"))
compile_case("celu_alpha_zero", model([N("Celu", ["x"], ["y"], alpha=0.0)], [X], [Y]), ERR("'alpha'"))
compile_case("gemm_alpha_inf", model([N("Gemm", ["a", "b"], ["y"], alpha=float("inf"))], [vi("a", T.FLOAT, [2, 3])], [Y],
                                     [f32("b", np.ones((3, 2)))]), ERR("'alpha'", "every output"))
bn = lambda var, eps: model([N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=eps)], [X], [Y],
                            [f32("s", [1, 1]), f32("b", [0, 0]), f32("m", [0, 0]), f32("v", var)])
compile_case("batchnorm_negative_variance", bn([1.0, -2.0], 1e-5), ERR("channel 1", "variance"))
compile_case("batchnorm_epsilon_nan", bn([1.0, 1.0], float("nan")), ERR("'epsilon'"))
compile_case("batchnorm_negative_epsilon_ok_variance", bn([1.0, 1.0], -1e-3), OK("'epsilon'", "negative"))
compile_case("batchnorm_negative_epsilon_zero_variance", bn([1.0, 0.0], -1e-3), ERR("channel 1", "not positive"))
compile_case("instancenorm_negative_epsilon", model([N("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=-1.0)], [X], [Y],
                                                   [f32("s", [1, 1]), f32("b", [0, 0])]), OK("'epsilon'", "negative"))
compile_case("lrn_alpha_nan", model([N("LRN", ["x"], ["y"], size=3, alpha=float("nan"))], [X], [Y]), ERR("'alpha'"))
compile_case("lrn_bias_zero", model([N("LRN", ["x"], ["y"], size=3, bias=0.0)], [X], [Y]), OK("'bias'"))
compile_case("clip_nan_bound", model([N("Clip", ["x", "lo"], ["y"])], [X], [Y], [f32("lo", float("nan"))], opset=13), ERR("NaN"))
compile_case("conv_group_zero", model([N("Conv", ["x", "w"], ["y"], group=0)], [X], [Y], [f32("w", np.ones((2, 2, 1, 1)))]),
             ERR("'group'"))

# ---- CLI duplicates and conflicts ------------------------------------------------------------------------------
dyn = save(model([relu()], [vi("x", T.FLOAT, ["n", 2, 4, 4])], [Y]), "dyn", "model.onnx")
compile_case("cli_input_twice", dyn, ERR("--input", "twice"), ["--input", "x:1x2x4x4", "--input", "x:2x2x4x4"])
compile_case("cli_freeze_twice", dyn, ERR("--freeze", "twice"), ["--freeze", "x:1x1x1x1=1", "--freeze", "x:1x1x1x1=2"])
compile_case("cli_input_and_freeze", dyn, ERR("--input", "--freeze", "both"), ["--input", "x:1x2x4x4", "--freeze", "x:1x1x1x1=1"])
ov = model([N("Add", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2]), vi("w", T.FLOAT, [2])], [Y], [f32("w", [1, 2])], ir=3)


def overridable():
    text = open(P("cli_input_overrides_initializer", "out", "h.h")).read()
    return "" if "#define H_W_OFFSET" in text else "w is not an input of the bundle"


compile_case("cli_input_overrides_initializer", ov, OK(), ["--input", "w:2xf32"], check=overridable)
compile_case("cli_input_for_plain_initializer", model([N("Add", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2])], [Y], [f32("w", [1, 2])]),
             ERR("initializer but no input"), ["--input", "w:2xf32"])
vnpu = json.load(open(os.path.join(ROOT, "compiler/targets/vnpu.json")))
# aie-rt's generations of the Ryzen AI NPUs (3 AIE2IPU, 4 AIE2P) are accepted; AIE-ML (2), the retired vnpu byte
# (0x56) and values no decoder reads are not.
for gen, exp in [(0, ERR("generation")), (2, ERR("generation")), (0x56, ERR("generation")), (255, ERR("generation")),
                 (3, OK()), (4, OK())]:
    with open(P(f"gen{gen}.json"), "w") as f:
        json.dump(dict(vnpu, generation=gen), f)
    compile_case(f"npu_target_generation_{gen}", good, exp, ["--npu", P(f"gen{gen}.json")])

# ---------------------------------------------------------------------------------------------------------------


def run(argv):
    cmd = ["/bin/sh", "-c", 'ulimit -v 4194304; exec "$0" "$@"', B] + [str(a) for a in argv]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        return r.returncode, r.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return None, ""


def judge(rc, err, exp):
    kind, words = exp
    lines = err.strip().splitlines()
    if rc is None:
        return "timeout after 60 s"
    if rc < 0:
        return f"killed by signal {-rc}"
    for bad, why in [("panicked at", "panic"), ("memory allocation of", "allocation failure"), ("this is a bundlec bug", "internal error")]:
        if bad in err:
            return why
    missing = [w for w in words if w not in err]
    if len(err) > 64 << 10:
        return f"{len(err)} bytes on stderr (floods the terminal)"
    if kind == "ok":
        if rc != 0:
            return f"exit {rc}, expected 0: {lines[0][:200] if lines else ''}"
        if words and not any(l.startswith("warning:") for l in lines):
            return "no warning line"
        return "no warning naming " + ", ".join(map(repr, missing)) if missing else ""
    if rc != 1:
        return f"exit {rc}, expected 1"
    if not lines or not lines[0].startswith("error:"):
        return "no `error:` line"
    return "error does not name " + ", ".join(map(repr, missing)) if missing else ""


failed = 0
ran = 0
for name, argv, exp, check in cases:
    if args.k not in name:
        continue
    ran += 1
    rc, err = run(argv)
    why = judge(rc, err, exp)
    if not why and check:
        why = check()
    failed += bool(why)
    first = (err.strip().splitlines() or [""])[0][:150]
    print(f"{'FAIL' if why else 'PASS'} {name}: {why or first}")
    if why and args.v:
        print(err[-3000:])
shutil.rmtree(D, ignore_errors=True)
print(f"hostile limits: {ran - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
