//! The entry function's interleaving of an inverted residual's expansion and its depthwise convolution. A 1x1
//! convolution whose output only a depthwise convolution reads takes its output channels in `G` row groups
//! outermost (`GemmSpec::row_groups`, `lower/cnn/mod.rs::splits_channels`), and the depthwise kernel splits by
//! channel. When every group holds a whole number of tile rows (`m / G` a multiple of 8, and for the
//! channel-blocked depthwise kernel of 16) and `G` divides both kernels' task counts, tasks
//! `[g·T/G, (g+1)·T/G)` of the GEMM write exactly the channels that the same share of the depthwise kernel's
//! tasks reads. The 1-thread entry function then runs the two kernels group by group instead of one after the
//! other, so a group's planes (MobileNetV2's 112x112 expansion: 16 of 96 channels, 800 KiB) are still in L2 when
//! the depthwise kernel reads them, instead of 4.8 MiB streamed out to L3 and back. Every value is computed by
//! the same code in the same order: the output is bitwise the same. The engine runs each pair as one op of `G`
//! tasks (`codegen::define_pair`: task g runs both kernels' share of group g); `align_tasks` rounds their task
//! counts to multiples of `G`.

use super::{Body, KernelId, Lowering, Role};

/// The group count `G` under which kernel `b` (a depthwise convolution) may run interleaved after kernel `a`
/// (the channel-splitting GEMM whose output it reads), task counts aside.
fn pair_groups(l: &Lowering, a: KernelId, b: KernelId) -> Option<usize> {
    let (ka, kb) = (&l.kernels[a], &l.kernels[b]);
    let Body::Gemm(s) = &ka.body else {
        return None;
    };
    // A transposed GEMM's rows are pixels, not the channels the depthwise kernel splits by.
    if s.transpose_out.is_some() || s.c_k16 {
        return None;
    }
    let g = s.whole_row_groups()?;
    // `ops::gemm::emit_with` takes the row groups outermost whether or not the GEMM copies B.
    if g < 2 || !s.batch.iter().all(|d| d[0] == 1) {
        return None;
    }
    let (d, block) = match &kb.body {
        Body::Depthwise(d) => (d, 1),
        Body::DepthwiseC16(d) => (d, 16),
        _ => return None,
    };
    let reads = kb
        .args
        .iter()
        .any(|x| x.role == Role::X && Some(x.buf) == ka.out());
    (reads && d.n == 1 && d.c == s.m && (s.m / g).is_multiple_of(block)).then_some(g)
}

/// `G` when kernel `b` runs interleaved after kernel `a` in the entry function (`a` directly before `b` in the
/// schedule): the pair qualifies and `G` divides both task counts.
fn groups(l: &Lowering, a: KernelId, b: KernelId) -> Option<usize> {
    let g = pair_groups(l, a, b)?;
    let divides = |k: KernelId| (l.kernels[k].tasks as usize).is_multiple_of(g);
    (divides(a) && divides(b)).then_some(g)
}

/// The pairs the entry function interleaves, walking `order` (the schedule's) as it does: `(i, G)` for kernels
/// `order[i]` and `order[i + 1]`, no kernel in two pairs. The memory plan and the entry function both read it.
pub fn pairs(l: &Lowering, order: &[KernelId]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < order.len() {
        match groups(l, order[i], order[i + 1]) {
            Some(g) => {
                out.push((i, g));
                i += 2;
            }
            None => i += 1,
        }
    }
    out
}

/// Rounds the task counts of every qualifying pair to multiples of its `G` (the nearest, at least `G`, at most
/// `kernel::MAX_TASKS` where a multiple fits under it).
pub fn align_tasks(l: &mut Lowering) {
    let ids: Vec<KernelId> = l.kernels.keys().collect();
    for (i, &a) in ids.iter().enumerate() {
        let Some(&b) = ids.get(i + 1) else { break };
        let Some(g) = pair_groups(l, a, b) else {
            continue;
        };
        for k in [a, b] {
            let t = l.kernels[k].tasks as usize;
            let mut r = ((t + g / 2) / g * g).max(g);
            if r > super::MAX_TASKS && g <= super::MAX_TASKS {
                r = super::MAX_TASKS / g * g;
            }
            l.kernels[k].tasks = r as u32;
        }
    }
}

/// The task range `[lo, hi)` of group `g` of `groups` for a kernel of `tasks` tasks (a multiple of `groups`).
pub fn group_tasks(tasks: u32, g: usize, groups: usize) -> (usize, usize) {
    let per = tasks as usize / groups;
    (g * per, (g + 1) * per)
}
