/* Amdahl's shape, as a MapReduce word count has it (S0): --serial F of
 * --work W hash steps (default 4e8) run on the main thread, then the rest
 * is split into 1,000 chunks that --threads T workers (default 2, or
 * $OMP_NUM_THREADS) take from one shared counter, so a faster thread takes
 * more. Prints the thread count and the runtime. */
#include "common.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define CHUNKS 1000

static uint64_t chunk_steps;
static atomic_int next_chunk;
static atomic_ullong sink;

static uint64_t hash_steps(uint64_t x, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void *worker(void *arg) {
    uint64_t x = (uintptr_t)arg + 1;
    while (atomic_fetch_add(&next_chunk, 1) < CHUNKS) x = hash_steps(x, chunk_steps);
    atomic_fetch_add(&sink, x);
    return NULL;
}

int main(int argc, char **argv) {
    const char *omp = getenv("OMP_NUM_THREADS");
    int threads = (int)arg_num(argc, argv, "threads", omp ? atof(omp) : 2);
    double work = arg_num(argc, argv, "work", 4e8);
    double serial = arg_num(argc, argv, "serial", 0.1);
    if (threads < 1 || threads > 1024 || serial > 1) {
        fprintf(stderr, "%s: --threads must be 1..1024 and --serial at most 1\n", argv[0]);
        return 2;
    }
    double t0 = now_s();
    atomic_fetch_add(&sink, hash_steps(7, (uint64_t)(serial * work)));
    chunk_steps = (uint64_t)((1 - serial) * work / CHUNKS);
    pthread_t tid[1024];
    for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    printf("amdahl: %d threads, %.3f s (checksum %llu)\n", threads, now_s() - t0,
           (unsigned long long)(atomic_load(&sink) & 0xffff));
    return 0;
}
