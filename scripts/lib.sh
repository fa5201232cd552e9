# shellcheck shell=bash
# Shared helpers for scripts/check, scripts/demo and .ci/run. Source it:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
#   zkr_install_deps [PKG...] install missing Debian packages (apt-get;
#                           default: ZKR_DEPS, what building and testing need)
#   zkr_build [ARGS...]     autoreconf if needed, ./configure ARGS, make -j2
#   zkr_server_start        start a throwaway ZooKeeper; exports ZKR_SERVER
#   zkr_server_restart      kill it and start it again (same port and data)
#   zkr_ensemble_start      a three-server loopback ensemble instead
#   zkr_server_stop         stop it (or them) and remove its scratch dir
#   zkr_prometheus_start TARGET DIR  a Prometheus scraping TARGET every 1 s
#   zkr_on_exit CMD         run CMD (eval'd) when the script exits
#   zkr_curator_cp          class path of Debian's Apache Curator, or ""
#
# CFLAGS, LDFLAGS and friends are taken from the environment by configure.

ZKR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ZKR_ROOT

# Every tool a test calls is here: a test that finds one missing fails
# naming its package (zkr_need, tests/cli/lib.sh; zkt_need, tests/lib/harness.h)
# instead of skipping. Audited against a fresh Debian 12 root
# (mmdebstrap --variant=apt; .ci/fresh-root).
ZKR_DEPS=(build-essential autoconf automake libtool pkg-config
    libzookeeper-mt-dev zookeeper default-jre-headless default-jdk-headless
    libcmocka-dev libcurator-recipes-java # test_cli_curator.sh: javac, Curator
    libsqlite3-dev libuv1-dev libjansson-dev libmicrohttpd-dev
    netcat-openbsd procps valgrind jq curl # curl, jq: test_cli_exporter.sh
    python3 python3-kazoo # test_cli_{tty,unix}.sh; test_delay's kazoo peer
    clang     # test_header_docs.sh: -Wdocumentation
    abigail-tools doxygen man-db spin # man: tests/abi/installcheck.sh
    systemd # systemd-analyze: test_cli_exporter.sh checks the example unit
    prometheus) # prometheus, promtool: tests/cli/test_cli_{metrics,exporter}.sh
# What scripts/package adds (the packages' Build-Depends come from
# debian/control).
# shellcheck disable=SC2034 # used by scripts/package
ZKR_PACKAGE_DEPS=(debhelper dpkg-dev lintian git)
# What scripts/lint (`make lint`) and `make compile_commands.json` add.
# shellcheck disable=SC2034 # used by scripts/lint and .ci/run
ZKR_LINT_DEPS=(clang-format shellcheck bear git)

# Prints the class path of Apache Curator and its dependencies as Debian
# installs them (libcurator-recipes-java); nothing when it is missing.
zkr_curator_cp() {
    local jar cp=""
    [ -r /usr/share/java/curator-recipes.jar ] || return 0
    for jar in curator-recipes curator-framework curator-client zookeeper \
        zookeeper-jute guava slf4j-api slf4j-nop netty-handler netty-common \
        netty-buffer netty-transport netty-codec netty-resolver \
        netty-transport-native-epoll netty-transport-native-unix-common \
        commons-io metrics-core; do
        if [ -r "/usr/share/java/$jar.jar" ]; then
            cp+=/usr/share/java/$jar.jar:
        fi
    done
    printf '%s\n' "${cp%:}"
}

zkr_log() {
    printf '%s: %s\n' "${0##*/}" "$*" >&2
}

zkr__as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    else
        sudo "$@"
    fi
}

zkr_install_deps() {
    local missing=() pkg status pkgs=("$@")
    if [ "$#" -eq 0 ]; then
        pkgs=("${ZKR_DEPS[@]}")
    fi
    for pkg in "${pkgs[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
        if [ "$status" != "install ok installed" ]; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    zkr_log "installing ${missing[*]}"
    zkr__as_root apt-get update -q
    zkr__as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Builds in the source tree. Re-runs configure every time (it is quick and
# picks up CFLAGS from the environment); if the flags changed since the
# last build, cleans first so that no object keeps the old flags.
zkr_build() {
    (
        cd "$ZKR_ROOT" || exit 1
        if [ ! -x configure ] || [ configure.ac -nt configure ] ||
            [ Makefile.am -nt configure ]; then
            autoreconf -fi || exit 1
        fi
        flags="CC=${CC-} CFLAGS=${CFLAGS-} CPPFLAGS=${CPPFLAGS-}"
        flags+=" LDFLAGS=${LDFLAGS-} LIBS=${LIBS-} ARGS=$*"
        old=""
        if [ -f .zkr-build-flags ]; then
            old=$(cat .zkr-build-flags)
        fi
        ./configure -q "$@" || exit 1
        if [ "$flags" != "$old" ]; then
            make -s clean >/dev/null || exit 1
            printf '%s\n' "$flags" > .zkr-build-flags || exit 1
        fi
        make -j2 || exit 1
    )
}

# ------------------------------------------------------------ exit hooks

ZKR__EXIT_CMDS=()

zkr__run_exit_cmds() {
    local i
    for ((i = ${#ZKR__EXIT_CMDS[@]} - 1; i >= 0; i--)); do
        eval "${ZKR__EXIT_CMDS[i]}" || true
    done
    ZKR__EXIT_CMDS=()
}

zkr__trap_exit() {
    local rc=$?
    trap - EXIT
    zkr__run_exit_cmds
    exit "$rc"
}

zkr__trap_signal() {
    trap - EXIT INT TERM HUP
    zkr__run_exit_cmds
    exit "$1"
}

# Registers CMD (a string, eval'd) to run when the script exits, is
# interrupted or is terminated; commands run in reverse order.
zkr_on_exit() {
    if [ "${#ZKR__EXIT_CMDS[@]}" -eq 0 ]; then
        trap zkr__trap_exit EXIT
        trap 'zkr__trap_signal 130' INT
        trap 'zkr__trap_signal 143' TERM
        trap 'zkr__trap_signal 129' HUP
    fi
    ZKR__EXIT_CMDS+=("$1")
}

# ------------------------------------------------------- ZooKeeper server

ZKR_SERVER_PID=""
ZKR_SERVER_DIR=""
ZKR_ENSEMBLE_PIDS=()
ZKR_ENSEMBLE_PORTS=()

# A command prefix that makes a child die with this shell, even if the
# shell is SIGKILLed: "${ZKR_PDEATH[@]}" prog args...
ZKR_PDEATH=()
if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
    ZKR_PDEATH=(setpriv --pdeathsig KILL --)
fi

# A port for a server to listen on, outside the kernel's ephemeral range:
# a port from that range (a bind to port 0) is free only until an outgoing
# connection takes it as its source port, as the many short connections
# of a test do while a server starts (tests/lib/harness.c, free_port).
# Drawn at random beside the range and checked with a bind.
zkr__free_port() {
    local lo=32768 hi=60999 a b port i
    if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
        read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
    fi
    if [ $((lo - 10000)) -ge $((65535 - hi)) ]; then
        a=10000 b=$((lo - 1))
    else
        a=$((hi + 1)) b=65535
    fi
    for i in $(seq 1 1000); do
        port=$((a + (RANDOM * 32768 + RANDOM) % (b - a + 1)))
        if command -v python3 >/dev/null 2>&1; then
            python3 -c 'import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$port" || continue
        elif nc -z 127.0.0.1 "$port" 2>/dev/null; then
            continue
        fi
        echo "$port"
        return 0
    done
    return 1
}

zkr__4lw() { # PORT WORD
    printf '%s' "$2" | nc -w 2 -q 1 127.0.0.1 "$1" 2>/dev/null || true
}

# Runs the server of config $1 (client port $2) in the background and
# waits until it answers ruok; ZKR_SERVER_PID is its PID. $3: the main
# class (default the standalone server), $4: its log's directory (default
# ZKR_SERVER_DIR).
zkr__server_launch() {
    local cfg=$1 port=$2 main=${3:-org.apache.zookeeper.server.ZooKeeperServerMain}
    local logdir=${4:-$ZKR_SERVER_DIR} cp java
    cp=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar
    if [ -r /usr/share/java/slf4j-log4j12.jar ] &&
        [ -r /usr/share/java/log4j-1.2.jar ]; then
        cp+=:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
    fi
    java=${JAVA:-java}
    "${ZKR_PDEATH[@]}" "$java" -Xmx256m -XX:+UseSerialGC \
        -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Djava.awt.headless=true \
        -Dzookeeper.root.logger=INFO,CONSOLE \
        -Dzookeeper.log.dir="$logdir" -cp "$cp" "$main" "$cfg" \
        </dev/null >>"$logdir/server.log" 2>&1 &
    ZKR_SERVER_PID=$!
    zkr__await "$ZKR_SERVER_PID" "$logdir/server.log" ZooKeeper \
        zkr__ruok "$port"
}

zkr__ruok() { [ "$(zkr__4lw "$1" ruok)" = imok ]; }

# zkr__await PID LOG NAME CMD...: polls CMD every 0.1 s until it succeeds;
# fails, showing the end of LOG, if PID dies or 60 s pass.
zkr__await() {
    local pid=$1 log=$2 name=$3 deadline=$((SECONDS + 60))
    shift 3
    until "$@"; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            zkr_log "$name did not start; end of its log:"
            tail -n 30 "$log" >&2 || true
            return 1
        fi
        sleep 0.1
    done
}

# Starts a standalone ZooKeeper like tests/lib/harness.c does: 127.0.0.1, a
# free port, a scratch dataDir, tickTime=200. Exports ZKR_SERVER and stops
# the server when the script exits. ZKR_SERVER_SYNC=yes makes it durable
# (forceSync=yes: every write fsynced; default no), and ZKR_SERVER_PARENT
# picks where its scratch dir goes (default $TMPDIR or /tmp; /dev/shm
# keeps the whole server in memory).
# Prints a server's zoo.cfg: DATADIR PORT INITLIMIT SYNCLIMIT (the harness's
# settings: tickTime=200, loopback, 4lw on, ZKR_SERVER_SYNC for forceSync).
zkr__zoo_cfg() {
    printf '%s\n' "tickTime=200" "initLimit=$3" "syncLimit=$4" \
        "dataDir=$1" "clientPort=$2" "clientPortAddress=127.0.0.1" \
        "minSessionTimeout=1000" "maxSessionTimeout=60000" \
        "maxClientCnxns=0" "admin.enableServer=false" \
        "4lw.commands.whitelist=*" "forceSync=${ZKR_SERVER_SYNC:-no}"
}

zkr_server_start() {
    local port cfg
    ZKR_SERVER_DIR=$(mktemp -d \
        "${ZKR_SERVER_PARENT:-${TMPDIR:-/tmp}}/zkr-server.XXXXXX")
    zkr_on_exit zkr_server_stop
    port=$(zkr__free_port)
    cfg=$ZKR_SERVER_DIR/zoo.cfg
    mkdir "$ZKR_SERVER_DIR/data"
    zkr__zoo_cfg "$ZKR_SERVER_DIR/data" "$port" 10 5 >"$cfg"
    zkr__server_launch "$cfg" "$port" || return 1
    ZKR_SERVER=127.0.0.1:$port
    export ZKR_SERVER
    zkr_log "ZooKeeper ready at $ZKR_SERVER (pid $ZKR_SERVER_PID)"
}

# Kills the server (SIGKILL) and starts it again on the same port with the
# same data: sessions survive if it is back within their timeout.
zkr_server_restart() {
    [ -n "$ZKR_SERVER_PID" ] || return 1
    kill -KILL "$ZKR_SERVER_PID" 2>/dev/null || true
    wait "$ZKR_SERVER_PID" 2>/dev/null || true
    zkr__server_launch "$ZKR_SERVER_DIR/zoo.cfg" "${ZKR_SERVER##*:}"
}

# Starts a loopback ensemble of three servers (QuorumPeerMain), configured
# as zkr_server_start's (tickTime=200; ZKR_SERVER_SYNC, ZKR_SERVER_PARENT),
# and waits until each serves (a leader or a follower). ZKR_SERVER lists
# all three: every client picks one at random, so a run's sessions spread
# over the leader and the followers. ZKR_ENSEMBLE_PIDS holds their PIDs,
# ZKR_ENSEMBLE_PORTS their client ports; zkr_server_stop stops them all.
zkr_ensemble_start() {
    local i dir peers="" hosts=""
    ZKR_SERVER_DIR=$(mktemp -d \
        "${ZKR_SERVER_PARENT:-${TMPDIR:-/tmp}}/zkr-ensemble.XXXXXX")
    zkr_on_exit zkr_server_stop
    ZKR_ENSEMBLE_PORTS=()
    ZKR_ENSEMBLE_PIDS=()
    for i in 1 2 3; do
        ZKR_ENSEMBLE_PORTS+=("$(zkr__free_port)")
        peers+="server.$i=127.0.0.1:$(zkr__free_port):$(zkr__free_port)"$'\n'
    done
    for i in 1 2 3; do
        dir=$ZKR_SERVER_DIR/s$i
        mkdir -p "$dir/data"
        echo "$i" >"$dir/data/myid"
        { zkr__zoo_cfg "$dir/data" "${ZKR_ENSEMBLE_PORTS[i - 1]}" 50 10 &&
            printf '%s' "$peers"; } >"$dir/zoo.cfg"
        zkr__server_launch "$dir/zoo.cfg" "${ZKR_ENSEMBLE_PORTS[i - 1]}" \
            org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir" ||
            return 1
        ZKR_ENSEMBLE_PIDS+=("$ZKR_SERVER_PID")
        hosts+=${hosts:+,}127.0.0.1:${ZKR_ENSEMBLE_PORTS[i - 1]}
    done
    ZKR_SERVER_PID=""
    for i in 0 1 2; do
        zkr__await "${ZKR_ENSEMBLE_PIDS[i]}" \
            "$ZKR_SERVER_DIR/s$((i + 1))/server.log" \
            "ZooKeeper (ensemble member $((i + 1)))" \
            zkr__serving "${ZKR_ENSEMBLE_PORTS[i]}" || return 1
    done
    ZKR_SERVER=$hosts
    export ZKR_SERVER
    zkr_log "ZooKeeper ensemble ready at $ZKR_SERVER (the leader's port:" \
        "$(zkr_ensemble_leader_port))"
}

# Serving: a leader or a follower (srvr prints its mode).
zkr__serving() { zkr__4lw "$1" srvr | grep -qE '^Mode: (leader|follower)'; }

# The client port of the ensemble's leader.
zkr_ensemble_leader_port() {
    local p
    for p in "${ZKR_ENSEMBLE_PORTS[@]}"; do
        if zkr__4lw "$p" srvr | grep -q '^Mode: leader'; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

zkr_server_stop() {
    local pid
    for pid in "${ZKR_ENSEMBLE_PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    ZKR_ENSEMBLE_PIDS=()
    if [ -n "$ZKR_SERVER_PID" ]; then
        kill -KILL "$ZKR_SERVER_PID" 2>/dev/null || true
        wait "$ZKR_SERVER_PID" 2>/dev/null || true
        ZKR_SERVER_PID=""
    fi
    if [ -n "$ZKR_SERVER_DIR" ]; then
        rm -rf "$ZKR_SERVER_DIR"
        ZKR_SERVER_DIR=""
    fi
    unset ZKR_SERVER
}

# Starts Prometheus (Debian's prometheus) on a free loopback port, scraping
# TARGET (HOST:PORT, /metrics) every second, with its config, storage and
# log in DIR; waits until it is ready. ZKR_PROM is its address,
# ZKR_PROM_PID its PID (set even when it fails to become ready: the caller
# kills it).
zkr_prometheus_start() {
    local target=$1 dir=$2
    ZKR_PROM=127.0.0.1:$(zkr__free_port)
    mkdir -p "$dir"
    printf '%s\n' "global:" "  scrape_interval: 1s" "  scrape_timeout: 1s" \
        "scrape_configs:" "  - job_name: zkr" "    static_configs:" \
        "      - targets: ['$target']" > "$dir/prometheus.yml"
    "${ZKR_PDEATH[@]}" prometheus --config.file="$dir/prometheus.yml" \
        --storage.tsdb.path="$dir/data" --web.listen-address="$ZKR_PROM" \
        --log.level=warn 2>>"$dir/prometheus.log" &
    ZKR_PROM_PID=$!
    zkr__await "$ZKR_PROM_PID" "$dir/prometheus.log" Prometheus \
        curl -sf "http://$ZKR_PROM/-/ready" -o /dev/null
}

# Prints the logs of the tests that failed in the last make check.
print_failed_logs() {
    local trs log
    find tests -name '*.trs' -print | sort | while read -r trs; do
        if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
            log=${trs%.trs}.log
            echo "===================== $log"
            cat "$log" 2>/dev/null || echo "(no log)"
        fi
    done
    # Last, what failed and why (a tool that keeps only the output's
    # tail, such as fresh-root, still shows it): each failed test's
    # "not ok" line and the diagnostics before it.
    echo "===================== failed tests, with their last diagnostics"
    find tests -name '*.trs' -print | sort | while read -r trs; do
        if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
            grep -B6 -E '^not ok' "${trs%.trs}.log" 2>/dev/null |
                grep -vE '^(PASS|ok) ' || true
        fi
    done
}
