//! AIE-ML DMA buffer descriptors: the word layouts of the shim, memory-tile and core-tile BDs
//! (docs/aie-ml-facts.md §1a, from aie-rt's AIE-ML register map), decoded into a [`Bd`], and the
//! byte offsets a BD walks ([`Bd::offset_of`]).
//!
//! Encodings, as aie-rt writes them: lengths, steps and memory-tile / core addresses count 32-bit
//! words; steps and the iteration wrap and step are stored minus one; wraps are stored as counts;
//! the shim address is a 48-bit byte address (word 1 bits 31:2, word 2 bits 15:0). A wrap of 0
//! leaves its dimension unbounded: the first such dimension takes every remaining word (a BD whose
//! wraps are all 0 walks its buffer linearly, as mlir-aie's linear transfers do).

/// Which tile's BD layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BdKind {
    /// Shim (NoC) tile: 16 BDs of 8 words at `0x1D000`.
    Shim,
    /// Memory tile: 48 BDs of 8 words at `0xA0000`.
    MemTile,
    /// Core tile: 16 BDs of 6 words at `0x1D000`.
    Core,
}

impl BdKind {
    /// Tile offset of BD 0.
    pub const fn base(self) -> u32 {
        match self {
            BdKind::MemTile => 0xA0000,
            BdKind::Shim | BdKind::Core => 0x1D000,
        }
    }

    /// Number of BDs.
    pub const fn count(self) -> u32 {
        match self {
            BdKind::MemTile => 48,
            BdKind::Shim | BdKind::Core => 16,
        }
    }

    /// Words per BD (the stride between BDs is always 0x20 bytes).
    pub const fn words(self) -> usize {
        match self {
            BdKind::Core => 6,
            BdKind::Shim | BdKind::MemTile => 8,
        }
    }

    /// Number of locks a BD's lock ids may name: a memory tile also reaches its west (0..64) and
    /// east (128..192) neighbours' locks.
    pub const fn lock_ids(self) -> u16 {
        match self {
            BdKind::MemTile => 192,
            BdKind::Shim | BdKind::Core => 16,
        }
    }

    /// Tile offset of word 0 of BD `i`.
    pub const fn bd(self, i: u32) -> u32 {
        self.base() + 0x20 * i
    }

    /// The tile kind's DMA channel and lock registers.
    pub const fn regs(self) -> DmaRegs {
        match self {
            BdKind::Shim => DmaRegs {
                ctrl: 0x1D200,
                channels: 2,
                mm2s_ctrl: 0x1D210,
                status: 0x1D220,
                mm2s_status: 0x1D228,
                locks: 0x14000,
                lock_count: 16,
            },
            BdKind::MemTile => DmaRegs {
                ctrl: 0xA0600,
                channels: 6,
                mm2s_ctrl: 0xA0630,
                status: 0xA0660,
                mm2s_status: 0xA0680,
                locks: 0xC0000,
                lock_count: 64,
            },
            BdKind::Core => DmaRegs {
                ctrl: 0x1DE00,
                channels: 2,
                mm2s_ctrl: 0x1DE10,
                status: 0x1DF00,
                mm2s_status: 0x1DF10,
                locks: 0x1F000,
                lock_count: 16,
            },
        }
    }

    /// The BD whose word `word` sits at tile offset `off`, if any.
    pub fn bd_at(self, off: u32) -> Option<(u32, usize)> {
        let rel = off.checked_sub(self.base())?;
        let (bd, within) = (rel / 0x20, (rel % 0x20) as usize);
        (bd < self.count() && within.is_multiple_of(4) && within / 4 < self.words())
            .then_some((bd, within / 4))
    }
}

/// The DMA channel and lock registers of a tile kind (docs/aie-ml-facts.md §1b, §1c): channel `n`
/// of a direction has its control register at `base + 8n` and its start queue 4 bytes further, its
/// status at `status base + 4n`; lock `i`'s value is at `locks + 0x10 i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRegs {
    /// S2MM channel 0's control register.
    pub ctrl: u32,
    /// Channels per direction.
    pub channels: u32,
    /// MM2S channel 0's control register.
    pub mm2s_ctrl: u32,
    /// S2MM channel 0's status register.
    pub status: u32,
    /// MM2S channel 0's status register.
    pub mm2s_status: u32,
    /// Lock 0's value register.
    pub locks: u32,
    /// Locks.
    pub lock_count: u32,
}

impl DmaRegs {
    /// The start queue of channel `ch` (MM2S when `mm2s`).
    pub const fn queue(&self, mm2s: bool, ch: u32) -> u32 {
        (if mm2s { self.mm2s_ctrl } else { self.ctrl }) + 8 * ch + 4
    }

    /// Lock `i`'s value register.
    pub const fn lock(&self, i: u32) -> u32 {
        self.locks + 0x10 * i
    }
}

/// One address dimension: `wrap` indices (0: unbounded) `step` words apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dim {
    /// Indices before the next dimension advances; 0 leaves the dimension unbounded.
    pub wrap: u32,
    /// Words between consecutive indices (the stored value plus one).
    pub step: u32,
}

/// A lock operation of a BD: acquire before the transfer, release after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockOp {
    /// The lock (for a memory tile: 0..64 west, 64..128 own, 128..192 east).
    pub id: u8,
    /// The signed 7-bit value: for an acquire, `-v` waits until the lock is at least `v` and
    /// subtracts it, `+v` waits until it equals `v`; for a release, the amount added.
    pub value: i8,
}

/// A decoded BD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bd {
    /// Its layout.
    pub kind: BdKind,
    /// Start address in bytes: a DDR address for the shim, a data-memory offset otherwise (for a
    /// memory tile, in its 0x180000-byte window: west neighbour, own memory at 0x80000, east).
    pub addr: u64,
    /// Words transferred.
    pub len: u32,
    /// D0 (innermost) to D3; the shim and core D2 and the memory-tile D3 have no wrap (the walk
    /// treats D3 as unbounded whatever its `wrap`).
    pub dims: [Dim; 4],
    /// The iteration dimension: `(current, wrap, step)`, wrap and step decoded (plus one).
    pub iteration: (u8, u32, u32),
    /// The BD that follows, when the BD chains.
    pub next: Option<u8>,
    /// Whether the BD is valid.
    pub valid: bool,
    /// The acquire, when enabled.
    pub acquire: Option<LockOp>,
    /// The release (`None` when the value is 0).
    pub release: Option<LockOp>,
    /// `(type, id)` when packet mode is on.
    pub packet: Option<(u8, u8)>,
}

/// `width` bits of `w` from bit `lsb`.
const fn bits(w: u32, lsb: u32, width: u32) -> u32 {
    (w >> lsb) & ((1 << width) - 1)
}

/// A 7-bit two's-complement field as `i8`.
fn signed7(v: u32) -> i8 {
    (((v & 0x7F) << 1) as u8 as i8) >> 1
}

/// Words of a BD: `w[i]`, 0 when absent.
fn word(w: &[u32], i: usize) -> u32 {
    w.get(i).copied().unwrap_or(0)
}

impl Bd {
    /// Decodes the words of one BD of layout `kind` (missing words read as 0).
    pub fn decode(kind: BdKind, w: &[u32]) -> Bd {
        let dim = |wrap: u32, step: u32| Dim {
            wrap,
            step: step + 1,
        };
        // The lock word: word 7 (shim, memory tile) or word 5 (core).
        let (addr, len, dims, iter_word, lock_word, next_use, packet_word) = match kind {
            BdKind::Shim => {
                let addr = u64::from(bits(word(w, 2), 0, 16)) << 32 | u64::from(word(w, 1) & !3);
                let (w3, w4, w5) = (word(w, 3), word(w, 4), word(w, 5));
                let dims = [
                    dim(bits(w3, 20, 10), bits(w3, 0, 20)),
                    dim(bits(w4, 20, 10), bits(w4, 0, 20)),
                    dim(0, bits(w5, 0, 20)),
                    Dim::default(),
                ];
                let w7 = word(w, 7);
                let next = (bits(w7, 26, 1) == 1).then_some(bits(w7, 27, 4) as u8);
                let packet = bits(word(w, 2), 30, 1) == 1;
                let pkt = (bits(word(w, 2), 16, 3), bits(word(w, 2), 19, 5));
                (
                    addr,
                    word(w, 0),
                    dims,
                    word(w, 6),
                    w7,
                    next,
                    packet.then_some(pkt),
                )
            }
            BdKind::MemTile => {
                let (w0, w1) = (word(w, 0), word(w, 1));
                let (w2, w3, w4, w5) = (word(w, 2), word(w, 3), word(w, 4), word(w, 5));
                let dims = [
                    dim(bits(w2, 17, 10), bits(w2, 0, 17)),
                    dim(bits(w3, 17, 10), bits(w3, 0, 17)),
                    dim(bits(w4, 17, 10), bits(w4, 0, 17)),
                    dim(0, bits(w5, 0, 17)),
                ];
                let next = (bits(w1, 19, 1) == 1).then_some(bits(w1, 20, 6) as u8);
                let pkt = (bits(w0, 28, 3), bits(w0, 23, 5));
                let packet = (bits(w0, 31, 1) == 1).then_some(pkt);
                let addr = u64::from(bits(w1, 0, 19)) * 4;
                (
                    addr,
                    bits(w0, 0, 17),
                    dims,
                    word(w, 6),
                    word(w, 7),
                    next,
                    packet,
                )
            }
            BdKind::Core => {
                let (w0, w1, w2, w3) = (word(w, 0), word(w, 1), word(w, 2), word(w, 3));
                let dims = [
                    dim(bits(w3, 13, 8), bits(w2, 0, 13)),
                    dim(bits(w3, 21, 8), bits(w2, 13, 13)),
                    dim(0, bits(w3, 0, 13)),
                    Dim::default(),
                ];
                let w5 = word(w, 5);
                let next = (bits(w5, 26, 1) == 1).then_some(bits(w5, 27, 4) as u8);
                let pkt = (bits(w1, 16, 3), bits(w1, 19, 5));
                let packet = (bits(w1, 30, 1) == 1).then_some(pkt);
                let addr = u64::from(bits(w0, 14, 14)) * 4;
                (addr, bits(w0, 0, 14), dims, word(w, 4), w5, next, packet)
            }
        };
        // Iteration: current, wrap, step at the same relative positions in every layout, with the
        // step 20 bits wide on the shim, 17 on the memory tile and 13 on the core.
        let step_bits = match kind {
            BdKind::Shim => 20,
            BdKind::MemTile => 17,
            BdKind::Core => 13,
        };
        let iteration = (
            bits(iter_word, step_bits + 6, 6) as u8,
            bits(iter_word, step_bits, 6) + 1,
            bits(iter_word, 0, step_bits) + 1,
        );
        let (valid, acquire, release) = lock_fields(kind, lock_word);
        Bd {
            kind,
            addr,
            len,
            dims,
            iteration,
            next: next_use,
            valid,
            acquire,
            release,
            packet: packet_word.map(|(t, id)| (t as u8, id as u8)),
        }
    }

    /// Byte offset from [`Bd::addr`] of word `k` of the transfer (`k < len`), in iteration
    /// `iteration` (the iteration dimension's index, taken modulo its wrap); `None` on overflow.
    pub fn offset_of(&self, k: u32, iteration: u32) -> Option<u64> {
        let mut rest = u64::from(k);
        let mut words: u64 = 0;
        for (i, d) in self.dims.iter().enumerate() {
            let (index, carry) = if d.wrap == 0 || i == 3 {
                (rest, 0)
            } else {
                (rest % u64::from(d.wrap), rest / u64::from(d.wrap))
            };
            words = words.checked_add(index.checked_mul(u64::from(d.step))?)?;
            rest = carry;
            if rest == 0 {
                break;
            }
        }
        let (_, wrap, step) = self.iteration;
        let it = u64::from(iteration % wrap.max(1)) * u64::from(step);
        words.checked_add(it)?.checked_mul(4)
    }

    /// The furthest byte past [`Bd::addr`] that a transfer in iteration `iteration` reaches
    /// (exclusive); 0 for an empty transfer; `None` on overflow.
    pub fn extent(&self, iteration: u32) -> Option<u64> {
        if self.len == 0 {
            return Some(0);
        }
        // The index of the last word in mixed radix (innermost first): (digit, largest digit, step).
        let mut digits = [(0u64, 0u64, 0u64); 4];
        let mut used = 0;
        let mut rest = u64::from(self.len) - 1;
        for (i, d) in self.dims.iter().enumerate() {
            let unbounded = d.wrap == 0 || i == 3;
            let (digit, top) = if unbounded {
                (rest, rest)
            } else {
                (rest % u64::from(d.wrap), u64::from(d.wrap) - 1)
            };
            digits[used] = (digit, top, u64::from(d.step));
            used += 1;
            rest = if unbounded {
                0
            } else {
                rest / u64::from(d.wrap)
            };
            if rest == 0 {
                break;
            }
        }
        let digits = &digits[..used];
        let offset = |ds: &mut dyn Iterator<Item = u64>| -> Option<u64> {
            digits
                .iter()
                .zip(ds)
                .try_fold(0u64, |acc, (&(_, _, step), i)| {
                    acc.checked_add(i.checked_mul(step)?)
                })
        };
        // Offsets grow with every index, so the largest word index below `len` is either the
        // last word itself or, for some position j whose digit is non-zero, the same digits
        // above j, digit j minus one, and every digit below j at its largest.
        let mut best = offset(&mut digits.iter().map(|d| d.0))?;
        for j in 0..digits.len() {
            if digits[j].0 == 0 {
                continue;
            }
            let mut ds = digits.iter().enumerate().map(|(i, d)| match i.cmp(&j) {
                core::cmp::Ordering::Less => d.1,
                core::cmp::Ordering::Equal => d.0 - 1,
                core::cmp::Ordering::Greater => d.0,
            });
            best = best.max(offset(&mut ds)?);
        }
        let (_, wrap, step) = self.iteration;
        let it = u64::from(iteration % wrap.max(1)) * u64::from(step);
        best.checked_add(it)?.checked_add(1)?.checked_mul(4)
    }
}

/// `(valid, acquire, release)` of a BD's lock word.
fn lock_fields(kind: BdKind, w: u32) -> (bool, Option<LockOp>, Option<LockOp>) {
    let (valid, rel_value, rel_id, acq_enable, acq_value, acq_id) = match kind {
        BdKind::MemTile => (
            bits(w, 31, 1),
            bits(w, 24, 7),
            bits(w, 16, 8),
            bits(w, 15, 1),
            bits(w, 8, 7),
            bits(w, 0, 8),
        ),
        BdKind::Shim | BdKind::Core => (
            bits(w, 25, 1),
            bits(w, 18, 7),
            bits(w, 13, 4),
            bits(w, 12, 1),
            bits(w, 5, 7),
            bits(w, 0, 4),
        ),
    };
    let acquire = (acq_enable == 1).then_some(LockOp {
        id: acq_id as u8,
        value: signed7(acq_value),
    });
    let release = (rel_value != 0).then_some(LockOp {
        id: rel_id as u8,
        value: signed7(rel_value),
    });
    (valid == 1, acquire, release)
}
