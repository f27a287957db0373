#!/usr/bin/env python3
"""How often S1's coverage gate shuts for good, with herd's guard off (the
algorithm as published) and on, over S1's ten groups and several seeds.

S1 lets its co-scheduler place a group only while every member's profile
covers 80% of the member's last run; below that, the kernel decides, like
linux. A run the kernel decides is learned too, and for some programs its
coverage stays just under 80% (their slices beside other memory-heavy
programs fall in phases with no valid estimate), so once shut the gate can
stay shut: the rest of the sequence gains nothing. Which sequences reach
that state is chaotic (one run's coverage a point lower), so a pair whose
guard-on sequence is caught and guard-off one is not loses most of its
gain to chance, not to the guard. This counts the sequences of each
bw:iabw variant that gain nothing from the gate for good: from a gate-shut
run to the end, at least ten runs, every run gate-shut or given to the
kernel by the guard. It tells those shut from their first run (training
never reached 80%: both views alike) from those shut later on.

Usage (after `make build`; about 15 minutes for ten seeds):
  scripts/s1-gate-traps.py [--seeds 1,2,...]   (HERD= another build)
Judged by herd's own simulator.
"""
import argparse
import collections
import glob
import os

from herdsim import ROOT, seed_list, sim_json

SHUT = "coverage of"  # bw:*'s note on a run its gate shut


def first_for_good(shut, placed_by):
    """The first run of the sequence's last stretch in which it gained
    nothing from the gate on: every run from it on either gate-shut or
    given to the kernel by the guard, itself gate-shut, and at least ten
    runs long; None when there is no such stretch."""
    k = len(shut)
    while k > 0 and (shut[k - 1] or placed_by[k - 1] == "kernel"):
        k -= 1
    while k < len(shut) and not shut[k]:
        k += 1  # the stretch starts at a gate-shut run
    return k + 1 if len(shut) - k >= 10 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=seed_list, default=list(range(1, 11)))
    seeds = ap.parse_args().seeds
    files = sorted(glob.glob(os.path.join(ROOT, "scenarios", "s1-wl*.toml")))
    caught = {}  # (group, seed, policy, guard) -> first run shut for good
    sequences = collections.Counter()
    for seed in seeds:
        for f in files:
            group = os.path.basename(f)[3:-5]
            for guard in ("off", "on"):
                d = sim_json(f, "--seed", str(seed), "--guard", guard)
                runs = collections.defaultdict(list)
                for p in d["learning"]["points"]:
                    if p["policy"].startswith("bw:iabw"):
                        runs[p["policy"]].append(p)
                for pol, ps in runs.items():
                    sequences[guard] += 1
                    first = first_for_good([SHUT in (p["note"] or "") for p in ps],
                                           [p["placed_by"] for p in ps])
                    if first is not None:
                        caught[(group, seed, pol, guard)] = first
    # Shut from the first run in the guard-off view: S1's training never
    # opened the gate, and both views stay shut alike.
    from_start = {k[:3] for k, first in caught.items() if k[3] == "off" and first == 1}
    print(f"{'group':<6} {'seed':>4} {'policy':<22} {'guard off':>10} {'guard on':>9}  (first run shut for good)")
    for g, s, p in sorted({k[:3] for k in caught} - from_start):
        off, on = caught.get((g, s, p, "off")), caught.get((g, s, p, "on"))
        print(f"{g:<6} {s:>4} {p:<22} {off or '-':>10} {on or '-':>9}")
    for guard in ("off", "on"):
        ks = [k for k in caught if k[3] == guard]
        later = [k for k in ks if k[:3] not in from_start]
        print(f"guard {guard}: {len(ks)} of {sequences[guard]} sequences shut for good; "
              f"{len(later)} after the gate had opened")


if __name__ == "__main__":
    main()
