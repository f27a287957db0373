#!/usr/bin/env python3
"""Writes scenarios/s4-*.toml: S4's simulated experiments (seed 004).

A 16-thread job with spinning barriers (as OpenMP runtimes spin by default)
packed onto K cores of a one-package machine with a shared L3 (so a move
costs the same-LLC warm-up, 20 us), progress reported as heartbeats:
  sync:   a barrier every 2e6 instructions per thread (~0.5 ms): S4's
          synchronisation-intensive set (NPB CG/MG-like)
  nosync: a barrier every 5e7 instructions (~13 ms): the non-intensive set
on 15, 7 and 2 of 16 homogeneous cores, and the heterogeneous machine of
S4's slides: 7 fast + 8 slow cores, capacities 360 and 220 (0.61).
Policies: pack:tp (the OS's packing), pack:palm, and pack:tr (the job
started with K threads and the same total work: Policy::launch_threads).
and static-best:pack:palm (PALM with the best fixed period, found offline
by herd sim trying each: herd_sim::static_best).

s4-consolidation: S4's dynamic server consolidation case study. A
memcached-like service (50 us requests, p99 SLO 1 ms) and the sync job,
restarting, share 16 cores; the service's load follows a day-like trace
(a jump to almost 4x within 100 ms, a rise to 5x, a plateau, a fall)
and a reactive manager resizes it
every 100 ms, the batch job getting the other cores (herd_sim::consolidation).

s4-vm-3on2: the live experiment's shape (3 threads, 2 cores, 16 beats a
phase), with PALM's groups (barrier_beats=0), PALM as it comes (it learns
the beats and then runs its plan) and the plan from the start.

Run: python3 scripts/gen-s4-scenarios.py   (rewrites the files)
"""
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "scenarios")
SETS = {"sync": 2e6, "nosync": 5e7}
MACHINES = {
    15: "package:1 l3:1 core:16",
    7: "package:1 l3:1 core:16",
    2: "package:1 l3:1 core:16",
    "hetero": "package:1 l3:1 core:8 capacity:0.611 kind:slow + core:7 capacity:1.0 kind:fast",
}

def write_scenario(name, comment, policies, machine, threads, every, beats_every, instructions):
    """One barrier-job scenario file (the sync/nosync sets and the VM's shape);
    the numbers come as the text to write."""
    listed = ", ".join(f'"{p}"' for p in policies)
    text = f"""{comment} Written by scripts/gen-s4-scenarios.py; edit that.
name = "{name}"
policies = [{listed}]
period_ms = 1

[machine]
synthetic = "{machine}"

[[job]]
name = "app"
threads = {threads}
barrier = {{ every = {every}, kind = "spin" }}
heartbeat_every = {beats_every}
[[job.phase]]
instructions = {instructions}
ipc = 1.5
"""
    with open(os.path.join(OUT, f"{name}.toml"), "w") as f:
        f.write(text)


for set_name, every in SETS.items():
    for key, machine in MACHINES.items():
        cores = 15 if key == "hetero" else key
        comment = (
            f"# S4: 16 threads with {'frequent' if set_name == 'sync' else 'infrequent'} spinning barriers on {cores} cores\n"
            f"# ({'7 fast + 8 slow' if key == 'hetero' else 'of 16 homogeneous'})."
        )
        policies = [f"pack:tp:cores={cores}", f"pack:palm:cores={cores}", f"pack:tr:cores={cores}",
                    f"static-best:pack:palm:cores={cores}"]
        write_scenario(f"s4-{set_name}-{key}", comment, policies, machine, 16, f"{every:g}", f"{every / 10:g}", "2e8")

# The live experiment's shape (issue 9, scripts/s4-barrier.py): 3 threads
# with a spinning barrier on 2 cores, 16 heartbeats a phase, so that PALM's
# groups (barrier_beats=0), PALM as it comes (the plan once it has learned
# the 16 beats) and the plan from the start (barrier_beats=16) compare here.
write_scenario(
    "s4-vm-3on2",
    "# S4 on the 2-CPU VM's shape: 3 threads with a spinning barrier (16 beats a\n# phase) on 2 cores.",
    ["pack:tp:cores=2", "pack:palm:cores=2,barrier_beats=0", "pack:palm:cores=2",
     "pack:palm:cores=2,barrier_beats=16", "pack:tr:cores=2"],
    "package:1 l3:1 core:2", 3, "3.2e6", "200000", "3e8",
)

CONSOLIDATION = """# S4's dynamic server consolidation case study (see herd_sim::consolidation):
# a memcached-like service and a synchronisation-intensive batch job share
# 16 cores; the manager gives the service the cores its load needs for a
# 1 ms p99 and the batch job the rest. Written by scripts/gen-s4-scenarios.py; edit that.
name = "s4-consolidation"
policies = ["pack:tp", "pack:palm", "static-best:pack:palm"]
period_ms = 1

[machine]
synthetic = "package:1 l3:1 core:16"

[consolidation]
service = "kv"
request_us = 50     # 20k requests/s per core
slo_ms = 1.0
interval_ms = 100
load = [[0, 40000], [800, 40000], [900, 150000], [1600, 200000], [2600, 200000], [3200, 90000], [4000, 40000]]

[[job]]
name = "batch"
threads = 16
restart = true
barrier = { every = 2e+06, kind = "spin" }
heartbeat_every = 200000
[[job.phase]]
instructions = 2e8
ipc = 1.5
"""
with open(os.path.join(OUT, "s4-consolidation.toml"), "w") as f:
    f.write(CONSOLIDATION)
