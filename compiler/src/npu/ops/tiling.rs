//! The tiling helpers every op family shares: 64-byte alignment, the tile-memory budget, the rejections for
//! working sets that do not fit, activation parameter words, and the search for the best tiling.

use super::constraint::{self, Reject};
use super::program::{Elem, OpProgram, PARAM_AREA};
use crate::ir::Activation;
use crate::npu::target::NpuTarget;

/// Rounds up to 64.
pub(crate) fn a64(x: usize) -> usize {
    x.div_ceil(64) * 64
}

/// A tile's local bytes after the parameter area.
pub(crate) fn budget(t: &NpuTarget) -> usize {
    t.local_memory_bytes as usize - PARAM_AREA as usize
}

/// A working set that does not fit a tile's local memory.
pub(crate) fn local_memory(why: String) -> Reject {
    Reject::new(&constraint::LOCAL_MEMORY, why)
}

/// An output block whose window lies outside the input (it sees only padding).
pub(crate) fn outside(why: String) -> Reject {
    Reject::new(&constraint::PADS, why)
}

/// The epilogue's activation words (9, 10) for f32.
pub(crate) fn act_words(act: Activation) -> [u32; 3] {
    match act {
        Activation::None => [0, 0, 0],
        Activation::Relu => [1, 0, 0],
        Activation::Clip(lo, hi) => [2, lo.to_bits(), hi.to_bits()],
    }
}

/// Picks the candidate with the least cost among those whose local bytes fit; `None` if none fits.
pub(crate) fn best<T: Copy>(
    cands: impl Iterator<Item = (T, usize, u64)>,
    budget: usize,
) -> Option<T> {
    cands
        .filter(|c| c.1 <= budget)
        .min_by_key(|c| c.2)
        .map(|c| c.0)
}

/// Tilings tried, best estimate first, before an op whose transfers fit no AIE-ML BD stays on the CPU.
const MAX_TILINGS: usize = 16;

/// The program of the first tiling, best estimate first, among the `(block, local bytes, estimate)`
/// candidates within `budget` whose transfers all fit AIE-ML's BDs (an int8 block of odd rows may not, where
/// another block covers whole words). `none` explains an empty choice (the `local-memory` constraint); after
/// [`MAX_TILINGS`] tilings the first one's `dma` rejection stands.
pub(crate) fn first_fit<T: Copy>(
    mut cands: Vec<(T, usize, u64)>,
    budget: usize,
    none: impl FnOnce() -> String,
    mut build: impl FnMut(T) -> Result<OpProgram, Reject>,
) -> Result<OpProgram, Reject> {
    cands.retain(|c| c.1 <= budget);
    // Stable: equal estimates keep the candidates' order.
    cands.sort_by_key(|c| c.2);
    let mut first = None;
    for &(block, _, _) in cands.iter().take(MAX_TILINGS) {
        match build(block) {
            Err(r) if std::ptr::eq(r.constraint, &constraint::DMA) => {
                first.get_or_insert(r);
            }
            done => return done,
        }
    }
    Err(first.unwrap_or_else(|| local_memory(none())))
}

/// Ranking of a block choice: estimated cycles of the op — the longer of its DMA traffic and its compute spread
/// over the tiles its `parallel` independent output blocks can occupy — then fewer work items.
pub(crate) fn est(
    t: &NpuTarget,
    elem: Elem,
    traffic: usize,
    macs: u64,
    parallel: usize,
    items: usize,
) -> u64 {
    let dma = traffic as u64 / t.dma_bytes_per_cycle as u64;
    let tiles = parallel.min(t.core_tiles().len()).max(1) as u64;
    let compute = macs / (elem.macs_per_cycle(t) * tiles);
    dma.max(compute) * 1024 + items as u64
}

/// Block-size candidates up to `n`: n itself and powers of two below it.
pub(crate) fn sizes(n: usize, cap: usize) -> Vec<usize> {
    let mut v = vec![n.min(cap)];
    let mut p = 1;
    while p < n.min(cap) {
        v.push(p);
        p *= 2;
    }
    v
}
