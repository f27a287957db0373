#!/usr/bin/env python3
"""Runs a shell command in a guest with a chosen CPU and NUMA shape, on
Debian's own kernel under QEMU (TCG emulation: no KVM here), with the
host's root filesystem shared read-only over 9p. Prints the command's
output and exits with its status (QEMU itself exits 0 whatever the guest
did: the status comes back through a shared folder). For correctness on
NUMA and SMT, never for timing: guests run 20-25x slower than the host.

Usage: scripts/vm/guest.py [--topology NAME] [--timeout S] -- COMMAND
Topologies: see TOPOLOGIES below. Needs qemu-system-x86, linux-image-amd64
and busybox-static (`make vm-deps`).
"""
import argparse
import glob
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, "target", "vm")
MODULES = ["virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev",
           "virtio_pci", "9pnet", "9pnet_virtio", "netfs", "fscache", "9p"]

# name: (-smp, NUMA nodes as CPU ranges), memory 2 GiB split evenly.
TOPOLOGIES = {
    # Two sockets of two cores of two threads, a NUMA node per socket.
    "2s2c2t": ("8,sockets=2,cores=2,threads=2", ["0-3", "4-7"]),
    # Four NUMA nodes of two single-threaded cores.
    "4n2c": ("8,sockets=4,cores=2,threads=1", ["0-1", "2-3", "4-5", "6-7"]),
    # One socket of four cores of two threads, one node.
    "1s4c2t": ("8,sockets=1,cores=4,threads=2", ["0-7"]),
}


def kernel():
    """The newest installed Debian kernel: (vmlinuz, version)."""
    found = sorted(glob.glob("/boot/vmlinuz-*"))
    if not found:
        sys.exit("no kernel in /boot: run `make vm-deps` (linux-image-amd64)")
    path = found[-1]
    return path, path.split("vmlinuz-", 1)[1]


def cpio_newc(entries):
    """An initramfs archive (cpio newc) of (name, mode, data) entries."""
    out = io.BytesIO()
    ino = 1
    for name, mode, data in entries + [("TRAILER!!!", 0, b"")]:
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{x:08X}" for x in [
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0])
        out.write(hdr.encode() + name_b)
        out.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))
        ino += 1
    return out.getvalue()


def initramfs(version):
    """Builds (once per kernel and init script) the guest's initramfs."""
    os.makedirs(CACHE, exist_ok=True)
    init = open(os.path.join(ROOT, "scripts", "vm", "init"), "rb").read()
    path = os.path.join(CACHE, f"initramfs-{version}-{zlib.crc32(init):08x}.cpio.gz")
    if os.path.exists(path):
        return path
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox) or b"statically linked" not in subprocess.run(
            ["file", "-L", busybox], capture_output=True).stdout and not _static(busybox):
        sys.exit("no static busybox: run `make vm-deps` (busybox-static)")
    DIR, FILE, EXE = 0o040755, 0o100644, 0o100755
    entries = [(d, DIR, b"") for d in ["bin", "proc", "sys", "dev", "root", "modules", "tmp"]]
    entries.append(("bin/busybox", EXE, open(busybox, "rb").read()))
    entries.append(("init", EXE, init))
    dep = open(f"/lib/modules/{version}/modules.dep").read()
    for m in MODULES:
        rel = re.search(rf"^(\S*/{m}\.ko(?:\.xz|\.zst)?):", dep, re.M)
        if not rel:
            sys.exit(f"kernel {version} has no module {m}")
        data = open(f"/lib/modules/{version}/{rel.group(1)}", "rb").read()
        if rel.group(1).endswith(".xz"):
            import lzma
            data = lzma.decompress(data)
        entries.append((f"modules/{m}.ko", FILE, data))
    with gzip.open(path, "wb") as f:
        f.write(cpio_newc(entries))
    return path


def _static(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True)
    return "not a dynamic executable" in out.stdout + out.stderr


def kallsyms(version):
    """The guest kernel's symbols (without address randomisation), read
    once from a guest: Debian's System.map is a placeholder."""
    path = os.path.join(CACHE, f"kallsyms-{version}")
    if not os.path.exists(path):
        script = os.path.join(CACHE, "kallsyms.sh")
        with open(script, "w") as f:
            f.write("mkdir -p /mnt/collect && cat /proc/kallsyms > /mnt/collect/kallsyms\n")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sys.executable, os.path.abspath(__file__), "--timeout", "120", "--collect", d,
                            "--", "/bin/sh", script], capture_output=True)
            if os.path.exists(os.path.join(d, "kallsyms")):
                shutil.copy(os.path.join(d, "kallsyms"), path)
    return path


def cpu_places(monitor, version):
    """Each vCPU's instruction pointer from QEMU's monitor, named from
    the kernel's System.map where it has one."""
    import socket
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(5)
        sock.connect(monitor)
        sock.sendall(b"info registers -a\n")
        data = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        sock.close()
    except OSError as e:
        return f"(no monitor: {e})"
    rips = [int(m, 16) for m in re.findall(r"RIP=([0-9a-f]{16})", data.decode(errors="replace"))]
    symbols = []
    try:
        for line in open(kallsyms(version)):
            addr, kind, name = line.split()[:3]
            if kind in "tTwW":
                symbols.append((int(addr, 16), name))
        symbols.sort()
    except OSError:
        pass
    out = []
    for i, rip in enumerate(rips):
        name = "?"
        lo = [s for s in symbols if s[0] <= rip]
        if lo and rip >= 0xffffffff80000000:
            name = f"{lo[-1][1]}+{rip - lo[-1][0]:#x}"
        elif rip < 0x800000000000:
            name = "user space"
        out.append(f"  cpu {i}: {rip:#x} {name}")
    return "\n".join(out) or data.decode(errors="replace")[-2000:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="2s2c2t", choices=sorted(TOPOLOGIES))
    ap.add_argument("--timeout", type=float, default=900, help="seconds before the guest is stopped")
    ap.add_argument("--memory-mib", type=int, default=2048)
    ap.add_argument("--collect", metavar="DIR",
                    help="copy what the command wrote under /mnt/collect in the guest to DIR")
    ap.add_argument("--stall-retries", type=int, default=0,
                    help="start a guest that ran past --timeout again, up to this many times "
                         "(an emulated guest on a loaded host has stalled once; a failed check is never retried)")
    ap.add_argument("--stall-after", type=int, default=200,
                    help="seconds without check progress after which the guest prints its blocked tasks")
    # Single-threaded TCG by default: under multi-threaded TCG the guest
    # kernel deadlocked now and then while patching its own code (vCPUs
    # spinning in int3 and a queued spin lock; the `sigkill` check hung
    # after 3-9 passes in four loops of repeats), never in 24 passes
    # single-threaded (docs/results.md, issue 24).
    ap.add_argument("--tcg", choices=["multi", "single"], default="single",
                    help="QEMU's TCG threading: one host thread for all vCPUs (single, the default) "
                         "or one per vCPU (multi: faster, but guests have hung)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give a command after --")
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        sys.exit("no qemu-system-x86_64: run `make vm-deps`")
    vmlinuz, version = kernel()
    rd = initramfs(version)
    smp, nodes = TOPOLOGIES[a.topology]
    out = tempfile.mkdtemp(prefix="herd-vm-")
    # The guest runs a copy of herd's binary, in the share for output: a
    # rebuild of target/release while a guest runs (slow: minutes) would
    # otherwise change the binary under the guest's feet (a check failed
    # that way once). Scripts take it from HERD_BIN.
    herd = os.path.join(ROOT, "target", "release", "herd")
    if os.path.exists(herd):
        shutil.copy2(herd, os.path.join(out, "herd"))
    with open(os.path.join(out, "cmd.sh"), "w") as f:
        f.write("export HERD_BIN=/mnt/herd\n" if os.path.exists(herd) else "")
        f.write(" ".join(cmd) + "\n")
    # The project is shared again at its own path (init mounts it after
    # the tmpfs that would hide a checkout under /tmp).
    with open(os.path.join(out, "project"), "w") as f:
        f.write(ROOT + "\n")
    per = a.memory_mib // len(nodes)
    numa = []
    for i, cpus in enumerate(nodes):
        numa += ["-object", f"memory-backend-ram,id=m{i},size={per}M",
                 "-numa", f"node,nodeid={i},cpus={cpus},memdev=m{i}"]
    argv = [qemu, "-M", "q35", "-accel", f"tcg,thread={a.tcg}",
            "-cpu", "max,vendor=GenuineIntel", "-m", f"{per * len(nodes)}M",
            "-smp", smp, *numa,
            "-fsdev", "local,id=fs0,path=/,security_model=none,readonly=on,multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=fs0,mount_tag=hostroot",
            "-fsdev", f"local,id=fs1,path={out},security_model=none",
            "-device", "virtio-9p-pci,fsdev=fs1,mount_tag=out",
            "-fsdev", f"local,id=fs2,path={ROOT},security_model=none,readonly=on,multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=fs2,mount_tag=project",
            "-kernel", vmlinuz, "-initrd", rd,
            "-append", f"console=ttyS0 quiet loglevel=3 panic=-1 softlockup_panic=1 herd.stall={a.stall_after}",
            "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio"]
    # The monitor, to ask a stalled guest where its CPUs are (the kernel
    # without address randomisation, so System.map names the addresses).
    monitor = os.path.join(out, "monitor.sock")
    argv[argv.index("-append") + 1] += " nokaslr"
    argv += ["-monitor", f"unix:{monitor},server=on,wait=off"]
    for attempt in range(a.stall_retries + 1):
        if os.path.exists(monitor):
            os.remove(monitor)  # a stopped guest's, before --stall-retries starts one again
        q = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        try:
            console = q.communicate(timeout=a.timeout)[0]
            break
        except subprocess.TimeoutExpired:
            where = cpu_places(monitor, version)
            q.kill()
            console = q.communicate()[0]
            print(console[-3000:], file=sys.stderr)
            print(f"guest.py: where the guest's CPUs were:\n{where}", file=sys.stderr)
            print(f"guest.py: the guest ran past {a.timeout:.0f} s and was stopped", file=sys.stderr)
            partial = os.path.join(out, "output")
            if os.path.exists(partial):
                print("guest.py: its checks printed:\n" + open(partial, errors="replace").read(), file=sys.stderr)
            if "HERD-VM-STALL" in console:
                print("guest.py: its stall watchdog (scripts/vm/init) printed:\n"
                      + console[console.index("HERD-VM-STALL"):][-30000:], file=sys.stderr)
            if attempt == a.stall_retries:
                sys.exit(124)
            # Only a guest that stalled is started again: a check that
            # failed ends the run with its status below, never retried.
            print("guest.py: starting it again (--stall-retries)", file=sys.stderr)
            for f in ("output", "status"):
                if os.path.exists(os.path.join(out, f)):
                    os.remove(os.path.join(out, f))
    output = os.path.join(out, "output")
    if os.path.exists(output):
        sys.stdout.write(open(output, errors="replace").read())
    status = os.path.join(out, "status")
    if not os.path.exists(status):
        print(console[-3000:], file=sys.stderr)
        sys.exit("guest.py: the guest ended without a status (it did not boot, or crashed)")
    code = int(open(status).read().strip() or 1)
    collected = os.path.join(out, "collect")
    if a.collect and os.path.isdir(collected):
        shutil.copytree(collected, a.collect, dirs_exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
