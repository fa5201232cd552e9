#!/usr/bin/env bash
# zkr lock PATH PATH...: several locks all or none, in one order whatever
# order they are named in (no deadlock), one --wait for the set, the
# members given back when the set cannot be had, $ZKR_FENCES, a member
# deleted by an operator ending the command; and on one path set with
# Apache Curator's InterProcessMultiLock (tests/cli/CuratorMultiLock.java)
# and kazoo's Lock (tests/cli/kazoo_lock.py), each respecting the other.
. "${srcdir:-.}/tests/cli/lib.sh"

kazoo_peer
curator_peer CuratorMultiLock.java
CURATOR=() # set once the server runs: "${CURATOR[@]}" hold|try ARG PATH...
KAZOO=()   # "${KAZOO[@]}" PATH try|hold ARG

# Loops of `zkr lock a b` and `zkr lock b a` (the opposite order) and of
# `zkr lock a` alone, each around a non-atomic read-modify-write of a
# counter per path: no deadlock (every run is granted within its --wait),
# both counters exact, and each path's tokens strictly increasing in grant
# order.
test_opposite_orders_exclusion() {
    local d=$WORK/ml rounds=4 pids=() i
    mkdir -p "$d"
    echo 0 > "$d/a"
    echo 0 > "$d/b"
    : > "$d/fences"
    cat > "$d/both.sh" <<'EOS'
# $1: the directory; $2 $3: the paths' names in the order zkr was given
set -- "$1" "$2" "$3" $ZKR_FENCES
for n in "$2" "$3"; do
    v=$(cat "$1/$n"); sleep 0.01; echo $((v + 1)) > "$1/$n"
done
echo "$2 $4" >> "$1/fences"
echo "$3 $5" >> "$1/fences"
EOS
    cat > "$d/one.sh" <<'EOS'
v=$(cat "$1/a"); sleep 0.01; echo $((v + 1)) > "$1/a"
echo "a $ZKR_FENCE" >> "$1/fences"
EOS
    for i in 1 2; do
        (for _ in $(seq 1 $rounds); do
            "$ZKR" lock -w 120 /cli/ml/a /cli/ml/b -- sh "$d/both.sh" "$d" a b || exit 1
        done) &
        pids+=($!)
        (for _ in $(seq 1 $rounds); do
            "$ZKR" lock -w 120 /cli/ml/b /cli/ml/a -- sh "$d/both.sh" "$d" b a || exit 1
        done) &
        pids+=($!)
        (for _ in $(seq 1 $rounds); do
            "$ZKR" lock -w 120 /cli/ml/a -- sh "$d/one.sh" "$d" || exit 1
        done) &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        expect "a loop failed (deadlock or error)" wait "$i"
    done
    expect "counter a is $(cat "$d/a"), not $((6 * rounds))" \
        [ "$(cat "$d/a")" -eq $((6 * rounds)) ]
    expect "counter b is $(cat "$d/b"), not $((4 * rounds))" \
        [ "$(cat "$d/b")" -eq $((4 * rounds)) ]
    for i in a b; do
        expect "tokens of $i not strictly increasing: $(grep "^$i " "$d/fences" | tr '\n' ' ')" \
            awk -v p="$i" '$1 == p { if (n++ && $2 <= prev) exit 1; prev = $2 }' "$d/fences"
    done
    expect "$(wc -l < "$d/fences") grants recorded" \
        [ "$(wc -l < "$d/fences")" -eq $((10 * rounds)) ]
    expect "nodes left behind" [ "$(zk_count /cli/ml/a)$(zk_count /cli/ml/b)" = 00 ]
}

# hold PATH...: `zkr lock PATH... ` holds until $WORK/go exists.
hold() {
    rm -f "$WORK/go" "$WORK/held"
    bg "$ZKR" lock "$@" -- sh -c \
        "touch '$WORK/held'; while [ ! -e '$WORK/go' ]; do sleep 0.05; done"
    holder=$!
    wait_for 20 test -e "$WORK/held" || fail "the holder was not granted"
}

letgo() {
    touch "$WORK/go"
    wait_status "$holder"
    expect "holder exit $st" [ "$st" -eq 0 ]
}

# With b held by another, a try (-n) and a wait (-w) of a and b fail with
# -E's code, and a, taken first, is given back each time.
test_wait_and_rollback() {
    local st t0 t1
    hold /cli/ml2/b
    st=0
    "$ZKR" lock -n -E 3 /cli/ml2/a /cli/ml2/b -- true 2>"$WORK/err" || st=$?
    expect "-n: exit $st, want 3: $(cat "$WORK/err")" [ "$st" -eq 3 ]
    expect "a kept a node after -n" [ "$(zk_count /cli/ml2/a)" -eq 0 ]
    t0=$(now_ms)
    st=0
    "$ZKR" lock -w 1 /cli/ml2/a /cli/ml2/b -- true 2>"$WORK/err" || st=$?
    t1=$(now_ms)
    expect "-w 1: exit $st, want 1: $(cat "$WORK/err")" [ "$st" -eq 1 ]
    expect "-w 1 gave up after $((t1 - t0)) ms" [ $((t1 - t0)) -ge 1000 ]
    expect "a kept a node after -w" [ "$(zk_count /cli/ml2/a)" -eq 0 ]
    expect "b has $(zk_count /cli/ml2/b) nodes, want the holder's" \
        [ "$(zk_count /cli/ml2/b)" -eq 1 ]
    letgo
    st=0
    "$ZKR" lock -n /cli/ml2/a /cli/ml2/b -- true || st=$?
    expect "-n once free: exit $st" [ "$st" -eq 0 ]
}

test_operands_and_fences() {
    local out st
    st=0
    "$ZKR" lock /cli/ml3/a /cli/ml3/a -- true 2>"$WORK/err" || st=$?
    expect "a PATH twice: exit $st, want 64" [ "$st" -eq 64 ]
    st=0
    "$ZKR" lock /cli/ml3/a relative -- true 2>"$WORK/err" || st=$?
    expect "a second PATH not absolute is the COMMAND: exit $st, want 127" \
        [ "$st" -eq 127 ]
    # One PATH and an absolute COMMAND without "--": as before.
    out=$("$ZKR" lock /cli/ml3/a /bin/echo hi)
    expect "zkr lock PATH /bin/echo hi printed '$out'" [ "$out" = hi ]
    out=$("$ZKR" lock /cli/ml3/a /bin/sh -c 'echo "[$ZKR_FENCES]"')
    expect "zkr lock PATH /bin/sh -c: '$out'" [ "$out" = "[]" ]
    # A wrapper of this machine before "--" is the COMMAND, not a PATH.
    out=$("$ZKR" lock /cli/ml3/a /usr/bin/env -- sh -c 'echo "[$ZKR_FENCES]"')
    expect "zkr lock PATH /usr/bin/env -- sh: '$out'" [ "$out" = "[]" ]
    # Several: the first PATH's variables, and every token in the order given.
    out=$("$ZKR" lock /cli/ml3/b /cli/ml3/a -- sh -c 'echo "$ZKR_LOCK_PATH $ZKR_FENCE $ZKR_FENCES"')
    set -- $out
    expect "variables '$out'" test "$#" -eq 4 -a "$1" = /cli/ml3/b -a "$2" = "$3" -a "$3" != "$4"
    out=$("$ZKR" lock -c 'echo $ZKR_FENCES' /cli/ml3/a /cli/ml3/b /cli/ml3/c)
    set -- $out
    expect "-c STRING PATH PATH PATH: '$out'" [ $# -eq 3 ]
}

# An operator deletes the node of one member while the command runs: the
# command is ended, zkr exits --lost-exit-code (4), and the other member is
# given back.
test_member_deleted_while_running() {
    local st node
    rm -f "$WORK/started"
    bg "$ZKR" lock /cli/ml4/a /cli/ml4/b -- sh -c "touch '$WORK/started'; exec sleep 60"
    local pid=$!
    wait_for 20 test -e "$WORK/started" || fail "not started"
    node=$(zk_ls /cli/ml4/b | head -1)
    "$ZKQ" "$ZKR_SERVER" delete "/cli/ml4/b/$node" >/dev/null
    wait_for 30 dead "$pid" || fail "zkr still runs after its b node was deleted"
    wait_status "$pid"
    expect "exit $st, want 4" [ "$st" -eq 4 ]
    expect "a kept its node" [ "$(zk_count /cli/ml4/a)" -eq 0 ]
}

test_curator_interop() {
    local v st
    # Curator's multi-lock holds b and a (its own order): zkr's set waits.
    rm -f "$WORK/cgo"
    bg "${CURATOR[@]}" hold "$WORK/cgo" /cli/ml5/b /cli/ml5/a > "$WORK/cur.out" 2>"$WORK/cur.err"
    local cur=$!
    wait_for 60 lines_ge "$WORK/cur.out" 1 held || fail "Curator did not hold: $(tail -3 "$WORK/cur.err")"
    st=0
    "$ZKR" lock -n /cli/ml5/a /cli/ml5/b -- true 2>/dev/null || st=$?
    expect "zkr got a set Curator holds: exit $st" [ "$st" -eq 1 ]
    st=0
    "$ZKR" lock -n /cli/ml5/a -- true 2>/dev/null || st=$?
    expect "zkr got a path of Curator's set: exit $st" [ "$st" -eq 1 ]
    touch "$WORK/cgo"
    wait "$cur"
    st=0
    "$ZKR" lock -n /cli/ml5/a /cli/ml5/b -- true || st=$?
    expect "zkr after Curator released: exit $st" [ "$st" -eq 0 ]
    # zkr holds the set: Curator's multi-lock and its mutex wait.
    hold /cli/ml5/a /cli/ml5/b
    v=$("${CURATOR[@]}" try 1000 /cli/ml5/a /cli/ml5/b 2>"$WORK/cur.err")
    expect "Curator's multi-lock got zkr's set: '$v' $(tail -2 "$WORK/cur.err")" [ "$v" = 1 ]
    v=$("${CURATOR[@]}" try 1000 /cli/ml5/b 2>"$WORK/cur.err")
    expect "Curator's mutex got a path of zkr's set: '$v'" [ "$v" = 1 ]
    letgo
    v=$("${CURATOR[@]}" try 5000 /cli/ml5/a /cli/ml5/b 2>"$WORK/cur.err")
    expect "Curator after zkr released: '$v'" [ "$v" = 0 ]
}

test_kazoo_interop() {
    local v st
    hold /cli/ml6/a /cli/ml6/b
    v=$("${KAZOO[@]}" /cli/ml6/b try 1 2>"$WORK/kz.err")
    expect "kazoo got a path of zkr's set: '$v' $(tail -2 "$WORK/kz.err")" [ "$v" = 1 ]
    letgo
    rm -f "$WORK/kgo"
    bg "${KAZOO[@]}" /cli/ml6/b hold "$WORK/kgo" > "$WORK/kz.out" 2>"$WORK/kz.err"
    local kz=$!
    wait_for 30 lines_ge "$WORK/kz.out" 1 held || fail "kazoo did not hold: $(tail -3 "$WORK/kz.err")"
    st=0
    "$ZKR" lock -w 1 /cli/ml6/a /cli/ml6/b -- true 2>/dev/null || st=$?
    expect "zkr got a set with kazoo holding b: exit $st" [ "$st" -eq 1 ]
    expect "a kept a node" [ "$(zk_count /cli/ml6/a)" -eq 0 ]
    touch "$WORK/kgo"
    wait "$kz"
    st=0
    "$ZKR" lock -n /cli/ml6/a /cli/ml6/b -- true || st=$?
    expect "zkr after kazoo released: exit $st" [ "$st" -eq 0 ]
}

# examples/transfer.c: transfers both ways between two accounts at once
# (each locks both, named in its own order): each ends 0, and the
# balances are exact.
test_example_transfer() {
    local d=$WORK/accounts pids=() i
    mkdir -p "$d"
    echo 100 > "$d/a"
    echo 100 > "$d/b"
    for i in 1 2 3 4; do
        bg "$builddir/examples/transfer" -s "$ZKR_SERVER" -p /cli/ml7 -t 60 "$d" a b 3 >/dev/null
        pids+=($!)
        bg "$builddir/examples/transfer" -s "$ZKR_SERVER" -p /cli/ml7 -t 60 "$d" b a 5 >/dev/null
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait_status "$i"
        expect "a transfer exited $st" [ "$st" -eq 0 ]
    done
    expect "balances $(cat "$d/a") $(cat "$d/b"), want 108 92" \
        [ "$(cat "$d/a") $(cat "$d/b")" = "108 92" ]
}

start_server
CURATOR=(java -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -XX:-UsePerfData -cp "$CP" CuratorMultiLock "$ZKR_SERVER")
KAZOO=("$PY" "$top_srcdir/tests/cli/kazoo_lock.py" "$ZKR_SERVER")
run_test test_opposite_orders_exclusion
run_test test_wait_and_rollback
run_test test_operands_and_fences
run_test test_member_deleted_while_running
run_test test_curator_interop
run_test test_kazoo_interop
run_test test_example_transfer
done_testing
