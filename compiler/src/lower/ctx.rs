//! The lowering's state and the helpers every family shares: `Ctx` (the graph, the kernels and scratch made so
//! far, the options, the tensors laid out as channel blocks), task counts from work, operands and B panels.

use crate::ir::{Graph, NodeId, Tensor, TensorId};
use crate::kernel::conv::Im2colSpec;
use crate::kernel::gemm::Operand;
use crate::kernel::{Arg, Body, Buf, Kernel, KernelId, Lowering, Role, MAX_TASKS};

/// Rough work (multiply-adds or elements) per task for kernels with plenty of it.
const WORK_PER_TASK: usize = 1 << 16;

/// Least work per task: a kernel with fewer than 16 tasks' worth of `WORK_PER_TASK` gets its task count
/// rounded up to a multiple of 4 (2 and 4 threads then share it evenly; 3 tasks on 2 threads left one idle a
/// third of the time), as long as each task keeps at least this much.
const MIN_WORK_PER_TASK: usize = 1 << 14;

/// The task count for a kernel with `units` independent units and `work` multiply-adds or elements.
pub fn task_count(units: usize, work: usize) -> usize {
    let n = (work / WORK_PER_TASK).max(1);
    let n = if n < 16 {
        n.next_multiple_of(4).min((work / MIN_WORK_PER_TASK).max(n))
    } else {
        n
    };
    units.min(MAX_TASKS).min(n).max(1)
}

/// A `[k, n]` matrix (`at(p, j)`) packed in `panel`-column panels for `GemmSpec::b_panel`: element `(p, j)` at
/// `(j / panel)·panel·k + p·panel + j % panel`, the columns past `n` of the last panel zero.
pub(super) fn pack_b_panels(
    k: usize,
    n: usize,
    panel: usize,
    at: impl Fn(usize, usize) -> f32,
) -> Vec<f32> {
    (0..k * n.next_multiple_of(panel))
        .map(|e| {
            let (q, rest) = (e / (panel * k), e % (panel * k));
            let j = q * panel + rest % panel;
            if j < n {
                at(rest / panel, j)
            } else {
                0.0
            }
        })
        .collect()
}

/// A dense row-major operand in argument `role` with row stride `rs`.
pub(super) fn operand(role: Role, rs: usize) -> Operand {
    Operand {
        arg: role,
        off: 0,
        rs,
        cs: 1,
    }
}

/// The lowering state: the graph (constants are added to it) and the kernels and scratch buffers so far.
pub struct Ctx<'g> {
    pub(super) g: &'g mut Graph,
    /// The kernels and scratch buffers made so far.
    pub(super) out: Lowering,
    /// Target choices.
    pub(super) opts: LowerOpts,
    /// Outputs of Reshapes that emitted no copy, with the tensor holding their bytes (`shape.rs`): `push`
    /// gives kernels that read them that tensor instead.
    pub(super) aliases: std::collections::HashMap<TensorId, TensorId>,
    /// Outputs of Transposes that emitted no copy because only MatMuls read them (`shape.rs`): the tensor
    /// holding the elements and its stride per dim of the transposed shape (the last one 1). `linalg.rs`
    /// reads them through these strides.
    pub(super) views: std::collections::HashMap<TensorId, (TensorId, Vec<usize>)>,
    /// Transposes that emit nothing because the MatMul before them wrote their output (`linalg.rs`).
    pub(super) written: std::collections::HashSet<NodeId>,
    /// Tensors kept as channel blocks `[N, ld/16, P, 16]` in a scratch buffer (`cnn/blocked.rs`): the buffer and
    /// `ld`.
    pub(super) blocked: std::collections::HashMap<TensorId, (Buf, usize)>,
    /// Producers and readers of the graph's tensors (lowering adds constants but never rewires nodes).
    pub(super) uses: crate::ir::Uses,
    /// Each live node's place in the lowering order.
    pub(super) position: std::collections::HashMap<NodeId, usize>,
}

impl Ctx<'_> {
    /// Adds a kernel for `node` (named `<node>.<step>` when `step` is given) with `args`, exactly one of which
    /// has role `Out`; `work` (multiply-adds or elements) sets its task count. Tensors read through a
    /// copy-free Reshape are read as the tensor holding their bytes (`alias`).
    pub(super) fn push(
        &mut self,
        node: NodeId,
        step: Option<&str>,
        args: &[(Role, Buf)],
        body: Body,
        work: usize,
    ) -> KernelId {
        let base = &self.g.nodes[node].name;
        let name = match step {
            Some(s) => format!("{base}.{s}"),
            None => base.clone(),
        };
        debug_assert!(
            args.iter().all(|(r, b)| *r == Role::Out
                || !matches!(b, Buf::Tensor(t) if self.views.contains_key(t))),
            "kernel {name} reads a transposed view as a dense tensor"
        );
        let mut k = Kernel {
            name,
            node,
            args: args
                .iter()
                .map(|&(role, buf)| Arg {
                    role,
                    buf: match buf {
                        Buf::Tensor(t) if !matches!(role, Role::Out | Role::Scratch) => {
                            Buf::Tensor(self.alias(t))
                        }
                        _ => buf,
                    },
                })
                .collect(),
            tasks: 1,
            body,
        };
        k.tasks = task_count(k.units(), work) as u32;
        self.out.kernels.push(k)
    }
    /// The tensor holding `t`'s bytes: `t`, or the input of the copy-free Reshape(s) that produced it.
    pub(super) fn alias(&self, t: TensorId) -> TensorId {
        self.aliases.get(&t).copied().unwrap_or(t)
    }
    /// A new scratch buffer of `bytes`.
    pub(super) fn scratch(&mut self, bytes: usize) -> Buf {
        Buf::Scratch(self.out.scratch.push(bytes))
    }
    pub(super) fn shape(&self, t: TensorId) -> Vec<usize> {
        self.g.tensors[t].shape.clone()
    }
    pub(super) fn constant(&mut self, name: String, t: Tensor) -> TensorId {
        self.g.add_constant(name, t)
    }
    /// The B operand of a convolution's GEMM for input shape `xs` and output `os` (`cg` input channels per
    /// group): the input itself for a 1x1, stride-1, unpadded conv, else the columns of an im2col kernel pushed
    /// here (f32, or bytes padded with `bytes`). Returns the buffer and its batch and group strides (elements).
    pub(super) fn conv_columns(
        &mut self,
        n: NodeId,
        a: &crate::ir::ConvAttrs,
        xs: &[usize],
        os: &[usize],
        cg: usize,
        bytes: Option<u8>,
    ) -> (Buf, usize, usize) {
        let x = self.g.nodes[n].inputs[0];
        let (c, h, w) = (xs[1], xs[2], xs[3]);
        let khw = a.kernel[0] * a.kernel[1];
        if khw == 1 && a.strides == [1, 1] && a.pads == [0; 4] {
            return (Buf::Tensor(x), c * h * w, cg * h * w);
        }
        let spec = Im2colSpec {
            n: xs[0],
            c,
            hw: [h, w],
            kernel: a.kernel,
            strides: a.strides,
            dilations: a.dilations,
            pads: [a.pads[0], a.pads[1]],
            out: [os[2], os[3]],
            bytes,
        };
        let s = self.scratch(spec.col_bytes());
        let work = spec.col_bytes() / spec.elem();
        self.push(
            n,
            Some("im2col"),
            &[(Role::X, Buf::Tensor(x)), (Role::Out, s)],
            Body::Im2col(spec),
            work,
        );
        let p = os[2] * os[3];
        (s, c * khw * p, cg * khw * p)
    }
}

/// What the target's kernels change in the lowering.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowerOpts {
    /// Integer GEMMs use the AVX-512 VNNI layout (`Target::vnni`), which changes the packed weights.
    pub vnni: bool,
    /// Depthwise int8 convolutions run the VNNI row kernel (AVX-512 VNNI and VBMI: `vpermb` tap windows,
    /// `vpdpbusd` over four taps).
    pub vnni_depthwise: bool,
    /// With `vnni`, integer GEMMs run the AMX tile micro-kernel (`Target::ext.amx`): A rows padded to 64 bytes.
    pub amx: bool,
    /// The target has machine-code micro-kernels (AVX2 or AVX-512): constant GEMM A operands are packed in
    /// `A_PANEL`-row panels, eligible 3x3 convolutions use Winograd F(4x4, 3x3) or F(2x2, 3x3), and stems
    /// (at most four input channels) run the direct convolution kernel instead of im2col and a GEMM.
    pub micro_kernels: bool,
    /// The layouts chosen for AVX-512 kernel sets (a single `x86-64-v4`-class set, or a fat bundle, which lowers
    /// for its AVX-512 set and whose AVX2 set takes the same layouts): GEMMs computed transposed (their
    /// transposing epilogue), channel blocks between 1x1 convolutions, the channel-blocked depthwise kernel beyond
    /// 7x7 outputs and its block and panel outputs, the direct convolution of strided layers.
    pub avx512: bool,
    /// Constant B operands of Gemm and MatMul (a classifier's or an encoder's weights) are
    /// packed in column panels of this width (`GemmSpec::b_panel`), a multiple of every kernel set's tile
    /// columns; `None`: read in place (targets without machine-code micro-kernels).
    pub gemv_panel: Option<usize>,
    /// Every node's output exists and is written by that node's own kernels (NPU segments address their
    /// boundary tensors and take over kernels by node): every Reshape's copy is kept (`shape.rs`), and no
    /// kernel writes a later node's output in its place (a fused residual QAdd, `qconv_implicit.rs`).
    pub keep_tensors: bool,
    /// Which 3x3 convolutions take Winograd (`--winograd`).
    pub winograd: Winograd,
    /// MatMuls with a constant B run the bf16 GEMM (`--precision bf16` on an AVX-512 BF16 target).
    pub bf16: bool,
}

/// The arithmetic of the f32 matrix products (`--precision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// f32 throughout.
    #[default]
    F32,
    /// MatMuls with a constant B take bf16 operands and accumulate in f32 (AVX-512 BF16 targets).
    Bf16,
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "f32" => Precision::F32,
            "bf16" => Precision::Bf16,
            _ => return Err(format!("'{s}' is not one of f32, bf16")),
        })
    }
}

/// Which eligible 3x3 convolutions take Winograd (`--winograd`; `lower/cnn/winograd.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Winograd {
    /// None: every convolution is an im2col GEMM or a direct kernel.
    Off,
    /// F(2x2, 3x3) wherever it pays.
    F2,
    /// F(4x4, 3x3) wherever it fits, else F(2x2, 3x3).
    F4,
    /// The default: per layer, the form whose error is lowest where Winograd pays, which is F(2x2, 3x3) (F(4x4)'s
    /// error is 6-7 times F(2x2)'s and 4-5 times the im2col GEMM's).
    #[default]
    Auto,
}

impl std::str::FromStr for Winograd {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "off" => Winograd::Off,
            "f2" => Winograd::F2,
            "f4" => Winograd::F4,
            "auto" => Winograd::Auto,
            _ => return Err(format!("'{s}' is not one of off, f2, f4, auto")),
        })
    }
}

/// Rows per panel of a packed A (`GemmSpec::a_panel`): a multiple of the AVX2 (4) and AVX-512 (8) tile rows, so
/// one packing serves both kernel sets of a fat bundle.
pub const A_PANEL: usize = 8;

/// Rows per panel of a transposed GEMM's A packed by `Body::PackRows` where its K and rows pay for tall tiles
/// (`cnn.rs::row_panel`; else `A_PANEL`): a multiple of the AVX2 tile's 4 rows and of the AVX-512 tiles' 7, 8
/// and 14 (`machine_code::tile_rows`), so ResNet-50's 196 and 49 pixel rows take 14-row tiles.
pub const ROW_PANEL: usize = 56;
