//! `NAME.recipe.json`: the same execution as the entry function, in XRT's run-recipe format (SPEC §8). Buffers:
//! one external `input`/`output` buffer per model input/output, the external `weight` buffer `weights` (the
//! constant area) and the `internal` buffer `activations`. Every kernel is a cpu resource (`library_name` is the
//! bundle: the runtime resolves the name in the op table, never by loading a library) and one run, whose
//! arguments are the kernel's buffers in order, as sub-buffers where they are slices, followed by an `int`
//! constant holding the task count.

use crate::codegen::kernel::Lowering;
use crate::error::{Error, Result};
use crate::ir::Graph;
use crate::plan::{Area, MemoryPlan, Schedule};
use serde_json::{json, Value};

/// Name of the weights buffer.
pub const WEIGHTS: &str = "weights";
/// Name of the activation buffer.
pub const ACTIVATIONS: &str = "activations";

/// Builds the recipe document.
pub fn recipe(
    name: &str,
    g: &Graph,
    l: &Lowering,
    s: &Schedule,
    plan: &MemoryPlan,
) -> Result<Value> {
    let mut buffers = Vec::new();
    let mut mutable_names = std::collections::HashMap::new();
    for (&t, ty) in g
        .inputs
        .iter()
        .map(|t| (t, "input"))
        .chain(g.outputs.iter().map(|t| (t, "output")))
    {
        let n = &g.tensors[t].name;
        buffers.push(json!({ "name": n, "type": ty }));
        mutable_names.insert(
            plan.loc[&crate::codegen::kernel::Buf::Tensor(t)].offset,
            n.clone(),
        );
    }
    buffers.push(json!({ "name": WEIGHTS, "type": "weight" }));
    buffers.push(json!({ "name": ACTIVATIONS, "type": "internal", "size": plan.activation_size }));
    let mut cpus = Vec::new();
    let mut runs = Vec::new();
    for &ki in &s.order {
        let k = &l.kernels[ki];
        cpus.push(json!({ "name": k.name, "library_name": name }));
        let mut args = Vec::new();
        for (i, b) in k.args.iter().enumerate() {
            let loc = plan.loc.get(b).ok_or_else(|| {
                Error::internal("recipe", format!("kernel '{}' arg {i} unplaced", k.name))
            })?;
            args.push(match loc.area {
                Area::Mutable => {
                    let n = mutable_names.get(&loc.offset).ok_or_else(|| Error::internal("recipe", "unnamed mutable"))?;
                    json!({ "name": n, "argidx": i })
                }
                Area::Constant => json!({ "name": WEIGHTS, "argidx": i, "offset": loc.offset, "size": loc.size }),
                Area::Activations => json!({ "name": ACTIVATIONS, "argidx": i, "offset": loc.offset, "size": loc.size }),
            });
        }
        runs.push(json!({
            "name": k.name,
            "where": "cpu",
            "arguments": args,
            "constants": [ { "value": k.tasks, "type": "int", "argidx": k.args.len() } ],
        }));
    }
    Ok(json!({
        "version": "1.0",
        "header": { "program": format!("{name}.o") },
        "resources": { "buffers": buffers, "cpus": cpus },
        "execution": { "runs": runs },
    }))
}
