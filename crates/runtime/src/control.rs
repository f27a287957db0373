//! Acting on threads and processes: CPU affinity and stop/continue.

use std::io;

use herd_topo::CpuSet;

/// The most CPUs `sched_setaffinity` with libc's fixed `cpu_set_t` can name.
pub const AFFINITY_CPUS: u32 = libc::CPU_SETSIZE as u32;

/// Restricts thread `tid` to `cpus`. Fails with ESRCH if the thread is gone
/// and EINVAL if none of `cpus` is usable.
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus.iter() {
        if cpu >= AFFINITY_CPUS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond {AFFINITY_CPUS}"),
            ));
        }
        // SAFETY: cpu < CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t of the size we pass.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Linux's `SCHED_RESET_ON_FORK` (include/uapi/linux/sched.h): threads and
/// processes the caller creates start under the normal policy.
const SCHED_RESET_ON_FORK: libc::c_int = 0x4000_0000;

/// Runs the calling thread under `SCHED_FIFO` at `priority` (1..=99), so a
/// control loop with sub-millisecond periods is not held up by the busy
/// threads it manages; with `SCHED_RESET_ON_FORK`, nothing it starts
/// inherits the policy. The kernel's real-time throttling (95% of each
/// second by default) bounds what a runaway loop could take. EPERM without
/// root, CAP_SYS_NICE or an RLIMIT_RTPRIO that allows the priority.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    if priority < 1 {
        // SCHED_FIFO has no priority 0 (set_thread_priority would mean the
        // normal policy by it).
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // Thread id 0 is the calling thread.
    set_thread_priority(0, priority)
}

/// The SCHED_FIFO priorities of a plan's lanes (`herd_policy::Lane`):
/// below herd's own loop (10 under `--realtime`), so the loop always gets
/// to change them.
pub const LANE_FRONT: i32 = 2;
/// See [`LANE_FRONT`].
pub const LANE_BACK: i32 = 1;

/// Whether thread `tid` runs SCHED_FIFO at a lane's priority: a thread a
/// plan put in a lane (or one of the program's own at that priority).
pub fn in_lane(tid: i32) -> bool {
    // SAFETY: plain system calls on a thread id; param is written by the kernel.
    unsafe {
        let policy = libc::sched_getscheduler(tid);
        let mut param = libc::sched_param { sched_priority: 0 };
        policy >= 0
            && policy & !SCHED_RESET_ON_FORK == libc::SCHED_FIFO
            && libc::sched_getparam(tid, &mut param) == 0
            && (LANE_BACK..=LANE_FRONT).contains(&param.sched_priority)
    }
}

/// Puts thread `tid` (0: the caller) under `SCHED_FIFO` at `priority`
/// (1..=99), with `SCHED_RESET_ON_FORK`, or back under the normal policy
/// for priority 0: herd's loop, and a policy's lanes (`herd_policy::Lane`).
/// ESRCH if the thread is gone.
pub fn set_thread_priority(tid: i32, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    let policy = if priority > 0 {
        libc::SCHED_FIFO | SCHED_RESET_ON_FORK
    } else {
        libc::SCHED_OTHER
    };
    // SAFETY: param is a valid sched_param; tid is a plain id.
    let rc = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread back under the normal policy.
pub fn set_normal() -> io::Result<()> {
    set_thread_priority(0, 0)
}

/// The CPUs thread `tid` may run on.
pub fn affinity(tid: i32) -> io::Result<CpuSet> {
    // SAFETY: as above; the kernel writes into set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid, writable cpu_set_t of the size we pass.
    let rc = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: cpu < CPU_SETSIZE for every index tested.
    Ok((0..AFFINITY_CPUS)
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect())
}

/// A pidfd for `pid`: readable once the process exits (Linux >= 5.3).
pub fn pidfd(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a fresh descriptor we now own.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `signal` to process `pid`.
pub fn signal(pid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the caller may signal `pid` (the permission check herd applies
/// before managing a process: it refuses what the user could not do anyway).
pub fn may_signal(pid: i32) -> io::Result<()> {
    signal(pid, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_round_trips_on_this_thread() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let before = affinity(tid).unwrap();
        let one = CpuSet::single(before.first().unwrap());
        set_affinity(tid, &one).unwrap();
        assert_eq!(affinity(tid).unwrap(), one);
        set_affinity(tid, &before).unwrap();
        assert_eq!(affinity(tid).unwrap(), before);
        assert!(
            set_affinity(tid, &CpuSet::new()).is_err(),
            "the empty set is refused"
        );
        assert!(
            set_affinity(i32::MAX, &before).is_err(),
            "a missing thread is an error"
        );
    }

    #[test]
    fn signalling_checks_permission() {
        assert!(may_signal(std::process::id() as i32).is_ok());
        assert!(may_signal(i32::MAX).is_err());
    }
}
