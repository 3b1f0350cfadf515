//! Config validation: the fixture's config is accepted, and each broken field is rejected with an
//! error naming exactly that field and the reason.

use std::string::{String, ToString};
use std::vec;

use crate::config::{BundleArg, ConfigView, MAGIC};
use crate::fixture::Fixture;
use crate::{BundleConfig, DType, Error, Role, Why};

/// Validates a config built from `fx` after `edit`, expecting a `BadConfig` error; returns its
/// field path as text and reason.
fn reject(fx: &Fixture, edit: impl FnOnce(&mut BundleConfig)) -> (String, Why) {
    let mut cfg = fx.config();
    edit(&mut cfg);
    // SAFETY: `cfg` points into `fx`'s tables (or at NULL, which is checked).
    match unsafe { ConfigView::new(&cfg) } {
        Err(Error::BadConfig { field, why, .. }) => (field.to_string(), why),
        other => panic!("expected BadConfig, got {other:?}"),
    }
}

/// As [`reject`] for an edit of the fixture's tables.
fn reject_tables(edit: impl FnOnce(&mut Fixture)) -> (String, Why) {
    let mut fx = Fixture::small();
    edit(&mut fx);
    reject(&fx, |_| {})
}

fn at(path: &str, why: Why) -> (String, Why) {
    (path.to_string(), why)
}

#[test]
fn fixture_config_is_valid() {
    let fx = Fixture::small();
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    let view = unsafe { ConfigView::new(&cfg) }.expect("valid");
    assert_eq!(view.model_name(), "fixture");
    assert_eq!(view.input_range(), 0..1);
    assert_eq!(view.output_range(), 1..3);
    assert_eq!(view.constant_range(), 3..5);
    let y = view.find("y").expect("y");
    assert_eq!(
        (y.dtype, y.role, y.shape, y.offset),
        (DType::F32, Role::Output, &[2u64, 8][..], 64)
    );
    let steps = view.find("steps").expect("steps");
    assert_eq!(
        (steps.shape.len(), steps.elements, steps.size_bytes),
        (0, 1, 8)
    );
    assert_eq!(view.op_name(2), "sum_plus_one");
    assert_eq!(view.widest_op(), Some((0, 3)));
}

#[test]
fn header_fields() {
    let fx = Fixture::small();
    let check = |edit: fn(&mut BundleConfig)| {
        let mut cfg = fx.config();
        edit(&mut cfg);
        // SAFETY: points into `fx`.
        unsafe { ConfigView::new(&cfg) }.map(|_| ()).unwrap_err()
    };
    assert_eq!(
        check(|c| c.magic = 0x1234),
        Error::BadMagic { found: 0x1234 }
    );
    assert_eq!(
        check(|c| c.version = 1),
        Error::BadVersion {
            found: 1,
            supported: 5
        }
    );
    assert_eq!(MAGIC.to_le_bytes(), *b"BUNDLC1\0");
    assert_eq!(
        reject(&fx, |c| c.alignment = 48),
        at("BundleConfig.alignment", Why::NotPowerOfTwo)
    );
    assert_eq!(
        reject(&fx, |c| c.alignment = 0),
        at("BundleConfig.alignment", Why::NotPowerOfTwo)
    );
    assert_eq!(
        reject(&fx, |c| c.alignment = 1 << 20),
        at("BundleConfig.alignment", Why::TooLarge { max: 4096 })
    );
    assert_eq!(
        reject(&fx, |c| c.num_symbols = u64::MAX),
        at("BundleConfig.numSymbols", Why::TooLarge { max: 1 << 24 })
    );
    assert_eq!(
        reject(&fx, |c| c.symbol_table = std::ptr::null()),
        at("BundleConfig.symbolTable", Why::Null)
    );
    assert_eq!(
        reject(&fx, |c| c.tensors = std::ptr::null()),
        at("BundleConfig.tensors", Why::Null)
    );
    assert_eq!(
        reject(&fx, |c| c.layers = std::ptr::null()),
        at("BundleConfig.layers", Why::Null)
    );
    assert_eq!(
        reject(&fx, |c| c.model_name = std::ptr::null()),
        at("BundleConfig.modelName", Why::Null)
    );
    assert_eq!(
        reject(&fx, |c| c.num_inputs = 6),
        at("BundleConfig.numInputs", Why::TooLarge { max: 5 })
    );
    assert_eq!(
        reject(&fx, |c| c.num_outputs = 5),
        at("BundleConfig.numOutputs", Why::TooLarge { max: 4 })
    );
    assert_eq!(
        reject(&fx, |c| c.num_npu_segments = 1),
        at("BundleConfig.npuSegments", Why::Null)
    );
    assert_eq!(
        reject(&fx, |c| c.num_npu_segments = 1 << 30),
        at(
            "BundleConfig.numNpuSegments",
            Why::TooLarge { max: 1 << 24 }
        )
    );
    assert_eq!(
        reject(&fx, |c| c.flags = 4),
        at("BundleConfig.flags", Why::Unsupported)
    );
    assert_eq!(
        reject(&fx, |c| c.mutable_weight_vars_mem_size = u64::MAX),
        at(
            "BundleConfig.mutableWeightVarsMemSize",
            Why::TooLarge {
                max: i64::MAX as u64
            }
        )
    );
}

#[test]
fn symbol_fields() {
    // Symbol 1 is `y`: mutable area at offset 64, 16 f32; the mutable area is 192 bytes.
    assert_eq!(
        reject_tables(|f| f.symbols[1].offset = 32),
        at("symbolTable[1].offset", Why::Misaligned { align: 64 })
    );
    assert_eq!(
        reject_tables(|f| f.symbols[1].offset = 192),
        at(
            "symbolTable[1].offset",
            Why::OutOfRange {
                end: 256,
                limit: 192
            }
        )
    );
    assert_eq!(
        reject_tables(|f| f.symbols[1].size = 15),
        at("symbolTable[1].size", Why::Mismatch { expected: 16 })
    );
    assert_eq!(
        reject_tables(|f| f.symbols[3].kind = 1),
        at("symbolTable[3].kind", Why::Mismatch { expected: 0 })
    );
    assert_eq!(
        reject_tables(|f| f.symbols[0].kind = 2),
        at("symbolTable[0].kind", Why::Mismatch { expected: 1 })
    );
    assert_eq!(
        reject_tables(|f| f.tensors[1].dtype = 5),
        at("tensors[1].dtype", Why::UnknownCode)
    );
    assert_eq!(
        reject_tables(|f| f.tensors[1].rank = 9),
        at("tensors[1].rank", Why::TooLarge { max: 8 })
    );
    assert_eq!(
        reject_tables(|f| f.tensors[1].dims[3] = 1),
        at("tensors[1].dims", Why::Mismatch { expected: 0 })
    );
    assert_eq!(
        reject_tables(|f| f.tensors[1].size_bytes = 60),
        at("tensors[1].sizeBytes", Why::Mismatch { expected: 64 })
    );
    assert_eq!(
        reject_tables(|f| f.tensors[0].role = 2),
        at("tensors[0].role", Why::Mismatch { expected: 1 })
    );
    assert_eq!(
        reject_tables(|f| f.tensors[4].role = 7),
        at("tensors[4].role", Why::UnknownCode)
    );
    // f32 -> i64 doubles the byte size; the descriptor's sizeBytes no longer matches.
    assert_eq!(
        reject_tables(|f| f.tensors[3].dtype = 7),
        at("tensors[3].sizeBytes", Why::Mismatch { expected: 128 })
    );
    assert_eq!(
        reject_tables(|f| {
            f.tensors[3].dims = [u64::MAX, 2, 0, 0, 0, 0, 0, 0];
            f.tensors[3].rank = 2;
        }),
        at("tensors[3].dims", Why::Overflow)
    );
}

#[test]
fn symbol_names() {
    static BAD_UTF8: [u8; 3] = [b'a', 0xff, 0];
    static EMPTY: [u8; 1] = [0];
    assert_eq!(
        reject_tables(|f| f.symbols[2].name = std::ptr::null()),
        at("symbolTable[2].name", Why::Null)
    );
    assert_eq!(
        reject_tables(|f| f.symbols[2].name = BAD_UTF8.as_ptr().cast()),
        at("symbolTable[2].name", Why::NotUtf8)
    );
    assert_eq!(
        reject_tables(|f| f.symbols[2].name = EMPTY.as_ptr().cast()),
        at("symbolTable[2].name", Why::Empty)
    );
    let long = vec![b'n'; 5000]
        .into_iter()
        .chain([0])
        .collect::<std::vec::Vec<u8>>();
    assert_eq!(
        reject_tables(|f| f.symbols[2].name = long.as_ptr().cast()),
        at("symbolTable[2].name", Why::Unterminated { max: 4096 })
    );
    // `c` (index 3) renamed to `x`: duplicate of input 0.
    assert_eq!(
        reject_tables(|f| f.symbols[3].name = f.names[0].as_ptr()),
        at("symbolTable[3].name", Why::Duplicate { first: 0 })
    );
    assert_eq!(
        reject_tables(|f| f.ops[2].name = f.names[5].as_ptr()),
        at("ops[2].name", Why::Duplicate { first: 0 })
    );
}

/// `pairing`: a known kind with at least one group, a pair's op with its groups as tasks; the schedule an
/// engine of T threads takes (the pair's op when T divides G, else its kernels alone).
#[test]
fn pairing_values() {
    let n = crate::config::BundleOp::tasks_on;
    // An unknown kind, no groups, groups without a kind, a pair's op of 7 groups with another task count.
    for pairing in [3, 1 << 8 | 3, 1, 2, 5 << 8, 7 << 8 | 1] {
        let r = reject_tables(move |f| f.ops[1].pairing = pairing);
        assert_eq!(r, at("ops[1].pairing", Why::UnknownCode), "{pairing:#x}");
    }
    let fx = Fixture::small();
    let mut op = fx.ops[1];
    op.num_tasks = 6;
    op.pairing = 6 << 8 | 1;
    let tasks = |op: &crate::config::BundleOp| [1, 2, 3, 4, 6, 8, 16].map(|t| n(op, t));
    assert_eq!(tasks(&op), [6, 6, 6, 0, 6, 0, 0]);
    op.pairing = 6 << 8 | 2;
    assert_eq!(tasks(&op), [0, 0, 0, 6, 0, 6, 6]);
    op.pairing = 0;
    assert_eq!(tasks(&op), [6; 7]);
}

#[test]
fn op_fields() {
    assert_eq!(
        reject_tables(|f| f.ops[1].func = None),
        at("ops[1].fn", Why::Null)
    );
    assert_eq!(
        reject_tables(|f| f.ops[1].num_tasks = 0),
        at("ops[1].numTasks", Why::Zero)
    );
    assert_eq!(
        reject_tables(|f| f.ops[1].layer = 2),
        at("ops[1].layer", Why::OutOfRange { end: 3, limit: 2 })
    );
    assert_eq!(
        reject_tables(|f| f.ops[1].args = std::ptr::null()),
        at("ops[1].args", Why::Null)
    );
    // Activation area is 128 bytes; arg 1 of op 1 is t2 at 64.
    assert_eq!(
        reject_tables(|f| f.args[1][1].offset = 128),
        at(
            "ops[1].args[1].offset",
            Why::OutOfRange {
                end: 192,
                limit: 128
            }
        )
    );
    assert_eq!(
        reject_tables(|f| f.args[1][1].offset = 96),
        at("ops[1].args[1].offset", Why::Misaligned { align: 64 })
    );
    assert_eq!(
        reject_tables(|f| f.args[1][1].size = u64::MAX),
        at("ops[1].args[1].offset", Why::Overflow)
    );
    assert_eq!(
        reject_tables(|f| f.args[1][0].area = 3),
        at("ops[1].args[0].area", Why::UnknownCode)
    );
    let many = (0..70_000)
        .map(|_| BundleArg {
            area: 2,
            reserved: 0,
            offset: 0,
            size: 0,
        })
        .collect();
    assert_eq!(
        reject_tables(|f| f.set_args(0, many)),
        at("ops[0].numArgs", Why::TooLarge { max: 1 << 16 })
    );
}

#[test]
fn layer_fields() {
    assert_eq!(
        reject_tables(|f| f.layers[1].first_op = 1),
        at("layers[1].firstOp", Why::Mismatch { expected: 2 })
    );
    assert_eq!(
        reject_tables(|f| f.layers[1].num_ops = 3),
        at("layers[1].numOps", Why::OutOfRange { end: 5, limit: 4 })
    );
    assert_eq!(
        reject_tables(|f| f.layers[1].num_ops = 1),
        at("layers[1].numOps", Why::Mismatch { expected: 2 })
    );
    // Op 1 claims layer 1 but sits in layer 0's range.
    assert_eq!(
        reject_tables(|f| f.ops[1].layer = 1),
        at("ops[1].layer", Why::Mismatch { expected: 0 })
    );
    let fx = Fixture::small();
    assert_eq!(
        reject(&fx, |c| c.num_layers = 0),
        at("ops[0].layer", Why::OutOfRange { end: 1, limit: 0 })
    );
}

#[test]
fn error_messages_name_the_field() {
    let fx = Fixture::small();
    let mut cfg = fx.config();
    cfg.alignment = 48;
    // SAFETY: points into `fx`.
    let err = unsafe { ConfigView::new(&cfg) }.unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad bundle config field BundleConfig.alignment = 48: not a power of two"
    );
    let mut fx = Fixture::small();
    fx.args[2][1].offset = 128;
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    let err = unsafe { ConfigView::new(&cfg) }.unwrap_err().to_string();
    assert!(err.contains("ops[2].args[1].offset = 128"), "{err}");
    assert!(err.contains("ends at 192, past the size 128"), "{err}");
}

/// An edit of one `fastOps` entry (given the name of another op).
type Edit = fn(&mut crate::BundleOp, *const core::ffi::c_char);

/// A fat bundle's `fastOps`: accepted and handed out when it differs from `ops` only in the functions and this CPU
/// has `fastCpuFeatures`; kept aside (base `ops` used) for features this CPU lacks; a NULL function, another
/// name, task count, argument table or layer rejected with the entry's field named; FAST features without a
/// table rejected.
#[test]
fn fast_ops_are_checked_and_used() {
    let fx = Fixture::small();
    let fast = fx.ops.clone();
    let view_with = |fast: &[crate::BundleOp], features: u64| {
        let mut cfg = fx.config();
        cfg.fast_ops = fast.as_ptr();
        cfg.fast_cpu_features = features;
        // SAFETY: every pointer is into `fx` or `fast`, alive here.
        unsafe { ConfigView::new(&cfg) }.map(|v| (v.fast_ops(), v.ops().as_ptr()))
    };
    assert_eq!(view_with(&fast, 0), Ok((true, fast.as_ptr())));
    // Bit 40 is no feature this runtime knows: counted as missing, so the base table stays.
    assert_eq!(view_with(&fast, 1 << 40), Ok((false, fx.ops.as_ptr())));
    let name = fx.ops[0].name;
    let cases: [(Edit, &str, Why); 6] = [
        (|op, _| op.func = None, "fastOps[1].fn", Why::Null),
        (
            |op, n| op.name = n,
            "fastOps[1].name",
            Why::Mismatch { expected: 0 },
        ),
        (
            |op, _| op.num_tasks += 1,
            "fastOps[1].numTasks",
            Why::Mismatch { expected: 0 },
        ),
        (
            |op, _| op.args = core::ptr::null(),
            "fastOps[1].args",
            Why::Mismatch { expected: 0 },
        ),
        (
            |op, _| op.layer += 1,
            "fastOps[1].layer",
            Why::Mismatch { expected: 0 },
        ),
        (
            |op, _| op.pairing = 6 << 8 | 2,
            "fastOps[1].pairing",
            Why::Mismatch { expected: 0 },
        ),
    ];
    for (edit, field, why) in cases {
        let mut bad = fast.clone();
        edit(&mut bad[1], name);
        match view_with(&bad, 0) {
            Err(Error::BadConfig {
                field: f, why: w, ..
            }) => {
                assert_eq!(f.to_string(), field);
                // `Mismatch` carries the base op's value; only its kind is checked here.
                assert_eq!(
                    core::mem::discriminant(&w),
                    core::mem::discriminant(&why),
                    "{field}"
                );
            }
            other => panic!("{field}: expected BadConfig, got {other:?}"),
        }
    }
    assert_eq!(
        reject(&fx, |c| c.fast_cpu_features = 1),
        at(
            "BundleConfig.fastCpuFeatures",
            Why::Mismatch { expected: 0 }
        )
    );
}
