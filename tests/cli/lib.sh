# shellcheck shell=bash
# shellcheck disable=SC2034 # variables (ZKR, st, PROXY_HOSTS...) are for the tests that source this
# Shell-level tests of the zkr command: a TAP producer, a throwaway
# ZooKeeper server (scripts/lib.sh), the fault proxy, and process helpers.
# Sourced by tests/cli/test_*.sh, which `make check` runs with the TAP
# driver; each test is a function run by run_test.
#
# ZKR_TEST_SCALE multiplies every wait (default 1; raise it on slow
# machines).
set -u

top_srcdir=$(cd "${srcdir:-.}" && pwd)
builddir=${ZKR_TEST_BUILDDIR:-$PWD}
# shellcheck source=../../scripts/lib.sh
. "$top_srcdir/scripts/lib.sh"

ZKR=$builddir/zkr
ZKQ=$builddir/tests/bin/zkq
PROXY=$builddir/tests/bin/zkr-proxy
# zk_count hides zkq's errors (a missing path counts 0 nodes): a zkq that
# is not built would make every node count pass.
if [ ! -x "$ZKQ" ]; then
    echo "Bail out! $ZKQ is not built (make check builds it)"
    exit 1
fi
# zkr_need TOOL PACKAGE: a test file that needs TOOL bails out, naming the
# Debian package that provides it (scripts/check installs it); never a skip.
zkr_need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "Bail out! $1 is missing: install the Debian package $2" \
            "(scripts/check installs it)"
        exit 99
    fi
}

# curator_peer FILE.java: compiles a Curator peer (tests/cli/FILE.java)
# into $WORK/classes and sets CP to its class path with Curator's jars;
# bails out, naming the Debian package, when javac or Curator is missing.
curator_peer() {
    zkr_need javac default-jdk-headless
    CP=$(zkr_curator_cp)
    if [ -z "$CP" ]; then
        echo "Bail out! Apache Curator is missing: install the Debian package" \
            "libcurator-recipes-java (scripts/check installs it)"
        exit 99
    fi
    mkdir -p "$WORK/classes"
    if ! javac -nowarn -d "$WORK/classes" -cp "$CP" \
        "$top_srcdir/tests/cli/$1" 2>"$WORK/javac.log"; then
        echo "Bail out! $1 does not compile"
        sed 's/^/# /' "$WORK/javac.log"
        exit 99
    fi
    CP=$WORK/classes:$CP
}

# kazoo_peer: sets PY to Debian's python3, which has kazoo (the kazoo
# peers run with it); bails out, naming the package, when kazoo is missing.
kazoo_peer() {
    PY=/usr/bin/python3
    if ! "$PY" -c 'import kazoo' 2>/dev/null; then
        echo "Bail out! kazoo is missing: install the Debian package" \
            "python3-kazoo (scripts/check installs it)"
        exit 99
    fi
}

SCALE=${ZKR_TEST_SCALE:-1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zkr-cli.XXXXXX")
zkr_on_exit "rm -rf '$WORK'"

t_num=0
t_failed=0
t_errors=()
t_pids=()

now_ms() { date +%s%3N; }

# scaled SECONDS: prints SECONDS * ZKR_TEST_SCALE
scaled() { awk -v s="$1" -v k="$SCALE" 'BEGIN { print s * k }'; }

# fail MESSAGE: records a failed expectation of the current test.
fail() { t_errors+=("$1"); }

# expect MESSAGE CMD...: runs CMD; a non-zero status is a failure.
expect() {
    local msg=$1
    shift
    "$@" || fail "$msg"
}

# wait_for SECONDS CMD...: polls CMD every 50 ms until it succeeds.
wait_for() {
    local deadline
    deadline=$(($(now_ms) + $(awk -v s="$1" -v k="$SCALE" \
        'BEGIN { printf "%d", s * k * 1000 }')))
    shift
    until "$@"; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# bg CMD...: starts CMD in the background (dies with this shell) and
# records its PID in $! and for cleanup.
bg() {
    "${ZKR_PDEATH[@]}" "$@" &
    t_pids+=($!)
}

# bg_job CMD...: bg, but CMD gets a process group of its own (set -m), as
# an interactive shell's job does: its parent (this shell) is in another
# group of the same session, so the group is not orphaned and job-control
# stops (SIGTSTP) apply to it, wherever the suite runs (a terminal, CI with
# none, a service).
bg_job() {
    set -m
    bg "$@"
    set +m
}

# wait_status PID: waits for PID (a child of this shell: do not call it
# in a subshell) and sets $st to its exit status.
wait_status() {
    st=0
    wait "$1" || st=$?
}

alive() { kill -0 "$1" 2>/dev/null; }
dead() { ! kill -0 "$1" 2>/dev/null; }

cleanup_procs() {
    local p
    for p in "${t_pids[@]}"; do
        kill -CONT "$p" 2>/dev/null || true
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    t_pids=()
}

# run_test NAME: runs the function NAME and prints its TAP line; with
# ZKR_TEST_FILTER set (a glob, as the C tests take it), only a NAME that
# matches it runs.
run_test() {
    local name=$1 e
    # shellcheck disable=SC2053 # the filter is a glob
    if [ -n "${ZKR_TEST_FILTER:-}" ] && [[ $name != $ZKR_TEST_FILTER ]]; then
        return 0
    fi
    t_errors=()
    t_num=$((t_num + 1))
    echo "# $name"
    "$name"
    cleanup_procs
    if [ "${#t_errors[@]}" -eq 0 ]; then
        echo "ok $t_num - $name"
    else
        echo "not ok $t_num - $name"
        for e in "${t_errors[@]}"; do
            echo "# $e"
        done
        t_failed=1
    fi
}

done_testing() {
    echo "1..$t_num"
    exit "$t_failed"
}

# Starts the server (ZKR_SERVER is exported) or bails out.
start_server() {
    if ! zkr_server_start >/dev/null 2>"$WORK/server-start.log"; then
        echo "Bail out! ZooKeeper did not start"
        cat "$WORK/server-start.log" | sed 's/^/# /'
        exit 99
    fi
}

# Fault proxy in front of the server: PROXY_HOSTS is its address;
# proxy_cmd WORD... sends a command and waits for "ok".
proxy_start() {
    coproc PROXY_CO { exec "${ZKR_PDEATH[@]}" "$PROXY" "$ZKR_SERVER" 2>"$WORK/proxy.log"; }
    t_pids+=("$PROXY_CO_PID")
    local line
    read -r -t 10 line <&"${PROXY_CO[0]}" || return 1
    PROXY_HOSTS=127.0.0.1:${line#port }
}

proxy_cmd() {
    local line
    echo "$*" >&"${PROXY_CO[1]}"
    read -r -t 10 line <&"${PROXY_CO[0]}" && [ "$line" = ok ]
}

# Children of a path, sorted by name.
zk_ls() { "$ZKQ" "$ZKR_SERVER" ls "$1"; }
zk_count() { zk_ls "$1" 2>/dev/null | grep -c . || true; }

# Predicates for wait_for (re-evaluated at each poll).
nodes_eq() { [ "$(zk_count "$1")" -eq "$2" ]; }
lines_ge() {
    local n
    n=$(grep -c "${3:-.}" "$1" 2>/dev/null)
    [ "${n:-0}" -ge "$2" ]
}
