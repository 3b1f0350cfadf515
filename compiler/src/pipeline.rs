//! The compiler pipeline in order, with optional verification and timing between stages:
//!
//! ```text
//! import ─► fold_qdq ─► fold_constants ─► fold_pad ─► trim_taps ─► fold_batchnorm ─► fuse_epilogues ─► eliminate_dead_nodes ─► verify
//!        ─► partition (--npu: capability, convex segments, cost model, fused transactions)
//!        ─► lower (kernels) ─► schedule (BSP layers; a segment owns its layers) ─► plan (memory, staging)
//!        ─► codegen (Cranelift)
//!        ─► emit: NAME.o (code + NAME_config + segment table + transactions), NAME.weights, NAME.h,
//!           NAME.recipe.json, NAME.<segment>.txn
//! ```

use crate::codegen::{self, isa};
use crate::emit::{config, header, recipe, segments, weights};
use crate::error::{Error, Result};
use crate::import::{self, InputSpec};
use crate::ir::{verify::verify, Graph};
use crate::lower;
use crate::partition::{self, Partition, PartitionOptions};
use crate::passes;
use crate::plan::{MemoryPlan, Schedule};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::path::Path;
use std::time::Instant;

/// Compile options (the CLI's flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// Bundle name: symbol prefix and file stem. Must be a C identifier.
    pub name: String,
    /// Input shape overrides.
    pub inputs: Vec<InputSpec>,
    /// `--outputs`: compute these tensors instead of the model's outputs (`import::select_outputs`).
    pub outputs: Vec<String>,
    /// `--winograd`: which 3x3 convolutions take Winograd.
    pub winograd: crate::lower::Winograd,
    /// `--precision`: f32, or bf16 MatMuls on AVX-512 BF16 targets.
    pub precision: crate::lower::Precision,
    /// Target triple (None: host).
    pub target: Option<String>,
    /// CPU features (`--cpu`): `default` (the target's default sets, `isa::resolve_cpu`), native, generic,
    /// x86-64-v3, x86-64-v4, ..., or `BASE,FAST` for a fat bundle.
    pub cpu: String,
    /// Run the IR verifier after every pass.
    pub verify: bool,
    /// Partition for an NPU (`--npu`); None: CPU only.
    pub npu: Option<PartitionOptions>,
    /// Quantise to int8 from a profile (`--load-profile`).
    pub quantize: Option<QuantizeOptions>,
    /// Model inputs read only by QuantizeLinear and outputs written by DequantizeLinear become integer tensors
    /// (`--quantized-io`); the header gives their scale and zero point.
    pub quantized_io: bool,
    /// Put the weights into the object as the exported `NAME_weights` (`--embed-weights`): no `.weights` file,
    /// and the entry function takes NULL for the constant area.
    pub embed_weights: bool,
    /// Render the HTML build report (`--report`) into [`Bundle::report_html`].
    pub html_report: bool,
    /// Place inputs and outputs in the activation area (`--inputs-in-activations`): no mutable area, and the
    /// config's flag 1 tells runtimes where they are.
    pub io_in_activations: bool,
}

/// Profile-guided int8 quantisation options.
#[derive(Debug, Clone)]
pub struct QuantizeOptions {
    /// The profile (`bundlec profile`).
    pub profile: crate::profile::Profile,
    /// How ranges are chosen from the statistics.
    pub calibration: crate::profile::histogram::Calibration,
    /// Nodes kept in f32 (`--keep-f32`).
    pub keep_f32: Vec<String>,
}

impl Options {
    /// Defaults for a bundle called `name`.
    pub fn new(name: &str) -> Options {
        Options {
            name: name.into(),
            inputs: vec![],
            outputs: vec![],
            winograd: crate::lower::Winograd::Auto,
            precision: crate::lower::Precision::F32,
            target: None,
            cpu: codegen::isa::DEFAULT_CPU.into(),
            verify: true,
            npu: None,
            quantize: None,
            quantized_io: false,
            embed_weights: false,
            html_report: false,
            io_in_activations: false,
        }
    }
}

/// What the compiler reports about a build.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// (stage, milliseconds).
    pub timings: Vec<(&'static str, f64)>,
    /// Graph nodes after passes.
    pub nodes: usize,
    /// Kernels.
    pub kernels: usize,
    /// BSP layers.
    pub layers: usize,
    /// Area sizes: constants, mutables, activations.
    pub sizes: [usize; 3],
    /// Max live activation bytes.
    pub max_live: usize,
    /// Planner efficiency.
    pub efficiency: f64,
    /// Pass statistics: (pass, count).
    pub passes: Vec<(&'static str, usize)>,
    /// The NPU placement table (`--npu`).
    pub partition: Option<String>,
    /// The partition cache document (`--npu`).
    pub partition_json: Option<serde_json::Value>,
    /// NPU segments: (id, nodes, estimated cycles).
    pub segments: Vec<(String, usize, u64)>,
    /// Nodes computed in int8 (QConv / QMatMul / QAdd), in graph order.
    pub int8: Vec<String>,
    /// Nodes `--load-profile` left in f32, with the reason.
    pub kept_f32: Vec<(String, String)>,
    /// `--quantized-io`: the integer inputs and outputs with their scale and zero point.
    pub quantized_io: Vec<(String, f32, i32)>,
    /// Warnings about the model (docs/fuzzing.md: attributes that make some outputs NaN or infinite).
    pub warnings: Vec<String>,
}

/// A compiled bundle, in memory.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Bundle name.
    pub name: String,
    /// `NAME.o`.
    pub object: Vec<u8>,
    /// `NAME.weights` (the constant area image; inside `object` as `NAME_weights` when `embedded_weights`).
    pub weights: Vec<u8>,
    /// `--embed-weights`: the object holds the weights, no `NAME.weights` file is written.
    pub embedded_weights: bool,
    /// The HTML build report (`--report`), when asked for.
    pub report_html: Option<String>,
    /// `NAME.h`.
    pub header: String,
    /// `NAME.recipe.json`.
    pub recipe: String,
    /// `NAME.<segment>.txn` files: (segment id, bytes).
    pub txns: Vec<(String, Vec<u8>)>,
    /// `NAME.<segment>.meta.json` files (DynamicDispatch's meta JSON): (segment id, text).
    pub metas: Vec<(String, String)>,
    /// Model inputs: (name, shape, dtype).
    pub inputs: Vec<(String, Vec<usize>, crate::ir::DType)>,
    /// Model outputs: (name, shape, dtype).
    pub outputs: Vec<(String, Vec<usize>, crate::ir::DType)>,
    /// Build report.
    pub report: Report,
}

impl Bundle {
    /// Writes `NAME.o`, `NAME.weights` (unless the weights are embedded: then a stale one is removed), `NAME.h`
    /// and `NAME.recipe.json` into `dir` (created if missing), and per NPU segment `NAME.<segment>.txn` and
    /// `NAME.<segment>.meta.json`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let io = |p: &Path, e| Error::Io {
            path: p.display().to_string(),
            error: e,
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut files: Vec<(&str, &[u8])> = vec![
            ("o", &self.object),
            ("h", self.header.as_bytes()),
            ("recipe.json", self.recipe.as_bytes()),
        ];
        let wp = dir.join(format!("{}.weights", self.name));
        if !self.embedded_weights {
            files.push(("weights", &self.weights));
        } else if wp.exists() {
            std::fs::remove_file(&wp).map_err(|e| io(&wp, e))?;
        }
        for (ext, bytes) in files {
            let p = dir.join(format!("{}.{ext}", self.name));
            crate::fsio::write_file(&p, bytes)?;
        }
        for (id, bytes) in &self.txns {
            let p = dir.join(format!("{}.{id}.txn", self.name));
            crate::fsio::write_file(&p, bytes)?;
        }
        for (id, text) in &self.metas {
            let p = dir.join(format!("{}.{id}.meta.json", self.name));
            crate::fsio::write_file(&p, text.as_bytes())?;
        }
        Ok(())
    }
    /// Writes `NAME.weights.txt`, the weights as a C array initialiser.
    pub fn write_weights_c_array(&self, dir: &Path) -> Result<()> {
        let p = dir.join(format!("{}.weights.txt", self.name));
        crate::fsio::write_file(&p, weights::c_array(&self.weights).as_bytes())
    }
}

fn check_name(name: &str) -> Result<()> {
    crate::emit::ident::check_bundle_name(name).map_err(|message| Error::InvalidArgument {
        what: "--name".into(),
        message,
    })
}

/// Compiles an ONNX file.
pub fn compile_file(path: &Path, opts: &Options) -> Result<Bundle> {
    check_name(&opts.name)?;
    let t = Instant::now();
    // One read serves the import and the partition cache's model hash.
    let bytes = import::read_model(path)?;
    let g = import::import_read_file(path, &bytes, &opts.inputs, &opts.outputs)?;
    let mut opts = opts.clone();
    if let Some(npu) = &mut opts.npu {
        npu.model_hash = crate::emit::weights::checksum64(&bytes);
    }
    drop(bytes);
    let opts = &opts;
    let mut b = compile_graph(g, opts, &path.display().to_string())?;
    b.report.timings.insert(
        0,
        (
            "import",
            t.elapsed().as_secs_f64() * 1e3 - b.report.timings.iter().map(|x| x.1).sum::<f64>(),
        ),
    );
    Ok(b)
}

/// The graph passes in order; returns (pass, count) statistics.
pub fn optimize(g: &mut Graph) -> Result<Vec<(&'static str, usize)>> {
    Ok(optimize_with(g, None)?.0)
}

/// The graph passes with optional profile-guided quantisation (after BatchNorm folding, before epilogue
/// fusion); returns the statistics and the quantisation report.
pub fn optimize_with(
    g: &mut Graph,
    q: Option<&QuantizeOptions>,
) -> Result<(Vec<(&'static str, usize)>, passes::quantize::QuantizeReport)> {
    let qdq = passes::fold_qdq::fold_qdq(g);
    let folded = passes::fold_constants::fold_constants(g)?;
    let pads = passes::fold_pad::fold_pad(g);
    let taps = passes::trim_taps::trim_taps(g);
    let bn = passes::fold_batchnorm::fold_batchnorm(g);
    let gelu = passes::fuse_gelu::fuse_gelu(g);
    let transposes = passes::fuse_transposes::fuse_transposes(g);
    let mut stats = vec![
        ("fold_qdq", qdq),
        ("fold_constants", folded),
        ("fold_pad", pads),
        ("trim_taps", taps),
        ("fold_batchnorm", bn),
        ("fuse_gelu", gelu),
        ("fuse_transposes", transposes),
    ];
    let mut report = passes::quantize::QuantizeReport::default();
    if let Some(q) = q {
        report = passes::quantize::quantize(g, &q.profile, q.calibration, &q.keep_f32);
        stats.push(("quantize", report.quantized.len()));
        stats.push(("fold_qdq", passes::fold_qdq::fold_qdq(g)));
        passes::quantize::report_unfolded(g, &mut report);
        stats.push(("fold_constants", passes::fold_constants::fold_constants(g)?));
    }
    stats.push(("fuse_epilogues", passes::fuse_epilogues::fuse_epilogues(g)));
    stats.push((
        "eliminate_dead_nodes",
        passes::eliminate_dead_nodes::eliminate_dead_nodes(g),
    ));
    Ok((stats, report))
}

/// Imports a model and runs the passes: the graph the partitioner and lowering see.
pub fn optimized_graph(path: &Path, inputs: &[InputSpec]) -> Result<Graph> {
    optimized(import::import_file(path, inputs)?)
}

/// Runs the passes on an imported graph and verifies the result.
pub fn optimized(mut g: Graph) -> Result<Graph> {
    optimize(&mut g)?;
    verify(&g, "passes")?;
    Ok(g)
}

/// Compiles an imported graph; `model` names the source in the header.
pub fn compile_graph(mut g: Graph, opts: &Options, model: &str) -> Result<Bundle> {
    check_name(&opts.name)?;
    let mut report = Report {
        warnings: std::mem::take(&mut g.warnings),
        ..Report::default()
    };
    let mut clock = Instant::now();
    let mut lap = |report: &mut Report, stage: &'static str| {
        report
            .timings
            .push((stage, clock.elapsed().as_secs_f64() * 1e3));
        clock = Instant::now();
    };
    let cpu = isa::resolve_cpu(opts.target.as_deref(), &opts.cpu)?;
    let (tgt, fast) = isa::targets(opts.target.as_deref(), &cpu)?;
    if opts.precision == crate::lower::Precision::Bf16 && (!tgt.ext.bf16 || fast.is_some()) {
        return Err(Error::InvalidArgument {
            what: "--precision".into(),
            message: format!(
                "bf16 needs a single kernel set with AVX-512 BF16 (--cpu sapphirerapids, znver4, znver5, or \
                 native on such a CPU); --cpu {cpu} has none"
            ),
        });
    }
    let (stats, qreport) = optimize_with(&mut g, opts.quantize.as_ref())?;
    report.passes = stats;
    report.kept_f32 = qreport.kept;
    if opts.quantized_io {
        report.quantized_io = passes::quantize::quantize_io(&mut g);
        passes::eliminate_dead_nodes::eliminate_dead_nodes(&mut g);
    }
    if opts.verify {
        verify(&g, "passes")?;
    }
    lap(&mut report, "passes");
    if opts.io_in_activations && opts.npu.is_some() {
        return Err(Error::InvalidArgument {
            what: "--inputs-in-activations".into(),
            message: "cannot be combined with --npu yet (NPU segment copies and the recipe's copy runs address \
                      inputs and outputs in the mutable area)"
                .into(),
        });
    }
    let part: Option<Partition> = match &opts.npu {
        Some(po) => {
            let p = partition::partition(&g, po)?;
            report.partition = Some(partition::report::table(&g, &p));
            report.partition_json = Some(partition::cache::to_json(&g, &p));
            lap(&mut report, "partition");
            Some(p)
        }
        None => None,
    };
    let mut l = lower::lower_with(
        &mut g,
        lower::LowerOpts {
            vnni: tgt.ext.vnni,
            vnni_depthwise: tgt.ext.vnni && tgt.ext.vbmi,
            amx: tgt.ext.amx,
            micro_kernels: tgt.simd.is_some(),
            avx512: fast.as_ref().unwrap_or(&tgt).simd == Some(crate::x86::gemm_x86::Simd::Avx512),
            gemv_panel: codegen::isa::gemv_panel(&tgt, fast.as_ref()),
            keep_tensors: part.is_some(),
            winograd: opts.winograd,
            bf16: opts.precision == crate::lower::Precision::Bf16,
        },
    )?;
    let (s, mut plan, segs) = match &part {
        Some(p) => {
            let seg_of = p.segment_of();
            let mut ks = cranelift_entity::SecondaryMap::new();
            for (ki, k) in l.kernels.iter() {
                ks[ki] = seg_of.get(&k.node).copied();
            }
            let s = Schedule::with_segments(&l, &ks, p.segments.len());
            let (pins, bufs) = segments::staging_pins(p, &s, &mut l.scratch);
            let mut plan = MemoryPlan::with_pins(&g, &l, &s, &pins, opts.io_in_activations)?;
            let segs = segments::layouts(&g, p, &s, &mut plan, &bufs)?;
            (s, plan, segs)
        }
        None => {
            let s = Schedule::new(&l);
            let plan = MemoryPlan::with_pins(&g, &l, &s, &[], opts.io_in_activations)?;
            (s, plan, Vec::new())
        }
    };
    plan.constant_size = crate::plan::align(plan.constant_size);
    // A fat bundle's entry remembers its CPU check in a slot at the end of the activation area.
    let pick_slot = fast
        .as_ref()
        .map(|_| plan.reserve_activation(codegen::dispatch::SLOT_BYTES));
    lap(&mut report, "lower+plan");
    let mut w = weights::image(&g, &plan)?;
    if let Some(p) = &part {
        segments::fill_weights(&mut w, p, &segs)?;
    }
    let checksum = weights::checksum64(&w);
    let triple = tgt.isa.triple().to_string();
    let builder = ObjectBuilder::new(
        tgt.isa,
        opts.name.as_bytes().to_vec(),
        cranelift_module::default_libcall_names(),
    )
    .map_err(|e| Error::internal("codegen", e))?;
    let mut module = ObjectModule::new(builder);
    let funcs = codegen::define_kernels(&mut module, &opts.name, &l, tgt.has_fma, tgt.simd, None)?;
    let embedded = if opts.embed_weights {
        Some(weights::define_embedded(&mut module, &opts.name, &w)?)
    } else {
        None
    };
    let fast_funcs = match &fast {
        None => {
            let linkage = cranelift_module::Linkage::Export;
            let (n, ps) = (&opts.name, &plan);
            codegen::define_entry(&mut module, n, linkage, &l, &s, ps, &funcs, embedded)?;
            None
        }
        Some(f) => {
            let fat = codegen::dispatch::Fat {
                fast: f,
                base_kernels: &funcs,
                embedded,
                slot: pick_slot.unwrap_or_default(),
                key: checksum ^ bundle_rt::fnv1a64(opts.name.as_bytes()),
            };
            Some(codegen::dispatch::define_fat(
                &mut module,
                &opts.name,
                &l,
                &s,
                &plan,
                &fat,
            )?)
        }
    };
    let cpu_features = codegen::define_cpu_check(
        &mut module,
        &opts.name,
        &tgt.cpu,
        tgt.has_fma,
        tgt.simd,
        tgt.ext,
    )?;
    // The engine runs each interleaved pair as one op (no NPU segments: they own whole layers).
    let pair_ops = if segs.is_empty() {
        let fast = fast_funcs.as_ref().map(|(f, _)| f);
        codegen::define_pair_ops(&mut module, &opts.name, &l, &s.order, &funcs, fast)?
    } else {
        Vec::new()
    };
    lap(&mut report, "codegen");
    let ci = config::ConfigInput {
        name: &opts.name,
        g: &g,
        l: &l,
        s: &s,
        plan: &plan,
        funcs: &funcs,
        checksum,
        segments: &segs,
        cpu_features,
        fast: fast_funcs.as_ref().map(|(f, bits)| (f, *bits)),
        pairs: &pair_ops,
        flags: if opts.io_in_activations {
            config::FLAG_IO_IN_ACTIVATIONS
        } else {
            0
        },
    };
    config::emit_config(&mut module, &ci)?;
    let object = module
        .finish()
        .emit()
        .map_err(|e| Error::internal("emit", e))?;
    let syms = config::symbols(&g, &plan);
    let int8: Vec<String> = g
        .order
        .iter()
        .filter(|&&n| {
            let integer_in = || g.tensors[g.nodes[n].inputs[0]].dtype != crate::ir::DType::F32;
            match g.nodes[n].op {
                crate::ir::Op::QConv(..)
                | crate::ir::Op::QMatMul(_)
                | crate::ir::Op::QAdd(_)
                | crate::ir::Op::QGlobalAvgPool(_) => true,
                crate::ir::Op::Pool(..) => integer_in(),
                _ => false,
            }
        })
        .map(|&n| g.nodes[n].name.clone())
        .collect();
    let hdr = header::render(&header::HeaderInfo {
        name: &opts.name,
        model,
        symbols: &syms,
        sizes: [plan.constant_size, plan.mutable_size, plan.activation_size],
        max_live: plan.max_live,
        efficiency: plan.efficiency(),
        checksum,
        ops_layers: [l.kernels.len(), s.num_layers as usize],
        target: [&triple, &cpu],
        segments: &segs,
        npu: part.as_ref().map(|p| p.target.name.as_str()),
        features: &crate::x86::cpu_check::feature_names(cpu_features),
        io_in_activations: opts.io_in_activations,
        embedded_weights: opts.embed_weights,
        int8: &int8,
        quantized_io: &report.quantized_io,
    });
    let npu_name = part.as_ref().map(|p| p.target.name.clone());
    let rec = recipe::recipe(
        &opts.name,
        &g,
        &l,
        (&s, &pair_ops),
        &plan,
        &segs,
        npu_name.as_deref(),
    )?;
    let recipe =
        serde_json::to_string_pretty(&rec).map_err(|e| Error::internal("recipe", e))? + "\n";
    lap(&mut report, "emit");
    let report_html = opts.html_report.then(|| {
        let vnpu = crate::npu::NpuTarget::vnpu();
        let on_npu = part
            .as_ref()
            .map(|p| {
                p.segments
                    .iter()
                    .filter(|sg| segs.iter().any(|l| l.id == sg.id))
                    .flat_map(|sg| sg.nodes.iter().map(|&n| (n, sg.id.clone())))
                    .collect()
            })
            .unwrap_or_default();
        crate::emit::report::render(&crate::emit::report::ReportInput {
            name: &opts.name,
            model,
            g: &g,
            l: &l,
            s: &s,
            plan: &plan,
            segments: &segs,
            on_npu,
            target: part.as_ref().map_or(&vnpu, |p| &p.target),
            timings: &report.timings,
            cpu: [&triple, &cpu],
        })
    });
    report.nodes = g.order.len();
    report.int8 = int8;
    report.kernels = l.kernels.len();
    report.layers = s.num_layers as usize;
    report.sizes = [plan.constant_size, plan.mutable_size, plan.activation_size];
    report.max_live = plan.max_live;
    report.efficiency = plan.efficiency();
    report.segments = segs
        .iter()
        .map(|sg| (sg.id.clone(), sg.nodes, sg.total_cycles))
        .collect();
    let txns = segs
        .iter()
        .map(|sg| (sg.id.clone(), sg.txn.clone()))
        .collect();
    let mut metas = Vec::new();
    if let Some(p) = &part {
        for sg in &segs {
            let seg = &p.segments[sg.index];
            let [i, o, t] = sg.staging.map(|l| l.size);
            let sizes = [i, o, t, sg.consts.1, sg.params.1];
            let meta = crate::npu::meta::dd_meta(&g, &seg.nodes, &seg.fused, sizes);
            let text =
                serde_json::to_string_pretty(&meta).map_err(|e| Error::internal("meta", e))?;
            metas.push((sg.id.clone(), text + "\n"));
        }
    }
    let io = |ts: &[crate::ir::TensorId]| {
        ts.iter()
            .map(|&t| {
                (
                    g.tensors[t].name.clone(),
                    g.tensors[t].shape.clone(),
                    g.tensors[t].dtype,
                )
            })
            .collect()
    };
    let (inputs, outputs) = (io(&g.inputs), io(&g.outputs));
    Ok(Bundle {
        name: opts.name.clone(),
        object,
        weights: w,
        embedded_weights: opts.embed_weights,
        report_html,
        header: hdr,
        recipe,
        txns,
        metas,
        inputs,
        outputs,
        report,
    })
}
