#!/bin/bash
# The reference pages made from zkr.h (doxygen, in doc-man/ of the build
# tree): one page per family of calls, each with a NAME line of its own (so
# `man -k zkr` tells them apart), and for every exported function a page
# named after it that leads to its family's page, which declares it. The
# functions are those of src/libzkr.map, not of the pages: a function
# missing from the pages fails. zkr(7) is well-formed. Each family's page
# (a \defgroup of zkr.h) has the sections of a classic reference page, in
# order, with a description of its own, and man reads it without a
# warning. TAP.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZKR_TEST_BUILDDIR:-$PWD}
man3=$build/doc-man/man/man3
echo "1..4"
if [ ! -f "$build/doc-man/pages" ]; then
    echo "not ok 1 - no doc-man/pages: doxygen missing at configure (Debian package doxygen; scripts/check installs it)"
    exit 1
fi
bad=""
n=0
for f in $(sed -n 's/^ *\(zkr_[a-z0-9_]*\);$/\1/p' "$src/src/libzkr.map"); do
    n=$((n + 1))
    page=$man3/$f.3
    if [ ! -f "$page" ]; then
        bad="$bad $f(no page)"
        continue
    fi
    target=$page
    if head -1 "$page" | grep -q '^\.so '; then
        target=$man3/$(head -1 "$page" | sed 's|^\.so man3/||')
    fi
    case $(basename "$target") in
    zkr_*.3) ;;
    *) bad="$bad $f(leads to $(basename "$target"), not a family's page)" ;;
    esac
    grep -q "\\\\fB$f\\\\fP (" "$target" || bad="$bad $f(not declared in $(basename "$target"))"
done
if [ -z "$bad" ] && [ "$n" -gt 50 ]; then
    echo "ok 1 - each of the $n exported functions has a page leading to its family's"
else
    echo "not ok 1 - functions without a proper page ($n in libzkr.map):$bad"
fi
# The families' NAME lines, as man -k reads them (lexgrog: mandb's parser).
names=$(cd "$man3" && for p in $(cat ../../pages); do
    head -1 "$p" | grep -q '^\.so ' && continue
    case $p in zkr_*.3) ;; *) continue ;; esac
    lexgrog "$p" 2>/dev/null | sed 's/^[^:]*: "//; s/"$//'
done)
count=$(printf '%s\n' "$names" | grep -c ' - ')
distinct=$(printf '%s\n' "$names" | sed 's/^[^ ]* - //' | sort -u | wc -l)
if [ "$count" -ge 9 ] && [ "$distinct" -eq "$count" ]; then
    echo "ok 2 - $count family pages, each with its own NAME description"
else
    echo "not ok 2 - family pages' NAME lines ($count, $distinct distinct):"
    printf '%s\n' "$names" | sed 's/^/# /'
fi
warn=$(MANWIDTH=80 man --warnings -l "$src/docs/man/zkr.7" 2>&1 >/dev/null)
if lexgrog "$src/docs/man/zkr.7" | grep -q 'zkr - ZooKeeper coordination recipes' && [ -z "$warn" ]; then
    echo "ok 3 - zkr(7) is well-formed"
else
    echo "not ok 3 - zkr(7): $warn"
fi
# The families' pages: the classic sections in order (docs/man/classic.awk
# puts doxygen's output so), a DESCRIPTION with text, no man warning.
bad=""
families=$(sed -n 's/^\/\*\* \\defgroup \(zkr_[a-z_]*\) .*/\1/p' "$src/include/zkr.h")
nf=0
for g in $families; do
    nf=$((nf + 1))
    page=$man3/$g.3
    if [ ! -f "$page" ]; then
        bad="$bad $g(no page)"
        continue
    fi
    got=$(grep '^\.SH' "$page" | sed 's/^\.SH //; s/"//g' |
        grep -xE 'NAME|SYNOPSIS|DESCRIPTION|RETURN VALUE|ERRORS|EXAMPLE|SEE ALSO' |
        paste -sd, -)
    [ "$got" = "NAME,SYNOPSIS,DESCRIPTION,RETURN VALUE,ERRORS,EXAMPLE,SEE ALSO" ] ||
        bad="$bad $g(sections: $got)"
    text=$(sed -n '/^\.SH DESCRIPTION/,/^\.SH [^D]/p' "$page" | grep -v '^\.' |
        wc -w)
    [ "$text" -ge 30 ] || bad="$bad $g(description of $text words)"
    warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [ -z "$warn" ] || bad="$bad $g(man: $warn)"
done
if [ -z "$bad" ] && [ "$nf" -ge 9 ]; then
    echo "ok 4 - the $nf family pages have NAME, SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS, EXAMPLE, SEE ALSO"
else
    echo "not ok 4 - family pages ($nf):$bad"
fi
