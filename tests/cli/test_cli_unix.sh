#!/usr/bin/env bash
# The zkr command as a Unix citizen (issue 15): descriptors, output that
# cannot break, credentials off the command line, validation before any
# connection, flock(1)'s sysexits statuses and long options, --help.
. "${srcdir:-.}/tests/cli/lib.sh"
zkr_need python3 python3

AUTH=ops:s3cret
UNREACHABLE=127.0.0.1:1

# runrc VAR CMD...: runs CMD, stderr to $WORK/err, status into VAR.
runrc() {
    local __v=$1
    shift
    local __rc=0
    "$@" 2>"$WORK/err" >"$WORK/out" || __rc=$?
    printf -v "$__v" '%s' "$__rc"
}

# Every subcommand that runs a command gives it descriptors 0, 1 and 2
# only (ls adds the one it opens to read /proc/self/fd).
test_descriptors_every_subcommand() {
    local fds form
    for form in "lock /cli/fd1 -- sh -c" "sem --permits 2 /cli/fd2 sh -c" \
        "elect /cli/fd3 sh -c" "lock /cli/fd4 -c" "elect /cli/fd5 -c" \
        "sem -c 2 /cli/fd6 --command"; do
        # shellcheck disable=SC2086
        fds=$( (
            exec 7>/dev/null 9</dev/null
            "$ZKR" $form 'ls /proc/self/fd' 2>/dev/null | sort -n | tr '\n' ' '
        ))
        expect "zkr $form: the command saw descriptors '$fds', not '0 1 2 3 '" \
            [ "$fds" = "0 1 2 3 " ]
    done
}

# A contender node written by any client: valid name, raw data.
raw_contender() {
    local path=$1 seq=$2
    "$ZKQ" "$ZKR_SERVER" exists "$path" || "$ZKQ" "$ZKR_SERVER" create "$path"
    "$ZKQ" "$ZKR_SERVER" create "$path/_c_0000000$seq-1111-2222-3333-444444444444-lock-000000000$seq"
    cat | "$ZKQ" "$ZKR_SERVER" set "$path/_c_0000000$seq-1111-2222-3333-444444444444-lock-000000000$seq"
}

# Identifiers with bytes that are not UTF-8, a newline and an escape
# sequence: --json stays valid JSON (checked by two parsers) and says the
# exact bytes; the table keeps one row per entry and no raw control byte.
test_inspect_hostile_identifiers() {
    local out p=/cli/hostile
    printf 'bad\xff\xfe' | raw_contender "$p" 1
    printf 'two\nlines\033[31mred\xc2\x9b' | raw_contender "$p" 2
    out=$("$ZKR" inspect --json "$p")
    expect "json.tool rejects --json: $out" python3 -m json.tool <<< "$out" >/dev/null
    expect "jq rejects --json: $out" jq -e . <<< "$out" >/dev/null
    expect "invalid bytes not U+FFFD: $out" \
        [ "$(jq -r '.holders[0].id' <<< "$out")" = "$(printf 'bad\xef\xbf\xbd\xef\xbf\xbd')" ]
    expect "exact bytes not in id_hex: $out" \
        [ "$(jq -r '.holders[0].id_hex' <<< "$out")" = 626164fffe ]
    expect "valid UTF-8 id has an id_hex: $out" \
        [ "$(jq -r '.waiters[0] | has("id_hex")' <<< "$out")" = false ]
    expect "control characters lost: $out" \
        [ "$(jq -r '.waiters[0].id' <<< "$out")" = "$(printf 'two\nlines\033[31mred\xc2\x9b')" ]
    out=$("$ZKR" inspect "$p")
    expect "table rows: $(printf '%s' "$out" | cat -v)" \
        [ "$(printf '%s\n' "$out" | wc -l)" -eq 4 ]
    expect "raw control byte or stray byte in the table: $(printf '%s' "$out" | cat -v)" \
        python3 -c '
import re, sys
t = sys.stdin.buffer.read().decode("utf-8")  # raises on stray bytes
sys.exit(re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", t) is not None)' <<< "$out"
    expect "escaped forms missing: $out" \
        grep -qF 'two\nlines\x1b[31mred\u009b' <<< "$out"
    expect "escaped forms missing: $out" grep -qF 'bad\xff\xfe' <<< "$out"
}

# Identifiers with characters that print as nothing or reorder the line
# (Unicode format characters, category Cf: RLO, zero-width space, a tag;
# the line separator): the table shows none of them raw (Python's Unicode
# database is the oracle), but their escaped forms; --json keeps them.
test_inspect_invisible_characters() {
    local out p=/cli/invisible
    printf 'rtl\xe2\x80\xaelive\xe2\x80\x8bzw\xf3\xa0\x81\x81tag\xc2\xadsoft\xe2\x80\xa8sep' |
        raw_contender "$p" 1
    out=$("$ZKR" inspect "$p")
    expect "invisible or bidi character raw in the table: $(printf '%s' "$out" | od -c | head -5)" \
        python3 -c '
import sys, unicodedata
t = sys.stdin.buffer.read().decode("utf-8")
sys.exit(any(unicodedata.category(c) in ("Cf", "Zl", "Zp") for c in t))' <<< "$out"
    expect "escaped forms missing: $out" \
        grep -qF 'rtl\u202elive\u200bzw\U000e0041tag\u00adsoft\u2028sep' <<< "$out"
    out=$("$ZKR" inspect --json "$p")
    expect "--json lost the exact characters: $out" \
        [ "$(jq -r '.holders[0].id' <<< "$out")" = "$(printf 'rtl\xe2\x80\xaelive\xe2\x80\x8bzw\xf3\xa0\x81\x81tag\xc2\xadsoft\xe2\x80\xa8sep')" ]
}

# Semaphores show their permit count; every session id has the sequencer's
# format (16 hex digits) in the environment, --json and the table.
test_permits_and_session_format() {
    local out sid seqsid
    : > "$WORK/env"
    bg "$ZKR" sem --permits 3 /cli/psem sh -c "echo \"\$ZKR_SESSION_ID \$ZKR_SEQUENCER\" > '$WORK/env'; exec sleep 60"
    expect "semaphore holder did not start" wait_for 10 [ -s "$WORK/env" ]
    out=$("$ZKR" inspect --json /cli/psem)
    expect "permits: $out" [ "$(jq -r '.permits' <<< "$out")" = 3 ]
    expect "kind: $out" [ "$(jq -r '.kind' <<< "$out")" = semaphore ]
    read -r sid seqsid < "$WORK/env"
    seqsid=$(cut -d: -f4 <<< "$seqsid")
    expect "ZKR_SESSION_ID '$sid' is not 16 hex digits" \
        grep -qxE '[0-9a-f]{16}' <<< "$sid"
    expect "ZKR_SESSION_ID '$sid' differs from the sequencer's '$seqsid'" \
        [ "$sid" = "$seqsid" ]
    expect "--json session differs: $out" \
        [ "$(jq -r '.holders[0].session' <<< "$out")" = "$sid" ]
    out=$("$ZKR" inspect /cli/psem)
    expect "table: $out" grep -q "semaphore of 3 permits, 1 holding" <<< "$out"
    expect "table session: $out" grep -q " $sid " <<< "$out"
}

# Credentials from $ZKR_AUTH and --auth-file act as --auth does (the
# private ACL names that digest); a file others can read or write is
# refused (77) before connecting; the secret is not on zkr's command line.
test_credentials() {
    local rc acl f=$WORK/auth
    printf '%s\n' "$AUTH" > "$f"
    chmod 600 "$f"
    : > "$WORK/log"
    ZKR_AUTH=$AUTH bg "$ZKR" lock --acl private /cli/cred-env sh -c "echo start >> '$WORK/log'; exec sleep 60"
    local z=$!
    expect "ZKR_AUTH holder did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    expect "the secret is on zkr's command line" \
        sh -c "! tr '\0' ' ' < /proc/$z/cmdline | grep -q s3cret"
    acl=$(ZKQ_AUTH=$AUTH "$ZKQ" "$ZKR_SERVER" acl "/cli/cred-env/$(zk_ls /cli/cred-env | head -n 1)")
    expect "ZKR_AUTH: no digest:ops in the node's ACL: $acl" grep -q '^digest:ops:' <<< "$acl"
    cleanup_procs
    runrc rc "$ZKR" --auth-file "$f" lock --acl private /cli/cred-file sh -c \
        "ls /cli >/dev/null; echo ran"
    expect "--auth-file lock exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    expect "--auth-file command did not run" grep -q ran "$WORK/out"
    # The file wins over $ZKR_AUTH; a refused digest is 77.
    runrc rc env ZKR_AUTH=nocolon "$ZKR" --auth-file "$f" inspect /cli/cred-file
    expect "--auth-file does not override ZKR_AUTH: exit $rc" [ "$rc" -eq 0 ]
    local mode
    for mode in 640 604 620; do
        chmod "$mode" "$f"
        runrc rc "$ZKR" -s "$UNREACHABLE" --auth-file "$f" lock /cli/x true
        expect "--auth-file mode $mode: exit $rc, not 77" [ "$rc" -eq 77 ]
        expect "--auth-file mode $mode: '$(cat "$WORK/err")'" \
            grep -q "too open" "$WORK/err"
    done
    chmod 600 "$f"
    printf 'no-colon\n' > "$f"
    runrc rc "$ZKR" -s "$UNREACHABLE" --auth-file "$f" lock /cli/x true
    expect "--auth-file without USER:PASSWORD: exit $rc, not 64" [ "$rc" -eq 64 ]
    runrc rc "$ZKR" -s "$UNREACHABLE" --auth-file "$WORK/none" lock /cli/x true
    expect "missing --auth-file: exit $rc, not 64" [ "$rc" -eq 64 ]
    # Not a regular file: a FIFO must not block, a directory is as wrong
    # as a missing file (64).
    mkfifo -m 600 "$WORK/auth.fifo"
    mkdir -m 700 "$WORK/auth.dir"
    for f in "$WORK/auth.fifo" "$WORK/auth.dir"; do
        runrc rc timeout 10 "$ZKR" -s "$UNREACHABLE" --auth-file "$f" lock /cli/x true
        expect "--auth-file ${f##*/}: exit $rc, not 64: $(cat "$WORK/err")" [ "$rc" -eq 64 ]
    done
    # A first line longer than zkr reads is refused, not cut.
    f=$WORK/auth.long
    printf 'ops:%02000d\n' 0 > "$f"
    chmod 600 "$f"
    runrc rc "$ZKR" -s "$UNREACHABLE" --auth-file "$f" lock /cli/x true
    expect "--auth-file with a 2004-byte line: exit $rc, not 64" [ "$rc" -eq 64 ]
    expect "--auth-file long line: '$(cat "$WORK/err")'" grep -q "longer" "$WORK/err"
    runrc rc env ZKR_AUTH=bad "$ZKR" -s "$UNREACHABLE" lock /cli/x true
    expect "ZKR_AUTH without USER:PASSWORD: exit $rc, not 64" [ "$rc" -eq 64 ]
    runrc rc "$ZKR" -s "$UNREACHABLE" lock --acl private /cli/x true
    expect "--acl private without credentials: exit $rc, not 64" [ "$rc" -eq 64 ]
}

# Usage errors (64) are found before connecting: against an unreachable
# server with a 60 s session timeout, each ends with 64 and one line.
test_usage_before_connecting() {
    local rc args
    for args in "lock relative true" "lock /a/ true" "lock /a/../b true" \
        "lock --id= /a true" "elect --id= /a true" "sem --permits 2 / true" \
        "inspect rel" "release --force --reason x /a//b" "lock /a -c" \
        "lock -c true /a extra" "lock -w -1 /a true" "sem -c 0 /a true" \
        "lock --permits 2 /a true" "elect -n /a true" "bogus" "lock" \
        "--session-timeout 0 lock /a true" "-s localhost inspect /a" \
        "-s 127.0.0.1:99999 inspect /a" "-s 127.0.0.1:0 inspect /a" \
        "-s :2181 inspect /a" "-s 127.0.0.1:1,127.0.0.1 inspect /a" \
        "-s /chroot inspect /a"; do
        # shellcheck disable=SC2086
        runrc rc timeout 30 "$ZKR" -s "$UNREACHABLE" --session-timeout 60000 $args
        expect "'zkr $args' exit $rc, not 64" [ "$rc" -eq 64 ]
        expect "'zkr $args' said '$(cat "$WORK/err")'" \
            [ "$(wc -l < "$WORK/err")" -eq 1 ]
    done
    # An option elect does not have is named as the option, not as its
    # argument.
    for args in "-w 1" "--wait 1" "-E 3" "-n"; do
        # shellcheck disable=SC2086
        runrc rc "$ZKR" -s "$UNREACHABLE" elect $args /a true
        expect "'elect $args' exit $rc, not 64" [ "$rc" -eq 64 ]
        expect "'elect $args' does not name ${args%% *}: $(cat "$WORK/err")" \
            grep -q -- "${args%% *}" "$WORK/err"
    done
    runrc rc "$ZKR" -s "$UNREACHABLE" lock --id "$(printf 'a\xff')" /a true
    expect "--id not UTF-8: exit $rc, not 64" [ "$rc" -eq 64 ]
}

# -s HOSTS/CHROOT, as zkr(1) says: the paths are the chroot's.
# An unresolvable host is "unreachable" (69, retryable), with the reason.
test_server_list() {
    local rc
    "$ZKQ" "$ZKR_SERVER" create /cli-chroot >/dev/null 2>&1
    runrc rc "$ZKR" -s "$ZKR_SERVER/cli-chroot" lock /x sh -c \
        "'$ZKQ' '$ZKR_SERVER' ls /cli-chroot/x"
    expect "-s HOSTS/CHROOT: exit $rc, not 0: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    expect "-s HOSTS/CHROOT: no node under /cli-chroot/x: $(cat "$WORK/out")" \
        [ "$(grep -c . "$WORK/out")" -eq 1 ]
    runrc rc timeout 60 "$ZKR" --session-timeout 5000 -s nosuch.invalid:2181 inspect /x
    expect "unresolvable host: exit $rc, not 69" [ "$rc" -eq 69 ]
    expect "unresolvable host not named: '$(cat "$WORK/err")'" \
        grep -q "resolve nosuch.invalid" "$WORK/err"
}

# The sysexits statuses, and the ones that did not change.
test_exit_statuses() {
    local rc h
    runrc rc "$ZKR" -s "$UNREACHABLE" --session-timeout 1000 lock /cli/x true
    expect "unreachable: exit $rc, not 69" [ "$rc" -eq 69 ]
    expect "unreachable: no host in '$(cat "$WORK/err")'" \
        grep -q "$UNREACHABLE" "$WORK/err"
    expect "unreachable: not one line" [ "$(wc -l < "$WORK/err")" -eq 1 ]
    runrc rc "$ZKR" -s "$UNREACHABLE" --session-timeout 1000 inspect /cli/x
    expect "inspect unreachable: exit $rc, not 69" [ "$rc" -eq 69 ]

    # 77: a PATH whose ACL lets only ops create children.
    "$ZKR" --auth "$AUTH" lock --acl private /cli/denied true
    runrc rc "$ZKR" lock /cli/denied true
    expect "ZNOAUTH: exit $rc, not 77" [ "$rc" -eq 77 ]
    expect "ZNOAUTH: '$(cat "$WORK/err")'" grep -q "permission denied.*$ZKR_SERVER" "$WORK/err"
    runrc rc "$ZKR" --auth ops:wrong release --force --reason x /cli/denied
    expect "release with no holder: exit $rc, not 1" [ "$rc" -eq 1 ]
    # ... and an open PATH for --acl private.
    "$ZKQ" "$ZKR_SERVER" create /cli/weak
    runrc rc "$ZKR" --auth "$AUTH" lock --acl private /cli/weak true
    expect "weaker ACL: exit $rc, not 77" [ "$rc" -eq 77 ]

    # 71: another error (the path is a semaphore of another size).
    : > "$WORK/log"
    bg "$ZKR" sem --permits 2 /cli/size sh -c "echo start >> '$WORK/log'; exec sleep 60"
    expect "semaphore holder did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    runrc rc "$ZKR" sem --permits 3 /cli/size true
    expect "other error: exit $rc, not 71: $(cat "$WORK/err")" [ "$rc" -eq 71 ]
    expect "other error: no host in '$(cat "$WORK/err")'" grep -q "$ZKR_SERVER" "$WORK/err"

    # Unchanged: 1 and -E when not acquired, the command's own status,
    # 126, 127, 4 when ownership is lost.
    : > "$WORK/log"
    bg "$ZKR" lock /cli/busy sh -c "echo start >> '$WORK/log'; exec sleep 60"
    h=$!
    expect "holder did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    runrc rc "$ZKR" lock -n /cli/busy true
    expect "-n busy: exit $rc, not 1" [ "$rc" -eq 1 ]
    runrc rc "$ZKR" lock -n -E 75 /cli/busy true
    expect "-n -E 75 busy: exit $rc, not 75" [ "$rc" -eq 75 ]
    "$ZKR" release --force --reason "test 4" /cli/busy 2>/dev/null
    wait_status "$h"
    expect "holder evicted: exit $st, not 4" [ "$st" -eq 4 ]
    runrc rc "$ZKR" lock /cli/st sh -c 'exit 42'
    expect "command's status: $rc" [ "$rc" -eq 42 ]
    printf 'echo not run\n' > "$WORK/not-executable"
    chmod 644 "$WORK/not-executable"
    runrc rc "$ZKR" lock /cli/st "$WORK/not-executable"
    expect "not executable: $rc" [ "$rc" -eq 126 ]
    runrc rc "$ZKR" lock /cli/st no-such-command-zkr
    expect "not found: $rc" [ "$rc" -eq 127 ]
}

# flock's long options: --timeout/--wait (fractional), --nonblock,
# --conflict-exit-code, --shared, -c/--command STRING through sh -c (lock,
# elect; sem: --command, its -c staying --permits).
test_long_options() {
    local rc h t0 t1 opt
    : > "$WORK/log"
    bg "$ZKR" lock /cli/lo sh -c "echo start >> '$WORK/log'; exec sleep 60"
    h=$!
    expect "holder did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    for opt in --timeout --wait; do
        t0=$(now_ms)
        runrc rc "$ZKR" lock "$opt" 0.3 /cli/lo true
        t1=$(now_ms)
        expect "$opt 0.3 busy: exit $rc, not 1" [ "$rc" -eq 1 ]
        expect "$opt 0.3 returned after $((t1 - t0)) ms, before 0.3 s" \
            [ $((t1 - t0)) -ge 300 ]
        runrc rc "$ZKR" lock "$opt=0.3" --conflict-exit-code 9 /cli/lo true
        expect "$opt=0.3 --conflict-exit-code 9: exit $rc" [ "$rc" -eq 9 ]
    done
    runrc rc "$ZKR" lock --nonblock --conflict-exit-code=75 /cli/lo true
    expect "--nonblock --conflict-exit-code=75: exit $rc" [ "$rc" -eq 75 ]
    cleanup_procs

    # --shared: two readers at once.
    : > "$WORK/log"
    bg "$ZKR" lock --shared /cli/sh sh -c "echo start >> '$WORK/log'; exec sleep 60"
    expect "first reader did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    runrc rc "$ZKR" lock --shared --nonblock /cli/sh true
    expect "second --shared not granted beside the first: exit $rc" [ "$rc" -eq 0 ]
    runrc rc "$ZKR" lock --write --nonblock /cli/sh true
    expect "--write granted beside --shared: exit $rc" [ "$rc" -eq 1 ]
    cleanup_procs

    # -c / --command: the string runs through sh -c, with the grant's
    # environment, in lock and elect, before or after PATH.
    local form i=0
    for form in "lock -c" "lock --command" "elect -c" "elect --command" \
        "sem --permits 2 --command"; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        runrc rc "$ZKR" $form 'test -n "$ZKR_FENCE" && echo "$0" ok; exit 3' /cli/cmd$i
        expect "zkr $form STRING PATH: exit $rc, out '$(cat "$WORK/out")'" \
            [ "$rc.$(cat "$WORK/out")" = "3.sh ok" ]
    done
    for form in "lock" "elect"; do
        i=$((i + 1))
        runrc rc "$ZKR" "$form" /cli/cmd$i -c 'echo "$0" ok; exit 5'
        expect "zkr $form PATH -c STRING: exit $rc, out '$(cat "$WORK/out")'" \
            [ "$rc.$(cat "$WORK/out")" = "5.sh ok" ]
    done
    runrc rc "$ZKR" sem /cli/cmd --command 'echo ok'
    expect "sem without --permits: exit $rc" [ "$rc" -eq 64 ]
    # sem: -c N and --permits N are one option.
    : > "$WORK/log"
    bg "$ZKR" sem -c 1 /cli/sem1 sh -c "echo start >> '$WORK/log'; exec sleep 60"
    expect "sem -c 1 did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    runrc rc "$ZKR" sem --permits 1 -n /cli/sem1 true
    expect "sem --permits 1 beside sem -c 1: exit $rc, not 1" [ "$rc" -eq 1 ]
}

# zkr SUBCOMMAND --help lists every option of the subcommand (the lists
# below are those of zkr(1) and issue 15), exits 0, on stdout.
test_help_lists_every_option() {
    local sub opt out rc
    declare -A opts=(
        [lock]="--wait --timeout --nonblock --conflict-exit-code --command --read --shared --write --id --acl --on-suspend --grace --lost-exit-code --metrics-file --help"
        [sem]="--permits --wait --timeout --nonblock --conflict-exit-code --command --id --acl --on-suspend --grace --lost-exit-code --metrics-file --help"
        [elect]="--command --id --acl --on-suspend --grace --lost-exit-code --metrics-file --requeue --help"
        [inspect]="--json --help"
        [release]="--force --reason --node --help"
    )
    for sub in lock sem elect inspect release; do
        runrc rc "$ZKR" "$sub" --help
        expect "zkr $sub --help: exit $rc" [ "$rc" -eq 0 ]
        out=$(cat "$WORK/out")
        for opt in ${opts[$sub]}; do
            expect "zkr $sub --help does not list $opt" grep -q -- "$opt\b" <<< "$out"
        done
    done
    runrc rc "$ZKR" --help
    for opt in --server --session-timeout --auth --auth-file --verbose --version ZKR_AUTH; do
        expect "zkr --help does not list $opt" grep -q -- "$opt\b" "$WORK/out"
    done
    for opt in ENVIRONMENT "EXIT STATUS"; do
        expect "zkr(1) has no $opt section" grep -q "^\.SH \"*$opt" "$builddir/docs/man/zkr.1"
    done
}

# Global options may follow the subcommand, up to its PATH (zkr(1),
# GLOBAL OPTIONS), as etcdctl takes them: there they mean what they mean
# before it; -h/--help there is the subcommand's own; after PATH every
# word is the command's.
test_global_options_after_subcommand() {
    local rc real=$ZKR_SERVER
    # shellcheck disable=SC2016 # expanded by the command's shell
    runrc rc env ZKR_SERVER="$UNREACHABLE" "$ZKR" lock -s "$real" --session-timeout 4000 /cli/gafter -- sh -c 'echo "held $ZKR_LOCK_PATH"'
    expect "lock -s after the subcommand: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    expect "lock -s: the command did not run" grep -q "held /cli/gafter" "$WORK/out"
    runrc rc env ZKR_SERVER="$UNREACHABLE" "$ZKR" sem --server="$real" --permits 2 /cli/gafter-sem true
    expect "sem --server=: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    runrc rc env ZKR_SERVER="$UNREACHABLE" "$ZKR" elect --server "$real" /cli/gafter-el true
    expect "elect --server: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    runrc rc env ZKR_SERVER="$UNREACHABLE" "$ZKR" inspect --json -s "$real" /cli/gafter
    expect "inspect -s: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    runrc rc env ZKR_SERVER="$UNREACHABLE" "$ZKR" queue put -s "$real" /cli/gafter-q data
    expect "queue put -s: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    runrc rc env ZKR_SERVER="$UNREACHABLE" "$ZKR" queue len -s "$real" /cli/gafter-q
    expect "queue len -s: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    expect "queue len -s: '$(cat "$WORK/out")'" [ "$(cat "$WORK/out")" = 1 ]
    # The session timeout given after the subcommand is the one used.
    runrc rc timeout 30 "$ZKR" inspect -s "$UNREACHABLE" --session-timeout 1000 /cli/x
    expect "inspect --session-timeout after: exit $rc, not 69" [ "$rc" -eq 69 ]
    expect "inspect --session-timeout after: $(cat "$WORK/err")" grep -q "within 1000 ms" "$WORK/err"
    # Credentials after the subcommand: --acl private needs them.
    runrc rc "$ZKR" lock --auth ops:s3cret --acl private /cli/gafter-auth true
    expect "lock --auth after: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    runrc rc "$ZKR" inspect -a nocolon /cli/gafter
    expect "inspect -a nocolon: exit $rc, not 64" [ "$rc" -eq 64 ]
    expect "inspect -a nocolon: $(cat "$WORK/err")" grep -q -- "--auth wants USER:PASSWORD" "$WORK/err"
    runrc rc "$ZKR" lock --session-timeout 0 /cli/gafter true
    expect "lock --session-timeout 0: exit $rc, not 64" [ "$rc" -eq 64 ]
    runrc rc "$ZKR" inspect --version
    expect "inspect --version: exit $rc, '$(cat "$WORK/out")'" [ "$(cat "$WORK/out")" = "$("$ZKR" --version)" ]
    # -h there is the subcommand's; after PATH, words are the command's.
    runrc rc "$ZKR" lock -h
    expect "lock -h is not lock's help: $(head -1 "$WORK/out")" grep -q "^usage: zkr lock" "$WORK/out"
    runrc rc "$ZKR" lock /cli/gafter echo -s x -v
    expect "lock PATH echo -s x -v: exit $rc: $(cat "$WORK/err")" [ "$rc" -eq 0 ]
    expect "the command's -s was taken: '$(cat "$WORK/out")'" [ "$(cat "$WORK/out")" = "-s x -v" ]
}

start_server
run_test test_descriptors_every_subcommand
run_test test_inspect_hostile_identifiers
run_test test_inspect_invisible_characters
run_test test_permits_and_session_format
run_test test_credentials
run_test test_usage_before_connecting
run_test test_server_list
run_test test_exit_statuses
run_test test_long_options
run_test test_help_lists_every_option
run_test test_global_options_after_subcommand
done_testing
