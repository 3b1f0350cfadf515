//! A layer's ticket shares: the tickets `0..total` of a layer dealt out in contiguous shares, one atomic word
//! per thread (`hi << 32 | lo`, alone on its cache line), taken from the bottom by the owner and from the top by
//! a thief whose own share is gone, each with one compare-and-swap (see `bsp.rs` for how the engine uses them).

use core::sync::atomic::{AtomicU64, Ordering};

/// One thread's share of a layer's tickets, alone on its cache line: the owner takes `lo` upward,
/// a thief whose own share is gone takes `hi - 1` downward, both with a compare-and-swap.
#[repr(align(64))]
pub(super) struct Range(pub(super) AtomicU64);

impl Range {
    pub(super) fn set(&self, lo: u64, hi: u64) {
        self.0.store(hi << 32 | lo, Ordering::Relaxed);
    }

    /// The next ticket from the bottom (`owner`) or the top of this share, if any is left.
    pub(super) fn take(&self, owner: bool) -> Option<u64> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let (lo, hi) = (cur & 0xffff_ffff, cur >> 32);
            if lo >= hi {
                return None;
            }
            let (next, ticket) = if owner {
                (hi << 32 | (lo + 1), lo)
            } else {
                ((hi - 1) << 32 | lo, hi - 1)
            };
            // Relaxed: the ticket only has to be unique; the lock (publication) and the barrier
            // order the data.
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(ticket),
                Err(seen) => cur = seen,
            }
        }
    }
}

/// Deals tickets `0..total` out in contiguous shares, thread `t` of `T` getting `total·t/T..total·(t+1)/T`.
pub(super) fn deal(ranges: &[Range], total: u64) {
    let n = ranges.len() as u64;
    for (t, range) in (0u64..).zip(ranges) {
        range.set(total * t / n, total * (t + 1) / n);
    }
}

/// The next ticket for thread `me`: from the bottom of its own share, else from the top of the
/// next thread's share that has any left.
pub(super) fn take(ranges: &[Range], me: usize) -> Option<u64> {
    let n = ranges.len();
    ranges
        .get(me)?
        .take(true)
        .or_else(|| (1..n).find_map(|d| ranges.get((me + d) % n).and_then(|r| r.take(false))))
}

#[cfg(test)]
mod tests {
    use super::{deal, take, Range};
    use core::sync::atomic::AtomicU64;
    use std::vec::Vec;

    /// Threads taking from their own share and stealing from the others' get every ticket of
    /// `0..total` exactly once, for totals smaller and larger than the thread count.
    #[test]
    fn shares_hand_out_each_ticket_once() {
        for (threads, total) in [(1, 5), (2, 1), (3, 2), (4, 1000), (8, 100_003)] {
            let ranges: Vec<Range> = (0..threads).map(|_| Range(AtomicU64::new(0))).collect();
            deal(&ranges, total);
            let mut got: Vec<u64> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|me| {
                        let ranges = &ranges;
                        s.spawn(move || {
                            core::iter::from_fn(|| take(ranges, me)).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap())
                    .collect()
            });
            got.sort_unstable();
            assert_eq!(got, (0..total).collect::<Vec<_>>(), "{threads} threads");
        }
    }
}
