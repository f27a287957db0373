/* What packing 3 threads on 2 CPUs can reach on this machine (issue 9),
 * without herd: barrier.c's spin variant, with the packing decided inside
 * the process by a SCHED_FIFO controller thread that reads each thread's
 * progress directly (no heartbeat file, no herd loop, no /proc).
 *
 *   --mode none     no control: the threads may use CPUs 0 and 1 and the
 *                   kernel balances them (TP with --threads 3, TR with 2).
 *   --mode rotate   every --period-us (default 250), the least-progressed
 *                   thread gets a CPU alone and the others share the other
 *                   one, moved with sched_setaffinity: PALM's rule, as herd
 *                   applies it.
 *   --mode plan-rt  (3 threads) the threads run SCHED_FIFO: the two that should run now
 *                   at priority 2, the rest at 1. Which two, and until when,
 *                   comes from McNaughton's wrap-around schedule of each
 *                   thread's work left to the next barrier (16 beats a
 *                   phase, known here), recomputed whenever the controller
 *                   wakes, which is when that schedule next changes. A
 *                   priority change preempts at once; for threads of the
 *                   fair class nothing but moving the running one away does
 *                   (workloads/switch_probe.c).
 *
 * --threads T (default 3), --total W (units per phase, shared among the
 * threads; default 4e6), --phases P (default 300). Prints the runtime as
 * barrier.c does, so scripts/s4-barrier.py --bound can alternate it with
 * herd's runs. Needs root or CAP_SYS_NICE for the controller (and plan-rt),
 * and two CPUs. The threads die with the process, so a killed run leaves
 * nothing running at real-time priority.
 *
 * What it shows (issue 9): with these two mechanisms, how close packing can
 * come to thread reduction. And a hazard herd must guard against before it
 * uses priorities on a user's program: a held thread that has done its last
 * beat of a phase looks the same as one waiting at the barrier, and
 * SCHED_FIFO spinners never yield to it, so without the watchdog in
 * plan_rt the program stops for good. */
#define _GNU_SOURCE
#include "common.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_THREADS 64
#define BEATS_PER_PHASE 16

static int threads, phases;
static uint64_t work;
static atomic_int arrived, generation, done;
static atomic_ulong beats[MAX_THREADS];
static atomic_int tids[MAX_THREADS];
static atomic_ullong sink;
static long moves;

static void *worker(void *arg) {
    long k = (long)arg;
    atomic_store(&tids[k], (int)syscall(SYS_gettid));
    uint64_t x = (uint64_t)k + 1;
    for (int p = 0; p < phases; p++) {
        for (int c = 0; c < BEATS_PER_PHASE; c++) {
            for (uint64_t i = 0; i < work / BEATS_PER_PHASE; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
            atomic_fetch_add_explicit(&beats[k], 1, memory_order_relaxed);
        }
        spin_barrier_wait(&arrived, &generation, threads);
    }
    atomic_fetch_add(&sink, x & 1);
    return NULL;
}

static void allow(int tid, int first, int last) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c = first; c <= last; c++) CPU_SET(c, &s);
    if (sched_setaffinity(tid, sizeof s, &s) == 0) moves++;
}

static void fifo(int tid, int prio) {
    struct sched_param p = {.sched_priority = prio};
    /* ESRCH: the thread has finished its last phase. */
    if (sched_setscheduler(tid, prio ? SCHED_FIFO : SCHED_OTHER, &p) != 0 && errno != ESRCH) {
        perror("palm_bound: sched_setscheduler");
        exit(1);
    }
}

static void sleep_ns(long ns) {
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&t, NULL);
}

/* PALM's rule by affinity: the least-progressed thread alone on the CPU it
 * is on, the others on the other CPU (one move a turn when it rotates). */
static void rotate(long period_us) {
    int where[MAX_THREADS];
    for (int k = 0; k < threads; k++) where[k] = -1;
    while (!atomic_load(&done)) {
        sleep_ns(period_us * 1000);
        int least = 0;
        for (int k = 1; k < threads; k++)
            if (atomic_load(&beats[k]) < atomic_load(&beats[least])) least = k;
        int alone = where[least] >= 0 ? where[least] : 0;
        for (int k = 0; k < threads; k++) {
            int want = k == least ? alone : 1 - alone;
            if (where[k] != want) {
                allow(tids[k], want, want);
                where[k] = want;
            }
        }
    }
}

/* McNaughton's wrap-around schedule of the work left (in beats) of 3
 * threads on 2 CPUs, longest first (among equals, the one waiting now
 * last, so that a tie never swaps threads): the longest runs on one CPU;
 * on the other, the second's overflow past the span runs first, else the
 * third. Returns the thread to hold back now and sets *next to the beats
 * until that choice changes. */
static int plan(const double *left, int held, double *next) {
    int o[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (left[o[j]] > left[o[i]] || (left[o[j]] == left[o[i]] && o[i] == held)) {
                int t = o[i];
                o[i] = o[j];
                o[j] = t;
            }
    double sum = left[0] + left[1] + left[2];
    double span = sum / 2 > left[o[0]] ? sum / 2 : left[o[0]];
    double overflow = left[o[1]] - (span - left[o[0]]);
    int hold;
    if (overflow > 0.5) {
        /* The second starts now on the other CPU; the third waits until
         * the second's overflow is done. */
        hold = o[2];
        *next = overflow;
    } else {
        /* The third starts now; the second waits as long as it can and
         * still end with the span. */
        hold = o[1];
        *next = span - left[o[1]];
    }
    if (left[o[0]] < *next) *next = left[o[0]];
    if (*next < 1) *next = 1;
    return hold;
}

static void plan_rt(void) {
    for (int k = 0; k < 3; k++) fifo(tids[k], 2);
    int held = -1;
    /* Beats per nanosecond of a running thread, learned as it goes: the
     * beats of the threads that ran with work left since the last wake over
     * their time, both sums decaying, so that intervals shorter than a beat
     * still count (from the second wake on: the first has none behind it).
     * A thread that finished its work left within the interval spun for an
     * unknown part of it, so its interval only says the rate is at least
     * that much: it can raise the estimate, not feed the sums (feeding them
     * locks in an estimate too low: long sleeps, more spinning counted). */
    double rate = 0, beats_sum = 0, ns_sum = 0, last_t = 0, last_left[3] = {0};
    unsigned long last[3] = {0};
    while (!atomic_load(&done)) {
        double left[3], t = now_s();
        unsigned long b[3], least = ~0ul;
        int moved = 0;
        for (int k = 0; k < 3; k++) {
            b[k] = atomic_load(&beats[k]);
            if (b[k] < least) least = b[k];
            moved |= b[k] != last[k];
        }
        unsigned long barrier = (least / BEATS_PER_PHASE + 1) * BEATS_PER_PHASE;
        for (int k = 0; k < 3; k++) {
            left[k] = b[k] >= barrier ? 0 : (double)(barrier - b[k]);
            if (last_t > 0 && k != held && last_left[k] > 0) {
                double did = (double)(b[k] - last[k]), ns = (t - last_t) * 1e9;
                if (did < last_left[k]) {
                    beats_sum = 0.98 * beats_sum + did;
                    ns_sum = 0.98 * ns_sum + ns;
                } else if (did / ns > rate) {
                    beats_sum = did / ns * ns_sum;
                }
            }
            last[k] = b[k];
            last_left[k] = left[k];
        }
        if (beats_sum >= 4) rate = beats_sum / ns_sum;
        last_t = t;
        double next;
        int hold = plan(left, held, &next);
        if (!moved && held >= 0) {
            /* Nobody beat since the last wake: the held thread may be the
             * one that has done its last beat of the phase but not yet
             * reached the barrier (beats cannot tell), while the other two
             * spin there at a priority it cannot preempt. Hold another. */
            hold = (held + 1) % 3;
            next = 1;
        }
        if (hold != held) {
            /* Lower first, then raise: never three at priority 2. */
            fifo(tids[hold], 1);
            if (held >= 0) fifo(tids[held], 2);
            held = hold;
            moves++;
        }
        long ns = rate > 0 ? (long)(next / rate) : 100000;
        sleep_ns(ns < 30000 ? 30000 : ns > 2000000 ? 2000000 : ns);
    }
}

static void *join_workers(void *arg) {
    pthread_t *tid = arg;
    for (int k = 0; k < threads; k++) pthread_join(tid[k], NULL);
    atomic_store(&done, 1);
    return NULL;
}

int main(int argc, char **argv) {
    threads = (int)arg_num(argc, argv, "threads", 3);
    phases = (int)arg_num(argc, argv, "phases", 300);
    double total = arg_num(argc, argv, "total", 4e6);
    long period_us = (long)arg_num(argc, argv, "period-us", 250);
    const char *mode = arg_str(argc, argv, "mode", "plan-rt");
    int m = strcmp(mode, "none") == 0 ? 0 : strcmp(mode, "rotate") == 0 ? 1 : strcmp(mode, "plan-rt") == 0 ? 2 : -1;
    if (threads < 1 || threads > MAX_THREADS || phases < 1 || period_us < 1 || m < 0 || (m == 2 && threads != 3)) {
        fprintf(stderr, "palm_bound: need --threads 1..%d (3 for plan-rt), --phases >= 1, --period-us >= 1, "
                        "--mode none|rotate|plan-rt\n",
                MAX_THREADS);
        return 2;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "palm_bound: needs two CPUs\n");
        return 2;
    }
    work = (uint64_t)(total / threads);
    pthread_t tid[MAX_THREADS];
    double start = now_s();
    for (long k = 0; k < threads; k++) pthread_create(&tid[k], NULL, worker, (void *)k);
    for (int k = 0; k < threads; k++)
        while (!atomic_load(&tids[k])) usleep(10);
    for (int k = 0; k < threads; k++) allow(tids[k], 0, 1);
    moves = 0;
    /* A helper joins the workers and says when they are done, so that this
     * thread can be the controller. */
    pthread_t joiner;
    pthread_create(&joiner, NULL, join_workers, tid);
    if (m > 0) {
        /* Above the workers, and only now that they exist, so that they do
         * not inherit its priority. */
        fifo(0, 10);
        if (m == 1) rotate(period_us);
        else plan_rt();
    }
    pthread_join(joiner, NULL);
    printf("palm_bound: %d threads, %d phases, %s, runtime %.3f s, %ld changes\n", threads, phases, mode,
           now_s() - start, moves);
    return 0;
}
