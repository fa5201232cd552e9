#!/usr/bin/env bash
# Checks an installed zkr the way a user of it would: every example is
# compiled with exactly the command written on the "Build:" line of its
# header comment (cc ... $(pkg-config --cflags --libs zkr)), outside the
# source tree; then, against a throwaway ZooKeeper server, the compiled
# lock example runs three fenced rounds, and the installed `zkr` prints
# its version and runs one command under a lock. Where doxygen is
# installed, the man(3) pages made from zkr.h must be installed too.
#
#   tests/abi/installcheck.sh [--root DIR] [--libdir DIR] [--bindir DIR]
#                         [--mandir DIR] [--version VERSION] [--no-cli]
#                         EXAMPLES-DIR
#
#   --root DIR      the files were installed under DIR (make install
#                   DESTDIR=DIR); pkg-config and the loader are pointed
#                   there. Default: installed in the system itself.
#   --libdir DIR    libdir zkr was configured with (where zkr.pc and the
#                   library are). Default: the system's search paths.
#   --bindir DIR    where `zkr` was installed (default /usr/bin).
#   --mandir DIR    where the man pages were installed (default
#                   /usr/share/man).
#   --version V     the version `zkr --version` must print.
#   --no-cli        the library alone was built (configure --disable-cli):
#                   no `zkr` command may be installed.
#
# Used by `make installcheck` (a temporary DESTDIR) and by scripts/package
# (the installed Debian packages). Prints one line per step; exits 0 only
# if every step passed.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

root="" libdir="" bindir=/usr/bin mandir=/usr/share/man version="" cli=1
while [ $# -gt 1 ]; do
    case $1 in
    --no-cli)
        cli=0
        shift
        continue
        ;;
    --root) root=$2 ;;
    --libdir) libdir=$2 ;;
    --bindir) bindir=$2 ;;
    --mandir) mandir=$2 ;;
    --version) version=$2 ;;
    *) break ;;
    esac
    shift 2
done
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: ${0##*/} [--root DIR] [--libdir DIR] [--bindir DIR]" \
        "[--mandir DIR] [--version V] [--no-cli] EXAMPLES-DIR" >&2
    exit 64
fi
examples=$(cd "$1" && pwd)

failed=0
ok() { echo "installcheck: ok   $*"; }
not_ok() {
    echo "installcheck: FAIL $*"
    failed=1
}

if [ -n "$root" ]; then
    root=$(cd "$root" && pwd)
    # pkg-config prefixes the -I and -L it prints with the sysroot.
    export PKG_CONFIG_SYSROOT_DIR=$root
fi
if [ -n "$libdir" ]; then
    export PKG_CONFIG_PATH=$root$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$root$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
zkr=$root$bindir/zkr

work=$(mktemp -d "${TMPDIR:-/tmp}/zkr-installcheck.XXXXXX")
zkr_on_exit "rm -rf '$work'"

# Prints the command on the "Build:" line of a C file's header comment.
build_line() {
    sed -n '/^ \* Build: /{s/^ \* Build: //;s/ *\*\/ *$//;p;q;}' "$1"
}

# --------------------------------------------------- compile the examples
n=0
for src in "$examples"/*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    n=$((n + 1))
    cmd=$(build_line "$src")
    if [ -z "$cmd" ]; then
        not_ok "$name.c: no \" * Build: \" line in its header"
        continue
    fi
    case $cmd in
    *-lsqlite3*)
        if ! pkg-config --exists sqlite3; then
            ok "$name.c skipped: no sqlite3 (libsqlite3-dev missing)"
            continue
        fi
        ;;
    *libuv*)
        if ! pkg-config --exists libuv; then
            ok "$name.c skipped: no libuv.pc (libuv1-dev missing)"
            continue
        fi
        ;;
    esac
    cp "$src" "$work/"
    rm -f "$work/a.out"
    if (cd "$work" && sh -c "$cmd") >"$work/$name.cc.log" 2>&1 &&
        [ -x "$work/a.out" ]; then
        mv "$work/a.out" "$work/$name"
        ok "$name.c builds with: $cmd"
    else
        not_ok "$name.c does not build with: $cmd"
        sed 's/^/    /' "$work/$name.cc.log"
    fi
done
if [ "$n" -eq 0 ]; then
    not_ok "no example in $examples"
fi

# ------------------------------------------------- the static library
# Where libzkr.a is installed (libzkr-dev), a program links it with the
# command README gives; the ZooKeeper client and libc stay shared. The
# lock example so linked must need no libzkr.so (it runs below).
static_cmd='cc lock.c -o lock-static $(pkg-config --cflags zkr) -Wl,-Bstatic $(pkg-config --libs-only-L zkr) -lzkr -Wl,-Bdynamic -lzookeeper_mt -lpthread'
zkr_libdir=${libdir:-$(pkg-config --variable=libdir zkr 2>/dev/null || true)}
if [ -e "$root$zkr_libdir/libzkr.a" ] && [ -e "$examples/lock.c" ]; then
    if (cd "$work" && sh -c "$static_cmd") >"$work/static.cc.log" 2>&1 &&
        ! readelf -d "$work/lock-static" | grep -q 'NEEDED.*libzkr'; then
        ok "lock.c links the static library with: $static_cmd"
    else
        not_ok "lock.c does not link the static library alone with: $static_cmd"
        sed 's/^/    /' "$work/static.cc.log"
        rm -f "$work/lock-static"
    fi
else
    ok "no static library in $root$zkr_libdir (configure --enable-static builds it)"
fi

# ------------------------------------------------------- the zkr command
if [ "$cli" -eq 0 ]; then
    if [ -e "$zkr" ]; then
        not_ok "$zkr installed by a build without the command"
    else
        ok "no zkr command (the library alone)"
    fi
elif out=$("$zkr" --version 2>&1) &&
    { [ -z "$version" ] || [ "$out" = "zkr $version" ]; }; then
    ok "$zkr --version: $out"
else
    not_ok "$zkr --version printed \"$out\" (expected \"zkr $version\")"
fi

# ------------------------------------------------------ man(3) pages
# The API's page, a page per family of calls (here zkr_lock) and a link
# to it per function (here zkr_lock_fd), the structs' pages, no page named
# after a struct member, and zkr(7); `man 3 zkr_lock_fd` shows the
# function and groff warns of nothing in any page.
man3=$root$mandir/man3
# A page's text, installed plain or gzipped (Debian's packages).
man_page() {
    if [ -e "$man3/$1.gz" ]; then
        gzip -dc "$man3/$1.gz"
    else
        cat "$man3/$1" 2>/dev/null
    fi
}
man_warnings() {
    local f
    for f in "$man3"/zkr*.3*; do
        [ ! -L "$f" ] || continue
        case $(man_page "$(basename "$f" .gz)") in
        .so*) ;;
        *) { MANWIDTH=80 man --warnings -l "$f" >/dev/null; } 2>&1 ;;
        esac
    done
}
# A link: a .so request (make install) or a symbolic link (debhelper
# turns the first into the second).
man_link_to() {
    local text
    text=$(man_page "$1")
    [ "$text" = ".so man3/$2" ] || [ "$text" = "$(man_page "$2")" ]
}
if ! command -v doxygen >/dev/null || ! command -v man >/dev/null; then
    not_ok "man(3) pages: doxygen or man is missing (Debian packages doxygen, man-db)"
elif man_page zkr.h.3 | grep '^\.SH NAME' >/dev/null &&
    man_link_to zkr_lock_fd.3 zkr_lock.3 &&
    man_page zkr_lock.3 | grep '^zkr_lock \\- ' >/dev/null &&
    man_page zkr_session_options.3 | grep '^\.SH NAME' >/dev/null &&
    [ ! -e "$man3/path.3" ] && [ ! -e "$man3/path.3.gz" ] &&
    MANWIDTH=80 man -M "$root$mandir" 3 zkr_lock_fd 2>/dev/null |
    grep 'int zkr_lock_fd (zkr_lock_t \*l)' >/dev/null &&
    [ -z "$(man_warnings)" ]; then
    ok "man(3) pages in $man3: $(find "$man3" -name 'zkr*' | wc -l) zkr* files"
else
    not_ok "man(3) pages missing or wrong in $man3"
    man_warnings | sed 's/^/    /'
fi
man7=$root$mandir/man7
if [ -e "$man7/zkr.7" ] || [ -e "$man7/zkr.7.gz" ]; then
    ok "zkr(7) in $man7"
else
    not_ok "zkr(7) missing from $man7"
fi

# ------------------------------------------- against a throwaway server
if ! zkr_server_start 2>"$work/server.log"; then
    cat "$work/server.log"
    not_ok "ZooKeeper did not start"
    exit 1
fi

if [ -x "$work/lock" ]; then
    store=$work/store
    : >"$store"
    if (cd "$work" && ./lock -s "$ZKR_SERVER" -p /installcheck/lock \
        -f "$store" -n 3 -w 1) >"$work/lock.log" 2>&1 &&
        [ "$(awk '{ print $2 }' "$store" | tr '\n' ' ')" = "1 2 3 " ]; then
        ok "lock example: 3 fenced rounds against $ZKR_SERVER"
    else
        not_ok "lock example against $ZKR_SERVER; its output, then the store:"
        sed 's/^/    /' "$work/lock.log" "$store"
    fi
else
    not_ok "lock example not built: not run"
fi
if [ -x "$work/lock-static" ]; then
    store=$work/store.static
    : >"$store"
    if (cd "$work" && ./lock-static -s "$ZKR_SERVER" -p /installcheck/lock \
        -f "$store" -n 1 -w 1) >"$work/lock-static.log" 2>&1 &&
        [ "$(awk '{ print $2 }' "$store")" = "1" ]; then
        ok "lock example linked statically: 1 fenced round"
    else
        not_ok "lock example linked statically; its output:"
        sed 's/^/    /' "$work/lock-static.log"
    fi
fi

# The command under the lock sees its fencing token.
# shellcheck disable=SC2016 # expanded by the command's shell
if [ "$cli" -eq 0 ]; then
    : # no command to run
elif out=$("$zkr" -s "$ZKR_SERVER" lock /installcheck/cmd -- \
    sh -c 'echo "token=$ZKR_FENCE"' 2>&1) &&
    [[ $out =~ ^token=[0-9]+$ ]]; then
    ok "zkr lock ran a command holding token ${out#token=}"
else
    not_ok "zkr lock printed: $out"
fi

zkr_server_stop
exit "$failed"
