//! Lowering of an int8 convolution to the implicit convolution (`kernel/qconv.rs`): the reorder kernel,
//! the tile kernel, and the strided copy that drops the positions past each output row. Taken by QConvs of one
//! group, equal strides up to 4, no dilation, s8 weights and a requantised output on targets with AVX-512 VNNI
//! (any channel count) or AMX (at least 32 input channels); the others keep im2col and the GEMM
//! (`quant.rs`).

use super::ctx::Ctx;
use crate::error::Result;
use crate::ir::{ConvAttrs, DType, IntProduct, NodeId, Op, Tensor, TensorId};
use crate::kernel::qconv::{QConvImplicit, QResidual, TM};
use crate::kernel::{Body, Buf, Role};

/// The implicit convolution's geometry for QConv `n` when it takes it, else `None`.
pub(super) fn spec(
    cx: &Ctx,
    n: NodeId,
    a: &ConvAttrs,
    p: &IntProduct,
    w: &[i64],
) -> Option<QConvImplicit> {
    let node = &cx.g.nodes[n];
    let (x, wt) = (node.inputs[0], node.inputs[1]);
    let (xs, ws) = (cx.shape(x), cx.shape(wt));
    let os = cx.shape(node.outputs[0]);
    let r = p.requant.as_ref()?;
    let taken = cx.opts.vnni
        && a.group == 1
        && a.strides[0] == a.strides[1]
        && (1..=4).contains(&a.strides[0])
        // A stride picks every s-th pixel with `vpermb` (VBMI, which `vnni_depthwise` implies).
        && (a.strides[0] == 1 || cx.opts.vnni_depthwise)
        && a.dilations == [1, 1]
        && a.kernel[1] <= 16
        // AMX pads each tap's channels to a 64-byte tile row; VNNI only to a quad (a stem of 3 channels is
        // one quad per tap, and its input plane far cheaper to reorder than to expand into columns).
        && (xs[1] >= 32 || !cx.opts.amx)
        && matches!(cx.g.tensors[x].dtype, DType::U8 | DType::I8)
        && matches!(r.dtype, DType::U8 | DType::I8)
        && w.iter().all(|v| (-128..=127).contains(v));
    if !taken {
        return None;
    }
    let flip = cx.g.tensors[x].dtype == DType::I8;
    let fill = (p.x_zero_point + if flip { 128 } else { 0 }) as u8;
    let s = QConvImplicit {
        n: xs[0],
        c: xs[1],
        hw: [xs[2], xs[3]],
        m: ws[0],
        kernel: a.kernel,
        pads: [a.pads[0], a.pads[1]],
        padded: [xs[2] + a.pads[0] + a.pads[2], xs[3] + a.pads[1] + a.pads[3]],
        stride: a.strides[0],
        out: [os[2], os[3]],
        x_dtype: cx.g.tensors[x].dtype,
        fill,
        y_dtype: r.dtype,
        zero_point: r.zero_point,
        clamp: r.clamp,
        amx: cx.opts.amx,
        transposed: false,
        add: None,
    };
    // Both kernels' displacements fit, and the output is what the padded plane gives.
    use crate::x86::qconv_implicit::{check, check_reorder};
    let fits = check(&s, s.mr().min(s.m), s.mr()).is_ok()
        && check_reorder(&s).is_ok()
        && s.out == [0, 1].map(|i| (s.padded[i] - s.kernel[i]) / s.stride + 1);
    if !fits {
        return None;
    }
    Some(transposed(s.clone()).unwrap_or(s))
}

/// The transposed form of VNNI convolution `s` where its position blocks would compute at least
/// [`T_WASTE`] times the outputs it keeps (7x7 planes: 64 for 49; 3x3 windows on 14x14: 224 for 196, on 28x28
/// 864 for 784) and its reduction is long enough for the heavier epilogue (at least [`T_QUADS`] channel quads
/// over the taps, or a waste of [`T_WASTE_SHORT`]), its channels come in whole blocks of `TM`, and an output
/// row holds at least four positions. Measured on Zen 4: ResNet-50's layer4 3x3 layers 690 -> 565 µs, layer2's
/// 572 -> 523; MobileNetV2's 14x14 expansions (K = 64, 96) 36 -> 43 µs transposed, hence the K bound.
fn transposed(s: QConvImplicit) -> Option<QConvImplicit> {
    use crate::x86::qconv_transposed::check;
    let t = QConvImplicit {
        transposed: true,
        ..s
    };
    let (whole, tail) = t.t_tiles().widths();
    let waste = t.block_waste();
    let ok = !t.amx
        && t.out[1] >= 4
        && waste >= T_WASTE
        && (t.taps() * t.quads() >= T_QUADS || waste >= T_WASTE_SHORT)
        && [whole, tail]
            .iter()
            .flatten()
            .all(|&r| check(&t, r).is_ok());
    ok.then_some(t)
}

/// The position blocks' waste from which the transposed kernel is taken.
const T_WASTE: f64 = 1.08;
/// The reduction (channel quads times taps) from which it is taken at that waste.
const T_QUADS: usize = 32;
/// The waste from which it is taken whatever the reduction.
const T_WASTE_SHORT: f64 = 1.25;

/// The residual QAdd that QConv `n`'s implicit convolution `s` absorbs, with the residual and the QAdd's
/// output: on VNNI, where the kernel writes the output itself (`direct`; not transposed: see
/// `x86/qconv_transposed.rs`), the QAdd is the output's only
/// reader, the residual is another tensor in the plain layout that is ready before `n` runs, and the QAdd's
/// zero point for the convolution's output is the requantisation's; never with NPU segments (`keep_tensors`).
fn residual(
    cx: &Ctx,
    n: NodeId,
    s: &QConvImplicit,
) -> Option<(NodeId, TensorId, TensorId, QResidual)> {
    let out = cx.g.nodes[n].outputs[0];
    if s.amx || s.transposed || !s.direct() || cx.opts.keep_tensors {
        return None;
    }
    let m = cx.uses.single_use(out)?;
    let add = &cx.g.nodes[m];
    let Op::QAdd(p) = &add.op else {
        return None;
    };
    let mut params = p.clone();
    let res = match add.inputs[..] {
        [a, b] if a == out && b != out => b,
        [a, b] if b == out && a != out => {
            // Addition commutes exactly in f32: the convolution becomes operand a.
            std::mem::swap(&mut params.a, &mut params.b);
            a
        }
        _ => return None,
    };
    let ready = match cx.uses.producer(res) {
        Some(r) => cx.position.get(&r)? < cx.position.get(&n)?,
        None => true,
    };
    let plain = !cx.blocked.contains_key(&res) && !cx.views.contains_key(&res);
    let dtype = cx.g.tensors[res].dtype;
    let fits = ready
        && plain
        && !params.mul
        && params.a.1 == s.zero_point
        && matches!(dtype, DType::U8 | DType::I8)
        && cx.shape(res) == cx.shape(out);
    fits.then(|| (m, res, add.outputs[0], QResidual { params, dtype }))
}

/// Pushes the three kernels of the implicit convolution `s` of QConv `n` with weights `w` (`[M, C, KH, KW]`),
/// with the residual QAdd after it fused where [`residual`] allows.
pub(super) fn lower(
    cx: &mut Ctx,
    n: NodeId,
    mut s: QConvImplicit,
    p: &IntProduct,
    w: &[i64],
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, mut out) = (node.inputs[0], node.outputs[0]);
    // With a fused add the kernel writes the QAdd's output and reads the residual.
    let fused = residual(cx, n, &s).map(|(m, res, y, add)| {
        s.add = Some(add);
        out = y;
        cx.written.insert(m);
        (Role::Residual, Buf::Tensor(res))
    });
    let name = node.name.clone();
    let r = p.requant.clone().ok_or_else(|| {
        crate::error::Error::internal("lower", "implicit int8 convolution without requantisation")
    })?;
    // The activation zero point in the u8 domain (the padding byte) folded into the bias.
    let bias = crate::kernel::qgemm::folded_bias(&p.bias, w, s.m, s.fill as i64);
    let a = match s.transposed {
        true => Tensor::ints(DType::I8, vec![s.m / TM, s.t_block()], s.pack_weights_t(w)),
        false => Tensor::ints(DType::I8, vec![s.m, s.a_row()], s.pack_weights(w)),
    };
    let a = cx.constant(format!("{name}::w_taps"), a);
    let bias = cx.constant(
        format!("{name}::bias"),
        Tensor::ints(DType::I32, vec![s.m], bias),
    );
    let scale = cx.constant(
        format!("{name}::requant_scale"),
        Tensor::f32(vec![s.m], r.scale),
    );
    let planes = cx.scratch(s.n * s.reordered_bytes());
    cx.push(
        n,
        Some("qreorder"),
        &[(Role::X, Buf::Tensor(x)), (Role::Out, planes)],
        Body::QReorder(s.clone()),
        s.n * s.c * s.hw[0] * s.hw[1],
    );
    // Written to the output itself, or to rows of the padded width that a strided copy cuts to the output's.
    let sums = match s.direct() || s.transposed {
        true => Buf::Tensor(out),
        false => cx.scratch(s.n * s.m * s.positions()),
    };
    let mut args = vec![
        (Role::A, Buf::Tensor(a)),
        (Role::B, planes),
        (Role::Out, sums),
        (Role::Bias, Buf::Tensor(bias)),
        (Role::Scale, Buf::Tensor(scale)),
    ];
    args.extend(fused);
    let macs = s.macs();
    cx.push(
        n,
        Some("qconv"),
        &args,
        Body::QConvImplicit(s.clone()),
        macs,
    );
    if s.direct() || s.transposed {
        return Ok(());
    }
    let [oh, ow] = s.out;
    let body = Body::Transpose {
        out_shape: vec![s.n, s.m, oh, ow],
        in_strides: vec![s.m * s.positions(), s.positions(), s.phase()[1], 1],
        elem: 1,
    };
    let args = [(Role::X, sums), (Role::Out, Buf::Tensor(out))];
    cx.push(n, Some("qcompact"), &args, body, s.n * s.m * oh * ow);
    Ok(())
}
