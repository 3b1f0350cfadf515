//! `trim_taps`: kernel rows and columns of a Conv whose taps read only padding at every output are dropped. A
//! dilated convolution on a plane smaller than its reach (an ASPP's atrous 3x3 of dilation 12-36 on a 16x16
//! feature map: only the centre tap ever reads the input) multiplies zeros in those taps; the rows and columns
//! that remain are contiguous, so the Conv becomes one of the smaller kernel over the same reads (its weights
//! sliced into a new constant, the leading padding reduced by the dropped rows' reach and the trailing padding set
//! so the output keeps its size). Each output is then the same products minus exact zeros, in the same order,
//! so results are unchanged up to the rounding of the shorter sums.

use crate::ir::{Graph, Op, Tensor};

/// The live taps `[lo, hi)` of a kernel of `k` taps along one axis: those that read inside `size` for some
/// output `o < out` at `o·s + t·d − p`.
fn live(size: usize, out: usize, k: usize, (s, d, p): (usize, usize, usize)) -> (usize, usize) {
    let reads = |t: usize| {
        (0..out).any(|o| {
            let at = (o * s + t * d) as i64 - p as i64;
            (0..size as i64).contains(&at)
        })
    };
    let lo = (0..k).find(|&t| reads(t)).unwrap_or(0);
    let hi = (0..k).rev().find(|&t| reads(t)).map_or(k, |t| t + 1);
    (lo, hi.max(lo + 1))
}

/// Trims the dead border taps of every Conv with constant weights; returns how many Convs changed.
pub fn trim_taps(g: &mut Graph) -> usize {
    let mut trimmed = 0;
    for &n in &g.order.clone() {
        let Op::Conv(a) = &g.nodes[n].op else {
            continue;
        };
        let (x, w, y) = (
            g.nodes[n].inputs[0],
            g.nodes[n].inputs[1],
            g.nodes[n].outputs[0],
        );
        let (xs, ys) = (g.tensors[x].shape.clone(), g.tensors[y].shape.clone());
        let Some(wt) = g.constant(w) else {
            continue;
        };
        if xs.len() != 4 || ys.len() != 4 || wt.shape.len() != 4 {
            continue;
        }
        let mut a = a.clone();
        let mut ranges = [(0, 0); 2];
        for i in 0..2 {
            let geo = (a.strides[i], a.dilations[i], a.pads[i]);
            ranges[i] = live(xs[2 + i], ys[2 + i], a.kernel[i], geo);
        }
        if (0..2).all(|i| ranges[i] == (0, a.kernel[i])) {
            continue;
        }
        // The new pads (before, after) per axis: the dropped rows' reach comes out of the leading padding, and
        // the trailing padding keeps the output size, (out − 1)·s + (k − 1)·d + 1 = size + before + after; both
        // must be non-negative.
        let pads = (0..2).map(|i| {
            let (lo, hi) = ranges[i];
            let begin = a.pads[i] as i64 - (lo * a.dilations[i]) as i64;
            let span = (ys[2 + i] - 1) * a.strides[i] + (hi - lo - 1) * a.dilations[i] + 1;
            let end = span as i64 - xs[2 + i] as i64 - begin;
            (begin >= 0 && end >= 0).then_some((begin as usize, end as usize))
        });
        let Some(new_pads) = pads.collect::<Option<Vec<_>>>() else {
            continue;
        };
        let ws = wt.shape.clone();
        let v = wt.to_f32_vec();
        let [(y0, y1), (x0, x1)] = ranges;
        let mut sliced = Vec::with_capacity(ws[0] * ws[1] * (y1 - y0) * (x1 - x0));
        for oc in 0..ws[0] * ws[1] {
            for ky in y0..y1 {
                for kx in x0..x1 {
                    sliced.push(v[(oc * ws[2] + ky) * ws[3] + kx]);
                }
            }
        }
        for (i, &(begin, end)) in new_pads.iter().enumerate() {
            a.kernel[i] = ranges[i].1 - ranges[i].0;
            a.pads[i] = begin;
            a.pads[i + 2] = end;
        }
        let name = format!("{}.W_trimmed", g.nodes[n].name);
        let shape = vec![ws[0], ws[1], y1 - y0, x1 - x0];
        let wid = g.add_constant(name, Tensor::f32(shape, sliced));
        g.nodes[n].inputs[1] = wid;
        g.nodes[n].op = Op::Conv(a);
        trimmed += 1;
    }
    trimmed
}

#[cfg(test)]
mod tests {
    use super::live;

    #[test]
    fn live_taps() {
        // 3 taps, dilation 24, pad 24 over 16: only the centre reads the input.
        assert_eq!(live(16, 16, 3, (1, 24, 24)), (1, 2));
        // Dilation 12 over 16: every tap reads some of it.
        assert_eq!(live(16, 16, 3, (1, 12, 12)), (0, 3));
        // An ordinary 3x3.
        assert_eq!(live(5, 5, 3, (1, 1, 1)), (0, 3));
    }
}
