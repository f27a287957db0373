/* Which actions make the kernel switch, now, between two busy threads that
 * share one CPU? A sub-tick scheduler such as PALM (S4) can only hand a core
 * to the thread it chose through such an action: between ticks the fair
 * scheduler leaves the running thread alone.
 *
 * Two spinning threads are pinned to CPU --cpu (default 1); this thread
 * runs on CPU 0 under SCHED_FIFO (root or CAP_SYS_NICE, else it says so and
 * runs at normal priority). For each action, --reps times (default 20):
 * see which of the two runs, act, and time how long until the other one's
 * counter moves (at most 20 ms), then undo. Prints, per action, the median
 * and the longest wait in microseconds and how many waits exceeded 1 ms
 * (the switch came from the next tick, not from the action).
 *
 * Measured on the 2-CPU VM (HZ=250, kernel 6.18): see issue 9's notes. */
#define _GNU_SOURCE
#include "common.h"
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_ulong count[2];
static atomic_int tid[3];
static atomic_int stop;
static int cpu;
static sem_t poke;

static void pin(int t, int c) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    if (sched_setaffinity(t, sizeof s, &s) != 0) {
        perror("switch_probe: sched_setaffinity");
        exit(1);
    }
}

static void set_policy(int t, int policy) {
    struct sched_param p = {0};
    if (sched_setscheduler(t, policy, &p) != 0) perror("switch_probe: sched_setscheduler");
}

static void *spinner(void *arg) {
    long k = (long)arg;
    atomic_store(&tid[k], (int)syscall(SYS_gettid));
    while (!atomic_load(&stop)) atomic_fetch_add_explicit(&count[k], 1, memory_order_relaxed);
    return NULL;
}

/* A SCHED_FIFO thread on the shared CPU that wakes when poked and sleeps
 * again at once: what herd's own loop does when it runs there. */
static void *waker(void *arg) {
    (void)arg;
    atomic_store(&tid[2], (int)syscall(SYS_gettid));
    while (!atomic_load(&stop)) sem_wait(&poke);
    return NULL;
}

/* Which spinner runs: the one whose counter moves over 50 us; -1 if both
 * or neither (the CPU was shared between the two checks). */
static int running(void) {
    unsigned long a = atomic_load(&count[0]), b = atomic_load(&count[1]);
    usleep(50);
    int ra = atomic_load(&count[0]) != a, rb = atomic_load(&count[1]) != b;
    return ra == rb ? -1 : (ra ? 0 : 1);
}

/* Microseconds until spinner k's counter moves, at most 20 ms. */
static double wait_for(int k) {
    double t0 = now_s();
    unsigned long c = atomic_load(&count[k]);
    while (atomic_load(&count[k]) == c)
        if (now_s() - t0 > 0.02) break;
    return (now_s() - t0) * 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { RENICE, IDLE, MOVE_AWAY, ARRIVE, ARRIVE_LATER, FIFO_WAKE, ACTIONS };
static const char *names[ACTIONS] = {
    "renice the running one to 19", "SCHED_IDLE the running one", "move the running one away",
    "the waiting one leaves and comes back", "... after running 3 ms elsewhere", "a SCHED_FIFO thread wakes there"};

static double act(int action, int run, int other) {
    double d;
    switch (action) {
    case RENICE:
        setpriority(PRIO_PROCESS, (id_t)tid[run], 19);
        d = wait_for(other);
        setpriority(PRIO_PROCESS, (id_t)tid[run], 0);
        return d;
    case IDLE:
        set_policy(tid[run], SCHED_IDLE);
        d = wait_for(other);
        set_policy(tid[run], SCHED_OTHER);
        return d;
    case MOVE_AWAY:
        pin(tid[run], 0);
        d = wait_for(other);
        pin(tid[run], cpu);
        return d;
    case ARRIVE:
        pin(tid[other], 0);
        pin(tid[other], cpu);
        return wait_for(other);
    case ARRIVE_LATER:
        pin(tid[other], 0);
        usleep(3000);
        pin(tid[other], cpu);
        return wait_for(other);
    default:
        sem_post(&poke);
        return wait_for(other);
    }
}

int main(int argc, char **argv) {
    cpu = (int)arg_num(argc, argv, "cpu", 1);
    int reps = (int)arg_num(argc, argv, "reps", 20);
    if (cpu < 1 || cpu >= CPU_SETSIZE || reps < 1) {
        fprintf(stderr, "switch_probe: need --cpu >= 1 (CPU 0 is the probe's) and --reps >= 1\n");
        return 2;
    }
    sem_init(&poke, 0, 0);
    pthread_t th[3];
    for (long k = 0; k < 2; k++) pthread_create(&th[k], NULL, spinner, (void *)k);
    pthread_create(&th[2], NULL, waker, NULL);
    while (!atomic_load(&tid[0]) || !atomic_load(&tid[1]) || !atomic_load(&tid[2])) usleep(100);
    pin(0, 0);
    pin(tid[0], cpu);
    pin(tid[1], cpu);
    pin(tid[2], cpu);
    /* After the threads exist: they must not inherit SCHED_FIFO. */
    struct sched_param fifo = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &fifo) != 0)
        fprintf(stderr, "switch_probe: no SCHED_FIFO (%s): timings include this thread's own waits\n", strerror(errno));
    if (sched_setscheduler(tid[2], SCHED_FIFO, &fifo) != 0) fprintf(stderr, "switch_probe: the waker is not SCHED_FIFO\n");
    usleep(20000);
    printf("%-40s %10s %10s %8s\n", "action", "median us", "max us", ">1 ms");
    for (int a = 0; a < ACTIONS; a++) {
        double d[reps];
        int n = 0;
        while (n < reps) {
            int run = running();
            if (run < 0) continue;
            d[n++] = act(a, run, 1 - run);
            usleep(10000);
        }
        qsort(d, (size_t)n, sizeof d[0], cmp);
        int slow = 0;
        for (int i = 0; i < n; i++) slow += d[i] > 1000;
        printf("%-40s %10.0f %10.0f %5d/%d\n", names[a], d[n / 2], d[n - 1], slow, n);
        fflush(stdout);
    }
    atomic_store(&stop, 1);
    sem_post(&poke);
    for (int k = 0; k < 3; k++) pthread_join(th[k], NULL);
    return 0;
}
