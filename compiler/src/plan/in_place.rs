//! In-place residual epilogues: a kernel that adds a residual element by element and writes each sum where
//! that element came from may take the residual's buffer for its output when the residual dies with it. The
//! output's stores then hit the lines its residual loads just brought in, instead of fetching the output's
//! lines from further out (a store to a line not in cache reads it first), and the activation area shrinks.
//!
//! Which kernels qualify (`reads_residual_in_place`): the transposing epilogue of a convolution computed
//! transposed, fused into its GEMM or a kernel of its own (`x86/transpose_out/`), which loads a 16x16
//! block of the residual and stores the same block of the output, in units that own disjoint blocks; and a GEMM
//! whose residual is laid out as C, with one K block and an epilogue the micro-kernels fuse
//! (`GemmSpec::residual_in_place`: otherwise it keeps running sums in C before the residual is read).
//!
//! When (`pairs`): the residual and the output are intermediate tensors of the same size (not model inputs or
//! outputs, not scratch); the residual is none of the kernel's other operands; the residual's buffer is last
//! used in this kernel's layer and no other kernel of that layer touches it; the output is born in that layer;
//! and the kernel is not half of a pair the entry function interleaves (`kernel/interleave.rs`), whose buffers
//! live across both layers. A chain (an output taking a residual's buffer and later serving as another kernel's
//! residual) folds into its first buffer.

use crate::ir::Graph;
use crate::kernel::{Body, Buf, KernelId, Lowering, Role};
use std::collections::HashMap;

use super::Schedule;

/// Whether kernel `k`'s residual is read only where its output is written, element by element (module docs).
fn reads_residual_in_place(body: &Body) -> bool {
    match body {
        Body::Gemm(s) => s.residual_in_place(),
        Body::TransposeOut { t, .. } => t.residual,
        _ => false,
    }
}

/// The outputs that take another buffer's place: `output → buffer whose location it shares` (a chain's first
/// buffer), given the kernels of interleaved pairs and each activation buffer's layer interval in `live` (which
/// grows to cover its aliases' lives).
pub fn pairs(
    g: &Graph,
    l: &Lowering,
    s: &Schedule,
    interleaved: &[KernelId],
    live: &mut HashMap<Buf, (u32, u32)>,
) -> HashMap<Buf, Buf> {
    // The size of an intermediate tensor; `None` for model inputs and outputs and for scratch.
    let intermediate = |b: Buf| match b {
        Buf::Tensor(t) if !g.inputs.contains(&t) && !g.outputs.contains(&t) => {
            Some(g.tensors[t].size_bytes())
        }
        _ => None,
    };
    // Kernels using each buffer, per layer.
    let mut users: HashMap<(Buf, u32), u32> = HashMap::new();
    for &ki in &s.order {
        let mut seen: Vec<Buf> = Vec::new();
        for a in &l.kernels[ki].args {
            if !seen.contains(&a.buf) {
                seen.push(a.buf);
                *users.entry((a.buf, s.layer[ki])).or_default() += 1;
            }
        }
    }
    let interleaved: std::collections::HashSet<KernelId> = interleaved.iter().copied().collect();
    let mut root: HashMap<Buf, Buf> = HashMap::new();
    for &ki in &s.order {
        let k = &l.kernels[ki];
        if !reads_residual_in_place(&k.body) || interleaved.contains(&ki) {
            continue;
        }
        let role = |r: Role| k.args.iter().find(|a| a.role == r).map(|a| a.buf);
        let (Some(res), Some(out)) = (role(Role::Residual), role(Role::Out)) else {
            continue;
        };
        let layer = s.layer[ki];
        let (Some(&(_, res_last)), Some(&(out_first, out_last))) = (live.get(&res), live.get(&out))
        else {
            continue;
        };
        let first = root.get(&res).copied().unwrap_or(res);
        let once = k.args.iter().filter(|a| a.buf == res).count() == 1;
        let sizes = (intermediate(res), intermediate(out));
        let ok = res != out
            && once
            && matches!(sizes, (Some(a), Some(b)) if a == b)
            && res_last == layer
            && live.get(&first).is_some_and(|&(_, last)| last == layer)
            && out_first == layer
            && users.get(&(res, layer)) == Some(&1)
            && users.get(&(out, layer)) == Some(&1);
        if ok {
            if let Some(e) = live.get_mut(&first) {
                e.1 = e.1.max(out_last);
            }
            root.insert(out, first);
        }
    }
    root
}
