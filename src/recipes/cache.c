/* Watched views (cache.h) and the caches on them (zkr_cache_t): a node's
 * data and stat, or a node's children (names, or names and data), kept
 * current by watches.
 *
 * A view is one chain of asynchronous requests (call.c), one request at
 * a time, woken by a task (a connection, a pause) and by the session's
 * watches. It reads the node (getData with a watch; exists with a watch
 * while it is missing), or lists the children (getChildren2 with a
 * watch) and reads each child new to it, or whose watch fired, with a
 * data watch; once every child of a listing is read, the listing is
 * published. A view's zxid is the highest it reflects: the node's mzxid,
 * the listing's pzxid, the children's mzxids, the parent's pzxid for a
 * node that is missing; never lower than the view before it. */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"

/* A refused request (ZNOAUTH, say): tried again after this long. */
#define REFUSED_PAUSE_MS 1000

enum { /* the request in flight */
       V_NONE,
       V_SYNC,   /* sync(path), for zkr__view_sync() */
       V_NODE,   /* the node's data, with a watch */
       V_LIST,   /* its children, with a watch */
       V_EXISTS, /* missing: exists, with a watch */
       V_PARENT, /* missing: the parent's stat (its pzxid) */
       V_GET     /* a child's data, with a watch */
};

static const zkr__reader_ops_t view_ops;
static void pump(zkr__view_t *v);

static zkr__view_t *view_of(zkr__reader_t *r)
{
    return r->ops == &view_ops
               ? (zkr__view_t *)((char *)r - offsetof(zkr__view_t, rd))
               : NULL;
}

const char *zkr__view_base(const char *path)
{
    const char *b = strrchr(path, '/');

    return b != NULL && b[1] != '\0' ? b + 1 : path;
}

/* --------------------------------------------------------------- views */

static void entry_clear(zkr__ventry_t *e)
{
    free(e->name);
    free(e->data);
    memset(e, 0, sizeof(*e));
}

static void snap_clear(zkr__vsnap_t *v)
{
    for (int i = 0; i < v->n; i++)
        entry_clear(&v->e[i]);
    free(v->e);
    v->e = NULL;
    v->n = 0;
}

/* The entry of v named name, or NULL. */
static zkr__ventry_t *snap_find(const zkr__vsnap_t *v, const char *name)
{
    int lo = 0, hi = v->n - 1;

    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(v->e[mid].name, name);
        if (c == 0)
            return &v->e[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const zkr__ventry_t *)a)->name,
                  ((const zkr__ventry_t *)b)->name);
}

/* Are two views the same nodes, data and stats? */
static int snap_same(const zkr__vsnap_t *a, const zkr__vsnap_t *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        const zkr__ventry_t *x = &a->e[i], *y = &b->e[i];

        if (strcmp(x->name, y->name) != 0 || x->len != y->len ||
            x->st.czxid != y->st.czxid || x->st.mzxid != y->st.mzxid ||
            x->st.version != y->st.version ||
            x->st.ephemeralOwner != y->st.ephemeralOwner ||
            memcmp(x->data, y->data, (size_t)x->len) != 0)
            return 0;
    }
    return 1;
}

/* Sets e's data (a copy, and a NUL) and stat: 0, or ZKR_ENOMEM. */
static int entry_set(zkr__ventry_t *e, const char *data, int len,
                     const struct Stat *st)
{
    char *d;

    len = len > 0 ? len : 0;
    if ((d = realloc(e->data, (size_t)len + 1)) == NULL)
        return ZKR_ENOMEM;
    if (len > 0)
        memcpy(d, data, (size_t)len);
    d[len] = '\0';
    e->data = d;
    e->len = len;
    if (st != NULL)
        e->st = *st;
    else
        memset(&e->st, 0, sizeof(e->st));
    return 0;
}

/* The path of v's child name (malloc'd), or NULL. */
static char *child_path(const zkr__view_t *v, const char *name)
{
    return strcmp(v->path, "/") == 0 ? zkr__join("", name)
                                     : zkr__join(v->path, name);
}

/* Does the view hold a watch on the child e (read on this session)? */
static int watched(const zkr__view_t *v, const zkr__ventry_t *e)
{
    return v->mode == ZKR__VIEW_CHILDREN_DATA && e->read_sid != 0 &&
           e->read_sid == v->s->sid && !e->unreadable;
}

/* Empties next (mutex held): the watch of each child read into it that
 * the view does not hold is removed (unless another reader of the
 * session follows it then, or this one again). */
static void drop_next(zkr__view_t *v);

/* A change made since t may not be in the view: a read must cover it. */
static void behind_since(zkr__view_t *v, int64_t t)
{
    if (v->behind_at == 0 || t < v->behind_at)
        v->behind_at = t;
}

static void behind(zkr__view_t *v)
{
    behind_since(v, zkr__now_ms());
}

/* A read starts: it covers every notice so far. */
static void cover(zkr__view_t *v)
{
    if (v->behind_at != 0 && (v->round_at == 0 || v->behind_at < v->round_at))
        v->round_at = v->behind_at;
    v->behind_at = 0;
}

/* --------------------------------------------------------- deliveries */

struct report {
    zkr__view_t *v;
    void *copy;
    int n;
    int64_t zxid;
};

static void view_destroy(zkr__view_t *v)
{
    snap_clear(&v->cur);
    snap_clear(&v->next);
    if (v->fd[0] >= 0) {
        close(v->fd[0]);
        close(v->fd[1]);
    }
    v->fd[0] = v->fd[1] = -1;
    free(v->path);
    v->path = NULL;
}

void zkr__view_event_done(zkr__view_t *v)
{
    zkr_session_t *s = v->s;
    int dispose;

    pthread_mutex_lock(&s->mu);
    v->events--;
    dispose = v->free_pending && v->events == 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (dispose) {
        view_destroy(v);
        v->cls->dispose(v);
    }
}

static void run_report(const zkr__event_t *ev)
{
    struct report *r = ev->data;
    zkr__view_t *v = r->v;
    int gone;

    pthread_mutex_lock(&v->s->mu);
    gone = v->gone;
    pthread_mutex_unlock(&v->s->mu);
    if (!gone)
        v->cls->deliver(v, r->copy, r->n, r->zxid);
    v->cls->export_free(r->copy, r->n);
    free(r);
    zkr__view_event_done(v);
}

static void fd_signal(zkr__view_t *v)
{
    char c = 1;

    if (v->unread && v->fd[1] >= 0 && !v->fd_written && !v->s->forked &&
        write(v->fd[1], &c, 1) == 1)
        v->fd_written = 1;
}

/* next is complete: it becomes the view, delivered if it differs (the
 * first always is). A delivery that cannot be posted for want of memory
 * leaves the view unpublished: it is read again soon. */
static void publish(zkr__view_t *v)
{
    int64_t zxid = v->next.zxid > v->cur.zxid ? v->next.zxid : v->cur.zxid;
    struct report *r = NULL;
    int ok = 1;

    for (int i = 0; i < v->next.n; i++)
        if (v->next.e[i].st.mzxid > zxid)
            zxid = v->next.e[i].st.mzxid;
    if (v->loaded && (v->cls->same != NULL ? v->cls->same(&v->cur, &v->next)
                                           : snap_same(&v->cur, &v->next))) {
        /* Nothing to report; next is the fresher (its children's
         * watches). */
        snap_clear(&v->cur);
        v->cur = v->next;
        v->cur.zxid = zxid;
        memset(&v->next, 0, sizeof(v->next));
        v->pub_gen = v->list_gen;
        v->round_at = 0;
        pthread_cond_broadcast(&v->s->cv);
        return;
    }
    v->next.zxid = zxid;
    if (v->cls->deliver != NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL)
            goto nomem;
        r->copy = v->cls->export(v, &v->next, &ok);
        if (!ok)
            goto nomem;
        r->v = v;
        r->n = v->next.n;
        r->zxid = zxid;
        if (zkr__post_call(v->s, run_report, 0, NULL, r) != 0)
            goto nomem;
        v->events++;
    }
    snap_clear(&v->cur);
    v->cur = v->next;
    memset(&v->next, 0, sizeof(v->next));
    v->loaded = 1;
    v->refused = 0;
    v->unread = 1;
    v->pub_gen = v->list_gen;
    v->round_at = 0;
    fd_signal(v);
    pthread_cond_broadcast(&v->s->cv);
    return;
nomem:
    if (r != NULL && ok)
        v->cls->export_free(r->copy, v->next.n);
    free(r);
    drop_next(v);
    v->stale = 1;
    v->pause = zkr__now_ms() + ZKR__RETRY_MS;
}

/* ------------------------------------------------------------- watches */

/* Is path a child of v's path? Its name, or NULL. */
static const char *child_name(const zkr__view_t *v, const char *path)
{
    size_t pl = strlen(v->path);

    if (strcmp(v->path, "/") == 0)
        return path[0] == '/' && path[1] != '\0' &&
                       strchr(path + 1, '/') == NULL
                   ? path + 1
                   : NULL;
    if (strncmp(path, v->path, pl) != 0 || path[pl] != '/' ||
        strchr(path + pl + 1, '/') != NULL)
        return NULL;
    return path + pl + 1;
}

/* A watch of the session fired: each view it concerns reads again (its
 * node's or its children's; a child's: that child). */
static void view_watcher(zhandle_t *zh, int type, int state, const char *path,
                         void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if ((s = zkr__call_watch_event(type, path, ctx)) == NULL)
        return;
    for (zkr__reader_t *rd = zkr__engine(s)->readers; rd != NULL;
         rd = rd->next) {
        zkr__view_t *v = view_of(rd);
        const char *name;
        zkr__ventry_t *e;

        if (v == NULL || v->gone)
            continue;
        if (strcmp(path, v->path) == 0) {
            v->stale = 1;
        } else if (v->mode == ZKR__VIEW_CHILDREN_DATA &&
                   (name = child_name(v, path)) != NULL) {
            if ((e = snap_find(&v->cur, name)) != NULL)
                e->read_sid = 0;
            if ((e = snap_find(&v->next, name)) != NULL)
                e->read_sid = 0;
            /* Its data changed: that child is read again (no listing);
             * deleted: PATH's child watch lists again, and so here. */
            if (type == ZOO_CHANGED_EVENT)
                v->rescan = 1;
            else
                v->stale = 1;
        } else {
            continue;
        }
        behind(v);
        pump(v);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Does v need the session's watch on path? Its node's; a child's read
 * with a watch on this session (or being read). */
static int follows(zkr__reader_t *rd, const char *path)
{
    zkr__view_t *v = view_of(rd);
    const zkr__ventry_t *e;
    const char *name;

    if (v->gone)
        return 0;
    if (strcmp(path, v->path) == 0)
        return 1;
    if (v->mode != ZKR__VIEW_CHILDREN_DATA ||
        (name = child_name(v, path)) == NULL)
        return 0;
    return ((e = snap_find(&v->cur, name)) != NULL && e->read_sid != 0) ||
           ((e = snap_find(&v->next, name)) != NULL &&
            (e->read_sid != 0 || v->step == V_GET));
}

static void refresh(zkr__reader_t *rd)
{
    zkr__view_t *v = view_of(rd);

    v->stale = 1; /* (re)connected: read again */
    /* What changed while cut, since the last answered heartbeat's send
     * (what came before it came in order), is to be read. */
    if (v->s->hb_answered_sent > 0)
        behind_since(v, v->s->hb_answered_sent);
    else
        behind(v);
    pump(v);
}

static void forked(zkr__reader_t *rd)
{
    zkr__view_t *v = view_of(rd);

    v->k.busy = 0;
    v->step = V_NONE;
    v->events = 0;
}

static const zkr__reader_ops_t view_ops = {refresh, forked, follows};

static void drop_next(zkr__view_t *v)
{
    zkr__ventry_t *old;
    char *p;

    for (int i = 0; i < v->next.n && !v->s->forked; i++) {
        if (!watched(v, &v->next.e[i]) ||
            ((old = snap_find(&v->cur, v->next.e[i].name)) != NULL &&
             watched(v, old)) ||
            (p = child_path(v, v->next.e[i].name)) == NULL)
            continue;
        (void)zkr__cleanup_add_watch(v->s, p, ZWATCHTYPE_DATA, view_watcher);
        free(p);
    }
    snap_clear(&v->next);
}

/* ------------------------------------------------------------ the chain */

static void issue(zkr__view_t *v, int st, int rc)
{
    if (rc == 0) {
        v->step = st;
        return;
    }
    v->stale = 1;
    v->pause = zkr__now_ms() + (zkr__call_lost(rc) || rc == ZKR_ENOMEM
                                    ? ZKR__RETRY_MS
                                    : REFUSED_PAUSE_MS);
}

/* next becomes a copy of the view, to be read again where a child's
 * watch fired (read_sid 0): 0, or ZKR_ENOMEM. */
static int rescan(zkr__view_t *v)
{
    drop_next(v);
    if (v->cur.n > 0 &&
        (v->next.e = calloc((size_t)v->cur.n, sizeof(zkr__ventry_t))) == NULL)
        return ZKR_ENOMEM;
    for (int i = 0; i < v->cur.n; i++) {
        const zkr__ventry_t *old = &v->cur.e[i];
        zkr__ventry_t *e = &v->next.e[v->next.n++];

        if ((e->name = zkr__strdup(old->name)) == NULL ||
            entry_set(e, old->data, old->len, &old->st) != 0) {
            snap_clear(&v->next);
            return ZKR_ENOMEM;
        }
        e->read_sid = old->read_sid;
        e->unreadable = old->unreadable;
        e->reread = old->reread;
    }
    v->next.zxid = v->cur.zxid;
    v->next_i = 0;
    v->listing = 1;
    return 0;
}

/* The next request, if any (mutex held, connected, nothing in flight). */
static void go(zkr__view_t *v)
{
    zkr_session_t *s = v->s;
    char *p;
    int rc;

    if (v->sid != s->sid) {
        /* A new session: none of its watches stand; read all again. */
        v->sid = s->sid;
        for (int i = 0; i < v->cur.n; i++)
            v->cur.e[i].read_sid = 0;
        for (int i = 0; i < v->next.n; i++)
            v->next.e[i].read_sid = 0;
        v->stale = 1;
    }
    if (v->listing) {
        while (v->next_i < v->next.n &&
               (v->mode != ZKR__VIEW_CHILDREN_DATA ||
                v->next.e[v->next_i].read_sid == s->sid))
            v->next_i++;
        if (v->next_i < v->next.n) {
            if ((p = child_path(v, v->next.e[v->next_i].name)) == NULL) {
                issue(v, V_GET, ZKR_ENOMEM);
                return;
            }
            rc = zkr__call_wget(&v->k, p, view_watcher, s);
            free(p);
            issue(v, V_GET, rc); /* not sent: the listing goes on later */
            return;
        }
        v->listing = 0;
        publish(v);
    }
    if (v->sync_want > v->sync_done) {
        v->sync_sent = v->sync_want;
        issue(v, V_SYNC, zkr__call_sync(&v->k, v->path));
        return;
    }
    if (!v->stale && v->rescan && v->loaded &&
        v->mode == ZKR__VIEW_CHILDREN_DATA) {
        /* Only children's data changed: the view's children again, those
         * whose watch fired read again. */
        v->rescan = 0;
        if (rescan(v) == 0) {
            cover(v);
            go(v);
            return;
        }
        v->stale = 1; /* short of memory: a listing instead */
    }
    if (!v->stale)
        return;
    v->stale = 0;
    v->rescan = 0;
    v->list_gen = v->sync_done;
    cover(v);
    if (v->mode == ZKR__VIEW_NODE)
        issue(v, V_NODE, zkr__call_wget(&v->k, v->path, view_watcher, s));
    else
        issue(v, V_LIST, zkr__call_children2(&v->k, v->path, view_watcher, s));
}

/* A listing's names become next: each child read on this session already
 * (its watch stands) is copied from the view, the others are to be read.
 * 0, or ZKR_ENOMEM. */
static int listed(zkr__view_t *v, const struct String_vector *sv, int64_t pzxid)
{
    int (*filter)(const char *) = v->cls->filter;
    int n = 0;

    drop_next(v);
    for (int i = 0; i < sv->count; i++)
        n += filter == NULL || filter(sv->data[i]);
    if (n > 0 && (v->next.e = calloc((size_t)n, sizeof(zkr__ventry_t))) == NULL)
        return ZKR_ENOMEM;
    for (int i = 0; i < sv->count; i++) {
        zkr__ventry_t *e, *old;

        if (filter != NULL && !filter(sv->data[i]))
            continue;
        e = &v->next.e[v->next.n++];
        if ((e->name = zkr__strdup(sv->data[i])) == NULL)
            goto nomem;
        old = snap_find(&v->cur, e->name);
        if (v->mode == ZKR__VIEW_CHILDREN_DATA && old != NULL &&
            old->read_sid == v->s->sid && !old->unreadable && !old->reread) {
            if (entry_set(e, old->data, old->len, &old->st) != 0)
                goto nomem;
            e->read_sid = old->read_sid;
        } else if (entry_set(e, NULL, 0, NULL) != 0) {
            goto nomem;
        }
    }
    if (v->next.n > 1) /* (no array at all when empty) */
        qsort(v->next.e, (size_t)v->next.n, sizeof(zkr__ventry_t), cmp_name);
    v->next.zxid = pzxid;
    v->next_i = 0;
    v->listing = 1;
    return 0;
nomem:
    snap_clear(&v->next);
    return ZKR_ENOMEM;
}

/* The node is missing: its view is empty, stamped with the parent's
 * pzxid (the zxid of the deletion, or later). */
static void missing(zkr__view_t *v, int64_t pzxid)
{
    drop_next(v);
    v->next.zxid = pzxid;
    v->listing = 0;
    publish(v);
}

static void answer(zkr__call_t *k, int rc)
{
    zkr__view_t *v = (zkr__view_t *)((char *)k - offsetof(zkr__view_t, k));
    zkr_session_t *s = v->s;
    int st = v->step;

    v->step = V_NONE;
    if (s->forked)
        return;
    if (v->gone) {
        /* Its stop waits for this answer: a child's watch it set goes. */
        char *p;

        if (st == V_GET && rc == ZOK && v->listing && v->next_i < v->next.n &&
            (p = child_path(v, v->next.e[v->next_i].name)) != NULL) {
            (void)zkr__cleanup_add_watch(s, p, ZWATCHTYPE_DATA, view_watcher);
            free(p);
        }
        return;
    }
    if (zkr__call_lost(rc)) {
        v->stale = 1; /* the next connection reads again */
    } else if (st == V_SYNC) {
        /* The server has what the leader had when it was asked: what is
         * read after this includes it. */
        v->sync_done = v->sync_sent;
        v->stale = 1;
        /* Each child is read again: a stat's changes that fire no data
         * watch (the child's own children, its ACL) are read too. */
        for (int i = 0; i < v->cur.n; i++)
            v->cur.e[i].reread = 1; /* (its watch stands) */
    } else if (st == V_NODE && rc == ZOK) {
        zkr__ventry_t *e;

        snap_clear(&v->next);
        if ((e = calloc(1, sizeof(*e))) == NULL ||
            (e->name = zkr__strdup(zkr__view_base(v->path))) == NULL ||
            entry_set(e, k->value, k->value_len, k->stat) != 0) {
            if (e != NULL)
                entry_clear(e);
            free(e);
            issue(v, V_NODE, ZKR_ENOMEM);
        } else {
            e->read_sid = s->sid;
            v->next.e = e;
            v->next.n = 1;
            v->next.zxid = k->stat->mzxid;
            publish(v);
        }
    } else if ((st == V_NODE || st == V_LIST) && rc == ZNONODE) {
        /* Missing: an exists watch says when it is made. */
        issue(v, V_EXISTS, zkr__call_wexists(k, v->path, view_watcher, s));
        return;
    } else if (st == V_LIST && rc == ZOK) {
        if (listed(v, k->strings, k->stat->pzxid) != 0)
            issue(v, V_LIST, ZKR_ENOMEM);
    } else if (st == V_EXISTS && rc == ZNONODE) {
        if (strcmp(v->path, "/") != 0) {
            char parent[ZKR_PATH_MAX + 1];
            size_t at = (size_t)(zkr__view_base(v->path) - v->path) - 1;

            memcpy(parent, v->path, at == 0 ? 1 : at);
            parent[at == 0 ? 1 : at] = '\0';
            issue(v, V_PARENT, zkr__call_exists(k, parent));
            if (v->step == V_PARENT)
                return;
        }
        missing(v, 0);
    } else if (st == V_EXISTS && rc == ZOK) {
        v->stale = 1; /* made meanwhile */
    } else if (st == V_PARENT && !v->stale) {
        missing(v, rc == ZOK ? k->stat->pzxid : 0);
    } else if (st == V_PARENT) {
        ; /* made meanwhile (its event came first): read again */
    } else if (st == V_GET && v->listing && v->next_i < v->next.n &&
               (rc == ZOK || rc == ZNONODE || rc == ZNOAUTH)) {
        zkr__ventry_t *e = &v->next.e[v->next_i];

        if (rc == ZNONODE) {
            /* Gone since the listing (the node's event lists again). */
            entry_clear(e);
            memmove(e, e + 1, (size_t)(v->next.n - v->next_i - 1) * sizeof(*e));
            v->next.n--;
        } else if (entry_set(e, rc == ZOK ? k->value : NULL,
                             rc == ZOK ? k->value_len : 0,
                             rc == ZOK ? k->stat : NULL) != 0) {
            v->pause = zkr__now_ms() + ZKR__RETRY_MS;
        } else {
            /* A child we may not read (ZNOAUTH): no data, no stat, and
             * read again by the next listing (no watch was set). */
            e->read_sid = s->sid;
            e->unreadable = rc == ZNOAUTH;
        }
    } else if (rc != ZOK) {
        /* Refused (ZNOAUTH on the path, say): said to a caller waiting
         * for a first view; read again later. */
        v->refused = rc;
        v->refused_gen = v->list_gen;
        v->stale = 1;
        v->listing = 0;
        drop_next(v);
        v->pause = zkr__now_ms() + REFUSED_PAUSE_MS;
        pthread_cond_broadcast(&s->cv);
    }
    pump(v);
}

/* Its next request, and the task's next wake-up (mutex held). */
static void pump(zkr__view_t *v)
{
    zkr_session_t *s = v->s;
    int64_t now = zkr__now_ms();

    if (s->forked || v->gone)
        return;
    if (s->state == ZKR_STATE_LOST || s->closing)
        pthread_cond_broadcast(&s->cv); /* a wait for a view may end */
    if (s->connected && s->zh != NULL && !s->closing && !v->k.busy &&
        v->pause <= now)
        go(v);
    zkr__task_wake_at(s, &v->tk, v->pause > now ? v->pause : -1);
}

static void view_wake(zkr__task_t *t)
{
    pump((zkr__view_t *)((char *)t - offsetof(zkr__view_t, tk)));
}

/* ------------------------------------------------------------- metrics */

static int64_t count_now(zkr__gauge_t *g, int64_t now)
{
    zkr__view_t *v =
        (zkr__view_t *)((char *)g - offsetof(zkr__view_t, count_gauge));

    (void)now;
    return v->loaded ? v->cur.n : -1;
}

static int64_t lag_now(zkr__gauge_t *g, int64_t now)
{
    zkr__view_t *v =
        (zkr__view_t *)((char *)g - offsetof(zkr__view_t, lag_gauge));
    const zkr_session_t *s = v->s;
    int64_t t = v->behind_at, lag = 0;

    if (t == 0 || (v->round_at != 0 && v->round_at < t))
        t = v->round_at;
    if (t != 0)
        lag = now - t;
    /* Not connected: changes since the last answered heartbeat's send may
     * be missed (the answers and events before it came in order). */
    if (!s->connected) {
        t = s->hb_answered_sent > 0 ? s->hb_answered_sent : s->last_heard;
        if (t > 0 && now - t > lag)
            lag = now - t;
    }
    return lag > 0 ? lag : 0;
}

/* ----------------------------------------------------------------- API */

int zkr__view_start(zkr__view_t *v, zkr_session_t *s, const char *path,
                    int mode, const zkr__view_class_t *cls)
{
    memset(v, 0, sizeof(*v));
    v->fd[0] = v->fd[1] = -1;
    if ((v->path = zkr__strdup(path)) == NULL)
        return ZKR_ENOMEM;
    v->s = s;
    v->cls = cls;
    v->mode = mode;
    v->k.s = s;
    v->k.next = answer;
    v->tk.wake = view_wake;
    v->tk.wake_at = -1;
    v->rd.ops = &view_ops;
    v->stale = 1;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->forked) {
        pthread_mutex_unlock(&s->mu);
        free(v->path);
        v->path = NULL;
        return ZKR_ECLOSED;
    }
    if (zkr__gauge_attach(s, &v->count_gauge, cls->count_family, path,
                          count_now) != 0 ||
        zkr__gauge_attach(s, &v->lag_gauge, cls->lag_family, path, lag_now) !=
            0) {
        zkr__gauge_detach(s, &v->count_gauge);
        pthread_mutex_unlock(&s->mu);
        free(v->path);
        v->path = NULL;
        return ZKR_ENOMEM;
    }
    behind(v);               /* until the first view */
    zkr__session_hold(s, 1); /* zkr_session_free() refuses while it lives */
    zkr__reader_add(s, &v->rd);
    zkr__task_add(s, &v->tk);
    v->sid = s->sid;
    pump(v);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int zkr__view_stop(zkr__view_t *v)
{
    zkr_session_t *s = v->s;
    int later;

    pthread_mutex_lock(&s->mu);
    v->gone = 1;
    zkr__gauge_detach(s, &v->count_gauge);
    zkr__gauge_detach(s, &v->lag_gauge);
    /* An answer in flight comes on ZooKeeper's thread. */
    while (!s->forked && v->k.busy)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    while (!(later = v->events > 0 && zkr__callbacks_later(s)) && v->events > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    zkr__task_remove(s, &v->tk);
    zkr__reader_remove(s, &v->rd);
    zkr__session_hold(s, -1);
    if (!s->forked) {
        /* Its watches go, unless another reader of the session needs
         * them: the path's, and each child's read with one. */
        (void)zkr__cleanup_add_watch(s, v->path, ZWATCHTYPE_ANY, view_watcher);
        for (int i = 0; i < v->cur.n; i++) {
            char *p;

            if (!watched(v, &v->cur.e[i]) ||
                (p = child_path(v, v->cur.e[i].name)) == NULL)
                continue;
            (void)zkr__cleanup_add_watch(s, p, ZWATCHTYPE_DATA, view_watcher);
            free(p);
        }
        drop_next(v); /* (v->gone: follows() claims none of them) */
    }
    v->free_pending = later;
    pthread_mutex_unlock(&s->mu);
    if (!later)
        view_destroy(v);
    return !later;
}

int zkr__view_get(zkr__view_t *v, int timeout_ms, void **copy, int *n,
                  int64_t *zxid)
{
    zkr_session_t *s = v->s;
    int64_t deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    int ok, rc = 0;
    char c;

    *copy = NULL;
    *n = 0;
    pthread_mutex_lock(&s->mu);
    if (!v->loaded && timeout_ms != 0 && zkr__in_callback()) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_EDEADLK;
    }
    while (!v->loaded && !v->gone && v->refused == 0 &&
           !zkr__lost_for_good(s) && rc == 0)
        rc = zkr__wait(s, NULL, deadline);
    if (!v->loaded) {
        rc = v->refused != 0         ? v->refused
             : zkr__lost_for_good(s) ? ZKR_ELOST
                                     : ZKR_ETIMEDOUT;
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    *copy = v->cls->export(v, &v->cur, &ok);
    if (!ok) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    *n = v->cur.n;
    if (zxid != NULL)
        *zxid = v->cur.zxid;
    v->unread = 0;
    /* (A forked child's copy shares the parent's pipe: not its to read.) */
    if (v->fd_written && !s->forked && read(v->fd[0], &c, 1) == 1)
        v->fd_written = 0;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int zkr__view_fd(zkr__view_t *v)
{
    int fd;

    pthread_mutex_lock(&v->s->mu);
    if (v->fd[0] < 0 && pipe2(v->fd, O_CLOEXEC | O_NONBLOCK) != 0)
        v->fd[0] = v->fd[1] = -1;
    fd_signal(v); /* a view not read yet */
    fd = v->fd[0];
    pthread_mutex_unlock(&v->s->mu);
    return fd;
}

int zkr__view_sync(zkr__view_t *v, int timeout_ms)
{
    zkr_session_t *s = v->s;
    int64_t deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    uint64_t want;
    int rc = 0;

    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&s->mu);
    want = ++v->sync_want;
    pump(v);
    while (v->pub_gen < want && !v->gone && !s->closing && rc == 0) {
        if (zkr__lost_for_good(s)) {
            rc = ZKR_ELOST;
            break;
        }
        if (v->refused != 0 && v->refused_gen >= want) {
            rc = v->refused; /* a read after the sync was refused */
            break;
        }
        rc = zkr__wait(s, NULL, deadline);
    }
    if (rc == 0 && v->pub_gen < want)
        rc = ZKR_ECLOSED;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ------------------------------------------------------------- caches */

struct zkr_cache {
    zkr__view_t v;
    zkr_cache_listener_t fn;
    void *data;
};

static void *cache_export(zkr__view_t *v, const zkr__vsnap_t *snap, int *ok)
{
    zkr_cache_entry_t *out;

    (void)v;
    *ok = 1;
    if (snap->n == 0)
        return NULL;
    if ((out = calloc((size_t)snap->n, sizeof(*out))) == NULL) {
        *ok = 0;
        return NULL;
    }
    for (int i = 0; i < snap->n; i++) {
        const zkr__ventry_t *e = &snap->e[i];
        size_t nl = strlen(e->name);
        char *b = malloc(nl + 1 + (size_t)e->len + 1);

        if (b == NULL) {
            zkr_cache_entries_free(out, i);
            *ok = 0;
            return NULL;
        }
        memcpy(b, e->name, nl + 1);
        memcpy(b + nl + 1, e->data, (size_t)e->len + 1);
        out[i].name = b;
        out[i].data = b + nl + 1;
        out[i].len = e->len;
        out[i].stat = e->st;
    }
    return out;
}

static void cache_export_free(void *copy, int n)
{
    zkr_cache_entries_free(copy, n);
}

static void cache_deliver(zkr__view_t *v, const void *copy, int n, int64_t zxid)
{
    zkr_cache_t *c = (zkr_cache_t *)v;

    c->fn(c, copy, n, zxid, c->data);
}

static void cache_dispose(zkr__view_t *v)
{
    free(v);
}

static const zkr__gfamily_t entries_family = {
    "zkr_cache_entries",
    "Nodes in the cache's published view (1 or 0 for a node cache), the "
    "largest of this session's caches of the path.",
    "cache", 'n', 'x'};
static const zkr__gfamily_t lag_family = {
    "zkr_cache_lag_seconds", ZKR__VIEW_LAG_HELP, "cache", 'm', 'x'};

static const zkr__view_class_t cache_class = {
    NULL,          NULL,          cache_export,    cache_export_free,
    cache_deliver, cache_dispose, &entries_family, &lag_family};
static const zkr__view_class_t cache_class_quiet = {
    NULL, NULL,          cache_export,    cache_export_free,
    NULL, cache_dispose, &entries_family, &lag_family};

/* A path a cache may read: as zkr__check_path(), and also "/" and the
 * server's own nodes (/zookeeper/config, say). */
static int check_path(const char *path)
{
    char copy[ZKR_PATH_MAX + 1];

    if (path == NULL)
        return ZBADARGUMENTS;
    if (strcmp(path, "/") == 0)
        return 0;
    if (strncmp(path, "/zookeeper", 10) != 0 ||
        (path[10] != '\0' && path[10] != '/') || strlen(path) > ZKR_PATH_MAX)
        return zkr__check_path(path);
    strcpy(copy, path);
    copy[1] = 'Z'; /* not the reserved name: the rest is checked */
    return zkr__check_path(copy);
}

int zkr_cache_new(zkr_cache_t **out, zkr_session_t *s, const char *path,
                  zkr_cache_kind_t kind, zkr_cache_listener_t fn, void *data)
{
    zkr_cache_t *c;
    int rc;

    if (out == NULL || s == NULL || check_path(path) != 0 ||
        (kind != ZKR_CACHE_NODE && kind != ZKR_CACHE_CHILDREN &&
         kind != ZKR_CACHE_CHILDREN_DATA))
        return ZBADARGUMENTS;
    *out = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return ZKR_ENOMEM;
    c->fn = fn;
    c->data = data;
    rc = zkr__view_start(&c->v, s, path,
                         kind == ZKR_CACHE_NODE       ? ZKR__VIEW_NODE
                         : kind == ZKR_CACHE_CHILDREN ? ZKR__VIEW_CHILDREN
                                                      : ZKR__VIEW_CHILDREN_DATA,
                         fn != NULL ? &cache_class : &cache_class_quiet);
    if (rc != 0) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void zkr_cache_free(zkr_cache_t *c)
{
    if (c != NULL && zkr__view_stop(&c->v))
        free(c);
}

int zkr_cache_get(zkr_cache_t *c, int timeout_ms, zkr_cache_entry_t **out,
                  int *count, int64_t *zxid)
{
    void *copy;
    int rc;

    if (c == NULL || out == NULL || count == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    rc = zkr__view_get(&c->v, timeout_ms, &copy, count, zxid);
    *out = copy;
    return rc;
}

void zkr_cache_entries_free(zkr_cache_entry_t *entries, int count)
{
    if (entries == NULL)
        return;
    for (int i = 0; i < count; i++)
        free((char *)entries[i].name);
    free(entries);
}

int zkr_cache_fd(zkr_cache_t *c)
{
    return c != NULL ? zkr__view_fd(&c->v) : -1;
}

int zkr_cache_sync(zkr_cache_t *c, int timeout_ms)
{
    if (c == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    return zkr__view_sync(&c->v, timeout_ms);
}
