//! The implicit int8 convolution (`QConvImplicit`, on AMX or AVX-512 VNNI): what it computes and the geometry
//! its three kernels share. No column matrix: a reorder kernel (`Body::QReorder`) writes the input once as zero-point-padded planes
//! of channel quads, `[C64/4][HP·WP + slack][4]` (four channels' bytes of one pixel in a 32-bit word, i8 input
//! flipped to u8 by `^ 0x80`; on VNNI only the quads holding channels); the convolution kernel (`Body::QConvImplicit`) then computes output position
//! `q = oy·WP + ox` of every row of the padded width, so that tap `(ky, kx)` of 16 consecutive positions is 16
//! consecutive words at `q + ky·WP + kx` — an AMX B tile of 16 channel quads is read straight from the reordered
//! planes with a row stride of one plane, for every tap, with no packing, as is the `vpdpbusd` operand of 16
//! positions of one quad on VNNI. Weights are rows of `(tap, channel)`
//! bytes, channels padded with zeros to a multiple of 64 on AMX (one A tile row per tap and 64 channels), of 4 on
//! VNNI. The positions
//! past `OW` in each row (`WP − OW` of them) and past `OH·WP` are computed and dropped: a strided copy
//! (`Body::Transpose`) writes the `[M, OH, OW]` output — unless there are none (`direct`: 1x1 windows without
//! padding), where the kernel writes the output itself. A stride `s` > 1 splits each padded plane into `s²`
//! phase planes (rows `≡ py`, columns `≡ px` mod `s`, each `⌈HP/s⌉ x ⌈WP/s⌉`): tap `(ky, kx)` of output
//! `(oy, ox)` is then phase `(ky mod s, kx mod s)` at `(oy + ky/s, ox + kx/s)`, again linear in
//! `q = oy·WS + ox` over the phase width `WS`. No dilation, one group.

use crate::ir::DType;

/// Words of slack after each reordered plane (besides a block of `NQ`), read by the last blocks' taps (never
/// used in kept outputs).
const SLACK_QUADS: usize = 64;

/// The implicit convolution's geometry (sizes per batch entry).
#[derive(Debug, Clone, PartialEq)]
pub struct QConvImplicit {
    /// Batch entries.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height and width.
    pub hw: [usize; 2],
    /// Output channels.
    pub m: usize,
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Zero padding before the rows and the columns.
    pub pads: [usize; 2],
    /// The padded plane's height and width (`HP`, `WP`).
    pub padded: [usize; 2],
    /// The stride of both axes (1 to 4).
    pub stride: usize,
    /// Output height and width.
    pub out: [usize; 2],
    /// The input's dtype (i8 is flipped to u8 by `^ 0x80`).
    pub x_dtype: DType,
    /// The padding byte: the input zero point in the u8 domain.
    pub fill: u8,
    /// The output's dtype (u8 or i8).
    pub y_dtype: DType,
    /// Output zero point.
    pub zero_point: i32,
    /// Output clamp.
    pub clamp: (i32, i32),
    /// AMX tiles (blocks of 32 output channels), else AVX-512 VNNI (blocks of [`MR_VNNI`]).
    pub amx: bool,
    /// VNNI only: output channels in the lanes ([`TQ`] positions by [`TM`] channels a tile, the weights packed
    /// by [`pack_weights_t`](Self::pack_weights_t)), for planes whose rows waste much of the position blocks
    /// (7x7, 14x14); writes the output itself, without a fused residual add.
    pub transposed: bool,
    /// A residual QAdd fused into the epilogue ([`direct`](Self::direct) outputs on VNNI): the requantised
    /// value (`y_dtype`, `zero_point`, `clamp` above) is not stored but added to the residual as the QAdd does.
    pub add: Option<QResidual>,
}

/// The tiles of one output row of the transposed kernel: `wide` tiles of `narrow + 1` positions, then
/// `chunks - wide` of `narrow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TTiles {
    /// Tiles per output row.
    pub chunks: usize,
    /// The narrower tiles' width.
    pub narrow: usize,
    /// How many tiles (the first ones) are one position wider.
    pub wide: usize,
}

impl TTiles {
    /// The two widths a row's tiles take, the wider one where there are such tiles.
    pub fn widths(&self) -> (Option<usize>, Option<usize>) {
        let narrow = (self.wide < self.chunks).then_some(self.narrow);
        ((self.wide > 0).then_some(self.narrow + 1), narrow)
    }
}

/// A quantised residual add absorbed by the convolution: `qadd_one(conv, residual, params)` of
/// `ir/ops/quant.rs` per output, the residual read in the output's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct QResidual {
    /// The QAdd's parameters with the convolution's output as operand `a`.
    pub params: crate::ir::QAddParams,
    /// The residual's dtype (u8 or i8).
    pub dtype: DType,
}

/// Output rows (channels) per block on AMX.
pub const MR: usize = 32;
/// Position blocks per call of the convolution's micro-kernels.
pub const BLOCKS_PER_CALL: usize = 4;
/// Output rows (channels) per block on VNNI (24 accumulators).
pub const MR_VNNI: usize = 12;
/// Output positions per tile block.
pub const NQ: usize = 32;
/// Output positions (along one output row) per tile of the transposed VNNI kernel.
pub const TQ: usize = 6;
/// Output channels per tile of the transposed VNNI kernel (four vectors of 16).
pub const TM: usize = 64;

impl QConvImplicit {
    /// Taps per output (`KH·KW`).
    pub fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }
    /// Blocks of 64 input channels.
    pub fn blocks(&self) -> usize {
        self.c.div_ceil(64)
    }
    /// Channel quads holding input channels.
    pub fn quads(&self) -> usize {
        self.c.div_ceil(4)
    }
    /// A phase plane's height and width (`⌈HP/s⌉`, `WS = ⌈WP/s⌉`; the padded plane itself at stride 1).
    pub fn phase(&self) -> [usize; 2] {
        self.padded.map(|d| d.div_ceil(self.stride))
    }
    /// Words (quads of bytes) of one reordered (phase) plane, slack included.
    pub fn plane_words(&self) -> usize {
        let [hs, ws] = self.phase();
        (hs * ws + NQ + SLACK_QUADS).next_multiple_of(16)
    }
    /// Bytes from one channel quad's planes to the next's: its `s²` phase planes.
    pub fn quad_bytes(&self) -> usize {
        self.stride * self.stride * self.plane_words() * 4
    }
    /// Channel quads of the reordered input: every quad of the 64-channel blocks on AMX (the B tiles span
    /// 16 quads), the quads holding channels on VNNI.
    pub fn stored_quads(&self) -> usize {
        if self.amx {
            self.blocks() * 16
        } else {
            self.quads()
        }
    }
    /// Bytes of the reordered input of one batch entry.
    pub fn reordered_bytes(&self) -> usize {
        self.stored_quads() * self.quad_bytes()
    }
    /// Whether the kernel writes the output itself: every position is an output (`WS = OW`: 1x1 windows
    /// without padding) and there is at least one whole block; the last block then starts `NQ` before the end
    /// (overlapping the one before, which computes the same values).
    pub fn direct(&self) -> bool {
        self.phase()[1] == self.out[1] && self.out[0] * self.out[1] >= NQ
    }
    /// Positions per output channel (the row stride of what the kernel writes): whole rows of the phase width,
    /// rounded to tile blocks; exactly `OH·OW` when [`direct`](Self::direct).
    pub fn positions(&self) -> usize {
        let p = self.out[0] * self.phase()[1];
        if self.direct() {
            p
        } else {
            p.next_multiple_of(NQ)
        }
    }
    /// Blocks of `NQ` positions per output channel.
    pub fn position_blocks(&self) -> usize {
        self.positions().div_ceil(NQ)
    }
    /// Weight bytes per tap: the channels padded to 64-channel blocks on AMX (one A tile row), to quads on
    /// VNNI.
    pub fn tap_bytes(&self) -> usize {
        self.stored_quads() * 4
    }
    /// Bytes per weight row: [`tap_bytes`](Self::tap_bytes) per tap.
    pub fn a_row(&self) -> usize {
        self.taps() * self.tap_bytes()
    }
    /// Byte offset of tap `t` from a quad's first plane: its phase plane, then `(ky/s)·WS + kx/s` words.
    pub fn tap_offset(&self, t: usize) -> usize {
        let s = self.stride;
        let (ky, kx) = (t / self.kernel[1], t % self.kernel[1]);
        let phase = (ky % s) * s + kx % s;
        phase * self.plane_words() * 4 + ((ky / s) * self.phase()[1] + kx / s) * 4
    }
    /// Output channels per block: [`MR`] on AMX, [`MR_VNNI`] on VNNI.
    pub fn mr(&self) -> usize {
        if self.amx {
            MR
        } else {
            MR_VNNI
        }
    }
    /// Work units of the convolution kernel: (batch entry, block of `mr` channels, chunk of
    /// `BLOCKS_PER_CALL` blocks of `NQ` positions); transposed: (batch entry, block of [`TM`] channels,
    /// output row, chunk of [`TQ`] positions).
    pub fn units(&self) -> usize {
        if self.transposed {
            return self.n * (self.m / TM) * self.out[0] * self.t_tiles().chunks;
        }
        let chunks = self.position_blocks().div_ceil(BLOCKS_PER_CALL);
        self.n * self.m.div_ceil(self.mr()) * chunks
    }
    /// The transposed kernel's tiles along an output row: `⌈OW / TQ⌉` chunks of as even widths as they split
    /// into (7: 4 + 3; 14: 5 + 5 + 4, not 6 + 6 + 2, whose narrow tile would wait on its few accumulators).
    pub fn t_tiles(&self) -> TTiles {
        let ow = self.out[1];
        let chunks = ow.div_ceil(TQ).max(1);
        TTiles {
            chunks,
            narrow: ow / chunks,
            wide: ow % chunks,
        }
    }
    /// Output positions the position-block kernel computes for every `OH·OW` it keeps: whole phase-width rows
    /// rounded to blocks (7x7 planes 64 for 49, 3x3 windows on 14x14 224 for 196).
    pub fn block_waste(&self) -> f64 {
        (self.position_blocks() * NQ) as f64 / (self.out[0] * self.out[1]) as f64
    }
    /// Weight bytes of one [`TM`]-channel block of the transposed kernel: per tap and channel quad, the
    /// block's channels' four bytes.
    pub fn t_block(&self) -> usize {
        self.taps() * self.quads() * TM * 4
    }
    /// Packs weights `w` (`[M, C, KH, KW]`, s8 values; `M` a multiple of [`TM`]) for the transposed kernel:
    /// `[M / TM][tap][quad][TM][4]`, channels past `C` zero.
    pub fn pack_weights_t(&self, w: &[i64]) -> Vec<i64> {
        let (taps, quads) = (self.taps(), self.quads());
        let mut a = vec![0i64; self.m / TM * self.t_block()];
        for r in 0..self.m {
            let (ob, o) = (r / TM, r % TM);
            for ch in 0..self.c {
                for t in 0..taps {
                    let at = ob * self.t_block() + ((t * quads + ch / 4) * TM + o) * 4 + ch % 4;
                    a[at] = w[(r * self.c + ch) * taps + t];
                }
            }
        }
        a
    }
    /// Multiply-adds (the kept outputs'), for the cost model and reports.
    pub fn macs(&self) -> usize {
        self.n * self.m * self.out[0] * self.out[1] * self.c * self.taps()
    }
    /// Packs weights `w` (`[M, C, KH, KW]`, s8 values) as rows of `(tap, channel)` bytes, channels zero-padded
    /// to [`tap_bytes`](Self::tap_bytes) ([`a_row`](Self::a_row) bytes a row).
    pub fn pack_weights(&self, w: &[i64]) -> Vec<i64> {
        let (taps, cp) = (self.taps(), self.tap_bytes());
        let mut a = vec![0i64; self.m * self.a_row()];
        for r in 0..self.m {
            for ch in 0..self.c {
                for t in 0..taps {
                    a[r * self.a_row() + t * cp + ch] = w[(r * self.c + ch) * taps + t];
                }
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> QConvImplicit {
        QConvImplicit {
            n: 1,
            c: 70,
            hw: [5, 7],
            m: 3,
            kernel: [3, 3],
            pads: [1, 1],
            padded: [7, 9],
            stride: 1,
            out: [5, 7],
            x_dtype: DType::U8,
            fill: 3,
            y_dtype: DType::U8,
            zero_point: 0,
            clamp: (0, 255),
            amx: true,
            transposed: false,
            add: None,
        }
    }

    #[test]
    fn weights_by_tap_then_channel() {
        let s = spec();
        assert_eq!((s.blocks(), s.a_row()), (2, 9 * 128));
        let w: Vec<i64> = (0..3 * 70 * 9).map(|i| (i % 251) as i64 - 125).collect();
        let a = s.pack_weights(&w);
        // Row 2, channel 69, tap (1, 2) = 5.
        assert_eq!(a[2 * s.a_row() + 5 * 128 + 69], w[(2 * 70 + 69) * 9 + 5]);
        // Padded channels are zero.
        assert_eq!(a[2 * s.a_row() + 5 * 128 + 70], 0);
        assert_eq!(s.tap_offset(5), (9 + 2) * 4);
        // On VNNI a tap's channels are padded to quads only (70 -> 72), and only those are reordered.
        let v = QConvImplicit {
            amx: false,
            ..s.clone()
        };
        assert_eq!((v.tap_bytes(), v.a_row()), (72, 9 * 72));
        assert_eq!(v.reordered_bytes(), 18 * v.quad_bytes());
        let av = v.pack_weights(&w);
        assert_eq!(av[2 * v.a_row() + 5 * 72 + 69], w[(2 * 70 + 69) * 9 + 5]);
        assert_eq!(av[2 * v.a_row() + 5 * 72 + 70], 0);
        // Positions: 5 rows of 9, rounded to 64.
        assert_eq!(s.positions(), 64);
        // Stride 2: phase planes of 4 x 5; tap (1, 2) is phase (1, 0) at row 0, column 1.
        let s2 = QConvImplicit {
            stride: 2,
            out: [3, 4],
            ..s
        };
        assert_eq!(s2.phase(), [4, 5]);
        assert_eq!(s2.tap_offset(5), 2 * s2.plane_words() * 4 + 4);
        assert_eq!(s2.positions(), 32);
    }

    #[test]
    fn transposed_weights_by_block_tap_quad_channel() {
        let s = QConvImplicit {
            m: 128,
            amx: false,
            transposed: true,
            ..spec()
        };
        let w: Vec<i64> = (0..128 * 70 * 9).map(|i| (i % 251) as i64 - 125).collect();
        let a = s.pack_weights_t(&w);
        assert_eq!(a.len(), 2 * 9 * 18 * 64 * 4);
        // Channel 100 (block 1, lane 36), input channel 69 (quad 17, byte 1), tap 5.
        let at = s.t_block() + ((5 * 18 + 17) * 64 + 36) * 4 + 1;
        assert_eq!(a[at], w[(100 * 70 + 69) * 9 + 5]);
        // Input channels 70 and 71 of the last quad are zero.
        assert_eq!(a[s.t_block() + ((5 * 18 + 17) * 64 + 36) * 4 + 2], 0);
        // 5 x 7 outputs: tiles of 4 and 3 per row; 2 blocks x 5 rows x 2 chunks.
        assert_eq!(s.t_tiles().widths(), (Some(4), Some(3)));
        let w14 = QConvImplicit {
            out: [5, 14],
            ..s.clone()
        };
        assert_eq!(w14.t_tiles().widths(), (Some(5), Some(4)));
        let w12 = QConvImplicit {
            out: [5, 12],
            ..s.clone()
        };
        assert_eq!(w12.t_tiles().widths(), (None, Some(6)));
        assert_eq!(s.units(), 2 * 5 * 2);
        assert!((s.block_waste() - 64.0 / 35.0).abs() < 1e-9);
    }
}
