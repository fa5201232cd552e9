#!/usr/bin/env bash
# A test that needs a tool which is not installed fails and names the
# Debian package that provides it; it never skips (zkr_need, tests/cli/lib.sh).
# shellcheck disable=SC2317 # the tests run through run_test
. "${srcdir:-.}/tests/cli/lib.sh"

test_missing_tool_bails_out_naming_package() {
    local out rc=0
    out=$(zkr_need no-such-tool-zkr zkr-test-package) || rc=$?
    expect "status $rc, not 99 (a TAP bail-out's)" [ "$rc" -eq 99 ]
    expect "no bail-out naming the package: '$out'" grep -qx \
        "Bail out! no-such-tool-zkr is missing: install the Debian package zkr-test-package (scripts/check installs it)" \
        <<<"$out"
}

test_present_tool_says_nothing() {
    local out rc=0
    out=$(zkr_need sh dash) || rc=$?
    expect "status $rc for a tool that is there" [ "$rc" -eq 0 ]
    expect "output for a tool that is there: '$out'" [ -z "$out" ]
}

run_test test_missing_tool_bails_out_naming_package
run_test test_present_tool_says_nothing
done_testing
