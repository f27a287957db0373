#!/usr/bin/env python3
"""How regularly herd decided, from a `herd run --trace FILE`: decisions,
and the median, 90th percentile and largest gap between them in ms (a loop
starved of CPU shows gaps far above its period).

Usage: scripts/trace-gaps.py TRACE.jsonl
"""
import json
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
# Decision lines only: a run's header line (trace format 1) has no time.
decisions = [l for l in map(json.loads, open(sys.argv[1])) if "herd_trace" not in l]
t = [l["t_s"] for l in decisions]
if len(t) < 2:
    sys.exit(f"{sys.argv[1]}: fewer than two decisions")
gaps = sorted((b - a) * 1e3 for a, b in zip(t, t[1:]))
placed = sum(len(l["placed"]) for l in decisions)
print(f"{len(t)} decisions, {placed} placements; gap ms: median {gaps[len(gaps) // 2]:.2f}, "
      f"p90 {gaps[9 * len(gaps) // 10]:.2f}, max {gaps[-1]:.2f}")
