#!/usr/bin/env python3
"""The simulator against this machine (issue 26): for a set of programs,
measure on the real machine each one's time alone, beside a memory probe,
and in batches under plain Linux and under herd's policies; describe the
programs to the simulator from what was measured alone and beside the
probe only; simulate the same batches; print predicted against measured.

What the simulator is given, per program (nothing from the batches it is
judged on):
- its solo time (median of the solo runs), as CPU work at IPC 1;
- its memory bandwidth alone: the value for which the simulator
  reproduces the program's measured slowdown beside herd's `stream`
  probe (the probe's own bandwidth measured alone; a Bubble-Up-style
  sensitivity fit), 0 for a program the probe does not slow;
- the machine: this one's CPUs, and one memory controller whose peak is
  fitted so the simulator reproduces two probes together (so the probe
  pair is calibration, not evaluation).
Without hardware counters (this VM has none) nothing else is known about a
program. Evaluation: each batch's makespan and each program's slowdown
(its time in the batch over its time alone), under `linux` and each
policy given, measured (median of --repeat rounds, variants alternated)
against simulated. Errors are relative: |predicted - measured| / measured. Each round
measures everything (solo runs too) and each figure is a ratio to that
round's solo times: this VM's speed drifts by tens of per cent between
minutes. Measured makespans are in the median solo round's seconds;
simulated ones are rescaled so the programs' summed simulated solo times
are the measured ones (a memory-bound program alone already queues at the
controller in the model).

Usage (after `make build`; about 5 minutes at --repeat 3):
  scripts/sim-vs-live.py [--repeat N] [--policy P ...] [--json] [--keep DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERD = os.path.join(ROOT, "target", "release", "herd")
W = os.path.join(ROOT, "target", "workloads")

# name: (command, memory hint, written here). Each runs 1-2 s alone here.
PROGRAMS = {
    "compute": ([f"{W}/compute", "--iterations", "9e8"], "low", True),
    "stream": ([f"{W}/stream", "--passes", "50", "--mb", "64"], "high", True),
    "stress-cpu": (["stress-ng", "--cpu", "1", "--cpu-ops", "2500", "--quiet"], "low", False),
    "stress-stream": (["stress-ng", "--stream", "1", "--stream-ops", "6", "--stream-l3-size", "64M", "--quiet"],
                      "high", False),
    "sysbench-cpu": (["sysbench", "cpu", "--threads=1", "--events=6000", "--time=0", "run"], "low", False),
    "sysbench-mem": (["sysbench", "memory", "--threads=1", "--memory-block-size=64M", "--memory-total-size=18G",
                      "--time=0", "run"], "high", False),
    "stress-matrix": (["stress-ng", "--matrix", "1", "--matrix-ops", "4000", "--quiet"], "medium", False),
    "xz": (["xz", "-T1", "-3", "-c", "{data}"], "medium", False),
}

# A second copy's name in a batch (two compute loops: calibration only).
ALIASES = {"compute2": "compute"}

# The probe: herd's streamer, for as long as the program beside it runs.
PROBE = [f"{W}/stream", "--seconds", "600", "--mb", "64"]

# Batches judged (none includes the probe).
BATCHES = {
    "stream+compute": ["stream", "compute"],
    "stress-stream+sysbench-cpu": ["stress-stream", "sysbench-cpu"],
    "stress-stream+sysbench-mem": ["stress-stream", "sysbench-mem"],
    "xz+stream": ["xz", "stream"],
    "stress-matrix+stream": ["stress-matrix", "stream"],
    "four-mixed": ["stress-cpu", "sysbench-cpu", "stress-stream", "stream"],
    "four-memory": ["compute", "xz", "sysbench-mem", "stress-stream"],
}

FREQ_GHZ = 2.5
REQUEST_NS = 3.2  # lets one core stream up to 20 GB/s in the model


def batch_file(path, names, data):
    with open(path, "w") as f:
        for n in names:
            argv, hint, _ = PROGRAMS[ALIASES.get(n, n)]
            argv = [a.replace("{data}", data) for a in argv]
            f.write(f'[[program]]\nname = "{n}"\ncmd = {json.dumps(argv)}\nmemory = "{hint}"\n\n')


def run_batch(names, policy, work, data):
    """Runs a batch through `herd batch --json`: (makespan, {name: turnaround})."""
    path = os.path.join(work, "b.toml")
    batch_file(path, names, data)
    r = subprocess.run([HERD, "batch", path, "--policy", policy, "--json", "--across-runs", "off", "--logs", os.path.join(work, "logs")],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"herd batch {names} --policy {policy}: exit {r.returncode}: {r.stderr.strip()}")
    run = json.loads(r.stdout)["runs"][0]
    return run["makespan_s"], {p["name"]: p["turnaround_s"] for p in run["programs"]}


def beside_probe(name, work, data, probes=1):
    """The program's time beside `probes` running copies of the probe."""
    ps = [subprocess.Popen(PROBE, stdout=subprocess.DEVNULL) for _ in range(probes)]
    time.sleep(0.3)  # the probe's arrays are allocated and streaming
    try:
        return run_batch([name], "linux", work, data)[1][name]
    finally:
        for p in ps:
            p.kill()
            p.wait()


def probe_alone_gbps():
    out = subprocess.run([f"{W}/stream", "--seconds", "2", "--mb", "64"], capture_output=True, text=True).stdout
    return float(out.split(",")[1].split()[0])


def machines(sigma):
    """The two descriptions of this machine compared: its CPUs as the
    kernel reports them (independent cores), and as measured (pairs of
    CPUs that deliver 1 + sigma of one when both are busy, as SMT
    siblings do; `sigma` from two compute loops together)."""
    cpus = os.cpu_count()
    out = {"as reported": (f"core:{cpus}", 0.3)}
    if cpus % 2 == 0:
        out["as measured"] = (f"core:{cpus // 2} pu:2", sigma)
    return out


def scenario(jobs, solo, bw, node_bw, machine, probe_bw=None):
    """A scenario for `jobs` (names) on `machine` (synthetic spec, sigma)."""
    spec, sigma = machine
    text = (f'name = "sim-vs-live"\nperiod_ms = 100\n[machine]\nsynthetic = "{spec}"\n'
            f"[model]\nfreq_ghz = {FREQ_GHZ}\nrequest_ns = {REQUEST_NS}\nnode_bw_gbps = {node_bw}\n"
            f"smt_sigma = {sigma:.4f}\n")
    for n in jobs:
        text += (f'[[job]]\nname = "{n}"\nmemory_hint = "{PROGRAMS[n][1] if n in PROGRAMS else "high"}"\n'
                 f"[[job.phase]]\ninstructions = {solo[n] * FREQ_GHZ * 1e9:.6e}\nipc = 1.0\n"
                 f"bw_gbps = {bw.get(n, 0.0):.4f}\n")
    if probe_bw is not None:
        text += (f'[[job]]\nname = "probe"\nrestart = true\nmemory_hint = "high"\n[[job.phase]]\n'
                 f"instructions = {1e3 * FREQ_GHZ * 1e9:.6e}\nipc = 1.0\nbw_gbps = {probe_bw:.4f}\n")
    return text


def simulate(text, policies, work):
    """{policy: (makespan, {job: (turnaround, solo)})} from `herd sim --json`.
    A job's simulated solo time is the simulator's own: a memory-bound job
    alone already queues at the controller in the model."""
    path = os.path.join(work, "s.toml")
    with open(path, "w") as f:
        f.write(text)
    cmd = [HERD, "sim", path, "--json", "--no-timing"] + sum((["--policy", p] for p in policies), [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"herd sim: {r.stderr.strip()}\n{text}")
    out = {}
    for p in json.loads(r.stdout)["policies"]:
        out[p["name"]] = (p["makespan_s"], {j["name"]: (j["turnaround_s"], j["solo_s"]) for j in p["jobs"]})
    return out


def fit(lo, hi, f, want, steps=30):
    """The x in [lo, hi] where increasing f(x) meets `want` (bisection);
    lo or hi when `want` is outside f's range there."""
    if f(lo) >= want:
        return lo
    if f(hi) <= want:
        return hi
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < want else (lo, mid)
    return (lo + hi) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policy", action="append", default=[], help="herd policies besides linux (default: cosched:fair, bw:iabw)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", metavar="DIR", help="keep the scenarios written here")
    a = ap.parse_args()
    policies = a.policy or ["cosched:fair", "bw:iabw"]
    work = tempfile.mkdtemp(prefix="herd-sim-vs-live-")
    data = os.path.join(work, "data.txt")
    # Text-like data for xz: base64 of random bytes, 3.5 MB.
    with open(data, "wb") as f:
        subprocess.run(f"head -c 2600000 /dev/urandom | base64", shell=True, stdout=f, check=True)
    log = lambda s: print(s, file=sys.stderr, flush=True)

    # Every round measures everything, calibration and batches, and each
    # figure is a ratio to the same round's solo times: this shared VM's
    # speed drifts by tens of per cent over minutes (noisy neighbours), so
    # solo times from one round against batches from another mislead.
    variants = ["linux"] + policies
    solo_r, probed_r, pairs, probe_gbps = {n: [] for n in PROGRAMS}, {n: [] for n in PROGRAMS}, [], []
    live = {(b, v): [] for b in BATCHES for v in variants}
    for r in range(a.repeat):
        log(f"round {r + 1} of {a.repeat}")
        solo = {n: run_batch([n], "linux", work, data)[1][n] for n in PROGRAMS}
        for n in PROGRAMS:
            solo_r[n].append(solo[n])
            probed_r[n].append(beside_probe(n, work, data) / solo[n])
        probe_gbps.append(probe_alone_gbps())
        # Two compute loops together: how much two busy CPUs deliver.
        _, t = run_batch(["compute", "compute2"], "linux", work, data)
        pairs.append(statistics.mean(t.values()) / solo["compute"])
        for b, names in BATCHES.items():
            for v in (variants if r % 2 == 0 else variants[::-1]):
                makespan, times = run_batch(names, v, work, data)
                # The makespan in this round's solo seconds.
                scale = sum(solo[n] for n in names)
                live[(b, v)].append((makespan / scale, {n: times[n] / solo[n] for n in names}))
    solo = {n: statistics.median(v) for n, v in solo_r.items()}
    probed = {n: statistics.median(v) * solo[n] for n, v in probed_r.items()}
    probe_bw = statistics.median(probe_gbps)
    sigma = min(1.0, max(0.0, 2.0 / statistics.median(pairs) - 1.0))
    models = {name: (m, *calibrate(solo, probed, probe_bw, m, work)) for name, m in machines(sigma).items()}

    results = {}
    for model, (machine, node_bw, bw) in models.items():
        rows = []
        for b, names in BATCHES.items():
            text = scenario(names, solo, bw, node_bw, machine)
            sim = simulate(text, policies, work)
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                with open(os.path.join(a.keep, f"{b}-{model.replace(' ', '-')}.toml"), "w") as f:
                    f.write(text)
            for v in variants:
                runs = live[(b, v)]
                p_make, p_jobs = sim[v]
                scale = sum(solo[n] for n in names)
                # The simulator's seconds rescaled so the programs' summed
                # solo times are the measured ones.
                sim_scale = sum(p_jobs[n][1] for n in names)
                row = {"batch": b, "policy": v, "measured_makespan_s": statistics.median(x[0] for x in runs) * scale,
                       "predicted_makespan_s": p_make * scale / sim_scale, "programs": {}}
                for n in names:
                    row["programs"][n] = {"measured_slowdown": statistics.median(x[1][n] for x in runs),
                                          "predicted_slowdown": p_jobs[n][0] / p_jobs[n][1]}
                rows.append(row)
        results[model] = {"machine": machine[0], "smt_sigma": machine[1], "node_bw_gbps": node_bw, "bw_gbps": bw,
                          "rows": rows, **errors(rows)}
    report(results, solo, probed, probe_bw, sigma, pairs, a)


def sim_slowdown(name, solo, bw, node_bw, machine, probe_bw, work):
    """Simulated slowdown of `name` beside the probe."""
    sim = simulate(scenario([name], solo, bw, node_bw, machine, probe_bw=probe_bw), [], work)
    turnaround, alone = sim["linux"][1][name]
    return turnaround / alone


def calibrate(solo, probed, probe_bw, machine, work):
    """The controller's peak and each program's bandwidth alone, fitted on
    `machine` to the probe measurements."""
    # Two streams together slow each other as measured.
    pair_slowdown = probed["stream"] / solo["stream"]
    node_bw = fit(0.5, 200.0,
                  lambda peak: -sim_slowdown("stream", solo, {"stream": probe_bw}, peak, machine, probe_bw, work),
                  -pair_slowdown)
    bw = {"stream": probe_bw}
    for n in PROGRAMS:
        if n != "stream":
            bw[n] = fit(0.0, 0.95 * 64 / REQUEST_NS,
                        lambda b: sim_slowdown(n, solo, {n: b}, node_bw, machine, probe_bw, work), probed[n] / solo[n])
    return node_bw, bw


def errors(rows):
    err = lambda p, m: abs(p - m) / m
    make = [err(r["predicted_makespan_s"], r["measured_makespan_s"]) for r in rows]
    slow = [err(p["predicted_slowdown"], p["measured_slowdown"]) for r in rows for p in r["programs"].values()]
    return {"makespan_error_median": statistics.median(make), "makespan_error_worst": max(make),
            "slowdown_error_median": statistics.median(slow), "slowdown_error_worst": max(slow)}


def report(results, solo, probed, probe_bw, sigma, pairs, a):
    if a.json:
        print(json.dumps({"programs": {n: {"solo_s": solo[n], "beside_probe_s": probed[n], "written_here": PROGRAMS[n][2]}
                                       for n in PROGRAMS},
                          "probe_gbps": probe_bw, "compute_pair_slowdowns": pairs, "smt_sigma_measured": sigma,
                          "models": results}, indent=1))
        return
    print(f"machine: {os.cpu_count()} CPUs; two compute loops together run {statistics.median(pairs):.2f}x "
          f"their time alone (sigma {sigma:.2f}); probe alone {probe_bw:.2f} GB/s")
    print(f"{'program':<15} {'ours':>4} {'solo s':>7} {'w/ probe':>8}  " +
          "  ".join(f"{'GB/s, ' + m:>20}" for m in results))
    for n in PROGRAMS:
        print(f"{n:<15} {'yes' if PROGRAMS[n][2] else 'no':>4} {solo[n]:>7.2f} {probed[n] / solo[n]:>7.2f}x  " +
              "  ".join(f"{r['bw_gbps'][n]:>20.2f}" for r in results.values()))
    for model, r in results.items():
        print(f"\n== the machine {model}: {r['machine']}, smt_sigma {r['smt_sigma']:.2f}, "
              f"fitted controller peak {r['node_bw_gbps']:.2f} GB/s")
        print(f"{'batch':<28} {'policy':<13} {'makespan meas':>13} {'pred':>6} {'err':>6}   "
              "program slowdowns (measured/predicted)")
        for row in r["rows"]:
            progs = "  ".join(f"{n} {p['measured_slowdown']:.2f}/{p['predicted_slowdown']:.2f}"
                              for n, p in row["programs"].items())
            e = abs(row["predicted_makespan_s"] - row["measured_makespan_s"]) / row["measured_makespan_s"]
            print(f"{row['batch']:<28} {row['policy']:<13} {row['measured_makespan_s']:>13.2f} "
                  f"{row['predicted_makespan_s']:>6.2f} {100 * e:>5.1f}%   {progs}")
        print(f"makespan error: median {100 * r['makespan_error_median']:.1f}%, worst {100 * r['makespan_error_worst']:.1f}%; "
              f"per-program slowdown error: median {100 * r['slowdown_error_median']:.1f}%, "
              f"worst {100 * r['slowdown_error_worst']:.1f}%")


if __name__ == "__main__":
    main()
