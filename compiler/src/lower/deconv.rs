//! Lowering of ConvTranspose (`ir/ops/deconv.rs`): a GEMM Wᵀ·X per (batch, group) into scratch columns
//! [N, M·KH·KW, H·W], then a `col2im` kernel that folds the columns into the output (the scatter form of the
//! reference evaluation) and adds the bias.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::{NodeId, Op};
use crate::kernel::conv::Col2imSpec;
use crate::kernel::gemm::{GemmSpec, Operand};
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let Op::ConvTranspose(a) = op else {
        return Err(Error::internal("lower", "deconv lowering of another op"));
    };
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let out = node.outputs[0];
    let (xs, os) = (cx.shape(ins[0]), cx.shape(out));
    let (nb, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let m = os[1];
    let g = a.group;
    let (cg, mg) = (c / g, m / g);
    let khw = a.kernel[0] * a.kernel[1];
    let p = h * w;
    // Columns [N, M*KH*KW, H*W]: per (batch, group) a GEMM of Wᵀ [Mg*KH*KW, Cg] (W is [C, Mg, KH, KW], read
    // transposed through the operand strides) by X [Cg, H*W].
    let cols = cx.scratch(nb * m * khw * p * 4);
    let spec = GemmSpec {
        m: mg * khw,
        n: p,
        k: cg,
        kc: crate::kernel::gemm::CONV_KC,
        batch: vec![
            [nb, 0, c * p, m * khw * p, 0],
            [g, cg * mg * khw, cg * p, mg * khw * p, 0],
        ],
        a: Operand {
            arg: Role::A,
            off: 0,
            rs: 1,
            cs: mg * khw,
        },
        b: Operand {
            arg: Role::B,
            off: 0,
            rs: p,
            cs: 1,
        },
        c: Operand {
            arg: Role::Out,
            off: 0,
            rs: p,
            cs: 1,
        },
        alpha: 1.0,
        a_panel: None,
        a_k16: false,
        c_k16: false,
        res_k16: false,
        b_panel: None,
        bias: None,
        residual: None,
        act: crate::ir::Activation::None,
        transpose_out: None,
        row_groups: None,
    };
    let work = spec.macs();
    let args = [
        (Role::A, Buf::Tensor(ins[1])),
        (Role::B, Buf::Tensor(ins[0])),
        (Role::Out, cols),
    ];
    cx.push(n, Some("gemm"), &args, Body::Gemm(spec), work);
    let spec = Col2imSpec {
        n: nb,
        m,
        hw: [h, w],
        kernel: a.kernel,
        strides: a.strides,
        dilations: a.dilations,
        pads: [a.pads[0], a.pads[1]],
        out: [os[2], os[3]],
        has_bias: a.has_bias,
    };
    let mut args = vec![(Role::X, cols)];
    if a.has_bias {
        args.push((Role::Bias, Buf::Tensor(ins[2])));
    }
    args.push((Role::Out, Buf::Tensor(out)));
    cx.push(n, None, &args, Body::Col2im(spec), nb * m * khw * p);
    Ok(())
}
