//! The machine-code micro-kernels of the integer GEMM: `assemble_avx2` (i16 pairs, `vpmaddwd`, for targets
//! without VNNI) and the AVX-512 VNNI one, assembled with `iced-x86` like the f32 ones
//! (`gemm_x86.rs`). `fn(a: *const i8, b: *const u8, c: *mut i32)` (System V; caller-saved registers only)
//! computes a `rows x 32` tile of `Σ_p A[r][p] · B[p][j]` over `4 · kq` reduction steps and stores (or, for a
//! later K block, adds to) it in `c` (row stride 32 i32). A is the compile-time weight matrix, s8, row stride
//! `a_rs` bytes, K padded with zeros to a multiple of 4; B is the unit's packed panel, u8, `[kq][32][4]`: four
//! consecutive K values of one column per 32-bit lane. Each step loads two zmm of B and issues one `vpdpbusd`
//! per (row, vector) with A's four bytes broadcast from memory (`{1to16}`): sixteen i32 accumulators, 1024
//! multiply-adds per step. `vpdpbusd` sums exactly and wraps, so the tile equals the reference's i32 sums; the
//! caller folds the activation zero point into the bias (`-x_zp · Σ_p A[r][p]`). The last K block of a full,
//! contiguous tile can instead end with the requantising store (`QEpilogue`, `fn(a, b, c, bias, scale)`):
//! eight instructions per 16 outputs, straight from the accumulators to the u8 / i8 output.

use iced_x86::code_asm::*;

/// Tile columns (two zmm of i32).
pub const NR: usize = 32;
/// Most tile rows.
pub const MR: usize = 8;

/// The requantising store a micro-kernel can end with instead of storing its i32 sums: per row `r`,
/// `y = cvt_rne(min(max(f32(acc + bias[r]) · scale[r], lo - zp), hi - zp)) + zp`, narrowed to u8 / i8 and
/// stored at `c + r · c_rs` (the reference's requantisation, `ir/ops/quant.rs`; `vcvtps2dq` rounds half to even
/// under the default MXCSR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QEpilogue {
    /// C's row stride in bytes.
    pub c_rs: usize,
    /// Output zero point.
    pub zero_point: i32,
    /// Output clamp.
    pub clamp: (i32, i32),
    /// i8 output (else u8).
    pub signed: bool,
}

/// One VNNI micro-kernel's compile-time shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QMicroSpec {
    /// Rows (1..=MR).
    pub rows: usize,
    /// Reduction steps of four.
    pub kq: usize,
    /// A's row stride in bytes.
    pub a_rs: usize,
    /// Add to the tile in `c` instead of overwriting it.
    pub accumulate: bool,
    /// Requantise and store to C (`fn(a, b, c, bias, scale)`) instead of storing the i32 sums.
    pub epilogue: Option<QEpilogue>,
}

const ZMM: [AsmRegisterZmm; 32] = [
    zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13, zmm14,
    zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21, zmm22, zmm23, zmm24, zmm25, zmm26, zmm27,
    zmm28, zmm29, zmm30, zmm31,
];

/// Whether the shape fits the encodings (32-bit displacements).
pub fn fits(m: &QMicroSpec) -> bool {
    (1..=MR).contains(&m.rows)
        && m.kq >= 1
        && m.a_rs
            .checked_mul(MR)
            .is_some_and(|x| i32::try_from(x).is_ok())
        && m.epilogue.is_none_or(|q| {
            q.c_rs
                .checked_mul(MR)
                .is_some_and(|x| i32::try_from(x).is_ok())
        })
}

/// Assembles the micro-kernel; `Err` only on an assembler failure (a bundlec bug).
pub fn assemble(m: &QMicroSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !fits(m) {
        return Err(format!("VNNI micro-kernel shape out of range: {m:?}"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let at = |r: usize, v: usize| ((r * NR + v * 16) * 4) as i32;
    for r in 0..m.rows {
        for v in 0..2 {
            let k = r * 2 + v;
            if m.accumulate {
                a.vmovdqu32(ZMM[k], zmmword_ptr(rdx + at(r, v)))
                    .map_err(e)?;
            } else {
                a.vpxord(ZMM[k], ZMM[k], ZMM[k]).map_err(e)?;
            }
        }
    }
    a.mov(r9, m.kq as u64).map_err(e)?;
    let mut top = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.vmovdqu32(ZMM[28], zmmword_ptr(rsi)).map_err(e)?;
    a.vmovdqu32(ZMM[29], zmmword_ptr(rsi + 64)).map_err(e)?;
    for r in 0..m.rows {
        let off = (r * m.a_rs) as i32;
        for v in 0..2 {
            a.vpdpbusd(ZMM[r * 2 + v], ZMM[28 + v], dword_bcst(rdi + off))
                .map_err(e)?;
        }
    }
    a.add(rsi, 128).map_err(e)?;
    a.add(rdi, 4).map_err(e)?;
    a.dec(r9).map_err(e)?;
    a.jne(top).map_err(e)?;
    match m.epilogue {
        None => {
            for r in 0..m.rows {
                for v in 0..2 {
                    a.vmovdqu32(zmmword_ptr(rdx + at(r, v)), ZMM[r * 2 + v])
                        .map_err(e)?;
                }
            }
        }
        Some(q) => {
            // rcx = bias (i32 per row), r8 = scale (f32 per row); zmm24..26 hold lo - zp, hi - zp, zp.
            let lo = (q.clamp.0 as f64 - q.zero_point as f64) as f32;
            let hi = (q.clamp.1 as f64 - q.zero_point as f64) as f32;
            for (reg, bits) in [
                (ZMM[24], lo.to_bits()),
                (ZMM[25], hi.to_bits()),
                (ZMM[26], q.zero_point as u32),
            ] {
                a.mov(eax, bits).map_err(e)?;
                a.vpbroadcastd(reg, eax).map_err(e)?;
            }
            for r in 0..m.rows {
                for v in 0..2 {
                    let x = ZMM[r * 2 + v];
                    a.vpaddd(x, x, dword_bcst(rcx + (r * 4) as i32))
                        .map_err(e)?;
                    a.vcvtdq2ps(x, x).map_err(e)?;
                    a.vmulps(x, x, dword_bcst(r8 + (r * 4) as i32)).map_err(e)?;
                    a.vmaxps(x, x, ZMM[24]).map_err(e)?;
                    a.vminps(x, x, ZMM[25]).map_err(e)?;
                    a.vcvtps2dq(x, x).map_err(e)?;
                    a.vpaddd(x, x, ZMM[26]).map_err(e)?;
                    let dst = xmmword_ptr(rdx + (r * q.c_rs + v * 16) as i32);
                    if q.signed {
                        a.vpmovsdb(dst, x).map_err(e)?;
                    } else {
                        a.vpmovusdb(dst, x).map_err(e)?;
                    }
                }
            }
        }
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The AVX-512 QAdd kernel `fn(a: *const u8, b: *const u8, y: *mut u8, blocks: u64)` over `16 · blocks`
/// elements: widen (`vpmov[sz]xbd`), subtract the zero points, convert, scale, add, divide by the output scale,
/// clamp to `[lo - zy, hi - zy]`, round half to even (`vcvtps2dq`), add `zy`, narrow — the f32 chain of
/// `ir/ops/quant.rs::qadd_one`, operation for operation.
pub fn assemble_qadd(p: &crate::ir::QAddParams, signed: [bool; 2]) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let lo = (p.clamp.0 as f64 - p.y.1 as f64) as f32;
    let hi = (p.clamp.1 as f64 - p.y.1 as f64) as f32;
    // zmm16.. hold the constants: za, sa, zb, sb, sy, lo, hi, zy.
    let consts = [
        p.a.1 as u32,
        p.a.0.to_bits(),
        p.b.1 as u32,
        p.b.0.to_bits(),
        p.y.0.to_bits(),
        lo.to_bits(),
        hi.to_bits(),
        p.y.1 as u32,
    ];
    for (i, bits) in consts.iter().enumerate() {
        a.mov(eax, *bits).map_err(e)?;
        a.vpbroadcastd(ZMM[16 + i], eax).map_err(e)?;
    }
    let mut done = a.create_label();
    a.test(rcx, rcx).map_err(e)?;
    a.je(done).map_err(e)?;
    let mut top = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    for (v, (src, s)) in [(rdi, signed[0]), (rsi, signed[1])].into_iter().enumerate() {
        let x = ZMM[v];
        if s {
            a.vpmovsxbd(x, xmmword_ptr(src)).map_err(e)?;
        } else {
            a.vpmovzxbd(x, xmmword_ptr(src)).map_err(e)?;
        }
        a.vpsubd(x, x, ZMM[16 + 2 * v]).map_err(e)?;
        a.vcvtdq2ps(x, x).map_err(e)?;
        a.vmulps(x, x, ZMM[17 + 2 * v]).map_err(e)?;
    }
    if p.mul {
        a.vmulps(zmm0, zmm0, zmm1).map_err(e)?;
    } else {
        a.vaddps(zmm0, zmm0, zmm1).map_err(e)?;
    }
    a.vdivps(zmm0, zmm0, ZMM[20]).map_err(e)?;
    a.vmaxps(zmm0, zmm0, ZMM[21]).map_err(e)?;
    a.vminps(zmm0, zmm0, ZMM[22]).map_err(e)?;
    a.vcvtps2dq(zmm0, zmm0).map_err(e)?;
    a.vpaddd(zmm0, zmm0, ZMM[23]).map_err(e)?;
    if p.dtype == crate::ir::DType::I8 {
        a.vpmovsdb(xmmword_ptr(rdx), zmm0).map_err(e)?;
    } else {
        a.vpmovusdb(xmmword_ptr(rdx), zmm0).map_err(e)?;
    }
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

/// The stride-1 depthwise row kernel (AVX-512BW): `fn(x, y, chunks, w, bias, scale)` computes `32 · chunks`
/// consecutive outputs of one channel's output row. `x` points at the input byte under tap (0, 0) of the first
/// output, `w` at the channel's `kh · kw` i8 taps, `bias` / `scale` at its i32 bias and f32 scale. Per chunk and
/// tap: 32 bytes widened to i16 (`vpmov[sz]xbw`), minus the zero point, times the tap (`vpmullw`: exact, both fit
/// and so does the product), widened to i32 and summed; then the requantisation of `qconv` and a narrowing
/// store. Taps live in registers, so at most 16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DwRowSpec {
    /// Kernel (KH, KW), KH · KW ≤ 16.
    pub kernel: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Input row stride in bytes.
    pub w: usize,
    /// i8 input (else u8) and its zero point.
    pub x: (bool, i32),
    /// Output zero point and clamp, i8 output (else u8).
    pub y: (i32, (i32, i32), bool),
}

/// Assembles the depthwise row kernel.
pub fn assemble_dw_row(s: &DwRowSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let [kh, kw] = s.kernel;
    let taps = kh * kw;
    let span = ((kh - 1) * s.dilations[0])
        .checked_mul(s.w)
        .and_then(|v| v.checked_add((kw - 1) * s.dilations[1] + 32));
    if taps == 0 || taps > 16 || span.is_none_or(|v| i32::try_from(v).is_err()) {
        return Err(format!("depthwise row kernel shape out of range: {s:?}"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // zmm6 = x zero point (words), zmm7/8 = lo - zp / hi - zp (f32), zmm9 = zp (dwords), zmm10.. = taps (words),
    // zmm26 = bias, zmm27 = scale.
    a.mov(eax, s.x.1 as u32).map_err(e)?;
    a.vpbroadcastw(zmm6, eax).map_err(e)?;
    let (zp, (lo, hi), _) = s.y;
    for (reg, bits) in [
        (zmm7, ((lo as f64 - zp as f64) as f32).to_bits()),
        (zmm8, ((hi as f64 - zp as f64) as f32).to_bits()),
        (zmm9, zp as u32),
    ] {
        a.mov(eax, bits).map_err(e)?;
        a.vpbroadcastd(reg, eax).map_err(e)?;
    }
    for t in 0..taps {
        a.movsx(eax, byte_ptr(rcx + t as i32)).map_err(e)?;
        a.vpbroadcastw(ZMM[10 + t], eax).map_err(e)?;
    }
    a.vpbroadcastd(zmm26, dword_ptr(r8)).map_err(e)?;
    a.vpbroadcastd(zmm27, dword_ptr(r9)).map_err(e)?;
    let mut done = a.create_label();
    a.test(rdx, rdx).map_err(e)?;
    a.je(done).map_err(e)?;
    let mut top = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.vpxord(zmm0, zmm0, zmm0).map_err(e)?;
    a.vpxord(zmm1, zmm1, zmm1).map_err(e)?;
    for ky in 0..kh {
        for kx in 0..kw {
            let off = (ky * s.dilations[0] * s.w + kx * s.dilations[1]) as i32;
            if s.x.0 {
                a.vpmovsxbw(zmm2, ymmword_ptr(rdi + off)).map_err(e)?;
            } else {
                a.vpmovzxbw(zmm2, ymmword_ptr(rdi + off)).map_err(e)?;
            }
            a.vpsubw(zmm2, zmm2, zmm6).map_err(e)?;
            a.vpmullw(zmm2, zmm2, ZMM[10 + ky * kw + kx]).map_err(e)?;
            a.vpmovsxwd(zmm4, ymm2).map_err(e)?;
            a.vextracti64x4(ymm5, zmm2, 1).map_err(e)?;
            a.vpmovsxwd(zmm5, ymm5).map_err(e)?;
            a.vpaddd(zmm0, zmm0, zmm4).map_err(e)?;
            a.vpaddd(zmm1, zmm1, zmm5).map_err(e)?;
        }
    }
    for (h, x) in [zmm0, zmm1].into_iter().enumerate() {
        a.vpaddd(x, x, zmm26).map_err(e)?;
        a.vcvtdq2ps(x, x).map_err(e)?;
        a.vmulps(x, x, zmm27).map_err(e)?;
        a.vmaxps(x, x, zmm7).map_err(e)?;
        a.vminps(x, x, zmm8).map_err(e)?;
        a.vcvtps2dq(x, x).map_err(e)?;
        a.vpaddd(x, x, zmm9).map_err(e)?;
        let dst = xmmword_ptr(rsi + (h * 16) as i32);
        if s.y.2 {
            a.vpmovsdb(dst, x).map_err(e)?;
        } else {
            a.vpmovusdb(dst, x).map_err(e)?;
        }
    }
    a.add(rdi, 32).map_err(e)?;
    a.add(rsi, 32).map_err(e)?;
    a.dec(rdx).map_err(e)?;
    a.jne(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Rows of the AVX2 pair micro-kernel (eight ymm accumulators).
pub const MR_AVX2: usize = 8;

/// The AVX2 micro-kernel of the i16-pair integer GEMM (targets without VNNI): `fn(a: *const i32, b: *const i16,
/// c: *mut i32)` computes `rows x 8` sums over `kp` pair steps — per step one ymm of B (eight columns of
/// `(B[2p, j] - zb, B[2p+1, j] - zb)`), A's pair word broadcast per row, `vpmaddwd` (exact: both factors fit
/// i16 and no pair sum reaches 2^31) and `vpaddd` — and stores (or adds to) the tile at `c` (row stride 8 i32).
/// `a_rs` is A's row stride in words.
pub fn assemble_avx2(
    rows: usize,
    kp: usize,
    a_rs: usize,
    accumulate: bool,
) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let ok = (1..=MR_AVX2).contains(&rows)
        && kp >= 1
        && a_rs
            .checked_mul(4 * MR_AVX2)
            .is_some_and(|x| i32::try_from(x).is_ok());
    if !ok {
        return Err(format!(
            "AVX2 pair micro-kernel shape out of range: rows {rows} kp {kp} a_rs {a_rs}"
        ));
    }
    const Y: [AsmRegisterYmm; 16] = [
        ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13,
        ymm14, ymm15,
    ];
    let mut a = CodeAssembler::new(64).map_err(e)?;
    for (r, &y) in Y.iter().enumerate().take(rows) {
        if accumulate {
            a.vmovdqu(y, ymmword_ptr(rdx + (r * 32) as i32))
                .map_err(e)?;
        } else {
            a.vpxor(y, y, y).map_err(e)?;
        }
    }
    a.mov(r9, kp as u64).map_err(e)?;
    let mut top = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.vmovdqu(Y[14], ymmword_ptr(rsi)).map_err(e)?;
    for (r, &y) in Y.iter().enumerate().take(rows) {
        a.vpbroadcastd(Y[15], dword_ptr(rdi + (r * a_rs * 4) as i32))
            .map_err(e)?;
        a.vpmaddwd(Y[15], Y[15], Y[14]).map_err(e)?;
        a.vpaddd(y, y, Y[15]).map_err(e)?;
    }
    a.add(rsi, 32).map_err(e)?;
    a.add(rdi, 4).map_err(e)?;
    a.dec(r9).map_err(e)?;
    a.jne(top).map_err(e)?;
    for (r, &y) in Y.iter().enumerate().take(rows) {
        a.vmovdqu(ymmword_ptr(rdx + (r * 32) as i32), y)
            .map_err(e)?;
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    /// Runs the assembled kernel from an executable mapping when this CPU has AVX-512 VNNI.
    #[test]
    fn vnni_tile_equals_the_integer_sums() {
        if !std::arch::is_x86_feature_detected!("avx512vnni") {
            eprintln!("SKIPPED: this CPU lacks AVX-512 VNNI");
            return;
        }
        let (rows, kq) = (5, 7);
        let k = kq * 4;
        let a_rs = k + 4;
        let av: Vec<i8> = (0..rows * a_rs).map(|i| ((i * 37) % 255) as i8).collect();
        let bv: Vec<u8> = (0..kq * NR * 4).map(|i| ((i * 91) % 256) as u8).collect();
        for accumulate in [false, true] {
            let code = assemble(&QMicroSpec {
                rows,
                kq,
                a_rs,
                accumulate,
                epilogue: None,
            })
            .expect("assemble");
            let mut c = vec![3i32; MR * NR];
            // SAFETY: an anonymous RW mapping, filled with the kernel, then made RX and called with buffers of
            // the sizes the kernel reads and writes (rows x kq x 4 of A, kq x 128 bytes of B, rows x 32 of C).
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(p, libc::MAP_FAILED);
                std::ptr::copy_nonoverlapping(code.as_ptr(), p as *mut u8, code.len());
                assert_eq!(
                    libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC),
                    0
                );
                let f: extern "sysv64" fn(*const i8, *const u8, *mut i32) = std::mem::transmute(p);
                f(av.as_ptr(), bv.as_ptr(), c.as_mut_ptr());
                libc::munmap(p, 4096);
            }
            for r in 0..rows {
                for j in 0..NR {
                    let mut s: i32 = if accumulate { 3 } else { 0 };
                    for p in 0..k {
                        let b = bv[(p / 4) * NR * 4 + j * 4 + p % 4] as i32;
                        s = s.wrapping_add(av[r * a_rs + p] as i32 * b);
                    }
                    assert_eq!(c[r * NR + j], s, "row {r} col {j} accumulate {accumulate}");
                }
            }
        }
    }
}
