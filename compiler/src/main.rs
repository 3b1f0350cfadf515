//! The `bundlec` command line: `compile` (ONNX → bundle files) and `ops` (the supported op list).

use anyhow::Context;
use bundlec::{import::supported_ops, InputSpec, Options};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "bundlec",
    version,
    about = "Ahead-of-time compiler from ONNX models to linkable bundles"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile MODEL.onnx into DIR/NAME.{o,weights,h,recipe.json}.
    Compile {
        /// The ONNX model.
        model: PathBuf,
        /// Output directory (created if missing).
        #[arg(short = 'o', long = "output")]
        out: PathBuf,
        /// Bundle name: entry symbol, `NAME_config`, file stem. A C identifier.
        #[arg(long)]
        name: String,
        /// Fix an input's shape and type: NAME:1x3x224x224xf32 (repeatable).
        #[arg(long = "input", value_name = "NAME:SHAPExDTYPE")]
        inputs: Vec<String>,
        /// Freeze an input to a compile-time constant: NAME:SHAPExDTYPE=v,v,... (repeatable). The bundle no
        /// longer takes it; shape-like inputs (axes, pads, sizes) then fold.
        #[arg(long = "freeze", value_name = "NAME:SHAPExDTYPE=VALUES")]
        freeze: Vec<String>,
        /// Target triple (default: the host).
        #[arg(long)]
        target: Option<String>,
        /// CPU features: native, generic, x86-64-v3 (default on x86-64), x86-64-v4, ...
        #[arg(long)]
        cpu: Option<String>,
        /// Also write NAME.weights.txt, the weights as a C array initialiser.
        #[arg(long)]
        weights_as_c_array: bool,
        /// Print the build report.
        #[arg(short, long)]
        verbose: bool,
    },
    /// List the supported ONNX ops and their constraints.
    Ops,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Ops => {
            println!("| ONNX ops | constraints |\n|---|---|");
            for (ops, c) in supported_ops() {
                println!("| {ops} | {c} |");
            }
        }
        Cmd::Compile {
            model,
            out,
            name,
            inputs,
            freeze,
            target,
            cpu,
            weights_as_c_array,
            verbose,
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
            opts.target = target;
            if let Some(c) = cpu {
                opts.cpu = c;
            }
            let b = bundlec::compile_file(&model, &opts)?;
            b.write(&out)
                .with_context(|| format!("writing bundle to {}", out.display()))?;
            if weights_as_c_array {
                b.write_weights_c_array(&out)?;
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
                for (s, ms) in &r.timings {
                    eprintln!("  {s:<12} {ms:8.1} ms");
                }
            }
        }
    }
    Ok(())
}
