#!/bin/bash
# Versions are the same everywhere (issue 32): zkr(1)'s title line names
# the version `zkr --version` prints, and README's symbol-version claims
# name exactly the version nodes src/libzkr.map defines, and libtool's
# -version-info grew with each of them (Makefile.am's rule). TAP.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZKR_TEST_BUILDDIR:-$src}
fail=0
echo "1..3"

# .TH ZKR 1 "date" "zkr VERSION" "User Commands"
if ! grep -q '^cli_tests = ' "$build/Makefile"; then
    # configure --disable-cli: neither the command nor its page is built.
    echo "ok 1 # SKIP no zkr command (configure --disable-cli)"
else
    man_v=$(sed -n 's/^\.TH ZKR 1 "[^"]*" "zkr \([^"]*\)".*/\1/p' "$build/docs/man/zkr.1")
    cli_v=$("$build/zkr" --version 2>&1)
    if [ -n "$man_v" ] && [ "zkr $man_v" = "$cli_v" ]; then
        echo "ok 1 - zkr(1) names the version zkr --version prints ($cli_v)"
    else
        echo "not ok 1 - zkr(1) says '${man_v:-no version}'," \
            "zkr --version says '$cli_v'"
        fail=1
    fi
fi

nodes=$(grep -oE '^ZKR_[0-9]+\.[0-9]+' "$src/src/libzkr.map" | sort -u |
    tr '\n' ' ')
claims=$(grep -oE 'ZKR_[0-9]+\.[0-9]+' "$src/README.md" | sort -u |
    tr '\n' ' ')
if [ -n "$nodes" ] && [ "$nodes" = "$claims" ]; then
    echo "ok 2 - README names the symbol versions of src/libzkr.map ($nodes)"
else
    echo "not ok 2 - README names symbol versions '$claims';" \
        "src/libzkr.map defines '$nodes'"
    fail=1
fi

# Each version node is a release that added interfaces: by Makefile.am's
# rule each came with current+1 and age+1 (ZKR_0.2 with 3:0:3, ZKR_0.3
# with 4:0:4), and none removed one (current = age: the soname stays
# libzkr.so.0).
count=$(echo "$nodes" | wc -w)
la="$build/libzkr.la"
cur=$(sed -n 's/^current=//p' "$la" 2>/dev/null)
age=$(sed -n 's/^age=//p' "$la" 2>/dev/null)
if [ -n "$cur" ] && [ -n "$age" ] && [ "$cur" = "$age" ] &&
    [ "$cur" -ge $((count + 1)) ]; then
    echo "ok 3 - libtool current:age $cur:$age counts the $count version nodes"
else
    echo "not ok 3 - libtool current:age '${cur:-?}:${age:-?}' ($la): with" \
        "$count version nodes it must be at least $((count + 1)):$((count + 1))"
    fail=1
fi
exit $fail
