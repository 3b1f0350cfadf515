//! The AVX-512 VNNI int8 GEMV kernel: a QMatMul of one row (a classifier) as `y[r] = Σ_k w[r][k] · x[k]` over
//! weights packed at compile time in blocks of 16 rows, `[m/16][kp/4][16][4]` (`kernel::qgemv::pack`), so that
//! one zmm load holds four K values of sixteen rows. `fn(w, x, y, rows, bias, scale)` (System V): per block of
//! 16 rows and four K quads, four `vpbroadcastd` of the (u8) activation quads and four `vpdpbusd` with the
//! weights straight from memory into four accumulators (latency hidden, summed at the end); then the bias (which
//! already holds `-zp · Σw`, as the VNNI GEMM's) and either the requantisation of the other int8 kernels or an
//! i32 store. The last block of `rows mod 16` rows loads its bias and scale and stores its outputs under a
//! mask. `x` is `kp` bytes (zero past K, flipped to u8 for i8 activations by the caller).

use super::qgemm_x86::QEpilogue;
use super::quant_x86::{requant_store, RequantRegs};
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
            q.broadcast_bounds(a)?;
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
            // The bias and scale of the block's rows (the last block's under k1, zeros past its rows).
            let rows = |reg: AsmRegisterZmm| if masked { reg.k1().z() } else { reg };
            a.vmovdqu32(rows(zmm1), zmmword_ptr(r8))?;
            match epilogue {
                Some(q) => {
                    a.vmovups(rows(zmm2), zmmword_ptr(r9))?;
                    let dst = if masked {
                        xmmword_ptr(rdx).k1()
                    } else {
                        xmmword_ptr(rdx)
                    };
                    let regs = RequantRegs {
                        bias: Some(zmm1),
                        scale: zmm2,
                        lo: zmm24,
                        hi: zmm25,
                        zp: zmm26,
                    };
                    requant_store(a, zmm0, &regs, dst, q.signed)?;
                }
                None => {
                    a.vpaddd(zmm0, zmm0, zmm1)?;
                    let dst = if masked {
                        zmmword_ptr(rdx).k1()
                    } else {
                        zmmword_ptr(rdx)
                    };
                    a.vmovdqu32(dst, zmm0)?;
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
