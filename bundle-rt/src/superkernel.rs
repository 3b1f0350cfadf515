//! The virtual NPU's super-kernel ABI, shared by bundlec (which writes transactions) and the emulator (which
//! runs them): the kernel numbers and parameter-block sizes, the VNPU_KERNEL opcode and the resident kernel's
//! number, the mailbox in a core's data memory and the `GO` / `DONE` core locks
//! (docs/npu-transaction-format.md). These are ours, not AIE-ML's: `aie/` holds the hardware's facts. A leaf,
//! with no features, so the compiler can use it.

/// Virtual-NPU opcode VNPU_KERNEL: a core runs the resident super-kernel.
pub const OP_VNPU_KERNEL: u8 = 146;
/// The resident kernel VNPU_KERNEL names.
pub const SUPER_KERNEL: u32 = 1;
/// Data-memory offset of the super-kernel's mailbox: kernel code, parameter block address, its bytes, reserved
/// 0 (the last 16 bytes of the 256-byte parameter area).
pub const MAILBOX: u32 = 0xF0;
/// The core lock a host (or a BD) releases to start one super-instruction.
pub const GO_LOCK: u32 = 14;
/// The core lock the super-kernel releases after each super-instruction.
pub const DONE_LOCK: u32 = 15;

/// A kernel the super-kernel runs, by its mailbox code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// 1: convolution slab into an accumulator.
    Conv = 1,
    /// 2: matrix product into an accumulator.
    Gemm = 2,
    /// 3: accumulator to output (bias, residual, activation, requantisation).
    Epilogue = 3,
    /// 4: elementwise add / mul / activation.
    Eltwise = 4,
    /// 5: max / average pooling.
    Pool = 5,
    /// 6: global average pooling.
    Gap = 6,
}

impl Kernel {
    /// The kernel numbered `code`.
    pub fn from_code(code: u32) -> Option<Kernel> {
        Some(match code {
            1 => Kernel::Conv,
            2 => Kernel::Gemm,
            3 => Kernel::Epilogue,
            4 => Kernel::Eltwise,
            5 => Kernel::Pool,
            6 => Kernel::Gap,
            _ => return None,
        })
    }

    /// Words in its parameter block.
    pub const fn block_words(self) -> usize {
        match self {
            Kernel::Conv => 20,
            Kernel::Gemm => 9,
            Kernel::Epilogue => 13,
            Kernel::Eltwise | Kernel::Pool => 17,
            Kernel::Gap => 6,
        }
    }

    /// Bytes in its parameter block.
    pub const fn block_bytes(self) -> u32 {
        self.block_words() as u32 * 4
    }
}
