#!/bin/bash
# rereview12 reproductions. Run from the worktree after zkr_build.
set -e
cd "$(dirname "$0")/.."
gcc -g -DTHREADED -I include -I src -I tests \
    -o /tmp/rr12_free review12/free_on_completion_thread.c \
    tests/harness.c .libs/libzkr.so -Wl,-rpath,"$PWD/.libs" \
    -lzookeeper_mt -lpthread
# glibc's malloc check makes the use-after-free visible; valgrind shows it exactly
if command -v valgrind >/dev/null && [ "${VG-1}" = 1 ]; then
    valgrind --error-exitcode=99 /tmp/rr12_free
else
    MALLOC_PERTURB_=165 /tmp/rr12_free
fi
