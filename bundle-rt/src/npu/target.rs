//! The NPU target a device runs (array geometry, clock and rates, memory sizes), the buffers a segment run binds,
//! and the cycle counts a run reports. A leaf the decoder, the DMA model and the emulator share.

/// The five fused buffers one NPU run binds (XRT kernel args 3..7; DDR_PATCH argidx 0..4).
#[derive(Debug)]
pub struct NpuBuffers<'a> {
    /// argidx 0: the segment's inputs, packed (read-only).
    pub input: &'a [u8],
    /// argidx 1: the segment's outputs, packed.
    pub output: &'a mut [u8],
    /// argidx 2: tensors internal to the segment.
    pub scratch: &'a mut [u8],
    /// argidx 3: NPU-layout weights, biases and scales (read-only).
    pub constants: &'a [u8],
    /// argidx 4 (`super_instr`): the kernels' parameter blocks (read-only).
    pub params: &'a [u8],
}

/// The cycle estimate of one run (see the end of `docs/npu-transaction-format.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NpuCycles {
    /// Instruction transfer: the transaction's bytes over the instruction bandwidth, plus the
    /// dispatch overhead.
    pub instruction: u64,
    /// Data transfer: DDR bytes the shim DMA moved, over the DMA bandwidth.
    pub data: u64,
    /// Compute: the busiest core tile's sum over its super-instructions.
    pub compute: u64,
    /// The run as programmed: the dispatch overhead plus the time until the host, every DMA
    /// channel, the DDR link and every core are done, with the host fetching instructions and
    /// waiting in its TCTs and MASKPOLLs, transfers waiting for their pushes, locks and the DDR
    /// link, and cores for `GO` (docs/npu-transaction-format.md, "Cycle estimate").
    pub elapsed: u64,
}

impl NpuCycles {
    /// The run's cycles: [`NpuCycles::elapsed`].
    pub fn total(&self) -> u64 {
        self.elapsed
    }

    /// The resource bound: `instruction + max(data, compute)` (saturating), what the run would
    /// take if DMA and compute overlapped perfectly and nothing waited.
    pub fn bound(&self) -> u64 {
        self.instruction
            .saturating_add(core::cmp::max(self.data, self.compute))
    }
}

/// The description of an NPU array: geometry, memories and the rates of the cycle estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpuTarget {
    /// Total rows: 1 shim row + memory-tile rows + core rows.
    pub rows: u8,
    /// Columns.
    pub cols: u8,
    /// Memory-tile rows (rows `1..=mem_tile_rows`).
    pub mem_tile_rows: u8,
    /// Data memory of a core tile, bytes.
    pub local_bytes: u32,
    /// Data memory of a memory tile, bytes.
    pub mem_tile_bytes: u32,
    /// Clock in MHz (to turn cycles into time).
    pub clock_mhz: u32,
    /// f32 multiply-accumulates per cycle, per core tile.
    pub macs_per_cycle_f32: u32,
    /// int8 multiply-accumulates per cycle, per core tile.
    pub macs_per_cycle_i8: u32,
    /// DMA bytes per cycle (all tiles together).
    pub dma_bytes_per_cycle: u32,
    /// Instruction (transaction) bytes per cycle.
    pub instr_bytes_per_cycle: u32,
    /// Fixed cycles to dispatch one transaction.
    pub dispatch_cycles: u32,
}

impl NpuTarget {
    /// bundlec's virtual NPU (`compiler/targets/vnpu.json`): 6 rows (shim, one memory-tile row,
    /// 4 core rows) by 4 columns, 64 KiB per core tile, 512 KiB per memory tile, 1 GHz.
    pub const fn vnpu() -> NpuTarget {
        NpuTarget {
            rows: 6,
            cols: 4,
            mem_tile_rows: 1,
            local_bytes: 65536,
            mem_tile_bytes: 524288,
            clock_mhz: 1000,
            macs_per_cycle_f32: 32,
            macs_per_cycle_i8: 256,
            dma_bytes_per_cycle: 64,
            instr_bytes_per_cycle: 16,
            dispatch_cycles: 2000,
        }
    }
}
