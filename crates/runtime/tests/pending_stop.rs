//! A program herd pauses with SIGSTOP takes the stop only when it next
//! runs: on a loaded machine a stopped process waiting for a CPU showed
//! state R with the stop pending past herd's 50 ms wait for it, and herd
//! reported it running (CI's batch test saw 3 programs "running" on 2
//! CPUs). Here a program waiting in vfork (workloads/vfork_hold.c, built
//! by `make workloads`) holds its stop pending for seconds, in state D:
//! the live sensor must report it paused, and after a restore nothing is
//! left stopped or with a stop pending.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herd_engine::{Actuator, Sensor};
use herd_policy::{Placement, Plan, TaskState};
use herd_runtime::live::{LiveWorld, Program};
use herd_runtime::procfs;

/// The state the live sensor reports for task `tid` at a new look.
fn state_seen(world: &mut LiveWorld, tid: i32) -> Option<TaskState> {
    world
        .observe()
        .tasks
        .iter()
        .find(|t| t.id == tid as u64)
        .map(|t| t.state)
}

/// Kills the program and the child it made when the test ends, passed or
/// failed: a failure must not leave either stopped.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: kill(2) on processes this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn a_program_whose_stop_is_still_pending_is_reported_paused() {
    let bin = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/workloads/vfork_hold");
    assert!(
        Path::new(bin).exists(),
        "{bin} is missing: run `make workloads` (make test does)"
    );
    let argv: Vec<String> = [bin, "--seconds", "4", "--after", "30"]
        .map(String::from)
        .to_vec();
    let child = herd_runtime::spawn::spawn(&argv).unwrap();
    let pid = child.id() as i32;
    let mut world = LiveWorld::new(
        vec![Program::new("hold".into(), "vfork_hold".into(), pid, Some(child))],
        Arc::default(),
    );
    let proc_root = Path::new("/proc");
    // In vfork: state D, a child beside it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let in_vfork =
        || procfs::state(proc_root, pid) == Some('D') && !procfs::subtree(proc_root, pid).is_empty();
    while !in_vfork() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _cleanup = KillOnDrop(
        std::iter::once(pid)
            .chain(procfs::subtree(proc_root, pid))
            .collect(),
    );
    assert_eq!(
        procfs::state(proc_root, pid),
        Some('D'),
        "the program waits in vfork"
    );
    let before = state_seen(&mut world, pid);
    assert_eq!(
        before,
        Some(TaskState::Blocked),
        "asleep in vfork, not paused yet"
    );
    world.apply(&Plan {
        tasks: vec![(pid as u64, Placement::Pause { why: "test".into() })],
        ..Plan::default()
    });
    // The stop is sent and cannot be taken before the child exits.
    assert!(procfs::stop_pending(proc_root, pid), "a stop pending");
    assert_eq!(procfs::state(proc_root, pid), Some('D'));
    let seen = state_seen(&mut world, pid);
    assert_eq!(
        seen,
        Some(TaskState::Paused),
        "a stop sent and pending is a pause"
    );
    // herd stopped the child too (a pause stops a program's processes):
    // the program's stop stays pending until a restore continues both,
    // which discards it. Nothing is left stopped: the child sleeps out
    // its time and exits, and the program goes on to its own sleep.
    world.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !procfs::subtree(proc_root, pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let (after, pending) = (
        procfs::state(proc_root, pid),
        procfs::stop_pending(proc_root, pid),
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    world.wait_all();
    assert!(!pending, "the stop was discarded");
    // Asleep after its vfork, or on its way there on a loaded machine.
    assert!(matches!(after, Some('S' | 'R')), "not stopped: {after:?}");
}
