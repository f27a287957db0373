/* What each /proc read a live turn makes costs (issue 28), per read, in
 * this thread's CPU time: 1,024 sleeping threads, each file kept open and
 * pread 20 times (best pass), the whole process's stat, a stat() of its
 * task directory (the thread count as its link count), and every thread's
 * children list opened and read as the live world reads it.
 *
 * Run: gcc -O2 -pthread bench/proc-read-cost.c -o /tmp/proc-read-cost &&
 *      /tmp/proc-read-cost
 * (C, not Rust: it times the kernel's side alone, nothing of herd's.) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 1024
#define PASSES 20

static int tids[N];

static void *sleeper(void *i) {
    tids[(long)i] = (int)syscall(SYS_gettid);
    for (;;) pause();
    return NULL;
}

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Best pass of `PASSES` over N kept descriptors of `name`, in µs a read. */
static double per_thread_file(int pid, const char *name) {
    static int fd[N];
    char path[128], buf[4096];
    for (int i = 0; i < N; i++) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/%s", pid, tids[i], name);
        fd[i] = open(path, O_RDONLY);
    }
    double best = 1e18;
    for (int r = 0; r < PASSES; r++) {
        double a = cpu_ns();
        for (int i = 0; i < N; i++) pread(fd[i], buf, sizeof buf, 0);
        double b = cpu_ns();
        if (b - a < best) best = b - a;
    }
    for (int i = 0; i < N; i++) close(fd[i]);
    return best / N / 1e3;
}

int main(void) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 65536);
    for (long i = 0; i < N; i++) {
        pthread_t t;
        pthread_create(&t, &at, sleeper, (void *)i);
    }
    sleep(1);
    int pid = getpid();
    char path[128], buf[4096];
    printf("%d sleeping threads; CPU per read:\n", N);
    printf("  thread stat       %6.2f us\n", per_thread_file(pid, "stat"));
    printf("  thread schedstat  %6.2f us\n", per_thread_file(pid, "schedstat"));

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int whole = open(path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    struct stat st;
    double a = cpu_ns();
    for (int i = 0; i < 1000; i++) pread(whole, buf, sizeof buf, 0);
    double b = cpu_ns();
    for (int i = 0; i < 1000; i++) stat(path, &st);
    double c = cpu_ns();
    printf("  process stat      %6.2f us\n", (b - a) / 1e6);
    printf("  stat(task/)       %6.2f us (links %ld = threads + 2)\n", (c - b) / 1e6, (long)st.st_nlink);

    double best = 1e18;
    for (int r = 0; r < 10; r++) {
        double t0 = cpu_ns();
        for (int i = 0; i < N; i++) {
            snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, tids[i]);
            int fd = open(path, O_RDONLY);
            read(fd, buf, sizeof buf);
            read(fd, buf, sizeof buf);
            close(fd);
        }
        double t1 = cpu_ns();
        if (t1 - t0 < best) best = t1 - t0;
    }
    printf("every children list %6.2f ms (opened and read, best of 10)\n", best / 1e6);
    return 0;
}
