/* Fault tests with one server and the fault proxy in front of it (see
 * zkt_proxy_start() in harness.h): run the group with proxy_setup and
 * proxy_teardown. Needs <cmocka.h> before it, as server_test.h does. */
#ifndef ZKR_PROXY_TEST_H
#define ZKR_PROXY_TEST_H

#include "server_test.h"

static zkt_proxy_t *proxy;

static inline int proxy_setup(void **state)
{
    if (setup(state) != 0)
        return -1;
    return zkt_proxy_start(zkt_server_hosts(server), &proxy);
}

static inline int proxy_teardown(void **state)
{
    zkt_proxy_stop(proxy);
    return teardown(state);
}

/* A session through the proxy (which is set to pass first). */
static inline zkr_session_t *open_proxied(int timeout_ms)
{
    zkr_session_t *s = NULL;

    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(
        zkr_session_open(&s, zkt_proxy_hosts(proxy), timeout_ms, NULL), 0);
    return s;
}

#endif
