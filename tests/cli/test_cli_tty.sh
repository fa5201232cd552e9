#!/usr/bin/env bash
# zkr lock / elect under a terminal (issue 15, review15): the command owns
# the terminal while it runs, as a command of flock(1) does, so that it may
# read it (a prompt, a password, an editor); zkr takes the terminal back
# when it ends; a command stopped by Ctrl-Z stops zkr with it, and the
# guard ends it at the session's safe deadline if zkr is not continued.
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

start_server
run_test test_command_reads_terminal
run_test test_command_writes_with_tostop
run_test test_terminal_taken_back
run_test test_ctrl_z_stops_zkr
run_test test_stopped_command_killed
done_testing
