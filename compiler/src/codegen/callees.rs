//! The machine code a kernel function calls (`machine_code/`, `crate::x86`): per kernel, the micro-kernels,
//! row kernels, copies and transforms its body needs on the target's kernel set, defined in the module and
//! declared in the kernel's function (`Callees::define`), in a fixed order (bundles are reproducible). `body.rs`
//! passes them to the body's emitter; a kernel set without them (`generic`, aarch64) gets the Cranelift body.

use super::machine_code::{
    define_dw_row_f32, define_layout, define_machine_code, define_micro, define_pool_row,
    define_qmicro, define_qpair, define_transpose,
};
use super::ops;
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
            | Body::QReorder(_)
            | Body::QConvImplicit(_)
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
                | Body::QGemv(_)
                | Body::ToBf16 { .. }
                | Body::BlocksToBf16 { .. }
                | Body::PackBf16 { .. }
                | Body::GemmBf16(_)
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

/// Whether a LayerNorm / RMSNorm kernel takes the row kernel (`x86/norm/`):
/// per-element scale and bias (not InstanceNorm's per-row ones).
fn norm_rows(body: &Body) -> bool {
    matches!(body, Body::Norm { len, channels: None, .. } if x86::norm::supported(*len))
}

/// The machine code one kernel's body calls, by the body's family, each function declared in the kernel's
/// function; `None` where the body calls none (the Cranelift body) or the kernel set lacks it.
#[derive(Clone, Copy)]
pub(super) enum Callees {
    /// No machine code.
    None,
    /// An f32 GEMM: its micro-kernels (`None` where its shape takes none) and a transposed GEMM's fused
    /// transposing epilogue.
    Gemm(Option<ops::gemm::Micro>, Option<FuncRef>),
    /// The VNNI int8 GEMM's micro-kernels (`QGemm` with `vnni`).
    QGemmVnni(ops::qgemm_vnni::QMicro),
    /// The bf16 GEMM's micro-kernels `[full | tail rows][full | tail columns]`.
    Bf16(ops::gemm_bf16::Bf16Micro),
    /// The AVX2 int8 GEMM's pair micro-kernels (`QGemm` without `vnni`).
    QGemmPair(ops::qgemm::PairMicro),
    /// A machine-code-only body's functions (`layout_only`).
    Layout([Option<FuncRef>; 3]),
    /// A row kernel and the row copy its body may need: the f32 depthwise row kernel with a plane's row copy
    /// (`depthwise::plane_mode`), the max pooling row kernel with a padded plane's.
    Rows(Option<FuncRef>, Option<FuncRef>),
    /// One function: a row kernel (vector math, softmax, norm, QAdd, QuantizeLinear, int8 depthwise) or a copy
    /// (im2col's strided rows, a gathering transpose's blocks).
    One(FuncRef),
}

/// Where a kernel's machine code goes: the module, the names (`{name}__k{i}_...`), the kernel's function.
struct Env<'a> {
    module: &'a mut dyn Module,
    name: &'a str,
    i: usize,
    func: &'a mut Function,
}

impl Env<'_> {
    /// Declares `id` in the kernel's function.
    fn declare(&mut self, id: FuncId) -> FuncRef {
        self.module.declare_func_in_func(id, self.func)
    }
    /// Defines `code` as `{name}__k{i}_{tag}` taking `params` arguments and declares it.
    fn one(
        &mut self,
        tag: &str,
        params: usize,
        code: std::result::Result<Vec<u8>, String>,
    ) -> Result<FuncRef> {
        let fname = format!("{}__k{}_{tag}", self.name, self.i);
        let fid = define_machine_code(self.module, &fname, params, code)?;
        Ok(self.declare(fid))
    }
}

impl Callees {
    /// Defines the machine code kernel `k` (index `i` of bundle `name`) calls on kernel set `simd` and declares
    /// it in `func`, the kernel's function: one definer per family of bodies.
    pub(super) fn define(
        module: &mut dyn Module,
        name: &str,
        (i, k): (usize, &Kernel),
        simd: Option<Simd>,
        func: &mut Function,
    ) -> Result<Callees> {
        let mut env = Env {
            module,
            name,
            i,
            func,
        };
        if let Body::QGemm(s) = &k.body {
            if s.vnni {
                return qgemm_vnni(&mut env, s);
            }
        }
        match (&k.body, simd) {
            (Body::ToBf16 { .. }, Some(Simd::Avx512)) => {
                return Ok(Callees::One(env.one(
                    "tobf16",
                    4,
                    x86::gemm_bf16::assemble_convert(),
                )?));
            }
            (Body::BlocksToBf16 { c, p }, Some(Simd::Avx512)) => {
                let code = x86::gemm_bf16::assemble_blocks_to_rows(*c, *p);
                return Ok(Callees::One(env.one("blocksbf16", 2, code)?));
            }
            (Body::GemmBf16(s), Some(Simd::Avx512)) => return gemm_bf16(&mut env, s),
            (
                Body::PackBf16 {
                    dims: [k, n, rs, kp],
                    ..
                },
                Some(Simd::Avx512),
            ) => {
                let nr = crate::kernel::gemm_bf16::NR;
                let pack = |cols| x86::gemm_bf16::assemble_pack(*k, *kp, cols, *rs);
                let full = env.one("packbf16", 2, pack(nr.min(*n)))?;
                let tail = match n % nr {
                    c if c == 0 || *n < nr => None,
                    c => Some(env.one("packbf16_tail", 2, pack(c))?),
                };
                return Ok(Callees::Rows(Some(full), tail));
            }
            (
                Body::ToBf16 { .. }
                | Body::BlocksToBf16 { .. }
                | Body::PackBf16 { .. }
                | Body::GemmBf16(_),
                _,
            ) => {
                return Err(Error::internal(
                    "codegen",
                    format!(
                        "kernel '{}': the bf16 GEMM needs the AVX-512 kernel set",
                        k.name
                    ),
                ))
            }
            _ => {}
        }
        let Some(simd) = simd else {
            if layout_only(&k.body) {
                return Err(Error::internal(
                    "codegen",
                    format!(
                        "kernel '{}': its machine code needs micro-kernels (x86-64 System V)",
                        k.name
                    ),
                ));
            }
            return Ok(Callees::None);
        };
        if layout_only(&k.body) {
            let ids = define_layout(env.module, name, i, &k.body, simd)?;
            return Ok(Callees::Layout(ids.map(|id| id.map(|id| env.declare(id)))));
        }
        let avx512 = simd == Simd::Avx512;
        Ok(match &k.body {
            Body::Gemm(s) => gemm(&mut env, s, simd)?,
            Body::QGemm(s) => qgemm_pair(&mut env, s)?,
            Body::QGemv(s) if avx512 => {
                let epilogue = s.requant.as_ref().map(|q| x86::qgemm_x86::QEpilogue {
                    c_rs: 0,
                    zero_point: q.zero_point,
                    clamp: q.clamp,
                    signed: s.y_dtype == crate::ir::DType::I8,
                });
                Callees::One(env.one("gemv", 6, x86::qgemv_vnni::assemble(s.kp(), epilogue))?)
            }
            Body::QAdd { params, dtypes, .. } if avx512 => {
                let signed = dtypes.map(|d| d == crate::ir::DType::I8);
                Callees::One(env.one("qadd", 4, x86::quant_x86::assemble_qadd(params, signed))?)
            }
            Body::Quantize(q) if avx512 && !q.dequantize => {
                Callees::One(env.one("quant", 5, x86::quant_x86::assemble_quantize(q.dtype))?)
            }
            Body::Depthwise(s) => depthwise(&mut env, s, simd)?,
            Body::Pool(s) => pool(&mut env, s, simd)?,
            Body::Im2col(s) if s.bytes.is_none() && s.strides[1] <= 2 => {
                let code = match simd {
                    Simd::Avx512 => x86::copy_x86::assemble(s.strides[1]),
                    Simd::Avx2 => x86::copy_x86::assemble_avx2(s.strides[1]),
                };
                Callees::One(env.one("copy", 3, code)?)
            }
            // A gathering 32-bit transpose's 2-D blocks (`data::block_plan`).
            Body::Transpose {
                out_shape,
                in_strides,
                elem,
            } => match ops::data::block_plan(out_shape, in_strides, *elem).and_then(|p| {
                match simd {
                    Simd::Avx512 => x86::block_transpose::avx512::assemble(&p.t),
                    Simd::Avx2 => x86::block_transpose::avx2::assemble(&p.t),
                }
                .ok()
            }) {
                Some(code) => Callees::One(env.one("tblock", 2, Ok(code))?),
                None => Callees::None,
            },
            Body::Unary(op, _) if x86::vmath_x86::supported(*op) => {
                let code = match simd {
                    Simd::Avx512 => x86::vmath_x86::assemble(*op),
                    Simd::Avx2 => x86::vmath_avx2::assemble(*op),
                };
                Callees::One(env.one("vmath", 3, code)?)
            }
            Body::Softmax { len, .. } if softmax_rows(&k.body) => {
                let code = match simd {
                    Simd::Avx512 => x86::softmax_x86::assemble(*len),
                    Simd::Avx2 => x86::softmax_avx2::assemble(*len),
                };
                Callees::One(env.one("softmax", 3, code)?)
            }
            Body::Norm {
                len,
                eps,
                rms,
                has_bias,
                ..
            } if norm_rows(&k.body) => {
                let spec = x86::norm::NormRows {
                    len: *len,
                    eps: *eps,
                    rms: *rms,
                    bias: *has_bias,
                };
                let code = match simd {
                    Simd::Avx512 => x86::norm::avx512::assemble(&spec),
                    Simd::Avx2 => x86::norm::avx2::assemble(&spec),
                };
                Callees::One(env.one("norm", 5, code)?)
            }
            Body::QDepthwise(s) => match ops::qdepthwise::row_kernel(s) {
                Some(spec) => {
                    let code = match simd {
                        Simd::Avx512 if s.vnni => x86::qdepthwise_vnni::assemble(&spec),
                        Simd::Avx512 => x86::quant_x86::assemble_dw_row(&spec),
                        Simd::Avx2 if s.vnni => Err("VNNI depthwise weights on an AVX2 set".into()),
                        Simd::Avx2 => x86::quant_avx2::assemble_dw_row(&spec),
                    };
                    Callees::One(env.one("dwrow", 6, code)?)
                }
                None => Callees::None,
            },
            _ => Callees::None,
        })
    }
}

/// The bf16 GEMM's micro-kernels, one per tile kind it has.
fn gemm_bf16(env: &mut Env, s: &crate::kernel::gemm_bf16::GemmBf16Spec) -> Result<Callees> {
    use x86::gemm_bf16::Bf16Micro;
    type Assemble = fn(&Bf16Micro) -> std::result::Result<Vec<u8>, String>;
    let (assemble, mr): (Assemble, usize) = if s.amx {
        (x86::gemm_bf16_amx::assemble, x86::gemm_bf16_amx::MR)
    } else {
        (x86::gemm_bf16::assemble, x86::gemm_bf16::MR)
    };
    let clamp = match s.act {
        crate::ir::Activation::None => (None, None),
        crate::ir::Activation::Relu => (Some(0f32.to_bits()), None),
        crate::ir::Activation::Clip(lo, hi) => (Some(lo.to_bits()), Some(hi.to_bits())),
    };
    let nr = crate::kernel::gemm_bf16::NR;
    let mut micro = [[None; 2]; 2];
    for (rk, rows) in [(0, mr.min(s.m)), (1, s.m % mr)] {
        for (ck, cols) in [(0, nr.min(s.n)), (1, s.n % nr)] {
            if rows == 0 || cols == 0 || (rk == 0 && s.m < mr) || (ck == 0 && s.n < nr) {
                continue;
            }
            let m = Bf16Micro {
                rows,
                cols,
                pairs: s.kp() / 2,
                a_rs: s.a_row_bytes(),
                a_ps: s.a_pair_bytes(),
                c_rs: s.c_rs,
                c_vs: if s.c_blocks { s.m * 16 } else { 16 },
                scale: (s.alpha != 1.0).then(|| s.alpha.to_bits()),
                bias: s.bias,
                bias_row: s.bias_row,
                res_rs: s.residual.then_some(s.c_rs),
                clamp,
            };
            micro[rk][ck] = Some(env.one(&format!("bf16_{rk}{ck}"), 5, assemble(&m))?);
        }
    }
    Ok(Callees::Bf16(micro))
}

/// The VNNI int8 GEMM's micro-kernels.
fn qgemm_vnni(env: &mut Env, s: &crate::kernel::qgemm::QGemmSpec) -> Result<Callees> {
    let (funcs, direct) = define_qmicro(env.module, env.name, env.i, s)?;
    let mut r = |id: Option<FuncId>| id.map(|id| env.declare(id));
    Ok(Callees::QGemmVnni(ops::qgemm_vnni::QMicro {
        funcs: funcs.map(|x| x.map(|y| y.map(&mut r))),
        direct: direct.map(&mut r),
    }))
}

/// The AVX2 int8 GEMM's pair micro-kernels.
fn qgemm_pair(env: &mut Env, s: &crate::kernel::qgemm::QGemmSpec) -> Result<Callees> {
    let (ids, direct) = define_qpair(env.module, env.name, env.i, s)?;
    Ok(Callees::QGemmPair(ops::qgemm::PairMicro {
        funcs: ids.map(|x| x.map(|y| y.map(|id| id.map(|id| env.declare(id))))),
        direct: direct.map(|id| env.declare(id)),
    }))
}

/// An f32 GEMM: a transposed GEMM's fused transposing epilogue (`gemm::TransposeOut`), then the micro-kernels.
fn gemm(env: &mut Env, s: &crate::kernel::gemm::GemmSpec, simd: Simd) -> Result<Callees> {
    let transpose = match s.transpose_out {
        Some(t) => Some(define_transpose(env.module, env.name, env.i, &t, simd)?),
        None => None,
    }
    .map(|fid| env.declare(fid));
    let micro = define_micro(env.module, env.name, env.i, s, simd)?.map(|m| ops::gemm::Micro {
        mr: m.mr,
        nr: m.nr,
        nt: m.nt,
        kc: s.kc,
        prefetch_next: m.prefetch_next,
        funcs: m.ids.map(|set| set.map(|id| id.map(|id| env.declare(id)))),
        strip: m.strip.map(|id| env.declare(id)),
    });
    Ok(Callees::Gemm(micro, transpose))
}

/// The f32 depthwise row kernel and, for a plane that needs one (`depthwise::plane_mode`), its row copy: a
/// padded plane's rows (the deinterleaving copy on AVX-512 split planes, two stride-2 copies per row on AVX2
/// ones), or an edge plane's top and bottom buffer rows.
fn depthwise(
    env: &mut Env,
    s: &crate::kernel::depthwise::DepthwiseSpec,
    simd: Simd,
) -> Result<Callees> {
    let Some(row) =
        define_dw_row_f32(env.module, env.name, env.i, s, simd)?.map(|id| env.declare(id))
    else {
        return Ok(Callees::None);
    };
    use ops::depthwise::PlaneMode;
    let code = match (ops::depthwise::plane_mode(s, simd == Simd::Avx512), simd) {
        (PlaneMode::Split { .. }, Simd::Avx512) => {
            Some((x86::copy_x86::assemble_deinterleave(), 4, "split"))
        }
        (PlaneMode::Split { .. }, Simd::Avx2) => Some((x86::copy_x86::assemble_avx2(2), 3, "copy")),
        (PlaneMode::Edge(e), _) if e.buffers == [0, 0] => None,
        (PlaneMode::Padded(_) | PlaneMode::Edge(_), Simd::Avx512) => {
            Some((x86::copy_x86::assemble(1), 3, "copy"))
        }
        (PlaneMode::Padded(_) | PlaneMode::Edge(_), Simd::Avx2) => {
            Some((x86::copy_x86::assemble_avx2(1), 3, "copy"))
        }
        (PlaneMode::Interior, _) => None,
    };
    let copy = match code {
        Some((code, params, tag)) => Some(env.one(tag, params, code)?),
        None => None,
    };
    Ok(Callees::Rows(Some(row), copy))
}

/// The max pooling row kernel and, for a padded max pooling on AVX-512 (`PoolSpec::padded_plane`), the row copy
/// into its stack plane.
fn pool(env: &mut Env, s: &crate::kernel::pool::PoolSpec, simd: Simd) -> Result<Callees> {
    let Some(row) =
        define_pool_row(env.module, env.name, env.i, s, simd)?.map(|id| env.declare(id))
    else {
        return Ok(Callees::None);
    };
    let copy = if simd == Simd::Avx512 && s.padded_plane().is_some() && s.max3s2().is_none() {
        Some(env.one("copy", 3, x86::copy_x86::assemble(1))?)
    } else {
        None
    };
    Ok(Callees::Rows(Some(row), copy))
}
