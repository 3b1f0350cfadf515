//! The AVX2+FMA f32 depthwise row kernel (`x86-64-v3`, the default `--cpu`): the same contract and arithmetic as
//! the AVX-512 one in `depthwise_x86.rs` with eight outputs per `ymm`. Four accumulators per step (32 outputs),
//! then single vectors, then a tail under `vmaskmovps` masks built from the count, so no load passes the last
//! input the row needs and no store passes its last output. AVX2 has no embedded broadcast: each tap's weight is
//! broadcast once per step into a register shared by the step's vectors. At stride 2 a vector's 16 inputs are
//! two loads (the second masked to its first 7 lanes), `vshufps` picks the even lanes of both and `vpermpd`
//! puts them in order. Each output is `act(bias + Σ w[ky][kx] · x[..])` with one `vfmadd231ps` per tap in (ky,
//! kx) order from the bias, bitwise the Cranelift interior's `fma` chain; the clamp keeps NaN (`vblendvps`).
//!
//! `fn(x: *const f32, out: *mut f32, w: *const f32, bias: *const f32, count: u64)` (System V).

use super::depthwise_x86::DwRowF32;
use iced_x86::code_asm::*;

const YMM: [AsmRegisterYmm; 16] = [
    ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13, ymm14,
    ymm15,
];

/// Assembles the AVX2 row kernel; `Err` when the shape or the displacements are out of range (the caller keeps
/// the Cranelift path). Max-pool mode is AVX-512 only.
pub fn assemble(s: &DwRowF32) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let [kh, kw] = s.kernel;
    let taps = kh * kw;
    let tap_off: Vec<i32> = (0..taps)
        .map(|t| {
            let (ky, kx) = (t / kw, t % kw);
            (ky * s.dilations[0])
                .checked_mul(s.w)
                .and_then(|v| v.checked_add(kx * s.dilations[1]))
                // + 256 bytes: the furthest load of a four-vector step.
                .and_then(|v| v.checked_add(64))
                .and_then(|v| v.checked_mul(4))
                .and_then(|v| i32::try_from(v).ok())
                .map(|v| v - 256)
        })
        .collect::<Option<_>>()
        .ok_or_else(|| format!("AVX2 depthwise row kernel displacements out of range: {s:?}"))?;
    if taps == 0 || !(1..=2).contains(&s.stride) || s.max {
        return Err(format!(
            "AVX2 depthwise row kernel shape out of range: {s:?}"
        ));
    }
    let st = s.stride;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // ymm0-3 accumulators, ymm4-7 inputs, ymm8 bias, ymm9 lo, ymm10 hi, ymm11 the broadcast tap, ymm12 the
    // input mask (tail), ymm13 the second-half mask, ymm14 the output mask, ymm15 scratch (second half, NaN).
    if s.bias {
        a.vbroadcastss(ymm8, dword_ptr(rcx)).map_err(e)?;
    } else {
        a.vxorps(ymm8, ymm8, ymm8).map_err(e)?;
    }
    for (reg, c) in [(ymm9, s.lo), (ymm10, s.hi)] {
        if let Some(bits) = c {
            a.mov(eax, bits).map_err(e)?;
            a.vmovd(xmm15, eax).map_err(e)?;
            a.vbroadcastss(reg, xmm15).map_err(e)?;
        }
    }
    let mut table = a.create_label();
    let mut lanes = a.create_label();
    if st == 2 {
        // ymm13: the 7 inputs a full stride-2 vector needs from its second half (element 15 is unused).
        a.vmovups(ymm13, ptr(table)).map_err(e)?;
    }
    // One step of `n` vectors, masked (ymm12 inputs / ymm13 second half / ymm14 outputs) when `masked`.
    let step = |a: &mut CodeAssembler, n: usize, masked: bool| -> Result<(), IcedError> {
        for acc in &YMM[..n] {
            a.vmovaps(*acc, ymm8)?;
        }
        for (t, &off) in tap_off.iter().enumerate() {
            a.vbroadcastss(ymm11, dword_ptr(rdx + (t * 4) as i32))?;
            for v in 0..n {
                let x = YMM[4 + v];
                let at = rdi + (off + (v * 32 * st) as i32);
                if masked {
                    a.vmaskmovps(x, ymm12, ptr(at))?;
                } else {
                    a.vmovups(x, ptr(at))?;
                }
                if st == 2 {
                    a.vmaskmovps(ymm15, ymm13, ptr(at + 32))?;
                    a.vshufps(x, x, ymm15, 0x88)?;
                    a.vpermpd(x, x, 0xd8)?;
                }
                a.vfmadd231ps(YMM[v], x, ymm11)?;
            }
        }
        for (v, &x) in YMM[..n].iter().enumerate() {
            if s.lo.is_some() || s.hi.is_some() {
                a.vcmpps(ymm15, x, x, 3)?;
                a.vmovaps(YMM[4 + v], x)?;
                if s.lo.is_some() {
                    a.vmaxps(x, x, ymm9)?;
                }
                if s.hi.is_some() {
                    a.vminps(x, x, ymm10)?;
                }
                a.vblendvps(x, x, YMM[4 + v], ymm15)?;
            }
            let out = ptr(rsi + (v * 32) as i32);
            if masked {
                a.vmaskmovps(out, ymm14, x)?;
            } else {
                a.vmovups(out, x)?;
            }
        }
        Ok(())
    };
    let mut quad = a.create_label();
    let mut single = a.create_label();
    let mut tail = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut quad).map_err(e)?;
    a.cmp(r8, 32).map_err(e)?;
    a.jb(single).map_err(e)?;
    step(&mut a, 4, false).map_err(e)?;
    a.add(rdi, (128 * st) as i32).map_err(e)?;
    a.add(rsi, 128).map_err(e)?;
    a.sub(r8, 32).map_err(e)?;
    a.jmp(quad).map_err(e)?;
    a.set_label(&mut single).map_err(e)?;
    a.cmp(r8, 8).map_err(e)?;
    a.jb(tail).map_err(e)?;
    step(&mut a, 1, false).map_err(e)?;
    a.add(rdi, (32 * st) as i32).map_err(e)?;
    a.add(rsi, 32).map_err(e)?;
    a.sub(r8, 8).map_err(e)?;
    a.jmp(single).map_err(e)?;
    a.set_label(&mut tail).map_err(e)?;
    a.test(r8, r8).map_err(e)?;
    a.jz(done).map_err(e)?;
    // The last count < 8 outputs. Lane masks `lane < n` from the lane indices 0..7 (`lanes`):
    // outputs n = count; stride 1 inputs n = count; stride 2 inputs 0 ..= 2·count − 2, the first
    // min(2·count − 1, 8) from the first load and the rest from the second.
    let lane_mask = |a: &mut CodeAssembler, dst: AsmRegisterYmm, n: AsmRegister32| {
        a.vmovd(xmm15, n)?;
        a.vpbroadcastd(dst, xmm15)?;
        a.vpcmpgtd(dst, dst, ptr(lanes))
    };
    lane_mask(&mut a, ymm14, r8d).map_err(e)?;
    if st == 1 {
        a.vmovaps(ymm12, ymm14).map_err(e)?;
    } else {
        a.lea(r9d, ptr(r8 + r8 - 1)).map_err(e)?;
        lane_mask(&mut a, ymm12, r9d).map_err(e)?;
        a.sub(r9d, 8).map_err(e)?;
        lane_mask(&mut a, ymm13, r9d).map_err(e)?;
    }
    step(&mut a, 1, true).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    // The stride-2 second-half mask (lanes 0..6 set), then the lane indices.
    let half: Vec<u8> = (0..8u32)
        .flat_map(|i| if i < 7 { u32::MAX } else { 0 }.to_le_bytes())
        .collect();
    let idx: Vec<u8> = (0..8u32).flat_map(|i| i.to_le_bytes()).collect();
    a.db(&half).map_err(e)?;
    a.set_label(&mut lanes).map_err(e)?;
    a.db(&idx).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    extern "C" {
        fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
        fn mprotect(addr: *mut u8, len: usize, prot: i32) -> i32;
    }

    /// Every row length class (quads, singles, masked tails) at strides 1 and 2, 3x3 and 5x5, dilation 2, with
    /// the input ending on a guard page (a read past the last needed input faults), against the fma chain with
    /// the clamp; NaN kept; nothing written past the row.
    #[test]
    fn rows_match_the_fma_chain_bitwise() {
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        let fma = std::arch::is_x86_feature_detected!("fma");
        if !avx2 || !fma || !cfg!(target_os = "linux") {
            eprintln!("SKIPPED: AVX2 depthwise row kernel (this CPU or OS cannot run it)");
            return;
        }
        for (k, gap, st) in [(3, 1, 1), (5, 1, 1), (3, 2, 1), (3, 1, 2), (5, 1, 2)] {
            for count in [0usize, 1, 3, 7, 8, 9, 31, 32, 33, 70] {
                let w = (count.max(1) - 1) * st + (k - 1) * gap + 1;
                let spec = DwRowF32 {
                    kernel: [k, k],
                    dilations: [gap, gap],
                    w,
                    stride: st,
                    bias: true,
                    lo: Some(0.0f32.to_bits()),
                    hi: Some(6.0f32.to_bits()),
                    max: false,
                };
                let code = assemble(&spec).unwrap();
                let need = w * (k - 1) * gap + w;
                let wts: Vec<f32> = (0..k * k).map(|t| (t as f32 - 4.0) * 0.3).collect();
                let bias = [0.25f32];
                let mut out = vec![-1.0f32; count + 8];
                // SAFETY: an RW mapping made RX holding the kernel, and an input of `need` floats ending at a
                // PROT_NONE page; the kernel reads `count` outputs' windows (all inside `need`) and writes
                // `count` floats of `out`.
                let xs: Vec<f32> = unsafe {
                    let len = code.len().div_ceil(4096) * 4096;
                    let p = mmap(std::ptr::null_mut(), len, 3, 0x22, -1, 0);
                    std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
                    assert_eq!(mprotect(p, len, 5), 0);
                    let pages = (need * 4).div_ceil(4096) + 1;
                    let buf = mmap(std::ptr::null_mut(), pages * 4096, 3, 0x22, -1, 0) as *mut f32;
                    assert_eq!(
                        mprotect((buf as *mut u8).add((pages - 1) * 4096), 4096, 0),
                        0
                    );
                    let x = buf.add((pages - 1) * 1024 - need);
                    for i in 0..need {
                        *x.add(i) = if i == 5 {
                            f32::NAN
                        } else {
                            ((i * 37 % 101) as f32 - 50.0) * 0.07
                        };
                    }
                    let f: extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64) =
                        std::mem::transmute(p);
                    f(
                        x,
                        out.as_mut_ptr(),
                        wts.as_ptr(),
                        bias.as_ptr(),
                        count as u64,
                    );
                    std::slice::from_raw_parts(x, need).to_vec()
                };
                for (o, &got) in out.iter().enumerate().take(count) {
                    let mut acc = bias[0];
                    for ky in 0..k {
                        for kx in 0..k {
                            acc =
                                xs[o * st + ky * gap * w + kx * gap].mul_add(wts[ky * k + kx], acc);
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
        }
    }
}
