/* Integration tests of fencing against a real ZooKeeper server:
 * sequencer validity, writes guarded by a lock, and the SQLite example's
 * fenced update. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "../server_test.h"

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
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    zkr_lock_free(l);
    zkr_session_free(a);
    zkr_session_free(b);
}

struct async_result {
    int done, rc;
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
        cmocka_unit_test(test_guarded_multi),
        cmocka_unit_test(test_sqlite_example),
    };
    return cmocka_run_group_tests_name("fence", tests, setup, teardown);
}
