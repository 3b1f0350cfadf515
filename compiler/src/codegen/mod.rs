//! CPU code generation with Cranelift. `isa` picks the target and its ISA features; `lower` turns graph nodes
//! into kernels; `ops/<family>.rs` generate each kernel's body through the `Kb` builder; this file defines one
//! function per kernel, `fn(args: *const *mut u8, task: u64)`, and the entry function
//! `int NAME(uint8_t *constants, uint8_t *mutables, uint8_t *activations)` that runs every task of every kernel
//! in schedule order on the calling thread; `machine_code/` places the iced-x86 micro-kernels the kernels call.
//!
//! ```text
//!   Graph ──lower──► [Kernel] ──schedule/plan──► per-kernel fn + entry fn ──cranelift-object──► NAME.o
//! ```

pub mod builder;
pub mod dispatch;
pub mod interleave;
pub mod isa;
pub mod kernel;
pub mod kernels;
pub mod lower;
mod machine_code;
pub mod math;
pub mod ops;

use crate::error::{Error, Result};
use crate::plan::{MemoryPlan, Schedule};
use builder::Kb;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, Signature, StackSlotData, StackSlotKind, UserFuncName,
};
use cranelift_codegen::Context;
use cranelift_entity::{EntityRef, PrimaryMap};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};
use kernel::{Body, KernelId, Lowering};
use kernels::gemm_x86::Simd;
pub use machine_code::KC;
use machine_code::{
    define_dw_row_f32, define_layout, define_machine_code, define_micro, define_pool_row,
    define_qmicro, define_qpair, define_transpose,
};

/// Declares an entry function `name(constants, mutables, activations) -> i32` (the exported entry, a fat bundle's
/// local per-set entries and its dispatcher) and returns its id and a `Function` to fill.
pub fn declare_entry(
    module: &mut dyn Module,
    name: &str,
    linkage: Linkage,
) -> Result<(FuncId, Function)> {
    let mut sig = module.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(I64));
    }
    sig.returns.push(AbiParam::new(I32));
    let id = module
        .declare_function(name, linkage, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare entry {name}: {e}")))?;
    let func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    Ok((id, func))
}

/// The signature of a kernel function.
pub fn kernel_signature(module: &dyn Module) -> Signature {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.params.push(AbiParam::new(I64));
    sig
}

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
/// strided row copy), max pooling, the depthwise and QAdd kernels, gathering transposes and short-row
/// softmaxes; the others are the same Cranelift code for every set.
fn uses_micro_kernels(body: &Body) -> bool {
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
        || matches!(body, Body::Unary(op, _) if kernels::vmath_x86::supported(*op))
        || softmax_rows(body)
        || matches!(body, Body::Transpose { out_shape, in_strides, elem }
            if ops::data::block_plan(out_shape, in_strides, *elem).is_some())
}

/// Whether a Softmax kernel takes the AVX-512 row kernel (`kernels/softmax_x86.rs`) on that kernel set:
/// contiguous rows short enough, not LogSoftmax.
fn softmax_rows(body: &Body) -> bool {
    matches!(body, Body::Softmax { len, inner: 1, log: false, .. }
        if kernels::softmax_x86::supported(*len))
}

/// Defines one local function per kernel (and the machine-code micro-kernels they call); returns the kernel
/// functions' ids indexed like `l.kernels`. With `shared` (a fat bundle's second set), kernels that do not use
/// micro-kernels are not compiled again: their ids are taken from `shared`.
pub fn define_kernels(
    module: &mut dyn Module,
    name: &str,
    l: &Lowering,
    has_fma: bool,
    simd: Option<Simd>,
    shared: Option<&PrimaryMap<KernelId, FuncId>>,
) -> Result<PrimaryMap<KernelId, FuncId>> {
    let sig = kernel_signature(module);
    let mut ids = PrimaryMap::with_capacity(l.kernels.len());
    let mut fctx = FunctionBuilderContext::new();
    let mut ctx = Context::new();
    for (ki, k) in l.kernels.iter() {
        let i = ki.index();
        if let Some(id) = shared
            .and_then(|s| s.get(ki))
            .filter(|_| !uses_micro_kernels(&k.body))
        {
            ids.push(*id);
            continue;
        }
        let fname = format!("{name}__k{i}");
        let id = module
            .declare_function(&fname, Linkage::Local, &sig)
            .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
        ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig.clone());
        let qmicro = match &k.body {
            Body::QGemm(s) if s.vnni => {
                let (funcs, direct) = define_qmicro(module, name, i, s)?;
                let mut r = |id: Option<FuncId>| {
                    id.map(|id| module.declare_func_in_func(id, &mut ctx.func))
                };
                Some(ops::qgemm_vnni::QMicro {
                    funcs: funcs.map(|x| x.map(|y| y.map(&mut r))),
                    direct: direct.map(&mut r),
                })
            }
            _ => None,
        };
        let pair = match (&k.body, simd) {
            (Body::QGemm(s), Some(_)) if !s.vnni => {
                let ids = define_qpair(module, name, i, s)?;
                Some(ops::qgemm::PairMicro {
                    funcs: ids.map(|x| {
                        x.map(|y| {
                            y.map(|id| id.map(|id| module.declare_func_in_func(id, &mut ctx.func)))
                        })
                    }),
                })
            }
            _ => None,
        };
        let qadd = match (&k.body, simd) {
            (Body::QAdd { params, dtypes, .. }, Some(Simd::Avx512)) => {
                let signed = dtypes.map(|d| d == crate::ir::DType::I8);
                let code = kernels::quant_x86::assemble_qadd(params, signed);
                let fid = define_machine_code(module, &format!("{name}__k{i}_qadd"), 4, code)?;
                Some(module.declare_func_in_func(fid, &mut ctx.func))
            }
            _ => None,
        };
        let dw_f32 = match (&k.body, simd) {
            (Body::Depthwise(s), Some(simd)) => define_dw_row_f32(module, name, i, s, simd)?
                .map(|fid| module.declare_func_in_func(fid, &mut ctx.func)),
            _ => None,
        };
        let layout = match (layout_only(&k.body), simd) {
            (true, Some(simd)) => {
                let ids = define_layout(module, name, i, &k.body, simd)?;
                Some(ids.map(|id| id.map(|id| module.declare_func_in_func(id, &mut ctx.func))))
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
            (Body::Gemm(s), Some(Simd::Avx512)) => match s.transpose_out {
                Some(t) => Some(define_transpose(module, name, i, &t)?),
                None => None,
            },
            _ => None,
        }
        .map(|fid| module.declare_func_in_func(fid, &mut ctx.func));
        let max_row = match (&k.body, simd) {
            (Body::Pool(s), Some(simd)) => define_pool_row(module, name, i, s, simd)?
                .map(|fid| module.declare_func_in_func(fid, &mut ctx.func)),
            _ => None,
        };
        let copy = match (&k.body, simd) {
            (Body::Im2col(s), Some(simd)) if s.bytes.is_none() && s.strides[1] <= 2 => {
                let code = match simd {
                    Simd::Avx512 => kernels::copy_x86::assemble(s.strides[1]),
                    Simd::Avx2 => kernels::copy_x86::assemble_avx2(s.strides[1]),
                };
                let fid = define_machine_code(module, &format!("{name}__k{i}_copy"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut ctx.func))
            }
            // The depthwise plane's row copies (`depthwise::plane_mode`): a padded plane's rows (the
            // deinterleaving copy on AVX-512 split planes, two stride-2 copies per row on AVX2 ones), or an edge
            // plane's top and bottom buffer rows.
            (Body::Depthwise(s), Some(simd)) if dw_f32.is_some() => {
                use ops::depthwise::PlaneMode;
                let code = match (ops::depthwise::plane_mode(s, simd == Simd::Avx512), simd) {
                    (PlaneMode::Split { .. }, Simd::Avx512) => {
                        Some((kernels::copy_x86::assemble_deinterleave(), 4, "split"))
                    }
                    (PlaneMode::Split { .. }, Simd::Avx2) => {
                        Some((kernels::copy_x86::assemble_avx2(2), 3, "copy"))
                    }
                    (PlaneMode::Edge(e), _) if e.buffers == [0, 0] => None,
                    (PlaneMode::Padded(_) | PlaneMode::Edge(_), Simd::Avx512) => {
                        Some((kernels::copy_x86::assemble(1), 3, "copy"))
                    }
                    (PlaneMode::Padded(_) | PlaneMode::Edge(_), Simd::Avx2) => {
                        Some((kernels::copy_x86::assemble_avx2(1), 3, "copy"))
                    }
                    (PlaneMode::Interior, _) => None,
                };
                match code {
                    Some((code, params, tag)) => {
                        let fname = format!("{name}__k{i}_{tag}");
                        let fid = define_machine_code(module, &fname, params, code)?;
                        Some(module.declare_func_in_func(fid, &mut ctx.func))
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
                Some(Simd::Avx512),
            ) => match ops::data::block_plan(out_shape, in_strides, *elem)
                .and_then(|p| kernels::transpose_x86::assemble_block(&p.t).ok())
            {
                Some(code) => {
                    let fid =
                        define_machine_code(module, &format!("{name}__k{i}_tblock"), 2, Ok(code))?;
                    Some(module.declare_func_in_func(fid, &mut ctx.func))
                }
                None => None,
            },
            // The padded max pooling's row copy into its stack plane (`PoolSpec::padded_plane`).
            (Body::Pool(s), Some(Simd::Avx512))
                if max_row.is_some() && s.padded_plane().is_some() && s.max3s2().is_none() =>
            {
                let code = kernels::copy_x86::assemble(1);
                let fid = define_machine_code(module, &format!("{name}__k{i}_copy"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut ctx.func))
            }
            _ => None,
        };
        let vmath = match (&k.body, simd) {
            (Body::Unary(op, _), Some(simd)) if kernels::vmath_x86::supported(*op) => {
                let code = match simd {
                    Simd::Avx512 => kernels::vmath_x86::assemble(*op),
                    Simd::Avx2 => kernels::vmath_avx2::assemble(*op),
                };
                let fid = define_machine_code(module, &format!("{name}__k{i}_vmath"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut ctx.func))
            }
            (Body::Softmax { len, .. }, Some(Simd::Avx512)) if softmax_rows(&k.body) => {
                let code = kernels::softmax_x86::assemble(*len);
                let fid = define_machine_code(module, &format!("{name}__k{i}_softmax"), 3, code)?;
                Some(module.declare_func_in_func(fid, &mut ctx.func))
            }
            _ => None,
        };
        let dw_row = match (&k.body, simd) {
            (Body::QDepthwise(s), Some(Simd::Avx512)) => match ops::qdepthwise::row_kernel(s) {
                Some(spec) => {
                    let code = kernels::quant_x86::assemble_dw_row(&spec);
                    let fid = define_machine_code(module, &format!("{name}__k{i}_dwrow"), 6, code)?;
                    Some(module.declare_func_in_func(fid, &mut ctx.func))
                }
                None => None,
            },
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
                        set.map(|id| id.map(|id| module.declare_func_in_func(id, &mut ctx.func)))
                    }),
                    strip: m
                        .strip
                        .map(|id| module.declare_func_in_func(id, &mut ctx.func)),
                })
            }
            _ => None,
        };
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            b.seal_block(entry);
            let (argv, task) = (b.block_params(entry)[0], b.block_params(entry)[1]);
            let args = (k.args.iter().enumerate())
                .map(|(i, a)| {
                    (
                        a.role,
                        b.ins().load(I64, builder::flags(), argv, (i * 8) as i32),
                    )
                })
                .collect();
            let mut kb = Kb {
                b,
                args,
                missing: Default::default(),
                task,
                has_fma,
            };
            // Bodies that only exist with machine code (set when it is missing: a bundlec bug).
            let mut no_code = false;
            match (&k.body, micro, qmicro) {
                (Body::Gemm(s), m, _) if s.transpose_out.is_some() => match (m, transpose) {
                    (Some(m), Some(t)) => {
                        ops::gemm::emit_with(&mut kb, s, k.tasks, Some(m), Some(t))
                    }
                    _ => no_code = true,
                },
                (Body::Gemm(s), Some(m), _) => {
                    ops::gemm::emit_with(&mut kb, s, k.tasks, Some(m), None)
                }
                (Body::QGemm(s), _, Some(mk)) => ops::qgemm_vnni::emit(&mut kb, s, k.tasks, &mk),
                (Body::WinogradIn(s), _, _) => match layout {
                    Some([Some(f), Some(copy), _]) => {
                        ops::winograd::emit_in(&mut kb, s, k.tasks, f, copy)
                    }
                    _ => no_code = true,
                },
                (Body::TransposeOut { n, t }, _, _) => match layout {
                    Some([Some(f), _, _]) => {
                        ops::data::emit_transpose_out(&mut kb, [*n, t.p, t.m, t.ld], k.tasks, f)
                    }
                    _ => no_code = true,
                },
                (Body::DepthwiseC16(s), _, _) => match (layout, ops::depthwise::c16(s)) {
                    (Some([Some(f), _, _]), Some(spec)) => {
                        ops::depthwise::emit_c16(&mut kb, s, &spec, k.tasks, f)
                    }
                    _ => no_code = true,
                },
                (Body::ConvDirect { n, spec }, _, _) => match layout {
                    Some([Some(f), _, _]) => ops::conv::emit_direct(&mut kb, *n, spec, k.tasks, f),
                    _ => no_code = true,
                },
                (Body::WinogradOut(s), _, _) => match layout {
                    Some([Some(f2), f1, _]) => ops::winograd::emit_out(&mut kb, s, k.tasks, f2, f1),
                    _ => no_code = true,
                },
                (Body::Pool(s), _, _) if max_row.is_some() => {
                    ops::pool::emit_pool(&mut kb, s, k.tasks, max_row, copy)
                }
                (Body::Im2col(s), _, _) if copy.is_some() => {
                    ops::conv::emit_im2col(&mut kb, s, k.tasks, copy)
                }
                (
                    Body::Transpose {
                        out_shape,
                        in_strides,
                        elem,
                    },
                    _,
                    _,
                ) if copy.is_some() => {
                    match (ops::data::block_plan(out_shape, in_strides, *elem), copy) {
                        (Some(plan), Some(f)) => {
                            ops::data::emit_transpose_blocks(&mut kb, &plan, k.tasks, f)
                        }
                        _ => no_code = true,
                    }
                }
                (Body::Softmax { outer, len, .. }, _, _) if let Some(f) = vmath => {
                    ops::nn::emit_softmax_rows(&mut kb, *outer, *len, k.tasks, f)
                }
                (Body::Unary(op, len), _, _) if vmath.is_some() => {
                    ops::elementwise::emit_unary_with(&mut kb, *op, *len, k.tasks, vmath)
                }
                (Body::Depthwise(s), _, _) if dw_f32.is_some() => {
                    let avx512 = simd == Some(Simd::Avx512);
                    ops::depthwise::emit_depthwise(&mut kb, s, k.tasks, dw_f32, copy, avx512)
                }
                (Body::QDepthwise(s), _, _) if dw_row.is_some() => {
                    ops::qdepthwise::emit_with(&mut kb, s, k.tasks, dw_row)
                }
                (Body::QGemm(s), _, None) if pair.is_some() => {
                    ops::qgemm::emit_with(&mut kb, s, k.tasks, pair)
                }
                (
                    Body::QAdd {
                        params,
                        dtypes,
                        len,
                    },
                    _,
                    _,
                ) if qadd.is_some() => {
                    ops::quant::emit_qadd_with(&mut kb, params, *dtypes, *len, k.tasks, qadd)
                }
                _ => emit_body(&mut kb, &k.body, k.tasks),
            }
            if no_code {
                return Err(Error::internal(
                    "codegen",
                    format!("kernel '{}' has no machine code", k.name),
                ));
            }
            if let Some(r) = kb.missing.get() {
                return Err(Error::internal(
                    "codegen",
                    format!("kernel '{}' has no {r:?} argument", k.name),
                ));
            }
            kb.b.ins().return_(&[]);
            kb.b.finalize(module.isa().frontend_config());
        }
        module
            .define_function(id, &mut ctx)
            .map_err(|e| Error::internal("codegen", format!("kernel '{}': {e:?}", k.name)))?;
        module.clear_context(&mut ctx);
        ids.push(id);
    }
    Ok(ids)
}

fn emit_body(kb: &mut Kb, body: &Body, tasks: u32) {
    match body {
        Body::Gemm(s) => ops::gemm::emit(kb, s, tasks),
        Body::QGemm(s) => ops::qgemm::emit(kb, s, tasks),
        Body::Quantize(s) => ops::quant::emit_quantize(kb, s, tasks),
        Body::QDepthwise(s) => ops::qdepthwise::emit(kb, s, tasks),
        Body::QAdd {
            params,
            dtypes,
            len,
        } => ops::quant::emit_qadd(kb, params, *dtypes, *len, tasks),
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
        | Body::ConvDirect { .. } => {}
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

/// Defines the exported `int NAME_cpu_supported(void)` and returns the ISA features it checks as `cpuFeatures`
/// bits (`kernels::cpu_check::X86_FEATURES`): machine code on x86-64 (`kernels/cpu_check.rs`), a Cranelift
/// `return 1` and no bits elsewhere (the baseline is all the kernels use).
pub fn define_cpu_check(
    module: &mut dyn Module,
    name: &str,
    cpu: &str,
    has_fma: bool,
    simd: Option<Simd>,
    vnni: bool,
) -> Result<u64> {
    let fname = format!("{name}_cpu_supported");
    define_feature_check(module, &fname, Linkage::Export, cpu, has_fma, simd, vnni).map(|r| r.1)
}

/// Defines `int fname(void)`: 1 when the CPU has every feature of a kernel set (see [`define_cpu_check`]);
/// returns its id and feature bits.
pub fn define_feature_check(
    module: &mut dyn Module,
    fname: &str,
    linkage: Linkage,
    cpu: &str,
    has_fma: bool,
    simd: Option<Simd>,
    vnni: bool,
) -> Result<(FuncId, u64)> {
    let mut sig = module.make_signature();
    sig.returns.push(AbiParam::new(I32));
    let id = module
        .declare_function(fname, linkage, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
    if module.isa().triple().architecture == target_lexicon::Architecture::X86_64 {
        let v4 =
            matches!(cpu, "x86-64-v4" | "skylake-avx512" | "icelake") || simd == Some(Simd::Avx512);
        let needs = kernels::cpu_check::X86Needs {
            avx_fma: has_fma,
            avx2: has_fma,
            avx512: v4,
            vnni,
        };
        let bytes =
            kernels::cpu_check::assemble(&needs).map_err(|e| Error::internal("codegen", e))?;
        module
            .define_function_bytes(id, 16, &bytes, &[])
            .map_err(|e| Error::internal("codegen", format!("define {fname}: {e}")))?;
        return Ok((id, needs.bits()));
    }
    let mut ctx = Context::new();
    ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let blk = b.create_block();
        b.switch_to_block(blk);
        b.seal_block(blk);
        let one = b.ins().iconst(I32, 1);
        b.ins().return_(&[one]);
        b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| Error::internal("codegen", format!("{fname}: {e:?}")))?;
    Ok((id, 0))
}

/// Defines the entry function `name(constants, mutables, activations) -> i32` with `linkage` (exported, or local
/// behind a fat bundle's dispatcher). With `embedded` (the `NAME_weights` data object of `--embed-weights`), a
/// NULL `constants` means those embedded weights.
#[allow(clippy::too_many_arguments)] // the entry's symbol, the schedule's parts and the embedded weights
pub fn define_entry(
    module: &mut dyn Module,
    name: &str,
    linkage: Linkage,
    l: &Lowering,
    sched: &Schedule,
    plan: &MemoryPlan,
    kernels: &PrimaryMap<KernelId, FuncId>,
    embedded: Option<cranelift_module::DataId>,
) -> Result<FuncId> {
    let (id, func) = declare_entry(module, name, linkage)?;
    let mut ctx = Context::new();
    ctx.func = func;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let mut areas: Vec<_> = b.block_params(entry).to_vec();
        if let Some(w) = embedded {
            let gv = module.declare_data_in_func(w, b.func);
            let addr = b.ins().symbol_value(I64, gv);
            areas[0] = b.ins().select(areas[0], areas[0], addr);
        }
        let max_args = l
            .kernels
            .values()
            .map(|k| k.args.len())
            .max()
            .unwrap_or(1)
            .max(1);
        // Two argument arrays: an interleaved pair (`interleave.rs`) keeps both kernels' arrays.
        let slots = [0, 1].map(|_| {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                (max_args * 8) as u32,
                3,
            ))
        });
        let pairs: std::collections::HashMap<usize, usize> =
            interleave::pairs(l, &sched.order).into_iter().collect();
        let mut at = 0;
        while at < sched.order.len() {
            let ki = sched.order[at];
            // The next kernel runs group by group with this one where they interleave.
            let pair = pairs.get(&at).map(|&g| (sched.order[at + 1], g));
            let parts: Vec<KernelId> = match pair {
                Some((kj, _)) => vec![ki, kj],
                None => vec![ki],
            };
            let mut frefs = vec![];
            for (pi, &k) in parts.iter().enumerate() {
                for (ai, arg) in l.kernels[k].args.iter().enumerate() {
                    let loc = plan.loc.get(&arg.buf).ok_or_else(|| {
                        Error::internal(
                            "codegen",
                            format!(
                                "kernel '{}' {:?} argument has no location",
                                l.kernels[k].name, arg.role
                            ),
                        )
                    })?;
                    let p = b
                        .ins()
                        .iadd_imm_s(areas[loc.area as usize], loc.offset as i64);
                    b.ins().stack_store(I64, p, slots[pi], (ai * 8) as i32);
                }
                frefs.push(module.declare_func_in_func(kernels[k], b.func));
            }
            let mut kb = Kb {
                b,
                args: vec![],
                missing: Default::default(),
                task: areas[0],
                has_fma: false,
            };
            // Tasks [lo, hi) of part `pi`.
            let run = |kb: &mut Kb, pi: usize, lo: usize, hi: usize| {
                let f = frefs[pi];
                if hi - lo == 1 {
                    let argv = kb.b.ins().stack_addr(I64, slots[pi], 0);
                    let t = kb.b.ins().iconst(I64, lo as i64);
                    kb.b.ins().call(f, &[argv, t]);
                } else {
                    kb.for_const(lo, hi, 1, |kb, t| {
                        let argv = kb.b.ins().stack_addr(I64, slots[pi], 0);
                        kb.b.ins().call(f, &[argv, t]);
                    });
                }
            };
            match pair {
                Some((kj, g)) => {
                    let (ta, tb) = (l.kernels[ki].tasks, l.kernels[kj].tasks);
                    for gi in 0..g {
                        let (lo, hi) = interleave::group_tasks(ta, gi, g);
                        run(&mut kb, 0, lo, hi);
                        let (lo, hi) = interleave::group_tasks(tb, gi, g);
                        run(&mut kb, 1, lo, hi);
                    }
                    at += 2;
                }
                None => {
                    run(&mut kb, 0, 0, l.kernels[ki].tasks as usize);
                    at += 1;
                }
            }
            b = kb.b;
        }
        let zero = b.ins().iconst(I32, 0);
        b.ins().return_(&[zero]);
        b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| Error::internal("codegen", format!("entry: {e:?}")))?;
    Ok(id)
}
