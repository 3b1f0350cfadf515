//! Loads a compiled bundle into this process (`cc -shared` of `NAME.o`, then `dlopen`) and hands its
//! `NAME_config` and entry point to `bundle-rt`.

use crate::harness::{shared_object, Compiled};
use std::ffi::CString;

/// A bundle's shared object; it stays mapped until the process exits, so `config` can be `'static`.
pub struct Loaded {
    /// `NAME_config`.
    pub config: &'static bundle_rt::BundleConfig,
    /// `NAME`.
    pub entry: bundle_rt::EntryFn,
}

impl Loaded {
    /// Builds and opens the shared object of `c`.
    pub fn open(c: &Compiled) -> Loaded {
        let so = shared_object(c);
        let path = CString::new(so.to_str().expect("utf-8 path")).expect("path");
        // SAFETY: dlopen on a path we just built; the handle is closed in Drop.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {so:?} failed");
        let sym = |n: &str| {
            let cn = CString::new(n).expect("symbol");
            // SAFETY: looking up a symbol in the handle opened above.
            let p = unsafe { libc::dlsym(handle, cn.as_ptr()) };
            assert!(!p.is_null(), "symbol {n} missing");
            p
        };
        let cfg = sym(&format!("{}_config", c.name)) as *const bundle_rt::BundleConfig;
        let entry = sym(&c.name);
        // SAFETY: `NAME_config` is a BundleConfig and `NAME` the entry with the documented signature; the
        // library stays loaded for the life of the process in these tests (handle never closed before exit).
        unsafe {
            Loaded {
                config: &*cfg,
                entry: std::mem::transmute::<*mut libc::c_void, bundle_rt::EntryFn>(entry),
            }
        }
    }
}
