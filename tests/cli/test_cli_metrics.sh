#!/usr/bin/env bash
# Library metrics in the Prometheus text format: the exposition of a
# made-up snapshot (tests/unit/test_metrics --emit: escaped label values,
# histograms) and the files `zkr lock|sem|elect --metrics-file` write at
# exit pass `promtool check metrics` (Debian's prometheus package), and
# the files count what the runs did.
. "${srcdir:-.}/tests/cli/lib.sh"
zkr_need promtool prometheus

EMIT=$builddir/tests/unit/test_metrics

# promtool_ok FILE: promtool accepts FILE (its complaints go to the log).
promtool_ok() {
    local out
    if ! out=$(promtool check metrics < "$1" 2>&1); then
        sed 's/^/# promtool: /' <<< "$out"
        return 1
    fi
}

# metric FILE LINE: FILE has exactly this line.
metric() { grep -qxF "$2" "$1"; }

test_format_promtool() {
    "$EMIT" --emit > "$WORK/emit.prom" || fail "test_metrics --emit failed"
    expect "the escaped label is not there" \
        grep -qF 'path="/a\"b\\c\nd"' "$WORK/emit.prom"
    expect "promtool rejects the emitted text" promtool_ok "$WORK/emit.prom"
}

test_lock_file() {
    local f=$WORK/lock.prom st
    rm -f "$f"
    "$ZKR" lock --metrics-file "$f" /cli/metrics/lock true
    st=$?
    expect "exit $st" [ "$st" -eq 0 ]
    expect "no file" [ -s "$f" ]
    expect "acquisitions not 1: $(grep '^zkr_acq' "$f")" metric "$f" \
        'zkr_acquisitions_total{path="/cli/metrics/lock",kind="lock"} 1'
    expect "hold count not 1" metric "$f" \
        'zkr_hold_seconds_count{path="/cli/metrics/lock",kind="lock"} 1'
    expect "sessions not 1" metric "$f" 'zkr_sessions_total 1'
    expect "a temporary file was left" \
        [ "$(find "$WORK" -name 'lock.prom.tmp.*' | wc -l)" -eq 0 ]
}

# A try on a held lock fails (exit 1) and still writes its file, with the
# busy try counted; a semaphore and an election write theirs.
test_busy_sem_elect() {
    local f=$WORK/busy.prom holder st
    rm -f "$f" "$WORK/held"
    bg "$ZKR" lock /cli/metrics/busy sh -c "touch '$WORK/held'; exec sleep 30"
    holder=$!
    expect "holder never held" wait_for 10 test -e "$WORK/held"
    "$ZKR" lock -n --metrics-file "$f" /cli/metrics/busy true
    st=$?
    expect "try exit $st, not 1" [ "$st" -eq 1 ]
    expect "busy not 1: $(grep '^zkr_acq' "$f")" metric "$f" \
        'zkr_acquire_busy_total{path="/cli/metrics/busy",kind="lock"} 1'
    expect "acquisitions not 0" metric "$f" \
        'zkr_acquisitions_total{path="/cli/metrics/busy",kind="lock"} 0'
    kill -TERM "$holder"
    wait "$holder" 2>/dev/null

    "$ZKR" sem -c 2 --metrics-file "$WORK/sem.prom" /cli/metrics/sem true
    expect "semaphore acquisitions not 1" metric "$WORK/sem.prom" \
        'zkr_acquisitions_total{path="/cli/metrics/sem",kind="semaphore"} 1'
    "$ZKR" elect --metrics-file "$WORK/elect.prom" /cli/metrics/elect true
    expect "leader changes not 2: $(grep '^zkr_leader' "$WORK/elect.prom")" \
        metric "$WORK/elect.prom" \
        'zkr_leader_changes_total{path="/cli/metrics/elect",kind="election"} 2'
}

test_files_promtool() {
    local f
    for f in lock busy sem elect; do
        expect "promtool rejects $f.prom" promtool_ok "$WORK/$f.prom"
    done
}

# A batch job's file says when the run ended, its exit status, and when a
# run last succeeded: a failed run keeps the time of the last success
# from the file it replaces (an alert on "no success for a day" works
# with one file per job); with no success ever, there is no such sample.
test_run_metrics() {
    local f=$WORK/job.prom t0 t1 ok1 st
    rm -f "$f"
    t0=$(date +%s)
    "$ZKR" lock --metrics-file "$f" /cli/metrics/job sh -c 'exit 3'
    st=$?
    expect "exit $st" [ "$st" -eq 3 ]
    expect "exit status not 3: $(grep zkr_run "$f")" metric "$f" 'zkr_run_exit_status 3'
    expect "a success before any" [ "$(grep -c '^zkr_run_last_success' "$f")" = 0 ]
    "$ZKR" lock --metrics-file "$f" /cli/metrics/job true
    t1=$(date +%s)
    expect "exit status not 0" metric "$f" 'zkr_run_exit_status 0'
    ok1=$(awk '$1 == "zkr_run_last_success_timestamp_seconds" { print $2 }' "$f")
    expect "last success $ok1 not within [$t0, $t1]" awk -v v="$ok1" \
        -v a="$t0" -v b="$t1" 'BEGIN { exit !(v != "" && v >= a && v <= b + 1) }'
    expect "end time not the success's" [ "$(awk \
        '$1 == "zkr_run_end_timestamp_seconds" { print $2 }' "$f")" = "$ok1" ]
    sleep 1
    "$ZKR" lock --metrics-file "$f" /cli/metrics/job false
    expect "exit status not 1" metric "$f" 'zkr_run_exit_status 1'
    expect "the last success not carried over: $(grep zkr_run "$f")" \
        metric "$f" "zkr_run_last_success_timestamp_seconds $ok1"
    expect "end time not moved on" awk -v e="$(awk \
        '$1 == "zkr_run_end_timestamp_seconds" { print $2 }' "$f")" \
        -v s="$ok1" 'BEGIN { exit !(e > s) }'
    expect "promtool rejects job.prom" promtool_ok "$f"
}

# An unwritable FILE is reported; the exit status stays the command's.
test_unwritable() {
    local st
    "$ZKR" lock --metrics-file "$WORK/no/such/dir/m.prom" /cli/metrics/unw \
        true 2> "$WORK/unw.err"
    st=$?
    expect "exit $st, not 0" [ "$st" -eq 0 ]
    expect "not reported: $(cat "$WORK/unw.err")" \
        grep -q "cannot write --metrics-file" "$WORK/unw.err"
    "$ZKR" lock --metrics-file "" /cli/metrics/unw true 2> /dev/null
    st=$?
    expect "empty FILE: exit $st, not 64 (usage)" [ "$st" -eq 64 ]
}

start_server
run_test test_format_promtool
run_test test_lock_file
run_test test_busy_sem_elect
run_test test_files_promtool
run_test test_run_metrics
run_test test_unwritable
done_testing
