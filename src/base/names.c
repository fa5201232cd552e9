/* Contender node names: recognition, sequence parsing and ordering.
 *
 * ZooKeeper appends the parent's cversion formatted as "%010d" to a
 * sequential node's name. It is a signed 32-bit counter: after 2147483647
 * comes "-2147483648", and small negative values look like "-000000001".
 * Queues are ordered by that number only, never by the full name (the
 * prefix holds a random UUID), and as serial numbers (see queue order
 * below): a node created after the wrap is newer although its number is
 * lower.
 *
 * Recognised markers (the sequence follows the marker immediately):
 *   "-lock-"    zkr, Curator InterProcessMutex, go-zookeeper
 *   "__lock__"  kazoo Lock       "__rlock__" kazoo read lock
 *   "__READ__"  Curator read     "__WRIT__"  Curator write
 *   "-latch-"   Curator LeaderLatch
 *   "x-<hex session>-"  ZooKeeper's contrib C/Java lock recipes
 * Any other child is not a contender and is ignored. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

int zkr__parse_seq(const char *s, int32_t *out)
{
    int neg = 0, digits = 0;
    int64_t v = 0;

    if (*s == '-') {
        neg = 1;
        s++;
    }
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || ++digits > 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    if (digits == 0)
        return -1;
    if (neg)
        v = -v;
    if (v < INT32_MIN || v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

static const struct {
    const char *marker;
    zkr__kind_t kind;
} markers[] = {
    {"-lock-", ZKR__KIND_EXCLUSIVE}, {"__lock__", ZKR__KIND_EXCLUSIVE},
    {"__rlock__", ZKR__KIND_READ},   {"__READ__", ZKR__KIND_READ},
    {"__WRIT__", ZKR__KIND_WRITE},   {"-latch-", ZKR__KIND_LATCH},
};

/* Finds the last occurrence of m in name whose remainder parses as a
 * sequence. The last one wins so an identifier-like prefix cannot fool it. */
static int parse_marker(const char *name, const char *m, int32_t *seq)
{
    size_t ml = strlen(m);
    const char *hit = NULL, *p = name;

    while ((p = strstr(p, m)) != NULL) {
        hit = p;
        p++;
    }
    if (hit == NULL)
        return -1;
    return zkr__parse_seq(hit + ml, seq);
}

/* "x-<hex>-<seq>", where seq may itself start with '-'. */
static int parse_contrib(const char *name, int32_t *seq)
{
    const char *p = name + 2;
    int hex = 0;

    if (strncmp(name, "x-", 2) != 0)
        return -1;
    while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
           (*p >= 'A' && *p <= 'F')) {
        p++;
        hex++;
    }
    if (hex == 0 || *p != '-')
        return -1;
    return zkr__parse_seq(p + 1, seq);
}

/* zkr names its nodes "_c_<UUID>..." (engine/create.c, zkr__issue_create), as
 * Curator does; a UUID is 8-4-4-4-12 hex digits. Anything else (kazoo's
 * "<hex>__lock__", contrib's "x-<hex>-", go-zookeeper's "_c_<32 hex>-")
 * cannot be a zkr node. */
int zkr__name_foreign(const char *name)
{
    if (strncmp(name, "_c_", 3) != 0)
        return 1;
    name += 3;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        char ch = name[i];

        if (dash ? ch != '-'
                 : !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                     (ch >= 'A' && ch <= 'F')))
            return 1;
    }
    return 0;
}

/* An election candidate with a lock-delay names itself with a UUID whose
 * version digit is 8 (RFC 9562's vendor-specific version; zkr's other
 * nodes and Curator's have 4) and touches its node once it leads
 * (docs/design/lock-delay.md, 1.7). */
int zkr__name_announces(const char *name)
{
    return name != NULL && !zkr__name_foreign(name) && name[3 + 14] == '8';
}

int zkr__parse_name(const char *name, int32_t *seq, zkr__kind_t *kind)
{
    *kind = ZKR__KIND_NONE;
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
        if (parse_marker(name, markers[i].marker, seq) == 0) {
            *kind = markers[i].kind;
            return 0;
        }
    }
    if (parse_contrib(name, seq) == 0) {
        *kind = ZKR__KIND_EXCLUSIVE;
        return 0;
    }
    return -1;
}

/* Queue order.
 *
 * The rule is creation order. The sequence is the parent's cversion,
 * which every child creation and deletion increments, wrapping from
 * 2147483647 to -2147483648, so creation order is serial-number order
 * (RFC 1982): a is older than b when the 32-bit wrapping difference
 * b - a, read as signed, is positive. That comparison alone cannot drive
 * a sort: it is not transitive around the whole circle of 2^32 values.
 *
 * The assumption: while a contender node lives, fewer than 2^31 creations
 * and deletions of children happen in its directory (some 10^9 acquire
 * and release cycles by others while one node waits or holds). Then all
 * live sequences lie within less than half the circle: the gap from the
 * newest back round to the oldest is more than 2^31, and every other gap
 * between neighbours on the circle is less than the span of the set. So
 * the oldest is the value just after the largest gap: the queue is the
 * set sorted as unsigned values and rotated to start there, and every
 * pair in it is in serial-number order.
 *
 * If the assumption is violated (a node kept through 2^31 other changes
 * in its directory) names alone cannot tell which node is older. The
 * queue is still one total order, the same for every contender that
 * lists the same set, but it may put a newer node first, and when the
 * largest gap moves as nodes come and go the queue rotates: a waiter can
 * find itself first while an older holder still holds. Nothing here can
 * detect that; it is the documented limit of sequence names (Curator and
 * kazoo go wrong as soon as the counter wraps, see docs/RELIABILITY.md).
 *
 * Equal sequences (a ZooKeeper 3.8 counter stuck at 2147483647, see
 * tied() below, or nodes written by hand) are ordered by name; they are
 * neighbours, with no gap between them, and stay together. That order is
 * not their age: the recipes' rules treat such nodes as possibly before
 * one another. */
static int entry_cmp(const void *a, const void *b)
{
    const zkr__entry_t *x = a, *y = b;
    uint32_t u = (uint32_t)x->seq, v = (uint32_t)y->seq;

    if (u != v)
        return u < v ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void reverse(zkr__entry_t *e, int lo, int hi)
{
    for (hi--; lo < hi; lo++, hi--) {
        zkr__entry_t t = e[lo];
        e[lo] = e[hi];
        e[hi] = t;
    }
}

/* Sorts e[0..k) into queue order (above); k >= 1. */
static void queue_order(zkr__entry_t *e, int k)
{
    uint32_t widest;
    int start = 0;

    qsort(e, (size_t)k, sizeof(*e), entry_cmp);
    /* The gap from the last value round to the first, then the others;
     * only a strictly wider gap moves the start, so ties are decided the
     * same way for every listing of the same set. */
    widest = (uint32_t)e[0].seq - (uint32_t)e[k - 1].seq;
    for (int i = 0; i + 1 < k; i++) {
        uint32_t gap = (uint32_t)e[i + 1].seq - (uint32_t)e[i].seq;

        if (gap > widest) {
            widest = gap;
            start = i + 1;
        }
    }
    /* Rotate left by start. */
    reverse(e, 0, start);
    reverse(e, start, k);
    reverse(e, 0, k);
}

int zkr__sort_children(const struct String_vector *v, zkr__entry_t **out,
                       int *n)
{
    zkr__entry_t *e;
    int k = 0;

    *out = NULL;
    *n = 0;
    if (v == NULL || v->count <= 0)
        return 0;
    e = malloc(sizeof(*e) * (size_t)v->count);
    if (e == NULL)
        return ZKR_ENOMEM;
    for (int i = 0; i < v->count; i++) {
        if (zkr__parse_name(v->data[i], &e[k].seq, &e[k].kind) == 0) {
            e[k].name = v->data[i];
            e[k].permits = zkr__parse_permits(v->data[i]);
            k++;
        }
    }
    if (k == 0) {
        free(e);
        return 0;
    }
    queue_order(e, k);
    *out = e;
    *n = k;
    return 0;
}

int zkr__find_entry(const zkr__entry_t *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return i;
    return -1;
}

int zkr__parse_permits(const char *name)
{
    const char *p = strstr(name, "-permits-");
    long v = 0;

    if (p == NULL)
        return 0;
    for (p += 9; *p >= '0' && *p <= '9' && v < 1000000; p++)
        v = v * 10 + (*p - '0');
    return strncmp(p, "-lock-", 6) == 0 ? (int)v : 0;
}

/* Can the names not tell which of two sequences is older? Equal ones
 * (below), and 2147483647 beside a negative one: on 3.8's stuck counter
 * (below) a create in flight with another gets -2147483648 and the
 * creates after it get 2147483647 again, so either may be the older
 * (queue order, which puts 2147483647 first as a documented wrap would,
 * is only a guess then). */
static int unordered(int32_t a, int32_t b)
{
    return a == b || (a == INT32_MAX && b < 0) || (b == INT32_MAX && a < 0);
}

/* Unordered sequences (unordered()): order unknown, so assumed before
 * us.
 *
 * ZooKeeper 3.8's server does not wrap its counter as documented: the
 * parent's stored count is only ever raised (DataTree.createNode keeps the
 * larger value), so once it reaches 2147483647 every later child of that
 * parent is numbered 2147483647 again (only creates already in flight see
 * -2147483648). Contenders with distinct prefixes then share a sequence,
 * and their names do not say which is older: sorting them by name could
 * put a newcomer before the holder and grant it too. So a contender
 * counts every other node with its own sequence as possibly before it:
 * it is never granted past one, and watches one. Two such waiters with no
 * one else before them wait for each other until one leaves (a timeout or
 * cancel ends it): liveness is lost on such a path, never safety; the
 * cure is a path whose counter has not run out (docs/RELIABILITY.md).
 * Returns the index of the first other entry with v[self]'s sequence whose
 * kind matches (any kind if !writers_only; else writers and exclusive
 * locks), at or after index from, or -1. */
static int tied(const zkr__entry_t *v, int n, int self, int from,
                int writers_only)
{
    for (int i = from; i < n; i++)
        if (i != self && unordered(v[i].seq, v[self].seq) &&
            (!writers_only || zkr__read_waits_on(v[i].kind)))
            return i;
    return -1;
}

/* Mutex (and writer): granted when nobody is before us (nor shares our
 * sequence, see above); otherwise watch the node just before us.
 * Watching only the predecessor keeps a release to one notification
 * however long the queue. */
int zkr__pred_mutex(const zkr__entry_t *v, int n, int self, int permits)
{
    int t;

    (void)permits;
    if (self > 0)
        return self - 1;
    t = tied(v, n, self, 0, 0);
    return t >= 0 ? t : ZKR__GRANT;
}

/* A reader waits on writers and exclusive locks only (readers share). */
int zkr__read_waits_on(zkr__kind_t kind)
{
    return kind == ZKR__KIND_WRITE || kind == ZKR__KIND_EXCLUSIVE;
}

/* Reader: only writers (and exclusive locks) before us block; watch the
 * last of them. Only lower sequences count: a writer queued after us never
 * delays us (kazoo's deadlock #649 came from counting higher ones). A
 * writer with our own sequence may be before us (see tied()). */
int zkr__pred_read(const zkr__entry_t *v, int n, int self, int permits)
{
    int t;

    (void)permits;
    for (int i = self - 1; i >= 0; i--)
        if (zkr__read_waits_on(v[i].kind))
            return i;
    t = tied(v, n, self, self + 1, 1);
    return t >= 0 ? t : ZKR__GRANT;
}

/* Semaphore of N permits: the first N contenders hold.
 *
 * Why this wakes the right waiter and only O(1) of them:
 * - The first waiter (index N) must notice the departure of any of the N
 *   holders, or of nothing else: it keeps a child watch on the directory
 *   (one notification per change, for this one waiter only).
 * - Every later waiter watches its predecessor. Its own index only drops
 *   when something before it leaves, and it can only be granted after it
 *   became the first waiter, which happens exactly when its predecessor
 *   leaves (deletion: notified) or its predecessor is granted. For the
 *   latter, a granted contender touches its own node (setData), which
 *   notifies the successor watching it, and a successor that finds its
 *   predecessor written since it last listed when setting its watch lists
 *   again at once (unseen_write() in src/engine/list.c). So a departure in the
 * middle (timeout, cancel, crash, expiry) wakes exactly the contender behind
 * it, and no waiter is left watching a node that will not change while a permit
 * is free. A contender whose N differs from the oldest contender's is refused.
 */
int zkr__pred_semaphore(const zkr__entry_t *v, int n, int self, int permits)
{
    int after = 0; /* entries after us maybe older (unordered(), tied()) */

    /* The queue's count is that of its oldest contender stating one: only
     * a newcomer that disagrees is refused, never those already waiting
     * with it. */
    for (int i = 0; i < n; i++) {
        if (v[i].permits != 0) {
            if (v[i].permits != permits)
                return ZKR__CONFLICT;
            break;
        }
    }
    for (int i = self + 1; i < n; i++)
        after += unordered(v[i].seq, v[self].seq);
    if (self + after < permits)
        return ZKR__GRANT;
    if (self > permits)
        return self - 1;
    return ZKR__WATCH_DIR; /* the first waiter, or held back by a tie */
}

/* Applies each entry's own rule (by its marker) to the queue in order; the
 * granted entries always form a prefix. */
int zkr__holding(const zkr__entry_t *v, int n)
{
    int k = 0;

    for (; k < n; k++) {
        int w;
        if (v[k].permits > 0)
            w = zkr__pred_semaphore(v, n, k, v[k].permits);
        else if (v[k].kind == ZKR__KIND_READ)
            w = zkr__pred_read(v, n, k, 1);
        else
            w = zkr__pred_mutex(v, n, k, 1);
        if (w != ZKR__GRANT)
            break;
    }
    return k;
}

/* Listings that show a candidate not leading yet although first in line
 * (zkr__name_announces(), data version 0): zkr_contenders_list() notes
 * them here, keyed by the array it returns and the entries' node strings,
 * since zkr_contender_t has no field for it (its layout is ABI). */
typedef struct unled {
    struct unled *next;
    const zkr_contender_t *v;
    const char *node; /* v[i].node of the entry */
    int i;
} unled_t;

static pthread_mutex_t unled_mu = PTHREAD_MUTEX_INITIALIZER;
static unled_t *unled_list;

int zkr__listing_unled(const zkr_contender_t *v, int i)
{
    unled_t *u = malloc(sizeof(*u));

    if (u == NULL)
        return ZKR_ENOMEM;
    u->v = v;
    u->node = v[i].node;
    u->i = i;
    pthread_mutex_lock(&unled_mu);
    u->next = unled_list;
    unled_list = u;
    pthread_mutex_unlock(&unled_mu);
    return 0;
}

void zkr__listing_forget(const zkr_contender_t *v)
{
    pthread_mutex_lock(&unled_mu);
    for (unled_t **pp = &unled_list; *pp != NULL;) {
        unled_t *u = *pp;
        if (u->v == v) {
            *pp = u->next;
            free(u);
        } else {
            pp = &u->next;
        }
    }
    pthread_mutex_unlock(&unled_mu);
}

/* The first entry of v before count that zkr_contenders_list() saw not
 * leading yet, or count. */
static int first_unled(const zkr_contender_t *v, int count)
{
    int k = count;

    pthread_mutex_lock(&unled_mu);
    for (const unled_t *u = unled_list; u != NULL; u = u->next)
        if (u->v == v && u->i < k && v[u->i].node == u->node)
            k = u->i;
    pthread_mutex_unlock(&unled_mu);
    return k;
}

int zkr_contenders_holding(const zkr_contender_t *v, int count)
{
    zkr__entry_t *e;
    int k, unled;

    if (v == NULL || count <= 0)
        return 0;
    if ((e = calloc((size_t)count, sizeof(*e))) == NULL)
        return ZKR_ENOMEM;
    for (int i = 0; i < count; i++) {
        const char *slash = v[i].node != NULL ? strrchr(v[i].node, '/') : NULL;
        e[i].name = slash != NULL ? slash + 1 : "";
        e[i].seq = v[i].seq;
        if (zkr__parse_name(e[i].name, &e[i].seq, &e[i].kind) != 0)
            e[i].kind = ZKR__KIND_EXCLUSIVE;
        e[i].permits = zkr__parse_permits(e[i].name);
    }
    k = zkr__holding(e, count);
    free(e);
    /* A candidate still waiting out its lock-delay holds nothing yet, nor
     * does anyone behind it. */
    unled = first_unled(v, count);
    return unled < k ? unled : k;
}
