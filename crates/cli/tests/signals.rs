//! Signals herd passes on: each program gets a signal once, whether it came
//! from a terminal (to the whole foreground process group, the program
//! included) or from `kill` (to herd alone).

mod common;

/// Drives `herd run` under a pseudo-terminal (Python's `pty`, as the test
/// needs a real terminal for the kernel to send Ctrl-C's SIGINT to the
/// foreground group): presses Ctrl-C once (`tty`) or sends SIGINT to herd's
/// pid (`kill`); the program runs alone or under a shell (`sh`); prints
/// what the program and herd wrote.
const DRIVER: &str = r#"
import os, pty, select, signal, sys, time
herd, how, wrap, python = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
prog = ("import signal, time\n"
        "n = [0]\n"
        "def h(s, f):\n    n[0] += 1\n"
        "signal.signal(signal.SIGINT, h)\n"
        "print('ready', flush=True)\n"
        "end = time.time() + 2.5\n"
        "while time.time() < end: time.sleep(0.02)\n"
        "print('SIGINTs', n[0], flush=True)\n")
pid, fd = pty.fork()
if pid == 0:
    cmd = [python, '-c', prog]
    if wrap == 'sh':
        # A shell that waits for the program, as wrapper scripts do.
        cmd = ['sh', '-c', '"$0" -c "$1"; true', python, prog]
    os.execv(herd, [herd, 'run', '--policy', 'static:compact', '--period-ms', '50', '--'] + cmd)
out = b''
def read_until(t, what=None):
    global out
    end = time.time() + t
    while time.time() < end and not (what and what in out):
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: return
read_until(10, b'ready')
time.sleep(0.3)
if how == 'tty':
    os.write(fd, b'\x03')
else:
    os.kill(pid, signal.SIGINT)
read_until(10)
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors='replace'))
"#;

fn sigints(how: &str, wrap: &str) -> (u32, String) {
    let herd = env!("CARGO_BIN_EXE_herd");
    let out = std::process::Command::new(common::python())
        .args(["-c", DRIVER, herd, how, wrap, &common::python()])
        // As `common::herd`: the run is recorded away from $HOME.
        .env(
            "XDG_DATA_HOME",
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("data-signals"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let n = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("SIGINTs "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count from the program ({how}): {text}"));
    (n, text)
}

#[test]
fn one_ctrl_c_reaches_the_program_once() {
    // Before: herd passed the terminal's SIGINT on, and the program got two.
    for wrap in ["none", "sh"] {
        let (n, text) = sigints("tty", wrap);
        assert_eq!(n, 1, "{wrap}: {text}");
        assert!(
            text.contains("the terminal gave the signal to them too"),
            "{text}"
        );
    }
}

#[test]
fn a_sigint_sent_to_herd_alone_is_passed_on_once() {
    // Under a shell: before, only the shell got it, and let it go by.
    for wrap in ["none", "sh"] {
        let (n, text) = sigints("kill", wrap);
        assert_eq!(n, 1, "{wrap}: {text}");
        assert!(text.contains("passed the signal on"), "{text}");
    }
}
