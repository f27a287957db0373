//! A C program linked with herd's heartbeat library (workloads/beats.c,
//! built by `make workloads`) reports per-thread progress, and the live
//! sensor sees it per task, with no system call per beat; its file is gone
//! after a normal exit (the library) and after a kill (herd). One test:
//! the heartbeat directory is process-wide state.

use std::sync::Arc;
use std::time::Duration;

use herd_engine::Sensor;
use herd_runtime::live::{LiveWorld, Program};

#[test]
fn the_sensor_sees_each_threads_heartbeats_and_no_file_outlives_its_program() {
    let bin = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/workloads/beats");
    assert!(
        std::path::Path::new(bin).exists(),
        "{bin} is missing: run `make workloads` (make test does)"
    );
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this test binary runs this one test; nothing reads the
    // environment concurrently.
    unsafe { std::env::set_var("HERD_HEARTBEAT_DIR", dir.path()) };
    let argv: Vec<String> = [bin, "--threads", "3", "--seconds", "1.5", "--rate", "200"]
        .map(String::from)
        .to_vec();
    let child = herd_runtime::spawn::spawn(&argv).unwrap();
    let pid = child.id() as i32;
    let mut world = LiveWorld::new(
        vec![Program::new("beats".into(), "beats".into(), pid, Some(child))],
        Arc::default(),
    );
    let mut last: Vec<(u64, u64)> = Vec::new();
    let mut seen_threads = 0;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        let snap = world.observe();
        let beats: Vec<(u64, u64)> = snap
            .tasks
            .iter()
            .filter_map(|t| t.heartbeats.map(|b| (t.id, b)))
            .collect();
        seen_threads = seen_threads.max(beats.len());
        for (id, b) in &beats {
            if let Some((_, before)) = last.iter().find(|(i, _)| i == id) {
                assert!(b >= before, "beats only grow: {b} < {before}");
            }
        }
        last = beats;
    }
    world.wait_all();
    let file = herd_heartbeat::path_of(dir.path(), pid);
    assert!(!file.exists(), "the program removed its file at exit");
    assert_eq!(
        seen_threads, 3,
        "each worker thread reports its own beats; the main thread none"
    );
    // Thread i beats at (i + 1) x 200 per second: the counts differ.
    let mut counts: Vec<u64> = last.iter().map(|(_, b)| *b).collect();
    counts.sort_unstable();
    assert!(counts[2] > counts[0] * 2, "{counts:?}");

    // A killed program cannot remove its file; herd does when it reaps it.
    let argv: Vec<String> = [bin, "--threads", "1", "--seconds", "30"]
        .map(String::from)
        .to_vec();
    let child = herd_runtime::spawn::spawn(&argv).unwrap();
    let pid = child.id() as i32;
    let file = herd_heartbeat::path_of(dir.path(), pid);
    let mut world = LiveWorld::new(
        vec![Program::new("beats".into(), "beats".into(), pid, Some(child))],
        Arc::default(),
    );
    for _ in 0..100 {
        if file.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(file.exists(), "the program made its file");
    world.observe();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    world.wait_all();
    assert!(!file.exists(), "herd removed {}", file.display());
}
