//! The human-readable form of [`Inspection`] (`bundlec inspect NAME.o` without `--json`) and the check of a
//! `.weights` file against the config it belongs to.

use super::inspect::Inspection;
use std::fmt::Write;

/// Checks a weights image against the config: size (`constantWeightVarsMemSize`) and FNV-1a 64 checksum.
pub fn check_weights(ins: &Inspection, weights: &[u8]) -> Result<(), String> {
    if weights.len() as u64 != ins.areas[0] {
        return Err(format!(
            "{} bytes, the config expects {} (constantWeightVarsMemSize)",
            weights.len(),
            ins.areas[0]
        ));
    }
    let sum = format!("{:#018x}", super::weights::checksum64(weights));
    if sum != ins.weights_checksum {
        return Err(format!(
            "checksum {sum} differs from the config's {}: the file belongs to another build",
            ins.weights_checksum
        ));
    }
    Ok(())
}

fn shape(s: &[u64]) -> String {
    if s.is_empty() {
        return "scalar".into();
    }
    s.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
}

/// Renders the inspection as text: summary, symbols, layers with their ops, NPU segments.
pub fn render(ins: &Inspection) -> String {
    let mut o = String::new();
    let [c, m, a] = ins.areas;
    let _ = writeln!(
        o,
        "bundle {} ({}), {}, format version {}",
        ins.name, ins.object, ins.config_symbol, ins.version
    );
    let feats = if ins.cpu_features.is_empty() {
        "the target's baseline".to_string()
    } else {
        ins.cpu_features.join(" ")
    };
    let _ = writeln!(o, "cpu features: {feats}");
    if let Some(fast) = &ins.fast_cpu_features {
        let _ = writeln!(
            o,
            "fast op table (fat bundle; bundle-rt runs it where the CPU has them): {}",
            fast.join(" ")
        );
    }
    let _ = writeln!(o, "exports: {}", ins.exports.join(", "));
    if ins.flags & 1 != 0 {
        let _ = writeln!(
            o,
            "flags: {:#x} (inputs and outputs in the activation area: --inputs-in-activations)",
            ins.flags
        );
    }
    let _ = writeln!(
        o,
        "areas: constant {c} B, mutable {m} B, activations {a} B (alignment {}); weights checksum {}",
        ins.alignment, ins.weights_checksum
    );
    match &ins.embedded_weights {
        Some(Ok(())) => {
            let _ = writeln!(
                o,
                "weights: embedded as {}_weights, checksum matches",
                ins.name
            );
        }
        Some(Err(e)) => {
            let _ = writeln!(o, "weights: embedded, MISMATCH: {e}");
        }
        None => {}
    }
    let _ = writeln!(o, "\nsymbols ({}):", ins.symbols.len());
    let _ = writeln!(
        o,
        "  {:<8} {:<5} {:<18} {:>12} {:>12}  name",
        "role", "dtype", "shape", "offset", "bytes"
    );
    for s in &ins.symbols {
        let _ = writeln!(
            o,
            "  {:<8} {:<5} {:<18} {:>12} {:>12}  {}",
            s.role,
            s.dtype,
            shape(&s.shape),
            s.offset,
            s.bytes,
            s.name
        );
    }
    let _ = writeln!(
        o,
        "\nops ({}) in {} BSP layers:",
        ins.ops.len(),
        ins.layers.len()
    );
    let _ = writeln!(
        o,
        "  {:>5} {:>5}  {:<40} args (area:offset+bytes)",
        "layer", "tasks", "op"
    );
    for op in &ins.ops {
        let args: Vec<String> = op
            .args
            .iter()
            .map(|x| format!("{}:{}+{}", &x.area[..1], x.offset, x.size))
            .collect();
        let name = match bundle_rt::config::split_pairing(op.pairing) {
            (bundle_rt::config::PAIRED, g) => format!("{} (pair, {g} groups)", op.name),
            (bundle_rt::config::UNPAIRED, g) => format!("{} (unpaired, {g} groups)", op.name),
            _ => op.name.clone(),
        };
        let _ = writeln!(
            o,
            "  {:>5} {:>5}  {:<40} {}",
            op.layer,
            op.tasks,
            name,
            args.join(" ")
        );
    }
    if !ins.segments.is_empty() {
        let _ = writeln!(o, "\nNPU segments ({}):", ins.segments.len());
        for s in &ins.segments {
            let [i, d, k] = s.est_cycles;
            let _ = writeln!(
                o,
                "  {}: layers {}..{}, transaction {} B, in {} B, out {} B, scratch {} B, constants {} B, params {} B, {} copy-in / {} copy-out, est. cycles {i} instr / {d} data / {k} compute",
                s.name,
                s.first_layer,
                u64::from(s.first_layer) + u64::from(s.num_layers),
                s.txn_bytes,
                s.staging[0][1],
                s.staging[1][1],
                s.staging[2][1],
                s.constants[0][1],
                s.constants[1][1],
                s.copies[0],
                s.copies[1]
            );
        }
    }
    o
}
