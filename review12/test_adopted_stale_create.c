/* rereview12: an adopted session declared LOST while its create is in
 * flight; the create is applied, its answer is a connection loss (stale:
 * queue_on_lost bumped the contender's gen), and the same session comes
 * back. adopted_lost_nodes() hands over only RECOVER searches and known
 * nodes, and create_done() deletes a stale create only if rc == ZOK: the
 * node of unknown outcome is never searched for, so it stays for as long
 * as the application keeps its handle, blocking every other contender
 * (the promise of issue 12.6 / test_adopted_lost_then_back broken).
 * The same "stale => only ZOK matters" rule is what decides the fate of a
 * create completed by close_handle()'s synthetic ZCLOSING.
 *
 * Run: review12/run_adopted.sh */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "proxy_test.h"

static zkr_session_t *volatile g_adopted;

static void app_watcher(zhandle_t *zh, int type, int st, const char *path,
                        void *ctx)
{
    (void)zh;
    (void)path;
    (void)ctx;
    if (g_adopted != NULL)
        zkr_session_process_event(g_adopted, type, st);
}

static void test_adopted_lost_with_create_in_flight(void **state)
{
    enum { T = 9000 };
    const char *dir = "/rr12/adopt";
    zhandle_t *zh;
    zkr_session_t *sa = NULL, *sb = open_session(10000);
    zkr_lock_t *a, *b;
    int64_t t0;
    int ra, rb, n;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zh = zookeeper_init(zkt_proxy_hosts(proxy), app_watcher, T, NULL, NULL, 0);
    assert_non_null(zh);
    assert_int_equal(zkt_wait_connected(zh, 10000), 0);
    assert_int_equal(zkr_session_adopt(&sa, zh), 0);
    g_adopted = sa;
    a = new_lock(sa, dir, "a");
    b = new_lock(sb, dir, "b");
    /* the directory exists (so the create is one request) */
    assert_int_equal(zkr_lock_acquire(b, -1), 0);
    assert_int_equal(zkr_lock_release(b), 0);
    usleep(400000); /* a heartbeat answered just now */
    /* Every byte held 8 s both ways: the create reaches the server late
     * (applied), its answer never comes before the client's own timeout
     * (2T/3) while zkr declares LOST at its safe deadline (earlier). */
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 8000"), 0);
    t0 = zkt_now_ms();
    ra = zkr_lock_acquire(a, 30000);
    print_message("# adopted acquire: %s after %lld ms, state %d\n",
                  zkr_strerror(ra), (long long)(zkt_now_ms() - t0),
                  zkr_session_state(sa));
    /* wait until the client has dropped the connection itself */
    ZKT_WAIT_UNTIL(zoo_state(zh) != ZOO_CONNECTED_STATE, 2 * T);
    print_message("# client state %d after %lld ms\n", zoo_state(zh),
                  (long long)(zkt_now_ms() - t0));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    ZKT_WAIT_UNTIL(zkr_session_state(sa) == ZKR_STATE_CONNECTED, 2 * T);
    print_message("# adopted session state after pass: %d (CONNECTED %d)\n",
                  zkr_session_state(sa), ZKR_STATE_CONNECTED);
    usleep(3000000);
    n = children(dir);
    print_message("# children of %s: %d (a's acquire ended: want 0)\n", dir,
                  n);
    rb = zkr_lock_acquire(b, 3000);
    print_message("# other session's acquire: %s\n", zkr_strerror(rb));
    if (rb == 0)
        zkr_lock_release(b);
    zkr_lock_free(a);
    zkr_lock_free(b);
    g_adopted = NULL;
    zkr_session_free(sa);
    zookeeper_close(zh);
    zkr_session_free(sb);
    assert_int_equal(n, 0);
    assert_int_equal(rb, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adopted_lost_with_create_in_flight),
    };
    alarm(300);
    return cmocka_run_group_tests(tests, proxy_setup, proxy_teardown);
}
