//! Convolution GEMMs computed transposed, `Cᵀ = colsᵀ · Wᵀ` (pixels or Winograd tiles as rows, channels as
//! columns), for planes whose pixels fill the 32-column blocks badly: when it pays (`transposed_wins`), the
//! weights packed in column panels, A packed in row panels first where that pays, and the transposing
//! epilogue that writes the output back in NCHW, fused after each unit.

use super::super::ctx::{operand, pack_b_panels, Ctx, A_PANEL, ROW_PANEL};
use super::rules::NR;
use crate::error::{Error, Result};
use crate::ir::{Activation, ConvAttrs, NodeId, Tensor};
use crate::kernel::depthwise::C16Out;
use crate::kernel::gemm::{Bias, BiasKind, GemmSpec, Operand, TransposeOut};
use crate::kernel::{Body, Buf, KernelId, Role};

/// A convolution (one group) as `Cᵀ = colsᵀ · Wᵀ` (`push_transposed`), the bias per column, the clamp fused in
/// the GEMM when there is no residual, else added and applied after it by the transposing epilogue. Each element
/// takes the same fma chain over K and the same epilogue operations in the same order as the untransposed GEMM:
/// bitwise equal.
pub(super) fn lower_conv_transposed(
    cx: &mut Ctx,
    n: NodeId,
    a: &ConvAttrs,
    w: &[f32],
    [nb, m, p, kk]: [usize; 4],
    (cols, cols_batch, a_blocked): (Buf, usize, bool),
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let ld = m.next_multiple_of(NR);
    let wt = pack_b_panels(kk, m, NR, |p, j| w[j * kk + p]);
    let wt = cx.constant(format!("{}.W_t", node.name), Tensor::f32(vec![kk, ld], wt));
    // The GEMM's bias per column, zero-padded like the weights to whole column blocks (`TransposeOut::ld`):
    // a one-row panel packing.
    let bias = match (a.has_bias, m == ld) {
        (false, _) => None,
        (true, true) => Some(Buf::Tensor(ins[2])),
        (true, false) => {
            let b = cx.g.constant(ins[2]).map(|t| t.to_f32_vec());
            let b = b.filter(|b| b.len() >= m).ok_or_else(|| {
                let what = format!(
                    "{}: bias padded to {ld} channels not a constant of {m}",
                    node.name
                );
                Error::internal("lower", what)
            })?;
            let padded = pack_b_panels(1, m, NR, |_, j| b[j]);
            let t = cx.constant(
                format!("{}.bias_t", node.name),
                Tensor::f32(vec![ld], padded),
            );
            Some(Buf::Tensor(t))
        }
    };
    let residual = a.epilogue.residual;
    let (act, out_act) = if residual {
        (Activation::None, a.epilogue.act)
    } else {
        (a.epilogue.act, Activation::None)
    };
    let t = Transposed {
        nb,
        p,
        m,
        k: kk,
        kc: crate::kernel::gemm::CONV_KC,
        a: (cols, cols_batch),
        a_blocked,
        b: (Buf::Tensor(wt), 0),
        bias,
        act,
        residual: residual.then(|| Buf::Tensor(ins[ins.len() - 1])),
        out_act,
        out: Buf::Tensor(node.outputs[0]),
    };
    push_transposed(cx, n, t, ("gemm_t", None))
}

/// A GEMM computed transposed: `nb` products `Cᵀ [P, M] = Aᵀ · B` of K-deep operands, written back as `[M, P]`.
pub(super) struct Transposed {
    /// Batch count (images, or Winograd's α² ξ) and the rows, columns and depth of each `Cᵀ`.
    pub(super) nb: usize,
    pub(super) p: usize,
    pub(super) m: usize,
    pub(super) k: usize,
    /// The GEMM's K block depth (`GemmSpec::kc`).
    pub(super) kc: usize,
    /// A `[K, P]` per batch, read transposed (row stride 1, column stride P), and its batch stride.
    pub(super) a: (Buf, usize),
    /// A is channel blocks `[K/16, P, 16]` already (`blocked::strided_columns`), read as they are.
    pub(super) a_blocked: bool,
    /// B `[K, M]` packed in `NR`-column panels (`pack_b_panels`), and its batch stride.
    pub(super) b: (Buf, usize),
    /// Bias per column of `Cᵀ` (per output channel).
    pub(super) bias: Option<Buf>,
    /// The clamp fused in the GEMM.
    pub(super) act: Activation,
    /// Residual `[nb, M, P]` the transposing epilogue adds, then applies `out_act`.
    pub(super) residual: Option<Buf>,
    pub(super) out_act: Activation,
    /// `[nb, M, P]`.
    pub(super) out: Buf,
}

/// Whether a transposed GEMM packs A in row panels first (`Body::PackRows`): read transposed, a tile's A is
/// eight pixels (or Winograd tiles) of a row per step of K, a row apart, and every column block (`m / NR` of
/// them) fetches it again; packed, each tile's A is one sequential stream (`GemmSpec::a_panel`). Measured on an
/// Intel Xeon (Emerald Rapids, paired runs): ResNet-50's 14x14 and 7x7 1x1 layers 10–12 % faster at 1 thread and
/// 13–17 % at 2 for packs of 7–56 µs, its transposed Winograd layers 13 % with the pack; the model 4–5.5 %;
/// MobileNetV2 and EfficientNet-Lite0 1–4 % at 1 thread, unchanged at 2. A single column block reads A once:
/// no pack.
fn packs_rows(m: usize) -> bool {
    m / NR >= 2
}

/// The rows per panel of a transposed GEMM's A packed by `Body::PackRows` (K deep, P rows): [`ROW_PANEL`],
/// whose 14-row tiles read B fewer times per row, where B's K block outgrows L1 (K ≥ 128) and P fills more than
/// two such tiles; else 8-row panels, one tile's sequential stream each. Measured on ResNet-50 and
/// MobileNetV2 (Intel Xeon, paired, bitwise equal): 56-row panels made its 56x56 Winograd GEMMs (K = 64)
/// 10 % slower at 1 thread and MobileNetV2's 14x14 expansions (K = 64–96) 15 % slower at 2, and its 7x7
/// Winograd GEMMs (16 rows) packed 3.5x the rows; its other transposed GEMMs (K = 128–4608, P = 49–196)
/// 3–15 % faster.
fn row_panel(k: usize, p: usize) -> usize {
    if k >= 128 && p >= 32 {
        ROW_PANEL
    } else {
        A_PANEL
    }
}

/// Least depth of a transposed GEMM whose pixels split in two halves taken outermost (`pixel_halves`).
const HALVES_MIN_K: usize = 1024;

/// Whether a transposed GEMM of depth `k`, `ld` columns (channels) and `p` rows (pixels) takes its rows in two
/// halves outermost (`GemmSpec::row_groups`), each half's column blocks in turn, instead of column blocks
/// outermost: at 2 threads each core then reads its half of the packed A and all of B, not all of A (half of
/// which the other core packed) and half of B. Where B is at most 1.5x A's rows' worth (`ld ≤ 1.5·p`) and K is
/// deep: ResNet-50's 14x14 1024 → 256 layers (Intel Xeon, Emerald Rapids, 101 paired runs, bitwise equal) 13–15 %
/// faster at 2 threads, 0–6 % slower at 1; the model 1.7–2.0 % faster at 2 threads (layer sums), unchanged at 1.
/// EfficientNet-Lite0's 672 → 112 projections (K = 672) were 3–6 % slower at 2 threads that way, MobileNetV2's
/// K = 576 ones unchanged.
fn pixel_halves(k: usize, ld: usize, p: usize) -> bool {
    k >= HALVES_MIN_K && 2 * ld <= 3 * p
}

/// The channel-blocked depthwise kernel that writes `t`'s A, when it may write it in another layout than
/// planes: A is that kernel's output tensor, read by no other node and no graph output, with the GEMM's batch,
/// depth (channels) and rows (pixels), and still written as planes. [`push_transposed`] has it write its
/// `[P][16]` blocks (`C16Out::Blocked`), which the GEMM reads with no pack and the kernel stores with no
/// transpose: MobileNetV2's 14x14 depthwise layers 37 -> 22 µs, its projections after them as fast or faster
/// (14-row tiles where 8-row panels were), the model 2.5 % / 4 % faster at 1 / 2 threads, EfficientNet-Lite0
/// 2.4 % / 2.9 % (Intel Xeon, Emerald Rapids, paired runs, bitwise equal). Where the micro-kernels cannot take
/// that A, it writes the row panels `Body::PackRows` would pack (`C16Out::Panels`): the pack read the planes the
/// other core had written half of (at 2 threads 2-5x its 1-thread time, ~7 % of MobileNetV2).
fn c16_feeder<'a>(cx: &'a mut Ctx, t: &Transposed) -> Option<&'a mut crate::kernel::Kernel> {
    let id = c16_feeder_id(cx, t.a.0, (t.nb, t.k, t.p))?;
    Some(&mut cx.out.kernels[id])
}

/// The id of [`c16_feeder`]'s kernel for buffer `a` holding `nb` images of `k` channels on `p` pixels.
fn c16_feeder_id(cx: &Ctx, a: Buf, (nb, k, p): (usize, usize, usize)) -> Option<KernelId> {
    let Buf::Tensor(x) = a else {
        return None;
    };
    if cx.opts.keep_tensors || cx.uses.single_use(x).is_none() {
        return None;
    }
    let (id, kern) = (cx.out.kernels.iter()).find(|(_, kern)| kern.out() == Some(a))?;
    let Body::DepthwiseC16(s) = &kern.body else {
        return None;
    };
    let fits = s.out_layout == C16Out::Planes && (s.n, s.c, s.out[0] * s.out[1]) == (nb, k, p);
    fits.then_some(id)
}

/// Has depthwise kernel `k` write `layout` into `buf` instead of its output tensor.
fn redirect(k: &mut crate::kernel::Kernel, layout: C16Out, buf: Buf) {
    if let Body::DepthwiseC16(s) = &mut k.body {
        s.out_layout = layout;
    }
    for a in k.args.iter_mut().filter(|a| a.role == Role::Out) {
        a.buf = buf;
    }
}

/// Under `--precision bf16`: makes the channel-blocked depthwise kernel that alone reads into tensor `x` (one
/// image of `c` channels on `p` pixels) write its blocks `[c/16][p][16]` into a scratch buffer instead, which it
/// returns, for the bf16 block converter (`Body::BlocksToBf16`) of a 1x1 convolution computed transposed.
pub(super) fn c16_blocks(cx: &mut Ctx, x: crate::ir::TensorId, c: usize, p: usize) -> Option<Buf> {
    let id = c16_feeder_id(cx, Buf::Tensor(x), (1, c, p))?;
    let buf = cx.scratch(c * p * 4);
    redirect(&mut cx.out.kernels[id], C16Out::Blocked, buf);
    Some(buf)
}

/// Makes the kernel [`c16_feeder`] finds write `t`'s A in `layout` into `buf` instead of the tensor.
fn c16_writes(cx: &mut Ctx, t: &Transposed, layout: C16Out, buf: Buf) -> bool {
    let Some(k) = c16_feeder(cx, t) else {
        return false;
    };
    redirect(k, layout, buf);
    true
}

/// Makes the Winograd input transform that writes `t`'s A (`V`, a scratch read only by this GEMM) write it
/// in `rows`-tile row panels into `buf` (`WinogradSpec::v_panel`), when its tile rows fit whole panels: the
/// pack between them goes. ResNet-50's transposed Winograd layers (28x28 to 7x7) packed 10–19 µs each at 1
/// thread, and at 2 threads read `V` that the other core had transformed half of (in a slow phase of the host
/// 2–7x their 1-thread time); the GEMM now reads those panels itself.
fn wino_writes(cx: &mut Ctx, t: &Transposed, rows: usize) -> Option<(Buf, usize, usize)> {
    let Buf::Scratch(_) = t.a.0 else {
        return None;
    };
    let (id, k) = (cx.out.kernels.iter_mut()).find(|(_, k)| k.out() == Some(t.a.0))?;
    let Body::WinogradIn(s) = &mut k.body else {
        return None;
    };
    let fits = s.v_panel.is_none()
        && (s.xis(), s.c, s.tiles_all()) == (t.nb, t.k, t.p)
        && t.a.1 == s.c * s.tiles_all()
        && rows.is_multiple_of(s.tiles()[1]);
    if !fits {
        return None;
    }
    s.v_panel = Some(rows);
    let (stride, bytes) = (s.v_stride(), s.v_bytes());
    let buf = cx.scratch(bytes);
    for a in cx.out.kernels[id]
        .args
        .iter_mut()
        .filter(|a| a.role == Role::Out)
    {
        a.buf = buf;
    }
    Some((buf, stride, rows))
}

/// Pushes a transposed GEMM into scratch `[nb, P16, M]` (P rounded up to 16: the transposer loads whole 16x16
/// blocks of `Cᵀ`) with the transposing epilogue (`x86/transpose_out/`) into `t.out` fused after each of
/// its units (`gemm::TransposeOut`), named `NODE.names.0`; where the micro-kernels cannot take the GEMM, the
/// epilogue is a kernel of its own after it, `NODE[.names.1]`. Fused, a unit's block of `Cᵀ` is transposed from
/// this core's cache and one barrier goes: measured on this session's Intel Xeon (Emerald Rapids), the
/// separate kernel took 4.5 % of MobileNetV2 at 1 thread and 7.4 % at 2, where it read blocks another core wrote.
/// A is read as channel blocks where it is kept so (`blocked.rs`, `Transposed::a_blocked`) or where the
/// channel-blocked depthwise kernel computing it can write them (`c16_feeder`), else packed or read transposed;
/// a residual kept in blocks is added by the micro-kernels' epilogue instead of the transposer. A later reader
/// may still turn the output into blocks (`blocked::blocks`). Errors: a blocked A or residual the micro-kernels
/// cannot take (a bundlec bug: `blocked::reads_blocks` promised they could).
pub(super) fn push_transposed(
    cx: &mut Ctx,
    n: NodeId,
    t: Transposed,
    names: (&str, Option<&str>),
) -> Result<()> {
    let p16 = t.p.next_multiple_of(16);
    // `Cᵀ`'s row stride: whole column blocks (B and the bias are padded with zeros to it).
    let ld = t.m.next_multiple_of(NR);
    let spec = |a: Operand, a_panel: Option<usize>, a_batch: usize, a_k16: bool| GemmSpec {
        m: t.p,
        n: ld,
        k: t.k,
        kc: t.kc,
        batch: vec![[t.nb, a_batch, t.b.1, p16 * ld, 0]],
        a,
        a_panel,
        a_k16,
        c_k16: false,
        res_k16: false,
        b_panel: Some(NR),
        b: operand(Role::B, ld),
        c: operand(Role::Out, ld),
        alpha: 1.0,
        bias: t.bias.map(|_| Bias {
            at: operand(Role::Bias, 0),
            kind: BiasKind::Col,
            scale: 1.0,
        }),
        residual: None,
        act: t.act,
        transpose_out: None,
        row_groups: pixel_halves(t.k, ld, t.p).then_some(2),
    };
    // A as channel blocks (`GemmSpec::a_k16`) where they are kept (`blocked.rs`) or the channel-blocked
    // depthwise kernel computing A can write them, and the fused micro-kernels take them: no pack.
    let blocks = Operand::blocks(Role::A, t.p);
    let takes_blocks = |x_ld: usize| {
        t.k.is_multiple_of(16)
            && crate::x86::gemm_fit::fuses_transpose(&spec(blocks.clone(), None, x_ld * t.p, true))
    };
    // A kept in blocks by the transposed GEMM before (`blocked.rs`), read as they are.
    let x_ld = t.k.next_multiple_of(NR);
    let a_tensor = match t.a.0 {
        Buf::Tensor(x) if t.nb == 1 => Some(x),
        _ => None,
    };
    let a_blocks = match a_tensor {
        _ if t.a_blocked => Some((t.a.0, t.a.1 / t.p)).filter(|_| takes_blocks(t.k)),
        Some(x) if takes_blocks(x_ld) => super::blocked::blocks(cx, x, t.k, t.p),
        _ => None,
    };
    if t.a_blocked && a_blocks.is_none() {
        return Err(Error::internal(
            "lower",
            format!(
                "{}: columns in channel blocks but not read so",
                cx.g.nodes[n].name
            ),
        ));
    }
    if a_blocks.is_none() && a_tensor.is_some_and(|x| cx.blocked.contains_key(&x)) {
        return Err(Error::internal(
            "lower",
            format!(
                "{}: A kept in channel blocks but not read so",
                cx.g.nodes[n].name
            ),
        ));
    }
    let blocked = a_blocks.is_some() || (takes_blocks(t.k) && c16_feeder(cx, &t).is_some());
    // Else A packed in row panels first (`Body::PackRows`) where that pays (`packs_rows`).
    let packed = packs_rows(t.m);
    let (a_buf, a_batch, a, a_panel) = if let Some((x, x_ld)) = a_blocks {
        (x, x_ld * t.p, blocks.clone(), None)
    } else if blocked {
        let s = cx.scratch(t.nb * t.p * t.k * 4);
        c16_writes(cx, &t, C16Out::Blocked, s);
        (s, t.p * t.k, blocks, None)
    } else if let Some((v, stride, rows)) = packed
        .then(|| wino_writes(cx, &t, row_panel(t.k, t.p)))
        .flatten()
    {
        (v, stride, operand(Role::A, t.k), Some(rows))
    } else if packed {
        let rows = row_panel(t.k, t.p);
        // Sized for `rows`-row panels; a channel-blocked depthwise kernel writes 8-row ones.
        let s = cx.scratch(t.nb * t.p.next_multiple_of(rows) * t.k * 4);
        let panel = if c16_writes(cx, &t, C16Out::Panels(t.k), s) {
            // The kernel writes 8-pixel panels.
            const _: () = assert!(A_PANEL == 8);
            A_PANEL
        } else {
            let body = Body::PackRows {
                n: t.nb,
                k: t.k,
                p: t.p,
                panel: rows,
            };
            let x = &[(Role::X, t.a.0), (Role::Out, s)];
            let work = t.nb * t.p.next_multiple_of(rows) * t.k;
            cx.push(n, Some("pack"), x, body, work);
            rows
        };
        let pp = t.p.next_multiple_of(panel);
        (s, pp * t.k, operand(Role::A, t.k), Some(panel))
    } else {
        let a = Operand {
            arg: Role::A,
            off: 0,
            rs: 1,
            cs: t.p,
        };
        (t.a.0, t.a.1, a, None)
    };
    let mut spec = spec(a, a_panel, a_batch, blocked);
    let work = spec.macs();
    let mut epilogue = TransposeOut {
        p: t.p,
        m: t.m,
        ld,
        residual: t.residual.is_some(),
        act: t.out_act,
    };
    let fused = crate::x86::gemm_fit::fuses_transpose(&spec);
    // A residual kept in blocks (`blocked.rs`) is added in the micro-kernels' epilogue, the clamp after it.
    let mut residual = t.residual;
    if let Some(Buf::Tensor(r)) = t.residual.filter(|_| t.nb == 1) {
        if let Some((rb, _)) = super::blocked::blocks(cx, r, t.m, t.p) {
            spec.residual = Some(Operand::blocks(Role::Residual, t.p));
            spec.res_k16 = true;
            spec.act = t.out_act;
            (epilogue.residual, epilogue.act) = (false, Activation::None);
            residual = Some(rb);
            let takes = crate::kernel::gemm::fused_epilogue(&spec).is_some();
            if !fused || !takes {
                return Err(Error::internal(
                    "lower",
                    format!(
                        "{}: residual kept in channel blocks but not added so",
                        cx.g.nodes[n].name
                    ),
                ));
            }
        }
    }
    // Fused, a unit starting inside a block of 16 rows reads up to 15 rows past the last batch's P16.
    let ct = cx.scratch((t.nb * p16 + if fused { 16 } else { 0 }) * ld * 4);
    let mut args = vec![(Role::A, a_buf), (Role::B, t.b.0)];
    if let Some(bias) = t.bias {
        args.push((Role::Bias, bias));
    }
    if fused {
        spec.c.arg = Role::Scratch;
        spec.transpose_out = Some(epilogue);
        args.push((Role::Scratch, ct));
        if let Some(r) = residual {
            args.push((Role::Residual, r));
        }
        args.push((Role::Out, t.out));
        cx.push(n, Some(names.0), &args, Body::Gemm(spec), work);
        return Ok(());
    }
    args.push((Role::Out, ct));
    cx.push(n, Some(names.0), &args, Body::Gemm(spec), work);
    let mut args = vec![(Role::X, ct)];
    if let Some(r) = t.residual {
        args.push((Role::Residual, r));
    }
    args.push((Role::Out, t.out));
    let body = Body::TransposeOut {
        n: t.nb,
        t: epilogue,
    };
    cx.push(n, names.1, &args, body, t.nb * t.m * t.p);
    Ok(())
}
