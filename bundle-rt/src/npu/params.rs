//! Kernel parameter blocks: [`Params::parse`] (the kernel numbers and block sizes are
//! `crate::superkernel`'s [`Kernel`]), which reads a block from a core tile's data memory and checks every word
//! before a kernel runs.
//!
//! Invariants once a [`Params`] exists: dtype, flags, op, kind, mode and activation codes are known;
//! every dimension the format requires to be ≥ 1 is; depthwise CONV has `cb == mb`; and every region
//! the kernel reads or writes (element count × element size from its address word, computed in
//! checked u64) ends inside the tile's data memory. Kernels therefore index data memory only inside
//! those regions, and every index product they form is bounded by the tile's size.
//! Zero points are ignored for f32 (`dtype` 0), scales and `out_zp` likewise.

use super::regs::u32_at;
use crate::error::{NpuWhy, ParamWhy};
pub(crate) use crate::superkernel::Kernel;
use core::ops::Range;

/// Element types of a kernel (`dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DType {
    /// 0: f32 everywhere.
    F32,
    /// 1: u8 activations, i8 weights, i32 accumulator.
    U8,
    /// 2: i8 activations and weights, i32 accumulator.
    I8,
}

impl DType {
    /// Bytes of one activation / output element.
    pub(crate) const fn size(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::U8 | DType::I8 => 1,
        }
    }
}

/// A window geometry shared by CONV and POOL.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    /// Channels (CONV: `cb`; POOL: `c`).
    pub c: usize,
    /// Input rows and width.
    pub in_rows: usize,
    /// Input width.
    pub in_w: usize,
    /// Output rows.
    pub out_rows: usize,
    /// Output width.
    pub out_w: usize,
    /// Kernel height and width.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Strides.
    pub sh: usize,
    /// Stride along the width.
    pub sw: usize,
    /// Dilations.
    pub dh: usize,
    /// Dilation along the width.
    pub dw: usize,
    /// Input row of output row 0's first tap.
    pub row0: i64,
    /// Input column of output column 0's first tap.
    pub col0: i64,
}

/// CONV (1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conv {
    pub dt: DType,
    pub zero: bool,
    pub depthwise: bool,
    pub inp: usize,
    pub w: usize,
    pub acc: usize,
    pub mb: usize,
    pub win: Window,
    pub x_zp: i32,
}

/// GEMM (2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gemm {
    pub dt: DType,
    pub zero: bool,
    pub a: usize,
    pub b: usize,
    pub acc: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a_zp: i32,
}

/// The activation words shared by EPILOGUE and ELTWISE.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Act {
    /// 0 none, 1 relu, 2 clip.
    pub code: u32,
    /// Word 9: clip lo (f32 bits) or int8 clamp lo (i32 bits).
    pub lo: u32,
    /// Word 10: clip hi or int8 clamp hi.
    pub hi: u32,
}

/// EPILOGUE (3).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epilogue {
    pub dt: DType,
    pub bias: Option<usize>,
    pub per_col: bool,
    pub residual: Option<usize>,
    pub acc: usize,
    pub out: usize,
    pub rows: usize,
    pub cols: usize,
    pub act: Act,
    pub scale: usize,
    pub out_zp: i32,
}

/// ELTWISE (4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Eltwise {
    pub dt: DType,
    /// 0 add, 1 mul, 2 none.
    pub op: u32,
    pub a: usize,
    pub b: usize,
    pub out: usize,
    pub n: usize,
    /// 0 elementwise, 1 scalar, 2 per row.
    pub mode: u32,
    pub inner: usize,
    pub act: Act,
    pub a_scale: f32,
    pub a_zp: i32,
    pub b_scale: f32,
    pub b_zp: i32,
    pub y_scale: f32,
    pub y_zp: i32,
}

/// POOL (5).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pool {
    pub dt: DType,
    /// 0 max, 1 average counting padding, 2 average over valid positions.
    pub kind: u32,
    pub inp: usize,
    pub out: usize,
    pub win: Window,
}

/// GAP (6).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gap {
    pub dt: DType,
    pub inp: usize,
    pub out: usize,
    pub c: usize,
    pub n: usize,
}

/// A checked parameter block.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Params {
    Conv(Conv),
    Gemm(Gemm),
    Epilogue(Epilogue),
    Eltwise(Eltwise),
    Pool(Pool),
    Gap(Gap),
}

/// Reads and checks the words of one block.
struct Block<'m> {
    kernel: Kernel,
    /// The block's bytes (exactly `kernel.block_bytes()`).
    bytes: &'m [u8],
    /// The tile's data memory size.
    local: u64,
}

type R<T> = core::result::Result<T, NpuWhy>;

impl Block<'_> {
    fn word(&self, i: usize) -> u32 {
        u32_at(self.bytes, i * 4).unwrap_or(0)
    }

    fn bad(&self, i: usize, why: ParamWhy) -> NpuWhy {
        NpuWhy::BadParam {
            kernel: self.kernel as u32,
            word: i as u32,
            value: self.word(i),
            why,
        }
    }

    fn i32(&self, i: usize) -> i32 {
        self.word(i) as i32
    }

    fn f32(&self, i: usize) -> f32 {
        f32::from_bits(self.word(i))
    }

    /// A dimension that must be ≥ 1.
    fn dim(&self, i: usize) -> R<usize> {
        match self.word(i) {
            0 => Err(self.bad(i, ParamWhy::Zero)),
            v => Ok(v as usize),
        }
    }

    /// A code in `0..=max`.
    fn code(&self, i: usize, max: u32) -> R<u32> {
        let v = self.word(i);
        if v > max {
            return Err(self.bad(i, ParamWhy::UnknownCode));
        }
        Ok(v)
    }

    /// Flags with only the bits of `known` set.
    fn flags(&self, i: usize, known: u32) -> R<u32> {
        let v = self.word(i);
        if v & !known != 0 {
            return Err(self.bad(i, ParamWhy::UnknownCode));
        }
        Ok(v)
    }

    fn dtype(&self) -> R<DType> {
        Ok(match self.code(0, 2)? {
            0 => DType::F32,
            1 => DType::U8,
            _ => DType::I8,
        })
    }

    /// The region at address word `i` of `elems` (a product of dims) elements of `size` bytes.
    fn region(&self, i: usize, elems: &[usize], size: u64) -> R<usize> {
        let start = u64::from(self.word(i));
        let overflow = || self.bad(i, ParamWhy::Overflow);
        let mut len = size;
        for &e in elems {
            len = len.checked_mul(e as u64).ok_or_else(overflow)?;
        }
        let end = start.checked_add(len).ok_or_else(overflow)?;
        if end > self.local {
            let why = ParamWhy::OutOfBounds {
                end,
                size: self.local,
            };
            return Err(self.bad(i, why));
        }
        Ok(start as usize)
    }

    fn act(&self) -> R<Act> {
        Ok(Act {
            code: self.code(8, 2)?,
            lo: self.word(9),
            hi: self.word(10),
        })
    }

    /// The window geometry at word `c` (channels), `rows` (in_rows, in_w, out_rows, out_w), `k`
    /// (kh, kw, stride_h, stride_w, dil_h, dil_w) and `org` (row0, col0).
    fn window(&self, c: usize, rows: [usize; 4], k: [usize; 6], org: [usize; 2]) -> R<Window> {
        Ok(Window {
            c: self.dim(c)?,
            in_rows: self.dim(rows[0])?,
            in_w: self.dim(rows[1])?,
            out_rows: self.dim(rows[2])?,
            out_w: self.dim(rows[3])?,
            kh: self.dim(k[0])?,
            kw: self.dim(k[1])?,
            sh: self.dim(k[2])?,
            sw: self.dim(k[3])?,
            dh: self.dim(k[4])?,
            dw: self.dim(k[5])?,
            row0: self.i32(org[0]).into(),
            col0: self.i32(org[1]).into(),
        })
    }
}

impl Params {
    /// Reads and checks `kernel`'s block (`bytes`, exactly its block size) for a tile of `local`
    /// bytes.
    pub(crate) fn parse(kernel: Kernel, bytes: &[u8], local: u32) -> R<Params> {
        let b = Block {
            kernel,
            bytes,
            local: local.into(),
        };
        Ok(match kernel {
            Kernel::Conv => Params::Conv(conv(&b)?),
            Kernel::Gemm => Params::Gemm(gemm(&b)?),
            Kernel::Epilogue => Params::Epilogue(epilogue(&b)?),
            Kernel::Eltwise => Params::Eltwise(eltwise(&b)?),
            Kernel::Pool => Params::Pool(pool(&b)?),
            Kernel::Gap => Params::Gap(gap(&b)?),
        })
    }
}

fn conv(b: &Block<'_>) -> R<Conv> {
    let dt = b.dtype()?;
    let flags = b.flags(1, 0b11)?;
    let depthwise = flags & 2 != 0;
    let win = b.window(5, [6, 7, 9, 10], [11, 12, 13, 14, 15, 16], [17, 18])?;
    let mb = b.dim(8)?;
    if depthwise && win.c != mb {
        let why = ParamWhy::Mismatch {
            expected: mb as u64,
        };
        return Err(b.bad(5, why));
    }
    let inp = b.region(2, &[win.c, win.in_rows, win.in_w], dt.size())?;
    let wsize = if dt == DType::F32 { 4 } else { 1 };
    let w = if depthwise {
        b.region(3, &[mb, win.kh, win.kw], wsize)?
    } else {
        b.region(3, &[mb, win.c, win.kh, win.kw], wsize)?
    };
    let acc = b.region(4, &[mb, win.out_rows, win.out_w], 4)?;
    Ok(Conv {
        dt,
        zero: flags & 1 != 0,
        depthwise,
        inp,
        w,
        acc,
        mb,
        win,
        x_zp: b.i32(19),
    })
}

fn gemm(b: &Block<'_>) -> R<Gemm> {
    let dt = b.dtype()?;
    let flags = b.flags(1, 1)?;
    let (m, k, n) = (b.dim(5)?, b.dim(6)?, b.dim(7)?);
    let wsize = if dt == DType::F32 { 4 } else { 1 };
    Ok(Gemm {
        dt,
        zero: flags & 1 != 0,
        a: b.region(2, &[m, k], dt.size())?,
        b: b.region(3, &[k, n], wsize)?,
        acc: b.region(4, &[m, n], 4)?,
        m,
        k,
        n,
        a_zp: b.i32(8),
    })
}

fn epilogue(b: &Block<'_>) -> R<Epilogue> {
    let dt = b.dtype()?;
    let flags = b.flags(1, 0b111)?;
    let f32 = dt == DType::F32;
    if flags & 4 != 0 && !f32 {
        return Err(b.bad(1, ParamWhy::F32Only));
    }
    let (rows, cols) = (b.dim(6)?, b.dim(7)?);
    let per_col = flags & 2 != 0;
    let vec_len = if per_col { cols } else { rows };
    let bias = match flags & 1 {
        0 => None,
        _ => Some(b.region(3, &[vec_len], 4)?),
    };
    let residual = match flags & 4 {
        0 => None,
        _ => Some(b.region(4, &[rows, cols], 4)?),
    };
    Ok(Epilogue {
        dt,
        bias,
        per_col,
        residual,
        acc: b.region(2, &[rows, cols], 4)?,
        out: b.region(5, &[rows, cols], dt.size())?,
        rows,
        cols,
        act: b.act()?,
        scale: if f32 { 0 } else { b.region(11, &[vec_len], 4)? },
        out_zp: b.i32(12),
    })
}

fn eltwise(b: &Block<'_>) -> R<Eltwise> {
    let dt = b.dtype()?;
    let op = b.code(1, 2)?;
    let n = b.dim(5)?;
    let mode = b.code(6, 2)?;
    let inner = b.dim(7)?;
    let size = dt.size();
    let a = b.region(2, &[n], size)?;
    let b_elems = match mode {
        0 => n,
        1 => 1,
        _ => n.div_ceil(inner),
    };
    let b_addr = if op == 2 {
        0
    } else {
        b.region(3, &[b_elems], size)?
    };
    Ok(Eltwise {
        dt,
        op,
        a,
        b: b_addr,
        out: b.region(4, &[n], size)?,
        n,
        mode,
        inner,
        act: b.act()?,
        a_scale: b.f32(11),
        a_zp: b.i32(12),
        b_scale: b.f32(13),
        b_zp: b.i32(14),
        y_scale: b.f32(15),
        y_zp: b.i32(16),
    })
}

fn pool(b: &Block<'_>) -> R<Pool> {
    let dt = b.dtype()?;
    let kind = b.code(1, 2)?;
    let win = b.window(4, [5, 6, 7, 8], [9, 10, 11, 12, 15, 16], [13, 14])?;
    let size = dt.size();
    let inp = b.region(2, &[win.c, win.in_rows, win.in_w], size)?;
    let out = b.region(3, &[win.c, win.out_rows, win.out_w], size)?;
    if kind != 1 {
        check_windows(&win)?;
    }
    Ok(Pool {
        dt,
        kind,
        inp,
        out,
        win,
    })
}

fn gap(b: &Block<'_>) -> R<Gap> {
    let dt = b.dtype()?;
    if b.word(1) != 0 {
        return Err(b.bad(1, ParamWhy::Mismatch { expected: 0 }));
    }
    let (c, n) = (b.dim(4)?, b.dim(5)?);
    let size = dt.size();
    Ok(Gap {
        dt,
        inp: b.region(2, &[c, n], size)?,
        out: b.region(3, &[c], size)?,
        c,
        n,
    })
}

impl Params {
    /// The work the cycle estimate counts, and whether it runs at the f32 rate: MACs for CONV
    /// (every tap, padding included) and GEMM; elements for EPILOGUE (`rows * cols`), ELTWISE
    /// (`n`), POOL (`c * out_rows * out_w * kh * kw` window taps) and GAP (`c * n`).
    pub(crate) fn work(&self) -> (u64, bool) {
        let prod = |v: &[usize]| v.iter().fold(1u64, |acc, &x| acc.saturating_mul(x as u64));
        match self {
            Params::Conv(p) => {
                let w = &p.win;
                let c = if p.depthwise { 1 } else { w.c };
                let taps = [p.mb, w.out_rows, w.out_w, c, w.kh, w.kw];
                (prod(&taps), p.dt == DType::F32)
            }
            Params::Gemm(p) => (prod(&[p.m, p.k, p.n]), p.dt == DType::F32),
            Params::Epilogue(p) => (prod(&[p.rows, p.cols]), p.dt == DType::F32),
            Params::Eltwise(p) => (p.n as u64, p.dt == DType::F32),
            Params::Pool(p) => {
                let w = &p.win;
                let taps = [w.c, w.out_rows, w.out_w, w.kh, w.kw];
                (prod(&taps), p.dt == DType::F32)
            }
            Params::Gap(p) => (prod(&[p.c, p.n]), p.dt == DType::F32),
        }
    }
}

/// The first input row (or column) of output position `o`: `o * stride + origin`, saturating (a
/// saturated value is far past any slab, so its taps are all skipped, as they would be).
pub(crate) fn base(o: usize, stride: usize, origin: i64) -> i64 {
    (o as i64)
        .saturating_mul(stride as i64)
        .saturating_add(origin)
}

/// The taps `t < k` with `0 <= base + t * dil < size` (`dil`, `size` ≥ 1).
pub(crate) fn taps(base: i64, k: usize, dil: usize, size: usize) -> Range<usize> {
    let (k, dil, size) = (k as i64, dil as i64, size as i64);
    let lo = if base >= 0 {
        0
    } else {
        base.saturating_neg().saturating_add(dil - 1) / dil
    };
    let hi = if base >= size {
        0
    } else {
        (size - 1 - base) / dil + 1
    };
    let hi = hi.min(k);
    let lo = lo.min(hi);
    lo as usize..hi as usize
}

/// Checks that every output row and column window covers at least one input position (max and
/// valid-only average POOL).
pub(crate) fn check_windows(w: &Window) -> Result<(), NpuWhy> {
    for oh in 0..w.out_rows {
        if taps(base(oh, w.sh, w.row0), w.kh, w.dh, w.in_rows).is_empty() {
            return Err(NpuWhy::EmptyWindow {
                row: oh as u32,
                col: 0,
            });
        }
    }
    for ow in 0..w.out_w {
        if taps(base(ow, w.sw, w.col0), w.kw, w.dw, w.in_w).is_empty() {
            return Err(NpuWhy::EmptyWindow {
                row: 0,
                col: ow as u32,
            });
        }
    }
    Ok(())
}
