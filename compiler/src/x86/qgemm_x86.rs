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

use super::ZMM;
use crate::kernel::qgemm::vnni::{MR, NR};
use iced_x86::code_asm::*;

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

impl QEpilogue {
    /// Broadcasts the clamp `lo - zp`, `hi - zp` (f32) and the zero point (i32) into `zmm24..26`, where the
    /// requantising int8 kernels (this one, `qgemm_amx.rs`, `qgemv_vnni.rs`, `qconv_transposed.rs`) keep them.
    pub(super) fn broadcast_bounds(&self, a: &mut CodeAssembler) -> Result<(), IcedError> {
        let lo = (self.clamp.0 as f64 - self.zero_point as f64) as f32;
        let hi = (self.clamp.1 as f64 - self.zero_point as f64) as f32;
        for (reg, bits) in [
            (zmm24, lo.to_bits()),
            (zmm25, hi.to_bits()),
            (zmm26, self.zero_point as u32),
        ] {
            super::broadcast_bits(a, reg, bits)?;
        }
        Ok(())
    }
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

/// Whether the shape fits the encodings (32-bit displacements).
pub fn fits(m: &QMicroSpec) -> bool {
    fits_rows(m, MR)
}

/// Whether the shape fits a micro-kernel of at most `mr` rows (`qgemm_amx.rs` too): 1 to `mr` rows, and A's and
/// C's row offsets within 32-bit displacements.
pub(super) fn fits_rows(m: &QMicroSpec, mr: usize) -> bool {
    let d = |rs: usize| rs.checked_mul(mr).is_some_and(|x| i32::try_from(x).is_ok());
    (1..=mr).contains(&m.rows) && m.kq >= 1 && d(m.a_rs) && m.epilogue.is_none_or(|q| d(q.c_rs))
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
            q.broadcast_bounds(&mut a).map_err(e)?;
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

/// Rows of the AVX2 pair micro-kernel (eight ymm accumulators).
pub const MR_AVX2: usize = 8;

/// The AVX2 micro-kernel of the i16-pair integer GEMM (targets without VNNI): `fn(a: *const i32, b: *const i16,
/// c: *mut i32)` computes `rows x 8` sums over `kp` pair steps — per step one ymm of B (eight columns of
/// `(B[2p, j] - zb, B[2p+1, j] - zb)`), A's pair word broadcast per row, `vpmaddwd` (exact: both factors fit
/// i16 and no pair sum reaches 2^31) and `vpaddd` — and stores (or adds to) the tile at `c` (row stride 8 i32).
/// `a_rs` is A's row stride in words. With `epilogue` (one K block, contiguous C) it ends instead with the
/// requantising store of [`QEpilogue`], `fn(a, b, c, bias, scale)`: per row the bias and scale broadcast, the
/// clamp, `vcvtps2dq`, the zero point, and eight bytes stored at `c + r · c_rs`.
pub fn assemble_avx2(
    rows: usize,
    kp: usize,
    a_rs: usize,
    accumulate: bool,
    epilogue: Option<QEpilogue>,
) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let ok = (1..=MR_AVX2).contains(&rows)
        && kp >= 1
        && a_rs
            .checked_mul(4 * MR_AVX2)
            .is_some_and(|x| i32::try_from(x).is_ok())
        && epilogue.is_none_or(|q| {
            !accumulate
                && q.c_rs
                    .checked_mul(MR_AVX2)
                    .is_some_and(|x| i32::try_from(x).is_ok())
        });
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
    match epilogue {
        None => {
            for (r, &y) in Y.iter().enumerate().take(rows) {
                a.vmovdqu(ymmword_ptr(rdx + (r * 32) as i32), y)
                    .map_err(e)?;
            }
        }
        Some(q) => {
            // rcx = bias (i32 per row), r8 = scale (f32 per row); ymm8..10 hold lo - zp, hi - zp, zp.
            let lo = (q.clamp.0 as f64 - q.zero_point as f64) as f32;
            let hi = (q.clamp.1 as f64 - q.zero_point as f64) as f32;
            for (reg, bits) in [
                (Y[8], lo.to_bits()),
                (Y[9], hi.to_bits()),
                (Y[10], q.zero_point as u32),
            ] {
                super::broadcast_bits_ymm(&mut a, reg, bits).map_err(e)?;
            }
            for (r, &y) in Y.iter().enumerate().take(rows) {
                let x = super::xmm_of(y);
                a.vpbroadcastd(Y[15], dword_ptr(rcx + (r * 4) as i32))
                    .map_err(e)?;
                a.vpaddd(y, y, Y[15]).map_err(e)?;
                a.vcvtdq2ps(y, y).map_err(e)?;
                a.vbroadcastss(Y[15], dword_ptr(r8 + (r * 4) as i32))
                    .map_err(e)?;
                a.vmulps(y, y, Y[15]).map_err(e)?;
                a.vmaxps(y, y, Y[8]).map_err(e)?;
                a.vminps(y, y, Y[9]).map_err(e)?;
                a.vcvtps2dq(y, y).map_err(e)?;
                a.vpaddd(y, y, Y[10]).map_err(e)?;
                // Eight dwords in range: the high half beside the low, packed to words, then to bytes.
                a.vextracti128(xmm15, y, 1).map_err(e)?;
                a.vpackssdw(x, x, xmm15).map_err(e)?;
                if q.signed {
                    a.vpacksswb(x, x, x).map_err(e)?;
                } else {
                    a.vpackuswb(x, x, x).map_err(e)?;
                }
                a.vmovq(qword_ptr(rdx + (r * q.c_rs) as i32), x)
                    .map_err(e)?;
            }
        }
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
