//! The loops the row kernels share: the loop over one row's outputs in steps of several vectors down to a masked
//! tail (`row_loop`), and the multi-row wrappers (`rows_begin` / `rows_end`, `row_groups`) that walk a kernel's
//! rows with their pointers kept in callee-saved registers.

use super::regs::disp;
use iced_x86::code_asm::{AsmRegister64, CodeAssembler, CodeLabel};
use iced_x86::IcedError;

/// The loop over a row of outputs that the row kernels share, the count in `n`: steps of `big` vectors while
/// at least `big · lanes` outputs remain, then of `big − 1`, … down to single vectors, then — when any remain —
/// `tail`, which sets the tail masks, and one masked step. `step(a, vectors, masked)` emits a step; after an
/// unmasked one `src` advances by `src_bytes` and `dst` by `dst_bytes` per vector. Falls through to the
/// caller's epilogue.
#[allow(clippy::too_many_arguments)] // registers, vector geometry and the two emitters
pub(crate) fn row_loop(
    a: &mut CodeAssembler,
    (n, src, dst): (AsmRegister64, AsmRegister64, AsmRegister64),
    lanes: usize,
    big: usize,
    (src_bytes, dst_bytes): (usize, usize),
    mut step: impl FnMut(&mut CodeAssembler, usize, bool) -> Result<(), IcedError>,
    tail: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<(), IcedError> {
    // Steps of big, big − 1, …, 1 vectors: a row's last vectors still run as independent chains (a 56-wide
    // row is one 3-vector step and a masked one, not three dependent single-vector steps).
    let tiers: Vec<usize> = (1..=big.max(1)).rev().collect();
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    let mut done = a.create_label();
    for (i, vectors) in tiers.iter().copied().enumerate() {
        a.set_label(&mut labels[i])?;
        a.cmp(n, (vectors * lanes) as i32)?;
        a.jb(labels[i + 1])?;
        step(a, vectors, false)?;
        a.add(src, (vectors * src_bytes) as i32)?;
        a.add(dst, (vectors * dst_bytes) as i32)?;
        a.sub(n, (vectors * lanes) as i32)?;
        a.jmp(labels[i])?;
    }
    a.set_label(&mut labels[tiers.len()])?;
    a.test(n, n)?;
    a.jz(done)?;
    tail(a)?;
    step(a, 1, true)?;
    a.set_label(&mut done)
}

/// Starts the loop over output rows of a multi-row row kernel (`DwRowF32::rows`): saves `rbx`, `r12`–`r14`,
/// keeps the row count (6th argument, `r9`) in `r14`, the output count in `rbx` and the first rows' pointers
/// (`rdi`, `rsi`) in `r12`/`r13`, and places the loop head, where each row starts with `rdi`, `rsi` and `r8`
/// restored (the row loop consumes them; its tail masks clobber `r9`–`r11`). Returns (head, exit); no rows go
/// straight to the exit.
pub(crate) fn rows_begin(a: &mut CodeAssembler) -> Result<(CodeLabel, CodeLabel), IcedError> {
    use iced_x86::code_asm::{r12, r13, r14, r8, rbx, rdi, rsi};
    let mut head = a.create_label();
    let exit = a.create_label();
    rows_save(a)?;
    a.test(r14, r14)?;
    a.jz(exit)?;
    a.set_label(&mut head)?;
    a.mov(rdi, r12)?;
    a.mov(rsi, r13)?;
    a.mov(r8, rbx)?;
    Ok((head, exit))
}

/// Rows mode `group` output rows at a time (a power of two): `body(a, g)` computes the `g` rows at rdi, rdi + `x`,
/// … floats into rsi, rsi + `out`, … (r8 outputs each), `g = group` while that many rows (r9) remain, then at
/// most one group of each smaller power of two for the rest. Saves and restores rbx and r12–r14, as
/// [`rows_begin`] / [`rows_end`]; `Err` when a group's displacement does not fit.
pub(crate) fn row_groups(
    a: &mut CodeAssembler,
    [x, out]: [usize; 2],
    group: usize,
    mut body: impl FnMut(&mut CodeAssembler, usize) -> Result<(), IcedError>,
) -> Result<(), String> {
    use iced_x86::code_asm::{r12, r13, r14, r8, rbx, rdi, rsi};
    let sizes: Vec<usize> = (0..usize::BITS)
        .map(|i| group >> i)
        .take_while(|&g| g > 0)
        .collect();
    let steps = sizes
        .iter()
        .map(|&g| {
            let d = |f: usize| disp("row kernel groups", f.saturating_mul(g));
            Ok((g, d(x)?, d(out)?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let e = |x: IcedError| x.to_string();
    let mut go = || -> Result<(), IcedError> {
        rows_save(a)?;
        for (i, &(g, dx, dout)) in steps.iter().enumerate() {
            // The first size loops; each smaller one runs at most once.
            let mut head = a.create_label();
            let mut next = a.create_label();
            a.set_label(&mut head)?;
            a.cmp(r14, g as i32)?;
            a.jb(next)?;
            a.mov(rdi, r12)?;
            a.mov(rsi, r13)?;
            a.mov(r8, rbx)?;
            body(a, g)?;
            a.add(r12, dx)?;
            a.add(r13, dout)?;
            a.sub(r14, g as i32)?;
            if i == 0 {
                a.jmp(head)?;
            }
            // A zero-size instruction takes the label, so the next size's head can take the next one.
            a.set_label(&mut next)?;
            a.zero_bytes()?;
        }
        rows_restore(a)
    };
    go().map_err(e)
}

/// Ends the loop [`rows_begin`] started: advances the row pointers by `[x, out]` floats (`Err` when a
/// displacement does not fit), loops while rows remain, then restores the saved registers.
pub(crate) fn rows_end(
    a: &mut CodeAssembler,
    (head, mut exit): (CodeLabel, CodeLabel),
    [x, out]: [usize; 2],
) -> Result<(), String> {
    use iced_x86::code_asm::{r12, r13, r14};
    let (x, out) = (disp("row kernel rows", x)?, disp("row kernel rows", out)?);
    let e = |x: IcedError| x.to_string();
    a.add(r12, x).map_err(e)?;
    a.add(r13, out).map_err(e)?;
    a.dec(r14).map_err(e)?;
    a.jnz(head).map_err(e)?;
    a.set_label(&mut exit).map_err(e)?;
    rows_restore(a).map_err(e)
}

/// The rows loops' prologue ([`rows_begin`], [`row_groups`]): saves `rbx` and `r12`–`r14`, then keeps the row
/// count (`r9`) in `r14`, the output count (`r8`) in `rbx` and the first rows' pointers (`rdi`, `rsi`) in
/// `r12` / `r13`.
fn rows_save(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r12, r13, r14, r8, r9, rbx, rdi, rsi};
    for r in [rbx, r12, r13, r14] {
        a.push(r)?;
    }
    a.mov(r14, r9)?;
    a.mov(rbx, r8)?;
    a.mov(r12, rdi)?;
    a.mov(r13, rsi)
}

/// Restores what [`rows_save`] saved.
fn rows_restore(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r12, r13, r14, rbx};
    for r in [r14, r13, r12, rbx] {
        a.pop(r)?;
    }
    Ok(())
}
