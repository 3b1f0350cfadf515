//! `bundlec inspect --txn FILE`: reads any aie-rt transaction binary back, v0.1 or the optimized v1.0, whatever
//! its array size: checks the container (version, device generation, every opcode's size, the op count and the
//! total size; the geometry needs a target and is only printed), and prints one line per op with the tile
//! decoded from the register address and the register's name where the map is known (AIE-ML buffer
//! descriptors and shim task queues, the super-kernel's mailbox), the DDR_PATCH records, the TCT, PREEMPT and
//! LOADPDI fields, and the per-opcode counts. Pad bytes and the informative col/row bytes are not read (real
//! producers leave junk there). Written from `docs/npu-transaction-format.md` alone, like any third-party
//! reader: its opcode numbers and kernel names are its own on purpose, not `bundle_rt::superkernel`'s, so that a
//! wrong shared definition shows as a disagreement.

use bundle_rt::aie::bd::{Bd, BdKind};
use std::collections::BTreeMap;
use std::fmt::Write;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The BD layout of a tile in row `row` of an array with `mem_rows` memory-tile rows.
fn bd_kind(row: u64, mem_rows: u64) -> BdKind {
    match row {
        0 => BdKind::Shim,
        r if r <= mem_rows => BdKind::MemTile,
        _ => BdKind::Core,
    }
}

/// A register's name where the map is known (docs/aie-ml-facts.md): the AIE-ML DMA buffer descriptors of each
/// tile kind (in the shim row, word 1 holds address bits 31:2 and word 2 bits 47:32), the DMA channels' control,
/// queue and status registers, and the lock values.
fn reg_name(row: u64, mem_rows: u64, off: u64) -> Option<String> {
    let kind = bd_kind(row, mem_rows);
    let off32 = u32::try_from(off).ok()?;
    if let Some((bd, word)) = kind.bd_at(off32) {
        let what = match (kind, word) {
            (BdKind::Shim, 0) => ".length",
            (BdKind::Shim, 1) => ".addr_low",
            (BdKind::Shim, 2) => ".addr_high",
            _ => "",
        };
        return Some(format!("BD{bd}.w{word}{what}"));
    }
    let m = kind.regs();
    let (n, off) = (u64::from(m.channels), u64::from(off32));
    let queue = if kind == BdKind::Shim {
        "TASK_QUEUE"
    } else {
        "START_QUEUE"
    };
    for (dir, base, sbase) in [
        ("S2MM", m.ctrl, m.status),
        ("MM2S", m.mm2s_ctrl, m.mm2s_status),
    ] {
        let (base, sbase) = (u64::from(base), u64::from(sbase));
        if (base..base + 8 * n).contains(&off) && off.is_multiple_of(4) {
            let (ch, reg) = ((off - base) / 8, (off - base) % 8);
            let reg = if reg == 0 { "CTRL" } else { queue };
            return Some(format!("{dir}{ch}_{reg}"));
        }
        if (sbase..sbase + 4 * n).contains(&off) && off.is_multiple_of(4) {
            return Some(format!("{dir}{}_STATUS", (off - sbase) / 4));
        }
    }
    let locks = u64::from(m.locks);
    if (locks..u64::from(m.lock(m.lock_count))).contains(&off) && (off - locks).is_multiple_of(0x10)
    {
        return Some(format!("LOCK{}", (off - locks) / 0x10));
    }
    None
}

/// A BLOCKWRITE of a whole buffer descriptor, decoded (`: BD3 valid, 64 words at 0x100, ...`), or of a core's
/// super-kernel mailbox (`: mailbox CONV params @0x0 (80 B)`); empty for any other block.
fn bd_text(first: u32, mem_rows: u64, payload: &[u32]) -> String {
    let kind = bd_kind(u64::from(first >> 20) & 0x1f, mem_rows);
    if kind == BdKind::Core && first & 0xfffff == super::txn::MAILBOX && payload.len() == 4 {
        let k = KERNELS.get(payload[0] as usize).copied().unwrap_or("?");
        return format!(
            ": mailbox {k} params @0x{:x} ({} B)",
            payload[1], payload[2]
        );
    }
    let Some((index, 0)) = kind.bd_at(first & 0xfffff) else {
        return String::new();
    };
    if payload.len() != kind.words() {
        return String::new();
    }
    let bd = Bd::decode(kind, payload);
    let mut t = format!(
        ": BD{index} {}, {} words at 0x{:x}",
        if bd.valid { "valid" } else { "not valid" },
        bd.len,
        bd.addr
    );
    let dims: Vec<String> = bd
        .dims
        .iter()
        .filter(|d| d.wrap > 0)
        .map(|d| format!("{}x{}", d.wrap, d.step))
        .collect();
    if !dims.is_empty() {
        let _ = write!(t, ", dims (wrap x step words) {}", dims.join(" "));
    }
    if let Some(a) = bd.acquire {
        let _ = write!(t, ", acquire lock {} {}", a.id, a.value);
    }
    if let Some(r) = bd.release {
        let _ = write!(t, ", release lock {} {:+}", r.id, r.value);
    }
    if let Some(n) = bd.next {
        let _ = write!(t, ", next BD{n}");
    }
    t
}

/// `tile(col,row)` of a register address.
fn tile_name(reg: u64) -> String {
    format!("tile({},{})", (reg >> 25) & 0x7f, (reg >> 20) & 0x1f)
}

fn tile(reg: u64, mem_rows: u64) -> String {
    let off = reg & 0xfffff;
    let name =
        reg_name((reg >> 20) & 0x1f, mem_rows, off).map_or(String::new(), |n| format!(" {n}"));
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
        (_, 146) => (Field(4, &[16]), "VNPU_KERNEL"),
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
    let mem_rows = u64::from(b[5]);
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
            0 => format!("{} = 0x{:x}", tile(reg?, mem_rows), w32(next)?),
            1 => {
                let first = if v10 { w32(4)? } else { w32(8)? };
                let start = if v10 { 12 } else { 16 };
                let words = (size - start) / 4;
                let head = format!("{} <- {words} words", tile(first.into(), mem_rows));
                let payload: Vec<u32> = (0..words)
                    .filter_map(|k| u32_at(o, start + 4 * k))
                    .collect();
                head + &bd_text(first, mem_rows, &payload)
            }
            3 | 4 | 7 => format!(
                "{} value 0x{:x} mask 0x{:x}",
                tile(reg?, mem_rows),
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
                format!("{} <- arg {idx} ({buf}) + {plus}", tile(reg, mem_rows))
            }
            131 => format!("timer id {}", w32(8)?),
            _ => {
                // 146: the only opcode `rule` leaves.
                format!(
                    "{} runs resident kernel {} (1: the super-kernel)",
                    tile_name(w32(8)?.into()),
                    w32(12)?
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

#[cfg(test)]
mod tests {
    use super::disassemble;

    /// Little-endian bytes of words.
    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// mlir-aie's test/Targets/NPU/npu_blockwrite_instgen.mlir publishes this transaction: a BLOCKWRITE of
    /// memory-tile BD 6 of tile (3, 1), a WRITE and a TCT. The disassembly decodes the BD and names registers.
    #[test]
    fn published_blockwrite_of_a_memory_tile_bd() {
        let txn = bytes(&[
            0x0603_0100,
            0x0000_0104,
            3,
            0x68,
            1,
            0,
            0x061A_00C0,
            0x30,
            0x0000_0001,
            0x0058_0002,
            0x000C_0005,
            0x0010_0007,
            0x0000_0009,
            0x0000_0000,
            0x059A_000C,
            0x8403_8201,
            0,
            0,
            0x0640_0DEF,
            0,
            0x42,
            0x18,
            0x80,
            0x10,
            0x0003_0401,
            0x0501_0200,
        ]);
        let text = disassemble(&txn).unwrap();
        let want = "tile(3,1)+0xa00c0 BD6.w0 <- 8 words: BD6 valid, 1 words at 0x8, dims (wrap x step words) \
                    6x6 8x8, acquire lock 1 2, release lock 3 +4, next BD5";
        assert!(text.contains(want), "{text}");
        assert!(text.contains("TCT"), "{text}");
    }

    #[test]
    fn registers_of_each_tile_kind_are_named() {
        let txn = bytes(&[
            0x0603_0100,
            0x0000_0104,
            3,
            16 + 3 * 24,
            0,
            0,
            0x0001_D214, // shim (0,0) MM2S0 task queue
            0,
            5,
            24,
            0,
            0,
            0x001C_0030, // memory tile (0,1) lock 3
            0,
            1,
            24,
            0,
            0,
            0x0021_DE14, // core (0,2) MM2S0 start queue
            0,
            2,
            24,
        ]);
        let text = disassemble(&txn).unwrap();
        for name in [
            "MM2S0_TASK_QUEUE",
            "tile(0,1)+0xc0030 LOCK3",
            "tile(0,2)+0x1de14 MM2S0_START_QUEUE",
        ] {
            assert!(text.contains(name), "{name}: {text}");
        }
    }
}
