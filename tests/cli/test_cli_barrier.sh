#!/usr/bin/env bash
# zkr barrier: set, clear and wait from the shell, their exit statuses,
# and interoperation on one path, both ways, with kazoo's Barrier
# (tests/cli/kazoo_barrier.py) and Apache Curator's DistributedBarrier
# (tests/cli/CuratorBarrier.java): a barrier is its node, whoever set it;
# a wait ends once the node is gone.
#
#   zkr barrier set [--acl open|private] PATH   persistent; 0 also if it stood
#   zkr barrier clear PATH                      0 also if absent
#   zkr barrier wait [-w|--wait|--timeout SECONDS] PATH
#       0 once not standing; 1 when the time passed with it standing
#   usage errors: 64
. "${srcdir:-.}/tests/cli/lib.sh"

kazoo_peer
curator_peer CuratorBarrier.java
CURATOR=() # set once the server runs: "${CURATOR[@]}" PATH ACTION ARGS...
KAZOO=()
AUTH=ops:s3cret

# bar ARGS...: zkr barrier ARGS; its status in $st, its stderr in
# $WORK/bar.err.
bar() {
    st=0
    "$ZKR" barrier "$@" >"$WORK/bar.out" 2>"$WORK/bar.err" || st=$?
}

exists() { "$ZKQ" "$ZKR_SERVER" exists "$1" >/dev/null 2>&1; }
absent() { ! exists "$1"; }

# still_waiting PID LOG: the waiter PID has said "waiting" (a peer) or
# just runs (zkr), and is still there a while later.
still_waiting() {
    sleep "$(scaled 1.5)"
    alive "$1"
}

test_set_clear_wait() {
    local p=/cli/bar/basic/deep t0 took
    bar wait -w 0 "$p"
    expect "wait -w 0 with no node: exit $st, want 0" [ "$st" -eq 0 ]
    bar wait "$p"
    expect "wait (no limit) with no node: exit $st, want 0" [ "$st" -eq 0 ]
    bar set "$p"
    expect "set: exit $st: $(cat "$WORK/bar.err")" [ "$st" -eq 0 ]
    expect "set made no node (or not a persistent one)" exists "$p"
    bar set "$p"
    expect "set of a standing barrier: exit $st, want 0" [ "$st" -eq 0 ]
    bar wait -w 0 "$p"
    expect "wait -w 0 on a standing barrier: exit $st, want 1" [ "$st" -eq 1 ]
    t0=$(now_ms)
    bar wait -w 1 "$p"
    took=$(($(now_ms) - t0))
    expect "wait -w 1 on a standing barrier: exit $st, want 1" [ "$st" -eq 1 ]
    expect "wait -w 1 ended after $took ms" [ "$took" -ge 1000 ]
    bar wait --wait 1 "$p"
    expect "wait --wait 1: exit $st, want 1" [ "$st" -eq 1 ]
    bar wait --timeout 1 "$p"
    expect "wait --timeout 1: exit $st, want 1" [ "$st" -eq 1 ]
    expect "a wait changed the barrier" exists "$p"
    bar clear "$p"
    expect "clear: exit $st: $(cat "$WORK/bar.err")" [ "$st" -eq 0 ]
    expect "clear left the node" absent "$p"
    expect "clear deleted the ancestors" exists /cli/bar/basic
    bar clear "$p"
    expect "clear of no barrier: exit $st, want 0" [ "$st" -eq 0 ]
    # A node with children is no barrier: exit 71, nothing deleted.
    "$ZKQ" "$ZKR_SERVER" create "$p" && "$ZKQ" "$ZKR_SERVER" create "$p/kid"
    bar clear "$p"
    expect "clear of a node with a child: exit $st, want 71" [ "$st" -eq 71 ]
    expect "clear of a node with a child deleted it" exists "$p/kid"
    "$ZKQ" "$ZKR_SERVER" delete "$p/kid" && "$ZKQ" "$ZKR_SERVER" delete "$p"
    bar wait -w 1 "$p"
    expect "wait -w 1 after clear: exit $st, want 0" [ "$st" -eq 0 ]
}

# A zkr wait blocks on a barrier set by another zkr process and ends 0
# once a third clears it.
test_wait_released_by_clear() {
    local p=/cli/bar/release w
    bar set "$p"
    bg "$ZKR" barrier wait "$p"
    w=$!
    expect "zkr wait did not block on a standing barrier" still_waiting "$w"
    bar clear "$p"
    expect "wait not released within 10 s of the clear" \
        wait_for 10 dead "$w"
    wait_status "$w"
    expect "released wait: exit $st, want 0" [ "$st" -eq 0 ]
}

# private_acl ACL: ACL (zkq acl) is --acl private's for ops: ops may do
# everything (31), anyone may read (1), nothing else (zkr(1)).
private_acl() {
    [ "$(grep -c . <<<"$1")" -eq 2 ] &&
        grep -qx 'digest:ops:.*:31' <<<"$1" &&
        grep -qx 'world:anyone:1' <<<"$1"
}

test_acl() {
    local p=/cli/bar/acl acl
    bar set --acl open "$p/open"
    expect "set --acl open: exit $st" [ "$st" -eq 0 ]
    acl=$("$ZKQ" "$ZKR_SERVER" acl "$p/open")
    expect "--acl open: ACL '$acl', want world:anyone:31" \
        [ "$acl" = world:anyone:31 ]
    st=0
    "$ZKR" --auth "$AUTH" barrier set --acl private "$p/priv" \
        2>"$WORK/bar.err" || st=$?
    expect "set --acl private: exit $st: $(cat "$WORK/bar.err")" [ "$st" -eq 0 ]
    acl=$(ZKQ_AUTH=$AUTH "$ZKQ" "$ZKR_SERVER" acl "$p/priv")
    expect "--acl private: ACL '$acl', want digest:ops:...:31 and world:anyone:1" \
        private_acl "$acl"
    st=0
    "$ZKR" --auth "$AUTH" barrier clear "$p/priv" 2>"$WORK/bar.err" || st=$?
    expect "clear of the private barrier: exit $st" [ "$st" -eq 0 ]
    expect "the private barrier stands" absent "$p/priv"
    bar set --acl nobody "$p/x"
    expect "--acl nobody: exit $st, want 64" [ "$st" -eq 64 ]
}

test_usage_errors() {
    local p=/cli/bar/usage
    bar
    expect "no action: exit $st, want 64" [ "$st" -eq 64 ]
    bar set
    expect "set without PATH: exit $st, want 64" [ "$st" -eq 64 ]
    bar clear
    expect "clear without PATH: exit $st, want 64" [ "$st" -eq 64 ]
    bar wait
    expect "wait without PATH: exit $st, want 64" [ "$st" -eq 64 ]
    bar frob "$p"
    expect "unknown action: exit $st, want 64" [ "$st" -eq 64 ]
    bar set relative
    expect "relative path: exit $st, want 64" [ "$st" -eq 64 ]
    bar set /
    expect "the root: exit $st, want 64" [ "$st" -eq 64 ]
    bar set "$p" "$p/2"
    expect "two paths: exit $st, want 64" [ "$st" -eq 64 ]
    bar wait -w abc "$p"
    expect "wait -w abc: exit $st, want 64" [ "$st" -eq 64 ]
    bar wait -w "$p"
    expect "wait -w without SECONDS: exit $st, want 64" [ "$st" -eq 64 ]
    bar wait --frob "$p"
    expect "unknown option: exit $st, want 64" [ "$st" -eq 64 ]
    bar clear -w 1 "$p"
    expect "clear -w: exit $st, want 64" [ "$st" -eq 64 ]
    expect "a usage error made the node" absent "$p"
}

# peer_waits NAME PID OUT: the peer's wait has begun (it said "waiting")
# and it is still waiting a while later.
peer_waits() {
    wait_for 30 lines_ge "$3" 1 waiting && still_waiting "$2"
}

# Both ways with a peer: zkr set, the peer's wait blocks, zkr clear
# releases it (True); the peer sets, zkr's wait blocks, the peer's remove
# releases it (exit 0); zkr's and the peer's timed waits on the other's
# standing barrier say it stands.
interop() { # NAME PEER-ARRAY-NAME SET-ACTION REMOVE-ACTION TRUE-WORD
    local name=$1 set=$3 remove=$4 yes=$5 p=/cli/bar/$1 w
    local -n cmd=$2
    bar set "$p"
    bg "${cmd[@]}" "$p" wait 120 >"$WORK/$name.out" 2>"$WORK/$name.err"
    w=$!
    expect "$name's wait on zkr's barrier did not block: $(tail -3 "$WORK/$name.err")" \
        peer_waits "$name" "$w" "$WORK/$name.out"
    bar clear "$p"
    expect "zkr clear: exit $st" [ "$st" -eq 0 ]
    expect "$name's wait not released within 20 s of zkr's clear" \
        wait_for 20 dead "$w"
    wait_status "$w"
    expect "$name's wait: exit $st, output '$(tail -1 "$WORK/$name.out")', want 0 and $yes" \
        [ "$st:$(tail -1 "$WORK/$name.out")" = "0:$yes" ]
    "${cmd[@]}" "$p" "$set" >/dev/null 2>"$WORK/$name.err"
    expect "$name's $set made no node: $(tail -3 "$WORK/$name.err")" exists "$p"
    bar wait -w 0 "$p"
    expect "zkr wait -w 0 on $name's barrier: exit $st, want 1" [ "$st" -eq 1 ]
    bg "$ZKR" barrier wait "$p"
    w=$!
    expect "zkr wait did not block on $name's barrier" still_waiting "$w"
    "${cmd[@]}" "$p" "$remove" >/dev/null 2>"$WORK/$name.err"
    expect "$name's $remove left the node: $(tail -3 "$WORK/$name.err")" absent "$p"
    expect "zkr wait not released within 10 s of $name's $remove" \
        wait_for 10 dead "$w"
    wait_status "$w"
    expect "zkr wait released by $name: exit $st, want 0" [ "$st" -eq 0 ]
    # The peer's timed wait on zkr's standing barrier: it stands.
    bar set "$p"
    st=0
    "${cmd[@]}" "$p" wait 1 >"$WORK/$name.out" 2>"$WORK/$name.err" || st=$?
    expect "$name's timed wait on zkr's barrier: exit $st, want 1" [ "$st" -eq 1 ]
    bar clear "$p"
    expect "zkr clear: exit $st" [ "$st" -eq 0 ]
    expect "zkr clear left the node" absent "$p"
}
test_kazoo_interop() { interop kazoo KAZOO create remove True; }
test_curator_interop() { interop curator CURATOR set remove true; }

# A closer paused (SIGSTOP) past its session timeout: its barrier goes
# with its session, gate pass goes through; resumed, the closer does not
# set it again on its new session (a setter that came back late must not
# stop the workers anew), and its clear finds nothing to clear.
test_example_gate_paused() {
    local p=/cli/bar/gate-paused gate=$builddir/examples/gate closer passer
    bg "$gate" -s "$ZKR_SERVER" -p "$p" close 2 >"$WORK/gatep.close"
    closer=$!
    expect "gate close did not say closed" wait_for 20 lines_ge "$WORK/gatep.close" 1 closed
    kill -STOP "$closer"
    bg "$gate" -s "$ZKR_SERVER" -p "$p" pass >"$WORK/gatep.pass"
    passer=$!
    expect "gate pass not through within 3 session timeouts of the pause" \
        wait_for 30 dead "$passer"
    wait_status "$passer"
    expect "gate pass: exit $st, want 0" [ "$st" -eq 0 ]
    kill -CONT "$closer"
    expect "the resumed closer did not end within 2 session timeouts" \
        wait_for 20 dead "$closer"
    wait_status "$closer"
    expect "the resumed closer: exit $st, output '$(tr '\n' ' ' <"$WORK/gatep.close")'" \
        [ "$st" -eq 0 ]
    expect "the resumed closer set the barrier again" absent "$p"
}

# examples/gate.c: its barrier is ephemeral (the library's default). A
# closer killed with SIGKILL leaves the gate closed only until its session
# expires (the example's session timeout, 10 s): then a gate pass and a
# kazoo wait on the same path both go through.
test_example_gate() {
    local p=/cli/bar/gate gate=$builddir/examples/gate closer passer kz
    bg "$gate" -s "$ZKR_SERVER" -p "$p" close 600 >"$WORK/gate.close"
    closer=$!
    expect "gate close did not say closed" wait_for 20 lines_ge "$WORK/gate.close" 1 closed
    st=0
    "$gate" -s "$ZKR_SERVER" -p "$p" -t 0 pass >/dev/null 2>&1 || st=$?
    expect "gate pass -t 0 while closed: exit $st, want 2" [ "$st" -eq 2 ]
    bg "$gate" -s "$ZKR_SERVER" -p "$p" pass >"$WORK/gate.pass"
    passer=$!
    bg "${KAZOO[@]}" "$p" wait 300 >"$WORK/gate.kazoo" 2>"$WORK/gate.kazoo.err"
    kz=$!
    expect "kazoo's wait on the gate did not block" peer_waits kazoo "$kz" "$WORK/gate.kazoo"
    expect "gate pass did not wait" still_waiting "$passer"
    kill -KILL "$closer"
    wait "$closer" 2>/dev/null || true
    # The session expires within its timeout (10 s) of the last heartbeat.
    expect "gate pass not through within 3 session timeouts of the closer's death" \
        wait_for 30 dead "$passer"
    wait_status "$passer"
    expect "gate pass: exit $st, output '$(cat "$WORK/gate.pass")'" \
        [ "$st:$(cat "$WORK/gate.pass")" = "0:passed" ]
    expect "kazoo's wait not released by the closer's death" wait_for 10 dead "$kz"
    wait_status "$kz"
    expect "kazoo's wait: exit $st, output '$(tail -1 "$WORK/gate.kazoo")'" \
        [ "$st:$(tail -1 "$WORK/gate.kazoo")" = "0:True" ]
    expect "the dead closer's barrier still stands" absent "$p"
}

start_server
# shellcheck disable=SC2034 # both used through interop's nameref
CURATOR=(java -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -XX:-UsePerfData -cp "$CP" CuratorBarrier "$ZKR_SERVER")
# shellcheck disable=SC2034
KAZOO=("$PY" "$top_srcdir/tests/cli/kazoo_barrier.py" "$ZKR_SERVER")
run_test test_set_clear_wait
run_test test_wait_released_by_clear
run_test test_acl
run_test test_usage_errors
run_test test_kazoo_interop
run_test test_curator_interop
run_test test_example_gate
run_test test_example_gate_paused
done_testing
