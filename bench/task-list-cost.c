/* What finding a small process's threads costs (issue 23: hackbench's 80
 * single-threaded processes under herd), per call, in this thread's CPU
 * time, best of three passes of 10,000: listing `/proc/PID/task` (open,
 * read, close) against a stat() of it (the thread count as its link
 * count, what `live::thread_lists` checks), and a read of `/proc/loadavg`
 * (the kernel's last process id, what `live::family` checks before it
 * looks for forked processes). PID is a sleeping child of one thread.
 *
 * Run: gcc -O2 bench/task-list-cost.c -o /tmp/tlc && /tmp/tlc
 * (C, not Rust: it times the kernel's side alone, nothing of herd's.) */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CALLS 10000

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    char task[64], buf[128];
    snprintf(task, sizeof task, "/proc/%d/task", pid);
    double list = 1e18, check = 1e18, loadavg = 1e18;
    for (int pass = 0; pass < 3; pass++) {
        double a = cpu_ns();
        for (int i = 0; i < CALLS; i++) {
            DIR *d = opendir(task);
            while (d && readdir(d)) {
            }
            if (d) closedir(d);
        }
        double b = cpu_ns();
        struct stat st;
        for (int i = 0; i < CALLS; i++) stat(task, &st);
        double c = cpu_ns();
        for (int i = 0; i < CALLS; i++) {
            int fd = open("/proc/loadavg", O_RDONLY);
            if (read(fd, buf, sizeof buf) < 0) break;
            close(fd);
        }
        double d = cpu_ns();
        if (b - a < list) list = b - a;
        if (c - b < check) check = c - b;
        if (d - c < loadavg) loadavg = d - c;
    }
    kill(pid, SIGKILL);
    printf("list a 1-thread task dir: %.2f us\nstat() it (link count): %.2f us\nread /proc/loadavg: %.2f us\n",
           list / CALLS / 1e3, check / CALLS / 1e3, loadavg / CALLS / 1e3);
    return 0;
}
