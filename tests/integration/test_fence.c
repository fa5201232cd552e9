/* Integration tests of fencing against a real ZooKeeper server:
 * sequencer validity, writes guarded by a lock, and the SQLite example's
 * fenced update. */
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

#include <cmocka.h>

#include "filter.h"

#include "server_test.h"

/* Valid while held; stale after release, after expiry, and after the same
 * node name was re-created by another session. Checked from another
 * session, through the string form, as another process would. */
static void test_sequencer_validity(void **state)
{
    zkr_session_t *a = open_session(4000), *b = open_session(10000);
    zkr_lock_t *l = new_lock(a, "/q/valid", NULL);
    zkr_sequencer_t q, r;
    char text[ZKR_SEQUENCER_MAX];

    (void)state;
    assert_int_equal(zkr_lock_sequencer(l, &q), ZKR_ENOTHELD);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_sequencer(l, &q), 0);
    assert_int_equal(q.token, token_of(l));
    assert_int_equal(q.session_id, zkr_session_id(a));
    assert_int_equal(q.mode, 'x');
    assert_string_equal(q.path, "/q/valid");
    assert_int_equal(zkr_sequencer_format(&q, text, sizeof(text)), 0);
    assert_int_equal(zkr_sequencer_parse(text, &r), 0);
    assert_int_equal(zkr_sequencer_check(b, &r), 0);
    assert_int_equal(zkr_sequencer_check(a, &r), 0);

    /* Released: stale. */
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(zkr_sequencer_check(b, &r), ZKR_ESTALE);

    /* Held again, then the session expires: stale. */
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_sequencer(l, &q), 0);
    assert_int_equal(zkr_sequencer_check(b, &q), 0);
    expire(a);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_LOST, 10000));
    assert_int_equal(zkr_sequencer_check(b, &q), ZKR_ESTALE);

    /* The very same node name, re-created by another session: the name
     * matches but czxid and owner do not. */
    assert_int_equal(zoo_create(raw, q.node, "impostor", 8,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_sequencer_check(b, &q), ZKR_ESTALE);
    assert_int_equal(zoo_delete(raw, q.node, -1), ZOK);
    /* A node in a directory that does not exist (any more). */
    snprintf(q.node, sizeof(q.node), "/q/nowhere/%s", strrchr(r.node, '/') + 1);
    assert_int_equal(zkr_sequencer_check(b, &q), ZKR_ESTALE);
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    zkr_lock_free(l);
    zkr_session_free(a);
    zkr_session_free(b);
}

struct async_result {
    atomic_int done, rc;
};

static void async_done(int rc, void *data)
{
    struct async_result *r = data;
    r->rc = rc;
    __atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
}

static void test_sequencer_check_async(void **state)
{
    zkr_session_t *a = open_session(10000);
    zkr_lock_t *l = new_lock(a, "/q/async", NULL);
    struct async_result r1 = {0, 1}, r2 = {0, 1};
    zkr_sequencer_t q;

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_sequencer(l, &q), 0);
    assert_int_equal(zkr_sequencer_check_async(a, &q, async_done, &r1), 0);
    assert_true(ZKT_WAIT_UNTIL(r1.done, 5000));
    assert_int_equal(r1.rc, 0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(zkr_sequencer_check_async(a, &q, async_done, &r2), 0);
    assert_true(ZKT_WAIT_UNTIL(r2.done, 5000));
    assert_int_equal(r2.rc, ZKR_ESTALE);
    assert_int_equal(zkr_sequencer_check_async(a, &q, NULL, NULL),
                     ZBADARGUMENTS);
    zkr_lock_free(l);
    zkr_session_free(a);
}

/* ------------------------------------------- "is this grant current?" */

static void acquired(int rc, zkr_lock_t *l, void *data)
{
    struct async_result *r = data;

    (void)l;
    r->rc = rc;
    __atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
}

/* Starts an acquire that is expected to wait, and returns once its node
 * exists (copied into node). */
static void enqueue(zkr_lock_t *l, struct async_result *r, char *node)
{
    assert_int_equal(zkr_lock_acquire_async(l, -1, acquired, r), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_lock_node(l, node, ZKR_NODE_MAX) == 0, 10000));
}

/* The sequencer anyone can write for a node: its czxid and owner as the
 * server shows them, in the mode given. */
static zkr_sequencer_t sequencer_of(const char *node, char mode)
{
    zkr_sequencer_t q;
    struct Stat st;

    memset(&q, 0, sizeof(q));
    assert_int_equal(zoo_exists(raw, node, 0, &st), ZOK);
    snprintf(q.node, sizeof(q.node), "%s", node);
    snprintf(q.path, sizeof(q.path), "%.*s", (int)(strrchr(node, '/') - node),
             node);
    q.token = st.czxid;
    q.session_id = st.ephemeralOwner;
    q.mode = mode;
    return q;
}

/* Checks a sequencer both ways (sync and async) and from its string. */
static int check_both(zkr_session_t *s, const zkr_sequencer_t *q)
{
    struct async_result r = {0, 1};
    char text[ZKR_SEQUENCER_MAX];
    zkr_sequencer_t p;
    int rc = zkr_sequencer_check(s, q);

    assert_int_equal(zkr_sequencer_check_async(s, q, async_done, &r), 0);
    assert_true(ZKT_WAIT_UNTIL(r.done, 10000));
    assert_int_equal(r.rc, rc);
    assert_int_equal(zkr_sequencer_format(q, text, sizeof(text)), 0);
    assert_int_equal(zkr_sequencer_parse(text, &p), 0);
    assert_int_equal(zkr_sequencer_check(s, &p), rc);
    return rc;
}

/* A read/write lock: a writer holds, a reader and a second writer wait.
 * Only a node that holds the grant in the sequencer's mode passes: the
 * waiting reader's node, whether presented as a reader's or (issue 20,
 * item 6) as a writer's sequencer, is refused; had it passed, its higher
 * token would have locked the real holder out of a fenced resource. */
static void test_check_rwlock_rule(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_session_t *chk = open_session(10000);
    zkr_lock_t *ra, *wa, *rb, *wb, *r2, *w2;
    struct async_result rr = {0, 1}, rw = {0, 1};
    char rnode[ZKR_NODE_MAX], wnode[ZKR_NODE_MAX];
    zkr_sequencer_t qw, qr, qr_as_w, qw2, qr_real;
    int64_t high = 0;

    (void)state;
    assert_int_equal(zkr_rwlock_new(&ra, &wa, a, "/q/rw", "a", NULL), 0);
    assert_int_equal(zkr_rwlock_new(&rb, &wb, b, "/q/rw", "b", NULL), 0);
    assert_int_equal(zkr_rwlock_new(&r2, &w2, b, "/q/rw", "b2", NULL), 0);
    assert_int_equal(zkr_lock_acquire(wa, -1), 0);
    assert_int_equal(zkr_lock_sequencer(wa, &qw), 0);
    enqueue(rb, &rr, rnode);
    enqueue(w2, &rw, wnode);
    zkt_sleep_ms(100);
    assert_false(rr.done || rw.done); /* both wait behind the writer */

    qr = sequencer_of(rnode, 'r');
    qr_as_w = sequencer_of(rnode, 'w');
    qw2 = sequencer_of(wnode, 'w');
    assert_true(qr.token > qw.token);
    assert_int_equal(check_both(chk, &qw), 0);
    assert_int_equal(check_both(a, &qw), 0);
    assert_int_equal(zkr_sequencer_check(chk, &qr_as_w), ZBADARGUMENTS);
    assert_int_equal(zkr_sequencer_check(chk, &qr), ZKR_ESTALE);
    assert_int_equal(check_both(chk, &qw2), ZKR_ESTALE);
    /* What the refusal protects: the holder's writes stay admitted. */
    assert_int_equal(zkr_fence_admit(&high, qw.token), 0);

    /* The writer releases: the reader is granted, the second writer still
     * waits for it. */
    assert_int_equal(zkr_lock_release(wa), 0);
    assert_true(ZKT_WAIT_UNTIL(rr.done, 10000));
    assert_int_equal(rr.rc, 0);
    assert_int_equal(zkr_lock_sequencer(rb, &qr_real), 0);
    assert_int_equal(qr_real.token, qr.token);
    assert_int_equal(check_both(chk, &qr), 0);
    assert_int_equal(check_both(chk, &qr_real), 0);
    assert_int_equal(zkr_sequencer_check(chk, &qr_as_w), ZBADARGUMENTS);
    assert_int_equal(check_both(chk, &qw2), ZKR_ESTALE);
    assert_int_equal(check_both(chk, &qw), ZKR_ESTALE);
    assert_false(rw.done);

    assert_int_equal(zkr_lock_release(rb), 0);
    assert_true(ZKT_WAIT_UNTIL(rw.done, 10000));
    assert_int_equal(rw.rc, 0);
    assert_int_equal(check_both(chk, &qw2), 0);
    assert_int_equal(check_both(chk, &qr), ZKR_ESTALE);
    assert_int_equal(zkr_lock_release(w2), 0);
    zkr_lock_free(ra);
    zkr_lock_free(wa);
    zkr_lock_free(rb);
    zkr_lock_free(wb);
    zkr_lock_free(r2);
    zkr_lock_free(w2);
    zkr_session_free(a);
    zkr_session_free(b);
    zkr_session_free(chk);
}

/* The other recipes' rules: a waiting lock contender, a waiting permit of
 * a semaphore of 2 and a candidate that does not lead are refused; the
 * holders pass, and so does a waiter once granted. */
static void test_check_other_rules(void **state)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    zkr_lock_t *l1 = new_lock(a, "/q/xrule", "1"),
               *l2 = new_lock(b, "/q/xrule", "2");
    zkr_lock_t *p[3];
    zkr_election_t *e1, *e2;
    struct async_result r2 = {0, 1}, rp = {0, 1};
    char node[ZKR_NODE_MAX];
    zkr_sequencer_t q1, q2, qp[3], ql1, ql2;
    zkr_contender_t *v = NULL;
    int n = 0;

    (void)state;
    /* Exclusive lock. */
    assert_int_equal(zkr_lock_acquire(l1, -1), 0);
    assert_int_equal(zkr_lock_sequencer(l1, &q1), 0);
    enqueue(l2, &r2, node);
    q2 = sequencer_of(node, 'x');
    assert_int_equal(check_both(b, &q1), 0);
    assert_int_equal(check_both(b, &q2), ZKR_ESTALE);
    assert_int_equal(zkr_lock_release(l1), 0);
    assert_true(ZKT_WAIT_UNTIL(r2.done, 10000));
    assert_int_equal(check_both(a, &q2), 0);
    assert_int_equal(check_both(a, &q1), ZKR_ESTALE);
    assert_int_equal(zkr_lock_release(l2), 0);

    /* Semaphore of 2. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            zkr_semaphore_new(&p[i], i < 2 ? a : b, "/q/prule", 2, NULL, NULL),
            0);
    assert_int_equal(zkr_lock_acquire(p[0], -1), 0);
    assert_int_equal(zkr_lock_acquire(p[1], -1), 0);
    enqueue(p[2], &rp, node);
    for (int i = 0; i < 2; i++)
        assert_int_equal(zkr_lock_sequencer(p[i], &qp[i]), 0);
    qp[2] = sequencer_of(node, 'p');
    assert_int_equal(check_both(b, &qp[0]), 0);
    assert_int_equal(check_both(b, &qp[1]), 0);
    assert_int_equal(check_both(b, &qp[2]), ZKR_ESTALE);
    /* A permit holder's guarded writes commit (the guard is its node's
     * existence, whatever was written to it since the grant). */
    for (int i = 0; i < 2; i++) {
        zoo_op_t op;
        zoo_op_result_t res;
        char made[64], path[32];

        snprintf(path, sizeof(path), "/q/prule-made-%d", i);
        assert_int_equal(zoo_set(raw, qp[i].node, "w", 1, -1), ZOK);
        zoo_create_op_init(&op, path, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, made,
                           sizeof(made));
        assert_int_equal(zkr_lock_guarded_multi(p[i], 1, &op, &res), 0);
        assert_string_equal(made, path);
    }
    q1 = qp[0];
    q1.mode = 'x'; /* a permit is not an exclusive lock */
    assert_int_equal(zkr_sequencer_check(b, &q1), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_release(p[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rp.done, 10000));
    assert_int_equal(rp.rc, 0);
    assert_int_equal(check_both(a, &qp[2]), 0);
    assert_int_equal(check_both(a, &qp[1]), 0);
    assert_int_equal(check_both(a, &qp[0]), ZKR_ESTALE);

    /* Election: only the leader's node is a leader's grant. */
    assert_int_equal(
        zkr_election_new(&e1, a, "/q/lrule", "e1", NULL, ZKR_POLICY_SUSPEND),
        0);
    assert_int_equal(
        zkr_election_new(&e2, b, "/q/lrule", "e2", NULL, ZKR_POLICY_SUSPEND),
        0);
    assert_int_equal(zkr_election_join(e1), 0);
    assert_int_equal(zkr_election_await(e1, 10000), 0);
    assert_int_equal(zkr_election_join(e2), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/q/lrule") == 2, 10000));
    assert_int_equal(zkr_election_sequencer(e1, &ql1), 0);
    assert_int_equal(zkr_election_participants(e1, &v, &n), 0);
    assert_int_equal(n, 2);
    ql2 = sequencer_of(v[1].node, 'l');
    zkr_contenders_free(v, n);
    assert_int_equal(check_both(b, &ql1), 0);
    assert_int_equal(check_both(b, &ql2), ZKR_ESTALE);

    zkr_election_free(e2);
    zkr_election_free(e1);
    for (int i = 0; i < 3; i++)
        zkr_lock_free(p[i]);
    zkr_lock_free(l1);
    zkr_lock_free(l2);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* Guarded writes commit while held; once our node is gone on the server
 * (forced release, or session expiry) they fail with ZKR_ENOTHELD and
 * change nothing, even while this process still believes it holds. The
 * operations' own errors are told apart. */
static void test_guarded_multi(void **state)
{
    zkr_session_t *a = open_session(4000);
    zkr_lock_t *l = new_lock(a, "/q/guard", NULL);
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    char created[256], node[ZKR_NODE_MAX], buf[32];
    int len = sizeof(buf), rc;
    struct async_result r = {0, 1};

    (void)state;
    assert_int_equal(
        zoo_create(raw, "/q/data", "0", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    zoo_set_op_init(&ops[0], "/q/data", "1", 1, -1, NULL);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, ops, res), ZKR_ENOTHELD);

    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    zoo_set_op_init(&ops[0], "/q/data", "1", 1, -1, NULL);
    zoo_create_op_init(&ops[1], "/q/made", "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0,
                       created, sizeof(created));
    assert_int_equal(zkr_lock_guarded_multi(l, 2, ops, res), 0);
    assert_int_equal(res[0].err, ZOK);
    assert_int_equal(res[1].err, ZOK);
    assert_string_equal(created, "/q/made");

    /* The operation's own error, not "not held"; nothing applied. */
    zoo_set_op_init(&ops[0], "/q/data", "2", 1, -1, NULL);
    zoo_create_op_init(&ops[1], "/q/made", "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0,
                       created, sizeof(created));
    assert_int_equal(zkr_lock_guarded_multi(l, 2, ops, res), ZNODEEXISTS);
    assert_int_equal(res[1].err, ZNODEEXISTS);
    assert_int_equal(zoo_get(raw, "/q/data", 0, buf, &len, NULL), ZOK);
    assert_int_equal(len, 1);
    assert_int_equal(buf[0], '1');

    /* Async form. */
    zoo_set_op_init(&ops[0], "/q/data", "3", 1, -1, NULL);
    assert_int_equal(
        zkr_lock_guarded_multi_async(l, 1, ops, res, async_done, &r), 0);
    assert_true(ZKT_WAIT_UNTIL(r.done, 5000));
    assert_int_equal(r.rc, 0);

    /* Our node deleted behind our back (a forced release): whether or not
     * the holder has heard of it yet (its watch on its own node reports
     * LOST within a round trip), the write is refused. */
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    zoo_set_op_init(&ops[0], "/q/data", "4", 1, -1, NULL);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, ops, res), ZKR_ENOTHELD);
    r.done = 0;
    rc = zkr_lock_guarded_multi_async(l, 1, ops, res, async_done, &r);
    if (rc == 0) { /* sent before the holder heard of the deletion */
        assert_true(ZKT_WAIT_UNTIL(r.done, 5000));
        rc = r.rc;
    }
    assert_int_equal(rc, ZKR_ENOTHELD);
    len = sizeof(buf);
    assert_int_equal(zoo_get(raw, "/q/data", 0, buf, &len, NULL), ZOK);
    assert_int_equal(buf[0], '3');
    /* The holder hears of it and reports the loss once. */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_LOST, 5000));
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);

    /* Held again, then the session is expired from outside. */
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    expire(a);
    zoo_set_op_init(&ops[0], "/q/data", "5", 1, -1, NULL);
    assert_true(ZKT_WAIT_UNTIL(
        zkr_lock_guarded_multi(l, 1, ops, res) == ZKR_ENOTHELD, 10000));
    len = sizeof(buf);
    assert_int_equal(zoo_get(raw, "/q/data", 0, buf, &len, NULL), ZOK);
    assert_int_equal(buf[0], '3');

    assert_int_equal(zkr_lock_guarded_multi(l, 0, ops, res), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, NULL, res), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_guarded_multi(NULL, 1, ops, res), ZBADARGUMENTS);
    zkr_lock_free(l);
    zkr_session_free(a);
}

/* The guard refused for want of READ on our own node is ZNOAUTH, not
 * ZKR_ENOTHELD: the grant is still held (nothing was applied). An
 * operation's own ZNOAUTH is told apart by its result. */
static void test_guarded_multi_noauth(void **state)
{
    zkr_session_t *a = open_session(10000);
    zkr_lock_t *l = new_lock(a, "/q/gauth", NULL);
    struct ACL entry;
    struct ACL_vector noread = {1, &entry};
    zoo_op_t ops[1];
    zoo_op_result_t res[1];
    char node[ZKR_NODE_MAX], buf[8];
    int len = sizeof(buf);

    (void)state;
    entry.perms = ZOO_PERM_ALL & ~ZOO_PERM_READ;
    entry.id = ZOO_ANYONE_ID_UNSAFE;
    assert_int_equal(zoo_create(raw, "/q/gauth-data", "0", 1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    /* An operator takes READ away from the holder's node. */
    assert_int_equal(zoo_set_acl(raw, node, -1, &noread), ZOK);
    zoo_set_op_init(&ops[0], "/q/gauth-data", "1", 1, -1, NULL);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, ops, res), ZNOAUTH);
    assert_int_equal(res[0].err, ZRUNTIMEINCONSISTENCY);
    assert_int_equal(zoo_get(raw, "/q/gauth-data", 0, buf, &len, NULL), ZOK);
    assert_int_equal(buf[0], '0');
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_HELD);

    /* READ back on our node, none on the data: the operation's error. */
    assert_int_equal(zoo_set_acl(raw, node, -1, &ZOO_OPEN_ACL_UNSAFE), ZOK);
    entry.perms = ZOO_PERM_READ | ZOO_PERM_ADMIN; /* no WRITE */
    assert_int_equal(zoo_set_acl(raw, "/q/gauth-data", -1, &noread), ZOK);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, ops, res), ZNOAUTH);
    assert_int_equal(res[0].err, ZNOAUTH);
    assert_int_equal(
        zoo_set_acl(raw, "/q/gauth-data", -1, &ZOO_OPEN_ACL_UNSAFE), ZOK);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, ops, res), 0);
    assert_int_equal(res[0].err, ZOK);

    /* A write to our node by another client (Curator's revocation does
     * this) does not end the grant: the guard is not a version check. */
    assert_int_equal(zoo_set(raw, node, "revoke", 6, -1), ZOK);
    zoo_set_op_init(&ops[0], "/q/gauth-data", "2", 1, -1, NULL);
    assert_int_equal(zkr_lock_guarded_multi(l, 1, ops, res), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    zkr_session_free(a);
}

static int unanswered_results_are(const zoo_op_result_t *res, int n, int rc)
{
    for (int i = 0; i < n; i++)
        if (res[i].err != rc)
            return 0;
    return 1;
}

/* A multi whose answer never comes (the server stops answering, the
 * connection is lost) or that is never sent: every result says the code
 * returned, none says ZOK nor is left as it was. */
static void test_guarded_multi_connection_loss(void **state)
{
    zkr_session_t *a = open_session(6000);
    zkr_lock_t *l = new_lock(a, "/q/gloss", NULL);
    zoo_op_t ops[2];
    zoo_op_result_t res[2], ares[2];
    struct async_result r = {0, 1};
    char created[64];
    int rc;

    (void)state;
    assert_int_equal(zoo_create(raw, "/q/gloss-data", "0", 1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    zoo_set_op_init(&ops[0], "/q/gloss-data", "1", 1, -1, NULL);
    zoo_create_op_init(&ops[1], "/q/gloss-made", "m", 1, &ZOO_OPEN_ACL_UNSAFE,
                       0, created, sizeof(created));
    memset(res, 0x5a, sizeof(res)); /* what an uninitialised array holds */
    memset(ares, 0x5a, sizeof(ares));

    /* Sent, never answered. */
    assert_int_equal(zkt_server_pause(server), 0);
    assert_int_equal(
        zkr_lock_guarded_multi_async(l, 2, ops, ares, async_done, &r), 0);
    rc = zkr_lock_guarded_multi(l, 2, ops, res);
    assert_true(rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT);
    assert_true(unanswered_results_are(res, 2, rc));
    assert_true(ZKT_WAIT_UNTIL(r.done, 10000));
    assert_true(r.rc == ZCONNECTIONLOSS || r.rc == ZOPERATIONTIMEOUT);
    assert_true(unanswered_results_are(ares, 2, r.rc));

    /* Not sent: the session is disconnected. */
    memset(res, 0x5a, sizeof(res));
    rc = zkr_lock_guarded_multi(l, 2, ops, res);
    assert_true(rc != 0);
    assert_true(unanswered_results_are(res, 2, rc));
    memset(res, 0x5a, sizeof(res));
    rc = zkr_lock_guarded_multi_async(l, 2, ops, res, async_done, &r);
    assert_true(rc != 0);
    assert_true(unanswered_results_are(res, 2, rc));
    assert_int_equal(zkt_server_resume(server), 0);
    assert_int_equal(zkt_wait_connected(raw, 10000), 0);
    zkr_lock_free(l);
    zkr_session_free(a);
}

/* The SQLite example: increasing tokens are applied, a lower one is
 * rejected and changes nothing. */
static int run_sqlite(const char *db, const char *value, const char *token)
{
    char *prog = zkt_build_path("examples/fenced_sqlite");
    char *argv[] = {prog,          (char *)db,    "job-1",
                    (char *)value, (char *)token, NULL};
    int st = -1;
    pid_t pid = zkt_spawn(argv, -1);

    assert_true(pid > 0);
    assert_int_equal(zkt_wait_pid(pid, 20000, &st), 0);
    free(prog);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_sqlite_example(void **state)
{
    char *dir = zkt_mkdtemp("zkr-sqlite-"), db[512];

    (void)state;
    snprintf(db, sizeof(db), "%s/store.db", dir);
    assert_int_equal(run_sqlite(db, "a", "100"), 0);
    assert_int_equal(run_sqlite(db, "b", "105"), 0);
    assert_int_equal(run_sqlite(db, "stale", "101"), 3);
    assert_int_equal(run_sqlite(db, "again", "105"), 3);
    assert_int_equal(run_sqlite(db, "c", "4294967297"), 0);
    assert_int_equal(run_sqlite(db, "stale", "4294967296"), 3);
    zkt_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequencer_validity),
        cmocka_unit_test(test_sequencer_check_async),
        cmocka_unit_test(test_check_rwlock_rule),
        cmocka_unit_test(test_check_other_rules),
        cmocka_unit_test(test_guarded_multi),
        cmocka_unit_test(test_guarded_multi_noauth),
        cmocka_unit_test(test_guarded_multi_connection_loss),
        cmocka_unit_test(test_sqlite_example),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("fence", tests, setup, teardown);
}
