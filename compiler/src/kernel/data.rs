//! Data-movement kernels' geometry: flat copies and transposes (their coalesced shape and work units).

/// Bytes per work unit of a flat copy.
pub const COPY_CHUNK: usize = 16384;

/// Merges output dims that the input walks as one (d's stride is d+1's stride times d+1's size) and drops dims
/// of size 1: a head split `[1, S, H, D] -> [1, H, S, D]` becomes `[H, S, D]` with contiguous rows of D.
pub fn coalesce_transpose(out_shape: &[usize], in_strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut dims: Vec<(usize, usize)> = Vec::new();
    for (&n, &s) in out_shape.iter().zip(in_strides) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 == s * n => *last = (last.0 * n, s),
            _ => dims.push((n, s)),
        }
    }
    if dims.is_empty() {
        dims.push((1, 1));
    }
    dims.into_iter().unzip()
}

/// The compile-time shape of a 2-D block transpose: `dst[c · ld + r] = src[r · ls + c]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockTranspose {
    /// Source rows (the output's row length).
    pub rows: usize,
    /// Source row length (the output's row count).
    pub cols: usize,
    /// Source row stride (elements).
    pub ls: usize,
    /// Output row stride (elements).
    pub ld: usize,
}
