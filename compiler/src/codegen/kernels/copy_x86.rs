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
    let mut pair = a.create_label();
    let mut single = a.create_label();
    let mut tail = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut pair).map_err(e)?;
    a.cmp(rdx, 32).map_err(e)?;
    a.jb(single).map_err(e)?;
    load(&mut a, 0, false).map_err(e)?;
    load(&mut a, 1, false).map_err(e)?;
    a.vmovups(zmmword_ptr(rsi), zmm0).map_err(e)?;
    a.vmovups(zmmword_ptr(rsi + 64), zmm1).map_err(e)?;
    a.add(rdi, 128 * st).map_err(e)?;
    a.add(rsi, 128).map_err(e)?;
    a.sub(rdx, 32).map_err(e)?;
    a.jmp(pair).map_err(e)?;
    a.set_label(&mut single).map_err(e)?;
    a.cmp(rdx, 16).map_err(e)?;
    a.jb(tail).map_err(e)?;
    load(&mut a, 0, false).map_err(e)?;
    a.vmovups(zmmword_ptr(rsi), zmm0).map_err(e)?;
    a.add(rdi, 64 * st).map_err(e)?;
    a.add(rsi, 64).map_err(e)?;
    a.sub(rdx, 16).map_err(e)?;
    a.set_label(&mut tail).map_err(e)?;
    a.test(rdx, rdx).map_err(e)?;
    a.jz(done).map_err(e)?;
    // The last count < 16 outputs: k5 = (1 << count) − 1 masks the store; the loads need inputs
    // 0 ..= (count − 1)·stride: k1 = the first min(that + 1, 16), k3 the rest of the second half.
    let mask =
        |a: &mut CodeAssembler, k: AsmRegisterK, bits: AsmRegister32| -> Result<(), IcedError> {
            a.mov(ecx, bits)?;
            a.mov(eax, 1u32)?;
            a.shl(eax, cl)?;
            a.dec(eax)?;
            a.kmovw(k, eax)
        };
    mask(&mut a, k5, edx).map_err(e)?;
    if stride == 1 {
        a.kmovw(k1, k5).map_err(e)?;
    } else {
        a.lea(r9d, ptr(rdx + rdx - 1)).map_err(e)?;
        a.mov(r10d, 16u32).map_err(e)?;
        a.mov(r11d, r9d).map_err(e)?;
        a.cmp(r11d, r10d).map_err(e)?;
        a.cmova(r11d, r10d).map_err(e)?;
        mask(&mut a, k1, r11d).map_err(e)?;
        a.xor(r10d, r10d).map_err(e)?;
        a.sub(r9d, 16).map_err(e)?;
        a.cmovl(r9d, r10d).map_err(e)?;
        mask(&mut a, k3, r9d).map_err(e)?;
    }
    load(&mut a, 0, true).map_err(e)?;
    a.vmovups(zmmword_ptr(rsi).k5(), zmm0).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    if stride == 2 {
        a.set_label(&mut table).map_err(e)?;
        let idx: Vec<u8> = (0..16u32).flat_map(|i| (2 * i).to_le_bytes()).collect();
        a.db(&idx).map_err(e)?;
    }
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
    let mut pair = a.create_label();
    let mut single = a.create_label();
    let mut tail = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut pair).map_err(e)?;
    a.cmp(rdx, 16).map_err(e)?;
    a.jb(single).map_err(e)?;
    load(&mut a, 0, false).map_err(e)?;
    load(&mut a, 1, false).map_err(e)?;
    a.vmovups(ptr(rsi), ymm0).map_err(e)?;
    a.vmovups(ptr(rsi + 32), ymm1).map_err(e)?;
    a.add(rdi, 64 * st).map_err(e)?;
    a.add(rsi, 64).map_err(e)?;
    a.sub(rdx, 16).map_err(e)?;
    a.jmp(pair).map_err(e)?;
    a.set_label(&mut single).map_err(e)?;
    a.cmp(rdx, 8).map_err(e)?;
    a.jb(tail).map_err(e)?;
    load(&mut a, 0, false).map_err(e)?;
    a.vmovups(ptr(rsi), ymm0).map_err(e)?;
    a.add(rdi, 32 * st).map_err(e)?;
    a.add(rsi, 32).map_err(e)?;
    a.sub(rdx, 8).map_err(e)?;
    a.set_label(&mut tail).map_err(e)?;
    a.test(rdx, rdx).map_err(e)?;
    a.jz(done).map_err(e)?;
    // Lane masks `lane < n` from the lane indices: outputs n = count; inputs 0 ..= (count − 1)·stride, the
    // first min(that + 1, 8) from the first load, the rest from the second.
    let lane_mask = |a: &mut CodeAssembler, dst: AsmRegisterYmm, n: AsmRegister32| {
        a.vmovd(xmm7, n)?;
        a.vpbroadcastd(dst, xmm7)?;
        a.vpcmpgtd(dst, dst, ptr(lanes))
    };
    if stride == 1 {
        lane_mask(&mut a, ymm5, edx).map_err(e)?;
    } else {
        a.lea(r9d, ptr(rdx + rdx - 1)).map_err(e)?;
        lane_mask(&mut a, ymm5, r9d).map_err(e)?;
        a.sub(r9d, 8).map_err(e)?;
        lane_mask(&mut a, ymm6, r9d).map_err(e)?;
    }
    lane_mask(&mut a, ymm7, edx).map_err(e)?;
    load(&mut a, 0, true).map_err(e)?;
    a.vmaskmovps(ptr(rsi), ymm7, ymm0).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut half).map_err(e)?;
    let h: Vec<u8> = (0..8u32)
        .flat_map(|i| if i < 7 { u32::MAX } else { 0 }.to_le_bytes())
        .collect();
    a.db(&h).map_err(e)?;
    a.set_label(&mut lanes).map_err(e)?;
    let idx: Vec<u8> = (0..8u32).flat_map(|i| i.to_le_bytes()).collect();
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
            if !ok || !cfg!(target_os = "linux") {
                eprintln!("SKIPPED: {name} strided row copy (this CPU or OS cannot run it)");
                continue;
            }
            for stride in [1usize, 2] {
                copy_case(asm(stride).unwrap(), stride);
            }
        }
    }

    fn copy_case(code: Vec<u8>, stride: usize) {
        // SAFETY: mappings made here: the code (RW then RX), and a source buffer of two pages whose
        // second page is made inaccessible; the kernel reads `count` strided floats ending before it and
        // writes `count` floats of `out`.
        unsafe {
            let len = code.len().div_ceil(4096) * 4096;
            let p = mmap(std::ptr::null_mut(), len, 3, 0x22, -1, 0);
            std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
            assert_eq!(mprotect(p, len, 5), 0);
            let f: extern "sysv64" fn(*const f32, *mut f32, u64) = std::mem::transmute(p);
            let page = mmap(std::ptr::null_mut(), 8192, 3, 0x22, -1, 0) as *mut f32;
            assert_eq!(mprotect((page as *mut u8).add(4096), 4096, 0), 0);
            for count in 0usize..=100 {
                let need = if count == 0 {
                    0
                } else {
                    (count - 1) * stride + 1
                };
                let src = page.add(1024 - need);
                for i in 0..need {
                    *src.add(i) = i as f32 * 0.5 - 3.0;
                }
                let mut out = vec![-1.0f32; count + 16];
                f(src, out.as_mut_ptr(), count as u64);
                for (t, &v) in out.iter().enumerate().take(count) {
                    assert_eq!(
                        v,
                        *src.add(t * stride),
                        "stride {stride} count {count} at {t}"
                    );
                }
                assert!(
                    out[count..].iter().all(|&v| v == -1.0),
                    "wrote past the run"
                );
            }
        }
    }
}
