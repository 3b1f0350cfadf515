//! Per-tensor value statistics for calibration: exact min / max and a histogram over the symmetric range
//! `[-range, range]` that grows by doubling (merging bin pairs exactly) when a value falls outside, so one pass
//! over the calibration set is enough. From it `range_for` derives the range to quantise with: min/max,
//! a percentile, or the threshold minimising the KL divergence between the clipped distribution and its
//! quantised form (entropy calibration).

use serde::{Deserialize, Serialize};

/// How a tensor's quantisation range is chosen from its statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Calibration {
    /// The observed minimum and maximum.
    Minmax,
    /// The 0.01% and 99.99% quantiles (outliers clipped).
    Percentile,
    /// The clipping threshold with the least KL divergence (TensorRT-style entropy calibration).
    Entropy,
}

/// Statistics of one tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Smallest value seen.
    pub min: f32,
    /// Largest value seen.
    pub max: f32,
    /// Values seen.
    pub count: u64,
    /// The histogram covers `[-range, range]` in `bins` equal bins.
    pub range: f32,
    /// Bin counts, run-length encoded: space-separated counts, `NxC` for N repeats of C.
    pub histogram: String,
}

/// The in-memory accumulator behind [`Stats`].
#[derive(Debug, Clone)]
pub struct Histogram {
    /// Smallest value.
    pub min: f32,
    /// Largest value.
    pub max: f32,
    /// Values seen.
    pub count: u64,
    /// Half-width of the covered range (0 before the first non-zero value).
    pub range: f32,
    /// Bin counts (an even number).
    pub bins: Vec<u64>,
}

impl Histogram {
    /// An empty histogram of `bins` bins (rounded up to even).
    pub fn new(bins: usize) -> Histogram {
        Histogram {
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            count: 0,
            range: 0.0,
            bins: vec![0; bins.max(2).next_multiple_of(2)],
        }
    }

    /// Adds values (non-finite ones are ignored).
    pub fn add(&mut self, xs: &[f32]) {
        let amax = xs
            .iter()
            .filter(|v| v.is_finite())
            .fold(0f32, |m, v| m.max(v.abs()));
        if amax > self.range {
            let target = amax.max(f32::MIN_POSITIVE);
            if self.range == 0.0 {
                // Start at a power of two so later doublings keep bin edges simple.
                self.range = 2f32.powi(target.log2().ceil() as i32);
                if self.range < target {
                    self.range *= 2.0;
                }
            }
            while self.range < target {
                self.double();
            }
        }
        let nb = self.bins.len();
        let w = 2.0 * self.range / nb as f32;
        for &v in xs.iter().filter(|v| v.is_finite()) {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            self.count += 1;
            let b = if w > 0.0 {
                (((v + self.range) / w) as usize).min(nb - 1)
            } else {
                nb / 2
            };
            self.bins[b] += 1;
        }
    }

    /// Doubles the range: old bin `i` falls into new bin `nb/4 + i/2`.
    fn double(&mut self) {
        let nb = self.bins.len();
        let mut nbins = vec![0; nb];
        for (i, &c) in self.bins.iter().enumerate() {
            nbins[nb / 4 + i / 2] += c;
        }
        self.bins = nbins;
        self.range *= 2.0;
    }

    /// The serialisable form.
    pub fn stats(&self) -> Stats {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.bins.len() {
            let c = self.bins[i];
            let mut j = i;
            while j < self.bins.len() && self.bins[j] == c {
                j += 1;
            }
            if j - i > 1 {
                parts.push(format!("{}x{c}", j - i));
            } else {
                parts.push(c.to_string());
            }
            i = j;
        }
        Stats {
            min: if self.count > 0 { self.min } else { 0.0 },
            max: if self.count > 0 { self.max } else { 0.0 },
            count: self.count,
            range: self.range,
            histogram: parts.join(" "),
        }
    }

    /// Parses [`Stats`] back; errors name what is wrong.
    pub fn from_stats(s: &Stats) -> Result<Histogram, String> {
        let mut bins = Vec::new();
        for part in s.histogram.split_whitespace() {
            let (n, c) = match part.split_once('x') {
                Some((n, c)) => (n.parse::<usize>(), c.parse::<u64>()),
                None => (Ok(1), part.parse::<u64>()),
            };
            match (n, c) {
                (Ok(n), Ok(c)) if n <= 1 << 20 && bins.len() + n <= 1 << 20 => {
                    bins.extend(std::iter::repeat_n(c, n))
                }
                _ => {
                    let part: String = part.chars().take(64).collect();
                    return Err(format!("bad histogram entry '{part}'"));
                }
            }
        }
        if bins.len() < 2 || bins.len() % 2 != 0 {
            return Err(format!(
                "{} histogram bins (an even number >= 2 is required)",
                bins.len()
            ));
        }
        if !(s.min.is_finite() && s.max.is_finite() && s.min <= s.max) {
            return Err(format!(
                "bad range: min {} max {} (expected finite values with min <= max)",
                s.min, s.max
            ));
        }
        if !(s.range.is_finite() && s.range >= 0.0) {
            return Err(format!(
                "range {}: expected a finite value >= 0 (the histogram's half-width)",
                s.range
            ));
        }
        // Every value seen lands in one bin, so the bins sum to `count`; checking that here (without overflow)
        // keeps every later sum of bins within u64.
        let sum = bins
            .iter()
            .try_fold(0u64, |acc, &c| acc.checked_add(c))
            .ok_or("histogram: the bin counts overflow a 64-bit sum")?;
        if sum != s.count {
            return Err(format!(
                "histogram: the bin counts sum to {sum} but count is {}",
                s.count
            ));
        }
        Ok(Histogram {
            min: s.min,
            max: s.max,
            count: s.count,
            range: s.range,
            bins,
        })
    }

    /// The range to quantise with. Always contains 0 (so zero is exact, as padding needs).
    pub fn range_for(&self, c: Calibration) -> (f32, f32) {
        let (lo, hi) = match c {
            _ if self.count == 0 || self.range == 0.0 => (self.min.min(0.0), self.max.max(0.0)),
            Calibration::Minmax => (self.min, self.max),
            Calibration::Percentile => self.percentile(0.0001),
            Calibration::Entropy => {
                let t = self.kl_threshold();
                (self.min.max(-t), self.max.min(t))
            }
        };
        (lo.min(0.0), hi.max(0.0))
    }

    fn edge(&self, i: usize) -> f32 {
        -self.range + 2.0 * self.range * i as f32 / self.bins.len() as f32
    }

    fn percentile(&self, tail: f64) -> (f32, f32) {
        let cut = (self.count as f64 * tail / 2.0) as u64;
        let (mut acc, mut lo) = (0u64, 0);
        for (i, &c) in self.bins.iter().enumerate() {
            acc += c;
            if acc > cut {
                lo = i;
                break;
            }
        }
        let (mut acc, mut hi) = (0u64, self.bins.len());
        for (i, &c) in self.bins.iter().enumerate().rev() {
            acc += c;
            if acc > cut {
                hi = i + 1;
                break;
            }
        }
        (self.edge(lo).max(self.min), self.edge(hi).min(self.max))
    }

    /// The |x| threshold minimising KL(P || Q) where P is the |x| histogram clipped at the threshold (outliers
    /// folded into the last bin) and Q is the unclipped slice merged into 128 levels and expanded back over P's
    /// non-empty bins (TensorRT's entropy calibration); each normalised by its own sum.
    fn kl_threshold(&self) -> f32 {
        let half = self.bins.len() / 2;
        // The bins next to zero are left out: exact zeros (ReLU's dead outputs) are exact under any threshold,
        // and their spike would otherwise dominate both distributions and pull the threshold far into the bulk.
        let abs: Vec<f64> = (0..half)
            .map(|i| {
                if i == 0 {
                    0.0
                } else {
                    (self.bins[half + i] + self.bins[half - 1 - i]) as f64
                }
            })
            .collect();
        let levels = 128.min(half);
        let width = self.range / half as f32;
        let mut best = (f64::INFINITY, half);
        for t in (levels..=half).step_by((half / 256).max(1)) {
            let mut p: Vec<f64> = abs[..t].to_vec();
            p[t - 1] += abs[t..].iter().sum::<f64>();
            let total: f64 = p.iter().sum();
            if total == 0.0 {
                continue;
            }
            // Q: the unclipped slice merged into `levels` levels, each level's mass spread over the bins P
            // holds mass in; then both are normalised by their own sums.
            let mut q = vec![0f64; t];
            for l in 0..levels {
                let (a, b) = (
                    l * t / levels,
                    ((l + 1) * t / levels).max(l * t / levels + 1),
                );
                let nz = (a..b).filter(|&i| p[i] > 0.0).count();
                if nz == 0 {
                    continue;
                }
                let s: f64 = abs[a..b].iter().sum();
                for i in a..b {
                    if p[i] > 0.0 {
                        q[i] = s / nz as f64;
                    }
                }
            }
            let q_total: f64 = q.iter().sum();
            if q_total == 0.0 {
                continue;
            }
            let kl: f64 = p
                .iter()
                .zip(&q)
                .filter(|(pi, _)| **pi > 0.0)
                .map(|(pi, qi)| {
                    let (pn, qn) = (pi / total, (qi / q_total).max(1e-12));
                    pn * (pn / qn).ln()
                })
                .sum();
            if kl < best.0 {
                best = (kl, t);
            }
        }
        width * best.1 as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_keeps_counts_and_min_max() {
        let mut h = Histogram::new(8);
        h.add(&[0.5, -0.25, 0.9]);
        assert_eq!(h.range, 1.0);
        h.add(&[3.0, f32::NAN]);
        assert_eq!(h.range, 4.0);
        assert_eq!(h.bins.iter().sum::<u64>(), 4);
        assert_eq!((h.min, h.max, h.count), (-0.25, 3.0, 4));
        // [-4, 4] in 8 bins of width 1: 0.5, 0.9 -> bin 4; -0.25 -> bin 3; 3.0 -> bin 7.
        assert_eq!(h.bins, vec![0, 0, 0, 1, 2, 0, 0, 1]);
        let back = Histogram::from_stats(&h.stats()).unwrap();
        assert_eq!(back.bins, h.bins);
        assert_eq!(h.stats().histogram, "3x0 1 2 2x0 1");
    }

    #[test]
    fn ranges_contain_zero_and_clip_outliers() {
        let mut h = Histogram::new(2048);
        let mut xs: Vec<f32> = (0..100_000).map(|i| (i % 1000) as f32 / 1000.0).collect();
        xs.push(50.0);
        h.add(&xs);
        assert_eq!(h.range_for(Calibration::Minmax), (0.0, 50.0));
        let (lo, hi) = h.range_for(Calibration::Percentile);
        assert!(lo == 0.0 && hi < 1.1, "{lo} {hi}");
        let (_, t) = h.range_for(Calibration::Entropy);
        // KL over merged bins cannot see a lone outlier's cost to the bulk's resolution: any threshold in
        // [1, 50] is acceptable here; `entropy_keeps_a_gaussian_bulk` checks the clipping of a real tail.
        assert!((1.0..=50.0).contains(&t), "{t}");
    }

    #[test]
    fn entropy_keeps_a_gaussian_bulk() {
        // A normal-ish bulk (sum of uniforms) with a thin tail: the threshold lies well inside [2, max].
        let mut h = Histogram::new(2048);
        let mut state = 1u64;
        let mut uni = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let xs: Vec<f32> = (0..200_000)
            .map(|_| ((0..12).map(|_| uni()).sum::<f64>() - 6.0) as f32)
            .collect();
        h.add(&xs);
        let (lo, hi) = h.range_for(Calibration::Entropy);
        let (mlo, mhi) = h.range_for(Calibration::Minmax);
        assert!(
            hi > 2.0 && hi < mhi && lo < -2.0 && lo > mlo,
            "{lo} {hi} vs {mlo} {mhi}"
        );
    }

    #[test]
    fn hostile_stats_are_rejected() {
        let s = Stats {
            min: 0.0,
            max: 1.0,
            count: 1,
            range: 1.0,
            histogram: "99999999999x1".into(),
        };
        assert!(Histogram::from_stats(&s).is_err());
        let s = Stats {
            histogram: "3x1".into(),
            ..s
        };
        assert!(Histogram::from_stats(&s).is_err());
        let s = Stats {
            histogram: "2x9223372036854775808".into(),
            count: 0,
            ..s
        };
        assert!(Histogram::from_stats(&s).is_err());
        let s = Stats {
            histogram: "1 1".into(),
            count: 3,
            ..s
        };
        assert!(Histogram::from_stats(&s).is_err());
        let s = Stats {
            count: 2,
            range: -2.0,
            ..s
        };
        assert!(Histogram::from_stats(&s).is_err());
        assert!(Histogram::from_stats(&Stats { range: 1.0, ..s }).is_ok());
    }
}
