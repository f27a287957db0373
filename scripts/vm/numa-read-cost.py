#!/usr/bin/env python3
"""What reading where a large program's memory lies costs herd's loop:
one program that touches `--mib` MiB and then works for `--seconds` s,
under `herd run --policy numa:model`; prints herd's own summary line
(its CPU time and its decisions) and what one read of the program's
`/proc/<pid>/numa_maps` takes, read here. Run in a guest with several
NUMA nodes (herd reads memory placement only there):

    python3 scripts/vm/guest.py --topology 2s2c2t --timeout 900 -- \\
      /usr/bin/python3 $PWD/scripts/vm/numa-read-cost.py --mib 768 --seconds 30

docs/results.md, "Real kernels, forty-eighth session".
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=768)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    program = ("import sys, time\n"
               f"buf = bytearray({a.mib} << 20)\n"
               "for i in range(0, len(buf), 4096): buf[i] = 1\n"
               "print('touched', flush=True)\n"
               "t = time.time()\n"
               f"while time.time() - t < {a.seconds}: pass\n")
    for _ in range(a.rounds):
        h = subprocess.Popen([checks.HERD, "run", "--policy", "numa:model", "--guard", "off", "--period-ms", "100",
                              "--", "/usr/bin/python3", "-c", program],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The program's own read of its numa_maps, timed here, once it has
        # touched its memory: what herd pays for each of its readings.
        took = []
        deadline = time.time() + 120
        while time.time() < deadline and h.poll() is None:
            kids = [p for p in checks.descendants(h.pid) if "bytearray" in checks.cmdline(p)]
            if kids and checks.pages_by_node(kids[0]) and sum(checks.pages_by_node(kids[0]).values()) * 4 >= a.mib * 1000:
                for _ in range(3):
                    t = time.perf_counter()
                    open(f"/proc/{kids[0]}/numa_maps").read()
                    took.append(time.perf_counter() - t)
                break
            time.sleep(1)
        _, err = h.communicate(timeout=a.seconds + 600)
        line = next((l for l in err.splitlines() if "herd used" in l), err[-400:])
        cpu = re.search(r"herd used ([0-9.]+) ms CPU", line)
        print(f"{a.mib} MiB: numa_maps read {', '.join(f'{1e3 * t:.0f}' for t in took)} ms; "
              f"herd used {cpu.group(1) if cpu else '?'} ms CPU; {line}", flush=True)


if __name__ == "__main__":
    main()
