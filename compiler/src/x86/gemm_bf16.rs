//! The bf16 GEMM micro-kernel (AVX-512 BF16, `--precision bf16`): `fn(a, b, c, bias, residual)` (System V)
//! computes a `rows x 32` tile of `C = alpha · A·B (+ bias[j]) (+ residual) ⊓ clamp` with f32 accumulation.
//! A is bf16 rows (`a_rs` bytes apart, K padded to an even count with zeros: `kernel::gemm_bf16::to_bf16_rows`),
//! B a panel of 32 columns of bf16 K pairs (`[kp/2][32][2]`, 128 bytes a pair step: `kernel::gemm_bf16::pack_b`).
//! Per pair step two zmm of B and, per row and half, one `vdpbf16ps` with the row's pair broadcast from memory
//! (`{1to16}`): sixteen f32 accumulators, each lane adding `a[2p]·b[2p][j] + a[2p+1]·b[2p+1][j]`. The epilogue
//! in registers: the scale, the column bias (32 floats at `bias`) or the row bias (one float a row), the
//! residual (row stride `res_rs` floats), the clamp; then the store, under a mask for a tile of fewer than 32
//! columns (`cols`). `assemble_pack` packs a convolution's f32 columns into B panels at run time.

use super::ZMM;
use iced_x86::code_asm::*;

/// Most tile rows (16 of 32 registers accumulate, two hold B, the rest the epilogue's constants).
pub const MR: usize = 8;

/// One micro-kernel's compile-time shape and epilogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bf16Micro {
    /// Tile rows (1..=MR).
    pub rows: usize,
    /// Valid tile columns (1..=32): fewer are stored under masks.
    pub cols: usize,
    /// Pair steps (K padded to even, halved).
    pub pairs: usize,
    /// A's row stride in bytes.
    pub a_rs: usize,
    /// Bytes from one of A's pair steps to the next: 4 in bf16 rows; 128 where A is a packed B panel read
    /// transposed (`kernel::gemm_bf16::GemmBf16Spec::a_panels`: rows 4 bytes apart).
    pub a_ps: usize,
    /// C's row stride in floats.
    pub c_rs: usize,
    /// Floats from a row's first 16 columns to its next 16 in C: 16 row-major; with C stored as channel blocks
    /// (`kernel::gemm_bf16::GemmBf16Spec::c_blocks`) a block's size.
    pub c_vs: usize,
    /// Product scale (f32 bits), when not 1.
    pub scale: Option<u32>,
    /// Add the column bias (`rcx`, at the tile's first column).
    pub bias: bool,
    /// Add a row bias instead (`rcx`, at the tile's first row).
    pub bias_row: bool,
    /// Add the residual (`r8`, at the tile's first element) with this row stride in floats.
    pub res_rs: Option<usize>,
    /// Clamp bounds (f32 bits).
    pub clamp: (Option<u32>, Option<u32>),
}

/// Whether the shape fits the encodings (32-bit displacements).
pub fn fits(m: &Bf16Micro) -> bool {
    fits_rows(m, MR)
}

/// Whether the shape fits a micro-kernel of at most `mr` rows (`gemm_bf16_amx.rs` too): 1 to `mr` rows, 1 to
/// 32 columns, and A's, C's and the residual's row offsets within 32-bit displacements.
pub(super) fn fits_rows(m: &Bf16Micro, mr: usize) -> bool {
    let d = |x: usize| x.checked_mul(mr).is_some_and(|v| i32::try_from(v).is_ok());
    (1..=mr).contains(&m.rows)
        && (1..=32).contains(&m.cols)
        && m.pairs >= 1
        && d(m.a_rs)
        && d(m.c_rs * 4)
        && i32::try_from((m.c_vs + m.c_rs * mr) * 4).is_ok()
        && m.res_rs.is_none_or(|r| d(r * 4))
        && i32::try_from(m.a_ps).is_ok()
}

/// Assembles the micro-kernel; `Err` for a shape out of range (a bundlec bug).
pub fn assemble(m: &Bf16Micro) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !fits(m) {
        return Err(format!("bf16 micro-kernel shape out of range: {m:?}"));
    }
    let vecs = if m.cols > 16 { 2 } else { 1 };
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        for r in 0..m.rows {
            for v in 0..vecs {
                let x = ZMM[r * 2 + v];
                a.vpxord(x, x, x)?;
            }
        }
        a.mov(r9, m.pairs as u64)?;
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        for v in 0..vecs {
            a.vmovups(ZMM[28 + v], zmmword_ptr(rsi + 64 * v as i32))?;
        }
        for r in 0..m.rows {
            let off = (r * m.a_rs) as i32;
            for v in 0..vecs {
                a.vdpbf16ps(ZMM[r * 2 + v], ZMM[28 + v], dword_bcst(rdi + off))?;
            }
        }
        a.add(rsi, 128)?;
        a.add(rdi, m.a_ps as i32)?;
        a.dec(r9)?;
        a.jne(top)?;
        epilogue(a, m, false)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The epilogue of a tile of `m.rows` x 32 sums, in the accumulators `zmm(2r + v)` or (`from_stack`, the AMX
/// kernel's) at `rsp`, 32 floats a row: the scale, the column bias (`rcx`), the residual (`r8`), the clamp, and
/// the store to `rdx`, the columns past `m.cols` under masks.
pub(super) fn epilogue(
    a: &mut CodeAssembler,
    m: &Bf16Micro,
    from_stack: bool,
) -> Result<(), IcedError> {
    // k1 / k2: the valid columns of the two halves.
    let vecs = if m.cols > 16 { 2 } else { 1 };
    let masked = m.cols < 32;
    if masked {
        let bits = (1u64 << m.cols) - 1;
        a.mov(eax, (bits & 0xffff) as u32)?;
        a.kmovw(k1, eax)?;
        a.mov(eax, (bits >> 16) as u32)?;
        a.kmovw(k2, eax)?;
    }
    if let Some(s) = m.scale {
        super::broadcast_bits(a, zmm30, s)?;
    }
    if let Some(lo) = m.clamp.0 {
        super::broadcast_bits(a, zmm26, lo)?;
    }
    if let Some(hi) = m.clamp.1 {
        super::broadcast_bits(a, zmm27, hi)?;
    }
    for v in 0..vecs {
        if m.bias {
            let src = zmmword_ptr(rcx + 64 * v as i32);
            if masked {
                let reg = if v == 0 { ZMM[24].k1() } else { ZMM[25].k2() };
                a.vmovups(reg.z(), src)?;
            } else {
                a.vmovups(ZMM[24 + v], src)?;
            }
        }
    }
    for r in 0..m.rows {
        for v in 0..vecs {
            let x = if from_stack {
                a.vmovups(ZMM[v], zmmword_ptr(rsp + (r * 128 + 64 * v) as i32))?;
                ZMM[v]
            } else {
                ZMM[r * 2 + v]
            };
            if m.scale.is_some() {
                a.vmulps(x, x, zmm30)?;
            }
            if m.bias {
                a.vaddps(x, x, ZMM[24 + v])?;
            }
            if m.bias_row {
                a.vaddps(x, x, dword_bcst(rcx + (r * 4) as i32))?;
            }
            if let Some(rs) = m.res_rs {
                let src = zmmword_ptr(r8 + ((r * rs + 16 * v) * 4) as i32);
                if masked {
                    let reg = if v == 0 { zmm31.k1() } else { zmm31.k2() };
                    a.vmovups(reg.z(), src)?;
                    a.vaddps(x, x, zmm31)?;
                } else {
                    a.vaddps(x, x, src)?;
                }
            }
            if m.clamp.0.is_some() {
                a.vmaxps(x, x, zmm26)?;
            }
            if m.clamp.1.is_some() {
                a.vminps(x, x, zmm27)?;
            }
            let dst = zmmword_ptr(rdx + ((r * m.c_rs + m.c_vs * v) * 4) as i32);
            if masked {
                a.vmovups(if v == 0 { dst.k1() } else { dst.k2() }, x)?;
            } else {
                a.vmovups(dst, x)?;
            }
        }
    }
    Ok(())
}

/// Assembles the row converter `fn(src: *const f32, dst: *mut u16, n: u64, pad: u64)`: `n` floats to bf16
/// (round to nearest even, `vcvtne2ps2bf16`), 32 a step and the rest under a mask, then `pad` zero bf16 (the K
/// pad of a bf16 row).
pub fn assemble_convert() -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        let (mut top, mut tail, mut pad, mut done) = (
            a.create_label(),
            a.create_label(),
            a.create_label(),
            a.create_label(),
        );
        a.set_label(&mut top)?;
        a.cmp(rdx, 32)?;
        a.jb(tail)?;
        a.vmovups(zmm0, zmmword_ptr(rdi))?;
        a.vmovups(zmm1, zmmword_ptr(rdi + 64))?;
        // vcvtne2ps2bf16 dst, hi, lo: the second source fills the low half.
        a.vcvtne2ps2bf16(zmm2, zmm1, zmm0)?;
        a.vmovdqu16(zmmword_ptr(rsi), zmm2)?;
        a.add(rdi, 128)?;
        a.add(rsi, 64)?;
        a.sub(rdx, 32)?;
        a.jmp(top)?;
        a.set_label(&mut tail)?;
        a.test(rdx, rdx)?;
        a.jz(pad)?;
        a.mov(r9d, u32::MAX)?;
        a.bzhi(eax, r9d, edx)?;
        a.kmovd(k1, eax)?;
        a.kshiftrd(k2, k1, 16)?;
        a.vmovups(zmm0.k1().z(), zmmword_ptr(rdi))?;
        a.vmovups(zmm1.k2().z(), zmmword_ptr(rdi + 64))?;
        a.vcvtne2ps2bf16(zmm2, zmm1, zmm0)?;
        a.vmovdqu16(zmmword_ptr(rsi).k1(), zmm2)?;
        a.lea(rsi, ptr(rsi + rdx * 2))?;
        a.set_label(&mut pad)?;
        a.test(rcx, rcx)?;
        a.jz(done)?;
        a.mov(word_ptr(rsi), 0)?;
        a.add(rsi, 2)?;
        a.dec(rcx)?;
        a.jmp(pad)?;
        a.set_label(&mut done)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Assembles the block converter `fn(src: *const f32, dst: *mut u16)`: one 16-channel block `[p][16]` of f32
/// (`src`) into columns 16b..16b+16 of `p` bf16 rows of `c` (`dst` at row 0's column 16b): per pixel one
/// `vcvtneps2bf16` (round to nearest even, as the row converter) and a 32-byte store.
pub fn assemble_blocks_to_rows(c: usize, p: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let row = i32::try_from(c * 2).map_err(|_| format!("bf16 rows of {c} channels"))?;
    if p == 0 || !c.is_multiple_of(16) {
        return Err(format!("bf16 block conversion of {c} channels, {p} pixels"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        let mut top = a.create_label();
        a.mov(rcx, p as u64)?;
        a.set_label(&mut top)?;
        a.vcvtneps2bf16(ymm0, zmmword_ptr(rdi))?;
        a.vmovdqu16(ymmword_ptr(rsi), ymm0)?;
        a.add(rdi, 64)?;
        a.add(rsi, row)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Assembles the panel packer `fn(src: *const f32, dst: *mut u32)`: `cols` (1..=32) columns of `k` rows of
/// floats (`src_rs` apart) into a B panel of `kp / 2` pair steps (`kernel::gemm_bf16::pack_b`'s layout, 128
/// bytes a step): per pair of rows `vcvtne2ps2bf16` of 16 columns of each (masked loads past `cols`) and
/// `vpermw` interleaving them into `(row 2p, row 2p + 1)` words; an odd last row is paired with zeros and the
/// steps past `k` are zero.
pub fn assemble_pack(k: usize, kp: usize, cols: usize, src_rs: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if k == 0 || kp < k || !kp.is_multiple_of(2) || !(1..=32).contains(&cols) {
        return Err(format!("bf16 pack of {k} rows to {kp}, {cols} columns"));
    }
    let row = i32::try_from(src_rs * 4).map_err(|_| format!("bf16 pack row of {src_rs} floats"))?;
    i32::try_from(2 * src_rs * 4).map_err(|_| format!("bf16 pack row of {src_rs} floats"))?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    let mut go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        a.vmovdqu16(zmm31, zmmword_ptr(table))?;
        let masked = cols < 32;
        if masked {
            let bits = (1u64 << cols) - 1;
            a.mov(eax, (bits & 0xffff) as u32)?;
            a.kmovw(k1, eax)?;
            a.mov(eax, (bits >> 16) as u32)?;
            a.kmovw(k2, eax)?;
        }
        // The 16-column halves of a row at `at` into two registers (zero past `cols`).
        let load =
            |a: &mut CodeAssembler, regs: [AsmRegisterZmm; 2], at: i32| -> Result<(), IcedError> {
                for (v, &x) in regs.iter().enumerate() {
                    let src = zmmword_ptr(rdi + at + 64 * v as i32);
                    match (masked, v) {
                        (false, _) => a.vmovups(x, src)?,
                        (true, 0) => a.vmovups(x.k1().z(), src)?,
                        (true, _) if cols > 16 => a.vmovups(x.k2().z(), src)?,
                        (true, _) => a.vpxord(x, x, x)?,
                    }
                }
                Ok(())
            };
        // One pair step from zmm0/1 (row 2p) and zmm2/3 (row 2p + 1) to rsi.
        let step = |a: &mut CodeAssembler| -> Result<(), IcedError> {
            for v in 0..2 {
                a.vcvtne2ps2bf16(zmm4, ZMM[2 + v], ZMM[v])?;
                a.vpermw(zmm4, zmm31, zmm4)?;
                a.vmovdqu32(zmmword_ptr(rsi + 64 * v as i32), zmm4)?;
            }
            a.add(rsi, 128)
        };
        let pairs = k / 2;
        if pairs > 0 {
            a.mov(rcx, pairs as u64)?;
            let mut top = a.create_label();
            a.set_label(&mut top)?;
            load(a, [zmm0, zmm1], 0)?;
            load(a, [zmm2, zmm3], row)?;
            step(a)?;
            a.add(rdi, 2 * row)?;
            a.dec(rcx)?;
            a.jnz(top)?;
        }
        if k % 2 == 1 {
            load(a, [zmm0, zmm1], 0)?;
            a.vpxord(zmm2, zmm2, zmm2)?;
            a.vpxord(zmm3, zmm3, zmm3)?;
            step(a)?;
        }
        a.vpxord(zmm4, zmm4, zmm4)?;
        for _ in k.div_ceil(2)..kp / 2 {
            a.vmovdqu32(zmmword_ptr(rsi), zmm4)?;
            a.vmovdqu32(zmmword_ptr(rsi + 64), zmm4)?;
            a.add(rsi, 128)?;
        }
        a.vzeroupper()?;
        a.ret()?;
        // vpermw's indices: word 2j from the low row (word j), word 2j + 1 from the high one (word 16 + j).
        a.set_label(&mut table)?;
        let idx: Vec<u8> = (0..32u16)
            .map(|w| if w % 2 == 0 { w / 2 } else { 16 + w / 2 })
            .flat_map(|w| w.to_le_bytes())
            .collect();
        a.db(&idx)
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}
