"""kazoo's Barrier as a peer of `zkr barrier` (tests/cli/test_cli_barrier.sh).

    python3 kazoo_barrier.py HOSTS PATH create
        sets the barrier (a persistent node, with its ancestors).
    python3 kazoo_barrier.py HOSTS PATH remove
        clears it; prints True if it stood, False if not.
    python3 kazoo_barrier.py HOSTS PATH wait [SECONDS]
        prints "waiting", then waits until the barrier is cleared (at most
        SECONDS); prints True (exit 0) if it was cleared, False (exit 1)
        if the time passed with it standing.
"""
import sys

from kazoo.client import KazooClient


def main():
    hosts, path, act = sys.argv[1], sys.argv[2], sys.argv[3]
    c = KazooClient(hosts=hosts, timeout=10.0)
    c.start(timeout=20)
    b = c.Barrier(path)
    ok = True
    if act == "create":
        b.create()
    elif act == "remove":
        print(b.remove())
    elif act == "wait":
        print("waiting", flush=True)
        ok = b.wait(float(sys.argv[4]) if len(sys.argv) > 4 else None)
        print(ok)
    else:
        raise SystemExit("unknown action " + act)
    sys.stdout.flush()
    c.stop()
    c.close()
    sys.exit(0 if ok else 1)


main()
