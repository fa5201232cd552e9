/* Contender node names: recognition, sequence parsing and ordering.
 *
 * ZooKeeper appends the parent's cversion formatted as "%010d" to a
 * sequential node's name. It is a signed 32-bit counter: after 2147483647
 * comes "-2147483648", and small negative values look like "-000000001".
 * Queues are ordered by that signed number only, never by the full name
 * (the prefix holds a random UUID).
 *
 * Recognised markers (the sequence follows the marker immediately):
 *   "-lock-"    zkr, Curator InterProcessMutex, go-zookeeper
 *   "__lock__"  kazoo Lock       "__rlock__" kazoo read lock
 *   "__READ__"  Curator read     "__WRIT__"  Curator write
 *   "-latch-"   Curator LeaderLatch
 *   "x-<hex session>-"  ZooKeeper's contrib C/Java lock recipes
 * Any other child is not a contender and is ignored. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

static int entry_cmp(const void *a, const void *b)
{
    const zkr__entry_t *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return strcmp(x->name, y->name);
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
    qsort(e, (size_t)k, sizeof(*e), entry_cmp);
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

/* Mutex (and writer): granted when nobody is before us; otherwise watch
 * the node just before us. Watching only the predecessor keeps a release to
 * one notification however long the queue. */
int zkr__pred_mutex(const zkr__entry_t *v, int n, int self, int permits)
{
    (void)v;
    (void)n;
    (void)permits;
    return self == 0 ? ZKR__GRANT : self - 1;
}

/* Reader: only writers (and exclusive locks) before us block; watch the
 * last of them. Only lower sequences count: a writer queued after us never
 * delays us (kazoo's deadlock #649 came from counting higher ones). */
int zkr__pred_read(const zkr__entry_t *v, int n, int self, int permits)
{
    (void)n;
    (void)permits;
    for (int i = self - 1; i >= 0; i--)
        if (v[i].kind == ZKR__KIND_WRITE || v[i].kind == ZKR__KIND_EXCLUSIVE)
            return i;
    return ZKR__GRANT;
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
 *   again at once (unseen_write() in queue.c). So a departure in the middle
 * (timeout, cancel, crash, expiry) wakes exactly the contender behind it, and
 * no waiter is left watching a node that will not change while a permit is
 * free. A contender whose N differs from the oldest contender's is refused. */
int zkr__pred_semaphore(const zkr__entry_t *v, int n, int self, int permits)
{
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
    if (self < permits)
        return ZKR__GRANT;
    if (self == permits)
        return ZKR__WATCH_DIR;
    return self - 1;
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

int zkr_contenders_holding(const zkr_contender_t *v, int count)
{
    zkr__entry_t *e;
    int k;

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
    return k;
}
