#!/usr/bin/env python3
"""Runs the runnable command blocks of README.md and docs/cli.md against the built bundlec, so that the documented
commands keep working as written.

Marking: an HTML comment (invisible on GitHub) on the line right before a fenced code block makes it runnable:

    <!-- runnable -->
    <!-- runnable: setup=model.onnx,calib timeout=60 -->

  setup=NAME,...  fixtures created in the block's directory before it runs (if not there yet):
                    model.onnx      f32 CNN, input `data` [1,3,224,224], output `prob` [1,10]: Conv/Relu x2,
                                    GlobalAveragePool, Flatten, Gemm, Softmax (its convs land on the NPU with --npu vnpu)
                    model_qdq.onnx  QDQ form of a Conv+Relu: `x` f32 [1,3,32,32] -> QuantizeLinear -> ... ->
                                    DequantizeLinear -> `y` f32 [1,8,32,32]
                    calib           calib/: two 256x240 RGB PNG images
                    app.c           a C program for a bundle `net` (README's snippet, complete): reads
                                    build/net.weights, runs net(), prints the first output value
  timeout=S       seconds before the block counts as failed (default 20)

A marker line not followed by a fence, or an unknown key or fixture, is an error. Mark every shell block that runs
in seconds on a fresh machine after the build; leave unmarked what needs the network, minutes, or is a whole test
or benchmark script (`bash scripts/test.sh`, `bash scripts/main.sh`, `scripts/bench.py`), and non-shell blocks.

The blocks of one file run in order, in one fresh temporary directory (so a block may use what an earlier one
wrote, e.g. build/), each with `bash -euo pipefail`. In that directory `./target/debug/bundlec` is the
repository's binary, `bundlec` is on PATH, and the repository's sources (tests/, scripts/, examples/, compiler/,
...: REPO_ENTRIES) are symlinks, so commands written for the repository root work unchanged (blocks must not
write into those). A block fails if bash exits non-zero or runs past its timeout; the script then prints file:line
of the fence, the block and its output, and exits 1 after running the rest. A file without any runnable block is
an error too (the markers must not get lost).

usage: doc_commands.py [--bundlec PATH] [FILE.md ...]    (default: README.md docs/cli.md)"""
import argparse, os, re, shutil, signal, struct, subprocess, sys, tempfile, time, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FILES = ["README.md", "docs/cli.md"]
DEFAULT_TIMEOUT = 20
# linked into each block's directory (never target/, build/ or anything a block writes)
REPO_ENTRIES = ["Cargo.toml", "Cargo.lock", "README.md", "bundle-rt", "compiler", "docs", "examples", "scripts",
                "templates", "tests"]
MARKER = re.compile(r"^\s*<!--\s*runnable(?::(?P<args>[^>]*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")


def blocks(path):
    """(line of the fence, language, code, options) for every marked block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        opts = {"setup": [], "timeout": DEFAULT_TIMEOUT}
        for kv in (m.group("args") or "").split():
            k, _, v = kv.partition("=")
            if k == "setup" and v:
                opts["setup"] = v.split(",")
                unknown = [s for s in opts["setup"] if s not in FIXTURES]
                if unknown:
                    raise SystemExit(f"{path}:{i + 1}: unknown fixture(s) {unknown} (known: {sorted(FIXTURES)})")
            elif k == "timeout" and v.isdigit():
                opts["timeout"] = int(v)
            else:
                raise SystemExit(f"{path}:{i + 1}: bad runnable option '{kv}' (setup=A,B timeout=S)")
        f = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not f:
            raise SystemExit(f"{path}:{i + 1}: runnable marker not followed by a fenced code block")
        end = i + 2
        while end < len(lines) and not lines[end].startswith(f.group("fence")):
            end += 1
        if end == len(lines):
            raise SystemExit(f"{path}:{i + 2}: unterminated code block")
        out.append((i + 2, f.group("lang"), "\n".join(lines[i + 2:end]) + "\n", opts))
        i = end + 1
    return out


# ---- fixtures ------------------------------------------------------------------------------------------------

def fixture_model(d):
    import numpy as np, onnx
    from onnx import helper as h, numpy_helper as nh, TensorProto as T
    rng = np.random.default_rng(7)
    he = lambda *s: (rng.standard_normal(s) * np.sqrt(2.0 / np.prod(s[1:]))).astype(np.float32)
    inits = {"w1": he(16, 3, 3, 3), "b1": np.zeros(16, np.float32), "w2": he(32, 16, 3, 3),
             "b2": np.zeros(32, np.float32), "fc": he(10, 32), "fcb": np.zeros(10, np.float32)}
    N = h.make_node
    nodes = [N("Conv", ["data", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
             N("Relu", ["c1"], ["r1"], name="relu1"),
             N("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
             N("Relu", ["c2"], ["r2"], name="relu2"),
             N("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
             N("Flatten", ["gap"], ["flat"], name="flatten"),
             N("Gemm", ["flat", "fc", "fcb"], ["logits"], name="fc", transB=1),
             N("Softmax", ["logits"], ["prob"], name="softmax")]
    g = h.make_graph(nodes, "doc_cnn", [h.make_tensor_value_info("data", T.FLOAT, [1, 3, 224, 224])],
                     [h.make_tensor_value_info("prob", T.FLOAT, [1, 10])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(d, "model.onnx"))


def fixture_model_qdq(d):
    import numpy as np, onnx
    from onnx import helper as h, numpy_helper as nh, TensorProto as T
    rng = np.random.default_rng(8)
    w = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    x_scale, w_scale = np.float32(0.02), (rng.uniform(0.5, 1.5, 8) * 0.004).astype(np.float32)
    inits = {"x_scale": np.array(x_scale), "x_zp": np.array(128, np.uint8),
             "w_q": w, "w_scale": w_scale, "w_zp": np.zeros(8, np.int8),
             "b_q": rng.integers(-2000, 2000, 8).astype(np.int32), "b_scale": (x_scale * w_scale).astype(np.float32),
             "b_zp": np.zeros(8, np.int32), "y_scale": np.array(0.03, np.float32), "y_zp": np.array(0, np.uint8)}
    N = h.make_node
    nodes = [N("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="q_x"),
             N("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"], name="dq_x"),
             N("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["wd"], name="dq_w", axis=0),
             N("DequantizeLinear", ["b_q", "b_scale", "b_zp"], ["bd"], name="dq_b", axis=0),
             N("Conv", ["xd", "wd", "bd"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             N("Relu", ["c"], ["r"], name="relu"),
             N("QuantizeLinear", ["r", "y_scale", "y_zp"], ["yq"], name="q_y"),
             N("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"], name="dq_y")]
    g = h.make_graph(nodes, "doc_qdq", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 32, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 32, 32])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(d, "model_qdq.onnx"))


def png(path, w, h, seed):
    """An RGB PNG of gradients and a disc, with the standard library only."""
    rows = []
    for y in range(h):
        row = bytearray([0])
        for x in range(w):
            inside = (x - w // 2) ** 2 + (y - h // 2) ** 2 < (h // 3) ** 2
            row += bytes([(x * 255 // w + seed) % 256, (y * 255 // h) % 256, 200 if inside else 30 + seed])
        rows.append(bytes(row))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
    open(path, "wb").write(data)


def fixture_calib(d):
    os.makedirs(os.path.join(d, "calib"), exist_ok=True)
    for i in range(2):
        png(os.path.join(d, "calib", f"img{i}.png"), 256, 240, 40 * i)


APP_C = r"""/* A complete program around README's snippet: runs bundle `net` (build/net.o, build/net.weights) once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "net.h"

int main(void) {
  if (!net_cpu_supported()) { fprintf(stderr, "this CPU lacks the bundle's instruction set\n"); return 0; }
  uint8_t *c = aligned_alloc(NET_MEM_ALIGN, NET_CONSTANT_MEM_SIZE);   /* fill from net.weights */
  uint8_t *m = aligned_alloc(NET_MEM_ALIGN, NET_MUTABLE_MEM_SIZE);    /* inputs at NET_<INPUT>_OFFSET */
  uint8_t *a = aligned_alloc(NET_MEM_ALIGN, NET_ACTIVATIONS_MEM_SIZE);
  FILE *f = fopen("build/net.weights", "rb");
  if (!f || fread(c, 1, NET_CONSTANT_MEM_SIZE, f) != NET_CONSTANT_MEM_SIZE) { perror("build/net.weights"); return 1; }
  fclose(f);
  memset(m, 0, NET_MUTABLE_MEM_SIZE);
  if (net(c, m, a) != 0) return 1;                                    /* outputs at NET_<OUTPUT>_OFFSET */
  printf("net: first output %f\n", *(float *)(m + NET_PROB_OFFSET));
  free(c); free(m); free(a);
  return 0;
}
"""


def fixture_app(d):
    open(os.path.join(d, "app.c"), "w").write(APP_C)


FIXTURES = {"model.onnx": fixture_model, "model_qdq.onnx": fixture_model_qdq, "calib": fixture_calib,
            "app.c": fixture_app}


# ---- running -------------------------------------------------------------------------------------------------

def workdir(bundlec):
    """A temporary directory that looks like the repository root: target/debug/bundlec is the binary, the other
    top-level entries are symlinks; plus bin/bundlec for PATH."""
    d = tempfile.mkdtemp(prefix="doc_commands_")
    os.makedirs(os.path.join(d, "target", "debug"))
    os.symlink(bundlec, os.path.join(d, "target", "debug", "bundlec"))
    for e in REPO_ENTRIES:
        if os.path.exists(os.path.join(ROOT, e)):
            os.symlink(os.path.join(ROOT, e), os.path.join(d, e))
    bindir = tempfile.mkdtemp(prefix="doc_commands_bin_")
    os.symlink(bundlec, os.path.join(bindir, "bundlec"))
    return d, bindir


def run_block(code, cwd, env, timeout):
    p = subprocess.Popen(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out.decode(errors="replace") + f"\n[timed out after {timeout} s]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target", "debug", "bundlec"))
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES)
    args = ap.parse_args()
    bundlec = os.path.abspath(args.bundlec)
    if not os.access(bundlec, os.X_OK):
        raise SystemExit(f"{bundlec}: not built (cargo build -p bundlec)")
    start, passed, failed = time.time(), 0, []
    for rel in args.files:
        path = os.path.join(ROOT, rel)
        bs = blocks(path)
        if not bs:
            failed.append((rel, None, "no <!-- runnable --> block found"))
            print(f"FAIL {rel}: no runnable block", flush=True)
            continue
        d, bindir = workdir(bundlec)
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        try:
            for line, lang, code, opts in bs:
                for s in opts["setup"]:
                    if not os.path.exists(os.path.join(d, s)):
                        FIXTURES[s](d)
                t = time.time()
                rc, out = run_block(code, d, env, opts["timeout"])
                where = f"{rel}:{line}"
                if rc == 0:
                    passed += 1
                    print(f"PASS {where} ({time.time() - t:.1f} s)", flush=True)
                else:
                    failed.append((where, code, out if rc is None else out + f"[exit status {rc}]"))
                    print(f"FAIL {where}", flush=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(bindir, ignore_errors=True)
    for where, code, out in failed:
        if code is None:
            print(f"\n=== {where}: {out}")
        else:
            print(f"\n=== {where}: failed\n--- block:\n{code.rstrip()}\n--- output:\n{out.rstrip()}")
    print(f"doc commands: {passed} blocks passed, {len(failed)} failed ({time.time() - start:.1f} s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
