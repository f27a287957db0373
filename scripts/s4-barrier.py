#!/usr/bin/env python3
"""S4's real-machine experiment (issue 9): the barrier benchmark (spin
barrier) with 3 threads on K = 2 cores under pack:palm, pack:tp and pack:tr
(2 threads, the same total work), alternating, N runs each; prints each
variant's median runtime and the ratios PALM/TP and PALM/TR.

Usage (after `make`): scripts/s4-barrier.py [--runs 10] [--total 1e7]
  [--phases 60] [--palm pack:palm:cores=2] [--no-realtime] [--static-best]
Every variant runs under `herd run --realtime` unless --no-realtime (the
same herd flags for all, so only the policy differs).

--static-best adds S4's static best: first, offline, PALM at each fixed
period from 0.125 to 64 ms (3 runs each, the best median kept), then that
period as a fourth variant in the alternation.
"""
import argparse
import re
import statistics
import subprocess
import sys

HERD = "target/release/herd"
BENCH = "target/workloads/barrier-hb"


def runtime(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"runtime ([0-9.]+) s", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--total", default="1e7")
    ap.add_argument("--phases", default="60")
    ap.add_argument("--palm", default="pack:palm:cores=2")
    ap.add_argument("--no-realtime", action="store_true")
    ap.add_argument("--static-best", action="store_true")
    a = ap.parse_args()
    rt = [] if a.no_realtime else ["--realtime"]
    bench = [BENCH, "--total", a.total, "--phases", a.phases, "--mode", "spin"]
    variants = {
        "PALM": [HERD, "run", *rt, "--policy", a.palm, "--", *bench, "--threads", "3"],
        "TP": [HERD, "run", *rt, "--policy", "pack:tp:cores=2", "--", *bench, "--threads", "3"],
        "TR": [HERD, "run", *rt, "--threads", "2", "--policy", "pack:tr:cores=2", "--", *bench, "--threads", "{threads}"],
    }
    if a.static_best:
        # Offline: every fixed period of PALM's range, the best median kept.
        best = None
        for period_us in [125 * 2**i for i in range(10)]:
            cmd = [HERD, "run", *rt, "--policy", f"pack:palm:cores=2,period_us={period_us}", "--", *bench, "--threads", "3"]
            t = statistics.median(runtime(cmd) for _ in range(3))
            print(f"static best, offline: period {period_us} us: {t:.3f} s", flush=True)
            if best is None or t < best[0]:
                best = (t, period_us)
        variants["SB"] = [HERD, "run", *rt, "--policy", f"pack:palm:cores=2,period_us={best[1]}", "--", *bench, "--threads", "3"]
        print(f"static best: period {best[1]} us")
    times = {k: [] for k in variants}
    for i in range(a.runs):
        for name, cmd in variants.items():
            times[name].append(runtime(cmd))
        print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("medians: " + ", ".join(f"{k} {v:.3f} s" for k, v in med.items()))
    print(f"PALM vs TP: {(med['PALM'] / med['TP'] - 1) * 100:+.1f}%  (target <= -30%)")
    print(f"PALM vs TR: {(med['PALM'] / med['TR'] - 1) * 100:+.1f}%  (target within +10%)")
    if "SB" in med:
        print(f"PALM vs static best: {(med['PALM'] / med['SB'] - 1) * 100:+.1f}%")


if __name__ == "__main__":
    main()
