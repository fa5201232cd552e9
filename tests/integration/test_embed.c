/* zkr as a dependency (issue 14): what a program that links zkr relies on.
 * Logging: a session with default options prints nothing on a healthy
 * connection, even with the client's process-wide level at INFO (its
 * default); a session's messages, its client's included, go to its own
 * callback only; a LOST and a refused connection are reported.
 * fork(): the child frees inherited handles without the network and
 * without hanging, and the parent's lock is untouched; descriptors zkr
 * creates are close-on-exec. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "server_test.h"

enum { T = 4000 };

/* ------------------------------------------------ standard error capture */

static int saved_stderr = -1;
static char capture_path[] = "/tmp/zkr-embed-XXXXXX";

static void capture_begin(void)
{
    int fd = mkstemp(capture_path);

    assert_true(fd >= 0);
    fflush(stderr);
    saved_stderr = dup(2);
    assert_true(saved_stderr >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
}

/* Restores standard error; returns what was written meanwhile (free it). */
static char *capture_end(void)
{
    FILE *f;
    char *text = calloc(1, 65536);
    size_t n;

    fflush(stderr);
    assert_int_equal(dup2(saved_stderr, 2), 2);
    close(saved_stderr);
    f = fopen(capture_path, "r");
    assert_non_null(f);
    n = fread(text, 1, 65535, f);
    text[n] = '\0';
    fclose(f);
    unlink(capture_path);
    strcpy(capture_path, "/tmp/zkr-embed-XXXXXX");
    return text;
}

/* ---------------------------------------------------------- a log sink */

struct sink {
    pthread_mutex_t mu;
    int n;
    char text[64][512];
    zkr_log_level_t level[64];
    zkr_session_t *session[64];
    int count[ZKR_LOG_DEBUG + 1]; /* every message, by level */
};

static void sink_fn(zkr_session_t *s, zkr_log_level_t level,
                    const char *message, void *data)
{
    struct sink *k = data;

    pthread_mutex_lock(&k->mu);
    k->count[level]++;
    if (k->n < 64) {
        snprintf(k->text[k->n], sizeof(k->text[0]), "%s", message);
        k->level[k->n] = level;
        k->session[k->n] = s;
        k->n++;
    }
    pthread_mutex_unlock(&k->mu);
}

static void sink_init(struct sink *k)
{
    memset(k, 0, sizeof(*k));
    pthread_mutex_init(&k->mu, NULL);
}

/* Index of the first message containing `what` at `level`, or -1. */
static int sink_find(struct sink *k, zkr_log_level_t level, const char *what)
{
    int found = -1;

    pthread_mutex_lock(&k->mu);
    for (int i = 0; i < k->n && found < 0; i++)
        if (k->level[i] == level && strstr(k->text[i], what) != NULL)
            found = i;
    pthread_mutex_unlock(&k->mu);
    return found;
}

static zkr_session_t *open_logged(const char *hosts, struct sink *k, int level)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    o.log_fn = sink_fn;
    o.log_data = k;
    o.log_level = level;
    assert_int_equal(zkr_session_open(&s, hosts, T, &o), 0);
    return s;
}

/* ---------------------------------------------------------------- tests */

/* Default options: a full lock cycle prints nothing, although the client
 * (process-wide level INFO, its default) has plenty to say. */
static void test_default_session_is_quiet(void **state)
{
    zkr_session_t *s;
    zkr_lock_t *l;
    char *err;

    (void)state;
    zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
    capture_begin();
    s = open_session(T);
    l = new_lock(s, "/embed/quiet", "q");
    assert_int_equal(zkr_lock_acquire(l, 10000), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
    err = capture_end();
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    if (err[0] != '\0')
        fprintf(stderr, "# printed:\n%s", err);
    assert_string_equal(err, "");
    free(err);
}

/* Each session's messages go to its own callback: the client's (INFO at
 * level INFO) and zkr's own; the session id in them is that session's. */
static void test_log_callback_per_session(void **state)
{
    static struct sink a, b;
    zkr_session_t *sa, *sb;
    char ida[32], idb[32], *err;

    (void)state;
    sink_init(&a);
    sink_init(&b);
    zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
    capture_begin();
    sa = open_logged(zkt_server_hosts(server), &a, ZKR_LOG_INFO);
    sb = open_logged(zkt_server_hosts(server), &b, ZKR_LOG_INFO);
    snprintf(ida, sizeof(ida), "0x%llx",
             (unsigned long long)zkr_session_id(sa));
    snprintf(idb, sizeof(idb), "0x%llx",
             (unsigned long long)zkr_session_id(sb));
    assert_int_equal(zkr_session_free(sa), 0);
    assert_int_equal(zkr_session_free(sb), 0);
    err = capture_end();
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    assert_string_equal(err, "");
    free(err);
    /* zkr's own, and the client's (its session establishment line). */
    assert_true(sink_find(&a, ZKR_LOG_INFO, "connected: session") >= 0);
    assert_true(sink_find(&a, ZKR_LOG_INFO, "sessionId=") >= 0);
    assert_true(sink_find(&b, ZKR_LOG_INFO, "sessionId=") >= 0);
    for (int i = 0; i < a.n; i++) {
        size_t n = strlen(a.text[i]);
        assert_true(n > 0 && a.text[i][n - 1] != '\n'); /* one line each */
        assert_ptr_equal(a.session[i], sa);
        assert_null(strstr(a.text[i], idb));
    }
    for (int i = 0; i < b.n; i++) {
        assert_ptr_equal(b.session[i], sb);
        assert_null(strstr(b.text[i], ida));
    }
    /* Not the client's raw prefix ("time:pid(0xthread):ZOO_INFO@"). */
    assert_null(strstr(a.text[0], "ZOO_INFO@"));
}

/* At the default level: a LOST is a warning; INFO is not delivered. */
static void test_lost_is_logged(void **state)
{
    static struct sink k;
    zkr_session_t *s;

    (void)state;
    sink_init(&k);
    zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
    s = open_logged(zkt_server_hosts(server), &k, ZKR_LOG_DEFAULT);
    {
        char why[16] = "x";
        /* A healthy session: nothing went wrong. */
        assert_int_equal(zkr_session_last_error(s, why, sizeof(why)), 0);
        assert_string_equal(why, "");
        assert_int_equal(zkr_session_last_error(NULL, why, sizeof(why)), 0);
        assert_string_equal(why, "");
    }
    expire(s);
    assert_true(
        ZKT_WAIT_UNTIL(sink_find(&k, ZKR_LOG_WARN, "LOST") >= 0, 20000));
    assert_true(sink_find(&k, ZKR_LOG_WARN, "expired") >= 0);
    /* zkr_session_last_error() says why, as the log did. */
    {
        char why[512], cut[8];
        assert_true(zkr_session_last_error(s, why, sizeof(why)) > 0);
        assert_non_null(strstr(why, "LOST"));
        assert_non_null(strstr(why, "expired"));
        assert_int_equal(zkr_session_last_error(s, cut, sizeof(cut)),
                         strlen(why));
        assert_int_equal(strlen(cut), sizeof(cut) - 1);
        assert_int_equal(strncmp(cut, why, sizeof(cut) - 1), 0);
    }
    assert_int_equal(zkr_session_free(s), 0);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    for (int i = 0; i < k.n; i++)
        assert_true(k.level[i] <= ZKR_LOG_WARN);
}

/* A TCP socket bound to a free loopback port: its descriptor, the port in
 * *port. */
static int loopback_socket(int *port)
{
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* "127.0.0.1:PORT" of a port nobody listens on: bound, noted, closed. */
static void refused_hosts(char *hosts, size_t len)
{
    int port;

    close(loopback_socket(&port));
    snprintf(hosts, len, "127.0.0.1:%d", port);
}

/* A refused connection names the host and the errno, as an error. */
static void test_connection_failure_names_host_and_errno(void **state)
{
    static struct sink k;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    char hosts[64];

    (void)state;
    refused_hosts(hosts, sizeof(hosts));
    sink_init(&k);
    o.log_fn = sink_fn;
    o.log_data = &k;
    o.connect_timeout_ms = 1500;
    assert_int_equal(zkr_session_open(&s, hosts, T, &o), ZKR_EREFUSED);
    assert_null(s);
    assert_true(sink_find(&k, ZKR_LOG_ERROR, hosts) >= 0);
    assert_true(sink_find(&k, ZKR_LOG_ERROR, "errno=111") >= 0);
}

/* zkr.h: no connection within the connect timeout is ZKR_EREFUSED when
 * every address then refuses a TCP connection (nothing listens there), and
 * ZKR_ETIMEDOUT when one accepts it but no session comes (a port that
 * listens and never speaks, as a hung server or the wrong service). */
static void test_refused_port_is_named(void **state)
{
    static struct sink k;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    char hosts[64], both[160];
    int fd, port;

    (void)state;
    sink_init(&k);
    o.log_fn = sink_fn;
    o.log_data = &k;
    o.connect_timeout_ms = 1500;
    refused_hosts(hosts, sizeof(hosts));
    assert_int_equal(zkr_session_open(&s, hosts, T, &o), ZKR_EREFUSED);
    assert_null(s);
    assert_true(sink_find(&k, ZKR_LOG_ERROR, "refused the connection") >= 0);
    assert_string_equal(zkr_errname(ZKR_EREFUSED), "ZKR_EREFUSED");
    assert_non_null(strstr(zkr_strerror(ZKR_EREFUSED), "refused"));
    assert_non_null(strstr(zkr_strerror(ZKR_EREFUSED), "listens"));

    /* A port that listens and never answers: a timeout, not a refusal. */
    fd = loopback_socket(&port);
    assert_int_equal(listen(fd, 16), 0);
    snprintf(both, sizeof(both), "127.0.0.1:%d", port);
    assert_int_equal(zkr_session_open(&s, both, T, &o), ZKR_ETIMEDOUT);
    assert_null(s);
    /* One refusing, one silent: not every server refused. */
    snprintf(both, sizeof(both), "%s,127.0.0.1:%d", hosts, port);
    assert_int_equal(zkr_session_open(&s, both, T, &o), ZKR_ETIMEDOUT);
    assert_null(s);
    close(fd);

    /* An IPv6 server is named as the list writes it, in brackets (a bare
     * "::1:PORT" does not say where the address ends). */
    if ((fd = socket(AF_INET6, SOCK_STREAM, 0)) >= 0) {
        struct sockaddr_in6 sa = {0};
        socklen_t sl = sizeof(sa);
        char want[96];

        sa.sin6_family = AF_INET6;
        sa.sin6_addr = in6addr_loopback;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &sl) == 0) {
            port = ntohs(sa.sin6_port);
            close(fd);
            snprintf(both, sizeof(both), "[::1]:%d", port);
            snprintf(want, sizeof(want), "[::1]:%d refused the connection",
                     port);
            assert_int_equal(zkr_session_open(&s, both, T, &o), ZKR_EREFUSED);
            assert_true(sink_find(&k, ZKR_LOG_ERROR, want) >= 0);
        } else {
            close(fd);
            print_message("no IPv6 loopback here: bracketed name not tried\n");
        }
    }
}

/* ----------------------------------------- repeated connection errors */

/* zkr.h: while the servers cannot be reached, the first error of the
 * outage is delivered at its level, the repeats at DEBUG, and a WARN
 * summary at most every LOG_SUMMARY_MS; reaching them again is one WARN
 * line. */
enum { LOG_SUMMARY_MS = 10000, OUTAGE_MS = 20000 };

/* A loopback port nobody listens on ("127.0.0.1:PORT" into hosts). */

static int sink_lines(struct sink *k)
{
    int n = 0;

    pthread_mutex_lock(&k->mu);
    for (int l = ZKR_LOG_ERROR; l <= ZKR_LOG_DEBUG; l++)
        n += k->count[l];
    pthread_mutex_unlock(&k->mu);
    return n;
}

/* An open against a refused port for OUTAGE_MS, at the default level: one
 * line for the failure, then summaries only; at DEBUG every attempt's
 * error is still there. */
static void test_refused_open_log_is_summarised(void **state)
{
    static struct sink k, d;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    char hosts[64];

    (void)state;
    refused_hosts(hosts, sizeof(hosts));
    sink_init(&k);
    zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
    o.log_fn = sink_fn;
    o.log_data = &k;
    o.connect_timeout_ms = OUTAGE_MS;
    assert_int_equal(zkr_session_open(&s, hosts, T, &o), ZKR_EREFUSED);
    /* The state change (the first error, naming host and errno), one
     * summary per interval, and the verdict (refused). */
    fprintf(stderr, "# %d lines at the default level in %d ms\n",
            sink_lines(&k), OUTAGE_MS);
    assert_true(sink_lines(&k) <= 2 + OUTAGE_MS / LOG_SUMMARY_MS);
    assert_int_equal(sink_find(&k, ZKR_LOG_ERROR, "errno=111"), 0);
    assert_true(sink_find(&k, ZKR_LOG_WARN, "still cannot reach") > 0);
    assert_true(sink_find(&k, ZKR_LOG_WARN, hosts) > 0);
    assert_true(sink_find(&k, ZKR_LOG_WARN, "last error:") > 0);
    assert_true(sink_find(&k, ZKR_LOG_WARN, "Connection refused") > 0);
    assert_int_equal(k.count[ZKR_LOG_DEBUG] + k.count[ZKR_LOG_INFO], 0);

    /* At DEBUG the repeated errors are delivered, each one. */
    sink_init(&d);
    o.log_data = &d;
    o.log_level = ZKR_LOG_DEBUG;
    o.connect_timeout_ms = 3000;
    assert_int_equal(zkr_session_open(&s, hosts, T, &o), ZKR_EREFUSED);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    assert_true(sink_find(&d, ZKR_LOG_ERROR, "errno=111") >= 0);
    assert_true(sink_find(&d, ZKR_LOG_DEBUG, "errno=111") > 0);
    assert_true(sink_find(&d, ZKR_LOG_DEBUG, "Delaying connection") >= 0);
}

static zkr_state_t state_of(zkr_session_t *s)
{
    return zkr_session_state(s);
}

/* The server is stopped for OUTAGE_MS under an open session, at the
 * default level: a line per state change (the connection's loss, LOST,
 * the servers reached again) and one summary per interval, however many
 * times the client retries meanwhile. */
static void test_outage_log_is_summarised(void **state)
{
    static struct sink k;
    zkr_session_t *s;
    int64_t down;
    int lines;

    (void)state;
    sink_init(&k);
    zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
    s = open_logged(zkt_server_hosts(server), &k, ZKR_LOG_DEFAULT);
    assert_int_equal(sink_lines(&k), 0); /* a healthy session: nothing */
    down = zkt_now_ms();
    /* The check handle would not outlive the outage either (its session
     * expires meanwhile): closed now, opened again once the server is. */
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    zkt_sleep_ms(OUTAGE_MS);
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    /* "reached again" is logged before the state turns CONNECTED. */
    assert_true(ZKT_WAIT_UNTIL(state_of(s) == ZKR_STATE_CONNECTED,
                               zkt_scaled_ms(60000)));
    down = zkt_now_ms() - down;
    lines = sink_lines(&k);
    assert_int_equal(zkr_session_free(s), 0);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    fprintf(stderr, "# %d lines at the default level in %lld ms\n", lines,
            (long long)down);
    for (int i = 0; i < k.n && i < 64; i++)
        fprintf(stderr, "#   %d %s\n", (int)k.level[i], k.text[i]);
    assert_true(lines <= 3 + down / LOG_SUMMARY_MS);
    assert_true(sink_find(&k, ZKR_LOG_WARN, "LOST") >= 0);
    assert_true(sink_find(&k, ZKR_LOG_WARN, "still cannot reach") >= 0);
    assert_true(sink_find(&k, ZKR_LOG_WARN, "reached") >= 0);
}

/* ------------------------------------------ errors that name their cause */

/* A server list entry that is not HOST:PORT: ZKR_EBADADDR, whose text says
 * what to check; a well-formed list still opens. */
static void test_bad_address_is_named(void **state)
{
    static const char *const bad[] = {"127.0.0.1",   "127.0.0.1:", ":2181",
                                      "127.0.0.1:0", "h:65536",    "h:12x",
                                      "h:1,h2",      "h:1,,h:2"};
    zkr_session_t *s = NULL;
    char hosts[128];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(zkr_session_open(&s, bad[i], T, NULL), ZKR_EBADADDR);
    assert_null(s);
    assert_non_null(strstr(zkr_strerror(ZKR_EBADADDR), "HOST:PORT"));
    assert_string_equal(zkr_errname(ZKR_EBADADDR), "ZKR_EBADADDR");
    snprintf(hosts, sizeof(hosts), "localhost:%d", zkt_server_port(server));
    assert_int_equal(zkr_session_open(&s, hosts, T, NULL), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A host name that does not resolve (".invalid" never does, RFC 6761):
 * ZKR_ERESOLVE, and the log names the host. */
static void test_unresolvable_host_is_named(void **state)
{
    static struct sink k;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    (void)state;
    sink_init(&k);
    o.log_fn = sink_fn;
    o.log_data = &k;
    assert_int_equal(zkr_session_open(&s, "no-such-host.invalid:2181", T, &o),
                     ZKR_ERESOLVE);
    assert_null(s);
    assert_true(sink_find(&k, ZKR_LOG_ERROR,
                          "cannot resolve no-such-host.invalid") >= 0);
    assert_non_null(strstr(zkr_strerror(ZKR_ERESOLVE), "DNS"));
    assert_string_equal(zkr_errname(ZKR_ERESOLVE), "ZKR_ERESOLVE");
}

/* A chroot the server does not have: ZKR_ENOCHROOT at open (not ZNONODE
 * at the first request), logged; once created, the same open works. */
static void test_missing_chroot_is_named(void **state)
{
    static struct sink k;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    (void)state;
    sink_init(&k);
    o.log_fn = sink_fn;
    o.log_data = &k;
    o.chroot = "/embed-no-chroot";
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o),
                     ZKR_ENOCHROOT);
    assert_null(s);
    assert_true(sink_find(&k, ZKR_LOG_ERROR, "/embed-no-chroot") >= 0);
    assert_non_null(strstr(zkr_strerror(ZKR_ENOCHROOT), "chroot"));
    assert_int_equal(zoo_create(raw, "/embed-no-chroot", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ACL causes (zkr.h: ZooKeeper's codes pass through; zkr_strerror() says
 * what to check): a directory whose ACL lets this session only read
 * gives ZNOAUTH at acquire, and an ACL of the creator's ids on a session
 * without credentials ZINVALIDACL; both texts name the ACL or the
 * credentials, and neither leaves a node. */
static void test_acl_errors_say_what_to_check(void **state)
{
    static struct ACL read_only[] = {
        {0x01 /* ZOO_PERM_READ */, {"world", "anyone"}}};
    struct ACL_vector ro = {1, read_only};
    zkr_session_t *s = open_session(T);
    zkr_lock_t *l = NULL;
    int rc;

    (void)state;
    assert_int_equal(zoo_create(raw, "/embed-ro", "", 0, &ro, 0, NULL, 0), ZOK);
    l = new_lock(s, "/embed-ro/lock", "a");
    rc = zkr_lock_acquire(l, 0);
    assert_int_equal(rc, ZNOAUTH);
    assert_non_null(strstr(zkr_strerror(rc), "ACL"));
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    zkr_lock_free(l);
    assert_int_equal(children("/embed-ro"), 0);

    assert_int_equal(
        zkr_lock_new(&l, s, "/embed-creator", "a", &ZOO_CREATOR_ALL_ACL), 0);
    rc = zkr_lock_acquire(l, 0);
    assert_int_equal(rc, ZINVALIDACL);
    assert_non_null(strstr(zkr_strerror(rc), "credentials"));
    zkr_lock_free(l);
    assert_int_equal(zoo_exists(raw, "/embed-creator", 0, NULL), ZNONODE);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Bad options are refused with ZBADARGUMENTS. */
static void test_bad_log_options(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    (void)state;
    o.log_level = 5;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o),
                     ZBADARGUMENTS);
    o.log_level = -2;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o),
                     ZBADARGUMENTS);
    o.log_level = 0;
    o.reserved_[3] = &o;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o),
                     ZBADARGUMENTS);
    assert_null(s);
}

/* ----------------------------------------------------------------- fork */

/* Ends a forked child: 0 if ok, else 3. The ZooKeeper client's buffers
 * stay behind with its threads, which the child does not have (zkr.h says
 * so): under valgrind (CI) an exit would report them as the child's leaks,
 * so the child ends by exec, which checks nothing. */
static void child_exit(int ok)
{
    execl("/bin/sh", "sh", "-c", ok ? "exit 0" : "exit 3", (char *)NULL);
    _exit(ok ? 0 : 3);
}

/* The child of a fork frees what it inherited, a held lock and its
 * session, at once: no hang (a watchdog kills it), no node deleted (the
 * parent still holds, and its session still lives). */
static void test_fork_child_frees_inherited_handles(void **state)
{
    zkr_session_t *s = open_session(T);
    zkr_lock_t *l = new_lock(s, "/embed/fork", "parent");
    int64_t token;
    pid_t pid;
    int st = -1;

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, 10000), 0);
    token = token_of(l);
    assert_true(zkr_lock_fd(l) >= 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok;
        signal(SIGALRM, SIG_DFL); /* a hang ends the child by SIGALRM */
        alarm(10);
        ok = zkr_lock_release(l) == ZKR_ECLOSED &&
             zkr_lock_state(l) == ZKR_LOCK_HELD;
        zkr_lock_free(l);
        child_exit(ok && zkr_session_free(s) == 0);
    }
    assert_int_equal(zkt_wait_pid(pid, zkt_scaled_ms(20000), &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* The parent still holds, with the same node, on a live session. */
    zkt_sleep_ms(500);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);
    assert_int_equal(token_of(l), token);
    assert_int_equal(children("/embed/fork"), 1);
    assert_true(zkr_session_valid_ms(s) > 0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(children("/embed/fork"), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A fork from inside a completion callback (the event thread's): the
 * child is the same as any forked child (zkr.h, "fork() and exec"): its
 * zkr_lock_release() returns ZKR_ECLOSED, its handles free at once, and
 * the parent keeps its grant. */
struct fork_cb {
    zkr_session_t *s;
    atomic_int rc;  /* the acquire's result, -1 until the callback ran */
    atomic_int pid; /* the child, forked in the callback */
};

static void fork_in_completion(int rc, zkr_lock_t *l, void *data)
{
    struct fork_cb *f = data;
    pid_t pid = fork();

    if (pid == 0) {
        int ok;
        signal(SIGALRM, SIG_DFL); /* a hang ends the child by SIGALRM */
        alarm(10);
        ok = zkr_lock_release(l) == ZKR_ECLOSED &&
             zkr_lock_state(l) == ZKR_LOCK_HELD;
        zkr_lock_free(l);
        child_exit(ok && zkr_session_free(f->s) == 0);
    }
    f->pid = pid;
    f->rc = rc;
}

static void test_fork_in_completion_callback(void **state)
{
    struct fork_cb f = {open_session(T), -1, 0};
    zkr_lock_t *l = new_lock(f.s, "/embed/forkcb", "parent");
    int st = -1;

    (void)state;
    assert_int_equal(zkr_lock_acquire_async(l, 10000, fork_in_completion, &f),
                     0);
    for (int i = 0; f.rc == -1 && i < zkt_scaled_ms(10000) / 10; i++)
        zkt_sleep_ms(10);
    assert_int_equal(f.rc, 0);
    assert_true(f.pid > 0);
    assert_int_equal(zkt_wait_pid(f.pid, zkt_scaled_ms(20000), &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);
    assert_int_equal(children("/embed/forkcb"), 1);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(children("/embed/forkcb"), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(f.s), 0);
}

static int fd_readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

static atomic_int fk_in_fn, fk_stopped, fk_quit;

static int fk_leader(zkr_election_t *e, void *data)
{
    struct pollfd p = {zkr_election_fd(e), POLLIN, 0};

    (void)data;
    fk_in_fn = 1;
    while (!fk_quit && !fk_stopped)
        fk_stopped = poll(&p, 1, 50) > 0;
    while (!fk_quit)
        zkt_sleep_ms(10);
    return 0;
}

static void *fk_run(void *arg)
{
    zkr_election_run(arg, fk_leader, NULL, 0);
    return NULL;
}

/* Issue 14 review: the child of a fork frees an election whose run() is
 * in its leader function on a parent thread, and looks at one whose gain
 * the parent has not observed yet (zkr.h: frees return at once, the
 * parent's grants are untouched). Before: the child's free hung waiting
 * for the parent's thread, and its stop byte, written into the pipe it
 * shares with the parent, stopped the parent's leader function; the
 * child's await() drained the parent's descriptor. */
static void test_fork_child_frees_running_election(void **state)
{
    zkr_session_t *s = open_session(T);
    zkr_election_t *e1 = NULL, *e2 = NULL;
    pthread_t th;
    pid_t pid;
    int st = -1;

    (void)state;
    fk_in_fn = fk_stopped = fk_quit = 0;
    assert_int_equal(zkr_election_new(&e1, s, "/embed/forkrun", "p", NULL,
                                      ZKR_POLICY_SUSPEND),
                     0);
    assert_int_equal(zkr_election_new(&e2, s, "/embed/forkgain", "p", NULL,
                                      ZKR_POLICY_SUSPEND),
                     0);
    assert_int_equal(zkr_election_fd(e2) >= 0, 1);
    assert_int_equal(zkr_election_join(e2), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_election_is_leader(e2), 10000));
    assert_true(fd_readable(zkr_election_fd(e2))); /* a gain, unobserved */
    assert_int_equal(pthread_create(&th, NULL, fk_run, e1), 0);
    assert_true(ZKT_WAIT_UNTIL(fk_in_fn, 10000));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL); /* a hang ends the child by SIGALRM */
        alarm(10);
        zkr_election_await(e2, 0);
        zkr_election_free(e1);
        zkr_election_free(e2);
        child_exit(zkr_session_free(s) == 0);
    }
    assert_int_equal(zkt_wait_pid(pid, zkt_scaled_ms(20000), &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    zkt_sleep_ms(300);
    assert_false(fk_stopped); /* the parent's leader was not told to stop */
    assert_true(zkr_election_is_leader(e1));
    assert_true(fd_readable(zkr_election_fd(e2))); /* still unobserved */
    assert_int_equal(children("/embed/forkrun"), 1);
    fk_quit = 1;
    pthread_join(th, NULL);
    zkr_election_free(e1);
    zkr_election_free(e2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(children("/embed/forkrun"), 0);
}

static pid_t fk_parent;
static atomic_int fk_completions;

static void fk_acquired(int rc, zkr_lock_t *l, void *data)
{
    (void)rc;
    (void)l;
    (void)data;
    if (getpid() == fk_parent)
        fk_completions++;
    else
        _exit(4); /* the parent's callback ran in the child */
}

/* Issue 14 review, event-loop mode: a completion is queued for the parent
 * when it forks. The child's zkr_session_free() must not run it (zkr.h:
 * no callback runs in the child) nor drain the wake-up pipe it shares with
 * the parent. Before: the child ran it, and the parent's descriptor never
 * became readable again. */
static void test_fork_child_leaves_parent_dispatch(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_lock_t *l;
    pid_t pid;
    int st = -1;

    (void)state;
    fk_parent = getpid();
    fk_completions = 0;
    o.no_event_thread = 1;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_state(s) == ZKR_STATE_CONNECTED, 10000));
    while (zkr_session_dispatch(s) > 0)
        ;
    l = new_lock(s, "/embed/forkdispatch", "p");
    assert_int_equal(zkr_lock_acquire_async(l, 10000, fk_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(fd_readable(zkr_session_fd(s)), 10000));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(10);
        zkr_lock_free(l);
        child_exit(zkr_session_free(s) == 0);
    }
    assert_int_equal(zkt_wait_pid(pid, zkt_scaled_ms(20000), &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* The parent's loop is still woken for its completion. */
    assert_true(fd_readable(zkr_session_fd(s)));
    assert_int_equal(zkr_session_dispatch(s), 1);
    assert_int_equal(fk_completions, 1);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Every descriptor zkr creates is close-on-exec (the lock's descriptor:
 * both ends of its pipe). The ZooKeeper client's own are not (Debian's
 * 3.8.0: its server socket and its wake-up pipe); zkr.h documents that
 * exception, and this test fails if anything else appears without the
 * flag. */
static void test_descriptors_are_cloexec(void **state)
{
    char before[1024] = {0};
    zkr_session_t *s;
    zkr_lock_t *l;
    struct stat lst;
    int lfd, lock_ends = 0;
    DIR *d;
    struct dirent *e;

    (void)state;
    d = opendir("/proc/self/fd");
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd < 1024)
            before[fd] = 1;
    }
    closedir(d);
    s = open_session(T);
    l = new_lock(s, "/embed/cloexec", "c");
    assert_int_equal(zkr_lock_acquire(l, 10000), 0);
    lfd = zkr_lock_fd(l);
    assert_true(lfd >= 0);
    assert_int_equal(fstat(lfd, &lst), 0);
    d = opendir("/proc/self/fd");
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name), cloexec;
        struct stat fst;
        if (e->d_name[0] == '.' || fd >= 1024 || before[fd] || fd == dirfd(d) ||
            fstat(fd, &fst) != 0)
            continue;
        cloexec = (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
        if (S_ISFIFO(fst.st_mode) && fst.st_ino == lst.st_ino) {
            lock_ends++;
            assert_true(cloexec);
        } else if (!cloexec) {
            /* The client's: its socket or its pipe, nothing else. */
            assert_true(S_ISSOCK(fst.st_mode) || S_ISFIFO(fst.st_mode));
        }
    }
    closedir(d);
    assert_int_equal(lock_ends, 2);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------------------ versions, handle */

/* The header's version, the library's and configure.ac's agree. */
static void test_version(void **state)
{
    char v[32];

    (void)state;
    snprintf(v, sizeof(v), "%d.%d.%d", ZKR_VERSION_MAJOR, ZKR_VERSION_MINOR,
             ZKR_VERSION_PATCH);
    assert_string_equal(v, PACKAGE_VERSION);
    assert_string_equal(ZKR_VERSION_STRING, PACKAGE_VERSION);
    assert_string_equal(zkr_version_string(), PACKAGE_VERSION);
    assert_int_equal(zkr_version(), ZKR_VERSION_NUMBER);
}

struct borrow {
    zkr_session_t *s;
    int lost_seen; /* the session was LOST while we held the handle */
    int state;     /* zoo_state(zh) after that */
    int rc;        /* an exists on zh after that */
};

static int borrow_across_lost(zhandle_t *zh, void *arg)
{
    struct borrow *b = arg;
    clientid_t cid = *zoo_client_id(zh);

    assert_int_equal(zoo_create(zh, "/embed-borrowed", "x", 1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkt_expire_session(zkt_server_hosts(server), &cid, 10000),
                     0);
    b->lost_seen =
        ZKT_WAIT_UNTIL(zkr_session_state(b->s) == ZKR_STATE_LOST, 20000);
    zkt_sleep_ms(300); /* time for a replacement, were it not held off */
    /* Still the same, open handle: the calls below are valid uses. */
    b->state = zoo_state(zh);
    b->rc = zoo_exists(zh, "/embed-borrowed", 0, NULL);
    return 42;
}

/* zkr_session_with_handle(): fn's handle stays open across a LOST (the
 * re-creation waits for fn); the session then reconnects with a new one. */
static void test_with_handle_survives_lost(void **state)
{
    zkr_session_t *s = open_session(T);
    struct borrow b = {s, 0, 0, 0};

    (void)state;
    assert_int_equal(zkr_session_with_handle(s, borrow_across_lost, &b), 42);
    assert_true(b.lost_seen);
    assert_int_equal(b.state, ZOO_EXPIRED_SESSION_STATE);
    assert_true(b.rc != ZOK);
    assert_int_equal(zkr_session_wait_connected(s, 20000), 0);
    assert_int_equal(zkr_session_with_handle(s, NULL, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_session_with_handle(NULL, borrow_across_lost, &b),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, "/embed-borrowed", -1), ZOK);
}

/* The application's own request on zkr's handle: its completion runs on
 * the ZooKeeper client's completion thread, which zkr's own answers need
 * too. A blocking zkr call there could never be answered (an acquire
 * overran its timeout and the session was declared LOST), and a
 * zkr_session_free() there closed the handle under the running thread,
 * whose queued answers then reached freed memory: both return
 * ZKR_EDEADLK there, at once. */
struct on_zk_thread {
    zkr_session_t *s;
    zkr_lock_t *l;
    int acquire_rc, free_rc;
    int64_t took_ms;
    atomic_int done;
};

static void raw_exists_done(int rc, const struct Stat *st, const void *data)
{
    struct on_zk_thread *z = (struct on_zk_thread *)data;
    int64_t t0 = zkt_now_ms();

    (void)rc;
    (void)st;
    z->acquire_rc = zkr_lock_acquire(z->l, 500);
    z->free_rc = zkr_session_free(z->s);
    z->took_ms = zkt_now_ms() - t0;
    atomic_store(&z->done, 1);
}

static void test_calls_from_zookeeper_thread(void **state)
{
    static struct on_zk_thread z;
    zhandle_t *zh;

    (void)state;
    z.s = open_session(T);
    z.l = new_lock(z.s, "/embed-zkthread", "a");
    atomic_store(&z.done, 0);
    zh = zkr_session_handle(z.s);
    assert_non_null(zh);
    assert_int_equal(zoo_aexists(zh, "/", 0, raw_exists_done, &z), ZOK);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&z.done), zkt_scaled_ms(2 * T)));
    print_message("# from the client's thread: acquire %s, free %s, %lld ms\n",
                  zkr_errname(z.acquire_rc), zkr_errname(z.free_rc),
                  (long long)z.took_ms);
    assert_int_equal(z.acquire_rc, ZKR_EDEADLK);
    assert_int_equal(z.free_rc, ZKR_EDEADLK);
    assert_true(z.took_ms < zkt_scaled_ms(400));
    /* The session is intact: the same calls work from here. */
    assert_int_equal(zkr_lock_acquire(z.l, zkt_scaled_ms(T)), 0);
    assert_int_equal(zkr_lock_release(z.l), 0);
    zkr_lock_free(z.l);
    assert_int_equal(zkr_session_free(z.s), 0);
}

/* ----------------------------------------------------- no_wait open */

/* The states a session listener heard, from the first change on. */
struct heard {
    pthread_mutex_t mu;
    int n;
    zkr_state_t v[16];
};

static void heard_fn(zkr_session_t *s, zkr_state_t st, void *data)
{
    struct heard *h = data;

    (void)s;
    pthread_mutex_lock(&h->mu);
    if (h->n < 16)
        h->v[h->n++] = st;
    pthread_mutex_unlock(&h->mu);
}

static int heard_count(struct heard *h)
{
    int n;

    pthread_mutex_lock(&h->mu);
    n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

struct blocked_acquire {
    zkr_lock_t *l;
    int rc;
    atomic_int done;
};

static void *acquire_main(void *arg)
{
    struct blocked_acquire *a = arg;

    a->rc = zkr_lock_acquire(a->l, -1);
    atomic_store(&a->done, 1);
    return NULL;
}

/* zkr.h, no_wait: the open returns at once, CONNECTING, while no server
 * answers (a waiting open would fail after the connect timeout, T); a lock
 * made and acquired meanwhile waits for the connection, however long;
 * the listener given in the options hears the first change, CONNECTED,
 * once the server is back, and the acquire is granted then. */
static void test_no_wait_open_while_down(void **state)
{
    static struct heard h;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_lock_t *l = NULL;
    struct blocked_acquire a = {0};
    pthread_t t;
    int64_t t0;
    char why[512];

    (void)state;
    memset(&h, 0, sizeof(h));
    pthread_mutex_init(&h.mu, NULL);
    o.listener = heard_fn;
    o.listener_data = &h;
    o.no_wait = 1;
    o.log_level = ZKR_LOG_NONE; /* the last error is kept even so */
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o), 0);
    assert_true(zkt_now_ms() - t0 < T);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_CONNECTING);
    assert_int_equal(zkr_session_wait_connected(s, 0), ZKR_ETIMEDOUT);
    assert_int_equal(zkr_lock_new(&l, s, "/embed-nowait", "w", NULL), 0);
    a.l = l;
    assert_int_equal(pthread_create(&t, NULL, acquire_main, &a), 0);
    /* Past the connect timeout a waiting open would have given up: this
     * session is still trying, and the acquire still waiting. */
    zkt_sleep_ms(2 * T);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_CONNECTING);
    assert_false(atomic_load(&a.done));
    assert_int_equal(heard_count(&h), 0);
    /* Why: the server named, refusing. */
    assert_true(zkr_session_last_error(s, why, sizeof(why)) > 0);
    print_message("# last error: %s\n", why);
    assert_non_null(strstr(why, zkt_server_hosts(server)));
    assert_non_null(strstr(why, "refused"));
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&a.done), zkt_scaled_ms(60000)));
    pthread_join(t, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);
    assert_true(ZKT_WAIT_UNTIL(heard_count(&h) >= 1, zkt_scaled_ms(10000)));
    pthread_mutex_lock(&h.mu);
    assert_int_equal(h.v[0], ZKR_STATE_CONNECTED);
    pthread_mutex_unlock(&h.mu);
    /* Connected: the last error is history, still there. */
    assert_true(zkr_session_last_error(s, NULL, 0) > 0);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
}

static void count_completion(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    atomic_store((atomic_int *)data, rc == ZKR_ECANCELED ? 1 : 2);
}

/* A session that never connects (every server refuses) is freed at once,
 * with a lock whose acquire waits for the connection: the acquire's
 * completion comes once, ZKR_ECANCELED (zkr_lock_free()), and nothing
 * hangs. */
static void test_no_wait_free_before_connected(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_lock_t *l = NULL;
    atomic_int done = 0;
    char hosts[64];

    (void)state;
    refused_hosts(hosts, sizeof(hosts));
    o.no_wait = 1;
    o.log_level = ZKR_LOG_NONE;
    assert_int_equal(zkr_session_open(&s, hosts, T, &o), 0);
    assert_int_equal(zkr_lock_new(&l, s, "/embed-nowait-free", NULL, NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(l, -1, count_completion, &done), 0);
    zkt_sleep_ms(T / 4);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_CONNECTING);
    assert_int_equal(atomic_load(&done), 0);
    zkr_lock_free(l);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&done) != 0, zkt_scaled_ms(T)));
    assert_int_equal(atomic_load(&done), 1);
    assert_int_equal(zkr_session_free(s), 0);
}

/* zkr.h, no_wait: what the open can tell at once it still returns (a bad
 * address, a host that does not resolve); a missing chroot, which the
 * waiting open returns as ZKR_ENOCHROOT, is logged once connected. */
static void test_no_wait_errors(void **state)
{
    static struct sink k;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    (void)state;
    sink_init(&k);
    o.log_fn = sink_fn;
    o.log_data = &k;
    o.no_wait = 1;
    assert_int_equal(zkr_session_open(&s, "127.0.0.1", T, &o), ZKR_EBADADDR);
    assert_null(s);
    assert_int_equal(zkr_session_open(&s, "no-such-host.invalid:2181", T, &o),
                     ZKR_ERESOLVE);
    assert_null(s);
    o.chroot = "/embed-nowait-chroot";
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o), 0);
    assert_non_null(s);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(30000)), 0);
    assert_true(ZKT_WAIT_UNTIL(
        sink_find(&k, ZKR_LOG_ERROR, "/embed-nowait-chroot") >= 0,
        zkt_scaled_ms(10000)));
    {
        /* It names the servers as given, without the chroot after them. */
        char want[256];
        snprintf(want, sizeof(want),
                 "does not exist on %s: ", zkt_server_hosts(server));
        assert_true(sink_find(&k, ZKR_LOG_ERROR, want) >= 0);
    }
    {
        /* "requests then fail with ZNONODE": nothing can be made under a
         * chroot that does not exist, neither a lock's node nor an item. */
        zkr_lock_t *l = NULL;
        zkr_workq_t *q = NULL;

        assert_int_equal(zkr_lock_new(&l, s, "/nw/lock", "me", NULL), 0);
        assert_int_equal(zkr_lock_acquire(l, zkt_scaled_ms(10000)), ZNONODE);
        zkr_lock_free(l);
        assert_int_equal(zkr_workq_new(&q, s, "/nw/queue", "me", NULL), 0);
        assert_int_equal(zkr_workq_put(q, "x", 1, 0, NULL, 0), ZNONODE);
        zkr_workq_free(q);
    }
    assert_int_equal(zkr_session_free(s), 0);
}

/* Completions of the acquires below: how many times each came, last rc. */
static atomic_int nw_done[3], nw_rc[3];

static void nw_acquired(int rc, zkr_lock_t *l, void *data)
{
    int i = (int)(intptr_t)data;

    (void)l;
    atomic_store(&nw_rc[i], rc);
    atomic_fetch_add(&nw_done[i], 1);
}

/* zkr.h, no_wait: recipes made while CONNECTING wait for the connection,
 * and an acquire's timeout runs meanwhile. The server is down for 3T (past
 * any session timeout) from before the open: a lock's timed acquire (T/2)
 * ends ZKR_ETIMEDOUT while CONNECTING and leaves no node once connected;
 * a lock, a semaphore and a candidacy started meanwhile are each granted
 * once when the server is back; freed, they leave no node and no watch. */
static void test_no_wait_recipes_across_long_outage(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_lock_t *l, *sem, *tl;
    zkr_election_t *e;

    (void)state;
    for (int i = 0; i < 3; i++) {
        atomic_store(&nw_done[i], 0);
        atomic_store(&nw_rc[i], 1);
    }
    o.no_wait = 1;
    o.log_level = ZKR_LOG_NONE;
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o), 0);
    assert_int_equal(zkr_lock_new(&l, s, "/nw-outage/lock", "a", NULL), 0);
    assert_int_equal(zkr_semaphore_new(&sem, s, "/nw-outage/sem", 1, "a", NULL),
                     0);
    assert_int_equal(zkr_lock_new(&tl, s, "/nw-outage/timed", "a", NULL), 0);
    assert_int_equal(zkr_election_new(&e, s, "/nw-outage/elec", "a", NULL,
                                      ZKR_POLICY_SUSPEND),
                     0);
    assert_int_equal(zkr_lock_acquire_async(l, -1, nw_acquired, (void *)0), 0);
    assert_int_equal(zkr_lock_acquire_async(sem, -1, nw_acquired, (void *)1),
                     0);
    assert_int_equal(zkr_lock_acquire_async(tl, T / 2, nw_acquired, (void *)2),
                     0);
    assert_int_equal(zkr_election_join(e), 0);
    assert_true(
        ZKT_WAIT_UNTIL(atomic_load(&nw_done[2]) == 1, zkt_scaled_ms(2 * T)));
    assert_int_equal(atomic_load(&nw_rc[2]), ZKR_ETIMEDOUT);
    zkt_sleep_ms(3 * T);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_CONNECTING);
    assert_int_equal(atomic_load(&nw_done[0]) + atomic_load(&nw_done[1]), 0);
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&nw_done[0]) == 1 &&
                                   atomic_load(&nw_done[1]) == 1,
                               zkt_scaled_ms(60000)));
    assert_int_equal(atomic_load(&nw_rc[0]), 0);
    assert_int_equal(atomic_load(&nw_rc[1]), 0);
    assert_int_equal(zkr_election_await(e, zkt_scaled_ms(T)), 0);
    assert_true(zkr_election_is_leader(e));
    /* A session timeout later: no second completion, one node each, and
     * the timed-out acquire's node never appeared. */
    zkt_sleep_ms(T);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&nw_done[i]), 1);
    assert_int_equal(children("/nw-outage/lock"), 1);
    assert_int_equal(children("/nw-outage/sem"), 1);
    assert_int_equal(children("/nw-outage/elec"), 1);
    assert_true(children("/nw-outage/timed") <= 0);
    assert_int_equal(zkr_lock_state(tl), ZKR_LOCK_IDLE);
    zkr_lock_free(tl);
    zkr_lock_free(l);
    zkr_lock_free(sem);
    zkr_election_free(e);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(children("/nw-outage/lock"), 0);
    assert_int_equal(children("/nw-outage/sem"), 0);
    assert_int_equal(children("/nw-outage/elec"), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkt_total_watches(server) == 0, zkt_scaled_ms(T)));
}

/* What the listener given in the options heard, and the handle it makes
 * on CONNECTED when asked to (as a daemon's listener might). */
static atomic_int told[8], told_n, told_first;
static atomic_int told_lock_rc;
static zkr_lock_t *told_lock;

static void telling_fn(zkr_session_t *s, zkr_state_t st, void *data)
{
    if ((int)st >= 0 && (int)st < 8)
        atomic_fetch_add(&told[st], 1);
    if (atomic_fetch_add(&told_n, 1) == 0)
        atomic_store(&told_first, (int)st);
    if (st == ZKR_STATE_CONNECTED && data != NULL)
        atomic_store(&told_lock_rc,
                     zkr_lock_new(&told_lock, s, "/embed-told", "t", NULL));
}

static void told_reset(void)
{
    for (int i = 0; i < 8; i++)
        atomic_store(&told[i], 0);
    atomic_store(&told_n, 0);
    atomic_store(&told_first, -1);
    atomic_store(&told_lock_rc, 1);
    told_lock = NULL;
}

/* Connections the server has open ("srvr"), or -1. */
static int server_connections(void)
{
    char *r = zkt_4lw(server, "srvr");
    const char *c = r != NULL ? strstr(r, "Connections: ") : NULL;
    int n = c != NULL ? atoi(c + strlen("Connections: ")) : -1;

    free(r);
    return n;
}

/* zkr.h, listener: it hears every change of the session from the first
 * one; and a zkr_session_open() that returns an error leaves no session.
 * So when a waiting open fails after its connection (ZKR_ENOCHROOT), the
 * listener given in the options is never called: not with a session the
 * application was told does not exist, on which it could make a handle
 * (zkr_session_free() would then refuse, ZKR_EINUSE, and the session
 * live on, connected, out of the application's reach). Both modes, the
 * listener making a lock on CONNECTED or not; then the same open, the
 * chroot made, succeeds and its listener hears CONNECTED first. */
static void test_options_listener_and_failed_open(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    int base;

    (void)state;
    o.chroot = "/embed-told-chroot";
    o.listener = telling_fn;
    o.log_level = ZKR_LOG_NONE;
    base = server_connections();
    assert_true(base >= 1);
    for (int round = 0; round < 4; round++) {
        told_reset();
        o.no_event_thread = round & 1;
        o.listener_data = (round & 2) ? &o : NULL;
        assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o),
                         ZKR_ENOCHROOT);
        assert_null(s);
        assert_int_equal(atomic_load(&told_n), 0);
        assert_int_equal(atomic_load(&told_lock_rc), 1);
        assert_null(told_lock);
        assert_true(
            ZKT_WAIT_UNTIL(server_connections() == base, zkt_scaled_ms(T)));
    }
    assert_int_equal(zoo_create(raw, "/embed-told-chroot", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    for (int round = 0; round < 2; round++) {
        told_reset();
        o.no_event_thread = round;
        o.listener_data = NULL;
        assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), T, &o),
                         0);
        if (round == 1)
            assert_true(zkr_session_dispatch(s) >= 1);
        assert_true(
            ZKT_WAIT_UNTIL(atomic_load(&told_n) >= 1, zkt_scaled_ms(T)));
        assert_int_equal(atomic_load(&told_first), ZKR_STATE_CONNECTED);
        assert_int_equal(zkr_session_free(s), 0);
    }
}

/* zkr.h: a session opened with no_wait that cannot connect says why in
 * zkr_session_last_error(), naming the server, whatever log_level says:
 * every session, those beyond the 64 whose client's messages zkr routes
 * included. */
static void test_no_wait_last_error_beyond_slots(void **state)
{
    enum { N = 64 + 1 };
    static zkr_session_t *v[N];
    zkr_session_options_t o = {0};
    char hosts[64];

    (void)state;
    refused_hosts(hosts, sizeof(hosts));
    o.no_wait = 1;
    o.log_level = ZKR_LOG_NONE;
    for (int i = 0; i < N; i++) {
        v[i] = NULL;
        assert_int_equal(zkr_session_open(&v[i], hosts, T, &o), 0);
    }
    for (int i = 0; i < N; i++) {
        char why[512] = "";
        /* zkr's own words come after a session timeout at most. */
        int said =
            ZKT_WAIT_UNTIL(zkr_session_last_error(v[i], why, sizeof(why)) > 0 &&
                               strstr(why, hosts) != NULL,
                           zkt_scaled_ms(3 * T));
        if (!said)
            print_message("# session %d: last error \"%s\"\n", i, why);
        assert_true(said);
        assert_int_equal(zkr_session_state(v[i]), ZKR_STATE_CONNECTING);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(zkr_session_free(v[i]), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_session_is_quiet),
        cmocka_unit_test(test_log_callback_per_session),
        cmocka_unit_test(test_lost_is_logged),
        cmocka_unit_test(test_connection_failure_names_host_and_errno),
        cmocka_unit_test(test_refused_port_is_named),
        cmocka_unit_test(test_acl_errors_say_what_to_check),
        cmocka_unit_test(test_bad_log_options),
        cmocka_unit_test(test_fork_child_frees_inherited_handles),
        cmocka_unit_test(test_fork_in_completion_callback),
        cmocka_unit_test(test_fork_child_frees_running_election),
        cmocka_unit_test(test_fork_child_leaves_parent_dispatch),
        cmocka_unit_test(test_descriptors_are_cloexec),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_with_handle_survives_lost),
        cmocka_unit_test(test_calls_from_zookeeper_thread),
        cmocka_unit_test(test_refused_open_log_is_summarised),
        cmocka_unit_test(test_outage_log_is_summarised),
        cmocka_unit_test(test_bad_address_is_named),
        cmocka_unit_test(test_unresolvable_host_is_named),
        cmocka_unit_test(test_missing_chroot_is_named),
        cmocka_unit_test(test_no_wait_open_while_down),
        cmocka_unit_test(test_no_wait_errors),
        cmocka_unit_test(test_no_wait_free_before_connected),
        cmocka_unit_test(test_options_listener_and_failed_open),
        cmocka_unit_test(test_no_wait_recipes_across_long_outage),
        cmocka_unit_test(test_no_wait_last_error_beyond_slots),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("embed", tests, setup, teardown);
}
