#!/usr/bin/env bash
# zkr counter: get, add, set and set --if from the shell, its exit
# statuses, and its interoperation on one path with Apache Curator's
# DistributedAtomicLong (tests/cli/CuratorCounter.java, 8-byte big-endian
# data) and kazoo's Counter (tests/cli/kazoo_counter.py, decimal text, with
# --text): each sees the others' updates, and concurrent adds of all of
# them are each applied once (the total is their number).
. "${srcdir:-.}/tests/cli/lib.sh"

kazoo_peer
curator_peer CuratorCounter.java
CURATOR=() # set once the server runs: "${CURATOR[@]}" PATH ACTION ARGS...
KAZOO=()

# ctr ARGS...: zkr counter ARGS; its output in $out, its status in $st.
ctr() {
    st=0
    out=$("$ZKR" counter "$@" 2>"$WORK/ctr.err") || st=$?
}

test_get_add_set() {
    local p=/cli/ctr/basic
    ctr get "$p"
    expect "get of no node: '$out' ($st), want 0" [ "$st:$out" = 0:0 ]
    ctr add "$p" 5
    expect "add 5: '$out' ($st)" [ "$st:$out" = 0:5 ]
    ctr add "$p" -7
    expect "add -7: '$out' ($st)" [ "$out" = -2 ]
    ctr set --if 3 "$p" 9
    expect "set --if 3 on -2: '$out' ($st), want -2 and 1" [ "$st:$out" = 1:-2 ]
    ctr set --if -2 "$p" 9
    expect "set --if -2: '$out' ($st)" [ "$st:$out" = 0:9 ]
    ctr set "$p" -9223372036854775808
    expect "set INT64_MIN: '$out' ($st)" [ "$out" = -9223372036854775808 ]
    ctr add "$p" -1
    expect "add past INT64_MIN: $st, want 64" [ "$st" -eq 64 ]
    ctr get "$p"
    expect "unchanged after a refused add: '$out'" [ "$out" = -9223372036854775808 ]
    # 8 bytes, big-endian: 0x80 then seven zero bytes
    expect "not Curator's encoding: $("$ZKQ" "$ZKR_SERVER" get "$p" | od -An -tx1 | tr -d ' \n')" \
        [ "$("$ZKQ" "$ZKR_SERVER" get "$p" | od -An -tx1 | tr -d ' \n')" = 8000000000000000 ]
}

test_usage_and_data_errors() {
    local p=/cli/ctr/bad
    ctr add "$p" 1x
    expect "add 1x: $st, want 64" [ "$st" -eq 64 ]
    ctr add "$p" 99999999999999999999
    expect "add beyond int64: $st, want 64" [ "$st" -eq 64 ]
    ctr get "$p" 1
    expect "get with N: $st, want 64" [ "$st" -eq 64 ]
    ctr add --if 1 "$p" 1
    expect "add --if: $st, want 64" [ "$st" -eq 64 ]
    ctr frob "$p"
    expect "unknown action: $st, want 64" [ "$st" -eq 64 ]
    ctr get relative
    expect "relative path: $st, want 64" [ "$st" -eq 64 ]
    ctr add --text "$p" 12
    expect "--text add: '$out' ($st)" [ "$out" = 12 ]
    ctr get "$p"
    expect "text data read as Curator's: $st, want 65" [ "$st" -eq 65 ]
    expect "no hint at --text: $(cat "$WORK/ctr.err")" grep -q -- --text "$WORK/ctr.err"
    ctr get --text "$p"
    expect "--text get: '$out'" [ "$out" = 12 ]
}

test_curator_interop() {
    local p=/cli/ctr/curator v
    ctr add "$p" 5
    v=$("${CURATOR[@]}" "$p" get 2>"$WORK/cur.err")
    expect "Curator reads zkr's 5 as '$v': $(head -3 "$WORK/cur.err")" [ "$v" = 5 ]
    v=$("${CURATOR[@]}" "$p" add 3 2>"$WORK/cur.err")
    expect "Curator add 3: '$v'" [ "$v" = 8 ]
    ctr get "$p"
    expect "zkr reads Curator's 8 as '$out' ($st)" [ "$out" = 8 ]
}

test_kazoo_interop() {
    local p=/cli/ctr/kazoo v
    ctr add --text "$p" 5
    v=$("${KAZOO[@]}" "$p" get 2>"$WORK/kz.err")
    expect "kazoo reads zkr's 5 as '$v': $(tail -3 "$WORK/kz.err")" [ "$v" = 5 ]
    v=$("${KAZOO[@]}" "$p" add 3 2>"$WORK/kz.err")
    expect "kazoo add 3: '$v'" [ "$v" = 8 ]
    ctr get --text "$p"
    expect "zkr reads kazoo's 8 as '$out' ($st)" [ "$out" = 8 ]
}

# zkr_adds N PATH [--text]: N adds of 1 by separate zkr processes; a
# failure is logged to $WORK/adds.
zkr_adds() {
    local i
    for ((i = 0; i < $1; i++)); do
        "$ZKR" counter add ${3:+"$3"} "$2" 1 >/dev/null 2>>"$WORK/adds" ||
            echo "zkr add failed" >>"$WORK/adds"
    done
}

# Two zkr loops and a peer's two threads add 1 at once on one path: the
# total counts every add once.
mixed() { # PATH PEER-ARRAY-NAME [--text]
    local p=$1 n=${ZKR_COUNTER_MIX:-25} peer z1 z2 v
    local -n cmd=$2
    : >"$WORK/adds"
    bg "${cmd[@]}" "$p" loop 2 "$n"
    peer=$!
    zkr_adds "$n" "$p" "${3:-}" &
    z1=$!
    zkr_adds "$n" "$p" "${3:-}" &
    z2=$!
    wait "$z1" "$z2"
    wait_status "$peer"
    expect "the peer's loop exit $st" [ "$st" -eq 0 ]
    expect "zkr adds failed: $(head -3 "$WORK/adds")" [ ! -s "$WORK/adds" ]
    ctr get ${3:+"$3"} "$p"
    echo "# $((4 * n)) adds, total $out"
    expect "total $out after $((4 * n)) adds of 1" [ "$out" = $((4 * n)) ]
}
test_mixed_with_curator() { mixed /cli/ctr/mix-curator CURATOR; }
test_mixed_with_kazoo() { mixed /cli/ctr/mix-kazoo KAZOO --text; }

# examples/shards.c: three workers share out 30 shards, each to exactly
# one of them, and count them on PATH/done.
test_example_shards() {
    local p=/cli/ctr/shards i pids=()
    for i in 1 2 3; do
        bg "$builddir/examples/shards" -s "$ZKR_SERVER" -p "$p" -n 30 >"$WORK/shards.$i"
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait_status "$i"
        expect "a worker exit $st" [ "$st" -eq 0 ]
    done
    expect "shards given twice: $(sort "$WORK"/shards.* | uniq -d | head -3)" \
        [ "$(sort "$WORK"/shards.* | uniq -d | wc -l)" -eq 0 ]
    expect "shards not 0..29" [ "$(sort -u "$WORK"/shards.* | sed 's/shard //' | sort -n | tr '\n' ' ')" = "$(seq 0 29 | tr '\n' ' ')" ]
    ctr get "$p/done"
    expect "done count '$out', want 30" [ "$out" = 30 ]
}

start_server
CURATOR=(java -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -XX:-UsePerfData -cp "$CP" CuratorCounter "$ZKR_SERVER")
KAZOO=("$PY" "$top_srcdir/tests/cli/kazoo_counter.py" "$ZKR_SERVER")
run_test test_get_add_set
run_test test_usage_and_data_errors
run_test test_curator_interop
run_test test_kazoo_interop
run_test test_mixed_with_curator
run_test test_mixed_with_kazoo
run_test test_example_shards
done_testing
