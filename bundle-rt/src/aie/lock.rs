//! AIE-ML semaphore locks (docs/aie-ml-facts.md §1c): 6-bit unsigned values, 16 per shim and
//! core tile and 64 per memory tile, all 0 at reset. An acquire with a negative value `-v` waits
//! until the lock is at least `v` and subtracts `v`; with a value `v ≥ 0` it waits until the lock
//! equals `v` and leaves it. A release adds its signed value. A release that would leave the 0..=63
//! range sets a sticky overflow or underflow bit on hardware; here it is an error
//! ([`LockFault`]), since no correct program does it.

/// Largest lock value.
pub const LOCK_MAX: u8 = 63;

/// What an acquire did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The condition held; the lock was updated.
    Done,
    /// The condition does not hold yet: the requester waits.
    Blocked,
}

/// A release that would leave the lock's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockFault {
    /// The lock's value before the release.
    pub value: u8,
    /// The signed amount released.
    pub delta: i8,
}

/// The locks of one tile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locks<const N: usize> {
    values: [u8; N],
}

impl<const N: usize> Default for Locks<N> {
    fn default() -> Self {
        Locks { values: [0; N] }
    }
}

impl<const N: usize> Locks<N> {
    /// Lock `id`'s value; `None` past the tile's locks.
    pub fn get(&self, id: usize) -> Option<u8> {
        self.values.get(id).copied()
    }

    /// Sets lock `id` (a write to its value register: the low 6 bits); `false` past the locks.
    pub fn set(&mut self, id: usize, value: u32) -> bool {
        match self.values.get_mut(id) {
            Some(v) => {
                *v = (value & u32::from(LOCK_MAX)) as u8;
                true
            }
            None => false,
        }
    }

    /// Acquire lock `id` with the BD's signed `value`; `None` past the locks.
    pub fn acquire(&mut self, id: usize, value: i8) -> Option<Acquire> {
        let v = self.values.get_mut(id)?;
        let need = value.unsigned_abs();
        Some(if value < 0 {
            if *v >= need {
                *v -= need;
                Acquire::Done
            } else {
                Acquire::Blocked
            }
        } else if *v == need {
            Acquire::Done
        } else {
            Acquire::Blocked
        })
    }

    /// Release lock `id` by adding `delta`; `None` past the locks.
    pub fn release(&mut self, id: usize, delta: i8) -> Option<Result<(), LockFault>> {
        let v = self.values.get_mut(id)?;
        let next = i16::from(*v) + i16::from(delta);
        Some(if (0..=i16::from(LOCK_MAX)).contains(&next) {
            *v = next as u8;
            Ok(())
        } else {
            Err(LockFault { value: *v, delta })
        })
    }
}
