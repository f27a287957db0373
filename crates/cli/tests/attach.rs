//! `herd attach`: manages a process it did not start, gives it back as it
//! found it on SIGTERM, and refuses what the user could not signal.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::allowed;

#[test]
fn attach_places_then_detaches_and_restores() {
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    let before = allowed(target.id());
    let mut herd = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args([
            "attach",
            &target.id().to_string(),
            "--policy",
            "static:compact",
            "--period-ms",
            "20",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Placed at the first decision; a loaded machine may take a while.
    let machine = herd_topo::Machine::this_machine().unwrap();
    let first_compact = machine.cores()[0].cpus.first().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut during = allowed(target.id());
    while during != first_compact.to_string() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        during = allowed(target.id());
    }
    // SAFETY: plain kill.
    unsafe { libc::kill(herd.id() as i32, libc::SIGTERM) };
    let status = herd.wait().unwrap();
    let after = allowed(target.id());
    let still_running = target.try_wait().unwrap().is_none();
    target.kill().unwrap();
    target.wait().unwrap();
    assert!(status.success(), "attach exits 0 when detaching");
    assert!(
        still_running,
        "a detach does not pass the signal to a process herd did not start"
    );
    assert_eq!(during, first_compact.to_string(), "placed while attached");
    assert_eq!(after, before, "affinity restored on detach");
}

#[test]
fn attach_refuses_processes_the_user_cannot_signal() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run herd as another user");
        return;
    }
    // As 'nobody', PID 1 cannot be signalled.
    let out = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["attach", "1"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not permitted"));
    let out = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["attach", "999999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
