//! Progress from managed programs that link herd's heartbeat library (S4):
//! each program's shared-memory file (`herd_heartbeat`'s format), mapped
//! read-only once and read by copying its counters: no system call per
//! thread or per beat. A program that does not link the library may write
//! its progress to a file or pipe instead ([`crate::progress`]), which then
//! takes the library's place for it.

use std::path::PathBuf;

use herd_heartbeat::Reader;

/// How often a program without a file is looked at again: it may create
/// one late (at its first beat).
const RETRY_NS: u64 = 200_000_000;

/// Removes the heartbeat file of `pid`, a program herd started that has
/// exited (and been reaped, so the pid is not reused yet): the library
/// removes its own at a normal exit, but a killed program cannot. Nothing
/// to remove is not an error.
pub fn remove_file_of(pid: i32) {
    let _ = std::fs::remove_file(herd_heartbeat::path_of(&herd_heartbeat::dir(), pid));
}

/// The readers of the programs a world manages.
pub struct Heartbeats {
    dir: PathBuf,
    readers: Vec<Option<Reader>>,
    next_try_ns: Vec<u64>,
    files: Vec<Option<crate::progress::ProgressFile>>,
}

impl Heartbeats {
    /// For `programs` programs, with files in `herd_heartbeat::dir()`.
    pub fn new(programs: usize) -> Self {
        Heartbeats {
            dir: herd_heartbeat::dir(),
            readers: (0..programs).map(|_| None).collect(),
            next_try_ns: vec![0; programs],
            files: (0..programs).map(|_| None).collect(),
        }
    }

    /// Program `j` reports its progress through `file` (`herd run
    /// --progress-from`), not the library.
    pub fn follow_file(&mut self, j: usize, file: crate::progress::ProgressFile) {
        if let Some(slot) = self.files.get_mut(j) {
            *slot = Some(file);
        }
    }

    /// What went wrong with the progress files, one line per file, after
    /// reading what is left in them (a program's last lines may come after
    /// the last observation).
    pub fn problems(&mut self) -> Vec<String> {
        self.files
            .iter_mut()
            .flatten()
            .filter_map(|f| {
                f.poll();
                f.problems()
            })
            .collect()
    }

    /// Program `j`'s beats per thread id, sorted by thread id, opening its
    /// file when it appears; `None` for a program that reports none.
    pub fn read(&mut self, j: usize, pid: i32, now_ns: u64) -> Option<Vec<(i32, u64)>> {
        if let Some(f) = self.files.get_mut(j)?.as_mut() {
            return Some(f.poll());
        }
        if self.readers.get(j)?.is_none() && now_ns >= self.next_try_ns[j] {
            self.next_try_ns[j] = now_ns + RETRY_NS;
            // A file that is not ours (bad magic) counts as none.
            self.readers[j] = Reader::open(&herd_heartbeat::path_of(&self.dir, pid)).ok();
        }
        self.readers[j].as_ref().map(|r| {
            let mut b = r.beats();
            b.sort_unstable();
            b
        })
    }
}
