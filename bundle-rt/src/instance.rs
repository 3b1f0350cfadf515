//! [`Instance`]: one execution context of a [`Bundle`] — its own mutable and activation areas — with
//! typed, checked tensor access by name and the single-thread ways to run the model.
//!
//! Tensor access checks role (input/output), dtype against the [`Element`] type, element count and
//! alignment, and names the tensor in every error. [`Instance::run`] calls the compiled entry
//! function; [`Instance::run_ops`] walks the op table itself (every task of every op, in table order),
//! which is what the entry function does, so both give bitwise identical results. Neither allocates.
//! With `alloc`, `Instance::run_ops_with_device` runs each NPU segment's transaction on a
//! `Device` in place of the segment's layers (the op table otherwise; without a device exactly
//! `run_ops`).

use crate::buf::AreaBuf;
use crate::bundle::Bundle;
use crate::config::{Area, DType, Role, TensorInfo};
use crate::error::{Error, Name};
#[cfg(feature = "alloc")]
use crate::exec::segment;
use crate::exec::{self, Bases};
#[cfg(feature = "alloc")]
use crate::npu::Device;
use crate::profile::OpTiming;
#[cfg(feature = "alloc")]
use crate::profile::SegmentTiming;
use crate::Result;

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element type of a tensor dtype.
///
/// # Safety
/// Implementors are plain data of exactly `DTYPE.size()` bytes, without padding, for which every bit
/// pattern is a valid value (so tensor bytes can be viewed as `[Self]`). Sealed: only this crate
/// implements it. `bool` tensors are read and written as bytes.
pub unsafe trait Element: Copy + sealed::Sealed + 'static {
    /// The dtype this type stands for.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:expr),*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a primitive number: no padding, every bit pattern valid, size == dtype size.
        unsafe impl Element for $t {
            const DTYPE: DType = $d;
        }
    )*};
}
element!(f32 => DType::F32, u8 => DType::U8, i8 => DType::I8, i32 => DType::I32, i64 => DType::I64);

/// Views `bytes` as a slice of `T`.
fn cast<'s, T: Element>(bytes: &'s [u8], info: &TensorInfo<'_>) -> Result<&'s [T]> {
    check_cast::<T>(bytes.as_ptr() as usize, bytes.len(), info)?;
    // SAFETY: checked above: aligned for T and exactly `elements * size_of::<T>()` bytes; every bit
    // pattern is a valid T (Element's contract).
    Ok(unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), info.elements) })
}

/// Views `bytes` as a mutable slice of `T`.
fn cast_mut<'s, T: Element>(bytes: &'s mut [u8], info: &TensorInfo<'_>) -> Result<&'s mut [T]> {
    check_cast::<T>(bytes.as_ptr() as usize, bytes.len(), info)?;
    // SAFETY: as in `cast`, and the borrow is unique.
    Ok(unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), info.elements) })
}

fn check_cast<T: Element>(address: usize, len: usize, info: &TensorInfo<'_>) -> Result<()> {
    if T::DTYPE != info.dtype {
        return Err(Error::DTypeMismatch {
            name: Name::new(info.name),
            dtype: info.dtype,
            requested: T::DTYPE,
        });
    }
    let align = core::mem::align_of::<T>();
    if !address.is_multiple_of(align) {
        return Err(Error::Misaligned {
            what: Name::new(info.name),
            address: address as u64,
            align: align as u64,
        });
    }
    // Validated: size_bytes == elements * dtype size; a failure here would be a runtime bug.
    let expected = info.elements * core::mem::size_of::<T>();
    if len != expected {
        return Err(Error::ByteSizeMismatch {
            name: Name::new(info.name),
            expected: expected as u64,
            got: len as u64,
        });
    }
    Ok(())
}

/// One execution context of a bundle: its own mutable and activation areas.
pub struct Instance<'b> {
    bundle: &'b Bundle<'b>,
    mutable: AreaBuf<'b>,
    activations: AreaBuf<'b>,
}

impl<'b> Instance<'b> {
    /// An instance with owned, zeroed, aligned areas.
    #[cfg(feature = "alloc")]
    pub fn new(bundle: &'b Bundle<'b>) -> Result<Instance<'b>> {
        let align = crate::bundle::area_alignment(bundle.view());
        let mutable = AreaBuf::owned(bundle.area_size(Area::Mutable), align, "mutable area")?;
        let act = AreaBuf::owned(
            bundle.area_size(Area::Activations),
            align,
            "activation area",
        )?;
        Ok(Instance {
            bundle,
            mutable,
            activations: act,
        })
    }

    /// An instance on caller storage: each slice must be `alignment`-aligned and at least as large
    /// as its area ([`Bundle::area_size`]); extra bytes are left alone.
    pub fn new_in(
        bundle: &'b Bundle<'b>,
        mutable: &'b mut [u8],
        activations: &'b mut [u8],
    ) -> Result<Instance<'b>> {
        let align = bundle.alignment();
        let mutable = AreaBuf::borrowed(
            mutable,
            bundle.area_size(Area::Mutable),
            align,
            "mutable area",
        )?;
        let act_len = bundle.area_size(Area::Activations);
        let activations = AreaBuf::borrowed(activations, act_len, align, "activation area")?;
        Ok(Instance {
            bundle,
            mutable,
            activations,
        })
    }

    /// The bundle this instance runs.
    pub fn bundle(&self) -> &'b Bundle<'b> {
        self.bundle
    }

    /// Finds `name`, checking its role when `wanted` is given.
    fn find(&self, name: &str, wanted: Option<Role>) -> Result<TensorInfo<'b>> {
        let info = self.bundle.tensor(name)?;
        match wanted {
            Some(wanted) if info.role != wanted => Err(Error::WrongRole {
                name: Name::new(name),
                role: info.role,
                wanted,
            }),
            _ => Ok(info),
        }
    }

    /// Bytes of a tensor of any role (constants come from the bundle's constant area).
    fn bytes_of(&self, info: &TensorInfo<'_>) -> &[u8] {
        let area = match self.bundle.view().area_of(info.role) {
            Area::Constant => self.bundle.constant_bytes(),
            Area::Activations => self.activations.bytes(),
            Area::Mutable => self.mutable.bytes(),
        };
        // Validated: the range lies inside its area; `get` keeps this panic-free regardless.
        area.get(info.byte_range()).unwrap_or(&[])
    }

    /// The bytes of input `name`, to fill in place.
    pub fn input_bytes_mut(&mut self, name: &str) -> Result<&mut [u8]> {
        let info = self.find(name, Some(Role::Input))?;
        // Inputs live in the mutable (or, with flag 1, the activation) area; the range was validated.
        Ok(self
            .io_bytes_mut()
            .get_mut(info.byte_range())
            .unwrap_or(&mut []))
    }

    /// The area holding inputs and outputs, writable.
    fn io_bytes_mut(&mut self) -> &mut [u8] {
        match self.bundle.view().area_of(Role::Input) {
            Area::Activations => self.activations.bytes_mut(),
            _ => self.mutable.bytes_mut(),
        }
    }

    /// Input `name` as a typed slice, to fill in place.
    pub fn input_mut<T: Element>(&mut self, name: &str) -> Result<&mut [T]> {
        let info = self.find(name, Some(Role::Input))?;
        let bytes = self
            .io_bytes_mut()
            .get_mut(info.byte_range())
            .unwrap_or(&mut []);
        cast_mut(bytes, &info)
    }

    /// Copies `data` into input `name`; checks dtype and element count.
    pub fn set_input<T: Element>(&mut self, name: &str, data: &[T]) -> Result<()> {
        let target = self.input_mut::<T>(name)?;
        if data.len() != target.len() {
            return Err(Error::SizeMismatch {
                name: Name::new(name),
                expected: target.len() as u64,
                got: data.len() as u64,
            });
        }
        target.copy_from_slice(data);
        Ok(())
    }

    /// Copies raw bytes into input `name`; checks the byte count (any dtype, `bool` included).
    pub fn set_input_bytes(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let target = self.input_bytes_mut(name)?;
        if target.len() != data.len() {
            return Err(Error::ByteSizeMismatch {
                name: Name::new(name),
                expected: target.len() as u64,
                got: data.len() as u64,
            });
        }
        target.copy_from_slice(data);
        Ok(())
    }

    /// Output `name` as a typed slice; checks the dtype.
    pub fn output<T: Element>(&self, name: &str) -> Result<&[T]> {
        let info = self.find(name, Some(Role::Output))?;
        cast(self.bytes_of(&info), &info)
    }

    /// The bytes of output `name`.
    pub fn output_bytes(&self, name: &str) -> Result<&[u8]> {
        let info = self.find(name, Some(Role::Output))?;
        Ok(self.bytes_of(&info))
    }

    /// Any tensor (input, output or constant) as a typed slice, read-only.
    pub fn tensor<T: Element>(&self, name: &str) -> Result<&[T]> {
        let info = self.find(name, None)?;
        cast(self.bytes_of(&info), &info)
    }

    /// Any tensor's bytes, read-only.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let info = self.find(name, None)?;
        Ok(self.bytes_of(&info))
    }

    /// The whole mutable area (inputs then outputs; empty for a bundle compiled with `--inputs-in-activations`).
    pub fn mutable_bytes(&self) -> &[u8] {
        self.mutable.bytes()
    }

    /// Runs the model through the compiled entry function on this thread.
    pub fn run(&mut self) -> Result<()> {
        let bases = self.bases();
        let entry = self.bundle.entry();
        // SAFETY: Bundle::new's contract: `entry` is the compiled code for this config; the three
        // bases are the bundle's constant area and this instance's areas, aligned and of the sizes the
        // config declares, and `&mut self` excludes any other access while it runs.
        let code = unsafe { entry(bases.0[0], bases.0[1], bases.0[2]) };
        if code != 0 {
            return Err(Error::EntryFailed {
                model: Name::new(self.bundle.model_name()),
                code,
            });
        }
        Ok(())
    }

    /// Runs the op table on this thread: every task of every op, in table order.
    pub fn run_ops(&mut self) -> Result<()> {
        self.run_ops_inner(None)
    }

    /// As [`Instance::run_ops`], recording each task's start and end (from `clock`, in any unit)
    /// into `timings[op]`; `timings` needs one slot per op.
    pub fn run_ops_profiled(
        &mut self,
        clock: &dyn Fn() -> u64,
        timings: &[OpTiming],
    ) -> Result<()> {
        crate::profile::check_table(self.bundle.view(), timings)?;
        self.run_ops_inner(Some((clock, timings)))
    }

    fn run_ops_inner(&mut self, profiling: exec::Profiling<'_>) -> Result<()> {
        let view = *self.bundle.view();
        exec::check_arg_capacity(&view)?;
        let bases = self.bases();
        // SAFETY: the view is validated and the bases are this bundle's areas; `&mut self` excludes
        // other access; capacity checked above; kernels honour Bundle::new's contract.
        unsafe { exec::run_in_order(&view, 0..view.ops().len(), &bases, profiling, 1) };
        Ok(())
    }

    /// Runs the op table on this thread like [`Instance::run_ops`], except that with a `device`
    /// each NPU segment runs there instead of its layers: when the walk reaches a segment's first
    /// layer, its copy-ins fill the fused `in` staging buffer, `device` runs the transaction, the
    /// copy-outs drain `out`, and the walk goes on after the segment's last layer. Without a device
    /// (or without segments) this is exactly `run_ops`: the fallback ops in the segments' layers
    /// run, bitwise identical. A device error stops the run there (earlier layers have run).
    #[cfg(feature = "alloc")]
    pub fn run_ops_with_device(&mut self, device: Option<&mut dyn Device>) -> Result<()> {
        match device {
            None => self.run_ops_inner(None),
            Some(device) => self.run_ops_on(device, None, &[]),
        }
    }

    /// As [`Instance::run_ops_with_device`], recording each task's start and end (from `clock`)
    /// into `timings[op]` and each segment run (wall time from `clock`, the device's cycles) into
    /// `segments[segment]`; `timings` needs one slot per op and `segments` one per NPU segment.
    #[cfg(feature = "alloc")]
    pub fn run_ops_with_device_profiled(
        &mut self,
        device: Option<&mut dyn Device>,
        clock: &dyn Fn() -> u64,
        timings: &[OpTiming],
        segments: &[SegmentTiming],
    ) -> Result<()> {
        crate::profile::check_table(self.bundle.view(), timings)?;
        crate::profile::check_segment_table(self.bundle.view(), segments)?;
        match device {
            None => self.run_ops_inner(Some((clock, timings))),
            Some(device) => self.run_ops_on(device, Some((clock, timings)), segments),
        }
    }

    /// The layer walk with segments on `device`.
    #[cfg(feature = "alloc")]
    fn run_ops_on(
        &mut self,
        device: &mut dyn Device,
        profiling: exec::Profiling<'_>,
        segments: &[SegmentTiming],
    ) -> Result<()> {
        let view = *self.bundle.view();
        exec::check_arg_capacity(&view)?;
        let bases = self.bases();
        let (mut layer, mut next) = (0usize, 0usize);
        while let Some(l) = view.layers().get(layer) {
            if let Some(seg) = segment::starting_at(&view, &mut next, layer) {
                let start = profiling.map(|(clock, _)| clock());
                let cycles = segment::run(&seg, self.areas(), device)?;
                if let (Some((clock, _)), Some(start)) = (profiling, start) {
                    if let Some(slot) = segments.get(seg.index) {
                        let c = [cycles.instruction, cycles.data, cycles.compute];
                        slot.record(start, clock(), c);
                    }
                }
                layer = seg.layers().end;
                continue;
            }
            let first = l.first_op as usize;
            let ops = first..first + l.num_ops as usize;
            // SAFETY: as in `run_ops_inner`; the segment run above borrowed the areas through
            // `&mut self` and that borrow has ended, so no reference into them is live.
            unsafe { exec::run_in_order(&view, ops, &bases, profiling, 1) };
            layer += 1;
        }
        Ok(())
    }

    /// The three areas as slices, for an NPU segment run: the caller holds `&mut self`, so no
    /// kernel runs and no other reference into the areas is live while they are borrowed.
    #[cfg(feature = "alloc")]
    pub(crate) fn areas(&mut self) -> segment::Areas<'_> {
        segment::Areas {
            constants: self.bundle.constant_bytes(),
            mutable: self.mutable.bytes_mut(),
            activations: self.activations.bytes_mut(),
        }
    }

    /// Base addresses of the three areas; the caller must hold `&mut self` while kernels use them.
    pub(crate) fn bases(&mut self) -> Bases {
        Bases([
            self.bundle.constant_base(),
            self.mutable.base(),
            self.activations.base(),
        ])
    }
}

impl core::fmt::Debug for Instance<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Instance")
            .field("bundle", &self.bundle.model_name())
            .finish()
    }
}

impl<'b> Bundle<'b> {
    /// A new instance with owned, zeroed mutable and activation areas.
    #[cfg(feature = "alloc")]
    pub fn instance(&self) -> Result<Instance<'_>> {
        Instance::new(self)
    }
}
