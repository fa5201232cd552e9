/* Fault tests against a 3-node ensemble on loopback: the leader killed,
 * the leader paused past syncLimit, and the quorum lost. Sessions (8 s)
 * must not expire when a quorum remains, the outage must be bounded, the
 * lock must stay with its holder and pass on in order afterwards, and
 * nothing may be granted while no quorum exists. Waits are scaled by
 * ZKR_TEST_TIME_SCALE. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../harness.h"
#include "zkr.h"

/* Session timeout of every contender: long enough that no session expires
 * during a failover even with -j2 make check loading both cores. */
enum { T = 8000 };

static zkt_ensemble_t *ens;
static zhandle_t *raw;

#include "../rec.h"

static int group_setup(void **state)
{
    (void)state;
    if (zkt_ensemble_start(3, &ens) != 0)
        return -1;
    raw = zkt_connect(zkt_ensemble_hosts(ens), 30000);
    return raw != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (raw != NULL)
        zookeeper_close(raw);
    zkt_ensemble_stop(ens);
    return 0;
}

/* Two sessions, a held lock and a waiter, on path. */
struct pair {
    zkr_session_t *a, *b;
    zkr_lock_t *la, *lb;
    struct rec ra, rb; /* session states of a; completion of lb */
    int64_t ta;
};

static void heal(void);

static void pair_start(struct pair *p, const char *path)
{
    heal(); /* a failed test before may have left a member down */
    rec_init(&p->ra);
    rec_init(&p->rb);
    assert_int_equal(zkr_session_open(&p->a, zkt_ensemble_hosts(ens), T, NULL),
                     0);
    assert_int_equal(zkr_session_open(&p->b, zkt_ensemble_hosts(ens), T, NULL),
                     0);
    assert_int_equal(zkr_session_add_listener(p->a, on_session, &p->ra), 0);
    assert_int_equal(zkr_lock_new(&p->la, p->a, path, "a", NULL), 0);
    assert_int_equal(zkr_lock_new(&p->lb, p->b, path, "b", NULL), 0);
    assert_int_equal(zkr_lock_acquire(p->la, zkt_scaled_ms(10000)), 0);
    assert_int_equal(zkr_lock_token(p->la, &p->ta), 0);
    assert_int_equal(zkr_lock_acquire_async(p->lb, -1, on_done, &p->rb), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, path) == 2,
                               zkt_scaled_ms(5000)));
}

/* The holder still holds (no expiry): it releases, the waiter is granted
 * with a higher token, and nothing is left. */
static void pair_finish(struct pair *p, const char *path)
{
    int64_t tb = -1;

    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(p->la) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(2 * T)));
    assert_false(rec_find(&p->ra, ZKR_STATE_LOST) >= 0);
    assert_false(rec_find(&p->rb, 1) >= 0); /* not granted while a holds */
    assert_int_equal(zkr_lock_release(p->la), 0);
    if (!ZKT_WAIT_UNTIL(rec_find(&p->rb, 1) >= 0, zkt_scaled_ms(2 * T))) {
        print_message("# waiter not granted: state %s, session %s, %d "
                      "completions (first %d), %d nodes\n",
                      zkr_lock_state_name(zkr_lock_state(p->lb)),
                      zkr_state_name(zkr_session_state(p->b)), p->rb.n,
                      p->rb.n ? p->rb.what[0] : 0,
                      zkt_count_children(raw, path));
        print_message(
            "# waiter's session 0x%llx: %llu listings, %llu watch "
            "events, %llu sessions\n",
            (unsigned long long)zkr_session_id(p->b),
            (unsigned long long)zkr_session_counter(p->b, ZKR_COUNTER_LISTS),
            (unsigned long long)zkr_session_counter(p->b,
                                                    ZKR_COUNTER_WATCH_EVENTS),
            (unsigned long long)zkr_session_counter(p->b,
                                                    ZKR_COUNTER_SESSIONS));
        for (int i = 0; i < zkt_ensemble_size(ens); i++) {
            char *w = zkt_4lw(zkt_ensemble_member(ens, i), "wchc");
            print_message("# member %d wchc: %s\n", i, w ? w : "(none)");
            free(w);
        }
        fail();
    }
    assert_int_equal(zkr_lock_token(p->lb, &tb), 0);
    assert_true(tb > p->ta);
    assert_int_equal(zkr_lock_release(p->lb), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, path) == 0,
                               zkt_scaled_ms(5000)));
    zkr_lock_free(p->la);
    zkr_lock_free(p->lb);
    zkr_session_free(p->a);
    zkr_session_free(p->b);
}

static int wait_leader(int not, int timeout_ms)
{
    int l = -1;

    ZKT_WAIT_UNTIL((l = zkt_ensemble_leader(ens)) >= 0 && l != not, timeout_ms);
    return l != not ? l : -1;
}

/* Brings every member back and waits until all three serve. */
static void heal(void)
{
    for (int i = 0; i < zkt_ensemble_size(ens); i++) {
        zkt_server_t *m = zkt_ensemble_member(ens, i);

        if (zkt_server_pid(m) <= 0)
            assert_int_equal(zkt_server_restart(m), 0);
        else
            zkt_server_resume(m); /* SIGCONT: harmless if not paused */
    }
    assert_true(
        ZKT_WAIT_UNTIL(zkt_ensemble_serving(ens) == 3, zkt_scaled_ms(30000)));
}

/* The leader is killed: a new one is elected within a few seconds, no
 * session expires, the holder keeps the lock and the queue moves on. */
static void test_leader_killed(void **state)
{
    static struct pair p; /* callbacks may outlive a failed test */
    int old, now;
    int64_t t0, outage;

    (void)state;
    pair_start(&p, "/e/killed");
    old = wait_leader(-1, zkt_scaled_ms(10000));
    assert_true(old >= 0);
    t0 = zkt_now_ms();
    assert_int_equal(zkt_server_kill(zkt_ensemble_member(ens, old)), 0);
    now = wait_leader(old, zkt_scaled_ms(15000));
    outage = zkt_now_ms() - t0;
    print_message("# leader %d killed: member %d leads after %lld ms\n", old,
                  now, (long long)outage);
    assert_true(now >= 0);
    assert_true(outage < zkt_scaled_ms(10000));
    pair_finish(&p, "/e/killed");
    heal();
}

/* The leader is frozen past syncLimit: the others elect a new leader,
 * clients move to them, no session expires; the old leader, thawed,
 * rejoins as a follower. */
static void test_leader_paused(void **state)
{
    static struct pair p; /* callbacks may outlive a failed test */
    int old, now;
    int64_t t0, outage;
    zkt_server_t *m;

    (void)state;
    pair_start(&p, "/e/paused");
    old = wait_leader(-1, zkt_scaled_ms(10000));
    assert_true(old >= 0);
    m = zkt_ensemble_member(ens, old);
    t0 = zkt_now_ms();
    assert_int_equal(zkt_server_pause(m), 0);
    now = wait_leader(old, zkt_scaled_ms(15000));
    outage = zkt_now_ms() - t0;
    print_message("# leader %d paused: member %d leads after %lld ms\n", old,
                  now, (long long)outage);
    assert_true(now >= 0);
    assert_true(outage < zkt_scaled_ms(10000));
    /* Both sessions work through the new leader while the old is frozen. */
    assert_true(
        ZKT_WAIT_UNTIL(zkr_lock_state(p.la) == ZKR_LOCK_HELD &&
                           (zkr_session_state(p.a) == ZKR_STATE_CONNECTED ||
                            zkr_session_state(p.a) == ZKR_STATE_RECONNECTED),
                       zkt_scaled_ms(2 * T)));
    assert_int_equal(zkt_server_resume(m), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zkt_ensemble_serving(ens) == 3, zkt_scaled_ms(30000)));
    pair_finish(&p, "/e/paused");
}

/* A sequencer check served by a follower cut off from the leader must not
 * say "valid": such a follower answers reads from its own copy until it
 * gives the leader up (syncLimit x tickTime), while a leader that still
 * has a quorum may have expired the holder's session and granted the lock
 * to another. The leader is frozen here, which the follower cannot tell
 * from that partition; the check syncs with the leader first, so it ends
 * with an error (the follower drops its clients), never with 0. */
static void test_check_on_cut_off_follower(void **state)
{
    zkr_session_t *a = NULL, *chk = NULL;
    zkr_lock_t *l = NULL;
    zkr_sequencer_t q;
    zkt_server_t *m;
    int leader, rc;

    (void)state;
    heal();
    leader = wait_leader(-1, zkt_scaled_ms(10000));
    assert_true(leader >= 0);
    assert_int_equal(zkr_session_open(&a, zkt_ensemble_hosts(ens), T, NULL), 0);
    m = zkt_ensemble_member(ens, (leader + 1) % 3);
    assert_int_equal(zkr_session_open(&chk, zkt_server_hosts(m), T, NULL), 0);
    assert_int_equal(zkr_lock_new(&l, a, "/e/check", "a", NULL), 0);
    assert_int_equal(zkr_lock_acquire(l, zkt_scaled_ms(10000)), 0);
    assert_int_equal(zkr_lock_sequencer(l, &q), 0);
    assert_int_equal(zkr_sequencer_check(chk, &q), 0);

    assert_int_equal(zkt_server_pause(zkt_ensemble_member(ens, leader)), 0);
    rc = zkr_sequencer_check(chk, &q);
    print_message("# check through a follower cut off from the leader: %s\n",
                  zkr_strerror(rc));
    assert_int_not_equal(rc, 0);
    assert_int_equal(zkt_server_resume(zkt_ensemble_member(ens, leader)), 0);
    zkr_lock_free(l);
    zkr_session_free(a);
    zkr_session_free(chk);
    heal();
}

/* Two of three members killed: the last one stops serving, and nothing is
 * granted until a quorum is back. The holder may keep its lock (its
 * session survives if it reconnects in time: a new leader restarts every
 * session's timeout) or lose it; either way the waiter is granted only
 * after the holder released or lost, and nothing is left behind. */
static void test_quorum_lost(void **state)
{
    static struct pair p; /* callbacks may outlive a failed test */
    zkr_session_t *c = NULL;
    int leader, killed = 0;
    int64_t tb = -1;

    (void)state;
    pair_start(&p, "/e/quorum");
    leader = wait_leader(-1, zkt_scaled_ms(10000));
    assert_true(leader >= 0);
    for (int i = 0; i < 3; i++)
        if (i != leader && killed < 2) {
            assert_int_equal(zkt_server_kill(zkt_ensemble_member(ens, i)), 0);
            killed++;
        }
    assert_true(
        ZKT_WAIT_UNTIL(zkt_ensemble_serving(ens) == 0, zkt_scaled_ms(10000)));
    /* While lost: the holder stops claiming the lock (SUSPENDED, then
     * LOST once past its safe deadline), the waiter is never granted (its
     * acquire may end with ZKR_ELOST), and no new session can be opened. */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(p.la) != ZKR_LOCK_HELD,
                               zkt_scaled_ms(T)));
    assert_true(zkr_session_open(&c, zkt_ensemble_hosts(ens), T, NULL) != 0);
    zkt_sleep_ms(1000);
    assert_false(rec_find(&p.rb, 1) >= 0);
    assert_true(zkr_lock_state(p.la) != ZKR_LOCK_HELD);
    print_message("# during the loss: holder %d, waiter %d (%d completions)\n",
                  zkr_lock_state(p.la), zkr_lock_state(p.lb), p.rb.n);

    /* One member back: quorum again. */
    for (int i = 0; i < 3; i++) {
        zkt_server_t *m = zkt_ensemble_member(ens, i);

        if (zkt_server_pid(m) <= 0) {
            assert_int_equal(zkt_server_restart(m), 0);
            break;
        }
    }
    assert_true(
        ZKT_WAIT_UNTIL(zkt_ensemble_serving(ens) >= 2, zkt_scaled_ms(30000)));
    /* The holder is verified again or lost; if it holds, the waiter still
     * waits until it releases. */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(p.la) == ZKR_LOCK_HELD ||
                                   zkr_lock_state(p.la) == ZKR_LOCK_LOST,
                               zkt_scaled_ms(3 * T)));
    print_message("# after the quorum came back the holder is %s\n",
                  zkr_lock_state(p.la) == ZKR_LOCK_HELD ? "holding" : "lost");
    if (zkr_lock_state(p.la) == ZKR_LOCK_HELD) {
        assert_false(rec_find(&p.rb, 1) >= 0);
        assert_int_equal(zkr_lock_release(p.la), 0);
    } else {
        assert_int_equal(zkr_lock_release(p.la), ZKR_ELOST);
    }
    /* The waiter is granted, or its acquire ended with ZKR_ELOST during
     * the loss and it queues again. */
    assert_true(ZKT_WAIT_UNTIL(p.rb.n > 0, zkt_scaled_ms(3 * T)));
    if (!(rec_find(&p.rb, 1) >= 0)) {
        assert_int_equal(p.rb.what[0], ZKR_ELOST);
        assert_int_equal(zkr_lock_acquire(p.lb, zkt_scaled_ms(3 * T)), 0);
    }
    assert_int_equal(zkr_lock_token(p.lb, &tb), 0);
    assert_true(tb > p.ta);
    assert_int_equal(zkr_lock_release(p.lb), 0);
    zkr_lock_free(p.la);
    zkr_lock_free(p.lb);
    zkr_session_free(p.a);
    zkr_session_free(p.b);
    assert_true(ZKT_WAIT_UNTIL(zkt_count_children(raw, "/e/quorum") == 0,
                               zkt_scaled_ms(3 * T)));
    heal();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_killed),
        cmocka_unit_test(test_leader_paused),
        cmocka_unit_test(test_check_on_cut_off_follower),
        cmocka_unit_test(test_quorum_lost),
    };
    return cmocka_run_group_tests_name("ensemble", tests, group_setup,
                                       group_teardown);
}
