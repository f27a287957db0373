#!/usr/bin/env python3
"""S4's comparisons over scenarios/s4-*.toml, both views: each policy's
makespan against thread packing (TP, S4's baseline) and thread reduction
(TR), with herd's guard off (the algorithms as published) and on (what a
user gets). The consolidation study reports batch work, not makespan, and
is left to `herd sim scenarios/s4-consolidation.toml`.

Usage (after `make build`): scripts/s4-summary.py [--json]
"""
import glob
import json
import os
import sys

from herdsim import ROOT, sim_json


def makespans(path, guard):
    return {p["name"]: p["makespan_s"] for p in sim_json(path, "--guard", guard)["policies"]}


def main():
    files = [f for f in sorted(glob.glob(os.path.join(ROOT, "scenarios", "s4-*.toml"))) if "consolidation" not in f]
    rows = []
    for f in files:
        views = {g: makespans(f, g) for g in ("off", "on")}
        for policy in views["off"]:
            if policy == "linux":
                continue
            row = {"scenario": os.path.basename(f)[:-5], "policy": policy}
            for g, m in views.items():
                tp = next((v for k, v in m.items() if k.startswith("pack:tp")), None)
                tr = next((v for k, v in m.items() if k.startswith("pack:tr")), None)
                row[f"guard_{g}_s"] = m[policy]
                row[f"guard_{g}_vs_tp"] = m[policy] / tp if tp else None
                row[f"guard_{g}_vs_tr"] = m[policy] / tr if tr else None
            rows.append(row)
    if "--json" in sys.argv[1:]:
        print(json.dumps(rows, indent=1))
        return
    fmt = lambda x: f"{x:>6.3f}" if x is not None else f"{'-':>6}"
    print(f"{'scenario':<18} {'policy':<40} {'off: vs TP':>10} {'vs TR':>6} {'on: vs TP':>10} {'vs TR':>6}")
    for r in rows:
        print(f"{r['scenario']:<18} {r['policy']:<40} {fmt(r['guard_off_vs_tp']):>10} {fmt(r['guard_off_vs_tr'])} "
              f"{fmt(r['guard_on_vs_tp']):>10} {fmt(r['guard_on_vs_tr'])}")
    print("makespan over TP's and TR's in the same view (lower is better; simulated, herd's own model); "
          "guard off: as published; on: as users run it")


if __name__ == "__main__":
    main()
