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

/// The AVX-512 kernel set's channel-blocked layouts (`lower/cnn/blocked.rs`) through the engine: an inverted
/// residual on 14x14 planes (expansion → channel-blocked depthwise → projection, all in blocks), a bottleneck
/// whose residual is added from blocks, a stride-2 downsample reading blocks and a GlobalAveragePool head
/// averaging them. The engine at 1, 2 and 4 threads is bitwise the entry function, which matches tract.
#[cfg(target_arch = "x86_64")]
#[test]
fn blocked_layouts_are_thread_count_invariant() {
    use bundlec_tests::onnx::{Attr, Model};
    let v4 = bundlec_tests::harness::kernel_variants()
        .iter()
        .any(|&(cpu, ok)| cpu == "x86-64-v4" && ok);
    if !v4 {
        eprintln!("SKIPPED: the blocked layouts need the AVX-512 kernels (x86-64-v4), which this CPU lacks");
        return;
    }
    let (cin, c, e, mid, cds) = (16, 64, 192, 32, 128);
    let mut g = Model::new();
    g.input("x", &[1, cin, 14, 14]);
    g.output("head", &[1, cds, 1, 1]);
    let conv = |g: &mut Model, name: &str, ins: [&str; 2], shape: [usize; 4], seed: u64| {
        g.init(ins[1], &shape, rand_vec(shape.iter().product(), seed));
        let group = if shape[1] == 1 { shape[0] as i64 } else { 1 };
        let k = shape[2] as i64;
        let attrs = vec![
            ("group", Attr::Int(group)),
            ("pads", Attr::Ints(vec![k / 2; 4])),
        ];
        g.node("Conv", &[ins[0], ins[1]], &[name], attrs);
    };
    conv(&mut g, "c0", ["x", "w0"], [c, cin, 1, 1], 50);
    g.node("Relu", &["c0"], &["y0"], vec![]);
    // Inverted residual: expansion, 3x3 depthwise, projection + residual.
    conv(&mut g, "ex", ["y0", "we"], [e, c, 1, 1], 51);
    g.node("Relu", &["ex"], &["exr"], vec![]);
    conv(&mut g, "dw", ["exr", "wd"], [e, 1, 3, 3], 52);
    g.node("Relu", &["dw"], &["dwr"], vec![]);
    conv(&mut g, "pr", ["dwr", "wp"], [c, e, 1, 1], 53);
    g.node("Add", &["pr", "y0"], &["y1"], vec![]);
    // Bottleneck: 1x1 down, 1x1 up + residual.
    conv(&mut g, "b1", ["y1", "wb1"], [mid, c, 1, 1], 54);
    g.node("Relu", &["b1"], &["b1r"], vec![]);
    conv(&mut g, "b2", ["b1r", "wb2"], [c, mid, 1, 1], 55);
    g.node("Add", &["b2", "y1"], &["s2"], vec![]);
    g.node("Relu", &["s2"], &["y2"], vec![]);
    // Stride-2 downsample and the head.
    g.init("wds", &[cds, c, 1, 1], rand_vec(cds * c, 56));
    let stride = vec![("strides", Attr::Ints(vec![2, 2]))];
    g.node("Conv", &["y2", "wds"], &["ds"], stride);
    g.node("Relu", &["ds"], &["dsr"], vec![]);
    g.node("GlobalAveragePool", &["dsr"], &["head"], vec![]);
    let model = g.bytes();
    let mut o = bundlec::Options::new("rt_blocked");
    o.cpu = "x86-64-v4".into();
    let c = bundlec_tests::harness::compile_with(&model, o);
    let ins = bundlec::emit::inspect::inspect("rt_blocked.o", &c.bundle.object).expect("inspect");
    let names: Vec<&str> = ins.ops.iter().map(|op| op.name.as_str()).collect();
    // Only the graph input is packed; the downsample subsamples blocks.
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".pack")).count(),
        1,
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.ends_with(".subsample")), "{names:?}");
    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle compiled for it.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    let x = rand_vec(cin * 196, 57);
    let want = tract_run(&model, &[(vec![1, cin, 14, 14], x.clone())]);
    let mut inst = b.instance().expect("instance");
    inst.set_input("x", &x).expect("set input");
    inst.run().expect("run");
    let by_entry = inst.output::<f32>("head").expect("output").to_vec();
    assert_close(
        std::slice::from_ref(&by_entry),
        &want,
        1e-4,
        "entry vs tract",
    );
    for threads in [1, 2, 4] {
        let mut e = Engine::new(StdPort::new(), threads).expect("engine");
        let mut i2 = b.instance().expect("instance");
        i2.set_input("x", &x).expect("set input");
        e.run(&mut i2).expect("engine run");
        assert_eq!(
            i2.output::<f32>("head").expect("output"),
            &by_entry[..],
            "engine at {threads} threads"
        );
    }
}
