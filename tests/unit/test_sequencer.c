/* Unit tests of sequencer formatting and parsing and of the resource-side
 * fencing rule. No server. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "filter.h"

#include "zkr.h"

#define NODE                                                                   \
    "/locks/jobs/_c_3f2b8a8e-9c1d-4e5f-8a7b-1c2d3e4f5a6b-lock-0000000042"

/* One node of each mode's recipe (lock.c, election.c names). */
static const struct {
    char mode;
    const char *node;
} modes[] = {
    {'x', "/m/_c_3f2b8a8e-9c1d-4e5f-8a7b-1c2d3e4f5a6b-lock-0000000001"},
    {'p', "/m/_c_3f2b8a8e-9c1d-4e5f-8a7b-1c2d3e4f5a6b-permits-3-lock-"
          "0000000002"},
    {'r', "/m/_c_3f2b8a8e-9c1d-4e5f-8a7b-1c2d3e4f5a6b-__READ__0000000003"},
    {'w', "/m/_c_3f2b8a8e-9c1d-4e5f-8a7b-1c2d3e4f5a6b-__WRIT__0000000004"},
    {'l', "/m/_c_3f2b8a8e-9c1d-4e5f-8a7b-1c2d3e4f5a6b-latch-0000000005"},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

static zkr_sequencer_t sample(void)
{
    zkr_sequencer_t q;
    memset(&q, 0, sizeof(q));
    strcpy(q.path, "/locks/jobs");
    strcpy(q.node, NODE);
    q.token = 4294967301LL;
    q.session_id = (int64_t)0x100000b20aa0016LL;
    q.mode = 'x';
    return q;
}

static void test_round_trip(void **state)
{
    zkr_sequencer_t q = sample(), r;
    char buf[ZKR_SEQUENCER_MAX];

    (void)state;
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "zkr1:x:4294967301:0100000b20aa0016:" NODE);
    assert_int_equal(zkr_sequencer_parse(buf, &r), 0);
    assert_string_equal(r.path, "/locks/jobs");
    assert_string_equal(r.node, NODE);
    assert_int_equal(r.token, q.token);
    assert_int_equal(r.session_id, q.session_id);
    assert_int_equal(r.mode, 'x');
    /* Every mode (each with a node of its recipe), a negative-looking
     * session id. */
    for (size_t i = 0; i < NMODES; i++) {
        q.mode = modes[i].mode;
        strcpy(q.node, modes[i].node);
        q.session_id = -2;
        assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), 0);
        assert_int_equal(zkr_sequencer_parse(buf, &r), 0);
        assert_int_equal(r.mode, modes[i].mode);
        assert_string_equal(r.node, modes[i].node);
        assert_int_equal(r.session_id, -2);
    }
    /* Foreign node names of an exclusive lock. */
    q.mode = 'x';
    strcpy(q.node, "/k/0f3c2b1a__lock__0000000003");
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), 0);
    assert_int_equal(zkr_sequencer_parse(buf, &r), 0);
    assert_string_equal(r.path, "/k");
}

static void test_format_rejects(void **state)
{
    zkr_sequencer_t q = sample();
    char buf[ZKR_SEQUENCER_MAX];

    (void)state;
    assert_int_equal(zkr_sequencer_format(NULL, buf, sizeof(buf)),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_sequencer_format(&q, NULL, 10), ZBADARGUMENTS);
    assert_int_equal(zkr_sequencer_format(&q, buf, 20), ZBADARGUMENTS);
    q.mode = 'q';
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), ZBADARGUMENTS);
    q = sample();
    q.token = 0;
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), ZBADARGUMENTS);
    q = sample();
    strcpy(q.node, "/locks/jobs/not-a-contender");
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), ZBADARGUMENTS);
}

/* A sequencer names a grant of one mode: a node that a grant of that mode
 * cannot have (a reader's node as a writer's grant, a permit as a lock's)
 * is refused by format and parse, whatever else is right in it (issue 20,
 * item 6: a waiting reader's node passed as a writer's sequencer). */
static void test_mode_must_match_node(void **state)
{
    zkr_sequencer_t q = sample(), r;
    char buf[ZKR_SEQUENCER_MAX];

    (void)state;
    for (size_t i = 0; i < NMODES; i++) {
        for (size_t j = 0; j < NMODES; j++) {
            int want_fmt = i == j ? 0 : ZBADARGUMENTS;
            q.mode = modes[i].mode;
            strcpy(q.node, modes[j].node);
            if (zkr_sequencer_format(&q, buf, sizeof(buf)) != want_fmt)
                fail_msg("mode %c, node %s: format did not return %d",
                         modes[i].mode, modes[j].node, want_fmt);
            snprintf(buf, sizeof(buf), "zkr1:%c:5:0100000b20aa0016:%s",
                     modes[i].mode, modes[j].node);
            if (zkr_sequencer_parse(buf, &r) != (i == j ? 0 : ZKR_EFORMAT))
                fail_msg("parse of \"%s\" %s", buf,
                         i == j ? "refused" : "accepted");
        }
    }
    /* Other libraries' names of the same kinds pass. */
    q.mode = 'r';
    strcpy(q.node, "/k/0f3c2b1a__rlock__0000000003");
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), 0);
    q.mode = 'x';
    strcpy(q.node, "/k/x-0123abcd-0000000003");
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), 0);
    q.mode = 'w';
    assert_int_equal(zkr_sequencer_format(&q, buf, sizeof(buf)), ZBADARGUMENTS);
}

static void test_parse_rejects_malformed(void **state)
{
    char good[ZKR_SEQUENCER_MAX], buf[ZKR_SEQUENCER_MAX * 2];
    zkr_sequencer_t q = sample(), r;
    const char *bad[] = {
        "",
        "zkr1",
        "zkr1:",
        "zkr2:x:5:0100000b20aa0016:" NODE,
        "ZKR1:x:5:0100000b20aa0016:" NODE,
        "zkr1:q:5:0100000b20aa0016:" NODE,
        "zkr1:xx:5:0100000b20aa0016:" NODE,
        "zkr1::5:0100000b20aa0016:" NODE,
        "zkr1:x::0100000b20aa0016:" NODE,
        "zkr1:x:0:0100000b20aa0016:" NODE,
        "zkr1:x:05:0100000b20aa0016:" NODE,
        "zkr1:x:-5:0100000b20aa0016:" NODE,
        "zkr1:x:+5:0100000b20aa0016:" NODE,
        "zkr1:x:5a:0100000b20aa0016:" NODE,
        "zkr1:x:9223372036854775808:0100000b20aa0016:" NODE,
        "zkr1:x:99999999999999999999:0100000b20aa0016:" NODE,
        "zkr1:x:5:100000b20aa0016:" NODE,
        "zkr1:x:5:00100000b20aa0016:" NODE,
        "zkr1:x:5:0100000B20AA0016:" NODE,
        "zkr1:x:5:0100000b20aa001g:" NODE,
        "zkr1:x:5:0100000b20aa0016",
        "zkr1:x:5:0100000b20aa0016:",
        "zkr1:x:5:0100000b20aa0016:/",
        "zkr1:x:5:0100000b20aa0016:locks/jobs/_c_a-lock-0000000001",
        "zkr1:x:5:0100000b20aa0016:/locks/jobs/",
        "zkr1:x:5:0100000b20aa0016:/locks//_c_a-lock-0000000001",
        "zkr1:x:5:0100000b20aa0016:/locks/jobs/readme.txt",
        "zkr1:x:5:0100000b20aa0016:/_c_a-lock-0000000001",
        "zkr1:x:5:0100000b20aa0016:/locks/_c_a-lock-0000000001\n",
        "zkr1:x:5:0100000b20aa0016:/locks/_c_a-lock-00000000x1",
        " zkr1:x:5:0100000b20aa0016:" NODE,
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r.token = 77;
        if (zkr_sequencer_parse(bad[i], &r) != ZKR_EFORMAT)
            fail_msg("accepted malformed sequencer #%zu: \"%s\"", i, bad[i]);
        assert_int_equal(r.token, 77); /* untouched */
    }
    assert_int_equal(zkr_sequencer_parse(NULL, &r), ZBADARGUMENTS);
    assert_int_equal(zkr_sequencer_parse("zkr1", NULL), ZBADARGUMENTS);

    /* Every truncation of a good string is rejected. */
    assert_int_equal(zkr_sequencer_format(&q, good, sizeof(good)), 0);
    for (size_t n = 0; n < strlen(good); n++) {
        char t[ZKR_SEQUENCER_MAX];
        memcpy(t, good, n);
        t[n] = '\0';
        /* A prefix ending inside the node's sequence digits still names a
         * (different) valid node; everything shorter must fail. */
        if (n >= strlen(good) - 9)
            continue;
        if (zkr_sequencer_parse(t, &r) != ZKR_EFORMAT)
            fail_msg("accepted truncated sequencer \"%s\"", t);
    }
    /* An overlong node path is rejected, not truncated. */
    snprintf(buf, sizeof(buf), "zkr1:x:5:0100000b20aa0016:/%0*d/_c_a-lock-1",
             ZKR_NODE_MAX, 0);
    assert_int_equal(zkr_sequencer_parse(buf, &r), ZKR_EFORMAT);
}

static void test_fence_admit(void **state)
{
    int64_t high = 0;

    (void)state;
    assert_int_equal(zkr_fence_admit(&high, 10), 0);
    assert_int_equal(high, 10);
    assert_int_equal(zkr_fence_admit(&high, 10), 0); /* same grant again */
    assert_int_equal(zkr_fence_admit(&high, 25), 0);
    assert_int_equal(high, 25);
    assert_int_equal(zkr_fence_admit(&high, 24), ZKR_ESTALE);
    assert_int_equal(zkr_fence_admit(&high, 10), ZKR_ESTALE);
    assert_int_equal(high, 25);
    assert_int_equal(zkr_fence_admit(&high, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_fence_admit(&high, -3), ZBADARGUMENTS);
    assert_int_equal(zkr_fence_admit(NULL, 3), ZBADARGUMENTS);
}

/* Several threads admit interleaved tokens; the counter only grows, and
 * after the run it holds the highest token offered. */
static int64_t shared_high;

static void *admitter(void *arg)
{
    int64_t base = (int64_t)(intptr_t)arg;
    for (int64_t t = 1; t <= 20000; t++) {
        int64_t before = __atomic_load_n(&shared_high, __ATOMIC_ACQUIRE);
        int rc = zkr_fence_admit(&shared_high, t * 4 + base);
        int64_t after = __atomic_load_n(&shared_high, __ATOMIC_ACQUIRE);
        if (after < before || (rc == 0 && after < t * 4 + base))
            return (void *)1;
    }
    return NULL;
}

static void test_fence_admit_threads(void **state)
{
    pthread_t th[4];
    void *ret;

    (void)state;
    for (intptr_t i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, admitter, (void *)i);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    assert_int_equal(shared_high, 20000 * 4 + 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_format_rejects),
        cmocka_unit_test(test_mode_must_match_node),
        cmocka_unit_test(test_parse_rejects_malformed),
        cmocka_unit_test(test_fence_admit),
        cmocka_unit_test(test_fence_admit_threads),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("sequencer", tests, NULL, NULL);
}
