//! Fat bundles (`--cpu BASE,FAST`; the default on x86-64 System V targets is `x86-64-v3,x86-64-v4`): both kernel
//! sets are in the object, each behind its own local entry function, and the exported entry `NAME` asks a local
//! `pick` which one to run. No libc, no writable globals: `pick` runs the fast set's feature check (CPUID and
//! XGETBV) once per activation area and remembers the answer in a 64-byte slot at the end of that area, under a
//! tag bound to the slot's address and this bundle, which uninitialised memory does not hold
//! (`x86/cpu_check.rs`). The op table and `cpuFeatures` describe the baseline set, so bundle-rt runs
//! anywhere the baseline runs; the config's `fastOps` table holds the same ops with FAST's functions, which
//! bundle-rt runs instead where the CPU has `fastCpuFeatures`.
use super::isa::Target;
use super::symbols::fast_name;
use crate::error::{Error, Result};
use crate::kernel::{KernelId, Lowering};
use crate::plan::{MemoryPlan, Schedule};
use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::Context;
use cranelift_entity::PrimaryMap;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};

/// A fat bundle's second kernel set and what its entry shares with the first.
pub struct Fat<'a> {
    /// The FAST target.
    pub fast: &'a Target,
    /// The BASE set's kernel functions (kernels without micro-kernels are shared, not compiled twice).
    pub base_kernels: &'a PrimaryMap<KernelId, FuncId>,
    /// `NAME_weights` (`--embed-weights`).
    pub embedded: Option<cranelift_module::DataId>,
    /// The offset of `pick`'s slot in the activation area ([`SLOT_BYTES`] reserved there).
    pub slot: usize,
    /// The bundle's tag key (its name and weights checksum).
    pub key: u64,
}

/// The bytes a fat bundle reserves at the end of its activation area for `pick`'s slot (one cache line).
pub const SLOT_BYTES: usize = 64;

/// Defines FAST's kernels, the local entries `NAME__entry_base` / `NAME__entry_fast`, the local
/// `NAME__pick` and the exported dispatcher `NAME`. Returns FAST's kernel functions and feature bits, for
/// the config's `fastOps` table (bundle-rt's engine runs them where the CPU has the features).
pub fn define_fat(
    module: &mut dyn Module,
    name: &str,
    l: &Lowering,
    sched: &Schedule,
    plan: &MemoryPlan,
    fat: &Fat,
) -> Result<(PrimaryMap<KernelId, FuncId>, u64)> {
    let (f, local) = (fat.fast, Linkage::Local);
    let fast_kernels = super::define_kernels(
        module,
        &fast_name(name),
        l,
        f.has_fma,
        f.simd,
        Some(fat.base_kernels),
    )?;
    let mut entry = |suffix: &str, kernels: &PrimaryMap<KernelId, FuncId>| {
        let n = format!("{name}__entry_{suffix}");
        super::define_entry(module, &n, local, l, sched, plan, kernels, fat.embedded)
    };
    let base = entry("base", fat.base_kernels)?;
    let fast = entry("fast", &fast_kernels)?;
    let pick = format!("{name}__pick");
    let (pick, bits) =
        super::define_pick(module, &pick, &f.cpu, f.has_fma, f.simd, f.ext, fat.key)?;
    define_dispatch(module, name, pick, fat.slot, fast, base)?;
    Ok((fast_kernels, bits))
}

/// Defines the exported `name(constants, mutables, activations) -> i32` that calls `fast` when
/// `pick(activations + slot)` returns non-zero, else `base`.
fn define_dispatch(
    module: &mut dyn Module,
    name: &str,
    pick: FuncId,
    slot: usize,
    fast: FuncId,
    base: FuncId,
) -> Result<FuncId> {
    let (id, func) = super::symbols::declare_entry(module, name, Linkage::Export)?;
    let mut ctx = Context::new();
    ctx.func = func;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let areas = super::builder::begin_body(&mut b);
        let [chk, f, s] = [pick, fast, base].map(|id| module.declare_func_in_func(id, b.func));
        let at = b.ins().iadd_imm_s(areas[2], slot as i64);
        let call = b.ins().call(chk, &[at]);
        let ok = b.inst_results(call)[0];
        let (fast_blk, base_blk) = (b.create_block(), b.create_block());
        b.ins().brif(ok, fast_blk, &[], base_blk, &[]);
        for (blk, fref) in [(fast_blk, f), (base_blk, s)] {
            b.switch_to_block(blk);
            b.seal_block(blk);
            let r = b.ins().call(fref, &areas);
            let rv = b.inst_results(r)[0];
            b.ins().return_(&[rv]);
        }
        b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| Error::internal("codegen", format!("entry dispatcher: {e:?}")))?;
    Ok(id)
}
