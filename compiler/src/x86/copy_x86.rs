//! The AVX-512 strided row copy im2col's copy runs call: `dst[t] = src[t · stride]` for `t < count`, stride 1
//! or 2. Sixteen floats per `zmm` (two vectors per step when there are 32 or more), then a masked tail; at
//! stride 2 each vector loads 32 inputs as two halves and `vpermt2ps` gathers the even ones, the unused 32nd
//! input masked off so that no load reads past `src[(count − 1) · stride]`. The first layer of a CNN (3
//! channels, 3x3 or 7x7 at stride 2) spends most of its im2col in these runs: the Cranelift path copies them
//! one float at a time. `assemble_avx2` is the same for `ymm` (`x86-64-v3`).
//!
//! `fn(src: *const f32, dst: *mut f32, count: u64)` (System V).

use iced_x86::code_asm::*;

/// Assembles the copy for `stride` 1 or 2.
pub fn assemble(stride: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !(1..=2).contains(&stride) {
        return Err(format!("strided row copy: stride {stride} out of range"));
    }
    let st = stride as i32;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    if stride == 2 {
        a.vmovups(zmm31, zmmword_ptr(table)).map_err(e)?;
        // k4: the 15 inputs a full stride-2 vector needs from its second half (element 31 is unused).
        a.mov(eax, 0x7fffu32).map_err(e)?;
        a.kmovw(k4, eax).map_err(e)?;
    }
    // One vector `v` of the step: zmm{v} = 16 outputs, loads masked by k1 (and k3) when `masked`.
    let load = |a: &mut CodeAssembler, v: usize, masked: bool| -> Result<(), IcedError> {
        let (x, hi) = if v == 0 { (zmm0, zmm2) } else { (zmm1, zmm3) };
        let at = rdi + (v as i32) * 64 * st;
        if masked {
            a.vmovups(x.k1().z(), zmmword_ptr(at))?;
        } else {
            a.vmovups(x, zmmword_ptr(at))?;
        }
        if stride == 2 {
            let k = if masked { hi.k3() } else { hi.k4() };
            a.vmovups(k.z(), zmmword_ptr(at + 64))?;
            a.vpermt2ps(x, zmm31, hi)?;
        }
        Ok(())
    };
    let step = |a: &mut CodeAssembler, n: usize, masked: bool| -> Result<(), IcedError> {
        for (v, x) in [zmm0, zmm1].into_iter().enumerate().take(n) {
            load(a, v, masked)?;
            let at = zmmword_ptr(rsi + (v * 64) as i32);
            a.vmovups(if masked { at.k5() } else { at }, x)?;
        }
        Ok(())
    };
    super::row_loop(
        &mut a,
        (rdx, rdi, rsi),
        16,
        2,
        (64 * stride, 64),
        step,
        |a| super::tail_masks_zmm(a, edx, stride),
    )
    .map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    if stride == 2 {
        a.set_label(&mut table).map_err(e)?;
        let idx: Vec<u8> = (0..16u32).flat_map(|i| (2 * i).to_le_bytes()).collect();
        a.db(&idx).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}

/// Assembles the AVX-512 deinterleaving row copy `fn(src, a, b, n)`: `a[t] = src[2t]`, `b[t] = src[2t + 1]`
/// for the `n` inputs (a split depthwise plane's row, `StackPlane::load_split`, in one call instead of one
/// stride-2 copy per parity). 32 inputs per step, two `vpermt2ps` from the same two loads; the tail masks
/// its loads to the `n` inputs and its stores to `ceil(n/2)` and `floor(n/2)` outputs.
pub fn assemble_deinterleave() -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut evens, mut odds) = (a.create_label(), a.create_label());
    let (mut top, mut tail, mut done) = (a.create_label(), a.create_label(), a.create_label());
    (|| -> Result<(), IcedError> {
        a.mov(r8, rcx)?;
        a.vmovups(zmm30, zmmword_ptr(evens))?;
        a.vmovups(zmm29, zmmword_ptr(odds))?;
        // One step: zmm0 / zmm1 the inputs (masked by k1 / k3 in the tail), stores masked by k5 / k6.
        let step = |a: &mut CodeAssembler, masked: bool| -> Result<(), IcedError> {
            if masked {
                a.vmovups(zmm0.k1().z(), zmmword_ptr(rdi))?;
                a.vmovups(zmm1.k3().z(), zmmword_ptr(rdi + 64))?;
            } else {
                a.vmovups(zmm0, zmmword_ptr(rdi))?;
                a.vmovups(zmm1, zmmword_ptr(rdi + 64))?;
            }
            a.vmovaps(zmm2, zmm0)?;
            a.vpermt2ps(zmm0, zmm30, zmm1)?;
            a.vpermt2ps(zmm2, zmm29, zmm1)?;
            if masked {
                a.vmovups(zmmword_ptr(rsi).k5(), zmm0)?;
                a.vmovups(zmmword_ptr(rdx).k6(), zmm2)
            } else {
                a.vmovups(zmmword_ptr(rsi), zmm0)?;
                a.vmovups(zmmword_ptr(rdx), zmm2)
            }
        };
        a.set_label(&mut top)?;
        a.cmp(r8, 32)?;
        a.jb(tail)?;
        step(&mut a, false)?;
        a.add(rdi, 128)?;
        a.add(rsi, 64)?;
        a.add(rdx, 64)?;
        a.sub(r8, 32)?;
        a.jmp(top)?;
        a.set_label(&mut tail)?;
        a.test(r8, r8)?;
        a.jz(done)?;
        // k1: inputs 0..min(n, 16); k3: inputs 16..n; k5 / k6: ceil(n/2) / floor(n/2) outputs.
        a.mov(r9d, 16u32)?;
        a.mov(r10d, r8d)?;
        a.cmp(r10d, r9d)?;
        a.cmova(r10d, r9d)?;
        super::low_mask(&mut a, k1, r10d)?;
        a.xor(r10d, r10d)?;
        a.mov(r11d, r8d)?;
        a.sub(r11d, 16)?;
        a.cmovl(r11d, r10d)?;
        super::low_mask(&mut a, k3, r11d)?;
        a.lea(r10d, ptr(r8 + 1))?;
        a.shr(r10d, 1)?;
        super::low_mask(&mut a, k5, r10d)?;
        a.mov(r10d, r8d)?;
        a.shr(r10d, 1)?;
        super::low_mask(&mut a, k6, r10d)?;
        step(&mut a, true)?;
        a.set_label(&mut done)?;
        a.vzeroupper()?;
        a.ret()?;
        for (label, first) in [(&mut evens, 0u32), (&mut odds, 1)] {
            a.set_label(label)?;
            let idx: Vec<u8> = (0..16u32)
                .flat_map(|i| (2 * i + first).to_le_bytes())
                .collect();
            a.db(&idx)?;
        }
        Ok(())
    })()
    .map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Assembles the AVX2 copy for `stride` 1 or 2 (`x86-64-v3`): eight floats per `ymm` (two vectors per step when
/// there are 16 or more), a `vmaskmovps` tail with masks built from the count; at stride 2 a vector's 16 inputs
/// are two loads (the second masked to its first 7 lanes), `vshufps` picks the even lanes and `vpermpd` orders
/// them.
pub fn assemble_avx2(stride: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !(1..=2).contains(&stride) {
        return Err(format!("strided row copy: stride {stride} out of range"));
    }
    let st = stride as i32;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut half = a.create_label();
    let mut lanes = a.create_label();
    // ymm4: the second-half mask (lanes 0..6) at stride 2; in the tail ymm5 / ymm6 the input masks and ymm7
    // the output mask.
    if stride == 2 {
        a.vmovups(ymm4, ptr(half)).map_err(e)?;
    }
    let load = |a: &mut CodeAssembler, v: usize, masked: bool| -> Result<(), IcedError> {
        let (x, hi) = if v == 0 { (ymm0, ymm2) } else { (ymm1, ymm3) };
        let at = rdi + (v as i32) * 32 * st;
        if masked {
            a.vmaskmovps(x, ymm5, ptr(at))?;
        } else {
            a.vmovups(x, ptr(at))?;
        }
        if stride == 2 {
            a.vmaskmovps(hi, if masked { ymm6 } else { ymm4 }, ptr(at + 32))?;
            a.vshufps(x, x, hi, 0x88)?;
            a.vpermpd(x, x, 0xd8)?;
        }
        Ok(())
    };
    let step = |a: &mut CodeAssembler, n: usize, masked: bool| -> Result<(), IcedError> {
        for (v, x) in [ymm0, ymm1].into_iter().enumerate().take(n) {
            load(a, v, masked)?;
            if masked {
                a.vmaskmovps(ptr(rsi + (v * 32) as i32), ymm7, x)?;
            } else {
                a.vmovups(ptr(rsi + (v * 32) as i32), x)?;
            }
        }
        Ok(())
    };
    super::row_loop(
        &mut a,
        (rdx, rdi, rsi),
        8,
        2,
        (32 * stride, 32),
        step,
        |a| super::tail_masks_ymm(a, edx, stride, lanes, [ymm7, ymm5, ymm6]),
    )
    .map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut half).map_err(e)?;
    let h: Vec<u8> = (0..8u32)
        .flat_map(|i| if i < 7 { u32::MAX } else { 0 }.to_le_bytes())
        .collect();
    a.db(&h).map_err(e)?;
    super::lane_table(&mut a, &mut lanes).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{exec, guarded};
    use super::*;

    /// Both variants, every count from 0 to 100 at strides 1 and 2, with the source ending exactly at its last
    /// element on a page boundary (a read past it faults) and the destination checked for writes past the run.
    #[test]
    fn copies_exactly_and_reads_nothing_past_the_run() {
        type Asm = fn(usize) -> Result<Vec<u8>, String>;
        let variants: [(&str, bool, Asm); 2] = [
            (
                "AVX-512",
                std::arch::is_x86_feature_detected!("avx512f"),
                assemble,
            ),
            (
                "AVX2",
                std::arch::is_x86_feature_detected!("avx2"),
                assemble_avx2,
            ),
        ];
        for (name, ok, asm) in variants {
            if !ok {
                eprintln!("SKIPPED: {name} strided row copy (this CPU or OS cannot run it)");
                continue;
            }
            for stride in [1usize, 2] {
                copy_case(asm(stride).unwrap(), stride);
            }
        }
    }

    /// Every count from 0 to 100, the source ending on a guard page: each parity lands in its half, nothing is
    /// written past either.
    #[test]
    fn deinterleaves_exactly() {
        if super::super::test_exec::skip_without_avx512("AVX-512 deinterleaving row copy") {
            return;
        }
        type F = extern "sysv64" fn(*const f32, *mut f32, *mut f32, u64);
        // SAFETY: the assembled kernel's System V signature.
        let f: F = unsafe { std::mem::transmute(exec(&assemble_deinterleave().unwrap())) };
        let page = guarded(1024);
        for n in 0usize..=100 {
            // SAFETY: the last `n` of the 1024 floats before the guard page.
            let src = unsafe { std::slice::from_raw_parts_mut(page.add(1024 - n), n) };
            for (i, x) in src.iter_mut().enumerate() {
                *x = i as f32 + 0.5;
            }
            let (mut ev, mut od) = (vec![-1.0f32; n / 2 + 17], vec![-1.0f32; n / 2 + 17]);
            f(src.as_ptr(), ev.as_mut_ptr(), od.as_mut_ptr(), n as u64);
            let want_ev: Vec<f32> = src.iter().step_by(2).copied().collect();
            let want_od: Vec<f32> = src.iter().skip(1).step_by(2).copied().collect();
            assert_eq!(ev[..want_ev.len()], want_ev[..], "n {n}: evens");
            assert_eq!(od[..want_od.len()], want_od[..], "n {n}: odds");
            assert!(
                ev[want_ev.len()..].iter().all(|&v| v == -1.0),
                "n {n}: past evens"
            );
            assert!(
                od[want_od.len()..].iter().all(|&v| v == -1.0),
                "n {n}: past odds"
            );
        }
    }

    fn copy_case(code: Vec<u8>, stride: usize) {
        // SAFETY: the assembled kernel's System V signature.
        let f: extern "sysv64" fn(*const f32, *mut f32, u64) =
            unsafe { std::mem::transmute(exec(&code)) };
        let page = guarded(1024);
        for count in 0usize..=100 {
            let need = if count == 0 {
                0
            } else {
                (count - 1) * stride + 1
            };
            // SAFETY: the last `need` of the 1024 floats before the guard page.
            let src = unsafe { std::slice::from_raw_parts_mut(page.add(1024 - need), need) };
            for (i, x) in src.iter_mut().enumerate() {
                *x = i as f32 * 0.5 - 3.0;
            }
            let mut out = vec![-1.0f32; count + 16];
            f(src.as_ptr(), out.as_mut_ptr(), count as u64);
            for (t, &v) in out.iter().enumerate().take(count) {
                assert_eq!(v, src[t * stride], "stride {stride} count {count} at {t}");
            }
            assert!(
                out[count..].iter().all(|&v| v == -1.0),
                "wrote past the run"
            );
        }
    }
}
