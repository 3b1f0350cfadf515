//! Placing the machine-code kernels of `crate::x86` in the object: `define_machine_code` (one local System V
//! function from assembled bytes), and for each GEMM-like kernel the micro-kernel variants it calls — the f32
//! AVX2 / AVX-512 ones (`gemm.rs`: `define_micro`, the column strip, the tile choices), the integer AVX2 pair
//! ones (`define_qpair`) and the AVX-512 VNNI ones (`define_qmicro`), each only in the (rows, K block,
//! accumulate) variants the kernel's shape uses — and the depthwise, pooling, transposing, Winograd and direct
//! convolution kernels.

mod gemm;

pub(super) use gemm::define_micro;

use super::ops;
use crate::error::{Error, Result};
use crate::kernel::gemm::clamp_bits;
use crate::x86;
use crate::x86::gemm_x86::Simd;
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

/// Defines the f32 depthwise row kernel (AVX-512 or AVX2, as `simd`) of depthwise kernel `i` when its rows are
/// stride 1 or 2 and have at least four interior outputs (narrower rows run in masked tails).
pub(super) fn define_dw_row_f32(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &crate::kernel::depthwise::DepthwiseSpec,
    simd: Simd,
) -> Result<Option<FuncId>> {
    let (x0, x1) = ops::depthwise_plane::interior(
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
    let spec = crate::kernel::depthwise::DwRowF32 {
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
    spec: &crate::kernel::depthwise::DwRowF32,
    simd: Simd,
) -> Result<Option<FuncId>> {
    let code = match simd {
        Simd::Avx512 => x86::depthwise_x86::assemble(spec),
        Simd::Avx2 => x86::depthwise_avx2::assemble(spec),
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
/// (`x86/maxpool_x86.rs`, and on AVX2 `x86/maxpool_avx2.rs`, its only AVX2 pooling kernel).
pub(super) fn define_pool_row(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &crate::kernel::pool::PoolSpec,
    simd: Simd,
) -> Result<Option<FuncId>> {
    if s.dtype != crate::ir::DType::F32 {
        return Ok(None);
    }
    if let Some(spec) = s.max3s2() {
        let code = match simd {
            Simd::Avx512 => x86::maxpool_x86::assemble(&spec),
            Simd::Avx2 => x86::maxpool_avx2::assemble(&spec),
        };
        return define_machine_code(module, &format!("{name}__k{i}_maxpool"), 2, code).map(Some);
    }
    if simd != Simd::Avx512 {
        // The max-pool row kernel is AVX-512 only.
        return Ok(None);
    }
    let a = &s.attrs;
    let (x0, x1) = ops::depthwise_plane::interior(
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
    let spec = crate::kernel::depthwise::DwRowF32 {
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

/// Defines the transposing epilogue of kernel `i` (`x86/transpose_out/`): a `TransposeOut` kernel's, or
/// the one fused into a transposed GEMM.
pub(super) fn define_transpose(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    t: &crate::kernel::gemm::TransposeOut,
    simd: Simd,
) -> Result<FuncId> {
    let (lo, hi) = clamp_bits(t.act)
        .ok_or_else(|| Error::internal("codegen", "transposed activation not a clamp"))?;
    let spec = x86::transpose_out::TransposeOut {
        m: t.ld,
        p: t.p,
        residual: t.residual,
        lo,
        hi,
    };
    let code = match simd {
        Simd::Avx512 => x86::transpose_out::avx512::assemble(&spec),
        Simd::Avx2 => x86::transpose_out::avx2::assemble(&spec),
    };
    define_machine_code(module, &format!("{name}__k{i}_transpose"), 4, code)
}

/// The output channels one call of kernel set `simd`'s transposing epilogue writes.
pub(super) fn transpose_channels(simd: Simd) -> usize {
    match simd {
        Simd::Avx512 => 16,
        Simd::Avx2 => x86::transpose_out::avx2::CHANNELS,
    }
}

/// Defines the machine code of the convolution layout kernels (Winograd transforms, the transposing
/// epilogue) of kernel `i` for kernel set `simd`: for `WinogradIn`, `[input
/// transform, row copy, None]`; for `WinogradOut`, `[the full tile row's output transform, the variant for the
/// last tile row of a height that is not a multiple of the tile, None]`; for `TransposeOut`, `[the gather
/// epilogue, None, None]`; for `DepthwiseC16` and `ConvDirect`, `[the kernel, None, None]`. The Winograd
/// transforms, the direct convolution, the channel-blocked depthwise kernel (planes only) and the transposing
/// epilogue (8 channels per call) have AVX2 variants.
pub(super) fn define_layout(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    body: &crate::kernel::Body,
    simd: Simd,
) -> Result<[Option<FuncId>; 3]> {
    use crate::kernel::Body;
    use x86::winograd_x86::{WinoIn, WinoOut};
    use x86::{winograd4_x86, winograd_avx2, winograd_x86};
    let f = |module: &mut dyn Module, tag: &str, params, code| {
        define_machine_code(module, &format!("{name}__k{i}_{tag}"), params, code).map(Some)
    };
    match body {
        Body::WinogradIn(s) => {
            let spec = WinoIn {
                pw: s.plane()[1],
                v_stride: s.v_stride(),
            };
            let (tag, code, copy) = match (simd, s.tile) {
                (Simd::Avx2, tile) => (
                    "wino_in",
                    winograd_avx2::assemble_in(tile, &spec, s.tiles()[1]),
                    x86::copy_x86::assemble_avx2(1),
                ),
                (Simd::Avx512, 4) => (
                    "wino4_in",
                    winograd4_x86::assemble_in(&spec),
                    x86::copy_x86::assemble(1),
                ),
                (Simd::Avx512, _) => (
                    "wino_in",
                    winograd_x86::assemble_in(&spec),
                    x86::copy_x86::assemble(1),
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
                    m_stride: s.m_stride(),
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
                Simd::Avx512 => x86::conv_direct::avx512::assemble(spec),
                Simd::Avx2 => x86::conv_direct::avx2::assemble(spec),
            };
            Ok([f(module, "direct", 4, code)?, None, None])
        }
        Body::DepthwiseC16(s) => {
            let spec = x86::depthwise_c16_x86::c16(s)
                .ok_or_else(|| Error::internal("codegen", "channel-blocked depthwise shape"))?;
            let code = match simd {
                Simd::Avx512 => x86::depthwise_c16_x86::assemble(&spec),
                // Planes only: the layouts of transposed GEMMs are AVX-512's.
                Simd::Avx2 => x86::depthwise_c16_avx2::assemble(&spec),
            };
            Ok([f(module, "dwc16", 5, code)?, None, None])
        }
        Body::TransposeOut { t, .. } => Ok([
            Some(define_transpose(module, name, i, t, simd)?),
            None,
            None,
        ]),
        // The implicit int8 convolution (AMX targets only): quads of four channels and the last, shorter one.
        Body::QReorder(s) => {
            let full = f(
                module,
                "qreorder",
                2,
                x86::qconv_implicit::assemble_reorder(s, 4),
            )?;
            let last = match s.c % 4 {
                0 => None,
                c => f(
                    module,
                    "qreorder_last",
                    2,
                    x86::qconv_implicit::assemble_reorder(s, c),
                )?,
            };
            Ok([full, last, None])
        }
        Body::QConvImplicit(s) if s.transposed => {
            let (whole, tail) = s.t_tiles().widths();
            let kernel = |module: &mut dyn Module, tag: &str, rows: Option<usize>| match rows {
                Some(r) => f(module, tag, 5, x86::qconv_transposed::assemble(s, r)),
                None => Ok(None),
            };
            let full = kernel(module, "qconv_t", whole)?;
            let last = kernel(module, "qconv_t_last", tail)?;
            Ok([full, last, None])
        }
        Body::QConvImplicit(s) => {
            let (block, tag): (fn(_, _) -> _, _) = match s.amx {
                true => (x86::qconv_implicit::assemble, "qconv_amx"),
                false => (x86::qconv_implicit::assemble_vnni, "qconv_vnni"),
            };
            // A fused residual add takes the residual as a seventh argument.
            let params = 6 + usize::from(s.add.is_some());
            let full = match s.m >= s.mr() {
                true => f(module, tag, params, block(s, s.mr()))?,
                false => None,
            };
            let last = match s.m % s.mr() {
                0 => None,
                rows => f(module, &format!("{tag}_last"), params, block(s, rows))?,
            };
            Ok([full, last, None])
        }
        _ => Ok([None; 3]),
    }
}

/// The AVX2 pair micro-kernels of one integer GEMM: i32-storing ones `[rows][block][accumulate]` and the
/// requantising one for full-row tiles (`ops::qgemm::pair_direct`).
pub(super) type QPairIds = ([[[Option<FuncId>; 2]; 2]; 2], Option<FuncId>);

/// Defines the AVX2 pair micro-kernels integer GEMM `i` calls, `[full rows | tail rows][full block | last
/// block][zeroing | accumulating]` (only those it uses), and the requantising one of full-row tiles.
pub(super) fn define_qpair(
    module: &mut dyn Module,
    name: &str,
    i: usize,
    s: &crate::kernel::qgemm::QGemmSpec,
) -> Result<QPairIds> {
    use x86::qgemm_x86::{assemble_avx2, MR_AVX2};
    let (nb, full, last) = ops::qgemm::pair_blocks(s);
    let mut ids = [[[None; 2]; 2]; 2];
    // The requantising variant of full-row tiles (`ops::qgemm::pair_direct`).
    let direct = match ops::qgemm::pair_direct(s) {
        Some(q) if s.m >= MR_AVX2 => {
            let fname = format!("{name}__k{i}_pairs_rq");
            let code = assemble_avx2(MR_AVX2, last, s.kp(), false, Some(q));
            Some(define_machine_code(module, &fname, 5, code)?)
        }
        _ => None,
    };
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
            let code = assemble_avx2(rows, kp, s.kp(), acc == 1, None);
            ids[rk][bk][acc] = Some(define_machine_code(module, &fname, 3, code)?);
        }
    }
    Ok((ids, direct))
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
    s: &crate::kernel::qgemm::QGemmSpec,
) -> Result<QMicroIds> {
    use x86::qgemm_x86::{QEpilogue, QMicroSpec};
    type Assemble = fn(&QMicroSpec) -> std::result::Result<Vec<u8>, String>;
    let (assemble, fits, tag): (Assemble, fn(&QMicroSpec) -> bool, _) = if s.amx {
        (x86::qgemm_amx::assemble, x86::qgemm_amx::fits, "amx")
    } else {
        (x86::qgemm_x86::assemble, x86::qgemm_x86::fits, "vnni")
    };
    let mr = crate::kernel::qgemm::vnni::mr(s);
    let (_, nb, last) = crate::kernel::qgemm::vnni::blocks(s);
    let a_rs = crate::kernel::qgemm::vnni::a_rs(s);
    let kind = tag;
    let define = |module: &mut dyn Module, spec: &QMicroSpec, tag: String| -> Result<FuncId> {
        let params = if spec.epilogue.is_some() { 5 } else { 3 };
        define_machine_code(
            module,
            &format!("{name}__k{i}_{kind}_{tag}"),
            params,
            assemble(spec),
        )
    };
    let mut ids = [[[None; 2]; 2]; 2];
    let mut direct = [None; 2];
    let row_kinds = [(0, mr.min(s.m)), (1, s.m % mr)];
    for (rk, rows) in row_kinds {
        if rows == 0 || (rk == 0 && s.m < mr) {
            continue;
        }
        // (block kind, quads, accumulate, used)
        let wanted = [
            (0, crate::kernel::qgemm::vnni::KQB, 0, nb > 1),
            (0, crate::kernel::qgemm::vnni::KQB, 1, nb > 2),
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
        if let (true, Some(q)) = (crate::kernel::qgemm::vnni::direct(s), &s.requant) {
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
            if fits(&spec) {
                direct[rk] = Some(define(module, &spec, format!("{rk}q"))?);
            }
        }
    }
    Ok((ids, direct))
}
