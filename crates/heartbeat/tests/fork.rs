//! A forked child beats into a file of its own and leaves its parent's
//! alone. Its own test binary: it forks, and sets the process's heartbeat
//! directory.

use herd_heartbeat::{Reader, beat_n, init, path_of};

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[test]
fn a_forked_child_beats_into_its_own_file_and_leaves_the_parents() {
    let tmp = tempfile::tempdir().unwrap();
    // SAFETY: this binary's only test sets it before any beat.
    unsafe { std::env::set_var("HERD_HEARTBEAT_DIR", tmp.path()) };
    init().unwrap();
    assert!(beat_n(3));
    let parent = path_of(tmp.path(), std::process::id() as i32);
    // SAFETY: the child calls only this library, the reader and exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The child: its beats land in herd-hb.<its pid>, under its own
        // thread id; a failure is its exit code (a panic here would run
        // the test harness twice).
        let ok = beat_n(5)
            && Reader::open(&path_of(tmp.path(), std::process::id() as i32))
                .is_ok_and(|r| r.beats() == vec![(gettid(), 5)]);
        // SAFETY: ends the child. exit, not _exit: the atexit hook runs,
        // as at a normal exit.
        unsafe { libc::exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's check failed: {status}"
    );
    // The parent's file survived the child's exit with only its own beats,
    // and the child's exit removed the child's file.
    let r = Reader::open(&parent).unwrap();
    assert_eq!(r.beats(), vec![(gettid(), 3)]);
    assert!(!path_of(tmp.path(), pid).exists());
    // The parent keeps beating into its own slot.
    assert!(beat_n(1));
    assert_eq!(r.beats(), vec![(gettid(), 4)]);
}
