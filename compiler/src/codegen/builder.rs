//! `Kb`, the kernel builder: a thin layer over `cranelift_frontend::FunctionBuilder` that every op lowering
//! uses — argument pointers, constants and splats that work for scalar and vector types alike, counted loops,
//! loads/stores at element offsets, FMA-or-mul-add per target, and the task-range computation that splits a
//! kernel's units of work between tasks.

use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{BlockArg, FuncRef, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};
use std::cell::Cell;

/// Builder state for one kernel function `fn(args: *const *mut u8, task: u64)`.
pub struct Kb<'a> {
    /// The Cranelift function builder.
    pub b: FunctionBuilder<'a>,
    /// Argument base pointers with their roles, loaded once at function entry.
    pub args: Vec<(Role, Value)>,
    /// A role the body asked for that the kernel lacks (a lowering bug `define_kernels` reports).
    pub missing: Cell<Option<Role>>,
    /// The task index.
    pub task: Value,
    /// Whether `fma` lowers to an instruction on this target.
    pub has_fma: bool,
}

/// Memory flags for our accesses: areas are caller-owned and never trap. Not `aligned`: vector accesses are
/// only 4-byte aligned, and an `aligned` claim lets the SSE back end (`--cpu generic`) fold them into
/// instructions such as `mulps m128` that fault on unaligned addresses.
pub fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

impl<'a> Kb<'a> {
    /// The base pointer of the argument with `role`. A role the kernel lacks is recorded in `missing` (and
    /// the task index stands in) so the caller fails the kernel with an internal error instead of panicking.
    pub fn arg(&self, role: Role) -> Value {
        match self.arg_opt(role) {
            Some(v) => v,
            None => {
                if self.missing.get().is_none() {
                    self.missing.set(Some(role));
                }
                self.task
            }
        }
    }
    /// The base pointer of the argument with `role`, if the kernel has one (optional operands).
    pub fn arg_opt(&self, role: Role) -> Option<Value> {
        self.args.iter().find(|(r, _)| *r == role).map(|&(_, v)| v)
    }
    /// The base pointers of a variadic op's inputs (`Role::In(0)`, `In(1)`, ...), in order.
    pub fn inputs(&self) -> Vec<Value> {
        let mut ins: Vec<(u32, Value)> = self
            .args
            .iter()
            .filter_map(|&(r, v)| match r {
                Role::In(i) => Some((i, v)),
                _ => None,
            })
            .collect();
        ins.sort_by_key(|&(i, _)| i);
        ins.into_iter().map(|(_, v)| v).collect()
    }
    /// Integer constant (i64).
    pub fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(I64, v)
    }
    /// Float constant of type `ty` (F32 or a splat for F32X4).
    pub fn fconst(&mut self, ty: Type, v: f32) -> Value {
        let s = self.b.ins().f32const(v);
        if ty == F32 {
            s
        } else {
            self.b.ins().splat(ty, s)
        }
    }
    /// Broadcast a scalar to `ty` (identity for F32).
    pub fn splat(&mut self, ty: Type, s: Value) -> Value {
        if ty == F32 {
            s
        } else {
            self.b.ins().splat(ty, s)
        }
    }
    /// `v`, computed here once: through a stack slot, whose load stays where it is. Cranelift's egraph places a
    /// pure value at its uses, so a row's maximum, sum or mean taken after one loop (a horizontal reduction, a
    /// division, a square root) was recomputed in every iteration of the loop that used it: LayerNorm on an
    /// encoder's 32x128 rows took 10 µs, the reductions and a `vsqrtss` and two `vdivss` per four elements.
    pub fn pin(&mut self, v: Value) -> Value {
        let ty = self.b.func.dfg.value_type(v);
        let slot = self
            .b
            .create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                ty.bytes(),
                4,
            ));
        self.b.ins().stack_store(I64, v, slot, 0);
        self.b.ins().stack_load(I64, ty, slot, 0)
    }
    /// `splat(ty, s)` computed here once ([`Kb::pin`]).
    pub fn pinned_splat(&mut self, ty: Type, s: Value) -> Value {
        let v = self.splat(ty, s);
        self.pin(v)
    }
    /// Address `base + elem * scale` (elem an i64 value).
    pub fn addr(&mut self, base: Value, elem: Value, scale: i64) -> Value {
        let off = self.b.ins().imul_imm_s(elem, scale);
        self.b.ins().iadd(base, off)
    }
    /// Loads `ty` from `ptr + off` bytes.
    pub fn load(&mut self, ty: Type, ptr: Value, off: i64) -> Value {
        let p = self.offset_ptr(ptr, off);
        self.b.ins().load(ty, flags(), p, 0)
    }
    /// Stores `v` at `ptr + off` bytes.
    pub fn store(&mut self, v: Value, ptr: Value, off: i64) {
        let p = self.offset_ptr(ptr, off);
        self.b.ins().store(flags(), v, p, 0);
    }
    fn offset_ptr(&mut self, ptr: Value, off: i64) -> Value {
        if off == 0 {
            ptr
        } else if i32::try_from(off).is_ok() {
            self.b.ins().iadd_imm_s(ptr, off)
        } else {
            let o = self.iconst(off);
            self.b.ins().iadd(ptr, o)
        }
    }
    /// a * b + c, fused when the target has FMA.
    pub fn mul_add(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.has_fma {
            self.b.ins().fma(a, b, c)
        } else {
            let m = self.b.ins().fmul(a, b);
            self.b.ins().fadd(m, c)
        }
    }
    /// A mutable local (SSA variable) of type `ty` initialised to `init`.
    pub fn var(&mut self, ty: Type, init: Value) -> Variable {
        let v = self.b.declare_var(ty);
        self.b.def_var(v, init);
        v
    }
    /// Emits `for i in (lo..hi).step_by(step) { body(i) }` with runtime bounds; `i` is i64.
    pub fn for_range(
        &mut self,
        lo: Value,
        hi: Value,
        step: i64,
        mut body: impl FnMut(&mut Self, Value),
    ) {
        let header = self.b.create_block();
        let body_blk = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(header, I64);
        self.b.ins().jump(header, &[BlockArg::Value(lo)]);
        self.b.switch_to_block(header);
        let i = self.b.block_params(header)[0];
        // Continue while i + step <= hi (a partial step never runs).
        let next_end = self.b.ins().iadd_imm_s(i, step);
        let c = self
            .b
            .ins()
            .icmp(IntCC::SignedLessThanOrEqual, next_end, hi);
        self.b.ins().brif(c, body_blk, &[], exit, &[]);
        self.b.seal_block(body_blk);
        self.b.switch_to_block(body_blk);
        body(self, i);
        let next = self.b.ins().iadd_imm_s(i, step);
        self.b.ins().jump(header, &[BlockArg::Value(next)]);
        self.b.seal_block(header);
        self.b.switch_to_block(exit);
        self.b.seal_block(exit);
    }
    /// For each work unit `u` in `[lo, hi)` (a task's range), `body(item)` for the items `[u·per, u·per + per)`
    /// that exist below `total`: units that each take `per` of `total` items, the last one fewer.
    pub fn for_unit_items(
        &mut self,
        (lo, hi): (Value, Value),
        per: usize,
        total: usize,
        mut body: impl FnMut(&mut Self, Value),
    ) {
        let last = self.iconst(total as i64);
        self.for_range(lo, hi, 1, |kb, u| {
            let first = kb.b.ins().imul_imm_s(u, per as i64);
            let end = kb.b.ins().iadd_imm_s(first, per as i64);
            let end = kb.b.ins().umin(end, last);
            kb.for_range(first, end, 1, &mut body);
        });
    }
    /// The address of a new stack slot of `bytes`, aligned to `1 << align_shift`.
    pub fn stack(&mut self, bytes: usize, align_shift: u8) -> Value {
        let slot = self
            .b
            .create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                bytes as u32,
                align_shift,
            ));
        self.b.ins().stack_addr(I64, slot, 0)
    }
    /// `for_range` with constant bounds; skips emitting anything for an empty range.
    pub fn for_const(
        &mut self,
        lo: usize,
        hi: usize,
        step: usize,
        body: impl FnMut(&mut Self, Value),
    ) {
        if lo + step > hi {
            return;
        }
        let (l, h) = (self.iconst(lo as i64), self.iconst(hi as i64));
        self.for_range(l, h, step as i64, body);
    }
    /// Emits `body(last)` for the last of `count` values of `index` and `body(full)` for the others: one branch
    /// where they differ, none where they are the same (a tail block specialised at compile time).
    pub fn with_last<T: Copy + PartialEq>(
        &mut self,
        index: Value,
        count: usize,
        (full, last): (T, T),
        body: impl Fn(&mut Self, T),
    ) {
        if full == last {
            body(self, full);
        } else {
            let c = self
                .b
                .ins()
                .icmp_imm_s(IntCC::Equal, index, count as i64 - 1);
            self.if_else(c, |kb| body(kb, last), |kb| body(kb, full));
        }
    }
    /// Calls `then` where unit index `i` equals `at`, else `otherwise` (or `then` always when there is no
    /// `otherwise`), with the same arguments: a tail variant of a machine-code kernel for the last unit.
    pub fn call_at(
        &mut self,
        (i, at): (Value, usize),
        then: FuncRef,
        otherwise: Option<FuncRef>,
        args: &[Value],
    ) {
        let Some(other) = otherwise else {
            self.b.ins().call(then, args);
            return;
        };
        let c = self.b.ins().icmp_imm_s(IntCC::Equal, i, at as i64);
        self.if_else(
            c,
            |kb| {
                kb.b.ins().call(then, args);
            },
            |kb| {
                kb.b.ins().call(other, args);
            },
        );
    }
    /// Emits `if cond { then() } else { otherwise() }`.
    pub fn if_else(
        &mut self,
        cond: Value,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        let t = self.b.create_block();
        let e = self.b.create_block();
        let j = self.b.create_block();
        self.b.ins().brif(cond, t, &[], e, &[]);
        self.b.seal_block(t);
        self.b.seal_block(e);
        self.b.switch_to_block(t);
        then(self);
        self.b.ins().jump(j, &[]);
        self.b.switch_to_block(e);
        otherwise(self);
        self.b.ins().jump(j, &[]);
        self.b.switch_to_block(j);
        self.b.seal_block(j);
    }
    /// The units `[lo, hi)` this task processes when `units` units are split evenly over `tasks` tasks.
    pub fn task_range(&mut self, units: usize, tasks: u32) -> (Value, Value) {
        if tasks <= 1 {
            return (self.iconst(0), self.iconst(units as i64));
        }
        let t = self.task;
        let lo = self.b.ins().imul_imm_s(t, units as i64);
        let lo = self.b.ins().udiv_imm_u(lo, tasks as i64);
        let t1 = self.b.ins().iadd_imm_s(t, 1);
        let hi = self.b.ins().imul_imm_s(t1, units as i64);
        let hi = self.b.ins().udiv_imm_u(hi, tasks as i64);
        (lo, hi)
    }
    /// `x / d` and `x % d` for a constant `d`.
    pub fn divmod(&mut self, x: Value, d: usize) -> (Value, Value) {
        if d == 1 {
            return (x, self.iconst(0));
        }
        let q = self.b.ins().udiv_imm_u(x, d as i64);
        let qd = self.b.ins().imul_imm_s(q, d as i64);
        let r = self.b.ins().isub(x, qd);
        (q, r)
    }
    /// The coordinates of flat row-major index `u` over `dims` (constant dims), outermost first.
    pub fn unravel(&mut self, u: Value, dims: &[usize]) -> Vec<Value> {
        let mut rem = u;
        let mut count: usize = dims.iter().product();
        let mut out = Vec::with_capacity(dims.len());
        for &d in dims {
            count /= d.max(1);
            let (q, r) = self.divmod(rem, count.max(1));
            out.push(q);
            rem = r;
        }
        out
    }
    /// The two element offsets of flat row-major index `u` over `dims` (count, stride in one buffer, stride in
    /// the other; constants, outermost first): `Σ qᵢ·aᵢ` and `Σ qᵢ·bᵢ` over `u`'s coordinates `qᵢ`.
    pub fn strided_offsets(&mut self, u: Value, dims: &[(usize, usize, usize)]) -> (Value, Value) {
        let counts: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let (mut oa, mut ob) = (self.iconst(0), self.iconst(0));
        for (q, &(_, da, db)) in self.unravel(u, &counts).into_iter().zip(dims) {
            let t = self.b.ins().imul_imm_s(q, da as i64);
            oa = self.b.ins().iadd(oa, t);
            let t = self.b.ins().imul_imm_s(q, db as i64);
            ob = self.b.ins().iadd(ob, t);
        }
        (oa, ob)
    }
    /// The first element index of row `u` in an `[outer, len, inner]` geometry walked along `len` with stride
    /// `inner` (rows are the (outer, inner) pairs).
    pub fn strided_row_start(&mut self, u: Value, len: usize, inner: usize) -> Value {
        let (o, i) = self.divmod(u, inner);
        let row = self.b.ins().imul_imm_s(o, (len * inner) as i64);
        self.b.ins().iadd(row, i)
    }
    /// Σ f(v) over a contiguous row of `len` floats at `x`, in a fixed order: four f32x4 partial sums over
    /// blocks of 16 floats (accumulator k takes floats `16i + 4k .. 16i + 4k + 4`; the one to three whole
    /// vectors past the last block go to accumulators 0, 1, 2 in turn), combined as `(a0 + a1) + (a2 + a3)`,
    /// then the horizontal sum, then a scalar tail. Four independent chains: one chain took LayerNorm's two
    /// passes over a 128-float row four cycles of add latency per vector.
    pub fn row_sum(
        &mut self,
        x: Value,
        len: usize,
        f: impl Fn(&mut Self, Type, Value) -> Value,
    ) -> Value {
        let nvec = len / LANES * LANES;
        let block = 4 * LANES;
        let nblk = len / block * block;
        let z = self.fconst(VEC, 0.0);
        let acc: Vec<Variable> = (0..4).map(|_| self.var(VEC, z)).collect();
        let add = |kb: &mut Self, k: usize, p: Value, off: usize| {
            let v = kb.load(VEC, p, (off * 4) as i64);
            let t = f(kb, VEC, v);
            let a = kb.b.use_var(acc[k]);
            let a = kb.b.ins().fadd(a, t);
            kb.b.def_var(acc[k], a);
        };
        self.for_const(0, nblk, block, |kb, j| {
            let p = kb.addr(x, j, 4);
            for k in 0..4 {
                add(kb, k, p, k * LANES);
            }
        });
        for (k, j) in (nblk..nvec).step_by(LANES).enumerate() {
            add(self, k, x, j);
        }
        let a: Vec<Value> = acc.iter().map(|&v| self.b.use_var(v)).collect();
        let a01 = self.b.ins().fadd(a[0], a[1]);
        let a23 = self.b.ins().fadd(a[2], a[3]);
        let a = self.b.ins().fadd(a01, a23);
        let mut s = self.hsum(a);
        for j in nvec..len {
            let v = self.load(F32, x, (j * 4) as i64);
            let t = f(self, F32, v);
            s = self.b.ins().fadd(s, t);
        }
        s
    }
    /// Horizontal sum of an f32x4 in a fixed order: (l0 + l1) + (l2 + l3).
    pub fn hsum(&mut self, v: Value) -> Value {
        let l: Vec<Value> = (0..4u8).map(|i| self.b.ins().extractlane(v, i)).collect();
        let a = self.b.ins().fadd(l[0], l[1]);
        let c = self.b.ins().fadd(l[2], l[3]);
        self.b.ins().fadd(a, c)
    }
    /// Horizontal max of an f32x4.
    pub fn hmax(&mut self, v: Value) -> Value {
        let l: Vec<Value> = (0..4u8).map(|i| self.b.ins().extractlane(v, i)).collect();
        let a = self.b.ins().fmax(l[0], l[1]);
        let c = self.b.ins().fmax(l[2], l[3]);
        self.b.ins().fmax(a, c)
    }
}

/// Starts a function body: creates its entry block with the function's parameters, switches to it and seals
/// it; returns the parameters (the kernel functions, the entry functions and a fat bundle's dispatcher).
pub fn begin_body(b: &mut FunctionBuilder) -> Vec<Value> {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    b.block_params(entry).to_vec()
}

/// Vector type used by the kernels.
pub const VEC: Type = F32X4;
/// Lanes in `VEC`.
pub const LANES: usize = 4;
