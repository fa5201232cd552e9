"""Runs a command on a new pseudo-terminal as a job-control shell would
(bash, zsh) and plays a script against it. Used by tests/cli/test_cli_tty.sh.

The shell: a process that is the session leader and holds the terminal as
its controlling terminal; COMMAND runs as its job, in a process group of
its own, given the terminal's foreground. When the job stops, the shell
takes the terminal back; `cont` is the shell's `fg`: the terminal to the
job's group, then SIGCONT to that group.

usage: ptyplay.py TIMEOUT STEP... -- COMMAND [ARG...]
steps:  expect:TEXT  wait until the output holds TEXT (since the last
                     expect)
        send:TEXT    write TEXT (\\n, \\x1a understood) to the terminal
        stopped      wait until COMMAND is stopped (waitpid WUNTRACED)
        cont         fg: the terminal and SIGCONT to COMMAND's group
        signal:NAME  the signal to COMMAND's group (kill -NAME %1); CONT
                     after a stop is bg: running again
        sleep:SEC
        touch:PATH   create the file PATH (a flag the command waits for)
Every wait ends at TIMEOUT seconds. At the end, waits for COMMAND to exit.
Prints "stopped by N" at each stop, "exit N" (or "timeout at STEP", after
which COMMAND's process group is killed) and the output.
Exit status: 0 if every step passed and COMMAND exited, 1 otherwise."""
import ctypes
import fcntl
import os
import select
import signal
import sys
import termios
import time

timeout = float(sys.argv[1])
sep = sys.argv.index("--")
steps, cmd = sys.argv[2:sep], sys.argv[sep + 1:]
master, slave = os.openpty()

# The shell is a child of ours: a process group leader (as a process run
# from a shell is) cannot start a session.
parent = os.getpid()
shell = os.fork()
if shell != 0:
    os.close(slave)
    os.close(master)
    _, st = os.waitpid(shell, 0)
    sys.exit(os.waitstatus_to_exitcode(st))

# The shell dies with us (a test's cleanup kills us): never a script
# played on, printing, after the test. Its end hangs the terminal up,
# which ends the job (SIGHUP).
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG
if os.getppid() != parent:
    os._exit(1)
os.setsid()
fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
# As a job-control shell: its own terminal signals are ignored.
for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
    signal.signal(sig, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(slave, os.getpid())
    # The job starts with the terminal signals' default actions, as a
    # login shell's job on a new terminal does, whatever ptyplay inherited:
    # started in the background by a shell without job control (a script's
    # `cmd &`, a CI step), ptyplay has SIGINT and SIGQUIT ignored, and an
    # ignored disposition survives exec: Ctrl-C would end nothing.
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN,
                signal.SIGTTOU):
        signal.signal(sig, signal.SIG_DFL)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.close(slave)
    os.close(master)
    os.execvp(cmd[0], cmd)
try:
    os.setpgid(pid, pid)  # also here: no race with the job's own
    os.tcsetpgrp(slave, pid)
except OSError:
    pass

out = b""
seen = 0
status = None


def pump(until):
    """Reads output until until() or the timeout; True if until()."""
    global out, status
    end = time.time() + timeout
    while time.time() < end:
        if until():
            return True
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                d = os.read(master, 4096)
            except OSError:
                d = b""
            out += d
        if status is None:
            p, st = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if p and os.WIFSTOPPED(st):
                status = "stopped"
                print("stopped by %d" % os.WSTOPSIG(st))
                os.tcsetpgrp(slave, os.getpgrp())  # the shell's again
            elif p:
                status = os.waitstatus_to_exitcode(st)
    return until()


def finish(msg, rc):
    global out
    while select.select([master], [], [], 0.2)[0]:  # what is left to read
        try:
            d = os.read(master, 4096)
        except OSError:
            break
        if not d:
            break
        out += d
    print(msg)
    print("output:", out.decode("utf-8", "replace"))
    sys.stdout.flush()
    if rc:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(rc)


for step in steps:
    kind, _, arg = step.partition(":")
    if kind == "expect":
        text = arg.encode()
        if not pump(lambda: text in out[seen:]):
            finish("timeout at " + step, 1)
        seen = out.index(text, seen) + len(text)
    elif kind == "send":
        os.write(master, arg.encode().decode("unicode_escape").encode())
    elif kind == "stopped":
        if not pump(lambda: status == "stopped"):
            finish("timeout at " + step, 1)
    elif kind == "cont":
        status = None
        os.tcsetpgrp(slave, pid)
        os.killpg(pid, signal.SIGCONT)
    elif kind == "signal":
        if arg == "CONT" and status == "stopped":
            status = None  # running again (as bg does), waited for anew
        os.killpg(pid, getattr(signal, "SIG" + arg))
    elif kind == "sleep":
        time.sleep(float(arg))
    elif kind == "touch":
        open(arg, "a").close()
if not pump(lambda: isinstance(status, int)):
    finish("timeout at the end (status %s)" % status, 1)
finish("exit %d" % status, 0)
