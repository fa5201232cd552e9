#!/usr/bin/env bash
# zkr lock / elect under a terminal (issue 15, review15): the command owns
# the terminal while it runs, as a command of flock(1) does, so that it may
# read it (a prompt, a password, an editor); zkr takes the terminal back
# when it ends; a command stopped by Ctrl-Z stops zkr with it, and the
# guard ends it at the session's safe deadline if zkr is not continued.
# Nested zkr (issue 28) is one job: stopped, continued and interrupted as
# one. ptyplay.py plays the job-control shell.
. "${srcdir:-.}/tests/cli/lib.sh"
zkr_need python3 python3

PTY="python3 $top_srcdir/tests/cli/ptyplay.py"
T=4000 # session timeout, ms

# ptyrun STEP... -- CMD...: runs CMD on a new terminal; output to
# $WORK/pty, status into $st.
ptyrun() {
    st=0
    $PTY "$(scaled 15)" "$@" > "$WORK/pty" 2>&1 || st=$?
}

# A prompt read by the command: answered, the command goes on.
test_command_reads_terminal() {
    ptyrun expect:continue? send:'yes\n' -- \
        "$ZKR" lock /cli/tty-read sh -c 'printf "continue? "; read x; echo "got $x"'
    expect "the command could not read the terminal: $(cat "$WORK/pty")" \
        [ "$st" -eq 0 ]
    expect "no answer read: $(cat "$WORK/pty")" grep -q "got yes" "$WORK/pty"
    expect "zkr's exit status: $(cat "$WORK/pty")" grep -q "^exit 0" "$WORK/pty"
    expect "lock left behind" [ "$(zk_count /cli/tty-read)" -eq 0 ]
}

# Output with `stty tostop` is the command's own: no SIGTTOU.
test_command_writes_with_tostop() {
    ptyrun -- sh -c "stty tostop; '$ZKR' lock /cli/tty-tostop sh -c 'echo printed'"
    expect "the command could not write: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "no output: $(cat "$WORK/pty")" grep -q "printed" "$WORK/pty"
}

# After the command, the terminal is zkr's caller's again: the shell that
# ran zkr reads it.
test_terminal_taken_back() {
    ptyrun expect:first send:'one\n' expect:second send:'two\n' -- \
        sh -c "'$ZKR' lock /cli/tty-back sh -c 'echo first; read x; echo \"got \$x\"'; echo second; read y; echo \"after \$y\""
    expect "the shell lost the terminal: $(cat "$WORK/pty")" grep -q "after two" "$WORK/pty"
    expect "exit: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
}

# Ctrl-Z reaches the command (its group is the foreground): zkr stops
# too (its caller sees a stopped job); continued, it gives the terminal
# back to the command and continues it.
test_ctrl_z_stops_zkr() {
    ptyrun expect:ready send:'\x1a' stopped sleep:0.3 cont send:'go\n' \
        expect:'got go' -- \
        "$ZKR" lock /cli/tty-z sh -c 'echo ready; read x; echo "got $x"'
    expect "Ctrl-Z, fg: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "the command's status: $(cat "$WORK/pty")" grep -q "^exit 0" "$WORK/pty"
}

# Nested zkr (a lock inside a lock, a queue's item worked on under a
# lock) is one job: Ctrl-Z reaches the innermost command (its group has
# the terminal); every zkr stops, so the shell sees its job stopped; fg
# continues every level, the innermost command gets the terminal back and
# reads it; every grant is released at the end.
test_nested_ctrl_z_fg() {
    ptyrun expect:ready send:'\x1a' stopped sleep:0.3 cont send:'go\n' \
        expect:'got go' -- \
        "$ZKR" lock /cli/tty-outer "$ZKR" lock /cli/tty-mid \
        "$ZKR" lock /cli/tty-inner sh -c 'echo ready; read x; echo "got $x"'
    expect "nested, Ctrl-Z, fg: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "the shell did not see a job-control stop: $(cat "$WORK/pty")" \
        grep -q "^stopped by $(kill -l TSTP)" "$WORK/pty"
    expect "the command's status: $(cat "$WORK/pty")" grep -q "^exit 0" "$WORK/pty"
    for l in outer mid inner; do
        expect "/cli/tty-$l left held" wait_for 5 nodes_eq /cli/tty-$l 0
    done
}

# The shell's kill -TSTP %1 of a nested zkr: the same as Ctrl-Z, one
# job stopped; fg: every level continues, the innermost command has the
# terminal.
test_nested_tstp_fg() {
    ptyrun expect:ready signal:TSTP stopped sleep:0.3 cont send:'go\n' \
        expect:'got go' -- \
        "$ZKR" lock /cli/tty-touter "$ZKR" lock /cli/tty-tinner \
        sh -c 'echo ready; read x; echo "got $x"'
    expect "nested, kill -TSTP, fg: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "the command's status: $(cat "$WORK/pty")" grep -q "^exit 0" "$WORK/pty"
    for l in touter tinner; do
        expect "/cli/tty-$l left held" wait_for 5 nodes_eq /cli/tty-$l 0
    done
}

# Ctrl-Z of a command under queue take under lock (and under lock under
# queue take), fg, then Ctrl-C: the shell sees its job stopped by SIGTSTP,
# the command continues, Ctrl-C ends the job (the interrupted command's
# status), the item is given back and the lock released.
test_nested_ctrl_z_ctrl_c() {
    local order
    for order in lock-queue queue-lock; do
        "$ZKR" queue put /cli/tty-q-$order item > /dev/null
        if [ $order = lock-queue ]; then
            set -- "$ZKR" lock /cli/tty-qlock-$order \
                "$ZKR" queue take -n /cli/tty-q-$order
        else
            set -- "$ZKR" queue take -n /cli/tty-q-$order \
                "$ZKR" lock /cli/tty-qlock-$order
        fi
        ptyrun expect:ready send:'\x1a' stopped sleep:0.3 cont send:'go\n' \
            expect:again send:'\x03' -- "$@" \
            sh -c 'echo ready; read x < /dev/tty; echo again; read y < /dev/tty'
        expect "$order: Ctrl-Z, fg, Ctrl-C: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
        expect "$order: the shell did not see a job-control stop: $(cat "$WORK/pty")" \
            grep -q "^stopped by $(kill -l TSTP)\$" "$WORK/pty"
        expect "$order: not interrupted: $(cat "$WORK/pty")" \
            grep -q "^exit 130" "$WORK/pty"
        expect "$order: /cli/tty-qlock-$order left held" \
            wait_for 5 nodes_eq /cli/tty-qlock-$order 0
        expect "$order: the item was not given back" \
            [ "$("$ZKR" queue len /cli/tty-q-$order)" -eq 1 ]
    done
}

# Stopped and never continued, the command does not hold the lock
# forever: the guard kills it at the session's safe deadline.
test_stopped_command_killed() {
    local cpid
    rm -f "$WORK/cmd.pid"
    bg $PTY "$(scaled 30)" expect:ready send:'\x1a' stopped sleep:"$(scaled 20)" -- \
        "$ZKR" --session-timeout $T lock /cli/tty-stop sh -c "echo \$\$ > '$WORK/cmd.pid'; echo ready; read x"
    expect "the command did not start" wait_for 10 test -s "$WORK/cmd.pid"
    cpid=$(cat "$WORK/cmd.pid")
    expect "stopped command $cpid alive past the session timeout" \
        wait_for "$(awk -v t=$T 'BEGIN { print 2 * t / 1000 }')" dead "$cpid"
    expect "the lock is held after the session timeout" \
        wait_for 10 "$ZKR" lock -n /cli/tty-stop true
}

# Nested and stopped, never continued: the guards still keep their
# zkr's safe deadlines (a zkr stops its tree but never a guard): the
# innermost command is killed, and both locks are free, within about two
# session timeouts.
test_nested_stopped_killed() {
    local cpid
    rm -f "$WORK/cmd.pid"
    bg $PTY "$(scaled 30)" expect:ready send:'\x1a' stopped sleep:"$(scaled 20)" -- \
        "$ZKR" --session-timeout $T lock /cli/tty-nstop-outer \
        "$ZKR" --session-timeout $T lock /cli/tty-nstop-inner \
        sh -c "echo \$\$ > '$WORK/cmd.pid'; echo ready; read x"
    expect "the command did not start" wait_for 10 test -s "$WORK/cmd.pid"
    cpid=$(cat "$WORK/cmd.pid")
    expect "stopped command $cpid alive past the session timeout" \
        wait_for "$(awk -v t=$T 'BEGIN { print 2 * t / 1000 }')" dead "$cpid"
    expect "the outer lock is held after the session timeout" \
        wait_for 10 "$ZKR" lock -n /cli/tty-nstop-outer true
    expect "the inner lock is held after the session timeout" \
        wait_for 10 "$ZKR" lock -n /cli/tty-nstop-inner true
}

# Ctrl-Z, the shell's bg (SIGCONT, the terminal kept by the shell), then
# fg (the terminal to the job, SIGCONT): the job is in the foreground, so
# its command reads the terminal, at every depth, without stopping again.
test_ctrl_z_bg_fg() {
    local cmd flag=$WORK/fg-done
    # In the background (bg) the command does not touch the terminal; it
    # reads only once the shell's fg is done (ptyplay's touch opens the
    # FIFO), whatever the load. It waits in open(), without forking: a
    # Ctrl-Z that finds dash between vfork() and exec() stops the child
    # while dash waits for it uninterruptibly, and the job never stops.
    cmd="echo ready; read f < '$flag'; read x; echo \"got \$x\""
    rm -f "$flag"
    mkfifo "$flag"
    ptyrun expect:ready send:'\x1a' stopped signal:CONT sleep:0.3 cont \
        touch:"$flag" send:'go\n' expect:'got go' -- \
        "$ZKR" lock /cli/tty-bg sh -c "$cmd"
    expect "Ctrl-Z, bg, fg: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "the command's status: $(cat "$WORK/pty")" grep -q "^exit 0" "$WORK/pty"
    rm -f "$flag"
    mkfifo "$flag"
    ptyrun expect:ready send:'\x1a' stopped signal:CONT sleep:0.3 cont \
        touch:"$flag" send:'go\n' expect:'got go' -- "$ZKR" lock /cli/tty-bg-outer \
        "$ZKR" lock /cli/tty-bg-inner sh -c "$cmd"
    expect "nested, Ctrl-Z, bg, fg: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "the command's status: $(cat "$WORK/pty")" grep -q "^exit 0" "$WORK/pty"
}

# No job control (a service, a command under setsid: an orphaned process
# group): the kernel discards SIGTSTP there, as nobody would continue the
# job. zkr, whose command's group stands for its own, does not stop
# either: a command that stops itself with SIGTSTP is continued, and a
# SIGTSTP sent to zkr leaves it running; zkr never stops forever with
# nobody to continue it.
test_orphaned_group_never_stops() {
    local zpid
    rm -f "$WORK/zkr.pid"
    setsid -f sh -c "echo \$\$ > '$WORK/zkr.pid'; exec '$ZKR' --session-timeout $T lock /cli/tty-orphan sh -c 'kill -TSTP \$\$; echo resumed'" \
        < /dev/null > "$WORK/orphan.out" 2>&1
    expect "zkr did not start" wait_for 10 test -s "$WORK/zkr.pid"
    zpid=$(cat "$WORK/zkr.pid")
    expect "zkr $zpid still there (stopped?) after two session timeouts: $(cat "$WORK/orphan.out")" \
        wait_for "$(awk -v t=$T 'BEGIN { print 2 * t / 1000 }')" dead "$zpid"
    expect "the command was not continued: $(cat "$WORK/orphan.out")" \
        grep -q "^resumed" "$WORK/orphan.out"
    kill -KILL "$zpid" 2>/dev/null
    rm -f "$WORK/zkr.pid"
    setsid -f sh -c "echo \$\$ > '$WORK/zkr.pid'; exec '$ZKR' --session-timeout $T lock /cli/tty-orphan sh -c 'sleep 1; echo slept'" \
        < /dev/null > "$WORK/orphan.out" 2>&1
    expect "zkr did not start" wait_for 10 test -s "$WORK/zkr.pid"
    zpid=$(cat "$WORK/zkr.pid")
    expect "the command did not start" wait_for 10 nodes_eq /cli/tty-orphan 1
    kill -TSTP "$zpid"
    expect "zkr $zpid still there (stopped?) after two session timeouts: $(cat "$WORK/orphan.out")" \
        wait_for "$(awk -v t=$T 'BEGIN { print 2 * t / 1000 }')" dead "$zpid"
    expect "the command was not continued: $(cat "$WORK/orphan.out")" \
        grep -q "^slept" "$WORK/orphan.out"
    kill -KILL "$zpid" 2>/dev/null
    expect "/cli/tty-orphan left held" wait_for 10 nodes_eq /cli/tty-orphan 0
}

# A command that leaves the process group zkr gave it (setpgid() into
# its guard's group) and then reads the terminal is stopped by SIGTTIN,
# as any process outside the foreground group: handing the terminal to
# its old group does not help it, so zkr stops as a job and the shell sees
# a stopped job, never a command stopped unseen with the lock held.
# kill -TERM %1, then fg, ends the job and releases the lock.
test_command_leaves_its_group() {
    ptyrun expect:ready stopped signal:TERM cont -- \
        "$ZKR" lock /cli/tty-pgid python3 -c 'import os
os.setpgid(0, os.getpgid(os.getppid()))
print("ready", flush=True)
input()'
    expect "left its group, read the terminal: $(cat "$WORK/pty")" [ "$st" -eq 0 ]
    expect "the shell did not see a job-control stop: $(cat "$WORK/pty")" \
        grep -q "^stopped by $(kill -l TTIN)" "$WORK/pty"
    expect "/cli/tty-pgid left held" wait_for 5 nodes_eq /cli/tty-pgid 0
}

start_server
run_test test_command_reads_terminal
run_test test_command_leaves_its_group
run_test test_command_writes_with_tostop
run_test test_terminal_taken_back
run_test test_ctrl_z_stops_zkr
run_test test_stopped_command_killed
run_test test_nested_ctrl_z_fg
run_test test_nested_tstp_fg
run_test test_nested_ctrl_z_ctrl_c
run_test test_nested_stopped_killed
run_test test_ctrl_z_bg_fg
run_test test_orphaned_group_never_stops
done_testing
