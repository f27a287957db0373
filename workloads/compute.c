/* A compute-bound loop: --iterations (default 1e9) of an integer hash that
 * stays in registers. Prints runtime. */
#include "common.h"
#include <stdint.h>

int main(int argc, char **argv) {
    uint64_t n = (uint64_t)arg_num(argc, argv, "iterations", 1e9);
    double start = now_s();
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x += i;
    }
    printf("compute: %llu iterations, runtime %.3f s (check %llu)\n", (unsigned long long)n, now_s() - start,
           (unsigned long long)(x & 0xff));
    return 0;
}
