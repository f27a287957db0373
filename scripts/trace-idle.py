#!/usr/bin/env python3
"""Idle CPU time in each period of a `herd batch|run --trace FILE`: the
CPUs the programs could use (the machine's, or fewer when fewer of their
threads are alive) times the period, less the CPU time the programs' threads
ran. Programs that never block (stream, compute, stress-ng) should leave
none: what is left is time the CPUs waited on herd (a turn that holds, stops
or moves programs) or ran something else (herd itself, neighbours).

A period in which a thread exited reads high: its last CPU time leaves the
snapshot with it. Such periods are marked and left out of the median.

Usage: scripts/trace-idle.py TRACE.jsonl [--cpus N] [--first K]
  prints the first K periods (default 4) and the median of the others, in ms.
"""
import argparse
import json
import os
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--cpus", type=int, default=os.cpu_count())
    ap.add_argument("--first", type=int, default=4)
    args = ap.parse_args()
    try:
        lines = [json.loads(l) for l in open(args.trace)]
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"{args.trace}: {e}")
    decisions = [l for l in lines if "snapshot" in l]
    if not decisions:
        raise SystemExit(f"{args.trace}: no decisions with snapshots")
    rows = []
    before = None
    for d in decisions:
        s = d["snapshot"]
        tasks = {t["id"] for t in s["tasks"]}
        period_ms = s["period_ns"] / 1e6
        ran_ms = sum(t["obs"]["cpu_time_ns"] for t in s["tasks"]) / 1e6
        idle_ms = min(args.cpus, len(tasks)) * period_ms - ran_ms
        exited = before is not None and not before <= tasks
        rows.append((s["now_ns"] / 1e6, period_ms, idle_ms, exited))
        before = tasks
    for at, period, idle, exited in rows[: args.first]:
        print(f"at {at:8.1f} ms, period {period:6.1f} ms: idle {idle:6.1f} ms{' (a thread exited)' if exited else ''}")
    rest = [idle for _, _, idle, exited in rows[args.first :] if not exited]
    if rest:
        print(f"later periods ({len(rest)}, none with an exit): median idle {statistics.median(rest):.1f} ms")


if __name__ == "__main__":
    main()
