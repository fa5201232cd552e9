#!/bin/bash
# zkr.h's documentation comments are well-formed (issue 14): clang's
# -Wdocumentation finds no error (a \param naming no parameter, say), and
# the header cites only files of this repository. TAP.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
echo "1..2"
if ! command -v clang >/dev/null; then
    echo "not ok 1 - zkr.h is -Wdocumentation clean: clang is missing" \
        "(Debian package clang; scripts/check installs it)"
    exit 1
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo '#include <zkr.h>' >"$tmp/doc.c"
    if clang -fsyntax-only -Wdocumentation -Wdocumentation-unknown-command \
        -Werror -DTHREADED -I"$src/include" "$tmp/doc.c" >"$tmp/log" 2>&1; then
        echo "ok 1 - zkr.h is -Wdocumentation clean"
    else
        echo "not ok 1 - zkr.h is -Wdocumentation clean"
        sed 's/^/# /' "$tmp/log"
        exit 1
    fi
fi
# Every file name the header mentions (docs/X.md, README.md, examples/...)
# exists in the repository.
missing=""
for f in $(grep -oE '\b(docs|examples|tests|src|tools)/[A-Za-z0-9_./-]+\.[a-z]+|\b[A-Z]+\.md\b' \
    "$src/include/zkr.h" | sort -u); do
    [ -e "$src/$f" ] || [ -e "$src/docs/$f" ] || missing="$missing $f"
done
# The project's SPEC is not shipped: the header must not send readers there.
if grep -qw SPEC "$src/include/zkr.h"; then
    missing="$missing SPEC"
fi
if [ -z "$missing" ]; then
    echo "ok 2 - every file zkr.h cites is in the repository"
else
    echo "not ok 2 - zkr.h cites files not in the repository:$missing"
    exit 1
fi
