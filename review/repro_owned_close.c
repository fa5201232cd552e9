/* review12, suspected weakness (b): an OWNED handle declared LOST while
 * zkr believes it disconnected is closed at once (declare_lost: replace =
 * 1, not replace_at = last_heard + T). If the ZooKeeper client has in fact
 * reconnected the same, live session (its CONNECTED event not yet run by
 * zkr), zookeeper_close() sends closeSession: the server deletes the
 * holder's node at once and the next contender is granted one round trip
 * after LOST, not at last_heard + T (T/10 later) as for a LOST declared
 * while connected.
 *
 * The window is widened here the way an application can: it has its own
 * asynchronous requests on zkr_session_handle() (allowed: "for the
 * application's own calls") whose completions are slow (100 ms each, e.g.
 * logging). The connection is cut (blackhole, so they are outstanding,
 * then reset): zkr sees CONNECTING (SUSPENDED), then the ZooKeeper
 * completion thread runs the 60 failed completions (6 s) while the client
 * reconnects at once; the CONNECTED event waits behind them. The safe
 * deadline passes meanwhile.
 *
 * Build: see repro_adopt_lost.c (same command, this file).
 * Run: ZKR_TEST_BUILDDIR=$PWD review/repro_owned_close [N]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "zkr.h"

static int64_t t_granted, t_holder_lost_cb;

static void on_granted(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    (void)data;
    if (rc == 0)
        __atomic_store_n(&t_granted, zkt_now_ms(), __ATOMIC_SEQ_CST);
}

static void on_holder_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    (void)data;
    if (st == ZKR_LOCK_LOST && t_holder_lost_cb == 0)
        __atomic_store_n(&t_holder_lost_cb, zkt_now_ms(), __ATOMIC_SEQ_CST);
}

static void slow_app_completion(int rc, const struct Stat *st, const void *d)
{
    (void)st;
    (void)d;
    if (rc == ZCONNECTIONLOSS)
        zkt_sleep_ms(100);
}

static void trial(const char *server_hosts, int i)
{
    zkt_proxy_t *p;
    zkr_session_t *h = NULL, *w = NULL;
    zkr_lock_t *lh, *lw;
    char path[64];
    int64_t deadline, t_lost = 0, t_reconnected = 0;
    zhandle_t *zh;

    snprintf(path, sizeof(path), "/r12b/owned-%d", i);
    t_granted = t_holder_lost_cb = 0;
    if (zkt_proxy_start(server_hosts, &p) != 0 ||
        zkr_session_open(&h, zkt_proxy_hosts(p), 4000, NULL) != 0 ||
        zkr_session_wait_connected(h, 10000) != 0 ||
        zkr_lock_new(&lh, h, path, "holder", NULL) != 0 ||
        zkr_lock_set_listener(lh, on_holder_state, NULL) != 0 ||
        zkr_lock_acquire(lh, 5000) != 0 ||
        zkr_session_open(&w, server_hosts, 10000, NULL) != 0 ||
        zkr_session_wait_connected(w, 10000) != 0 ||
        zkr_lock_new(&lw, w, path, "waiter", NULL) != 0 ||
        zkr_lock_acquire_async(lw, -1, on_granted, NULL) != 0) {
        printf("setup failed\n");
        exit(2);
    }
    zkt_sleep_ms(1500);
    deadline = zkt_now_ms() + zkr_session_valid_ms(h);
    zh = zkr_session_handle(h);
    zkt_proxy_cmd(p, "blackhole");
    for (int k = 0; k < 60; k++)
        zoo_aexists(zh, "/", 0, slow_app_completion, NULL);
    zkt_sleep_ms(200);
    zkt_proxy_cmd(p, "reset");
    zkt_proxy_cmd(p, "pass");
    zkr_state_t prev = ZKR_STATE_CONNECTED;
    for (zkr_state_t cur; (cur = zkr_session_state(h)) != ZKR_STATE_LOST;) {
        prev = cur;
        if (t_reconnected == 0 && zoo_state(zh) == ZOO_CONNECTED_STATE)
            t_reconnected = zkt_now_ms();
        zkt_sleep_ms(1);
    }
    t_lost = zkt_now_ms();
    printf("zkr state just before LOST: %s\n", zkr_state_name(prev));
    if (!ZKT_WAIT_UNTIL(__atomic_load_n(&t_granted, __ATOMIC_SEQ_CST) != 0,
                        10000)) {
        printf("waiter never granted\n");
        exit(1);
    }
    printf("owned trial %d: client reconnected at LOST%+lld ms (zkr state at "
           "LOST: was SUSPENDED); LOST at deadline%+lld ms; waiter granted "
           "LOST%+lld ms = deadline%+lld ms; holder's LOST callback at "
           "LOST%+lld ms (expected grant >= deadline + T/10 = +400 ms)\n",
           i, t_reconnected ? (long long)(t_reconnected - t_lost) : 0LL,
           (long long)(t_lost - deadline), (long long)(t_granted - t_lost),
           (long long)(t_granted - deadline),
           (long long)(t_holder_lost_cb - t_lost));
    fflush(stdout);
    zkr_lock_release(lw);
    zkr_lock_free(lw);
    zkr_session_free(w);
    zkr_lock_free(lh);
    zkr_session_free(h);
    zkt_proxy_stop(p);
}

int main(int argc, char **argv)
{
    zkt_server_t *srv;
    int n = argc > 1 ? atoi(argv[1]) : 3;

    if (zkt_server_start(&srv) != 0)
        return 2;
    for (int i = 0; i < n; i++)
        trial(zkt_server_hosts(srv), i);
    zkt_server_stop(srv);
    return 0;
}
