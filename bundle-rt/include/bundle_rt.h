/* bundle_rt.h: C API of bundle-rt, the runtime for bundles written by bundlec.
 *
 * Link with libbundle_rt_capi.a, built by
 *   cargo build -p bundle-rt-capi --release
 * plus -lpthread -ldl -lm. See docs/runtime.md ("C API") and examples/c-api/.
 *
 * Conventions: every function returns a brt_status (BRT_OK = 0) except the destroy functions and
 * the two string functions. Pointer arguments are checked for NULL (BRT_ERR_NULL) and names for
 * UTF-8; on failure *out is set to NULL and brt_last_error() describes the failure. Nothing unwinds
 * or aborts across the API. A brt_bundle may be used from several threads; a brt_instance or
 * brt_runner by one thread at a time. Instances and runners keep their bundle alive, so handles may
 * be destroyed in any order.
 */
#ifndef BUNDLE_RT_H
#define BUNDLE_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Defined in a bundle's NAME.h; only pointers to it are used here. */
struct BundleConfig;

/* The bundle's entry function: int NAME(uint8_t *constantWeight, uint8_t *mutableWeight, uint8_t *activations). */
typedef int (*brt_entry_fn)(uint8_t *constant_weight, uint8_t *mutable_weight, uint8_t *activations);

typedef struct BrtBundle brt_bundle;     /* a checked config + entry function + copy of the weights */
typedef struct BrtInstance brt_instance; /* one execution context: its own mutable and activation areas */
typedef struct BrtRunner brt_runner;     /* a run recipe (NAME.recipe.json) bound to a bundle */

typedef enum brt_status {
  BRT_OK = 0,
  BRT_ERR_NULL = 1,             /* a required pointer argument is NULL */
  BRT_ERR_INVALID_ARGUMENT = 2, /* a string is not UTF-8, a thread count is below 1 */
  BRT_ERR_BAD_CONFIG = 3,       /* NAME_config breaks the bundle format */
  BRT_ERR_BAD_WEIGHTS = 4,      /* weights of the wrong size or checksum */
  BRT_ERR_UNKNOWN_NAME = 5,     /* no tensor or recipe buffer of that name */
  BRT_ERR_WRONG_KIND = 6,       /* not an input (or output) as the call needs */
  BRT_ERR_SIZE = 7,             /* byte count differs from the tensor's size */
  BRT_ERR_BAD_RECIPE = 8,       /* recipe not JSON, breaks the recipe rules, or not for this bundle */
  BRT_ERR_NO_DEVICE = 9,        /* the recipe has an npu run and the runner has no NPU device */
  BRT_ERR_UNBOUND = 10,         /* execute with an input or output buffer unbound */
  BRT_ERR_RUN_FAILED = 11,      /* the entry function returned non-zero */
  BRT_ERR_THREADS = 12,         /* thread count too large, or a worker thread could not start */
  BRT_ERR_OUT_OF_MEMORY = 13,
  BRT_ERR_UNSUPPORTED = 14,     /* e.g. an op with more arguments than the engine supports, CPU features the kernels need */
  BRT_ERR_PANIC = 15,           /* internal error, caught before it reached C */
  BRT_ERR_NPU = 16              /* an NPU transaction is invalid or failed on the device */
} brt_status;

/* A static description of a status code (never NULL). */
const char *brt_error_string(int status);
/* The message of the last failed brt_* call on this thread ("" if none); valid until the next
 * failing call on this thread. */
const char *brt_last_error(void);

/* ---- Bundle and instance ---------------------------------------------------------------------- */

/* Checks config and the len bytes of weights (size and FNV-1a checksum), copies the weights into a
 * 64-aligned constant area. config must stay valid while the bundle exists (NAME_config does). */
brt_status brt_bundle_create(const struct BundleConfig *config, brt_entry_fn entry,
                             const uint8_t *weights, size_t len, brt_bundle **out);
void brt_bundle_destroy(brt_bundle *bundle); /* NULL is ignored */

/* A new instance with zeroed, 64-aligned mutable and activation areas. */
brt_status brt_instance_create(const brt_bundle *bundle, brt_instance **out);
void brt_instance_destroy(brt_instance *instance); /* NULL is ignored; stops its worker threads */

/* Copies bytes bytes into input `name` (the ONNX tensor name); bytes must be the tensor's size. */
brt_status brt_set_input(brt_instance *instance, const char *name, const void *data, size_t bytes);
/* threads == 1: the entry function on this thread. threads > 1: the op table on the BSP engine with
 * that many threads (this one included); the engine is kept for the next call with the same count.
 * Results are bitwise identical for any thread count. On Linux the engine's worker threads are
 * bound to CPUs other than the creating thread's (set BRT_NO_PIN in the environment to leave them to
 * the scheduler). */
brt_status brt_run(brt_instance *instance, int threads);
/* enable != 0: the following brt_run calls run the bundle's NPU segments on the virtual NPU
 * emulator through the op table (threads == 1 on this thread instead of the entry function,
 * threads > 1 on the BSP engine); enable == 0: back to the default, where the segments' CPU
 * fallback ops run. A bundle without NPU segments gives the same results either way. */
brt_status brt_instance_use_npu(brt_instance *instance, int enable);
/* Copies output `name` into data; bytes must be the tensor's size. */
brt_status brt_get_output(const brt_instance *instance, const char *name, void *data, size_t bytes);

/* ---- Runner (XRT-style run recipe) ------------------------------------------------------------ */

/* Parses and checks recipe_json (the contents of NAME.recipe.json) against the bundle: every cpu
 * run is resolved in the bundle's op table (no library is loaded) or as the runtime's
 * bundlert_copy; every npu run's kernel is an NPU segment of the bundle, run on the virtual NPU
 * emulator; internal buffers are allocated; the weight buffer is the bundle's constant area. */
brt_status brt_runner_create(const brt_bundle *bundle, const char *recipe_json, brt_runner **out);
void brt_runner_destroy(brt_runner *runner); /* NULL is ignored */

/* Copies bytes bytes (the tensor's size) into input buffer `name` now; bind again to change it. */
brt_status brt_runner_bind_input(brt_runner *runner, const char *name, const void *data, size_t bytes);
/* Makes data (bytes bytes, the tensor's size) the destination of output buffer `name`: each execute
 * writes the result there. data must stay valid until rebound or the runner is destroyed. */
brt_status brt_runner_bind_output(brt_runner *runner, const char *name, void *data, size_t bytes);
/* Runs every run of the recipe in order on this thread, then writes the bound outputs. Fails with
 * BRT_ERR_UNBOUND, before running anything, if an input or output is unbound. */
brt_status brt_runner_execute(brt_runner *runner);
/* The status of the last execute (execution is synchronous, so this never blocks). */
brt_status brt_runner_wait(brt_runner *runner);

#ifdef __cplusplus
}
#endif

#endif /* BUNDLE_RT_H */
