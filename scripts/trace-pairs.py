#!/usr/bin/env python3
"""Where a program's busy threads ran, from a `herd run|batch --trace FILE`:
per decision, each job with exactly two threads busy in the period (over
10 ms of CPU) counts once, on one CPU or on two (each thread's CPU as last
seen). A pair of processes handing a pipe back and forth (stress-ng's
switch stressor) runs best on one CPU; issue 23's note counts how often
herd's runs find it split.

Usage: scripts/trace-pairs.py TRACE.jsonl [...]
"""
import json
import sys

BUSY_NS = 10_000_000

if len(sys.argv) < 2:
    sys.exit(__doc__)
for path in sys.argv[1:]:
    one = two = 0
    for line in map(json.loads, open(path)):
        if "herd_trace" in line:
            continue
        cpus = {}
        for t in line["snapshot"]["tasks"]:
            if t["obs"]["cpu_time_ns"] > BUSY_NS:
                cpus.setdefault(t["job"], []).append(t["cpu"])
        for c in cpus.values():
            if len(c) == 2:
                one += c[0] == c[1]
                two += c[0] != c[1]
    print(f"{path}: pairs on one CPU {one}, on two {two}")
