//! The default kernel sets and a fat bundle's dispatch. On x86-64 Linux the default is the fat bundle
//! `x86-64-v3,x86-64-v4`; its entry runs the fast set's CPU check once per activation area and remembers the answer
//! in the area's last 64 bytes under a tag bound to the slot's address and the bundle
//! (`x86::cpu_check::pick_tag`). Whatever the slot held before is never trusted: only the exact tag
//! (confirmed by XGETBV) or its complement is read as an answer, anything else runs the check again.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use bundle_rt::{Area, Bundle};
use bundlec::x86::cpu_check::pick_tag;
use bundlec_tests::harness::compile_with;
use bundlec_tests::loaded::Loaded;
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// An area of `size` bytes, 64-byte aligned, zeroed.
struct AreaMem(*mut u8, Layout);

impl AreaMem {
    fn new(size: usize) -> AreaMem {
        let layout = Layout::from_size_align(size.max(64), 64).expect("layout");
        // SAFETY: a non-zero size.
        AreaMem(unsafe { alloc_zeroed(layout) }, layout)
    }
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the allocation above, `layout.size()` bytes.
        unsafe { std::slice::from_raw_parts_mut(self.0, self.1.size()) }
    }
}

impl Drop for AreaMem {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.0, self.1) }
    }
}

fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

#[test]
fn the_default_is_the_fat_bundle() {
    let c = compile_with(
        &bundlec_tests::models::lenet(1),
        bundlec::Options::new("fat_default"),
    );
    let ins = bundlec::emit::inspect::inspect("fat_default.o", &c.bundle.object).expect("inspect");
    assert_eq!(
        ins.cpu_features,
        ["sse2", "avx", "fma", "avx2"],
        "the base set's"
    );
    let fast = ins.fast_cpu_features.expect("a fastOps table");
    assert!(fast.iter().any(|f| f == "avx512f"), "{fast:?}");
    assert!(
        c.bundle.header.contains("x86-64-v3,x86-64-v4"),
        "the header names the sets"
    );
}

/// The entry's slot: filled with the tag (this CPU has AVX-512) or its complement on the first call into a zeroed
/// area; replaced when it holds anything else; kept, and obeyed, when it holds the complement ("no") on a CPU
/// that has the features, which runs the base set, whose outputs match the fast set's within 1e-5.
#[test]
fn pick_remembers_its_check_in_a_tagged_slot() {
    let name = "fat_pick";
    let c = compile_with(
        &bundlec_tests::models::lenet(1),
        bundlec::Options::new(name),
    );
    let l = Loaded::open(&c);
    // SAFETY: config and entry of the bundle just compiled and loaded.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    let key = bundle_rt::checksum64(&c.bundle.weights) ^ bundle_rt::fnv1a64(name.as_bytes());
    let mut constants = AreaMem::new(b.area_size(Area::Constant));
    constants.bytes()[..c.bundle.weights.len()].copy_from_slice(&c.bundle.weights);
    let mut mutables = AreaMem::new(b.area_size(Area::Mutable));
    let input = b.inputs().next().expect("an input");
    let x = bundlec_tests::rand_vec(input.elements, 5);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    mutables.bytes()[input.byte_range()].copy_from_slice(&bytes);
    let output = b.outputs().next().expect("an output");
    let act_size = b.area_size(Area::Activations);
    let tag_of = |addr: u64| pick_tag(addr, key);
    // Runs the entry on a fresh activation area whose slot first holds `preset(slot address)`.
    let mut run = |preset: &dyn Fn(u64) -> u64| -> (u64, u64, Vec<f32>) {
        let mut act = AreaMem::new(act_size);
        let slot_at = act_size - 64;
        let addr = act.0 as u64 + slot_at as u64;
        act.bytes()[slot_at..slot_at + 8].copy_from_slice(&preset(addr).to_le_bytes());
        // SAFETY: the entry of this bundle, with areas of the sizes its config states.
        let rc = unsafe { (l.entry)(constants.0, mutables.0, act.0) };
        assert_eq!(rc, 0);
        let slot = u64::from_le_bytes(act.bytes()[slot_at..slot_at + 8].try_into().unwrap());
        let out = mutables.bytes()[output.byte_range()]
            .chunks_exact(4)
            .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        (slot, addr, out)
    };
    let answer = |addr: u64| {
        if has_avx512() {
            tag_of(addr)
        } else {
            !tag_of(addr)
        }
    };
    let (slot, addr, fresh) = run(&|_| 0);
    assert_eq!(slot, answer(addr), "a zeroed slot");
    let (slot, addr, _) = run(&|_| 0x5555_5555_5555_5555);
    assert_eq!(slot, answer(addr), "garbage");
    // The tag of another address, or of another bundle, is garbage here.
    let (slot, addr, _) = run(&|a| pick_tag(a + 64, key));
    assert_eq!(slot, answer(addr), "another address's tag");
    let (slot, addr, _) = run(&|a| pick_tag(a, key ^ 1));
    assert_eq!(slot, answer(addr), "another bundle's tag");
    // A remembered "no" is kept and obeyed: the base set runs, its outputs close to the fast set's.
    let (slot, addr, base) = run(&|a| !tag_of(a));
    assert_eq!(slot, !tag_of(addr), "a remembered no");
    bundlec_tests::assert_close(&[base], &[fresh], 1e-5, "base vs fast set");
}
