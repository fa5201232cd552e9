"""kazoo's Lock as a peer of `zkr lock PATH PATH...`
(tests/cli/test_cli_multilock.sh).

    python3 kazoo_lock.py HOSTS PATH try SECONDS
        tries for SECONDS; prints 0 (acquired, then released) or 1.
    python3 kazoo_lock.py HOSTS PATH hold FILE
        acquires, prints "held", holds until FILE exists, releases.

kazoo sees zkr's (Curator's) "-lock-" nodes as contenders only when told
to (extra_lock_patterns), as zkr.h says.
"""
import os
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

hosts, path, what, arg = sys.argv[1:5]
zk = KazooClient(hosts=hosts, timeout=10.0)
zk.start(timeout=20)
lock = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
if what == "try":
    try:
        got = lock.acquire(timeout=float(arg))
    except LockTimeout:
        got = False
    if got:
        lock.release()
    print(0 if got else 1, flush=True)
else:
    lock.acquire()
    print("held", flush=True)
    while not os.path.exists(arg):
        time.sleep(0.05)
    lock.release()
zk.stop()
zk.close()
