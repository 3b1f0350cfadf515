//! The commands of the `bundlec` command line ([`super::main_with`] parses the arguments): each `Cmd` carried out,
//! its report printed, errors returned as `anyhow` chains for the caller to print clipped.

use super::args::Cmd;
use crate::npu::ops::CONSTRAINTS;
use crate::profile::inputs::{ImageMode, ImageOptions};
use crate::{fsio, import::supported_ops, InputSpec, Options};
use anyhow::Context;
use std::path::PathBuf;

/// Most warnings printed by one compile.
const MAX_WARNINGS: usize = 20;

/// Longest error text printed: a hostile model can make the list of unsupported nodes, or a message quoting its
/// names, arbitrarily long.
const MAX_ERROR_TEXT: usize = 16 << 10;

/// `text` cut at [`MAX_ERROR_TEXT`] bytes (at a character boundary), the cut marked with how much was left out.
pub(super) fn clip_message(text: &str) -> String {
    let head = crate::error::prefix(text, MAX_ERROR_TEXT);
    if head.len() == text.len() {
        return text.to_string();
    }
    format!(
        "{head}\n... ({} more bytes of this error left out)",
        text.len() - head.len()
    )
}

/// `bundlec inspect NAME.o`: the config as text or JSON, and the weights check.
fn inspect(object: &std::path::Path, weights: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    use crate::emit::{inspect, inspect_text};
    let bytes = fsio::read_bounded(object, fsio::MAX_OBJECT_BYTES, "a bundle object")?;
    let ins = inspect::inspect(&object.display().to_string(), &bytes)?;
    let implicit = object.with_extension("weights");
    let wfile = weights
        .clone()
        .or_else(|| implicit.exists().then_some(implicit));
    let check = match &wfile {
        Some(w) => {
            let b = fsio::read_bounded(w, fsio::MAX_OBJECT_BYTES, "a weights file")?;
            Some(inspect_text::check_weights(&ins, &b))
        }
        None => None,
    };
    if json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            ins: &'a inspect::Inspection,
            weights_file: Option<serde_json::Value>,
        }
        let weights_file = match (&wfile, &check) {
            (Some(w), Some(r)) => Some(serde_json::json!({
                "path": w.display().to_string(),
                "ok": r.is_ok(),
                "error": r.as_ref().err(),
            })),
            _ => None,
        };
        let out = Out {
            ins: &ins,
            weights_file,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", inspect_text::render(&ins));
        match (&wfile, &check) {
            (Some(w), Some(Ok(()))) => {
                println!("\nweights {}: size and checksum match", w.display())
            }
            (Some(w), Some(Err(e))) => println!("\nweights {}: MISMATCH: {e}", w.display()),
            _ if ins.embedded_weights.is_some() => {}
            _ => println!(
                "\nweights: no NAME.weights beside the object (pass --weights FILE to check one)"
            ),
        }
    }
    if let Some(Err(e)) = &ins.embedded_weights {
        anyhow::bail!("{}: {e}", object.display());
    }
    if let (Some(w), Some(Err(e))) = (&wfile, check) {
        anyhow::bail!("weights {}: {e}", w.display());
    }
    Ok(())
}

pub(super) fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Ops { npu: None } => {
            println!("| ONNX ops | constraints |\n|---|---|");
            for (ops, c) in supported_ops() {
                println!("| {ops} | {c} |");
            }
        }
        Cmd::Ops { npu: Some(spec) } => {
            let t = crate::npu::NpuTarget::load(&spec)?;
            println!("NPU target {}: {}\n", t.name, t.description);
            println!("| ONNX op | dtypes | max kernel | max stride | max dilation |\n|---|---|---|---|---|");
            let lim = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
            for o in &t.ops {
                println!(
                    "| {} | {} | {} | {} | {} |",
                    o.op,
                    o.dtypes.join(", "),
                    lim(o.max_kernel),
                    lim(o.max_stride),
                    lim(o.max_dilation)
                );
            }
            println!("\nConstraints (a node that breaks one stays on the CPU with this id as its reason):\n");
            println!("| id | ops | constraint |\n|---|---|---|");
            for c in CONSTRAINTS {
                println!("| {} | {} | {} |", c.id, c.ops, c.text);
            }
            println!("| cost | all | the segment's NPU time plus its transfers beats the CPU estimate by --npu-min-gain |");
        }
        Cmd::Profile {
            model,
            samples,
            out,
            inputs,
            image_mode,
            resize,
            mean,
            std,
            imagenet,
            nhwc,
            bins,
        } => {
            let specs = inputs
                .iter()
                .map(|s| s.parse::<InputSpec>())
                .collect::<Result<Vec<_>, _>>()?;
            if !(2..=1 << 16).contains(&bins) {
                anyhow::bail!("--bins {bins}: expected 2 to 65536");
            }
            if mean.len() != 3 || mean.iter().any(|m| !m.is_finite()) {
                anyhow::bail!("--mean {mean:?}: expected 3 finite values R,G,B");
            }
            if std.len() != 3 || std.iter().any(|s| !(s.is_finite() && *s != 0.0)) {
                anyhow::bail!("--std {std:?}: expected 3 finite non-zero values R,G,B");
            }
            let img = if imagenet {
                ImageOptions {
                    mode: ImageMode::ZeroToOne,
                    resize: if resize == 0 { 256 } else { resize },
                    mean: [0.485, 0.456, 0.406],
                    std: [0.229, 0.224, 0.225],
                    nhwc,
                }
            } else {
                ImageOptions {
                    mode: image_mode,
                    resize,
                    mean: [mean[0], mean[1], mean[2]],
                    std: [std[0], std[1], std[2]],
                    nhwc,
                }
            };
            let g = crate::import::import_file(&model, &specs)?;
            let ins: Vec<_> = g
                .inputs
                .iter()
                .map(|&t| {
                    let td = &g.tensors[t];
                    (td.name.clone(), td.shape.clone(), td.dtype)
                })
                .collect();
            let files = crate::profile::inputs::expand(&samples)?;
            let bar = indicatif::ProgressBar::new(files.len() as u64).with_style(
                indicatif::ProgressStyle::with_template(
                    "profiling {bar:30} {pos}/{len} samples, {elapsed} (eta {eta})",
                )?,
            );
            let mut it = files
                .iter()
                .map(|f| crate::profile::inputs::load(f, &ins, &img));
            let p = crate::profile::profile(
                &g,
                &model.display().to_string(),
                &mut it,
                bins,
                &mut |n| bar.set_position(n as u64),
            )?;
            bar.finish_and_clear();
            fsio::write_file(&out, p.to_yaml()?.as_bytes())?;
            eprintln!(
                "profile: {} tensors over {} samples -> {}",
                p.tensors.len(),
                p.samples,
                out.display()
            );
        }
        Cmd::Inspect { txn: Some(txn), .. } => {
            let bytes = fsio::read_bounded(&txn, fsio::MAX_OBJECT_BYTES, "a transaction binary")?;
            let text = crate::npu::disasm::disassemble(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", txn.display()))?;
            print!("{text}");
        }
        Cmd::Inspect {
            object,
            weights,
            json,
            txn: None,
        } => inspect(
            &object.context("inspect needs NAME.o or --txn FILE")?,
            weights,
            json,
        )?,
        Cmd::Partition {
            model,
            inputs,
            json,
            npu,
        } => {
            let mut po = npu
                .options()?
                .ok_or_else(|| anyhow::anyhow!("partition needs --npu TARGET"))?;
            let specs = inputs
                .iter()
                .map(|s| s.parse::<InputSpec>())
                .collect::<Result<Vec<_>, _>>()?;
            // One read serves the import and the model hash.
            let bytes = crate::import::read_model(&model)?;
            po.model_hash = crate::emit::weights::checksum64(&bytes);
            let g = crate::import::import_read_file(&model, &bytes, &specs, &[])?;
            drop(bytes);
            let g = crate::pipeline::optimized(g)?;
            let p = crate::partition::partition(&g, &po)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&crate::partition::cache::to_json(&g, &p))?
                );
            } else {
                print!("{}", crate::partition::report::table(&g, &p));
            }
        }
        Cmd::Compile {
            model,
            out,
            name,
            inputs,
            freeze,
            outputs,
            winograd,
            precision,
            target,
            cpu,
            weights_as_c_array,
            embed_weights,
            report,
            inputs_in_activations,
            verbose,
            npu,
            load_profile,
            calibration,
            keep_f32,
            quantized_io,
        } => {
            let mut opts = Options::new(&name);
            opts.inputs = inputs
                .iter()
                .map(|s| s.parse::<InputSpec>())
                .collect::<Result<_, _>>()?;
            for f in &freeze {
                if !f.contains('=') {
                    anyhow::bail!("--freeze '{f}': expected NAME:SHAPExDTYPE=v,v,...");
                }
                opts.inputs.push(f.parse::<InputSpec>()?);
            }
            opts.outputs = outputs;
            opts.winograd = winograd;
            opts.precision = precision;
            opts.target = target;
            opts.npu = npu.options()?;
            if let Some(c) = cpu {
                opts.cpu = c;
            }
            if let Some(p) = &load_profile {
                opts.quantize = Some(crate::pipeline::QuantizeOptions {
                    profile: crate::profile::Profile::read(p)?,
                    calibration,
                    keep_f32: keep_f32.clone(),
                });
            } else if !keep_f32.is_empty() {
                anyhow::bail!("--keep-f32 needs --load-profile");
            }
            opts.quantized_io = quantized_io;
            opts.embed_weights = embed_weights;
            opts.html_report = report.is_some();
            opts.io_in_activations = inputs_in_activations;
            // A spinner with the elapsed time while compiling (drawn only when stderr is a terminal).
            let spin = indicatif::ProgressBar::new_spinner().with_message(format!(
                "compiling {} -> {}",
                model.display(),
                out.display()
            ));
            spin.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            spin.enable_steady_tick(std::time::Duration::from_millis(120));
            let b = crate::compile_file(&model, &opts);
            spin.finish_and_clear();
            let b = b?;
            // A model can draw a warning per node: the first MAX_WARNINGS are printed, the rest counted.
            for w in b.report.warnings.iter().take(MAX_WARNINGS) {
                eprintln!("warning: {w}");
            }
            if b.report.warnings.len() > MAX_WARNINGS {
                eprintln!(
                    "warning: ... and {} more warnings of the same kinds",
                    b.report.warnings.len() - MAX_WARNINGS
                );
            }
            if opts.npu.is_some() && b.report.segments.is_empty() {
                eprintln!(
                    "warning: --npu {}: nothing was placed on the NPU; the bundle runs entirely on the CPU (run with -v or `bundlec partition` for the reasons)",
                    npu.npu.as_deref().unwrap_or("")
                );
            }
            b.write(&out)
                .with_context(|| format!("writing bundle to {}", out.display()))?;
            if weights_as_c_array {
                b.write_weights_c_array(&out)?;
            }
            if let (Some(path), Some(html)) = (&report, &b.report_html) {
                fsio::write_file(path, html.as_bytes())?;
            }
            if verbose {
                let r = &b.report;
                eprintln!(
                    "bundle {name}: {} nodes -> {} kernels in {} layers",
                    r.nodes, r.kernels, r.layers
                );
                eprintln!(
                    "  passes: {}",
                    r.passes
                        .iter()
                        .map(|(p, n)| format!("{p}={n}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                eprintln!(
                    "  constants {} B, mutables {} B, activations {} B",
                    r.sizes[0], r.sizes[1], r.sizes[2]
                );
                eprintln!(
                    "  activation max live {} B, allocation efficiency {:.3}",
                    r.max_live, r.efficiency
                );
                eprintln!("  code {} B", b.object.len());
                if let Some(t) = &r.partition {
                    eprintln!("{t}");
                }
                for (id, nodes, cycles) in &r.segments {
                    eprintln!(
                        "  NPU segment {id}: {nodes} ops, est. {cycles} cycles, {name}.{id}.txn"
                    );
                }
                if !r.int8.is_empty() || load_profile.is_some() {
                    eprintln!("  int8: {} ops: {}", r.int8.len(), r.int8.join(", "));
                    for (n, why) in &r.kept_f32 {
                        eprintln!("  kept in f32: {n} ({why})");
                    }
                }
                for (n, s, z) in &r.quantized_io {
                    eprintln!("  quantized io: {n} scale {s:e} zero point {z}");
                }
                if quantized_io && r.quantized_io.is_empty() {
                    eprintln!("  quantized io: none (no input read only by QuantizeLinear, no output written by DequantizeLinear)");
                }
                for (s, ms) in &r.timings {
                    eprintln!("  {s:<12} {ms:8.1} ms");
                }
            }
        }
    }
    Ok(())
}
