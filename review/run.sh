#!/bin/bash
# review12 reproductions. From the worktree, after
#   bash -c '. scripts/lib.sh && zkr_build'
set -e
cd "$(dirname "$0")/.."
make -s tests/libharness.la tests/zkr-proxy
for p in repro_adopt_lost repro_owned_close repro_adopt_slowlink repro_adopt_pause; do
    gcc -O1 -g -Iinclude -Itests review/$p.c .libs/libzkr_core.a \
        tests/.libs/libharness.a -lzookeeper_mt -lpthread -o review/$p
done
export ZKR_TEST_BUILDDIR=$PWD
run() { echo "== $*"; timeout 200 "$@" 2>&1 | grep -v ZOO_ || true; }
run review/repro_adopt_pause adopt 3     # HANG (exit 3) in most trials
run review/repro_adopt_slowlink adopt    # (a) + HANG
run review/repro_adopt_slowlink owned
run review/repro_adopt_lost adopt 3      # (a): grant ~10 ms after LOST
run review/repro_adopt_lost owned 3      #      owned: ~400 ms (T/10)
run review/repro_owned_close 2           # (b): precondition only
