//! The machine code a kernel function calls (`machine_code/`, `crate::x86`): per kernel, the micro-kernels,
//! row kernels, copies and transforms its body needs on the target's kernel set, defined in the module and
//! declared in the kernel's function (`Callees::define`), in a fixed order (bundles are reproducible). `body.rs`
//! passes them to the body's emitter; a kernel set without them (`generic`, aarch64) gets the Cranelift body.

use super::machine_code::{
    define_dw_row_f32, define_layout, define_machine_code, define_micro, define_pool_row,
    define_qmicro, define_qpair, define_transpose,
};
use super::{ops, KC};
use crate::error::{Error, Result};
use crate::kernel::{Body, Kernel};
use crate::x86::{self, gemm_x86::Simd};
use cranelift_codegen::ir::{FuncRef, Function};
use cranelift_module::{FuncId, Module};

/// Bodies whose work is all machine code (`machine_code::define_layout`): the Winograd transforms (AVX2 or
/// AVX-512), the transposing epilogue, the channel-blocked depthwise kernel and the direct convolution
/// (AVX-512 only).
fn layout_only(body: &Body) -> bool {
    matches!(
        body,
        Body::WinogradIn(_)
            | Body::WinogradOut(_)
            | Body::TransposeOut { .. }
            | Body::DepthwiseC16(_)
            | Body::ConvDirect { .. }
    )
}

/// Whether a kernel's code depends on the machine-code micro-kernel set (`simd`): the GEMMs, im2col (its
/// strided row copy), max pooling, the depthwise, QAdd and QuantizeLinear kernels, gathering transposes and softmaxes over
/// contiguous rows; the others are the same Cranelift code for every set.
pub(super) fn uses_micro_kernels(body: &Body) -> bool {
    layout_only(body)
        || matches!(
            body,
            Body::Gemm(_)
                | Body::Im2col(_)
                | Body::Pool(_)
                | Body::QGemm(_)
                | Body::QAdd { .. }
                | Body::Depthwise(_)
                | Body::QDepthwise(_)
        )
        || matches!(body, Body::Quantize(q) if !q.dequantize)
        || matches!(body, Body::Unary(op, _) if x86::vmath_x86::supported(*op))
        || softmax_rows(body)
        || norm_rows(body)
        || matches!(body, Body::Transpose { out_shape, in_strides, elem }
            if ops::data::block_plan(out_shape, in_strides, *elem).is_some())
}

/// Whether a Softmax kernel takes the row kernel (`x86/softmax_x86.rs`, on AVX2 `softmax_avx2.rs`):
/// contiguous rows, not LogSoftmax.
fn softmax_rows(body: &Body) -> bool {
    matches!(body, Body::Softmax { len, inner: 1, log: false, .. }
        if x86::softmax_x86::supported(*len))
}

/// Whether a LayerNorm / RMSNorm kernel takes the row kernel (`x86/norm_x86.rs`, on AVX2 `norm_avx2.rs`):
/// per-element scale and bias (not InstanceNorm's per-row ones).
fn norm_rows(body: &Body) -> bool {
    matches!(body, Body::Norm { len, channels: None, .. } if x86::norm_x86::supported(*len))
}

/// The machine code one kernel's body calls, each declared in its function; `None` where the body does not
/// use it or the kernel set lacks it.
#[derive(Clone, Copy)]
pub(super) struct Callees {
    /// The VNNI int8 GEMM's micro-kernels (`QGemm` with `vnni`).
    pub qmicro: Option<ops::qgemm_vnni::QMicro>,
    /// The AVX2 int8 GEMM's pair micro-kernels (`QGemm` without `vnni`).
    pub pair: Option<ops::qgemm::PairMicro>,
    /// The quantised add's row kernel (AVX-512).
    pub qadd: Option<FuncRef>,
    /// The f32 depthwise row kernel.
    pub dw_f32: Option<FuncRef>,
    /// A machine-code-only body's functions (`layout_only`).
    pub layout: Option<[Option<FuncRef>; 3]>,
    /// A transposed GEMM's fused transposing epilogue (`gemm::TransposeOut`).
    pub transpose: Option<FuncRef>,
    /// The max pooling row kernel.
    pub max_row: Option<FuncRef>,
    /// A row copy: im2col's strided rows, a depthwise plane's rows, a padded max pooling's plane, or a
    /// gathering transpose's 2-D blocks.
    pub copy: Option<FuncRef>,
    /// The vector math row kernel of a unary op, the softmax row kernel, or the norm row kernel.
    pub vmath: Option<FuncRef>,
    /// The int8 depthwise row kernel (AVX-512 or AVX2).
    pub dw_row: Option<FuncRef>,
    /// The QuantizeLinear row kernel (AVX-512).
    pub quantize: Option<FuncRef>,
    /// The f32 GEMM's micro-kernels.
    pub micro: Option<ops::gemm::Micro>,
}

impl Callees {
    /// Defines the machine code kernel `k` (index `i` of bundle `name`) calls on kernel set `simd` and declares
    /// it in `func`, the kernel's function.
    pub(super) fn define(
        module: &mut dyn Module,
        name: &str,
        (i, k): (usize, &Kernel),
        simd: Option<Simd>,
        func: &mut Function,
    ) -> Result<Callees> {
        let qmicro = match &k.body {
            Body::QGemm(s) if s.vnni => {
                let (funcs, direct) = define_qmicro(module, name, i, s)?;
                let mut r =
                    |id: Option<FuncId>| id.map(|id| module.declare_func_in_func(id, &mut *func));
                Some(ops::qgemm_vnni::QMicro {
                    funcs: funcs.map(|x| x.map(|y| y.map(&mut r))),
                    direct: direct.map(&mut r),
                })
            }
            _ => None,
        };
        let pair = match (&k.body, simd) {
            (Body::QGemm(s), Some(_)) if !s.vnni => {
                let (ids, direct) = define_qpair(module, name, i, s)?;
                Some(ops::qgemm::PairMicro {
                    funcs: ids.map(|x| {
                        x.map(|y| {
                            y.map(|id| id.map(|id| module.declare_func_in_func(id, &mut *func)))
                        })
                    }),
                    direct: direct.map(|id| module.declare_func_in_func(id, &mut *func)),
                })
            }
            _ => None,
        };
        let qadd = match (&k.body, simd) {
            (Body::QAdd { params, dtypes, .. }, Some(Simd::Avx512)) => {
                let signed = dtypes.map(|d| d == crate::ir::DType::I8);
                let code = x86::quant_x86::assemble_qadd(params, signed);
                let fid = define_machine_code(module, &format!("{name}__k{i}_qadd"), 4, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            _ => None,
        };
        let quantize = match (&k.body, simd) {
            (Body::Quantize(q), Some(Simd::Avx512)) if !q.dequantize => {
                let code = x86::quant_x86::assemble_quantize(q.dtype);
                let fid = define_machine_code(module, &format!("{name}__k{i}_quant"), 5, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            _ => None,
        };
        let dw_f32 = match (&k.body, simd) {
            (Body::Depthwise(s), Some(simd)) => define_dw_row_f32(module, name, i, s, simd)?
                .map(|fid| module.declare_func_in_func(fid, &mut *func)),
            _ => None,
        };
        let layout = match (layout_only(&k.body), simd) {
            (true, Some(simd)) => {
                let ids = define_layout(module, name, i, &k.body, simd)?;
                Some(ids.map(|id| id.map(|id| module.declare_func_in_func(id, &mut *func))))
            }
            (true, _) => {
                return Err(Error::internal(
                    "codegen",
                    format!(
                        "kernel '{}': its machine code needs micro-kernels (x86-64 System V)",
                        k.name
                    ),
                ))
            }
            (false, _) => None,
        };
        // A transposed GEMM's fused transposing epilogue (`gemm::TransposeOut`).
        let transpose = match (&k.body, simd) {
            (Body::Gemm(s), Some(simd)) => match s.transpose_out {
                Some(t) => Some(define_transpose(module, name, i, &t, simd)?),
                None => None,
            },
            _ => None,
        }
        .map(|fid| module.declare_func_in_func(fid, &mut *func));
        let max_row = match (&k.body, simd) {
            (Body::Pool(s), Some(simd)) => define_pool_row(module, name, i, s, simd)?
                .map(|fid| module.declare_func_in_func(fid, &mut *func)),
            _ => None,
        };
        let copy = match (&k.body, simd) {
            (Body::Im2col(s), Some(simd)) if s.bytes.is_none() && s.strides[1] <= 2 => {
                let code = match simd {
                    Simd::Avx512 => x86::copy_x86::assemble(s.strides[1]),
                    Simd::Avx2 => x86::copy_x86::assemble_avx2(s.strides[1]),
                };
                let fid = define_machine_code(module, &format!("{name}__k{i}_copy"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            // The depthwise plane's row copies (`depthwise::plane_mode`): a padded plane's rows (the
            // deinterleaving copy on AVX-512 split planes, two stride-2 copies per row on AVX2 ones), or an edge
            // plane's top and bottom buffer rows.
            (Body::Depthwise(s), Some(simd)) if dw_f32.is_some() => {
                use ops::depthwise::PlaneMode;
                let code = match (ops::depthwise::plane_mode(s, simd == Simd::Avx512), simd) {
                    (PlaneMode::Split { .. }, Simd::Avx512) => {
                        Some((x86::copy_x86::assemble_deinterleave(), 4, "split"))
                    }
                    (PlaneMode::Split { .. }, Simd::Avx2) => {
                        Some((x86::copy_x86::assemble_avx2(2), 3, "copy"))
                    }
                    (PlaneMode::Edge(e), _) if e.buffers == [0, 0] => None,
                    (PlaneMode::Padded(_) | PlaneMode::Edge(_), Simd::Avx512) => {
                        Some((x86::copy_x86::assemble(1), 3, "copy"))
                    }
                    (PlaneMode::Padded(_) | PlaneMode::Edge(_), Simd::Avx2) => {
                        Some((x86::copy_x86::assemble_avx2(1), 3, "copy"))
                    }
                    (PlaneMode::Interior, _) => None,
                };
                match code {
                    Some((code, params, tag)) => {
                        let fname = format!("{name}__k{i}_{tag}");
                        let fid = define_machine_code(module, &fname, params, code)?;
                        Some(module.declare_func_in_func(fid, &mut *func))
                    }
                    None => None,
                }
            }
            // A gathering 32-bit transpose's 2-D blocks (`data::block_plan`).
            (
                Body::Transpose {
                    out_shape,
                    in_strides,
                    elem,
                },
                Some(simd),
            ) => match ops::data::block_plan(out_shape, in_strides, *elem).and_then(|p| {
                match simd {
                    Simd::Avx512 => x86::block_transpose::avx512::assemble(&p.t),
                    Simd::Avx2 => x86::block_transpose::avx2::assemble(&p.t),
                }
                .ok()
            }) {
                Some(code) => {
                    let fid =
                        define_machine_code(module, &format!("{name}__k{i}_tblock"), 2, Ok(code))?;
                    Some(module.declare_func_in_func(fid, &mut *func))
                }
                None => None,
            },
            // The padded max pooling's row copy into its stack plane (`PoolSpec::padded_plane`).
            (Body::Pool(s), Some(Simd::Avx512))
                if max_row.is_some() && s.padded_plane().is_some() && s.max3s2().is_none() =>
            {
                let code = x86::copy_x86::assemble(1);
                let fid = define_machine_code(module, &format!("{name}__k{i}_copy"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            _ => None,
        };
        let vmath = match (&k.body, simd) {
            (Body::Unary(op, _), Some(simd)) if x86::vmath_x86::supported(*op) => {
                let code = match simd {
                    Simd::Avx512 => x86::vmath_x86::assemble(*op),
                    Simd::Avx2 => x86::vmath_avx2::assemble(*op),
                };
                let fid = define_machine_code(module, &format!("{name}__k{i}_vmath"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            (Body::Softmax { len, .. }, Some(simd)) if softmax_rows(&k.body) => {
                let code = match simd {
                    Simd::Avx512 => x86::softmax_x86::assemble(*len),
                    Simd::Avx2 => x86::softmax_avx2::assemble(*len),
                };
                let fid = define_machine_code(module, &format!("{name}__k{i}_softmax"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            (
                Body::Norm {
                    len,
                    eps,
                    rms,
                    has_bias,
                    ..
                },
                Some(simd),
            ) if norm_rows(&k.body) => {
                let spec = x86::norm_x86::NormRows {
                    len: *len,
                    eps: *eps,
                    rms: *rms,
                    bias: *has_bias,
                };
                let code = match simd {
                    Simd::Avx512 => x86::norm_x86::assemble(&spec),
                    Simd::Avx2 => x86::norm_avx2::assemble(&spec),
                };
                let fid = define_machine_code(module, &format!("{name}__k{i}_norm"), 5, code)?;
                Some(module.declare_func_in_func(fid, &mut *func))
            }
            _ => None,
        };
        let dw_row = match (&k.body, simd) {
            (Body::QDepthwise(s), Some(simd)) => {
                match ops::qdepthwise::row_kernel(s, simd == Simd::Avx512) {
                    Some(spec) => {
                        let code = match simd {
                            Simd::Avx512 => x86::quant_x86::assemble_dw_row(&spec),
                            Simd::Avx2 => x86::quant_avx2::assemble_dw_row(&spec),
                        };
                        let fid =
                            define_machine_code(module, &format!("{name}__k{i}_dwrow"), 6, code)?;
                        Some(module.declare_func_in_func(fid, &mut *func))
                    }
                    None => None,
                }
            }
            _ => None,
        };
        let micro = match (&k.body, simd) {
            (Body::Gemm(s), Some(simd)) => {
                define_micro(module, name, i, s, simd)?.map(|m| ops::gemm::Micro {
                    mr: m.mr,
                    nr: m.nr,
                    nt: m.nt,
                    kc: KC,
                    prefetch_next: m.prefetch_next,
                    funcs: m.ids.map(|set| {
                        set.map(|id| id.map(|id| module.declare_func_in_func(id, &mut *func)))
                    }),
                    strip: m
                        .strip
                        .map(|id| module.declare_func_in_func(id, &mut *func)),
                })
            }
            _ => None,
        };
        Ok(Callees {
            qmicro,
            pair,
            qadd,
            dw_f32,
            layout,
            transpose,
            max_row,
            copy,
            vmath,
            dw_row,
            quantize,
            micro,
        })
    }
}
