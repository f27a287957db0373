#!/usr/bin/env python3
"""S3's comparison over scenarios/s3-*.toml: for each platform and set, the
geometric mean over the 8 tasks of each one's completion time (its first
run's turnaround) relative to the same task under `linux`, as S3's Figures
3-5 show it, plus makespan, migrations per minute (every move per minute of
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
        cmd = [HERD, "sim", f, "--json"] + sum((["--policy", p] for p in args.policy), [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{f}: {r.stderr.strip()}")
        name = os.path.basename(f)[3:-5]
        platform, set_name = name.split("-", 1)
        for v in averaged(json.loads(r.stdout)):
            rows.append({"platform": platform, "set": set_name, **v})
    if args.svg:
        try:
            with open(args.svg, "w") as out:
                out.write(figure(rows))
        except OSError as e:
            sys.exit(f"--svg {args.svg}: {e.strerror}")
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'platform':<8} {'set':<5} {'policy':<36} {'completion':>11} {'makespan':>9} {'migr/min':>9} {'S3 migr':>8} {'overhead %':>11}")
    for r in rows:
        print(f"{r['platform']:<8} {r['set']:<5} {r['policy']:<36} {r['completion_vs_linux']:>11.3f} "
              f"{r['makespan_vs_linux']:>9.3f} {r['migrations_per_min']:>9.1f} {r['cross_kind_per_cpu_min']:>8.2f} "
              f"{r['decision_overhead_pct'] or 0:>11.4f}")
    print("completion: geometric mean over tasks of turnaround / turnaround under linux (S3's measure)")
    print("migr/min: every move per minute of makespan; S3 migr: moves between core kinds per minute of CPU time (S3's Figure 7)")


def figure(rows):
    """An SVG with one panel per platform, as S3's Figures 3-5: for each set,
    a bar per policy of its completion time relative to linux (the line at
    1; lower is better). Written by hand: a few rectangles need no plotting
    library on a fresh machine."""
    platforms = [p for p in ("uma", "numa1", "numa2") if any(r["platform"] == p for r in rows)]
    platforms += sorted({r["platform"] for r in rows} - set(platforms))
    # Each platform's preset is one series: "amp:comprehensive (preset)".
    series = lambda policy: re.sub(r":preset=[\w-]+$", " (preset)", policy)
    policies = list(dict.fromkeys(series(r["policy"]) for r in rows))
    sets = list(dict.fromkeys(r["set"] for r in rows))
    value = {(r["platform"], r["set"], series(r["policy"])): r["completion_vs_linux"] for r in rows}
    vals = list(value.values())
    lo = min(0.8, math.floor(min(vals) * 20) / 20)
    hi = max(1.1, math.ceil(max(vals) * 20) / 20)
    colours = ["#999999", "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948"]
    bar, gap, plot_h, left, top = 12, 16, 220, 50, 40
    group_w = bar * len(policies) + gap
    panel_w = group_w * len(sets)
    width = max(left + panel_w + 20, 520)
    panel_h = plot_h + 50
    height = top + panel_h * len(platforms) + 20 * len(policies) + 20
    y = lambda v, base: base + plot_h * (hi - v) / (hi - lo)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="20" font-size="14">Completion time relative to linux (S3\'s measure; lower is better)</text>']
    for k, platform in enumerate(platforms):
        base = top + k * panel_h
        out.append(f'<text x="{left}" y="{base - 4}" font-weight="bold">{platform.upper()}</text>')
        for step in range(round((hi - lo) / 0.05) + 1):
            tick = lo + 0.05 * step
            out.append(f'<line x1="{left}" x2="{left + panel_w}" y1="{y(tick, base):.1f}" y2="{y(tick, base):.1f}" '
                       f'stroke="#{"000" if abs(tick - 1) < 1e-6 else "ddd"}"/>')
            out.append(f'<text x="{left - 6}" y="{y(tick, base) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
        for g, set_name in enumerate(sets):
            x0 = left + g * group_w + gap / 2
            for i, policy in enumerate(policies):
                v = value.get((platform, set_name, policy))
                if v is None:
                    continue
                top_y, bottom_y = sorted((y(max(min(v, hi), lo), base), y(1.0, base)))
                out.append(f'<rect x="{x0 + i * bar:.1f}" y="{top_y:.1f}" width="{bar - 1}" height="{max(bottom_y - top_y, 0.5):.1f}" '
                           f'fill="{colours[i % len(colours)]}"><title>{policy} {set_name}: {v:.3f}</title></rect>')
            out.append(f'<text x="{x0 + bar * len(policies) / 2:.1f}" y="{base + plot_h + 16}" text-anchor="middle">{set_name.upper()}</text>')
    legend = top + panel_h * len(platforms)
    for i, policy in enumerate(policies):
        out.append(f'<rect x="{left}" y="{legend + 20 * i}" width="12" height="12" fill="{colours[i % len(colours)]}"/>')
        out.append(f'<text x="{left + 18}" y="{legend + 20 * i + 10}">{policy}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


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
    out = []
    for ps in runs[1:]:
        t = turnarounds(ps)
        ratios = [t[j] / base[j] for j in t]
        out.append({
            "policy": ps[0]["name"],
            "completion_vs_linux": math.exp(mean([math.log(x) for x in ratios])),
            "makespan_vs_linux": mean([p["makespan_s"] for p in ps]) / base_makespan,
            "migrations_per_min": mean([p["migrations_per_min"] for p in ps]),
            "cross_kind_per_cpu_min": mean([p["cross_kind_per_cpu_min"] for p in ps]),
            "decision_overhead_pct": mean([p["decision_overhead_pct"] or 0 for p in ps]),
            "seeds": len(ps),
        })
    return out


def sweep(scenarios):
    alphas = [0.0, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0]
    betas = [0.0, 0.1, 0.2, 0.3, 0.5]
    files = sorted(glob.glob(os.path.join(scenarios, "s3-*.toml")))
    by_platform = {}
    for f in files:
        name = os.path.basename(f)[3:-5]
        platform, set_name = name.split("-", 1)
        if set_name == "nd":
            continue
        pols = [f"amp:comprehensive:alpha={a},beta={b}" for a in alphas for b in betas]
        cmd = [HERD, "sim", f, "--json", "--no-timing"] + sum((["--policy", p] for p in pols), [])
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
