#!/usr/bin/env python3
"""Figures from a `herd run --trace FILE` of a heartbeat program (S4):

- turns, how many read /proc in full (not `progress_only`), and the gap
  between the first two (herd's start-up);
- when the first lane was set (PALM's plan starting), and the beats then;
- how late turns came: each turn's gap to the next, minus the period the
  policy asked for (`next_period_ms`, where it asked), after the first 50 ms;
- the laggard's time per BEATS heartbeats between --from and --to seconds
  (steady state: one barrier phase when BEATS is the beats between barriers).

Run a traced pair and compare, e.g.:
  herd run --realtime --trace /tmp/palm.jsonl --policy pack:palm:cores=2 -- \
      target/workloads/barrier-hb --total 4e6 --phases 300 --mode spin --threads 3
  herd run --threads 2 --trace /tmp/tr.jsonl --policy pack:tr:cores=2 -- \
      target/workloads/barrier-hb --threads '{threads}' --total 4e6 --phases 300 --mode spin
  python3 scripts/s4-trace.py /tmp/palm.jsonl /tmp/tr.jsonl
"""
import argparse
import json
import statistics


def figures(path, beats, t_from, t_to):
    # Decision lines only: a run's header line (trace format 1) has no time.
    lines = [l for l in map(json.loads, open(path)) if "herd_trace" not in l]
    out = {"turns": len(lines), "full": sum(1 for l in lines if not l.get("progress_only"))}
    if len(lines) > 1:
        out["first_gap_ms"] = round((lines[1]["t_s"] - lines[0]["t_s"]) * 1e3, 3)
    first = next((l for l in lines if l.get("lanes")), None)
    if first:
        out["first_lanes_s"] = round(first["t_s"], 4)
        out["beats_then"] = [t["beats"] for t in first["tasks"] if t.get("beats") is not None]
    late = [
        (b["t_s"] - a["t_s"]) * 1e3 - a["next_period_ms"]
        for a, b in zip(lines, lines[1:])
        if a["t_s"] >= 0.05 and a.get("next_period_ms") is not None
    ]
    if late:
        late.sort()
        out["late_ms_median"] = round(statistics.median(late), 4)
        out["late_ms_p90"] = round(late[int(0.9 * len(late))], 4)
    least = [
        (l["t_s"], min(t["beats"] for t in l["tasks"] if t.get("beats") is not None))
        for l in lines
        if any(t.get("beats") is not None for t in l["tasks"])
    ]
    window = [p for p in least if t_from <= p[0] <= t_to]
    if len(window) > 1 and window[-1][1] > window[0][1]:
        (t0, b0), (t1, b1) = window[0], window[-1]
        out[f"laggard_ms_per_{beats}_beats"] = round((t1 - t0) / (b1 - b0) * beats * 1e3, 4)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--beats", type=int, default=16)
    ap.add_argument("--from", dest="t_from", type=float, default=0.1)
    ap.add_argument("--to", dest="t_to", type=float, default=0.5)
    a = ap.parse_args()
    for path in a.traces:
        try:
            print(path, json.dumps(figures(path, a.beats, a.t_from, a.t_to)))
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"s4-trace: {path}: {e}")


if __name__ == "__main__":
    main()
