//! The bundle's own functions besides the kernels: the entry function, which runs every task of every kernel
//! in schedule order on the calling thread (interleaving the pairs `interleave.rs` finds), and the CPU feature
//! checks (`NAME_cpu_supported`, a fat bundle's per-set check).

use super::builder::Kb;
use super::symbols::declare_entry;
use crate::error::{Error, Result};
use crate::kernel::interleave;
use crate::kernel::{KernelId, Lowering};
use crate::plan::{MemoryPlan, Schedule};
use crate::x86::{self, cpu_check::X86Ext, gemm_x86::Simd};
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, StackSlotData, StackSlotKind, UserFuncName,
};
use cranelift_codegen::Context;
use cranelift_entity::PrimaryMap;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};

/// Defines the exported `int NAME_cpu_supported(void)` and returns the ISA features it checks as `cpuFeatures`
/// bits (`kernels::cpu_check::X86_FEATURES`): machine code on x86-64 (`x86/cpu_check.rs`), a Cranelift
/// `return 1` and no bits elsewhere (the baseline is all the kernels use).
pub fn define_cpu_check(
    module: &mut dyn Module,
    name: &str,
    cpu: &str,
    has_fma: bool,
    simd: Option<Simd>,
    ext: X86Ext,
) -> Result<u64> {
    let fname = format!("{name}_cpu_supported");
    define_feature_check(module, &fname, Linkage::Export, cpu, has_fma, simd, ext).map(|r| r.1)
}

/// Defines `int fname(void)`: 1 when the CPU has every feature of a kernel set (see [`define_cpu_check`]);
/// returns its id and feature bits.
fn define_feature_check(
    module: &mut dyn Module,
    fname: &str,
    linkage: Linkage,
    cpu: &str,
    has_fma: bool,
    simd: Option<Simd>,
    ext: X86Ext,
) -> Result<(FuncId, u64)> {
    let mut sig = module.make_signature();
    sig.returns.push(AbiParam::new(I32));
    let id = module
        .declare_function(fname, linkage, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
    if module.isa().triple().architecture == target_lexicon::Architecture::X86_64 {
        let needs = x86_needs(cpu, has_fma, simd, ext);
        let bytes = x86::cpu_check::assemble(&needs).map_err(|e| Error::internal("codegen", e))?;
        module
            .define_function_bytes(id, 16, &bytes, &[])
            .map_err(|e| Error::internal("codegen", format!("define {fname}: {e}")))?;
        return Ok((id, needs.bits()));
    }
    let mut ctx = Context::new();
    ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let blk = b.create_block();
        b.switch_to_block(blk);
        b.seal_block(blk);
        let one = b.ins().iconst(I32, 1);
        b.ins().return_(&[one]);
        b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| Error::internal("codegen", format!("{fname}: {e:?}")))?;
    Ok((id, 0))
}

/// What a kernel set of `cpu` needs of an x86-64 CPU.
fn x86_needs(
    cpu: &str,
    has_fma: bool,
    simd: Option<Simd>,
    ext: X86Ext,
) -> x86::cpu_check::X86Needs {
    let v4 =
        matches!(cpu, "x86-64-v4" | "skylake-avx512" | "icelake") || simd == Some(Simd::Avx512);
    x86::cpu_check::X86Needs {
        avx_fma: has_fma,
        avx2: has_fma,
        avx512: v4,
        ext,
    }
}

/// Defines a fat bundle's local `int fname(uint64_t *slot)`: the feature check of the fast set (x86-64 System V),
/// remembered in `slot` under a tag of `key` (`kernels::cpu_check::assemble_pick`). Returns its id and the set's
/// feature bits.
pub fn define_pick(
    module: &mut dyn Module,
    fname: &str,
    cpu: &str,
    has_fma: bool,
    simd: Option<Simd>,
    ext: X86Ext,
    key: u64,
) -> Result<(FuncId, u64)> {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I32));
    let id = module
        .declare_function(fname, Linkage::Local, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
    let needs = x86_needs(cpu, has_fma, simd, ext);
    let bytes =
        x86::cpu_check::assemble_pick(&needs, key).map_err(|e| Error::internal("codegen", e))?;
    module
        .define_function_bytes(id, 16, &bytes, &[])
        .map_err(|e| Error::internal("codegen", format!("define {fname}: {e}")))?;
    Ok((id, needs.bits()))
}

/// Defines the entry function `name(constants, mutables, activations) -> i32` with `linkage` (exported, or local
/// behind a fat bundle's dispatcher). With `embedded` (the `NAME_weights` data object of `--embed-weights`), a
/// NULL `constants` means those embedded weights.
#[allow(clippy::too_many_arguments)] // the entry's symbol, the schedule's parts and the embedded weights
pub fn define_entry(
    module: &mut dyn Module,
    name: &str,
    linkage: Linkage,
    l: &Lowering,
    sched: &Schedule,
    plan: &MemoryPlan,
    kernels: &PrimaryMap<KernelId, FuncId>,
    embedded: Option<cranelift_module::DataId>,
) -> Result<FuncId> {
    let (id, func) = declare_entry(module, name, linkage)?;
    let mut ctx = Context::new();
    ctx.func = func;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let mut areas = super::builder::begin_body(&mut b);
        if let Some(w) = embedded {
            let gv = module.declare_data_in_func(w, b.func);
            let addr = b.ins().symbol_value(I64, gv);
            areas[0] = b.ins().select(areas[0], areas[0], addr);
        }
        let max_args = l
            .kernels
            .values()
            .map(|k| k.args.len())
            .max()
            .unwrap_or(1)
            .max(1);
        // Two argument arrays: an interleaved pair (`interleave.rs`) keeps both kernels' arrays.
        let slots = [0, 1].map(|_| {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                (max_args * 8) as u32,
                3,
            ))
        });
        let pairs: std::collections::HashMap<usize, usize> =
            interleave::pairs(l, &sched.order).into_iter().collect();
        let mut at = 0;
        while at < sched.order.len() {
            let ki = sched.order[at];
            // The next kernel runs group by group with this one where they interleave.
            let pair = pairs.get(&at).map(|&g| (sched.order[at + 1], g));
            let parts: Vec<KernelId> = match pair {
                Some((kj, _)) => vec![ki, kj],
                None => vec![ki],
            };
            let mut frefs = vec![];
            for (pi, &k) in parts.iter().enumerate() {
                for (ai, arg) in l.kernels[k].args.iter().enumerate() {
                    let loc = plan.loc.get(&arg.buf).ok_or_else(|| {
                        Error::internal(
                            "codegen",
                            format!(
                                "kernel '{}' {:?} argument has no location",
                                l.kernels[k].name, arg.role
                            ),
                        )
                    })?;
                    let p = b
                        .ins()
                        .iadd_imm_s(areas[loc.area as usize], loc.offset as i64);
                    b.ins().stack_store(I64, p, slots[pi], (ai * 8) as i32);
                }
                frefs.push(module.declare_func_in_func(kernels[k], b.func));
            }
            let mut kb = Kb {
                b,
                args: vec![],
                missing: Default::default(),
                task: areas[0],
                has_fma: false,
            };
            // Tasks [lo, hi) of part `pi`.
            let run = |kb: &mut Kb, pi: usize, lo: usize, hi: usize| {
                let f = frefs[pi];
                if hi - lo == 1 {
                    let argv = kb.b.ins().stack_addr(I64, slots[pi], 0);
                    let t = kb.b.ins().iconst(I64, lo as i64);
                    kb.b.ins().call(f, &[argv, t]);
                } else {
                    kb.for_const(lo, hi, 1, |kb, t| {
                        let argv = kb.b.ins().stack_addr(I64, slots[pi], 0);
                        kb.b.ins().call(f, &[argv, t]);
                    });
                }
            };
            match pair {
                Some((kj, g)) => {
                    let (ta, tb) = (l.kernels[ki].tasks, l.kernels[kj].tasks);
                    for gi in 0..g {
                        let (lo, hi) = interleave::group_tasks(ta, gi, g);
                        run(&mut kb, 0, lo, hi);
                        let (lo, hi) = interleave::group_tasks(tb, gi, g);
                        run(&mut kb, 1, lo, hi);
                    }
                    at += 2;
                }
                None => {
                    run(&mut kb, 0, 0, l.kernels[ki].tasks as usize);
                    at += 1;
                }
            }
            b = kb.b;
        }
        let zero = b.ins().iconst(I32, 0);
        b.ins().return_(&[zero]);
        b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| Error::internal("codegen", format!("entry: {e:?}")))?;
    Ok(id)
}
