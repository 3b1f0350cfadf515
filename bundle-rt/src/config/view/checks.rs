//! The individual checks [`ConfigView::new`] runs, one function per table.
//!
//! Each check returns the first violation as [`Error::BadConfig`] with the exact field path, so a
//! compiler bug is located by the message alone. Checks run in table order: config fields, symbols,
//! symbol-name uniqueness, ops and their arguments, op-name uniqueness, layers; then the NPU
//! segment table (`segments.rs`).

use super::table::{read_name, ConfigView, MAX_CONFIG_ARGS, MAX_TABLE_ENTRIES};
use crate::config::{Area, BundleOp, DType, Role, MAX_RANK};
use crate::error::{bad, Error, FieldPath, Why};
use crate::Result;

/// An area size from the config: must fit `isize` (the largest allocation Rust can describe).
pub(super) fn area_size(value: u64, field: &'static str) -> Result<usize> {
    match usize::try_from(value) {
        Ok(v) if v <= isize::MAX as usize => Ok(v),
        _ => {
            let why = Why::TooLarge {
                max: isize::MAX as u64,
            };
            Err(bad(FieldPath::config(field), value, why))
        }
    }
}

/// A table of `count` entries at `ptr`: count within limits, pointer non-NULL and aligned.
///
/// # Safety
/// A non-NULL `ptr` must point to `count` valid `T` that live for `'a`.
pub(super) unsafe fn table<'a, T>(
    ptr: *const T,
    count: u64,
    count_field: &'static str,
    ptr_field: &'static str,
) -> Result<&'a [T]> {
    if count > MAX_TABLE_ENTRIES {
        let why = Why::TooLarge {
            max: MAX_TABLE_ENTRIES,
        };
        return Err(bad(FieldPath::config(count_field), count, why));
    }
    if count == 0 {
        return Ok(&[]);
    }
    check_ptr(ptr, FieldPath::config(ptr_field))?;
    // SAFETY: non-NULL and aligned (checked); the caller guarantees `count` entries for 'a; the
    // byte size is at most 2^24 * size_of::<T>(), far below isize::MAX.
    Ok(unsafe { core::slice::from_raw_parts(ptr, count as usize) })
}

/// A table pointer: non-NULL and aligned for `T`.
pub(super) fn check_ptr<T>(ptr: *const T, field: FieldPath) -> Result<()> {
    if ptr.is_null() {
        return Err(bad(field, 0, Why::Null));
    }
    if !ptr.is_aligned() {
        let align = core::mem::align_of::<T>() as u64;
        return Err(bad(field, ptr as usize as u64, Why::Misaligned { align }));
    }
    Ok(())
}

/// Checks that `[offset, offset + size)` is aligned and inside an area of `limit` bytes.
fn check_range(
    view: &ConfigView<'_>,
    offset: u64,
    size: u64,
    limit: usize,
    at: FieldPath,
) -> Result<()> {
    let align = view.raw.alignment;
    if !offset.is_multiple_of(align) {
        return Err(bad(at, offset, Why::Misaligned { align }));
    }
    let end = offset
        .checked_add(size)
        .ok_or(bad(at, offset, Why::Overflow))?;
    if end > limit as u64 {
        let why = Why::OutOfRange {
            end,
            limit: limit as u64,
        };
        return Err(bad(at, offset, why));
    }
    Ok(())
}

/// Symbol `i` and its tensor descriptor.
///
/// # Safety
/// As for [`ConfigView::new`]: the symbol's name pointer, if non-NULL, is a NUL-terminated string.
pub(super) unsafe fn symbol(view: &ConfigView<'_>, i: usize) -> Result<()> {
    let sym = &view.symbols[i];
    let desc = &view.tensors[i];
    let sym_at = |field| FieldPath::entry("symbolTable", i, field);
    let desc_at = |field| FieldPath::entry("tensors", i, field);
    // SAFETY: forwarded from the caller.
    unsafe { read_name(sym.name, sym_at("name")) }?;

    let dtype = DType::from_code(desc.dtype).ok_or(bad(
        desc_at("dtype"),
        desc.dtype.into(),
        Why::UnknownCode,
    ))?;
    let rank = desc.rank as usize;
    if rank > MAX_RANK {
        let why = Why::TooLarge {
            max: MAX_RANK as u64,
        };
        return Err(bad(desc_at("rank"), desc.rank.into(), why));
    }
    if let Some(&d) = desc.dims[rank..].iter().find(|&&d| d != 0) {
        return Err(bad(desc_at("dims"), d, Why::Mismatch { expected: 0 }));
    }
    let role = Role::from_code(desc.role).ok_or(bad(
        desc_at("role"),
        desc.role.into(),
        Why::UnknownCode,
    ))?;
    let expected_role = if i < view.num_inputs {
        Role::Input
    } else if i < view.num_inputs + view.num_outputs {
        Role::Output
    } else {
        Role::Constant
    };
    if role != expected_role {
        let why = Why::Mismatch {
            expected: expected_role as u64,
        };
        return Err(bad(desc_at("role"), desc.role.into(), why));
    }
    let kind = u8::from(role != Role::Constant);
    if sym.kind != kind {
        let why = Why::Mismatch {
            expected: kind.into(),
        };
        return Err(bad(sym_at("kind"), sym.kind.into(), why));
    }

    let elements = desc.dims[..rank]
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or(bad(desc_at("dims"), 0, Why::Overflow))?;
    if sym.size != elements {
        return Err(bad(
            sym_at("size"),
            sym.size,
            Why::Mismatch { expected: elements },
        ));
    }
    let bytes = elements.checked_mul(dtype.size() as u64).ok_or(bad(
        desc_at("sizeBytes"),
        desc.size_bytes,
        Why::Overflow,
    ))?;
    if desc.size_bytes != bytes {
        let why = Why::Mismatch { expected: bytes };
        return Err(bad(desc_at("sizeBytes"), desc.size_bytes, why));
    }
    let limit = view.area_size(view.area_of(role));
    check_range(view, sym.offset, bytes, limit, sym_at("offset"))
}

/// A fat bundle's `fastOps` (already a `numOps`-entry table): each entry is the checked op of `ops` at the same
/// index with another non-NULL function — the same name, task count, argument table and layer (pointer-equal, as
/// the compiler shares them), so everything checked for `ops` holds for it.
pub(super) fn fast_ops(view: &ConfigView<'_>, fast: &[BundleOp]) -> Result<()> {
    for (i, (f, b)) in fast.iter().zip(view.ops).enumerate() {
        let at = |field| FieldPath::entry("fastOps", i, field);
        if f.func.is_none() {
            return Err(bad(at("fn"), 0, Why::Null));
        }
        let same = |field, found: u64, expected: u64| {
            if found == expected {
                Ok(())
            } else {
                Err(bad(at(field), found, Why::Mismatch { expected }))
            }
        };
        same("name", f.name as u64, b.name as u64)?;
        same("numTasks", f.num_tasks.into(), b.num_tasks.into())?;
        same("numArgs", f.num_args.into(), b.num_args.into())?;
        same("args", f.args as u64, b.args as u64)?;
        same("layer", f.layer.into(), b.layer.into())?;
        same("pairing", f.pairing.into(), b.pairing.into())?;
    }
    Ok(())
}

/// Op `i` and its arguments; returns its argument count.
///
/// # Safety
/// As for [`ConfigView::new`]: the op's name and argument pointers cover what it declares.
pub(super) unsafe fn op(view: &ConfigView<'_>, i: usize) -> Result<usize> {
    let op = &view.ops[i];
    let at = |field| FieldPath::entry("ops", i, field);
    if op.func.is_none() {
        return Err(bad(at("fn"), 0, Why::Null));
    }
    // SAFETY: forwarded from the caller.
    unsafe { read_name(op.name, at("name")) }?;
    if op.num_tasks == 0 {
        return Err(bad(at("numTasks"), 0, Why::Zero));
    }
    // `pairing`: 0, or a pair's op (whose tasks are its groups) or one of its kernels, of at least 1 group.
    let (kind, groups) = super::super::split_pairing(op.pairing);
    let valid = match kind {
        0 => groups == 0,
        super::super::PAIRED => groups >= 1 && groups == op.num_tasks,
        super::super::UNPAIRED => groups >= 1,
        _ => false,
    };
    if !valid {
        return Err(bad(at("pairing"), op.pairing.into(), Why::UnknownCode));
    }
    if u64::from(op.num_args) > MAX_CONFIG_ARGS {
        let why = Why::TooLarge {
            max: MAX_CONFIG_ARGS,
        };
        return Err(bad(at("numArgs"), op.num_args.into(), why));
    }
    if op.layer as usize >= view.layers.len() {
        let why = Why::OutOfRange {
            end: u64::from(op.layer) + 1,
            limit: view.layers.len() as u64,
        };
        return Err(bad(at("layer"), op.layer.into(), why));
    }
    if op.num_args > 0 {
        check_ptr(op.args, at("args"))?;
    }
    for (j, arg) in view.op_args(i).iter().enumerate() {
        let arg_at = |field| FieldPath::nested("ops", i, "args", j, field);
        let area = Area::from_code(arg.area).ok_or(bad(
            arg_at("area"),
            arg.area.into(),
            Why::UnknownCode,
        ))?;
        check_range(
            view,
            arg.offset,
            arg.size,
            view.area_size(area),
            arg_at("offset"),
        )?;
    }
    Ok(op.num_args as usize)
}

/// `layers[k]` must start where `layers[k-1]` ended, end inside the op table, hold only ops whose
/// `layer` is `k`, and the last layer must end at `numOps`.
pub(super) fn layers(view: &ConfigView<'_>) -> Result<()> {
    let num_ops = view.ops.len();
    let mut next = 0usize;
    for (k, layer) in view.layers.iter().enumerate() {
        let at = |field| FieldPath::entry("layers", k, field);
        if layer.first_op as usize != next {
            let why = Why::Mismatch {
                expected: next as u64,
            };
            return Err(bad(at("firstOp"), layer.first_op.into(), why));
        }
        let end = next + layer.num_ops as usize;
        if end > num_ops {
            let why = Why::OutOfRange {
                end: end as u64,
                limit: num_ops as u64,
            };
            return Err(bad(at("numOps"), layer.num_ops.into(), why));
        }
        for j in next..end {
            if view.ops[j].layer as usize != k {
                let field = FieldPath::entry("ops", j, "layer");
                let why = Why::Mismatch { expected: k as u64 };
                return Err(bad(field, view.ops[j].layer.into(), why));
            }
        }
        next = end;
    }
    if next != num_ops {
        // Ops after the last layer: ops[next] names a layer that does not list it.
        return Err(match view.layers.len().checked_sub(1) {
            Some(last) => {
                let why = Why::Mismatch {
                    expected: (num_ops - view.layers[last].first_op as usize) as u64,
                };
                bad(
                    FieldPath::entry("layers", last, "numOps"),
                    view.layers[last].num_ops.into(),
                    why,
                )
            }
            None => bad(FieldPath::config("numLayers"), 0, Why::Zero),
        });
    }
    Ok(())
}

/// Symbol names must be unique. With `alloc`, all of them are checked (sorting, O(n log n));
/// without, only inputs and outputs (the names callers look up), pairwise.
pub(super) fn unique_symbol_names(view: &ConfigView<'_>) -> Result<()> {
    #[cfg(feature = "alloc")]
    let count = view.symbols.len();
    #[cfg(not(feature = "alloc"))]
    let count = view.num_inputs + view.num_outputs;
    unique(count, "symbolTable", |i| view.symbol_name(i))
}

/// Op names must be unique (checked with `alloc` only; they name ops in errors and profiles).
pub(super) fn unique_op_names(view: &ConfigView<'_>) -> Result<()> {
    #[cfg(feature = "alloc")]
    return unique(view.ops.len(), "ops", |i| view.op_name(i));
    #[cfg(not(feature = "alloc"))]
    {
        let _ = view;
        Ok(())
    }
}

/// The first of `count` names (of entries of `table`) that repeats an earlier one is an error.
pub(super) fn unique<'a>(
    count: usize,
    table: &'static str,
    name: impl Fn(usize) -> &'a str,
) -> Result<()> {
    let dup = |first: usize, second: usize| -> Error {
        let why = Why::Duplicate {
            first: first as u64,
        };
        bad(FieldPath::entry(table, second, "name"), 0, why)
    };
    #[cfg(feature = "alloc")]
    {
        let mut order: alloc::vec::Vec<usize> = (0..count).collect();
        order.sort_by(|&a, &b| name(a).cmp(name(b)).then(a.cmp(&b)));
        for pair in order.windows(2) {
            if name(pair[0]) == name(pair[1]) {
                return Err(dup(pair[0], pair[1]));
            }
        }
    }
    #[cfg(not(feature = "alloc"))]
    for b in 0..count {
        if let Some(a) = (0..b).find(|&a| name(a) == name(b)) {
            return Err(dup(a, b));
        }
    }
    Ok(())
}
