//! Validation of the NPU segment table (format version 2): a valid table is exposed as typed
//! segment info, and each broken field is rejected with an error naming exactly that field
//! (`npuSegments[0].copies[3].area`) and the reason.

use std::string::{String, ToString};
use std::vec;

use super::segments::{both_layers_spec, layer0, layer0_spec};
use crate::config::ConfigView;
use crate::fixture::Fixture;
use crate::{Area, ByteRange, Error, Why};

/// Validates the config of `fx` after `edit` of its tables; the `BadConfig` field path and reason.
fn reject(mut fx: Fixture, edit: impl FnOnce(&mut Fixture)) -> (String, Why) {
    edit(&mut fx);
    let cfg = fx.config();
    // SAFETY: `cfg` points into `fx`'s tables (or at NULL, which is checked).
    match unsafe { ConfigView::new(&cfg) } {
        Err(Error::BadConfig { field, why, .. }) => (field.to_string(), why),
        other => panic!("expected BadConfig, got {other:?}"),
    }
}

fn at(path: &str, why: Why) -> (String, Why) {
    (path.to_string(), why)
}

/// The layer-0 fixture with one segment.
fn one() -> Fixture {
    layer0(2.0)
}

#[test]
fn valid_table_is_exposed() {
    let fx = one();
    let cfg = fx.config();
    assert_eq!(cfg.version, 5);
    // SAFETY: points into `fx`.
    let view = unsafe { ConfigView::new(&cfg) }.expect("valid");
    assert_eq!(view.num_npu_segments(), 1);
    let seg = view.npu_segment(0).unwrap();
    assert_eq!(seg.name, "npu0");
    assert_eq!(seg.txn, &fx.txns[0][..]);
    assert_eq!(seg.layers(), 0..1);
    assert_eq!(
        seg.input,
        ByteRange {
            offset: 128,
            size: 128
        }
    );
    assert_eq!(
        seg.output,
        ByteRange {
            offset: 256,
            size: 128
        }
    );
    assert_eq!(
        seg.scratch,
        ByteRange {
            offset: 384,
            size: 0
        }
    );
    assert_eq!(
        seg.constants,
        ByteRange {
            offset: 128,
            size: 4
        }
    );
    assert_eq!(seg.params.offset, 192);
    assert_eq!(seg.est_cycles, [1, 2, 3]);
    let ins: vec::Vec<_> = seg.copies_in().collect();
    assert_eq!((ins.len(), seg.num_copies_in()), (2, 2));
    assert_eq!(ins[1].area, Area::Constant);
    assert_eq!(ins[1].bytes.range(), 0..64);
    assert_eq!(ins[1].fused_range(), 64..128);
    let outs: vec::Vec<_> = seg.copies_out().collect();
    assert_eq!((outs.len(), seg.num_copies_out()), (2, 2));
    assert_eq!(outs[1].area, Area::Activations);
    assert_eq!(outs[1].bytes.offset, 64);
    assert_eq!(view.find_npu_segment("npu0"), Some(seg));
    assert_eq!(view.find_npu_segment("npu1"), None);
    assert_eq!(view.npu_segments().count(), 1);
    // A segment without copies has a NULL copy table.
    let mut fx = Fixture::small();
    let mut spec = both_layers_spec(&fx);
    (spec.copy_in, spec.copy_out) = (vec![], vec![]);
    fx.add_segment(spec);
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    let view = unsafe { ConfigView::new(&cfg) }.expect("valid without copies");
    assert_eq!(view.npu_segment(0).unwrap().copies_in().count(), 0);
}

#[test]
fn version_and_table() {
    let fx = one();
    let mut cfg = fx.config();
    cfg.version = 1;
    // SAFETY: points into `fx`.
    let err = unsafe { ConfigView::new(&cfg) }.map(|_| ()).unwrap_err();
    assert_eq!(
        err,
        Error::BadVersion {
            found: 1,
            supported: 5
        }
    );
    let mut cfg = fx.config();
    cfg.npu_segments = std::ptr::null();
    // SAFETY: points into `fx`, or NULL.
    let err = unsafe { ConfigView::new(&cfg) }.map(|_| ()).unwrap_err();
    assert!(
        matches!(err, Error::BadConfig { field, why: Why::Null, .. } if field.field == "npuSegments"),
        "{err:?}"
    );
}

#[test]
fn name_and_transaction() {
    assert_eq!(
        reject(one(), |fx| fx.segments[0].name = std::ptr::null()),
        at("npuSegments[0].name", Why::Null)
    );
    assert_eq!(
        reject(one(), |fx| fx.segments[0].txn = std::ptr::null()),
        at("npuSegments[0].txn", Why::Null)
    );
    assert_eq!(
        reject(one(), |fx| fx.segments[0].txn_size = 12),
        at("npuSegments[0].txnSize", Why::TooSmall { min: 16 })
    );
    assert_eq!(
        reject(one(), |fx| fx.segments[0].txn_size = 18),
        at("npuSegments[0].txnSize", Why::Misaligned { align: 4 })
    );
    let (path, why) = reject(one(), |fx| {
        let spec = layer0_spec(fx, 2.0);
        fx.add_segment(spec);
        fx.segments[1].first_layer = 1;
    });
    assert_eq!(
        (path.as_str(), why),
        ("npuSegments[1].name", Why::Duplicate { first: 0 })
    );
}

#[test]
fn layer_ranges() {
    assert_eq!(
        reject(one(), |fx| fx.segments[0].num_layers = 0),
        at("npuSegments[0].numLayers", Why::Zero)
    );
    assert_eq!(
        reject(one(), |fx| fx.segments[0].first_layer = 2),
        at(
            "npuSegments[0].firstLayer",
            Why::OutOfRange { end: 3, limit: 2 }
        )
    );
    assert_eq!(
        reject(one(), |fx| fx.segments[0].num_layers = 3),
        at(
            "npuSegments[0].numLayers",
            Why::OutOfRange { end: 3, limit: 2 }
        )
    );
    // Two segments: the second must start at or after the end of the first.
    let two = |first: [u32; 2], num: [u32; 2]| {
        move |fx: &mut Fixture| {
            let spec = layer0_spec(fx, 2.0);
            fx.add_segment(spec);
            fx.names.push(std::ffi::CString::new("npu1").unwrap());
            fx.segments[1].name = fx.names.last().unwrap().as_ptr();
            for k in 0..2 {
                fx.segments[k].first_layer = first[k];
                fx.segments[k].num_layers = num[k];
            }
        }
    };
    assert_eq!(
        reject(one(), two([1, 0], [1, 1])),
        at("npuSegments[1].firstLayer", Why::TooSmall { min: 2 }),
        "unsorted"
    );
    assert_eq!(
        reject(one(), two([0, 1], [2, 1])),
        at("npuSegments[1].firstLayer", Why::TooSmall { min: 2 }),
        "overlapping"
    );
    let mut fx = one();
    two([0, 1], [1, 1])(&mut fx);
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    let view = unsafe { ConfigView::new(&cfg) }.expect("adjacent segments are valid");
    assert_eq!(view.npu_segment(1).unwrap().layers(), 1..2);
}

#[test]
fn staging_and_constant_ranges() {
    let act = |fx: &Fixture| fx.sizes[2];
    let (path, why) = reject(one(), |fx| fx.segments[0].in_offset = act(fx));
    assert_eq!(path, "npuSegments[0].inOffset");
    assert!(matches!(why, Why::OutOfRange { .. }), "{why:?}");
    assert_eq!(
        reject(one(), |fx| fx.segments[0].scratch_size = u64::MAX),
        at("npuSegments[0].scratchOffset", Why::Overflow)
    );
    let (path, why) = reject(one(), |fx| fx.segments[0].out_size = act(fx));
    assert_eq!(path, "npuSegments[0].outOffset");
    assert!(matches!(why, Why::OutOfRange { .. }), "{why:?}");
    let (path, why) = reject(one(), |fx| fx.segments[0].const_offset = fx.sizes[0]);
    assert_eq!(
        (path.as_str(), why),
        (
            "npuSegments[0].constOffset",
            Why::OutOfRange {
                end: 388,
                limit: 384
            }
        )
    );
    let (path, _) = reject(one(), |fx| fx.segments[0].params_size = 1 << 40);
    assert_eq!(path, "npuSegments[0].paramsOffset");
    assert_eq!(
        reject(one(), |fx| fx.segments[0].out_offset =
            fx.segments[0].in_offset + 64),
        at(
            "npuSegments[0].outOffset",
            Why::Overlaps { other: "inOffset" }
        )
    );
    assert_eq!(
        reject(one(), |fx| {
            fx.segments[0].scratch_offset = fx.segments[0].out_offset + 4;
            fx.segments[0].scratch_size = 4;
        }),
        at(
            "npuSegments[0].scratchOffset",
            Why::Overlaps { other: "outOffset" }
        )
    );
    // Empty ranges overlap nothing.
    let mut fx = one();
    fx.segments[0].scratch_offset = fx.segments[0].in_offset;
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    assert!(unsafe { ConfigView::new(&cfg) }.is_ok());
}

#[test]
fn copies() {
    assert_eq!(
        reject(one(), |fx| fx.segments[0].copies = std::ptr::null()),
        at("npuSegments[0].copies", Why::Null)
    );
    assert_eq!(
        reject(one(), |fx| fx.segments[0].num_copy_in = u32::MAX),
        at("npuSegments[0].numCopyIn", Why::TooLarge { max: 1 << 24 })
    );
    assert_eq!(
        reject(one(), |fx| fx.copies[0][1].area = 7),
        at("npuSegments[0].copies[1].area", Why::UnknownCode)
    );
    assert_eq!(
        reject(one(), |fx| fx.copies[0][0].reserved = 1),
        at(
            "npuSegments[0].copies[0].reserved",
            Why::Mismatch { expected: 0 }
        )
    );
    assert_eq!(
        reject(one(), |fx| fx.copies[0][3].area = 0),
        at("npuSegments[0].copies[3].area", Why::ReadOnly)
    );
    // Copy 0 reads 64 bytes of the mutable area (192 bytes).
    assert_eq!(
        reject(one(), |fx| fx.copies[0][0].offset = 160),
        at(
            "npuSegments[0].copies[0].offset",
            Why::OutOfRange {
                end: 224,
                limit: 192
            }
        )
    );
    assert_eq!(
        reject(one(), |fx| fx.copies[0][2].fused_offset = 96),
        at(
            "npuSegments[0].copies[2].fusedOffset",
            Why::OutOfRange {
                end: 160,
                limit: 128
            }
        )
    );
    assert_eq!(
        reject(one(), |fx| fx.copies[0][3].size = u64::MAX),
        at("npuSegments[0].copies[3].offset", Why::Overflow)
    );
}

#[test]
fn messages_name_the_field() {
    let mut fx = one();
    fx.copies[0][3].area = 0;
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    let err = unsafe { ConfigView::new(&cfg) }.map(|_| ()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad bundle config field npuSegments[0].copies[3].area = 0: the constant area is read-only"
    );
    let mut fx = one();
    fx.segments[0].out_offset = fx.segments[0].in_offset;
    let cfg = fx.config();
    // SAFETY: points into `fx`.
    let err = unsafe { ConfigView::new(&cfg) }.map(|_| ()).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("npuSegments[0].outOffset = 128: the range overlaps the one at inOffset"),
        "{err}"
    );
}
