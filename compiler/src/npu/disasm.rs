//! `bundlec inspect --txn FILE`: reads a transaction binary back, checks the container (every size and count),
//! and prints one line per op with the tile decoded from the register address, the DDR_PATCH records and the
//! per-opcode counts. Written from `docs/npu-transaction-format.md` alone, like any third-party reader.

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

/// Disassembles a transaction; `Err` names the byte offset and what is wrong.
pub fn disassemble(b: &[u8]) -> Result<String, String> {
    if b.len() < 16 {
        return Err(format!(
            "{} bytes: shorter than the 16-byte header",
            b.len()
        ));
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
        let (name, size, text) = match op {
            0 => {
                let reg = u64_at(b, at + 8).ok_or_else(short)?;
                (
                    "WRITE",
                    24,
                    format!(
                        "{} = 0x{:x}",
                        tile(reg),
                        u32_at(b, at + 16).ok_or_else(short)?
                    ),
                )
            }
            1 => {
                let size = u32_at(b, at + 12).ok_or_else(short)? as usize;
                (
                    "BLOCKWRITE",
                    size,
                    format!(
                        "{} <- {} words",
                        tile(u32_at(b, at + 8).ok_or_else(short)? as u64),
                        size.saturating_sub(16) / 4
                    ),
                )
            }
            3 | 4 => {
                let reg = u64_at(b, at + 8).ok_or_else(short)?;
                let (v, m) = (
                    u32_at(b, at + 16).ok_or_else(short)?,
                    u32_at(b, at + 20).ok_or_else(short)?,
                );
                (
                    if op == 3 { "MASKWRITE" } else { "MASKPOLL" },
                    32,
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
                    u32_at(b, at + 4).ok_or_else(short)? as usize,
                    format!("{} <- arg {idx} ({buf}) + {plus}", tile(reg)),
                )
            }
            144 => {
                let w = |k: usize| u32_at(b, at + 8 + 4 * k).ok_or_else(short);
                let dir = if w(1)? == 0 { "load" } else { "store" };
                (
                    "VNPU_DMA",
                    u32_at(b, at + 4).ok_or_else(short)? as usize,
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
            145 => {
                let w = |k: usize| u32_at(b, at + 8 + 4 * k).ok_or_else(short);
                let k = KERNELS.get(w(1)? as usize).copied().unwrap_or("?");
                (
                    "VNPU_COMPUTE",
                    u32_at(b, at + 4).ok_or_else(short)? as usize,
                    format!(
                        "{} {k} params @0x{:x} ({} B)",
                        tile(w(0)? as u64),
                        w(2)?,
                        w(3)?
                    ),
                )
            }
            o if o >= 128 => (
                "CUSTOM",
                u32_at(b, at + 4).ok_or_else(short)? as usize,
                format!("opcode {o}"),
            ),
            o => return Err(format!("op {i} at byte {at}: unknown opcode {o}")),
        };
        if size < 8 || at + size > b.len() {
            return Err(format!(
                "op {i} at byte {at}: size {size} does not fit the file"
            ));
        }
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
