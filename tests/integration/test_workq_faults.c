/* The work queue under faults (issue 17, review17's findings R1-R6):
 * against a real ZooKeeper server and the fault proxy. Each test asserts
 * the contract of zkr.h ("Work queue"). Run:
 * make check TESTS=tests/integration/test_workq_faults [ZKR_TEST_FILTER=name].
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <malloc.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls *flag (under mu) every 10 ms for at most ms: its last value. */
static int wait_flag(pthread_mutex_t *mu, const int *flag, int ms)
{
    int v = 0;

    for (int64_t end = now_ms() + ms; now_ms() < end && !v;) {
        pthread_mutex_lock(mu);
        v = *flag;
        pthread_mutex_unlock(mu);
        if (!v)
            usleep(10 * 1000);
    }
    return v;
}

static zkr_workq_t *new_q(zkr_session_t *s, const char *path, const char *id)
{
    zkr_workq_t *q = NULL;

    assert_int_equal(zkr_workq_new(&q, s, path, id, NULL), 0);
    return q;
}

/* ---------------------------------------------------------------------
 * R1: a put whose answer was lost is duplicated when a consumer took and
 * acked the item before the producer looked for it again.
 *
 * zkr.h: "Exactly once, also when the connection is lost before the
 * answer". put_run() looks for its UUID only among the current children
 * of the bucket it wrote to; an item already completed (or nacked to the
 * back under a new name, or dead-lettered, or whose bucket was reaped) is
 * not there, so the item is created a second time.                      */

static pthread_mutex_t r1_mu = PTHREAD_MUTEX_INITIALIZER;
static int r1_once; /* deliveries of "once" */
static int r1_done;

static void r1_acked(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    (void)rc;
    zkr_item_free(it);
}

static void r1_took(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    pthread_mutex_lock(&r1_mu);
    if (rc == 0) {
        size_t len;
        const char *d = zkr_item_data(it, &len);
        if (len == 4 && memcmp(d, "once", 4) == 0)
            r1_once++;
    }
    r1_done = 1;
    pthread_mutex_unlock(&r1_mu);
    if (rc == 0 && zkr_item_ack_async(it, r1_acked, NULL) != 0)
        zkr_item_free(it);
}

static void test_r1_put_reply_lost_item_consumed(void **state)
{
    zkr_session_t *ps = open_proxied(10000); /* producer, through the proxy */
    zkr_session_t *cs = open_session(10000); /* consumer, direct */
    zkr_workq_t *pq = new_q(ps, "/r17/r1", "producer");
    zkr_workq_t *cq = new_q(cs, "/r17/r1", "consumer");
    zkr_item_t *it = NULL;
    char id[ZKR_WORKQ_ID_MAX];
    int rc;

    (void)state;
    /* The queue's nodes exist. */
    assert_int_equal(zkr_workq_put(pq, "warm", 4, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(cq, 5000, &it), 0);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    it = NULL;

    /* A consumer waits: it acks whatever it gets, at once. */
    assert_int_equal(zkr_workq_take_async(cq, -1, r1_took, NULL), 0);
    usleep(300 * 1000); /* it holds the turn and watches the bucket */

    /* The put applies, its answer is lost; the producer's reconnection is
     * slow (300 ms each way), the consumer is not. */
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    rc = zkr_workq_put(pq, "once", 4, 1, id, sizeof(id));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(rc, 0);

    (void)wait_flag(&r1_mu, &r1_done, 10000);
    /* Whatever else is in the queue now is a second copy of "once". */
    while (zkr_workq_take(cq, 2000, &it) == 0) {
        size_t len;
        const char *d = zkr_item_data(it, &len);
        if (len == 4 && memcmp(d, "once", 4) == 0)
            r1_once++;
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        it = NULL;
    }
    printf("# R1: \"once\" delivered and acked %d times (put id %s)\n", r1_once,
           id);
    zkr_workq_free(cq);
    zkr_workq_free(pq);
    zkr_session_free(cs);
    zkr_session_free(ps);
    assert_int_equal(r1_once, 1);
}

/* ---------------------------------------------------------------------
 * R2: an ack whose answer was lost reports success although another
 * consumer completed the item: completed twice.
 *
 * zkr.h: ack returns ZKR_ESTALE when "someone deleted the claim"; "0
 * (completed: no consumer will get it again)". Interleaving:
 *   A takes X (claim cA), A's ack is sent but never reaches the server;
 *   an operator deletes cA (a stale-looking claim); B takes X, acks: 0;
 *   A's connection comes back (same session): exists(cA) -> NONODE, so
 *   the engine probes X -> NONODE and, probe_version being -1, reports
 *   A's ack as applied (0). Both A and B were told they completed X.   */

static pthread_mutex_t r2_mu = PTHREAD_MUTEX_INITIALIZER;
static int r2_rc = 1000, r2_done;

static void r2_acked(int rc, zkr_item_t *it, void *data)
{
    (void)it;
    (void)data;
    pthread_mutex_lock(&r2_mu);
    r2_rc = rc;
    r2_done = 1;
    pthread_mutex_unlock(&r2_mu);
}

static void test_r2_lost_ack_answer_claim_deleted(void **state)
{
    zkr_session_t *as = open_proxied(10000);
    zkr_session_t *bs = open_session(10000);
    zkr_workq_t *aq = new_q(as, "/r17/r2", "A");
    zkr_workq_t *bq = new_q(bs, "/r17/r2", "B");
    zkr_item_t *ia = NULL, *ib = NULL;
    struct String_vector cv = {0, NULL};
    char ipath[600], cpath[800];
    int done = 0, rc;

    (void)state;
    assert_int_equal(zkr_workq_put(bq, "X", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(aq, 5000, &ia), 0);
    snprintf(ipath, sizeof(ipath), "/r17/r2/%s", zkr_item_id(ia));
    /* A's turn in the consumers' line is given back in the background:
     * wait until it is gone, else B waits behind it. */
    for (int64_t end = now_ms() + 5000;
         now_ms() < end && children("/r17/r2/consumers") > 0;)
        usleep(10 * 1000);
    assert_int_equal(children("/r17/r2/consumers"), 0);

    /* A's ack is sent into a black hole. */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkr_item_ack_async(ia, r2_acked, NULL), 0);
    usleep(200 * 1000);

    /* An operator deletes A's claim. */
    assert_int_equal(zoo_get_children(raw, ipath, 0, &cv), ZOK);
    assert_int_equal(cv.count, 1);
    snprintf(cpath, sizeof(cpath), "%s/%s", ipath, cv.data[0]);
    deallocate_String_vector(&cv);
    assert_int_equal(zoo_delete(raw, cpath, -1), ZOK);

    /* B takes X and completes it. */
    assert_int_equal(zkr_workq_take(bq, 5000, &ib), 0);
    assert_string_equal(zkr_item_data(ib, NULL), "X");
    assert_int_equal(zkr_item_ack(ib), 0);

    /* A's connection comes back. */
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    done = wait_flag(&r2_mu, &r2_done, 15000);
    pthread_mutex_lock(&r2_mu);
    rc = r2_rc;
    pthread_mutex_unlock(&r2_mu);
    printf("# R2: B's ack 0, A's ack (claim deleted, answer lost) %d\n", rc);
    zkr_item_free(ib);
    zkr_item_free(ia);
    zkr_workq_free(aq);
    zkr_workq_free(bq);
    zkr_session_free(as);
    zkr_session_free(bs);
    assert_true(done);
    assert_int_equal(rc, ZKR_ESTALE);
}

/* ---------------------------------------------------------------------
 * R3: one write by another client wedges every put of a level for good.
 *
 * The tail bucket's number is q<L>'s data version. A setData on q<L> (an
 * operator's note, `set /q/q1 x`) makes it name a bucket that does not
 * exist; so does deleting an empty tail bucket (Curator's ChildReaper,
 * an operator's cleanup). put_run() then loops exists+multi without a
 * pause until its deadline and returns ZCONNECTIONLOSS ("may or may not
 * have been put"), and so does every later put: nothing repairs it.   */

static void r3_wedge(const char *path, int by_delete)
{
    zkr_session_t *s = open_session(4000);
    zkr_workq_t *q = new_q(s, path, "p");
    zkr_item_t *it = NULL;
    char node[400];
    int64_t t0, t1;
    int rc, rc2;

    assert_int_equal(zkr_workq_put(q, "a", 1, 1, NULL, 0), 0);
    if (by_delete) {
        /* the item done, its bucket is empty; a reaper deletes it */
        assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        snprintf(node, sizeof(node), "%s/q1/b0000000000", path);
        assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    } else {
        snprintf(node, sizeof(node), "%s/q1", path);
        assert_int_equal(zoo_set(raw, node, "note", 4, -1), ZOK);
    }
    t0 = now_ms();
    rc = zkr_workq_put(q, "b", 1, 1, NULL, 0);
    t1 = now_ms();
    rc2 = zkr_workq_put(q, "c", 1, 1, NULL, 0);
    printf("# R3 (%s): put -> %d after %lld ms; the next put -> %d\n",
           by_delete ? "tail bucket deleted" : "q1 written", rc,
           (long long)(t1 - t0), rc2);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(rc, 0);
    assert_int_equal(rc2, 0);
}

static void test_r3_level_written(void **state)
{
    (void)state;
    r3_wedge("/r17/r3a", 0);
}

static void test_r3_tail_bucket_deleted(void **state)
{
    (void)state;
    r3_wedge("/r17/r3b", 1);
}

/* ---------------------------------------------------------------------
 * R4: a cancel (or zkr_workq_free) while the waiting consumer's
 * connection is down is not seen until the connection is back or two
 * session timeouts have passed.
 *
 * zkr.h: zkr_workq_cancel "cancels a pending take from any thread";
 * zkr_workq_free: "a pending take ends with ZKR_ECANCELED first".
 * take_run() calls zkr__wq_wait_connected(s, -1), which waits up to 2 x the
 * session timeout and never looks at q->cancel; zkr__cancel(&q->turn)
 * does nothing to a turn that is held.                               */

static pthread_mutex_t r4_mu = PTHREAD_MUTEX_INITIALIZER;
static int r4_rc = 1000, r4_done;
static int64_t r4_at;

static void r4_took(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    zkr_item_free(it);
    pthread_mutex_lock(&r4_mu);
    r4_rc = rc;
    r4_done = 1;
    r4_at = now_ms();
    pthread_mutex_unlock(&r4_mu);
}

static void test_r4_cancel_while_disconnected(void **state)
{
    zkr_session_t *s = open_proxied(6000);
    zkr_workq_t *q = new_q(s, "/r17/r4", "c");
    int64_t t0, waited;
    int done = 0, rc;

    (void)state;
    assert_int_equal(zkr_workq_put(q, "warm", 4, 1, NULL, 0), 0);
    {
        zkr_item_t *it = NULL;
        assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    assert_int_equal(zkr_workq_take_async(q, -1, r4_took, NULL), 0);
    usleep(500 * 1000); /* first in line, waiting for an item */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    /* the client notices (2/3 of the session timeout) */
    for (int64_t end = now_ms() + 15000;
         now_ms() < end && zkr_session_state(s) == ZKR_STATE_CONNECTED;)
        usleep(20 * 1000);
    assert_true(zkr_session_state(s) != ZKR_STATE_CONNECTED);
    usleep(300 * 1000);
    t0 = now_ms();
    assert_int_equal(zkr_workq_cancel(q), 0);
    done = wait_flag(&r4_mu, &r4_done, 30000);
    pthread_mutex_lock(&r4_mu);
    rc = r4_rc;
    waited = r4_at - t0;
    pthread_mutex_unlock(&r4_mu);
    printf("# R4: cancel while disconnected: take ended %d after %lld ms\n", rc,
           (long long)waited);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_true(done);
    assert_int_equal(rc, ZKR_ECANCELED);
    assert_true(waited < 2000);
}

/* ---------------------------------------------------------------------
 * R5: writes to an item's data by another client count as deliveries:
 * an item never delivered is dead-lettered.
 *
 * zkr.h: an item "that has been delivered `max` times" moves to the dead
 * path. The count is carry + the item node's data version, so any
 * setData on the item (an operator fixing a payload) adds a delivery.  */

static void test_r5_write_counts_as_delivery(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r17/r5", "c");
    zkr_item_t *it = NULL;
    char id[ZKR_WORKQ_ID_MAX], ipath[400];
    int rc;

    (void)state;
    assert_int_equal(zkr_workq_set_dead_letter(q, 2, NULL), 0);
    assert_int_equal(zkr_workq_put(q, "job", 3, 1, id, sizeof(id)), 0);
    snprintf(ipath, sizeof(ipath), "/r17/r5/%s", id);
    /* an operator corrects the payload, twice */
    assert_int_equal(zoo_set(raw, ipath, "job1", 4, -1), ZOK);
    assert_int_equal(zoo_set(raw, ipath, "job2", 4, -1), ZOK);
    rc = zkr_workq_take(q, 2000, &it);
    printf("# R5: take of an item never delivered -> %d, dead/ has %d\n", rc,
           children("/r17/r5/dead"));
    if (rc == 0) {
        assert_int_equal(zkr_item_deliveries(it), 1);
        zkr_item_free(it);
    }
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(rc, 0);
}

/* ---------------------------------------------------------------------
 * R6: a waiting consumer cut off (partitioned, or SIGSTOPped) while first
 * in line. A consumer that finds an item takes it at once: it does not
 * queue behind the line (docs/design/workq.md, 3). One that finds none
 * joins the line, behind the cut-off one, and waits until that one's
 * session has expired (not before it could have): zkr.h (zkr_workq_take)
 * documents the bound, the session timeout plus a margin. */

static void r6_took(int rc, zkr_item_t *it, void *data)
{
    (void)rc;
    (void)data;
    zkr_item_free(it);
}

static atomic_int r6_rc = -1;
static atomic_llong r6_at;

static void r6_waited(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    zkr_item_free(it);
    r6_at = now_ms();
    r6_rc = rc;
}

static void test_r6_stalled_head_of_line(void **state)
{
    zkr_session_t *as = open_proxied(10000);
    zkr_session_t *bs = open_session(10000);
    zkr_workq_t *aq = new_q(as, "/r17/r6", "A");
    zkr_workq_t *bq = new_q(bs, "/r17/r6", "B");
    zkr_item_t *it = NULL;
    int64_t t0, took, waited;
    int rc;

    (void)state;
    assert_int_equal(zkr_workq_take_async(aq, -1, r6_took, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/r17/r6/consumers") == 1, 5000));
    usleep(500 * 1000); /* A is first in line, waiting */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    t0 = now_ms(); /* A cut off: the server last heard it before this */
    assert_int_equal(zkr_workq_put(bq, "job", 3, 1, NULL, 0), 0);
    rc = zkr_workq_take(bq, 25000, &it);
    took = now_ms() - t0;
    printf("# R6: B's take with an item there, A cut off: %d after %lld ms\n",
           rc, (long long)took);
    assert_int_equal(rc, 0);
    assert_string_equal(zkr_item_data(it, NULL), "job");
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    /* Before A's session could have expired (A last heard at most a ping
     * interval, a third of 10 s, before the cut). */
    assert_true(took < 10000 - 10000 / 3 - 500);
    /* Nothing there: B joins the line behind A; a put wakes A only. */
    r6_rc = -1;
    assert_int_equal(zkr_workq_take_async(bq, 25000, r6_waited, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/r17/r6/consumers") == 2, 5000));
    assert_int_equal(zkr_workq_put(bq, "job2", 4, 1, NULL, 0), 0);
    assert_true(ZKT_WAIT_UNTIL(r6_rc != -1, 30000));
    waited = r6_at - t0;
    printf("# R6: B waiting behind A cut off: %d after %lld ms\n", (int)r6_rc,
           (long long)waited);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_workq_free(bq);
    zkr_workq_free(aq);
    zkr_session_free(bs);
    zkr_session_free(as);
    assert_int_equal(r6_rc, 0);
    assert_true(waited >= 10000 - 10000 / 3 - 500);
    assert_true(waited <= 25000);
}

/* ---------------------------------------------------------------------
 * B2 (review17b): a put whose answer was lost, and whose receipt another
 * client deleted before the producer looked: the put applied, so it must
 * not be put again. zkr.h: a put is applied exactly once, also when the
 * connection is lost before the answer.                               */

struct b2_put {
    zkr_workq_t *q;
    char id[ZKR_WORKQ_ID_MAX];
    int rc, done;
};

static void *b2_putter(void *arg)
{
    struct b2_put *p = arg;

    p->rc = zkr_workq_put(p->q, "once", 4, 1, p->id, sizeof(p->id));
    __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static int name_in(const struct String_vector *v, const char *name)
{
    for (int i = 0; i < v->count; i++)
        if (strcmp(v->data[i], name) == 0)
            return 1;
    return 0;
}

static void test_b2_put_reply_lost_receipt_deleted(void **state)
{
    zkr_session_t *ps = open_proxied(10000);
    zkr_session_t *cs = open_session(10000);
    zkr_workq_t *pq = new_q(ps, "/r17/b2", "producer");
    zkr_workq_t *cq = new_q(cs, "/r17/b2", "consumer");
    struct String_vector before = {0, NULL};
    struct b2_put p = {.q = pq};
    zkr_item_t *it = NULL;
    int64_t count = -1;
    pthread_t thr;
    int deleted = 0, once = 0;

    (void)state;
    assert_int_equal(zkr_workq_put(pq, "warm", 4, 1, NULL, 0), 0);
    assert_int_equal(zoo_get_children(raw, "/r17/b2/receipts", 0, &before),
                     ZOK);

    /* The put applies, its answer is lost; the reconnection is slow. */
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(pthread_create(&thr, NULL, b2_putter, &p), 0);
    /* Meanwhile another client deletes the new receipt. */
    for (int64_t end = now_ms() + 5000;
         now_ms() < end && !deleted &&
         !__atomic_load_n(&p.done, __ATOMIC_SEQ_CST);) {
        struct String_vector v = {0, NULL};

        if (zoo_get_children(raw, "/r17/b2/receipts", 0, &v) == ZOK)
            for (int i = 0; i < v.count; i++) {
                char path[400];

                if (name_in(&before, v.data[i]))
                    continue;
                snprintf(path, sizeof(path), "/r17/b2/receipts/%s", v.data[i]);
                deleted += zoo_delete(raw, path, -1) == ZOK;
            }
        deallocate_String_vector(&v);
        usleep(2 * 1000);
    }
    deallocate_String_vector(&before);
    pthread_join(thr, NULL);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_workq_len(cq, &count), 0);
    while (zkr_workq_take(cq, 0, &it) == 0) {
        size_t len;
        const char *d = zkr_item_data(it, &len);

        once += len == 4 && memcmp(d, "once", 4) == 0;
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        it = NULL;
    }
    printf("# B2: put -> %d, receipt deleted %d, queue length %lld, "
           "\"once\" %d times\n",
           p.rc, deleted, (long long)count, once);
    zkr_workq_free(cq);
    zkr_workq_free(pq);
    zkr_session_free(cs);
    zkr_session_free(ps);
    assert_int_equal(deleted, 1); /* the case happened */
    assert_int_equal(p.rc, 0);
    assert_int_equal(once, 1);
    assert_int_equal(count, 2);
}

/* ---------------------------------------------------------------------
 * B1 (review17b): a nack to the back while q<L> names a tail bucket that
 * another client sealed (a setData on it) or that does not exist (a
 * setData on q<L>). zkr.h: the nack puts the item back at the back of its
 * level, or fails with the claim kept; it never hangs. The item is then
 * available again with its delivery count kept.                       */

static pthread_mutex_t b1_mu = PTHREAD_MUTEX_INITIALIZER;
static int b1_rc, b1_done;

static void b1_nacked(int rc, zkr_item_t *it, void *data)
{
    (void)it;
    (void)data;
    pthread_mutex_lock(&b1_mu);
    b1_rc = rc;
    b1_done = 1;
    pthread_mutex_unlock(&b1_mu);
}

static void b1_nack_back(const char *path, int level_written)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, path, "c");
    zkr_item_t *it = NULL;
    char node[400];
    int done = 0, rc = -1;
    int64_t t0, took;

    assert_int_equal(zkr_workq_put(q, "X", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    assert_int_equal(zkr_item_deliveries(it), 1);
    /* another client seals the only bucket (its data version moves) */
    snprintf(node, sizeof(node), "%s/q1/b0000000000", path);
    assert_int_equal(zoo_set(raw, node, "oops", 4, -1), ZOK);
    if (level_written) { /* and writes q1: it names b1, which is not there */
        snprintf(node, sizeof(node), "%s/q1", path);
        assert_int_equal(zoo_set(raw, node, "note", 4, -1), ZOK);
    }
    b1_done = 0;
    t0 = now_ms();
    assert_int_equal(zkr_item_nack_async(it, ZKR_NACK_BACK, b1_nacked, NULL),
                     0);
    done = wait_flag(&b1_mu, &b1_done, 10000);
    pthread_mutex_lock(&b1_mu);
    rc = b1_rc;
    pthread_mutex_unlock(&b1_mu);
    took = now_ms() - t0;
    printf("# B1 (%s): nack to the back -> %d after %lld ms\n",
           level_written ? "q1 names a missing bucket" : "tail sealed",
           done ? rc : -1, (long long)took);
    assert_true(done);
    assert_int_equal(rc, 0);
    zkr_item_free(it);
    it = NULL;
    /* available again, delivered once so far */
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    assert_string_equal(zkr_item_data(it, NULL), "X");
    assert_int_equal(zkr_item_deliveries(it), 2);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    /* and the level takes puts */
    assert_int_equal(zkr_workq_put(q, "Y", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    assert_string_equal(zkr_item_data(it, NULL), "Y");
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    zkr_workq_free(q);
    zkr_session_free(s);
}

static void test_b1_nack_back_tail_sealed(void **state)
{
    (void)state;
    b1_nack_back("/r17/b1a", 0);
}

static void test_b1_nack_back_tail_missing(void **state)
{
    (void)state;
    b1_nack_back("/r17/b1b", 1);
}

/* ---------------------------------------------------------------------
 * B7 (review17b): items freed while their ack is in flight. The ack's
 * multi may still apply and create its receipt; no receipt may stay
 * behind (workq.md: receipts are deleted once their outcome is known). */

static int b7_calls;

static void b7_acked(int rc, zkr_item_t *it, void *data)
{
    (void)rc;
    (void)it;
    (void)data;
    __atomic_add_fetch(&b7_calls, 1, __ATOMIC_SEQ_CST);
}

static void test_b7_free_during_ack(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r17/b7", "c");
    int left = -1, n = 50;

    (void)state;
    for (int i = 0; i < n; i++) {
        zkr_item_t *it = NULL;

        assert_int_equal(zkr_workq_put(q, "j", 1, 1, NULL, 0), 0);
        assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
        assert_int_equal(zkr_item_ack_async(it, b7_acked, NULL), 0);
        zkr_item_free(it);
    }
    zkr_workq_free(q);
    /* the session lives on: its cleanup deletes what is known */
    for (int64_t end = now_ms() + 10000;
         now_ms() < end && (left = children("/r17/b7/receipts")) > 0;)
        usleep(20 * 1000);
    printf("# B7: %d acks freed in flight (%d completions), receipts left %d\n",
           n, __atomic_load_n(&b7_calls, __ATOMIC_SEQ_CST), left);
    zkr_session_free(s);
    assert_int_equal(__atomic_load_n(&b7_calls, __ATOMIC_SEQ_CST), n);
    assert_int_equal(left, 0);
}

/* ---------------------------------------------------------------------
 * C1 (review17c): zkr_item_free() from another thread while a blocking
 * zkr_item_nack(ZKR_NACK_BACK) waits for its tail repair (B1).
 *
 * zkr.h: zkr_item_free() has "the same rules for callbacks as
 * zkr_lock_free()", which cancels a pending call (its completion gets
 * ZKR_ECANCELED before the free returns). So the nack still waiting must
 * return a documented code (0, ZKR_ECANCELED, ZKR_ESTALE), read from a
 * handle that is still there. glibc's M_PERTURB fills freed memory with
 * a pattern: a nack that reads its item after the free returns the
 * pattern (0x5a5a5a5a) as its code.                                    */

struct c1_nack {
    zkr_item_t *it;
    int rc, done;
};

static void *c1_nacker(void *arg)
{
    struct c1_nack *n = arg;

    n->rc = zkr_item_nack(n->it, ZKR_NACK_BACK);
    __atomic_store_n(&n->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_c1_free_during_sync_nack_repair(void **state)
{
    zkr_session_t *s = open_session(10000);
    int rounds = 30, bad = 0, hung = 0, last_bad = 0, codes[4] = {0};

    (void)state;
    mallopt(M_PERTURB, 0x5a);
    for (int i = 0; i < rounds && !hung; i++) {
        char path[64], node[128];
        zkr_workq_t *q;
        zkr_item_t *it = NULL;
        struct c1_nack *n = calloc(1, sizeof(*n));
        pthread_t thr;

        snprintf(path, sizeof(path), "/r17/c1/%d", i);
        q = new_q(s, path, "c");
        assert_int_equal(zkr_workq_put(q, "X", 1, 1, NULL, 0), 0);
        assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
        /* another client seals the tail (q1 still names it): B1 repair */
        snprintf(node, sizeof(node), "%s/q1/b0000000000", path);
        assert_int_equal(zoo_set(raw, node, "oops", 4, -1), ZOK);
        n->it = it;
        assert_int_equal(pthread_create(&thr, NULL, c1_nacker, n), 0);
        usleep(8 * 1000); /* the nack is in its repair (pause, multi) */
        zkr_item_free(it);
        if (!ZKT_WAIT_UNTIL(__atomic_load_n(&n->done, __ATOMIC_SEQ_CST),
                            10000)) {
            hung = 1; /* the nack waits on a freed item: leave it */
            pthread_detach(thr);
            break;
        }
        pthread_join(thr, NULL);
        if (n->rc == 0)
            codes[0]++;
        else if (n->rc == ZKR_ECANCELED)
            codes[1]++;
        else if (n->rc == ZKR_ESTALE)
            codes[2]++;
        else {
            codes[3]++;
            bad++;
            last_bad = n->rc;
        }
        free(n);
        zkr_workq_free(q);
    }
    mallopt(M_PERTURB, 0);
    printf("# C1: %d sync nacks freed during repair: 0 x%d, ECANCELED x%d, "
           "ESTALE x%d, other x%d (last %d = 0x%x), hung %d\n",
           rounds, codes[0], codes[1], codes[2], codes[3], last_bad,
           (unsigned)last_bad, hung);
    if (!hung)
        zkr_session_free(s);
    assert_int_equal(hung, 0);
    assert_int_equal(bad, 0);
}

/* ---------------------------------------------------------------------
 * C2 (review17c): a nack to the back whose tail bucket b<t> is missing
 * (another client deleted it or wrote q<L>: B1) repairs it and commits
 * into b<t> without reading q<L> again. Meanwhile the level moved on: a
 * producer repaired b<t> itself, filled and sealed it (q<L> names b<t+1>)
 * and put P3 into b<t+1>; the consumers emptied b<t> and the scan deleted
 * it. The nack's repair then creates b<t> again, open, below b<t+1>, and
 * the nacked item lands there: ahead of P3.
 *
 * zkr.h: FIFO within a level; ZKR_NACK_BACK puts the item "at the back
 * of its level". The consumer's takes of P1, P2 and P3 returned them
 * while the nacked item was not available, so the nack took effect after
 * P3 was put: P3 must be served first.                                  */

static pthread_mutex_t c2_mu = PTHREAD_MUTEX_INITIALIZER;
static int c2_rc, c2_done;

static void c2_nacked(int rc, zkr_item_t *it, void *data)
{
    (void)it;
    (void)data;
    pthread_mutex_lock(&c2_mu);
    c2_rc = rc;
    c2_done = 1;
    pthread_mutex_unlock(&c2_mu);
}

static void test_c2_nack_back_repair_behind_moved_tail(void **state)
{
    zkr_session_t *as = open_proxied(10000); /* consumer A, slow link */
    zkr_session_t *ds = open_session(10000); /* producer P, consumer C */
    zkr_workq_t *aq, *pq, *cq;
    zkr_item_t *it = NULL, *a = NULL;
    struct String_vector v = {0, NULL};
    char first[16] = "", second[16] = "", buckets[256] = "";
    int done = 0, rc = -1;
    int64_t t0;

    (void)state;
    (void)zoo_create(raw, "/r17", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    /* a queue whose buckets hold 2 items (B = 1: sealed at seq 1) */
    assert_int_equal(zoo_create(raw, "/r17/c2", "zkr-workq 1 bucket=1", 20,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    aq = new_q(as, "/r17/c2", "A");
    pq = new_q(ds, "/r17/c2", "P");
    cq = new_q(ds, "/r17/c2", "C");
    assert_int_equal(zkr_workq_put(pq, "A", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(aq, 5000, &a), 0);
    /* another client seals b0 and writes q1: it names b1, not there */
    assert_int_equal(zoo_set(raw, "/r17/c2/q1/b0000000000", "oops", 4, -1),
                     ZOK);
    assert_int_equal(zoo_set(raw, "/r17/c2/q1", "note", 4, -1), ZOK);

    /* A's link is slow: its nack (b0 sealed, b1 missing, q1 names b1)
     * reaches its repair of b1 some 2.4 s from now, and the repair's
     * create of b1 arrives some 1.5 s later. */
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    t0 = now_ms();
    assert_int_equal(zkr_item_nack_async(a, ZKR_NACK_BACK, c2_nacked, NULL), 0);
    usleep(2700 * 1000);
    /* Meanwhile, on a fast link: P puts P1 (repairing b1 itself), P2
     * (seals b1: q1 names b2), P3 (into b2). */
    assert_int_equal(zkr_workq_put(pq, "1", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_put(pq, "2", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_put(pq, "3", 1, 1, NULL, 0), 0);
    /* C takes and acks P1 and P2; its next take deletes the empty sealed
     * b1 and gets P3, which it gives back where it was. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zkr_workq_take(cq, 0, &it), 0);
        assert_int_equal(((const char *)zkr_item_data(it, NULL))[0], '1' + i);
        assert_int_equal(
            i < 2 ? zkr_item_ack(it) : zkr_item_nack(it, ZKR_NACK_FRONT), 0);
        zkr_item_free(it);
        it = NULL;
    }
    printf("# C2: P1..P3 put, P1 P2 acked, P3 given back at %lld ms\n",
           (long long)(now_ms() - t0));
    done = wait_flag(&c2_mu, &c2_done, 15000);
    pthread_mutex_lock(&c2_mu);
    rc = c2_rc;
    pthread_mutex_unlock(&c2_mu);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    printf("# C2: A's nack to the back -> %d at %lld ms\n", done ? rc : -1,
           (long long)(now_ms() - t0));
    if (zoo_get_children(raw, "/r17/c2/q1", 0, &v) == ZOK)
        for (int i = 0; i < v.count; i++) {
            strncat(buckets, v.data[i], sizeof(buckets) - strlen(buckets) - 2);
            strcat(buckets, " ");
        }
    deallocate_String_vector(&v);
    if (zkr_workq_take(cq, 2000, &it) == 0) {
        snprintf(first, sizeof(first), "%s",
                 (const char *)zkr_item_data(it, NULL));
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        it = NULL;
    }
    if (zkr_workq_take(cq, 2000, &it) == 0) {
        snprintf(second, sizeof(second), "%s",
                 (const char *)zkr_item_data(it, NULL));
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        it = NULL;
    }
    printf("# C2: buckets of q1: %s; served next: \"%s\" then \"%s\"\n",
           buckets, first, second);
    zkr_item_free(a);
    zkr_workq_free(aq);
    zkr_workq_free(pq);
    zkr_workq_free(cq);
    zkr_session_free(ds);
    zkr_session_free(as);
    assert_true(done);
    assert_int_equal(rc, 0);
    assert_string_equal(first, "3"); /* P3 was there before: FIFO */
    assert_string_equal(second, "A");
}

/* ---------------------------------------------------------------------
 * Buckets ahead of the tail: another client creates b1 (empty) and b2
 * (holding a child of its own) before the queue reaches them.
 *
 * workq.md: a bucket holds up to B + 1 items plus the puts in flight at
 * its seal; the largest listing is one bucket. A seal whose create of
 * b<t+1> fails on the foreign node must still seal b<t> (adopting the
 * node there), else every put lands in b<t> for ever. A consumer waiting
 * on an empty queue is woken by a put into the tail even when the tail
 * is not the last bucket. Items are served in the order they were put. */

static pthread_mutex_t ah_mu = PTHREAD_MUTEX_INITIALIZER;
static int ah_done, ah_rc = 1000;
static char ah_data[16];

static void ah_took(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    pthread_mutex_lock(&ah_mu);
    ah_rc = rc;
    if (rc == 0) {
        snprintf(ah_data, sizeof(ah_data), "%s",
                 (const char *)zkr_item_data(it, NULL));
        ah_rc = zkr_item_ack_async(it, r1_acked, NULL);
    }
    ah_done = 1;
    pthread_mutex_unlock(&ah_mu);
}

/* The most items in one bucket of level directory ql. */
static int fullest_bucket(const char *ql)
{
    struct String_vector v = {0, NULL};
    int most = 0;

    assert_int_equal(zoo_get_children(raw, ql, 0, &v), ZOK);
    for (int i = 0; i < v.count; i++) {
        char bt[300];
        struct String_vector iv = {0, NULL};
        int items = 0;

        snprintf(bt, sizeof(bt), "%s/%s", ql, v.data[i]);
        if (zoo_get_children(raw, bt, 0, &iv) != ZOK)
            continue;
        for (int k = 0; k < iv.count; k++)
            items += strncmp(iv.data[k], "i-", 2) == 0;
        deallocate_String_vector(&iv);
        if (items > most)
            most = items;
    }
    deallocate_String_vector(&v);
    return most;
}

static void test_buckets_made_ahead_by_another_client(void **state)
{
    enum { B = 4, N = 40 };
    zkr_session_t *ps = open_session(10000); /* producer */
    zkr_session_t *cs = open_session(10000); /* consumer */
    zkr_workq_t *pq, *cq;
    zkr_item_t *it = NULL;
    char buf[16];
    int most = 0, done, rc, got = 0, in_order = 1;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/r3w/ahead", "zkr-workq 1 bucket=4", 20,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    pq = new_q(ps, "/r3w/ahead", "P");
    cq = new_q(cs, "/r3w/ahead", "C");
    assert_int_equal(zkr_workq_put(pq, "warm", 4, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(cq, 5000, &it), 0);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    it = NULL;
    /* Another client makes b1 and b2 ahead of the tail (b0). */
    assert_int_equal(zoo_create(raw, "/r3w/ahead/q1/b0000000001", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_create(raw, "/r3w/ahead/q1/b0000000002", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_create(raw, "/r3w/ahead/q1/b0000000002/note", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);

    /* A consumer waits on the empty queue; one put into b0 wakes it. */
    assert_int_equal(zkr_workq_take_async(cq, -1, ah_took, NULL), 0);
    usleep(300 * 1000);
    assert_int_equal(zkr_workq_put(pq, "w", 1, 1, NULL, 0), 0);
    done = wait_flag(&ah_mu, &ah_done, zkt_scaled_ms(5000));
    if (!done)
        assert_int_equal(zkr_workq_cancel(cq), 0);
    (void)wait_flag(&ah_mu, &ah_done, zkt_scaled_ms(5000));

    for (int i = 0; i < N; i++) {
        int m;

        snprintf(buf, sizeof(buf), "%d", i);
        assert_int_equal(zkr_workq_put(pq, buf, strlen(buf), 1, NULL, 0), 0);
        if ((m = fullest_bucket("/r3w/ahead/q1")) > most)
            most = m;
    }
    while (got < N && (rc = zkr_workq_take(cq, 2000, &it)) == 0) {
        snprintf(buf, sizeof(buf), "%d", got);
        if (strcmp((const char *)zkr_item_data(it, NULL), buf) != 0)
            in_order = 0;
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        it = NULL;
        got++;
    }
    printf("# ahead: waiting consumer woken %d (%s), fullest bucket %d items "
           "(B = %d), %d of %d taken, in order %d\n",
           done, ah_data, most, B, got, N, in_order);
    zkr_workq_free(cq);
    zkr_workq_free(pq);
    zkr_session_free(cs);
    zkr_session_free(ps);
    assert_true(done);
    assert_string_equal(ah_data, "w");
    /* B + 1 (sealed at seq B); one producer, no put in flight at a seal */
    assert_true(most <= B + 1);
    assert_int_equal(got, N);
    assert_true(in_order);
}

/* ---------------------------------------------------------------------
 * Writes by another client to a claimed item's data (same bytes): zkr.h
 * says they do not count; the claim was never lost, so the ack completes
 * the item (0) and it is not delivered again; a nack to the front gives
 * it back (0), its delivery count kept. */

static void test_foreign_write_to_claimed_item(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r3w/write", "c");
    zkr_item_t *it = NULL;
    char ipath[400];
    int64_t n = -1;
    int ack, nack, again, deliveries = 0;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkr_workq_put(q, "job", 3, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    snprintf(ipath, sizeof(ipath), "/r3w/write/%s", zkr_item_id(it));
    assert_int_equal(zoo_set(raw, ipath, "job", 3, -1), ZOK);
    ack = zkr_item_ack(it);
    zkr_item_free(it);
    it = NULL;
    again = zkr_workq_take(q, 0, &it);
    zkr_item_free(it);
    it = NULL;

    assert_int_equal(zkr_workq_put(q, "job2", 4, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    snprintf(ipath, sizeof(ipath), "/r3w/write/%s", zkr_item_id(it));
    assert_int_equal(zoo_set(raw, ipath, "job2", 4, -1), ZOK);
    nack = zkr_item_nack(it, ZKR_NACK_FRONT);
    zkr_item_free(it);
    it = NULL;
    if (zkr_workq_take(q, 5000, &it) == 0) {
        deliveries = zkr_item_deliveries(it);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    assert_int_equal(zkr_workq_len(q, &n), 0);
    printf("# foreign write: ack %d, take after it %d; nack %d, delivered "
           "again as delivery %d; len %lld\n",
           ack, again, nack, deliveries, (long long)n);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(ack, 0);
    assert_int_equal(again, ZKR_ETIMEDOUT);
    assert_int_equal(nack, 0);
    assert_int_equal(deliveries, 2);
    assert_int_equal(n, 0);
}

/* ---------------------------------------------------------------------
 * Persistent children that another client makes under an available item
 * (one with a plain name, one named as a claim): they are not claims.
 * zkr_workq_items() (zkr inspect) shows the items available, and a take
 * delivers them (the nodes that are not claims are removed); the acks
 * complete them; nothing is stuck. */

static void test_foreign_child_under_item(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r3w/child", "c");
    zkr_item_t *it = NULL;
    zkr_item_info_t *info = NULL;
    char id1[ZKR_WORKQ_ID_MAX], id2[ZKR_WORKQ_ID_MAX], node[600];
    int count = 0, claimed = -1, took = 0, acked = 0, rc;
    int64_t n = -1;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkr_workq_put(q, "a", 1, 1, id1, sizeof(id1)), 0);
    assert_int_equal(zkr_workq_put(q, "b", 1, 1, id2, sizeof(id2)), 0);
    snprintf(node, sizeof(node), "/r3w/child/%s/note", id1);
    assert_int_equal(
        zoo_create(raw, node, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    snprintf(node, sizeof(node), "/r3w/child/%s/note/deeper", id1);
    assert_int_equal(
        zoo_create(raw, node, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    snprintf(node, sizeof(node), "/r3w/child/%s/x-lock-0000000001", id2);
    assert_int_equal(
        zoo_create(raw, node, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);

    assert_int_equal(zkr_workq_items(q, 10, &info, &count), 0);
    assert_int_equal(count, 2);
    claimed = info[0].claimed + info[1].claimed;
    zkr_item_infos_free(info, count);
    while ((rc = zkr_workq_take(q, 2000, &it)) == 0) {
        took++;
        acked += zkr_item_ack(it) == 0;
        zkr_item_free(it);
        it = NULL;
    }
    assert_int_equal(zkr_workq_len(q, &n), 0);
    printf("# foreign children: %d of 2 shown claimed; %d taken, %d acked; "
           "len %lld\n",
           claimed, took, acked, (long long)n);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(claimed, 0);
    assert_int_equal(took, 2);
    assert_int_equal(acked, 2);
    assert_int_equal(n, 0);
}

/* ---------------------------------------------------------------------
 * An ack that applied, whose answer was lost, and whose session expired
 * before its receipt could be read. zkr.h: ZKR_ESTALE means "nothing
 * changed"; here the item was completed, so the ack must not say that: it
 * is ZKR_EINDOUBT (the outcome cannot be read any more), and it is not
 * sent again (ZKR_ESTATE). */

static pthread_mutex_t id_mu = PTHREAD_MUTEX_INITIALIZER;
static int id_rc = 1000, id_done;

static void id_acked(int rc, zkr_item_t *it, void *data)
{
    (void)it;
    (void)data;
    pthread_mutex_lock(&id_mu);
    id_rc = rc;
    id_done = 1;
    pthread_mutex_unlock(&id_mu);
}

static void test_applied_ack_answer_lost_session_expired(void **state)
{
    zkr_session_t *cs = open_proxied(10000); /* consumer, through the proxy */
    zkr_session_t *ps = open_session(10000); /* producer */
    zkr_workq_t *cq = new_q(cs, "/r3w/doubt", "C");
    zkr_workq_t *pq = new_q(ps, "/r3w/doubt", "P");
    zkr_item_t *it = NULL;
    struct Stat st;
    char ipath[400];
    int gone = 0, done, rc, again;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkr_workq_put(pq, "X", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(cq, 5000, &it), 0);
    snprintf(ipath, sizeof(ipath), "/r3w/doubt/%s", zkr_item_id(it));
    /* The take's turn is given back in the background: gone before the
     * next multi (the ack's) is the one whose answer is dropped. */
    for (int64_t end = now_ms() + zkt_scaled_ms(5000);
         now_ms() < end && children("/r3w/doubt/consumers") > 0;)
        usleep(10 * 1000);
    assert_int_equal(children("/r3w/doubt/consumers"), 0);

    /* The ack reaches the server and applies; its answer is dropped and
     * the link goes dark (the consumer cannot come back to read its
     * receipt); then the session is expired. */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    assert_int_equal(zkr_item_ack_async(it, id_acked, NULL), 0);
    for (int64_t end = now_ms() + zkt_scaled_ms(10000); now_ms() < end;) {
        if (zoo_exists(raw, ipath, 0, &st) == ZNONODE) {
            gone = 1;
            break;
        }
        usleep(5 * 1000);
    }
    assert_true(gone); /* the ack applied */
    expire(cs);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    done = wait_flag(&id_mu, &id_done, zkt_scaled_ms(30000));
    pthread_mutex_lock(&id_mu);
    rc = id_rc;
    pthread_mutex_unlock(&id_mu);
    again = done ? zkr_item_ack(it) : -1;
    printf("# in doubt: ack applied, answer lost, session expired: ack %d, "
           "ack again %d\n",
           rc, again);
    zkr_item_free(it);
    zkr_workq_free(pq);
    zkr_workq_free(cq);
    zkr_session_free(ps);
    zkr_session_free(cs);
    assert_true(done);
    assert_int_not_equal(rc, ZKR_ESTALE);
    assert_int_equal(rc, ZKR_EINDOUBT);
    assert_int_equal(again, ZKR_ESTATE);
}

/* The same, for the seal a nack to the back makes: with b1 made ahead by
 * another client, the nack that lands at seq >= B in b0 seals it (q1
 * names b1), so the next put goes to b1. */
static void test_nack_back_seal_bucket_made_ahead(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q;
    zkr_item_t *it = NULL;
    struct Stat st;
    char id[ZKR_WORKQ_ID_MAX] = "";
    int moved = 0;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/r3w/nackahead", "zkr-workq 1 bucket=2",
                                20, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    q = new_q(s, "/r3w/nackahead", "c");
    /* b0 gets seq 0 and 1: below B, not sealed */
    assert_int_equal(zkr_workq_put(q, "a", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_put(q, "b", 1, 1, NULL, 0), 0);
    assert_int_equal(zoo_create(raw, "/r3w/nackahead/q1/b0000000001", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    /* "a" back into b0, at seq >= B: the nack seals b0 */
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_BACK), 0);
    zkr_item_free(it);
    it = NULL;
    for (int64_t end = now_ms() + zkt_scaled_ms(5000); now_ms() < end;) {
        if (zoo_exists(raw, "/r3w/nackahead/q1", 0, &st) == ZOK &&
            st.version >= 1) {
            moved = 1;
            break;
        }
        usleep(10 * 1000);
    }
    if (moved)
        assert_int_equal(zkr_workq_put(q, "c", 1, 1, id, sizeof(id)), 0);
    printf("# nack back, b1 made ahead: q1 moved %d; next put %s\n", moved, id);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_true(moved);
    assert_memory_equal(id, "q1/b0000000001/", 15);
}

/* ---------------------------------------------------------------------
 * A node of another client under an item, with a long name (ZooKeeper
 * limits a name only by the request size). zkr.h: nodes of other clients
 * under an item are not claims; the item is delivered. The scan must
 * remove the node by its whole name, whatever its length. */

static void test_foreign_child_long_name(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r3w/longchild", "c");
    zkr_item_t *it = NULL;
    char id[ZKR_WORKQ_ID_MAX], node[1400];
    int took, acked = -1, n0;
    int64_t n = -1;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkr_workq_put(q, "a", 1, 1, id, sizeof(id)), 0);
    n0 = snprintf(node, sizeof(node), "/r3w/longchild/%s/", id);
    memset(node + n0, 'n', 800);
    node[n0 + 800] = '\0';
    assert_int_equal(
        zoo_create(raw, node, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    /* and one named as a contender (a persistent one: not a claim) */
    memset(node + n0, 'x', 800);
    memcpy(node + n0 + 800, "-lock-0000000001", 17);
    assert_int_equal(
        zoo_create(raw, node, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    took = zkr_workq_take(q, 2000, &it);
    if (took == 0) {
        acked = zkr_item_ack(it);
        zkr_item_free(it);
    }
    assert_int_equal(zkr_workq_len(q, &n), 0);
    printf("# foreign child with a long name: take %d, ack %d, len %lld\n",
           took, acked, (long long)n);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(took, 0);
    assert_int_equal(acked, 0);
    assert_int_equal(n, 0);
}

/* ---------------------------------------------------------------------
 * Another client makes b<t+1> ahead of the tail as an EPHEMERAL node
 * (its session alive). zkr.h: a put is put exactly once; nodes of other
 * clients in the queue directory must not make puts fail. A bucket that
 * cannot have children cannot be the tail. */

static void test_ephemeral_bucket_made_ahead(void **state)
{
    enum { B = 2, N = 8 };
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q;
    zkr_item_t *it = NULL;
    char buf[16];
    int put[N], got = 0, in_order = 1, rc;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/r3w/ephahead", "zkr-workq 1 bucket=2",
                                20, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    q = new_q(s, "/r3w/ephahead", "c");
    assert_int_equal(zkr_workq_put(q, "0", 1, 1, NULL, 0), 0);
    assert_int_equal(zoo_create(raw, "/r3w/ephahead/q1/b0000000001", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    put[0] = 0;
    for (int i = 1; i < N; i++) {
        snprintf(buf, sizeof(buf), "%d", i);
        put[i] = zkr_workq_put(q, buf, strlen(buf), 1, NULL, 0);
    }
    while (got < N && (rc = zkr_workq_take(q, 2000, &it)) == 0) {
        snprintf(buf, sizeof(buf), "%d", got);
        if (strcmp((const char *)zkr_item_data(it, NULL), buf) != 0)
            in_order = 0;
        (void)zkr_item_ack(it);
        zkr_item_free(it);
        it = NULL;
        got++;
    }
    printf("# ephemeral b1 made ahead: puts");
    for (int i = 0; i < N; i++)
        printf(" %d", put[i]);
    printf("; %d of %d taken, in order %d\n", got, N, in_order);
    zkr_workq_free(q);
    zkr_session_free(s);
    for (int i = 0; i < N; i++)
        assert_int_equal(put[i], 0);
    assert_int_equal(got, N);
    assert_true(in_order);
    (void)B;
}

/* The same for a nack to the back: q<L> names an ephemeral node of
 * another client (made at b1, q1 moved to it, b0 sealed). zkr.h: a nack to the
 * back puts the item at the back of its level; it is delivered again. */
static void test_nack_back_ephemeral_tail(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q;
    zkr_item_t *it = NULL;
    int nack = 1, again = 1, deliveries = 0;

    (void)state;
    (void)zoo_create(raw, "/r3w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    q = new_q(s, "/r3w/ephnack", "c");
    assert_int_equal(zkr_workq_put(q, "a", 1, 1, NULL, 0), 0);
    assert_int_equal(zoo_create(raw, "/r3w/ephnack/q1/b0000000001", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_set(raw, "/r3w/ephnack/q1", "", 0, 0), ZOK);
    assert_int_equal(
        zoo_set(raw, "/r3w/ephnack/q1/b0000000000", "sealed", 6, 0), ZOK);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    nack = zkr_item_nack(it, ZKR_NACK_BACK);
    zkr_item_free(it);
    it = NULL;
    again = zkr_workq_take(q, 2000, &it);
    if (again == 0) {
        deliveries = zkr_item_deliveries(it);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    printf("# nack back, ephemeral tail: nack %d, take again %d, delivery "
           "%d\n",
           nack, again, deliveries);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(nack, 0);
    assert_int_equal(again, 0);
    assert_int_equal(deliveries, 2);
}

/* ---------------------------------------------------------------------
 * Asynchronous puts start no thread (issue 30: the work queue on the
 * engine): puts in flight while the connection is black-holed are chains
 * of requests, not threads blocked in a call; once it passes again each
 * completes exactly once, and each item is in the queue once.       */

#define NO_THREADS_PUTS 32

static pthread_mutex_t nt_mu = PTHREAD_MUTEX_INITIALIZER;
static int nt_done, nt_ok, nt_all;

static void nt_put(int rc, const char *id, void *data)
{
    (void)id;
    (void)data;
    pthread_mutex_lock(&nt_mu);
    nt_done++;
    nt_ok += rc == 0;
    nt_all = nt_done == NO_THREADS_PUTS;
    pthread_mutex_unlock(&nt_mu);
}

/* The threads of this process (/proc/self/task). */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_async_puts_start_no_thread(void **state)
{
    const int tmo = 8000;
    zkr_session_t *s = open_proxied(tmo);
    zkr_workq_t *q = new_q(s, "/r30/nothreads", "p");
    int before, during, all, ok;
    int64_t len = -1;

    (void)state;
    nt_done = nt_ok = nt_all = 0;
    assert_int_equal(zkr_workq_put(q, "warm", 4, 0, NULL, 0), 0);
    before = thread_count();
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    for (int i = 0; i < NO_THREADS_PUTS; i++)
        assert_int_equal(zkr_workq_put_async(q, "x", 1, 0, nt_put, NULL), 0);
    usleep(200 * 1000);
    during = thread_count();
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    /* Each put ends within its deadline (request timeout + session
     * timeout), after the client noticed the loss and reconnected. */
    (void)wait_flag(&nt_mu, &nt_all, 4 * tmo);
    pthread_mutex_lock(&nt_mu);
    all = nt_done;
    ok = nt_ok;
    pthread_mutex_unlock(&nt_mu);
    assert_int_equal(zkr_workq_len(q, &len), 0);
    printf("# async puts: threads %d before, %d with %d puts in flight; "
           "%d ended, %d put, %lld items\n",
           before, during, NO_THREADS_PUTS, all, ok, (long long)len);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_true(during <= before);
    assert_int_equal(all, NO_THREADS_PUTS);
    assert_int_equal(ok, NO_THREADS_PUTS);
    assert_int_equal(len, 1 + NO_THREADS_PUTS);
}

/* Another client writes an item's data past ZKR_WORKQ_DATA_MAX (zkr.h:
 * an item holds at most that much). Such an item is skipped by the take,
 * as a node it may not delete is: never delivered cut short, never sent
 * back in a claim too large for a request, and, due for the dead letters,
 * not copied there through a buffer of the item size (a heap overflow the
 * review of the asynchronous take found; ASan catches it). The next item
 * is taken.                                                             */
static void test_oversized_item_skipped(void **state)
{
    const size_t big = ZKR_WORKQ_DATA_MAX + 100 * 1024;
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r30/big", "c");
    zkr_item_t *it = NULL;
    char ipath[400], *data = malloc(big);
    int rc, second = 0, dead = -1;
    int64_t n = -1;

    (void)state;
    assert_non_null(data);
    memset(data, 'z', big);
    (void)zoo_create(raw, "/r30", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkr_workq_set_dead_letter(q, 1, NULL), 0);
    assert_int_equal(zkr_workq_put(q, "first", 5, 0, NULL, 0), 0);
    assert_int_equal(zkr_workq_put(q, "second", 6, 0, NULL, 0), 0);
    /* delivered once, given back: due for the dead letters (max 1) */
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    snprintf(ipath, sizeof(ipath), "/r30/big/%s", zkr_item_id(it));
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_FRONT), 0);
    zkr_item_free(it);
    it = NULL;
    assert_int_equal(zoo_set(raw, ipath, data, (int)big, -1), ZOK);
    rc = zkr_workq_take(q, 5000, &it);
    if (rc == 0) {
        size_t len = 0;
        const char *d = zkr_item_data(it, &len);

        second = len == 6 && memcmp(d, "second", 6) == 0;
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    {
        struct Stat st;

        if (zoo_exists(raw, "/r30/big/dead", 0, &st) == ZOK)
            dead = st.numChildren;
        else
            dead = 0;
    }
    assert_int_equal(zkr_workq_len(q, &n), 0);
    printf("# oversized item: take %d (the next item: %d), dead letters %d, "
           "left %lld\n",
           rc, second, dead, (long long)n);
    free(data);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(rc, 0);
    assert_true(second);
    assert_int_equal(dead, 0);
    assert_int_equal(n, 1);
}

/* zkr.h: the dead-letter path is made when missing, with its missing
 * ancestors. One three levels below a node that does not exist gets the
 * item (data kept), and the take goes on (here: nothing else, it times
 * out).                                                                 */
static void test_dead_letter_deep_path(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/r30/deadq", "c");
    zkr_item_t *it = NULL;
    struct String_vector v = {0, NULL};
    char node[300], buf[16];
    int rc, len = sizeof(buf), moved = 0;

    (void)state;
    (void)zoo_create(raw, "/r30", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkr_workq_set_dead_letter(q, 1, "/r30/deadx/a/b/dead"), 0);
    assert_int_equal(zkr_workq_put(q, "job", 3, 0, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_FRONT), 0);
    zkr_item_free(it);
    it = NULL;
    rc = zkr_workq_take(q, 2000, &it);
    zkr_item_free(it);
    if (zoo_get_children(raw, "/r30/deadx/a/b/dead", 0, &v) == ZOK &&
        v.count == 1) {
        snprintf(node, sizeof(node), "/r30/deadx/a/b/dead/%s", v.data[0]);
        moved = zoo_get(raw, node, 0, buf, &len, NULL) == ZOK && len == 3 &&
                memcmp(buf, "job", 3) == 0;
    }
    printf("# dead letters three levels below a missing node: take %d, "
           "moved %d (%d there)\n",
           rc, moved, v.count);
    deallocate_String_vector(&v);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(rc, ZKR_ETIMEDOUT);
    assert_true(moved);
}

/* A claim granted while the event thread is busy, whose session is lost
 * before the completion runs: zkr.h, zkr_workq_take_async: cb gets what
 * zkr_workq_take() would return, and a blocking acquire returns a grant
 * lost meanwhile as ZKR_ELOST. The completion must not hand over an
 * item whose claim is gone (another consumer may be processing it).    */

/* The number of claimed items of the queue at path, as another client
 * sees them (zkr_workq_items, a session of its own). */
static int queue_claims(const char *path)
{
    zkr_session_t *cs = open_session(10000);
    zkr_workq_t *cq = new_q(cs, path, "counter");
    zkr_item_info_t *v = NULL;
    int n = 0, claimed = 0;

    assert_int_equal(zkr_workq_items(cq, 100, &v, &n), 0);
    for (int i = 0; i < n; i++)
        claimed += v[i].claimed;
    zkr_item_infos_free(v, n);
    zkr_workq_free(cq);
    zkr_session_free(cs);
    return claimed;
}

static pthread_mutex_t lt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lt_cv = PTHREAD_COND_INITIALIZER;
static int lt_blocking, lt_release, lt_done, lt_rc = 1000, lt_item;

static void lt_block(int rc, const char *id, void *data)
{
    (void)rc;
    (void)id;
    (void)data;
    pthread_mutex_lock(&lt_mu);
    lt_blocking = 1;
    while (!lt_release)
        pthread_cond_wait(&lt_cv, &lt_mu);
    pthread_mutex_unlock(&lt_mu);
}

static void lt_taken(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    pthread_mutex_lock(&lt_mu);
    lt_rc = rc;
    lt_item = it != NULL;
    lt_done = 1;
    pthread_mutex_unlock(&lt_mu);
    zkr_item_free(it);
}

static void test_take_completion_after_session_lost(void **state)
{
    const int tmo = 4000;
    zkr_session_t *s = open_proxied(tmo);
    zkr_workq_t *q = new_q(s, "/r30/late", "c");
    int blocking, rc, item;

    (void)state;
    lt_blocking = lt_release = lt_done = 0;
    assert_int_equal(zkr_workq_put(q, "job", 3, 0, NULL, 0), 0);
    /* the event thread is held by a callback of this session */
    assert_int_equal(zkr_workq_put_async(q, "y", 1, 0, lt_block, NULL), 0);
    blocking = wait_flag(&lt_mu, &lt_blocking, zkt_scaled_ms(10000));
    assert_true(blocking);
    assert_int_equal(zkr_workq_take_async(q, 10000, lt_taken, NULL), 0);
    /* granted: the claim's node is there (another session sees it) */
    assert_true(
        ZKT_WAIT_UNTIL(queue_claims("/r30/late") == 1, zkt_scaled_ms(10000)));
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    /* lost: zkr's safe deadline is under the session timeout; the server
     * expires the session and deletes the claim */
    assert_true(ZKT_WAIT_UNTIL(zkr_session_state(s) == ZKR_STATE_LOST,
                               zkt_scaled_ms(6 * tmo)));
    assert_true(
        ZKT_WAIT_UNTIL(queue_claims("/r30/late") == 0, zkt_scaled_ms(6 * tmo)));
    pthread_mutex_lock(&lt_mu);
    lt_release = 1;
    pthread_cond_broadcast(&lt_cv);
    pthread_mutex_unlock(&lt_mu);
    (void)wait_flag(&lt_mu, &lt_done, zkt_scaled_ms(10000));
    pthread_mutex_lock(&lt_mu);
    rc = lt_rc;
    item = lt_item;
    pthread_mutex_unlock(&lt_mu);
    printf("# take completed after its session was lost: %d (item %d)\n", rc,
           item);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(rc, ZKR_ELOST);
    assert_false(item);
}

/* Issue 30: "put, take, ack and nack are state machines driven by the
 * event thread like every other recipe; no thread per call". 16 handles
 * wait in asynchronous takes, one more starts its takes from its own
 * take's callback, one is cancelled and one freed while waiting: the
 * process has no more threads than before, every waiting take gets one
 * item of those put, and the cancelled and freed ones end with
 * ZKR_ECANCELED.                                                        */

#define NT_TAKERS 16
#define NT_CHAIN 3

static pthread_mutex_t tk_mu = PTHREAD_MUTEX_INITIALIZER;
static zkr_item_t *tk_items[NT_TAKERS + NT_CHAIN];
static int tk_rc[NT_TAKERS + NT_CHAIN], tk_n, tk_all, tk_chain_rc;
static int tk_cancel_rc = 1000, tk_free_rc = 1000;
static zkr_workq_t *tk_chain_q;

static void tk_got(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    pthread_mutex_lock(&tk_mu);
    tk_rc[tk_n] = rc;
    tk_items[tk_n++] = it;
    tk_all = tk_n == NT_TAKERS + NT_CHAIN;
    pthread_mutex_unlock(&tk_mu);
}

static void tk_chained(int rc, zkr_item_t *it, void *data)
{
    int again;

    tk_got(rc, it, data);
    pthread_mutex_lock(&tk_mu);
    again = ++tk_chain_rc < NT_CHAIN;
    pthread_mutex_unlock(&tk_mu);
    /* the next take of the same handle, from its own completion */
    if (again && zkr_workq_take_async(tk_chain_q, -1, tk_chained, NULL) != 0) {
        pthread_mutex_lock(&tk_mu);
        tk_chain_rc = 1000;
        pthread_mutex_unlock(&tk_mu);
    }
}

static void tk_cancelled(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    zkr_item_free(it);
    pthread_mutex_lock(&tk_mu);
    tk_cancel_rc = rc;
    pthread_mutex_unlock(&tk_mu);
}

static void tk_freed(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    zkr_item_free(it);
    pthread_mutex_lock(&tk_mu);
    tk_free_rc = rc;
    pthread_mutex_unlock(&tk_mu);
}

static void test_async_takes_start_no_thread(void **state)
{
    const char *path = "/r30/take-nothreads";
    zkr_session_t *s;
    zkr_workq_t *q[NT_TAKERS], *qc, *qf, *p;
    zkr_item_t *it = NULL;
    int before, during, n, ok = 0, distinct = 1, cancel_rc, free_rc, chain;
    int64_t len = -1;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    s = open_proxied(8000);
    p = new_q(s, path, "producer");
    assert_int_equal(zkr_workq_put(p, "warm", 4, 0, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(p, 10000, &it), 0);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    for (int i = 0; i < NT_TAKERS; i++) {
        char id[16];

        snprintf(id, sizeof(id), "c%d", i);
        q[i] = new_q(s, path, id);
    }
    tk_chain_q = new_q(s, path, "chain");
    qc = new_q(s, path, "cancelled");
    qf = new_q(s, path, "freed");
    before = thread_count();
    for (int i = 0; i < NT_TAKERS; i++)
        assert_int_equal(zkr_workq_take_async(q[i], -1, tk_got, NULL), 0);
    assert_int_equal(zkr_workq_take_async(tk_chain_q, -1, tk_chained, NULL), 0);
    assert_int_equal(zkr_workq_take_async(qc, -1, tk_cancelled, NULL), 0);
    assert_int_equal(zkr_workq_take_async(qf, -1, tk_freed, NULL), 0);
    usleep(300 * 1000);
    during = thread_count();
    assert_int_equal(zkr_workq_cancel(qc), 0);
    zkr_workq_free(qf);
    for (int i = 0; i < NT_TAKERS + NT_CHAIN; i++)
        assert_int_equal(zkr_workq_put(p, "x", 1, 0, NULL, 0), 0);
    (void)wait_flag(&tk_mu, &tk_all, zkt_scaled_ms(30000));
    pthread_mutex_lock(&tk_mu);
    n = tk_n;
    chain = tk_chain_rc;
    cancel_rc = tk_cancel_rc;
    free_rc = tk_free_rc;
    pthread_mutex_unlock(&tk_mu);
    for (int i = 0; i < n; i++) {
        ok += tk_rc[i] == 0 && tk_items[i] != NULL;
        for (int j = 0; j < i; j++)
            if (tk_items[i] != NULL && tk_items[j] != NULL &&
                strcmp(zkr_item_id(tk_items[i]), zkr_item_id(tk_items[j])) == 0)
                distinct = 0;
    }
    for (int i = 0; i < n; i++) {
        if (tk_items[i] != NULL)
            assert_int_equal(zkr_item_ack(tk_items[i]), 0);
        zkr_item_free(tk_items[i]);
    }
    assert_int_equal(zkr_workq_len(p, &len), 0);
    printf("# async takes: threads %d before, %d with %d takes waiting; "
           "%d of %d taken (distinct %d), chained %d, cancelled %d, freed "
           "%d, left %lld\n",
           before, during, NT_TAKERS + 3, ok, NT_TAKERS + NT_CHAIN, distinct,
           chain, cancel_rc, free_rc, (long long)len);
    zkr_workq_cancel(qc);
    zkr_workq_free(qc);
    zkr_workq_free(tk_chain_q);
    for (int i = 0; i < NT_TAKERS; i++)
        zkr_workq_free(q[i]);
    zkr_workq_free(p);
    zkr_session_free(s);
    assert_true(during <= before);
    assert_int_equal(ok, NT_TAKERS + NT_CHAIN);
    assert_true(distinct);
    assert_int_equal(chain, NT_CHAIN);
    assert_int_equal(cancel_rc, ZKR_ECANCELED);
    assert_int_equal(free_rc, ZKR_ECANCELED);
    assert_int_equal(len, 0);
}

/* ---------------------------------------------------------------------
 * A put whose answer was lost, in a session that is not re-created
 * (no_reconnect): the session is LOST before the put could read its
 * receipt. zkr.h: ZCONNECTIONLOSS "when the answer was lost and the
 * session expired before the put could prove its outcome" (the item may
 * or may not have been put); any other code says nothing was put.     */

static pthread_mutex_t nr_mu = PTHREAD_MUTEX_INITIALIZER;
static int nr_rc = 1000, nr_done;

static void nr_put(int rc, const char *id, void *data)
{
    (void)id;
    (void)data;
    pthread_mutex_lock(&nr_mu);
    nr_rc = rc;
    nr_done = 1;
    pthread_mutex_unlock(&nr_mu);
}

static void put_lost_session_not_recreated(int async)
{
    const int tmo = 4000;
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_workq_t *q;
    int64_t len = -1;
    int rc, done = 1;

    o.no_reconnect = 1;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), tmo, &o), 0);
    q = new_q(s, async ? "/r30/norec-async" : "/r30/norec", "p");
    nr_rc = 1000;
    nr_done = 0;
    assert_int_equal(zkr_workq_put(q, "warm", 4, 0, NULL, 0), 0);
    /* The put's multi applies; its answer and everything after are lost
     * until the session is LOST. */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    if (async) {
        assert_int_equal(zkr_workq_put_async(q, "once", 4, 0, nr_put, NULL), 0);
        done = wait_flag(&nr_mu, &nr_done, zkt_scaled_ms(6 * tmo));
        pthread_mutex_lock(&nr_mu);
        rc = nr_rc;
        pthread_mutex_unlock(&nr_mu);
    } else {
        rc = zkr_workq_put(q, "once", 4, 0, NULL, 0);
    }
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    {
        zkr_session_t *cs = open_session(10000);
        zkr_workq_t *cq =
            new_q(cs, async ? "/r30/norec-async" : "/r30/norec", "c");

        assert_int_equal(zkr_workq_len(cq, &len), 0);
        zkr_workq_free(cq);
        zkr_session_free(cs);
    }
    printf("# put, answer lost, session LOST (no_reconnect): %s, %d "
           "(%s); %lld items\n",
           async ? "async" : "sync", rc, zkr_errname(rc), (long long)len);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_true(done);
    assert_int_equal(len, 2); /* it applied */
    assert_int_equal(rc, ZCONNECTIONLOSS);
}

static void test_put_answer_lost_no_reconnect(void **state)
{
    (void)state;
    put_lost_session_not_recreated(0);
}

static void test_put_async_answer_lost_no_reconnect(void **state)
{
    (void)state;
    put_lost_session_not_recreated(1);
}

/* ---------------------------------------------------------------------
 * The put as a chain of requests on the engine, under the session's
 * changes: its multi applied and its answer lost just before the session
 * expired; forked while puts wait for a connection; puts started from
 * put callbacks, the queue freed from the last one. zkr.h: exactly once,
 * "If the session changed meanwhile (the receipt went with it), the item
 * is looked for by its UUID in its bucket"; put_async's cb "will be
 * called exactly once"; a forked child frees what it inherited.        */

static pthread_mutex_t ch_mu = PTHREAD_MUTEX_INITIALIZER;
static int ch_calls, ch_ok, ch_target, ch_all;
static zkr_workq_t *ch_q;

static void ch_reset(int target)
{
    pthread_mutex_lock(&ch_mu);
    ch_calls = ch_ok = ch_all = 0;
    ch_target = target;
    pthread_mutex_unlock(&ch_mu);
}

static void ch_put(int rc, const char *id, void *data)
{
    (void)data;
    pthread_mutex_lock(&ch_mu);
    ch_calls++;
    ch_ok += rc == 0 && id != NULL;
    ch_all = ch_calls >= ch_target;
    pthread_mutex_unlock(&ch_mu);
}

/* The number of items in the queue at path, through a session of its
 * own. */
static int64_t queue_len(const char *path)
{
    zkr_session_t *cs = open_session(10000);
    zkr_workq_t *cq = new_q(cs, path, "counter");
    int64_t len = -1;

    assert_int_equal(zkr_workq_len(cq, &len), 0);
    zkr_workq_free(cq);
    zkr_session_free(cs);
    return len;
}

static void test_put_answer_lost_session_expired(void **state)
{
    const int tmo = 4000;
    zkr_session_t *s = open_proxied(tmo);
    zkr_workq_t *q = new_q(s, "/r30/expired", "p");
    int applied = 0, done, calls, ok;

    (void)state;
    ch_reset(1);
    assert_int_equal(zkr_workq_put(q, "warm", 4, 0, NULL, 0), 0);
    /* The multi applies (its item is there), its answer is lost and the
     * link goes dark; then the session expires. */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    assert_int_equal(zkr_workq_put_async(q, "once", 4, 0, ch_put, NULL), 0);
    for (int64_t end = now_ms() + zkt_scaled_ms(10000);
         now_ms() < end && !applied;) {
        applied = children("/r30/expired/q0/b0000000000") == 2;
        if (!applied)
            usleep(5 * 1000);
    }
    expire(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    /* Within the put's deadline (request timeout + session timeout). */
    done = wait_flag(&ch_mu, &ch_all, zkt_scaled_ms(4 * tmo));
    zkr_workq_free(q);
    zkr_session_free(s);
    pthread_mutex_lock(&ch_mu);
    calls = ch_calls;
    ok = ch_ok;
    pthread_mutex_unlock(&ch_mu);
    assert_true(applied);
    assert_true(done);
    assert_int_equal(calls, 1);
    assert_int_equal(ok, 1);
    assert_int_equal(queue_len("/r30/expired"), 2);
}

/* Ends a forked child: 0 if ok, else 3; by exec, as test_embed's child
 * does (the client's buffers stay behind with its threads). */
static void child_exit(int ok)
{
    execl("/bin/sh", "sh", "-c", ok ? "exit 0" : "exit 3", (char *)NULL);
    _exit(ok ? 0 : 3);
}

#define FORK_PUTS 10

static void test_put_async_fork_child(void **state)
{
    const int tmo = 4000;
    zkr_session_t *s = open_proxied(tmo);
    zkr_workq_t *q = new_q(s, "/r30/fork", "p");
    int st = -1, calls, ok;
    pid_t pid;

    (void)state;
    ch_reset(FORK_PUTS);
    assert_int_equal(zkr_workq_put(q, "warm", 4, 0, NULL, 0), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    for (int i = 0; i < FORK_PUTS; i++)
        assert_int_equal(zkr_workq_put_async(q, "x", 1, 0, ch_put, NULL), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The child's copies of the puts end with the fork (none of its
         * callbacks run): its free of the queue does not wait for them. */
        signal(SIGALRM, SIG_DFL);
        alarm(10);
        zkr_workq_free(q);
        child_exit(zkr_session_free(s) == 0);
    }
    assert_int_equal(zkt_wait_pid(pid, zkt_scaled_ms(20000), &st), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    (void)wait_flag(&ch_mu, &ch_all, zkt_scaled_ms(4 * tmo));
    zkr_workq_free(q);
    zkr_session_free(s);
    pthread_mutex_lock(&ch_mu);
    calls = ch_calls;
    ok = ch_ok;
    pthread_mutex_unlock(&ch_mu);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* The parent's puts: each once, each put once. */
    assert_int_equal(calls, FORK_PUTS);
    assert_int_equal(ok, FORK_PUTS);
    assert_int_equal(queue_len("/r30/fork"), 1 + FORK_PUTS);
}

#define CB_CHAINS 4
#define CB_DEPTH 6

/* Each put's callback puts the next one (CB_DEPTH in a row); the last
 * callback frees the queue. */
static void cb_put(int rc, const char *id, void *data)
{
    int depth = (int)(intptr_t)data, last;

    ch_put(rc, id, NULL);
    if (depth + 1 < CB_DEPTH) {
        if (zkr_workq_put_async(ch_q, "y", 1, 0, cb_put,
                                (void *)(intptr_t)(depth + 1)) != 0)
            ch_put(-1, NULL, NULL); /* counted, as failed */
        return;
    }
    pthread_mutex_lock(&ch_mu);
    last = ch_calls == ch_target;
    pthread_mutex_unlock(&ch_mu);
    if (last) {
        zkr_workq_free(ch_q);
        pthread_mutex_lock(&ch_mu);
        ch_q = NULL;
        pthread_mutex_unlock(&ch_mu);
    }
}

static void test_put_async_from_callback(void **state)
{
    zkr_session_t *s = open_proxied(4000);
    int calls, ok, freed;

    (void)state;
    ch_reset(CB_CHAINS * CB_DEPTH);
    ch_q = new_q(s, "/r30/cb", "p");
    for (int i = 0; i < CB_CHAINS; i++)
        assert_int_equal(zkr_workq_put_async(ch_q, "y", 1, 0, cb_put, NULL), 0);
    (void)wait_flag(&ch_mu, &ch_all, zkt_scaled_ms(20000));
    for (int64_t end = now_ms() + zkt_scaled_ms(5000); now_ms() < end;) {
        pthread_mutex_lock(&ch_mu);
        freed = ch_q == NULL;
        pthread_mutex_unlock(&ch_mu);
        if (freed)
            break;
        usleep(10 * 1000);
    }
    pthread_mutex_lock(&ch_mu);
    calls = ch_calls;
    ok = ch_ok;
    freed = ch_q == NULL;
    pthread_mutex_unlock(&ch_mu);
    zkr_session_free(s);
    assert_int_equal(calls, CB_CHAINS * CB_DEPTH);
    assert_int_equal(ok, CB_CHAINS * CB_DEPTH);
    assert_true(freed);
    assert_int_equal(queue_len("/r30/cb"), CB_CHAINS * CB_DEPTH);
}

/* zkr.h: "ZCONNECTIONLOSS comes once the session's request timeout passed
 * without an answer": a put parked while the connection is black-holed
 * (a chain waiting to be woken, no thread) ends by its deadline, request
 * timeout plus session timeout, woken by the timer; it never hangs. */
static void test_put_parked_ends_by_deadline(void **state)
{
    const int tmo = 4000;
    zkr_session_t *s = open_proxied(tmo);
    zkr_workq_t *q = new_q(s, "/r30/parked", "p");
    int64_t t0, took;
    int rc;

    (void)state;
    assert_int_equal(zkr_workq_put(q, "warm", 4, 0, NULL, 0), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    t0 = now_ms();
    rc = zkr_workq_put(q, "x", 1, 0, NULL, 0);
    took = now_ms() - t0;
    printf("# parked put: %d after %lld ms (session timeout %d)\n", rc,
           (long long)took, tmo);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
    assert_int_equal(rc, ZCONNECTIONLOSS);
    /* The deadline is at most twice the session timeout; a second more
     * for the timer's wake and a busy machine. */
    assert_true(took <= 2 * tmo + zkt_scaled_ms(1000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_r1_put_reply_lost_item_consumed),
        cmocka_unit_test(test_r2_lost_ack_answer_claim_deleted),
        cmocka_unit_test(test_r3_level_written),
        cmocka_unit_test(test_r3_tail_bucket_deleted),
        cmocka_unit_test(test_r4_cancel_while_disconnected),
        cmocka_unit_test(test_r5_write_counts_as_delivery),
        cmocka_unit_test(test_r6_stalled_head_of_line),
        cmocka_unit_test(test_b2_put_reply_lost_receipt_deleted),
        cmocka_unit_test(test_b1_nack_back_tail_sealed),
        cmocka_unit_test(test_b1_nack_back_tail_missing),
        cmocka_unit_test(test_b7_free_during_ack),
        cmocka_unit_test(test_c1_free_during_sync_nack_repair),
        cmocka_unit_test(test_c2_nack_back_repair_behind_moved_tail),
        cmocka_unit_test(test_buckets_made_ahead_by_another_client),
        cmocka_unit_test(test_nack_back_seal_bucket_made_ahead),
        cmocka_unit_test(test_foreign_write_to_claimed_item),
        cmocka_unit_test(test_foreign_child_under_item),
        cmocka_unit_test(test_applied_ack_answer_lost_session_expired),
        cmocka_unit_test(test_foreign_child_long_name),
        cmocka_unit_test(test_ephemeral_bucket_made_ahead),
        cmocka_unit_test(test_nack_back_ephemeral_tail),
        cmocka_unit_test(test_async_puts_start_no_thread),
        cmocka_unit_test(test_async_takes_start_no_thread),
        cmocka_unit_test(test_oversized_item_skipped),
        cmocka_unit_test(test_dead_letter_deep_path),
        cmocka_unit_test(test_take_completion_after_session_lost),
        cmocka_unit_test(test_put_parked_ends_by_deadline),
        cmocka_unit_test(test_put_answer_lost_no_reconnect),
        cmocka_unit_test(test_put_async_answer_lost_no_reconnect),
        cmocka_unit_test(test_put_answer_lost_session_expired),
        cmocka_unit_test(test_put_async_fork_child),
        cmocka_unit_test(test_put_async_from_callback),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq_faults", tests, proxy_setup,
                                       proxy_teardown);
}
