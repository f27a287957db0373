#!/usr/bin/env python3
"""S4's real-machine experiment (issue 9): the barrier benchmark (spin
barrier) with 3 threads on K = 2 cores under pack:palm, pack:tp and pack:tr
(2 threads, the same total work), alternating, N runs each; prints each
variant's median runtime and the ratios PALM/TP and PALM/TR.

Usage (after `make`): scripts/s4-barrier.py [--runs 10] [--total 1e7]
  [--phases 60] [--palm pack:palm:cores=2] [--no-realtime] [--static-best]
  [--sweep] [--loop-share PCT] [--also-herd PATH] [--palm-loop-shares 10,20]
  [--bound]
Every variant runs under `herd run --realtime` unless --no-realtime, and
with --loop-share PCT if given (the same herd flags for all, so only the
policy differs).

--also-herd PATH adds PALM run by another herd binary (a build of an
earlier commit) to the alternation, for before/after comparisons that
the machine's drift from hour to hour would otherwise swamp.

--palm-loop-shares 10,20 adds PALM under each of those --loop-share values
(as "PALM@10" and so on) to the alternation: what more of herd's CPU buys.

--bound adds workloads/palm_bound.c to the alternation, the same benchmark
packed from inside the process, without herd: "bound-rotate" (PALM's rule
by affinity, every 250 us) and "bound-plan-rt" (McNaughton's schedule of the
work left to the barrier, applied with SCHED_FIFO priorities): what a
packer with perfect progress information gets here with each mechanism.

--static-best adds S4's static best: first, offline, PALM at each fixed
period from 0.125 to 64 ms (3 runs each, the best median kept), then that
period as a fourth variant in the alternation.

--sweep runs the comparison at barrier phases of about 1, 2, 5, 20 and 75 ms
(the same total work, 6e8 units, in 300 to 4 phases; a phase is what TR
takes per barrier) and prints one line per phase length: where each of the
two targets holds. On the 2-CPU VM TP's loss to TR grows as phases shorten
(a spinning thread holds the CPU its partner needs until the 4 ms tick)
and so does PALM's, whose every decision costs herd's loop CPU.
"""
import argparse
import re
import statistics
import subprocess
import sys

HERD = "target/release/herd"
BENCH = "target/workloads/barrier-hb"
BOUND = "target/workloads/palm_bound"


def runtime(cmd):
    try:
        # Generous: the slowest variant takes a few seconds; a run that
        # hangs (a bug under test) should end the experiment, not stall it.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        sys.exit(f"{' '.join(cmd)}: still running after 120 s, killed")
    m = re.search(r"runtime ([0-9.]+) s", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--total", default="1e7")
    ap.add_argument("--phases", default="60")
    ap.add_argument("--palm", default="pack:palm:cores=2")
    ap.add_argument("--no-realtime", action="store_true")
    ap.add_argument("--static-best", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--loop-share", default=None, help="herd run --loop-share PCT for every variant")
    ap.add_argument("--also-herd", default=None, help="another herd binary whose PALM joins the alternation")
    ap.add_argument("--bound", action="store_true", help="add the in-process packers of workloads/palm_bound.c")
    ap.add_argument("--palm-loop-shares", default=None, help="PCT,PCT,...: PALM under each --loop-share joins the alternation")
    a = ap.parse_args()
    if a.sweep:
        rows = []
        # (units per phase, phases): 2e6 units are about 1 ms of TR here.
        for per_phase, phases in [(2e6, 300), (4e6, 150), (1e7, 60), (4e7, 15), (1.5e8, 4)]:
            print(f"--- phases of {per_phase:g} units ({phases} of them)", flush=True)
            med = compare(a, str(per_phase), str(phases), static_best=False)
            rows.append((per_phase / 2e6, med))
        print(f"{'phase ms':>8} {'TR s':>7} {'TP/TR':>6} {'PALM/TR':>8} {'PALM vs TP':>11} {'both targets':>13}")
        for ms, m in rows:
            tp, palm = m["TP"] / m["TR"], m["PALM"] / m["TR"]
            both = palm / tp <= 0.7 and palm <= 1.1
            print(f"{ms:>8.0f} {m['TR']:>7.3f} {tp:>6.2f} {palm:>8.2f} {(palm / tp - 1) * 100:>+10.1f}% {str(both):>13}")
        return
    med = compare(a, a.total, a.phases, a.static_best)
    print(f"PALM vs TP: {(med['PALM'] / med['TP'] - 1) * 100:+.1f}%  (target <= -30%)")
    print(f"PALM vs TR: {(med['PALM'] / med['TR'] - 1) * 100:+.1f}%  (target within +10%)")
    if "SB" in med:
        print(f"PALM vs static best: {(med['PALM'] / med['SB'] - 1) * 100:+.1f}%")
    for k in (k for k in med if k.startswith("bound-")):
        print(f"{k}/TR: {med[k] / med['TR']:.3f}, vs TP {(med[k] / med['TP'] - 1) * 100:+.1f}% (PALM/TR {med['PALM'] / med['TR']:.3f})")
    for k in (k for k in med if k.startswith("PALM@")):
        print(f"{k}/TR: {med[k] / med['TR']:.3f} (PALM/TR {med['PALM'] / med['TR']:.3f})")
    if "PALM-also" in med:
        print(f"PALM/TR: {med['PALM'] / med['TR']:.3f} with this herd, {med['PALM-also'] / med['TR']:.3f} with {a.also_herd}")


def compare(a, total, phases, static_best):
    """Medians of a.runs alternating runs of each variant at this phase length."""
    rt = [] if a.no_realtime else ["--realtime"]
    if a.loop_share:
        rt += ["--loop-share", a.loop_share]
    bench = [BENCH, "--total", total, "--phases", phases, "--mode", "spin"]
    variants = {
        "PALM": [HERD, "run", *rt, "--policy", a.palm, "--", *bench, "--threads", "3"],
        "TP": [HERD, "run", *rt, "--policy", "pack:tp:cores=2", "--", *bench, "--threads", "3"],
        "TR": [HERD, "run", *rt, "--threads", "2", "--policy", "pack:tr:cores=2", "--", *bench, "--threads", "{threads}"],
    }
    if a.also_herd:
        variants["PALM-also"] = [a.also_herd, *variants["PALM"][1:]]
    if a.bound:
        for mode in ["rotate", "plan-rt"]:
            variants[f"bound-{mode}"] = [BOUND, "--total", total, "--phases", phases, "--threads", "3", "--mode", mode]
    for pct in a.palm_loop_shares.split(",") if a.palm_loop_shares else []:
        plain = ["--realtime"] if not a.no_realtime else []
        variants[f"PALM@{pct}"] = [HERD, "run", *plain, "--loop-share", pct, "--policy", a.palm, "--", *bench, "--threads", "3"]
    if static_best:
        # Offline: every fixed period of PALM's range, the best median kept.
        best = None
        for period_us in [125 * 2**i for i in range(10)]:
            cmd = [HERD, "run", *rt, "--policy", f"pack:palm:cores=2,period_us={period_us}", "--", *bench, "--threads", "3"]
            t = statistics.median(runtime(cmd) for _ in range(3))
            print(f"static best, offline: period {period_us} us: {t:.3f} s", flush=True)
            if best is None or t < best[0]:
                best = (t, period_us)
        variants["SB"] = [HERD, "run", *rt, "--policy", f"pack:palm:cores=2,period_us={best[1]}", "--", *bench, "--threads", "3"]
        print(f"static best: period {best[1]} us")
    times = {k: [] for k in variants}
    for i in range(a.runs):
        for name, cmd in variants.items():
            times[name].append(runtime(cmd))
        print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("medians: " + ", ".join(f"{k} {v:.3f} s" for k, v in med.items()))
    return med


if __name__ == "__main__":
    main()
