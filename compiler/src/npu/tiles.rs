//! The tile kinds' DMA registers of a target description (`tiles` in `compiler/targets/vnpu.json`): for the shim
//! tile, the memory tile and the core tile, the buffer descriptors (base, count, words), the channels' control,
//! start-queue and status registers, and the lock value registers, as AIE-ML documents them
//! (docs/aie-ml-facts.md). The data movement of `dma.rs` and `txn.rs` takes every register address from here.
//! bundlec writes AIE-ML's BD and lock encodings, which bundle-rt's emulator reads, so a description must give
//! AIE-ML's map: [`Tiles::check`] names the first field that differs.

use bundle_rt::aie::bd::BdKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A register offset inside a tile, written as a hex string (`"0x1D000"`) in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset(pub u32);

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Offset, D::Error> {
        let s = String::deserialize(d)?;
        let hex = s.strip_prefix("0x").ok_or_else(|| {
            serde::de::Error::custom(format!("{s:?} is not a hex offset (0x...)"))
        })?;
        match u32::from_str_radix(hex, 16) {
            Ok(v) if v < 1 << 20 => Ok(Offset(v)),
            _ => Err(serde::de::Error::custom(format!(
                "{s:?} is not a tile offset (0x0..0xFFFFF)"
            ))),
        }
    }
}

impl Serialize for Offset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{:X}", self.0))
    }
}

/// One tile kind's DMA registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TileRegs {
    /// Word 0 of buffer descriptor 0; BD `i` is `0x20 · i` further.
    pub bd_base: Offset,
    /// Buffer descriptors.
    pub bds: u32,
    /// Words per buffer descriptor.
    pub bd_words: u32,
    /// DMA channels per direction.
    pub channels: u32,
    /// S2MM channel 0's control register; channel `n`'s is `8n` further, its start queue 4 bytes after that.
    pub s2mm_ctrl: Offset,
    /// MM2S channel 0's control register, laid out like S2MM's.
    pub mm2s_ctrl: Offset,
    /// S2MM channel 0's status register; channel `n`'s is `4n` further.
    pub s2mm_status: Offset,
    /// MM2S channel 0's status register.
    pub mm2s_status: Offset,
    /// Lock 0's value register; lock `i`'s is `0x10 · i` further.
    pub lock_base: Offset,
    /// Locks.
    pub locks: u32,
}

impl TileRegs {
    /// AIE-ML's registers of tile kind `kind`.
    pub fn aie_ml(kind: BdKind) -> TileRegs {
        let r = kind.regs();
        TileRegs {
            bd_base: Offset(kind.base()),
            bds: kind.count(),
            bd_words: kind.words() as u32,
            channels: r.channels,
            s2mm_ctrl: Offset(r.ctrl),
            mm2s_ctrl: Offset(r.mm2s_ctrl),
            s2mm_status: Offset(r.status),
            mm2s_status: Offset(r.mm2s_status),
            lock_base: Offset(r.locks),
            locks: r.lock_count,
        }
    }
    /// Word 0 of BD `i`.
    pub fn bd(&self, i: u32) -> u32 {
        self.bd_base.0 + 0x20 * i
    }
    /// The start queue of channel `ch` (MM2S when `mm2s`).
    pub fn queue(&self, mm2s: bool, ch: u32) -> u32 {
        (if mm2s { self.mm2s_ctrl } else { self.s2mm_ctrl }).0 + 8 * ch + 4
    }
    /// Lock `i`'s value register.
    pub fn lock(&self, i: u32) -> u32 {
        self.lock_base.0 + 0x10 * i
    }
    /// The fields of `self` and `want`, by name.
    fn fields(&self) -> [(&'static str, u32); 10] {
        [
            ("bd_base", self.bd_base.0),
            ("bds", self.bds),
            ("bd_words", self.bd_words),
            ("channels", self.channels),
            ("s2mm_ctrl", self.s2mm_ctrl.0),
            ("mm2s_ctrl", self.mm2s_ctrl.0),
            ("s2mm_status", self.s2mm_status.0),
            ("mm2s_status", self.mm2s_status.0),
            ("lock_base", self.lock_base.0),
            ("locks", self.locks),
        ]
    }
}

/// The register maps of the three tile kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tiles {
    /// The shim tile (row 0).
    pub shim: TileRegs,
    /// A memory tile.
    pub mem_tile: TileRegs,
    /// A core tile.
    pub core: TileRegs,
}

impl Tiles {
    /// AIE-ML's map.
    pub fn aie_ml() -> Tiles {
        Tiles {
            shim: TileRegs::aie_ml(BdKind::Shim),
            mem_tile: TileRegs::aie_ml(BdKind::MemTile),
            core: TileRegs::aie_ml(BdKind::Core),
        }
    }
    /// `Err((field path, message))` for the first field that is not AIE-ML's.
    pub fn check(&self) -> Result<(), (String, String)> {
        let want = Tiles::aie_ml();
        for (name, got, want) in [
            ("shim", self.shim, want.shim),
            ("mem_tile", self.mem_tile, want.mem_tile),
            ("core", self.core, want.core),
        ] {
            for ((field, g), (_, w)) in got.fields().into_iter().zip(want.fields()) {
                if g != w {
                    return Err((
                        format!("tiles.{name}.{field}"),
                        format!(
                            "0x{g:X}, but an AIE-ML {name} tile has 0x{w:X} (docs/aie-ml-facts.md); bundlec writes \
                             AIE-ML's buffer descriptors and locks"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
