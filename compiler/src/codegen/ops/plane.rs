//! Padded stack planes: the mechanism the row-kernel paths share (depthwise convolution, max pooling, the
//! Winograd input transform) to run a machine-code row kernel over every output row without a border case.
//! A kernel makes one [`StackPlane`] per task, its border filled once with the padding value (0 or −∞); per
//! input plane it [`StackPlane::load`]s the rows into the interior (the copies never touch the border), then
//! calls the row kernel on the plane's rows.

use crate::codegen::builder::Kb;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{FuncRef, InstBuilder, StackSlotData, StackSlotKind, Value};

/// A `[rows, cols]` f32 plane on the kernel's stack (64-aligned).
pub struct StackPlane {
    /// Address of element (0, 0).
    pub addr: Value,
    rows: usize,
    cols: usize,
}

impl StackPlane {
    /// Allocates the plane and fills all of it with `fill` (once per task: loads write only the interior).
    pub fn new(kb: &mut Kb, [rows, cols]: [usize; 2], fill: f32) -> StackPlane {
        let slot = kb.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (rows * cols * 4) as u32,
            6,
        ));
        let addr = kb.b.ins().stack_addr(I64, slot, 0);
        super::conv::fill(kb, addr, 0, rows * cols, fill);
        StackPlane { addr, rows, cols }
    }

    /// The address of row `row` (a runtime value) times `step` rows.
    pub fn row(&self, kb: &mut Kb, row: Value, step: usize) -> Value {
        kb.addr(self.addr, row, (step * self.cols * 4) as i64)
    }

    /// Copies the `[h, w]` f32 plane at `src` into the plane with its element (0, 0) at `[top, left]`, clipped
    /// to the plane: one call to `copy(src, dst, n)` per row (the AVX-512 row copy), or an unrolled Cranelift
    /// copy without it.
    pub fn load(
        &self,
        kb: &mut Kb,
        src: Value,
        [h, w]: [usize; 2],
        [top, left]: [usize; 2],
        copy: Option<FuncRef>,
    ) {
        let rows = (h + top).min(self.rows).saturating_sub(top);
        let cols = (w + left).min(self.cols).saturating_sub(left);
        let first =
            kb.b.ins()
                .iadd_imm_s(self.addr, ((top * self.cols + left) * 4) as i64);
        let n = copy.map(|_| kb.iconst(cols as i64));
        kb.for_const(0, rows, 1, |kb, iy| {
            let from = kb.addr(src, iy, (w * 4) as i64);
            let to = kb.addr(first, iy, (self.cols * 4) as i64);
            match (copy, n) {
                (Some(f), Some(n)) => {
                    kb.b.ins().call(f, &[from, to, n]);
                }
                _ => super::conv::copy_f32(kb, from, to, cols),
            }
        });
    }

    /// `load` into a plane whose rows hold their even columns, then their odd ones from column `half`
    /// (`PlaneMode::Split`), clipped to the plane. With `deinterleave`, `copy` is the deinterleaving row
    /// copy `(src, a, b, n)` (`copy_x86::assemble_deinterleave`), one call per row; else the stride-2 row copy
    /// `(src, dst, n)` (`dst[t] = src[2t]`), one call per row and parity.
    #[allow(clippy::too_many_arguments)] // the plane geometry and the copy
    pub fn load_split(
        &self,
        kb: &mut Kb,
        src: Value,
        [h, w]: [usize; 2],
        [top, left]: [usize; 2],
        half: usize,
        copy: Option<FuncRef>,
        deinterleave: bool,
    ) {
        let Some(f) = copy else {
            return self.load(kb, src, [h, w], [top, left], None);
        };
        let rows = (h + top).min(self.rows).saturating_sub(top);
        let end = (w + left).min(self.cols);
        // Input column i lands on padded column p = i + left, stored in its parity's half at p / 2.
        let at = |p: usize| p % 2 * half + p / 2;
        if deinterleave {
            // The first input goes to `a`, the second to `b`.
            let n = end.saturating_sub(left);
            let (a0, b0) = (at(left), at(left + 1));
            if n == 0 {
                return;
            }
            kb.for_const(0, rows, 1, |kb, iy| {
                let from = kb.addr(src, iy, (w * 4) as i64);
                let row = kb.b.ins().iadd_imm_s(iy, top as i64);
                let to = self.row(kb, row, 1);
                let a = kb.b.ins().iadd_imm_s(to, (a0 * 4) as i64);
                let b = kb.b.ins().iadd_imm_s(to, (b0 * 4) as i64);
                let n = kb.iconst(n as i64);
                kb.b.ins().call(f, &[from, a, b, n]);
            });
            return;
        }
        // Per parity: (first input column, first plane column, count) of the padded columns p in left..end.
        let parts: Vec<(usize, usize, usize)> = (0..2)
            .filter_map(|parity| {
                let p0 = left + (left + parity) % 2;
                let n = end.saturating_sub(p0).div_ceil(2);
                (n > 0).then_some((p0 - left, at(p0), n))
            })
            .collect();
        kb.for_const(0, rows, 1, |kb, iy| {
            let from = kb.addr(src, iy, (w * 4) as i64);
            let row = kb.b.ins().iadd_imm_s(iy, top as i64);
            let to = self.row(kb, row, 1);
            for &(i0, c0, n) in &parts {
                let s = kb.b.ins().iadd_imm_s(from, (i0 * 4) as i64);
                let d = kb.b.ins().iadd_imm_s(to, (c0 * 4) as i64);
                let n = kb.iconst(n as i64);
                kb.b.ins().call(f, &[s, d, n]);
            }
        });
    }
}
