//! [`Runner`]: executes a run recipe against a bundle, XRT-style — `new`, `bind_input`,
//! `bind_output`, `execute`, `wait`.
//!
//! Buffers are copy-in/copy-out. Every external input and output gets a runner-owned, 64-aligned
//! buffer of its tensor's size; [`Runner::bind_input`] copies the caller's bytes into it at once (no
//! borrow is kept), and [`Runner::bind_output`] records where to copy the result, which `execute`
//! does after the last run. Kernels therefore only ever see runner-owned memory and the bundle's
//! constant area: no alignment demands on the caller, no aliasing between a caller's slice and what
//! kernels write, and a recipe that makes a kernel write an "input" buffer cannot touch the caller's
//! data. The price is one copy per input and output per execution, small next to the model. A bound
//! output is a `&'io mut` borrow held by the runner (as a pointer and length, so the C API can bind
//! raw memory under the same rules), which is why `Runner` has the lifetime `'io`.
//!
//! `execute` is synchronous: it runs every task of every run in recipe order on the calling thread,
//! then copies the outputs out. `wait` only returns the result of the last `execute` (XRT's
//! `execute` + `wait` pair works unchanged). Npu runs go to the runner's [`Device`] (by default
//! [`Emulator::vnpu`]; [`Runner::set_device`] plugs in another), `bundlert_copy` runs are plain
//! copies (`npu_runs.rs`). Everything that can fail is checked in [`Runner::new`] (see `build.rs`)
//! or before the first task, so a run never stops halfway — except for a device that rejects or
//! fails a transaction, which ends `execute` with that error before the outputs are copied out.

use alloc::vec::Vec;
use core::marker::PhantomData;
use core::ptr::NonNull;

use alloc::boxed::Box;

use super::build;
use super::call::{Call, Slot};
use super::meta::DdMeta;
use super::npu_runs;
use super::recipe::Recipe;
use crate::bundle::Bundle;
use crate::config::{Role, TensorInfo};
use crate::error::{Error, Name};
use crate::instance::Element;
use crate::npu::{Device, Emulator, NpuCycles};
use crate::Result;

/// A run recipe bound to a bundle; see the module docs for the buffer model.
pub struct Runner<'b, 'io> {
    bundle: &'b Bundle<'b>,
    recipe: Recipe,
    slots: Vec<Slot>,
    calls: Vec<Call>,
    /// Base address of each slot for the current execution (reused, never reallocated).
    bases: Vec<*mut u8>,
    /// The argument array of the current call (reused, never reallocated).
    args: Vec<*mut u8>,
    /// The device npu runs go to.
    device: Option<Box<dyn Device + Send>>,
    /// Cycles of each npu run of the last execute, in recipe order (reused).
    cycles: Vec<NpuCycles>,
    last: Option<Result<()>>,
    _outputs: PhantomData<&'io mut [u8]>,
}

// SAFETY: the raw pointers are addresses of runner-owned buffers, of the bundle's constant area
// (`Bundle` is `Sync`) or of output slices borrowed `&'io mut [u8]` (which are `Send`); moving the
// runner to another thread moves that exclusive access with it. The device is `Send`.
unsafe impl Send for Runner<'_, '_> {}

impl<'b, 'io> Runner<'b, 'io> {
    /// Parses and checks `recipe_json`, resolves every cpu run in `bundle`'s op table (no library is
    /// loaded) or as the runtime's `bundlert_copy`, every npu run's kernel in the bundle's NPU
    /// segment table, and allocates the internal and staging buffers. Npu runs go to an
    /// [`Emulator::vnpu`] until [`Runner::set_device`] replaces it.
    pub fn new(bundle: &'b Bundle<'b>, recipe_json: &str) -> Result<Runner<'b, 'io>> {
        let recipe = Recipe::parse(recipe_json)?;
        let cpus = build::cpu_kinds(bundle, &recipe)?;
        let kernels = build::kernel_segments(bundle, &recipe)?;
        let instr = build::instr_buffers(&recipe, &kernels)?;
        let slots = build::slots(bundle, &recipe, &instr)?;
        let calls = build::calls(bundle, &recipe, &slots, &cpus, &kernels)?;
        let widest = calls
            .iter()
            .map(|c| match c {
                Call::Op { args, .. } => args.len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let npu_runs = calls
            .iter()
            .filter(|c| matches!(c, Call::Npu { .. }))
            .count();
        Ok(Runner {
            bundle,
            bases: Vec::with_capacity(slots.len()),
            args: Vec::with_capacity(widest),
            device: Some(Box::new(Emulator::vnpu())),
            cycles: Vec::with_capacity(npu_runs),
            recipe,
            slots,
            calls,
            last: None,
            _outputs: PhantomData,
        })
    }

    /// Makes `device` the device npu runs go to (replacing the default [`Emulator::vnpu`]), e.g. an
    /// XRT-backed driver.
    pub fn set_device(&mut self, device: Box<dyn Device + Send>) {
        self.device = Some(device);
    }

    /// Removes the device and returns it; `execute` then fails with [`Error::NoNpuDevice`] if the
    /// recipe has npu runs.
    pub fn take_device(&mut self) -> Option<Box<dyn Device + Send>> {
        self.device.take()
    }

    /// The device's name, if the runner has one.
    pub fn device_name(&self) -> Option<&str> {
        self.device.as_deref().map(|d| d.name())
    }

    /// The cycles the device reported for each npu run of the last `execute`, in recipe order
    /// (those that ran, if it failed).
    pub fn npu_cycles(&self) -> &[NpuCycles] {
        &self.cycles
    }

    /// The bundle.
    pub fn bundle(&self) -> &'b Bundle<'b> {
        self.bundle
    }

    /// The checked recipe.
    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// Reads DynamicDispatch's meta JSON of the NPU segment that kernel `kernel` runs
    /// (`NAME.<segment>.meta.json`) and checks it against the bundle's segment: buffer sizes, and
    /// the packed `in` and `out` tensors against the segment's copies. Returns the checked document.
    pub fn check_meta(&self, kernel: &str, meta_json: &str) -> Result<DdMeta> {
        let meta = DdMeta::parse(meta_json)?;
        let declared = self.recipe.kernels.iter().any(|k| k.name == kernel);
        let segment = self.bundle.view().find_npu_segment(kernel);
        let (true, Some(segment)) = (declared, segment) else {
            return Err(Error::BadMeta {
                field: "kernel",
                name: Name::new(kernel),
                why: crate::error::MetaWhy::UnknownKernel,
            });
        };
        meta.check_segment(&segment)?;
        Ok(meta)
    }

    /// Copies `data` into input buffer `name`; `data` must be exactly the tensor's size in bytes.
    pub fn bind_input(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (slot, info) = self.external(name, Role::Input)?;
        check_bytes(&info, data.len())?;
        if let Slot::Input {
            data: staging,
            bound,
            ..
        } = &mut self.slots[slot]
        {
            staging.bytes_mut().copy_from_slice(data);
            *bound = true;
        }
        Ok(())
    }

    /// As [`Runner::bind_input`] with typed data; checks dtype and element count.
    pub fn bind_input_typed<T: Element>(&mut self, name: &str, data: &[T]) -> Result<()> {
        let (_, info) = self.external(name, Role::Input)?;
        check_typed::<T>(&info, data.len())?;
        // SAFETY: `Element` types are plain data without padding, so their bytes are initialised;
        // the view covers exactly `data`.
        let bytes = unsafe {
            core::slice::from_raw_parts(data.as_ptr().cast::<u8>(), core::mem::size_of_val(data))
        };
        self.bind_input(name, bytes)
    }

    /// Makes `data` the destination of output buffer `name`: every successful `execute` copies the
    /// result there. `data` must be exactly the tensor's size in bytes; it stays borrowed for `'io`.
    pub fn bind_output(&mut self, name: &str, data: &'io mut [u8]) -> Result<()> {
        let len = data.len();
        // SAFETY: `data` is valid for writes of `len` bytes and exclusively borrowed for 'io, which
        // the runner outlives no longer than (its type carries 'io).
        unsafe { self.bind_output_raw(name, NonNull::from(data).cast(), len) }
    }

    /// As [`Runner::bind_output`] with a typed destination; checks dtype and element count.
    pub fn bind_output_typed<T: Element>(&mut self, name: &str, data: &'io mut [T]) -> Result<()> {
        let (_, info) = self.external(name, Role::Output)?;
        check_typed::<T>(&info, data.len())?;
        let len = core::mem::size_of_val(data);
        // SAFETY: as in `bind_output`; any bytes are a valid `T` (`Element`), so writing raw bytes
        // into the slice is sound.
        unsafe { self.bind_output_raw(name, NonNull::from(data).cast(), len) }
    }

    /// Records `ptr` (`len` bytes) as output `name`'s destination.
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes, not overlap any runner or bundle memory, and not
    /// be accessed by anyone else during `execute`, for as long as it stays bound (until rebound or
    /// the runner is dropped).
    pub(crate) unsafe fn bind_output_raw(
        &mut self,
        name: &str,
        ptr: NonNull<u8>,
        len: usize,
    ) -> Result<()> {
        let (slot, info) = self.external(name, Role::Output)?;
        check_bytes(&info, len)?;
        if let Slot::Output { target, .. } = &mut self.slots[slot] {
            *target = Some(ptr);
        }
        Ok(())
    }

    /// Runs every task of every run in recipe order on this thread, then copies each output to its
    /// bound destination. Fails with [`Error::Unbound`] before running anything if an external input
    /// or output is unbound.
    pub fn execute(&mut self) -> Result<()> {
        let result = self.execute_inner();
        self.last = Some(result);
        result
    }

    /// The result of the last [`Runner::execute`] (`Ok` if there was none): execution is
    /// synchronous, so there is nothing to wait for.
    pub fn wait(&mut self) -> Result<()> {
        self.last.unwrap_or(Ok(()))
    }

    fn execute_inner(&mut self) -> Result<()> {
        for (slot, buf) in self.slots.iter().zip(&self.recipe.buffers) {
            let unbound = match slot {
                Slot::Input { bound, .. } => !bound,
                Slot::Output { target, .. } => target.is_none(),
                Slot::Weights | Slot::Instr { .. } | Slot::Internal(_) => false,
            };
            if unbound {
                return Err(Error::Unbound {
                    name: Name::new(&buf.name),
                });
            }
        }
        let needs_device = self
            .calls
            .iter()
            .position(|c| matches!(c, Call::Npu { .. }));
        if let (Some(r), None) = (needs_device, &self.device) {
            let run = self.recipe.runs.get(r).map_or("", |run| run.name.as_str());
            return Err(Error::NoNpuDevice {
                run: Name::new(run),
            });
        }
        let constants = self.bundle.constant_base();
        self.bases.clear();
        self.bases.extend(self.slots.iter().map(|slot| match slot {
            Slot::Weights => constants,
            Slot::Internal(data)
            | Slot::Instr { data, .. }
            | Slot::Input { data, .. }
            | Slot::Output { data, .. } => data.base(),
        }));
        self.cycles.clear();
        for call in &self.calls {
            match call {
                Call::Op { func, tasks, args } => {
                    self.args.clear();
                    self.args.extend(args.iter().map(|arg| {
                        // SAFETY: `build::calls` checked offset + the op's argument size <= the
                        // buffer's size, so the address stays inside the slot's allocation.
                        unsafe { self.bases[arg.slot].add(arg.offset) }
                    }));
                    for task in 0..*tasks {
                        // SAFETY: `build.rs`'s checks give each argument a region of exactly the
                        // op's argument size, aligned like the op table's, in runner-owned buffers
                        // or (only for constant arguments, which kernels never write) the constant
                        // area; `task` is below the op's numTasks; `&mut self` excludes any other
                        // access to the runner's buffers. That is the kernel's contract, vouched
                        // for by `Bundle::new`'s caller.
                        unsafe { func(self.args.as_ptr(), u64::from(task)) };
                    }
                }
                // SAFETY: `npu_runs::copy_call` resolved the regions against these buffers; `&mut
                // self` excludes any other access.
                Call::Copy { src, dst } => unsafe { npu_runs::run_copy(&self.bases, src, dst) },
                Call::Npu { instr, bufs, .. } => {
                    // The transaction in the instruction buffer the run binds (the runner filled it
                    // from the bundle; no run writes a `weight` buffer).
                    let txn = match self.slots.get(*instr) {
                        Some(Slot::Instr { data, .. }) => data
                            .bytes()
                            .get(crate::format::NPU_INSTR_HEADER_BYTES..)
                            .unwrap_or(&[]),
                        _ => &[],
                    };
                    let Some(device) = self.device.as_deref_mut() else {
                        continue;
                    };
                    // SAFETY: `npu_runs::npu_call` resolved the regions against these buffers
                    // (written ones disjoint from the rest, none in `weights`); `&mut self`
                    // excludes any other access.
                    let cycles = unsafe { npu_runs::run_npu(&self.bases, bufs, txn, device) }?;
                    self.cycles.push(cycles);
                }
            }
        }
        for slot in &self.slots {
            if let Slot::Output {
                data,
                target: Some(target),
                ..
            } = slot
            {
                let bytes = data.bytes();
                // SAFETY: `bind_output_raw`'s contract: `target` is valid for writes of the tensor's
                // size (checked equal to `bytes.len()`) and overlaps no runner memory.
                unsafe {
                    core::ptr::copy_nonoverlapping(bytes.as_ptr(), target.as_ptr(), bytes.len())
                };
            }
        }
        Ok(())
    }

    /// The slot and tensor of external buffer `name`, which must be bindable as `wanted`.
    fn external(&self, name: &str, wanted: Role) -> Result<(usize, TensorInfo<'b>)> {
        let slot = self.recipe.buffer(name).ok_or(Error::UnknownBuffer {
            name: Name::new(name),
        })?;
        let tensor = match (&self.slots[slot], wanted) {
            (Slot::Input { tensor, .. }, Role::Input)
            | (Slot::Output { tensor, .. }, Role::Output) => *tensor,
            _ => {
                return Err(Error::NotBindable {
                    name: Name::new(name),
                    wanted,
                })
            }
        };
        // Slots hold indices of tensors found in the bundle's validated view.
        let info = self
            .bundle
            .view()
            .tensor(tensor)
            .ok_or(Error::UnknownTensor {
                name: Name::new(name),
            })?;
        Ok((slot, info))
    }
}

impl core::fmt::Debug for Runner<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runner")
            .field("bundle", &self.bundle.model_name())
            .field("buffers", &self.recipe.buffers.len())
            .field("runs", &self.calls.len())
            .field("device", &self.device_name())
            .finish()
    }
}

/// `len` bytes must be the tensor's size.
fn check_bytes(info: &TensorInfo<'_>, len: usize) -> Result<()> {
    if len != info.size_bytes {
        return Err(Error::ByteSizeMismatch {
            name: Name::new(info.name),
            expected: info.size_bytes as u64,
            got: len as u64,
        });
    }
    Ok(())
}

/// `T` must be the tensor's element type and `count` its element count.
fn check_typed<T: Element>(info: &TensorInfo<'_>, count: usize) -> Result<()> {
    if T::DTYPE != info.dtype {
        return Err(Error::DTypeMismatch {
            name: Name::new(info.name),
            dtype: info.dtype,
            requested: T::DTYPE,
        });
    }
    if count != info.elements {
        return Err(Error::SizeMismatch {
            name: Name::new(info.name),
            expected: info.elements as u64,
            got: count as u64,
        });
    }
    Ok(())
}
