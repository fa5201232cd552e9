/* Lock-delay (issue 16; docs/design/lock-delay.md) against a real
 * ZooKeeper server: the release record that makes a zkr release provable,
 * and the delay a waiter serves when the node it was behind went without
 * one. The oracles come from the design: a record exists only if the
 * holder's own release deleted its node. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/internal.h"
#include "../server_test.h"

/* The directory's data as a record (kind), or ZKR__REC_NONE. */
static int dir_record(const char *dir, zkr__record_t *r)
{
    char buf[ZKR__RECORD_MAX + 1];
    int len = sizeof(buf);

    if (zoo_get(raw, dir, 0, buf, &len, NULL) != ZOK)
        return -1;
    return zkr__record_parse(buf, len, r);
}

static void mkdirs(const char *dir)
{
    char p[256];

    snprintf(p, sizeof(p), "%s", dir);
    for (char *q = p + 1; *q != '\0'; q++) {
        if (*q != '/')
            continue;
        *q = '\0';
        zoo_create(raw, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        *q = '/';
    }
    zoo_create(raw, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
}

static void set_dir(const char *dir, const char *data)
{
    assert_int_equal(zoo_set(raw, dir, data, (int)strlen(data), -1), ZOK);
}

static void assert_dir_data(const char *dir, const char *want)
{
    char buf[ZKR__RECORD_MAX + 1];
    int len = sizeof(buf) - 1;

    assert_int_equal(zoo_get(raw, dir, 0, buf, &len, NULL), ZOK);
    buf[len > 0 ? len : 0] = '\0';
    assert_string_equal(buf, want);
}

/* ------------------------------------------------- the release record */

/* A release leaves "zkr-release" naming the released node by czxid and
 * name; so does freeing a held handle (the application let go). */
static void test_release_writes_record(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/rec/lock", "A");
    zkr__record_t r;
    char node[ZKR_NODE_MAX];
    int64_t tok;

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    tok = token_of(l);
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(dir_record("/d/rec/lock", &r), ZKR__REC_RELEASE);
    assert_true(r.czxid == tok);
    assert_string_equal(r.node, strrchr(node, '/') + 1);

    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    tok = token_of(l);
    zkr_lock_free(l);
    assert_int_equal(children("/d/rec/lock"), 0);
    assert_int_equal(dir_record("/d/rec/lock", &r), ZKR__REC_RELEASE);
    assert_true(r.czxid == tok);
    zkr_session_free(s);
}

/* A node deleted by someone else (a forced release) or by the session's
 * expiry leaves no record: the holder's later release finds its node gone
 * and writes nothing. */
static void test_death_writes_no_record(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/death/lock", "A");
    char node[ZKR_NODE_MAX];

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    set_dir("/d/death/lock", "before");
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK); /* forced */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_LOST, 10000));
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    assert_dir_data("/d/death/lock", "before");

    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    expire(s);
    assert_true(ZKT_WAIT_UNTIL(children("/d/death/lock") == 0, 10000));
    assert_dir_data("/d/death/lock", "before");
    zkr_lock_free(l);
    zkr_session_free(s);
    assert_dir_data("/d/death/lock", "before");
}

/* A directory that lets us delete children but not write its data: the
 * release still happens (a plain delete), without a record. */
static void test_record_refused_release_happens(void **state)
{
    struct ACL a[] = {
        {ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN,
         {"world", "anyone"}}};
    struct ACL_vector acl = {1, a};
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/nowrite/lock", "A");

    (void)state;
    mkdirs("/d/nowrite/lock");
    set_dir("/d/nowrite/lock", "before");
    assert_int_equal(zoo_set_acl(raw, "/d/nowrite/lock", -1, &acl), ZOK);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_int_equal(children("/d/nowrite/lock"), 0);
    assert_dir_data("/d/nowrite/lock", "before");
    zkr_lock_free(l);
    zkr_session_free(s);
    assert_int_equal(
        zoo_set_acl(raw, "/d/nowrite/lock", -1, &ZOO_OPEN_ACL_UNSAFE), ZOK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_writes_record),
        cmocka_unit_test(test_death_writes_no_record),
        cmocka_unit_test(test_record_refused_release_happens),
    };
    return cmocka_run_group_tests_name("delay", tests, setup, teardown);
}
