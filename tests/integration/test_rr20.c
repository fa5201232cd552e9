/* rereview20: a semaphore waiter checks its predecessor's ACL once
 * (pred_acl_done: "touchable"), then relies on the predecessor's touch.
 * An operator's setACL on the predecessor after that check (removing
 * WRITE) makes the touch fail (poke_done ignores ZNOAUTH), and the waiter,
 * first in line with a free permit, is stranded until the predecessor
 * releases. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../server_test.h"

struct grant {
    int rc;
};
static pthread_mutex_t grant_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_grant(int rc, zkr_lock_t *l, void *data)
{
    struct grant *g = data;
    (void)l;
    pthread_mutex_lock(&grant_mu);
    g->rc = rc;
    pthread_mutex_unlock(&grant_mu);
}

static int rc_of(struct grant *g)
{
    int rc;
    pthread_mutex_lock(&grant_mu);
    rc = g->rc;
    pthread_mutex_unlock(&grant_mu);
    return rc;
}

static void run(int set_acl)
{
    struct ACL rcd[] = {{ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
                         {"world", "anyone"}}};
    struct ACL_vector acl = {1, rcd};
    zkr_session_t *s[4];
    zkr_lock_t *l[4];
    struct grant g[4];
    char node[ZKR_NODE_MAX];
    const char *dir = set_acl ? "/s/rr20acl/sem" : "/s/rr20ctl/sem";
    int stranded;

    for (int i = 0; i < 4; i++) {
        s[i] = open_session(10000);
        assert_int_equal(zkr_semaphore_new(&l[i], s[i], dir, 2, NULL, NULL), 0);
        g[i].rc = 1;
        assert_int_equal(zkr_lock_acquire_async(l[i], -1, on_grant, &g[i]), 0);
        assert_true(ZKT_WAIT_UNTIL(children(dir) == i + 1, 5000));
    }
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[0]) == 0 && rc_of(&g[1]) == 0, 5000));
    usleep(300000); /* W2 has checked W1's ACL (world:anyone) and watches it */
    assert_int_equal(zkr_lock_node(l[2], node, sizeof(node)), 0);
    if (set_acl) /* the operator: zkCli setAcl W1 world:anyone:rcd */
        assert_int_equal(zoo_set_acl(raw, node, -1, &acl), ZOK);
    assert_int_equal(zkr_lock_release(l[0]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[2]) == 0, 5000)); /* W1 granted */
    usleep(300000);
    assert_int_equal(rc_of(&g[3]), 1);
    assert_int_equal(zkr_lock_release(l[1]), 0);
    /* One permit free (only W1 holds), W2 first in line: */
    stranded = !ZKT_WAIT_UNTIL(rc_of(&g[3]) == 0, 5000);
    print_message("# %s: W2 %s\n", set_acl ? "setACL" : "control",
                  stranded ? "STRANDED 5 s with a free permit" : "granted");
    assert_int_equal(zkr_lock_release(l[2]), 0);
    assert_true(ZKT_WAIT_UNTIL(rc_of(&g[3]) == 0, 5000));
    assert_int_equal(zkr_lock_release(l[3]), 0);
    for (int i = 0; i < 4; i++) {
        zkr_lock_free(l[i]);
        zkr_session_free(s[i]);
    }
    assert_false(stranded);
}

static void test_control(void **state)
{
    (void)state;
    run(0);
}

static void test_setacl_after_check(void **state)
{
    (void)state;
    run(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_setacl_after_check),
    };
    return cmocka_run_group_tests_name("rr20", tests, setup, teardown);
}
