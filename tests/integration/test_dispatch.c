/* Sessions without an event thread (zkr_session_options_t.no_event_thread)
 * against a real server, through the fault proxy: callbacks run in
 * zkr_session_dispatch() on the caller's thread and nowhere else, under
 * the callback rules of zkr.h; zkr_session_fd() is readable exactly while
 * callbacks are due, so a poll() loop does not spin while the connection
 * is suspended, and neither is a lock's own descriptor; the example
 * daemon examples/evloop runs on it. */
#include <fcntl.h>
#include <poll.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"

/* What the callbacks saw. Only the test's thread dispatches, so a
 * callback that ran anywhere else shows in `foreign`. */
struct rec {
    pthread_t main;
    int foreign; /* callbacks run on another thread */
    int acquired, acq_rc, acq_deadlk, acq_dispatch;
    int held, suspended, lost;     /* lock listener */
    int leader_on, leader_off;     /* election listener */
    int connected, susp_s, lost_s; /* session listener */
    int closed;
    zkr_lock_t *free_me; /* freed by the acquire completion */
    zkr_session_t *s;    /* the session being dispatched */
};

static struct rec rec;

static void note_thread(void)
{
    if (!pthread_equal(pthread_self(), rec.main))
        rec.foreign++;
}

static void on_session(zkr_session_t *s, zkr_state_t st, void *data)
{
    (void)s;
    (void)data;
    note_thread();
    rec.connected += st == ZKR_STATE_CONNECTED;
    rec.susp_s += st == ZKR_STATE_SUSPENDED;
    rec.lost_s += st == ZKR_STATE_LOST;
    rec.closed += st == ZKR_STATE_CLOSED;
}

static void on_acquired(int rc, zkr_lock_t *l, void *data)
{
    (void)data;
    note_thread();
    rec.acquired++;
    rec.acq_rc = rc;
    /* The rules of a callback hold on the dispatching thread. */
    rec.acq_deadlk = zkr_lock_release(l) == ZKR_EDEADLK;
    rec.acq_dispatch = zkr_session_dispatch(rec.s);
    if (rec.free_me == l)
        zkr_lock_free(l);
}

static void on_lock(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    (void)data;
    note_thread();
    rec.held += st == ZKR_LOCK_HELD;
    rec.suspended += st == ZKR_LOCK_SUSPENDED;
    rec.lost += st == ZKR_LOCK_LOST;
}

static void on_leader(zkr_election_t *e, int leader, int rc, void *data)
{
    (void)e;
    (void)rc;
    (void)data;
    note_thread();
    rec.leader_on += leader == 1;
    rec.leader_off += leader == 0;
}

static int readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static zkr_session_t *open_dispatched(const char *hosts, int timeout_ms)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;

    o.no_event_thread = 1;
    assert_int_equal(zkr_session_open(&s, hosts, timeout_ms, &o), 0);
    return s;
}

/* Runs what is due if the descriptor says something is. */
static void pump(zkr_session_t *s)
{
    if (readable(zkr_session_fd(s)))
        assert_true(zkr_session_dispatch(s) >= 0);
}

/* Dispatches until cond holds (polling the descriptor), at most ms. */
#define DISPATCH_UNTIL(s, cond, ms) ZKT_WAIT_UNTIL((pump(s), (cond)), ms)

static void test_arguments(void **state)
{
    zkr_session_t *s = open_session(6000);

    (void)state;
    assert_int_equal(zkr_session_fd(NULL), -1);
    assert_int_equal(zkr_session_dispatch(NULL), ZBADARGUMENTS);
    /* A session with an event thread has neither. */
    assert_int_equal(zkr_session_fd(s), -1);
    assert_int_equal(zkr_session_dispatch(s), ZKR_ESTATE);
    assert_int_equal(zkr_session_free(s), 0);
}

static void test_callbacks_on_caller(void **state)
{
    zkr_session_t *s = open_dispatched(zkt_server_hosts(server), 6000);
    zkr_lock_t *l = NULL;
    zkr_election_t *e = NULL;
    int fd = zkr_session_fd(s), n;

    (void)state;
    memset(&rec, 0, sizeof(rec));
    rec.main = pthread_self();
    rec.s = s;
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    assert_int_equal(zkr_session_add_listener(s, on_session, NULL), 0);
    /* CONNECTED was posted by the open: due, not yet run. */
    assert_true(readable(fd));
    assert_int_equal(rec.connected, 0);
    assert_int_equal(zkr_session_dispatch(s), 1);
    assert_int_equal(rec.connected, 1);
    assert_false(readable(fd));
    assert_int_equal(zkr_session_dispatch(s), 0);

    assert_int_equal(zkr_lock_new(&l, s, "/disp/a", "a", NULL), 0);
    assert_int_equal(zkr_lock_set_listener(l, on_lock, NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(l, 10000, on_acquired, NULL), 0);
    /* Granted (the state says so) but nothing runs until a dispatch. */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_HELD, 10000));
    assert_true(ZKT_WAIT_UNTIL(readable(fd), 10000));
    zkt_sleep_ms(100);
    assert_int_equal(rec.acquired, 0);
    n = zkr_session_dispatch(s);
    assert_int_equal(n, 1);
    assert_int_equal(rec.acquired, 1);
    assert_int_equal(rec.acq_rc, 0);
    assert_true(rec.acq_deadlk);
    assert_int_equal(rec.acq_dispatch, ZKR_EDEADLK);
    assert_false(readable(fd));

    /* An election listener, and a lock listener (a forced release by
     * someone else: LOST). */
    assert_int_equal(
        zkr_election_new(&e, s, "/disp/e", "e", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(zkr_election_set_listener(e, on_leader, NULL), 0);
    assert_int_equal(zkr_election_join(e), 0);
    assert_true(DISPATCH_UNTIL(s, rec.leader_on == 1, 10000));
    {
        char node[ZKR_NODE_MAX];
        assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
        assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    }
    assert_true(DISPATCH_UNTIL(s, rec.lost == 1, 10000));
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    assert_int_equal(zkr_election_leave(e), 0);
    assert_true(DISPATCH_UNTIL(s, rec.leader_off == 1, 10000));
    zkr_election_free(e);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
    /* CLOSED is delivered by the free, on its caller's thread. */
    assert_int_equal(rec.closed, 1);
    assert_int_equal(rec.foreign, 0);
}

/* Frees with callbacks still due: from a callback (the acquire
 * completion frees its own lock), and from outside one, by a thread that
 * will dispatch later: neither waits for a dispatch, the completion of
 * the handle freed outside comes once at the next dispatch, and the
 * session's free finishes what is left. */
static void test_free_in_dispatch_mode(void **state)
{
    zkr_session_t *s = open_dispatched(zkt_server_hosts(server), 6000);
    zkr_lock_t *a = NULL, *b = NULL;

    (void)state;
    memset(&rec, 0, sizeof(rec));
    rec.main = pthread_self();
    rec.s = s;
    alarm(60); /* a free that waits for a dispatch would hang here */
    zkr_session_dispatch(s);
    assert_int_equal(zkr_lock_new(&a, s, "/disp/f", "a", NULL), 0);
    rec.free_me = a;
    assert_int_equal(zkr_lock_acquire_async(a, 10000, on_acquired, NULL), 0);
    assert_true(DISPATCH_UNTIL(s, rec.acquired == 1, 10000));
    assert_int_equal(rec.acq_rc, 0);
    /* a is gone: its node too, so b is granted. */
    assert_int_equal(zkr_lock_new(&b, s, "/disp/f", "b", NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(b, 10000, on_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(b) == ZKR_LOCK_HELD, 10000));
    zkr_lock_free(b); /* completion due, not run: must not wait */
    assert_int_equal(rec.acquired, 1);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, "/disp/f") == 0, 10000));
    assert_int_equal(zkr_session_dispatch(s), 1);
    assert_int_equal(rec.acquired, 2);
    assert_int_equal(zkr_session_dispatch(s), 0);

    /* Election candidates freed with their news due, one leading and
     * one waiting: neither free waits for a dispatch, and a freed
     * handle's state changes are not delivered. */
    {
        zkr_election_t *e1 = NULL, *e2 = NULL;
        assert_int_equal(zkr_election_new(&e1, s, "/disp/fe", "e1", NULL,
                                          ZKR_POLICY_SUSPEND),
                         0);
        assert_int_equal(zkr_election_new(&e2, s, "/disp/fe", "e2", NULL,
                                          ZKR_POLICY_SUSPEND),
                         0);
        assert_int_equal(zkr_election_set_listener(e1, on_leader, NULL), 0);
        assert_int_equal(zkr_election_set_listener(e2, on_leader, NULL), 0);
        assert_int_equal(zkr_election_join(e1), 0);
        assert_true(ZKT_WAIT_UNTIL(zkr_election_is_leader(e1), 10000));
        assert_int_equal(zkr_election_join(e2), 0);
        assert_true(
            ZKT_WAIT_UNTIL(zkt_count_children(raw, "/disp/fe") == 2, 10000));
        zkr_election_free(e2);
        zkr_election_free(e1);
        assert_true(
            ZKT_WAIT_UNTIL(zkt_count_children(raw, "/disp/fe") == 0, 10000));
        zkr_session_dispatch(s);
        assert_int_equal(rec.leader_on + rec.leader_off, 0);
    }

    /* Again, but the session's free finishes it. */
    assert_int_equal(zkr_lock_new(&b, s, "/disp/f", "b", NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(b, 10000, on_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(b) == ZKR_LOCK_HELD, 10000));
    zkr_lock_free(b);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(rec.acquired, 3);
    assert_int_equal(rec.foreign, 0);
    alarm(0);
}

/* An event-loop session, its CONNECTED dispatched. */
static zkr_session_t *open_connected(void)
{
    zkr_session_t *s = open_dispatched(zkt_server_hosts(server), 6000);

    assert_true(
        DISPATCH_UNTIL(s, zkr_session_state(s) == ZKR_STATE_CONNECTED, 10000));
    return s;
}

/* Slow completions, counted, that note whether two ever ran at once. */
static atomic_int slow_running, slow_overlap, slow_calls, slow_done;

static void slow_acquired(int rc, zkr_lock_t *l, void *data)
{
    (void)rc;
    (void)l;
    (void)data;
    if (atomic_fetch_add(&slow_running, 1) > 0)
        slow_overlap = 1;
    zkt_sleep_ms(300);
    slow_calls++;
    atomic_fetch_sub(&slow_running, 1);
    slow_done = 1;
}

static void slow_reset(void)
{
    slow_running = slow_overlap = slow_calls = slow_done = 0;
}

static void *dispatch_thread(void *arg)
{
    zkr_session_dispatch(arg);
    return NULL;
}

/* Issue 14 review: zkr_lock_free() on one thread while another thread's
 * dispatch runs that lock's callback waits for the callback to end (zkr.h:
 * free waits for a running callback of the handle). It used to return at
 * once: any thread counted as "the event thread" in event-loop mode. */
static void test_free_waits_for_other_dispatch(void **state)
{
    zkr_session_t *s = open_connected();
    zkr_lock_t *l = NULL;
    pthread_t th;

    (void)state;
    slow_reset();
    assert_int_equal(zkr_lock_new(&l, s, "/disp/fw", "a", NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(l, 10000, slow_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(readable(zkr_session_fd(s)), 10000));
    assert_int_equal(pthread_create(&th, NULL, dispatch_thread, s), 0);
    assert_true(ZKT_WAIT_UNTIL(slow_running == 1, 10000));
    zkr_lock_free(l);
    assert_int_equal(slow_done, 1); /* the callback had ended */
    pthread_join(th, NULL);
    assert_int_equal(slow_calls, 1);
    assert_int_equal(zkr_session_free(s), 0);
}

/* zkr.h: an async acquire's result "is the one when cb is called", and a
 * free cancels a pending acquire. In event-loop mode a grant waits for the
 * next dispatch; if the application frees the handle or releases the lock
 * before that, and another session is granted, the completion that the
 * dispatch then runs must not report the lock as held. */
static void letgo_before_dispatch(int release)
{
    zkr_session_t *s = open_connected(), *h = open_session(6000);
    zkr_lock_t *l = NULL, *m = NULL;

    memset(&rec, 0, sizeof(rec));
    rec.main = pthread_self();
    rec.s = s;
    rec.acq_rc = -1;
    assert_int_equal(zkr_lock_new(&l, s, "/disp/lg", "l", NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(l, -1, on_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(12000)));
    assert_int_equal(rec.acquired, 0); /* due, not run */
    if (release)
        assert_int_equal(zkr_lock_release(l), 0);
    else
        zkr_lock_free(l); /* returns at once: the completion is due */
    assert_int_equal(zkr_lock_new(&m, h, "/disp/lg", "m", NULL), 0);
    assert_int_equal(zkr_lock_acquire(m, zkt_scaled_ms(12000)), 0);
    assert_int_equal(rec.acquired, 0);
    assert_true(zkr_session_dispatch(s) >= 1);
    assert_int_equal(rec.acquired, 1);
    assert_int_equal(rec.acq_rc, ZKR_ECANCELED);
    assert_int_equal(zkr_lock_state(m), ZKR_LOCK_HELD);
    if (release)
        zkr_lock_free(l);
    zkr_lock_free(m);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(h), 0);
    assert_int_equal(rec.foreign, 0);
}

static void test_free_before_dispatch(void **state)
{
    (void)state;
    letgo_before_dispatch(0);
}

static void test_release_before_dispatch(void **state)
{
    (void)state;
    letgo_before_dispatch(1);
}

/* Completions told apart by their data (0 or 1): calls and result. */
static int gen_calls[2], gen_rc[2];

static void on_acquired_gen(int rc, zkr_lock_t *l, void *data)
{
    int i = *(const int *)data;

    (void)l;
    note_thread();
    gen_calls[i]++;
    gen_rc[i] = rc;
}

/* zkr.h: an async acquire's result "is the one when cb is called"; a
 * completion never says 0 for a grant that is not held then. In
 * event-loop mode the application releases a grant whose completion is
 * still due and acquires again on the same handle; that second grant is
 * lost too (a foreign client deletes its node) before the dispatch. The
 * first completion is about a grant let go (not 0), and the second must
 * report the loss: ZKR_ELOST, not 0, however the first was reported. */
static void test_reacquire_lost_before_dispatch(void **state)
{
    zkr_session_t *s = open_connected();
    zkr_lock_t *l = NULL;
    static const int first = 0, second = 1;
    char node[ZKR_NODE_MAX];

    (void)state;
    memset(&rec, 0, sizeof(rec));
    rec.main = pthread_self();
    memset(gen_calls, 0, sizeof(gen_calls));
    gen_rc[0] = gen_rc[1] = -1;
    assert_int_equal(zkr_lock_new(&l, s, "/disp/rl", "l", NULL), 0);
    assert_int_equal(
        zkr_lock_acquire_async(l, -1, on_acquired_gen, (void *)&first), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(12000)));
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(
        zkr_lock_acquire_async(l, -1, on_acquired_gen, (void *)&second), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(12000)));
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(gen_calls[0] + gen_calls[1], 0); /* due, not run */
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    /* The loss is learnt from the watch on our node (within the session
     * timeout), not from a dispatch. */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) != ZKR_LOCK_HELD,
                               zkt_scaled_ms(12000)));
    assert_true(DISPATCH_UNTIL(s, gen_calls[0] + gen_calls[1] == 2,
                               zkt_scaled_ms(12000)));
    assert_int_equal(gen_calls[0], 1);
    assert_int_equal(gen_calls[1], 1);
    assert_int_equal(gen_rc[1], ZKR_ELOST);
    assert_int_equal(gen_rc[0], ZKR_ECANCELED);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(rec.foreign, 0);
}

/* Issue 14 review: zkr_session_free() with a handle open returns
 * ZKR_EINUSE having done nothing (no callback run: it used to dispatch
 * first); and while another thread dispatches, it waits for that dispatch
 * instead of running callbacks beside it (it used to run the next one at
 * the same time, on its own thread). */
static void test_session_free_dispatch_rules(void **state)
{
    zkr_session_t *s = open_connected();
    zkr_lock_t *l1 = NULL, *l2 = NULL;
    pthread_t th;

    (void)state;
    slow_reset();
    assert_int_equal(zkr_lock_new(&l1, s, "/disp/fe1", "a", NULL), 0);
    assert_int_equal(zkr_lock_new(&l2, s, "/disp/fe2", "a", NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(l1, 10000, slow_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(readable(zkr_session_fd(s)), 10000));
    assert_int_equal(zkr_session_free(s), ZKR_EINUSE);
    assert_int_equal(slow_calls, 0); /* nothing was done */
    assert_true(readable(zkr_session_fd(s)));
    assert_int_equal(zkr_lock_acquire_async(l2, 10000, slow_acquired, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l2) == ZKR_LOCK_HELD, 10000));
    /* Both completions due; the handles freed (their completions still
     * come, each once). Another thread dispatches them, slowly. */
    zkr_lock_free(l1);
    zkr_lock_free(l2);
    assert_int_equal(slow_calls, 0);
    assert_int_equal(pthread_create(&th, NULL, dispatch_thread, s), 0);
    assert_true(ZKT_WAIT_UNTIL(slow_running == 1, 10000));
    assert_int_equal(zkr_session_free(s), 0);
    pthread_join(th, NULL);
    assert_int_equal(slow_calls, 2);
    assert_int_equal(slow_overlap, 0);
}

static int never_runs(zkr_election_t *e, void *data)
{
    (void)e;
    (void)data;
    fail_msg("the leader function ran on the dispatching thread");
    return 0;
}

struct awaiter {
    zkr_election_t *e;
    int rc;
};

static void *await_forever(void *arg)
{
    struct awaiter *a = arg;
    a->rc = zkr_election_await(a->e, -1);
    return NULL;
}

/* Issue 14 review: on the thread that dispatches, waits without end for a
 * leadership return ZKR_EDEADLK (the end of a candidacy is delivered by
 * that thread's dispatch, which could not run meanwhile). A bounded look
 * works there, and another thread may wait. */
static void test_election_waits_on_dispatcher(void **state)
{
    zkr_session_t *s = open_connected();
    zkr_election_t *e = NULL;
    struct awaiter a = {NULL, -1};
    pthread_t th;

    (void)state;
    assert_int_equal(
        zkr_election_new(&e, s, "/disp/ew", "a", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(zkr_election_run(e, never_runs, NULL, 0), ZKR_EDEADLK);
    assert_int_equal(zkr_election_join(e), 0);
    assert_int_equal(zkr_election_await(e, -1), ZKR_EDEADLK);
    a.e = e;
    assert_int_equal(pthread_create(&th, NULL, await_forever, &a), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(zkr_election_await(e, 0), 0);
    assert_int_equal(zkr_election_await(e, 1000), 0);
    zkr_election_free(e);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A poll() loop on the descriptor while the connection is blackholed:
 * from SUSPENDED to LOST it wakes only for the callbacks that are due
 * (a handful), where a level-triggered "suspended" descriptor would wake
 * it without end. */
static void test_no_spin_while_suspended(void **state)
{
    const int T = 4000;
    zkr_session_t *s;
    zkr_lock_t *l = NULL;
    long wakeups = 0, empty = 0;
    int64_t until;

    (void)state;
    memset(&rec, 0, sizeof(rec));
    rec.main = pthread_self();
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    s = open_dispatched(zkt_proxy_hosts(proxy), T);
    rec.s = s;
    assert_int_equal(zkr_session_add_listener(s, on_session, NULL), 0);
    assert_int_equal(zkr_lock_new(&l, s, "/disp/s", "s", NULL), 0);
    assert_int_equal(zkr_lock_set_listener(l, on_lock, NULL), 0);
    assert_int_equal(zkr_lock_acquire_async(l, 10000, on_acquired, NULL), 0);
    assert_true(DISPATCH_UNTIL(s, rec.acquired == 1, 10000));
    assert_int_equal(rec.acq_rc, 0);

    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    /* The window: until LOST has been delivered, plus a second. */
    until = zkt_now_ms() + zkt_scaled_ms(4 * T);
    while (zkt_now_ms() < until) {
        struct pollfd p = {zkr_session_fd(s), POLLIN, 0};
        if (poll(&p, 1, 100) == 1) {
            wakeups++;
            empty += zkr_session_dispatch(s) == 0;
        }
        if (rec.lost == 1 && rec.lost_s == 1 && until > zkt_now_ms() + 1000)
            until = zkt_now_ms() + 1000;
    }
    print_message("# wakeups from blackhole to LOST (+1 s): %ld\n", wakeups);
    assert_int_equal(rec.susp_s, 1);
    assert_int_equal(rec.suspended, 1);
    assert_int_equal(rec.lost_s, 1);
    assert_int_equal(rec.lost, 1);
    /* Each wake-up had callbacks to run. */
    assert_int_equal(empty, 0);
    assert_true(wakeups >= 1 && wakeups <= 8);

    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(rec.foreign, 0);
}

/* The same window for a lock's own descriptor, with an event thread: a
 * loop that reads the state when woken wakes once per change (SUSPENDED,
 * LOST), not without end while SUSPENDED (issue 14 measured ~500,000
 * wake-ups), and is quiet once it has observed the loss. */
static void test_lock_fd_no_spin_while_suspended(void **state)
{
    const int T = 4000;
    zkr_session_t *s = open_proxied(T);
    zkr_lock_t *l = new_lock(s, "/disp/l", "l");
    int seen[ZKR_LOCK_LOST + 1] = {0};
    long wakeups = 0;
    int64_t until;
    int fd = zkr_lock_fd(l);

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(zkr_lock_acquire(l, 10000), 0);
    assert_false(readable(fd));
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    until = zkt_now_ms() + zkt_scaled_ms(4 * T);
    while (zkt_now_ms() < until && !seen[ZKR_LOCK_LOST]) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) == 1) {
            wakeups++;
            seen[zkr_lock_state(l)]++;
        }
    }
    print_message("# lock descriptor wake-ups from blackhole to LOST: %ld\n",
                  wakeups);
    assert_true(seen[ZKR_LOCK_SUSPENDED] >= 1);
    assert_int_equal(seen[ZKR_LOCK_LOST], 1);
    assert_true(wakeups <= 4);
    /* A loss stays signalled, read or not, until observed. */
    assert_true(readable(fd));
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_LOST);
    assert_true(readable(fd));
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    assert_false(readable(fd));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The text of the daemon's output so far (NUL-terminated in buf). */
static const char *output(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;

    if (f != NULL) {
        n = fread(buf, 1, len - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* The node of the election's first candidate (the leader), or "". */
static void first_candidate(zkr_election_t *e, char *node, size_t len)
{
    zkr_contender_t *c = NULL;
    int n = 0;

    node[0] = '\0';
    if (zkr_election_participants(e, &c, &n) == 0 && n > 0)
        snprintf(node, len, "%s", c[0].node);
    zkr_contenders_free(c, n);
}

/* An example daemon (examples/evloop, examples/evloop_uv: same options,
 * same output) against the server: it takes the lock, loses it to an
 * operator's delete and takes it again; in the election it waits behind
 * another candidate, leads once that one leaves, stops on an operator's
 * delete of its node while another leads, and leads again; reports the
 * end of its candidacy when a delete meets a directory that refuses it
 * CREATE (LEADER ERROR ZNOAUTH, the descriptor wakes it); then exits on
 * SIGTERM, all on its one thread (its nodes go under PREFIX), woken by
 * the election's descriptor for each gain and loss and never spinning on
 * it (issue 14). */
static void run_example_daemon(const char *example, const char *prefix)
{
    char *prog = zkt_build_path(example);
    char *dir = zkt_mkdtemp("zkr-evloop-"), out[512], buf[8192];
    char lpath[128], epath[128];
    char *argv[] = {prog, "-s",           (char *)zkt_server_hosts(server),
                    "-p", (char *)prefix, "-i",
                    "d1", "-T",           "6000",
                    NULL};
    int fd, st;
    pid_t pid;
    long wakeups = -1;
    struct String_vector v = {0, NULL};
    zkr_session_t *ts = open_session(10000);
    zkr_election_t *te = NULL;
    char node[600];
    const char *on1, *off, *on2;

    snprintf(lpath, sizeof(lpath), "%s/lock", prefix);
    snprintf(epath, sizeof(epath), "%s/election", prefix);
    /* Another candidate leads before the daemon joins. */
    assert_int_equal(
        zkr_election_new(&te, ts, epath, "t", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(zkr_election_join(te), 0);
    assert_int_equal(zkr_election_await(te, 10000), 0);
    snprintf(out, sizeof(out), "%s/out", dir);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    pid = zkt_spawn(argv, fd);
    close(fd);
    assert_true(pid > 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, lpath) == 1 &&
                                   zkt_count_children(raw, epath) == 2,
                               20000));
    zkt_sleep_ms(500);
    assert_null(strstr(output(out, buf, sizeof(buf)), "LEADER"));
    /* t leaves: the daemon is woken to lead. */
    assert_int_equal(zkr_election_leave(te), 0);
    assert_true(ZKT_WAIT_UNTIL(
        strstr(output(out, buf, sizeof(buf)), "LEADER ON ") != NULL, 20000));
    /* t joins behind it; an operator deletes the daemon's node: it stops,
     * rejoins behind t (which leads) and waits, its descriptor quiet. */
    assert_int_equal(zkr_election_join(te), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, epath) == 2, 20000));
    first_candidate(te, node, sizeof(node));
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_int_equal(zkr_election_await(te, 20000), 0);
    assert_true(ZKT_WAIT_UNTIL(
        strstr(output(out, buf, sizeof(buf)), "LEADER OFF\n") != NULL, 20000));
    zkt_sleep_ms(1000); /* a loop that spun would count its wake-ups */
    assert_int_equal(zkr_election_leave(te), 0);
    /* An operator deletes the holder's node: the daemon hears LOST and
     * asks again. */
    assert_int_equal(zoo_get_children(raw, lpath, 0, &v), ZOK);
    assert_int_equal(v.count, 1);
    {
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", lpath, v.data[0]);
        assert_int_equal(zoo_delete(raw, path, -1), ZOK);
    }
    deallocate_String_vector(&v);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, lpath) == 1, 20000));
    assert_true(ZKT_WAIT_UNTIL(
        (off = strstr(output(out, buf, sizeof(buf)), "LEADER OFF\n")) != NULL &&
            strstr(off, "LEADER ON ") != NULL,
        20000));
    /* Issue 14 review: an operator takes CREATE off the directory and
     * deletes the daemon's node: it stops, its rejoin fails with ZNOAUTH,
     * and its loop hears that its candidacy ended (the descriptor used to
     * stay quiet). t, behind it, leads. */
    assert_int_equal(zkr_election_join(te), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, epath) == 2, 20000));
    {
        struct ACL rd = {ZOO_PERM_READ | ZOO_PERM_DELETE | ZOO_PERM_ADMIN,
                         {"world", "anyone"}};
        struct ACL all = {ZOO_PERM_ALL, {"world", "anyone"}};
        struct ACL_vector acl_rd = {1, &rd}, acl_all = {1, &all};

        first_candidate(te, node, sizeof(node));
        assert_int_equal(zoo_set_acl(raw, epath, -1, &acl_rd), ZOK);
        assert_int_equal(zoo_delete(raw, node, -1), ZOK);
        assert_int_equal(zkr_election_await(te, 20000), 0);
        assert_true(ZKT_WAIT_UNTIL(strstr(output(out, buf, sizeof(buf)),
                                          "LEADER ERROR ZNOAUTH\n") != NULL,
                                   20000));
        assert_int_equal(zoo_set_acl(raw, epath, -1, &acl_all), ZOK);
    }
    assert_int_equal(zkr_election_leave(te), 0);
    zkt_sleep_ms(1000);
    kill(pid, SIGTERM);
    assert_int_equal(zkt_wait_pid(pid, 20000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    output(out, buf, sizeof(buf));
    print_message("# %s output:\n%s", example, buf);
    assert_non_null(strstr(buf, "SESSION CONNECTED\n"));
    /* led, stopped, led again with a higher epoch */
    on1 = strstr(buf, "LEADER ON ");
    assert_non_null(on1);
    off = strstr(on1, "LEADER OFF\n");
    assert_non_null(off);
    on2 = strstr(off, "LEADER ON ");
    assert_non_null(on2);
    assert_true(atoll(on2 + 10) > atoll(on1 + 10));
    /* held, lost, held again */
    {
        char *h1 = strstr(buf, "LOCK HELD "), *lo, *h2;
        assert_non_null(h1);
        lo = strstr(h1, "LOCK LOST\n");
        assert_non_null(lo);
        h2 = strstr(lo, "LOCK HELD ");
        assert_non_null(h2);
    }
    /* The one error: the end of its candidacy, after it stopped leading. */
    {
        char *err = strstr(buf, "ERROR");
        assert_non_null(err);
        assert_true(err > on2);
        assert_int_equal(strncmp(err - 7, "LEADER ERROR ZNOAUTH\n", 21), 0);
        assert_null(strstr(err + 1, "ERROR"));
        assert_non_null(strstr(on2, "LEADER OFF\n"));
    }
    assert_non_null(strstr(buf, "WAKEUPS "));
    wakeups = atol(strstr(buf, "WAKEUPS ") + 8);
    print_message("# %s wake-ups: %ld\n", example, wakeups);
    /* A few per event; a loop spinning on a descriptor wakes hundreds of
     * thousands of times a second. */
    assert_true(wakeups > 0 && wakeups < 10000);
    assert_non_null(strstr(buf, "SESSION CLOSED\n"));
    /* Its nodes are gone with it. */
    assert_int_equal(zkt_count_children(raw, lpath), 0);
    assert_int_equal(zkt_count_children(raw, epath), 0);
    zkr_election_free(te);
    zkr_session_free(ts);
    zkt_rm_rf(dir);
    free(dir);
    free(prog);
}

static void test_example_daemon(void **state)
{
    (void)state;
    run_example_daemon("examples/evloop", "/disp/ex");
}

/* The same daemon started while its ZooKeeper is down (issue 32: an
 * event-loop daemon started before its server comes up). It opens with
 * no_wait: it runs at once, says nothing and does not spin while no
 * server answers, for longer than a session timeout and than a waiting
 * open's connect timeout; once the server is up its listener says
 * SESSION CONNECTED, it takes its lock and leads (alone on its paths),
 * and it exits cleanly. */
static void test_example_daemon_before_server(void **state)
{
    enum { TD = 6000 }; /* the daemon's session timeout (-T) */
    char *prog = zkt_build_path("examples/evloop");
    char *dir = zkt_mkdtemp("zkr-evloop-"), out[512], buf[8192];
    char *argv[] = {prog, "-s",          (char *)zkt_server_hosts(server),
                    "-p", "/disp/early", "-i",
                    "d2", "-T",          "6000",
                    NULL};
    int fd, st;
    pid_t pid;
    long wakeups;

    (void)state;
    snprintf(out, sizeof(out), "%s/out", dir);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    pid = zkt_spawn(argv, fd);
    close(fd);
    assert_true(pid > 0);
    zkt_sleep_ms(2 * TD);
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still running */
    assert_null(strstr(output(out, buf, sizeof(buf)), "SESSION"));
    assert_null(strstr(buf, "ERROR"));
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_true(ZKT_WAIT_UNTIL(
        strstr(output(out, buf, sizeof(buf)), "LOCK HELD ") != NULL &&
            strstr(buf, "LEADER ON ") != NULL,
        zkt_scaled_ms(60000)));
    assert_non_null(strstr(buf, "SESSION CONNECTED\n"));
    assert_true(strstr(buf, "SESSION CONNECTED\n") < strstr(buf, "LOCK HELD "));
    kill(pid, SIGTERM);
    assert_int_equal(zkt_wait_pid(pid, 20000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    output(out, buf, sizeof(buf));
    print_message("# evloop started before its server:\n%s", buf);
    assert_non_null(strstr(buf, "WAKEUPS "));
    wakeups = atol(strstr(buf, "WAKEUPS ") + 8);
    assert_true(wakeups > 0 && wakeups < 10000); /* it never spun */
    assert_null(strstr(buf, "ERROR"));
    zkt_rm_rf(dir);
    free(dir);
    free(prog);
}

/* The same daemon on libuv (built when configure found libuv). */
static void test_example_daemon_uv(void **state)
{
    char *prog = zkt_build_path("examples/evloop_uv");
    int built = access(prog, X_OK) == 0;

    (void)state;
    free(prog);
    /* Not cmocka's skip(): Debian's cmocka 1.1.5 reports it as a failure
     * under TAP. CI installs libuv, so there it is always built. */
    if (!built) {
        print_message("# examples/evloop_uv not built (no libuv): not run\n");
        return;
    }
    run_example_daemon("examples/evloop_uv", "/disp/exuv");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_callbacks_on_caller),
        cmocka_unit_test(test_free_in_dispatch_mode),
        cmocka_unit_test(test_free_waits_for_other_dispatch),
        cmocka_unit_test(test_free_before_dispatch),
        cmocka_unit_test(test_release_before_dispatch),
        cmocka_unit_test(test_reacquire_lost_before_dispatch),
        cmocka_unit_test(test_session_free_dispatch_rules),
        cmocka_unit_test(test_election_waits_on_dispatcher),
        cmocka_unit_test(test_no_spin_while_suspended),
        cmocka_unit_test(test_lock_fd_no_spin_while_suspended),
        cmocka_unit_test(test_example_daemon),
        cmocka_unit_test(test_example_daemon_uv),
        cmocka_unit_test(test_example_daemon_before_server),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("dispatch", tests, proxy_setup,
                                       proxy_teardown);
}
