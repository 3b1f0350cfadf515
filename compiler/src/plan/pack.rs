//! Offset packing of the activation area: every buffer has a layer-liveness interval and an aligned size, and two
//! buffers live in a common layer must not overlap. Finding the smallest area is NP-hard (dynamic storage
//! allocation), so [`pack`] runs several greedy heuristics — placement orders (largest first, busiest layer
//! first, longest-lived first, earliest first) times fits (lowest offset that fits, or the tightest gap) — and
//! keeps the smallest result (ties: the first strategy), deterministically.

/// One buffer to place.
#[derive(Debug, Clone, Copy)]
pub struct Item {
    /// First layer it is live in.
    pub first: u32,
    /// Last layer it is live in.
    pub last: u32,
    /// Size in bytes, already aligned.
    pub size: usize,
}

impl Item {
    #[cfg(test)]
    fn overlaps(&self, o: &Item) -> bool {
        self.first <= o.last && o.first <= self.last
    }
}

/// Offsets (same order as `items`) and the area size.
pub fn pack(items: &[Item]) -> (Vec<usize>, usize) {
    let bound = lower_bound(items);
    let mut best: Option<(Vec<usize>, usize)> = None;
    let keep = |best: &mut Option<(Vec<usize>, usize)>, r: (Vec<usize>, usize)| {
        if best.as_ref().is_none_or(|b| r.1 < b.1) {
            *best = Some(r);
        }
    };
    for order in orders(items) {
        keep(&mut best, place(items, &order, Fit::Lowest));
        keep(&mut best, place(items, &order, Fit::Tightest));
    }
    // Seeded random search: orders near largest-first, each buffer placed as low as it fits or as high as it fits
    // under the lower bound (a residual chain packs only when consecutive long-lived buffers alternate between the
    // two ends). Stops at the lower bound; the budget keeps it to ~10^8 overlap tests.
    let n = items.len().max(1);
    let rounds = (100_000_000 / (n * n)).clamp(8, 4000);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..rounds {
        if best.as_ref().is_some_and(|b| b.1 <= bound) {
            break;
        }
        let mut keyed: Vec<(u64, usize)> = (0..items.len())
            .map(|i| {
                // size × a factor in [0.5, 1.5)
                let f = 512 + (next() % 1024);
                ((items[i].size as u64).saturating_mul(f), i)
            })
            .collect();
        keyed.sort_by_key(|&(k, i)| (std::cmp::Reverse(k), i));
        let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
        let high: Vec<bool> = (0..items.len()).map(|_| next() & 1 == 1).collect();
        keep(
            &mut best,
            place(items, &order, Fit::TwoSided { bound, high: &high }),
        );
    }
    best.unwrap_or_default()
}

/// The most bytes live in any one layer: no packing can be smaller.
pub fn lower_bound(items: &[Item]) -> usize {
    layer_loads(items).into_iter().max().unwrap_or(0)
}

/// Bytes live in each layer (a difference array: O(items + layers)).
fn layer_loads(items: &[Item]) -> Vec<usize> {
    let layers = items
        .iter()
        .map(|it| it.last as usize + 1)
        .max()
        .unwrap_or(0);
    let mut delta = vec![0isize; layers + 1];
    for it in items {
        delta[it.first as usize] += it.size as isize;
        delta[it.last as usize + 1] -= it.size as isize;
    }
    let mut at = 0isize;
    delta[..layers]
        .iter()
        .map(|d| {
            at += d;
            at as usize
        })
        .collect()
}

/// Where a buffer goes among the gaps left by the buffers it overlaps in time.
#[derive(Clone, Copy)]
enum Fit<'a> {
    /// The lowest offset where it fits.
    Lowest,
    /// The smallest gap it fits in, else on top.
    Tightest,
    /// `high[k]` (k: position in the order): as high as it fits with its end at most `bound`; else lowest.
    TwoSided { bound: usize, high: &'a [bool] },
}

/// Placement orders: indices into `items`.
fn orders(items: &[Item]) -> Vec<Vec<usize>> {
    let idx: Vec<usize> = (0..items.len()).collect();
    let span = |i: usize| items[i].last - items[i].first;
    let mut by_size = idx.clone();
    by_size.sort_by_key(|&i| {
        (
            std::cmp::Reverse(items[i].size),
            std::cmp::Reverse(span(i)),
            i,
        )
    });
    let mut by_span = idx.clone();
    by_span.sort_by_key(|&i| {
        (
            std::cmp::Reverse(span(i)),
            std::cmp::Reverse(items[i].size),
            i,
        )
    });
    let mut by_start = idx.clone();
    by_start.sort_by_key(|&i| (items[i].first, std::cmp::Reverse(items[i].size), i));
    // Busiest layer first: the buffers of the layer with the most live bytes, largest first, then the next
    // busiest layer's remaining buffers, and so on (TFLite's "greedy by breadth").
    let live = layer_loads(items);
    let mut busiest: Vec<u32> = (0..live.len() as u32).collect();
    busiest.sort_by_key(|&l| (std::cmp::Reverse(live[l as usize]), l));
    // A buffer is taken at the busiest layer of its lifetime: sort by that layer's rank, then largest first.
    let mut rank = vec![0u32; live.len()];
    for (r, &l) in busiest.iter().enumerate() {
        rank[l as usize] = r as u32;
    }
    let first_rank: Vec<u32> = items
        .iter()
        .map(|it| {
            rank[it.first as usize..=it.last as usize]
                .iter()
                .copied()
                .min()
                .unwrap_or(0)
        })
        .collect();
    let mut by_breadth = idx;
    by_breadth.sort_by_key(|&i| (first_rank[i], std::cmp::Reverse(items[i].size), i));
    vec![by_size, by_breadth, by_span, by_start]
}

/// Places `items` in `order` with `fit`, each among the already placed items whose lifetime overlaps its own.
fn place(items: &[Item], order: &[usize], fit: Fit) -> (Vec<usize>, usize) {
    let mut offs = vec![usize::MAX; items.len()];
    // The placed items live in each layer: an item meets only the ones in its own layers (O(span + overlaps)
    // per item instead of a scan of everything placed).
    let layers = items
        .iter()
        .map(|it| it.last as usize + 1)
        .max()
        .unwrap_or(0);
    let mut by_layer: Vec<Vec<u32>> = vec![Vec::new(); layers];
    let mut seen = vec![usize::MAX; items.len()];
    let mut total = 0;
    for (k, &i) in order.iter().enumerate() {
        let it = items[i];
        let mut busy: Vec<(usize, usize)> = Vec::new();
        for l in it.first..=it.last {
            for &j in &by_layer[l as usize] {
                let j = j as usize;
                if seen[j] != k {
                    seen[j] = k;
                    busy.push((offs[j], offs[j] + items[j].size));
                }
            }
        }
        busy.sort_unstable();
        // Gaps between the merged busy ranges, then the unbounded space above them.
        let mut gaps = Vec::new();
        let mut at = 0;
        for (s, e) in busy {
            if s > at {
                gaps.push((at, s));
            }
            at = at.max(e);
        }
        gaps.push((at, usize::MAX));
        let fits = gaps.iter().filter(|g| g.1 - g.0 >= it.size);
        let lowest = gaps
            .iter()
            .find(|g| g.1 - g.0 >= it.size)
            .map_or(at, |g| g.0);
        let off = match fit {
            Fit::Lowest => lowest,
            Fit::Tightest => fits.min_by_key(|g| (g.1 - g.0, g.0)).map_or(at, |g| g.0),
            Fit::TwoSided { bound, high } if high.get(k) == Some(&true) => fits
                .filter_map(|g| {
                    let end = g.1.min(bound);
                    (end >= g.0 + it.size).then(|| end - it.size)
                })
                .max()
                .unwrap_or(lowest),
            Fit::TwoSided { .. } => lowest,
        };
        offs[i] = off;
        total = total.max(off + it.size);
        for l in it.first..=it.last {
            by_layer[l as usize].push(i as u32);
        }
    }
    (offs, total)
}

#[cfg(test)]
mod tests {
    use super::{pack, Item};

    fn check(items: &[Item]) -> usize {
        let (offs, total) = pack(items);
        for (i, a) in items.iter().enumerate() {
            assert!(offs[i] + a.size <= total);
            for (j, b) in items.iter().enumerate().skip(i + 1) {
                if a.overlaps(b) {
                    assert!(
                        offs[i] + a.size <= offs[j] || offs[j] + b.size <= offs[i],
                        "{i} and {j} overlap"
                    );
                }
            }
        }
        total
    }

    #[test]
    fn packs_without_overlap_and_reuses_dead_space() {
        let it = |first, last, size| Item { first, last, size };
        // A chain: each buffer dies when the next is made; two slots suffice.
        // The busiest layer holds 128 + 192 = 320 bytes: the lower bound, which the packing reaches.
        let chain: Vec<Item> = (0..10)
            .map(|l| it(l, l + 1, 64 * (1 + l as usize % 3)))
            .collect();
        assert_eq!(check(&chain), 320);
        // A residual block: the skip tensor lives across the branch; layer 3 holds 512 bytes.
        let block = [
            it(0, 3, 256),
            it(1, 1, 128),
            it(2, 2, 128),
            it(3, 4, 256),
            it(1, 2, 64),
        ];
        assert_eq!(check(&block), 512);
        assert_eq!(pack(&[]), (vec![], 0));
    }
}
