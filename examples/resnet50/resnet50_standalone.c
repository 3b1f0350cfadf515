/* resnet50_standalone.c: the Glow resnet50 example, done right. Links only resnet50.o (a bundlec bundle) and
 * libpng. Allocates the three areas from resnet50_config (posix_memalign to its alignment), loads and checks
 * resnet50.weights, decodes a PNG, preprocesses it as ImageNet ResNet-50 expects (resize the short side to 256
 * with bilinear filtering, center-crop 224x224, scale to [0,1], subtract mean / divide by std per channel, NCHW),
 * runs the model and prints the top-5 classes (index, score, label when a labels file is given) and latency.
 *
 * usage: resnet50_standalone IMAGE.png [resnet50.weights] [labels.txt] */
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resnet50.h"

static void die(const char *msg, const char *arg) {
  fprintf(stderr, "error: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
  exit(1);
}

static uint8_t *area(uint64_t size, uint64_t align) {
  void *p = NULL;
  if (posix_memalign(&p, align, size ? size : align) != 0) die("out of memory", NULL);
  return p;
}

/* Decodes a PNG into 8-bit RGB. */
static uint8_t *load_png(const char *path, int *w, int *h) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open image", path);
  uint8_t sig[8];
  if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8)) die("not a PNG file", path);
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (!png || !info) die("libpng init failed", NULL);
  if (setjmp(png_jmpbuf(png))) die("corrupt PNG", path);
  png_init_io(png, f);
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_read_update_info(png, info);
  *w = (int)png_get_image_width(png, info);
  *h = (int)png_get_image_height(png, info);
  size_t stride = png_get_rowbytes(png, info);
  if (stride != (size_t)*w * 3) die("unexpected PNG layout", path);
  uint8_t *rgb = malloc(stride * (size_t)*h);
  png_bytep *rows = malloc(sizeof(png_bytep) * (size_t)*h);
  if (!rgb || !rows) die("out of memory", NULL);
  for (int y = 0; y < *h; y++) rows[y] = rgb + (size_t)y * stride;
  png_read_image(png, rows);
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  fclose(f);
  return rgb;
}

/* Bilinear sample of channel c at (x, y) in source pixel coordinates (half-pixel centers). */
static float sample(const uint8_t *rgb, int w, int h, float x, float y, int c) {
  x = fmaxf(0.f, fminf(x, (float)w - 1));
  y = fmaxf(0.f, fminf(y, (float)h - 1));
  int x0 = (int)x, y0 = (int)y;
  int x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
  float fx = x - x0, fy = y - y0;
  float a = rgb[((size_t)y0 * w + x0) * 3 + c], b = rgb[((size_t)y0 * w + x1) * 3 + c];
  float d = rgb[((size_t)y1 * w + x0) * 3 + c], e = rgb[((size_t)y1 * w + x1) * 3 + c];
  return (a * (1 - fx) + b * fx) * (1 - fy) + (d * (1 - fx) + e * fx) * fy;
}

/* Resize short side to 256, center crop 224, normalise, write NCHW floats. */
static void preprocess(const uint8_t *rgb, int w, int h, float *out) {
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  float scale = 256.f / (float)(w < h ? w : h);
  float rw = w * scale, rh = h * scale;
  float ox = (rw - 224.f) / 2.f, oy = (rh - 224.f) / 2.f;
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < 224; y++)
      for (int x = 0; x < 224; x++) {
        float sx = (x + ox + 0.5f) / scale - 0.5f, sy = (y + oy + 0.5f) / scale - 0.5f;
        float v = sample(rgb, w, h, sx, sy, c) / 255.f;
        out[(c * 224 + y) * 224 + x] = (v - mean[c]) / stdv[c];
      }
}

static char **load_labels(const char *path, int *n) {
  *n = 0;
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) return NULL;
  char **v = NULL, line[1024];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    char **nv = realloc(v, sizeof(char *) * (size_t)(*n + 1));
    if (!nv) die("out of memory", NULL);
    v = nv;
    v[(*n)++] = strdup(line);
  }
  fclose(f);
  return v;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s IMAGE.png [resnet50.weights] [labels.txt]\n", argv[0]);
    return 2;
  }
  const char *wpath = argc > 2 ? argv[2] : "resnet50.weights";
  if (!resnet50_cpu_supported())
    die("this CPU lacks an instruction-set feature the bundle was compiled for (see resnet50.h); recompile with a lower --cpu", NULL);
  const struct BundleConfig *cfg = &resnet50_config;
  const struct SymbolTableEntry *in = &cfg->symbolTable[0], *out = &cfg->symbolTable[cfg->numInputs];
  const struct BundleTensorDesc *ind = &cfg->tensors[0];
  if (cfg->numInputs != 1 || ind->rank != 4 || ind->dims[0] != 1 || ind->dims[1] != 3 || ind->dims[2] != 224 || ind->dims[3] != 224)
    die("the bundle's first input must be 1x3x224x224", in->name);

  uint8_t *cw = area(cfg->constantWeightVarsMemSize, cfg->alignment);
  uint8_t *mw = area(cfg->mutableWeightVarsMemSize, cfg->alignment);
  uint8_t *act = area(cfg->activationsMemSize, cfg->alignment);
  FILE *wf = fopen(wpath, "rb");
  if (!wf) die("cannot open weights", wpath);
  fseek(wf, 0, SEEK_END);
  long wsize = ftell(wf);
  fseek(wf, 0, SEEK_SET);
  if (wsize < 0 || (uint64_t)wsize != cfg->constantWeightVarsMemSize) {
    fprintf(stderr, "error: %s has %ld bytes, the bundle needs %llu\n", wpath, wsize, (unsigned long long)cfg->constantWeightVarsMemSize);
    return 1;
  }
  if (fread(cw, 1, (size_t)wsize, wf) != (size_t)wsize) die("short read", wpath);
  fclose(wf);

  int w, h;
  uint8_t *rgb = load_png(argv[1], &w, &h);
  preprocess(rgb, w, h, (float *)(mw + in->offset));
  free(rgb);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (resnet50(cw, mw, act) != 0) die("inference failed", NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;

  const float *scores = (const float *)(mw + out->offset);
  uint64_t n = out->size;
  int nl;
  char **labels = load_labels(argc > 3 ? argv[3] : NULL, &nl);
  printf("%s (%dx%d) -> %s [%llu classes]\n", argv[1], w, h, out->name, (unsigned long long)n);
  int used[5] = {-1, -1, -1, -1, -1};
  for (int k = 0; k < 5 && k < (int)n; k++) {
    int best = -1;
    for (uint64_t i = 0; i < n; i++) {
      int taken = 0;
      for (int j = 0; j < k; j++) taken |= used[j] == (int)i;
      if (!taken && (best < 0 || scores[i] > scores[best])) best = (int)i;
    }
    used[k] = best;
    printf("  top%d: class %4d  score %10.4f  %s\n", k + 1, best, scores[best], best < nl ? labels[best] : "");
  }
  printf("latency: %.2f ms\n", ms);
  free(cw);
  free(mw);
  free(act);
  return 0;
}
