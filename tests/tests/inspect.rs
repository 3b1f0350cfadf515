//! `bundlec inspect` reads a bundle object back (config, symbols, ops, layers, features) and checks a weights file
//! against it; `--embed-weights` bundles run with no weights file. Damaged objects give errors, never panics.

use bundlec::emit::inspect::inspect;
use bundlec::emit::inspect_text::{check_weights, render};
use bundlec_tests::harness::{compile, compile_with, run_c, tract_run};
use bundlec_tests::{assert_close, models, rand_vec};

#[test]
fn inspect_reads_back_the_config() {
    let c = compile(&models::lenet(2), "insp_lenet");
    let ins = inspect("insp_lenet.o", &c.bundle.object).expect("inspect");
    assert_eq!(ins.name, "insp_lenet");
    assert_eq!(ins.config_symbol, "insp_lenet_config");
    let r = &c.bundle.report;
    assert_eq!(ins.areas, r.sizes.map(|s| s as u64));
    assert_eq!(ins.ops.len(), r.kernels);
    assert_eq!(ins.layers.len(), r.layers);
    let (name, shape, _) = &c.bundle.inputs[0];
    let x = &ins.symbols[0];
    assert_eq!(
        (x.name.as_str(), x.role, x.dtype.as_str()),
        (name.as_str(), "input", "f32")
    );
    assert_eq!(x.shape, shape.iter().map(|&d| d as u64).collect::<Vec<_>>());
    assert_eq!(ins.symbols[1].role, "output");
    assert!(ins.symbols[2..].iter().all(|s| s.role == "constant"));
    // Every op's layer is within the table, and layers cover the ops in order.
    let mut next = 0;
    for (l, [first, n]) in ins.layers.iter().enumerate() {
        assert_eq!(*first, next);
        for op in &ins.ops[*first as usize..(*first + *n) as usize] {
            assert_eq!(op.layer as usize, l, "{}", op.name);
            assert!(op.tasks >= 1 && !op.args.is_empty(), "{}", op.name);
        }
        next += n;
    }
    assert!(
        ins.exports.contains(&"insp_lenet".to_string()),
        "{:?}",
        ins.exports
    );
    if cfg!(target_arch = "x86_64") {
        // The default --cpu is x86-64-v3.
        assert_eq!(ins.cpu_features, ["sse2", "avx", "fma", "avx2"]);
    }
    check_weights(&ins, &c.bundle.weights).expect("weights match");
    let mut other = c.bundle.weights.clone();
    other[3] ^= 1;
    assert!(check_weights(&ins, &other)
        .unwrap_err()
        .contains("another build"));
    assert!(check_weights(&ins, &other[1..])
        .unwrap_err()
        .contains("constantWeightVarsMemSize"));
    let text = render(&ins);
    assert!(text.contains("BSP layers") && text.contains(name), "{text}");
}

#[test]
fn damaged_objects_give_errors_not_panics() {
    let c = compile(&models::mlp(1), "insp_mlp");
    let obj = &c.bundle.object;
    let err = inspect("x.o", b"not an object").unwrap_err().to_string();
    assert!(err.contains("not an object file"), "{err}");
    for cut in [16, 64, obj.len() / 3, obj.len() / 2, obj.len() - 8] {
        let _ = inspect("cut.o", &obj[..cut]); // an error or a partial read, never a panic
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..300 {
        let mut m = obj.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state % m.len() as u64) as usize;
            m[at] = (state >> 32) as u8;
        }
        let _ = inspect("mutated.o", &m);
    }
}

#[test]
fn embedded_weights_need_no_file() {
    let mut o = bundlec::Options::new("emb_lenet");
    o.embed_weights = true;
    let m = models::lenet(1);
    let c = compile_with(&m, o);
    assert!(!c.dir.join("emb_lenet.weights").exists());
    let h = std::fs::read_to_string(c.dir.join("emb_lenet.h")).expect("header");
    assert!(
        h.contains("extern const uint8_t emb_lenet_weights[EMB_LENET_CONSTANT_MEM_SIZE];"),
        "{h}"
    );
    assert!(h.contains("#define EMB_LENET_WEIGHTS_EMBEDDED 1"), "{h}");
    // The object holds the image under NAME_weights, 64-aligned.
    use object::{Object, ObjectSection, ObjectSymbol};
    let file = object::File::parse(&*c.bundle.object).expect("parse");
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok("emb_lenet_weights"))
        .expect("NAME_weights");
    let sec = file
        .section_by_index(sym.section_index().expect("defined"))
        .expect("section");
    let at = (sym.address() - sec.address()) as usize;
    let data = sec.data().expect("data");
    assert_eq!(
        &data[at..at + c.bundle.weights.len()],
        &c.bundle.weights[..]
    );
    assert!(sec.align() >= 64);
    // The C driver passes NULL for the constant area (run_bundle.c's "-").
    let x = rand_vec(784, 77);
    let got = run_c(&c, std::slice::from_ref(&x), &[10]);
    let want = tract_run(&m, &[(vec![1, 1, 28, 28], x)]);
    assert_close(&got, &want, 1e-4, "embedded lenet");
}
