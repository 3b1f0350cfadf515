//! The CPU features a bundle's kernels need (`cpuFeatures` of `NAME_config`) and the check that the running
//! CPU and OS provide them, so that [`Bundle`](crate::Bundle) refuses a bundle that would die of an illegal
//! instruction, with an error naming what is missing. The bit order mirrors bundlec's
//! `x86/cpu_check.rs` (`X86_FEATURES`); docs/bundle-format.md lists it.

/// Feature names by bit index (x86-64).
pub const FEATURES: [&str; 12] = [
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

/// Bits this runtime knows.
pub const KNOWN: u64 = (1 << FEATURES.len()) - 1;

/// A feature set, displayed as space-separated names (unknown bits as `bit<N>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features(pub u64);

impl core::fmt::Display for Features {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut sep = "";
        for i in 0..64 {
            if self.0 >> i & 1 == 1 {
                match FEATURES.get(i) {
                    Some(n) => write!(f, "{sep}{n}")?,
                    None => write!(f, "{sep}bit{i}")?,
                }
                sep = " ";
            }
        }
        Ok(())
    }
}

/// The features of `needed` that this CPU (and OS) lacks; bits this runtime does not know count as missing.
pub fn missing(needed: u64) -> u64 {
    needed & !available()
}

/// The known features present, from CPUID and XGETBV.
#[cfg(target_arch = "x86_64")]
pub fn available() -> u64 {
    use core::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
    let bit = |r: u32, b: u32| r >> b & 1 == 1;
    let l1 = __cpuid(1);
    let mut have = 1u64; // sse2: the x86-64 baseline
    if !bit(l1.ecx, 27) {
        return have; // no OSXSAVE: the OS does not save the AVX state
    }
    // SAFETY: OSXSAVE (leaf 1 ECX bit 27) says XGETBV is available.
    let xcr0 = unsafe { _xgetbv(0) };
    let avx_os = xcr0 & 0x6 == 0x6;
    let avx512_os = xcr0 & 0xE6 == 0xE6;
    let amx_os = xcr0 & 0x6_0000 == 0x6_0000;
    // Leaf 7 only exists where the maximum leaf reaches it.
    let max = __cpuid(0).eax;
    let l7 = if max >= 7 {
        __cpuid_count(7, 0)
    } else {
        core::arch::x86_64::CpuidResult {
            eax: 0,
            ebx: 0,
            ecx: 0,
            edx: 0,
        }
    };
    let flags = [
        (1, avx_os && bit(l1.ecx, 28)),
        (2, avx_os && bit(l1.ecx, 12)),
        (3, avx_os && bit(l7.ebx, 5)),
        (4, avx512_os && bit(l7.ebx, 16)),
        (5, avx512_os && bit(l7.ebx, 17)),
        (6, avx512_os && bit(l7.ebx, 30)),
        (7, avx512_os && bit(l7.ebx, 31)),
        (8, avx512_os && bit(l7.ecx, 11)),
        (9, avx512_os && bit(l7.ecx, 1)),
        (
            10,
            amx_os && bit(l7.edx, 22) && bit(l7.edx, 24) && bit(l7.edx, 25) && amx_permitted(),
        ),
        (11, avx512_os && max >= 7 && bit(__cpuid_count(7, 1).eax, 5)),
    ];
    for (i, ok) in flags {
        if ok {
            have |= 1 << i;
        }
    }
    have
}

/// Asks Linux once per process for the AMX tile data state (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`,
/// a raw system call: bundle-rt links no libc), which a process needs before its first tile instruction; true
/// when granted. The answer is remembered, so later feature checks make no system call. Other systems: false,
/// so bundles that need AMX are refused there.
#[cfg(target_arch = "x86_64")]
pub fn amx_permitted() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    // 0: not asked yet, 1: granted, 2: refused.
    static ANSWER: AtomicU8 = AtomicU8::new(0);
    match ANSWER.load(Ordering::Relaxed) {
        0 => {
            let granted = request_amx();
            ANSWER.store(if granted { 1 } else { 2 }, Ordering::Relaxed);
            granted
        }
        a => a == 1,
    }
}

/// The system call of [`amx_permitted`].
#[cfg(target_arch = "x86_64")]
fn request_amx() -> bool {
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
        const XFEATURE_XTILEDATA: usize = 18;
        const SYS_ARCH_PRCTL: usize = 158;
        let ret: isize;
        // SAFETY: arch_prctl with ARCH_REQ_XCOMP_PERM only changes which register state the kernel lets this
        // process use; the syscall instruction clobbers rcx and r11, declared.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") SYS_ARCH_PRCTL as isize => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The known features present: none on targets whose bundles record no features (their baseline).
#[cfg(not(target_arch = "x86_64"))]
pub fn available() -> u64 {
    0
}
