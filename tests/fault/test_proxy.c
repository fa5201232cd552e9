/* The fault proxy (tests/bin/zkr-proxy) against a real server, with plain
 * ZooKeeper handles: each command does to a client what it promises. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"
#include "server_test.h"

/* Connection states a handle's watcher saw, in order. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int states[256];
static int nstates;

static void watcher(zhandle_t *zh, int type, int st, const char *path,
                    void *ctx)
{
    (void)zh;
    (void)path;
    (void)ctx;
    if (type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&mu);
    if (nstates < 256)
        states[nstates++] = st;
    pthread_mutex_unlock(&mu);
}

/* Index of the first state st seen at or after index from, or -1. */
static int seen(int st, int from)
{
    int at = -1;

    pthread_mutex_lock(&mu);
    for (int i = from; i < nstates && at < 0; i++)
        if (states[i] == st)
            at = i;
    pthread_mutex_unlock(&mu);
    return at;
}

/* A handle through the proxy, connected, with the watcher above. */
static zhandle_t *connect_via_proxy(int timeout_ms)
{
    zhandle_t *zh;

    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    pthread_mutex_lock(&mu);
    nstates = 0;
    pthread_mutex_unlock(&mu);
    zh = zookeeper_init(zkt_proxy_hosts(proxy), watcher, timeout_ms, NULL, NULL,
                        0);
    assert_non_null(zh);
    assert_int_equal(zkt_wait_connected(zh, 10000), 0);
    return zh;
}

/* Blackhole: the client hears nothing, loses the connection (CONNECTING)
 * and, the bytes being dropped, cannot get it back; pass: it reconnects
 * with the same session, which did not expire meanwhile. */
static void test_blackhole_then_pass(void **state)
{
    enum { T = 6000 };
    zhandle_t *zh = connect_via_proxy(T);
    int64_t sid = zoo_client_id(zh)->client_id;
    struct Stat st;
    int lost;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_true(ZKT_WAIT_UNTIL(seen(ZOO_CONNECTING_STATE, 0) >= 0, 2 * T));
    lost = seen(ZOO_CONNECTING_STATE, 0);
    /* Still cut off: no reconnection goes through the blackhole. */
    zkt_sleep_ms(500);
    assert_int_equal(seen(ZOO_CONNECTED_STATE, lost), -1);
    assert_true(zoo_state(zh) != ZOO_CONNECTED_STATE);

    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkt_wait_connected(zh, T), 0);
    /* The watcher hears of it a moment after zoo_state() changes. */
    assert_true(ZKT_WAIT_UNTIL(seen(ZOO_CONNECTED_STATE, lost) > lost, 2000));
    assert_int_equal(seen(ZOO_EXPIRED_SESSION_STATE, 0), -1);
    assert_true(zoo_client_id(zh)->client_id == sid);
    assert_int_equal(zoo_exists(zh, "/", 0, &st), ZOK);
    zookeeper_close(zh);
}

/* Reset: the connection is closed under the client, which reconnects
 * through the proxy on the same session. */
static void test_reset_reconnects(void **state)
{
    zhandle_t *zh = connect_via_proxy(4000);
    int64_t sid = zoo_client_id(zh)->client_id;
    struct Stat st;
    int lost;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
    assert_true(ZKT_WAIT_UNTIL(seen(ZOO_CONNECTING_STATE, 0) >= 0, 4000));
    lost = seen(ZOO_CONNECTING_STATE, 0);
    assert_true(ZKT_WAIT_UNTIL(seen(ZOO_CONNECTED_STATE, lost) > lost, 4000));
    assert_true(zoo_client_id(zh)->client_id == sid);
    assert_int_equal(zoo_exists(zh, "/", 0, &st), ZOK);
    zookeeper_close(zh);
}

/* Delay: every request waits the delay twice (there and back); pass ends
 * it. */
static void test_delay(void **state)
{
    zhandle_t *zh = connect_via_proxy(10000);
    struct Stat st;
    int64_t t0, slow, fast;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_exists(zh, "/", 0, &st), ZOK);
    slow = zkt_now_ms() - t0;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    /* A chunk queued under the delay still waits its turn; then none. */
    zkt_sleep_ms(400);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_exists(zh, "/", 0, &st), ZOK);
    fast = zkt_now_ms() - t0;
    print_message("# delay 300: %lld ms round trip, then %lld ms\n",
                  (long long)slow, (long long)fast);
    assert_true(slow >= 600);
    assert_true(fast < 300);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay x"), -1);
    zookeeper_close(zh);
}

/* drop-create-reply: the create is applied on the server, the client gets
 * ZCONNECTIONLOSS, reconnects on the same session, and only one create is
 * affected: a plain create and create2 of a sequential node. (Not a multi,
 * which the proxy handles too: the client library leaks a multi's
 * completion on connection loss, which valgrind would report.) */
static void test_drop_create_reply(void **state)
{
    zhandle_t *zh = connect_via_proxy(4000);
    int64_t sid = zoo_client_id(zh)->client_id;
    char name[128];
    struct Stat st;

    (void)state;
    assert_int_equal(
        zoo_create(zh, "/dcr", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);

    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(
        zoo_create(zh, "/dcr/a", "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZCONNECTIONLOSS);
    assert_int_equal(zoo_exists(raw, "/dcr/a", 0, &st), ZOK);
    assert_int_equal(zkt_wait_connected(zh, 4000), 0);
    assert_true(zoo_client_id(zh)->client_id == sid);

    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zoo_create2(zh, "/dcr/s-", NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                                 ZOO_SEQUENCE, name, sizeof(name), &st),
                     ZCONNECTIONLOSS);
    assert_true(ZKT_WAIT_UNTIL(children("/dcr") == 2, 4000));
    assert_int_equal(zoo_exists(raw, "/dcr/s-0000000001", 0, &st), ZOK);
    assert_int_equal(zkt_wait_connected(zh, 4000), 0);

    /* Disarmed: the next create is answered. */
    assert_int_equal(
        zoo_create(zh, "/dcr/b", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    assert_true(zoo_client_id(zh)->client_id == sid);
    assert_int_equal(children("/dcr"), 3);
    zookeeper_close(zh);
}

/* fail-auth: the next authentication is answered ZAUTHFAILED, as by a
 * server that refuses the credentials: its completion says so and the
 * handle's state becomes AUTH_FAILED; disarmed, the next one passes. */
static atomic_int auth_rc = 1;

static void auth_done(int rc, const void *data)
{
    (void)data;
    atomic_store(&auth_rc, rc);
}

static void test_fail_auth(void **state)
{
    zhandle_t *zh = connect_via_proxy(4000);

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "fail-auth"), 0);
    assert_int_equal(zoo_add_auth(zh, "digest", "u:p", 3, auth_done, NULL),
                     ZOK);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&auth_rc) != 1, 10000));
    assert_int_equal(atomic_load(&auth_rc), ZAUTHFAILED);
    assert_true(ZKT_WAIT_UNTIL(seen(ZOO_AUTH_FAILED_STATE, 0) >= 0, 10000));
    zookeeper_close(zh);

    zh = connect_via_proxy(4000);
    atomic_store(&auth_rc, 1);
    assert_int_equal(zoo_add_auth(zh, "digest", "u:p", 3, auth_done, NULL),
                     ZOK);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&auth_rc) != 1, 10000));
    assert_int_equal(atomic_load(&auth_rc), ZOK);
    assert_int_equal(seen(ZOO_AUTH_FAILED_STATE, 0), -1);
    zookeeper_close(zh);
}

/* reset-auth: the connection is reset at the answer to the credentials.
 * The client completes zoo_add_auth() with ZCONNECTIONLOSS then (no answer
 * comes for it later), reconnects on the same session and sends them
 * again: a request answered there proves them accepted. */
static void test_reset_auth(void **state)
{
    zhandle_t *zh = connect_via_proxy(4000);
    int64_t sid = zoo_client_id(zh)->client_id;
    struct Stat st;

    (void)state;
    atomic_store(&auth_rc, 1);
    assert_int_equal(zkt_proxy_cmd(proxy, "reset-auth"), 0);
    assert_int_equal(zoo_add_auth(zh, "digest", "u:p", 3, auth_done, NULL),
                     ZOK);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&auth_rc) != 1, 10000));
    assert_int_equal(atomic_load(&auth_rc), ZCONNECTIONLOSS);
    assert_true(ZKT_WAIT_UNTIL(seen(ZOO_CONNECTING_STATE, 0) >= 0, 10000));
    assert_int_equal(zkt_wait_connected(zh, 10000), 0);
    assert_int_equal(zoo_exists(zh, "/", 0, &st), ZOK);
    assert_true(zoo_client_id(zh)->client_id == sid);
    assert_int_equal(seen(ZOO_AUTH_FAILED_STATE, 0), -1);
    zookeeper_close(zh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blackhole_then_pass),
        cmocka_unit_test(test_reset_reconnects),
        cmocka_unit_test(test_delay),
        cmocka_unit_test(test_drop_create_reply),
        cmocka_unit_test(test_fail_auth),
        cmocka_unit_test(test_reset_auth),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("proxy", tests, proxy_setup,
                                       proxy_teardown);
}
