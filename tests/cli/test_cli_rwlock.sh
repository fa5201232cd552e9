#!/usr/bin/env bash
# zkr lock --read / --write: the two sides of a read/write lock, named as
# Curator's InterProcessReadWriteLock names them (`_c_<uuid>-__READ__<seq>`,
# `_c_<uuid>-__WRIT__<seq>`), so that Curator readers see zkr writers and
# zkr sees Curator's readers and writers; plain zkr lock stays the mutex
# (`-lock-`) and excludes zkr readers and writers. Curator's nodes are
# played by a raw client creating nodes with Curator's names.
. "${srcdir:-.}/tests/cli/lib.sh"

# Curator's protected names: "_c_" + UUID + "-" + lock name + sequence.
CURATOR_WRITE='^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-__WRIT__[0-9]{10}$'
CURATOR_READ='^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-__READ__[0-9]{10}$'
FOREIGN=_c_0a0b0c0d-0000-4000-8000-000000000001

# try MODE-FLAGS... PATH: exit status of a non-blocking zkr lock.
try() {
    local rc=0
    "$ZKR" lock -n "$@" true 2>/dev/null || rc=$?
    echo "$rc"
}

modes() { # PATH -> "holder modes | waiter modes"
    "$ZKR" inspect --json "$1" |
        jq -r '"\([.holders[].mode] | join(",")) | \([.waiters[].mode] | join(","))"'
}
modes_are() { [ "$(modes "$1")" = "$2" ]; }

# A Curator reader (raw node, sequence 0) shares with zkr readers and
# excludes a zkr writer and a zkr mutex; once it is gone the writer gets
# in.
test_curator_reader_vs_zkr() {
    local p=/cli/rw-cr
    "$ZKQ" "$ZKR_SERVER" create "$p"
    "$ZKQ" "$ZKR_SERVER" create "$p/$FOREIGN-__READ__0000000000"
    expect "zkr reader did not share with a Curator reader" [ "$(try --read "$p")" -eq 0 ]
    expect "zkr writer granted beside a Curator reader" [ "$(try --write "$p")" -eq 1 ]
    expect "zkr mutex granted beside a Curator reader" [ "$(try "$p")" -eq 1 ]
    "$ZKQ" "$ZKR_SERVER" delete "$p/$FOREIGN-__READ__0000000000"
    expect "zkr writer refused on a free lock" [ "$(try --write "$p")" -eq 0 ]
}

# A Curator writer (raw node) excludes zkr readers and writers.
test_curator_writer_vs_zkr() {
    local p=/cli/rw-cw
    "$ZKQ" "$ZKR_SERVER" create "$p"
    "$ZKQ" "$ZKR_SERVER" create "$p/$FOREIGN-__WRIT__0000000000"
    expect "zkr reader granted beside a Curator writer" [ "$(try --read "$p")" -eq 1 ]
    expect "zkr writer granted beside a Curator writer" [ "$(try --write "$p")" -eq 1 ]
    "$ZKQ" "$ZKR_SERVER" delete "$p/$FOREIGN-__WRIT__0000000000"
}

# zkr lock --write holds: its node is a Curator write node (what a Curator
# reader counts as a writer: it contains "__WRIT__"), inspect shows mode
# write, zkr readers and writers wait; a reader queued behind a waiting
# writer waits for it (FIFO), and they run in order.
test_write_side() {
    local p=/cli/rw-w w r1 w2 r2 name
    : > "$WORK/log"
    rm -f "$WORK/go1" "$WORK/go2"
    bg "$ZKR" lock --write --id w1 "$p" sh -c "echo w1 start >> '$WORK/log'; while [ ! -e '$WORK/go1' ]; do sleep 0.05; done; echo w1 end >> '$WORK/log'"
    w=$!
    expect "writer did not start" wait_for 10 lines_ge "$WORK/log" 1 "w1 start"
    name=$(zk_ls "$p")
    expect "writer node '$name' is not Curator's write node" grep -Eq "$CURATOR_WRITE" <<< "$name"
    expect "modes: $(modes "$p")" modes_are "$p" "write | "
    expect "zkr reader granted beside a zkr writer" [ "$(try --read "$p")" -eq 1 ]
    expect "zkr writer granted beside a zkr writer" [ "$(try --write "$p")" -eq 1 ]
    bg "$ZKR" lock --read --id r1 "$p" sh -c "echo r1 start >> '$WORK/log'; while [ ! -e '$WORK/go2' ]; do sleep 0.05; done; echo r1 end >> '$WORK/log'"
    r1=$!
    expect "reader not queued" wait_for 10 nodes_eq "$p" 2
    bg "$ZKR" lock --write --id w2 "$p" sh -c "echo w2 start >> '$WORK/log'; echo w2 end >> '$WORK/log'"
    w2=$!
    expect "second writer not queued" wait_for 10 nodes_eq "$p" 3
    bg "$ZKR" lock --read --id r2 "$p" sh -c "echo r2 start >> '$WORK/log'"
    r2=$!
    expect "second reader not queued" wait_for 10 nodes_eq "$p" 4
    expect "modes: $(modes "$p")" modes_are "$p" "write | read,write,read"
    expect "a reader name is not Curator's" \
        grep -Eq "$CURATOR_READ" <<< "$(zk_ls "$p")"
    touch "$WORK/go1"
    expect "r1 did not start after w1" wait_for 10 lines_ge "$WORK/log" 1 "r1 start"
    expect "modes: $(modes "$p")" modes_are "$p" "read | write,read"
    touch "$WORK/go2"
    wait_status "$r2"
    expect "r2 exit $st" [ "$st" -eq 0 ]
    wait_status "$w2"
    expect "w2 exit $st" [ "$st" -eq 0 ]
    expect "order: $(tr '\n' ' ' < "$WORK/log")" [ "$(tr '\n' ' ' < "$WORK/log")" = \
        "w1 start w1 end r1 start r1 end w2 start w2 end r2 start " ]
    wait_status "$w"
    wait_status "$r1"
}

# Mixed forms: a plain zkr lock (a mutex node, which Curator's read/write
# lock ignores) stays exclusive for zkr readers and writers.
test_mutex_among_rw() {
    local p=/cli/rw-m
    : > "$WORK/log"
    bg "$ZKR" lock "$p" sh -c "echo m start >> '$WORK/log'; exec sleep 60"
    expect "mutex did not start" wait_for 10 lines_ge "$WORK/log" 1 "m start"
    expect "modes: $(modes "$p")" modes_are "$p" "mutex | "
    expect "zkr reader granted beside a mutex" [ "$(try --read "$p")" -eq 1 ]
    expect "zkr writer granted beside a mutex" [ "$(try --write "$p")" -eq 1 ]
}

test_bad_options() {
    local rc=0
    "$ZKR" lock --read --write /cli/rw-x true 2>/dev/null || rc=$?
    expect "--read --write: exit $rc" [ "$rc" -eq 64 ]
    rc=0
    "$ZKR" sem -c 2 --write /cli/rw-x true 2>/dev/null || rc=$?
    expect "sem --write: exit $rc" [ "$rc" -eq 64 ]
}

start_server
"$ZKQ" "$ZKR_SERVER" create /cli
run_test test_curator_reader_vs_zkr
run_test test_curator_writer_vs_zkr
run_test test_write_side
run_test test_mutex_among_rw
run_test test_bad_options
done_testing
