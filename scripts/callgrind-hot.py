#!/usr/bin/env python3
"""How many instructions a function runs per visit of its loops (issue 28).

Reads a callgrind profile made with `--dump-instr=yes` and sums, for every
function whose name contains NAME (inlined code counts as its caller's),
each instruction's executions. An instruction's count is how many times it
ran, so instructions that ran equally often are one loop's body: grouped
by count, "84 x 6198783" says a loop ran 6,198,783 times at 84
instructions a time (amp:ff's read pass over the tasks, issue 28).

  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=F <bench> POLICY
  python3 scripts/callgrind-hot.py F NAME [--top N]
"""

import argparse
import collections
import re

FN = re.compile(r"c?fn=\((\d+)\)(?: (.*))?")


def costs(path, want):
    """Each address's instruction count in the functions named like `want`."""
    names, out = {}, collections.Counter()
    current, addr, call_line = "", 0, False
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = FN.match(line)
            if m:
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("fn="):
                    current = names.get(m.group(1), "")
                continue
            if line.startswith("calls="):
                # The next cost line is the call's inclusive cost: not this
                # function's own instructions.
                call_line = True
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                continue
            parts = line.split()
            pos = parts[0]
            if pos.startswith("0x"):
                addr = int(pos, 16)
            elif pos[0] in "+-":
                addr += int(pos)
            if call_line:
                call_line = False
                continue
            if want in current and len(parts) >= 3:
                out[addr] += int(parts[2])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("name")
    ap.add_argument("--top", type=int, default=10, help="groups shown (largest total first)")
    a = ap.parse_args()
    per_addr = costs(a.profile, a.name)
    if not per_addr:
        raise SystemExit(f"callgrind-hot: no instructions of a function named like {a.name!r} "
                         "(was the profile made with --dump-instr=yes?)")
    groups = collections.Counter(per_addr.values())
    print(f"{sum(per_addr.values()):,} instructions in functions named like {a.name!r}")
    print(f"{'instructions':>12} x {'times':>12} = {'total':>14}")
    for times, n in sorted(groups.items(), key=lambda g: -g[0] * g[1])[: a.top]:
        print(f"{n:>12} x {times:>12,} = {n * times:>14,}")


if __name__ == "__main__":
    main()
