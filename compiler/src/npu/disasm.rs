//! `bundlec inspect --txn FILE`: reads a transaction binary back, checks the container (version and device
//! generation, every opcode, size, count and field with a stated value, as `bundle-rt`'s decoder does; the
//! array geometry needs a target and is only printed), and prints one line per op with the tile decoded from
//! the register address, the DDR_PATCH records and the per-opcode counts. Written from
//! `docs/npu-transaction-format.md` alone, like any third-party reader.

use std::collections::BTreeMap;
use std::fmt::Write;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn tile(reg: u64) -> String {
    format!(
        "tile({},{})+0x{:05x}",
        (reg >> 25) & 0x7f,
        (reg >> 20) & 0x1f,
        reg & 0xfffff
    )
}

const KERNELS: [&str; 7] = ["?", "CONV", "GEMM", "EPILOGUE", "ELTWISE", "POOL", "GAP"];
const BUFFERS: [&str; 5] = ["in", "out", "scratch", "const", "super_instr"];

/// The device generation byte of the virtual NPU (`'V'`).
const GENERATION: u8 = bundle_rt::TXN_GEN_VNPU;

/// Where an opcode keeps its size field and the size it requires (`None`: BLOCKWRITE, `16 + 4n`); `None` for an
/// opcode the format does not define.
fn size_rule(opcode: u8) -> Option<(usize, Option<u32>)> {
    Some(match opcode {
        0 => (20, Some(24)),
        1 => (12, None),
        3 | 4 => (24, Some(32)),
        129 => (4, Some(48)),
        144 => (4, Some(40)),
        145 => (4, Some(24)),
        _ => return None,
    })
}

/// Disassembles a transaction; `Err` names the byte offset and what is wrong.
pub fn disassemble(b: &[u8]) -> Result<String, String> {
    if b.len() < 16 {
        return Err(format!(
            "{} bytes: shorter than the 16-byte header",
            b.len()
        ));
    }
    for (at, field, expected) in [
        (0usize, "major", 0u8),
        (1, "minor", 1),
        (2, "device generation", GENERATION),
    ] {
        if b[at] != expected {
            return Err(format!(
                "header byte {at}: {field} 0x{:02x}, expected 0x{expected:02x} (not an aie-rt v0.1 transaction for the virtual NPU)",
                b[at]
            ));
        }
    }
    let (ops, total) = (u32_at(b, 8).unwrap_or(0), u32_at(b, 12).unwrap_or(0));
    if total as usize != b.len() {
        return Err(format!(
            "header total size {total} != file size {}",
            b.len()
        ));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "txn v{}.{} device generation 0x{:02x}, {} rows x {} cols ({} mem-tile rows), {ops} ops, {total} bytes",
        b[0], b[1], b[2], b[3], b[4], b[5]
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut at = 16;
    for i in 0..ops {
        let op = *b
            .get(at)
            .ok_or_else(|| format!("op {i} at byte {at}: past the end"))?;
        let short = || format!("op {i} at byte {at}: truncated");
        // The opcode and the size come first: a bad size would misplace every later op.
        let (field, expected) =
            size_rule(op).ok_or_else(|| format!("op {i} at byte {at}: unknown opcode {op}"))?;
        let size = u32_at(b, at + field).ok_or_else(short)? as usize;
        let size_ok = match expected {
            Some(e) => size == e as usize,
            None => size >= 16 && (size - 16).is_multiple_of(4),
        };
        if !size_ok {
            let want = expected.map_or("16 + 4n".to_string(), |e| e.to_string());
            return Err(format!(
                "op {i} at byte {at}: opcode {op} has size {size} (the format requires {want})"
            ));
        }
        if at + size > b.len() {
            return Err(format!(
                "op {i} at byte {at}: size {size} does not fit the file"
            ));
        }
        // Fields with a stated value.
        let fixed: &[(usize, &str, u32)] = match op {
            129 => &[(8, "type", 0), (12, "size_in_bytes", 40), (16, "action", 0)],
            144 => &[(36, "reserved", 0)],
            _ => &[],
        };
        for &(off, field, want) in fixed {
            let v = u32_at(b, at + off).ok_or_else(short)?;
            if v != want {
                return Err(format!("op {i} at byte {at}: {field} {v}, expected {want}"));
            }
        }
        let (name, text) = match op {
            0 => {
                let reg = u64_at(b, at + 8).ok_or_else(short)?;
                (
                    "WRITE",
                    format!(
                        "{} = 0x{:x}",
                        tile(reg),
                        u32_at(b, at + 16).ok_or_else(short)?
                    ),
                )
            }
            1 => (
                "BLOCKWRITE",
                format!(
                    "{} <- {} words",
                    tile(u32_at(b, at + 8).ok_or_else(short)? as u64),
                    (size - 16) / 4
                ),
            ),
            3 | 4 => {
                let reg = u64_at(b, at + 8).ok_or_else(short)?;
                let (v, m) = (
                    u32_at(b, at + 16).ok_or_else(short)?,
                    u32_at(b, at + 20).ok_or_else(short)?,
                );
                (
                    if op == 3 { "MASKWRITE" } else { "MASKPOLL" },
                    format!("{} value 0x{v:x} mask 0x{m:x}", tile(reg)),
                )
            }
            129 => {
                let reg = u64_at(b, at + 24).ok_or_else(short)?;
                let (idx, plus) = (
                    u64_at(b, at + 32).ok_or_else(short)?,
                    u64_at(b, at + 40).ok_or_else(short)?,
                );
                let buf = BUFFERS.get(idx as usize).copied().unwrap_or("?");
                (
                    "DDR_PATCH",
                    format!("{} <- arg {idx} ({buf}) + {plus}", tile(reg)),
                )
            }
            144 => {
                let w = |k: usize| u32_at(b, at + 8 + 4 * k).ok_or_else(short);
                let dir = if w(1)? == 0 { "load" } else { "store" };
                (
                    "VNPU_DMA",
                    format!(
                        "{} {dir} local 0x{:x}: {} rows x {} B, strides ddr {} local {}",
                        tile(w(0)? as u64),
                        w(2)?,
                        w(4)?,
                        w(3)?,
                        w(5)?,
                        w(6)?
                    ),
                )
            }
            _ => {
                // 145: the only opcode `size_rule` leaves.
                let w = |k: usize| u32_at(b, at + 8 + 4 * k).ok_or_else(short);
                let k = KERNELS.get(w(1)? as usize).copied().unwrap_or("?");
                (
                    "VNPU_COMPUTE",
                    format!(
                        "{} {k} params @0x{:x} ({} B)",
                        tile(w(0)? as u64),
                        w(2)?,
                        w(3)?
                    ),
                )
            }
        };
        let _ = writeln!(s, "{i:6} @{at:<8} {name:<12} {text}");
        *counts.entry(name).or_default() += 1;
        at += size;
    }
    if at != b.len() {
        return Err(format!("{} trailing bytes after {ops} ops", b.len() - at));
    }
    let _ = writeln!(
        s,
        "counts: {}",
        counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(s)
}
