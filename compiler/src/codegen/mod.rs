//! CPU code generation with Cranelift, from the kernels `lower` made and the plan. `isa` picks the target and its
//! ISA features; this file defines one function per kernel, `fn(args: *const *mut u8, task: u64)`: `callees.rs`
//! defines the machine code it calls (`machine_code/` places the iced-x86 micro-kernels of `crate::x86`) and
//! `body.rs` emits its body through the `Kb` builder with the emitters of `ops/<family>.rs`; `entry.rs` defines
//! the entry function `int NAME(uint8_t *constants, uint8_t *mutables, uint8_t *activations)`, which runs every
//! task of every kernel in schedule order on the calling thread, and the CPU feature checks.
//!
//! ```text
//!   Graph ──lower──► [Kernel] ──schedule/plan──► per-kernel fn + entry fn ──cranelift-object──► NAME.o
//! ```

mod body;
pub mod builder;
mod callees;
pub mod dispatch;
mod entry;

pub mod isa;

mod machine_code;
pub mod math;
pub mod ops;
pub mod symbols;

use crate::error::{Error, Result};
use crate::kernel::{interleave, KernelId, Lowering};
use crate::x86::gemm_x86::Simd;
use builder::Kb;
use callees::{uses_micro_kernels, Callees};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{Function, InstBuilder, UserFuncName};
use cranelift_codegen::Context;
use cranelift_entity::{EntityRef, PrimaryMap};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};
pub use entry::{define_cpu_check, define_entry, define_pick};
use symbols::kernel_signature;

/// Defines one local function per kernel (and the machine-code micro-kernels they call); returns the kernel
/// functions' ids indexed like `l.kernels`. With `shared` (a fat bundle's second set), kernels that do not use
/// micro-kernels are not compiled again: their ids are taken from `shared`.
pub fn define_kernels(
    module: &mut dyn Module,
    name: &str,
    l: &Lowering,
    has_fma: bool,
    simd: Option<Simd>,
    shared: Option<&PrimaryMap<KernelId, FuncId>>,
) -> Result<PrimaryMap<KernelId, FuncId>> {
    let sig = kernel_signature(module);
    let mut ids = PrimaryMap::with_capacity(l.kernels.len());
    let mut fctx = FunctionBuilderContext::new();
    let mut ctx = Context::new();
    for (ki, k) in l.kernels.iter() {
        let i = ki.index();
        if let Some(id) = shared
            .and_then(|s| s.get(ki))
            .filter(|_| !uses_micro_kernels(&k.body))
        {
            ids.push(*id);
            continue;
        }
        let fname = format!("{name}__k{i}");
        let id = module
            .declare_function(&fname, Linkage::Local, &sig)
            .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
        ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig.clone());
        let c = Callees::define(module, name, (i, k), simd, &mut ctx.func)?;
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let params = builder::begin_body(&mut b);
            let (argv, task) = (params[0], params[1]);
            let args = (k.args.iter().enumerate())
                .map(|(i, a)| {
                    (
                        a.role,
                        b.ins().load(I64, builder::flags(), argv, (i * 8) as i32),
                    )
                })
                .collect();
            let mut kb = Kb {
                b,
                args,
                missing: Default::default(),
                task,
                has_fma,
            };
            // A body that exists only as machine code without it is a bundlec bug.
            if !body::emit_kernel(&mut kb, k, &c, simd) {
                return Err(Error::internal(
                    "codegen",
                    format!("kernel '{}' has no machine code", k.name),
                ));
            }
            if let Some(r) = kb.missing.get() {
                return Err(Error::internal(
                    "codegen",
                    format!("kernel '{}' has no {r:?} argument", k.name),
                ));
            }
            kb.b.ins().return_(&[]);
            kb.b.finalize(module.isa().frontend_config());
        }
        module
            .define_function(id, &mut ctx)
            .map_err(|e| Error::internal("codegen", format!("kernel '{}': {e:?}", k.name)))?;
        module.clear_context(&mut ctx);
        ids.push(id);
    }
    Ok(ids)
}

/// One interleaved pair (`interleave.rs`) as a single op of the engine's table: the kernels at positions `at`
/// and `at + 1` of the schedule order, `groups` groups, and the wrapper functions (`define_pair`) of the base
/// and (a fat bundle's) fast kernel sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairOp {
    /// Position of the GEMM in the schedule order (the depthwise kernel follows it).
    pub at: usize,
    /// Groups `G`: the op's task count.
    pub groups: usize,
    /// The wrapper over the base kernel set.
    pub func: FuncId,
    /// The wrapper over a fat bundle's fast set.
    pub fast: Option<FuncId>,
}

/// Which engine schedule runs a table op: every one, or for an interleaved pair of `G` groups either the pair's
/// op (an engine whose thread count divides `G`, the entry function's schedule) or the pair's two kernels as
/// ops of their own (any other thread count: 16 threads would leave all but `G` idle on a pair of `G` tasks).
/// Written as `BundleOp.pairing` (format 5, `docs/bundle-format.md`): 0, or `G << 8 | PAIRED` /
/// `G << 8 | UNPAIRED` (`bundle_rt::config`'s codes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Alt<'a> {
    /// Every schedule.
    Always,
    /// The pair's op, when the engine pairs.
    Paired(&'a PairOp),
    /// One of the pair's kernels alone (of a pair of this many groups), when the engine does not pair.
    Unpaired(u32),
}

impl Alt<'_> {
    /// `BundleOp.pairing`.
    pub fn bits(self) -> u32 {
        use bundle_rt::config::{PAIRED, UNPAIRED};
        match self {
            Alt::Always => 0,
            Alt::Paired(p) => (p.groups as u32) << 8 | PAIRED,
            Alt::Unpaired(g) => g << 8 | UNPAIRED,
        }
    }
}

/// One op of the engine's table (`emit/config.rs`) and the recipe's run for it: a kernel, or an interleaved
/// pair's two kernels, consecutive in the schedule order.
#[derive(Debug, Clone, Copy)]
pub struct TableOp<'a> {
    /// Its kernels: one, or a pair's GEMM and depthwise kernel (their arguments in a row).
    pub kernels: &'a [KernelId],
    /// The schedules that run it (and the pair it runs, if any).
    pub alt: Alt<'a>,
}

impl<'a> TableOp<'a> {
    /// The pair whose op this is, if any.
    pub fn pair(&self) -> Option<&'a PairOp> {
        match self.alt {
            Alt::Paired(p) => Some(p),
            _ => None,
        }
    }
    /// The op's name: its kernels' names joined by `+`.
    pub fn name(&self, l: &Lowering) -> String {
        let names: Vec<&str> = self
            .kernels
            .iter()
            .map(|&k| l.kernels[k].name.as_str())
            .collect();
        names.join("+")
    }
    /// Its task count: the kernel's, or the pair's groups.
    pub fn tasks(&self, l: &Lowering) -> u32 {
        self.pair()
            .map_or(l.kernels[self.kernels[0]].tasks, |p| p.groups as u32)
    }
}

/// The ops of the engine's table over the schedule `order`: each kernel alone, except that each of `pairs`
/// is its op (`Alt::Paired`) followed by its two kernels alone (`Alt::Unpaired`, the GEMM in its layer, the
/// depthwise kernel in the next), sorted by layer as the order is.
pub fn table_ops<'a>(order: &'a [KernelId], pairs: &'a [PairOp]) -> Vec<TableOp<'a>> {
    let mut ops = Vec::with_capacity(order.len() + 2 * pairs.len());
    // The pair starting at each position of the order (one lookup per position, not a scan of the pairs).
    let starts: std::collections::HashMap<usize, &PairOp> =
        pairs.iter().rev().map(|p| (p.at, p)).collect();
    let mut at = 0;
    while at < order.len() {
        let one = |at: usize, alt| TableOp {
            kernels: &order[at..at + 1],
            alt,
        };
        match starts.get(&at).copied().filter(|_| at + 1 < order.len()) {
            Some(p) => {
                ops.push(TableOp {
                    kernels: &order[at..at + 2],
                    alt: Alt::Paired(p),
                });
                ops.push(one(at, Alt::Unpaired(p.groups as u32)));
                ops.push(one(at + 1, Alt::Unpaired(p.groups as u32)));
                at += 2;
            }
            None => {
                ops.push(one(at, Alt::Always));
                at += 1;
            }
        }
    }
    ops
}

/// Defines the wrappers of the interleaved pairs (`interleave::pairs` over the schedule `order`) over the base
/// kernel functions `funcs` and, in a fat bundle, the fast set's `fast` (`symbols::fast_name`).
pub fn define_pair_ops(
    module: &mut dyn Module,
    name: &str,
    l: &Lowering,
    order: &[KernelId],
    funcs: &PrimaryMap<KernelId, FuncId>,
    fast: Option<&PrimaryMap<KernelId, FuncId>>,
) -> Result<Vec<PairOp>> {
    let mut ops = Vec::new();
    for (at, groups) in interleave::pairs(l, order) {
        let ab = (order[at], order[at + 1], groups);
        let func = define_pair(module, name, l, ab, funcs)?;
        let fast = match fast {
            Some(f) => Some(define_pair(module, &symbols::fast_name(name), l, ab, f)?),
            None => None,
        };
        ops.push(PairOp {
            at,
            groups,
            func,
            fast,
        });
    }
    Ok(ops)
}

/// Defines `NAME__kI_pair(args, g)` for the interleaved pair `(gemm, dw)` of `groups` groups over the kernel
/// functions `funcs`: the GEMM's tasks of group `g`, then the depthwise kernel's, which reads its arguments
/// after the GEMM's in `args`. One task of the engine then runs a group's expansion and its depthwise convolution on one
/// core, as the entry function does on its thread (`define_entry`).
fn define_pair(
    module: &mut dyn Module,
    name: &str,
    l: &Lowering,
    (gemm, dw, groups): (KernelId, KernelId, usize),
    funcs: &PrimaryMap<KernelId, FuncId>,
) -> Result<FuncId> {
    let sig = kernel_signature(module);
    let fname = format!("{name}__k{}_pair", gemm.index());
    let id = module
        .declare_function(&fname, Linkage::Local, &sig)
        .map_err(|e| Error::internal("codegen", format!("declare {fname}: {e}")))?;
    let mut ctx = Context::new();
    ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let params = builder::begin_body(&mut b);
        let (argv, group) = (params[0], params[1]);
        let (fa, fb) = (
            module.declare_func_in_func(funcs[gemm], b.func),
            module.declare_func_in_func(funcs[dw], b.func),
        );
        let mut kb = Kb {
            b,
            args: vec![],
            missing: Default::default(),
            task: group,
            has_fma: false,
        };
        let argv_b = (kb.b.ins()).iadd_imm_s(argv, (8 * l.kernels[gemm].args.len()) as i64);
        for (f, k, args) in [(fa, gemm, argv), (fb, dw, argv_b)] {
            let per = l.kernels[k].tasks as usize / groups.max(1);
            let lo = kb.b.ins().imul_imm_s(group, per as i64);
            let hi = kb.b.ins().iadd_imm_s(lo, per as i64);
            kb.for_range(lo, hi, 1, |kb, t| {
                kb.b.ins().call(f, &[args, t]);
            });
        }
        kb.b.ins().return_(&[]);
        kb.b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| Error::internal("codegen", format!("{fname}: {e:?}")))?;
    Ok(id)
}
