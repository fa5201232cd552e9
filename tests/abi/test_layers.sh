#!/bin/bash
# The library's layers (HACKING.md, "Layers"), lowest first: src/base,
# src/session, src/engine, src/recipes. A source file may include only
# headers of its own layer or a lower one ("zkr.h" and system headers
# aside), and its object may call only functions defined in its own layer
# or a lower one: a lower layer reaches a higher one only through a table
# of functions it is given. Checked on the sources and on the objects of
# the build tree, after each check is shown to catch a file planted to
# break its rule. TAP.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZKR_TEST_BUILDDIR:-$PWD}
CC=${CC:-cc}

rank() {
    case $1 in
    base) echo 0 ;;
    session) echo 1 ;;
    engine) echo 2 ;;
    recipes) echo 3 ;;
    *) echo 9 ;;
    esac
}

# The includes of the sources under $1 (one folder per layer) that reach a
# higher layer, or the umbrella header src/internal.h (for the tests only).
bad_includes() {
    local out="" f layer inc target
    for f in "$1"/*/*.[ch]; do
        [ -e "$f" ] || continue
        layer=$(basename "$(dirname "$f")")
        while read -r inc; do
            case $inc in
            zkr.h) continue ;;
            ../internal.h | internal.h) out="$out ${f#"$1"/} includes $inc;" && continue ;;
            ../*/*) target=${inc#../} && target=${target%%/*} ;;
            */*) target=${inc%%/*} ;;
            *) target=$layer ;;
            esac
            if [ "$(rank "$target")" -gt "$(rank "$layer")" ]; then
                out="$out ${f#"$1"/} includes $inc;"
            fi
        done < <(sed -n 's/^#include "\(.*\)".*/\1/p' "$f")
    done
    echo "$out"
}

# The calls of the objects under $1 (one folder per layer, objects anywhere
# below it) to functions or data defined in a higher layer, into $2; sets
# nobj.
nobj=0
bad_calls() {
    local out="" o layer sym d
    declare -A where=()
    local objs
    objs=$(find "$1"/base "$1"/session "$1"/engine "$1"/recipes -name '*.o' 2>/dev/null)
    for o in $objs; do
        layer=${o#"$1"/} && layer=${layer%%/*}
        while read -r sym; do
            where[$sym]=$layer
        done < <(nm --defined-only "$o" | awk '$2 ~ /^[TDBRV]$/ {print $3}')
    done
    nobj=0
    for o in $objs; do
        nobj=$((nobj + 1))
        layer=${o#"$1"/} && layer=${layer%%/*}
        while read -r sym; do
            d=${where[$sym]:-}
            if [ -n "$d" ] && [ "$(rank "$d")" -gt "$(rank "$layer")" ]; then
                out="$out ${o#"$1"/} calls $sym ($d);"
            fi
        done < <(nm -u "$o" | awk '{print $2}')
    done
    echo "$out" >"$2"
}

echo "1..4"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/base "$tmp"/session "$tmp"/engine "$tmp"/recipes
printf '#include "../session/session.h"\n' >"$tmp"/base/planted.c
printf '#include "base.h"\n' >"$tmp"/base/fine.c
printf '#include "../base/base.h"\n#include "../engine/engine.h"\n' >"$tmp"/session/planted.c
printf 'void planted_engine(void);\nvoid planted_session(void) { planted_engine(); }\n' >"$tmp"/session/s.c
printf 'void planted_engine(void) {}\nvoid planted_recipe(void) { planted_engine(); }\n' >"$tmp"/engine/e.c
out=$(bad_includes "$tmp")
case $out in
*"base/planted.c includes ../session/session.h"*"session/planted.c includes ../engine/engine.h"*)
    if echo "$out" | grep -q fine.c; then
        echo "not ok 1 - the include check flags an allowed include:$out"
    else
        echo "ok 1 - the include check catches planted includes of higher layers"
    fi
    ;;
*) echo "not ok 1 - the include check missed planted includes:$out" ;;
esac
if "$CC" -c -o "$tmp"/session/s.o "$tmp"/session/s.c &&
    "$CC" -c -o "$tmp"/engine/e.o "$tmp"/engine/e.c; then
    bad_calls "$tmp" "$tmp"/out && out=$(cat "$tmp"/out)
    case $out in
    *"session/s.o calls planted_engine (engine)"*)
        echo "ok 2 - the call check catches a planted call into a higher layer" ;;
    *) echo "not ok 2 - the call check missed a planted call:$out" ;;
    esac
else
    echo "not ok 2 - cannot compile the planted objects with $CC"
fi

out=$(bad_includes "$src/src")
if [ -z "$out" ]; then
    echo "ok 3 - no source of src/ includes a higher layer"
else
    echo "not ok 3 - includes of higher layers:$out"
fi
bad_calls "$build/src" "$tmp"/out && out=$(cat "$tmp"/out)
if [ "$nobj" -lt 20 ]; then
    echo "not ok 4 - only $nobj objects under $build/src: build the library first"
elif [ -z "$out" ]; then
    echo "ok 4 - none of the $nobj objects of src/ calls a higher layer"
else
    echo "not ok 4 - calls into higher layers:$out"
fi
