#!/usr/bin/env python3
"""Every way of pairing S2's eight jobs on its four nodes (105 pairings),
each simulated by the cluster simulation (judged as the scenario says: the node simulator by default): the best and the worst by mean job
time, against what `numa:model` and S2's worst packing choose in
scenarios/s2-cluster.toml. Each pairing is a copy of the scenario with the
jobs reordered so that Slurm's first fit packs them in pairs.

Usage (after `cargo build --release`): scripts/s2-pairings.py
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(__file__), "..")
HERD = os.path.join(ROOT, "target", "release", "herd")
SCENARIO = os.path.join(ROOT, "scenarios", "s2-cluster.toml")


def sim(path):
    cmd = [HERD, "sim", path, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return {p["placement"]: p for p in json.loads(r.stdout)["placements"]}


def pairings(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for i, other in enumerate(rest):
        for p in pairings(rest[:i] + rest[i + 1:]):
            yield [(first, other)] + p


def pairs_of(result, names):
    by_node = {}
    for j in result["jobs"]:
        by_node.setdefault(j["node"], []).append(names.index(j["name"]))
    return sorted(tuple(sorted(v)) for v in by_node.values())


def main():
    text = open(SCENARIO).read()
    head, *jobs = text.split("[[job]]")
    names = [re.search(r'name = "([^"]+)"', j).group(1) for j in jobs]
    head = re.sub(r"selectors = .*", 'selectors = ["slurm"]', head)
    base = sim(SCENARIO)
    worst_packing = base["worst"]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pairing.toml")
        for p in pairings(list(range(len(jobs)))):
            with open(path, "w") as f:
                f.write(head + "".join("[[job]]" + jobs[i] for pair in p for i in pair))
            results.append((sim(path)["slurm"], sorted(p)))
    results.sort(key=lambda r: r[0]["run_mean_s"])
    label = lambda pairs: " ".join("+".join(names[i] for i in pair) for pair in pairs)
    w = worst_packing

    def line(what, r, pairs):
        print(
            f"{what:<22} {label(pairs):<46} mean {r['run_mean_s']:7.1f} s ({r['run_mean_s'] / w['run_mean_s'] - 1:+.1%})"
            f"  max {r['run_max_s']:7.1f} s  node GB/s std {r['node_bw_std_gbps']:5.2f} ({r['node_bw_std_gbps'] / w['node_bw_std_gbps'] - 1:+.1%})"
        )

    print(f"{len(results)} pairings; percentages against S2's worst packing")
    line("best pairing", *results[0])
    line("worst pairing", *results[-1])
    line("S2's worst packing", w, pairs_of(w, names))
    line("numa:model", base["numa:model"], pairs_of(base["numa:model"], names))
    rank = [pairs for _, pairs in results].index(pairs_of(base["numa:model"], names)) + 1
    print(f"numa:model's pairing ranks {rank} of {len(results)}")


if __name__ == "__main__":
    main()
