"""Holds as many HTTP connections to a server as it can, each with a
request header that never ends (a slowloris). Used by
tests/cli/test_cli_exporter.sh.

usage: slowloris.py HOST:PORT SECONDS PERIOD SRC=COUNT...
Opens COUNT connections from each loopback source address SRC, sends each
a request line and one header line, then every PERIOD seconds one more
header line on each, for SECONDS in all; a connection the server closes is
opened again at the next round. Prints "ready" once the first round's
connections are made (or have failed), and at the end one line of counts.
Its soft open-files limit is raised as needed; a hard limit too low for
the connections asked for scales every COUNT down (the counts say how
many were held). Exits 0 when it ran its course."""
import errno
import resource
import selectors
import socket
import sys
import time

MAX_OPENS = 200000  # bounds the connections made in one run

host, port = sys.argv[1].rsplit(":", 1)
port = int(port)
seconds = float(sys.argv[2])
period = float(sys.argv[3])
asked = [(a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[4:]]
total = sum(n for _, n in asked)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
room = total if hard == resource.RLIM_INFINITY else min(total, hard - 64)
sources = []
for src, n in asked:
    sources += [src] * (n * room // total)
need = len(sources) + 64
if soft != resource.RLIM_INFINITY and soft < need:
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

# Lets connect() pick the source port: many connections from one address.
BIND_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
sel = selectors.DefaultSelector()
conns = [None] * len(sources)  # slot -> socket, or None
pending = set()  # slots whose connect() is under way
stats = {"slots": len(sources), "opened": 0, "refused": 0, "closed": 0, "lines": 0, "most": 0}


def drop(i):
    sel.unregister(conns[i])
    conns[i].close()
    conns[i] = None
    pending.discard(i)


def start(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.setsockopt(socket.IPPROTO_IP, BIND_NO_PORT, 1)
        s.bind((sources[i], 0))
        rc = s.connect_ex((host, port))
    except OSError:
        s.close()
        stats["refused"] += 1
        return
    if rc not in (0, errno.EINPROGRESS):
        s.close()
        stats["refused"] += 1
        return
    stats["opened"] += 1
    conns[i] = s
    pending.add(i)
    sel.register(s, selectors.EVENT_WRITE, i)


def connected(i):
    s = conns[i]
    pending.discard(i)
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
        stats["refused"] += 1
        drop(i)
        return
    try:
        s.send(b"GET /metrics HTTP/1.1\r\nHost: %s\r\n" % host.encode())
    except OSError:
        stats["closed"] += 1
        drop(i)
        return
    sel.modify(s, selectors.EVENT_READ, i)


def readable(i):
    try:
        data = conns[i].recv(65536)
    except OSError:
        data = b""
    if not data:  # closed by the server
        stats["closed"] += 1
        drop(i)


def trickle(n):
    for i, s in enumerate(conns):
        if s is None or i in pending:
            continue
        try:
            s.send(b"X-Slow-%d: %d\r\n" % (n, i))
            stats["lines"] += 1
        except OSError:
            stats["closed"] += 1
            drop(i)


def pump(until):
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        for key, events in sel.select(left):
            i = key.data
            if conns[i] is None:
                continue
            if i in pending:
                connected(i)
            else:
                readable(i)


t0 = time.monotonic()
end = t0 + seconds
rnd = 0
while time.monotonic() < end:
    for i in range(len(conns)):
        if conns[i] is None and stats["opened"] < MAX_OPENS:
            start(i)
    if rnd > 0:
        trickle(rnd)
    # The round's connections complete (or fail) before "ready" is said.
    limit = min(end, time.monotonic() + 5)
    while pending and time.monotonic() < limit:
        pump(min(limit, time.monotonic() + 0.1))
    stats["most"] = max(stats["most"], sum(c is not None for c in conns))
    if rnd == 0:
        print("ready", flush=True)
    rnd += 1
    pump(min(end, t0 + rnd * period))

for i in range(len(conns)):
    if conns[i] is not None:
        drop(i)
print(" ".join(f"{k} {v}" for k, v in stats.items()), flush=True)
