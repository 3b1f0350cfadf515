//! `#[repr(C)]` mirrors of the `NAME_config` structures of `docs/bundle-format.md`, and the enums
//! ([`DType`], [`Role`], [`Area`]) their integer codes stand for.
//!
//! The structs here are plain data with raw pointers, exactly as the compiler lays them out (LP64,
//! little-endian); compile-time asserts pin every size and offset. Field names are the C names in
//! snake case. Nothing here is trusted: [`ConfigView::new`] checks a config once and is the only way
//! to reach its tables as slices.

use core::ffi::c_char;
use core::fmt;
use core::mem::{offset_of, size_of};

mod view;

pub use view::{ByteRange, ConfigView, NpuCopyInfo, NpuSegmentInfo, TensorInfo};

/// `BundleConfig.magic`: the bytes `"BUNDLC1\0"` read as a little-endian `u64`.
pub const MAGIC: u64 = 0x0031_434C_444E_5542;
/// The format version this runtime reads (2: the NPU segment table; 3: `cpuFeatures`; 4: `fastOps`; 5:
/// `BundleOp.pairing`).
pub const VERSION: u32 = 5;
/// `flags` bit 1: inputs and outputs live in the activation area (`bundlec --inputs-in-activations`).
pub const FLAG_IO_IN_ACTIVATIONS: u32 = 1;
/// The most dimensions a tensor may have.
pub const MAX_RANK: usize = 8;

/// `BundleOpFn`: runs task `task` of one op; `args[i]` is the address of argument `i`.
pub type BundleOpFn = unsafe extern "C" fn(args: *const *mut u8, task: u64);

/// The entry function `int NAME(uint8_t *constantWeight, uint8_t *mutableWeight, uint8_t *activations)`.
pub type EntryFn = unsafe extern "C" fn(
    constant_weight: *mut u8,
    mutable_weight: *mut u8,
    activations: *mut u8,
) -> i32;

/// `struct SymbolTableEntry` (32 bytes): one tensor of the symbol table, as in Glow.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SymbolTableEntry {
    /// `name`: ONNX tensor name, NUL-terminated.
    pub name: *const c_char,
    /// `offset`: byte offset in its area.
    pub offset: u64,
    /// `size`: number of elements.
    pub size: u64,
    /// `kind` (C `char`): 1 mutable (input/output), 0 constant.
    pub kind: u8,
}

/// `struct BundleTensorDesc` (88 bytes): dtype and shape of the symbol with the same index.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BundleTensorDesc {
    /// `dtype`: ONNX `TensorProto.DataType` code, see [`DType`].
    pub dtype: u32,
    /// `rank`: `0..=8`.
    pub rank: u32,
    /// `role`: see [`Role`].
    pub role: u32,
    /// `reserved`: 0 (not checked).
    pub reserved: u32,
    /// `dims`: `dims[rank..]` are 0.
    pub dims: [u64; MAX_RANK],
    /// `sizeBytes`: `product(dims) * dtype size`.
    pub size_bytes: u64,
}

/// `struct BundleArg` (24 bytes): one tensor argument of an op.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BundleArg {
    /// `area`: see [`Area`].
    pub area: u32,
    /// `reserved`: 0 (not checked).
    pub reserved: u32,
    /// `offset`: byte offset in that area (a multiple of `alignment`).
    pub offset: u64,
    /// `size`: bytes.
    pub size: u64,
}

/// `struct BundleOp` (40 bytes): one op ("kernel") of the schedule.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BundleOp {
    /// `fn`: the kernel; `None` mirrors a NULL pointer, which the validator rejects.
    pub func: Option<BundleOpFn>,
    /// `name`: unique within the bundle, NUL-terminated.
    pub name: *const c_char,
    /// `numTasks`: `>= 1`; tasks of one op are independent.
    pub num_tasks: u32,
    /// `numArgs`.
    pub num_args: u32,
    /// `args`: `numArgs` entries.
    pub args: *const BundleArg,
    /// `layer`: BSP layer index.
    pub layer: u32,
    /// `pairing`: 0 (every schedule runs the op), or for an interleaved pair of `G` groups `G << 8 | 1` (the
    /// pair's op, run when the thread count divides `G`) or `G << 8 | 2` (one of its two kernels alone, run
    /// otherwise): [`BundleOp::tasks_on`].
    pub pairing: u32,
}

/// `BundleOp.pairing`'s low byte: the pair's op.
pub const PAIRED: u32 = 1;
/// `BundleOp.pairing`'s low byte: one of a pair's kernels alone.
pub const UNPAIRED: u32 = 2;

/// `BundleOp.pairing` as (kind: 0, [`PAIRED`] or [`UNPAIRED`] where valid; the pair's groups `G`).
pub fn split_pairing(pairing: u32) -> (u32, u32) {
    (pairing & 0xff, pairing >> 8)
}

/// Whether an engine of `threads` threads (the entry function's order: 1) runs an interleaved pair of `groups`
/// groups as the pair's op: when every thread gets as many groups. Otherwise (16 threads on a pair of 6) the
/// pair's kernels run as ops of their own, each with its full task count.
pub fn pairs_on(threads: usize, groups: u32) -> bool {
    (groups as usize).is_multiple_of(threads.max(1))
}

impl BundleOp {
    /// The tasks this op runs on an engine of `threads` threads: `numTasks`, or 0 for the one of a pair's two
    /// schedules that the thread count does not take (`pairing`, [`pairs_on`]).
    pub fn tasks_on(&self, threads: usize) -> u32 {
        let runs = match split_pairing(self.pairing) {
            (PAIRED, g) => pairs_on(threads, g),
            (UNPAIRED, g) => !pairs_on(threads, g),
            _ => true,
        };
        if runs {
            self.num_tasks
        } else {
            0
        }
    }
}

/// `struct BundleLayer` (8 bytes): `ops[firstOp .. firstOp + numOps]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleLayer {
    /// `firstOp`.
    pub first_op: u32,
    /// `numOps`.
    pub num_ops: u32,
}

/// `struct BundleConfig` (176 bytes): Glow's 48 bytes, then bundlec's extension.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BundleConfig {
    /// `constantWeightVarsMemSize`: bytes of the constant area.
    pub constant_weight_vars_mem_size: u64,
    /// `mutableWeightVarsMemSize`: bytes of the mutable area.
    pub mutable_weight_vars_mem_size: u64,
    /// `activationsMemSize`: bytes of the activation area.
    pub activations_mem_size: u64,
    /// `alignment`: of every area and tensor (64).
    pub alignment: u64,
    /// `numSymbols`.
    pub num_symbols: u64,
    /// `symbolTable`: `numSymbols` entries.
    pub symbol_table: *const SymbolTableEntry,
    /// `magic`: [`MAGIC`].
    pub magic: u64,
    /// `version`: [`VERSION`].
    pub version: u32,
    /// `flags`: [`FLAG_IO_IN_ACTIVATIONS`] or 0 (other bits are rejected).
    pub flags: u32,
    /// `weightsChecksum`: FNV-1a 64 of the whole `.weights` image.
    pub weights_checksum: u64,
    /// `tensors`: `numSymbols` entries.
    pub tensors: *const BundleTensorDesc,
    /// `numInputs`.
    pub num_inputs: u64,
    /// `numOutputs`.
    pub num_outputs: u64,
    /// `numOps`.
    pub num_ops: u64,
    /// `ops`: in schedule order, sorted by layer.
    pub ops: *const BundleOp,
    /// `numLayers`.
    pub num_layers: u64,
    /// `layers`.
    pub layers: *const BundleLayer,
    /// `numNpuSegments`: entries of `npuSegments` (0 for a CPU-only bundle).
    pub num_npu_segments: u64,
    /// `npuSegments`: sorted by `firstLayer`; NULL when there are none.
    pub npu_segments: *const NpuSegment,
    /// `modelName`: NAME, NUL-terminated.
    pub model_name: *const c_char,
    /// `cpuFeatures`: the ISA features the kernels need, as [`crate::cpu`] bits (0: the target's baseline).
    pub cpu_features: u64,
    /// `fastOps`: a fat bundle's second op table (`numOps` entries, NULL in other bundles): the same ops with
    /// the FAST kernel set's functions, run instead of `ops` where the CPU has `fastCpuFeatures`.
    pub fast_ops: *const BundleOp,
    /// `fastCpuFeatures`: the features `fastOps`' kernels need ([`crate::cpu`] bits; 0 without `fastOps`).
    pub fast_cpu_features: u64,
}

/// `struct NpuCopy` (32 bytes): one copy between a tensor's area and a segment's fused `in` or
/// `out` staging buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpuCopy {
    /// `area`: see [`Area`] (a copy-out may not target the constant area).
    pub area: u32,
    /// `reserved`: 0 (checked).
    pub reserved: u32,
    /// `offset`: byte offset in that area.
    pub offset: u64,
    /// `size`: bytes.
    pub size: u64,
    /// `fusedOffset`: byte offset in the fused `in` (copy-in) or `out` (copy-out) staging buffer.
    pub fused_offset: u64,
}

/// `struct NpuSegment` (152 bytes): a part of the model compiled to an NPU transaction, replacing
/// the BSP layers `firstLayer .. firstLayer + numLayers` (whose ops are its CPU fallback).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NpuSegment {
    /// `name`: e.g. `"npu0"`, NUL-terminated, unique.
    pub name: *const c_char,
    /// `txn`: the transaction binary (`docs/npu-transaction-format.md`).
    pub txn: *const u8,
    /// `txnSize`: bytes of `txn` (at least the 16-byte container header, a multiple of 4).
    pub txn_size: u64,
    /// `firstLayer`: first BSP layer the segment replaces.
    pub first_layer: u32,
    /// `numLayers`: layers replaced (`>= 1`).
    pub num_layers: u32,
    /// `inOffset`: fused `in` staging buffer, activation area.
    pub in_offset: u64,
    /// `inSize`.
    pub in_size: u64,
    /// `outOffset`: fused `out` staging buffer, activation area.
    pub out_offset: u64,
    /// `outSize`.
    pub out_size: u64,
    /// `scratchOffset`: the segment's internal tensors, activation area.
    pub scratch_offset: u64,
    /// `scratchSize`.
    pub scratch_size: u64,
    /// `constOffset`: NPU-layout weights, constant area.
    pub const_offset: u64,
    /// `constSize`.
    pub const_size: u64,
    /// `paramsOffset`: kernel parameter blocks (`super_instr`), constant area.
    pub params_offset: u64,
    /// `paramsSize`.
    pub params_size: u64,
    /// `numCopyIn`.
    pub num_copy_in: u32,
    /// `numCopyOut`.
    pub num_copy_out: u32,
    /// `copies`: `numCopyIn` copy-ins (area → `in`), then `numCopyOut` copy-outs (`out` → area).
    pub copies: *const NpuCopy,
    /// `estCycles`: the compiler's estimate: instruction, data, compute.
    pub est_cycles: [u64; 3],
}

// SAFETY (all five pairs below): these tables are read-only by contract — the compiler emits them
// as constant data and neither the runtime nor the kernels write them — so sharing them between
// threads is sound. Without these impls a Rust `static` of the tables could not be declared.
unsafe impl Sync for SymbolTableEntry {}
unsafe impl Send for SymbolTableEntry {}
unsafe impl Sync for BundleOp {}
unsafe impl Send for BundleOp {}
unsafe impl Sync for BundleConfig {}
unsafe impl Send for BundleConfig {}
unsafe impl Sync for NpuSegment {}
unsafe impl Send for NpuSegment {}

const _: () = assert!(size_of::<SymbolTableEntry>() == 32);
const _: () = assert!(offset_of!(SymbolTableEntry, offset) == 8);
const _: () = assert!(offset_of!(SymbolTableEntry, size) == 16);
const _: () = assert!(offset_of!(SymbolTableEntry, kind) == 24);
const _: () = assert!(size_of::<BundleTensorDesc>() == 88);
const _: () = assert!(offset_of!(BundleTensorDesc, dims) == 16);
const _: () = assert!(offset_of!(BundleTensorDesc, size_bytes) == 80);
const _: () = assert!(size_of::<BundleArg>() == 24);
const _: () = assert!(offset_of!(BundleArg, offset) == 8);
const _: () = assert!(offset_of!(BundleArg, size) == 16);
const _: () = assert!(size_of::<BundleOp>() == 40);
const _: () = assert!(offset_of!(BundleOp, name) == 8);
const _: () = assert!(offset_of!(BundleOp, num_tasks) == 16);
const _: () = assert!(offset_of!(BundleOp, num_args) == 20);
const _: () = assert!(offset_of!(BundleOp, args) == 24);
const _: () = assert!(offset_of!(BundleOp, layer) == 32);
const _: () = assert!(size_of::<BundleLayer>() == 8);
const _: () = assert!(size_of::<BundleConfig>() == 176);
const _: () = assert!(offset_of!(BundleConfig, symbol_table) == 40);
const _: () = assert!(offset_of!(BundleConfig, magic) == 48);
const _: () = assert!(offset_of!(BundleConfig, version) == 56);
const _: () = assert!(offset_of!(BundleConfig, flags) == 60);
const _: () = assert!(offset_of!(BundleConfig, weights_checksum) == 64);
const _: () = assert!(offset_of!(BundleConfig, tensors) == 72);
const _: () = assert!(offset_of!(BundleConfig, num_inputs) == 80);
const _: () = assert!(offset_of!(BundleConfig, num_outputs) == 88);
const _: () = assert!(offset_of!(BundleConfig, num_ops) == 96);
const _: () = assert!(offset_of!(BundleConfig, ops) == 104);
const _: () = assert!(offset_of!(BundleConfig, num_layers) == 112);
const _: () = assert!(offset_of!(BundleConfig, layers) == 120);
const _: () = assert!(offset_of!(BundleConfig, num_npu_segments) == 128);
const _: () = assert!(offset_of!(BundleConfig, npu_segments) == 136);
const _: () = assert!(offset_of!(BundleConfig, model_name) == 144);
const _: () = assert!(offset_of!(BundleConfig, cpu_features) == 152);
const _: () = assert!(offset_of!(BundleConfig, fast_ops) == 160);
const _: () = assert!(offset_of!(BundleConfig, fast_cpu_features) == 168);
const _: () = assert!(size_of::<Option<BundleOpFn>>() == 8);
const _: () = assert!(size_of::<NpuCopy>() == 32);
const _: () = assert!(offset_of!(NpuCopy, reserved) == 4);
const _: () = assert!(offset_of!(NpuCopy, offset) == 8);
const _: () = assert!(offset_of!(NpuCopy, size) == 16);
const _: () = assert!(offset_of!(NpuCopy, fused_offset) == 24);
const _: () = assert!(size_of::<NpuSegment>() == 152);
const _: () = assert!(offset_of!(NpuSegment, txn) == 8);
const _: () = assert!(offset_of!(NpuSegment, txn_size) == 16);
const _: () = assert!(offset_of!(NpuSegment, first_layer) == 24);
const _: () = assert!(offset_of!(NpuSegment, num_layers) == 28);
const _: () = assert!(offset_of!(NpuSegment, in_offset) == 32);
const _: () = assert!(offset_of!(NpuSegment, in_size) == 40);
const _: () = assert!(offset_of!(NpuSegment, out_offset) == 48);
const _: () = assert!(offset_of!(NpuSegment, out_size) == 56);
const _: () = assert!(offset_of!(NpuSegment, scratch_offset) == 64);
const _: () = assert!(offset_of!(NpuSegment, scratch_size) == 72);
const _: () = assert!(offset_of!(NpuSegment, const_offset) == 80);
const _: () = assert!(offset_of!(NpuSegment, const_size) == 88);
const _: () = assert!(offset_of!(NpuSegment, params_offset) == 96);
const _: () = assert!(offset_of!(NpuSegment, params_size) == 104);
const _: () = assert!(offset_of!(NpuSegment, num_copy_in) == 112);
const _: () = assert!(offset_of!(NpuSegment, num_copy_out) == 116);
const _: () = assert!(offset_of!(NpuSegment, copies) == 120);
const _: () = assert!(offset_of!(NpuSegment, est_cycles) == 128);

/// Element type of a tensor: the ONNX `TensorProto.DataType` codes the format allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DType {
    /// 1: `float`.
    F32 = 1,
    /// 2: `uint8`.
    U8 = 2,
    /// 3: `int8`.
    I8 = 3,
    /// 6: `int32`.
    I32 = 6,
    /// 7: `int64`.
    I64 = 7,
    /// 9: `bool`, one byte per element.
    Bool = 9,
}

impl DType {
    /// The dtype of an ONNX code, `None` for codes the format does not allow.
    pub const fn from_code(code: u32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            _ => return None,
        })
    }

    /// The ONNX code.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::I64 => 8,
        }
    }

    /// Short name: `f32`, `u8`, `i8`, `i32`, `i64`, `bool`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// What a symbol is (`BundleTensorDesc.role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// 0: a constant, in the constant area.
    Constant,
    /// 1: a model input, in the mutable area.
    Input,
    /// 2: a model output, in the mutable area.
    Output,
}

impl Role {
    /// The role of a code, `None` for unknown codes.
    pub const fn from_code(code: u32) -> Option<Role> {
        match code {
            0 => Some(Role::Constant),
            1 => Some(Role::Input),
            2 => Some(Role::Output),
            _ => None,
        }
    }

    /// The area holding tensors of this role in a bundle without `--inputs-in-activations` (see
    /// [`ConfigView::area_of`](crate::ConfigView::area_of)).
    pub const fn area(self) -> Area {
        match self {
            Role::Constant => Area::Constant,
            Role::Input | Role::Output => Area::Mutable,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Constant => "a constant",
            Role::Input => "an input",
            Role::Output => "an output",
        })
    }
}

/// One of the three memory areas (`BundleArg.area`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Area {
    /// 0: constants, initialised from `.weights`.
    Constant = 0,
    /// 1: inputs then outputs.
    Mutable = 1,
    /// 2: scratch, never initialised.
    Activations = 2,
}

impl Area {
    /// The area of a code, `None` for unknown codes.
    pub const fn from_code(code: u32) -> Option<Area> {
        match code {
            0 => Some(Area::Constant),
            1 => Some(Area::Mutable),
            2 => Some(Area::Activations),
            _ => None,
        }
    }
}
