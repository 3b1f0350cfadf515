//! ONNX → IR mapping of Einsum, as the ops the compiler already runs: each operand's letters that nothing else
//! reads are summed first (`Reduce` Sum), operands are contracted pairwise from the left — the shared letters
//! that are still needed become the batch of a `MatMul`, the others its inner dimension, each side's own letters
//! its rows and columns, with `Transpose` and `Reshape` around it — and the result is transposed to the output's
//! order. A letter repeated within one operand takes that operand's diagonal first (a `Gather` over the
//! repeated axes flattened into one, at the constant indices `k·(1 + n + … + n^(r-1))`), and operands whose
//! letters broadcast (size 1 against n) are expanded. A malformed equation or letters whose sizes disagree get
//! an error that names the equation.

use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::{DType, Epilogue, Op, ReduceKind, Tensor, TensorId};
use std::collections::HashMap;

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[(
    "Einsum",
    "f32; any operand count, explicit or implicit output, ellipsis, broadcasting, repeated letters within \
     an operand (diagonals)",
)];

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[(&["Einsum"], parse_einsum)];

/// An operand's or result's letters, one per axis (an ellipsis's axes get letters of their own).
type Letters = Vec<char>;

/// The letters of an ellipsis's axes: private-use characters, which no equation contains.
fn ellipsis_letter(i: usize) -> char {
    char::from_u32(0xE000 + i as u32).unwrap_or('\u{E000}')
}

/// Parses `eq` for operands of `ranks`: each operand's letters and the output's.
fn parse_equation(
    eq: &str,
    ranks: &[usize],
) -> std::result::Result<(Vec<Letters>, Letters), String> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ranks.len() {
        return Err(format!(
            "{} operand terms for {} inputs",
            terms.len(),
            ranks.len()
        ));
    }
    // Each term's explicit letters and whether it has an ellipsis.
    let split = |t: &str| -> std::result::Result<(Letters, Option<usize>), String> {
        let (mut letters, mut at) = (Vec::new(), None);
        let mut rest = t;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("...") {
                if at.is_some() {
                    return Err(format!("term '{t}' has two ellipses"));
                }
                at = Some(letters.len());
                rest = r;
                continue;
            }
            let c = rest.chars().next().unwrap_or('?');
            if !c.is_ascii_alphabetic() {
                return Err(format!("term '{t}': '{c}' is not a letter"));
            }
            letters.push(c);
            rest = &rest[c.len_utf8()..];
        }
        Ok((letters, at))
    };
    let mut ops = Vec::new();
    let mut ell_rank = 0;
    let parsed: Vec<(Letters, Option<usize>)> = terms
        .iter()
        .map(|t| split(t))
        .collect::<std::result::Result<_, _>>()?;
    for (i, ((letters, at), &rank)) in parsed.iter().zip(ranks).enumerate() {
        let e = match at {
            Some(_) if rank >= letters.len() => rank - letters.len(),
            None if rank == letters.len() => 0,
            _ => {
                return Err(format!(
                    "term '{}' does not fit input {i} of rank {rank}",
                    terms[i]
                ))
            }
        };
        ell_rank = ell_rank.max(e);
        ops.push((letters.clone(), *at, e));
    }
    // Ellipsis axes align to the right: an operand with e of them has the last e of the ell_rank letters.
    let ell: Letters = (0..ell_rank).map(ellipsis_letter).collect();
    let expand = |(letters, at, e): &(Letters, Option<usize>, usize)| -> Letters {
        match at {
            None => letters.clone(),
            Some(p) => {
                let mut v = letters[..*p].to_vec();
                v.extend(&ell[ell_rank - e..]);
                v.extend(&letters[*p..]);
                v
            }
        }
    };
    let inputs: Vec<Letters> = ops.iter().map(expand).collect();
    let output = match rhs {
        Some(r) => {
            let (letters, at) = split(r)?;
            if at.is_none() && ell_rank > 0 && !r.is_empty() && letters.is_empty() {
                return Err("the output drops the ellipsis".into());
            }
            let out = expand(&(letters, at, if at.is_some() { ell_rank } else { 0 }));
            for (i, c) in out.iter().enumerate() {
                if out[..i].contains(c) {
                    return Err(format!("output letter '{c}' repeats"));
                }
                if !inputs.iter().any(|l| l.contains(c)) {
                    return Err(format!("output letter '{c}' is in no input"));
                }
            }
            out
        }
        None => {
            // Implicit: the ellipsis axes, then the letters that appear once, in alphabetical order.
            let mut once: Letters = Vec::new();
            for l in &inputs {
                for &c in l {
                    if (c as u32) < 0xE000
                        && inputs.iter().flatten().filter(|&&d| d == c).count() == 1
                    {
                        once.push(c);
                    }
                }
            }
            once.sort_unstable();
            ell.iter().copied().chain(once).collect()
        }
    };
    Ok((inputs, output))
}

/// The permutation that orders `from`'s letters as `to` (a subset of them, in that order).
fn perm(from: &[char], to: &[char]) -> Vec<usize> {
    to.iter()
        .filter_map(|c| from.iter().position(|d| d == c))
        .collect()
}

/// The operands and the letters' sizes as the contraction proceeds.
struct Ctx<'a, 'n> {
    n: &'a Node<'n>,
    sizes: HashMap<char, usize>,
    tag: usize,
}

impl Ctx<'_, '_> {
    /// Appends (or folds) one op of the decomposition.
    fn emit(&mut self, im: &mut Importer<'_>, op: Op, inputs: Vec<TensorId>) -> Result<TensorId> {
        self.tag += 1;
        im.sub_node(self.n, &format!("einsum{}", self.tag), op, inputs)
    }
    /// `t` with letters `from` transposed to `to` (nothing when they are in order).
    fn transpose(
        &mut self,
        im: &mut Importer<'_>,
        t: TensorId,
        from: &[char],
        to: &[char],
    ) -> Result<TensorId> {
        let p = perm(from, to);
        if p.iter().enumerate().all(|(i, &j)| i == j) {
            return Ok(t);
        }
        self.emit(im, Op::Transpose(p), vec![t])
    }
    /// `t` reshaped to `shape` (nothing when it has it).
    fn reshape(
        &mut self,
        im: &mut Importer<'_>,
        t: TensorId,
        shape: Vec<usize>,
    ) -> Result<TensorId> {
        if im.g.tensors[t].shape == shape {
            return Ok(t);
        }
        self.emit(im, Op::Reshape(shape), vec![t])
    }
    /// The product of the sizes of `letters`.
    fn size(&self, letters: &[char]) -> usize {
        letters.iter().map(|c| self.sizes[c]).product()
    }
    /// Sums `t`'s letters that are not in `keep`.
    fn sum_others(
        &mut self,
        im: &mut Importer<'_>,
        t: TensorId,
        letters: &[char],
        keep: &[char],
    ) -> Result<(TensorId, Letters)> {
        let axes: Vec<usize> = (0..letters.len())
            .filter(|&i| !keep.contains(&letters[i]))
            .collect();
        if axes.is_empty() {
            return Ok((t, letters.to_vec()));
        }
        let kept: Letters = letters
            .iter()
            .filter(|c| keep.contains(c))
            .copied()
            .collect();
        let op = Op::Reduce {
            kind: ReduceKind::Sum,
            axes,
            keepdims: false,
        };
        Ok((self.emit(im, op, vec![t])?, kept))
    }
    /// The diagonal of `t` (of shape `dims`) over each letter that `letters` repeats: its axes moved last,
    /// flattened into one and gathered at `k·(1 + n + … + n^(r-1))` for `k < n`; returns the tensor and its
    /// letters (each once).
    fn diagonal(
        &mut self,
        im: &mut Importer<'_>,
        t: TensorId,
        letters: &[char],
        dims: &[usize],
    ) -> Result<(TensorId, Letters)> {
        let mut unique: Letters = Vec::new();
        for &c in letters {
            if !unique.contains(&c) {
                unique.push(c);
            }
        }
        if unique.len() == letters.len() {
            return Ok((t, letters.to_vec()));
        }
        let count = |c: char| letters.iter().filter(|&&d| d == c).count();
        // The operand's own size of a letter (the shared one may be a broadcast's larger size).
        let size = |c: char| letters.iter().position(|&d| d == c).map_or(1, |i| dims[i]);
        let single: Letters = unique.iter().copied().filter(|&c| count(c) == 1).collect();
        let repeated: Letters = unique.iter().copied().filter(|&c| count(c) > 1).collect();
        // Axes of single letters first, then each repeated letter's axes together.
        let mut order: Vec<usize> = (0..letters.len())
            .filter(|&i| count(letters[i]) == 1)
            .collect();
        for &c in &repeated {
            order.extend((0..letters.len()).filter(|&i| letters[i] == c));
        }
        let t = if order.iter().enumerate().all(|(i, &j)| i == j) {
            t
        } else {
            self.emit(im, Op::Transpose(order), vec![t])?
        };
        let mut shape: Vec<usize> = single.iter().map(|&c| size(c)).collect();
        shape.extend(repeated.iter().map(|&c| size(c).pow(count(c) as u32)));
        let mut t = self.reshape(im, t, shape)?;
        for (j, &c) in repeated.iter().enumerate() {
            let n = size(c);
            let step: usize = (0..count(c)).map(|m| n.pow(m as u32)).sum();
            im.budget
                .take(n, DType::I64)
                .map_err(|m| Error::node(self.n.name, self.n.op, m))?;
            let out0 = self.n.node.output.first().map_or("", String::as_str);
            self.tag += 1;
            let idx = im.g.add_constant(
                format!("{out0}.einsum{}_diagonal", self.tag),
                Tensor::i64(vec![n], (0..n).map(|k| (k * step) as i64).collect()),
            );
            let axis = single.len() + j;
            t = self.emit(im, Op::Gather { axis }, vec![t, idx])?;
        }
        Ok((t, [&single[..], &repeated].concat()))
    }
    /// Contracts `a` and `b` into the letters of both that `keep` holds: one batched MatMul.
    fn pair(
        &mut self,
        im: &mut Importer<'_>,
        (a, la): (TensorId, Letters),
        (b, lb): (TensorId, Letters),
        keep: &[char],
    ) -> Result<(TensorId, Letters)> {
        let batch: Letters = la
            .iter()
            .filter(|c| lb.contains(c) && keep.contains(c))
            .copied()
            .collect();
        let inner: Letters = la
            .iter()
            .filter(|c| lb.contains(c) && !keep.contains(c))
            .copied()
            .collect();
        let rows: Letters = la.iter().filter(|c| !lb.contains(c)).copied().collect();
        let cols: Letters = lb.iter().filter(|c| !la.contains(c)).copied().collect();
        let (nb, nr, nc, nk) = (
            self.size(&batch),
            self.size(&rows),
            self.size(&cols),
            self.size(&inner),
        );
        let order_a: Letters = [&batch[..], &rows, &inner].concat();
        let order_b: Letters = [&batch[..], &inner, &cols].concat();
        let a = self.transpose(im, a, &la, &order_a)?;
        let a = self.reshape(im, a, vec![nb, nr, nk])?;
        let b = self.transpose(im, b, &lb, &order_b)?;
        let b = self.reshape(im, b, vec![nb, nk, nc])?;
        let c = self.emit(im, Op::MatMul(Epilogue::default()), vec![a, b])?;
        let letters: Letters = [&batch[..], &rows, &cols].concat();
        let shape = letters.iter().map(|l| self.sizes[l]).collect();
        Ok((self.reshape(im, c, shape)?, letters))
    }
}

/// `Einsum`.
fn parse_einsum(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        name, op, ins, a, ..
    } = *n;
    let eq = a.string("equation", "")?;
    let operands: Vec<TensorId> = (0..ins.len()).map(|i| n.req(i)).collect::<Result<_>>()?;
    if operands.is_empty() {
        return Err(Error::node(name, op, "needs at least one input"));
    }
    let shapes: Vec<Vec<usize>> = operands
        .iter()
        .map(|&t| im.g.tensors[t].shape.clone())
        .collect();
    let ranks: Vec<usize> = shapes.iter().map(Vec::len).collect();
    let bad = |m: String| Error::node(name, op, format!("equation '{eq}': {m}"));
    let (inputs, output) = parse_equation(&eq, &ranks).map_err(bad)?;
    // Each letter's size: equal wherever it appears, or 1 where it broadcasts.
    let mut sizes: HashMap<char, usize> = HashMap::new();
    for (letters, shape) in inputs.iter().zip(&shapes) {
        for (i, (&c, &d)) in letters.iter().zip(shape).enumerate() {
            if let Some(j) = letters[..i].iter().position(|&e| e == c) {
                if shape[j] != d {
                    return Err(bad(format!(
                        "letter '{c}' repeats within an operand with sizes {} and {d}",
                        shape[j]
                    )));
                }
                continue;
            }
            let s = sizes.entry(c).or_insert(d);
            if *s != d && *s != 1 && d != 1 {
                return Err(bad(format!("letter '{c}' has sizes {s} and {d}")));
            }
            *s = (*s).max(d);
        }
    }
    let mut cx = Ctx { n, sizes, tag: 0 };
    let mut terms: Vec<(TensorId, Letters)> = Vec::new();
    for (i, (&t, letters)) in operands.iter().zip(&inputs).enumerate() {
        // A repeated letter's diagonal, at the size this operand has.
        let (t, letters) = cx.diagonal(im, t, letters, &shapes[i])?;
        let letters = &letters;
        // Broadcast size-1 letters to their full size.
        let full: Vec<usize> = letters.iter().map(|c| cx.sizes[c]).collect();
        let t = if im.g.tensors[t].shape != full {
            cx.emit(im, Op::Expand(full), vec![t])?
        } else {
            t
        };
        // Sum the letters no other operand and not the output has.
        let others: Letters = inputs
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .flat_map(|(_, l)| l.iter().copied())
            .chain(output.iter().copied())
            .collect();
        terms.push(cx.sum_others(im, t, letters, &others)?);
    }
    let mut terms = terms.into_iter();
    let mut acc = terms.next().ok_or_else(|| bad("no operands".into()))?;
    let rest: Vec<(TensorId, Letters)> = terms.collect();
    for (k, next) in rest.iter().enumerate() {
        let keep: Letters = output
            .iter()
            .copied()
            .chain(rest[k + 1..].iter().flat_map(|(_, l)| l.iter().copied()))
            .collect();
        acc = cx.pair(im, acc, next.clone(), &keep)?;
    }
    let (t, letters) = cx.sum_others(im, acc.0, &acc.1, &output)?;
    let t = cx.transpose(im, t, &letters, &output)?;
    Ok(Lowered::Alias(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equations_parse() {
        let (i, o) = parse_equation("bghid,bghjd->bghij", &[5, 5]).unwrap();
        assert_eq!(i[0], vec!['b', 'g', 'h', 'i', 'd']);
        assert_eq!(o, vec!['b', 'g', 'h', 'i', 'j']);
        let (_, o) = parse_equation("ij,jk", &[2, 2]).unwrap();
        assert_eq!(o, vec!['i', 'k']);
        let (i, o) = parse_equation("...ij,...jk->...ik", &[4, 3]).unwrap();
        let e = |k| ellipsis_letter(k);
        assert_eq!(i[0], vec![e(0), e(1), 'i', 'j']);
        assert_eq!(i[1], vec![e(1), 'j', 'k']);
        assert_eq!(o, vec![e(0), e(1), 'i', 'k']);
        assert!(parse_equation("ij,jk->il", &[2, 2]).is_err());
        assert!(parse_equation("ij->ii", &[2]).is_err());
        assert!(parse_equation("ijk->i", &[2]).is_err());
        assert!(parse_equation("i1->i", &[2]).is_err());
    }
}
