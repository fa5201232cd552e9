/* Integration tests of the double barrier (zkr_dbarrier_*) against a real
 * ZooKeeper server started by the harness, with the fault proxy in front
 * of it for cut connections. The oracles are the rules of zkr.h's
 * zkr_dbarrier group: a participant is an ephemeral child of the path
 * named by 32 hex digits holding the id; enter returns 0 once "ready"
 * exists or count participants are there (it then makes "ready"),
 * ZKR_ETIMEDOUT with its node removed when fewer came by its timeout;
 * leave deletes the node and returns 0 once no participant is left,
 * deleting "ready"; a participant that dies counts as leaving; free
 * deletes the node. Another client's reads and writes are a raw
 * ZooKeeper handle's (`raw`). Waits derive from the session timeout. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"

enum { ST = 10000 }; /* the session timeout of most tests */

static zkr_dbarrier_t *new_dbarrier(zkr_session_t *s, const char *path, int n,
                                    const char *id)
{
    zkr_dbarrier_t *d = NULL;

    assert_int_equal(zkr_dbarrier_new(&d, s, path, n, id, NULL), 0);
    return d;
}

/* The participants under path, as another client lists them: the
 * children but "ready". */
static int participants(const char *path)
{
    struct String_vector v = {0, NULL};
    int n = 0, rc = zoo_get_children(raw, path, 0, &v);

    assert_true(rc == ZOK || rc == ZNONODE);
    for (int i = 0; i < v.count; i++)
        n += strcmp(v.data[i], "ready") != 0;
    deallocate_String_vector(&v);
    return n;
}

static void child_path(char *buf, size_t len, const char *path,
                       const zkr_dbarrier_t *d)
{
    snprintf(buf, len, "%s/%s", path, zkr_dbarrier_name(d));
}

/* A blocking enter or leave on its own thread. */
typedef struct {
    zkr_dbarrier_t *d;
    int leave;
    int timeout_ms;
    pthread_t t;
    atomic_int done;
    atomic_int rc;
} runner_t;

static void *runner_main(void *arg)
{
    runner_t *r = arg;

    atomic_store(&r->rc, r->leave ? zkr_dbarrier_leave(r->d, r->timeout_ms)
                                  : zkr_dbarrier_enter(r->d, r->timeout_ms));
    atomic_store(&r->done, 1);
    return NULL;
}

static void start(runner_t *r, zkr_dbarrier_t *d, int leave, int timeout_ms)
{
    memset(r, 0, sizeof(*r));
    r->d = d;
    r->leave = leave;
    r->timeout_ms = timeout_ms;
    atomic_store(&r->rc, 12345);
    assert_int_equal(pthread_create(&r->t, NULL, runner_main, r), 0);
}

/* Joins the runner, which must end within bound_ms; returns its rc. */
static int join(runner_t *r, int bound_ms)
{
    if (!ZKT_WAIT_UNTIL(atomic_load(&r->done), bound_ms)) {
        print_message("# the operation did not end within %d ms\n", bound_ms);
        fail();
    }
    pthread_join(r->t, NULL);
    return atomic_load(&r->rc);
}

/* Still running after a while (a round trip or more of the others). */
static void still_running(runner_t *r)
{
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(atomic_load(&r->done));
}

/* No watch of sid on path, and none comes back for a while. */
static void no_watch_left(int64_t sid, const char *path)
{
    assert_true(ZKT_WAIT_UNTIL(!session_watches(sid, path), zkt_scaled_ms(ST)));
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(session_watches(sid, path));
}

/* ------------------------------------------------------------- enter */

/* Three participants on three sessions: the first two wait until the
 * third has entered; then "ready" stands and each node is an ephemeral
 * child named by 32 hex digits holding its id. */
static void test_enter_waits_for_count(void **state)
{
    const char *p = "/t/dbar/three";
    zkr_session_t *s[3];
    zkr_dbarrier_t *d[3];
    runner_t r[3];
    char ids[3][16], node[256], data[16];
    int len;
    struct Stat st;

    (void)state;
    for (int i = 0; i < 3; i++) {
        snprintf(ids[i], sizeof(ids[i]), "w%d", i);
        s[i] = open_session(ST);
        d[i] = new_dbarrier(s[i], p, 3, ids[i]);
    }
    start(&r[0], d[0], 0, -1);
    start(&r[1], d[1], 0, -1);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 2, zkt_scaled_ms(ST)));
    still_running(&r[0]);
    still_running(&r[1]);
    assert_false(raw_exists("/t/dbar/three/ready"));
    start(&r[2], d[2], 0, -1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(join(&r[i], zkt_scaled_ms(2 * ST)), 0);
    assert_true(raw_exists("/t/dbar/three/ready"));
    assert_int_equal(participants(p), 3);
    for (int i = 0; i < 3; i++) {
        const char *name = zkr_dbarrier_name(d[i]);

        assert_int_equal(strlen(name), 32);
        assert_int_equal(strspn(name, "0123456789abcdef"), 32);
        child_path(node, sizeof(node), p, d[i]);
        len = sizeof(data);
        assert_int_equal(zoo_get(raw, node, 0, data, &len, &st), ZOK);
        assert_int_equal(len, 2);
        assert_memory_equal(data, ids[i], 2);
        assert_int_equal(st.ephemeralOwner, zkr_session_id(s[i]));
    }
    /* An enter after the phase began returns at once. */
    assert_int_equal(zkr_dbarrier_enter(d[0], 0), 0);
    assert_int_equal(participants(p), 3);
    for (int i = 0; i < 3; i++) {
        zkr_dbarrier_free(d[i]); /* deletes its node */
        assert_int_equal(zkr_session_free(s[i]), 0);
    }
    assert_int_equal(participants(p), 0);
}

/* One participant with count 1 enters alone; its id defaults to
 * HOST:PID. */
static void test_enter_count_one(void **state)
{
    const char *p = "/t/dbar/one";
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 1, NULL);
    char id[300], data[300];
    int len = sizeof(data);
    char node[256];

    (void)state;
    assert_int_equal(zkr_dbarrier_enter(d, 0), 0);
    assert_true(raw_exists("/t/dbar/one/ready"));
    /* The default id: HOST:PID. */
    gethostname(id, sizeof(id) - 20);
    snprintf(id + strlen(id), 20, ":%ld", (long)getpid());
    child_path(node, sizeof(node), p, d);
    assert_int_equal(zoo_get(raw, node, 0, data, &len, NULL), ZOK);
    assert_int_equal(len, (int)strlen(id));
    assert_memory_equal(data, id, strlen(id));
    assert_int_equal(zkr_dbarrier_leave(d, zkt_scaled_ms(ST)), 0);
    assert_false(raw_exists("/t/dbar/one/ready"));
    assert_int_equal(participants(p), 0);
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Too few by the timeout: ZKR_ETIMEDOUT, its node removed, no "ready",
 * no watch left on "ready"; a timeout of 0 looks once. */
static void test_enter_timeout(void **state)
{
    const char *p = "/t/dbar/few";
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a");
    int64_t t0 = zkt_now_ms();

    (void)state;
    assert_int_equal(zkr_dbarrier_enter(d, 300), ZKR_ETIMEDOUT);
    assert_true(zkt_now_ms() - t0 >= 300);
    assert_int_equal(participants(p), 0);
    assert_false(raw_exists("/t/dbar/few/ready"));
    assert_int_equal(zkr_dbarrier_enter(d, 0), ZKR_ETIMEDOUT);
    assert_int_equal(participants(p), 0);
    no_watch_left(zkr_session_id(s), "/t/dbar/few/ready");
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* "ready" already standing (made by another client): enter at once,
 * whatever the count, as kazoo and Curator do; its exists watch goes. */
static void test_enter_ready_standing(void **state)
{
    const char *p = "/t/dbar/standing";
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 5, "a");

    (void)state;
    raw_ensure(p);
    assert_int_equal(zoo_create(raw, "/t/dbar/standing/ready", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_dbarrier_enter(d, 0), 0);
    assert_int_equal(participants(p), 1);
    no_watch_left(zkr_session_id(s), "/t/dbar/standing/ready");
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A foreign participant node (another client's, as kazoo or Curator
 * make) counts; one that goes before the count does not. */
static void test_foreign_participants(void **state)
{
    const char *p = "/t/dbar/foreign";
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 3, "a");
    runner_t r;

    (void)state;
    start(&r, d, 0, -1);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(zoo_create(raw, "/t/dbar/foreign/k1", "k", 1,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    still_running(&r);
    /* The foreign participant leaves, another comes: still two. */
    assert_int_equal(zoo_delete(raw, "/t/dbar/foreign/k1", -1), ZOK);
    assert_int_equal(zoo_create(raw, "/t/dbar/foreign/k2", "k", 1,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    still_running(&r);
    /* The third makes "ready" as kazoo does (an ensure_path): 0. */
    assert_int_equal(zoo_create(raw, "/t/dbar/foreign/k3", "k", 1,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_create(raw, "/t/dbar/foreign/ready", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    /* Leave waits for the foreign participants. */
    start(&r, d, 1, -1);
    still_running(&r);
    assert_int_equal(participants(p), 2);
    assert_int_equal(zoo_delete(raw, "/t/dbar/foreign/k2", -1), ZOK);
    still_running(&r);
    assert_int_equal(zoo_delete(raw, "/t/dbar/foreign/k3", -1), ZOK);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_false(raw_exists("/t/dbar/foreign/ready"));
    no_watch_left(zkr_session_id(s), p);
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Another client deletes the waiting participant's node: it is made
 * again (the participant is still entering), so that the next one's
 * count finds both. */
static void test_own_node_deleted_while_waiting(void **state)
{
    const char *p = "/t/dbar/deleted";
    zkr_session_t *s = open_session(ST), *s2 = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a"),
                   *d2 = new_dbarrier(s2, p, 2, "b");
    runner_t r;
    char node[256];
    struct Stat st;
    int64_t czxid;

    (void)state;
    start(&r, d, 0, -1);
    child_path(node, sizeof(node), p, d);
    assert_true(ZKT_WAIT_UNTIL(raw_exists(node), zkt_scaled_ms(ST)));
    assert_int_equal(raw_stat(node, &st), ZOK);
    czxid = st.czxid;
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(raw_stat(node, &st) == ZOK && st.czxid != czxid,
                               zkt_scaled_ms(ST)));
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    still_running(&r);
    assert_int_equal(zkr_dbarrier_enter(d2, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(participants(p), 2);
    /* The ended enter left no watch on its node nor on "ready". */
    no_watch_left(zkr_session_id(s), node);
    no_watch_left(zkr_session_id(s), "/t/dbar/deleted/ready");
    zkr_dbarrier_free(d);
    zkr_dbarrier_free(d2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
    assert_int_equal(participants(p), 0);
}

/* ------------------------------------------------------------- leave */

/* Leave waits until every participant has left; the last one's leave
 * deletes "ready". A participant whose session ends counts as leaving. */
static void test_leave_waits_for_all(void **state)
{
    const char *p = "/t/dbar/leave";
    zkr_session_t *s[3];
    zkr_dbarrier_t *d[3];
    runner_t r[3];

    (void)state;
    for (int i = 0; i < 3; i++) {
        s[i] = open_session(ST);
        d[i] = new_dbarrier(s[i], p, 3, NULL);
    }
    start(&r[0], d[0], 0, -1);
    start(&r[1], d[1], 0, -1);
    assert_int_equal(zkr_dbarrier_enter(d[2], zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(join(&r[0], zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(join(&r[1], zkt_scaled_ms(2 * ST)), 0);
    start(&r[0], d[0], 1, -1);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 2, zkt_scaled_ms(ST)));
    still_running(&r[0]);
    start(&r[1], d[1], 1, -1);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 1, zkt_scaled_ms(ST)));
    still_running(&r[0]);
    still_running(&r[1]);
    assert_true(raw_exists("/t/dbar/leave/ready"));
    /* The third's session expires (its handle lives on): its node goes
     * with the session, and is not made again on the new one. */
    expire(s[2]);
    assert_int_equal(join(&r[0], zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(join(&r[1], zkt_scaled_ms(2 * ST)), 0);
    zkr_dbarrier_free(d[2]);
    assert_int_equal(zkr_session_free(s[2]), 0);
    assert_false(raw_exists("/t/dbar/leave/ready"));
    assert_int_equal(participants(p), 0);
    for (int i = 0; i < 2; i++) {
        no_watch_left(zkr_session_id(s[i]), p);
        zkr_dbarrier_free(d[i]);
        assert_int_equal(zkr_session_free(s[i]), 0);
    }
}

/* A leave with others left by its timeout: ZKR_ETIMEDOUT, its own node
 * deleted; a leave of a handle that never entered waits for the others. */
static void test_leave_timeout(void **state)
{
    const char *p = "/t/dbar/leave-to";
    zkr_session_t *a = open_session(ST), *b = open_session(ST);
    zkr_dbarrier_t *da = new_dbarrier(a, p, 2, "a"),
                   *db = new_dbarrier(b, p, 2, "b");
    runner_t r;

    (void)state;
    start(&r, da, 0, -1);
    assert_int_equal(zkr_dbarrier_enter(db, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(zkr_dbarrier_leave(da, 300), ZKR_ETIMEDOUT);
    assert_int_equal(participants(p), 1);
    assert_int_equal(zkr_dbarrier_leave(da, 0), ZKR_ETIMEDOUT);
    no_watch_left(zkr_session_id(a), p);
    assert_int_equal(zkr_dbarrier_leave(db, zkt_scaled_ms(ST)), 0);
    assert_int_equal(zkr_dbarrier_leave(da, 0), 0);
    zkr_dbarrier_free(da);
    zkr_dbarrier_free(db);
    assert_int_equal(zkr_session_free(a), 0);
    assert_int_equal(zkr_session_free(b), 0);
}

/* ----------------------------------------------------------- faults */

/* The entering participant's connection is cut while the others enter:
 * its watch tells it once connected, on the same session. */
static void test_enter_through_cut_connection(void **state)
{
    const char *p = "/t/dbar/cut";
    zkr_session_t *s = open_proxied(ST), *s2 = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a"),
                   *d2 = new_dbarrier(s2, p, 2, "b");
    int64_t sid;
    runner_t r;

    (void)state;
    start(&r, d, 0, zkt_scaled_ms(6 * ST));
    assert_true(ZKT_WAIT_UNTIL(
        participants(p) == 1 &&
            session_watches(zkr_session_id(s), "/t/dbar/cut/ready"),
        zkt_scaled_ms(ST)));
    sid = zkr_session_id(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkr_dbarrier_enter(d2, zkt_scaled_ms(2 * ST)), 0);
    zkt_sleep_ms(ST / 10);
    assert_false(atomic_load(&r.done));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(zkr_session_id(s), sid);
    assert_int_equal(participants(p), 2);
    zkr_dbarrier_free(d);
    zkr_dbarrier_free(d2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* The entering participant's session expires: its node goes with it, and
 * it makes it again on the new session (one node, no phantom), so the
 * next participant opens the phase with exactly two. */
static void test_enter_through_expiry(void **state)
{
    const char *p = "/t/dbar/expiry";
    zkr_session_t *s = open_session(6000), *s2 = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a"),
                   *d2 = new_dbarrier(s2, p, 2, "b");
    int64_t sid;
    runner_t r;
    char node[256];
    struct Stat st;

    (void)state;
    start(&r, d, 0, zkt_scaled_ms(6 * ST));
    child_path(node, sizeof(node), p, d);
    assert_true(ZKT_WAIT_UNTIL(
        session_watches(zkr_session_id(s), "/t/dbar/expiry/ready"),
        zkt_scaled_ms(ST)));
    sid = zkr_session_id(s);
    expire(s);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_id(s) != sid &&
                                   raw_stat(node, &st) == ZOK &&
                                   st.ephemeralOwner == zkr_session_id(s),
                               zkt_scaled_ms(3 * ST)));
    assert_int_equal(participants(p), 1);
    still_running(&r);
    assert_int_equal(zkr_dbarrier_enter(d2, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(participants(p), 2);
    zkr_dbarrier_free(d);
    zkr_dbarrier_free(d2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* The create's answer is lost with the connection: once connected again
 * the create finds the node, which is its own (this session's): one
 * node. */
static void test_create_answer_lost(void **state)
{
    const char *p = "/t/dbar/lost";
    zkr_session_t *s = open_proxied(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 1, "a");
    char node[256];
    struct Stat st;

    (void)state;
    raw_ensure(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zkr_dbarrier_enter(d, zkt_scaled_ms(3 * ST)), 0);
    child_path(node, sizeof(node), p, d);
    assert_int_equal(raw_stat(node, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    assert_int_equal(participants(p), 1);
    zkr_dbarrier_free(d);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 0, zkt_scaled_ms(ST)));
    assert_int_equal(zkr_session_free(s), 0);
}

/* Not connected by the enter's timeout: ZKR_ETIMEDOUT, and its node is
 * deleted by the session's cleanup once connected. */
static void test_enter_timeout_while_cut(void **state)
{
    const char *p = "/t/dbar/cut-to";
    zkr_session_t *s = open_proxied(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a");
    runner_t r;

    (void)state;
    start(&r, d, 0, ST / 5);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), ZKR_ETIMEDOUT);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 0, zkt_scaled_ms(2 * ST)));
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A server restart while two wait: both enter once the third comes. */
static void test_server_restart(void **state)
{
    const char *p = "/t/dbar/restart";
    zkr_session_t *s[3];
    zkr_dbarrier_t *d[3];
    runner_t r[2];

    (void)state;
    for (int i = 0; i < 3; i++) {
        s[i] = open_session(ST);
        d[i] = new_dbarrier(s[i], p, 3, NULL);
    }
    start(&r[0], d[0], 0, -1);
    start(&r[1], d[1], 0, -1);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 2, zkt_scaled_ms(ST)));
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_int_equal(zkr_dbarrier_enter(d[2], zkt_scaled_ms(3 * ST)), 0);
    assert_int_equal(join(&r[0], zkt_scaled_ms(3 * ST)), 0);
    assert_int_equal(join(&r[1], zkt_scaled_ms(3 * ST)), 0);
    assert_int_equal(participants(p), 3);
    for (int i = 0; i < 3; i++) {
        zkr_dbarrier_free(d[i]);
        assert_int_equal(zkr_session_free(s[i]), 0);
    }
}

/* Review 1: the waiting participant's node is deleted by another client,
 * and the next participant comes before it is made again (its requests
 * delayed): it must count again with its new node, or both wait for ever
 * with two present. */
static void test_recount_after_node_deleted(void **state)
{
    const char *p = "/t/dbar/recount";
    zkr_session_t *s = open_proxied(ST), *s2 = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a"),
                   *d2 = new_dbarrier(s2, p, 2, "b");
    runner_t r;
    char node[256];

    (void)state;
    start(&r, d, 0, zkt_scaled_ms(6 * ST));
    child_path(node, sizeof(node), p, d);
    assert_true(ZKT_WAIT_UNTIL(
        raw_exists(node) &&
            session_watches(zkr_session_id(s), "/t/dbar/recount/ready"),
        zkt_scaled_ms(ST)));
    zkt_sleep_ms(zkt_scaled_ms(300)); /* its count is answered */
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 500"), 0);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_int_equal(zkr_dbarrier_enter(d2, zkt_scaled_ms(3 * ST)), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(3 * ST)), 0);
    assert_int_equal(participants(p), 2);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_dbarrier_free(d);
    zkr_dbarrier_free(d2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* Review 1: a phase that others begin and end right after this
 * participant's node is made (kazoo's leave deletes "ready" first, and a
 * participant not the lowest then deletes its node): it was counted, and
 * must enter (its watch on "ready", set before its create, tells it). */
static void test_phase_begun_and_ended_at_once(void **state)
{
    const char *p = "/t/dbar/blink";
    zkr_session_t *s = open_proxied(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a");
    runner_t r;
    char node[256];

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    start(&r, d, 0, zkt_scaled_ms(6 * ST));
    child_path(node, sizeof(node), p, d);
    assert_true(ZKT_WAIT_UNTIL(raw_exists(node), zkt_scaled_ms(2 * ST)));
    /* The other participant, as kazoo would: its node, "ready", its
     * phase, its leave. */
    assert_int_equal(zoo_create(raw, "/t/dbar/blink/k", "k", 1,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_create(raw, "/t/dbar/blink/ready", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_delete(raw, "/t/dbar/blink/ready", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/dbar/blink/k", -1), ZOK);
    assert_int_equal(join(&r, zkt_scaled_ms(3 * ST)), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Review 1: a participant node no one may read (another client's, with
 * its own ACL): the checks are refused, and "ready" is made without them,
 * as kazoo and Curator do. */
static void test_unreadable_participant(void **state)
{
    const char *p = "/t/dbar/noread";
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a");
    struct ACL noread = {ZOO_PERM_WRITE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN |
                             ZOO_PERM_CREATE,
                         {"world", "anyone"}};
    struct ACL_vector acl = {1, &noread};

    (void)state;
    raw_ensure(p);
    assert_int_equal(zoo_create(raw, "/t/dbar/noread/k", "k", 1, &acl,
                                ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_dbarrier_enter(d, zkt_scaled_ms(2 * ST)), 0);
    assert_true(raw_exists("/t/dbar/noread/ready"));
    assert_int_equal(zoo_delete(raw, "/t/dbar/noread/k", -1), ZOK);
    assert_int_equal(zkr_dbarrier_leave(d, zkt_scaled_ms(ST)), 0);
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Review 2: the handle's own ACL gives no read (its node's check is
 * refused too): "ready" is made with no check at all. A path where it may
 * not create ends the enter with ZNOAUTH. */
static void test_own_node_unreadable(void **state)
{
    const char *p = "/t/dbar/ownnoread", *p2 = "/t/dbar/nocreate";
    zkr_session_t *s = open_session(ST);
    struct ACL noread = {ZOO_PERM_WRITE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN |
                             ZOO_PERM_CREATE,
                         {"world", "anyone"}};
    struct ACL readonly = {ZOO_PERM_READ | ZOO_PERM_DELETE,
                           {"world", "anyone"}};
    struct ACL_vector acl = {1, &noread}, ro = {1, &readonly};
    zkr_dbarrier_t *d = NULL;

    (void)state;
    raw_ensure(p);
    assert_int_equal(zkr_dbarrier_new(&d, s, p, 1, "a", &acl), 0);
    assert_int_equal(zkr_dbarrier_enter(d, zkt_scaled_ms(2 * ST)), 0);
    assert_true(raw_exists("/t/dbar/ownnoread/ready"));
    assert_int_equal(zkr_dbarrier_leave(d, zkt_scaled_ms(ST)), 0);
    zkr_dbarrier_free(d);
    /* A barrier path where no one may create. */
    raw_ensure("/t/dbar");
    assert_int_equal(zoo_create(raw, p2, NULL, -1, &ro, 0, NULL, 0), ZOK);
    assert_int_equal(zkr_dbarrier_new(&d, s, p2, 1, "a", NULL), 0);
    assert_int_equal(zkr_dbarrier_enter(d, zkt_scaled_ms(2 * ST)), ZNOAUTH);
    zkr_dbarrier_free(d);
    assert_int_equal(zoo_delete(raw, p2, -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Review 1: so many long participant paths that the multi of checks
 * would pass the server's request limit (which cuts the connection, on
 * every attempt): "ready" is made without the checks. */
static void test_many_long_participants(void **state)
{
    enum { N = 300 };
    char p[800], name[256], child[1100];
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d;

    (void)state;
    snprintf(p, sizeof(p), "/t/dbar/%0600d", 7);
    d = new_dbarrier(s, p, N, "a");
    raw_ensure(p);
    for (int i = 0; i < N - 1; i++) {
        snprintf(name, sizeof(name), "%0200d", i);
        snprintf(child, sizeof(child), "%s/%s", p, name);
        assert_int_equal(zoo_create(raw, child, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                                    ZOO_EPHEMERAL, NULL, 0),
                         ZOK);
    }
    assert_int_equal(zkr_dbarrier_enter(d, zkt_scaled_ms(2 * ST)), 0);
    snprintf(child, sizeof(child), "%s/ready", p);
    assert_true(raw_exists(child));
    for (int i = 0; i < N - 1; i++) {
        snprintf(name, sizeof(name), "%0200d", i);
        snprintf(child, sizeof(child), "%s/%s", p, name);
        assert_int_equal(zoo_delete(raw, child, -1), ZOK);
    }
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(participants(p), 0);
}

/* ------------------------------------------------------------ the API */

static struct {
    atomic_int n;
    atomic_int rc;
    zkr_dbarrier_t *free_me;
    int deadlk;
} ad;

static void on_done(int rc, void *data)
{
    zkr_dbarrier_t *d = data;

    if (d != NULL && zkr_dbarrier_enter(d, 0) == ZKR_EDEADLK)
        ad.deadlk = 1;
    if (ad.free_me != NULL && ad.free_me == d)
        zkr_dbarrier_free(d);
    atomic_store(&ad.rc, rc);
    atomic_fetch_add(&ad.n, 1);
}

static void reset_ad(void)
{
    atomic_store(&ad.n, 0);
    atomic_store(&ad.rc, 12345);
    ad.free_me = NULL;
    ad.deadlk = 0;
}

/* Asynchronous enter and leave; one operation at a time (ZKR_ESTATE);
 * blocking calls refused in a completion; free from a completion; free
 * during an enter ends it with ZKR_ECANCELED and deletes its node. */
static void test_async(void **state)
{
    const char *p = "/t/dbar/async";
    zkr_session_t *s = open_session(ST), *s2 = open_session(ST);
    zkr_dbarrier_t *d = new_dbarrier(s, p, 2, "a"),
                   *d2 = new_dbarrier(s2, p, 2, "b");

    (void)state;
    reset_ad();
    assert_int_equal(zkr_dbarrier_async(d, ZKR_DBARRIER_ENTER, -1, on_done, d),
                     0);
    assert_int_equal(zkr_dbarrier_async(d, ZKR_DBARRIER_LEAVE, -1, on_done, d),
                     ZKR_ESTATE);
    assert_int_equal(zkr_dbarrier_enter(d, 0), ZKR_ESTATE);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(zkr_dbarrier_enter(d2, zkt_scaled_ms(2 * ST)), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(atomic_load(&ad.rc), 0);
    assert_int_equal(ad.deadlk, 1);
    /* A leave whose completion frees the handle. */
    reset_ad();
    ad.free_me = d;
    assert_int_equal(zkr_dbarrier_async(d, ZKR_DBARRIER_LEAVE, -1, on_done, d),
                     0);
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(atomic_load(&ad.n), 0);
    assert_int_equal(zkr_dbarrier_leave(d2, zkt_scaled_ms(ST)), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(atomic_load(&ad.rc), 0);
    /* Free during an enter. */
    reset_ad();
    assert_int_equal(zkr_dbarrier_new(&d, s, p, 2, "a", NULL), 0);
    assert_int_equal(
        zkr_dbarrier_async(d, ZKR_DBARRIER_ENTER, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 1, zkt_scaled_ms(ST)));
    zkr_dbarrier_free(d);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(atomic_load(&ad.rc), ZKR_ECANCELED);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 0, zkt_scaled_ms(ST)));
    no_watch_left(zkr_session_id(s), "/t/dbar/async/ready");
    zkr_dbarrier_free(d2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* Review 1: a free while a request of the enter is in flight: the enter
 * ends ZKR_ECANCELED and its node is deleted. Its requests delayed 200
 * ms each way (its five requests take 2 s at least), a free at each
 * step; then, delayed 1 s each way, a free as soon as "ready" shows on
 * the server (count 1: its own count made it), while the answer that
 * says it entered is still on its way: ZKR_ECANCELED too (a freed handle
 * takes no part any more). */
static void free_in_flight(zkr_session_t *s, const char *p, int at)
{
    zkr_dbarrier_t *d = new_dbarrier(s, p, 1, "a");

    reset_ad();
    assert_int_equal(
        zkr_dbarrier_async(d, ZKR_DBARRIER_ENTER, -1, on_done, NULL), 0);
    if (at >= 0)
        zkt_sleep_ms(at);
    else
        assert_true(ZKT_WAIT_UNTIL(raw_exists("/t/dbar/inflight/ready"),
                                   zkt_scaled_ms(2 * ST)));
    zkr_dbarrier_free(d);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(atomic_load(&ad.rc), ZKR_ECANCELED);
    assert_true(ZKT_WAIT_UNTIL(participants(p) == 0, zkt_scaled_ms(ST)));
    zoo_delete(raw, "/t/dbar/inflight/ready", -1);
}

static void test_free_with_request_in_flight(void **state)
{
    const char *p = "/t/dbar/inflight";
    zkr_session_t *s = open_proxied(ST);

    (void)state;
    raw_ensure(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 200"), 0);
    for (int at = 100; at <= 1500; at += 350)
        free_in_flight(s, p, at);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 1000"), 0);
    free_in_flight(s, p, -1);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

static void test_bad_arguments(void **state)
{
    zkr_session_t *s = open_session(ST);
    zkr_dbarrier_t *d = NULL;

    (void)state;
    assert_int_equal(zkr_dbarrier_new(NULL, s, "/t/x", 1, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, NULL, "/t/x", 1, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, NULL, 1, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, "/", 1, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, "t/x", 1, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x/", 1, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x", 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x", -3, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x", 1, "", NULL),
                     ZBADARGUMENTS);
    {
        char big[ZKR_ID_MAX + 2], path[ZKR_PATH_MAX];

        memset(big, 'i', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x", 1, big, NULL),
                         ZBADARGUMENTS);
        big[ZKR_ID_MAX] = '\0';
        assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x", 1, big, NULL), 0);
        zkr_dbarrier_free(d);
        d = NULL;
        /* The node's name must fit in a path too. */
        memset(path, 'p', sizeof(path));
        path[0] = '/';
        path[ZKR_PATH_MAX - 33] = '\0';
        assert_int_equal(zkr_dbarrier_new(&d, s, path, 1, NULL, NULL), 0);
        zkr_dbarrier_free(d);
        d = NULL;
        path[ZKR_PATH_MAX - 33] = 'p';
        path[ZKR_PATH_MAX - 32] = '\0';
        assert_int_equal(zkr_dbarrier_new(&d, s, path, 1, NULL, NULL),
                         ZBADARGUMENTS);
    }
    assert_null(d);
    assert_int_equal(zkr_dbarrier_new(&d, s, "/t/x", 1, NULL, NULL), 0);
    assert_int_equal(zkr_dbarrier_enter(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_enter(d, -2), ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_leave(d, -2), ZBADARGUMENTS);
    assert_int_equal(zkr_dbarrier_async(d, ZKR_DBARRIER_ENTER, 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(
        zkr_dbarrier_async(d, (zkr_dbarrier_op_t)7, 0, on_done, NULL),
        ZBADARGUMENTS);
    assert_null(zkr_dbarrier_name(NULL));
    zkr_dbarrier_free(NULL);
    zkr_dbarrier_free(d);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter_waits_for_count),
        cmocka_unit_test(test_enter_count_one),
        cmocka_unit_test(test_enter_timeout),
        cmocka_unit_test(test_enter_ready_standing),
        cmocka_unit_test(test_foreign_participants),
        cmocka_unit_test(test_own_node_deleted_while_waiting),
        cmocka_unit_test(test_leave_waits_for_all),
        cmocka_unit_test(test_leave_timeout),
        cmocka_unit_test(test_enter_through_cut_connection),
        cmocka_unit_test(test_enter_through_expiry),
        cmocka_unit_test(test_create_answer_lost),
        cmocka_unit_test(test_enter_timeout_while_cut),
        cmocka_unit_test(test_server_restart),
        cmocka_unit_test(test_recount_after_node_deleted),
        cmocka_unit_test(test_phase_begun_and_ended_at_once),
        cmocka_unit_test(test_unreadable_participant),
        cmocka_unit_test(test_own_node_unreadable),
        cmocka_unit_test(test_many_long_participants),
        cmocka_unit_test(test_free_with_request_in_flight),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_bad_arguments),
    };

    zkt_test_filter();
    return cmocka_run_group_tests_name("dbarrier", tests, proxy_setup,
                                       proxy_teardown);
}
