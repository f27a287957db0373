#!/usr/bin/env python3
"""Writes scenarios/s1-wl01.toml .. s1-wl10.toml: S1's experiment (seed 001).

S1 ran ten random groups of SPEC CPU2006 programs, concurrency 2-4, on an
8-core Xeon E5410 (four core pairs sharing an L2, the LLC; one front-side
bus, peak 120 transactions/us), every program cut to 10 s of solo run, and
a 100 ms slice. Groups WL#01-#09 are S1's Table 3 as far as the extracted
text lists them; where a list is cut short, and for WL#10, the rest is drawn
at random (seeded) from the catalogue below.

Programs: solo BTR and phase counts from S1's Table 2. lbm, gcc and wrf have
no BTR in the text; Table 2 lists programs by BTR, so they get values between
their neighbours (lbm 26, gcc 11, wrf 8). Compute-bound programs, which S1
says are "far lower", get 0.3-3.5. Each program's phases are phase *kinds*
with their own bandwidth (around the program's mean, time-weighted to it)
and LLC miss rate, visited in a fixed repeating order, so the order can be
learned (S1's Markov predictor) and the kinds told apart by their counters.

Run: python3 scripts/gen-s1-scenarios.py   (deterministic; rewrites the files)
"""
import os
import random

FREQ_GHZ = 2.33
SOLO_S = 10.0

# name: (solo BTR in transactions/us, phase count)
CATALOGUE = {
    "leslie3d": (52.1, 30), "GemsFDTD": (49.9, 32), "milc": (49.6, 35),
    "libquantum": (49.0, 18), "bwaves": (47.3, 27), "sphinx3": (28.0, 14),
    "lbm": (26.0, 12), "zeusmp": (24.5, 21), "soplex": (20.4, 50),
    "mcf": (17.3, 24), "cactusADM": (15.7, 11), "xalancbmk": (14.1, 11),
    "gcc": (11.0, 40), "astar": (9.2, 38), "omnetpp": (9.1, 24), "wrf": (8.0, 20),
    "bzip2": (3.5, 10), "dealII": (2.5, 10), "calculix": (2.0, 8),
    "h264ref": (1.8, 8), "hmmer": (1.5, 6), "gobmk": (1.5, 10),
    "gromacs": (1.2, 6), "perlbench": (1.2, 10), "namd": (1.0, 6),
    "sjeng": (0.8, 8), "gamess": (0.5, 6), "povray": (0.3, 6),
}

# (stated program count, listed composition) from S1's Table 3.
GROUPS = [
    (28, {"leslie3d": 2, "bwaves": 2, "sphinx3": 2, "lbm": 2, "soplex": 2, "wrf": 2, "dealII": 2, "namd": 8, "gamess": 4}),
    (16, {"GemsFDTD": 2, "soplex": 2, "astar": 2, "omnetpp": 4, "hmmer": 2, "gromacs": 2, "namd": 2}),
    (30, {"leslie3d": 2, "GemsFDTD": 2, "sphinx3": 4, "mcf": 2, "gcc": 6, "astar": 2, "omnetpp": 2, "calculix": 2}),
    (26, {"GemsFDTD": 4, "milc": 2, "mcf": 2, "gcc": 4, "bzip2": 2, "hmmer": 2, "perlbench": 2, "h264ref": 4, "gamess": 4}),
    (32, {"leslie3d": 2, "libquantum": 2, "sphinx3": 2, "lbm": 2, "soplex": 2, "wrf": 4, "sjeng": 4, "gobmk": 2, "dealII": 2}),
    (18, {"leslie3d": 2, "GemsFDTD": 2, "milc": 2, "calculix": 4, "sjeng": 2, "dealII": 4, "povray": 2}),
    (30, {"leslie3d": 2, "sphinx3": 4, "lbm": 4, "soplex": 2, "mcf": 2, "gcc": 2, "omnetpp": 2, "wrf": 2, "gobmk": 2}),
    (28, {"GemsFDTD": 4, "milc": 2, "libquantum": 2, "cactusADM": 2, "gcc": 2, "astar": 4, "sjeng": 4, "hmmer": 2}),
    (29, {"leslie3d": 1, "GemsFDTD": 3, "bwaves": 1, "sphinx3": 1, "soplex": 1, "mcf": 1, "omnetpp": 1, "wrf": 3}),
    (27, {}),
]


def program(name, rng):
    btr, kinds = CATALOGUE[name]
    prog = random.Random(name)  # the same program behaves the same in every group
    base = [prog.uniform(0.3, 1.7) for _ in range(kinds)]
    miss = [round(prog.uniform(0.1, 0.9), 3) for _ in range(kinds)]
    order = list(range(kinds))
    prog.shuffle(order)
    seq = (order * (1 + 25 // kinds))[: max(kinds, 25)]
    lengths = [prog.uniform(0.1, 0.8) for _ in seq]
    scale = SOLO_S / sum(lengths)
    lengths = [t * scale for t in lengths]
    avg = sum(t * base[k] for t, k in zip(lengths, seq)) / SOLO_S
    phases = []
    for t, k in zip(lengths, seq):
        b = min(btr * base[k] / avg, 110.0)
        ipc = round(2.0 / (1.0 + b / 15.0) * prog.uniform(0.9, 1.1), 3)
        phases.append((t * ipc * FREQ_GHZ * 1e9, ipc, b * 64 / 1000, miss[k]))
    return phases


def hint(btr):
    return "high" if btr > 20 else "medium" if btr > 5 else "low"


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "scenarios")
    rng = random.Random(1)
    names = sorted(CATALOGUE)
    for i, (count, listed) in enumerate(GROUPS, start=1):
        group = dict(listed)
        while sum(group.values()) < count:
            n = rng.choice(names)
            group[n] = group.get(n, 0) + 1
        path = os.path.join(out, f"s1-wl{i:02}.toml")
        with open(path, "w") as f:
            drawn = "" if sum(listed.values()) == count else " (completed at random, seeded)"
            f.write(f"# S1 group WL#{i:02}: {count} programs on 8 cores{drawn}.\n")
            f.write("# Written by scripts/gen-s1-scenarios.py; edit that, not this.\n")
            f.write('policies = ["bw:iabw", "bw:iabw:target=iabw", "bw:iabw:target=fair", "bw:oracle", "bw:oracle:target=iabw", "bw:greedy"]\n')
            f.write("period_ms = 100\nruns = 40\ntrain_runs = 150   # S1: the database is initialised before the 40 runs\n\n")
            f.write('[machine]\nsynthetic = "package:2 l3:2 core:2"   # Xeon E5410 x2: four core pairs share an LLC\n\n')
            f.write("[model]\nfreq_ghz = 2.33\nnode_bw_gbps = 7.68   # 120 transactions/us x 64 B\n"
                    "timeslice_ms = 8   # CFS: 24 ms latency on 8 CPUs over 2-4 tasks a CPU\n\n")
            for name in sorted(group):
                btr = CATALOGUE[name][0]
                f.write(f'[[job]]\nname = "{name}"\ncopies = {group[name]}\nmemory_hint = "{hint(btr)}"\n')
                for instr, ipc, bw, miss in program(name, rng):
                    f.write(f"[[job.phase]]\ninstructions = {instr:.4e}\nipc = {ipc}\nbw_gbps = {bw:.4f}\nllc_miss_rate = {miss}\n")
                f.write("\n")


main()
