#!/usr/bin/env python3
"""S0's headline as a function of its input σ (issue 26): the simulated
gain of SPN-first (smt:spn) over speedup-first (smt:speed) at equal
physical cores, for the simulated machine's σ from 0.1 to 0.5 (two busy
SMT siblings deliver 1 + σ of one core), beside S0's measured figure.
The policies are unchanged; only the world's σ moves. `herd calibrate`
measures σ on a machine with SMT (its `cpu_pair`).

Usage (after `make build`): scripts/s0-sigma.py [SIGMA ...]
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERD = os.path.join(ROOT, "target", "release", "herd")
SCENARIO = os.path.join(ROOT, "scenarios", "s0-ht-energy.toml")


def main():
    sigmas = [float(x) for x in sys.argv[1:]] or [0.1, 0.2, 0.3, 0.4, 0.5]
    text = open(SCENARIO).read()
    if not re.search(r"^smt_sigma = [\d.]+", text, re.M):
        sys.exit(f"{SCENARIO}: no smt_sigma line to vary")
    print("S0 measured (2-socket Xeon L5520, Phoenix wc): +21% mean, up to +33%")
    print(f"{'sigma':>6} {'mean gain':>10} {'best gain':>10}")
    with tempfile.TemporaryDirectory() as d:
        for s in sigmas:
            path = os.path.join(d, "s0.toml")
            with open(path, "w") as f:
                f.write(re.sub(r"^smt_sigma = [\d.]+", f"smt_sigma = {s}", text, flags=re.M))
            r = subprocess.run([HERD, "sim", path, "--guard", "off", "--no-timing"], capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"sigma {s}: {r.stderr.strip()}")
            m = re.search(r"mean ([+-][\d.]+)% where they differ, best ([+-][\d.]+)%", r.stdout)
            if not m:
                sys.exit(f"sigma {s}: no summary line in herd sim's output")
            print(f"{s:>6.2f} {m.group(1):>9}% {m.group(2):>9}%")
    print("(simulated, judged by herd's own model; the scenario's own sigma is 0.3)")


if __name__ == "__main__":
    main()
