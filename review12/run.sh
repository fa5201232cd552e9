#!/bin/bash
# rereview12 reproductions. Run from the worktree after zkr_build.
#   review12/run.sh      zkr_session_free() on the client's completion thread
#                        (valgrind: invalid reads in ping_done/zkr__op_begin)
#   review12/run.sh 1    zkr_lock_acquire(500 ms) there: returns after ~0.9T
set -e
cd "$(dirname "$0")/.."
gcc -g -DTHREADED -I include -I src -I tests \
    -o /tmp/rr12_free review12/free_on_completion_thread.c \
    tests/harness.c .libs/libzkr.so -Wl,-rpath,"$PWD/.libs" \
    -lzookeeper_mt -lpthread
if [ "${1-0}" = 0 ]; then
    exec valgrind --error-exitcode=99 /tmp/rr12_free 0
else
    exec /tmp/rr12_free "$1"
fi
