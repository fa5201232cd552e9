"""kazoo's Party beside `zkr member` and `zkr members`
(tests/cli/test_cli_group.sh).

    python3 kazoo_party.py HOSTS PATH join IDENT STOPFILE

joins the Party PATH with the identifier IDENT (its node's data; with
"hex:" the exact bytes in hex instead, which kazoo's identifier cannot
be), prints "joined NODE" once its node stands, stays until the file
STOPFILE exists, then leaves and prints "left".

    python3 kazoo_party.py HOSTS PATH list

prints "member DATA" for each member kazoo lists (list(party): the data
of the children whose names contain __party__), then "count N" (len()).
"""
import os
import sys
import time

from kazoo.client import KazooClient


def main():
    hosts, path, what = sys.argv[1:4]
    c = KazooClient(hosts=hosts, timeout=10.0)
    c.start(timeout=20)
    if what == "join":
        ident, stop = sys.argv[4:6]
        p = c.Party(path, "")
        if ident.startswith("hex:"):
            p.data = bytes.fromhex(ident[4:])
        else:
            p.data = ident.encode("utf-8")
        p.join()
        print("joined", p.node, flush=True)
        while not os.path.exists(stop):
            time.sleep(0.05)
        p.leave()
        print("left", flush=True)
    else:
        p = c.Party(path)
        for d in list(p):
            print("member", d, flush=True)
        print("count", len(p), flush=True)
    c.stop()
    c.close()


main()
