#!/usr/bin/env bash
# zkr lock and zkr sem against a real server: exclusion, FIFO fencing
# tokens, -n/-w, exit statuses, signal forwarding, the command dying with
# zkr, and a semaphore of two permits.
. "${srcdir:-.}/tests/cli/lib.sh"

# 8 concurrent loops of `zkr lock` around a non-atomic read-modify-write:
# the counter is exact and ZKR_FENCE strictly increases in grant order.
test_mutual_exclusion_and_fence() {
    local d=$WORK/rmw loops=8 rounds=6 i
    mkdir -p "$d"
    echo 0 > "$d/counter"
    : > "$d/fences"
    cat > "$d/child.sh" <<'EOF'
v=$(cat "$1/counter")
sleep 0.01
echo $((v + 1)) > "$1/counter"
echo "$ZKR_FENCE" >> "$1/fences"
EOF
    local pids=()
    for i in $(seq 1 $loops); do
        (for _ in $(seq 1 $rounds); do
            "$ZKR" lock /cli/rmw sh "$d/child.sh" "$d" || exit 1
        done) &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        expect "a loop failed" wait "$i"
    done
    expect "counter is $(cat "$d/counter"), not $((loops * rounds))" \
        [ "$(cat "$d/counter")" -eq $((loops * rounds)) ]
    expect "fencing tokens not strictly increasing in grant order" \
        awk 'NR > 1 && $1 <= prev { exit 1 } { prev = $1 }' "$d/fences"
    expect "$(wc -l < "$d/fences") tokens recorded" \
        [ "$(wc -l < "$d/fences")" -eq $((loops * rounds)) ]
    expect "nodes left behind" [ "$(zk_count /cli/rmw)" -eq 0 ]
}

held() { [ -e "$WORK/held" ]; }

# The same loops without zkr lose updates: the counter check above can
# fail (a check that cannot fail proves nothing).
test_rmw_check_catches_no_lock() {
    local d=$WORK/rmw-nolock i pids=()
    mkdir -p "$d"
    echo 0 > "$d/counter"
    cp "$WORK/rmw/child.sh" "$d/child.sh"
    for i in $(seq 1 8); do
        (for _ in $(seq 1 6); do sh "$d/child.sh" "$d"; done) &
        pids+=($!)
    done
    wait "${pids[@]}"
    expect "no update lost without a lock ($(cat "$d/counter"))" \
        [ "$(cat "$d/counter")" -lt 48 ]
}

# -n on a held lock returns -E's code at once; -w 0.5 after about half a
# second; without -E the code is 1.
test_nonblocking_and_wait() {
    local t0 t1 rc h
    rm -f "$WORK/held"
    bg "$ZKR" lock /cli/busy sh -c "touch '$WORK/held'; exec sleep 30"
    h=$!
    expect "holder did not start" wait_for 10 held
    t0=$(now_ms)
    rc=0
    "$ZKR" lock -n -E 7 /cli/busy true || rc=$?
    t1=$(now_ms)
    expect "-n exit $rc, not 7" [ "$rc" -eq 7 ]
    expect "-n took $((t1 - t0)) ms" [ $((t1 - t0)) -lt 2000 ]
    rc=0
    "$ZKR" lock -n /cli/busy true || rc=$?
    expect "-n without -E exit $rc, not 1" [ "$rc" -eq 1 ]
    t0=$(now_ms)
    rc=0
    "$ZKR" lock -w 0.5 -E 9 /cli/busy true || rc=$?
    t1=$(now_ms)
    expect "-w exit $rc, not 9" [ "$rc" -eq 9 ]
    expect "-w 0.5 returned after $((t1 - t0)) ms" \
        [ $((t1 - t0)) -ge 500 ] && [ $((t1 - t0)) -lt 3000 ]
    expect "waiters left nodes" [ "$(zk_count /cli/busy)" -eq 1 ]
    kill -TERM "$h"
    wait_status "$h"
    expect "SIGTERM-forwarded holder exit $st, not 143" [ "$st" -eq 143 ]
    expect "lock not released" wait_for 5 nodes_eq /cli/busy 0
    expect "-n on a free lock" "$ZKR" lock -n /cli/busy true
}

# Exit statuses: the command's own, 128+signal, 127, 126, 2 for usage
# errors and an unreachable server (one line on stderr).
test_exit_statuses() {
    local rc err
    rc=0
    "$ZKR" lock /cli/x sh -c 'exit 42' || rc=$?
    expect "command status $rc, not 42" [ "$rc" -eq 42 ]
    rc=0
    "$ZKR" lock /cli/x sh -c 'kill -USR1 $$' || rc=$?
    expect "signal status $rc, not 138" [ "$rc" -eq 138 ]
    rc=0
    "$ZKR" lock /cli/x no-such-command-zkr 2>/dev/null || rc=$?
    expect "not found: $rc" [ "$rc" -eq 127 ]
    rc=0
    "$ZKR" lock /cli/x /etc/hostname 2>/dev/null || rc=$?
    expect "not executable: $rc" [ "$rc" -eq 126 ]
    for args in "lock" "lock /cli/x" "lock -w abc /cli/x true" \
        "lock -E 300 /cli/x true" "lock --on-suspend maybe /cli/x true" \
        "sem /cli/x true" "sem -c 0 /cli/x true" "lock relative true" \
        "bogus" "release /cli/x" "release --force /cli/x" \
        "lock --acl private /cli/x true" "inspect"; do
        rc=0
        # shellcheck disable=SC2086
        err=$("$ZKR" $args 2>&1 >/dev/null) || rc=$?
        expect "'zkr $args' exit $rc, not 2" [ "$rc" -eq 2 ]
        expect "'zkr $args' printed '$err'" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
    done
    rc=0
    err=$("$ZKR" -s 127.0.0.1:1 --session-timeout 1000 lock /cli/x true 2>&1) || rc=$?
    expect "unreachable: exit $rc" [ "$rc" -eq 2 ]
    expect "unreachable: '$err'" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
    expect "nodes left behind" [ "$(zk_count /cli/x)" -eq 0 ]
}

# The command dies with zkr, even when zkr is SIGKILLed; the whole process
# group goes (a grandchild too).
test_child_dies_with_zkr() {
    local z
    rm -f "$WORK/pids"
    bg "$ZKR" lock /cli/orphan sh -c "sleep 60 & echo \$! >> '$WORK/pids'; echo \$\$ >> '$WORK/pids'; wait"
    z=$!
    expect "command did not start" wait_for 10 [ -s "$WORK/pids" ]
    wait_for 2 lines_ge "$WORK/pids" 2
    kill -KILL "$z"
    wait "$z" 2>/dev/null
    for p in $(cat "$WORK/pids"); do
        expect "process $p outlived zkr" wait_for 3 dead "$p"
    done
}

# Jobs queued so far: finished ones (read first) plus nodes present.
sem_queued() {
    local ended
    ended=$(grep -c end "$1")
    [ $((ended + $(zk_count /cli/sem))) -ge "$2" ]
}

# zkr sem -c 2 with six jobs: at most two run at once, started in arrival
# order.
test_semaphore_jobs() {
    local d=$WORK/sem i pids=()
    mkdir -p "$d"
    : > "$d/log"
    for i in 1 2 3 4 5 6; do
        bg "$ZKR" sem -c 2 /cli/sem sh -c "echo \"\$(date +%s%3N) start $i\" >> '$d/log'; sleep 0.4; echo \"\$(date +%s%3N) end $i\" >> '$d/log'"
        pids+=($!)
        # Arrival order: each job is queued before the next one starts.
        expect "job $i not queued" wait_for 10 sem_queued "$d/log" "$i"
    done
    for i in "${pids[@]}"; do
        wait_status "$i"
        expect "a job exited $st" [ "$st" -eq 0 ]
    done
    expect "max concurrency not 2: $(cat "$d/log")" awk '
        $2 == "start" { n++; if (n > max) max = n }
        $2 == "end" { n-- }
        END { exit !(max == 2) }' <(sort -n -s -k1,1 "$d/log")
    expect "start order $(awk '$2 == "start" { printf "%s ", $3 }' "$d/log")" \
        [ "$(awk '$2 == "start" { printf "%s", $3 }' "$d/log")" = 123456 ]
}

start_server
run_test test_mutual_exclusion_and_fence
run_test test_rmw_check_catches_no_lock
run_test test_nonblocking_and_wait
run_test test_exit_statuses
run_test test_child_dies_with_zkr
run_test test_semaphore_jobs
done_testing
