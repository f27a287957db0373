#!/bin/sh
# Alternates stress-ng's switch stressor (both processes on CPU 1) with no
# perf event on the machine, a cpu-migrations event and a dummy event held
# on a sleeping process; prints "EVENT SECONDS" per run (bench/perf-hold.c
# says why), then each event's time over none's: the geometric mean of the
# rounds' ratios, +- 2 standard errors of its log. ROUNDS (default 8)
# rounds; the order flips each round.
# Build the holder first: gcc -O2 bench/perf-hold.c -o /tmp/perf-hold
HOLD=${HOLD:-/tmp/perf-hold}
ROUNDS=${ROUNDS:-8}
OUT=$(mktemp)
sleep 100000 & SLEEPER=$!
trap 'kill $SLEEPER 2>/dev/null; rm -f $OUT' EXIT
once() {
    t0=$(date +%s.%N)
    taskset -c 1 stress-ng --switch 1 --switch-ops 400000 --quiet
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
i=0
while [ $i -lt "$ROUNDS" ]; do
    if [ $((i % 2)) = 0 ]; then order="none 4 9"; else order="9 4 none"; fi
    for c in $order; do
        H=""
        if [ "$c" != none ]; then "$HOLD" $SLEEPER "$c" & H=$!; sleep 0.2; fi
        echo "$c $(once)" | tee -a "$OUT"
        [ -n "$H" ] && kill $H
    done
    i=$((i + 1))
done
python3 - "$OUT" <<'PY'
import math, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    event, seconds = line.split()
    runs.setdefault(event, []).append(float(seconds))
for event in ("4", "9"):
    logs = [math.log(a / b) for a, b in zip(runs[event], runs["none"])]
    m = statistics.fmean(logs)
    se = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    name = {"4": "cpu-migrations", "9": "dummy"}[event]
    print(f"{name}: {math.exp(m):.3f}x none ({math.exp(m - 2 * se):.3f}-{math.exp(m + 2 * se):.3f}), {len(logs)} rounds")
PY
