#!/usr/bin/env python3
"""S1's cross-run experiment over scenarios/s1-wl*.toml, both views: each
policy's mean gain over linux in runs 10-40 per group (the learned mean,
S1's measure), with herd's guard off (the algorithm as published, for
comparison with the paper) and on (what a user gets), then the mean over
the groups. S1's own formula is `bw:iabw:target=iabw`; herd's default
target (`bw:iabw`) and the oracle are reported beside it.

Usage (after `make build`; about a minute): scripts/s1-summary.py [--json]
"""
import glob
import json
import os
import sys

from herdsim import ROOT, sim_json


def gains(path, guard):
    return {s["policy"]: s["learned_mean_pct"] for s in sim_json(path, "--guard", guard)["learning"]["summary"]}


def main():
    files = sorted(glob.glob(os.path.join(ROOT, "scenarios", "s1-wl*.toml")))
    if not files:
        sys.exit("no scenarios/s1-wl*.toml: run scripts/gen-s1-scenarios.py")
    rows = {}
    for f in files:
        group = os.path.basename(f)[3:-5]
        for guard in ("off", "on"):
            for policy, g in gains(f, guard).items():
                rows.setdefault(policy, {}).setdefault(guard, {})[group] = g
    if "--json" in sys.argv[1:]:
        print(json.dumps(rows, indent=1))
        return
    groups = [os.path.basename(f)[3:-5] for f in files]
    mean = lambda v: sum(v) / len(v)
    print(f"{'policy':<28} {'guard':<5} " + " ".join(f"{g[-4:]:>6}" for g in groups) + f" {'mean':>7}")
    for policy, views in rows.items():
        for guard in ("off", "on"):
            v = views.get(guard, {})
            print(f"{policy:<28} {guard:<5} " + " ".join(f"{v.get(g, float('nan')):>+6.2f}" for g in groups)
                  + f" {mean(list(v.values())):>+7.2f}")
    print("gain over linux in per cent, mean of runs 10-40 (S1's measure; simulated, herd's own model); "
          "guard off: as published; on: as users run it")


if __name__ == "__main__":
    main()
