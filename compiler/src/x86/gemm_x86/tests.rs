//! The micro-kernels' tests: tiles, K blocks, accumulation, the fused epilogues and the AVX2 tiles against the
//! FMA chain, bitwise.

use super::*;

/// Runs a kernel on A, B and C; `copy` is the sixth argument (the `b_copy` panel, or a prefetch pointer).
fn run(spec: &MicroSpec, av: &[f32], bv: &[f32], c: &mut [f32], copy: &mut [f32]) {
    let code = assemble(spec).unwrap();
    // SAFETY: an anonymous RW mapping, filled, then made RX; the function follows the SysV ABI and touches
    // only the tile of A, B and C (and the copy panel) that the asserts below size.
    unsafe {
        let len = code.len().div_ceil(4096) * 4096;
        let p = libc_mmap(len);
        std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
        libc_mprotect(p, len);
        type Micro = extern "sysv64" fn(*const f32, *const f32, *mut f32, usize, usize, *mut f32);
        let f: Micro = std::mem::transmute(p);
        f(
            av.as_ptr(),
            bv.as_ptr(),
            c.as_mut_ptr(),
            0,
            0,
            copy.as_mut_ptr(),
        );
    }
}
extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn mprotect(addr: *mut u8, len: usize, prot: i32) -> i32;
}
unsafe fn libc_mmap(len: usize) -> *mut u8 {
    // PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS (Linux values).
    unsafe { mmap(std::ptr::null_mut(), len, 3, 0x22, -1, 0) }
}
unsafe fn libc_mprotect(p: *mut u8, len: usize) {
    // PROT_READ | PROT_EXEC.
    assert_eq!(unsafe { mprotect(p, len, 5) }, 0);
}

/// `check_cols` at the variant's tile width and at the narrow 16, each at the standard tile's rows and at the
/// most rows the variant takes (AVX-512: 28 accumulators, two broadcast registers).
fn check(simd: Simd, k: usize, a_rs: usize, a_cs: usize, b_rs: usize, c_rs: usize) {
    // Every width a tile or a column tail takes (`machine_code::tail_cols`).
    for &cols in simd.widths().iter().rev() {
        let fit = |r: &usize| simd.tile_fits(*r, cols);
        for rows in [simd.tile().0, simd.max_rows()].into_iter().filter(fit) {
            check_cols(simd, (rows, cols), k, (a_rs, a_cs, false), b_rs, (c_rs, 0));
        }
    }
}

/// A `[K/16][rows][16]` (`a_k16`, blocks `16·a_cs` apart), every tile height; C with contiguous columns
/// and (`c_block`) as `[N/16][rows][16]`, its blocks `c_block` apart.
fn check_k16(simd: Simd, k: usize, a_cs: usize, b_rs: usize, c_rs: usize) {
    let cols = simd.tile().1;
    for rows in (1..=simd.max_rows()).filter(|&r| simd.tile_fits(r, cols)) {
        for c in [(c_rs, 0), (16, 16 * rows + 7)] {
            check_cols(simd, (rows, simd.tile().1), k, (16, a_cs, true), b_rs, c);
        }
    }
}

fn check_cols(
    simd: Simd,
    (mr, cols): (usize, usize),
    k: usize,
    (a_rs, a_cs, a_k16): (usize, usize, bool),
    b_rs: usize,
    (c_rs, c_block): (usize, usize),
) {
    let ok = match simd {
        Simd::Avx2 => {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        Simd::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
    };
    if !ok || !cfg!(target_os = "linux") {
        eprintln!(
            "SKIPPED: {} micro-kernel (this CPU or OS cannot run it)",
            simd.name()
        );
        return;
    }
    let nr = cols;
    let spec = MicroSpec {
        simd,
        rows: mr,
        cols,
        k,
        a_rs,
        a_cs,
        b_rs,
        c_rs,
        accumulate: false,
        epi: None,
        b_prefetch: if b_rs == nr { 4 } else { 0 },
        // r9 holds whatever the caller left there: a prefetch never faults.
        prefetch_next: b_rs == nr,
        a_prefetch: if a_rs == 1 { 2 * mr } else { 0 },
        b_next_cols: b_rs != nr,
        // B in place leaves its contiguous copy (checked below).
        b_copy: b_rs != nr,
        c_prefetch: b_rs != nr,
        a_k16,
        c_block,
    };
    // A's element (r, p).
    let at = |r: usize, p: usize| match a_k16 {
        true => p / 16 * 16 * a_cs + r * a_rs + p % 16,
        false => r * a_rs + p * a_cs,
    };
    let alen = at(mr - 1, k - 1) + 1;
    // C's element (r, j).
    let c_at = |r: usize, j: usize| r * c_rs + spec.c_col(j);
    // Inexact values (tenths): the sums round, so the order of the additions shows in the bits.
    let av: Vec<f32> = (0..alen)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1)
        .collect();
    let bv: Vec<f32> = (0..(k - 1) * b_rs + nr)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.5)
        .collect();
    let mut c = vec![f32::NAN; c_at(mr - 1, nr - 1) + 1];
    let mut copy = vec![f32::NAN; k * nr];
    run(&spec, &av, &bv, &mut c, &mut copy);
    if spec.b_copy {
        for p in 0..k {
            assert_eq!(
                copy[p * nr..][..nr],
                bv[p * b_rs..][..nr],
                "{simd:?} copy row {p}"
            );
        }
    }
    // A second block over the same A/B continues the chain from C.
    let mut c2 = c.clone();
    run(
        &MicroSpec {
            accumulate: true,
            ..spec
        },
        &av,
        &bv,
        &mut c2,
        &mut copy,
    );
    for r in 0..mr {
        for j in 0..nr {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc = av[at(r, p)].mul_add(bv[p * b_rs + j], acc);
            }
            assert_eq!(c[c_at(r, j)].to_bits(), acc.to_bits(), "{simd:?} r{r} j{j}");
            // A later block: its own chain from +0.0, then added to the sums in C.
            let mut block = 0.0f32;
            for p in 0..k {
                block = av[at(r, p)].mul_add(bv[p * b_rs + j], block);
            }
            let acc = acc + block;
            let got = c2[c_at(r, j)];
            assert_eq!(
                got.to_bits(),
                acc.to_bits(),
                "{simd:?} accumulating r{r} j{j}"
            );
        }
    }
}

/// The fused epilogue: `clamp(scale·acc + bias[r] + res[r][j])` with NaN kept and `max(-0, +0) = +0`, as
/// the Cranelift epilogue computes it (a product, then the additions in order).
fn check_epilogue(simd: Simd, mr: usize, res_block: usize, scale: Option<f32>) {
    let ok = match simd {
        Simd::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
        Simd::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
    };
    if !ok || !cfg!(target_os = "linux") {
        eprintln!(
            "SKIPPED: {} epilogue (this CPU or OS cannot run it)",
            simd.name()
        );
        return;
    }
    let nr = simd.tile().1;
    let (k, c_rs) = (3, nr + 3);
    // A residual with contiguous columns, or in blocks of 16 (`res_block`) like a blocked C.
    let res_rs = if res_block > 0 { 16 } else { nr + 5 };
    let spec = MicroSpec {
        simd,
        rows: mr,
        cols: nr,
        k,
        a_rs: k,
        a_cs: 1,
        b_rs: nr,
        c_rs,
        accumulate: false,
        epi: Some(MicroEpi {
            scale: scale.map(f32::to_bits),
            bias: true,
            bias_col: false,
            res_rs: Some(res_rs),
            res_block,
            lo: Some(0.0f32.to_bits()),
            hi: Some(6.0f32.to_bits()),
        }),
        b_prefetch: 0,
        a_k16: false,
        c_block: 0,
        prefetch_next: false,
        a_prefetch: 0,
        b_next_cols: false,
        b_copy: false,
        // The residual's lines too (a prefetch never faults, but this one reads the real tiles).
        c_prefetch: true,
    };
    let av: Vec<f32> = (0..mr * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.5)
        .collect();
    let mut bv: Vec<f32> = (0..k * nr)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.75)
        .collect();
    bv[1] = f32::NAN; // column 1 is NaN in every row
    let bias: Vec<f32> = (0..mr).map(|r| r as f32 * 0.5 - 1.0).collect();
    let epi = spec.epi.unwrap();
    let res_of = |r: usize, j: usize| epi.res_at(r, j).unwrap();
    let mut res: Vec<f32> = (0..res_of(mr - 1, nr - 1) + 1)
        .map(|i| (i % 7) as f32 - 3.0)
        .collect();
    let mut c = vec![0.0f32; (mr - 1) * c_rs + nr];
    let code = assemble(&spec).unwrap();
    // Row 0, column 2: force acc + bias + res to -0.0 by making everything zero there.
    for p in 0..k {
        bv[p * nr + 2] = 0.0;
    }
    res[res_of(0, 2)] = -0.0;
    let bias0 = bias[0];
    let mut bias = bias;
    bias[0] = if bias0 == 0.0 { 0.0 } else { bias0 };
    // SAFETY: as in `run`, with the two extra pointer arguments sized for the tile.
    unsafe {
        let len = code.len().div_ceil(4096) * 4096;
        let p = libc_mmap(len);
        std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
        libc_mprotect(p, len);
        let f: extern "sysv64" fn(*const f32, *const f32, *mut f32, *const f32, *const f32) =
            std::mem::transmute(p);
        f(
            av.as_ptr(),
            bv.as_ptr(),
            c.as_mut_ptr(),
            bias.as_ptr(),
            res.as_ptr(),
        );
    }
    for r in 0..mr {
        for j in 0..nr {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc = av[r * k + p].mul_add(bv[p * nr + j], acc);
            }
            let x = acc * scale.unwrap_or(1.0) + bias[r] + res[res_of(r, j)];
            let want = if x.is_nan() {
                x
            } else if x <= 0.0 {
                0.0
            } else {
                x.min(6.0)
            };
            let got = c[r * c_rs + j];
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{simd:?} r{r} j{j}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn fused_epilogues_clamp_and_keep_nan() {
    for scale in [None, Some(0.125), Some(1.0 / 3.0)] {
        check_epilogue(Simd::Avx2, 4, 0, scale);
        check_epilogue(Simd::Avx2, 4, 16 * 4 + 5, scale);
        for rows in [8, 14] {
            check_epilogue(Simd::Avx512, rows, 0, scale);
            check_epilogue(Simd::Avx512, rows, 16 * rows + 3, scale);
        }
    }
}

#[test]
fn avx2_tiles_match_the_fma_chain_bitwise() {
    check(Simd::Avx2, 1, 3, 1, 24, 24);
    check(Simd::Avx2, 37, 40, 1, 30, 27);
    check(Simd::Avx2, 9, 1, 6, 33, 50);
}

#[test]
fn avx512_tiles_match_the_fma_chain_bitwise() {
    check(Simd::Avx512, 1, 3, 1, 32, 32);
    check(Simd::Avx512, 65, 70, 1, 40, 35);
    check(Simd::Avx512, 5, 1, 8, 64, 100);
    check(Simd::Avx512, 300, 1, 49, 32, 40); // B as one panel, prefetched
}

#[test]
fn k16_blocked_a_matches_the_fma_chain_bitwise() {
    check_k16(Simd::Avx512, 16, 20, 32, 32);
    check_k16(Simd::Avx512, 64, 49, 40, 35);
    check_k16(Simd::Avx2, 48, 17, 24, 30);
}
