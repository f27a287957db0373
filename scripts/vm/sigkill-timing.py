#!/usr/bin/env python3
"""How long a SIGKILLed `herd batch` takes to be reaped, and its guard
and keeper to end and give everything back, with the kernel stacks of
herd's threads while it dies: the measurement behind `checks.py`'s
`sigkill` wait (docs/results.md, issue 28's forty-seventh session).
Run in a guest, as the checks are:

    python3 scripts/vm/guest.py --topology 2s2c2t --timeout 1500 -- \\
      /usr/bin/python3 $PWD/scripts/vm/sigkill-timing.py --rounds 3 --bpf off

Prints one line a round (seconds from the kill), and for a herd that
took over 2 s to be reaped, its threads' most seen states and stacks.
With --watch S, first looks at herd's threads for S s while it runs and
says how often one waited in a cpuset write (herd's loop stalls there).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402


def helpers():
    """herd's guard and keeper now: {pid: "guard" | "keeper"}."""
    out = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = open(f"/proc/{p}/cmdline").read().split("\0")
        except OSError:
            continue
        if "__cgroup-guard" in args:
            out[int(p)] = "keeper" if "--after" in args else "guard"
    return out


def stacks_until_reaped(h, limit_s):
    """Counts each (state, kernel stack) of herd's threads, looked at every
    half second until herd is reaped."""
    seen = {}
    t0 = time.time()
    while h.poll() is None and time.time() - t0 < limit_s:
        try:
            tids = os.listdir(f"/proc/{h.pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            base = f"/proc/{h.pid}/task/{tid}"
            try:
                stack = open(f"{base}/stack").read().replace("\n", " | ")
                state = next(l for l in open(f"{base}/status") if l.startswith("State:")).split()[1]
            except (OSError, StopIteration):
                continue
            seen[(state, stack)] = seen.get((state, stack), 0) + 1
        time.sleep(0.5)
    h.wait()
    return seen


def cpuset_waits(h, watch_s):
    """Looks at herd's threads' kernel stacks every quarter second for
    `watch_s` s while it runs: (looks, looks with a thread waiting in a
    cpuset write or cgroup move, the longest run of such looks in s)."""
    looks = waits = run = longest = 0
    t0 = time.time()
    while time.time() - t0 < watch_s and h.poll() is None:
        waiting = False
        try:
            tids = os.listdir(f"/proc/{h.pid}/task")
        except OSError:
            break  # herd ended
        for tid in tids:
            try:
                stack = open(f"/proc/{h.pid}/task/{tid}/stack").read()
            except OSError:
                continue
            waiting |= "cpuset_write_resmask" in stack or "cpuset_post_attach" in stack
        looks, waits = looks + 1, waits + waiting
        run = run + 1 if waiting else 0
        longest = max(longest, run)
        time.sleep(0.25)
    return looks, waits, longest * 0.25


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", choices=["freezer", "signals"], default="freezer")
    ap.add_argument("--bpf", choices=["on", "off", "auto"], default="auto",
                    help="HERD_SCHED_BPF for herd (auto: herd's default)")
    ap.add_argument("--watch", type=float, default=0,
                    help="seconds to watch herd's threads for waits in cpuset writes before the kill")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.bpf != "auto":
        env["HERD_SCHED_BPF"] = a.bpf
    for _ in range(a.rounds):
        h, programs = checks.batch_to_kill(a.pause, env)
        if a.watch > 0:
            looks, waits, longest = cpuset_waits(h, a.watch)
            print(f"{a.pause}: {waits} of {looks} looks saw a herd thread wait in a cpuset write "
                  f"(longest run {longest:.2f} s)", flush=True)
        before = helpers()
        h.kill()
        t0 = time.time()
        seen = stacks_until_reaped(h, 300)
        reaped = time.time() - t0
        gone, free = {}, None
        while time.time() - t0 < reaped + checks.GIVE_BACK_S:
            now, alive = time.time() - t0, helpers()
            for p, kind in before.items():
                if p not in alive:
                    gone.setdefault(kind, round(now, 2))
            if free is None and not checks.left_behind(programs):
                free = round(now, 2)
            if free is not None and len(gone) == len(set(before.values())):
                break
            time.sleep(0.05)
        print(f"{a.pause} bpf {a.bpf}: reaped {reaped:.2f} s; helpers ended {gone}; all given back {free} s",
              flush=True)
        if reaped > 2:
            for (state, stack), n in sorted(seen.items(), key=lambda x: -x[1])[:4]:
                print(f"  {n}x {state}: {stack[:600]}", flush=True)
        checks.kill_all(programs)
        time.sleep(2)


if __name__ == "__main__":
    main()
