//! A kernel function's body: the emitter of its `Body` (`ops/<family>.rs`) with the machine code it calls
//! (`callees.rs`), or the Cranelift emitter alone where the kernel set has none (`emit_body`).

use super::builder::Kb;
use super::callees::Callees;
use super::machine_code::transpose_channels;
use super::ops;
use crate::kernel::{Body, Kernel};
use crate::x86::gemm_x86::Simd;

/// Emits kernel `k`'s body with the machine code `c` it calls on kernel set `simd`. False when a body that
/// exists only as machine code lacks it (a bundlec bug the caller reports).
pub(super) fn emit_kernel(kb: &mut Kb, k: &Kernel, c: &Callees, simd: Option<Simd>) -> bool {
    let per_call = || transpose_channels(simd.unwrap_or(Simd::Avx512));
    match (&k.body, *c) {
        (Body::Gemm(s), c) if s.transpose_out.is_some() => match c {
            Callees::Gemm(Some(m), Some(t)) => {
                ops::gemm::emit_with(kb, s, k.tasks, Some(m), Some((t, per_call())))
            }
            _ => return false,
        },
        (Body::Gemm(s), Callees::Gemm(Some(m), _)) => {
            ops::gemm::emit_with(kb, s, k.tasks, Some(m), None)
        }
        (Body::QGemm(s), Callees::QGemmVnni(mk)) => ops::qgemm_vnni::emit(kb, s, k.tasks, &mk),
        (Body::QGemv(s), Callees::One(f)) => ops::qgemm_vnni::emit_gemv(kb, s, k.tasks, Some(f)),
        (Body::ToBf16 { dims }, Callees::One(f)) => {
            ops::gemm_bf16::emit_to_bf16(kb, *dims, k.tasks, f)
        }
        (Body::BlocksToBf16 { c, p }, Callees::One(f)) => {
            ops::gemm_bf16::emit_blocks_to_bf16(kb, [*c, *p], k.tasks, f)
        }
        (Body::GemmBf16(s), Callees::Bf16(m)) => ops::gemm_bf16::emit_gemm(kb, s, k.tasks, &m),
        (Body::PackBf16 { dims, batch }, Callees::Rows(Some(full), tail)) => {
            ops::gemm_bf16::emit_pack(kb, *dims, *batch, k.tasks, full, tail)
        }
        (Body::QGemm(s), Callees::QGemmPair(p)) => ops::qgemm::emit_with(kb, s, k.tasks, Some(p)),
        (Body::WinogradIn(s), c) => match c {
            Callees::Layout([Some(f), Some(copy), _]) => {
                ops::winograd::emit_in(kb, s, k.tasks, f, copy)
            }
            _ => return false,
        },
        (Body::TransposeOut { n, t }, c) => match c {
            Callees::Layout([Some(f), _, _]) => {
                ops::data::emit_transpose_out(kb, [*n, t.p, t.m, t.ld], k.tasks, (f, per_call()))
            }
            _ => return false,
        },
        (Body::DepthwiseC16(s), c) => match (c, crate::x86::depthwise_c16_x86::c16(s)) {
            (Callees::Layout([Some(f), _, _]), Some(spec)) => {
                ops::depthwise::emit_c16(kb, s, &spec, k.tasks, f)
            }
            _ => return false,
        },
        (Body::QReorder(s), c) => match c {
            Callees::Layout([Some(f), last, _]) => {
                ops::qconv_implicit::emit_reorder(kb, s, k.tasks, f, last)
            }
            _ => return false,
        },
        (Body::QConvImplicit(s), c) => match c {
            Callees::Layout([full, last, _]) if full.is_some() || last.is_some() => {
                ops::qconv_implicit::emit_conv(kb, s, k.tasks, full, last)
            }
            _ => return false,
        },
        (Body::ConvDirect { n, spec }, c) => match c {
            Callees::Layout([Some(f), _, _]) => ops::conv::emit_direct(kb, *n, spec, k.tasks, f),
            _ => return false,
        },
        (Body::WinogradOut(s), c) => match c {
            Callees::Layout([Some(f2), f1, _]) => ops::winograd::emit_out(kb, s, k.tasks, f2, f1),
            _ => return false,
        },
        (Body::Pool(s), Callees::Rows(row @ Some(_), copy)) => {
            ops::pool::emit_pool(kb, s, k.tasks, row, copy)
        }
        (Body::Im2col(s), Callees::One(f)) => ops::conv::emit_im2col(kb, s, k.tasks, Some(f)),
        (
            Body::Transpose {
                out_shape,
                in_strides,
                elem,
            },
            Callees::One(f),
        ) => match ops::data::block_plan(out_shape, in_strides, *elem) {
            Some(plan) => ops::data::emit_transpose_blocks(kb, &plan, k.tasks, f),
            None => return false,
        },
        (Body::Softmax { outer, len, .. }, Callees::One(f)) => {
            ops::nn::emit_softmax_rows(kb, *outer, *len, k.tasks, f)
        }
        (
            Body::Norm {
                rows,
                len,
                channels: None,
                has_bias,
                ..
            },
            Callees::One(f),
        ) => ops::nn::emit_norm_rows(kb, *rows, *len, *has_bias, k.tasks, f),
        (Body::Unary(op, len), Callees::One(f)) => {
            ops::elementwise::emit_unary_with(kb, *op, *len, k.tasks, Some(f))
        }
        (Body::Depthwise(s), Callees::Rows(row @ Some(_), copy)) => {
            let avx512 = simd == Some(Simd::Avx512);
            ops::depthwise::emit_depthwise(kb, s, k.tasks, row, copy, avx512)
        }
        (Body::Quantize(s), Callees::One(f)) => {
            ops::quant::emit_quantize_with(kb, s, k.tasks, Some(f))
        }
        (Body::QDepthwise(s), Callees::One(f)) => {
            ops::qdepthwise::emit_with(kb, s, k.tasks, Some(f), simd == Some(Simd::Avx2))
        }
        (
            Body::QAdd {
                params,
                dtypes,
                len,
            },
            Callees::One(f),
        ) => ops::quant::emit_qadd_with(kb, params, *dtypes, *len, k.tasks, Some(f)),
        _ => emit_body(kb, &k.body, k.tasks),
    }
    true
}

/// The Cranelift body of a kernel, calling no machine code.
fn emit_body(kb: &mut Kb, body: &Body, tasks: u32) {
    match body {
        Body::Gemm(s) => ops::gemm::emit(kb, s, tasks),
        Body::QGemm(s) => ops::qgemm::emit(kb, s, tasks),
        Body::QGemv(s) => ops::qgemm_vnni::emit_gemv(kb, s, tasks, None),
        Body::Quantize(s) => ops::quant::emit_quantize(kb, s, tasks),
        Body::QDepthwise(s) => ops::qdepthwise::emit(kb, s, tasks),
        Body::QAdd {
            params,
            dtypes,
            len,
        } => ops::quant::emit_qadd(kb, params, *dtypes, *len, tasks),
        Body::QGlobalAvg {
            params,
            dtype,
            planes,
            size,
        } => ops::quant::emit_qgap(kb, params, *dtype, [*planes, *size], tasks),
        Body::Im2col(s) => ops::conv::emit_im2col(kb, s, tasks, None),
        Body::PackRows { n, k, p, panel } => {
            ops::conv::emit_pack_rows(kb, [*n, *k, *p], *panel, tasks)
        }
        Body::Col2im(s) => ops::conv::emit_col2im(kb, s, tasks),
        Body::SubsampleBlocks {
            c,
            hw,
            strides,
            out,
        } => ops::conv::emit_subsample_blocks(kb, *c, [*hw, *strides, *out], tasks),
        // Machine code only: `define_kernels` handles them (and fails without it) before reaching here.
        Body::WinogradIn(_)
        | Body::WinogradOut(_)
        | Body::TransposeOut { .. }
        | Body::DepthwiseC16(_)
        | Body::ConvDirect { .. }
        | Body::QReorder(_)
        | Body::QConvImplicit(_)
        | Body::ToBf16 { .. }
        | Body::BlocksToBf16 { .. }
        | Body::PackBf16 { .. }
        | Body::GemmBf16(_) => {}
        Body::Depthwise(s) => ops::depthwise::emit_depthwise(kb, s, tasks, None, None, false),
        Body::Logic {
            kind,
            out_shape,
            strides,
        } => ops::logic::emit_logic(kb, *kind, out_shape, strides, tasks),
        Body::Binary(s) => ops::elementwise::emit_binary(kb, s, tasks),
        Body::Unary(op, len) => ops::elementwise::emit_unary_with(kb, *op, *len, tasks, None),
        Body::Affine { planes, c, inner } => {
            ops::elementwise::emit_affine(kb, *planes, *c, *inner, tasks)
        }
        Body::Pool(s) => ops::pool::emit_pool(kb, s, tasks, None, None),
        Body::GlobalAvg {
            planes,
            size,
            blocked,
        } => match blocked {
            false => ops::pool::emit_global_avg(kb, *planes, *size, tasks),
            true => ops::pool::emit_global_avg_blocked(kb, *planes, *size, tasks),
        },
        Body::Softmax {
            outer,
            len,
            inner,
            log,
        } => ops::nn::emit_softmax(kb, *outer, *len, *inner, *log, tasks),
        Body::Convert { from, to, len } => ops::data::emit_convert(kb, *from, *to, *len, tasks),
        Body::IndexMap {
            out_shape,
            tab_at,
            elem,
            fill,
            contig_from,
        } => ops::data::emit_index_map(kb, out_shape, tab_at, *elem, *fill, *contig_from, tasks),
        Body::Gather {
            outer,
            n,
            k,
            inner,
            elem,
            idx_elem,
        } => ops::data::emit_gather(kb, *outer, *n, *k, *inner, *elem, *idx_elem, tasks),
        Body::Reduce {
            kind,
            outer,
            len,
            inner,
        } => ops::reduce::emit_reduce(kb, *kind, *outer, *len, *inner, tasks),
        Body::ArgReduce {
            max,
            last,
            outer,
            len,
            inner,
        } => ops::reduce::emit_arg(kb, *max, *last, *outer, *len, *inner, tasks),
        Body::TopK {
            dtype,
            largest,
            indices,
            k,
            outer,
            len,
            inner,
        } => ops::reduce::emit_topk(
            kb,
            (*dtype, *largest, *indices),
            *k,
            (*outer, *len, *inner),
            tasks,
        ),
        Body::Norm {
            rows,
            len,
            eps,
            rms,
            channels,
            has_bias,
        } => ops::nn::emit_norm(kb, *rows, *len, *eps, *rms, *channels, *has_bias, tasks),
        Body::Lrn { n, c, inner, attrs } => ops::nn::emit_lrn(kb, *n, *c, *inner, attrs, tasks),
        Body::Resample {
            outer,
            n_in,
            n_out,
            inner,
            taps,
        } => ops::nn::emit_resample(kb, *outer, *n_in, *n_out, *inner, *taps, tasks),
        Body::Copy(len) => ops::data::emit_copy(kb, *len, tasks),
        Body::Transpose {
            out_shape,
            in_strides,
            elem,
        } => ops::data::emit_transpose(kb, out_shape, in_strides, *elem, tasks),
        Body::Concat { outer, blocks } => ops::data::emit_concat(kb, *outer, blocks, tasks),
    }
}
