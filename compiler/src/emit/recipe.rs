//! `NAME.recipe.json`: the same execution as the entry function, in XRT's run-recipe format (SPEC §8). Buffers:
//! one external `input`/`output` buffer per model input/output, the external `weight` buffer `weights` (the
//! constant area) and the `internal` buffer `activations`. Every kernel is a cpu resource (`library_name` is the
//! bundle: the runtime resolves the name in the op table, never by loading a library) and one run, whose
//! arguments are the kernel's buffers in order, as sub-buffers where they are slices, followed by an `int`
//! constant holding the task count.
//!
//! With NPU segments (SPEC §7–8), `header.xclbin` names the device configuration (the target description)
//! instead of `header.program`, `resources.kernels` lists one kernel per segment (`instance` "DPU", the XRT kernel
//! of Ryzen AI's xclbins; no `ctrlcode`, which XRT loads as ELF control code), each segment has an external
//! `weight` buffer `<segment>.instr` (its instruction buffer: `u32 0`, `u32` bytes + 8, `NAME.<segment>.txn`,
//! which the runtime fills), and the runs of a segment's layers are replaced by: `bundlert_copy` cpu runs filling
//! its fused `in` staging buffer, one npu run in DynamicDispatch's convention (arg0 = opcode 2, an aie-rt v0.1
//! transaction; arg1 the instruction buffer; arg2 its size in 32-bit words; args 3..7 the fused `in`, `out`,
//! `scratch`, `const`, `super_instr` buffers), and copy runs draining `out`. `bundlert_copy` is a function of the
//! runtime itself (`library_name` "bundlert"): it copies argument 0 into argument 1. `resources.kernels` is
//! always present (XRT's runner requires it). Buffer names are unique: a reserved name that a model tensor
//! already has gets a numeric suffix.

use super::segments::{NpuCopy, SegmentLayout};
use crate::codegen::{table_ops, Alt, PairOp};
use crate::error::{Error, Result};
use crate::ir::Graph;
use crate::kernel::Lowering;
use crate::plan::{Area, MemoryPlan, Schedule};
use serde_json::{json, Value};

/// Name of the weights buffer.
pub const WEIGHTS: &str = "weights";
/// Name of the activation buffer.
pub const ACTIVATIONS: &str = "activations";
/// The runtime's built-in copy function.
pub const COPY_FN: &str = "bundlert_copy";
/// The kernel `instance` of npu runs: the DPU kernel of Ryzen AI's xclbins, which DynamicDispatch calls.
pub const DPU_INSTANCE: &str = "DPU";

/// `base`, or `base_1`, `base_2`, ... : the first that `taken` does not hold (it is then added).
fn unique_name(taken: &mut std::collections::HashSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 0;
    while taken.contains(&name) {
        k += 1;
        name = format!("{base}_{k}");
    }
    taken.insert(name.clone());
    name
}

/// Builds the recipe document.
pub fn recipe(
    name: &str,
    g: &Graph,
    l: &Lowering,
    (s, pairs): (&Schedule, &[PairOp]),
    plan: &MemoryPlan,
    segments: &[SegmentLayout],
    target: Option<&str>,
) -> Result<Value> {
    let mut buffers = Vec::new();
    let mut taken: std::collections::HashSet<String> = g
        .inputs
        .iter()
        .chain(&g.outputs)
        .map(|&t| g.tensors[t].name.clone())
        .collect();
    let weights = unique_name(&mut taken, WEIGHTS);
    let activations = unique_name(&mut taken, ACTIVATIONS);
    let instr_names: Vec<String> = segments
        .iter()
        .map(|sg| unique_name(&mut taken, &format!("{}.instr", sg.id)))
        .collect();
    let mut mutable_names = std::collections::HashMap::new();
    // Model inputs and outputs are the recipe's bound buffers wherever the plan put them (the mutable area, or
    // the activation area with --inputs-in-activations).
    let mut io_names = std::collections::HashMap::new();
    for (&t, ty) in g
        .inputs
        .iter()
        .map(|t| (t, "input"))
        .chain(g.outputs.iter().map(|t| (t, "output")))
    {
        let n = &g.tensors[t].name;
        buffers.push(json!({ "name": n, "type": ty }));
        io_names.insert(crate::kernel::Buf::Tensor(t), n.clone());
        mutable_names.insert(plan.loc[&crate::kernel::Buf::Tensor(t)].offset, n.clone());
    }
    buffers.push(json!({ "name": weights, "type": "weight" }));
    buffers.push(json!({ "name": activations, "type": "internal", "size": plan.activation_size }));
    for (sg, n) in segments.iter().zip(&instr_names) {
        let size = sg.txn.len() + bundle_rt::NPU_INSTR_HEADER_BYTES;
        buffers.push(json!({ "name": n, "type": "weight", "size": size }));
    }
    let mut cpus = Vec::new();
    let mut runs = Vec::new();
    let mut kernels = Vec::new();
    if !segments.is_empty() {
        cpus.push(json!({ "name": COPY_FN, "library_name": "bundlert" }));
    }
    let area_arg = |area: Area, offset: usize, size: usize, argidx: usize| -> Result<Value> {
        Ok(match area {
            Area::Mutable => {
                let n = mutable_names
                    .get(&offset)
                    .ok_or_else(|| Error::internal("recipe", "unnamed mutable"))?;
                json!({ "name": n, "argidx": argidx })
            }
            Area::Constant => {
                json!({ "name": weights, "argidx": argidx, "offset": offset, "size": size })
            }
            Area::Activations => {
                json!({ "name": activations, "argidx": argidx, "offset": offset, "size": size })
            }
        })
    };
    let copy_run = |c: &NpuCopy, staging: usize, into: bool| -> Result<Value> {
        let tensor = area_arg(c.area, c.offset, c.size, if into { 0 } else { 1 })?;
        let fused = json!({ "name": activations, "argidx": if into { 1 } else { 0 }, "offset": staging + c.fused, "size": c.size });
        let args = if into {
            vec![tensor, fused]
        } else {
            vec![fused, tensor]
        };
        Ok(json!({ "name": COPY_FN, "where": "cpu", "arguments": args }))
    };
    let mut done = vec![false; segments.len()];
    // The recipe runs the entry function's schedule: a pair's op, not its kernels alone.
    let table = table_ops(&s.order, pairs);
    for op in table
        .iter()
        .filter(|op| !matches!(op.alt, Alt::Unpaired(_)))
    {
        let ki = op.kernels[0];
        if let Some(si) = segments
            .iter()
            .position(|sg| (sg.layers.0..sg.layers.0 + sg.layers.1).contains(&s.layer[ki]))
        {
            if done[si] {
                continue;
            }
            done[si] = true;
            let sg = &segments[si];
            kernels.push(json!({ "name": sg.id, "instance": DPU_INSTANCE }));
            for c in &sg.copy_in {
                runs.push(copy_run(c, sg.staging[0].offset, true)?);
            }
            let act = |j: usize, loc: &crate::plan::Location| json!({ "name": activations, "argidx": j, "offset": loc.offset, "size": loc.size });
            let instr_words = (sg.txn.len() + bundle_rt::NPU_INSTR_HEADER_BYTES).div_ceil(4);
            runs.push(json!({
                "name": sg.id,
                "where": "npu",
                "arguments": [
                    { "name": instr_names[si], "argidx": 1 },
                    act(3, &sg.staging[0]),
                    act(4, &sg.staging[1]),
                    act(5, &sg.staging[2]),
                    { "name": weights, "argidx": 6, "offset": sg.consts.0, "size": sg.consts.1.max(1) },
                    { "name": weights, "argidx": 7, "offset": sg.params.0, "size": sg.params.1.max(1) },
                ],
                "constants": [
                    { "value": bundle_rt::NPU_OPCODE_TXN, "type": "int", "argidx": 0 },
                    { "value": instr_words, "type": "int", "argidx": 2 },
                ],
            }));
            for c in &sg.copy_out {
                runs.push(copy_run(c, sg.staging[1].offset, false)?);
            }
            continue;
        }
        // An interleaved pair is one op of the table (`codegen::PairOp`): both kernels' arguments, G tasks.
        let (op_name, tasks) = (op.name(l), op.tasks(l));
        cpus.push(json!({ "name": op_name, "library_name": name }));
        let mut args = Vec::new();
        let bufs = op.kernels.iter().flat_map(|&k| &l.kernels[k].args);
        for (i, b) in bufs.map(|a| &a.buf).enumerate() {
            let loc = plan.loc.get(b).ok_or_else(|| {
                Error::internal("recipe", format!("op '{op_name}' arg {i} unplaced"))
            })?;
            match io_names.get(b) {
                Some(n) => args.push(json!({ "name": n, "argidx": i })),
                None => args.push(area_arg(loc.area, loc.offset, loc.size, i)?),
            }
        }
        let argc = args.len();
        runs.push(json!({
            "name": op_name,
            "where": "cpu",
            "arguments": args,
            "constants": [ { "value": tasks, "type": "int", "argidx": argc } ],
        }));
    }
    let header = match (segments.is_empty(), target) {
        (false, Some(t)) => json!({ "xclbin": format!("{t}.json") }),
        _ => json!({ "program": format!("{name}.o") }),
    };
    Ok(json!({
        "version": "1.0",
        "header": header,
        "resources": { "buffers": buffers, "kernels": kernels, "cpus": cpus },
        "execution": { "runs": runs },
    }))
}
