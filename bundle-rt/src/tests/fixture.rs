//! A hand-built bundle for the tests: the config tables as Rust values of the `repr(C)` structs,
//! tiny `extern "C"` kernels written in Rust, an entry function that runs them in table order, and a
//! weights image.
//!
//! The model (N f32 elements per tensor):
//!
//! ```text
//!   layer 0:  add_c         t1 = x + c            (tasks of chunk_a elements)
//!             double        t2 = x * 2            (tasks of chunk_b elements)
//!   layer 1:  sum_plus_one  y  = (t1 + t2) + 1    (tasks of chunk_c elements)
//!             mark          marks[task] += 1      (one task per element of `marks`)
//! ```
//!
//! Symbols: input `x` f32[2, N/2]; outputs `y` f32[2, N/2] and `marks` i32[M]; constants `c` f32[N]
//! and `steps` i64[] (= 7). `marks` counts how often each task of `mark` ran, so a lost or doubled
//! task shows up.
//!
//! [`Fixture::add_segment`] appends an NPU segment (format version 2): its staging buffers go at
//! the end of the activation area, its constants and parameter blocks at the end of the weights.

use std::ffi::CString;
use std::ops::Range;
use std::vec;
use std::vec::Vec;

use crate::config::{
    BundleArg, BundleConfig, BundleLayer, BundleOp, BundleOpFn, BundleTensorDesc, EntryFn, NpuCopy,
    NpuSegment, SymbolTableEntry, MAGIC, VERSION,
};
use crate::fnv1a64;

/// Elements `[task * chunk, (task + 1) * chunk)` clipped to `n`.
fn tile(n: usize, chunk: usize, task: u64) -> Range<usize> {
    let start = (task as usize).saturating_mul(chunk).min(n);
    start..(start + chunk).min(n)
}

unsafe extern "C" fn add_c<const N: usize, const CHUNK: usize>(args: *const *mut u8, task: u64) {
    // SAFETY: the fixture passes [x, c, t1], each N f32, 64-aligned; tasks write disjoint elements.
    unsafe {
        let (x, c, t1) = (
            *args as *const f32,
            *args.add(1) as *const f32,
            *args.add(2) as *mut f32,
        );
        for i in tile(N, CHUNK, task) {
            *t1.add(i) = *x.add(i) + *c.add(i);
        }
    }
}

unsafe extern "C" fn double<const N: usize, const CHUNK: usize>(args: *const *mut u8, task: u64) {
    // SAFETY: the fixture passes [x, t2], each N f32.
    unsafe {
        let (x, t2) = (*args as *const f32, *args.add(1) as *mut f32);
        for i in tile(N, CHUNK, task) {
            *t2.add(i) = *x.add(i) * 2.0;
        }
    }
}

unsafe extern "C" fn sum_plus_one<const N: usize, const CHUNK: usize>(
    args: *const *mut u8,
    task: u64,
) {
    // SAFETY: the fixture passes [t1, t2, y], each N f32.
    unsafe {
        let (t1, t2) = (*args as *const f32, *args.add(1) as *const f32);
        let y = *args.add(2) as *mut f32;
        for i in tile(N, CHUNK, task) {
            *y.add(i) = (*t1.add(i) + *t2.add(i)) + 1.0;
        }
    }
}

unsafe extern "C" fn mark(args: *const *mut u8, task: u64) {
    // SAFETY: the fixture passes [marks] with one i32 per task.
    unsafe {
        let marks = *args as *mut i32;
        *marks.add(task as usize) += 1;
    }
}

/// Tasks of an op over `n` elements in chunks of `chunk`.
const fn tasks(n: usize, chunk: usize) -> usize {
    n.div_ceil(chunk)
}

/// The entry function: every task of every op in table order, as `bundlec`'s entry does.
unsafe extern "C" fn entry<
    const N: usize,
    const A: usize,
    const B: usize,
    const C: usize,
    const M: usize,
>(
    constants: *mut u8,
    mutable: *mut u8,
    activations: *mut u8,
) -> i32 {
    let bytes = N * 4;
    // SAFETY: the areas have the sizes `Fixture::new` declares for these parameters.
    unsafe {
        let (x, y, marks) = (mutable, mutable.add(bytes), mutable.add(2 * bytes));
        let (t1, t2) = (activations, activations.add(bytes));
        let calls: [(BundleOpFn, &[*mut u8], usize); 4] = [
            (add_c::<N, A>, &[x, constants, t1], tasks(N, A)),
            (double::<N, B>, &[x, t2], tasks(N, B)),
            (sum_plus_one::<N, C>, &[t1, t2, y], tasks(N, C)),
            (mark, &[marks], M),
        ];
        for (func, args, n) in calls {
            for task in 0..n {
                func(args.as_ptr(), task as u64);
            }
        }
    }
    0
}

/// An entry function that reports failure.
pub unsafe extern "C" fn failing_entry(_: *mut u8, _: *mut u8, _: *mut u8) -> i32 {
    7
}

/// The owned tables of a test bundle; [`Fixture::config`] points a `BundleConfig` into them.
pub struct Fixture {
    pub n: usize,
    pub names: Vec<CString>,
    pub symbols: Vec<SymbolTableEntry>,
    pub tensors: Vec<BundleTensorDesc>,
    pub args: Vec<Vec<BundleArg>>,
    pub ops: Vec<BundleOp>,
    pub layers: Vec<BundleLayer>,
    pub model_name: CString,
    pub weights: Vec<u8>,
    pub entry: EntryFn,
    pub sizes: [u64; 3],
    pub segments: Vec<NpuSegment>,
    pub copies: Vec<Vec<NpuCopy>>,
    pub txns: Vec<Vec<u8>>,
}

/// An NPU segment to add to a fixture: the copies as `(area, offset, size)`, packed into the
/// fused buffers in order.
pub struct SegmentSpec {
    pub name: &'static str,
    pub first_layer: u32,
    pub num_layers: u32,
    pub copy_in: Vec<(u32, usize, usize)>,
    pub copy_out: Vec<(u32, usize, usize)>,
    pub scratch: usize,
    pub consts: Vec<u8>,
    pub params: Vec<u8>,
    pub txn: Vec<u8>,
}

/// `n` rounded up to a multiple of 64.
fn align64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

fn desc(dtype: u32, dims: &[u64], role: u32, elem: u64) -> BundleTensorDesc {
    let mut d = [0u64; 8];
    d[..dims.len()].copy_from_slice(dims);
    BundleTensorDesc {
        dtype,
        rank: dims.len() as u32,
        role,
        reserved: 0,
        dims: d,
        size_bytes: dims.iter().product::<u64>() * elem,
    }
}

fn arg(area: u32, offset: usize, size: usize) -> BundleArg {
    BundleArg {
        area,
        reserved: 0,
        offset: offset as u64,
        size: size as u64,
    }
}

impl Fixture {
    /// 16 elements: add_c 4 tasks, double 2, sum_plus_one 3, mark 3.
    pub fn small() -> Fixture {
        Fixture::new::<16, 4, 8, 6, 3>()
    }

    /// 4096 elements: add_c 64 tasks, double 32, sum_plus_one 43, mark 37.
    pub fn large() -> Fixture {
        Fixture::new::<4096, 64, 128, 96, 37>()
    }

    fn new<const N: usize, const A: usize, const B: usize, const C: usize, const M: usize>(
    ) -> Fixture {
        let bytes = N * 4;
        let marks_bytes = (M * 4).div_ceil(64) * 64;
        let names: Vec<CString> = ["x", "y", "marks", "c", "steps"]
            .iter()
            .map(|s| CString::new(*s).unwrap())
            .collect();
        let placement: [(usize, u64, u8); 5] = [
            (0, N as u64, 1),
            (bytes, N as u64, 1),
            (2 * bytes, M as u64, 1),
            (0, N as u64, 0),
            (bytes, 1, 0),
        ];
        let symbols = names
            .iter()
            .zip(placement)
            .map(|(name, (offset, size, kind))| SymbolTableEntry {
                name: name.as_ptr(),
                offset: offset as u64,
                size,
                kind,
            })
            .collect();
        let half = (N / 2) as u64;
        let tensors = vec![
            desc(1, &[2, half], 1, 4),
            desc(1, &[2, half], 2, 4),
            desc(6, &[M as u64], 2, 4),
            desc(1, &[N as u64], 0, 4),
            desc(7, &[], 0, 8),
        ];
        let args = vec![
            vec![arg(1, 0, bytes), arg(0, 0, bytes), arg(2, 0, bytes)],
            vec![arg(1, 0, bytes), arg(2, bytes, bytes)],
            vec![arg(2, 0, bytes), arg(2, bytes, bytes), arg(1, bytes, bytes)],
            vec![arg(1, 2 * bytes, M * 4)],
        ];
        let op_names =
            ["add_c", "double", "sum_plus_one", "mark"].map(|s| CString::new(s).unwrap());
        let fns: [(BundleOpFn, usize, u32); 4] = [
            (add_c::<N, A>, tasks(N, A), 0),
            (double::<N, B>, tasks(N, B), 0),
            (sum_plus_one::<N, C>, tasks(N, C), 1),
            (mark, M, 1),
        ];
        let ops = fns
            .iter()
            .zip(&args)
            .zip(&op_names)
            .map(|((&(func, num_tasks, layer), a), name)| BundleOp {
                func: Some(func),
                name: name.as_ptr(),
                num_tasks: num_tasks as u32,
                num_args: a.len() as u32,
                args: a.as_ptr(),
                layer,
                reserved: 0,
            })
            .collect();
        let mut weights = vec![0u8; bytes + 64];
        for i in 0..N {
            let v = i as f32 * 0.25 - 1.0;
            weights[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        weights[bytes..bytes + 8].copy_from_slice(&7i64.to_le_bytes());
        let mut names = names;
        names.extend(op_names);
        Fixture {
            n: N,
            names,
            symbols,
            tensors,
            args,
            ops,
            layers: vec![
                BundleLayer {
                    first_op: 0,
                    num_ops: 2,
                },
                BundleLayer {
                    first_op: 2,
                    num_ops: 2,
                },
            ],
            model_name: CString::new("fixture").unwrap(),
            weights,
            entry: entry::<N, A, B, C, M>,
            sizes: [
                (bytes + 64) as u64,
                (2 * bytes + marks_bytes) as u64,
                (2 * bytes) as u64,
            ],
            segments: Vec::new(),
            copies: Vec::new(),
            txns: Vec::new(),
        }
    }

    /// Appends an NPU segment; returns the offsets of its `in`, `out` and `scratch` staging
    /// buffers and of its constants and parameters.
    pub fn add_segment(&mut self, spec: SegmentSpec) -> [usize; 5] {
        let pack = |list: &[(u32, usize, usize)]| {
            let mut at = 0usize;
            let copies: Vec<NpuCopy> = list
                .iter()
                .map(|&(area, offset, size)| {
                    let copy = NpuCopy {
                        area,
                        reserved: 0,
                        offset: offset as u64,
                        size: size as u64,
                        fused_offset: at as u64,
                    };
                    at += size;
                    copy
                })
                .collect();
            (copies, at)
        };
        let (mut copies, in_size) = pack(&spec.copy_in);
        let (copy_out, out_size) = pack(&spec.copy_out);
        copies.extend(copy_out);
        let act = self.sizes[2] as usize;
        let staging = [
            act,
            act + align64(in_size),
            act + align64(in_size) + align64(out_size),
        ];
        self.sizes[2] = (staging[2] + align64(spec.scratch)) as u64;
        let const_at = self.weights.len();
        self.weights.extend(&spec.consts);
        self.weights.resize(align64(self.weights.len()), 0);
        let params_at = self.weights.len();
        self.weights.extend(&spec.params);
        self.weights.resize(align64(self.weights.len()), 0);
        self.sizes[0] = self.weights.len() as u64;
        let name = CString::new(spec.name).unwrap();
        self.copies.push(copies);
        self.txns.push(spec.txn);
        let (copies, txn) = (self.copies.last().unwrap(), self.txns.last().unwrap());
        self.segments.push(NpuSegment {
            name: name.as_ptr(),
            txn: txn.as_ptr(),
            txn_size: txn.len() as u64,
            first_layer: spec.first_layer,
            num_layers: spec.num_layers,
            in_offset: staging[0] as u64,
            in_size: in_size as u64,
            out_offset: staging[1] as u64,
            out_size: out_size as u64,
            scratch_offset: staging[2] as u64,
            scratch_size: spec.scratch as u64,
            const_offset: const_at as u64,
            const_size: spec.consts.len() as u64,
            params_offset: params_at as u64,
            params_size: spec.params.len() as u64,
            num_copy_in: spec.copy_in.len() as u32,
            num_copy_out: spec.copy_out.len() as u32,
            copies: if copies.is_empty() {
                std::ptr::null()
            } else {
                copies.as_ptr()
            },
            est_cycles: [1, 2, 3],
        });
        self.names.push(name);
        [staging[0], staging[1], staging[2], const_at, params_at]
    }

    /// Replaces op `op`'s argument table (and re-points the op at it).
    pub fn set_args(&mut self, op: usize, args: Vec<BundleArg>) {
        self.args[op] = args;
        self.ops[op].args = self.args[op].as_ptr();
        self.ops[op].num_args = self.args[op].len() as u32;
    }

    /// A config pointing into the fixture's tables; build it after the last change to them.
    pub fn config(&self) -> BundleConfig {
        BundleConfig {
            constant_weight_vars_mem_size: self.sizes[0],
            mutable_weight_vars_mem_size: self.sizes[1],
            activations_mem_size: self.sizes[2],
            alignment: 64,
            num_symbols: self.symbols.len() as u64,
            symbol_table: self.symbols.as_ptr(),
            magic: MAGIC,
            version: VERSION,
            flags: 0,
            weights_checksum: fnv1a64(&self.weights),
            tensors: self.tensors.as_ptr(),
            num_inputs: 1,
            num_outputs: 2,
            num_ops: self.ops.len() as u64,
            ops: self.ops.as_ptr(),
            num_layers: self.layers.len() as u64,
            layers: self.layers.as_ptr(),
            num_npu_segments: self.segments.len() as u64,
            npu_segments: if self.segments.is_empty() {
                std::ptr::null()
            } else {
                self.segments.as_ptr()
            },
            model_name: self.model_name.as_ptr(),
            cpu_features: 0,
        }
    }

    /// An input: `x[i] = 0.37 i - 3 + seed`.
    pub fn input(&self, seed: f32) -> Vec<f32> {
        (0..self.n).map(|i| i as f32 * 0.37 - 3.0 + seed).collect()
    }

    /// The reference output for `x`, with the kernels' arithmetic order.
    pub fn expected(&self, x: &[f32]) -> Vec<f32> {
        x.iter()
            .enumerate()
            .map(|(i, &x)| ((x + (i as f32 * 0.25 - 1.0)) + x * 2.0) + 1.0)
            .collect()
    }
}
