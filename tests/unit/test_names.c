/* Unit tests of the internal name functions: sequence parsing, contender
 * name recognition for every foreign format, queue ordering, the mutex
 * predecessor rule, and argument validation helpers. No server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "filter.h"

#include "../../src/internal.h"

#define UUID "3f2a9c1e-7b4d-4e8a-9c01-5d6e7f809a1b"
#define HEX "3f2a9c1e7b4d4e8a9c015d6e7f809a1b"
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------ zkr__parse_seq */

static void seq_ok(const char *s, int32_t want)
{
    int32_t got = 12345;

    if (zkr__parse_seq(s, &got) != 0)
        fail_msg("parse_seq(\"%s\") rejected, want %d", s, (int)want);
    if (got != want)
        fail_msg("parse_seq(\"%s\") = %d, want %d", s, (int)got, (int)want);
}

static void seq_bad(const char *s)
{
    int32_t got = 0;

    if (zkr__parse_seq(s, &got) != -1)
        fail_msg("parse_seq(\"%s\") accepted as %d", s, (int)got);
}

static void test_parse_seq_valid(void **state)
{
    (void)state;
    seq_ok("0000000001", 1);
    seq_ok("0000000000", 0);
    seq_ok("0000000042", 42);
    seq_ok("0", 0);
    seq_ok("7", 7);
    seq_ok("-000000001", -1);
    seq_ok("-1", -1);
    seq_ok("2147483647", INT32_MAX);
    seq_ok("-2147483648", INT32_MIN);
    seq_ok("1000000000", 1000000000);
}

static void test_parse_seq_invalid(void **state)
{
    (void)state;
    seq_bad("2147483648");   /* INT32_MAX + 1 */
    seq_bad("-2147483649");  /* INT32_MIN - 1 */
    seq_bad("9999999999");   /* 10 digits, out of range */
    seq_bad("00000000001");  /* 11 digits */
    seq_bad("-00000000001"); /* 11 digits after the sign */
    seq_bad("");
    seq_bad("-");
    seq_bad("--1");
    seq_bad("12a");
    seq_bad("a12");
    seq_bad("+1");
    seq_bad(" 1");
    seq_bad("1 ");
    seq_bad("0x10");
    seq_bad("1-");
}

/* ----------------------------------------------------- zkr__parse_name */

static void name_ok(const char *name, zkr__kind_t kind, int32_t seq)
{
    int32_t got = 12345;
    zkr__kind_t k = ZKR__KIND_NONE;

    if (zkr__parse_name(name, &got, &k) != 0)
        fail_msg("parse_name(\"%s\") rejected", name);
    if (k != kind)
        fail_msg("parse_name(\"%s\") kind %d, want %d", name, (int)k,
                 (int)kind);
    if (got != seq)
        fail_msg("parse_name(\"%s\") seq %d, want %d", name, (int)got,
                 (int)seq);
}

static void name_bad(const char *name)
{
    int32_t got = 0;
    zkr__kind_t k = ZKR__KIND_EXCLUSIVE;

    if (zkr__parse_name(name, &got, &k) != -1)
        fail_msg("parse_name(\"%s\") accepted (kind %d seq %d)",
                 name ? name : "(null)", (int)k, (int)got);
    if (k != ZKR__KIND_NONE)
        fail_msg("parse_name(\"%s\") rejected but kind %d, want NONE",
                 name ? name : "(null)", (int)k);
}

static void test_parse_name_zkr_curator(void **state)
{
    (void)state;
    name_ok("_c_" UUID "-lock-0000000007", ZKR__KIND_EXCLUSIVE, 7);
    name_ok("_c_" UUID "-lock-0000000000", ZKR__KIND_EXCLUSIVE, 0);
    name_ok("_c_" UUID "-lock-2147483647", ZKR__KIND_EXCLUSIVE, INT32_MAX);
    /* After the counter wraps ZooKeeper writes negative numbers. */
    name_ok("_c_" UUID "-lock--000000001", ZKR__KIND_EXCLUSIVE, -1);
    name_ok("_c_" UUID "-lock--2147483648", ZKR__KIND_EXCLUSIVE, INT32_MIN);
    name_ok("-lock--2147483648", ZKR__KIND_EXCLUSIVE, INT32_MIN);
    /* go-zookeeper: "_c_<hex>-lock-<seq>" too. */
    name_ok("_c_" HEX "-lock-0000000011", ZKR__KIND_EXCLUSIVE, 11);
}

static void test_parse_name_kazoo(void **state)
{
    (void)state;
    name_ok(HEX "__lock__0000000003", ZKR__KIND_EXCLUSIVE, 3);
    name_ok(HEX "__rlock__0000000004", ZKR__KIND_READ, 4);
    name_ok(HEX "__lock__-000000002", ZKR__KIND_EXCLUSIVE, -2);
    name_ok(HEX "__rlock__-000000002", ZKR__KIND_READ, -2);
}

static void test_parse_name_curator_rw_latch(void **state)
{
    (void)state;
    name_ok("_c_" UUID "-__READ__0000000002", ZKR__KIND_READ, 2);
    name_ok("_c_" UUID "-__WRIT__0000000009", ZKR__KIND_WRITE, 9);
    name_ok("_c_" UUID "-__WRIT__-000000009", ZKR__KIND_WRITE, -9);
    name_ok("_c_" UUID "-latch-0000000004", ZKR__KIND_LATCH, 4);
    name_ok("_c_" UUID "-latch--000000004", ZKR__KIND_LATCH, -4);
}

static void test_parse_name_contrib(void **state)
{
    (void)state;
    name_ok("x-0123456789abcdef-0000000005", ZKR__KIND_EXCLUSIVE, 5);
    name_ok("x-0123456789abcdef--000000005", ZKR__KIND_EXCLUSIVE, -5);
    name_ok("x-0123456789ABCDEF-0000000006", ZKR__KIND_EXCLUSIVE, 6);
    name_ok("x-1-2147483647", ZKR__KIND_EXCLUSIVE, INT32_MAX);
}

static void test_parse_name_junk(void **state)
{
    static const char *const junk[] = {
        "foo",
        "",
        "lock",
        "-lock-",
        "_c_x-lock-",
        "_c_x-lock-abc",
        "_c_x-lock-0001x",
        "-lock-0001x",
        "_c_x-lock-00000000001",
        "_c_x-lock-2147483648",
        "_c_x-lock--2147483649",
        "_c_x-lock-+1",
        "_c_x-lock- 1",
        "_c_x-lock-1 ",
        "_c_x-lock--",
        "_c_x-latch-",
        "_c_x-__READ__",
        "_c_x-__READ__12a",
        HEX "__lock__",
        HEX "__rlock__x1",
        "x--5",
        "x-zz-0001",
        "x-abc",
        "x-abc-",
        "x-abc-12a",
        "x-abc-0001-",
        "y-abc-0001",
        "readme.txt",
        "leader",
        "0000000001",
        "lock-0000000001",
        "_c_" UUID "-LOCK-0000000001",
        "_c_" UUID "-lock_0000000001",
    };

    (void)state;
    for (size_t i = 0; i < NELEM(junk); i++)
        name_bad(junk[i]);
    name_bad(NULL);
}

/* ------------------------------------------------- holders of a queue */

/* Holders per recipe, through the public zkr_contenders_holding(). */
static int holding_of(const char *const *nodes, int n)
{
    zkr_contender_t v[8];

    memset(v, 0, sizeof(v));
    for (int i = 0; i < n; i++)
        v[i].node = (char *)nodes[i];
    return zkr_contenders_holding(v, n);
}

static void test_holding(void **state)
{
    static const char *const mutex[] = {"/p/_c_a-lock-0000000001",
                                        "/p/_c_b-lock-0000000002"};
    static const char *const readers[] = {
        "/p/_c_a-__READ__0000000001", "/p/_c_b-__READ__0000000002",
        "/p/_c_c-__WRIT__0000000003", "/p/_c_d-__READ__0000000004"};
    static const char *const writer_first[] = {"/p/_c_a-__WRIT__0000000001",
                                               "/p/_c_b-__READ__0000000002"};
    static const char *const sem[] = {"/p/_c_a-permits-3-lock-0000000001",
                                      "/p/_c_b-permits-3-lock-0000000002",
                                      "/p/_c_c-permits-3-lock-0000000003",
                                      "/p/_c_d-permits-3-lock-0000000004"};
    static const char *const latch[] = {"/p/_c_a-latch-0000000007",
                                        "/p/_c_b-latch-0000000009"};
    static const char *const kazoo_rw[] = {"/p/x__rlock__0000000001",
                                           "/p/y__lock__0000000002"};

    (void)state;
    assert_int_equal(holding_of(mutex, 2), 1);
    assert_int_equal(holding_of(mutex, 1), 1);
    assert_int_equal(holding_of(readers, 4), 2);
    assert_int_equal(holding_of(writer_first, 2), 1);
    assert_int_equal(holding_of(sem, 4), 3);
    assert_int_equal(holding_of(sem, 2), 2);
    assert_int_equal(holding_of(latch, 2), 1);
    assert_int_equal(holding_of(kazoo_rw, 2), 1);
    assert_int_equal(zkr_contenders_holding(NULL, 3), 0);
    assert_int_equal(holding_of(mutex, 0), 0);
}

/* ------------------------------------------------- zkr__sort_children */

/* The rule (ZooKeeper and SPEC.md): the sequence is the parent's signed
 * 32-bit cversion, one more at every creation or deletion of a child,
 * wrapping from 2147483647 to -2147483648, printed "%010d". The queue is
 * creation order. This model of the counter uses 64-bit arithmetic, not
 * names.c's: the value of a counter that started at c0 after off changes. */
static int32_t counter_at(int64_t c0, int64_t off)
{
    int64_t v = (c0 + off) % 4294967296LL;

    if (v < 0)
        v += 4294967296LL;
    return (int32_t)(v >= 2147483648LL ? v - 4294967296LL : v);
}

/* Creates n names of one counter from c0 at the given offsets (in
 * creation order), lists them in several scrambled orders with junk
 * mixed in, and checks that every listing sorts to creation order. */
static void check_creation_order(int64_t c0, const int64_t *off, int n)
{
    char buf[16][64], *created[16], *listed[32];
    int perm = 0;

    assert_true(n <= 16);
    for (int i = 0; i < n; i++) {
        /* Markers of zkr/Curator, kazoo and the contrib recipes in turn. */
        static const char *const fmt[] = {"_c_%02d-lock-%010d",
                                          "%02dabcdef__lock__%010d",
                                          "x-%02dabcdef-%010d"};
        snprintf(buf[i], sizeof(buf[i]), fmt[i % 3], i,
                 (int)counter_at(c0, off[i]));
        created[i] = buf[i];
    }
    for (perm = 0; perm < 4; perm++) {
        struct String_vector v = {0, listed};
        zkr__entry_t *e = NULL;
        int got = 0;

        /* 0: as created; 1: reversed; 2: rotated; 3: a stride coprime
         * with n (every third name). */
        for (int i = 0; i < n; i++) {
            int k = perm == 0   ? i
                    : perm == 1 ? n - 1 - i
                    : perm == 2 ? (i + n / 2) % n
                                : (i * (n % 3 != 0 ? 3 : 5) + 1) % n;
            listed[v.count++] = created[k];
            if (i % 3 == 1)
                listed[v.count++] = "readme";
        }
        assert_int_equal(zkr__sort_children(&v, &e, &got), 0);
        assert_int_equal(got, n);
        for (int i = 0; i < n; i++)
            if (strcmp(e[i].name, created[i]) != 0)
                fail_msg("c0=%lld listing %d: position %d is %s, created "
                         "%d-th was %s",
                         (long long)c0, perm, i, e[i].name, i, created[i]);
        free(e);
    }
}

/* Queues whose sequences cross the wrap (and the sign change at -1/0,
 * and ones that do not cross anything), with neighbours close together
 * and far apart (up to 2^31 - 1 changes between the oldest and the
 * newest): always creation order. */
static void test_sort_creation_order_across_wrap(void **state)
{
    static const int64_t c0s[] = {2147483645, 2147483647, -2147483647 - 1, -3,
                                  0,          1500000000, -1500000000,     7};
    static const int64_t close_by[] = {0, 1, 2, 3, 4, 5, 6};
    static const int64_t spread[] = {
        0, 2, 1000, 1073741824, 1073741825, 2147483000, 2147483646};
    static const int64_t widest[] = {0, 2147483647};
    static const int64_t gaps[] = {0, 5, 7, 1999999999, 2000000001};

    (void)state;
    for (size_t i = 0; i < NELEM(c0s); i++) {
        check_creation_order(c0s[i], close_by, (int)NELEM(close_by));
        check_creation_order(c0s[i], spread, (int)NELEM(spread));
        check_creation_order(c0s[i], widest, (int)NELEM(widest));
        check_creation_order(c0s[i], gaps, (int)NELEM(gaps));
    }
}

/* The case of the issue: the counter passed 2147483647, so the node of the
 * newest contender is "-2147483648". The holder is the oldest (2147483645),
 * not the newest; the newest waits for the node created just before it. */
static void test_wrap_holder_and_predecessors(void **state)
{
    char *names[] = {"_c_d-lock--2147483648", "_c_a-lock-2147483645",
                     "_c_e-lock--2147483647", "_c_c-lock-2147483647",
                     "_c_b-lock-2147483646"};
    static const char *const want[] = {
        "_c_a-lock-2147483645", "_c_b-lock-2147483646", "_c_c-lock-2147483647",
        "_c_d-lock--2147483648", "_c_e-lock--2147483647"};
    struct String_vector v = {(int32_t)NELEM(names), names};
    zkr__entry_t *e = NULL;
    int n = 0;

    (void)state;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++)
        assert_string_equal(e[i].name, want[i]);
    assert_int_equal(zkr__pred_mutex(e, n, 0, 1), ZKR__GRANT);
    assert_int_equal(zkr__holding(e, n), 1);
    /* "-2147483648" waits for "2147483647". */
    assert_int_equal(zkr__pred_mutex(e, n, 3, 1), 2);
    assert_string_equal(e[zkr__pred_mutex(e, n, 3, 1)].name, want[2]);
    /* A reader created after the wrap waits for a writer created before. */
    e[0].kind = ZKR__KIND_READ;
    e[1].kind = ZKR__KIND_WRITE;
    e[2].kind = ZKR__KIND_READ;
    e[3].kind = ZKR__KIND_READ;
    assert_int_equal(zkr__pred_read(e, n, 3, 1), 1);
    assert_int_equal(zkr__pred_read(e, n, 0, 1), ZKR__GRANT);
    free(e);
    /* A semaphore of 2: in queue order (the documented wrap) 2147483646,
     * 2147483647, -2147483648; the lowest signed number is not first.
     * Only the first holds: on ZooKeeper 3.8's stuck counter -2147483648
     * may be older than 2147483647 ([N4]: unordered), so 2147483647 is
     * held back by it, and -2147483648 (third) waits on the directory. */
    {
        char *sem[] = {"_c_c-permits-2-lock--2147483648",
                       "_c_b-permits-2-lock-2147483647",
                       "_c_a-permits-2-lock-2147483646"};
        struct String_vector sv = {3, sem};

        assert_int_equal(zkr__sort_children(&sv, &e, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(zkr__holding(e, n), 1);
        assert_string_equal(e[2].name, sem[0]);
        assert_int_equal(zkr__pred_semaphore(e, n, 1, 2), ZKR__WATCH_DIR);
        assert_int_equal(zkr__pred_semaphore(e, n, 2, 2), ZKR__WATCH_DIR);
        free(e);
    }
}

/* Sets that break the assumption (live sequences 2^31 or more apart:
 * names cannot tell which is older): the queue is still one total order,
 * the same whatever order the server lists the children in. */
static void test_sort_beyond_assumption_is_total(void **state)
{
    char *base[] = {"_c_a-lock-0000000000", "_c_b-lock--2147483648",
                    "_c_c-lock-1073741824", "_c_d-lock--1073741824",
                    "_c_e-lock-0000000000", "_c_f-lock-2147483647"};
    enum { N = (int)NELEM(base) };
    char *first[N];

    (void)state;
    for (int r = 0; r < 2 * N; r++) {
        char *listed[N];
        struct String_vector v = {N, listed};
        zkr__entry_t *e = NULL;
        int n = 0;

        /* Rotations, then reversed rotations. */
        for (int i = 0; i < N; i++)
            listed[i] = base[r < N ? (i + r) % N : (N - 1 - i + r) % N];
        assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
        assert_int_equal(n, N);
        for (int i = 0; i < N; i++) {
            if (r == 0)
                first[i] = (char *)e[i].name;
            else
                assert_string_equal(e[i].name, first[i]);
            /* A permutation: every name once. */
            for (int j = 0; j < i; j++)
                assert_string_not_equal(e[i].name, e[j].name);
        }
        free(e);
    }
}

/* ZooKeeper 3.8 stops its counter at 2147483647: every later contender of
 * that path gets 2147483647 too (tests/integration/test_wrap.c shows it),
 * and names cannot tell their age. The rule (SPEC: a grant rests on
 * nothing before us that the rule forbids) then counts a node with our own
 * sequence as possibly before us: never granted past it. */
static void test_equal_sequences_never_granted(void **state)
{
    /* The holder's UUID sorts after the newcomer's. */
    char *mutex[] = {"_c_ffffffff-lock-2147483647",
                     "_c_00000000-lock-2147483647"};
    char *rw[] = {"_c_a-__READ__0000000007", "_c_b-__WRIT__0000000007",
                  "_c_c-__READ__0000000005"};
    char *sem[] = {"_c_a-permits-2-lock-0000000005",
                   "_c_b-permits-2-lock-0000000007",
                   "_c_c-permits-2-lock-0000000007"};
    struct String_vector v = {2, mutex};
    zkr__entry_t *e = NULL;
    int n = 0, w;

    (void)state;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_string_equal(e[0].name, mutex[1]);
    w = zkr__pred_mutex(e, n, 0, 1);
    assert_int_not_equal(w, ZKR__GRANT);
    assert_string_equal(e[w].name, mutex[0]); /* it watches the holder */
    assert_int_not_equal(zkr__pred_mutex(e, n, 1, 1), ZKR__GRANT);
    assert_int_equal(zkr__holding(e, n), 0);
    assert_int_equal(zkr__pred_mutex(e, 1, 0, 1), ZKR__GRANT); /* alone */
    free(e);

    /* A reader with a writer of its own sequence (sorted after it). */
    v.count = 3;
    v.data = rw;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_string_equal(e[0].name, rw[2]);
    assert_int_equal(zkr__pred_read(e, n, 0, 1), ZKR__GRANT);
    w = zkr__pred_read(e, n, 1, 1);
    assert_int_not_equal(w, ZKR__GRANT);
    assert_string_equal(e[w].name, rw[1]);
    assert_int_equal(zkr__holding(e, n), 1);
    free(e);

    /* A semaphore of 2: the second permit is not given to either of two
     * contenders of one sequence. */
    v.data = sem;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(zkr__pred_semaphore(e, n, 0, 2), ZKR__GRANT);
    assert_int_equal(zkr__pred_semaphore(e, n, 1, 2), ZKR__WATCH_DIR);
    assert_int_equal(zkr__pred_semaphore(e, n, 2, 2), ZKR__WATCH_DIR);
    assert_int_equal(zkr__holding(e, n), 1);
    free(e);
}

/* Junk is skipped, and the sequence is read whatever the marker; these
 * six were created in this order by one counter that went from -1 up
 * through 2147483647 to -2147483648 (2^31 - 1 changes from the first to
 * the last: the widest span the rule can order). */
static void test_sort_serial_order(void **state)
{
    /* Deliberately unsorted, and sorted differently by name and by number:
     * the queue must follow creation order only. */
    char *names[] = {
        "_c_aaaa-lock-2147483647",
        "readme.txt",
        "_c_bbbb-lock--2147483648",
        "zzzz__lock__0000000010",
        "foo",
        "_c_cccc-lock--000000001",
        "x-0123456789abcdef-0000000003",
        "_c_dddd-lock-0000000000",
        "",
        "_c_eeee-lock-",
        "x--5",
    };
    static const char *const want[] = {
        "_c_cccc-lock--000000001",       "_c_dddd-lock-0000000000",
        "x-0123456789abcdef-0000000003", "zzzz__lock__0000000010",
        "_c_aaaa-lock-2147483647",       "_c_bbbb-lock--2147483648",
    };
    static const int32_t want_seq[] = {-1, 0, 3, 10, INT32_MAX, INT32_MIN};
    struct String_vector v = {(int32_t)NELEM(names), names};
    zkr__entry_t *e = NULL;
    int n = -1;

    (void)state;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(n, (int)NELEM(want));
    assert_non_null(e);
    for (int i = 0; i < n; i++) {
        assert_string_equal(e[i].name, want[i]);
        assert_int_equal(e[i].seq, want_seq[i]);
        assert_int_equal(e[i].kind, ZKR__KIND_EXCLUSIVE);
    }
    /* Names are borrowed from the vector, not copied. */
    assert_ptr_equal(e[0].name, names[5]);
    free(e);
}

static void test_sort_ties_by_name(void **state)
{
    char *names[] = {
        "_c_ffff-lock-0000000005",
        "_c_aaaa-lock-0000000005",
        "_c_cccc-lock-0000000004",
        "_c_bbbb-__READ__0000000005",
    };
    static const char *const want[] = {
        "_c_cccc-lock-0000000004",
        "_c_aaaa-lock-0000000005",
        "_c_bbbb-__READ__0000000005",
        "_c_ffff-lock-0000000005",
    };
    static const zkr__kind_t want_kind[] = {ZKR__KIND_EXCLUSIVE,
                                            ZKR__KIND_EXCLUSIVE, ZKR__KIND_READ,
                                            ZKR__KIND_EXCLUSIVE};
    struct String_vector v = {(int32_t)NELEM(names), names};
    zkr__entry_t *e = NULL;
    int n = 0;

    (void)state;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(n, 4);
    for (int i = 0; i < n; i++) {
        assert_string_equal(e[i].name, want[i]);
        assert_int_equal(e[i].kind, want_kind[i]);
    }
    free(e);
}

static void test_sort_empty_and_all_junk(void **state)
{
    char *junk[] = {"foo", "", "lock", "_c_x-lock-abc", "x-zz-0001"};
    struct String_vector empty = {0, NULL};
    struct String_vector all_junk = {(int32_t)NELEM(junk), junk};
    zkr__entry_t *e = (zkr__entry_t *)&e; /* poison: must become NULL */
    int n = 99;

    (void)state;
    assert_int_equal(zkr__sort_children(&empty, &e, &n), 0);
    assert_null(e);
    assert_int_equal(n, 0);

    e = (zkr__entry_t *)&e;
    n = 99;
    assert_int_equal(zkr__sort_children(&all_junk, &e, &n), 0);
    assert_null(e);
    assert_int_equal(n, 0);

    e = (zkr__entry_t *)&e;
    n = 99;
    assert_int_equal(zkr__sort_children(NULL, &e, &n), 0);
    assert_null(e);
    assert_int_equal(n, 0);
}

static void test_find_entry(void **state)
{
    char *names[] = {"_c_b-lock-0000000002", "junk", "_c_a-lock-0000000001",
                     "_c_c-lock-0000000003"};
    struct String_vector v = {(int32_t)NELEM(names), names};
    zkr__entry_t *e = NULL;
    int n = 0;

    (void)state;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(zkr__find_entry(e, n, "_c_a-lock-0000000001"), 0);
    assert_int_equal(zkr__find_entry(e, n, "_c_b-lock-0000000002"), 1);
    assert_int_equal(zkr__find_entry(e, n, "_c_c-lock-0000000003"), 2);
    assert_int_equal(zkr__find_entry(e, n, "junk"), -1);
    assert_int_equal(zkr__find_entry(e, n, "_c_a-lock-000000000"), -1);
    assert_int_equal(zkr__find_entry(e, n, ""), -1);
    assert_int_equal(zkr__find_entry(e, 0, "_c_a-lock-0000000001"), -1);
    assert_int_equal(zkr__find_entry(NULL, 0, "_c_a-lock-0000000001"), -1);
    free(e);
}

/* ---------------------------------------------------- zkr__pred_mutex */

static void test_pred_mutex_basic(void **state)
{
    char *names[] = {"_c_a-lock-0000000001", "_c_b-lock-0000000002",
                     "_c_c-lock-0000000003"};
    struct String_vector v = {3, names};
    zkr__entry_t *e = NULL;
    int n = 0;

    (void)state;
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(zkr__pred_mutex(e, n, 0, 1), -1);
    assert_int_equal(zkr__pred_mutex(e, n, 1, 1), 0);
    assert_int_equal(zkr__pred_mutex(e, n, 2, 1), 1);
    /* Alone in the queue: granted. */
    assert_int_equal(zkr__pred_mutex(e, 1, 0, 1), -1);
    free(e);
}

/* Twenty waiters, listed in a scrambled order: each must watch exactly its
 * immediate predecessor, so no two watch the same node and any deletion
 * (a release by the head, or a waiter giving up) wakes exactly one. */
static void test_pred_mutex_no_herd(void **state)
{
    enum { N = 20 };
    char buf[N][64];
    char *names[N];
    struct String_vector v = {N, names};
    zkr__entry_t *e = NULL;
    int n = 0, watch[N];

    (void)state;
    for (int i = 0; i < N; i++) {
        /* Scramble: position i holds sequence (i * 7) % N, a permutation
         * since 7 and 20 are coprime. Start the numbers below zero to
         * cross the sign as a wrapped counter would. */
        int seq = (i * 7) % N - 5;
        snprintf(buf[i], sizeof(buf[i]), "_c_%08x-lock-%010d",
                 (unsigned)(N - i), seq);
        names[i] = buf[i];
    }
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    assert_int_equal(n, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(e[i].seq, i - 5);

    for (int self = 0; self < N; self++) {
        watch[self] = zkr__pred_mutex(e, n, self, 1);
        if (self == 0) {
            assert_int_equal(watch[self], -1);
        } else {
            assert_int_equal(watch[self], self - 1);
            assert_true(watch[self] < self);
        }
    }
    /* Distinct watch targets. */
    for (int a = 1; a < N; a++)
        for (int b = a + 1; b < N; b++)
            assert_int_not_equal(watch[a], watch[b]);
    /* Deleting any one node notifies exactly one waiter, except the tail,
     * which nobody watches. */
    for (int gone = 0; gone < N; gone++) {
        int notified = 0;
        for (int w = 0; w < N; w++)
            if (watch[w] >= 0 && strcmp(e[watch[w]].name, e[gone].name) == 0)
                notified++;
        assert_int_equal(notified, gone == N - 1 ? 0 : 1);
    }
    free(e);
}

/* ---------------------------------------------------- zkr__check_path */

static void test_check_path(void **state)
{
    static const char *const good[] = {
        "/a",
        "/a/b-c_d",
        "/locks/my-lock",
        "/a/.b",
        "/a/...",
        "/a/b.",
        "/\xeb\x85\xb8\xeb\x93\x9c",
        "/zookeeperx",
        "/zoo",
        "/a/zookeeper",
    };
    static const char *const bad[] = {
        "",
        "a",
        "/",
        "/a/",
        "//a",
        "/a//b",
        "/./a",
        "/a/..",
        "/a/.",
        "/../a",
        "/a/./b",
        "/a/../b",
        "a/b",
        "/a\nb",
        "/a\x7f",
        "/\tb",
        "/a/b/",
        "///",
        /* Not UTF-8: a stray byte, an overlong '/', a surrogate, a
         * truncated sequence; the server's own tree (issue 14). */
        "/a\xff",
        "/\xc0\xaf",
        "/\xed\xa0\x80",
        "/a\xe2\x82",
        "/zookeeper",
        "/zookeeper/quota",
        "/zookeeper/config",
    };
    char *path;

    (void)state;
    for (size_t i = 0; i < NELEM(good); i++)
        if (zkr__check_path(good[i]) != 0)
            fail_msg("check_path(\"%s\") rejected", good[i]);
    for (size_t i = 0; i < NELEM(bad); i++)
        if (zkr__check_path(bad[i]) != ZBADARGUMENTS)
            fail_msg("check_path(bad[%zu]) accepted", i);
    assert_int_equal(zkr__check_path(NULL), ZBADARGUMENTS);

    /* Exactly ZKR_PATH_MAX bytes is valid; one more is not. */
    path = malloc(ZKR_PATH_MAX + 2);
    assert_non_null(path);
    path[0] = '/';
    for (int i = 1; i < ZKR_PATH_MAX; i++)
        path[i] = (i % 100 == 0) ? '/' : 'a';
    path[ZKR_PATH_MAX] = '\0';
    assert_int_equal(strlen(path), ZKR_PATH_MAX);
    assert_int_equal(zkr__check_path(path), 0);
    path[ZKR_PATH_MAX] = 'a';
    path[ZKR_PATH_MAX + 1] = '\0';
    assert_int_equal(strlen(path), ZKR_PATH_MAX + 1);
    assert_int_equal(zkr__check_path(path), ZBADARGUMENTS);
    free(path);
}

/* ------------------------------------------------------ zkr__check_id */

static void test_check_id(void **state)
{
    static const char *const good[] = {
        "worker-1",
        "host.example.com:4242",
        "\xeb\x85\xb8\xeb\x93\x9c", /* "노드" */
        "\xc3\xa9t\xc3\xa9",        /* "été" */
        "\xf0\x9f\x94\x92",         /* U+1F512, 4 bytes */
        "\xf4\x8f\xbf\xbf",         /* U+10FFFF, the last code point */
        "\xee\x80\x80",             /* U+E000, just past surrogates */
        " ",
    };
    static const char *const bad[] = {
        "",
        "\xff",
        "\xfe",
        "\x80",             /* lone continuation byte */
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong '/', 3 bytes */
        "\xf0\x80\x80\xaf", /* overlong '/', 4 bytes */
        "\xe4\xb8",         /* truncated 3-byte sequence */
        "\xc3",             /* truncated 2-byte sequence */
        "ok\xf0\x9f\x94",   /* truncated 4-byte sequence at the end */
        "\xed\xa0\x80",     /* surrogate U+D800 */
        "\xed\xbf\xbf",     /* surrogate U+DFFF */
        "\xf4\x90\x80\x80", /* U+110000, beyond Unicode */
        "\xf8\x88\x80\x80\x80",
    };
    char *id;

    (void)state;
    for (size_t i = 0; i < NELEM(good); i++)
        if (zkr__check_id(good[i]) != 0)
            fail_msg("check_id(good[%zu]) rejected", i);
    for (size_t i = 0; i < NELEM(bad); i++)
        if (zkr__check_id(bad[i]) != ZBADARGUMENTS)
            fail_msg("check_id(bad[%zu]) accepted", i);
    assert_int_equal(zkr__check_id(NULL), ZBADARGUMENTS);

    id = malloc(ZKR_ID_MAX + 2);
    assert_non_null(id);
    memset(id, 'i', ZKR_ID_MAX);
    id[ZKR_ID_MAX] = '\0';
    assert_int_equal(zkr__check_id(id), 0);
    id[ZKR_ID_MAX] = 'i';
    id[ZKR_ID_MAX + 1] = '\0';
    assert_int_equal(zkr__check_id(id), ZBADARGUMENTS);
    free(id);
}

/* ---------------------------------------------------------- zkr__uuid */

static void check_uuid_shape(const char *u)
{
    assert_int_equal(strlen(u), 36);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            assert_int_equal(u[i], '-');
        } else if (!((u[i] >= '0' && u[i] <= '9') ||
                     (u[i] >= 'a' && u[i] <= 'f'))) {
            fail_msg("uuid \"%s\": bad char at %d", u, i);
        }
    }
    assert_int_equal(u[14], '4');
    assert_non_null(strchr("89ab", u[19]));
}

static void test_uuid(void **state)
{
    char a[37], b[37];

    (void)state;
    memset(a, 'X', sizeof(a));
    memset(b, 'X', sizeof(b));
    zkr__uuid(a);
    zkr__uuid(b);
    check_uuid_shape(a);
    check_uuid_shape(b);
    assert_string_not_equal(a, b);
    /* A generated UUID works as a contender prefix. */
    {
        char name[80];
        int32_t seq;
        zkr__kind_t kind;
        snprintf(name, sizeof(name), "_c_%s-lock-0000000012", a);
        assert_int_equal(zkr__parse_name(name, &seq, &kind), 0);
        assert_int_equal(seq, 12);
        assert_int_equal(kind, ZKR__KIND_EXCLUSIVE);
    }
}

/* ------------------------------------- semaphore and read/write rules */

static zkr__entry_t ent(const char *name, int32_t seq, zkr__kind_t kind,
                        int permits)
{
    zkr__entry_t e = {name, seq, kind, permits};
    return e;
}

/* Which names are recognisably not zkr's (ZKR_DELAY_TRUST_FOREIGN): zkr
 * and Curator write "_c_" and a UUID (8-4-4-4-12 hex); nothing else. */
static void test_name_foreign(void **state)
{
    (void)state;
    assert_int_equal(zkr__name_foreign("_c_5b7d0e8e-1111-4222-8333-"
                                       "944445555666-lock-0000000001"),
                     0);
    assert_int_equal(zkr__name_foreign("_c_5B7D0E8E-1111-4222-8333-"
                                       "944445555666-__READ__0000000001"),
                     0);
    assert_int_equal(zkr__name_foreign("0f3c2b1a9e8d4c7b__lock__0000000001"),
                     1);
    assert_int_equal(zkr__name_foreign("0f3c2b1a__rlock__0000000001"), 1);
    assert_int_equal(zkr__name_foreign("x-1f2e3d-0000000001"), 1);
    /* go-zookeeper: 32 hex digits, no dashes */
    assert_int_equal(zkr__name_foreign("_c_5b7d0e8e111142228333944445555666-"
                                       "lock-0000000001"),
                     1);
    assert_int_equal(zkr__name_foreign("_c_5b7d0e8e-1111-4222-8333-94444555-"
                                       "lock-0000000001"),
                     1); /* too short */
    assert_int_equal(zkr__name_foreign("_c_"), 1);
}

/* An election candidate with a lock-delay announces itself with a
 * version-8 UUID (docs/design/lock-delay.md 1.7); zkr's other nodes and
 * Curator's have version 4, and foreign formats never announce. */
static void test_name_announces(void **state)
{
    char u[37], name[80];

    (void)state;
    assert_int_equal(zkr__name_announces("_c_5b7d0e8e-1111-8222-8333-"
                                         "944445555666-latch-0000000001"),
                     1);
    assert_int_equal(zkr__name_announces("_c_5b7d0e8e-1111-4222-8333-"
                                         "944445555666-latch-0000000001"),
                     0);
    zkr__uuid(u);
    snprintf(name, sizeof(name), "_c_%s-latch-0000000001", u);
    assert_int_equal(zkr__name_announces(name), 0);
    /* kazoo, go-zookeeper (an 8 in the same place), contrib, junk */
    assert_int_equal(zkr__name_announces("0f3c2b1a9e8d4c7b__lock__0000000001"),
                     0);
    assert_int_equal(zkr__name_announces("_c_5b7d0e8e111182228333944445555666-"
                                         "lock-0000000001"),
                     0);
    assert_int_equal(zkr__name_announces("x-1f2e3d-0000000001"), 0);
    assert_int_equal(zkr__name_announces("_c_"), 0);
    assert_int_equal(zkr__name_announces(NULL), 0);
}

/* A listing's entry noted as not leading yet (zkr_contenders_list() reads
 * it from the node) holds nothing, nor does anyone behind it; a copy of
 * the array, and the array once forgotten, are judged by names alone. */
static void test_holding_unled(void **state)
{
    zkr_contender_t v[2], copy[2];

    (void)state;
    memset(v, 0, sizeof(v));
    v[0].node = "/p/_c_5b7d0e8e-1111-8222-8333-944445555666-latch-0000000001";
    v[1].node = "/p/_c_5b7d0e8e-1111-4222-8333-944445555667-latch-0000000002";
    assert_int_equal(zkr_contenders_holding(v, 2), 1);
    assert_int_equal(zkr__listing_unled(v, 0), 0);
    assert_int_equal(zkr_contenders_holding(v, 2), 0);
    memcpy(copy, v, sizeof(v));
    assert_int_equal(zkr_contenders_holding(copy, 2), 1);
    zkr__listing_forget(v);
    assert_int_equal(zkr_contenders_holding(v, 2), 1);
}

static void test_parse_permits(void **state)
{
    (void)state;
    assert_int_equal(zkr__parse_permits("_c_a-permits-3-lock-0000000001"), 3);
    assert_int_equal(zkr__parse_permits("_c_a-permits-12-lock-01"), 12);
    assert_int_equal(zkr__parse_permits("_c_a-lock-0000000001"), 0);
    assert_int_equal(zkr__parse_permits("_c_a-permits-x-lock-01"), 0);
    assert_int_equal(zkr__parse_permits("_c_a-permits-3-__READ__01"), 0);
}

static void test_pred_semaphore(void **state)
{
    zkr__entry_t v[6];

    (void)state;
    for (int i = 0; i < 6; i++)
        v[i] = ent("n", i, ZKR__KIND_EXCLUSIVE, 3);
    assert_int_equal(zkr__pred_semaphore(v, 6, 0, 3), ZKR__GRANT);
    assert_int_equal(zkr__pred_semaphore(v, 6, 2, 3), ZKR__GRANT);
    /* The first waiter watches the directory; later ones their
     * predecessor: one watch per waiter, one wake-up per change. */
    assert_int_equal(zkr__pred_semaphore(v, 6, 3, 3), ZKR__WATCH_DIR);
    assert_int_equal(zkr__pred_semaphore(v, 6, 4, 3), 3);
    assert_int_equal(zkr__pred_semaphore(v, 6, 5, 3), 4);
    /* Foreign contenders (no size in the name) just take permits. */
    v[1].permits = 0;
    assert_int_equal(zkr__pred_semaphore(v, 6, 2, 3), ZKR__GRANT);
    /* The oldest contender stating a size sets it: a newcomer of another
     * size is refused, those queued with the path's size are not (issue
     * 20.7). */
    v[5].permits = 4;
    assert_int_equal(zkr__pred_semaphore(v, 6, 5, 4), ZKR__CONFLICT);
    assert_int_equal(zkr__pred_semaphore(v, 6, 0, 3), ZKR__GRANT);
    assert_int_equal(zkr__pred_semaphore(v, 6, 4, 3), 3);
}

static void test_pred_read_write(void **state)
{
    zkr__entry_t v[6] = {
        ent("r0", 0, ZKR__KIND_READ, 0),  ent("r1", 1, ZKR__KIND_READ, 0),
        ent("w2", 2, ZKR__KIND_WRITE, 0), ent("r3", 3, ZKR__KIND_READ, 0),
        ent("w4", 4, ZKR__KIND_WRITE, 0), ent("r5", 5, ZKR__KIND_READ, 0),
    };

    (void)state;
    /* Readers share until a writer: only lower sequences count. */
    assert_int_equal(zkr__pred_read(v, 6, 0, 1), ZKR__GRANT);
    assert_int_equal(zkr__pred_read(v, 6, 1, 1), ZKR__GRANT);
    assert_int_equal(zkr__pred_read(v, 6, 3, 1), 2); /* the writer before */
    assert_int_equal(zkr__pred_read(v, 6, 5, 1), 4); /* the last writer */
    /* A writer waits for everyone before it (its predecessor). */
    assert_int_equal(zkr__pred_mutex(v, 6, 2, 1), 1);
    assert_int_equal(zkr__pred_mutex(v, 6, 4, 1), 3);
    /* An exclusive lock in the directory blocks readers too. */
    v[1].kind = ZKR__KIND_EXCLUSIVE;
    assert_int_equal(zkr__pred_read(v, 6, 1, 1), ZKR__GRANT);
    v[0].kind = ZKR__KIND_EXCLUSIVE;
    assert_int_equal(zkr__pred_read(v, 6, 1, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_seq_valid),
        cmocka_unit_test(test_parse_seq_invalid),
        cmocka_unit_test(test_parse_name_zkr_curator),
        cmocka_unit_test(test_parse_name_kazoo),
        cmocka_unit_test(test_parse_name_curator_rw_latch),
        cmocka_unit_test(test_parse_name_contrib),
        cmocka_unit_test(test_parse_name_junk),
        cmocka_unit_test(test_sort_serial_order),
        cmocka_unit_test(test_sort_creation_order_across_wrap),
        cmocka_unit_test(test_wrap_holder_and_predecessors),
        cmocka_unit_test(test_sort_beyond_assumption_is_total),
        cmocka_unit_test(test_equal_sequences_never_granted),
        cmocka_unit_test(test_sort_ties_by_name),
        cmocka_unit_test(test_sort_empty_and_all_junk),
        cmocka_unit_test(test_find_entry),
        cmocka_unit_test(test_pred_mutex_basic),
        cmocka_unit_test(test_pred_mutex_no_herd),
        cmocka_unit_test(test_check_path),
        cmocka_unit_test(test_check_id),
        cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_name_foreign),
        cmocka_unit_test(test_name_announces),
        cmocka_unit_test(test_holding_unled),
        cmocka_unit_test(test_parse_permits),
        cmocka_unit_test(test_pred_semaphore),
        cmocka_unit_test(test_pred_read_write),
        cmocka_unit_test(test_holding),
    };

    zkt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
