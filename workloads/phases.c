/* Alternates memory and compute phases: --rounds (default 4) rounds of
 * --mem-seconds streaming then --cpu-seconds of register-only work.
 * Prints each phase and the runtime. */
#include "common.h"
#include <stdint.h>

int main(int argc, char **argv) {
    int rounds = (int)arg_num(argc, argv, "rounds", 4);
    double mem_s = arg_num(argc, argv, "mem-seconds", 0.5), cpu_s = arg_num(argc, argv, "cpu-seconds", 0.5);
    size_t n = 16u * 1024 * 1024;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) { fprintf(stderr, "phases: out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = i; }
    double start = now_s();
    uint64_t x = 1;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        while (now_s() - t0 < mem_s)
            for (size_t i = 0; i < n; i++) a[i] = 2.0 * b[i];
        printf("phases: round %d memory done at %.3f s\n", r, now_s() - start);
        t0 = now_s();
        while (now_s() - t0 < cpu_s)
            for (int k = 0; k < 1000000; k++) x = x * 6364136223846793005ull + 1442695040888963407ull;
        printf("phases: round %d compute done at %.3f s\n", r, now_s() - start);
        fflush(stdout);
    }
    printf("phases: runtime %.3f s (check %llu %.1f)\n", now_s() - start, (unsigned long long)(x & 0xff), a[7]);
    return 0;
}
