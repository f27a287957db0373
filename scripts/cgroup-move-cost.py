#!/usr/bin/env python3
"""What moving a process into a cgroup costs here: one move on its own
against one right after another (issue 23's 200-program batch, where each
program joined its group on its own). A move waits for the cgroup
migration lock, whose writer waits an RCU grace period unless a move went
shortly before.

Usage (root; a writable v1 cpuset or the v2 hierarchy):
  scripts/cgroup-move-cost.py [CGROUP_ROOT]   (default /sys/fs/cgroup/cpuset)
Prints the median and 90th percentile of 20 moves, 50 ms apart and back to
back.
"""
import os
import subprocess
import sys
import time

root = sys.argv[1] if len(sys.argv) > 1 else "/sys/fs/cgroup/cpuset"
group = os.path.join(root, f"herd-move-cost-{os.getpid()}")
os.makedirs(group)
try:
    for f in ("cpuset.mems", "cpuset.cpus"):
        if os.path.exists(os.path.join(root, f)):
            with open(os.path.join(root, f)) as src, open(os.path.join(group, f), "w") as dst:
                dst.write(src.read())
    for gap_s in (0.05, 0.0):
        took = []
        for _ in range(20):
            p = subprocess.Popen(["sleep", "5"])
            time.sleep(gap_s)
            t = time.perf_counter()
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(p.pid))
            took.append(time.perf_counter() - t)
            p.kill()
            p.wait()
        took.sort()
        print(f"moves {gap_s * 1e3:.0f} ms apart: median {took[10] * 1e3:.2f} ms, p90 {took[17] * 1e3:.2f} ms")
finally:
    os.rmdir(group)
