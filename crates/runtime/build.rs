//! Compiles herd's eBPF program (`bpf/sched.bpf.c`) with clang, where clang
//! and libbpf's headers are installed (the Makefile installs both). Without
//! them herd builds all the same and reads /proc instead (`herd doctor`
//! says so): the program is an optimisation, never a requirement.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(herd_bpf)");
    println!("cargo::rerun-if-changed=bpf/sched.bpf.c");
    println!("cargo::rerun-if-env-changed=HERD_CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("sched.bpf.o");
    let clang = std::env::var("HERD_CLANG").unwrap_or_else(|_| "clang".into());
    // The multiarch include directory holds <asm/types.h>, which
    // <linux/bpf.h> needs; clang's bpf target does not look there itself.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let (multiarch, target_arch) = match arch.as_str() {
        "x86_64" => ("x86_64-linux-gnu", "x86"),
        "aarch64" => ("aarch64-linux-gnu", "arm64"),
        other => (other, other),
    };
    let built = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", "bpf/sched.bpf.c", "-o"])
        .arg(&out)
        .status();
    match built {
        Ok(s) if s.success() => println!("cargo::rustc-cfg=herd_bpf"),
        Ok(s) => println!(
            "cargo::warning=bpf/sched.bpf.c did not compile ({clang} exited {s}); herd will read /proc only"
        ),
        Err(e) => println!("cargo::warning=no {clang} ({e}); herd will read /proc only"),
    }
}
