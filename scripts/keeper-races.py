#!/usr/bin/env python3
"""Looks for the races that can leave a thread pinned after herd is killed
(issue 25; the fault test caught one thread on CPU 0, once, in CI).

  keeper-races.py HERD batch-kills N
      N SIGKILLs of `herd batch` (3 copies of a 2-thread Python program, the
      fault test's batch) at 20-200 ms, alternating --pause signals/freezer;
      300 ms after each, counts the programs' threads not on every CPU.
  keeper-races.py HERD guard-and-keeper N [--after]
      N rounds, as root on cgroup v1 cpuset: 2,000 threads pinned to CPU 0
      by sched_setaffinity inside a cpuset of CPU 0, then herd's cgroup
      guard and keeper started and their pipes closed at once (as a SIGKILL
      of herd closes them); counts the threads left on CPU 0. With --after
      the keeper waits for the guard, as herd starts it now.

Needs gcc (the threaded program is built into target/dbg). Prints one line
per try with a leftover and a total; exits 1 if any thread was left.
"""
import os, random, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL = os.sched_getaffinity(0)
MARK = "#keeper-races"


def batch_kills(herd, n):
    prog = ("import threading, time\n"
            "ts = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(2)]\n"
            f"[t.start() for t in ts]\n[t.join() for t in ts]\n{MARK}")
    work = os.path.join(ROOT, "target", "dbg", "keeper-races")
    os.makedirs(work, exist_ok=True)
    batch = os.path.join(work, "b.toml")
    with open(batch, "w") as f:
        f.write('[[program]]\nname = "t"\ncmd = [%r, "-c", %r]\ncopies = 3\n' % (sys.executable, prog))
    left = 0
    for i in range(n):
        delay = random.uniform(0.02, 0.2)
        pause = ["signals", "freezer"][i % 2]
        h = subprocess.Popen([herd, "batch", batch, "--across-runs", "off", "--period-ms", "20", "--pause", pause,
                              "--db", os.path.join(work, "db"), "--logs", os.path.join(work, "logs")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        h.kill()
        h.wait()
        time.sleep(0.3)
        for pid in marked():
            for tid in tasks(pid):
                try:
                    if os.sched_getaffinity(tid) != ALL:
                        left += 1
                        print(f"try {i} ({pause}, {delay * 1000:.0f} ms): {pid}/{tid} left pinned", flush=True)
                except OSError:
                    pass
            kill(pid)
    return left


def guard_and_keeper(herd, n, after):
    src = os.path.join(ROOT, "target", "dbg", "sleepers.c")
    exe = src[:-2]
    os.makedirs(os.path.dirname(src), exist_ok=True)
    with open(src, "w") as f:
        f.write("#include <pthread.h>\n#include <unistd.h>\n"
                "static void *nap(void *a) { (void)a; sleep(60); return 0; }\n"
                "int main(void) { pthread_attr_t at; pthread_attr_init(&at);\n"
                "  pthread_attr_setstacksize(&at, 65536);\n"
                "  for (int i = 0; i < 2000; i++) { pthread_t t; pthread_create(&t, &at, nap, 0); }\n"
                "  sleep(60); return 0; }\n")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, src], check=True)
    cs = "/sys/fs/cgroup/cpuset"
    base, job = f"{cs}/herd-keeper-races", f"{cs}/herd-keeper-races/job-0"
    left = 0
    for i in range(n):
        os.makedirs(job, exist_ok=True)
        for d in (base, job):
            for k in ("cpus", "mems"):
                with open(f"{d}/cpuset.{k}", "w") as f:
                    f.write("0")
        p = subprocess.Popen([exe])
        while len(tasks(p.pid)) < 2001:
            time.sleep(0.01)
        tids = tasks(p.pid)
        for t in tids:
            os.sched_setaffinity(t, {0})
        with open(f"{job}/cgroup.procs", "w") as f:
            f.write(str(p.pid))
        g = subprocess.Popen([herd, "__cgroup-guard", base, cs], stdin=subprocess.PIPE)
        k = subprocess.Popen([herd, "__cgroup-guard"] + (["--after", str(g.pid)] if after else []),
                             stdin=subprocess.PIPE)
        first = ",".join(str(c) for c in sorted(ALL))
        k.stdin.write("".join(f"pin {t} {start_time(t)} {first}\n" for t in tids).encode())
        k.stdin.flush()
        time.sleep(0.2)
        k.stdin.close()
        g.stdin.close()
        g.wait()
        k.wait()
        here = sum(1 for t in tids if os.sched_getaffinity(t) != ALL)
        if here:
            print(f"round {i}: {here} of {len(tids)} threads left on CPU 0", flush=True)
        left += here
        p.kill()
        p.wait()
    return left


def marked():
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if MARK.encode() in b" ".join(argv) and b"herd" not in argv[0]:
                out.append(int(p))
    return out


def tasks(pid):
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def start_time(tid):
    with open(f"/proc/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def kill(pid):
    try:
        os.kill(pid, 9)
    except OSError:
        pass


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in ("batch-kills", "guard-and-keeper"):
        sys.exit(__doc__)
    herd, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "batch-kills":
        left = batch_kills(herd, n)
    else:
        left = guard_and_keeper(herd, n, "--after" in sys.argv[4:])
    print(f"{mode}: {left} thread(s) left pinned after {n} tries")
    sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()
