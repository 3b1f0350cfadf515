//! The BSP engine: same bits as the entry function and the op table for 1, 2, 3, 4 and 8 threads (also with
//! more threads than a layer has tasks, and with workers asleep between runs),
//! every task run exactly once per run, thread-count errors, the single-thread port, profiling, log.

use std::vec::Vec;

use super::{bits, load};
use crate::engine::{Engine, Port, SinglePort, StdPort};
use crate::fixture::Fixture;
use crate::{Error, Level, OpTiming};

/// Runs `runs` different inputs through an engine of `threads` threads and through the entry
/// function; asserts identical bits and exact task counts.
fn check_engine<P: Port>(port: P, threads: usize, runs: i32) {
    check_engine_on(Fixture::large(), port, threads, runs, None);
}

/// As [`check_engine`] on `fx`, pausing `pause` between runs (long enough and the workers sleep).
fn check_engine_on<P: Port>(
    fx: Fixture,
    port: P,
    threads: usize,
    runs: i32,
    pause: Option<std::time::Duration>,
) {
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut engine = Engine::new(port, threads).unwrap();
    assert_eq!(engine.threads(), threads);
    let mut by_engine = bundle.instance().unwrap();
    let mut by_entry = bundle.instance().unwrap();
    for run in 0..runs {
        if let Some(pause) = pause.filter(|_| run % 2 == 1) {
            std::thread::sleep(pause);
        }
        let x = fx.input(run as f32 * 0.125);
        by_engine.set_input("x", &x).unwrap();
        by_entry.set_input("x", &x).unwrap();
        engine.run(&mut by_engine).unwrap();
        by_entry.run().unwrap();
        let y = bits(by_engine.output("y").unwrap());
        assert_eq!(
            y,
            bits(by_entry.output("y").unwrap()),
            "threads {threads}, run {run}"
        );
        assert_eq!(y, bits(&fx.expected(&x)), "threads {threads}, run {run}");
    }
    let marks = by_engine.output::<i32>("marks").unwrap();
    assert_eq!(
        marks.len(),
        fx.ops[3].num_tasks as usize,
        "one mark per task of `mark`"
    );
    assert!(
        marks.iter().all(|&m| m == runs),
        "threads {threads}: {marks:?}"
    );
}

#[test]
fn std_engine_one_thread() {
    check_engine(StdPort::new(), 1, 5);
}

#[test]
fn std_engine_two_threads() {
    check_engine(StdPort::new(), 2, 40);
}

#[test]
fn std_engine_four_threads() {
    check_engine(StdPort::new(), 4, 40);
}

#[test]
fn std_engine_eight_threads() {
    check_engine(StdPort::new(), 8, 20);
}

/// Layers of 6 and 3 tasks on 8 threads: only the first `tasks` threads take part (the rest neither
/// wake nor meet at the barrier); with pauses between runs the workers fall asleep, and a layer that
/// leaves some of them out must still wake the ones it takes in.
#[test]
fn std_engine_more_threads_than_tasks() {
    check_engine_on(Fixture::small(), StdPort::new(), 8, 60, None);
    let pause = Some(std::time::Duration::from_millis(30));
    check_engine_on(Fixture::small(), StdPort::new(), 8, 8, pause);
    check_engine_on(Fixture::small(), StdPort::new(), 3, 8, pause);
}

#[test]
fn single_port_engine() {
    check_engine(SinglePort::new(), 1, 3);
    let err = Engine::new(SinglePort::new(), 2).unwrap_err();
    assert_eq!(
        err,
        Error::BadThreadCount {
            requested: 2,
            max: 1
        }
    );
}

#[test]
fn thread_count_limits() {
    let err = Engine::new(StdPort::new(), 0).unwrap_err();
    assert!(matches!(err, Error::BadThreadCount { requested: 0, .. }));
    let err = Engine::new(StdPort::new(), 100_000).unwrap_err();
    assert!(matches!(
        err,
        Error::BadThreadCount {
            requested: 100_000,
            max: 256
        }
    ));
}

#[test]
fn one_engine_many_instances() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut engine = Engine::new(StdPort::new(), 3).unwrap();
    let mut instances: Vec<_> = (0..4).map(|_| bundle.instance().unwrap()).collect();
    for (i, inst) in instances.iter_mut().enumerate() {
        inst.set_input("x", &fx.input(i as f32)).unwrap();
        engine.run(inst).unwrap();
    }
    for (i, inst) in instances.iter().enumerate() {
        assert_eq!(
            bits(inst.output("y").unwrap()),
            bits(&fx.expected(&fx.input(i as f32)))
        );
    }
}

#[test]
fn profiled_engine_run_and_log() {
    let fx = Fixture::large();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut inst = bundle.instance().unwrap();
    let mut engine = Engine::new(StdPort::new(), 4).unwrap();
    let timings = OpTiming::table(4);
    engine.run_profiled(&mut inst, &timings).unwrap();
    engine.run_profiled(&mut inst, &timings).unwrap();
    let counts: Vec<u64> = timings.iter().map(OpTiming::tasks).collect();
    assert_eq!(counts, [128, 64, 86, 74]);
    assert!(timings.iter().all(|t| t.last_end() >= t.first_start()));
    let err = engine.run_profiled(&mut inst, &timings[..2]).unwrap_err();
    assert!(matches!(
        err,
        Error::BufferTooSmall {
            needed: 4,
            got: 2,
            ..
        }
    ));
    let texts: Vec<&str> = engine.log().iter().map(|r| r.text()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(texts[0], "engine started: 4 threads");
    assert!(
        texts[1].starts_with("run fixture: 2 layers (2 parallel), 4 ops, 4 threads"),
        "{texts:?}"
    );
    assert!(engine.log().iter().all(|r| r.level() == Level::Info));
}
