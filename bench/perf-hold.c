/* What one per-task perf event costs programs it is not attached to
 * (issue 23): it holds a software event (type PERF_TYPE_SOFTWARE, config
 * from the command line: 4 cpu-migrations, 9 dummy) on process PID until
 * killed. While one task event exists, the kernel runs perf's switch
 * hooks on every context switch of every task.
 *
 * Run: gcc -O2 bench/perf-hold.c -o /tmp/perf-hold && sh bench/perf-hold.sh
 * (C, not Rust: it measures the kernel's side alone, nothing of herd's.) */
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PID CONFIG\n", argv[0]);
        return 2;
    }
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = strtoull(argv[2], NULL, 10);
    int fd = syscall(SYS_perf_event_open, &a, atoi(argv[1]), -1, -1, 0);
    if (fd < 0) {
        perror("perf_event_open");
        return 1;
    }
    pause();
    return 0;
}
