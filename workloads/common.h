/* Shared helpers for herd's test workloads: argument parsing and timing. */
#ifndef HERD_WORKLOAD_COMMON_H
#define HERD_WORKLOAD_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The value after "--name" in argv, or fallback. Exits 2 on a bad number. */
static inline double arg_num(int argc, char **argv, const char *name, double fallback) {
    for (int i = 1; i + 1 < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0) {
            char *end;
            double v = strtod(argv[i + 1], &end);
            if (*end != '\0' || v < 0) {
                fprintf(stderr, "%s: --%s needs a number >= 0, got '%s'\n", argv[0], name, argv[i + 1]);
                exit(2);
            }
            return v;
        }
    }
    return fallback;
}

static inline const char *arg_str(int argc, char **argv, const char *name, const char *fallback) {
    for (int i = 1; i + 1 < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0) return argv[i + 1];
    return fallback;
}
/* A spinning barrier for n threads: the last to arrive resets the count and
 * starts the next generation; the others busy-wait for it (as OpenMP
 * runtimes do by default). */
static inline void spin_barrier_wait(atomic_int *arrived, atomic_int *generation, int n) {
    int gen = atomic_load(generation);
    if (atomic_fetch_add(arrived, 1) + 1 == n) {
        atomic_store(arrived, 0);
        atomic_fetch_add(generation, 1);
    } else {
        while (atomic_load(generation) == gen) { /* busy-wait */ }
    }
}
#endif
