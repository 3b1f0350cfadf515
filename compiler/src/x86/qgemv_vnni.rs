//! The AVX-512 VNNI int8 GEMV kernel: a QMatMul of one row (a classifier) as `y[r] = Σ_k w[r][k] · x[k]` over
//! weights packed at compile time in blocks of 16 rows, `[m/16][kp/4][16][4]` (`kernel::qgemv::pack`), so that
//! one zmm load holds four K values of sixteen rows. `fn(w, x, y, rows, bias, scale)` (System V): per block of
//! 16 rows and four K quads, four `vpbroadcastd` of the (u8) activation quads and four `vpdpbusd` with the
//! weights straight from memory into four accumulators (latency hidden, summed at the end); then the bias (which
//! already holds `-zp · Σw`, as the VNNI GEMM's) and either the requantisation of the other int8 kernels or an
//! i32 store. The last block of `rows mod 16` rows loads its bias and scale and stores its outputs under a
//! mask. `x` is `kp` bytes (zero past K, flipped to u8 for i8 activations by the caller).

use super::qgemm_x86::QEpilogue;
use iced_x86::code_asm::*;

/// Rows per block (one zmm of i32 sums).
pub const BLOCK: usize = 16;

/// K granularity: four quads per loop step.
pub const K_STEP: usize = 16;

/// Assembles the kernel for `kp` (a multiple of 16) reduction bytes; `epilogue` None stores i32 sums.
pub fn assemble(kp: usize, epilogue: Option<QEpilogue>) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if kp == 0 || !kp.is_multiple_of(K_STEP) || i32::try_from(kp * BLOCK).is_err() {
        return Err(format!(
            "VNNI GEMV kernel: reduction length {kp} out of range"
        ));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        if let Some(q) = epilogue {
            let lo = (q.clamp.0 as f64 - q.zero_point as f64) as f32;
            let hi = (q.clamp.1 as f64 - q.zero_point as f64) as f32;
            super::broadcast_bits(a, zmm24, lo.to_bits())?;
            super::broadcast_bits(a, zmm25, hi.to_bits())?;
            super::broadcast_bits(a, zmm26, q.zero_point as u32)?;
        }
        // One block: rows' sums into zmm0 (r10 walks x, rax the block's weights).
        let block = |a: &mut CodeAssembler, masked: bool| -> Result<(), IcedError> {
            for acc in [zmm0, zmm1, zmm2, zmm3] {
                a.vpxord(acc, acc, acc)?;
            }
            a.mov(r10, rsi)?;
            a.mov(r11, (kp / K_STEP) as u64)?;
            let mut top = a.create_label();
            a.set_label(&mut top)?;
            for (j, acc) in [zmm0, zmm1, zmm2, zmm3].into_iter().enumerate() {
                let xb = [zmm4, zmm5, zmm6, zmm7][j];
                a.vpbroadcastd(xb, dword_ptr(r10 + 4 * j as i32))?;
                a.vpdpbusd(acc, xb, zmmword_ptr(rdi + 64 * j as i32))?;
            }
            a.add(r10, 16)?;
            a.add(rdi, 256)?;
            a.dec(r11)?;
            a.jne(top)?;
            a.vpaddd(zmm0, zmm0, zmm1)?;
            a.vpaddd(zmm2, zmm2, zmm3)?;
            a.vpaddd(zmm0, zmm0, zmm2)?;
            let bias = if masked {
                a.vmovdqu32(zmm1.k1().z(), zmmword_ptr(r8))?;
                zmm1
            } else {
                a.vmovdqu32(zmm1, zmmword_ptr(r8))?;
                zmm1
            };
            a.vpaddd(zmm0, zmm0, bias)?;
            match epilogue {
                Some(q) => {
                    if masked {
                        a.vmovups(zmm2.k1().z(), zmmword_ptr(r9))?;
                    } else {
                        a.vmovups(zmm2, zmmword_ptr(r9))?;
                    }
                    a.vcvtdq2ps(zmm0, zmm0)?;
                    a.vmulps(zmm0, zmm0, zmm2)?;
                    a.vmaxps(zmm0, zmm0, zmm24)?;
                    a.vminps(zmm0, zmm0, zmm25)?;
                    a.vcvtps2dq(zmm0, zmm0)?;
                    a.vpaddd(zmm0, zmm0, zmm26)?;
                    let dst = if masked {
                        xmmword_ptr(rdx).k1()
                    } else {
                        xmmword_ptr(rdx)
                    };
                    if q.signed {
                        a.vpmovsdb(dst, zmm0)?;
                    } else {
                        a.vpmovusdb(dst, zmm0)?;
                    }
                }
                None => {
                    if masked {
                        a.vmovdqu32(zmmword_ptr(rdx).k1(), zmm0)?;
                    } else {
                        a.vmovdqu32(zmmword_ptr(rdx), zmm0)?;
                    }
                }
            }
            Ok(())
        };
        let ystep = epilogue.map_or(4 * BLOCK, |_| BLOCK) as i32;
        let (mut top, mut tail, mut done) = (a.create_label(), a.create_label(), a.create_label());
        a.set_label(&mut top)?;
        a.cmp(rcx, BLOCK as i32)?;
        a.jb(tail)?;
        block(a, false)?;
        a.add(rdx, ystep)?;
        a.add(r8, 64)?;
        a.add(r9, 64)?;
        a.sub(rcx, BLOCK as i32)?;
        a.jmp(top)?;
        a.set_label(&mut tail)?;
        a.test(rcx, rcx)?;
        a.jz(done)?;
        // k1: the first `rows mod 16` lanes.
        a.mov(eax, u32::MAX)?;
        a.bzhi(eax, eax, ecx)?;
        a.kmovw(k1, eax)?;
        block(a, true)?;
        a.set_label(&mut done)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}
