/* libFuzzer target for contender node names: recognition, sequence
 * parsing (ZooKeeper's signed "%010d", wrapping past 2147483647 to
 * "-2147483648"), semaphore sizes, ordering and the predecessor rules of
 * src/base/names.c, each checked against a reference model written here from
 * the rules in names.c's header comment, not from its code.
 *
 * Input: node names separated by '/' (a character ZooKeeper names cannot
 * hold), each cut at its first NUL, at most 64 of them.
 *
 * Built and run by `make fuzz` (clang -fsanitize=fuzzer,address,undefined);
 * any disagreement aborts, which libFuzzer reports as a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define MAX_NAMES 64

static void fail(const char *what, const char *name)
{
    fprintf(stderr, "fuzz_names: %s disagrees on \"%s\"\n", what, name);
    abort();
}

/* An optional '-', then 1 to 10 digits, and nothing else; value within
 * int32 (so "-2147483648" and "2147483647" are the ends). */
static int ref_seq(const char *s, int32_t *out)
{
    size_t len = strlen(s), i = s[0] == '-' ? 1 : 0;
    long long v = 0;

    if (len - i < 1 || len - i > 10)
        return -1;
    for (size_t k = i; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return -1;
        v = v * 10 + (s[k] - '0');
    }
    if (i)
        v = -v;
    if (v < -2147483648LL || v > 2147483647LL)
        return -1;
    *out = (int32_t)v;
    return 0;
}

/* Start of the last occurrence of m in s, or NULL. */
static const char *last_of(const char *s, const char *m)
{
    size_t ls = strlen(s), lm = strlen(m);

    for (size_t i = ls >= lm ? ls - lm + 1 : 0; i-- > 0;)
        if (memcmp(s + i, m, lm) == 0)
            return s + i;
    return NULL;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
}

/* The markers in the order they are tried; the first whose last
 * occurrence is followed by a valid sequence decides. Then the contrib
 * recipes' "x-<hex>-<seq>". */
static int ref_name(const char *s, int32_t *seq, zkr__kind_t *kind)
{
    static const char *const m[] = {"-lock-",   "__lock__", "__rlock__",
                                    "__READ__", "__WRIT__", "-latch-"};
    static const zkr__kind_t k[] = {ZKR__KIND_EXCLUSIVE, ZKR__KIND_EXCLUSIVE,
                                    ZKR__KIND_READ,      ZKR__KIND_READ,
                                    ZKR__KIND_WRITE,     ZKR__KIND_LATCH};
    size_t h = 2;

    *kind = ZKR__KIND_NONE;
    for (int i = 0; i < 6; i++) {
        const char *at = last_of(s, m[i]);

        if (at != NULL && ref_seq(at + strlen(m[i]), seq) == 0) {
            *kind = k[i];
            return 0;
        }
    }
    if (s[0] != 'x' || s[1] != '-')
        return -1;
    while (is_hex(s[h]))
        h++;
    if (h == 2 || s[h] != '-' || ref_seq(s + h + 1, seq) != 0)
        return -1;
    *kind = ZKR__KIND_EXCLUSIVE;
    return 0;
}

/* "-permits-<N>-lock-" at the first "-permits-": N's digits, read until
 * the value reaches a million (larger sizes are not written by zkr). */
static int ref_permits(const char *s)
{
    const char *p = strstr(s, "-permits-");
    const char *d;
    long long v = 0;

    if (p == NULL)
        return 0;
    for (d = p + 9; *d >= '0' && *d <= '9'; d++) {
        if (v >= 1000000)
            return 0; /* digits beyond the limit: not followed by -lock- */
        v = v * 10 + (*d - '0');
    }
    return strncmp(d, "-lock-", 6) == 0 ? (int)v : 0;
}

/* Queue order, from the rule: creation order. One counter (the parent's
 * cversion, +1 per child created or deleted, wrapping from 2147483647 to
 * -2147483648) wrote every sequence, and while a node lives fewer than
 * 2^31 changes happen (the assumption in names.c). So the oldest node is
 * the one from which every other lies fewer than 2^31 changes ahead, and
 * a node's age rank is that distance. Computed in 64-bit arithmetic, by
 * trying every candidate, not as names.c does it. */
static long long ahead(int32_t from, int32_t to)
{
    long long d = ((long long)to - (long long)from) % 4294967296LL;

    return d < 0 ? d + 4294967296LL : d;
}

/* Index in e[0..n) of the oldest node, or -1 when the set breaks the
 * assumption (no node has all others within 2^31 - 1 changes ahead). */
static int ref_oldest(const zkr__entry_t *e, int n)
{
    for (int o = 0; o < n; o++) {
        int ok = 1;

        for (int i = 0; i < n && ok; i++)
            ok = ahead(e[o].seq, e[i].seq) < 2147483648LL;
        if (ok)
            return o;
    }
    return -1;
}

/* Insertion sort by (distance ahead of the oldest, name). */
static void ref_order(zkr__entry_t *e, int n, int32_t oldest)
{
    for (int i = 1; i < n; i++) {
        zkr__entry_t x = e[i];
        long long dx = ahead(oldest, x.seq);
        int j = i;

        for (; j > 0; j--) {
            long long dj = ahead(oldest, e[j - 1].seq);

            if (dj < dx || (dj == dx && strcmp(e[j - 1].name, x.name) <= 0))
                break;
            e[j] = e[j - 1];
        }
        e[j] = x;
    }
}

/* Can two sequences not tell which node is older (the rule, from the
 * server's behaviour above, not from names.c)? */
static int age_unknown(int32_t a, int32_t b)
{
    if (a == b)
        return 1;
    return (a == 2147483647 && b < 0) || (b == 2147483647 && a < 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *names[MAX_NAMES];
    const char *mine[MAX_NAMES]; /* the recognised ones, as listed */
    struct String_vector v = {0, names};
    zkr__entry_t ref[MAX_NAMES], *got = NULL;
    size_t start = 0;
    int n = 0, ng = 0, oldest;

    /* Split at '/', cut each part at its first NUL. */
    for (size_t i = 0; i <= size && v.count < MAX_NAMES; i++) {
        if (i < size && data[i] != '/')
            continue;
        names[v.count] = strndup((const char *)data + start, i - start);
        if (names[v.count] == NULL)
            abort();
        v.count++;
        start = i + 1;
    }

    for (int i = 0; i < v.count; i++) {
        int32_t s1 = 0, s2 = 0;
        zkr__kind_t k1, k2;
        int r1 = zkr__parse_seq(names[i], &s1), r2 = ref_seq(names[i], &s2);

        if (r1 != r2 || (r1 == 0 && s1 != s2))
            fail("zkr__parse_seq", names[i]);
        r1 = zkr__parse_name(names[i], &s1, &k1);
        r2 = ref_name(names[i], &s2, &k2);
        if (r1 != r2 || k1 != k2 || (r1 == 0 && s1 != s2))
            fail("zkr__parse_name", names[i]);
        if (zkr__parse_permits(names[i]) != ref_permits(names[i]))
            fail("zkr__parse_permits", names[i]);
        if (r2 == 0) {
            zkr__entry_t e = {names[i], s2, k2, ref_permits(names[i])};

            mine[n] = names[i];
            ref[n++] = e;
        }
    }
    oldest = ref_oldest(ref, n);
    if (oldest >= 0) {
        ref_order(ref, n, ref[oldest].seq);
    } else {
        /* Beyond the assumption names cannot tell age; the rule left is
         * one total order for a set, whatever order it is listed in: the
         * same listing reversed must sort the same. */
        char *rev[MAX_NAMES];
        struct String_vector rv = {v.count, rev};
        zkr__entry_t *r = NULL;
        int nr = 0;

        for (int i = 0; i < v.count; i++)
            rev[i] = names[v.count - 1 - i];
        if (zkr__sort_children(&rv, &r, &nr) != 0 || nr != n)
            fail("zkr__sort_children count (reversed)", "");
        for (int i = 0; i < n; i++)
            ref[i] = r[i];
        free(r);
    }

    if (zkr__sort_children(&v, &got, &ng) != 0 || ng != n)
        fail("zkr__sort_children count", "");
    /* Every recognised child once (names are borrowed, so pointers). */
    for (int i = 0, seen = 0; i < n; i++, seen = 0) {
        for (int j = 0; j < n; j++)
            seen += got[j].name == mine[i];
        if (seen != 1)
            fail("zkr__sort_children permutation", mine[i]);
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(got[i].name, ref[i].name) != 0 || got[i].seq != ref[i].seq ||
            got[i].kind != ref[i].kind || got[i].permits != ref[i].permits)
            fail("zkr__sort_children order", ref[i].name);
        if (zkr__find_entry(got, n, ref[i].name) < 0 ||
            strcmp(got[zkr__find_entry(got, n, ref[i].name)].name,
                   ref[i].name) != 0)
            fail("zkr__find_entry", ref[i].name);
    }
    if (zkr__find_entry(got, n, "/") != -1)
        fail("zkr__find_entry", "/");

    /* The predecessor rules on this queue, for every position. A node
     * with our own sequence may be older or newer (a ZooKeeper 3.8 counter
     * stuck at 2147483647), and so may 2147483647 beside a negative one
     * (on that counter a create in flight with another gets -2147483648,
     * the creates after it 2147483647 again): it counts as before us, so
     * it is never passed and may be the node watched. */
    for (int self = 0; self < n; self++) {
        int want = ZKR__GRANT, w, tie = 0, tie_w = 0, tie_after = 0;

        for (int i = 0; i < n; i++) {
            if (i == self || !age_unknown(ref[i].seq, ref[self].seq))
                continue;
            tie = 1;
            tie_after += i > self;
            tie_w |= i > self && (ref[i].kind == ZKR__KIND_WRITE ||
                                  ref[i].kind == ZKR__KIND_EXCLUSIVE);
        }
        w = zkr__pred_mutex(got, n, self, 0);
        if (self > 0 ? w != self - 1
            : tie
                ? w < 0 || w == self || !age_unknown(ref[w].seq, ref[self].seq)
                : w != ZKR__GRANT)
            fail("zkr__pred_mutex", ref[self].name);
        for (int i = self - 1; i >= 0 && want == ZKR__GRANT; i--)
            if (ref[i].kind == ZKR__KIND_WRITE ||
                ref[i].kind == ZKR__KIND_EXCLUSIVE)
                want = i;
        w = zkr__pred_read(got, n, self, 0);
        if (want != ZKR__GRANT || !tie_w
                ? w != want
                : w <= self || !age_unknown(ref[w].seq, ref[self].seq) ||
                      (ref[w].kind != ZKR__KIND_WRITE &&
                       ref[w].kind != ZKR__KIND_EXCLUSIVE))
            fail("zkr__pred_read", ref[self].name);
        for (int permits = 1; permits <= 3; permits++) {
            int conflict = 0;

            /* The oldest contender stating a size sets the path's. */
            for (int i = 0; i < n && conflict == 0; i++)
                if (ref[i].permits != 0)
                    conflict = ref[i].permits != permits ? 1 : -1;
            conflict = conflict > 0;
            want = conflict                     ? ZKR__CONFLICT
                   : self + tie_after < permits ? ZKR__GRANT
                   : self <= permits            ? ZKR__WATCH_DIR
                                                : self - 1;
            if (zkr__pred_semaphore(got, n, self, permits) != want)
                fail("zkr__pred_semaphore", ref[self].name);
        }
    }

    free(got);
    for (int i = 0; i < v.count; i++)
        free(names[i]);
    return 0;
}
