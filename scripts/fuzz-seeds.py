#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus (fuzz/corpus/parsers/, one file per
input, its first byte choosing the format as in crates/cli/src/fuzz.rs):
every scenario and example in the repository, the policy specs `herd
policies` lists, synthetic topologies and CPU lists, and the bad inputs of
issue 25 and fuzz/regressions/.

Usage: scripts/fuzz-seeds.py [OUT_DIR]
"""
import gzip
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus", "parsers")
FORMATS = ["scenario", "cluster-scenario", "batch", "cluster-file",
           "synthetic-topology", "policy-spec", "cpu-list", "trace",
           "daemon-config", "daemon-request"]
os.makedirs(OUT, exist_ok=True)
n = 0


def seed(fmt, text):
    global n
    data = bytes([FORMATS.index(fmt)]) + text.encode()
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    n += 1


for folder in ["scenarios", "examples"]:
    for f in sorted(os.listdir(os.path.join(ROOT, folder))):
        text = open(os.path.join(ROOT, folder, f)).read()
        # The fuzzer's inputs stay small (make fuzz: -max_len=8192); a
        # 1000-node cluster takes seconds to derive, by design, not a hang.
        if len(text) > 8192:
            continue
        # Likewise a stream of thousands of jobs: 50 keep every field.
        text = re.sub(r"(?m)^jobs\s*=\s*\d+", "jobs = 50", text)
        if "[cluster]" in text:
            seed("cluster-scenario", text)
        elif "[[program]]" in text:
            seed("batch", text)
        elif "[[node]]" in text:
            seed("cluster-file", text)
        else:
            seed("scenario", text)
        # Every text as every format: the fuzzer learns each grammar's words.
        for fmt in FORMATS:
            seed(fmt, text[:2000])

for spec in ["linux", "static:compact", "static:compact:cpus=1", "smt:spn",
             "smt:speed", "bw:greedy", "bw:iabw", "cosched:fair",
             "numa:model", "amp:hass-s", "pack:palm",
             "pack:palm:min_period_us=1e308", "static:compact:cpus=99999",
             "static:compact:cpus=1,cpus=2", "pack:palm:min_period_us=5000,max_period_ms=1"]:
    seed("policy-spec", spec)
for topo in ["pack:2 core:4 pu:2", "numa:2 core:2 pu:2", "pack:1 core:1 pu:1",
             "pack:4000000000 core:4000000000", "core:8 pu:2", ""]:
    seed("synthetic-topology", topo)
for cpus in ["0-3", "0,2,4-7", "0-4294967295", "7-3", "", "1,1,1"]:
    seed("cpu-list", cpus)
# The first lines of each recorded trace (whole ones exceed -max_len).
traces = os.path.join(ROOT, "fixtures", "traces")
for d in sorted(os.listdir(traces)) if os.path.isdir(traces) else []:
    for f in sorted(os.listdir(os.path.join(traces, d))):
        if f.endswith(".jsonl.gz"):
            lines = gzip.open(os.path.join(traces, d, f), "rt").readlines()
            seed("trace", "".join(lines[:2])[:8000])
for bad in ["[[job]]\ncopies = 1000000\n", "threads = 4e9\n", "[machine]\nsynthetic = \"core:2\"\n[[job]]\narrival_s = 1e30\n"]:
    seed("scenario", bad)
seed("batch", '[[program]]\nname = "a"\ncmd = ["./nosuch"]\n[[program]]\nname = "a"\ncmd = ["x"]\n')
seed("cluster-file", 'machine = "numa:2 core:2 pu:1"\n[[node]]\nname = "a"\n[[node]]\nname = "a"\n')
# The daemon: its shipped config, and lines a client may write to its socket.
seed("daemon-config", open(os.path.join(ROOT, "integrations", "systemd", "herd.toml")).read())
for line in ['{"op":"status"}', '{"op":"slurm","job":"42","end":false}',
             '{"op":"lease","pid":1,"cpus":"0-3","policy":"linux","what":"run"}',
             '{"op":"lease","pid":-1}', '{"op":', '[]', '{"op":"status","x":' + '['*50 + ']'*50 + '}']:
    seed("daemon-request", line)
reg = os.path.join(ROOT, "fuzz", "regressions")
if os.path.isdir(reg):
    for f in os.listdir(reg):
        data = open(os.path.join(reg, f), "rb").read()
        with open(os.path.join(OUT, "reg-" + f), "wb") as out:
            out.write(data)
        n += 1
print(f"{n} seeds in {OUT}")
