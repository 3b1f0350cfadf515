/* core_pingpong.c: the round trip of a cache line between two CPUs and the rate at which one reads lines the other
 * wrote, scripts/bench.py's indicators of the host's phase for its 2-thread columns.
 *
 *   cc -O2 -pthread core_pingpong.c -o core_pingpong && ./core_pingpong [ROUND_TRIPS]
 *
 * Two threads, bound to the first two CPUs this process may run on, hand a counter back and forth through one
 * cache line (a release store, an acquire spin) ROUND_TRIPS times (default 500000), after a warm-up of a tenth
 * of that; prints
 *   round trip 99.5 ns (CPUs 0 and 1)
 * the mean over the timed trips, then the rate of a layer hand-off:
 *   hand-off 128 KiB: own lines 104.8 GB/s, the other core's 38.9 GB/s
 * Both threads run LAYERS layers, each copying a 128 KiB buffer into another (memcpy), with a spin barrier
 * between layers: first each reading what it wrote itself one layer before, then what the other thread wrote;
 * the rates are bytes read per second of one thread. Every layer of a model run on two threads
 * reads lines the other core wrote, so these bound how fast that goes. On a 2-vCPU KVM guest both moved with
 * the host's placement of the vCPUs (AMD EPYC Zen 5, session 24: round trip 77-135 ns, own lines 95-118 GB/s and
 * the other core's 38-39 while the engine's 2-thread runs were fast; in phases of minutes where every system's
 * 2-thread runs were slow, MobileNetV2's engine at 2 threads 2.5 instead of 1.6 ms, the round trip read
 * 375-420 ns and a scratch version of the hand-off with AVX-512 adds 7 GB/s for the other core's lines against
 * 26 outside, each CPU alone as fast as ever: docs/benchmarks.md). With fewer than two CPUs it prints
 * "round trip n/a (one CPU)". Exit 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Alignas(64) _Atomic long flag;
static long trips;
static int cpus[2];

/* The hand-off: LAYERS layers of BUF bytes, after WARM_LAYERS untimed ones. */
#define BUF (128 << 10)
#define LAYERS 600
#define WARM_LAYERS 60
static _Alignas(64) long bufs[2][2][BUF / sizeof(long)]; /* [thread][layer parity] */
static _Alignas(64) _Atomic int arrived;
static _Alignas(64) _Atomic int sense;
static int handoff_other;  /* 0: read the own buffer, 1: the other thread's */
static double handoff_ns; /* thread 0's timed layers */

static void bind_to(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* The responder: waits for each odd value and answers with the next even one. */
static void *pong(void *arg) {
  (void)arg;
  bind_to(cpus[1]);
  for (long i = 1; i < 2 * trips; i += 2) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != i) {
    }
    atomic_store_explicit(&flag, i + 1, memory_order_release);
  }
  return NULL;
}

/* `n` round trips from the calling thread starting at counter value `from`. */
static void ping(long from, long n) {
  for (long i = from; i < from + 2 * n; i += 2) {
    atomic_store_explicit(&flag, i + 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != i + 2) {
    }
  }
}

/* A sense-reversing barrier of the two threads. */
static void barrier(int *local) {
  *local = !*local;
  if (atomic_fetch_add_explicit(&arrived, 1, memory_order_acq_rel) == 1) {
    atomic_store_explicit(&arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&sense, *local, memory_order_release);
  } else {
    while (atomic_load_explicit(&sense, memory_order_acquire) != *local) {
    }
  }
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Thread `me` of the hand-off: layer l reads parity l % 2 of its source and writes the other parity of its own. */
static void *handoff(void *arg) {
  int me = (int)(long)arg, local = 0;
  bind_to(cpus[me]);
  int src = handoff_other ? !me : me;
  double start = 0;
  for (int l = 0; l < WARM_LAYERS + LAYERS; l++) {
    if (l == WARM_LAYERS) start = now_ns();
    const long *s = bufs[src][l & 1];
    long *d = bufs[me][!(l & 1)];
    memcpy(d, s, BUF);
    barrier(&local);
  }
  if (me == 0) handoff_ns = now_ns() - start;
  return NULL;
}

/* GB/s one thread reads at in the hand-off (`other`: the other thread's lines), or a negative value. */
static double handoff_rate(int other) {
  handoff_other = other;
  pthread_t t;
  if (pthread_create(&t, NULL, handoff, (void *)1L) != 0) return -1;
  handoff(0);
  pthread_join(t, NULL);
  return (double)BUF * LAYERS / handoff_ns;
}

int main(int argc, char **argv) {
  long timed = argc > 1 ? atol(argv[1]) : 500000;
  if (timed < 1) timed = 500000;
  long warm = timed / 10 + 1;
  trips = warm + timed;
  cpu_set_t allowed;
  int found = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++) {
      if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
    }
  }
  if (found < 2) {
    printf("round trip n/a (one CPU)\n");
    return 0;
  }
  bind_to(cpus[0]);
  pthread_t t;
  if (pthread_create(&t, NULL, pong, NULL) != 0) {
    printf("round trip n/a (no thread)\n");
    return 0;
  }
  ping(0, warm);
  double start = now_ns();
  ping(2 * warm, timed);
  double ns = now_ns() - start;
  pthread_join(t, NULL);
  printf("round trip %.1f ns (CPUs %d and %d)\n", ns / timed, cpus[0], cpus[1]);
  double own = handoff_rate(0), other = handoff_rate(1);
  if (own > 0 && other > 0) printf("hand-off 128 KiB: own lines %.1f GB/s, the other core's %.1f GB/s\n", own, other);
  return 0;
}
