#!/usr/bin/env python3
"""The daemon's own CPU while it manages N busy processes (issue 27).

Starts `herd daemon` with one rule that takes N copies of the compute
workload (sharing CPUs, as N busy processes on a small machine must), waits
until it manages them all, then reads the daemon's CPU time (every thread:
the scan loop, the sessions, the socket) from /proc over a window. The same
with a rule that matches nothing gives the cost of watching the machine
alone (the scans). Alternates the two, repeats, reports medians.

  python3 scripts/daemon-cost.py [--procs 50] [--window 20] [--repeat 3]
      [--policy static:compact] [--scan-ms 1000] [--period-ms 100]
      [--guard on|off] [--json]

A real measurement on this machine (live, the kernel's own accounting),
not a model's figure.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERD = os.path.join(ROOT, "target/release/herd")
COMPUTE = os.path.join(ROOT, "target/workloads/compute")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def status(state):
    out = subprocess.run([HERD, "daemon", "status", "--json", "--state-dir", state],
                         capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def one(args, matching):
    marker = 987654321000 + os.getpid()
    with tempfile.TemporaryDirectory() as tmp:
        state = os.path.join(tmp, "state")
        config = os.path.join(tmp, "herd.toml")
        pattern = f"compute --iterations {marker}" if matching else "no such program"
        with open(config, "w") as f:
            f.write(f"[daemon]\nscan_interval_ms = {args.scan_ms}\n"
                    f"[[rule]]\nname = \"busy\"\npolicy = \"{args.policy}\"\nshare = true\n"
                    f"[rule.match]\ncmdline = \"{pattern}\"\n")
        env = dict(os.environ, HERD_RUN_DIR=state)
        procs = [subprocess.Popen([COMPUTE, "--iterations", str(marker)], stdout=subprocess.DEVNULL)
                 for _ in range(args.procs)]
        daemon = subprocess.Popen([HERD, "daemon", "--config", config, "--state-dir", state,
                                   "--period-ms", str(args.period_ms), "--guard", args.guard],
                                  env=env, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while True:
                s = status(state)
                managed = 0 if s is None else sum(1 for j in s["jobs"] if j["state"] == "managed")
                if s is not None and managed == (args.procs if matching else 0) and s["scans"] >= 2:
                    break
                if time.time() > deadline:
                    sys.exit(f"the daemon manages {managed} of {args.procs} after 60 s")
                time.sleep(0.2)
            before, t0 = cpu_s(daemon.pid), time.time()
            time.sleep(args.window)
            used, wall = cpu_s(daemon.pid) - before, time.time() - t0
            s = status(state)
            decisions = sum(j["decisions"] for j in s["jobs"])
            decide_s = sum(j["decide_s"] for j in s["jobs"])
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
            for p in procs:
                p.kill()
                p.wait()
    return {"cpu_share": used / wall, "decisions": decisions, "decide_s": decide_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=50)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policy", default="static:compact")
    ap.add_argument("--scan-ms", type=int, default=1000)
    ap.add_argument("--period-ms", type=float, default=100.0, help="each job's decision period")
    ap.add_argument("--guard", choices=["on", "off"], default="on")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for path in (HERD, COMPUTE):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run `make build` first")
    runs = {"managing": [], "watching": []}
    for _ in range(args.repeat):
        runs["managing"].append(one(args, True))
        runs["watching"].append(one(args, False))
    med = {k: statistics.median(r["cpu_share"] for r in v) for k, v in runs.items()}
    m = runs["managing"]
    per_decision_us = statistics.median(r["decide_s"] / max(r["decisions"], 1) * 1e6 for r in m)
    result = {
        "procs": args.procs, "policy": args.policy, "scan_ms": args.scan_ms,
        "period_ms": args.period_ms, "guard": args.guard,
        "window_s": args.window, "repeat": args.repeat,
        "managing_cpu_percent_median": round(100 * med["managing"], 2),
        "managing_cpu_percent_all": [round(100 * r["cpu_share"], 2) for r in m],
        "watching_cpu_percent_median": round(100 * med["watching"], 2),
        "watching_cpu_percent_all": [round(100 * r["cpu_share"], 2) for r in runs["watching"]],
        "decide_us_median": round(per_decision_us, 1),
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"herd daemon, {args.procs} busy processes under {args.policy} (scan {args.scan_ms} ms, "
              f"period {args.period_ms:g} ms, guard {args.guard}), "
              f"{args.window:.0f} s windows x {args.repeat}: "
              f"{result['managing_cpu_percent_median']}% of one CPU managing them "
              f"(runs {result['managing_cpu_percent_all']}), "
              f"{result['watching_cpu_percent_median']}% watching them unmanaged "
              f"(runs {result['watching_cpu_percent_all']}); "
              f"a decision {result['decide_us_median']} us")


if __name__ == "__main__":
    main()
