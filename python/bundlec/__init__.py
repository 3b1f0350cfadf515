"""bundlec: compile ONNX models ahead of time into bundles (an object file, its weights, a C header and a run
recipe) and run them from Python through bundle-rt.

    import bundlec, numpy as np
    c = bundlec.compile("model.onnx", name="net", out_dir="build")
    net = bundlec.load("build")
    outputs = net.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

`compile` writes the same files as `bundlec compile`; `load` links NAME.o into a shared object with the system C
compiler (`$CC`, else `cc`) and runs it in this process. `python -m bundlec` is the `bundlec` command line.
"""

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._bundlec import BundlecError, Loaded as _Loaded, __version__, cli as _cli, compile as _compile

__all__ = ["BundlecError", "Bundle", "Compiled", "TensorSpec", "compile", "load", "__version__"]

# numpy dtype name -> the dtype suffix of `--input NAME:SHAPExDTYPE`.
_INPUT_DTYPES = {"float32": "f32", "uint8": "u8", "int8": "i8", "int32": "i32", "int64": "i64", "bool": "bool"}


@dataclass(frozen=True)
class TensorSpec:
    """A bundle input or output: its ONNX name, shape and numpy dtype."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype


def _specs(rows) -> List[TensorSpec]:
    return [TensorSpec(n, tuple(s), np.dtype(d)) for n, s, d in rows]


@dataclass
class Compiled:
    """What `compile` wrote: the bundle's folder and files, its inputs and outputs, and a summary of its config
    (area sizes, the kernel sets chosen by `cpu`, NPU segments, int8 nodes, warnings)."""

    name: str
    dir: str
    files: List[str]
    inputs: List[TensorSpec]
    outputs: List[TensorSpec]
    summary: Dict[str, object] = field(default_factory=dict)

    def load(self, **options) -> "Bundle":
        """`load(self.dir, name=self.name, **options)`."""
        return load(self.dir, name=self.name, **options)


def _input_flags(inputs) -> List[str]:
    if inputs is None:
        return []
    if isinstance(inputs, Mapping):
        flags = []
        for name, spec in inputs.items():
            if isinstance(spec, str):
                flags.append(f"{name}:{spec}")
                continue
            shape, dtype = spec if isinstance(spec, tuple) and len(spec) == 2 and not isinstance(spec[1], int) \
                else (spec, np.float32)
            suffix = _INPUT_DTYPES.get(np.dtype(dtype).name)
            if suffix is None:
                raise BundlecError(f"input {name!r}: dtype {np.dtype(dtype)} is not one bundlec takes "
                                   f"({', '.join(_INPUT_DTYPES)})")
            flags.append(f"{name}:{'x'.join(str(int(d)) for d in shape)}x{suffix}")
        return flags
    return [str(s) for s in inputs]


def compile(model, name: str = "net", inputs=None, cpu: Optional[str] = None, npu: Optional[str] = None,
            out_dir: Optional[Union[str, os.PathLike]] = None, target: Optional[str] = None,
            embed_weights: bool = False) -> Compiled:
    """Compiles an ONNX model into bundle `name` in `out_dir` (a new temporary folder when None).

    model: a path, the serialized model as bytes, or an `onnx.ModelProto`.
    inputs: fixes input shapes and types: {name: (shape, dtype)}, {name: shape} (float32),
        {name: "1x3x224x224xf32"}, or a list of "NAME:1x3x224x224xf32" strings, as `--input` takes them.
    cpu: the kernel sets (`--cpu`): None for the default (on x86-64 the fat x86-64-v3,x86-64-v4), or e.g.
        "native", "x86-64-v3", "x86-64-v3,x86-64-v4".
    npu: an NPU target (`--npu`): "vnpu", or the path of a target file.
    target: the target triple (None: this machine).
    Raises BundlecError with bundlec's message when the model cannot be compiled.
    """
    out = os.fspath(out_dir) if out_dir is not None else tempfile.mkdtemp(prefix="bundlec-")
    os.makedirs(out, exist_ok=True)
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    tmp = None
    if isinstance(model, (bytes, bytearray, memoryview)):
        tmp = tempfile.NamedTemporaryFile(prefix=f"{name}-", suffix=".onnx", dir=out, delete=False)
        with tmp:
            tmp.write(bytes(model))
        path = tmp.name
    else:
        path = os.fspath(model)
    try:
        s = _compile(path, name, out, _input_flags(inputs), cpu, target, npu, embed_weights)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
    return Compiled(name=name, dir=out, files=[os.fspath(f) for f in s["files"]], inputs=_specs(s["inputs"]),
                    outputs=_specs(s["outputs"]), summary={k: s[k] for k in s if k not in
                                                           ("name", "dir", "files", "inputs", "outputs")})


def _link(obj: str, so: str) -> None:
    """Links the bundle object into a shared object with the system C compiler, unless it is up to date."""
    if os.path.exists(so) and os.path.getmtime(so) >= os.path.getmtime(obj):
        return
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc.split()[0]) is None:
        raise BundlecError(f"loading {obj} needs a C compiler to link it ({cc!r} not found; set CC)")
    r = subprocess.run(cc.split() + ["-shared", "-o", so + ".tmp", obj], capture_output=True, text=True)
    if r.returncode != 0:
        raise BundlecError(f"linking {obj} with {cc} failed:\n{r.stderr.strip()}")
    os.replace(so + ".tmp", so)


class Bundle:
    """A compiled bundle loaded into this process. `run` takes and returns {name: numpy array}."""

    def __init__(self, dir: Union[str, os.PathLike], name: Optional[str] = None, threads: int = 1,
                 npu: bool = False):
        d = os.fspath(dir)
        if name is None:
            objs = sorted(f[:-2] for f in os.listdir(d) if f.endswith(".o"))
            if len(objs) != 1:
                raise BundlecError(f"{d}: expected one bundle object (NAME.o), found {len(objs)}; pass name=")
            name = objs[0]
        obj = os.path.join(d, name + ".o")
        if not os.path.isfile(obj):
            raise BundlecError(f"{obj}: no such bundle object")
        so = os.path.join(d, name + ".so")
        _link(obj, so)
        weights = os.path.join(d, name + ".weights")
        self.name = name
        self.threads = threads
        self.npu = npu
        self._b = _Loaded(so, name, weights if os.path.isfile(weights) else None)
        self.inputs: List[TensorSpec] = _specs(self._b.inputs())
        self.outputs: List[TensorSpec] = _specs(self._b.outputs())
        self.npu_segments: int = self._b.npu_segments()

    def run(self, feeds: Mapping[str, object], threads: Optional[int] = None,
            npu: Optional[bool] = None) -> Dict[str, np.ndarray]:
        """Runs the model on `feeds` ({input name: array-like}, every input given, shapes exact; values are
        converted to the input's dtype) on `threads` threads, its NPU segments on the emulator when `npu`, and
        returns {output name: array}."""
        names = {t.name for t in self.inputs}
        unknown = sorted(set(feeds) - names)
        if unknown:
            raise BundlecError(f"{self.name}: no input named {', '.join(map(repr, unknown))} "
                               f"(inputs: {', '.join(t.name for t in self.inputs)})")
        raw: List[Tuple[str, bytes]] = []
        for t in self.inputs:
            if t.name not in feeds:
                raise BundlecError(f"{self.name}: input {t.name!r} not given")
            a = np.ascontiguousarray(np.asarray(feeds[t.name]), dtype=t.dtype)
            if a.shape != t.shape:
                raise BundlecError(f"{self.name}: input {t.name!r} has shape {a.shape}, the bundle takes {t.shape}")
            raw.append((t.name, a.tobytes()))
        got = self._b.run(raw, self.threads if threads is None else threads, self.npu if npu is None else npu)
        specs = {t.name: t for t in self.outputs}
        return {n: np.frombuffer(b, dtype=specs[n].dtype).reshape(specs[n].shape).copy() for n, b in got}

    def __repr__(self) -> str:
        sig = lambda ts: ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in ts)
        return f"<bundlec.Bundle {self.name} ({sig(self.inputs)}) -> ({sig(self.outputs)})>"


def load(dir: Union[str, os.PathLike], name: Optional[str] = None, threads: int = 1, npu: bool = False) -> Bundle:
    """Loads the bundle in `dir` (`name`: which one, when the folder holds several) for `Bundle.run`;
    `threads` and `npu` (run NPU segments on bundle-rt's emulator) are the defaults of its runs."""
    return Bundle(dir, name=name, threads=threads, npu=npu)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The `bundlec` command line (`python -m bundlec ...`)."""
    import sys

    return _cli(list(sys.argv[1:] if argv is None else argv))
