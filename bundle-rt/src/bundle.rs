//! [`Bundle`]: a validated config, its entry function and its constant area, shared by instances.
//!
//! Making a bundle checks the config ([`ConfigView::new`]), that this CPU has the features its kernels use
//! (`cpuFeatures`, [`crate::cpu`]), then that the weights are exactly
//! `constantWeightVarsMemSize` bytes with the FNV-1a 64 checksum `weightsChecksum`. The constant area
//! is either a 64-aligned copy owned by the bundle (`Bundle::new`, needs `alloc`) or caller storage
//! that already holds the weights image ([`Bundle::new_in`], pure `no_std`). After that the constant
//! area is read-only, so one bundle can serve any number of [instances](crate::Instance) on any threads.

use crate::buf::AreaBuf;
use crate::config::{Area, BundleConfig, ConfigView, EntryFn, TensorInfo};
use crate::error::{Error, Name};
use crate::Result;

/// Alignment of owned areas: the format's 64 bytes, or more if a config asks for it.
#[cfg(feature = "alloc")]
pub(crate) fn area_alignment(view: &ConfigView<'_>) -> usize {
    view.alignment().max(64)
}

/// FNV-1a 64 of `bytes`, byte by byte (the last step of [`checksum64`]).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `weightsChecksum` (format 5): FNV-1a 64 in four lanes over the image's 8-byte little-endian words (word `i`
/// to lane `i % 4`, a last partial word zero-padded; each lane from the offset basis, `h = (h ^ w) · prime`),
/// then byte-wise FNV-1a 64 ([`fnv1a64`]) over the four lanes and the image's length in bytes, nine
/// little-endian `u64`. Four independent multiply chains over words: about 30x the byte-wise hash's speed
/// (ResNet-50's 132 MB image took 0.13 s byte by byte, at every compile and every load), and any change of one
/// word still changes the result (each step is a bijection of the lane).
pub fn checksum64(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut lanes = [0xcbf2_9ce4_8422_2325u64; 4];
    let word = |w: &[u8]| {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        u64::from_le_bytes(b)
    };
    let mut chunks = bytes.chunks_exact(32);
    for c in &mut chunks {
        for (h, w) in lanes.iter_mut().zip(c.chunks_exact(8)) {
            *h = (*h ^ word(w)).wrapping_mul(PRIME);
        }
    }
    for (h, w) in lanes.iter_mut().zip(chunks.remainder().chunks(8)) {
        *h = (*h ^ word(w)).wrapping_mul(PRIME);
    }
    let mut tail = [0u8; 40];
    for (t, h) in tail.chunks_exact_mut(8).zip(lanes) {
        t.copy_from_slice(&h.to_le_bytes());
    }
    tail[32..].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    fnv1a64(&tail)
}

/// Refuses a bundle whose kernels use instruction-set features this CPU lacks.
fn check_cpu(view: &ConfigView<'_>) -> Result<()> {
    let needed = view.raw().cpu_features;
    match crate::cpu::missing(needed) {
        0 => Ok(()),
        missing => Err(Error::CpuFeatures { missing, needed }),
    }
}

/// A loaded model: validated config, entry function and the constant area.
pub struct Bundle<'a> {
    view: ConfigView<'a>,
    entry: EntryFn,
    constants: AreaBuf<'a>,
}

impl<'a> Bundle<'a> {
    /// Checks `config` and `weights` and copies the weights into an owned, aligned constant area.
    ///
    /// # Safety
    /// `config` must satisfy [`ConfigView::new`]'s contract, and `entry` and every op kernel of
    /// `config` must be the compiled code for it: given areas laid out as `config` says, they access
    /// only those areas, never write the constant area, and return; a task `t < numTasks` of an op
    /// touches only the `size` bytes at each argument address and never writes a constant-area
    /// argument (the recipe runner relies on this when it places arguments elsewhere).
    #[cfg(feature = "alloc")]
    pub unsafe fn new(
        config: &'a BundleConfig,
        entry: EntryFn,
        weights: &[u8],
    ) -> Result<Bundle<'a>> {
        // SAFETY: forwarded from the caller.
        let view = unsafe { ConfigView::new(config) }?;
        check_cpu(&view)?;
        check_weights(&view, weights)?;
        let mut constants = AreaBuf::owned(weights.len(), area_alignment(&view), "constant area")?;
        constants.bytes_mut().copy_from_slice(weights);
        Ok(Bundle {
            view,
            entry,
            constants,
        })
    }

    /// Checks `config` and uses `constants`, which must hold exactly the weights image (length
    /// `constantWeightVarsMemSize`, `alignment`-aligned), as the constant area without copying.
    ///
    /// # Safety
    /// `config` must satisfy [`ConfigView::new`]'s contract, and `entry` and every op kernel of
    /// `config` must be the compiled code for it: given areas laid out as `config` says, they access
    /// only those areas, never write the constant area, and return; a task `t < numTasks` of an op
    /// touches only the `size` bytes at each argument address and never writes a constant-area
    /// argument (the recipe runner relies on this when it places arguments elsewhere).
    pub unsafe fn new_in(
        config: &'a BundleConfig,
        entry: EntryFn,
        constants: &'a mut [u8],
    ) -> Result<Bundle<'a>> {
        // SAFETY: forwarded from the caller.
        let view = unsafe { ConfigView::new(config) }?;
        check_cpu(&view)?;
        let expected = view.area_size(Area::Constant);
        if constants.len() != expected {
            return Err(Error::WeightsSize {
                expected: expected as u64,
                got: constants.len() as u64,
            });
        }
        let constants = AreaBuf::borrowed(constants, expected, view.alignment(), "constant area")?;
        check_weights(&view, constants.bytes())?;
        Ok(Bundle {
            view,
            entry,
            constants,
        })
    }

    /// The validated config.
    pub fn view(&self) -> &ConfigView<'a> {
        &self.view
    }

    /// The model name.
    pub fn model_name(&self) -> &'a str {
        self.view.model_name()
    }

    /// The entry function.
    pub fn entry(&self) -> EntryFn {
        self.entry
    }

    /// The model inputs, in ONNX graph order.
    pub fn inputs(&self) -> impl Iterator<Item = TensorInfo<'a>> + '_ {
        self.view.input_range().filter_map(|i| self.view.tensor(i))
    }

    /// The model outputs, in ONNX graph order.
    pub fn outputs(&self) -> impl Iterator<Item = TensorInfo<'a>> + '_ {
        self.view.output_range().filter_map(|i| self.view.tensor(i))
    }

    /// The constants.
    pub fn constants(&self) -> impl Iterator<Item = TensorInfo<'a>> + '_ {
        self.view
            .constant_range()
            .filter_map(|i| self.view.tensor(i))
    }

    /// The tensor called `name`, or [`Error::UnknownTensor`].
    pub fn tensor(&self, name: &str) -> Result<TensorInfo<'a>> {
        self.view.find(name).ok_or(Error::UnknownTensor {
            name: Name::new(name),
        })
    }

    /// Bytes of an area: what [instances](crate::Instance) allocate, or must be given, for it.
    pub fn area_size(&self, area: Area) -> usize {
        self.view.area_size(area)
    }

    /// Required alignment of caller-provided areas.
    pub fn alignment(&self) -> usize {
        self.view.alignment()
    }

    /// The constant area (the weights image).
    pub fn constant_bytes(&self) -> &[u8] {
        self.constants.bytes()
    }

    /// Base of the constant area, for kernels (which never write it).
    pub(crate) fn constant_base(&self) -> *mut u8 {
        self.constants.base()
    }
}

impl core::fmt::Debug for Bundle<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Bundle")
            .field("model", &self.model_name())
            .field("symbols", &self.view.num_symbols())
            .field("ops", &self.view.ops().len())
            .field("layers", &self.view.layers().len())
            .finish()
    }
}

/// Size then checksum of a weights image.
fn check_weights(view: &ConfigView<'_>, weights: &[u8]) -> Result<()> {
    let expected = view.area_size(Area::Constant);
    if weights.len() != expected {
        return Err(Error::WeightsSize {
            expected: expected as u64,
            got: weights.len() as u64,
        });
    }
    let got = checksum64(weights);
    if got != view.weights_checksum() {
        return Err(Error::WeightsChecksum {
            expected: view.weights_checksum(),
            got,
        });
    }
    Ok(())
}
