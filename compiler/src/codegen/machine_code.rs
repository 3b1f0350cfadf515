//! Placing the machine-code kernels of `kernels/` in the object: `define_machine_code` (one local System V
//! function from assembled bytes), and for each GEMM-like kernel the micro-kernel variants it calls — the f32
//! AVX2 / AVX-512 ones (`define_micro`), the integer AVX2 pair ones (`define_qpair`) and the AVX-512 VNNI ones
//! (`define_qmicro`), each only in the (rows, K block, accumulate) variants the kernel's shape uses.

use super::kernels::gemm_x86::{self, MicroSpec, Simd};
use super::{kernels, ops};
use crate::error::{Error, Result};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::AbiParam;
use cranelift_module::{FuncId, Linkage, Module};

/// Places assembled machine code in the object as a local System V function of `params` i64 arguments.
pub(super) fn define_machine_code(
    module: &mut dyn Module,
    fname: &str,
    params: usize,
    bytes: std::result::Result<Vec<u8>, String>,
) -> Result<FuncId> {
    let bytes = bytes.map_err(|e| Error::internal("codegen", e))?;
    let mut sig = module.make_signature();
    sig.call_conv = cranelift_codegen::isa::CallConv::SystemV;
    for _ in 0..params {
        sig.params.push(AbiParam::new(I64));
    }
    let id = module
        .declare_function(fname, Linkage::Local, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
    module
        .define_function_bytes(id, 64, &bytes, &[])
        .map_err(|e| Error::internal("codegen", format!("define {fname}: {e}")))?;
    Ok(id)
}

/// How many steps of K ahead the micro-kernels prefetch a panel-packed B (8 KiB at 32 columns): measured on
/// ResNet-50 (AMD EPYC, AVX-512), whose 7x7 layers stream 4–9 MiB of packed weights each, 3–5 % faster than
/// without (24 and 48 gained less, 128 and 256 about as much or less).
const B_PREFETCH: usize = 64;

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
fn b_bytes(s: &ops::gemm::GemmSpec) -> usize {
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

/// `MicroSpec::c_block` of a GEMM's C: the distance between its blocks of 16 columns with `c_k16`, else 0.
fn c_block(s: &ops::gemm::GemmSpec) -> usize {
    if s.c_k16 {
        16 * s.c.cs
    } else {
        0
    }
}

/// Depth of one K block of the micro-kernel path (a column tail's packed B panel is `KC x nr` floats on the stack).
pub const KC: usize = 256;

/// The shape conditions of the micro-kernel path for tiles `nr` columns wide: a full column block, contiguous
/// columns of B and C, a reduction, and panels of B (if packed) in whole tile widths.
fn micro_shape_ok(s: &ops::gemm::GemmSpec, nr: usize) -> bool {
    let c_ok = s.c.cs == 1 || (s.c_k16 && s.c.rs == 16 && s.n.is_multiple_of(nr));
    s.n >= nr && s.b.cs == 1 && c_ok && s.k > 0 && s.b_panel.is_none_or(|p| p % nr == 0)
}

/// Whether a transposed convolution's GEMM takes its transposing epilogue fused (`gemm::TransposeOut`): the
/// AVX-512 micro-kernels cover it (the shape conditions and encodings of [`define_micro`], checked at the
/// tallest tile) and its column blocks hold whole blocks of 16 channels (`Cᵀ` padded to whole blocks,
/// `TransposeOut::ld`). Lowering asks before it fuses, so the codegen always finds the micro-kernels a fused GEMM
/// needs.
pub fn fuses_transpose(s: &ops::gemm::GemmSpec) -> bool {
    let simd = Simd::Avx512;
    let (mr, nr) = simd.tile();
    let usable =
        micro_shape_ok(s, nr) && s.n.is_multiple_of(nr) && s.m >= mr && s.b_panel.is_some();
    // Checked at the tallest tile `tile_rows` may choose (the largest displacements).
    let rows = simd.max_rows();
    let spec = MicroSpec {
        simd,
        rows,
        cols: nr,
        k: KC.min(s.k),
        a_rs: s.a_steps().0,
        a_cs: s.a_steps().1,
        b_rs: s.b_k_step(),
        c_rs: s.c.rs,
        accumulate: false,
        epi: None,
        b_prefetch: B_PREFETCH,
        prefetch_next: false,
        a_prefetch: 2 * rows,
        b_next_cols: false,
        b_copy: false,
        c_prefetch: false,
        a_k16: s.a_k16,
        c_block: c_block(s),
    };
    usable && gemm_x86::fits(&spec)
}

/// Defines the machine-code micro-kernels of GEMM kernel `i` when the target has them and the GEMM has full
/// tiles: for K blocks of `KC` and for the last, shorter block, a zeroing and an accumulating variant each, plus
/// the last block with the epilogue fused (only those the GEMM uses), for full tiles, column tails (reading a
/// packed `[k][nr]` panel) and the last `m % mr` rows.
pub(super) fn define_micro(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &ops::gemm::GemmSpec,
    simd: Simd,
) -> Result<Option<MicroIds>> {
    let nr = tile_cols(simd, s);
    let mr = tile_rows(simd, s, nr);
    let nt = tail_cols(simd, s.n % nr, nr);
    let rows_tail = s.m % mr;
    if !micro_shape_ok(s, nr) {
        return Ok(None);
    }
    let (full, tail) = (s.k / KC, s.k % KC);
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
        (KC, full > 1)
    };
    let wanted = [
        (KC, false, full > 0),
        (KC, true, full > 1),
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
            let code = kernels::gemm_strip_avx2::assemble(&spec);
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

/// The column strip of a GEMM (`kernels/gemm_strip_avx2.rs`), when it takes the column tail: AVX2, a tail of
/// at most `MAX_COLS` columns, A read in place with adjacent steps of K, whole 8-row panels of rows (the
/// driver makes every row group whole panels, `ops::gemm::emit_with`), B read in place. ResNet-50 at
/// `x86-64-v3` (AMD EPYC Zen 5): its 7x7 layers' one column past 48 cost 15–20 % of each layer as tail tiles,
/// the four columns past 192 of its 14x14 layers 5–7 %.
fn strip_spec(
    simd: Simd,
    s: &ops::gemm::GemmSpec,
    nr: usize,
    nt: usize,
) -> Option<kernels::gemm_strip_avx2::StripSpec> {
    use kernels::gemm_strip_avx2::{StripSpec, MAX_COLS, PANEL};
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
/// K = 128 (B a few KiB, held in L1 anyway) no faster.
fn b_copies(s: &ops::gemm::GemmSpec, mr: usize, nr: usize) -> bool {
    s.b_panel.is_none()
        && s.m >= 2 * mr
        && s.m <= ops::gemm::COPY_MAX_ROWS
        && s.k >= ops::gemm::COPY_MIN_K
        && s.b_k_step() != nr
}

/// The tile columns of a GEMM's micro-kernels: the variant's `nr`, or 16 (one `zmm`, two `ymm` per row) for
/// a GEMM of 16 or more columns but fewer than `nr` that reads B in place, which the full tile cannot take at
/// all (the Cranelift tile did, at ~13 GFLOP/s): an encoder's attention scores over 16 keys; on AVX2 also for
/// narrow, deep GEMMs ([`AVX2_C16_MAX_N`], [`AVX2_C16_MIN_K`]), where six-row 16-column tiles beat four-row
/// 24-column ones. Every tile shape accumulates each element over K in the same order, so results do not
/// change.
fn tile_cols(simd: Simd, s: &ops::gemm::GemmSpec) -> usize {
    let nr = simd.tile().1;
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
fn tile_rows(simd: Simd, s: &ops::gemm::GemmSpec, nr: usize) -> usize {
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

/// The epilogue a micro-kernel can apply in registers with the Cranelift epilogue's exact rounding: bias per row
/// (unscaled), the residual, and a clamp whose bounds are not signed zeros where `max`/`min` would pick the
/// other zero; `None` when there is nothing to apply or it cannot be fused.
pub(crate) fn fused_epilogue(s: &ops::gemm::GemmSpec) -> Option<gemm_x86::MicroEpi> {
    if s.alpha != 1.0 {
        return None;
    }
    let (bias, bias_col) = match &s.bias {
        None => (false, false),
        Some(b) if b.kind == ops::gemm::BiasKind::Row && b.scale == 1.0 => (true, false),
        Some(b) if b.kind == ops::gemm::BiasKind::Col && b.scale == 1.0 => (false, true),
        Some(_) => return None,
    };
    let (res_rs, res_block) = match &s.residual {
        None => (None, 0),
        Some(r) if s.res_k16 && r.rs == 16 => (Some(r.rs), 16 * r.cs),
        Some(r) if r.cs == 1 => (Some(r.rs), 0),
        Some(_) => return None,
    };
    let (lo, hi) = clamp_bits(s.act)?;
    if !bias && !bias_col && res_rs.is_none() && lo.is_none() && hi.is_none() {
        return None;
    }
    Some(gemm_x86::MicroEpi {
        bias,
        bias_col,
        res_rs,
        res_block,
        lo,
        hi,
    })
}

/// The clamp of an activation as f32 bits for `vmaxps`/`vminps`, which agree with Cranelift's `fmax`/`fmin`
/// (NaN aside, which the kernels blend back) except when a bound is a zero that `max`/`min` would swap for the
/// other zero: `None` then (not fusable).
pub(super) fn clamp_bits(act: crate::ir::Activation) -> Option<(Option<u32>, Option<u32>)> {
    use crate::ir::Activation;
    let (lo, hi) = match act {
        Activation::None => (None, None),
        Activation::Relu => (Some(0.0f32), None),
        Activation::Clip(lo, hi) => ((lo > f32::MIN).then_some(lo), (hi < f32::MAX).then_some(hi)),
    };
    if lo.is_some_and(|l| l.to_bits() == (-0.0f32).to_bits()) || hi.is_some_and(|h| h == 0.0) {
        return None;
    }
    Some((lo.map(f32::to_bits), hi.map(f32::to_bits)))
}

/// Defines the f32 depthwise row kernel (AVX-512 or AVX2, as `simd`) of depthwise kernel `i` when its rows are
/// stride 1 or 2 and have at least four interior outputs (narrower rows run in masked tails).
pub(super) fn define_dw_row_f32(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &ops::depthwise::DepthwiseSpec,
    simd: Simd,
) -> Result<Option<FuncId>> {
    let (x0, x1) = ops::depthwise::interior(
        s.hw[1],
        s.out[1],
        s.kernel[1],
        s.strides[1],
        s.dilations[1],
        s.pads[1],
    );
    let Some((lo, hi)) = clamp_bits(s.act) else {
        return Ok(None);
    };
    // Whole zero-padded planes (rows as wide as the padded plane), whole input rows with the padding masked
    // (AVX-512 edge rows), or the interior of the input's rows.
    use ops::depthwise::PlaneMode;
    let mode = ops::depthwise::plane_mode(s, simd == Simd::Avx512);
    let (padded, split, edge) = match mode {
        PlaneMode::Padded(dims) => (Some(dims), None, None),
        PlaneMode::Split { dims, half } => (Some(dims), Some(half), None),
        PlaneMode::Edge(e) => (None, None, Some(e)),
        PlaneMode::Interior => (None, None, None),
    };
    if s.strides[1] > 2 || (padded.is_none() && x1 - x0 < 4) || s.kernel[0] * s.kernel[1] > 64 {
        return Ok(None);
    }
    let left = edge.map(|_| s.pads[1]);
    // On a padded plane (or an edge-masked one) one call runs every output row (`ops/depthwise.rs`).
    let rows = padded
        .map(|p| [s.strides[0] * p[1], s.out[1]])
        .or(left.map(|_| [s.strides[0] * s.hw[1], s.out[1]]));
    let spec = kernels::depthwise_x86::DwRowF32 {
        kernel: s.kernel,
        dilations: s.dilations,
        w: padded.map_or(s.hw[1], |p| p[1]),
        stride: s.strides[1],
        bias: s.has_bias,
        lo,
        hi,
        max: false,
        rows,
        // Every rows-mode call passes the row's `ow` outputs.
        count: rows.map(|[_, ow]| ow),
        split,
        left: left.unwrap_or(0),
        right: edge.filter(|e| e.right).map(|_| s.out[1]),
    };
    define_row(module, &format!("{name}__k{i}_dwf32"), &spec, simd)
}

/// Places a row kernel (depthwise or max-pool mode) for `simd`; `None` when its shape does not assemble (the
/// kernel keeps the Cranelift path).
fn define_row(
    module: &mut dyn Module,
    fname: &str,
    spec: &kernels::depthwise_x86::DwRowF32,
    simd: Simd,
) -> Result<Option<FuncId>> {
    let code = match simd {
        Simd::Avx512 => kernels::depthwise_x86::assemble(spec),
        Simd::Avx2 => kernels::depthwise_avx2::assemble(spec),
    };
    let params = 5 + usize::from(spec.rows.is_some());
    match code {
        Ok(code) => Ok(Some(define_machine_code(module, fname, params, Ok(code))?)),
        Err(_) => Ok(None),
    }
}

/// Defines the AVX-512 max-pool row kernel (the depthwise row kernel in max mode) of pooling kernel `i`, for
/// the interior of its rows, when the stride along the row is 1 or 2 and the rows have an interior of at least
/// 16 outputs; for a 3x3 stride-2 pooling padded at the top and left, the separable whole-plane kernel instead
/// (`kernels/maxpool_x86.rs`, and on AVX2 `kernels/maxpool_avx2.rs`, its only AVX2 pooling kernel).
pub(super) fn define_pool_row(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &ops::pool::PoolSpec,
    simd: Simd,
) -> Result<Option<FuncId>> {
    if let Some(spec) = s.max3s2() {
        let code = match simd {
            Simd::Avx512 => kernels::maxpool_x86::assemble(&spec),
            Simd::Avx2 => kernels::maxpool_avx2::assemble(&spec),
        };
        return define_machine_code(module, &format!("{name}__k{i}_maxpool"), 2, code).map(Some);
    }
    if simd != Simd::Avx512 {
        // The max-pool row kernel is AVX-512 only.
        return Ok(None);
    }
    let a = &s.attrs;
    let (x0, x1) = ops::depthwise::interior(
        s.hw[1],
        s.out[1],
        a.kernel[1],
        a.strides[1],
        a.dilations[1],
        a.pads[1],
    );
    // A padded max pooling runs the row kernel over whole rows of its padded plane (`PoolSpec::padded_plane`).
    let (w, cols) = match s.padded_plane() {
        Some([_, pw]) => (pw, s.out[1]),
        None => (s.hw[1], x1 - x0),
    };
    let taps = a.kernel[0] * a.kernel[1];
    if s.kind != crate::ir::PoolKind::Max || a.strides[1] > 2 || cols < 16 || taps > 64 {
        return Ok(None);
    }
    // A padded max pooling runs every output row in one call (`ops/pool.rs`).
    let rows = s
        .padded_plane()
        .map(|[_, pw]| [a.strides[0] * pw, s.out[1]]);
    let spec = kernels::depthwise_x86::DwRowF32 {
        kernel: a.kernel,
        dilations: a.dilations,
        w,
        stride: a.strides[1],
        bias: false,
        lo: None,
        hi: None,
        max: true,
        rows,
        count: rows.map(|[_, ow]| ow),
        split: None,
        left: 0,
        right: None,
    };
    define_row(module, &format!("{name}__k{i}_maxrow"), &spec, Simd::Avx512)
}

/// Defines the transposing epilogue of kernel `i` (`kernels/transpose_x86.rs`): a `TransposeOut` kernel's, or
/// the one fused into a transposed GEMM.
pub(super) fn define_transpose(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    t: &ops::gemm::TransposeOut,
) -> Result<FuncId> {
    let (lo, hi) = clamp_bits(t.act)
        .ok_or_else(|| Error::internal("codegen", "transposed activation not a clamp"))?;
    let spec = kernels::transpose_x86::TransposeOut {
        m: t.ld,
        p: t.p,
        residual: t.residual,
        lo,
        hi,
    };
    let code = kernels::transpose_x86::assemble(&spec);
    define_machine_code(module, &format!("{name}__k{i}_transpose"), 4, code)
}

/// Defines the machine code of the convolution layout kernels (Winograd transforms, the transposing
/// epilogue) of kernel `i` for kernel set `simd`: for `WinogradIn`, `[input
/// transform, row copy, None]`; for `WinogradOut`, `[the full tile row's output transform, the variant for the
/// last tile row of a height that is not a multiple of the tile, None]`; for `TransposeOut`, `[the gather
/// epilogue, None, None]`; for `DepthwiseC16` and `ConvDirect`, `[the kernel, None, None]`. The Winograd
/// transforms and the direct convolution have AVX2 variants (`LowerOpts::avx512` keeps the others off AVX2
/// targets).
pub(super) fn define_layout(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    body: &super::kernel::Body,
    simd: Simd,
) -> Result<[Option<FuncId>; 3]> {
    use super::kernel::Body;
    use kernels::winograd_x86::{WinoIn, WinoOut};
    use kernels::{winograd4_x86, winograd_avx2, winograd_x86};
    let f = |module: &mut dyn Module, tag: &str, params, code| {
        define_machine_code(module, &format!("{name}__k{i}_{tag}"), params, code).map(Some)
    };
    match body {
        Body::WinogradIn(s) => {
            let spec = WinoIn {
                pw: s.plane()[1],
                v_stride: s.c * s.tiles_all(),
            };
            let (tag, code, copy) = match (simd, s.tile) {
                (Simd::Avx2, tile) => (
                    "wino_in",
                    winograd_avx2::assemble_in(tile, &spec, s.tiles()[1]),
                    kernels::copy_x86::assemble_avx2(1),
                ),
                (Simd::Avx512, 4) => (
                    "wino4_in",
                    winograd4_x86::assemble_in(&spec),
                    kernels::copy_x86::assemble(1),
                ),
                (Simd::Avx512, _) => (
                    "wino_in",
                    winograd_x86::assemble_in(&spec),
                    kernels::copy_x86::assemble(1),
                ),
            };
            let t = f(module, tag, 3, code)?;
            let c = f(module, "copy", 3, copy)?;
            Ok([t, c, None])
        }
        Body::WinogradOut(s) => {
            let (lo, hi) = clamp_bits(s.act)
                .ok_or_else(|| Error::internal("codegen", "Winograd activation not a clamp"))?;
            let code = |rows| {
                let spec = WinoOut {
                    m_stride: s.m * s.tiles_all(),
                    cols: s.out[1],
                    rows,
                    bias: s.has_bias,
                    lo,
                    hi,
                };
                match (simd, s.tile) {
                    (Simd::Avx2, tile) => winograd_avx2::assemble_out(tile, &spec),
                    (Simd::Avx512, 4) => winograd4_x86::assemble_out(&spec),
                    (Simd::Avx512, _) => winograd_x86::assemble_out(&spec),
                }
            };
            let full = f(module, "wino_out", 4, code(s.tile))?;
            let last = match s.out[0] % s.tile {
                0 => None,
                rows => f(module, "wino_out_last", 4, code(rows))?,
            };
            Ok([full, last, None])
        }
        Body::ConvDirect { spec, .. } => {
            let code = match simd {
                Simd::Avx512 => kernels::conv_direct_x86::assemble(spec),
                Simd::Avx2 => kernels::conv_direct_avx2::assemble(spec),
            };
            Ok([f(module, "direct", 4, code)?, None, None])
        }
        _ if simd != Simd::Avx512 => Err(Error::internal(
            "codegen",
            format!("kernel '{name}' (#{i}): its machine code needs AVX-512"),
        )),
        Body::TransposeOut { t, .. } => {
            Ok([Some(define_transpose(module, name, i, t)?), None, None])
        }
        Body::DepthwiseC16(s) => {
            let spec = ops::depthwise::c16(s)
                .ok_or_else(|| Error::internal("codegen", "channel-blocked depthwise shape"))?;
            let code = kernels::depthwise_c16_x86::assemble(&spec);
            Ok([f(module, "dwc16", 5, code)?, None, None])
        }
        _ => Ok([None; 3]),
    }
}

/// Defines the AVX2 pair micro-kernels integer GEMM `i` calls, `[full rows | tail rows][full block | last
/// block][zeroing | accumulating]` (only those it uses).
pub(super) fn define_qpair(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &ops::qgemm::QGemmSpec,
) -> Result<[[[Option<FuncId>; 2]; 2]; 2]> {
    use kernels::qgemm_x86::{assemble_avx2, MR_AVX2};
    let (nb, full, last) = ops::qgemm::pair_blocks(s);
    let mut ids = [[[None; 2]; 2]; 2];
    for (rk, rows) in [(0, MR_AVX2), (1, s.m % MR_AVX2)] {
        if rows == 0 || (rk == 0 && s.m < MR_AVX2) {
            continue;
        }
        let wanted = [
            (0, full, 0, nb > 1),
            (0, full, 1, nb > 2),
            (1, last, 0, nb == 1),
            (1, last, 1, nb > 1),
        ];
        for (bk, kp, acc, used) in wanted {
            if !used {
                continue;
            }
            let fname = format!("{name}__k{i}_pairs_{rk}{bk}{acc}");
            let code = assemble_avx2(rows, kp, s.kp(), acc == 1);
            ids[rk][bk][acc] = Some(define_machine_code(module, &fname, 3, code)?);
        }
    }
    Ok(ids)
}

/// The VNNI micro-kernels of one integer GEMM: i32-storing ones `[rows][block][accumulate]` and requantising
/// ones `[rows]`.
pub(super) type QMicroIds = ([[[Option<FuncId>; 2]; 2]; 2], [Option<FuncId>; 2]);

/// Defines the AVX-512 VNNI micro-kernels integer GEMM `i` calls, indexed `[full rows | tail rows][full block
/// | last block][zeroing | accumulating]`, and the requantising ones per row kind (only those it uses).
pub(super) fn define_qmicro(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &ops::qgemm::QGemmSpec,
) -> Result<QMicroIds> {
    use kernels::qgemm_x86::{assemble, QEpilogue, QMicroSpec, MR};
    let (_, nb, last) = ops::qgemm_vnni::blocks(s);
    let a_rs = ops::qgemm_vnni::a_rs(s);
    let define = |module: &mut dyn Module, spec: &QMicroSpec, tag: String| -> Result<FuncId> {
        let params = if spec.epilogue.is_some() { 5 } else { 3 };
        define_machine_code(
            module,
            &format!("{name}__k{i}_vnni_{tag}"),
            params,
            assemble(spec),
        )
    };
    let mut ids = [[[None; 2]; 2]; 2];
    let mut direct = [None; 2];
    let row_kinds = [(0, MR.min(s.m)), (1, s.m % MR)];
    for (rk, rows) in row_kinds {
        if rows == 0 || (rk == 0 && s.m < MR) {
            continue;
        }
        // (block kind, quads, accumulate, used)
        let wanted = [
            (0, ops::qgemm_vnni::KQB, 0, nb > 1),
            (0, ops::qgemm_vnni::KQB, 1, nb > 2),
            (1, last, 0, nb == 1),
            (1, last, 1, nb > 1),
        ];
        for (bk, kq, acc, used) in wanted {
            if !used {
                continue;
            }
            let spec = QMicroSpec {
                rows,
                kq,
                a_rs,
                accumulate: acc == 1,
                epilogue: None,
            };
            ids[rk][bk][acc] = Some(define(module, &spec, format!("{rk}{bk}{acc}"))?);
        }
        if let (true, Some(q)) = (ops::qgemm_vnni::direct(s), &s.requant) {
            let spec = QMicroSpec {
                rows,
                kq: last,
                a_rs,
                accumulate: false,
                epilogue: Some(QEpilogue {
                    c_rs: s.c.rs * s.c_dtype.size(),
                    zero_point: q.zero_point,
                    clamp: q.clamp,
                    signed: s.c_dtype == crate::ir::DType::I8,
                }),
            };
            if kernels::qgemm_x86::fits(&spec) {
                direct[rk] = Some(define(module, &spec, format!("{rk}q"))?);
            }
        }
    }
    Ok((ids, direct))
}

/// The micro-kernels of one GEMM: (KC, zeroing), (KC, accumulating), (tail, zeroing), (tail, accumulating),
/// storing into C and into the column-tail buffer.
pub(super) struct MicroIds {
    pub(super) mr: usize,
    pub(super) nr: usize,
    /// The column-tail tile's width (`tail_cols`).
    pub(super) nt: usize,
    /// The kernels were assembled with `MicroSpec::prefetch_next`.
    pub(super) prefetch_next: bool,
    pub(super) ids: [[Option<FuncId>; 5]; 4],
    /// The column strip that takes the column tail (`strip_spec`), if any.
    pub(super) strip: Option<FuncId>,
}
