//! bundle-rt on real compiled bundles: a compiled `.o` loaded into the process runs through `Bundle`/`Instance`
//! (entry function and op table), and through the BSP engine at several thread counts; all must be bitwise
//! identical and match tract. Bad weights and bad bindings give typed errors.

use bundle_rt::engine::{Engine, SinglePort, StdPort};
use bundle_rt::{Bundle, Error};
use bundlec_tests::harness::{compile, tract_run};
use bundlec_tests::loaded::Loaded;
use bundlec_tests::{assert_close, models, rand_vec};

#[test]
fn lenet_through_bundle_rt_matches_tract_and_is_thread_count_invariant() {
    let model = models::lenet(2);
    let c = compile(&model, "rt_lenet");
    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle compiled for it.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    assert_eq!(b.inputs().count(), 1);
    let x = rand_vec(2 * 784, 7);
    let want = tract_run(&model, &[(vec![2, 1, 28, 28], x.clone())]);

    let mut inst = b.instance().expect("instance");
    inst.set_input("image", &x).expect("set input");
    inst.run().expect("run");
    let by_entry = inst.output::<f32>("prob").expect("output").to_vec();
    assert_close(
        std::slice::from_ref(&by_entry),
        &want,
        1e-4,
        "entry vs tract",
    );

    inst.run_ops().expect("run_ops");
    assert_eq!(
        inst.output::<f32>("prob").expect("output"),
        &by_entry[..],
        "op table bitwise"
    );

    for threads in [1, 2, 4] {
        let mut e = Engine::new(StdPort::new(), threads).expect("engine");
        let mut i2 = b.instance().expect("instance");
        i2.set_input("image", &x).expect("set input");
        e.run(&mut i2).expect("engine run");
        assert_eq!(
            i2.output::<f32>("prob").expect("output"),
            &by_entry[..],
            "engine at {threads} threads"
        );
    }
    let mut e = Engine::new(SinglePort::new(), 1).expect("single engine");
    let mut i3 = b.instance().expect("instance");
    i3.set_input("image", &x).expect("set input");
    e.run(&mut i3).expect("single run");
    assert_eq!(i3.output::<f32>("prob").expect("output"), &by_entry[..]);
}

#[test]
fn bad_weights_and_bindings_are_typed_errors() {
    let c = compile(&models::mlp(2), "rt_mlp");
    let l = Loaded::open(&c);
    let w = &c.bundle.weights;
    // SAFETY: as above; the weights are deliberately wrong.
    let short = unsafe { Bundle::new(l.config, l.entry, &w[..w.len() - 4]) };
    assert!(
        matches!(short, Err(Error::WeightsSize { .. })),
        "{:?}",
        short.err()
    );
    let mut bad = w.clone();
    bad[5] ^= 0x40;
    // SAFETY: as above.
    let flipped = unsafe { Bundle::new(l.config, l.entry, &bad) };
    assert!(
        matches!(flipped, Err(Error::WeightsChecksum { .. })),
        "{:?}",
        flipped.err()
    );
    // SAFETY: as above, with the right weights.
    let b = unsafe { Bundle::new(l.config, l.entry, w) }.expect("bundle");
    let mut inst = b.instance().expect("instance");
    let e = inst
        .set_input("nope", &[0.0f32; 74])
        .expect_err("unknown name");
    assert!(e.to_string().contains("nope"), "{e}");
    let e = inst.set_input("x", &[0.0f32; 3]).expect_err("wrong size");
    assert!(e.to_string().contains('x'), "{e}");
    let e = inst.set_input("x", &[0i64; 74]).expect_err("wrong dtype");
    assert!(!e.to_string().is_empty());
}

#[test]
fn runner_executes_the_emitted_recipe_like_the_entry_function() {
    use bundle_rt::runner::Runner;
    let model = models::shapes();
    let c = compile(&model, "rt_shapes");
    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle compiled for it.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    let (a, bb) = (rand_vec(30, 41), rand_vec(40, 42));
    let mut inst = b.instance().expect("instance");
    inst.set_input("a", &a).expect("a");
    inst.set_input("b", &bb).expect("b");
    inst.run().expect("entry");
    let (want_y, want_z) = (
        inst.output::<f32>("y").expect("y").to_vec(),
        inst.output::<f32>("z").expect("z").to_vec(),
    );

    let as_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (mut y, mut z) = (vec![0u8; 70 * 4], vec![0u8; 70 * 4]);
    {
        let mut r = Runner::new(&b, &c.bundle.recipe).expect("runner");
        r.bind_input("a", &as_bytes(&a)).expect("bind a");
        r.bind_input("b", &as_bytes(&bb)).expect("bind b");
        r.bind_output("y", &mut y).expect("bind y");
        r.bind_output("z", &mut z).expect("bind z");
        r.execute().expect("execute");
        r.wait().expect("wait");
    }
    assert_eq!(y, as_bytes(&want_y), "runner y bitwise");
    assert_eq!(z, as_bytes(&want_z), "runner z bitwise");

    // Bad bindings and a bad recipe are typed errors.
    let mut r = Runner::new(&b, &c.bundle.recipe).expect("runner");
    assert!(r.bind_input("nope", &[0u8; 4]).is_err());
    assert!(r.bind_input("a", &[0u8; 3]).is_err());
    assert!(r.execute().is_err(), "unbound inputs");
    let broken = c.bundle.recipe.replace("\"argidx\": 1", "\"argidx\": 99");
    assert!(Runner::new(&b, &broken).is_err());
}

/// `--inputs-in-activations`: no mutable area, inputs and outputs inside the activation area (config flag 1),
/// less memory in all; the C driver, the entry function, the op table, the engine and the recipe Runner all
/// give the same bits as the ordinary bundle.
#[test]
fn inputs_in_activations_run_everywhere_with_less_memory() {
    use bundle_rt::runner::Runner;
    use bundlec_tests::harness::{compile_with, run_c};
    let model = models::lenet(2);
    let plain = compile(&model, "io_plain");
    let mut o = bundlec::Options::new("io_act");
    o.io_in_activations = true;
    let c = compile_with(&model, o);
    let [_, m0, a0] = plain.bundle.report.sizes;
    let [_, m1, a1] = c.bundle.report.sizes;
    assert_eq!(m1, 0, "no mutable area");
    assert!(a1 <= m0 + a0, "activations {a1} > {m0} + {a0}");
    let h = std::fs::read_to_string(c.dir.join("io_act.h")).expect("header");
    assert!(h.contains("#define IO_ACT_IO_IN_ACTIVATIONS 1"), "{h}");

    let x = rand_vec(2 * 784, 9);
    let by_c = run_c(&c, std::slice::from_ref(&x), &[20]);
    let want = run_c(&plain, std::slice::from_ref(&x), &[20]);
    assert_eq!(by_c, want, "C driver bitwise");

    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle compiled for it.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    assert!(b.view().io_in_activations());
    let mut inst = b.instance().expect("instance");
    inst.set_input("image", &x).expect("set input");
    inst.run().expect("run");
    assert_eq!(inst.output::<f32>("prob").expect("output"), &want[0][..]);
    // A run reuses the inputs' space once they are consumed: set them again before the next run.
    inst.set_input("image", &x).expect("set input");
    inst.run_ops().expect("run_ops");
    assert_eq!(inst.output::<f32>("prob").expect("output"), &want[0][..]);
    let mut e = Engine::new(StdPort::new(), 2).expect("engine");
    let mut i2 = b.instance().expect("instance");
    i2.set_input("image", &x).expect("set input");
    e.run(&mut i2).expect("engine run");
    assert_eq!(i2.output::<f32>("prob").expect("output"), &want[0][..]);

    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut y = vec![0u8; 20 * 4];
    {
        let mut r = Runner::new(&b, &c.bundle.recipe).expect("runner");
        r.bind_input("image", &xb).expect("bind");
        r.bind_output("prob", &mut y).expect("bind out");
        r.execute().expect("execute");
        r.wait().expect("wait");
    }
    let yb: Vec<u8> = want[0].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(y, yb, "runner bitwise");

    let mut npu = bundlec::Options::new("io_npu");
    npu.io_in_activations = true;
    npu.npu = Some(bundlec::partition::PartitionOptions {
        target: bundlec::npu::NpuTarget::vnpu(),
        min_gain: -1.0,
        cache: None,
        strict: false,
        model_hash: 0,
    });
    let dir = bundlec_tests::harness::scratch("io_npu");
    std::fs::write(dir.join("m.onnx"), &model).expect("write");
    let err = bundlec::compile_file(&dir.join("m.onnx"), &npu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--inputs-in-activations"), "{err}");
}
