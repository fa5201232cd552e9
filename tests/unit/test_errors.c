/* Unit tests of error codes, their text and names, and state names. The
 * X-macro table in zkr.h is the single source: these tests iterate it, so
 * a code added there is covered here without editing this file. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "filter.h"

#include "zkr.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
    int code;
    const char *name;
    const char *text;
} zkr_codes[] = {
#define ENTRY(name, val, text) {ZKR_##name, "ZKR_" #name, text},
    ZKR_ERRNO_MAP(ENTRY)
#undef ENTRY
};

/* Every ZooKeeper code of zookeeper.h 3.8 (ZOO_ERRORS) with its name. */
static const struct {
    int code;
    const char *name;
} zk_codes[] = {
/* clang-format off */
#define Z(c) {c, #c},
    Z(ZOK) Z(ZSYSTEMERROR) Z(ZRUNTIMEINCONSISTENCY) Z(ZDATAINCONSISTENCY)
    Z(ZCONNECTIONLOSS) Z(ZMARSHALLINGERROR) Z(ZUNIMPLEMENTED)
    Z(ZOPERATIONTIMEOUT) Z(ZBADARGUMENTS) Z(ZINVALIDSTATE)
    Z(ZNEWCONFIGNOQUORUM) Z(ZRECONFIGINPROGRESS) Z(ZSSLCONNECTIONERROR)
    Z(ZAPIERROR) Z(ZNONODE) Z(ZNOAUTH) Z(ZBADVERSION)
    Z(ZNOCHILDRENFOREPHEMERALS) Z(ZNODEEXISTS) Z(ZNOTEMPTY)
    Z(ZSESSIONEXPIRED) Z(ZINVALIDCALLBACK) Z(ZINVALIDACL) Z(ZAUTHFAILED)
    Z(ZCLOSING) Z(ZNOTHING) Z(ZSESSIONMOVED) Z(ZNOTREADONLY)
    Z(ZEPHEMERALONLOCALSESSION) Z(ZNOWATCHER) Z(ZRECONFIGDISABLED)
    Z(ZSESSIONCLOSEDREQUIRESASLAUTH) Z(ZTHROTTLEDOP)
#undef Z
    /* clang-format on */
};

static void test_table_not_empty(void **state)
{
    (void)state;
    /* The map must at least hold the codes the header documents. */
    assert_true(NELEM(zkr_codes) >= 12);
}

static void test_zkr_codes_range_and_distinct(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(zkr_codes); i++) {
        if (zkr_codes[i].code > -1000)
            fail_msg("%s = %d is not <= -1000", zkr_codes[i].name,
                     zkr_codes[i].code);
        for (size_t j = i + 1; j < NELEM(zkr_codes); j++)
            if (zkr_codes[i].code == zkr_codes[j].code)
                fail_msg("%s and %s share %d", zkr_codes[i].name,
                         zkr_codes[j].name, zkr_codes[i].code);
        /* No clash with any ZooKeeper code either. */
        for (size_t j = 0; j < NELEM(zk_codes); j++)
            assert_int_not_equal(zkr_codes[i].code, zk_codes[j].code);
    }
}

static void test_strerror_zkr_codes(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(zkr_codes); i++) {
        const char *s = zkr_strerror(zkr_codes[i].code);
        if (s == NULL)
            fail_msg("zkr_strerror(%s) is NULL", zkr_codes[i].name);
        assert_string_equal(s, zkr_codes[i].text);
        assert_true(s[0] != '\0');
    }
}

static void test_strerror_zookeeper_codes(void **state)
{
    (void)state;
    assert_non_null(zkr_strerror(ZOK));
    assert_string_equal(zkr_strerror(ZOK), zerror(ZOK));
    assert_string_equal(zkr_strerror(ZCONNECTIONLOSS), zerror(ZCONNECTIONLOSS));
    for (size_t i = 0; i < NELEM(zk_codes); i++) {
        const char *s = zkr_strerror(zk_codes[i].code);
        const char *z = zerror(zk_codes[i].code);
        if (s == NULL)
            fail_msg("zkr_strerror(%s) is NULL", zk_codes[i].name);
        if (zk_codes[i].code == ZNOAUTH || zk_codes[i].code == ZINVALIDACL ||
            zk_codes[i].code == ZAUTHFAILED)
            continue; /* below */
        if (z != NULL)
            assert_string_equal(s, z);
    }
}

/* zkr.h: for a misconfiguration's codes, zerror()'s text then what to
 * check: the ACL and the credentials. */
static void test_strerror_says_what_to_check(void **state)
{
    static const struct {
        int code;
        const char *check;
    } hints[] = {{ZNOAUTH, "ACL"},
                 {ZNOAUTH, "credentials"},
                 {ZINVALIDACL, "credentials"},
                 {ZINVALIDACL, "ZOO_CREATOR_ALL_ACL"},
                 {ZAUTHFAILED, "user:password"}};

    (void)state;
    for (size_t i = 0; i < NELEM(hints); i++) {
        const char *s = zkr_strerror(hints[i].code);
        const char *z = zerror(hints[i].code);
        assert_int_equal(strncmp(s, z, strlen(z)), 0);
        assert_true(strlen(s) > strlen(z));
        if (strstr(s, hints[i].check) == NULL)
            fail_msg("zkr_strerror(%d) = \"%s\" does not name %s",
                     hints[i].code, s, hints[i].check);
    }
}

static void test_strerror_unknown(void **state)
{
    static const int unknown[] = {-5000, 12345, INT_MIN, INT_MAX, -1000,
                                  -999,  -1013, -1100,   1,       -200};

    (void)state;
    for (size_t i = 0; i < NELEM(unknown); i++) {
        const char *s = zkr_strerror(unknown[i]);
        if (s == NULL)
            fail_msg("zkr_strerror(%d) is NULL", unknown[i]);
        assert_true(s[0] != '\0');
    }
}

static void test_errname(void **state)
{
    (void)state;
    assert_string_equal(zkr_errname(ZKR_ELOST), "ZKR_ELOST");
    assert_string_equal(zkr_errname(ZCONNECTIONLOSS), "ZCONNECTIONLOSS");
    assert_string_equal(zkr_errname(-5000), "UNKNOWN");
    assert_string_equal(zkr_errname(INT_MIN), "UNKNOWN");
    assert_string_equal(zkr_errname(12345), "UNKNOWN");
    for (size_t i = 0; i < NELEM(zkr_codes); i++)
        assert_string_equal(zkr_errname(zkr_codes[i].code), zkr_codes[i].name);
    for (size_t i = 0; i < NELEM(zk_codes); i++)
        assert_string_equal(zkr_errname(zk_codes[i].code), zk_codes[i].name);
}

static void test_state_names(void **state)
{
    static const char *const want[] = {"CONNECTING",  "CONNECTED", "SUSPENDED",
                                       "RECONNECTED", "LOST",      "CLOSED"};

    (void)state;
    assert_string_equal(zkr_state_name(ZKR_STATE_CONNECTING), "CONNECTING");
    assert_string_equal(zkr_state_name(ZKR_STATE_CONNECTED), "CONNECTED");
    assert_string_equal(zkr_state_name(ZKR_STATE_SUSPENDED), "SUSPENDED");
    assert_string_equal(zkr_state_name(ZKR_STATE_RECONNECTED), "RECONNECTED");
    assert_string_equal(zkr_state_name(ZKR_STATE_LOST), "LOST");
    assert_string_equal(zkr_state_name(ZKR_STATE_CLOSED), "CLOSED");
    for (int i = 0; i < (int)NELEM(want); i++)
        assert_string_equal(zkr_state_name((zkr_state_t)i), want[i]);
    assert_string_equal(zkr_state_name((zkr_state_t)6), "UNKNOWN");
    assert_string_equal(zkr_state_name((zkr_state_t)-1), "UNKNOWN");
    assert_string_equal(zkr_state_name((zkr_state_t)1000), "UNKNOWN");
    assert_string_equal(zkr_state_name((zkr_state_t)INT_MIN), "UNKNOWN");
}

static void test_lock_state_names(void **state)
{
    static const char *const want[] = {"IDLE",      "ACQUIRING", "HELD",
                                       "SUSPENDED", "LOST",      "RELEASING",
                                       "DELAYED"};

    (void)state;
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_IDLE), "IDLE");
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_ACQUIRING), "ACQUIRING");
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_HELD), "HELD");
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_SUSPENDED), "SUSPENDED");
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_LOST), "LOST");
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_RELEASING), "RELEASING");
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_DELAYED), "DELAYED");
    for (int i = 0; i < (int)NELEM(want); i++)
        assert_string_equal(zkr_lock_state_name((zkr_lock_state_t)i), want[i]);
    assert_string_equal(zkr_lock_state_name((zkr_lock_state_t)7), "UNKNOWN");
    assert_string_equal(zkr_lock_state_name((zkr_lock_state_t)-1), "UNKNOWN");
    assert_string_equal(zkr_lock_state_name((zkr_lock_state_t)1000), "UNKNOWN");
    assert_string_equal(zkr_lock_state_name((zkr_lock_state_t)INT_MIN),
                        "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_not_empty),
        cmocka_unit_test(test_zkr_codes_range_and_distinct),
        cmocka_unit_test(test_strerror_zkr_codes),
        cmocka_unit_test(test_strerror_zookeeper_codes),
        cmocka_unit_test(test_strerror_says_what_to_check),
        cmocka_unit_test(test_strerror_unknown),
        cmocka_unit_test(test_errname),
        cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_lock_state_names),
    };

    zkt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
