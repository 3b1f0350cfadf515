//! The `NAME_config` table and everything it points to (symbol table, tensor descriptors, op table with
//! argument lists, BSP layers, strings), written as read-only data with relocations. The byte layout is
//! documented in `docs/bundle-format.md` and mirrored by `bundle-rt/src/config.rs`.

use crate::error::{Error, Result};
use crate::ir::{DType, Graph, TensorId};
use crate::kernel::{KernelId, Lowering};
use crate::plan::{MemoryPlan, Schedule, ALIGN};
use cranelift_entity::PrimaryMap;
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};

/// `magic` of the extension: the bytes "BUNDLC1\0".
pub const MAGIC: u64 = u64::from_le_bytes(*b"BUNDLC1\0");
/// Extension version.
pub const VERSION: u32 = 5;
/// Size of `BundleConfig`.
pub const CONFIG_SIZE: usize = 176;
/// `flags` bit: inputs and outputs live in the activation area (`--inputs-in-activations`); their symbol
/// offsets are activation-area offsets and the mutable area is empty.
pub const FLAG_IO_IN_ACTIVATIONS: u32 = 1;

/// One symbol of the table.
#[derive(Debug, Clone)]
pub struct Symbol {
    /// Tensor name.
    pub name: String,
    /// Byte offset in its area.
    pub offset: usize,
    /// Elements.
    pub elems: usize,
    /// 0 constant, 1 input, 2 output.
    pub role: u32,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
}

/// The symbol list: inputs, outputs, then constants.
pub fn symbols(g: &Graph, plan: &MemoryPlan) -> Vec<Symbol> {
    let mk = |t: TensorId, role: u32| {
        let td = &g.tensors[t];
        let loc = plan.loc[&crate::kernel::Buf::Tensor(t)];
        Symbol {
            name: td.name.clone(),
            offset: loc.offset,
            elems: crate::ir::numel(&td.shape),
            role,
            dtype: td.dtype,
            shape: td.shape.clone(),
        }
    };
    let mut v: Vec<Symbol> = g.inputs.iter().map(|&t| mk(t, 1)).collect();
    v.extend(g.outputs.iter().map(|&t| mk(t, 2)));
    for b in &plan.constants {
        if let crate::kernel::Buf::Tensor(t) = b {
            v.push(mk(*t, 0));
        }
    }
    v
}

/// A blob of bytes with pointer relocations, defined as one local read-only data object.
struct Blob {
    bytes: Vec<u8>,
    data_relocs: Vec<(usize, DataId, i64)>,
    func_relocs: Vec<(usize, FuncId)>,
}

impl Blob {
    fn new() -> Self {
        Blob {
            bytes: Vec::new(),
            data_relocs: Vec::new(),
            func_relocs: Vec::new(),
        }
    }
    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn ptr(&mut self, target: DataId, addend: usize) {
        self.data_relocs
            .push((self.bytes.len(), target, addend as i64));
        self.u64(0);
    }
    fn null(&mut self) {
        self.u64(0);
    }
    fn func(&mut self, f: FuncId) {
        self.func_relocs.push((self.bytes.len(), f));
        self.u64(0);
    }
    fn define(self, module: &mut dyn Module, id: DataId, align: u64) -> Result<()> {
        let mut d = DataDescription::new();
        let mut bytes = self.bytes;
        if bytes.is_empty() {
            bytes.push(0); // zero-sized objects are not representable in every format
        }
        d.define(bytes.into_boxed_slice());
        d.set_align(align);
        for (off, target, addend) in self.data_relocs {
            let gv = module.declare_data_in_data(target, &mut d);
            d.write_data_addr(off as u32, gv, addend);
        }
        for (off, f) in self.func_relocs {
            let fr = module.declare_func_in_data(f, &mut d);
            d.write_function_addr(off as u32, fr);
        }
        module
            .define_data(id, &d)
            .map_err(|e| Error::internal("emit", format!("define data: {e}")))
    }
}

fn declare(module: &mut dyn Module, name: &str, linkage: Linkage) -> Result<DataId> {
    module
        .declare_data(name, linkage, false, false)
        .map_err(|e| Error::internal("emit", format!("declare {name}: {e}")))
}

/// Everything `emit_config` needs.
pub struct ConfigInput<'a> {
    /// Bundle name.
    pub name: &'a str,
    /// The graph.
    pub g: &'a Graph,
    /// Kernels.
    pub l: &'a Lowering,
    /// Schedule.
    pub s: &'a Schedule,
    /// Memory plan.
    pub plan: &'a MemoryPlan,
    /// Kernel functions, indexed like `l.kernels`.
    pub funcs: &'a PrimaryMap<KernelId, FuncId>,
    /// FNV-1a 64 of the weights file.
    pub checksum: u64,
    /// NPU segments.
    pub segments: &'a [super::segments::SegmentLayout],
    /// `cpuFeatures`: the ISA feature bits the kernels need.
    pub cpu_features: u64,
    /// A fat bundle's FAST kernel functions (indexed like `l.kernels`) and their `fastCpuFeatures`: a second op
    /// table, `fastOps`, that bundle-rt runs where the CPU has those features.
    pub fast: Option<(&'a PrimaryMap<KernelId, FuncId>, u64)>,
    /// Interleaved pairs (`codegen::PairOp`): each an op of its wrapper (both argument lists, `G` tasks, the
    /// GEMM's layer) followed by its two kernels' own ops, for the other schedule (`codegen::table_ops`).
    pub pairs: &'a [crate::codegen::PairOp],
    /// `flags` ([`FLAG_IO_IN_ACTIVATIONS`]).
    pub flags: u32,
}

/// Defines `NAME_config` and its tables.
pub fn emit_config(module: &mut dyn Module, c: &ConfigInput) -> Result<()> {
    let syms = symbols(c.g, c.plan);
    let ids: Vec<DataId> = ["strings", "symtab", "tensors", "args", "ops", "layers"]
        .iter()
        .map(|t| declare(module, &format!("{}__{t}", c.name), Linkage::Local))
        .collect::<Result<_>>()?;
    let [strs, symtab, tensors, args, ops, layers] =
        [ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]];
    let config = declare(module, &format!("{}_config", c.name), Linkage::Export)?;

    let mut sb = Blob::new();
    let mut intern = |s: &str| {
        let at = sb.bytes.len();
        sb.bytes.extend_from_slice(s.as_bytes());
        sb.bytes.push(0);
        at
    };
    let sym_names: Vec<usize> = syms.iter().map(|s| intern(&s.name)).collect();
    let table = crate::codegen::table_ops(&c.s.order, c.pairs);
    let op_names: Vec<usize> = table.iter().map(|op| intern(&op.name(c.l))).collect();
    let model_name = intern(c.name);
    let seg_names: Vec<usize> = c.segments.iter().map(|sg| intern(&sg.id)).collect();

    let mut st = Blob::new();
    let mut td = Blob::new();
    for (s, &n) in syms.iter().zip(&sym_names) {
        st.ptr(strs, n);
        st.u64(s.offset as u64);
        st.u64(s.elems as u64);
        st.bytes.push(u8::from(s.role != 0));
        st.bytes.extend_from_slice(&[0; 7]);
        if s.shape.len() > 8 {
            return Err(Error::tensor(
                &s.name,
                format!("rank {} exceeds the bundle limit of 8", s.shape.len()),
            ));
        }
        td.u32(s.dtype.onnx_code());
        td.u32(s.shape.len() as u32);
        td.u32(s.role);
        td.u32(0);
        for i in 0..8 {
            td.u64(*s.shape.get(i).unwrap_or(&0) as u64);
        }
        td.u64((s.elems * s.dtype.size()) as u64);
    }

    let mut ab = Blob::new();
    let mut ob = Blob::new();
    // `fastOps`: the same ops with FAST's functions (names, tasks, arguments and layers shared).
    let mut fb = Blob::new();
    for (t, &name) in table.iter().zip(&op_names) {
        let ki = t.kernels[0];
        let first_arg = ab.bytes.len();
        let mut nargs = 0u32;
        for &kk in t.kernels {
            let k = &c.l.kernels[kk];
            for a in &k.args {
                let loc = c.plan.loc.get(&a.buf).ok_or_else(|| {
                    let m = format!("kernel '{}' {:?} argument without location", k.name, a.role);
                    Error::internal("emit", m)
                })?;
                ab.u32(loc.area as u32);
                ab.u32(0);
                ab.u64(loc.offset as u64);
                ab.u64(loc.size as u64);
                nargs += 1;
            }
        }
        let tasks = t.tasks(c.l);
        let op = |blob: &mut Blob, func: FuncId| {
            blob.func(func);
            blob.ptr(strs, name);
            blob.u32(tasks);
            blob.u32(nargs);
            blob.ptr(args, first_arg);
            blob.u32(c.s.layer[ki]);
            blob.u32(t.alt.bits());
        };
        op(&mut ob, t.pair().map_or(c.funcs[ki], |p| p.func));
        if let Some((fast, _)) = c.fast {
            let f = match t.pair() {
                Some(p) => p.fast.ok_or_else(|| {
                    Error::internal("emit", "interleaved pair without its fast wrapper")
                })?,
                None => fast[ki],
            };
            op(&mut fb, f);
        }
    }
    let mut lb = Blob::new();
    let mut counts = vec![0u32; c.s.num_layers as usize];
    for t in &table {
        if let Some(n) = counts.get_mut(c.s.layer[t.kernels[0]] as usize) {
            *n += 1;
        }
    }
    let mut first = 0u32;
    for n in counts {
        lb.u32(first);
        lb.u32(n);
        first += n;
    }

    // NPU segments: transaction blobs, copy table, segment table (layouts in docs/bundle-format.md).
    let mut txn_ids = Vec::new();
    for sg in c.segments {
        let id = declare(
            module,
            &format!("{}__txn_{}", c.name, sg.id),
            Linkage::Local,
        )?;
        let mut tb = Blob::new();
        tb.bytes = sg.txn.clone();
        tb.define(module, id, 16)?;
        txn_ids.push(id);
    }
    let (copies, segtab) = (
        declare(module, &format!("{}__npucopies", c.name), Linkage::Local)?,
        declare(module, &format!("{}__npusegments", c.name), Linkage::Local)?,
    );
    let mut cpb = Blob::new();
    let mut sgb = Blob::new();
    for (i, sg) in c.segments.iter().enumerate() {
        let first_copy = cpb.bytes.len();
        for cp in sg.copy_in.iter().chain(&sg.copy_out) {
            cpb.u32(cp.area as u32);
            cpb.u32(0);
            cpb.u64(cp.offset as u64);
            cpb.u64(cp.size as u64);
            cpb.u64(cp.fused as u64);
        }
        sgb.ptr(strs, seg_names[i]);
        sgb.ptr(txn_ids[i], 0);
        sgb.u64(sg.txn.len() as u64);
        sgb.u32(sg.layers.0);
        sgb.u32(sg.layers.1);
        for loc in &sg.staging {
            sgb.u64(loc.offset as u64);
            sgb.u64(loc.size as u64);
        }
        for (at, len) in [sg.consts, sg.params] {
            sgb.u64(at as u64);
            sgb.u64(len as u64);
        }
        sgb.u32(sg.copy_in.len() as u32);
        sgb.u32(sg.copy_out.len() as u32);
        if sg.copy_in.is_empty() && sg.copy_out.is_empty() {
            sgb.null();
        } else {
            sgb.ptr(copies, first_copy);
        }
        for cy in sg.cycles {
            sgb.u64(cy);
        }
    }
    let mut cb = Blob::new();
    cb.u64(c.plan.constant_size as u64);
    cb.u64(c.plan.mutable_size as u64);
    cb.u64(c.plan.activation_size as u64);
    cb.u64(ALIGN as u64);
    cb.u64(syms.len() as u64);
    cb.ptr(symtab, 0);
    cb.u64(MAGIC);
    cb.u32(VERSION);
    cb.u32(c.flags);
    cb.u64(c.checksum);
    cb.ptr(tensors, 0);
    cb.u64(c.g.inputs.len() as u64);
    cb.u64(c.g.outputs.len() as u64);
    cb.u64(table.len() as u64);
    cb.ptr(ops, 0);
    cb.u64(c.s.num_layers as u64);
    cb.ptr(layers, 0);
    cb.u64(c.segments.len() as u64);
    if c.segments.is_empty() {
        cb.null();
    } else {
        cb.ptr(segtab, 0);
    }
    cb.ptr(strs, model_name);
    cb.u64(c.cpu_features);
    let fast_ops = match c.fast {
        Some((_, bits)) => {
            let id = declare(module, &format!("{}__fast_ops", c.name), Linkage::Local)?;
            cb.ptr(id, 0);
            cb.u64(bits);
            Some(id)
        }
        None => {
            cb.null();
            cb.u64(0);
            None
        }
    };
    if cb.bytes.len() != CONFIG_SIZE {
        return Err(Error::internal(
            "emit",
            format!("config is {} bytes, expected {CONFIG_SIZE}", cb.bytes.len()),
        ));
    }
    sb.define(module, strs, 1)?;
    st.define(module, symtab, 8)?;
    td.define(module, tensors, 8)?;
    ab.define(module, args, 8)?;
    ob.define(module, ops, 8)?;
    if let Some(id) = fast_ops {
        fb.define(module, id, 8)?;
    }
    lb.define(module, layers, 8)?;
    cpb.define(module, copies, 8)?;
    sgb.define(module, segtab, 8)?;
    cb.define(module, config, 64)
}
