/* Shared fixture of the tests that run against a real ZooKeeper server:
 * one server per test binary (started by the group setup), a plain handle
 * for checks, and small helpers. Include after <cmocka.h>. */
#ifndef ZKR_TESTS_SERVER_TEST_H
#define ZKR_TESTS_SERVER_TEST_H

#include "harness.h"
#include "zkr.h"

static zkt_server_t *server;
static zhandle_t *raw; /* plain client for checks; NULL while restarting */

static int setup(void **state)
{
    (void)state;
    if (zkt_server_start(&server) != 0)
        return -1;
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    return raw != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (raw != NULL)
        zookeeper_close(raw);
    zkt_server_stop(server);
    return 0;
}

static inline zkr_session_t *open_session(int timeout_ms)
{
    zkr_session_t *s = NULL;
    assert_int_equal(
        zkr_session_open(&s, zkt_server_hosts(server), timeout_ms, NULL), 0);
    return s;
}

static inline zkr_lock_t *new_lock(zkr_session_t *s, const char *path,
                                   const char *id)
{
    zkr_lock_t *l = NULL;
    assert_int_equal(zkr_lock_new(&l, s, path, id, NULL), 0);
    return l;
}

static inline int64_t token_of(zkr_lock_t *l)
{
    int64_t t = -1;
    assert_int_equal(zkr_lock_token(l, &t), 0);
    return t;
}

/* Expires a zkr session from outside (another handle takes it over and
 * closes it), as the server would after a partition. */
static inline void expire(zkr_session_t *s)
{
    clientid_t cid = *zoo_client_id(zkr_session_handle(s));
    assert_int_equal(
        zkt_expire_session(zkt_server_hosts(server), &cid, 10000), 0);
}

/* Number of nodes below path (0 if it does not exist). */
static inline int children(const char *path)
{
    return zkt_count_children(raw, path);
}

#endif
