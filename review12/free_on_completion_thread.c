/* rereview12: zkr_session_free() called on the ZooKeeper client's own
 * completion thread (from a completion of the application's raw call on
 * the handle zkr_session_handle() gave it; documented as safe for a
 * no_reconnect session "until zkr_session_free()").
 *
 * close_handle() assumes that once zookeeper_close() returns the client's
 * threads are joined. Called on the completion thread, adaptor_finish()
 * only detaches that thread: the answers already queued (here the
 * heartbeat's) are still delivered after zkr completed the same ops with
 * its synthetic ZCLOSING and session_destroy() freed the session: a
 * double completion and a use-after-free (ping_done -> zkr__op_begin on a
 * freed op / session mutex).
 * Before 86fe069 the same call hung forever in `while (s->ops > 0)`.
 *
 * Mode 1 (argument "1"): zkr_lock_acquire(l, 500) from the same kind of
 * completion: it returns only after ~0.9T (ZKR_ELOST; the session is
 * declared LOST since no heartbeat answer can be processed while the
 * completion thread is blocked): a call past its timeout that also kills
 * the session. zkr__in_callback() only knows zkr's own event thread.
 *
 * Build (after zkr_build), from the worktree:
 *   gcc -g -fsanitize=address -I include -I src -I tests -o /tmp/rr12_free \
 *     review12/free_on_completion_thread.c tests/harness.c \
 *     src/.libs/libzkr.a -lzookeeper_mt -lpthread   (see run.sh)
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "zkr.h"
#include "harness.h"

static zkr_session_t *sess;
static zkr_lock_t *lk;
static int mode; /* 0: zkr_session_free; 1: zkr_lock_acquire(lk, 500) */
static volatile int freed_rc = 12345, cb_done;

static void raw_done(int rc, const struct Stat *st, const void *data)
{
    (void)st;
    (void)data;
    if (mode == 1) {
        int64_t t0 = zkt_now_ms();
        fprintf(stderr, "calling zkr_lock_acquire(500 ms) on the client's "
                        "completion thread\n");
        freed_rc = zkr_lock_acquire(lk, 500);
        fprintf(stderr, "zkr_lock_acquire returned %d after %lld ms\n",
                freed_rc, (long long)(zkt_now_ms() - t0));
        cb_done = 1;
        return;
    }
    fprintf(stderr, "raw completion rc=%d on the client's completion thread;"
                    " letting a heartbeat go out...\n", rc);
    usleep(1200 * 1000); /* > T/12: zkr sends its heartbeat (zoo_async) */
    fprintf(stderr, "calling zkr_session_free() here\n");
    freed_rc = zkr_session_free(sess);
    fprintf(stderr, "zkr_session_free() returned %d; returning to the "
                    "client (which still holds the ping's real answer)\n",
            freed_rc);
    cb_done = 1;
}

int main(int argc, char **argv)
{
    zkt_server_t *srv;
    zkr_session_options_t o = {0};
    zhandle_t *zh;
    int rc;

    if (zkt_server_start(&srv) != 0) {
        fprintf(stderr, "no server\n");
        return 2;
    }
    o.no_reconnect = 1;
    rc = zkr_session_open(&sess, zkt_server_hosts(srv), 4000, &o);
    if (rc != 0) {
        fprintf(stderr, "open: %d\n", rc);
        return 2;
    }
    mode = argc > 1 ? atoi(argv[1]) : 0;
    if (mode == 1 && zkr_lock_new(&lk, sess, "/rr12lock", "x", NULL) != 0)
        return 2;
    zh = zkr_session_handle(sess);
    rc = zoo_aexists(zh, "/", 0, raw_done, NULL);
    fprintf(stderr, "zoo_aexists: %d\n", rc);
    for (int i = 0; i < 400 && !cb_done; i++)
        usleep(50 * 1000);
    sleep(2);
    fprintf(stderr, "end: cb_done=%d free rc=%d (no crash reported: "
                    "not reproduced)\n", cb_done, freed_rc);
    zkt_server_stop(srv);
    return 0;
}
