/* review12, (a) without any reconnection, and what follows it. An ADOPTED
 * session on a slow but working link (proxy "delay 800": every chunk held
 * 800 ms each way; nothing is lost, the ZooKeeper client never
 * disconnects, the server never comes near expiring the session): zkr's
 * heartbeat proof trails by more than 0.9 T, so zkr declares LOST while
 * connected, and deletes the adopted session's nodes at once: the waiter
 * is granted ~1 link delay after LOST (an owned session would keep the
 * node until last_heard + T). Then the link is healed ("delay 0"): the
 * adopted session stays LOST for good (no reconnection ever comes, and
 * no heartbeat is sent in LOST), although its ZooKeeper session is live
 * and connected: every acquire on it fails with ZKR_ELOST.
 *
 * FOUND on the way (worse): in that state (LOST, still connected, no
 * heartbeat in flight) timer_main() computes its next wake-up from
 * next_ping, which is in the past and never advances (no ping is sent
 * in LOST): it loops without waiting, holding s->mu. Owned: for T/10,
 * until replace_at (every zkr call on the session, and ZooKeeper's
 * completion thread, stall meanwhile). Adopted: forever: every zkr call
 * on the session hangs, and so does the application's own handle (its
 * completion thread blocks in zkr's watcher on s->mu). The program
 * prints HANG and exits 3 after 20 s.
 *
 * Build: as repro_adopt_lost.c. Run:
 *   ZKR_TEST_BUILDDIR=$PWD review/repro_adopt_slowlink [adopt|owned]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "zkr.h"

static zkr_session_t *adopted;

static void on_alarm(int sig)
{
    static const char msg[] =
        "HANG: a zkr call on the LOST session has been blocked for 20 s "
        "(its timer thread spins holding the session mutex: LOST, "
        "connected, no heartbeat in flight, next_ping in the past)\n";
    (void)sig;
    write(1, msg, sizeof(msg) - 1);
    _exit(3);
}
static int64_t t_granted;

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

int main(int argc, char **argv)
{
    zkt_server_t *srv;
    zkt_proxy_t *p;
    zhandle_t *zh = NULL;
    zkr_session_t *h = NULL, *w = NULL;
    zkr_lock_t *lh, *lw, *l2;
    int adopt = argc < 2 || strcmp(argv[1], "owned") != 0;
    int64_t t_lost, deadline;
    const char *path = "/r12c/lock";

    if (zkt_server_start(&srv) != 0 ||
        zkt_proxy_start(zkt_server_hosts(srv), &p) != 0)
        return 2;
    if (adopt) {
        zh = zookeeper_init(zkt_proxy_hosts(p), app_watcher, 4000, NULL, NULL,
                            0);
        if (zh == NULL || zkt_wait_connected(zh, 10000) != 0 ||
            zkr_session_adopt(&h, zh) != 0)
            return 2;
        __atomic_store_n(&adopted, h, __ATOMIC_SEQ_CST);
    } else if (zkr_session_open(&h, zkt_proxy_hosts(p), 4000, NULL) != 0 ||
               zkr_session_wait_connected(h, 10000) != 0) {
        return 2;
    }
    if (zkr_lock_new(&lh, h, path, "holder", NULL) != 0 ||
        zkr_lock_acquire(lh, 5000) != 0 ||
        zkr_session_open(&w, zkt_server_hosts(srv), 10000, NULL) != 0 ||
        zkr_session_wait_connected(w, 10000) != 0 ||
        zkr_lock_new(&lw, w, path, "waiter", NULL) != 0 ||
        zkr_lock_acquire_async(lw, -1, on_granted, NULL) != 0)
        return 2;
    zkt_sleep_ms(1000);
    deadline = zkt_now_ms() + zkr_session_valid_ms(h);
    zkt_proxy_cmd(p, "delay 800");
    while (zkr_session_state(h) != ZKR_STATE_LOST)
        zkt_sleep_ms(1);
    t_lost = zkt_now_ms();
    {
        int64_t t0 = zkt_now_ms();
        signal(SIGALRM, on_alarm);
        alarm(20);
        int64_t worst = 0, worst_at = 0;
        /* Poll for 1 s after LOST: the longest a trivial call blocks. */
        while (zkt_now_ms() - t0 < 1000) {
            int64_t c0 = zkt_now_ms();
            (void)zkr_session_valid_ms(h);
            if (zkt_now_ms() - c0 > worst) {
                worst = zkt_now_ms() - c0;
                worst_at = c0 - t_lost;
            }
            zkt_sleep_ms(1);
        }
        alarm(0);
        printf("%s: in the 1 s after LOST, zkr_session_valid_ms() blocked up "
               "to %lld ms (the call made at LOST%+lld ms)\n",
               adopt ? "adopt" : "owned", (long long)worst,
               (long long)worst_at);
        fflush(stdout);
    }
    if (!ZKT_WAIT_UNTIL(t_granted != 0, 15000)) {
        printf("waiter never granted\n");
        return 1;
    }
    printf("%s: LOST at (pre-delay deadline)%+lld ms, client state %s; "
           "waiter granted LOST%+lld ms\n",
           adopt ? "adopt" : "owned", (long long)(t_lost - deadline),
           adopt ? (zoo_state(zh) == ZOO_CONNECTED_STATE ? "CONNECTED"
                                                          : "not connected")
                 : "-",
           (long long)(t_granted - t_lost));
    fflush(stdout);
    zkt_proxy_cmd(p, "delay 0");
    zkr_lock_release(lw);
    zkt_sleep_ms(5000);
    if (adopt) {
        int rc;
        alarm(20);
        zkr_lock_new(&l2, h, "/r12c/other", "again", NULL);
        rc = zkr_lock_acquire(l2, 3000);
        printf("adopt: 5 s after healing: ZooKeeper state %s, same session "
               "0x%llx live; zkr state %s; acquire on it -> %d (%s)\n",
               zoo_state(zh) == ZOO_CONNECTED_STATE ? "CONNECTED" : "other",
               (unsigned long long)zoo_client_id(zh)->client_id,
               zkr_state_name(zkr_session_state(h)), rc, zkr_strerror(rc));
        zkr_lock_free(l2);
    }
    zkr_lock_free(lw);
    zkr_session_free(w);
    zkr_lock_free(lh);
    __atomic_store_n(&adopted, NULL, __ATOMIC_SEQ_CST);
    zkr_session_free(h);
    if (zh != NULL)
        zookeeper_close(zh);
    zkt_proxy_stop(p);
    zkt_server_stop(srv);
    return 0;
}
