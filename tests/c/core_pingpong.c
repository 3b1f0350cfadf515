/* core_pingpong.c: the round trip of a cache line between two CPUs, scripts/bench.py's indicator of the host's
 * phase for its 2-thread columns.
 *
 *   cc -O2 -pthread core_pingpong.c -o core_pingpong && ./core_pingpong [ROUND_TRIPS]
 *
 * Two threads, bound to the first two CPUs this process may run on, hand a counter back and forth through one
 * cache line (a release store, an acquire spin) ROUND_TRIPS times (default 500000), after a warm-up of a tenth
 * of that; prints
 *   round trip 99.5 ns (CPUs 0 and 1)
 * the mean over the timed trips. Every layer of a model run on two threads reads lines the other core wrote, so
 * this time bounds how fast that goes; on a 2-vCPU KVM guest it moved with the host's placement of the vCPUs
 * (AMD EPYC Zen 5, session 23: ~100 ns while the engine's 2-thread runs were fast, 124-131 ns in a phase
 * where every system's 2-thread runs were slow and MobileNetV2's engine at 2 threads took 2.5 instead of
 * 1.6 ms). With fewer than two CPUs it prints "round trip n/a (one CPU)". Exit 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) _Atomic long flag;
static long trips;
static int cpus[2];

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
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  ping(2 * warm, timed);
  clock_gettime(CLOCK_MONOTONIC, &b);
  pthread_join(t, NULL);
  double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  printf("round trip %.1f ns (CPUs %d and %d)\n", ns / timed, cpus[0], cpus[1]);
  return 0;
}
