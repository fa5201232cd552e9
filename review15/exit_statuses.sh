#!/bin/bash
# REPRO (review15): server-list and --auth-file cases where zkr's exit
# status / message does not match zkr(1) EXIT STATUS ("64 ... found before
# connecting", "69 unreachable, retryable", "one line ... names the hosts
# and why").  Usage: ZKR_SERVER=host:port bash review15/exit_statuses.sh
cd "$(dirname "$0")/.." || exit 1
S=${ZKR_SERVER:?start a server: . scripts/lib.sh; zkr_server_start}
Z=./zkr
t() { # expected-status description args...
    local want=$1 what=$2 s rc; shift 2
    s=$(date +%s.%N)
    timeout 20 "$@" >/dev/null 2>/tmp/review15.err; rc=$?
    printf '%-4s want %-3s got %-3s %5.1fs  %-34s %s\n' \
        "$([ "$rc" = "$want" ] && echo ok || echo BAD)" "$want" "$rc" \
        "$(echo "$(date +%s.%N) - $s" | bc)" "$what" "$(head -1 /tmp/review15.err)"
}
./tests/zkq "$S" create /r15chroot >/dev/null 2>&1
# man: "-s HOSTS: comma-separated host:port list, optionally followed by a
# chroot path" -- the library refuses any '/' in hosts (ZBADARGUMENTS).
t 0  "chroot suffix (documented)"       $Z -s "$S/r15chroot" inspect /x
# DNS failure: 71 "system error", no why; a transient EAI_AGAIN is retryable.
t 69 "unresolvable host"                $Z -s nosuch.invalid:2181 inspect /x
# No port / bad port: found only after trying, not as a usage error.
t 64 "host without :port"               $Z -s localhost inspect /x
t 64 "port 99999"                       $Z --session-timeout 2000 -s 127.0.0.1:99999 inspect /x
d=$(mktemp -d)
mkfifo "$d/fifo"; chmod 600 "$d/fifo"
t 64 "--auth-file FIFO (hangs in open)" $Z -s "$S" --auth-file "$d/fifo" inspect /x
mkdir "$d/dir"; chmod 700 "$d/dir"
t 64 "--auth-file a directory"          $Z -s "$S" --auth-file "$d/dir" inspect /x
# A 2000-byte first line is cut at 1023 bytes without a word: the password
# sent is not the one in the file.
{ printf 'u:'; head -c 2000 /dev/zero | tr '\0' p; echo; } >"$d/long"; chmod 600 "$d/long"
t 64 "--auth-file line > 1023 bytes"    $Z -s "$S" --auth-file "$d/long" inspect /x
rm -rf "$d"
