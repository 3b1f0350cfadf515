/* run_bundle.c: a model-independent C driver for a bundlec bundle. Build with
 *   cc -O2 -DBUNDLE=NAME -I DIR run_bundle.c DIR/NAME.o -o run
 * and run as
 *   ./run NAME.weights in_0.bin ... in_{k-1}.bin out_0.bin ... out_{m-1}.bin
 * (WEIGHTS "-" for a bundle compiled with --embed-weights; with --inputs-in-activations, config flag 1, the inputs
 * and outputs are read and written in the activation area and the inputs are copied in again before each run)
 * It links only NAME.o, reads only NAME_config and NAME.weights, allocates the three areas aligned as the config
 * says, copies raw little-endian inputs in, runs the entry point and writes the raw outputs. Exit code 0 on
 * success; every failure prints what was wrong. BUNDLE_WARMUP_MS, BUNDLE_REPEAT and BUNDLE_POISON: see main. With BUNDLE_PEAK_RSS=1 it prints `peak RSS: N KiB` last (VmHWM of
 * /proc/self/status: this program's own peak, unlike the parent's wait4 ru_maxrss, which on Linux also counts the
 * resident size of the process that forked it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#include STR(BUNDLE.h)

#define CONFIG CAT(BUNDLE, _config)

/* Areas of 2 MiB or more go on 2 MiB boundaries, padded to whole 2 MiB pages, and on Linux are offered to
 * transparent huge pages before memset faults them in, as bundle-rt does for the areas it allocates
 * (bundle-rt/src/buf.rs: kernels reading rows a plane apart otherwise miss the DTLB at every step). */
#define HUGE_PAGE ((uint64_t)2 << 20)
static uint8_t *alloc_area(uint64_t size, uint64_t align) {
  void *p = NULL;
  uint64_t bytes = size ? size : align;
  if (size >= HUGE_PAGE) {
    if (align < HUGE_PAGE) align = HUGE_PAGE;
    bytes = (size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  }
  if (posix_memalign(&p, align, bytes) != 0) {
    fprintf(stderr, "out of memory allocating %llu bytes\n", (unsigned long long)size);
    exit(2);
  }
#ifdef MADV_HUGEPAGE
  if (size >= HUGE_PAGE) madvise(p, bytes, MADV_HUGEPAGE); /* a hint: its failure changes only speed */
#endif
  memset(p, 0, bytes);
  return p;
}

static long read_file(const char *path, uint8_t *dst, uint64_t expect) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if ((uint64_t)n != expect) {
    fprintf(stderr, "%s: %ld bytes, expected %llu\n", path, n, (unsigned long long)expect);
    fclose(f);
    return -1;
  }
  if (fread(dst, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "%s: short read\n", path);
    fclose(f);
    return -1;
  }
  fclose(f);
  return n;
}

/* BUNDLE_PEAK_RSS=1: prints this process's peak resident set size (Linux; nothing where /proc is missing). */
static void print_peak_rss(void) {
  const char *e = getenv("BUNDLE_PEAK_RSS");
  if (!e || strcmp(e, "1") != 0) return;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) printf("peak RSS: %lld KiB\n", atoll(line + 6));
  fclose(f);
}

int main(int argc, char **argv) {
  const struct BundleConfig *c = &CONFIG;
  int nin = (int)c->numInputs, nout = (int)c->numOutputs;
  if (argc != 2 + nin + nout) {
    fprintf(stderr, "usage: %s WEIGHTS IN x%d OUT x%d\n", argv[0], nin, nout);
    return 2;
  }
  if (!CAT(BUNDLE, _cpu_supported)()) {
    fprintf(stderr, "this CPU lacks an instruction-set feature the bundle was compiled for (see its header)\n");
    return 3;
  }
  uint8_t *cw = alloc_area(c->constantWeightVarsMemSize, c->alignment);
  uint8_t *mw = alloc_area(c->mutableWeightVarsMemSize, c->alignment);
  uint8_t *act = alloc_area(c->activationsMemSize, c->alignment);
  /* BUNDLE_POISON=1 fills the activation area with 0xff bytes (f32 NaN) before the first run: a kernel that reads
   * memory no earlier step of the run wrote (a zero it expected, a plane not computed yet) then yields NaN or a
   * wrong value instead of the zero a fresh allocation happens to hold (tests run it with BUNDLE_REPEAT=2, so
   * what a run leaves behind must not change the next one either). */
  if (getenv("BUNDLE_POISON")) memset(act, 0xff, c->activationsMemSize);
  /* WEIGHTS "-": the bundle was compiled with --embed-weights; the entry gets NULL for the constant area. */
  int embedded = strcmp(argv[1], "-") == 0;
  if (!embedded && read_file(argv[1], cw, c->constantWeightVarsMemSize) < 0) return 1;
  /* flags bit 1 (--inputs-in-activations): inputs and outputs live in the activation area. */
  uint8_t *io = (c->flags & 1) ? act : mw;
  for (int i = 0; i < nin; i++) {
    const struct SymbolTableEntry *s = &c->symbolTable[i];
    if (read_file(argv[2 + i], io + s->offset, c->tensors[i].sizeBytes) < 0) return 1;
  }
  /* BUNDLE_WARMUP_MS=t first runs the model untimed, at least once, until t ms have passed (benchmarks: the core
   * reaches its working clock and the caches hold what a run touches, as a peer runtime's session creation and
   * warm-up inferences do). BUNDLE_REPEAT=n then runs it n times and prints every latency. */
  const char *wu = getenv("BUNDLE_WARMUP_MS");
  double warmup_ms = wu ? atof(wu) : 0.0;
  const char *rep = getenv("BUNDLE_REPEAT");
  int repeat = rep ? atoi(rep) : 1;
  if (repeat < 1) repeat = 1;
  struct timespec w0;
  clock_gettime(CLOCK_MONOTONIC, &w0);
  int warming = warmup_ms > 0;
  for (int iter = 0; iter < repeat;) {
    /* A run overwrites inputs that live in the activation area once they are consumed. */
    for (int i = 0; (c->flags & 1) && i < nin; i++) {
      const struct SymbolTableEntry *s = &c->symbolTable[i];
      if (read_file(argv[2 + i], io + s->offset, c->tensors[i].sizeBytes) < 0) return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = BUNDLE(embedded ? NULL : cw, mw, act);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != 0) {
      fprintf(stderr, "bundle returned %d\n", rc);
      return 1;
    }
    if (warming) {
      warming = (t1.tv_sec - w0.tv_sec) * 1e3 + (t1.tv_nsec - w0.tv_nsec) / 1e6 < warmup_ms;
      continue;
    }
    printf("%s: ran in %.3f ms\n", c->modelName, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    iter++;
  }
  for (int o = 0; o < nout; o++) {
    const struct SymbolTableEntry *s = &c->symbolTable[nin + o];
    FILE *f = fopen(argv[2 + nin + o], "wb");
    if (!f || fwrite(io + s->offset, 1, c->tensors[nin + o].sizeBytes, f) != c->tensors[nin + o].sizeBytes) {
      fprintf(stderr, "cannot write %s\n", argv[2 + nin + o]);
      return 1;
    }
    fclose(f);
  }
  print_peak_rss();
  free(cw);
  free(mw);
  free(act);
  return 0;
}
