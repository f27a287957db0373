// SPDX-License-Identifier: MIT OR GPL-2.0
//
// herd's kernel-side view of the threads it watches: at every context switch
// of a watched thread, the kernel's own counters for it (the numbers
// /proc/<pid>/task/<tid>/schedstat and stat print), written into a slot that
// herd reads through shared memory. A live turn then reads no /proc file for
// a thread that ran: at a thousand busy threads the two reads per thread
// were 12 ms a turn here (docs/results.md, issue 28).
//
// The structures below name only the fields read; the loader relocates each
// to the running kernel's layout from its BTF (CO-RE), so one object serves
// every kernel with BTF and `sched_switch`'s four-argument form (5.18+).
// The license string must be GPL-compatible for tracing programs.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct sched_entity {
    unsigned long long sum_exec_runtime;
} __attribute__((preserve_access_index));

struct sched_info {
    unsigned long pcount;
    unsigned long long run_delay;
} __attribute__((preserve_access_index));

struct signal_struct {
    int nr_threads;
} __attribute__((preserve_access_index));

struct task_struct {
    int pid;
    struct sched_entity se;
    struct sched_info sched_info;
    struct signal_struct *signal;
} __attribute__((preserve_access_index));

// One watched thread, as `crates/runtime/src/sched_bpf.rs` reads it. `seq`
// is odd while the slot is written (a sequence lock: the reader retries).
struct slot {
    __u64 seq;
    __u64 run_ns;      // se.sum_exec_runtime at the last switch
    __u64 wait_ns;     // sched_info.run_delay
    __u64 slices;      // sched_info.pcount
    __u64 on_since_ns; // when it was switched in (CLOCK_MONOTONIC); 0 off CPU
    __u32 cpu;         // the CPU of its last switch
    __u32 state;       // prev_state when switched out (0: still runnable)
    __u32 threads;     // its process's thread count
    __u32 tid;         // the thread the slot was last written for
};

// Sized by the loader (`SLOTS` in sched_bpf.rs) before loading.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct slot);
} slots SEC(".maps");

// Watched thread id -> its slot. Threads herd does not watch miss here.
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} slot_of SEC(".maps");

static __always_inline struct slot *find(struct task_struct *t)
{
    __u32 tid = t->pid;
    __u32 *i = bpf_map_lookup_elem(&slot_of, &tid);
    if (!i)
        return 0;
    return bpf_map_lookup_elem(&slots, i);
}

static __always_inline void record(struct slot *s, struct task_struct *t, __u64 on_since_ns, __u32 state)
{
    __sync_fetch_and_add(&s->seq, 1);
    s->run_ns = t->se.sum_exec_runtime;
    s->wait_ns = t->sched_info.run_delay;
    s->slices = t->sched_info.pcount;
    s->on_since_ns = on_since_ns;
    s->cpu = bpf_get_smp_processor_id();
    s->state = state;
    s->threads = t->signal->nr_threads;
    s->tid = t->pid;
    __sync_fetch_and_add(&s->seq, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
    __u64 now = bpf_ktime_get_ns();
    struct slot *s = find(prev);
    if (s)
        record(s, prev, 0, prev_state);
    s = find(next);
    if (s)
        record(s, next, now, 0);
    return 0;
}

// A woken thread is runnable before it runs: /proc says R, and so does this.
// A wake-up on one CPU can meet the thread's own switch-out on another (the
// kernel wakes a thread still finishing its switch): the two writers can then
// leave the sequence even mid-write, and one read may mix the two; the
// thread's next switch writes the slot whole again.
SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
    struct slot *s = find(p);
    if (s) {
        __sync_fetch_and_add(&s->seq, 1);
        s->state = 0;
        __sync_fetch_and_add(&s->seq, 1);
    }
    return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
