#!/bin/bash
# Each bench names its bad input before anything runs, exit 2, never a
# panic or a silent default (`make bench-smoke` runs this). Usage:
#   scripts/bench-bad-input.sh [cargo]
set -u
CARGO=${1:-cargo}
fail=0

# expect MESSAGE COMMAND...: the command exits 2 and says MESSAGE.
expect() {
    local want=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" != 2 ] || ! grep -qF -- "$want" <<<"$out"; then
        echo "bench-bad-input: '$*' exited $rc, not 2 with: $want" >&2
        tail -3 <<<"$out" >&2
        fail=1
    fi
}

expect 'sim scale: policy "no:such"' \
    env HERD_BENCH_SIZES= "$CARGO" bench -q -p herd-sim --bench scale -- no:such
expect 'sim decide: HERD_BENCH_HORIZON_S must be a positive number of seconds' \
    env HERD_BENCH_HORIZON_S=-1 "$CARGO" bench -q -p herd-sim --bench decide
expect 'policy amp: policy "amp:mf"' \
    "$CARGO" bench -q -p herd-policy --bench amp -- amp:mf
expect 'policy scale: HERD_BENCH_TASKS must be one of' \
    env HERD_BENCH_TASKS=1000 "$CARGO" bench -q -p herd-policy --bench scale
expect 'runtime affinity: HERD_BENCH_CALLS must be a whole number >= 1' \
    env HERD_BENCH_CALLS=0 "$CARGO" bench -q -p herd-runtime --bench affinity
expect 'runtime live_turn: HERD_BENCH_THREADS must be whole numbers >= 1' \
    env HERD_BENCH_THREADS=64,x "$CARGO" bench -q -p herd-runtime --bench live_turn
exit $fail
