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

start_server
run_test test_three_candidates
run_test test_requeue
done_testing
