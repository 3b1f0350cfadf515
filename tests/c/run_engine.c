/* run_engine.c: the model-independent C driver of run_bundle.c, but running the bundle through bundle-rt's C API
 * (brt_bundle_create, brt_instance_create, brt_set_input, brt_run, brt_get_output) so that it can use the BSP
 * engine's threads. Build with
 *   cc -O2 -DBUNDLE=NAME -I bundle-rt/include -I DIR run_engine.c DIR/NAME.o target/release/libbundle_rt_capi.a \
 *      -lpthread -ldl -lm -o run
 * (the library comes from `cargo build -p bundle-rt-capi --release`) and run as
 *   ./run NAME.weights in_0.bin ... in_{k-1}.bin out_0.bin ... out_{m-1}.bin
 * Environment:
 *   BUNDLE_THREADS=n  brt_run(instance, n) (default 2): 1 calls the entry function, n > 1 runs the op table on the
 *                     engine with n threads (this one included)
 *   BUNDLE_WARMUP=n   n untimed runs first (default 0): the first brt_run with n > 1 threads starts the workers,
 *                     and the instance's zeroed areas are only faulted in by the first run
 *   BUNDLE_WARMUP_MS=t then more untimed runs until t ms have passed since the warm-up began (benchmarks: the core
 *                     reaches its working clock, as a peer runtime's session creation and warm-ups keep it busy)
 *   BUNDLE_REPEAT=n   n timed runs (default 1), each printed as `MODEL: ran in X ms` (only brt_run is timed)
 *   BUNDLE_PEAK_RSS=1 prints `peak RSS: N KiB` last (VmHWM of /proc/self/status, as run_bundle.c does)
 * Inputs are raw little-endian tensors in the order of the bundle's symbol table, set by their ONNX names; the
 * outputs of the last run are written raw. Exit 0 on success, 1 on any failure (with brt_error_string and
 * brt_last_error for a failed call), 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bundle_rt.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#include STR(BUNDLE.h)

#define CONFIG CAT(BUNDLE, _config)

/* Exits 1 on a failed call, saying which call, what the status means and the runtime's message. */
static void check(brt_status status, const char *what) {
  if (status != BRT_OK) {
    fprintf(stderr, "%s failed: %s (%d)\n  %s\n", what, brt_error_string(status), (int)status, brt_last_error());
    exit(1);
  }
}

/* Reads a whole file into a new buffer; when expect is not (uint64_t)-1 the file must have exactly that size. */
static uint8_t *read_file(const char *path, uint64_t expect, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (n < 0 || (expect != (uint64_t)-1 && (uint64_t)n != expect)) {
    fprintf(stderr, "%s: %ld bytes, expected %llu\n", path, n, (unsigned long long)expect);
    exit(1);
  }
  uint8_t *data = malloc(n ? (size_t)n : 1);
  if (!data) {
    fprintf(stderr, "out of memory reading %s\n", path);
    exit(1);
  }
  if (fread(data, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "%s: short read\n", path);
    exit(1);
  }
  fclose(f);
  *len = (size_t)n;
  return data;
}

static int env_int(const char *name, int dflt, int min) {
  const char *s = getenv(name);
  int v = s ? atoi(s) : dflt;
  return v < min ? min : v;
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
  int threads = env_int("BUNDLE_THREADS", 2, 1), warmup = env_int("BUNDLE_WARMUP", 0, 0);
  int repeat = env_int("BUNDLE_REPEAT", 1, 1);

  /* The bundle checks the weights' size and checksum and the CPU features, and copies the weights. */
  size_t len;
  uint8_t *weights = read_file(argv[1], (uint64_t)-1, &len);
  brt_bundle *bundle = NULL;
  check(brt_bundle_create(c, BUNDLE, weights, len, &bundle), "brt_bundle_create");
  free(weights);
  brt_instance *inst = NULL;
  check(brt_instance_create(bundle, &inst), "brt_instance_create");
  for (int i = 0; i < nin; i++) {
    size_t n;
    uint8_t *data = read_file(argv[2 + i], c->tensors[i].sizeBytes, &n);
    check(brt_set_input(inst, c->symbolTable[i].name, data, n), "brt_set_input");
    free(data);
  }

  struct timespec w0;
  clock_gettime(CLOCK_MONOTONIC, &w0);
  for (int iter = 0; iter < warmup; iter++) check(brt_run(inst, threads), "brt_run (warm-up)");
  /* BUNDLE_WARMUP_MS=t: more untimed runs until t ms have passed since the first warm-up run began. */
  const char *wu = getenv("BUNDLE_WARMUP_MS");
  double warmup_ms = wu ? atof(wu) : 0.0;
  for (;;) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - w0.tv_sec) * 1e3 + (t.tv_nsec - w0.tv_nsec) / 1e6 >= warmup_ms) break;
    check(brt_run(inst, threads), "brt_run (warm-up)");
  }
  for (int iter = 0; iter < repeat; iter++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    brt_status st = brt_run(inst, threads);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    check(st, "brt_run");
    printf("%s: ran in %.3f ms\n", c->modelName, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
  }

  for (int o = 0; o < nout; o++) {
    uint64_t bytes = c->tensors[nin + o].sizeBytes;
    uint8_t *data = malloc(bytes ? bytes : 1);
    if (!data) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
    check(brt_get_output(inst, c->symbolTable[nin + o].name, data, bytes), "brt_get_output");
    FILE *f = fopen(argv[2 + nin + o], "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
      fprintf(stderr, "cannot write %s\n", argv[2 + nin + o]);
      return 1;
    }
    free(data);
  }
  print_peak_rss();
  brt_instance_destroy(inst);
  brt_bundle_destroy(bundle);
  return 0;
}
