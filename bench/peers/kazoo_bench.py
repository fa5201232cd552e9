#!/usr/bin/python3
"""bench/peers/kazoo_bench.py: kazoo's side of the benchmarks in
docs/BENCHMARKS.md, with the workloads and output lines of zkr-bench.

    /usr/bin/python3 kazoo_bench.py -s HOSTS MODE ARGS...

MODE is uncontended CYCLES | contended K SECONDS | herd W ROUNDS |
scale N | semaphore PERMITS K SECONDS | election K ROUNDS | many N W |
qput N W | qtake K N SECS | qdrain N K SECS | qnotify W PUTS |
candidate PATH SESSION_MS (one process of bench/failover.py).
Locks are kazoo.recipe.lock.Lock, the semaphore kazoo's Semaphore, the
election kazoo's Election, the work queue kazoo.recipe.queue.LockingQueue. Every contender has its own KazooClient (its own
ZooKeeper session); they are threads of this one process, so kazoo's figures
include the interpreter's global lock, as any threaded kazoo program would.
Watch notifications (herd) are counted by wrapping Lock._watch_predecessor,
the only watch callback kazoo's Lock sets; for the queue (qnotify), by
wrapping the watch function LockingQueue gives get_children (one wrapper
per function, so that kazoo's set of watchers still holds it once).
Use Debian's interpreter (/usr/bin/python3), which python3-kazoo belongs to.
"""
import gc
import logging
import os
import queue
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe import lock as kazoo_lock

HOSTS = "127.0.0.1:2181"
ROOT = None
WATCH_EVENTS = [0]
WATCH_MU = threading.Lock()

_original_watch = kazoo_lock.Lock._watch_predecessor


def _counting_watch(self, event):
    with WATCH_MU:
        WATCH_EVENTS[0] += 1
    return _original_watch(self, event)


kazoo_lock.Lock._watch_predecessor = _counting_watch

_original_get_children = KazooClient.get_children
_WRAPPED = {}


def _counting_get_children(self, path, watch=None, include_data=False):
    if watch is not None:
        with WATCH_MU:
            w = _WRAPPED.get(watch)
            if w is None:
                def w(event, _inner=watch):
                    with WATCH_MU:
                        WATCH_EVENTS[0] += 1
                    return _inner(event)
                _WRAPPED[watch] = w
        watch = w
    return _original_get_children(self, path, watch, include_data)


KazooClient.get_children = _counting_get_children


def now_ns():
    return time.monotonic_ns()


def client():
    c = KazooClient(hosts=HOSTS, timeout=10.0)
    c.start(timeout=30)
    return c


def percentile(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    i = int(p / 100.0 * len(v) + 0.5)
    if i > 0:
        i -= 1
    return v[min(i, len(v) - 1)]


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def time_cycles(cycle, cycles):
    """Warms up, then times `cycles` calls of cycle: the result line's
    "cycles=... us_per_cycle=... p50_us=... p99_us=..."."""
    for _ in range(cycles // 10 + 10):
        cycle()
    lat = []
    t0 = now_ns()
    for _ in range(cycles):
        t = now_ns()
        cycle()
        lat.append((now_ns() - t) / 1e3)
    total = (now_ns() - t0) / 1e3
    return "cycles=%d us_per_cycle=%.1f p50_us=%.1f p99_us=%.1f" % (
        cycles, total / cycles, percentile(lat, 50), percentile(lat, 99))


def multi(k, cycles):
    """kazoo has no multi-lock: K Locks taken in one order, released in
    the reverse one (what a kazoo user writes)."""
    c = client()
    locks = [c.Lock(ROOT + "/multi-%02d" % i, "bench") for i in range(k)]

    def cycle():
        for lk in locks:
            lk.acquire()
        for lk in reversed(locks):
            lk.release()

    print("impl=kazoo mode=multi k=%d %s" % (k, time_cycles(cycle, cycles)))
    c.stop()


def uncontended(cycles):
    c = client()
    lk = c.Lock(ROOT + "/uncontended", "bench")

    def cycle():
        lk.acquire()
        lk.release()

    print("impl=kazoo mode=uncontended %s" % time_cycles(cycle, cycles))
    c.stop()
    c.close()


def contenders(mode, permits, k, seconds):
    path = ROOT + "/" + mode
    clients = [client() for _ in range(k)]
    if mode == "semaphore":
        recipes = [c.Semaphore(path, "bench", max_leases=permits)
                   for c in clients]
    else:
        recipes = [c.Lock(path, "bench") for c in clients]
    mu = threading.Lock()
    state = {"holding": 0, "violations": 0, "last_release": 0}
    handoff = []
    counts = [0] * k
    ready = threading.Barrier(k)
    until = now_ns() + seconds * 1000000000

    def run(me):
        r = recipes[me]
        ready.wait()
        while now_ns() < until:
            r.acquire()
            t1 = now_ns()
            with mu:
                state["holding"] += 1
                if state["holding"] > permits:
                    state["violations"] += 1
                rel = state["last_release"]
                if t1 < until:
                    counts[me] += 1
                    if rel and permits == 1:
                        handoff.append((t1 - rel) / 1e3)
                state["holding"] -= 1
                state["last_release"] = now_ns()
            r.release()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(counts)
    if mode == "semaphore":
        print("impl=kazoo mode=semaphore permits=%d contenders=%d grants=%d "
              "grants_per_s=%.0f min_per_client=%d max_per_client=%d "
              "violations=%d" % (permits, k, total, total / seconds,
                                 min(counts), max(counts),
                                 state["violations"]))
    else:
        print("impl=kazoo mode=contended contenders=%d grants=%d "
              "grants_per_s=%.0f min_per_client=%d max_per_client=%d "
              "violations=%d handoff_p50_us=%.0f handoff_p99_us=%.0f"
              % (k, total, total / seconds, min(counts), max(counts),
                 state["violations"], percentile(handoff, 50),
                 percentile(handoff, 99)))
    for c in clients:
        c.stop()
        c.close()


def wait_queued(c, path, expect):
    for _ in range(10000):
        if c.exists(path) and len(c.get_children(path)) >= expect:
            return
        time.sleep(0.001)
    raise RuntimeError("waiters did not queue")


def close_all(clients):
    """Ends the sessions (so the server does not carry them into the next
    measurement) while contender threads are still blocked in kazoo: their
    ConnectionClosedError is expected and not printed."""
    threading.excepthook = lambda args: None
    stoppers = [threading.Thread(target=c.stop) for c in clients]
    for t in stoppers:
        t.start()
    for t in stoppers:
        t.join()


def herd(w, rounds):
    """One holder, W waiters; each contender thread loops acquire, report,
    wait to be told to release, release (and so queues again at the back).
    """
    n = w + 1
    path = ROOT + "/herd-%d" % w
    clients = [client() for _ in range(n)]
    release_now = [threading.Semaphore(0) for _ in range(n)]
    release_at = [0] * n
    granted = queue.Queue()
    running = [True]

    def run(me):
        lk = clients[me].Lock(path, "bench")
        while running[0]:
            lk.acquire()
            granted.put((me, now_ns()))
            release_now[me].acquire()
            release_at[me] = now_ns()
            if not running[0]:
                return
            lk.release()

    for i in range(n):
        t = threading.Thread(target=run, args=(i,), daemon=True)
        t.start()
        if i == 0:
            granted.get()
        else:
            wait_queued(clients[0], path, i + 1)
    time.sleep(0.2)
    holder = 0
    hand = []
    e0 = WATCH_EVENTS[0]
    for _ in range(rounds):
        release_now[holder].release()
        me, t = granted.get()
        hand.append((t - release_at[holder]) / 1e3)
        wait_queued(clients[0], path, n)
        holder = me
    time.sleep(0.2)
    e1 = WATCH_EVENTS[0]
    print("impl=kazoo mode=herd waiters=%d releases=%d "
          "watch_events_per_release=%.2f handoff_p50_us=%.0f "
          "handoff_p99_us=%.0f" % (w, rounds, (e1 - e0) / rounds,
                                   percentile(hand, 50),
                                   percentile(hand, 99)))
    running[0] = False
    close_all(clients)


def scale(n):
    c = client()
    gc.collect()
    r0 = rss_bytes()
    locks = []
    t0 = now_ns()
    for i in range(n):
        lk = c.Lock("%s/scale/l%06d" % (ROOT, i), "bench")
        lk.acquire()
        locks.append(lk)
    secs = (now_ns() - t0) / 1e9
    gc.collect()
    r1 = rss_bytes()
    print("impl=kazoo mode=scale locks=%d acquires_per_s=%.0f "
          "bytes_per_lock=%.0f" % (n, n / secs, (r1 - r0) / n))
    for lk in locks:
        lk.release()
    c.stop()
    c.close()


def election(k, rounds):
    """K candidates run kazoo's Election; the leader's function returns when
    told to (leaving), and its thread runs for election again at the back.
    """
    path = ROOT + "/election"
    clients = [client() for _ in range(k)]
    leave_now = [threading.Semaphore(0) for _ in range(k)]
    leave_at = [0] * k
    led = queue.Queue()
    running = [True]

    def run(me):
        e = clients[me].Election(path, "bench")

        def lead():
            led.put((me, now_ns()))
            leave_now[me].acquire()
            leave_at[me] = now_ns()

        while running[0]:
            e.run(lead)

    threads = []
    for i in range(k):
        t = threading.Thread(target=run, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        if i == 0:
            led.get()
    time.sleep(0.2)
    leader = 0
    hand = []
    for _ in range(rounds):
        leave_now[leader].release()
        me, t = led.get()
        hand.append((t - leave_at[leader]) / 1e3)
        leader = me
    print("impl=kazoo mode=election candidates=%d rounds=%d "
          "handoff_p50_us=%.0f handoff_p99_us=%.0f"
          % (k, rounds, percentile(hand, 50), percentile(hand, 99)))
    running[0] = False
    close_all(clients)


def many(n, w):
    """One session acquires and releases n distinct uncontended locks, with
    w threads, each taking the next lock (a Lock on its own path): at most
    w in flight. The n lock directories are made before the clock starts
    (pipelined), as for every implementation."""
    c = client()
    c.ensure_path(ROOT + "/many")
    paths = ["%s/many/l%06d" % (ROOT, i) for i in range(n)]
    for i in range(0, n, 256):
        for r in [c.create_async(p) for p in paths[i:i + 256]]:
            r.get()
    nxt = iter(range(n))
    mu = threading.Lock()
    failed = []

    def run():
        try:
            while True:
                with mu:
                    i = next(nxt, None)
                if i is None:
                    return
                lk = c.Lock(paths[i], "bench")
                lk.acquire()
                lk.release()
        except Exception as e:  # reported after the join, then exit 1
            failed.append(e)

    threads = [threading.Thread(target=run) for _ in range(w)]
    t0 = now_ns()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = (now_ns() - t0) / 1e9
    if failed:
        raise SystemExit("kazoo_bench: many: %r" % failed[0])
    print("impl=kazoo mode=many n=%d w=%d locks_per_s=%.0f" % (n, w, n / secs))
    c.stop()
    c.close()


# ------------------------------------------------------------ work queue

def item(i):
    return b"item-%07d" % i


def workq(c, path):
    """kazoo's LockingQueue: an item is locked by an ephemeral node under
    PATH/taken while consumed; consume() deletes item and lock in one
    transaction."""
    return c.LockingQueue(path)


def qput(n, w):
    """N puts from one session, W threads each putting synchronously."""
    c = client()
    q = workq(c, ROOT + "/qput")
    for i in range(n // 10 + 10):
        q.put(item(i))
    nxt = iter(range(n))
    mu = threading.Lock()
    failed = []

    def run():
        try:
            while True:
                with mu:
                    i = next(nxt, None)
                if i is None:
                    return
                q.put(item(i))
        except Exception as e:  # reported after the join, then exit 1
            failed.append(e)

    threads = [threading.Thread(target=run) for _ in range(w)]
    t0 = now_ns()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = (now_ns() - t0) / 1e9
    if failed:
        raise SystemExit("kazoo_bench: qput: %r" % failed[0])
    print("impl=kazoo mode=qput n=%d w=%d items_per_s=%.0f" % (n, w, n / secs))


class Drain:
    """Counts consumed items, duplicates, and when the last one came."""

    def __init__(self, n):
        self.n = n
        self.seen = bytearray(n)
        self.done = 0
        self.dups = 0
        self.lost_claims = 0
        self.done_at = 0
        self.stop = False
        self.cv = threading.Condition()

    def consumed(self, v):
        with self.cv:
            i = int(v[5:]) if v.startswith(b"item-") else -1
            if 0 <= i < self.n:
                if self.seen[i]:
                    self.dups += 1
                self.seen[i] = 1
            self.done += 1
            if self.done == self.n:
                self.done_at = now_ns()
            self.cv.notify_all()


def consumer_loop(q, d):
    """get (lock the first unlocked entry) then consume, until told to
    stop; get's timeout only lets the loop see the stop flag."""
    while not d.stop:
        v = q.get(timeout=1)
        if v is None:
            continue
        if q.consume():
            d.consumed(v)
        else:
            with d.cv:
                d.lost_claims += 1


def queue_close(clients):
    """close_all, with kazoo's log quiet: consumers' watches still fire
    and their re-listing fails on the closing connection (logged by
    kazoo's worker thread, expected here)."""
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    close_all(clients)


def qtake(mode, k, n, secs):
    """Fill N items (put_all transactions of 1,000, not timed), then K
    consumers, each its own session and thread, drain them; give up after
    SECS."""
    path = ROOT + "/" + mode
    p = client()
    pq = workq(p, path)
    f0 = now_ns()
    for i in range(0, n, 1000):
        pq.put_all([item(j) for j in range(i, min(n, i + 1000))])
    fill = (now_ns() - f0) / 1e9
    clients = [client() for _ in range(k)]
    qs = [workq(c, path) for c in clients]
    d = Drain(n)
    cpu0 = time.process_time()
    t0 = now_ns()
    until = t0 + secs * 1000000000
    threads = [threading.Thread(target=consumer_loop, args=(q, d),
                                daemon=True) for q in qs]
    for t in threads:
        t.start()
    with d.cv:
        while d.done < n and now_ns() < until:
            d.cv.wait(1)
        drained = d.done
        took = ((d.done_at if drained >= n else now_ns()) - t0) / 1e9
        d.stop = True
    cpu = time.process_time() - cpu0
    print("impl=kazoo mode=%s consumers=%d items=%d drained=%d "
          "items_per_s=%.0f drain_s=%.2f fill_s=%.2f cpu_s_per_10k=%.3f "
          "dups=%d lost_claims=%d failed=%d%s"
          % (mode, k, n, drained, drained / took, took, fill,
             cpu * 10000 / drained if drained else 0, d.dups, d.lost_claims,
             drained < n, " error=deadline" if drained < n else ""))
    sys.stdout.flush()
    queue_close(clients + [p])


def qnotify(w, puts):
    """W consumers wait on an empty queue; a producer puts one item at a
    time, each consumed before the next. Watch notifications: every call
    of a watch function the recipe gave get_children (counted per event
    and session), per put."""
    path = ROOT + "/qnotify"
    p = client()
    pq = workq(p, path)
    clients = [client() for _ in range(w)]
    qs = [workq(c, path) for c in clients]
    d = Drain(puts + 1)
    for q in qs:
        threading.Thread(target=consumer_loop, args=(q, d), daemon=True).start()
    pq.put(item(0))
    with d.cv:
        while d.done < 1:
            d.cv.wait(1)
    time.sleep(0.5)
    e0 = WATCH_EVENTS[0]
    for i in range(1, puts + 1):
        pq.put(item(i))
        with d.cv:
            while d.done < i + 1:
                d.cv.wait(1)
        time.sleep(0.02)
    time.sleep(0.2)
    e1 = WATCH_EVENTS[0]
    print("impl=kazoo mode=qnotify consumers=%d puts=%d "
          "watch_events_per_put=%.2f dups=%d"
          % (w, puts, (e1 - e0) / puts, d.dups))
    sys.stdout.flush()
    d.stop = True
    queue_close(clients + [p])


def candidate(path, session_ms):
    """One candidate of the failover workload (bench/failover.py starts K of
    them, each its own process): kazoo's Election at PATH, its session
    timeout SESSION_MS; prints "joined", then "elected MICROS" (since the
    epoch) when it leads, and leads until killed (SIGKILL: its session must
    expire) or told to resign (SIGTERM: the client stops and closes).
    """
    import signal
    c = KazooClient(hosts=HOSTS, timeout=session_ms / 1000.0)
    c.start(timeout=30)

    def resign(signum, frame):
        c.stop()
        c.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, resign)

    def lead():
        print("elected %d" % (time.time_ns() // 1000), flush=True)
        while True:
            time.sleep(3600)

    print("joined", flush=True)
    c.Election(path, "bench").run(lead)


def num(s):
    v = int(s)
    if v < 1:
        raise SystemExit("kazoo_bench: bad number %r" % s)
    return v


def main(argv):
    global HOSTS, ROOT
    if len(argv) > 1 and argv[0] == "-s":
        HOSTS = argv[1]
        argv = argv[2:]
    ROOT = "/zkr-bench/kazoo-%d-%d" % (os.getpid(), now_ns() % 100000)
    usage = "usage: kazoo_bench.py -s HOSTS MODE ARGS"
    if not argv:
        raise SystemExit(usage)
    mode, args = argv[0], argv[1:]
    if mode == "uncontended" and len(args) == 1:
        uncontended(num(args[0]))
    elif mode == "multi" and len(args) == 2:
        multi(num(args[0]), num(args[1]))
    elif mode == "contended" and len(args) == 2:
        contenders("contended", 1, num(args[0]), num(args[1]))
    elif mode == "semaphore" and len(args) == 3:
        contenders("semaphore", num(args[0]), num(args[1]), num(args[2]))
    elif mode == "herd" and len(args) == 2:
        herd(num(args[0]), num(args[1]))
    elif mode == "scale" and len(args) == 1:
        scale(num(args[0]))
    elif mode == "election" and len(args) == 2:
        election(num(args[0]), num(args[1]))
    elif mode == "many" and len(args) == 2:
        many(num(args[0]), num(args[1]))
    elif mode == "qput" and len(args) == 2:
        qput(num(args[0]), num(args[1]))
    elif mode == "qtake" and len(args) == 3:
        qtake("qtake", num(args[0]), num(args[1]), num(args[2]))
    elif mode == "qdrain" and len(args) == 3:
        qtake("qdrain", num(args[1]), num(args[0]), num(args[2]))
    elif mode == "qnotify" and len(args) == 2:
        qnotify(num(args[0]), num(args[1]))
    elif mode == "candidate" and len(args) == 2:
        candidate(args[0], num(args[1]))
    else:
        raise SystemExit(usage)
    sys.stdout.flush()
    os._exit(0)  # do not wait for daemon threads still blocked in kazoo


if __name__ == "__main__":
    main(sys.argv[1:])
