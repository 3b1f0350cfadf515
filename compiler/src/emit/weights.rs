//! The weights file: the exact image of the constant area (`constantWeightVarsMemSize` bytes), each constant at
//! its planned offset in its kernel-ready layout, gaps zero; and its checksum (`checksum64`, `bundle-rt`'s), which
//! `bundle-rt` verifies before running.

use crate::error::{Error, Result};
use crate::ir::Graph;
use crate::kernel::Buf;
use crate::plan::MemoryPlan;

/// Defines the exported, read-only, 64-aligned `NAME_weights` holding the constant area image
/// (`--embed-weights`).
pub fn define_embedded(
    module: &mut dyn cranelift_module::Module,
    name: &str,
    image: &[u8],
) -> Result<cranelift_module::DataId> {
    let sym = format!("{name}_weights");
    let id = module
        .declare_data(&sym, cranelift_module::Linkage::Export, false, false)
        .map_err(|e| Error::internal("emit", format!("declare {sym}: {e}")))?;
    let mut d = cranelift_module::DataDescription::new();
    let mut bytes = image.to_vec();
    if bytes.is_empty() {
        bytes.push(0); // zero-sized objects are not representable in every format
    }
    d.define(bytes.into_boxed_slice());
    d.set_align(64);
    module
        .define_data(id, &d)
        .map_err(|e| Error::internal("emit", format!("define {sym}: {e}")))?;
    Ok(id)
}

/// Builds the constant area image.
pub fn image(g: &Graph, plan: &MemoryPlan) -> Result<Vec<u8>> {
    let mut img = vec![0u8; plan.constant_size];
    for b in &plan.constants {
        let Buf::Tensor(t) = b else { continue };
        let td = &g.tensors[*t];
        let c = td
            .constant()
            .ok_or_else(|| Error::internal("emit", format!("'{}' is not a constant", td.name)))?;
        let bytes = c.to_bytes();
        let loc = plan.loc[b];
        img.get_mut(loc.offset..loc.offset + bytes.len())
            .ok_or_else(|| {
                Error::internal(
                    "emit",
                    format!("constant '{}' outside the constant area", td.name),
                )
            })?
            .copy_from_slice(&bytes);
    }
    Ok(img)
}

/// The format's hashes, from `bundle-rt` (which verifies them): byte-wise FNV-1a 64, and `weightsChecksum`'s
/// `checksum64` (`docs/bundle-format.md`).
pub use bundle_rt::{checksum64, fnv1a64};

/// The weights as a C array initialiser (for `--weights-as-c-array`).
pub fn c_array(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 5);
    for (i, b) in bytes.iter().enumerate() {
        s.push_str(&format!("{b},"));
        if i % 24 == 23 {
            s.push('\n');
        }
    }
    s.push('\n');
    s
}
