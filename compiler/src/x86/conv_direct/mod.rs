//! The direct convolution kernel for convolutions with few input channels (a network's stem: ResNet-50's 7x7
//! stride-2 3→64, MobileNet's 3x3 stride-2 3→32), where im2col writes a column matrix many times the input
//! (ResNet-50: 7.4 MB from 0.6 MB) that the GEMM then streams back. One family over the `Isa` trait: the
//! contract (`check`), the frame and the pixel block are written once here; `avx512.rs` and `avx2.rs` give the
//! register assignment of each ISA.
//!
//! Output channels sit in the lanes of a vector (16 per `zmm`; on AVX2 each block of 16 packed channels is two
//! passes of eight per `ymm`) and a block of output pixels of a row (as many as the lanes) in as many
//! accumulators; each tap loads the channels' weights once and takes one multiply-add per pixel with the input
//! pixel broadcast (an embedded broadcast on AVX-512, `vbroadcastss` on AVX2) from the zero-padded input
//! (`ops/conv.rs`'s pad pass writes it), so nothing is gathered and no column matrix exists.
//!
//! One call computes one output row for every output channel: per block of 16 channels (a counted loop), per
//! block of pixels (a counted loop, then a shorter last block), the accumulators take the taps in (c, ky, kx)
//! order — a loop over input channels around the unrolled taps — in K blocks of whole channels ([`group`]: each
//! block from +0.0, added to the earlier blocks' totals kept on the stack, as the GEMM sums its K blocks), then
//! the bias is added and the clamp applied (NaN kept), the block is transposed so that each register holds one
//! channel's pixels, and stored, the last block's cut to its pixels (a masked store, or `store_head_ymm`):
//! nothing past the row is written. Each output is the im2col GEMM's sum over K = (c, ky, kx) with zeros at
//! padded taps, then the same bias add and clamp; where its K blocks and the GEMM's part at different steps
//! the two agree within rounding (bitwise where K fits one block).
//!
//! `fn(x: *const f32, w: *const f32, bias: *const f32, out: *mut f32)` (System V): `x` the padded input's
//! channel 0 at the row the output row's taps start at, `w` the weights packed `[M/16][C·KH·KW][16]`
//! (`pack16`), `bias` M floats (unused without a bias), `out` the output's channel 0 at the output row.
//! Saves and restores `rbx`, `r12`.

pub mod avx2;
pub mod avx512;

use super::disp;
use super::isa::Isa;
use crate::kernel::conv::ConvDirect;
use iced_x86::code_asm::*;

/// The most output pixels per block (the AVX-512 transpose's width): `check` bounds every displacement with it.
const PIXELS: usize = 16;

const NAME: &str = "direct convolution";

/// `Err` for a shape the kernel does not take (M not a multiple of 16, a zero size) or displacements that do not
/// fit its 32-bit encodings; lowering asks before it picks the kernel.
pub fn check(s: &ConvDirect) -> Result<(), String> {
    let [hp, wp] = s.padded;
    let [kh, kw] = s.kernel;
    let [_, sw] = s.strides;
    let [dil_y, dil_x] = s.dilations;
    let [oh, ow] = s.out;
    let taps = kh * kw;
    if s.c == 0 || s.m == 0 || !s.m.is_multiple_of(16) || taps == 0 || oh * ow == 0 || sw == 0 {
        return Err(format!("{NAME}: unsupported shape {s:?}"));
    }
    let plane_out = oh * ow;
    // Every displacement the code uses, checked once (the emitters then take them as fitting).
    let reach = (kh - 1)
        .checked_mul(dil_y)
        .and_then(|x| x.checked_mul(wp))
        .and_then(|x| x.checked_add((PIXELS - 1).checked_mul(sw)?))
        .and_then(|x| x.checked_add((kw - 1).checked_mul(dil_x)?))
        .and_then(|x| Some(x.max(hp.checked_mul(wp)?)));
    let rows = plane_out
        .checked_mul(15)
        .and_then(|x| x.checked_add(PIXELS));
    let outs = plane_out.checked_mul(16);
    let weights = s.c.checked_mul(taps).and_then(|x| x.checked_mul(16));
    for floats in [reach, rows, outs, weights] {
        disp(
            NAME,
            floats.ok_or_else(|| format!("{NAME}: shape overflows {s:?}"))?,
        )?;
    }
    Ok(())
}

/// Assembles the kernel on ISA `I` with its registers `regs`; `Err` where [`check`] fails.
fn assemble<I: Isa>(s: &ConvDirect, regs: &Regs) -> Result<Vec<u8>, String> {
    assemble_blocks(s, I::LANES, 16 / I::LANES, |a, half, n, plane_out| {
        pixel_block::<I>(a, s, regs, half, n, plane_out)
    })
}

/// The loops both kernel sets share: per block of 16 output channels, `passes` passes over `16 / passes`
/// channels each (their outputs `16 / passes` planes apart), each over the row's blocks of `pixels` pixels (a
/// counted loop, then the shorter last block), `block(a, pass, n, plane_out)` emitting one block of `n`
/// pixels from `r9` (its input) to `r10` (its output) with the weights of the 16 channels at `rsi`, their
/// biases at `rdx`. Registers: rdi x row, rsi w, rdx bias, rcx out; r8 channel blocks left, r9 / r10 the pixel
/// block's input / output, r11 pixel blocks left; `rax`, `rbx`, `r12` the block's own (`rbx`, `r12` saved).
fn assemble_blocks(
    s: &ConvDirect,
    pixels: usize,
    passes: usize,
    block: impl Fn(&mut CodeAssembler, usize, usize, usize) -> Result<(), IcedError>,
) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let name = NAME;
    check(s)?;
    let [_, sw] = s.strides;
    let taps = s.kernel[0] * s.kernel[1];
    let [oh, ow] = s.out;
    let plane_out = oh * ow;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    a.push(rbx).map_err(e)?;
    a.push(r12).map_err(e)?;
    let grouped = group(s) < s.c;
    if grouped {
        // r13 counts the channel groups; the totals of a pixel block below rsp.
        a.push(r13).map_err(e)?;
        a.sub(rsp, (pixels * pixels * 4) as i32).map_err(e)?;
    }
    a.mov(r8, (s.m / 16) as u64).map_err(e)?;
    let mut block_loop = a.create_label();
    a.set_label(&mut block_loop).map_err(e)?;
    for pass in 0..passes {
        a.mov(r9, rdi).map_err(e)?;
        match disp(name, 16 / passes * pass * plane_out)? {
            0 => a.mov(r10, rcx).map_err(e)?,
            out => a.lea(r10, ptr(rcx + out)).map_err(e)?,
        }
        let full = ow / pixels;
        if full > 0 {
            a.mov(r11, full as u64).map_err(e)?;
            let mut pixel_loop = a.create_label();
            a.set_label(&mut pixel_loop).map_err(e)?;
            block(&mut a, pass, pixels, plane_out).map_err(e)?;
            a.add(r9, disp(name, pixels * sw)?).map_err(e)?;
            a.add(r10, disp(name, pixels)?).map_err(e)?;
            a.dec(r11).map_err(e)?;
            a.jnz(pixel_loop).map_err(e)?;
        }
        if !ow.is_multiple_of(pixels) {
            block(&mut a, pass, ow % pixels, plane_out).map_err(e)?;
        }
    }
    a.add(rsi, disp(name, s.c * taps * 16)?).map_err(e)?;
    a.add(rdx, 64).map_err(e)?;
    a.add(rcx, disp(name, 16 * plane_out)?).map_err(e)?;
    a.dec(r8).map_err(e)?;
    a.jnz(block_loop).map_err(e)?;
    if grouped {
        a.add(rsp, (pixels * pixels * 4) as i32).map_err(e)?;
        a.pop(r13).map_err(e)?;
    }
    a.pop(r12).map_err(e)?;
    a.pop(rbx).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Input channels per K block: as many whole channels (`kh·kw` steps of K each) as fit in the convolution GEMM's
/// block depth (`kernel::gemm::CONV_KC`), at least one. Each block's sums start at +0.0 and are added to the
/// earlier blocks' (as the GEMM's are; the block boundaries differ, so the two agree within rounding).
pub fn group(s: &ConvDirect) -> usize {
    let taps = (s.kernel[0] * s.kernel[1]).max(1);
    (crate::kernel::gemm::CONV_KC / taps).clamp(1, s.c.max(1))
}

/// The loop over `count` input channels of a pixel block, for both kernel sets: `rax` walks the packed weights,
/// `rbx` the padded input planes (both set by the caller and left at the next channel), `r12` counts; per tap
/// `t` (in (ky, kx) order) `tap(a, t, offsets)` emits the tap, `offsets[j]` the byte offset from `rbx` of the
/// input of the block's pixel `j < n`.
fn channel_loop(
    a: &mut CodeAssembler,
    s: &ConvDirect,
    n: usize,
    count: usize,
    tap: &mut impl FnMut(&mut CodeAssembler, usize, &[i32]) -> Result<(), IcedError>,
) -> Result<(), IcedError> {
    let d = |floats: usize| i32::try_from(floats * 4).unwrap_or(0);
    let [hp, wp] = s.padded;
    let [kh, kw] = s.kernel;
    let [dil_y, dil_x] = s.dilations;
    let sw = s.strides[1];
    a.mov(r12, count as u64)?;
    let mut channel = a.create_label();
    a.set_label(&mut channel)?;
    for t in 0..kh * kw {
        let (ky, kx) = (t / kw, t % kw);
        let off: Vec<i32> = (0..n)
            .map(|j| d(ky * dil_y * wp + j * sw + kx * dil_x))
            .collect();
        tap(a, t, &off)?;
    }
    a.add(rax, d(kh * kw * 16))?;
    a.add(rbx, d(hp * wp))?;
    a.dec(r12)?;
    a.jnz(channel)
}

/// The registers a pixel block uses besides the accumulators `0..LANES`: the tap weights alternate in
/// `weights` and `weights + 1`, the broadcasts (where the ISA needs a register) in `bcast` and `bcast + 1`, the
/// clamp bounds in `clamp`.
pub struct Regs {
    /// The first of the two weight registers.
    pub weights: usize,
    /// The first of the two broadcast registers.
    pub bcast: usize,
    /// The lower and upper clamp bounds.
    pub clamp: [usize; 2],
}

/// One block of `n` ≤ `LANES` output pixels for the `LANES` channels of `half` of the 16-channel block: the
/// accumulators, the taps, the bias add and the clamp, then the transpose and the stores.
fn pixel_block<I: Isa>(
    a: &mut CodeAssembler,
    s: &ConvDirect,
    regs: &Regs,
    half: usize,
    n: usize,
    plane_out: usize,
) -> Result<(), IcedError> {
    let d = |floats: usize| i32::try_from(floats * 4).unwrap_or(0);
    let lanes = I::LANES;
    let mut tap = |a: &mut CodeAssembler, t: usize, off: &[i32]| {
        let w = I::v(regs.weights + t % 2);
        I::load(a, w, rax + d(t * 16 + lanes * half))?;
        for (j, &o) in off.iter().enumerate() {
            I::fma_bcast(a, I::v(j), w, rbx + o, I::v(regs.bcast + j % 2))?;
        }
        Ok(())
    };
    let zero = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        for j in 0..lanes {
            I::zero(a, I::v(j))?;
        }
        Ok(())
    };
    a.mov(rax, rsi)?;
    a.mov(rbx, r9)?;
    let g = group(s);
    if g == s.c {
        zero(a)?;
        channel_loop(a, s, n, s.c, &mut tap)?;
    } else {
        // K blocks of `g` channels: the totals below rsp start at +0.0; each block's sums from +0.0 are added
        // to them (the last block's stay in the accumulators).
        let total = |j: usize| rsp + d(j * lanes);
        zero(a)?;
        for j in 0..lanes {
            I::store(a, total(j), I::v(j))?;
        }
        let (full, rest) = (s.c / g, s.c % g);
        a.mov(r13, full as u64)?;
        let mut next = a.create_label();
        a.set_label(&mut next)?;
        zero(a)?;
        channel_loop(a, s, n, g, &mut tap)?;
        for j in 0..lanes {
            I::add_mem(a, I::v(j), total(j))?;
            I::store(a, total(j), I::v(j))?;
        }
        a.dec(r13)?;
        a.jnz(next)?;
        if rest > 0 {
            zero(a)?;
            channel_loop(a, s, n, rest, &mut tap)?;
            for j in 0..lanes {
                I::add_mem(a, I::v(j), total(j))?;
            }
        }
    }
    let clamp = regs.clamp.map(I::v);
    let bounds = I::clamp_bounds(a, (s.lo, s.hi), clamp)?;
    for j in 0..n {
        if s.bias {
            I::add_mem(a, I::v(j), rdx + d(lanes * half))?;
        }
        I::clamp(a, I::v(j), bounds)?;
    }
    // Rows j (pixels, lanes the channels) to rows c (channels, lanes the pixels).
    let cols = I::transpose(a)?;
    I::head_mask(a, n)?;
    for c in 0..lanes {
        I::store_head(a, r10 + d(c * plane_out), I::v(cols + c), n, I::v(0))?;
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(super) mod tests {
    use super::super::pack16;
    use super::super::test_exec::{clamp, exec, guarded, pattern};
    use super::*;

    type Kernel = extern "sysv64" fn(*const f32, *const f32, *const f32, *mut f32);

    /// A kernel assembled by `assemble`, one call per output row, against the fma chains over (c, ky, kx) from
    /// +0.0 per block of [`group`] channels, summed, then the bias and the clamp (NaN kept), bitwise — over rows
    /// around 8- and 16-pixel blocks, strides 1 and 2, dilation 2, 1 to 4 input channels (one block, or two for
    /// the 7x7 stem) and 28 to 40 (two or three blocks, the last whole or shorter), 16 or 32 output channels;
    /// the output planes end on a guard page.
    pub(in crate::x86) fn check_rows(assemble: fn(&ConvDirect) -> Result<Vec<u8>, String>) {
        // (c, m, kernel, strides, dilations, out)
        let cases = [
            (3, 32, [7, 7], [2, 2], [1, 1], [3, 20]),
            (1, 16, [3, 3], [1, 1], [1, 1], [2, 16]),
            (2, 16, [3, 3], [2, 2], [2, 2], [3, 5]),
            (3, 32, [3, 3], [2, 1], [1, 1], [2, 33]),
            (4, 16, [1, 1], [1, 1], [1, 1], [1, 7]),
            (3, 16, [3, 3], [2, 2], [1, 1], [2, 13]),
            (40, 16, [3, 3], [2, 2], [1, 1], [2, 17]),
            (28, 32, [3, 3], [1, 1], [1, 1], [1, 9]),
        ];
        for (i, &(c, m, kernel, strides, dilations, out)) in cases.iter().enumerate() {
            let padded = ConvDirect::padded_plane(out, kernel, strides, dilations);
            let s = ConvDirect {
                c,
                m,
                padded,
                kernel,
                strides,
                dilations,
                out,
                bias: i % 2 == 0,
                lo: (i % 3 != 2).then(|| 0.0f32.to_bits()),
                hi: (i % 3 == 0).then(|| 1.5f32.to_bits()),
            };
            let f: Kernel = unsafe { std::mem::transmute(exec(&assemble(&s).unwrap())) };
            let [hp, wp] = padded;
            let taps = kernel[0] * kernel[1];
            let k = c * taps;
            let p = out[0] * out[1];
            let x = guarded(c * hp * wp);
            let mut xv: Vec<f32> = (0..c * hp * wp).map(pattern).collect();
            xv[5] = f32::NAN;
            let wv: Vec<f32> = (0..m * k).map(|i| pattern(i + 7) * 0.3).collect();
            let bv: Vec<f32> = (0..m).map(|i| pattern(i + 50)).collect();
            let packed = pack16(&wv, m, k);
            let o = guarded(m * p);
            // SAFETY: x holds the padded input, o the output planes; each call reads the taps of its row.
            unsafe {
                std::ptr::copy_nonoverlapping(xv.as_ptr(), x, xv.len());
                for oy in 0..out[0] {
                    let xr = x.add(oy * strides[0] * wp);
                    f(xr, packed.as_ptr(), bv.as_ptr(), o.add(oy * out[1]));
                }
            }
            let got = unsafe { std::slice::from_raw_parts(o, m * p) };
            for oc in 0..m {
                for oy in 0..out[0] {
                    for ox in 0..out[1] {
                        let mut acc = 0.0f32;
                        for c0 in (0..c).step_by(group(&s)) {
                            let mut blk = 0.0f32;
                            for ci in c0..c.min(c0 + group(&s)) {
                                for t in 0..taps {
                                    let (ky, kx) = (t / kernel[1], t % kernel[1]);
                                    let y = oy * strides[0] + ky * dilations[0];
                                    let xx = ox * strides[1] + kx * dilations[1];
                                    let v = xv[(ci * hp + y) * wp + xx];
                                    blk = v.mul_add(wv[oc * k + ci * taps + t], blk);
                                }
                            }
                            acc += blk;
                        }
                        if s.bias {
                            acc += bv[oc];
                        }
                        let want = clamp(acc, s.lo.map(|_| 0.0), s.hi.map(|_| 1.5));
                        let g = got[oc * p + oy * out[1] + ox];
                        assert!(
                            g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                            "case {i} m{oc} ({oy},{ox}): {g} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
