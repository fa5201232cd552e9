#!/usr/bin/env bash
# Runs the model's bounded checks (`make model`) or its mutants
# (`make model-mutants`). Usage: model/check.sh [--mutants] [NAME...]
#
# Each check is one exhaustive SPIN search of model/zkr.pml in one
# configuration (-D bounds, model/README.md); it prints one line per
# property, `model: NAME ok (states=..., depth=..., time=...s)`, or the
# counterexample as a readable interleaving (the model's MSC lines) and
# fails. With --mutants each variant must yield a counterexample:
# `mutant: NAME caught (...)` or `mutant: NAME SURVIVED` (then it fails).
#
# Environment: SPIN (default spin), CC (default cc), MODEL_DIR (where the
# runs are built; default a temporary directory, removed afterwards),
# MODEL_MEM (MB for the state store, default 2048).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SPIN=${SPIN:-spin}
CC=${CC:-cc}
mem=${MODEL_MEM:-2048}
mutants=0
if [ "${1:-}" = "--mutants" ]; then
    mutants=1
    shift
fi
if ! command -v "$SPIN" >/dev/null 2>&1; then
    echo "model: $SPIN not found (Debian package spin; scripts/lib.sh zkr_install_deps)" >&2
    exit 2
fi
work=${MODEL_DIR:-}
if [ -z "$work" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi

# The configurations. Each line: NAME|PROPERTIES|-D flags. The properties
# named are checked in that run (assertions in the model, see zkr.pml).
# Bounds: 2 zkr contenders; the rest as below.
checks=(
    # A foreign (Curator-named) contender and another client that writes
    # or deletes any node once (a waiter's, or the holder's as an
    # operator's forced delete).
    "foreign|mutex fencing cleanup order|-DMAXOPS=1 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    # Another client writes and deletes (two actions) zkr contenders'
    # nodes.
    "writes|mutex fencing cleanup order|-DMAXOPS=2 -DFOREIGN=0 -DCANCEL=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    # A waiter cancels (abort, cleanup) beside a foreign contender.
    "cancel|mutex fencing cleanup order|-DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    # A lost create: recovery by UUID, a new session while the leader
    # keeps the old one (which then goes silent and expires).
    "recovery|mutex fencing cleanup order|-DMAXOPS=0 -DFOREIGN=0 -DCANCEL=0 -DMAXCUTS=0 -DMAXLAPSE=0"
    # The follower cut off from the leader, a session silent for T (LOST,
    # then expired by the leader), with the foreign contender.
    "deadline|mutex fencing cleanup order|-DMAXOPS=0 -DCANCEL=0 -DMAXLOSS=0 -DNEWSESS=0"
    # The read/write lock: zkr contender 0 writes, zkr 1 and 2 read, the
    # foreign contender writes ([G10], [G11]); fencing among writers.
    "rwlock|rw-exclusion writer-fencing cleanup order|-DRECIPE=1 -DNZ=3 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    # A semaphore of 2 permits, 2 zkr contenders and the foreign one
    # ([G12]: the first waiter watches the directory, [W3]).
    "semaphore|permits cleanup order|-DRECIPE=2 -DSEMN=2 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    # A semaphore of 1 permit (still the semaphore's rule, with touches),
    # 2 zkr contenders and the foreign one: a zkr waiter behind a zkr
    # predecessor watches it and is woken by its touch ([H1]); behind the
    # foreign one (untouchable) it watches the directory ([W2]).
    "semtouch|permits cleanup order|-DRECIPE=2 -DSEMN=1 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    # A zkr client's connection drops once and comes back with the same
    # session (SUSPENDED, watches re-registered, WATCHING lists again,
    # re-verification), and another client deletes or writes one node
    # (the holder's: a forced delete while it is away).
    "reconnect|mutex fencing cleanup order|-DMAXDISC=1 -DMAXOPS=1 -DFOREIGN=0 -DCANCEL=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    # Liveness (LTL, weak fairness): the foreign contender and one cut of
    # the follower's link, nothing else (a bigger run takes too long).
    "liveness|liveness|-DLIVENESS -DMAXOPS=0 -DCANCEL=0 -DMAXLOSS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    # ... and one disconnection of a zkr client (same session).
    "reconnect-liveness|liveness|-DLIVENESS -DMAXDISC=1 -DMAXOPS=0 -DCANCEL=0 -DMAXLOSS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    # The semaphore's liveness: semtouch's world, no fault.
    "semlive|semaphore-liveness|-DLIVENESS -DRECIPE=2 -DSEMN=1 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
)

# Each mutant: NAME|-D flags (its configuration and its broken rule).
# A name marked "slow:" runs only when named (model/README.md says why).
mutant_list=(
    "a-handoff-without-listing|-DMUTANT_A -DMAXOPS=1 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "b-no-own-node-check|-DMUTANT_B -DMAXOPS=1 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "c-signed-order|-DMUTANT_C -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "d-follower-heartbeat|-DMUTANT_D -DMAXOPS=0 -DFOREIGN=0 -DCANCEL=0 -DMAXLOSS=0 -DNEWSESS=0 -DMAXLAPSE=0"
    "e-adopt-without-owner-check|-DMUTANT_E -DMAXOPS=0 -DFOREIGN=0 -DCANCEL=0 -DMAXCUTS=0 -DMAXLAPSE=0"
    "r-reader-ignores-writer|-DMUTANT_R -DRECIPE=1 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "s-semaphore-grant-at-n|-DMUTANT_S -DRECIPE=2 -DSEMN=1 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "v-reverify-unchecked|-DMUTANT_V -DMAXDISC=1 -DMAXOPS=1 -DFOREIGN=0 -DCANCEL=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    "f-notification-dropped|-DMUTANT_F -DLIVENESS -DMAXOPS=0 -DCANCEL=0 -DMAXLOSS=0 -DMAXLAPSE=0 -DNEWSESS=0"
    "o-barging-semaphore|-DMUTANT_O -DRECIPE=2 -DSEMN=1 -DNZ=3 -DFOREIGN=0 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "slow:w-watch-untouchable|-DMUTANT_W -DKEEP -DLIVENESS -DRECIPE=2 -DSEMN=2 -DNZ=1 -DNF=3 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
    "slow:t-no-touch|-DMUTANT_T -DKEEP -DLIVENESS -DRECIPE=2 -DSEMN=2 -DNF=2 -DMAXOPS=0 -DMAXLOSS=0 -DMAXCUTS=0 -DMAXLAPSE=0 -DNEWSESS=0 -DCANCEL=0"
)

# run NAME FLAGS: builds and runs one search in $work/NAME; sets
# states, depth, secs, errors.
run() {
    local name=$1 flags=$2 dir="$work/$1" t0 t1 cflags=-DSAFETY runflags=
    if [[ "$flags" == *-DLIVENESS* ]]; then
        cflags=-DNFAIR=3
        [[ "$flags" != *-DNF=[23]* ]] || cflags=-DNFAIR=4
        runflags="-a -f"
    fi
    mkdir -p "$dir"
    cp "$src"/*.pml "$dir"/
    # shellcheck disable=SC2086 # flags are words
    (cd "$dir" && "$SPIN" -a $flags zkr.pml >spin.out 2>&1) || {
        cat "$dir/spin.out" >&2
        return 2
    }
    # -O1: pan.c (about 370 KB) compiles in about half the time -O2 takes,
    # and these searches run no slower.
    (cd "$dir" && $CC -O1 -w $cflags -DCOLLAPSE -DMEMLIM="$mem" \
        -o pan pan.c) || return 2
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    (cd "$dir" && ./pan $runflags -m100000 -w24 >pan.out 2>&1) || true
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    states=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.out")
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$dir/pan.out" | head -1)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | head -1)
    # A search that found nothing must have been complete.
    if [ "${errors:-0}" = 0 ] && grep -q "out of memory\|MEMLIM bound\|max search depth too small\|Search not completed" "$dir/pan.out"; then
        echo "model: $name: search incomplete (memory or depth bound)" >&2
        errors=incomplete
    fi
    : "${states:=?}" "${depth:=?}" "${errors:=?}"
}

# trail NAME FLAGS: prints the counterexample as an interleaving.
trail() {
    local dir="$work/$1" flags=$2
    grep -m1 "pan:1:" "$dir/pan.out" || true
    # shellcheck disable=SC2086
    (cd "$dir" && "$SPIN" -t $flags zkr.pml 2>&1) |
        grep -E "MSC:|spin:|assert" | sed 's/^ *//; s/^MSC: /  /'
}

status=0
if [ "$mutants" -eq 0 ]; then
    for line in "${checks[@]}"; do
        IFS='|' read -r name props flags <<<"$line"
        if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
        run "$name" "$flags" || { status=1; continue; }
        if [ "$errors" = 0 ]; then
            for p in $props; do
                echo "model: $p ok ($name: states=$states, depth=$depth, time=${secs}s)"
            done
        else
            echo "model: $name FAILED (errors=$errors, states=$states, depth=$depth, time=${secs}s); counterexample:"
            trail "$name" "$flags"
            status=1
        fi
    done
else
    for line in "${mutant_list[@]}"; do
        IFS='|' read -r name flags <<<"$line"
        slow=0
        if [[ "$name" == slow:* ]]; then
            name=${name#slow:}
            slow=1
        fi
        if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
        if [ $# -eq 0 ] && [ "$slow" = 1 ]; then continue; fi
        run "$name" "$flags" || { status=1; continue; }
        if [ "$errors" != 0 ] && [ "$errors" != incomplete ] && [ "$errors" != "?" ]; then
            d=$(sed -n 's/.*(at depth \([0-9]*\)).*/\1/p' "$work/$name/pan.out" | head -1)
            why=$(grep -m1 "pan:1:" "$work/$name/pan.out" | sed 's/^pan:1: //; s/ (at depth.*//')
            echo "mutant: $name caught (depth ${d:-?}, states $states, time ${secs}s: $why)"
            [ -z "${MODEL_VERBOSE:-}" ] || trail "$name" "$flags"
        else
            echo "mutant: $name SURVIVED (states $states, time ${secs}s)"
            status=1
        fi
    done
fi
exit "$status"
