//! NPU segments on a device, through `Instance::run_ops_with_device` and the engine: a mock device
//! (recording its calls) and the real emulator give the fallback path's bits; without a device
//! nothing changes; profiles, logs and device errors.

use std::string::ToString;
use std::vec::Vec;

use super::segments::{
    both_layers_spec, compute_both_layers, compute_layer0, layer0, layer0_spec, Mock,
};
use super::{bits, load};
use crate::engine::{Engine, StdPort};
use crate::fixture::Fixture;
use crate::npu::{Device, Emulator};
use crate::{Error, Level, OpTiming, ProfileTable, SegmentTiming};

/// Outputs `y` (bits) and `marks` after `runs` runs of `fx` for seeds `0..runs`, through `run`.
fn outputs(
    fx: &Fixture,
    runs: usize,
    mut run: impl FnMut(&mut crate::Instance<'_>) -> crate::Result<()>,
) -> (Vec<Vec<u32>>, Vec<i32>) {
    let cfg = fx.config();
    let bundle = load(fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let mut ys = Vec::new();
    for seed in 0..runs {
        inst.set_input("x", &fx.input(seed as f32 * 0.5)).unwrap();
        run(&mut inst).unwrap();
        ys.push(bits(inst.output("y").unwrap()));
    }
    (ys, inst.output::<i32>("marks").unwrap().to_vec())
}

/// The fallback path (entry function) of `fx`.
fn reference(fx: &Fixture, runs: usize) -> (Vec<Vec<u32>>, Vec<i32>) {
    let out = outputs(fx, runs, |inst| inst.run());
    for (seed, y) in out.0.iter().enumerate() {
        assert_eq!(y, &bits(&fx.expected(&fx.input(seed as f32 * 0.5))));
    }
    out
}

#[test]
fn without_a_device_nothing_changes() {
    let fx = layer0(2.0);
    let expected = reference(&fx, 3);
    assert_eq!(outputs(&fx, 3, |i| i.run_ops_with_device(None)), expected);
    assert_eq!(outputs(&fx, 3, |i| i.run_ops()), expected);
    let mut engine = Engine::new(StdPort::new(), 3).unwrap();
    let by_engine = outputs(&fx, 3, |i| engine.run_with_device(i, None));
    assert_eq!(by_engine, expected);
    let texts: Vec<_> = engine.log().iter().map(|r| r.text().to_string()).collect();
    assert!(texts.iter().all(|t| !t.contains("npu")), "{texts:?}");
}

#[test]
fn mock_device_replaces_layer_0() {
    for mut fx in [Fixture::small(), Fixture::large()] {
        let spec = layer0_spec(&fx, 2.0);
        fx.add_segment(spec);
        let expected = reference(&fx, 3);
        let mut mock = Mock::new(compute_layer0);
        let got = outputs(&fx, 3, |i| i.run_ops_with_device(Some(&mut mock)));
        assert_eq!(got, expected, "n = {}", fx.n);
        let calls = mock.calls();
        assert_eq!(calls.len(), 3);
        let bytes = fx.n * 4;
        let x: Vec<u8> = fx.input(1.0).iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(&calls[2].input[..bytes], &x[..], "copy-in of x");
        assert_eq!(
            &calls[2].input[bytes..],
            &fx.weights[..bytes],
            "copy-in of c"
        );
        assert_eq!(calls[2].sizes, [2 * bytes, 2 * bytes, 0, 4, 136]);
        assert_eq!(calls[2].constants, 2.0f32.to_le_bytes());
        assert_eq!(calls[0].txn, fx.txns[0]);
        for threads in [1, 2, 4] {
            let mut engine = Engine::new(StdPort::new(), threads).unwrap();
            let got = outputs(&fx, 3, |i| engine.run_with_device(i, Some(&mut mock)));
            assert_eq!(got, expected, "n = {}, threads {threads}", fx.n);
        }
        assert_eq!(mock.calls().len(), 12);
    }
}

#[test]
fn mock_device_replaces_both_layers() {
    let mut fx = Fixture::small();
    let spec = both_layers_spec(&fx);
    fx.add_segment(spec);
    let expected = reference(&fx, 4);
    let mut mock = Mock::new(compute_both_layers);
    let got = outputs(&fx, 4, |i| i.run_ops_with_device(Some(&mut mock)));
    assert_eq!(got, expected);
    assert_eq!(
        got.1,
        [4, 4, 4],
        "marks went through the segment four times"
    );
    let mut engine = Engine::new(StdPort::new(), 2).unwrap();
    assert_eq!(
        outputs(&fx, 4, |i| engine.run_with_device(i, Some(&mut mock))),
        expected
    );
    let calls = mock.calls();
    assert_eq!(calls.len(), 8);
    assert_eq!(calls[0].sizes, [2 * 64 + 12, 64 + 12, 64, 0, 0]);
}

#[test]
fn emulator_runs_a_real_transaction() {
    let fx = layer0(2.0);
    let expected = reference(&fx, 3);
    let mut npu = Emulator::vnpu();
    assert_eq!(
        outputs(&fx, 3, |i| i.run_ops_with_device(Some(&mut npu))),
        expected
    );
    for threads in [1, 2, 3] {
        let mut engine = Engine::new(StdPort::new(), threads).unwrap();
        let got = outputs(&fx, 3, |i| engine.run_with_device(i, Some(&mut npu)));
        assert_eq!(got, expected, "threads {threads}");
    }
    // With k = 3 the transaction computes t2 = 3x: the device path is the one that ran.
    let fx = layer0(3.0);
    let (ys, _) = outputs(&fx, 2, |i| i.run_ops_with_device(Some(&mut npu)));
    for (seed, y) in ys.iter().enumerate() {
        let x = fx.input(seed as f32 * 0.5);
        let c = |i: usize| i as f32 * 0.25 - 1.0;
        let want: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, &x)| ((x + c(i)) + x * 3.0) + 1.0)
            .collect();
        assert_eq!(y, &bits(&want));
    }
}

#[test]
fn profile_and_log() {
    let fx = layer0(2.0);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let mut mock = Mock::new(compute_layer0);
    let timings = OpTiming::table(4);
    let segments = SegmentTiming::table(1);
    let clock = {
        let t = core::cell::Cell::new(0u64);
        move || {
            t.set(t.get() + 5);
            t.get()
        }
    };
    inst.run_ops_with_device_profiled(Some(&mut mock), &clock, &timings, &segments)
        .unwrap();
    let tasks: Vec<u64> = timings.iter().map(OpTiming::tasks).collect();
    assert_eq!(tasks, [0, 0, 3, 3], "layer 0 ran on the device");
    assert_eq!(segments[0].runs(), 1);
    assert_eq!(segments[0].wall(), 5);
    let cycles = [
        segments[0].instruction(),
        segments[0].data(),
        segments[0].compute(),
    ];
    assert_eq!((cycles, segments[0].total_cycles()), ([10, 20, 30], 40));
    let err = inst
        .run_ops_with_device_profiled(Some(&mut mock), &clock, &timings, &[])
        .unwrap_err();
    assert!(matches!(
        err,
        Error::BufferTooSmall {
            needed: 1,
            got: 0,
            ..
        }
    ));

    let mut engine = Engine::new(StdPort::new(), 2).unwrap();
    engine
        .run_with_device_profiled(&mut inst, Some(&mut mock), &timings, &segments)
        .unwrap();
    assert_eq!(segments[0].runs(), 2);
    assert_eq!(segments[0].compute(), 60);
    let table = ProfileTable::new(&bundle, &timings, 1)
        .unwrap()
        .with_segments(&segments)
        .unwrap()
        .to_string();
    assert!(table.contains("npu segment"), "{table}");
    let row = table.lines().find(|l| l.starts_with("npu0")).unwrap();
    assert!(row.ends_with("80"), "{row}");
    assert!(ProfileTable::new(&bundle, &timings, 1)
        .unwrap()
        .with_segments(&[])
        .is_err());

    let texts: Vec<_> = engine.log().iter().map(|r| r.text().to_string()).collect();
    assert!(
        texts[1].starts_with("npu npu0 on mock: layers 0..1, 40 cycles (i 10 d 20 c 30)"),
        "{texts:?}"
    );
    assert!(
        texts[2].starts_with("run fixture: 2 layers (1 parallel), 4 ops, 2 threads, 1 npu"),
        "{texts:?}"
    );
}

#[test]
fn device_errors_stop_the_run() {
    let mut fx = layer0(2.0);
    fx.txns[0][3] = 7; // rows: not the vnpu's 6
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let mut npu = Emulator::vnpu();
    let err = inst.run_ops_with_device(Some(&mut npu)).unwrap_err();
    assert!(matches!(err, Error::NpuHeader { offset: 3, .. }), "{err:?}");
    let mut engine = Engine::new(StdPort::new(), 2).unwrap();
    let err = engine
        .run_with_device(&mut inst, Some(&mut npu as &mut dyn Device))
        .unwrap_err();
    assert!(matches!(err, Error::NpuHeader { .. }), "{err:?}");
    let last = engine.log().iter().last().unwrap();
    assert_eq!(last.level(), Level::Error);
    assert!(
        last.text()
            .starts_with("npu npu0 on vnpu-emulator failed: "),
        "{}",
        last.text()
    );
}
