#!/usr/bin/env python3
"""Does a change keep the simulator's results? (issue 28)

Runs `herd sim SCENARIO --no-timing --json` on every scenario in
scenarios/ (each with its own policies and seeds) and records a SHA-256 of
each output; `check` runs them again and names every scenario whose
output differs from the record. A speed-up must leave every output
byte-for-byte the same; a change that fixes a bug re-records, and its
commit says which scenarios moved and why.

  python3 scripts/sim-identity.py record [--out scenarios/identity.json]
  python3 scripts/sim-identity.py check  [--against scenarios/identity.json]
      [--only NAME ...] [--herd target/release/herd] [--jobs 2]
  python3 scripts/sim-identity.py compare --old OLD_HERD [--only NAME ...]
      [--herd target/release/herd]

`compare` runs both binaries on each scenario and names, per scenario
that differs, the fields that moved (list indices folded) and the
largest relative change of a number: what a bug fix's commit reports
before it re-records.

The record names the commit it was made at.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "scenarios", "identity.json")


def scenarios(only):
    names = sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "scenarios")) if f.endswith(".toml"))
    if only:
        missing = [n for n in only if n not in names]
        if missing:
            sys.exit(f"no such scenario: {', '.join(missing)}")
        names = [n for n in names if n in only]
    return names


def sim(herd, name, data_home):
    """`herd sim NAME --no-timing --json`, with the profile database kept
    out (a scenario's results must not depend on what this machine
    learned): the finished process."""
    path = os.path.join(ROOT, "scenarios", name + ".toml")
    return subprocess.run([herd, "sim", path, "--no-timing", "--json"], capture_output=True,
                          env=dict(os.environ, XDG_DATA_HOME=data_home), cwd=ROOT)


def failure(out):
    return f"exit {out.returncode}: {out.stderr.decode(errors='replace')[-400:]}"


def run_one(herd, name, data_home):
    t = time.time()
    out = sim(herd, name, data_home)
    if out.returncode != 0:
        return name, None, failure(out), time.time() - t
    return name, hashlib.sha256(out.stdout).hexdigest(), len(out.stdout), time.time() - t


def run_all(args):
    results = {}
    with tempfile.TemporaryDirectory() as data_home, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, args.herd, n, data_home) for n in scenarios(args.only)]
        for f in concurrent.futures.as_completed(futures):
            name, digest, size, secs = f.result()
            if digest is None:
                sys.exit(f"{name}: herd sim failed: {size}")
            results[name] = {"sha256": digest, "bytes": size}
            print(f"{name}: {secs:.1f} s", file=sys.stderr)
    return dict(sorted(results.items()))


def flatten(x, path="", out=None):
    """Every leaf of a JSON value by its path (a list's length too)."""
    out = {} if out is None else out
    if isinstance(x, dict):
        for k, v in x.items():
            flatten(v, f"{path}.{k}", out)
    elif isinstance(x, list):
        out[path + "#len"] = len(x)
        for i, v in enumerate(x):
            flatten(v, f"{path}[{i}]", out)
    else:
        out[path] = x
    return out


def sim_json(herd, name, data_home):
    out = sim(herd, name, data_home)
    if out.returncode != 0:
        sys.exit(f"{herd} sim {name}: {failure(out)}")
    return flatten(json.loads(out.stdout))


def compare(args):
    if not os.path.exists(args.old):
        sys.exit(f"{args.old} is missing")
    moved = 0
    with tempfile.TemporaryDirectory() as old_home, tempfile.TemporaryDirectory() as new_home:
        for name in scenarios(args.only):
            a, b = sim_json(args.old, name, old_home), sim_json(args.herd, name, new_home)
            keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            if not keys:
                continue
            moved += 1
            fields = sorted({re.sub(r"\[\d+\]", "[]", k) for k in keys})
            rel = [abs(a[k] - b[k]) / max(abs(a[k]), 1e-300) for k in keys
                   if isinstance(a.get(k), float) and isinstance(b.get(k), float)]
            worst = f"; largest relative change {max(rel):.2e}" if rel else ""
            print(f"{name}: {len(keys)} values differ in {', '.join(fields)}{worst}")
    print(f"{moved} scenarios differ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["record", "check", "compare"])
    ap.add_argument("--old", help="compare: the herd binary before the change")
    ap.add_argument("--out", default=DEFAULT)
    ap.add_argument("--against", default=DEFAULT)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--herd", default=os.path.join(ROOT, "target/release/herd"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    if not os.path.exists(args.herd):
        sys.exit(f"{args.herd} is missing: run `make build` first")
    if args.what == "compare":
        compare(args)
        return
    got = run_all(args)
    if args.what == "record":
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        with open(args.out, "w") as f:
            json.dump({"commit": commit, "scenarios": got}, f, indent=1)
            f.write("\n")
        print(f"recorded {len(got)} scenarios at {commit} in {os.path.relpath(args.out, ROOT)}")
        return
    with open(args.against) as f:
        want = json.load(f)
    differ = [n for n, r in got.items() if want["scenarios"].get(n, {}).get("sha256") != r["sha256"]]
    if differ:
        print(f"{len(differ)} of {len(got)} scenarios differ from the record made at {want['commit']}: "
              + ", ".join(differ))
        sys.exit(1)
    print(f"all {len(got)} scenarios identical to the record made at {want['commit']}")


if __name__ == "__main__":
    main()
