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

# Exit statuses: the command's own, 128+signal, 127, 126, 64 for usage
# errors, 69 for an unreachable server (one line on stderr; more in
# test_cli_unix.sh).
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
    printf 'echo not run\n' > "$WORK/not-executable"
    chmod 644 "$WORK/not-executable"
    rc=0
    "$ZKR" lock /cli/x "$WORK/not-executable" 2>/dev/null || rc=$?
    expect "not executable: $rc" [ "$rc" -eq 126 ]
    for args in "lock" "lock /cli/x" "lock -w abc /cli/x true" \
        "lock -E 300 /cli/x true" "lock --on-suspend maybe /cli/x true" \
        "sem /cli/x true" "sem -c 0 /cli/x true" "lock relative true" \
        "bogus" "release /cli/x" "release --force /cli/x" \
        "lock --acl private /cli/x true" "inspect"; do
        rc=0
        # shellcheck disable=SC2086
        err=$("$ZKR" $args 2>&1 >/dev/null) || rc=$?
        expect "'zkr $args' exit $rc, not 64" [ "$rc" -eq 64 ]
        expect "'zkr $args' printed '$err'" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
    done
    rc=0
    err=$("$ZKR" -s 127.0.0.1:1 --session-timeout 1000 lock /cli/x true 2>&1) || rc=$?
    expect "unreachable: exit $rc" [ "$rc" -eq 69 ]
    expect "unreachable: '$err'" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
    # Port 1 refuses: the line says so, not only that no session came.
    expect "refused port: '$err'" grep -q "connection refused" <<<"$err"
    # --connect-timeout bounds the wait for the first session, not the
    # session timeout: with a 60 s session timeout zkr ends long before it.
    rc=0
    err=$(timeout 45 "$ZKR" -s 127.0.0.1:1 --session-timeout 60000 \
        --connect-timeout 300 lock /cli/x true 2>&1) || rc=$?
    expect "--connect-timeout: exit $rc ($err)" [ "$rc" -eq 69 ]
    expect "--connect-timeout: '$err'" grep -q "connection refused" <<<"$err"
    rc=0
    "$ZKR" --connect-timeout 0 lock /cli/x true 2>/dev/null || rc=$?
    expect "--connect-timeout 0: exit $rc, not 64" [ "$rc" -eq 64 ]
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

# A worker that logs its start and end (ms) around a sleep:
# sh $WORKER NAME SECONDS
WORKER=$WORK/worker.sh
cat > "$WORKER" <<EOF
echo "\$(date +%s%3N) start \$1 \$\$" >> '$WORK/log'
sleep \$2
echo "\$(date +%s%3N) end \$1" >> '$WORK/log'
EOF
logged() { grep -q " $1 $2" "$WORK/log" 2>/dev/null; }
field() { awk -v e="$1" -v n="$2" -v f="$3" '$2 == e && $3 == n { print $f; exit }' "$WORK/log"; }

# grant_outlasts PATH CMD...: zkr lock PATH CMD... where CMD leaves a
# worker A running after it returns: the next holder B starts only after
# A's worker ended, and A's zkr exits 0 once the worker is gone.
grant_outlasts() {
    local path=$1 a b_start a_end
    shift
    : > "$WORK/log"
    bg "$ZKR" lock "$path" "$@"
    a=$!
    expect "A's worker did not start" wait_for 10 logged start A
    "$ZKR" lock "$path" sh -c "echo \"\$(date +%s%3N) start B\" >> '$WORK/log'"
    wait_status "$a"
    expect "A exit $st, not 0" [ "$st" -eq 0 ]
    a_end=$(field end A 1)
    b_start=$(awk '$2 == "start" && $3 == "B" { print $1 }' "$WORK/log")
    expect "B started at ${b_start:-never}, A's worker ended at ${a_end:-never}" \
        [ -n "$a_end" ] && [ "${b_start:-0}" -ge "${a_end:-0}" ]
}

# The grant lasts until every process of the command is gone: a child
# left running in the background (flock(1) keeps the lock as long, through
# the descriptor) ...
test_background_child_holds_grant() {
    grant_outlasts /cli/bgkid sh -c "sh '$WORKER' A $(scaled 1.5) &"
}

# ... and one that left the process group and the session (setsid forks
# when its caller leads a group, as the command does): zkr is its
# subreaper.
test_setsid_child_holds_grant() {
    grant_outlasts /cli/setsid setsid sh "$WORKER" A "$(scaled 1.5)"
}

# A command whose processes spread over groups and sessions: records their
# PIDs in $WORK/pids, the command's own last.
SPREAD="sleep 60 & echo \$! >> '$WORK/pids'; setsid sleep 60 & echo \$! >> '$WORK/pids'; (trap '' HUP TERM; exec sleep 60) & echo \$! >> '$WORK/pids'; echo \$\$ >> '$WORK/pids'; wait"

survivors() {
    local p
    for p in $(cat "$WORK/pids" 2>/dev/null); do
        alive "$p" && echo "$p"
    done
}
all_dead() { [ -z "$(survivors)" ]; }

# kill -KILL -- -PGID of zkr's process group (a shell's kill -9 %1): zkr
# dies, and with it every process of the command, in whatever group.
test_group_kill() {
    local z
    rm -f "$WORK/pids"
    bg setsid "$ZKR" lock /cli/groupkill sh -c "$SPREAD"
    z=$!
    expect "command did not start" wait_for 10 lines_ge "$WORK/pids" 4
    kill -KILL -- "-$z"
    wait "$z" 2>/dev/null
    expect "processes outlived zkr's group" wait_for 3 all_dead
    expect "survivors: $(survivors)" all_dead
}

# timeout(1) kills zkr's whole process group with SIGKILL.
test_timeout_kill() {
    local rc=0
    rm -f "$WORK/pids"
    timeout -s KILL "$(scaled 2)" "$ZKR" lock /cli/timeoutkill sh -c "$SPREAD" || rc=$?
    expect "timeout exit $rc, not 137" [ "$rc" -eq 137 ]
    expect "command did not start" lines_ge "$WORK/pids" 4
    expect "processes outlived zkr" wait_for 3 all_dead
    expect "survivors: $(survivors)" all_dead
}

# The guard killed alone: zkr kills the command (no guard, no protection
# from its own death), reaps it, releases the lock at once (not at the
# session's expiry) and exits 137 (the command was killed), not of SIGPIPE.
test_guard_killed() {
    local z cmd c guard=
    rm -f "$WORK/pids"
    bg "$ZKR" --session-timeout 30000 lock /cli/guard sh -c "$SPREAD"
    z=$!
    expect "command did not start" wait_for 10 lines_ge "$WORK/pids" 4
    cmd=$(tail -n 1 "$WORK/pids")
    for c in $(ps -o pid= --ppid "$z"); do
        [ "$c" != "$cmd" ] && guard=$c
    done
    expect "no guard process" [ -n "$guard" ]
    [ -n "$guard" ] && kill -KILL "$guard"
    expect "zkr did not end" wait_for 5 dead "$z"
    alive "$z" && kill -KILL "$z"
    wait_status "$z"
    expect "zkr exit $st, not 137" [ "$st" -eq 137 ]
    expect "processes outlived the guard" wait_for 3 all_dead
    expect "lock not released" [ "$(zk_count /cli/guard)" -eq 0 ]
}

# A guard that someone stopped (SIGSTOP) while the command runs: the
# command's end still ends zkr promptly with the command's status, and the
# lock is free (zkr's heartbeats continue the guard).
test_guard_stopped() {
    local z cmd c t0 t1 guard=''
    rm -f "$WORK/cmdpid" "$WORK/go"
    bg "$ZKR" --session-timeout 30000 lock /cli/guardstop sh -c "echo \$\$ > '$WORK/cmdpid'; while [ ! -e '$WORK/go' ]; do sleep 0.05; done; exit 7"
    z=$!
    expect "command did not start" wait_for 10 [ -s "$WORK/cmdpid" ]
    cmd=$(cat "$WORK/cmdpid")
    for c in $(ps -o pid= --ppid "$z"); do
        [ "$c" != "$cmd" ] && guard=$c
    done
    expect "no guard process" [ -n "$guard" ]
    [ -n "$guard" ] && kill -STOP "$guard"
    touch "$WORK/go"
    t0=$(now_ms)
    expect "zkr hangs with a stopped guard" wait_for 5 dead "$z"
    t1=$(now_ms)
    alive "$z" && kill -KILL "$z"
    [ -n "$guard" ] && kill -CONT "$guard" 2>/dev/null
    wait_status "$z"
    expect "zkr exit $st, not the command's 7" [ "$st" -eq 7 ]
    expect "zkr took $((t1 - t0)) ms after the command's end" \
        [ $((t1 - t0)) -lt 5000 ]
    expect "lock not released" wait_for 3 nodes_eq /cli/guardstop 0
}

# The command gets descriptors 0, 1 and 2 only, also when zkr inherited
# one above 1023 (a shell's 1500>file): ls sees those three and the one
# it opened itself to read /proc/self/fd.
test_descriptors_0_to_2_only() {
    local fds
    fds=$( (
        [ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -gt 1500 ] ||
            ulimit -n 1501 || exit 1
        exec 1500>/dev/null 1023>/dev/null 3>/dev/null
        "$ZKR" lock /cli/fds sh -c 'ls /proc/self/fd' 2>/dev/null | sort -n | tr '\n' ' '
    ))
    expect "the command saw descriptors '$fds', not '0 1 2 3 '" \
        [ "$fds" = "0 1 2 3 " ]
    expect "nodes left behind" [ "$(zk_count /cli/fds)" -eq 0 ]
}

# Processes zkr inherited as children (here the reader of a shell's
# `2> >(...)`, a child of the shell that exec'ed zkr) are not the
# command's: not signalled, not waited for.
test_inherited_children_untouched() {
    local z
    : > "$WORK/log"
    rm -f "$WORK/cmdpid"
    bg bash -c "exec '$ZKR' lock /cli/inherited sh -c 'echo \$\$ > \"$WORK/cmdpid\"; sleep 60' 2> >(trap 'echo reader-term >> \"$WORK/log\"' TERM; cat > /dev/null; echo reader-eof >> '$WORK/log')"
    z=$!
    expect "command did not start" wait_for 10 [ -s "$WORK/cmdpid" ]
    kill -TERM "$z"
    expect "zkr did not end" wait_for 5 dead "$z"
    alive "$z" && kill -KILL "$z"
    wait_status "$z"
    expect "exit $st, not 143" [ "$st" -eq 143 ]
    expect "the reader did not see zkr's end" wait_for 3 grep -q reader-eof "$WORK/log"
    expect "the reader was signalled" [ "$(grep -c reader-term "$WORK/log")" -eq 0 ]
}

is_stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }

# A command that stopped itself: a forwarded SIGTERM is followed by
# SIGCONT, so zkr ends at once with 143 instead of hanging with the lock.
test_stopped_command_term() {
    local z c
    rm -f "$WORK/cmdpid"
    bg "$ZKR" lock /cli/selfstop sh -c "echo \$\$ > '$WORK/cmdpid'; kill -STOP \$\$; sleep 60"
    z=$!
    expect "command did not start" wait_for 10 [ -s "$WORK/cmdpid" ]
    c=$(cat "$WORK/cmdpid")
    expect "command did not stop" wait_for 5 is_stopped "$c"
    kill -TERM "$z"
    expect "zkr hangs with a stopped command" wait_for 3 dead "$z"
    alive "$z" && kill -KILL "$z"
    wait_status "$z"
    expect "exit $st, not 143" [ "$st" -eq 143 ]
    expect "lock not released" wait_for 3 nodes_eq /cli/selfstop 0
}

# A forwarded SIGTERM that the command ignores: SIGKILL after --grace.
test_term_then_grace() {
    local z t0 t1
    rm -f "$WORK/cmdpid"
    bg "$ZKR" lock --grace 1 /cli/grace sh -c "trap '' TERM; echo \$\$ > '$WORK/cmdpid'; while :; do sleep 0.1; done"
    z=$!
    expect "command did not start" wait_for 10 [ -s "$WORK/cmdpid" ]
    t0=$(now_ms)
    kill -TERM "$z"
    expect "SIGTERM-ignoring command not killed after the grace" \
        wait_for 5 dead "$z"
    t1=$(now_ms)
    alive "$z" && kill -KILL "$z"
    wait_status "$z"
    expect "exit $st, not 137" [ "$st" -eq 137 ]
    expect "killed after $((t1 - t0)) ms, before the 1 s grace" \
        [ $((t1 - t0)) -ge 900 ]
}

# A signal while connecting ends zkr at once with 128+signal.
test_signal_while_connecting() {
    local z
    bg "$ZKR" -s 127.0.0.1:1 --session-timeout 30000 lock /cli/x true
    z=$!
    sleep 0.3
    kill -TERM "$z"
    expect "SIGTERM ignored while connecting" wait_for 3 dead "$z"
    alive "$z" && kill -KILL "$z"
    wait_status "$z"
    expect "exit $st, not 143" [ "$st" -eq 143 ]
}

# Long waits and graces: every value up to 10^7 s is exact (64-bit ms),
# beyond is a usage error; a command exiting 4 can be told from a loss.
test_long_values() {
    local rc args
    rc=0
    "$ZKR" lock -w 2147484 /cli/long true || rc=$?
    expect "-w 2147484 exit $rc, not 0" [ "$rc" -eq 0 ]
    rc=0
    "$ZKR" lock -w 10000000 --grace 3000000 /cli/long true || rc=$?
    expect "-w 10^7 --grace 3000000 exit $rc, not 0" [ "$rc" -eq 0 ]
    for args in "-w 10000001" "--grace 1e8" "--lost-exit-code 256"; do
        rc=0
        # shellcheck disable=SC2086
        "$ZKR" lock $args /cli/long true 2>/dev/null || rc=$?
        expect "'$args' exit $rc, not 64" [ "$rc" -eq 64 ]
    done
    rc=0
    "$ZKR" lock --lost-exit-code 99 /cli/long sh -c 'exit 4' || rc=$?
    expect "the command's own 4 became $rc" [ "$rc" -eq 4 ]
}

# A value with a newline cannot forge a line of zkr's messages.
test_message_escaping() {
    local err
    err=$("$ZKR" lock "$(printf 'rel\nzkr: forged')" true 2>&1 >/dev/null)
    expect "a newline in an argument forged a line: '$err'" \
        [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
}

# Jobs queued so far: finished ones (read first) plus nodes present.
sem_queued() {
    local ended
    ended=$(grep -c end "$1")
    [ $((ended + $(zk_count /cli/sem))) -ge "$2" ]
}

# COMMAND is found as execvp(3) finds it (zkr(1), PATH), in every
# subcommand that runs one: a directory is not executable (126), also
# through $PATH; a script without #! is run by /bin/sh, as execvp and
# flock(1) do; a #! interpreter that is missing is 126.
test_command_lookup() {
    local rc sub
    mkdir -p "$WORK/bin/zkr-dir"
    printf 'exit 43\n' > "$WORK/bin/zkr-nosb"
    printf '#!/nonexistent/zkr-interp\nexit 0\n' > "$WORK/bin/zkr-badinterp"
    chmod 755 "$WORK/bin/zkr-nosb" "$WORK/bin/zkr-badinterp"
    # $sub unquoted: sem's option is two words.
    # shellcheck disable=SC2086
    for sub in lock "sem --permits 1" elect; do
        rc=0
        "$ZKR" $sub /cli/lookup "$WORK/bin/zkr-nosb" || rc=$?
        expect "$sub, a script without #!: exit $rc, not 43" [ "$rc" -eq 43 ]
        rc=0
        PATH="$WORK/bin:$PATH" "$ZKR" $sub /cli/lookup zkr-nosb || rc=$?
        expect "$sub, a script without #! in PATH: exit $rc, not 43" [ "$rc" -eq 43 ]
        rc=0
        "$ZKR" $sub /cli/lookup "$WORK/bin/zkr-dir" 2>/dev/null || rc=$?
        expect "$sub, a directory: exit $rc, not 126" [ "$rc" -eq 126 ]
        rc=0
        PATH="$WORK/bin:$PATH" "$ZKR" $sub /cli/lookup zkr-dir 2>/dev/null || rc=$?
        expect "$sub, a directory in PATH: exit $rc, not 126" [ "$rc" -eq 126 ]
        rc=0
        "$ZKR" $sub /cli/lookup "$WORK/bin/zkr-badinterp" 2>/dev/null || rc=$?
        expect "$sub, a missing #! interpreter: exit $rc, not 126" [ "$rc" -eq 126 ]
    done
    expect "the lock was left held" nodes_eq /cli/lookup 0
}

# Through $PATH, execvp(3) passes over a file it cannot run (no execute
# permission, a #! interpreter that is missing) and runs the next one of
# that name (zkr(1), PATH).
test_command_lookup_shadowed() {
    local rc sub path
    mkdir -p "$WORK/bin1" "$WORK/bin2"
    printf '#!/nonexistent/zkr-interp\nexit 0\n' > "$WORK/bin1/zkr-badfirst"
    printf 'exit 0\n' > "$WORK/bin1/zkr-noxfirst"
    printf '#!/bin/sh\nexit 44\n' > "$WORK/bin2/zkr-badfirst"
    printf '#!/bin/sh\nexit 45\n' > "$WORK/bin2/zkr-noxfirst"
    chmod 755 "$WORK/bin1/zkr-badfirst" "$WORK/bin2/zkr-badfirst" \
        "$WORK/bin2/zkr-noxfirst"
    chmod 644 "$WORK/bin1/zkr-noxfirst"
    # shellcheck disable=SC2086 # sem's option is two words
    for sub in lock "sem --permits 1" elect "queue take"; do
        path=/cli/lookup-s-${sub%% *}
        [ "$sub" = "queue take" ] && "$ZKR" queue put "$path" x > /dev/null
        rc=0
        PATH="$WORK/bin1:$WORK/bin2:$PATH" timeout "$(scaled 20)" "$ZKR" $sub "$path" zkr-noxfirst || rc=$?
        expect "$sub, a file without x shadowing an executable one: exit $rc, not 45" \
            [ "$rc" -eq 45 ]
        [ "$sub" = "queue take" ] && "$ZKR" queue put "$path" x > /dev/null
        rc=0
        PATH="$WORK/bin1:$WORK/bin2:$PATH" timeout "$(scaled 20)" "$ZKR" $sub "$path" zkr-badfirst || rc=$?
        expect "$sub, a bad #! interpreter shadowing an executable file: exit $rc, not 44" \
            [ "$rc" -eq 44 ]
    done
}

# A binary the kernel refuses (for another machine: ENOEXEC) is 126
# (zkr(1), EXIT STATUS), never read by /bin/sh as words to run, as a
# script without #! is.
test_foreign_binary() {
    local rc
    # An ELF header for a machine no kernel runs (e_machine 0xffff),
    # then a line that sh would run.
    printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000\002\000\377\377\001\000\000\000echo ran-by-sh\n' \
        > "$WORK/zkr-foreign"
    chmod 755 "$WORK/zkr-foreign"
    rc=0
    "$ZKR" lock /cli/lookup-elf "$WORK/zkr-foreign" > "$WORK/elf.out" 2>&1 || rc=$?
    expect "a foreign binary: exit $rc, not 126: $(cat "$WORK/elf.out")" [ "$rc" -eq 126 ]
    expect "a foreign binary was run by sh: $(cat "$WORK/elf.out")" \
        not_grep ran-by-sh "$WORK/elf.out"
}
not_grep() { ! grep -q "$@"; }

# COMMAND is looked up before anything is acquired: a command that cannot
# run is 127 or 126 at once, not after waiting for the lock, the permit or
# the leadership.
test_command_lookup_before_acquire() {
    local rc sub holder
    rm -f "$WORK/held"
    # shellcheck disable=SC2086 # sem's option is two words
    for sub in lock "sem --permits 1" elect; do
        bg "$ZKR" $sub /cli/lookup-held sh -c "touch '$WORK/held'; sleep 60"
        holder=$!
        expect "$sub: the holder did not start" wait_for 10 test -e "$WORK/held"
        rc=0
        timeout "$(scaled 10)" "$ZKR" $sub /cli/lookup-held "$WORK/zkr-missing" \
            2> /dev/null || rc=$?
        expect "$sub, held by another, a missing command: exit $rc, not 127" \
            [ "$rc" -eq 127 ]
        rc=0
        timeout "$(scaled 10)" "$ZKR" $sub /cli/lookup-held "$WORK" \
            2> /dev/null || rc=$?
        expect "$sub, held by another, a directory: exit $rc, not 126" \
            [ "$rc" -eq 126 ]
        kill -TERM "$holder"
        wait_status "$holder"
        rm -f "$WORK/held"
    done
}

# zkr sem -c 2 with six jobs: at most two run at once, started in arrival
# order.
test_semaphore_jobs() {
    local d=$WORK/sem i pids=()
    mkdir -p "$d"
    : > "$d/log"
    for i in 1 2 3 4 5 6; do
        # Each job holds until a second one has started (at most 20 s):
        # two permits must be seen held at once however slowly the jobs
        # arrive on a busy machine (the two first overlap; the later ones
        # find two starts logged and go on). Then job i holds i/2 s, so
        # that grants come one at a time, half a second apart, and the
        # start order is the grant order.
        bg "$ZKR" sem -c 2 /cli/sem sh -c "echo \"\$(date +%s%3N) start $i\" >> '$d/log'; n=0; while [ \$(grep -c start '$d/log') -lt 2 ] && [ \$n -lt 400 ]; do sleep 0.05; n=\$((n + 1)); done; sleep $((i / 2)).$((i % 2 * 5)); echo \"\$(date +%s%3N) end $i\" >> '$d/log'"
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
    expect "start order $(awk '$2 == "start" { printf "%s ", $3 }' "$d/log"): $(cat "$d/log")" \
        [ "$(awk '$2 == "start" { printf "%s", $3 }' "$d/log")" = 123456 ]
}

start_server
run_test test_mutual_exclusion_and_fence
run_test test_rmw_check_catches_no_lock
run_test test_nonblocking_and_wait
run_test test_exit_statuses
run_test test_command_lookup
run_test test_command_lookup_shadowed
run_test test_command_lookup_before_acquire
run_test test_foreign_binary
run_test test_child_dies_with_zkr
run_test test_background_child_holds_grant
run_test test_setsid_child_holds_grant
run_test test_group_kill
run_test test_timeout_kill
run_test test_guard_killed
run_test test_guard_stopped
run_test test_descriptors_0_to_2_only
run_test test_inherited_children_untouched
run_test test_stopped_command_term
run_test test_term_then_grace
run_test test_signal_while_connecting
run_test test_long_values
run_test test_message_escaping
run_test test_semaphore_jobs
done_testing
