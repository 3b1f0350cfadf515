//! Machine-code kernels, assembled at compile time for the target's ISA and placed in the bundle's object beside the
//! Cranelift functions. `gemm_x86.rs`: the AVX2 and AVX-512 GEMM micro-kernels that the Cranelift GEMM kernel calls for
//! every full tile, `gemm_strip_avx2.rs` the AVX2 column strip of a GEMM's last few columns; `qgemm_x86.rs`: the AVX2
//! and AVX-512 VNNI micro-kernels of the integer GEMM; `quant_x86.rs`: the AVX-512 QAdd and int8 depthwise row kernels;
//! `depthwise_x86.rs` and `depthwise_avx2.rs`: the AVX-512 and AVX2 f32 depthwise row kernels (the AVX-512 one also max
//! pooling); `depthwise_c16_x86.rs` and `depthwise_c16_avx2.rs`: the AVX-512 and AVX2 channel-blocked depthwise kernels
//! of small planes; `conv_direct_x86.rs` and `conv_direct_avx2.rs`: the AVX-512 and AVX2 direct convolution of
//! few-channel inputs; `maxpool_x86.rs` and `maxpool_avx2.rs`: the AVX-512 and AVX2 separable 3x3 stride-2 max pooling;
//! `norm_x86.rs` and `norm_avx2.rs`: the AVX-512 and AVX2 LayerNorm rows; `copy_x86.rs`: the strided row copies of
//! im2col; `transpose_x86.rs`: the block-transposing epilogue of the transposed GEMMs; `winograd_x86.rs` and
//! `winograd4_x86.rs`: the AVX-512 Winograd F(2x2, 3x3) and F(4x4, 3x3) transforms, `winograd_avx2.rs` the AVX2 ones;
//! `cpu_check.rs`: the exported `NAME_cpu_supported`. Here: the pieces several kernels share (the register tables,
//! displacements, store column masks, a broadcast constant, the NaN-keeping clamp, `fmax`, the row loop and its
//! multi-row wrapper, the 16x16 and 8x8 transposes, the AVX2 partial store, the 16-lane weight packing). Every other
//! target keeps the Cranelift kernels.

pub mod conv_direct_avx2;
pub mod conv_direct_x86;
pub mod copy_x86;
pub mod cpu_check;
pub mod depthwise_avx2;
pub mod depthwise_avx2_edge;
pub mod depthwise_c16_avx2;
pub mod depthwise_c16_x86;
pub mod depthwise_x86;
pub mod gemm_strip_avx2;
pub mod gemm_x86;
pub mod maxpool_avx2;
pub mod maxpool_x86;
pub mod norm_avx2;
pub mod norm_x86;
pub mod qgemm_x86;
pub mod quant_x86;
pub mod softmax_avx2;
pub mod softmax_x86;
#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod test_exec;
pub mod transpose_avx2;
pub mod transpose_x86;
pub mod vmath_avx2;
pub mod vmath_x86;
pub mod winograd4_x86;
pub mod winograd_avx2;
pub mod winograd_x86;

use iced_x86::code_asm::asm_traits::{CodeAsmVaddps, CodeAsmVmaxps, CodeAsmVminps};
use iced_x86::code_asm::{
    cl, eax, ecx, k1, k3, k5, k6, k7, ptr, r10d, r11d, r9d, rax, rcx, xmm15, zmm10, zmm9,
    AsmRegister32, AsmRegister64, AsmRegisterK, AsmRegisterYmm, AsmRegisterZmm, CodeAssembler,
    CodeLabel,
};
use iced_x86::IcedError;

/// The 32 AVX-512 vector registers by number, for kernels that allocate them by index.
pub(crate) const ZMM: [iced_x86::code_asm::AsmRegisterZmm; 32] = {
    use iced_x86::code_asm::*;
    [
        zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13,
        zmm14, zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21, zmm22, zmm23, zmm24, zmm25, zmm26,
        zmm27, zmm28, zmm29, zmm30, zmm31,
    ]
};

/// The 16 AVX2 vector registers by number.
pub(crate) const YMM: [AsmRegisterYmm; 16] = {
    use iced_x86::code_asm::*;
    [
        ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13,
        ymm14, ymm15,
    ]
};

/// The `xmm` half of a `ymm` register.
pub(crate) fn xmm_of(r: AsmRegisterYmm) -> iced_x86::code_asm::AsmRegisterXmm {
    use iced_x86::code_asm::*;
    const XMM: [AsmRegisterXmm; 16] = [
        xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13,
        xmm14, xmm15,
    ];
    XMM[YMM.iter().position(|&y| y == r).unwrap_or(15)]
}

/// Transposes the 8x8 block of `ymm0..8` (row r in `ymm r`) into `ymm8..16` (column c in `ymm 8 + c`),
/// clobbering `ymm0..8`: pixels-by-channels to channels-by-pixels and back in the AVX2 kernels.
pub(crate) fn transpose8_ymm(a: &mut CodeAssembler) -> Result<(), IcedError> {
    let y = |i: usize| YMM[i];
    for p in 0..4 {
        a.vunpcklps(y(8 + 2 * p), y(2 * p), y(2 * p + 1))?;
        a.vunpckhps(y(9 + 2 * p), y(2 * p), y(2 * p + 1))?;
    }
    for q in 0..2 {
        let (t0, t1, t2, t3) = (y(8 + 4 * q), y(9 + 4 * q), y(10 + 4 * q), y(11 + 4 * q));
        a.vshufps(y(4 * q), t0, t2, 0x44)?;
        a.vshufps(y(4 * q + 1), t0, t2, 0xEE)?;
        a.vshufps(y(4 * q + 2), t1, t3, 0x44)?;
        a.vshufps(y(4 * q + 3), t1, t3, 0xEE)?;
    }
    for c in 0..4 {
        a.vperm2f128(y(8 + c), y(c), y(4 + c), 0x20)?;
        a.vperm2f128(y(12 + c), y(c), y(4 + c), 0x31)?;
    }
    Ok(())
}

/// Stores the first `n` (1..=8) lanes of `y` at `at` without touching the memory after them (AVX2 has no
/// store masks; `vmaskmovps` stores are slow on some AMD cores): a full store, or 4 + 2 + 1 lanes (`scratch`
/// clobbered).
pub(crate) fn store_head_ymm(
    a: &mut CodeAssembler,
    at: iced_x86::code_asm::AsmMemoryOperand,
    y: AsmRegisterYmm,
    n: usize,
    scratch: AsmRegisterYmm,
) -> Result<(), IcedError> {
    if n >= 8 {
        return a.vmovups(at, y);
    }
    let (mut x, mut at, mut n) = (xmm_of(y), at, n);
    if n >= 4 {
        a.vmovups(at, x)?;
        a.vextractf128(xmm_of(scratch), y, 1)?;
        (x, at, n) = (xmm_of(scratch), at + 16, n - 4);
    }
    if n >= 2 {
        a.vmovlps(at, x)?;
        if n == 3 {
            a.vextractps(at + 8, x, 2)?;
        }
    } else if n == 1 {
        a.vmovss(at, x)?;
    }
    Ok(())
}

/// A displacement of `floats` f32 elements in bytes, as an `i32`; an error naming the kernel when it does
/// not fit.
pub(crate) fn disp(kernel: &str, floats: usize) -> Result<i32, String> {
    floats
        .checked_mul(4)
        .and_then(|b| i32::try_from(b).ok())
        .ok_or_else(|| format!("{kernel} displacement out of range: {floats} floats"))
}

/// Column masks of a row's stores: `masks[q]` gets the lanes of store `q` (16 floats each, from column
/// `16·q`) that lie below the `left` columns the row still has (clobbers `rcx`, `rax`).
pub(crate) fn column_masks(
    a: &mut CodeAssembler,
    left: AsmRegister64,
    masks: &[AsmRegisterK],
) -> Result<(), IcedError> {
    for (q, &k) in masks.iter().enumerate() {
        a.mov(rcx, left)?;
        a.sub(rcx, 16 * q as i32)?;
        a.mov(eax, 0u32)?;
        a.cmovl(rcx, rax)?;
        let mut ok = a.create_label();
        a.mov(eax, 16u32)?;
        a.cmp(rcx, rax)?;
        a.jbe(ok)?;
        a.mov(rcx, rax)?;
        a.set_label(&mut ok)?;
        a.mov(eax, 1u32)?;
        a.shl(eax, cl)?;
        a.dec(eax)?;
        a.kmovw(k, eax)?;
    }
    Ok(())
}

/// Broadcasts the 32-bit pattern `bits` (an f32's bits or an integer) into every lane of `reg`, through `eax`.
pub(crate) fn broadcast_bits(
    a: &mut CodeAssembler,
    reg: AsmRegisterZmm,
    bits: u32,
) -> Result<(), IcedError> {
    a.mov(eax, bits)?;
    a.vpbroadcastd(reg, eax)
}

/// [`broadcast_bits`] into a `ymm` (AVX2 has no broadcast from a general register: through the register's own
/// `xmm` half).
pub(crate) fn broadcast_bits_ymm(
    a: &mut CodeAssembler,
    reg: AsmRegisterYmm,
    bits: u32,
) -> Result<(), IcedError> {
    a.mov(eax, bits)?;
    a.vmovd(xmm_of(reg), eax)?;
    a.vbroadcastss(reg, xmm_of(reg))
}

/// A clamp's lower bound for [`clamp_keep_nan`]: its broadcast register and its f32 bits.
pub(crate) type LowerBound = (AsmRegisterZmm, u32);

/// Broadcasts the clamp bounds a kernel has (`lo`, `hi`: f32 bits) into `regs` and returns what
/// [`clamp_keep_nan`] then takes (`None` for a missing bound).
pub(crate) fn clamp_bounds(
    a: &mut CodeAssembler,
    (lo, hi): (Option<u32>, Option<u32>),
    regs: [AsmRegisterZmm; 2],
) -> Result<(Option<LowerBound>, Option<AsmRegisterZmm>), IcedError> {
    for (reg, bound) in regs.into_iter().zip([lo, hi]) {
        if let Some(bits) = bound {
            broadcast_bits(a, reg, bits)?;
        }
    }
    Ok((lo.map(|b| (regs[0], b)), hi.map(|_| regs[1])))
}

/// The `ymm` clamp bounds [`clamp_keep_nan`] takes: the lower bound's register with its f32 bits, the upper's.
pub(crate) type BoundsYmm = (Option<(AsmRegisterYmm, u32)>, Option<AsmRegisterYmm>);

/// [`clamp_bounds`] into `ymm` registers.
pub(crate) fn clamp_bounds_ymm(
    a: &mut CodeAssembler,
    (lo, hi): (Option<u32>, Option<u32>),
    regs: [AsmRegisterYmm; 2],
) -> Result<BoundsYmm, IcedError> {
    for (reg, bound) in regs.into_iter().zip([lo, hi]) {
        if let Some(bits) = bound {
            broadcast_bits_ymm(a, reg, bits)?;
        }
    }
    Ok((lo.map(|b| (regs[0], b)), hi.map(|_| regs[1])))
}

/// Clamps `x` to the registers `lo` / `hi` (broadcast bounds; `lo` with its f32 bits) with `vmaxps` /
/// `vminps`, keeping NaN: each takes the bound first, so a NaN `x` (the second source) is what it returns,
/// unchanged. A lower bound of +0 then takes a `vaddps` of it, which turns a −0 that `vmaxps` kept into +0 and
/// changes nothing else (`x + 0 = x`, NaN included: no kernel clamps a signaling NaN). Two or three
/// instructions where a compare, a save and a blend around the pair took five, with the same results. With
/// bounds that are not signed zeros this rounds as Cranelift's `fmax`/`fmin` (see `machine_code::clamp_bits`,
/// which refuses a lower bound of −0 and an upper one of ±0).
/// The same on `zmm` (AVX-512) and `ymm` (AVX2) registers.
pub(crate) fn clamp_keep_nan<R: Copy>(
    a: &mut CodeAssembler,
    x: R,
    lo: Option<(R, u32)>,
    hi: Option<R>,
) -> Result<(), IcedError>
where
    CodeAssembler: CodeAsmVmaxps<R, R, R> + CodeAsmVminps<R, R, R> + CodeAsmVaddps<R, R, R>,
{
    if let Some((lo, _)) = lo {
        a.vmaxps(x, lo, x)?;
    }
    if let Some(hi) = hi {
        a.vminps(x, hi, x)?;
    }
    if let Some((lo, 0)) = lo {
        a.vaddps(x, x, lo)?;
    }
    Ok(())
}

/// The loop over a row of outputs that the row kernels share, the count in `n`: steps of `big` vectors while
/// at least `big · lanes` outputs remain, then of `big − 1`, … down to single vectors, then — when any remain —
/// `tail`, which sets the tail masks, and one masked step. `step(a, vectors, masked)` emits a step; after an
/// unmasked one `src` advances by `src_bytes` and `dst` by `dst_bytes` per vector. Falls through to the
/// caller's epilogue.
#[allow(clippy::too_many_arguments)] // registers, vector geometry and the two emitters
pub(crate) fn row_loop(
    a: &mut CodeAssembler,
    (n, src, dst): (AsmRegister64, AsmRegister64, AsmRegister64),
    lanes: usize,
    big: usize,
    (src_bytes, dst_bytes): (usize, usize),
    mut step: impl FnMut(&mut CodeAssembler, usize, bool) -> Result<(), IcedError>,
    tail: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<(), IcedError> {
    // Steps of big, big − 1, …, 1 vectors: a row's last vectors still run as independent chains (a 56-wide
    // row is one 3-vector step and a masked one, not three dependent single-vector steps).
    let tiers: Vec<usize> = (1..=big.max(1)).rev().collect();
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    let mut done = a.create_label();
    for (i, vectors) in tiers.iter().copied().enumerate() {
        a.set_label(&mut labels[i])?;
        a.cmp(n, (vectors * lanes) as i32)?;
        a.jb(labels[i + 1])?;
        step(a, vectors, false)?;
        a.add(src, (vectors * src_bytes) as i32)?;
        a.add(dst, (vectors * dst_bytes) as i32)?;
        a.sub(n, (vectors * lanes) as i32)?;
        a.jmp(labels[i])?;
    }
    a.set_label(&mut labels[tiers.len()])?;
    a.test(n, n)?;
    a.jz(done)?;
    tail(a)?;
    step(a, 1, true)?;
    a.set_label(&mut done)
}

/// `k = (1 << bits) − 1` (bits ≤ 16), through `ecx` and `eax`.
pub(crate) fn low_mask(
    a: &mut CodeAssembler,
    k: AsmRegisterK,
    bits: AsmRegister32,
) -> Result<(), IcedError> {
    a.mov(ecx, bits)?;
    a.mov(eax, 1u32)?;
    a.shl(eax, cl)?;
    a.dec(eax)?;
    a.kmovw(k, eax)
}

/// AVX-512 masks for a row's last `count` (< 16) outputs at `stride` 1 or 2: `k5` the outputs, `k1` the inputs
/// of the first load, `k3` (stride 2) those of the second half: inputs 0 ..= (count − 1)·stride, so no load
/// passes the last one the row needs. Clobbers `eax`, `ecx`, `r9`–`r11`.
pub(crate) fn tail_masks_zmm(
    a: &mut CodeAssembler,
    count: AsmRegister32,
    stride: usize,
) -> Result<(), IcedError> {
    low_mask(a, k5, count)?;
    if stride == 1 {
        return a.kmovw(k1, k5);
    }
    a.lea(r9d, ptr(count + count - 1))?;
    a.mov(r10d, 16u32)?;
    a.mov(r11d, r9d)?;
    a.cmp(r11d, r10d)?;
    a.cmova(r11d, r10d)?;
    low_mask(a, k1, r11d)?;
    a.xor(r10d, r10d)?;
    a.sub(r9d, 16)?;
    a.cmovl(r9d, r10d)?;
    low_mask(a, k3, r9d)
}

/// AVX2 lane masks for a row's last `count` (< 8) outputs at `stride` 1 or 2, each `lane < n` against the lane
/// indices 0..7 at `lanes`: `outs` the outputs, `first` the first load's inputs, `second` (stride 2) the second
/// half's. Clobbers `xmm15` and `r9`.
pub(crate) fn tail_masks_ymm(
    a: &mut CodeAssembler,
    count: AsmRegister32,
    stride: usize,
    lanes: CodeLabel,
    [outs, first, second]: [AsmRegisterYmm; 3],
) -> Result<(), IcedError> {
    let lane_mask = |a: &mut CodeAssembler, dst: AsmRegisterYmm, n: AsmRegister32| {
        a.vmovd(xmm15, n)?;
        a.vpbroadcastd(dst, xmm15)?;
        a.vpcmpgtd(dst, dst, ptr(lanes))
    };
    lane_mask(a, outs, count)?;
    if stride == 1 {
        return a.vmovaps(first, outs);
    }
    a.lea(r9d, ptr(count + count - 1))?;
    lane_mask(a, first, r9d)?;
    a.sub(r9d, 8)?;
    lane_mask(a, second, r9d)
}

/// The AVX2 lane-index table `tail_masks_ymm` compares with (eight u32 0..7), placed at `lanes`.
pub(crate) fn lane_table(a: &mut CodeAssembler, lanes: &mut CodeLabel) -> Result<(), IcedError> {
    a.set_label(lanes)?;
    let idx: Vec<u8> = (0..8u32).flat_map(|i| i.to_le_bytes()).collect();
    a.db(&idx)
}

/// `k = (1 << min(n, 16)) − 1`: the lanes of a 16-lane block with `n` elements left (clobbers `rcx`, `eax`).
pub(crate) fn block_mask(
    a: &mut CodeAssembler,
    k: AsmRegisterK,
    n: AsmRegister64,
) -> Result<(), IcedError> {
    a.mov(rcx, n)?;
    a.mov(eax, 16u32)?;
    a.cmp(rcx, rax)?;
    a.cmova(rcx, rax)?;
    a.mov(eax, 1u32)?;
    a.shl(eax, cl)?;
    a.dec(eax)?;
    a.kmovw(k, eax)
}

/// Transposes the 16x16 block held in `zmm0..zmm15` (row r in `zmm r`) in place, so that `zmm c` holds column
/// c: `vunpck[lh]ps`, `vunpck[lh]pd`, then two rounds of 128-bit lane shuffles; `zmm16..zmm31` are clobbered.
pub(crate) fn transpose16(a: &mut CodeAssembler) -> Result<(), IcedError> {
    let z = |i: usize| ZMM[i];
    for i in 0..8 {
        a.vunpcklps(z(16 + 2 * i), z(2 * i), z(2 * i + 1))?;
        a.vunpckhps(z(17 + 2 * i), z(2 * i), z(2 * i + 1))?;
    }
    for i in 0..4 {
        let t = |k: usize| z(16 + 4 * i + k);
        a.vunpcklpd(z(4 * i), t(0), t(2))?;
        a.vunpckhpd(z(4 * i + 1), t(0), t(2))?;
        a.vunpcklpd(z(4 * i + 2), t(1), t(3))?;
        a.vunpckhpd(z(4 * i + 3), t(1), t(3))?;
    }
    // u[4i + j] (zmm 4i + j) holds, in 128-bit lane L, column 4L + j of rows 4i .. 4i + 3.
    for j in 0..4 {
        a.vshuff32x4(z(16 + j), z(j), z(4 + j), 0x88)?;
        a.vshuff32x4(z(20 + j), z(j), z(4 + j), 0xdd)?;
        a.vshuff32x4(z(24 + j), z(8 + j), z(12 + j), 0x88)?;
        a.vshuff32x4(z(28 + j), z(8 + j), z(12 + j), 0xdd)?;
    }
    // Column c = 4L + j: lanes L of u[j], u[4 + j], u[8 + j], u[12 + j].
    for j in 0..4 {
        a.vshuff32x4(z(j), z(16 + j), z(24 + j), 0x88)?; // L = 0
        a.vshuff32x4(z(8 + j), z(16 + j), z(24 + j), 0xdd)?; // L = 2
        a.vshuff32x4(z(4 + j), z(20 + j), z(28 + j), 0x88)?; // L = 1
        a.vshuff32x4(z(12 + j), z(20 + j), z(28 + j), 0xdd)?; // L = 3
    }
    Ok(())
}

/// `acc = fmax(acc, x)` as Cranelift's `fmax`: `vmaxps`, then lanes where the operands compare equal take
/// `acc & x` (so +0 beats −0 in either order) and unordered lanes `acc + x` (a NaN). Clobbers zmm9, zmm10, k6,
/// k7 (the depthwise row kernel's max mode and the separable max pooling keep them free).
pub(crate) fn max_into(
    a: &mut CodeAssembler,
    acc: AsmRegisterZmm,
    x: AsmRegisterZmm,
) -> Result<(), IcedError> {
    a.vcmpps(k6, acc, x, 3)?;
    a.vcmpps(k7, acc, x, 0)?;
    a.vaddps(zmm10, acc, x)?;
    a.vpandd(zmm9, acc, x)?;
    a.vmaxps(acc, acc, x)?;
    a.vmovaps(acc.k7(), zmm9)?;
    a.vmovaps(acc.k6(), zmm10)
}

/// Starts the loop over output rows of a multi-row row kernel (`DwRowF32::rows`): saves `rbx`, `r12`–`r14`,
/// keeps the row count (6th argument, `r9`) in `r14`, the output count in `rbx` and the first rows' pointers
/// (`rdi`, `rsi`) in `r12`/`r13`, and places the loop head, where each row starts with `rdi`, `rsi` and `r8`
/// restored (the row loop consumes them; its tail masks clobber `r9`–`r11`). Returns (head, exit); no rows go
/// straight to the exit.
pub(crate) fn rows_begin(a: &mut CodeAssembler) -> Result<(CodeLabel, CodeLabel), IcedError> {
    use iced_x86::code_asm::{r12, r13, r14, r8, rbx, rdi, rsi};
    let mut head = a.create_label();
    let exit = a.create_label();
    rows_save(a)?;
    a.test(r14, r14)?;
    a.jz(exit)?;
    a.set_label(&mut head)?;
    a.mov(rdi, r12)?;
    a.mov(rsi, r13)?;
    a.mov(r8, rbx)?;
    Ok((head, exit))
}

/// Rows mode `group` output rows at a time (a power of two): `body(a, g)` computes the `g` rows at rdi, rdi + `x`,
/// … floats into rsi, rsi + `out`, … (r8 outputs each), `g = group` while that many rows (r9) remain, then at
/// most one group of each smaller power of two for the rest. Saves and restores rbx and r12–r14, as
/// [`rows_begin`] / [`rows_end`]; `Err` when a group's displacement does not fit.
pub(crate) fn row_groups(
    a: &mut CodeAssembler,
    [x, out]: [usize; 2],
    group: usize,
    mut body: impl FnMut(&mut CodeAssembler, usize) -> Result<(), IcedError>,
) -> Result<(), String> {
    use iced_x86::code_asm::{r12, r13, r14, r8, rbx, rdi, rsi};
    let sizes: Vec<usize> = (0..usize::BITS)
        .map(|i| group >> i)
        .take_while(|&g| g > 0)
        .collect();
    let steps = sizes
        .iter()
        .map(|&g| {
            let d = |f: usize| disp("row kernel groups", f.saturating_mul(g));
            Ok((g, d(x)?, d(out)?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let e = |x: IcedError| x.to_string();
    let mut go = || -> Result<(), IcedError> {
        rows_save(a)?;
        for (i, &(g, dx, dout)) in steps.iter().enumerate() {
            // The first size loops; each smaller one runs at most once.
            let mut head = a.create_label();
            let mut next = a.create_label();
            a.set_label(&mut head)?;
            a.cmp(r14, g as i32)?;
            a.jb(next)?;
            a.mov(rdi, r12)?;
            a.mov(rsi, r13)?;
            a.mov(r8, rbx)?;
            body(a, g)?;
            a.add(r12, dx)?;
            a.add(r13, dout)?;
            a.sub(r14, g as i32)?;
            if i == 0 {
                a.jmp(head)?;
            }
            // A zero-size instruction takes the label, so the next size's head can take the next one.
            a.set_label(&mut next)?;
            a.zero_bytes()?;
        }
        rows_restore(a)
    };
    go().map_err(e)
}

/// Ends the loop [`rows_begin`] started: advances the row pointers by `[x, out]` floats (`Err` when a
/// displacement does not fit), loops while rows remain, then restores the saved registers.
pub(crate) fn rows_end(
    a: &mut CodeAssembler,
    (head, mut exit): (CodeLabel, CodeLabel),
    [x, out]: [usize; 2],
) -> Result<(), String> {
    use iced_x86::code_asm::{r12, r13, r14};
    let (x, out) = (disp("row kernel rows", x)?, disp("row kernel rows", out)?);
    let e = |x: IcedError| x.to_string();
    a.add(r12, x).map_err(e)?;
    a.add(r13, out).map_err(e)?;
    a.dec(r14).map_err(e)?;
    a.jnz(head).map_err(e)?;
    a.set_label(&mut exit).map_err(e)?;
    rows_restore(a).map_err(e)
}

/// The rows loops' prologue ([`rows_begin`], [`row_groups`]): saves `rbx` and `r12`–`r14`, then keeps the row
/// count (`r9`) in `r14`, the output count (`r8`) in `rbx` and the first rows' pointers (`rdi`, `rsi`) in
/// `r12` / `r13`.
fn rows_save(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r12, r13, r14, r8, r9, rbx, rdi, rsi};
    for r in [rbx, r12, r13, r14] {
        a.push(r)?;
    }
    a.mov(r14, r9)?;
    a.mov(rbx, r8)?;
    a.mov(r12, rdi)?;
    a.mov(r13, rsi)
}

/// Restores what [`rows_save`] saved.
fn rows_restore(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r12, r13, r14, rbx};
    for r in [r14, r13, r12, rbx] {
        a.pop(r)?;
    }
    Ok(())
}

/// Rows of a row-major `[rows, k]` matrix packed in groups of 16 lanes for the channel-blocked kernels
/// (`depthwise_c16_x86.rs`: `[C/16, KH·KW, 16]`; `conv_direct_x86.rs`: `[M/16, C·KH·KW, 16]`):
/// `out[g][t][l] = w[16·g + l][t]`, the rows past `rows` zero.
pub fn pack16(w: &[f32], rows: usize, k: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows.next_multiple_of(16) * k];
    for r in 0..rows {
        for t in 0..k {
            out[(r / 16 * k + t) * 16 + r % 16] = w[r * k + t];
        }
    }
    out
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::test_exec::{clamp, exec, skip_without_avx512};
    use super::*;
    use iced_x86::code_asm::{rdi, rsi, zmm0, zmm1, zmm2, zmmword_ptr};

    /// `clamp_keep_nan` against the kernels' reference clamp, bitwise: NaNs (payloads kept), both zeros, the
    /// infinities, denormals and values at the bounds, under every kind of bound `clamp_bits` lets through.
    #[test]
    fn clamp_keeps_nan_and_the_bounds_zero() {
        if skip_without_avx512("NaN-keeping clamp") {
            return;
        }
        type F = extern "sysv64" fn(*const f32, *mut f32);
        let xs: [f32; 16] = [
            f32::NAN,
            -0.0,
            0.0,
            -1.0,
            3.0,
            7.0,
            6.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -1e-40,
            0.5,
            -f32::NAN,
            f32::from_bits(0x7fc1_2345),
            -0.75,
            1.0,
        ];
        let bounds = [
            (Some(0.0f32), Some(6.0f32)),
            (Some(0.0), None),
            (Some(-1.0), Some(1.0)),
            (Some(0.5), None),
            (None, Some(6.0)),
            (Some(-0.75), Some(0.5)),
        ];
        for (lo, hi) in bounds {
            let mut a = CodeAssembler::new(64).unwrap();
            let regs = clamp_bounds(
                &mut a,
                (lo.map(f32::to_bits), hi.map(f32::to_bits)),
                [zmm1, zmm2],
            );
            let (l, h) = regs.unwrap();
            a.vmovups(zmm0, zmmword_ptr(rdi)).unwrap();
            clamp_keep_nan(&mut a, zmm0, l, h).unwrap();
            a.vmovups(zmmword_ptr(rsi), zmm0).unwrap();
            a.vzeroupper().unwrap();
            a.ret().unwrap();
            let code = a.assemble(0).unwrap();
            // SAFETY: the assembled function's System V signature.
            let f: F = unsafe { std::mem::transmute(exec(&code)) };
            let mut out = [0.0f32; 16];
            f(xs.as_ptr(), out.as_mut_ptr());
            for (x, got) in xs.iter().zip(out) {
                let want = clamp(*x, lo, hi);
                assert_eq!(got.to_bits(), want.to_bits(), "{x} in {lo:?}..{hi:?}");
            }
        }
    }
}
