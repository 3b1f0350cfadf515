//! Test support for the machine-code kernels (Linux, x86-64): running assembled bytes, buffers that end on an
//! inaccessible page so that a read past their end faults, the depthwise row kernels' reference checks (the
//! checks every variant of a row kernel passes), and the `fmax` and clamp references the kernels match.
//! Mappings are leaked: tests only.

/// True (after a `SKIPPED` line naming `what`) when this CPU or OS cannot run AVX-512 kernels.
pub fn skip_without_avx512(what: &str) -> bool {
    let no = !std::arch::is_x86_feature_detected!("avx512f");
    if no {
        eprintln!("SKIPPED: {what} (this CPU or OS cannot run it)");
    }
    no
}

/// True (after a `SKIPPED` line naming `what`) when this CPU cannot run AVX2+FMA kernels.
pub fn skip_without_avx2(what: &str) -> bool {
    let no = !(std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma"));
    if no {
        eprintln!("SKIPPED: {what} (this CPU cannot run it)");
    }
    no
}

/// A depthwise row kernel spec with a bias and the ReLU6 clamp (the tests' common case), one row per call.
pub fn relu6_row(k: usize, gap: usize, st: usize, w: usize) -> crate::kernel::depthwise::DwRowF32 {
    crate::kernel::depthwise::DwRowF32 {
        kernel: [k, k],
        dilations: [gap, gap],
        w,
        stride: st,
        bias: true,
        lo: Some(0.0f32.to_bits()),
        hi: Some(6.0f32.to_bits()),
        max: false,
        rows: None,
        count: None,
        split: None,
        left: 0,
        right: None,
    }
}

/// A deterministic test value in [-3.5, 3.5] for index `i`.
pub fn pattern(i: usize) -> f32 {
    ((i * 37 % 101) as f32 - 50.0) * 0.07
}

/// Cranelift's `fmax`, which the max-pooling kernels match: NaN propagates, +0 beats −0.
pub fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        f32::from_bits(a.to_bits() & b.to_bits())
    } else {
        a.max(b)
    }
}

/// The kernels' NaN-keeping clamp (`clamp_keep_nan`): `vmaxps` / `vminps` with the bound second, so −0 and +0
/// give the bound.
pub fn clamp(x: f32, lo: Option<f32>, hi: Option<f32>) -> f32 {
    if x.is_nan() {
        return x;
    }
    match (lo, hi) {
        (Some(lo), _) if x <= lo => lo,
        (_, Some(hi)) if x >= hi => hi,
        _ => x,
    }
}

/// Maps `code` executable and returns its address (call it through a transmuted `extern "sysv64" fn`).
pub fn exec(code: &[u8]) -> *const u8 {
    let len = code.len().div_ceil(4096).max(1) * 4096;
    // SAFETY: a fresh anonymous RW mapping of `len` bytes, filled with `code` (len >= code.len()), then made
    // read + execute.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        std::ptr::copy_nonoverlapping(code.as_ptr(), p as *mut u8, code.len());
        assert_eq!(libc::mprotect(p, len, libc::PROT_READ | libc::PROT_EXEC), 0);
        p as *const u8
    }
}

/// A zeroed buffer of `floats` f32 whose end is the start of a `PROT_NONE` page.
pub fn guarded(floats: usize) -> *mut f32 {
    let pages = (floats * 4).div_ceil(4096) + 1;
    // SAFETY: a fresh anonymous RW mapping of `pages` pages; its last page is made inaccessible, and the
    // returned pointer leaves exactly `floats` f32 (4-byte aligned: page-aligned base) before it.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            pages * 4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(base, libc::MAP_FAILED);
        let guard = (base as *mut u8).add((pages - 1) * 4096);
        assert_eq!(
            libc::mprotect(guard as *mut libc::c_void, 4096, libc::PROT_NONE),
            0
        );
        (guard as *mut f32).sub(floats)
    }
}

/// Checks a depthwise row kernel's `out` against the reference: each of the first `count` outputs is
/// `clamp(bias + Σ w[ky][kx] · x[o·st + ky·gap·w + kx·gap], 0, 6)` as one `mul_add` chain in (ky, kx) order
/// (NaN kept, compared bitwise), and nothing past them was written (still −1).
#[allow(clippy::too_many_arguments)] // the row's geometry
pub fn check_dw_row(
    out: &[f32],
    count: usize,
    x: &[f32],
    wts: &[f32],
    bias: f32,
    k: usize,
    gap: usize,
    st: usize,
    w: usize,
) {
    for (o, &got) in out.iter().enumerate().take(count) {
        let mut acc = bias;
        for ky in 0..k {
            for kx in 0..k {
                acc = x[o * st + ky * gap * w + kx * gap].mul_add(wts[ky * k + kx], acc);
            }
        }
        let want = if acc.is_nan() {
            acc
        } else {
            acc.clamp(0.0, 6.0)
        };
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "k{k} d{gap} s{st} count {count} out {o}: {got} vs {want}"
        );
    }
    assert!(
        out[count..].iter().all(|&v| v == -1.0),
        "wrote past the row"
    );
}

/// A row kernel's multi-row mode (`DwRowF32::rows`) against one call per row of the same kernel without it,
/// bitwise: 3x3 and 5x5 at strides 1 and 2, row widths with full steps, single vectors and masked tails, and
/// rows = 1 and 0 (nothing written). `assemble` is the variant's assembler.
pub fn check_rows_mode(
    assemble: fn(&crate::kernel::depthwise::DwRowF32) -> Result<Vec<u8>, String>,
) {
    type One = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64);
    type Many = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64, u64);
    // Rows mode runs rows in groups of 8, 4 or 2 by their vectors (`out_w`), the rest in smaller groups: 3x3
    // and 5x5 (its taps past the registers broadcast from memory), strides 1 and 2, dilation 2 (rows sharing no
    // input row), max pooling, split rows, a row too long to lay out at compile time.
    for (k, gap, st, count, rows, kind) in [
        (3, 1, 1, 56, 4, "relu6"),
        (5, 1, 1, 28, 3, "relu6"),
        (3, 1, 2, 37, 4, "relu6"),
        (5, 1, 2, 14, 14, "relu6"),
        (3, 1, 1, 7, 7, "relu6"),
        (3, 2, 1, 30, 5, "relu6"),
        (3, 1, 2, 9, 19, "relu6"),
        (5, 1, 1, 10, 11, "relu6"),
        (3, 1, 1, 300, 3, "relu6"),
        (3, 1, 2, 56, 5, "max"),
        (3, 1, 2, 10, 9, "max"),
        (3, 1, 2, 28, 6, "split"),
        (5, 1, 2, 7, 9, "split"),
    ] {
        // Rows as wide as the window needs (a padded plane's), and output rows with a gap.
        let w = (count - 1) * st + (k - 1) * gap + 1;
        let out_w = count + 5;
        let max = kind == "max";
        let base = match kind {
            "max" => crate::kernel::depthwise::DwRowF32 {
                max,
                bias: false,
                lo: None,
                hi: None,
                ..relu6_row(k, gap, st, w)
            },
            "split" => crate::kernel::depthwise::DwRowF32 {
                split: Some(w.div_ceil(2)),
                ..relu6_row(k, gap, st, w)
            },
            _ => relu6_row(k, gap, st, w),
        };
        let multi = crate::kernel::depthwise::DwRowF32 {
            rows: Some([st * w, out_w]),
            ..base
        };
        // The AVX2 kernel has no max mode.
        let one_code = match assemble(&base) {
            Err(e) if max => {
                eprintln!("max mode not taken: {e}");
                continue;
            }
            code => code.unwrap(),
        };
        // SAFETY: the assembled kernels' System V signatures.
        let one: One = unsafe { std::mem::transmute(exec(&one_code)) };
        let many: Many = unsafe { std::mem::transmute(exec(&assemble(&multi).unwrap())) };
        // And with the count fixed at compile time (`DwRowF32::count`).
        let fixed = crate::kernel::depthwise::DwRowF32 {
            count: Some(count),
            ..multi
        };
        // SAFETY: as above.
        let fixed: Many = unsafe { std::mem::transmute(exec(&assemble(&fixed).unwrap())) };
        let x: Vec<f32> = (0..w * (rows * st + (k - 1) * gap + 1) + 64)
            .map(pattern)
            .collect();
        let wts: Vec<f32> = (0..k * k).map(|i| pattern(i + 3) * 0.2).collect();
        let bias = 0.25f32;
        for n_rows in [rows, 1, 0] {
            let mut want = vec![-1.0f32; rows * out_w];
            for r in 0..n_rows {
                // SAFETY: row r's inputs and `count` outputs lie inside x and want.
                one(
                    x[r * st * w..].as_ptr(),
                    want[r * out_w..].as_mut_ptr(),
                    wts.as_ptr(),
                    &bias,
                    count as u64,
                );
            }
            let mut got = vec![-1.0f32; rows * out_w];
            // SAFETY: as above, for n_rows rows.
            many(
                x.as_ptr(),
                got.as_mut_ptr(),
                wts.as_ptr(),
                &bias,
                count as u64,
                n_rows as u64,
            );
            let mut got_fixed = vec![-1.0f32; rows * out_w];
            // SAFETY: as above.
            fixed(
                x.as_ptr(),
                got_fixed.as_mut_ptr(),
                wts.as_ptr(),
                &bias,
                count as u64,
                n_rows as u64,
            );
            for (got, how) in [(got, "run-time count"), (got_fixed, "fixed count")] {
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same,
                    "k{k} d{gap} s{st} count {count} rows {n_rows} {kind} {how}"
                );
            }
        }
    }
}

/// A row kernel on split rows (`DwRowF32::split`: each row's even columns, then its odd ones) against the fma
/// chain on the same rows unsplit, bitwise: 3x3 and 5x5 at stride 2, every output count from 0 to 70, the
/// split rows ending on a guard page (a read past the last needed input faults), nothing written past the row.
pub fn check_split_rows(
    assemble: fn(&crate::kernel::depthwise::DwRowF32) -> Result<Vec<u8>, String>,
) {
    type RowFn = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64);
    let page = guarded(4096);
    for k in [3usize, 5] {
        for count in 0usize..=70 {
            let w = 2 * count.max(1) - 2 + k;
            let half = w.div_ceil(2);
            let x: Vec<f32> = (0..w * k).map(|i| pattern(i * 7 + k)).collect();
            let split: Vec<f32> = x
                .chunks(w)
                .flat_map(|row| {
                    let evens = row.iter().step_by(2);
                    evens
                        .chain(row.iter().skip(1).step_by(2))
                        .copied()
                        .collect::<Vec<_>>()
                })
                .collect();
            // SAFETY: the last `split.len()` (≤ 4096) of the floats before the guard page.
            let at = unsafe { page.add(4096 - split.len()) };
            // SAFETY: `at` has `split.len()` writable floats.
            unsafe { std::ptr::copy_nonoverlapping(split.as_ptr(), at, split.len()) };
            let spec = crate::kernel::depthwise::DwRowF32 {
                split: Some(half),
                ..relu6_row(k, 1, 2, w)
            };
            // SAFETY: the assembled kernel's System V signature.
            let f: RowFn = unsafe { std::mem::transmute(exec(&assemble(&spec).unwrap())) };
            let wts: Vec<f32> = (0..k * k).map(|i| pattern(i + 5) * 0.3).collect();
            let bias = 0.5f32;
            let mut out = vec![-1.0f32; count + 16];
            f(at, out.as_mut_ptr(), wts.as_ptr(), &bias, count as u64);
            check_dw_row(&out, count, &x, &wts, bias, k, 1, 2, w);
        }
    }
}

/// A row kernel's edge rows (`DwRowF32::left` / `right`): left and right padding (0–7 columns each side;
/// strides 1 and 2, 3x3 and 5x5, dilation 1 and 2), counts 1..80, in rows mode over three rows, the count at
/// run time and/or fixed at compile time as `fixed` lists: every output against the fma chain with the taps
/// outside the row as +0, bitwise; the rows end on a guard page and nothing is written past a row. A spec
/// that `takes` refuses must fail to assemble.
pub fn check_edge_padding(
    assemble: fn(&crate::kernel::depthwise::DwRowF32) -> Result<Vec<u8>, String>,
    fixed: &[bool],
    takes: fn(&crate::kernel::depthwise::DwRowF32) -> bool,
) {
    type Many = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64, u64);
    let page = guarded(8192);
    let cases = [
        (3, 1, 2, 1, 0),
        (3, 1, 1, 1, 0),
        (5, 1, 2, 2, 0),
        (5, 1, 1, 2, 0),
        (3, 2, 1, 2, 0),
        (3, 1, 2, 0, 1),
        (5, 1, 2, 1, 2),
        (3, 1, 1, 1, 1),
        (5, 2, 1, 0, 2),
        (3, 1, 2, 7, 3),
        (5, 1, 1, 4, 7),
    ];
    // Each case with the count passed at run time, then fixed at compile time (`DwRowF32::count`).
    let cases = fixed.iter().flat_map(|&f| cases.map(move |c| (f, c)));
    for (fixed, (k, gap, st, left, right)) in cases {
        for count in 1usize..=80 {
            let Some(w) = ((count - 1) * st + (k - 1) * gap + 1).checked_sub(left + right) else {
                continue;
            };
            let rows = 3;
            let h = (rows - 1) * st + (k - 1) * gap + 1;
            let x: Vec<f32> = (0..w * h).map(|i| pattern(i * 3 + k)).collect();
            // SAFETY: the last `x.len()` (≤ 8192) floats before the guard page.
            let at = unsafe { page.add(8192 - x.len()) };
            // SAFETY: `at` has `x.len()` writable floats.
            unsafe { std::ptr::copy_nonoverlapping(x.as_ptr(), at, x.len()) };
            let out_w = count + 3;
            let spec = crate::kernel::depthwise::DwRowF32 {
                rows: Some([st * w, out_w]),
                count: fixed.then_some(count),
                left,
                right: (right > 0).then_some(count),
                ..relu6_row(k, gap, st, w)
            };
            if !takes(&spec) {
                assert!(assemble(&spec).is_err(), "{spec:?} assembles");
                continue;
            }
            let code = assemble(&spec).unwrap();
            // SAFETY: the assembled kernel's System V signature.
            let f: Many = unsafe { std::mem::transmute(exec(&code)) };
            let wts: Vec<f32> = (0..k * k).map(|i| pattern(i + 9) * 0.25).collect();
            let bias = -0.125f32;
            let mut out = vec![-1.0f32; rows * out_w];
            // x under tap (0, 0) of output 0: `left` columns before the first row (never read).
            let x0 = at.wrapping_sub(left);
            f(
                x0,
                out.as_mut_ptr(),
                wts.as_ptr(),
                &bias,
                count as u64,
                rows as u64,
            );
            for r in 0..rows {
                for o in 0..count {
                    let mut acc = bias;
                    for ky in 0..k {
                        for kx in 0..k {
                            let c = (o * st + kx * gap) as isize - left as isize;
                            let inside = c >= 0 && (c as usize) < w;
                            let v = if inside {
                                x[(r * st + ky * gap) * w + c as usize]
                            } else {
                                0.0
                            };
                            acc = v.mul_add(wts[ky * k + kx], acc);
                        }
                    }
                    let want = acc.clamp(0.0, 6.0);
                    let got = out[r * out_w + o];
                    let at = format!(
                        "k{k} d{gap} s{st} l{left} r{right} n{count} r{r} o{o} fixed {fixed}"
                    );
                    assert_eq!(got.to_bits(), want.to_bits(), "{at}");
                }
                assert!(out[r * out_w + count..(r + 1) * out_w]
                    .iter()
                    .all(|&v| v == -1.0));
            }
        }
    }
}
