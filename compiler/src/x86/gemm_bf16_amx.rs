//! The AMX bf16 GEMM micro-kernel (AMX-TILE + AMX-BF16), the tile twin of `gemm_bf16.rs` with the same
//! `fn(a, b, c, bias, residual)` contract and operands, up to 32 rows: C as 2 x 2 tiles of 16 x 16 f32
//! (`tmm0..3`), two A tiles of 16 bf16 rows x 32 K values (`tmm4..5`, row stride `a_rs`; K padded to a multiple
//! of 32 with zeros by the row converter and the B packing), two B tiles of 16 K pairs x 16 columns read from
//! the `[kp/2][32][2]` panel (row stride 128 bytes: columns 0..15 at byte 0, 16..31 at byte 64). Per 32 K
//! values four tile loads and four `tdpbf16ps`. The tile shape comes from a configuration after the code
//! (`amx.rs`: `ldtilecfg` on entry, `tilerelease` before the epilogue); the sums go to a 4 KiB stack buffer and
//! the epilogue of `gemm_bf16.rs` (scale, column bias, residual, clamp, masked column tail) reads them back
//! row by row.

use super::amx::{close_stack_buffer, tiles_to_stack, C_TILES};
use super::gemm_bf16::Bf16Micro;

pub use super::amx::MR;

/// K values per tile step (a 64-byte A tile row).
pub const K_STEP: usize = 32;

/// Whether the shape fits: 1 to 32 rows and columns, K a multiple of 32, displacements within 32 bits, A in
/// bf16 rows (pairs 4 bytes apart).
pub fn fits(m: &Bf16Micro) -> bool {
    super::gemm_bf16::fits_rows(m, MR) && (2 * m.pairs).is_multiple_of(K_STEP) && m.a_ps == 4
}

/// Assembles the micro-kernel; `Err` for a shape out of range (a bundlec bug).
pub fn assemble(m: &Bf16Micro) -> Result<Vec<u8>, String> {
    if !fits(m) {
        return Err(format!("AMX bf16 micro-kernel shape out of range: {m:?}"));
    }
    super::amx::assemble(m.rows, |a| {
        for &c in C_TILES.iter().take(super::amx::used(m.rows)) {
            a.tilezero(c)?;
        }
        let steps = 2 * m.pairs / K_STEP;
        super::amx::k_loop(a, m.rows, m.a_rs, steps, |a, c, x, y| a.tdpbf16ps(c, x, y))?;
        tiles_to_stack(a, m.rows)?;
        super::gemm_bf16::epilogue(a, m, true)?;
        close_stack_buffer(a)
    })
}
