#!/usr/bin/env bash
# zkr barrier enter: the double barrier from the shell. N participants
# enter; each runs its COMMAND once N have entered (never before the Nth
# arrives), then leaves; with --wait-leave it exits once every participant
# has left. Exit statuses (zkr(1)), signals, a session lost during the
# phase, and interoperation on one path with kazoo's DoubleBarrier
# (tests/cli/kazoo_dbarrier.py) and Apache Curator's
# DistributedDoubleBarrier (tests/cli/CuratorDoubleBarrier.java).
#
#   zkr barrier enter [options] N PATH [options] [--] COMMAND [ARG...]
#       the command's status; 1 (-E) not entered within -w, the command
#       not run; usage errors: 64
#
# Oracle: every participant stamps CLOCK_MONOTONIC (ms) when its phase
# starts and ends: zkr's commands (the phase script below), kazoo and
# Curator (their helpers print them), and the test itself, before it starts
# the last participant. No phase may start before the last participant
# arrived. Every wait is bounded by multiples of the session timeout.
. "${srcdir:-.}/tests/cli/lib.sh"

kazoo_peer
curator_peer CuratorDoubleBarrier.java
CURATOR=() # set once the server runs: "${CURATOR[@]}" PATH N SECONDS TIMEOUT
KAZOO=()   # "${KAZOO[@]}" PATH N SECONDS
AUTH=ops:s3cret
# zkr's session timeout (its default, and the peers'), in seconds.
ZKS=10

# mono_ms: CLOCK_MONOTONIC in ms, the clock of every stamp.
mono_ms() { "$PY" -c 'import time; print(time.monotonic_ns() // 1000000)'; }

# $WORK/phase LOG NAME SECONDS [STATUS]: a zkr participant's command: logs
# "NAME start MS", sleeps, logs "NAME end MS", exits STATUS (default 0).
# $WORK/stamped LOG NAME COMMAND...: runs COMMAND (zkr), then logs
# "NAME exit STATUS MS" and exits with its status.
cat >"$WORK/phase" <<EOF
#!/bin/sh
stamp() { "$PY" -c 'import time; print(time.monotonic_ns() // 1000000)'; }
echo "\$2 start \$(stamp)" >>"\$1"
sleep "\$3"
echo "\$2 end \$(stamp)" >>"\$1"
exit "\${4:-0}"
EOF
cat >"$WORK/stamped" <<EOF
#!/bin/sh
log=\$1 name=\$2
shift 2
${ZKR_PDEATH[*]} "\$@"
st=\$?
echo "\$name exit \$st \$("$PY" -c 'import time; print(time.monotonic_ns() // 1000000)')" >>"\$log"
exit \$st
EOF
chmod +x "$WORK/phase" "$WORK/stamped"

# stamp_of LOG NAME WORD: the time of NAME's WORD line (phase, stamped).
stamp_of() { awk -v n="$2" -v w="$3" '$1 == n && $2 == w { print $NF }' "$1"; }
# peer_stamp OUT WORD: the time of a peer's WORD line (its helper's output).
peer_stamp() { awk -v w="$2" '$1 == w { print $2 }' "$1"; }

# The participants of PATH: its children but "ready".
parts() { zk_ls "$1" 2>/dev/null | grep -vcx ready || true; }
parts_eq() { [ "$(parts "$1")" -eq "$2" ]; }
exists() { "$ZKQ" "$ZKR_SERVER" exists "$1" >/dev/null 2>&1; }
absent() { ! exists "$1"; }

# ent ARGS...: zkr barrier enter ARGS in the foreground; status in $st,
# stderr in $WORK/ent.err.
ent() {
    st=0
    "$ZKR" barrier enter "$@" >"$WORK/ent.out" 2>"$WORK/ent.err" || st=$?
}

# ended_with PID STATUS NAME: PID ends within 2 session timeouts, with
# STATUS. One that does not is left to the test's cleanup (killed).
ended_with() {
    if ! wait_for $((2 * ZKS)) dead "$1"; then
        fail "$3 did not end within 2 session timeouts"
        return
    fi
    wait_status "$1"
    expect "$3: exit $st, want $2" [ "$st" -eq "$2" ]
}

# at_or_after WHAT STAMP BOUND WHY: STAMP and BOUND exist, and STAMP is
# not before BOUND (the time of WHY).
not_before() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" -ge "$2" ]; }
at_or_after() {
    expect "$1 at ${2:-never}, before $4 at ${3:-never}" not_before "$2" "$3"
}

# Three zkr participants of N=3: the first two wait; no command starts
# until the third has arrived; then each runs and leaves, each exits with
# its command's status, and no node is left.
test_phase_starts_with_the_third() {
    local p=/cli/dbar/three log=$WORK/three.log a b c t3 n
    bg "$ZKR" barrier enter 3 "$p" -- "$WORK/phase" "$log" a 1
    a=$!
    bg "$ZKR" barrier enter 3 "$p" -- "$WORK/phase" "$log" b 1 3
    b=$!
    expect "the first two did not enter their nodes within 2 session timeouts" \
        wait_for $((2 * ZKS)) parts_eq "$p" 2
    sleep "$(scaled 1.5)"
    expect "a command started with 2 of 3: $(cat "$log" 2>/dev/null)" [ ! -e "$log" ]
    expect "a participant ended with 2 of 3" alive "$a"
    expect "a participant ended with 2 of 3" alive "$b"
    t3=$(mono_ms)
    bg "$ZKR" barrier enter 3 "$p" -- "$WORK/phase" "$log" c 1
    c=$!
    expect "the commands did not all start within 2 session timeouts of the third" \
        wait_for $((2 * ZKS)) lines_ge "$log" 3 start
    for n in a b c; do
        at_or_after "$n's phase started" "$(stamp_of "$log" $n start)" "$t3" \
            "the third's arrival"
    done
    ended_with "$a" 0 "participant a"
    ended_with "$b" 3 "participant b (its command exits 3)"
    ended_with "$c" 0 "participant c"
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

# 2 of 3 with -w 2: each enter gives up after 2 s with -E's code (default
# 1), its command never runs, and its node is deleted. -w before N or
# after PATH; -w 0 looks once.
test_enter_times_out() {
    local p=/cli/dbar/timeout log=$WORK/timeout.log a b t0 took
    t0=$(now_ms)
    bg "$ZKR" -v barrier enter -w 2 3 "$p" -- "$WORK/phase" "$log" a 0
    a=$!
    bg "$ZKR" barrier enter 3 "$p" --wait 2 -E 7 -- "$WORK/phase" "$log" b 0
    b=$!
    ended_with "$a" 1 "enter -w 2 with 2 of 3"
    ended_with "$b" 7 "enter --wait 2 -E 7 with 2 of 3"
    took=$(($(now_ms) - t0))
    expect "the enters ended after $took ms, before -w's 2 s" [ "$took" -ge 2000 ]
    expect "a timed-out participant ran its command: $(cat "$log" 2>/dev/null)" [ ! -e "$log" ]
    expect "nodes left by timed-out enters: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
    ent -w 0 2 "$p" -- "$WORK/phase" "$log" c 0
    expect "enter -w 0 alone of 2: exit $st, want 1" [ "$st" -eq 1 ]
    ent --timeout 0.5 2 "$p" -- "$WORK/phase" "$log" d 0
    expect "enter --timeout 0.5 alone of 2: exit $st, want 1" [ "$st" -eq 1 ]
    expect "a timed-out participant ran its command: $(cat "$log" 2>/dev/null)" [ ! -e "$log" ]
    expect "nodes left by timed-out enters: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
    # N=1: enters at once, even with -w 0.
    ent -w 0 1 "$p" -- "$WORK/phase" "$log" e 0 5
    expect "enter -w 0 1: exit $st, want the command's 5: $(cat "$WORK/ent.err")" [ "$st" -eq 5 ]
    expect "nodes left after N=1: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

# --wait-leave: a participant whose command ends early exits only after
# the slowest participant's command has ended; one without it exits at
# once (its node deleted, the others still in their phase).
test_wait_leave() {
    local p=/cli/dbar/leave log=$WORK/leave.log slow=$((ZKS / 2)) s w q end
    bg "$WORK/stamped" "$log" s "$ZKR" barrier enter 3 "$p" -- "$WORK/phase" "$log" s "$slow"
    s=$!
    bg "$WORK/stamped" "$log" w "$ZKR" barrier enter --wait-leave 3 "$p" -- "$WORK/phase" "$log" w 0
    w=$!
    bg "$WORK/stamped" "$log" q "$ZKR" barrier enter 3 "$p" -- "$WORK/phase" "$log" q 0
    q=$!
    ended_with "$q" 0 "the participant without --wait-leave"
    ended_with "$s" 0 "the slow participant"
    ended_with "$w" 0 "the participant with --wait-leave"
    end=$(stamp_of "$log" s end)
    at_or_after "--wait-leave's participant exited" "$(stamp_of "$log" w exit)" \
        "$end" "the slow command's end"
    at_or_after "the slow command's end" "$end" "$(stamp_of "$log" q exit)" \
        "the exit of the participant without --wait-leave"
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

# --wait-leave=SECONDS with a participant still in its phase after that
# time: -E's code (default 1) when the command exited 0, the command's
# status otherwise; its node is deleted either way.
test_wait_leave_timeout() {
    local p=/cli/dbar/leave-to log=$WORK/leave-to.log s t1 t2
    bg "$ZKR" barrier enter 3 "$p" -- sh -c \
        "echo s start >>'$log'; while [ ! -e '$WORK/go' ]; do sleep 0.1; done"
    s=$!
    bg "$ZKR" barrier enter --wait-leave=1 3 "$p" -- "$WORK/phase" "$log" t1 0
    t1=$!
    bg "$ZKR" barrier enter 3 "$p" --wait-leave=1 -E 9 -- "$WORK/phase" "$log" t2 0 3
    t2=$!
    ended_with "$t1" 1 "--wait-leave=1 with a participant still in"
    ended_with "$t2" 3 "--wait-leave=1 -E 9 after a command that exits 3"
    expect "the slow participant ended" alive "$s"
    expect "nodes of the participants that left: $(zk_ls "$p" | tr '\n' ' ')" parts_eq "$p" 1
    touch "$WORK/go"
    ended_with "$s" 0 "the slow participant"
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

test_usage_errors() {
    local p=/cli/dbar/usage
    for args in "0 $p true" "abc $p true" "-1 $p true" "1.5 $p true" \
        "3 $p" "3 $p --" "3" "" "3 relative true" "3 / true" \
        "--wait-leave=abc 3 $p true" "-w abc 3 $p true" "-n 3 $p true" \
        "--on-suspend term 3 $p true" "--lost-exit-code 3 3 $p true" \
        "--acl nobody 3 $p true" "--frob 3 $p true" "3 $p --frob true" \
        "-c true 3 $p true"; do
        # shellcheck disable=SC2086 # the words of each case
        ent $args
        expect "enter $args: exit $st, want 64" [ "$st" -eq 64 ]
    done
    st=0
    "$ZKR" lock --wait-leave "$p" true 2>/dev/null || st=$?
    expect "lock --wait-leave: exit $st, want 64" [ "$st" -eq 64 ]
    ent 3 "$p" -- /nonexistent/cmd
    expect "a COMMAND not found: exit $st, want 127" [ "$st" -eq 127 ]
    expect "a usage error made a node" absent "$p"
    ent --help
    expect "enter --help: exit $st" [ "$st" -eq 0 ]
    for opt in --wait --timeout --conflict-exit-code --wait-leave --id --acl \
        --grace --command --help; do
        expect "enter --help does not list $opt" grep -q -- "$opt\b" "$WORK/ent.out"
    done
    expect "zkr barrier --help does not list enter" \
        grep -q "zkr barrier enter" <<<"$("$ZKR" barrier --help)"
    expect "zkr --help does not list barrier enter" \
        grep -q "zkr barrier enter" <<<"$("$ZKR" --help)"
}

# private_acl ACL: ACL (zkq acl) is --acl private's for ops: ops may do
# everything (31), anyone may read (1), nothing else (zkr(1)).
private_acl() {
    [ "$(grep -c . <<<"$1")" -eq 2 ] &&
        grep -qx 'digest:ops:.*:31' <<<"$1" &&
        grep -qx 'world:anyone:1' <<<"$1"
}

# --id is the participant node's data; -c STRING runs the string with sh;
# --acl private makes the nodes with the private ACL (zkr(1)), and refuses
# an existing PATH open to anyone.
test_id_command_acl() {
    local p=/cli/dbar/id a node data acl
    bg "$ZKR" barrier enter --id worker-7 2 "$p" -c 'exit 0'
    a=$!
    expect "the participant's node did not come" wait_for $((2 * ZKS)) parts_eq "$p" 1
    node=$(zk_ls "$p" | head -1)
    data=$("$ZKQ" "$ZKR_SERVER" get "$p/$node")
    expect "--id worker-7: node $node holds '$data'" [ "$data" = worker-7 ]
    expect "node name '$node' is not 32 hex digits" grep -qxE '[0-9a-f]{32}' <<<"$node"
    ent 2 "$p" -c 'echo "in $0"'
    expect "-c STRING: exit $st, output '$(cat "$WORK/ent.out")'" \
        [ "$st:$(cat "$WORK/ent.out")" = "0:in sh" ]
    ended_with "$a" 0 "the --id participant"
    st=0
    "$ZKR" --auth "$AUTH" barrier enter --acl private 1 "$p/priv" -- true \
        2>"$WORK/ent.err" || st=$?
    expect "enter --acl private: exit $st: $(cat "$WORK/ent.err")" [ "$st" -eq 0 ]
    acl=$(ZKQ_AUTH=$AUTH "$ZKQ" "$ZKR_SERVER" acl "$p/priv")
    expect "--acl private: ACL '$acl', want digest:ops:...:31 and world:anyone:1" \
        private_acl "$acl"
    st=0
    "$ZKR" --auth "$AUTH" barrier enter --acl private 1 "$p" -- true \
        2>"$WORK/ent.err" || st=$?
    expect "enter --acl private on an open PATH: exit $st, want 77" [ "$st" -eq 77 ]
}

# Signals: SIGTERM while entering ends zkr at once (143), its command not
# run and its node deleted; SIGTERM while the command runs is forwarded to
# it, and zkr exits with its status (or, with --wait-leave and a command
# that exits 0, 143: it did not wait).
test_signals() {
    local p=/cli/dbar/sig log=$WORK/sig.log z
    bg "$ZKR" barrier enter 2 "$p" -- "$WORK/phase" "$log" never 0
    z=$!
    expect "the participant's node did not come" wait_for $((2 * ZKS)) parts_eq "$p" 1
    kill -TERM "$z"
    ended_with "$z" 143 "SIGTERM while entering"
    expect "a participant told to stop ran its command" [ ! -e "$log" ]
    expect "SIGTERM while entering left the node" wait_for $((2 * ZKS)) parts_eq "$p" 0
    bg "$ZKR" barrier enter 1 "$p/run" -- sh -c \
        "trap 'echo got TERM >>\"$log\"; exit 7' TERM; echo up >>'$log'; while :; do sleep 0.1; done" \
        2>>"$WORK/sig.err"
    z=$!
    expect "the command did not start" wait_for $((2 * ZKS)) lines_ge "$log" 1 up
    kill -TERM "$z"
    ended_with "$z" 7 "SIGTERM while the command runs (it exits 7)"
    expect "the command did not get SIGTERM" lines_ge "$log" 1 "got TERM"
    : >"$log"
    bg "$ZKR" barrier enter --wait-leave 1 "$p/run" -- sh -c \
        "trap 'exit 0' TERM; echo up >>'$log'; while :; do sleep 0.1; done" \
        2>>"$WORK/sig.err"
    z=$!
    expect "the command did not start" wait_for $((2 * ZKS)) lines_ge "$log" 1 up
    kill -TERM "$z"
    ended_with "$z" 143 "SIGTERM with --wait-leave, the command exiting 0"
    expect "nodes left at $p/run: $(zk_ls "$p/run" | tr '\n' ' ')" nodes_eq "$p/run" 0
}

# The phase has begun: a session lost while the command runs does not
# stop it (zkr lock's would be killed). zkr is paused past its session
# timeout: its node goes with the session, the command runs on; resumed,
# zkr says so, and exits with the command's status once it ends.
test_session_lost_command_runs_on() {
    local p=/cli/dbar/expire log=$WORK/expire.log z pid
    bg "$ZKR" --session-timeout 4000 barrier enter 1 "$p" -- sh -c \
        "echo \"up \$\$\" >>'$log'; while [ ! -e '$WORK/expire.go' ]; do sleep 0.1; done; echo end >>'$log'" \
        2>"$WORK/expire.err"
    z=$!
    expect "the command did not start" wait_for $((2 * ZKS)) lines_ge "$log" 1 up
    pid=$(awk '$1 == "up" { print $2 }' "$log")
    kill -STOP "$z"
    expect "the paused participant's node is still there 3 session timeouts later" \
        wait_for 12 parts_eq "$p" 0
    expect "the command was stopped with the session" alive "$pid"
    kill -CONT "$z"
    touch "$WORK/expire.go"
    ended_with "$z" 0 "the participant whose session expired"
    expect "the command did not end" lines_ge "$log" 1 '^end$'
    expect "zkr did not say that the session was lost: $(cat "$WORK/expire.err")" \
        grep -q "session was lost while the command ran" "$WORK/expire.err"
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

# peers_entered OUT...: each peer's output has its "entered" line.
peers_entered() {
    local f
    for f in "$@"; do
        lines_ge "$f" 1 '^entered ' || return 1
    done
}

# One zkr, one kazoo and one Curator participant, N=3, in that order:
# none starts its phase before Curator (the last) arrives; all leave.
test_three_libraries() {
    local p=/cli/dbar/three-libs log=$WORK/libs.log kz=$WORK/libs.kazoo
    local cu=$WORK/libs.curator z k c arrived
    bg "$ZKR" barrier enter 3 "$p" -- "$WORK/phase" "$log" zkr 1
    z=$!
    expect "zkr's node did not come" wait_for $((2 * ZKS)) parts_eq "$p" 1
    bg "${KAZOO[@]}" "$p" 3 1 >"$kz" 2>"$kz.err"
    k=$!
    expect "kazoo's node did not come: $(tail -3 "$kz.err")" \
        wait_for $((2 * ZKS)) parts_eq "$p" 2
    sleep "$(scaled 1.5)"
    expect "zkr's phase started with 2 of 3" [ ! -e "$log" ]
    expect "kazoo entered with 2 of 3" [ -z "$(peer_stamp "$kz" entered)" ]
    bg "${CURATOR[@]}" "$p" 3 1 $((3 * ZKS)) >"$cu" 2>"$cu.err"
    c=$!
    expect "not every phase started within 3 session timeouts of Curator's start: $(tail -3 "$cu.err")" \
        wait_for $((3 * ZKS)) eval 'lines_ge "$log" 1 "zkr start" && peers_entered "$kz" "$cu"'
    arrived=$(peer_stamp "$cu" entering)
    at_or_after "zkr's phase started" "$(stamp_of "$log" zkr start)" "$arrived" "Curator's arrival"
    at_or_after "kazoo entered" "$(peer_stamp "$kz" entered)" "$arrived" "Curator's arrival"
    at_or_after "Curator entered" "$(peer_stamp "$cu" entered)" "$arrived" "its arrival"
    ended_with "$z" 0 "zkr"
    ended_with "$k" 0 "kazoo"
    ended_with "$c" 0 "Curator"
    expect "kazoo did not leave: $(tail -3 "$kz.err")" [ -n "$(peer_stamp "$kz" left)" ]
    expect "Curator did not leave: $(tail -3 "$cu.err")" [ -n "$(peer_stamp "$cu" left)" ]
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

# N=2, zkr and a peer, each order (the second makes "ready"): the phases
# start once the second has arrived; zkr --wait-leave, with a short
# command, exits only after the peer began to leave.
pair() { # NAME PEER-ARRAY-NAME FIRST (zkr or peer)
    local name=$1 first=$3 p=/cli/dbar/pair-$1-$3 log=$WORK/pair-$1-$3.log
    local out=$WORK/pair-$1-$3.out z k arrived leaving
    local -n cmd=$2
    local peer=("${cmd[@]}" "$p" 2 2)
    [ "$name" = curator ] && peer+=($((3 * ZKS)))
    if [ "$first" = zkr ]; then
        bg "$WORK/stamped" "$log" zkr "$ZKR" barrier enter --wait-leave 2 "$p" -- "$WORK/phase" "$log" zkr 0.2
        z=$!
        expect "zkr's node did not come" wait_for $((2 * ZKS)) parts_eq "$p" 1
        sleep "$(scaled 1)"
        expect "zkr's phase started alone" [ ! -e "$log" ]
        bg "${peer[@]}" >"$out" 2>"$out.err"
        k=$!
    else
        bg "${peer[@]}" >"$out" 2>"$out.err"
        k=$!
        expect "$name's node did not come: $(tail -3 "$out.err")" \
            wait_for $((3 * ZKS)) parts_eq "$p" 1
        sleep "$(scaled 1)"
        expect "$name entered alone" [ -z "$(peer_stamp "$out" entered)" ]
        arrived=$(mono_ms)
        bg "$WORK/stamped" "$log" zkr "$ZKR" barrier enter --wait-leave 2 "$p" -- "$WORK/phase" "$log" zkr 0.2
        z=$!
    fi
    ended_with "$k" 0 "$name (zkr first: $first): $(tail -3 "$out.err")"
    ended_with "$z" 0 "zkr --wait-leave (first: $first)"
    [ "$first" = zkr ] && arrived=$(peer_stamp "$out" entering)
    at_or_after "zkr's phase started (first: $first)" "$(stamp_of "$log" zkr start)" \
        "$arrived" "the second's arrival"
    at_or_after "$name entered (first: $first)" "$(peer_stamp "$out" entered)" \
        "$arrived" "the second's arrival"
    leaving=$(peer_stamp "$out" leaving)
    at_or_after "zkr --wait-leave exited (first: $first)" "$(stamp_of "$log" zkr exit)" \
        "$leaving" "$name's leave"
    expect "$name did not leave (first: $first)" [ -n "$(peer_stamp "$out" left)" ]
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}
test_pair_kazoo() {
    pair kazoo KAZOO zkr
    pair kazoo KAZOO peer
}
test_pair_curator() {
    pair curator CURATOR zkr
    pair curator CURATOR peer
}

# examples/phases: three workers run two phases together. Each phase K
# starts for all three (no worker goes on alone) and no worker starts
# phase 2 before every worker has ended phase 1 (their leave waits for all
# to leave); the workers' stamps are CLOCK_MONOTONIC ms, like mono_ms.
test_example_phases() {
    local p=/cli/dbar/phases ex=$builddir/examples/phases log=$WORK/phases.log
    local w pids=() s2 e1
    : >"$log"
    for w in w1 w2 w3; do
        bg "$ex" -s "$ZKR_SERVER" -p "$p" -t $((6 * ZKS)) 3 "$w" 2 >>"$log"
        pids+=($!)
    done
    for w in "${pids[@]}"; do
        ended_with "$w" 0 "worker $w"
    done
    expect "not every worker ran both phases: $(cat "$log")" \
        [ "$(grep -c ' start ' "$log")" -eq 6 ]
    e1=$(awk '$2 == "end" && $3 == 1 { print $4 }' "$log" | sort -n | tail -1)
    s2=$(awk '$2 == "start" && $3 == 2 { print $4 }' "$log" | sort -n | head -1)
    at_or_after "the first start of phase 2" "$s2" "$e1" \
        "the last end of phase 1"
    expect "nodes left at $p/phase-1: $(zk_ls "$p/phase-1" | tr '\n' ' ')" \
        nodes_eq "$p/phase-1" 0
}

start_server
# shellcheck disable=SC2034 # both used through pair's nameref
CURATOR=(java -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -XX:-UsePerfData -cp "$CP" CuratorDoubleBarrier "$ZKR_SERVER")
# shellcheck disable=SC2034
KAZOO=("$PY" "$top_srcdir/tests/cli/kazoo_dbarrier.py" "$ZKR_SERVER")
run_test test_phase_starts_with_the_third
run_test test_enter_times_out
run_test test_wait_leave
run_test test_wait_leave_timeout
run_test test_usage_errors
run_test test_id_command_acl
run_test test_signals
run_test test_session_lost_command_runs_on
run_test test_three_libraries
run_test test_pair_kazoo
run_test test_pair_curator
run_test test_example_phases
done_testing
