/* Integration tests of the exclusive lock against a real ZooKeeper server
 * started by the harness (free loopback port, temp data dir). */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "server_test.h"

/* ------------------------------------------------------------------ */

/* 8 processes each do a non-atomic read-modify-write of a shared counter
 * file under the lock; any overlap would lose an update. The log shows the
 * grants: never two holders at once, tokens and sequences increasing. */
static void test_mutual_exclusion_processes(void **state)
{
    struct verdict r;

    (void)state;
    /* First, the checks must catch a broken lock (no locking at all). */
    r = run_contenders("/t/broken", 8, 5, 0, 1);
    assert_true(r.max_holders > 1 || r.counted_max > 1 || r.counter < 40);
    /* Then the real lock passes them. */
    r = run_contenders("/t/mutex", 8, 5, 0, 0);
    assert_int_equal(r.counter, 40);
    assert_int_equal(r.grants, 40);
    assert_int_equal(r.max_holders, 1);
    assert_int_equal(r.counted_max, 1);
    assert_int_equal(r.dup_tokens, 0);
    assert_int_equal(r.token_backwards, 0); /* fencing tokens increase */
    assert_int_equal(r.seq_backwards, 0);   /* FIFO: queue order */
    assert_int_equal(children("/t/mutex"), 0);
}

/* FIFO: waiters enqueued one after another are granted in that order. */
struct order {
    atomic_int n; /* written last: who and tok below it are complete */
    int who[16];
    int64_t tok[16];
};
static struct order fifo;

/* cmocka's assertions must run on the test's thread: callbacks record. */
static atomic_int fifo_bad;

static void fifo_released(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    (void)data;
    if (rc != 0)
        fifo_bad = rc;
}

static void fifo_done(int rc, zkr_lock_t *l, void *data)
{
    int i = (int)(intptr_t)data;
    if (rc == 0) {
        int k = fifo.n;

        zkr_lock_token(l, &fifo.tok[k]);
        fifo.who[k] = i;
        fifo.n = k + 1;
        /* Blocking calls are refused in callbacks; the async one works. */
        if (zkr_lock_release(l) != ZKR_EDEADLK)
            fifo_bad = -1;
        else if (zkr_lock_release_async(l, fifo_released, NULL) != 0)
            fifo_bad = -2;
    }
}

static void test_fifo_order(void **state)
{
    enum { N = 6 };
    zkr_session_t *s[N + 1];
    zkr_lock_t *l[N + 1];

    (void)state;
    memset(&fifo, 0, sizeof(fifo));
    for (int i = 0; i <= N; i++) {
        s[i] = open_session(10000);
        l[i] = new_lock(s[i], "/t/fifo", NULL);
    }
    assert_int_equal(zkr_lock_acquire(l[0], -1), 0);
    /* Enqueue in a known order: reverse of session creation, to show the
     * order is the queue's, not the sessions'. */
    for (int k = 0; k < N; k++) {
        int i = N - k;
        assert_int_equal(
            zkr_lock_acquire_async(l[i], -1, fifo_done, (void *)(intptr_t)i),
            0);
        assert_true(ZKT_WAIT_UNTIL(children("/t/fifo") == k + 2, 5000));
    }
    assert_int_equal(zkr_lock_release(l[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(fifo.n == N && children("/t/fifo") == 0, 10000));
    assert_int_equal(fifo_bad, 0);
    for (int k = 0; k < N; k++) {
        assert_int_equal(fifo.who[k], N - k);
        if (k > 0)
            assert_true(fifo.tok[k] > fifo.tok[k - 1]);
    }
    for (int i = 0; i <= N; i++) {
        zkr_lock_free(l[i]);
        assert_int_equal(zkr_session_free(s[i]), 0);
    }
}

/* try-lock, timeout and cancel return the right code and leave no node
 * and no watch behind. */
static void cancel_done(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    *(atomic_int *)data = rc;
}

static void test_try_timeout_cancel(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_lock_t *la = new_lock(a, "/t/try", "a"),
               *lb = new_lock(b, "/t/try", "b");
    long watches0;
    int64_t t0;
    atomic_int got = 1;

    (void)state;
    watches0 = zkt_total_watches(server);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    /* The holder watches its own node (forced-release detection). */
    watches0++;
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == watches0, 5000));

    assert_int_equal(zkr_lock_acquire(lb, 0), ZKR_EBUSY);
    assert_int_equal(children("/t/try"), 1);
    assert_int_equal(zkr_lock_state(lb), ZKR_LOCK_IDLE);

    t0 = zkt_now_ms();
    assert_int_equal(zkr_lock_acquire(lb, 300), ZKR_ETIMEDOUT);
    assert_true(zkt_now_ms() - t0 >= 300);
    assert_int_equal(children("/t/try"), 1);

    assert_int_equal(zkr_lock_acquire_async(lb, -1, cancel_done, &got), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/try") == 2, 5000));
    /* The waiter watches the holder's node and its own. */
    assert_true(
        ZKT_WAIT_UNTIL(zkt_total_watches(server) == watches0 + 2, 5000));
    assert_int_equal(zkr_lock_cancel(lb), 0);
    assert_true(ZKT_WAIT_UNTIL(got == ZKR_ECANCELED, 5000));

    assert_int_equal(children("/t/try"), 1);
    /* The watch on the holder's node was removed from the server; the
     * one on its own node went with the node. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == watches0, 5000));
    assert_int_equal(zkr_lock_cancel(lb), ZKR_ESTATE);

    assert_int_equal(zkr_lock_release(la), 0);
    assert_int_equal(zkr_lock_acquire(lb, 0), 0);
    assert_int_equal(zkr_lock_release(lb), 0);
    assert_int_equal(children("/t/try"), 0);
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_session_free(a);
    zkr_session_free(b);
}

static void test_release_idempotent_and_states(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/t/idem", NULL), *l2;
    char node[ZKR_NODE_MAX];
    int64_t t1, t2;

    (void)state;
    assert_int_equal(zkr_lock_release(l), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_acquire(l, 1000), 0);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_acquire(l, 1000), ZKR_EALREADY);
    assert_true(zkr_lock_valid_ms(l) > 0);
    assert_true(zkr_lock_valid_ms(l) <= zkr_session_timeout_ms(s));
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(strncmp(node, "/t/idem/_c_", 11), 0);
    assert_non_null(strstr(node, "-lock-"));
    assert_int_equal(zkr_lock_node(l, node, 5), ZBADARGUMENTS);
    t1 = token_of(l);
    /* The token is the node's czxid. */
    {
        struct Stat st;
        assert_int_equal(zoo_exists(raw, node, 0, &st), ZOK);
        assert_int_equal(st.czxid, t1);
    }
    /* A second handle in the same process contends like another process. */
    l2 = new_lock(s, "/t/idem", NULL);
    assert_int_equal(zkr_lock_acquire(l2, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(zkr_lock_release(l), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_token(l, &t2), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_acquire(l2, 0), 0);
    t2 = token_of(l2);
    assert_true(t2 > t1);
    zkr_lock_free(l2); /* frees a held lock: its node is deleted */
    assert_true(ZKT_WAIT_UNTIL(children("/t/idem") == 0, 5000));
    zkr_lock_free(l);
    zkr_session_free(s);
}

/* Children written by other libraries: foreign contenders count in the
 * queue; junk is ignored and never blocks or crashes. */
static void test_foreign_and_junk_children(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/t/foreign", NULL);
    char kazoo[256], curator[256];
    zkr_contender_t *v = NULL;
    int n = 0;

    (void)state;
    zoo_create(raw, "/t", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/t/foreign", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    const char *junk[] = {"/t/foreign/junk", "/t/foreign/readme.txt",
                          "/t/foreign/x-zz-1", "/t/foreign/_c_x-lock-abc",
                          "/t/foreign/lock-"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        assert_int_equal(
            zoo_create(raw, junk[i], "j", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
            ZOK);
    /* A kazoo holder: our lock must wait for it. */
    assert_int_equal(zoo_create(raw, "/t/foreign/0f3c2b1a9e8d4c7b__lock__",
                                "kz", 2, &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_EPHEMERAL_SEQUENTIAL, kazoo, sizeof(kazoo)),
                     ZOK);
    assert_int_equal(zkr_lock_acquire(l, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_acquire(l, 200), ZKR_ETIMEDOUT);
    /* A Curator contender behind it. */
    assert_int_equal(
        zoo_create(raw,
                   "/t/foreign/_c_5b7d0e8e-1111-4222-8333-944445555666-lock-",
                   "cur", 3, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                   curator, sizeof(curator)),
        ZOK);
    assert_int_equal(zkr_lock_contenders(l, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].id, "kz");
    assert_string_equal(v[1].id, "cur");
    assert_true(v[0].seq < v[1].seq);
    zkr_contenders_free(v, n);

    assert_int_equal(zoo_delete(raw, kazoo, -1), ZOK);
    assert_int_equal(zkr_lock_acquire(l, 200), ZKR_ETIMEDOUT); /* Curator */
    assert_int_equal(zoo_delete(raw, curator, -1), ZOK);
    assert_int_equal(zkr_lock_acquire(l, 5000), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(children("/t/foreign"), 5); /* only the junk */
    zkr_lock_free(l);
    zkr_session_free(s);
}

/* A container parent that vanished (ZooKeeper deletes empty containers)
 * is created again. */
static void test_vanished_parent(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/t/vanish/deep/lock", NULL);
    struct Stat st;

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, 5000), 0);
    assert_int_equal(zoo_exists(raw, "/t/vanish/deep/lock", 0, &st), ZOK);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(zoo_delete(raw, "/t/vanish/deep/lock", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/vanish/deep", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/vanish", -1), ZOK);
    assert_int_equal(zkr_lock_acquire(l, 5000), 0);
    assert_int_equal(zoo_exists(raw, "/t/vanish/deep/lock", 0, &st), ZOK);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    zkr_session_free(s);
}

/* The packets the server received so far (mntr's zk_packets_received;
 * the mntr itself is one of them). */
static long server_packets(void)
{
    char *m = zkt_4lw(server, "mntr"), *p;
    long n = -1;

    assert_non_null(m);
    if ((p = strstr(m, "zk_packets_received")) != NULL)
        n = strtol(p + strlen("zk_packets_received"), NULL, 10);
    free(m);
    assert_true(n >= 0);
    return n;
}

/* The requests of an acquire and release of l (mntr's packets around it,
 * the two mntr excluded). */
static long lock_cycle_requests(zkr_lock_t *l)
{
    long p0 = server_packets(), p1;

    assert_int_equal(zkr_lock_acquire(l, 5000), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    p1 = server_packets();
    return p1 - p0 - 1;
}

/* A lock in a new directory whose parent exists creates the directory
 * alone, not every ancestor again: a directory 9 levels deep costs one
 * request more than a lock in an existing one, plus the create and the
 * listing that found it missing (the ancestors, one request each, cost 9
 * more). A heartbeat of the session (one per T/12 = 2.5 s) may fall in
 * the window: one request of margin. */
static void test_new_directory_creates_only_it(void **state)
{
    const char *deep = "/t/nd/1/2/3/4/5/6/7";
    zkr_session_t *s = open_session(30000);
    zkr_lock_t *known, *fresh;
    long base, cost;
    struct Stat st;
    char dir[64];

    (void)state;
    snprintf(dir, sizeof(dir), "%s/known", deep);
    known = new_lock(s, dir, NULL);
    assert_int_equal(zkr_lock_acquire(known, 5000), 0); /* makes them all */
    assert_int_equal(zkr_lock_release(known), 0);
    base = lock_cycle_requests(known);
    snprintf(dir, sizeof(dir), "%s/fresh", deep);
    fresh = new_lock(s, dir, NULL);
    cost = lock_cycle_requests(fresh);
    assert_int_equal(zoo_exists(raw, dir, 0, &st), ZOK);
    assert_true(st.ephemeralOwner == 0);
    print_message("# requests: lock in a known directory %ld, in a new "
                  "one %ld\n",
                  base, cost);
    assert_true(cost <= base + 3 + 1);
    assert_true(cost >= base + 3 - 1); /* (the measure counts) */
    zkr_lock_free(fresh);
    zkr_lock_free(known);
    zkr_session_free(s);
}

/* One release wakes exactly one of 20 waiters: each waiter watches only
 * its predecessor (and its own node, which only its own deletion
 * changes), so the server delivers exactly one notification, and the woken
 * waiter lists once and is granted. */
static atomic_int granted[21];

static void herd_done(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    granted[(intptr_t)data] = rc == 0 ? 1 : rc;
}

static void test_release_wakes_one(void **state)
{
    enum { W = 20, S = 4 };
    zkr_session_t *s[S];
    zkr_lock_t *holder, *w[W];
    uint64_t ev0 = 0, ev1 = 0, lists0 = 0, lists1 = 0;
    char *wchc;

    (void)state;
    memset(granted, 0, sizeof(granted));
    for (int i = 0; i < S; i++)
        s[i] = open_session(10000);
    holder = new_lock(s[0], "/t/herd", "holder");
    assert_int_equal(zkr_lock_acquire(holder, -1), 0);
    for (int i = 0; i < W; i++) {
        w[i] = new_lock(s[i % S], "/t/herd", NULL);
        assert_int_equal(
            zkr_lock_acquire_async(w[i], -1, herd_done, (void *)(intptr_t)i),
            0);
        assert_true(ZKT_WAIT_UNTIL(children("/t/herd") == i + 2, 5000));
    }
    /* Each waiter on its predecessor and on its own node; the holder's
     * watch on its own node is shared with the first waiter's on it (one
     * session): 2 W. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 2 * W, 5000));
    wchc = zkt_4lw(server, "wchp");
    assert_non_null(wchc);
    free(wchc);
    for (int i = 0; i < S; i++) {
        ev0 += zkr_session_counter(s[i], ZKR_COUNTER_WATCH_EVENTS);
        lists0 += zkr_session_counter(s[i], ZKR_COUNTER_LISTS);
    }
    assert_int_equal(zkr_lock_release(holder), 0);
    assert_true(ZKT_WAIT_UNTIL(granted[0] == 1, 5000));
    /* Once the first waiter holds, the others still watch their own
     * predecessors and nodes, and the new holder its own node: 2 W - 1. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 2 * W - 1, 5000));
    for (int i = 0; i < S; i++) {
        ev1 += zkr_session_counter(s[i], ZKR_COUNTER_WATCH_EVENTS);
        lists1 += zkr_session_counter(s[i], ZKR_COUNTER_LISTS);
    }
    /* A grant rests on a listing made after the notification: one. */
    assert_int_equal(ev1 - ev0, 1);
    assert_int_equal(lists1 - lists0, 1);
    for (int i = 1; i < W; i++)
        assert_int_equal(granted[i], 0);
    for (int i = 0; i < W; i++)
        zkr_lock_free(w[i]);
    zkr_lock_free(holder);
    for (int i = 0; i < S; i++)
        zkr_session_free(s[i]);
    /* Freed handles' nodes are deleted by their sessions before closing;
     * the server's expiry (10 s) would be the fallback. */
    assert_true(ZKT_WAIT_UNTIL(children("/t/herd") == 0, 15000));
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 0, 15000));
}

/* An operator deletes the holder's node (zkr release --force): the
 * holder, still connected, learns it at once through the watch on its own
 * node, and the next waiter is granted. */
static void on_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    *(atomic_int *)data = (int)st;
}

static void test_forced_deletion_noticed(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_lock_t *la = new_lock(a, "/t/forced", "a"),
               *lb = new_lock(b, "/t/forced", "b");
    char node[ZKR_NODE_MAX];
    atomic_int seen = -1;
    long w0;
    int64_t t0;

    (void)state;
    w0 = zkt_total_watches(server);
    assert_int_equal(zkr_lock_set_listener(la, on_state, (void *)&seen), 0);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    assert_int_equal(zkr_lock_node(la, node, sizeof(node)), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0 + 1, 5000));
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(seen == ZKR_LOCK_LOST, 5000));
    assert_true(zkt_now_ms() - t0 < 2000);
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_LOST);
    assert_int_equal(zkr_lock_valid_ms(la), 0);
    assert_int_equal(zkr_lock_release(la), ZKR_ELOST);
    assert_int_equal(zkr_lock_acquire(lb, 0), 0);
    /* la can acquire again, behind b, with a new node. */
    assert_int_equal(zkr_lock_acquire(la, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_release(lb), 0);
    assert_int_equal(zkr_lock_acquire(la, 0), 0);
    assert_int_equal(zkr_lock_release(la), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0, 5000));
    assert_int_equal(children("/t/forced"), 0);
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* Many handles of one session (issue 19: the session indexes its handles
 * by the paths of their nodes and of their watches, and a watch event
 * looks only at the handles of its path). A chain on one path, each waiter
 * watching the node of the one before it (in the same session, as the
 * holder watches its own node: two handles, one path); half of them freed
 * in random order while the events of those deletions arrive; the rest
 * must each be granted exactly once, in queue order, one at a time. A
 * handle left in the index after its free is a use after free (ASan,
 * valgrind); one missing from it is never woken (the wait fails). */
enum { MANY = 30, MANY_PATHS = 40 };
static atomic_int many_got[MANY_PATHS], many_rc[MANY_PATHS];

static void many_done(int rc, zkr_lock_t *l, void *data)
{
    int i = (int)(intptr_t)data;

    (void)l;
    many_rc[i] = rc;
    many_got[i]++;
}

/* 0..n-1 in a random order, seeded from the clock (the seed is printed
 * to replay a failure). */
static void shuffled(int *order, int n)
{
    unsigned seed = (unsigned)zkt_now_ms();

    print_message("seed %u\n", seed);
    srand(seed);
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static void test_one_session_many_handles(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l[MANY];
    int freed[MANY] = {0}, order[MANY];

    (void)state;
    for (int i = 0; i < MANY; i++) {
        char id[16];
        snprintf(id, sizeof(id), "h%d", i);
        l[i] = new_lock(s, "/t/many", id);
        many_got[i] = 0;
    }
    assert_int_equal(zkr_lock_acquire(l[0], -1), 0);
    for (int i = 1; i < MANY; i++)
        assert_int_equal(
            zkr_lock_acquire_async(l[i], -1, many_done, (void *)(intptr_t)i),
            0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/many") == MANY, 10000));
    shuffled(order, MANY);
    for (int k = 0; k < MANY / 2; k++) {
        zkr_lock_free(l[order[k]]);
        freed[order[k]] = 1;
    }
    /* The rest, in queue order: each granted once, alone. */
    for (int i = 0; i < MANY; i++) {
        int held = 0;
        if (freed[i])
            continue;
        if (i > 0) {
            assert_true(ZKT_WAIT_UNTIL(many_got[i] == 1, 10000));
            assert_int_equal(many_rc[i], 0);
        }
        for (int j = 0; j < MANY; j++)
            if (!freed[j] && zkr_lock_state(l[j]) == ZKR_LOCK_HELD)
                held++;
        assert_int_equal(held, 1);
        assert_int_equal(zkr_lock_state(l[i]), ZKR_LOCK_HELD);
        for (int j = i + 1; j < MANY; j++)
            if (!freed[j])
                assert_int_equal(many_got[j], 0);
        assert_int_equal(zkr_lock_release(l[i]), 0);
    }
    for (int i = 0; i < MANY; i++) {
        if (!freed[i]) {
            assert_int_equal(many_got[i], i > 0 ? 1 : 0);
            zkr_lock_free(l[i]);
        }
    }
    assert_int_equal(children("/t/many"), 0);
    zkr_session_free(s);
}

/* More holders in one session than the path index's first table (16
 * buckets, so it grows while they are made), on distinct paths; each
 * node deleted by someone else, in random order: every holder must
 * notice (its own node's watch event must reach it). */
static void test_one_session_many_paths(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l[MANY_PATHS];
    atomic_int seen[MANY_PATHS];
    char node[MANY_PATHS][ZKR_NODE_MAX];
    int order[MANY_PATHS];
    long w0 = zkt_total_watches(server);

    (void)state;
    for (int i = 0; i < MANY_PATHS; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/t/manyp/%d", i);
        l[i] = new_lock(s, path, "a");
        seen[i] = -1;
        assert_int_equal(
            zkr_lock_set_listener(l[i], on_state, (void *)&seen[i]), 0);
        assert_int_equal(zkr_lock_acquire(l[i], -1), 0);
        assert_int_equal(zkr_lock_node(l[i], node[i], sizeof(node[i])), 0);
    }
    /* Each holder watches its own node. */
    assert_true(
        ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0 + MANY_PATHS, 10000));
    shuffled(order, MANY_PATHS);
    for (int k = 0; k < MANY_PATHS; k++)
        assert_int_equal(zoo_delete(raw, node[order[k]], -1), ZOK);
    for (int i = 0; i < MANY_PATHS; i++) {
        assert_true(ZKT_WAIT_UNTIL(seen[i] == ZKR_LOCK_LOST, 10000));
        assert_int_equal(zkr_lock_release(l[i]), ZKR_ELOST);
        zkr_lock_free(l[i]);
    }
    zkr_session_free(s);
}

/* Many handles of one session waiting with timeouts (the session's timer
 * visits only the handles that may have a timer): some freed before their
 * deadline, in random order; each of the others must end with
 * ZKR_ETIMEDOUT, and not before its own deadline. */
enum { MANY_TIMED = 20 };
static _Atomic int64_t timed_at[MANY_TIMED];

static void timed_done(int rc, zkr_lock_t *l, void *data)
{
    int i = (int)(intptr_t)data;

    (void)l;
    many_rc[i] = rc;
    timed_at[i] = zkt_now_ms();
    many_got[i]++;
}

static void test_one_session_many_deadlines(void **state)
{
    zkr_session_t *a = open_session(10000), *s = open_session(10000);
    zkr_lock_t *holder = new_lock(a, "/t/manyd", "holder"), *l[MANY_TIMED];
    int freed[MANY_TIMED] = {0}, order[MANY_TIMED];
    int64_t t0, tmo[MANY_TIMED];

    (void)state;
    assert_int_equal(zkr_lock_acquire(holder, -1), 0);
    t0 = zkt_now_ms();
    for (int i = 0; i < MANY_TIMED; i++) {
        l[i] = new_lock(s, "/t/manyd", "w");
        many_got[i] = 0;
        tmo[i] = zkt_scaled_ms(300 + 40 * ((i * 7) % MANY_TIMED));
        assert_int_equal(zkr_lock_acquire_async(l[i], (int)tmo[i], timed_done,
                                                (void *)(intptr_t)i),
                         0);
    }
    shuffled(order, MANY_TIMED);
    for (int k = 0; k < MANY_TIMED / 4; k++) {
        zkr_lock_free(l[order[k]]);
        freed[order[k]] = 1;
    }
    for (int i = 0; i < MANY_TIMED; i++) {
        if (freed[i])
            continue;
        assert_true(ZKT_WAIT_UNTIL(many_got[i] == 1, 20000));
        assert_int_equal(many_rc[i], ZKR_ETIMEDOUT);
        assert_true(timed_at[i] >= t0 + tmo[i]);
        zkr_lock_free(l[i]);
    }
    assert_int_equal(zkr_lock_release(holder), 0);
    zkr_lock_free(holder);
    assert_true(ZKT_WAIT_UNTIL(children("/t/manyd") == 0, 10000));
    zkr_session_free(s);
    zkr_session_free(a);
}

/* Many releases in flight on one session (its cleanup list: entries
 * unlinked as their deletes are answered, in any order, and disowned by
 * handles freed meanwhile): half the handles freed in random order while
 * their releases are pending. Every release callback comes once, with 0,
 * for the handles kept; every node is deleted. */
static void test_one_session_many_releases(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l[MANY_PATHS];
    int order[MANY_PATHS], freed[MANY_PATHS] = {0};

    (void)state;
    for (int i = 0; i < MANY_PATHS; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/t/manyr/%d", i);
        l[i] = new_lock(s, path, "a");
        assert_int_equal(zkr_lock_acquire(l[i], -1), 0);
        many_got[i] = 0;
    }
    for (int i = 0; i < MANY_PATHS; i++)
        assert_int_equal(
            zkr_lock_release_async(l[i], many_done, (void *)(intptr_t)i), 0);
    shuffled(order, MANY_PATHS);
    for (int k = 0; k < MANY_PATHS / 2; k++) {
        zkr_lock_free(l[order[k]]);
        freed[order[k]] = 1;
    }
    for (int i = 0; i < MANY_PATHS; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/t/manyr/%d", i);
        assert_true(ZKT_WAIT_UNTIL(children(path) == 0, 10000));
    }
    for (int i = 0; i < MANY_PATHS; i++) {
        if (freed[i])
            continue;
        assert_true(ZKT_WAIT_UNTIL(many_got[i] == 1, 10000));
        assert_int_equal(many_rc[i], 0);
        assert_int_equal(zkr_lock_state(l[i]), ZKR_LOCK_IDLE);
        zkr_lock_free(l[i]);
        assert_int_equal(many_got[i], 1);
    }
    zkr_session_free(s);
}

/* A queue of n contenders on 4 sessions, formed at once (each waiter's
 * listing shows everyone before it), then released in turn: each release
 * must grant exactly the next one, with one notification. Returns the
 * listings the sessions made from the grant of contender `from` to the
 * end. */
enum { CHAIN_MAX = 40, CHAIN_S = 4 };
static atomic_int chain_got[CHAIN_MAX];

static uint64_t run_chain(const char *path, int n, int from,
                          const struct ACL_vector *acl)
{
    zkr_session_t *s[CHAIN_S];
    zkr_lock_t *l[CHAIN_MAX];
    uint64_t lists = 0, events = 0;
    int64_t last = 0;

    for (int i = 0; i < CHAIN_S; i++)
        s[i] = open_session(10000);
    for (int i = 0; i < n; i++) {
        assert_int_equal(zkr_lock_new(&l[i], s[i % CHAIN_S], path, NULL, acl),
                         0);
        chain_got[i] = 1;
    }
    assert_int_equal(zkr_lock_acquire(l[0], -1), 0);
    for (int i = 1; i < n; i++) {
        assert_int_equal(
            zkr_lock_acquire_async(l[i], -1, cancel_done, &chain_got[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children(path) == i + 1, 5000));
    }
    /* n - 1 waiters on their predecessors and own nodes, the holder on
     * its own node (its successor is on another session). */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 2 * n - 1, 5000));
    for (int i = 0; i + 1 < n; i++) {
        int64_t t = token_of(l[i]);
        assert_true(t > last);
        last = t;
        if (i == from) {
            for (int k = 0; k < CHAIN_S; k++) {
                lists += zkr_session_counter(s[k], ZKR_COUNTER_LISTS);
                events += zkr_session_counter(s[k], ZKR_COUNTER_WATCH_EVENTS);
            }
        }
        assert_int_equal(zkr_lock_release(l[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(chain_got[i + 1] == 0, 5000));
        for (int k = i + 2; k < n; k++)
            assert_int_equal(chain_got[k], 1);
    }
    assert_true(token_of(l[n - 1]) > last);
    for (int k = 0; k < CHAIN_S; k++) {
        lists -= zkr_session_counter(s[k], ZKR_COUNTER_LISTS);
        events -= zkr_session_counter(s[k], ZKR_COUNTER_WATCH_EVENTS);
    }
    /* One notification per release. */
    assert_int_equal(-(int64_t)events, n - 1 - from);
    assert_int_equal(zkr_lock_release(l[n - 1]), 0);
    assert_int_equal(children(path), 0);
    for (int i = 0; i < n; i++)
        zkr_lock_free(l[i]);
    for (int i = 0; i < CHAIN_S; i++)
        zkr_session_free(s[i]);
    return (uint64_t)(-(int64_t)lists);
}

/* Down a queue that formed at once, every grant rests on a listing made
 * after the release's notification: one listing per release, none by the
 * waiters that were not woken. (The handoff without listing, which took a
 * written-then-deleted predecessor as proof that everyone before it had
 * gone, was removed as unsound: any client can write and delete a
 * waiter's node, see test_foreign_delete_of_waiter.) */
static void test_release_chain(void **state)
{
    (void)state;
    assert_int_equal(run_chain("/t/chain", 12, 0, NULL), 11);
}

/* Someone else writes contender nodes (Curator's revocation writes a
 * holder's node, say). The contender woken by the write lists: a write on
 * the holder's or on a waiter's node grants nobody, and ownership stays
 * where it was. */
static void write_as_other(const char *node, zkr_session_t *woken, long watches)
{
    uint64_t lists = zkr_session_counter(woken, ZKR_COUNTER_LISTS);

    assert_int_equal(zoo_set(raw, node, "x", 1, -1), ZOK);
    /* The woken contender found the node there, listed once and watches
     * it again; then give it time to (wrongly) take the lock. */
    assert_true(ZKT_WAIT_UNTIL(zkr_session_counter(woken, ZKR_COUNTER_LISTS) ==
                                       lists + 1 &&
                                   zkt_total_watches(server) == watches,
                               5000));
    usleep(200000);
}

static void test_foreign_writes(void **state)
{
    zkr_session_t *s[3];
    zkr_lock_t *l[3];
    char node[ZKR_NODE_MAX];
    atomic_int seen = -1;
    atomic_int got[3] = {1, 1, 1};

    (void)state;
    for (int i = 0; i < 3; i++) {
        s[i] = open_session(10000);
        l[i] = new_lock(s[i], "/t/fwrite", NULL);
    }
    /* The holder's node. */
    assert_int_equal(zkr_lock_set_listener(l[0], on_state, (void *)&seen), 0);
    assert_int_equal(zkr_lock_acquire(l[0], -1), 0);
    assert_int_equal(zkr_lock_node(l[0], node, sizeof(node)), 0);
    assert_int_equal(zkr_lock_acquire_async(l[1], -1, cancel_done, &got[1]), 0);
    /* l[1] watches l[0]'s node and its own, and l[0] (after 50 ms) its
     * own. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 3, 5000));
    write_as_other(node, s[1], 3);
    assert_int_equal(got[1], 1);
    assert_int_equal(seen, -1);
    assert_int_equal(zkr_lock_state(l[0]), ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_release(l[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(got[1] == 0, 5000));

    /* A waiter's node: l[2] waits behind l[0] (again), which waits behind
     * l[1]; the write on l[0]'s node wakes l[2], which lists and waits. */
    got[1] = got[2] = 1;
    assert_int_equal(zkr_lock_acquire_async(l[0], -1, cancel_done, &got[1]), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/fwrite") == 2, 5000));
    assert_int_equal(zkr_lock_node(l[0], node, sizeof(node)), 0);
    assert_int_equal(zkr_lock_acquire_async(l[2], -1, cancel_done, &got[2]), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/fwrite") == 3, 5000));
    /* Three nodes, each watched by its owner, two also by a successor. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 5, 5000));
    write_as_other(node, s[2], 5);
    assert_int_equal(got[2], 1);
    assert_int_equal(zkr_lock_state(l[2]), ZKR_LOCK_ACQUIRING);
    assert_int_equal(zkr_lock_state(l[1]), ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_cancel(l[0]), 0);
    assert_int_equal(zkr_lock_release(l[1]), 0);
    assert_true(ZKT_WAIT_UNTIL(got[2] == 0, 5000));
    assert_int_equal(zkr_lock_release(l[2]), 0);
    for (int i = 0; i < 3; i++) {
        zkr_lock_free(l[i]);
        zkr_session_free(s[i]);
    }
    assert_int_equal(children("/t/fwrite"), 0);
}

/* Nodes whose ACL gives no WRITE (deleting needs DELETE on the parent
 * only): nothing in the lock needs to write a node; each release grants
 * the next waiter, which lists once. */
static void test_chain_without_write_right(void **state)
{
    struct ACL rcd[] = {{ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
                         {"world", "anyone"}}};
    struct ACL_vector acl = {1, rcd};

    (void)state;
    assert_int_equal(run_chain("/t/rcd/lock", 8, 0, &acl), 7);
}

/* Acquire while another thread cancels: ZKR_ECANCELED, no node left. */
#include <pthread.h>
static void *cancel_later(void *arg)
{
    zkr_lock_t *l = arg;
    while (zkr_lock_state(l) != ZKR_LOCK_ACQUIRING ||
           children("/t/xcancel") < 2)
        usleep(1000);
    zkr_lock_cancel(l);
    return NULL;
}

static void test_cancel_from_thread(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *a = new_lock(s, "/t/xcancel", NULL);
    zkr_lock_t *b = new_lock(s, "/t/xcancel", NULL);
    pthread_t th;

    (void)state;
    assert_int_equal(zkr_lock_acquire(a, -1), 0);
    pthread_create(&th, NULL, cancel_later, b);
    assert_int_equal(zkr_lock_acquire(b, -1), ZKR_ECANCELED);
    pthread_join(th, NULL);
    assert_int_equal(children("/t/xcancel"), 1);
    zkr_lock_free(a);
    zkr_lock_free(b);
    zkr_session_free(s);
}

/* Freeing a handle whose acquire is pending (just sent, or waiting)
 * delivers ZKR_ECANCELED before zkr_lock_free returns, and its node goes. */
static void test_free_while_acquiring(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *a = new_lock(s, "/t/freewait", NULL), *b, *c;
    atomic_int rb = 1, rc = 1;

    (void)state;
    assert_int_equal(zkr_lock_acquire(a, -1), 0);
    b = new_lock(s, "/t/freewait", NULL);
    assert_int_equal(zkr_lock_acquire_async(b, -1, cancel_done, &rb), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/freewait") == 2, 5000));
    zkr_lock_free(b);
    assert_int_equal(rb, ZKR_ECANCELED);
    /* Freed right after sending the create: the answer arrives for a
     * handle that is gone, and the node it made is deleted. */
    c = new_lock(s, "/t/freewait", NULL);
    assert_int_equal(zkr_lock_acquire_async(c, -1, cancel_done, &rc), 0);
    zkr_lock_free(c);
    assert_int_equal(rc, ZKR_ECANCELED);
    assert_true(ZKT_WAIT_UNTIL(children("/t/freewait") == 1, 5000));
    assert_int_equal(zkr_lock_release(a), 0);
    zkr_lock_free(a);
    zkr_session_free(s);
    assert_int_equal(children("/t/freewait"), 0);
}

/* A Curator-style contender made by a plain client: an ephemeral
 * sequential `_c_<uuid>-lock-` node under path. Returns its full path. */
static char *foreign_contender(zhandle_t *zh, const char *path,
                               const struct ACL_vector *acl)
{
    char want[256], got[512];

    snprintf(want, sizeof(want), "%s/_c_0badc0de-0000-4000-8000-%012d-lock-",
             path, getpid());
    assert_int_equal(zoo_create(zh, want, "peer", 4,
                                acl != NULL ? acl : &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_EPHEMERAL_SEQUENTIAL, got, sizeof(got)),
                     ZOK);
    return strdup(got);
}

/* Issue 12.2. Holder H, a foreign waiter P (Curator's name, a plain
 * client's node), zkr waiters W and W2 behind it. Another client writes P
 * and deletes it (in one transaction, or as two calls): the queue has lost
 * a waiter, nothing more. H still holds, so neither W nor W2 may be
 * granted. (The removed handoff took "the node before me was written, then
 * is gone" for a holder's release and granted W, which handed on to W2.) */
static void foreign_delete_round(const char *path, int multi)
{
    zkr_session_t *s[3];
    zkr_lock_t *h, *w, *w2;
    zhandle_t *other = zkt_connect(zkt_server_hosts(server), 10000);
    atomic_int got = 1, got2 = 1;
    char *p;

    assert_non_null(other);
    for (int i = 0; i < 3; i++)
        s[i] = open_session(10000);
    h = new_lock(s[0], path, "H");
    w = new_lock(s[1], path, "W");
    w2 = new_lock(s[2], path, "W2");
    assert_int_equal(zkr_lock_acquire(h, -1), 0);
    p = foreign_contender(raw, path, NULL);
    assert_int_equal(zkr_lock_acquire_async(w, -1, cancel_done, &got), 0);
    assert_true(ZKT_WAIT_UNTIL(children(path) == 3, 5000));
    assert_int_equal(zkr_lock_acquire_async(w2, -1, cancel_done, &got2), 0);
    assert_true(ZKT_WAIT_UNTIL(children(path) == 4, 5000));
    usleep(300000); /* W watches P, W2 watches W */
    if (multi) {
        zoo_op_t ops[2];
        zoo_op_result_t res[2];
        struct Stat st;
        zoo_set_op_init(&ops[0], p, "__REVOKE__", 10, -1, &st);
        zoo_delete_op_init(&ops[1], p, -1);
        assert_int_equal(zoo_multi(other, 2, ops, res), ZOK);
    } else {
        assert_int_equal(zoo_set(other, p, "__REVOKE__", 10, -1), ZOK);
        assert_int_equal(zoo_delete(other, p, -1), ZOK);
    }
    free(p);
    /* W lists, finds H before it and watches H. */
    assert_true(ZKT_WAIT_UNTIL(children(path) == 3, 5000));
    usleep(500000);
    assert_int_equal(got, 1);
    assert_int_equal(got2, 1);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_ACQUIRING);
    assert_int_equal(zkr_lock_state(w2), ZKR_LOCK_ACQUIRING);
    assert_int_equal(zkr_lock_state(h), ZKR_LOCK_HELD);
    /* The queue still works, in order. */
    assert_int_equal(zkr_lock_release(h), 0);
    assert_true(ZKT_WAIT_UNTIL(got == 0, 5000));
    usleep(100000);
    assert_int_equal(got2, 1);
    assert_int_equal(zkr_lock_release(w), 0);
    assert_true(ZKT_WAIT_UNTIL(got2 == 0, 5000));
    assert_int_equal(zkr_lock_release(w2), 0);
    zkr_lock_free(h);
    zkr_lock_free(w);
    zkr_lock_free(w2);
    for (int i = 0; i < 3; i++)
        zkr_session_free(s[i]);
    zookeeper_close(other);
    assert_int_equal(children(path), 0);
}

static void test_foreign_delete_of_waiter(void **state)
{
    (void)state;
    foreign_delete_round("/t/fdel1", 1);
    foreign_delete_round("/t/fdel2", 0);
}

/* Issue 12.3. An operator deletes waiter W's node while H holds and W2
 * waits behind W. W can never be granted with a node that is gone: it
 * learns of the deletion while it waits (it watches its own node) and its
 * acquire ends with ZKR_ELOST, as zkr_lock_acquire() documents. When H
 * releases, W2 alone holds. */
static void test_waiter_node_deleted(void **state)
{
    zkr_session_t *s[3];
    zkr_lock_t *h, *w, *w2;
    char node[ZKR_NODE_MAX];
    atomic_int got = 1, got2 = 1;

    (void)state;
    for (int i = 0; i < 3; i++)
        s[i] = open_session(10000);
    h = new_lock(s[0], "/t/wdel", "H");
    w = new_lock(s[1], "/t/wdel", "W");
    w2 = new_lock(s[2], "/t/wdel", "W2");
    assert_int_equal(zkr_lock_acquire(h, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(w, -1, cancel_done, &got), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/wdel") == 2, 5000));
    assert_int_equal(zkr_lock_acquire_async(w2, -1, cancel_done, &got2), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/wdel") == 3, 5000));
    usleep(300000); /* both wait */
    assert_int_equal(zkr_lock_node(w, node, sizeof(node)), 0);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    /* Learned while waiting, with H still holding. */
    assert_true(ZKT_WAIT_UNTIL(got != 1, 3000));
    assert_int_equal(got, ZKR_ELOST);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_state(h), ZKR_LOCK_HELD);
    assert_int_equal(got2, 1);
    assert_int_equal(zkr_lock_release(h), 0);
    assert_true(ZKT_WAIT_UNTIL(got2 == 0, 5000));
    usleep(200000);
    assert_true(zkr_lock_state(w) != ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_release(w), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_release(w2), 0);
    zkr_lock_free(h);
    zkr_lock_free(w);
    zkr_lock_free(w2);
    for (int i = 0; i < 3; i++)
        zkr_session_free(s[i]);
    assert_int_equal(children("/t/wdel"), 0);
}

/* Children of path, not counting theirs (a node we cannot read cannot
 * be listed either). */
static int kids(const char *path)
{
    struct String_vector sv;
    int n;

    if (zoo_get_children(raw, path, 0, &sv) != ZOK)
        return -1;
    n = sv.count;
    deallocate_String_vector(&sv);
    return n;
}

/* A contender ahead whose node has a creator-only ACL (another user's
 * Curator lock, say): we can list the directory but not read that node,
 * and the server sends us none of its events. We still wait (a getData
 * watch on it used to fail the acquire with ZNOAUTH), watching the
 * directory, and are granted when it goes. */
static void test_creator_only_contender_ahead(void **state)
{
    zhandle_t *other = zkt_connect(zkt_server_hosts(server), 10000);
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *w = new_lock(s, "/t/creator", "W");
    char *p, buf[16];
    int len = sizeof(buf);
    atomic_int got = 1;

    (void)state;
    assert_non_null(other);
    assert_int_equal(
        zoo_add_auth(other, "digest", "peer:secret", 11, NULL, NULL), ZOK);
    usleep(200000);
    assert_int_equal(
        zoo_create(raw, "/t/creator", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    p = foreign_contender(other, "/t/creator", &ZOO_CREATOR_ALL_ACL);
    /* We cannot read it. */
    assert_int_equal(zoo_get(raw, p, 0, buf, &len, NULL), ZNOAUTH);
    assert_int_equal(zkr_lock_acquire_async(w, -1, cancel_done, &got), 0);
    usleep(500000);
    assert_int_equal(got, 1);
    assert_int_equal(kids("/t/creator"), 2);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_ACQUIRING);
    assert_int_equal(zoo_delete(other, p, -1), ZOK);
    free(p);
    assert_true(ZKT_WAIT_UNTIL(got == 0, 5000));
    assert_int_equal(zkr_lock_release(w), 0);
    zkr_lock_free(w);
    zkr_session_free(s);
    zookeeper_close(other);
    assert_int_equal(kids("/t/creator"), 0);
}

/* Issue 20.10 (watches). On a handle the application also uses
 * (zkr_session_handle()), taking back zkr's watch on a node must not take
 * the application's own watch on it. */
static atomic_int app_events;

static void app_watcher(zhandle_t *zh, int type, int st, const char *path,
                        void *ctx)
{
    (void)zh;
    (void)st;
    (void)path;
    (void)ctx;
    if (type == ZOO_DELETED_EVENT)
        app_events++;
}

static void test_application_watch_kept(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_lock_t *h = new_lock(a, "/t/appw", "H"),
               *w = new_lock(b, "/t/appw", "W");
    zhandle_t *zh = zkr_session_handle(b);
    char node[ZKR_NODE_MAX];
    struct Stat st;

    (void)state;
    app_events = 0;
    assert_int_equal(zkr_lock_acquire(h, -1), 0);
    assert_int_equal(zkr_lock_node(h, node, sizeof(node)), 0);
    /* The application watches the holder's node on b's handle. */
    assert_int_equal(zoo_wexists(zh, node, app_watcher, NULL, &st), ZOK);
    /* zkr's waiter on b watches the same node, then gives up. */
    assert_int_equal(zkr_lock_acquire(w, 300), ZKR_ETIMEDOUT);
    usleep(300000);
    assert_int_equal(zkr_lock_release(h), 0);
    assert_true(ZKT_WAIT_UNTIL(app_events == 1, 3000));
    zkr_lock_free(w);
    zkr_lock_free(h);
    zkr_session_free(b);
    zkr_session_free(a);
    assert_int_equal(children("/t/appw"), 0);
}

/* Issue 12 (watches). A zkr watch that is already gone (here the
 * application removed every watch on the path) is not retried forever:
 * zkr_session_free() does not wait for it. */
static void test_removed_watch_not_retried(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_lock_t *h = new_lock(a, "/t/appw2", "H"),
               *w = new_lock(b, "/t/appw2", "W");
    zhandle_t *zh = zkr_session_handle(b);
    char node[ZKR_NODE_MAX];
    int64_t t0;
    atomic_int got = 1;

    (void)state;
    /* The application removes every watch on the path zkr waits on. */
    assert_int_equal(zkr_lock_acquire(h, -1), 0);
    assert_int_equal(zkr_lock_node(h, node, sizeof(node)), 0);
    assert_int_equal(zkr_lock_acquire_async(w, -1, cancel_done, &got), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/appw2") == 2, 5000));
    usleep(300000);
    assert_int_equal(zoo_remove_all_watches(zh, node, ZWATCHTYPE_ANY, 0), ZOK);
    assert_int_equal(zkr_lock_cancel(w), 0);
    assert_true(ZKT_WAIT_UNTIL(got == ZKR_ECANCELED, 5000));
    assert_true(ZKT_WAIT_UNTIL(children("/t/appw2") == 1, 5000));
    zkr_lock_free(w);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_session_free(b), 0);
    /* It used to wait for half the session timeout (5 s). */
    assert_true(zkt_now_ms() - t0 < 2000);
    assert_int_equal(zkr_lock_release(h), 0);
    zkr_lock_free(h);
    zkr_session_free(a);
    assert_int_equal(children("/t/appw2"), 0);
}

/* Issue 20.10 (delete). The directory lets us create and list but not
 * delete: a release the server refuses keeps the grant (the node stays,
 * so does the lock) and returns the server's code; once the right is
 * given, the release goes through. */
static void test_release_refused(void **state)
{
    struct ACL rca[] = {{ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_ADMIN,
                         {"world", "anyone"}}};
    struct ACL_vector acl = {1, rca};
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/t/nodel/lock", "L");
    int64_t tok;

    (void)state;
    zoo_create(raw, "/t", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(
        zoo_create(raw, "/t/nodel", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    assert_int_equal(zoo_create(raw, "/t/nodel/lock", "", 0, &acl, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    tok = token_of(l);
    assert_int_equal(zkr_lock_release(l), ZNOAUTH);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);
    assert_int_equal(token_of(l), tok);
    assert_int_equal(children("/t/nodel/lock"), 1);
    assert_int_equal(
        zoo_set_acl(raw, "/t/nodel/lock", -1, &ZOO_OPEN_ACL_UNSAFE), ZOK);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_int_equal(children("/t/nodel/lock"), 0);
    zkr_lock_free(l);
    zkr_session_free(s);
    zoo_delete(raw, "/t/nodel/lock", -1);
    zoo_delete(raw, "/t/nodel", -1);
}

static zkr_lock_t *waiter_lock(zkr_session_t *s, const char *dir)
{
    return new_lock(s, dir, "w");
}

/* Issue 19 (review): a waiter's exists() watch on its own deleted node,
 * kept for the waiter behind it (its getData found the node gone too), is
 * removed (deleted_waiters_leave_no_watch()). */
static void test_deleted_waiters_leave_no_watch(void **state)
{
    (void)state;
    deleted_waiters_leave_no_watch("/t/dleak", waiter_lock, 40, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_exclusion_processes),
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_try_timeout_cancel),
        cmocka_unit_test(test_release_idempotent_and_states),
        cmocka_unit_test(test_foreign_and_junk_children),
        cmocka_unit_test(test_vanished_parent),
        cmocka_unit_test(test_new_directory_creates_only_it),
        cmocka_unit_test(test_release_wakes_one),
        cmocka_unit_test(test_cancel_from_thread),
        cmocka_unit_test(test_free_while_acquiring),
        cmocka_unit_test(test_forced_deletion_noticed),
        cmocka_unit_test(test_release_chain),
        cmocka_unit_test(test_foreign_writes),
        cmocka_unit_test(test_chain_without_write_right),
        cmocka_unit_test(test_foreign_delete_of_waiter),
        cmocka_unit_test(test_waiter_node_deleted),
        cmocka_unit_test(test_deleted_waiters_leave_no_watch),
        cmocka_unit_test(test_creator_only_contender_ahead),
        cmocka_unit_test(test_application_watch_kept),
        cmocka_unit_test(test_removed_watch_not_retried),
        cmocka_unit_test(test_release_refused),
        cmocka_unit_test(test_one_session_many_handles),
        cmocka_unit_test(test_one_session_many_paths),
        cmocka_unit_test(test_one_session_many_deadlines),
        cmocka_unit_test(test_one_session_many_releases),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("lock", tests, setup, teardown);
}
