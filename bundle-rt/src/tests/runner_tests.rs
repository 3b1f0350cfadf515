//! The recipe runner on the fixture: the recipe `bundlec` would write, and a re-laid-out one with
//! sub-buffers, give the same bits as `run_ops`; typed and byte binding; binding and execute errors.

use std::string::ToString;
use std::vec;
use std::vec::Vec;

use super::{bits, load};
use crate::fixture::recipes::{recipe, split, text};
use crate::fixture::Fixture;
use crate::runner::{BufferKind, Where};
use crate::{DType, Error, Role, Runner};

/// Bytes of an f32 slice.
fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Runs `json` on `fx` for three inputs through one runner and through `run_ops` on one instance;
/// asserts identical bytes of `y` and `marks` after each run.
fn check_against_run_ops(fx: &Fixture, json: &str) {
    let cfg = fx.config();
    let bundle = load(fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let seeds = [0.0f32, 1.5, -7.25];
    let mut ys = vec![vec![0u8; fx.n * 4]; seeds.len()];
    let mut marks = vec![vec![0u8; inst.output_bytes("marks").unwrap().len()]; seeds.len()];
    let mut expected = Vec::new();
    {
        let mut runner = Runner::new(&bundle, json).expect("recipe accepted");
        for ((seed, y), m) in seeds.iter().zip(&mut ys).zip(&mut marks) {
            let x = fx.input(*seed);
            runner.bind_input("x", &f32_bytes(&x)).unwrap();
            runner.bind_output("y", y).unwrap();
            runner.bind_output("marks", m).unwrap();
            runner.execute().unwrap();
            runner.wait().unwrap();
            inst.set_input("x", &x).unwrap();
            inst.run_ops().unwrap();
            let y_ref = inst.output_bytes("y").unwrap().to_vec();
            assert_eq!(
                y_ref,
                f32_bytes(&fx.expected(&x)),
                "run_ops matches the reference"
            );
            expected.push((y_ref, inst.output_bytes("marks").unwrap().to_vec()));
        }
    }
    for (k, (y_ref, marks_ref)) in expected.iter().enumerate() {
        assert_eq!(&ys[k], y_ref, "y of run {k}");
        assert_eq!(&marks[k], marks_ref, "marks of run {k}");
    }
    // Each execute ran every task of `mark` once: the counts went 1, 2, 3.
    assert_eq!(&marks[2][..4], &3i32.to_le_bytes());
}

#[test]
fn bundlec_style_recipe_matches_run_ops_bitwise() {
    for fx in [Fixture::small(), Fixture::large()] {
        check_against_run_ops(&fx, &text(&recipe(&fx)));
    }
}

#[test]
fn sub_buffers_resolve_like_xrt() {
    for fx in [Fixture::small(), Fixture::large()] {
        check_against_run_ops(&fx, &text(&split(&fx)));
    }
}

#[test]
fn parsed_recipe_is_exposed() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let json = text(&split(&fx));
    let runner = Runner::new(&bundle, &json).unwrap();
    let recipe = runner.recipe();
    assert_eq!(recipe.program.as_deref(), Some("fixture.o"));
    let kinds: Vec<_> = recipe
        .buffers
        .iter()
        .map(|b| (&b.name[..], b.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("x", BufferKind::Input),
            ("y", BufferKind::Output),
            ("marks", BufferKind::Output),
            ("weights", BufferKind::Weight),
            ("t1", BufferKind::Internal),
            ("scratch", BufferKind::Internal),
        ]
    );
    assert_eq!(recipe.buffers[5].size, Some(192));
    assert_eq!(recipe.runs.len(), 4);
    assert!(recipe.runs.iter().all(|r| r.location == Where::Cpu));
    assert_eq!(recipe.runs[0].arguments[1].slice, Some((0, 64)));
    assert_eq!(recipe.runs[3].constants[0].value, 3);
    assert_eq!(recipe.buffer("scratch"), Some(5));
    let debug = std::format!("{runner:?}");
    assert!(
        debug.contains("fixture") && debug.contains("runs: 4"),
        "{debug}"
    );
}

#[test]
fn typed_binding() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let json = text(&recipe(&fx));
    let x = fx.input(0.25);
    let mut y = vec![0f32; 16];
    let mut marks = vec![0i32; 3];
    {
        let mut runner = Runner::new(&bundle, &json).unwrap();
        runner.bind_input_typed("x", &x).unwrap();
        let err = runner.bind_input_typed("x", &[0i32; 16]).unwrap_err();
        assert!(matches!(
            err,
            Error::DTypeMismatch {
                dtype: DType::F32,
                requested: DType::I32,
                ..
            }
        ));
        let err = runner.bind_input_typed("x", &x[1..]).unwrap_err();
        assert!(matches!(
            err,
            Error::SizeMismatch {
                expected: 16,
                got: 15,
                ..
            }
        ));
        let mut wrong = [0f32; 3];
        let err = runner.bind_output_typed("marks", &mut wrong).unwrap_err();
        assert!(matches!(err, Error::DTypeMismatch { .. }), "{err:?}");
        runner.bind_output_typed("y", &mut y).unwrap();
        runner.bind_output_typed("marks", &mut marks).unwrap();
        runner.execute().unwrap();
    }
    assert_eq!(bits(&y), bits(&fx.expected(&x)));
    assert_eq!(marks, [1, 1, 1]);
}

#[test]
fn binding_errors() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let json = text(&recipe(&fx));
    let mut runner = Runner::new(&bundle, &json).unwrap();
    let err = runner.bind_input("nope", &[0; 64]).unwrap_err();
    assert!(matches!(err, Error::UnknownBuffer { name } if name.as_str() == "nope"));
    assert_eq!(
        err.to_string(),
        "the recipe has no buffer `nope` (resources.buffers)"
    );
    for (name, wanted) in [
        ("weights", Role::Input),
        ("activations", Role::Input),
        ("y", Role::Input),
    ] {
        let err = runner.bind_input(name, &[0; 64]).unwrap_err();
        assert_eq!(
            err,
            Error::NotBindable {
                name: crate::Name::new(name),
                wanted
            }
        );
    }
    let mut out = [0u8; 64];
    let err = runner.bind_output("x", &mut out).unwrap_err();
    assert!(matches!(
        err,
        Error::NotBindable {
            wanted: Role::Output,
            ..
        }
    ));
    assert!(err.to_string().contains("cannot be bound as an output"));
    let err = runner.bind_input("x", &[0; 63]).unwrap_err();
    assert!(matches!(
        err,
        Error::ByteSizeMismatch {
            expected: 64,
            got: 63,
            ..
        }
    ));
    let mut short = [0u8; 8];
    let err = runner.bind_output("marks", &mut short).unwrap_err();
    assert!(matches!(
        err,
        Error::ByteSizeMismatch {
            expected: 12,
            got: 8,
            ..
        }
    ));
}

#[test]
fn execute_needs_every_external_buffer_bound() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let json = text(&recipe(&fx));
    let (mut y, mut marks) = ([0u8; 64], [0u8; 12]);
    let mut runner = Runner::new(&bundle, &json).unwrap();
    assert_eq!(runner.wait(), Ok(()), "nothing executed yet");
    fn unbound(r: &mut Runner<'_, '_>) -> std::string::String {
        match r.execute() {
            Err(Error::Unbound { name }) => name.as_str().to_string(),
            other => panic!("expected Unbound, got {other:?}"),
        }
    }
    assert_eq!(unbound(&mut runner), "x");
    let err = runner.wait().unwrap_err();
    assert!(err.to_string().contains("`x` is not bound"), "{err}");
    runner.bind_input("x", &[0; 64]).unwrap();
    assert_eq!(unbound(&mut runner), "y");
    runner.bind_output("y", &mut y).unwrap();
    assert_eq!(unbound(&mut runner), "marks");
    runner.bind_output("marks", &mut marks).unwrap();
    runner.execute().unwrap();
    assert_eq!(runner.wait(), Ok(()));
    drop(runner);
    // x = 0: y = (0 + c) + 0 + 1 with c[i] = i/4 - 1.
    let y: Vec<f32> = y
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(y[4], 1.0);
    assert_eq!(marks, [1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
}
