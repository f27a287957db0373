//! The live world's tests on real processes of this machine.

use super::*;
use herd_engine::Actuator;
use herd_policy::{Placement, Plan};

/// A Python program that starts one (sleeping) thread when told
/// ([`Starter::start_thread`]), under a live world: as `make` forks a
/// compiler, the thread inherits its creator's mask.
struct Starter {
    world: LiveWorld,
    pid: i32,
    go: PathBuf,
    ended: bool,
}

/// A test that fails before its end leaves no program behind (nor the
/// process a program forked, which ends with its parent).
impl Drop for Starter {
    fn drop(&mut self) {
        if !self.ended {
            // SAFETY: kill(2) on our own unreaped child's pid.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = std::fs::remove_file(&self.go);
        }
    }
}

impl Starter {
    fn new(tag: &str) -> Starter {
        Starter::doing(tag, "threading.Thread(target=time.sleep, args=(30,)).start()")
    }

    /// A program that runs the Python statements `action` when told.
    fn doing(tag: &str, action: &str) -> Starter {
        let go = std::env::temp_dir().join(format!("herd-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&go);
        let script = format!(
            "import os, threading, time\nwhile not os.path.exists({:?}): time.sleep(0.01)\n{action}\ntime.sleep(30)",
            go.display().to_string()
        );
        let child = spawn(&["python3".into(), "-c".into(), script]).unwrap();
        let pid = child.id() as i32;
        // `python3` may be a shell script that finds the interpreter (a
        // pyenv shim) and forks while it looks: wait for the interpreter.
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        let is_python = || {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| {
                e.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("python"))
            })
        };
        while !is_python() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let world = LiveWorld::new(
            vec![Program::new("py".into(), "python3".into(), pid, Some(child))],
            Arc::default(),
        );
        Starter {
            world,
            pid,
            go,
            ended: false,
        }
    }

    /// Pins the main thread to `cpu`.
    fn pin(&mut self, cpu: u32) {
        self.world.apply(&Plan {
            tasks: vec![(
                self.pid as u64,
                Placement::Run {
                    cpus: CpuSet::single(cpu),
                    why: "test".into(),
                },
            )],
            ..Plan::default()
        });
    }

    /// Has the program start its thread, and waits until it has.
    fn start_thread(&self) {
        std::fs::write(&self.go, "").unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while procfs::threads(Path::new("/proc"), self.pid).len() < 2 && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&self.go);
    }

    /// Has the program fork its one process, and says which that is.
    fn fork_on_go(&self) -> Vec<i32> {
        let root = Path::new("/proc");
        std::fs::write(&self.go, "").unwrap();
        // Python's start takes seconds when the whole suite runs beside it.
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while procfs::subtree(root, self.pid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&self.go);
        let child = procfs::subtree(root, self.pid);
        assert_eq!(child.len(), 1, "{child:?}");
        child
    }

    /// Each thread's mask after a restore; the program is killed.
    fn restore_and_end(mut self) -> Vec<(i32, CpuSet)> {
        let threads = procfs::threads(Path::new("/proc"), self.pid);
        self.world.restore();
        let masks = threads
            .iter()
            .map(|&t| (t, control::affinity(t).unwrap()))
            .collect();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.world.wait_all();
        self.ended = true;
        masks
    }
}

/// Has `world` place thread `pid` on `cpus`, alone in its plan.
fn run_on(world: &mut LiveWorld, pid: i32, cpus: CpuSet) {
    world.apply(&Plan {
        tasks: vec![(
            pid as u64,
            Placement::Run {
                cpus,
                why: "test".into(),
            },
        )],
        ..Plan::default()
    });
}

/// A thread made while its creator sat on a mask herd gave it, that
/// herd sees only after moving the creator on, inherited a pin, not a
/// choice of its program: a restore gives it its program's mask (a
/// 2-socket guest's `sigkill` check once found a worker left on a
/// node's CPUs this way).
#[test]
fn a_thread_born_on_an_old_pin_gets_its_programs_mask_back() {
    let all = control::affinity(0).unwrap();
    let cpus: Vec<u32> = all.iter().collect();
    if cpus.len() < 2 {
        return;
    }
    let mut p = Starter::new("old-pin");
    p.world.observe();
    p.pin(cpus[0]);
    // The thread is born on the first pin, then herd moves its creator
    // before it looks again.
    p.start_thread();
    p.pin(cpus[1]);
    p.world.observe();
    let masks = p.restore_and_end();
    assert_eq!(masks.len(), 2, "{masks:?}");
    for (t, m) in masks {
        assert_eq!(m, all, "thread {t} was left pinned");
    }
}

/// A thread born on a pin herd gave its creator is no placement of
/// herd's: it gets its program's mask as soon as herd sees it, and the
/// kernel places it until the policy does (`make -j2` under
/// static:compact ran each compiler on make's one CPU).
#[test]
fn a_thread_born_on_its_creators_pin_runs_on_its_programs_mask_until_placed() {
    let all = control::affinity(0).unwrap();
    if all.len() < 2 {
        return;
    }
    let first = all.iter().next().unwrap();
    let mut p = Starter::new("born-pinned");
    p.world.observe();
    p.pin(first);
    p.start_thread();
    // herd sees the thread; no policy has placed it.
    p.world.observe();
    let pid = p.pid;
    let now: Vec<(i32, CpuSet)> = procfs::threads(Path::new("/proc"), pid)
        .into_iter()
        .map(|t| (t, control::affinity(t).unwrap()))
        .collect();
    p.restore_and_end();
    assert_eq!(now.len(), 2, "{now:?}");
    for (t, m) in now {
        let want = if t == pid {
            CpuSet::single(first)
        } else {
            all.clone()
        };
        assert_eq!(m, want, "thread {t} (main: {pid})");
    }
}

/// A process forked by a thread herd pinned is given its program's mask
/// at birth, from the kernel's fork event, not at herd's next look (a
/// compiler `make` forks lives about 120 ms: a period on make's CPU made
/// `make -j2` 1.10x plain Linux's time under static:compact).
#[test]
fn as_root_a_process_forked_on_a_pin_gets_its_programs_mask_at_birth() {
    let all = control::affinity(0).unwrap();
    if all.len() < 2 {
        return;
    }
    if crate::proc_events::ProcEvents::open().is_err() {
        eprintln!("skipped: no proc connector here (not root, or no CONFIG_PROC_EVENTS)");
        return;
    }
    let first = all.iter().next().unwrap();
    let out = std::env::temp_dir().join(format!("herd-born-mask-out-{}", std::process::id()));
    let _ = std::fs::remove_file(&out);
    // The child reads its mask 0.3 s after birth and writes it down
    // (renamed into place: the test stops waiting once it is there).
    let action = format!(
        "if os.fork() == 0:\n    time.sleep(0.3)\n    \
         open({0:?} + '.new', 'w').write(','.join(map(str, sorted(os.sched_getaffinity(0)))))\n    \
         os.rename({0:?} + '.new', {0:?})\n    os._exit(0)",
        out.display().to_string()
    );
    let mut p = Starter::doing("born-mask", &action);
    p.world.observe();
    p.pin(first);
    std::fs::write(&p.go, "").unwrap();
    // herd waits out a period and does not look: only the fork event can
    // free the child.
    let until = p.world.now_ns() + 2_000_000_000;
    let deadline = Instant::now() + std::time::Duration::from_secs(4);
    while !out.exists() && Instant::now() < deadline {
        p.world.advance_to((p.world.now_ns() + 100_000_000).min(until));
    }
    let _ = std::fs::remove_file(&p.go);
    let freed = p.world.stats.births_freed;
    p.restore_and_end();
    let seen = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    let want: Vec<String> = all.iter().map(|c| c.to_string()).collect();
    assert_eq!(seen, want.join(","), "the child's mask 0.3 s after birth");
    // The child at least (`python3` may be a wrapper that forks too).
    assert!(freed >= 1, "{freed}");
}

#[test]
fn the_sensor_sees_cpu_time_and_says_which_counters_exist() {
    // Busy until killed: a loop of fixed length can end before the second
    // observation on a fast machine, and then there is no thread to see.
    let child = spawn(&["sh".into(), "-c".into(), "while :; do :; done".into()]).unwrap();
    let pid = child.id() as i32;
    let mut world = LiveWorld::new(
        vec![Program::new("sh".into(), "sh".into(), pid, Some(child))],
        Arc::default(),
    );
    world.observe();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let snap = world.observe().clone();
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    world.wait_all();
    let task = snap
        .tasks
        .iter()
        .find(|t| t.id == pid as u64)
        .expect("the main thread is seen");
    assert!(
        task.obs.cpu_time_ns > 0,
        "a busy program used CPU: {:?}",
        task.obs
    );
    // Hardware fields are present exactly when this machine can count them.
    let hw = crate::perf::open_counter(crate::perf::Event::Instructions, 0).is_ok();
    assert_eq!(task.obs.instructions.is_some(), hw, "{:?}", task.obs);
    assert_eq!(task.obs.mem_bytes.is_some(), hw);
}

/// The look for forked processes finds a fork made since the last look,
/// and reads nothing when no process was made anywhere since (80 busy
/// hackbench processes had every `children` list read four times a
/// second for nothing).
#[test]
fn the_family_is_looked_for_again_only_after_a_fork() {
    let mut p = Starter::doing(
        "family",
        "parent = os.getpid()\nif os.fork() == 0:\n    while os.getppid() == parent: time.sleep(0.05)\n    os._exit(0)",
    );
    let root = Path::new("/proc");
    // A pyenv shim forks helpers before it execs Python: wait for Python.
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    let exe = |pid: i32| std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    while !(exe(p.pid).to_string_lossy().contains("python") && procfs::subtree(root, p.pid).is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    p.world.rescan_family();
    assert!(p.world.family[0].is_empty(), "{:?}", p.world.family);
    let child = p.fork_on_go();
    p.world.rescan_family();
    assert_eq!(p.world.family[0], child, "found after the fork");
    // Forgotten on purpose: a look would find the child again, a skipped
    // one leaves the family as it is. Other tests fork beside this one,
    // so it tries until no process was made during an attempt.
    let mut skipped = false;
    for _ in 0..400 {
        p.world.family[0].clear();
        let kept = p.world.family_key.as_ref().map(|k| k.0);
        let before = procfs::last_pid(root);
        p.world.rescan_family();
        if kept.is_some() && kept == before && procfs::last_pid(root) == before {
            assert!(p.world.family[0].is_empty(), "looked again with nothing forked");
            skipped = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(skipped, "no quiet moment in 400 tries");
    p.restore_and_end();
}

/// A plan that asks a thread herd never placed for the mask it had when
/// herd first saw it changes nothing: no call (a mask the program set
/// itself since stays), no placement counted, no keeper needed; a real
/// move is made and undone as before.
#[test]
fn asking_a_thread_for_its_first_mask_changes_nothing() {
    let all = control::affinity(0).unwrap();
    let cpus: Vec<u32> = all.iter().collect();
    if cpus.len() < 2 {
        return;
    }
    let mut p = Starter::doing("first-mask", &format!("os.sched_setaffinity(0, {{{}}})", cpus[0]));
    p.world.observe();
    std::fs::write(&p.go, "").unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while control::affinity(p.pid).unwrap() == all && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&p.go);
    run_on(&mut p.world, p.pid, all.clone());
    assert_eq!(
        control::affinity(p.pid).unwrap(),
        CpuSet::single(cpus[0]),
        "the program's own mask stays"
    );
    assert_eq!(p.world.stats.placements, 0);
    run_on(&mut p.world, p.pid, CpuSet::single(cpus[1]));
    assert_eq!(control::affinity(p.pid).unwrap(), CpuSet::single(cpus[1]));
    assert_eq!(p.world.stats.placements, 1);
    let masks = p.restore_and_end();
    assert!(masks.iter().all(|(_, m)| *m == all), "{masks:?}");
}

/// A thread first left on the mask it had, and moved off it later, is
/// told to the keeper before the move: told only when herd had placed it
/// nowhere, it went untold, and a SIGKILLed herd left its program pinned
/// (vm-test's `sigkill` on 2s2c2t). The keeper here is a script that
/// writes down what it is told.
#[test]
fn the_keeper_hears_of_a_thread_moved_off_the_mask_herd_left_it_on() {
    let all = control::affinity(0).unwrap();
    let cpus: Vec<u32> = all.iter().collect();
    if cpus.len() < 2 {
        return;
    }
    let dir = std::env::temp_dir().join(format!("herd-told-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (exe, heard) = (dir.join("keeper"), dir.join("heard"));
    std::fs::write(&exe, format!("#!/bin/sh\nexec cat > {}\n", heard.display())).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut p = Starter::new("told");
    p.world.keep_with(exe);
    p.world.observe();
    run_on(&mut p.world, p.pid, all.clone());
    run_on(&mut p.world, p.pid, CpuSet::single(cpus[1]));
    assert_eq!(control::affinity(p.pid).unwrap(), CpuSet::single(cpus[1]));
    let pid = p.pid;
    p.restore_and_end();
    let told = crate::keeper::Told::read(std::io::BufReader::new(std::fs::File::open(&heard).unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(told.pins.get(&pid).map(|(_, m)| m), Some(&all), "{told:?}");
    assert!(told.done);
}

/// A process's thread list is kept from turn to turn (`thread_lists`), and
/// a thread it starts is seen in the first turn after: its creator ran,
/// and its `stat` counts one thread more than the list holds. One that
/// ends is gone from the next turn.
#[test]
fn a_new_thread_is_seen_in_the_next_turn_and_an_ended_one_leaves() {
    let mut p = Starter::doing("born", "threading.Thread(target=time.sleep, args=(3,)).start()");
    let root = Path::new("/proc");
    let seen = |world: &mut LiveWorld| -> Vec<u64> {
        let mut ids: Vec<u64> = world.observe().tasks.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        ids
    };
    // Python's own start may run threads of its own: wait for one.
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while procfs::threads(root, p.pid).len() != 1 && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(seen(&mut p.world), vec![p.pid as u64]);
    assert_eq!(seen(&mut p.world), vec![p.pid as u64], "kept");
    p.start_thread();
    let now: Vec<u64> = procfs::threads(root, p.pid).iter().map(|&t| t as u64).collect();
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(seen(&mut p.world), now, "the new thread, in the first turn after");
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while procfs::threads(root, p.pid).len() > 1 && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(seen(&mut p.world), vec![p.pid as u64], "the ended one is gone");
    p.restore_and_end();
}

/// A process forked by a thread the lists did not hold yet is found once
/// the thread is listed, though nothing forked since the look that missed
/// it (Python's `subprocess` from a worker thread).
#[test]
fn a_process_forked_by_a_new_thread_is_found_once_the_thread_is_listed() {
    let mut p = Starter::doing(
        "thread-fork",
        "def work():\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\n    time.sleep(30)\n\
         threading.Thread(target=work).start()",
    );
    let root = Path::new("/proc");
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    let exe = |pid: i32| std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    while !(exe(p.pid).to_string_lossy().contains("python") && procfs::threads(root, p.pid).len() == 1)
        && Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    p.world.observe();
    p.world.rescan_family();
    let child = p.fork_on_go();
    // A look now reads the lists the last turn left, without the new
    // thread: it misses what that forked, where it reads `children` lists.
    p.world.rescan_family();
    if procfs::children_lists(root) {
        assert!(p.world.family[0].is_empty(), "{:?}", p.world.family);
    }
    // The turn lists the new thread; the next look finds what it forked,
    // though nothing may have forked since the look that missed it.
    p.world.observe();
    p.world.rescan_family();
    assert_eq!(p.world.family[0], child, "found once the thread was listed");
    p.restore_and_end();
}

/// Once a run has read enough from `/proc`, herd's eBPF program takes
/// over (`kernel_times`; here at once), loaded on a thread of its own: the
/// turns go on meanwhile, and after it the times a turn reports for a
/// working thread are what its `schedstat` says it used. Where the
/// program does not load here (not root, no BTF, built without clang) the
/// turns go on from `/proc`, and the test says so and ends.
#[test]
fn the_kernels_program_takes_over_and_reports_what_proc_would() {
    let mut p = Starter::doing(
        "kernel-times",
        "threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()",
    );
    p.start_thread();
    let worker = *procfs::threads(Path::new("/proc"), p.pid).iter().max().unwrap();
    p.world.kernel = super::kernel_times::KernelTimes::after_reads(0);
    let schedstat = || {
        let text = std::fs::read_to_string(format!("/proc/{}/task/{worker}/schedstat", p.pid)).unwrap();
        procfs::parse_schedstat(&text).unwrap().0
    };
    // Turns until the program is loaded and has seen the worker switch.
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while p.world.stats.threads_from_kernel == 0 && Instant::now() < deadline {
        p.world.observe();
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if p.world.stats.threads_from_kernel == 0 {
        eprintln!(
            "skipped: {}",
            crate::sched_bpf::SchedWatch::open()
                .err()
                .map_or("it loads, yet no thread was read from it".into(), |e| e
                    .to_string())
        );
        assert!(
            crate::sched_bpf::SchedWatch::open().is_err(),
            "the program loads, yet no turn read from it"
        );
        return;
    }
    // Its reported CPU time over a second of turns against schedstat's.
    let before = schedstat();
    let mut reported = 0;
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let snap = p.world.observe();
        reported += snap
            .tasks
            .iter()
            .find(|t| t.id == worker as u64)
            .map_or(0, |t| t.obs.cpu_time_ns);
    }
    let used = schedstat() - before;
    let from_kernel = p.world.stats.threads_from_kernel;
    assert!(from_kernel >= 10, "{from_kernel} samples from the program");
    // The program's figure runs to the turn's clock; schedstat's lags by
    // up to a tick, and the two reads are a turn apart: within a fifth.
    let ratio = reported as f64 / used.max(1) as f64;
    assert!(
        (0.8..1.25).contains(&ratio),
        "reported {reported} ns, schedstat {used} ns"
    );
    p.restore_and_end();
}
