/* fma_peak.c: one core's f32 multiply-add peak, the yardstick of scripts/bench.py's "% of peak" column.
 *
 *   cc -O2 fma_peak.c -o fma_peak && ./fma_peak [SECONDS_PER_WIDTH]
 *
 * For each vector width the CPU supports (checked with __builtin_cpu_supports; the others print "not supported"),
 * a loop of independent accumulator chains acc = acc * a + b runs on one thread: enough chains that every FMA unit
 * stays busy whatever the FMA latency (4-5 cycles, 2 units: at least 10 chains in flight). Each width is compiled
 * for its instruction set with __attribute__((target(...))), so the file needs no -m flags and the binary runs on
 * any x86-64. Prints one line per width,
 *   xmm: 70.1 GFLOP/s (FMA, 4 lanes, 12 chains)
 *   ymm: 140.3 GFLOP/s (AVX2+FMA, 8 lanes, 12 chains)
 *   zmm: 280.5 GFLOP/s (AVX-512F, 16 lanes, 24 chains)
 * counting an FMA as 2 FLOPs per lane (SSE2 without FMA: a mul and an add, 1 FLOP each); the best of five
 * timed blocks after a warm-up block (AVX-512 may take a moment to reach its frequency). Exit 0. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Fully unrolled inner loops keep every accumulator in its own register. */
#define UNROLL _Pragma("GCC unroll 32")

/* Keeps the sums observable, so the compiler cannot drop the loops. */
static volatile float sink;

/* Each kernel runs `iters` iterations of `chains` independent vector FMAs and returns the FLOPs done. a < 1 and a
 * small b keep every accumulator near b / (1 - a): no overflow, no denormals. */
#define CHAINS_XMM 12
#define CHAINS_YMM 12
#define CHAINS_ZMM 24

static double xmm_sse2(long iters) {
  __m128 acc[CHAINS_XMM];
  for (int c = 0; c < CHAINS_XMM; c++) acc[c] = _mm_set1_ps(1.0f + c);
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-6f);
  for (long i = 0; i < iters; i++)
    UNROLL for (int c = 0; c < CHAINS_XMM; c++) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], a), b);
  __m128 s = acc[0];
  for (int c = 1; c < CHAINS_XMM; c++) s = _mm_add_ps(s, acc[c]);
  sink = _mm_cvtss_f32(s);
  return 2.0 * 4 * CHAINS_XMM * (double)iters;
}

__attribute__((target("fma"))) static double xmm_fma(long iters) {
  __m128 acc[CHAINS_XMM];
  for (int c = 0; c < CHAINS_XMM; c++) acc[c] = _mm_set1_ps(1.0f + c);
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-6f);
  for (long i = 0; i < iters; i++)
    UNROLL for (int c = 0; c < CHAINS_XMM; c++) acc[c] = _mm_fmadd_ps(acc[c], a, b);
  __m128 s = acc[0];
  for (int c = 1; c < CHAINS_XMM; c++) s = _mm_add_ps(s, acc[c]);
  sink = _mm_cvtss_f32(s);
  return 2.0 * 4 * CHAINS_XMM * (double)iters;
}

__attribute__((target("avx2,fma"))) static double ymm_fma(long iters) {
  __m256 acc[CHAINS_YMM];
  for (int c = 0; c < CHAINS_YMM; c++) acc[c] = _mm256_set1_ps(1.0f + c);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (long i = 0; i < iters; i++)
    UNROLL for (int c = 0; c < CHAINS_YMM; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 s = acc[0];
  for (int c = 1; c < CHAINS_YMM; c++) s = _mm256_add_ps(s, acc[c]);
  sink = _mm256_cvtss_f32(s);
  return 2.0 * 8 * CHAINS_YMM * (double)iters;
}

__attribute__((target("avx512f"))) static double zmm_fma(long iters) {
  __m512 acc[CHAINS_ZMM];
  for (int c = 0; c < CHAINS_ZMM; c++) acc[c] = _mm512_set1_ps(1.0f + c);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (long i = 0; i < iters; i++)
    UNROLL for (int c = 0; c < CHAINS_ZMM; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < CHAINS_ZMM; c++) s = _mm512_add_ps(s, acc[c]);
  sink = _mm512_reduce_add_ps(s);
  return 2.0 * 16 * CHAINS_ZMM * (double)iters;
}

/* GFLOP/s of kernel: iterations scaled so a block lasts about seconds / 6; best of five blocks after a warm-up. */
static double measure(double (*kernel)(long), double seconds) {
  long iters = 1 << 16;
  for (;;) { /* calibrate */
    double t0 = now();
    kernel(iters);
    double dt = now() - t0;
    if (dt > 0.01 || iters > (1L << 40)) {
      iters = (long)(iters * (seconds / 6) / (dt > 1e-9 ? dt : 1e-9)) + 1;
      break;
    }
    iters *= 4;
  }
  kernel(iters); /* warm-up */
  double best = 0;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    double flops = kernel(iters);
    double g = flops / (now() - t0) / 1e9;
    if (g > best) best = g;
  }
  return best;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.3;
  if (seconds <= 0) seconds = 0.3;
  __builtin_cpu_init();
  int fma = __builtin_cpu_supports("fma"), avx2 = __builtin_cpu_supports("avx2");
  int avx512f = __builtin_cpu_supports("avx512f");
  if (fma)
    printf("xmm: %.1f GFLOP/s (FMA, 4 lanes, %d chains)\n", measure(xmm_fma, seconds), CHAINS_XMM);
  else
    printf("xmm: %.1f GFLOP/s (SSE2 mul+add, 4 lanes, %d chains)\n", measure(xmm_sse2, seconds), CHAINS_XMM);
  if (avx2 && fma)
    printf("ymm: %.1f GFLOP/s (AVX2+FMA, 8 lanes, %d chains)\n", measure(ymm_fma, seconds), CHAINS_YMM);
  else
    printf("ymm: not supported (needs avx2 and fma)\n");
  if (avx512f)
    printf("zmm: %.1f GFLOP/s (AVX-512F, 16 lanes, %d chains)\n", measure(zmm_fma, seconds), CHAINS_ZMM);
  else
    printf("zmm: not supported (needs avx512f)\n");
  return 0;
}
