/* Integration tests of the barrier (zkr_barrier_*) against a real
 * ZooKeeper server started by the harness, with the fault proxy in front
 * of it for cut connections. The oracles are the rules of zkr.h's
 * zkr_barrier group: a barrier stands while its node exists; set makes
 * it (ephemeral unless ZKR_BARRIER_PERSISTENT) with its missing
 * ancestors, clear deletes it whoever set it, and a wait returns 0 once
 * the node is gone or once it sees another node there (another czxid),
 * ZKR_ETIMEDOUT when its timeout passed with the barrier standing, and
 * leaves no watch behind. Another client's writes are a raw ZooKeeper
 * handle's (`raw`). Waits derive from the session timeout. */
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

static zkr_barrier_t *new_barrier(zkr_session_t *s, const char *path, int flags)
{
    zkr_barrier_t *b = NULL;

    assert_int_equal(zkr_barrier_new(&b, s, path, flags, NULL), 0);
    return b;
}

/* Another client makes the node (persistent) and its missing ancestors. */
static void raw_make(const char *path)
{
    char parent[512];

    snprintf(parent, sizeof(parent), "%s", path);
    *strrchr(parent, '/') = '\0';
    if (parent[0] != '\0')
        raw_ensure(parent);
    assert_int_equal(
        zoo_create(raw, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
}

/* No watch of sid on path, and none comes back for a while (a watch the
 * client still counts as its own is set again on its next connection). */
static void no_watch_left(int64_t sid, const char *path)
{
    if (!ZKT_WAIT_UNTIL(!session_watches(sid, path), zkt_scaled_ms(ST))) {
        char *w = zkt_4lw(server, "wchc");

        print_message("# watch of 0x%llx on %s left:\n%s\n",
                      (unsigned long long)sid, path, w != NULL ? w : "?");
        free(w);
        fail();
    }
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(session_watches(sid, path));
}

/* A blocking wait on its own thread. */
typedef struct {
    zkr_barrier_t *b;
    int timeout_ms;
    pthread_t t;
    atomic_int done;
    int rc;
    int64_t took;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;
    int64_t t0 = zkt_now_ms();

    w->rc = zkr_barrier_wait(w->b, w->timeout_ms);
    w->took = zkt_now_ms() - t0;
    atomic_store(&w->done, 1);
    return NULL;
}

static void start_wait(waiter_t *w, zkr_barrier_t *b, int timeout_ms)
{
    memset(w, 0, sizeof(*w));
    w->b = b;
    w->timeout_ms = timeout_ms;
    w->rc = 12345;
    assert_int_equal(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

/* Joins the waiter, which must end within bound_ms; returns its rc. */
static int join_wait(waiter_t *w, int bound_ms)
{
    if (!ZKT_WAIT_UNTIL(atomic_load(&w->done), bound_ms)) {
        print_message("# the wait did not end within %d ms\n", bound_ms);
        fail(); /* the thread is left behind: the test is lost anyway */
    }
    pthread_join(w->t, NULL);
    return w->rc;
}

/* The waiter's watch is on the server: it is blocked on the barrier. */
static void watching(zkr_session_t *s, const char *path)
{
    assert_true(ZKT_WAIT_UNTIL(session_watches(zkr_session_id(s), path),
                               zkt_scaled_ms(ST)));
}

/* ------------------------------------------------------------- set */

/* Set makes the node, ephemeral and owned by the setter's session, with
 * its missing ancestors (persistent); a second set says it stood. */
static void test_set_ephemeral_by_default(void **state)
{
    const char *p = "/t/bar/deep/er/set";
    zkr_session_t *s = open_session(ST), *o = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0), *ob = new_barrier(o, p, 0);
    struct Stat st;
    int created = -1;

    (void)state;
    assert_false(raw_exists("/t/bar/deep"));
    assert_int_equal(zkr_barrier_set(b, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    assert_int_equal(raw_stat("/t/bar/deep/er", &st), ZOK);
    assert_int_equal(st.ephemeralOwner, 0); /* ancestors: persistent */
    assert_int_equal(raw_stat("/t/bar/deep", &st), ZOK);
    assert_int_equal(st.ephemeralOwner, 0);
    created = -1;
    assert_int_equal(zkr_barrier_set(b, &created), 0);
    assert_int_equal(created, 0);
    assert_int_equal(zkr_barrier_set(b, NULL), 0);
    /* Another session's set: it stood, and it stays the first's. */
    created = -1;
    assert_int_equal(zkr_barrier_set(ob, &created), 0);
    assert_int_equal(created, 0);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    /* A free does not clear; the session's end does. */
    zkr_barrier_free(b);
    assert_true(raw_exists(p));
    assert_int_equal(zkr_session_free(s), 0);
    assert_false(raw_exists(p));
    assert_true(raw_exists("/t/bar/deep/er"));
    /* Set again, by the other session now. */
    created = -1;
    assert_int_equal(zkr_barrier_set(ob, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(o));
    zkr_barrier_free(ob);
    assert_int_equal(zkr_session_free(o), 0);
    assert_false(raw_exists(p));
}

/* ZKR_BARRIER_PERSISTENT: a persistent node, which outlives the setter's
 * session; the ACL given is the barrier's and its new ancestors'. */
static void test_set_persistent(void **state)
{
    const char *p = "/t/bar-pers/a/b";
    struct ACL a[] = {
        {ZOO_PERM_READ | ZOO_PERM_WRITE | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
         ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector acl = {1, a};
    const char *made[] = {"/t/bar-pers", "/t/bar-pers/a", p};
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = NULL;
    struct Stat st;
    int created = -1;

    (void)state;
    assert_int_equal(zkr_barrier_new(&b, s, p, ZKR_BARRIER_PERSISTENT, &acl),
                     0);
    assert_int_equal(zkr_barrier_set(b, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, 0);
    for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
        struct ACL_vector got = {0, NULL};

        assert_int_equal(zoo_get_acl(raw, made[i], &got, &st), ZOK);
        assert_int_equal(got.count, 1);
        assert_int_equal(got.data[0].perms, a[0].perms);
        assert_string_equal(got.data[0].id.scheme, "world");
        assert_string_equal(got.data[0].id.id, "anyone");
        deallocate_ACL_vector(&got);
    }
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_true(raw_exists(p)); /* stands until cleared */
    s = open_session(ST);
    b = new_barrier(s, p, ZKR_BARRIER_PERSISTENT);
    assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    created = -1;
    assert_int_equal(zkr_barrier_set(b, &created), 0);
    assert_int_equal(created, 0);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* A set under an ephemeral node is refused. */
static void test_set_under_ephemeral_parent(void **state)
{
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, "/t/bar-eph/child", 0);
    int created = -1;

    (void)state;
    (void)zoo_create(raw, "/t", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/t/bar-eph", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_barrier_set(b, &created), ZNOCHILDRENFOREPHEMERALS);
    assert_false(raw_exists("/t/bar-eph/child"));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, "/t/bar-eph", -1), ZOK);
}

/* ----------------------------------------------------------- clear */

static void test_clear(void **state)
{
    const char *p = "/t/bar/clear";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int removed = -1;

    (void)state;
    assert_int_equal(zkr_barrier_set(b, NULL), 0);
    assert_int_equal(zkr_barrier_clear(b, &removed), 0);
    assert_int_equal(removed, 1);
    assert_false(raw_exists(p));
    removed = -1;
    assert_int_equal(zkr_barrier_clear(b, &removed), 0); /* absent */
    assert_int_equal(removed, 0);
    assert_int_equal(zkr_barrier_clear(b, NULL), 0);
    /* Set by another client (persistent): cleared all the same. */
    raw_make(p);
    removed = -1;
    assert_int_equal(zkr_barrier_clear(b, &removed), 0);
    assert_int_equal(removed, 1);
    assert_false(raw_exists(p));
    /* A node with a child is no barrier: ZNOTEMPTY, nothing deleted. */
    raw_make(p);
    raw_make("/t/bar/clear/kid");
    removed = -1;
    assert_int_equal(zkr_barrier_clear(b, &removed), ZNOTEMPTY);
    assert_true(raw_exists(p));
    assert_true(raw_exists("/t/bar/clear/kid"));
    assert_int_equal(zoo_delete(raw, "/t/bar/clear/kid", -1), ZOK);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    /* The ancestors stay. */
    assert_true(raw_exists("/t/bar"));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A barrier set by one zkr session is cleared by another. */
static void test_clear_by_other_session(void **state)
{
    const char *p = "/t/bar/cross";
    zkr_session_t *s = open_session(ST), *o = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0), *ob = new_barrier(o, p, 0);
    int removed = -1;

    (void)state;
    assert_int_equal(zkr_barrier_set(b, NULL), 0);
    assert_int_equal(zkr_barrier_clear(ob, &removed), 0);
    assert_int_equal(removed, 1);
    assert_false(raw_exists(p));
    assert_int_equal(zkr_barrier_wait(b, 0), 0);
    zkr_barrier_free(b);
    zkr_barrier_free(ob);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(o), 0);
}

/* ------------------------------------------------------------ wait */

/* No node: 0 at once, whatever the timeout. A standing barrier: a look
 * (0) says ZKR_ETIMEDOUT; a wait of T says so after T, not much later. */
static void test_wait_timeouts(void **state)
{
    const char *p = "/t/bar/wt";
    const int T = zkt_scaled_ms(1500);
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t t0, took;

    (void)state;
    assert_int_equal(zkr_barrier_wait(b, 0), 0);
    assert_int_equal(zkr_barrier_wait(b, T), 0);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_barrier_wait(b, -1), 0);
    assert_true(zkt_now_ms() - t0 < zkt_scaled_ms(ST));
    raw_make(p);
    assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_barrier_wait(b, T), ZKR_ETIMEDOUT);
    took = zkt_now_ms() - t0;
    print_message("# wait of %d ms took %lld ms\n", T, (long long)took);
    assert_true(took >= T);
    assert_true(took < T + 2 * zkt_scaled_ms(ST));
    assert_true(raw_exists(p));
    /* Set by this very handle: the same. */
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(zkr_barrier_set(b, NULL), 0);
    assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    assert_int_equal(zkr_barrier_clear(b, NULL), 0);
    assert_int_equal(zkr_barrier_wait(b, 0), 0);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Another client deletes the node: the waiter returns 0. */
static void test_wait_released_by_foreign_delete(void **state)
{
    const char *p = "/t/bar/rel";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, -1);
    watching(s, p);
    assert_false(atomic_load(&w.done));
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    no_watch_left(zkr_session_id(s), p);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Deleted and made again at once (two requests, then one multi): the
 * waiter returns 0, by the deletion or by the new node's czxid. */
static void test_wait_released_by_delete_and_recreate(void **state)
{
    const char *p = "/t/bar/recr";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, zkt_scaled_ms(6 * ST));
    watching(s, p);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(
        zoo_create(raw, p, "y", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    assert_true(raw_exists(p));
    /* In one transaction: no moment without the node. */
    start_wait(&w, b, zkt_scaled_ms(6 * ST));
    watching(s, p);
    zoo_delete_op_init(&ops[0], p, -1);
    zoo_create_op_init(&ops[1], p, "z", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_multi(raw, 2, ops, res), ZOK);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    assert_true(raw_exists(p));
    no_watch_left(zkr_session_id(s), p);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Another client changes the node's data only: the barrier stands, the
 * waiter keeps waiting (until its timeout, or the node goes). */
static void test_wait_not_released_by_data_change(void **state)
{
    const char *p = "/t/bar/data";
    const int T = zkt_scaled_ms(4000);
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, T);
    watching(s, p);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zoo_set(raw, p, "changed", 7, -1), ZOK);
        zkt_sleep_ms(T / 8);
    }
    assert_int_equal(join_wait(&w, T + 2 * zkt_scaled_ms(ST)), ZKR_ETIMEDOUT);
    assert_true(w.took >= T);
    no_watch_left(zkr_session_id(s), p);
    /* Unlimited: still waiting after a change, released by the delete
     * (the watch was set again after the change fired it). */
    start_wait(&w, b, -1);
    watching(s, p);
    assert_int_equal(zoo_set(raw, p, "again", 5, -1), ZOK);
    zkt_sleep_ms(zkt_scaled_ms(500));
    watching(s, p);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(atomic_load(&w.done));
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* -------------------------------------------------------- ephemeral */

/* The setter's session closes: its barrier clears, its waiters (another
 * session) return 0. Persistent: the node outlives the setter. */
static void test_setter_session_close(void **state)
{
    const char *p = "/t/bar/setter-close";
    zkr_session_t *a = open_session(ST), *s = open_session(ST);
    zkr_barrier_t *ab = new_barrier(a, p, 0), *b = new_barrier(s, p, 0);
    waiter_t w;

    (void)state;
    assert_int_equal(zkr_barrier_set(ab, NULL), 0);
    start_wait(&w, b, zkt_scaled_ms(6 * ST));
    watching(s, p);
    zkr_barrier_free(ab);
    assert_false(atomic_load(&w.done)); /* the free does not clear */
    assert_int_equal(zkr_session_free(a), 0);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    assert_false(raw_exists(p));
    /* Persistent: it stands after its setter's session. */
    a = open_session(ST);
    ab = new_barrier(a, p, ZKR_BARRIER_PERSISTENT);
    assert_int_equal(zkr_barrier_set(ab, NULL), 0);
    zkr_barrier_free(ab);
    assert_int_equal(zkr_session_free(a), 0);
    assert_true(raw_exists(p));
    assert_int_equal(zkr_barrier_wait(b, zkt_scaled_ms(1000)), ZKR_ETIMEDOUT);
    assert_int_equal(zkr_barrier_clear(b, NULL), 0);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The setter's session expires: its barrier clears, a waiter on another
 * session returns 0, and the barrier is not set again on the setter's
 * new session. */
static void test_setter_session_expiry(void **state)
{
    const char *p = "/t/bar/setter-exp";
    zkr_session_t *a = open_session(6000), *s = open_session(ST);
    zkr_barrier_t *ab = new_barrier(a, p, 0), *b = new_barrier(s, p, 0);
    int64_t sid0 = 0;
    struct Stat st;
    int created = -1;
    waiter_t w;

    (void)state;
    assert_int_equal(zkr_barrier_set(ab, NULL), 0);
    sid0 = zkr_session_id(a);
    start_wait(&w, b, zkt_scaled_ms(6 * ST));
    watching(s, p);
    expire(a);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    /* The setter's new session does not set it again. */
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_id(a) != 0 && zkr_session_id(a) != sid0,
                       zkt_scaled_ms(3 * ST)));
    assert_int_equal(zkr_session_wait_connected(a, zkt_scaled_ms(ST)), 0);
    assert_int_equal(zkr_barrier_wait(ab, 0), 0); /* a round trip on it */
    zkt_sleep_ms(zkt_scaled_ms(1000));
    assert_false(raw_exists(p));
    /* It can be set on the new session. */
    assert_int_equal(zkr_barrier_set(ab, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(a));
    zkr_barrier_free(ab);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(a), 0);
    assert_int_equal(zkr_session_free(s), 0);
    assert_false(raw_exists(p));
}

/* ----------------------------------------------------------- faults */

/* The waiter's connection is cut for less than the session timeout and
 * the barrier cleared meanwhile: 0 once it reconnects. */
static void test_wait_through_cut_connection(void **state)
{
    const char *p = "/t/bar/cut";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t sid;
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, zkt_scaled_ms(6 * ST));
    watching(s, p);
    sid = zkr_session_id(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    zkt_sleep_ms(ST / 10);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    zkt_sleep_ms(ST / 10);
    assert_false(atomic_load(&w.done));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(ST)), 0);
    assert_int_equal(zkr_session_id(s), sid); /* the same session */
    no_watch_left(sid, p);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The waiter's session expires while its connection is cut, and another
 * client clears and sets the barrier again meanwhile (a new czxid, no
 * watch to tell): 0 on the new session. */
static void test_wait_through_expiry_with_new_barrier(void **state)
{
    const char *p = "/t/bar/exp-new";
    zkr_session_t *s = open_proxied(6000);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    struct Stat st0, st1;
    int64_t sid0;
    waiter_t w;

    (void)state;
    raw_make(p);
    assert_int_equal(raw_stat(p, &st0), ZOK);
    start_wait(&w, b, zkt_scaled_ms(60000));
    watching(s, p);
    sid0 = zkr_session_id(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    expire(s);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(
        zoo_create(raw, p, "n", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    assert_int_equal(raw_stat(p, &st1), ZOK);
    assert_true(st1.czxid != st0.czxid);
    assert_false(atomic_load(&w.done));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(5 * 6000)), 0);
    assert_true(zkr_session_id(s) != sid0);
    no_watch_left(zkr_session_id(s), p);
    assert_true(raw_exists(p)); /* a wait changes nothing */
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* The answer to a wait's first look is lost (the server set its watch;
 * the reply and the link are gone), and the barrier is cleared and set
 * again before the wait can look again: it never saw the first node, yet
 * the node it finds was made during the call, so the barrier was cleared
 * meanwhile. On the same session (reconnected) and after an expiry. */
static void lost_first_look(int expiry)
{
    const char *p = "/t/bar/lost-look";
    zkr_session_t *s = open_proxied(6000);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t sid0 = zkr_session_id(s);
    waiter_t w;

    raw_make(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-get-reply-blackhole"), 0);
    start_wait(&w, b, zkt_scaled_ms(60000));
    watching(s, p); /* set on the server; its answer dropped */
    if (expiry)
        expire(s);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    raw_make(p);
    assert_false(atomic_load(&w.done));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(5 * 6000)), 0);
    assert_true(expiry ? zkr_session_id(s) != sid0 : zkr_session_id(s) == sid0);
    no_watch_left(zkr_session_id(s), p);
    assert_true(raw_exists(p)); /* a wait changes nothing */
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

static void test_wait_first_look_lost_reconnect(void **state)
{
    (void)state;
    lost_first_look(0);
}

static void test_wait_first_look_lost_expiry(void **state)
{
    (void)state;
    lost_first_look(1);
}

/* The same expiry with the barrier untouched: the node it sees on the
 * new session is the one it first saw, so it waits on, until the node
 * goes. */
static void test_wait_through_expiry_same_barrier(void **state)
{
    const char *p = "/t/bar/exp-same";
    zkr_session_t *s = open_proxied(6000);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t sid0;
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, zkt_scaled_ms(60000));
    watching(s, p);
    sid0 = zkr_session_id(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    expire(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_id(s) != 0 && zkr_session_id(s) != sid0,
                       zkt_scaled_ms(5 * 6000)));
    /* It looks again on the new session: its watch shows there. */
    watching(s, p);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(atomic_load(&w.done));
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The connection is cut for the whole wait: ZKR_ETIMEDOUT at its
 * timeout, not a hang; once the connection is back, no watch of the
 * wait is on the server. */
static void test_wait_cut_until_timeout(void **state)
{
    const char *p = "/t/bar/cut-to";
    const int T = zkt_scaled_ms(3000);
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    zkr_barrier_t *other = new_barrier(s, "/t/bar/cut-to-other", 0);
    int64_t sid;
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, T);
    watching(s, p);
    sid = zkr_session_id(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(join_wait(&w, T + 2 * zkt_scaled_ms(ST)), ZKR_ETIMEDOUT);
    print_message("# wait of %d ms, cut, took %lld ms\n", T, (long long)w.took);
    assert_true(w.took >= T);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(ST)), 0);
    /* A round trip after the reconnection's re-sent watches (the stale
     * connection may be seen lost only now: a wait of its own length). */
    assert_int_equal(zkr_barrier_wait(other, zkt_scaled_ms(ST)), 0);
    if (zkr_session_id(s) == sid)
        no_watch_left(sid, p);
    else
        print_message("# the session expired during the cut (slow run)\n");
    zkr_barrier_free(other);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* Not connected for longer than the bound of a set or clear (the session
 * timeout plus a request's): ZCONNECTIONLOSS, nothing changed. */
static void test_set_clear_not_connected(void **state)
{
    const char *p = "/t/bar/nc", *q = "/t/bar/nc-set";
    const int NST = 4000;
    zkr_session_t *s = open_proxied(NST);
    zkr_barrier_t *b = new_barrier(s, p, 0), *c = new_barrier(s, q, 0);
    int64_t t0, took;
    int removed = -1, created = -1;

    (void)state;
    raw_make(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_barrier_clear(b, &removed), ZCONNECTIONLOSS);
    took = zkt_now_ms() - t0;
    print_message("# clear, cut: ZCONNECTIONLOSS after %lld ms\n",
                  (long long)took);
    assert_true(took < 10 * zkt_scaled_ms(NST));
    assert_true(raw_exists(p));
    assert_int_equal(zkr_barrier_set(c, &created), ZCONNECTIONLOSS);
    assert_false(raw_exists(q));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(3 * NST)), 0);
    assert_int_equal(zkr_barrier_clear(b, &removed), 0);
    assert_int_equal(removed, 1);
    zkr_barrier_free(b);
    zkr_barrier_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A session that is not re-created (no_reconnect) expires under a wait:
 * ZKR_ELOST. */
static void test_wait_session_lost(void **state)
{
    const char *p = "/t/bar/lost";
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_barrier_t *b;
    waiter_t w;

    (void)state;
    o.no_reconnect = 1;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), 6000, &o),
                     0);
    b = new_barrier(s, p, 0);
    raw_make(p);
    start_wait(&w, b, zkt_scaled_ms(60000));
    watching(s, p);
    expire(s);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(5 * 6000)), ZKR_ELOST);
    assert_true(raw_exists(p));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* A set whose create answer is lost (applied): once connected it reads
 * the node, finds it standing and this session's: 0 and created 1. */
static void test_set_lost_answer(void **state)
{
    const char *p = "/t/bar/lostset";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    struct Stat st;
    int created = -1;

    (void)state;
    raw_make("/t/bar/lostset-x"); /* the ancestors stand */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zkr_barrier_set(b, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_false(raw_exists(p));
}

static struct {
    atomic_int n;
    int rc, changed, deadlk;
    zkr_barrier_t *free_me;
} ad;

static void on_async(int rc, int changed, void *data)
{
    zkr_barrier_t *b = data;

    /* Blocking calls are refused in a callback. */
    if (b != NULL && zkr_barrier_wait(b, 0) == ZKR_EDEADLK &&
        zkr_barrier_wait(b, -1) == ZKR_EDEADLK)
        ad.deadlk = 1;
    if (ad.free_me != NULL && ad.free_me == b)
        zkr_barrier_free(b);
    ad.rc = rc;
    ad.changed = changed;
    atomic_fetch_add(&ad.n, 1);
}

static void reset_ad(void)
{
    atomic_store(&ad.n, 0);
    ad.rc = 12345;
    ad.changed = -1;
    ad.deadlk = 0;
    ad.free_me = NULL;
}

/* A set whose create applied and whose answer is lost; before zkr can
 * look, another client deletes the node: it may have been set by this
 * call and cleared since, ZKR_EINDOUBT. */
static void test_set_lost_answer_then_cleared(void **state)
{
    const char *p = "/t/bar/lostset2";
    zkr_session_t *s = open_proxied(zkt_scaled_ms(20000));
    zkr_barrier_t *b = new_barrier(s, p, 0);

    (void)state;
    reset_ad();
    raw_make("/t/bar/lostset2-x");
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    assert_int_equal(zkr_barrier_async(b, ZKR_BARRIER_SET, 0, on_async, NULL),
                     0);
    assert_true(ZKT_WAIT_UNTIL(raw_exists(p), zkt_scaled_ms(ST)));
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(20000)));
    assert_int_equal(ad.rc, ZKR_EINDOUBT);
    assert_false(raw_exists(p)); /* not set a second time */
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A server restart (killed, back on the same port with its data) under a
 * wait, with a set sent while the server is down: the session survives
 * (20 s); the set ends 0 once the server is back (its ephemeral node this
 * session's); the wait waits on through the restart and ends 0 at the
 * clear made after it, leaving no watch. */
static void test_server_restart(void **state)
{
    const char *p = "/t/bar/restart", *e = "/t/bar/restart-eph";
    zkr_session_t *s = open_session(zkt_scaled_ms(20000));
    zkr_barrier_t *b = new_barrier(s, p, ZKR_BARRIER_PERSISTENT);
    zkr_barrier_t *be = new_barrier(s, e, 0);
    int removed = -1;
    struct Stat st;
    waiter_t w;

    (void)state;
    assert_int_equal(zkr_barrier_set(b, NULL), 0);
    start_wait(&w, b, -1);
    watching(s, p);
    zookeeper_close(raw);
    raw = NULL;
    reset_ad();
    assert_int_equal(zkt_server_kill(server), 0);
    assert_int_equal(zkr_barrier_async(be, ZKR_BARRIER_SET, 0, on_async, NULL),
                     0);
    zkt_sleep_ms(zkt_scaled_ms(1000));
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(20000)));
    assert_int_equal(ad.rc, 0);
    assert_int_equal(ad.changed, 1);
    assert_int_equal(raw_stat(e, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(atomic_load(&w.done)); /* it stands: the wait waits */
    assert_int_equal(zkr_barrier_clear(b, &removed), 0);
    assert_int_equal(removed, 1);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    no_watch_left(zkr_session_id(s), p);
    zkr_barrier_free(b);
    zkr_barrier_free(be);
    assert_int_equal(zkr_session_free(s), 0);
    assert_false(raw_exists(e)); /* ended with the session */
}

/* ------------------------------------------------------------ async */

/* Starts op, waits for its completion, checks that it runs once. */
static int run_async(zkr_barrier_t *b, zkr_barrier_op_t op, int timeout_ms,
                     int *changed)
{
    reset_ad();
    assert_int_equal(zkr_barrier_async(b, op, timeout_ms, on_async, b), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) >= 1,
                               (timeout_ms > 0 ? timeout_ms : 0) +
                                   2 * zkt_scaled_ms(ST)));
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&ad.n), 1);
    assert_int_equal(ad.deadlk, 1);
    *changed = ad.changed;
    return ad.rc;
}

/* Each operation's completion runs once, with the blocking call's rc and
 * changed; blocking calls in it are refused (ZKR_EDEADLK). */
static void test_async_ops(void **state)
{
    const char *p = "/t/bar/async";
    const int T = zkt_scaled_ms(1000);
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    struct Stat st;
    int ch = -1, blk = -1;

    (void)state;
    assert_int_equal(run_async(b, ZKR_BARRIER_WAIT, 0, &ch), 0);
    assert_int_equal(ch, 0);
    assert_int_equal(run_async(b, ZKR_BARRIER_CLEAR, 0, &ch), 0);
    assert_int_equal(ch, 0);
    assert_int_equal(zkr_barrier_clear(b, &blk), 0);
    assert_int_equal(blk, 0);
    /* timeout_ms is ignored by set and clear */
    assert_int_equal(run_async(b, ZKR_BARRIER_SET, -7, &ch), 0);
    assert_int_equal(ch, 1);
    assert_int_equal(raw_stat(p, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    assert_int_equal(run_async(b, ZKR_BARRIER_SET, 0, &ch), 0);
    assert_int_equal(ch, 0);
    assert_int_equal(zkr_barrier_set(b, &blk), 0);
    assert_int_equal(blk, 0);
    assert_int_equal(run_async(b, ZKR_BARRIER_WAIT, 0, &ch), ZKR_ETIMEDOUT);
    assert_int_equal(ch, 0);
    assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    assert_int_equal(run_async(b, ZKR_BARRIER_WAIT, T, &ch), ZKR_ETIMEDOUT);
    assert_int_equal(run_async(b, ZKR_BARRIER_CLEAR, 0, &ch), 0);
    assert_int_equal(ch, 1);
    assert_false(raw_exists(p));
    assert_int_equal(run_async(b, ZKR_BARRIER_WAIT, -1, &ch), 0);
    /* A wait released by another client's delete. */
    raw_make(p);
    reset_ad();
    assert_int_equal(zkr_barrier_async(b, ZKR_BARRIER_WAIT, -1, on_async, NULL),
                     0);
    watching(s, p);
    assert_int_equal(atomic_load(&ad.n), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(ad.rc, 0);
    assert_int_equal(ad.changed, 0);
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&ad.n), 1);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A free during an asynchronous wait ends it with ZKR_ECANCELED, clears
 * nothing, and leaves no watch. */
static void test_free_during_async_wait(void **state)
{
    const char *p = "/t/bar/freed";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t sid = zkr_session_id(s);

    (void)state;
    raw_make(p);
    reset_ad();
    assert_int_equal(zkr_barrier_async(b, ZKR_BARRIER_WAIT, -1, on_async, NULL),
                     0);
    watching(s, p);
    zkr_barrier_free(b);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(ad.rc, ZKR_ECANCELED);
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&ad.n), 1);
    assert_true(raw_exists(p));
    no_watch_left(sid, p);
    /* Nothing of the handle is left: the session frees. */
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* A completion frees its own handle: the set stands (a free does not
 * clear), and the session has no handle left. Then a wait's completion
 * does the same. */
static void test_free_from_completion(void **state)
{
    const char *p = "/t/bar/freecb";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);

    (void)state;
    reset_ad();
    ad.free_me = b;
    assert_int_equal(zkr_barrier_async(b, ZKR_BARRIER_SET, 0, on_async, b), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(ad.rc, 0);
    assert_int_equal(ad.changed, 1);
    assert_int_equal(ad.deadlk, 1);
    assert_true(raw_exists(p));
    b = new_barrier(s, p, 0);
    reset_ad();
    ad.free_me = b;
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_WAIT, zkt_scaled_ms(500), on_async, b),
        0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&ad.n) == 1, zkt_scaled_ms(ST)));
    assert_int_equal(ad.rc, ZKR_ETIMEDOUT);
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&ad.n), 1);
    no_watch_left(zkr_session_id(s), p);
    assert_int_equal(zkr_session_free(s), 0);
    assert_false(raw_exists(p)); /* ephemeral: gone with the session */
}

/* ------------------------------------------------------- no watches */

/* A wait that ends by its timeout leaves no watch of its session on the
 * path; the check sees the watch while it waits. */
static void test_timeout_leaves_no_watch(void **state)
{
    const char *p = "/t/bar/nowatch";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t sid = zkr_session_id(s);
    waiter_t w;

    (void)state;
    raw_make(p);
    start_wait(&w, b, zkt_scaled_ms(3000));
    watching(s, p); /* the check sees a watch */
    assert_int_equal(join_wait(&w, zkt_scaled_ms(3000) + 2 * zkt_scaled_ms(ST)),
                     ZKR_ETIMEDOUT);
    no_watch_left(sid, p);
    assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    no_watch_left(sid, p);
    for (int i = 0; i < 5; i++)
        assert_int_equal(zkr_barrier_wait(b, zkt_scaled_ms(100)),
                         ZKR_ETIMEDOUT);
    no_watch_left(sid, p);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* ------------------------------------------------------- bad input */

static void test_bad_arguments(void **state)
{
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = NULL;
    int x;

    (void)state;
    assert_int_equal(zkr_barrier_new(NULL, s, "/t/x", 0, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_new(&b, NULL, "/t/x", 0, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_new(&b, s, NULL, 0, NULL), ZBADARGUMENTS);
    static const char *bad[] = {"",      "relative", "/",      "/t/",
                                "/t//x", "/t/./x",   "/t/../x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("# path '%s'\n", bad[i]);
        assert_int_equal(zkr_barrier_new(&b, s, bad[i], 0, NULL),
                         ZBADARGUMENTS);
    }
    assert_int_equal(zkr_barrier_new(&b, s, "/t/x", 2, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_new(&b, s, "/t/x", -1, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_set(NULL, &x), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_clear(NULL, &x), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_wait(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(
        zkr_barrier_async(NULL, ZKR_BARRIER_SET, 0, on_async, NULL),
        ZBADARGUMENTS);
    b = new_barrier(s, "/t/bar/args", 0);
    assert_int_equal(zkr_barrier_wait(b, -2), ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_wait(b, -1000), ZBADARGUMENTS);
    reset_ad();
    assert_int_equal(zkr_barrier_async(b, ZKR_BARRIER_WAIT, -2, on_async, b),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_async(b, ZKR_BARRIER_SET, 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_barrier_async(b, (zkr_barrier_op_t)9, 0, on_async, b),
                     ZBADARGUMENTS);
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&ad.n), 0); /* refused: never called */
    assert_false(raw_exists("/t/bar/args"));
    /* A session with a handle open is not freed. */
    assert_int_equal(zkr_session_free(s), ZKR_EINUSE);
    zkr_barrier_free(b);
    zkr_barrier_free(NULL);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------- the second review's cases */

static struct {
    atomic_int n;
    int rc[4], changed[4];
} rv;

static void rv_cb(int rc, int changed, void *data)
{
    int i = (int)(intptr_t)data;

    rv.rc[i] = rc;
    rv.changed[i] = changed;
    atomic_fetch_add(&rv.n, 1);
}

/* A clear whose delete applied, its answer lost, then no connection until
 * its bound: ZKR_EINDOUBT (it said ZCONNECTIONLOSS, "nothing changed",
 * with the node gone). */
static void test_clear_lost_then_cut(void **state)
{
    const char *p = "/t/rev/clearcut";
    zkr_session_t *s = open_proxied(4000);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int removed = -1, rc;

    (void)state;
    raw_make(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-delete-reply-blackhole"), 0);
    rc = zkr_barrier_clear(b, &removed);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    print_message("# clear rc=%d (%s) removed=%d node exists=%d\n", rc,
                  zkr_strerror(rc), removed, raw_exists(p));
    assert_false(raw_exists(p));
    assert_int_equal(rc, ZKR_EINDOUBT);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Two sets of one session: A's create never reaches the server (cut), B
 * makes the node after the reconnection, before A resolves. Only B says
 * created (both did: A took this session's ephemeral node for its own). */
static void test_two_sets_one_created(void **state)
{
    const char *p = "/t/rev/twoset";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);

    (void)state;
    memset(&rv, 0, sizeof(rv));
    raw_make("/t/rev/twoset-x");
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-request-blackhole"), 0);
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_SET, -1, rv_cb, (void *)0), 0);
    zkt_sleep_ms(300);
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_SET, -1, rv_cb, (void *)1), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_state(s) != ZKR_STATE_CONNECTED &&
                           zkr_session_state(s) != ZKR_STATE_RECONNECTED,
                       zkt_scaled_ms(3 * ST)));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&rv.n) == 2, zkt_scaled_ms(3 * ST)));
    print_message("# A rc=%d created=%d; B rc=%d created=%d\n", rv.rc[0],
                  rv.changed[0], rv.rc[1], rv.changed[1]);
    assert_int_equal(rv.rc[0], 0);
    assert_int_equal(rv.rc[1], 0);
    assert_int_equal(rv.changed[0] + rv.changed[1], 1);
    assert_true(raw_exists(p));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Waits on p and q in one session; an operator takes read away from p
 * (no event), then q's event makes every wait look again: p's look is
 * refused (ZNOAUTH) and its wait ends; no watch of it is left on p. */
static void test_refused_look_leaves_no_watch(void **state)
{
    const char *p = "/t/rev/acl", *q = "/t/rev/acl-other";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0), *c = new_barrier(s, q, 0);
    struct ACL none_read[] = {
        {ZOO_PERM_ALL & ~ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector nr = {1, none_read};
    int64_t sid = zkr_session_id(s);

    (void)state;
    memset(&rv, 0, sizeof(rv));
    raw_make(p);
    raw_make(q);
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_WAIT, -1, rv_cb, (void *)0), 0);
    assert_int_equal(
        zkr_barrier_async(c, ZKR_BARRIER_WAIT, -1, rv_cb, (void *)1), 0);
    watching(s, p);
    watching(s, q);
    assert_int_equal(zoo_set_acl(raw, p, -1, &nr), ZOK); /* fires nothing */
    assert_int_equal(zoo_set(raw, q, "y", 1, -1), ZOK);  /* q's event */
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&rv.n) >= 1, zkt_scaled_ms(ST)));
    assert_int_equal(rv.rc[0], ZNOAUTH);
    no_watch_left(sid, p);
    zkr_barrier_free(c);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(zoo_delete(raw, q, -1), ZOK);
}

/* A wait's timeout on a slow server (1.5 s each way): it looks once
 * first, so it ends late, but within the rule's bound (about the session
 * timeout past its timeout), ZKR_ETIMEDOUT. */
static void test_wait_timeout_slow_server(void **state)
{
    const char *p = "/t/rev/slow";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    int64_t t0, took;
    int rc;

    (void)state;
    raw_make(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 1500"), 0);
    t0 = zkt_now_ms();
    rc = zkr_barrier_wait(b, 200);
    took = zkt_now_ms() - t0;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    print_message("# wait(200) on a slow server: rc=%d after %lld ms\n", rc,
                  (long long)took);
    assert_int_equal(rc, ZKR_ETIMEDOUT);
    assert_true(took >= 200 && took <= 200 + 2 * zkt_scaled_ms(ST));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* q's event makes the wait on p look again; that look is lost with the
 * connection (reset), and the wait's timeout ends it while cut. On the
 * same session, reconnected, no watch of it is left on p (the client set
 * it again on reconnecting). */
static void test_event_then_cut_leaves_no_watch(void **state)
{
    const char *p = "/t/rev/xa", *q = "/t/rev/xb";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0), *c = new_barrier(s, q, 0);
    int64_t sid = zkr_session_id(s);

    (void)state;
    memset(&rv, 0, sizeof(rv));
    raw_make(p);
    raw_make(q);
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_WAIT, 4000, rv_cb, (void *)0), 0);
    assert_int_equal(
        zkr_barrier_async(c, ZKR_BARRIER_WAIT, -1, rv_cb, (void *)1), 0);
    watching(s, p);
    watching(s, q);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 1000"), 0);
    assert_int_equal(zoo_set(raw, q, "y", 1, -1), ZOK); /* q's event */
    zkt_sleep_ms(1500); /* delivered; the new looks held in the proxy */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&rv.n) >= 1, zkt_scaled_ms(3 * ST)));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(ST)), 0);
    zkr_barrier_free(c);
    if (zkr_session_id(s) == sid)
        no_watch_left(sid, p);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(zoo_delete(raw, q, -1), ZOK);
}

/* W1's watch is kept at its timeout for W2 (another handle, same path
 * and session, its sync held by a slow link); W2 is then freed before it
 * ever looked: the watch is still removed. */
static void test_kept_watch_removed_by_the_last(void **state)
{
    const char *p = "/t/rev/kept";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0), *b2 = new_barrier(s, p, 0);
    int64_t sid = zkr_session_id(s);

    (void)state;
    memset(&rv, 0, sizeof(rv));
    raw_make(p);
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_WAIT, 1500, rv_cb, (void *)0), 0);
    watching(s, p);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 2000"), 0);
    assert_int_equal(
        zkr_barrier_async(b2, ZKR_BARRIER_WAIT, -1, rv_cb, (void *)1), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&rv.n) >= 1, zkt_scaled_ms(ST)));
    assert_int_equal(rv.rc[0], ZKR_ETIMEDOUT);
    zkr_barrier_free(b2); /* W2: its sync still in flight */
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&rv.n) == 2, zkt_scaled_ms(ST)));
    assert_int_equal(rv.rc[1], ZKR_ECANCELED);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(ST)), 0);
    if (zkr_session_id(s) == sid)
        no_watch_left(sid, p);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* A persistent set whose create applied, its answer lost, then no
 * connection until its bound: ZKR_EINDOUBT, the outcome unknown (the
 * node stands). */
static void test_set_lost_then_cut(void **state)
{
    const char *p = "/t/rev/setcut";
    zkr_session_t *s = open_proxied(4000);
    zkr_barrier_t *b = new_barrier(s, p, ZKR_BARRIER_PERSISTENT);
    int created = -1, rc;

    (void)state;
    raw_make("/t/rev/setcut-x");
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    rc = zkr_barrier_set(b, &created);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(rc, ZKR_EINDOUBT);
    assert_true(raw_exists(p));
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* The server's count of packets received (its mntr). */
static long mntr_packets(void)
{
    char *m = zkt_4lw(server, "mntr"), *p;
    long v = -1;

    if (m != NULL && (p = strstr(m, "zk_packets_received")) != NULL)
        v = strtol(p + strlen("zk_packets_received"), NULL, 10);
    free(m);
    return v;
}

/* Waits polled while the connection is cut never look, so they queue
 * nothing: after the reconnection the server hears a handful of packets,
 * not one per poll (each queued a watch removal, 12,582 packets after 4 s
 * of polling, and the pump's walk made each poll slower). */
static void test_poll_while_cut_queues_nothing(void **state)
{
    const char *p = "/t/rev/poll";
    zkr_session_t *s = open_proxied(ST);
    zkr_barrier_t *b = new_barrier(s, p, 0);
    long pk0, pk1;

    (void)state;
    raw_make(p);
    assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT); /* connected */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_state(s) != ZKR_STATE_CONNECTED &&
                           zkr_session_state(s) != ZKR_STATE_RECONNECTED,
                       zkt_scaled_ms(3 * ST)));
    for (int i = 0; i < 2000; i++)
        assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    pk0 = mntr_packets();
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(3 * ST)), 0);
    zkt_sleep_ms(zkt_scaled_ms(2000));
    pk1 = mntr_packets();
    print_message("# 2000 waits while cut; packets after reconnecting: %ld\n",
                  pk1 - pk0);
    assert_true(pk1 - pk0 < 200);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
}

/* Waits of other handles on the path ending (50 looks, a handle freed
 * with its wait) keep a live wait's watch: it is released by the delete. */
static void test_other_waits_keep_the_watch(void **state)
{
    const char *p = "/t/rev/keep2";
    zkr_session_t *s = open_session(ST);
    zkr_barrier_t *a = new_barrier(s, p, 0), *b = new_barrier(s, p, 0),
                  *c = new_barrier(s, p, 0);
    waiter_t w;

    (void)state;
    memset(&rv, 0, sizeof(rv));
    raw_make(p);
    start_wait(&w, a, -1);
    watching(s, p);
    assert_int_equal(
        zkr_barrier_async(c, ZKR_BARRIER_WAIT, -1, rv_cb, (void *)0), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(zkr_barrier_wait(b, 0), ZKR_ETIMEDOUT);
    zkr_barrier_free(c); /* its wait canceled */
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&rv.n) == 1, zkt_scaled_ms(ST)));
    zkt_sleep_ms(zkt_scaled_ms(500));
    watching(s, p);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(join_wait(&w, zkt_scaled_ms(ST)), 0);
    no_watch_left(zkr_session_id(s), p);
    zkr_barrier_free(b);
    zkr_barrier_free(a);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_ephemeral_by_default),
        cmocka_unit_test(test_set_persistent),
        cmocka_unit_test(test_set_under_ephemeral_parent),
        cmocka_unit_test(test_clear),
        cmocka_unit_test(test_clear_by_other_session),
        cmocka_unit_test(test_wait_timeouts),
        cmocka_unit_test(test_wait_released_by_foreign_delete),
        cmocka_unit_test(test_wait_released_by_delete_and_recreate),
        cmocka_unit_test(test_wait_not_released_by_data_change),
        cmocka_unit_test(test_setter_session_close),
        cmocka_unit_test(test_setter_session_expiry),
        cmocka_unit_test(test_wait_through_cut_connection),
        cmocka_unit_test(test_wait_through_expiry_with_new_barrier),
        cmocka_unit_test(test_wait_first_look_lost_reconnect),
        cmocka_unit_test(test_wait_first_look_lost_expiry),
        cmocka_unit_test(test_wait_through_expiry_same_barrier),
        cmocka_unit_test(test_wait_cut_until_timeout),
        cmocka_unit_test(test_set_clear_not_connected),
        cmocka_unit_test(test_wait_session_lost),
        cmocka_unit_test(test_set_lost_answer),
        cmocka_unit_test(test_set_lost_answer_then_cleared),
        cmocka_unit_test(test_server_restart),
        cmocka_unit_test(test_async_ops),
        cmocka_unit_test(test_free_during_async_wait),
        cmocka_unit_test(test_free_from_completion),
        cmocka_unit_test(test_timeout_leaves_no_watch),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_clear_lost_then_cut),
        cmocka_unit_test(test_two_sets_one_created),
        cmocka_unit_test(test_refused_look_leaves_no_watch),
        cmocka_unit_test(test_wait_timeout_slow_server),
        cmocka_unit_test(test_event_then_cut_leaves_no_watch),
        cmocka_unit_test(test_kept_watch_removed_by_the_last),
        cmocka_unit_test(test_set_lost_then_cut),
        cmocka_unit_test(test_poll_while_cut_queues_nothing),
        cmocka_unit_test(test_other_waits_keep_the_watch),
    };

    zkt_test_filter();
    return cmocka_run_group_tests_name("barrier", tests, proxy_setup,
                                       proxy_teardown);
}
