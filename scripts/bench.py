#!/usr/bin/env python3
"""A/B benchmark of herd's policies against plain Linux on real programs, in
the manner of the sched_ext schedulers' CI: each workload (a batch of real
programs) runs under plain Linux and under each policy, alternating A B B A
(`herd batch --compare linux --repeat N` does the alternating), and the
table reports medians, the ratio to Linux with a 95% confidence interval,
and herd's own CPU. Measured on this machine, live: nothing here is
simulated.

Usage (after `make build`):
  scripts/bench.py [--workloads bench/workloads.toml] [--policy P ...]
                   [--repeat 5] [--only NAME ...] [--json FILE] [--svg FILE]
  scripts/bench.py --pool FILE [--pool FILE ...] [--json FILE] [--svg FILE]

`--json` keeps each round's two makespans, so that runs of the same build
can be pooled afterwards (`--pool` the files they wrote): the rows of a
workload and policy are joined round by round and their table made again,
as if one run had made all the rounds.

The interval is over the per-round ratios (policy run / the Linux run next
to it), on their logarithms with Student's t: the machine's noise moves
both runs of a round alike, so pairing them narrows it. A policy is
"within 2%" when the interval's upper end is at most 1.02, "slower" when
its lower end is above it, else "unclear" (more repeats would tell).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# $HERD names another binary (the test suite's debug build).
HERD = os.environ.get("HERD") or os.path.join(ROOT, "target", "release", "herd")
MARGIN = 1.02
# Student's t at 97.5% for n - 1 degrees of freedom (n = 2..10); beyond, 2.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=os.path.join(ROOT, "bench", "workloads.toml"))
    ap.add_argument("--policy", action="append", default=[], help="repeatable (default: cosched:fair, bw:iabw)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="run only these workloads")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--svg", metavar="FILE")
    ap.add_argument("--herd-arg", action="append", default=[], metavar="ARG",
                    help="repeatable: passed to `herd batch` (for example --herd-arg=--confine=affinity)")
    ap.add_argument("--pool", action="append", default=[], metavar="FILE",
                    help="repeatable: run nothing; pool the rounds of these --json files")
    args = ap.parse_args()
    if args.pool:
        rows = pooled(args.pool)
        finish(rows, list(dict.fromkeys(r["policy"] for r in rows)), args)
        return
    if args.repeat < 2:
        sys.exit("--repeat must be at least 2: an interval needs two rounds")
    policies = args.policy or ["cosched:fair", "bw:iabw"]
    try:
        with open(args.workloads, "rb") as f:
            spec = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        sys.exit(f"{args.workloads}: {e}")
    workloads = spec.get("workload", [])
    if args.only:
        workloads = [w for w in workloads if w.get("name") in args.only]
    if not workloads:
        sys.exit(f"{args.workloads}: no [[workload]] to run")
    base = os.path.dirname(os.path.abspath(args.workloads))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in workloads:
            batch = write_batch(tmp, base, w)
            for p in policies:
                print(f"bench: {w['name']} under {p} and linux, {args.repeat} rounds", file=sys.stderr)
                rows.append(measure(batch, w["name"], p, args.repeat, tmp, args.herd_arg))
                # Each row as it is done: a long run stopped early keeps
                # what it measured (on stderr, and in --json's file).
                print(f"bench: {say(rows[-1])}", file=sys.stderr, flush=True)
                if args.json:
                    with open(args.json, "w") as out:
                        json.dump(rows, out, indent=1)
    finish(rows, policies, args)


def finish(rows, policies, args):
    print(table(rows))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    if args.svg:
        draw(rows, policies, args.svg)


def pooled(paths):
    """The rows of several --json files, those of one workload and policy
    joined round by round, in the order first seen."""
    rounds = {}
    for path in paths:
        try:
            with open(path) as f:
                rows = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"--pool {path}: {e}")
        for r in rows if isinstance(rows, list) else []:
            if not isinstance(r, dict) or not r.get("pairs") or not {"workload", "policy"} <= r.keys():
                sys.exit(f"--pool {path}: not a row with its workload, policy and rounds (one written before "
                         f"--json kept rounds?): {str(r)[:120]}")
            key = (r["workload"], r["policy"])
            mine = rounds.setdefault(key, {"pairs": [], "herd_cpu_pcts": [], "first_logs": []})
            for k in mine:
                mine[k].extend(r.get(k) or [])
    if not rounds:
        sys.exit("--pool: no rows in " + ", ".join(paths))
    return [summary(w, p, **v) for (w, p), v in rounds.items()]


def write_batch(tmp, base, w):
    """The workload as a batch file; its programs run from the workload
    file's folder, so relative commands resolve there."""
    name = w.get("name")
    programs = w.get("program", [])
    if not name or not programs:
        sys.exit(f"a [[workload]] needs a name and [[workload.program]]s: {w}")
    lines = [f"name = {json.dumps(name)}"]
    for p in programs:
        lines.append("[[program]]")
        for key, value in p.items():
            lines.append(f"{key} = {json.dumps(value)}")
        if "cwd" not in p:
            lines.append(f"cwd = {json.dumps(base)}")
    path = os.path.join(tmp, f"{name}.toml")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")
    return path


def measure(batch, workload, policy, repeat, tmp, extra=()):
    cmd = [HERD, "batch", batch, "--policy", policy, "--compare", "linux", "--repeat", str(repeat),
           "--json", "--logs", os.path.join(tmp, "logs"), *extra]
    # What herd learns here stays here: the user's profile database is not touched.
    env = dict(os.environ, XDG_DATA_HOME=os.path.join(tmp, "data"))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"{workload} under {policy}: herd batch exited {r.returncode}: {r.stderr.strip()[-400:]}")
    runs = json.loads(r.stdout)["runs"]
    # Plain Linux is the run herd did not manage (no mechanism): herd's own
    # `linux` policy, which places nothing, is a policy run like any other.
    mine = [x for x in runs if x["mechanism"] != "none"]
    linux = [x for x in runs if x["mechanism"] == "none"]
    # Each round's first run over its second (herd batch swaps which goes
    # first each round): what going first costs, apart from the policy.
    first = [math.log(runs[i]["makespan_s"] / runs[i + 1]["makespan_s"]) for i in range(0, len(runs) - 1, 2)]
    return summary(
        workload,
        policy,
        pairs=[[a["makespan_s"], b["makespan_s"]] for a, b in zip(mine, linux)],
        herd_cpu_pcts=[100 * x["herd_cpu_s"] / max(x["programs_cpu_s"], 1e-9) for x in mine],
        first_logs=first,
    )


def summary(workload, policy, pairs, herd_cpu_pcts, first_logs):
    """A table row from the rounds' (policy, linux) makespans, herd's CPU
    share in each policy run and each round's log(first / second)."""
    logs = [math.log(a / b) for a, b in pairs]
    mean = statistics.fmean(logs)
    half = T975.get(len(logs) - 1, 2.0) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    verdict = "within 2%" if hi <= MARGIN else ("slower" if lo > MARGIN else "unclear")
    return {
        "workload": workload,
        "policy": policy,
        "rounds": len(logs),
        "linux_s": statistics.median(b for _, b in pairs),
        "policy_s": statistics.median(a for a, _ in pairs),
        "ratio": math.exp(mean),
        "ratio_lo": lo,
        "ratio_hi": hi,
        "verdict": verdict,
        "herd_cpu_pct": statistics.median(herd_cpu_pcts),
        "first_over_second": math.exp(statistics.fmean(first_logs)) if first_logs else None,
        "pairs": pairs,
        "herd_cpu_pcts": herd_cpu_pcts,
        "first_logs": first_logs,
    }


def table(rows):
    out = [f"{'workload':<18} {'policy':<16} {'linux s':>8} {'policy s':>9} {'ratio':>6} {'95% interval':>15} "
           f"{'herd CPU %':>10}  verdict"]
    for r in rows:
        out.append(f"{r['workload']:<18} {r['policy']:<16} {r['linux_s']:>8.3f} {r['policy_s']:>9.3f} {r['ratio']:>6.3f} "
                   f"{r['ratio_lo']:>7.3f}-{r['ratio_hi']:<7.3f} {r['herd_cpu_pct']:>10.2f}  {r['verdict']}")
    out.append("seconds: median makespan; ratio: geometric mean of policy/linux over the rounds (lower is better)")
    out.extend(say(r) for r in rows)
    return "\n".join(out)


def say(r):
    """One plain sentence: what herd won or lost, or that the rounds cannot tell."""
    head = (f"{r['workload']}: under {r['policy']} the batch took {r['ratio']:.3f}x plain Linux's time "
            f"(95% interval {r['ratio_lo']:.3f}-{r['ratio_hi']:.3f}, {r['rounds']} rounds)")
    if r["ratio_hi"] < 1.0:
        return f"{head}: herd won {100 * (1 - r['ratio']):.1f}%."
    if r["ratio_lo"] > 1.0:
        return f"{head}: herd lost {100 * (r['ratio'] - 1):.1f}%."
    return f"{head}: no difference this machine's noise lets {r['rounds']} rounds tell."


def draw(rows, policies, path):
    """Ratio to Linux per workload and policy, drawn by `herd plot`."""
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    ratio = {(r["workload"], r["policy"]): r["ratio"] for r in rows}
    fig = {
        "title": "Makespan relative to plain Linux, live (lower is better)",
        "y_desc": "makespan vs linux (x)",
        "reference": 1.0,
        "series": policies,
        "panels": [{"name": "this machine", "groups": [[w, [ratio.get((w, p)) for p in policies]] for w in workloads]}],
    }
    r = subprocess.run([HERD, "plot", "-", "--out", path], input=json.dumps(fig), capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"--svg {path}: {r.stderr.strip()}")


if __name__ == "__main__":
    main()
