//! Starting programs: held or not, with a working directory, environment
//! and log file, and `PR_SET_PDEATHSIG = SIGCONT`.

use std::io;
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
    /// stops itself with SIGSTOP, then execs the rest of its arguments) and
    /// return once it is stopped, before the program's first instruction.
    pub held_via: Option<PathBuf>,
}

/// Starts `argv` as a child that inherits stdin, stdout and stderr, with
/// `PR_SET_PDEATHSIG = SIGCONT`: if herd is killed (even by SIGKILL) while
/// the child is stopped, the kernel continues it.
///
/// The death signal fires when the *thread* that forked exits, so call this
/// from a thread that lives as long as herd manages the child (the main
/// thread).
pub fn spawn(argv: &[String]) -> io::Result<Child> {
    spawn_with(argv, &SpawnOptions::default())
}

/// [`spawn`] with a working directory, environment and log file.
pub fn spawn_with(argv: &[String], opts: &SpawnOptions) -> io::Result<Child> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command given"))?;
    let mut cmd = match &opts.held_via {
        Some(trampoline) => {
            let mut c = Command::new(trampoline);
            c.arg(HOLD_ARG).arg("--").arg(program).args(args);
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
    // calls prctl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGCONT as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    if opts.held_via.is_some() {
        // Wait until the trampoline has stopped itself (or died trying).
        let mut status = 0;
        // SAFETY: waitpid on our own child; status is a valid out-pointer.
        let rc = unsafe { libc::waitpid(child.id() as i32, &mut status, libc::WUNTRACED) };
        if rc < 0 || !libc::WIFSTOPPED(status) {
            return Err(io::Error::other("the program did not start held"));
        }
    }
    Ok(child)
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

/// The trampoline: stops the calling process, and once continued, replaces
/// it with `argv`. Returns only if exec fails.
pub fn exec_held(argv: &[String]) -> io::Error {
    let Some((program, args)) = argv.split_first() else {
        return io::Error::new(io::ErrorKind::InvalidInput, "no command given");
    };
    // SAFETY: raise has no memory-safety preconditions.
    unsafe { libc::raise(libc::SIGSTOP) };
    Command::new(program).args(args).exec()
}
