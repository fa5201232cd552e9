#!/bin/bash
# libzkr's ABI (issue 14), as TAP:
#  1. the functions zkr.h declares (ZKR_EXTERN), those src/libzkr.map
#     lists and those libzkr.so exports are one set;
#  2. every export carries a version node ZKR_<major>.<minor>, and the
#     newest node is the header's ZKR_VERSION_MAJOR.ZKR_VERSION_MINOR or
#     older;
#  3. abidiff finds no difference between libzkr.so and the baseline
#     tests/abi/libzkr.abi (types reachable from zkr.h, symbols). A change that
#     is meant (a new function, a new minor version) comes with a new
#     baseline: `make abi-baseline`, reviewed like any diff. Skipped when
#     abigail-tools is missing or the library has no debug information.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZKR_TEST_BUILDDIR:-$src}
lib=$build/.libs/libzkr.so
t=0
fails=0

ok() { t=$((t + 1)); echo "ok $t - $1"; }
not_ok() {
    t=$((t + 1))
    echo "not ok $t - $1"
    fails=$((fails + 1))
}
skip() { t=$((t + 1)); echo "ok $t - $1 # SKIP $2"; }

echo "1..3"
if [ ! -r "$lib" ]; then
    echo "Bail out! no $lib (build first)"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

grep -A3 '^ZKR_EXTERN' "$src/include/zkr.h" | tr '\n' ' ' |
    grep -oE '\bzkr_[a-z0-9_]+\(' | tr -d '(' | sort -u >"$tmp/header"
grep -oE '^[[:space:]]+zkr_[a-z0-9_]+;' "$src/src/libzkr.map" |
    tr -d ' ;\t' | sort -u >"$tmp/map"
objdump -T "$lib" | awk '$4 == ".text" && $NF ~ /^zkr_/ { print $(NF-1), $NF }' |
    sort -k2 >"$tmp/exports"
awk '{ print $2 }' "$tmp/exports" | sort -u >"$tmp/exported"

if cmp -s "$tmp/header" "$tmp/map" && cmp -s "$tmp/map" "$tmp/exported"; then
    ok "zkr.h, libzkr.map and libzkr.so agree ($(wc -l <"$tmp/map") functions)"
else
    not_ok "zkr.h, libzkr.map and libzkr.so agree"
    echo "# header vs map:"
    diff "$tmp/header" "$tmp/map" | sed 's/^/# /'
    echo "# map vs exports:"
    diff "$tmp/map" "$tmp/exported" | sed 's/^/# /'
fi

major=$(sed -n 's/^#define ZKR_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/zkr.h")
minor=$(sed -n 's/^#define ZKR_VERSION_MINOR \([0-9]*\)$/\1/p' "$src/include/zkr.h")
bad=$(awk -v M="$major" -v m="$minor" '{
        v = $1; sub(/^\(/, "", v); sub(/\)$/, "", v)
        if (v !~ /^ZKR_[0-9]+\.[0-9]+$/) { print; next }
        split(substr(v, 5), p, ".")
        if (p[1] != M || p[2] > m) print
    }' "$tmp/exports")
if [ -z "$bad" ] && [ -s "$tmp/exports" ]; then
    ok "every export has a version node ZKR_$major.<= $minor"
else
    not_ok "every export has a version node ZKR_$major.<= $minor"
    printf '# %s\n' "$bad"
fi

if ! command -v abidiff >/dev/null; then
    not_ok "ABI matches tests/abi/libzkr.abi: abidiff is missing (Debian package abigail-tools)"
elif ! readelf -S "$lib" | grep -q '\.debug_info'; then
    skip "ABI matches tests/abi/libzkr.abi" "libzkr.so built without -g"
else
    rc=0
    abidiff --headers-dir2 "$src/include" "$src/tests/abi/libzkr.abi" "$lib" \
        >"$tmp/diff" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        ok "ABI matches tests/abi/libzkr.abi"
    else
        # abidiff's status: 4 = changed, 8 = incompatible change.
        what="changed"
        [ $((rc & 8)) -ne 0 ] && what="INCOMPATIBLY changed"
        not_ok "ABI matches tests/abi/libzkr.abi ($what; if meant: make abi-baseline)"
        sed 's/^/# /' "$tmp/diff"
    fi
fi
[ "$fails" -eq 0 ]
