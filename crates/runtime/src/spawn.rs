//! Starting programs: held or not, with a working directory, environment
//! and log file, and `PR_SET_PDEATHSIG = SIGCONT`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};

/// How to start a program beyond its argv.
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// A file for stdout and stderr (both), instead of herd's own.
    pub log: Option<PathBuf>,
    /// Start the program held: run it through `trampoline` (a program that
    /// waits for herd's end of a pipe to close, then execs the rest of its
    /// arguments), so that it runs none of its own instructions until herd
    /// lets it go ([`Hold`]) or dies.
    pub held_via: Option<PathBuf>,
}

/// herd's end of a held program's pipe: the program starts when this is
/// dropped, or when herd dies by any means (the kernel closes it).
///
/// Why a pipe and not a stop: a trampoline that stopped itself relied on
/// `PR_SET_PDEATHSIG = SIGCONT` to be continued if herd died, and a herd
/// killed before the trampoline's stop left the program stopped for good
/// (2 to 11 of 40 SIGKILLs 5-30 ms into a batch). A closed pipe cannot be missed:
/// the trampoline reads end-of-file whenever it gets to read.
#[derive(Debug)]
pub struct Hold(#[allow(dead_code)] OwnedFd); // Held only to be closed.

impl Hold {
    /// Lets the program start.
    pub fn release(self) {}
}

/// Starts `argv` as a child that inherits stdin, stdout and stderr, with
/// `PR_SET_PDEATHSIG = SIGCONT`: if herd is killed (even by SIGKILL) while
/// the child is stopped, the kernel continues it.
///
/// The death signal fires when the *thread* that forked exits, so call this
/// from a thread that lives as long as herd manages the child (the main
/// thread).
pub fn spawn(argv: &[String]) -> io::Result<Child> {
    spawn_with(argv, &SpawnOptions::default()).map(|(child, _)| child)
}

/// [`spawn`] with a working directory, environment and log file; with
/// `held_via`, also the [`Hold`] that keeps the program from starting.
pub fn spawn_with(argv: &[String], opts: &SpawnOptions) -> io::Result<(Child, Option<Hold>)> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command given"))?;
    // The pipe of a held program: both ends close on exec, but the
    // trampoline's read end is kept open in the child (below).
    let pipe = match opts.held_via {
        Some(_) => Some(pipe_cloexec()?),
        None => None,
    };
    let read_fd = pipe.as_ref().map(|(r, _)| r.as_raw_fd());
    let mut cmd = match &opts.held_via {
        Some(trampoline) => {
            let mut c = Command::new(trampoline);
            c.arg0("herd")
                .arg(HOLD_ARG)
                .arg(read_fd.unwrap_or(-1).to_string())
                .arg("--")
                .arg(program)
                .args(args);
            c
        }
        None => {
            let mut c = Command::new(program);
            c.args(args);
            c
        }
    };
    if let Some(dir) = &opts.cwd {
        cmd.current_dir(dir);
    }
    cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
    if let Some(path) = &opts.log {
        let file = std::fs::File::create(path)?;
        cmd.stdout(file.try_clone()?).stderr(file);
    }
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl, fcntl and the rlimit calls, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // The open-file limit the program would have had without herd.
            crate::fds::restore_in_child()?;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGCONT as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = read_fd {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    // The read end is the child's alone now; herd keeps the write end.
    Ok((child, pipe.map(|(_, w)| Hold(w))))
}

/// A pipe whose ends both close on exec: (read, write).
fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Finds the executable `program` would run as: a path (relative to `cwd`)
/// or a name looked up in PATH. Checked before spawning so that a typo is
/// reported as bad input, not as a program that failed.
pub fn resolve(program: &str, cwd: Option<&std::path::Path>) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = cwd.map_or_else(|| PathBuf::from(program), |d| d.join(program));
        return if executable(&path) {
            Ok(path)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is not an executable file", path.display()),
            ))
        };
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| executable(p))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("'{program}' is not in PATH")))
}

/// The hidden argument that makes the `herd` binary act as the trampoline.
pub const HOLD_ARG: &str = "__exec-held";

/// The trampoline: waits until the write end of the pipe whose read end is
/// `fd` closes (herd let the program go, or died), then replaces itself
/// with `argv`, without the pipe. Returns only if exec fails.
pub fn exec_held(fd: i32, argv: &[String]) -> io::Error {
    let Some((program, args)) = argv.split_first() else {
        return io::Error::new(io::ErrorKind::InvalidInput, "no command given");
    };
    let mut sink = [0u8; 16];
    loop {
        // SAFETY: a read into a local buffer of its own length.
        let n = unsafe { libc::read(fd, sink.as_mut_ptr().cast(), sink.len()) };
        // End of file: go. Data is not sent; an error other than an
        // interruption (a bad descriptor) must not keep the program from
        // running either.
        if n == 0 || (n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted) {
            break;
        }
    }
    // SAFETY: closing the descriptor this process was handed; nothing else uses it.
    unsafe { libc::close(fd) };
    Command::new(program).args(args).exec()
}
/// The threads an OpenMP program starts from `OMP_NUM_THREADS`: "8", or
/// for nested parallelism a list "8,2" whose first entry is the outer
/// team. `None` for anything else (OpenMP then picks its own count).
pub fn omp_threads(value: &str) -> Option<u32> {
    value
        .split(',')
        .next()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
}

/// The thread count a program declares: `explicit` (a flag or a batch
/// file's `threads`), else `OMP_NUM_THREADS` in the environment it gets
/// (`env`, which overrides herd's own), else none.
pub fn declared_threads(explicit: Option<u32>, env: &[(String, String)]) -> Option<u32> {
    explicit.or_else(|| {
        env.iter()
            .rev()
            .find(|(k, _)| k == "OMP_NUM_THREADS")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("OMP_NUM_THREADS").ok())
            .and_then(|v| omp_threads(&v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omp_num_threads_is_read_as_openmp_reads_it() {
        assert_eq!(omp_threads("8"), Some(8));
        assert_eq!(omp_threads(" 4 ,2"), Some(4), "nested: the outer team");
        assert_eq!(omp_threads("0"), None);
        assert_eq!(omp_threads("many"), None);
        assert_eq!(omp_threads(""), None);
        let env = |v: &str| vec![("OMP_NUM_THREADS".to_string(), v.to_string())];
        assert_eq!(declared_threads(Some(3), &env("8")), Some(3), "the flag wins");
        assert_eq!(declared_threads(None, &env("8")), Some(8));
    }
}
