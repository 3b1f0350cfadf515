//! The device boundary: [`Device`] (what an XRT-backed driver or the emulator implements) and
//! [`Emulator`], the virtual NPU that runs transactions on the host; the buffers, cycle counts and
//! target description they take are in `target.rs`.
//!
//! Invariants: an [`Emulator`] owns its tile memories and registers and resets them at the start
//! of every run, so runs are independent; it never panics on any transaction or buffer contents and
//! reports every failure as [`Error::NpuHeader`](crate::Error::NpuHeader) or
//! [`Error::Npu`](crate::Error::Npu).

use super::emulate::State;
use super::target::{NpuBuffers, NpuCycles, NpuTarget};

/// What a real XRT-backed driver would implement.
pub trait Device {
    /// The device's name (the recipe's kernel `instance`, or a description).
    fn name(&self) -> &str;
    /// Runs one transaction binary against the bound buffers; validates everything before executing anything.
    fn run(&mut self, txn: &[u8], bufs: NpuBuffers<'_>) -> crate::Result<NpuCycles>;
}

/// The virtual NPU: runs transactions on the host, bit-exactly as the format page specifies.
///
/// A run first decodes and validates the whole container, then replays it once without moving
/// data (checking every register, buffer descriptor, DMA bound, store permission and counter
/// MASKPOLL), and only then executes it. The checks that depend on data memory contents (kernel
/// parameter blocks, MASKPOLL on a data word) run just before their op, which then has no effect.
#[derive(Debug)]
pub struct Emulator {
    target: NpuTarget,
    state: State,
}

impl Emulator {
    /// An emulator of `target`; tile memories are allocated on first use and kept across runs.
    pub fn new(target: NpuTarget) -> Emulator {
        Emulator {
            target,
            state: State::new(),
        }
    }

    /// An emulator of [`NpuTarget::vnpu`].
    pub fn vnpu() -> Emulator {
        Emulator::new(NpuTarget::vnpu())
    }

    /// The array this emulator models.
    pub fn target(&self) -> &NpuTarget {
        &self.target
    }
}

impl Device for Emulator {
    fn name(&self) -> &str {
        "vnpu-emulator"
    }

    fn run(&mut self, txn: &[u8], bufs: NpuBuffers<'_>) -> crate::Result<NpuCycles> {
        let ops = super::decode::decode(txn, &self.target)?;
        self.state.run(&self.target, txn, &ops, bufs)
    }
}
