"""What the experiment scripts share: herd's release binary, running
`herd sim` for its JSON, and reading a list of seeds."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# HERD= another build (a commit's "before", say) in place of this tree's.
HERD = os.environ.get("HERD", os.path.join(ROOT, "target", "release", "herd"))


def sim_json(path, *args):
    """`herd sim PATH --json --no-timing ARGS...`, parsed; exits naming the
    file when herd refuses it."""
    r = subprocess.run([HERD, "sim", path, "--json", "--no-timing", *args], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{path}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def seed_list(text):
    """`1,2,3` as seeds, for argparse's `type=`: a clear message otherwise."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of seeds: {text!r}")
