//! AIE-ML data movement for [`TxnBody::dma`](super::txn::TxnBody::dma): a transfer between DDR and a core tile
//! programmed as the hardware does it (docs/npu-transaction-format.md, "AIE-ML data movement"): buffer
//! descriptors written with BLOCKWRITE, the shim BD's address bound by DDR_PATCH, tasks pushed to the start queues
//! of the shim, memory-tile and core channels along the device configuration's routes, staged in the memory tile
//! under a pair of locks, and completed by a task-completion token that a TCT takes. A load goes shim MM2S 0 →
//! memory tile S2MM 0 → memory tile MM2S `k` → core S2MM 0; a store core MM2S 0 → memory tile S2MM `2 + k` →
//! memory tile MM2S `cores` → shim S2MM 0 (`k` the core's row within its column).
//!
//! [`Plan`] says whether a transfer fits: 4-byte aligned offsets, lengths and strides (the DMA moves 32-bit
//! words; rows that touch on both sides count as one run), walks within the BD field limits (a row wider than
//! D0's wrap splits over D0 × D1 and the rows step in D2). Transfers that do not fit stay VNPU_DMA commands.

use super::tiles::Tiles;

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
/// load and store staging areas (a core tile's memory each) inside the memory tile's; and the tile kinds'
/// registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The target's register maps.
    pub tiles: Tiles,
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
            tiles: t.tiles,
            first_core,
            cores,
            local: t.local_memory_bytes,
        })
    }
}

/// One side's address walk in 32-bit words: D0 and D1 as (wrap, step), D2's step (D2 has no wrap); `None` in
/// [`Plan`] for a linear walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// D0 (wrap, step).
    pub d0: (u32, u32),
    /// D1 (wrap, step).
    pub d1: (u32, u32),
    /// D2's step; 0 when D2 is not used.
    pub d2: u32,
}

impl Walk {
    /// The walk of `rows` rows of `row` words `stride` words apart, within wraps of at most `max_wrap` and steps
    /// of at most `max_step`: linear (`Some(None)`) when the rows touch, two dimensions when a row fits D0, and
    /// three when a row splits into D0 × D1 (the rows then step in D2). `None` when nothing fits.
    fn of(row: u32, rows: u32, stride: u32, max_wrap: u32, max_step: u32) -> Option<Option<Walk>> {
        if rows == 1 || stride == row {
            return Some(None);
        }
        if stride > max_step || stride == 0 {
            return None;
        }
        if row <= max_wrap && rows <= max_wrap {
            return Some(Some(Walk {
                d0: (row, 1),
                d1: (rows, stride),
                d2: 0,
            }));
        }
        // A row wider than D0 may wrap: row = a · b with a, b within the wrap and a within D1's step.
        (1..=max_wrap.min(max_step).min(row))
            .rev()
            .find(|&a| row.is_multiple_of(a) && row / a <= max_wrap)
            .map(|a| {
                Some(Walk {
                    d0: (a, 1),
                    d1: (row / a, a),
                    d2: stride,
                })
            })
    }
}

/// A transfer's shape in 32-bit words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Words moved.
    pub words: u32,
    /// The DDR side's walk (`None`: linear).
    pub ddr: Option<Walk>,
    /// The local side's walk (`None`: linear).
    pub core: Option<Walk>,
    /// Byte offset in DDR.
    pub offset: u64,
    /// Byte offset in local memory.
    pub local: u32,
}

impl Plan {
    /// The plan of a transfer of `rows` rows of `row_bytes`, if the BD fields hold it: rows that touch on both
    /// sides move as one linear run; otherwise every byte count must be a multiple of 4 (the DMA moves 32-bit
    /// words) and the walks fit the shim's and the core's dimension fields.
    pub fn of(
        offset: u64,
        local: u32,
        row_bytes: u32,
        rows: u32,
        ddr_stride: u32,
        local_stride: u32,
    ) -> Option<Plan> {
        if row_bytes == 0 || rows == 0 {
            return None;
        }
        let linear = rows == 1 || (ddr_stride == row_bytes && local_stride == row_bytes);
        let (row_bytes, rows, ddr_stride, local_stride) = if linear {
            let run = row_bytes.checked_mul(rows)?;
            (run, 1, run, run)
        } else {
            (row_bytes, rows, ddr_stride, local_stride)
        };
        let aligned = [
            u64::from(local),
            u64::from(row_bytes),
            u64::from(ddr_stride),
            u64::from(local_stride),
            offset,
        ]
        .iter()
        .all(|v| v % 4 == 0);
        if !aligned {
            return None;
        }
        let row = row_bytes / 4;
        let words = row.checked_mul(rows)?;
        let ddr = Walk::of(row, rows, ddr_stride / 4, SHIM_MAX_WRAP, SHIM_MAX_STEP)?;
        let core = Walk::of(row, rows, local_stride / 4, CORE_MAX_WRAP, CORE_MAX_STEP)?;
        let fits = words <= CORE_MAX_LEN && local / 4 < (1 << 14);
        fits.then_some(Plan {
            words,
            ddr,
            core,
            offset,
            local,
        })
    }

    /// Words moved.
    pub fn words(&self) -> u32 {
        self.words
    }

    /// The shim BD: the DDR side's walk; address left for DDR_PATCH.
    pub fn shim_bd(&self) -> [u32; 8] {
        let w = self.ddr.map_or([0; 3], |w| {
            [
                w.d0.0 << 20 | (w.d0.1 - 1),
                w.d1.0 << 20 | (w.d1.1 - 1),
                w.d2.saturating_sub(1),
            ]
        });
        [self.words, 0, 0, w[0], w[1], w[2], 0, 1 << 25]
    }

    /// The core BD: the local side's walk; acquire and release none (the host synchronises with TCTs).
    pub fn core_bd(&self) -> [u32; 6] {
        let (steps, wraps) = self.core.map_or((0, 0), |w| {
            (
                (w.d0.1 - 1) | (w.d1.1 - 1) << 13,
                w.d2.saturating_sub(1) | w.d0.0 << 13 | w.d1.0 << 21,
            )
        });
        [
            (self.local / 4) << 14 | self.words,
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
    mem_bd_n(words, addr, (acq, 1), (rel, 1))
}

/// A memory-tile BD like [`mem_bd`] that acquires `acq.1` (≥ it, minus it) of own lock `acq.0` and releases
/// `rel.1` to own lock `rel.0`.
pub fn mem_bd_n(words: u32, addr: u32, acq: (u32, u8), rel: (u32, u8)) -> [u32; 8] {
    let acq_value = ((-(acq.1 as i8)) as u8 & 0x7F) as u32;
    let rel_value = u32::from(rel.1 & 0x7F);
    let locks = 1 << 31
        | rel_value << 24
        | (OWN_LOCK + rel.0) << 16
        | 1 << 15
        | acq_value << 8
        | (OWN_LOCK + acq.0);
    [words, (MEM_OWN + addr) / 4, 0, 0, 0, 0, 0, locks]
}

/// The broadcast area's "full" and "free" locks: a load staged once in the memory tile (in load area 0's memory,
/// with the column drained around it) and read by several cores of the column.
pub const BCAST_FULL: u32 = 16;
/// See [`BCAST_FULL`].
pub const BCAST_FREE: u32 = 17;

/// The writes of one load broadcast from DDR to the cores of rows `ks` (0-based in the column): the shim BD,
/// one memory-tile S2MM BD writing area 0 (acquiring `free` ≥ n, releasing `full` + n), per core a memory-tile
/// MM2S BD reading it (acquiring `full` ≥ 1, releasing `free` + 1) and the core's BD; the locks set to full 0,
/// free n; consumers' queues first. `bds`: shim, memory-tile S2MM, then per core (memory-tile MM2S, core).
pub fn broadcast(
    l: &Layout,
    ks: &[u8],
    p: &Plan,
    shim_bd: u32,
    mem_in: u32,
    per_core: &[(u32, u32)],
) -> Registers {
    let n = ks.len() as u8;
    let words = p.words();
    let Tiles {
        shim,
        mem_tile: mem,
        core,
    } = l.tiles;
    let mut blocks = vec![
        (0, shim.bd(shim_bd), p.shim_bd().to_vec()),
        (
            1,
            mem.bd(mem_in),
            mem_bd_n(words, 0, (BCAST_FREE, n), (BCAST_FULL, n)).to_vec(),
        ),
    ];
    let mut writes = vec![
        (1, mem.lock(BCAST_FULL), 0),
        (1, mem.lock(BCAST_FREE), u32::from(n)),
    ];
    for (&k, &(mem_out, core_bd)) in ks.iter().zip(per_core) {
        let row = l.first_core + k;
        blocks.push((
            1,
            mem.bd(mem_out),
            mem_bd(words, 0, BCAST_FULL, BCAST_FREE).to_vec(),
        ));
        blocks.push((row, core.bd(core_bd), p.core_bd().to_vec()));
        writes.push((row, core.queue(false, 0), task(core_bd, true)));
        writes.push((1, mem.queue(true, u32::from(k)), task(mem_out, false)));
    }
    writes.push((1, mem.queue(false, 0), task(mem_in, false)));
    writes.push((0, shim.queue(true, 0), task(shim_bd, false)));
    Registers { blocks, writes }
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
    let Tiles {
        shim,
        mem_tile: mem,
        core,
    } = l.tiles;
    let blocks = vec![
        (0, shim.bd(bd.shim), p.shim_bd().to_vec()),
        (
            1,
            mem.bd(bd.mem_in),
            mem_bd(words, staging, free, full).to_vec(),
        ),
        (
            1,
            mem.bd(bd.mem_out),
            mem_bd(words, staging, full, free).to_vec(),
        ),
        (core_row, core.bd(bd.core), p.core_bd().to_vec()),
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
pub fn lock_init(l: &Layout) -> Vec<(u32, u32)> {
    let mem = l.tiles.mem_tile;
    (0..8u32)
        .flat_map(|area| [(mem.lock(2 * area), 0), (mem.lock(2 * area + 1), 1)])
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
