//! The names and signatures of the functions a bundle's object defines: the entry functions, the kernel
//! functions and a fat bundle's fast set.

use crate::error::{Error, Result};
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{AbiParam, Function, Signature, UserFuncName};
use cranelift_module::{FuncId, Linkage, Module};

/// Declares an entry function `name(constants, mutables, activations) -> i32` (the exported entry, a fat bundle's
/// local per-set entries and its dispatcher) and returns its id and a `Function` to fill.
pub fn declare_entry(
    module: &mut dyn Module,
    name: &str,
    linkage: Linkage,
) -> Result<(FuncId, Function)> {
    let mut sig = module.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(I64));
    }
    sig.returns.push(AbiParam::new(I32));
    let id = module
        .declare_function(name, linkage, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare entry {name}: {e}")))?;
    let func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    Ok((id, func))
}

/// The signature of a kernel function.
pub fn kernel_signature(module: &dyn Module) -> Signature {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.params.push(AbiParam::new(I64));
    sig
}

/// The name prefix of a fat bundle's fast kernel set (`NAME__fast__kI...`).
pub fn fast_name(name: &str) -> String {
    format!("{name}__fast")
}
