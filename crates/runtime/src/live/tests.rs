//! The live world's tests on real processes of this machine.

use super::*;
use herd_engine::Actuator;
use herd_policy::{Placement, Plan};

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
    let go = std::env::temp_dir().join(format!("herd-old-pin-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let script = format!(
        "import os, threading, time\nwhile not os.path.exists({:?}): time.sleep(0.01)\n\
         threading.Thread(target=time.sleep, args=(30,)).start()\ntime.sleep(30)",
        go.display().to_string()
    );
    let child = spawn(&["python3".into(), "-c".into(), script]).unwrap();
    let pid = child.id() as i32;
    let mut world = LiveWorld::new(
        vec![Program::new("py".into(), "python3".into(), pid, Some(child))],
        Arc::default(),
    );
    let pin = |cpu: u32| Plan {
        tasks: vec![(
            pid as u64,
            Placement::Run {
                cpus: CpuSet::single(cpu),
                why: "test".into(),
            },
        )],
        ..Plan::default()
    };
    world.observe();
    world.apply(&pin(cpus[0]));
    // The thread is born on the first pin, then herd moves its creator
    // before it looks again.
    std::fs::write(&go, "").unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while procfs::threads(Path::new("/proc"), pid).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&go);
    world.apply(&pin(cpus[1]));
    world.observe();
    let threads = procfs::threads(Path::new("/proc"), pid);
    world.restore();
    let masks: Vec<(i32, CpuSet)> = threads
        .iter()
        .map(|&t| (t, control::affinity(t).unwrap()))
        .collect();
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    world.wait_all();
    assert_eq!(threads.len(), 2, "{threads:?}");
    for (t, m) in masks {
        assert_eq!(m, all, "thread {t} of {pid} was left pinned");
    }
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
