//! AIE-ML hardware facts as code (no allocation, no features): the DMA buffer-descriptor layouts of
//! the shim, memory and core tiles and the address walk they describe ([`bd`]), and the semaphore
//! locks ([`lock`]). Every layout and rule is cited in `docs/aie-ml-facts.md`. The emulator and
//! `bundlec inspect --txn` share them.

pub mod bd;
pub mod lock;
