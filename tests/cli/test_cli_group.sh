#!/usr/bin/env bash
# zkr member and zkr members: group membership from the shell (zkr.h,
# "Group membership"; zkr(1)). A member is the ephemeral node
# PATH/ID__party__ holding its data (kazoo's Party layout); zkr member is
# one while its COMMAND runs, contained as zkr lock's, and exits with the
# command's status; zkr members prints the view (text, --json, --watch).
# Interoperation on one path with kazoo's Party (tests/cli/kazoo_party.py)
# and Apache Curator's GroupMember (tests/cli/CuratorGroupMember.java);
# examples/members.c, workers that share shards by their positions.
#
#   zkr member [options] PATH [options] [--] COMMAND [ARG...]
#       the command's status; 1 (-E) not joined within -w, the command
#       not run; 126/127 not executable/found; usage errors: 64
#   zkr members [--json] [--watch] [-w SECONDS] PATH
#       text: ID<TAB>DATA a line, C-style escapes; --watch: a line
#       "# zxid N, K members" before each view, until SIGINT/SIGTERM (0)
#
# Oracles: the header's layout (node names, data, ids), the members as
# ZooKeeper itself holds them (zkq), and what kazoo and Curator list. Every
# wait is bounded by multiples of the session timeout.
. "${srcdir:-.}/tests/cli/lib.sh"

zkr_need jq jq
kazoo_peer
curator_peer CuratorGroupMember.java
CURATOR=() # set once the server runs: "${CURATOR[@]}" PATH ACTION ARGS...
KAZOO=()   # "${KAZOO[@]}" PATH ACTION ARGS...
AUTH=ops:s3cret
# zkr's session timeout (its default, and the peers'), in seconds.
ZKS=10
TAB=$'\t'

# $WORK/hold LOG NAME GO [STATUS]: a member's command: logs "NAME up PID",
# waits until the file GO exists, logs "NAME end", exits STATUS (default
# 0).
cat >"$WORK/hold" <<'EOF'
#!/bin/sh
echo "$2 up $$" >>"$1"
while [ ! -e "$3" ]; do sleep 0.05; done
echo "$2 end" >>"$1"
exit "${4:-0}"
EOF
chmod +x "$WORK/hold"

exists() { "$ZKQ" "$ZKR_SERVER" exists "$1" >/dev/null 2>&1; }
absent() { ! exists "$1"; }
czxid() { "$ZKQ" "$ZKR_SERVER" czxid "$1" 2>/dev/null; }
# czxid_gt PATH N: PATH exists, made after zxid N.
czxid_gt() {
    local z
    z=$(czxid "$1")
    [ -n "$z" ] && [ "$z" -gt "$2" ]
}

# mem ARGS...: zkr members ARGS; stdout in $WORK/mem.out, status in $st,
# stderr in $WORK/mem.err.
mem() {
    st=0
    "$ZKR" members "$@" >"$WORK/mem.out" 2>"$WORK/mem.err" || st=$?
    return "$st"
}

# member ARGS...: zkr member ARGS in the foreground; status in $st,
# stderr in $WORK/member.err.
member() {
    st=0
    "$ZKR" member "$@" >"$WORK/member.out" 2>"$WORK/member.err" || st=$?
}

# members_are PATH LINE...: zkr members PATH prints exactly the LINEs.
members_are() {
    local p=$1 want
    shift
    want=$(printf '%s\n' "$@")
    [ $# -gt 0 ] || want=""
    mem "$p" && [ "$(cat "$WORK/mem.out")" = "$want" ]
}
# listed PATH: what zkr members PATH printed, for messages.
listed() { "$ZKR" members "$1" 2>&1 | tr '\n\t' '| '; }

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

# up LOG NAME: the hold command NAME has started (within 2 session
# timeouts).
up() {
    expect "the command $2 did not start within 2 session timeouts" \
        wait_for $((2 * ZKS)) lines_ge "$1" 1 "^$2 up "
}
pid_of() { awk -v n="$2" '$1 == n && $2 == "up" { print $3 }' "$1"; }

# A member while its command runs, listed by zkr members with its id and
# data, its node PATH/ID__party__ holding the data; sorted by node name;
# made again when another client deletes it; gone once the command has
# exited; zkr's status is the command's (3 here).
test_member_while_command_runs() {
    local p=/cli/grp/run log=$WORK/run.log a b cz
    bg "$ZKR" member "$p" --id b1 --data "hello world" -- \
        "$WORK/hold" "$log" b1 "$WORK/run.go" 3
    b=$!
    bg "$ZKR" member --id a1 "$p" "$WORK/hold" "$log" a1 "$WORK/run.go"
    a=$!
    up "$log" b1
    up "$log" a1
    expect "zkr members: $(listed "$p"), want a1 then b1" \
        members_are "$p" "a1${TAB}a1" "b1${TAB}hello world"
    expect "nodes at $p: $(zk_ls "$p" | tr '\n' ' ')" \
        [ "$(zk_ls "$p" | tr '\n' ' ')" = "a1__party__ b1__party__ " ]
    expect "b1's node holds '$("$ZKQ" "$ZKR_SERVER" get "$p/b1__party__")'" \
        [ "$("$ZKQ" "$ZKR_SERVER" get "$p/b1__party__")" = "hello world" ]
    cz=$(czxid "$p/a1__party__")
    "$ZKQ" "$ZKR_SERVER" delete "$p/a1__party__"
    expect "a1's node deleted by another client was not made again within 2 session timeouts" \
        wait_for $((2 * ZKS)) czxid_gt "$p/a1__party__" "$cz"
    expect "zkr members after a1's node was made again: $(listed "$p")" \
        members_are "$p" "a1${TAB}a1" "b1${TAB}hello world"
    touch "$WORK/run.go"
    ended_with "$b" 3 "member b1 (its command exits 3)"
    ended_with "$a" 0 "member a1"
    expect "members after the commands ended: $(listed "$p")" members_are "$p"
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
}

# Exit statuses pass through: 0, a status, a death by signal (128+N); -c
# STRING runs the string with sh. No member is left after any of them.
test_exit_statuses() {
    local p=/cli/grp/status
    member "$p" -- true
    expect "member -- true: exit $st, want 0: $(cat "$WORK/member.err")" [ "$st" -eq 0 ]
    member "$p" -- sh -c 'exit 3'
    expect "member -- sh -c 'exit 3': exit $st, want 3" [ "$st" -eq 3 ]
    member "$p" -c 'kill -TERM $$'
    expect "member -c 'kill -TERM \$\$': exit $st, want 143" [ "$st" -eq 143 ]
    member "$p" -- sh -c 'kill -KILL $$'
    expect "member -- sh -c 'kill -KILL \$\$': exit $st, want 137" [ "$st" -eq 137 ]
    member --id c1 "$p" -c 'echo "in $0"; "$0" -c "exit 5"'
    expect "member -c STRING: exit $st, output '$(cat "$WORK/member.out")'" \
        [ "$st:$(cat "$WORK/member.out")" = "5:in sh" ]
    expect "members left: $(listed "$p")" members_are "$p"
    expect "nodes left at $p: $(zk_ls "$p" | tr '\n' ' ')" nodes_eq "$p" 0
    # A group whose PATH does not exist has no members.
    mem /cli/grp/none/at/all
    expect "members of a missing PATH: exit $st, output '$(cat "$WORK/mem.out")'" \
        [ "$st:$(cat "$WORK/mem.out")" = "0:" ]
}

# The default id is HOST:PID (zkr's PID), and the default data is the id.
test_default_id() {
    local p=/cli/grp/default log=$WORK/default.log z id
    bg "$ZKR" member "$p" -- "$WORK/hold" "$log" d "$WORK/default.go"
    z=$!
    up "$log" d
    id="$(uname -n):$z"
    expect "zkr members: $(listed "$p"), want '$id<TAB>$id'" \
        members_are "$p" "$id$TAB$id"
    expect "node: $(zk_ls "$p" | tr '\n' ' '), want ${id}__party__" \
        [ "$(zk_ls "$p")" = "${id}__party__" ]
    touch "$WORK/default.go"
    ended_with "$z" 0 "the member with the default id"
}

# --json: one document {"zxid", "members": [{"id", "name", "data", "czxid",
# "owner"}]}; data that is not UTF-8 has U+FFFD for each stray byte and the
# exact bytes in data_hex; the text form escapes newline, tab, backslash
# and stray bytes C-style. A NUL in data (kazoo can write one): \x00,
# \u0000.
test_json_and_escapes() {
    local p=/cli/grp/json log=$WORK/json.log z k node cz doc
    local data=$'a\nb"c\\\xff\td'
    bg "$ZKR" member --id j1 --data "$data" "$p" -- "$WORK/hold" "$log" j1 "$WORK/json.go"
    z=$!
    up "$log" j1
    mem "$p"
    expect "text: '$(cat "$WORK/mem.out")', want j1<TAB>a\\nb\"c\\\\\\xff\\td" \
        [ "$(cat "$WORK/mem.out")" = "j1${TAB}"'a\nb"c\\\xff\td' ]
    mem --json "$p"
    doc=$(cat "$WORK/mem.out")
    expect "--json: exit $st, not one line of JSON: $doc" \
        eval '[ "$st" -eq 0 ] && [ "$(grep -c . <<<"$doc")" -eq 1 ] && jq -e . <<<"$doc" >/dev/null'
    cz=$(czxid "$p/j1__party__")
    expect "--json fields: $doc (czxid $cz)" jq -e --argjson cz "${cz:-0}" '
        (.zxid | type == "number") and .zxid >= $cz and
        (.members | length) == 1 and
        (.members[0] | .id == "j1" and .name == "j1__party__" and
            .data == "a\nb\"c\\\ufffd\td" and
            .data_hex == "610a6222635cff0964" and
            .czxid == $cz and (.owner | test("^0x[0-9a-f]+$")) and
            .owner != "0x0")' <<<"$doc" >/dev/null
    touch "$WORK/json.go"
    ended_with "$z" 0 "member j1"
    # Valid UTF-8: as it is, no data_hex.
    bg "$ZKR" member --id u1 --data 'héllo ☃' "$p" -- "$WORK/hold" "$log" u1 "$WORK/json.go2"
    z=$!
    up "$log" u1
    mem "$p"
    expect "text of UTF-8 data: '$(cat "$WORK/mem.out")'" \
        [ "$(cat "$WORK/mem.out")" = "u1${TAB}héllo ☃" ]
    mem --json "$p"
    expect "--json of UTF-8 data: $(cat "$WORK/mem.out")" jq -e \
        '.members[0] | .data == "héllo ☃" and (has("data_hex") | not)' "$WORK/mem.out" >/dev/null
    touch "$WORK/json.go2"
    ended_with "$z" 0 "member u1"
    # NUL bytes and a stray byte, from kazoo.
    bg "${KAZOO[@]}" "$p" join hex:780079000aff "$WORK/json.go3" >"$WORK/json.kz" 2>"$WORK/json.kz.err"
    k=$!
    expect "kazoo did not join: $(tail -3 "$WORK/json.kz.err")" \
        wait_for $((3 * ZKS)) lines_ge "$WORK/json.kz" 1 '^joined '
    node=$(awk '$1 == "joined" { print $2 }' "$WORK/json.kz")
    mem "$p"
    expect "text of NUL bytes: '$(cat "$WORK/mem.out")'" \
        [ "$(cat "$WORK/mem.out")" = "${node%__party__}${TAB}"'x\x00y\x00\n\xff' ]
    mem --json "$p"
    expect "--json of NUL bytes: $(cat "$WORK/mem.out")" jq -e \
        '.members[0] | .data == "x\u0000y\u0000\n\ufffd" and .data_hex == "780079000aff"' \
        "$WORK/mem.out" >/dev/null
    touch "$WORK/json.go3"
    ended_with "$k" 0 "kazoo's member"
}

# left_after FILE LINE: FILE has a header of an empty view after LINE.
left_after() {
    awk -v m="$2" '$0 == m { seen = 1 }
        seen && /^# zxid [0-9]+, 0 members$/ { found = 1 }
        END { exit !found }' "$1"
}
# zxids_rise FILE: the headers' zxids never go down.
zxids_rise() {
    awk '/^# zxid / { z = $3 + 0; if (z < last) bad = 1; last = z }
        END { exit bad }' "$1"
}
# json_joined FILE ID / json_left FILE ID: a view lists ID; a later view
# lists no member.
json_joined() { jq -e -s --arg id "$2" 'any(.[]; any(.members[]; .id == $id))' "$1" >/dev/null 2>&1; }
json_left() {
    jq -e -s --arg id "$2" '
        (map(any(.members[]; .id == $id)) | index(true)) as $i |
        $i != null and any(.[$i + 1:][]; (.members | length) == 0)' "$1" >/dev/null 2>&1
}

# --watch: a view when a member joins and when it leaves, each flushed as
# it comes (stdout is a file here); SIGINT ends it with 0. With --json,
# one document a line; SIGTERM ends it with 0.
test_watch() {
    local p=/cli/grp/watch log=$WORK/watch.log out=$WORK/watch.out w z
    bg "$ZKR" members --watch "$p" >"$out" 2>"$WORK/watch.err"
    w=$!
    expect "no first (empty) view within 2 session timeouts: $(cat "$out" "$WORK/watch.err")" \
        wait_for $((2 * ZKS)) lines_ge "$out" 1 '^# zxid [0-9]*, 0 members$'
    bg "$ZKR" member --id w1 --data wdata "$p" -- "$WORK/hold" "$log" w1 "$WORK/watch.go"
    z=$!
    expect "the join was not shown within 2 session timeouts: $(cat "$out")" \
        wait_for $((2 * ZKS)) eval 'grep -qx "w1${TAB}wdata" "$out" && grep -q "^# zxid [0-9]*, 1 member$" "$out"'
    touch "$WORK/watch.go"
    ended_with "$z" 0 "member w1"
    expect "the leave was not shown within 2 session timeouts: $(cat "$out")" \
        wait_for $((2 * ZKS)) left_after "$out" "w1${TAB}wdata"
    expect "zxids went down: $(grep '^#' "$out" | tr '\n' ' ')" zxids_rise "$out"
    kill -INT "$w"
    ended_with "$w" 0 "members --watch after SIGINT"
    # --json --watch
    out=$WORK/watch.json
    bg "$ZKR" members --watch --json "$p" >"$out" 2>"$WORK/watch.err"
    w=$!
    expect "no first JSON view within 2 session timeouts: $(cat "$out" "$WORK/watch.err")" \
        wait_for $((2 * ZKS)) lines_ge "$out" 1
    bg "$ZKR" member --id w2 "$p" -- "$WORK/hold" "$log" w2 "$WORK/watch.go2"
    z=$!
    expect "the join was not shown within 2 session timeouts: $(cat "$out")" \
        wait_for $((2 * ZKS)) json_joined "$out" w2
    touch "$WORK/watch.go2"
    ended_with "$z" 0 "member w2"
    expect "the leave was not shown within 2 session timeouts: $(cat "$out")" \
        wait_for $((2 * ZKS)) json_left "$out" w2
    kill -TERM "$w"
    ended_with "$w" 0 "members --watch --json after SIGTERM"
    expect "a line that is not one JSON document: $(cat "$out")" \
        [ "$(jq -c . "$out" | wc -l)" -eq "$(wc -l <"$out")" ]
}

# kazoo's Party: a kazoo member is listed by zkr with the 32 hex digits of
# its node's name as id and its identifier as data; kazoo lists a zkr
# member by its data and counts it.
test_kazoo_party() {
    local p=/cli/grp/kazoo log=$WORK/kazoo.log kz=$WORK/kazoo.out k z node
    bg "${KAZOO[@]}" "$p" join kz-ident "$WORK/kazoo.go" >"$kz" 2>"$kz.err"
    k=$!
    expect "kazoo did not join: $(tail -3 "$kz.err")" \
        wait_for $((3 * ZKS)) lines_ge "$kz" 1 '^joined '
    node=$(awk '$1 == "joined" { print $2 }' "$kz")
    expect "kazoo's node '$node' is not 32 hex digits and __party__" \
        grep -qxE '[0-9a-f]{32}__party__' <<<"$node"
    expect "zkr members: $(listed "$p"), want ${node%__party__}<TAB>kz-ident" \
        members_are "$p" "${node%__party__}${TAB}kz-ident"
    bg "$ZKR" member --id z1 "$p" -- "$WORK/hold" "$log" z1 "$WORK/kazoo.go"
    z=$!
    up "$log" z1
    "${KAZOO[@]}" "$p" list >"$WORK/kazoo.list" 2>"$WORK/kazoo.list.err"
    expect "kazoo's list: $(tr '\n' '|' <"$WORK/kazoo.list") $(tail -3 "$WORK/kazoo.list.err")" \
        [ "$(sort "$WORK/kazoo.list" | tr '\n' '|')" = "count 2|member kz-ident|member z1|" ]
    touch "$WORK/kazoo.go"
    ended_with "$z" 0 "zkr member z1"
    ended_with "$k" 0 "kazoo's member"
    expect "members left: $(listed "$p")" members_are "$p"
}

# Curator's GroupMember: one whose id is c1__party__ is listed by zkr as
# c1 with its payload; Curator lists a zkr member z1 as z1__party__ with
# its data. Another child of PATH (no __party__) is no member for zkr.
test_curator_group_member() {
    local p=/cli/grp/curator log=$WORK/curator.log cu=$WORK/curator.out c z n
    for n in /cli /cli/grp "$p" "$p/plain"; do
        "$ZKQ" "$ZKR_SERVER" create "$n" >/dev/null 2>&1
    done
    # With data: Curator's getCurrentMembers() fails on a child without.
    printf plain | "$ZKQ" "$ZKR_SERVER" set "$p/plain"
    expect "the plain child was not made" exists "$p/plain"
    bg "${CURATOR[@]}" "$p" join c1__party__ cpay "$WORK/curator.go" >"$cu" 2>"$cu.err"
    c=$!
    expect "Curator did not join: $(tail -3 "$cu.err")" \
        wait_for $((3 * ZKS)) lines_ge "$cu" 1 '^joined$'
    expect "zkr members: $(listed "$p"), want c1<TAB>cpay" \
        members_are "$p" "c1${TAB}cpay"
    bg "$ZKR" member --id z1 --data zdata "$p" -- "$WORK/hold" "$log" z1 "$WORK/curator.go"
    z=$!
    up "$log" z1
    st=0
    "${CURATOR[@]}" "$p" list observer z1__party__ $((2 * ZKS)) \
        >"$WORK/curator.list" 2>"$WORK/curator.list.err" || st=$?
    expect "Curator's getCurrentMembers() has no z1__party__ (exit $st): $(tr '\n' '|' <"$WORK/curator.list") $(tail -3 "$WORK/curator.list.err")" \
        grep -qx "member z1__party__ zdata" "$WORK/curator.list"
    expect "zkr members with both: $(listed "$p")" \
        members_are "$p" "c1${TAB}cpay" "z1${TAB}zdata"
    touch "$WORK/curator.go"
    ended_with "$z" 0 "zkr member z1"
    ended_with "$c" 0 "Curator's member"
    expect "members left: $(listed "$p")" members_are "$p"
}

# The membership is kept: zkr is paused past its session timeout, its node
# goes with the session while the command runs on; resumed, zkr makes the
# node again on its new session (a new czxid) and it is listed again while
# the command still runs; zkr then exits with the command's status.
test_session_expiry_listed_again() {
    local p=/cli/grp/expire log=$WORK/expire.log z pid cz1 cz2
    bg "$ZKR" --session-timeout 4000 member --id e1 "$p" -- \
        "$WORK/hold" "$log" e1 "$WORK/expire.go" 6 2>"$WORK/expire.err"
    z=$!
    up "$log" e1
    pid=$(pid_of "$log" e1)
    cz1=$(czxid "$p/e1__party__")
    kill -STOP "$z"
    expect "the paused member's node is still there 3 session timeouts later" \
        wait_for 12 nodes_eq "$p" 0
    expect "the command was stopped with the session" alive "$pid"
    kill -CONT "$z"
    expect "the member was not made again within 3 session timeouts: $(listed "$p") $(cat "$WORK/expire.err")" \
        wait_for $((3 * ZKS)) members_are "$p" "e1${TAB}e1"
    cz2=$(czxid "$p/e1__party__")
    expect "the node made again has czxid $cz2, the first one's was $cz1" \
        czxid_gt "$p/e1__party__" "${cz1:-0}"
    expect "the command ended with the session" alive "$pid"
    expect "the command ended" [ "$(grep -c '^e1 end' "$log")" -eq 0 ]
    touch "$WORK/expire.go"
    ended_with "$z" 6 "the member whose session expired (its command exits 6)"
    expect "members left: $(listed "$p")" members_are "$p"
}

# An id held by another session is waited for (zkr.h): -w gives up with
# 1 (-E), the command not run; SIGTERM while waiting ends zkr with 143;
# once the holder leaves, the id is free. SIGTERM while the command runs
# is forwarded, and zkr exits with the command's status.
test_id_held_timeout_signals() {
    local p=/cli/grp/dup log=$WORK/dup.log a z t0 took
    bg "$ZKR" member --id dup "$p" -- "$WORK/hold" "$log" a "$WORK/dup.go"
    a=$!
    up "$log" a
    t0=$(now_ms)
    member -w 1 --id dup "$p" -- "$WORK/hold" "$log" b "$WORK/dup.go"
    took=$(($(now_ms) - t0))
    expect "a join of a held id with -w 1: exit $st, want 1: $(cat "$WORK/member.err")" [ "$st" -eq 1 ]
    expect "the join gave up after $took ms, before -w's 1 s" [ "$took" -ge 1000 ]
    member --id dup "$p" --wait 0.5 -E 9 -- "$WORK/hold" "$log" b "$WORK/dup.go"
    expect "a join of a held id with --wait 0.5 -E 9: exit $st, want 9" [ "$st" -eq 9 ]
    expect "a member that did not join ran its command: $(cat "$log")" \
        [ "$(grep -c '^b ' "$log")" -eq 0 ]
    bg "$ZKR" member --id dup "$p" -- "$WORK/hold" "$log" c "$WORK/dup.go"
    z=$!
    sleep "$(scaled 1)"
    kill -TERM "$z"
    ended_with "$z" 143 "SIGTERM while joining"
    expect "a member told to stop while joining ran its command" \
        [ "$(grep -c '^c ' "$log")" -eq 0 ]
    expect "zkr members: $(listed "$p"), want dup alone" members_are "$p" "dup${TAB}dup"
    touch "$WORK/dup.go"
    ended_with "$a" 0 "the holder of the id"
    member -w "$((2 * ZKS))" --id dup "$p" -- true
    expect "a join of the freed id: exit $st, want 0: $(cat "$WORK/member.err")" [ "$st" -eq 0 ]
    : >"$log"
    bg "$ZKR" member "$p" -- sh -c \
        "trap 'echo got TERM >>\"$log\"; exit 7' TERM; echo up >>'$log'; while :; do sleep 0.1; done" \
        2>>"$WORK/dup.err"
    z=$!
    expect "the command did not start" wait_for $((2 * ZKS)) lines_ge "$log" 1 '^up$'
    kill -TERM "$z"
    ended_with "$z" 7 "SIGTERM while the command runs (it exits 7)"
    expect "the command did not get SIGTERM" lines_ge "$log" 1 "got TERM"
    expect "members left: $(listed "$p")" members_are "$p"
}

# A COMMAND that cannot be run: 127 (not found), 126 (not executable),
# found out before joining: no member, no node.
test_command_cannot_run() {
    local p=/cli/grp/noexec
    member "$p" -- /nonexistent/cmd
    expect "a COMMAND not found: exit $st, want 127" [ "$st" -eq 127 ]
    member --id x "$p" -- "$WORK/hold.log.not-there"
    expect "a COMMAND not found (2): exit $st, want 127" [ "$st" -eq 127 ]
    : >"$WORK/not-executable"
    chmod -x "$WORK/not-executable"
    member "$p" -- "$WORK/not-executable"
    expect "a COMMAND not executable: exit $st, want 126" [ "$st" -eq 126 ]
    expect "a command that cannot run made a node: $(zk_ls "$p" | tr '\n' ' ')" absent "$p"
    expect "members: $(listed "$p")" members_are "$p"
}

# private_acl ACL: ACL (zkq acl) is --acl private's for ops: ops may do
# everything (31), anyone may read (1), nothing else (zkr(1)).
private_acl() {
    [ "$(grep -c . <<<"$1")" -eq 2 ] &&
        grep -qx 'digest:ops:.*:31' <<<"$1" &&
        grep -qx 'world:anyone:1' <<<"$1"
}

# --acl private makes PATH (and the member node) with the private ACL;
# an existing PATH open to anyone is refused (77) before joining.
test_acl_private() {
    local p=/cli/grp/acl acl
    member "$p" -- true
    expect "member (open ACL): exit $st: $(cat "$WORK/member.err")" [ "$st" -eq 0 ]
    st=0
    "$ZKR" --auth "$AUTH" member --acl private "$p/priv" -- true \
        2>"$WORK/member.err" || st=$?
    expect "member --acl private: exit $st: $(cat "$WORK/member.err")" [ "$st" -eq 0 ]
    acl=$(ZKQ_AUTH=$AUTH "$ZKQ" "$ZKR_SERVER" acl "$p/priv")
    expect "--acl private: ACL '$acl', want digest:ops:...:31 and world:anyone:1" \
        private_acl "$acl"
    st=0
    "$ZKR" --auth "$AUTH" member --acl private "$p" -- true \
        2>"$WORK/member.err" || st=$?
    expect "member --acl private on an open PATH: exit $st, want 77" [ "$st" -eq 77 ]
}

# The server's refusals end a join with the server's code (zkr.h: ZNOAUTH,
# ZNOCHILDRENFOREPHEMERALS "the server refused the member's node (or
# PATH)"): 77 for a PATH whose ACL refuses the member's node, and for a
# missing PATH that may not be created there; 71, naming it, for a PATH
# under an ephemeral node. zkr members of a PATH it may not list: 77.
test_join_refused() {
    local p=/cli/grp/refused log=$WORK/refused.log z n
    for n in /cli /cli/grp; do
        "$ZKQ" "$ZKR_SERVER" create "$n" >/dev/null 2>&1
    done
    ZKQ_AUTH=$AUTH "$ZKQ" "$ZKR_SERVER" create-private "$p"
    member --id x "$p" -- true
    expect "member of a PATH that refuses its node: exit $st, want 77: $(cat "$WORK/member.err")" \
        [ "$st" -eq 77 ]
    member --id x "$p/sub" -- true
    expect "member of a missing PATH that may not be created: exit $st, want 77: $(cat "$WORK/member.err")" \
        [ "$st" -eq 77 ]
    mem "$p"
    expect "members of a PATH it may not list: exit $st, want 77: $(cat "$WORK/mem.err")" \
        [ "$st" -eq 77 ]
    bg "$ZKR" member --id e /cli/grp/eph -- "$WORK/hold" "$log" e "$WORK/refused.go"
    z=$!
    up "$log" e
    member --id x /cli/grp/eph/e__party__ -- true
    expect "member under an ephemeral node: exit $st, want 71: $(cat "$WORK/member.err")" \
        eval '[ "$st" -eq 71 ] && grep -qi ephemeral "$WORK/member.err"'
    member --id x /cli/grp/eph/e__party__/sub -- true
    expect "member whose missing PATH would be under an ephemeral node: exit $st, want 71 naming it: $(cat "$WORK/member.err")" \
        eval '[ "$st" -eq 71 ] && grep -qi ephemeral "$WORK/member.err"'
    touch "$WORK/refused.go"
    ended_with "$z" 0 "member e"
}

# usage_is ARGS...: zkr member ARGS is a usage error (64).
usage_is() {
    member "$@"
    expect "member $(printf '%q ' "$@"): exit $st, want 64" [ "$st" -eq 64 ]
}

test_usage_errors() {
    local p=/cli/grp/usage long
    long=$(printf 'x%.0s' $(seq 256))
    usage_is
    usage_is "$p"
    usage_is "$p" --
    usage_is relative true
    usage_is / true
    usage_is /a/ true
    usage_is /a//b true
    usage_is --id '' "$p" true
    usage_is --id a/b "$p" true
    usage_is --id $'a\tb' "$p" true
    usage_is --id $'a\x7fb' "$p" true
    usage_is --id $'a\xffb' "$p" true
    usage_is --id "$long" "$p" true
    usage_is -w abc "$p" true
    usage_is -n "$p" true
    usage_is --on-suspend term "$p" true
    usage_is --lost-exit-code 3 "$p" true
    usage_is --wait-leave "$p" true
    usage_is --acl nobody "$p" true
    usage_is --frob "$p" true
    usage_is "$p" --frob true
    usage_is -c true "$p" true
    expect "a usage error made a node" absent "$p"
    st=0
    "$ZKR" lock --data x "$p" true 2>/dev/null || st=$?
    expect "lock --data: exit $st, want 64" [ "$st" -eq 64 ]
    for args in "" "$p $p" "relative" "/" "-w abc $p" "--frob $p" "--id x $p"; do
        # shellcheck disable=SC2086 # the words of each case
        mem $args
        expect "members $args: exit $st, want 64" [ "$st" -eq 64 ]
    done
    member --help
    expect "member --help: exit $st" [ "$st" -eq 0 ]
    for opt in --wait --timeout --conflict-exit-code --id --data --acl \
        --grace --command --help; do
        expect "member --help does not list $opt" grep -q -- "$opt\b" "$WORK/member.out"
    done
    mem --help
    expect "members --help: exit $st" [ "$st" -eq 0 ]
    for opt in --json --watch --wait --timeout --help; do
        expect "members --help does not list $opt" grep -q -- "$opt\b" "$WORK/mem.out"
    done
    expect "zkr --help does not list member and members" \
        eval 'grep -q "zkr member " <<<"$("$ZKR" --help)" && grep -q "zkr members " <<<"$("$ZKR" --help)"'
}

# examples/members: three workers share 6 shards by their positions in
# the view. Once all three are in, each prints the view of the three (the
# same zxid for all: the final state is always seen), and their shards
# there are 0..5, each once. They leave after -t: no member is left.
test_example_members() {
    local p=/cli/grp/example ex=$builddir/examples/members log=$WORK/example.log
    local w pids=() z
    : >"$log"
    for w in w1 w2 w3; do
        bg "$ex" -s "$ZKR_SERVER" -p "$p" -t "$ZKS" "$w" 6 >>"$log"
        pids+=($!)
    done
    for w in "${pids[@]}"; do
        ended_with "$w" 0 "worker $w"
    done
    z=$(awk '$2 == "view" && $4 == "3:" { print $3 }' "$log" | sort -n | tail -1)
    expect "no view of the three workers: $(cat "$log")" [ -n "$z" ]
    for w in w1 w2 w3; do
        expect "worker $w did not print the view $z of the three: $(cat "$log")" \
            grep -q "^$w view $z 3:" "$log"
    done
    expect "the shards of view $z are not 0..5, each once: $(grep " view $z " "$log")" \
        [ "$(awk -v z="$z" '$2 == "view" && $3 == z { for (i = 5; i <= NF; i++) print $i }' \
            "$log" | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 " ]
    expect "members left: $(listed "$p")" members_are "$p"
}

# --watch whose reader went away (members --watch PATH | head -1): ends at
# once with 0, as tail -f | head does, even while nothing changes
# (POLLERR on stdout), not by SIGPIPE nor never. An id starting with '#'
# is printed \x23...: only a header line starts with '#'.
test_watch_reader_gone_and_hash() {
    local p=/cli/grp/quiet log=$WORK/quiet.log z args
    for args in "--watch $p" "--watch --json $p"; do
        st=0
        # shellcheck disable=SC2016 # expanded by bash -c
        timeout $((2 * ZKS)) bash -c '"$@" 2>"$0.err" | head -n 1 >"$0"; exit "${PIPESTATUS[0]}"' \
            "$WORK/quiet.out" "$ZKR" members $args || st=$?
        expect "members $args | head -1: exit $st, want 0 (124: did not end within 2 session timeouts): $(cat "$WORK/quiet.out.err")" \
            [ "$st" -eq 0 ]
        expect "members $args | head -1: no view: $(cat "$WORK/quiet.out")" \
            [ "$(wc -l <"$WORK/quiet.out")" -eq 1 ]
    done
    bg "$ZKR" member --id '#h' --data '#d' "$p" -- "$WORK/hold" "$log" h "$WORK/quiet.go"
    z=$!
    up "$log" h
    expect "an id starting with '#' not escaped: $(listed "$p")" \
        wait_for $((2 * ZKS)) members_are "$p" "\\x23h${TAB}#d"
    st=0
    # shellcheck disable=SC2016 # expanded by bash -c
    timeout $((2 * ZKS)) bash -c '"$@" 2>"$0.err" | head -n 2 >"$0"; exit "${PIPESTATUS[0]}"' \
        "$WORK/quiet.out" "$ZKR" members --watch "$p" || st=$?
    expect "members --watch | head -2 with a member: exit $st, want 0: $(cat "$WORK/quiet.out.err")" \
        [ "$st" -eq 0 ]
    expect "members --watch: the id's '#' not escaped: $(cat "$WORK/quiet.out")" \
        [ "$(tail -n 1 "$WORK/quiet.out")" = "\\x23h${TAB}#d" ]
    touch "$WORK/quiet.go"
    ended_with "$z" 0 "member #h"
}

# An id ZooKeeper refuses in a name (U+E000..U+F8FF, U+FFF0 and above:
# an emoji too) is a usage error naming --id, before any connection (no
# server there).
test_id_refused_by_zookeeper() {
    local id
    for id in $'\U0001F600' $'\uE000' $'a\uF8FFb' $'\uFFF0' $'\uFFFF'; do
        st=0
        "$ZKR" -s 127.0.0.1:1 member --id "$id" /cli/grp/ids -- true 2>"$WORK/ids.err" || st=$?
        expect "member --id $(printf '%q' "$id"): exit $st, want 64: $(cat "$WORK/ids.err")" [ "$st" -eq 64 ]
        expect "member --id $(printf '%q' "$id"): the message does not name --id: $(cat "$WORK/ids.err")" \
            grep -q -- '--id' "$WORK/ids.err"
    done
    # The characters around them are ids.
    for id in $'\uD7FF' $'\uF900' $'\uFFEF'; do
        st=0
        "$ZKR" -s 127.0.0.1:1 --session-timeout 2000 member -w 0.1 --id "$id" /cli/grp/ids -- true \
            2>"$WORK/ids.err" || st=$?
        expect "member --id $(printf '%q' "$id") refused as usage: $(cat "$WORK/ids.err")" [ "$st" -ne 64 ]
    done
}

start_server
CURATOR=(java -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -XX:-UsePerfData -cp "$CP" CuratorGroupMember "$ZKR_SERVER")
KAZOO=("$PY" "$top_srcdir/tests/cli/kazoo_party.py" "$ZKR_SERVER")
run_test test_member_while_command_runs
run_test test_exit_statuses
run_test test_default_id
run_test test_json_and_escapes
run_test test_watch
run_test test_kazoo_party
run_test test_curator_group_member
run_test test_session_expiry_listed_again
run_test test_id_held_timeout_signals
run_test test_command_cannot_run
run_test test_acl_private
run_test test_join_refused
run_test test_usage_errors
run_test test_watch_reader_gone_and_hash
run_test test_id_refused_by_zookeeper
run_test test_example_members
done_testing
