//! AIE-ML data movement for [`TxnBody::dma`](super::txn::TxnBody::dma): a transfer between DDR and a core tile
//! programmed as the hardware does it (docs/npu-transaction-format.md, "AIE-ML data movement"): buffer
//! descriptors written with BLOCKWRITE, the shim BD's address bound by DDR_PATCH, tasks pushed to the start queues
//! of the shim, memory-tile and core channels along the device configuration's routes, staged in the memory tile
//! under a pair of locks, and completed by a task-completion token that a TCT takes. A load goes shim MM2S 0 →
//! memory tile S2MM 0 → memory tile MM2S `k` → core S2MM 0; a store core MM2S 0 → memory tile S2MM `2 + k` →
//! memory tile MM2S `cores` → shim S2MM 0 (`k` the core's row within its column).
//!
//! [`Plan`] says whether a transfer fits: 4-byte aligned offsets, lengths and strides (the DMA moves 32-bit
//! words), rows within the BD field limits. Transfers that do not fit stay VNPU_DMA commands.

use bundle_rt::aie::bd::BdKind::{Core, MemTile, Shim};

/// A memory tile's own memory in the window its BDs address.
const MEM_OWN: u32 = 0x80000;
/// A memory tile BD names its own lock `i` as `64 + i`.
const OWN_LOCK: u32 = 64;
/// The most words a core BD moves (14-bit length) and the widest D0 row (8-bit wrap); the shim's D0 wrap is
/// 10 bits.
const CORE_MAX_LEN: u32 = (1 << 14) - 1;
const CORE_MAX_WRAP: u32 = 255;
const SHIM_MAX_WRAP: u32 = 1023;
/// Largest core D1 step and shim D1 step (stored minus one in 13 and 20 bits).
const CORE_MAX_STEP: u32 = 1 << 13;
const SHIM_MAX_STEP: u32 = 1 << 20;

/// The array shape the routes assume: one memory tile per column (row 1) serving up to 4 core rows, each core's
/// load and store staging areas (a core tile's memory each) inside the memory tile's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// First core row.
    pub first_core: u8,
    /// Core rows per column.
    pub cores: u8,
    /// Bytes of a core tile's memory (a staging area's size).
    pub local: u32,
}

impl Layout {
    /// The layout of a target, if its geometry has the routes: a memory-tile row, at most 4 core rows, and a
    /// memory tile that holds 8 staging areas.
    pub fn of(t: &super::target::NpuTarget) -> Option<Layout> {
        let first_core = t.mem_tile_rows.checked_add(1)?;
        let cores = t.rows.checked_sub(first_core)?;
        let fits = t.mem_tile_rows >= 1
            && (1..=4).contains(&cores)
            && u64::from(t.mem_tile_bytes) >= 8 * u64::from(t.local_memory_bytes);
        fits.then_some(Layout {
            first_core,
            cores,
            local: t.local_memory_bytes,
        })
    }
}

/// A transfer's shape in 32-bit words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Words per row.
    pub row: u32,
    /// Rows.
    pub rows: u32,
    /// Words between row starts in DDR.
    pub ddr_stride: u32,
    /// Words between row starts in local memory.
    pub local_stride: u32,
    /// Byte offset in DDR.
    pub offset: u64,
    /// Byte offset in local memory.
    pub local: u32,
}

impl Plan {
    /// The plan of a transfer, if every byte count is a multiple of 4 and the BD fields hold it.
    pub fn of(
        offset: u64,
        local: u32,
        row_bytes: u32,
        rows: u32,
        ddr_stride: u32,
        local_stride: u32,
    ) -> Option<Plan> {
        let aligned = [
            u64::from(local),
            u64::from(row_bytes),
            u64::from(ddr_stride),
            u64::from(local_stride),
            offset,
        ]
        .iter()
        .all(|v| v % 4 == 0);
        if !aligned || row_bytes == 0 || rows == 0 {
            return None;
        }
        let p = Plan {
            row: row_bytes / 4,
            rows,
            ddr_stride: ddr_stride / 4,
            local_stride: local_stride / 4,
            offset,
            local,
        };
        let words = p.row.checked_mul(rows)?;
        let fits = words <= CORE_MAX_LEN
            && (p.local_contiguous()
                || (p.row <= CORE_MAX_WRAP
                    && p.local_stride <= CORE_MAX_STEP
                    && rows <= CORE_MAX_WRAP))
            && (p.ddr_contiguous()
                || (p.row <= SHIM_MAX_WRAP
                    && p.ddr_stride <= SHIM_MAX_STEP
                    && rows <= SHIM_MAX_WRAP))
            && p.local / 4 < (1 << 14);
        fits.then_some(p)
    }

    /// Words moved.
    pub fn words(&self) -> u32 {
        self.row * self.rows
    }

    fn local_contiguous(&self) -> bool {
        self.rows == 1 || self.local_stride == self.row
    }

    fn ddr_contiguous(&self) -> bool {
        self.rows == 1 || self.ddr_stride == self.row
    }

    /// The shim BD: DDR side, D0 a row, D1 the rows (linear when contiguous); address left for DDR_PATCH.
    pub fn shim_bd(&self) -> [u32; 8] {
        let (d0, d1) = if self.ddr_contiguous() {
            (0, 0)
        } else {
            (self.row << 20, self.rows << 20 | (self.ddr_stride - 1))
        };
        [self.words(), 0, 0, d0, d1, 0, 0, 1 << 25]
    }

    /// The core BD: local side, as the shim BD's dimensions; acquire and release none (the host
    /// synchronises with TCTs).
    pub fn core_bd(&self) -> [u32; 6] {
        let (steps, wraps) = if self.local_contiguous() {
            (0, 0)
        } else {
            (
                (self.local_stride - 1) << 13,
                self.rows << 21 | self.row << 13,
            )
        };
        [
            (self.local / 4) << 14 | self.words(),
            0,
            steps,
            wraps,
            0,
            1 << 25,
        ]
    }
}

/// A memory-tile BD: `words` linear words at byte `addr` of its own memory, acquiring own lock `acq` (≥ 1) and
/// releasing own lock `rel` (+1).
pub fn mem_bd(words: u32, addr: u32, acq: u32, rel: u32) -> [u32; 8] {
    let acq_value = (-1i8 as u8 & 0x7F) as u32;
    let locks =
        1 << 31 | 1 << 24 | (OWN_LOCK + rel) << 16 | 1 << 15 | acq_value << 8 | (OWN_LOCK + acq);
    [words, (MEM_OWN + addr) / 4, 0, 0, 0, 0, 0, locks]
}

/// The registers and values of a transfer, in the order the host writes them (BDs, then consumers' queues before
/// producers', so that nothing starts before its consumer is ready). Per memory-tile staging area `k` (load) or
/// `4 + k` (store): the "full" lock `2a` starts at 0 and the "free" lock `2a + 1` at 1.
pub struct Registers {
    /// (row, register offset, words) block writes.
    pub blocks: Vec<(u8, u32, Vec<u32>)>,
    /// (row, register offset, value) writes, in order.
    pub writes: Vec<(u8, u32, u32)>,
}

/// Start-queue word: BD `bd`, one run, with a token when `token`.
fn task(bd: u32, token: bool) -> u32 {
    bd | u32::from(token) << 31
}

/// BD indices a transfer uses: shim, memory-tile in (S2MM side), memory-tile out (MM2S side), core.
#[derive(Debug, Clone, Copy)]
pub struct Bds {
    /// The shim BD.
    pub shim: u32,
    /// The memory-tile BD of the S2MM side.
    pub mem_in: u32,
    /// The memory-tile BD of the MM2S side.
    pub mem_out: u32,
    /// The core BD.
    pub core: u32,
}

/// The writes of a transfer of core row `k` (0-based in its column) in `l`; `store` moves core → DDR.
pub fn registers(l: &Layout, k: u8, store: bool, p: &Plan, bd: Bds) -> Registers {
    let k32 = u32::from(k);
    let area = if store { 4 + k32 } else { k32 };
    let (full, free) = (2 * area, 2 * area + 1);
    let staging = area * l.local;
    let core_row = l.first_core + k;
    let words = p.words();
    let (shim, mem, core) = (Shim.regs(), MemTile.regs(), Core.regs());
    let blocks = vec![
        (0, Shim.bd(bd.shim), p.shim_bd().to_vec()),
        (
            1,
            MemTile.bd(bd.mem_in),
            mem_bd(words, staging, free, full).to_vec(),
        ),
        (
            1,
            MemTile.bd(bd.mem_out),
            mem_bd(words, staging, full, free).to_vec(),
        ),
        (core_row, Core.bd(bd.core), p.core_bd().to_vec()),
    ];
    let (mem_in_ch, mem_out_ch) = if store {
        (2 + k32, u32::from(l.cores))
    } else {
        (0, k32)
    };
    let writes = if store {
        vec![
            (0, shim.queue(false, 0), task(bd.shim, true)),
            (1, mem.queue(true, mem_out_ch), task(bd.mem_out, false)),
            (1, mem.queue(false, mem_in_ch), task(bd.mem_in, false)),
            (core_row, core.queue(true, 0), task(bd.core, false)),
        ]
    } else {
        vec![
            (core_row, core.queue(false, 0), task(bd.core, true)),
            (1, mem.queue(true, mem_out_ch), task(bd.mem_out, false)),
            (1, mem.queue(false, mem_in_ch), task(bd.mem_in, false)),
            (0, shim.queue(true, 0), task(bd.shim, false)),
        ]
    };
    Registers { blocks, writes }
}

/// The lock-value writes that set every staging area's locks (full 0, free 1) in a column's memory tile.
pub fn lock_init() -> Vec<(u32, u32)> {
    (0..8u32)
        .flat_map(|area| {
            [
                (MemTile.regs().lock(2 * area), 0),
                (MemTile.regs().lock(2 * area + 1), 1),
            ]
        })
        .collect()
}

/// The channel whose token completes a transfer: (row, direction 0 S2MM, channel) — the core's S2MM 0 for a
/// load, the shim's S2MM 0 for a store.
pub fn completion(l: &Layout, k: u8, store: bool) -> (u8, u8, u8) {
    if store {
        (0, 0, 0)
    } else {
        (l.first_core + k, 0, 0)
    }
}
