//! Open-file limits. herd keeps a few descriptors open per watched thread
//! (its `/proc` files and perf counters), so a program of a few hundred
//! threads exhausts the usual soft limit of 1024, and at that point herd
//! would stop seeing new threads. herd raises its own soft limit to the
//! hard one at start (what systemd's documentation recommends for
//! programs that need many descriptors), and gives the programs it starts
//! the limit they would have had without herd: some still use `select()`,
//! which cannot take descriptors above 1023.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// The soft limit before herd raised it; `u64::MAX` while not raised.
static ORIGINAL_SOFT: AtomicU64 = AtomicU64::new(u64::MAX);

/// The open-file limits: (soft, hard).
pub fn limits() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// Raises the soft open-file limit to the hard one (or to the kernel's
/// `fs.nr_open` where the hard limit is unlimited), remembering the old
/// one for [`restore_in_child`]. Returns the soft limit now in force.
pub fn raise() -> io::Result<u64> {
    let (soft, hard) = limits()?;
    if soft >= hard {
        return Ok(soft);
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    let want = hard.min(nr_open).max(soft);
    let r = libc::rlimit {
        rlim_cur: want,
        rlim_max: hard,
    };
    // SAFETY: r is a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Only the first raise records the user's limit.
    let _ = ORIGINAL_SOFT.compare_exchange(u64::MAX, soft, Ordering::SeqCst, Ordering::SeqCst);
    Ok(want)
}

/// Gives a child, between fork and exec, the soft limit herd started
/// with. Async-signal-safe: an atomic load and two system calls.
pub(crate) fn restore_in_child() -> io::Result<()> {
    let original = ORIGINAL_SOFT.load(Ordering::SeqCst);
    if original == u64::MAX {
        return Ok(());
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer, then a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return Err(io::Error::last_os_error());
        }
        r.rlim_cur = original.min(r.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether an error says this process (or the system) is out of
/// descriptors or memory for one: a limit reached, not a refusal.
pub fn exhausted(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM))
}
