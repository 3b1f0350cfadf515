//! The cycle estimate of a transaction body as it is programmed, kept while [`super::txn::TxnBody`] writes it:
//! the host fetches the ops at the instruction bandwidth and stops in its TCTs and `DONE` polls until what it
//! waits for has happened; a transfer's DDR leg starts when its last start-queue push has been fetched and the
//! one DDR link is free, and takes its bytes over the DMA bandwidth (streams between tiles add nothing); a core
//! starts a computation when `GO` is released and it is idle. This is the timing bundle-rt's emulator keeps
//! (docs/npu-transaction-format.md, "Cycle estimate"), for the transfers and computations bundlec writes.

/// Times in cycles from the start of the body.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// Instruction and DDR bytes per cycle (0 counts as 1).
    instr_rate: u64,
    dma_rate: u64,
    /// The host's time at its last wait, and the body's length in bytes then.
    host_at: u64,
    mark: usize,
    /// When the DDR link is next free.
    ddr_free: u64,
    /// Per core tile index: when its last computation ends.
    core_end: Vec<u64>,
}

impl Clock {
    /// A clock for the target's rates.
    pub fn new(instr_bytes_per_cycle: u32, dma_bytes_per_cycle: u32) -> Clock {
        Clock {
            instr_rate: u64::from(instr_bytes_per_cycle.max(1)),
            dma_rate: u64::from(dma_bytes_per_cycle.max(1)),
            ..Clock::default()
        }
    }

    /// The host's time once the body's first `len` bytes are fetched.
    pub fn host(&self, len: usize) -> u64 {
        let fetched = len.saturating_sub(self.mark) as u64;
        self.host_at + fetched.div_ceil(self.instr_rate.max(1))
    }

    /// The host, having fetched `len` bytes, waits until `t`.
    pub fn wait(&mut self, t: u64, len: usize) {
        if t > self.host(len) {
            self.host_at = t;
            self.mark = len;
        }
    }

    /// A transfer of `bytes` DDR bytes whose last push ends the body's first `len` bytes; returns when its
    /// token is issued.
    pub fn transfer(&mut self, len: usize, bytes: u64) -> u64 {
        let start = self.host(len).max(self.ddr_free);
        self.ddr_free = start + bytes.div_ceil(self.dma_rate.max(1));
        self.ddr_free
    }

    /// A computation of `cycles` on core tile `ti` whose `GO` release ends the body's first `len` bytes;
    /// returns when it releases `DONE`.
    pub fn compute(&mut self, ti: usize, len: usize, cycles: u64) -> u64 {
        if self.core_end.len() <= ti {
            self.core_end.resize(ti + 1, 0);
        }
        let end = self.host(len).max(self.core_end[ti]) + cycles;
        self.core_end[ti] = end;
        end
    }

    /// When core tile `ti`'s last computation ends.
    pub fn core_end(&self, ti: usize) -> u64 {
        self.core_end.get(ti).copied().unwrap_or(0)
    }
}
