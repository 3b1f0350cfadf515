//! Format constants the loader, the recipe runner and the NPU decoder share: the transaction generations, the
//! instruction buffer's header and opcode as DynamicDispatch passes them, and the op-argument limit of the run
//! path. A leaf: it imports nothing.

/// aie-rt's device generation of the first Ryzen AI NPUs (`XAIE_DEV_GEN_AIE2IPU`: Phoenix, Hawk Point; NPU1).
pub const TXN_GEN_AIE2IPU: u8 = 3;
/// aie-rt's device generation of the second (`XAIE_DEV_GEN_AIE2P`: Strix, Krackan; NPU2).
pub const TXN_GEN_AIE2P: u8 = 4;
/// Every device generation byte a transaction header may carry: the ones `npu`'s decoder reads. An NPU target
/// description (bundlec's `--npu FILE`) must name one of these.
pub const TXN_GENERATIONS: &[u8] = &[TXN_GEN_AIE2IPU, TXN_GEN_AIE2P];
/// The XRT DPU kernel's opcode (kernel argument 0) for an instruction buffer that holds an aie-rt v0.1
/// transaction, as DynamicDispatch passes it.
pub const NPU_OPCODE_TXN: u64 = 2;
/// Bytes before the transaction in DynamicDispatch's instruction buffer (kernel argument 1): `u32 0`, then
/// `u32` the transaction's bytes + 8. Kernel argument 2 is the whole buffer's size in 32-bit words.
pub const NPU_INSTR_HEADER_BYTES: usize = 8;

/// The most arguments one op may take when run through `Instance::run_ops` or the engine: the
/// argument array is built on the stack with this capacity, so the run path never allocates.
pub const MAX_OP_ARGS: usize = 64;
