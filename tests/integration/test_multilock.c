/* Integration tests of the multi-lock against a real ZooKeeper server
 * started by the harness (free loopback port, temp data dir). The oracles
 * are the rules of zkr.h's zkr_multilock group: all or nothing, one
 * canonical order (no deadlock), one timeout for the set. */
#define _DEFAULT_SOURCE
#include <poll.h>
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

static zkr_multilock_t *new_multi(zkr_lock_t **members, int n)
{
    zkr_multilock_t *m = NULL;

    assert_int_equal(zkr_multilock_new(&m, members, n), 0);
    return m;
}

/* A session in event-loop mode (no event thread). */
static zkr_session_t *open_loop_session(void)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    o.no_event_thread = 1;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), 10000, &o),
                     0);
    return s;
}

/* Our own nodes of path: the contenders of session s among its children
 * (the holder's node of another session is not ours). */
static int nodes_of(zkr_session_t *s, const char *path)
{
    zkr_contender_t *v = NULL;
    int n = 0, mine = 0;
    int64_t sid = zoo_client_id(zkr_session_handle(s))->client_id;

    if (zkr_contenders_list(s, path, &v, &n) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (v[i].session_id == sid)
            mine++;
    zkr_contenders_free(v, n);
    return mine;
}

/* ---------------------------------------------------- no deadlock */

/* Two processes' worth of contenders (two sessions, two threads) take the
 * same two paths, each naming them in the opposite order, both holding
 * the first before either asks for the second (a barrier). */
typedef struct {
    zkr_session_t *s;
    const char *first, *second;
    int multi; /* 1: one multi-lock; 0: two locks in the order named */
    int rounds;
    pthread_barrier_t *bar;
    atomic_int *inside; /* holders of both paths at once */
    int timeouts, errors, grants, overlap;
} crosser_t;

static void *crosser(void *arg)
{
    crosser_t *x = arg;
    zkr_lock_t *a = new_lock(x->s, x->first, NULL);
    zkr_lock_t *b = new_lock(x->s, x->second, NULL);
    zkr_lock_t *both[2] = {a, b};
    zkr_multilock_t *m = new_multi(both, 2);

    for (int r = 0; r < x->rounds; r++) {
        int rc;
        pthread_barrier_wait(x->bar);
        if (x->multi) {
            rc = zkr_multilock_acquire(m, zkt_scaled_ms(20000));
        } else {
            /* The naive way: the order as named, each lock its own
             * timeout, a pause between to let the other cross. */
            rc = zkr_lock_acquire(a, zkt_scaled_ms(2000));
            zkt_sleep_ms(200);
            if (rc == 0 && (rc = zkr_lock_acquire(b, zkt_scaled_ms(2000))) != 0)
                zkr_lock_release(a);
        }
        if (rc == ZKR_ETIMEDOUT)
            x->timeouts++;
        else if (rc != 0)
            x->errors++;
        if (rc != 0)
            continue;
        x->grants++;
        if (atomic_fetch_add(x->inside, 1) != 0)
            x->overlap++;
        zkt_sleep_ms(20);
        atomic_fetch_sub(x->inside, 1);
        if (x->multi)
            assert_int_equal(zkr_multilock_release(m), 0);
        else {
            zkr_lock_release(b);
            zkr_lock_release(a);
        }
    }
    zkr_multilock_free(m);
    zkr_lock_free(a);
    zkr_lock_free(b);
    return NULL;
}

static void cross(int multi, int rounds, crosser_t x[2])
{
    pthread_barrier_t bar;
    pthread_t t[2];
    atomic_int inside = 0;

    pthread_barrier_init(&bar, NULL, 2);
    for (int i = 0; i < 2; i++) {
        memset(&x[i], 0, sizeof(x[i]));
        x[i].s = open_session(10000);
        x[i].first = i == 0 ? "/t/x/a" : "/t/x/b";
        x[i].second = i == 0 ? "/t/x/b" : "/t/x/a";
        x[i].multi = multi;
        x[i].rounds = rounds;
        x[i].bar = &bar;
        x[i].inside = &inside;
        pthread_create(&t[i], NULL, crosser, &x[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(zkr_session_free(x[i].s), 0);
    }
    pthread_barrier_destroy(&bar);
}

static void test_opposite_orders_do_not_deadlock(void **state)
{
    crosser_t x[2];

    (void)state;
    /* First, the check must catch the deadlock of the naive way: each
     * holds its first path and times out on the other's. */
    cross(0, 2, x);
    assert_true(x[0].timeouts + x[1].timeouts > 0);
    /* The multi-lock takes both in one order: every round of both is
     * granted, and never to both at once. */
    cross(1, 15, x);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(x[i].timeouts, 0);
        assert_int_equal(x[i].errors, 0);
        assert_int_equal(x[i].grants, 15);
        assert_int_equal(x[i].overlap, 0);
    }
    assert_int_equal(children("/t/x/a"), 0);
    assert_int_equal(children("/t/x/b"), 0);
}

/* ------------------------------------------------ one timeout, rollback */

typedef struct {
    zkr_lock_t *l;
    int after_ms;
} later_t;

static void *release_later(void *arg)
{
    later_t *w = arg;

    zkt_sleep_ms(w->after_ms);
    assert_int_equal(zkr_lock_release(w->l), 0);
    return NULL;
}

/* Another session holds the first path for a while and the last path
 * throughout. One timeout T for the set: the acquire ends at T, not at the
 * first path's wait plus T (Curator's per-lock timeouts), and leaves none
 * of its nodes behind. */
static void test_one_timeout_for_the_set(void **state)
{
    const int T = zkt_scaled_ms(3000), first = T / 2;
    zkr_session_t *h = open_session(10000), *s = open_session(10000);
    zkr_lock_t *ha = new_lock(h, "/t/tm/a", NULL);
    zkr_lock_t *hc = new_lock(h, "/t/tm/c", NULL);
    zkr_lock_t *m3[3] = {new_lock(s, "/t/tm/c", NULL),
                         new_lock(s, "/t/tm/b", NULL),
                         new_lock(s, "/t/tm/a", NULL)};
    zkr_multilock_t *m = new_multi(m3, 3);
    later_t w = {ha, first};
    pthread_t t;
    int64_t t0, took;

    (void)state;
    /* Canonical order: a, b, c whatever order they were given in. */
    assert_ptr_equal(zkr_multilock_member(m, 0), m3[2]);
    assert_ptr_equal(zkr_multilock_member(m, 1), m3[1]);
    assert_ptr_equal(zkr_multilock_member(m, 2), m3[0]);
    assert_null(zkr_multilock_member(m, 3));
    assert_int_equal(zkr_multilock_count(m), 3);
    assert_int_equal(zkr_lock_acquire(ha, -1), 0);
    assert_int_equal(zkr_lock_acquire(hc, -1), 0);
    pthread_create(&t, NULL, release_later, &w);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_multilock_acquire(m, T), ZKR_ETIMEDOUT);
    took = zkt_now_ms() - t0;
    pthread_join(t, NULL);
    print_message("# timeout %d ms, first path free after %d: took %lld ms\n",
                  T, first, (long long)took);
    assert_true(took >= T - 10);
    assert_true(took < T + first); /* per-lock timeouts: T + first */
    assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_IDLE);
    for (int i = 0; i < 3; i++)
        assert_int_equal(zkr_lock_state(m3[i]), ZKR_LOCK_IDLE);
    assert_int_equal(children("/t/tm/a"), 0);
    assert_int_equal(children("/t/tm/b"), 0);
    assert_int_equal(children("/t/tm/c"), 1); /* the holder's */
    /* A try finds c held: ZKR_EBUSY, a and b given back. */
    assert_int_equal(zkr_multilock_acquire(m, 0), ZKR_EBUSY);
    assert_int_equal(nodes_of(s, "/t/tm/a"), 0);
    assert_int_equal(nodes_of(s, "/t/tm/b"), 0);
    /* Once c is free, the set is had. */
    assert_int_equal(zkr_lock_release(hc), 0);
    assert_int_equal(zkr_multilock_acquire(m, 0), 0);
    assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_HELD);
    assert_int_equal(zkr_multilock_release(m), 0);
    assert_int_equal(zkr_multilock_release(m), ZKR_ENOTHELD);
    zkr_multilock_free(m);
    for (int i = 0; i < 3; i++)
        zkr_lock_free(m3[i]);
    zkr_lock_free(ha);
    zkr_lock_free(hc);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------------ kinds, tokens, args */

/* A lock, a read side and a semaphore permit in one set: each keeps its
 * kind's rule (another reader shares the read path, a writer does not),
 * each has its own token. */
static void test_mixed_kinds(void **state)
{
    zkr_session_t *s = open_session(10000), *o = open_session(10000);
    zkr_lock_t *lk = new_lock(s, "/t/mix/lock", NULL), *rd, *wr, *sem;
    zkr_lock_t *ord, *owr, *osem;
    zkr_multilock_t *m;
    struct pollfd p;

    (void)state;
    assert_int_equal(zkr_rwlock_new(&rd, &wr, s, "/t/mix/rw", NULL, NULL), 0);
    assert_int_equal(zkr_semaphore_new(&sem, s, "/t/mix/sem", 2, NULL, NULL),
                     0);
    assert_int_equal(zkr_rwlock_new(&ord, &owr, o, "/t/mix/rw", NULL, NULL), 0);
    assert_int_equal(zkr_semaphore_new(&osem, o, "/t/mix/sem", 2, NULL, NULL),
                     0);
    {
        zkr_lock_t *v[3] = {sem, rd, lk};
        m = new_multi(v, 3);
    }
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    assert_int_equal(zkr_multilock_acquire(m, 5000), ZKR_EALREADY);
    for (int i = 0; i < 3; i++) {
        int64_t tok = 0;
        assert_int_equal(zkr_lock_token(zkr_multilock_member(m, i), &tok), 0);
        assert_true(tok > 0);
    }
    assert_true(zkr_multilock_valid_ms(m) > 0);
    p.fd = zkr_multilock_fd(m);
    p.events = POLLIN;
    assert_true(p.fd >= 0);
    assert_int_equal(poll(&p, 1, 0), 0);            /* nothing changed */
    assert_int_equal(zkr_lock_acquire(ord, 0), 0);  /* readers share */
    assert_int_equal(zkr_lock_acquire(osem, 0), 0); /* 2 permits */
    assert_int_equal(zkr_lock_release(ord), 0);
    assert_int_equal(zkr_lock_acquire(owr, 0), ZKR_EBUSY);
    assert_int_equal(zkr_multilock_release(m), 0);
    assert_int_equal(zkr_multilock_valid_ms(m), 0);
    assert_int_equal(zkr_lock_acquire(owr, 0), 0);
    assert_int_equal(zkr_lock_release(owr), 0);
    assert_int_equal(zkr_lock_release(osem), 0);
    zkr_multilock_free(m);
    zkr_lock_free(lk);
    zkr_lock_free(rd);
    zkr_lock_free(wr);
    zkr_lock_free(sem);
    zkr_lock_free(ord);
    zkr_lock_free(owr);
    zkr_lock_free(osem);
    assert_int_equal(children("/t/mix/lock"), 0);
    assert_int_equal(children("/t/mix/rw"), 0);
    assert_int_equal(children("/t/mix/sem"), 0);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(o), 0);
}

static void test_bad_arguments(void **state)
{
    zkr_session_t *s = open_session(10000), *o = open_session(10000);
    zkr_lock_t *a = new_lock(s, "/t/bad/a", NULL);
    zkr_lock_t *a2 = new_lock(s, "/t/bad/a", NULL);
    zkr_lock_t *x = new_lock(o, "/t/bad/x", NULL), *rd, *wr;
    zkr_lock_t *many[ZKR_MULTILOCK_MAX + 1];
    zkr_multilock_t *m = NULL;

    (void)state;
    assert_int_equal(zkr_rwlock_new(&rd, &wr, s, "/t/bad/rw", NULL, NULL), 0);
    {
        zkr_lock_t *same[2] = {a, a2}, *pair[2] = {rd, wr}, *twice[2] = {a, a};
        zkr_lock_t *two[2] = {a, x}, *hole[2] = {a, NULL};
        assert_int_equal(zkr_multilock_new(NULL, same, 1), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, NULL, 1), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, same, 0), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, same, 2), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, pair, 2), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, twice, 2), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, two, 2), ZBADARGUMENTS);
        assert_int_equal(zkr_multilock_new(&m, hole, 2), ZBADARGUMENTS);
    }
    for (int i = 0; i <= ZKR_MULTILOCK_MAX; i++)
        many[i] = a;
    assert_int_equal(zkr_multilock_new(&m, many, ZKR_MULTILOCK_MAX + 1),
                     ZBADARGUMENTS);
    assert_null(m);
    assert_int_equal(zkr_multilock_acquire(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_multilock_release(NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_multilock_cancel(NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_multilock_state(NULL), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_multilock_fd(NULL), -1);
    assert_int_equal(zkr_multilock_valid_ms(NULL), 0);
    assert_int_equal(zkr_multilock_count(NULL), 0);
    zkr_multilock_free(NULL);
    m = new_multi(&a, 1);
    assert_int_equal(zkr_multilock_acquire(m, -2), ZBADARGUMENTS);
    assert_int_equal(zkr_multilock_acquire_async(m, 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_multilock_release(m), ZKR_ENOTHELD);
    assert_int_equal(zkr_multilock_cancel(m), ZKR_ESTATE);
    /* A member busy through its own call: its acquire's answer. */
    assert_int_equal(zkr_lock_acquire(a, 0), 0);
    assert_int_equal(zkr_multilock_acquire(m, 0), ZKR_EALREADY);
    assert_int_equal(zkr_lock_release(a), 0);
    zkr_multilock_free(m);
    zkr_lock_free(a);
    zkr_lock_free(a2);
    zkr_lock_free(x);
    zkr_lock_free(rd);
    zkr_lock_free(wr);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(o), 0);
}

/* ------------------------------------------ async, cancel, free, loss */

static struct {
    atomic_int n, rc, deadlk;
    zkr_multilock_t *free_me; /* freed by the completion ... */
    zkr_lock_t *free_too[2];  /* ... and then these */
} done;

static void on_done(int rc, zkr_multilock_t *m, void *data)
{
    (void)data;
    /* Blocking calls are refused in a callback. */
    if (zkr_multilock_acquire(m, 0) == ZKR_EDEADLK &&
        zkr_multilock_release(m) == ZKR_EDEADLK)
        done.deadlk = 1;
    if (done.free_me == m) {
        zkr_multilock_free(m);
        /* Its members may go at once (zkr_multilock_free()). */
        zkr_lock_free(done.free_too[0]);
        zkr_lock_free(done.free_too[1]);
    }
    done.rc = rc;
    done.n++;
}

static void reset_done(void)
{
    done.n = 0;
    done.rc = 1;
    done.deadlk = 0;
    done.free_me = NULL;
    done.free_too[0] = done.free_too[1] = NULL;
}

/* Waiting for b (held by another), a granted: a cancel ends the acquire
 * with ZKR_ECANCELED and gives a back; so does a free (from another
 * thread: the completion runs before the free returns). */
static void test_cancel_and_free_while_waiting(void **state)
{
    zkr_session_t *h = open_session(10000), *s = open_session(10000);
    zkr_lock_t *hb = new_lock(h, "/t/cf/b", NULL);
    zkr_lock_t *v[2] = {new_lock(s, "/t/cf/b", NULL),
                        new_lock(s, "/t/cf/a", NULL)};
    zkr_multilock_t *m = new_multi(v, 2);

    (void)state;
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    reset_done();
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/cf/b") == 2, 5000));
    assert_int_equal(zkr_lock_state(v[1]), ZKR_LOCK_HELD); /* a, first */
    assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_ACQUIRING);
    assert_int_equal(zkr_multilock_release(m), ZKR_ESTATE);
    assert_int_equal(zkr_multilock_cancel(m), 0);
    assert_true(ZKT_WAIT_UNTIL(done.n == 1, 10000));
    assert_int_equal(done.rc, ZKR_ECANCELED);
    assert_int_equal(done.deadlk, 1);
    assert_int_equal(children("/t/cf/a"), 0);
    assert_int_equal(children("/t/cf/b"), 1);
    /* Again, ended by a free this time. */
    reset_done();
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/cf/b") == 2, 5000));
    zkr_multilock_free(m); /* does not wait for the server */
    assert_true(ZKT_WAIT_UNTIL(done.n == 1, 10000));
    assert_int_equal(done.rc, ZKR_ECANCELED);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(v[0]) == ZKR_LOCK_IDLE &&
                                   zkr_lock_state(v[1]) == ZKR_LOCK_IDLE,
                               10000));
    assert_true(ZKT_WAIT_UNTIL(children("/t/cf/a") == 0, 5000));
    assert_int_equal(children("/t/cf/b"), 1);
    /* Freed from its own completion once held, and its members right
     * after it: all given back in the background. */
    assert_int_equal(zkr_lock_release(hb), 0);
    m = new_multi(v, 2);
    reset_done();
    done.free_me = m;
    done.free_too[0] = v[0];
    done.free_too[1] = v[1];
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(done.n == 1, 10000));
    assert_int_equal(done.rc, 0);
    assert_true(ZKT_WAIT_UNTIL(
        children("/t/cf/a") == 0 && children("/t/cf/b") == 0, 10000));
    zkr_lock_free(hb);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* a granted, b awaited; an operator deletes a's node: when b comes, the
 * set is not held (ZKR_ELOST) and b is given back. */
static void test_earlier_member_lost_while_waiting(void **state)
{
    zkr_session_t *h = open_session(10000), *s = open_session(10000);
    zkr_lock_t *hb = new_lock(h, "/t/ew/b", NULL);
    zkr_lock_t *v[2] = {new_lock(s, "/t/ew/a", NULL),
                        new_lock(s, "/t/ew/b", NULL)};
    zkr_multilock_t *m = new_multi(v, 2);
    char node[ZKR_NODE_MAX];

    (void)state;
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    reset_done();
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/ew/b") == 2, 5000));
    assert_int_equal(zkr_lock_node(v[0], node, sizeof(node)), 0);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(v[0]) == ZKR_LOCK_LOST, 10000));
    assert_int_equal(zkr_lock_release(hb), 0);
    assert_true(ZKT_WAIT_UNTIL(done.n == 1, 10000));
    assert_int_equal(done.rc, ZKR_ELOST);
    assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_IDLE);
    assert_true(ZKT_WAIT_UNTIL(children("/t/ew/b") == 0, 5000));
    assert_int_equal(children("/t/ew/a"), 0);
    /* The members are usable again. */
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    assert_int_equal(zkr_multilock_release(m), 0);
    zkr_multilock_free(m);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    zkr_lock_free(hb);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Held, then the session expires: the set is LOST, its descriptor turns
 * readable, the release says ZKR_ELOST, and another session has the set. */
static void test_expiry_while_held(void **state)
{
    zkr_session_t *s = open_session(10000), *o = open_session(10000);
    zkr_lock_t *v[2] = {new_lock(s, "/t/ex/a", NULL),
                        new_lock(s, "/t/ex/b", NULL)};
    zkr_lock_t *w[2] = {new_lock(o, "/t/ex/b", NULL),
                        new_lock(o, "/t/ex/a", NULL)};
    zkr_multilock_t *m = new_multi(v, 2), *n = new_multi(w, 2);
    struct pollfd p;

    (void)state;
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    p.fd = zkr_multilock_fd(m);
    p.events = POLLIN;
    assert_int_equal(zkr_multilock_acquire(n, 0), ZKR_EBUSY);
    expire(s);
    assert_true(poll(&p, 1, 20000) == 1 && (p.revents & POLLIN));
    assert_true(ZKT_WAIT_UNTIL(zkr_multilock_state(m) == ZKR_LOCK_LOST, 20000));
    assert_int_equal(zkr_multilock_valid_ms(m), 0);
    assert_int_equal(zkr_multilock_acquire(n, 20000), 0);
    assert_int_equal(zkr_multilock_release(m), ZKR_ELOST);
    assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_multilock_release(n), 0);
    zkr_multilock_free(m);
    zkr_multilock_free(n);
    for (int i = 0; i < 2; i++) {
        zkr_lock_free(v[i]);
        zkr_lock_free(w[i]);
    }
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(o), 0);
}

/* Held across a server restart within the session timeout: SUSPENDED,
 * then HELD again (the same grants), then released. */
static void test_server_restart_while_held(void **state)
{
    zkr_session_t *s = open_session(ZKT_RESTART_SESSION_MS);
    zkr_lock_t *v[2] = {new_lock(s, "/t/rs/a", NULL),
                        new_lock(s, "/t/rs/b", NULL)};
    zkr_multilock_t *m = new_multi(v, 2);
    int64_t tok[2];

    (void)state;
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    for (int i = 0; i < 2; i++)
        tok[i] = token_of(v[i]);
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_multilock_state(m) == ZKR_LOCK_SUSPENDED,
                               ZKT_RESTART_SESSION_MS));
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_true(ZKT_WAIT_UNTIL(zkr_multilock_state(m) == ZKR_LOCK_HELD,
                               ZKT_RESTART_SESSION_MS));
    for (int i = 0; i < 2; i++)
        assert_true(token_of(v[i]) == tok[i]);
    assert_int_equal(zkr_multilock_release(m), 0);
    assert_int_equal(children("/t/rs/a"), 0);
    assert_int_equal(children("/t/rs/b"), 0);
    zkr_multilock_free(m);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Through the fault proxy: the reply to the second member's create is
 * lost with the connection (a held by another until then), and later the
 * connection goes silent while the set is held. The member resolves its
 * create (one node, never two), the set is had; the silence is SUSPENDED,
 * then HELD again once the proxy passes, the same grants. */
static void test_lost_create_reply_and_blackhole(void **state)
{
    zkr_session_t *h = open_session(10000);
    zkr_session_t *s = open_proxied(zkt_scaled_ms(20000));
    zkr_lock_t *ha = new_lock(h, "/t/px/a", NULL);
    zkr_lock_t *v[2] = {new_lock(s, "/t/px/b", NULL),
                        new_lock(s, "/t/px/a", NULL)};
    zkr_multilock_t *m = new_multi(v, 2);
    int64_t tok[2];

    (void)state;
    assert_int_equal(zkr_lock_acquire(ha, -1), 0);
    reset_done();
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/px/a") == 2, 5000));
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zkr_lock_release(ha), 0);
    assert_true(ZKT_WAIT_UNTIL(done.n == 1, zkt_scaled_ms(30000)));
    assert_int_equal(done.rc, 0);
    assert_int_equal(children("/t/px/a"), 1);
    assert_int_equal(children("/t/px/b"), 1);
    tok[0] = token_of(v[0]);
    tok[1] = token_of(v[1]);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_multilock_state(m) == ZKR_LOCK_SUSPENDED,
                               zkt_scaled_ms(20000)));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_multilock_state(m) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(20000)));
    assert_true(token_of(v[0]) == tok[0] && token_of(v[1]) == tok[1]);
    assert_int_equal(zkr_multilock_release(m), 0);
    assert_int_equal(children("/t/px/a"), 0);
    assert_int_equal(children("/t/px/b"), 0);
    zkr_multilock_free(m);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    zkr_lock_free(ha);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Event-loop mode (no event thread): the members' completions run only in
 * zkr_session_dispatch(). A free while acquiring must not wait for them:
 * it returns, and the next dispatches run the completion (ZKR_ECANCELED)
 * and give the granted member back. */
static void test_event_loop_free_while_acquiring(void **state)
{
    zkr_session_t *h = open_session(10000), *s = open_loop_session();
    zkr_lock_t *hb = new_lock(h, "/t/el/b", NULL), *v[2];
    zkr_multilock_t *m;

    (void)state;
    v[0] = new_lock(s, "/t/el/a", NULL);
    v[1] = new_lock(s, "/t/el/b", NULL);
    m = new_multi(v, 2);
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    reset_done();
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(
        (zkr_session_dispatch(s), children("/t/el/b") == 2), 10000));
    assert_int_equal(children("/t/el/a"), 1);
    zkr_multilock_free(m); /* returns at once */
    assert_true(ZKT_WAIT_UNTIL(
        (zkr_session_dispatch(s),
         done.n == 1 && children("/t/el/a") == 0 && children("/t/el/b") == 1),
        10000));
    assert_int_equal(done.rc, ZKR_ECANCELED);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    zkr_lock_free(hb);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Event-loop mode and nobody dispatching: the blocking calls work as a
 * lock's do (they need no dispatch): a set had and released, and a set
 * that times out on a held member, its first member given back. */
static void test_event_loop_blocking_calls(void **state)
{
    zkr_session_t *h = open_session(10000), *s = open_loop_session();
    zkr_lock_t *hb = new_lock(h, "/t/eb/b", NULL), *v[2];
    zkr_multilock_t *m;

    (void)state;
    v[0] = new_lock(s, "/t/eb/a", NULL);
    v[1] = new_lock(s, "/t/eb/b", NULL);
    m = new_multi(v, 2);
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    assert_int_equal(zkr_multilock_release(m), 0);
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    assert_int_equal(zkr_multilock_acquire(m, 1000), ZKR_ETIMEDOUT);
    assert_int_equal(children("/t/eb/a"), 0);
    assert_int_equal(children("/t/eb/b"), 1);
    zkr_multilock_free(m);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    zkr_lock_free(hb);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The first member's directory refuses DELETE and the second is held: the
 * failed try cannot give the first back. It says so (ZNOAUTH, not
 * ZKR_EBUSY), and once the directory allows it a release of the idle set
 * gives it back. */
static void test_undo_refused(void **state)
{
    zkr_session_t *h = open_session(10000), *s = open_session(10000);
    struct ACL nodel[] = {
        {ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_WRITE | ZOO_PERM_ADMIN,
         {"world", "anyone"}}};
    struct ACL_vector acl = {1, nodel};
    zkr_lock_t *hb = new_lock(h, "/t/ur/b", NULL), *v[2];
    zkr_multilock_t *m;

    (void)state;
    zoo_create(raw, "/t/ur", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/t/ur/a", NULL, -1, &acl, 0, NULL, 0),
                     ZOK);
    v[0] = new_lock(s, "/t/ur/a", NULL);
    v[1] = new_lock(s, "/t/ur/b", NULL);
    m = new_multi(v, 2);
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    assert_int_equal(zkr_multilock_acquire(m, 0), ZNOAUTH);
    assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_state(v[0]), ZKR_LOCK_HELD);
    assert_int_equal(zkr_multilock_release(m), ZNOAUTH); /* still refused */
    assert_int_equal(zkr_lock_state(v[0]), ZKR_LOCK_HELD);
    /* b, taken meanwhile through its own call, is not the set's to give
     * back: the retry gives back a only. */
    assert_int_equal(zkr_lock_release(hb), 0);
    assert_int_equal(zkr_lock_acquire(v[1], 5000), 0);
    assert_int_equal(zoo_set_acl(raw, "/t/ur/a", -1, &ZOO_OPEN_ACL_UNSAFE),
                     ZOK);
    assert_int_equal(zkr_multilock_release(m), 0);
    assert_int_equal(zkr_lock_state(v[0]), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_state(v[1]), ZKR_LOCK_HELD);
    assert_int_equal(children("/t/ur/a"), 0);
    assert_int_equal(zkr_multilock_release(m), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_release(v[1]), 0);
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    assert_int_equal(zkr_multilock_release(m), 0);
    /* Left over again, then freed: the free gives it back. */
    assert_int_equal(zoo_set_acl(raw, "/t/ur/a", -1, &acl), ZOK);
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    assert_int_equal(zkr_multilock_acquire(m, 0), ZNOAUTH);
    assert_int_equal(zoo_set_acl(raw, "/t/ur/a", -1, &ZOO_OPEN_ACL_UNSAFE),
                     ZOK);
    zkr_multilock_free(m);
    assert_true(ZKT_WAIT_UNTIL(children("/t/ur/a") == 0, 10000));
    assert_int_equal(zkr_lock_release(hb), 0);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    zkr_lock_free(hb);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A member DELAYED (lock-delay after the holder's death) while the set
 * acquires: the set's descriptor turns readable, and reading the set's
 * state quiets it (a poll() loop does not spin). */
static void test_fd_quiet_while_acquiring(void **state)
{
    zkr_session_t *h = open_session(10000), *s = open_session(10000);
    zkr_lock_t *hb = new_lock(h, "/t/fq/b", NULL), *v[2];
    zkr_multilock_t *m;
    struct pollfd p;
    int wakes = 0;

    (void)state;
    v[0] = new_lock(s, "/t/fq/a", NULL);
    v[1] = new_lock(s, "/t/fq/b", NULL);
    assert_int_equal(zkr_lock_set_delay(v[1], 3000), 0);
    m = new_multi(v, 2);
    p.fd = zkr_multilock_fd(m);
    p.events = POLLIN;
    assert_true(p.fd >= 0);
    assert_int_equal(zkr_lock_acquire(hb, -1), 0);
    reset_done();
    assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/fq/b") == 2, 5000));
    expire(h); /* the holder dies: b waits out its delay (3 s) */
    for (int64_t t0 = zkt_now_ms(); zkt_now_ms() - t0 < 2000 && done.n == 0;)
        if (poll(&p, 1, 100) == 1) {
            wakes++;
            assert_int_equal(zkr_multilock_state(m), ZKR_LOCK_ACQUIRING);
        }
    print_message("# descriptor wakes in 2 s while DELAYED: %d\n", wakes);
    assert_int_equal(zkr_lock_state(v[1]), ZKR_LOCK_DELAYED);
    assert_true(wakes >= 1 && wakes <= 3);
    assert_true(ZKT_WAIT_UNTIL(done.n == 1, 20000));
    assert_int_equal(done.rc, 0);
    assert_int_equal(zkr_multilock_release(m), 0);
    zkr_multilock_free(m);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    zkr_lock_free(hb);
    zkr_session_free(h);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Held, the connection silent: the free does not wait for the server (a
 * lock's free does not); the nodes go once it answers again. */
static void test_free_held_silent(void **state)
{
    zkr_session_t *s = open_proxied(zkt_scaled_ms(20000));
    zkr_lock_t *v[2] = {new_lock(s, "/t/fs/a", NULL),
                        new_lock(s, "/t/fs/b", NULL)};
    zkr_multilock_t *m = new_multi(v, 2);
    int64_t t0, took;

    (void)state;
    assert_int_equal(zkr_multilock_acquire(m, 5000), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    t0 = zkt_now_ms();
    zkr_multilock_free(m);
    zkr_lock_free(v[0]);
    zkr_lock_free(v[1]);
    took = zkt_now_ms() - t0;
    print_message("# free of a held set, connection silent: %lld ms\n",
                  (long long)took);
    assert_true(took < zkt_scaled_ms(20000) / 4);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(
        children("/t/fs/a") == 0 && children("/t/fs/b") == 0, 30000));
    /* Acquiring (a granted, b queued behind another session's holder):
     * the free does not wait for the server either. */
    {
        zkr_session_t *h = open_session(10000);
        zkr_lock_t *hb = new_lock(h, "/t/fs/b", NULL);
        assert_int_equal(zkr_lock_acquire(hb, -1), 0);
        v[0] = new_lock(s, "/t/fs/a", NULL);
        v[1] = new_lock(s, "/t/fs/b", NULL);
        m = new_multi(v, 2);
        reset_done();
        assert_int_equal(zkr_multilock_acquire_async(m, -1, on_done, NULL), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/t/fs/b") == 2, 10000));
        assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
        t0 = zkt_now_ms();
        zkr_multilock_free(m);
        zkr_lock_free(v[0]);
        zkr_lock_free(v[1]);
        took = zkt_now_ms() - t0;
        print_message("# free of an acquiring set, connection silent: "
                      "%lld ms\n",
                      (long long)took);
        assert_true(took < zkt_scaled_ms(20000) / 4);
        assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
        assert_true(ZKT_WAIT_UNTIL(done.n == 1, 30000));
        assert_int_equal(done.rc, ZKR_ECANCELED);
        assert_true(ZKT_WAIT_UNTIL(
            children("/t/fs/a") == 0 && children("/t/fs/b") == 1, 30000));
        zkr_lock_free(hb);
        assert_int_equal(zkr_session_free(h), 0);
    }
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opposite_orders_do_not_deadlock),
        cmocka_unit_test(test_one_timeout_for_the_set),
        cmocka_unit_test(test_mixed_kinds),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_cancel_and_free_while_waiting),
        cmocka_unit_test(test_earlier_member_lost_while_waiting),
        cmocka_unit_test(test_expiry_while_held),
        cmocka_unit_test(test_server_restart_while_held),
        cmocka_unit_test(test_lost_create_reply_and_blackhole),
        cmocka_unit_test(test_event_loop_free_while_acquiring),
        cmocka_unit_test(test_event_loop_blocking_calls),
        cmocka_unit_test(test_undo_refused),
        cmocka_unit_test(test_fd_quiet_while_acquiring),
        cmocka_unit_test(test_free_held_silent),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("multilock", tests, proxy_setup,
                                       proxy_teardown);
}
