//! `herd topo` and `herd doctor` as a user runs them.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn herd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(args)
        .output()
        .expect("run herd")
}

fn json(args: &[&str]) -> Value {
    let out = herd(args);
    assert!(
        out.status.success(),
        "herd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/topologies")
}

#[test]
fn every_fixture_gives_hwlocs_counts() {
    let table = std::fs::read_to_string(fixtures().join("EXPECTED.tsv")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let mut input = fixtures().join(f[0]);
        if let Some(stem) = f[0].strip_suffix(".tar.bz2") {
            let ok = Command::new("tar")
                .arg("xjf")
                .arg(&input)
                .arg("-C")
                .arg(tmp.path())
                .status()
                .unwrap();
            assert!(ok.success(), "extract {}", f[0]);
            input = tmp.path().join(Path::new(stem).file_name().unwrap());
        }
        let doc = json(&["topo", "--json", "--input", input.to_str().unwrap()]);
        for (col, key) in [(1, "cpus"), (2, "cores"), (3, "packages"), (4, "numa_nodes")] {
            assert_eq!(doc[key].as_u64().unwrap().to_string(), f[col], "{}: {key}", f[0]);
        }
        let l3: u64 = f[5].parse().unwrap();
        if l3 > 0 {
            assert_eq!(doc["llcs"].as_u64().unwrap(), l3, "{}: llcs", f[0]);
        }
        let kinds = doc["kinds"].as_array().unwrap().len() as u64;
        if f[6].parse::<u64>().unwrap() >= 2 {
            assert!(kinds >= 2, "{}: a hybrid machine shows >= 2 kinds", f[0]);
        }
        // Internal consistency of the document.
        let cpu_list = doc["cpu_list"].as_array().unwrap();
        assert_eq!(cpu_list.len() as u64, doc["cpus"].as_u64().unwrap());
        let kind_cpus: usize = doc["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["cpus"].as_array().unwrap().len())
            .sum();
        assert_eq!(kind_cpus, cpu_list.len(), "{}: every CPU has one kind", f[0]);
        let smt = cpu_list
            .iter()
            .map(|c| c["siblings"].as_array().unwrap().len())
            .max()
            .unwrap() as u64;
        assert_eq!(doc["smt_max"].as_u64().unwrap(), smt);
        checked += 1;
    }
    assert_eq!(checked, 15);
}

#[test]
fn synthetic_specs_round_trip() {
    for (spec, cpus, cores, packages, numa, llcs, smt, kinds) in [
        ("package:2 numa:2 l3:1 core:4 pu:2", 32, 16, 2, 4, 4, 2, 1),
        ("package:1 core:64 pu:4", 256, 64, 1, 1, 0, 4, 1),
        (
            "package:1 l3:1 core:6 pu:2 capacity:1.0 + core:8 pu:1 capacity:0.6",
            20,
            14,
            1,
            1,
            1,
            2,
            2,
        ),
        (
            "package:2 l3:1 core:7 capacity:1 kind:fast + core:8 capacity:0.5 kind:slow",
            30,
            30,
            2,
            1,
            2,
            1,
            2,
        ),
    ] {
        let d = json(&["topo", "--json", "--synthetic", spec]);
        let got: Vec<u64> = ["cpus", "cores", "packages", "numa_nodes", "llcs", "smt_max"]
            .iter()
            .map(|k| d[*k].as_u64().unwrap())
            .collect();
        assert_eq!(got, vec![cpus, cores, packages, numa, llcs, smt], "{spec}");
        assert_eq!(d["kinds"].as_array().unwrap().len(), kinds, "{spec}");
    }
    let d = json(&[
        "topo",
        "--json",
        "--synthetic",
        "package:1 core:6 pu:2 capacity:1.0 + core:8 capacity:0.6",
    ]);
    assert_eq!(d["kinds"][0]["capacity"], 0.6);
    assert_eq!(d["kinds"][0]["cpus"].as_array().unwrap().len(), 8);
    assert_eq!(d["kinds"][1]["cpus"].as_array().unwrap().len(), 12);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let v3 = tmp.path().join("v3.xml");
    std::fs::write(
        &v3,
        "<?xml version=\"1.0\"?>\n<topology version=\"3.0\">\n</topology>\n",
    )
    .unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = tmp.path().join("missing.xml");
    for (args, needle) in [
        (vec!["topo", "--input", missing.to_str().unwrap()], "No such file"),
        (vec!["topo", "--input", v3.to_str().unwrap()], "format 3.0"),
        (
            vec!["topo", "--input", empty.to_str().unwrap()],
            "not a Linux filesystem root",
        ),
        (
            vec!["topo", "--synthetic", "package:2 core:x"],
            "not a whole number",
        ),
        (vec!["topo", "--synthetic", "package:2 core:0 pu:2"], "at least 1"),
        (
            vec!["topo", "--synthetic", "core:2", "--input", "x.xml"],
            "cannot be used with",
        ),
    ] {
        let out = herd(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let xml = fixtures().join("xml/Intel-KnightsLanding-XeonPhi-7210.xml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["topo", "--input", xml.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // stdout is dropped here: herd's remaining writes hit a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn doctor_reports_every_capability_with_reasons() {
    let d = json(&["doctor", "--json"]);
    let caps = d["capabilities"].as_array().unwrap();
    for name in [
        "hw_counters.instructions",
        "hw_counters.cycles",
        "hw_counters.llc_misses",
        "sw_counters.task_clock",
        "schedstat",
        "psi",
        "cgroup_v1.cpuset",
        "cgroup_v2.cpuset",
        "cgroup_v1.freezer",
        "cgroup_v2.freeze",
        "resctrl.mbm",
        "rapl",
        "smt",
        "numa",
        "numa_balancing",
        "core_kinds",
        "root",
        "proc_connector",
        "taskstats",
        "sched_bpf",
    ] {
        let c = caps
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(
            c["available"].is_boolean() && c.get("path").is_some(),
            "{name}: {c}"
        );
        assert!(!c["reason"].as_str().unwrap().is_empty(), "{name}: a reason");
    }
    // An unavailable hardware counter carries the kernel's errno.
    for c in caps
        .iter()
        .filter(|c| c["name"].as_str().unwrap().starts_with("hw_counters"))
    {
        if c["available"] == false {
            assert!(c["reason"].as_str().unwrap().contains("os error"), "{c}");
        }
    }
    // The cpuset choice agrees with the capabilities.
    let avail = |n: &str| caps.iter().any(|c| c["name"] == n && c["available"] == true);
    let expected = if avail("cgroup_v2.cpuset") {
        "cgroup-v2"
    } else if avail("cgroup_v1.cpuset") {
        "cgroup-v1"
    } else {
        "affinity-only"
    };
    assert_eq!(d["cpuset"], expected);
    let text = String::from_utf8(herd(&["doctor"]).stdout).unwrap();
    assert!(text.contains("herd will confine programs with"), "{text}");
}
