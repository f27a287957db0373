//! `herd run --confine cgroup` on this machine: a program's cpuset keeps
//! it inside the CPUs its policy gave it, and lets a child it makes run
//! where the kernel puts it until the policy places it.

mod common;
use common::herd;

/// `herd run` under `policy` without the guard (where the policy places,
/// not where a probe lets go), every `period_ms`.
fn unguarded(policy: &str, period_ms: &str, confine: &str) -> std::process::Command {
    let mut c = herd();
    c.args([
        "run",
        "--policy",
        policy,
        "--period-ms",
        period_ms,
        "--guard",
        "off",
        "--confine",
        confine,
    ]);
    c
}

/// `herd run --explain -- python3 -c program` under `policy` with
/// cpusets; the program's output must be every CPU's number.
fn prints_every_cpu(policy: &str, period_ms: &str, program: &str) -> String {
    let out = unguarded(policy, period_ms, "cgroup")
        .arg("--explain")
        .args(["--", &common::python(), "-c", program])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let cpus = std::thread::available_parallelism().unwrap().get();
    let all: Vec<String> = (0..cpus).map(|c| c.to_string()).collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        all.join(","),
        "{stderr}"
    );
    stderr
}

/// A program that, after `delay` seconds, asks for every CPU itself and
/// prints the CPUs it got.
fn escape_program(delay: f64) -> String {
    format!(
        "import os, time\ntime.sleep({delay})\ntry:\n    os.sched_setaffinity(0, range(os.cpu_count()))\nexcept OSError:\n    pass\nprint(','.join(map(str, sorted(os.sched_getaffinity(0)))))\n"
    )
}

#[test]
fn a_cgroup_cpuset_keeps_a_program_inside() {
    let (cpuset, _) = common::mechanisms();
    if cpuset == "affinity-only" {
        eprintln!("skipped: no cgroup cpuset on this machine (herd doctor)");
        return;
    }
    let all: Vec<String> = (0..std::thread::available_parallelism().unwrap().get())
        .map(|c| c.to_string())
        .collect();
    for (confine, expected) in [("cgroup", "0".to_string()), ("affinity", all.join(","))] {
        // One thread, compact: CPU 0. Then the program asks for all CPUs.
        let out = unguarded("static:compact", "20", confine)
            .args(["--", &common::python(), "-c", &escape_program(0.5)])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            expected,
            "--confine {confine}: {stderr}"
        );
        if confine == "cgroup" {
            assert!(stderr.contains("confine=cgroup"), "{stderr}");
        }
    }
}

/// Whether herd's doctor finds the kernel's fork events (root and
/// `CONFIG_PROC_EVENTS`).
fn proc_connector() -> bool {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["capabilities"].as_array().is_some_and(|caps| {
        caps.iter()
            .any(|c| c["name"] == "proc_connector" && c["available"] == true)
    })
}

/// A process forked while its program's cpuset is narrowed to its main
/// thread's one CPU gets every CPU at birth: the fork event widens the
/// cpuset, not herd's next turn (here 3 s away). Narrowed, `make -j2`
/// under static:compact ran its first compilers on the shell's CPU.
#[test]
fn a_child_born_into_a_narrowed_cpuset_runs_on_every_cpu_from_birth() {
    let (cpuset, _) = common::mechanisms();
    let cpus = std::thread::available_parallelism().unwrap().get();
    if cpuset == "affinity-only" || cpus < 2 || !proc_connector() {
        eprintln!("skipped: needs a cgroup cpuset, two CPUs and the proc connector (herd doctor)");
        return;
    }
    // The main thread is pinned at herd's first look, alone, so its
    // cpuset is narrowed to that CPU; it forks after herd's turn, and the
    // child reads its CPUs long before the next.
    let program = "import os, time\ntime.sleep(0.5)\npid = os.fork()\nif pid == 0:\n    time.sleep(0.2)\n    \
                   print(','.join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)\n    os._exit(0)\n\
                   os.waitpid(pid, 0)\n";
    let stderr = prints_every_cpu("static:compact", "3000", program);
    assert!(stderr.contains("freed at birth"), "{stderr}");
}

/// A program that has forked processes keeps every CPU herd was given in
/// its cpuset, however its threads are pinned: any of its processes may
/// fork again, most often one herd has not pinned (make, a `cc` driver),
/// and a cpuset narrowed to the pins of the moment held each such child
/// there until the next turn. So a forked process that asks for every CPU
/// itself gets them (a program of one process stays inside its pins:
/// `a_cgroup_cpuset_keeps_a_program_inside`).
#[test]
fn a_program_with_forked_processes_keeps_every_cpu_in_its_cpuset() {
    let (cpuset, _) = common::mechanisms();
    let cpus = std::thread::available_parallelism().unwrap().get();
    if cpuset == "affinity-only" || cpus < 2 {
        eprintln!("skipped: needs a cgroup cpuset and two CPUs (herd doctor)");
        return;
    }
    // Both processes work, so both are pinned, to CPU 0 (one place).
    let program = "import os, time\n\
                   def spin(s):\n    t = time.time()\n    while time.time() - t < s: pass\n\
                   if os.fork() == 0:\n    spin(1.0)\n    \
                   try:\n        os.sched_setaffinity(0, range(os.cpu_count()))\n    except OSError:\n        pass\n    \
                   print(','.join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)\n    os._exit(0)\n\
                   spin(1.2)\nos.wait()\n";
    let stderr = prints_every_cpu("static:compact:cpus=1", "50", program);
    // Both were pinned before the child asked.
    assert!(stderr.matches("-> CPUs 0:").count() >= 2, "{stderr}");
}

/// A program `herd batch` holds at its start is pinned by affinity when
/// the first turn lets it go, and joins its cpuset group at a later turn,
/// while it runs: the first cgroup move waits out an RCU grace period,
/// and a held program would wait it out with its CPUs idle (under
/// bw:iabw, 30-50 ms of a 2-CPU batch's CPU in its first turn).
#[test]
fn a_held_program_is_pinned_at_once_and_joins_its_cpuset_at_a_later_turn() {
    let (cpuset, _) = common::mechanisms();
    if cpuset == "affinity-only" {
        eprintln!("skipped: no cgroup cpuset on this machine (herd doctor)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("seen");
    // Its cpuset group and CPUs soon after it starts (the next turn is
    // 1.5 s away: room for a slow Python start), then after that turn.
    let program = format!(
        "import os, time\\n\
         def look():\\n    \
         group = [l.split(':')[2].strip() for l in open('/proc/self/cgroup') if ':cpuset:' in l]\\n    \
         return (group[0] if group else '?') + ' ' + ','.join(map(str, sorted(os.sched_getaffinity(0))))\\n\
         first = look()\\ntime.sleep(3.0)\\nopen('{}', 'w').write(first + '\\\\n' + look() + '\\\\n')\\n",
        seen.display()
    );
    let file = tmp.path().join("one.toml");
    std::fs::write(
        &file,
        format!("[[program]]\nname = \"one\"\ncmd = [\"python3\", \"-c\", \"{program}\"]\n"),
    )
    .unwrap();
    let out = herd()
        .args([
            "batch",
            file.to_str().unwrap(),
            "--policy",
            "static:compact",
            "--period-ms",
            "1500",
        ])
        .args(["--guard", "off", "--confine", "cgroup"])
        .args(["--logs", tmp.path().join("logs").to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 2, "{seen}");
    let (first, later) = (lines[0], lines[1]);
    // At once: on CPU 0, by affinity, outside herd's groups.
    assert!(first.ends_with(" 0") && !first.contains("/herd-"), "{seen}");
    // Later: in its own group, still on CPU 0.
    assert!(later.contains("/herd-") && later.ends_with(" 0"), "{seen}");
}
