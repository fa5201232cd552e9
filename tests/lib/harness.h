/*
 * Test harness for zkr: a throwaway ZooKeeper server per test binary,
 * fault injection on that server (kill, restart, pause), session expiry
 * from outside, four-letter-word probes and helper-process management.
 *
 * The harness is for tests only and is not thread-safe: call it from the
 * test's main thread. Servers and helpers are started with
 * PR_SET_PDEATHSIG, which fires when the *thread* that forked them exits,
 * so fork them from a thread that outlives them (the main thread).
 *
 * Nothing outlives a test: servers still running at exit() are stopped by
 * an atexit handler; a test killed outright takes its servers with it
 * (PR_SET_PDEATHSIG), and the next zkt_server_start() removes the scratch
 * dirs whose owner process is gone.
 *
 * Build with -DTHREADED and link with -lzookeeper_mt -lpthread.
 *
 * Environment:
 *   ZKR_TEST_BUILDDIR  root of the build tree (set by `make check`).
 *   ZKT_KEEP_SERVER_DIR=1  keep the server's data dir and log on stop and
 *                      print its path (for debugging a failing test).
 *   JAVA               the java binary (default: java found in PATH).
 */
#ifndef ZKR_TESTS_HARNESS_H
#define ZKR_TESTS_HARNESS_H

#include <stdint.h>
#include <sys/types.h>
#include <zookeeper/zookeeper.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A standalone ZooKeeper server run from Debian's jars. */
typedef struct zkt_server zkt_server_t;

/**
 * Starts a standalone ZooKeeper server on 127.0.0.1 at a free port, with a
 * fresh data dir (under $TMPDIR or /tmp) and tickTime=200,
 * minSessionTimeout=1000, maxSessionTimeout=60000. The server runs in its
 * own process group and is SIGKILLed if the test process dies. Its
 * stdout/stderr (log4j at INFO) go to <dir>/server.log.
 *
 * Returns once "ruok" answers "imok" and a ZooKeeper C client handle has
 * connected (deadline 60 s). On success *out is set and 0 returned; on
 * failure *out is NULL, nothing is left running and -1 is returned.
 */
int zkt_server_start(zkt_server_t **out);

/** Connection string "127.0.0.1:PORT"; owned by the server object. */
const char *zkt_server_hosts(const zkt_server_t *s);

/** The server's client port. */
int zkt_server_port(const zkt_server_t *s);

/** PID of the server process, -1 while it is killed. */
pid_t zkt_server_pid(const zkt_server_t *s);

/** The server's scratch dir (holds zoo.cfg, data/ and server.log). */
const char *zkt_server_dir(const zkt_server_t *s);

/**
 * Stops the server (SIGCONT if paused, SIGKILL, waitpid), removes its data
 * dir and frees it. NULL is a harmless no-op.
 */
void zkt_server_stop(zkt_server_t *s);

/**
 * Kills the server (SIGKILL + waitpid) but keeps its data dir and port so
 * that zkt_server_restart() can bring the same ensemble state back.
 * Returns 0, or -1 if it was not running.
 */
int zkt_server_kill(zkt_server_t *s);

/**
 * Starts the server again on the same port and data dir (killing it first
 * if it is still running); sessions survive the restart if they do not
 * time out meanwhile. Waits until ready like zkt_server_start(), retrying
 * if the port is briefly unavailable. Returns 0 or -1.
 */
int zkt_server_restart(zkt_server_t *s);

/** Freezes the server with SIGSTOP. Returns 0 or -1. */
int zkt_server_pause(zkt_server_t *s);

/** Thaws a paused server with SIGCONT. Returns 0 or -1. */
int zkt_server_resume(zkt_server_t *s);

/**
 * Sends a four-letter word ("ruok", "srvr", "wchs", "wchc", "dump",
 * "cons", ...) and returns the whole reply, NUL-terminated, in memory the
 * caller must free(). NULL on failure or after 5 s.
 */
char *zkt_4lw(const zkt_server_t *s, const char *cmd);

/** Total watches as reported by "wchs", or -1 on error. */
long zkt_total_watches(const zkt_server_t *s);

/**
 * Expires a session from outside: opens a second handle with the same
 * client id, waits until it is connected (which takes the session over
 * from the victim's connection), then closes it, which ends the session.
 * The victim then sees ZOO_EXPIRED_SESSION_STATE when it reconnects.
 * Returns 0, or -1 if the second handle did not connect within timeout_ms.
 */
int zkt_expire_session(const char *hosts, const clientid_t *cid,
                       int timeout_ms);

/**
 * Opens a plain handle for test checks and waits until it is connected
 * (deadline 10 s). The first call lowers ZooKeeper's client logging to
 * ERROR. Returns the handle (close it with zookeeper_close) or NULL.
 */
zhandle_t *zkt_connect(const char *hosts, int session_timeout_ms);

/**
 * Waits until zh is connected. Returns 0, or -1 on timeout or if the
 * session expired or authentication failed.
 */
int zkt_wait_connected(zhandle_t *zh, int timeout_ms);

/**
 * ms times $ZKR_TEST_TIME_SCALE (a positive number, default 1): the one
 * knob that stretches the fault tests' waits and bounds on a slow machine
 * or under valgrind. Session timeouts are not scaled.
 */
int zkt_scaled_ms(int ms);

/**
 * The session timeout of a test whose promise holds only if the server is
 * back within it (a restart keeps the session, its locks and leaders): the
 * longest the harness's servers grant (maxSessionTimeout). A ZooKeeper
 * server's restart is a JVM start plus a snapshot load, seconds on a quiet
 * machine and far longer on a loaded one; the rule under test says nothing
 * of how fast the server comes back, so the test gives it all the time the
 * rule allows. Waits for what follows the restart derive from it too.
 */
#define ZKT_RESTART_SESSION_MS 60000

/** CLOCK_MONOTONIC in milliseconds. */
int64_t zkt_now_ms(void);

/** Sleeps for ms milliseconds (restarting after signals). */
void zkt_sleep_ms(int ms);

/**
 * Polls cond every 5 ms until it is true or timeout_ms has passed;
 * evaluates to 1 if cond became true, else 0. cond is evaluated once more
 * after the deadline, so a condition that turns true at the last moment
 * counts. (A GNU statement expression: gcc and clang.)
 */
#define ZKT_WAIT_UNTIL(cond, timeout_ms)                                       \
    __extension__({                                                            \
        int64_t zkt_wu_deadline_ = zkt_now_ms() + (timeout_ms);                \
        int zkt_wu_ok_;                                                        \
        while (!(zkt_wu_ok_ = !!(cond)) && zkt_now_ms() < zkt_wu_deadline_)    \
            zkt_sleep_ms(5);                                                   \
        zkt_wu_ok_;                                                            \
    })

/**
 * Spawns argv[0] (a path; fork + execv) with argv, stdout redirected to
 * out_fd if out_fd >= 0. The child gets its own process group, is
 * SIGKILLed if the test process dies, and inherits no descriptor above 2.
 * Returns the child's PID or -1.
 */
pid_t zkt_spawn(char *const argv[], int out_fd);

/**
 * waitpid() with a deadline (timeout_ms < 0 waits forever). Returns 0 and
 * fills *status (may be NULL), or -1 on timeout or error; the process is
 * not killed on timeout.
 */
int zkt_wait_pid(pid_t pid, int timeout_ms, int *status);

/**
 * Path of a program built in the build tree: $ZKR_TEST_BUILDDIR/rel, or
 * rel itself (relative to the cwd) if the variable is unset. The caller
 * frees the result; NULL only on allocation failure.
 */
char *zkt_build_path(const char *rel);

/**
 * Counts all descendants of path (children, grandchildren, ...), for "no
 * node left behind" checks. Returns the count, 0 if path does not exist,
 * -1 on any other error.
 */
int zkt_count_children(zhandle_t *zh, const char *path);

/**
 * Creates a fresh directory "$TMPDIR/<prefix>XXXXXX" (or under /tmp) and
 * returns its malloc'd path, or NULL.
 */
char *zkt_mkdtemp(const char *prefix);

/**
 * Removes path recursively (like rm -rf; does not follow symlinks).
 * Returns 0 (also if path does not exist) or -1.
 */
int zkt_rm_rf(const char *path);

/**
 * A fault proxy (tests/bin/zkr-proxy) between clients and a server, driven
 * from the test: see zkr-proxy.c for what each command does.
 */
typedef struct zkt_proxy zkt_proxy_t;

/**
 * Starts tests/bin/zkr-proxy forwarding to target_hosts ("HOST:PORT"), like
 * zkt_spawn() (own process group, SIGKILLed with the test), and waits
 * (10 s) until it listens. On success sets *out and returns 0; on failure
 * *out is NULL, nothing is left running and -1 is returned.
 */
int zkt_proxy_start(const char *target_hosts, zkt_proxy_t **out);

/** Connection string "127.0.0.1:PORT" of the proxy; owned by it. */
const char *zkt_proxy_hosts(const zkt_proxy_t *p);

/**
 * Sends one command line ("pass", "blackhole", "reset", "delay MS",
 * "drop-create-reply") and waits (10 s) until the proxy answers that it
 * has taken effect. Returns 0 on "ok", -1 on "error ..." or no answer.
 */
int zkt_proxy_cmd(zkt_proxy_t *p, const char *cmd);

/**
 * Stops the proxy (every connection it forwards is closed), reaps it and
 * frees p. NULL is a harmless no-op.
 */
void zkt_proxy_stop(zkt_proxy_t *p);

/** Most members of an ensemble. */
#define ZKT_ENSEMBLE_MAX 7

/**
 * An ensemble of ZooKeeper servers (QuorumPeerMain) on loopback, each with
 * its own client, quorum and election ports and data dir. Each member is a
 * zkt_server_t: kill, pause, resume, restart, 4lw and pid work on it as on
 * a standalone server (zkt_server_restart() returns once that member
 * serves, which needs a quorum of the others).
 */
typedef struct zkt_ensemble zkt_ensemble_t;

/**
 * Starts n members (tickTime=200, syncLimit=5: a follower that hears
 * nothing from the leader for 1 s drops out) and waits (60 s) until every
 * one serves clients. 0 and *out set, or -1 with nothing left running.
 */
int zkt_ensemble_start(int n, zkt_ensemble_t **out);

/** Options of zkt_ensemble_start_opts(); zero means the default. */
typedef struct zkt_ensemble_options {
    int tick_ms;    /**< tickTime (default 200) */
    int sync_limit; /**< syncLimit in ticks (default 5) */
    /** Nonzero: member i reaches member j's quorum (leader) and election
     * ports through fault proxies of its own (tests/bin/zkr-proxy), driven
     * with zkt_ensemble_link(); clients go direct. */
    int quorum_proxies;
} zkt_ensemble_options_t;

/**
 * zkt_ensemble_start() with options (NULL = defaults). With quorum proxies
 * a link between two members can be cut (blackhole), slowed (delay MS) or
 * healed (pass) while every member keeps serving its clients as long as
 * ZooKeeper lets it: a follower cut from its leader keeps answering reads
 * for syncLimit x tickTime.
 */
int zkt_ensemble_start_opts(int n, const zkt_ensemble_options_t *o,
                            zkt_ensemble_t **out);

/**
 * Sends a proxy command ("blackhole", "pass", "delay MS", "reset": see
 * zkt_proxy_cmd()) to both directions of the quorum and election links
 * between members i and j. 0, or -1 (no such link: started without quorum
 * proxies).
 */
int zkt_ensemble_link(zkt_ensemble_t *e, int i, int j, const char *cmd);

/** zkt_ensemble_link(e, i, j, cmd) for every other member j: with
 *  "blackhole" member i is cut from every other member's quorum port and
 *  they from its own (it keeps its clients). Election traffic is cut only
 *  partly: a member with a higher id answers a peer's election connection
 *  by connecting back to the address the peer announces (its real port),
 *  around the proxies; so an isolated leader may win the next elections
 *  again, and then nobody leads until the links heal. 0 or -1. */
int zkt_ensemble_isolate(zkt_ensemble_t *e, int i, const char *cmd);

/** Stops every member and frees e. NULL is a harmless no-op. */
void zkt_ensemble_stop(zkt_ensemble_t *e);

/** "127.0.0.1:P1,127.0.0.1:P2,..."; owned by e. */
const char *zkt_ensemble_hosts(const zkt_ensemble_t *e);

/** Number of members. */
int zkt_ensemble_size(const zkt_ensemble_t *e);

/** Member i (0-based), or NULL. Owned by e: do not stop it. */
zkt_server_t *zkt_ensemble_member(zkt_ensemble_t *e, int i);

/**
 * Index of the member whose "srvr" says "Mode: leader" (running, not
 * paused members only), or -1 if none does right now.
 */
int zkt_ensemble_leader(zkt_ensemble_t *e);

/** How many members are leader or follower right now (i.e. serving). */
int zkt_ensemble_serving(zkt_ensemble_t *e);

/** Prints to stderr each member's state ("srvr") and the end of its
 * log, under why: for a test that fails on the ensemble. */
void zkt_ensemble_dump(zkt_ensemble_t *e, const char *why);

#ifdef __cplusplus
}
#endif

#endif /* ZKR_TESTS_HARNESS_H */
