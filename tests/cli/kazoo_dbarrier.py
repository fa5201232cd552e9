"""kazoo's DoubleBarrier as a participant beside `zkr barrier enter`
(tests/cli/test_cli_dbarrier.sh).

    python3 kazoo_dbarrier.py HOSTS PATH N SECONDS

enters the double barrier PATH of N participants, stays in the phase
SECONDS, then leaves. Prints, each with the time of CLOCK_MONOTONIC in ms
(the clock of the test's other participants: Java's System.nanoTime and
the test's own stamps read it too):

    entering MS   before enter()
    entered MS    enter() returned: the phase has begun
    leaving MS    before leave()
    left MS       leave() returned: every participant has left

kazoo's enter() and leave() have no timeout: the test bounds them.
"""
import sys
import time

from kazoo.client import KazooClient


def say(word):
    print(word, time.monotonic_ns() // 1000000, flush=True)


def main():
    hosts, path, n, secs = sys.argv[1:5]
    c = KazooClient(hosts=hosts, timeout=10.0)
    c.start(timeout=20)
    b = c.DoubleBarrier(path, int(n))
    say("entering")
    b.enter()
    if not b.participating:
        raise SystemExit("kazoo did not enter " + path)
    say("entered")
    time.sleep(float(secs))
    say("leaving")
    b.leave()
    say("left")
    c.stop()
    c.close()


main()
