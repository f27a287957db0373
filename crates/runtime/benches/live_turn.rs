//! What a live turn costs herd at scale (issue 28): observing a real
//! process of N threads (its `/proc` files, counters where the machine
//! has them) and acting on it (a plan that moves every thread, and one
//! that changes nothing), in herd's own CPU time, for N from 64 to 4,096.
//! The threads sleep, so the 2 CPUs here suffice.
//!
//! Then the same paced turn over a tree of N single-threaded processes
//! (a root and N-1 children that each wake every 50 ms), as hackbench's
//! 80 processes are watched, and its floor (one read of each process's
//! `schedstat` and `stat`, paced alike), and the share of thread samples
//! taken from herd's eBPF program (`HERD_SCHED_BPF=on` loads it at the
//! first turn, `off` never; unset, after 10,000 reads from `/proc`).
//!
//! Run: cargo bench -p herd-runtime --bench live_turn
//! HERD_BENCH_THREADS=64,256, HERD_BENCH_PROCESSES=16 and
//! HERD_BENCH_TURNS=5 shorten it (`make bench-smoke`; a size or count
//! that is not a whole number >= 1 is named on stderr, exit 2). Prints,
//! per size, the median CPU time of a steady turn's
//! observation (turns back to back); the mean over turns paced 100 ms
//! apart, as herd runs them (with its look for forked processes every
//! 250 ms), the share of threads whose sample was kept (they slept) and of
//! those left unread altogether (taskstats said none of the process's
//! threads ran);
//! the first (which opens every file), a moving plan and an empty one, the
//! cost per thread, and the floor: one read of each thread's schedstat and
//! nothing else, back to back and paced (100 ms apart, the caches cold as
//! a paced turn finds them); and one taskstats request for the whole
//! process, paced (NaN without taskstats).

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use herd_engine::{Actuator, Sensor};
use herd_policy::{Placement, Plan};
use herd_runtime::live::{LiveWorld, Program};
use herd_topo::CpuSet;

#[path = "../../../bench/input.rs"]
mod input;

/// How the bench names itself in a message about its input.
const BENCH: &str = "runtime live_turn";

/// The child: N sleeping threads, "ready" on stdout, gone when stdin closes.
fn sleepers(n: usize) {
    for _ in 0..n {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| {
                loop {
                    std::thread::park();
                }
            })
            .expect("a sleeping thread");
    }
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// A process of the tree: wakes every 50 ms (so that every turn finds it
/// has run, as hackbench's 80 busy processes are found) until it is
/// killed or its parent is gone.
fn ticker() {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    // SAFETY: as above.
    while unsafe { libc::getppid() } == parent {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The tree's root: N-1 tickers, "ready" on stdout; when stdin closes it
/// ends them and itself.
fn tree(n: usize) {
    let mut children: Vec<_> = (1..n)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env("HERD_BENCH_TICKER", "1")
                .spawn()
                .expect("a ticker")
        })
        .collect();
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// This bench's binary run as the child that `key` = `n` makes it (the
/// sleepers or the tree), once it says it is ready, and a live world
/// watching it.
fn watched(key: &str, n: usize) -> (std::process::Child, LiveWorld) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(key, n.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let program = Program::attach(child.id() as i32).unwrap();
    let world = LiveWorld::new(vec![program], Arc::new(AtomicBool::new(false)));
    (child, world)
}

/// The same for a tree of `n` single-threaded processes that each run a
/// little every period: herd's CPU per turn paced 100 ms apart, as herd
/// runs them (its look for forked processes every 250 ms included); and
/// the floor, paced alike: one read of each process's `schedstat` and
/// `stat` through kept descriptors, what a turn must read of a thread that
/// ran to know its time, state and CPU.
fn tree_turns(n: usize, turns: usize) -> (usize, f64, f64, f64) {
    let (mut root, mut world) = watched("HERD_BENCH_TREE", n);
    // Turns until the family is found and every process watched.
    let mut seen = 0;
    for _ in 0..20 {
        seen = world.observe().tasks.len();
        if seen >= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let from_kernel = world.stats.threads_from_kernel;
    let paced = paced_ms(turns, || {
        world.observe();
    });
    let kernel_share = (world.stats.threads_from_kernel - from_kernel) as f64 / (turns * seen.max(1)) as f64;
    let ids: Vec<u64> = world.observe().tasks.iter().map(|t| t.id).collect();
    let files: Vec<std::fs::File> = ids
        .iter()
        .flat_map(|id| ["schedstat", "stat"].map(|f| format!("/proc/{id}/task/{id}/{f}")))
        .filter_map(|path| std::fs::File::open(path).ok())
        .collect();
    let mut buf = vec![0u8; 4096];
    let floor = paced_ms(turns, || {
        for f in &files {
            let _ = std::os::unix::fs::FileExt::read_at(f, &mut buf, 0);
        }
    });
    world.restore();
    drop(root.stdin.take());
    root.wait().unwrap();
    (seen, paced, floor, kernel_share)
}

/// The mean CPU time of `turn`, in ms, over `turns` runs 100 ms apart (as
/// herd paces its turns: the caches as cold as a turn finds them).
fn paced_ms(turns: usize, mut turn: impl FnMut()) -> f64 {
    let mut total = 0.0;
    for _ in 0..turns {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let t = thread_cpu_ns();
        turn();
        total += (thread_cpu_ns() - t) as f64 / 1e6;
    }
    total / turns as f64
}

fn thread_cpu_ns() -> u64 {
    // SAFETY: timespec is plain data that clock_gettime fills.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if let Ok(n) = std::env::var("HERD_BENCH_SLEEPERS") {
        sleepers(
            n.trim()
                .parse()
                .unwrap_or_else(|_| input::bad(format!("HERD_BENCH_SLEEPERS: {n:?}"))),
        );
        return;
    }
    if std::env::var_os("HERD_BENCH_TICKER").is_some() {
        ticker();
        return;
    }
    if let Ok(n) = std::env::var("HERD_BENCH_TREE") {
        tree(
            n.trim()
                .parse()
                .unwrap_or_else(|_| input::bad(format!("HERD_BENCH_TREE: {n:?}"))),
        );
        return;
    }
    let sizes = input::counts("HERD_BENCH_THREADS", "64,256,1024,4096");
    let trees = input::counts("HERD_BENCH_PROCESSES", "16,64,256,1024");
    let turns: usize = input::count("HERD_BENCH_TURNS", 30);
    // herd raises its own descriptor limit the same way at start.
    let _ = herd_runtime::fds::raise();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!(
        "live turn, herd's CPU per turn (median of {turns}), process of N sleeping threads on {cpus} CPUs"
    );
    println!(
        "{:>6} {:>12} {:>12} {:>8} {:>8} {:>12} {:>12} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "N",
        "observe ms",
        "paced ms",
        "kept",
        "unread",
        "first ms",
        "move-all ms",
        "no-op ms",
        "observe us/thr",
        "floor ms",
        "paced floor",
        "taskstats ms"
    );
    for n in sizes {
        let (mut child, mut world) = watched("HERD_BENCH_SLEEPERS", n);
        let t = thread_cpu_ns();
        let seen = world.observe().tasks.len();
        let first = (thread_cpu_ns() - t) as f64 / 1e6;
        // The main thread and its N sleepers: it measures what it claims.
        assert!(seen > n, "observed {seen} threads of {}", n + 1);
        let mut observe = Vec::new();
        let mut moves = Vec::new();
        let mut noop = Vec::new();
        for turn in 0..turns {
            let t = thread_cpu_ns();
            let tasks: Vec<_> = world.observe().tasks.iter().map(|t| t.id).collect();
            observe.push((thread_cpu_ns() - t) as f64 / 1e6);
            let plan = Plan {
                tasks: tasks
                    .iter()
                    .enumerate()
                    .map(|(i, id)| {
                        let cpu = (i as u32 + turn as u32) % cpus;
                        (
                            *id,
                            Placement::Run {
                                cpus: CpuSet::single(cpu),
                                why: "bench".into(),
                            },
                        )
                    })
                    .collect(),
                ..Plan::default()
            };
            let t = thread_cpu_ns();
            world.apply(&plan);
            moves.push((thread_cpu_ns() - t) as f64 / 1e6);
            let t = thread_cpu_ns();
            world.apply(&Plan::default());
            noop.push((thread_cpu_ns() - t) as f64 / 1e6);
        }
        // Paced as herd paces it (a 100 ms period): every turn, amortized,
        // including the look for forked processes every 250 ms; and the
        // share of threads whose sample was kept.
        let (kept_before, unread_before) = (world.stats.threads_kept, world.stats.threads_unread);
        let paced = paced_ms(turns, || {
            world.observe();
        });
        let kept = (world.stats.threads_kept - kept_before) as f64 / (turns * (n + 1)) as f64;
        let unread = (world.stats.threads_unread - unread_before) as f64 / (turns * (n + 1)) as f64;
        // The floor: one read of each thread's schedstat through a kept
        // descriptor, nothing else (what a turn cannot do without).
        let files: Vec<std::fs::File> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .unwrap()
            .filter_map(|e| std::fs::File::open(e.ok()?.path().join("schedstat")).ok())
            .collect();
        let mut buf = vec![0u8; 256];
        let mut floor = Vec::new();
        let mut floor_paced = 0.0;
        for paced in [false, true] {
            for _ in 0..turns {
                if paced {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                let t = thread_cpu_ns();
                for f in &files {
                    let _ = std::os::unix::fs::FileExt::read_at(f, &mut buf, 0);
                }
                let ms = (thread_cpu_ns() - t) as f64 / 1e6;
                if paced {
                    floor_paced += ms / turns as f64;
                } else {
                    floor.push(ms);
                }
            }
        }
        // One taskstats request for the whole process, paced (NaN where
        // the kernel or privileges give none).
        let mut group_paced = f64::NAN;
        if let Ok(mut ts) = herd_runtime::taskstats::Taskstats::open() {
            group_paced = 0.0;
            for _ in 0..turns {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let t = thread_cpu_ns();
                let answered = ts.group(child.id() as i32).is_ok();
                group_paced += (thread_cpu_ns() - t) as f64 / 1e6 / turns as f64;
                if !answered {
                    group_paced = f64::NAN;
                    break;
                }
            }
        }
        world.restore();
        drop(child.stdin.take());
        child.wait().unwrap();
        let obs = median(observe);
        println!(
            "{n:>6} {obs:>12.3} {paced:>12.3} {:>7.0}% {:>7.0}% {first:>12.3} {:>12.3} {:>12.4} {:>14.2} {:>12.3} {floor_paced:>12.3} {group_paced:>12.4}",
            kept * 100.0,
            unread * 100.0,
            median(moves),
            median(noop),
            obs * 1e3 / (n + 1) as f64,
            median(floor)
        );
    }
    println!(
        "live turn, herd's CPU per turn paced 100 ms apart (mean of {turns}), a tree of N single-threaded processes that each run every 50 ms"
    );
    println!(
        "{:>6} {:>8} {:>12} {:>14} {:>12} {:>14} {:>12}",
        "N", "seen", "paced ms", "paced us/proc", "floor ms", "floor us/proc", "from kernel"
    );
    for n in trees {
        let (seen, paced, floor, kernel) = tree_turns(n, turns);
        // Every process of the tree is watched: it measures what it claims.
        assert!(seen >= n, "observed {seen} threads of a tree of {n} processes");
        println!(
            "{n:>6} {seen:>8} {paced:>12.3} {:>14.2} {floor:>12.3} {:>14.2} {:>11.0}%",
            paced * 1e3 / n as f64,
            floor * 1e3 / n as f64,
            kernel * 100.0
        );
    }
}
