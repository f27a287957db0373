/* A multithreaded barrier benchmark (PALM's setting): --threads T (default 3)
 * each do --work units (default 2e6 hash steps) per phase, then meet at a
 * barrier, for --phases P (default 200). --total W shares W units per phase
 * among the threads instead (same total work at any thread count, as thread
 * reduction needs). --mode spin busy-waits at the barrier (as OpenMP
 * runtimes do by default); --mode block sleeps in a pthread barrier. Prints
 * progress every 10% and the runtime.
 * Built with -DHERD_HEARTBEAT (target/workloads/barrier-hb), each thread
 * beats herd's heartbeat 16 times per phase: progress that spinning at the
 * barrier does not fake.
 * At the end it also prints each thread's time waiting at barriers: with
 * equal work, what a placement wastes. */
#include "common.h"
#ifdef HERD_HEARTBEAT
#include "herd_heartbeat.h"
#define BEAT() herd_hb_beat()
#else
#define BEAT() ((void)0)
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

static int threads, phases, spin;
static uint64_t work;
static pthread_barrier_t barrier;
static atomic_int arrived;
static atomic_int generation;
static atomic_ullong sink;
static double *waited_s;

static void *worker(void *arg) {
    uint64_t x = (uintptr_t)arg + 1;
    for (int p = 0; p < phases; p++) {
        /* 16 chunks, a beat after each; no division in the inner loop,
         * whose body is one multiply-add. */
        for (uint64_t c = 0; c < 16; c++) {
            uint64_t n = work / 16 + (c < work % 16);
            for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
            BEAT();
        }
        double arrived_s = now_s();
        if (spin) spin_barrier_wait(&arrived, &generation, threads); else pthread_barrier_wait(&barrier);
        waited_s[(uintptr_t)arg] += now_s() - arrived_s;
        if ((uintptr_t)arg == 0 && phases >= 10 && (p + 1) % (phases / 10) == 0) {
            printf("barrier: %d/%d phases\n", p + 1, phases);
            fflush(stdout);
        }
    }
    atomic_fetch_add(&sink, x & 1);
    return NULL;
}

int main(int argc, char **argv) {
    threads = (int)arg_num(argc, argv, "threads", 3);
    phases = (int)arg_num(argc, argv, "phases", 200);
    work = (uint64_t)arg_num(argc, argv, "work", 2e6);
    double total = arg_num(argc, argv, "total", 0);
    const char *mode = arg_str(argc, argv, "mode", "spin");
    if (threads < 1 || phases < 1 || (strcmp(mode, "spin") != 0 && strcmp(mode, "block") != 0)) {
        fprintf(stderr, "barrier: need --threads >= 1, --phases >= 1, --mode spin|block\n");
        return 2;
    }
    spin = strcmp(mode, "spin") == 0;
    if (total > 0) work = (uint64_t)(total / threads);
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    pthread_t tid[threads];
    waited_s = calloc((size_t)threads, sizeof *waited_s);
    double start = now_s();
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, (void *)(uintptr_t)t);
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    printf("barrier: %d threads, %d phases, %s, runtime %.3f s\n", threads, phases, mode, now_s() - start);
    printf("barrier: waited at barriers (s):");
    for (int t = 0; t < threads; t++) printf(" %.3f", waited_s[t]);
    printf("\n");
#ifdef HERD_HEARTBEAT
    herd_hb_close();
#endif
    return 0;
}
