#!/usr/bin/env bash
# zkr lock --read/--write against Apache Curator's InterProcessReadWriteLock
# on one path (tests/cli/CuratorRw.java): readers share across the two
# libraries, a writer of either excludes the other's readers and writers,
# and a random mix of Curator and zkr readers and writers never overlaps
# a writer with anyone.
. "${srcdir:-.}/tests/cli/lib.sh"

curator_peer CuratorRw.java

# The Curator peer: "${CURATOR[@]}" PATH ACTION ARGS... (set once the
# server runs).
CURATOR=()

# zkr_try MODE PATH: exit status of a non-blocking zkr lock --MODE.
zkr_try() {
    local rc=0
    "$ZKR" lock -n "--$1" "$2" true 2>/dev/null || rc=$?
    echo "$rc"
}

# A Curator holder of MODE at PATH, held until curator_drop.
curator_hold() {
    rm -f "$WORK/drop" "$WORK/hold.out"
    bg "${CURATOR[@]}" "$2" hold "$1" "$WORK/drop" > "$WORK/hold.out" 2>"$WORK/hold.err"
    HOLD=$!
    wait_for 30 grep -q held "$WORK/hold.out"
}
curator_drop() {
    touch "$WORK/drop"
    wait_status "$HOLD"
}

test_curator_reader_holds() {
    local p=/cli/cur-r
    expect "Curator reader not granted: $(cat "$WORK/hold.err" 2>/dev/null)" curator_hold read "$p"
    expect "zkr reader did not share with a Curator reader" [ "$(zkr_try read "$p")" -eq 0 ]
    expect "zkr writer granted beside a Curator reader" [ "$(zkr_try write "$p")" -eq 1 ]
    curator_drop
    expect "Curator reader exit $st" [ "$st" -eq 0 ]
}

test_curator_writer_holds() {
    local p=/cli/cur-w
    expect "Curator writer not granted: $(cat "$WORK/hold.err" 2>/dev/null)" curator_hold write "$p"
    expect "zkr reader granted beside a Curator writer" [ "$(zkr_try read "$p")" -eq 1 ]
    expect "zkr writer granted beside a Curator writer" [ "$(zkr_try write "$p")" -eq 1 ]
    curator_drop
}

# zkr holds MODE; Curator tries both sides: expected "read R\nwrite W".
zkr_holds() {
    local mode=$1 want=$2 p=/cli/cur-z-$1 h out
    : > "$WORK/log"
    rm -f "$WORK/go"
    bg "$ZKR" lock "--$mode" "$p" sh -c "echo held >> '$WORK/log'; while [ ! -e '$WORK/go' ]; do sleep 0.05; done"
    h=$!
    expect "zkr $mode not granted" wait_for 10 lines_ge "$WORK/log" 1 held
    out=$("${CURATOR[@]}" "$p" try read write 2>&1 | tr '\n' ' ')
    expect "Curator beside a zkr $mode holder: '$out', want '$want'" [ "$out" = "$want" ]
    touch "$WORK/go"
    wait_status "$h"
    expect "zkr $mode exit $st" [ "$st" -eq 0 ]
}
test_zkr_reader_holds() { zkr_holds read "read 0 write 1 "; }
test_zkr_writer_holds() { zkr_holds write "read 1 write 1 "; }

# Two Curator clients and two zkr loops take read or write at random on
# one path, logging each grant and release to one file in order: no
# writer's interval may overlap any other.
zkr_loop() { # NAME ITERATIONS
    local i mode tag
    for ((i = 0; i < $2; i++)); do
        if ((RANDOM % 2)); then mode=write tag=W; else mode=read tag=R; fi
        "$ZKR" lock "--$mode" /cli/cur-mix sh -c \
            "echo 'start $tag $1' >> '$WORK/mix'; sleep 0.0\$((RANDOM % 5 + 1)); echo 'end $tag $1' >> '$WORK/mix'" ||
            echo "error $1 $?" >> "$WORK/mix"
    done
}

# Replays the log; prints every violation (and the number of times a
# reader started while another library's reader held).
check_mix() {
    awk '
        $1 == "error" { print "zkr failed: " $0; bad++ }
        $1 == "start" {
            for (k in open) {
                if ($2 == "W" || open[k] == "W") {
                    print "line " NR ": " $3 " (" $2 ") started while " k " (" open[k] ") held"
                    bad++
                }
                if ($2 == "R" && open[k] == "R" && substr(k, 1, 3) != substr($3, 1, 3))
                    shared++
            }
            open[$3] = $2
            n[$2]++
        }
        $1 == "end" { delete open[$3] }
        END { printf "# %d reads, %d writes, %d cross-library shares\n", n["R"], n["W"], shared }
    ' "$WORK/mix"
}

test_random_mix() {
    local iters=${ZKR_CURATOR_MIX:-15} cj z1 z2 out
    : > "$WORK/mix"
    bg "${CURATOR[@]}" /cli/cur-mix mix 2 "$iters" "$WORK/mix"
    cj=$!
    zkr_loop zkr-1 "$iters" &
    z1=$!
    zkr_loop zkr-2 "$iters" &
    z2=$!
    wait "$z1" "$z2"
    wait_status "$cj"
    expect "Curator mix exit $st" [ "$st" -eq 0 ]
    out=$(check_mix)
    echo "$out" | grep '^#'
    expect "$(echo "$out" | grep -v '^#' | head -n 5)" [ -z "$(echo "$out" | grep -v '^#')" ]
    expect "not every grant logged: $(grep -c '^start' "$WORK/mix")" \
        [ "$(grep -c '^start' "$WORK/mix")" -eq $((4 * iters)) ]
}

start_server
CURATOR=(java -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -XX:-UsePerfData -cp "$CP" CuratorRw "$ZKR_SERVER")
run_test test_curator_reader_holds
run_test test_curator_writer_holds
run_test test_zkr_reader_holds
run_test test_zkr_writer_holds
run_test test_random_mix
done_testing
