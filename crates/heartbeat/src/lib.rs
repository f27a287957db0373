//! Progress heartbeats (S4, after Hoffmann et al.'s Application Heartbeats):
//! an application says "one more unit of work done" per thread, and herd
//! reads how far each thread got, without a system call per beat.
//!
//! The file format is the contract between the two sides. A file
//! `herd-hb.<pid>` in `$HERD_HEARTBEAT_DIR` (default `/dev/shm`, memory
//! backed) holds, in native byte order:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `HERDHB\0\x01` |
//! | 8 | 4 | version (1) |
//! | 12 | 4 | capacity: slots in the file |
//! | 16 | 4 | slots handed out so far (atomic) |
//! | 64 + 64 i | 64 | slot i: thread id (i32, atomic; 0 until set), exited (u32, atomic; 1 once the thread has exited, where the writer can tell), beats (u64, atomic) |
//!
//! A thread claims a slot on its first beat (one atomic add on the header)
//! and keeps it in a thread-local; every later beat is one relaxed atomic
//! add on its own 64-byte line, so threads never share a cache line. Slots
//! are never reused: a program that starts more than `CAPACITY` threads
//! loses the later ones' beats, which is reported by [`beat_n`] returning
//! false, never by stopping the program.
//!
//! A child made by `fork` beats into a file of its own (`herd-hb.<child
//! pid>`, created at its first beat), as the Python module's children do:
//! never into its parent's slots, and its exit never removes its parent's
//! file.
//!
//! herd's side is [`Reader`]: it maps the file read-only and copies the
//! counters. Written here because no crate offers this format (the original
//! heartbeats library logs to files, one syscall per record).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"HERDHB\0\x01";
/// The format version.
pub const VERSION: u32 = 1;
/// Slots per file: threads that can beat.
pub const CAPACITY: u32 = 1024;
/// Header and slot size: one cache line each.
pub const LINE: usize = 64;

/// The file size for `capacity` slots.
pub const fn file_len(capacity: u32) -> usize {
    LINE * (1 + capacity as usize)
}

/// Where heartbeat files live: `$HERD_HEARTBEAT_DIR`, else `/dev/shm`.
pub fn dir() -> PathBuf {
    std::env::var_os("HERD_HEARTBEAT_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// The file of process `pid` in `dir`.
pub fn path_of(dir: &Path, pid: i32) -> PathBuf {
    dir.join(format!("herd-hb.{pid}"))
}

#[repr(C)]
struct Header {
    magic: [u8; 8],
    version: u32,
    capacity: u32,
    next: AtomicU32,
}

#[repr(C, align(64))]
struct Slot {
    tid: AtomicI32,
    /// 1 once the thread has exited (this library's threads say so from a
    /// thread-exit destructor; the Python module's never do). Files from
    /// before had zero padding here, which reads as "running".
    exited: AtomicU32,
    beats: AtomicU64,
}

/// The mapped file of this process.
struct Mapped {
    base: *mut u8,
    capacity: u32,
    path: PathBuf,
}

// SAFETY: the mapping lives for the process (never unmapped) and every
// access to shared fields goes through atomics.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    fn header(&self) -> &Header {
        // SAFETY: base points at a mapping of file_len(capacity) bytes whose
        // first line is the header, aligned to the page.
        unsafe { &*(self.base as *const Header) }
    }

    fn slot(&self, i: u32) -> &Slot {
        debug_assert!(i < self.capacity);
        // SAFETY: i < capacity, so the slot lies inside the mapping; slots
        // are 64-byte aligned since the mapping is page aligned.
        unsafe { &*(self.base.add(LINE * (1 + i as usize)) as *const Slot) }
    }
}

/// Maps a fresh file for this process: create, size, map, write the header.
fn create(path: &Path, capacity: u32) -> std::io::Result<Mapped> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let len = file_len(capacity);
    // SAFETY: a valid NUL-terminated path; the flags create or truncate a
    // file only this process writes.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is open; ftruncate sizes it, mmap maps it shared, and the
    // descriptor can be closed once mapped.
    let base = unsafe {
        let ok = libc::ftruncate(fd, len as libc::off_t) == 0;
        let p = if ok {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return Err(err);
        }
        p as *mut u8
    };
    // SAFETY: the mapping is len bytes, zero-filled by ftruncate; the header
    // is written before any slot is handed out (file() publishes READY
    // after it).
    unsafe {
        let h = base as *mut Header;
        (*h).version = VERSION;
        (*h).capacity = capacity;
        (*h).magic = MAGIC;
    }
    Ok(Mapped {
        base,
        capacity,
        path: path.to_path_buf(),
    })
}

/// The file of this process: [`NONE`] until a thread creates it, then
/// [`READY`] (with [`CURRENT`]) or [`FAILED`] (with [`FAILED_ERRNO`]).
/// Not a `OnceLock`: a forked child must start over with a file of its own
/// (see [`after_fork_in_child`]), and a once-cell cannot be reset.
static STATE: AtomicU32 = AtomicU32::new(NONE);
const NONE: u32 = 0;
const CREATING: u32 = 1;
const READY: u32 = 2;
const FAILED: u32 = 3;
/// The mapping once [`READY`]: leaked, so references to it stay valid for
/// the process.
static CURRENT: AtomicPtr<Mapped> = AtomicPtr::new(std::ptr::null_mut());
static FAILED_ERRNO: AtomicI32 = AtomicI32::new(0);
/// Bumped in a forked child: slots claimed before it belong to the parent's
/// file, so each thread-local slot carries the generation it was claimed in.
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// atexit and pthread_atfork handlers, registered once per process tree
/// (a child inherits them).
static HOOKED: AtomicBool = AtomicBool::new(false);

/// The mapping, if this process has created its file.
fn current() -> Option<&'static Mapped> {
    if STATE.load(Ordering::Acquire) != READY {
        return None;
    }
    // SAFETY: READY is stored after CURRENT, which then points at a leaked
    // Box that is never freed.
    unsafe { CURRENT.load(Ordering::Acquire).as_ref() }
}

/// Removes this process's file at a normal exit, for programs that never
/// call [`close`] (a file left in /dev/shm outlives the program). A forked
/// child that exits removes only a file of its own, never its parent's.
extern "C" fn remove_at_exit() {
    if let Some(f) = current() {
        let _ = std::fs::remove_file(&f.path);
    }
}

/// pthread_atfork's child handler. The child shares the parent's mapping:
/// beating into it would credit the child's work to a parent thread's slot
/// (and a child's exit used to remove the parent's file). The child drops
/// it (left mapped: a stale reference is harmless) and makes its own file,
/// `herd-hb.<child pid>`, at its first beat. It runs in the child's only
/// thread and only stores atomics.
extern "C" fn after_fork_in_child() {
    CURRENT.store(std::ptr::null_mut(), Ordering::Release);
    STATE.store(NONE, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

thread_local! {
    /// This thread's slot and the generation it was claimed in, once
    /// claimed; slot `u32::MAX`: none available.
    static SLOT: std::cell::Cell<Option<(u32, u32)>> = const { std::cell::Cell::new(None) };
    /// Marks the slot exited when the thread ends, so herd's cheap turns
    /// (heartbeats only, no /proc) stop counting a thread that is gone.
    static EXIT: ExitMark = const { ExitMark(std::cell::Cell::new(None)) };
}

/// Sets its slot's `exited` when the thread's thread-locals are destroyed:
/// (slot, the process that claimed it). A forked child shares the parent's
/// mapping, and its copy of the forking thread must not mark the parent's.
struct ExitMark(std::cell::Cell<Option<(u32, u32)>>);

impl Drop for ExitMark {
    fn drop(&mut self) {
        if let (Some((i, pid)), Some(f)) = (self.0.get(), current())
            && pid == std::process::id()
        {
            f.slot(i).exited.store(1, Ordering::Release);
        }
    }
}

fn file() -> Result<&'static Mapped, i32> {
    loop {
        match STATE.load(Ordering::Acquire) {
            READY => return current().ok_or(libc::EIO),
            FAILED => return Err(FAILED_ERRNO.load(Ordering::Acquire)),
            NONE => {
                if STATE
                    .compare_exchange(NONE, CREATING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
                let pid = std::process::id() as i32;
                match create(&path_of(&dir(), pid), CAPACITY) {
                    Ok(m) => {
                        CURRENT.store(Box::into_raw(Box::new(m)), Ordering::Release);
                        if !HOOKED.swap(true, Ordering::AcqRel) {
                            // SAFETY: both register plain extern "C"
                            // functions without arguments that touch only
                            // atomics and the leaked mapping.
                            unsafe {
                                libc::atexit(remove_at_exit);
                                libc::pthread_atfork(None, None, Some(after_fork_in_child));
                            }
                        }
                        STATE.store(READY, Ordering::Release);
                    }
                    Err(e) => {
                        FAILED_ERRNO.store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Release);
                        STATE.store(FAILED, Ordering::Release);
                    }
                }
            }
            // Another thread is creating it: a few microseconds, once.
            _ => std::thread::yield_now(),
        }
    }
}

/// Creates the file now rather than at the first beat; an errno on failure.
pub fn init() -> Result<(), i32> {
    file().map(|_| ())
}

/// One unit of progress for the calling thread.
pub fn beat() -> bool {
    beat_n(1)
}

/// `n` units of progress for the calling thread. False when the beat could
/// not be recorded (no file, or every slot taken).
pub fn beat_n(n: u64) -> bool {
    let Ok(f) = file() else { return false };
    let generation = GENERATION.load(Ordering::Acquire);
    let slot = SLOT.with(|s| {
        if let Some((i, g)) = s.get()
            && g == generation
        {
            return i;
        }
        let i = f.header().next.fetch_add(1, Ordering::Relaxed);
        let i = if i < f.capacity {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
            f.slot(i).tid.store(tid, Ordering::Release);
            // A thread already being torn down has no thread-locals left to
            // register; then its exit simply goes unmarked.
            let _ = EXIT.try_with(|m| m.0.set(Some((i, std::process::id()))));
            i
        } else {
            u32::MAX
        };
        s.set(Some((i, generation)));
        i
    });
    if slot == u32::MAX {
        return false;
    }
    f.slot(slot).beats.fetch_add(n, Ordering::Relaxed);
    true
}

/// Removes the file; the mapping (and the counters) stay until exit.
pub fn close() -> Result<(), i32> {
    let f = file()?;
    std::fs::remove_file(&f.path).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// C ABI: see include/herd_heartbeat.h.
#[unsafe(no_mangle)]
pub extern "C" fn herd_hb_init() -> i32 {
    init().err().unwrap_or(0)
}

/// C ABI: one beat.
#[unsafe(no_mangle)]
pub extern "C" fn herd_hb_beat() {
    beat();
}

/// C ABI: n beats.
#[unsafe(no_mangle)]
pub extern "C" fn herd_hb_beat_n(n: u64) {
    beat_n(n);
}

/// C ABI: removes the file.
#[unsafe(no_mangle)]
pub extern "C" fn herd_hb_close() -> i32 {
    close().err().unwrap_or(0)
}

/// Why a heartbeat file cannot be read.
#[derive(Debug)]
pub enum ReadError {
    /// Opening or mapping it failed.
    Io(std::io::Error),
    /// It is not a heartbeat file of a version herd reads.
    Format(&'static str),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Format(w) => write!(f, "not a herd heartbeat file: {w}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// herd's side: a read-only mapping of one process's file.
pub struct Reader {
    base: *const u8,
    len: usize,
    capacity: u32,
}

// SAFETY: the mapping is read-only and only read through atomics.
unsafe impl Send for Reader {}

impl Reader {
    /// Maps `path` read-only and checks its header.
    pub fn open(path: &Path) -> Result<Reader, ReadError> {
        let file = std::fs::File::open(path).map_err(ReadError::Io)?;
        let len = file.metadata().map_err(ReadError::Io)?.len() as usize;
        if len < LINE {
            return Err(ReadError::Format("shorter than its header"));
        }
        use std::os::fd::AsRawFd;
        // SAFETY: mapping an open file read-only and shared; the file
        // descriptor may close after mmap.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ReadError::Io(std::io::Error::last_os_error()));
        }
        // Owned from here: every early return unmaps it.
        let mut r = Reader {
            base: p as *const u8,
            len,
            capacity: 0,
        };
        // SAFETY: the mapping holds at least the header.
        let h = unsafe { &*(r.base as *const Header) };
        if h.magic != MAGIC {
            return Err(ReadError::Format("bad magic"));
        }
        if h.version != VERSION {
            return Err(ReadError::Format("unknown version"));
        }
        if file_len(h.capacity) > len {
            return Err(ReadError::Format("capacity beyond the file"));
        }
        // Not `Reader { capacity, ..r }`: that copies the pointer out and
        // drops r, unmapping the file under the copy.
        r.capacity = h.capacity;
        Ok(r)
    }

    /// Every thread that has beaten and not exited: (thread id, beats so far).
    pub fn beats(&self) -> Vec<(i32, u64)> {
        // SAFETY: the header lies in the mapping.
        let h = unsafe { &*(self.base as *const Header) };
        let used = h.next.load(Ordering::Acquire).min(self.capacity);
        (0..used)
            .filter_map(|i| {
                // SAFETY: i < capacity, checked against the file length at open.
                let s = unsafe { &*(self.base.add(LINE * (1 + i as usize)) as *const Slot) };
                let tid = s.tid.load(Ordering::Acquire);
                (tid != 0 && s.exited.load(Ordering::Acquire) == 0)
                    .then(|| (tid, s.beats.load(Ordering::Relaxed)))
            })
            .collect()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what open mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_beat_into_their_own_slots_and_a_reader_sees_them() {
        let tmp = tempfile::tempdir().unwrap();
        // The process-wide file lives in the test's own directory.
        // SAFETY: set before any thread of this test binary reads it; the
        // other test only opens files by explicit path.
        unsafe { std::env::set_var("HERD_HEARTBEAT_DIR", tmp.path()) };
        init().unwrap();
        // The threads beat, report their ids, and wait to be read.
        let (tx, rx) = std::sync::mpsc::channel();
        let read = std::sync::Arc::new(std::sync::Barrier::new(5));
        let handles: Vec<_> = (0..4u64)
            .map(|k| {
                let (tx, read) = (tx.clone(), std::sync::Arc::clone(&read));
                std::thread::spawn(move || {
                    for _ in 0..1000 * (k + 1) {
                        assert!(beat());
                    }
                    // SAFETY: gettid has no preconditions.
                    tx.send((unsafe { libc::syscall(libc::SYS_gettid) as i32 }, k))
                        .unwrap();
                    read.wait();
                })
            })
            .collect();
        let mut want: Vec<(i32, u64)> = (0..4)
            .map(|_| rx.recv().unwrap())
            .map(|(t, k)| (t, 1000 * (k + 1)))
            .collect();
        want.sort();
        let path = path_of(tmp.path(), std::process::id() as i32);
        let r = Reader::open(&path).unwrap();
        let mut seen = r.beats();
        seen.sort();
        assert_eq!(seen, want);
        // Once they have exited, they are no longer listed.
        read.wait();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(r.beats(), Vec::new());
        assert!(beat_n(5));
        close().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn the_reader_refuses_what_is_not_a_heartbeat_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("x");
        std::fs::write(&p, vec![0u8; 4096]).unwrap();
        assert!(matches!(Reader::open(&p), Err(ReadError::Format("bad magic"))));
        std::fs::write(&p, b"short").unwrap();
        assert!(matches!(Reader::open(&p), Err(ReadError::Format(_))));
        assert!(matches!(
            Reader::open(&tmp.path().join("none")),
            Err(ReadError::Io(_))
        ));
    }
}
