/* An asynchronous acquire's completion is the result zkr_lock_acquire()
 * would return (include/zkr.h) at the time the application gets it: a
 * grant posted to the event thread, then lost because the event thread ran
 * late past the session's safe deadline (a callback of another handle
 * blocks it while the server is unreachable), is delivered as ZKR_ELOST,
 * never as a grant. The contender connects through the fault proxy; the
 * holder that lets it in and the checks connect to the server directly.
 * Waits are scaled by ZKR_TEST_TIME_SCALE. */
#define _DEFAULT_SOURCE
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"
#include "server_test.h"

#include "rec.h"

/* A callback that holds the event thread until the test lets it go: the
 * events posted meanwhile wait behind it. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open;
};

static void gate_cb(int rc, zkr_lock_t *l, void *data)
{
    struct gate *g = data;

    (void)l;
    (void)rc;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static int gate_entered(struct gate *g)
{
    int e;

    pthread_mutex_lock(&g->mu);
    e = g->entered;
    pthread_mutex_unlock(&g->mu);
    return e;
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static int readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};

    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

static void test_grant_lost_before_delivery(void **state)
{
    enum { T = 4000 };
    const char *path = "/p/late/lock";
    zkr_session_t *a, *b = open_session(T);
    zkr_lock_t *la, *lb = new_lock(b, path, NULL), *lx;
    static struct rec ra, rd;
    static struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                            0, 0};
    int fd;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_open(&a, zkt_proxy_hosts(proxy), T, NULL), 0);
    la = new_lock(a, path, NULL);
    lx = new_lock(a, "/p/late/gate", NULL);
    rec_init(&ra);
    rec_init(&rd);
    zkr_lock_set_listener(la, on_lock_state, &ra);
    fd = zkr_lock_fd(la);
    assert_true(fd >= 0);

    /* b holds; a waits, asynchronously. */
    assert_int_equal(zkr_lock_acquire(lb, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(la, -1, on_done, &rd), 0);
    assert_true(ZKT_WAIT_UNTIL(children(path) == 2, zkt_scaled_ms(5000)));

    /* Another handle's callback holds a's event thread. */
    assert_int_equal(zkr_lock_acquire_async(lx, -1, gate_cb, &g), 0);
    assert_true(ZKT_WAIT_UNTIL(gate_entered(&g), zkt_scaled_ms(5000)));

    /* a is granted: its completion is posted, behind the gate. */
    assert_int_equal(zkr_lock_release(lb), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(la) == ZKR_LOCK_HELD,
                               zkt_scaled_ms(5000)));
    assert_int_equal(rec_count(&rd), 0);

    /* The server becomes unreachable, and the safe deadline (9/10 of T
     * after a last heard from the server) passes before delivery. */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    zkt_sleep_ms(T + 500);
    assert_int_equal(rec_count(&rd), 0);
    gate_open(&g);
    assert_true(ZKT_WAIT_UNTIL(rec_count(&rd) == 1, zkt_scaled_ms(5000)));

    /* The completion says what zkr_lock_acquire() would: lost. */
    assert_int_equal(rd.what[0], ZKR_ELOST);
    /* Reported once: the application has observed the loss (the
     * descriptor is quiet, a release has nothing to report), and the
     * listener's LOST still follows. */
    assert_true(
        ZKT_WAIT_UNTIL(rec_find(&ra, ZKR_LOCK_LOST) >= 0, zkt_scaled_ms(5000)));
    assert_false(readable(fd));
    assert_int_equal(zkr_lock_state(la), ZKR_LOCK_IDLE);
    assert_int_equal(zkr_lock_release(la), ZKR_ENOTHELD);
    assert_int_equal(rec_count(&rd), 1);

    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_lock_free(lx);
    zkr_lock_free(la);
    zkr_lock_free(lb);
    zkr_session_free(a);
    zkr_session_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grant_lost_before_delivery),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("late_grant", tests, proxy_setup,
                                       proxy_teardown);
}
