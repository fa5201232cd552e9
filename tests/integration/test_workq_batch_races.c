/* A batch take's rounds (docs/design/workq.md, 3, step 8) under timing
 * that only the interposition of the library's zoo_aget makes (as in
 * test_workq_races.c: this program links libzkr_core.la statically). The
 * answers of a round's gets are intercepted on the way back: cancelled
 * at, delayed, or replaced by ZCONNECTIONLOSS (the answer lost with the
 * connection). Each test failed on the first version of the rounds
 * (review of 8e7ab5c):
 *  - test_cancel_during_probes: a cancel while a round's gets are out
 *    claims nothing more (a claim made and cancelled would count a
 *    delivery that was never made);
 *  - test_cancel_ignored_in_rounds / test_deadline_ignored_in_rounds: a
 *    round that finds only claimed items does not start the next one
 *    after a cancel or past the deadline;
 *  - test_lost_probe_skipped: a get whose answer was lost ends the batch
 *    at that item, and the handle's next take begins there: first
 *    deliveries in put order;
 *  - test_async_cb_frees: an asynchronous batch's callback may free its
 *    items and the handle. */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <zookeeper/proto.h>

#include "filter.h"
#include "server_test.h"

enum { H_NONE, H_CANCEL, H_DELAY, H_LOSE };

static zhandle_t *target_zh;
static atomic_int hook_mode;
static char hook_prefix[512]; /* gets of paths starting so are hooked */
static char lose_a[512], lose_b[512];
static char exclude[512]; /* ... but this one */
static atomic_int hooked_gets, gets_after_cancel, cancelled_once;
static atomic_int delay_us;
static atomic_int cancel_rc = 99;
static zkr_workq_t *hook_q;
static int64_t cancel_at_ms;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct wrap {
    data_completion_t dc;
    const void *data;
    char path[512];
};

static void wrapped(int rc, const char *value, int len, const struct Stat *st,
                    const void *data)
{
    struct wrap *w = (struct wrap *)data;
    int mode = hook_mode;

    if (mode == H_CANCEL && !atomic_exchange(&cancelled_once, 1)) {
        cancel_at_ms = now_ms();
        cancel_rc = zkr_workq_cancel(hook_q);
    } else if (mode == H_DELAY && delay_us > 0) {
        usleep((useconds_t)delay_us);
        if (!atomic_exchange(&cancelled_once, 1) && hook_q != NULL) {
            cancel_at_ms = now_ms();
            cancel_rc = zkr_workq_cancel(hook_q);
        }
    }
    if (mode == H_LOSE &&
        (strcmp(w->path, lose_a) == 0 || strcmp(w->path, lose_b) == 0)) {
        /* answered by the server, the answer lost with the connection */
        if (strcmp(w->path, lose_a) == 0)
            lose_a[0] = '\0';
        else
            lose_b[0] = '\0';
        w->dc(ZCONNECTIONLOSS, NULL, -1, NULL, w->data);
    } else {
        w->dc(rc, value, len, st, w->data);
    }
    free(w);
}

typedef int (*aget_fn)(zhandle_t *, const char *, int, data_completion_t,
                       const void *);

int zoo_aget(zhandle_t *zh, const char *path, int watch, data_completion_t dc,
             const void *data)
{
    static aget_fn real;
    struct wrap *w;

    if (real == NULL)
        real = (aget_fn)dlsym(RTLD_NEXT, "zoo_aget");
    if (zh != target_zh || hook_mode == H_NONE || hook_prefix[0] == '\0' ||
        strncmp(path, hook_prefix, strlen(hook_prefix)) != 0 ||
        strcmp(path, exclude) == 0)
        return real(zh, path, watch, dc, data);
    hooked_gets++;
    if (cancelled_once)
        gets_after_cancel++;
    w = calloc(1, sizeof(*w));
    w->dc = dc;
    w->data = data;
    snprintf(w->path, sizeof(w->path), "%s", path);
    return real(zh, path, watch, wrapped, w);
}

static void reset_hook(void)
{
    hook_mode = H_NONE;
    hook_prefix[0] = lose_a[0] = lose_b[0] = exclude[0] = '\0';
    hooked_gets = gets_after_cancel = cancelled_once = 0;
    delay_us = 0;
    hook_q = NULL;
    target_zh = NULL;
}

static zkr_workq_t *new_q(zkr_session_t *s, const char *path, const char *id)
{
    zkr_workq_t *q = NULL;
    assert_int_equal(zkr_workq_new(&q, s, path, id, NULL), 0);
    return q;
}

static void put_id(zkr_workq_t *q, const char *v, char *id)
{
    char buf[ZKR_WORKQ_ID_MAX];
    assert_int_equal(zkr_workq_put(q, v, strlen(v), 1, buf, sizeof(buf)), 0);
    if (id != NULL)
        strcpy(id, buf);
}

/* ---- a cancel while the probes are out: claims are made anyway and
 * cancelled, each counting one delivery of an item never delivered. */
static void test_cancel_during_probes(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/br/cp", "q"), *p = new_q(ps, "/t/br/cp", "p");
    char ids[4][ZKR_WORKQ_ID_MAX], path[600];
    zkr_item_t *it[4] = {0}, *again;
    struct Stat st;
    int n = -1, nothanded = 0;

    (void)state;
    reset_hook();
    put_id(p, "a", ids[0]);
    put_id(p, "b", ids[1]);
    put_id(p, "c", ids[2]);
    put_id(p, "d", ids[3]);
    /* the probes are the gets of b, c, d (a is read by the scan) */
    snprintf(hook_prefix, sizeof(hook_prefix), "/t/br/cp/%.*s", 15, ids[1]);
    snprintf(exclude, sizeof(exclude), "/t/br/cp/%s", ids[0]);
    hook_q = q;
    target_zh = zkr_session_handle(s);
    hook_mode = H_CANCEL;
    assert_int_equal(zkr_workq_take_batch(q, 4, 5000, it, &n), 0);
    print_message(
        "# cancelled batch: %d item(s), %d probe gets, cancel rc %d\n", n,
        (int)hooked_gets, (int)cancel_rc);
    for (int i = 0; i < n; i++)
        print_message("#   %s deliveries %d\n",
                      (const char *)zkr_item_data(it[i], NULL),
                      zkr_item_deliveries(it[i]));
    assert_true(n >= 1);
    assert_string_equal(zkr_item_data(it[0], NULL), "a");
    reset_hook();
    /* the items it did not hand over: never delivered, no claim counted */
    for (int i = 1; i < 4; i++) {
        int handed = 0;
        for (int j = 0; j < n; j++)
            handed |= strcmp(zkr_item_id(it[j]), ids[i]) == 0;
        snprintf(path, sizeof(path), "/t/br/cp/%s", ids[i]);
        assert_true(ZKT_WAIT_UNTIL(raw_stat(path, &st) == ZOK &&
                                       st.numChildren == (handed ? 1 : 0),
                                   5000));
        print_message("# %c: %s, cversion %d, version %d\n", 'a' + i,
                      handed ? "handed over" : "not handed over", st.cversion,
                      st.version);
        if (!handed)
            nothanded = i;
    }
    for (int j = 0; j < n; j++) {
        assert_int_equal(zkr_item_ack(it[j]), 0);
        zkr_item_free(it[j]);
    }
    if (nothanded > 0 && getenv("BR_DEAD") != NULL) {
        /* --max-deliveries 1: an item never delivered goes to the dead
         * letters */
        assert_int_equal(zkr_workq_set_dead_letter(p, 1, NULL), 0);
        n = zkr_workq_take(p, 1000, &again);
        snprintf(path, sizeof(path), "/t/br/cp/dead/%s",
                 strrchr(ids[nothanded], '/') + 1);
        print_message("# with max deliveries 1: take rc %d; %s %s\n", n, path,
                      raw_exists(path) ? "exists" : "does not exist");
        if (n == 0)
            zkr_item_free(again);
        assert_false(raw_exists(path));
    } else if (nothanded > 0) {
        assert_int_equal(zkr_workq_take(p, 2000, &again), 0);
        print_message("# %s taken next by another handle: deliveries %d\n",
                      (const char *)zkr_item_data(again, NULL),
                      zkr_item_deliveries(again));
        /* never delivered before: this is its first delivery */
        assert_int_equal(zkr_item_deliveries(again), 1);
        zkr_item_free(again);
    }
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* a, then n items held by another consumer (d), a given back first. */
static void held_run(zkr_workq_t *p, zkr_workq_t *d, const char *qp, int n,
                     zkr_item_t **held, char *xid)
{
    char aid[ZKR_WORKQ_ID_MAX];
    int got = -1;

    put_id(p, "a", aid);
    snprintf(exclude, sizeof(exclude), "%s/%s", qp, aid);
    for (int i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof(v), "x%d", i);
        put_id(p, v, i == 0 ? xid : NULL);
    }
    assert_int_equal(zkr_workq_take_batch(d, n + 1, 2000, held, &got), 0);
    assert_int_equal(got, n + 1);
    assert_string_equal(zkr_item_data(held[0], NULL), "a");
    assert_int_equal(zkr_item_nack(held[0], ZKR_NACK_FRONT), 0);
    zkr_item_free(held[0]);
    held[0] = NULL;
}

#define HELD 40

/* ---- the rounds over claimed items do not look at the cancel. */
static void test_cancel_ignored_in_rounds(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000),
                  *ds = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/br/ci", "q"), *p = new_q(ps, "/t/br/ci", "p"),
                *d = new_q(ds, "/t/br/ci", "d");
    zkr_item_t *held[HELD + 1] = {0}, *it[2] = {0};
    char xid[ZKR_WORKQ_ID_MAX];
    int64_t t0, t1;
    int n = -1;

    (void)state;
    reset_hook();
    held_run(p, d, "/t/br/ci", HELD, held, xid);
    snprintf(hook_prefix, sizeof(hook_prefix), "/t/br/ci/%.*s", 15, xid);
    target_zh = zkr_session_handle(s);
    delay_us = 50000; /* 50 ms a round trip */
    hook_q = q;       /* cancelled at the first probe's answer */
    hook_mode = H_DELAY;
    t0 = now_ms();
    assert_int_equal(zkr_workq_take_batch(q, 2, 20000, it, &n), 0);
    t1 = now_ms();
    print_message("# cancel at +%lld ms, take returned at +%lld ms, %d "
                  "probe gets after the cancel\n",
                  (long long)(cancel_at_ms - t0), (long long)(t1 - t0),
                  (int)gets_after_cancel);
    reset_hook();
    assert_int_equal(n, 1);
    zkr_item_free(it[0]);
    /* a cancelled take ends at its next answer, not HELD rounds later
     * (counted in gets, not in time: a slow machine only has fewer) */
    assert_true(gets_after_cancel <= 1);
    for (int i = 1; i <= HELD; i++)
        zkr_item_free(held[i]);
    zkr_workq_free(d);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ds);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* ---- nor at the deadline. */
static void test_deadline_ignored_in_rounds(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000),
                  *ds = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/br/di", "q"), *p = new_q(ps, "/t/br/di", "p"),
                *d = new_q(ds, "/t/br/di", "d");
    zkr_item_t *held[HELD + 1] = {0}, *it[2] = {0};
    char xid[ZKR_WORKQ_ID_MAX];
    int64_t t0, t1;
    int n = -1;

    (void)state;
    reset_hook();
    held_run(p, d, "/t/br/di", HELD, held, xid);
    snprintf(hook_prefix, sizeof(hook_prefix), "/t/br/di/%.*s", 15, xid);
    target_zh = zkr_session_handle(s);
    delay_us = 50000;
    cancelled_once = 1; /* no cancel: the deadline only */
    hook_mode = H_DELAY;
    t0 = now_ms();
    assert_int_equal(zkr_workq_take_batch(q, 2, 300, it, &n), 0);
    t1 = now_ms();
    print_message("# take with a 300 ms deadline returned after %lld ms\n",
                  (long long)(t1 - t0));
    reset_hook();
    assert_int_equal(n, 1);
    zkr_item_free(it[0]);
    /* at 50 ms a round trip, about 300 / 50 rounds before the deadline,
     * not one per held item until the listing runs out (HELD) */
    assert_true(hooked_gets < HELD / 2);
    for (int i = 1; i <= HELD; i++)
        zkr_item_free(held[i]);
    zkr_workq_free(d);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ds);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* ---- two answers of a round lost: the batch goes on past them. */
static void test_lost_probe_skipped(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/br/lp", "q"), *p = new_q(ps, "/t/br/lp", "p");
    char ids[8][ZKR_WORKQ_ID_MAX], got[64] = "";
    zkr_item_t *it[4] = {0}, *next;
    int n = -1;

    (void)state;
    reset_hook();
    for (int i = 0; i < 8; i++) {
        char v[2] = {(char)('a' + i), 0};
        put_id(p, v, ids[i]);
    }
    snprintf(hook_prefix, sizeof(hook_prefix), "/t/br/lp/%.*s", 15, ids[1]);
    snprintf(exclude, sizeof(exclude), "/t/br/lp/%s", ids[0]);
    snprintf(lose_a, sizeof(lose_a), "/t/br/lp/%s", ids[2]); /* c */
    snprintf(lose_b, sizeof(lose_b), "/t/br/lp/%s", ids[3]); /* d */
    target_zh = zkr_session_handle(s);
    hook_mode = H_LOSE;
    assert_int_equal(zkr_workq_take_batch(q, 4, 5000, it, &n), 0);
    reset_hook();
    for (int i = 0; i < n; i++) {
        strcat(got, zkr_item_data(it[i], NULL));
        assert_int_equal(zkr_item_deliveries(it[i]), 1);
        assert_int_equal(zkr_item_ack(it[i]), 0);
        zkr_item_free(it[i]);
    }
    assert_int_equal(zkr_workq_take(q, 2000, &next), 0);
    print_message("# batch took \"%s\", then the handle's next take: %s "
                  "(deliveries %d)\n",
                  got, (const char *)zkr_item_data(next, NULL),
                  zkr_item_deliveries(next));
    /* put order a..h: c and d (never delivered) come before e, f, g */
    assert_true(strchr(got, 'e') == NULL && strchr(got, 'f') == NULL);
    assert_string_equal(zkr_item_data(next, NULL), "c");
    zkr_item_free(next);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* ---- an asynchronous batch's callback frees its items and the handle */
static atomic_int cb_done, cb_n;
static void cb_frees(int rc, zkr_item_t **items, int count, void *data)
{
    zkr_workq_t *q = data;
    for (int i = 0; i < count; i++) {
        if (i == 0)
            (void)zkr_item_ack(items[i]); /* blocking ack in a callback? */
        zkr_item_free(items[i]);
    }
    zkr_workq_free(q);
    cb_n = rc == 0 ? count : -rc;
    cb_done = 1;
}

static void test_async_cb_frees(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/br/cb", "q"), *p = new_q(ps, "/t/br/cb", "p");
    int64_t len = -1;

    (void)state;
    reset_hook();
    for (int i = 0; i < 5; i++)
        put_id(p, "v", NULL);
    assert_int_equal(zkr_workq_take_batch_async(q, 4, 2000, cb_frees, q), 0);
    assert_true(ZKT_WAIT_UNTIL(cb_done, 5000));
    print_message("# callback got %d items\n", (int)cb_n);
    assert_int_equal(cb_n, 4);
    assert_int_equal(zkr_workq_len(p, &len), 0);
    print_message("# len after: %lld\n", (long long)len);
    assert_true(ZKT_WAIT_UNTIL(children("/t/br/cb/q1/b0000000000") == 5 ||
                                   children("/t/br/cb/q1/b0000000000") == 4,
                               100));
    zkr_workq_free(p);
    zkr_session_free(ps);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancel_during_probes),
        cmocka_unit_test(test_cancel_ignored_in_rounds),
        cmocka_unit_test(test_deadline_ignored_in_rounds),
        cmocka_unit_test(test_lost_probe_skipped),
        cmocka_unit_test(test_async_cb_frees),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq_batch_races", tests, setup,
                                       teardown);
}
