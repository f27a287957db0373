#!/usr/bin/env python3
"""SIGKILL `herd batch` N times 5-30 ms after it starts (4 copies of `sleep 3`,
alternating --pause signals and the freezer) and count what it left: programs
stopped (state T) and herd-<pid> cgroups. The same loop as
crates/cli/tests/faults.rs, for any binary (to compare builds).

Usage (as root, for the cgroups): scripts/fault-check.py HERD_BINARY [N]
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import time

libc=ctypes.CDLL(None)
libc.prctl(36,1,0,0,0)  # PR_SET_CHILD_SUBREAPER
herd = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
tmp = tempfile.mkdtemp()
BATCH = os.path.join(tmp, 'b.toml')
LOGS = os.path.join(tmp, 'logs')
open(BATCH, 'w').write('[[program]]\nname = "s"\ncmd = ["sleep", "3"]\ncopies = 4\n')
bad=0; groups=0
def kids():
    me=os.getpid()
    return [int(x) for x in open(f'/proc/{me}/task/{me}/children').read().split()]
for i in range(n):
    pause = "signals" if i%2==0 else "freezer"
    h=subprocess.Popen([herd,"batch",BATCH,"--across-runs","off","--period-ms","20","--pause",pause,"--logs",LOGS],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    time.sleep((5+(i*7%26))/1000)
    hp=h.pid; h.kill(); h.wait()
    time.sleep(0.3)
    for k in kids():
        cmd=open(f'/proc/{k}/cmdline').read()
        if '__cgroup-guard' in cmd: continue
        st=open(f'/proc/{k}/stat').read().rsplit(')',1)[1].split()[0]
        if st=='T': bad+=1; print('stopped', i, pause, cmd.replace('\0',' '))
        os.kill(k,9)
    t=time.time()
    while kids() and time.time()-t<5:
        try: os.waitpid(-1, os.WNOHANG)
        except ChildProcessError: pass
        time.sleep(0.01)
    try:
        while os.waitpid(-1, os.WNOHANG)[0]>0: pass
    except ChildProcessError: pass
    g=subprocess.run(["find","/sys/fs/cgroup","-maxdepth","8","-name",f"herd-{hp}"],capture_output=True,text=True).stdout.strip()
    if g: groups+=1; print('group left', i, g)
print(f"{herd}: {n} kills, {bad} stopped, {groups} groups left")
