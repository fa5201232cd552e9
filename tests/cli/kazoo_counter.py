"""kazoo's Counter as a peer of `zkr counter --text`
(tests/cli/test_cli_counter.sh).

    python3 kazoo_counter.py HOSTS PATH get
        prints the value.
    python3 kazoo_counter.py HOSTS PATH add N
        adds N and prints the value after.
    python3 kazoo_counter.py HOSTS PATH loop THREADS ITERATIONS
        THREADS threads, each with its own session, add 1 ITERATIONS
        times each; prints "done".
"""
import sys
import threading

from kazoo.client import KazooClient


def connect(hosts):
    # Conflicts are retried until the change applies (kazoo raises
    # ForceRetryError on a version conflict).
    c = KazooClient(hosts=hosts, timeout=10.0,
                    command_retry={"max_tries": -1, "delay": 0.005,
                                   "max_delay": 0.05})
    c.start(timeout=20)
    return c


def main():
    hosts, path, act = sys.argv[1], sys.argv[2], sys.argv[3]
    if act == "loop":
        threads, iters = int(sys.argv[4]), int(sys.argv[5])
        errors = []

        def work():
            try:
                c = connect(hosts)
                n = c.Counter(path)
                for _ in range(iters):
                    n += 1
                c.stop()
                c.close()
            except Exception as e:  # reported below
                errors.append(repr(e))

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("done" if not errors else "failed " + "; ".join(errors))
        sys.exit(0 if not errors else 1)
    c = connect(hosts)
    n = c.Counter(path)
    if act == "add":
        n += int(sys.argv[4])
        print(n.post_value)
    else:
        print(n.value)
    c.stop()
    c.close()


main()
