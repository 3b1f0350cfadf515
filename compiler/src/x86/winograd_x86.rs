//! AVX-512 transforms of the Winograd F(2x2, 3x3) convolution (`ops/winograd.rs`), sixteen tiles per `zmm`.
//!
//! Input transform `fn(p: *const f32, v: *mut f32, tiles: u64)`: `p` is row 2·ty of a zero-padded input plane
//! (row stride `pw` floats), the tiles of one tile row start at its column 0 and step by 2. For each block of
//! 16 tiles it loads the 4x4 patches' columns with two loads per patch row and column pair and `vpermt2ps`
//! (even / odd lanes), computes `V = Bᵀ d B` with `Bᵀ = [[1, 0, −1, 0], [0, 1, 1, 0], [0, −1, 1, 0], [0, 1, 0,
//! −1]]` and stores the 16 elements ξ = 4i + j at `v + ξ·v_stride` (floats), the last block under a tile mask.
//!
//! Output transform `fn(m: *const f32, y: *mut f32, bias: *const f32, tiles: u64)`: `m` holds the 16 GEMM
//! products of the tile row at `m + ξ·m_stride`; it computes `Y = Aᵀ M A` with `Aᵀ = [[1, 1, 1, 0], [0, 1, −1,
//! −1]]`, adds `bias[0]` (when present), clamps (NaN kept), interleaves the tiles' two columns and stores
//! `rows` output rows of `cols` columns at `y` (row stride `cols`), masked past `cols`.

use super::ZMM;
use iced_x86::code_asm::*;

/// The input transform's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WinoIn {
    /// Padded plane row stride (floats).
    pub pw: usize,
    /// Distance between the transformed planes (floats).
    pub v_stride: usize,
}

/// The output transform's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WinoOut {
    /// Distance between the product planes (floats).
    pub m_stride: usize,
    /// Output columns (the row stride of `y`).
    pub cols: usize,
    /// Output rows written: the tile's (2 for F(2x2), 4 for F(4x4)), or fewer for the last tile row of a height
    /// that is not a multiple of the tile.
    pub rows: usize,
    /// Whether `bias` points to the channel's bias.
    pub bias: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
}

/// A Winograd transform's displacement of `floats` (both tile sizes).
pub(super) fn disp(floats: usize) -> Result<i32, String> {
    super::disp("Winograd transform", floats)
}

/// Assembles the input transform.
pub fn assemble_in(s: &WinoIn) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let row = (0..4)
        .map(|i| disp(i * s.pw))
        .collect::<Result<Vec<_>, _>>()?;
    let vs = (0..16)
        .map(|x| disp(x * s.v_stride))
        .collect::<Result<Vec<_>, _>>()?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut table, mut table2) = (a.create_label(), a.create_label());
    let mut top = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.test(rdx, rdx).map_err(e)?;
    a.jz(done).map_err(e)?;
    super::block_mask(&mut a, k1, rdx).map_err(e)?;
    // zmm30 / zmm31: even / odd lane indices of a 32-float pair (reloaded per block: the transform uses them).
    a.vmovups(zmm30, zmmword_ptr(table)).map_err(e)?;
    a.vmovups(zmm31, zmmword_ptr(table2)).map_err(e)?;
    // d[i][j] in zmm(4i + j): patch row i, column j of the 16 tiles (columns 2t + j of the row).
    for (i, &r) in row.iter().enumerate() {
        a.vmovups(zmm16, zmmword_ptr(rdi + r)).map_err(e)?;
        a.vmovups(zmm17, zmmword_ptr(rdi + r + 64)).map_err(e)?;
        a.vmovups(zmm18, zmmword_ptr(rdi + r + 8)).map_err(e)?;
        a.vmovups(zmm19, zmmword_ptr(rdi + r + 72)).map_err(e)?;
        for (j, (lo, hi, idx)) in [
            (zmm16, zmm17, zmm30),
            (zmm16, zmm17, zmm31),
            (zmm18, zmm19, zmm30),
            (zmm18, zmm19, zmm31),
        ]
        .into_iter()
        .enumerate()
        {
            let d = ZMM[4 * i + j];
            a.vmovaps(d, idx).map_err(e)?;
            a.vpermi2ps(d, lo, hi).map_err(e)?;
        }
    }
    // Rows: t0 = d0 − d2, t1 = d1 + d2, t2 = d2 − d1, t3 = d1 − d3 (per column j), into zmm16.. (4i + j).
    for j in 0..4 {
        let d = |i: usize| ZMM[4 * i + j];
        let t = |i: usize| ZMM[16 + 4 * i + j];
        a.vsubps(t(0), d(0), d(2)).map_err(e)?;
        a.vaddps(t(1), d(1), d(2)).map_err(e)?;
        a.vsubps(t(2), d(2), d(1)).map_err(e)?;
        a.vsubps(t(3), d(1), d(3)).map_err(e)?;
    }
    // Columns, the same combination over j, stored at ξ = 4i + j.
    for i in 0..4 {
        let t = |j: usize| ZMM[16 + 4 * i + j];
        let v = |j: usize| ZMM[4 * i + j];
        a.vsubps(v(0), t(0), t(2)).map_err(e)?;
        a.vaddps(v(1), t(1), t(2)).map_err(e)?;
        a.vsubps(v(2), t(2), t(1)).map_err(e)?;
        a.vsubps(v(3), t(1), t(3)).map_err(e)?;
        for j in 0..4 {
            a.vmovups(zmmword_ptr(rsi + vs[4 * i + j]).k1(), v(j))
                .map_err(e)?;
        }
    }
    a.add(rdi, 128).map_err(e)?;
    a.add(rsi, 64).map_err(e)?;
    a.sub(rdx, 16).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    let even: Vec<u8> = (0..16u32).flat_map(|i| (2 * i).to_le_bytes()).collect();
    let odd: Vec<u8> = (0..16u32).flat_map(|i| (2 * i + 1).to_le_bytes()).collect();
    a.db(&even).map_err(e)?;
    a.set_label(&mut table2).map_err(e)?;
    a.db(&odd).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The `vpermi2ps` indices interleaving two vectors' lanes `base..base + 8` (`base` 0: the low halves, 8: the
/// high): lane `l` takes lane `base + l/2` of the first operand (`l` even) or the second (`l` odd), so output
/// column 2t + c takes lane t of y_c.
pub(super) fn pair_table(base: u32) -> Vec<u8> {
    (0..16u32)
        .flat_map(|l| (base + l / 2 + 16 * (l % 2)).to_le_bytes())
        .collect()
}

/// Assembles the output transform.
pub fn assemble_out(s: &WinoOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !(1..=2).contains(&s.rows) {
        return Err(format!("Winograd output rows out of range: {s:?}"));
    }
    let ms = (0..16)
        .map(|x| disp(x * s.m_stride))
        .collect::<Result<Vec<_>, _>>()?;
    let row1 = disp(s.cols)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut table, mut table2) = (a.create_label(), a.create_label());
    // zmm26 bias, zmm27 lo, zmm28 hi, zmm30 / zmm31 interleave indices (low / high halves).
    if s.bias {
        a.vbroadcastss(zmm26, dword_ptr(rdx)).map_err(e)?;
    }
    for (reg, c) in [(zmm27, s.lo), (zmm28, s.hi)] {
        if let Some(bits) = c {
            super::broadcast_bits(&mut a, reg, bits).map_err(e)?;
        }
    }
    a.vmovups(zmm30, zmmword_ptr(table)).map_err(e)?;
    a.vmovups(zmm31, zmmword_ptr(table2)).map_err(e)?;
    // r8: output columns left; tiles left in rcx → r9.
    a.mov(r9, rcx).map_err(e)?;
    a.mov(r8, s.cols as u64).map_err(e)?;
    let mut top = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.test(r9, r9).map_err(e)?;
    a.jz(done).map_err(e)?;
    super::block_mask(&mut a, k1, r9).map_err(e)?;
    for (x, &off) in ms.iter().enumerate() {
        a.vmovups(ZMM[x].k1().z(), zmmword_ptr(rdi + off))
            .map_err(e)?;
    }
    // Rows of Aᵀ M: r0 = m0 + m1 + m2, r1 = m1 − m2 − m3 (per column j), into zmm16.. (4i + j, i < 2).
    for j in 0..4 {
        let m = |i: usize| ZMM[4 * i + j];
        let (r0, r1) = (ZMM[16 + j], ZMM[20 + j]);
        a.vaddps(r0, m(0), m(1)).map_err(e)?;
        a.vaddps(r0, r0, m(2)).map_err(e)?;
        a.vsubps(r1, m(1), m(2)).map_err(e)?;
        a.vsubps(r1, r1, m(3)).map_err(e)?;
    }
    // Output row i: even columns y0 = r0 + r1 + r2, odd columns y1 = r1 − r2 − r3.
    // Lanes: the first 16 output columns from the interleave of y0/y1's low halves, the next 16 from the high.
    // k4 / k5: the columns of the two stores that are below `cols` (k2 is the clamp's).
    super::column_masks(&mut a, r8, &[k4, k5]).map_err(e)?;
    for i in 0..s.rows {
        let r = |j: usize| ZMM[16 + 4 * i + j];
        let (y0, y1) = (ZMM[24], ZMM[25]);
        a.vaddps(y0, r(0), r(1)).map_err(e)?;
        a.vaddps(y0, y0, r(2)).map_err(e)?;
        a.vsubps(y1, r(1), r(2)).map_err(e)?;
        a.vsubps(y1, y1, r(3)).map_err(e)?;
        for y in [y0, y1] {
            if s.bias {
                a.vaddps(y, y, zmm26).map_err(e)?;
            }
            super::clamp_keep_nan(&mut a, y, s.lo.map(|b| (zmm27, b)), s.hi.map(|_| zmm28))
                .map_err(e)?;
        }
        let base = if i == 0 { 0 } else { row1 };
        for (idx, off) in [(zmm30, 0), (zmm31, 64)] {
            a.vmovaps(zmm8, idx).map_err(e)?;
            a.vpermi2ps(zmm8, y0, y1).map_err(e)?;
            let at = zmmword_ptr(rsi + base + off);
            let at = if off == 0 { at.k4() } else { at.k5() };
            a.vmovups(at, zmm8).map_err(e)?;
        }
    }
    a.add(rdi, 64).map_err(e)?;
    a.add(rsi, 128).map_err(e)?;
    a.sub(r8, 32).map_err(e)?;
    a.sub(r9, 16).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    a.db(&pair_table(0)).map_err(e)?;
    a.set_label(&mut table2).map_err(e)?;
    a.db(&pair_table(8)).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{exec, pattern as val, skip_without_avx512};
    use super::*;

    fn skip() -> bool {
        skip_without_avx512("AVX-512 Winograd F(2x2) transforms")
    }

    /// `Bᵀ d B` per tile, bitwise, for tile counts around the 16-tile blocks; nothing stored past the tiles.
    #[test]
    fn input_transform_matches_the_formula() {
        if skip() {
            return;
        }
        for n in [1usize, 15, 16, 17, 40] {
            let pw = 32 * n.div_ceil(16) + 16;
            let vs = n + 20;
            let f: extern "sysv64" fn(*const f32, *mut f32, u64) =
                // SAFETY: the assembled kernel's System V signature.
                unsafe { std::mem::transmute(exec(&assemble_in(&WinoIn { pw, v_stride: vs }).unwrap())) };
            let p: Vec<f32> = (0..4 * pw).map(val).collect();
            let mut v = vec![-7.0f32; 16 * vs];
            f(p.as_ptr(), v.as_mut_ptr(), n as u64);
            for t in 0..n {
                let d = |i: usize, j: usize| p[i * pw + 2 * t + j];
                let tt: [[f32; 4]; 4] = [
                    std::array::from_fn(|j| d(0, j) - d(2, j)),
                    std::array::from_fn(|j| d(1, j) + d(2, j)),
                    std::array::from_fn(|j| d(2, j) - d(1, j)),
                    std::array::from_fn(|j| d(1, j) - d(3, j)),
                ];
                for (i, r) in tt.iter().enumerate() {
                    let want = [r[0] - r[2], r[1] + r[2], r[2] - r[1], r[1] - r[3]];
                    for (j, w) in want.iter().enumerate() {
                        assert_eq!(
                            v[(4 * i + j) * vs + t].to_bits(),
                            w.to_bits(),
                            "n {n} t {t}"
                        );
                    }
                }
            }
            for x in 0..16 {
                assert!(
                    v[x * vs + n..(x + 1) * vs].iter().all(|&y| y == -7.0),
                    "n {n}: past the tiles"
                );
            }
        }
    }

    /// `Aᵀ M A + bias`, clamped with NaN kept, bitwise; odd widths, one or two rows, nothing stored past `cols`.
    #[test]
    fn output_transform_matches_the_formula() {
        if skip() {
            return;
        }
        for (n, cols, rows) in [
            (1usize, 1usize, 1usize),
            (8, 15, 2),
            (16, 32, 2),
            (17, 33, 1),
            (40, 80, 2),
        ] {
            let ms = n + 3;
            let spec = WinoOut {
                m_stride: ms,
                cols,
                rows,
                bias: true,
                lo: Some(0.0f32.to_bits()),
                hi: Some(6.0f32.to_bits()),
            };
            let f: extern "sysv64" fn(*const f32, *mut f32, *const f32, u64) =
                // SAFETY: the assembled kernel's System V signature.
                unsafe { std::mem::transmute(exec(&assemble_out(&spec).unwrap())) };
            let mut m: Vec<f32> = (0..16 * ms).map(|i| val(i) * 3.0).collect();
            m[2] = f32::NAN;
            let bias = [0.5f32];
            let mut y = vec![-7.0f32; 2 * cols + 40];
            f(m.as_ptr(), y.as_mut_ptr(), bias.as_ptr(), n as u64);
            for t in 0..n {
                let mm = |i: usize, j: usize| m[(4 * i + j) * ms + t];
                let r: Vec<[f32; 4]> = (0..2)
                    .map(|i| {
                        let mut o = [0f32; 4];
                        for (j, x) in o.iter_mut().enumerate() {
                            *x = if i == 0 {
                                mm(0, j) + mm(1, j) + mm(2, j)
                            } else {
                                mm(1, j) - mm(2, j) - mm(3, j)
                            };
                        }
                        o
                    })
                    .collect();
                for (i, ri) in r.iter().enumerate().take(rows) {
                    let ys = [ri[0] + ri[1] + ri[2], ri[1] - ri[2] - ri[3]];
                    for (c, &yc) in ys.iter().enumerate() {
                        let col = 2 * t + c;
                        if col >= cols {
                            continue;
                        }
                        let z = yc + bias[0];
                        let want = if z.is_nan() { z } else { z.clamp(0.0, 6.0) };
                        let got = y[i * cols + col];
                        assert!(
                            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                            "n {n} t {t} row {i} col {col}: {got} vs {want}"
                        );
                    }
                }
            }
            assert!(
                y[rows * cols..].iter().all(|&v| v == -7.0),
                "n {n}: past the rows"
            );
        }
    }
}
