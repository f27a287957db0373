//! Opening perf_event counters on a thread.
//!
//! The raw syscall comes from `perf-event-open-sys` (bindings generated from
//! the kernel headers); this module adds the few safe wrappers herd needs.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use perf_event_open_sys as sys;
use perf_event_open_sys::bindings as b;

/// A counter herd asks perf_event for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Retired instructions (hardware).
    Instructions,
    /// Core cycles (hardware).
    Cycles,
    /// Last-level-cache misses (hardware, generic "cache misses").
    LlcMisses,
    /// Last-level-cache references (hardware).
    LlcReferences,
    /// CPU time of the task (software).
    TaskClock,
    /// Context switches (software).
    ContextSwitches,
    /// Migrations between CPUs (software).
    CpuMigrations,
}

impl Event {
    /// The name `perf list` uses.
    pub fn name(self) -> &'static str {
        match self {
            Event::Instructions => "instructions",
            Event::Cycles => "cycles",
            Event::LlcMisses => "cache-misses",
            Event::LlcReferences => "cache-references",
            Event::TaskClock => "task-clock",
            Event::ContextSwitches => "context-switches",
            Event::CpuMigrations => "cpu-migrations",
        }
    }

    /// Whether the PMU (rather than the kernel) counts it.
    pub fn is_hardware(self) -> bool {
        matches!(
            self,
            Event::Instructions | Event::Cycles | Event::LlcMisses | Event::LlcReferences
        )
    }

    fn type_and_config(self) -> (u32, u64) {
        match self {
            Event::Instructions => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_INSTRUCTIONS as u64),
            Event::Cycles => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64),
            Event::LlcMisses => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CACHE_MISSES as u64),
            Event::LlcReferences => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CACHE_REFERENCES as u64),
            Event::TaskClock => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_TASK_CLOCK as u64),
            Event::ContextSwitches => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64),
            Event::CpuMigrations => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CPU_MIGRATIONS as u64),
        }
    }
}

/// Opens `event` counting user-space work of thread `tid` (0 = the caller)
/// on any CPU, inherited by threads it creates afterwards.
pub fn open_counter(event: Event, tid: i32) -> io::Result<OwnedFd> {
    open(event, tid, true)
}

/// Opens `event` for exactly thread `tid` (not its future threads: herd
/// opens one per thread it sees, and inheriting would count twice).
pub fn open_thread_counter(event: Event, tid: i32) -> io::Result<OwnedFd> {
    open(event, tid, false)
}

/// Reads a counter's current value.
pub fn read_counter(fd: &OwnedFd) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut value = 0u64;
    // SAFETY: reading 8 bytes into a u64 from a perf_event fd.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8) };
    (n == 8).then_some(value)
}

fn open(event: Event, tid: i32, inherit: bool) -> io::Result<OwnedFd> {
    let (type_, config) = event.type_and_config();
    let mut attr = b::perf_event_attr {
        type_,
        config,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        ..Default::default()
    };
    // Hardware events: user space only; counting the kernel needs
    // perf_event_paranoid <= 1, and herd's decisions are about the
    // programs' own work. Software events (migrations, switches) happen in
    // the kernel by nature, so excluding it would count nothing.
    if event.is_hardware() {
        attr.set_exclude_kernel(1);
    }
    attr.set_exclude_hv(1);
    attr.set_inherit(u64::from(inherit));
    // SAFETY: attr is a fully initialised perf_event_attr whose size field
    // matches the struct; the kernel only reads it.
    let fd = unsafe { sys::perf_event_open(&mut attr, tid, -1, -1, b::PERF_FLAG_FD_CLOEXEC as u64) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor the kernel just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A short explanation of why perf_event_open failed, for `herd doctor`.
pub fn explain_open_error(err: &io::Error, paranoid: Option<i32>) -> String {
    let why = match err.raw_os_error() {
        Some(libc::ENOENT) => {
            "the kernel has no such event: no PMU driver exposes it (typical of a VM without a virtual PMU)"
                .to_string()
        }
        Some(libc::EOPNOTSUPP) => "the PMU does not support this event".to_string(),
        Some(libc::EACCES) | Some(libc::EPERM) => match paranoid {
            Some(p) => format!("not permitted with kernel.perf_event_paranoid={p}: run as root or lower it"),
            None => "not permitted: run as root or lower kernel.perf_event_paranoid".to_string(),
        },
        Some(libc::ENODEV) => "no device supports this event".to_string(),
        Some(libc::ENOSYS) => "the kernel was built without perf_event support".to_string(),
        Some(libc::EMFILE) => "too many open files".to_string(),
        _ => "perf_event_open failed".to_string(),
    };
    format!("{why} ({err})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_migrations_count_forced_moves() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let Ok(fd) = open_thread_counter(Event::CpuMigrations, tid) else {
            eprintln!("skipped: no software perf events here");
            return;
        };
        let cpus = crate::control::affinity(tid).unwrap();
        let before = read_counter(&fd).unwrap();
        // Bounce between two CPUs to force migrations.
        let two: Vec<u32> = cpus.iter().take(2).collect();
        for &cpu in two.iter().cycle().take(6) {
            crate::control::set_affinity(tid, &herd_topo::CpuSet::single(cpu)).unwrap();
            std::thread::yield_now();
        }
        crate::control::set_affinity(tid, &cpus).unwrap();
        let moved = read_counter(&fd).unwrap() - before;
        if cpus.len() >= 2 {
            assert!(moved >= 3, "{moved} migrations counted");
        }
    }
}
