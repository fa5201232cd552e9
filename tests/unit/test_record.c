/* Unit tests of the lock-delay records (docs/design/lock-delay.md, 1.2):
 * what the parser accepts is exactly a complete record of a known kind;
 * everything else (a foreign application's data, garbage, a truncated or
 * ambiguous record) is "no record", which readers take for a death. No
 * server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "filter.h"

#include "../../src/internal.h"

static int parse(const char *s, zkr__record_t *r)
{
    return zkr__record_parse(s, (int)strlen(s), r);
}

static void none(const char *s)
{
    zkr__record_t r;

    if (parse(s, &r) != ZKR__REC_NONE)
        fail_msg("\"%s\" was read as a record of kind %d", s, r.kind);
    assert_int_equal(r.czxid, 0);
}

static void test_release(void **state)
{
    zkr__record_t r;

    (void)state;
    assert_int_equal(parse("zkr-release 1 czxid=4294967297 "
                           "node=_c_x-lock-0000000003",
                           &r),
                     ZKR__REC_RELEASE);
    assert_int_equal(r.version, 1);
    assert_true(r.czxid == 4294967297LL);
    assert_string_equal(r.node, "_c_x-lock-0000000003");
    /* The node name is optional; the czxid decides. */
    assert_int_equal(parse("zkr-release 1 czxid=7", &r), ZKR__REC_RELEASE);
    assert_true(r.czxid == 7);
    assert_string_equal(r.node, "");
}

static void test_left_and_closed(void **state)
{
    zkr__record_t r;

    (void)state;
    assert_int_equal(parse("zkr-delay-left 1 czxid=9 node=n remaining_ms=1500 "
                           "cause=unreleased",
                           &r),
                     ZKR__REC_LEFT);
    assert_true(r.remaining_ms == 1500);
    assert_string_equal(r.cause, "unreleased");
    assert_int_equal(
        parse("zkr-closed 1 czxid=9 until=1764561600000 cause=unreleased", &r),
        ZKR__REC_CLOSED);
    assert_true(r.until_ms == 1764561600000LL);
    /* What the kind is about is required. */
    none("zkr-delay-left 1 czxid=9");
    none("zkr-closed 1 czxid=9 cause=x");
}

static void test_tolerance(void **state)
{
    zkr__record_t r;

    (void)state;
    /* A later version may add keys and spaces; a trailing newline (a
     * record written from a shell) is fine. */
    assert_int_equal(parse("zkr-release 2 czxid=5 future=yes  node=a\n", &r),
                     ZKR__REC_RELEASE);
    assert_int_equal(r.version, 2);
    assert_true(r.czxid == 5);
    assert_string_equal(r.node, "a");
}

static void test_not_records(void **state)
{
    char big[ZKR__RECORD_MAX + 20];
    zkr__record_t r;

    (void)state;
    none("");
    none("hello");
    none("zkr-release");
    none("zkr-release 1");                           /* no czxid */
    none("zkr-release czxid=5");                     /* no version */
    none("zkr-release 0 czxid=5");                   /* versions start at 1 */
    none("zkr-release x czxid=5");                   /* version not a number */
    none("zkr-release 1 czxid=0");                   /* no node has czxid 0 */
    none("zkr-release 1 czxid=-5");                  /* no sign */
    none("zkr-release 1 czxid=5x");                  /* not a number */
    none("zkr-release 1 czxid=");                    /* empty value */
    none("zkr-release 1 =5 czxid=5");                /* empty key */
    none("zkr-release 1 czxid");                     /* no '=' */
    none("zkr-release 1 czxid=1234567890123456789"); /* too long */
    none("zkr-release 1 czxid=5 czxid=6");           /* ambiguous */
    none("zkr-release 1 czxid=5 node=a node=b");     /* ambiguous */
    none("zkr-releasex 1 czxid=5");                  /* unknown kind */
    none("ZKR-RELEASE 1 czxid=5");                   /* kinds are exact */
    none("zkr-delay-left 1 czxid=5 remaining_ms=-1");
    none("zkr-release 1 czxid=5\tnode=a"); /* control bytes */
    none("zkr-release 1 czxid=5\n\n");
    /* A node name longer than any zkr writes. */
    memset(big, 'n', sizeof(big));
    memcpy(big, "zkr-release 1 czxid=5 node=", 27);
    big[27 + sizeof(r.node)] = '\0';
    none(big);
    /* Longer than a record may be. */
    memset(big, ' ', sizeof(big));
    memcpy(big, "zkr-release 1 czxid=5", 21);
    assert_int_equal(zkr__record_parse(big, ZKR__RECORD_MAX + 1, &r),
                     ZKR__REC_NONE);
    assert_int_equal(zkr__record_parse(big, ZKR__RECORD_MAX, &r),
                     ZKR__REC_RELEASE);
    /* Binary data with a record's text inside is not a record. */
    assert_int_equal(zkr__record_parse("zkr-release 1 czxid=5\0x", 23, &r),
                     ZKR__REC_NONE);
    assert_int_equal(zkr__record_parse(NULL, 5, &r), ZKR__REC_NONE);
    assert_int_equal(zkr__record_parse("zkr-release 1 czxid=5", -1, &r),
                     ZKR__REC_NONE);
}

static void test_format_round_trip(void **state)
{
    zkr__record_t in = {0}, out;
    char buf[ZKR__RECORD_MAX + 1];
    int n;

    (void)state;
    in.kind = ZKR__REC_LEFT;
    in.czxid = 123456789012LL;
    strcpy(in.node, "_c_3f2a9c1e-7b4d-4e8a-9c01-5d6e7f809a1b-lock-0000000042");
    in.remaining_ms = 999;
    strcpy(in.cause, "unreleased");
    n = zkr__record_format(buf, sizeof(buf), &in);
    assert_true(n > 0 && (size_t)n == strlen(buf));
    assert_int_equal(zkr__record_parse(buf, n, &out), ZKR__REC_LEFT);
    assert_true(out.czxid == in.czxid);
    assert_string_equal(out.node, in.node);
    assert_true(out.remaining_ms == 999);
    assert_string_equal(out.cause, "unreleased");

    in.kind = ZKR__REC_CLOSED;
    in.until_ms = 1764561600123LL;
    n = zkr__record_format(buf, sizeof(buf), &in);
    assert_int_equal(zkr__record_parse(buf, n, &out), ZKR__REC_CLOSED);
    assert_true(out.until_ms == in.until_ms);

    /* Refused: no kind, no czxid, a space that would split a token, a
     * buffer too small. */
    in.kind = ZKR__REC_NONE;
    assert_int_equal(zkr__record_format(buf, sizeof(buf), &in), -1);
    in.kind = ZKR__REC_RELEASE;
    in.czxid = 0;
    assert_int_equal(zkr__record_format(buf, sizeof(buf), &in), -1);
    in.czxid = 5;
    strcpy(in.cause, "a b");
    assert_int_equal(zkr__record_format(buf, sizeof(buf), &in), -1);
    in.cause[0] = '\0';
    assert_int_equal(zkr__record_format(buf, 10, &in), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_left_and_closed),
        cmocka_unit_test(test_tolerance),
        cmocka_unit_test(test_not_records),
        cmocka_unit_test(test_format_round_trip),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("record", tests, NULL, NULL);
}
