#!/usr/bin/env python3
"""Records replayable traces of short live runs, one per policy family,
with the machine they ran on, for the parity test
(crates/cli/tests/replay.rs, fixtures/traces/).

Usage: scripts/record-traces.py OUTDIR [SCALE [POLICY...]]

SCALE (default 1) multiplies each program's work: an emulated guest runs
herd's loop with periods stretched to 0.3-1 s (its share of a slow CPU),
so its programs must run longer for as many decisions (5 there).

Re-record when a policy or the guard changes what it decides: the replay
test checks that the code decides now as it did when the trace was made.

Writes OUTDIR/machine.xml (lstopo's export of this machine) and
OUTDIR/<policy>.jsonl.gz for each run (or for each POLICY named). Each run starts from an empty profile
database, so a replay learns from the same nothing. In a guest:
  scripts/vm/guest.py --topology 2s2c2t --collect fixtures/traces/2s2c2t -- \\
    /usr/bin/python3 $PWD/scripts/record-traces.py /mnt/collect 5
"""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# scripts/vm/guest.py hands a guest its own copy of the binary.
HERD = os.environ.get("HERD_BIN") or os.path.join(ROOT, "target/release/herd")
W = os.path.join(ROOT, "target/workloads")

# Short programs: a fixture should be tens of kB, not megabytes.
def barrier(phases):
    return [f"{W}/barrier", "--threads", "3", "--mode", "block", "--work", "2e5", "--phases", str(phases)]


# About 1.5 s on the 2-CPU host (10-15 decisions); PALM decides every
# 125 us-64 ms, so its program is shorter.
PHASES = {"pack:palm:cores=1": 400}
RUNS = ["linux", "static:compact", "smt:spn", "numa:model", "amp:comprehensive", "amp:hass-s",
        "pack:tp:cores=1", "pack:palm:cores=1"]
# cosched:fair leaves programs that need one CPU each to the kernel; its
# cap given, they take turns (on the 2-CPU host).
BATCHES = ["cosched:fair", "cosched:fair:slots=2", "bw:iabw"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    scale = float(sys.argv[2]) if len(sys.argv) >= 3 else 1.0
    only = sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "machine.xml"), "w") as f:
        subprocess.run(["lstopo-no-graphics", "--of", "xml"], stdout=f, check=True)
    tmp = tempfile.mkdtemp(prefix="herd-traces-")
    batch = os.path.join(tmp, "b.toml")
    with open(batch, "w") as f:
        f.write(f'[[program]]\nname = "stream"\ncmd = ["{W}/stream", "--passes", "{round(8 * scale)}", "--mb", "16"]\n'
                f'copies = 2\nmemory = "high"\n\n'
                f'[[program]]\nname = "compute"\ncmd = ["{W}/compute", "--iterations", "{4e8 * scale:g}"]\n'
                f'copies = 2\nmemory = "low"\n')
    for policy in [p for p in RUNS + BATCHES if not only or p in only]:
        trace = os.path.join(out, policy.replace(":", "-").replace("=", "") + ".jsonl")
        db = os.path.join(tmp, policy + ".db")
        common = ["--policy", policy, "--db", db, "--trace", trace]
        if policy in RUNS:
            argv = [HERD, "run", *common, "--", *barrier(round(PHASES.get(policy, 3000) * scale))]
        else:
            argv = [HERD, "batch", batch, "--across-runs", "off", *common, "--logs", os.path.join(tmp, "logs")]
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"{policy}: herd exited {r.returncode}: {r.stderr}")
        with open(trace, "rb") as f, gzip.open(trace + ".gz", "wb") as g:
            shutil.copyfileobj(f, g)
        print(f"{policy}: {sum(1 for _ in open(trace)) - 1} decisions, "
              f"{os.path.getsize(trace + '.gz') // 1024} kB compressed", flush=True)
        os.remove(trace)


if __name__ == "__main__":
    main()
