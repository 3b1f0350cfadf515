//! `int NAME_cpu_supported(void)`: the exported check that the running CPU (and OS) has every instruction-set
//! feature the bundle's kernels use, so that a program can refuse to call the entry function instead of dying of
//! an illegal instruction. On x86-64 it is machine code assembled with `iced-x86` (CPUID leaf 1 for FMA, AVX and
//! OSXSAVE, XGETBV for the OS-enabled register state, CPUID leaf 7 for AVX2, AVX-512F/DQ/BW/VL and AVX-512 VNNI); it uses only
//! caller-saved registers besides `rbx`, which it saves, so it works under the System V and Windows ABIs alike.

use iced_x86::code_asm::*;

/// What a bundle's kernels require on x86-64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct X86Needs {
    /// AVX + FMA (VEX encodings, `vfmadd`).
    pub avx_fma: bool,
    /// AVX2.
    pub avx2: bool,
    /// AVX-512F, DQ, BW and VL (zmm registers; x86-64-v4).
    pub avx512: bool,
    /// AVX-512 VNNI (`vpdpbusd`, the int8 micro-kernel).
    pub vnni: bool,
}

/// The `cpuFeatures` bits of `NAME_config` on x86-64 and their names, in bit order (docs/bundle-format.md;
/// mirrored by `bundle-rt/src/cpu.rs`).
pub const X86_FEATURES: [&str; 9] = [
    "sse2",
    "avx",
    "fma",
    "avx2",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512vnni",
];

/// The names of the feature bits set in `bits`.
pub fn feature_names(bits: u64) -> Vec<&'static str> {
    X86_FEATURES
        .iter()
        .enumerate()
        .filter(|&(i, _)| bits >> i & 1 == 1)
        .map(|(_, &n)| n)
        .collect()
}

impl X86Needs {
    /// The `cpuFeatures` bits (indices into [`X86_FEATURES`]).
    pub fn bits(&self) -> u64 {
        let mut b = 1; // sse2: the x86-64 baseline
        if self.avx_fma {
            b |= 0b110;
        }
        if self.avx2 {
            b |= 1 << 3;
        }
        if self.avx512 {
            b |= 0b1111 << 4;
        }
        if self.vnni {
            b |= 1 << 8;
        }
        b
    }

    /// Feature names for reports and the header.
    pub fn names(&self) -> Vec<&'static str> {
        feature_names(self.bits())
    }
}

/// Assembles `int NAME_cpu_supported(void)` returning 1 when every needed feature is present, else 0.
pub fn assemble(n: &X86Needs) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut fail = a.create_label();
    a.push(rbx).map_err(e)?;
    if n.avx_fma || n.avx2 || n.avx512 {
        // Leaf 1: ECX bit 12 FMA, 27 OSXSAVE, 28 AVX.
        a.mov(eax, 1u32).map_err(e)?;
        a.xor(ecx, ecx).map_err(e)?;
        a.cpuid().map_err(e)?;
        let leaf1 = (1u32 << 27) | (1 << 28) | if n.avx_fma { 1 << 12 } else { 0 };
        a.and(ecx, leaf1 as i32).map_err(e)?;
        a.cmp(ecx, leaf1 as i32).map_err(e)?;
        a.jne(fail).map_err(e)?;
        // XCR0: bits 1-2 (SSE, AVX state), plus 5-7 (opmask, ZMM) for AVX-512.
        a.xor(ecx, ecx).map_err(e)?;
        a.xgetbv().map_err(e)?;
        let xcr0 = if n.avx512 { 0xE6 } else { 0x06 };
        a.and(eax, xcr0).map_err(e)?;
        a.cmp(eax, xcr0).map_err(e)?;
        a.jne(fail).map_err(e)?;
        // Leaf 7 subleaf 0: EBX bit 5 AVX2, 16 AVX-512F, 17 DQ, 30 BW, 31 VL; ECX bit 11 AVX-512 VNNI.
        let avx512 = (1u32 << 16) | (1 << 17) | (1 << 30) | (1 << 31);
        let leaf7 = if n.avx2 { 1u32 << 5 } else { 0 } | if n.avx512 { avx512 } else { 0 };
        if leaf7 != 0 {
            a.mov(eax, 7u32).map_err(e)?;
            a.xor(ecx, ecx).map_err(e)?;
            a.cpuid().map_err(e)?;
            a.and(ebx, leaf7 as i32).map_err(e)?;
            a.cmp(ebx, leaf7 as i32).map_err(e)?;
            a.jne(fail).map_err(e)?;
            if n.vnni {
                a.and(ecx, 1 << 11).map_err(e)?;
                a.jz(fail).map_err(e)?;
            }
        }
    }
    a.mov(eax, 1u32).map_err(e)?;
    a.pop(rbx).map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut fail).map_err(e)?;
    a.xor(eax, eax).map_err(e)?;
    a.pop(rbx).map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}
