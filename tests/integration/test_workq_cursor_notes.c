/* The cursor's watches are noted before a listing is sent (cursor_watch,
 * docs/design/workq.md, 3, step 1); a listing that sets no watch (NONODE:
 * the tail bucket deleted by another consumer between the level's listing
 * and the bucket's) must forget its note, or the 16 slots fill with paths
 * no event will ever forget, and no take of the handle keeps a cursor
 * again. White box (links libzkr_core.la, reads q->cur); failed on
 * 8e7ab5c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"
#include "server_test.h"
#include "workq.h"
#undef zoo_awget_children2

static zhandle_t *target_zh;
static char hook_path[512];
static void (*hook)(void);

typedef int (*children2_fn)(zhandle_t *, const char *, watcher_fn, void *,
                            strings_stat_completion_t, const void *);

int zoo_awget_children2(zhandle_t *zh, const char *path, watcher_fn w,
                        void *wctx, strings_stat_completion_t c,
                        const void *data)
{
    static children2_fn real;
    if (real == NULL)
        real = (children2_fn)dlsym(RTLD_NEXT, "zoo_awget_children2");
    if (zh == target_zh && hook != NULL && strcmp(path, hook_path) == 0) {
        void (*h)(void) = hook;
        hook = NULL;
        h();
    }
    return real(zh, path, w, wctx, c, data);
}

static zkr_workq_t *p; /* another client: producer and consumer */
static char tail[512];

/* Between q's listing of the level and of its tail bucket: the tail is
 * sealed (two puts, B = 1), drained and deleted, as another consumer's
 * scan deletes an empty sealed bucket that is no longer the last. */
static void *drain_main(void *arg);
static void drain_tail(void)
{
    pthread_t th;
    /* on another thread: this one is the client's (zkr__in_callback) */
    pthread_create(&th, NULL, drain_main, NULL);
    pthread_join(th, NULL);
}

static void *drain_main(void *arg)
{
    zkr_item_t *it[2];
    int n = 0;
    char id[ZKR_WORKQ_ID_MAX];

    assert_int_equal(zkr_workq_put(p, "x", 1, 1, id, sizeof(id)), 0);
    assert_int_equal(zkr_workq_put(p, "y", 1, 1, NULL, 0), 0);
    assert_int_equal(zkr_workq_take_batch(p, 2, 2000, it, &n), 0);
    for (int i = 0; i < n; i++) {
        assert_int_equal(zkr_item_ack(it[i]), 0);
        zkr_item_free(it[i]);
    }
    (void)zoo_delete(raw, tail, -1);
    (void)arg;
    return NULL;
}

static void test_stale_cursor_notes(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = NULL;
    const char *cfg = "zkr-workq 1 bucket=1";
    struct Stat st;

    (void)state;
    (void)zoo_create(raw, "/t", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/t/cn", cfg, (int)strlen(cfg),
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkr_workq_new(&q, s, "/t/cn", "q", NULL), 0);
    assert_int_equal(zkr_workq_new(&p, ps, "/t/cn", "p", NULL), 0);
    target_zh = zkr_session_handle(s);
    for (int round = 0; round < 24; round++) {
        zkr_item_t *it;

        assert_int_equal(zkr_workq_put(p, "z", 1, 1, NULL, 0), 0);
        assert_int_equal(raw_stat("/t/cn/q1", &st), ZOK);
        snprintf(tail, sizeof(tail), "/t/cn/q1/b%010d", st.version);
        /* z is in the tail: a put seals it only at its second item */
        snprintf(hook_path, sizeof(hook_path), "%s", tail);
        hook = drain_tail;
        /* a listing from the top: the cursor must be invalid */
        pthread_mutex_lock(&s->mu);
        q->cur.changed |= WQ_CHANGED_TOP;
        pthread_mutex_unlock(&s->mu);
        if (zkr_workq_take(q, 3000, &it) == 0) {
            assert_int_equal(zkr_item_ack(it), 0);
            zkr_item_free(it);
        }
        pthread_mutex_lock(&s->mu);
        print_message("# round %d: cursor notes %d, cursor kept %d\n", round,
                      q->cur.nw, q->cur.have);
        pthread_mutex_unlock(&s->mu);
    }
    /* quiet now: one more take from the top must keep a cursor */
    {
        zkr_item_t *it;
        hook = NULL;
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < q->cur.nw; i++)
            print_message("#   noted %s (%s)\n", q->cur.wpath[i],
                          raw_exists(q->cur.wpath[i]) ? "exists" : "gone");
        pthread_mutex_unlock(&s->mu);
        assert_int_equal(zkr_workq_put(p, "last", 4, 1, NULL, 0), 0);
        pthread_mutex_lock(&s->mu);
        q->cur.changed |= WQ_CHANGED_TOP;
        pthread_mutex_unlock(&s->mu);
        assert_int_equal(zkr_workq_take(q, 3000, &it), 0);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
        pthread_mutex_lock(&s->mu);
        print_message("# quiet take: cursor notes %d, cursor kept %d\n",
                      q->cur.nw, q->cur.have);
        assert_int_equal(q->cur.have, 1);
        pthread_mutex_unlock(&s->mu);
    }
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_cursor_notes),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq_cursor_notes", tests, setup,
                                       teardown);
}
