/* A foreign actor for the soak and the history checker: a raw ZooKeeper
 * client (no zkr) doing to a lock's and an election's queue what other
 * clients and operators do.
 *
 *   foreign -s HOSTS -p LOCK_PATH [-e ELECT_PATH] -H HISTORY -d SECONDS
 *           [-i INTERVAL_MS] [-S SEED]
 *
 * Every 1 to 3 INTERVAL_MS (default 200) one of:
 *  - join: a contender named as Curator names it ("_c_<uuid>-lock-",
 *    "_c_<uuid>-latch-" in the election) or as kazoo does
 *    ("<hex>__lock__"), ephemeral sequential, which waits a while and then
 *    leaves (deleted), whether it reached the front or not;
 *  - write: setData "__REVOKE__" on another contender's waiting node (as
 *    Curator's revocation does);
 *  - delete: deletes another contender's waiting node (an operator's
 *    forced delete);
 * (another contender: not a foreign actor's, whose nodes hold "foreign");
 *  - write then delete, one after the other (a waiter written and gone:
 *    what a handoff looks like from outside).
 * Never the holder's node: a write or delete runs in one multi with a
 * check that a node before the target (the first in creation order, by
 * serial-number arithmetic on the sequences, tests/lib/seq.h) still exists, so
 * the target is not first, and so was never granted and never will be
 * (a node before it cannot come back).
 *
 * History events (the format of tests/bin/contender -H), for
 * tests/bin/zkr-check: foreign-on CZXID KIND      our contender exists (logged
 * after its create returned) foreign-off CZXID KIND     it is about to be
 * deleted (logged before) foreign-write CZXID KIND   another's waiting node
 * written foreign-delete CZXID KIND  another's waiting node deleted (after the
 *                              delete succeeded)
 *   foreign-lost 0 0           our session expired: our nodes are gone
 *   exit 0 0
 * KIND is 0 for the lock, 1 for the election. The session is long (30 s)
 * and direct to the server, so the driver's faults do not expire it. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "seq.h"

#define MAX_OWN 4
#define SESSION_MS 30000

struct own {
    char path[256];
    int64_t czxid;
    int kind;
    int64_t leave_ms;
};

static zhandle_t *zh;
static int hist_fd = -1;
static const char *paths[2];
static int npaths = 1;
static struct own own[MAX_OWN];
static int nown;
static char pending[MAX_OWN][256]; /* creates whose outcome is unknown */
static int pending_kind[MAX_OWN], npending;

static void hist(const char *event, long long a, long long b)
{
    struct timespec ts;
    char buf[160];
    const clientid_t *cid = zh != NULL ? zoo_client_id(zh) : NULL;
    int n;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(
        buf, sizeof(buf), "%lld %ld %llx %s %lld %lld\n",
        (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)getpid(),
        cid != NULL ? (unsigned long long)cid->client_id : 0ULL, event, a, b);
    if (write(hist_fd, buf, (size_t)n) != n)
        _exit(5);
}

static int rnd(int lo, int hi)
{
    return lo + rand() % (hi - lo + 1);
}

static int session_lost(int rc)
{
    if (rc != ZSESSIONEXPIRED && zoo_state(zh) != ZOO_EXPIRED_SESSION_STATE)
        return 0;
    hist("foreign-lost", 0, 0);
    fprintf(stderr, "foreign: session expired\n");
    exit(4);
}

/* A name prefix as Curator or kazoo would create it. */
static void prefix_of(int kind, char *buf, size_t len)
{
    char hex[33];

    for (int i = 0; i < 32; i++)
        hex[i] = "0123456789abcdef"[rand() % 16];
    hex[32] = '\0';
    if (kind == 1)
        snprintf(buf, len, "%s/_c_%.8s-%.4s-4%.3s-8%.3s-%.12s-latch-", paths[1],
                 hex, hex + 8, hex + 12, hex + 16, hex + 20);
    else if (rand() % 2)
        snprintf(buf, len, "%s/_c_%.8s-%.4s-4%.3s-8%.3s-%.12s-lock-", paths[0],
                 hex, hex + 8, hex + 12, hex + 16, hex + 20);
    else
        snprintf(buf, len, "%s/%s__lock__", paths[0], hex);
}

static void add_own(const char *path, int64_t czxid, int kind)
{
    struct own *o = &own[nown++];

    snprintf(o->path, sizeof(o->path), "%s", path);
    o->czxid = czxid;
    o->kind = kind;
    o->leave_ms = zkt_now_ms() + rnd(100, 1500);
    hist("foreign-on", (long long)czxid, kind);
}

static void join(int kind)
{
    char prefix[256], path[256];
    struct Stat st;
    int rc;

    if (nown + npending >= MAX_OWN)
        return;
    prefix_of(kind, prefix, sizeof(prefix));
    rc =
        zoo_create2(zh, prefix, "foreign", 7, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL | ZOO_SEQUENCE, path, (int)sizeof(path), &st);
    if (rc == ZOK) {
        add_own(path, st.czxid, kind);
    } else if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
        /* It may exist: found (and left) once we are connected again. */
        snprintf(pending[npending], sizeof(pending[0]), "%s", prefix);
        pending_kind[npending++] = kind;
    } else {
        session_lost(rc);
    }
}

/* Creates whose reply was lost: look for them by their unique prefix. */
static void resolve_pending(void)
{
    for (int i = 0; i < npending; i++) {
        struct String_vector v = {0, NULL};
        const char *slash = strrchr(pending[i], '/');
        const char *dir = paths[pending_kind[i]];
        char path[256];
        struct Stat st;
        int rc = zoo_get_children(zh, dir, 0, &v), found = 0;

        if (rc != ZOK) {
            deallocate_String_vector(&v);
            session_lost(rc);
            if (rc == ZNONODE)
                goto drop; /* the directory went, and our node with it */
            return;
        }
        for (int k = 0; k < v.count && !found; k++) {
            if (strncmp(v.data[k], slash + 1, strlen(slash + 1)) != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, v.data[k]);
            if (zoo_exists(zh, path, 0, &st) == ZOK) {
                add_own(path, st.czxid, pending_kind[i]);
                found = 1;
            }
        }
        deallocate_String_vector(&v);
    drop:
        npending--;
        memmove(pending[i], pending[npending], sizeof(pending[0]));
        pending_kind[i] = pending_kind[npending];
        i--;
    }
}

/* Deletes our node o (logged first), retrying across connection loss. */
static void leave(struct own *o)
{
    int rc;

    hist("foreign-off", (long long)o->czxid, o->kind);
    while ((rc = zoo_delete(zh, o->path, -1)) != ZOK && rc != ZNONODE) {
        session_lost(rc);
        zkt_sleep_ms(100);
    }
    *o = own[--nown];
}

static int is_own(const char *dir, const char *name)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    for (int i = 0; i < nown; i++)
        if (strcmp(own[i].path, path) == 0)
            return 1;
    return 0;
}

/* Picks the first contender of dir (creation order) and another's waiting
 * node after it. Returns 0 and both full paths, or -1. */
static int pick(const char *dir, char *first, char *target, size_t len)
{
    struct String_vector v = {0, NULL};
    int32_t s, fs = 0;
    int f = -1, n = 0, rc = zoo_get_children(zh, dir, 0, &v);

    if (rc != ZOK) {
        session_lost(rc);
        return -1;
    }
    for (int i = 0; i < v.count; i++)
        if (zkt_name_seq(v.data[i], &s) == 0 &&
            (f < 0 || zkt_seq_before(s, fs))) {
            f = i;
            fs = s;
        }
    /* Reservoir choice among the others that are not ours. */
    for (int i = 0; i < v.count && f >= 0; i++) {
        if (i == f || zkt_name_seq(v.data[i], &s) != 0 ||
            is_own(dir, v.data[i]))
            continue;
        if (rand() % ++n == 0)
            snprintf(target, len, "%s/%s", dir, v.data[i]);
    }
    if (n > 0)
        snprintf(first, len, "%s/%s", dir, v.data[f]);
    deallocate_String_vector(&v);
    return n > 0 ? 0 : -1;
}

/* Writes (del=0) or deletes (del=1) target while first still exists. */
static int guarded(const char *first, const char *target, int del,
                   int64_t czxid, int kind)
{
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    struct Stat st;
    int rc;

    zoo_check_op_init(&ops[0], first, -1);
    if (del)
        zoo_delete_op_init(&ops[1], target, -1);
    else
        zoo_set_op_init(&ops[1], target, "__REVOKE__", 10, -1, &st);
    rc = zoo_multi(zh, 2, ops, res);
    if (rc == ZOK)
        hist(del ? "foreign-delete" : "foreign-write", (long long)czxid, kind);
    else
        session_lost(rc);
    return rc;
}

static void meddle(int kind, int write, int del)
{
    char first[256], target[256], data[16];
    int len = (int)sizeof(data);
    struct Stat st;

    /* Not another foreign actor's contender (data "foreign"): its
     * history says it is there until it leaves. */
    if (pick(paths[kind], first, target, sizeof(first)) != 0 ||
        zoo_get(zh, target, 0, data, &len, &st) != ZOK ||
        (len == 7 && memcmp(data, "foreign", 7) == 0))
        return;
    if (write && guarded(first, target, 0, st.czxid, kind) != ZOK)
        return;
    if (del)
        guarded(first, target, 1, st.czxid, kind);
}

int main(int argc, char **argv)
{
    const char *hosts = NULL, *history = NULL;
    int seconds = 10, interval = 200, opt;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    int64_t end;

    while ((opt = getopt(argc, argv, "s:p:e:H:d:i:S:")) != -1) {
        switch (opt) {
        case 's':
            hosts = optarg;
            break;
        case 'p':
            paths[0] = optarg;
            break;
        case 'e':
            paths[1] = optarg;
            npaths = 2;
            break;
        case 'H':
            history = optarg;
            break;
        case 'd':
            seconds = atoi(optarg);
            break;
        case 'i':
            interval = atoi(optarg);
            break;
        case 'S':
            seed = (unsigned)strtoul(optarg, NULL, 10);
            break;
        default:
            return 2;
        }
    }
    if (hosts == NULL || paths[0] == NULL || history == NULL || interval < 1)
        return 2;
    srand(seed);
    if ((hist_fd = open(history, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
        return 3;
    if ((zh = zkt_connect(hosts, SESSION_MS)) == NULL)
        return 3;
    zoo_set_debug_level((ZooLogLevel)0);
    end = zkt_now_ms() + 1000LL * seconds;
    while (zkt_now_ms() < end) {
        int kind = rand() % npaths, what = rand() % 5;

        zkt_sleep_ms(rnd(interval, 3 * interval));
        resolve_pending();
        for (int i = 0; i < nown; i++)
            if (own[i].leave_ms <= zkt_now_ms())
                leave(&own[i--]);
        if (what <= 1)
            join(kind);
        else if (what == 2)
            meddle(kind, 1, 0);
        else if (what == 3)
            meddle(kind, 0, 1);
        else
            meddle(kind, 1, 1);
    }
    while (nown > 0)
        leave(&own[0]);
    hist("exit", 0, 0);
    zookeeper_close(zh); /* ends the session: a lost create's node too */
    return 0;
}
