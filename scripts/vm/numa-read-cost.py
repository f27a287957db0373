#!/usr/bin/env python3
"""What reading where a large program's memory lies costs herd's loop:
one program that touches `--mib` MiB and then works for `--seconds` s,
under `herd run --policy numa:model`; prints herd's own summary line
(its CPU time, its decisions, how often it read memory placement) and
what one read of the program's `/proc/<pid>/numa_maps` takes, read here.
Run in a guest with several NUMA nodes (herd reads memory placement only
there), with room for the program:

    python3 scripts/vm/guest.py --topology 2s2c2t --memory-mib 10240 \\
      --timeout 1500 -- /usr/bin/python3 $PWD/scripts/vm/numa-read-cost.py \\
      --mib 6144 --seconds 40 --rounds 1

With --no-herd, only the read's cost: this script touches the memory
itself and times three reads of its own numa_maps (any machine, e.g.
`python3 scripts/vm/numa-read-cost.py --no-herd --mib 4096`).

docs/results.md, "Real kernels, forty-eighth session".
"""
import argparse
import mmap
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402


def read_times(pid, n=3):
    """Seconds each of `n` reads of `pid`'s numa_maps took."""
    took = []
    for _ in range(n):
        t = time.perf_counter()
        with open(f"/proc/{pid}/numa_maps") as f:
            f.read()
        took.append(time.perf_counter() - t)
    return took


def ms(took):
    return ", ".join(f"{1e3 * t:.1f}" for t in took)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=768)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-herd", action="store_true", help="time the reads of this script's own memory only")
    a = ap.parse_args()
    if a.no_herd:
        buf = mmap.mmap(-1, a.mib << 20)
        for i in range(0, a.mib << 20, 4096):
            buf[i] = 1
        print(f"{a.mib} MiB: numa_maps read {ms(read_times(os.getpid()))} ms", flush=True)
        return
    program = ("import time\n"
               f"buf = bytearray({a.mib} << 20)\n"
               "for i in range(0, len(buf), 4096): buf[i] = 1\n"
               "print('touched', flush=True)\n"
               "t = time.time()\n"
               f"while time.time() - t < {a.seconds}: pass\n")
    for _ in range(a.rounds):
        h = subprocess.Popen([checks.HERD, "run", "--policy", "numa:model", "--guard", "off", "--period-ms", "100",
                              "--", "/usr/bin/python3", "-c", program],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The program's numa_maps read here once it has touched its memory:
        # what herd pays for each of its readings.
        took = []
        deadline = time.time() + 120
        while time.time() < deadline and h.poll() is None:
            kids = [p for p in checks.descendants(h.pid) if "bytearray" in checks.cmdline(p)]
            if kids and sum(checks.pages_by_node(kids[0]).values()) * 4 >= a.mib * 1000:
                took = read_times(kids[0])
                break
            time.sleep(1)
        _, err = h.communicate(timeout=a.seconds + 600)
        line = next((l for l in err.splitlines() if "herd used" in l), err[-400:])
        cpu = re.search(r"herd used ([0-9.]+) ms CPU", line)
        print(f"{a.mib} MiB: numa_maps read {ms(took)} ms; "
              f"herd used {cpu.group(1) if cpu else '?'} ms CPU; {line}", flush=True)


if __name__ == "__main__":
    main()
