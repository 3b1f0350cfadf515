/* main.c: runs the small_cnn bundle three ways and checks that they agree bitwise.
 *
 *   1. the plain entry function small_cnn() on areas allocated here (no runtime at all);
 *   2. bundle-rt's C API: brt_bundle_create + brt_instance_create + brt_run with 2 threads
 *      (the BSP engine);
 *   3. bundle-rt's recipe runner on small_cnn.recipe.json: brt_runner_create, bind_input,
 *      bind_output, execute, wait.
 *
 * Usage: main small_cnn.weights small_cnn.recipe.json
 * Exits 0 when all three outputs are identical, 1 otherwise (or on any error). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_rt.h"
#include "small_cnn.h"

/* Reads a whole file; adds a NUL so that text files are C strings. */
static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = malloc((size_t)size + 1);
  if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  data[size] = 0;
  *len = (size_t)size;
  return data;
}

/* Fails on a non-zero status, printing the code's meaning and the detailed message. */
static void check(brt_status status, const char *what) {
  if (status != BRT_OK) {
    fprintf(stderr, "%s failed: %s (%d)\n  %s\n", what, brt_error_string(status), (int)status,
            brt_last_error());
    exit(1);
  }
}

static void *aligned(size_t bytes) {
  /* aligned_alloc needs a size that is a multiple of the alignment. */
  size_t rounded = (bytes + SMALL_CNN_MEM_ALIGN - 1) / SMALL_CNN_MEM_ALIGN * SMALL_CNN_MEM_ALIGN;
  void *p = aligned_alloc(SMALL_CNN_MEM_ALIGN, rounded ? rounded : SMALL_CNN_MEM_ALIGN);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0, rounded);
  return p;
}

static void print_output(const char *label, const float *y) {
  printf("%s\n", label);
  for (int row = 0; row < 2; row++) {
    printf("  ");
    for (int i = 0; i < SMALL_CNN_Y_SIZE / 2; i++) printf(" %.6f", y[row * (SMALL_CNN_Y_SIZE / 2) + i]);
    printf("\n");
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s small_cnn.weights small_cnn.recipe.json\n", argv[0]);
    return 1;
  }
  size_t weights_len, recipe_len;
  uint8_t *weights = read_file(argv[1], &weights_len);
  char *recipe = (char *)read_file(argv[2], &recipe_len);

  static float x[SMALL_CNN_X_SIZE];
  for (int i = 0; i < SMALL_CNN_X_SIZE; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  static float y_entry[SMALL_CNN_Y_SIZE], y_engine[SMALL_CNN_Y_SIZE], y_runner[SMALL_CNN_Y_SIZE];

  /* 1. The entry function alone. */
  uint8_t *constant = aligned(SMALL_CNN_CONSTANT_MEM_SIZE);
  uint8_t *mutable = aligned(SMALL_CNN_MUTABLE_MEM_SIZE);
  uint8_t *activations = aligned(SMALL_CNN_ACTIVATIONS_MEM_SIZE);
  if (weights_len != SMALL_CNN_CONSTANT_MEM_SIZE) {
    fprintf(stderr, "weights are %zu bytes, expected %d\n", weights_len, SMALL_CNN_CONSTANT_MEM_SIZE);
    return 1;
  }
  memcpy(constant, weights, weights_len);
  memcpy(mutable + SMALL_CNN_X_OFFSET, x, sizeof x);
  if (small_cnn(constant, mutable, activations) != 0) {
    fprintf(stderr, "small_cnn() failed\n");
    return 1;
  }
  memcpy(y_entry, mutable + SMALL_CNN_Y_OFFSET, sizeof y_entry);

  /* 2. The C API: a bundle, an instance, two threads. */
  brt_bundle *bundle = NULL;
  check(brt_bundle_create(&small_cnn_config, small_cnn, weights, weights_len, &bundle),
        "brt_bundle_create");
  brt_instance *inst = NULL;
  check(brt_instance_create(bundle, &inst), "brt_instance_create");
  /* A wrong size is reported, not crashed on: */
  brt_status status = brt_set_input(inst, "x", x, sizeof x - 4);
  printf("brt_set_input with %zu bytes: %s\n  %s\n", sizeof x - 4, brt_error_string(status),
         brt_last_error());
  check(brt_set_input(inst, "x", x, sizeof x), "brt_set_input");
  check(brt_run(inst, 2), "brt_run");
  check(brt_get_output(inst, "y", y_engine, sizeof y_engine), "brt_get_output");

  /* 3. The recipe runner. */
  brt_runner *runner = NULL;
  check(brt_runner_create(bundle, recipe, &runner), "brt_runner_create");
  check(brt_runner_bind_input(runner, "x", x, sizeof x), "brt_runner_bind_input");
  check(brt_runner_bind_output(runner, "y", y_runner, sizeof y_runner), "brt_runner_bind_output");
  check(brt_runner_execute(runner), "brt_runner_execute");
  check(brt_runner_wait(runner), "brt_runner_wait");

  /* Handles may go in any order: instances and runners keep the bundle alive. */
  brt_bundle_destroy(bundle);
  brt_runner_destroy(runner);
  brt_instance_destroy(inst);

  print_output("y (entry function):", y_entry);
  print_output("y (brt_run, 2 threads):", y_engine);
  print_output("y (recipe runner):", y_runner);
  int engine_same = memcmp(y_entry, y_engine, sizeof y_entry) == 0;
  int runner_same = memcmp(y_entry, y_runner, sizeof y_entry) == 0;
  printf("engine (2 threads) == entry function bitwise: %s\n", engine_same ? "yes" : "NO");
  printf("recipe runner      == entry function bitwise: %s\n", runner_same ? "yes" : "NO");

  free(constant);
  free(mutable);
  free(activations);
  free(weights);
  free(recipe);
  return engine_same && runner_same ? 0 : 1;
}
