/* Argument validation of every public function, without a server.
 *
 * Validation happens before any request is sent, so NULL handles and bad
 * arguments are tested alone. Calls that need a session use a real
 * ZooKeeper handle pointed at 127.0.0.1:1, where nothing listens: it never
 * connects, which also exercises the "not connected" answers (acquire with
 * timeout 0, listings, deadlines, cancellation) deterministically. */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "filter.h"

#include "cli.h" /* the zkr command's value parsing (cli/args.c) */
#include "zkr.h"

#define NOWHERE "127.0.0.1:1"
#define LOCK_PATH "/zkr-test/args/lock"

static FILE *devnull;

/* Like assert_int_equal for return codes, with their names in the report. */
#define assert_rc(got, want)                                                   \
    do {                                                                       \
        int got_ = (got), want_ = (want);                                      \
        if (got_ != want_)                                                     \
            fail_msg("%s returned %s (%d), want %s (%d)", #got,                \
                     zkr_errname(got_), got_, zkr_errname(want_), want_);      \
    } while (0)

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An adopted handle's global watcher. An application forwards session
 * events to zkr_session_process_event(); this handle never connects, so
 * there is nothing to forward (tests feed events by hand instead). It is
 * not NULL so the tests do not depend on the client tolerating a NULL
 * global watcher. */
static void noop_watcher(zhandle_t *zh, int type, int state, const char *path,
                         void *ctx)
{
    (void)zh;
    (void)type;
    (void)state;
    (void)path;
    (void)ctx;
}

/* ---------------------------------------------- callback recording */

/* What a completion or listener saw, read by the test thread. */
typedef struct record {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int rc;         /* last completion rc or state */
    zkr_lock_t *l;  /* lock passed to the completion */
    int states[16]; /* listener states, in order */
    int nstates;
} record_t;

static void record_init(record_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->rc = INT_MIN;
}

static void record_destroy(record_t *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static int record_calls(record_t *r)
{
    int n;

    pthread_mutex_lock(&r->mu);
    n = r->calls;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Waits until r has seen at least n calls or ms pass; returns the count. */
static int record_wait(record_t *r, int n, int ms)
{
    struct timespec ts;
    int got;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (r->calls < n)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != 0)
            break;
    got = r->calls;
    pthread_mutex_unlock(&r->mu);
    return got;
}

static void on_lock_done(int rc, zkr_lock_t *l, void *data)
{
    record_t *r = data;

    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->rc = rc;
    r->l = l;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void on_session_state(zkr_session_t *s, zkr_state_t st, void *data)
{
    record_t *r = data;

    (void)s;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->rc = (int)st;
    if (r->nstates < (int)(sizeof(r->states) / sizeof(r->states[0])))
        r->states[r->nstates++] = (int)st;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void on_lock_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    (void)st;
    (void)data;
}

/* ------------------------------------------------------------ fixture */

typedef struct fixture {
    zhandle_t *zh;
    zkr_session_t *s;
    zkr_lock_t *l;
} fixture_t;

static int fx_setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof(*fx));

    if (fx == NULL)
        return -1;
    fx->zh = zookeeper_init(NOWHERE, noop_watcher, 10000, NULL, NULL, 0);
    if (fx->zh == NULL)
        goto fail;
    if (zkr_session_adopt(&fx->s, fx->zh) != 0)
        goto fail;
    if (zkr_lock_new(&fx->l, fx->s, LOCK_PATH, "tester", NULL) != 0)
        goto fail;
    *state = fx;
    return 0;
fail:
    if (fx->s != NULL)
        zkr_session_free(fx->s);
    if (fx->zh != NULL)
        zookeeper_close(fx->zh);
    free(fx);
    return -1;
}

static int fx_teardown(void **state)
{
    fixture_t *fx = *state;
    int rc;

    zkr_lock_free(fx->l);
    rc = zkr_session_free(fx->s);
    zookeeper_close(fx->zh);
    free(fx);
    return rc == 0 ? 0 : -1;
}

static int group_setup(void **state)
{
    (void)state;
    devnull = fopen("/dev/null", "w");
    if (devnull == NULL)
        return -1;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zoo_set_log_stream(devnull);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    zoo_set_log_stream(stderr);
    fclose(devnull);
    return 0;
}

/* ------------------------------------------------------ NULL handles */

static void test_null_session(void **state)
{
    (void)state;
    assert_int_equal(zkr_session_state(NULL), ZKR_STATE_CLOSED);
    assert_int_equal(zkr_session_valid_ms(NULL), 0);
    assert_int_equal(zkr_session_id(NULL), 0);
    assert_int_equal(zkr_session_timeout_ms(NULL), 0);
    assert_null(zkr_session_handle(NULL));
    assert_rc(zkr_session_free(NULL), 0);
    zkr_session_process_event(NULL, ZOO_SESSION_EVENT, ZOO_CONNECTED_STATE);
    zkr_session_process_event(NULL, ZOO_SESSION_EVENT,
                              ZOO_EXPIRED_SESSION_STATE);
    zkr_session_process_event(NULL, ZOO_CHILD_EVENT, 0);
    assert_rc(zkr_session_wait_connected(NULL, 0), ZBADARGUMENTS);
    assert_rc(zkr_session_wait_connected(NULL, -1), ZBADARGUMENTS);
    assert_rc(zkr_session_wait_connected(NULL, 100), ZBADARGUMENTS);
    assert_rc(zkr_session_add_listener(NULL, on_session_state, NULL),
              ZBADARGUMENTS);
    assert_rc(zkr_session_add_listener(NULL, NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_session_remove_listener(NULL, on_session_state, NULL),
              ZBADARGUMENTS);
    assert_rc(zkr_session_remove_listener(NULL, NULL, NULL), ZBADARGUMENTS);
    for (int c = 0; c <= ZKR_COUNTER_COUNT_; c++)
        assert_int_equal(zkr_session_counter(NULL, (zkr_counter_t)c), 0);
}

static void test_null_lock(void **state)
{
    int64_t token = 42;
    char buf[ZKR_NODE_MAX];
    zkr_contender_t *v = (zkr_contender_t *)buf;
    int n = 7;

    (void)state;
    assert_rc(zkr_lock_acquire(NULL, 0), ZBADARGUMENTS);
    assert_rc(zkr_lock_acquire(NULL, -1), ZBADARGUMENTS);
    assert_rc(zkr_lock_acquire(NULL, 100), ZBADARGUMENTS);
    assert_rc(zkr_lock_acquire_async(NULL, 0, on_lock_done, NULL),
              ZBADARGUMENTS);
    assert_rc(zkr_lock_acquire_async(NULL, -1, NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_cancel(NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_release(NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_release_async(NULL, on_lock_done, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_release_async(NULL, NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_token(NULL, &token), ZBADARGUMENTS);
    assert_int_equal(token, 42);
    assert_rc(zkr_lock_token(NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_node(NULL, buf, sizeof(buf)), ZBADARGUMENTS);
    assert_rc(zkr_lock_node(NULL, NULL, 0), ZBADARGUMENTS);
    assert_rc(zkr_lock_set_listener(NULL, on_lock_state, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_set_listener(NULL, NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_contenders(NULL, &v, &n), ZBADARGUMENTS);
    assert_rc(zkr_lock_contenders(NULL, NULL, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_state(NULL), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_valid_ms(NULL), 0);
    assert_int_equal(zkr_lock_fd(NULL), -1);
    zkr_lock_free(NULL);
}

static void test_null_contenders(void **state)
{
    zkr_contender_t *v = NULL;
    int n = 0;

    (void)state;
    zkr_contenders_free(NULL, 0);
    zkr_contenders_free(NULL, 3);
    assert_rc(zkr_contenders_list(NULL, "/a", &v, &n), ZBADARGUMENTS);
    assert_null(v);
    assert_int_equal(n, 0);
    assert_rc(zkr_contenders_list(NULL, "/a", NULL, &n), ZBADARGUMENTS);
    assert_rc(zkr_contenders_list(NULL, "/a", &v, NULL), ZBADARGUMENTS);
    assert_rc(zkr_contenders_list(NULL, NULL, NULL, NULL), ZBADARGUMENTS);
}

/* ------------------------------------------------------------- open */

static void test_session_open_bad_args(void **state)
{
    zkr_session_t *sentinel = (zkr_session_t *)&sentinel;
    zkr_session_t *s = sentinel;
    zkr_session_options_t o;

    (void)state;
    assert_rc(zkr_session_open(NULL, NOWHERE, 2000, NULL), ZBADARGUMENTS);
    assert_rc(zkr_session_open(&s, NULL, 2000, NULL), ZBADARGUMENTS);
    assert_rc(zkr_session_open(&s, "", 2000, NULL), ZBADARGUMENTS);
    assert_rc(zkr_session_open(&s, NOWHERE, -1, NULL), ZBADARGUMENTS);
    assert_rc(zkr_session_open(&s, NOWHERE, INT_MIN, NULL), ZBADARGUMENTS);

    memset(&o, 0, sizeof(o));
    o.connect_timeout_ms = -2;
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);

    memset(&o, 0, sizeof(o));
    o.chroot = "relative";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);
    o.chroot = "/a/";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);
    o.chroot = "";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);
    o.chroot = "/a//b";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);
    o.chroot = "/a/..";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);

    memset(&o, 0, sizeof(o));
    o.digest = "nocolon";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);
    o.digest = "";
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZBADARGUMENTS);

    /* OUT is set only on success. */
    assert_ptr_equal(s, sentinel);
}

static void test_session_open_timeout(void **state)
{
    zkr_session_t *sentinel = (zkr_session_t *)&sentinel;
    zkr_session_t *s = sentinel;
    zkr_session_options_t o;
    int64_t t0, took;

    (void)state;
    memset(&o, 0, sizeof(o));
    o.connect_timeout_ms = 300;
    t0 = now_ms();
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZKR_EREFUSED);
    took = now_ms() - t0;
    assert_ptr_equal(s, sentinel);
    if (took < 280 || took > 2000)
        fail_msg("open with connect_timeout_ms=300 took %lld ms",
                 (long long)took);

    /* The same with a valid digest and chroot: still refused. */
    o.digest = "user:secret";
    o.chroot = "/app";
    o.no_reconnect = 1;
    t0 = now_ms();
    assert_rc(zkr_session_open(&s, NOWHERE, 2000, &o), ZKR_EREFUSED);
    took = now_ms() - t0;
    assert_ptr_equal(s, sentinel);
    if (took < 280 || took > 2000)
        fail_msg("open with digest took %lld ms", (long long)took);
}

/* ------------------------------------------------------------ adopt */

static void test_session_adopt_bad_args(void **state)
{
    zkr_session_t *sentinel = (zkr_session_t *)&sentinel;
    zkr_session_t *s = sentinel;
    zhandle_t *zh;

    (void)state;
    zh = zookeeper_init(NOWHERE, noop_watcher, 10000, NULL, NULL, 0);
    assert_non_null(zh);
    assert_rc(zkr_session_adopt(NULL, zh), ZBADARGUMENTS);
    assert_rc(zkr_session_adopt(&s, NULL), ZBADARGUMENTS);
    assert_rc(zkr_session_adopt(NULL, NULL), ZBADARGUMENTS);
    assert_ptr_equal(s, sentinel);
    zookeeper_close(zh);
}

static void test_adopted_session_queries(void **state)
{
    fixture_t *fx = *state;
    zkr_session_t *s = fx->s;
    static record_t r; /* outlives a failed test's pending callbacks */
    int64_t t0, took;

    record_init(&r);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_CONNECTING);
    assert_int_equal(zkr_session_id(s), 0);
    assert_int_equal(zkr_session_valid_ms(s), 0);
    assert_int_equal(zkr_session_timeout_ms(s), 0);
    assert_ptr_equal(zkr_session_handle(s), fx->zh);
    for (int c = 0; c < ZKR_COUNTER_COUNT_; c++)
        assert_int_equal(zkr_session_counter(s, (zkr_counter_t)c), 0);
    assert_int_equal(zkr_session_counter(s, ZKR_COUNTER_COUNT_), 0);
    assert_int_equal(zkr_session_counter(s, (zkr_counter_t)-1), 0);
    assert_int_equal(zkr_session_counter(s, (zkr_counter_t)1000), 0);

    assert_rc(zkr_session_wait_connected(s, -2), ZBADARGUMENTS);
    assert_rc(zkr_session_wait_connected(s, INT_MIN), ZBADARGUMENTS);
    assert_rc(zkr_session_wait_connected(s, 0), ZKR_ETIMEDOUT);
    t0 = now_ms();
    assert_rc(zkr_session_wait_connected(s, 150), ZKR_ETIMEDOUT);
    took = now_ms() - t0;
    if (took < 140 || took > 2000)
        fail_msg("wait_connected(150) took %lld ms", (long long)took);

    /* Events other than session events are ignored; so is "connecting". */
    zkr_session_process_event(s, ZOO_CHILD_EVENT, ZOO_CONNECTED_STATE);
    zkr_session_process_event(s, ZOO_CREATED_EVENT, ZOO_CONNECTED_STATE);
    zkr_session_process_event(s, ZOO_SESSION_EVENT, ZOO_CONNECTING_STATE);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_CONNECTING);

    /* Listeners: NULL fn refused; remove needs the same fn and data. */
    assert_rc(zkr_session_add_listener(s, NULL, &r), ZBADARGUMENTS);
    assert_rc(zkr_session_remove_listener(s, NULL, &r), ZBADARGUMENTS);
    assert_rc(zkr_session_remove_listener(s, on_session_state, &r),
              ZBADARGUMENTS);
    assert_rc(zkr_session_add_listener(s, on_session_state, &r), 0);
    assert_rc(zkr_session_remove_listener(s, on_session_state, NULL),
              ZBADARGUMENTS);
    assert_rc(zkr_session_remove_listener(s, on_session_state, &r), 0);
    assert_rc(zkr_session_remove_listener(s, on_session_state, &r),
              ZBADARGUMENTS);
    assert_int_equal(record_calls(&r), 0);
    record_destroy(&r);
}

/* A session event fed by the application drives an adopted session: an
 * expiry makes it LOST for good (it is never re-created). */
static void test_adopted_session_expired_event(void **state)
{
    fixture_t *fx = *state;
    zkr_session_t *s = fx->s;
    static record_t r; /* outlives a failed test's pending callbacks */

    record_init(&r);
    assert_rc(zkr_session_add_listener(s, on_session_state, &r), 0);
    zkr_session_process_event(s, ZOO_SESSION_EVENT, ZOO_EXPIRED_SESSION_STATE);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_LOST);
    assert_int_equal(record_wait(&r, 1, 5000), 1);
    assert_int_equal(r.states[0], ZKR_STATE_LOST);
    assert_rc(zkr_session_wait_connected(s, 0), ZKR_ELOST);
    assert_rc(zkr_session_wait_connected(s, -1), ZKR_ELOST);
    assert_int_equal(zkr_session_id(s), 0);
    assert_int_equal(zkr_session_valid_ms(s), 0);
    assert_rc(zkr_lock_acquire(fx->l, 0), ZKR_ELOST);
    assert_rc(zkr_lock_acquire(fx->l, 100), ZKR_ELOST);
    assert_int_equal(zkr_lock_state(fx->l), ZKR_LOCK_IDLE);
    assert_rc(zkr_session_remove_listener(s, on_session_state, &r), 0);
    record_destroy(&r);
}

/* Freeing a session tells its listeners CLOSED before it returns. */
static void test_session_free_notifies_closed(void **state)
{
    zhandle_t *zh;
    zkr_session_t *s = NULL;
    static record_t r; /* outlives a failed test's pending callbacks */

    (void)state;
    record_init(&r);
    zh = zookeeper_init(NOWHERE, noop_watcher, 10000, NULL, NULL, 0);
    assert_non_null(zh);
    assert_rc(zkr_session_adopt(&s, zh), 0);
    assert_non_null(s);
    assert_rc(zkr_session_add_listener(s, on_session_state, &r), 0);
    assert_rc(zkr_session_free(s), 0);
    assert_int_equal(r.nstates, 1);
    assert_int_equal(r.states[0], ZKR_STATE_CLOSED);
    zookeeper_close(zh);
    record_destroy(&r);
}

/* --------------------------------------------------------- lock_new */

static void test_lock_new_bad_args(void **state)
{
    fixture_t *fx = *state;
    zkr_session_t *s = fx->s;
    zkr_lock_t *sentinel = (zkr_lock_t *)&sentinel;
    zkr_lock_t *l = sentinel;
    struct ACL_vector empty_acl = {0, NULL};
    struct ACL bad_entry = {ZOO_PERM_ALL, {NULL, "anyone"}};
    struct ACL_vector bad_acl = {1, &bad_entry};
    char *longpath, *longid;
    static const char *const bad_paths[] = {
        "relative", "/a/",   "/",    "",      "/a//b", "//a",
        "/a/./b",   "/a/..", "/./a", "/a/b/", "/a\nb", "/a\x7f",
    };

    longpath = malloc(ZKR_PATH_MAX + 2);
    longid = malloc(ZKR_ID_MAX + 2);
    assert_non_null(longpath);
    assert_non_null(longid);
    longpath[0] = '/';
    memset(longpath + 1, 'p', ZKR_PATH_MAX);
    longpath[ZKR_PATH_MAX + 1] = '\0';
    memset(longid, 'i', ZKR_ID_MAX + 1);
    longid[ZKR_ID_MAX + 1] = '\0';

    assert_rc(zkr_lock_new(NULL, s, LOCK_PATH, "id", NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, NULL, LOCK_PATH, "id", NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, NULL, "id", NULL), ZBADARGUMENTS);
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
        if (zkr_lock_new(&l, s, bad_paths[i], "id", NULL) != ZBADARGUMENTS)
            fail_msg("zkr_lock_new accepted bad_paths[%zu]", i);
    assert_rc(zkr_lock_new(&l, s, longpath, "id", NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, "", NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, longid, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, "\xc0\xaf", NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, "\xff", NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, "\xed\xa0\x80", NULL),
              ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, "id", &empty_acl), ZBADARGUMENTS);
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, "id", &bad_acl), ZBADARGUMENTS);
    assert_ptr_equal(l, sentinel);

    /* The limits themselves are accepted. */
    longpath[ZKR_PATH_MAX] = '\0';
    longid[ZKR_ID_MAX] = '\0';
    assert_rc(zkr_lock_new(&l, s, longpath, longid, NULL), 0);
    assert_ptr_not_equal(l, sentinel);
    zkr_lock_free(l);
    l = NULL;
    assert_rc(zkr_lock_new(&l, s, LOCK_PATH, NULL, &ZOO_OPEN_ACL_UNSAFE), 0);
    zkr_lock_free(l);
    l = NULL;
    assert_rc(zkr_lock_new(&l, s, "/x", "\xeb\x85\xb8\xeb\x93\x9c",
                           &ZOO_READ_ACL_UNSAFE),
              0);
    zkr_lock_free(l);
    free(longpath);
    free(longid);
}

/* ----------------------------------------------------- idle lock */

static void test_lock_idle_calls(void **state)
{
    fixture_t *fx = *state;
    zkr_lock_t *l = fx->l;
    int64_t token = 42;
    char buf[ZKR_NODE_MAX];
    struct pollfd p;
    zkr_contender_t *v = (zkr_contender_t *)buf;
    int n = 7;
    static record_t r; /* outlives a failed test's pending callbacks */

    record_init(&r);
    assert_rc(zkr_lock_acquire(l, -2), ZBADARGUMENTS);
    assert_rc(zkr_lock_acquire(l, INT_MIN), ZBADARGUMENTS);
    assert_rc(zkr_lock_acquire_async(l, -2, on_lock_done, &r), ZBADARGUMENTS);
    /* Timeout 0 on a session that is not connected fails at once. */
    assert_rc(zkr_lock_acquire(l, 0), ZCONNECTIONLOSS);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_rc(zkr_lock_release(l), ZKR_ENOTHELD);
    assert_rc(zkr_lock_cancel(l), ZKR_ESTATE);
    assert_rc(zkr_lock_token(l, &token), ZKR_ENOTHELD);
    assert_int_equal(token, 42);
    assert_rc(zkr_lock_token(l, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_node(l, buf, 0), ZBADARGUMENTS);
    assert_rc(zkr_lock_node(l, NULL, sizeof(buf)), ZBADARGUMENTS);
    assert_rc(zkr_lock_node(l, buf, sizeof(buf)), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_valid_ms(l), 0);

    assert_true(zkr_lock_fd(l) >= 0);
    p.fd = zkr_lock_fd(l);
    p.events = POLLIN;
    p.revents = 0;
    assert_int_equal(poll(&p, 1, 0), 0);

    assert_rc(zkr_lock_acquire_async(l, 10, NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_release_async(l, NULL, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_release_async(l, on_lock_done, &r), ZKR_ENOTHELD);

    assert_rc(zkr_lock_set_listener(l, on_lock_state, &r), 0);
    assert_rc(zkr_lock_set_listener(l, NULL, NULL), 0);

    assert_rc(zkr_lock_contenders(l, NULL, &n), ZBADARGUMENTS);
    assert_rc(zkr_lock_contenders(l, &v, NULL), ZBADARGUMENTS);
    assert_rc(zkr_lock_contenders(l, &v, &n), ZCONNECTIONLOSS);
    assert_null(v);
    assert_int_equal(n, 0);
    v = (zkr_contender_t *)buf;
    n = 7;
    assert_rc(zkr_contenders_list(fx->s, "relative", &v, &n), ZBADARGUMENTS);
    assert_null(v);
    assert_int_equal(n, 0);
    assert_rc(zkr_contenders_list(fx->s, NULL, &v, &n), ZBADARGUMENTS);
    assert_rc(zkr_contenders_list(fx->s, LOCK_PATH, &v, &n), ZCONNECTIONLOSS);
    assert_null(v);
    assert_int_equal(n, 0);

    /* A failed call never runs its callback. */
    assert_int_equal(record_wait(&r, 1, 100), 0);
    assert_int_equal(zkr_session_counter(fx->s, ZKR_COUNTER_CREATES), 0);
    record_destroy(&r);
}

static void test_session_free_in_use(void **state)
{
    fixture_t *fx = *state;
    zkr_lock_t *l2 = NULL;

    assert_rc(zkr_session_free(fx->s), ZKR_EINUSE);
    /* Nothing was done: the session still works. */
    assert_int_equal(zkr_session_state(fx->s), ZKR_STATE_CONNECTING);
    assert_rc(zkr_lock_new(&l2, fx->s, LOCK_PATH, "second", NULL), 0);
    assert_true(zkr_lock_fd(l2) >= 0);
    assert_int_not_equal(zkr_lock_fd(l2), zkr_lock_fd(fx->l));
    zkr_lock_free(fx->l);
    fx->l = NULL;
    assert_rc(zkr_session_free(fx->s), ZKR_EINUSE);
    zkr_lock_free(l2);
    /* The fixture's teardown frees the session: it must return 0. */
}

/* ---------------------------------------- acquiring without a server */

static void test_acquire_times_out(void **state)
{
    fixture_t *fx = *state;
    zkr_lock_t *l = fx->l;
    char buf[ZKR_NODE_MAX];
    struct pollfd p;
    int64_t t0, took;

    t0 = now_ms();
    assert_rc(zkr_lock_acquire(l, 200), ZKR_ETIMEDOUT);
    took = now_ms() - t0;
    if (took < 190 || took > 3000)
        fail_msg("acquire(200) took %lld ms", (long long)took);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_rc(zkr_lock_node(l, buf, sizeof(buf)), ZKR_ENOTHELD);
    assert_rc(zkr_lock_release(l), ZKR_ENOTHELD);
    p.fd = zkr_lock_fd(l);
    p.events = POLLIN;
    p.revents = 0;
    assert_int_equal(poll(&p, 1, 0), 0);
    assert_int_equal(zkr_session_counter(fx->s, ZKR_COUNTER_CREATES), 0);
}

static void test_acquire_async_cancel(void **state)
{
    fixture_t *fx = *state;
    zkr_lock_t *l = fx->l;
    int64_t token = 42;
    char buf[ZKR_NODE_MAX];
    static record_t r, r2; /* outlive a failed test's callbacks */

    record_init(&r);
    record_init(&r2);
    assert_rc(zkr_lock_acquire_async(l, -1, on_lock_done, &r), 0);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_ACQUIRING);
    assert_rc(zkr_lock_acquire(l, 0), ZKR_EALREADY);
    assert_rc(zkr_lock_acquire(l, -1), ZKR_EALREADY);
    assert_rc(zkr_lock_acquire_async(l, 100, on_lock_done, &r2), ZKR_EALREADY);
    assert_rc(zkr_lock_release(l), ZKR_ESTATE);
    assert_rc(zkr_lock_release_async(l, on_lock_done, &r2), ZKR_ESTATE);
    assert_rc(zkr_lock_token(l, &token), ZKR_ENOTHELD);
    assert_rc(zkr_lock_node(l, buf, sizeof(buf)), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_valid_ms(l), 0);
    assert_rc(zkr_session_free(fx->s), ZKR_EINUSE);

    assert_rc(zkr_lock_cancel(l), 0);
    assert_int_equal(record_wait(&r, 1, 5000), 1);
    assert_rc(r.rc, ZKR_ECANCELED);
    assert_ptr_equal(r.l, l);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_rc(zkr_lock_cancel(l), ZKR_ESTATE);
    /* Exactly once, and the refused calls never ran theirs. */
    assert_int_equal(record_wait(&r, 2, 100), 1);
    assert_int_equal(record_calls(&r2), 0);
    record_destroy(&r);
    record_destroy(&r2);
}

static void test_free_cancels_pending_acquire(void **state)
{
    fixture_t *fx = *state;
    static record_t r; /* outlives a failed test's pending callbacks */

    record_init(&r);
    assert_rc(zkr_lock_acquire_async(fx->l, -1, on_lock_done, &r), 0);
    zkr_lock_free(fx->l);
    /* The completion ran before zkr_lock_free returned. */
    assert_int_equal(record_calls(&r), 1);
    assert_rc(r.rc, ZKR_ECANCELED);
    fx->l = NULL;
    record_destroy(&r);
}

/* What the blocking calls answered when made from a completion. */
typedef struct cb_probe {
    record_t r; /* the completion itself */
    zkr_session_t *s;
    int rc_first;
    int acquire_100, acquire_forever, acquire_try, release;
    int wait_connected, session_free, list, lock_list;
    int wait_connected_0, state, async_again;
    record_t again;
} cb_probe_t;

static void on_probe_done(int rc, zkr_lock_t *l, void *data)
{
    cb_probe_t *p = data;
    zkr_contender_t *v = NULL;
    int n = 0;

    p->rc_first = rc;
    p->acquire_100 = zkr_lock_acquire(l, 100);
    p->acquire_forever = zkr_lock_acquire(l, -1);
    p->acquire_try = zkr_lock_acquire(l, 0);
    p->release = zkr_lock_release(l);
    p->wait_connected = zkr_session_wait_connected(p->s, 100);
    p->wait_connected_0 = zkr_session_wait_connected(p->s, 0);
    p->session_free = zkr_session_free(p->s);
    p->list = zkr_contenders_list(p->s, LOCK_PATH, &v, &n);
    zkr_contenders_free(v, n);
    v = NULL;
    p->lock_list = zkr_lock_contenders(l, &v, &n);
    zkr_contenders_free(v, n);
    p->state = (int)zkr_lock_state(l);
    /* The asynchronous variants are callable from callbacks. */
    p->async_again = zkr_lock_acquire_async(l, 50, on_lock_done, &p->again);
    on_lock_done(rc, l, &p->r);
}

static void test_callback_blocking_calls(void **state)
{
    fixture_t *fx = *state;
    static cb_probe_t p; /* outlives a failed test's callbacks */

    memset(&p, 0, sizeof(p));
    record_init(&p.r);
    record_init(&p.again);
    p.s = fx->s;
    assert_rc(zkr_lock_acquire_async(fx->l, 50, on_probe_done, &p), 0);
    assert_int_equal(record_wait(&p.r, 1, 5000), 1);
    assert_int_equal(record_wait(&p.again, 1, 5000), 1);
    assert_rc(p.rc_first, ZKR_ETIMEDOUT);
    assert_rc(p.acquire_100, ZKR_EDEADLK);
    assert_rc(p.acquire_forever, ZKR_EDEADLK);
    assert_rc(p.release, ZKR_EDEADLK);
    assert_rc(p.wait_connected, ZKR_EDEADLK);
    assert_rc(p.session_free, ZKR_EDEADLK);
    assert_rc(p.list, ZKR_EDEADLK);
    assert_rc(p.lock_list, ZKR_EDEADLK);
    assert_int_equal(p.state, ZKR_LOCK_IDLE);
    assert_rc(p.async_again, 0);
    assert_rc(p.again.rc, ZKR_ETIMEDOUT);
    /* "check only" never blocks: allowed, and not connected. */
    assert_rc(p.wait_connected_0, ZKR_ETIMEDOUT);
    record_destroy(&p.r);
    record_destroy(&p.again);
}

/* zkr_lock_acquire(l, 0) still waits for round trips to the server (up to
 * the session timeout when the connection drops half-way), so it blocks:
 * include/zkr.h promises ZKR_EDEADLK from a callback for zkr_lock_acquire
 * without exception, and the thread contract says every blocking call
 * returns it there. */
static void test_callback_try_acquire(void **state)
{
    fixture_t *fx = *state;
    static cb_probe_t p; /* outlives a failed test's callbacks */

    memset(&p, 0, sizeof(p));
    record_init(&p.r);
    record_init(&p.again);
    p.s = fx->s;
    assert_rc(zkr_lock_acquire_async(fx->l, 50, on_probe_done, &p), 0);
    assert_int_equal(record_wait(&p.r, 1, 5000), 1);
    assert_int_equal(record_wait(&p.again, 1, 5000), 1);
    assert_rc(p.acquire_try, ZKR_EDEADLK);
    record_destroy(&p.r);
    record_destroy(&p.again);
}

/* Election, observer, semaphore, read/write lock and fencing entry points:
 * NULL handles and bad arguments give documented codes, never a crash. */
static void obs_noop(zkr_observer_t *o, const char *id, int64_t epoch,
                     void *data)
{
    (void)o;
    (void)id;
    (void)epoch;
    (void)data;
}

static int leader_noop(zkr_election_t *e, void *data)
{
    (void)e;
    (void)data;
    return 0;
}

static void test_other_recipes_bad_args(void **state)
{
    fixture_t *fx = *state;
    zkr_election_t *e = NULL;
    zkr_observer_t *o = NULL;
    zkr_lock_t *a = NULL, *b = NULL;
    zkr_sequencer_t q;
    zoo_op_t op;
    zoo_op_result_t res;
    int64_t v;

    /* NULL handles */
    assert_int_equal(zkr_election_join(NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_election_leave(NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_election_is_leader(NULL), 0);
    assert_int_equal(zkr_election_await(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_election_set_listener(NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_election_epoch(NULL, &v), ZBADARGUMENTS);
    assert_int_equal(zkr_election_sequencer(NULL, &q), ZBADARGUMENTS);
    assert_int_equal(zkr_election_fd(NULL), -1);
    assert_int_equal(zkr_election_run(NULL, leader_noop, NULL, 0),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_election_participants(NULL, NULL, NULL),
                     ZBADARGUMENTS);
    zkr_election_free(NULL);
    zkr_observer_free(NULL);
    assert_int_equal(zkr_lock_sequencer(NULL, &q), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_guarded_multi(NULL, 1, &op, &res), ZBADARGUMENTS);
    assert_int_equal(zkr_sequencer_check(NULL, &q), ZBADARGUMENTS);

    /* Bad arguments, with a real (never connected) session */
    assert_int_equal(
        zkr_election_new(&e, fx->s, "relative", NULL, NULL, ZKR_POLICY_SUSPEND),
        ZBADARGUMENTS);
    assert_int_equal(
        zkr_election_new(&e, fx->s, "/e", NULL, NULL, (zkr_loss_policy_t)7),
        ZBADARGUMENTS);
    assert_int_equal(
        zkr_election_new(NULL, fx->s, "/e", NULL, NULL, ZKR_POLICY_SUSPEND),
        ZBADARGUMENTS);
    assert_null(e);
    assert_int_equal(zkr_observer_new(&o, fx->s, "/e/", obs_noop, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_observer_new(&o, fx->s, "/e", NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_observer_new(&o, NULL, "/e", obs_noop, NULL),
                     ZBADARGUMENTS);
    assert_null(o);
    assert_int_equal(zkr_semaphore_new(&a, fx->s, "/s", 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_semaphore_new(&a, fx->s, "/s", -3, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_semaphore_new(&a, fx->s, "s", 2, NULL, NULL),
                     ZBADARGUMENTS);
    assert_null(a);
    assert_int_equal(zkr_rwlock_new(NULL, &b, fx->s, "/rw", NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_rwlock_new(&a, &b, fx->s, "/rw/", NULL, NULL),
                     ZBADARGUMENTS);
    assert_null(a);
    assert_null(b);

    /* Valid handles, calls in the wrong state */
    assert_int_equal(
        zkr_election_new(&e, fx->s, "/e", "me", NULL, ZKR_POLICY_SESSION), 0);
    assert_int_equal(zkr_election_leave(e), ZKR_ESTATE);
    assert_int_equal(zkr_election_await(e, 0), ZKR_ESTATE);
    assert_int_equal(zkr_election_epoch(e, &v), ZKR_ENOTHELD);
    assert_int_equal(zkr_election_sequencer(e, &q), ZKR_ENOTHELD);
    assert_int_equal(zkr_election_await(e, -5), ZBADARGUMENTS);
    zkr_election_free(e);
    assert_int_equal(zkr_rwlock_new(&a, &b, fx->s, "/rw", NULL, NULL), 0);
    assert_int_equal(zkr_lock_release(a), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_sequencer(b, &q), ZKR_ENOTHELD);
    zoo_set_op_init(&op, "/x", "1", 1, -1, NULL);
    assert_int_equal(zkr_lock_guarded_multi(a, 1, &op, &res), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_guarded_multi(a, 0, &op, &res), ZBADARGUMENTS);
    zkr_lock_free(a);
    zkr_lock_free(b);
}

/* ------------------------------------------- the zkr command's values */

/* Seconds to ms in 64 bits: every accepted value is exact and positive
 * (--grace 3000000 was -2147483648 ms in an int), fractions round up,
 * and everything outside [0, 10^7] s is refused. */
static void test_cli_parse_seconds(void **state)
{
    static const struct {
        const char *s;
        int64_t ms;
    } good[] = {
        {"0", 0},
        {"0.0001", 1},
        {"1.5", 1500},
        {"2147483", 2147483000},
        {"2147484", INT64_C(2147484000)},
        {"3000000", INT64_C(3000000000)},
        {"10000000", INT64_C(10000000000)},
    };
    static const char *const bad[] = {
        "", "-1", "10000000.001", "1e8", "abc", "1s", "nan", "inf", " 1", "+1",
    };
    int64_t ms;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ms = -7;
        if (cli_parse_seconds(good[i].s, &ms) != 0 || ms != good[i].ms)
            fail_msg("'%s' -> %lld ms, want %lld", good[i].s, (long long)ms,
                     (long long)good[i].ms);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ms = -7;
        if (cli_parse_seconds(bad[i], &ms) != -1 || ms != -7)
            fail_msg("'%s' accepted (%lld ms)", bad[i], (long long)ms);
    }
    assert_int_equal(cli_parse_seconds(NULL, &ms), -1);
}

/* A wait the library's int cannot hold is "forever" for the library
 * (zkr bounds it itself); every other value passes unchanged. */
static void test_cli_timeout_arg(void **state)
{
    (void)state;
    assert_int_equal(cli_timeout_arg(-1), -1);
    assert_int_equal(cli_timeout_arg(0), 0);
    assert_int_equal(cli_timeout_arg(2147483000), 2147483000);
    assert_int_equal(cli_timeout_arg(INT32_MAX), INT32_MAX);
    assert_int_equal(cli_timeout_arg(INT64_C(2147483648)), -1);
    assert_int_equal(cli_timeout_arg(INT64_C(10000000000)), -1);
}

static void test_cli_parse_int(void **state)
{
    long v = -7;

    (void)state;
    assert_int_equal(cli_parse_int("255", 0, 255, &v), 0);
    assert_int_equal(v, 255);
    assert_int_equal(cli_parse_int("256", 0, 255, &v), -1);
    assert_int_equal(cli_parse_int("-1", 0, 255, &v), -1);
    assert_int_equal(cli_parse_int("99999999999999999999", 0, 255, &v), -1);
    assert_int_equal(cli_parse_int("4x", 0, 255, &v), -1);
    assert_int_equal(cli_parse_int("", 0, 255, &v), -1);
    assert_int_equal(v, 255);
}

/* Escaped output never holds a control character: one value, one line. */
static void test_cli_escape(void **state)
{
    char buf[256];
    FILE *f = fmemopen(buf, sizeof(buf), "w");

    (void)state;
    assert_non_null(f);
    cli_escape(f, "a\nzkr: forged\r\t\x1b[1m\\ end");
    fclose(f);
    assert_string_equal(buf, "a\\nzkr: forged\\r\\t\\x1b[1m\\\\ end");
}

/* Valid UTF-8 passes; C1 controls (a CSI, U+009B) and bytes that are not
 * UTF-8 (a lone continuation, an overlong '/', a surrogate, a truncated
 * sequence) are escaped byte by byte. */
static void test_cli_escape_utf8(void **state)
{
    char *e;

    (void)state;
    e = cli_escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x92");
    assert_string_equal(e, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x92");
    free(e);
    e = cli_escaped("\xc2\x9b"
                    "1m \x80 \xc0\xaf \xed\xa0\x80 \xe2\x82");
    assert_string_equal(e, "\\u009b1m \\x80 \\xc0\\xaf \\xed\\xa0\\x80 "
                           "\\xe2\\x82");
    free(e);
    assert_int_equal(cli_utf8_len("\xf4\x8f\xbf\xbf"), 4);
    assert_int_equal(cli_utf8_len("\xf4\x90\x80\x80"), 0); /* > U+10FFFF */
    assert_int_equal(cli_utf8_len("\xe0\x80\x80"), 0);     /* overlong */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_parse_seconds),
        cmocka_unit_test(test_cli_timeout_arg),
        cmocka_unit_test(test_cli_parse_int),
        cmocka_unit_test(test_cli_escape),
        cmocka_unit_test(test_cli_escape_utf8),
        cmocka_unit_test(test_null_session),
        cmocka_unit_test(test_null_lock),
        cmocka_unit_test(test_null_contenders),
        cmocka_unit_test(test_session_open_bad_args),
        cmocka_unit_test(test_session_open_timeout),
        cmocka_unit_test(test_session_adopt_bad_args),
        cmocka_unit_test_setup_teardown(test_adopted_session_queries, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_adopted_session_expired_event,
                                        fx_setup, fx_teardown),
        cmocka_unit_test(test_session_free_notifies_closed),
        cmocka_unit_test_setup_teardown(test_lock_new_bad_args, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_lock_idle_calls, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_session_free_in_use, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_acquire_times_out, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_acquire_async_cancel, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_free_cancels_pending_acquire,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_callback_blocking_calls, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_other_recipes_bad_args, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_callback_try_acquire, fx_setup,
                                        fx_teardown),
    };

    zkt_test_filter();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
