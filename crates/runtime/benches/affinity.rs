//! What moving a thread costs (S4: PALM regroups threads every 0.125 ms):
//! `sched_setaffinity` on another, busy thread, alternating between two
//! CPUs (a real move) and repeating the same mask (no move), and herd's
//! per-thread `/proc` sample that a live period pays before deciding.
//!
//! Run: cargo bench -p herd-runtime --bench affinity
//! Prints medians of 5 runs of 2,000 calls each (HERD_BENCH_CALLS: a
//! whole number >= 1; anything else is named on stderr, exit 2).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Instant;

use herd_topo::CpuSet;

#[path = "../../../bench/input.rs"]
mod input;

/// How the bench names itself in a message about its input.
const BENCH: &str = "runtime affinity";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicI32::new(0));
    let (s, t) = (stop.clone(), tid.clone());
    let spinner = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        t.store(
            unsafe { libc::syscall(libc::SYS_gettid) } as i32,
            Ordering::Release,
        );
        let mut x = 1u64;
        while !s.load(Ordering::Relaxed) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    });
    while tid.load(Ordering::Acquire) == 0 {
        std::hint::spin_loop();
    }
    let tid = tid.load(Ordering::Acquire);
    let other = if cpus > 1 { 1 } else { 0 };
    // HERD_BENCH_CALLS shortens the run (`make bench-smoke`).
    let calls: usize = input::count("HERD_BENCH_CALLS", 2000);
    let time = |f: &mut dyn FnMut(usize)| {
        median(
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    for i in 0..calls {
                        f(i);
                    }
                    start.elapsed().as_secs_f64() * 1e6 / calls as f64
                })
                .collect(),
        )
    };
    let (a, b) = (CpuSet::single(0), CpuSet::single(other));
    let moving = time(&mut |i| {
        herd_runtime::control::set_affinity(tid, if i % 2 == 0 { &a } else { &b }).expect("affinity");
    });
    let same = time(&mut |_| {
        herd_runtime::control::set_affinity(tid, &a).expect("affinity");
    });
    let pid = std::process::id() as i32;
    let sample = time(&mut |_| {
        std::hint::black_box(herd_runtime::procfs::sample(
            std::path::Path::new("/proc"),
            pid,
            tid,
        ));
    });
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    println!("CPUs: {cpus}; busy target thread; medians of 5 x {calls} calls");
    println!("  sched_setaffinity, moving between CPU 0 and {other}: {moving:>7.2} µs per call");
    println!("  sched_setaffinity, same mask:                  {same:>7.2} µs per call");
    println!("  /proc stat+schedstat sample of one thread:     {sample:>7.2} µs per call");
    println!(
        "  a 0.125 ms period spends {:.0}% of a CPU on 3 threads' samples and moves",
        (3.0 * (sample + moving)) / 125.0 * 100.0
    );
}
