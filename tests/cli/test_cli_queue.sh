#!/usr/bin/env bash
# zkr queue put / take / len and zkr inspect of a work queue, against a
# real server: the round trip, the item's data and variables, ack and
# nack, -w/-E, redelivery after the consumer was killed, the claim lasting
# until every process of the command is gone, FIFO and levels, inspect.
. "${srcdir:-.}/tests/cli/lib.sh"

json() { jq -r "$1"; }

# A command that records what it was given: its standard input in
# $WORK/got/N.data and its variables in $WORK/got/N.env (N: a counter),
# then exits with $1.
RECORD=$WORK/record.sh
cat > "$RECORD" <<EOF
mkdir -p '$WORK/got'
n=\$(ls '$WORK/got' | grep -c '\.env\$')
cat > "$WORK/got/\$n.data"
{
    echo "item=\$ZKR_QUEUE_ITEM"
    echo "delivery=\$ZKR_QUEUE_DELIVERY"
    echo "fence=\$ZKR_FENCE"
    echo "queue=\$ZKR_QUEUE_PATH"
    echo "level=\$ZKR_QUEUE_LEVEL"
    echo "node=\$ZKR_LOCK_NODE"
    # The claim's token, read from the server while the claim stands.
    echo "czxid=\$('$ZKQ' "\$ZKR_SERVER" czxid "\$ZKR_LOCK_NODE")"
} > "$WORK/got/\$n.env.tmp"
mv "$WORK/got/\$n.env.tmp" "$WORK/got/\$n.env"
exit \${1:-0}
EOF

# got N KEY: a variable recorded by the Nth run of $RECORD.
got() { sed -n "s/^$2=//p" "$WORK/got/$1.env" 2>/dev/null; }
reset_got() { rm -rf "$WORK/got"; mkdir -p "$WORK/got"; }

qlen() { "$ZKR" queue len "$1"; }
no_node() { ! "$ZKQ" "$ZKR_SERVER" exists "$1"; }

# put prints the item's id; len counts; take runs the command with the
# item's data on its standard input and its id, delivery count and token
# in the environment; exit 0 acks (the item is gone).
test_put_take_len() {
    local a b c rc
    reset_got
    a=$("$ZKR" queue put /cli/q/rt "first item")
    printf 'line one\nline two\n\ttabbed\n' > "$WORK/two.txt"
    b=$("$ZKR" queue put /cli/q/rt - < "$WORK/two.txt")
    c=$("$ZKR" queue put /cli/q/rt)
    expect "put's id '$a'" grep -Eq '^q1/b[0-9]{10}/i-0-[0-9a-f-]{36}-[0-9]{10}$' <<< "$a"
    expect "ids not distinct: $a $b $c" [ "$a" != "$b" ] && [ "$b" != "$c" ]
    expect "item $a not at PATH/ID" "$ZKQ" "$ZKR_SERVER" exists "/cli/q/rt/$a"
    expect "len $(qlen /cli/q/rt), not 3" [ "$(qlen /cli/q/rt)" = 3 ]
    rc=0
    "$ZKR" queue take -w 10 /cli/q/rt sh "$RECORD" 0 || rc=$?
    expect "take exit $rc" [ "$rc" -eq 0 ]
    expect "data '$(cat "$WORK/got/0.data")'" [ "$(cat "$WORK/got/0.data")" = "first item" ]
    expect "ZKR_QUEUE_ITEM '$(got 0 item)', not $a" [ "$(got 0 item)" = "$a" ]
    expect "ZKR_QUEUE_DELIVERY '$(got 0 delivery)'" [ "$(got 0 delivery)" = 1 ]
    expect "ZKR_QUEUE_PATH '$(got 0 queue)'" [ "$(got 0 queue)" = /cli/q/rt ]
    expect "ZKR_QUEUE_LEVEL '$(got 0 level)'" [ "$(got 0 level)" = 1 ]
    expect "ZKR_FENCE '$(got 0 fence)' is not the claim's czxid '$(got 0 czxid)'" \
        [ -n "$(got 0 fence)" ] && [ "$(got 0 fence)" = "$(got 0 czxid)" ]
    expect "claim node $(got 0 node) not under the item" \
        [ "$(dirname "$(got 0 node)")" = "/cli/q/rt/$a" ]
    expect "acked item still there" [ "$(qlen /cli/q/rt)" = 2 ]
    expect "acked item's node still there" no_node "/cli/q/rt/$a"
    "$ZKR" queue take -w 10 /cli/q/rt sh "$RECORD" 0
    expect "stdin data differs" cmp -s "$WORK/got/1.data" "$WORK/two.txt"
    expect "second take got '$(got 1 item)', not $b" [ "$(got 1 item)" = "$b" ]
    expect "fences not increasing: $(got 0 fence) $(got 1 fence)" \
        [ "$(got 1 fence)" -gt "$(got 0 fence)" ]
    "$ZKR" queue take -w 10 /cli/q/rt sh "$RECORD" 0
    expect "empty item gave '$(cat "$WORK/got/2.data")'" [ ! -s "$WORK/got/2.data" ]
    expect "third take got '$(got 2 item)', not $c" [ "$(got 2 item)" = "$c" ]
    expect "len $(qlen /cli/q/rt) after three acks" [ "$(qlen /cli/q/rt)" = 0 ]
    # The largest item (512 KiB) travels whole; one byte more is refused.
    head -c 524288 /dev/urandom > "$WORK/big"
    expect "big put" "$ZKR" queue put /cli/q/rt - < "$WORK/big" > /dev/null
    "$ZKR" queue take -w 10 /cli/q/rt sh "$RECORD" 0
    expect "512 KiB item differs" cmp -s "$WORK/got/3.data" "$WORK/big"
    head -c 524289 /dev/zero > "$WORK/big"
    rc=0
    "$ZKR" queue put /cli/q/rt - < "$WORK/big" 2>/dev/null || rc=$?
    expect "oversized put exit $rc, not 64" [ "$rc" -eq 64 ]
    expect "oversized put left an item" [ "$(qlen /cli/q/rt)" = 0 ]
    expect "len of a queue never used: $(qlen /cli/q/never)" [ "$(qlen /cli/q/never)" = 0 ]
}

# A command that fails nacks its item: zkr exits with the command's status
# and the item comes again, the same id, delivery 2; --nack front puts it
# back where it was, --nack back behind the others.
test_nack_redelivers() {
    local a b rc
    reset_got
    a=$("$ZKR" queue put /cli/q/nack A)
    b=$("$ZKR" queue put /cli/q/nack B)
    rc=0
    "$ZKR" queue take -w 10 /cli/q/nack sh "$RECORD" 3 || rc=$?
    expect "failed command: zkr exit $rc, not 3" [ "$rc" -eq 3 ]
    expect "nacked item gone: len $(qlen /cli/q/nack)" [ "$(qlen /cli/q/nack)" = 2 ]
    "$ZKR" queue take -w 10 /cli/q/nack sh "$RECORD" 0
    expect "after a nack (front) got $(got 1 item), not $a" [ "$(got 1 item)" = "$a" ]
    expect "redelivery count '$(got 1 delivery)', not 2" [ "$(got 1 delivery)" = 2 ]
    expect "redelivery data" [ "$(cat "$WORK/got/1.data")" = A ]
    # --nack back: B fails and goes behind C.
    "$ZKR" queue put /cli/q/nack C > /dev/null
    rc=0
    "$ZKR" queue take --nack back -w 10 /cli/q/nack sh "$RECORD" 1 || rc=$?
    expect "--nack back: exit $rc" [ "$rc" -eq 1 ]
    expect "the failed take got $(got 2 item), not $b" [ "$(got 2 item)" = "$b" ]
    "$ZKR" queue take -w 10 /cli/q/nack sh "$RECORD" 0
    "$ZKR" queue take -w 10 /cli/q/nack sh "$RECORD" 0
    expect "after --nack back: $(cat "$WORK/got/3.data") then $(cat "$WORK/got/4.data")" \
        [ "$(cat "$WORK/got/3.data")$(cat "$WORK/got/4.data")" = CB ]
    expect "B's delivery after --nack back '$(got 4 delivery)', not 2" \
        [ "$(got 4 delivery)" = 2 ]
    expect "queue not empty" [ "$(qlen /cli/q/nack)" = 0 ]
}

# --max-deliveries: an item that failed N times goes to the dead-letter
# path instead of coming again.
test_dead_letter() {
    local a rc
    reset_got
    a=$("$ZKR" queue put /cli/q/dead doomed)
    for _ in 1 2; do
        "$ZKR" queue take --max-deliveries 2 --dead /cli/q/dead-letters \
            -w 10 /cli/q/dead sh "$RECORD" 5 || true
    done
    rc=0
    "$ZKR" queue take --max-deliveries 2 --dead /cli/q/dead-letters -w 1 \
        /cli/q/dead sh "$RECORD" 0 || rc=$?
    expect "third take after 2 deliveries: exit $rc, not 1 (no item)" [ "$rc" -eq 1 ]
    expect "deliveries $(got 0 delivery),$(got 1 delivery)" \
        [ "$(got 0 delivery),$(got 1 delivery)" = 1,2 ]
    expect "not dead-lettered: $(zk_ls /cli/q/dead-letters)" \
        [ "$(zk_ls /cli/q/dead-letters)" = "${a##*/}" ]
    expect "dead letter's data" [ "$("$ZKQ" "$ZKR_SERVER" get "/cli/q/dead-letters/${a##*/}")" = doomed ]
}

# -w: exit 1 (or -E) when no item came in time, without running the
# command, and nothing is left behind (no consumer in line).
test_wait_timeout() {
    local t0 t1 rc
    rm -f "$WORK/ran"
    t0=$(now_ms)
    rc=0
    "$ZKR" queue take -w 0.5 /cli/q/empty touch "$WORK/ran" || rc=$?
    t1=$(now_ms)
    expect "-w exit $rc, not 1" [ "$rc" -eq 1 ]
    expect "-w 0.5 returned after $((t1 - t0)) ms" \
        [ $((t1 - t0)) -ge 500 ] && [ $((t1 - t0)) -lt 5000 ]
    rc=0
    "$ZKR" queue take -w 0.3 -E 7 /cli/q/empty touch "$WORK/ran" || rc=$?
    expect "-E 7 exit $rc" [ "$rc" -eq 7 ]
    rc=0
    "$ZKR" queue take -n /cli/q/empty touch "$WORK/ran" || rc=$?
    expect "-n exit $rc" [ "$rc" -eq 1 ]
    expect "command ran without an item" [ ! -e "$WORK/ran" ]
    expect "consumers left in line: $(zk_ls /cli/q/empty/consumers)" \
        [ "$(zk_count /cli/q/empty/consumers)" -eq 0 ]
    # An item put while a consumer waits is taken by it.
    rm -f "$WORK/ran"
    bg "$ZKR" queue take -w 30 /cli/q/empty sh -c "cat > '$WORK/ran'"
    local t=$!
    expect "consumer not in line" wait_for 10 nodes_eq /cli/q/empty/consumers 1
    "$ZKR" queue put /cli/q/empty late > /dev/null
    wait_status "$t"
    expect "waiting take exit $st" [ "$st" -eq 0 ]
    expect "waiting take got '$(cat "$WORK/ran" 2>/dev/null)'" [ "$(cat "$WORK/ran" 2>/dev/null)" = late ]
}

# A command that leaves processes in other groups and sessions: records
# their PIDs in $WORK/pids, the command's own last.
SPREAD="cat > /dev/null; sleep 60 & echo \$! >> '$WORK/pids'; setsid sleep 60 & echo \$! >> '$WORK/pids'; echo \$\$ >> '$WORK/pids'; wait"

survivors() {
    local p
    for p in $(cat "$WORK/pids" 2>/dev/null); do
        alive "$p" && echo "$p"
    done
}
all_dead() { [ -z "$(survivors)" ]; }

# zkr's whole process group SIGKILLed mid-item (kill -9 %1): the command's
# processes die with it, and once its session is gone the item comes to
# the next consumer, delivery 2.
test_killed_consumer_redelivered() {
    local a z rc
    reset_got
    rm -f "$WORK/pids"
    a=$("$ZKR" queue put /cli/q/kill payload)
    bg setsid "$ZKR" --session-timeout 4000 queue take /cli/q/kill sh -c "$SPREAD"
    z=$!
    expect "command did not start" wait_for 10 lines_ge "$WORK/pids" 3
    kill -KILL -- "-$z"
    wait "$z" 2>/dev/null
    expect "processes outlived zkr's group: $(survivors)" wait_for 3 all_dead
    rc=0
    "$ZKR" queue take -w 30 /cli/q/kill sh "$RECORD" 0 || rc=$?
    expect "redelivery take exit $rc" [ "$rc" -eq 0 ]
    expect "redelivered $(got 0 item), not $a" [ "$(got 0 item)" = "$a" ]
    expect "delivery after the kill '$(got 0 delivery)', not 2" [ "$(got 0 delivery)" = 2 ]
    expect "data after the kill" [ "$(cat "$WORK/got/0.data")" = payload ]
    expect "queue not empty" [ "$(qlen /cli/q/kill)" = 0 ]
}

# A worker left running by the command (background, or setsid): logs its
# start and end (ms), and at its end whether the item and its claim were
# still there (the claim must outlast every process of the command).
# sh $WORKER NAME SECONDS
WORKER=$WORK/worker.sh
cat > "$WORKER" <<EOF
echo "\$(date +%s%3N) start \$1 \$\$" >> '$WORK/log'
sleep \$2
n=\$('$ZKQ' "\$ZKR_SERVER" ls "\$ZKR_QUEUE_PATH/\$ZKR_QUEUE_ITEM" 2>/dev/null | grep -c .)
echo "\$(date +%s%3N) claims \$1 \$n" >> '$WORK/log'
echo "\$(date +%s%3N) end \$1" >> '$WORK/log'
EOF
field() { awk -v e="$1" -v n="$2" -v f="$3" '$2 == e && $3 == n { print $f; exit }' "$WORK/log"; }
logged() { grep -q " $1 $2" "$WORK/log" 2>/dev/null; }

# A command that exits 0 at once, leaving a background worker: the item is
# acked only once the worker is gone (its claim is still there at the
# worker's end), and zkr exits 0 then.
test_background_child_holds_claim_ack() {
    local a
    : > "$WORK/log"
    "$ZKR" queue put /cli/q/bg job > /dev/null
    bg "$ZKR" queue take -w 10 /cli/q/bg sh -c "sh '$WORKER' A $(scaled 1.5) &"
    a=$!
    expect "A's worker did not start" wait_for 10 logged start A
    wait_status "$a"
    expect "A exit $st, not 0" [ "$st" -eq 0 ]
    expect "claims at the worker's end: '$(field claims A 4)', not 1" \
        [ "$(field claims A 4)" = 1 ]
    expect "not acked: len $(qlen /cli/q/bg)" [ "$(qlen /cli/q/bg)" = 0 ]
}

# A command that fails at once, leaving a worker in a session of its own:
# the item is given back (and so taken by consumer B, already waiting)
# only after the worker ended; zkr exits with the command's status.
test_setsid_child_holds_claim_nack() {
    local a b b_start a_end
    : > "$WORK/log"
    "$ZKR" queue put /cli/q/sid job > /dev/null
    bg "$ZKR" queue take -w 10 /cli/q/sid sh -c "setsid sh '$WORKER' A $(scaled 1.5) & exit 9"
    a=$!
    expect "A's worker did not start" wait_for 10 logged start A
    bg "$ZKR" queue take -w 30 /cli/q/sid sh -c "cat > /dev/null; echo \"\$(date +%s%3N) start B \$ZKR_QUEUE_DELIVERY\" >> '$WORK/log'"
    b=$!
    wait_status "$a"
    expect "A exit $st, not 9" [ "$st" -eq 9 ]
    wait_status "$b"
    expect "B exit $st" [ "$st" -eq 0 ]
    a_end=$(field end A 1)
    b_start=$(field start B 1)
    expect "B started at ${b_start:-never}, A's worker ended at ${a_end:-never}" \
        [ -n "$a_end" ] && [ "${b_start:-0}" -ge "${a_end:-0}" ]
    expect "claims at A's worker's end: '$(field claims A 4)', not 1" \
        [ "$(field claims A 4)" = 1 ]
    expect "B's delivery '$(field start B 4)', not 2" [ "$(field start B 4)" = 2 ]
}

# FIFO: two takes get the items of a level in the order they were put; a
# higher level (0) is served first.
test_fifo_and_levels() {
    local i
    reset_got
    for i in 1 2 3; do
        "$ZKR" queue put /cli/q/fifo "item $i" > /dev/null
    done
    "$ZKR" queue take -w 10 /cli/q/fifo sh "$RECORD" 0
    "$ZKR" queue take -w 10 /cli/q/fifo sh "$RECORD" 0
    expect "FIFO: '$(cat "$WORK/got/0.data")' then '$(cat "$WORK/got/1.data")'" \
        [ "$(cat "$WORK/got/0.data"),$(cat "$WORK/got/1.data")" = "item 1,item 2" ]
    "$ZKR" queue put -l 3 /cli/q/fifo low > /dev/null
    "$ZKR" queue put -l 0 /cli/q/fifo urgent > /dev/null
    for i in 2 3 4; do
        "$ZKR" queue take -w 10 /cli/q/fifo sh "$RECORD" 0
    done
    expect "levels: $(cat "$WORK/got/2.data"), $(cat "$WORK/got/3.data"), $(cat "$WORK/got/4.data")" \
        [ "$(cat "$WORK/got/2.data"),$(cat "$WORK/got/3.data"),$(cat "$WORK/got/4.data")" = "urgent,item 3,low" ]
    expect "urgent's level '$(got 2 level)'" [ "$(got 2 level)" = 0 ]
}

# --batch N: up to N items taken at once, the command run once per item
# in put order, each acked on its own; the first run that fails is
# nacked, ends zkr with its status, and the items not run yet are given
# back at once (delivered again, before later items, with their count).
runs() { find "$WORK/got" -name '*.env' | wc -l; }
test_batch() {
    local i rc
    reset_got
    for i in 1 2 3 4 5 6; do
        "$ZKR" queue put /cli/q/batch "item $i" > /dev/null
    done
    rc=0
    "$ZKR" queue take --batch 3 -w 10 /cli/q/batch sh "$RECORD" 0 || rc=$?
    expect "batch exit $rc" [ "$rc" -eq 0 ]
    expect "batch ran $(runs) commands, not 3" [ "$(runs)" = 3 ]
    for i in 0 1 2; do
        expect "run $i got '$(cat "$WORK/got/$i.data")'" \
            [ "$(cat "$WORK/got/$i.data")" = "item $((i + 1))" ]
        expect "run $i delivery $(got $i delivery)" [ "$(got $i delivery)" = 1 ]
    done
    expect "fences not distinct: $(got 0 fence) $(got 1 fence) $(got 2 fence)" \
        [ "$(got 0 fence)" != "$(got 1 fence)" ] && [ "$(got 1 fence)" != "$(got 2 fence)" ]
    expect "len $(qlen /cli/q/batch) after 3 acks, not 3" [ "$(qlen /cli/q/batch)" = 3 ]
    # The first run fails (exit 7): nacked, the other two given back.
    reset_got
    rc=0
    "$ZKR" queue take --batch 3 -w 10 /cli/q/batch sh "$RECORD" 7 || rc=$?
    expect "failed batch exit $rc, not 7" [ "$rc" -eq 7 ]
    expect "failed batch ran $(runs) commands, not 1" [ "$(runs)" = 1 ]
    expect "len $(qlen /cli/q/batch) after the failed batch, not 3" [ "$(qlen /cli/q/batch)" = 3 ]
    reset_got
    rc=0
    "$ZKR" queue take --batch 10 -w 10 /cli/q/batch sh "$RECORD" 0 || rc=$?
    expect "last batch exit $rc" [ "$rc" -eq 0 ]
    for i in 0 1 2; do
        expect "again: run $i got '$(cat "$WORK/got/$i.data")'" \
            [ "$(cat "$WORK/got/$i.data")" = "item $((i + 4))" ]
    done
    expect "item 4's delivery $(got 0 delivery), not 2" [ "$(got 0 delivery)" = 2 ]
    expect "item 5's delivery $(got 1 delivery), not 2" [ "$(got 1 delivery)" = 2 ]
    expect "len $(qlen /cli/q/batch) at the end" [ "$(qlen /cli/q/batch)" = 0 ]
}

# --batch: a SIGTERM that reaches zkr between two runs (here while the
# first item's ack is on its way, slowed by the fault proxy) stops it
# before the next item's command: 143, one command started, the items not
# run given back.
test_batch_sigterm_between_runs() {
    local pid rc n
    proxy_start || fail "the fault proxy did not start"
    mkdir -p "$WORK/sig"
    cat > "$WORK/sig.sh" <<SH
n=\$(find '$WORK/sig' -name 'run*' | wc -l)
echo "\$ZKR_QUEUE_ITEM" > '$WORK/sig/run'\$n
if [ "\$n" = 0 ]; then touch '$WORK/sig/ready'; sleep 1; touch '$WORK/sig/done'; fi
exit 0
SH
    for i in 1 2 3; do "$ZKR" queue put /cli/q/bsig "item $i" > /dev/null; done
    "$ZKR" -v -s "$PROXY_HOSTS" --session-timeout 20000 queue take --batch 3 \
        -w 10 /cli/q/bsig sh "$WORK/sig.sh" 2> "$WORK/sig.err" &
    pid=$!
    wait_for 10 test -e "$WORK/sig/ready"
    proxy_cmd delay 1500 # the ack of item 1 takes ~3 s
    wait_for 10 test -e "$WORK/sig/done"
    sleep 0.5 # the command is gone, zkr is in the ack
    kill -TERM "$pid"
    sleep 0.2
    proxy_cmd pass
    rc=0
    wait "$pid" || rc=$?
    # the command may die of the forwarded SIGTERM before it records itself:
    # zkr's own log says what it started
    n=$(grep -c 'started sh' "$WORK/sig.err")
    sed 's/^/# /' "$WORK/sig.err"
    echo "# exit $rc, commands started: $n"
    expect "exit $rc, not 143" [ "$rc" -eq 143 ]
    expect "$n commands started; the second after SIGTERM" [ "$n" -eq 1 ]
}

# inspect: the items in serve order (level, deliveries, claimed by whom),
# the claim with its token, and the consumers waiting in line.
test_inspect_queue() {
    local a out x y z fence
    : > "$WORK/log"
    x=$("$ZKR" queue put /cli/q/order x)
    y=$("$ZKR" queue put /cli/q/order y)
    z=$("$ZKR" queue put -l 0 /cli/q/order z)
    out=$("$ZKR" inspect --json /cli/q/order)
    expect "kind: $out" [ "$(json '.kind' <<< "$out")" = workq ]
    expect "length: $out" [ "$(json '.length' <<< "$out")" = 3 ]
    expect "serve order: $out" \
        [ "$(json '[.items[].id] | join(" ")' <<< "$out")" = "$z $x $y" ]
    expect "levels: $out" [ "$(json '[.items[].level] | join(" ")' <<< "$out")" = "0 1 1" ]
    out=$("$ZKR" inspect --json --items 1 /cli/q/order)
    expect "--items 1: $out" [ "$(json '.items | length' <<< "$out")" = 1 ]

    a=$("$ZKR" queue put /cli/q/insp job)
    bg "$ZKR" queue take --id worker-1 /cli/q/insp sh -c "cat > /dev/null; echo \"\$ZKR_FENCE\" >> '$WORK/log'; exec sleep 60"
    expect "worker did not start" wait_for 10 [ -s "$WORK/log" ]
    fence=$(head -1 "$WORK/log")
    bg "$ZKR" queue take --id waiter-1 /cli/q/insp true
    expect "waiter-1 not in line" wait_for 10 nodes_eq /cli/q/insp/consumers 1
    bg "$ZKR" queue take --id waiter-2 /cli/q/insp true
    expect "waiter-2 not in line" wait_for 10 nodes_eq /cli/q/insp/consumers 2
    out=$("$ZKR" inspect --json /cli/q/insp)
    expect "item: $out" [ "$(json '.items[0].id' <<< "$out")" = "$a" ]
    expect "claimed: $out" [ "$(json '.items[0].claimed' <<< "$out")" = true ]
    expect "claimed by: $out" [ "$(json '.items[0].claimed_by' <<< "$out")" = worker-1 ]
    expect "deliveries: $out" [ "$(json '.items[0].deliveries' <<< "$out")" = 1 ]
    expect "claim token $fence: $out" [ "$(json '.claims[0].token' <<< "$out")" = "$fence" ]
    expect "claim id: $out" [ "$(json '.claims[0].id' <<< "$out")" = worker-1 ]
    expect "consumers: $out" \
        [ "$(json '[.consumers[].id] | join(" ")' <<< "$out")" = "waiter-1 waiter-2" ]
    expect "turn: $out" [ "$(json '[.consumers[].turn] | join(" ")' <<< "$out")" = "true false" ]
    out=$("$ZKR" inspect /cli/q/insp)
    expect "text header: $out" grep -q "^/cli/q/insp: work queue, 1 item" <<< "$out"
    expect "text item: $out" grep -Eq "^${a} +1 +1 +3 .*claimed by worker-1" <<< "$out"
    expect "text claim: $out" grep -Eq "^${a} +worker-1 +${fence} " <<< "$out"
    expect "text turn: $out" grep -q "^turn .*waiter-1" <<< "$out"
    expect "text waiting: $out" grep -q "^waiting .*waiter-2" <<< "$out"
    # A lock is still shown as a lock.
    out=$("$ZKR" inspect --json /cli/q/insp/consumers)
    expect "the line is a lock: $out" [ "$(json '.kind' <<< "$out")" = lock ]
}

# Someone deletes the claim while the command runs: the claim is lost, the
# command is stopped, zkr exits 4 and the item is not completed.
test_claim_lost() {
    local rc
    "$ZKR" queue put /cli/q/lost job > /dev/null
    rc=0
    "$ZKR" queue take -w 10 /cli/q/lost sh -c "'$ZKQ' \"\$ZKR_SERVER\" delete \"\$ZKR_LOCK_NODE\"; sleep $(scaled 2)" 2>/dev/null || rc=$?
    expect "lost claim: exit $rc, not 4" [ "$rc" -eq 4 ]
    expect "item completed anyway: len $(qlen /cli/q/lost)" [ "$(qlen /cli/q/lost)" = 1 ]
    # The same, the command ending at once with 0: the ack (or the loss
    # seen first) finds the claim gone; the item is not completed.
    rc=0
    "$ZKR" queue take -w 10 /cli/q/lost sh -c "cat > /dev/null; '$ZKQ' \"\$ZKR_SERVER\" delete \"\$ZKR_LOCK_NODE\"" 2>"$WORK/lost.err" || rc=$?
    expect "claim gone at the ack: exit $rc, not 4" [ "$rc" -eq 4 ]
    expect "no word on stderr: $(cat "$WORK/lost.err")" grep -q "claim\|lost" "$WORK/lost.err"
    expect "item completed without its claim: len $(qlen /cli/q/lost)" [ "$(qlen /cli/q/lost)" = 1 ]
}

# SIGTERM to zkr while the command runs: forwarded; the command ends with 0
# (it traps the signal), but zkr signalled it, so it may have stopped
# half-way: the item goes back (nack), and zkr exits 143 (128+15), never 0,
# which says "acked".
test_signal_nacks() {
    local z rc
    reset_got
    : > "$WORK/log"
    "$ZKR" queue put /cli/q/sig job > /dev/null
    bg "$ZKR" queue take -w 10 /cli/q/sig sh -c "cat > /dev/null; trap 'exit 0' TERM; echo up >> '$WORK/log'; sleep 60 & wait"
    z=$!
    expect "command did not start" wait_for 10 [ -s "$WORK/log" ]
    kill -TERM "$z"
    wait_status "$z"
    expect "zkr exit $st after SIGTERM, not 143" [ "$st" -eq 143 ]
    expect "an interrupted item was acked: len $(qlen /cli/q/sig)" [ "$(qlen /cli/q/sig)" = 1 ]
    rc=0
    "$ZKR" queue take -w 10 /cli/q/sig sh "$RECORD" 0 || rc=$?
    expect "next delivery '$(got 0 delivery)', not 2" [ "$(got 0 delivery)" = 2 ]
}

# Usage errors: 64 and one line; a COMMAND that does not exist takes no
# item.
test_usage_errors() {
    local rc err args
    for args in "queue" "queue bogus /p" "queue put" "queue put -l 4 /cli/q/u x" \
        "queue put /cli/q/u a b" "queue put relative x" "queue take /cli/q/u" \
        "queue take --nack sideways /cli/q/u true" \
        "queue take --dead /cli/q/d /cli/q/u true" \
        "queue take --max-deliveries 0 /cli/q/u true" \
        "queue take --batch 0 /cli/q/u true" "queue take --batch 1025 /cli/q/u true" \
        "lock --batch 2 /cli/q/u true" \
        "queue take -E 300 /cli/q/u true" "queue take --lock-delay 1 /cli/q/u true" \
        "queue len" "queue len /a /b" "lock --nack back /cli/q/u true" \
        "inspect --items x /cli/q/u"; do
        rc=0
        # shellcheck disable=SC2086
        err=$("$ZKR" $args 2>&1 >/dev/null) || rc=$?
        expect "'zkr $args' exit $rc, not 64" [ "$rc" -eq 64 ]
        expect "'zkr $args' printed '$err'" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
    done
    "$ZKR" queue put /cli/q/u x > /dev/null
    rc=0
    "$ZKR" queue take -w 5 /cli/q/u no-such-command-zkr 2>/dev/null || rc=$?
    expect "not found: $rc" [ "$rc" -eq 127 ]
    expect "an item was taken for a missing command" \
        [ "$("$ZKR" inspect --json /cli/q/u | json '.items[0].deliveries')" = 0 ]
    # --help lists every option (zkr(1)'s lists), exits 0, on stdout.
    local out opt
    out=$("$ZKR" queue take --help) || fail "queue take --help: exit $?"
    for opt in --wait --timeout --nonblock --conflict-exit-code --command \
        --nack --max-deliveries --dead --batch --id --acl --on-suspend --grace \
        --lost-exit-code --metrics-file --help ZKR_FENCE ZKR_QUEUE_ITEM \
        ZKR_QUEUE_DELIVERY; do
        expect "queue take --help does not list $opt" grep -q -- "$opt\b" <<< "$out"
    done
    out=$("$ZKR" queue --help) || fail "queue --help: exit $?"
    for opt in "queue put" "queue take" "queue len" --level --acl; do
        expect "queue --help does not list $opt" grep -q -- "$opt\b" <<< "$out"
    done
    expect "inspect --help does not list --items" grep -q -- "--items" <<< "$("$ZKR" inspect --help)"
    expect "zkr --help names the queue" grep -q "queue take" <<< "$("$ZKR" --help)"
}

# A COMMAND that cannot be run is found out before any item is taken
# (zkr(1), queue take): a directory (given, or found in $PATH), a file
# without execute permission, a script whose #! interpreter is missing:
# 126, and the item stays available, never delivered, even with
# --max-deliveries 1.
test_command_not_runnable() {
    local rc c
    "$ZKR" queue put /cli/q/nx x > /dev/null
    mkdir -p "$WORK/bin/zkr-dir"
    printf 'exit 0\n' > "$WORK/bin/zkr-noexec"
    printf '#!/nonexistent/zkr-interp\nexit 0\n' > "$WORK/bin/zkr-badinterp"
    chmod 644 "$WORK/bin/zkr-noexec"
    chmod 755 "$WORK/bin/zkr-badinterp"
    for c in "$WORK/bin/zkr-dir" zkr-dir "$WORK/bin/zkr-noexec" \
        "$WORK/bin/zkr-badinterp"; do
        rc=0
        PATH="$WORK/bin:$PATH" "$ZKR" queue take --max-deliveries 1 -w 5 \
            /cli/q/nx "$c" 2>/dev/null || rc=$?
        expect "$c: exit $rc, not 126" [ "$rc" -eq 126 ]
    done
    expect "the item is gone: $(qlen /cli/q/nx) items" [ "$(qlen /cli/q/nx)" -eq 1 ]
    expect "an item was taken for a command that cannot run" \
        [ "$("$ZKR" inspect --json /cli/q/nx | json '.items[0].deliveries')" = 0 ]
}

# An item taken for a command that then does not run (here: the queue's
# ACL is weaker than --acl private asks) goes back where it was, before
# the items after it, even with --nack back (which is for a command that
# ran and failed).
test_not_run_given_back_in_place() {
    local rc
    "$ZKR" queue put /cli/q/gb A > /dev/null
    "$ZKR" queue put /cli/q/gb B > /dev/null
    rc=0
    ZKR_AUTH=zkr-gb:pw "$ZKR" queue take --acl private --nack back -w 5 \
        /cli/q/gb true 2>/dev/null || rc=$?
    expect "weaker ACL: exit $rc, not 77" [ "$rc" -eq 77 ]
    expect "the item is gone: $(qlen /cli/q/gb) items" [ "$(qlen /cli/q/gb)" -eq 2 ]
    expect "not given back in place: the next take got something else" \
        [ "$("$ZKR" queue take -w 5 /cli/q/gb cat)" = A ]
}

# A script without #! is run by /bin/sh, as execvp(3) does: it gets the
# item on its standard input and its exit 0 acks it.
test_script_without_shebang() {
    local rc
    printf 'cat > "%s"\n' "$WORK/nosb.out" > "$WORK/zkr-nosb"
    chmod 755 "$WORK/zkr-nosb"
    "$ZKR" queue put /cli/q/sb payload > /dev/null
    rc=0
    "$ZKR" queue take -w 5 /cli/q/sb "$WORK/zkr-nosb" || rc=$?
    expect "exit $rc, not 0" [ "$rc" -eq 0 ]
    expect "the script did not get the item" [ "$(cat "$WORK/nosb.out" 2>/dev/null)" = payload ]
    expect "the item was not acked" [ "$(qlen /cli/q/sb)" -eq 0 ]
}

start_server
run_test test_put_take_len
run_test test_nack_redelivers
run_test test_dead_letter
run_test test_wait_timeout
run_test test_killed_consumer_redelivered
run_test test_background_child_holds_claim_ack
run_test test_setsid_child_holds_claim_nack
run_test test_fifo_and_levels
run_test test_batch
run_test test_batch_sigterm_between_runs
run_test test_inspect_queue
run_test test_claim_lost
run_test test_signal_nacks
run_test test_usage_errors
run_test test_command_not_runnable
run_test test_not_run_given_back_in_place
run_test test_script_without_shebang
done_testing
