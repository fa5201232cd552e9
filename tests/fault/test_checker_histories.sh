#!/usr/bin/env bash
# The history checker rejects the histories in tests/fault/histories/, each
# holding a violation (see its README): a checker that excuses one of them
# would pass the fault tests that rely on it without proving anything.
# shellcheck disable=SC2317 # the tests run through run_test
# shellcheck source=tests/cli/lib.sh
. "${srcdir:-.}/tests/cli/lib.sh"

CHECK=$builddir/tests/bin/zkr-check
HIST=$top_srcdir/tests/fault/histories

# rejects FILE COUNTER: zkr-check (session timeout 2,000 ms) exits 1 on
# FILE and reports COUNTER above 0.
rejects() {
    local out rc=0 n
    out=$("$CHECK" -t 2000 "$HIST/$1" 2>&1) || rc=$?
    expect "$1: zkr-check exited $rc, not 1 (violation)" [ "$rc" -eq 1 ]
    n=$(grep -o "$2=[0-9]*" <<<"$out" | tail -1 | cut -d= -f2)
    expect "$1: $2 is '${n:-missing}', not above 0: $out" [ "${n:-0}" -gt 0 ]
}

test_silent_deposed_leader() { rejects silent-deposed-leader.hist fn_interleavings; }
test_overlap_before_first_effect() { rejects overlap-before-first-effect.hist double_leaders; }
test_late_self_watch() { rejects late-self-watch.hist fn_interleavings; }

run_test test_silent_deposed_leader
run_test test_overlap_before_first_effect
run_test test_late_self_watch
done_testing
