//! `bundlec._bundlec`, the native half of the Python package (built by maturin as an abi3 extension module):
//! the compiler (`compile`, writing a bundle's files), the command line (`cli`, what `python -m bundlec` runs)
//! and `Loaded`, a bundle's shared object opened in this process and run through bundle-rt (the entry function,
//! the threaded engine, or the NPU emulator). Tensors cross as bytes with their name, shape and dtype; the
//! Python half (`bundlec/__init__.py`) turns them into numpy arrays and checks what the caller passes.

use bundle_rt::engine::{Engine, StdPort};
use bundle_rt::npu::{Device, Emulator};
use bundle_rt::{Bundle, BundleConfig, DType, EntryFn, Instance};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyDict};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

create_exception!(
    _bundlec,
    BundlecError,
    PyException,
    "An error from bundlec or bundle-rt: a model it cannot compile, a bundle it cannot load or run."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    BundlecError::new_err(e.to_string())
}

/// The numpy name of a bundle dtype.
fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::Bool => "bool",
    }
}

/// The numpy name of a model dtype.
fn ir_dtype_name(d: bundlec::ir::DType) -> &'static str {
    use bundlec::ir::DType as D;
    match d {
        D::F32 => "float32",
        D::U8 => "uint8",
        D::I8 => "int8",
        D::I32 => "int32",
        D::I64 => "int64",
        D::Bool => "bool",
    }
}

/// A tensor's (name, shape, numpy dtype).
type Signature = (String, Vec<usize>, String);

/// Compiles the ONNX file `model` into `out_dir` as bundle `name` and returns a summary of what was written: the
/// files, the inputs and outputs, the area sizes, the kernel sets, the NPU segments and the warnings.
#[pyfunction]
#[pyo3(signature = (model, name, out_dir, inputs=Vec::new(), cpu=None, target=None, npu=None, embed_weights=false))]
#[allow(clippy::too_many_arguments)] // the compile options, as keyword arguments
fn compile(
    py: Python<'_>,
    model: PathBuf,
    name: String,
    out_dir: PathBuf,
    inputs: Vec<String>,
    cpu: Option<String>,
    target: Option<String>,
    npu: Option<String>,
    embed_weights: bool,
) -> PyResult<Py<PyDict>> {
    let mut opts = bundlec::Options::new(&name);
    for spec in &inputs {
        opts.inputs
            .push(spec.parse::<bundlec::InputSpec>().map_err(err)?);
    }
    if let Some(c) = &cpu {
        opts.cpu = c.clone();
    }
    opts.target = target;
    opts.embed_weights = embed_weights;
    if let Some(spec) = &npu {
        opts.npu = Some(bundlec::partition::PartitionOptions {
            target: bundlec::npu::NpuTarget::load(spec).map_err(err)?,
            min_gain: 0.0,
            cache: None,
            strict: false,
            model_hash: 0,
        });
    }
    let resolved =
        bundlec::codegen::isa::resolve_cpu(opts.target.as_deref(), &opts.cpu).map_err(err)?;
    let b = py
        .detach(|| {
            let b = bundlec::compile_file(&model, &opts)?;
            b.write(&out_dir)?;
            Ok::<_, bundlec::Error>(b)
        })
        .map_err(err)?;
    let mut files = vec![
        format!("{name}.o"),
        format!("{name}.h"),
        format!("{name}.recipe.json"),
    ];
    if !b.embedded_weights {
        files.push(format!("{name}.weights"));
    }
    for (seg, _) in &b.txns {
        files.push(format!("{name}.{seg}.txn"));
    }
    for (seg, _) in &b.metas {
        files.push(format!("{name}.{seg}.meta.json"));
    }
    let sig = |v: &[(String, Vec<usize>, bundlec::ir::DType)]| -> Vec<Signature> {
        v.iter()
            .map(|(n, s, d)| (n.clone(), s.clone(), ir_dtype_name(*d).to_string()))
            .collect()
    };
    let d = PyDict::new(py);
    d.set_item("name", &name)?;
    d.set_item("dir", &out_dir)?;
    d.set_item(
        "files",
        files.iter().map(|f| out_dir.join(f)).collect::<Vec<_>>(),
    )?;
    d.set_item("inputs", sig(&b.inputs))?;
    d.set_item("outputs", sig(&b.outputs))?;
    let [c, m, a] = b.report.sizes;
    d.set_item(
        "areas",
        [("constants", c), ("mutables", m), ("activations", a)].into_py_dict(py)?,
    )?;
    d.set_item("cpu", resolved)?;
    d.set_item("kernels", b.report.kernels)?;
    d.set_item("layers", b.report.layers)?;
    let segs: Vec<(String, usize, u64)> = b.report.segments.clone();
    d.set_item("npu_segments", segs)?;
    d.set_item("int8_nodes", b.report.int8.clone())?;
    d.set_item("warnings", b.report.warnings.clone())?;
    Ok(d.unbind())
}

/// Runs the `bundlec` command line on `args` (without the program name) and returns its exit code.
#[pyfunction]
fn cli(py: Python<'_>, args: Vec<String>) -> i32 {
    let argv: Vec<OsString> = std::iter::once("bundlec".to_string())
        .chain(args)
        .map(OsString::from)
        .collect();
    py.detach(|| bundlec::cli::main_with(argv))
}

/// A bundle loaded into this process: its shared object, the bundle-rt bundle (config checked, weights copied
/// into an aligned constant area) and one instance with its areas, plus an engine and an NPU emulator made on
/// first use.
#[pyclass(unsendable)]
struct Loaded {
    // Dropped in this order: the instance and engine borrow the bundle, which borrows the library's config.
    instance: Instance<'static>,
    engine: Option<Engine<StdPort>>,
    npu: Option<Emulator>,
    bundle: Arc<Bundle<'static>>,
    _library: libloading::Library,
    segments: usize,
}

impl Loaded {
    fn signatures(&self, outputs: bool) -> Vec<Signature> {
        let infos: Vec<_> = if outputs {
            self.bundle.outputs().collect()
        } else {
            self.bundle.inputs().collect()
        };
        infos
            .iter()
            .map(|t| {
                let shape = t.shape.iter().map(|&d| d as usize).collect();
                (t.name.to_string(), shape, dtype_name(t.dtype).to_string())
            })
            .collect()
    }
}

#[pymethods]
impl Loaded {
    /// Opens the shared object `library` (linked from `NAME.o`) and loads bundle `name` with the weights image
    /// `weights` (None: the weights embedded in the object).
    #[new]
    #[pyo3(signature = (library, name, weights=None))]
    fn new(library: PathBuf, name: String, weights: Option<PathBuf>) -> PyResult<Loaded> {
        // SAFETY: loading a bundle's shared object runs no initialisers of its own (bundlec objects have none).
        let lib = unsafe { libloading::Library::new(&library) }.map_err(err)?;
        // SAFETY: `NAME_config` is a BundleConfig and `NAME` the entry function with the documented signature,
        // in an object bundlec wrote for this name; both live as long as `lib`, which `Loaded` keeps.
        let (config, entry) = unsafe {
            let cfg = lib
                .get::<*const BundleConfig>(format!("{name}_config").as_bytes())
                .map_err(err)?;
            let config: *const BundleConfig = *cfg;
            let entry = *lib.get::<EntryFn>(name.as_bytes()).map_err(err)?;
            (&*config, entry)
        };
        let bytes = match &weights {
            Some(p) => std::fs::read(p).map_err(|e| err(format!("{}: {e}", p.display())))?,
            None => {
                // SAFETY: `NAME_weights` (`--embed-weights`) is the constant area image, as long as the config says.
                unsafe {
                    let size = config.constant_weight_vars_mem_size as usize;
                    let sym = lib
                        .get::<*const u8>(format!("{name}_weights").as_bytes())
                        .map_err(|_| {
                            err(format!("{name}: no weights file given and none embedded"))
                        })?;
                    std::slice::from_raw_parts(*sym, size).to_vec()
                }
            }
        };
        // SAFETY: config and entry come from the same object (above), which outlives the bundle.
        let bundle = Arc::new(unsafe { Bundle::new(config, entry, &bytes) }.map_err(err)?);
        // SAFETY: the Arc's value stays at its address until the last clone drops; `Loaded` drops the instance
        // before it (field order).
        let shared: &'static Bundle<'static> = unsafe { &*Arc::as_ptr(&bundle) };
        let instance = Instance::new(shared).map_err(err)?;
        Ok(Loaded {
            segments: config.num_npu_segments as usize,
            instance,
            engine: None,
            npu: None,
            bundle,
            _library: lib,
        })
    }

    /// The inputs: (name, shape, numpy dtype) each.
    fn inputs(&self) -> Vec<Signature> {
        self.signatures(false)
    }

    /// The outputs: (name, shape, numpy dtype) each.
    fn outputs(&self) -> Vec<Signature> {
        self.signatures(true)
    }

    /// The number of NPU segments.
    fn npu_segments(&self) -> usize {
        self.segments
    }

    /// Copies `feeds` (name, bytes) into the inputs, runs the model on `threads` threads (1: the entry function;
    /// more: the engine), its NPU segments on the emulator when `npu`, and returns every output's bytes.
    #[pyo3(signature = (feeds, threads=1, npu=false))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        feeds: Vec<(String, Vec<u8>)>,
        threads: usize,
        npu: bool,
    ) -> PyResult<Vec<(String, Bound<'py, PyBytes>)>> {
        if threads == 0 {
            return Err(err("threads must be at least 1"));
        }
        for (name, data) in &feeds {
            self.instance.set_input_bytes(name, data).map_err(err)?;
        }
        if npu && self.npu.is_none() {
            self.npu = Some(Emulator::vnpu());
        }
        let device = if npu {
            self.npu.as_mut().map(|e| e as &mut dyn Device)
        } else {
            None
        };
        if threads == 1 {
            match device {
                Some(d) => self.instance.run_ops_with_device(Some(d)),
                None => self.instance.run(),
            }
            .map_err(err)?;
        } else {
            if self.engine.as_ref().map(Engine::threads) != Some(threads) {
                self.engine = None;
                self.engine = Some(Engine::new(StdPort::new(), threads).map_err(err)?);
            }
            let engine = self.engine.as_mut().ok_or_else(|| err("no engine"))?;
            engine
                .run_with_device(&mut self.instance, device)
                .map_err(err)?;
        }
        let names: Vec<String> = self.bundle.outputs().map(|t| t.name.to_string()).collect();
        names
            .into_iter()
            .map(|n| {
                let bytes = self.instance.output_bytes(&n).map_err(err)?;
                Ok((n, PyBytes::new(py, bytes)))
            })
            .collect()
    }
}

/// The native module.
#[pymodule]
fn _bundlec(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_class::<Loaded>()?;
    m.add("BundlecError", m.py().get_type::<BundlecError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
