//! Storage for the three memory areas: [`AreaBuf`], either owned (a zeroed, aligned heap block, with
//! `alloc`) or borrowed from the caller (checked for size and alignment).
//!
//! An `AreaBuf` keeps a raw base pointer taken once from its storage, so kernels can be handed the
//! base of an area that Rust code borrows only while no kernel runs. Invariant: `ptr` is aligned to
//! the area's alignment and valid for reads and writes of `len` bytes for the buffer's lifetime.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::error::{Error, Name};
use crate::Result;

/// One memory area: base pointer and length, owned or borrowed for `'b`.
pub(crate) struct AreaBuf<'b> {
    ptr: NonNull<u8>,
    len: usize,
    #[cfg(feature = "alloc")]
    _owned: Option<AlignedBuf>,
    _borrow: PhantomData<&'b mut [u8]>,
}

// SAFETY: an AreaBuf is either a uniquely owned heap block or a unique borrow (`&mut [u8]`), both of
// which are Send and Sync; the raw pointer is only an alias of that storage.
unsafe impl Send for AreaBuf<'_> {}
// SAFETY: see above; `&AreaBuf` only hands out `&[u8]` and the base pointer.
unsafe impl Sync for AreaBuf<'_> {}

impl<'b> AreaBuf<'b> {
    /// A zeroed heap area of `len` bytes aligned to `align` (a power of two).
    #[cfg(feature = "alloc")]
    pub(crate) fn owned(len: usize, align: usize, what: &str) -> Result<AreaBuf<'b>> {
        let buf = AlignedBuf::zeroed(len, align, what)?;
        Ok(AreaBuf {
            ptr: buf.ptr,
            len,
            _owned: Some(buf),
            _borrow: PhantomData,
        })
    }

    /// The caller's `storage`, which must be `align`-aligned and at least `len` bytes; the area is
    /// its first `len` bytes.
    pub(crate) fn borrowed(
        storage: &'b mut [u8],
        len: usize,
        align: usize,
        what: &str,
    ) -> Result<Self> {
        let address = storage.as_ptr() as usize;
        if !address.is_multiple_of(align) {
            return Err(Error::Misaligned {
                what: Name::new(what),
                address: address as u64,
                align: align as u64,
            });
        }
        if storage.len() < len {
            return Err(Error::BufferTooSmall {
                what: Name::new(what),
                needed: len as u64,
                got: storage.len() as u64,
            });
        }
        Ok(AreaBuf {
            ptr: NonNull::from(storage).cast(),
            len,
            #[cfg(feature = "alloc")]
            _owned: None,
            _borrow: PhantomData,
        })
    }

    /// Base address for kernels. Writing through it needs exclusive access to the area (`&mut self`
    /// held by the caller) or, for the constant area, must never happen.
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The area's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the invariant: `ptr` is valid for `len` bytes for 'b; no `&mut` alias is live while
        // `&self` is borrowed.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The area's bytes, mutably.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the invariant, and `&mut self` makes this the only live access.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// A zeroed heap block with a chosen alignment, freed on drop.
#[cfg(feature = "alloc")]
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Option<core::alloc::Layout>,
}

/// With std on Linux, blocks of at least this many bytes are placed on 2 MiB boundaries, padded to whole 2 MiB
/// pages, and offered to the kernel's transparent huge pages before they are zeroed (`madvise(MADV_HUGEPAGE)`; the
/// zeroing then faults them in as huge pages where the system allows it). A kernel reading rows a plane apart
/// touches a new 4 KiB page at every step, and the DTLB misses showed: ResNet-50's entry function 3-5 % faster
/// at 1 thread with all three areas on huge pages (Intel Xeon, Emerald Rapids, 10th percentiles; each area alone
/// about half of that), 2 threads unchanged. Elsewhere (no_std, other systems) blocks keep their own alignment.
#[cfg(all(feature = "std", target_os = "linux"))]
pub(crate) const HUGE_PAGE: Option<usize> = Some(2 << 20);
/// See above: no huge pages to ask for here.
#[cfg(all(feature = "alloc", not(all(feature = "std", target_os = "linux"))))]
pub(crate) const HUGE_PAGE: Option<usize> = None;

#[cfg(feature = "alloc")]
impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to `align`; an empty block allocates nothing; a block of at least
    /// [`HUGE_PAGE`] bytes (where there is one) is huge-page aligned and padded.
    fn zeroed(len: usize, align: usize, what: &str) -> Result<AlignedBuf> {
        let oom = || Error::OutOfMemory {
            what: Name::new(what),
            bytes: len as u64,
        };
        if len == 0 {
            core::alloc::Layout::from_size_align(len, align).map_err(|_| oom())?;
            // A dangling pointer with the right alignment: valid for zero-byte accesses.
            let ptr =
                NonNull::new(core::ptr::without_provenance_mut::<u8>(align)).ok_or_else(oom)?;
            return Ok(AlignedBuf { ptr, layout: None });
        }
        let huge = HUGE_PAGE.filter(|&h| len >= h);
        let layout = match huge {
            Some(h) => {
                let size = len.checked_next_multiple_of(h).ok_or_else(oom)?;
                core::alloc::Layout::from_size_align(size, align.max(h))
            }
            None => core::alloc::Layout::from_size_align(len, align),
        }
        .map_err(|_| oom())?;
        let ptr = if huge.is_some() {
            // Advised before the zeroing touches it, so that the first touch faults in huge pages.
            // SAFETY: `layout` has a non-zero size.
            let ptr = NonNull::new(unsafe { alloc::alloc::alloc(layout) }).ok_or_else(oom)?;
            advise_huge_pages(ptr, layout.size());
            // SAFETY: `ptr` is valid for writes of `layout.size()` bytes (just allocated).
            unsafe { core::ptr::write_bytes(ptr.as_ptr(), 0, layout.size()) };
            ptr
        } else {
            // SAFETY: `layout` has a non-zero size.
            NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout) }).ok_or_else(oom)?
        };
        Ok(AlignedBuf {
            ptr,
            layout: Some(layout),
        })
    }
}

/// Asks Linux to back `[ptr, ptr + len)` (huge-page aligned) with transparent huge pages; a hint whose failure
/// (THP disabled, an older kernel) changes nothing but speed, so its result is ignored.
#[cfg(all(feature = "std", target_os = "linux"))]
fn advise_huge_pages(ptr: NonNull<u8>, len: usize) {
    // SAFETY: the range is one live allocation of ours; MADV_HUGEPAGE changes no contents or permissions.
    unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
}

/// Without std on Linux there is no system call to make (and `HUGE_PAGE` is `None`, so no block asks).
#[cfg(all(feature = "alloc", not(all(feature = "std", target_os = "linux"))))]
fn advise_huge_pages(_ptr: NonNull<u8>, _len: usize) {}

#[cfg(feature = "alloc")]
impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: `ptr` came from `alloc(layout)` or `alloc_zeroed(layout)` and is freed once, here.
            unsafe { alloc::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

// SAFETY: AlignedBuf uniquely owns its block, like `Box<[u8]>`.
#[cfg(feature = "alloc")]
unsafe impl Send for AlignedBuf {}
// SAFETY: as above; shared access only reads.
#[cfg(feature = "alloc")]
unsafe impl Sync for AlignedBuf {}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use alloc::format;

    /// Owned areas are zeroed and aligned as asked; large ones (std, Linux) start on a huge page and
    /// still expose exactly `len` bytes; an impossible size is an out-of-memory error naming the area.
    #[test]
    fn owned_areas_are_zeroed_aligned_and_huge_where_large() {
        for (len, align) in [(0, 64), (100, 64), (3 << 20, 64), ((2 << 20) + 1, 4096)] {
            let a = AreaBuf::owned(len, align, "activation area").unwrap();
            assert_eq!(a.bytes().len(), len);
            assert!(a.bytes().iter().all(|&b| b == 0), "len {len} zeroed");
            let at = a.base() as usize;
            assert!(at.is_multiple_of(align), "len {len} aligned to {align}");
            if let Some(h) = HUGE_PAGE.filter(|&h| len >= h) {
                assert!(at.is_multiple_of(h), "len {len} on a huge page");
            }
        }
        let err = AreaBuf::owned(usize::MAX - 4096, 64, "constant area")
            .err()
            .expect("usize::MAX bytes cannot be allocated");
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err:?}");
        assert!(format!("{err}").contains("constant area"), "{err}");
    }
}
