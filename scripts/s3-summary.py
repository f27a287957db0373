#!/usr/bin/env python3
"""S3's comparison over scenarios/s3-*.toml: for each platform and set, the
geometric mean over the 8 tasks of each one's completion time (its first
run's turnaround) relative to the same task under `linux`, as S3's Figures
3-5 show it, each policy as published (guard off) and as users run it
(guard on), plus makespan, migrations per minute (every move per minute of
makespan, and S3's Figure 7 measure: moves between core kinds per minute of
CPU time) and decision overhead.
Each scenario runs several seeds, which change where linux puts each task
(model.seeded_placement); a task's turnaround is its mean over them, as S3
averaged three runs.

Usage (after `cargo build --release`):
  scripts/s3-summary.py [--policy P ...] [--json] [--scenarios DIR] [--svg FILE]
                                    # DIR: other s3-*.toml files (e.g. variants written
                                    # by a modified copy of gen-s3-scenarios.py)
  scripts/s3-summary.py --sweep     # S3 3.2.3: amp:comprehensive over an (alpha, beta) grid,
                                    # the best pair per platform by mean completion on HD and LD
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tomllib

LINUX_26 = "linux:2.6"
HERD = os.path.join(os.path.dirname(__file__), "..", "target", "release", "herd")
SCENARIOS = os.path.join(os.path.dirname(__file__), "..", "scenarios")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--scenarios", default=SCENARIOS, metavar="DIR")
    ap.add_argument("--svg", metavar="FILE", help="also draw completion vs linux as S3's Figures 3-5 do")
    args = ap.parse_args()
    if args.sweep:
        return sweep(args.scenarios)
    rows = []
    files = sorted(glob.glob(os.path.join(args.scenarios, "s3-*.toml")))
    if not files:
        sys.exit(f"no s3-*.toml in {args.scenarios}: run scripts/gen-s3-scenarios.py")
    for f in files:
        # Both views: each algorithm as published (guard off) and what a
        # user gets (guard on).
        views = {}
        for guard in ("off", "on"):
            # S3's second baseline, the 2.6.27 kernel model, runs as a
            # policy; every policy is also measured against it.
            policies = args.policy or tomllib.load(open(f, "rb"))["policies"]
            cmd = [HERD, "sim", f, "--json", "--guard", guard] + sum((["--policy", p] for p in policies + [LINUX_26]), [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"{f}: {r.stderr.strip()}")
            views[guard] = averaged(json.loads(r.stdout))
        name = os.path.basename(f)[3:-5]
        platform, set_name = name.split("-", 1)
        for v, g in zip(views["off"], views["on"]):
            rows.append({"platform": platform, "set": set_name, **v,
                         "guarded_completion_vs_linux": g["completion_vs_linux"],
                         "guarded_makespan_vs_linux": g["makespan_vs_linux"],
                         "guarded_completion_vs_linux26": g["completion_vs_linux26"]})
    if args.svg:
        draw(figure(rows), args.svg)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'platform':<8} {'set':<5} {'policy':<36} {'completion':>11} {'guarded':>8} {'vs 2.6':>7} {'guarded':>8} "
          f"{'makespan':>9} {'guarded':>8} {'migr/min':>9} {'S3 migr':>8} {'overhead %':>11}")
    for r in rows:
        print(f"{r['platform']:<8} {r['set']:<5} {r['policy']:<36} {r['completion_vs_linux']:>11.3f} "
              f"{r['guarded_completion_vs_linux']:>8.3f} {r['completion_vs_linux26']:>7.3f} "
              f"{r['guarded_completion_vs_linux26']:>8.3f} {r['makespan_vs_linux']:>9.3f} {r['guarded_makespan_vs_linux']:>8.3f} "
              f"{r['migrations_per_min']:>9.1f} {r['cross_kind_per_cpu_min']:>8.2f} {r['decision_overhead_pct'] or 0:>11.4f}")
    print("completion: geometric mean over tasks of turnaround / turnaround under linux (S3's measure), the policy as "
          "published (guard off); guarded: with herd's guard on, as users run it; migrations and overhead: guard off")
    print("vs 2.6: the same against linux:2.6, the simulated kernel as Linux 2.6.27 (S3's) behaved: queues balanced "
          "by task count, waking tasks back on their last CPU, no fairness across CPUs")
    print("migr/min: every move per minute of makespan; S3 migr: moves between core kinds per minute of CPU time (S3's Figure 7)")


def figure(rows):
    """The figure as `herd plot` takes it: one panel per platform, as S3's
    Figures 3-5, and for each set a bar per policy of its completion time
    relative to linux, drawn from 1 (lower is better). herd draws it (with
    plotters), so the script needs no plotting library."""
    platforms = [p for p in ("uma", "numa1", "numa2") if any(r["platform"] == p for r in rows)]
    platforms += sorted({r["platform"] for r in rows} - set(platforms))
    # Each platform's preset is one series: "amp:comprehensive (preset)".
    series = lambda policy: re.sub(r":preset=[\w-]+$", " (preset)", policy)
    policies = list(dict.fromkeys(series(r["policy"]) for r in rows))
    sets = list(dict.fromkeys(r["set"] for r in rows))
    value = {(r["platform"], r["set"], series(r["policy"])): r["completion_vs_linux"] for r in rows}
    return {
        "title": "Completion time relative to linux (S3's measure; lower is better)",
        "y_desc": "completion vs linux (x)",
        "reference": 1.0,
        "series": policies,
        "panels": [
            {"name": platform.upper(),
             "groups": [[s.upper(), [value.get((platform, s, p)) for p in policies]] for s in sets]}
            for platform in platforms
        ],
    }


def draw(fig, path):
    """Writes `fig` to `path` as SVG through `herd plot`."""
    r = subprocess.run([HERD, "plot", "-", "--out", path], input=json.dumps(fig), capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"--svg {path}: {r.stderr.strip()}")


def averaged(d):
    """From `herd sim --json` over several seeds (each seed's runs in one
    block, linux first), per policy in the order run, linux left out:
    (name, completion (geometric mean over tasks of mean turnaround over
    linux's), makespan over linux's, migrations per minute and decision
    overhead, each averaged over seeds)."""
    seeds = sorted({p["seed"] for p in d["policies"]})
    block = len(d["policies"]) // len(seeds)
    runs = [d["policies"][i::block] for i in range(block)]
    mean = lambda xs: sum(xs) / len(xs)
    def turnarounds(ps):
        return {j["name"]: mean([next(k["turnaround_s"] for k in p["jobs"] if k["name"] == j["name"]) for p in ps])
                for j in ps[0]["jobs"]}
    base = turnarounds(runs[0])
    base_makespan = mean([p["makespan_s"] for p in runs[0]])
    old = next((turnarounds(ps) for ps in runs if ps[0]["name"] == LINUX_26), None)
    completion = lambda t, b: math.exp(mean([math.log(t[j] / b[j]) for j in t]))
    out = []
    for ps in runs[1:]:
        t = turnarounds(ps)
        out.append({
            "policy": ps[0]["name"],
            "completion_vs_linux": completion(t, base),
            "completion_vs_linux26": completion(t, old) if old else None,
            "makespan_vs_linux": mean([p["makespan_s"] for p in ps]) / base_makespan,
            "migrations_per_min": mean([p["migrations_per_min"] for p in ps]),
            "cross_kind_per_cpu_min": mean([p["cross_kind_per_cpu_min"] for p in ps]),
            "decision_overhead_pct": mean([p["decision_overhead_pct"] or 0 for p in ps]),
            "seeds": len(ps),
        })
    return out


def sweep(scenarios):
    """S3's parameter study (3.2.3), on S3's algorithm as published:
    `keep_memory=0`, so herd's rule against stranding memory does not mask
    what alpha does."""
    alphas = [0.0, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0]
    betas = [0.0, 0.1, 0.2, 0.3, 0.5]
    files = sorted(glob.glob(os.path.join(scenarios, "s3-*.toml")))
    by_platform = {}
    for f in files:
        name = os.path.basename(f)[3:-5]
        platform, set_name = name.split("-", 1)
        if set_name == "nd":
            continue
        pols = [f"amp:comprehensive:alpha={a},beta={b},keep_memory=0" for a in alphas for b in betas]
        cmd = [HERD, "sim", f, "--json", "--no-timing", "--guard", "off"] + sum((["--policy", p] for p in pols), [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{f}: {r.stderr.strip()}")
        got = averaged(json.loads(r.stdout))
        for (a, b), v in zip([(a, b) for a in alphas for b in betas], got):
            by_platform.setdefault(platform, {}).setdefault((a, b), []).append(v["completion_vs_linux"])
    for platform, grid in sorted(by_platform.items()):
        print(f"{platform}: mean completion vs linux over HD and LD sets (rows alpha, columns beta)")
        print("alpha\\beta " + " ".join(f"{b:>6}" for b in betas))
        for a in alphas:
            print(f"{a:>10} " + " ".join(f"{sum(grid[(a, b)]) / len(grid[(a, b)]):>6.3f}" for b in betas))
        score = lambda k: sum(grid[k]) / len(grid[k])
        best = min(grid, key=score)
        # Many pairs tie (beta below the imbalance one task makes changes
        # nothing); name them all rather than let the grid order pick one.
        ties = [k for k in sorted(grid) if k != best and score(k) < score(best) + 0.0005]
        tied = f"; level to 0.0005: {', '.join(str(k) for k in ties)}" if ties else ""
        print(f"best (alpha, beta) = {best}: {score(best):.3f}{tied}\n")


if __name__ == "__main__":
    main()
