/* A take's claim against what other clients and the take's own end do
 * to it (docs/design/workq.md, section 3, step 4): an ephemeral node
 * named as an item, a claim in flight when the take is cancelled or its
 * deadline passes (no delivery counted in vain), writes to the item across
 * every claim of the first in line (it is not left blind to the item),
 * and a batch ended by a want of memory (the cursor goes on from the item
 * it stopped at). Links libzkr_core.la so that zoo_aget and zoo_amulti
 * are interposed (as tests/integration/test_workq_races.c). */
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

#define ZKR__FAULT_IMPL
#include "../../src/internal.h"

static zhandle_t *target_zh;

/* ---- zoo_aget: on the answer to a get of get_path, arm one allocation
 * failure before the library sees it */
static char get_path[512];
static atomic_int get_armed;
static atomic_long arm_n = 1;
static atomic_int get_unsent; /* instead: the get is not sent (once) */

struct gwrap {
    data_completion_t dc;
    const void *data;
};

static void gwrapped(int rc, const char *value, int len, const struct Stat *st,
                     const void *data)
{
    struct gwrap *w = (struct gwrap *)data;

    /* The arm_n-th allocation from here fails (1: the next one). */
    zkr__fault_arm(ZKR__FAULT_ALLOC, arm_n, 0, 0);
    w->dc(rc, value, len, st, w->data);
    zkr__fault_arm(0, 0, 0, 0);
    free(w);
}

typedef int (*aget_fn)(zhandle_t *, const char *, int, data_completion_t,
                       const void *);
int zoo_aget(zhandle_t *zh, const char *path, int watch, data_completion_t dc,
             const void *data)
{
    static aget_fn real;
    struct gwrap *w;

    if (real == NULL)
        real = (aget_fn)dlsym(RTLD_NEXT, "zoo_aget");
    if (zh == target_zh && get_unsent && strcmp(path, get_path) == 0) {
        get_unsent = 0;
        return ZCONNECTIONLOSS;
    }
    if (zh != target_zh || !get_armed || strcmp(path, get_path) != 0)
        return real(zh, path, watch, dc, data);
    get_armed = 0;
    w = calloc(1, sizeof(*w));
    w->dc = dc;
    w->data = data;
    return real(zh, path, watch, gwrapped, w);
}

/* ---- zoo_amulti of a claim (setData of multi_path first):
 *  M_WRITE: another client writes the item just before it is sent
 *           (multi_left times);
 *  M_DELAY: its answer is held multi_delay_ms before the library sees it */
enum { M_NONE, M_WRITE, M_DELAY };
static atomic_int multi_mode, multi_left, multi_delay_ms, multi_seen;
static char multi_path[512], multi_path2[512];
static zkr_workq_t *cancel_q;
static atomic_int cancel_rc = 99;

struct mwrap {
    void_completion_t cb;
    const void *data;
};

static void mwrapped(int rc, const void *data)
{
    struct mwrap *w = (struct mwrap *)data;

    usleep((useconds_t)multi_delay_ms * 1000);
    if (cancel_q != NULL)
        cancel_rc = zkr_workq_cancel(cancel_q);
    w->cb(rc, w->data);
    free(w);
}

typedef int (*amulti_fn)(zhandle_t *, int, const zoo_op_t *, zoo_op_result_t *,
                         void_completion_t, const void *);
int zoo_amulti(zhandle_t *zh, int count, const zoo_op_t *ops,
               zoo_op_result_t *results, void_completion_t cb, const void *data)
{
    static amulti_fn real;

    if (real == NULL)
        real = (amulti_fn)dlsym(RTLD_NEXT, "zoo_amulti");
    if (zh == target_zh && multi_mode != M_NONE && count == 2 &&
        ops[0].type == ZOO_SETDATA_OP &&
        (strcmp(ops[0].set_op.path, multi_path) == 0 ||
         strcmp(ops[0].set_op.path, multi_path2) == 0)) {
        multi_seen++;
        if (multi_mode == M_WRITE && multi_left > 0) {
            multi_left--;
            assert_int_equal(zoo_set(raw, ops[0].set_op.path, "W", 1, -1), ZOK);
        } else if (multi_mode == M_DELAY && multi_left > 0) {
            struct mwrap *w = calloc(1, sizeof(*w));
            multi_left--;
            w->cb = cb;
            w->data = data;
            return real(zh, count, ops, results, mwrapped, w);
        }
    }
    return real(zh, count, ops, results, cb, data);
}

static void reset_hooks(void)
{
    multi_mode = M_NONE;
    multi_left = multi_seen = 0;
    multi_delay_ms = 0;
    get_armed = 0;
    get_unsent = 0;
    arm_n = 1;
    cancel_q = NULL;
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

/* Another client's ephemeral node named as the first item of q1's first
 * bucket under dir (q consumed one item, put by p, so that the bucket is
 * there): its path into node. */
static void foreign_item(zkr_workq_t *q, zkr_workq_t *p, const char *dir,
                         char *node, size_t len)
{
    zkr_item_t *it = NULL;

    put_id(p, "dummy", NULL);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    snprintf(node, len,
             "%s/q1/b0000000000/"
             "i-0-ffffffff-ffff-ffff-ffff-ffffffffffff-0000000000",
             dir);
    assert_int_equal(zoo_create(raw, node, "", 0, &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
}

/* A node that another client makes in a bucket, named as an item but
 * ephemeral: no claim can go under it (NOCHILDRENFOREPHEMERALS). It is
 * passed over, and the items behind it are delivered. */
static void test_foreign_ephemeral_item(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/fe", "q"),
                *p = new_q(ps, "/t/wqc/fe", "p");
    char path[600];
    zkr_item_t *it = NULL;
    int rc;

    (void)state;
    foreign_item(q, p, "/t/wqc/fe", path, sizeof(path));
    put_id(p, "a", NULL);
    put_id(p, "b", NULL);
    for (int i = 0; i < 3; i++) {
        zkr_workq_t *q2 = new_q(s, "/t/wqc/fe", "q2");
        it = NULL;
        rc = zkr_workq_take(q2, 1000, &it);
        print_message("# take %d: rc %d (%s)%s%s\n", i, rc, zkr_strerror(rc),
                      it != NULL ? " item " : "",
                      it != NULL ? (const char *)zkr_item_data(it, NULL) : "");
        assert_int_equal(rc, 0);
        assert_string_equal(zkr_item_data(it, NULL), "a");
        zkr_item_free(it); /* given back: the next take finds it again */
        zkr_workq_free(q2);
    }
    assert_int_equal(zoo_delete(raw, path, -1), ZOK);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* A take whose deadline passes while its claim's multi is out: no
 * delivery is counted that is not made (with dead letters after one
 * delivery, an item never delivered would be moved there). */
static void test_deadline_during_claim_counts(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/dl", "q"),
                *p = new_q(ps, "/t/wqc/dl", "p");
    char id[ZKR_WORKQ_ID_MAX], path[600], dead[600];
    zkr_item_t *it = NULL;
    struct Stat st;
    int rc;

    (void)state;
    reset_hooks();
    put_id(p, "x", id);
    snprintf(multi_path, sizeof(multi_path), "/t/wqc/dl/%s", id);
    target_zh = zkr_session_handle(s);
    multi_delay_ms = 400;
    multi_left = 1;
    multi_mode = M_DELAY;
    {
        int64_t t0 = zkt_now_ms();
        rc = zkr_workq_take(q, 150, &it);
        print_message(
            "# take with a 150 ms deadline, claim answer held 400 ms: "
            "rc %d (%s) after %lld ms, claims seen %d\n",
            rc, zkr_strerror(rc), (long long)(zkt_now_ms() - t0),
            (int)multi_seen);
    }
    /* The rule (section 1: every claim made counts a delivery): a claim
     * node made is a delivery made. The claim already sent is awaited
     * and handed over when granted; had the take ended without it, no
     * claim node may have been made. */
    reset_hooks();
    assert_int_equal(raw_stat(multi_path, &st), ZOK);
    if (rc == 0) {
        assert_int_equal(zkr_item_deliveries(it), 1);
        assert_int_equal(zkr_item_ack(it), 0);
        zkr_item_free(it);
    } else {
        assert_int_equal(st.cversion, 0);
    }
    /* With dead letters after one delivery, nothing was moved there
     * without being delivered. */
    assert_int_equal(zkr_workq_set_dead_letter(p, 1, NULL), 0);
    snprintf(dead, sizeof(dead), "/t/wqc/dl/dead/%s", strrchr(id, '/') + 1);
    rc = zkr_workq_take(p, 0, &it);
    if (rc == 0)
        zkr_item_free(it);
    (void)path;
    assert_false(raw_exists(dead));
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* The same with zkr_workq_cancel() while the claim's answer is on its
 * way (as zkr_workq_free() of the handle would). */
static void test_cancel_during_claim_counts(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/cc", "q"),
                *p = new_q(ps, "/t/wqc/cc", "p");
    char id[ZKR_WORKQ_ID_MAX], dead[600];
    zkr_item_t *it = NULL;
    struct Stat st;
    int rc;

    (void)state;
    reset_hooks();
    put_id(p, "x", id);
    snprintf(multi_path, sizeof(multi_path), "/t/wqc/cc/%s", id);
    target_zh = zkr_session_handle(s);
    multi_left = 1;
    cancel_q = q;
    multi_mode = M_DELAY;
    rc = zkr_workq_take(q, 5000, &it);
    print_message("# take cancelled while its claim's answer was on its way: "
                  "rc %d (%s), cancel rc %d\n",
                  rc, zkr_strerror(rc), (int)cancel_rc);
    assert_int_equal(cancel_rc, 0); /* the take was pending */
    reset_hooks();
    /* As above: granted and handed over (one delivery), or no claim
     * node made at all. */
    if (rc == 0) {
        assert_int_equal(zkr_item_deliveries(it), 1);
        zkr_item_free(it); /* given back */
    } else {
        assert_int_equal(rc, ZKR_ECANCELED);
        assert_int_equal(raw_stat(multi_path, &st), ZOK);
        assert_int_equal(st.cversion, 0);
    }
    {
        zkr_workq_t *p2 = new_q(ps, "/t/wqc/cc", "p2");
        int before = rc == 0 ? 1 : 0;

        rc = zkr_workq_take(p2, 1000, &it);
        assert_int_equal(rc, 0);
        assert_int_equal(zkr_item_deliveries(it), before + 1);
        zkr_item_free(it); /* given back */
        zkr_workq_free(p2);
    }
    (void)dead;
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* Another client writes an item's data across every claim of the first
 * in line (4 claims of a scan, twice): once the writes stop, the item is
 * taken (section 3, step 6: nothing arrives unseen), not left until the
 * take's deadline. */
static void test_line_blind_after_claim_retries(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/bl", "q"),
                *p = new_q(ps, "/t/wqc/bl", "p");
    char id[ZKR_WORKQ_ID_MAX];
    zkr_item_t *it = NULL;
    int rc;
    int64_t t0;

    (void)state;
    reset_hooks();
    put_id(p, "x", id);
    snprintf(multi_path, sizeof(multi_path), "/t/wqc/bl/%s", id);
    target_zh = zkr_session_handle(s);
    multi_left = 8;
    multi_mode = M_WRITE;
    t0 = zkt_now_ms();
    rc = zkr_workq_take(q, 3000, &it);
    print_message("# take: rc %d (%s) after %lld ms; %d claims sent, writes "
                  "left %d\n",
                  rc, zkr_strerror(rc), (long long)(zkt_now_ms() - t0),
                  (int)multi_seen, (int)multi_left);
    if (rc == 0)
        zkr_item_free(it);
    reset_hooks();
    assert_int_equal(rc, 0);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* A batch whose listing ran out goes on in the next bucket one item at
 * a time; an allocation that fails for that item's handle ends the batch
 * with its items, and the handle's next take begins at that item: the
 * first deliveries of a handle come in put order. */
static void test_batch_enomem_cursor_skips(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q, *p;
    char ids[6][ZKR_WORKQ_ID_MAX];
    zkr_item_t *items[16] = {0}, *it = NULL;
    int n = 0, rc;

    (void)state;
    reset_hooks();
    raw_ensure("/t/wqc");
    assert_int_equal(zoo_create(raw, "/t/wqc/bn", "zkr-workq 1 bucket=2", 20,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    q = new_q(s, "/t/wqc/bn", "q");
    p = new_q(ps, "/t/wqc/bn", "p");
    for (int i = 0; i < 6; i++) {
        char v[2] = {(char)('a' + i), 0};
        put_id(p, v, ids[i]);
        print_message("# put %s: %s\n", v, ids[i]);
    }
    /* the first item of the second bucket */
    for (int i = 1; i < 6; i++)
        if (strncmp(ids[i], ids[0], 15) != 0) {
            snprintf(get_path, sizeof(get_path), "/t/wqc/bn/%s", ids[i]);
            print_message("# hooked: %s\n", get_path);
            break;
        }
    target_zh = zkr_session_handle(s);
    get_armed = 1;
    rc = zkr_workq_take_batch(q, 16, 2000, items, &n);
    print_message("# batch: rc %d, %d items:", rc, n);
    for (int i = 0; i < n; i++)
        print_message(" %s", (const char *)zkr_item_data(items[i], NULL));
    print_message("\n");
    reset_hooks();
    assert_int_equal(rc, 0);
    rc = zkr_workq_take(q, 2000, &it);
    assert_int_equal(rc, 0);
    print_message("# next take: %s (deliveries %d)\n",
                  (const char *)zkr_item_data(it, NULL),
                  zkr_item_deliveries(it));
    /* the oldest item not yet delivered is the one the batch stopped at */
    {
        char want[2] = {(char)('a' + n), 0};
        assert_string_equal(zkr_item_data(it, NULL), want);
    }
    zkr_item_free(it);
    for (int i = 0; i < n; i++)
        zkr_item_free(items[i]);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* An allocation that fails in each place in turn after the item's read
 * answered (its handle, the claim's create, ...): the take ends with the
 * error at once, whatever the step that failed. One that ended inside the
 * claim's start (zkr__acquire_task: its end wakes the take at once) was
 * held until the take's deadline: a take without one never ended. */
static void test_failed_allocations_end_at_once(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    int late = 0;

    (void)state;
    for (long k = 1; k <= 40; k++) {
        char qp[64], id[ZKR_WORKQ_ID_MAX];
        zkr_workq_t *q = NULL, *p = NULL;
        zkr_item_t *it = NULL;
        int64_t t0, took;
        int rc;

        reset_hooks();
        snprintf(qp, sizeof(qp), "/t/wqc/fa/k%ld", k);
        q = new_q(s, qp, "q");
        p = new_q(ps, qp, "p");
        put_id(p, "x", id);
        snprintf(get_path, sizeof(get_path), "%s/%s", qp, id);
        target_zh = zkr_session_handle(s);
        arm_n = k;
        get_armed = 1;
        t0 = zkt_now_ms();
        /* The deadline is the session timeout: far beyond a take that
         * ends by itself (a few round trips), as the rule says. */
        rc = zkr_workq_take(q, 10000, &it);
        took = zkt_now_ms() - t0;
        if (rc != 0 && took >= 10000) {
            print_message("# allocation %ld: rc %d after %lld ms\n", k, rc,
                          (long long)took);
            late++;
        }
        reset_hooks();
        if (it != NULL)
            zkr_item_free(it);
        zkr_workq_free(p);
        zkr_workq_free(q);
    }
    zkr_session_free(ps);
    zkr_session_free(s);
    assert_int_equal(late, 0);
}

/* A consumer that may read the items but not write them (the producer's
 * ACL: its own credentials, and READ for anyone): the take ends with
 * ZNOAUTH (zkr.h), it does not pass every item over and wait. */
static void test_noauth_consumer(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *ps = NULL, *s = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/na", "q"), *p = NULL;
    struct ACL acls[2] = {{ZOO_PERM_ALL, ZOO_AUTH_IDS},
                          {ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector av = {2, acls};
    zkr_item_t *it = NULL;
    int rc;

    (void)state;
    reset_hooks();
    /* the consumer makes the queue's nodes (open ACL) */
    assert_int_equal(zkr_workq_take(q, 200, &it), ZKR_ETIMEDOUT);
    o.digest = "prod:pw";
    assert_int_equal(zkr_session_open(&ps, zkt_server_hosts(server), 10000, &o),
                     0);
    assert_int_equal(zkr_workq_new(&p, ps, "/t/wqc/na", "p", &av), 0);
    put_id(p, "x", NULL);
    put_id(p, "y", NULL);
    rc = zkr_workq_take(q, 10000, &it);
    if (it != NULL)
        zkr_item_free(it);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
    assert_int_equal(rc, ZNOAUTH);
}

/* A take whose deadline passes while its claim of another client's
 * ephemeral node (named as an item) is out: ZKR_ETIMEDOUT, not the claim's
 * NOCHILDRENFOREPHEMERALS (zkr.h lists what a take returns). */
static void test_deadline_during_foreign_claim(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/fd", "q"),
                *p = new_q(ps, "/t/wqc/fd", "p");
    zkr_item_t *it = NULL;
    char node[sizeof(multi_path)];
    int rc;

    (void)state;
    reset_hooks();
    foreign_item(q, p, "/t/wqc/fd", node, sizeof(node));
    snprintf(multi_path, sizeof(multi_path), "%s", node);
    target_zh = zkr_session_handle(s);
    multi_delay_ms = 400;
    multi_left = 1;
    multi_mode = M_DELAY;
    it = NULL;
    rc = zkr_workq_take(q, 150, &it);
    reset_hooks();
    if (it != NULL)
        zkr_item_free(it);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
    assert_int_equal(rc, ZKR_ETIMEDOUT);
}

/* The first in line goes on from the listing it joined with; a read of
 * an item there that could not be sent (not connected) is made again
 * after the pause, not passed over: the first deliveries of one handle
 * come in put order. x1 and x2 are passed (their data written across
 * every claim: two misses send the take into the line), x3's read is not
 * sent once: the take returns x3, not x4. */
static void test_line_resumes_at_unread_item(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/wqc/lr", "q"),
                *p = new_q(ps, "/t/wqc/lr", "p");
    char id[4][ZKR_WORKQ_ID_MAX];
    zkr_item_t *it = NULL;
    int rc;

    (void)state;
    reset_hooks();
    /* The line's node made first (a take that waits in it): made while
     * q's take scans, it would be a change at PATH that sends the take
     * from the top (section 3, step 1), and this would test nothing. */
    assert_int_equal(zkr_workq_take(p, 100, &it), ZKR_ETIMEDOUT);
    for (int i = 0; i < 4; i++) {
        char v[16];
        snprintf(v, sizeof(v), "x%d", i + 1);
        put_id(p, v, id[i]);
    }
    snprintf(multi_path, sizeof(multi_path), "/t/wqc/lr/%s", id[0]);
    snprintf(multi_path2, sizeof(multi_path2), "/t/wqc/lr/%s", id[1]);
    snprintf(get_path, sizeof(get_path), "/t/wqc/lr/%s", id[2]);
    target_zh = zkr_session_handle(s);
    multi_left = 8; /* every claim of x1, x2: a claim and 3 more each */
    multi_mode = M_WRITE;
    get_unsent = 1;
    rc = zkr_workq_take(q, 5000, &it);
    reset_hooks();
    assert_int_equal(rc, 0);
    assert_string_equal(zkr_item_data(it, NULL), "x3");
    zkr_item_free(it);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_ephemeral_item),
        cmocka_unit_test(test_deadline_during_claim_counts),
        cmocka_unit_test(test_cancel_during_claim_counts),
        cmocka_unit_test(test_line_blind_after_claim_retries),
        cmocka_unit_test(test_batch_enomem_cursor_skips),
        cmocka_unit_test(test_failed_allocations_end_at_once),
        cmocka_unit_test(test_noauth_consumer),
        cmocka_unit_test(test_deadline_during_foreign_claim),
        cmocka_unit_test(test_line_resumes_at_unread_item),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq_claims", tests, setup, teardown);
}
