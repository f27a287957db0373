//! Per-thread scheduler times from the kernel itself, through an eBPF
//! program on `sched_switch` and `sched_wakeup` (`bpf/sched.bpf.c`).
//!
//! Why: a live turn must know, for every thread that ran, its CPU time,
//! run-queue wait, slices, state, last CPU and its process's thread count.
//! From `/proc` that is a `pread` of `schedstat` and one of `stat` per
//! thread: 11.5-12.2 µs a thread at 1,024 busy processes here, 12 ms a turn
//! (docs/results.md, issue 28), the floor of any `/proc` reader. The program
//! copies the same kernel fields (`se.sum_exec_runtime`,
//! `sched_info.run_delay` and `pcount`, the switch's CPU and state,
//! `signal->nr_threads`) into a slot per watched thread at each of its
//! switches, in an array map shared with herd by `mmap`: reading a thread
//! is a few loads. sched_ext's tools keep per-task times the same way.
//!
//! What it cannot see is handed to `/proc` by returning `None`: a thread
//! not switched since it was watched (a busy thread alone on its CPU), a
//! slot written for another thread, a thread that exited. Loading needs
//! root (CAP_BPF and CAP_PERFMON), a kernel with BTF, and `sched_switch`'s
//! four-argument form (5.18+); `HERD_SCHED_BPF=off` turns it off. `herd
//! doctor` says which applies.
//!
//! The loader is aya (pure Rust, no C library at run time); the program is
//! compiled by clang at build time (`build.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// Slots in the shared array: threads watched at once (56 bytes each, 448
/// pages). Threads beyond are read from `/proc`.
pub const SLOTS: u32 = 32_768;

/// One watched thread, laid out as `struct slot` in `bpf/sched.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    /// Odd while the program writes the slot.
    pub seq: u64,
    /// CPU time at its last switch, ns (schedstat's first field).
    pub run_ns: u64,
    /// Run-queue wait, ns (schedstat's second field).
    pub wait_ns: u64,
    /// Times put on a CPU (schedstat's third field).
    pub slices: u64,
    /// When it was switched in (CLOCK_MONOTONIC ns); 0 while off CPU.
    pub on_since_ns: u64,
    /// The CPU of its last switch.
    pub cpu: u32,
    /// The kernel's task state when it was switched out (0: runnable).
    pub state: u32,
    /// Its process's thread count at the switch.
    pub threads: u32,
    /// The thread the slot was last written for (0: not yet).
    pub tid: u32,
}

/// What a slot says about its thread now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// CPU time, ns: at its last switch, plus the time since if it is on a
    /// CPU now.
    pub run_ns: u64,
    /// Run-queue wait, ns.
    pub wait_ns: u64,
    /// Times put on a CPU.
    pub slices: u64,
    /// Its last CPU.
    pub cpu: u32,
    /// The state letter `/proc/<pid>/stat` would print.
    pub state: char,
    /// Its process's thread count.
    pub threads: u32,
}

impl Seen {
    /// (run, wait, slices), as [`crate::procfs::Times`].
    pub fn times(&self) -> crate::procfs::Times {
        (self.run_ns, self.wait_ns, self.slices)
    }
}

/// The state letter for a kernel task state (`__state` as `sched_switch`
/// reports it), as `/proc`'s `stat` prints it. Exit states first: an
/// exiting thread carries other bits too.
pub fn state_letter(state: u32) -> char {
    const INTERRUPTIBLE: u32 = 0x1;
    const UNINTERRUPTIBLE: u32 = 0x2;
    const STOPPED: u32 = 0x4;
    const TRACED: u32 = 0x8;
    const EXIT_DEAD: u32 = 0x10;
    const EXIT_ZOMBIE: u32 = 0x20;
    const DEAD: u32 = 0x80;
    const NOLOAD: u32 = 0x400;
    match state {
        0 => 'R',
        s if s & (DEAD | EXIT_DEAD) != 0 => 'X',
        s if s & EXIT_ZOMBIE != 0 => 'Z',
        s if s & TRACED != 0 => 't',
        s if s & STOPPED != 0 => 'T',
        s if s & UNINTERRUPTIBLE != 0 && s & NOLOAD != 0 => 'I',
        s if s & UNINTERRUPTIBLE != 0 => 'D',
        s if s & INTERRUPTIBLE != 0 => 'S',
        // Frozen and other sleeps /proc reports as disk sleep.
        _ => 'D',
    }
}

/// What `slot` says about thread `tid` at `now_ns` (CLOCK_MONOTONIC), or
/// `None` when it says nothing about that thread yet.
pub fn seen(slot: &Slot, tid: i32, now_ns: u64) -> Option<Seen> {
    if slot.tid == 0 || i64::from(slot.tid) != i64::from(tid) {
        return None;
    }
    let on_cpu = slot.on_since_ns != 0;
    Some(Seen {
        run_ns: slot.run_ns
            + if on_cpu {
                now_ns.saturating_sub(slot.on_since_ns)
            } else {
                0
            },
        wait_ns: slot.wait_ns,
        slices: slot.slices,
        cpu: slot.cpu,
        state: if on_cpu { 'R' } else { state_letter(slot.state) },
        threads: slot.threads,
    })
}

/// Why the kernel-side reader is not there.
#[derive(Debug, thiserror::Error)]
pub enum SchedBpfError {
    /// herd was built without clang, so without the program.
    #[error("herd was built without its eBPF program (no clang at build time)")]
    NotBuilt,
    /// `HERD_SCHED_BPF=off`.
    #[error("turned off (HERD_SCHED_BPF=off)")]
    Off,
    /// The kernel refused the program or its maps.
    #[error("the kernel refused the program: {0}")]
    Refused(String),
    /// The shared array could not be mapped.
    #[error("the slots could not be mapped: {0}")]
    Map(std::io::Error),
}

/// The shared array's mapping in herd's memory.
struct Mapping(*mut Slot);

// SAFETY: the mapping is memory of this process, valid wherever its owner
// goes; it is only reached through `&SchedWatch`/`&mut SchedWatch`, so the
// borrow rules order herd's own accesses (the kernel's are what the
// sequence check is for).
unsafe impl Send for Mapping {}

/// The loaded program, its maps, and which slot each watched thread has.
pub struct SchedWatch {
    #[cfg(herd_bpf)]
    _bpf: aya::Ebpf,
    #[cfg(herd_bpf)]
    slot_of: aya::maps::HashMap<aya::maps::MapData, u32, u32>,
    #[cfg(herd_bpf)]
    _slots: aya::maps::MapData,
    base: Mapping,
    /// Each watched thread's slot and how many watch it (worlds of one
    /// herd watch distinct programs, but a thread is never let go while
    /// one still watches it).
    index: HashMap<i32, (u32, u32)>,
    free: Vec<u32>,
    next: u32,
}

impl std::fmt::Debug for SchedWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedWatch")
            .field("watched", &self.index.len())
            .finish()
    }
}

impl SchedWatch {
    /// Loads and attaches the program; the reason when it cannot.
    pub fn open() -> Result<SchedWatch, SchedBpfError> {
        if asked() == Some(false) {
            return Err(SchedBpfError::Off);
        }
        Self::load()
    }

    #[cfg(not(herd_bpf))]
    fn load() -> Result<SchedWatch, SchedBpfError> {
        Err(SchedBpfError::NotBuilt)
    }

    #[cfg(herd_bpf)]
    fn load() -> Result<SchedWatch, SchedBpfError> {
        use std::os::fd::{AsFd, AsRawFd};

        let refused = |e: &dyn std::fmt::Display| SchedBpfError::Refused(e.to_string());
        let object = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sched.bpf.o"));
        let btf = aya::Btf::from_sys_fs().map_err(|e| refused(&e))?;
        let mut bpf = aya::EbpfLoader::new()
            .btf(Some(&btf))
            .set_max_entries("slots", SLOTS)
            .set_max_entries("slot_of", SLOTS)
            .load(object)
            .map_err(|e| refused(&e))?;
        for (name, point) in [("on_switch", "sched_switch"), ("on_wakeup", "sched_wakeup")] {
            let program: &mut aya::programs::BtfTracePoint = bpf
                .program_mut(name)
                .ok_or_else(|| refused(&format!("no program {name}")))?
                .try_into()
                .map_err(|e| refused(&e))?;
            program.load(point, &btf).map_err(|e| refused(&e))?;
            program.attach().map_err(|e| refused(&e))?;
        }
        let slots = match bpf.take_map("slots") {
            Some(aya::maps::Map::Array(data)) => data,
            _ => return Err(refused(&"no array map `slots`")),
        };
        let slot_of = bpf
            .take_map("slot_of")
            .ok_or_else(|| refused(&"no map `slot_of`"))
            .and_then(|m| aya::maps::HashMap::try_from(m).map_err(|e| refused(&e)))?;
        let len = SLOTS as usize * std::mem::size_of::<Slot>();
        // SAFETY: a shared mapping of the array map's own descriptor, of its
        // size; the kernel keeps the map while it is mapped.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                slots.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(SchedBpfError::Map(std::io::Error::last_os_error()));
        }
        Ok(SchedWatch {
            _bpf: bpf,
            slot_of,
            _slots: slots,
            base: Mapping(base.cast()),
            index: HashMap::new(),
            free: Vec::new(),
            next: 0,
        })
    }

    /// Threads watched now.
    pub fn watched(&self) -> usize {
        self.index.len()
    }

    /// Starts watching `tid`: its slot fills at its next switch. False
    /// when every slot is taken or the kernel refused.
    pub fn watch(&mut self, tid: i32) -> bool {
        if let Some((_, n)) = self.index.get_mut(&tid) {
            *n += 1;
            return true;
        }
        let Some(i) = self.free.pop().or((self.next < SLOTS).then_some(self.next)) else {
            return false;
        };
        if i == self.next {
            self.next += 1;
        }
        // Not this thread's until the program writes it.
        // SAFETY: `i` < SLOTS, inside the mapping.
        unsafe { std::ptr::addr_of_mut!((*self.base.0.add(i as usize)).tid).write_volatile(0) };
        if !self.insert(tid, i) {
            self.free.push(i);
            return false;
        }
        self.index.insert(tid, (i, 1));
        true
    }

    #[cfg(herd_bpf)]
    fn insert(&mut self, tid: i32, i: u32) -> bool {
        self.slot_of.insert(tid as u32, i, 0).is_ok()
    }

    #[cfg(not(herd_bpf))]
    fn insert(&mut self, _tid: i32, _i: u32) -> bool {
        false
    }

    /// Stops watching `tid` (it exited or herd let it go).
    pub fn unwatch(&mut self, tid: i32) {
        match self.index.get_mut(&tid) {
            Some((_, n)) if *n > 1 => *n -= 1,
            Some(_) => self.forget(tid),
            None => {}
        }
    }

    fn forget(&mut self, tid: i32) {
        if let Some((i, _)) = self.index.remove(&tid) {
            #[cfg(herd_bpf)]
            let _ = self.slot_of.remove(&(tid as u32));
            self.free.push(i);
        }
    }

    /// What the kernel last said about `tid` at `now_ns` (CLOCK_MONOTONIC),
    /// or `None`: not watched, not switched since, or caught mid-write
    /// four times.
    pub fn read(&self, tid: i32, now_ns: u64) -> Option<Seen> {
        let (i, _) = *self.index.get(&tid)?;
        // SAFETY: `i` < SLOTS, inside the mapping, which lives as long as
        // `self`; the program writes the slot concurrently, hence the
        // sequence check and volatile loads.
        let slot = unsafe { read_slot(self.base.0.add(i as usize)) }?;
        seen(&slot, tid, now_ns)
    }
}

/// What `HERD_SCHED_BPF` asks: `on` (load at a run's first turn),
/// `off` or `0` (never), or nothing (load when it pays, see
/// [`LOAD_AFTER_READS`]).
pub fn asked() -> Option<bool> {
    match std::env::var("HERD_SCHED_BPF").as_deref() {
        Ok("on") => Some(true),
        Ok("off" | "0") => Some(false),
        _ => None,
    }
}

/// Thread samples a live world reads from `/proc` before it loads the
/// program (`live::kernel_times` says why this many).
pub const LOAD_AFTER_READS: u64 = 10_000;

/// `herd doctor`'s line: whether the program loads here (loaded and
/// unloaded for real, about 100 ms: the kernel's BTF is parsed), and what
/// that means for a live turn.
pub fn probe() -> (bool, String) {
    match SchedWatch::open() {
        Ok(_) => (
            true,
            format!(
                "herd's eBPF program loads (sched_switch, sched_wakeup): once a run has read {LOAD_AFTER_READS} thread samples from /proc, a live turn reads threads' CPU time, wait, state and CPU from shared memory instead"
            ),
        ),
        Err(e) => {
            let needs = match e {
                SchedBpfError::Refused(_) | SchedBpfError::Map(_) => {
                    " (it needs root, a kernel with BTF, Linux 5.18 or newer)"
                }
                SchedBpfError::NotBuilt | SchedBpfError::Off => "",
            };
            (
                false,
                format!(
                    "herd's eBPF program is not used: {e}{needs}; a live turn reads each thread that ran from /proc"
                ),
            )
        }
    }
}

/// The one program of this herd process, loaded at the first call (on
/// the caller's thread; later callers wait for it) and kept until the
/// process ends; the reason when it does not load. The daemon runs a live
/// world per job: one program each would run at every context switch on
/// the machine once per job.
pub fn shared() -> Result<std::sync::Arc<std::sync::Mutex<SchedWatch>>, String> {
    static SHARED: std::sync::OnceLock<Result<std::sync::Arc<std::sync::Mutex<SchedWatch>>, String>> =
        std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| {
            SchedWatch::open()
                .map(|w| std::sync::Arc::new(std::sync::Mutex::new(w)))
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// A consistent copy of the slot at `ptr`: its sequence even and the same
/// before and after the copy.
///
/// # Safety
/// `ptr` must point to a live, 8-byte-aligned `Slot`.
unsafe fn read_slot(ptr: *const Slot) -> Option<Slot> {
    // SAFETY: `seq` is the slot's first field, 8-byte aligned; the program
    // changes it only with atomic adds.
    let seq = unsafe { &*(ptr.cast::<AtomicU64>()) };
    for _ in 0..4 {
        let before = seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            std::hint::spin_loop();
            continue;
        }
        // SAFETY: as the caller promises.
        let copy = unsafe { std::ptr::read_volatile(ptr) };
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) == before {
            return Some(copy);
        }
    }
    None
}

impl Drop for SchedWatch {
    fn drop(&mut self) {
        // The programs detach when `_bpf` drops.
        // SAFETY: the mapping made in `load`, of that size, unmapped once.
        unsafe { libc::munmap(self.base.0.cast(), SLOTS as usize * std::mem::size_of::<Slot>()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_read_as_proc_would_print_it() {
        let slot = Slot {
            seq: 2,
            run_ns: 1_000,
            wait_ns: 50,
            slices: 3,
            on_since_ns: 0,
            cpu: 5,
            state: 1,
            threads: 4,
            tid: 77,
        };
        let s = seen(&slot, 77, 9_999).unwrap();
        assert_eq!(
            (s.times(), s.cpu, s.state, s.threads),
            ((1_000, 50, 3), 5, 'S', 4)
        );
        // Another thread's slot, or one not written yet, says nothing.
        assert_eq!(seen(&slot, 78, 9_999), None);
        assert_eq!(seen(&Slot { tid: 0, ..slot }, 0, 9_999), None);
        // On a CPU since 9,000: it has run since, and is running.
        let on = seen(
            &Slot {
                on_since_ns: 9_000,
                ..slot
            },
            77,
            9_999,
        )
        .unwrap();
        assert_eq!((on.run_ns, on.state), (1_999, 'R'));
        // A clock read before the switch adds nothing.
        assert_eq!(
            seen(
                &Slot {
                    on_since_ns: 10_000,
                    ..slot
                },
                77,
                9_999
            )
            .unwrap()
            .run_ns,
            1_000
        );
    }

    #[test]
    fn task_states_are_proc_letters() {
        let cases = [
            (0x0, 'R'),
            (0x1, 'S'),
            (0x2, 'D'),
            (0x402, 'I'),
            (0x102, 'D'), // killable
            (0x104, 'T'), // stopped
            (0x8, 't'),
            (0x20, 'Z'),
            (0x80, 'X'),
            (0x81, 'X'),
            (0x8000, 'D'), // frozen
        ];
        for (state, letter) in cases {
            assert_eq!(state_letter(state), letter, "state {state:#x}");
        }
    }

    #[test]
    fn a_slot_caught_mid_write_is_not_read() {
        let mut slot = Slot {
            seq: 3,
            tid: 1,
            ..Slot::default()
        };
        // SAFETY: a live local slot.
        assert_eq!(unsafe { read_slot(&slot) }, None);
        slot.seq = 4;
        // SAFETY: a live local slot.
        assert_eq!(unsafe { read_slot(&slot) }, Some(slot));
    }

    #[test]
    fn slot_layout_is_the_programs() {
        // `struct slot` in bpf/sched.bpf.c: five u64, four u32.
        assert_eq!(std::mem::size_of::<Slot>(), 56);
        assert_eq!(std::mem::align_of::<Slot>(), 8);
    }
}
