/* Integration tests of the atomic counter (zkr_atomic_*, issue 33) against
 * a real ZooKeeper server, with the fault proxy in front of it for lost
 * answers. Oracles come from the rules of zkr.h: no node is 0, Curator's
 * encoding is 8 bytes big-endian and kazoo's decimal text, every update
 * applies exactly once (concurrent adds hand out each value once), and a
 * write whose answer is lost is never made twice. */
#define _DEFAULT_SOURCE
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

#include "proxy_test.h"

static zkr_atomic_t *new_ctr(zkr_session_t *s, const char *path, int flags)
{
    zkr_atomic_t *c = NULL;

    assert_int_equal(zkr_atomic_new(&c, s, path, flags, NULL), 0);
    return c;
}

static int64_t get(zkr_atomic_t *c)
{
    int64_t v = -12345;

    assert_int_equal(zkr_atomic_get(c, &v), 0);
    return v;
}

/* The node's raw data, as another client reads it (len -1: no node). */
static int raw_data(const char *path, char *buf, int cap)
{
    int len = cap;
    int rc = zoo_get(raw, path, 0, buf, &len, NULL);

    return rc == ZNONODE ? -1 : (assert_int_equal(rc, ZOK), len);
}

static void raw_put(const char *path, const void *data, int len)
{
    int rc = zoo_set(raw, path, data, len, -1);

    if (rc == ZNONODE)
        rc = zoo_create(raw, path, data, len, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(rc, ZOK);
}

/* 8 bytes, big-endian two's complement: Curator's DistributedAtomicLong. */
static void be64(int64_t v, unsigned char out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)((uint64_t)v >> (56 - 8 * i));
}

/* ------------------------------------------------------------ basics */

static void test_binary_ops(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/deep/er/bin", 0);
    zkr_atomic_result_t r;
    unsigned char want[8];
    char buf[64];
    int64_t v = 0;
    int swapped = -1;

    (void)state;
    assert_int_equal(get(c), 0); /* no node */
    assert_int_equal(raw_data("/t/ctr/deep/er/bin", buf, sizeof(buf)), -1);
    assert_int_equal(zkr_atomic_add(c, 5, &v), 0);
    assert_int_equal(v, 5); /* made with its missing ancestors */
    assert_int_equal(raw_data("/t/ctr/deep/er/bin", buf, sizeof(buf)), 8);
    be64(5, want);
    assert_memory_equal(buf, want, 8);
    assert_int_equal(zkr_atomic_add(c, -7, &v), 0);
    assert_int_equal(v, -2);
    be64(-2, want);
    assert_int_equal(raw_data("/t/ctr/deep/er/bin", buf, sizeof(buf)), 8);
    assert_memory_equal(buf, want, 8);
    assert_int_equal(zkr_atomic_set(c, 42), 0);
    assert_int_equal(get(c), 42);
    assert_int_equal(zkr_atomic_cas(c, 41, 1, &swapped, &v), 0);
    assert_int_equal(swapped, 0);
    assert_int_equal(v, 42);
    assert_int_equal(zkr_atomic_cas(c, 42, 1, &swapped, &v), 0);
    assert_int_equal(swapped, 1);
    assert_int_equal(v, 1);
    assert_int_equal(zkr_atomic_run(c, ZKR_ATOMIC_ADD, 10, 0, &r), 0);
    assert_int_equal(r.before, 1);
    assert_int_equal(r.after, 11);
    assert_int_equal(r.changed, 1);
    assert_int_equal(zkr_atomic_run(c, ZKR_ATOMIC_GET, 0, 0, &r), 0);
    assert_int_equal(r.changed, 0);
    assert_int_equal(r.after, 11);
    /* Another client's write is read; empty data is 0. */
    be64(-9000000000LL, want);
    raw_put("/t/ctr/deep/er/bin", want, 8);
    assert_int_equal(get(c), -9000000000LL);
    raw_put("/t/ctr/deep/er/bin", "", 0);
    assert_int_equal(get(c), 0);
    /* A compare-and-set from 0 on no node makes it. */
    assert_int_equal(zoo_delete(raw, "/t/ctr/deep/er/bin", -1), ZOK);
    assert_int_equal(zkr_atomic_cas(c, 0, 7, &swapped, &v), 0);
    assert_int_equal(swapped, 1);
    assert_int_equal(get(c), 7);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

static void test_text_encoding(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/text", ZKR_ATOMIC_TEXT);
    zkr_atomic_t *b = new_ctr(s, "/t/ctr/text", 0);
    char buf[64];
    int64_t v = 0;
    int n;

    (void)state;
    assert_int_equal(zkr_atomic_add(c, -3, &v), 0);
    n = raw_data("/t/ctr/text", buf, sizeof(buf));
    assert_int_equal(n, 2);
    assert_memory_equal(buf, "-3", 2);
    raw_put("/t/ctr/text", "17", 2); /* as kazoo's Counter writes */
    assert_int_equal(get(c), 17);
    assert_int_equal(zkr_atomic_get(b, &v), ZKR_EFORMAT); /* 2 bytes */
    raw_put("/t/ctr/text", "9223372036854775807", 19);
    assert_int_equal(get(c), INT64_MAX);
    assert_int_equal(zkr_atomic_add(c, 1, &v), ZBADARGUMENTS); /* range */
    assert_int_equal(get(c), INT64_MAX);                       /* unchanged */
    raw_put("/t/ctr/text", "-9223372036854775808", 20);
    assert_int_equal(get(c), INT64_MIN);
    assert_int_equal(zkr_atomic_add(c, -1, &v), ZBADARGUMENTS);
    static const char *bad[] = {
        "9223372036854775808", "1.5", "abc", "-", " 1", "12x", "--1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        raw_put("/t/ctr/text", bad[i], (int)strlen(bad[i]));
        assert_int_equal(zkr_atomic_get(c, &v), ZKR_EFORMAT);
        assert_int_equal(zkr_atomic_add(c, 1, &v), ZKR_EFORMAT);
        n = raw_data("/t/ctr/text", buf, sizeof(buf)); /* not overwritten */
        assert_int_equal(n, (int)strlen(bad[i]));
    }
    zkr_atomic_free(b);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

static void test_bad_arguments(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_atomic_t *c = NULL;
    int64_t v;

    (void)state;
    assert_int_equal(zkr_atomic_new(&c, s, "relative", 0, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_atomic_new(&c, s, "/", 0, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_atomic_new(&c, s, "/t/x", 8, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_atomic_new(NULL, s, "/t/x", 0, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_atomic_get(NULL, &v), ZBADARGUMENTS);
    c = new_ctr(s, "/t/ctr/args", 0);
    assert_int_equal(zkr_atomic_get(c, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_atomic_run(c, (zkr_atomic_op_t)9, 0, 0, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_atomic_async(c, ZKR_ATOMIC_GET, 0, 0, NULL, NULL),
                     ZBADARGUMENTS);
    /* A session with a handle open is not freed. */
    assert_int_equal(zkr_session_free(s), ZKR_EINUSE);
    zkr_atomic_free(c);
    zkr_atomic_free(NULL);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------------------ concurrency */

enum { THREADS = 4, ADDS = 60 };

struct adder {
    zkr_atomic_t *c;
    int64_t got[ADDS];
};

static void *adder_main(void *arg)
{
    struct adder *a = arg;

    for (int i = 0; i < ADDS; i++)
        if (zkr_atomic_add(a->c, 1, &a->got[i]) != 0)
            a->got[i] = -1;
    return NULL;
}

static int cmp64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Adds from two sessions and four threads: each add applies once, so
 * the values after them are exactly 1..N, each handed out once. */
static void test_concurrent_adds_hand_out_each_value_once(void **state)
{
    zkr_session_t *s[2] = {open_session(10000), open_session(10000)};
    struct adder a[THREADS];
    pthread_t t[THREADS];
    int64_t all[THREADS * ADDS];

    (void)state;
    for (int i = 0; i < THREADS; i++) {
        a[i].c = new_ctr(s[i % 2], "/t/ctr/race", 0);
        assert_int_equal(pthread_create(&t[i], NULL, adder_main, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        memcpy(all + i * ADDS, a[i].got, sizeof(a[i].got));
    }
    qsort(all, THREADS * ADDS, sizeof(all[0]), cmp64);
    for (int i = 0; i < THREADS * ADDS; i++)
        assert_int_equal(all[i], i + 1);
    assert_int_equal(get(a[0].c), THREADS * ADDS);
    for (int i = 0; i < THREADS; i++)
        zkr_atomic_free(a[i].c);
    assert_int_equal(zkr_session_free(s[0]), 0);
    assert_int_equal(zkr_session_free(s[1]), 0);
}

struct done {
    atomic_int n;
    atomic_int bad;
    int64_t after[64];
    int rc[64];
};

static struct done done;

static void on_done(int rc, const zkr_atomic_result_t *r, void *data)
{
    int i = (int)(intptr_t)data;

    done.rc[i] = rc;
    done.after[i] = r->after;
    if (rc == 0 && r->changed != 1)
        atomic_fetch_add(&done.bad, 1);
    atomic_fetch_add(&done.n, 1);
}

static void test_async_adds(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/async", 0);
    int64_t sorted[40];

    (void)state;
    memset(&done, 0, sizeof(done));
    for (int i = 0; i < 40; i++)
        assert_int_equal(zkr_atomic_async(c, ZKR_ATOMIC_ADD, 1, 0, on_done,
                                          (void *)(intptr_t)i),
                         0);
    for (int i = 0; i < 400 && atomic_load(&done.n) < 40; i++)
        zkt_sleep_ms(zkt_scaled_ms(50));
    assert_int_equal(atomic_load(&done.n), 40);
    assert_int_equal(atomic_load(&done.bad), 0);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(done.rc[i], 0);
        sorted[i] = done.after[i];
    }
    qsort(sorted, 40, sizeof(sorted[0]), cmp64);
    for (int i = 0; i < 40; i++)
        assert_int_equal(sorted[i], i + 1);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A free ends the operations still under way: each completion runs once
 * (ZKR_ECANCELED, or its real end when its answer came first). */
static void test_free_ends_async(void **state)
{
    zkr_session_t *s = open_proxied(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/freed", 0);

    (void)state;
    memset(&done, 0, sizeof(done));
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(zkr_atomic_async(c, ZKR_ATOMIC_ADD, 1, 0, on_done,
                                          (void *)(intptr_t)i),
                         0);
    assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
    zkt_sleep_ms(200);
    zkr_atomic_free(c); /* waiting for connection: ended at once */
    for (int i = 0; i < 200 && atomic_load(&done.n) < 10; i++)
        zkt_sleep_ms(zkt_scaled_ms(50));
    assert_int_equal(atomic_load(&done.n), 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(done.rc[i], ZKR_ECANCELED);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(raw_data("/t/ctr/freed", (char[16]){0}, 16), -1);
}

/* -------------------------------------------------------------- faults */

/* The setData applies and its answer is lost: the add is not made a
 * second time. Its outcome cannot be told from another client's equal
 * write, so it says ZKR_EINDOUBT; the counter moved by delta once. A set
 * whose value is there says 0. */
static void test_lost_answer_never_written_twice(void **state)
{
    zkr_session_t *s = open_proxied(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/lost", 0);
    zkr_atomic_result_t r;

    (void)state;
    assert_int_equal(zkr_atomic_set(c, 100), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-set-reply"), 0);
    assert_int_equal(zkr_atomic_run(c, ZKR_ATOMIC_ADD, 5, 0, &r), ZKR_EINDOUBT);
    assert_int_equal(r.before, 100); /* from 100 to 105, maybe */
    assert_int_equal(r.after, 105);
    assert_int_equal(get(c), 105); /* applied once, not twice */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-set-reply"), 0);
    assert_int_equal(zkr_atomic_set(c, 7), 0);
    assert_int_equal(get(c), 7);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The create of a counter that had no node applies and its answer is
 * lost: the same. */
static void test_lost_create_answer(void **state)
{
    zkr_session_t *s = open_proxied(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/lostc", 0);
    zkr_atomic_result_t r;

    (void)state;
    (void)zoo_create(raw, "/t", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    (void)zoo_create(raw, "/t/ctr", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zkr_atomic_run(c, ZKR_ATOMIC_ADD, 3, 0, &r), ZKR_EINDOUBT);
    assert_int_equal(get(c), 3);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The setData is refused (another client wrote first) and that answer is
 * lost: once connected the node shows another writer's next version, so
 * ours did not apply: the add starts over on the new value and ends 0.
 * The proxy delays every byte by D: our read reaches the server at about
 * D and our write at about 3D; the other client writes at 2D. */
static void test_lost_refusal_starts_over(void **state)
{
    const int D = zkt_scaled_ms(1500);
    zkr_session_t *s = open_proxied(8 * D);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/refused", 0);
    unsigned char b[8];

    (void)state;
    memset(&done, 0, sizeof(done));
    assert_int_equal(zkr_atomic_set(c, 10), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-set-reply"), 0);
    char cmd[32];
    snprintf(cmd, sizeof(cmd), "delay %d", D);
    assert_int_equal(zkt_proxy_cmd(proxy, cmd), 0);
    assert_int_equal(
        zkr_atomic_async(c, ZKR_ATOMIC_ADD, 5, 0, on_done, (void *)0), 0);
    zkt_sleep_ms(2 * D);
    be64(1000, b);
    raw_put("/t/ctr/refused", b, 8); /* between our read and our write */
    zkt_sleep_ms(2 * D);             /* our write has reached the server */
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    for (int i = 0; i < 400 && atomic_load(&done.n) < 1; i++)
        zkt_sleep_ms(zkt_scaled_ms(50));
    assert_int_equal(atomic_load(&done.n), 1);
    assert_int_equal(done.rc[0], 0);
    assert_int_equal(done.after[0], 1005);
    assert_int_equal(get(c), 1005);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The setData never reaches the server (the proxy cuts the stream before
 * it): the node is as it was read, so the write did not apply; a fence
 * (the same bytes at that version) keeps it from applying later, and the
 * add starts over: 0, the value moved once, the version twice. */
static void test_lost_request_fenced(void **state)
{
    zkr_session_t *s = open_proxied(10000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/fence", 0);
    struct Stat st0, st1;
    int64_t v = 0;

    (void)state;
    assert_int_equal(zkr_atomic_set(c, 10), 0);
    assert_int_equal(zoo_exists(raw, "/t/ctr/fence", 0, &st0), ZOK);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-set-request"), 0);
    assert_int_equal(zkr_atomic_add(c, 5, &v), 0);
    assert_int_equal(v, 15);
    assert_int_equal(get(c), 15);
    assert_int_equal(zoo_exists(raw, "/t/ctr/fence", 0, &st1), ZOK);
    assert_int_equal(st1.version, st0.version + 2); /* the fence, the add */
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A create applies and its answer is lost; before zkr can look, another
 * client deletes the node and makes it again holding 0. The node zkr
 * finds is not its own, but its own may have been there: ZKR_EINDOUBT,
 * never a second create (that would count the add twice). */
static void test_lost_create_then_foreign_recreate(void **state)
{
    zkr_session_t *s = open_proxied(zkt_scaled_ms(20000));
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/recreated", 0);
    unsigned char zero[8] = {0};
    struct Stat st;

    (void)state;
    memset(&done, 0, sizeof(done));
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    assert_int_equal(
        zkr_atomic_async(c, ZKR_ATOMIC_ADD, 3, 0, on_done, (void *)0), 0);
    assert_true(
        ZKT_WAIT_UNTIL(zoo_exists(raw, "/t/ctr/recreated", 0, &st) == ZOK,
                       zkt_scaled_ms(10000)));
    assert_int_equal(zoo_delete(raw, "/t/ctr/recreated", -1), ZOK);
    assert_int_equal(zoo_create(raw, "/t/ctr/recreated", (char *)zero, 8,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(
        ZKT_WAIT_UNTIL(atomic_load(&done.n) == 1, zkt_scaled_ms(20000)));
    assert_int_equal(done.rc[0], ZKR_EINDOUBT);
    assert_int_equal(done.after[0], 3); /* what it would have made */
    assert_int_equal(get(c), 0);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A create applies and its answer is lost; another client then deletes
 * the counter and its parent, and makes the parent again (its child
 * version starts over: it reads as before). The parent is not the one
 * zkr looked at: ZKR_EINDOUBT, never a second create. */
static void test_lost_create_then_parent_recreated(void **state)
{
    zkr_session_t *s = open_proxied(zkt_scaled_ms(20000));
    zkr_atomic_t *c = new_ctr(s, "/t-prc/ctr", 0);
    struct Stat st;

    (void)state;
    memset(&done, 0, sizeof(done));
    assert_int_equal(
        zoo_create(raw, "/t-prc", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    assert_int_equal(
        zkr_atomic_async(c, ZKR_ATOMIC_ADD, 3, 0, on_done, (void *)0), 0);
    assert_true(ZKT_WAIT_UNTIL(zoo_exists(raw, "/t-prc/ctr", 0, &st) == ZOK,
                               zkt_scaled_ms(10000)));
    assert_int_equal(zoo_delete(raw, "/t-prc/ctr", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t-prc", -1), ZOK);
    assert_int_equal(
        zoo_create(raw, "/t-prc", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(
        ZKT_WAIT_UNTIL(atomic_load(&done.n) == 1, zkt_scaled_ms(20000)));
    assert_int_equal(done.rc[0], ZKR_EINDOUBT);
    assert_int_equal(get(c), 0);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The session's chroot is deleted: every create is refused for want of
 * a parent. The add ends with ZNONODE after a bounded number of rounds,
 * instead of looping. */
static void test_chroot_deleted(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_atomic_t *c;
    int64_t v;

    (void)state;
    (void)zoo_create(raw, "/t", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    assert_int_equal(
        zoo_create(raw, "/t/chr", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
        ZOK);
    o.chroot = "/t/chr";
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), 10000, &o),
                     0);
    c = new_ctr(s, "/a/ctr", 0);
    assert_int_equal(zkr_atomic_add(c, 1, &v), 0);
    assert_int_equal(zoo_delete(raw, "/t/chr/a/ctr", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/chr/a", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/chr", -1), ZOK);
    assert_int_equal(zkr_atomic_add(c, 1, &v), ZNONODE);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* An ancestor that exists but whose parent refuses us CREATE (ZNOAUTH
 * to its create) does not stop the counter: its own create decides. */
static void test_existing_ancestor_not_creatable(void **state)
{
    struct ACL ro[] = {{ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector ro_acl = {1, ro};
    zkr_session_t *s = open_session(10000);
    zkr_atomic_t *c = new_ctr(s, "/t-locked/app/sub/ctr", 0);
    int64_t v;

    (void)state;
    assert_int_equal(zoo_create(raw, "/t-locked", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_create(raw, "/t-locked/app", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    assert_int_equal(zoo_set_acl(raw, "/t-locked", -1, &ro_acl), ZOK);
    assert_int_equal(zkr_atomic_add(c, 4, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(get(c), 4);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Expiry between operations, and another client deleting the node: the
 * next add works on the new session and makes the node again. */
static void test_expiry_and_foreign_delete(void **state)
{
    zkr_session_t *s = open_session(6000);
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/exp", 0);
    int64_t v;

    (void)state;
    assert_int_equal(zkr_atomic_add(c, 2, &v), 0);
    expire(s);
    assert_int_equal(zkr_atomic_add(c, 2, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(zoo_delete(raw, "/t/ctr/exp", -1), ZOK);
    assert_int_equal(get(c), 0);
    assert_int_equal(zkr_atomic_add(c, 2, &v), 0);
    assert_int_equal(v, 2);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The server restarts while 30 asynchronous adds run: each ends 0 or
 * ZKR_EINDOUBT (the restart is far shorter than the session), the values
 * after the successful ones are distinct, and the total counts each
 * successful add once and an in-doubt one at most once. */
static void test_server_restart(void **state)
{
    zkr_session_t *s = open_session(zkt_scaled_ms(20000));
    zkr_atomic_t *c = new_ctr(s, "/t/ctr/restart", 0);
    int64_t got[30], total = -1;
    int ok = 0, doubt = 0;

    (void)state;
    memset(&done, 0, sizeof(done));
    for (int i = 0; i < 30; i++) {
        assert_int_equal(zkr_atomic_async(c, ZKR_ATOMIC_ADD, 1, 0, on_done,
                                          (void *)(intptr_t)i),
                         0);
        if (i == 10) {
            zookeeper_close(raw);
            raw = NULL;
            assert_int_equal(zkt_server_restart(server), 0);
        }
    }
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    for (int i = 0; i < 800 && atomic_load(&done.n) < 30; i++)
        zkt_sleep_ms(zkt_scaled_ms(50));
    assert_int_equal(atomic_load(&done.n), 30);
    for (int i = 0; i < 30; i++) {
        if (done.rc[i] == 0)
            got[ok++] = done.after[i];
        else
            assert_int_equal(done.rc[i], ZKR_EINDOUBT), doubt++;
    }
    assert_int_equal(zkr_atomic_get(c, &total), 0);
    print_message("# 30 adds: %d applied, %d in doubt, total %lld\n", ok, doubt,
                  (long long)total);
    qsort(got, (size_t)ok, sizeof(got[0]), cmp64);
    for (int i = 1; i < ok; i++)
        assert_true(got[i] > got[i - 1]);
    assert_true(total >= ok && total <= ok + doubt);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Not connected for longer than its bound: ZCONNECTIONLOSS, nothing
 * written; a session lost for good: ZKR_ELOST. */
static void test_not_connected(void **state)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_atomic_t *c;
    int64_t v;

    (void)state;
    o.no_reconnect = 1;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), 4000, &o), 0);
    c = new_ctr(s, "/t/ctr/nc", 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkr_atomic_add(c, 1, &v), ZKR_ELOST);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(raw_data("/t/ctr/nc", (char[16]){0}, 16), -1);
    zkr_atomic_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_ops),
        cmocka_unit_test(test_text_encoding),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_concurrent_adds_hand_out_each_value_once),
        cmocka_unit_test(test_async_adds),
        cmocka_unit_test(test_free_ends_async),
        cmocka_unit_test(test_lost_answer_never_written_twice),
        cmocka_unit_test(test_lost_create_answer),
        cmocka_unit_test(test_lost_refusal_starts_over),
        cmocka_unit_test(test_lost_request_fenced),
        cmocka_unit_test(test_lost_create_then_foreign_recreate),
        cmocka_unit_test(test_lost_create_then_parent_recreated),
        cmocka_unit_test(test_chroot_deleted),
        cmocka_unit_test(test_existing_ancestor_not_creatable),
        cmocka_unit_test(test_expiry_and_foreign_delete),
        cmocka_unit_test(test_server_restart),
        cmocka_unit_test(test_not_connected),
    };

    return cmocka_run_group_tests_name("atomic", tests, proxy_setup,
                                       proxy_teardown);
}
