//! The emulator's memories: tile data memories ([`Memories`], allocated on first use and zeroed once
//! per run), the five bound DDR buffers (`NpuBuffers`, by DDR address `(argidx + 1) << 40 | offset`),
//! and [`DmaMem`], through which the DMA engine checks a buffer descriptor's reach and moves words
//! (moving nothing in the check pass). Also [`OpErr`], an op's failure before it is located.

use alloc::vec::Vec;

use super::dma::{DmaMemory, Side};
use super::target::{NpuBuffers, NpuTarget};
use crate::aie::bd::BdKind;
use crate::error::{Error, Name, NpuBuffer, NpuRegion, NpuWhy};

/// Bits of a DDR address that are the offset inside its buffer.
pub(crate) const DDR_OFFSET_BITS: u32 = 40;
/// Bytes of a memory tile's data memory window a DMA sees per neighbour (west, own, east).
const MEM_WINDOW: u64 = 0x80000;

/// An op's failure before it is located: a [`NpuWhy`], or a tile memory of this many bytes that
/// could not be allocated.
pub(crate) enum OpErr {
    Why(NpuWhy),
    Oom(usize),
}

impl From<NpuWhy> for OpErr {
    fn from(why: NpuWhy) -> OpErr {
        OpErr::Why(why)
    }
}

/// Turns an allocation failure into [`Error::OutOfMemory`].
pub(crate) fn oom(bytes: usize) -> Error {
    Error::OutOfMemory {
        what: Name::new("NPU tile data memory"),
        bytes: bytes as u64,
    }
}

impl OpErr {
    /// Locates the failure at op `op`, byte `offset`.
    pub(crate) fn at(self, op: u32, offset: u32) -> Error {
        match self {
            OpErr::Why(why) => Error::Npu { op, offset, why },
            OpErr::Oom(bytes) => oom(bytes),
        }
    }
}

/// Tile data memories, by tile index.
#[derive(Debug, Default)]
pub(crate) struct Memories {
    /// Data memory per tile index (empty until first used).
    pub(crate) mems: Vec<Vec<u8>>,
    /// Whether the tile's memory is zeroed for this run.
    pub(crate) clean: Vec<bool>,
}

impl Memories {
    /// Tile `index`'s data memory of `size` bytes, allocated and zeroed for this run.
    pub(crate) fn tile(&mut self, index: usize, size: usize) -> Result<&mut [u8], OpErr> {
        let (Some(mem), Some(clean)) = (self.mems.get_mut(index), self.clean.get_mut(index)) else {
            return Ok(&mut []);
        };
        if !*clean {
            if mem.len() != size {
                *mem = Vec::new();
                mem.try_reserve_exact(size).map_err(|_| OpErr::Oom(size))?;
                mem.resize(size, 0);
            } else {
                mem.fill(0);
            }
            *clean = true;
        }
        Ok(mem)
    }
}

/// The length of a bound buffer.
pub(crate) fn buf_len(bufs: &NpuBuffers<'_>, b: NpuBuffer) -> u64 {
    buf(bufs, b).len() as u64
}

/// A bound buffer, read-only.
pub(crate) fn buf<'s>(bufs: &'s NpuBuffers<'_>, b: NpuBuffer) -> &'s [u8] {
    match b {
        NpuBuffer::Input => bufs.input,
        NpuBuffer::Output => bufs.output,
        NpuBuffer::Scratch => bufs.scratch,
        NpuBuffer::Constants => bufs.constants,
        NpuBuffer::Params => bufs.params,
    }
}

/// A writable bound buffer (`out`, `scratch`).
pub(crate) fn buf_mut<'s>(bufs: &'s mut NpuBuffers<'_>, b: NpuBuffer) -> Option<&'s mut [u8]> {
    match b {
        NpuBuffer::Output => Some(bufs.output),
        NpuBuffer::Scratch => Some(bufs.scratch),
        _ => None,
    }
}

/// The buffer and offset of a DDR address.
pub(crate) fn ddr(addr: u64) -> Result<(NpuBuffer, u64), NpuWhy> {
    let buffer = (addr >> DDR_OFFSET_BITS)
        .checked_sub(1)
        .and_then(NpuBuffer::from_argidx)
        .ok_or(NpuWhy::BadAddress { addr })?;
    Ok((buffer, addr & ((1 << DDR_OFFSET_BITS) - 1)))
}

/// Where a DMA's word lives.
enum Place {
    /// A bound buffer at this byte offset.
    Ddr(NpuBuffer, usize),
    /// Tile `index` (of `size` bytes) at this byte offset.
    Tile(usize, usize, usize),
}

/// The DMA engine's view of the memories for one pass.
pub(crate) struct DmaMem<'s, 'b> {
    pub(crate) target: &'s NpuTarget,
    pub(crate) memories: &'s mut Memories,
    pub(crate) bufs: &'s mut NpuBuffers<'b>,
    /// Whether bytes move (the execute pass) or only reaches are checked.
    pub(crate) execute: bool,
}

impl DmaMem<'_, '_> {
    /// Tile index and data-memory size of (`col`, `row`).
    fn tile(&self, col: u8, row: u8) -> Result<(usize, usize), NpuWhy> {
        let tile = super::regs::tile_at(self.target, col, row)?;
        Ok((tile.index, tile.local as usize))
    }

    /// Where byte `addr` (a BD's address space) of tile (`col`, `row`) lives.
    fn place(&self, side: &Side, addr: u64) -> Result<Place, NpuWhy> {
        let (col, row) = (side.col, side.row);
        let local = NpuRegion::Local { col, row };
        let past = |size| NpuWhy::OutOfBounds {
            region: local,
            start: addr,
            len: 4,
            size,
        };
        match side.bd.kind {
            BdKind::Shim => {
                let (buffer, off) = ddr(addr)?;
                Ok(Place::Ddr(buffer, off as usize))
            }
            BdKind::Core => {
                let (index, size) = self.tile(col, row)?;
                if addr.saturating_add(4) > size as u64 {
                    return Err(past(size as u64));
                }
                Ok(Place::Tile(index, size, addr as usize))
            }
            BdKind::MemTile => {
                let side_col = match addr / MEM_WINDOW {
                    0 => col.checked_sub(1),
                    1 => Some(col),
                    2 => Some(col + 1).filter(|&c| c < self.target.cols),
                    _ => None,
                };
                let Some(c) = side_col else {
                    return Err(past(3 * MEM_WINDOW));
                };
                let (index, size) = self.tile(c, row)?;
                let off = addr % MEM_WINDOW;
                if off + 4 > size as u64 {
                    return Err(past(size as u64));
                }
                Ok(Place::Tile(index, size, off as usize))
            }
        }
    }

    /// Byte address of word `k` of the walk of `side`.
    fn addr(side: &Side, k: u32) -> Result<u64, NpuWhy> {
        side.bd
            .offset_of(side.first + k, side.run)
            .and_then(|o| side.bd.addr.checked_add(o))
            .ok_or(NpuWhy::BadBd {
                col: side.col,
                row: side.row,
                bd: 0,
                why: "its walk overflows 64 bits",
            })
    }
}

impl DmaMemory for DmaMem<'_, '_> {
    type Error = OpErr;

    fn check(&mut self, side: &Side, write: bool) -> Result<(), OpErr> {
        if side.bd.len == 0 {
            return Ok(());
        }
        let extent = side.bd.extent(side.run).ok_or(NpuWhy::BadBd {
            col: side.col,
            row: side.row,
            bd: 0,
            why: "its walk overflows 64 bits",
        })?;
        let first = side.bd.addr;
        let last = first.saturating_add(extent - 4);
        // Each word is placed on its own when it moves; the two ends bound every word between.
        for addr in [first, last] {
            match self.place(side, addr)? {
                Place::Ddr(buffer, off) => {
                    let size = buf_len(self.bufs, buffer);
                    if off as u64 + 4 > size {
                        let region = NpuRegion::Buffer(buffer);
                        let len = extent;
                        let start = first & ((1 << DDR_OFFSET_BITS) - 1);
                        return Err(NpuWhy::OutOfBounds {
                            region,
                            start,
                            len,
                            size,
                        }
                        .into());
                    }
                    if write && !buffer.is_writable() {
                        return Err(NpuWhy::ReadOnlyBuffer { buffer }.into());
                    }
                }
                Place::Tile(..) => {}
            }
        }
        if side.bd.kind == BdKind::Shim && ddr(first)?.0 != ddr(last)?.0 {
            return Err(NpuWhy::BadAddress { addr: last }.into());
        }
        Ok(())
    }

    fn copy(&mut self, from: &Side, to: &Side, words: u32) -> Result<(), OpErr> {
        let mut k = 0;
        let mut chunk: Vec<u8> = Vec::new();
        while k < words {
            // The longest run of words contiguous on both sides (in one memory), from word k.
            let mut n = run(from, k).min(run(to, k)).min(words - k).max(1);
            let (src, dst) = match (self.span(from, k, n)?, self.span(to, k, n)?) {
                (Some(src), Some(dst)) => (src, dst),
                // The run crosses from one memory into another (a memory tile's neighbour):
                // word by word.
                _ => {
                    n = 1;
                    let src = self.place(from, Self::addr(from, k)?)?;
                    (src, self.place(to, Self::addr(to, k)?)?)
                }
            };
            if self.execute {
                let bytes = n as usize * 4;
                chunk.clear();
                chunk.try_reserve(bytes).map_err(|_| OpErr::Oom(bytes))?;
                match src {
                    Place::Ddr(b, off) => chunk
                        .extend_from_slice(buf(self.bufs, b).get(off..off + bytes).unwrap_or(&[])),
                    Place::Tile(index, size, off) => chunk.extend_from_slice(
                        self.memories
                            .tile(index, size)?
                            .get(off..off + bytes)
                            .unwrap_or(&[]),
                    ),
                }
                chunk.resize(bytes, 0);
                let target = match dst {
                    Place::Ddr(b, off) => {
                        buf_mut(self.bufs, b).and_then(|m| m.get_mut(off..off + bytes))
                    }
                    Place::Tile(index, size, off) => {
                        self.memories.tile(index, size)?.get_mut(off..off + bytes)
                    }
                };
                if let Some(d) = target {
                    d.copy_from_slice(&chunk);
                }
            }
            k += n;
        }
        Ok(())
    }
}

/// Words of `side`'s walk from word `k` that are consecutive in memory: the rest of its D0 row when
/// D0 steps by one word (all of the BD when no dimension wraps), else 1.
fn run(side: &Side, k: u32) -> u32 {
    let d0 = side.bd.dims[0];
    let at = side.first.saturating_add(k);
    let left = side.bd.len.saturating_sub(at).max(1);
    if d0.step != 1 {
        return 1;
    }
    if d0.wrap == 0 {
        return left;
    }
    (d0.wrap - at % d0.wrap).min(left)
}

impl DmaMem<'_, '_> {
    /// The place of `n` consecutive words of `side` from word `k`; `None` when they do not lie in
    /// one memory (n = 1 always does).
    fn span(&self, side: &Side, k: u32, n: u32) -> Result<Option<Place>, NpuWhy> {
        let first = Self::addr(side, k)?;
        let start = self.place(side, first)?;
        if n > 1 {
            let last = first.saturating_add(4 * u64::from(n - 1));
            let end = self.place(side, last)?;
            let same = match (&start, &end) {
                (Place::Ddr(a, x), Place::Ddr(b, y)) => a == b && *y == *x + 4 * (n as usize - 1),
                (Place::Tile(a, _, x), Place::Tile(b, _, y)) => {
                    a == b && *y == *x + 4 * (n as usize - 1)
                }
                _ => false,
            };
            if !same {
                return Ok(None);
            }
        }
        Ok(Some(start))
    }
}
