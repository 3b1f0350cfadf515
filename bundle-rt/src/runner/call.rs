//! What building a recipe's runs makes: the argument slots (bound buffers, instruction buffers, constants) and
//! the calls (a CPU op, an NPU segment run, a copy), with the error for an instruction buffer misused. A leaf
//! `build.rs` and `npu_runs.rs` share.

use super::json::entry_err;
use super::recipe::Run;
use crate::buf::AreaBuf;
use crate::bundle::Bundle;
use crate::config::{Area, BundleOpFn};
use crate::error::{Error, RecipePath, RecipeWhy, RunList};
use alloc::vec::Vec;

/// What backs one recipe buffer while the runner lives.
pub(super) enum Slot {
    /// A `weight` buffer: the bundle's constant area (read-only).
    Weights,
    /// A `weight` buffer holding NPU segment `segment`'s instruction buffer (read-only; only npu
    /// runs of that segment name it, as argidx 1).
    Instr {
        data: AreaBuf<'static>,
        segment: usize,
    },
    /// An internal buffer, owned and zeroed.
    Internal(AreaBuf<'static>),
    /// An input: the runner's copy of the bound bytes (symbol `tensor`).
    Input {
        data: AreaBuf<'static>,
        tensor: usize,
        bound: bool,
    },
    /// An output: computed into `data`, copied to `target` (`data`'s length) at the end of a run.
    Output {
        data: AreaBuf<'static>,
        tensor: usize,
        target: Option<core::ptr::NonNull<u8>>,
    },
}

impl Slot {
    /// The buffer's size in bytes.
    pub(super) fn len(&self, bundle: &Bundle<'_>) -> usize {
        match self {
            Slot::Weights => bundle.area_size(Area::Constant),
            Slot::Internal(data)
            | Slot::Instr { data, .. }
            | Slot::Input { data, .. }
            | Slot::Output { data, .. } => data.bytes().len(),
        }
    }

    /// Whether it is a `weight` buffer (no run may write it).
    pub(super) fn read_only(&self) -> bool {
        matches!(self, Slot::Weights | Slot::Instr { .. })
    }
}

/// The error for argument `j` of run `r` naming an instruction buffer where it may not.
pub(super) fn instr_misuse(r: usize, run: &Run, j: usize) -> Error {
    let at = RecipePath::run_item(r, RunList::Arguments, j, "name");
    let why = RecipeWhy::Instructions {
        why: "only argidx 1 of its segment's npu runs may name it",
    };
    entry_err(at, &run.name, why)
}

/// One argument of a call: `offset` bytes into the buffer of slot `slot`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ArgRef {
    pub(super) slot: usize,
    pub(super) offset: usize,
}

/// One run, resolved.
pub(super) enum Call {
    /// A cpu run of an op: its kernel, called for tasks `0..tasks` with `args` (argidx order).
    Op {
        func: BundleOpFn,
        tasks: u32,
        args: Vec<ArgRef>,
    },
    /// A `bundlert_copy` run: `src.len` bytes from `src` to `dst` (equal lengths, disjoint, `dst`
    /// not in `weights`).
    Copy { src: Region, dst: Region },
    /// An npu run: its segment's instruction buffer in slot `instr` (argidx 1), and `in`, `out`,
    /// `scratch`, `const`, `super_instr` (argidx 3..7; `out` and `scratch` disjoint from the
    /// others and not in a `weight` buffer).
    Npu { instr: usize, bufs: [Region; 5] },
}

/// `len` bytes at `offset` in the buffer of slot `slot` (inside it: checked when resolved).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Region {
    pub(super) slot: usize,
    pub(super) offset: usize,
    pub(super) len: usize,
}

impl Region {
    /// Whether both regions are non-empty and share a byte of the same buffer.
    pub(super) fn overlaps(&self, other: &Region) -> bool {
        self.slot == other.slot
            && self.len > 0
            && other.len > 0
            && self.offset < other.offset.saturating_add(other.len)
            && other.offset < self.offset.saturating_add(self.len)
    }
}
