//! Winograd convolution's lowering (`ops/winograd.rs`): which 3x3 convolutions take F(4x4, 3x3) or F(2x2, 3x3),
//! and the input transform, the GEMM per ξ (computed transposed where its tiles fill the column blocks badly)
//! and the output transform they become.

use super::super::ctx::{operand, pack_b_panels, Ctx, Winograd};
use super::rules::{transposed_wins, NR};
use super::transposed::{push_transposed, Transposed};
use crate::error::Result;
use crate::ir::{Activation, ConvAttrs, NodeId, Tensor};
use crate::kernel::conv::transform_weights;
use crate::kernel::conv::WinogradSpec;
use crate::kernel::gemm::GemmSpec;
use crate::kernel::{Body, Buf, Role};

/// The Winograd geometry of a convolution when the target has the transforms and it pays: a 3x3, stride-1,
/// undilated, one-group convolution without a residual whose activation is a clamp, with at least 16 input and
/// output channels (else the transforms dominate), and whose planes and strides fit the kernels, as
/// `--winograd` asks. `f4`: F(4x4, 3x3) where it has at least 32 tiles per channel and its GEMMs do at most 3/4
/// of F(2x2)'s multiply-adds (ResNet-50's 56x56 and 28x28 layers); else, and for `f2` and `auto`, F(2x2, 3x3)
/// with at least 16 tiles per channel (its 14x14 layers, where F(4x4)'s 16 tiles would stream 2.25 times the
/// weights for 0.73 of the work, and its 7x7 ones: 4x4 tiles, computed transposed, 1.15 -> 0.8 ms each on AMD
/// EPYC for 16/9 the direct GEMM's weight bytes).
pub(super) fn winograd_spec(
    cx: &Ctx,
    a: &ConvAttrs,
    xs: &[usize],
    os: &[usize],
    m: usize,
) -> Option<WinogradSpec> {
    let plain = a.kernel == [3, 3] && a.strides == [1, 1] && a.dilations == [1, 1] && a.group == 1;
    let clamp = crate::kernel::gemm::clamp_bits(a.epilogue.act).is_some();
    if !cx.opts.micro_kernels || !plain || a.epilogue.residual || !clamp {
        return None;
    }
    let f2 = WinogradSpec {
        n: xs[0],
        c: xs[1],
        m,
        hw: [xs[2], xs[3]],
        pads: [a.pads[0], a.pads[1]],
        out: [os[2], os[3]],
        has_bias: a.has_bias,
        act: a.epilogue.act,
        tile: 2,
        v_panel: None,
        pad_planes: false,
    };
    let f4 = WinogradSpec {
        tile: 4,
        ..f2.clone()
    };
    let per_image = |s: &WinogradSpec| s.tiles()[0] * s.tiles()[1];
    let fits = |s: &WinogradSpec| {
        let [ph, pw] = s.plane();
        let bytes = |floats: usize| floats.checked_mul(s.xis() * 4);
        let small = |b: Option<usize>| b.is_some_and(|b| b < i32::MAX as usize);
        ph * pw * 4 <= 256 << 10
            && small(bytes(s.c * s.tiles_all()))
            && small(bytes(s.m * s.tiles_all()))
    };
    let pays4 = per_image(&f4) >= 32 && 4 * f4.xis() * per_image(&f4) <= 3 * 16 * per_image(&f2);
    let s = match cx.opts.winograd {
        Winograd::Off => return None,
        Winograd::F2 => f2,
        Winograd::F4 if pays4 && fits(&f4) => f4,
        Winograd::F4 => f2,
        // F(4x4)'s error is 6-7 times F(2x2)'s and 4-5 times the im2col GEMM's (scripts/winograd_accuracy.py);
        // F(2x2)'s is below the GEMM's (each ξ sums C products, not 9C).
        Winograd::Auto => f2,
    };
    let ok =
        s.c >= 16 && m >= 16 && per_image(&s) >= 16 && fits(&s) && s.pads[0] <= 2 && s.pads[1] <= 2;
    ok.then_some(s)
}

/// Least input channels (the GEMMs' K) of a Winograd convolution whose GEMMs are computed transposed: below it
/// the pack of `V` and the transposing epilogue, which cost per element of `V` and `M`, outweigh the wasted
/// columns of the GEMM's K steps. ResNet-50's 56x56 layers (F(4x4): 196 tiles, K = 64; Intel Xeon, Emerald
/// Rapids, paired runs, bitwise equal): transform, pack and GEMM 1140 -> 940 µs at 1 thread for the first,
/// 3.4 -> 2.8 ms for the three, 1.83 -> 1.60 ms at 2 threads; the model 1.2 % / 0.7 % faster at 1 / 2 threads.
/// Its 28x28, 14x14 and 7x7 layers (K ≥ 128, 49 or 16 tiles) are far slower untransposed.
const TRANSPOSED_MIN_K: usize = 128;

/// A convolution as Winograd F(2x2, 3x3) (`ops/winograd.rs`): the input transform into scratch `V`, a GEMM
/// per ξ of the compile-time transformed weights `U` by `V` into scratch `M`, the output transform with bias
/// and clamp into the output. When the tiles fill the GEMM's 32-column blocks badly (`transposed_wins`:
/// ResNet-50's 28x28 and 14x14 layers, 49 tiles in 64 columns) and K is deep enough (`TRANSPOSED_MIN_K`),
/// each GEMM is computed transposed, `Mᵀ[ξ] = V[ξ]ᵀ · U[ξ]ᵀ` (tiles as rows, `Uᵀ` packed in column panels at
/// compile time), and the block-transposing kernel writes `M` back: the same fma chains, so the output is
/// bitwise the same. With `bf16` (`--precision bf16`) the GEMMs are bf16 ones (`bf16::winograd_gemms`), computed
/// transposed where `transposed_wins` whatever K.
pub(super) fn lower_winograd(
    cx: &mut Ctx,
    n: NodeId,
    s: WinogradSpec,
    w: &[f32],
    bf16: bool,
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (c, m, t, xis) = (s.c, s.m, s.tiles_all(), s.xis());
    let u = transform_weights(w, m, c, s.tile);
    let transposed = !bf16 && cx.opts.avx512 && transposed_wins(m, t) && c >= TRANSPOSED_MIN_K;
    // The bf16 GEMMs computed transposed (`bf16::winograd_gemms`) where the tiles fill panels badly.
    let bf16_t = bf16 && transposed_wins(m, t);
    let s = WinogradSpec {
        pad_planes: !transposed && !bf16_t,
        ..s
    };
    let (u, u_shape) = if transposed {
        // Per ξ, Uᵀ [C, M] in column panels.
        let packed = (0..xis)
            .flat_map(|xi| pack_b_panels(c, m, NR, |p, j| u[(xi * m + j) * c + p]))
            .collect();
        (packed, vec![xis, c, m.next_multiple_of(NR)])
    } else {
        (u, vec![xis, m, c])
    };
    let v = cx.scratch(s.v_bytes());
    let x = Buf::Tensor(node.inputs[0]);
    cx.push(
        n,
        Some("winograd_in"),
        &[(Role::X, x), (Role::Out, v)],
        Body::WinogradIn(s.clone()),
        xis * c * t,
    );
    let mm = cx.scratch(s.m_bytes());
    if bf16 {
        super::bf16::winograd_gemms(cx, n, &s, &u, (v, mm), bf16_t);
    } else if transposed {
        let u = cx.constant(format!("{}.W_winograd", node.name), Tensor::f32(u_shape, u));
        let tr = Transposed {
            nb: xis,
            p: t,
            m,
            k: c,
            kc: crate::kernel::gemm::WINOGRAD_KC,
            a: (v, c * t),
            a_blocked: false,
            b: (Buf::Tensor(u), c * m.next_multiple_of(NR)),
            bias: None,
            act: Activation::None,
            residual: None,
            out_act: Activation::None,
            out: mm,
        };
        push_transposed(cx, n, tr, ("winograd_gemm_t", Some("winograd_t")))?;
    } else {
        let u = cx.constant(format!("{}.W_winograd", node.name), Tensor::f32(u_shape, u));
        let spec = GemmSpec {
            m,
            n: t,
            k: c,
            kc: crate::kernel::gemm::WINOGRAD_KC,
            batch: vec![[xis, m * c, s.v_stride(), s.m_stride(), 0]],
            a: operand(Role::A, c),
            a_panel: None,
            a_k16: false,
            c_k16: false,
            res_k16: false,
            b_panel: None,
            b: operand(Role::B, t),
            c: operand(Role::Out, t),
            alpha: 1.0,
            bias: None,
            residual: None,
            act: Activation::None,
            transpose_out: None,
            row_groups: None,
        };
        let work = spec.macs();
        let args = [(Role::A, Buf::Tensor(u)), (Role::B, v), (Role::Out, mm)];
        cx.push(n, Some("winograd_gemm"), &args, Body::Gemm(spec), work);
    }
    let ins = &node.inputs;
    let mut args = vec![(Role::X, mm)];
    if s.has_bias {
        args.push((Role::Bias, Buf::Tensor(ins[2])));
    }
    args.push((Role::Out, Buf::Tensor(node.outputs[0])));
    let work = xis * m * t;
    cx.push(n, None, &args, Body::WinogradOut(s), work);
    Ok(())
}
