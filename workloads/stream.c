/* A memory-bandwidth streamer: STREAM's triad, a[i] = b[i] + s * c[i],
 * over arrays far larger than any cache. --passes N does a fixed amount of
 * work (use it to compare schedulers); otherwise it streams for --seconds
 * of wall time (default 3). --mb sets each array's size (default 128 MiB).
 * Prints bandwidth and runtime. */
#include "common.h"

int main(int argc, char **argv) {
    double seconds = arg_num(argc, argv, "seconds", 3.0);
    int max_passes = (int)arg_num(argc, argv, "passes", 0);
    size_t n = (size_t)(arg_num(argc, argv, "mb", 128.0) * 1024 * 1024 / sizeof(double));
    if (n < 1024) n = 1024;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) { fprintf(stderr, "stream: out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
    double start = now_s(), bytes = 0;
    int passes = 0;
    while (max_passes > 0 ? passes < max_passes : now_s() - start < seconds) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        bytes += 3.0 * n * sizeof(double);
        passes++;
    }
    double t = now_s() - start;
    printf("stream: %d passes, %.2f GB/s, runtime %.3f s (check %.1f)\n", passes, bytes / t / 1e9, t, a[n / 2]);
    return 0;
}
