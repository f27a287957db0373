#!/usr/bin/env python3
"""S3's comparison over scenarios/s3-*.toml: for each platform and set, the
geometric mean over the 8 tasks of each one's completion time (its first
run's turnaround) relative to the same task under `linux`, as S3's Figures
3-5 show it, plus makespan, migrations per minute and decision overhead.

Usage (after `cargo build --release`):
  scripts/s3-summary.py [--policy P ...] [--json]
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

HERD = os.path.join(os.path.dirname(__file__), "..", "target", "release", "herd")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "scenarios", "s3-*.toml")))
    if not files:
        sys.exit("no scenarios/s3-*.toml: run scripts/gen-s3-scenarios.py")
    for f in files:
        cmd = [HERD, "sim", f, "--json"] + sum((["--policy", p] for p in args.policy), [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{f}: {r.stderr.strip()}")
        d = json.loads(r.stdout)
        base = {j["name"]: j["turnaround_s"] for j in d["policies"][0]["jobs"]}
        name = os.path.basename(f)[3:-5]
        platform, set_name = name.split("-", 1)
        for p in d["policies"][1:]:
            ratios = [j["turnaround_s"] / base[j["name"]] for j in p["jobs"]]
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            rows.append({
                "platform": platform, "set": set_name, "policy": p["name"],
                "completion_vs_linux": geo,
                "makespan_vs_linux": p["makespan_s"] / d["policies"][0]["makespan_s"],
                "migrations_per_min": p["migrations_per_min"],
                "decision_overhead_pct": p["decision_overhead_pct"],
            })
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'platform':<8} {'set':<5} {'policy':<36} {'completion':>11} {'makespan':>9} {'migr/min':>9} {'overhead %':>11}")
    for r in rows:
        print(f"{r['platform']:<8} {r['set']:<5} {r['policy']:<36} {r['completion_vs_linux']:>11.3f} "
              f"{r['makespan_vs_linux']:>9.3f} {r['migrations_per_min']:>9.1f} {r['decision_overhead_pct'] or 0:>11.4f}")
    print("completion: geometric mean over tasks of turnaround / turnaround under linux (S3's measure)")


if __name__ == "__main__":
    main()
