/* The barrier: one node that stands while it exists (kazoo's Barrier and
 * Curator's DistributedBarrier layout). Set creates it (ephemeral by
 * default, so that a setter that dies clears it), clear deletes it at the
 * version read, a wait returns once it is gone or another node stands
 * in its place (a new czxid: cleared and set again when no watch could
 * tell).
 *
 * Each operation is a chain of asynchronous requests (call.c) and a task
 * that the engine wakes when the chain waits for a connection, a pause,
 * a watch or its timeout. A set or clear whose answer is lost with the
 * connection or the session is resolved before anything else is sent:
 * once connected, sync, then read the node (and, for a set, its parent's
 * pzxid, read before the create). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"

struct zkr_barrier {
    zkr__rhandle_t h; /* its path, ACL, operations and metric (call.h) */
    int persistent;   /* ZKR_BARRIER_PERSISTENT */
};

/* The steps of an operation (zkr__rop_t.step): the request in flight. */
enum {
    BS_PARENT = 1, /* set: the parent's child version, before the create */
    BS_CREATE,     /* set: the node */
    BS_ANCESTOR,   /* set: one of its missing ancestors */
    BS_READ,       /* clear: the node's stat, before the delete */
    BS_DELETE,     /* clear: the node, at the version read */
    BS_SYNC,       /* wait: before its first look on a session */
    BS_START,      /* wait: its parent's pzxid, once per call */
    BS_LOOK,       /* wait: getData with a watch */
    BS_R_SYNC,     /* a lost write's resolution: sync of the node's path */
    BS_R_READ,     /* ... the node */
    BS_R_PARENT    /* ... its parent (a lost create) */
};

typedef struct op {
    zkr__rop_t o;     /* its requests, wake-ups and end (call.h); a wait's
                         deadline is its timeout (-1: none) */
    zkr_barrier_t *b; /* its handle */
    zkr_barrier_op_t kind;
    /* A clear: the node it read (czxid, version). A wait: the node it
     * first saw standing (czxid 0: none yet). */
    int64_t czxid;
    int32_t version;
    int64_t pczxid, ppzxid; /* a set: the parent's czxid and pzxid just
                               before its create */
    char nonce[37];         /* a set: its node's data, a UUID of this call
                               (what tells its node from another's) */
    /* A wait: */
    int started;      /* it has read its parent's pzxid (or found none) */
    int64_t start;    /* that pzxid: a node whose czxid is above it was made
                         during the call (-1: unknown, the parent's
                         cversion stuck, docs/PROTOCOL.md [Z6]) */
    int synced;       /* its sync is done, on session sid_seen */
    int64_t sid_seen; /* the session its sync and watch belong to */
    int looked;       /* it has seen the barrier standing */
    int armed;        /* its watch is set and has not fired */
    int changed;
    zkr_barrier_completion_t cb;
    void *cbdata;
} op_t;

static void op_go(zkr__rop_t *r);
static void op_end_rc(zkr__rop_t *r, int rc);
static void op_deliver(zkr__rop_t *r);
static void op_next(zkr__call_t *k, int rc);
static int op_watches(const zkr__rop_t *r, const char *path);

static const zkr__rop_class_t barrier_class = {op_go, op_end_rc, op_deliver,
                                               op_next, op_watches};

static op_t *op_of(zkr__rop_t *r)
{
    return (op_t *)r;
}

/* ----------------------------------------------------------- the chain */

/* A watch of a wait fired: every wait of the session looks again (the
 * watch's context is the session, which outlives any wait). */
static void barrier_watcher(zhandle_t *zh, int type, int state,
                            const char *path, void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if ((s = zkr__call_watch_event(type, path, ctx)) == NULL)
        return;
    for (zkr__task_t *tk = zkr__engine(s)->tasks; tk != NULL; tk = tk->next) {
        zkr__rop_t *r = zkr__rop_of_task(tk);

        if (r != NULL && r->cls == &barrier_class &&
            op_of(r)->kind == ZKR_BARRIER_WAIT) {
            op_of(r)->armed = 0;
            zkr__task_wake_at(s, tk, 0);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void op_deliver(zkr__rop_t *r)
{
    op_t *o = op_of(r);

    o->cb(r->rc, o->changed, o->cbdata);
}

/* Mutex held: the operation ends with rc. A set or clear whose write's
 * outcome is not proven says so, never "nothing changed". A wait that
 * set a watch on this session, or for which another wait's watch was
 * kept, hands its removal to the cleanup list, whatever its own last look
 * saw (another path's event may have made it look again, and that look
 * may have failed). The list keeps the watch while another wait of the
 * session on the path needs it (the readers say so, and mark that wait:
 * zkr__rhandle_follow()), and a watch the client no longer has costs nothing
 * to remove (ZNOWATCHER at once). A wait that never looked on this
 * session queues nothing (a poll while disconnected adds no entry). */
static void op_end_rc(zkr__rop_t *r, int rc)
{
    op_t *o = op_of(r);
    zkr_barrier_t *b = o->b;
    zkr_session_t *s = b->h.s;
    int unwatch = o->kind == ZKR_BARRIER_WAIT && o->o.watched != 0 &&
                  o->o.watched == s->sid && !s->forked;

    if (rc != 0 && r->unknown)
        rc = ZKR_EINDOUBT;
    o->armed = 0;
    zkr__rop_end(r, rc); /* unlinked: the reader no longer counts it (o
                            may be freed; b lives while the mutex is held) */
    if (unwatch)
        (void)zkr__cleanup_add_watch(s, b->h.path, ZWATCHTYPE_DATA,
                                     barrier_watcher);
}

static void op_end(op_t *o, int rc)
{
    op_end_rc(&o->o, rc);
}

static void op_issue(op_t *o, int st, int rc)
{
    zkr__rop_issue(&o->o, st, rc);
}

/* A wait saw the node standing (czxid): another node than the one it
 * first saw, or one made after its parent's pzxid was read (during the
 * call: what it first saw may have been lost with the connection), means
 * the barrier was cleared meanwhile. */
static void op_standing(op_t *o, int64_t czxid)
{
    if ((o->czxid != 0 && czxid != o->czxid) ||
        (o->start >= 0 && czxid > o->start)) {
        op_end(o, 0);
        return;
    }
    o->czxid = czxid;
    o->looked = 1;
    op_go(&o->o); /* waits for the watch or the timeout */
}

/* A lost set's resolution, the node read after a sync: it stands (ours
 * when it holds this call's nonce), or it does not (st NULL) and pst is
 * its parent's stat (NULL: none). */
static void op_resolve_set(op_t *o, const struct Stat *st, int ours,
                           const struct Stat *pst)
{
    o->o.unknown = 0;
    if (st != NULL && ours && !o->b->persistent &&
        st->ephemeralOwner != o->b->h.s->sid) {
        /* Ours, made on a session zkr gave up on while the server kept it:
         * it goes when that session expires. */
        op_end(o, ZKR_EINDOUBT);
        return;
    }
    if (st != NULL) {
        /* The barrier stands: what the call asked, whoever made it. */
        o->changed = ours;
        op_end(o, 0);
        return;
    }
    /* No node, and no child of the parent made or deleted since our look
     * (a delete always moves the pzxid, a create unless the parent's
     * cversion is stuck, docs/PROTOCOL.md [Z6]; and our create would have
     * left the node): it did not apply. */
    if (pst != NULL && pst->czxid == o->pczxid && pst->pzxid == o->ppzxid) {
        op_go(&o->o); /* the set starts over */
        return;
    }
    op_end(o, ZKR_EINDOUBT); /* set by this call, and cleared since? */
}

/* A lost clear's resolution, the node read after a sync (st NULL: none). */
static void op_resolve_clear(op_t *o, const struct Stat *st)
{
    o->o.unknown = 0;
    if (st == NULL || st->czxid != o->czxid) {
        op_end(o, 0); /* cleared during the call (by us or another) */
        return;
    }
    /* The node we read is there: our delete did not apply (at its version),
     * or cannot any more (at another): read and delete again. */
    op_go(&o->o);
}

/* The parent's child counter may be stuck at 2147483647 (docs/PROTOCOL.md
 * [Z6]), where ZooKeeper 3.8 creates children without moving the pzxid.
 * The server stores the count of children ever made (c) and shows
 * cversion = 2c - numChildren (32-bit, DataNode.copyStat), so c =
 * 2147483647 (or -1: the same modulo 2^31) shows cversion + numChildren
 * = -2. Once stuck, it stays so while the parent stands. */
static int counter_stuck(const struct Stat *st)
{
    return (uint32_t)st->cversion + (uint32_t)st->numChildren == UINT32_MAX - 1;
}

/* A request's answer (mutex held). */
static void op_next(zkr__call_t *k, int rc)
{
    op_t *o = (op_t *)((char *)k - offsetof(zkr__rop_t, k));
    zkr_barrier_t *b = o->b;
    int st = o->o.step;

    o->o.step = 0;
    /* An answer came: a set's or clear's deadline moves (a wait's is its
     * timeout). */
    if (!zkr__call_lost(rc) && o->kind != ZKR_BARRIER_WAIT)
        o->o.deadline = zkr__rop_bound(b->h.s);
    if (b->h.s->forked) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* A write's answer lost: resolved before anything else is sent.
         * Reads and syncs are asked again. */
        if (st == BS_CREATE || st == BS_DELETE)
            o->o.unknown = 1;
        if (st == BS_ANCESTOR)
            o->o.anc_at = 0; /* it may not have applied: from the top */
        if (st == BS_SYNC)
            o->synced = 0;
        op_go(&o->o); /* BS_START and BS_LOOK: asked again */
        return;
    }
    switch (st) {
    case BS_PARENT:
        if (rc == ZNONODE) {
            zkr__rop_no_parent(&o->o);
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->pczxid = k->stat->czxid;
            o->ppzxid = k->stat->pzxid;
            op_issue(o, BS_CREATE,
                     zkr__call_create(k, b->h.path, o->nonce, 36, &b->h.acl,
                                      b->persistent ? 0 : ZOO_EPHEMERAL));
        }
        return;
    case BS_CREATE:
        if (rc == ZOK || rc == ZNODEEXISTS) {
            o->changed = rc == ZOK;
            op_end(o, 0);
        } else if (rc == ZNONODE) {
            zkr__rop_no_parent(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    case BS_ANCESTOR:
        /* Whatever an intermediate ancestor says (ZNOAUTH where it exists
         * already, say), the barrier's own create decides. */
        op_go(&o->o);
        return;
    case BS_READ:
        if (rc == ZNONODE) {
            op_end(o, 0); /* not standing: nothing to clear */
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->czxid = k->stat->czxid;
            o->version = k->stat->version;
            op_issue(o, BS_DELETE, zkr__call_delete(k, b->h.path, o->version));
        }
        return;
    case BS_DELETE:
        if (rc == ZOK) {
            o->changed = 1;
            op_end(o, 0);
        } else if (rc == ZNONODE) {
            op_end(o, 0); /* another cleared it first */
        } else if (rc == ZBADVERSION) {
            op_go(&o->o); /* written since our read: read again */
        } else {
            op_end(o, rc);
        }
        return;
    case BS_SYNC:
        if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->synced = 1; /* the next look is at least as new as the call */
            op_go(&o->o);
        }
        return;
    case BS_START:
        if (rc == ZNONODE) {
            op_end(o, 0); /* no parent: not standing */
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            /* Every child made before this read has a czxid at most its
             * pzxid, unless the child counter is stuck (a create then
             * leaves the pzxid behind). */
            o->started = 1;
            o->start = counter_stuck(k->stat) ? -1 : k->stat->pzxid;
            op_go(&o->o);
        }
        return;
    case BS_LOOK:
        if (rc == ZNONODE) {
            op_end(o, 0); /* not standing (no watch is left: a getData
                             of no node sets none) */
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->armed = 1;
            o->o.watched = b->h.s->sid;
            op_standing(o, k->stat->czxid);
        }
        return;
    case BS_R_SYNC:
        if (rc != ZOK)
            op_end(o, rc);
        else
            op_issue(o, BS_R_READ, zkr__call_get(k, b->h.path));
        return;
    case BS_R_READ:
        if (rc != ZOK && rc != ZNONODE)
            op_end(o, rc);
        else if (o->kind == ZKR_BARRIER_CLEAR)
            op_resolve_clear(o, rc == ZOK ? k->stat : NULL);
        else if (rc == ZOK)
            op_resolve_set(o, k->stat,
                           k->value_len == 36 &&
                               memcmp(k->value, o->nonce, 36) == 0,
                           NULL);
        else
            op_issue(o, BS_R_PARENT, zkr__call_exists(k, b->h.parent));
        return;
    case BS_R_PARENT:
        if (rc != ZOK && rc != ZNONODE)
            op_end(o, rc);
        else
            op_resolve_set(o, NULL, 0, rc == ZOK ? k->stat : NULL);
        return;
    }
}

/* A wait's next step, connected: sync once per session, read its parent's
 * pzxid once per call, then look (get with a watch) unless its watch is
 * set and has not fired; then wait for the watch or the timeout, which
 * ends it only once it has looked. */
static void op_go_wait(op_t *o)
{
    zkr_barrier_t *b = o->b;
    zkr_session_t *s = b->h.s;

    if (o->sid_seen != s->sid) { /* a new session: its watches are new */
        o->sid_seen = s->sid;
        o->synced = 0;
        o->armed = 0;
    }
    if (!o->synced)
        op_issue(o, BS_SYNC, zkr__call_sync(&o->o.k, b->h.path));
    else if (!o->started)
        op_issue(o, BS_START, zkr__call_exists(&o->o.k, b->h.parent));
    else if (!o->armed)
        op_issue(o, BS_LOOK,
                 zkr__call_wget(&o->o.k, b->h.path, barrier_watcher, s));
    else
        zkr__task_wake_at(s, &o->o.tk, o->o.deadline);
}

/* The operation's next request, unless one is under way or a pause; or
 * its end (zkr__rop_ready(): a wait past its timeout while not connected
 * ends ZKR_ETIMEDOUT, a set or clear past its deadline ZCONNECTIONLOSS).
 * A write of unknown outcome is resolved first, even when freed, while
 * connected. */
static void op_go(zkr__rop_t *r)
{
    op_t *o = op_of(r);
    zkr_barrier_t *b = o->b;
    zkr_session_t *s = b->h.s;

    if (o->kind == ZKR_BARRIER_WAIT) {
        /* Its timeout ends it once it has looked, or when it cannot look
         * (not connected, or its requests could not be sent). */
        if (zkr__rop_ready(r, !s->connected || r->unsent != 0 || o->looked
                                  ? ZKR_ETIMEDOUT
                                  : 0))
            op_go_wait(o);
    } else if (!zkr__rop_ready(r, ZCONNECTIONLOSS)) {
        return;
    } else if (r->unknown) {
        op_issue(o, BS_R_SYNC, zkr__call_sync(&r->k, b->h.path));
    } else if (o->kind == ZKR_BARRIER_CLEAR) {
        op_issue(o, BS_READ, zkr__call_exists(&r->k, b->h.path));
    } else if (r->anc_at < 0 || zkr__rop_ancestor(r, BS_ANCESTOR) == 0) {
        op_issue(o, BS_PARENT, zkr__call_exists(&r->k, b->h.parent));
    }
}

/* An operation, started (mutex held), or NULL (no memory). */
static op_t *op_start(zkr_barrier_t *b, zkr_barrier_op_t kind, int timeout_ms,
                      zkr_barrier_completion_t cb, void *cbdata)
{
    op_t *o =
        (op_t *)zkr__rop_new(&b->h, sizeof(op_t), &barrier_class, cb != NULL);

    if (o == NULL)
        return NULL;
    o->b = b;
    o->kind = kind;
    o->cb = cb;
    o->cbdata = cbdata;
    o->sid_seen = b->h.s->sid;
    if (kind == ZKR_BARRIER_SET)
        zkr__uuid(o->nonce);
    if (kind == ZKR_BARRIER_WAIT)
        o->o.deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    o->start = -1;
    op_go(&o->o);
    return o;
}

/* A wait needs the session's watch on its path until it ends. */
static int op_watches(const zkr__rop_t *r, const char *path)
{
    const op_t *o = (const op_t *)r;

    return o->kind == ZKR_BARRIER_WAIT && strcmp(o->b->h.path, path) == 0;
}

/* ------------------------------------------------------------- the API */

static const zkr__gfamily_t waiters_family = {
    "zkr_barrier_waiters", ZKR__BARRIER_WAITERS_HELP, "barrier", 'n', 's'};

/* The handle's waits in progress (mutex held). */
static int64_t waiters_now(zkr__gauge_t *g, int64_t now)
{
    zkr_barrier_t *b =
        (zkr_barrier_t *)((char *)g - offsetof(zkr_barrier_t, h.gauge));
    int64_t n = 0;

    (void)now;
    for (zkr__rop_t *o = b->h.ops; o != NULL; o = o->next)
        n += op_of(o)->kind == ZKR_BARRIER_WAIT;
    return n;
}

int zkr_barrier_new(zkr_barrier_t **out, zkr_session_t *s, const char *path,
                    int flags, const struct ACL_vector *acl)
{
    zkr_barrier_t *b;
    int rc;

    if (out == NULL || s == NULL || (flags & ~ZKR_BARRIER_PERSISTENT) != 0)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((b = calloc(1, sizeof(*b))) == NULL)
        return ZKR_ENOMEM;
    if ((rc = zkr__rhandle_init(&b->h, s, path, acl)) != 0) {
        free(b);
        return rc;
    }
    b->persistent = (flags & ZKR_BARRIER_PERSISTENT) != 0;
    if ((rc = zkr__rhandle_gauge(&b->h, &waiters_family, path, waiters_now)) !=
        0) {
        zkr__rhandle_free(&b->h);
        free(b);
        return rc;
    }
    zkr__rhandle_follow(&b->h);
    *out = b;
    return 0;
}

void zkr_barrier_free(zkr_barrier_t *b)
{
    if (b == NULL)
        return;
    zkr__rhandle_free(&b->h);
    free(b);
}

static int op_check(const zkr_barrier_t *b, zkr_barrier_op_t kind,
                    int timeout_ms)
{
    return b == NULL || kind < ZKR_BARRIER_SET || kind > ZKR_BARRIER_WAIT ||
                   timeout_ms < -1
               ? ZBADARGUMENTS
               : 0;
}

int zkr_barrier_async(zkr_barrier_t *b, zkr_barrier_op_t kind, int timeout_ms,
                      zkr_barrier_completion_t cb, void *data)
{
    zkr_session_t *s;
    op_t *o;

    if (kind != ZKR_BARRIER_WAIT)
        timeout_ms = -1;
    if (op_check(b, kind, timeout_ms) != 0 || cb == NULL)
        return ZBADARGUMENTS;
    s = b->h.s;
    pthread_mutex_lock(&s->mu);
    if (zkr__rop_may_start(&b->h) != 0) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    /* It may end inside op_start (a request the client refuses): its
     * completion is then posted already, like any other end. */
    o = op_start(b, kind, timeout_ms, cb, data);
    pthread_mutex_unlock(&s->mu);
    return o != NULL ? 0 : ZKR_ENOMEM;
}

/* Any operation, blocking: its code, and *changed (may be NULL). */
static int barrier_run(zkr_barrier_t *b, zkr_barrier_op_t kind, int timeout_ms,
                       int *changed)
{
    zkr_session_t *s;
    op_t *o;
    int rc;

    if (op_check(b, kind, timeout_ms) != 0)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    s = b->h.s;
    pthread_mutex_lock(&s->mu);
    if (zkr__rop_may_start(&b->h) != 0) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    if ((o = op_start(b, kind, timeout_ms, NULL, NULL)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    rc = zkr__rop_wait(&o->o);
    pthread_mutex_unlock(&s->mu);
    if (changed != NULL)
        *changed = rc == 0 && o->changed;
    free(o);
    return rc;
}

int zkr_barrier_set(zkr_barrier_t *b, int *created)
{
    return barrier_run(b, ZKR_BARRIER_SET, -1, created);
}

int zkr_barrier_clear(zkr_barrier_t *b, int *removed)
{
    return barrier_run(b, ZKR_BARRIER_CLEAR, -1, removed);
}

int zkr_barrier_wait(zkr_barrier_t *b, int timeout_ms)
{
    return barrier_run(b, ZKR_BARRIER_WAIT, timeout_ms, NULL);
}
