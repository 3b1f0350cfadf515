//! Bundle and instance: weights checks, tensor listing, typed access errors, caller-provided storage,
//! and `run()` (entry function) against `run_ops()` (op table) and the reference values.

use std::boxed::Box;
use std::string::ToString;
use std::vec;
use std::vec::Vec;

use super::{bits, load};
use crate::config::{Area, BundleArg};
use crate::fixture::{failing_entry, Fixture};
use crate::{checksum64, fnv1a64, Bundle, DType, Error, Instance, OpTiming, ProfileTable, Role};

#[repr(C, align(64))]
struct Aligned([u8; 1024]);

fn aligned() -> Box<Aligned> {
    Box::new(Aligned([0; 1024]))
}

#[test]
fn fnv1a64_reference_values() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

/// `checksum64`'s reference values (an independent Python model of the definition): the empty image, one
/// byte, six, and 771 (24 whole 32-byte chunks, then three words, the last partial).
#[test]
fn checksum64_reference_values() {
    let long: Vec<u8> = (0..771)
        .map(|i| {
            if i < 768 {
                (i % 256) as u8
            } else {
                b"xyz"[i - 768]
            }
        })
        .collect();
    assert_eq!(checksum64(b""), 0x9f45_5a3c_21ea_74c5);
    assert_eq!(checksum64(b"a"), 0x12b3_068d_d5da_d290);
    assert_eq!(checksum64(b"foobar"), 0x483b_7b09_fc17_b38b);
    assert_eq!(checksum64(&long), 0x3213_86a3_ebbc_15aa);
    let mut flipped = long.clone();
    flipped[770] ^= 0x80;
    assert_ne!(checksum64(&flipped), checksum64(&long));
}

#[test]
fn lists_tensors() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).expect("loads");
    assert_eq!(bundle.model_name(), "fixture");
    let inputs: Vec<_> = bundle
        .inputs()
        .map(|t| (t.name, t.dtype, t.shape.to_vec()))
        .collect();
    assert_eq!(inputs, vec![("x", DType::F32, vec![2, 8])]);
    let outputs: Vec<_> = bundle
        .outputs()
        .map(|t| (t.name, t.dtype, t.shape.to_vec()))
        .collect();
    assert_eq!(
        outputs,
        vec![
            ("y", DType::F32, vec![2, 8]),
            ("marks", DType::I32, vec![3])
        ]
    );
    let constants: Vec<_> = bundle.constants().map(|t| t.name).collect();
    assert_eq!(constants, vec!["c", "steps"]);
    assert_eq!(bundle.area_size(Area::Mutable), 192);
    assert_eq!(bundle.constant_bytes(), &fx.weights[..]);
    assert_eq!(bundle.constant_bytes().as_ptr() as usize % 64, 0);
}

#[test]
fn weights_are_checked() {
    let fx = Fixture::small();
    let cfg = fx.config();
    // SAFETY: `cfg` points into `fx`, whose entry matches.
    let short = unsafe { Bundle::new(&cfg, fx.entry, &fx.weights[1..]) }.unwrap_err();
    assert_eq!(
        short,
        Error::WeightsSize {
            expected: 128,
            got: 127
        }
    );
    let mut flipped = fx.weights.clone();
    flipped[5] ^= 1;
    // SAFETY: as above.
    let err = unsafe { Bundle::new(&cfg, fx.entry, &flipped) }.unwrap_err();
    assert_eq!(
        err,
        Error::WeightsChecksum {
            expected: checksum64(&fx.weights),
            got: checksum64(&flipped)
        }
    );
    assert!(err.to_string().contains("belongs to another build"));
}

#[test]
fn cpu_features_are_checked() {
    let fx = Fixture::small();
    let mut cfg = fx.config();
    // The baseline and whatever this CPU has load; a bit no runtime knows is always missing.
    cfg.cpu_features = crate::cpu::available();
    // SAFETY: `cfg` points into `fx`, whose entry matches.
    unsafe { Bundle::new(&cfg, fx.entry, &fx.weights) }.expect("loads with the CPU's own features");
    cfg.cpu_features = crate::cpu::available() | 1 << 40;
    // SAFETY: as above.
    let err = unsafe { Bundle::new(&cfg, fx.entry, &fx.weights) }.unwrap_err();
    assert_eq!(
        err,
        Error::CpuFeatures {
            missing: 1 << 40,
            needed: cfg.cpu_features
        }
    );
    assert!(err.to_string().contains("lacks bit40"), "{err}");
    assert_eq!(
        crate::cpu::Features(0b1_0000_1001).to_string(),
        "sse2 avx2 avx512vnni"
    );
}

#[test]
fn caller_storage() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let (mut c, mut m, mut a) = (aligned(), aligned(), aligned());
    c.0[..128].copy_from_slice(&fx.weights);
    // SAFETY: `cfg` points into `fx`, whose entry matches.
    let err = unsafe { Bundle::new_in(&cfg, fx.entry, &mut c.0[1..129]) }.unwrap_err();
    assert!(
        matches!(err, Error::Misaligned { align: 64, .. }),
        "{err:?}"
    );
    // SAFETY: as above.
    let err = unsafe { Bundle::new_in(&cfg, fx.entry, &mut c.0[..]) }.unwrap_err();
    assert_eq!(
        err,
        Error::WeightsSize {
            expected: 128,
            got: 1024
        }
    );
    // SAFETY: as above.
    let bundle = unsafe { Bundle::new_in(&cfg, fx.entry, &mut c.0[..128]) }.expect("loads");
    let err = Instance::new_in(&bundle, &mut m.0[..100], &mut a.0[..]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                needed: 192,
                got: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "mutable area needs 192 bytes, the buffer given has 100"
    );
    let err = Instance::new_in(&bundle, &mut m.0[..], &mut a.0[8..]).unwrap_err();
    assert!(matches!(err, Error::Misaligned { .. }), "{err:?}");
    let mut inst = Instance::new_in(&bundle, &mut m.0[..], &mut a.0[..]).expect("instance");
    let x = fx.input(0.5);
    inst.set_input("x", &x).unwrap();
    inst.run_ops().unwrap();
    assert_eq!(bits(inst.output("y").unwrap()), bits(&fx.expected(&x)));
}

#[test]
fn typed_access_errors() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let name = |e: &Error| e.to_string();
    let err = inst.set_input("nope", &[0f32; 16]).unwrap_err();
    assert!(matches!(err, Error::UnknownTensor { name } if name.as_str() == "nope"));
    assert!(name(&err).contains("no tensor `nope`"));
    let err = inst.set_input("x", &[0f32; 15]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SizeMismatch {
                expected: 16,
                got: 15,
                ..
            }
        ),
        "{err:?}"
    );
    let err = inst.set_input("x", &[0i32; 16]).unwrap_err();
    assert!(matches!(
        err,
        Error::DTypeMismatch {
            dtype: DType::F32,
            requested: DType::I32,
            ..
        }
    ));
    assert_eq!(name(&err), "tensor `x` has dtype f32, accessed as i32");
    let err = inst.set_input("y", &[0f32; 16]).unwrap_err();
    assert!(matches!(
        err,
        Error::WrongRole {
            role: Role::Output,
            wanted: Role::Input,
            ..
        }
    ));
    let err = inst.output::<f32>("x").unwrap_err();
    assert!(matches!(
        err,
        Error::WrongRole {
            role: Role::Input,
            wanted: Role::Output,
            ..
        }
    ));
    let err = inst.output::<f32>("marks").unwrap_err();
    assert!(matches!(
        err,
        Error::DTypeMismatch {
            dtype: DType::I32,
            ..
        }
    ));
    let err = inst.set_input_bytes("x", &[0u8; 63]).unwrap_err();
    assert!(matches!(
        err,
        Error::ByteSizeMismatch {
            expected: 64,
            got: 63,
            ..
        }
    ));
    assert_eq!(inst.input_bytes_mut("x").unwrap().len(), 64);
    assert_eq!(inst.output_bytes("marks").unwrap().len(), 12);
    assert_eq!(inst.tensor::<i64>("steps").unwrap(), &[7]);
    let c: Vec<f32> = (0..16).map(|i| i as f32 * 0.25 - 1.0).collect();
    assert_eq!(inst.tensor::<f32>("c").unwrap(), &c[..]);
    let err = inst.tensor::<f32>("steps").unwrap_err();
    assert!(matches!(
        err,
        Error::DTypeMismatch {
            dtype: DType::I64,
            requested: DType::F32,
            ..
        }
    ));
}

#[test]
fn entry_and_op_table_agree_bitwise() {
    for fx in [Fixture::small(), Fixture::large()] {
        let cfg = fx.config();
        let bundle = load(&fx, &cfg).unwrap();
        let (mut a, mut b) = (bundle.instance().unwrap(), bundle.instance().unwrap());
        for seed in [0.0, 1.5, -7.25] {
            let x = fx.input(seed);
            a.set_input("x", &x).unwrap();
            b.input_mut::<f32>("x").unwrap().copy_from_slice(&x);
            a.run().unwrap();
            b.run_ops().unwrap();
            let expected = bits(&fx.expected(&x));
            assert_eq!(bits(a.output("y").unwrap()), expected);
            assert_eq!(bits(b.output("y").unwrap()), expected);
        }
        // Three runs each: every task of `mark` ran exactly once per run.
        assert!(a.output::<i32>("marks").unwrap().iter().all(|&m| m == 3));
        assert!(b.output::<i32>("marks").unwrap().iter().all(|&m| m == 3));
        assert_eq!(a.mutable_bytes(), b.mutable_bytes());
    }
}

#[test]
fn failing_entry_is_an_error() {
    let fx = Fixture::small();
    let cfg = fx.config();
    // SAFETY: `cfg` points into `fx`; `failing_entry` touches nothing.
    let bundle = unsafe { Bundle::new(&cfg, failing_entry, &fx.weights) }.unwrap();
    let err = bundle.instance().unwrap().run().unwrap_err();
    assert!(matches!(err, Error::EntryFailed { code: 7, model } if model.as_str() == "fixture"));
}

#[test]
fn too_many_args_for_the_op_table_runner() {
    let mut fx = Fixture::small();
    let mut args = fx.args[3].clone();
    args.extend((0..70).map(|_| BundleArg {
        area: 2,
        reserved: 0,
        offset: 0,
        size: 0,
    }));
    fx.set_args(3, args);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let err = inst.run_ops().unwrap_err();
    assert!(
        matches!(err, Error::TooManyArgs { num_args: 71, max: 64, op } if op.as_str() == "mark")
    );
    // Nothing ran; the entry function is unaffected.
    assert!(inst.output::<f32>("y").unwrap().iter().all(|&v| v == 0.0));
    inst.run().unwrap();
    assert_eq!(inst.output::<i32>("marks").unwrap(), &[1, 1, 1]);
}

#[test]
fn profiled_op_table_run() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let ticks = core::cell::Cell::new(0u64);
    let clock = || {
        ticks.set(ticks.get() + 10);
        ticks.get()
    };
    let timings = OpTiming::table(4);
    let err = inst.run_ops_profiled(&clock, &timings[..3]).unwrap_err();
    assert!(matches!(
        err,
        Error::BufferTooSmall {
            needed: 4,
            got: 3,
            ..
        }
    ));
    inst.run_ops_profiled(&clock, &timings).unwrap();
    let counts: Vec<u64> = timings.iter().map(OpTiming::tasks).collect();
    assert_eq!(counts, vec![4, 2, 3, 3]);
    assert!(timings.iter().all(|t| t.busy() == 10 * t.tasks()));
    let table = ProfileTable::new(&bundle, &timings, 1).unwrap().to_string();
    assert!(
        table.contains("sum_plus_one") && table.contains("total"),
        "{table}"
    );
}
