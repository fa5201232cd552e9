/* Other clients in the directory: nodes deleted and re-created under a
 * contender's name, a contender-named node that is not a zkr permit ahead
 * of a semaphore waiter, and an adopted session declared LOST that comes
 * back. Each test failed on the engine before its fix (an adversarial
 * review's reproductions): two holders, a lost grant, an orphaned node.
 * The oracle is the rule: never two holders; a waiter that holds by the
 * rule (zkr_contenders_holding) is granted; no node is left behind.
 * And a server that refuses the session's credentials. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"
#include "server_test.h"

struct grant {
    atomic_int rc;
};
static void on_grant(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    atomic_store(&((struct grant *)data)->rc, rc);
}

/* (b) A semaphore of 2; a contender-named node that is not a zkr permit
 * (an operator's / another library's "-lock-" node) sits in the queue.
 * The zkr waiter behind it watches it; both holders leave; by the rule
 * (and zkr_contenders_holding) the waiter holds a permit, but nothing
 * wakes it. */
static void test_sem_foreign_ahead_grant_lost(void **state)
{
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000),
                  *s3 = open_session(10000);
    zkr_lock_t *h1 = NULL, *h2 = NULL, *w = NULL;
    struct grant g = {1};
    char fpath[256];
    zkr_contender_t *v = NULL;
    int n = 0;

    (void)state;
    assert_int_equal(zkr_semaphore_new(&h1, s1, "/r/semf", 2, "h1", NULL), 0);
    assert_int_equal(zkr_semaphore_new(&h2, s2, "/r/semf", 2, "h2", NULL), 0);
    assert_int_equal(zkr_semaphore_new(&w, s3, "/r/semf", 2, "w", NULL), 0);
    assert_int_equal(zkr_lock_acquire(h1, -1), 0);
    assert_int_equal(zkr_lock_acquire(h2, -1), 0);
    /* Another client's contender (Curator/go-zookeeper naming). */
    assert_int_equal(
        zoo_create(raw, "/r/semf/_c_11111111-2222-3333-4444-555555555555-lock-",
                   "other", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                   fpath, sizeof(fpath)),
        ZOK);
    assert_int_equal(zkr_lock_acquire_async(w, -1, on_grant, &g), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/r/semf") == 4, 5000));
    usleep(500000);
    assert_int_equal(zkr_lock_release(h1), 0);
    assert_int_equal(zkr_lock_release(h2), 0);
    usleep(300000);
    assert_int_equal(zkr_lock_contenders(w, &v, &n), 0);
    print_message("queue: %d contenders, holding by rule: %d\n", n,
                  zkr_contenders_holding(v, n));
    assert_int_equal(zkr_contenders_holding(v, n), 2); /* the rule: w holds */
    zkr_contenders_free(v, n);
    ZKT_WAIT_UNTIL(atomic_load(&g.rc) != 1, 5000);
    print_message("waiter rc after 5 s: %d (1 = still waiting)\n",
                  atomic_load(&g.rc));
    assert_int_equal(atomic_load(&g.rc), 0);
    zkr_lock_free(h1);
    zkr_lock_free(h2);
    zkr_lock_free(w);
    zkr_session_free(s1);
    zkr_session_free(s2);
    zkr_session_free(s3);
}

/* (a) A waiter's node is deleted and re-created with the same name by
 * another client while the waiter is disconnected. The one behind it is
 * granted in the gap; the waiter reconnects, its own-node watch comes back
 * as a data change (not a deletion), its listing shows "its" name first,
 * and it is granted too. */
static void test_waiter_node_recreated_two_holders(void **state)
{
    enum { T = 10000 };
    zkr_session_t *sh = open_session(T), *sx = open_session(T), *sw = NULL;
    zkr_lock_t *h, *w, *x;
    struct grant gw = {1}, gx = {1};
    char wnode[ZKR_NODE_MAX];

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_open(&sw, zkt_proxy_hosts(proxy), T, NULL), 0);
    h = new_lock(sh, "/r/recreate", "h");
    w = new_lock(sw, "/r/recreate", "w");
    x = new_lock(sx, "/r/recreate", "x");
    assert_int_equal(zkr_lock_acquire(h, -1), 0);
    assert_int_equal(zkr_lock_acquire_async(w, -1, on_grant, &gw), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/r/recreate") == 2, 5000));
    assert_int_equal(zkr_lock_acquire_async(x, -1, on_grant, &gx), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/r/recreate") == 3, 5000));
    usleep(500000); /* w's watches (own node, h) are set */
    assert_int_equal(zkr_lock_node(w, wnode, sizeof(wnode)), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    usleep(100000);
    assert_int_equal(zkr_lock_release(h), 0);
    assert_int_equal(zoo_delete(raw, wnode, -1), ZOK); /* operator */
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&gx.rc) == 0, 5000));
    assert_int_equal(
        zoo_create(raw, wnode, "w", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK); /* same name again */
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    ZKT_WAIT_UNTIL(atomic_load(&gw.rc) != 1, 8000);
    print_message("x state %d, w rc %d state %d (HELD=%d)\n", zkr_lock_state(x),
                  atomic_load(&gw.rc), zkr_lock_state(w), ZKR_LOCK_HELD);
    /* Never two holders. */
    assert_false(zkr_lock_state(x) == ZKR_LOCK_HELD &&
                 zkr_lock_state(w) == ZKR_LOCK_HELD);
    zkr_lock_release(w);
    zkr_lock_release(x);
    zoo_delete(raw, wnode, -1);
    zkr_lock_free(h);
    zkr_lock_free(w);
    zkr_lock_free(x);
    zkr_session_free(sh);
    zkr_session_free(sw);
    zkr_session_free(sx);
}

static void test_holder_node_recreated_in_window(void **state)
{
    zkr_session_t *sa = open_session(10000), *sb = open_session(10000);
    zkr_lock_t *a = new_lock(sa, "/r/hwin", "a"),
               *b = new_lock(sb, "/r/hwin", "b");
    char anode[ZKR_NODE_MAX];
    int hits = 0, tries = 0;

    (void)state;
    for (tries = 0; tries < 10 && hits == 0; tries++) {
        int64_t t0 = zkt_now_ms();
        assert_int_equal(zkr_lock_acquire(a, -1), 0);
        assert_int_equal(zkr_lock_node(a, anode, sizeof(anode)), 0);
        assert_int_equal(zoo_delete(raw, anode, -1), ZOK);
        int rb = zkr_lock_acquire(b, 0);
        assert_int_equal(
            zoo_create(raw, anode, "a", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
            ZOK);
        int64_t t1 = zkt_now_ms();
        usleep(300000);
        print_message("try %d: %lld ms, b rc %d, a state %d b state %d\n",
                      tries, (long long)(t1 - t0), rb, zkr_lock_state(a),
                      zkr_lock_state(b));
        if (zkr_lock_state(a) == ZKR_LOCK_HELD &&
            zkr_lock_state(b) == ZKR_LOCK_HELD)
            hits++;
        zkr_lock_release(a);
        zkr_lock_release(b);
        zoo_delete(raw, anode, -1);
    }
    assert_int_equal(hits, 0);
    zkr_lock_free(a);
    zkr_lock_free(b);
    zkr_session_free(sa);
    zkr_session_free(sb);
}

/* (b)/(c) Adopted handle: LOST at the safe deadline, then the same
 * session reconnects. The header promises "earlier grants stay lost and
 * their nodes are deleted". g_adopted is read by the client's event thread
 * and set by the test's: atomic. */
static zkr_session_t *_Atomic g_adopted;
static void app_watcher(zhandle_t *zh, int type, int st, const char *path,
                        void *ctx)
{
    (void)zh;
    (void)path;
    (void)ctx;
    if (g_adopted != NULL)
        zkr_session_process_event(g_adopted, type, st);
}
static void test_adopted_lost_then_back(void **state)
{
    enum { T = 12000 };
    zhandle_t *zh;
    zkr_session_t *sa = NULL, *sb = open_session(10000);
    zkr_lock_t *a, *b;
    int rb;

    (void)state;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zh = zookeeper_init(zkt_proxy_hosts(proxy), app_watcher, T, NULL, NULL, 0);
    assert_non_null(zh);
    assert_int_equal(zkt_wait_connected(zh, 10000), 0);
    assert_int_equal(zkr_session_adopt(&sa, zh), 0);
    g_adopted = sa;
    a = new_lock(sa, "/r/adopt", "a");
    b = new_lock(sb, "/r/adopt", "b");
    assert_int_equal(zkr_lock_acquire(a, -1), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_state(sa) == ZKR_STATE_LOST, 2 * T));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    ZKT_WAIT_UNTIL(zkr_session_state(sa) == ZKR_STATE_CONNECTED, 5000);
    print_message(
        "adopted state after pass: %d (CONNECTED=%d), lock a state %d\n",
        zkr_session_state(sa), ZKR_STATE_CONNECTED, zkr_lock_state(a));
    usleep(1000000);
    print_message("children of /r/adopt: %d\n", children("/r/adopt"));
    rb = zkr_lock_acquire(b, 3000);
    print_message("other session's acquire: %d (%s)\n", rb, zkr_strerror(rb));
    assert_int_equal(rb, 0);
    zkr_lock_release(b);
    zkr_lock_free(a);
    zkr_lock_free(b);
    g_adopted = NULL;
    zkr_session_free(sa);
    zookeeper_close(zh);
    zkr_session_free(sb);
}

/* The same with an ack under way (the claim's commit sent into the cut):
 * the adopted session is declared LOST and comes back. The claim node
 * must go with the LOST as a held node does, or the item stays claimed
 * by a live session while the application keeps its handle (the ack was
 * reported as not applied). Another consumer then takes the item.      */
static atomic_int ack_rc = 1000;
static void acked(int rc, zkr_item_t *it, void *data)
{
    (void)it;
    (void)data;
    atomic_store(&ack_rc, rc);
}

static void test_adopted_lost_while_acking(void **state)
{
    enum { T = 12000 };
    zhandle_t *zh;
    zkr_session_t *sa = NULL, *sb = open_session(10000);
    zkr_workq_t *qa = NULL, *qb = NULL;
    zkr_item_t *it = NULL, *again = NULL;
    int rb;

    (void)state;
    atomic_store(&ack_rc, 1000);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zh = zookeeper_init(zkt_proxy_hosts(proxy), app_watcher, T, NULL, NULL, 0);
    assert_non_null(zh);
    assert_int_equal(zkt_wait_connected(zh, 10000), 0);
    assert_int_equal(zkr_session_adopt(&sa, zh), 0);
    g_adopted = sa;
    assert_int_equal(zkr_workq_new(&qa, sa, "/r/adoptq", "a", NULL), 0);
    assert_int_equal(zkr_workq_new(&qb, sb, "/r/adoptq", "b", NULL), 0);
    assert_int_equal(zkr_workq_put(qb, "job", 3, 0, NULL, 0), 0);
    assert_int_equal(zkr_workq_take(qa, 5000, &it), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkr_item_ack_async(it, acked, NULL), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_state(sa) == ZKR_STATE_LOST, 2 * T));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    ZKT_WAIT_UNTIL(zkr_session_state(sa) == ZKR_STATE_CONNECTED, 5000);
    rb = zkr_workq_take(qb, 5000, &again);
    print_message("# adopted LOST while acking: ack %d, another consumer's "
                  "take %d (%s)\n",
                  atomic_load(&ack_rc), rb, zkr_strerror(rb));
    if (again != NULL) {
        assert_int_equal(zkr_item_ack(again), 0);
        zkr_item_free(again);
    }
    zkr_item_free(it);
    zkr_workq_free(qa);
    zkr_workq_free(qb);
    g_adopted = NULL;
    zkr_session_free(sa);
    zookeeper_close(zh);
    zkr_session_free(sb);
    assert_int_equal(rb, 0);
}

/* zkr.h: credentials the server refuses: the waiting open returns
 * ZAUTHFAILED; with no_wait the session becomes LOST (its listener hears
 * it, its last error says why) as a connected one's would, and (owned,
 * reconnecting) comes back as a new session once they are accepted. The
 * refusal is the proxy's (fail-auth): a digest is never refused by the
 * server itself. */
static atomic_int auth_states[8];
static void auth_listener(zkr_session_t *s, zkr_state_t st, void *data)
{
    (void)s;
    (void)data;
    if ((int)st >= 0 && (int)st < 8)
        atomic_fetch_add(&auth_states[st], 1);
}

static void test_credentials_refused(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    char why[256];

    (void)state;
    o.digest = "alice:secret";
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "fail-auth"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), 6000, &o),
                     ZAUTHFAILED);
    assert_null(s);

    o.no_wait = 1;
    o.listener = auth_listener;
    assert_int_equal(zkt_proxy_cmd(proxy, "fail-auth"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), 6000, &o), 0);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&auth_states[ZKR_STATE_LOST]) > 0,
                               zkt_scaled_ms(20000)));
    assert_true(zkr_session_last_error(s, why, sizeof(why)) > 0);
    print_message("no_wait, credentials refused: %s\n", why);
    assert_non_null(strstr(why, "refused the credentials"));
    /* Accepted the next time: a new session. */
    assert_true(
        ZKT_WAIT_UNTIL(atomic_load(&auth_states[ZKR_STATE_CONNECTED]) > 0,
                       zkt_scaled_ms(20000)));
    assert_int_equal(zkr_session_free(s), 0);
}

/* zkr.h: the waiting open returns ZAUTHFAILED when the server refuses the
 * credentials. The connection may be lost after the handshake and before
 * the server's answer to them: the client sends them again on its next
 * connection, whose answer is the one the open waits for, refused
 * (ZAUTHFAILED) or accepted (0, the session usable). */
static void test_credentials_answer_after_reconnect(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_lock_t *l = NULL;

    (void)state;
    o.digest = "alice:secret";
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "reset-auth"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "fail-auth"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), 6000, &o),
                     ZAUTHFAILED);
    assert_null(s);

    assert_int_equal(zkt_proxy_cmd(proxy, "reset-auth"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), 6000, &o), 0);
    assert_int_equal(zkr_lock_new(&l, s, "/r/authlock", "a", NULL), 0);
    assert_int_equal(zkr_lock_acquire(l, zkt_scaled_ms(12000)), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    zkr_lock_free(l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The same when the first connect attempt fails (a dead server first in
 * the list, tried in the list's order): the credentials are answered on
 * the connection that follows, refused there (ZAUTHFAILED). */
static void test_credentials_refused_after_failed_attempt(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    struct sockaddr_in a = {0};
    socklen_t len = sizeof(a);
    char hosts[128];
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    (void)state;
    /* A port nothing listens on: bound, then closed. */
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d,%s", ntohs(a.sin_port),
             zkt_proxy_hosts(proxy));
    o.digest = "alice:secret";
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "fail-auth"), 0);
    zoo_deterministic_conn_order(1);
    assert_int_equal(zkr_session_open(&s, hosts, 6000, &o), ZAUTHFAILED);
    zoo_deterministic_conn_order(0);
    assert_null(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_node_recreated_in_window),
        cmocka_unit_test(test_waiter_node_recreated_two_holders),
        cmocka_unit_test(test_sem_foreign_ahead_grant_lost),
        cmocka_unit_test(test_adopted_lost_then_back),
        cmocka_unit_test(test_adopted_lost_while_acking),
        cmocka_unit_test(test_credentials_refused),
        cmocka_unit_test(test_credentials_answer_after_reconnect),
        cmocka_unit_test(test_credentials_refused_after_failed_attempt),
    };
    alarm(300); /* a hang is a failure, not a stuck CI */
    zkt_test_filter();
    return cmocka_run_group_tests(tests, proxy_setup, proxy_teardown);
}
