//! The store and load masks of the row kernels' tails: AVX-512 `k` masks of a row's last columns or of a 16-lane
//! block, and the AVX2 lane masks built by comparing a count with a lane-index table.

use iced_x86::code_asm::{
    cl, eax, ecx, k1, k3, k5, ptr, r10d, r11d, r9d, rax, rcx, xmm15, AsmRegister32, AsmRegister64,
    AsmRegisterK, AsmRegisterYmm, CodeAssembler, CodeLabel,
};
use iced_x86::IcedError;

/// Column masks of a row's stores: `masks[q]` gets the lanes of store `q` (16 floats each, from column
/// `16·q`) that lie below the `left` columns the row still has (clobbers `rcx`, `rax`).
pub(crate) fn column_masks(
    a: &mut CodeAssembler,
    left: AsmRegister64,
    masks: &[AsmRegisterK],
) -> Result<(), IcedError> {
    for (q, &k) in masks.iter().enumerate() {
        a.mov(rcx, left)?;
        a.sub(rcx, 16 * q as i32)?;
        a.mov(eax, 0u32)?;
        a.cmovl(rcx, rax)?;
        let mut ok = a.create_label();
        a.mov(eax, 16u32)?;
        a.cmp(rcx, rax)?;
        a.jbe(ok)?;
        a.mov(rcx, rax)?;
        a.set_label(&mut ok)?;
        a.mov(eax, 1u32)?;
        a.shl(eax, cl)?;
        a.dec(eax)?;
        a.kmovw(k, eax)?;
    }
    Ok(())
}

/// `k = (1 << bits) − 1` (bits ≤ 16), through `ecx` and `eax`.
pub(crate) fn low_mask(
    a: &mut CodeAssembler,
    k: AsmRegisterK,
    bits: AsmRegister32,
) -> Result<(), IcedError> {
    a.mov(ecx, bits)?;
    a.mov(eax, 1u32)?;
    a.shl(eax, cl)?;
    a.dec(eax)?;
    a.kmovw(k, eax)
}

/// AVX-512 masks for a row's last `count` (< 16) outputs at `stride` 1 or 2: `k5` the outputs, `k1` the inputs
/// of the first load, `k3` (stride 2) those of the second half: inputs 0 ..= (count − 1)·stride, so no load
/// passes the last one the row needs. Clobbers `eax`, `ecx`, `r9`–`r11`.
pub(crate) fn tail_masks_zmm(
    a: &mut CodeAssembler,
    count: AsmRegister32,
    stride: usize,
) -> Result<(), IcedError> {
    low_mask(a, k5, count)?;
    if stride == 1 {
        return a.kmovw(k1, k5);
    }
    a.lea(r9d, ptr(count + count - 1))?;
    a.mov(r10d, 16u32)?;
    a.mov(r11d, r9d)?;
    a.cmp(r11d, r10d)?;
    a.cmova(r11d, r10d)?;
    low_mask(a, k1, r11d)?;
    a.xor(r10d, r10d)?;
    a.sub(r9d, 16)?;
    a.cmovl(r9d, r10d)?;
    low_mask(a, k3, r9d)
}

/// AVX2 lane masks for a row's last `count` (< 8) outputs at `stride` 1 or 2, each `lane < n` against the lane
/// indices 0..7 at `lanes`: `outs` the outputs, `first` the first load's inputs, `second` (stride 2) the second
/// half's. Clobbers `xmm15` and `r9`.
pub(crate) fn tail_masks_ymm(
    a: &mut CodeAssembler,
    count: AsmRegister32,
    stride: usize,
    lanes: CodeLabel,
    [outs, first, second]: [AsmRegisterYmm; 3],
) -> Result<(), IcedError> {
    let lane_mask = |a: &mut CodeAssembler, dst: AsmRegisterYmm, n: AsmRegister32| {
        a.vmovd(xmm15, n)?;
        a.vpbroadcastd(dst, xmm15)?;
        a.vpcmpgtd(dst, dst, ptr(lanes))
    };
    lane_mask(a, outs, count)?;
    if stride == 1 {
        return a.vmovaps(first, outs);
    }
    a.lea(r9d, ptr(count + count - 1))?;
    lane_mask(a, first, r9d)?;
    a.sub(r9d, 8)?;
    lane_mask(a, second, r9d)
}

/// The AVX2 lane-index table `tail_masks_ymm` compares with (eight u32 0..7), placed at `lanes`.
pub(crate) fn lane_table(a: &mut CodeAssembler, lanes: &mut CodeLabel) -> Result<(), IcedError> {
    a.set_label(lanes)?;
    let idx: Vec<u8> = (0..8u32).flat_map(|i| i.to_le_bytes()).collect();
    a.db(&idx)
}

/// `k = (1 << min(n, 16)) − 1`: the lanes of a 16-lane block with `n` elements left (clobbers `rcx`, `eax`).
pub(crate) fn block_mask(
    a: &mut CodeAssembler,
    k: AsmRegisterK,
    n: AsmRegister64,
) -> Result<(), IcedError> {
    a.mov(rcx, n)?;
    a.mov(eax, 16u32)?;
    a.cmp(rcx, rax)?;
    a.cmova(rcx, rax)?;
    a.mov(eax, 1u32)?;
    a.shl(eax, cl)?;
    a.dec(eax)?;
    a.kmovw(k, eax)
}
