//! Target selection: the triple (`--target`, default the host) and ISA features (`--cpu`). On x86-64 System V
//! targets the default is the fat bundle `x86-64-v3,x86-64-v4` ([`resolve_cpu`]); `x86-64-v3` sets `has_avx` and
//! `has_fma` explicitly, so Cranelift emits FMA instructions
//! instead of `fmaf` calls; `generic` is baseline x86-64 (SSE2) with separate multiply and add; `native` asks
//! the host. The code is position independent so it links into PIE executables and shared libraries alike.

use crate::error::{Error, Result};
use crate::x86::cpu_check::X86Ext;
use crate::x86::gemm_x86::Simd;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use std::str::FromStr;
use target_lexicon::{Architecture, Triple};

/// A configured target ISA and what the kernels may assume of it.
pub struct Target {
    /// The Cranelift ISA.
    pub isa: OwnedTargetIsa,
    /// Whether `fma` is a single instruction.
    pub has_fma: bool,
    /// The `--cpu` value used.
    pub cpu: String,
    /// Machine-code micro-kernels (x86-64 System V targets with AVX2+FMA or AVX-512F); None: Cranelift only.
    pub simd: Option<Simd>,
    /// The int8 extensions the kernels use: AVX-512 VNNI (`--cpu icelake`, `cascadelake`, `sapphirerapids`,
    /// `znver4`, `znver5`, or `native` on such a CPU), VBMI (the same but `cascadelake`), AMX-INT8
    /// (`sapphirerapids`, or `native` on a CPU whose OS enables the tile state).
    pub ext: X86Ext,
}

const X86_V3: &[&str] = &[
    "has_sse3",
    "has_ssse3",
    "has_sse41",
    "has_sse42",
    "has_popcnt",
    "has_avx",
    "has_avx2",
    "has_fma",
    "has_bmi1",
    "has_bmi2",
    "has_lzcnt",
];

fn bad(what: &str, msg: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        what: what.into(),
        message: msg.to_string(),
    }
}

/// Builds the ISA for `target` (None: host) and `cpu`.
pub fn target(triple: Option<&str>, cpu: &str) -> Result<Target> {
    let triple = match triple {
        Some(t) => Triple::from_str(t).map_err(|e| bad("--target", format!("'{t}': {e}")))?,
        None => Triple::host(),
    };
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| Error::internal("isa", format!("setting {k}={v}: {e}")))
    };
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "is_pic", "true")?;
    set(
        &mut flags,
        "enable_verifier",
        if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        },
    )?;
    let shared = settings::Flags::new(flags);
    let arch = triple.architecture;
    let (builder, has_fma) = match (arch, cpu) {
        (_, "native") => {
            if triple != Triple::host() {
                return Err(bad(
                    "--cpu",
                    "'native' only works when compiling for the host",
                ));
            }
            let b =
                cranelift_native::builder_with_options(true).map_err(|e| bad("--cpu native", e))?;
            let fma = match arch {
                Architecture::X86_64 => host_has_fma(),
                _ => true,
            };
            (b, fma)
        }
        (Architecture::X86_64, c) => {
            let mut b =
                cranelift_codegen::isa::lookup(triple.clone()).map_err(|e| bad("--target", e))?;
            match c {
                "generic" | "x86-64" => (b, false),
                "x86-64-v3" | "haswell" | "skylake" => {
                    for f in X86_V3 {
                        b.enable(f).map_err(|e| Error::internal("isa", format!("{f}: {e}")))?;
                    }
                    (b, true)
                }
                "x86-64-v4" | "skylake-avx512" | "icelake" | "cascadelake" | "sapphirerapids"
                | "znver4" | "znver5" => {
                    for f in X86_V3.iter().chain(&["has_avx512f", "has_avx512vl", "has_avx512dq", "has_avx512bitalg", "has_avx512vbmi"]) {
                        b.enable(f).map_err(|e| Error::internal("isa", format!("{f}: {e}")))?;
                    }
                    (b, true)
                }
                other => return Err(bad("--cpu", format!("unknown x86-64 cpu '{other}' (native, generic, x86-64-v3, x86-64-v4, haswell, skylake, skylake-avx512, icelake, cascadelake, sapphirerapids, znver4, znver5)"))),
            }
        }
        (Architecture::Aarch64(_), "generic" | "x86-64-v3" | "armv8-a") => (
            cranelift_codegen::isa::lookup(triple.clone()).map_err(|e| bad("--target", e))?,
            true,
        ),
        (Architecture::Aarch64(_), other) => {
            return Err(bad(
                "--cpu",
                format!("unknown aarch64 cpu '{other}' (generic, native)"),
            ))
        }
        (other, _) => {
            return Err(bad(
                "--target",
                format!("architecture {other} is not supported yet (x86_64, aarch64)"),
            ));
        }
    };
    // Micro-kernels follow the System V calling convention: ELF and Mach-O x86-64 targets only.
    let sysv = arch == Architecture::X86_64
        && triple.operating_system != target_lexicon::OperatingSystem::Windows;
    let simd = match cpu {
        _ if !sysv => None,
        "x86-64-v3" | "haswell" | "skylake" => Some(Simd::Avx2),
        "x86-64-v4" | "skylake-avx512" | "icelake" | "cascadelake" | "sapphirerapids"
        | "znver4" | "znver5" => Some(Simd::Avx512),
        "native" => host_simd(),
        _ => None,
    };
    // AVX-512 VNNI (`vpdpbusd`): Cascade Lake and later, Zen 4 and later; not part of x86-64-v4. VBMI: the same
    // but Cascade Lake. AMX: Sapphire Rapids and later Xeons.
    let host = host_ext();
    let ext = if simd == Some(Simd::Avx512) {
        X86Ext {
            vnni: match cpu {
                "icelake" | "cascadelake" | "sapphirerapids" | "znver4" | "znver5" => true,
                "native" => host.vnni,
                _ => false,
            },
            vbmi: match cpu {
                "icelake" | "sapphirerapids" | "znver4" | "znver5" => true,
                "native" => host.vbmi,
                _ => false,
            },
            // The tile state is requested from Linux (`cpu_check.rs`, bundle-rt's `cpu.rs`).
            bf16: match cpu {
                "sapphirerapids" | "znver4" | "znver5" => true,
                "native" => host.bf16,
                _ => false,
            },
            amx: triple.operating_system == target_lexicon::OperatingSystem::Linux
                && match cpu {
                    "sapphirerapids" => true,
                    "native" => host.amx,
                    _ => false,
                },
        }
    } else {
        X86Ext::default()
    };
    let isa = builder.finish(shared).map_err(|e| bad("--target", e))?;
    Ok(Target {
        isa,
        has_fma,
        cpu: cpu.to_string(),
        simd,
        ext,
    })
}

/// The `--cpu` that `default` means for `triple` (None: the host): the fat `x86-64-v3,x86-64-v4` on x86-64
/// System V targets (bundle-rt and the entry pick the AVX-512 set where the CPU has it), `x86-64-v3` on other
/// x86-64 targets (micro-kernels and fat bundles follow the System V convention), `generic` elsewhere. Any other
/// value is returned as it is.
pub fn resolve_cpu(triple: Option<&str>, cpu: &str) -> Result<String> {
    if cpu != DEFAULT_CPU {
        return Ok(cpu.to_string());
    }
    let triple = match triple {
        Some(t) => Triple::from_str(t).map_err(|e| bad("--target", format!("'{t}': {e}")))?,
        None => Triple::host(),
    };
    Ok(match triple.architecture {
        Architecture::X86_64
            if triple.operating_system != target_lexicon::OperatingSystem::Windows =>
        {
            "x86-64-v3,x86-64-v4"
        }
        Architecture::X86_64 => "x86-64-v3",
        _ => "generic",
    }
    .to_string())
}

/// The `--cpu` value that stands for the target's default kernel sets ([`resolve_cpu`]).
pub const DEFAULT_CPU: &str = "default";

/// The targets of a `--cpu` list: one kernel set, or (a fat bundle, x86-64 System V only) a baseline set and a
/// faster one that the entry function picks per call when the CPU has its features. Both must lower alike (the
/// same int8 kernel family), since they share one lowering, memory plan and weights image.
pub fn targets(triple: Option<&str>, cpus: &str) -> Result<(Target, Option<Target>)> {
    let list: Vec<&str> = cpus.split(',').map(str::trim).collect();
    match list.as_slice() {
        [one] => Ok((target(triple, one)?, None)),
        [base, fast] => {
            let (b, f) = (target(triple, base)?, target(triple, fast)?);
            if b.simd.is_none() || f.simd.is_none() || b.simd == f.simd {
                return Err(bad(
                    "--cpu",
                    format!(
                        "'{cpus}': a fat bundle pairs two x86-64 kernel sets with different machine-code \
                         micro-kernels, e.g. x86-64-v3,x86-64-v4 (System V targets)"
                    ),
                ));
            }
            if b.simd == Some(Simd::Avx512) {
                return Err(bad(
                    "--cpu",
                    format!(
                        "'{cpus}': FAST must be the wider kernel set: BASE is what runs on CPUs without FAST's \
                         features, so it cannot need AVX-512 when FAST does not (write x86-64-v3,x86-64-v4)"
                    ),
                ));
            }
            if b.ext.vnni != f.ext.vnni {
                return Err(bad(
                    "--cpu",
                    format!(
                        "'{cpus}': both sets must use the same int8 kernels (one has AVX-512 VNNI, the other \
                         not); pair x86-64-v3 with x86-64-v4, or compile two bundles"
                    ),
                ));
            }
            Ok((b, Some(f)))
        }
        _ => Err(bad(
            "--cpu",
            format!("'{cpus}': at most two kernel sets (BASE,FAST)"),
        )),
    }
}

/// The column-panel width of GEMV weights (`LowerOpts::gemv_panel`): the tile columns of the kernel set whose
/// lowering the bundle has (a fat bundle's FAST set: 32 on AVX-512; its AVX2 set reads those panels with 16-column
/// tiles, `machine_code::gemm::tile_cols`); `None` without machine-code micro-kernels.
pub fn gemv_panel(base: &Target, fast: Option<&Target>) -> Option<usize> {
    fast.unwrap_or(base).simd.map(|s| s.tile().1)
}

/// The host's int8 extensions: AVX-512 VNNI and VBMI, and AMX-INT8 when the OS also enables the tile state
/// (XCR0 bits 17-18; the process still asks for permission, `bundle-rt`'s AMX setup).
pub fn host_ext() -> X86Ext {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid_count, _xgetbv};
        if std::arch::x86_64::__cpuid(0).eax < 7 {
            return X86Ext::default();
        }
        let l7 = __cpuid_count(7, 0);
        let osxsave = std::arch::x86_64::__cpuid(1).ecx >> 27 & 1 == 1;
        // SAFETY: OSXSAVE says XGETBV is available.
        let xcr0 = if osxsave { unsafe { _xgetbv(0) } } else { 0 };
        X86Ext {
            vnni: std::arch::is_x86_feature_detected!("avx512vnni"),
            vbmi: std::arch::is_x86_feature_detected!("avx512vbmi"),
            amx: l7.edx >> 24 & 3 == 3 && l7.edx >> 22 & 1 == 1 && xcr0 >> 17 & 3 == 3,
            bf16: __cpuid_count(7, 1).eax >> 5 & 1 == 1 && xcr0 & 0xE6 == 0xE6,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        X86Ext::default()
    }
}

/// The widest micro-kernel the host runs.
fn host_simd() -> Option<Simd> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            Some(Simd::Avx512)
        } else if host_has_fma() && std::arch::is_x86_feature_detected!("avx2") {
            Some(Simd::Avx2)
        } else {
            None
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Whether the host has AVX and FMA (only meaningful on x86-64 hosts).
fn host_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
