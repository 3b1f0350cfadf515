//! `bundlec inspect --txn FILE`: reads any aie-rt transaction binary back, v0.1 or the optimized v1.0, whatever
//! its array size: checks the container (version, device generation, every opcode's size, the op count and the
//! total size; the geometry needs a target and is only printed), and prints one line per op with the tile
//! decoded from the register address and the register's name where the map is known (AIE-ML buffer
//! descriptors and shim task queues, the virtual NPU's counters), the DDR_PATCH records, the TCT, PREEMPT and
//! LOADPDI fields, and the per-opcode counts. Pad bytes and the informative col/row bytes are not read (real
//! producers leave junk there). Written from `docs/npu-transaction-format.md` alone, like any third-party
//! reader.

use std::collections::BTreeMap;
use std::fmt::Write;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A register's name where the map is known: the AIE-ML DMA buffer descriptors (in the shim row, word 1 holds
/// address bits 31:2 and word 2 bits 47:32) and shim task queues, and the virtual NPU's counters.
fn reg_name(row: u64, off: u64) -> Option<String> {
    Some(match off {
        0x1D000..=0x1D1FF => {
            let (bd, word) = ((off - 0x1D000) / 0x20, (off % 0x20) / 4);
            let what = match (row, word) {
                (0, 0) => ".length",
                (0, 1) => ".addr_low",
                (0, 2) => ".addr_high",
                _ => "",
            };
            format!("BD{bd}.w{word}{what}")
        }
        0x1D204 => "S2MM0_TASK_QUEUE".into(),
        0x1D20C => "S2MM1_TASK_QUEUE".into(),
        0x1D214 => "MM2S0_TASK_QUEUE".into(),
        0x1D21C => "MM2S1_TASK_QUEUE".into(),
        0x1DF00 => "DMA_LOAD_DONE(vnpu)".into(),
        0x1DF04 => "DMA_STORE_DONE(vnpu)".into(),
        0x32000 => "CORE_DONE(vnpu)".into(),
        _ => return None,
    })
}

/// `tile(col,row)` of a register address.
fn tile_name(reg: u64) -> String {
    format!("tile({},{})", (reg >> 25) & 0x7f, (reg >> 20) & 0x1f)
}

fn tile(reg: u64) -> String {
    let off = reg & 0xfffff;
    let name = reg_name((reg >> 20) & 0x1f, off).map_or(String::new(), |n| format!(" {n}"));
    format!("{}+0x{off:05x}{name}", tile_name(reg))
}

const KERNELS: [&str; 7] = ["?", "CONV", "GEMM", "EPILOGUE", "ELTWISE", "POOL", "GAP"];
const BUFFERS: [&str; 5] = ["in", "out", "scratch", "const", "super_instr"];

/// aie-rt's device generations by number.
fn generation_name(g: u8) -> &'static str {
    match g {
        1 => "AIE",
        2 => "AIE-ML",
        3 => "AIE2IPU (NPU1)",
        4 => "AIE2P (NPU2)",
        _ => "unknown",
    }
}

/// How an op's size is known (as in the format page).
enum Size {
    /// Fixed, no size field.
    Fixed(usize),
    /// A size field at this offset, one of these values.
    Field(usize, &'static [usize]),
    /// BLOCKWRITE: a size field at this offset, `min + 4n`.
    Block(usize, usize),
}

/// The size rule and name of `op` in the v0.1 (`v10` false) or v1.0 layout; `None` for an opcode the format
/// does not define.
fn rule(v10: bool, op: u8) -> Option<(Size, &'static str)> {
    use Size::{Block, Field, Fixed};
    Some(match (v10, op) {
        (false, 0) => (Field(20, &[24]), "WRITE"),
        (true, 0) => (Fixed(12), "WRITE"),
        (false, 1) => (Block(12, 16), "BLOCKWRITE"),
        (true, 1) => (Block(8, 12), "BLOCKWRITE"),
        (false, 3) => (Field(24, &[32, 28]), "MASKWRITE"),
        (false, 4) => (Field(24, &[32, 28]), "MASKPOLL"),
        (false, 7) => (Field(24, &[32, 28]), "MASKPOLL_BUSY"),
        (true, 3) => (Fixed(16), "MASKWRITE"),
        (true, 4) => (Fixed(16), "MASKPOLL"),
        (true, 7) => (Fixed(16), "MASKPOLL_BUSY"),
        (_, 5) => (Fixed(4), "NOOP"),
        (_, 6) => (Fixed(4), "PREEMPT"),
        (_, 8) => (Fixed(16), "LOADPDI"),
        (_, 128) => (Field(4, &[16]), "TCT"),
        (false, 129) => (Field(4, &[48]), "DDR_PATCH"),
        (true, 129) => (Field(4, &[24]), "DDR_PATCH"),
        (_, 131) => (Field(4, &[12]), "RECORD_TIMER"),
        (_, 132) => (Field(4, &[16]), "MERGE_SYNC"),
        (_, 144) => (Field(4, &[44]), "VNPU_DMA"),
        (_, 145) => (Field(4, &[24]), "VNPU_COMPUTE"),
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
    let v10 = match (b[0], b[1]) {
        (0, 1) => false,
        (1, 0) => true,
        (major, minor) => {
            return Err(format!(
                "header bytes 0-1: version {major}.{minor} (aie-rt transactions are 0.1, or 1.0 optimized)"
            ))
        }
    };
    if !bundle_rt::TXN_GENERATIONS.contains(&b[2]) {
        return Err(format!(
            "header byte 2: device generation {} ({}); transactions for Ryzen AI NPUs carry 3 (AIE2IPU) or 4 (AIE2P)",
            b[2],
            generation_name(b[2])
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
        "txn v{}.{} device generation {} ({}), {} rows x {} cols ({} mem-tile rows), {ops} ops, {total} bytes",
        b[0],
        b[1],
        b[2],
        generation_name(b[2]),
        b[3],
        b[4],
        b[5]
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut at = 16;
    for i in 0..ops {
        let op = *b
            .get(at)
            .ok_or_else(|| format!("op {i} at byte {at}: past the end"))?;
        let short = || format!("op {i} at byte {at}: truncated");
        // The opcode and the size come first: a bad size would misplace every later op.
        let (rule, name) =
            rule(v10, op).ok_or_else(|| format!("op {i} at byte {at}: unknown opcode {op}"))?;
        let (size, ok, want) = match rule {
            Size::Fixed(n) => (n, true, n.to_string()),
            Size::Field(f, allowed) => {
                let size = u32_at(b, at + f).ok_or_else(short)? as usize;
                let want = allowed.iter().map(|a| a.to_string()).collect::<Vec<_>>();
                (size, allowed.contains(&size), want.join(" or "))
            }
            Size::Block(f, min) => {
                let size = u32_at(b, at + f).ok_or_else(short)? as usize;
                let ok = size >= min && (size - min).is_multiple_of(4);
                (size, ok, format!("{min} + 4n"))
            }
        };
        if !ok {
            return Err(format!(
                "op {i} at byte {at}: opcode {op} has size {size} (the format requires {want})"
            ));
        }
        if at + size > b.len() {
            return Err(format!(
                "op {i} at byte {at}: size {size} does not fit the file"
            ));
        }
        let o = &b[at..at + size];
        let w32 = |k: usize| u32_at(o, k).ok_or_else(short);
        let w64 = |k: usize| u64_at(o, k).ok_or_else(short);
        // v0.1 ops carry a u64 register offset at 8, v1.0 ops a u32 at 4; their other fields follow it.
        let (reg, next) = if v10 {
            (w32(4).map(u64::from), 8)
        } else {
            (w64(8), 16)
        };
        let text = match op {
            0 => format!("{} = 0x{:x}", tile(reg?), w32(next)?),
            1 => {
                let first = if v10 { w32(4)? } else { w32(8)? };
                let words = (size - if v10 { 12 } else { 16 }) / 4;
                format!("{} <- {words} words", tile(first.into()))
            }
            3 | 4 | 7 => format!(
                "{} value 0x{:x} mask 0x{:x}",
                tile(reg?),
                w32(next)?,
                w32(next + 4)?
            ),
            5 => String::new(),
            6 => format!("level {}", o[1]),
            8 => format!(
                "pdi {} ({} B at 0x{:x}; not modelled by the emulator)",
                u16::from_le_bytes([o[2], o[3]]),
                w32(4)?,
                w64(8)?
            ),
            128 | 132 => {
                let (w, c) = (w32(8)?, w32(12)?);
                if op == 128 {
                    format!(
                        "{} col {} row {} channel {} ({} cols x {} rows)",
                        if w & 0xff == 0 { "S2MM" } else { "MM2S" },
                        (w >> 16) & 0xff,
                        (w >> 8) & 0xff,
                        c >> 24,
                        (c >> 16) & 0xff,
                        (c >> 8) & 0xff
                    )
                } else {
                    format!("{} tokens over {} cols", w & 0xff, (w >> 8) & 0xff)
                }
            }
            129 => {
                let (reg, idx, plus) = if v10 {
                    (w32(8)?.into(), u64::from(o[12]), w64(16)?)
                } else {
                    (w64(24)?, w64(32)?, w64(40)?)
                };
                let buf = BUFFERS.get(idx as usize).copied().unwrap_or("?");
                format!("{} <- arg {idx} ({buf}) + {plus}", tile(reg))
            }
            131 => format!("timer id {}", w32(8)?),
            144 => {
                let w = |k: usize| w32(8 + 4 * k);
                let dir = if w(1)? == 0 { "load" } else { "store" };
                format!(
                    "{} {dir} via {} (+{}) local 0x{:x}: {} rows x {} B, strides ddr {} local {}",
                    tile_name(w(7)?.into()),
                    tile(w(0)?.into()),
                    w(8)?,
                    w(2)?,
                    w(4)?,
                    w(3)?,
                    w(5)?,
                    w(6)?
                )
            }
            _ => {
                // 145: the only opcode `rule` leaves.
                let w = |k: usize| w32(8 + 4 * k);
                let k = KERNELS.get(w(1)? as usize).copied().unwrap_or("?");
                format!(
                    "{} {k} params @0x{:x} ({} B)",
                    tile_name(w(0)?.into()),
                    w(2)?,
                    w(3)?
                )
            }
        };
        let _ = writeln!(s, "{i:6} @{at:<8} {name:<13} {text}");
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
