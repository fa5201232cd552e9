/* The sequence wrap on a real server (issue 12, item 4). ZooKeeper names a
 * sequential node with its parent's signed 32-bit count of children ever
 * created; documented: after 2147483647 comes -2147483648. No test can
 * create 2^31 children, so the setup crafts the state: it stops the
 * server, writes a snapshot with directories whose counter is near or past
 * the wrap, children included (tests/bin/zk-set-cversion.java, run with
 * Debian's ZooKeeper jars by Java's single-file source launcher), and
 * starts the server again on it.
 *
 * What ZooKeeper 3.8.0 really does (test_counter_after_max): its stored
 * count is only ever raised, so it stays at 2147483647 and every later
 * child is numbered 2147483647 again; -2147483648 and beyond are seen only
 * by creates in flight together, or on a server that wraps as documented.
 * Both states are tested:
 *  - a listing that spans the wrap (documented counter) grants in creation
 *    order, one at a time;
 *  - contenders that share 2147483647 (3.8's stuck counter) are never
 *    granted past one another.
 * The oracle is the rule, not names.c: creation order (czxid order, which
 * the crafted state fixes), and never two holders. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "server_test.h"

#ifndef ZKT_SRCDIR
#define ZKT_SRCDIR "."
#endif

#define RAW_PATH "/wrapraw"
#define FIFO_PATH "/wrapfifo"
#define STUCK_PATH "/wrapstuck"
#define MIX_PATH "/wrapmix"
#define BAR_PATH "/wrapbar"
/* A holder that got -2147483648 on a stuck counter (its create in flight
 * with another, which got 2147483647). */
#define D_MIN "_c_44444444-4444-4444-8444-444444444444-lock--2147483648"
/* Curator-named foreign contenders (persistent: they leave when the test
 * deletes them), created in this order by the crafted state. */
#define F1 "_c_11111111-1111-4111-8111-111111111111-lock-2147483646"
#define F2 "_c_22222222-2222-4222-8222-222222222222-lock-2147483647"
#define F3 "_c_33333333-3333-4333-8333-333333333333-lock--2147483648"
/* A holder whose name sorts after any zkr UUID. */
#define HIGH "_c_ffffffff-ffff-4fff-bfff-ffffffffffff-lock-"

/* Stops the server, crafts the counters, starts it again. */
static int wrap_setup(void **state)
{
    const char *java =
        getenv("JAVA") != NULL ? getenv("JAVA") : "/usr/bin/java";
    char data[512], out[512];
    char *argv[] = {(char *)java,
                    "-cp",
                    "/usr/share/java/zookeeper.jar",
                    ZKT_SRCDIR "/tests/bin/zk-set-cversion.java",
                    data,
                    RAW_PATH "=2147483646",
                    FIFO_PATH "=-2147483647",
                    FIFO_PATH "/" F1,
                    FIFO_PATH "/" F2,
                    FIFO_PATH "/" F3,
                    STUCK_PATH "=2147483646",
                    MIX_PATH "=2147483647",
                    MIX_PATH "/" D_MIN,
                    BAR_PATH "=2147483647",
                    NULL};
    int fd, st = -1;
    pid_t pid;

    if (setup(state) != 0)
        return -1;
    zookeeper_close(raw);
    raw = NULL;
    if (zkt_server_kill(server) != 0)
        return -1;
    snprintf(data, sizeof(data), "%s/data", zkt_server_dir(server));
    snprintf(out, sizeof(out), "%s/zk-set-cversion.log",
             zkt_server_dir(server));
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    pid = zkt_spawn(argv, fd);
    close(fd);
    if (pid <= 0 || zkt_wait_pid(pid, 180000, &st) != 0 || !WIFEXITED(st) ||
        WEXITSTATUS(st) != 0) {
        fprintf(stderr, "test_wrap: %s failed (status %d), see %s\n", argv[3],
                st, out);
        return -1;
    }
    if (zkt_server_restart(server) != 0)
        return -1;
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    return raw != NULL ? 0 : -1;
}

/* The last component of a path. */
static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s != NULL ? s + 1 : path;
}

/* The premise: the crafted counter gives 2147483646, 2147483647, then
 * either -2147483648 (the documented wrap) or 2147483647 again (ZooKeeper
 * 3.8.0's stored count never goes down; the same prefix then fails with
 * ZNODEEXISTS). Which one this server does is printed. */
static void test_counter_after_max(void **state)
{
    char got[64];
    int rc;

    (void)state;
    assert_int_equal(zoo_create(raw, RAW_PATH "/n-", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, got,
                                (int)sizeof(got)),
                     ZOK);
    assert_string_equal(base(got), "n-2147483646");
    assert_int_equal(zoo_create(raw, RAW_PATH "/n-", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, got,
                                (int)sizeof(got)),
                     ZOK);
    assert_string_equal(base(got), "n-2147483647");
    rc = zoo_create(raw, RAW_PATH "/m-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_SEQUENCE, got, (int)sizeof(got));
    assert_int_equal(rc, ZOK);
    if (strcmp(base(got), "m--2147483648") == 0) {
        print_message("# this server wraps: -2147483648 follows 2147483647\n");
    } else {
        assert_string_equal(base(got), "m-2147483647");
        rc = zoo_create(raw, RAW_PATH "/n-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_SEQUENCE, got, (int)sizeof(got));
        assert_int_equal(rc, ZNODEEXISTS);
        print_message("# this server's counter stays at 2147483647: every "
                      "later child is numbered 2147483647\n");
    }
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

struct waiter {
    zkr_session_t *s;
    zkr_lock_t *l;
    char node[ZKR_NODE_MAX];
};

static void ignore_done(int rc, zkr_lock_t *l, void *data)
{
    (void)rc;
    (void)l;
    (void)data;
}

/* A new session and lock that starts acquiring path; returns once its node
 * exists (so that the next one is created after it). */
static void enqueue(struct waiter *w, const char *path, int before)
{
    w->s = open_session(10000);
    w->l = new_lock(w->s, path, "wrap");
    assert_int_equal(zkr_lock_acquire_async(w->l, -1, ignore_done, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(children(path) == before + 1, 10000));
    assert_true(ZKT_WAIT_UNTIL(
        zkr_lock_node(w->l, w->node, sizeof(w->node)) == 0, 10000));
    print_message("# queued %s\n", base(w->node));
}

/* Waits until w holds or watches path (or path2, if not NULL); 1 if it
 * holds. */
static int settle2(struct waiter *w, const char *path, const char *path2)
{
    int64_t sid = zkr_session_id(w->s);

    assert_true(ZKT_WAIT_UNTIL(
        zkr_lock_state(w->l) == ZKR_LOCK_HELD || session_watches(sid, path) ||
            (path2 != NULL && session_watches(sid, path2)),
        zkt_scaled_ms(20000)));
    return zkr_lock_state(w->l) == ZKR_LOCK_HELD;
}

static int settle(struct waiter *w, const char *path)
{
    return settle2(w, path, NULL);
}

static void done(struct waiter *w)
{
    zkr_lock_free(w->l);
    zkr_session_free(w->s);
}

/* A listing across the wrap: foreign contenders F1 (2147483646), F2
 * (2147483647), F3 (-2147483648), then zkr's L1 (-2147483647) and L2
 * (-2147483646), created in that order. F1 holds. F3 leaving first (a
 * waiter giving up) grants no one; L1 is granted only when F1, F2 and F3
 * are all gone, L2 only after L1. */
static void test_fifo_across_documented_wrap(void **state)
{
    const char *foreign[] = {FIFO_PATH "/" F1, FIFO_PATH "/" F2,
                             FIFO_PATH "/" F3};
    struct waiter w[2];
    zkr_contender_t *list = NULL;
    int count = 0;

    (void)state;
    enqueue(&w[0], FIFO_PATH, 3);
    assert_true(ends_with(w[0].node, "-lock--2147483647"));
    enqueue(&w[1], FIFO_PATH, 4);
    assert_true(ends_with(w[1].node, "-lock--2147483646"));
    assert_false(settle(&w[0], foreign[2]));
    assert_false(settle(&w[1], w[0].node));
    /* F3 (a waiter) leaves: L1 now waits for F2. */
    assert_int_equal(zoo_delete(raw, foreign[2], -1), ZOK);
    if (settle(&w[0], foreign[1]))
        fail_msg("L1 granted while F1 holds");
    /* Everyone sees the queue in creation order, F1 holding
     * (F3 is gone). */
    assert_int_equal(zkr_contenders_list(w[0].s, FIFO_PATH, &list, &count), 0);
    assert_int_equal(count, 4);
    for (int i = 0; i < 2; i++)
        assert_string_equal(list[i].node, foreign[i]);
    assert_string_equal(list[2].node, w[0].node);
    assert_string_equal(list[3].node, w[1].node);
    assert_int_equal(zkr_contenders_holding(list, count), 1);
    zkr_contenders_free(list, count);

    /* F1 (the holder) leaves: F2 holds. */
    assert_int_equal(zoo_delete(raw, foreign[0], -1), ZOK);
    zkt_sleep_ms(200);
    if (settle(&w[0], foreign[1]))
        fail_msg("L1 granted while F2 holds");
    assert_int_equal(zoo_delete(raw, foreign[1], -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(w[0].l) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(10000)));
    if (settle(&w[1], w[0].node))
        fail_msg("L2 granted while L1 holds");
    assert_int_equal(zkr_lock_release(w[0].l), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(w[1].l) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(10000)));
    assert_int_equal(zkr_lock_release(w[1].l), 0);
    done(&w[0]);
    done(&w[1]);
    assert_true(ZKT_WAIT_UNTIL(children(FIFO_PATH) == 0, 10000));
}

/* ZooKeeper 3.8's stuck counter: a Curator-named holder H got 2147483647
 * from the server; zkr's L1 and L2, created after it, get 2147483647 too
 * (or -2147483648 and -2147483647 on a server that wraps). Their names do
 * not say they are newer, and H's sorts after theirs: neither may be
 * granted while H holds, and L2 not while L1 holds. */
static void test_shared_sequence_no_two_holders(void **state)
{
    char h[128], filler[64];
    struct waiter w[2];
    int tie;

    (void)state;
    /* The counter is at 2147483646: a non-contender child takes it, H
     * takes 2147483647. */
    assert_int_equal(zoo_create(raw, STUCK_PATH "/filler-", "", 0,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, filler,
                                (int)sizeof(filler)),
                     ZOK);
    assert_int_equal(
        zoo_create(raw, STUCK_PATH "/" HIGH, "h", 1, &ZOO_OPEN_ACL_UNSAFE,
                   ZOO_EPHEMERAL | ZOO_SEQUENCE, h, (int)sizeof(h)),
        ZOK);
    assert_string_equal(base(h), HIGH "2147483647");
    enqueue(&w[0], STUCK_PATH, 2);
    if (settle(&w[0], h))
        fail_msg("%s granted while %s holds", base(w[0].node), base(h));
    enqueue(&w[1], STUCK_PATH, 3);
    /* L2 watches L1 or H, whichever its name sorts next to. */
    if (settle2(&w[1], w[0].node, h) || zkr_lock_state(w[0].l) == ZKR_LOCK_HELD)
        fail_msg("granted while %s holds", base(h));
    /* H leaves. On a wrapping server L1 (-2147483648) holds and L2
     * waits. On a stuck counter L1 and L2 share 2147483647 and their
     * names cannot say which is older: neither is granted, each watching
     * the other until one gives up. Liveness, not safety, is what a stuck
     * counter costs. */
    tie = ends_with(w[0].node, "-lock-2147483647") &&
          ends_with(w[1].node, "-lock-2147483647");
    assert_int_equal(zoo_delete(raw, h, -1), ZOK);
    if (!tie) {
        assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(w[0].l) == ZKR_LOCK_HELD,
                                   zkt_scaled_ms(10000)));
        assert_false(settle(&w[1], w[0].node));
    } else {
        assert_false(settle(&w[0], w[1].node));
        assert_false(settle(&w[1], w[0].node));
        /* One gives up: the other is granted. */
        assert_int_equal(zkr_lock_cancel(w[0].l), 0);
        assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(w[1].l) == ZKR_LOCK_HELD,
                                   zkt_scaled_ms(10000)));
        assert_int_equal(zkr_lock_release(w[1].l), 0);
    }
    done(&w[0]);
    done(&w[1]);
    assert_true(ZKT_WAIT_UNTIL(children(STUCK_PATH) == 1, 10000));
}

/* ZooKeeper 3.8's stuck counter, the other half: a create in flight
 * beside another one got -2147483648 (D, which holds: it was alone when
 * it listed), and a contender created later gets 2147483647 again. The
 * names would put the newcomer first, as a documented wrap would: it must
 * not be granted while D holds (two holders, and a fencing token lower
 * than the holder's). Found by an engine review; the crafted state is D
 * in a directory whose counter is at 2147483647. */
static void test_max_beside_negative_no_two_holders(void **state)
{
    struct waiter w;

    (void)state;
    enqueue(&w, MIX_PATH, 1);
    assert_true(ends_with(w.node, "-lock-2147483647"));
    if (settle(&w, MIX_PATH "/" D_MIN))
        fail_msg("%s granted while %s holds", base(w.node), D_MIN);
    assert_int_equal(zoo_delete(raw, MIX_PATH "/" D_MIN, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(w.l) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(10000)));
    assert_int_equal(zkr_lock_release(w.l), 0);
    done(&w);
}

/* A barrier under a parent whose child counter is stuck at 2147483647:
 * on 3.8.0 a create there leaves the parent's pzxid behind (below the
 * child's czxid). A wait that starts while that barrier stands must not
 * take it for a node made during the call (docs/PROTOCOL.md [B3]): it
 * times out, and returns once the node goes. */
static void test_barrier_under_stuck_counter(void **state)
{
    const char *p = BAR_PATH "/b";
    zkr_session_t *s = open_session(10000);
    zkr_barrier_t *b = NULL;
    struct Stat pst, st;

    (void)state;
    assert_int_equal(
        zoo_create(raw, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    assert_int_equal(zoo_exists(raw, BAR_PATH, 0, &pst), ZOK);
    assert_int_equal(zoo_exists(raw, p, 0, &st), ZOK);
    /* The premise (3.8.0): the create did not move the parent's pzxid. */
    assert_true(pst.pzxid < st.czxid);
    assert_int_equal(zkr_barrier_new(&b, s, p, 0, NULL), 0);
    assert_int_equal(zkr_barrier_wait(b, 1000), ZKR_ETIMEDOUT);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(zkr_barrier_wait(b, 1000), 0);
    zkr_barrier_free(b);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_after_max),
        cmocka_unit_test(test_fifo_across_documented_wrap),
        cmocka_unit_test(test_shared_sequence_no_two_holders),
        cmocka_unit_test(test_max_beside_negative_no_two_holders),
        cmocka_unit_test(test_barrier_under_stuck_counter),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("wrap", tests, wrap_setup, teardown);
}
