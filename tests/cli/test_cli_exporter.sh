#!/usr/bin/env bash
# zkr exporter, scraped by a real Prometheus server (Debian's prometheus,
# on loopback, scrape interval 1 s): Prometheus's HTTP API reports the
# holder of a contended lock and a waiter count that drops as the lock
# passes on. Also: the scrape passes `promtool check metrics` with hostile
# identifiers; a path with thousands of waiters is not listed per scrape
# (nor per arrival); --textfile-dir adds other processes' library metrics;
# the exporter reports and survives a lost session and a
# ZooKeeper restart; scrapes are served while a hostile client holds as
# many connections as it can (a slowloris).
# shellcheck disable=SC2317 # the tests run through run_test
. "${srcdir:-.}/tests/cli/lib.sh"

zkr_need prometheus prometheus
zkr_need promtool prometheus
zkr_need curl curl
zkr_need jq jq
zkr_need python3 python3

# exporter_start [GLOBAL-OPTION...] -- PATH...: starts zkr exporter on a
# free port (EXP is its address, EXP_PID its PID), refreshing every 0.2 s,
# and waits until it serves.
exporter_start() {
    local global=()
    while [ "$1" != -- ]; do
        global+=("$1")
        shift
    done
    shift
    EXP=127.0.0.1:$(zkr__free_port)
    bg "$ZKR" "${global[@]}" exporter --listen "$EXP" --refresh 0.2 "$@" \
        2>>"$WORK/exporter.log"
    EXP_PID=$!
    wait_for 10 scrape_ok
}
scrape() { curl -sf "http://$EXP/metrics"; }
scrape_ok() { scrape >/dev/null; }
# metric LINE-PREFIX: the value of the exporter's sample whose line starts
# so (NAME or NAME{LABELS}).
metric() {
    # (through the environment: awk -v would undo the escapes in labels)
    scrape | P=$1 awk 'BEGIN { p = ENVIRON["P"] } index($0, p) == 1 &&
        substr($0, length(p) + 1, 1) ~ /[ {]/ { print $NF; exit }'
}
metric_eq() { [ "$(metric "$1")" = "$2" ]; }
metric_ge() {
    local v
    v=$(metric "$1")
    [ -n "$v" ] && [ "${v%.*}" -ge "$2" ]
}

# Prometheus scraping $EXP every second; PROM is its HTTP address.
prom_start() {
    local rc=0
    rm -rf "$WORK/prom"
    zkr_prometheus_start "$EXP" "$WORK/prom" || rc=$?
    t_pids+=("$ZKR_PROM_PID")
    PROM=$ZKR_PROM
    return "$rc"
}
# prom QUERY: the value of an instant query's first series, or nothing.
prom() {
    curl -sf -G "http://$PROM/api/v1/query" --data-urlencode "query=$1" |
        jq -r '.data.result[0].value[1] // empty'
}
prom_eq() { [ "$(prom "$1")" = "$2" ]; }

# A contender that holds until $WORK/go exists, then HOLD seconds more
# (CONTENDER_OPTS: global options of its zkr).
HOLD=$(scaled 1.5)
CONTENDER_OPTS=()
contender() {
    bg "$ZKR" "${CONTENDER_OPTS[@]}" lock --id "$1" "$2" sh -c \
        "while [ ! -e '$WORK/go' ]; do sleep 0.05; done; sleep $HOLD"
}

test_prometheus_sees_queue() {
    local t0 t1 pids=() p vals q='zkr_path_waiters{path="/exp/q"}'
    rm -f "$WORK/go"
    exporter_start -- /exp/q
    expect "prometheus did not start" prom_start
    for i in 1 2 3 4; do
        contender "c-$i" /exp/q
        pids+=($!)
        expect "c-$i not queued" wait_for 10 nodes_eq /exp/q "$i"
    done
    expect "holders != 1" wait_for 20 prom_eq 'zkr_path_holders{path="/exp/q"}' 1
    expect "waiters != 3" wait_for 20 prom_eq "$q" 3
    expect "holder c-1 not reported" \
        prom_eq 'zkr_path_holder_info{path="/exp/q",id="c-1",kind="lock"}' 1
    t0=$(date +%s)
    touch "$WORK/go"
    for p in "${pids[@]}"; do
        wait_status "$p"
        expect "a contender exited $st" [ "$st" -eq 0 ]
    done
    expect "waiters != 0" wait_for 20 prom_eq "$q" 0
    expect "holders != 0" wait_for 20 prom_eq 'zkr_path_holders{path="/exp/q"}' 0
    t1=$(($(date +%s) + 1))
    # Every sample Prometheus stored, from the release of the first holder
    # on: 3 waiters, then fewer and fewer (one at a time), then none.
    vals=$(curl -sf -G "http://$PROM/api/v1/query_range" \
        --data-urlencode "query=$q" --data-urlencode "start=$((t0 - 1))" \
        --data-urlencode "end=$t1" --data-urlencode step=0.5 |
        jq -r '.data.result[0].values[][1]' | uniq | tr '\n' ' ')
    echo "# waiters as Prometheus stored them: $vals"
    # Scrapes are a second apart and each holder holds $HOLD s: a count
    # may be missed on a loaded machine, never seen to go up.
    expect "waiters did not drop from 3 to 0 through 2 or 1: $vals" \
        dropping "$vals"
}

# dropping "V1 V2 ...": starts at 3, ends at 0, never rises, passes by 2
# or 1.
dropping() {
    local prev=4 v mid=0
    # shellcheck disable=SC2086 # one word a value
    set -- $1
    [ "$1" = 3 ] && [ "${!#}" = 0 ] || return 1
    for v in "$@"; do
        [ "$v" -lt "$prev" ] || return 1
        prev=$v
        case $v in 1 | 2) mid=1 ;; esac
    done
    [ "$mid" = 1 ]
}

test_promtool_and_escaping() {
    local node out rc
    exporter_start -- /exp/esc /exp/el
    bg "$ZKR" lock --id plain /exp/esc sleep 60
    bg "$ZKR" elect --id leader-1 /exp/el sleep 60
    expect "holder not reported" wait_for 10 metric_eq \
        'zkr_path_holder_info{path="/exp/esc",kind="lock",id="plain"}' 1
    expect "leader not reported" wait_for 10 metric_eq \
        'zkr_path_leader_info{path="/exp/el",kind="election",id="leader-1"}' 1
    expect "epoch is not the leader's czxid" [ "$(metric \
        'zkr_path_leader_epoch{path="/exp/el"}')" = \
        "$("$ZKQ" "$ZKR_SERVER" czxid "/exp/el/$(zk_ls /exp/el)")" ]
    # The holder's data rewritten with what the text format must escape
    # (quote, backslash, newline) and a byte that is not UTF-8: the data
    # watch on the holder's node brings it to the next scrape.
    node=/exp/esc/$(zk_ls /exp/esc)
    printf 'a"b\\c\nd\377e' | "$ZKQ" "$ZKR_SERVER" set "$node"
    expect "escaped id not reported" wait_for 10 metric_eq \
        "zkr_path_holder_info{path=\"/exp/esc\",kind=\"lock\",id=\"a\\\"b\\\\c\\nd"$'\xef\xbf\xbd'"e\"}" 1
    expect "token is not the holder's czxid" [ "$(metric \
        'zkr_path_fencing_token{path="/exp/esc"}')" = \
        "$("$ZKQ" "$ZKR_SERVER" czxid "$node")" ]
    scrape > "$WORK/scrape.txt"
    rc=0
    out=$(promtool check metrics < "$WORK/scrape.txt" 2>&1) || rc=$?
    expect "promtool check metrics ($rc): $out" [ "$rc" -eq 0 ] && [ -z "$out" ]
    expect "404 for other URLs" [ "$(curl -s -o /dev/null -w '%{http_code}' \
        "http://$EXP/nothing")" = 404 ]
}

# A candidate that announces (zkr elect's, with its default lock-delay)
# leads once it touches its node, just after it finds itself first: often
# between the exporter's listing, which read its node untouched, and the
# watch the exporter sets on that node next, which a touch already made
# does not fire. A leader missed so stays missed: nothing else calls for a
# listing. The race is closest when the candidate also creates the path
# (the exporter lists as it appears), so each round takes a new path; it
# was lost in about one round in five before the exporter compared the
# version its watch read.
test_leader_touched_after_listing() {
    local paths=() pid
    for i in $(seq 1 12); do paths+=("/exp/touch/$i"); done
    exporter_start -- "${paths[@]}"
    for i in $(seq 1 12); do
        bg "$ZKR" elect --id "t$i" "/exp/touch/$i" sleep 600
        pid=$!
        expect "leader t$i not reported" wait_for 10 metric_eq \
            "zkr_path_leader_info{path=\"/exp/touch/$i\",kind=\"election\",id=\"t$i\"}" 1
        kill -TERM "$pid"
        wait_status "$pid"
    done
}

# A departure and an arrival while the exporter lists leave the child
# count as it was: the first holder A (a node never watched, as if made
# by another client) goes after the listing began, so the listing skips
# it, and B, which holds at once, comes after the children were read.
# Before the exporter compared the stat's pzxid (which every child's
# create and delete moves), nothing watched B and the count did not move:
# no holder was shown for as long as B held. The proxy holds every packet
# of the exporter's session 1 s each way, so each of its requests takes
# 2 s: the steps below fall inside the listing whatever the worker was
# doing when the path's watch fired.
test_departure_and_arrival_during_listing() {
    expect "proxy did not start" proxy_start
    "$ZKQ" "$ZKR_SERVER" create /exp 2>/dev/null || true
    expect "create" "$ZKQ" "$ZKR_SERVER" create /exp/aba
    exporter_start -s "$PROXY_HOSTS" --session-timeout 30000 -- /exp/aba
    expect "path not seen" wait_for 10 metric_eq 'zkr_path_exists{path="/exp/aba"}' 1
    expect "delay" proxy_cmd delay 1000
    sleep 3
    expect "fill" "$ZKQ" "$ZKR_SERVER" fill /exp/aba 1
    printf x | "$ZKQ" "$ZKR_SERVER" set /exp/aba # the path's watch fires
    sleep 5
    expect "delete" "$ZKQ" "$ZKR_SERVER" delete "/exp/aba/$(zk_ls /exp/aba)"
    sleep 1
    bg "$ZKR" lock --lock-delay 0 --id h2 /exp/aba sleep 600
    sleep 5
    expect "pass" proxy_cmd pass
    expect "the holder that came during the listing not reported" \
        wait_for 20 metric_eq \
        'zkr_path_holder_info{path="/exp/aba",kind="lock",id="h2"}' 1
}

# A contender's node the exporter may not read (another client's, with an
# ACL for its creator alone) fails every listing of the path. Each try
# reads the queue up to that node, so tries are spaced twice as far apart
# each time (to 60 s), not made every --refresh (0.2 s here: 20 in 4 s).
# A new connection is news: the node released meanwhile (no watch could
# say so), the exporter lists at once, not when the gap has run out.
test_refused_listing_backs_off() {
    local l0 l1 node=/exp/noauth/_c_00000000-0000-0000-0000-000000000000-lock-0000000000
    expect "proxy did not start" proxy_start
    "$ZKQ" "$ZKR_SERVER" create /exp 2>/dev/null || true
    expect "create" "$ZKQ" "$ZKR_SERVER" create /exp/noauth
    ZKQ_AUTH=owner:secret expect "create-private" "$ZKQ" "$ZKR_SERVER" \
        create-private "$node"
    exporter_start -s "$PROXY_HOSTS" -- /exp/noauth
    expect "listings not refused" wait_for 10 metric_ge \
        'zkr_path_listings_total{path="/exp/noauth"}' 3
    expect "reported up" metric_eq 'zkr_path_up{path="/exp/noauth"}' 0
    l0=$(metric 'zkr_path_listings_total{path="/exp/noauth"}')
    sleep "$(scaled 4)"
    l1=$(metric 'zkr_path_listings_total{path="/exp/noauth"}')
    echo "# refused listings in $(scaled 4) s: $((l1 - l0))"
    expect "listed $((l1 - l0)) times in $(scaled 4) s" [ "$((l1 - l0))" -le 3 ]
    # Just after a try (the gap is 6.4 s by the fifth), the node goes and
    # the connection is cut: the next listing follows the reconnection.
    expect "fifth try" wait_for 20 metric_ge \
        'zkr_path_listings_total{path="/exp/noauth"}' 5
    ZKQ_AUTH=owner:secret expect "delete" "$ZKQ" "$ZKR_SERVER" delete "$node"
    expect "reset" proxy_cmd reset
    expect "not listed again after the reconnection" wait_for 3 metric_eq \
        'zkr_path_up{path="/exp/noauth"}' 1
}

# Thousands of waiters: arrivals behind a waiter cannot hold, so the
# exporter follows them from the path's numChildren alone; only a release
# (a watch on the holder's node) makes it list. The holder and the first
# waiter are queued before the exporter starts: its first listing sees
# them both, and nothing is left that may call for another (a waiter
# arriving while everyone holds would, by the rule: it might hold).
test_thousands_of_waiters() {
    local l0 l1 h a n
    rm -f "$WORK/go"
    contender holder /exp/big
    h=$!
    expect "holder not queued" wait_for 10 nodes_eq /exp/big 1
    expect "fill" "$ZKQ" "$ZKR_SERVER" fill /exp/big 1
    exporter_start -- /exp/big
    expect "holder not reported" wait_for 10 metric_eq \
        'zkr_path_holders{path="/exp/big"}' 1
    expect "first waiter not reported" wait_for 10 metric_eq \
        'zkr_path_waiters{path="/exp/big"}' 1
    l0=$(metric 'zkr_path_listings_total{path="/exp/big"}')
    expect "fill" "$ZKQ" "$ZKR_SERVER" fill /exp/big 2999
    expect "3000 waiters not reported" wait_for 20 metric_eq \
        'zkr_path_waiters{path="/exp/big"}' 3000
    expect "depth" metric_eq 'zkr_path_queue_depth{path="/exp/big"}' 3001
    for i in $(seq 1 50); do scrape_ok; done
    l1=$(metric 'zkr_path_listings_total{path="/exp/big"}')
    # The rule is "no listing per scrape or per arrival": a listing per
    # either would be 50 or thousands here. A few may still come from
    # events that are neither (a reconnection of the exporter's session
    # on a loaded machine, a node gone before its watch was set): bounded
    # by those events, not by the queue, so a small constant bounds them.
    expect "listed $((l1 - l0)) times for arrivals and scrapes" \
        [ "$((l1 - l0))" -le 2 ]
    # The release, with arrivals all through it and through the listing it
    # causes (3000 reads): they queue behind waiters, so they call for no
    # second listing. (A second one would be due a --refresh after the
    # first: the pause below gives it time to show.)
    rm -f "$WORK/stop"
    touch "$WORK/go"
    bg sh -c "while [ ! -e '$WORK/stop' ]; do '$ZKQ' '$ZKR_SERVER' fill /exp/big 5 || exit 1; done"
    a=$!
    expect "next holder not reported" wait_for 20 metric_eq \
        'zkr_path_holder_info{path="/exp/big",kind="lock",id="filler"}' 1
    touch "$WORK/stop"
    wait_status "$a"
    expect "arrivals failed ($st)" [ "$st" -eq 0 ]
    n=$("$ZKQ" "$ZKR_SERVER" ls /exp/big | grep -c .)
    expect "waiters after the release" wait_for 20 metric_eq \
        'zkr_path_waiters{path="/exp/big"}' "$((n - 1))"
    sleep "$(scaled 1)"
    # The new holder's node is older than its hold: it waited first.
    expect "held longer than its node exists" awk -v h="$(metric \
        'zkr_path_holder_held_seconds{path="/exp/big"}')" -v a="$(metric \
        'zkr_path_holder_age_seconds{path="/exp/big"}')" \
        'BEGIN { exit !(h != "" && a != "" && h + 0 < a + 0) }'
    l1=$(metric 'zkr_path_listings_total{path="/exp/big"}')
    echo "# listings for $((n - 1)) arrivals, 50 scrapes and a release: $((l1 - l0))"
    expect "listed $((l1 - l0)) times for one release" [ "$((l1 - l0))" -ge 1 ]
    expect "listed $((l1 - l0)) times for one release" [ "$((l1 - l0))" -le 3 ]
}

# --textfile-dir: the exporter's scrape adds the *.prom files of a
# directory (node_exporter's textfile collector), merged with its own
# families and its own session's library metrics into one valid scrape
# (one HELP/TYPE per family: promtool), every sample of a file labelled
# source=FILE; a file not in the text format is left out and counted.
test_textfile_dir() {
    local tf=$WORK/textfiles out rc
    rm -rf "$tf"
    mkdir "$tf"
    "$ZKR" lock --metrics-file "$tf/job-a.prom" /exp/tf true
    "$ZKR" lock --metrics-file "$tf/job-b.prom" /exp/tf true
    "$ZKR" lock --metrics-file "$tf/job-b.prom.tmp" /exp/tf true
    printf 'this is not a metric\n' > "$tf/bad.prom"
    printf 'hidden_total 1\n' > "$tf/.hidden.prom"
    # HELP and TYPE lines Prometheus rejects (a name that is not one, a
    # type it does not know): each file is left out, not the whole scrape.
    printf '# HELP 9bad A family.\nok_total 1\n' > "$tf/badhelp.prom"
    printf '# TYPE bt_total bogus\nbt_total 1\n' > "$tf/badtype.prom"
    # More families than the merge starts with room for (any number works).
    awk 'BEGIN { for (i = 0; i < 150; i++)
        printf "# HELP many_%d_total A family.\n# TYPE many_%d_total counter\nmany_%d_total %d\n", i, i, i, i }' \
        > "$tf/many.prom"
    exporter_start -- --textfile-dir "$tf" /exp/tf
    scrape > "$WORK/tf-scrape.txt"
    rc=0
    out=$(promtool check metrics < "$WORK/tf-scrape.txt" 2>&1) || rc=$?
    expect "promtool check metrics ($rc): $out" [ "$rc" -eq 0 ] && [ -z "$out" ]
    expect "TYPE of zkr_acquisitions_total not once" [ "$(grep -c \
        '^# TYPE zkr_acquisitions_total ' "$WORK/tf-scrape.txt")" = 1 ]
    expect "TYPE of zkr_session_timeout_seconds not once" [ "$(grep -c \
        '^# TYPE zkr_session_timeout_seconds ' "$WORK/tf-scrape.txt")" = 1 ]
    expect "job-a's grant not served" metric_eq \
        'zkr_acquisitions_total{source="job-a",path="/exp/tf",kind="lock"}' 1
    expect "job-b's grant not served" metric_eq \
        'zkr_acquisitions_total{source="job-b",path="/exp/tf",kind="lock"}' 1
    expect "job-a's wait histogram not served" metric_eq \
        'zkr_wait_seconds_count{source="job-a",path="/exp/tf",kind="lock"}' 1
    expect "the exporter's own session metrics not served" awk \
        -v l="$(metric zkr_session_timeout_seconds)" \
        'BEGIN { exit !(l != "" && l + 0 > 0) }'
    expect "files other than *.prom served" \
        [ "$(grep -c 'hidden_total\|source="job-b.prom' "$WORK/tf-scrape.txt")" = 0 ]
    expect "files in the scrape" metric_eq zkr_exporter_textfiles 3
    expect "150 families of one file not all served" [ "$(grep -c \
        '^many_[0-9]*_total{source="many"}' "$WORK/tf-scrape.txt")" = 150 ]
    expect "a family's value" metric_eq 'many_149_total{source="many"}' 149
    expect "bad.prom, badhelp.prom, badtype.prom not counted" [ "$(metric \
        zkr_exporter_textfile_errors_total)" -ge 3 ]
    expect "badhelp.prom or badtype.prom served" \
        [ "$(grep -c 'source="bad' "$WORK/tf-scrape.txt")" = 0 ]
    # A file replaced (written elsewhere, renamed in) shows at the next
    # scrape, and what it no longer has goes.
    "$ZKR" sem -c 2 --metrics-file "$WORK/job-a.prom" /exp/tfs true
    mv "$WORK/job-a.prom" "$tf/job-a.prom"
    expect "job-a's replacement not served" metric_eq \
        'zkr_acquisitions_total{source="job-a",path="/exp/tfs",kind="semaphore"}' 1
    expect "job-a's old file still served" [ "$(scrape |
        grep -c '^zkr_acquisitions_total{source="job-a",path="/exp/tf",')" = 0 ]
}

# The exporter's session goes through the fault proxy: a partition longer
# than its session timeout makes it LOST; it reports that, gets a new
# session, and shows the queue as it is now (its watches are new).
test_session_loss() {
    local h
    expect "proxy" proxy_start
    rm -f "$WORK/go"
    exporter_start -s "$PROXY_HOSTS" --session-timeout 2000 -- /exp/loss
    contender first /exp/loss
    h=$!
    expect "holder not reported" wait_for 10 metric_eq \
        'zkr_path_holder_info{path="/exp/loss",kind="lock",id="first"}' 1
    expect "blackhole" proxy_cmd blackhole
    expect "loss not reported" wait_for 15 metric_eq \
        'zkr_session_losses_total' 1
    expect "values still said current" metric_eq 'zkr_path_up{path="/exp/loss"}' 0
    expect "connected while lost" metric_eq zkr_up 0
    # The queue changes while the exporter cannot see it.
    touch "$WORK/go"
    wait_status "$h"
    contender second /exp/loss
    expect "second not queued" wait_for 10 nodes_eq /exp/loss 1
    expect "pass" proxy_cmd pass
    expect "new session not reported" wait_for 20 metric_eq \
        zkr_sessions_total 2
    expect "new holder not reported" wait_for 10 metric_eq \
        'zkr_path_holder_info{path="/exp/loss",kind="lock",id="second"}' 1
    expect "not current again" wait_for 10 metric_eq 'zkr_path_up{path="/exp/loss"}' 1
    expect "exporter died" alive "$EXP_PID"
}

# ZooKeeper killed and started again (same data, within the session
# timeout): the session resumes, the watches set before still work. The
# sessions' timeouts (30 s: safe for about 17 s) outlast a slow restart.
test_zookeeper_restart() {
    local h
    rm -f "$WORK/go"
    CONTENDER_OPTS=(--session-timeout 30000)
    exporter_start --session-timeout 30000 -- /exp/rst
    contender one /exp/rst
    h=$!
    expect "holder not reported" wait_for 10 metric_eq \
        'zkr_path_holder_info{path="/exp/rst",kind="lock",id="one"}' 1
    contender two /exp/rst
    expect "waiter not reported" wait_for 10 metric_eq \
        'zkr_path_waiters{path="/exp/rst"}' 1
    expect "restart" zkr_server_restart
    expect "suspension not reported" wait_for 10 metric_eq \
        zkr_session_suspensions_total 1
    expect "not connected again" wait_for 20 metric_eq \
        zkr_up 1
    touch "$WORK/go"
    expect "next holder not reported" wait_for 20 metric_eq \
        'zkr_path_holder_info{path="/exp/rst",kind="lock",id="two"}' 1
    expect "waiters after the release" metric_eq 'zkr_path_waiters{path="/exp/rst"}' 0
    expect "session lost by a restart" metric_eq 'zkr_session_losses_total' 0
    expect "exporter died" alive "$EXP_PID"
    CONTENDER_OPTS=()
}

# A slowloris: a hostile client opens as many connections as it can, each
# sending a request header that never ends (a line every PERIOD seconds),
# and opens again those the exporter closes. Scrapes from another client
# must all be served meanwhile (HTTP 200 with the exporter's samples;
# from the hostile client's own address, where nothing tells the two
# apart, a connection of the scraper's may be closed before its request
# arrives (zkr(1)), and the scrape's one retry must then be served),
# over a window longer than the exporter's header timeout (5 s, its
# default: zkr(1)), so that connections it closed for their slowness have
# been opened again. First from the scraper's own address (more
# connections than select() can watch), then from eight others (a limit
# per address alone would not hold those off).
SLOW_T=5
SLOW_PERIOD=2
slowloris_phase() {
    local what=$1 tries=$2 window=$((2 * SLOW_T + SLOW_PERIOD)) end n=0
    local bad=0 retried=0 code h conns most=0 k
    shift 2
    rm -f "$WORK/slow.out"
    bg python3 "$top_srcdir/tests/cli/slowloris.py" "$EXP" \
        "$((window + 8))" "$SLOW_PERIOD" "$@" >"$WORK/slow.out"
    h=$!
    expect "slowloris not ready: $(cat "$WORK/slow.out")" \
        wait_for 10 lines_ge "$WORK/slow.out" 1 '^ready$'
    end=$(($(now_ms) + window * 1000))
    while [ "$(now_ms)" -lt "$end" ] && [ "$n" -lt 500 ]; do
        n=$((n + 1))
        for k in $(seq 1 "$tries"); do
            [ "$k" -eq 1 ] || retried=$((retried + 1))
            code=$(curl -sS --interface 127.0.0.1 --max-time "$(scaled 5)" \
                -o "$WORK/slow.txt" -w '%{http_code}' \
                "http://$EXP/metrics" 2>"$WORK/slow.err") ||
                code="$code curl exit $?"
            [ "$code" != 200 ] || break
        done
        if [ "$code" != 200 ] ||
            ! grep -q '^zkr_path_up{path="/exp/slow"} ' "$WORK/slow.txt" ||
            ! grep -q '^zkr_up 1$' "$WORK/slow.txt"; then
            bad=$((bad + 1))
            [ "$bad" -gt 3 ] ||
                fail "scrape $n $what: $code $(cat "$WORK/slow.err")"
        else
            conns=$(awk '$1 == "zkr_exporter_http_connections" { print $2 }' \
                "$WORK/slow.txt")
            [ "${conns:-0}" -le "$most" ] || most=$conns
        fi
        rm -f "$WORK/slow.txt"
        sleep 0.2
    done
    wait_status "$h"
    echo "# $what: $n scrapes, $bad failed, $retried retried, at most" \
        "$most connections;" \
        "slowloris: $(tail -n 1 "$WORK/slow.out")"
    expect "$bad of $n scrapes failed $what" [ "$bad" -eq 0 ]
    # --max-connections (default 128) bounds the connections held.
    expect "$most connections held $what" [ "$most" -le 128 ]
    expect "only $n scrapes in ${window} s" [ "$n" -ge 5 ]
    expect "slowloris exited $st: $(cat "$WORK/slow.out")" [ "$st" -eq 0 ]
}

test_slowloris() {
    exporter_start -- /exp/slow
    slowloris_phase "from 127.0.0.1" 2 127.0.0.1=1200
    slowloris_phase "from 127.0.0.2-9" 1 127.0.0.{2..9}=160
    expect "exporter died" alive "$EXP_PID"
    expect "not served after the slowloris" scrape_ok
    expect "no connection evicted" [ "$(metric \
        'zkr_exporter_http_closed_total{reason="evicted"}')" -gt 0 ]
}

# Over --max-connections, a newcomer closes a connection of the address
# that holds the most: a slow client alone on its address (the oldest
# connection, and heard from) outlives a flood from eight others, each
# under --per-ip-limit, that fills the total again and again.
test_total_limit_spares_lone_address() {
    local h out
    exporter_start -- --max-connections 16 --per-ip-limit 8 \
        --header-timeout 60 /exp/slow
    rm -f "$WORK/lone.out"
    bg python3 "$top_srcdir/tests/cli/slowloris.py" "$EXP" 6 1 \
        127.0.0.1=1 >"$WORK/lone.out"
    h=$!
    expect "slowloris not ready" wait_for 10 lines_ge "$WORK/lone.out" 1 '^ready$'
    out=$(python3 "$top_srcdir/tests/cli/slowloris.py" "$EXP" 3 1 \
        127.0.0.{2..9}=8)
    echo "# flood: ${out##*$'\n'}"
    wait_status "$h"
    echo "# lone: $(tail -n 1 "$WORK/lone.out")"
    expect "lone connection closed: $(tail -n 1 "$WORK/lone.out")" \
        grep -q ' closed 0 ' "$WORK/lone.out"
    expect "no connection evicted" [ "$(metric \
        'zkr_exporter_http_closed_total{reason="evicted"}')" -gt 0 ]
}

# Below every connection limit, a connection that sends a header line
# every second (libmicrohttpd's own timeout, between two reads, never
# runs out) is closed once it has waited --header-timeout (1 s here) for
# a whole header: the helper, 5 s long, opens it again at each round, and
# it is closed again. A connection that got its answer has that long
# again for its next request (keep-alive), not the 10 s libmicrohttpd
# gives an idle one.
test_header_timeout() {
    local out idle
    exporter_start -- --header-timeout 1 /exp/slow
    out=$(python3 "$top_srcdir/tests/cli/slowloris.py" "$EXP" 5 1 \
        127.0.0.1=1)
    out=${out##*$'\n'} # its counts
    echo "# slowloris: $out"
    expect "slow connection not closed twice: $out" \
        [ "$(echo "$out" | awk '{ for (i = 1; i < NF; i++)
            if ($i == "closed") print $(i + 1) }')" -ge 2 ]
    expect "closings not counted" [ "$(metric \
        'zkr_exporter_http_closed_total{reason="header_timeout"}')" -ge 2 ]
    idle=$(python3 - "$EXP" <<'EOF'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(65536)
head, body = got.split(b"\r\n\r\n", 1)
size = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
        if l.lower().startswith(b"content-length:")][0]
while len(body) < size:
    body += s.recv(65536)
t = time.monotonic()
while s.recv(65536):
    pass
print("%.1f" % (time.monotonic() - t))
EOF
)
    echo "# kept-alive connection closed after ${idle:-?} s"
    expect "kept-alive connection closed after ${idle:-?} s" awk -v i="$idle" \
        -v m="$(scaled 3)" 'BEGIN { exit !(i != "" && i + 0 >= 0.5 && i + 0 <= 1 + m) }'
}

# A client that pipelines requests and does not read the responses holds
# connections being served (libmicrohttpd drops one only after 10 s
# without progress, and a client that reads a little now and then never
# gets there): with the total filled by such connections from four
# addresses, a scrape from a fifth must still be served, closing one of
# them (zkr(1): a newcomer closes a connection of the address holding the
# most). The scrapes end well within those 10 s.
test_slow_reader_fills_total() {
    local h code n bad=0
    exporter_start -- --max-connections 8 --per-ip-limit 2 /exp/slow
    rm -f "$WORK/slowread.out"
    cat >"$WORK/slowread.py" <<'EOF2'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 400
held = []
for i in range(8):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind(("127.0.0.%d" % (2 + i // 2), 0))
    s.settimeout(5)
    s.connect((host, int(port)))
    s.sendall(req)
    held.append(s)
print("ready", flush=True)
time.sleep(9)
EOF2
    bg python3 "$WORK/slowread.py" "$EXP" >"$WORK/slowread.out"
    h=$!
    expect "slow reader not ready" wait_for 10 lines_ge "$WORK/slowread.out" 1 '^ready$'
    sleep 1 # the exporter fills the sockets and stalls
    for n in 1 2 3; do
        code=$(curl -sS --interface 127.0.0.1 --max-time 2 -o /dev/null \
            -w '%{http_code}' "http://$EXP/metrics" 2>"$WORK/slowread.err") ||
            code="$code curl exit $?"
        [ "$code" = 200 ] || {
            bad=$((bad + 1))
            fail "scrape $n: $code $(cat "$WORK/slowread.err")"
        }
    done
    wait_status "$h"
    echo "# $bad of 3 scrapes failed"
    expect "no connection evicted" [ "$(metric \
        'zkr_exporter_http_closed_total{reason="evicted"}')" -gt 0 ]
}

# The limits' options: listed by --help; out of range, or more
# connections than the open-files hard limit allows (2 N + 64), a usage
# error (exit 64) before any session is opened.
test_http_options() {
    local out rc opt
    out=$("$ZKR" exporter --help) || fail "--help exited $?"
    for opt in --max-connections --per-ip-limit --header-timeout; do
        expect "--help does not list $opt" grep -q -- "$opt\b" <<<"$out"
    done
    # Its exit statuses (zkr(1)), each on a line of its own.
    expect "--help lists no exit status" grep -q '^Exit status' <<<"$out"
    for opt in 0 64 69 71; do
        expect "--help does not list exit status $opt" \
            grep -Eq "^ +$opt +[a-z]" <<<"$out"
    done
    for opt in "--max-connections 0" "--max-connections 100001" \
        "--per-ip-limit 0" "--per-ip-limit 129" \
        "--max-connections 8 --per-ip-limit 9" "--header-timeout 0.05" \
        "--header-timeout 3601" "--header-timeout x"; do
        rc=0
        # shellcheck disable=SC2086 # an option and its value
        "$ZKR" -s 127.0.0.1:1 exporter $opt /exp/opt 2>"$WORK/err" || rc=$?
        expect "$opt: exit $rc ($(cat "$WORK/err"))" [ "$rc" -eq 64 ]
    done
    rc=0
    (ulimit -n 256 && "$ZKR" -s 127.0.0.1:1 exporter --max-connections 100 \
        /exp/opt) 2>"$WORK/err" || rc=$?
    expect "over the open-files limit: exit $rc ($(cat "$WORK/err"))" \
        [ "$rc" -eq 64 ]
}

# --listen takes a host name, an IPv6 address in brackets, and :PORT
# (every address, IPv4 and IPv6); a malformed address is a usage error
# (64), and a host that does not exist too.
test_listen_forms() {
    local port form url rc
    for form in localhost '[::1]' ''; do
        port=$(zkr__free_port)
        bg "$ZKR" exporter --listen "$form:$port" /exp/listen \
            2>>"$WORK/exporter.log"
        EXP_PID=$!
        case $form in
        localhost) url=http://localhost:$port/metrics ;;
        *) url=http://${form:-[::1]}:$port/metrics ;;
        esac
        expect "--listen $form:$port: not served at $url" \
            wait_for 10 curl -gsf -o /dev/null "$url"
        expect "--listen $form:$port: zkr_up not 1" \
            wait_for 10 eval "curl -gsf '$url' | grep -qx 'zkr_up 1'"
        if [ -z "$form" ]; then
            expect "--listen :$port: not served over IPv4" \
                curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"
        fi
        kill "$EXP_PID"
        wait_status "$EXP_PID"
        expect "--listen $form:$port: exit $st after SIGTERM" [ "$st" -eq 0 ]
    done
    for form in ::1:9799 '[::1' '[::1]' :0 :65536 host 127.0.0.1: \
        nosuchhost.invalid:9799; do
        rc=0
        "$ZKR" -s 127.0.0.1:1 exporter --listen "$form" /exp/listen \
            2>"$WORK/err" || rc=$?
        expect "--listen $form: exit $rc ($(cat "$WORK/err"))" [ "$rc" -eq 64 ]
    done
}

# ZooKeeper down when the exporter starts: it serves at once, with zkr_up
# 0 and the reason, and Prometheus scrapes that; once ZooKeeper is up,
# zkr_up is 1 and the paths are read.
test_start_while_zookeeper_down() {
    kill -KILL "$ZKR_SERVER_PID"
    wait "$ZKR_SERVER_PID" 2>/dev/null
    exporter_start --session-timeout 2000 -- /exp/down
    expect "prometheus did not start" prom_start
    expect "prometheus did not scrape zkr_up 0" wait_for 20 prom_eq zkr_up 0
    # Nothing listens on the server's port: once an attempt has ended the
    # reason is "refused" (before that, "connecting").
    expect "no reason for zkr_up 0, or not refused: $(prom zkr_exporter_down_info)" \
        wait_for 20 prom_eq 'zkr_exporter_down_info{reason="refused"}' 1
    expect "a path said current while down" \
        prom_eq 'zkr_path_up{path="/exp/down"}' 0
    expect "zookeeper did not start again" zkr_server_restart
    expect "prometheus did not scrape zkr_up 1" wait_for 30 prom_eq zkr_up 1
    expect "the path not read once up" \
        wait_for 20 prom_eq 'zkr_path_up{path="/exp/down"}' 1
    expect "a reason left once up" \
        [ -z "$(prom 'zkr_exporter_down_info')" ]
    expect "exporter died" alive "$EXP_PID"
}

# The alerting rules shipped in examples/monitoring: promtool checks them
# and runs their unit tests (each alert fires on the series that should
# trip it, not on a near miss), and every zkr_ metric they name is a
# family of a real scrape (a rename would leave a rule that never fires).
test_alert_rules() {
    local dir=$top_srcdir/examples/monitoring name
    expect "promtool check rules: $(promtool check rules \
        "$dir/zkr-alerts.yml" 2>&1)" \
        promtool check rules "$dir/zkr-alerts.yml"
    expect "promtool test rules: $(cd "$dir" && promtool test rules \
        zkr-alerts.test.yml 2>&1)" \
        eval "(cd '$dir' && promtool test rules zkr-alerts.test.yml)"
    exporter_start -- /exp/rules
    expect "no scrape" wait_for 10 eval "scrape >'$WORK/rules.txt'"
    while read -r name; do
        in_scrape "$name" "$WORK/rules.txt" ||
            fail "the rules name $name, not in a scrape"
    done < <(grep -o 'zkr_[a-z_]*' "$dir/zkr-alerts.yml" | sort -u)
}

# in_scrape NAME FILE: NAME is a family of the scrape in FILE, or a
# histogram's series (_bucket, _sum, _count).
in_scrape() {
    grep -q "^# TYPE $1 " "$2" ||
        grep -q "^# TYPE ${1%_*} histogram" "$2"
}

# The Grafana dashboard: valid JSON, every query valid PromQL (promtool
# checks them as recording rules, Grafana's variables given values), and
# every zkr_ or process_ metric it names a family of a real scrape (with
# --textfile-dir: the library's histograms come from there). The systemd
# unit passes systemd-analyze verify (the command pointed at this build),
# and its ExecStart, with the example environment file's variables, serves.
test_dashboard_and_unit() {
    local dir=$top_srcdir/examples/monitoring name port out rc=0
    local zk=$ZKR_SERVER
    expect "dashboard not JSON" jq -e '.panels | length > 0' \
        "$dir/zkr-dashboard.json"
    {
        echo 'groups: [{name: dashboard, rules: ['
        # shellcheck disable=SC2016 # Grafana's variables, not the shell's
        jq -r '.. | .expr? // empty' "$dir/zkr-dashboard.json" |
            sed -e 's/\$__rate_interval/1m/g' -e 's/\$job/zkr/g' \
                -e 's/\$instance/.*/g' -e 's/\$path/.*/g' |
            jq -cR '{record: "dashboard:query", expr: .}' | paste -sd, -
        echo ']}]'
    } >"$WORK/dash-rules.yml"
    out=$(promtool check rules "$WORK/dash-rules.yml" 2>&1) || rc=$?
    expect "dashboard queries ($rc): $out" [ "$rc" -eq 0 ]
    mkdir -p "$WORK/dash-tf"
    "$ZKR" lock --metrics-file "$WORK/dash-tf/job.prom" /exp/dash true
    exporter_start -- --textfile-dir "$WORK/dash-tf" /exp/dash
    expect "no scrape" wait_for 10 eval "scrape >'$WORK/dash.txt'"
    while read -r name; do
        in_scrape "$name" "$WORK/dash.txt" ||
            fail "the dashboard names $name, not in a scrape"
    done < <(jq -r '.. | .expr? // empty' "$dir/zkr-dashboard.json" |
        grep -o '\(zkr\|process\)_[a-z_]*' | sort -u)
    zkr_need systemd-analyze systemd
    sed "s|/usr/bin/zkr|$ZKR|" "$dir/zkr-exporter.service" \
        >"$WORK/zkr-exporter.service"
    out=$(systemd-analyze verify --man=no "$WORK/zkr-exporter.service" 2>&1)
    expect "systemd-analyze verify: $out" [ -z "$out" ]
    port=$(zkr__free_port)
    (
        # shellcheck source=/dev/null # the example environment file
        . "$dir/zkr-exporter.env"
        # shellcheck disable=SC2030 # the unit's environment, in its subshell
        ZKR_SERVER=$zk
        ZKR_EXPORTER_LISTEN=127.0.0.1:$port
        export ZKR_SERVER
        # shellcheck disable=SC2086 # as systemd splits $ZKR_EXPORTER_PATHS
        exec "$ZKR" exporter --listen "$ZKR_EXPORTER_LISTEN" \
            $ZKR_EXPORTER_PATHS
    ) 2>>"$WORK/exporter.log" &
    t_pids+=($!)
    expect "the unit's command does not serve both paths" wait_for 10 eval \
        "curl -sf http://127.0.0.1:$port/metrics | grep -c '^zkr_path_up{' |
            grep -qx 2"
}

# The Prometheus conventions (its naming and instrumentation guides): a
# zkr_build_info, the process_* families of the client libraries, a
# creation time as _timestamp_seconds, and the exporter's session once
# (the library's zkr_session_* families), not again as zkr_exporter_*.
test_metric_conventions() {
    local t0 v
    t0=$(date +%s)
    exporter_start -- /exp/conv
    bg "$ZKR" lock --id conv /exp/conv sleep 60
    expect "holder not reported" wait_for 10 metric_eq \
        'zkr_path_holder_info{path="/exp/conv",kind="lock",id="conv"}' 1
    scrape >"$WORK/conv.txt"
    expect "no zkr_build_info with the version" grep -qx \
        "zkr_build_info{version=\"$("$ZKR" --version | cut -d' ' -f2)\",library_version=\"[0-9.]*\"} 1" \
        "$WORK/conv.txt"
    for v in process_cpu_seconds_total process_resident_memory_bytes \
        process_virtual_memory_bytes process_open_fds process_max_fds \
        process_start_time_seconds; do
        expect "no $v" grep -q "^$v [0-9]" "$WORK/conv.txt"
    done
    v=$(metric process_start_time_seconds)
    expect "process_start_time_seconds $v, not the exporter's start ($t0)" \
        awk -v v="$v" -v t="$t0" 'BEGIN { exit !(v >= t - 2 && v <= t + 30) }'
    expect "process_open_fds not above 3" [ "$(metric process_open_fds)" -gt 3 ]
    expect "the exporter's session twice" \
        [ "$(grep -c '^zkr_exporter_session' "$WORK/conv.txt")" = 0 ]
    expect "zkr_session_state not served" grep -q \
        '^zkr_session_state{state="CONNECTED"} 1$' "$WORK/conv.txt"
    expect "a _since_seconds family" [ "$(grep -c _since_seconds "$WORK/conv.txt")" = 0 ]
    # The holder's node was created after t0 (the server runs on this
    # host's clock), before now.
    v=$(metric 'zkr_path_holder_created_timestamp_seconds{path="/exp/conv"}')
    expect "creation time $v, not between $t0 and now" awk -v v="$v" \
        -v t="$t0" -v n="$(date +%s)" 'BEGIN { exit !(v >= t && v <= n + 1) }'
}

# --prefix: the locks, semaphores, elections and work queues below a path
# are found and watched, at any depth, without naming them; a node whose children
# are not sequential (plain data) is not taken for one; a lock made later
# is found at a later walk (every 10 --refresh intervals, at least 1 s).
test_prefix_discovery() {
    local pids=() rc out
    # shellcheck disable=SC2031 # the test's server, not the unit's
    "$ZKQ" "$ZKR_SERVER" create /pfx >/dev/null 2>&1
    # shellcheck disable=SC2031
    "$ZKQ" "$ZKR_SERVER" create /pfx/plain >/dev/null 2>&1
    # shellcheck disable=SC2031
    "$ZKQ" "$ZKR_SERVER" create /pfx/plain/data >/dev/null 2>&1
    bg "$ZKR" lock --id l1 /pfx/a/lock1 sleep 60
    pids+=($!)
    bg "$ZKR" sem -c 2 --id s1 /pfx/sem sleep 60
    pids+=($!)
    bg "$ZKR" elect --id e1 /pfx/b/c/el sleep 60
    pids+=($!)
    expect "contenders not queued" wait_for 10 eval \
        "nodes_eq /pfx/a/lock1 1 && nodes_eq /pfx/sem 1 && nodes_eq /pfx/b/c/el 1"
    exporter_start -- --prefix /pfx
    expect "lock below the prefix not found" wait_for 10 metric_eq \
        'zkr_path_holder_info{path="/pfx/a/lock1",kind="lock",id="l1"}' 1
    expect "semaphore below the prefix not found" wait_for 10 metric_eq \
        'zkr_path_holders{path="/pfx/sem"}' 1
    expect "election below the prefix not found" wait_for 10 metric_eq \
        'zkr_path_leader_info{path="/pfx/b/c/el",kind="election",id="e1"}' 1
    expect "a plain node taken for a recipe" \
        [ "$(scrape | grep -c 'path="/pfx/plain')" = 0 ]
    # A work queue is found too, with its own families; its consumers'
    # line and buckets hold sequential nodes, and none is taken for a
    # lock. Two items put, one claimed by a consumer that runs, a second
    # consumer claims the other, a third waits in the line.
    "$ZKR" queue put /pfx/jobs <<<"job1" >/dev/null
    "$ZKR" queue put /pfx/jobs <<<"job2" >/dev/null
    bg "$ZKR" queue take /pfx/jobs sleep 60
    pids+=($!)
    bg "$ZKR" queue take /pfx/jobs sleep 60
    pids+=($!)
    bg "$ZKR" queue take /pfx/jobs sleep 60
    pids+=($!)
    bg "$ZKR" lock --id late /pfx/late sleep 60
    pids+=($!)
    expect "a lock made later not found" wait_for "$(scaled 10)" metric_eq \
        'zkr_path_holder_info{path="/pfx/late",kind="lock",id="late"}' 1
    expect "a work queue not found" wait_for "$(scaled 10)" metric_eq \
        'zkr_workq_items{path="/pfx/jobs"}' 2
    expect "the third consumer not seen waiting" wait_for "$(scaled 10)" \
        metric_eq 'zkr_workq_consumers_waiting{path="/pfx/jobs"}' 1
    expect "discoveries not 5" metric_eq zkr_exporter_discovered_paths_total 5
    expect "dead letters" metric_eq 'zkr_workq_dead_items{path="/pfx/jobs"}' 0
    v=$(metric 'zkr_workq_head_item_age_seconds{path="/pfx/jobs"}')
    expect "head item age '$v' not positive" \
        awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 3600) }'
    expect "a work queue's node taken for a recipe: $(scrape | grep -v zkr_workq_ | grep 'path="/pfx/jobs')" \
        [ "$(scrape | grep -E '^zkr_path_(queue_depth|holders|waiters|holder_info)' | grep -c 'path="/pfx/jobs')" = 0 ]
    # (The exporter's own session has a work queue handle now: its line
    # shows in the library's families, zkr_acquisitions_total and so on,
    # under PATH/consumers, docs/OBSERVABILITY.md.)
    expect "a node below a work queue taken for a recipe: $(scrape | grep '^zkr_path_.*path="/pfx/jobs/')" \
        [ "$(scrape | grep -c '^zkr_path_.*path="/pfx/jobs/')" = 0 ]
    rc=0
    scrape >"$WORK/wq-scrape.txt"
    out=$(promtool check metrics <"$WORK/wq-scrape.txt" 2>&1) || rc=$?
    expect "promtool check metrics ($rc): $out" [ "$rc" -eq 0 ] && [ -z "$out" ]
    # A work queue named on the command line is recognised as one.
    exporter_start -- /pfx/jobs
    expect "a work queue named not read as one" wait_for "$(scaled 10)" \
        metric_eq 'zkr_workq_items{path="/pfx/jobs"}' 2
    expect "a work queue named taken for a lock" \
        [ "$(scrape | grep -c '^zkr_path_holders{path="/pfx/jobs"')" = 0 ]
    kill "${pids[@]}" 2>/dev/null
    # Usage: a PATH or a --prefix wanted; an invalid prefix is refused.
    rc=0
    "$ZKR" -s 127.0.0.1:1 exporter 2>/dev/null || rc=$?
    expect "neither PATH nor --prefix: exit $rc" [ "$rc" -eq 64 ]
    rc=0
    "$ZKR" -s 127.0.0.1:1 exporter --prefix nope 2>/dev/null || rc=$?
    expect "--prefix nope: exit $rc" [ "$rc" -eq 64 ]
}

start_server
run_test test_prometheus_sees_queue
run_test test_promtool_and_escaping
run_test test_leader_touched_after_listing
run_test test_departure_and_arrival_during_listing
run_test test_refused_listing_backs_off
run_test test_thousands_of_waiters
run_test test_textfile_dir
run_test test_session_loss
run_test test_zookeeper_restart
run_test test_slowloris
run_test test_total_limit_spares_lone_address
run_test test_header_timeout
run_test test_slow_reader_fills_total
run_test test_http_options
run_test test_listen_forms
run_test test_start_while_zookeeper_down
run_test test_alert_rules
run_test test_metric_conventions
run_test test_dashboard_and_unit
run_test test_prefix_discovery
done_testing
