/* review12: the adopted-session hang from a paused process (SIGSTOP), no
 * proxy. A child adopts its own handle (T = 10 s), takes a lock and
 * reports; the parent freezes it for 5.8 s (past zkr's safe deadline,
 * ~0.57 T after a heartbeat, but before the ZooKeeper client's own 2T/3
 * receive timeout, so the connection survives) and thaws it. zkr declares
 * LOST on a live connection; its timer thread then spins holding s->mu
 * (next_ping in the past, no ping sent in LOST): the child's next zkr
 * call never returns. The child prints HANG after 20 s (exit 3).
 *
 * Build: as repro_adopt_lost.c. Run:
 *   ZKR_TEST_BUILDDIR=$PWD review/repro_adopt_pause [adopt|owned] [N]
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "zkr.h"

static zkr_session_t *adopted;

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

static void on_alarm(int sig)
{
    static const char msg[] = "child: HANG: zkr_session_state() blocked "
                              "for 20 s after the thaw\n";
    (void)sig;
    write(1, msg, sizeof(msg) - 1);
    _exit(3);
}

static int child(const char *hosts, int adopt, int fd)
{
    zhandle_t *zh = NULL;
    zkr_session_t *h;
    zkr_lock_t *l;

    if (adopt) {
        zh = zookeeper_init(hosts, app_watcher, 10000, NULL, NULL, 0);
        if (zh == NULL || zkt_wait_connected(zh, 10000) != 0 ||
            zkr_session_adopt(&h, zh) != 0)
            return 2;
        __atomic_store_n(&adopted, h, __ATOMIC_SEQ_CST);
    } else if (zkr_session_open(&h, hosts, 10000, NULL) != 0 ||
               zkr_session_wait_connected(h, 10000) != 0) {
        return 2;
    }
    if (zkr_lock_new(&l, h, "/r12d/lock", NULL, NULL) != 0 ||
        zkr_lock_acquire(l, 5000) != 0)
        return 2;
    zkt_sleep_ms(2000);
    write(fd, "r", 1); /* ready: the parent freezes us from here */
    zkt_sleep_ms(8000); /* 5.8 s of it frozen */
    signal(SIGALRM, on_alarm);
    alarm(20);
    printf("child: after the thaw: zkr state %s, client %s\n",
           zkr_state_name(zkr_session_state(h)),
           zh == NULL ? "-"
           : zoo_state(zh) == ZOO_CONNECTED_STATE ? "CONNECTED"
                                                  : "not connected");
    fflush(stdout);
    int64_t worst = 0;
    zkr_state_t last = ZKR_STATE_CONNECTED;
    for (int64_t t0 = zkt_now_ms(); zkt_now_ms() - t0 < 6000;) {
        int64_t c0 = zkt_now_ms();
        last = zkr_session_state(h);
        if (zkt_now_ms() - c0 > worst)
            worst = zkt_now_ms() - c0;
        zkt_sleep_ms(2);
    }
    alarm(0);
    printf("child: zkr calls kept returning for 6 s after the thaw (state "
           "%s); the longest blocked %lld ms\n", zkr_state_name(last),
           (long long)worst);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv)
{
    zkt_server_t *srv;
    int adopt = argc < 2 || strcmp(argv[1], "owned") != 0;
    int n = argc > 2 ? atoi(argv[2]) : 3, hangs = 0;

    if (zkt_server_start(&srv) != 0)
        return 2;
    for (int i = 0; i < n; i++) {
        int pfd[2], st;
        char c;
        pid_t pid;

        if (pipe(pfd) != 0)
            return 2;
        fflush(stdout);
        if ((pid = fork()) == 0) {
            close(pfd[0]);
            _exit(child(zkt_server_hosts(srv), adopt, pfd[1]));
        }
        close(pfd[1]);
        if (read(pfd[0], &c, 1) != 1)
            return 2;
        kill(pid, SIGSTOP);
        zkt_sleep_ms(5800);
        kill(pid, SIGCONT);
        waitpid(pid, &st, 0);
        close(pfd[0]);
        printf("%s trial %d: child exit %d\n", adopt ? "adopt" : "owned", i,
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        hangs += WIFEXITED(st) && WEXITSTATUS(st) == 3;
        fflush(stdout);
    }
    printf("%s: %d of %d trials hung\n", adopt ? "adopt" : "owned", hangs, n);
    zkt_server_stop(srv);
    return hangs > 0;
}
