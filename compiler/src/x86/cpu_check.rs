//! The x86-64 CPU feature checks, machine code assembled with `iced-x86` (CPUID leaf 1 for FMA, AVX and OSXSAVE,
//! XGETBV for the OS-enabled register state, CPUID leaf 7 for AVX2, AVX-512F/DQ/BW/VL, VBMI and VNNI, AMX-TILE
//! and AMX-INT8): `int NAME_cpu_supported(void)`, the exported check that the running CPU (and OS) has every
//! feature the bundle's kernels use, so that a program can refuse to call the entry function instead of dying of
//! an illegal instruction (it uses only caller-saved registers besides `rbx`, which it saves, so it works under
//! the System V and Windows ABIs alike; AMX bundles, Linux only, also ask the kernel for the tile state with
//! `arch_prctl`, which clobbers `rdi` and `rsi`); and a fat bundle's `pick`, the same check for its fast set remembered in a validated
//! slot of the caller's activation area, so that the entry pays for CPUID once per area rather than per call.
use iced_x86::code_asm::*;

/// The x86-64 extensions beyond a kernel set's vector width that its int8 kernels use, as `--cpu` names them
/// (`codegen::isa::target`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct X86Ext {
    /// AVX-512 VNNI (`vpdpbusd`): the int8 GEMM micro-kernel.
    pub vnni: bool,
    /// AVX-512 VBMI (`vpermb`): the VNNI int8 depthwise row kernel's tap windows.
    pub vbmi: bool,
    /// AMX-TILE, AMX-INT8 and AMX-BF16 with the OS's tile data state (XCR0 bits 17-18): the tile int8 GEMM and,
    /// with `--precision bf16`, the tile bf16 GEMM.
    pub amx: bool,
    /// AVX-512 BF16 (`vdpbf16ps`, `vcvtne2ps2bf16`): the bf16 GEMM of `--precision bf16`.
    pub bf16: bool,
}

/// What a bundle's kernels require on x86-64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct X86Needs {
    /// AVX + FMA (VEX encodings, `vfmadd`).
    pub avx_fma: bool,
    /// AVX2.
    pub avx2: bool,
    /// AVX-512F, DQ, BW and VL (zmm registers; x86-64-v4).
    pub avx512: bool,
    /// The int8 extensions.
    pub ext: X86Ext,
}

/// The `cpuFeatures` bits of `NAME_config` on x86-64 and their names, in bit order (docs/bundle-format.md;
/// mirrored by `bundle-rt/src/cpu.rs`).
pub const X86_FEATURES: [&str; 12] = [
    "sse2",
    "avx",
    "fma",
    "avx2",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512vnni",
    "avx512vbmi",
    "amx",
    "avx512bf16",
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
        if self.ext.vnni {
            b |= 1 << 8;
        }
        if self.ext.vbmi {
            b |= 1 << 9;
        }
        if self.ext.amx {
            b |= 1 << 10;
        }
        if self.ext.bf16 {
            b |= 1 << 11;
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
    check(&mut a, n, fail)?;
    if n.ext.amx {
        // Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), the process's permission to use the tile
        // data state (granted once per process; asking again returns 0). Clobbers rdi, rsi, rcx and r11.
        a.mov(eax, 158u32).map_err(e)?;
        a.mov(edi, 0x1023u32).map_err(e)?;
        a.mov(esi, 18u32).map_err(e)?;
        a.syscall().map_err(e)?;
        a.test(eax, eax).map_err(e)?;
        a.jnz(fail).map_err(e)?;
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

/// The XCR0 bits a set's kernels need enabled by the OS: SSE and AVX state (1-2), plus opmask and ZMM state
/// (5-7) for AVX-512, plus the tile configuration and tile data (17-18) for AMX.
fn xcr0_bits(n: &X86Needs) -> i32 {
    let amx = if n.ext.amx { 0x6_0000 } else { 0 };
    amx | if n.avx512 { 0xE6 } else { 0x06 }
}

/// The feature check proper: falls through when every needed feature is present, else jumps to `fail`.
/// Clobbers eax, ebx, ecx and edx.
fn check(a: &mut CodeAssembler, n: &X86Needs, fail: CodeLabel) -> Result<(), String> {
    let e = |x: IcedError| x.to_string();
    if !(n.avx_fma || n.avx2 || n.avx512) {
        return Ok(());
    }
    // Leaf 1: ECX bit 12 FMA, 27 OSXSAVE, 28 AVX.
    a.mov(eax, 1u32).map_err(e)?;
    a.xor(ecx, ecx).map_err(e)?;
    a.cpuid().map_err(e)?;
    let leaf1 = (1u32 << 27) | (1 << 28) | if n.avx_fma { 1 << 12 } else { 0 };
    a.and(ecx, leaf1 as i32).map_err(e)?;
    a.cmp(ecx, leaf1 as i32).map_err(e)?;
    a.jne(fail).map_err(e)?;
    // XCR0: the register state the OS saves.
    a.xor(ecx, ecx).map_err(e)?;
    a.xgetbv().map_err(e)?;
    a.and(eax, xcr0_bits(n)).map_err(e)?;
    a.cmp(eax, xcr0_bits(n)).map_err(e)?;
    a.jne(fail).map_err(e)?;
    // Leaf 7 subleaf 0: EBX bit 5 AVX2, 16 AVX-512F, 17 DQ, 30 BW, 31 VL; ECX bit 1 AVX-512 VBMI, 11 AVX-512
    // VNNI; EDX bit 22 AMX-BF16, 24 AMX-TILE, 25 AMX-INT8.
    let avx512 = (1u32 << 16) | (1 << 17) | (1 << 30) | (1 << 31);
    let leaf7 = if n.avx2 { 1u32 << 5 } else { 0 } | if n.avx512 { avx512 } else { 0 };
    if leaf7 != 0 {
        a.mov(eax, 7u32).map_err(e)?;
        a.xor(ecx, ecx).map_err(e)?;
        a.cpuid().map_err(e)?;
        a.and(ebx, leaf7 as i32).map_err(e)?;
        a.cmp(ebx, leaf7 as i32).map_err(e)?;
        a.jne(fail).map_err(e)?;
        let leaf7c = if n.ext.vnni { 1 << 11 } else { 0 } | if n.ext.vbmi { 1 << 1 } else { 0 };
        if leaf7c != 0 {
            a.and(ecx, leaf7c).map_err(e)?;
            a.cmp(ecx, leaf7c).map_err(e)?;
            a.jne(fail).map_err(e)?;
        }
        if n.ext.amx {
            let amx = (1 << 22) | (1 << 24) | (1 << 25);
            a.and(edx, amx).map_err(e)?;
            a.cmp(edx, amx).map_err(e)?;
            a.jne(fail).map_err(e)?;
        }
        if n.ext.bf16 {
            // Leaf 7 subleaf 1: EAX bit 5 AVX-512 BF16.
            a.mov(eax, 7u32).map_err(e)?;
            a.mov(ecx, 1u32).map_err(e)?;
            a.cpuid().map_err(e)?;
            a.test(eax, 1 << 5).map_err(e)?;
            a.jz(fail).map_err(e)?;
        }
    }
    Ok(())
}

/// The multipliers of the tag's mixing function (SplitMix64's finaliser).
const MIX: [u64; 2] = [0xbf58_476d_1ce4_e5b9, 0x94d0_49bb_1331_11eb];

/// The tag [`assemble_pick`] stores for "this CPU has the features" at a slot of address `addr`: a 64-bit mix of
/// the address and the bundle's `key`; "it has not" is its complement.
pub fn pick_tag(addr: u64, key: u64) -> u64 {
    let mut x = addr ^ key;
    x ^= x >> 30;
    x = x.wrapping_mul(MIX[0]);
    x ^= x >> 27;
    x = x.wrapping_mul(MIX[1]);
    x ^ (x >> 31)
}

/// Assembles a fat bundle's `int pick(uint64_t *slot)` (System V): the feature check of `n`, remembered in the
/// caller's activation area. The slot holds [`pick_tag`] of its own address and `key` once the check found the
/// features, its complement once it did not; anything else (the area is never initialised) runs the check and
/// stores its answer. A remembered "yes" is confirmed against XCR0 (XGETBV, which does not trap in a virtual
/// machine as CPUID does), so a CPU whose OS does not save the ZMM state never runs AVX-512 code even if the slot
/// held the tag by chance. Uses rax, rcx, rdx, r8-r11 and rbx (saved).
pub fn assemble_pick(n: &X86Needs, key: u64) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut fail, mut run_check, mut cached_yes, mut cached_no) = (
        a.create_label(),
        a.create_label(),
        a.create_label(),
        a.create_label(),
    );
    a.push(rbx).map_err(e)?;
    a.mov(r9, rdi).map_err(e)?;
    // rax = pick_tag(slot, key)
    a.mov(rax, key).map_err(e)?;
    a.xor(rax, rdi).map_err(e)?;
    for (shift, mul) in [(30u32, Some(MIX[0])), (27, Some(MIX[1])), (31, None)] {
        a.mov(rdx, rax).map_err(e)?;
        a.shr(rdx, shift).map_err(e)?;
        a.xor(rax, rdx).map_err(e)?;
        if let Some(m) = mul {
            a.mov(r8, m).map_err(e)?;
            a.imul_2(rax, r8).map_err(e)?;
        }
    }
    a.mov(r10, rax).map_err(e)?;
    a.mov(r11, qword_ptr(r9)).map_err(e)?;
    a.cmp(r11, r10).map_err(e)?;
    a.je(cached_yes).map_err(e)?;
    a.not(rax).map_err(e)?;
    a.cmp(r11, rax).map_err(e)?;
    a.je(cached_no).map_err(e)?;
    a.set_label(&mut run_check).map_err(e)?;
    check(&mut a, n, fail)?;
    a.mov(qword_ptr(r9), r10).map_err(e)?;
    a.mov(eax, 1u32).map_err(e)?;
    a.pop(rbx).map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut fail).map_err(e)?;
    a.not(r10).map_err(e)?;
    a.mov(qword_ptr(r9), r10).map_err(e)?;
    a.set_label(&mut cached_no).map_err(e)?;
    a.xor(eax, eax).map_err(e)?;
    a.pop(rbx).map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut cached_yes).map_err(e)?;
    if n.avx_fma || n.avx2 || n.avx512 {
        a.xor(ecx, ecx).map_err(e)?;
        a.xgetbv().map_err(e)?;
        a.and(eax, xcr0_bits(n)).map_err(e)?;
        a.cmp(eax, xcr0_bits(n)).map_err(e)?;
        a.jne(run_check).map_err(e)?;
    }
    a.mov(eax, 1u32).map_err(e)?;
    a.pop(rbx).map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}
