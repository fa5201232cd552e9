#!/usr/bin/env bash
# zkr elect: three candidates; killing the leader's zkr starts exactly one
# new leader, never two commands at once, and the killed leader's command
# dies with it. --requeue runs the command again after it ends.
. "${srcdir:-.}/tests/cli/lib.sh"

T=3000

LEADCMD=$WORK/lead.sh
cat > "$LEADCMD" <<EOF
echo "\$(date +%s%3N) start \$ZKR_LEADER_ID \$ZKR_FENCE \$\$" >> '$WORK/log'
exec sleep 60
EOF

starts() { grep -c ' start ' "$WORK/log" 2>/dev/null || true; }
nth_start() { awk -v n="$1" '$2 == "start" && ++k == n' "$WORK/log"; }

test_three_candidates() {
    local -A zpid
    local c first leader lpid t_dead second
    : > "$WORK/log"
    for c in c1 c2 c3; do
        bg "$ZKR" --session-timeout $T elect --id "$c" /cli/elect sh "$LEADCMD"
        zpid[$c]=$!
    done
    expect "no leader" wait_for 10 lines_ge "$WORK/log" 1 " start "
    sleep "$(scaled 0.5)"
    expect "two leaders at once: $(cat "$WORK/log")" [ "$(starts)" -eq 1 ]
    first=$(nth_start 1)
    leader=$(echo "$first" | awk '{ print $3 }')
    lpid=$(echo "$first" | awk '{ print $5 }')
    expect "the leader's command is not running" alive "$lpid"
    kill -KILL "${zpid[$leader]}"
    wait "${zpid[$leader]}" 2>/dev/null
    # Its command dies with it (the guard), long before a new leader.
    expect "the killed leader's command $lpid survived" wait_for 2 dead "$lpid"
    t_dead=$(now_ms)
    expect "no new leader" wait_for 10 lines_ge "$WORK/log" 2 " start "
    sleep "$(scaled 1)"
    expect "not exactly one new leader: $(cat "$WORK/log")" [ "$(starts)" -eq 2 ]
    second=$(nth_start 2)
    expect "new leader is the old one" \
        [ "$(echo "$second" | awk '{ print $3 }')" != "$leader" ]
    expect "new leader started at $(echo "$second" | awk '{ print $1 }'), before the old command died at $t_dead" \
        [ "$(echo "$second" | awk '{ print $1 }')" -ge "$t_dead" ]
    expect "epoch did not increase" \
        [ "$(echo "$second" | awk '{ print $4 }')" -gt "$(echo "$first" | awk '{ print $4 }')" ]
}

alternated() {
    [ "$(grep -c ' start a' "$WORK/log")" -ge 2 ] &&
        [ "$(grep -c ' start b' "$WORK/log")" -ge 2 ]
}
# Waiting: 128 + SIGTERM; running the command: its status (killed by the
# forwarded SIGTERM: 143 too).
ended_by_term() { [ "$1" -eq 143 ]; }

# --requeue: a command that ends lets the next candidate lead, and the
# candidate runs again later; SIGTERM ends zkr.
test_requeue() {
    local a b
    : > "$WORK/log"
    bg "$ZKR" elect --id a --requeue /cli/requeue sh -c "echo \"\$(date +%s%3N) start a\" >> '$WORK/log'; sleep 0.3"
    a=$!
    bg "$ZKR" elect --id b --requeue /cli/requeue sh -c "echo \"\$(date +%s%3N) start b\" >> '$WORK/log'; sleep 0.3"
    b=$!
    expect "no alternation: $(cat "$WORK/log")" wait_for 15 alternated
    kill -TERM "$a" "$b"
    wait_status "$a"
    expect "a exit $st" ended_by_term "$st"
    wait_status "$b"
    expect "b exit $st" ended_by_term "$st"
    expect "candidates left nodes" wait_for 5 nodes_eq /cli/requeue 0
}

# --requeue ended by SIGTERM at any moment (running the command, between
# runs, rejoining): the exit status is 143, never the status of a run
# started after the signal. Bounded loop: one candidate, a command that
# ends at once, SIGTERM after a random delay.
test_requeue_signal_any_time() {
    local i z bad=""
    for i in $(seq 1 "${ZKR_REQUEUE_SIGNALS:-40}"); do
        "${ZKR_PDEATH[@]}" "$ZKR" elect --requeue /cli/requeue-sig true &
        z=$!
        sleep "0.$((RANDOM % 20 + 5))"
        kill -TERM "$z"
        wait_status "$z"
        [ "$st" -eq 143 ] || bad="$bad $i:$st"
    done
    expect "runs not ended with 143 (run:status):$bad" [ -z "$bad" ]
    expect "candidates left nodes" wait_for 5 nodes_eq /cli/requeue-sig 0
}

# examples/systemd's unit stops zkr elect --requeue with SIGTERM
# (systemctl stop): the status zkr then exits with must be one the unit
# counts as success, or every clean stop leaves the unit "failed".
test_systemd_unit_stop_status() {
    local unit=$top_srcdir/examples/systemd/zkr-leader@.service z ok
    "${ZKR_PDEATH[@]}" "$ZKR" elect --requeue /cli/requeue-unit sleep 100 &
    z=$!
    expect "no leader" wait_for 10 nodes_eq /cli/requeue-unit 1
    kill -TERM "$z"
    wait_status "$z"
    ok=$(sed -n 's/^SuccessExitStatus=//p' "$unit")
    expect "exit $st after SIGTERM is not in the unit's SuccessExitStatus ($ok)" \
        grep -qw -- "$st" <<< "$ok"
}

stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }
running() { ! stopped "$1" && alive "$1"; }
logged() { grep -q " $1 $2" "$WORK/log" 2>/dev/null; }
field() { awk -v e="$1" -v n="$2" -v f="$3" '$2 == e && $3 == n { print $f; exit }' "$WORK/log"; }

# blip: cuts every connection (blackhole, then reset: SUSPENDED at once),
# waits for CHECK... to hold, and lets the client back (pass).
blip() {
    expect "blackhole" proxy_cmd blackhole
    expect "reset" proxy_cmd reset
    expect "no reaction to the suspension ($*)" wait_for 5 "$@"
    expect "pass" proxy_cmd pass
}

# elect --on-suspend stop across a short blip: the leader's command is
# stopped, then continued once leadership is re-verified on the same
# session, never killed; zkr exits with its status.
test_elect_stop_blip() {
    local a cpid
    : > "$WORK/log"
    rm -f "$WORK/go"
    expect "proxy did not start" proxy_start
    bg "$ZKR" -s "$PROXY_HOSTS" --session-timeout 12000 elect --on-suspend stop \
        /cli/elect-blip sh -c "echo \"\$(date +%s%3N) start A \$\$\" >> '$WORK/log'; while [ ! -e '$WORK/go' ]; do sleep 0.05; done"
    a=$!
    expect "A did not start" wait_for 10 logged start A
    cpid=$(field start A 4)
    blip stopped "$cpid"
    expect "not continued after re-verification" wait_for 5 running "$cpid"
    touch "$WORK/go"
    wait_status "$a"
    expect "A exit $st, not 0" [ "$st" -eq 0 ]
}

# elect --on-suspend term across a short blip: SIGTERM at SUSPENDED (the
# command traps it and goes on); the reconnection, once re-verified, does
# not kill it; zkr exits 4 (a suspension touched the run).
test_elect_term_blip() {
    local a cpid
    : > "$WORK/log"
    rm -f "$WORK/go"
    expect "proxy did not start" proxy_start
    bg "$ZKR" -v -s "$PROXY_HOSTS" --session-timeout 12000 elect \
        --on-suspend term /cli/elect-term sh -c "trap 'echo \"\$(date +%s%3N) term\" >> \"$WORK/log\"' TERM; echo \"\$(date +%s%3N) start A \$\$\" >> '$WORK/log'; while [ ! -e '$WORK/go' ]; do sleep 0.05; done" 2>"$WORK/zkr.err"
    a=$!
    expect "A did not start" wait_for 10 logged start A
    cpid=$(field start A 4)
    blip lines_ge "$WORK/log" 1 " term"
    expect "not re-verified" wait_for 5 lines_ge "$WORK/zkr.err" 1 re-verified
    sleep "$(scaled 0.5)"
    expect "the command was killed after the blip" alive "$cpid"
    touch "$WORK/go"
    wait_status "$a"
    expect "A exit $st, not 4" [ "$st" -eq 4 ]
}

start_server
run_test test_three_candidates
run_test test_requeue
run_test test_requeue_signal_any_time
run_test test_systemd_unit_stop_status
run_test test_elect_stop_blip
run_test test_elect_term_blip
done_testing
