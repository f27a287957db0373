/* Threads that report progress through herd's heartbeat library (S4).
 *   beats --threads N --seconds S --rate R
 * Thread i beats about R * (i + 1) times a second for S seconds (busy
 * work between beats), so herd sees threads progress at different rates.
 * Prints each thread's beats at the end. */
#include <pthread.h>
#include <stdint.h>
#include "common.h"
#include "herd_heartbeat.h"

static double seconds, rate;

static void *worker(void *arg) {
    long i = (long)arg;
    double end = now_s() + seconds, per = 1.0 / (rate * (double)(i + 1));
    uint64_t n = 0;
    volatile double x = 1.0;
    double next = now_s();
    while (now_s() < end) {
        for (int k = 0; k < 2000; k++) x = x * 1.0000001 + 1e-9;
        if (now_s() >= next) {
            herd_hb_beat();
            n++;
            next += per;
        }
    }
    printf("thread %ld: %llu beats\n", i, (unsigned long long)n);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = (int)arg_num(argc, argv, "threads", 2);
    seconds = arg_num(argc, argv, "seconds", 1);
    rate = arg_num(argc, argv, "rate", 100);
    if (threads < 1 || threads > 256 || rate <= 0) {
        fprintf(stderr, "beats: --threads 1..256 and --rate > 0\n");
        return 2;
    }
    int err = herd_hb_init();
    if (err != 0) fprintf(stderr, "beats: heartbeats off: %s\n", strerror(err));
    pthread_t t[256];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    herd_hb_close();
    return 0;
}
