/* Waits in vfork(2) for --seconds (default 3) while its child sleeps,
 * then sleeps --after seconds (default 30). While it waits its state is
 * D and only a fatal signal wakes it: a SIGSTOP sent then stays pending
 * until the child exits. Tests herd's reading of a stop not yet taken,
 * which a loaded machine shows for tens of milliseconds (a stopped
 * process waiting for a CPU) and this program for seconds. */
#include "common.h"
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double hold = arg_num(argc, argv, "seconds", 3);
    double after = arg_num(argc, argv, "after", 30);
    printf("holding\n");
    fflush(stdout);
    pid_t child = vfork();
    if (child == 0) {
        /* The child borrows the parent's memory: it only sleeps and
         * exits, touching nothing the parent needs. */
        struct timespec ts = {(time_t)hold, (long)((hold - (time_t)hold) * 1e9)};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    if (child < 0) {
        perror("vfork");
        return 1;
    }
    waitpid(child, NULL, 0);
    struct timespec ts = {(time_t)after, (long)((after - (time_t)after) * 1e9)};
    nanosleep(&ts, NULL);
    return 0;
}
