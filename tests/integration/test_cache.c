/* Integration tests of the watched caches (zkr_cache_*) against a real
 * ZooKeeper server started by the harness, with the fault proxy in front
 * of it for cut connections. The oracles are the rules of zkr.h's
 * zkr_cache group: a view is the node (one entry, none while it does not
 * exist) or its children sorted by name (names only, stat zero and data
 * "" for ZKR_CACHE_CHILDREN; data and stats for ZKR_CACHE_CHILDREN_DATA,
 * a child we may not read with no data and a zero stat); it is stamped
 * with the highest zxid it reflects (the node's mzxid, the listing's
 * pzxid, the children's mzxids, the parent's pzxid for a missing node),
 * never lower than the view before; the listener hears each view that
 * differs from the last, in order, the first always; the descriptor is
 * readable while a view newer than the last read is there; after
 * zkr_cache_sync() every write acknowledged before the call is in the
 * view; blocking calls from a callback return ZKR_EDEADLK; the free
 * removes the cache's watches. The server's state is read by another
 * client (`raw`), which also makes the changes. Waits derive from the
 * session timeout. The sync on a follower that lags its leader is in
 * tests/fault/test_ensemble.c (three servers start there, once). */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"

enum { ST = 10000 }; /* the session timeout of most tests */

/* ------------------------------------------------------------- views */

/* One node of a view, copied. */
typedef struct {
    char *name;
    char *data; /* len bytes and a NUL */
    int len;
    struct Stat st;
} ent_t;

/* A view, copied: from the listener, zkr_cache_get() or the server. */
typedef struct {
    ent_t *e;
    int n;
    int64_t zxid;
} snap_t;

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);

    if (p == NULL)
        abort(); /* the listener's thread cannot fail a cmocka test */
    return p;
}

static char *xdup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);

    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void snap_free(snap_t *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->e[i].name);
        free(s->e[i].data);
    }
    free(s->e);
    memset(s, 0, sizeof(*s));
}

static snap_t snap_of(const zkr_cache_entry_t *e, int n, int64_t zxid)
{
    snap_t s = {NULL, n > 0 ? n : 0, zxid};

    s.e = xmalloc(sizeof(ent_t) * (size_t)s.n);
    for (int i = 0; i < s.n; i++) {
        s.e[i].name = xdup(e[i].name, strlen(e[i].name));
        s.e[i].data = xdup(e[i].data, (size_t)(e[i].len > 0 ? e[i].len : 0));
        s.e[i].len = e[i].len;
        s.e[i].st = e[i].stat;
    }
    return s;
}

static int stat_equal(const struct Stat *a, const struct Stat *b)
{
    return a->czxid == b->czxid && a->mzxid == b->mzxid &&
           a->ctime == b->ctime && a->mtime == b->mtime &&
           a->version == b->version && a->cversion == b->cversion &&
           a->aversion == b->aversion &&
           a->ephemeralOwner == b->ephemeralOwner &&
           a->dataLength == b->dataLength && a->numChildren == b->numChildren &&
           a->pzxid == b->pzxid;
}

static int stat_zero(const struct Stat *st)
{
    static const struct Stat zero;

    return stat_equal(st, &zero);
}

/* The same nodes, data and stats (the zxid stamps aside). */
static int snap_equal(const snap_t *a, const snap_t *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->e[i].name, b->e[i].name) != 0 ||
            a->e[i].len != b->e[i].len ||
            memcmp(a->e[i].data, b->e[i].data, (size_t)a->e[i].len) != 0 ||
            !stat_equal(&a->e[i].st, &b->e[i].st))
            return 0;
    return 1;
}

static void snap_print(const char *what, const snap_t *s)
{
    print_message("# %s: %d entries, zxid 0x%llx\n", what, s->n,
                  (unsigned long long)s->zxid);
    for (int i = 0; i < s->n && i < 40; i++) {
        const struct Stat *st = &s->e[i].st;

        print_message(
            "#   %s [%d] \"%.*s\" czxid 0x%llx mzxid 0x%llx pzxid "
            "0x%llx version %d cversion %d aversion %d children "
            "%d owner 0x%llx\n",
            s->e[i].name, s->e[i].len, s->e[i].len < 40 ? s->e[i].len : 40,
            s->e[i].data, (unsigned long long)st->czxid,
            (unsigned long long)st->mzxid, (unsigned long long)st->pzxid,
            st->version, st->cversion, st->aversion, st->numChildren,
            (unsigned long long)st->ephemeralOwner);
    }
}

/* Compares, frees both, then fails if they differed. */
static void assert_snap_equal_free(snap_t *got, snap_t *want)
{
    int eq = snap_equal(got, want);

    if (!eq) {
        snap_print("got", got);
        snap_print("want", want);
    }
    snap_free(got);
    snap_free(want);
    if (!eq)
        fail_msg("the views differ");
}

static void assert_snap_equal(const snap_t *got, const snap_t *want)
{
    if (!snap_equal(got, want)) {
        snap_print("got", got);
        snap_print("want", want);
        fail_msg("the views differ");
    }
}

/* s's entry name, or NULL. */
static const ent_t *ent(const snap_t *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->e[i].name, name) == 0)
            return &s->e[i];
    return NULL;
}

static void assert_names(const snap_t *s, const char *const *names, int n)
{
    int ok = s->n == n;

    for (int i = 0; ok && i < n; i++)
        ok = strcmp(s->e[i].name, names[i]) == 0;
    if (!ok) {
        snap_print("got", s);
        fail_msg("names differ (%d expected)", n);
    }
}

/* ------------------------------------------------------- server state */

static const char *base_of(const char *path)
{
    const char *b = strrchr(path, '/');

    return strcmp(path, "/") == 0 ? path : b + 1;
}

/* The parent of path into buf (len bytes); 0, or -1 for "/". */
static int parent_of(const char *path, char *buf, size_t len)
{
    size_t at = (size_t)(base_of(path) - path);

    if (strcmp(path, "/") == 0)
        return -1;
    at = at > 1 ? at - 1 : 1;
    assert_true(at < len);
    memcpy(buf, path, at);
    buf[at] = '\0';
    return 0;
}

/* The parent's pzxid, as another client reads it (0: no parent). */
static int64_t parent_pzxid(const char *path)
{
    char parent[ZKR_PATH_MAX + 1];
    struct Stat st;

    if (parent_of(path, parent, sizeof(parent)) != 0 ||
        raw_stat(parent, &st) != ZOK)
        return 0;
    return st.pzxid;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What a cache of kind on path shows of the server's state, read by
 * another client while nobody writes; its zxid is the highest the view
 * reflects (the node's mzxid, or its parent's pzxid while it is missing;
 * the listing's pzxid and the children's mzxids). */
static snap_t server_view(const char *path, zkr_cache_kind_t kind)
{
    enum { BUF = 1 << 16 };
    char *buf = xmalloc(BUF);
    snap_t s = {NULL, 0, 0};
    struct String_vector sv = {0, NULL};
    struct Stat st;
    int len = BUF, rc;

    s.e = xmalloc(sizeof(ent_t));
    if (kind == ZKR_CACHE_NODE) {
        rc = zoo_get(raw, path, 0, buf, &len, &st);
        assert_true(rc == ZOK || rc == ZNONODE);
        if (rc == ZNONODE) {
            s.zxid = parent_pzxid(path);
        } else {
            s.n = 1;
            s.e[0].name = xdup(base_of(path), strlen(base_of(path)));
            s.e[0].data = xdup(buf, (size_t)(len > 0 ? len : 0));
            s.e[0].len = len > 0 ? len : 0;
            s.e[0].st = st;
            s.zxid = st.mzxid;
        }
        free(buf);
        return s;
    }
    rc = zoo_get_children2(raw, path, 0, &sv, &st);
    assert_true(rc == ZOK || rc == ZNONODE);
    if (rc == ZNONODE) {
        s.zxid = parent_pzxid(path);
        free(buf);
        return s;
    }
    s.zxid = st.pzxid;
    qsort(sv.data, (size_t)sv.count, sizeof(char *), cmp_str);
    free(s.e);
    s.e = xmalloc(sizeof(ent_t) * (size_t)sv.count);
    for (int i = 0; i < sv.count; i++) {
        ent_t *e = &s.e[s.n];
        char child[ZKR_PATH_MAX + 1];

        memset(e, 0, sizeof(*e));
        len = BUF;
        rc = ZOK;
        if (kind == ZKR_CACHE_CHILDREN_DATA) {
            snprintf(child, sizeof(child), "%s/%s",
                     strcmp(path, "/") == 0 ? "" : path, sv.data[i]);
            rc = zoo_get(raw, child, 0, buf, &len, &e->st);
            assert_true(rc == ZOK || rc == ZNOAUTH);
        }
        e->name = xdup(sv.data[i], strlen(sv.data[i]));
        if (kind == ZKR_CACHE_CHILDREN_DATA && rc == ZOK) {
            e->len = len > 0 ? len : 0;
            e->data = xdup(buf, (size_t)e->len);
            if (e->st.mzxid > s.zxid)
                s.zxid = e->st.mzxid;
        } else {
            memset(&e->st, 0, sizeof(e->st)); /* names only, or no read */
            e->data = xdup("", 0);
        }
        s.n++;
    }
    deallocate_String_vector(&sv);
    free(buf);
    return s;
}

/* ---------------------------------------------------- another client */

/* Another client makes path (its ancestors too) with data (NULL: none);
 * *st (may be NULL) its stat. */
static void raw_put(const char *path, const char *data, struct Stat *st)
{
    char parent[ZKR_PATH_MAX + 1];

    if (parent_of(path, parent, sizeof(parent)) == 0 &&
        strcmp(parent, "/") != 0)
        raw_ensure(parent);
    assert_int_equal(zoo_create2(raw, path, data,
                                 data != NULL ? (int)strlen(data) : -1,
                                 &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0, st),
                     ZOK);
}

static void raw_set(const char *path, const char *data, int len,
                    struct Stat *st)
{
    struct Stat tmp;

    assert_int_equal(zoo_set2(raw, path, data, len, -1, st ? st : &tmp), ZOK);
}

/* Deletes path and everything below it, if there. */
static void raw_rm(const char *path)
{
    struct String_vector v = {0, NULL};

    if (zoo_get_children(raw, path, 0, &v) == ZOK) {
        for (int i = 0; i < v.count; i++) {
            char child[ZKR_PATH_MAX + 1];

            snprintf(child, sizeof(child), "%s/%s", path, v.data[i]);
            raw_rm(child);
        }
    }
    deallocate_String_vector(&v);
    assert_true(zoo_delete(raw, path, -1) == ZOK ||
                zoo_exists(raw, path, 0, NULL) == ZNONODE);
}

/* A fresh directory path with children names[i] holding data[i]. */
static void raw_dir(const char *path, const char *const *names,
                    const char *const *data, int n)
{
    char child[ZKR_PATH_MAX + 1];

    raw_rm(path);
    raw_put(path, NULL, NULL);
    for (int i = 0; i < n; i++) {
        snprintf(child, sizeof(child), "%s/%s", path, names[i]);
        raw_put(child, data != NULL ? data[i] : NULL, NULL);
    }
}

/* ------------------------------------------------------ the listener */

/* What a cache's listener was told: each view (or the last one only),
 * and what broke the rules on the way. */
struct vlog {
    pthread_mutex_t mu;
    zkr_cache_kind_t kind;
    const char *path;
    int keep;       /* every view, else the last only */
    snap_t *v;      /* the views (keep), or the last at v[0] */
    int n, cap;     /* views reported */
    int backwards;  /* a view stamped below the one before it */
    int repeats;    /* a view the same as the one before it */
    char bad[200];  /* the first malformed view: what */
    int after_free; /* calls after the cache was freed */
    atomic_int freed;
    int free_at; /* the listener frees its cache at this call; 0: never */
    /* Runs in the listener, on each call. */
    void (*hook)(zkr_cache_t *c, struct vlog *l, int call);
    void *hook_data;
};

static void vlog_init(struct vlog *l, zkr_cache_kind_t kind, const char *path,
                      int keep)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
    l->kind = kind;
    l->path = path;
    l->keep = keep;
    l->cap = 1;
    l->v = xmalloc(sizeof(snap_t));
}

static void vlog_destroy(struct vlog *l)
{
    for (int i = 0; i < (l->keep ? l->n : l->n > 0); i++)
        snap_free(&l->v[i]);
    free(l->v);
    pthread_mutex_destroy(&l->mu);
}

/* What is wrong with a view's shape, or NULL. */
static const char *shape_error(const struct vlog *l, const zkr_cache_entry_t *e,
                               int n)
{
    if (n < 0 || (n > 0 && e == NULL))
        return "no entries";
    if (l->kind == ZKR_CACHE_NODE && n > 1)
        return "a node's view with more than one entry";
    for (int i = 0; i < n; i++) {
        if (e[i].name == NULL || e[i].data == NULL || e[i].len < 0)
            return "a NULL name or data";
        if (e[i].data[e[i].len] != '\0')
            return "data without its NUL";
        if (l->kind == ZKR_CACHE_CHILDREN &&
            (e[i].len != 0 || !stat_zero(&e[i].stat)))
            return "a view of names with data or a stat";
        if (l->kind != ZKR_CACHE_NODE &&
            (strchr(e[i].name, '/') != NULL ||
             (i > 0 && strcmp(e[i - 1].name, e[i].name) >= 0)))
            return "children not sorted by name";
        if (l->kind == ZKR_CACHE_NODE && strcmp(l->path, "/") != 0 &&
            strcmp(e[i].name, base_of(l->path)) != 0)
            return "a node's view named otherwise";
    }
    return NULL;
}

static void on_view(zkr_cache_t *c, const zkr_cache_entry_t *e, int n,
                    int64_t zxid, void *data)
{
    struct vlog *l = data;
    const char *why = shape_error(l, e, n);
    snap_t s = snap_of(e, why == NULL ? n : 0, zxid);
    int call;

    pthread_mutex_lock(&l->mu);
    if (why != NULL && l->bad[0] == '\0')
        snprintf(l->bad, sizeof(l->bad), "view %d: %s", l->n + 1, why);
    l->after_free += atomic_load(&l->freed);
    if (l->n > 0) {
        snap_t *prev = &l->v[l->keep ? l->n - 1 : 0];

        l->backwards += zxid < prev->zxid;
        l->repeats += snap_equal(prev, &s);
    }
    if (!l->keep) {
        if (l->n > 0)
            snap_free(&l->v[0]);
        l->v[0] = s;
    } else {
        if (l->n == l->cap) {
            l->cap *= 2;
            l->v = realloc(l->v, sizeof(snap_t) * (size_t)l->cap);
            if (l->v == NULL)
                abort();
        }
        l->v[l->n] = s;
    }
    call = ++l->n;
    pthread_mutex_unlock(&l->mu);
    if (l->hook != NULL)
        l->hook(c, l, call);
    if (call == l->free_at) {
        zkr_cache_free(c); /* allowed from its own listener */
        atomic_store(&l->freed, 1);
    }
}

static int vlog_count(struct vlog *l)
{
    pthread_mutex_lock(&l->mu);
    int n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static snap_t snap_dup(const snap_t *s)
{
    snap_t d = {xmalloc(sizeof(ent_t) * (size_t)s->n), s->n, s->zxid};

    for (int i = 0; i < s->n; i++) {
        d.e[i] = s->e[i];
        d.e[i].name = xdup(s->e[i].name, strlen(s->e[i].name));
        d.e[i].data = xdup(s->e[i].data, (size_t)s->e[i].len);
    }
    return d;
}

/* A copy of view i (1-based, with keep), or of the last one (i = 0). */
static snap_t vlog_view(struct vlog *l, int i)
{
    snap_t d;

    pthread_mutex_lock(&l->mu);
    assert_true(l->n > 0 && i <= l->n && (l->keep || i == 0));
    d = snap_dup(&l->v[l->keep ? (i > 0 ? i : l->n) - 1 : 0]);
    pthread_mutex_unlock(&l->mu);
    return d;
}

/* Waits until the listener has told k views; a copy of the kth. */
static snap_t wait_view(struct vlog *l, int k)
{
    if (!ZKT_WAIT_UNTIL(vlog_count(l) >= k, zkt_scaled_ms(2 * ST)))
        fail_msg("%d views told, %d expected", vlog_count(l), k);
    return vlog_view(l, l->keep ? k : 0);
}

static int last_equals(struct vlog *l, const snap_t *want)
{
    int eq;

    pthread_mutex_lock(&l->mu);
    eq = l->n > 0 && snap_equal(&l->v[l->keep ? l->n - 1 : 0], want);
    pthread_mutex_unlock(&l->mu);
    return eq;
}

/* Waits until the last view told is want (bound: bound_ms). */
static void wait_last(struct vlog *l, const snap_t *want, int bound_ms)
{
    if (!ZKT_WAIT_UNTIL(last_equals(l, want), bound_ms)) {
        snap_t got = vlog_count(l) > 0 ? vlog_view(l, 0) : (snap_t){0};

        snap_print("last view told", &got);
        snap_print("expected", want);
        snap_free(&got);
        fail_msg("the listener was not told the expected view");
    }
}

/* The rules every sequence of views keeps. */
static void vlog_check(struct vlog *l)
{
    pthread_mutex_lock(&l->mu);
    int backwards = l->backwards, repeats = l->repeats, after = l->after_free;
    char bad[sizeof(l->bad)];

    memcpy(bad, l->bad, sizeof(bad));
    pthread_mutex_unlock(&l->mu);
    if (bad[0] != '\0')
        fail_msg("%s", bad);
    assert_int_equal(backwards, 0);
    assert_int_equal(repeats, 0);
    assert_int_equal(after, 0);
}

/* ------------------------------------------------------------ caches */

static zkr_cache_t *new_cache(zkr_session_t *s, const char *path,
                              zkr_cache_kind_t kind, struct vlog *l)
{
    zkr_cache_t *c = NULL;

    assert_int_equal(
        zkr_cache_new(&c, s, path, kind, l != NULL ? on_view : NULL, l), 0);
    assert_non_null(c);
    return c;
}

/* The cache's view by zkr_cache_get(). */
static snap_t cache_view(zkr_cache_t *c, int timeout_ms)
{
    zkr_cache_entry_t *e = NULL;
    int n = -1, rc;
    int64_t zxid = -1;
    snap_t s;

    rc = zkr_cache_get(c, timeout_ms, &e, &n, &zxid);
    if (rc != 0)
        fail_msg("zkr_cache_get: %s", zkr_errname(rc));
    assert_true(n >= 0 && (n == 0 || e != NULL));
    s = snap_of(e, n, zxid);
    zkr_cache_entries_free(e, n);
    return s;
}

/* Syncs the cache; then its view is the server's (nobody writes). */
static snap_t synced_view(zkr_cache_t *c)
{
    int rc = zkr_cache_sync(c, zkt_scaled_ms(2 * ST));

    if (rc != 0)
        fail_msg("zkr_cache_sync: %s", zkr_errname(rc));
    return cache_view(c, 0);
}

static int readable(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int rc = poll(&p, 1, timeout_ms);

    assert_true(rc >= 0);
    return rc == 1 && (p.revents & POLLIN);
}

/* A blocking zkr_cache_get() or zkr_cache_sync() on its own thread. */
typedef struct {
    zkr_cache_t *c;
    int sync, timeout_ms;
    pthread_t t;
    atomic_int done, rc;
    int n;
} runner_t;

static void *runner_main(void *arg)
{
    runner_t *r = arg;
    zkr_cache_entry_t *e = NULL;
    int rc;

    if (r->sync) {
        rc = zkr_cache_sync(r->c, r->timeout_ms);
    } else {
        rc = zkr_cache_get(r->c, r->timeout_ms, &e, &r->n, NULL);
        if (rc == 0)
            zkr_cache_entries_free(e, r->n);
    }
    atomic_store(&r->rc, rc);
    atomic_store(&r->done, 1);
    return NULL;
}

static void start(runner_t *r, zkr_cache_t *c, int sync, int timeout_ms)
{
    memset(r, 0, sizeof(*r));
    r->c = c;
    r->sync = sync;
    r->timeout_ms = timeout_ms;
    atomic_store(&r->rc, 12345);
    assert_int_equal(pthread_create(&r->t, NULL, runner_main, r), 0);
}

static int join(runner_t *r, int bound_ms)
{
    if (!ZKT_WAIT_UNTIL(atomic_load(&r->done), bound_ms))
        fail_msg("the call did not end within %d ms", bound_ms);
    pthread_join(r->t, NULL);
    return atomic_load(&r->rc);
}

/* No watch of sid on path, and none comes back for a while. */
static void no_watch_left(int64_t sid, const char *path)
{
    if (!ZKT_WAIT_UNTIL(!session_watches(sid, path), zkt_scaled_ms(ST))) {
        char *w = zkt_4lw(server, "wchc");

        print_message("# wchc:\n%s\n", w != NULL ? w : "?");
        free(w);
        fail_msg("session 0x%llx still watches %s", (unsigned long long)sid,
                 path);
    }
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_false(session_watches(sid, path));
}

/* Every watch the server holds, data and child watches: "mntr"'s
 * zk_watch_count ("wchs" and "wchc" count data watches only). */
static long all_watches(void)
{
    static const char key[] = "zk_watch_count\t";
    char *m = zkt_4lw(server, "mntr"), *p;
    long n = -1;

    if (m != NULL && (p = strstr(m, key)) != NULL)
        n = strtol(p + sizeof(key) - 1, NULL, 10);
    free(m);
    assert_true(n >= 0);
    return n;
}

/* The server's watch count comes back to w0. */
static void watches_back_to(long w0)
{
    if (!ZKT_WAIT_UNTIL(all_watches() == w0, zkt_scaled_ms(ST))) {
        char *w = zkt_4lw(server, "wchp");

        print_message("# %ld watches, %ld expected; data watches:\n%s\n",
                      all_watches(), w0, w != NULL ? w : "?");
        free(w);
        fail();
    }
}

/* ------------------------------------------------------------ NODE */

/* A node's first view (data, stat, zxid = mzxid), the same by
 * zkr_cache_get(); a write, a delete (no entry, stamped at least the
 * delete's zxid: its parent's pzxid) and a create, each a new view. */
static void test_node_view(void **state)
{
    const char *p = "/t/cache/node/x";
    zkr_session_t *s = open_session(ST);
    struct Stat st, st2;
    struct vlog l;
    zkr_cache_t *c;
    snap_t v, w;
    int64_t pz;

    (void)state;
    raw_rm("/t/cache/node");
    raw_put(p, "v1", &st);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    c = new_cache(s, p, ZKR_CACHE_NODE, &l);
    v = wait_view(&l, 1);
    assert_int_equal(v.n, 1);
    assert_string_equal(v.e[0].name, "x");
    assert_int_equal(v.e[0].len, 2);
    assert_memory_equal(v.e[0].data, "v1", 3);
    assert_true(stat_equal(&v.e[0].st, &st));
    assert_int_equal(v.e[0].st.version, 0);
    assert_int_equal(v.zxid, st.mzxid);
    w = cache_view(c, 0);
    assert_snap_equal(&w, &v);
    assert_int_equal(w.zxid, v.zxid);
    snap_free(&w);
    /* A write: its data, version + 1, its mzxid. */
    raw_set(p, "value-2", 7, &st2);
    w = wait_view(&l, 2);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.e[0].len, 7);
    assert_memory_equal(w.e[0].data, "value-2", 8);
    assert_int_equal(w.e[0].st.version, 1);
    assert_int_equal(w.e[0].st.mzxid, st2.mzxid);
    assert_int_equal(w.e[0].st.czxid, st.czxid);
    assert_int_equal(w.zxid, st2.mzxid);
    assert_true(w.zxid > v.zxid);
    snap_free(&v);
    /* Deleted: no entry, stamped with at least the delete's zxid. */
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    pz = parent_pzxid(p);
    v = wait_view(&l, 3);
    assert_int_equal(v.n, 0);
    assert_true(v.zxid >= w.zxid);
    assert_true(v.zxid >= pz);
    assert_true(pz > w.zxid);
    snap_free(&w);
    w = cache_view(c, 0);
    assert_int_equal(w.n, 0);
    assert_int_equal(w.zxid, v.zxid);
    snap_free(&w);
    /* Made again, empty. */
    raw_put(p, NULL, &st);
    w = wait_view(&l, 4);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.e[0].len, 0);
    assert_string_equal(w.e[0].data, "");
    assert_int_equal(w.e[0].st.version, 0);
    assert_int_equal(w.e[0].st.czxid, st.czxid);
    assert_int_equal(w.zxid, st.mzxid);
    assert_true(w.zxid > v.zxid);
    snap_free(&v);
    snap_free(&w);
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A missing node: a first view with no entry (reported: the first view
 * always is), stamped with its parent's pzxid; made by another client: a
 * view with it. Its parent missing too: the same. Binary data with a NUL
 * inside comes whole. */
static void test_node_missing_then_made(void **state)
{
    const char *p = "/t/cache/missing/y", *q = "/t/cache/nope/a/b";
    zkr_session_t *s = open_session(ST);
    struct vlog l, m;
    zkr_cache_t *c, *d;
    struct Stat st;
    snap_t v;

    (void)state;
    raw_rm("/t/cache/missing");
    raw_rm("/t/cache/nope");
    raw_put("/t/cache/missing", NULL, NULL);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    vlog_init(&m, ZKR_CACHE_NODE, q, 1);
    c = new_cache(s, p, ZKR_CACHE_NODE, &l);
    d = new_cache(s, q, ZKR_CACHE_NODE, &m);
    v = wait_view(&l, 1);
    assert_int_equal(v.n, 0);
    assert_int_equal(v.zxid, parent_pzxid(p));
    snap_free(&v);
    v = cache_view(c, 0);
    assert_int_equal(v.n, 0);
    snap_free(&v);
    v = wait_view(&m, 1);
    assert_int_equal(v.n, 0);
    snap_free(&v);
    assert_int_equal(
        zoo_create2(raw, p, "he\0lo", 5, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0, &st),
        ZOK);
    v = wait_view(&l, 2);
    assert_int_equal(v.n, 1);
    assert_string_equal(v.e[0].name, "y");
    assert_int_equal(v.e[0].len, 5);
    assert_memory_equal(v.e[0].data, "he\0lo", 6);
    assert_true(stat_equal(&v.e[0].st, &st));
    assert_int_equal(v.zxid, st.mzxid);
    assert_int_equal(st.czxid, st.mzxid);
    snap_free(&v);
    raw_ensure(q);
    v = wait_view(&m, 2);
    assert_int_equal(v.n, 1);
    assert_string_equal(v.e[0].name, "b");
    snap_free(&v);
    v = server_view(q, ZKR_CACHE_NODE);
    wait_last(&m, &v, zkt_scaled_ms(ST));
    snap_free(&v);
    vlog_check(&l);
    vlog_check(&m);
    zkr_cache_free(c);
    zkr_cache_free(d);
    vlog_destroy(&l);
    vlog_destroy(&m);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The root works as a node (its stat, zxid its mzxid) and as a parent:
 * its children, as names and with their data; a child made and deleted
 * is a view each time. */
static void test_root(void **state)
{
    zkr_session_t *s = open_session(ST);
    struct vlog l;
    zkr_cache_t *n, *c, *d;
    struct Stat st;
    snap_t v, want;
    int k;

    (void)state;
    raw_rm("/cache-root");
    n = new_cache(s, "/", ZKR_CACHE_NODE, NULL);
    v = cache_view(n, zkt_scaled_ms(ST));
    assert_int_equal(raw_stat("/", &st), ZOK);
    assert_int_equal(v.n, 1);
    assert_int_equal(v.e[0].st.mzxid, st.mzxid);
    assert_int_equal(v.e[0].st.czxid, st.czxid);
    assert_int_equal(v.e[0].st.version, st.version);
    assert_int_equal(v.e[0].len, st.dataLength);
    assert_int_equal(v.zxid, st.mzxid);
    snap_free(&v);
    vlog_init(&l, ZKR_CACHE_CHILDREN, "/", 1);
    c = new_cache(s, "/", ZKR_CACHE_CHILDREN, &l);
    d = new_cache(s, "/", ZKR_CACHE_CHILDREN_DATA, NULL);
    v = wait_view(&l, 1);
    want = server_view("/", ZKR_CACHE_CHILDREN);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    assert_non_null(ent(&v, "zookeeper"));
    snap_free(&v);
    snap_free(&want);
    v = cache_view(d, zkt_scaled_ms(ST));
    want = server_view("/", ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    /* A child of the root comes and goes. */
    k = vlog_count(&l);
    raw_put("/cache-root", "r", NULL);
    v = wait_view(&l, k + 1);
    want = server_view("/", ZKR_CACHE_CHILDREN);
    assert_snap_equal(&v, &want);
    assert_non_null(ent(&v, "cache-root"));
    snap_free(&v);
    snap_free(&want);
    v = synced_view(d);
    want = server_view("/", ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(ent(&v, "cache-root")->len, 1);
    snap_free(&v);
    snap_free(&want);
    assert_int_equal(zoo_delete(raw, "/cache-root", -1), ZOK);
    v = wait_view(&l, k + 2);
    assert_null(ent(&v, "cache-root"));
    want = server_view("/", ZKR_CACHE_CHILDREN);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    vlog_check(&l);
    zkr_cache_free(n);
    zkr_cache_free(c);
    zkr_cache_free(d);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The server's own nodes: /zookeeper as a node and as a parent, and
 * /zookeeper/config, as another client reads them. */
static void test_server_nodes(void **state)
{
    const char *paths[3] = {"/zookeeper", "/zookeeper", "/zookeeper/config"};
    const zkr_cache_kind_t kinds[3] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN_DATA,
                                       ZKR_CACHE_NODE};
    zkr_session_t *s = open_session(ST);

    (void)state;
    for (int i = 0; i < 3; i++) {
        zkr_cache_t *c = new_cache(s, paths[i], kinds[i], NULL);
        snap_t v = cache_view(c, zkt_scaled_ms(2 * ST)),
               want = server_view(paths[i], kinds[i]);

        if (i == 1)
            assert_non_null(ent(&want, "config"));
        assert_int_equal(v.zxid, want.zxid);
        assert_snap_equal_free(&v, &want);
        zkr_cache_free(c);
    }
    assert_int_equal(zkr_session_free(s), 0);
}

/* A path nobody may read (its ACL gives no READ): with no view yet,
 * zkr_cache_get() returns ZNOAUTH, for each kind, and nothing is told;
 * the cache tries again, and once the ACL lets it read, the view comes.
 * A cache that had a view keeps it (zkr_cache_get() returns it) when the
 * ACL is taken away and the node changes. */
static void test_unreadable_path(void **state)
{
    const char *p = "/t/cache/noread";
    const char *names[] = {"k"}, *data[] = {"1"};
    const zkr_cache_kind_t kinds[3] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN,
                                       ZKR_CACHE_CHILDREN_DATA};
    struct ACL readall = {ZOO_PERM_ALL, {"world", "anyone"}};
    struct ACL noread = {ZOO_PERM_WRITE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN |
                             ZOO_PERM_CREATE,
                         {"world", "anyone"}};
    struct ACL_vector all = {1, &readall}, none = {1, &noread};
    zkr_session_t *s = open_session(ST);
    zkr_cache_entry_t *e = NULL;
    struct vlog l[3];
    zkr_cache_t *c[3];
    int n = -1;
    snap_t v, want;

    (void)state;
    raw_dir(p, names, data, 1);
    assert_int_equal(zoo_set_acl(raw, p, -1, &none), ZOK);
    for (int i = 0; i < 3; i++) {
        vlog_init(&l[i], kinds[i], p, 1);
        c[i] = new_cache(s, p, kinds[i], &l[i]);
        assert_int_equal(
            zkr_cache_get(c[i], zkt_scaled_ms(2 * ST), &e, &n, NULL), ZNOAUTH);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(vlog_count(&l[i]), 0);
    assert_int_equal(zoo_set_acl(raw, p, -1, &all), ZOK);
    for (int i = 0; i < 3; i++) {
        /* Refused until its next try, a second on. */
        int rc = ZNOAUTH;

        for (int64_t end = zkt_now_ms() + zkt_scaled_ms(2 * ST);
             (rc == ZNOAUTH || rc == ZKR_ETIMEDOUT) && zkt_now_ms() < end;
             zkt_sleep_ms(50))
            rc = zkr_cache_get(c[i], 0, &e, &n, NULL);
        if (rc != 0)
            fail_msg("zkr_cache_get: %s", zkr_errname(rc));
        zkr_cache_entries_free(e, n);
        v = cache_view(c[i], 0);
        want = server_view(p, kinds[i]);
        assert_int_equal(v.zxid, want.zxid);
        assert_snap_equal_free(&v, &want);
        v = wait_view(&l[i], 1);
        snap_free(&v);
    }
    /* Taken away again, and the node written: the view stays. */
    v = cache_view(c[0], 0);
    assert_int_equal(zoo_set_acl(raw, p, -1, &none), ZOK);
    raw_set(p, "w", 1, NULL);
    zkt_sleep_ms(zkt_scaled_ms(500)); /* its read is refused meanwhile */
    want = cache_view(c[0], 0);
    assert_snap_equal_free(&want, &v);
    assert_int_equal(zoo_set_acl(raw, p, -1, &all), ZOK);
    for (int i = 0; i < 3; i++) {
        vlog_check(&l[i]);
        zkr_cache_free(c[i]);
        vlog_destroy(&l[i]);
    }
    assert_int_equal(zkr_session_free(s), 0);
}

/* -------------------------------------------------------- CHILDREN */

/* Names sorted, no data, zero stats, stamped with the listing's pzxid;
 * a child made or deleted is a new view; a child's data written is
 * none: the next view told after it is the next child's. A missing
 * parent: no entry, then its children once made. */
static void test_children_view(void **state)
{
    const char *p = "/t/cache/kids", *q = "/t/cache/nokids";
    const char *names[] = {"b", "a", "c"}, *data[] = {"B", "A", "C"};
    const char *abc[] = {"a", "b", "c"}, *abcd[] = {"a", "b", "c", "d"},
               *acd[] = {"a", "c", "d"}, *acde[] = {"a", "c", "d", "e"};
    zkr_session_t *s = open_session(ST);
    struct vlog l, m;
    zkr_cache_t *c, *d;
    snap_t v, want;

    (void)state;
    raw_dir(p, names, data, 3);
    raw_rm(q);
    vlog_init(&l, ZKR_CACHE_CHILDREN, p, 1);
    c = new_cache(s, p, ZKR_CACHE_CHILDREN, &l);
    v = wait_view(&l, 1);
    assert_names(&v, abc, 3);
    for (int i = 0; i < v.n; i++) {
        assert_int_equal(v.e[i].len, 0);
        assert_string_equal(v.e[i].data, "");
        assert_true(stat_zero(&v.e[i].st));
    }
    want = server_view(p, ZKR_CACHE_CHILDREN);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    raw_put("/t/cache/kids/d", "D", NULL);
    v = wait_view(&l, 2);
    assert_names(&v, abcd, 4);
    assert_int_equal(v.zxid, parent_pzxid("/t/cache/kids/d"));
    snap_free(&v);
    assert_int_equal(zoo_delete(raw, "/t/cache/kids/b", -1), ZOK);
    v = wait_view(&l, 3);
    assert_names(&v, acd, 3);
    assert_int_equal(v.zxid, parent_pzxid("/t/cache/kids/b"));
    snap_free(&v);
    /* Data written: no view; the next one is the next child's. */
    raw_set("/t/cache/kids/a", "A2", 2, NULL);
    v = synced_view(c);
    assert_names(&v, acd, 3);
    snap_free(&v);
    raw_put("/t/cache/kids/e", NULL, NULL);
    v = wait_view(&l, 4);
    assert_names(&v, acde, 4);
    snap_free(&v);
    v = synced_view(c);
    assert_names(&v, acde, 4);
    snap_free(&v);
    assert_int_equal(vlog_count(&l), 4);
    /* A missing parent: no entry; made with a child: the child. */
    vlog_init(&m, ZKR_CACHE_CHILDREN, q, 1);
    d = new_cache(s, q, ZKR_CACHE_CHILDREN, &m);
    v = wait_view(&m, 1);
    assert_int_equal(v.n, 0);
    snap_free(&v);
    raw_put("/t/cache/nokids/only", "x", NULL);
    want = server_view(q, ZKR_CACHE_CHILDREN);
    assert_int_equal(want.n, 1);
    wait_last(&m, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    vlog_check(&l);
    vlog_check(&m);
    zkr_cache_free(c);
    zkr_cache_free(d);
    vlog_destroy(&l);
    vlog_destroy(&m);
    assert_int_equal(zkr_session_free(s), 0);
}

/* --------------------------------------------------- CHILDREN_DATA */

/* Names, data and stats as the server has them, stamped with the
 * highest of the listing's pzxid and the children's mzxids; a child's
 * write, an ephemeral child made, a child deleted: a new view each. */
static void test_children_data_view(void **state)
{
    const char *p = "/t/cache/cd";
    const char *names[] = {"b", "a", "c"}, *data[] = {"22", "1", NULL};
    zkr_session_t *s = open_session(ST);
    struct vlog l;
    zkr_cache_t *c;
    struct Stat st;
    snap_t v, want;

    (void)state;
    raw_dir(p, names, data, 3);
    assert_int_equal(zoo_create(raw, "/t/cache/cd/n", "x\0y", 3,
                                &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                     ZOK);
    vlog_init(&l, ZKR_CACHE_CHILDREN_DATA, p, 1);
    c = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, &l);
    v = wait_view(&l, 1);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    assert_int_equal(v.n, 4);
    assert_int_equal(ent(&v, "a")->len, 1);
    assert_int_equal(ent(&v, "c")->len, 0);
    assert_memory_equal(ent(&v, "n")->data, "x\0y", 4);
    snap_free(&v);
    snap_free(&want);
    /* A child's data. */
    raw_set("/t/cache/cd/b", "333", 3, &st);
    v = wait_view(&l, 2);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(ent(&v, "b")->st.version, 1);
    assert_memory_equal(ent(&v, "b")->data, "333", 4);
    assert_int_equal(v.zxid, st.mzxid);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    /* An ephemeral child of another client. */
    assert_int_equal(zoo_create(raw, "/t/cache/cd/e", "eph", 3,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    v = wait_view(&l, 3);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(ent(&v, "e")->st.ephemeralOwner,
                     zoo_client_id(raw)->client_id);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    /* A child deleted: stamped with the delete's zxid. */
    assert_int_equal(zoo_delete(raw, "/t/cache/cd/a", -1), ZOK);
    v = wait_view(&l, 4);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_null(ent(&v, "a"));
    assert_int_equal(v.zxid, parent_pzxid("/t/cache/cd/a"));
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    /* Deleted, then written: the next view is the write's. */
    assert_int_equal(zoo_delete(raw, "/t/cache/cd/e", -1), ZOK);
    raw_set("/t/cache/cd/c", "cc", 2, NULL);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    wait_last(&l, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A child no one may read (world may write, delete, administer, create;
 * not read): listed, with no data and a zero stat, beside a readable
 * one; the readable one's write is a view, the unreadable one's delete
 * another. */
static void test_children_data_unreadable(void **state)
{
    const char *p = "/t/cache/acl";
    const char *names[] = {"open"}, *data[] = {"x"};
    struct ACL noread = {ZOO_PERM_WRITE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN |
                             ZOO_PERM_CREATE,
                         {"world", "anyone"}};
    struct ACL_vector acl = {1, &noread};
    zkr_session_t *s = open_session(ST);
    struct vlog l;
    zkr_cache_t *c;
    snap_t v, want;
    char buf[16];
    int len = sizeof(buf);

    (void)state;
    raw_dir(p, names, data, 1);
    assert_int_equal(
        zoo_create(raw, "/t/cache/acl/secret", "hidden", 6, &acl, 0, NULL, 0),
        ZOK);
    /* Nobody may read it: not the client that made it either. */
    assert_int_equal(zoo_get(raw, "/t/cache/acl/secret", 0, buf, &len, NULL),
                     ZNOAUTH);
    vlog_init(&l, ZKR_CACHE_CHILDREN_DATA, p, 1);
    c = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, &l);
    v = wait_view(&l, 1);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.e[1].name, "secret");
    assert_int_equal(v.e[1].len, 0);
    assert_string_equal(v.e[1].data, "");
    assert_true(stat_zero(&v.e[1].st));
    assert_memory_equal(ent(&v, "open")->data, "x", 2);
    assert_int_equal(ent(&v, "open")->st.version, 0);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    raw_set("/t/cache/acl/open", "y", 1, NULL);
    v = wait_view(&l, 2);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_true(stat_zero(&ent(&v, "secret")->st));
    snap_free(&v);
    snap_free(&want);
    assert_int_equal(zoo_delete(raw, "/t/cache/acl/secret", -1), ZOK);
    v = wait_view(&l, 3);
    assert_int_equal(v.n, 1);
    assert_null(ent(&v, "secret"));
    snap_free(&v);
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* -------------------------------------------------------- listener */

/* The descriptor: one, made at the first call; readable once the first
 * view is there, cleared by zkr_cache_get(), readable again after a
 * change and until the view is read; several changes, one read of the
 * last. A get with timeout 0 right after the start returns a view or
 * ZKR_ETIMEDOUT; with -1 it waits for the first. */
static void test_fd(void **state)
{
    const char *p = "/t/cache/fd/x", *q = "/t/cache/fd/fresh";
    zkr_session_t *s = open_session(ST);
    zkr_cache_t *c, *d;
    zkr_cache_entry_t *e = NULL;
    int fd, n = -1, rc;
    runner_t r;
    snap_t v;

    (void)state;
    raw_rm("/t/cache/fd");
    raw_put(p, "v1", NULL);
    raw_put(q, "f", NULL);
    c = new_cache(s, p, ZKR_CACHE_NODE, NULL);
    fd = zkr_cache_fd(c);
    assert_true(fd >= 0);
    assert_int_equal(zkr_cache_fd(c), fd);
    assert_true(readable(fd, zkt_scaled_ms(2 * ST)));
    assert_true(readable(fd, 0)); /* until read */
    v = cache_view(c, 0);
    assert_memory_equal(v.e[0].data, "v1", 3);
    snap_free(&v);
    assert_false(readable(fd, 0));
    raw_set(p, "v2", 2, NULL);
    assert_true(readable(fd, zkt_scaled_ms(2 * ST)));
    assert_true(readable(fd, 0));
    v = cache_view(c, 0);
    assert_memory_equal(v.e[0].data, "v2", 3);
    assert_int_equal(v.e[0].st.version, 1);
    snap_free(&v);
    assert_false(readable(fd, 0));
    /* Three writes; a read of the last clears it. */
    raw_set(p, "v3", 2, NULL);
    raw_set(p, "v4", 2, NULL);
    raw_set(p, "v5", 2, NULL);
    for (int64_t end = zkt_now_ms() + zkt_scaled_ms(2 * ST);;) {
        assert_true(readable(fd, zkt_scaled_ms(2 * ST)));
        v = cache_view(c, 0);
        if (v.e[0].st.version == 4) {
            assert_memory_equal(v.e[0].data, "v5", 3);
            snap_free(&v);
            break;
        }
        snap_free(&v);
        assert_true(zkt_now_ms() < end);
    }
    assert_false(readable(fd, 0));
    /* Timeout 0 before the first view: that view or ZKR_ETIMEDOUT. */
    d = new_cache(s, q, ZKR_CACHE_NODE, NULL);
    rc = zkr_cache_get(d, 0, &e, &n, NULL);
    assert_true(rc == 0 || rc == ZKR_ETIMEDOUT);
    if (rc == 0) {
        assert_int_equal(n, 1);
        zkr_cache_entries_free(e, n);
    }
    zkr_cache_free(d);
    d = new_cache(s, q, ZKR_CACHE_NODE, NULL);
    start(&r, d, 0, -1);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(r.n, 1);
    zkr_cache_free(d);
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* No view can come (the connection is a black hole): a get with timeout
 * 0 or 300 ms returns ZKR_ETIMEDOUT (after the timeout), the descriptor
 * is not readable, a sync times out; a get with -1 waits, and returns
 * the first view once the connection is back, which the listener hears
 * too. */
static void test_no_view_yet(void **state)
{
    const char *p = "/t/cache/hole";
    zkr_session_t *s = open_proxied(ST);
    zkr_cache_entry_t *e = NULL;
    struct vlog l;
    zkr_cache_t *c;
    int n = -1;
    int64_t t0;
    runner_t r;
    snap_t v;

    (void)state;
    raw_rm(p);
    raw_put(p, "h", NULL);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    c = new_cache(s, p, ZKR_CACHE_NODE, &l);
    assert_int_equal(zkr_cache_get(c, 0, &e, &n, NULL), ZKR_ETIMEDOUT);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_cache_get(c, 300, &e, &n, NULL), ZKR_ETIMEDOUT);
    assert_true(zkt_now_ms() - t0 >= 300);
    assert_false(readable(zkr_cache_fd(c), 0));
    t0 = zkt_now_ms();
    assert_int_equal(zkr_cache_sync(c, 300), ZKR_ETIMEDOUT);
    assert_true(zkt_now_ms() - t0 >= 300);
    start(&r, c, 0, -1);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(atomic_load(&r.done));
    assert_int_equal(vlog_count(&l), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(r.n, 1);
    v = wait_view(&l, 1);
    assert_memory_equal(v.e[0].data, "h", 2);
    snap_free(&v);
    assert_false(readable(zkr_cache_fd(c), 0)); /* read by the get */
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The cache's lag (zkr_cache_lag_seconds), in ms. */
static int64_t lag_ms(zkr_session_t *s, const char *path)
{
    double v = -1;

    assert_int_equal(
        zkr_metrics_value(s, "zkr_cache_lag_seconds", "cache", path, &v), 0);
    return (int64_t)(v * 1000 + 0.5);
}

/* The lag: 0 on a current view; through a cut (reset, then a black hole
 * for new connections) it is at least the time since the cut (the last answered
 * heartbeat was sent before it) and at most that plus a quarter of the session
 * timeout (heartbeats go every twelfth: the session's proof time, at least a
 * quarter behind the last answer, would say more); 0 again once a view is read
 * after it. */
static void test_lag_through_cut(void **state)
{
    const char *p = "/t/cache/lagcut";
    /* Twice the usual timeout: the slow reconnection below must come
     * well before the safe deadline (0.9 T after the proof time). */
    zkr_session_t *s = open_proxied(2 * ST);
    zkr_cache_t *c;
    int64_t t0, t1, el, lag, T;
    double tv;

    (void)state;
    raw_rm(p);
    raw_put(p, "a", NULL);
    c = new_cache(s, p, ZKR_CACHE_NODE, NULL);
    assert_true(ZKT_WAIT_UNTIL(lag_ms(s, p) == 0, zkt_scaled_ms(2 * ST)));
    assert_int_equal(
        zkr_metrics_value(s, "zkr_session_timeout_seconds", NULL, NULL, &tv),
        0);
    T = (int64_t)(tv * 1000);
    /* Heartbeats answered for a while (the proof time trails them). */
    zkt_sleep_ms(T / 2);
    t0 = zkt_now_ms();
    /* Cut at once, and no new connection gets through. */
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    t1 = zkt_now_ms(); /* no heartbeat sent after this is answered */
    assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_state(s) == ZKR_STATE_SUSPENDED,
                               zkt_scaled_ms(2 * ST)));
    el = zkt_now_ms() - t1; /* before the read: a lower bound */
    lag = lag_ms(s, p);
    print_message("# cut %" PRId64 " ms ago, lag %" PRId64 " ms (T %" PRId64
                  ")\n",
                  el, lag, T);
    assert_true(lag + 1 >= el);
    el = zkt_now_ms() - t0; /* after it: an upper bound */
    assert_true(lag <= el + T / 4);
    /* Back, slowly (1 s each way): once RECONNECTED, the view's read is
     * still on its way, and what changed while cut is not in it: the lag
     * still counts from before the cut, not from the reconnection. */
    assert_int_equal(zkt_proxy_cmd(proxy, "pass-delay 1000"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_state(s) == ZKR_STATE_RECONNECTED,
                               zkt_scaled_ms(3 * ST)));
    el = zkt_now_ms() - t1;
    lag = lag_ms(s, p);
    print_message("# reconnected %" PRId64 " ms after the cut, lag %" PRId64
                  " ms\n",
                  el, lag);
    assert_true(lag + 1 >= el);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_RECONNECTED);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(lag_ms(s, p) == 0, zkt_scaled_ms(3 * ST)));
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* What the listener's blocking calls returned. */
static struct {
    zkr_cache_t *other; /* a cache with no view (its connection cut) */
    atomic_int done;
    int sync_t, sync_inf, get_other_t, get_other_inf, get_other_0, get_self;
} dl;

static void deadlk_hook(zkr_cache_t *c, struct vlog *l, int call)
{
    zkr_cache_entry_t *e = NULL;
    int n = 0;

    (void)l;
    if (call != 1)
        return;
    dl.sync_t = zkr_cache_sync(c, zkt_scaled_ms(ST));
    if (dl.sync_t == ZKR_EDEADLK) /* else it might wait for ever */
        dl.sync_inf = zkr_cache_sync(c, -1);
    dl.get_other_t = zkr_cache_get(dl.other, zkt_scaled_ms(ST), &e, &n, NULL);
    if (dl.get_other_t == ZKR_EDEADLK)
        dl.get_other_inf = zkr_cache_get(dl.other, -1, &e, &n, NULL);
    dl.get_other_0 = zkr_cache_get(dl.other, 0, &e, &n, NULL);
    /* Its own view is there: no wait. */
    dl.get_self = zkr_cache_get(c, zkt_scaled_ms(ST), &e, &n, NULL);
    if (dl.get_self == 0)
        zkr_cache_entries_free(e, n);
    atomic_store(&dl.done, 1);
}

/* Blocking calls from a listener: a sync, a get that would wait for a
 * first view (timeout or -1) return ZKR_EDEADLK; a get with 0 does not
 * wait (ZKR_ETIMEDOUT), nor one of a view that is there (0). */
static void test_listener_deadlk(void **state)
{
    const char *p = "/t/cache/deadlk/x", *q = "/t/cache/deadlk/y";
    zkr_session_t *s = open_session(ST), *s2 = open_proxied(ST);
    struct vlog l;
    zkr_cache_t *c;

    (void)state;
    raw_rm("/t/cache/deadlk");
    raw_put(p, "x", NULL);
    raw_put(q, "y", NULL);
    memset(&dl, 0, sizeof(dl));
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    dl.other = new_cache(s2, q, ZKR_CACHE_NODE, NULL);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    l.hook = deadlk_hook;
    c = new_cache(s, p, ZKR_CACHE_NODE, &l);
    if (!ZKT_WAIT_UNTIL(atomic_load(&dl.done), zkt_scaled_ms(2 * ST)))
        fail_msg("the listener did not end (a blocking call waits)");
    assert_int_equal(dl.sync_t, ZKR_EDEADLK);
    assert_int_equal(dl.sync_inf, ZKR_EDEADLK);
    assert_int_equal(dl.get_other_t, ZKR_EDEADLK);
    assert_int_equal(dl.get_other_inf, ZKR_EDEADLK);
    assert_int_equal(dl.get_other_0, ZKR_ETIMEDOUT);
    assert_int_equal(dl.get_self, 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_cache_free(dl.other);
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* A listener that frees another cache (data: that cache) on its first
 * call. */
static void free_other_hook(zkr_cache_t *c, struct vlog *l, int call)
{
    struct vlog *other = l->hook_data;

    (void)c;
    if (call == 1 && other != NULL) {
        zkr_cache_free(other->hook_data);
        atomic_store(&other->freed, 1);
    }
}

/* A listener frees its own cache (at its first call; at its fifth while
 * writes come fast): it is not called again, its watches go, and the
 * session may then be freed. A listener frees another cache of the
 * session: that one is not called again. */
static void test_free_from_listener(void **state)
{
    const char *p = "/t/cache/selffree/x", *q = "/t/cache/selffree/y";
    zkr_session_t *s = open_session(ST);
    struct vlog l, m, o, k;
    zkr_cache_t *c, *oc;
    char val[32];
    snap_t want;

    (void)state;
    raw_rm("/t/cache/selffree");
    raw_put(p, "0", NULL);
    raw_put(q, "0", NULL);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    l.free_at = 1;
    (void)new_cache(s, p, ZKR_CACHE_NODE, &l);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&l.freed), zkt_scaled_ms(2 * ST)));
    /* Another cache of the path sees a write; the freed one is not told. */
    vlog_init(&m, ZKR_CACHE_NODE, p, 1);
    c = new_cache(s, p, ZKR_CACHE_NODE, &m);
    want = wait_view(&m, 1);
    snap_free(&want);
    raw_set(p, "1", 1, NULL);
    want = server_view(p, ZKR_CACHE_NODE);
    wait_last(&m, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(vlog_count(&l), 1);
    zkr_cache_free(c);
    no_watch_left(zkr_session_id(s), p);
    vlog_check(&m);
    vlog_destroy(&m);
    /* Freed at its fifth view, while the writes go on. */
    vlog_destroy(&l);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    l.free_at = 5;
    (void)new_cache(s, p, ZKR_CACHE_NODE, &l);
    want = wait_view(&l, 1);
    snap_free(&want);
    for (int64_t i = 2, end = zkt_now_ms() + zkt_scaled_ms(2 * ST);
         !atomic_load(&l.freed); i++) {
        snprintf(val, sizeof(val), "%lld", (long long)i);
        raw_set(p, val, (int)strlen(val), NULL);
        assert_true(zkt_now_ms() < end);
    }
    for (int i = 0; i < 20; i++)
        raw_set(p, "after", 5, NULL);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&l.freed), zkt_scaled_ms(2 * ST)));
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(vlog_count(&l), 5);
    vlog_check(&l);
    no_watch_left(zkr_session_id(s), p);
    /* One cache's listener frees another's cache. */
    vlog_init(&o, ZKR_CACHE_NODE, q, 1);
    oc = new_cache(s, q, ZKR_CACHE_NODE, &o);
    want = wait_view(&o, 1);
    snap_free(&want);
    o.hook_data = oc;
    vlog_init(&k, ZKR_CACHE_NODE, p, 1);
    k.hook = free_other_hook;
    k.hook_data = &o;
    c = new_cache(s, p, ZKR_CACHE_NODE, &k);
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&o.freed), zkt_scaled_ms(2 * ST)));
    raw_set(q, "1", 1, NULL);
    raw_set(p, "x", 1, NULL);
    want = server_view(p, ZKR_CACHE_NODE);
    wait_last(&k, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(vlog_count(&o), 1);
    vlog_check(&o);
    vlog_check(&k);
    zkr_cache_free(c);
    vlog_destroy(&o);
    vlog_destroy(&k);
    vlog_destroy(&l);
    no_watch_left(zkr_session_id(s), q);
    assert_int_equal(zkr_session_free(s), 0);
}

/* -------------------------------------------------------------- sync */

static int own_write(zhandle_t *zh, void *arg)
{
    return zoo_set(zh, arg, "own", 3, -1);
}

/* Read your writes: another client's write answered, a sync, and the
 * view has it (the node's data and version; the children's names, data
 * and versions), a hundred times over; the same for a write of the
 * cache's own session. */
static void test_sync_read_your_writes(void **state)
{
    const char *p = "/t/cache/ryw", *np = "/t/cache/ryw-node";
    zkr_session_t *s = open_session(ST);
    zkr_cache_t *cd, *nd, *ch;
    char path[64], val[32];
    struct Stat st;
    snap_t v, want;

    (void)state;
    raw_rm(p);
    raw_rm(np);
    raw_put(p, NULL, NULL);
    raw_put("/t/cache/ryw/k0", "0", NULL);
    raw_put(np, "0", NULL);
    cd = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, NULL);
    ch = new_cache(s, p, ZKR_CACHE_CHILDREN, NULL);
    nd = new_cache(s, np, ZKR_CACHE_NODE, NULL);
    for (int i = 1; i <= 100; i++) {
        snprintf(val, sizeof(val), "w%d", i);
        if (i % 10 == 0) {
            snprintf(path, sizeof(path), "%s/k%d", p, i);
            raw_put(path, val, NULL);
        } else {
            raw_set("/t/cache/ryw/k0", val, (int)strlen(val), NULL);
        }
        raw_set(np, val, (int)strlen(val), &st);
        v = synced_view(cd);
        want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
        assert_snap_equal(&v, &want);
        assert_int_equal(v.zxid, want.zxid);
        snap_free(&v);
        snap_free(&want);
        v = synced_view(nd);
        assert_int_equal(v.n, 1);
        assert_int_equal(v.e[0].st.version, st.version);
        assert_memory_equal(v.e[0].data, val, strlen(val) + 1);
        assert_int_equal(v.zxid, st.mzxid);
        snap_free(&v);
        if (i % 10 == 0) {
            v = synced_view(ch);
            want = server_view(p, ZKR_CACHE_CHILDREN);
            assert_snap_equal(&v, &want);
            assert_int_equal(v.zxid, want.zxid);
            snap_free(&v);
            snap_free(&want);
        }
    }
    /* The session's own write. */
    assert_int_equal(zkr_session_with_handle(s, own_write, (void *)np), ZOK);
    v = synced_view(nd);
    assert_memory_equal(v.e[0].data, "own", 4);
    snap_free(&v);
    zkr_cache_free(cd);
    zkr_cache_free(ch);
    zkr_cache_free(nd);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A session that is not re-created expires before the first view (its
 * connection a black hole meanwhile): a get waiting for the first view
 * returns ZKR_ELOST, and so do a get with timeout 0 and a sync. */
static void test_lost_before_first_view(void **state)
{
    const char *p = "/t/cache/lostfirst";
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_cache_entry_t *e = NULL;
    zkr_cache_t *c;
    runner_t r;
    int n = -1;

    (void)state;
    raw_rm(p);
    raw_put(p, "l", NULL);
    o.no_reconnect = 1;
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(zkr_session_open(&s, zkt_proxy_hosts(proxy), ST, &o), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    c = new_cache(s, p, ZKR_CACHE_NODE, NULL);
    start(&r, c, 0, -1);
    expire(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(join(&r, zkt_scaled_ms(3 * ST)), ZKR_ELOST);
    assert_int_equal(zkr_session_state(s), ZKR_STATE_LOST);
    assert_int_equal(zkr_cache_get(c, 0, &e, &n, NULL), ZKR_ELOST);
    assert_int_equal(zkr_cache_sync(c, zkt_scaled_ms(ST)), ZKR_ELOST);
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Writes that fire no data watch still change a node's stat: a child
 * made below it (numChildren, cversion, pzxid), its ACL set (aversion).
 * After a sync they are in the view: its stat is the server's. */
static void test_node_stat_synced(void **state)
{
    const char *p = "/t/cache/nstat";
    struct ACL readall = {ZOO_PERM_ALL, {"world", "anyone"}};
    struct ACL_vector acl = {1, &readall};
    zkr_session_t *s = open_session(ST);
    zkr_cache_t *c;
    snap_t v, want;

    (void)state;
    raw_rm(p);
    raw_put(p, "n", NULL);
    c = new_cache(s, p, ZKR_CACHE_NODE, NULL);
    v = cache_view(c, zkt_scaled_ms(2 * ST));
    snap_free(&v);
    raw_put("/t/cache/nstat/child", NULL, NULL);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_NODE);
    assert_int_equal(want.e[0].st.numChildren, 1);
    assert_snap_equal_free(&v, &want);
    assert_int_equal(zoo_set_acl(raw, p, -1, &acl), ZOK);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_NODE);
    assert_int_equal(want.e[0].st.aversion, 1);
    assert_snap_equal_free(&v, &want);
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The same for the children's stats (a grandchild made, an ACL set),
 * and a child whose ACL is set so that nobody may read it: after a sync
 * it shows no data and a zero stat, as a child we may not read does;
 * made readable again, its data and stat again. */
static void test_children_data_stats_synced(void **state)
{
    const char *p = "/t/cache/cstat";
    const char *names[] = {"a", "b"}, *data[] = {"1", "2"};
    struct ACL readall = {ZOO_PERM_ALL, {"world", "anyone"}};
    struct ACL noread = {ZOO_PERM_WRITE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN |
                             ZOO_PERM_CREATE,
                         {"world", "anyone"}};
    struct ACL_vector all = {1, &readall}, none = {1, &noread};
    zkr_session_t *s = open_session(ST);
    zkr_cache_t *c;
    snap_t v, want;

    (void)state;
    raw_dir(p, names, data, 2);
    c = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, NULL);
    v = cache_view(c, zkt_scaled_ms(2 * ST));
    snap_free(&v);
    raw_put("/t/cache/cstat/a/g", NULL, NULL);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_int_equal(ent(&want, "a")->st.numChildren, 1);
    assert_snap_equal_free(&v, &want);
    /* Nobody may read b now. */
    assert_int_equal(zoo_set_acl(raw, "/t/cache/cstat/b", -1, &none), ZOK);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_true(stat_zero(&ent(&want, "b")->st));
    assert_snap_equal_free(&v, &want);
    assert_int_equal(zoo_set_acl(raw, "/t/cache/cstat/b", -1, &all), ZOK);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_int_equal(ent(&want, "b")->st.aversion, 2);
    assert_snap_equal_free(&v, &want);
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A cache freed and another made at once on the same path and session,
 * a few times over: the new one's watches are not taken away by the
 * removal of the old one's; it hears a write without a sync. */
static void test_free_then_new(void **state)
{
    const char *p = "/t/cache/renew";
    const char *names[] = {"a"}, *data[] = {"0"};
    const zkr_cache_kind_t kinds[3] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN,
                                       ZKR_CACHE_CHILDREN_DATA};
    zkr_session_t *s = open_session(ST);
    char val[16], child[64];

    (void)state;
    raw_dir(p, names, data, 1);
    for (int i = 0; i < 9; i++) {
        zkr_cache_kind_t k = kinds[i % 3];
        zkr_cache_t *old = new_cache(s, p, k, NULL), *c;
        struct vlog l;
        snap_t v, want;

        v = cache_view(old, zkt_scaled_ms(2 * ST)); /* its watches stand */
        snap_free(&v);
        vlog_init(&l, k, p, 0);
        zkr_cache_free(old);
        c = new_cache(s, p, k, &l);
        v = wait_view(&l, 1);
        snap_free(&v);
        snprintf(val, sizeof(val), "v%d", i);
        if (k == ZKR_CACHE_NODE) {
            raw_set(p, val, (int)strlen(val), NULL);
        } else if (k == ZKR_CACHE_CHILDREN) {
            snprintf(child, sizeof(child), "%s/n%d", p, i);
            raw_put(child, val, NULL);
        } else {
            raw_set("/t/cache/renew/a", val, (int)strlen(val), NULL);
        }
        want = server_view(p, k);
        wait_last(&l, &want, zkt_scaled_ms(2 * ST));
        snap_free(&want);
        vlog_check(&l);
        zkr_cache_free(c);
        vlog_destroy(&l);
    }
    assert_int_equal(zkr_session_free(s), 0);
}

/* A session that is not re-created, expired: the sync returns ZKR_ELOST
 * and the last view stays. */
static void test_sync_lost(void **state)
{
    const char *p = "/t/cache/lost";
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_cache_t *c;
    snap_t v, w;

    (void)state;
    raw_rm(p);
    raw_put(p, "l", NULL);
    o.no_reconnect = 1;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), ST, &o), 0);
    c = new_cache(s, p, ZKR_CACHE_NODE, NULL);
    v = cache_view(c, zkt_scaled_ms(2 * ST));
    expire(s);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_state(s) == ZKR_STATE_LOST,
                               zkt_scaled_ms(3 * ST)));
    raw_set(p, "m", 1, NULL);
    assert_int_equal(zkr_cache_sync(c, zkt_scaled_ms(ST)), ZKR_ELOST);
    w = cache_view(c, 0);
    assert_snap_equal(&w, &v);
    snap_free(&v);
    snap_free(&w);
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------------------------ faults */

/* The connection cut (a black hole, then a reset; the same session):
 * what changed meanwhile is read again; the session expired: everything
 * is read again on the new one, with its watches. */
static void test_cut_and_expiry(void **state)
{
    const char *p = "/t/cache/cut";
    const char *names[] = {"a", "b"}, *data[] = {"1", "2"};
    zkr_session_t *s = open_proxied(ST);
    struct vlog l;
    zkr_cache_t *c;
    int64_t sid;
    snap_t v, want;

    (void)state;
    raw_dir(p, names, data, 2);
    vlog_init(&l, ZKR_CACHE_CHILDREN_DATA, p, 1);
    c = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, &l);
    v = wait_view(&l, 1);
    snap_free(&v);
    sid = zkr_session_id(s);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    raw_set("/t/cache/cut/a", "1b", 2, NULL);
    raw_put("/t/cache/cut/c", "3", NULL);
    zkt_sleep_ms(ST / 5);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    wait_last(&l, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    assert_int_equal(zkr_session_id(s), sid);
    assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
    assert_int_equal(zoo_delete(raw, "/t/cache/cut/b", -1), ZOK);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    wait_last(&l, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    assert_int_equal(zkr_session_id(s), sid);
    /* Expired: read again, watched again on the new session. */
    expire(s);
    raw_set("/t/cache/cut/c", "3b", 2, NULL);
    raw_put("/t/cache/cut/d", "4", NULL);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_id(s) != sid && zkr_session_id(s) != 0,
                       zkt_scaled_ms(3 * ST)));
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    wait_last(&l, &want, zkt_scaled_ms(3 * ST));
    snap_free(&want);
    assert_true(
        ZKT_WAIT_UNTIL(session_watches(zkr_session_id(s), "/t/cache/cut/a") &&
                           session_watches(zkr_session_id(s), "/t/cache/cut/d"),
                       zkt_scaled_ms(ST)));
    raw_set("/t/cache/cut/a", "1c", 2, NULL);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    wait_last(&l, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    v = synced_view(c);
    want = server_view(p, ZKR_CACHE_CHILDREN_DATA);
    assert_snap_equal(&v, &want);
    assert_int_equal(v.zxid, want.zxid);
    snap_free(&v);
    snap_free(&want);
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The storm's writer: another client (its own session, direct to the
 * server) making, writing and deleting the directory's children, half of
 * its changes on one of them, as fast as it gets answers. */
enum { STORM_KIDS = 24, STORM_LEG = 1000 };

struct storm {
    zhandle_t *zh;
    const char *dir;
    unsigned seed;
    atomic_int stop;
    atomic_long ops;
    atomic_int bad_rc; /* an answer none of the expected (0: none) */
    pthread_t t;
};

static void *storm_main(void *arg)
{
    struct storm *w = arg;
    static const char az[] = "abcdefghijklmnopqrstuvwxyz";
    char path[128], val[64];

    while (!atomic_load(&w->stop)) {
        long i = atomic_load(&w->ops);
        int r = rand_r(&w->seed) % 100, rc;
        int k = r < 50 ? 0 : 1 + rand_r(&w->seed) % (STORM_KIDS - 1);
        int len = snprintf(val, sizeof(val), "%ld:%.*s", i,
                           rand_r(&w->seed) % 24, az);

        snprintf(path, sizeof(path), "%s/k%02d", w->dir, k);
        r = k == 0 ? r * 2 : (r - 50) * 2; /* 0..99 within each half */
        if (r < 70)
            rc = zoo_set(w->zh, path, val, len, -1);
        else if (r < 85)
            rc = zoo_create(w->zh, path, val, len, &ZOO_OPEN_ACL_UNSAFE, 0,
                            NULL, 0);
        else
            rc = zoo_delete(w->zh, path, -1);
        if (rc != ZOK && rc != ZNONODE && rc != ZNODEEXISTS)
            atomic_store(&w->bad_rc, rc);
        atomic_fetch_add(&w->ops, 1);
    }
    return NULL;
}

/* The writer of a storm that failed midway stops with its test. */
static struct storm *storm_running;

static int storm_teardown(void **state)
{
    (void)state;
    if (storm_running != NULL) {
        atomic_store(&storm_running->stop, 1);
        pthread_join(storm_running->t, NULL);
        zookeeper_close(storm_running->zh);
        storm_running = NULL;
    }
    return 0;
}

/* Waits until the writer has made n more changes. */
static void storm_leg(struct storm *w, long n)
{
    long want = atomic_load(&w->ops) + n;

    if (!ZKT_WAIT_UNTIL(atomic_load(&w->ops) >= want, zkt_scaled_ms(6 * ST)))
        fail_msg("the writer made %ld changes, %ld expected",
                 atomic_load(&w->ops), want);
}

/* Once the session is back: connected. */
static void connected(zkr_session_t *s)
{
    assert_int_equal(zkr_session_wait_connected(s, zkt_scaled_ms(3 * ST)), 0);
}

/* The acceptance test: another client changes the directory's children
 * thousands of times (creates, writes, deletes), half of them one child,
 * while the caches' connection is cut and restored a few times (a reset,
 * a black hole) and their session expires once. A CHILDREN_DATA and a
 * CHILDREN cache of the directory and a NODE cache of the busy child:
 * their listeners never go back in zxid nor repeat a view; once the
 * writer stops and each cache has synced, its view is the server's
 * (names, data, stats), stamped with at least the server's zxid for it
 * (exactly, for the children's views), and the last view told is it. */
static void test_storm_with_faults(void **state)
{
    const char *p = "/t/cache/storm", *busy = "/t/cache/storm/k00";
    const zkr_cache_kind_t kinds[3] = {ZKR_CACHE_CHILDREN_DATA,
                                       ZKR_CACHE_CHILDREN, ZKR_CACHE_NODE};
    const char *paths[3] = {p, p, busy};
    /* The writer and the listeners' logs may outlive a failed test. */
    static struct storm w;
    static struct vlog l[3];
    zkr_session_t *s = open_proxied(ST);
    zkr_cache_t *c[3];
    int64_t sid;
    snap_t v, want;

    (void)state;
    raw_rm(p);
    raw_put(p, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        vlog_init(&l[i], kinds[i], paths[i], 0);
        c[i] = new_cache(s, paths[i], kinds[i], &l[i]);
        v = wait_view(&l[i], 1);
        snap_free(&v);
    }
    memset(&w, 0, sizeof(w));
    w.dir = p;
    w.seed = (unsigned)time(NULL);
    print_message("# storm seed %u\n", w.seed);
    w.zh = zkt_connect(zkt_server_hosts(server), 30000);
    assert_non_null(w.zh);
    assert_int_equal(pthread_create(&w.t, NULL, storm_main, &w), 0);
    storm_running = &w;
    storm_leg(&w, STORM_LEG);
    /* Cut: a reset, a black hole (then its connection is reset), a reset. */
    for (int cut = 0; cut < 3; cut++) {
        sid = zkr_session_id(s);
        if (cut == 1) {
            assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
            zkt_sleep_ms(ST / 3);
            assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
        } else {
            assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
        }
        storm_leg(&w, STORM_LEG / 2);
        connected(s);
        if (zkr_session_id(s) != sid) /* not the point: said, not failed */
            print_message("# cut %d: a new session\n", cut);
        storm_leg(&w, STORM_LEG / 2);
    }
    /* Expired once. */
    sid = zkr_session_id(s);
    expire(s);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_id(s) != sid && zkr_session_id(s) != 0,
                       zkt_scaled_ms(3 * ST)));
    connected(s);
    storm_leg(&w, STORM_LEG);
    storm_teardown(NULL);
    print_message("# %ld changes; views told: %d, %d, %d\n",
                  atomic_load(&w.ops), vlog_count(&l[0]), vlog_count(&l[1]),
                  vlog_count(&l[2]));
    assert_int_equal(atomic_load(&w.bad_rc), 0);
    for (int i = 0; i < 3; i++) {
        v = synced_view(c[i]);
        want = server_view(paths[i], kinds[i]);
        assert_snap_equal(&v, &want);
        if (kinds[i] == ZKR_CACHE_NODE)
            assert_true(v.zxid >= want.zxid);
        else
            assert_int_equal(v.zxid, want.zxid);
        wait_last(&l[i], &want, zkt_scaled_ms(2 * ST));
        assert_true(vlog_count(&l[i]) > 10);
        vlog_check(&l[i]);
        snap_free(&v);
        snap_free(&want);
        zkr_cache_free(c[i]);
        vlog_destroy(&l[i]);
    }
    assert_int_equal(zkr_session_free(s), 0);
}

/* ----------------------------------------------------------- watches */

/* Each kind: once freed, its session watches neither the path nor a
 * child, and the server's watch count is back where it was. */
static void test_free_removes_watches(void **state)
{
    const char *p = "/t/cache/w";
    const char *names[] = {"a", "b"}, *data[] = {"1", "2"};
    const zkr_cache_kind_t kinds[3] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN,
                                       ZKR_CACHE_CHILDREN_DATA};
    long w0;

    (void)state;
    raw_dir(p, names, data, 2);
    w0 = all_watches();
    for (int i = 0; i < 3; i++) {
        zkr_session_t *s = open_session(ST);
        zkr_cache_t *c = new_cache(s, p, kinds[i], NULL);
        int64_t sid = zkr_session_id(s);
        snap_t v = cache_view(c, zkt_scaled_ms(2 * ST));

        snap_free(&v);
        assert_true(ZKT_WAIT_UNTIL(all_watches() > w0, zkt_scaled_ms(ST)));
        if (kinds[i] == ZKR_CACHE_NODE)
            assert_true(session_watches(sid, p));
        if (kinds[i] == ZKR_CACHE_CHILDREN_DATA)
            assert_true(ZKT_WAIT_UNTIL(session_watches(sid, "/t/cache/w/a") &&
                                           session_watches(sid, "/t/cache/w/b"),
                                       zkt_scaled_ms(ST)));
        zkr_cache_free(c);
        no_watch_left(sid, p);
        no_watch_left(sid, "/t/cache/w/a");
        no_watch_left(sid, "/t/cache/w/b");
        watches_back_to(w0);
        assert_int_equal(zkr_session_free(s), 0);
    }
}

/* Two caches of one session on one path (each kind, and a node's cache
 * beside a children's): one freed, the other's watches stay (of the same
 * kind: the server holds as many as before) and it keeps hearing changes
 * without a sync; once both are freed, none is left. */
static void test_shared_watches(void **state)
{
    const char *p = "/t/cache/shared";
    const char *names[] = {"a", "b"}, *data[] = {"1", "2"};
    const zkr_cache_kind_t first[4] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN,
                                       ZKR_CACHE_CHILDREN_DATA, ZKR_CACHE_NODE};
    const zkr_cache_kind_t second[4] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN,
                                        ZKR_CACHE_CHILDREN_DATA,
                                        ZKR_CACHE_CHILDREN};
    long w0;

    (void)state;
    raw_dir(p, names, data, 2);
    w0 = all_watches();
    for (int i = 0; i < 4; i++) {
        zkr_session_t *s = open_session(ST);
        int64_t sid = zkr_session_id(s);
        struct vlog l;
        zkr_cache_t *a = new_cache(s, p, first[i], NULL), *b;
        snap_t v, want;
        char child[64], val[16];
        long wb;

        vlog_init(&l, second[i], p, 1);
        b = new_cache(s, p, second[i], &l);
        v = cache_view(a, zkt_scaled_ms(2 * ST));
        snap_free(&v);
        v = wait_view(&l, 1);
        snap_free(&v);
        v = synced_view(b);
        snap_free(&v);
        wb = all_watches();
        zkr_cache_free(a);
        zkt_sleep_ms(zkt_scaled_ms(500)); /* a removal would be done */
        if (first[i] == second[i])        /* the same watches */
            assert_int_equal(all_watches(), wb);
        if (second[i] == ZKR_CACHE_NODE)
            assert_true(session_watches(sid, p));
        if (second[i] == ZKR_CACHE_CHILDREN_DATA)
            assert_true(session_watches(sid, "/t/cache/shared/a") &&
                        session_watches(sid, "/t/cache/shared/b"));
        assert_true(all_watches() > w0);
        /* The survivor hears changes by its watches alone. */
        snprintf(val, sizeof(val), "v%d", i);
        if (second[i] == ZKR_CACHE_NODE) {
            raw_set(p, val, (int)strlen(val), NULL);
        } else {
            raw_set("/t/cache/shared/a", val, (int)strlen(val), NULL);
            snprintf(child, sizeof(child), "%s/n%d", p, i);
            raw_put(child, val, NULL);
        }
        want = server_view(p, second[i]);
        wait_last(&l, &want, zkt_scaled_ms(2 * ST));
        snap_free(&want);
        vlog_check(&l);
        zkr_cache_free(b);
        no_watch_left(sid, p);
        no_watch_left(sid, "/t/cache/shared/a");
        no_watch_left(sid, "/t/cache/shared/b");
        watches_back_to(w0);
        vlog_destroy(&l);
        assert_int_equal(zkr_session_free(s), 0);
    }
}

/* ------------------------------------------------- interleavings */

/* The proxy holds every forwarded chunk ms ms, both ways. */
static void link_delay(int ms)
{
    char cmd[32];

    snprintf(cmd, sizeof(cmd), "delay %d", ms);
    assert_int_equal(zkt_proxy_cmd(proxy, cmd), 0);
}

/* A NODE cache of a missing node, on a link that holds each way D: its
 * getData finds nothing (and sets no watch), then its exists sets a
 * watch; once the server holds that watch, the node is made, before the
 * parent's stat (whose pzxid stamps an empty view) is read. No view
 * without the node may be stamped at or after the node's creation (zkr.h:
 * each view is stamped with the highest zxid it reflects; a missing
 * node's with its parent's pzxid): the node stands from its czxid on. */
static void test_node_made_at_first_read(void **state)
{
    const char *dir = "/t/cache/made-early", *p = "/t/cache/made-early/n";
    const int d = zkt_scaled_ms(300);
    zkr_session_t *s = open_proxied(ST);
    int64_t sid = zkr_session_id(s);
    struct Stat st;
    struct vlog l;
    zkr_cache_t *c;
    snap_t want;

    (void)state;
    raw_rm(dir);
    raw_put(dir, NULL, NULL);
    vlog_init(&l, ZKR_CACHE_NODE, p, 1);
    link_delay(d);
    c = new_cache(s, p, ZKR_CACHE_NODE, &l);
    if (!ZKT_WAIT_UNTIL(session_watches(sid, p), zkt_scaled_ms(ST)))
        fail_msg("no exists watch of the cache on %s", p);
    assert_int_equal(vlog_count(&l), 0);
    raw_put(p, "v", &st);
    want = server_view(p, ZKR_CACHE_NODE);
    wait_last(&l, &want, zkt_scaled_ms(2 * ST));
    snap_free(&want);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    pthread_mutex_lock(&l.mu);
    for (int i = 0; i < l.n; i++)
        if (l.v[i].n == 0 && l.v[i].zxid >= st.czxid) {
            int64_t z = l.v[i].zxid;

            pthread_mutex_unlock(&l.mu);
            fail_msg("view %d: no node, stamped 0x%llx; the node was made at "
                     "0x%llx",
                     i + 1, (unsigned long long)z,
                     (unsigned long long)st.czxid);
        }
    pthread_mutex_unlock(&l.mu);
    vlog_check(&l);
    zkr_cache_free(c);
    vlog_destroy(&l);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A CHILDREN_DATA cache of 50 children, synced (every child is read
 * again, its watch standing: [V4]) and freed: its session watches
 * nothing then, the server's watch count is back where it was ([V5]).
 * Freed at once after a sync that returned 0; and on a link that holds
 * each way D, freed during the sync's reading of the children (a child
 * at a time, 2 D each: 100 D), which the sync gave up on at 6 D. */
static void test_sync_then_free_removes_watches(void **state)
{
    enum { N = 50 };
    const char *p = "/t/cache/syncfree";
    const int d = zkt_scaled_ms(50);
    char child[64];
    long w0;

    (void)state;
    raw_rm(p);
    raw_put(p, NULL, NULL);
    for (int i = 0; i < N; i++) {
        snprintf(child, sizeof(child), "%s/k%02d", p, i);
        raw_put(child, "x", NULL);
    }
    w0 = all_watches();
    for (int slow = 0; slow < 2; slow++) {
        zkr_session_t *s = open_proxied(ST);
        int64_t sid = zkr_session_id(s);
        zkr_cache_t *c = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, NULL);
        snap_t v = cache_view(c, zkt_scaled_ms(2 * ST));

        assert_int_equal(v.n, N);
        snap_free(&v);
        snprintf(child, sizeof(child), "%s/k%02d", p, N - 1);
        assert_true(
            ZKT_WAIT_UNTIL(session_watches(sid, child), zkt_scaled_ms(ST)));
        if (!slow) {
            assert_int_equal(zkr_cache_sync(c, zkt_scaled_ms(2 * ST)), 0);
            zkr_cache_free(c);
        } else {
            link_delay(d);
            assert_int_equal(zkr_cache_sync(c, 6 * d), ZKR_ETIMEDOUT);
            zkr_cache_free(c);
            assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
        }
        watches_back_to(w0);
        no_watch_left(sid, p);
        for (int i = 0; i < N; i += N - 1) {
            snprintf(child, sizeof(child), "%s/k%02d", p, i);
            no_watch_left(sid, child);
        }
        assert_int_equal(zkr_session_free(s), 0);
    }
}

/* A CHILDREN_DATA cache freed while its first reading of the children
 * (a child at a time, on a link that holds each way D) has a child's
 * getData in flight: once the server holds the watch that getData set
 * (on the first child, and on the third), its answer is D away. Freed
 * then, it leaves no watch ([V5]). */
static void test_free_with_get_in_flight(void **state)
{
    const char *p = "/t/cache/getfly";
    const char *names[] = {"a", "b", "c", "d", "e"},
               *data[] = {"1", "2", "3", "4", "5"};
    const int d = zkt_scaled_ms(300);
    long w0;

    (void)state;
    raw_dir(p, names, data, 5);
    w0 = all_watches();
    for (int k = 1; k <= 3; k += 2) {
        zkr_session_t *s = open_proxied(ST);
        int64_t sid = zkr_session_id(s);
        zkr_cache_t *c;

        link_delay(d);
        c = new_cache(s, p, ZKR_CACHE_CHILDREN_DATA, NULL);
        /* The listing's watch on p, and the children's read so far. */
        if (!ZKT_WAIT_UNTIL(all_watches() >= w0 + 1 + k, zkt_scaled_ms(ST)))
            fail_msg("%ld watches, not %ld", all_watches(), w0 + 1 + k);
        zkr_cache_free(c);
        assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
        watches_back_to(w0);
        no_watch_left(sid, p);
        for (int i = 0; i < 5; i++) {
            char child[64];

            snprintf(child, sizeof(child), "%s/%s", p, names[i]);
            no_watch_left(sid, child);
        }
        assert_int_equal(zkr_session_free(s), 0);
    }
}

/* A path nobody may read (its ACL: ADMIN only): zkr_cache_sync(-1)
 * returns ZNOAUTH, the code its read after the sync was refused with
 * (zkr.h, [V4]), for each kind, whether the cache never had a view or
 * had one before the ACL was taken away; given back, a sync returns 0
 * and the view is the server's. Each sync runs on a thread of its own,
 * bounded by the test. */
static void test_sync_unreadable(void **state)
{
    const char *p = "/t/cache/syncnoauth";
    const zkr_cache_kind_t kinds[3] = {ZKR_CACHE_NODE, ZKR_CACHE_CHILDREN,
                                       ZKR_CACHE_CHILDREN_DATA};
    struct ACL readall = {ZOO_PERM_ALL, {"world", "anyone"}};
    struct ACL adminonly = {ZOO_PERM_ADMIN, {"world", "anyone"}};
    struct ACL_vector all = {1, &readall}, none = {1, &adminonly};
    const char *names[] = {"k"}, *data[] = {"1"};
    zkr_session_t *s = open_session(ST);
    static runner_t r; /* a sync that never returns keeps it */
    zkr_cache_entry_t *e = NULL;
    int n = -1;

    (void)state;
    raw_dir(p, names, data, 1);
    assert_int_equal(zoo_set_acl(raw, p, -1, &none), ZOK);
    for (int i = 0; i < 3; i++) {
        zkr_cache_t *c = new_cache(s, p, kinds[i], NULL);

        assert_int_equal(zkr_cache_get(c, zkt_scaled_ms(2 * ST), &e, &n, NULL),
                         ZNOAUTH);
        start(&r, c, 1, -1);
        assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), ZNOAUTH);
        zkr_cache_free(c);
    }
    for (int i = 0; i < 3; i++) {
        zkr_cache_t *c;
        snap_t v, want;

        assert_int_equal(zoo_set_acl(raw, p, -1, &all), ZOK);
        c = new_cache(s, p, kinds[i], NULL);
        v = cache_view(c, zkt_scaled_ms(2 * ST));
        snap_free(&v);
        assert_int_equal(zoo_set_acl(raw, p, -1, &none), ZOK);
        start(&r, c, 1, -1);
        assert_int_equal(join(&r, zkt_scaled_ms(2 * ST)), ZNOAUTH);
        assert_int_equal(zoo_set_acl(raw, p, -1, &all), ZOK);
        v = synced_view(c);
        want = server_view(p, kinds[i]);
        assert_int_equal(v.zxid, want.zxid);
        assert_snap_equal_free(&v, &want);
        zkr_cache_free(c);
    }
    assert_int_equal(zkr_session_free(s), 0);
    raw_rm(p);
}

/* ------------------------------------------------------------ the API */

static void test_bad_arguments(void **state)
{
    zkr_session_t *s = open_session(ST);
    zkr_cache_t *c = NULL;
    zkr_cache_entry_t *e = NULL;
    int n = 0;

    (void)state;
    assert_int_equal(zkr_cache_new(NULL, s, "/t/x", ZKR_CACHE_NODE, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(
        zkr_cache_new(&c, NULL, "/t/x", ZKR_CACHE_NODE, NULL, NULL),
        ZBADARGUMENTS);
    assert_int_equal(zkr_cache_new(&c, s, NULL, ZKR_CACHE_NODE, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_cache_new(&c, s, "", ZKR_CACHE_NODE, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_cache_new(&c, s, "t/x", ZKR_CACHE_NODE, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_cache_new(&c, s, "/t/x/", ZKR_CACHE_NODE, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_cache_new(&c, s, "/t//x", ZKR_CACHE_NODE, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(
        zkr_cache_new(&c, s, "/t/x", (zkr_cache_kind_t)3, NULL, NULL),
        ZBADARGUMENTS);
    assert_int_equal(
        zkr_cache_new(&c, s, "/t/x", (zkr_cache_kind_t)-1, NULL, NULL),
        ZBADARGUMENTS);
    assert_null(c);
    assert_int_equal(zkr_cache_new(&c, s, "/t/x", ZKR_CACHE_NODE, NULL, NULL),
                     0);
    assert_int_equal(zkr_cache_get(NULL, 0, &e, &n, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_cache_get(c, -2, &e, &n, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_cache_get(c, 0, NULL, &n, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_cache_get(c, 0, &e, NULL, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_cache_sync(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_cache_sync(c, -2), ZBADARGUMENTS);
    assert_int_equal(zkr_cache_fd(NULL), -1);
    zkr_cache_free(NULL);
    zkr_cache_entries_free(NULL, 0);
    zkr_cache_entries_free(NULL, 3);
    /* A live cache holds its session. */
    assert_int_equal(zkr_session_free(s), ZKR_EINUSE);
    zkr_cache_free(c);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_view),
        cmocka_unit_test(test_node_missing_then_made),
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_server_nodes),
        cmocka_unit_test(test_children_view),
        cmocka_unit_test(test_children_data_view),
        cmocka_unit_test(test_children_data_unreadable),
        cmocka_unit_test(test_unreadable_path),
        cmocka_unit_test(test_fd),
        cmocka_unit_test(test_no_view_yet),
        cmocka_unit_test(test_lag_through_cut),
        cmocka_unit_test(test_listener_deadlk),
        cmocka_unit_test(test_free_from_listener),
        cmocka_unit_test(test_sync_read_your_writes),
        cmocka_unit_test(test_sync_lost),
        cmocka_unit_test(test_lost_before_first_view),
        cmocka_unit_test(test_node_stat_synced),
        cmocka_unit_test(test_children_data_stats_synced),
        cmocka_unit_test(test_cut_and_expiry),
        cmocka_unit_test_teardown(test_storm_with_faults, storm_teardown),
        cmocka_unit_test(test_free_removes_watches),
        cmocka_unit_test(test_shared_watches),
        cmocka_unit_test(test_free_then_new),
        cmocka_unit_test(test_node_made_at_first_read),
        cmocka_unit_test(test_sync_then_free_removes_watches),
        cmocka_unit_test(test_free_with_get_in_flight),
        cmocka_unit_test(test_sync_unreadable),
        cmocka_unit_test(test_bad_arguments),
    };

    zkt_test_filter();
    return cmocka_run_group_tests_name("cache", tests, proxy_setup,
                                       proxy_teardown);
}
