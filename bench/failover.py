#!/usr/bin/python3
"""bench/failover.py: election failover between processes (docs/BENCHMARKS.md).

    failover.py --impl NAME --kind kill|term --candidates K --rounds R
                --session-ms MS -- CMD...

Starts K candidate processes, each `CMD... candidate PATH MS` (zkr-bench,
CuratorBench or kazoo_bench.py: every one joins the election at PATH with a
session timeout of MS and prints "joined", then "elected MICROS" when it
leads). Each round waits for the leader, lets it lead for half a second,
then ends its process: `kill` sends SIGKILL (the process dies; the others
learn it only when the server expires its session, so the failover is
bounded below by the session timeout), `term` sends SIGTERM (the candidate
resigns: it leaves the election and closes its session). The failover is
from the signal to the next candidate's "elected" line (both clocks are
this machine's CLOCK_REALTIME, in microseconds). A new candidate replaces
the one ended, so K stay in the race. Prints one line:

    impl=NAME mode=failover kind=KIND candidates=K rounds=R session_ms=MS
    failover_p50_ms=... failover_p99_ms=... failover_min_ms=...
    failover_max_ms=...

Every candidate process is killed when the run ends, also on an error.
"""
import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time


def now_us():
    return time.time_ns() // 1000


class Candidate:
    def __init__(self, cmd, events, index):
        self.index = index
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        self.thread = threading.Thread(target=self.read, args=(events,),
                                       daemon=True)
        self.thread.start()

    def read(self, events):
        for line in self.proc.stdout:
            events.put((self.index, line.split()))
        events.put((self.index, ["exited"]))

    def end(self, sig):
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass


def percentile(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p / 100.0))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", required=True)
    ap.add_argument("--kind", choices=("kill", "term"), required=True)
    ap.add_argument("--candidates", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--session-ms", type=int, default=2000)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = [c for c in a.cmd if c != "--"]
    if not cmd or a.candidates < 2 or a.rounds < 1:
        ap.error("a command, at least 2 candidates and 1 round")
    path = "/zkr-bench/failover-%s-%d-%d" % (a.impl, os.getpid(),
                                             now_us() % 100000)
    events = queue.Queue()
    cands = {}
    serial = [0]
    # A round's wait: the session's expiry, the server's expiry tick, the
    # election; a candidate's start (a JVM) may take seconds.
    patience = a.session_ms / 1000.0 * 3 + 30

    def start():
        i = serial[0]
        serial[0] += 1
        cands[i] = Candidate(cmd + ["candidate", path, str(a.session_ms)],
                             events, i)
        while True:  # joined, before the next one starts: a known order
            j, ev = events.get(timeout=patience)
            if ev[0] == "elected":
                pending.append((j, int(ev[1])))
            elif ev[0] == "exited" and j not in ended:
                raise SystemExit("failover: candidate %d exited" % j)
            elif j == i and ev[0] == "joined":
                return

    def next_elected(not_index):
        while pending:
            j, t = pending.pop(0)
            if j != not_index:
                return j, t
        deadline = time.monotonic() + patience
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit("failover: no leader within %.0f s" % patience)
            j, ev = events.get(timeout=left)
            if ev[0] == "elected" and j != not_index:
                return j, int(ev[1])
            if ev[0] == "exited" and j != not_index and j not in ended:
                raise SystemExit("failover: candidate %d exited" % j)

    pending = []
    samples = []
    ended = set()  # ended on purpose: their exit is expected
    try:
        for _ in range(a.candidates):
            start()
        leader, _ = next_elected(-1)
        for _ in range(a.rounds):
            time.sleep(0.5)
            t0 = now_us()
            cands[leader].end(signal.SIGKILL if a.kind == "kill"
                              else signal.SIGTERM)
            j, t = next_elected(leader)
            samples.append((t - t0) / 1000.0)
            cands[leader].proc.wait(timeout=patience)
            ended.add(leader)
            del cands[leader]
            leader = j
            start()
    finally:
        for c in cands.values():
            c.end(signal.SIGKILL)
        for c in cands.values():
            c.proc.wait()
    print("impl=%s mode=failover kind=%s candidates=%d rounds=%d "
          "session_ms=%d failover_p50_ms=%.0f failover_p99_ms=%.0f "
          "failover_min_ms=%.0f failover_max_ms=%.0f"
          % (a.impl, a.kind, a.candidates, a.rounds, a.session_ms,
             percentile(samples, 50), percentile(samples, 99),
             min(samples), max(samples)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
