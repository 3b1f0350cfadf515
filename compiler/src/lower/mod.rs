//! Lowering: each live graph node becomes one or more kernels with static geometry. Constant operands are put
//! in the layout the kernels want here (Gemm's transposed B is transposed once at compile time; an unfused
//! BatchNormalization becomes per-channel scale/shift constants), so the weights file holds pre-packed data.
//!
//! One file per op family, named as in `ir/ops` (`cnn`, `deconv`, `elementwise`, `index`, `linalg`, `logic`,
//! `nn`, `quant`, `reduce`, `resize`, `shape`); `lower_node` only dispatches. A family lowering builds its
//! kernels through `Ctx`: `push` takes the arguments with their `Role`s (the body generators in
//! `codegen/ops/<kind>.rs` look them up by role), `scratch` allocates a scratch buffer, `constant` adds a
//! compile-time tensor to the graph.

mod cnn;
mod ctx;
mod deconv;
mod elementwise;
mod index;
mod linalg;
mod logic;
mod nn;
mod qconv_implicit;
mod quant;
mod reduce;
mod resize;
mod shape;

use crate::error::{Error, Result};
use crate::ir::op::Family;
use crate::ir::{Graph, NodeId};
use crate::kernel::Lowering;
use ctx::Ctx;
pub use ctx::{task_count, LowerOpts, Precision, Winograd, A_PANEL, ROW_PANEL};

/// Lowers every live node of `g` to kernels, in graph order.
pub fn lower(g: &mut Graph) -> Result<Lowering> {
    lower_with(g, LowerOpts::default())
}

/// `lower` for a target (`opts`).
pub fn lower_with(g: &mut Graph, opts: LowerOpts) -> Result<Lowering> {
    let order = g.order.clone();
    let uses = crate::ir::Uses::new(g);
    let mut cx = Ctx {
        uses,
        g,
        out: Lowering::default(),
        opts,
        aliases: Default::default(),
        views: Default::default(),
        written: Default::default(),
        blocked: Default::default(),
        position: order.iter().enumerate().map(|(i, &n)| (n, i)).collect(),
    };
    for n in order {
        lower_node(&mut cx, n)?;
    }
    crate::kernel::interleave::align_tasks(&mut cx.out);
    Ok(cx.out)
}

/// Checks the run-time dtype and hands the node to its family's lowering.
fn lower_node(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = &cx.g.nodes[n];
    let out = node.outputs[0];
    if !node.op.any_output_dtype() && cx.g.tensors[out].dtype != crate::ir::DType::F32 {
        return Err(Error::unsupported(
            &node.name,
            &node.onnx_op,
            format!(
                "{} arithmetic at run time (only f32 is computed at run time; integer ops are folded when their inputs are constant)",
                cx.g.tensors[out].dtype
            ),
        ));
    }
    let op = node.op.clone();
    match op.family() {
        Family::Elementwise => elementwise::lower(cx, n, &op),
        Family::Linalg => linalg::lower(cx, n, &op),
        Family::Cnn => cnn::lower(cx, n, &op),
        Family::Deconv => deconv::lower(cx, n, &op),
        Family::Nn => nn::lower(cx, n, &op),
        Family::Shape => shape::lower(cx, n, &op),
        Family::Index => index::lower(cx, n, &op),
        Family::Reduce => reduce::lower(cx, n, &op),
        Family::Resize => resize::lower(cx, n, &op),
        Family::Logic => logic::lower(cx, n, &op),
        Family::Quant => quant::lower(cx, n),
    }
}

#[cfg(test)]
mod tests {
    use super::task_count;

    #[test]
    fn task_counts_split_evenly_on_2_and_4_threads() {
        // Below 16 tasks' worth the count is a multiple of 4 where each task keeps >= MIN_WORK_PER_TASK.
        assert_eq!(task_count(1000, 200_000), 4); // was 3
        assert_eq!(task_count(1000, 100_000), 4); // was 1
        assert_eq!(task_count(1000, 5 << 16), 8);
        // Too little work for 4 tasks of MIN_WORK_PER_TASK: as many as fit, at least the plain count.
        assert_eq!(task_count(1000, 40_000), 2);
        assert_eq!(task_count(1000, 10_000), 1);
        // Large kernels: the plain count, capped by units and MAX_TASKS.
        assert_eq!(task_count(1000, 20 << 16), 20);
        assert_eq!(task_count(1000, 1 << 30), crate::kernel::MAX_TASKS);
        assert_eq!(task_count(3, 1 << 30), 3);
        assert_eq!(task_count(0, 0), 1);
    }
}
