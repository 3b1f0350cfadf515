//! The f32 GEMM micro-kernels' placement and shape choices: for each GEMM kernel, which tile (`tile_cols`,
//! `tile_rows`, `tail_cols`), which variants (K blocks, accumulate, column tail, row tail, B copy, fused
//! epilogue: `define_micro`), whether the AVX2 column strip takes the tail (`strip_spec`), whether a transposed
//! GEMM can fuse its transposing epilogue (`fuses_transpose`), and which epilogues fuse at all.

use super::define_machine_code;
use crate::codegen::ops;
use crate::error::Result;
use crate::kernel::gemm::fused_epilogue;
use crate::x86;
use crate::x86::gemm_fit::{c_block, micro_shape_ok, B_PREFETCH};
use crate::x86::gemm_x86::{self, MicroSpec, Simd};
use cranelift_module::{FuncId, Module};

/// GEMMs reading B in place with at least this K prefetch the next column block's B (`MicroSpec::b_next_cols`).
/// Measured on ResNet-50 (Intel Xeon, Emerald Rapids, paired runs in one process): its 1x1 layers with K of 256
/// and 512 and its 7x7 stem (K 147) 7–24 % faster at 1 thread, most also at 2; the layers with K = 64 were
/// slower with it (short K loops, whose tiles all pay the prefetches).
const B_NEXT_COLS_MIN_K: usize = 128;

/// Panel-packed B operands of at least this many bytes also have the micro-kernels prefetch the next K block
/// into L2 (`MicroSpec::prefetch_next`), shared out over the tiles of a block: B that large comes from memory every
/// inference, and without it the first tile of each block waits on 32 KiB while the others run from L1.
/// Measured (AMD EPYC, AVX-512): a chain of ResNet-50's 7x7 1x1 layers 5 % faster at 1 thread, ResNet-50 1.7 % /
/// 1.1 % at 1 / 2 threads; for every panel-packed B instead, a single such layer with its 4 MiB of weights in L3
/// got 3.5 % slower (the redundant prefetches take load slots), MobileNetV2 no faster. The bound was 2 MiB until
/// session 18; from 512 KiB (Intel Xeon, Emerald Rapids, paired, sums of per-layer 10th percentiles): the
/// 320 -> 1280 heads of MobileNetV2 and EfficientNet-Lite0 (1.6 MiB) 9 % faster, their 160 -> 320 / 192 -> 320
/// projections 6 %, MobileNetV2 1.2 % and EfficientNet-Lite0 2–3 % at 1 and 2 threads, ResNet-50 unchanged.
const PREFETCH_NEXT_MIN_BYTES: usize = 512 << 10;

/// Bytes of a GEMM's B over all batches.
fn b_bytes(s: &crate::kernel::gemm::GemmSpec) -> usize {
    s.batch.iter().map(|b| b[0]).product::<usize>() * s.k * s.n * 4
}

/// How many blocks of 16 steps of K ahead the micro-kernels prefetch a channel-blocked A (`MicroSpec::a_k16`),
/// a line per tile row each block. A tile's rows are adjacent in a block but the blocks lie `16·P` floats
/// apart, a stride the hardware prefetchers do not follow: at 2 threads half of them were written by the other
/// core (the depthwise layer splits by channels, the GEMM by pixels). Measured (Intel Xeon, Emerald Rapids,
/// paired runs, sums of per-layer 10th percentiles): EfficientNet-Lite0's projections 5 % faster at 2 threads
/// and 3 % slower at 1 than without (the prefetches take load slots the broadcasts need); the models 1.5 %
/// faster at 2 threads, 1 % slower at 1. One block ahead rather than two or four, once ResNet-50's 14x14
/// layers read blocks too (`lower/cnn/blocked.rs`; K = 1024): its transposed GEMMs 2.5 % faster at 2 threads,
/// the model 0.8 % / 1.4 % at 1 / 2 threads, EfficientNet-Lite0 and MobileNetV2 0–0.9 %.
const A_K16_PREFETCH: usize = 1;

/// Defines the machine-code micro-kernels of GEMM kernel `i` when the target has them and the GEMM has full
/// tiles: for K blocks of `GemmSpec::kc` and for the last, shorter block, a zeroing and an accumulating variant each, plus
/// the last block with the epilogue fused (only those the GEMM uses), for full tiles, column tails (reading a
/// packed `[k][nr]` panel) and the last `m % mr` rows.
pub(in crate::codegen) fn define_micro(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &crate::kernel::gemm::GemmSpec,
    simd: Simd,
) -> Result<Option<MicroIds>> {
    let nr = tile_cols(simd, s);
    let mr = tile_rows(simd, s, nr);
    let nt = tail_cols(simd, s.n % nr, nr);
    let rows_tail = s.m % mr;
    if !micro_shape_ok(s, nr) {
        return Ok(None);
    }
    let kc = s.kc;
    let (full, tail) = (s.k / kc, s.k % kc);
    let mut ids = [[None; 5]; 4];
    let epi = fused_epilogue(s);
    let trivial = s.alpha == 1.0
        && s.bias.is_none()
        && s.residual.is_none()
        && s.act == crate::ir::Activation::None;
    // Slot 4: the last K block of a full column block with the epilogue fused (set 0 only).
    let last = if tail > 0 {
        (tail, full > 0)
    } else {
        (kc, full > 1)
    };
    let wanted = [
        (kc, false, full > 0),
        (kc, true, full > 1),
        (tail, false, full == 0),
        (tail, true, full > 0 && tail > 0),
        (last.0, last.1, epi.is_some()),
    ];
    // Set 0 stores into C; set 1 into the column-tail buffer (row stride nr), needed when nr does not divide N;
    // set 2 is the last `m % mr` rows of full column blocks (a GEMV's only tile), when its epilogue is fused or
    // there is none.
    let row_tail_ok = rows_tail > 0 && (epi.is_some() || trivial);
    let prefetch_next = s.b_panel.is_some() && b_bytes(s) >= PREFETCH_NEXT_MIN_BYTES;
    // The column strip takes the column tail where it can (then set 1 is not needed).
    let strip = match strip_spec(simd, s, nr, nt) {
        Some(spec) => {
            let code = x86::gemm_strip_avx2::assemble(&spec);
            let fname = format!("{name}__k{i}_{}_strip", simd.name());
            Some(define_machine_code(module, &fname, 4, code)?)
        }
        None => None,
    };
    // A read transposed from activations: rows adjacent, a row of pixels per step of K.
    let a_transposed = s.a_panel.is_none() && s.a.rs == 1 && s.a.cs >= 16;
    let copy = b_copies(s, mr, nr);
    for (set, slot, &(k, accumulate, used)) in
        (0..4).flat_map(|set| wanted.iter().enumerate().map(move |(i, w)| (set, i, w)))
    {
        let skip = match set {
            0 => s.m < mr,
            1 => s.m < mr || s.n.is_multiple_of(nr) || slot == 4 || strip.is_some(),
            2 => !row_tail_ok,
            _ => !copy,
        };
        if !used || skip {
            continue;
        }
        // Sets 2 and 3 (full column blocks) read B in place, set 0 too unless set 3 copies B for it; set 1
        // reads the zero-padded packed panel.
        let in_place = set >= 2 || (set == 0 && !copy);
        let (c_rs, b_rs) = match (set, in_place) {
            (1, _) => (nt, nt),
            (_, true) => (s.c.rs, s.b_k_step()),
            (_, false) => (s.c.rs, nr),
        };
        let ms = MicroSpec {
            simd,
            rows: if set == 2 { rows_tail } else { mr },
            cols: if set == 1 { nt } else { nr },
            k,
            a_rs: s.a_steps().0,
            a_cs: s.a_steps().1,
            b_rs,
            c_rs,
            accumulate,
            epi: if slot == 4 { epi } else { None },
            b_prefetch: if s.b_panel.is_some() { B_PREFETCH } else { 0 },
            prefetch_next,
            a_prefetch: if a_transposed {
                2 * mr
            } else if s.a_k16 {
                A_K16_PREFETCH * 16 * s.a.cs
            } else {
                0
            },
            b_next_cols: in_place && s.b_panel.is_none() && s.k >= B_NEXT_COLS_MIN_K,
            b_copy: set == 3,
            // The fused epilogue of a GEMM writing C (and reading the residual) across rows a plane apart.
            // Measured on ResNet-50 (Intel Xeon, Emerald Rapids, paired runs): layer1's 64 -> 256 layers 12-30 %
            // faster at 1 thread (the first, whose residual the downsample layer just wrote, 1255 -> 930 us),
            // layer2's 4-7 %, the 256 -> 64 layers 6 %; ResNet-50 about 2 %.
            c_prefetch: slot == 4 && epi.is_some() && s.b_panel.is_none() && !a_transposed,
            a_k16: s.a_k16,
            c_block: if set == 1 { 0 } else { c_block(s) },
        };
        if !gemm_x86::fits(&ms) {
            return Ok(None);
        }
        let fname = format!("{name}__k{i}_{}_{set}{slot}", simd.name());
        ids[set][slot] = Some(define_machine_code(
            module,
            &fname,
            6,
            gemm_x86::assemble(&ms),
        )?);
    }
    Ok(Some(MicroIds {
        mr,
        nr,
        nt,
        prefetch_next,
        ids,
        strip,
    }))
}

/// The column strip of a GEMM (`x86/gemm_strip_avx2.rs`), when it takes the column tail: AVX2, a tail of
/// at most `MAX_COLS` columns, A read in place with adjacent steps of K, whole 8-row panels of rows (the
/// driver makes every row group whole panels, `ops::gemm::emit_with`), B read in place. ResNet-50 at
/// `x86-64-v3` (AMD EPYC Zen 5): its 7x7 layers' one column past 48 cost 15–20 % of each layer as tail tiles,
/// the four columns past 192 of its 14x14 layers 5–7 %.
fn strip_spec(
    simd: Simd,
    s: &crate::kernel::gemm::GemmSpec,
    nr: usize,
    nt: usize,
) -> Option<x86::gemm_strip_avx2::StripSpec> {
    use x86::gemm_strip_avx2::{StripSpec, MAX_COLS, PANEL};
    let cols = s.n % nr;
    let ok = simd == Simd::Avx2
        && (1..=MAX_COLS).contains(&cols)
        && s.a_panel.is_none()
        && s.a.cs == 1
        && s.m.is_multiple_of(PANEL)
        && !s.a_k16
        && s.b_panel.is_none()
        && s.transpose_out.is_none()
        && s.row_groups.is_none();
    ok.then_some(StripSpec {
        k: s.k,
        kc: s.kc,
        cols,
        a_rs: s.a.rs,
        b_rs: s.b_k_step(),
        c_rs: nt,
    })
}

/// Whether a GEMM's full column blocks copy B: the first tile of each K block reads B in place (activations,
/// rows a plane apart) and stores the contiguous `[k][nr]` panel that the block's other tiles then read
/// (`MicroSpec::b_copy`); the GEMM then takes all its rows in one group (`ops::gemm::COPY_MAX_ROWS`). Rows a
/// plane apart cost every tile L1 set conflicts and a TLB entry per step of K: the micro-kernel alone, on
/// ResNet-50's 56x56 and 28x28 1x1 shapes with B cached, ran 124 GFLOP/s reading B in place and 156 from a
/// contiguous panel (Intel Xeon, Emerald Rapids). In the model (paired runs): layer1's 256 -> 64 layers 10-16 %
/// faster, layer2's 128 -> 512 12 %, ResNet-50 3-4 % at 1 thread and 5-9 % at 2 (10th percentiles); below
/// K = 128 (B a few KiB, held in L1 anyway) no faster — except where B's rows fall on at most four offsets of a
/// 4 KiB page ([`aliased_rows`]), from K = [`COPY_MIN_K_ALIASED`].
fn b_copies(s: &crate::kernel::gemm::GemmSpec, mr: usize, nr: usize) -> bool {
    s.b_panel.is_none()
        && s.m >= 2 * mr
        && s.m <= ops::gemm::COPY_MAX_ROWS
        && (s.k >= ops::gemm::COPY_MIN_K
            || (s.k >= COPY_MIN_K_ALIASED && aliased_rows(s.b_k_step())))
        && s.b_k_step() != nr
}

/// The least K of a GEMM whose B rows are [`aliased_rows`] that copies B.
const COPY_MIN_K_ALIASED: usize = 16;

/// Whether rows `stride` floats apart fall on at most four offsets of a 4 KiB page, so that a column block's B
/// lines crowd a few L1 sets (a page's offset picks the set), which the C tiles' rows, the same stride apart,
/// crowd too: 112x112 planes (12544 floats, 1 KiB past a page multiple). MobileNetV2's 16 -> 96 expansion on
/// 112x112 (K = 16; Zen 5, paired, 10th percentiles, the engine's layers) 236 -> 205 µs at 1 thread and
/// 140 -> 115 at 2 with B copied in one row group, 348 -> 326 and 188 -> 170 at `x86-64-v3`; with its 6 row groups
/// (each copies the block again; `ops::gemm::emit_with`) 301 -> 247 and 268 -> 239 in a slow host phase,
/// EfficientNet-Lite0's 313 -> 256 and 271 -> 235, the models 2-4 % faster; the entry function, which runs
/// the expansion group by group with its depthwise layer (`kernel/interleave.rs`), within its noise. The
/// same 1x1 conv with 113 columns a row (not aliased) took 225 µs reading B in place; with K = 32 no change.
fn aliased_rows(stride: usize) -> bool {
    let offset = stride * 4 % 4096;
    offset.is_multiple_of(1024)
}

/// The tile columns of a GEMM's micro-kernels: the variant's `nr`, or 16 (one `zmm`, two `ymm` per row) for
/// a GEMM of 16 or more columns but fewer than `nr` that reads B in place, which the full tile cannot take at
/// all (the Cranelift tile did, at ~13 GFLOP/s): an encoder's attention scores over 16 keys; on AVX2 also for
/// narrow, deep GEMMs ([`AVX2_C16_MAX_N`], [`AVX2_C16_MIN_K`]), where six-row 16-column tiles beat four-row
/// 24-column ones. Every tile shape accumulates each element over K in the same order, so results do not
/// change.
fn tile_cols(simd: Simd, s: &crate::kernel::gemm::GemmSpec) -> usize {
    let nr = simd.tile().1;
    // B packed in panels another kernel set chose (a fat bundle's AVX2 set under the AVX-512 set's lowering:
    // 32-column panels): the widest tile that divides them.
    if let Some(p) = s.b_panel.filter(|p| !p.is_multiple_of(nr)) {
        let w = simd
            .widths()
            .iter()
            .rev()
            .copied()
            .find(|w| p.is_multiple_of(*w));
        return w.unwrap_or(nr);
    }
    let in_place = s.b_panel.is_none() && s.transpose_out.is_none();
    let narrow_deep =
        simd == Simd::Avx2 && (16..=AVX2_C16_MAX_N).contains(&s.n) && s.k >= AVX2_C16_MIN_K;
    if in_place && (narrow_deep || (16..nr).contains(&s.n)) {
        16
    } else {
        nr
    }
}

/// The width of a GEMM's column-tail tile for `tail` columns left after the full `nr`-wide blocks: the
/// narrowest micro-kernel width that holds them (AVX2 8, 16 or 24; AVX-512 16 or 32), so a few columns past
/// the blocks do not cost a full tile of padding — ResNet-50's and MobileNetV2's 7x7 layers (49 pixels, one
/// column past two 24-wide blocks on AVX2), their 14x14 ones (196: four past 32-wide blocks on AVX-512).
fn tail_cols(simd: Simd, tail: usize, nr: usize) -> usize {
    simd.widths()
        .iter()
        .copied()
        .find(|&w| w >= tail && w <= nr)
        .unwrap_or(nr)
}

/// The most columns (pixels, Winograd tiles) of an AVX2 GEMM that takes 16-column tiles when it is at least
/// [`AVX2_C16_MIN_K`] deep. ResNet-50 at `x86-64-v3` (AMD EPYC Zen 5, paired runs, bitwise equal), 16 against
/// 24 columns: its 14x14 1x1 layers to 1024 channels (K = 256) 7–9 % faster, its 14x14 Winograd GEMMs (49
/// tiles, K = 256) 5–12 %, its 7x7 layers 4–8 %; its 28x28 and 56x56 layers (784 and 3136 columns) 6–10 %
/// slower, and its 28x28 Winograd GEMMs (49 tiles, K = 128) 8 % slower.
const AVX2_C16_MAX_N: usize = 256;

/// The least depth of an AVX2 GEMM that takes 16-column tiles for its few columns ([`AVX2_C16_MAX_N`]).
const AVX2_C16_MIN_K: usize = 256;

/// The tile rows of a GEMM's micro-kernels: on AVX-512 the row count of [`TILE_ROWS`] (on AVX2 at 16 columns
/// [`TILE_ROWS_AVX2_16`]; at most `m`, and
/// dividing the panel of a packed A) that covers the rows at the least cost, else the variant's `mr`. A tile of
/// `r` rows takes about `max(r, 4) + TILE_STEP_COST` cycles per step of K (two FMA pipes, four cycles of latency,
/// two accumulators per row; then B's two vectors and the loop), so taller tiles read B fewer times per row —
/// the micro-kernel alone, B from L2 (K = 1024, Intel Xeon, Emerald Rapids): 8 rows 148–153 GFLOP/s, 14 rows
/// 166–171 — and a short tail costs about what a full tile does: ResNet-50's 196 pixels take 14 tiles of 14, its
/// 49 (7x7 planes, 49 Winograd tiles) three of 14 and one of 7. Ties keep the taller tile.
fn tile_rows(simd: Simd, s: &crate::kernel::gemm::GemmSpec, nr: usize) -> usize {
    let mr = simd.tile().0;
    let candidates: &[usize] = match simd {
        Simd::Avx512 => &TILE_ROWS,
        Simd::Avx2 if nr == 16 => &TILE_ROWS_AVX2_16,
        Simd::Avx2 => return mr,
    };
    let tail = |r: usize| match s.m % r {
        0 => 0,
        t => t.max(4) + TILE_STEP_COST,
    };
    let cost = |r: usize| (s.m / r) * (r.max(4) + TILE_STEP_COST) + tail(r);
    candidates
        .iter()
        .copied()
        .filter(|&r| r <= s.m.max(mr) && s.a_panel.is_none_or(|p| p.is_multiple_of(r)))
        // Row groups of whole tiles (`interleave.rs` relies on groups of exactly m / G rows).
        .filter(|&r| {
            s.whole_row_groups()
                .is_none_or(|g| (s.m / g).is_multiple_of(r))
        })
        .min_by_key(|&r| (cost(r), usize::MAX - r))
        .unwrap_or(mr)
}

/// The AVX-512 micro-kernels' row counts [`tile_rows`] chooses from.
const TILE_ROWS: [usize; 5] = [6, 7, 8, 12, 14];

/// The AVX2 micro-kernels' row counts at 16 columns (two `ymm` per row; 24-column tiles take four rows).
const TILE_ROWS_AVX2_16: [usize; 2] = [4, 6];

/// A tile's cost per step of K beyond its rows' FMAs, in cycles (`tile_rows`).
const TILE_STEP_COST: usize = 2;

/// The micro-kernels of one GEMM: (kc, zeroing), (kc, accumulating), (tail, zeroing), (tail, accumulating),
/// storing into C and into the column-tail buffer.
pub(in crate::codegen) struct MicroIds {
    pub(in crate::codegen) mr: usize,
    pub(in crate::codegen) nr: usize,
    /// The column-tail tile's width (`tail_cols`).
    pub(in crate::codegen) nt: usize,
    /// The kernels were assembled with `MicroSpec::prefetch_next`.
    pub(in crate::codegen) prefetch_next: bool,
    pub(in crate::codegen) ids: [[Option<FuncId>; 5]; 4],
    /// The column strip that takes the column tail (`strip_spec`), if any.
    pub(in crate::codegen) strip: Option<FuncId>,
}
