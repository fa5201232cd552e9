/* The grant decision without a server: a listing of the queue's directory,
 * our node and the contender's situation in; what it does next out. Each
 * case is written from docs/PROTOCOL.md's rules ([N2]-[N4] names and
 * order, [G2]-[G6] the decision, [G10]-[G12] the recipes' rules, [K1]
 * lock-delay, [W2]-[W3] what to watch), not from src/engine/decide.c. */
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

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Names as each recipe (and each foreign client) makes them. */
#define MX(u, seq) "_c_" u "-lock-" seq             /* zkr or Curator lock */
#define SEM2(u, seq) "_c_" u "-permits-2-lock-" seq /* zkr permit of 2 */
#define SEM3(u, seq) "_c_" u "-permits-3-lock-" seq
#define RD(u, seq) "_c_" u "-__READ__" seq /* reader */
#define WR(u, seq) "_c_" u "-__WRIT__" seq /* writer */
#define KZ(u, seq) u "__lock__" seq        /* kazoo's Lock */
#define CONTRIB(seq) "x-1a2b3c4d5e6f-" seq /* ZooKeeper's contrib lock */

enum rule { MUTEX, SEMAPHORE, READ, WRITE };

struct tcase {
    const char *what;
    enum rule rule;
    int permits;
    const char *names[8]; /* the listing, in the server's (any) order */
    const char *self;     /* our node's name (maybe not in the listing) */
    /* the contender's situation */
    int self_doubt, delay_due, delayed, try_once;
    int creator_cannot_write; /* our ACL lets no creator write */
    const char *unreadable, *touchable;
    /* expected */
    zkr__decision_t want;
    const char *watch; /* the node to watch (WATCH_NODE, ASK_TOUCH) */
};

static const struct tcase cases[] = {
    /* [G2] */
    {"own node deleted: lost, whatever the rule says",
     MUTEX,
     1,
     {MX("b", "0000000002")},
     MX("a", "0000000001"),
     .want = ZKR__D_LOST},
    {"own node deleted from an empty directory",
     MUTEX,
     1,
     {NULL},
     MX("a", "0000000001"),
     .want = ZKR__D_LOST},
    /* [G5], [G10] mutex */
    {"alone: granted",
     MUTEX,
     1,
     {MX("a", "0000000004")},
     MX("a", "0000000004"),
     .want = ZKR__D_GRANT},
    {"first of three, listed in any order: granted",
     MUTEX,
     1,
     {MX("c", "0000000009"), MX("a", "0000000007"), MX("b", "0000000008")},
     MX("a", "0000000007"),
     .want = ZKR__D_GRANT},
    {"third: watches the one just before, not the holder",
     MUTEX,
     1,
     {MX("c", "0000000009"), MX("a", "0000000007"), MX("b", "0000000008")},
     MX("c", "0000000009"),
     .want = ZKR__D_WATCH_NODE,
     .watch = MX("b", "0000000008")},
    {"non-contender children are ignored",
     MUTEX,
     1,
     {"config", "leader", MX("a", "0000000003"), "_c_junk-lock-x1"},
     MX("a", "0000000003"),
     .want = ZKR__D_GRANT},
    {"behind a kazoo lock node: watches it",
     MUTEX,
     1,
     {KZ("f00d", "0000000001"), MX("a", "0000000002")},
     MX("a", "0000000002"),
     .want = ZKR__D_WATCH_NODE,
     .watch = KZ("f00d", "0000000001")},
    {"behind a contrib lock node: watches it",
     MUTEX,
     1,
     {CONTRIB("0000000005"), MX("a", "0000000006")},
     MX("a", "0000000006"),
     .want = ZKR__D_WATCH_NODE,
     .watch = CONTRIB("0000000005")},
    /* [N3] wrap: -2147483648 was created after 2147483647 */
    {"after the wrap: the newest waits for 2147483647",
     MUTEX,
     1,
     {MX("d", "-2147483648"), MX("b", "2147483646"), MX("c", "2147483647")},
     MX("d", "-2147483648"),
     .want = ZKR__D_WATCH_NODE,
     .watch = MX("c", "2147483647")},
    {"after the wrap: the oldest (highest number) holds",
     MUTEX,
     1,
     {MX("d", "-2147483648"), MX("b", "2147483646"), MX("c", "2147483647")},
     MX("b", "2147483646"),
     .want = ZKR__D_GRANT},
    /* [N4] the stuck counter: a tie may be before us */
    {"a tie with our sequence is never passed",
     MUTEX,
     1,
     {MX("ffff", "2147483647"), MX("0000", "2147483647")},
     MX("0000", "2147483647"),
     .want = ZKR__D_WATCH_NODE,
     .watch = MX("ffff", "2147483647")},
    /* [G6] */
    {"try once, another holds: busy",
     MUTEX,
     1,
     {MX("a", "0000000001"), MX("b", "0000000002")},
     MX("b", "0000000002"),
     .try_once = 1,
     .want = ZKR__D_BUSY},
    {"try once, nobody before: granted",
     MUTEX,
     1,
     {MX("b", "0000000002")},
     MX("b", "0000000002"),
     .try_once = 1,
     .want = ZKR__D_GRANT},
    /* [G4] */
    {"granted but our node is in doubt: ask first",
     MUTEX,
     1,
     {MX("a", "0000000001")},
     MX("a", "0000000001"),
     .self_doubt = 1,
     .want = ZKR__D_ASK_SELF},
    {"doubt while waiting: still waits",
     MUTEX,
     1,
     {MX("a", "0000000001"), MX("b", "0000000002")},
     MX("b", "0000000002"),
     .self_doubt = 1,
     .want = ZKR__D_WATCH_NODE,
     .watch = MX("a", "0000000001")},
    {"doubt outranks try-once's grant",
     MUTEX,
     1,
     {MX("a", "0000000001")},
     MX("a", "0000000001"),
     .self_doubt = 1,
     .try_once = 1,
     .want = ZKR__D_ASK_SELF},
    /* [K1], [K2] lock-delay */
    {"granted after waiting behind others: the delay first",
     MUTEX,
     1,
     {MX("b", "0000000002")},
     MX("b", "0000000002"),
     .delay_due = 1,
     .want = ZKR__D_DELAY},
    {"serving the delay: it decides, not the listing",
     MUTEX,
     1,
     {MX("b", "0000000002")},
     MX("b", "0000000002"),
     .delayed = 1,
     .want = ZKR__D_DELAYED},
    {"a delay owed but someone queued before us again: wait",
     MUTEX,
     1,
     {MX("a", "0000000001"), MX("b", "0000000002")},
     MX("b", "0000000002"),
     .delay_due = 1,
     .want = ZKR__D_WATCH_NODE,
     .watch = MX("a", "0000000001")},
    /* [G12] read/write lock */
    {"reader behind readers only: granted",
     READ,
     1,
     {RD("a", "0000000001"), RD("b", "0000000002"), RD("c", "0000000003")},
     RD("c", "0000000003"),
     .want = ZKR__D_GRANT},
    {"reader behind a writer: watches the last writer before it",
     READ,
     1,
     {RD("a", "0000000001"), WR("w", "0000000002"), RD("b", "0000000003"),
      RD("c", "0000000004")},
     RD("c", "0000000004"),
     .want = ZKR__D_WATCH_NODE,
     .watch = WR("w", "0000000002")},
    {"reader not held back by a writer queued after it",
     READ,
     1,
     {RD("a", "0000000001"), WR("w", "0000000002")},
     RD("a", "0000000001"),
     .want = ZKR__D_GRANT},
    {"reader behind an exclusive (kazoo) lock: watches it",
     READ,
     1,
     {KZ("f00d", "0000000001"), RD("a", "0000000002")},
     RD("a", "0000000002"),
     .want = ZKR__D_WATCH_NODE,
     .watch = KZ("f00d", "0000000001")},
    {"writer behind readers: watches the one just before",
     WRITE,
     1,
     {RD("a", "0000000001"), RD("b", "0000000002"), WR("w", "0000000003")},
     WR("w", "0000000003"),
     .want = ZKR__D_WATCH_NODE,
     .watch = RD("b", "0000000002")},
    {"reader tied with a writer of its sequence: waits for it",
     READ,
     1,
     {RD("a", "0000000007"), WR("b", "0000000007")},
     RD("a", "0000000007"),
     .want = ZKR__D_WATCH_NODE,
     .watch = WR("b", "0000000007")},
    /* [G11] semaphore of 2 */
    {"semaphore: the second holds",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002")},
     SEM2("b", "0000000002"),
     .want = ZKR__D_GRANT},
    {"semaphore: the first waiter watches the directory",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"),
      SEM2("c", "0000000003")},
     SEM2("c", "0000000003"),
     .want = ZKR__D_WATCH_DIR},
    {"semaphore: a later waiter asks about its predecessor first",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"), SEM2("c", "0000000003"),
      SEM2("d", "0000000004")},
     SEM2("d", "0000000004"),
     .want = ZKR__D_ASK_TOUCH,
     .watch = SEM2("c", "0000000003")},
    {"semaphore: a predecessor known touchable is watched",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"), SEM2("c", "0000000003"),
      SEM2("d", "0000000004")},
     SEM2("d", "0000000004"),
     .touchable = SEM2("c", "0000000003"),
     .want = ZKR__D_WATCH_NODE,
     .watch = SEM2("c", "0000000003")},
    {"semaphore: another node known touchable does not count",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"), SEM2("c", "0000000003"),
      SEM2("d", "0000000004")},
     SEM2("d", "0000000004"),
     .touchable = SEM2("b", "0000000002"),
     .want = ZKR__D_ASK_TOUCH,
     .watch = SEM2("c", "0000000003")},
    {"semaphore: no creator of our ACL can touch: the directory",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"), SEM2("c", "0000000003"),
      SEM2("d", "0000000004")},
     SEM2("d", "0000000004"),
     .creator_cannot_write = 1,
     .want = ZKR__D_WATCH_DIR},
    {"semaphore: behind a foreign lock node (never touched): the directory",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"),
      KZ("f00d", "0000000003"), SEM2("d", "0000000004")},
     SEM2("d", "0000000004"),
     .want = ZKR__D_WATCH_DIR},
    {"semaphore: behind an unreadable predecessor: the directory",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000002"), SEM2("c", "0000000003"),
      SEM2("d", "0000000004")},
     SEM2("d", "0000000004"),
     .unreadable = SEM2("c", "0000000003"),
     .want = ZKR__D_WATCH_DIR},
    {"semaphore: a newcomer of another size is refused",
     SEMAPHORE,
     3,
     {SEM2("a", "0000000001"), SEM3("b", "0000000002")},
     SEM3("b", "0000000002"),
     .want = ZKR__D_CONFLICT},
    {"semaphore: refused even when it would be granted",
     SEMAPHORE,
     3,
     {SEM2("a", "0000000001"), SEM3("b", "0000000002")},
     SEM3("b", "0000000002"),
     .try_once = 1,
     .want = ZKR__D_CONFLICT},
    {"semaphore: ties after us count as before us",
     SEMAPHORE,
     2,
     {SEM2("a", "0000000001"), SEM2("b", "0000000007"),
      SEM2("c", "0000000007")},
     SEM2("b", "0000000007"),
     .want = ZKR__D_WATCH_DIR},
    {"semaphore: the mutex rule's ACL questions do not apply to a lock",
     MUTEX,
     1,
     {MX("a", "0000000001"), MX("b", "0000000002")},
     MX("b", "0000000002"),
     .creator_cannot_write = 1,
     .want = ZKR__D_WATCH_NODE,
     .watch = MX("a", "0000000001")},
    {"an unreadable predecessor of a lock: the directory",
     MUTEX,
     1,
     {MX("a", "0000000001"), MX("b", "0000000002")},
     MX("b", "0000000002"),
     .unreadable = MX("a", "0000000001"),
     .want = ZKR__D_WATCH_DIR},
};

static zkr__pred_fn rule_fn(enum rule r)
{
    switch (r) {
    case SEMAPHORE:
        return zkr__pred_semaphore;
    case READ:
        return zkr__pred_read;
    case MUTEX:
    case WRITE:
        break;
    }
    return zkr__pred_mutex;
}

static const char *decision_name(zkr__decision_t d)
{
    static const char *const names[] = {
        "LOST",  "CONFLICT", "ASK_SELF",  "DELAY",      "DELAYED",
        "GRANT", "BUSY",     "WATCH_DIR", "WATCH_NODE", "ASK_TOUCH"};

    return (unsigned)d < NELEM(names) ? names[d] : "?";
}

static void run_case(const struct tcase *t)
{
    char *names[NELEM(t->names)];
    struct String_vector v = {0, names};
    zkr__entry_t *e = NULL;
    zkr__verdict_t d;
    int n = 0;

    for (size_t i = 0; i < NELEM(t->names) && t->names[i] != NULL; i++)
        names[v.count++] = (char *)t->names[i];
    assert_int_equal(zkr__sort_children(&v, &e, &n), 0);
    zkr__listing_t in = {
        .e = e,
        .n = n,
        .self = zkr__find_entry(e, n, t->self),
        .pred = rule_fn(t->rule),
        .permits = t->permits,
        .poke = t->rule == SEMAPHORE,
        .creator_writes = !t->creator_cannot_write,
        .unreadable = t->unreadable,
        .touchable = t->touchable,
        .self_doubt = t->self_doubt,
        .delay_due = t->delay_due,
        .delayed = t->delayed,
        .try_once = t->try_once,
    };
    d = zkr__decide(&in);
    if (d.what != t->want)
        fail_msg("%s: %s, want %s", t->what, decision_name(d.what),
                 decision_name(t->want));
    if (t->watch != NULL) {
        if (d.target < 0 || d.target >= n)
            fail_msg("%s: no node to watch, want %s", t->what, t->watch);
        if (strcmp(e[d.target].name, t->watch) != 0)
            fail_msg("%s: watches %s, want %s", t->what, e[d.target].name,
                     t->watch);
    }
    free(e);
}

static void test_decisions(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(cases); i++)
        run_case(&cases[i]);
}

/* The decision is a function of its inputs: the same listing in another
 * order gives the same verdict (every contender sees one queue). */
static void test_listing_order_does_not_matter(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(cases); i++) {
        struct tcase t = cases[i];
        size_t k = 0;

        while (k < NELEM(t.names) && t.names[k] != NULL)
            k++;
        for (size_t r = 1; r < k; r++) {
            struct tcase u = t;

            for (size_t j = 0; j < k; j++)
                u.names[j] = t.names[(j + r) % k];
            run_case(&u);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decisions),
        cmocka_unit_test(test_listing_order_does_not_matter),
    };

    zkt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
