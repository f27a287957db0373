#!/usr/bin/env python3
"""Does any policy lose to plain Linux in simulation, with the guard off
(each algorithm as published) and on (what users get)? Issue 23's count.

For every machine scenario in scenarios/ (cluster scenarios are S2's node
choice, not a placement policy, and are left out), each policy against its
baseline, by the scenario's own measure:
  - S3 sets (s3-*): completion, the geometric mean over tasks of turnaround
    over the same task's under linux, seeds averaged (S3's measure);
  - S1 groups (s1-*, learning runs): the mean gain over linux across runs;
  - S4 (s4-*): pack:palm against pack:tp at the same core count, makespan
    (the consolidation study: batch throughput against pack:tp);
  - the rest: mean makespan over seeds against linux.
A pair is "behind" when it is more than 2% worse than its baseline. Where a
policy wins with the guard off, "kept" is the share of that gain it keeps
with the guard on (the issue asks for >= 90%).

Usage (after `cargo build --release`):
  scripts/harm-audit.py [--only PATTERN] [--json]
Judged by herd's own simulator: a check of the guard against the model, not
ground truth.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")
HERD = os.environ.get("HERD", os.path.join(ROOT, "target", "release", "herd"))
MARGIN = 0.02


def sim(path, guard):
    r = subprocess.run([HERD, "sim", path, "--json", "--no-timing", "--guard", guard],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{path}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def by_policy(d):
    out = {}
    for p in d["policies"]:
        out.setdefault(p["name"], []).append(p)
    return out


def mean(xs):
    return sum(xs) / len(xs)


def completion(runs, base):
    """S3's measure: geometric mean over tasks of mean turnaround / linux's."""
    def turn(ps):
        names = [j["name"] for j in ps[0]["jobs"]]
        return {n: mean([next(j["turnaround_s"] for j in p["jobs"] if j["name"] == n) for p in ps]) for n in names}
    t, b = turn(runs), turn(base)
    return math.exp(mean([math.log(t[n] / b[n]) for n in t]))


def losses(name, d):
    """(policy, cost ratio against its baseline: > 1 is worse) per policy."""
    if "learning" in d:
        # Gain in percent over linux; as a cost ratio, 1 / (1 + gain).
        return [(s["policy"], 1.0 / (1.0 + s["mean_pct"] / 100.0)) for s in d["learning"]["summary"]]
    pols = by_policy(d)
    base = pols.get("linux")
    out = []
    if name.startswith("s3-"):
        for p, runs in pols.items():
            if p != "linux":
                out.append((p, completion(runs, base)))
    elif name.startswith("s4-"):
        tp = next((runs for p, runs in pols.items() if p.startswith("pack:tp")), None)
        for p, runs in pols.items():
            if p.startswith("pack:palm") and tp:
                if runs[0].get("consolidation"):
                    g = lambda rs: mean([r["consolidation"]["batch_ginstr_per_s"] for r in rs])
                    out.append((p, g(tp) / g(runs)))
                else:
                    m = lambda rs: mean([r["makespan_s"] for r in rs])
                    out.append((p, m(runs) / m(tp)))
    else:
        for p, runs in pols.items():
            if p != "linux":
                out.append((p, mean([r["makespan_s"] for r in runs]) / mean([r["makespan_s"] for r in base])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="scenario names containing this")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for f in sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.toml"))):
        name = os.path.basename(f)[:-5]
        if args.only not in name or "cluster" in name:
            continue
        off = dict(losses(name, sim(f, "off")))
        on = dict(losses(name, sim(f, "on")))
        for p in off:
            o, g = off[p], on.get(p, float("nan"))
            kept = None
            if o < 1.0 - 1e-9:
                kept = (1.0 - g) / (1.0 - o)
            rows.append({"scenario": name, "policy": p, "off": o, "on": g, "kept": kept})
        print(f"{name}: done", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'scenario':<18} {'policy':<34} {'guard off':>10} {'guard on':>9} {'kept':>6}")
    for r in rows:
        flag = " behind" if r["on"] > 1 + MARGIN else ""
        flag += " (lost >10% of its gain)" if r["kept"] is not None and r["kept"] < 0.9 else ""
        kept = "" if r["kept"] is None else f"{100 * r['kept']:.0f}%"
        print(f"{r['scenario']:<18} {r['policy']:<34} {r['off']:>10.3f} {r['on']:>9.3f} {kept:>6}{flag}")
    behind_off = sum(r["off"] > 1 + MARGIN for r in rows)
    behind_on = sum(r["on"] > 1 + MARGIN for r in rows)
    wins = [r for r in rows if r["kept"] is not None]
    kept90 = sum(r["kept"] >= 0.9 for r in wins)
    print(f"cost against the baseline (lower is better); behind by more than 2%: {behind_off} pairs with the guard off, "
          f"{behind_on} with it on; of {len(wins)} wins, {kept90} keep >= 90% of their gain with the guard on")


if __name__ == "__main__":
    main()
