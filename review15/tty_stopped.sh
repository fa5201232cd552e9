#!/bin/bash
# REPRO (review15): under a terminal, the command runs in a background
# process group (exec_command() setpgid(0,0), nobody calls tcsetpgrp), so a
# command that reads the terminal (a prompt, sudo, ssh, an editor, an
# interactive shell) gets SIGTTIN and stops; zkr holds the lock forever.
# flock(1)/timeout(1 --foreground) users expect the command to own the tty.
# Usage: ZKR_SERVER=host:port bash review15/tty_stopped.sh
cd "$(dirname "$0")/.." || exit 1
out=$(python3 review15/pty_run.py ./zkr lock /review15/tty -- \
    sh -c 'printf "continue? "; read x; echo "got $x"')
echo "$out"
case $out in
*"STILL RUNNING"*) echo "FINDING REPRODUCED: command stopped by SIGTTIN, lock held"; exit 1 ;;
*) echo "not reproduced"; exit 0 ;;
esac
