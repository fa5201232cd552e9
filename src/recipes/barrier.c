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
#include <stdlib.h>
#include <string.h>

#include "call.h"

typedef struct op op_t;

struct zkr_barrier {
    zkr_session_t *s;
    op_t *ops; /* the operations under way: the free waits for them */
    char *path;
    char *parent;   /* the path's parent ("/" for a top-level node) */
    int persistent; /* ZKR_BARRIER_PERSISTENT */
    struct ACL_vector acl;
    int acl_owned;
    int freeing;      /* being freed: operations end with ZKR_ECANCELED */
    zkr__reader_t rd; /* keeps the waits' watches from being removed */
};

/* The steps of an operation (op_t.step): the request in flight. */
enum {
    BS_PARENT = 1, /* set: the parent's child version, before the create */
    BS_CREATE,     /* set: the node */
    BS_ANCESTOR,   /* set: one of its missing ancestors */
    BS_READ,       /* clear: the node's stat, before the delete */
    BS_DELETE,     /* clear: the node, at the version read */
    BS_SYNC,       /* wait: before its first look */
    BS_LOOK,       /* wait: getData with a watch */
    BS_R_SYNC,     /* a lost write's resolution: sync of the node's path */
    BS_R_READ,     /* ... the node */
    BS_R_PARENT    /* ... its parent (a lost create) */
};

#define ROUNDS 3 /* creates refused for want of a parent, at most */

struct op {
    op_t *prev, *next; /* the handle's operations */
    zkr__call_t k;     /* its requests */
    zkr__task_t tk;    /* its wake-ups: connected, a pause's end, a watch,
                          a deadline */
    zkr__event_t *ev;  /* an asynchronous one's completion, made ahead */
    zkr_barrier_t *b;  /* NULL once ended */
    zkr_barrier_op_t kind;
    int step;    /* BS_*: the request in flight, or 0 */
    int unknown; /* the last write's answer was lost */
    /* A clear: the node it read (czxid, version). A wait: the node it
     * first saw standing (czxid 0: none yet). */
    int64_t czxid;
    int32_t version;
    int64_t pczxid, ppzxid; /* a set: the parent's czxid and pzxid just
                               before its create */
    int anc_at;             /* making the path's ancestors: the '/' of the
                               last one made (0: none yet), or -1 */
    int rounds;             /* creates refused for want of a parent */
    /* A wait: */
    int synced;          /* its sync is done (on session sid_synced) */
    int64_t sid_seen;    /* the session its sync and watch belong to */
    int looked;          /* it has seen the barrier standing */
    int armed;           /* its watch is set and has not fired */
    int64_t until;       /* its timeout (ms of zkr__now_ms()), -1: none */
    int64_t deadline;    /* a set or clear: no answer by then, the end */
    int unsent;          /* the code of the last request not sent */
    int64_t pause_until; /* the next attempt not before */
    int rc;
    int changed;
    int ended; /* a blocking operation has ended: its caller frees it */
    zkr_barrier_completion_t cb;
    void *cbdata;
};

/* ----------------------------------------------------------- the chain */

/* How long a set or clear goes on without an answer (not connected, or
 * its requests not sent): the request timeout plus the session timeout. */
static int64_t op_bound(const zkr_session_t *s)
{
    return (s->req_timeout > 0 ? s->req_timeout : 10000) +
           (s->timeout > 0 ? s->timeout : 10000);
}

static void op_go(op_t *o);
static void op_wake(zkr__task_t *t);

static op_t *op_of_task(zkr__task_t *t)
{
    return (op_t *)((char *)t - offsetof(op_t, tk));
}

/* A watch of a wait fired: every wait of the session looks again (the
 * watch's context is the session, which outlives any wait). */
static void barrier_watcher(zhandle_t *zh, int type, int state,
                            const char *path, void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if (type == ZOO_SESSION_EVENT || type == ZOO_NOTWATCHING_EVENT ||
        path == NULL)
        return;
    if ((s = zkr__session_lock_live(ctx)) == NULL)
        return;
    zkr__engine(s)->watch_events++;
    s->counters[ZKR_COUNTER_WATCH_EVENTS]++;
    for (zkr__task_t *tk = zkr__engine(s)->tasks; tk != NULL; tk = tk->next) {
        op_t *o;

        if (tk->wake != op_wake)
            continue;
        o = op_of_task(tk);
        if (o->b != NULL && o->kind == ZKR_BARRIER_WAIT) {
            o->armed = 0;
            zkr__task_wake_at(s, tk, 0);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void op_deliver(const zkr__event_t *ev)
{
    op_t *o = ev->data;

    o->cb(ev->a, o->changed, o->cbdata);
    free(o);
}

/* Mutex held: the operation ends with rc; a blocking caller is woken, an
 * asynchronous one told on the event thread (its event was made when it
 * began: the completion cannot be lost for want of memory). A wait's
 * watch that has not fired is removed (unless another wait of the
 * session on the path still needs it: the reader says so). */
static void op_end(op_t *o, int rc)
{
    zkr_barrier_t *b = o->b;
    zkr_session_t *s = b->s;

    zkr__task_remove(s, &o->tk);
    o->step = 0;
    /* A set whose outcome is not proven may have set the barrier. */
    if (rc != 0 && o->unknown && o->kind == ZKR_BARRIER_SET)
        rc = ZKR_EINDOUBT;
    o->rc = rc;
    o->b = NULL;
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        b->ops = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    if (o->armed && !s->forked && o->sid_seen == s->sid)
        (void)zkr__cleanup_add_watch(s, b->path, ZWATCHTYPE_DATA,
                                     barrier_watcher);
    pthread_cond_broadcast(&s->cv);
    if (o->cb == NULL) {
        o->ended = 1; /* the caller frees o */
        return;
    }
    if (s->forked) {
        free(o->ev); /* nothing runs in a forked child */
        free(o);
        return;
    }
    o->ev->run = op_deliver;
    zkr__post_event(s, o->ev, ZKR__EV_CALL, rc, NULL, NULL, o);
}

/* Step st's request was issued with code rc (0: in flight; its answer
 * cannot come before the mutex is released). Not sent: not connected or
 * short of memory, the operation goes on after a pause; else it ends. */
static void op_issue(op_t *o, int st, int rc)
{
    o->step = st;
    if (rc == 0) {
        o->unsent = 0;
        return;
    }
    o->step = 0;
    if (zkr__call_lost(rc) || rc == ZKR_ENOMEM) {
        o->unsent = rc;
        o->pause_until = zkr__now_ms() + ZKR__RETRY_MS;
        zkr__task_wake_at(o->b->s, &o->tk, o->pause_until);
        return;
    }
    op_end(o, rc);
}

/* A create was refused for want of a parent: make the ancestors and try
 * again, a bounded number of times (a missing chroot, or someone
 * deleting the parent each time, ends with ZNONODE). */
static void op_no_parent(op_t *o)
{
    if (++o->rounds > ROUNDS) {
        op_end(o, ZNONODE);
        return;
    }
    o->anc_at = 0;
    op_go(o);
}

/* A wait saw the node standing (czxid): another node than the one it
 * first saw means the barrier was cleared meanwhile. */
static void op_standing(op_t *o, int64_t czxid)
{
    if (o->czxid != 0 && czxid != o->czxid) {
        op_end(o, 0);
        return;
    }
    o->czxid = czxid;
    o->looked = 1;
    op_go(o); /* waits for the watch or the timeout */
}

/* A lost set's resolution, the node read after a sync: it stands (st its
 * stat), or it does not and pst is its parent's stat (NULL: none). */
static void op_resolve_set(op_t *o, const struct Stat *st,
                           const struct Stat *pst)
{
    zkr_barrier_t *b = o->b;

    if (st != NULL) {
        /* The barrier stands: what the call asked, whoever made it. An
         * ephemeral node of this session is ours. */
        o->unknown = 0;
        o->changed = !b->persistent && st->ephemeralOwner == b->s->sid;
        op_end(o, 0);
        return;
    }
    /* No node, and no child of the parent made or deleted since our look
     * (a delete always moves the pzxid, a create unless the parent's
     * cversion is stuck, docs/PROTOCOL.md [Z6]; and our create would have
     * left the node): it did not apply. */
    if (pst != NULL && pst->czxid == o->pczxid && pst->pzxid == o->ppzxid) {
        o->unknown = 0;
        op_go(o); /* the set starts over */
        return;
    }
    op_end(o, ZKR_EINDOUBT); /* set by this call, and cleared since? */
}

/* A lost clear's resolution, the node read after a sync (st NULL: none). */
static void op_resolve_clear(op_t *o, const struct Stat *st)
{
    o->unknown = 0;
    if (st == NULL || st->czxid != o->czxid) {
        op_end(o, 0); /* cleared during the call (by us or another) */
        return;
    }
    /* The node we read is there: our delete did not apply (at its version),
     * or cannot any more (at another): read and delete again. */
    op_go(o);
}

/* A request's answer (mutex held). */
static void op_next(zkr__call_t *k, int rc)
{
    op_t *o = (op_t *)((char *)k - offsetof(op_t, k));
    zkr_barrier_t *b = o->b;
    int st = o->step;

    o->step = 0;
    if (!zkr__call_lost(rc)) /* an answer came: the deadline moves */
        o->deadline = zkr__now_ms() + op_bound(b->s);
    if (b->s->forked) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* A write's answer lost: resolved before anything else is sent.
         * Reads and syncs are asked again. */
        if (st == BS_CREATE || st == BS_DELETE)
            o->unknown = 1;
        if (st == BS_ANCESTOR)
            o->anc_at = 0; /* it may not have applied: from the top */
        if (st == BS_SYNC)
            o->synced = 0;
        op_go(o);
        return;
    }
    switch (st) {
    case BS_PARENT:
        if (rc == ZNONODE) {
            op_no_parent(o);
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->pczxid = k->stat->czxid;
            o->ppzxid = k->stat->pzxid;
            op_issue(o, BS_CREATE,
                     zkr__call_create(k, b->path, "", 0, &b->acl,
                                      b->persistent ? 0 : ZOO_EPHEMERAL));
        }
        return;
    case BS_CREATE:
        if (rc == ZOK || rc == ZNODEEXISTS) {
            o->changed = rc == ZOK;
            op_end(o, 0);
        } else if (rc == ZNONODE) {
            op_no_parent(o);
        } else {
            op_end(o, rc);
        }
        return;
    case BS_ANCESTOR:
        /* Whatever an intermediate ancestor says (ZNOAUTH where it exists
         * already, say), the barrier's own create decides. */
        op_go(o);
        return;
    case BS_READ:
        if (rc == ZNONODE) {
            op_end(o, 0); /* not standing: nothing to clear */
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->czxid = k->stat->czxid;
            o->version = k->stat->version;
            op_issue(o, BS_DELETE, zkr__call_delete(k, b->path, o->version));
        }
        return;
    case BS_DELETE:
        if (rc == ZOK) {
            o->changed = 1;
            op_end(o, 0);
        } else if (rc == ZNONODE) {
            op_end(o, 0); /* another cleared it first */
        } else if (rc == ZBADVERSION) {
            op_go(o); /* written since our read: read again */
        } else {
            op_end(o, rc);
        }
        return;
    case BS_SYNC:
        if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->synced = 1; /* the next look is at least as new as the call */
            op_go(o);
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
            op_standing(o, k->stat->czxid);
        }
        return;
    case BS_R_SYNC:
        if (rc != ZOK)
            op_end(o, rc);
        else
            op_issue(o, BS_R_READ, zkr__call_exists(k, b->path));
        return;
    case BS_R_READ:
        if (rc != ZOK && rc != ZNONODE)
            op_end(o, rc);
        else if (o->kind == ZKR_BARRIER_CLEAR)
            op_resolve_clear(o, rc == ZOK ? k->stat : NULL);
        else if (rc == ZOK)
            op_resolve_set(o, k->stat, NULL);
        else
            op_issue(o, BS_R_PARENT, zkr__call_exists(k, b->parent));
        return;
    case BS_R_PARENT:
        if (rc != ZOK && rc != ZNONODE)
            op_end(o, rc);
        else
            op_resolve_set(o, NULL, rc == ZOK ? k->stat : NULL);
        return;
    }
}

/* Sends the create of the path's next ancestor, from the top: 1 when
 * sent (or the operation ended), 0 when none is left. */
static int op_ancestor(op_t *o)
{
    int rc;

    if (!zkr__call_ancestor(&o->k, o->b->path, &o->anc_at, &o->b->acl, 0,
                            &rc)) {
        o->anc_at = -1;
        return 0;
    }
    op_issue(o, BS_ANCESTOR, rc);
    return 1;
}

/* A wait's next step, connected: sync once per session, then look (get
 * with a watch) unless its watch is set and has not fired; then wait for
 * the watch or the timeout. */
static void op_go_wait(op_t *o, int64_t now)
{
    zkr_barrier_t *b = o->b;
    zkr_session_t *s = b->s;

    if (o->sid_seen != s->sid) { /* a new session: its watches are new */
        o->sid_seen = s->sid;
        o->synced = 0;
        o->armed = 0;
    }
    if (!o->synced) {
        op_issue(o, BS_SYNC, zkr__call_sync(&o->k, b->path));
    } else if (o->looked && o->until >= 0 && now >= o->until) {
        op_end(o, ZKR_ETIMEDOUT);
    } else if (!o->armed) {
        op_issue(o, BS_LOOK,
                 zkr__call_wget(&o->k, b->path, barrier_watcher, s));
    } else {
        zkr__task_wake_at(s, &o->tk, o->until);
    }
}

/* The operation's next request, unless one is under way or a pause; or
 * its end: the handle freed, the session closing or lost for good, its
 * timeout (a wait) or no answer by its deadline (a set or clear: not
 * connected, or nothing could be sent). Not connected, it waits to be
 * woken. A write of unknown outcome is resolved first, even when freed,
 * while connected. */
static void op_go(op_t *o)
{
    zkr_barrier_t *b = o->b;
    zkr_session_t *s = b->s;
    int64_t now = zkr__now_ms();
    int wait = o->kind == ZKR_BARRIER_WAIT;

    if (s->forked) {
        op_end(o, ZKR_ECLOSED); /* the parent's requests are not ours */
        return;
    }
    if (o->k.busy || o->step != 0)
        return; /* its answer goes on */
    if (b->freeing && !o->unknown) {
        op_end(o, ZKR_ECANCELED);
        return;
    }
    if (o->pause_until > now) {
        zkr__task_wake_at(s, &o->tk, o->pause_until);
        return;
    }
    if (s->closing) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (!wait && now >= o->deadline) {
        op_end(o, o->unsent == ZKR_ENOMEM ? ZKR_ENOMEM : ZCONNECTIONLOSS);
        return;
    }
    if (s->zh == NULL || !s->connected) {
        if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
            op_end(o, ZKR_ELOST);
        else if (b->freeing)
            op_end(o, ZCONNECTIONLOSS);
        else if (wait && o->until >= 0 && now >= o->until)
            op_end(o, ZKR_ETIMEDOUT);
        else
            zkr__task_wake_at(s, &o->tk, wait ? o->until : o->deadline);
        return;
    }
    if (wait)
        op_go_wait(o, now);
    else if (o->unknown)
        op_issue(o, BS_R_SYNC, zkr__call_sync(&o->k, b->path));
    else if (o->kind == ZKR_BARRIER_CLEAR)
        op_issue(o, BS_READ, zkr__call_exists(&o->k, b->path));
    else if (o->anc_at < 0 || op_ancestor(o) == 0)
        op_issue(o, BS_PARENT, zkr__call_exists(&o->k, b->parent));
}

static void op_wake(zkr__task_t *t)
{
    op_go(op_of_task(t));
}

/* An operation, started (mutex held), or NULL (no memory). */
static op_t *op_start(zkr_barrier_t *b, zkr_barrier_op_t kind, int timeout_ms,
                      zkr_barrier_completion_t cb, void *cbdata)
{
    zkr_session_t *s = b->s;
    op_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        return NULL;
    if (cb != NULL && (o->ev = zkr__event_new()) == NULL) {
        free(o);
        return NULL;
    }
    o->b = b;
    o->kind = kind;
    o->cb = cb;
    o->cbdata = cbdata;
    o->anc_at = -1;
    o->k.s = s;
    o->k.next = op_next;
    o->tk.wake = op_wake;
    o->tk.wake_at = -1;
    o->deadline = zkr__now_ms() + op_bound(s);
    o->until = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    o->sid_seen = s->sid;
    o->next = b->ops;
    if (b->ops != NULL)
        b->ops->prev = o;
    b->ops = o;
    zkr__task_add(s, &o->tk);
    op_go(o);
    return o;
}

/* ------------------------------------------------------------ reader */

static zkr_barrier_t *barrier_of_reader(zkr__reader_t *r)
{
    return (zkr_barrier_t *)((char *)r - offsetof(zkr_barrier_t, rd));
}

/* Its waits' watches on path are still needed. */
static int barrier_follows(zkr__reader_t *r, const char *path)
{
    zkr_barrier_t *b = barrier_of_reader(r);

    if (strcmp(b->path, path) != 0)
        return 0;
    for (op_t *o = b->ops; o != NULL; o = o->next)
        if (o->kind == ZKR_BARRIER_WAIT)
            return 1;
    return 0;
}

/* The operations' tasks are woken by the engine on (re)connection and in
 * a forked child: nothing more to do here. */
static void barrier_nothing(zkr__reader_t *r)
{
    (void)r;
}

static const zkr__reader_ops_t barrier_reader_ops = {
    barrier_nothing, barrier_nothing, barrier_follows};

/* ------------------------------------------------------------- the API */

int zkr_barrier_new(zkr_barrier_t **out, zkr_session_t *s, const char *path,
                    int flags, const struct ACL_vector *acl)
{
    zkr_barrier_t *b;
    int rc = 0;

    if (out == NULL || s == NULL || zkr__check_path(path) != 0 ||
        strcmp(path, "/") == 0 || strlen(path) > ZKR_PATH_MAX ||
        (flags & ~ZKR_BARRIER_PERSISTENT) != 0)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((b = calloc(1, sizeof(*b))) == NULL ||
        (b->path = zkr__strdup(path)) == NULL ||
        (b->parent = zkr__strdup(path)) == NULL) {
        if (b != NULL)
            free(b->path);
        free(b);
        return ZKR_ENOMEM;
    }
    if (strrchr(b->parent, '/') == b->parent)
        b->parent[1] = '\0';
    else
        *strrchr(b->parent, '/') = '\0';
    b->s = s;
    b->persistent = (flags & ZKR_BARRIER_PERSISTENT) != 0;
    b->rd.ops = &barrier_reader_ops;
    if (acl == NULL)
        b->acl = ZOO_OPEN_ACL_UNSAFE; /* shared, not copied */
    else if ((rc = zkr__acl_copy(&b->acl, acl)) == 0)
        b->acl_owned = 1;
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        if (s->closing) {
            rc = ZKR_ECLOSED;
        } else {
            zkr__session_hold(s, 1); /* zkr_session_free() refuses */
            zkr__reader_add(s, &b->rd);
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (rc != 0) {
        if (b->acl_owned)
            zkr__acl_free(&b->acl);
        free(b->parent);
        free(b->path);
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

void zkr_barrier_free(zkr_barrier_t *b)
{
    zkr_session_t *s;

    if (b == NULL)
        return;
    s = b->s;
    pthread_mutex_lock(&s->mu);
    /* Operations end at their next step: one waiting (for a connection, a
     * pause, a watch) now, one with a request in flight when its answer
     * comes (on ZooKeeper's thread, bounded by the client's timeouts); a
     * write of unknown outcome is resolved first while connected. Their
     * ends post their completions, which do not touch b. */
    b->freeing = 1;
    for (op_t *o = b->ops, *nx; o != NULL; o = nx) {
        nx = o->next;
        op_go(o);
    }
    while (b->ops != NULL)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    zkr__reader_remove(s, &b->rd);
    zkr__session_hold(s, -1);
    pthread_mutex_unlock(&s->mu);
    if (b->acl_owned)
        zkr__acl_free(&b->acl);
    free(b->parent);
    free(b->path);
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
    s = b->s;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->forked || b->freeing) {
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
    s = b->s;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->forked || b->freeing) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    if ((o = op_start(b, kind, timeout_ms, NULL, NULL)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    while (!o->ended)
        zkr__wait(s, &o->ended, -1);
    pthread_mutex_unlock(&s->mu);
    rc = o->rc;
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
