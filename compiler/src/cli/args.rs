//! The command line's arguments (clap): the subcommands and their options.

use crate::partition::PartitionOptions;
use crate::profile::histogram::Calibration;
use crate::profile::inputs::ImageMode;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "bundlec",
    version,
    about = "Ahead-of-time compiler from ONNX models to linkable bundles"
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) cmd: Cmd,
}

#[derive(Subcommand)]
pub(super) enum Cmd {
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
        /// Compute these tensors (comma-separated or repeated) instead of the model's outputs: the nodes they
        /// need and nothing after them, e.g. a detector's backbone and head without its data-dependent
        /// post-processing (NonZero, NonMaxSuppression), which then runs on the host.
        #[arg(long = "outputs", value_name = "NAME", value_delimiter = ',')]
        outputs: Vec<String>,
        /// Which 3x3 convolutions take Winograd: off, f2 (F(2x2, 3x3)), f4 (F(4x4, 3x3) on large planes: faster,
        /// 6-7 times F(2x2)'s error), auto (the most accurate form where Winograd pays: F(2x2)).
        #[arg(long, value_name = "off|f2|f4|auto", default_value = "auto")]
        winograd: crate::lower::Winograd,
        /// Arithmetic of MatMuls with constant weights: f32, or bf16 (bf16 operands, f32 sums; needs AVX-512
        /// BF16: --cpu sapphirerapids, znver4, znver5, or native on such a CPU).
        #[arg(long, value_name = "f32|bf16", default_value = "f32")]
        precision: crate::lower::Precision,
        /// Target triple (default: the host).
        #[arg(long)]
        target: Option<String>,
        /// CPU features: one kernel set (native, generic, x86-64-v3, x86-64-v4, icelake, ...) or a fat bundle
        /// BASE,FAST. Default: x86-64-v3,x86-64-v4 on x86-64 Linux and macOS (the AVX-512 set where the CPU has
        /// it), x86-64-v3 on Windows, generic elsewhere.
        #[arg(long)]
        cpu: Option<String>,
        /// Also write NAME.weights.txt, the weights as a C array initialiser.
        #[arg(long)]
        weights_as_c_array: bool,
        /// Place inputs and outputs in the activation area (no mutable area; saves memory, as their space is
        /// reused once they are consumed or before they are produced). Config flag 1 records it.
        #[arg(long)]
        inputs_in_activations: bool,
        /// Write a self-contained HTML build report (ops, memory plan timeline, partition graph, timings).
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
        /// Put the weights inside NAME.o (exported NAME_weights; the entry takes NULL for the constant area)
        /// instead of writing NAME.weights.
        #[arg(long)]
        embed_weights: bool,
        /// Print the build report.
        #[arg(short, long)]
        verbose: bool,
        #[command(flatten)]
        npu: NpuArgs,
        /// Quantise to int8 with the ranges of a profile written by `bundlec profile`.
        #[arg(long, value_name = "PROFILE.yaml")]
        load_profile: Option<PathBuf>,
        /// How quantisation ranges are chosen from the profile.
        #[arg(long, value_enum, default_value = "minmax")]
        calibration: Calibration,
        /// Keep these nodes (ONNX node names) in f32 under --load-profile (repeatable).
        #[arg(long = "keep-f32", value_name = "NODE")]
        keep_f32: Vec<String>,
        /// Inputs read only by QuantizeLinear and outputs written by DequantizeLinear become u8/i8; the header
        /// gives each one's scale and zero point.
        #[arg(long)]
        quantized_io: bool,
    },
    /// Run the f32 MODEL over calibration inputs and record every tensor's range (for --load-profile).
    Profile {
        /// The ONNX model.
        model: PathBuf,
        /// Calibration samples: .npy (single-input models), .npz (keys are input names), PNG/JPEG images, or
        /// directories of them.
        #[arg(long = "inputs", value_name = "PATH", num_args = 1.., required = true)]
        samples: Vec<PathBuf>,
        /// The profile file to write (YAML).
        #[arg(short = 'o', long = "output")]
        out: PathBuf,
        /// Fix an input's shape and type: NAME:1x3x224x224xf32 (repeatable).
        #[arg(long = "input", value_name = "NAME:SHAPExDTYPE")]
        inputs: Vec<String>,
        /// Image pixel range before --mean/--std.
        #[arg(long, value_enum, default_value = "0to1")]
        image_mode: ImageMode,
        /// Resize images so the shorter side is this many pixels (at most 16384), then centre-crop to the
        /// input size.
        #[arg(long, default_value_t = 0)]
        resize: usize,
        /// Per-channel (R,G,B) mean subtracted after the range mapping: `R,G,B` or `R G B`.
        #[arg(
            long,
            value_delimiter = ',',
            num_args = 1..=3,
            allow_negative_numbers = true,
            default_values_t = [0.0, 0.0, 0.0]
        )]
        mean: Vec<f32>,
        /// Per-channel (R,G,B) divisor applied after the mean: `R,G,B` or `R G B`.
        #[arg(
            long,
            value_delimiter = ',',
            num_args = 1..=3,
            allow_negative_numbers = true,
            default_values_t = [1.0, 1.0, 1.0]
        )]
        std: Vec<f32>,
        /// ImageNet preprocessing: 0to1, resize 256, mean 0.485,0.456,0.406, std 0.229,0.224,0.225.
        #[arg(long)]
        imagenet: bool,
        /// Images are NHWC (default NCHW).
        #[arg(long)]
        nhwc: bool,
        /// Histogram bins per tensor.
        #[arg(long, default_value_t = 2048)]
        bins: usize,
    },
    /// Partition MODEL between the NPU and the CPU and print the placement table.
    Partition {
        /// The ONNX model.
        model: PathBuf,
        /// Fix an input's shape and type: NAME:1x3x224x224xf32 (repeatable).
        #[arg(long = "input", value_name = "NAME:SHAPExDTYPE")]
        inputs: Vec<String>,
        /// Print the partition cache document (JSON) instead of the table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        npu: NpuArgs,
    },
    /// List the supported ONNX ops and their constraints (with --npu: the NPU op library's).
    Ops {
        /// NPU target: `vnpu` or a target description JSON file.
        #[arg(long)]
        npu: Option<String>,
    },
    /// Read back a bundle object (NAME.o: areas, symbols, ops, layers, NPU segments, CPU features), or
    /// disassemble a transaction binary with --txn.
    Inspect {
        /// The bundle object. Its NAME.weights beside it (or --weights) is checked against the config.
        #[arg(required_unless_present = "txn", conflicts_with = "txn")]
        object: Option<PathBuf>,
        /// The weights file to check (default: NAME.weights beside the object, when it exists).
        #[arg(long, value_name = "FILE")]
        weights: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[arg(
            long,
            value_name = "FILE",
            help = "Disassemble a transaction binary (NAME.<segment>.txn)"
        )]
        txn: Option<PathBuf>,
    },
}

#[derive(clap::Args, Clone)]
pub(super) struct NpuArgs {
    /// Place ops on an NPU: `vnpu` (the shipped virtual NPU) or a target description JSON file.
    #[arg(long, value_name = "TARGET")]
    pub(super) npu: Option<String>,
    /// A segment stays on the NPU only if CPU time >= (NPU time + transfers) * (1 + GAIN).
    #[arg(
        long,
        value_name = "GAIN",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    npu_min_gain: f64,
    /// Fail when nothing lands on the NPU.
    #[arg(long)]
    npu_strict: bool,
    /// Partition cache file: reused when its key matches model, target and flags, rewritten otherwise.
    #[arg(long, value_name = "FILE")]
    partition_cache: Option<PathBuf>,
}

impl NpuArgs {
    /// The partition options these flags give (`None` without `--npu`).
    pub(super) fn options(&self) -> anyhow::Result<Option<PartitionOptions>> {
        let Some(spec) = &self.npu else {
            if self.npu_strict || self.partition_cache.is_some() {
                anyhow::bail!("--npu-strict and --partition-cache need --npu TARGET");
            }
            return Ok(None);
        };
        if !(self.npu_min_gain.is_finite() && self.npu_min_gain >= -1.0) {
            anyhow::bail!(
                "--npu-min-gain {}: expected a number >= -1 (-1 puts every capable segment on the NPU)",
                self.npu_min_gain
            );
        }
        Ok(Some(PartitionOptions {
            target: crate::npu::NpuTarget::load(spec)?,
            min_gain: self.npu_min_gain,
            cache: self.partition_cache.clone(),
            strict: self.npu_strict,
            model_hash: 0,
        }))
    }
}
