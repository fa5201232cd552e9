/* Integration tests of group membership (zkr_group_*) against a real
 * ZooKeeper server started by the harness, with the fault proxy in front
 * of it for cut connections. The oracles are the rules of zkr.h's
 * zkr_group section: a member is the ephemeral node PATH/<id>__party__
 * holding its data (by default its id), made with PATH's missing
 * ancestors by a join and kept by the handle (made again after another
 * client deletes it or the session expires) until a leave or a free; the
 * members of a view are PATH's children whose names contain __party__,
 * each one's id its name without the suffix, sorted by node name; views
 * are published in order with zxids that never go down, each different
 * from the last, the first one always (even for a path that does not
 * exist), and a view that settles on the server's state; the descriptor
 * is readable while a view newer than the last one read is there. What
 * another client reads and writes is a raw ZooKeeper handle's (`raw`),
 * and the server's state is the oracle of every final view. Waits derive
 * from the session timeout. */
#define _DEFAULT_SOURCE
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
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "proxy_test.h"

enum { ST = 10000 }; /* the session timeout of most tests */

#define SUFFIX "__party__"
#define SUFFIX_LEN (sizeof(SUFFIX) - 1)

/* -------------------------------------------------------------- views */

/* One member, copied out of a view (the listener's, zkr_group_members()'s
 * or the server's as another client reads it). */
typedef struct {
    char *name, *id, *data;
    int len, self;
    int64_t czxid, owner;
} mem_t;

typedef struct {
    int n;
    int64_t zxid;
    mem_t *m;
} view_t;

static void view_clear(view_t *v)
{
    for (int i = 0; i < v->n; i++) {
        free(v->m[i].name);
        free(v->m[i].id);
        free(v->m[i].data);
    }
    free(v->m);
    memset(v, 0, sizeof(*v));
}

static char *memdup0(const char *p, size_t n)
{
    char *r = malloc(n + 1);

    if (r != NULL) {
        if (n > 0)
            memcpy(r, p, n);
        r[n] = '\0';
    }
    return r;
}

/* Copies n members of a zkr view into v (cleared first). */
static void view_copy(view_t *v, const zkr_group_member_t *m, int n,
                      int64_t zxid)
{
    view_clear(v);
    v->n = n;
    v->zxid = zxid;
    v->m = calloc((size_t)(n > 0 ? n : 1), sizeof(mem_t));
    for (int i = 0; i < n; i++) {
        v->m[i].name = strdup(m[i].name != NULL ? m[i].name : "(null)");
        v->m[i].id = strdup(m[i].id != NULL ? m[i].id : "(null)");
        v->m[i].data =
            memdup0(m[i].data != NULL ? m[i].data : "", (size_t)m[i].len);
        v->m[i].len = m[i].len;
        v->m[i].self = m[i].self;
        v->m[i].czxid = m[i].czxid;
        v->m[i].owner = m[i].owner;
    }
}

/* The same members (names), data and creations: what makes a view
 * differ from the last one (zkr.h). */
static int same_members(const view_t *v, const zkr_group_member_t *m, int n)
{
    if (v->n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(v->m[i].name, m[i].name) != 0 || v->m[i].len != m[i].len ||
            memcmp(v->m[i].data, m[i].data, (size_t)m[i].len) != 0 ||
            v->m[i].czxid != m[i].czxid)
            return 0;
    return 1;
}

/* What zkr.h promises of every view, whoever delivers it: sorted by node
 * name, each name with __party__, each id its name without the suffix,
 * each data NUL-terminated after len bytes. 1 if it holds. */
static int view_well_formed(const zkr_group_member_t *m, int n)
{
    if (n < 0 || (n > 0 && m == NULL))
        return 0;
    for (int i = 0; i < n; i++) {
        size_t nl;

        if (m[i].name == NULL || m[i].id == NULL || m[i].data == NULL ||
            m[i].len < 0 || m[i].data[m[i].len] != '\0')
            return 0;
        if (strstr(m[i].name, SUFFIX) == NULL)
            return 0;
        nl = strlen(m[i].name);
        if (nl >= SUFFIX_LEN &&
            strcmp(m[i].name + nl - SUFFIX_LEN, SUFFIX) == 0 &&
            (strlen(m[i].id) != nl - SUFFIX_LEN ||
             strncmp(m[i].id, m[i].name, nl - SUFFIX_LEN) != 0))
            return 0;
        if (i > 0 && strcmp(m[i - 1].name, m[i].name) >= 0)
            return 0;
    }
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* PATH's members as another client reads them: the children whose names
 * contain __party__, sorted by name, with their data and stats; *maxz is
 * the highest of PATH's pzxid and the members' mzxids (0 when PATH does
 * not exist). Read again if a member goes between the listing and its
 * read. */
static void server_view(const char *path, view_t *v, int64_t *maxz)
{
    static char buf[ZKR_GROUP_DATA_MAX + 1];

    for (;;) {
        struct String_vector c = {0, NULL};
        struct Stat pst;
        int rc = zoo_get_children2(raw, path, 0, &c, &pst), again = 0;

        assert_true(rc == ZOK || rc == ZNONODE);
        memset(v, 0, sizeof(*v));
        *maxz = 0;
        if (rc == ZNONODE)
            return;
        *maxz = pst.pzxid;
        if (c.count > 0)
            qsort(c.data, (size_t)c.count, sizeof(char *), cmp_str);
        v->m = calloc((size_t)(c.count > 0 ? c.count : 1), sizeof(mem_t));
        for (int i = 0; i < c.count && !again; i++) {
            char full[ZKR_PATH_MAX + 2];
            struct Stat st;
            int len = (int)sizeof(buf) - 1;
            size_t nl = strlen(c.data[i]);
            mem_t *m = &v->m[v->n];

            if (strstr(c.data[i], SUFFIX) == NULL)
                continue;
            snprintf(full, sizeof(full), "%s/%s", path, c.data[i]);
            rc = zoo_get(raw, full, 0, buf, &len, &st);
            if (rc == ZNONODE) {
                again = 1;
                break;
            }
            assert_int_equal(rc, ZOK);
            if (len < 0)
                len = 0;
            m->name = strdup(c.data[i]);
            m->id = nl >= SUFFIX_LEN &&
                            strcmp(c.data[i] + nl - SUFFIX_LEN, SUFFIX) == 0
                        ? memdup0(c.data[i], nl - SUFFIX_LEN)
                        : strdup(c.data[i]);
            m->data = memdup0(buf, (size_t)len);
            m->len = len;
            m->czxid = st.czxid;
            m->owner = st.ephemeralOwner;
            v->n++;
            if (st.mzxid > *maxz)
                *maxz = st.mzxid;
        }
        deallocate_String_vector(&c);
        if (!again)
            return;
        view_clear(v);
    }
}

/* Whether v is the server's view of path now: the same members (names,
 * ids, data, creations, owners), self set on exactly the node named
 * self_name (may be NULL) held by session self_sid, and a zxid from the
 * members' creations up to the server's latest. verbose: says what
 * differs. */
static int view_matches_server(const view_t *v, const char *path,
                               const char *self_name, int64_t self_sid,
                               int verbose)
{
    view_t sv;
    int64_t maxz, maxc = 0;
    int ok = v->n >= 0;

    server_view(path, &sv, &maxz);
    if (v->n != sv.n) {
        ok = 0;
        if (verbose)
            print_message("# %s: %d members in the view, %d on the server\n",
                          path, v->n, sv.n);
    }
    for (int i = 0; ok && i < v->n; i++) {
        const mem_t *a = &v->m[i], *b = &sv.m[i];
        int self = self_name != NULL && strcmp(b->name, self_name) == 0 &&
                   b->owner == self_sid;

        if (strcmp(a->name, b->name) != 0 || strcmp(a->id, b->id) != 0 ||
            a->len != b->len || memcmp(a->data, b->data, (size_t)a->len) != 0 ||
            a->czxid != b->czxid || a->owner != b->owner || a->self != self) {
            ok = 0;
            if (verbose)
                print_message(
                    "# %s: member %d: view %s id %s len %d czxid %lld owner "
                    "%llx self %d; server %s id %s len %d czxid %lld owner "
                    "%llx self %d\n",
                    path, i, a->name, a->id, a->len, (long long)a->czxid,
                    (unsigned long long)a->owner, a->self, b->name, b->id,
                    b->len, (long long)b->czxid, (unsigned long long)b->owner,
                    self);
        }
        if (a->czxid > maxc)
            maxc = a->czxid;
    }
    /* (Without PATH, no pzxid says how far the server is.) */
    if (ok && (v->zxid < maxc || (maxz > 0 && v->zxid > maxz))) {
        ok = 0;
        if (verbose)
            print_message("# %s: view zxid %lld, members made up to %lld, "
                          "server at %lld\n",
                          path, (long long)v->zxid, (long long)maxc,
                          (long long)maxz);
    }
    if (verbose && !ok)
        for (int i = 0; i < sv.n; i++)
            print_message("#   server: %s (%.*s)\n", sv.m[i].name,
                          sv.m[i].len > 40 ? 40 : sv.m[i].len, sv.m[i].data);
    view_clear(&sv);
    return ok;
}

/* ---------------------------------------------------------- recorder */

/* What a listener saw: every view in turn, checked as it came (zxids
 * never lower, never the same view twice, well formed, the right handle),
 * the first and the last kept. Hooks make it act as a test needs. The
 * tests keep theirs (and whatever else a callback writes) in static
 * storage: a handle that a failed test leaves behind may still call. */
typedef struct {
    pthread_mutex_t mu;
    int views;
    int backwards;    /* views whose zxid was lower than the previous */
    int repeats;      /* views equal to the previous */
    int bad;          /* malformed views */
    int wrong_handle; /* called with another handle than the first time */
    zkr_group_t *seen;
    view_t first, last;
    /* Hooks. */
    int free_at;            /* free the handle at this view (0: never) */
    zkr_group_t *free_also; /* and this one, of the same session, first */
    void *free_also_rec;    /* its recorder */
    int freed;              /* the handle was freed (by the listener) */
    int after_free;         /* calls after that */
    int probe;              /* at the first view, blocking calls */
    int probe_done, probe_join, probe_members, probe_members0, probe_state;
    /* and a new handle's on probe_path of probe_session, before its first
     * view: a wait for it (-1, 500 ms), a look (0) */
    zkr_session_t *probe_session;
    const char *probe_path;
    int probe_new, probe_wait, probe_wait500, probe_look;
} rec_t;

static void rec_init(rec_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
}

static void rec_destroy(rec_t *r)
{
    view_clear(&r->first);
    view_clear(&r->last);
    pthread_mutex_destroy(&r->mu);
}

static void on_view(zkr_group_t *g, const zkr_group_member_t *m, int n,
                    int64_t zxid, void *data)
{
    rec_t *r = data;
    int probe = 0, free_now = 0;

    pthread_mutex_lock(&r->mu);
    if (r->freed) {
        r->after_free++;
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (r->seen == NULL)
        r->seen = g;
    r->wrong_handle += r->seen != g;
    r->bad += !view_well_formed(m, n);
    if (r->views > 0) {
        r->backwards += zxid < r->last.zxid;
        r->repeats += same_members(&r->last, m, n);
    }
    view_copy(&r->last, m, n, zxid);
    if (r->views == 0)
        view_copy(&r->first, m, n, zxid);
    r->views++;
    probe = r->probe && r->views == 1;
    if (r->free_at > 0 && r->views == r->free_at) {
        r->freed = 1;
        free_now = 1;
    }
    pthread_mutex_unlock(&r->mu);
    if (probe) {
        zkr_group_member_t *mm = NULL;
        int cnt = -1, join, st, mem, mem0;

        /* Out of the group: a join could only fail as a blocking call
         * from a callback; a wait for the view too. Without a wait the
         * view is there (this listener has it). */
        join = zkr_group_join(g, "dl", NULL, -1, 1000);
        st = zkr_group_state(g);
        mem = zkr_group_members(g, -1, &mm, &cnt, NULL);
        if (mem == 0)
            zkr_group_members_free(mm, cnt);
        mm = NULL;
        mem0 = zkr_group_members(g, 0, &mm, &cnt, NULL);
        if (mem0 == 0)
            zkr_group_members_free(mm, cnt);
        if (r->probe_path != NULL) {
            zkr_group_t *g2 = NULL;

            r->probe_new = zkr_group_new(&g2, r->probe_session, r->probe_path,
                                         NULL, NULL, NULL);
            mm = NULL;
            r->probe_wait = zkr_group_members(g2, -1, &mm, &cnt, NULL);
            if (r->probe_wait == 0)
                zkr_group_members_free(mm, cnt);
            mm = NULL;
            r->probe_wait500 = zkr_group_members(g2, 500, &mm, &cnt, NULL);
            if (r->probe_wait500 == 0)
                zkr_group_members_free(mm, cnt);
            mm = NULL;
            r->probe_look = zkr_group_members(g2, 0, &mm, &cnt, NULL);
            if (r->probe_look == 0)
                zkr_group_members_free(mm, cnt);
            zkr_group_free(g2);
        }
        pthread_mutex_lock(&r->mu);
        r->probe_join = join;
        r->probe_state = st;
        r->probe_members = mem;
        r->probe_members0 = mem0;
        r->probe_done = 1;
        pthread_mutex_unlock(&r->mu);
    }
    if (free_now) {
        if (r->free_also != NULL) {
            rec_t *o = r->free_also_rec;

            pthread_mutex_lock(&o->mu);
            o->freed = 1;
            pthread_mutex_unlock(&o->mu);
            zkr_group_free(r->free_also);
        }
        zkr_group_free(g);
    }
}

static int rec_views(rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->views;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* The listener's last view is the server's view of path now. */
static int rec_matches(rec_t *r, const char *path, const char *self_name,
                       int64_t sid, int verbose)
{
    int ok;

    pthread_mutex_lock(&r->mu);
    ok = r->views > 0 &&
         view_matches_server(&r->last, path, self_name, sid, verbose);
    if (verbose && r->views == 0)
        print_message("# %s: no view yet\n", path);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* Waits (bound_ms) until the listener's last view is the server's. */
static void wait_rec_matches(rec_t *r, const char *path, const char *self_name,
                             int64_t sid, int bound_ms)
{
    if (!ZKT_WAIT_UNTIL(rec_matches(r, path, self_name, sid, 0), bound_ms)) {
        rec_matches(r, path, self_name, sid, 1);
        fail_msg("the listener's view of %s is not the server's after %d ms",
                 path, bound_ms);
    }
}

/* The listener's checks over all its views. */
static void rec_check(rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    int backwards = r->backwards, repeats = r->repeats, bad = r->bad,
        wrong = r->wrong_handle;
    pthread_mutex_unlock(&r->mu);
    if (backwards != 0 || repeats != 0 || bad != 0 || wrong != 0)
        fail_msg("views: %d with a lower zxid, %d the same as the last, %d "
                 "malformed, %d with another handle",
                 backwards, repeats, bad, wrong);
}

/* The last view has a member named name with czxid other than not_czxid
 * (0: any) and data (NULL: any). */
static int rec_has(rec_t *r, const char *name, int64_t not_czxid,
                   const char *data)
{
    int found = 0;

    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->last.n && !found; i++)
        found = strcmp(r->last.m[i].name, name) == 0 &&
                (not_czxid == 0 || r->last.m[i].czxid != not_czxid) &&
                (data == NULL ||
                 (r->last.m[i].len == (int)strlen(data) &&
                  memcmp(r->last.m[i].data, data, strlen(data)) == 0));
    pthread_mutex_unlock(&r->mu);
    return found;
}

/* A copy of the listener's last view (cleared with view_clear()). */
static void rec_last(rec_t *r, view_t *v)
{
    view_clear(v);
    pthread_mutex_lock(&r->mu);
    v->n = r->last.n;
    v->zxid = r->last.zxid;
    v->m = calloc((size_t)(v->n > 0 ? v->n : 1), sizeof(mem_t));
    for (int i = 0; i < v->n; i++) {
        v->m[i] = r->last.m[i];
        v->m[i].name = strdup(r->last.m[i].name);
        v->m[i].id = strdup(r->last.m[i].id);
        v->m[i].data = memdup0(r->last.m[i].data, (size_t)r->last.m[i].len);
    }
    pthread_mutex_unlock(&r->mu);
}

static int rec_last_n(rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->last.n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* The handle was freed by its listener; calls after that. */
static int rec_freed(rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    int f = r->freed;
    pthread_mutex_unlock(&r->mu);
    return f;
}

static int rec_after_free(rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->after_free;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* The listener has run its probes. */
static int rec_probed(rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    int done = r->probe_done;
    pthread_mutex_unlock(&r->mu);
    return done;
}

/* --------------------------------------------------------- helpers */

static zkr_group_t *new_group(zkr_session_t *s, const char *path, rec_t *r)
{
    zkr_group_t *g = NULL;

    assert_int_equal(
        zkr_group_new(&g, s, path, NULL, r != NULL ? on_view : NULL, r), 0);
    assert_non_null(g);
    return g;
}

/* zkr_group_members() copied into v; its return code. */
static int members_view(zkr_group_t *g, int timeout_ms, view_t *v)
{
    zkr_group_member_t *m = NULL;
    int n = -1, rc;
    int64_t zxid = -1;

    rc = zkr_group_members(g, timeout_ms, &m, &n, &zxid);
    if (rc == 0) {
        if (!view_well_formed(m, n))
            fail_msg("zkr_group_members() gave a malformed view");
        view_copy(v, m, n, zxid);
        zkr_group_members_free(m, n);
    }
    return rc;
}

/* The member node of id under path, and its name. */
static void node_of(char *buf, size_t len, const char *path, const char *id)
{
    snprintf(buf, len, "%s/%s" SUFFIX, path, id);
}

/* The members under path, as another client counts them. */
static int party_nodes(const char *path)
{
    struct String_vector v = {0, NULL};
    int n = 0, rc = zoo_get_children(raw, path, 0, &v);

    assert_true(rc == ZOK || rc == ZNONODE);
    for (int i = 0; i < v.count; i++)
        n += strstr(v.data[i], SUFFIX) != NULL;
    deallocate_String_vector(&v);
    return n;
}

/* The node's data as another client reads it, NUL-terminated; its length
 * (-1: no node). */
static int raw_data(const char *node, char *buf, int size, struct Stat *st)
{
    int len = size - 1, rc = zoo_get(raw, node, 0, buf, &len, st);

    if (rc == ZNONODE)
        return -1;
    assert_int_equal(rc, ZOK);
    if (len < 0)
        len = 0;
    buf[len] = '\0';
    return len;
}

static void raw_member(const char *path, const char *name, const char *data,
                       int flags)
{
    char node[ZKR_PATH_MAX + 2];

    snprintf(node, sizeof(node), "%s/%s", path, name);
    assert_int_equal(zoo_create(raw, node, data,
                                data != NULL ? (int)strlen(data) : -1,
                                &ZOO_OPEN_ACL_UNSAFE, flags, NULL, 0),
                     ZOK);
}

/* No watch of sid on path, and none comes back for a while. */
static void no_watch_left(int64_t sid, const char *path)
{
    assert_true(ZKT_WAIT_UNTIL(!session_watches(sid, path), zkt_scaled_ms(ST)));
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(session_watches(sid, path));
}

/* An asynchronous join's or leave's completion: its calls, its last rc,
 * and (probe) blocking calls made from it. */
typedef struct {
    atomic_int n;
    atomic_int rc;
    int probe;
    int probe_leave, probe_members, probe_async;
} done_t;

static void on_done(int rc, zkr_group_t *g, void *data);

static void done_init(done_t *d)
{
    memset(d, 0, sizeof(*d));
    atomic_store(&d->rc, 12345);
}

static done_t probe_leave_done;

static void on_done(int rc, zkr_group_t *g, void *data)
{
    done_t *d = data;

    if (d->probe && rc == 0) {
        zkr_group_member_t *m = NULL;
        int n = -1;

        /* In the group (the join ended 0): a leave could only fail as a
         * blocking call from a callback; a wait for the view too. The
         * asynchronous leave is allowed. */
        d->probe_leave = zkr_group_leave(g, 1000);
        d->probe_members = zkr_group_members(g, -1, &m, &n, NULL);
        if (d->probe_members == 0)
            zkr_group_members_free(m, n);
        d->probe_async = zkr_group_async(g, 1, NULL, NULL, 0, -1, on_done,
                                         &probe_leave_done);
    }
    atomic_store(&d->rc, rc);
    atomic_fetch_add(&d->n, 1);
}

/* Waits (bound_ms) until the completion came; then it must not come
 * again. */
static int done_rc(done_t *d, int bound_ms)
{
    if (!ZKT_WAIT_UNTIL(atomic_load(&d->n) >= 1, bound_ms))
        fail_msg("no completion within %d ms", bound_ms);
    return atomic_load(&d->rc);
}

static void host_pid(char *buf, size_t len)
{
    assert_int_equal(gethostname(buf, len - 24), 0);
    buf[len - 24] = '\0';
    snprintf(buf + strlen(buf), 24, ":%ld", (long)getpid());
}

/* ------------------------------------------------------ join, leave */

/* A handle that never joins creates nothing: its first view (of a path
 * that does not exist) is empty, and its free leaves no watch. */
static void test_new_free_creates_nothing(void **state)
{
    const char *p = "/t/grp/none/a";
    zkr_session_t *s = open_session(ST);
    static rec_t r;
    zkr_group_t *g;
    view_t v = {0};

    (void)state;
    rec_init(&r);
    g = new_group(s, p, &r);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_int_equal(members_view(g, -1, &v), 0);
    assert_int_equal(v.n, 0);
    assert_true(ZKT_WAIT_UNTIL(rec_views(&r) >= 1, zkt_scaled_ms(ST)));
    assert_int_equal(r.first.n, 0);
    assert_false(raw_exists("/t/grp/none"));
    zkr_group_free(g);
    assert_false(raw_exists("/t/grp/none"));
    no_watch_left(zkr_session_id(s), p);
    no_watch_left(zkr_session_id(s), "/t/grp/none");
    rec_check(&r);
    view_clear(&v);
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Join makes PATH/<id>__party__ holding data, an ephemeral node of the
 * session, with PATH's missing ancestors, each with the handle's ACL; a
 * second join is ZKR_EALREADY; leave deletes it before it returns, and a
 * second leave is ZKR_ENOTHELD; a join again makes a new node, holding
 * the id when no data is given; free deletes it and leaves no watch. */
static void test_join_layout(void **state)
{
    const char *p = "/t/grp/layout/a/b";
    zkr_session_t *s = open_session(ST);
    struct ACL some = {ZOO_PERM_READ | ZOO_PERM_WRITE | ZOO_PERM_CREATE |
                           ZOO_PERM_DELETE,
                       {"world", "anyone"}};
    struct ACL_vector acl = {1, &some};
    zkr_group_t *g = NULL;
    static rec_t r;
    char node[256], data[64];
    struct Stat st;
    int64_t czxid;

    (void)state;
    rec_init(&r);
    assert_int_equal(zkr_group_new(&g, s, p, &acl, on_view, &r), 0);
    assert_int_equal(zkr_group_join(g, "w1", "hello", -1, zkt_scaled_ms(ST)),
                     0);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    node_of(node, sizeof(node), p, "w1");
    assert_int_equal(raw_data(node, data, sizeof(data), &st), 5);
    assert_string_equal(data, "hello");
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    czxid = st.czxid;
    /* The ancestors: persistent, with the handle's ACL. */
    for (int i = 0; i < 2; i++) {
        const char *a = i == 0 ? p : "/t/grp/layout/a";
        struct ACL_vector got = {0, NULL};

        assert_int_equal(raw_stat(a, &st), ZOK);
        assert_int_equal(st.ephemeralOwner, 0);
        assert_int_equal(zoo_get_acl(raw, a, &got, &st), ZOK);
        assert_int_equal(got.count, 1);
        assert_int_equal(got.data[0].perms, some.perms);
        assert_string_equal(got.data[0].id.scheme, "world");
        deallocate_ACL_vector(&got);
    }
    {
        struct ACL_vector got = {0, NULL};

        assert_int_equal(zoo_get_acl(raw, node, &got, &st), ZOK);
        assert_int_equal(got.count, 1);
        assert_int_equal(got.data[0].perms, some.perms);
        deallocate_ACL_vector(&got);
    }
    wait_rec_matches(&r, p, "w1" SUFFIX, zkr_session_id(s), zkt_scaled_ms(ST));
    /* Joined: a second join, with any id, is refused. */
    assert_int_equal(zkr_group_join(g, "w1", "hello", -1, zkt_scaled_ms(ST)),
                     ZKR_EALREADY);
    assert_int_equal(zkr_group_join(g, "w2", NULL, -1, zkt_scaled_ms(ST)),
                     ZKR_EALREADY);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    assert_int_equal(party_nodes(p), 1);
    /* Leave: gone when it returns, and not made again. */
    assert_int_equal(zkr_group_leave(g, zkt_scaled_ms(ST)), 0);
    assert_false(raw_exists(node));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_int_equal(zkr_group_leave(g, zkt_scaled_ms(ST)), ZKR_ENOTHELD);
    wait_rec_matches(&r, p, NULL, 0, zkt_scaled_ms(ST));
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(raw_exists(node));
    /* Joined again, no data: the data is the id; a new node. */
    assert_int_equal(zkr_group_join(g, "w1", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(raw_data(node, data, sizeof(data), &st), 2);
    assert_string_equal(data, "w1");
    assert_true(st.czxid > czxid);
    wait_rec_matches(&r, p, "w1" SUFFIX, zkr_session_id(s), zkt_scaled_ms(ST));
    rec_check(&r);
    /* Free deletes it, and takes the handle's watches back. */
    zkr_group_free(g);
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(ST)));
    no_watch_left(zkr_session_id(s), p);
    no_watch_left(zkr_session_id(s), node);
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The id defaults to HOST:PID, the data to the id; len -1 is strlen(data),
 * a len counts embedded NULs, and len 0 is no data. */
static void test_join_defaults_and_len(void **state)
{
    const char *p = "/t/grp/defaults";
    zkr_session_t *s = open_session(ST);
    zkr_group_t *g = new_group(s, p, NULL), *g2 = new_group(s, p, NULL),
                *g3 = new_group(s, p, NULL), *g4 = new_group(s, p, NULL);
    char hp[300], node[600], data[600];
    view_t v = {0};

    (void)state;
    host_pid(hp, sizeof(hp));
    assert_int_equal(zkr_group_join(g, NULL, NULL, -1, zkt_scaled_ms(ST)), 0);
    node_of(node, sizeof(node), p, hp);
    assert_int_equal(raw_data(node, data, sizeof(data), NULL), (int)strlen(hp));
    assert_string_equal(data, hp);
    /* len -1: up to the NUL. */
    assert_int_equal(zkr_group_join(g2, "l1", "abc", -1, zkt_scaled_ms(ST)), 0);
    node_of(node, sizeof(node), p, "l1");
    assert_int_equal(raw_data(node, data, sizeof(data), NULL), 3);
    assert_string_equal(data, "abc");
    /* An explicit len: bytes past a NUL. */
    assert_int_equal(zkr_group_join(g3, "l2", "ab\0cd", 5, zkt_scaled_ms(ST)),
                     0);
    node_of(node, sizeof(node), p, "l2");
    assert_int_equal(raw_data(node, data, sizeof(data), NULL), 5);
    assert_memory_equal(data, "ab\0cd", 5);
    /* len 0: empty data, not the id. */
    assert_int_equal(zkr_group_join(g4, "l3", "xyz", 0, zkt_scaled_ms(ST)), 0);
    node_of(node, sizeof(node), p, "l3");
    assert_int_equal(raw_data(node, data, sizeof(data), NULL), 0);
    /* The view says the same: g's own node only is self. */
    snprintf(data, sizeof(data), "%s" SUFFIX, hp);
    assert_true(ZKT_WAIT_UNTIL(
        members_view(g, -1, &v) == 0 && v.n == 4 &&
            view_matches_server(&v, p, data, zkr_session_id(s), 0),
        zkt_scaled_ms(ST)));
    for (int i = 0; i < v.n; i++)
        if (strcmp(v.m[i].id, "l2") == 0) {
            assert_int_equal(v.m[i].len, 5);
            assert_memory_equal(v.m[i].data, "ab\0cd", 6);
        } else if (strcmp(v.m[i].id, "l3") == 0) {
            assert_int_equal(v.m[i].len, 0);
            assert_int_equal(v.m[i].data[0], '\0');
        }
    view_clear(&v);
    zkr_group_free(g);
    zkr_group_free(g2);
    zkr_group_free(g3);
    zkr_group_free(g4);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    assert_int_equal(zkr_session_free(s), 0);
}

/* Every argument zkr.h calls bad is refused with ZBADARGUMENTS, nothing
 * created, no completion; the limits themselves are accepted. */
static void bad_join(zkr_group_t *g, const char *p, const char *id,
                     const void *data, int len, int timeout_ms)
{
    static done_t d;

    char hex[3 * 16 + 1] = "";
    int rc;

    for (size_t i = 0; id != NULL && i < 16 && id[i] != '\0'; i++)
        snprintf(hex + 3 * i, 4, "%02x ", (unsigned char)id[i]);
    done_init(&d);
    rc = zkr_group_join(g, id, data, len, timeout_ms);
    if (rc != ZBADARGUMENTS)
        fail_msg("join of id [%s] (%zu bytes), len %d, timeout %d: %s, "
                 "not ZBADARGUMENTS",
                 hex, id != NULL ? strlen(id) : 0, len, timeout_ms,
                 zkr_errname(rc));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    rc = zkr_group_async(g, 0, id, data, len, timeout_ms, on_done, &d);
    if (rc != ZBADARGUMENTS)
        fail_msg("asynchronous join of id [%s]: %s, not ZBADARGUMENTS", hex,
                 zkr_errname(rc));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_int_equal(party_nodes(p), 0);
    assert_int_equal(atomic_load(&d.n), 0);
}

static void test_bad_arguments(void **state)
{
    const char *p = "/t/grp/bad";
    zkr_session_t *s = open_session(ST);
    zkr_group_t *g = NULL;
    zkr_group_member_t *m = NULL;
    int n = 0;
    char big[ZKR_PATH_MAX + 8], id[ZKR_GROUP_ID_MAX + 8];
    char *data;
    static done_t d;
    static const char *const bad_ids[] = {
        "",                 /* empty */
        "a/b",              /* a slash */
        "/",                /* only one */
        "\xff",             /* not UTF-8 */
        "ab\xc3",           /* a sequence cut short */
        "\x80",             /* a continuation byte alone */
        "\xc0\xaf",         /* overlong */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "a\nb",             /* control characters: C0, DEL (C1: below) */
        "\x01",
        "a\tb",
        "\x7f",
    };

    (void)state;
    done_init(&d);
    /* zkr_group_new. */
    assert_int_equal(zkr_group_new(NULL, s, p, NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, NULL, p, NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, NULL, NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "", NULL, NULL, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "/", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "t/x", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "/t/x/", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "/t//x", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "/t/./x", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "/t/../x", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_new(&g, s, "/t/x\n", NULL, NULL, NULL),
                     ZBADARGUMENTS);
    memset(big, 'p', sizeof(big));
    big[0] = '/';
    big[ZKR_PATH_MAX + 1] = '\0';
    assert_int_equal(zkr_group_new(&g, s, big, NULL, NULL, NULL),
                     ZBADARGUMENTS);
    assert_null(g);

    /* zkr_group_join and zkr_group_async. */
    g = new_group(s, p, NULL);
    assert_int_equal(zkr_group_join(NULL, "a", NULL, -1, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_group_async(NULL, 0, "a", NULL, -1, 0, on_done, &d),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_async(g, 0, "a", NULL, -1, 0, NULL, NULL),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++)
        bad_join(g, p, bad_ids[i], NULL, -1, zkt_scaled_ms(ST));
    memset(id, 'i', sizeof(id));
    id[ZKR_GROUP_ID_MAX + 1] = '\0';
    bad_join(g, p, id, NULL, -1, zkt_scaled_ms(ST));
    bad_join(g, p, "a", "x", -1, -2);
    data = calloc(ZKR_GROUP_DATA_MAX + 2, 1);
    assert_non_null(data);
    memset(data, 'd', ZKR_GROUP_DATA_MAX + 1);
    bad_join(g, p, "a", data, ZKR_GROUP_DATA_MAX + 1, zkt_scaled_ms(ST));
    bad_join(g, p, "a", data, -1, zkt_scaled_ms(ST)); /* strlen: too long */
    /* The limits: an id of ZKR_GROUP_ID_MAX bytes (of UTF-8: 2-byte
     * characters and one ASCII), data of ZKR_GROUP_DATA_MAX. */
    for (int i = 0; i + 2 < ZKR_GROUP_ID_MAX; i += 2)
        memcpy(id + i, "\xc3\xa9", 2);
    id[ZKR_GROUP_ID_MAX - 1] = 'z';
    id[ZKR_GROUP_ID_MAX] = '\0';
    assert_int_equal(strlen(id), ZKR_GROUP_ID_MAX);
    assert_int_equal(
        zkr_group_join(g, id, data, ZKR_GROUP_DATA_MAX, zkt_scaled_ms(ST)), 0);
    {
        view_t v = {0};
        char self[sizeof(id) + SUFFIX_LEN + 1];

        snprintf(self, sizeof(self), "%s" SUFFIX, id);
        assert_true(ZKT_WAIT_UNTIL(
            members_view(g, -1, &v) == 0 &&
                view_matches_server(&v, p, self, zkr_session_id(s), 0),
            zkt_scaled_ms(ST)));
        assert_int_equal(v.n, 1);
        assert_string_equal(v.m[0].id, id);
        assert_int_equal(v.m[0].len, ZKR_GROUP_DATA_MAX);
        view_clear(&v);
    }
    /* A timeout below -1 of a joined handle's leave: refused, still in. */
    assert_int_equal(zkr_group_leave(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_group_leave(g, -2), ZBADARGUMENTS);
    assert_int_equal(zkr_group_async(g, 1, NULL, NULL, 0, -2, on_done, &d),
                     ZBADARGUMENTS);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    assert_int_equal(party_nodes(p), 1);
    assert_int_equal(zkr_group_leave(g, zkt_scaled_ms(ST)), 0);
    free(data);
    /* A leave of a handle that is out, asynchronous too: no completion. */
    assert_int_equal(zkr_group_async(g, 1, NULL, NULL, 0, -1, on_done, &d),
                     ZKR_ENOTHELD);

    /* zkr_group_members. */
    assert_int_equal(zkr_group_members(NULL, 0, &m, &n, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_group_members(g, -2, &m, &n, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_group_members(g, 0, NULL, &n, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_group_members(g, 0, &m, NULL, NULL), ZBADARGUMENTS);
    assert_int_equal(zkr_group_state(NULL), ZKR_GROUP_OUT);
    assert_int_equal(zkr_group_fd(NULL), -1);
    zkr_group_members_free(NULL, 0);
    zkr_group_free(NULL);
    zkr_group_free(g);

    /* The member node's path must fit in ZKR_PATH_MAX: under a path of
     * 1000 bytes, an id of 14 bytes fits (1000 + 1 + 14 + 9 = 1024), one
     * of 15 does not. */
    memset(big, 'q', sizeof(big));
    memcpy(big, "/t/grp/long/", 12);
    big[1000] = '\0';
    g = new_group(s, big, NULL);
    bad_join(g, big, "abcdefghijklmno", NULL, -1, zkt_scaled_ms(ST));
    assert_int_equal(
        zkr_group_join(g, "abcdefghijklmn", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(party_nodes(big), 1);
    zkr_group_free(g);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(big) == 0, zkt_scaled_ms(ST)));
    assert_int_equal(atomic_load(&d.n), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The C1 control characters (U+0080..U+009F, "\xc2\x80".."\xc2\x9f" in
 * UTF-8) are control characters too: refused at the call like the others,
 * before anything is sent (PATH is not made). */
static void test_id_c1_control_refused(void **state)
{
    static const char mid[] = {'a', (char)0xc2, (char)0x80, 'b', '\0'};
    const char *p = "/t/grp/c1/path";
    zkr_session_t *s = open_session(ST);
    zkr_group_t *g = new_group(s, p, NULL);

    (void)state;
    bad_join(g, p, "\xc2\x85", NULL, -1, zkt_scaled_ms(ST));
    bad_join(g, p, mid, NULL, -1, zkt_scaled_ms(ST));
    bad_join(g, p, "\xc2\x9f", NULL, -1, zkt_scaled_ms(ST));
    assert_false(raw_exists("/t/grp/c1"));
    zkr_group_free(g);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The server refuses the member's node (PATH may not be written): the
 * join ends with its code, ZNOAUTH, out of the group, nothing made. */
static void test_server_refuses_node(void **state)
{
    const char *p = "/t/grp/refused/ro";
    zkr_session_t *s = open_session(ST);
    struct ACL readonly = {ZOO_PERM_READ | ZOO_PERM_DELETE,
                           {"world", "anyone"}};
    struct ACL_vector ro = {1, &readonly};
    zkr_group_t *g;

    (void)state;
    raw_ensure("/t/grp/refused");
    assert_int_equal(zoo_create(raw, p, NULL, -1, &ro, 0, NULL, 0), ZOK);
    g = new_group(s, p, NULL);
    assert_int_equal(zkr_group_join(g, "a", NULL, -1, zkt_scaled_ms(ST)),
                     ZNOAUTH);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_int_equal(party_nodes(p), 0);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The server refuses PATH itself (missing, and its parent may not have
 * children made by us: its ACL, or it is ephemeral): the join ends with
 * that code (ZNOAUTH, ZNOCHILDRENFOREPHEMERALS), out, nothing made. */
static void test_server_refuses_path(void **state)
{
    const char *pa = "/t/grp/refused2/ro/g", *pe = "/t/grp/refused2/eph/g";
    zkr_session_t *s = open_session(ST);
    struct ACL readonly = {ZOO_PERM_READ | ZOO_PERM_DELETE,
                           {"world", "anyone"}};
    struct ACL_vector ro = {1, &readonly};
    zkr_group_t *g;
    int rc;

    (void)state;
    raw_ensure("/t/grp/refused2");
    assert_int_equal(
        zoo_create(raw, "/t/grp/refused2/ro", NULL, -1, &ro, 0, NULL, 0), ZOK);
    assert_int_equal(zoo_create(raw, "/t/grp/refused2/eph", NULL, -1,
                                &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    g = new_group(s, pa, NULL);
    rc = zkr_group_join(g, "a", NULL, -1, zkt_scaled_ms(ST));
    print_message("# PATH refused by its parent's ACL: %s\n", zkr_errname(rc));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_false(raw_exists(pa));
    zkr_group_free(g);
    g = new_group(s, pe, NULL);
    {
        int rc2 = zkr_group_join(g, "a", NULL, -1, zkt_scaled_ms(ST));

        print_message("# PATH under an ephemeral node: %s\n", zkr_errname(rc2));
        assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
        assert_false(raw_exists(pe));
        zkr_group_free(g);
        assert_int_equal(rc, ZNOAUTH);
        assert_int_equal(rc2, ZNOCHILDRENFOREPHEMERALS);
    }
    assert_int_equal(zoo_delete(raw, "/t/grp/refused2/eph", -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/grp/refused2/ro", -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------------------------ views */

/* Two members on two sessions see each other (each its own as self);
 * another client's `x__party__` is a member "x", its `other` is not; its
 * setData gives a new view with the new data; a zkr member's node deleted
 * by another client is made again by its handle (a new node, the same
 * session), and both views see it back. */
static void test_views_two_sessions(void **state)
{
    const char *p = "/t/grp/two";
    zkr_session_t *s1 = open_session(ST), *s2 = open_session(ST);
    static rec_t r1, r2;
    zkr_group_t *g1, *g2;
    char node[256];
    struct Stat st;
    int64_t czxid, sid2;
    view_t v = {0};

    (void)state;
    rec_init(&r1);
    rec_init(&r2);
    g1 = new_group(s1, p, &r1);
    g2 = new_group(s2, p, &r2);
    assert_int_equal(zkr_group_join(g1, "a", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(zkr_group_join(g2, "b", "bee", -1, zkt_scaled_ms(ST)), 0);
    sid2 = zkr_session_id(s2);
    wait_rec_matches(&r1, p, "a" SUFFIX, zkr_session_id(s1), zkt_scaled_ms(ST));
    wait_rec_matches(&r2, p, "b" SUFFIX, sid2, zkt_scaled_ms(ST));
    assert_int_equal(rec_last_n(&r1), 2);
    /* Another client's member, and a child that is no member. */
    raw_member(p, "x" SUFFIX, "xd", ZOO_EPHEMERAL);
    raw_member(p, "other", "o", 0);
    wait_rec_matches(&r1, p, "a" SUFFIX, zkr_session_id(s1), zkt_scaled_ms(ST));
    wait_rec_matches(&r2, p, "b" SUFFIX, sid2, zkt_scaled_ms(ST));
    rec_last(&r2, &v);
    assert_int_equal(v.n, 3);
    assert_string_equal(v.m[2].name, "x" SUFFIX);
    assert_string_equal(v.m[2].id, "x");
    assert_string_equal(v.m[2].data, "xd");
    assert_int_equal(v.m[2].owner, zoo_client_id(raw)->client_id);
    assert_int_equal(v.m[2].self, 0);
    assert_int_equal(v.m[1].self, 1);
    assert_int_equal(v.m[0].self, 0);
    view_clear(&v);
    /* Its data changed. */
    assert_int_equal(zoo_set(raw, "/t/grp/two/x" SUFFIX, "new data", 8, -1),
                     ZOK);
    assert_true(ZKT_WAIT_UNTIL(rec_has(&r1, "x" SUFFIX, 0, "new data") &&
                                   rec_has(&r2, "x" SUFFIX, 0, "new data"),
                               zkt_scaled_ms(ST)));
    wait_rec_matches(&r1, p, "a" SUFFIX, zkr_session_id(s1), zkt_scaled_ms(ST));
    /* b's node deleted by another client: its handle makes it again. */
    node_of(node, sizeof(node), p, "b");
    assert_int_equal(raw_stat(node, &st), ZOK);
    czxid = st.czxid;
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(raw_stat(node, &st) == ZOK && st.czxid != czxid,
                               zkt_scaled_ms(ST)));
    assert_int_equal(st.ephemeralOwner, sid2);
    assert_true(
        ZKT_WAIT_UNTIL(zkr_group_state(g2) == ZKR_GROUP_IN, zkt_scaled_ms(ST)));
    {
        char d[8];

        assert_int_equal(raw_data(node, d, sizeof(d), NULL), 3);
        assert_string_equal(d, "bee");
    }
    assert_true(ZKT_WAIT_UNTIL(rec_has(&r1, "b" SUFFIX, czxid, "bee"),
                               zkt_scaled_ms(ST)));
    wait_rec_matches(&r1, p, "a" SUFFIX, zkr_session_id(s1), zkt_scaled_ms(ST));
    wait_rec_matches(&r2, p, "b" SUFFIX, sid2, zkt_scaled_ms(ST));
    assert_int_equal(zkr_session_id(s2), sid2);
    assert_int_equal(party_nodes(p), 3);
    rec_check(&r1);
    rec_check(&r2);
    zkr_group_free(g1);
    zkr_group_free(g2);
    assert_int_equal(zoo_delete(raw, "/t/grp/two/x" SUFFIX, -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/grp/two/other", -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    rec_destroy(&r1);
    rec_destroy(&r2);
    assert_int_equal(zkr_session_free(s1), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* kazoo's Party names its node with 32 hex digits and __party__, holding
 * its identifier: the member's id is the hex, its data the identifier; a
 * member without data has none (len 0); a Curator GroupMember's node
 * (named by its id) is no member. */
static void test_kazoo_layout(void **state)
{
    const char *p = "/t/grp/kazoo";
    const char *hex = "0123456789abcdef0123456789abcdef";
    zkr_session_t *s = open_session(ST);
    zkr_group_t *g = new_group(s, p, NULL);
    char name[64];
    view_t v = {0};

    (void)state;
    raw_ensure(p);
    snprintf(name, sizeof(name), "%s" SUFFIX, hex);
    raw_member(p, name, "ident", ZOO_EPHEMERAL);
    raw_member(p, "nodata" SUFFIX, NULL, ZOO_EPHEMERAL);
    raw_member(p, "curator-member", "payload", ZOO_EPHEMERAL);
    assert_true(ZKT_WAIT_UNTIL(members_view(g, -1, &v) == 0 &&
                                   view_matches_server(&v, p, NULL, 0, 0),
                               zkt_scaled_ms(ST)));
    assert_int_equal(v.n, 2);
    assert_string_equal(v.m[0].name, name);
    assert_string_equal(v.m[0].id, hex);
    assert_int_equal(v.m[0].len, 5);
    assert_string_equal(v.m[0].data, "ident");
    assert_string_equal(v.m[1].id, "nodata");
    assert_int_equal(v.m[1].len, 0);
    assert_string_equal(v.m[1].data, "");
    view_clear(&v);
    zkr_group_free(g);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The listener: the first view comes even for a path that does not exist
 * (empty), then the path a join makes, then every change, in zxid order,
 * each view different from the last; the last is the server's and
 * zkr_group_members()'s, whose zxid is the server's. */
static void test_listener_order(void **state)
{
    const char *p = "/t/grp/order";
    zkr_session_t *s = open_session(ST), *s2 = open_session(ST);
    static rec_t r;
    zkr_group_t *g, *j;
    char name[32];
    view_t v = {0};

    (void)state;
    rec_init(&r);
    g = new_group(s, p, &r);
    assert_true(ZKT_WAIT_UNTIL(rec_views(&r) >= 1, zkt_scaled_ms(ST)));
    assert_int_equal(r.first.n, 0);
    j = new_group(s2, p, NULL);
    assert_int_equal(zkr_group_join(j, "m0", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_true(
        ZKT_WAIT_UNTIL(rec_has(&r, "m0" SUFFIX, 0, "m0"), zkt_scaled_ms(ST)));
    /* A run of changes by another client. */
    for (int i = 1; i <= 30; i++) {
        snprintf(name, sizeof(name), "m%02d" SUFFIX, i);
        raw_member(p, name, name, ZOO_EPHEMERAL);
        if (i % 3 == 0) {
            char node[64];

            snprintf(node, sizeof(node), "%s/m%02d" SUFFIX, p, i - 1);
            assert_int_equal(zoo_set(raw, node, "changed", 7, -1), ZOK);
        }
        if (i % 5 == 0) {
            char node[64];

            snprintf(node, sizeof(node), "%s/m%02d" SUFFIX, p, i - 2);
            assert_int_equal(zoo_delete(raw, node, -1), ZOK);
        }
    }
    wait_rec_matches(&r, p, NULL, 0, zkt_scaled_ms(ST));
    assert_int_equal(members_view(g, 0, &v), 0);
    {
        view_t l = {0};

        /* The same members; a read that found them again (after a member
         * read gone since its listing, say) only raised the zxid, with no
         * call (zkr.h). */
        rec_last(&r, &l);
        assert_true(v.zxid >= l.zxid);
        assert_int_equal(v.n, l.n);
        for (int i = 0; i < v.n; i++) {
            assert_string_equal(v.m[i].name, l.m[i].name);
            assert_int_equal(v.m[i].len, l.m[i].len);
            assert_memory_equal(v.m[i].data, l.m[i].data, (size_t)v.m[i].len);
        }
        view_clear(&l);
    }
    assert_true(view_matches_server(&v, p, NULL, 0, 1));
    /* The last change was a member's: the view's zxid is the server's. */
    {
        view_t sv;
        int64_t maxz;

        server_view(p, &sv, &maxz);
        assert_int_equal(v.zxid, maxz);
        view_clear(&sv);
    }
    assert_true(rec_views(&r) >= 3);
    rec_check(&r);
    view_clear(&v);
    zkr_group_free(g);
    zkr_group_free(j);
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* PATH deleted (its members gone first) and made again with a member:
 * the view follows, empty then with the member. */
static void test_path_deleted_and_made_again(void **state)
{
    const char *p = "/t/grp/again";
    zkr_session_t *s = open_session(ST);
    static rec_t r;
    zkr_group_t *g;

    (void)state;
    rec_init(&r);
    raw_ensure(p);
    raw_member(p, "k" SUFFIX, "k", 0);
    g = new_group(s, p, &r);
    assert_true(
        ZKT_WAIT_UNTIL(rec_has(&r, "k" SUFFIX, 0, "k"), zkt_scaled_ms(ST)));
    assert_int_equal(zoo_delete(raw, "/t/grp/again/k" SUFFIX, -1), ZOK);
    assert_int_equal(zoo_delete(raw, p, -1), ZOK);
    wait_rec_matches(&r, p, NULL, 0, zkt_scaled_ms(ST));
    assert_int_equal(rec_last_n(&r), 0);
    raw_ensure(p);
    raw_member(p, "l" SUFFIX, "l", 0);
    assert_true(
        ZKT_WAIT_UNTIL(rec_has(&r, "l" SUFFIX, 0, "l"), zkt_scaled_ms(ST)));
    wait_rec_matches(&r, p, NULL, 0, zkt_scaled_ms(ST));
    rec_check(&r);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, "/t/grp/again/l" SUFFIX, -1), ZOK);
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* The descriptor: one for the handle, readable once there is a view not
 * read yet, quiet after zkr_group_members() until the next change (a
 * child that is no member is none), poll()-able. */
static int readable(int fd, int timeout_ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    int rc = poll(&pfd, 1, timeout_ms);

    assert_true(rc >= 0);
    return rc == 1 && (pfd.revents & POLLIN);
}

static void test_fd(void **state)
{
    const char *p = "/t/grp/fd";
    zkr_session_t *s = open_session(ST);
    zkr_group_t *g;
    int fd;
    view_t v = {0};

    (void)state;
    raw_ensure(p);
    g = new_group(s, p, NULL);
    fd = zkr_group_fd(g);
    assert_true(fd >= 0);
    assert_int_equal(zkr_group_fd(g), fd);
    /* The first view: readable until read. */
    assert_true(readable(fd, zkt_scaled_ms(ST)));
    assert_true(readable(fd, 0));
    assert_int_equal(members_view(g, 0, &v), 0);
    assert_false(readable(fd, 0));
    assert_int_equal(v.n, 0);
    /* A change: readable (and stays so) until read. */
    raw_member(p, "f" SUFFIX, "1", ZOO_EPHEMERAL);
    assert_true(readable(fd, zkt_scaled_ms(ST)));
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_true(readable(fd, 0));
    assert_int_equal(members_view(g, 0, &v), 0);
    assert_int_equal(v.n, 1);
    assert_false(readable(fd, 0));
    /* Nothing changes: it stays quiet; nor does a child that is no
     * member make a new view. */
    raw_member(p, "plain", "1", ZOO_EPHEMERAL);
    assert_false(readable(fd, zkt_scaled_ms(1000)));
    /* Its data changes: readable. */
    assert_int_equal(zoo_set(raw, "/t/grp/fd/f" SUFFIX, "2", 1, -1), ZOK);
    assert_true(readable(fd, zkt_scaled_ms(ST)));
    assert_true(ZKT_WAIT_UNTIL(members_view(g, 0, &v) == 0 && v.n == 1 &&
                                   v.m[0].data[0] == '2',
                               zkt_scaled_ms(ST)));
    assert_false(readable(fd, 0));
    view_clear(&v);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, "/t/grp/fd/f" SUFFIX, -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/grp/fd/plain", -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

/* zkr_group_members() before the first view (the handle's requests held
 * 500 ms each way by the proxy): with 0, ZKR_ETIMEDOUT at once; with a
 * timeout, ZKR_ETIMEDOUT once it passed; with -1, the view. */
static void test_members_timeout(void **state)
{
    const char *p = "/t/grp/first";
    zkr_session_t *s = open_proxied(ST);
    zkr_group_t *g;
    view_t v = {0};
    int64_t t0, t1;
    int rc;

    (void)state;
    raw_ensure(p);
    raw_member(p, "y" SUFFIX, "y", ZOO_EPHEMERAL);
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 500"), 0);
    t0 = zkt_now_ms();
    g = new_group(s, p, NULL);
    rc = members_view(g, 0, &v);
    t1 = zkt_now_ms();
    /* No answer can have come back in less than a round trip. */
    if (t1 - t0 < 1000)
        assert_int_equal(rc, ZKR_ETIMEDOUT);
    else
        assert_true(rc == 0 || rc == ZKR_ETIMEDOUT);
    if (rc == ZKR_ETIMEDOUT) {
        t0 = zkt_now_ms();
        rc = members_view(g, 200, &v);
        if (rc == ZKR_ETIMEDOUT)
            assert_true(zkt_now_ms() - t0 >= 200);
        else
            assert_int_equal(rc, 0);
    }
    assert_int_equal(members_view(g, -1, &v), 0);
    assert_int_equal(v.n, 1);
    assert_string_equal(v.m[0].id, "y");
    assert_true(view_matches_server(&v, p, NULL, 0, 1));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    view_clear(&v);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, "/t/grp/first/y" SUFFIX, -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------------------ session loss */

/* A thread that samples a handle's state, for "never OUT while joined". */
typedef struct {
    zkr_group_t *g;
    pthread_t t;
    atomic_int stop;
    atomic_int seen[3];
} sampler_t;

static void *sampler_main(void *arg)
{
    sampler_t *sm = arg;

    while (!atomic_load(&sm->stop)) {
        zkr_group_state_t st = zkr_group_state(sm->g);

        if ((int)st >= 0 && (int)st < 3)
            atomic_fetch_add(&sm->seen[st], 1);
        usleep(200);
    }
    return NULL;
}

static void sampler_start(sampler_t *sm, zkr_group_t *g)
{
    memset(sm, 0, sizeof(*sm));
    sm->g = g;
    assert_int_equal(pthread_create(&sm->t, NULL, sampler_main, sm), 0);
}

static void sampler_stop(sampler_t *sm)
{
    atomic_store(&sm->stop, 1);
    pthread_join(sm->t, NULL);
}

/* The joined handle's session expires (the harness takes it over and
 * closes it): its node is made again on the new session with the same id
 * and data, the handle never out meanwhile; its view and another
 * session's are the server's. */
static void test_expiry_rejoins(void **state)
{
    const char *p = "/t/grp/expiry";
    zkr_session_t *s = open_session(ST), *s2 = open_session(ST);
    static rec_t r, r2;
    zkr_group_t *g, *g2;
    static sampler_t sm;
    char node[128], data[32];
    struct Stat st;
    int64_t sid, czxid;

    (void)state;
    rec_init(&r);
    rec_init(&r2);
    g = new_group(s, p, &r);
    g2 = new_group(s2, p, &r2);
    assert_int_equal(zkr_group_join(g, "e1", "payload", -1, zkt_scaled_ms(ST)),
                     0);
    node_of(node, sizeof(node), p, "e1");
    assert_int_equal(raw_stat(node, &st), ZOK);
    czxid = st.czxid;
    sid = zkr_session_id(s);
    wait_rec_matches(&r, p, "e1" SUFFIX, sid, zkt_scaled_ms(ST));
    sampler_start(&sm, g);
    expire(s);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_id(s) != sid &&
                                   zkr_session_id(s) != 0 &&
                                   raw_stat(node, &st) == ZOK &&
                                   st.ephemeralOwner == zkr_session_id(s),
                               zkt_scaled_ms(3 * ST)));
    assert_true(st.czxid > czxid);
    assert_int_equal(raw_data(node, data, sizeof(data), NULL), 7);
    assert_string_equal(data, "payload");
    assert_true(
        ZKT_WAIT_UNTIL(zkr_group_state(g) == ZKR_GROUP_IN, zkt_scaled_ms(ST)));
    sampler_stop(&sm);
    print_message("# states sampled: OUT %d, JOINING %d, IN %d\n",
                  atomic_load(&sm.seen[0]), atomic_load(&sm.seen[1]),
                  atomic_load(&sm.seen[2]));
    assert_int_equal(atomic_load(&sm.seen[ZKR_GROUP_OUT]), 0);
    assert_int_equal(party_nodes(p), 1);
    wait_rec_matches(&r, p, "e1" SUFFIX, zkr_session_id(s), zkt_scaled_ms(ST));
    wait_rec_matches(&r2, p, NULL, 0, zkt_scaled_ms(ST));
    {
        view_t v = {0};

        assert_int_equal(members_view(g, 0, &v), 0);
        assert_true(
            view_matches_server(&v, p, "e1" SUFFIX, zkr_session_id(s), 1));
        view_clear(&v);
    }
    rec_check(&r);
    rec_check(&r2);
    zkr_group_free(g);
    zkr_group_free(g2);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    rec_destroy(&r);
    rec_destroy(&r2);
    assert_int_equal(zkr_session_free(s), 0);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* The joined handle's connection is cut until the server has expired the
 * session: the view stays as it was while not connected, the state is
 * JOINING once the session is lost (the node is gone), and once connected
 * again the node is made on the new session with the same data (IN), and
 * the view is the server's, with what changed meanwhile. */
static void test_expiry_while_cut_joining(void **state)
{
    enum { T = 4000 };
    const char *p = "/t/grp/cut-expiry";
    zkr_session_t *s = open_proxied(T);
    static rec_t r;
    zkr_group_t *g;
    char node[128], data[32];
    struct Stat st;
    int64_t sid;
    int views;
    view_t before = {0}, v = {0};

    (void)state;
    rec_init(&r);
    g = new_group(s, p, &r);
    assert_int_equal(zkr_group_join(g, "j1", "jd", -1, zkt_scaled_ms(ST)), 0);
    node_of(node, sizeof(node), p, "j1");
    sid = zkr_session_id(s);
    wait_rec_matches(&r, p, "j1" SUFFIX, sid, zkt_scaled_ms(ST));
    assert_int_equal(members_view(g, 0, &before), 0);
    views = rec_views(&r);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    /* Meanwhile another member comes. */
    raw_member(p, "q" SUFFIX, "q", ZOO_EPHEMERAL);
    /* The server expires the session (the node goes): zkr, whose safe
     * deadline comes first, has declared it lost. */
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(3 * T)));
    if (!ZKT_WAIT_UNTIL(zkr_group_state(g) == ZKR_GROUP_JOINING,
                        zkt_scaled_ms(T)))
        fail_msg("the node expired with the session (%s, id %llx): the "
                 "handle is %d, not JOINING (%d)",
                 zkr_state_name(zkr_session_state(s)),
                 (unsigned long long)zkr_session_id(s), zkr_group_state(g),
                 ZKR_GROUP_JOINING);
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_JOINING);
    /* Not connected: the last view stays. */
    assert_int_equal(rec_views(&r), views);
    assert_int_equal(members_view(g, 0, &v), 0);
    assert_int_equal(v.n, before.n);
    for (int i = 0; i < v.n; i++) {
        assert_string_equal(v.m[i].name, before.m[i].name);
        assert_int_equal(v.m[i].czxid, before.m[i].czxid);
    }
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkr_session_id(s) != sid &&
                                   zkr_session_id(s) != 0 &&
                                   raw_stat(node, &st) == ZOK &&
                                   st.ephemeralOwner == zkr_session_id(s),
                               zkt_scaled_ms(3 * T)));
    assert_true(
        ZKT_WAIT_UNTIL(zkr_group_state(g) == ZKR_GROUP_IN, zkt_scaled_ms(T)));
    assert_int_equal(raw_data(node, data, sizeof(data), NULL), 2);
    assert_string_equal(data, "jd");
    wait_rec_matches(&r, p, "j1" SUFFIX, zkr_session_id(s), zkt_scaled_ms(ST));
    assert_true(rec_has(&r, "q" SUFFIX, 0, "q"));
    rec_check(&r);
    view_clear(&before);
    view_clear(&v);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, "/t/grp/cut-expiry/q" SUFFIX, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A session that is not re-created (no_reconnect) is lost while a join
 * waits: the join ends with ZKR_ELOST. */
static void test_join_ends_lost(void **state)
{
    const char *p = "/t/grp/lost";
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_group_t *g;
    static done_t d;

    (void)state;
    o.no_reconnect = 1;
    assert_int_equal(zkr_session_open(&s, zkt_server_hosts(server), ST, &o), 0);
    raw_ensure(p);
    raw_member(p, "held" SUFFIX, "h", ZOO_EPHEMERAL);
    g = new_group(s, p, NULL);
    done_init(&d);
    assert_int_equal(zkr_group_async(g, 0, "held", NULL, -1, -1, on_done, &d),
                     0);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_int_equal(atomic_load(&d.n), 0);
    expire(s);
    assert_int_equal(done_rc(&d, zkt_scaled_ms(2 * ST)), ZKR_ELOST);
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&d.n), 1);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, "/t/grp/lost/held" SUFFIX, -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

/* --------------------------------------------------- cut connections */

/* The create's answer is lost with the connection: once connected again
 * the join finds its node (the same session's): one node, it stands, the
 * join returns 0. With the connection then blackholed, the join cannot
 * learn of its node by its timeout: ZKR_ETIMEDOUT, out, and the node
 * (made on the server) is deleted once connected again. */
static void test_create_answer_lost(void **state)
{
    const char *p = "/t/grp/lost-answer";
    zkr_session_t *s = open_proxied(ST);
    zkr_group_t *g = new_group(s, p, NULL), *g2 = new_group(s, p, NULL);
    char node[128];
    struct Stat st;

    (void)state;
    raw_ensure(p);
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
    assert_int_equal(zkr_group_join(g, "c1", NULL, -1, zkt_scaled_ms(3 * ST)),
                     0);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    node_of(node, sizeof(node), p, "c1");
    assert_int_equal(raw_stat(node, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s));
    assert_int_equal(party_nodes(p), 1);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_int_equal(party_nodes(p), 1);
    assert_int_equal(raw_stat(node, &st), ZOK);
    /* The answer lost, and no way back before the timeout. */
    assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply-blackhole"), 0);
    assert_int_equal(zkr_group_join(g2, "c2", NULL, -1, 1000), ZKR_ETIMEDOUT);
    assert_int_equal(zkr_group_state(g2), ZKR_GROUP_OUT);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    node_of(node, sizeof(node), p, "c2");
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(2 * ST)));
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(raw_exists(node));
    assert_int_equal(zkr_group_state(g2), ZKR_GROUP_OUT);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    assert_int_equal(party_nodes(p), 1);
    zkr_group_free(g);
    zkr_group_free(g2);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    assert_int_equal(zkr_session_free(s), 0);
}

/* A leave while not connected: with a timeout, ZKR_ETIMEDOUT, and the
 * node is deleted once connected again (not made again); asynchronous,
 * it ends 0 once it is; meanwhile a join is ZKR_ESTATE. */
static void test_leave_while_cut(void **state)
{
    const char *p = "/t/grp/leave-cut";
    zkr_session_t *s = open_proxied(ST);
    zkr_group_t *g = new_group(s, p, NULL);
    char node[128];
    static done_t d;

    (void)state;
    node_of(node, sizeof(node), p, "l1");
    assert_int_equal(zkr_group_join(g, "l1", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    assert_int_equal(zkr_group_leave(g, 300), ZKR_ETIMEDOUT);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(2 * ST)));
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(raw_exists(node));
    assert_true(
        ZKT_WAIT_UNTIL(zkr_group_state(g) == ZKR_GROUP_OUT, zkt_scaled_ms(ST)));
    /* Asynchronous. */
    assert_int_equal(zkr_group_join(g, "l1", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_true(raw_exists(node));
    assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
    done_init(&d);
    assert_int_equal(zkr_group_async(g, 1, NULL, NULL, 0, -1, on_done, &d), 0);
    assert_int_equal(zkr_group_join(g, "l2", NULL, -1, 100), ZKR_ESTATE);
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(atomic_load(&d.n), 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_int_equal(done_rc(&d, zkt_scaled_ms(2 * ST)), 0);
    assert_false(raw_exists(node));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    zkr_group_free(g);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ----------------------------------------------------- id held elsewhere */

/* The id held by another session: a join with a short timeout ends
 * ZKR_ETIMEDOUT, leaving no node of its own (the other's stands); once
 * the other leaves, a join succeeds. A join waiting without a timeout
 * (asynchronous, JOINING meanwhile; a leave is ZKR_ESTATE) ends 0 once
 * the holder's session is closed. */
static void test_id_held_elsewhere(void **state)
{
    const char *p = "/t/grp/held";
    zkr_session_t *s1 = open_session(ST), *s2 = open_session(ST),
                  *s3 = open_session(ST);
    zkr_group_t *g1 = new_group(s1, p, NULL), *g2 = new_group(s2, p, NULL),
                *g3 = new_group(s3, p, NULL);
    char node[128];
    struct Stat st;
    int64_t t0;
    zhandle_t *holder;
    static done_t d;

    (void)state;
    node_of(node, sizeof(node), p, "dup");
    assert_int_equal(zkr_group_join(g1, "dup", "one", -1, zkt_scaled_ms(ST)),
                     0);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_group_join(g2, "dup", "two", -1, 500), ZKR_ETIMEDOUT);
    assert_true(zkt_now_ms() - t0 >= 500);
    assert_int_equal(zkr_group_state(g2), ZKR_GROUP_OUT);
    assert_int_equal(raw_stat(node, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s1));
    assert_int_equal(party_nodes(p), 1);
    /* The holder leaves: g2 is out, nothing of it comes. */
    assert_int_equal(zkr_group_leave(g1, zkt_scaled_ms(ST)), 0);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(raw_exists(node));
    assert_int_equal(zkr_group_join(g2, "dup", "two", -1, zkt_scaled_ms(ST)),
                     0);
    assert_int_equal(raw_stat(node, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s2));
    assert_int_equal(zkr_group_join(g1, "dup", "one", -1, 300), ZKR_ETIMEDOUT);
    assert_int_equal(raw_stat(node, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s2));
    assert_int_equal(zkr_group_leave(g2, zkt_scaled_ms(ST)), 0);

    /* Held by another client's session: a join without a timeout waits
     * until that session is closed. */
    holder = zkt_connect(zkt_server_hosts(server), ST);
    assert_non_null(holder);
    assert_int_equal(zoo_create(holder, node, "h", 1, &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    done_init(&d);
    assert_int_equal(
        zkr_group_async(g3, 0, "dup", "three", -1, -1, on_done, &d), 0);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_int_equal(atomic_load(&d.n), 0);
    assert_int_equal(zkr_group_state(g3), ZKR_GROUP_JOINING);
    assert_int_equal(zkr_group_leave(g3, 100), ZKR_ESTATE);
    {
        int rc = zkr_group_join(g3, "dup", NULL, -1, 100);

        assert_true(rc == ZKR_EALREADY || rc == ZKR_ESTATE);
    }
    zookeeper_close(holder);
    assert_int_equal(done_rc(&d, zkt_scaled_ms(2 * ST)), 0);
    assert_int_equal(zkr_group_state(g3), ZKR_GROUP_IN);
    assert_int_equal(raw_stat(node, &st), ZOK);
    assert_int_equal(st.ephemeralOwner, zkr_session_id(s3));
    {
        char data[16];

        assert_int_equal(raw_data(node, data, sizeof(data), NULL), 5);
        assert_string_equal(data, "three");
    }
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&d.n), 1);
    zkr_group_free(g1);
    zkr_group_free(g2);
    zkr_group_free(g3);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    assert_int_equal(zkr_session_free(s1), 0);
    assert_int_equal(zkr_session_free(s2), 0);
    assert_int_equal(zkr_session_free(s3), 0);
}

/* --------------------------------------------- a storm and cut links */

/* Another client writing fast: members (ephemeral `wNN__party__`) and
 * children that are no members (`oNN`) created, deleted and written, one
 * request after the other. */
typedef struct {
    zhandle_t *zh;
    const char *path;
    pthread_t t;
    atomic_int stop;
    atomic_long ops;
    atomic_int errors;
    unsigned seed;
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;

    while (!atomic_load(&w->stop)) {
        int k = (int)(rand_r(&w->seed) % 20),
            what = (int)(rand_r(&w->seed) % 3);
        long op = atomic_load(&w->ops);
        char node[128], data[32];
        int rc;

        if (k < 16)
            snprintf(node, sizeof(node), "%s/w%02d" SUFFIX, w->path, k);
        else
            snprintf(node, sizeof(node), "%s/o%02d", w->path, k);
        snprintf(data, sizeof(data), "d%ld", op);
        if (what == 0) {
            rc = zoo_create(w->zh, node, data, (int)strlen(data),
                            &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0);
            atomic_fetch_add(&w->errors, rc != ZOK && rc != ZNODEEXISTS);
        } else if (what == 1) {
            rc = zoo_delete(w->zh, node, -1);
            atomic_fetch_add(&w->errors, rc != ZOK && rc != ZNONODE);
        } else {
            rc = zoo_set(w->zh, node, data, (int)strlen(data), -1);
            atomic_fetch_add(&w->errors, rc != ZOK && rc != ZNONODE);
        }
        atomic_fetch_add(&w->ops, 1);
    }
    return NULL;
}

static void wait_ops(writer_t *w, long n)
{
    if (!ZKT_WAIT_UNTIL(atomic_load(&w->ops) >= n, zkt_scaled_ms(6 * ST)))
        fail_msg("the writer made %ld requests, not %ld", atomic_load(&w->ops),
                 n);
}

/* A joined viewer, through the proxy, while another client makes
 * thousands of changes, its connection reset and blackholed (less than
 * the session timeout) a few times: its views never go back in zxid,
 * and once the writer stops its view is the server's (its own node
 * standing, on the same session); then the writer's session closes and
 * the view is its own node alone. */
static void test_storm_with_cuts(void **state)
{
    enum { OPS = 4000 };
    const char *p = "/t/grp/storm";
    zkr_session_t *s = open_proxied(ST);
    static rec_t r;
    zkr_group_t *g;
    static writer_t w;
    int64_t sid;
    view_t v = {0};

    (void)state;
    rec_init(&r);
    raw_ensure(p);
    g = new_group(s, p, &r);
    assert_int_equal(zkr_group_join(g, "viewer", NULL, -1, zkt_scaled_ms(ST)),
                     0);
    sid = zkr_session_id(s);
    memset(&w, 0, sizeof(w));
    w.path = p;
    w.seed = 12345;
    w.zh = zkt_connect(zkt_server_hosts(server), ST);
    assert_non_null(w.zh);
    assert_int_equal(pthread_create(&w.t, NULL, writer_main, &w), 0);
    for (int i = 0; i < 3; i++) {
        wait_ops(&w, (long)(i * 2 + 1) * OPS / 8);
        assert_int_equal(zkt_proxy_cmd(proxy, "reset"), 0);
        wait_ops(&w, (long)(i * 2 + 2) * OPS / 8);
        assert_int_equal(zkt_proxy_cmd(proxy, "blackhole"), 0);
        zkt_sleep_ms(ST / 10);
        assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    }
    wait_ops(&w, OPS);
    atomic_store(&w.stop, 1);
    pthread_join(w.t, NULL);
    assert_int_equal(atomic_load(&w.errors), 0);
    wait_rec_matches(&r, p, "viewer" SUFFIX, sid, zkt_scaled_ms(2 * ST));
    assert_int_equal(zkr_session_id(s), sid);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    assert_int_equal(members_view(g, 0, &v), 0);
    assert_true(view_matches_server(&v, p, "viewer" SUFFIX, sid, 1));
    print_message("# %ld requests, %d views\n", atomic_load(&w.ops),
                  rec_views(&r));
    /* The writer's session closes: its members go. */
    zookeeper_close(w.zh);
    wait_rec_matches(&r, p, "viewer" SUFFIX, sid, zkt_scaled_ms(ST));
    assert_int_equal(rec_last_n(&r), 1);
    rec_check(&r);
    view_clear(&v);
    zkr_group_free(g);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* -------------------------------------------------------- callbacks */

/* A listener frees its own handle (joined): it is not called again, and
 * the node goes; another listener frees a second handle of the session
 * (joined): that one's listener is not called again either, its node
 * goes too. The session then closes: no handle left open. */
static void test_free_from_listener(void **state)
{
    const char *p = "/t/grp/free-cb";
    zkr_session_t *s = open_session(ST), *s2 = open_session(ST);
    static rec_t r1, r2, r3;
    zkr_group_t *g1, *g2, *g3;
    char node1[128], node2[128];

    (void)state;
    rec_init(&r1);
    rec_init(&r2);
    rec_init(&r3);
    node_of(node1, sizeof(node1), p, "f1");
    node_of(node2, sizeof(node2), p, "f2");
    g1 = new_group(s, p, &r1);
    g2 = new_group(s, p, &r2);
    assert_int_equal(zkr_group_join(g1, "f1", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(zkr_group_join(g2, "f2", NULL, -1, zkt_scaled_ms(ST)), 0);
    wait_rec_matches(&r1, p, "f1" SUFFIX, zkr_session_id(s), zkt_scaled_ms(ST));
    wait_rec_matches(&r2, p, "f2" SUFFIX, zkr_session_id(s), zkt_scaled_ms(ST));
    /* g1's listener, at its next view, frees g2, then g1. */
    pthread_mutex_lock(&r1.mu);
    r1.free_at = r1.views + 1;
    r1.free_also = g2;
    r1.free_also_rec = &r2;
    pthread_mutex_unlock(&r1.mu);
    g3 = new_group(s2, p, &r3);
    assert_int_equal(zkr_group_join(g3, "f3", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_true(ZKT_WAIT_UNTIL(rec_freed(&r1), zkt_scaled_ms(ST)));
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node1) && !raw_exists(node2),
                               zkt_scaled_ms(ST)));
    /* More changes: neither listener hears of them. */
    raw_member(p, "more" SUFFIX, "m", ZOO_EPHEMERAL);
    wait_rec_matches(&r3, p, "f3" SUFFIX, zkr_session_id(s2),
                     zkt_scaled_ms(ST));
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(rec_after_free(&r1), 0);
    assert_int_equal(rec_after_free(&r2), 0);
    assert_false(raw_exists(node1));
    assert_false(raw_exists(node2));
    rec_check(&r1);
    rec_check(&r2);
    assert_int_equal(zkr_session_free(s), 0);
    zkr_group_free(g3);
    assert_int_equal(zoo_delete(raw, "/t/grp/free-cb/more" SUFFIX, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(ST)));
    rec_destroy(&r1);
    rec_destroy(&r2);
    rec_destroy(&r3);
    assert_int_equal(zkr_session_free(s2), 0);
}

/* A free while an asynchronous join waits (its id held by another
 * client): the completion comes once, ZKR_ECANCELED, and the handle
 * makes nothing once the id is free. The same with the join's requests
 * in flight (held by the proxy): ZKR_ECANCELED if the free came first
 * (surely so 100 ms in), and whatever it made is deleted. */
static void test_free_cancels_join(void **state)
{
    const char *p = "/t/grp/cancel";
    zkr_session_t *s = open_proxied(ST);
    zkr_group_t *g;
    char node[128];
    static done_t d;
    int rc;

    (void)state;
    raw_ensure(p);
    node_of(node, sizeof(node), p, "busy");
    raw_member(p, "busy" SUFFIX, "other", ZOO_EPHEMERAL);
    g = new_group(s, p, NULL);
    done_init(&d);
    assert_int_equal(zkr_group_async(g, 0, "busy", NULL, -1, -1, on_done, &d),
                     0);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_int_equal(atomic_load(&d.n), 0);
    zkr_group_free(g);
    assert_int_equal(done_rc(&d, zkt_scaled_ms(ST)), ZKR_ECANCELED);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_false(raw_exists(node));
    assert_int_equal(atomic_load(&d.n), 1);
    /* Requests in flight. */
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    for (int at = 100; at <= 1600; at += 300) {
        g = new_group(s, p, NULL);
        done_init(&d);
        assert_int_equal(
            zkr_group_async(g, 0, "fly", NULL, -1, -1, on_done, &d), 0);
        zkt_sleep_ms(at);
        zkr_group_free(g);
        rc = done_rc(&d, zkt_scaled_ms(ST));
        if (at == 100)
            assert_int_equal(rc, ZKR_ECANCELED);
        else
            assert_true(rc == ZKR_ECANCELED || rc == 0);
        assert_true(ZKT_WAIT_UNTIL(party_nodes(p) == 0, zkt_scaled_ms(2 * ST)));
        assert_int_equal(atomic_load(&d.n), 1);
    }
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkt_sleep_ms(zkt_scaled_ms(500));
    assert_int_equal(party_nodes(p), 0);
    assert_int_equal(zkr_session_free(s), 0);
}

/* Blocking calls from callbacks (the session's requests held 300 ms each
 * way by the proxy, so that no view comes within a callback): from a
 * listener, out of the group, a join is ZKR_EDEADLK and changes nothing;
 * zkr_group_members() gives the view the listener has (no wait: 0, or
 * ZKR_EDEADLK for a call that could wait); a new handle's, before its
 * first view, is ZKR_EDEADLK with a wait (-1 or a timeout) and
 * ZKR_ETIMEDOUT without. From a completion, in the group, a leave is
 * ZKR_EDEADLK, and an asynchronous leave is accepted and ends 0. */
static void test_blocking_from_callbacks(void **state)
{
    const char *p = "/t/grp/deadlk";
    zkr_session_t *s = open_proxied(ST);
    static rec_t r;
    zkr_group_t *g;
    static done_t d;
    char node[128];
    int join, st, mem, mem0, nw, w, w500, look;

    (void)state;
    rec_init(&r);
    r.probe = 1;
    r.probe_session = s;
    r.probe_path = "/t/grp/deadlk-other";
    assert_int_equal(zkt_proxy_cmd(proxy, "delay 300"), 0);
    g = new_group(s, p, &r);
    assert_true(ZKT_WAIT_UNTIL(rec_probed(&r), zkt_scaled_ms(ST)));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    pthread_mutex_lock(&r.mu);
    join = r.probe_join;
    st = r.probe_state;
    mem = r.probe_members;
    mem0 = r.probe_members0;
    nw = r.probe_new;
    w = r.probe_wait;
    w500 = r.probe_wait500;
    look = r.probe_look;
    pthread_mutex_unlock(&r.mu);
    print_message("# from the listener: join %s, members(-1) %s, "
                  "members(0) %s; a new handle's: members(-1) %s, "
                  "members(500) %s, members(0) %s\n",
                  zkr_errname(join), zkr_errname(mem), zkr_errname(mem0),
                  zkr_errname(w), zkr_errname(w500), zkr_errname(look));
    assert_int_equal(join, ZKR_EDEADLK);
    assert_int_equal(st, ZKR_GROUP_OUT);
    assert_true(mem == 0 || mem == ZKR_EDEADLK);
    assert_int_equal(mem0, 0);
    assert_int_equal(nw, 0);
    assert_int_equal(w, ZKR_EDEADLK);
    assert_int_equal(w500, ZKR_EDEADLK);
    assert_int_equal(look, ZKR_ETIMEDOUT);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_int_equal(party_nodes(p), 0);
    /* From a completion. */
    done_init(&d);
    done_init(&probe_leave_done);
    d.probe = 1;
    assert_int_equal(zkr_group_async(g, 0, "dl", NULL, -1, -1, on_done, &d), 0);
    assert_int_equal(done_rc(&d, zkt_scaled_ms(ST)), 0);
    assert_int_equal(d.probe_leave, ZKR_EDEADLK);
    assert_true(d.probe_members == 0 || d.probe_members == ZKR_EDEADLK);
    assert_int_equal(d.probe_async, 0);
    assert_int_equal(done_rc(&probe_leave_done, zkt_scaled_ms(ST)), 0);
    node_of(node, sizeof(node), p, "dl");
    assert_false(raw_exists(node));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    zkt_sleep_ms(zkt_scaled_ms(200));
    assert_int_equal(atomic_load(&d.n), 1);
    assert_int_equal(atomic_load(&probe_leave_done.n), 1);
    rec_check(&r);
    zkr_group_free(g);
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------------------- settling the last node */

/* The proxy holds every forwarded chunk ms ms, both ways. */
static void link_delay(int ms)
{
    char cmd[32];

    snprintf(cmd, sizeof(cmd), "delay %d", ms);
    assert_int_equal(zkt_proxy_cmd(proxy, cmd), 0);
}

/* The node stands all along ms, the one made at czxid by session owner,
 * as another client polls it. */
static void stands_for(const char *node, int64_t czxid, int64_t owner, int ms)
{
    int64_t end = zkt_now_ms() + ms;

    do {
        struct Stat st;
        int rc = raw_stat(node, &st);

        if (rc != ZOK || st.czxid != czxid || st.ephemeralOwner != owner)
            fail_msg("%s: %s (czxid %lld, owner 0x%llx), not the node made "
                     "at %lld by 0x%llx",
                     node, rc == ZOK ? "stands" : "gone",
                     (long long)(rc == ZOK ? st.czxid : 0),
                     (unsigned long long)(rc == ZOK ? st.ephemeralOwner : 0),
                     (long long)czxid, (unsigned long long)owner);
        zkt_sleep_ms(5);
    } while (zkt_now_ms() < end);
}

/* No node of session sid stands at node all along ms, as another client
 * polls it. */
static void none_of_ours_for(const char *node, int64_t sid, int ms)
{
    int64_t end = zkt_now_ms() + ms;

    do {
        struct Stat st;

        if (raw_stat(node, &st) == ZOK && st.ephemeralOwner == sid)
            fail_msg("%s stands, made at %lld by our session 0x%llx", node,
                     (long long)st.czxid, (unsigned long long)sid);
        zkt_sleep_ms(5);
    } while (zkt_now_ms() < end);
}

/* An id held by another client: a join of it that times out while its
 * create is in flight (timeout D/3, the link holding each way D), or
 * while the read of the node after the create's ZNODEEXISTS is (3 D:
 * the create answered at 2 D, the read at 4 D), then a join with another
 * id: that one is joined, and the other client's node stands all along,
 * never deleted (zkr.h: a join with another id deletes the node a join
 * not confirmed may have made; [G5]: that node is settled as [G2],
 * deleted only if this session owns it). */
static void test_other_id_after_timed_out_join(void **state)
{
    const char *p = "/t/grp/idswitch";
    const int d = zkt_scaled_ms(300), tmo[2] = {d / 3, 3 * d};
    zkr_session_t *s = open_proxied(ST);
    zkr_group_t *g = new_group(s, p, NULL);
    char nx[128], ny[128];
    struct Stat st;
    int64_t czxid, owner, sid = zkr_session_id(s);
    view_t v = {0};

    (void)state;
    node_of(nx, sizeof(nx), p, "x");
    node_of(ny, sizeof(ny), p, "y");
    raw_ensure(p);
    raw_member(p, "x" SUFFIX, "other", ZOO_EPHEMERAL);
    assert_int_equal(raw_stat(nx, &st), ZOK);
    czxid = st.czxid;
    owner = st.ephemeralOwner;
    /* The view read before the link slows: only the keeper's requests
     * are in flight from then on. */
    assert_true(ZKT_WAIT_UNTIL(members_view(g, 0, &v) == 0 && v.n == 1,
                               zkt_scaled_ms(ST)));
    view_clear(&v);
    link_delay(d);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(zkr_group_join(g, "x", NULL, -1, tmo[i]),
                         ZKR_ETIMEDOUT);
        assert_int_equal(zkr_group_join(g, "y", NULL, -1, zkt_scaled_ms(ST)),
                         0);
        assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
        assert_int_equal(raw_stat(ny, &st), ZOK);
        assert_int_equal(st.ephemeralOwner, sid);
        stands_for(nx, czxid, owner, 0);
        assert_int_equal(zkr_group_leave(g, zkt_scaled_ms(ST)), 0);
        assert_false(raw_exists(ny));
    }
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    stands_for(nx, czxid, owner, zkt_scaled_ms(ST / 5));
    zkr_group_free(g);
    stands_for(nx, czxid, owner, zkt_scaled_ms(ST / 10));
    assert_int_equal(zoo_delete(raw, nx, -1), ZOK);
    assert_int_equal(zkr_session_free(s), 0);
}

static done_t lost_other_done;

/* An id held by another client, and the answer to our create of it lost
 * (the proxy drops it and resets the connection): the keeper makes it
 * again, finds the other session's node, and waits for it to go (exists
 * with a watch). That create made nothing: the other client's node is
 * not ours to delete ([G5]), neither by zkr_group_free() nor by a join
 * with another id after the join timed out: it stands all along. The
 * other's node lets nobody read it, so that the view's read of it (a
 * getData with a watch) is refused and sets no watch: the session's
 * watch on it is then the keeper's, and says when it waits. */
static void test_lost_create_keeps_others_node(void **state)
{
    const char *p = "/t/grp/lost-other";
    struct ACL noread = {ZOO_PERM_WRITE | ZOO_PERM_CREATE | ZOO_PERM_DELETE |
                             ZOO_PERM_ADMIN,
                         {"world", "anyone"}};
    struct ACL_vector acl = {1, &noread};
    const int d = zkt_scaled_ms(300);
    char nx[128], ny[128];

    (void)state;
    node_of(nx, sizeof(nx), p, "x");
    node_of(ny, sizeof(ny), p, "y");
    raw_ensure(p);
    for (int freed = 1; freed >= 0; freed--) {
        zkr_session_t *s = open_proxied(ST);
        int64_t sid = zkr_session_id(s), czxid, owner;
        zkr_group_t *g;
        struct Stat st;
        view_t v = {0};

        assert_int_equal(
            zoo_create(raw, nx, "other", 5, &acl, ZOO_EPHEMERAL, NULL, 0), ZOK);
        assert_int_equal(raw_stat(nx, &st), ZOK);
        czxid = st.czxid;
        owner = st.ephemeralOwner;
        g = new_group(s, p, NULL);
        assert_true(ZKT_WAIT_UNTIL(members_view(g, 0, &v) == 0 && v.n == 1,
                                   zkt_scaled_ms(ST)));
        view_clear(&v);
        assert_false(session_watches(sid, nx));
        assert_int_equal(zkt_proxy_cmd(proxy, "drop-create-reply"), 0);
        done_init(&lost_other_done);
        assert_int_equal(zkr_group_async(g, 0, "x", NULL, -1,
                                         freed ? -1 : zkt_scaled_ms(ST / 5),
                                         on_done, &lost_other_done),
                         0);
        if (!ZKT_WAIT_UNTIL(session_watches(sid, nx), zkt_scaled_ms(ST / 5)))
            fail_msg("the keeper does not wait for the other's node");
        assert_int_equal(atomic_load(&lost_other_done.n), 0);
        assert_int_equal(zkr_group_state(g), ZKR_GROUP_JOINING);
        if (freed) {
            zkr_group_free(g);
            assert_int_equal(done_rc(&lost_other_done, zkt_scaled_ms(ST)),
                             ZKR_ECANCELED);
        } else {
            /* The link slow from the timeout on, so that the join with
             * another id comes before anything the keeper sends then. */
            link_delay(d);
            assert_int_equal(done_rc(&lost_other_done, zkt_scaled_ms(ST)),
                             ZKR_ETIMEDOUT);
            assert_int_equal(
                zkr_group_join(g, "y", NULL, -1, zkt_scaled_ms(ST)), 0);
            assert_int_equal(raw_stat(ny, &st), ZOK);
            assert_int_equal(st.ephemeralOwner, sid);
            stands_for(nx, czxid, owner, 0);
            assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
        }
        stands_for(nx, czxid, owner, zkt_scaled_ms(ST / 5));
        if (!freed)
            zkr_group_free(g);
        assert_int_equal(zkr_session_free(s), 0);
        assert_int_equal(zoo_delete(raw, nx, -1), ZOK);
        assert_false(raw_exists(ny));
    }
}

/* A leave not confirmed (timeout 0, the link holding each way D: the
 * node still stands), then a join with the same id and other data: it
 * returns 0 once the node stands on the session with the new data, on
 * the server right then (zkr.h: it writes its new data before it
 * returns). With the node's ACL refusing writes, the join ends with the
 * server's ZNOAUTH, out of the group, and the node is deleted ([G5]). */
static void test_rejoin_same_id_writes_data(void **state)
{
    const char *p = "/t/grp/rejoin-data", *pr = "/t/grp/rejoin-ro/g";
    struct ACL nowrite = {ZOO_PERM_READ | ZOO_PERM_DELETE | ZOO_PERM_CREATE,
                          {"world", "anyone"}};
    struct ACL_vector acl = {1, &nowrite};
    const int d = zkt_scaled_ms(300);
    zkr_session_t *s = open_proxied(ST);
    int64_t sid = zkr_session_id(s);
    zkr_group_t *g = new_group(s, p, NULL);
    char node[128], data[16];
    struct Stat st;

    (void)state;
    node_of(node, sizeof(node), p, "m");
    assert_int_equal(zkr_group_join(g, "m", "AAAA", -1, zkt_scaled_ms(ST)), 0);
    link_delay(d);
    assert_int_equal(zkr_group_leave(g, 0), ZKR_ETIMEDOUT);
    assert_true(raw_exists(node));
    assert_int_equal(zkr_group_join(g, "m", "BBBB", -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(raw_data(node, data, sizeof(data), &st), 4);
    assert_string_equal(data, "BBBB");
    assert_int_equal(st.ephemeralOwner, sid);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_group_free(g);
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(ST)));

    /* The node may not be written. */
    raw_ensure("/t/grp/rejoin-ro");
    assert_int_equal(zkr_group_new(&g, s, pr, &acl, NULL, NULL), 0);
    node_of(node, sizeof(node), pr, "m");
    assert_int_equal(zkr_group_join(g, "m", "AAAA", -1, zkt_scaled_ms(ST)), 0);
    link_delay(d);
    assert_int_equal(zkr_group_leave(g, 0), ZKR_ETIMEDOUT);
    assert_true(raw_exists(node));
    assert_int_equal(zkr_group_join(g, "m", "BBBB", -1, zkt_scaled_ms(ST)),
                     ZNOAUTH);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_true(raw_data(node, data, sizeof(data), NULL) < 0 ||
                strcmp(data, "AAAA") == 0);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(ST)));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    zkr_group_free(g);
    assert_int_equal(zkr_session_free(s), 0);
}

/* A leave not confirmed (timeout 0, the link holding each way D) whose
 * delete has reached the server (its answer D away), then a join with
 * the same id: it does not return before the delete's outcome ([G5]);
 * once it returns 0 the node stands on the session, and keeps standing
 * (the same node: its czxid) while nobody touches it. */
static void test_rejoin_waits_for_delete(void **state)
{
    const char *p = "/t/grp/rejoin-del";
    const int d = zkt_scaled_ms(300);
    zkr_session_t *s = open_proxied(ST);
    int64_t sid = zkr_session_id(s), czxid;
    zkr_group_t *g = new_group(s, p, NULL);
    char node[128];
    struct Stat st;

    (void)state;
    node_of(node, sizeof(node), p, "m");
    assert_int_equal(zkr_group_join(g, "m", NULL, -1, zkt_scaled_ms(ST)), 0);
    assert_int_equal(raw_stat(node, &st), ZOK);
    czxid = st.czxid;
    link_delay(d);
    assert_int_equal(zkr_group_leave(g, 0), ZKR_ETIMEDOUT);
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(ST)));
    assert_int_equal(zkr_group_join(g, "m", NULL, -1, zkt_scaled_ms(ST)), 0);
    if (raw_stat(node, &st) != ZOK)
        fail_msg("the join returned 0, and %s is gone", node);
    assert_int_equal(st.ephemeralOwner, sid);
    assert_true(st.czxid > czxid);
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_IN);
    stands_for(node, st.czxid, sid, zkt_scaled_ms(ST / 5));
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    zkr_group_free(g);
    assert_true(ZKT_WAIT_UNTIL(!raw_exists(node), zkt_scaled_ms(ST)));
    assert_int_equal(zkr_session_free(s), 0);
}

/* Joined, and the node deleted by another client: the keeper makes it
 * again (JOINING, its create in flight for 2 D on the slow link); a leave
 * then returns 0 only once no node of ours may stand ([G2], [G5]): from
 * then on none stands, as another client polls it for a while. */
static void test_leave_waits_for_create(void **state)
{
    const char *p = "/t/grp/leave-create";
    const int d = zkt_scaled_ms(300);
    zkr_session_t *s = open_proxied(ST);
    int64_t sid = zkr_session_id(s);
    zkr_group_t *g = new_group(s, p, NULL);
    char node[128];

    (void)state;
    node_of(node, sizeof(node), p, "m");
    assert_int_equal(zkr_group_join(g, "m", NULL, -1, zkt_scaled_ms(ST)), 0);
    link_delay(d);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(zkr_group_state(g) == ZKR_GROUP_JOINING,
                               zkt_scaled_ms(ST)));
    assert_int_equal(zkr_group_leave(g, zkt_scaled_ms(ST)), 0);
    none_of_ours_for(node, sid, zkt_scaled_ms(ST / 5));
    assert_int_equal(zkr_group_state(g), ZKR_GROUP_OUT);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    none_of_ours_for(node, sid, zkt_scaled_ms(ST / 20));
    zkr_group_free(g);
    assert_int_equal(zkr_session_free(s), 0);
}

/* ------------------------------- the same data, ids beyond U+FFFF */

/* A cache of the group's path, beside it: its views, and the version of
 * the member o's node in the last. */
static atomic_int same_cache_views, same_cache_version;

static void on_same_cache(zkr_cache_t *c, const zkr_cache_entry_t *e, int n,
                          int64_t zxid, void *data)
{
    (void)c;
    (void)zxid;
    (void)data;
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].name, "o" SUFFIX) == 0)
            atomic_store(&same_cache_version, e[i].stat.version);
    atomic_fetch_add(&same_cache_views, 1);
}

/* A member's node written five times with the data it holds: no new
 * view (zkr.h: a view is published when the members, their data or
 * their nodes' creation differ; [G3]), while a CHILDREN_DATA cache of
 * the same path reports each write (the versions differ). Another
 * member joining then is the group's next view, its only one (a view
 * is published once every member is read after its last event: [G3], so
 * the member written was read again by then). */
static void test_same_data_writes_no_view(void **state)
{
    const char *p = "/t/grp/samedata";
    zkr_session_t *s = open_session(ST);
    static rec_t r;
    zkr_group_t *g;
    zkr_cache_t *c = NULL;
    char node[128];
    int views, cviews;

    (void)state;
    rec_init(&r);
    node_of(node, sizeof(node), p, "o");
    raw_ensure(p);
    raw_member(p, "o" SUFFIX, "same", ZOO_EPHEMERAL);
    atomic_store(&same_cache_views, 0);
    atomic_store(&same_cache_version, -1);
    g = new_group(s, p, &r);
    assert_int_equal(
        zkr_cache_new(&c, s, p, ZKR_CACHE_CHILDREN_DATA, on_same_cache, NULL),
        0);
    wait_rec_matches(&r, p, NULL, 0, zkt_scaled_ms(ST));
    assert_true(ZKT_WAIT_UNTIL(atomic_load(&same_cache_version) == 0,
                               zkt_scaled_ms(ST)));
    views = rec_views(&r);
    cviews = atomic_load(&same_cache_views);
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(zoo_set(raw, node, "same", 4, -1), ZOK);
        if (!ZKT_WAIT_UNTIL(atomic_load(&same_cache_version) == i,
                            zkt_scaled_ms(ST)))
            fail_msg("the cache did not report write %d", i);
    }
    assert_int_equal(atomic_load(&same_cache_views), cviews + 5);
    raw_member(p, "z" SUFFIX, "z", ZOO_EPHEMERAL);
    assert_true(
        ZKT_WAIT_UNTIL(rec_has(&r, "z" SUFFIX, 0, "z"), zkt_scaled_ms(ST)));
    wait_rec_matches(&r, p, NULL, 0, zkt_scaled_ms(ST));
    if (rec_views(&r) != views + 1)
        fail_msg("%d views after five writes of the same data and a member "
                 "joining, 1 expected",
                 rec_views(&r) - views);
    rec_check(&r);
    zkr_cache_free(c);
    zkr_group_free(g);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_int_equal(zoo_delete(raw, "/t/grp/samedata/z" SUFFIX, -1), ZOK);
    rec_destroy(&r);
    assert_int_equal(zkr_session_free(s), 0);
}

/* An id with a character beyond U+FFFF (4 bytes of UTF-8: an emoji, the
 * first and the last of the planes) is what ZooKeeper refuses in a name
 * (zkr.h: U+FFF0 and above): ZBADARGUMENTS from the call, blocking or
 * not, before anything is sent: back sooner than any answer could come
 * (the link holds each way D), no completion, PATH not made. */
static void test_id_supplementary_refused(void **state)
{
    static const char *const ids[] = {"w\xf0\x9f\x98\x80", "\xf0\x90\x80\x80",
                                      "a\xf4\x8f\xbf\xbfz"};
    const char *p = "/t/grp/emoji/path";
    const int d = zkt_scaled_ms(300);
    zkr_session_t *s = open_proxied(ST);
    zkr_group_t *g;
    int64_t t0;

    (void)state;
    link_delay(d);
    g = new_group(s, p, NULL);
    t0 = zkt_now_ms();
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        bad_join(g, p, ids[i], NULL, -1, zkt_scaled_ms(ST));
    assert_true(zkt_now_ms() - t0 < 2 * d);
    assert_int_equal(zkt_proxy_cmd(proxy, "pass"), 0);
    assert_false(raw_exists("/t/grp/emoji"));
    zkr_group_free(g);
    assert_int_equal(zkr_session_free(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_free_creates_nothing),
        cmocka_unit_test(test_join_layout),
        cmocka_unit_test(test_join_defaults_and_len),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_id_c1_control_refused),
        cmocka_unit_test(test_server_refuses_node),
        cmocka_unit_test(test_server_refuses_path),
        cmocka_unit_test(test_views_two_sessions),
        cmocka_unit_test(test_kazoo_layout),
        cmocka_unit_test(test_listener_order),
        cmocka_unit_test(test_path_deleted_and_made_again),
        cmocka_unit_test(test_fd),
        cmocka_unit_test(test_members_timeout),
        cmocka_unit_test(test_expiry_rejoins),
        cmocka_unit_test(test_expiry_while_cut_joining),
        cmocka_unit_test(test_join_ends_lost),
        cmocka_unit_test(test_create_answer_lost),
        cmocka_unit_test(test_leave_while_cut),
        cmocka_unit_test(test_id_held_elsewhere),
        cmocka_unit_test(test_storm_with_cuts),
        cmocka_unit_test(test_free_from_listener),
        cmocka_unit_test(test_free_cancels_join),
        cmocka_unit_test(test_blocking_from_callbacks),
        cmocka_unit_test(test_other_id_after_timed_out_join),
        cmocka_unit_test(test_lost_create_keeps_others_node),
        cmocka_unit_test(test_rejoin_same_id_writes_data),
        cmocka_unit_test(test_rejoin_waits_for_delete),
        cmocka_unit_test(test_leave_waits_for_create),
        cmocka_unit_test(test_same_data_writes_no_view),
        cmocka_unit_test(test_id_supplementary_refused),
    };

    zkt_test_filter();
    return cmocka_run_group_tests_name("group", tests, proxy_setup,
                                       proxy_teardown);
}
