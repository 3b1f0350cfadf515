//! Convolutions under `--precision bf16` (`kernel/gemm_bf16.rs`): one group, batch 1, constant weights. The
//! weights become bf16 rows at compile time (the GEMM's A); the columns — im2col's, or the input itself for a
//! 1x1 stride-1 convolution — are packed into bf16 B panels at run time (`Body::PackBf16`), and the bf16 GEMM
//! computes `[M, P]` straight into the output with the bias per row, the residual and the clamp in its
//! epilogue. Without AMX, the 3x3 convolutions Winograd takes keep its f32 transforms and run its GEMMs in bf16
//! ([`winograd_gemms`]). On 7x7 and 14x14 planes both are computed transposed (pixels as rows), a convolution's
//! output then stored as channel blocks where its readers take them (`blocked.rs`), and a 1x1 convolution's
//! input, where a channel-blocked depthwise kernel writes it, converted from that kernel's blocks to bf16 rows.
//! No direct kernel: f32.

use super::super::ctx::Ctx;
use super::rules::transposed_wins;
use crate::error::Result;
use crate::ir::{Activation, ConvAttrs, DType, NodeId, Tensor};
use crate::kernel::conv::WinogradSpec;
use crate::kernel::gemm::TransposeOut;
use crate::kernel::gemm_bf16::{pack_b_transposed, pack_rows, panel_bytes, GemmBf16Spec, NR};
use crate::kernel::{Body, Buf, Role};

/// Whether convolution `n` runs in bf16: the target takes `--precision bf16`, one group, batch 1, constant
/// weights.
pub(super) fn applies(cx: &Ctx, n: NodeId, a: &ConvAttrs, nb: usize) -> bool {
    cx.opts.bf16 && a.group == 1 && nb == 1 && cx.g.constant(cx.g.nodes[n].inputs[1]).is_some()
}

/// Pushes the bf16 convolution `n` (input `xs`, output `os`, `m` output channels) with f32 weights `w`. Where
/// the pixels fill the 32-column panels badly (`rules::transposed_wins`: 7x7 and 14x14 planes) and the target
/// has no AMX, it is computed transposed, as Winograd's GEMMs are: `Yᵀ = colsᵀ·Wᵀ` with the packed columns
/// read as A, `Wᵀ` in column panels, the bias per column (and the clamp, without a residual), and the
/// transposing kernel adding the residual and clamping on the way back; or, where every reader takes channel
/// blocks (`blocked::keeps_blocks`: an expansion's depthwise convolution), the GEMM stores the blocks.
pub(super) fn lower(
    cx: &mut Ctx,
    n: NodeId,
    a: &ConvAttrs,
    (xs, os): (&[usize], &[usize]),
    m: usize,
    w: &[f32],
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let kk = xs[1] * a.kernel[0] * a.kernel[1];
    let p = os[2] * os[3];
    let (cols, _, _) = cx.conv_columns(n, a, xs, os, xs[1], None);
    let transposed = !cx.opts.amx && transposed_wins(m, p);
    let (ld, p16) = (m.next_multiple_of(NR), p.next_multiple_of(16));
    let residual = a.epilogue.residual;
    let out_t = node.outputs[0];
    let blocks = transposed && !residual && super::blocked::keeps_blocks(cx, out_t, m, p);
    // A 1x1 convolution computed transposed after a channel-blocked depthwise kernel: that kernel writes its
    // blocks, converted to bf16 rows (pixels as rows: A as it is, no panel pack).
    let pointwise = a.kernel == [1, 1] && a.strides == [1, 1] && a.pads == [0; 4];
    let in_blocks = (transposed && pointwise && a.dilations == [1, 1] && xs[1].is_multiple_of(16))
        .then(|| super::transposed::c16_blocks(cx, ins[0], xs[1], p))
        .flatten();
    let spec = GemmBf16Spec {
        m: if transposed { p } else { m },
        n: if transposed { m } else { p },
        k: kk,
        c_rs: match (transposed, blocks) {
            (_, true) => 16,
            (true, false) => ld,
            (false, _) => p,
        },
        alpha: 1.0,
        bias: transposed && a.has_bias,
        bias_row: !transposed && a.has_bias,
        residual: !transposed && residual,
        act: if transposed && residual {
            Activation::None
        } else {
            a.epilogue.act
        },
        amx: cx.opts.amx,
        batch: 1,
        c_bs: 0,
        a_panels: transposed && in_blocks.is_none(),
        c_blocks: blocks,
    };
    let kp = spec.kp();
    let panels = if let Some(x) = in_blocks {
        let rows = cx.scratch(p * kp * 2);
        let body = Body::BlocksToBf16 { c: kk, p };
        cx.push(
            n,
            Some("rowsbf16"),
            &[(Role::X, x), (Role::Out, rows)],
            body,
            kk * p,
        );
        rows
    } else {
        let panels = cx.scratch(p.div_ceil(NR) * panel_bytes(kp));
        let body = Body::PackBf16 {
            dims: [kk, p, p, kp],
            batch: [1, 0],
        };
        cx.push(
            n,
            Some("packbf16"),
            &[(Role::X, cols), (Role::Out, panels)],
            body,
            kk * p,
        );
        panels
    };
    let out = Buf::Tensor(out_t);
    let res = Buf::Tensor(ins[ins.len() - 1]);
    let work = spec.macs();
    if transposed {
        let wt = pack_b_transposed(w, m, kk, kp);
        let wt = Tensor::ints(DType::I32, vec![wt.len()], wt);
        let wt = cx.constant(format!("{}::w_bf16_t", node.name), wt);
        let ct = cx.scratch(if blocks { ld * p * 4 } else { p16 * ld * 4 });
        let mut args = vec![(Role::A, panels), (Role::B, Buf::Tensor(wt))];
        if a.has_bias {
            args.push((Role::Bias, Buf::Tensor(ins[2])));
        }
        args.push((Role::Out, ct));
        cx.push(n, Some("gemm_t"), &args, Body::GemmBf16(spec), work);
        if blocks {
            cx.blocked.insert(out_t, (ct, ld));
            return Ok(());
        }
        let mut args = vec![(Role::X, ct)];
        if residual {
            args.push((Role::Residual, res));
        }
        args.push((Role::Out, out));
        let t = TransposeOut {
            p,
            m,
            ld,
            residual,
            act: if residual {
                a.epilogue.act
            } else {
                Activation::None
            },
        };
        cx.push(n, None, &args, Body::TransposeOut { n: 1, t }, m * p);
        return Ok(());
    }
    let rows = Tensor::ints(DType::I32, vec![m, kp / 2], pack_rows(w, m, kk, kp));
    let rows = cx.constant(format!("{}::w_bf16", node.name), rows);
    let mut args = vec![
        (Role::A, Buf::Tensor(rows)),
        (Role::B, panels),
        (Role::Out, out),
    ];
    if a.has_bias {
        args.push((Role::Bias, Buf::Tensor(ins[2])));
    }
    if residual {
        args.push((Role::Residual, res));
    }
    cx.push(n, None, &args, Body::GemmBf16(spec), work);
    Ok(())
}

/// Whether Winograd's GEMMs run in bf16 rather than f32: computed transposed, or with at least one whole
/// 32-column panel of tiles. With fewer (ResNet-50's 7x7 layers: 16 tiles) computed plain, each weight pair
/// serves 16 columns and the bf16 GEMM, which streams `U` row by row, ran slower than the f32 one computed
/// transposed (1.66 against 1.43 ms, AMD EPYC Zen 4).
pub(super) fn winograd_pays(s: &WinogradSpec) -> bool {
    s.tiles_all() >= NR || transposed_wins(s.m, s.tiles_all())
}

/// Winograd's GEMMs `M[ξ] = U[ξ]·V[ξ]` (`lower_winograd` under `--precision bf16`) as one batch of bf16 GEMMs,
/// the input transform's planes `v` packed into B panels at run time, the products written into `mm` as the f32
/// GEMMs write them (`m_stride` apart). Plain, `U` (f32 `[α², M, C]`) is A, bf16 rows made at compile time.
/// `transposed` (tiles filling the 32-column panels badly: `rules::transposed_wins`) computes
/// `Mᵀ[ξ] = V[ξ]ᵀ·U[ξ]ᵀ` instead: the same packed `V` read as A (`GemmBf16Spec::a_panels`: tiles as rows, which
/// the 8-row tiles cover to within the last few rows), `Uᵀ` packed in column panels at compile time, and the
/// transposing kernel writing `M` back (planes `M·T` apart: `pad_planes` off).
pub(super) fn winograd_gemms(
    cx: &mut Ctx,
    n: NodeId,
    s: &WinogradSpec,
    u: &[f32],
    (v, mm): (Buf, Buf),
    transposed: bool,
) {
    let (m, c, t, xis) = (s.m, s.c, s.tiles_all(), s.xis());
    let name = cx.g.nodes[n].name.clone();
    let (ld, p16) = (m.next_multiple_of(NR), t.next_multiple_of(16));
    let spec = GemmBf16Spec {
        m: if transposed { t } else { m },
        n: if transposed { m } else { t },
        k: c,
        c_rs: if transposed { ld } else { t },
        alpha: 1.0,
        bias: false,
        bias_row: false,
        residual: false,
        act: Activation::None,
        amx: cx.opts.amx,
        batch: xis,
        c_bs: if transposed { p16 * ld } else { s.m_stride() },
        a_panels: transposed,
        c_blocks: false,
    };
    let kp = spec.kp();
    let packed = if transposed {
        spec.a_batch_bytes()
    } else {
        spec.b_batch_bytes()
    };
    let panels = cx.scratch(xis * packed);
    cx.push(
        n,
        Some("winograd_pack"),
        &[(Role::X, v), (Role::Out, panels)],
        Body::PackBf16 {
            dims: [c, t, t, kp],
            batch: [xis, s.v_stride()],
        },
        xis * c * t,
    );
    let per_xi = |xi: usize| &u[xi * m * c..(xi + 1) * m * c];
    let work = spec.macs();
    if !transposed {
        let rows = (0..xis)
            .flat_map(|xi| pack_rows(per_xi(xi), m, c, kp))
            .collect();
        let rows = Tensor::ints(DType::I32, vec![xis, m, kp / 2], rows);
        let rows = cx.constant(format!("{name}.W_winograd_bf16"), rows);
        let args = [
            (Role::A, Buf::Tensor(rows)),
            (Role::B, panels),
            (Role::Out, mm),
        ];
        cx.push(n, Some("winograd_gemm"), &args, Body::GemmBf16(spec), work);
        return;
    }
    // Uᵀ[ξ] ([C, M]) in column panels.
    let ut: Vec<i64> = (0..xis)
        .flat_map(|xi| pack_b_transposed(per_xi(xi), m, c, kp))
        .collect();
    let words = ut.len() / xis;
    let ut = Tensor::ints(DType::I32, vec![xis, words], ut);
    let ut = cx.constant(format!("{name}.W_winograd_bf16_t"), ut);
    let ct = cx.scratch(xis * p16 * ld * 4);
    let args = [
        (Role::A, panels),
        (Role::B, Buf::Tensor(ut)),
        (Role::Out, ct),
    ];
    cx.push(
        n,
        Some("winograd_gemm_t"),
        &args,
        Body::GemmBf16(spec),
        work,
    );
    let body = Body::TransposeOut {
        n: xis,
        t: TransposeOut {
            p: t,
            m,
            ld,
            residual: false,
            act: Activation::None,
        },
    };
    let args = [(Role::X, ct), (Role::Out, mm)];
    cx.push(n, Some("winograd_t"), &args, body, xis * m * t);
}
