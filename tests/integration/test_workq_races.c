/* The work queue's take in races that only a request's timing makes
 * (docs/design/workq.md, 3): the library's gets and multis of one
 * session are interposed (this program links the library's objects, so
 * its zoo_aget and zoo_amulti are the ones the library calls) to let
 * another client act just before one of them is sent. Each test failed
 * on the first version of the take without the line (review of
 * 7e3b60c), and passes on the rule it names:
 *  - an item whose data another client writes between a take's get and
 *    its claim is read again and taken first (first deliveries in put
 *    order: its write is no delivery);
 *  - the first in line watches every claimed item its scan passes, also
 *    after it listed a bucket again: a claim that goes wakes it;
 *  - a put at the cursor's own level is found before a lower level's
 *    items (the cursor's bucket runs out: a listing from the top). */
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
#include <zookeeper/proto.h>

#include "filter.h"
#include "server_test.h"

/* ---- the library's requests of one session, interposed */
static zhandle_t *target_zh;
static char get_path[512];
static atomic_int get_seen, get_fire_at;
static void (*get_hook)(void);
static char multi_path[512];
static atomic_int multi_armed;
static void (*multi_hook)(void);

typedef int (*aget_fn)(zhandle_t *, const char *, int, data_completion_t,
                       const void *);
typedef int (*amulti_fn)(zhandle_t *, int, const zoo_op_t *, zoo_op_result_t *,
                         void_completion_t, const void *);

int zoo_aget(zhandle_t *zh, const char *path, int watch, data_completion_t dc,
             const void *data)
{
    static aget_fn real;
    if (real == NULL)
        real = (aget_fn)dlsym(RTLD_NEXT, "zoo_aget");
    if (zh == target_zh && get_hook != NULL && strcmp(path, get_path) == 0 &&
        ++get_seen == get_fire_at) {
        get_hook();
    }
    return real(zh, path, watch, dc, data);
}

int zoo_amulti(zhandle_t *zh, int count, const zoo_op_t *ops,
               zoo_op_result_t *results, void_completion_t cb, const void *data)
{
    static amulti_fn real;
    if (real == NULL)
        real = (amulti_fn)dlsym(RTLD_NEXT, "zoo_amulti");
    if (zh == target_zh && multi_armed && count == 2 &&
        ops[0].type == ZOO_SETDATA_OP &&
        strcmp(ops[0].set_op.path, multi_path) == 0) {
        multi_armed = 0;
        multi_hook();
    }
    return real(zh, count, ops, results, cb, data);
}

static zkr_workq_t *new_q(zkr_session_t *s, const char *path, const char *id)
{
    zkr_workq_t *q = NULL;
    assert_int_equal(zkr_workq_new(&q, s, path, id, NULL), 0);
    return q;
}

static void put_id(zkr_workq_t *q, const char *v, int level, char *id)
{
    char buf[ZKR_WORKQ_ID_MAX];
    assert_int_equal(zkr_workq_put(q, v, strlen(v), level, buf, sizeof(buf)),
                     0);
    if (id != NULL)
        strcpy(id, buf);
}

/* ---- a foreign write between the get and the claim: the claim fails
 * (the version moved), the item is read again and taken, before c. */
static void write_b(void)
{
    assert_int_equal(zoo_set(raw, multi_path, "B!", 2, -1), ZOK);
}

static void test_foreign_write_before_claim(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/race/fw", NULL),
                *p = new_q(ps, "/t/race/fw", "p");
    char idb[ZKR_WORKQ_ID_MAX];
    zkr_item_t *it, *it2, *it3;

    (void)state;
    put_id(p, "a", 1, NULL);
    put_id(p, "b", 1, idb);
    put_id(p, "c", 1, NULL);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    assert_string_equal(zkr_item_data(it, NULL), "a");
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    snprintf(multi_path, sizeof(multi_path), "/t/race/fw/%s", idb);
    target_zh = zkr_session_handle(s);
    multi_hook = write_b;
    multi_armed = 1;
    assert_int_equal(zkr_workq_take(q, 2000, &it2), 0);
    assert_int_equal(zkr_workq_take(q, 2000, &it3), 0);
    print_message(
        "# took %s (deliveries %d) then %s (deliveries %d)\n",
        (const char *)zkr_item_data(it2, NULL), zkr_item_deliveries(it2),
        (const char *)zkr_item_data(it3, NULL), zkr_item_deliveries(it3));
    /* put order b < c: b's first delivery must come before c's */
    assert_string_equal(zkr_item_data(it2, NULL), "B!");
    zkr_item_free(it2);
    zkr_item_free(it3);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

/* ---- the line holder's scan from the top meets an item gone, lists the
 * bucket again, and must still watch the claimed items after it: a claim
 * that goes then (a nack to the front, a dead consumer) wakes it. */
static char ida[ZKR_WORKQ_ID_MAX];
static void delete_a(void)
{
    char path[600];
    struct String_vector v = {0, NULL};

    snprintf(path, sizeof(path), "/t/race/stuck/%s", ida);
    assert_int_equal(zoo_get_children(raw, path, 0, &v), ZOK);
    for (int i = 0; i < v.count; i++) {
        char c[800];
        snprintf(c, sizeof(c), "%s/%s", path, v.data[i]);
        assert_int_equal(zoo_delete(raw, c, -1), ZOK);
    }
    deallocate_String_vector(&v);
    assert_int_equal(zoo_delete(raw, path, -1), ZOK); /* "acked" */
}

static atomic_int took_rc = 1;
static zkr_item_t *took_it;
static void took(int rc, zkr_item_t *it, void *data)
{
    (void)data;
    took_it = it;
    took_rc = rc;
}

static void test_line_watches_claims_after_relist(void **state)
{
    zkr_session_t *s = open_session(10000), *ds = open_session(10000);
    zkr_workq_t *q, *d;
    zkr_item_t *ia, *ix, *iy;
    const char *cfg = "zkr-workq 1 bucket=2";
    int waited;

    (void)state;
    (void)zoo_create(raw, "/t", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    (void)zoo_create(raw, "/t/race", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zoo_create(raw, "/t/race/stuck", cfg, (int)strlen(cfg),
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    q = new_q(s, "/t/race/stuck", "h");
    d = new_q(ds, "/t/race/stuck", "d");
    put_id(d, "a", 1, ida); /* b0: a x y, sealed; b1 the tail */
    put_id(d, "x", 1, NULL);
    put_id(d, "y", 1, NULL);
    assert_int_equal(zkr_workq_take(d, 2000, &ia), 0);
    assert_int_equal(zkr_workq_take(d, 2000, &ix), 0);
    assert_int_equal(zkr_workq_take(d, 2000, &iy), 0);
    assert_string_equal(zkr_item_data(ix, NULL), "x");
    /* H's second get of a is its top scan in the line: a goes just
     * before it (another consumer acked it). */
    snprintf(get_path, sizeof(get_path), "/t/race/stuck/%s", ida);
    get_seen = 0;
    get_fire_at = 2;
    get_hook = delete_a;
    target_zh = zkr_session_handle(s);
    assert_int_equal(zkr_workq_take_async(q, 20000, took, NULL), 0);
    sleep(2); /* H waits, first in line */
    assert_int_equal(took_rc, 1);
    print_message("# gets of a by H: %d\n", (int)get_seen);
    assert_int_equal(zkr_item_nack(ix, ZKR_NACK_FRONT), 0); /* x is back */
    for (waited = 0; waited < 150 && took_rc == 1; waited++)
        usleep(100000);
    print_message("# after the nack: take rc %d after %d ms\n", (int)took_rc,
                  waited * 100);
    assert_int_equal(took_rc, 0);
    zkr_item_free(took_it);
    zkr_item_free(ia);
    zkr_item_free(ix);
    zkr_item_free(iy);
    zkr_workq_free(d);
    zkr_workq_free(q);
    zkr_session_free(ds);
    zkr_session_free(s);
}

/* ---- a put at the cursor's own level, after its listing: found before
 * the items of the level below. */
static void test_put_at_cursor_level(void **state)
{
    zkr_session_t *s = open_session(10000), *ps = open_session(10000);
    zkr_workq_t *q = new_q(s, "/t/race/inv", NULL);
    zkr_workq_t *p = new_q(ps, "/t/race/inv", "p");
    zkr_item_t *it;

    (void)state;
    put_id(p, "a0", 0, NULL);
    put_id(p, "x1", 1, NULL);
    put_id(p, "x2", 1, NULL);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    assert_string_equal(zkr_item_data(it, NULL), "a0");
    assert_int_equal(zkr_item_ack(it), 0);
    zkr_item_free(it);
    put_id(p, "a1", 0, NULL); /* level 0, before the next take begins */
    usleep(200000);
    assert_int_equal(zkr_workq_take(q, 2000, &it), 0);
    print_message("# second take got %s (level %d)\n",
                  (const char *)zkr_item_data(it, NULL), zkr_item_level(it));
    assert_string_equal(zkr_item_data(it, NULL), "a1");
    zkr_item_free(it);
    zkr_workq_free(p);
    zkr_workq_free(q);
    zkr_session_free(ps);
    zkr_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_at_cursor_level),
        cmocka_unit_test(test_foreign_write_before_claim),
        cmocka_unit_test(test_line_watches_claims_after_relist),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq_races", tests, setup, teardown);
}
