//! `NAME_config` validation: the runtime's hand-built test bundle with every count-free field of its tables
//! (areas, symbols, tensor descriptors, op arguments, tasks, layers, config header, a `fastOps` table's tasks and
//! layers) overwritten by the fuzzer.
//! Counts that size a table stay within the real table (the `ConfigView::new` contract: pointers are valid for
//! the counts given), everything else is arbitrary. Validation, making the bundle (weights size and checksum)
//! and an instance, and tensor lookups must give `Ok` or an error, never a panic or an overflow.
#![no_main]

use bundle_rt::fixture::Fixture;
use bundle_rt::{Bundle, Instance};
use libfuzzer_sys::fuzz_target;

fn take<const N: usize>(d: &mut &[u8]) -> Option<[u8; N]> {
    let (h, t) = d.split_first_chunk::<N>()?;
    *d = t;
    Some(*h)
}

fuzz_target!(|data: &[u8]| {
    let mut fx = Fixture::small();
    let mut d = data;
    let mut header = Vec::new();
    let (ns, nt, na, no, nl, nw) = (
        fx.symbols.len(),
        fx.tensors.len(),
        fx.args.len(),
        fx.ops.len(),
        fx.layers.len(),
        fx.weights.len(),
    );
    while let (Some([sel, idx]), Some(v)) = (take::<2>(&mut d), take::<8>(&mut d)) {
        let v = u64::from_le_bytes(v);
        let i = idx as usize;
        match sel % 16 {
            0 => fx.sizes[i % 3] = v,
            1 => fx.symbols[i % ns].offset = v,
            2 => fx.symbols[i % ns].size = v,
            3 => fx.symbols[i % ns].kind = v as u8,
            4 => fx.tensors[i % nt].dtype = v as u32,
            5 => fx.tensors[i % nt].rank = v as u32,
            6 => fx.tensors[i % nt].role = v as u32,
            7 => fx.tensors[i % nt].dims[i / 32 % 8] = v,
            8 => fx.tensors[i % nt].size_bytes = v,
            9 => {
                let op = i % na;
                let n = fx.args[op].len();
                if n > 0 {
                    let a = &mut fx.args[op][i / 16 % n];
                    match i / 64 {
                        0 => a.area = v as u32,
                        1 => a.offset = v,
                        _ => a.size = v,
                    }
                }
            }
            10 => fx.ops[i % no].num_tasks = v as u32,
            11 => fx.ops[i % no].layer = v as u32,
            12 => fx.layers[i % nl].first_op = v as u32,
            13 => fx.layers[i % nl].num_ops = v as u32,
            14 => fx.weights[i % nw] = v as u8,
            _ => header.push((idx, v)),
        }
    }
    let mut cfg = fx.config();
    // A fat bundle's `fastOps`: the op table again, its entries editable, present once a header edit asks.
    let mut fast = fx.ops.clone();
    for (idx, v) in header {
        match idx % 12 {
            0 => cfg.alignment = v,
            1 => cfg.num_inputs = v,
            2 => cfg.num_outputs = v,
            3 => cfg.flags = v as u32,
            4 => cfg.cpu_features = v,
            5 => cfg.weights_checksum = v,
            6 => cfg.num_symbols = v.min(cfg.num_symbols),
            7 => cfg.num_layers = v.min(cfg.num_layers),
            8 => cfg.fast_cpu_features = v,
            9 => cfg.fast_ops = fast.as_ptr(),
            10 => fast[v as usize % no].num_tasks = (v >> 32) as u32,
            _ => fast[v as usize % no].layer = (v >> 32) as u32,
        }
    }
    // SAFETY: every pointer of `cfg` points into `fx`'s live tables or `fast`, valid for the counts given. The kernels
    // are never run (a fuzzed argument table no longer matches them).
    let Ok(bundle) = (unsafe { Bundle::new(&cfg, fx.entry, &fx.weights) }) else {
        return;
    };
    let names: Vec<&str> = bundle.inputs().chain(bundle.outputs()).map(|t| t.name).collect();
    // Instances allocate the mutable and activation areas the config asks for; a huge request fails with
    // `OutOfMemory` in a normal build but aborts under AddressSanitizer, so the harness stops at 64 MiB.
    if cfg.mutable_weight_vars_mem_size.max(cfg.activations_mem_size) > 64 << 20 {
        return;
    }
    if let Ok(mut inst) = Instance::new(&bundle) {
        for n in names {
            let _ = inst.input_bytes_mut(n).map(|b| b.fill(1));
            let _ = inst.output_bytes(n);
        }
    }
});
