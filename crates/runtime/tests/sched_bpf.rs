//! The kernel-side reader against `/proc`: what the eBPF program copies at a
//! thread's switches is what `schedstat` and `stat` say. Runs where the
//! program loads (root, a kernel with BTF); elsewhere it says why it did
//! not and passes, as `herd doctor` would report the same.

use std::sync::mpsc;
use std::time::Duration;

use herd_runtime::procfs;
use herd_runtime::sched_bpf::{SchedBpfError, SchedWatch};

fn gettid() -> i32 {
    // SAFETY: no arguments, no memory.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Clock `id` now, in ns (CLOCK_MONOTONIC is the program's clock).
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn schedstat(tid: i32) -> procfs::Times {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    procfs::parse_schedstat(&text).unwrap()
}

#[test]
fn a_watched_threads_slot_says_what_proc_says() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut watch = match SchedWatch::open() {
        Ok(w) => w,
        Err(e @ (SchedBpfError::NotBuilt | SchedBpfError::Off)) => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) if !root => {
            eprintln!("skipped, not root: {e}");
            return;
        }
        Err(e) => panic!("root, built with the program, and it did not load: {e}"),
    };
    // A thread that works a while, then blocks until told to end.
    let (tid_tx, tid_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        go_rx.recv().unwrap();
        // 30 ms of its own CPU time, however busy the machine.
        let mut x = 0u64;
        while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) < 30_000_000 {
            x = x.wrapping_mul(31).wrapping_add(7);
            if x % 1_000_003 == 0 {
                std::thread::yield_now();
            }
        }
        end_rx.recv().unwrap();
        x
    });
    let tid = tid_rx.recv().unwrap();
    assert!(watch.watch(tid));
    assert_eq!(watch.watched(), 1);
    go_tx.send(()).unwrap();
    // Its work done, it sleeps on the channel: its slot holds the switch
    // that put it to sleep, which is what schedstat says from then on.
    let mut seen = None;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let asleep = procfs::parse_stat(&stat).is_some_and(|st| st.state == 'S');
        if let (true, Some(s)) = (asleep, watch.read(tid, clock_ns(libc::CLOCK_MONOTONIC))) {
            if s.state == 'S' && s.run_ns >= 30_000_000 {
                seen = Some(s);
                break;
            }
        }
    }
    let seen = seen.expect("the worker's slot was written and shows it asleep after its work");
    assert_eq!(
        seen.times(),
        schedstat(tid),
        "the slot and schedstat agree on a sleeping thread"
    );
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    assert_eq!(
        Some(seen.cpu),
        procfs::parse_stat(&stat).map(|st| st.cpu),
        "and on its last CPU"
    );
    assert!(
        seen.threads >= 2,
        "this process has the test's thread and the worker"
    );
    end_tx.send(()).unwrap();
    worker.join().unwrap();
    // An exited thread's last switch says so (or it was never switched
    // again after the join's wake-up, and its slot says it ran).
    let last = watch.read(tid, clock_ns(libc::CLOCK_MONOTONIC));
    assert!(
        last.is_none_or(|s| matches!(s.state, 'X' | 'Z' | 'R')),
        "{last:?}"
    );
    // Watched twice (two worlds of one herd), it stays until both let go.
    assert!(watch.watch(tid));
    assert_eq!(watch.watched(), 1);
    watch.unwatch(tid);
    assert_eq!(watch.watched(), 1);
    watch.unwatch(tid);
    assert_eq!(watch.watched(), 0);
    assert_eq!(watch.read(tid, clock_ns(libc::CLOCK_MONOTONIC)), None);
}
