/* Counting semaphore and read/write lock against a real ZooKeeper server:
 * the limit across processes, FIFO grants, departures from the middle of
 * the queue, one release waking O(1) waiters, a conflicting permit count,
 * and the read/write rules including expiry in any position. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
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

static zkr_lock_t *sem(zkr_session_t *s, const char *path, int n,
                       const char *id)
{
    zkr_lock_t *l = NULL;
    assert_int_equal(zkr_semaphore_new(&l, s, path, n, id, NULL), 0);
    return l;
}

/* Async completions record what happened; the test thread asserts. */
struct grant {
    int rc; /* 1 = not yet */
    int order;
    int64_t token;
};
static int grant_seq;
static pthread_mutex_t grant_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_grant(int rc, zkr_lock_t *l, void *data)
{
    struct grant *g = data;
    pthread_mutex_lock(&grant_mu);
    g->rc = rc;
    g->order = ++grant_seq;
    if (rc == 0)
        zkr_lock_token(l, &g->token);
    pthread_mutex_unlock(&grant_mu);
}

static int rc_of(struct grant *g)
{
    int rc;
    pthread_mutex_lock(&grant_mu);
    rc = g->rc;
    pthread_mutex_unlock(&grant_mu);
    return rc;
}

/* ------------------------------------------------------------------ */

/* 12 processes, 3 permits: never more than 3 holders at once (a shared
 * counter checked under a file lock), the limit actually used, every grant
 * with its own token. (Grant order is checked deterministically by
 * test_semaphore_fifo: across processes, log lines of simultaneous grants
 * may be written in either order.) */
static void test_semaphore_processes(void **state)
{
    struct verdict r;

    (void)state;
    r = run_contenders("/s/twelve", 12, 3, 3, 0);
    assert_int_equal(r.grants, 36);
    assert_int_equal(r.counted_max, 3);
    assert_int_equal(r.dup_tokens, 0);
    assert_int_equal(children("/s/twelve"), 0);
}

/* FIFO: waiters enqueued in a known order get permits in that order, one
 * per release, with increasing tokens. */
static void test_semaphore_fifo(void **state)
{
    enum { W = 5 };
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *h[2], *w[W];
    struct grant g[W];

    (void)state;
    grant_seq = 0;
    for (int i = 0; i < 2; i++) {
        h[i] = sem(s, "/s/fifo", 2, "holder");
        assert_int_equal(zkr_lock_acquire(h[i], 0), 0);
    }
    for (int i = 0; i < W; i++) {
        w[i] = sem(s, "/s/fifo", 2, "waiter");
        g[i].rc = 1;
        assert_int_equal(zkr_lock_acquire_async(w[i], -1, on_grant, &g[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/fifo") == 3 + i, 5000));
    }
    assert_int_equal(zkr_lock_acquire(w[0], 0), ZKR_EALREADY);
    assert_int_equal(zkr_lock_release(h[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[0]) == 0, 5000));
    assert_int_equal(rc_of(&g[1]), 1);
    assert_int_equal(zkr_lock_release(h[1]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[1]) == 0, 5000));
    for (int i = 0; i < W - 2; i++) {
        assert_int_equal(zkr_lock_release(w[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(rc_of(&g[i + 2]) == 0, 5000));
    }
    for (int i = 0; i < W; i++) {
        assert_int_equal(g[i].order, i + 1);
        if (i > 0)
            assert_true(g[i].token > g[i - 1].token);
    }
    for (int i = 0; i < 2; i++)
        zkr_lock_free(h[i]);
    for (int i = 0; i < W; i++)
        zkr_lock_free(w[i]);
    zkr_session_free(s);
    assert_int_equal(children("/s/fifo"), 0);
}

/* Departures from the middle of the queue (timeout, cancel, expired
 * session, a killed process) never leave a waiter behind them stuck while
 * a permit is free, and leave no node behind. */
static void test_semaphore_departures(void **state)
{
    zkr_session_t *s = open_session(10000), *x = open_session(4000);
    zkr_lock_t *h0 = sem(s, "/s/dep", 2, "h0"), *h1 = sem(s, "/s/dep", 2, "h1");
    zkr_lock_t *wt = sem(s, "/s/dep", 2, "timeout");
    zkr_lock_t *wc = sem(s, "/s/dep", 2, "cancel");
    zkr_lock_t *wx = sem(x, "/s/dep", 2, "expired");
    zkr_lock_t *last = sem(s, "/s/dep", 2, "last");
    struct grant gt = {1, 0, 0}, gc = {1, 0, 0}, gx = {1, 0, 0}, gl = {1, 0, 0};
    char *prog = zkt_build_path("tests/bin/contender");
    pid_t killed;
    int st;

    (void)state;
    assert_int_equal(zkr_lock_acquire(h0, 0), 0);
    assert_int_equal(zkr_lock_acquire(h1, 0), 0);
    /* Queue: [h0 h1] timeout cancel killed expired last */
    assert_int_equal(zkr_lock_acquire_async(wt, 1500, on_grant, &gt), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 3, 5000));
    assert_int_equal(zkr_lock_acquire_async(wc, -1, on_grant, &gc), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 4, 5000));
    {
        char *argv[] = {prog,   "-s",     (char *)zkt_server_hosts(server),
                        "-p",   "/s/dep", "-n",
                        "1",    "-P",     "2",
                        "-i",   "killed", "-t",
                        "3000", NULL};
        killed = zkt_spawn(argv, -1);
    }
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 5, 5000));
    assert_int_equal(zkr_lock_acquire_async(wx, -1, on_grant, &gx), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 6, 5000));
    assert_int_equal(zkr_lock_acquire_async(last, -1, on_grant, &gl), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 7, 5000));

    /* While both permits are busy, the middle departs. */
    assert_int_equal(zkr_lock_cancel(wc), 0);
    kill(killed, SIGKILL);
    assert_int_equal(zkt_wait_pid(killed, 5000, &st), 0);
    expire(x);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gt) == ZKR_ETIMEDOUT, 5000));
    assert_int_equal(rc_of(&gc), ZKR_ECANCELED);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gx) == ZKR_ELOST, 10000));
    /* The killed process's node lives until its session expires (3 s). */
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 3, 10000));
    assert_int_equal(rc_of(&gl), 1);

    /* A permit frees: the one waiter left gets it at once. */
    assert_int_equal(zkr_lock_release(h0), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gl) == 0, 3000));
    assert_int_equal(zkr_lock_release(last), 0);
    assert_int_equal(zkr_lock_release(h1), 0);
    zkr_lock_free(h0);
    zkr_lock_free(h1);
    zkr_lock_free(wt);
    zkr_lock_free(wc);
    zkr_lock_free(wx);
    zkr_lock_free(last);
    zkr_session_free(s);
    zkr_session_free(x);
    free(prog);
    assert_true(ZKT_WAIT_UNTIL(children("/s/dep") == 0, 5000));
}

/* A release with 50 waiters wakes a constant number of them. */
static void test_semaphore_release_wakes_few(void **state)
{
    enum { W = 50, S = 5 };
    zkr_session_t *s[S];
    zkr_lock_t *h[2], *w[W];
    struct grant g[W];
    uint64_t ev0 = 0, ev1 = 0;

    (void)state;
    for (int i = 0; i < S; i++)
        s[i] = open_session(10000);
    for (int i = 0; i < 2; i++) {
        h[i] = sem(s[0], "/s/herd", 2, "holder");
        assert_int_equal(zkr_lock_acquire(h[i], 0), 0);
    }
    for (int i = 0; i < W; i++) {
        w[i] = sem(s[i % S], "/s/herd", 2, NULL);
        g[i].rc = 1;
        assert_int_equal(zkr_lock_acquire_async(w[i], -1, on_grant, &g[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/herd") == 3 + i, 5000));
    }
    /* 49 data watches (each waiter on its predecessor), every contender's
     * watch on its own node (50 + 2), and the first waiter's child watch,
     * which this server's wchs does not count. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 2 * W + 1, 5000));
    for (int i = 0; i < S; i++)
        ev0 += zkr_session_counter(s[i], ZKR_COUNTER_WATCH_EVENTS);
    assert_int_equal(zkr_lock_release(h[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[0]) == 0, 5000));
    /* The next waiter took over the directory watch (its data watch on the
     * new holder fired: that is the second notification); the others are
     * unchanged: the old holder's watch on its node went with it. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 2 * W - 1, 5000));
    for (int i = 0; i < S; i++)
        ev1 += zkr_session_counter(s[i], ZKR_COUNTER_WATCH_EVENTS);
    assert_true(ev1 - ev0 <= 2);
    for (int i = 1; i < W; i++)
        assert_int_equal(rc_of(&g[i]), 1);
    for (int i = 0; i < W; i++)
        zkr_lock_free(w[i]);
    for (int i = 0; i < 2; i++)
        zkr_lock_free(h[i]);
    for (int i = 0; i < S; i++)
        zkr_session_free(s[i]);
    assert_true(ZKT_WAIT_UNTIL(children("/s/herd") == 0, 15000));
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 0, 15000));
}

/* The permit count is fixed per path. */
static void test_semaphore_conflict(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *a = sem(s, "/s/size", 3, NULL), *b = sem(s, "/s/size", 4, NULL);
    zkr_lock_t *bad = NULL;

    (void)state;
    assert_int_equal(zkr_lock_acquire(a, -1), 0);
    assert_int_equal(zkr_lock_acquire(b, 1000), ZKR_ELIMIT);
    assert_int_equal(children("/s/size"), 1);
    assert_int_equal(zkr_semaphore_new(&bad, s, "/s/size", 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_null(bad);
    assert_int_equal(zkr_lock_release(a), 0);
    zkr_lock_free(a);
    zkr_lock_free(b);
    zkr_session_free(s);
}

/* A permit frees while the first waiter departs (both orders): the waiter
 * behind gets the permit within a bounded time; a permit holder whose
 * session expires reports LOST (callback state and descriptor) and its
 * permit goes to the next. */
static void test_semaphore_free_and_depart(void **state)
{
    zkr_session_t *s = open_session(10000), *x = open_session(4000);

    (void)state;
    for (int round = 0; round < 2; round++) {
        zkr_lock_t *h0 = sem(s, "/s/both", 2, "h0");
        zkr_lock_t *h1 = sem(s, "/s/both", 2, "h1");
        zkr_lock_t *w2 = sem(s, "/s/both", 2, "w2");
        zkr_lock_t *w3 = sem(s, "/s/both", 2, "w3");
        struct grant g2 = {1, 0, 0}, g3 = {1, 0, 0};

        assert_int_equal(zkr_lock_acquire(h0, 0), 0);
        assert_int_equal(zkr_lock_acquire(h1, 0), 0);
        assert_int_equal(zkr_lock_acquire_async(w2, -1, on_grant, &g2), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/both") == 3, 5000));
        assert_int_equal(zkr_lock_acquire_async(w3, -1, on_grant, &g3), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/both") == 4, 5000));
        if (round == 0) {
            assert_int_equal(zkr_lock_cancel(w2), 0);
            assert_int_equal(zkr_lock_release(h0), 0);
        } else {
            assert_int_equal(zkr_lock_release(h0), 0);
            if (zkr_lock_cancel(w2) != 0) /* it was granted first */
                assert_true(ZKT_WAIT_UNTIL(rc_of(&g2) == 0, 3000) &&
                            zkr_lock_release(w2) == 0);
        }
        assert_true(ZKT_WAIT_UNTIL(rc_of(&g3) == 0, 3000));
        assert_int_equal(zkr_lock_release(w3), 0);
        assert_int_equal(zkr_lock_release(h1), 0);
        zkr_lock_free(h0);
        zkr_lock_free(h1);
        zkr_lock_free(w2);
        zkr_lock_free(w3);
        assert_int_equal(children("/s/both"), 0);
    }
    {
        zkr_lock_t *hx = sem(x, "/s/both", 1, "hx");
        zkr_lock_t *w = sem(s, "/s/both", 1, "w");
        struct grant g = {1, 0, 0};
        struct pollfd pfd;

        assert_int_equal(zkr_lock_acquire(hx, 0), 0);
        assert_int_equal(zkr_lock_acquire_async(w, -1, on_grant, &g), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/both") == 2, 5000));
        expire(x);
        assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(hx) == ZKR_LOCK_LOST, 10000));
        pfd.fd = zkr_lock_fd(hx);
        pfd.events = POLLIN;
        assert_int_equal(poll(&pfd, 1, 0), 1);
        assert_true(ZKT_WAIT_UNTIL(rc_of(&g) == 0, 10000));
        assert_int_equal(zkr_lock_release(hx), ZKR_ELOST);
        assert_int_equal(zkr_lock_release(w), 0);
        zkr_lock_free(hx);
        zkr_lock_free(w);
    }
    zkr_session_free(s);
    zkr_session_free(x);
}

/* ------------------------------------------------------ read/write */

static void rw(zkr_session_t *s, const char *path, zkr_lock_t **r,
               zkr_lock_t **w)
{
    assert_int_equal(zkr_rwlock_new(r, w, s, path, NULL, NULL), 0);
}

/* Readers share; a writer excludes all; a reader behind a queued writer
 * waits for it; FIFO across mixed kinds. */
static void test_rwlock_rules(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *r1, *w1, *r2, *w2, *r3, *w3, *rx, *wx;
    struct grant gw = {1, 0, 0}, gr = {1, 0, 0};
    zkr_sequencer_t q;

    (void)state;
    /* r1 and w1 from two pairs: one pair's sides never queue together. */
    rw(s, "/s/rw", &r1, &wx);
    rw(s, "/s/rw", &rx, &w1);
    rw(s, "/s/rw", &r2, &w2);
    rw(s, "/s/rw", &r3, &w3);
    assert_int_equal(zkr_lock_acquire(r1, 0), 0);
    assert_int_equal(zkr_lock_acquire(r2, 0), 0); /* readers overlap */
    assert_int_equal(zkr_lock_sequencer(r1, &q), 0);
    assert_int_equal(q.mode, 'r');
    assert_int_equal(zkr_lock_acquire(w1, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_acquire_async(w1, -1, on_grant, &gw), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rw") == 3, 5000));
    /* A reader behind the queued writer waits: no writer starvation. */
    assert_int_equal(zkr_lock_acquire(r3, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_acquire_async(r3, -1, on_grant, &gr), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rw") == 4, 5000));
    assert_int_equal(zkr_lock_release(r1), 0);
    assert_int_equal(rc_of(&gw), 1); /* r2 still reads */
    assert_int_equal(zkr_lock_release(r2), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gw) == 0, 5000));
    assert_int_equal(rc_of(&gr), 1); /* the writer excludes the reader */
    assert_int_equal(zkr_lock_acquire(w2, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_release(w1), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gr) == 0, 5000));
    assert_int_equal(zkr_lock_release(r3), 0);
    assert_int_equal(zkr_lock_acquire(w2, 0), 0);
    assert_int_equal(zkr_lock_sequencer(w2, &q), 0);
    assert_int_equal(q.mode, 'w');
    assert_int_equal(zkr_lock_release(w2), 0);
    zkr_lock_free(r1);
    zkr_lock_free(w1);
    zkr_lock_free(r2);
    zkr_lock_free(w2);
    zkr_lock_free(r3);
    zkr_lock_free(w3);
    zkr_lock_free(rx);
    zkr_lock_free(wx);
    zkr_session_free(s);
    assert_int_equal(children("/s/rw"), 0);
}

/* zkr.h (zkr_rwlock_new): the two sides of one pair are one owner, and
 * neither is acquired while the other has a node: ZKR_ESTATE at once, no
 * upgrade and no downgrade. A write queued behind our own held read would
 * wait for it without end. Each refused call is given twice the session
 * timeout, so one that waited instead fails with ZKR_ETIMEDOUT. */
static void test_rwlock_pair_never_waits_for_itself(void **state)
{
    const int T = 4000, bound = zkt_scaled_ms(2 * T);
    zkr_session_t *s = open_session(T), *o = open_session(T);
    zkr_lock_t *r, *w, *ro, *wo;
    struct grant g = {1, 0, 0}, never = {1, 0, 0};

    (void)state;
    rw(s, "/s/rwp", &r, &w);
    rw(o, "/s/rwp", &ro, &wo);
    /* Holding read: write refused, sync or async (cb never called). */
    assert_int_equal(zkr_lock_acquire(r, bound), 0);
    assert_int_equal(zkr_lock_acquire(w, bound), ZKR_ESTATE);
    assert_int_equal(zkr_lock_acquire(w, -1), ZKR_ESTATE);
    assert_int_equal(zkr_lock_acquire_async(w, -1, on_grant, &never),
                     ZKR_ESTATE);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_IDLE);
    assert_int_equal(children("/s/rwp"), 1); /* no write node was made */
    /* Released: the write side acquires. */
    assert_int_equal(zkr_lock_release(r), 0);
    assert_int_equal(zkr_lock_acquire(w, bound), 0);
    /* Holding write: read refused (no downgrade). */
    assert_int_equal(zkr_lock_acquire(r, bound), ZKR_ESTATE);
    assert_int_equal(children("/s/rwp"), 1);
    assert_int_equal(zkr_lock_release(w), 0);
    /* Read still waiting (another session writes): write refused too. */
    assert_int_equal(zkr_lock_acquire(wo, bound), 0);
    assert_int_equal(zkr_lock_acquire_async(r, -1, on_grant, &g), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rwp") == 2, bound));
    assert_int_equal(zkr_lock_acquire(w, 0), ZKR_ESTATE);
    assert_int_equal(zkr_lock_release(wo), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g) == 0, bound));
    /* Another pair's writer still contends as usual. */
    assert_int_equal(zkr_lock_acquire(wo, 0), ZKR_EBUSY);
    /* One side freed: the other acquires freely. */
    zkr_lock_free(r);
    assert_int_equal(zkr_lock_acquire(w, bound), 0);
    assert_int_equal(zkr_lock_release(w), 0);
    assert_int_equal(rc_of(&never), 1);
    zkr_lock_free(w);
    zkr_lock_free(ro);
    zkr_lock_free(wo);
    zkr_session_free(s);
    zkr_session_free(o);
    assert_int_equal(children("/s/rwp"), 0);
}

struct side {
    zkr_lock_t *l;
    int timeout_ms;
    pthread_barrier_t *go;
    int rc;
};

static void *acquire_side(void *arg)
{
    struct side *a = arg;

    pthread_barrier_wait(a->go);
    a->rc = zkr_lock_acquire(a->l, a->timeout_ms);
    return NULL;
}

/* zkr.h, zkr_rwlock_new(): neither side of one pair is acquired while the
 * other has a node. Two threads acquire the two sides at the same moment
 * (blocking, no timeout): each time exactly one is granted and the other
 * is refused at once with ZKR_ESTATE; neither waits for the other, and the
 * path never holds two of the pair's nodes. */
static void test_rwlock_pair_sides_race(void **state)
{
    const int T = 4000, bound = zkt_scaled_ms(2 * T);
    zkr_session_t *s = open_session(T);
    zkr_lock_t *r, *w;
    pthread_barrier_t go;
    int reads = 0, writes = 0;

    (void)state;
    rw(s, "/s/rwrace", &r, &w);
    for (int i = 0; i < 20; i++) {
        struct side a = {r, -1, &go, -1}, b = {w, -1, &go, -1};
        pthread_t ta, tb;

        assert_int_equal(pthread_barrier_init(&go, NULL, 2), 0);
        assert_int_equal(pthread_create(&ta, NULL, acquire_side, &a), 0);
        assert_int_equal(pthread_create(&tb, NULL, acquire_side, &b), 0);
        assert_int_equal(pthread_join(ta, NULL), 0);
        assert_int_equal(pthread_join(tb, NULL), 0);
        pthread_barrier_destroy(&go);
        assert_true((a.rc == 0 && b.rc == ZKR_ESTATE) ||
                    (a.rc == ZKR_ESTATE && b.rc == 0));
        assert_int_equal(children("/s/rwrace"), 1);
        reads += a.rc == 0;
        writes += b.rc == 0;
        assert_int_equal(zkr_lock_release(a.rc == 0 ? r : w), 0);
    }
    print_message("pair race: read won %d, write won %d\n", reads, writes);
    /* Freed while its other side blocks behind a foreign holder: that
     * acquire is not disturbed, and is granted once the holder goes. */
    {
        zkr_session_t *o = open_session(T);
        zkr_lock_t *wo = NULL, *ro = NULL;
        struct side b = {w, bound, NULL, -1};
        pthread_barrier_t one;
        pthread_t tb;

        rw(o, "/s/rwrace", &ro, &wo);
        assert_int_equal(zkr_lock_acquire(wo, bound), 0);
        assert_int_equal(pthread_barrier_init(&one, NULL, 1), 0);
        b.go = &one;
        assert_int_equal(pthread_create(&tb, NULL, acquire_side, &b), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/rwrace") == 2, bound));
        zkr_lock_free(r);
        assert_int_equal(zkr_lock_release(wo), 0);
        assert_int_equal(pthread_join(tb, NULL), 0);
        pthread_barrier_destroy(&one);
        assert_int_equal(b.rc, 0);
        assert_int_equal(zkr_lock_release(w), 0);
        zkr_lock_free(ro);
        zkr_lock_free(wo);
        zkr_session_free(o);
    }
    zkr_lock_free(w);
    zkr_session_free(s);
    assert_int_equal(children("/s/rwrace"), 0);
}

/* Expiry in any position lets the right contenders proceed: a queued
 * writer between readers, and a reading holder before a writer. */
static void test_rwlock_expiry(void **state)
{
    zkr_session_t *s = open_session(10000), *x = open_session(4000),
                  *y = open_session(4000);
    zkr_lock_t *r1, *w1, *xr, *xw, *yr, *yw, *r3, *w3;
    struct grant g3 = {1, 0, 0}, gw = {1, 0, 0}, gxw = {1, 0, 0};

    (void)state;
    rw(s, "/s/rwx", &r1, &w1);
    rw(x, "/s/rwx", &xr, &xw);
    rw(y, "/s/rwx", &yr, &yw);
    rw(s, "/s/rwx", &r3, &w3);
    /* r1 reads; x's writer queues; r3 queues behind it. */
    assert_int_equal(zkr_lock_acquire(r1, 0), 0);
    assert_int_equal(zkr_lock_acquire_async(xw, -1, on_grant, &gxw), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rwx") == 2, 5000));
    assert_int_equal(zkr_lock_acquire_async(r3, -1, on_grant, &g3), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rwx") == 3, 5000));
    expire(x); /* the queued writer goes: r3 reads alongside r1 */
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g3) == 0, 10000));
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gxw) == ZKR_ELOST, 10000));
    assert_int_equal(zkr_lock_release(r3), 0);
    assert_int_equal(zkr_lock_release(r1), 0);

    /* y reads; a writer queues; y's session expires: the writer writes. */
    assert_int_equal(zkr_lock_acquire(yr, 0), 0);
    assert_int_equal(zkr_lock_acquire_async(w1, -1, on_grant, &gw), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rwx") == 2, 5000));
    expire(y);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gw) == 0, 10000));
    assert_int_equal(zkr_lock_release(w1), 0);
    zkr_lock_free(r1);
    zkr_lock_free(w1);
    zkr_lock_free(xr);
    zkr_lock_free(xw);
    zkr_lock_free(yr);
    zkr_lock_free(yw);
    zkr_lock_free(r3);
    zkr_lock_free(w3);
    zkr_session_free(s);
    zkr_session_free(x);
    zkr_session_free(y);
    assert_true(ZKT_WAIT_UNTIL(children("/s/rwx") == 0, 5000));
}

/* Issue 20.4. Another client writes the node a semaphore waiter waits
 * on (a monitoring tool, a revocation-style write). The waiter lists again
 * (a change is a hint), finds the same node ahead and waits again: a few
 * listings, not one per round trip for as long as the node waits (it used
 * to take any write, version > 0, for its predecessor's grant: ~2,000
 * listings a second). */
static void test_semaphore_foreign_write(void **state)
{
    zkr_session_t *s[3];
    zkr_lock_t *l[3];
    struct grant g[3] = {{1, 0, 0}, {1, 0, 0}, {1, 0, 0}};
    char node[ZKR_NODE_MAX];
    uint64_t lists;

    (void)state;
    for (int i = 0; i < 3; i++) {
        s[i] = open_session(10000);
        l[i] = sem(s[i], "/s/fwrite", 1, NULL);
        assert_int_equal(zkr_lock_acquire_async(l[i], -1, on_grant, &g[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/fwrite") == i + 1, 5000));
    }
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[0]) == 0, 5000));
    /* l[1] is the first waiter, l[2] waits on l[1]'s node. */
    assert_int_equal(zkr_lock_node(l[1], node, sizeof(node)), 0);
    usleep(300000);
    lists = zkr_session_counter(s[2], ZKR_COUNTER_LISTS);
    assert_int_equal(zoo_set(raw, node, "monitor", 7, -1), ZOK);
    usleep(1000000);
    print_message(
        "listings in the second after the write: %llu\n",
        (unsigned long long)(zkr_session_counter(s[2], ZKR_COUNTER_LISTS) -
                             lists));
    /* One listing for the notification, one for the write it then finds
     * on the node it waits on; then it waits. */
    assert_true(zkr_session_counter(s[2], ZKR_COUNTER_LISTS) - lists <= 3);
    assert_int_equal(rc_of(&g[1]), 1);
    assert_int_equal(rc_of(&g[2]), 1);
    /* The queue still works, in order. */
    assert_int_equal(zkr_lock_release(l[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[1]) == 0, 5000));
    assert_int_equal(rc_of(&g[2]), 1);
    assert_int_equal(zkr_lock_release(l[1]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[2]) == 0, 5000));
    assert_int_equal(zkr_lock_release(l[2]), 0);
    for (int i = 0; i < 3; i++) {
        zkr_lock_free(l[i]);
        zkr_session_free(s[i]);
    }
    assert_int_equal(children("/s/fwrite"), 0);
}

/* Issue 20.5. An ACL without WRITE: a granted permit cannot touch its
 * node to move its successor up. With 2 permits, H1 and H2 hold, W1 and
 * W2 wait; H1 leaves (W1 is granted), then H2 leaves: a permit is free and
 * W2 is first in line, so W2 is granted while W1 still holds (it used to
 * wait on W1's node, which nothing would change, until W1 released). */
static void test_semaphore_without_write_right(void **state)
{
    struct ACL rcd[] = {{ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
                         {"world", "anyone"}}};
    struct ACL_vector acl = {1, rcd};
    zkr_session_t *s[4];
    zkr_lock_t *l[4];
    struct grant g[4];

    (void)state;
    for (int i = 0; i < 4; i++) {
        s[i] = open_session(10000);
        assert_int_equal(
            zkr_semaphore_new(&l[i], s[i], "/s/nowrite/sem", 2, NULL, &acl), 0);
        g[i].rc = 1;
        assert_int_equal(zkr_lock_acquire_async(l[i], -1, on_grant, &g[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children("/s/nowrite/sem") == i + 1, 5000));
    }
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[0]) == 0 && rc_of(&g[1]) == 0, 5000));
    usleep(200000);
    assert_int_equal(zkr_lock_release(l[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[2]) == 0, 5000));
    usleep(200000);
    assert_int_equal(rc_of(&g[3]), 1);
    assert_int_equal(zkr_lock_release(l[1]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[3]) == 0, 3000));
    assert_int_equal(zkr_lock_state(l[2]), ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_release(l[2]), 0);
    assert_int_equal(zkr_lock_release(l[3]), 0);
    for (int i = 0; i < 4; i++) {
        zkr_lock_free(l[i]);
        zkr_session_free(s[i]);
    }
    assert_int_equal(children("/s/nowrite/sem"), 0);
}

/* Issue 20.7. A newcomer with another permit count is refused, and only
 * it: the waiter already queued with the path's count keeps waiting (it
 * used to see the newcomer's node and fail with ZKR_ELIMIT too), and is
 * granted in its turn. */
static void test_semaphore_conflict_newcomer_only(void **state)
{
    zkr_session_t *s = open_session(10000), *t = open_session(10000);
    zkr_lock_t *a = sem(s, "/s/newcomer", 1, "A"),
               *b = sem(t, "/s/newcomer", 1, "B"),
               *x = sem(s, "/s/newcomer", 2, "X");
    struct grant gb = {1, 0, 0};

    (void)state;
    assert_int_equal(zkr_lock_acquire(a, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(b, -1, on_grant, &gb), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/s/newcomer") == 2, 5000));
    usleep(200000);
    assert_int_equal(zkr_lock_acquire(x, 1000), ZKR_ELIMIT);
    assert_int_equal(zkr_lock_acquire(x, 0), ZKR_ELIMIT);
    usleep(300000);
    assert_int_equal(rc_of(&gb), 1);
    assert_int_equal(zkr_lock_state(b), ZKR_LOCK_ACQUIRING);
    assert_int_equal(zkr_lock_release(a), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&gb) == 0, 5000));
    assert_int_equal(zkr_lock_release(b), 0);
    zkr_lock_free(a);
    zkr_lock_free(b);
    zkr_lock_free(x);
    zkr_session_free(s);
    zkr_session_free(t);
    assert_int_equal(children("/s/newcomer"), 0);
}

/* 2 permits: H1, H2 hold (open ACL), W1 waits, W2 waits (open ACL) behind
 * W1. W1's node may not be written: created with an ACL without WRITE
 * (late_acl 0), or given one by an operator's setACL after W2 checked
 * W1's ACL and watched it (late_acl 1). H1 leaves: W1 is granted, but its
 * touch fails. H2 leaves: a permit is free and W2 first in line. Returns
 * whether W2 was granted then (else: only once W1 released). */
static int untouchable_predecessor(const char *dir, int late_acl)
{
    struct ACL rcd[] = {{ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
                         {"world", "anyone"}}};
    struct ACL_vector acl = {1, rcd};
    zkr_session_t *s[4];
    zkr_lock_t *l[4];
    struct grant g[4];
    char node[ZKR_NODE_MAX];
    int early;

    for (int i = 0; i < 4; i++) {
        s[i] = open_session(10000);
        assert_int_equal(zkr_semaphore_new(&l[i], s[i], dir, 2, NULL,
                                           i == 2 && !late_acl ? &acl : NULL),
                         0);
        g[i].rc = 1;
        assert_int_equal(zkr_lock_acquire_async(l[i], -1, on_grant, &g[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children(dir) == i + 1, 5000));
    }
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[0]) == 0 && rc_of(&g[1]) == 0, 5000));
    usleep(200000); /* W2 has checked W1's ACL and watches it */
    if (late_acl) { /* the operator: zkCli setAcl W1 world:anyone:rcd */
        assert_int_equal(zkr_lock_node(l[2], node, sizeof(node)), 0);
        assert_int_equal(zoo_set_acl(raw, node, -1, &acl), ZOK);
    }
    assert_int_equal(zkr_lock_release(l[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[2]) == 0, 5000));
    usleep(200000);
    assert_int_equal(rc_of(&g[3]), 1); /* never more than 2 permits */
    assert_int_equal(zkr_lock_release(l[1]), 0);
    /* One permit free (only W1 holds), W2 first in line: */
    early = ZKT_WAIT_UNTIL(rc_of(&g[3]) == 0, 3000);
    if (!early)
        print_message("# W2 waited 3 s with a free permit\n");
    assert_int_equal(zkr_lock_release(l[2]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[3]) == 0, 5000));
    assert_int_equal(zkr_lock_release(l[3]), 0);
    for (int i = 0; i < 4; i++) {
        zkr_lock_free(l[i]);
        zkr_session_free(s[i]);
    }
    assert_int_equal(children(dir), 0);
    return early;
}

/* Issue 20.5 across handles with different ACLs (review20): a waiter must
 * not rely on a touch its predecessor's granter cannot make. Another
 * process may use the same semaphore path with an ACL without WRITE (W1's
 * above): W2 must be granted when H2 leaves although W1 still holds
 * (before the fix W2 watched W1's node, which nothing changed until W1
 * released). */
static void test_semaphore_mixed_acl_untouchable_predecessor(void **state)
{
    (void)state;
    assert_true(untouchable_predecessor("/s/mixacl/sem", 0));
}

/* rereview20, a known liveness limit (docs/PROTOCOL.md [AS6], [P6]): an
 * operator's setACL that takes WRITE from a waiter's node after the
 * waiter behind it checked that ACL. Nothing tells the waiter (setACL
 * fires no watch), so it may wait with a permit free until the node
 * ahead goes; what is promised: never more than N permits, and the
 * waiter is granted once the node ahead is released. */
static void test_semaphore_predecessor_acl_changed_while_watched(void **state)
{
    (void)state;
    untouchable_predecessor("/s/lateacl/sem", 1);
}

/* The common single-ACL case behind pred_acl_done()'s check: with a
 * creator-only ACL (digest credentials, the same for every handle) every
 * node's stored ACL is the same, so each waiter still watches its
 * predecessor (no directory watch, no herd), and the touches chain the
 * grants. */
static void test_semaphore_creator_acl_watches_predecessor(void **state)
{
    enum { W = 6 };
    zkr_session_options_t o = {0};
    zkr_session_t *s[2];
    zkr_lock_t *h, *w[W];
    struct grant g[W];
    char node[ZKR_NODE_MAX];

    (void)state;
    o.digest = "alice:secret";
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            zkr_session_open(&s[i], zkt_server_hosts(server), 10000, &o), 0);
    assert_int_equal(zkr_semaphore_new(&h, s[0], "/s/creator", 1, "holder",
                                       &ZOO_CREATOR_ALL_ACL),
                     0);
    assert_int_equal(zkr_lock_acquire(h, 0), 0);
    for (int i = 0; i < W; i++) {
        assert_int_equal(zkr_semaphore_new(&w[i], s[i % 2], "/s/creator", 1,
                                           NULL, &ZOO_CREATOR_ALL_ACL),
                         0);
        g[i].rc = 1;
        assert_int_equal(zkr_lock_acquire_async(w[i], -1, on_grant, &g[i]), 0);
        /* In line before the next one is created. */
        assert_true(
            ZKT_WAIT_UNTIL(zkr_lock_node(w[i], node, sizeof(node)) == 0, 5000));
    }
    /* W - 1 data watches (each waiter but the first on its predecessor)
     * and every contender's watch on its own node (W + 1); the first
     * waiter's child watch is not counted by this server's wchs. */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 2 * W, 5000));
    assert_int_equal(zkr_lock_release(h), 0);
    for (int i = 0; i < W; i++) {
        assert_true(ZKT_WAIT_UNTIL(rc_of(&g[i]) == 0, 5000));
        for (int j = i + 1; j < W; j++)
            assert_int_equal(rc_of(&g[j]), 1);
        assert_int_equal(zkr_lock_release(w[i]), 0);
    }
    for (int i = 0; i < W; i++)
        zkr_lock_free(w[i]);
    zkr_lock_free(h);
    for (int i = 0; i < 2; i++)
        zkr_session_free(s[i]);
}

static zkr_lock_t *waiter_permit(zkr_session_t *s, const char *dir)
{
    return sem(s, dir, 1, NULL);
}

/* Issue 19 (review), for a semaphore: a waiter behind another asks for its
 * ACL before it watches it (pred_acl_done()); when that finds the node
 * gone, the exists() watch the waiter ahead kept for it is removed
 * (deleted_waiters_leave_no_watch()). */
static void test_semaphore_deleted_waiters_leave_no_watch(void **state)
{
    (void)state;
    deleted_waiters_leave_no_watch("/s/dleak", waiter_permit, 40, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semaphore_processes),
        cmocka_unit_test(test_semaphore_fifo),
        cmocka_unit_test(test_semaphore_departures),
        cmocka_unit_test(test_semaphore_release_wakes_few),
        cmocka_unit_test(test_semaphore_conflict),
        cmocka_unit_test(test_semaphore_free_and_depart),
        cmocka_unit_test(test_rwlock_rules),
        cmocka_unit_test(test_rwlock_expiry),
        cmocka_unit_test(test_rwlock_pair_never_waits_for_itself),
        cmocka_unit_test(test_rwlock_pair_sides_race),
        cmocka_unit_test(test_semaphore_foreign_write),
        cmocka_unit_test(test_semaphore_without_write_right),
        cmocka_unit_test(test_semaphore_conflict_newcomer_only),
        cmocka_unit_test(test_semaphore_mixed_acl_untouchable_predecessor),
        cmocka_unit_test(test_semaphore_predecessor_acl_changed_while_watched),
        cmocka_unit_test(test_semaphore_creator_acl_watches_predecessor),
        cmocka_unit_test(test_semaphore_deleted_waiters_leave_no_watch),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("semaphore", tests, setup, teardown);
}
