//! [`ConfigView`]: a `NAME_config` checked once against the format contract, and [`TensorInfo`].
//!
//! [`ConfigView::new`] is the single place that trusts raw pointers: under its safety contract (each
//! pointer covers the declared entries, strings are NUL-terminated, all of it lives for `'a` and never
//! changes) it checks everything else — magic, version, flags, limits, names, dtype/rank/role of every
//! symbol, every offset and size against its area and `alignment`, every op argument, and that the
//! layers cover the op table contiguously in order. Afterwards the accessors hand out slices and
//! strings without re-checking; the rest of the crate relies on these invariants:
//!
//! - symbol `i` fits in its area: `offset % alignment == 0`, `offset + sizeBytes <= area size`,
//!   `size == product(dims)`, `sizeBytes == size * dtype size`; inputs, outputs, constants in order;
//! - every op has a kernel, `numTasks >= 1`, and each argument lies inside its area;
//! - `layers[k]` is `ops[firstOp..firstOp + numOps]`, the ranges tile the op table in order, and
//!   every op in layer `k` has `layer == k`;
//! - NPU segments (`segments.rs`) are sorted by `firstLayer`, replace disjoint non-empty runs of
//!   layers, have a transaction of at least the container header, staging ranges inside the
//!   activation area (pairwise disjoint), constant and parameter ranges inside the constant area,
//!   and copies whose area range and fused range are inside their buffers.

use core::ops::Range;

use super::{
    Area, BundleArg, BundleConfig, BundleLayer, BundleOp, DType, Role, FLAG_IO_IN_ACTIVATIONS,
    MAGIC, MAX_RANK, VERSION,
};
use crate::error::{bad, Error, FieldPath, Why};
use crate::Result;

mod checks;
mod segments;
mod table;

pub use segments::{ByteRange, NpuCopyInfo, NpuSegmentInfo};
use table::{read_name, validated_str};
pub use table::{ConfigView, MAX_ALIGNMENT};

/// One symbol of a validated config: name, dtype, shape and placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    /// Index in the symbol table.
    pub index: usize,
    /// ONNX tensor name.
    pub name: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Input, output or constant.
    pub role: Role,
    /// Dimensions (`rank` entries; empty for a scalar).
    pub shape: &'a [u64],
    /// Number of elements (`product(shape)`).
    pub elements: usize,
    /// Size in bytes.
    pub size_bytes: usize,
    /// Byte offset in its area ([`Role::area`]).
    pub offset: usize,
}

impl<'a> TensorInfo<'a> {
    /// Byte range of the tensor in its area.
    pub fn byte_range(&self) -> Range<usize> {
        // Validated: offset + size_bytes <= area size <= isize::MAX.
        self.offset..self.offset + self.size_bytes
    }
}

impl<'a> ConfigView<'a> {
    /// Checks `config` against the format contract and returns a view of it.
    ///
    /// # Safety
    /// Every non-NULL pointer reachable from `config` (symbol table, tensor descriptors, op table, each
    /// op's argument table and name, symbol names, layer table, NPU segment table and each segment's
    /// name, transaction (`txnSize` bytes) and copy table, model name) must point to at least the
    /// number of entries the config declares for it (strings: a NUL-terminated string), and all of it
    /// must stay valid and unmodified for `'a`. That is what the compiler's `NAME_config` guarantees;
    /// everything else is checked and reported as an [`Error`].
    pub unsafe fn new(config: &'a BundleConfig) -> Result<ConfigView<'a>> {
        if config.magic != MAGIC {
            return Err(Error::BadMagic {
                found: config.magic,
            });
        }
        if config.version != VERSION {
            return Err(Error::BadVersion {
                found: config.version,
                supported: VERSION,
            });
        }
        let alignment = config.alignment;
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(bad(
                FieldPath::config("alignment"),
                alignment,
                Why::NotPowerOfTwo,
            ));
        }
        if alignment > MAX_ALIGNMENT {
            let why = Why::TooLarge { max: MAX_ALIGNMENT };
            return Err(bad(FieldPath::config("alignment"), alignment, why));
        }
        let area_sizes = [
            checks::area_size(
                config.constant_weight_vars_mem_size,
                "constantWeightVarsMemSize",
            )?,
            checks::area_size(
                config.mutable_weight_vars_mem_size,
                "mutableWeightVarsMemSize",
            )?,
            checks::area_size(config.activations_mem_size, "activationsMemSize")?,
        ];
        if config.flags & !FLAG_IO_IN_ACTIVATIONS != 0 {
            // Version 3 defines flag 1 only; one this runtime does not know may change the layout.
            let field = FieldPath::config("flags");
            return Err(bad(field, config.flags.into(), Why::Unsupported));
        }
        // SAFETY (the five tables and the name): forwarded from this function's contract.
        let symbols = unsafe {
            checks::table(
                config.symbol_table,
                config.num_symbols,
                "numSymbols",
                "symbolTable",
            )
        }?;
        let tensors =
            unsafe { checks::table(config.tensors, config.num_symbols, "numSymbols", "tensors") }?;
        let ops = unsafe { checks::table(config.ops, config.num_ops, "numOps", "ops") }?;
        let layers =
            unsafe { checks::table(config.layers, config.num_layers, "numLayers", "layers") }?;
        let npu_segments = unsafe {
            checks::table(
                config.npu_segments,
                config.num_npu_segments,
                "numNpuSegments",
                "npuSegments",
            )
        }?;
        let model_name = unsafe { read_name(config.model_name, FieldPath::config("modelName")) }?;

        let num_symbols = symbols.len() as u64;
        if config.num_inputs > num_symbols {
            let why = Why::TooLarge { max: num_symbols };
            return Err(bad(FieldPath::config("numInputs"), config.num_inputs, why));
        }
        if config.num_outputs > num_symbols - config.num_inputs {
            let why = Why::TooLarge {
                max: num_symbols - config.num_inputs,
            };
            return Err(bad(
                FieldPath::config("numOutputs"),
                config.num_outputs,
                why,
            ));
        }
        let mut view = ConfigView {
            raw: config,
            symbols,
            tensors,
            ops,
            layers,
            npu_segments,
            model_name,
            area_sizes,
            num_inputs: config.num_inputs as usize,
            num_outputs: config.num_outputs as usize,
            widest_op: None,
            fast: false,
        };
        for i in 0..symbols.len() {
            // SAFETY: forwarded from this function's contract.
            unsafe { checks::symbol(&view, i) }?;
        }
        checks::unique_symbol_names(&view)?;
        for i in 0..ops.len() {
            // SAFETY: forwarded from this function's contract.
            let num_args = unsafe { checks::op(&view, i) }?;
            if view.widest_op.is_none_or(|(_, n)| num_args > n) {
                view.widest_op = Some((i, num_args));
            }
        }
        checks::unique_op_names(&view)?;
        checks::layers(&view)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { segments::check_all(&view) }?;
        if !config.fast_ops.is_null() {
            // SAFETY: forwarded from this function's contract (`fastOps` has `numOps` entries).
            let fast =
                unsafe { checks::table(config.fast_ops, config.num_ops, "numOps", "fastOps") }?;
            checks::fast_ops(&view, fast)?;
            if crate::cpu::missing(config.fast_cpu_features) == 0 {
                view.ops = fast;
                view.fast = true;
            }
        } else if config.fast_cpu_features != 0 {
            let field = FieldPath::config("fastCpuFeatures");
            let why = Why::Mismatch { expected: 0 };
            return Err(bad(field, config.fast_cpu_features, why));
        }
        Ok(view)
    }

    /// Whether [`ConfigView::ops`] is a fat bundle's `fastOps` table: the bundle has one and this CPU has the
    /// features its kernels need (`fastCpuFeatures`). Then the engine runs the same kernel set as the
    /// exported entry function picks.
    pub fn fast_ops(&self) -> bool {
        self.fast
    }

    /// The raw config this view checked.
    pub fn raw(&self) -> &'a BundleConfig {
        self.raw
    }

    /// The model name (`modelName`).
    pub fn model_name(&self) -> &'a str {
        self.model_name
    }

    /// Whether inputs and outputs live in the activation area (`flags` bit [`FLAG_IO_IN_ACTIVATIONS`]).
    pub fn io_in_activations(&self) -> bool {
        self.raw.flags & FLAG_IO_IN_ACTIVATIONS != 0
    }

    /// The area holding tensors of `role`: constants in the constant area, inputs and outputs in the mutable
    /// area, or in the activation area when the bundle was compiled with `--inputs-in-activations`.
    pub fn area_of(&self, role: Role) -> Area {
        match role {
            Role::Constant => Area::Constant,
            _ if self.io_in_activations() => Area::Activations,
            _ => Area::Mutable,
        }
    }

    /// `alignment` of the areas and every tensor.
    pub fn alignment(&self) -> usize {
        self.raw.alignment as usize
    }

    /// Size in bytes of an area.
    pub fn area_size(&self, area: Area) -> usize {
        self.area_sizes[area as usize]
    }

    /// `weightsChecksum`.
    pub fn weights_checksum(&self) -> u64 {
        self.raw.weights_checksum
    }

    /// Number of symbols (inputs, outputs, constants).
    pub fn num_symbols(&self) -> usize {
        self.symbols.len()
    }

    /// Symbol indices of the inputs.
    pub fn input_range(&self) -> Range<usize> {
        0..self.num_inputs
    }

    /// Symbol indices of the outputs.
    pub fn output_range(&self) -> Range<usize> {
        self.num_inputs..self.num_inputs + self.num_outputs
    }

    /// Symbol indices of the constants.
    pub fn constant_range(&self) -> Range<usize> {
        self.num_inputs + self.num_outputs..self.symbols.len()
    }

    /// Symbol `index`, or `None` past the table.
    pub fn tensor(&self, index: usize) -> Option<TensorInfo<'a>> {
        let sym = self.symbols.get(index)?;
        let desc = self.tensors.get(index)?;
        // Validated in `new`: known dtype and role, rank <= 8, sizes consistent and in range.
        let dtype = DType::from_code(desc.dtype)?;
        let role = Role::from_code(desc.role)?;
        Some(TensorInfo {
            index,
            name: self.symbol_name(index),
            dtype,
            role,
            shape: &desc.dims[..(desc.rank as usize).min(MAX_RANK)],
            elements: sym.size as usize,
            size_bytes: desc.size_bytes as usize,
            offset: sym.offset as usize,
        })
    }

    /// The symbol called `name`, if any (the first one; names are unique when `alloc` is on).
    pub fn find(&self, name: &str) -> Option<TensorInfo<'a>> {
        (0..self.symbols.len())
            .find(|&i| self.symbol_name(i) == name)
            .and_then(|i| self.tensor(i))
    }

    /// Name of symbol `index` (`""` past the table).
    pub fn symbol_name(&self, index: usize) -> &'a str {
        match self.symbols.get(index) {
            // SAFETY: `new` checked that this pointer is a NUL-terminated UTF-8 string, valid for 'a.
            Some(sym) => unsafe { validated_str(sym.name) },
            None => "",
        }
    }

    /// The op table, in schedule order.
    /// (A fat bundle's `fastOps` where this CPU can run them: [`ConfigView::fast_ops`].)
    pub fn ops(&self) -> &'a [BundleOp] {
        self.ops
    }

    /// Name of op `index` (`""` past the table).
    pub fn op_name(&self, index: usize) -> &'a str {
        match self.ops.get(index) {
            // SAFETY: `new` checked that this pointer is a NUL-terminated UTF-8 string, valid for 'a.
            Some(op) => unsafe { validated_str(op.name) },
            None => "",
        }
    }

    /// Argument table of op `index` (empty past the table).
    pub fn op_args(&self, index: usize) -> &'a [BundleArg] {
        match self.ops.get(index) {
            // SAFETY: `new` checked pointer, alignment and count of this table, valid for 'a.
            Some(op) if op.num_args > 0 => unsafe {
                core::slice::from_raw_parts(op.args, op.num_args as usize)
            },
            _ => &[],
        }
    }

    /// The BSP layers.
    pub fn layers(&self) -> &'a [BundleLayer] {
        self.layers
    }

    /// The op with the most arguments and that count (`None` without ops).
    pub fn widest_op(&self) -> Option<(usize, usize)> {
        self.widest_op
    }
}
