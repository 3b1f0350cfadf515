/* classify.c: classifies PNG photos with the EfficientNet-Lite0 bundle `effnet` (effnet.o + effnet.weights).
 * Links only effnet.o and libpng.
 *
 * For each PNG: decode to 8-bit RGB (palette, gray, 16-bit, alpha and interlacing handled by libpng
 * transforms), resize so the shorter side is 256 (bilinear; antialiased like PIL when shrinking), centre-crop
 * 224x224, map each channel value p to (p - 127) / 128 (TensorFlow's preprocessing for the Lite models), write
 * NCHW floats at the bundle's input, run the bundle once to warm up and then --runs times (median latency),
 * softmax the logits and print the top 5.
 *
 * usage: classify [--weights effnet.weights] [--labels imagenet_classes.txt] [--runs N] [--dump FILE] IMAGE.png...
 *
 * --dump FILE writes, for each image in command-line order, the input tensor (1x3x224x224 f32) followed by the
 * logits (1x1000 f32), raw little-endian, so that check_ort.py can rerun exactly the same inputs in onnxruntime.
 * Every error prints a message on stderr and exits with status 1. */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "effnet.h"

#define SIDE 224
#define RESIZE 256
#define CLASSES 1000
#define MAX_PIXELS (100u * 1000u * 1000u) /* refuse absurd PNG dimensions */
#define MAX_RUNS 100

_Static_assert(EFFNET_INPUT_SIZE == 3 * SIDE * SIDE, "the bundle's input must be 1x3x224x224");
_Static_assert(EFFNET_LOGITS_SIZE == CLASSES, "the bundle's output must be 1x1000");

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("classify: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory (%zu bytes)", n);
  return p;
}

static uint8_t *area(uint64_t size, uint64_t align) {
  void *p = NULL;
  if (posix_memalign(&p, align, size ? size : align) != 0) die("out of memory (%llu bytes)", (unsigned long long)size);
  return p;
}

/* ---- weights ----------------------------------------------------------------------------------------------- */

/* The bundle's weights checksum (docs/bundle-format.md): FNV-1a 64 in four lanes over 8-byte little-endian words
   (word i to lane i % 4, a last partial word zero-padded), then byte-wise FNV-1a 64 over the four lanes and the
   length in bytes. */
static uint64_t fnv_bytes(uint64_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
static uint64_t checksum64(const uint8_t *p, size_t n) {
  uint64_t lane[4], basis = 0xcbf29ce484222325ULL;
  for (int j = 0; j < 4; j++) lane[j] = basis;
  for (size_t i = 0; 8 * i < n; i++) {
    uint64_t w = 0;
    for (size_t b = 0; b < 8 && 8 * i + b < n; b++) w |= (uint64_t)p[8 * i + b] << (8 * b);
    lane[i % 4] = (lane[i % 4] ^ w) * 0x100000001b3ULL;
  }
  uint8_t tail[40];
  for (int j = 0; j < 5; j++) {
    uint64_t v = j < 4 ? lane[j] : (uint64_t)n;
    for (int b = 0; b < 8; b++) tail[8 * j + b] = (uint8_t)(v >> (8 * b));
  }
  return fnv_bytes(basis, tail, sizeof tail);
}

static void load_weights(const char *path, uint8_t *dst) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open weights %s: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) die("cannot seek in %s: %s", path, strerror(errno));
  long size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) die("cannot seek in %s: %s", path, strerror(errno));
  if ((uint64_t)size != EFFNET_CONSTANT_MEM_SIZE)
    die("%s has %ld bytes, the effnet bundle needs %llu (a weights file from another compile?)", path, size,
        (unsigned long long)EFFNET_CONSTANT_MEM_SIZE);
  if (fread(dst, 1, (size_t)size, f) != (size_t)size) die("short read from %s", path);
  fclose(f);
  uint64_t h = checksum64(dst, (size_t)size);
  if (h != EFFNET_WEIGHTS_CHECKSUM)
    die("%s does not belong to this effnet bundle (checksum 0x%016llx, the header says 0x%016llx)", path,
        (unsigned long long)h, (unsigned long long)EFFNET_WEIGHTS_CHECKSUM);
}

/* ---- labels ------------------------------------------------------------------------------------------------ */

static char **load_labels(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) die("cannot open labels %s: %s", path, strerror(errno));
  char **v = xmalloc(sizeof(char *) * CLASSES), line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\r\n");
    if (line[len] == 0 && !feof(f)) die("%s: line %d is too long", path, n + 1);
    line[len] = 0;
    if (n == CLASSES) die("%s has more than %d lines (one class name per line expected)", path, CLASSES);
    v[n] = xmalloc(len + 1);
    memcpy(v[n++], line, len + 1);
  }
  fclose(f);
  if (n != CLASSES) die("%s has %d lines, %d class names expected", path, n, CLASSES);
  return v;
}

/* ---- PNG --------------------------------------------------------------------------------------------------- */

static void png_error_fn(png_structp png, png_const_charp msg) {
  fprintf(stderr, "classify: error: %s: corrupt or unsupported PNG (libpng: %s)\n", (const char *)png_get_error_ptr(png),
          msg);
  exit(1);
}

static void png_warning_fn(png_structp png, png_const_charp msg) { /* e.g. "iCCP: known incorrect sRGB profile" */
  (void)png;
  (void)msg;
}

/* Decodes a PNG into 8-bit RGB, row-major. */
static uint8_t *load_png(const char *path, int *w, int *h) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open image %s: %s", path, strerror(errno));
  uint8_t sig[8];
  if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8)) die("%s is not a PNG file", path);
  /* libpng errors end the program in png_error_fn (nothing to unwind), warnings are ignored */
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, (png_voidp)path, png_error_fn, png_warning_fn);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) die("libpng initialisation failed");
  png_init_io(png, f);
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  uint32_t pw = png_get_image_width(png, info), ph = png_get_image_height(png, info);
  if (pw == 0 || ph == 0 || (uint64_t)pw * ph > MAX_PIXELS)
    die("%s: %ux%u pixels is not a size this program accepts", path, pw, ph);
  png_set_expand(png);      /* palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha */
  png_set_scale_16(png);    /* 16-bit -> 8-bit */
  png_set_strip_alpha(png); /* drop alpha (as PIL's convert("RGB") does) */
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  size_t stride = png_get_rowbytes(png, info);
  if (stride != (size_t)pw * 3) die("%s: unexpected row layout after conversion to RGB", path);
  uint8_t *rgb = xmalloc(stride * ph);
  png_bytep *rows = xmalloc(sizeof(png_bytep) * ph);
  for (uint32_t y = 0; y < ph; y++) rows[y] = rgb + (size_t)y * stride;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  fclose(f);
  *w = (int)pw;
  *h = (int)ph;
  return rgb;
}

/* ---- preprocessing ----------------------------------------------------------------------------------------- */

/* Resampling weights for one axis: output pixels first..first+n-1 of an in_size -> out_size resize with the
 * triangle (bilinear) filter, widened by the shrink factor when shrinking so every source pixel contributes.
 * For output i: source taps lo[i] .. lo[i]+cnt[i]-1 with weights wt[i*maxtaps + k], summing to 1. */
struct Taps {
  int *lo, *cnt, maxtaps;
  float *wt;
};

static struct Taps make_taps(int in_size, int out_size, int first, int n) {
  struct Taps t;
  double scale = (double)in_size / out_size, support = scale < 1 ? 1 : scale;
  t.maxtaps = (int)ceil(support) * 2 + 1;
  t.lo = xmalloc(sizeof(int) * n);
  t.cnt = xmalloc(sizeof(int) * n);
  t.wt = xmalloc(sizeof(float) * n * t.maxtaps);
  for (int i = 0; i < n; i++) {
    double center = (first + i + 0.5) * scale; /* in source pixel units, pixel k covers [k, k+1) */
    int lo = (int)floor(center - support + 0.5), hi = (int)floor(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in_size) hi = in_size;
    if (hi - lo > t.maxtaps) hi = lo + t.maxtaps;
    float *w = t.wt + (size_t)i * t.maxtaps;
    double sum = 0;
    for (int k = lo; k < hi; k++) {
      double d = fabs((k + 0.5 - center) / support);
      w[k - lo] = (float)(d < 1 ? 1 - d : 0);
      sum += w[k - lo];
    }
    for (int k = 0; k < hi - lo; k++) w[k] = sum > 0 ? (float)(w[k] / sum) : 1.0f / (float)(hi - lo);
    t.lo[i] = lo;
    t.cnt[i] = hi - lo;
  }
  return t;
}

static void free_taps(struct Taps *t) {
  free(t->lo);
  free(t->cnt);
  free(t->wt);
}

/* Shorter side to 256 (bilinear), centre crop 224x224, (p - 127) / 128, NCHW. */
static void preprocess(const uint8_t *rgb, int w, int h, float *out) {
  double s = (double)RESIZE / (w < h ? w : h);
  int rw = w < h ? RESIZE : (int)lround(w * s), rh = w < h ? (int)lround(h * s) : RESIZE;
  if (rw < SIDE) rw = SIDE;
  if (rh < SIDE) rh = SIDE;
  struct Taps tx = make_taps(w, rw, (rw - SIDE) / 2, SIDE), ty = make_taps(h, rh, (rh - SIDE) / 2, SIDE);
  /* horizontal pass over the source rows the vertical pass reads */
  int y0 = ty.lo[0], y1 = ty.lo[SIDE - 1] + ty.cnt[SIDE - 1];
  float *tmp = xmalloc(sizeof(float) * (size_t)(y1 - y0) * SIDE * 3);
  for (int y = y0; y < y1; y++)
    for (int x = 0; x < SIDE; x++) {
      float acc[3] = {0, 0, 0};
      const float *wt = tx.wt + x * tx.maxtaps;
      const uint8_t *p = rgb + ((size_t)y * w + tx.lo[x]) * 3;
      for (int k = 0; k < tx.cnt[x]; k++)
        for (int c = 0; c < 3; c++) acc[c] += wt[k] * p[k * 3 + c];
      for (int c = 0; c < 3; c++) tmp[((size_t)(y - y0) * SIDE + x) * 3 + c] = acc[c];
    }
  for (int y = 0; y < SIDE; y++)
    for (int x = 0; x < SIDE; x++) {
      float acc[3] = {0, 0, 0};
      const float *wt = ty.wt + y * ty.maxtaps;
      for (int k = 0; k < ty.cnt[y]; k++) {
        const float *p = tmp + ((size_t)(ty.lo[y] + k - y0) * SIDE + x) * 3;
        for (int c = 0; c < 3; c++) acc[c] += wt[k] * p[c];
      }
      for (int c = 0; c < 3; c++) out[((size_t)c * SIDE + y) * SIDE + x] = (acc[c] - 127.f) / 128.f;
    }
  free(tmp);
  free_taps(&tx);
  free_taps(&ty);
}

/* ---- main -------------------------------------------------------------------------------------------------- */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--weights effnet.weights] [--labels imagenet_classes.txt] [--runs N] [--dump FILE] "
          "IMAGE.png...\n",
          argv0);
  exit(1);
}

int main(int argc, char **argv) {
  const char *wpath = "effnet.weights", *lpath = NULL, *dpath = NULL;
  int runs = 5, first = 1;
  for (; first < argc && strncmp(argv[first], "--", 2) == 0; first++) {
    const char *opt = argv[first];
    if (strcmp(opt, "--") == 0) {
      first++;
      break;
    }
    if (first + 1 >= argc) usage(argv[0]);
    const char *val = argv[++first];
    if (strcmp(opt, "--weights") == 0) {
      wpath = val;
    } else if (strcmp(opt, "--labels") == 0) {
      lpath = val;
    } else if (strcmp(opt, "--dump") == 0) {
      dpath = val;
    } else if (strcmp(opt, "--runs") == 0) {
      char *end;
      long r = strtol(val, &end, 10);
      if (*end || r < 1 || r > MAX_RUNS) die("--runs must be 1..%d, got '%s'", MAX_RUNS, val);
      runs = (int)r;
    } else {
      fprintf(stderr, "classify: error: unknown option %s\n", opt);
      usage(argv[0]);
    }
  }
  if (first >= argc) usage(argv[0]);

  if (!effnet_cpu_supported())
    die("this CPU lacks an instruction-set feature the effnet bundle was compiled for (see effnet.h); recompile "
        "with a lower --cpu");
  const struct BundleConfig *cfg = &effnet_config;
  if (cfg->numInputs != 1 || cfg->numOutputs != 1 || cfg->constantWeightVarsMemSize != EFFNET_CONSTANT_MEM_SIZE)
    die("effnet_config does not match effnet.h");
  uint8_t *cw = area(EFFNET_CONSTANT_MEM_SIZE, EFFNET_MEM_ALIGN);
  uint8_t *mw = area(EFFNET_MUTABLE_MEM_SIZE, EFFNET_MEM_ALIGN);
  uint8_t *act = area(EFFNET_ACTIVATIONS_MEM_SIZE, EFFNET_MEM_ALIGN);
  load_weights(wpath, cw);
  char **labels = lpath ? load_labels(lpath) : NULL;
  FILE *dump = NULL;
  if (dpath && !(dump = fopen(dpath, "wb"))) die("cannot create %s: %s", dpath, strerror(errno));

  float *input = (float *)(mw + EFFNET_INPUT_OFFSET);
  const float *logits = (const float *)(mw + EFFNET_LOGITS_OFFSET);
  for (int i = first; i < argc; i++) {
    int w, h;
    uint8_t *rgb = load_png(argv[i], &w, &h);
    preprocess(rgb, w, h, input);
    free(rgb);

    if (effnet(cw, mw, act) != 0) die("the bundle failed on %s", argv[i]); /* warm-up: caches, page faults */
    double ms[MAX_RUNS];
    for (int r = 0; r < runs; r++) {
      double t0 = now_ms();
      if (effnet(cw, mw, act) != 0) die("the bundle failed on %s", argv[i]);
      ms[r] = now_ms() - t0;
    }
    qsort(ms, (size_t)runs, sizeof ms[0], cmp_double);
    double median = runs % 2 ? ms[runs / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2;

    double mx = logits[0], sum = 0, p[CLASSES];
    for (int c = 1; c < CLASSES; c++) mx = logits[c] > mx ? logits[c] : mx;
    for (int c = 0; c < CLASSES; c++) sum += p[c] = exp(logits[c] - mx);
    int top[5];
    for (int k = 0; k < 5; k++) {
      int best = -1;
      for (int c = 0; c < CLASSES; c++) {
        int taken = 0;
        for (int j = 0; j < k; j++) taken |= top[j] == c;
        if (!taken && (best < 0 || p[c] > p[best])) best = c;
      }
      top[k] = best;
    }
    printf("%s (%dx%d)\n", argv[i], w, h);
    for (int k = 0; k < 5; k++) {
      if (labels)
        printf("  %.3f  %s\n", p[top[k]] / sum, labels[top[k]]);
      else
        printf("  %.3f  class %d\n", p[top[k]] / sum, top[k]);
    }
    printf("  latency %.2f ms (median of %d run%s)\n", median, runs, runs == 1 ? "" : "s");
    fflush(stdout);
    if (dump && (fwrite(input, sizeof(float), EFFNET_INPUT_SIZE, dump) != EFFNET_INPUT_SIZE ||
                 fwrite(logits, sizeof(float), EFFNET_LOGITS_SIZE, dump) != EFFNET_LOGITS_SIZE))
      die("cannot write %s: %s", dpath, strerror(errno));
  }
  if (dump && fclose(dump) != 0) die("cannot write %s: %s", dpath, strerror(errno));
  free(cw);
  free(mw);
  free(act);
  return 0;
}
