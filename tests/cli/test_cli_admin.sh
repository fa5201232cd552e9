#!/usr/bin/env bash
# zkr inspect and zkr release --force: the listing matches the real queue;
# a forced release without rights fails and changes nothing; with rights it
# deletes the holder's node, writes the audit record, and the evicted
# holder's command is stopped.
. "${srcdir:-.}/tests/cli/lib.sh"

AUTH=ops:s3cret

# A field of JSON on stdin (jq filter).
json() { jq -r "$1"; }

test_inspect_matches_queue() {
    local h w out nodes
    : > "$WORK/log"
    bg "$ZKR" lock --id holder-1 /cli/insp sh -c "echo \$\$ >> '$WORK/log'; exec sleep 60"
    h=$!
    expect "holder did not start" wait_for 10 [ -s "$WORK/log" ]
    bg "$ZKR" lock --id waiter-1 /cli/insp true
    w=$!
    expect "waiter not queued" wait_for 10 nodes_eq /cli/insp 2
    out=$("$ZKR" inspect --json /cli/insp)
    nodes=$(zk_ls /cli/insp)
    # Sorted by name is not queue order in general; here the holder's
    # sequence is lower, and the names differ only by UUID: compare sets
    # and roles by id and token.
    expect "holders: $out" [ "$(echo "$out" | json '.holders | length')" -eq 1 ]
    expect "waiters: $out" [ "$(echo "$out" | json '.waiters | length')" -eq 1 ]
    expect "kind: $out" [ "$(echo "$out" | json '.kind')" = lock ]
    expect "holder id: $out" [ "$(echo "$out" | json '.holders[0].id')" = holder-1 ]
    expect "waiter id: $out" [ "$(echo "$out" | json '.waiters[0].id')" = waiter-1 ]
    local hn wn
    hn=$(echo "$out" | json '.holders[0].node')
    wn=$(echo "$out" | json '.waiters[0].node')
    expect "holder node $hn not in the queue" grep -qx "${hn##*/}" <<< "$nodes"
    expect "waiter node $wn not in the queue" grep -qx "${wn##*/}" <<< "$nodes"
    expect "holder token" [ "$(echo "$out" | json '.holders[0].token')" = \
        "$("$ZKQ" "$ZKR_SERVER" czxid "$hn")" ]
    expect "holder's sequence not first" [ "${hn##*-}" \< "${wn##*-}" ]
    out=$("$ZKR" inspect /cli/insp)
    expect "text: $out" grep -q "^holder .*holder-1" <<< "$out"
    expect "text: $out" grep -q "^waiter .*waiter-1" <<< "$out"
}

# A PATH that does not exist is not an idle lock (zkr(1), EXIT STATUS):
# inspect says so on stderr and exits 66 (EX_NOINPUT), with --json too
# (nothing on stdout); an idle lock's PATH, which exists, still gives
# "none, 0 holding" and 0.
test_inspect_missing_path() {
    local out rc
    out=$("$ZKR" inspect /cli/no/such/path 2> "$WORK/err") && rc=0 || rc=$?
    expect "missing path: status $rc, not 66" [ "$rc" -eq 66 ]
    expect "missing path: stdout '$out'" [ -z "$out" ]
    expect "missing path: stderr $(cat "$WORK/err")" grep -q "/cli/no/such/path.*does not exist" "$WORK/err"
    out=$("$ZKR" inspect --json /cli/no/such/path 2> "$WORK/err") && rc=0 || rc=$?
    expect "missing path --json: status $rc, not 66" [ "$rc" -eq 66 ]
    expect "missing path --json: stdout '$out'" [ -z "$out" ]
    expect "missing path --json: stderr $(cat "$WORK/err")" grep -q "does not exist" "$WORK/err"
    expect "idle lock not made" "$ZKR" lock /cli/idle true
    out=$("$ZKR" inspect /cli/idle) && rc=0 || rc=$?
    expect "idle lock: status $rc" [ "$rc" -eq 0 ]
    expect "idle lock: $out" grep -q "^/cli/idle: none, 0 holding, 0 waiting" <<< "$out"
    out=$("$ZKR" inspect --json /cli/idle) && rc=0 || rc=$?
    expect "idle lock --json: status $rc" [ "$rc" -eq 0 ]
    expect "idle lock --json: $out" [ "$(echo "$out" | json '.kind')" = none ]
}

# Each column of inspect's table starts where its heading does, on every
# row: a column is as wide as its widest value (a semaphore's node names
# are longer than a lock's).
columns_aligned() { # the table on stdin: heading, then rows
    awk 'NR == 1 { next }
         /^ROLE / { for (i = 1; i <= NF; i++) start[i] = index($0, $i); head = 1; next }
         head { pos = 1; line = $0
                for (i = 1; i <= NF; i++) {
                    at = index(substr(line, pos), $i) + pos - 1
                    if (at != start[i]) { print "row " NR " field " i " at " at ", heading at " start[i]; bad = 1 }
                    pos = at + length($i)
                } }
         END { exit bad }'
}

test_inspect_columns_fit() {
    local i out
    for i in 1 2 3; do
        bg "$ZKR" sem -c 2 --id "sem-$i" /cli/cols-sem sleep 60
    done
    expect "semaphore: $(counts /cli/cols-sem)" wait_for 10 counts_are /cli/cols-sem "semaphore 2 1"
    out=$("$ZKR" inspect /cli/cols-sem)
    expect "semaphore table misaligned: $(columns_aligned <<< "$out")
$out" columns_aligned <<< "$out"
    bg "$ZKR" lock --id a-rather-long-identifier-of-forty-chars /cli/cols-lock sleep 60
    expect "lock holder" wait_for 10 nodes_eq /cli/cols-lock 1
    out=$("$ZKR" inspect /cli/cols-lock)
    expect "lock table misaligned: $(columns_aligned <<< "$out")
$out" columns_aligned <<< "$out"
}

# A terminal shows an East Asian wide character in two columns and a
# combining mark in none: the columns are fitted to what the terminal shows
# (wc -L measures it in a UTF-8 locale), so TOKEN starts at one column on
# the heading and on every row.
token_columns() { # the table on stdin: the display column of each line's TOKEN
    sed -E '/^ROLE /s/TOKEN.*//; /^ROLE /!s/^(([^ ]+ +){4}).*/\1/' | tail -n +2 |
        while IFS= read -r pre; do
            printf '%s\n' "$pre" | LC_ALL=C.UTF-8 wc -L
        done | sort -u
}

test_inspect_columns_fit_wide_characters() {
    local id out
    for id in 漢字漢字漢字漢字 abcdefghijklmnop "$(printf 'e\xcc\x81%.0s' 1 2 3 4 5 6 7 8 9 10 11 12)"; do
        bg "$ZKR" sem -c 3 --id "$id" /cli/cols-wide sleep 60
    done
    expect "semaphore: $(counts /cli/cols-wide)" wait_for 10 counts_are /cli/cols-wide "semaphore 3 0"
    out=$("$ZKR" inspect /cli/cols-wide)
    expect "TOKEN at several columns ($(token_columns <<< "$out" | tr '\n' ' ')):
$out" [ "$(token_columns <<< "$out" | wc -l)" -eq 1 ]
}

test_forced_release() {
    local h w hn out rc
    : > "$WORK/log"
    bg "$ZKR" --auth "$AUTH" lock --acl private --id victim /cli/force sh -c "echo \"start \$\$ \$ZKR_FENCE\" >> '$WORK/log'; exec sleep 60"
    h=$!
    expect "holder did not start" wait_for 10 [ -s "$WORK/log" ]
    # The next holder has a lock-delay (issue 16): an eviction is a death,
    # so it starts no earlier than 2 s after the forced release.
    bg "$ZKR" --auth "$AUTH" lock --acl private --lock-delay 2 --id next /cli/force sh -c "echo \"next \$ZKR_FENCE \$(date +%s%3N)\" >> '$WORK/log'"
    w=$!
    expect "waiter not queued" wait_for 10 nodes_eq /cli/force 2
    hn=$("$ZKR" inspect --json /cli/force | json '.holders[0].node')
    # The operator is the identity the server derived from --auth, as the
    # server itself spells it in the ACL of the holder's node (created by
    # the same credentials with --acl private; it shows the digest only to
    # a client with the ADMIN right).
    local opid
    opid=$(ZKQ_AUTH=$AUTH "$ZKQ" "$ZKR_SERVER" acl "$hn" | sed -n 's/^\(digest:ops:.*\):[0-9]*$/\1/p')
    expect "no digest id in the holder's ACL" [ -n "$opid" ]

    # Without rights: refused, nothing changed.
    rc=0
    out=$("$ZKR" release --force --reason "test" /cli/force 2>&1) || rc=$?
    expect "no-rights release exit $rc" [ "$rc" -eq 77 ]
    expect "no-rights message: $out" grep -q "permission denied" <<< "$out"
    expect "holder's node deleted without rights" "$ZKQ" "$ZKR_SERVER" exists "$hn"
    expect "audit written without rights" \
        [ "$("$ZKQ" "$ZKR_SERVER" ls /zkr/audit 2>/dev/null | grep -c .)" -eq 0 ]
    local cpid
    cpid=$(awk '$1 == "start" { print $2 }' "$WORK/log")
    expect "holder's command stopped by a refused release" alive "$cpid"

    # With rights: deleted, audited, the evicted holder's command stopped.
    local t_force
    t_force=$(now_ms)
    rc=0
    out=$("$ZKR" --auth "$AUTH" release --force --reason "stuck job 42" /cli/force 2>&1) || rc=$?
    expect "release exit $rc: $out" [ "$rc" -eq 0 ]
    expect "holder's node still there" sh -c "! '$ZKQ' '$ZKR_SERVER' exists '$hn'"
    local rec
    rec=$("$ZKQ" "$ZKR_SERVER" ls /zkr/audit | tail -n 1)
    expect "no audit record" [ -n "$rec" ]
    out=$("$ZKQ" "$ZKR_SERVER" get "/zkr/audit/$rec")
    expect "audit reason: $out" [ "$(echo "$out" | json '.reason')" = "stuck job 42" ]
    expect "audit node: $out" [ "$(echo "$out" | json '.node')" = "$hn" ]
    expect "audit holder: $out" [ "$(echo "$out" | json '.holder_id')" = victim ]
    # What the server did not check is under "claimed".
    expect "audit operator: $out" [ "$(echo "$out" | json '.operator')" = "$opid" ]
    expect "audit delete_allowed_by: $out" \
        [ "$(echo "$out" | json '.delete_allowed_by | join(",")')" = "$opid" ]
    expect "audit claimed os_user: $out" \
        [ "$(echo "$out" | json '.claimed.os_user')" = "$(id -un)" ]
    expect "audit token: $out" [ "$(echo "$out" | json '.token')" = \
        "$(awk '$1 == "start" { print $3 }' "$WORK/log")" ]
    expect "evicted command $cpid still running" wait_for 3 dead "$cpid"
    wait_status "$h"
    expect "evicted zkr exit $st, not 4" [ "$st" -eq 4 ]
    wait_status "$w"
    expect "next holder exit $st" [ "$st" -eq 0 ]
    expect "next holder did not run" grep -q '^next' "$WORK/log"
    local t_next
    t_next=$(awk '$1 == "next" { print $3 }' "$WORK/log")
    expect "next holder started $((t_next - t_force)) ms after the eviction, within its 2 s lock-delay" \
        [ $((t_next - t_force)) -ge 2000 ]

    # The trail is append-only: an anonymous client can neither rewrite a
    # record nor the directories; the record is unchanged.
    local before p
    before=$("$ZKQ" "$ZKR_SERVER" get "/zkr/audit/$rec")
    for p in "/zkr/audit/$rec" /zkr/audit /zkr; do
        rc=0
        echo forged | "$ZKQ" "$ZKR_SERVER" set "$p" 2>/dev/null || rc=$?
        expect "anonymous write to $p: exit $rc, not refused" [ "$rc" -eq 2 ]
    done
    rc=0
    "$ZKQ" "$ZKR_SERVER" delete "/zkr/audit/$rec" 2>/dev/null || rc=$?
    expect "anonymous delete of the record: exit $rc, not refused" [ "$rc" -eq 2 ]
    expect "record changed" [ "$("$ZKQ" "$ZKR_SERVER" get "/zkr/audit/$rec")" = "$before" ]
    expect "record readable by anyone" [ -n "$before" ]

    # Nothing to release: exit 1.
    rc=0
    "$ZKR" --auth "$AUTH" release --force --reason x /cli/force 2>/dev/null || rc=$?
    expect "empty release exit $rc" [ "$rc" -eq 1 ]
}

# inspect on a semaphore, a read/write lock and an election: holders and
# waiters follow each recipe's rule.
counts() { # PATH -> "KIND HOLDERS WAITERS"
    "$ZKR" inspect --json "$1" | jq -r '"\(.kind) \(.holders | length) \(.waiters | length)"'
}
counts_are() { [ "$(counts "$1")" = "$2" ]; }

test_inspect_kinds() {
    local i
    for i in 1 2 3; do
        bg "$ZKR" sem -c 2 --id "s$i" /cli/k-sem sleep 60
    done
    expect "semaphore: $(counts /cli/k-sem)" wait_for 10 counts_are /cli/k-sem "semaphore 2 1"
    bg "$ZKR" lock --read --id r1 /cli/k-rw sleep 60
    expect "first reader" wait_for 10 nodes_eq /cli/k-rw 1
    bg "$ZKR" lock --read --id r2 /cli/k-rw sleep 60
    expect "second reader" wait_for 10 nodes_eq /cli/k-rw 2
    bg "$ZKR" lock --id w1 /cli/k-rw sleep 60
    expect "writer" wait_for 10 nodes_eq /cli/k-rw 3
    bg "$ZKR" lock --read --id r3 /cli/k-rw sleep 60
    expect "rwlock: $(counts /cli/k-rw)" wait_for 10 counts_are /cli/k-rw "rwlock 2 2"
    for i in 1 2; do
        bg "$ZKR" elect --id "e$i" /cli/k-el sleep 60
    done
    expect "election: $(counts /cli/k-el)" wait_for 10 counts_are /cli/k-el "election 1 1"
}

# The reply of the forced release's transaction is lost (the fault proxy
# forwards it and drops the answer): the holder was evicted and the record
# written, so zkr must not say "nothing was changed" (a retry would evict
# the next holder): it says the outcome is unknown, reads the record by
# its id, and reports the eviction.
test_forced_release_lost_reply() {
    local h w hn wn out rc n
    : > "$WORK/log"
    expect "proxy did not start" proxy_start
    bg "$ZKR" lock --id victim /cli/lost sh -c "echo \"start \$\$\" >> '$WORK/log'; exec sleep 60"
    h=$!
    expect "holder did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    bg "$ZKR" lock --id next /cli/lost sh -c "echo next >> '$WORK/log'; exec sleep 60"
    w=$!
    expect "waiter not queued" wait_for 10 nodes_eq /cli/lost 2
    hn=$("$ZKR" inspect --json /cli/lost | json '.holders[0].node')
    wn=$("$ZKR" inspect --json /cli/lost | json '.waiters[0].node')
    n=$("$ZKQ" "$ZKR_SERVER" ls /zkr/audit 2>/dev/null | grep -c . || true)
    expect "drop-create-reply" proxy_cmd drop-create-reply
    rc=0
    out=$("$ZKR" -s "$PROXY_HOSTS" release --force --reason "lost reply" /cli/lost 2>&1) || rc=$?
    expect "release exit $rc, not 0: $out" [ "$rc" -eq 0 ]
    expect "said nothing was changed: $out" \
        sh -c '! grep -q "nothing was changed"' <<< "$out"
    expect "did not say the outcome was unknown: $out" grep -q "outcome unknown" <<< "$out"
    expect "did not report the eviction: $out" grep -q "^zkr: released $hn" <<< "$out"
    expect "holder's node still there" sh -c "! '$ZKQ' '$ZKR_SERVER' exists '$hn'"
    expect "next holder evicted too" "$ZKQ" "$ZKR_SERVER" exists "$wn"
    expect "next holder did not run" wait_for 10 grep -q '^next' "$WORK/log"
    expect "not exactly one new audit record" \
        [ "$("$ZKQ" "$ZKR_SERVER" ls /zkr/audit | grep -c .)" -eq $((n + 1)) ]
    wait_status "$h"
    expect "evicted zkr exit $st, not 4" [ "$st" -eq 4 ]
}

# An ACL on an existing node weaker than asked is reported, not trusted:
# an audit directory anyone may rewrite (made by an anonymous client with
# the open ACL) makes the release refuse and change nothing; a lock or
# election PATH that exists with the open ACL is refused for --acl private
# before the command runs. Runs before any other release has made /zkr/audit.
test_weaker_acl_refused() {
    local h hn out rc p
    : > "$WORK/log"
    for p in /zkr /zkr/audit; do
        "$ZKQ" "$ZKR_SERVER" create "$p"
    done
    bg "$ZKR" --auth "$AUTH" lock --acl private --id v /cli/w sh -c "echo start >> '$WORK/log'; exec sleep 60"
    h=$!
    expect "holder did not start" wait_for 10 lines_ge "$WORK/log" 1 start
    hn=$("$ZKR" inspect --json /cli/w | json '.holders[0].node')
    rc=0
    out=$("$ZKR" --auth "$AUTH" release --force --reason x /cli/w 2>&1) || rc=$?
    expect "release with an open audit dir: exit $rc" [ "$rc" -eq 77 ]
    expect "no clear message: $out" grep -q "/zkr/audit: its ACL grants world:anyone:cdrwa" <<< "$out"
    expect "holder evicted" "$ZKQ" "$ZKR_SERVER" exists "$hn"
    expect "record written" [ "$(zk_count /zkr/audit)" -eq 0 ]
    for p in /zkr/audit /zkr; do
        "$ZKQ" "$ZKR_SERVER" delete "$p"
    done

    "$ZKQ" "$ZKR_SERVER" create /cli/open-path
    rc=0
    out=$("$ZKR" --auth "$AUTH" lock --acl private /cli/open-path sh -c "echo ran >> '$WORK/log'" 2>&1) || rc=$?
    expect "lock --acl private on an open PATH: exit $rc" [ "$rc" -eq 77 ]
    expect "no clear message: $out" grep -q "weaker than --acl private: it grants world:anyone:cdrwa" <<< "$out"
    expect "command ran" sh -c "! grep -q '^ran' '$WORK/log'"
    expect "node left behind" nodes_eq /cli/open-path 0
    rc=0
    out=$("$ZKR" --auth "$AUTH" elect --acl private /cli/open-path sh -c "echo ran >> '$WORK/log'" 2>&1) || rc=$?
    expect "elect --acl private on an open PATH: exit $rc" [ "$rc" -eq 77 ]
    expect "no clear message: $out" grep -q "weaker than --acl private" <<< "$out"
    expect "command ran" sh -c "! grep -q '^ran' '$WORK/log'"
    expect "node left behind" nodes_eq /cli/open-path 0
}

# An election whose leader was killed, with a candidate behind it that
# has a lock-delay of three session timeouts, in a directory nobody may
# write (so no "closed until" record): inspect shows no holder and the
# candidate as delayed until it leads, as its node says.
test_inspect_delayed_candidate() {
    local t=2000 a b
    : > "$WORK/log"
    "$ZKQ" "$ZKR_SERVER" create /cli 2>/dev/null || true
    expect "directory" "$ZKQ" "$ZKR_SERVER" create-nowrite /cli/el-delay
    bg "$ZKR" --session-timeout "$t" elect --lock-delay 0 --id A /cli/el-delay sleep 600
    a=$!
    expect "A does not lead: $(counts /cli/el-delay)" wait_for 10 counts_are /cli/el-delay "election 1 0"
    bg "$ZKR" --session-timeout "$t" elect --lock-delay $((3 * t / 1000)) --id B /cli/el-delay sh -c "echo start B >> '$WORK/log'"
    b=$!
    expect "B queued" wait_for 10 nodes_eq /cli/el-delay 2
    kill -KILL "$a"
    wait "$a" 2>/dev/null
    # A's session expires about t later; B then waits 3 t before it leads.
    expect "A's node stayed" wait_for $((3 * t / 1000)) nodes_eq /cli/el-delay 1
    "$ZKR" inspect /cli/el-delay > "$WORK/inspect.out" 2>&1
    "$ZKR" inspect --json /cli/el-delay > "$WORK/inspect.json" 2>&1
    expect "B led before its delay was over" [ ! -s "$WORK/log" ]
    expect "a closed-until line although nobody may write the directory: $(cat "$WORK/inspect.out")" \
        sh -c "! grep -q '^closed until' '$WORK/inspect.out'"
    expect "inspect counts the delayed candidate as holding: $(cat "$WORK/inspect.out")" \
        grep -q "^/cli/el-delay: election, 0 holding, 1 waiting" "$WORK/inspect.out"
    expect "inspect shows no delayed row: $(cat "$WORK/inspect.out")" \
        grep -q "^delayed .* B " "$WORK/inspect.out"
    expect "inspect --json lists a holder: $(cat "$WORK/inspect.json")" \
        jq -e '(.holders | length) == 0 and .waiters[0].delayed == true' \
        "$WORK/inspect.json"
    wait_status "$b"
    expect "B exit $st" [ "$st" -eq 0 ]
    expect "B did not lead" grep -q "^start B" "$WORK/log"
}

start_server
run_test test_inspect_matches_queue
run_test test_inspect_kinds
run_test test_inspect_missing_path
run_test test_inspect_columns_fit
run_test test_inspect_columns_fit_wide_characters
run_test test_weaker_acl_refused
run_test test_forced_release
run_test test_forced_release_lost_reply
run_test test_inspect_delayed_candidate
done_testing
