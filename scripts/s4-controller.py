#!/usr/bin/env python3
"""PALM's period controller against S4's own, in simulation, on variations
of S4's synchronisation-intensive job that the shipped scenarios do not
hold: 16 threads with spinning barriers every 1e6, 2e6 or 4e6 instructions
on 15, 13, 11 or 9 of 16 cores. For each, the makespan under TP, S4's
controller (one-period epochs, any change moves the period), herd's
default (4 ms epochs, a 2% dead band, 8 beats per thread) and the static
best, and which controller was closer to the static best. This is what
pack::DEFAULT_EPOCH_US cites.

Usage (after `cargo build --release`): scripts/s4-controller.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERD = os.path.join(os.path.dirname(__file__), "..", "target", "release", "herd")
SCENARIO = """name = "s4-variation"
period_ms = 1
[machine]
synthetic = "package:1 l3:1 core:16"
[[job]]
name = "app"
threads = 16
barrier = {{ every = {every}, kind = "spin" }}
heartbeat_every = 200000
[[job.phase]]
instructions = 2e8
ipc = 1.5
"""


def main():
    better = 0
    rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        for every in ["1e6", "2e6", "4e6"]:
            for k in [15, 13, 11, 9]:
                path = os.path.join(tmp, f"v-{every}-{k}.toml")
                with open(path, "w") as f:
                    f.write(SCENARIO.format(every=every))
                policies = [
                    f"pack:tp:cores={k}",
                    f"pack:palm:cores={k},epoch_us=0,tolerance=0,epoch_beats=0,climb=0",
                    f"pack:palm:cores={k}",
                    f"static-best:pack:palm:cores={k}",
                ]
                cmd = [HERD, "sim", path, "--json", "--no-timing"] + sum((["--policy", p] for p in policies), [])
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    sys.exit(f"{' '.join(cmd)}: {r.stderr.strip()}")
                t = [p["makespan_s"] for p in json.loads(r.stdout)["policies"] if p["name"] != "linux"]
                tp, s4, herd, best = t
                rows += 1
                better += herd < s4
                print(
                    f"barrier every {every:>3} on {k:2} cores: TP {tp:.4f}  S4's {s4:.4f} ({s4 / tp - 1:+.1%})  "
                    f"herd's {herd:.4f} ({herd / tp - 1:+.1%})  static best {best:.4f} ({best / tp - 1:+.1%})"
                )
    print(f"herd's controller shorter than S4's in {better} of {rows} variations")


if __name__ == "__main__":
    main()
