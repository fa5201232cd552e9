#!/bin/bash
# rereview12: adopted LOST with a create in flight (see the .c). From the
# worktree after zkr_build (needs tests/zkr-proxy: make tests/zkr-proxy).
set -e
cd "$(dirname "$0")/.."
make -s tests/zkr-proxy
gcc -g -DTHREADED -I include -I src -I tests -o review12/test_adopted_stale_create \
    review12/test_adopted_stale_create.c tests/harness.c .libs/libzkr.so \
    -Wl,-rpath,"$PWD/.libs" -lzookeeper_mt -lcmocka -lpthread
exec review12/test_adopted_stale_create
