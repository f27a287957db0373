/* herd's progress heartbeats (S4): link with -lherd_heartbeat.
 *
 * Each thread that calls herd_hb_beat() gets its own counter in a shared
 * memory file ($HERD_HEARTBEAT_DIR, default /dev/shm, named herd-hb.<pid>);
 * herd reads the counters to see which threads make progress. A beat is one
 * atomic add on the thread's own cache line: no system call, no lock.
 * Every function is safe to call from any thread; before herd_hb_init() the
 * first beat initialises. Errors never stop the program: beats are dropped.
 * A forked child beats into a file of its own (herd-hb.<child pid>), never
 * into its parent's.
 */
#ifndef HERD_HEARTBEAT_H
#define HERD_HEARTBEAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates and maps the file. 0 on success, else an errno value. */
int herd_hb_init(void);
/* One unit of progress for the calling thread. */
void herd_hb_beat(void);
/* n units of progress for the calling thread. */
void herd_hb_beat_n(uint64_t n);
/* Removes the file (the counters stay readable until the process exits). */
int herd_hb_close(void);

#ifdef __cplusplus
}
#endif

#endif
