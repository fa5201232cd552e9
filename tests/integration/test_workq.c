/* Integration tests of the work queue (issue 17, docs/design/workq.md)
 * against a real ZooKeeper server started by the harness. Oracles come
 * from the protocol: FIFO within a level, levels in order, waiting
 * consumers served in the order they began waiting, a claim that commits
 * only while it is ours, exactly-once puts, no listing near 1 MB. */
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

static zkr_workq_t *new_q(zkr_session_t *s, const char *path, const char *id)
{
    zkr_workq_t *q = NULL;

    assert_int_equal(zkr_workq_new(&q, s, path, id, NULL), 0);
    return q;
}

static void put_str(zkr_workq_t *q, const char *v, int level)
{
    char id[ZKR_WORKQ_ID_MAX];

    assert_int_equal(zkr_workq_put(q, v, strlen(v), level, id, sizeof(id)), 0);
    assert_non_null(strstr(id, "/i-0-"));
}

/* Takes one item and returns its data as a number. */
static int take_num(zkr_workq_t *q, int timeout_ms, zkr_item_t **out)
{
    size_t len;
    const char *d;

    assert_int_equal(zkr_workq_take(q, timeout_ms, out), 0);
    d = zkr_item_data(*out, &len);
    return atoi(d);
}

/* Items under the queue path (every bucket of every level). */
static int64_t queue_len(zkr_workq_t *q)
{
    int64_t n = -1;

    assert_int_equal(zkr_workq_len(q, &n), 0);
    return n;
}

/* ------------------------------------------------------------ basics */

static void test_put_take_ack(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/basic", "c1");
    zkr_item_t *it = NULL;
    int64_t tok = 0, tok2 = 0;
    size_t len;

    (void)state;
    assert_int_equal(queue_len(q), 0);
    assert_int_equal(zkr_workq_take(q, 0, &it), ZKR_ETIMEDOUT);
    assert_null(it);
    put_str(q, "hello", ZKR_WORKQ_LEVEL_DEFAULT);
    assert_int_equal(queue_len(q), 1);
    assert_int_equal(zkr_workq_take(q, 5000, &it), 0);
    assert_string_equal(zkr_item_data(it, &len), "hello");
    assert_int_equal(len, 5);
    assert_int_equal(zkr_item_deliveries(it), 1);
    assert_int_equal(zkr_item_level(it), 1);
    assert_int_equal(zkr_item_state(it), ZKR_LOCK_HELD);
    assert_int_equal(zkr_item_token(it, &tok), 0);
    assert_true(tok > 0);
    assert_true(zkr_item_valid_ms(it) > 0);
    {
        zkr_sequencer_t sq;
        assert_int_equal(zkr_item_sequencer(it, &sq), 0);
        assert_int_equal(sq.mode, 'x');
        assert_int_equal(sq.token, tok);
        assert_int_equal(zkr_sequencer_check(s, &sq), 0);
    }
    /* claimed: nothing else to take, but still counted */
    assert_int_equal(queue_len(q), 1);
    {
        zkr_workq_t *q2 = new_q(s, "/t/wq/basic", "c2");
        zkr_item_t *none = NULL;
        assert_int_equal(zkr_workq_take(q2, 300, &none), ZKR_ETIMEDOUT);
        zkr_workq_free(q2);
    }
    assert_int_equal(zkr_item_ack(it), 0);
    assert_int_equal(zkr_item_state(it), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_item_ack(it), ZKR_ESTATE);
    assert_int_equal(zkr_item_token(it, &tok2), ZKR_ENOTHELD);
    zkr_item_free(it);
    assert_int_equal(queue_len(q), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* -------------------------------------------------------------- FIFO */

struct consumer {
    zkr_workq_t *q;
    int n;
    int got[400];
};

static void *consume(void *arg)
{
    struct consumer *c = arg;
    zkr_item_t *it;

    while (zkr_workq_take(c->q, 1500, &it) == 0) {
        c->got[c->n++] = atoi(zkr_item_data(it, NULL));
        if (zkr_item_ack(it) != 0)
            c->n = -1000;
        zkr_item_free(it);
    }
    return NULL;
}

/* 3 consumers drain 150 items: each consumer's items come in put order,
 * and together they are every item once. */
static void test_fifo_three_consumers(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *p = new_q(s, "/t/wq/fifo", "p");
    struct consumer c[3];
    pthread_t t[3];
    int seen[150] = {0}, total = 0;

    (void)state;
    for (int i = 0; i < 150; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%d", i);
        put_str(p, v, 1);
    }
    for (int k = 0; k < 3; k++) {
        zkr_session_t *cs = s;
        memset(&c[k], 0, sizeof(c[k]));
        c[k].q = new_q(cs, "/t/wq/fifo", NULL);
        assert_int_equal(pthread_create(&t[k], NULL, consume, &c[k]), 0);
    }
    for (int k = 0; k < 3; k++) {
        pthread_join(t[k], NULL);
        assert_true(c[k].n >= 0);
        for (int i = 1; i < c[k].n; i++)
            assert_true(c[k].got[i - 1] < c[k].got[i]);
        for (int i = 0; i < c[k].n; i++)
            seen[c[k].got[i]]++;
        total += c[k].n;
        zkr_workq_free(c[k].q);
    }
    assert_int_equal(total, 150);
    for (int i = 0; i < 150; i++)
        assert_int_equal(seen[i], 1);
    assert_int_equal(queue_len(p), 0);
    zkr_workq_free(p);
    zkr_session_free(s);
}

/* One consumer takes level 0 first, FIFO within each level. */
static void test_levels(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/levels", NULL);
    const char *put[] = {"a", "b", "c", "d", "e", "f"};
    int lv[] = {2, 1, 0, 3, 1, 0};
    const char *want[] = {"c", "f", "b", "e", "a", "d"};
    int wlv[] = {0, 0, 1, 1, 2, 3};
    zkr_item_t *it;

    (void)state;
    for (int i = 0; i < 6; i++)
        put_str(q, put[i], lv[i]);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
        assert_string_equal(zkr_item_data(it, NULL), want[i]);
        assert_int_equal(zkr_item_level(it), wlv[i]);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    assert_int_equal(zkr_workq_put(q, "x", 1, 4, NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_put(q, "x", 1, -1, NULL, 0), ZBADARGUMENTS);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* A consumer goes on from its last claim (its cursor) only while no
 * item came at a higher level: one put there after its listing is taken
 * next, whether that level's node was missing (told by PATH's watch) or
 * there and empty (told by its tail bucket's watch). */
static void test_levels_while_taking(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/lvcur", NULL);
    zkr_workq_t *p = new_q(ps, "/t/wq/lvcur", "p");
    const char *want[] = {"a", "x", "b", "y", "c"};
    zkr_item_t *it;

    (void)state;
    put_str(p, "a", 3);
    put_str(p, "b", 3);
    put_str(p, "c", 3);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
        assert_string_equal(zkr_item_data(it, NULL), want[i]);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        if (i == 0) /* q1 is not there yet */
            put_str(p, "x", 1);
        if (i == 2) /* q1 is there, its tail empty, listed with "b" */
            put_str(p, "y", 1);
    }
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* The server's count of the requests it received so far (mntr). */
static long server_requests(void)
{
    char *m = zkt_4lw(server, "mntr"), *p;
    long n = -1;

    if (m != NULL && (p = strstr(m, "zk_packets_received")) != NULL)
        n = atol(p + strlen("zk_packets_received"));
    free(m);
    return n;
}

/* Take+ack with items waiting costs at most 6 requests per item (issue
 * 34; docs/design/workq.md, 3): a get, the claim's multi and its listing,
 * the ack's multi and its receipt's delete. Counted by the server; the
 * session's heartbeats and the 4lw commands are a few more. */
static void test_requests_per_item(void **state)
{
    enum { N = 200 };
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/req", NULL);
    zkr_item_t *it;
    long r0, r1;

    (void)state;
    for (int i = 0; i < N; i++) {
        char v[16];

        snprintf(v, sizeof(v), "%d", i);
        put_str(q, v, 1);
    }
    assert_int_equal(take_num(q, 2000, &it), 0); /* the first listing */
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    r0 = server_requests();
    for (int i = 1; i < N; i++) {
        assert_int_equal(take_num(q, 2000, &it), i);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    r1 = server_requests();
    print_message("# %ld requests for %d take+ack\n", r1 - r0, N - 1);
    assert_true(r0 > 0);
    assert_true(r1 - r0 <= 6 * (N - 1));
    /* The acks' receipts are deleted 16 at a time as they come (kept by
     * the handle, they would number 64 here), the rest with the handle. */
    print_message("# %d receipts left\n", children("/t/wq/req/receipts"));
    assert_true(children("/t/wq/req/receipts") <= 16);
    zkr_workq_free(q);
    assert_true(ZKT_WAIT_UNTIL(children("/t/wq/req/receipts") == 0, 10000));
    zkr_session_free(s);
}

/* A batch claims up to max items in put order, each with its own claim
 * and token, acked, nacked or freed on its own; it waits for the first
 * item only. */
static atomic_int batch_rc = 1, batch_n;
static zkr_item_t *batch_items[8];

static void batch_taken(int rc, zkr_item_t **items, int count, void *data)
{
    (void)data;
    for (int i = 0; i < count && i < 8; i++)
        batch_items[i] = items[i]; /* the array is valid during the call */
    batch_n = count;
    batch_rc = rc;
}

static void test_take_batch(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/batch", NULL);
    zkr_workq_t *p = new_q(ps, "/t/wq/batch", "p");
    zkr_item_t *it[16];
    zkr_sequencer_t seq;
    int64_t last = 0;
    int n = -1;

    (void)state;
    for (int i = 0; i < 10; i++) {
        char v[16];

        snprintf(v, sizeof(v), "%d", i);
        put_str(p, v, 1);
    }
    assert_int_equal(zkr_workq_take_batch(q, 4, 2000, it, &n), 0);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(atoi(zkr_item_data(it[i], NULL)), i);
        assert_int_equal(zkr_item_deliveries(it[i]), 1);
        assert_int_equal(zkr_item_state(it[i]), ZKR_LOCK_HELD);
        assert_int_equal(zkr_item_sequencer(it[i], &seq), 0);
        assert_true(seq.token > last); /* a claim of its own each */
        last = seq.token;
    }
    assert_int_equal(zkr_item_ack(it[0]), 0);
    assert_int_equal(zkr_item_ack(it[1]), 0);
    assert_int_equal(zkr_item_nack(it[2], ZKR_NACK_FRONT), 0);
    for (int i = 0; i < 4; i++)
        zkr_item_free(it[i]); /* it[3] held: given back */
    /* The two given back first, in put order, then the rest. */
    assert_int_equal(zkr_workq_take_batch(q, 16, 2000, it, &n), 0);
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++) {
        assert_int_equal(atoi(zkr_item_data(it[i], NULL)), i + 2);
        assert_int_equal(zkr_item_deliveries(it[i]), i < 2 ? 2 : 1);
        assert_int_equal(zkr_item_ack(it[i]), 0);
        zkr_item_free(it[i]);
    }
    assert_null(it[8]);
    assert_int_equal(queue_len(q), 0);
    assert_int_equal(zkr_workq_take_batch(q, 4, 0, it, &n), ZKR_ETIMEDOUT);
    assert_int_equal(n, 0);
    assert_int_equal(zkr_workq_take_batch(q, 0, 0, it, &n), ZBADARGUMENTS);
    assert_int_equal(
        zkr_workq_take_batch(q, ZKR_WORKQ_BATCH_MAX + 1, 0, it, &n),
        ZBADARGUMENTS);
    assert_int_equal(zkr_workq_take_batch_async(q, 0, 0, batch_taken, NULL),
                     ZBADARGUMENTS);
    /* Waiting for the first item only: one put ends a batch of 5. */
    assert_int_equal(zkr_workq_take_batch_async(q, 5, 20000, batch_taken, NULL),
                     0);
    assert_true(ZKT_WAIT_UNTIL(children("/t/wq/batch/consumers") == 1, 5000));
    put_str(p, "42", 1);
    assert_true(ZKT_WAIT_UNTIL(batch_rc != 1, 20000));
    assert_int_equal(batch_rc, 0);
    assert_int_equal(batch_n, 1);
    assert_string_equal(zkr_item_data(batch_items[0], NULL), "42");
    assert_int_equal(zkr_item_ack(batch_items[0]), 0);
    zkr_item_free(batch_items[0]);
    assert_int_equal(queue_len(q), 0);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* ---------------------------------------------------------- fairness */

static atomic_int fair_order[64], fair_n;
static pthread_mutex_t fair_mu = PTHREAD_MUTEX_INITIALIZER;

static atomic_int acked_bad;

static void acked(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    if (rc != 0)
        acked_bad = rc;
    zkr_item_free(it); /* from its own completion */
}

static void fair_taken(int rc, zkr_item_t *it, void *data)
{
    pthread_mutex_lock(&fair_mu);
    if (rc == 0) {
        if (fair_n < 64)
            fair_order[fair_n] = (int)(intptr_t)data;
        fair_n++;
        if (zkr_item_ack_async(it, acked, NULL) != 0)
            acked_bad = -1;
    }
    pthread_mutex_unlock(&fair_mu);
}

/* Consumers that began waiting in order 0..4 (each in its own session)
 * get the items in that order, one each. */
static void test_fairness(void **state)
{
    zkr_session_t *s[5];
    zkr_workq_t *q[5], *p;
    zkr_session_t *ps = open_session(10000);

    (void)state;
    fair_n = 0;
    p = new_q(ps, "/t/wq/fair", "p");
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "c%d", i);
        s[i] = open_session(10000);
        q[i] = new_q(s[i], "/t/wq/fair", id);
        assert_int_equal(
            zkr_workq_take_async(q[i], 20000, fair_taken, (void *)(intptr_t)i),
            0);
        /* in line before the next one begins */
        assert_true(
            ZKT_WAIT_UNTIL(children("/t/wq/fair/consumers") == i + 1, 5000));
    }
    for (int i = 0; i < 5; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%d", i);
        put_str(p, v, 1);
    }
    assert_true(ZKT_WAIT_UNTIL(fair_n == 5, 20000));
    for (int i = 0; i < 5; i++)
        assert_int_equal(fair_order[i], i);
    for (int i = 0; i < 5; i++) {
        zkr_workq_free(q[i]);
        zkr_session_free(s[i]);
    }
    zkr_workq_free(p);
    zkr_session_free(ps);
}

/* ------------------------------------------------------------ faults */

/* A consumer whose session ends mid-item: the item is delivered again,
 * with deliveries 2; the dead consumer's ack is ESTALE, the other's
 * commits, and the item is gone: completed once. */
static void test_consumer_expired(void **state)
{
    zkr_session_t *a = open_session(4000), *b = open_session(10000);
    zkr_workq_t *qa = new_q(a, "/t/wq/expire", "a"),
                *qb = new_q(b, "/t/wq/expire", "b");
    zkr_item_t *ia, *ib;
    int64_t ta = 0, tb = 0;

    (void)state;
    put_str(qa, "job", 1);
    assert_int_equal(zkr_workq_take(qa, 5000, &ia), 0);
    assert_int_equal(zkr_item_deliveries(ia), 1);
    assert_int_equal(zkr_item_token(ia, &ta), 0);
    expire(a);
    assert_int_equal(zkr_workq_take(qb, 20000, &ib), 0);
    assert_int_equal(zkr_item_deliveries(ib), 2);
    assert_string_equal(zkr_item_id(ib), zkr_item_id(ia));
    assert_int_equal(zkr_item_token(ib, &tb), 0);
    assert_true(tb > ta);
    assert_int_equal(zkr_item_ack(ia), ZKR_ESTALE);
    assert_int_equal(zkr_item_ack(ib), 0);
    assert_int_equal(queue_len(qb), 0);
    zkr_item_free(ia);
    zkr_item_free(ib);
    zkr_workq_free(qa);
    zkr_workq_free(qb);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* The claim deleted behind the consumer's back (an operator), another
 * consumer takes the item: the first one's ack and nack are ESTALE and
 * change nothing. */
static void test_claim_deleted(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_workq_t *qa = new_q(a, "/t/wq/forced", "a"),
                *qb = new_q(b, "/t/wq/forced", "b");
    zkr_item_t *ia, *ib;
    char node[600];
    struct String_vector v = {0, NULL};

    (void)state;
    put_str(qa, "job", 1);
    assert_int_equal(zkr_workq_take(qa, 5000, &ia), 0);
    snprintf(node, sizeof(node), "/t/wq/forced/%s", zkr_item_id(ia));
    assert_int_equal(zoo_get_children(raw, node, 0, &v), ZOK);
    assert_int_equal(v.count, 1);
    strcat(node, "/");
    strcat(node, v.data[0]);
    deallocate_String_vector(&v);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_int_equal(zkr_workq_take(qb, 10000, &ib), 0);
    assert_int_equal(zkr_item_deliveries(ib), 2);
    assert_int_equal(zkr_item_nack(ia, ZKR_NACK_BACK), ZKR_ESTALE);
    assert_int_equal(zkr_item_ack(ia), ZKR_ESTALE);
    assert_int_equal(zkr_item_state(ib), ZKR_LOCK_HELD);
    assert_int_equal(zkr_item_ack(ib), 0);
    assert_int_equal(queue_len(qa), 0);
    zkr_item_free(ia);
    zkr_item_free(ib);
    zkr_workq_free(qa);
    zkr_workq_free(qb);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* Nack to the front: the next take gets it again (deliveries 2); to the
 * back: after the items put since (deliveries kept, then 3). */
static void test_nack(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/nack", NULL);
    zkr_item_t *it;

    (void)state;
    put_str(q, "1", 1);
    put_str(q, "2", 1);
    assert_int_equal(take_num(q, 2000, &it), 1);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_FRONT), 0);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_FRONT), ZKR_ESTATE);
    zkr_item_free(it);
    assert_int_equal(take_num(q, 2000, &it), 1);
    assert_int_equal(zkr_item_deliveries(it), 2);
    assert_int_equal(zkr_item_nack(it, 7), ZBADARGUMENTS);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_BACK), 0);
    zkr_item_free(it);
    assert_int_equal(queue_len(q), 2);
    assert_int_equal(take_num(q, 2000, &it), 2);
    assert_int_equal(zkr_item_deliveries(it), 1);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    assert_int_equal(take_num(q, 2000, &it), 1);
    assert_int_equal(zkr_item_deliveries(it), 3);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    /* freed while held: given back to the front */
    put_str(q, "9", 1);
    assert_int_equal(take_num(q, 2000, &it), 9);
    zkr_item_free(it);
    assert_int_equal(take_num(q, 5000, &it), 9);
    assert_int_equal(zkr_item_deliveries(it), 2);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    assert_int_equal(queue_len(q), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* After N deliveries an item that comes back goes to the dead letters. */
static void test_dead_letter(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/dead", NULL);
    zkr_item_t *it;
    char name[200], path[300], buf[16];
    int len = sizeof(buf);

    (void)state;
    assert_int_equal(zkr_workq_set_dead_letter(q, -1, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_set_dead_letter(q, 2, "bad"), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_set_dead_letter(q, 2, NULL), 0);
    put_str(q, "poison", 1);
    put_str(q, "ok", 1);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    snprintf(name, sizeof(name), "%s", strrchr(zkr_item_id(it), '/') + 1);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_FRONT), 0);
    zkr_item_free(it);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    assert_int_equal(zkr_item_deliveries(it), 2);
    assert_int_equal(zkr_item_nack(it, ZKR_NACK_FRONT), 0);
    zkr_item_free(it);
    /* delivered twice: the next take moves it and gets "ok" */
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    assert_string_equal(zkr_item_data(it, NULL), "ok");
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    snprintf(path, sizeof(path), "/t/wq/dead/dead/%s", name);
    assert_int_equal(zoo_get(raw, path, 0, buf, &len, NULL), ZOK);
    assert_int_equal(len, 6);
    assert_memory_equal(buf, "poison", 6);
    assert_int_equal(queue_len(q), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* -------------------------------------------------------- watches */

/* Takes that waited (watching every place an item can come from) and
 * then timed out or were canceled leave no watch of theirs behind; the
 * handle's cursor (child watches on PATH, q<L> and the tail bucket) goes
 * with the handle: the session's client has none left on those paths
 * (ZooKeeper's wchs counts only data watches, so the client is asked). */
static atomic_int leak_done, leak_rc;

static void leak_taken(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    zkr_item_free(it);
    leak_rc = rc;
    leak_done = 1;
}

static void test_no_leaked_watch(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/leak", NULL);
    zkr_item_t *it = NULL;
    char ipath[300];
    const char *paths[4] = {"/t/wq/leak", "/t/wq/leak/q1",
                            "/t/wq/leak/q1/b0000000000", ipath};
    long w0;

    (void)state;
    put_str(q, "x", 1);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0); /* claimed: watched */
    snprintf(ipath, sizeof(ipath), "/t/wq/leak/%s", zkr_item_id(it));
    zkt_sleep_ms(300); /* the claim's own watch (the engine's, kept) */
    w0 = zkt_total_watches(server);
    for (int i = 0; i < 4; i++) {
        leak_done = 0;
        assert_int_equal(
            zkr_workq_take_async(q, i % 2 ? 20000 : 1500, leak_taken, NULL), 0);
        zkt_sleep_ms(1000); /* waiting, watching */
        if (i % 2)
            assert_int_equal(zkr_workq_cancel(q), 0);
        assert_true(ZKT_WAIT_UNTIL(leak_done, 20000));
        assert_int_equal(leak_rc, i % 2 ? ZKR_ECANCELED : ZKR_ETIMEDOUT);
    }
    assert_int_equal(zkr_workq_cancel(q), ZKR_ESTATE);
    assert_true(ZKT_WAIT_UNTIL(children("/t/wq/leak/consumers") == 0, 5000));
    /* The handle's own cursor watches go with it. Its removals are sent
     * at once, so the server has them before the requests below, which
     * come after them on the same connection. (zkr_session_handle() is
     * called only now: once the application may watch on the handle, zkr
     * removes its watches on the client's side only.) */
    zkr_workq_free(q);
    q = NULL;
    for (int i = 0; i < 4; i++) {
        int rc = zoo_remove_all_watches(zkr_session_handle(s), paths[i],
                                        ZWATCHTYPE_ANY, 0);
        if (rc != ZNOWATCHER)
            print_message("a watch left on %s (%d)\n", paths[i], rc);
        assert_int_equal(rc, ZNOWATCHER);
    }
    assert_int_equal(zkt_total_watches(server), w0);
    zkr_item_free(it);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* 30 idle consumers (each in line, each its own session): a put wakes
 * O(1) of them. Watch events over the sessions for 10 puts taken one by
 * one. */
static uint64_t events_of(zkr_session_t **ss, int n)
{
    uint64_t e = 0;

    for (int i = 0; i < n; i++)
        e += zkr_session_counter(ss[i], ZKR_COUNTER_WATCH_EVENTS) +
             zkr_session_counter(ss[i], ZKR_COUNTER_HOLDER_EVENTS);
    return e;
}

static void test_idle_consumers_o1(void **state)
{
    enum { N = 30, PUTS = 10 };
    zkr_session_t *cs[N], *ps = open_session(10000);
    zkr_workq_t *q[N], *p = new_q(ps, "/t/wq/herd", "p");
    uint64_t e0, e1;

    (void)state;
    for (int i = 0; i < N; i++) {
        /* each in its own session: no watch of one is another's */
        cs[i] = open_session(10000);
        q[i] = new_q(cs[i], "/t/wq/herd", NULL);
        assert_int_equal(
            zkr_workq_take_async(q[i], 60000, fair_taken, (void *)(intptr_t)0),
            0);
    }
    fair_n = 0;
    assert_true(ZKT_WAIT_UNTIL(children("/t/wq/herd/consumers") == N, 10000));
    zkt_sleep_ms(300);
    e0 = events_of(cs, N);
    for (int i = 0; i < PUTS; i++) {
        int n0 = fair_n;
        put_str(p, "x", 1);
        assert_true(ZKT_WAIT_UNTIL(fair_n == n0 + 1, 10000));
    }
    zkt_sleep_ms(300);
    e1 = events_of(cs, N);
    print_message("# %llu watch events for %d puts, %d idle consumers\n",
                  (unsigned long long)(e1 - e0), PUTS, N);
    /* per put: the new item's, the next in line's, the claim's own (the
     * idle consumers' scans before the line leave no watch behind) */
    assert_true(e1 - e0 <= (uint64_t)PUTS * 4);
    for (int i = 0; i < N; i++) {
        zkr_workq_free(q[i]);
        zkr_session_free(cs[i]);
    }
    zkr_workq_free(p);
    zkr_session_free(ps);
}

/* ------------------------------------------------------------- scale */

/* 3,000 items in buckets of 64: put and drained in order; no listing
 * of a bucket holds more than 64 + producers names. */
static void test_buckets(void **state)
{
    enum { N = 3000, B = 64 };
    zkr_session_t *s = open_session(15000);
    zkr_workq_t *q;
    zkr_item_t *it;
    struct String_vector v = {0, NULL};
    long largest = 0, names = 0;
    int64_t t0 = zkt_now_ms();

    (void)state;
    assert_int_equal(zoo_create(raw, "/t/wq/big", "zkr-workq 1 bucket=64", 21,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    q = new_q(s, "/t/wq/big", NULL);
    for (int i = 0; i < N; i++) {
        char d[16];
        snprintf(d, sizeof(d), "%d", i);
        put_str(q, d, 1);
    }
    assert_int_equal(queue_len(q), N);
    /* every bucket listing, as a take would read it */
    assert_int_equal(zoo_get_children(raw, "/t/wq/big/q1", 0, &v), ZOK);
    assert_true(v.count >= N / (B + 1));
    for (int i = 0; i < v.count; i++) {
        char bp[300];
        struct String_vector iv = {0, NULL};
        long bytes = 4;

        snprintf(bp, sizeof(bp), "/t/wq/big/q1/%s", v.data[i]);
        assert_int_equal(zoo_get_children(raw, bp, 0, &iv), ZOK);
        for (int k = 0; k < iv.count; k++)
            bytes += 4 + (long)strlen(iv.data[k]);
        if (bytes > largest)
            largest = bytes, names = iv.count;
        assert_true(iv.count <= B + 1);
        deallocate_String_vector(&iv);
    }
    print_message("# %d items, %d buckets, largest listing %ld bytes (%ld "
                  "names), put in %lld ms\n",
                  N, v.count, largest, names, (long long)(zkt_now_ms() - t0));
    deallocate_String_vector(&v);
    t0 = zkt_now_ms();
    for (int i = 0; i < N; i++) {
        assert_int_equal(take_num(q, 5000, &it), i);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    }
    print_message("# drained in %lld ms\n", (long long)(zkt_now_ms() - t0));
    assert_int_equal(queue_len(q), 0);
    /* drained sealed buckets are deleted by the scans */
    assert_true(children("/t/wq/big/q1") < 10);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* ------------------------------------------------------------ proxy */

/* The put's answer is lost (the proxy drops it): still exactly one item. */
static void test_reply_lost_put(void **state)
{
    zkr_session_t *s = open_proxied(10000);
    zkr_workq_t *q = new_q(s, "/t/wq/lost", NULL);
    char id[ZKR_WORKQ_ID_MAX];

    (void)state;
    put_str(q, "warm", 1); /* the queue's nodes exist */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zkr_workq_put(q, "once", 4, 1, id, sizeof(id)), 0);
    assert_int_equal(queue_len(q), 2);
    {
        zkr_item_info_t *v = NULL;
        int n = 0;
        assert_int_equal(zkr_workq_items(q, 10, &v, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[1].id, id);
        assert_int_equal(v[1].size, 4);
        assert_int_equal(v[1].deliveries, 0);
        assert_int_equal(v[1].claimed, 0);
        zkr_item_infos_free(v, n);
    }
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* ----------------------------------------------------------- misuse */

static void take_then_free(int rc, zkr_item_t *it, void *data)
{
    zkr_workq_t *q = data;

    if (rc == 0)
        zkr_item_free(it);
    zkr_workq_free(q); /* from its own completion: no hang */
    fair_n = 100 + rc;
}

static void test_bad_input_and_free(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q = NULL;
    zkr_item_t *it = NULL;
    char id[10];
    int64_t n;

    (void)state;
    assert_int_equal(zkr_workq_new(&q, s, "rel", NULL, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_new(&q, NULL, "/t/x", NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_workq_new(NULL, s, "/t/x", NULL, NULL), ZBADARGUMENTS);
    q = new_q(s, "/t/wq/bad", NULL);
    assert_int_equal(zkr_workq_put(NULL, "x", 1, 1, NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_put(q, NULL, 1, 1, NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_put(q, "x", ZKR_WORKQ_DATA_MAX + 1, 1, NULL, 0),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_workq_put(q, "x", 1, 1, id, sizeof(id)),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_workq_take(q, -2, &it), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_take(NULL, 0, &it), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_len(NULL, &n), ZBADARGUMENTS);
    assert_int_equal(zkr_workq_cancel(q), ZKR_ESTATE);
    assert_int_equal(zkr_item_ack(NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_item_deliveries(NULL), 0);
    assert_int_equal(zkr_item_level(NULL), -1);
    assert_string_equal(zkr_item_id(NULL), "");
    assert_null(zkr_item_data(NULL, NULL));
    /* a second take on the handle while one waits; cancel ends it */
    fair_n = 0;
    assert_int_equal(zkr_workq_take_async(q, -1, fair_taken, NULL), 0);
    assert_int_equal(zkr_workq_take(q, 0, &it), ZKR_EALREADY);
    zkt_sleep_ms(200);
    assert_int_equal(zkr_workq_cancel(q), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_workq_cancel(q) == ZKR_ESTATE, 5000));
    /* free from the take's own completion */
    fair_n = 0;
    put_str(q, "y", 1);
    assert_int_equal(zkr_workq_take_async(q, 5000, take_then_free, q), 0);
    assert_true(ZKT_WAIT_UNTIL(fair_n >= 100, 10000));
    assert_int_equal(fair_n, 100);
    zkr_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_take_ack),
        cmocka_unit_test(test_fifo_three_consumers),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_levels_while_taking),
        cmocka_unit_test(test_requests_per_item),
        cmocka_unit_test(test_take_batch),
        cmocka_unit_test(test_fairness),
        cmocka_unit_test(test_consumer_expired),
        cmocka_unit_test(test_claim_deleted),
        cmocka_unit_test(test_nack),
        cmocka_unit_test(test_dead_letter),
        cmocka_unit_test(test_no_leaked_watch),
        cmocka_unit_test(test_idle_consumers_o1),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_reply_lost_put),
        cmocka_unit_test(test_bad_input_and_free),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq", tests, proxy_setup,
                                       proxy_teardown);
}
