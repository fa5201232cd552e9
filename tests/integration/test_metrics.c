/* Integration tests of the library metrics (zkr_metrics_value(),
 * zkr_metrics_text()) against a real ZooKeeper server: in scenarios whose
 * outcome the rules fix (a free lock is granted, a held one makes a try
 * fail with ZKR_EBUSY and a bounded wait with ZKR_ETIMEDOUT, a cancel
 * ends an acquire with ZKR_ECANCELED, an expiry loses a grant), every
 * count must be exactly what happened. Times are checked only against
 * lower bounds that a sleep guarantees. */
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

/* A recipe metric of session s (kind, path). */
static double rv(zkr_session_t *s, const char *name, const char *kind,
                 const char *path)
{
    double v = -1;
    assert_int_equal(zkr_metrics_value(s, name, kind, path, &v), 0);
    return v;
}

/* A session metric. */
static double sv(zkr_session_t *s, const char *name)
{
    return rv(s, name, NULL, NULL);
}

#define LOCKV(s, name) rv(s, name, "lock", "/m/x")

static void done(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    *(atomic_int *)data = rc;
}

/* Checks the text has this exact line. */
static void has_line(zkr_session_t *s, const char *line)
{
    char *text = NULL, want[512];
    size_t len = 0;

    assert_int_equal(zkr_metrics_text(s, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    snprintf(want, sizeof(want), "\n%s\n", line);
    if (strstr(text, want) == NULL)
        fail_msg("missing line '%s' in:\n%s", line, text);
    zkr_metrics_text_free(text);
}

/* Reads the read API refuses, and why. */
static const struct {
    const char *name, *kind, *path;
    int rc;
} bad[] = {
    {"zkr_nothing", "lock", "/m/x", ZBADARGUMENTS},
    {"zkr_acquisitions_total", NULL, NULL, ZBADARGUMENTS}, /* no labels */
    {"zkr_acquisitions_total", "lock", NULL, ZBADARGUMENTS},
    {"zkr_sessions_total", "lock", "/m/x", ZBADARGUMENTS}, /* labels */
    {"zkr_wait_seconds", "lock", "/m/x", ZBADARGUMENTS},   /* no part */
    {"zkr_wait_seconds_bucket", "lock", "/m/x", ZBADARGUMENTS},
    {"zkr_acquisitions_total", "lock", "/m/other", ZNONODE},
    {"zkr_acquisitions_total", "read", "/m/x", ZNONODE},
    {"zkr_leader_seconds_total", "lock", "/m/x", ZNONODE}, /* elections */
};

/* Every way an acquire ends is counted once, on the right counter, and
 * the gauges follow the handle's state. */
static void test_acquire_outcomes(void **state)
{
    zkr_session_t *m = open_session(10000), *h = open_session(10000);
    zkr_lock_t *l = new_lock(m, "/m/x", "m"), *hl = new_lock(h, "/m/x", "h");
    atomic_int got = 1;
    double v;

    (void)state;
    /* The path exists: an acquire where it does not would count the
     * listing pipelined behind its failed create too. */
    zoo_create(raw, "/m", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(
        zoo_create(raw, "/m/x", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    /* Nothing happened yet: every counter is 0, the handle is counted. */
    assert_true(LOCKV(m, "zkr_acquisitions_total") == 0);
    assert_true(LOCKV(m, "zkr_handles") == 1);
    assert_true(LOCKV(m, "zkr_wait_seconds_count") == 0);

    /* A free lock: granted on the first listing. */
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_true(LOCKV(m, "zkr_acquisitions_total") == 1);
    assert_true(LOCKV(m, "zkr_holding") == 1);
    assert_true(LOCKV(m, "zkr_wait_seconds_count") == 1);
    assert_true(LOCKV(m, "zkr_grant_listings_count") == 1);
    assert_true(LOCKV(m, "zkr_grant_listings_sum") == 1);
    assert_true(LOCKV(m, "zkr_handoffs_total") == 0);
    zkt_sleep_ms(100);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_true(LOCKV(m, "zkr_holding") == 0);
    assert_true(LOCKV(m, "zkr_hold_seconds_count") == 1);
    assert_true(LOCKV(m, "zkr_hold_seconds_sum") >= 0.1);

    /* Held by the other session: a try is busy, a bounded wait times
     * out, an unbounded one is canceled. */
    assert_int_equal(zkr_lock_acquire(hl, -1), 0);
    assert_int_equal(zkr_lock_acquire(l, 0), ZKR_EBUSY);
    assert_true(LOCKV(m, "zkr_acquire_busy_total") == 1);
    assert_int_equal(zkr_lock_acquire(l, 200), ZKR_ETIMEDOUT);
    assert_true(LOCKV(m, "zkr_acquire_timeouts_total") == 1);
    assert_int_equal(zkr_lock_acquire_async(l, -1, done, (void *)&got), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/m/x") == 2, 5000));
    assert_true(LOCKV(m, "zkr_waiting") == 1);
    assert_int_equal(zkr_lock_cancel(l), 0);
    assert_true(ZKT_WAIT_UNTIL(got == ZKR_ECANCELED, 5000));
    assert_true(LOCKV(m, "zkr_acquire_cancels_total") == 1);
    assert_true(LOCKV(m, "zkr_waiting") == 0);

    /* A wait ended by the holder's release: a handoff, after at least a
     * second listing; it waited at least as long as the holder held. */
    got = 1;
    assert_int_equal(zkr_lock_acquire_async(l, -1, done, (void *)&got), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/m/x") == 2, 5000));
    zkt_sleep_ms(100);
    assert_int_equal(zkr_lock_release(hl), 0);
    assert_true(ZKT_WAIT_UNTIL(got == 0, 5000));
    assert_true(LOCKV(m, "zkr_acquisitions_total") == 2);
    assert_true(LOCKV(m, "zkr_handoffs_total") == 1);
    assert_true(LOCKV(m, "zkr_grant_listings_sum") >= 3);
    assert_true(LOCKV(m, "zkr_wait_seconds_sum") >= 0.1);
    assert_int_equal(zkr_lock_release(l), 0);

    /* Nothing else was counted; the other session counted its own. */
    assert_true(LOCKV(m, "zkr_acquire_lost_total") == 0);
    assert_true(LOCKV(m, "zkr_acquire_errors_total") == 0);
    assert_true(LOCKV(m, "zkr_lost_total") == 0);
    assert_true(LOCKV(m, "zkr_suspended_total") == 0);
    assert_true(LOCKV(m, "zkr_hold_seconds_count") == 2);
    assert_true(LOCKV(h, "zkr_acquisitions_total") == 1);
    has_line(m, "zkr_acquisitions_total{path=\"/m/x\",kind=\"lock\"} 2");
    has_line(m, "zkr_acquire_busy_total{path=\"/m/x\",kind=\"lock\"} 1");
    has_line(m, "zkr_hold_seconds_count{path=\"/m/x\",kind=\"lock\"} 2");
    has_line(m, "zkr_grant_listings_bucket{path=\"/m/x\",kind=\"lock\","
                "le=\"1\"} 1");
    has_line(m, "zkr_session_state{state=\"CONNECTED\"} 1");

    /* A freed handle's counts stay; the handle is no longer counted. */
    zkr_lock_free(l);
    assert_true(LOCKV(m, "zkr_acquisitions_total") == 2);
    assert_true(LOCKV(m, "zkr_handles") == 0);
    /* The read API's errors. */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(
            zkr_metrics_value(m, bad[i].name, bad[i].kind, bad[i].path, &v),
            bad[i].rc);
    assert_int_equal(
        zkr_metrics_value(NULL, "zkr_sessions_total", NULL, NULL, &v),
        ZBADARGUMENTS);
    assert_int_equal(zkr_metrics_write(m, NULL), ZBADARGUMENTS);
    zkr_lock_free(hl);
    zkr_session_free(m);
    zkr_session_free(h);
}

/* An expiry loses the grant (LOST once), the waiter's acquire (ZKR_ELOST
 * once), and the session (one loss, then a second session). */
static void test_expiry_counts(void **state)
{
    zkr_session_t *m = open_session(10000), *h = open_session(10000);
    zkr_lock_t *l = new_lock(m, "/m/exp", "m"),
               *w = new_lock(m, "/m/wait", "w");
    zkr_lock_t *hl = new_lock(h, "/m/wait", "h");
    atomic_int got = 1;

    (void)state;
    assert_true(sv(m, "zkr_sessions_total") == 1);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_acquire(hl, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(w, -1, done, (void *)&got), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/m/wait") == 2, 5000));
    expire(m);
    assert_true(ZKT_WAIT_UNTIL(got == ZKR_ELOST, 10000));
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_LOST, 10000));
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    assert_true(rv(m, "zkr_lost_total", "lock", "/m/exp") == 1);
    assert_true(rv(m, "zkr_hold_seconds_count", "lock", "/m/exp") == 1);
    assert_true(rv(m, "zkr_acquire_lost_total", "lock", "/m/wait") == 1);
    assert_true(rv(m, "zkr_lost_total", "lock", "/m/wait") == 0);
    /* The session's loss is counted when the client learns of the expiry.
     * The locks may learn first: the takeover that expires the session
     * moves it to another connection, m may reconnect to it before it is
     * closed, and then sees its nodes deleted (LOST) before the server
     * tells it the session expired. */
    assert_true(ZKT_WAIT_UNTIL(sv(m, "zkr_session_losses_total") == 1, 10000));
    assert_int_equal(zkr_session_wait_connected(m, 10000), 0);
    assert_true(sv(m, "zkr_sessions_total") == 2);
    assert_true(rv(h, "zkr_lost_total", "lock", "/m/wait") == 0);
    zkr_lock_free(l);
    zkr_lock_free(w);
    zkr_lock_free(hl);
    zkr_session_free(m);
    zkr_session_free(h);
}

/* A server restart within the session timeout: the grant is SUSPENDED
 * once, the session reconnects once, with a positive margin left. */
static void test_reconnect_counts(void **state)
{
    enum { T = ZKT_RESTART_SESSION_MS };
    zkr_session_t *m = open_session(T);
    zkr_lock_t *l = new_lock(m, "/m/rc", "m");
    double v;

    (void)state;
    assert_int_equal(zkr_metrics_value(m,
                                       "zkr_session_reconnect_margin_seconds",
                                       NULL, NULL, &v),
                     ZNONODE);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkt_server_restart(server), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_state(m) == ZKR_STATE_RECONNECTED, T));
    assert_true(sv(m, "zkr_session_suspensions_total") == 1);
    assert_true(sv(m, "zkr_session_reconnects_total") == 1);
    assert_true(sv(m, "zkr_session_losses_total") == 0);
    assert_true(sv(m, "zkr_session_reconnect_margin_seconds") > 0);
    assert_true(rv(m, "zkr_suspended_total", "lock", "/m/rc") == 1);
    assert_true(rv(m, "zkr_lost_total", "lock", "/m/rc") == 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_HELD, T));
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    zkr_session_free(m);
}

/* Heartbeats are timed; the safe deadline's margin and the timeout are
 * reported. */
static void test_session_gauges(void **state)
{
    zkr_session_t *m = open_session(4000);
    double v = 0;

    (void)state;
    assert_true(ZKT_WAIT_UNTIL(
        zkr_metrics_value(m, "zkr_session_heartbeat_seconds_count", NULL, NULL,
                          &v) == 0 &&
            v >= 2,
        10000));
    assert_int_equal(zkr_metrics_value(m, "zkr_session_heartbeat_last_seconds",
                                       NULL, NULL, &v),
                     0);
    assert_true(v >= 0);
    assert_true(sv(m, "zkr_session_timeout_seconds") ==
                zkr_session_timeout_ms(m) / 1000.0);
    v = sv(m, "zkr_session_valid_seconds");
    assert_true(v > 0 && v <= zkr_session_timeout_ms(m) / 1000.0);
    zkr_session_free(m);
}

/* An election: becoming leader and leaving are two changes; the time as
 * leader covers the leadership (running, then ended). */
static void test_election_counts(void **state)
{
    zkr_session_t *m = open_session(10000);
    zkr_election_t *e = NULL;

    (void)state;
    assert_int_equal(
        zkr_election_new(&e, m, "/m/el", "c1", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(zkr_election_join(e), 0);
    assert_int_equal(zkr_election_await(e, 10000), 0);
    assert_true(rv(m, "zkr_leader_changes_total", "election", "/m/el") == 1);
    zkt_sleep_ms(100);
    assert_true(rv(m, "zkr_leader_seconds_total", "election", "/m/el") >= 0.1);
    assert_int_equal(zkr_election_leave(e), 0);
    assert_true(rv(m, "zkr_leader_changes_total", "election", "/m/el") == 2);
    assert_true(rv(m, "zkr_leader_seconds_total", "election", "/m/el") >= 0.1);
    assert_true(rv(m, "zkr_acquisitions_total", "election", "/m/el") == 1);
    zkr_election_free(e);
    zkr_session_free(m);
}

/* Each recipe has its kind: the two sides of a read/write lock on one
 * path are two series, a semaphore a third. */
static void test_kinds(void **state)
{
    zkr_session_t *m = open_session(10000);
    zkr_lock_t *r = NULL, *w = NULL, *p = NULL, *r2 = NULL, *w2 = NULL;

    (void)state;
    assert_int_equal(zkr_rwlock_new(&r, &w, m, "/m/rw", "m", NULL), 0);
    /* The writer is another pair's: one pair's sides never queue
     * together (w would be refused with ZKR_ESTATE). */
    assert_int_equal(zkr_rwlock_new(&r2, &w2, m, "/m/rw", "m", NULL), 0);
    assert_int_equal(zkr_semaphore_new(&p, m, "/m/sem", 2, "m", NULL), 0);
    assert_int_equal(zkr_lock_acquire(r, -1), 0);
    assert_int_equal(zkr_lock_release(r), 0);
    assert_int_equal(zkr_lock_acquire(r, -1), 0);
    assert_int_equal(zkr_lock_acquire(w2, 0), ZKR_EBUSY);
    assert_int_equal(zkr_lock_acquire(p, -1), 0);
    assert_true(rv(m, "zkr_acquisitions_total", "read", "/m/rw") == 2);
    assert_true(rv(m, "zkr_acquire_busy_total", "write", "/m/rw") == 1);
    assert_true(rv(m, "zkr_acquisitions_total", "write", "/m/rw") == 0);
    assert_true(rv(m, "zkr_holding", "semaphore", "/m/sem") == 1);
    has_line(m, "zkr_acquisitions_total{path=\"/m/rw\",kind=\"read\"} 2");
    has_line(m, "zkr_acquisitions_total{path=\"/m/sem\",kind=\"semaphore\"} 1");
    /* Freed while held: the hold ends with the handle. */
    zkr_lock_free(r);
    assert_true(rv(m, "zkr_hold_seconds_count", "read", "/m/rw") == 2);
    zkr_lock_free(w);
    zkr_lock_free(r2);
    zkr_lock_free(w2);
    zkr_lock_free(p);
    zkr_session_free(m);
}

/* Issue 19, item 2: a session's entries are found through a hash index
 * that grows as paths are added. Whatever the number of paths, each
 * (kind, path) keeps its own counts: 300 distinct lock paths (the index
 * doubles several times), path i acquired i % 4 + 1 times, and a read
 * lock on every third path (a second kind on the same path); handles
 * made again on a path add to its existing series. Every 50th path has a
 * handle left holding: the gauges find its row. */
enum { MANY = 300 };

static void many_path(char *buf, size_t n, int i)
{
    snprintf(buf, n, "/m/many/p%03d", i);
}

static void test_many_paths(void **state)
{
    zkr_session_t *m = open_session(10000);
    zkr_lock_t *held[MANY / 50];
    char path[64], line[160], *text = NULL;
    size_t len = 0;
    int series = 0;

    (void)state;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < MANY; i++) {
            zkr_lock_t *l = NULL, *r = NULL, *w = NULL;

            many_path(path, sizeof(path), i);
            assert_int_equal(zkr_lock_new(&l, m, path, "m", NULL), 0);
            /* Round 0 acquires once; round 1 the rest, on a new handle
             * (but the one the held handle makes). */
            for (int k = 0; k < (round == 0 ? 1 : i % 4 - (i % 50 == 7)); k++) {
                assert_int_equal(zkr_lock_acquire(l, -1), 0);
                assert_int_equal(zkr_lock_release(l), 0);
            }
            zkr_lock_free(l);
            if (i % 3 == 0 && round == 1) {
                assert_int_equal(zkr_rwlock_new(&r, &w, m, path, "m", NULL), 0);
                assert_int_equal(zkr_lock_acquire(r, -1), 0);
                zkr_lock_free(r);
                zkr_lock_free(w);
            }
        }
    for (int i = 7; i < MANY; i += 50) {
        many_path(path, sizeof(path), i);
        assert_int_equal(zkr_lock_new(&held[i / 50], m, path, "m", NULL), 0);
    }
    for (int i = 7; i < MANY; i += 50)
        assert_int_equal(zkr_lock_acquire(held[i / 50], -1), 0);
    for (int i = 0; i < MANY; i++) {
        many_path(path, sizeof(path), i);
        assert_true(rv(m, "zkr_acquisitions_total", "lock", path) == i % 4 + 1);
        assert_true(rv(m, "zkr_hold_seconds_count", "lock", path) ==
                    i % 4 + 1 - (i % 50 == 7));
        if (i % 3 == 0) {
            assert_true(rv(m, "zkr_acquisitions_total", "read", path) == 1);
            assert_true(rv(m, "zkr_acquisitions_total", "write", path) == 0);
        } else {
            double v = -1;
            assert_int_equal(zkr_metrics_value(m, "zkr_acquisitions_total",
                                               "read", path, &v),
                             ZNONODE);
        }
        assert_true(rv(m, "zkr_handles", "lock", path) == (i % 50 == 7));
        assert_true(rv(m, "zkr_holding", "lock", path) == (i % 50 == 7));
    }
    /* The text has each series once, with its own value. */
    assert_int_equal(zkr_metrics_text(m, &text, &len), 0);
    for (const char *p = text;
         (p = strstr(p, "\nzkr_acquisitions_total{")) != NULL; p++)
        series++;
    assert_int_equal(series, MANY + 2 * ((MANY + 2) / 3));
    for (int i = 0; i < MANY; i++) {
        many_path(path, sizeof(path), i);
        snprintf(line, sizeof(line),
                 "\nzkr_acquisitions_total{path=\"%s\",kind=\"lock\"} %d\n",
                 path, i % 4 + 1);
        if (strstr(text, line) == NULL)
            fail_msg("missing line '%s'", line + 1);
    }
    zkr_metrics_text_free(text);
    for (int i = 0; i < MANY / 50; i++)
        zkr_lock_free(held[i]);
    zkr_session_free(m);
}

static void barrier_done(int rc, int changed, void *data)
{
    (void)changed;
    *(atomic_int *)data = rc;
}

static void dbarrier_done(int rc, void *data)
{
    *(atomic_int *)data = rc;
}

/* The text holds this many lines that start with prefix. */
static int count_lines(zkr_session_t *s, const char *prefix)
{
    char *text = NULL;
    int n = 0;

    assert_int_equal(zkr_metrics_text(s, &text, NULL), 0);
    for (char *p = text; p != NULL && *p != '\0';) {
        n += strncmp(p, prefix, strlen(prefix)) == 0;
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    zkr_metrics_text_free(text);
    return n;
}

/* The gauges of the recipes that are no contenders: a barrier's waits in
 * progress, a double barrier's enter, a group's members, a cache's
 * entries and lag (how long its view may have been behind: growing while
 * its reads are refused, 0 once a view is read). Each series goes with
 * its last handle. */
static void test_recipe_gauges(void **state)
{
    zkr_session_t *s = open_session(10000), *o = open_session(10000);
    struct ACL write_only = {ZOO_PERM_WRITE | ZOO_PERM_ADMIN,
                             {"world", "anyone"}};
    struct ACL_vector no_read = {1, &write_only};
    zkr_barrier_t *b = NULL;
    zkr_dbarrier_t *d = NULL;
    zkr_group_t *g = NULL, *og = NULL;
    zkr_cache_t *c = NULL;
    atomic_int got = 1, dgot = 1;
    double v;

    (void)state;
    zoo_create(raw, "/g", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    /* No handle of the kind yet in this process (this test runs last):
     * the name is unknown. */
    assert_int_equal(
        zkr_metrics_value(s, "zkr_barrier_waiters", "barrier", "/g/bar", &v),
        ZBADARGUMENTS);

    /* The barrier: one wait in progress, then none. */
    assert_int_equal(zkr_barrier_new(&b, s, "/g/bar", 0, NULL), 0);
    assert_true(rv(s, "zkr_barrier_waiters", "barrier", "/g/bar") == 0);
    assert_int_equal(
        zoo_create(raw, "/g/bar", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    assert_int_equal(
        zkr_barrier_async(b, ZKR_BARRIER_WAIT, -1, barrier_done, (void *)&got),
        0);
    assert_true(rv(s, "zkr_barrier_waiters", "barrier", "/g/bar") == 1);
    has_line(s, "zkr_barrier_waiters{path=\"/g/bar\",kind=\"barrier\"} 1");
    assert_int_equal(
        zkr_metrics_value(s, "zkr_barrier_waiters", "barrier", "/g/x", &v),
        ZNONODE);
    assert_int_equal(
        zkr_metrics_value(s, "zkr_barrier_waiters", NULL, NULL, &v),
        ZBADARGUMENTS);
    assert_int_equal(zoo_delete(raw, "/g/bar", -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(got == 0, zkt_scaled_ms(10000)));
    assert_true(rv(s, "zkr_barrier_waiters", "barrier", "/g/bar") == 0);

    /* The double barrier: its enter waits for a second participant. */
    assert_int_equal(zkr_dbarrier_new(&d, s, "/g/db", 2, "a", NULL), 0);
    assert_int_equal(zkr_dbarrier_async(d, ZKR_DBARRIER_ENTER, -1,
                                        dbarrier_done, (void *)&dgot),
                     0);
    assert_true(rv(s, "zkr_barrier_waiters", "dbarrier", "/g/db") == 1);
    has_line(s, "zkr_barrier_waiters{path=\"/g/db\",kind=\"dbarrier\"} 1");
    assert_int_equal(count_lines(s, "# TYPE zkr_barrier_waiters "), 1);
    zkr_dbarrier_free(d); /* ends the enter */
    assert_true(ZKT_WAIT_UNTIL(dgot != 1, zkt_scaled_ms(10000)));
    assert_int_equal(
        zkr_metrics_value(s, "zkr_barrier_waiters", "dbarrier", "/g/db", &v),
        ZNONODE);

    /* A group: the members another session sees too. */
    assert_int_equal(zkr_group_new(&g, s, "/g/grp", NULL, NULL, NULL), 0);
    assert_int_equal(zkr_group_new(&og, o, "/g/grp", NULL, NULL, NULL), 0);
    assert_int_equal(zkr_group_join(g, "a", NULL, 0, zkt_scaled_ms(10000)), 0);
    assert_int_equal(zkr_group_join(og, "b", NULL, 0, zkt_scaled_ms(10000)), 0);
    assert_true(
        ZKT_WAIT_UNTIL(rv(s, "zkr_group_members", "group", "/g/grp") == 2,
                       zkt_scaled_ms(10000)));
    assert_true(
        ZKT_WAIT_UNTIL(rv(s, "zkr_cache_lag_seconds", "group", "/g/grp") == 0,
                       zkt_scaled_ms(10000)));
    has_line(s, "zkr_group_members{path=\"/g/grp\",kind=\"group\"} 2");
    zkr_group_free(og);
    assert_true(
        ZKT_WAIT_UNTIL(rv(s, "zkr_group_members", "group", "/g/grp") == 1,
                       zkt_scaled_ms(10000)));

    /* A cache whose reads are refused: its lag grows from its start. */
    assert_int_equal(zoo_create(raw, "/g/secret", "x", 1, &no_read, 0, NULL, 0),
                     ZOK);
    assert_int_equal(
        zkr_cache_new(&c, s, "/g/secret", ZKR_CACHE_NODE, NULL, NULL), 0);
    zkt_sleep_ms(400);
    assert_true(rv(s, "zkr_cache_lag_seconds", "cache", "/g/secret") >= 0.4);
    assert_true(rv(s, "zkr_cache_entries", "cache", "/g/secret") == 0);
    /* One TYPE line for the lag of both kinds. */
    assert_int_equal(count_lines(s, "# TYPE zkr_cache_lag_seconds "), 1);
    assert_int_equal(count_lines(s, "zkr_cache_lag_seconds{"), 2);
    /* Readable again: once read, no lag. */
    assert_int_equal(zoo_set_acl(raw, "/g/secret", -1, &ZOO_OPEN_ACL_UNSAFE),
                     ZOK);
    assert_true(
        ZKT_WAIT_UNTIL(rv(s, "zkr_cache_entries", "cache", "/g/secret") == 1,
                       zkt_scaled_ms(20000)));
    assert_true(rv(s, "zkr_cache_lag_seconds", "cache", "/g/secret") == 0);

    /* Freed: the series go with their last handle. */
    zkr_cache_free(c);
    zkr_group_free(g);
    zkr_barrier_free(b);
    assert_int_equal(
        zkr_metrics_value(s, "zkr_cache_entries", "cache", "/g/secret", &v),
        ZNONODE);
    assert_int_equal(
        zkr_metrics_value(s, "zkr_group_members", "group", "/g/grp", &v),
        ZNONODE);
    assert_int_equal(
        zkr_metrics_value(s, "zkr_barrier_waiters", "barrier", "/g/bar", &v),
        ZNONODE);
    assert_int_equal(count_lines(s, "zkr_cache_lag_seconds{"), 0);
    zkr_session_free(o);
    zkr_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_outcomes),
        cmocka_unit_test(test_expiry_counts),
        cmocka_unit_test(test_reconnect_counts),
        cmocka_unit_test(test_session_gauges),
        cmocka_unit_test(test_election_counts),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_many_paths),
        cmocka_unit_test(test_recipe_gauges),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("metrics", tests, setup, teardown);
}
