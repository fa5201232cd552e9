/* Fault tests of the lock against a real ZooKeeper server: session expiry
 * from outside, server restart, server paused past the session timeout,
 * release while disconnected. */
#define _DEFAULT_SOURCE
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "filter.h"

#include "server_test.h"

#include "rec.h"

static int fd_readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* ------------------------------------------------------------------ */

/* The holder's session is expired from outside: its loss is reported by
 * callback, fd and state; the waiter is granted with a higher token; the
 * old handle reports LOST once and can acquire again on the new session. */
static void test_holder_expired(void **state)
{
    zkr_session_t *a = open_session(4000), *b = open_session(4000);
    zkr_lock_t *la = new_lock(a, "/f/hexp", NULL),
               *lb = new_lock(b, "/f/hexp", NULL);
    struct rec ra, rb, rs;
    int64_t ta, tb, sid_old;

    (void)state;
    rec_init(&ra);
    rec_init(&rb);
    rec_init(&rs);
    zkr_lock_set_listener(la, on_lock_state, &ra);
    zkr_session_add_listener(a, on_session, &rs);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    ta = token_of(la);
    assert_false(fd_readable(zkr_lock_fd(la)));
    assert_int_equal(zkr_lock_acquire_async(lb, -1, on_done, &rb), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/f/hexp") == 2, 5000));
    sid_old = zkr_session_id(a);

    expire(a);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_LOST) >= 0, 10000));
    /* The lock may hear first: the session's end deletes our node, which
     * the holder's watch on it reports. */
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rs, ZKR_STATE_LOST) >= 0, 10000));
    assert_true(fd_readable(zkr_lock_fd(la)));
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_LOST);
    assert_int_equal(zkr_lock_valid_ms(la), 0);

    assert_true(ZKT_WAIT_UNTIL(rec_find(&rb, 1) >= 0, 10000));
    tb = token_of(lb);
    assert_true(tb > ta);

    assert_int_equal(zkr_lock_release(la), ZKR_ELOST);
    assert_int_equal(zkr_lock_release(la), ZKR_ENOTHELD);
    assert_false(fd_readable(zkr_lock_fd(la)));

    /* The session re-creates itself; the handle acquires again. */
    assert_int_equal(zkr_session_wait_connected(a, 15000), 0);
    assert_true(zkr_session_id(a) != sid_old);
    assert_int_equal(zkr_session_state(a), ZKR_STATE_CONNECTED);
    assert_int_equal(zkr_lock_acquire(la, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_release(lb), 0);
    assert_int_equal(zkr_lock_acquire(la, 5000), 0);
    assert_true(token_of(la) > tb);
    assert_int_equal(zkr_lock_release(la), 0);
    assert_int_equal(children("/f/hexp"), 0);
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* A waiter's session expires: its acquire ends with an error, never
 * success, and the queue behind it still moves. */
static void test_waiter_expired(void **state)
{
    zkr_session_t *a = open_session(4000), *b = open_session(4000),
                  *c = open_session(4000);
    zkr_lock_t *la = new_lock(a, "/f/wexp", NULL),
               *lb = new_lock(b, "/f/wexp", NULL),
               *lc = new_lock(c, "/f/wexp", NULL);
    struct rec rb, rc;

    (void)state;
    rec_init(&rb);
    rec_init(&rc);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(lb, -1, on_done, &rb), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/f/wexp") == 2, 5000));
    assert_int_equal(zkr_lock_acquire_async(lc, -1, on_done, &rc), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/f/wexp") == 3, 5000));

    expire(b);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rb, ZKR_ELOST) >= 0, 10000));
    assert_int_equal(rec_find(&rb, 1), -1);
    assert_true(ZKT_WAIT_UNTIL(children("/f/wexp") == 2, 5000));
    assert_int_equal(zkr_lock_release(la), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rc, 1) >= 0, 5000));
    assert_int_equal(rec_find(&rb, 1), -1);
    assert_int_equal(zkr_lock_release(lc), 0);
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_lock_free(lc);
    zkr_session_free(a);
    zkr_session_free(b);
    zkr_session_free(c);
    assert_int_equal(children("/f/wexp"), 0);
}

/* Every recipe shares the engine; the fault tests run over each kind of
 * grant: 0 lock, 1 semaphore permit (of 2), 2 write lock, 3 read lock. */
enum { KINDS = 4 };
static zkr_lock_t *other_side; /* the unused side of a read/write lock */

static zkr_lock_t *make_kind(zkr_session_t *s, const char *path, int kind)
{
    zkr_lock_t *l = NULL, *r = NULL, *w = NULL;

    other_side = NULL;
    if (kind == 0)
        assert_int_equal(zkr_lock_new(&l, s, path, NULL, NULL), 0);
    else if (kind == 1)
        assert_int_equal(zkr_semaphore_new(&l, s, path, 2, NULL, NULL), 0);
    else {
        assert_int_equal(zkr_rwlock_new(&r, &w, s, path, NULL, NULL), 0);
        l = kind == 2 ? w : r;
        other_side = kind == 2 ? r : w;
    }
    return l;
}

static void free_kind(zkr_lock_t *l)
{
    zkr_lock_free(l);
    zkr_lock_free(other_side);
    other_side = NULL;
}

/* The server is killed and restarted within the session timeout: the lock
 * goes SUSPENDED, then HELD again after re-verification, same node and
 * token, never LOST. */
static void restart_keeps(int kind)
{
    enum { T = ZKT_RESTART_SESSION_MS };
    zkr_session_t *a = open_session(T);
    zkr_lock_t *la = make_kind(a, "/f/restart", kind);
    static struct rec ra, rs;
    char node1[ZKR_NODE_MAX], node2[ZKR_NODE_MAX];
    int64_t t1, sid;

    rec_init(&ra);
    rec_init(&rs);
    zkr_lock_set_listener(la, on_lock_state, &ra);
    zkr_session_add_listener(a, on_session, &rs);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    t1 = token_of(la);
    sid = zkr_session_id(a);
    assert_int_equal(zkr_lock_node(la, node1, sizeof(node1)), 0);

    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_SUSPENDED) >= 0, 8000));
    /* The descriptor signals the change until the state is read, then
     * is quiet while it stays SUSPENDED. */
    assert_true(fd_readable(zkr_lock_fd(la)));
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_SUSPENDED);
    assert_false(fd_readable(zkr_lock_fd(la)));
    assert_int_equal(zkr_lock_valid_ms(la), 0); /* not safe while suspended */
    assert_true(zkr_session_valid_ms(a) > 0);   /* but the lease runs on */
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), T);
    assert_non_null(raw);

    assert_true(ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_HELD) >= 0, T));
    assert_true(rec_find(&rs, ZKR_STATE_RECONNECTED) >= 0);
    assert_int_equal(rec_find(&ra, ZKR_LOCK_LOST), -1);
    assert_int_equal(rec_find(&rs, ZKR_STATE_LOST), -1);
    assert_true(fd_readable(zkr_lock_fd(la))); /* HELD again: a change */
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_HELD);
    assert_false(fd_readable(zkr_lock_fd(la)));
    assert_int_equal(token_of(la), t1);
    assert_int_equal(zkr_session_id(a), sid);
    assert_int_equal(zkr_lock_node(la, node2, sizeof(node2)), 0);
    assert_string_equal(node1, node2);
    assert_int_equal(zkr_lock_release(la), 0);
    assert_int_equal(children("/f/restart"), 0);
    free_kind(la);
    zkr_session_free(a);
}

static void test_server_restart_keeps_lock(void **state)
{
    (void)state;
    for (int kind = 0; kind < KINDS; kind++)
        restart_keeps(kind);
}

/* The server is paused (SIGSTOP) longer than the session timeout. The
 * holder must declare LOST by itself, while the server is still paused,
 * so before anyone else can possibly be granted; it must do so no later
 * than its own valid_ms promised. */
static void test_server_paused_past_timeout(void **state)
{
    enum { T = 3000 };
    zkr_session_t *a = open_session(T), *b = open_session(T);
    zkr_lock_t *la = new_lock(a, "/f/pause", NULL),
               *lb = new_lock(b, "/f/pause", NULL);
    struct rec ra, rb;
    int64_t t_pause, valid, t_lost, t_resume, t_grant;

    (void)state;
    rec_init(&ra);
    rec_init(&rb);
    zkr_lock_set_listener(la, on_lock_state, &ra);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(lb, -1, on_done, &rb), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/f/pause") == 2, 5000));

    valid = zkr_lock_valid_ms(la);
    t_pause = zkt_now_ms();
    assert_int_equal(zkt_server_pause(server), 0);
    assert_true(valid > 0 && valid <= T);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_LOST) >= 0, 2 * T));
    t_lost = rec_find(&ra, ZKR_LOCK_LOST);
    /* SUSPENDED came first, then LOST within the promised validity (plus
     * the timer's scheduling slack). */
    assert_true(rec_find(&ra, ZKR_LOCK_SUSPENDED) >= 0);
    assert_true(rec_find(&ra, ZKR_LOCK_SUSPENDED) <= t_lost);
    assert_true(t_lost <= t_pause + valid + 250);
    /* Keep the server paused past the session timeout, then resume. */
    while (zkt_now_ms() < t_pause + T + 500)
        zkt_sleep_ms(20);
    t_resume = zkt_now_ms();
    assert_int_equal(zkt_server_resume(server), 0);
    assert_true(t_lost < t_resume);

    /* b's session was lost too: its acquire failed, never succeeded. */
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rb, ZKR_ELOST) >= 0, 3 * T));
    assert_int_equal(rec_find(&rb, 1), -1);
    assert_int_equal(zkr_session_wait_connected(b, 20000), 0);
    assert_int_equal(zkr_lock_acquire(lb, 20000), 0);
    t_grant = zkt_now_ms();
    assert_true(t_lost < t_grant);
    assert_int_equal(zkr_lock_release(la), ZKR_ELOST);
    assert_int_equal(zkr_lock_release(lb), 0);
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_session_free(a);
    zkr_session_free(b);
    assert_true(ZKT_WAIT_UNTIL(children("/f/pause") == 0, 10000));
}

/* The server is killed and restarted only after the session timeout:
 * the holder declares LOST by itself while the server is down (so before
 * anyone could be granted), the waiter's acquire fails with ZKR_ELOST
 * rather than succeeding, and once the server is back both sessions
 * start afresh and everyone acquires again with higher tokens; the old
 * nodes are gone. */
static void test_server_restart_beyond_timeout(void **state)
{
    enum { T = 3000 };
    zkr_session_t *a = open_session(T), *b = open_session(T);
    zkr_lock_t *la = new_lock(a, "/f/restart2", NULL),
               *lb = new_lock(b, "/f/restart2", NULL);
    static struct rec ra, rb;
    int64_t t_kill, t1, t2, t3;

    (void)state;
    rec_init(&ra);
    rec_init(&rb);
    zkr_lock_set_listener(la, on_lock_state, &ra);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    t1 = token_of(la);
    assert_int_equal(zkr_lock_acquire_async(lb, -1, on_done, &rb), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/f/restart2") == 2, 5000));

    zookeeper_close(raw);
    raw = NULL;
    t_kill = zkt_now_ms();
    assert_int_equal(zkt_server_kill(server), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_LOST) >= 0, 2 * T));
    assert_true(rec_find(&ra, ZKR_LOCK_SUSPENDED) >= 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rb, ZKR_ELOST) >= 0, 2 * T));
    while (zkt_now_ms() < t_kill + T + 1000)
        zkt_sleep_ms(20);
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);

    assert_int_equal(rec_find(&rb, 1), -1);
    assert_int_equal(zkr_lock_release(la), ZKR_ELOST);
    assert_int_equal(zkr_session_wait_connected(a, 20000), 0);
    assert_int_equal(zkr_session_wait_connected(b, 20000), 0);
    assert_int_equal(zkr_lock_acquire(lb, 20000), 0);
    t2 = token_of(lb);
    assert_true(t2 > t1);
    assert_int_equal(zkr_lock_acquire(la, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_release(lb), 0);
    assert_int_equal(zkr_lock_acquire(la, 20000), 0);
    t3 = token_of(la);
    assert_true(t3 > t2);
    assert_int_equal(zkr_lock_release(la), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/f/restart2") == 0, 10000));
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* Release while disconnected: local state is kept (RELEASING) until the
 * delete is confirmed after reconnecting; no node is left behind. */
static void test_release_while_disconnected(void **state)
{
    enum { T = ZKT_RESTART_SESSION_MS };
    zkr_session_t *a = open_session(T);
    zkr_lock_t *la = new_lock(a, "/f/relsusp", NULL);
    struct rec ra, rd;

    (void)state;
    rec_init(&ra);
    rec_init(&rd);
    zkr_lock_set_listener(la, on_lock_state, &ra);
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_SUSPENDED) >= 0, 8000));
    assert_int_equal(zkr_lock_release_async(la, on_done, &rd), 0);
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_RELEASING);
    assert_int_equal(zkr_lock_acquire(la, 0), ZKR_ESTATE);
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), T);
    assert_non_null(raw);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rd, 1) >= 0, T));
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_IDLE);
    /* Deleted by us after reconnecting; on a machine so loaded that the
     * restart outlasted the safe deadline, the release completed at LOST
     * and the server removes the node when it expires the session. */
    assert_true(ZKT_WAIT_UNTIL(children("/f/relsusp") == 0, 2 * T));
    zkr_lock_free(la);
    zkr_session_free(a);
}

/* Connection lost while a create is in flight: the server is paused just
 * after the create was sent, the client gives up on the connection (the
 * create's outcome is unknown), and the server resumes before the session
 * expires. The contender must find its node by UUID and adopt it (it
 * belongs to this very session) or create one if none was applied: never
 * two nodes, never a node left behind, and the acquire succeeds. */
static void lost_during_create(int kind, const char *path)
{
    enum { T = 9000 };
    zkr_session_t *a = open_session(T);
    zkr_lock_t *la = make_kind(a, path, kind);
    static struct rec rs, rd;
    zkr_contender_t *v = NULL;
    int n = 0;
    int64_t token;

    rec_init(&rs);
    rec_init(&rd);
    zkr_session_add_listener(a, on_session, &rs);
    /* Warm the path up so the create is the only request in flight. */
    assert_int_equal(zkr_lock_acquire(la, -1), 0);
    assert_int_equal(zkr_lock_release(la), 0);

    assert_int_equal(zkt_server_pause(server), 0);
    assert_int_equal(zkr_lock_acquire_async(la, -1, on_done, &rd), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rs, ZKR_STATE_SUSPENDED) >= 0, T));
    assert_int_equal(zkt_server_resume(server), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_find(&rd, 1) >= 0, T));
    assert_int_equal(rec_find(&rs, ZKR_STATE_LOST), -1);
    assert_true(zkr_session_counter(a, ZKR_COUNTER_RECOVERIES) >= 1);
    token = token_of(la);
    assert_int_equal(zkr_lock_contenders(la, &v, &n), 0);
    assert_int_equal(n, 1);
    /* The server read the create from the socket on resuming and applied
     * it (sequence 1, after the warm-up's 0): that node was adopted, not
     * duplicated. */
    assert_int_equal(v[0].seq, 1);
    assert_int_equal(v[0].czxid, token);
    assert_int_equal(v[0].session_id, zkr_session_id(a));
    zkr_contenders_free(v, n);
    assert_int_equal(zkr_lock_release(la), 0);
    assert_int_equal(children(path), 0);
    free_kind(la);
    zkr_session_free(a);
}

static void test_connection_lost_during_create(void **state)
{
    char path[32];

    (void)state;
    for (int kind = 0; kind < KINDS; kind++) {
        snprintf(path, sizeof(path), "/f/lostcreate%d", kind);
        lost_during_create(kind, path);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_expired),
        cmocka_unit_test(test_waiter_expired),
        cmocka_unit_test(test_server_restart_keeps_lock),
        cmocka_unit_test(test_server_paused_past_timeout),
        cmocka_unit_test(test_release_while_disconnected),
        cmocka_unit_test(test_connection_lost_during_create),
        cmocka_unit_test(test_server_restart_beyond_timeout),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("faults", tests, setup, teardown);
}
