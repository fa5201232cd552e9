"""Runs a command on a new pseudo-terminal, as its session leader in the
terminal's foreground process group (like a login shell's job), and plays
a script against it. Used by tests/cli/test_cli_tty.sh.

usage: pty.py TIMEOUT STEP... -- COMMAND [ARG...]
steps:  expect:TEXT  wait until the output holds TEXT (since the last
                     expect)
        send:TEXT    write TEXT (\\n, \\x1a understood) to the terminal
        stopped      wait until COMMAND is stopped (waitpid WUNTRACED)
        cont         SIGCONT to COMMAND
        sleep:SEC
At the end, waits for COMMAND to exit. Prints "exit N" (or "timeout at
STEP", after which COMMAND's process group is killed) and the output.
Exit status: 0 if every step passed and COMMAND exited, 1 otherwise."""
import os
import pty
import select
import signal
import sys
import time

timeout = float(sys.argv[1])
sep = sys.argv.index("--")
steps, cmd = sys.argv[2:sep], sys.argv[sep + 1:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)

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
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                d = os.read(fd, 4096)
            except OSError:
                d = b""
            out += d
        if status is None:
            p, st = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if p and os.WIFSTOPPED(st):
                status = "stopped"
            elif p:
                status = os.waitstatus_to_exitcode(st)
    return until()


def finish(msg, rc):
    global out
    while select.select([fd], [], [], 0.2)[0]:  # what is left to read
        try:
            d = os.read(fd, 4096)
        except OSError:
            break
        if not d:
            break
        out += d
    print(msg)
    print("output:", out.decode("utf-8", "replace"))
    if rc:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    sys.exit(rc)


for step in steps:
    kind, _, arg = step.partition(":")
    if kind == "expect":
        text = arg.encode()
        if not pump(lambda: text in out[seen:]):
            finish("timeout at " + step, 1)
        seen = out.index(text, seen) + len(text)
    elif kind == "send":
        os.write(fd, arg.encode().decode("unicode_escape").encode())
    elif kind == "stopped":
        if not pump(lambda: status == "stopped"):
            finish("timeout at " + step, 1)
    elif kind == "cont":
        status = None
        os.kill(pid, signal.SIGCONT)
    elif kind == "sleep":
        time.sleep(float(arg))
if not pump(lambda: isinstance(status, int)):
    finish("timeout at the end (status %s)" % status, 1)
finish("exit %d" % status, 0)
