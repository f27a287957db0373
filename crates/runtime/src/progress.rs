//! Progress from a file or pipe the application writes, for programs that
//! do not link herd's heartbeat library (S4 without linking): `herd run
//! --progress-from PATH`. The program finds the path in `$HERD_PROGRESS`
//! and writes one line per report:
//!
//! ```text
//! TID COUNT
//! ```
//!
//! the thread's id (`gettid()`, Python's `threading.get_native_id()`; a
//! single-threaded program's pid) and its cumulative heartbeats. Later
//! lines replace earlier ones for the same thread. A thread that is done
//! says so with `TID exit`: herd stops counting it at once, where it
//! would otherwise wait for its next look at /proc (as the heartbeat
//! library's exit mark does). Lines are short (a few dozen bytes) so a
//! write of one line is atomic on a pipe.
//!
//! PATH may be a regular file the program appends to (herd reads what was
//! added since the last look, from the file's end when herd started) or a named pipe; when PATH does not exist,
//! herd makes a named pipe there and removes it afterwards. herd holds the
//! pipe open for reading and writing, non-blocking, so a program that
//! closes and reopens it never makes herd see an end, and a read never
//! waits. This costs a system call per observation, where the heartbeat
//! library costs none.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The environment variable that tells the program where to write.
pub const ENV: &str = "HERD_PROGRESS";

/// Longest line kept: anything longer is not a report.
const MAX_LINE: usize = 256;

/// One report line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// `TID COUNT`: the thread's beats so far.
    Beats(i32, u64),
    /// `TID exit`: the thread is done.
    Exited(i32),
}

/// Parses one report line: `TID COUNT` or `TID exit`.
pub fn parse_line(line: &str) -> Result<Report, String> {
    let mut parts = line.split_whitespace();
    let (Some(tid), Some(count), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err("not 'TID COUNT' or 'TID exit'".into());
    };
    let tid: i32 = tid
        .parse()
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| format!("thread id '{tid}' is not a positive whole number"))?;
    if count == "exit" {
        return Ok(Report::Exited(tid));
    }
    let count: u64 = count
        .parse()
        .map_err(|_| format!("count '{count}' is not a whole number >= 0 (nor 'exit')"))?;
    Ok(Report::Beats(tid, count))
}

/// A program's progress file or pipe and what it has said so far.
#[derive(Debug)]
pub struct ProgressFile {
    path: PathBuf,
    file: File,
    pipe: bool,
    /// A named pipe herd made, removed when this is dropped.
    made: bool,
    /// Bytes after the last newline, waiting for the rest of their line.
    partial: Vec<u8>,
    /// Where the next read of a regular file starts.
    offset: u64,
    beats: BTreeMap<i32, u64>,
    bad_lines: u64,
    first_bad: Option<String>,
}

impl ProgressFile {
    /// Opens `path`, making a named pipe there if nothing is there yet.
    pub fn open(path: &Path) -> io::Result<Self> {
        let made = match std::fs::symlink_metadata(path) {
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
                // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
                if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                true
            }
            Err(e) => return Err(e),
        };
        let pipe = std::fs::metadata(path)?.file_type().is_fifo();
        let file = std::fs::OpenOptions::new()
            .read(true)
            // A pipe opened for writing too never reads as ended (Linux
            // allows O_RDWR on a FIFO); O_NONBLOCK so a read never waits.
            .write(pipe)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path);
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                if made {
                    let _ = std::fs::remove_file(path);
                }
                return Err(e);
            }
        };
        // A file is read from its end as it is now: what an earlier run left
        // in it is not this program's progress.
        let offset = if pipe { 0 } else { file.metadata()?.len() };
        Ok(ProgressFile {
            path: path.to_path_buf(),
            file,
            pipe,
            made,
            partial: Vec::new(),
            offset,
            beats: BTreeMap::new(),
            bad_lines: 0,
            first_bad: None,
        })
    }

    /// Reads what was written since the last call; each thread's beats so
    /// far, sorted by thread id, leaving out threads that said `exit`.
    pub fn poll(&mut self) -> Vec<(i32, u64)> {
        let mut buf = [0u8; 4096];
        if !self.pipe {
            // A file truncated since (the program started over): read it anew.
            if self.file.metadata().is_ok_and(|m| m.len() < self.offset) {
                self.offset = 0;
                self.partial.clear();
            }
            if self.file.seek(SeekFrom::Start(self.offset)).is_err() {
                return self.snapshot();
            }
        }
        // Bounded: at most 64 KiB a look, the rest next time.
        for _ in 0..16 {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.offset += n as u64;
                    self.take(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: a pipe with nothing in it. Anything else:
                // nothing more this time.
                Err(_) => break,
            }
        }
        self.snapshot()
    }

    fn snapshot(&self) -> Vec<(i32, u64)> {
        self.beats.iter().map(|(&t, &b)| (t, b)).collect()
    }

    fn take(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b != b'\n' {
                if self.partial.len() <= MAX_LINE {
                    self.partial.push(b);
                }
                continue;
            }
            let line = std::mem::take(&mut self.partial);
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            match (line.len() <= MAX_LINE).then(|| parse_line(&text)) {
                Some(Ok(Report::Beats(tid, count))) => {
                    self.beats.insert(tid, count);
                }
                Some(Ok(Report::Exited(tid))) => {
                    // Thread ids are reused: a later report under this id
                    // is a new thread's.
                    self.beats.remove(&tid);
                }
                problem => {
                    self.bad_lines += 1;
                    if self.first_bad.is_none() {
                        let why = match problem {
                            Some(Err(why)) => why,
                            _ => format!("longer than {MAX_LINE} bytes"),
                        };
                        let shown: String = text.chars().take(60).collect();
                        self.first_bad = Some(format!("'{shown}': {why}"));
                    }
                }
            }
        }
    }

    /// What went wrong, if anything: lines that were not reports.
    pub fn problems(&self) -> Option<String> {
        self.first_bad.as_ref().map(|first| {
            format!(
                "--progress-from {}: {} line(s) ignored, the first {first}",
                self.path.display(),
                self.bad_lines
            )
        })
    }
}

impl Drop for ProgressFile {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_tid_and_count_or_exit() {
        assert_eq!(parse_line("123 45"), Ok(Report::Beats(123, 45)));
        assert_eq!(parse_line("  7\t0 "), Ok(Report::Beats(7, 0)));
        assert_eq!(parse_line("123 exit"), Ok(Report::Exited(123)));
        assert!(parse_line("123 Exit").unwrap_err().contains("nor 'exit'"));
        assert!(parse_line("123").unwrap_err().contains("TID COUNT"));
        assert!(parse_line("1 2 3").is_err());
        assert!(parse_line("0 5").unwrap_err().contains("thread id"));
        assert!(parse_line("x 5").is_err());
        assert!(parse_line("5 -1").unwrap_err().contains("count '-1'"));
    }

    #[test]
    fn a_pipe_herd_makes_is_read_without_waiting_and_removed_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("progress");
        let mut p = ProgressFile::open(&path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().file_type().is_fifo());
        assert!(p.poll().is_empty(), "nothing written: no wait, no beats");
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        // A line split over two writes, a bad line, a later count replacing
        // an earlier one.
        w.write_all(b"10 1\n11 4\n10 ").unwrap();
        assert_eq!(p.poll(), vec![(10, 1), (11, 4)]);
        w.write_all(b"3\nhello\n").unwrap();
        assert_eq!(p.poll(), vec![(10, 3), (11, 4)]);
        // A thread that is done leaves the list; its id may come back as a
        // new thread's.
        w.write_all(b"12 1\n12 exit\n").unwrap();
        assert_eq!(p.poll(), vec![(10, 3), (11, 4)]);
        w.write_all(b"12 2\n").unwrap();
        assert_eq!(p.poll(), vec![(10, 3), (11, 4), (12, 2)]);
        w.write_all(b"12 exit\n").unwrap();
        // The writer closes: herd's own write end keeps the pipe from ending.
        drop(w);
        assert_eq!(p.poll(), vec![(10, 3), (11, 4)]);
        let said = p.problems().unwrap();
        assert!(
            said.contains("1 line(s) ignored") && said.contains("'hello'"),
            "{said}"
        );
        drop(p);
        assert!(!path.exists(), "the pipe herd made is gone");
    }

    #[test]
    fn a_regular_file_is_followed_as_it_grows_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("progress.log");
        std::fs::write(&path, "9 99\n").unwrap();
        let mut p = ProgressFile::open(&path).unwrap();
        assert!(p.poll().is_empty(), "an earlier run's lines are not read");
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"5 1\n").unwrap();
        assert_eq!(p.poll(), vec![(5, 1)]);
        f.write_all(b"5 2\n6 9\n").unwrap();
        assert_eq!(p.poll(), vec![(5, 2), (6, 9)]);
        assert_eq!(p.poll(), vec![(5, 2), (6, 9)]);
        assert!(p.problems().is_none());
        drop(p);
        assert!(path.exists(), "a file herd did not make stays");
    }
}
