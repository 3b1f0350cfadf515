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

#[cfg(feature = "alloc")]
impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to `align`; an empty block allocates nothing.
    fn zeroed(len: usize, align: usize, what: &str) -> Result<AlignedBuf> {
        let oom = || Error::OutOfMemory {
            what: Name::new(what),
            bytes: len as u64,
        };
        let layout = core::alloc::Layout::from_size_align(len, align).map_err(|_| oom())?;
        if len == 0 {
            // A dangling pointer with the right alignment: valid for zero-byte accesses.
            let ptr =
                NonNull::new(core::ptr::without_provenance_mut::<u8>(align)).ok_or_else(oom)?;
            return Ok(AlignedBuf { ptr, layout: None });
        }
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(oom)?;
        Ok(AlignedBuf {
            ptr,
            layout: Some(layout),
        })
    }
}

#[cfg(feature = "alloc")]
impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: `ptr` came from `alloc_zeroed(layout)` and is freed once, here.
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
