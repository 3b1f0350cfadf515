//! What is wrong with an NPU transaction or its run: [`NpuWhy`], carried by
//! [`Error::Npu`](super::Error::Npu) (an op, located by its index and byte offset) and
//! [`Error::NpuHeader`](super::Error::NpuHeader) (the 16-byte container header, or the op list as a
//! whole), plus the small values it names ([`NpuBuffer`], [`NpuRegion`], [`ParamWhy`]).
//!
//! Everything here is `Copy` and allocation-free like the rest of [`Error`](super::Error); field
//! names are `&'static str` spelled as in `docs/npu-transaction-format.md` (`"total size"`,
//! `"argidx"`, `"row bytes"`), so a message locates the byte at fault without the spec open.

use core::fmt;

/// One of the five fused buffers an NPU run binds (DDR_PATCH `argidx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpuBuffer {
    /// argidx 0: the segment's inputs (read-only).
    Input,
    /// argidx 1: the segment's outputs.
    Output,
    /// argidx 2: tensors internal to the segment.
    Scratch,
    /// argidx 3: weights, biases, scales (read-only).
    Constants,
    /// argidx 4: the kernels' parameter blocks (`super_instr`, read-only).
    Params,
}

impl NpuBuffer {
    /// The buffer of DDR_PATCH `argidx`, if it is one of 0..=4.
    pub const fn from_argidx(argidx: u64) -> Option<NpuBuffer> {
        Some(match argidx {
            0 => NpuBuffer::Input,
            1 => NpuBuffer::Output,
            2 => NpuBuffer::Scratch,
            3 => NpuBuffer::Constants,
            4 => NpuBuffer::Params,
            _ => return None,
        })
    }

    /// Its `argidx` (0..=4).
    pub const fn argidx(self) -> u8 {
        self as u8
    }

    /// Whether the transaction may store into it (only `out` and `scratch`).
    pub const fn is_writable(self) -> bool {
        matches!(self, NpuBuffer::Output | NpuBuffer::Scratch)
    }

    /// The name the format page gives it.
    pub const fn name(self) -> &'static str {
        match self {
            NpuBuffer::Input => "in",
            NpuBuffer::Output => "out",
            NpuBuffer::Scratch => "scratch",
            NpuBuffer::Constants => "const",
            NpuBuffer::Params => "super_instr",
        }
    }
}

impl fmt::Display for NpuBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buffer `{}` (argidx {})", self.name(), self.argidx())
    }
}

/// A memory an access must fit in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpuRegion {
    /// A bound DDR buffer.
    Buffer(NpuBuffer),
    /// The data memory of the tile at (`col`, `row`).
    Local {
        /// Column.
        col: u8,
        /// Row.
        row: u8,
    },
}

impl fmt::Display for NpuRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NpuRegion::Buffer(b) => b.fmt(f),
            NpuRegion::Local { col, row } => {
                write!(f, "the data memory of tile (col {col}, row {row})")
            }
        }
    }
}

/// What is wrong with a word of a kernel's parameter block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamWhy {
    /// The value must be at least 1.
    Zero,
    /// An enumeration (dtype, op, kind, mode, activation) or a flag bit this kernel does not know.
    UnknownCode,
    /// The region this address word starts (with the sizes of the other words) overflows 64 bits.
    Overflow,
    /// The region this address word starts ends at `end`, past the tile's `size` bytes of memory.
    OutOfBounds {
        /// End of the region, in bytes.
        end: u64,
        /// The tile's data memory size.
        size: u64,
    },
    /// The value must equal `expected` (depthwise `cb == mb`).
    Mismatch {
        /// The value required.
        expected: u64,
    },
    /// The field is only valid for f32 (`dtype` 0): the residual flag of EPILOGUE.
    F32Only,
}

impl fmt::Display for ParamWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ParamWhy::Zero => f.write_str("must be at least 1"),
            ParamWhy::UnknownCode => f.write_str("unknown code or flag bit"),
            ParamWhy::Overflow => f.write_str("the region it describes overflows 64 bits"),
            ParamWhy::OutOfBounds { end, size } => write!(
                f,
                "the region it describes ends at byte {end}, past the tile's {size} bytes of data memory"
            ),
            ParamWhy::Mismatch { expected } => write!(f, "must equal {expected}"),
            ParamWhy::F32Only => f.write_str("only valid with dtype 0 (f32)"),
        }
    }
}

/// The name of kernel `code` (`"?"` for an unknown one).
pub const fn kernel_name(code: u32) -> &'static str {
    match code {
        1 => "CONV",
        2 => "GEMM",
        3 => "EPILOGUE",
        4 => "ELTWISE",
        5 => "POOL",
        6 => "GAP",
        _ => "?",
    }
}

/// What is wrong with an NPU transaction (or with running it against the bound buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpuWhy {
    /// The file ends at `len` bytes but the header or op needs `needed`.
    Truncated {
        /// Bytes the header or op needs (from the start of the file).
        needed: u64,
        /// Bytes in the file.
        len: u64,
    },
    /// A header field has the wrong value (version, generation, geometry, pad, total size).
    BadHeader {
        /// The field, as in the format page.
        field: &'static str,
        /// The value found.
        value: u64,
        /// The value required.
        expected: u64,
    },
    /// The ops that fill `total size` are not `op count` ops.
    OpCount {
        /// The header's op count.
        declared: u32,
        /// Ops found (or reached, when there are more than declared).
        found: u32,
    },
    /// An op's size field is wrong for its opcode.
    OpSize {
        /// The opcode.
        opcode: u8,
        /// The size found.
        size: u32,
        /// The size the opcode requires; `None` for BLOCKWRITE (`16 + 4n`).
        expected: Option<u32>,
    },
    /// An op the format defines but the emulator does not model (LOADPDI: loading a partial device image).
    NotModelled {
        /// The opcode.
        opcode: u8,
    },
    /// An opcode the virtual NPU does not execute.
    UnknownOpcode {
        /// The opcode.
        opcode: u8,
    },
    /// An op field has a value the format forbids (a non-zero reserved field, a direction
    /// other than 0/1, a zero row count, an argidx past 4, a misaligned address, ...).
    BadField {
        /// The field, as in the format page.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// A field that must be 4-byte aligned is not (DDR_PATCH's `argplus`: a shim buffer
    /// descriptor holds address bits 31:2).
    Misaligned {
        /// The field, as in the format page.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// The address names a tile outside the array.
    BadTile {
        /// The register address.
        addr: u64,
        /// Column decoded from it.
        col: u64,
        /// Row decoded from it.
        row: u64,
    },
    /// A compute command names a tile that is not a core tile.
    NotCoreTile {
        /// Column.
        col: u8,
        /// Row.
        row: u8,
    },
    /// The address is in a valid tile but is neither a register of that tile nor an aligned word
    /// of its data memory (or not the register the op requires, such as a `BD[i].ADDR_LO`).
    BadRegister {
        /// The register address.
        addr: u64,
    },
    /// A buffer descriptor holds a DDR address that names none of the five bound buffers.
    BadAddress {
        /// The DDR address.
        addr: u64,
    },
    /// An access `[start, start + len)` runs past `region`, which has `size` bytes.
    OutOfBounds {
        /// The memory accessed.
        region: NpuRegion,
        /// First byte.
        start: u64,
        /// Bytes accessed (`u64::MAX` if computing them overflowed).
        len: u64,
        /// Size of the memory.
        size: u64,
    },
    /// A DMA store into a read-only buffer (`in`, `const`, `super_instr`).
    ReadOnlyBuffer {
        /// The buffer.
        buffer: NpuBuffer,
    },
    /// A MASKPOLL whose condition does not hold once every earlier op has completed: on hardware
    /// it would wait forever.
    PollTimeout {
        /// The register address polled.
        reg: u64,
        /// The mask.
        mask: u32,
        /// The value `reg & mask` must equal.
        expected: u32,
        /// The register's value.
        actual: u32,
    },
    /// A mailbox kernel number outside 1..=6.
    UnknownKernel {
        /// The kernel number.
        kernel: u32,
    },
    /// A mailbox parameter block size other than the kernel's.
    ParamSize {
        /// The kernel number.
        kernel: u32,
        /// The size found.
        bytes: u32,
        /// The kernel's block size.
        expected: u32,
    },
    /// A word of a kernel's parameter block is invalid.
    BadParam {
        /// The kernel number.
        kernel: u32,
        /// The word's index in the block.
        word: u32,
        /// The word's value.
        value: u32,
        /// What is wrong with it.
        why: ParamWhy,
    },
    /// A max or valid-only average POOL window at output (`row`, `col`) covers no input position.
    EmptyWindow {
        /// Output row.
        row: u32,
        /// Output column.
        col: u32,
    },
    /// A DMA start queue already holds its 4 tasks.
    QueueOverflow {
        /// 0 S2MM, 1 MM2S.
        dir: u8,
        /// The channel.
        channel: u8,
    },
    /// A DMA channel started a buffer descriptor it cannot run.
    BadBd {
        /// Column of the tile.
        col: u8,
        /// Row of the tile.
        row: u8,
        /// The BD.
        bd: u8,
        /// What is wrong (not valid, no such BD, a lock id past the tile's locks, ...).
        why: &'static str,
    },
    /// A BD's lock release would leave the lock's 0..=63 range.
    LockFault {
        /// Column of the tile whose BD released it.
        col: u8,
        /// Row of that tile.
        row: u8,
        /// The lock id as the BD names it.
        lock: u8,
        /// The lock's value.
        value: u8,
        /// The amount released.
        delta: i8,
    },
    /// The DMA channels and super-kernels do not settle (a chain of buffer descriptors without
    /// locks that never ends, or channels and kernels releasing each other's locks forever).
    DmaUnsettled,
    /// The host waits for a DMA channel (a TCT, or a MASKPOLL on its status) that can never
    /// finish: it is stuck as `stall` says.
    DmaDeadlock {
        /// Column of the tile.
        col: u8,
        /// Row of the tile.
        row: u8,
        /// 0 S2MM, 1 MM2S.
        dir: u8,
        /// The channel.
        channel: u8,
        /// What the channel waits for.
        stall: DmaStall,
    },
}

/// Why a DMA channel cannot finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaStall {
    /// Its BD waits for a lock that nothing will release.
    Lock {
        /// The BD.
        bd: u8,
        /// The lock id as the BD names it.
        lock: u8,
        /// The lock's value.
        value: u8,
        /// The acquire value (`-v`: at least `v`; `+v`: exactly `v`).
        wants: i8,
    },
    /// Its BD waits for the other end of its stream (no BD there, or one waiting itself).
    Stream {
        /// The BD.
        bd: u8,
        /// Words moved.
        done: u32,
        /// Words of the BD.
        len: u32,
    },
    /// It is idle and has issued no task-completion token for the TCT to take.
    NoToken,
}

impl fmt::Display for DmaStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DmaStall::Lock {
                bd,
                lock,
                value,
                wants,
            } => {
                let cond = if wants < 0 { ">=" } else { "==" };
                write!(
                    f,
                    "BD {bd} waits for lock {lock} {cond} {} (it holds {value}) and nothing releases it",
                    wants.unsigned_abs()
                )
            }
            DmaStall::Stream { bd, done, len } => write!(
                f,
                "BD {bd} moved {done} of {len} words and its stream's other end has no BD ready"
            ),
            DmaStall::NoToken => f.write_str("no task with a completion token finished on it"),
        }
    }
}

/// `S2MM` or `MM2S`.
fn dir_name(dir: u8) -> &'static str {
    if dir == 0 {
        "S2MM"
    } else {
        "MM2S"
    }
}

impl fmt::Display for NpuWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NpuWhy::Truncated { needed, len } => write!(
                f,
                "truncated: needs {needed} bytes, the file has {len}"
            ),
            NpuWhy::BadHeader {
                field,
                value,
                expected,
            } => write!(f, "header field `{field}` is {value}, expected {expected}"),
            NpuWhy::OpCount { declared, found } => write!(
                f,
                "the header declares {declared} ops, the file holds {found}"
            ),
            NpuWhy::OpSize {
                opcode,
                size,
                expected: Some(e),
            } => write!(f, "opcode {opcode} has size {size}, expected {e}"),
            NpuWhy::OpSize {
                opcode,
                size,
                expected: None,
            } => write!(f, "opcode {opcode} has size {size}, expected 16 + 4n"),
            NpuWhy::NotModelled { opcode } => write!(
                f,
                "opcode {opcode} (LOADPDI) is a real aie-rt op that the emulator does not model"
            ),
            NpuWhy::UnknownOpcode { opcode } => write!(
                f,
                "unknown opcode {opcode} (the emulator reads 0, 1, 3-8, 128, 129, 131, 132, 146)"
            ),
            NpuWhy::BadField { field, value } => {
                write!(f, "field `{field}` has the invalid value {value}")
            }
            NpuWhy::BadTile { addr, col, row } => write!(
                f,
                "address {addr:#x} names tile (col {col}, row {row}), which is outside the array"
            ),
            NpuWhy::Misaligned { field, value } => write!(
                f,
                "field `{field}` is {value}, which is not a multiple of 4 (shim buffer descriptors hold word addresses)"
            ),
            NpuWhy::NotCoreTile { col, row } => write!(
                f,
                "tile (col {col}, row {row}) is not a core tile and cannot compute"
            ),
            NpuWhy::BadRegister { addr } => write!(
                f,
                "address {addr:#x} is not a register this op accepts nor an aligned word of data memory"
            ),
            NpuWhy::BadAddress { addr } => write!(
                f,
                "DDR address {addr:#x} names no bound buffer (expected (argidx + 1) << 40 + offset)"
            ),
            NpuWhy::OutOfBounds {
                region,
                start,
                len,
                size,
            } => write!(
                f,
                "access of {len} bytes at {start} runs past {region} ({size} bytes)"
            ),
            NpuWhy::ReadOnlyBuffer { buffer } => {
                write!(f, "DMA store into the read-only {buffer}")
            }
            NpuWhy::PollTimeout {
                reg,
                mask,
                expected,
                actual,
            } => write!(
                f,
                "MASKPOLL would wait forever: register {reg:#x} is {actual:#x}, (value & {mask:#x}) must equal {expected:#x}"
            ),
            NpuWhy::UnknownKernel { kernel } => {
                write!(f, "unknown compute kernel {kernel} (expected 1..=6)")
            }
            NpuWhy::ParamSize {
                kernel,
                bytes,
                expected,
            } => write!(
                f,
                "{} parameter block is {bytes} bytes, expected {expected}",
                kernel_name(kernel)
            ),
            NpuWhy::BadParam {
                kernel,
                word,
                value,
                why,
            } => write!(
                f,
                "{} parameter word {word} = {value}: {why}",
                kernel_name(kernel)
            ),
            NpuWhy::EmptyWindow { row, col } => write!(
                f,
                "POOL window of output (row {row}, col {col}) covers no input position"
            ),
            NpuWhy::QueueOverflow { dir, channel } => write!(
                f,
                "the start queue of {} channel {channel} already holds 4 tasks",
                dir_name(dir)
            ),
            NpuWhy::BadBd { col, row, bd, why } => {
                write!(f, "BD {bd} of tile (col {col}, row {row}): {why}")
            }
            NpuWhy::LockFault {
                col,
                row,
                lock,
                value,
                delta,
            } => write!(
                f,
                "a BD of tile (col {col}, row {row}) releases lock {lock} by {delta:+} from {value}, leaving 0..=63"
            ),
            NpuWhy::DmaUnsettled => f.write_str(
                "the DMA channels and cores do not settle (a chain of BDs that never ends, or locks released back and forth forever)",
            ),
            NpuWhy::DmaDeadlock {
                col,
                row,
                dir,
                channel,
                stall,
            } => write!(
                f,
                "deadlock: the host waits for {} channel {channel} of tile (col {col}, row {row}), but {stall}",
                dir_name(dir)
            ),
        }
    }
}
