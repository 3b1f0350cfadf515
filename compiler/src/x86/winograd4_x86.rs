//! AVX-512 transforms of the Winograd F(4x4, 3x3) convolution (`ops/winograd.rs`), sixteen tiles per `zmm`.
//!
//! Input transform `fn(p: *const f32, v: *mut f32, tiles: u64)`: `p` is row 4·ty of a zero-padded input plane
//! (row stride `pw` floats); the tiles of one tile row start at its column 0 and step by 4. For each block of
//! 16 tiles and each of the 6 patch rows it loads 80 floats (five `zmm`), gathers the patches' columns 0–3
//! (stride 4: two `vpermi2ps` and a `vshuff32x4` each) and 4–5 (`valignd` of columns 0–1 by one tile), and
//! applies `Bᵀ` along the row into a 36-vector stack buffer; then `Bᵀ` down each column, storing element
//! ξ = 6a + b at `v + ξ·v_stride` (floats), the last block under a tile mask. `Bᵀ` (points 0, ±1, ±2):
//!
//! ```text
//!   [4  0 −5  0  1  0]     y0 = 4x0 − 5x2 + x4        y3 = (x4 − x2) + 2(x3 − x1)
//!   [0 −4 −4  1  1  0]     y1 = (x4 − 4x2) + (x3 − 4x1)   y4 = (x4 − x2) − 2(x3 − x1)
//!   [0  4 −4 −1  1  0]     y2 = (x4 − 4x2) − (x3 − 4x1)   y5 = 4x1 − 5x3 + x5
//!   [0 −2 −1  2  1  0]
//!   [0  2 −1 −2  1  0]
//!   [0  4  0 −5  0  1]
//! ```
//!
//! Output transform `fn(m: *const f32, y: *mut f32, bias: *const f32, tiles: u64)`: `m` holds the 36 GEMM
//! products of the tile row at `m + ξ·m_stride`; `Aᵀ` down each column into the stack buffer, then per output
//! row `Aᵀ` along it, `bias[0]` (when present), the clamp (NaN kept), and the four columns of the 16 tiles
//! interleaved (`vpermi2ps` pairs, then `vpermi2pd` pairs of pairs) into 64 output floats, stored under
//! masks past `cols`. `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, −1, 2, −2, 0], [0, 1, 1, 4, 4, 0], [0, 1, −1, 8, −8, 1]]`.

use super::winograd_x86::{disp, pair_table, WinoIn, WinoOut};
use super::ZMM;
use iced_x86::code_asm::*;

/// Bytes of the 36-vector stack buffer between the two passes.
const BUF: i32 = 36 * 64;

type R = AsmRegisterZmm;

/// `y = Bᵀ x` for six vectors, `t` four temporaries, `c4` / `c5` the broadcast constants 4 and 5.
fn bt(
    a: &mut CodeAssembler,
    x: [R; 6],
    y: [R; 6],
    t: [R; 4],
    c4: R,
    c5: R,
) -> Result<(), IcedError> {
    a.vmovaps(y[0], x[4])?;
    a.vfnmadd231ps(y[0], x[2], c5)?;
    a.vfmadd231ps(y[0], x[0], c4)?;
    a.vmovaps(y[5], x[5])?;
    a.vfnmadd231ps(y[5], x[3], c5)?;
    a.vfmadd231ps(y[5], x[1], c4)?;
    a.vmovaps(t[0], x[4])?;
    a.vfnmadd231ps(t[0], x[2], c4)?;
    a.vmovaps(t[1], x[3])?;
    a.vfnmadd231ps(t[1], x[1], c4)?;
    a.vaddps(y[1], t[0], t[1])?;
    a.vsubps(y[2], t[0], t[1])?;
    a.vsubps(t[2], x[4], x[2])?;
    a.vsubps(t[3], x[3], x[1])?;
    a.vaddps(t[3], t[3], t[3])?;
    a.vaddps(y[3], t[2], t[3])?;
    a.vsubps(y[4], t[2], t[3])
}

/// `y = Aᵀ x` for six vectors into four, `t` four temporaries, `c2` / `c4` / `c8` broadcast constants.
fn at(a: &mut CodeAssembler, x: [R; 6], y: [R; 4], t: [R; 4], c: [R; 3]) -> Result<(), IcedError> {
    let [s1, d1, s2, d2] = t;
    let [c2, c4, c8] = c;
    a.vaddps(s1, x[1], x[2])?;
    a.vsubps(d1, x[1], x[2])?;
    a.vaddps(s2, x[3], x[4])?;
    a.vsubps(d2, x[3], x[4])?;
    a.vaddps(y[0], x[0], s1)?;
    a.vaddps(y[0], y[0], s2)?;
    a.vmovaps(y[1], d1)?;
    a.vfmadd231ps(y[1], d2, c2)?;
    a.vmovaps(y[2], s1)?;
    a.vfmadd231ps(y[2], s2, c4)?;
    a.vaddps(y[3], x[5], d1)?;
    a.vfmadd231ps(y[3], d2, c8)
}

/// `push rbp; mov rbp, rsp`, `rsp` aligned to `align` bytes with `bytes` of stack buffer below it (the AVX2
/// transforms' frame too).
pub(super) fn prologue(a: &mut CodeAssembler, align: i32, bytes: i32) -> Result<(), IcedError> {
    a.push(rbp)?;
    a.mov(rbp, rsp)?;
    a.and(rsp, -align)?;
    a.sub(rsp, bytes)
}

/// Undoes [`prologue`] and returns.
pub(super) fn epilogue(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.mov(rsp, rbp)?;
    a.pop(rbp)?;
    a.vzeroupper()?;
    a.ret()
}

fn f32_bits(a: &mut CodeAssembler, reg: R, v: f32) -> Result<(), IcedError> {
    super::broadcast_bits(a, reg, v.to_bits())
}

/// Assembles the input transform.
pub fn assemble_in(s: &WinoIn) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let row = (0..6)
        .map(|i| disp(i * s.pw))
        .collect::<Result<Vec<_>, _>>()?;
    let vs = (0..36)
        .map(|x| disp(x * s.v_stride))
        .collect::<Result<Vec<_>, _>>()?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    let (mut top, mut done) = (a.create_label(), a.create_label());
    prologue(&mut a, 64, BUF).map_err(e)?;
    // zmm24..27: the stride-4 gather indices of columns 0..3; zmm28 / zmm29: 4.0 / 5.0.
    a.lea(rax, ptr(table)).map_err(e)?;
    for j in 0..4 {
        a.vmovups(ZMM[24 + j], zmmword_ptr(rax + 64 * j as i32))
            .map_err(e)?;
    }
    f32_bits(&mut a, zmm28, 4.0).map_err(e)?;
    f32_bits(&mut a, zmm29, 5.0).map_err(e)?;
    let x: [R; 6] = std::array::from_fn(|i| ZMM[5 + i]);
    let y: [R; 6] = std::array::from_fn(|i| ZMM[11 + i]);
    let t: [R; 4] = std::array::from_fn(|i| ZMM[17 + i]);
    a.set_label(&mut top).map_err(e)?;
    a.test(rdx, rdx).map_err(e)?;
    a.jz(done).map_err(e)?;
    super::block_mask(&mut a, k1, rdx).map_err(e)?;
    for (i, &r) in row.iter().enumerate() {
        // zmm0..4: floats 0..80 of the row from the block's first tile.
        for (q, &l) in ZMM[..5].iter().enumerate() {
            a.vmovups(l, zmmword_ptr(rdi + r + 64 * q as i32))
                .map_err(e)?;
        }
        for j in 0..4 {
            a.vmovaps(zmm21, ZMM[24 + j]).map_err(e)?;
            a.vpermi2ps(zmm21, zmm0, zmm1).map_err(e)?;
            a.vmovaps(zmm22, ZMM[24 + j]).map_err(e)?;
            a.vpermi2ps(zmm22, zmm2, zmm3).map_err(e)?;
            a.vshuff32x4(x[j], zmm21, zmm22, 0x44).map_err(e)?;
        }
        // Columns 4 and 5: columns 0 and 1 one tile on, the last tile's from floats 64 and 65.
        a.valignd(x[4], zmm4, x[0], 1).map_err(e)?;
        a.valignd(zmm22, zmm4, zmm4, 1).map_err(e)?;
        a.valignd(x[5], zmm22, x[1], 1).map_err(e)?;
        bt(&mut a, x, y, t, zmm28, zmm29).map_err(e)?;
        for (b, &yb) in y.iter().enumerate() {
            a.vmovaps(zmmword_ptr(rsp + 64 * (6 * i + b) as i32), yb)
                .map_err(e)?;
        }
    }
    for b in 0..6 {
        for (i, &xi) in x.iter().enumerate() {
            a.vmovaps(xi, zmmword_ptr(rsp + 64 * (6 * i + b) as i32))
                .map_err(e)?;
        }
        bt(&mut a, x, y, t, zmm28, zmm29).map_err(e)?;
        for (ai, &ya) in y.iter().enumerate() {
            a.vmovups(zmmword_ptr(rsi + vs[6 * ai + b]).k1(), ya)
                .map_err(e)?;
        }
    }
    a.add(rdi, 256).map_err(e)?;
    a.add(rsi, 64).map_err(e)?;
    a.sub(rdx, 16).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    epilogue(&mut a).map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    // Column j: lanes 0..7 take floats j + 4k of the first register pair (lanes 8..15 are not used).
    let idx: Vec<u8> = (0..4u32)
        .flat_map(|j| (0..16u32).map(move |l| j + 4 * (l % 8)))
        .flat_map(u32::to_le_bytes)
        .collect();
    a.db(&idx).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Assembles the output transform.
pub fn assemble_out(s: &WinoOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !(1..=4).contains(&s.rows) {
        return Err(format!("Winograd output rows out of range: {s:?}"));
    }
    let ms = (0..36)
        .map(|x| disp(x * s.m_stride))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = (0..s.rows)
        .map(|p| disp(p * s.cols))
        .collect::<Result<Vec<_>, _>>()?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    prologue(&mut a, 64, BUF).map_err(e)?;
    // zmm14..16: 2, 4, 8; zmm17 bias, zmm18 lo, zmm19 hi; zmm28..31 interleave indices.
    for (reg, v) in [(zmm14, 2.0f32), (zmm15, 4.0), (zmm16, 8.0)] {
        f32_bits(&mut a, reg, v).map_err(e)?;
    }
    if s.bias {
        a.vbroadcastss(zmm17, dword_ptr(rdx)).map_err(e)?;
    }
    for (reg, c) in [(zmm18, s.lo), (zmm19, s.hi)] {
        if let Some(bits) = c {
            super::broadcast_bits(&mut a, reg, bits).map_err(e)?;
        }
    }
    a.lea(rax, ptr(table)).map_err(e)?;
    for q in 0..4 {
        a.vmovups(ZMM[28 + q], zmmword_ptr(rax + 64 * q as i32))
            .map_err(e)?;
    }
    let x: [R; 6] = std::array::from_fn(|i| ZMM[i]);
    let y: [R; 4] = std::array::from_fn(|i| ZMM[6 + i]);
    let t: [R; 4] = std::array::from_fn(|i| ZMM[10 + i]);
    let c = [zmm14, zmm15, zmm16];
    // r8: output columns left; tiles left in rcx → r9.
    a.mov(r9, rcx).map_err(e)?;
    a.mov(r8, s.cols as u64).map_err(e)?;
    let (mut top, mut done) = (a.create_label(), a.create_label());
    a.set_label(&mut top).map_err(e)?;
    a.test(r9, r9).map_err(e)?;
    a.jz(done).map_err(e)?;
    super::block_mask(&mut a, k1, r9).map_err(e)?;
    // Down each column b: the rows of Aᵀ M, into the buffer at 6p + b.
    for b in 0..6 {
        for (ai, &xa) in x.iter().enumerate() {
            a.vmovups(xa.k1().z(), zmmword_ptr(rdi + ms[6 * ai + b]))
                .map_err(e)?;
        }
        at(&mut a, x, y, t, c).map_err(e)?;
        for (p, &yp) in y.iter().enumerate().take(s.rows) {
            a.vmovaps(zmmword_ptr(rsp + 64 * (6 * p + b) as i32), yp)
                .map_err(e)?;
        }
    }
    // k4..k7: the columns of the four stores below `cols` (k2 is the clamp's).
    super::column_masks(&mut a, r8, &[k4, k5, k6, k7]).map_err(e)?;
    for (p, &row) in rows.iter().enumerate() {
        for (b, &xb) in x.iter().enumerate() {
            a.vmovaps(xb, zmmword_ptr(rsp + 64 * (6 * p + b) as i32))
                .map_err(e)?;
        }
        at(&mut a, x, y, t, c).map_err(e)?;
        for &yq in &y {
            if s.bias {
                a.vaddps(yq, yq, zmm17).map_err(e)?;
            }
            super::clamp_keep_nan(&mut a, yq, s.lo.map(|b| (zmm18, b)), s.hi.map(|_| zmm19))
                .map_err(e)?;
        }
        // Pairs (column 0, 1) and (2, 3) of tiles 0..7 / 8..15, then pairs of pairs: output floats 4t + q.
        let pairs = [(zmm21, y[0], y[1], zmm28), (zmm22, y[0], y[1], zmm29)];
        let pairs2 = [(zmm23, y[2], y[3], zmm28), (zmm24, y[2], y[3], zmm29)];
        for (dst, lo, hi, idx) in pairs.into_iter().chain(pairs2) {
            a.vmovaps(dst, idx).map_err(e)?;
            a.vpermi2ps(dst, lo, hi).map_err(e)?;
        }
        for (q, (p01, p23, idx)) in [
            (zmm21, zmm23, zmm30),
            (zmm21, zmm23, zmm31),
            (zmm22, zmm24, zmm30),
            (zmm22, zmm24, zmm31),
        ]
        .into_iter()
        .enumerate()
        {
            a.vmovaps(zmm25, idx).map_err(e)?;
            a.vpermi2pd(zmm25, p01, p23).map_err(e)?;
            let at = zmmword_ptr(rsi + row + 64 * q as i32);
            let at = match q {
                0 => at.k4(),
                1 => at.k5(),
                2 => at.k6(),
                _ => at.k7(),
            };
            a.vmovups(at, zmm25).map_err(e)?;
        }
    }
    a.add(rdi, 64).map_err(e)?;
    a.add(rsi, 256).map_err(e)?;
    a.sub(r8, 64).map_err(e)?;
    a.sub(r9, 16).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    epilogue(&mut a).map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    // Float pairs: lane l of the low / high table takes lane l/2 (+ 8) of the first (l even) or second operand.
    // Pairs of pairs (64-bit lanes): lane l of the low / high table takes pair l/2 (+ 4) of either operand.
    let quad = |base: u32| (0..8u32).map(move |l| u64::from(base + l / 2 + 8 * (l % 2)));
    let mut bytes = pair_table(0);
    bytes.extend(pair_table(8));
    bytes.extend(quad(0).chain(quad(4)).flat_map(u64::to_le_bytes));
    a.db(&bytes).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(super) mod tests {
    use super::super::test_exec::{exec, pattern as val, skip_without_avx512};
    use super::*;

    pub(in crate::x86) const BT: [[f64; 6]; 6] = [
        [4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
        [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
        [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
        [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
        [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
        [0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
    ];
    pub(in crate::x86) const AT: [[f64; 6]; 4] = [
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
        [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
        [0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
    ];

    fn skip() -> bool {
        skip_without_avx512("AVX-512 Winograd F(4x4) transforms")
    }

    /// `Σ_k Σ_l T[a][k]·x(k, l)·T[b][l]` in f64, over the nonzero coefficients (as the kernels: a NaN reaches
    /// only the outputs whose transform uses it).
    fn sandwich<const R: usize>(t: &[[f64; 6]; R], x: impl Fn(usize, usize) -> f64) -> Vec<f64> {
        let mut out = vec![0f64; R * R];
        for a in 0..R {
            for b in 0..R {
                for k in 0..6 {
                    for l in (0..6).filter(|&l| t[a][k] != 0.0 && t[b][l] != 0.0) {
                        out[a * R + b] += t[a][k] * x(k, l) * t[b][l];
                    }
                }
            }
        }
        out
    }

    /// `Bᵀ d B` per tile (within f32 rounding of the f64 product) for tile counts around the 16-tile blocks;
    /// nothing stored past the tiles.
    #[test]
    fn input_transform_matches_the_formula() {
        if skip() {
            return;
        }
        for n in [1usize, 15, 16, 17, 40] {
            let pw = 64 * n.div_ceil(16) + 16;
            let vs = n + 20;
            let code = assemble_in(&WinoIn { pw, v_stride: vs }).unwrap();
            let f: extern "sysv64" fn(*const f32, *mut f32, u64) =
                // SAFETY: the assembled kernel's System V signature.
                unsafe { std::mem::transmute(exec(&code)) };
            let p: Vec<f32> = (0..6 * pw).map(val).collect();
            let mut v = vec![-7.0f32; 36 * vs];
            f(p.as_ptr(), v.as_mut_ptr(), n as u64);
            for t in 0..n {
                let want = sandwich(&BT, |i, j| f64::from(p[i * pw + 4 * t + j]));
                for (xi, w) in want.iter().enumerate() {
                    let got = f64::from(v[xi * vs + t]);
                    assert!(
                        (got - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "n {n} t {t} ξ {xi}: {got} vs {w}"
                    );
                }
            }
            for x in 0..36 {
                assert!(
                    v[x * vs + n..(x + 1) * vs].iter().all(|&y| y == -7.0),
                    "n {n}: past the tiles"
                );
            }
        }
    }

    /// `Aᵀ M A + bias`, clamped with NaN kept; widths that end inside a tile and a 16-tile block, 1 to 4 rows,
    /// nothing stored past `cols` or the rows.
    #[test]
    fn output_transform_matches_the_formula() {
        if skip() {
            return;
        }
        for (n, cols, rows) in [
            (1usize, 1usize, 1usize),
            (4, 15, 4),
            (16, 64, 3),
            (17, 66, 2),
            (40, 159, 4),
        ] {
            let ms = n + 3;
            let spec = WinoOut {
                m_stride: ms,
                cols,
                rows,
                bias: true,
                lo: Some((-6.0f32).to_bits()),
                hi: Some(6.0f32.to_bits()),
            };
            let f: extern "sysv64" fn(*const f32, *mut f32, *const f32, u64) =
                // SAFETY: the assembled kernel's System V signature.
                unsafe { std::mem::transmute(exec(&assemble_out(&spec).unwrap())) };
            let mut m: Vec<f32> = (0..36 * ms).map(|i| val(i) * 0.1).collect();
            m[1] = f32::NAN;
            let bias = [0.5f32];
            let mut y = vec![-7.0f32; 4 * cols + 80];
            f(m.as_ptr(), y.as_mut_ptr(), bias.as_ptr(), n as u64);
            for t in 0..n {
                let mut mm = [[0f64; 6]; 6];
                for (a, row) in mm.iter_mut().enumerate() {
                    for (b, x) in row.iter_mut().enumerate() {
                        *x = f64::from(m[(6 * a + b) * ms + t]);
                    }
                }
                let want = sandwich(&AT, |k, l| mm[k][l]);
                for r in 0..rows {
                    for q in 0..4 {
                        let col = 4 * t + q;
                        if col >= cols {
                            continue;
                        }
                        let z = want[4 * r + q] + 0.5;
                        let got = f64::from(y[r * cols + col]);
                        if z.is_nan() {
                            assert!(got.is_nan(), "n {n} t {t} row {r} col {col}: NaN lost");
                            continue;
                        }
                        let w = z.clamp(-6.0, 6.0);
                        assert!(
                            (got - w).abs() <= 1e-5 * (1.0 + w.abs()),
                            "n {n} t {t} row {r} col {col}: {got} vs {w}"
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
