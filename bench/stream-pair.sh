#!/bin/sh
# What bandwidth-aware pairing can win on this machine, with no herd: the
# issue batch's stress-ng stream copy pinned to CPU 0, alone, beside a
# second stream copy on CPU 1, and beside a sysbench cpu copy on CPU 1;
# then sysbench alone. Prints each round's wall seconds of the CPU 0 copy
# (ROUNDS, default 6): `alone`, `ss` (beside a stream), `sc` (beside
# sysbench), `cpu_alone`. Plain Linux co-runs the two streams of the
# batch part of the time; bw:* never does.
ROUNDS=${ROUNDS:-6}
S="stress-ng --stream 1 --stream-ops 15 --stream-l3-size 64M -q"
C="sysbench cpu --threads=1 --events=12000 --time=0 run"
t() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }
r=0
while [ $r -lt "$ROUNDS" ]; do
    r=$((r + 1))
    a=$(t taskset -c 0 $S)
    ss=$( (t taskset -c 0 $S) & (taskset -c 1 $S >/dev/null 2>&1); wait)
    sc=$( (t taskset -c 0 $S) & (taskset -c 1 $C >/dev/null 2>&1); wait)
    c=$(t taskset -c 0 $C)
    echo "alone=$a ss=$ss sc=$sc cpu_alone=$c"
done
