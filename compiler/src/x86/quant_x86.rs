//! Machine-code int8 kernels outside the GEMM, assembled with `iced-x86` (AVX-512BW): the QAdd / QMul
//! elementwise kernel, the depthwise row kernel (stride 1 and 2, masked tails) and the QuantizeLinear row kernel. Both follow the reference of `ir/ops/quant.rs`
//! operation for operation (f32 chain, round half to even by `vcvtps2dq` under the default MXCSR), so their
//! results equal the Cranelift paths' bit for bit.

use super::ZMM;
use iced_x86::code_asm::asm_traits::{
    CodeAsmVdivps, CodeAsmVmaxps, CodeAsmVminps, CodeAsmVmulps, CodeAsmVpaddd, CodeAsmVpmaxsd,
    CodeAsmVpminsd, CodeAsmVpsubd,
};
use iced_x86::code_asm::*;

/// The AVX-512 QAdd kernel `fn(a: *const u8, b: *const u8, y: *mut u8, blocks: u64)` over `16 · blocks`
/// elements: widen (`vpmov[sz]xbd`), subtract the zero points, convert, scale, add, divide by the output scale,
/// clamp to `[lo - zy, hi - zy]`, round half to even (`vcvtps2dq`), add `zy`, narrow — the f32 chain of
/// `ir/ops/quant.rs::qadd_one`, operation for operation.
pub fn assemble_qadd(p: &crate::ir::QAddParams, signed: [bool; 2]) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // zmm16.. hold the constants: za, sa, zb, sb, sy (or 1 / sy), lo, hi, zy.
    let (bits, form) = qadd_bits(p);
    for (i, bits) in bits.iter().enumerate() {
        super::broadcast_bits(&mut a, ZMM[16 + i], *bits).map_err(e)?;
    }
    let k = QAddOps::new(std::array::from_fn(|i| ZMM[16 + i]), form);
    let mut done = a.create_label();
    a.test(rcx, rcx).map_err(e)?;
    a.je(done).map_err(e)?;
    let mut top = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    dequantise(&mut a, zmm0, xmmword_ptr(rdi), signed[0], (k.za, k.sa)).map_err(e)?;
    dequantise(&mut a, zmm1, xmmword_ptr(rsi), signed[1], (k.zb, k.sb)).map_err(e)?;
    if p.mul {
        a.vmulps(zmm0, zmm0, zmm1).map_err(e)?;
    } else {
        a.vaddps(zmm0, zmm0, zmm1).map_err(e)?;
    }
    quantise_store(&mut a, zmm0, &k, xmmword_ptr(rdx), p).map_err(e)?;
    a.add(rdi, 16).map_err(e)?;
    a.add(rsi, 16).map_err(e)?;
    a.add(rdx, 16).map_err(e)?;
    a.dec(rcx).map_err(e)?;
    a.jne(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// How a QAdd's quantisation is emitted, decided once per QAdd with its constants ([`qadd_bits`]).
#[derive(Clone, Copy)]
pub(super) struct QAddForm {
    /// The fifth word is the verified `1 / sy`, to multiply by (`ir/ops/quant.rs::qadd_reciprocal`).
    recip: bool,
    /// The clamp words are i32 and applied after rounding ([`int_clamp`]).
    int_clamp: bool,
}

/// A QAdd's constants as 32-bit words — `za, sa, zb, sb`, `sy` or its verified reciprocal, the clamp (as i32
/// where [`int_clamp`] holds, else less the output zero point, `lo - zy, hi - zy`: f32, exact, both fit 24
/// bits) and `zy` — and the form they are in.
fn qadd_bits(p: &crate::ir::QAddParams) -> ([u32; 8], QAddForm) {
    let recip = crate::ir::ops::quant::qadd_reciprocal(p);
    let form = QAddForm {
        recip: recip.is_some(),
        int_clamp: int_clamp(p),
    };
    let c = |v: i32| match form.int_clamp {
        true => v as u32,
        false => ((v as f64 - p.y.1 as f64) as f32).to_bits(),
    };
    let words = [
        p.a.1 as u32,
        p.a.0.to_bits(),
        p.b.1 as u32,
        p.b.0.to_bits(),
        recip.unwrap_or(p.y.0).to_bits(),
        c(p.clamp.0),
        c(p.clamp.1),
        p.y.1 as u32,
    ];
    (words, form)
}

/// Whether a QAdd's quotient `x / sy` stays within ±2^30 for every pair of 8-bit operands (|a - za|, |b - zb|
/// ≤ 255), so that it can be rounded first (`vcvtps2dq` never overflows) and clamped as an integer after the
/// zero point: equal to clamping the f32 to `[lo - zy, hi - zy]` first, as both bounds are integers.
fn int_clamp(p: &crate::ir::QAddParams) -> bool {
    let (sa, sb, sy) = (p.a.0 as f64, p.b.0 as f64, p.y.0 as f64);
    let x = match p.mul {
        true => 255.0 * 255.0 * sa * sb,
        false => 255.0 * (sa + sb),
    };
    x / sy * 1.001 < (1u64 << 30) as f64
}

/// Where a QAdd's f32 chain reads its constants (in [`qadd_bits`]' order): registers (the QAdd kernel) or
/// broadcast words after the code (a convolution's fused epilogue, [`ResidualConsts`]); and their form.
#[derive(Clone, Copy)]
pub(super) struct QAddOps<T> {
    form: QAddForm,
    za: T,
    sa: T,
    zb: T,
    sb: T,
    sy: T,
    lo: T,
    hi: T,
    zy: T,
}

impl<T> QAddOps<T> {
    fn new([za, sa, zb, sb, sy, lo, hi, zy]: [T; 8], form: QAddForm) -> Self {
        QAddOps {
            form,
            za,
            sa,
            zb,
            sb,
            sy,
            lo,
            hi,
            zy,
        }
    }
}

/// `x = f32(b - z) · s` for the 16 bytes `b` at `src` (i8 when `signed`, else u8).
fn dequantise<T>(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    src: AsmMemoryOperand,
    signed: bool,
    (z, s): (T, T),
) -> Result<(), IcedError>
where
    CodeAssembler: CodeAsmVpsubd<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVmulps<AsmRegisterZmm, AsmRegisterZmm, T>,
{
    if signed {
        a.vpmovsxbd(x, src)?;
    } else {
        a.vpmovzxbd(x, src)?;
    }
    a.vpsubd(x, x, z)?;
    a.vcvtdq2ps(x, x)?;
    a.vmulps(x, x, s)
}

/// The QAdd's quantisation of the f32 sum `x`: divided by `sy`, clamped, rounded, plus `zy`, narrowed to `dst`
/// (the output dtype of `p`), or multiplied by the reciprocal the form holds. Where [`int_clamp`] holds:
/// rounded, plus `zy`, then clamped as i32 only on the
/// sides where the clamp is narrower than the narrowing's saturation (u8's `vpmovusdb` reads its lanes as
/// unsigned, so a u8 output always takes the lower bound).
fn quantise_store<T: Copy>(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    k: &QAddOps<T>,
    dst: impl Into<Dst>,
    p: &crate::ir::QAddParams,
) -> Result<(), IcedError>
where
    CodeAssembler: CodeAsmVdivps<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVmulps<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVmaxps<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVminps<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVpmaxsd<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVpminsd<AsmRegisterZmm, AsmRegisterZmm, T>
        + CodeAsmVpaddd<AsmRegisterZmm, AsmRegisterZmm, T>,
{
    let signed = p.dtype == crate::ir::DType::I8;
    if k.form.recip {
        a.vmulps(x, x, k.sy)?;
    } else {
        a.vdivps(x, x, k.sy)?;
    }
    if k.form.int_clamp {
        let (min, max) = if signed { (-128, 127) } else { (0, 255) };
        a.vcvtps2dq(x, x)?;
        a.vpaddd(x, x, k.zy)?;
        if !signed || p.clamp.0 > min {
            a.vpmaxsd(x, x, k.lo)?;
        }
        if p.clamp.1 < max {
            a.vpminsd(x, x, k.hi)?;
        }
    } else {
        a.vmaxps(x, x, k.lo)?;
        a.vminps(x, x, k.hi)?;
        a.vcvtps2dq(x, x)?;
        a.vpaddd(x, x, k.zy)?;
    }
    narrow_store(a, x, dst, signed)
}

/// The depthwise row kernel (AVX-512BW): `fn(x, y, n, w, bias, scale)` computes `n` consecutive outputs of one
/// channel's output row at horizontal stride 1 or 2. `x` points at the input byte under tap (0, 0) of the first
/// output (a row of a zero-point-padded plane: every tap of every output lies in it), `w` at the channel's
/// `kh · kw` i8 taps, `bias` / `scale` at its i32 bias and f32 scale. Per 32 outputs and tap: 32 input bytes
/// widened to i16 (`vpmov[sz]xbw` at stride 1; at stride 2 64 bytes whose even ones are the low halves of 32
/// words, masked or shifted up and back), minus the zero point, times the tap (`vpmullw`: exact, both fit and so
/// does the product), widened to i32 and summed; then the requantisation of `qconv` and a narrowing store. The
/// last `n mod 32` outputs run once more under masks (loads of only the bytes they read, stores of only them).
/// The first 16 taps live in registers, any further ones (up to [`MAX_TAPS`]) as broadcast words in a table the
/// kernel writes on its stack once per call and multiplies from. A full step at stride 2 loads one byte past the
/// last one its outputs read: the plane keeps a byte of slack after its last row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DwRowSpec {
    /// Kernel (KH, KW), KH · KW ≤ [`MAX_TAPS`].
    pub kernel: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Horizontal stride, 1 or 2.
    pub stride: usize,
    /// Input row stride in bytes.
    pub w: usize,
    /// i8 input (else u8) and its zero point.
    pub x: (bool, i32),
    /// Output zero point and clamp, i8 output (else u8).
    pub y: (i32, (i32, i32), bool),
}

impl DwRowSpec {
    /// `Err` naming `kernel` unless the shape has 1 to `max_taps` taps, a stride up to `max_stride`, and every
    /// tap's offset (plus a step's 64-byte load) fits a 32-bit displacement.
    pub fn check(&self, max_taps: usize, max_stride: usize, kernel: &str) -> Result<(), String> {
        let [kh, kw] = self.kernel;
        let taps = kh * kw;
        let span = ((kh.max(1) - 1) * self.dilations[0])
            .checked_mul(self.w)
            .and_then(|v| v.checked_add((kw.max(1) - 1) * self.dilations[1] + 64));
        let ok = (1..=max_taps).contains(&taps)
            && (1..=max_stride).contains(&self.stride)
            && span.is_some_and(|v| i32::try_from(v).is_ok());
        ok.then_some(())
            .ok_or_else(|| format!("{kernel} shape out of range: {self:?}"))
    }
}

/// The registers of a requantisation in registers: per-lane i32 bias and f32 scale, the clamp `lo - zp` and
/// `hi - zp` (f32) and the zero point (i32).
pub(super) struct RequantRegs {
    /// `None`: the sums already hold the bias (accumulators that started from it).
    pub bias: Option<AsmRegisterZmm>,
    pub scale: AsmRegisterZmm,
    pub lo: AsmRegisterZmm,
    pub hi: AsmRegisterZmm,
    pub zp: AsmRegisterZmm,
}

/// The reference requantisation of the i32 sums in `x` (`qconv`, `ir/ops/quant.rs`):
/// `cvt_rne(min(max(f32(x + bias) · scale, lo - zp), hi - zp)) + zp` (`vcvtps2dq` rounds half to even under the
/// default MXCSR), narrowed with saturation to `dst` as i8 (`signed`) or u8. The int8 depthwise, GEMV and AMX
/// kernels' epilogue.
pub(super) fn requant_store(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    r: &RequantRegs,
    dst: impl Into<Dst>,
    signed: bool,
) -> Result<(), IcedError> {
    requant_centred(a, x, r)?;
    a.vpaddd(x, x, r.zp)?;
    narrow_store(a, x, dst, signed)
}

/// `requant_store` up to the rounding: `x` becomes the requantised value minus the zero point (i32).
fn requant_centred(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    r: &RequantRegs,
) -> Result<(), IcedError> {
    requant_clamped(a, x, r)?;
    a.vcvtps2dq(x, x)
}

/// `requant_centred` before the rounding: `x` becomes `min(max(f32(x + bias) · scale, lo - zp), hi - zp)`.
fn requant_clamped(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    r: &RequantRegs,
) -> Result<(), IcedError> {
    if let Some(bias) = r.bias {
        a.vpaddd(x, x, bias)?;
    }
    a.vcvtdq2ps(x, x)?;
    a.vmulps(x, x, r.scale)?;
    a.vmaxps(x, x, r.lo)?;
    a.vminps(x, x, r.hi)
}

/// Where a requantisation's 16 bytes go: memory, or an `xmm` register (a kernel that rearranges them).
#[derive(Clone, Copy)]
pub(super) enum Dst {
    Mem(AsmMemoryOperand),
    Reg(AsmRegisterXmm),
}

impl From<AsmMemoryOperand> for Dst {
    fn from(m: AsmMemoryOperand) -> Self {
        Dst::Mem(m)
    }
}

impl From<AsmRegisterXmm> for Dst {
    fn from(r: AsmRegisterXmm) -> Self {
        Dst::Reg(r)
    }
}

/// Narrows the i32 lanes of `x` with saturation to 16 bytes at `dst`, i8 (`signed`) or u8.
fn narrow_store(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    dst: impl Into<Dst>,
    signed: bool,
) -> Result<(), IcedError> {
    match (dst.into(), signed) {
        (Dst::Mem(m), true) => a.vpmovsdb(m, x),
        (Dst::Mem(m), false) => a.vpmovusdb(m, x),
        (Dst::Reg(r), true) => a.vpmovsdb(r, x),
        (Dst::Reg(r), false) => a.vpmovusdb(r, x),
    }
}

/// The constants of a fused residual add (`kernel::qconv::QResidual`): [`qadd_bits`]' words, placed after
/// the kernel's code ([`ResidualConsts::emit`]) and read as broadcast operands.
pub(super) struct ResidualConsts {
    labels: [CodeLabel; 8],
    bits: [u32; 8],
    form: QAddForm,
    /// i8 residual (else u8).
    signed: bool,
    /// The QAdd's parameters.
    params: crate::ir::QAddParams,
}

impl ResidualConsts {
    /// The labels of `r`'s constants (not yet placed).
    pub(super) fn new(
        a: &mut CodeAssembler,
        r: &crate::kernel::qconv::QResidual,
    ) -> ResidualConsts {
        let (bits, form) = qadd_bits(&r.params);
        ResidualConsts {
            labels: std::array::from_fn(|_| a.create_label()),
            bits,
            form,
            signed: r.dtype == crate::ir::DType::I8,
            params: r.params.clone(),
        }
    }

    fn ops(&self) -> QAddOps<AsmMemoryOperand> {
        QAddOps::new(self.labels.map(dword_bcst), self.form)
    }

    /// Places the constants (after the kernel's last instruction).
    pub(super) fn emit(&mut self, a: &mut CodeAssembler) -> Result<(), IcedError> {
        for (l, b) in self.labels.iter_mut().zip(self.bits) {
            a.set_label(l)?;
            a.dd(&[b])?;
        }
        Ok(())
    }
}

/// The requantisation of `requant_store` followed by a residual QAdd (`ir/ops/quant.rs::qadd_one`, step for
/// step): `(q - zq)·sq + (b - zb)·sb`, then the QAdd's quantisation; `q` never leaves the register (its zero
/// point cancels), `b` is 16 residual bytes at `res`. Uses `t` as scratch.
pub(super) fn requant_add_store(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    r: &RequantRegs,
    c: &ResidualConsts,
    (res, t): (AsmMemoryOperand, AsmRegisterZmm),
    dst: impl Into<Dst>,
) -> Result<(), IcedError> {
    let k = c.ops();
    // The requantised value less its zero point, rounded half to even in place (`vrndscaleps` mode 0, the
    // precision exception suppressed): the f32 of `requant_centred`'s integer, without the round trip.
    requant_clamped(a, x, r)?;
    a.vrndscaleps(x, x, 8u32)?;
    a.vmulps(x, x, k.sa)?;
    dequantise(a, t, res, c.signed, (k.zb, k.sb))?;
    a.vaddps(x, x, t)?;
    quantise_store(a, x, &k, dst, &c.params)
}

/// The depthwise row kernels' requantisation registers (`qdepthwise_vnni.rs` keeps the same plan).
pub(super) const DW_REQUANT: RequantRegs = RequantRegs {
    bias: Some(zmm26),
    scale: zmm27,
    lo: zmm7,
    hi: zmm8,
    zp: zmm9,
};

/// Most taps of the int8 depthwise row kernels (15x15; the AVX-512 kernel's stack table is then 15 KiB).
pub const MAX_TAPS: usize = crate::kernel::depthwise::Q_MAX_TAPS;

/// The taps the AVX-512 kernel keeps in registers (`zmm10..zmm25`).
const REG_TAPS: usize = 16;

/// Assembles the depthwise row kernel.
pub fn assemble_dw_row(s: &DwRowSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    s.check(MAX_TAPS, 2, "depthwise row kernel")?;
    let [kh, kw] = s.kernel;
    let taps = kh * kw;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // zmm6 = x zero point (words), zmm7/8 = lo - zp / hi - zp (f32), zmm9 = zp (dwords), zmm10.. = taps (words),
    // zmm26 = bias, zmm27 = scale, zmm28 = 0x00ff in every word (stride 2, u8 input).
    a.mov(eax, s.x.1 as u32).map_err(e)?;
    a.vpbroadcastw(zmm6, eax).map_err(e)?;
    let (zp, (lo, hi), _) = s.y;
    for (reg, bits) in [
        (zmm7, ((lo as f64 - zp as f64) as f32).to_bits()),
        (zmm8, ((hi as f64 - zp as f64) as f32).to_bits()),
        (zmm9, zp as u32),
        (zmm28, 0x00ff_00ff),
    ] {
        super::broadcast_bits(&mut a, reg, bits).map_err(e)?;
    }
    let spilled = taps.saturating_sub(REG_TAPS);
    if spilled > 0 {
        super::stack_table_begin(&mut a, (spilled * 64) as i32, 64).map_err(e)?;
    }
    for t in 0..taps {
        a.movsx(eax, byte_ptr(rcx + t as i32)).map_err(e)?;
        if t < REG_TAPS {
            a.vpbroadcastw(ZMM[10 + t], eax).map_err(e)?;
        } else {
            a.vpbroadcastw(zmm0, eax).map_err(e)?;
            let at = zmmword_ptr(rsp + ((t - REG_TAPS) * 64) as i32);
            a.vmovdqa64(at, zmm0).map_err(e)?;
        }
    }
    a.vpbroadcastd(zmm26, dword_ptr(r8)).map_err(e)?;
    a.vpbroadcastd(zmm27, dword_ptr(r9)).map_err(e)?;
    // One step of 32 outputs; `masked`: k4 selects the input bytes to load, k2 / k3 the two halves' outputs.
    let step = |a: &mut CodeAssembler, masked: bool| -> Result<(), IcedError> {
        a.vpxord(zmm0, zmm0, zmm0)?;
        a.vpxord(zmm1, zmm1, zmm1)?;
        for ky in 0..kh {
            for kx in 0..kw {
                let off = (ky * s.dilations[0] * s.w + kx * s.dilations[1]) as i32;
                if s.stride == 1 {
                    let src = ymmword_ptr(rdi + off);
                    let bytes = if masked {
                        a.vmovdqu8(ymm2.k4().z(), src)?;
                        None
                    } else {
                        Some(src)
                    };
                    match (s.x.0, bytes) {
                        (true, Some(m)) => a.vpmovsxbw(zmm2, m)?,
                        (false, Some(m)) => a.vpmovzxbw(zmm2, m)?,
                        (true, None) => a.vpmovsxbw(zmm2, ymm2)?,
                        (false, None) => a.vpmovzxbw(zmm2, ymm2)?,
                    }
                } else {
                    let src = zmmword_ptr(rdi + off);
                    if masked {
                        a.vmovdqu8(zmm2.k4().z(), src)?;
                    } else {
                        a.vmovdqu8(zmm2, src)?;
                    }
                    // The even bytes are the low halves of the 32 words (little-endian).
                    if s.x.0 {
                        a.vpsllw(zmm2, zmm2, 8)?;
                        a.vpsraw(zmm2, zmm2, 8)?;
                    } else {
                        a.vpandd(zmm2, zmm2, zmm28)?;
                    }
                }
                a.vpsubw(zmm2, zmm2, zmm6)?;
                let t = ky * kw + kx;
                if t < REG_TAPS {
                    a.vpmullw(zmm2, zmm2, ZMM[10 + t])?;
                } else {
                    a.vpmullw(zmm2, zmm2, zmmword_ptr(rsp + ((t - REG_TAPS) * 64) as i32))?;
                }
                a.vpmovsxwd(zmm4, ymm2)?;
                a.vextracti64x4(ymm5, zmm2, 1)?;
                a.vpmovsxwd(zmm5, ymm5)?;
                a.vpaddd(zmm0, zmm0, zmm4)?;
                a.vpaddd(zmm1, zmm1, zmm5)?;
            }
        }
        for (h, x) in [zmm0, zmm1].into_iter().enumerate() {
            let dst = xmmword_ptr(rsi + (h * 16) as i32);
            let dst = match (masked, h) {
                (false, _) => dst,
                (true, 0) => dst.k2(),
                (true, _) => dst.k3(),
            };
            requant_store(a, x, &DW_REQUANT, dst, s.y.2)?;
        }
        Ok(())
    };
    let body = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        let mut tail = a.create_label();
        let mut done = a.create_label();
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.cmp(rdx, 32)?;
        a.jb(tail)?;
        step(a, false)?;
        a.add(rdi, 32 * s.stride as i32)?;
        a.add(rsi, 32)?;
        a.sub(rdx, 32)?;
        a.jmp(top)?;
        a.set_label(&mut tail)?;
        a.test(rdx, rdx)?;
        a.jz(done)?;
        // k2 / k3: the first `n` of 32 outputs, split in halves; k4: the bytes they read (n, or 2n - 1 at
        // stride 2).
        // rax = 2^rcx - 1 (rcx < 64).
        let ones = |a: &mut CodeAssembler| -> Result<(), IcedError> {
            a.mov(eax, 1u32)?;
            a.shl(rax, cl)?;
            a.dec(rax)
        };
        a.mov(rcx, rdx)?;
        ones(a)?;
        a.kmovd(k2, eax)?;
        a.kshiftrd(k3, k2, 16)?;
        if s.stride == 2 {
            a.lea(rcx, ptr(rdx + rdx - 1))?;
            ones(a)?;
        }
        a.kmovq(k4, rax)?;
        step(a, true)?;
        a.set_label(&mut done)?;
        a.zero_bytes()
    };
    body(&mut a).map_err(e)?;
    if spilled > 0 {
        super::stack_table_end(&mut a).map_err(e)?;
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The QuantizeLinear row kernel (AVX-512): `fn(x: *const f32, y: *mut u8, n: u64, scale: *const f32, zp:
/// *const i32)` quantises `n` floats with one scale and zero point, 16 per step and the last `n mod 16` under
/// masks: `x / scale` (`vdivps`, the reference's IEEE division), clamped to `[lo - 255, hi + 255]`, rounded
/// half to even (`vcvtps2dq`), plus the zero point, clamped to `[lo, hi]`, NaN lanes set to the zero point,
/// narrowed to `dtype` (u8 or i8) — `ops::quant::emit_quantize`'s Cranelift chain, bit for bit.
pub fn assemble_quantize(dtype: crate::ir::DType) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let (lo, hi) = crate::ir::ops::quant::range_of(dtype).unwrap_or((0, 255));
    let signed = dtype == crate::ir::DType::I8;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        // zmm16 = scale, zmm17 = zero point, zmm18 / zmm19 = the f32 clamp, zmm20 / zmm21 = the integer one.
        a.vbroadcastss(zmm16, dword_ptr(rcx))?;
        a.vpbroadcastd(zmm17, dword_ptr(r8))?;
        for (reg, bits) in [
            (zmm18, ((lo - 255) as f32).to_bits()),
            (zmm19, ((hi + 255) as f32).to_bits()),
            (zmm20, lo as u32),
            (zmm21, hi as u32),
        ] {
            super::broadcast_bits(a, reg, bits)?;
        }
        let step = |a: &mut CodeAssembler, masked: bool| -> Result<(), IcedError> {
            a.vdivps(zmm0, zmm0, zmm16)?;
            a.vcmpps(k1, zmm0, zmm0, 7)?; // ordered: not NaN
            a.vmaxps(zmm0, zmm0, zmm18)?;
            a.vminps(zmm0, zmm0, zmm19)?;
            a.vcvtps2dq(zmm0, zmm0)?;
            a.vpaddd(zmm0, zmm0, zmm17)?;
            a.vpmaxsd(zmm0, zmm0, zmm20)?;
            a.vpminsd(zmm0, zmm0, zmm21)?;
            a.vpblendmd(zmm0.k1(), zmm17, zmm0)?;
            let dst = if masked {
                xmmword_ptr(rsi).k2()
            } else {
                xmmword_ptr(rsi)
            };
            if signed {
                a.vpmovsdb(dst, zmm0)
            } else {
                a.vpmovusdb(dst, zmm0)
            }
        };
        let mut top = a.create_label();
        let mut tail = a.create_label();
        let mut done = a.create_label();
        a.set_label(&mut top)?;
        a.cmp(rdx, 16)?;
        a.jb(tail)?;
        a.vmovups(zmm0, zmmword_ptr(rdi))?;
        step(a, false)?;
        a.add(rdi, 64)?;
        a.add(rsi, 16)?;
        a.sub(rdx, 16)?;
        a.jmp(top)?;
        a.set_label(&mut tail)?;
        a.test(rdx, rdx)?;
        a.jz(done)?;
        super::low_mask(a, k2, edx)?;
        a.vmovups(zmm0.k2().z(), zmmword_ptr(rdi))?;
        step(a, true)?;
        a.set_label(&mut done)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{exec, skip_without_avx512};
    use crate::ir::ops::quant::quantize_one;
    use crate::ir::DType;

    /// The QuantizeLinear row kernel against `quantize_one`, bitwise: NaNs, infinities, signed zeros, ties at
    /// every scale (x.5 steps), values past both saturation points and far past the f32 clamp, random values;
    /// u8 and i8 with zero points at and inside the ends; every count up to 40 (full steps and masked tails,
    /// the byte after the last output untouched).
    #[test]
    fn quantize_row_matches_the_reference() {
        if skip_without_avx512("QuantizeLinear row kernel") {
            return;
        }
        type F = extern "sysv64" fn(*const f32, *mut u8, u64, *const f32, *const i32);
        let mut xs = vec![
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            1e30,
            -1e30,
            f32::MAX,
            f32::MIN_POSITIVE,
        ];
        for k in -600..600 {
            xs.push(k as f32 * 0.5);
        }
        let mut r = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..500 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            xs.push(((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 700.0);
        }
        for (dtype, zps) in [(DType::U8, [0, 128, 255]), (DType::I8, [-128, 0, 127])] {
            let f: F = unsafe {
                // SAFETY: the assembled function's System V signature.
                std::mem::transmute(exec(&super::assemble_quantize(dtype).unwrap()))
            };
            let signed = dtype == DType::I8;
            for scale in [1.0f32, 0.5, 0.1, 3.0, 1e-3] {
                for zp in zps {
                    let mut out = vec![0xa5u8; xs.len() + 1];
                    f(xs.as_ptr(), out.as_mut_ptr(), xs.len() as u64, &scale, &zp);
                    for (i, &x) in xs.iter().enumerate() {
                        let want = quantize_one(x, scale, zp, signed);
                        let got = if signed {
                            out[i] as i8 as i32
                        } else {
                            out[i] as i32
                        };
                        assert_eq!(got, want, "{x} / {scale} + {zp} ({dtype:?})");
                    }
                    assert_eq!(out[xs.len()], 0xa5, "wrote past the end");
                    for n in 0..40usize {
                        let mut out = vec![0xa5u8; n + 1];
                        f(xs.as_ptr(), out.as_mut_ptr(), n as u64, &scale, &zp);
                        for i in 0..n {
                            let want = quantize_one(xs[i], scale, zp, signed);
                            let got = if signed {
                                out[i] as i8 as i32
                            } else {
                                out[i] as i32
                            };
                            assert_eq!(got, want, "n = {n}, lane {i}");
                        }
                        assert_eq!(out[n], 0xa5, "n = {n}: wrote past the end");
                    }
                }
            }
        }
    }
}
