#!/usr/bin/env bash
# zkr watch: a watched cache (zkr.h, "Watched caches"; zkr(1)) from the
# shell, as consul watch is:
#
#   zkr watch [--children [--data]] [--json] [-w S] PATH [--] [COMMAND...]
#       at each new view COMMAND runs with it on stdin: the node's data as
#       it is, or the children's names one a line, sorted (--data: NAME,
#       a tab, DATA, escaped as zkr members escapes), or one JSON document
#       (--json); env ZKR_WATCH_PATH, ZKR_WATCH_ZXID, and for a node
#       ZKR_WATCH_EXISTS (1/0) and ZKR_WATCH_VERSION (empty when missing).
#       The first view runs it; one run at a time, the views that come
#       meanwhile coalesced into one more run with the newest. A non-zero
#       exit is reported, the watch goes on; a COMMAND that cannot be run
#       ends it (126/127). Without COMMAND each view is printed ("# zxid N,
#       ..." then the view; --json a document a line), flushed. SIGINT,
#       SIGTERM: passed on to a running COMMAND, waited for, exit 0.
#       Usage errors 64; a PATH the ACL refuses 77.
#
# Oracles: the nodes as ZooKeeper holds them (zkq: written with zkq set,
# their czxid), the rules above, and the view's zxid rule (zkr.h: the
# node's mzxid, never lower than the view before). Every wait is bounded
# by multiples of the session timeout.
. "${srcdir:-.}/tests/cli/lib.sh"

zkr_need jq jq
# zkr's session timeout (its default), in seconds.
ZKS=10
TAB=$'\t'

# $WORK/rec LOG: COMMAND that logs one line per run: EXISTS VERSION ZXID
# PATH HEX, HEX the bytes of its stdin in hex ("-" none), "unset" for a
# variable not set, "empty" for one set empty.
cat >"$WORK/rec" <<'EOF'
#!/bin/sh
hex=$(od -An -v -tx1 | tr -d ' \n')
e=${ZKR_WATCH_EXISTS-unset}
v=${ZKR_WATCH_VERSION-unset}
[ -n "$v" ] || v=empty
printf '%s %s %s %s %s\n' "$e" "$v" "${ZKR_WATCH_ZXID-unset}" \
    "${ZKR_WATCH_PATH-unset}" "${hex:--}" >>"$1"
EOF
# $WORK/block LOG GO: COMMAND that logs "run ZXID VALUE" (its stdin), and
# "overlap" if another run is on (mkdir of LOG.lock fails), then waits for
# the file GO.
cat >"$WORK/block" <<'EOF'
#!/bin/sh
mkdir "$1.lock" 2>/dev/null || echo overlap >>"$1"
echo "run $ZKR_WATCH_ZXID $(cat)" >>"$1"
while [ ! -e "$2" ]; do sleep 0.05; done
rmdir "$1.lock" 2>/dev/null
EOF
chmod +x "$WORK/rec" "$WORK/block"

zkq() { "$ZKQ" "$ZKR_SERVER" "$@"; }
# mk PATH: creates PATH and its missing ancestors.
mk() {
    local p="" c
    local IFS=/
    for c in ${1#/}; do
        p=$p/$c
        zkq create "$p" >/dev/null 2>&1
    done
}
# put PATH DATA: sets PATH's data (printf's %b escapes in DATA).
put() { printf '%b' "$2" | zkq set "$1"; }
hex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }
czxid() { zkq czxid "$1" 2>/dev/null; }

# ended_with PID STATUS NAME: PID ends within 2 session timeouts, with
# STATUS. One that does not is left to the test's cleanup (killed).
ended_with() {
    if ! wait_for $((2 * ZKS)) dead "$1"; then
        fail "$3 did not end within 2 session timeouts"
        return
    fi
    wait_status "$1"
    expect "$3: exit $st, want $2" [ "$st" -eq "$2" ]
}

# last_matches FILE ERE: the last line of FILE matches ERE.
last_matches() { tail -n 1 "$1" 2>/dev/null | grep -Eq "$2"; }
# file_is FILE TEXT: FILE holds TEXT (and a newline, or not).
file_is() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
# json_last FILE FILTER: FILE's last line is JSON for which FILTER holds.
json_last() { tail -n 1 "$1" 2>/dev/null | jq -e "$2" >/dev/null 2>&1; }
# session_gone PORT SID: the server at PORT has no connection of session
# SID (hex, no leading zeros) any more (4lw cons).
session_gone() { ! zkr__4lw "$1" cons | grep -q "sid=0x$2[,)]"; }
# printed_data OUT: OUT ends with the view of the node holding
# "line 1\nline<TAB>2\n": its header, then the two lines, the tab escaped.
printed_data() {
    tail -n 3 "$1" | head -n 1 | grep -Eq '^# zxid [0-9]+, version 1, 14 bytes$' &&
        [ "$(tail -n 2 "$1")" = 'line 1'$'\n''line\t2' ]
}
# rec_last_is LOG EXISTS VERSION HEX: the last run saw them (any zxid).
rec_last_is() {
    tail -n 1 "$1" 2>/dev/null |
        awk -v e="$2" -v v="$3" -v h="$4" '$1 == e && $2 == v && $5 == h { ok = 1 } END { exit !ok }'
}
# zxids_rise LOG FIELD: the zxids in column FIELD never go down.
zxids_rise() {
    awk -v f="$2" 'NR > 1 && $f + 0 < prev { bad = 1 } { prev = $f + 0 } END { exit bad }' "$1"
}
# watch_bg OUT ERR ARGS...: zkr ARGS in the background ($! its PID), its
# stdout in OUT, its stderr in ERR.
watch_bg() {
    local out=$1 err=$2
    shift 2
    bg "$ZKR" "$@" >"$out" 2>"$err"
}

# The node: the first view runs COMMAND (the initial data, version, path,
# EXISTS=1); each set runs it again with the new bytes as they are (a NUL
# and a newline too); a delete runs it with EXISTS=0, an empty VERSION and
# nothing on stdin; the node made again runs it with version 0, and its
# zxid is then the new node's czxid (its mzxid). zxids never go down.
test_node() {
    local p=/cli/watch/node log=$WORK/node.log z cz
    mk "$p"
    put "$p" v1
    watch_bg "$WORK/node.out" "$WORK/node.err" watch "$p" -- "$WORK/rec" "$log"
    z=$!
    expect "the first view did not run COMMAND within 2 session timeouts: $(cat "$log" "$WORK/node.err" 2>/dev/null)" \
        wait_for $((2 * ZKS)) rec_last_is "$log" 1 1 "$(hex v1)"
    expect "the first run's path: $(cat "$log")" \
        awk -v p="$p" 'NR == 1 && $4 == p { ok = 1 } END { exit !ok }' "$log"
    put "$p" 'a\0b\n'
    expect "a set did not run COMMAND with the new bytes within 2 session timeouts: $(cat "$log")" \
        wait_for $((2 * ZKS)) rec_last_is "$log" 1 2 6100620a
    zkq delete "$p"
    expect "a delete did not run COMMAND with EXISTS=0, empty VERSION and stdin: $(cat "$log")" \
        wait_for $((2 * ZKS)) rec_last_is "$log" 0 empty -
    zkq create "$p"
    expect "the node made again did not run COMMAND: $(cat "$log")" \
        wait_for $((2 * ZKS)) rec_last_is "$log" 1 0 -
    cz=$(czxid "$p")
    expect "the re-made node's run has zxid $(tail -n 1 "$log" | cut -d' ' -f3), want its czxid $cz" \
        [ "$(tail -n 1 "$log" | cut -d' ' -f3)" = "$cz" ]
    expect "zxids went down: $(cut -d' ' -f3 "$log" | tr '\n' ' ')" zxids_rise "$log" 3
    expect "zkr said something: $(cat "$WORK/node.err")" [ ! -s "$WORK/node.err" ]
    expect "zkr wrote on stdout: $(cat "$WORK/node.out")" [ ! -s "$WORK/node.out" ]
    kill -TERM "$z"
    ended_with "$z" 0 "zkr watch after SIGTERM"
}

# A node that does not exist at the start: the first view runs COMMAND
# all the same (EXISTS=0); --json gives COMMAND one document: exists, its
# entry's data, version, mzxid and czxid.
test_node_missing_json() {
    local p=/cli/watch/later log=$WORK/later.log z cz
    mk /cli/watch
    watch_bg "$WORK/later.out" "$WORK/later.err" watch --json "$p" -- \
        sh -c 'cat >>"$1"' sh "$log"
    z=$!
    expect "the first view (no node) did not run COMMAND: $(cat "$WORK/later.err")" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1
    expect "first document: $(head -n 1 "$log")" jq -e --arg p "$p" \
        '.path == $p and .exists == false and .entries == [] and (.zxid | type == "number")' \
        <<<"$(head -n 1 "$log")" >/dev/null
    mk "$p"
    put "$p" 'h\xc3\xa9'
    expect "the node's data did not reach COMMAND: $(cat "$log")" \
        wait_for $((2 * ZKS)) json_last "$log" '.entries[0].data == "hé"'
    cz=$(czxid "$p")
    expect "--json document: $(tail -n 1 "$log") (czxid $cz)" jq -e --argjson cz "${cz:-0}" '
        .exists == true and (.entries | length) == 1 and
        (.entries[0] | .name == "later" and .version == 1 and
            .czxid == $cz and .mzxid > $cz and (has("data_hex") | not)) and
        .zxid == .entries[0].mzxid' <<<"$(tail -n 1 "$log")" >/dev/null
    expect "a line that is not one JSON document: $(cat "$log")" \
        [ "$(jq -c . "$log" | wc -l)" -eq "$(wc -l <"$log")" ]
    kill -INT "$z"
    ended_with "$z" 0 "zkr watch after SIGINT"
}

# --children: the names, sorted, one a line; a child made or deleted runs
# COMMAND again; a child's data change does not (names only). An outer
# ZKR_WATCH_EXISTS is not passed on (not a node's watch).
test_children() {
    local p=/cli/watch/dir log=$WORK/dir.log z
    mk "$p"
    zkq create "$p/c"
    zkq create "$p/a"
    bg env ZKR_WATCH_EXISTS=outer "$ZKR" watch --children "$p" -- \
        sh -c 'echo "run ${ZKR_WATCH_EXISTS-unset} $ZKR_WATCH_ZXID $(tr "\n" " ")" >>"$1"' sh "$log" \
        >"$WORK/dir.out" 2>"$WORK/dir.err"
    z=$!
    expect "the first view did not run COMMAND: $(cat "$log" "$WORK/dir.err" 2>/dev/null)" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1
    expect "first run: $(cat "$log"), want a c, sorted, no ZKR_WATCH_EXISTS" \
        eval '[ "$(cut -d" " -f1,2,4- "$log" 2>/dev/null)" = "run unset a c " ]'
    zkq create "$p/b"
    expect "a child made did not run COMMAND with a b c: $(cat "$log")" \
        wait_for $((2 * ZKS)) last_matches "$log" ' a b c $'
    zkq delete "$p/a"
    expect "a child deleted did not run COMMAND with b c: $(cat "$log")" \
        wait_for $((2 * ZKS)) last_matches "$log" '[0-9] b c $'
    expect "zxids went down: $(cut -d' ' -f3 "$log" | tr '\n' ' ')" zxids_rise "$log" 3
    kill -TERM "$z"
    ended_with "$z" 0 "zkr watch --children after SIGTERM"
    expect "runs: $(cat "$log"), want 3" [ "$(wc -l <"$log")" -eq 3 ]
}

# --children --data: NAME<TAB>DATA a line, escaped as zkr members escapes
# (\n, \t, \\, \xNN); a child's data change runs COMMAND again. --json:
# one document per view on stdin, the children sorted, with data (U+FFFD
# and data_hex for bytes that are not UTF-8), version, mzxid, czxid, and
# no "exists" (a node's only).
test_children_data() {
    local p=/cli/watch/data log=$WORK/data.log jlog=$WORK/data.json z j cz want
    mk "$p"
    zkq create "$p/x"
    put "$p/x" 'one'
    zkq create "$p/w"
    watch_bg "$WORK/data.out" "$WORK/data.err" watch --children --data "$p" -- \
        sh -c 'cat >"$1.new"; echo "--" >>"$1.new"; cat "$1.new" >>"$1"' sh "$log"
    z=$!
    watch_bg "$WORK/data.jout" "$WORK/data.jerr" watch "$p" --children --data --json -- \
        sh -c 'cat >>"$1"' sh "$jlog"
    j=$!
    expect "the first view did not run COMMAND: $(cat "$log" "$WORK/data.err" 2>/dev/null)" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1 '^--$'
    expect "first run: $(cat "$log"), want w<TAB> then x<TAB>one" \
        [ "$(cat "$log")" = "w${TAB}"$'\n'"x${TAB}one"$'\n--' ]
    put "$p/w" 'a\nb\tc\\\xff'
    want="w${TAB}"'a\nb\tc\\\xff'$'\n'"x${TAB}one"$'\n--'
    expect "a child's data change did not run COMMAND with it escaped: $(cat "$log"), want $want" \
        wait_for $((2 * ZKS)) file_is "$log.new" "$want"
    expect "the JSON view of the change did not come: $(cat "$jlog" "$WORK/data.jerr" 2>/dev/null)" \
        wait_for $((2 * ZKS)) json_last "$jlog" '.entries[0].data_hex == "610a6209635cff"'
    cz=$(czxid "$p/w")
    expect "--json document: $(tail -n 1 "$jlog") (w's czxid $cz)" \
        jq -e --arg p "$p" --argjson cz "${cz:-0}" '
        .path == $p and (has("exists") | not) and
        ([.entries[].name] == ["w", "x"]) and
        (.entries[0] | .data == "a\nb\tc\\\ufffd" and .version == 1 and
            .czxid == $cz and .mzxid > $cz) and
        (.entries[1] | .data == "one" and .version == 1 and
            (has("data_hex") | not)) and
        .zxid >= .entries[0].mzxid' <<<"$(tail -n 1 "$jlog")" >/dev/null
    expect "a line that is not one JSON document: $(cat "$jlog")" \
        [ "$(jq -c . "$jlog" | wc -l)" -eq "$(wc -l <"$jlog")" ]
    kill -TERM "$z" "$j"
    ended_with "$z" 0 "zkr watch --children --data after SIGTERM"
    ended_with "$j" 0 "zkr watch --children --data --json after SIGTERM"
}

# Coalescing: the first run blocks while 20 changes are made; COMMAND is
# never run twice at once, runs far fewer than 21 times, and its last run
# sees the final value.
test_coalescing() {
    local p=/cli/watch/busy log=$WORK/busy.log go=$WORK/busy.go z i runs
    mk "$p"
    put "$p" v0
    watch_bg "$WORK/busy.out" "$WORK/busy.err" watch "$p" -- "$WORK/block" "$log" "$go"
    z=$!
    expect "the first view did not run COMMAND: $(cat "$log" "$WORK/busy.err" 2>/dev/null)" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1 '^run [0-9]* v0$'
    for i in $(seq 1 20); do
        put "$p" "v$i"
    done
    touch "$go"
    expect "the final value did not reach COMMAND within 2 session timeouts: $(cat "$log")" \
        wait_for $((2 * ZKS)) last_matches "$log" '^run [0-9]+ v20$'
    runs=$(grep -c '^run ' "$log")
    # The first run, then at most: the view the cache had when the first
    # run ended, one read in flight, and the final one.
    expect "COMMAND ran $runs times for 21 values, want at most 4: $(tr '\n' '|' <"$log")" \
        [ "$runs" -le 4 ]
    expect "two runs at once: $(tr '\n' '|' <"$log")" [ "$(grep -c overlap "$log")" -eq 0 ]
    expect "zxids went down: $(tr '\n' '|' <"$log")" zxids_rise "$log" 2
    kill -TERM "$z"
    ended_with "$z" 0 "zkr watch after SIGTERM"
}

# Without COMMAND: each view printed as it comes, flushed (stdout is a
# file, read while zkr runs): "# zxid N, no node", then "# zxid N,
# version V, L bytes" and the data line by line, escaped; --children:
# "# zxid N, K children" and the names. --json: a document a line.
test_print() {
    local p=/cli/watch/print out=$WORK/print.out jout=$WORK/print.json
    local cout=$WORK/print.children z j c
    mk /cli/watch
    watch_bg "$out" "$WORK/print.err" watch "$p"
    z=$!
    watch_bg "$jout" "$WORK/print.jerr" watch --json "$p"
    j=$!
    watch_bg "$cout" "$WORK/print.cerr" watch --children /cli/watch
    c=$!
    expect "no first view printed: $(cat "$out" "$WORK/print.err")" \
        wait_for $((2 * ZKS)) lines_ge "$out" 1 '^# zxid [0-9]*, no node$'
    expect "no first JSON view printed: $(cat "$jout" "$WORK/print.jerr")" \
        wait_for $((2 * ZKS)) lines_ge "$jout" 1
    expect "no first children view printed: $(cat "$cout" "$WORK/print.cerr")" \
        wait_for $((2 * ZKS)) lines_ge "$cout" 1 '^# zxid [0-9]*, [0-9]* child'
    zkq create "$p"
    put "$p" 'line 1\nline\t2\n'
    expect "the data was not printed: $(cat "$out")" \
        wait_for $((2 * ZKS)) printed_data "$out"
    expect "the child was not listed: $(cat "$cout")" \
        wait_for $((2 * ZKS)) eval 'grep -qx print "$cout"'
    expect "the JSON views: $(cat "$jout")" \
        wait_for $((2 * ZKS)) json_last "$jout" '.exists and .entries[0].data == "line 1\nline\t2\n"'
    expect "alive while printing" alive "$z"
    zkq delete "$p"
    expect "the delete was not printed: $(cat "$out")" \
        wait_for $((2 * ZKS)) eval 'last_matches "$out" "^# zxid [0-9]+, no node$" && [ "$(grep -c "no node" "$out")" -ge 2 ]'
    expect "zxids went down: $(grep '^#' "$out" | tr '\n' ' ')" \
        eval 'grep "^#" "$out" | tr -d , >"$out.z" && zxids_rise "$out.z" 3'
    kill -INT "$z"
    kill -TERM "$j" "$c"
    ended_with "$z" 0 "zkr watch (print) after SIGINT"
    ended_with "$j" 0 "zkr watch --json (print) after SIGTERM"
    ended_with "$c" 0 "zkr watch --children (print) after SIGTERM"
    expect "a line that is not one JSON document: $(cat "$jout")" \
        [ "$(jq -c . "$jout" | wc -l)" -eq "$(wc -l <"$jout")" ]
}

# A COMMAND that exits non-zero is reported, and the watch goes on; one
# that cannot be run ends zkr watch: found out before connecting (127
# not found, 126 not executable), or at a later run (the file gone: 127).
test_command_failures() {
    local p=/cli/watch/fail log=$WORK/fail.log z cmd=$WORK/once
    mk "$p"
    watch_bg "$WORK/fail.out" "$WORK/fail.err" watch "$p" -- \
        sh -c 'cat >/dev/null; echo run >>"$1"; exit 3' sh "$log"
    z=$!
    expect "the first view did not run COMMAND: $(cat "$WORK/fail.err")" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1
    put "$p" again
    expect "after COMMAND's exit 3, a change did not run it again: $(cat "$log" "$WORK/fail.err")" \
        wait_for $((2 * ZKS)) lines_ge "$log" 2
    expect "exit 3 not reported: $(cat "$WORK/fail.err")" grep -q 'status 3' "$WORK/fail.err"
    expect "zkr watch ended after a failed COMMAND" alive "$z"
    kill -TERM "$z"
    ended_with "$z" 0 "zkr watch after SIGTERM"
    # Not found, not executable: before connecting (no server there).
    st=0
    "$ZKR" -s 127.0.0.1:1 watch "$p" -- /nonexistent/cmd 2>"$WORK/fail.err" || st=$?
    expect "a COMMAND not found: exit $st, want 127: $(cat "$WORK/fail.err")" [ "$st" -eq 127 ]
    : >"$WORK/not-executable"
    chmod -x "$WORK/not-executable"
    st=0
    "$ZKR" -s 127.0.0.1:1 watch "$p" "$WORK/not-executable" 2>"$WORK/fail.err" || st=$?
    expect "a COMMAND not executable: exit $st, want 126: $(cat "$WORK/fail.err")" [ "$st" -eq 126 ]
    # Gone by the second run.
    printf '#!/bin/sh\nrm -f "$0"\n' >"$cmd"
    chmod +x "$cmd"
    watch_bg "$WORK/fail.out" "$WORK/fail.err" watch "$p" -- "$cmd"
    z=$!
    expect "the first run did not happen: $(cat "$WORK/fail.err")" \
        wait_for $((2 * ZKS)) eval '[ ! -e "$cmd" ]'
    put "$p" third
    ended_with "$z" 127 "zkr watch whose COMMAND is gone"
    expect "no message: $(cat "$WORK/fail.err")" grep -q 'not found' "$WORK/fail.err"
}

# SIGTERM while COMMAND runs: passed on to it (its trap logs it), and zkr
# waits for it to end before it exits 0.
test_signal_waits_for_command() {
    local p=/cli/watch/sig log=$WORK/sig.log go=$WORK/sig.go z
    mk "$p"
    watch_bg "$WORK/sig.out" "$WORK/sig.err" watch "$p" -- sh -c \
        'trap "echo got TERM >>\"\$1\"" TERM; echo up >>"$1"; while [ ! -e "$2" ]; do sleep 0.05; done; echo end >>"$1"' \
        sh "$log" "$go"
    z=$!
    expect "COMMAND did not start: $(cat "$WORK/sig.err")" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1 '^up$'
    kill -TERM "$z"
    expect "COMMAND did not get SIGTERM: $(cat "$log")" \
        wait_for $((2 * ZKS)) lines_ge "$log" 1 '^got TERM$'
    expect "zkr exited before its COMMAND" eval '! wait_for 1 dead "$z"'
    touch "$go"
    ended_with "$z" 0 "zkr watch after SIGTERM, once COMMAND ended"
    expect "COMMAND did not end: $(cat "$log")" lines_ge "$log" 1 '^end$'
}

# The session expires while zkr is stopped (kill -STOP past the session
# timeout: the server closes its connection, cons no longer lists it); a
# change made meanwhile reaches COMMAND once zkr is continued and the
# session made again (-v says LOST, then CONNECTED), and so does a later
# one.
test_session_expiry() {
    local p=/cli/watch/exp log=$WORK/exp.log err=$WORK/exp.err z sid port
    port=${ZKR_SERVER##*:}
    mk "$p"
    put "$p" before
    watch_bg "$WORK/exp.out" "$err" -v --session-timeout 4000 watch "$p" -- "$WORK/rec" "$log"
    z=$!
    expect "the first view did not run COMMAND: $(cat "$err")" \
        wait_for $((2 * ZKS)) rec_last_is "$log" 1 1 "$(hex before)"
    sid=$(sed -n 's/.*, session 0*\([0-9a-f]*\),.*/\1/p' "$err" | head -n 1)
    expect "no session id in zkr -v's words: $(cat "$err")" [ -n "$sid" ]
    expect "cons does not list zkr's session $sid: $(zkr__4lw "$port" cons)" \
        eval '! session_gone "$port" "$sid"'
    kill -STOP "$z"
    put "$p" during
    expect "the stopped zkr's session $sid was not expired within 3 session timeouts" \
        wait_for 12 session_gone "$port" "$sid"
    kill -CONT "$z"
    expect "the change made while zkr was stopped did not reach COMMAND within 3 session timeouts: $(cat "$log" "$err")" \
        wait_for 12 rec_last_is "$log" 1 2 "$(hex during)"
    expect "zkr -v did not say LOST then CONNECTED: $(cat "$err")" \
        eval 'grep -A100 " LOST" "$err" | grep -q " CONNECTED"'
    put "$p" after
    expect "a change on the new session did not reach COMMAND: $(cat "$log")" \
        wait_for $((2 * ZKS)) rec_last_is "$log" 1 3 "$(hex after)"
    expect "zxids went down: $(cut -d' ' -f3 "$log" | tr '\n' ' ')" zxids_rise "$log" 3
    kill -TERM "$z"
    ended_with "$z" 0 "zkr watch after SIGTERM"
}

# -w: no first view within SECONDS is exit 1, COMMAND not run. Through
# the fault proxy delaying every chunk 1 s each way, the first read takes
# a 2 s round trip after the session is open: -w 0.5 gives up first.
test_wait_first_view() {
    local p=/cli/watch/slow t0 took
    mk "$p"
    if ! proxy_start || ! proxy_cmd delay 1000; then
        fail "the fault proxy did not start: $(cat "$WORK/proxy.log")"
        return
    fi
    st=0
    t0=$(now_ms)
    "$ZKR" -s "$PROXY_HOSTS" watch -w 0.5 "$p" -- sh -c 'echo ran >>"$1"' sh "$WORK/slow.log" \
        2>"$WORK/slow.err" || st=$?
    took=$(($(now_ms) - t0))
    expect "-w 0.5 with a 2 s round trip: exit $st, want 1: $(cat "$WORK/slow.err")" [ "$st" -eq 1 ]
    expect "no message: $(cat "$WORK/slow.err")" grep -q 'no view within -w' "$WORK/slow.err"
    expect "COMMAND ran without a view" [ ! -e "$WORK/slow.log" ]
    expect "zkr gave up after $took ms, before -w's 0.5 s" [ "$took" -ge 500 ]
    proxy_cmd pass
}

# A PATH the ACL does not let us read: 77, said at once (not at -w).
test_refused() {
    local p=/cli/watch/private
    mk /cli/watch
    ZKQ_AUTH=ops:s3cret zkq create-private "$p"
    for args in "$p" "--children $p"; do
        st=0
        # shellcheck disable=SC2086 # the words of each case
        timeout $((3 * ZKS)) "$ZKR" watch $args -- true 2>"$WORK/refused.err" || st=$?
        expect "watch $args of a PATH it may not read: exit $st, want 77: $(cat "$WORK/refused.err")" \
            [ "$st" -eq 77 ]
        expect "no message: $(cat "$WORK/refused.err")" grep -q 'permission denied' "$WORK/refused.err"
    done
}

# usage_is ARGS...: zkr watch ARGS is a usage error (64), with a message,
# before any connection (no server there).
usage_is() {
    st=0
    "$ZKR" -s 127.0.0.1:1 watch "$@" >/dev/null 2>"$WORK/usage.err" || st=$?
    expect "watch $(printf '%q ' "$@"): exit $st, want 64" [ "$st" -eq 64 ]
    expect "watch $(printf '%q ' "$@"): no message" grep -q 'zkr watch: ' "$WORK/usage.err"
}

test_usage_errors() {
    local long
    long=/$(printf 'x%.0s' $(seq 1030))
    usage_is
    usage_is --children
    usage_is relative
    usage_is relative true
    usage_is /a/
    usage_is /a//b -- true
    usage_is /a/../b
    usage_is $'/a\tb'
    usage_is $'/a\xffb'
    usage_is /zookeeper/config
    usage_is "$long"
    usage_is --data /a -- true
    usage_is /a --data
    usage_is /a --
    usage_is -w abc /a
    usage_is --frob /a
    usage_is /a --frob -- true
    st=0
    "$ZKR" watch --help >"$WORK/usage.out" || st=$?
    expect "watch --help: exit $st" [ "$st" -eq 0 ]
    for opt in --children --data --json --wait --timeout --help \
        ZKR_WATCH_PATH ZKR_WATCH_ZXID ZKR_WATCH_EXISTS ZKR_WATCH_VERSION; do
        expect "watch --help does not list $opt" grep -q -- "$opt\b" "$WORK/usage.out"
    done
    expect "zkr --help does not list watch" \
        eval 'grep -q "zkr watch " <<<"$("$ZKR" --help)"'
}

# head_of OUT N ARGS...: zkr ARGS | head -n N, bounded by 2 session
# timeouts (timeout's 124 then); head's lines in OUT, zkr's status in $st.
head_of() {
    local out=$1 n=$2
    shift 2
    st=0
    # shellcheck disable=SC2016 # expanded by bash -c
    timeout $((2 * ZKS)) bash -c 'n=$1; shift; "$@" 2>"$0.err" | head -n "$n" >"$0"; exit "${PIPESTATUS[0]}"' \
        "$out" "$n" "$ZKR" "$@" || st=$?
}

# Without COMMAND, a reader that went away (zkr watch PATH | head -1)
# ends the watch at once with 0, as tail -f | head does, even while
# nothing changes (POLLERR on stdout): not SIGPIPE, not forever. A line of
# the view starting with '#' (the node's data, a child's name) is printed
# \x23...: only a header starts with '#'.
test_reader_gone_and_hash() {
    local p=/cli/watch/quiet c
    mk "$p"
    put "$p" '#not a header\nplain\n#x'
    for args in "$p" "--children $p" "--json $p"; do
        # shellcheck disable=SC2086 # the words of each case
        head_of "$WORK/quiet.out" 1 watch $args
        expect "watch $args | head -1: exit $st, want 0 (124: did not end within 2 session timeouts): $(cat "$WORK/quiet.out.err")" \
            [ "$st" -eq 0 ]
        expect "watch $args | head -1: no first line: $(cat "$WORK/quiet.out")" \
            [ "$(wc -l <"$WORK/quiet.out")" -eq 1 ]
    done
    head_of "$WORK/hash.out" 4 watch "$p"
    expect "watch | head -4: exit $st: $(cat "$WORK/hash.out.err")" [ "$st" -eq 0 ]
    expect "data lines starting with '#' not escaped: $(cat "$WORK/hash.out")" \
        [ "$(tail -n 3 "$WORK/hash.out")" = "$(printf '%s\n' '\x23not a header' plain '\x23x')" ]
    for c in '#h' 'a#'; do
        zkq create "$p/$c" >/dev/null 2>&1
    done
    head_of "$WORK/hash.out" 3 watch --children "$p"
    expect "watch --children | head -3: exit $st: $(cat "$WORK/hash.out.err")" [ "$st" -eq 0 ]
    expect "a child's leading '#' not escaped: $(cat "$WORK/hash.out")" \
        [ "$(tail -n 2 "$WORK/hash.out")" = "$(printf '%s\n' '\x23h' 'a#')" ]
    # COMMAND reads the names as they are: it gets no header.
    "$ZKR" watch --children "$p" -- sh -c 'cat >"$1"; kill -TERM "$PPID"' sh "$WORK/hash.in" \
        2>"$WORK/hash.err" &
    c=$!
    t_pids+=("$c")
    ended_with "$c" 0 "watch --children with a COMMAND that ends it"
    expect "COMMAND's names: $(cat "$WORK/hash.in")" \
        [ "$(cat "$WORK/hash.in")" = "$(printf '%s\n' '#h' 'a#')" ]
}

# Under a terminal, a COMMAND that reads it is stopped (SIGTTIN: it runs
# in a process group of its own, in the background); zkr says so, and
# Ctrl-C ends the watch all the same: the signal and SIGCONT reach
# COMMAND's group, zkr waits for it and exits 0.
test_command_reads_terminal() {
    local p=/cli/watch/tty
    if ! command -v python3 >/dev/null 2>&1; then
        return
    fi
    mk "$p"
    st=0
    python3 "$top_srcdir/tests/cli/ptyplay.py" "$(scaled $((2 * ZKS)))" \
        expect:'stopped by SIGTTIN' send:'\x03' -- \
        "$ZKR" watch "$p" -- sh -c 'read x </dev/tty' >"$WORK/pty" 2>&1 || st=$?
    expect "the stop was not said, or Ctrl-C did not end zkr watch: $(cat "$WORK/pty")" \
        [ "$st" -eq 0 ]
    expect "zkr watch's exit status: $(cat "$WORK/pty")" grep -q '^exit 0' "$WORK/pty"
    expect "no hint of the terminal read: $(cat "$WORK/pty")" grep -q 'it read the terminal' "$WORK/pty"
}

start_server
run_test test_node
run_test test_node_missing_json
run_test test_children
run_test test_children_data
run_test test_coalescing
run_test test_print
run_test test_command_failures
run_test test_signal_waits_for_command
run_test test_session_expiry
run_test test_wait_first_view
run_test test_refused
run_test test_usage_errors
run_test test_reader_gone_and_hash
run_test test_command_reads_terminal
done_testing
