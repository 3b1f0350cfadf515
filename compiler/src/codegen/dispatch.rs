//! Fat bundles (`--cpu BASE,FAST`, e.g. `x86-64-v3,x86-64-v4`): both kernel sets are in the object, each behind
//! its own local entry function, and the exported entry `NAME` asks a local feature check (CPUID and XGETBV, as
//! `NAME_cpu_supported` does) on every call which one to run. No libc, no writable globals: the check is not
//! cached, so each call pays one CPUID sequence (docs/benchmarks.md measures it). The op table and `cpuFeatures`
//! describe the baseline set, so bundle-rt runs anywhere the baseline runs.

use crate::error::{Error, Result};
use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};

/// Defines the exported `name(constants, mutables, activations) -> i32` that tail-calls `fast` when `check()`
/// returns non-zero, else `base`.
pub fn define_dispatch(
    module: &mut dyn Module,
    name: &str,
    check: FuncId,
    fast: FuncId,
    base: FuncId,
) -> Result<FuncId> {
    let (id, func) = super::declare_entry(module, name, Linkage::Export)?;
    let mut ctx = Context::new();
    ctx.func = func;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let areas: Vec<_> = b.block_params(entry).to_vec();
        let [chk, f, s] = [check, fast, base].map(|id| module.declare_func_in_func(id, b.func));
        let call = b.ins().call(chk, &[]);
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
