/* review12, suspected weakness (a): an ADOPTED session that zkr declares
 * LOST while its connection is (or comes back) up deletes its nodes at
 * once, so the next contender is granted about one round trip after the
 * holder's LOST; an OWNED session in the same situation keeps its handle
 * (and node) until last_heard + T, leaving the application the tenth of T
 * the comment in src/session.c (declare_lost) promises.
 *
 * Same fault for both modes: holder H (T = 4 s) through a proxy, waiter W
 * on a direct session. Blackhole H's link until zkr says LOST (the client
 * itself has not given up the connection yet: 2T/3), then "pass" (the
 * proxy resets the stream; the client reconnects the same, live session).
 * Printed: grant - LOST, and grant - H's safe deadline (read from
 * zkr_session_valid_ms() just before the cut), and whether W's grant came
 * before H's lock listener reported LOST.
 *
 * Build (after zkr_build; from the worktree):
 *   make -s tests/libharness.la tests/zkr-proxy
 *   gcc -O1 -g -Iinclude -Itests review/repro_adopt_lost.c \
 *     .libs/libzkr.a tests/.libs/libharness.a -lzookeeper_mt -lpthread \
 *     -o review/repro_adopt_lost
 * Run: ZKR_TEST_BUILDDIR=$PWD review/repro_adopt_lost [adopt|owned] [N]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "zkr.h"

static zkr_session_t *adopted;
static int64_t t_granted, t_holder_lost_cb;

static void app_watcher(zhandle_t *zh, int type, int st, const char *path,
                        void *ctx)
{
    (void)zh;
    (void)path;
    (void)ctx;
    zkr_session_t *s = __atomic_load_n(&adopted, __ATOMIC_SEQ_CST);
    if (s != NULL)
        zkr_session_process_event(s, type, st);
}

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

static int trial(const char *server_hosts, int adopt, int i)
{
    zkt_proxy_t *p;
    zhandle_t *zh = NULL;
    zkr_session_t *h = NULL, *w = NULL;
    zkr_lock_t *lh, *lw;
    char path[64];
    int64_t deadline, t_lost;

    snprintf(path, sizeof(path), "/r12/%s-%d", adopt ? "adopt" : "owned", i);
    t_granted = t_holder_lost_cb = 0;
    if (zkt_proxy_start(server_hosts, &p) != 0)
        return -1;
    if (adopt) {
        zh = zookeeper_init(zkt_proxy_hosts(p), app_watcher, 4000, NULL, NULL,
                            0);
        if (zh == NULL || zkt_wait_connected(zh, 10000) != 0)
            return -1;
        if (zkr_session_adopt(&h, zh) != 0)
            return -1;
        __atomic_store_n(&adopted, h, __ATOMIC_SEQ_CST);
    } else if (zkr_session_open(&h, zkt_proxy_hosts(p), 4000, NULL) != 0 ||
               zkr_session_wait_connected(h, 10000) != 0) {
        return -1;
    }
    if (zkr_lock_new(&lh, h, path, "holder", NULL) != 0 ||
        zkr_lock_set_listener(lh, on_holder_state, NULL) != 0 ||
        zkr_lock_acquire(lh, 5000) != 0)
        return -1;
    if (zkr_session_open(&w, server_hosts, 10000, NULL) != 0 ||
        zkr_session_wait_connected(w, 10000) != 0 ||
        zkr_lock_new(&lw, w, path, "waiter", NULL) != 0 ||
        zkr_lock_acquire_async(lw, -1, on_granted, NULL) != 0)
        return -1;
    zkt_sleep_ms(1500); /* steady heartbeats */
    deadline = zkt_now_ms() + zkr_session_valid_ms(h);
    zkt_proxy_cmd(p, "blackhole");
    while (zkr_session_state(h) != ZKR_STATE_LOST)
        zkt_sleep_ms(1);
    t_lost = zkt_now_ms();
    zkt_proxy_cmd(p, "pass");
    if (!ZKT_WAIT_UNTIL(__atomic_load_n(&t_granted, __ATOMIC_SEQ_CST) != 0,
                        10000)) {
        printf("%s: waiter never granted\n", adopt ? "adopt" : "owned");
        return -1;
    }
    printf("%s trial %d: LOST at deadline%+lld ms; waiter granted "
           "LOST%+lld ms = deadline%+lld ms; holder's LOST callback at "
           "LOST%+lld ms (T/10 = 400 ms)\n",
           adopt ? "adopt" : "owned", i, (long long)(t_lost - deadline),
           (long long)(t_granted - t_lost), (long long)(t_granted - deadline),
           (long long)(t_holder_lost_cb - t_lost));
    fflush(stdout);
    zkr_lock_release(lw);
    zkr_lock_free(lw);
    zkr_session_free(w);
    zkr_lock_free(lh);
    __atomic_store_n(&adopted, NULL, __ATOMIC_SEQ_CST);
    zkr_session_free(h);
    if (zh != NULL)
        zookeeper_close(zh);
    zkt_proxy_stop(p);
    return (int)(t_granted - t_lost);
}

int main(int argc, char **argv)
{
    zkt_server_t *srv;
    int adopt = argc < 2 || strcmp(argv[1], "owned") != 0;
    int n = argc > 2 ? atoi(argv[2]) : 3;

    if (zkt_server_start(&srv) != 0) {
        fprintf(stderr, "no server\n");
        return 2;
    }
    for (int i = 0; i < n; i++)
        trial(zkt_server_hosts(srv), adopt, i);
    zkt_server_stop(srv);
    return 0;
}
