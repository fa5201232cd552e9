/* The double barrier (kazoo's DoubleBarrier and Curator's
 * DistributedDoubleBarrier layout): each participant is an ephemeral
 * child of the path, named by a random UUID (32 hex digits); the phase
 * has begun once the child "ready" exists.
 *
 * Enter watches "ready" (exists) before it creates the participant's
 * node (so that a phase begun and ended by others right after the create
 * is seen), watches its node (another client may delete it: it is made
 * again), and counts the participants: with at least N it creates "ready" in
 * one multi with a check of each of the N it counted, else it waits for the
 * watch. Leave deletes the node, then watches the children until no
 * participant is left, and deletes "ready".
 *
 * Each operation is a chain of asynchronous requests (call.c) and a task
 * that the engine wakes when the chain waits for a connection, a pause,
 * a watch or its timeout. The handle's node path is the rhandle's path
 * (so its parent is the barrier's path, and the ancestors made for it
 * are the barrier's path and above). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"

#define READY "ready"
/* The largest multi of checks, in bytes: a quarter of the server's
 * default request limit. */
#define MULTI_MAX (256 * 1024)

struct zkr_dbarrier {
    zkr__rhandle_t h; /* path: the participant node; parent: the barrier */
    int count;        /* N */
    char *id;         /* the node's data */
    char *ready;      /* the barrier's "ready" child */
    char *name;       /* the node's name: points into h.path */
    /* The session on which its node stands (0: none known), and one on
     * which a create's answer was lost (0: none): what its operations'
     * ends and its free hand to the session's cleanup. */
    int64_t node_sid;
    int64_t maybe_sid;
    /* The cleanup entry reserved before its node is created, so that the
     * node can always be handed to the cleanup, even with no memory left
     * (NULL: none reserved yet). */
    zkr__cleanup_t *reserve;
};

/* The steps of an operation (zkr__rop_t.step): the request in flight. */
enum {
    DS_CREATE = 1, /* enter: its node */
    DS_ANCESTOR,   /* enter: the barrier's path or one of its ancestors */
    DS_OWN,        /* enter: its node's stat (it existed already) */
    DS_WATCH,      /* enter: exists of its node, with a watch */
    DS_STALE,      /* enter: delete its node of an older session */
    DS_READY,      /* enter: exists "ready", with a watch */
    DS_COUNT,      /* enter: the participants */
    DS_MAKE,       /* enter: multi of checks and the create of "ready" */
    DS_QUIT,       /* enter, timed out: delete its node */
    DS_L_DELETE,   /* leave: delete its node */
    DS_L_LIST,     /* leave: the participants, with a watch */
    DS_L_READY     /* leave: the last one deletes "ready" */
};

typedef struct op {
    zkr__rop_t o; /* its requests, wake-ups and end (call.h); deadline: its
                     timeout (-1: none), then a quit's bound */
    zkr_dbarrier_t *d;
    zkr_dbarrier_op_t kind;
    int64_t sid_seen; /* the session its watch and flags belong to */
    int armed;        /* its watch is set and has not fired (an enter's on
                         "ready") */
    int own_armed;    /* enter: its watch on its node is set and has not
                         fired */
    int counted;      /* enter: counted since its watch was set */
    int looked;       /* it has seen what it waits for missing */
    int saw_ready;    /* enter: its watch saw "ready" created */
    int quitting;     /* enter: timed out, deleting its node */
    int deleted;      /* leave: its node is deleted */
    int plain;        /* enter: makes "ready" with the check of its own node
                         only (1: a check of another was refused, or they
                         would not fit in a request, or such a request was
                         lost), or with none (2: its own was refused) */
    /* DS_MAKE's multi: */
    int nops;
    zoo_op_t *ops;
    zoo_op_result_t *res;
    char **paths;
    zkr_dbarrier_completion_t cb;
    void *cbdata;
} op_t;

static void op_go(zkr__rop_t *r);
static void op_end_rc(zkr__rop_t *r, int rc);
static void op_deliver(zkr__rop_t *r);
static void op_next(zkr__call_t *k, int rc);

static int op_watches(const zkr__rop_t *r, const char *path);

static const zkr__rop_class_t dbarrier_class = {op_go, op_end_rc, op_deliver,
                                                op_next, op_watches};

static op_t *op_of(zkr__rop_t *r)
{
    return (op_t *)r;
}

/* Does the operation watch path? An enter watches "ready" and its node
 * (data watches), a leave the barrier's children. */
static int op_watches(const zkr__rop_t *r, const char *path)
{
    const op_t *o = (const op_t *)r;

    return o->kind == ZKR_DBARRIER_ENTER ? strcmp(path, o->d->ready) == 0 ||
                                               strcmp(path, o->d->h.path) == 0
                                         : strcmp(path, o->d->h.parent) == 0;
}

/* A new random name for the handle's node, in place (32 hex digits). */
static void new_name(zkr_dbarrier_t *d)
{
    char u[37];
    int j = 0;

    zkr__uuid(u);
    for (int i = 0; u[i] != '\0'; i++)
        if (u[i] != '-')
            d->name[j++] = u[i];
}

/* ----------------------------------------------------------- the chain */

/* A watch fired: every operation of the session looks again (the watch's
 * context is the session, which outlives any operation). An enter told
 * that "ready" was created has entered, whatever it finds next (the last
 * leaver may have deleted it already). */
static void dbarrier_watcher(zhandle_t *zh, int type, int state,
                             const char *path, void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if ((s = zkr__call_watch_event(type, path, ctx)) == NULL)
        return;
    for (zkr__task_t *tk = zkr__engine(s)->tasks; tk != NULL; tk = tk->next) {
        zkr__rop_t *r = zkr__rop_of_task(tk);
        op_t *o;

        if (r == NULL || r->cls != &dbarrier_class)
            continue;
        o = op_of(r);
        if (!op_watches(r, path))
            continue;
        if (o->kind == ZKR_DBARRIER_ENTER && strcmp(path, o->d->h.path) == 0) {
            o->own_armed = 0; /* deleted by another client: made again */
            if (type == ZOO_DELETED_EVENT) {
                o->d->node_sid = 0;
                o->counted = 0; /* and counted again once it is back */
            }
        } else {
            /* Its own watch's (an event of an older one comes before
             * its exists is answered, while it is not armed). */
            if (o->kind == ZKR_DBARRIER_ENTER && type == ZOO_CREATED_EVENT &&
                o->armed)
                o->saw_ready = 1;
            o->armed = 0;
            o->counted = 0;
        }
        zkr__task_wake_at(s, tk, 0);
    }
    pthread_mutex_unlock(&s->mu);
}

static void op_deliver(zkr__rop_t *r)
{
    op_t *o = op_of(r);

    o->cb(r->rc, o->cbdata);
}

static void multi_free(op_t *o)
{
    for (int i = 0; i < o->nops; i++)
        free(o->paths[i]);
    free(o->paths);
    free(o->ops);
    free(o->res);
    o->paths = NULL;
    o->ops = NULL;
    o->res = NULL;
    o->nops = 0;
}

/* Its node, if it may stand, goes to the session's cleanup (which
 * deletes it, at any version, when connected on that session). The name
 * stays: an enter that makes the node again before the cleanup runs sees
 * it deleted (its watch) and makes it again; a node deleted after its
 * enter returned counts as left, as one deleted by another client. Never
 * two nodes of one handle. Mutex held. */
static void node_give_up(zkr_dbarrier_t *d)
{
    zkr_session_t *s = d->h.s;
    int64_t sid = d->node_sid != 0 ? d->node_sid : d->maybe_sid;

    if (sid == 0)
        return;
    if (!s->forked && d->reserve != NULL) {
        zkr__cleanup_commit(s, d->reserve, d->h.path, sid, NULL);
        d->reserve = NULL;
    }
    d->node_sid = 0;
    d->maybe_sid = 0;
}

/* Mutex held: the operation ends with rc. An enter that did not enter,
 * and any leave, give up the node if it may stand. A watch it set (or
 * that was kept for it) on this session is handed to the cleanup list,
 * which keeps it while another operation needs it (zkr__rhandle_follow()). */
static void op_end_rc(zkr__rop_t *r, int rc)
{
    op_t *o = op_of(r);
    zkr_dbarrier_t *d = o->d;
    zkr_session_t *s = d->h.s;
    int enter = o->kind == ZKR_DBARRIER_ENTER, unwatch;

    multi_free(o);
    if (d->h.freeing && rc == 0)
        rc = ZKR_ECANCELED; /* a freed handle takes no part any more */
    if (rc != 0 || o->kind == ZKR_DBARRIER_LEAVE)
        node_give_up(d); /* its pump may mark o as owing a removal */
    unwatch = o->o.watched != 0 && o->o.watched == s->sid && !s->forked;
    o->armed = 0;
    o->own_armed = 0;
    zkr__rop_end(r, rc); /* o may be freed; d lives while the mutex is held */
    if (unwatch && enter) {
        (void)zkr__cleanup_add_watch(s, d->ready, ZWATCHTYPE_DATA,
                                     dbarrier_watcher);
        (void)zkr__cleanup_add_watch(s, d->h.path, ZWATCHTYPE_DATA,
                                     dbarrier_watcher);
    } else if (unwatch) {
        (void)zkr__cleanup_add_watch(s, d->h.parent, ZWATCHTYPE_CHILD,
                                     dbarrier_watcher);
    }
}

static void op_end(op_t *o, int rc)
{
    op_end_rc(&o->o, rc);
}

static void op_issue(op_t *o, int st, int rc)
{
    zkr__rop_issue(&o->o, st, rc);
}

/* The multi that makes "ready": a check of N participants (its own
 * first; its own only, or none, when plain) and the create. 0, or
 * ZKR_ENOMEM. */
static int multi_make(op_t *o, const struct String_vector *v)
{
    zkr_dbarrier_t *d = o->d;
    int checks = o->plain == 2 ? 0 : o->plain == 1 ? 1 : d->count;
    char *p;

    multi_free(o);
    o->ops = calloc((size_t)d->count + 1, sizeof(*o->ops));
    o->res = calloc((size_t)d->count + 1, sizeof(*o->res));
    o->paths = calloc((size_t)d->count, sizeof(*o->paths));
    if (o->ops == NULL || o->res == NULL || o->paths == NULL)
        goto nomem;
    if (checks > 0 && (p = zkr__strdup(d->h.path)) == NULL)
        goto nomem;
    if (checks > 0)
        o->paths[o->nops++] = p;
    for (int i = 0; i < v->count && o->nops < checks; i++) {
        if (strcmp(v->data[i], READY) == 0 || strcmp(v->data[i], d->name) == 0)
            continue;
        if ((p = zkr__join(d->h.parent, v->data[i])) == NULL)
            goto nomem;
        o->paths[o->nops++] = p;
    }
    for (int i = 0; i < o->nops; i++)
        zoo_check_op_init(&o->ops[i], o->paths[i], -1);
    zoo_create_op_init(&o->ops[o->nops], d->ready, "", 0, &d->h.acl, 0, NULL,
                       0);
    return 0;
nomem:
    multi_free(o);
    return ZKR_ENOMEM;
}

/* Would the multi of N checks fit well within a request (the server's
 * jute.maxbuffer, 1 MB by default, cuts the connection of a bigger one)?
 * Each check costs its path and about 16 bytes. */
static int multi_fits(const op_t *o, const struct String_vector *v)
{
    const zkr_dbarrier_t *d = o->d;
    size_t bytes = strlen(d->h.path) + 64;
    int n = 1;

    for (int i = 0; i < v->count && n < d->count; i++)
        if (strcmp(v->data[i], READY) != 0 &&
            strcmp(v->data[i], d->name) != 0) {
            bytes += strlen(d->h.parent) + strlen(v->data[i]) + 18;
            n++;
        }
    return bytes <= MULTI_MAX;
}

/* An enter's count: the participants (all children but "ready"). With its
 * own node missing it is made again; with N or more, "ready" is made. */
static void op_counted(op_t *o, const struct String_vector *v)
{
    zkr_dbarrier_t *d = o->d;
    int n = 0, own = 0, rc;

    for (int i = 0; v != NULL && i < v->count; i++) {
        if (strcmp(v->data[i], READY) == 0) {
            /* The phase has begun: entered once its node stands (it may
             * have been deleted meanwhile). */
            o->saw_ready = 1;
            op_go(&o->o);
            return;
        }
        n++;
        own |= strcmp(v->data[i], d->name) == 0;
    }
    if (!own) { /* deleted (by someone else, or with a session) */
        d->node_sid = 0;
        op_go(&o->o);
        return;
    }
    if (n < d->count) {
        o->counted = 1;
        o->looked = 1;
        op_go(&o->o); /* waits for its watch or its timeout */
        return;
    }
    if (o->plain == 0 && !multi_fits(o, v))
        o->plain = 1;
    if ((rc = multi_make(o, v)) != 0) {
        op_issue(o, DS_MAKE, rc); /* a pause, then again */
        return;
    }
    op_issue(o, DS_MAKE, zkr__call_multi(&o->o.k, o->nops + 1, o->ops, o->res));
}

/* A request's answer (mutex held). */
static void op_next(zkr__call_t *k, int rc)
{
    op_t *o = (op_t *)((char *)k - offsetof(zkr__rop_t, k));
    zkr_dbarrier_t *d = o->d;
    zkr_session_t *s = d->h.s;
    int st = o->o.step;

    o->o.step = 0;
    if (s->forked) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* Asked again once connected: a create finds its node (or none),
         * a delete finds none, a multi finds "ready" (or makes it). */
        if (st == DS_CREATE)
            d->maybe_sid = s->sid;
        if (st == DS_ANCESTOR)
            o->o.anc_at = 0; /* it may not have applied: from the top */
        if (st == DS_READY || st == DS_L_LIST)
            o->armed = 0;
        if (st == DS_WATCH)
            o->own_armed = 0;
        if (st == DS_MAKE && o->plain == 0)
            o->plain = 1; /* too big for the server's limit, perhaps */
        op_go(&o->o);
        return;
    }
    switch (st) {
    case DS_CREATE:
        if (rc == ZOK) {
            d->node_sid = s->sid;
            d->maybe_sid = 0;
            o->counted = 0; /* a new node: count with it */
            op_go(&o->o);
        } else if (rc == ZNODEEXISTS) {
            op_issue(o, DS_OWN, zkr__call_exists(k, d->h.path));
        } else if (rc == ZNONODE) {
            zkr__rop_no_parent(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    case DS_ANCESTOR:
        op_go(&o->o); /* its node's create decides */
        return;
    case DS_OWN:
        if (rc == ZNONODE) {
            op_go(&o->o); /* gone again: create it */
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else if (k->stat->ephemeralOwner == s->sid) {
            d->node_sid = s->sid; /* ours: a create whose answer was lost */
            d->maybe_sid = 0;
            o->counted = 0;
            op_go(&o->o);
        } else {
            /* Its name is this handle's alone: made on an older session
             * that the server keeps for now (zkr gave up on it). It would
             * count as a participant that is not there any more. */
            op_issue(o, DS_STALE,
                     zkr__call_delete(k, d->h.path, k->stat->version));
        }
        return;
    case DS_STALE:
        if (rc == ZOK || rc == ZNONODE || rc == ZBADVERSION)
            op_go(&o->o);
        else
            op_end(o, rc);
        return;
    case DS_WATCH:
        /* Either way an exists sets a watch. */
        o->o.watched = s->sid;
        if (rc == ZOK) {
            o->own_armed = 1;
            op_go(&o->o);
        } else if (rc == ZNONODE) {
            d->node_sid = 0; /* deleted by another client: made again */
            op_go(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    case DS_READY:
        if (rc == ZOK || rc == ZNONODE) {
            /* Either way an exists sets a watch. Standing: entered, once
             * its own node is made. */
            o->armed = 1;
            o->o.watched = s->sid;
            if (rc == ZOK)
                o->saw_ready = 1;
            op_go(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    case DS_COUNT:
        if (rc == ZOK || rc == ZNONODE)
            op_counted(o, rc == ZOK ? k->strings : NULL);
        else
            op_end(o, rc);
        return;
    case DS_MAKE: {
        /* The op that failed: the first whose code is not ZOK (those
         * after it are ZRUNTIMEINCONSISTENCY); nops: the create. */
        int failed = 0, nops = o->nops;

        while (rc != ZOK && failed < o->nops && o->res[failed].err == ZOK)
            failed++;
        multi_free(o);
        if (rc == ZOK || rc == ZNODEEXISTS) {
            /* Made, or made by another: entered once its node stands
             * (deleted meanwhile: made again first). */
            o->saw_ready = 1;
            op_go(&o->o);
        } else if (rc == ZNONODE) {
            o->counted = 0; /* one of those counted is gone: again */
            op_go(&o->o);
        } else if (rc == ZNOAUTH && failed < nops) {
            /* A participant we may not read (kazoo's or Curator's, with
             * its own ACL), then our own: count again, and make "ready"
             * with fewer checks (none at last, as kazoo and Curator). A
             * create refused ends it. */
            o->plain = failed == 0 ? 2 : 1;
            o->counted = 0;
            op_go(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    }
    case DS_QUIT:
        if (rc == ZOK || rc == ZNONODE) {
            d->node_sid = 0;
            op_end(o, ZKR_ETIMEDOUT);
        } else {
            op_end(o, rc);
        }
        return;
    case DS_L_DELETE:
        if (rc == ZOK || rc == ZNONODE) {
            o->deleted = 1;
            d->node_sid = 0;
            d->maybe_sid = 0;
            op_go(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    case DS_L_LIST: {
        int n = 0;

        for (int i = 0; rc == ZOK && i < k->strings->count; i++)
            n += strcmp(k->strings->data[i], READY) != 0;
        if (rc == ZOK)
            o->o.watched = s->sid;
        if (rc != ZOK && rc != ZNONODE) {
            op_end(o, rc);
        } else if (n == 0) {
            op_issue(o, DS_L_READY, zkr__call_delete(k, d->ready, -1));
        } else {
            o->armed = 1;
            o->looked = 1;
            op_go(&o->o); /* waits for its watch or its timeout */
        }
        return;
    }
    case DS_L_READY:
        /* Deleted, by us or another leaver; or not ours to delete. */
        op_end(o, rc == ZOK || rc == ZNONODE || rc == ZNOTEMPTY ? 0 : rc);
        return;
    }
}

/* Connected, nothing in flight: an enter's next request. */
static void op_go_enter(op_t *o)
{
    zkr_dbarrier_t *d = o->d;
    zkr_session_t *s = d->h.s;
    zkr__call_t *k = &o->o.k;

    if (o->quitting)
        op_issue(o, DS_QUIT, zkr__call_delete(k, d->h.path, -1));
    else if (!o->armed)
        op_issue(o, DS_READY,
                 zkr__call_wexists(k, d->ready, dbarrier_watcher, s));
    else if (d->node_sid != s->sid) {
        if (d->reserve == NULL &&
            (d->reserve = zkr__cleanup_reserve(strlen(d->h.path))) == NULL)
            op_issue(o, DS_CREATE, ZKR_ENOMEM); /* a pause, then again */
        else if (o->o.anc_at < 0 || zkr__rop_ancestor(&o->o, DS_ANCESTOR) == 0)
            op_issue(o, DS_CREATE,
                     zkr__call_create(k, d->h.path, d->id, (int)strlen(d->id),
                                      &d->h.acl, ZOO_EPHEMERAL));
    } else if (!o->own_armed)
        op_issue(o, DS_WATCH,
                 zkr__call_wexists(k, d->h.path, dbarrier_watcher, s));
    else if (o->saw_ready)
        op_end(o, 0); /* the phase has begun, and its node stands */
    else if (!o->counted)
        op_issue(o, DS_COUNT, zkr__call_children(k, d->h.parent));
    else
        zkr__task_wake_at(s, &o->o.tk, o->o.deadline);
}

/* Connected, nothing in flight: a leave's next request. */
static void op_go_leave(op_t *o)
{
    zkr_dbarrier_t *d = o->d;
    zkr_session_t *s = d->h.s;
    zkr__call_t *k = &o->o.k;

    if (!o->deleted)
        op_issue(o, DS_L_DELETE, zkr__call_delete(k, d->h.path, -1));
    else if (!o->armed)
        op_issue(o, DS_L_LIST,
                 zkr__call_children2(k, d->h.parent, dbarrier_watcher, s));
    else
        zkr__task_wake_at(s, &o->o.tk, o->o.deadline);
}

/* The operation's next request, unless one is under way or a pause; or
 * its end. Its timeout ends it once it has looked, or when it cannot look
 * (not connected, or its requests could not be sent); an enter whose node
 * stands on this session deletes it first while connected (within a
 * bound), else hands it to the session's cleanup. */
static void op_go(zkr__rop_t *r)
{
    op_t *o = op_of(r);
    zkr_dbarrier_t *d = o->d;
    zkr_session_t *s = d->h.s;

    if (o->kind == ZKR_DBARRIER_ENTER && !o->quitting && !o->saw_ready &&
        o->looked && r->step == 0 && !r->k.busy && !d->h.freeing &&
        !s->forked && s->connected && d->node_sid == s->sid &&
        r->deadline >= 0 && zkr__now_ms() >= r->deadline) {
        o->quitting = 1;
        r->deadline = zkr__rop_bound(s);
    }
    if (o->quitting && !s->connected)
        r->deadline = 0; /* no waiting to delete its node: the cleanup will */
    if (o->sid_seen != s->sid) { /* a new session: its watches are new */
        o->sid_seen = s->sid;
        o->armed = 0;
        o->own_armed = 0;
        o->counted = 0;
        o->saw_ready = 0; /* away: what stands now decides */
    }
    if (!zkr__rop_ready(r, !s->connected || r->unsent != 0 || o->looked ||
                                   o->quitting
                               ? ZKR_ETIMEDOUT
                               : 0))
        return;
    if (o->kind == ZKR_DBARRIER_ENTER)
        op_go_enter(o);
    else
        op_go_leave(o);
}

/* ------------------------------------------------------------- the API */

static const zkr__gfamily_t waiters_family = {
    "zkr_barrier_waiters", ZKR__BARRIER_WAITERS_HELP, "dbarrier", 'n', 's'};

/* Its enter or leave under way (mutex held): one at a time. */
static int64_t waiters_now(zkr__gauge_t *g, int64_t now)
{
    zkr_dbarrier_t *d =
        (zkr_dbarrier_t *)((char *)g - offsetof(zkr_dbarrier_t, h.gauge));

    (void)now;
    return d->h.ops != NULL;
}

int zkr_dbarrier_new(zkr_dbarrier_t **out, zkr_session_t *s, const char *path,
                     int count, const char *id, const struct ACL_vector *acl)
{
    zkr_dbarrier_t *d;
    char host[300], *node;
    int rc;

    if (out == NULL || s == NULL || path == NULL || count < 1 ||
        zkr__check_path(path) != 0 || strcmp(path, "/") == 0 ||
        (id != NULL && zkr__check_id(id) != 0))
        return ZBADARGUMENTS;
    *out = NULL;
    if (id == NULL) {
        zkr__default_id(host, sizeof(host));
        id = host;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL)
        return ZKR_ENOMEM;
    /* Its node's path, the name a placeholder of 32 characters. */
    if ((node = zkr__join(path, "00000000000000000000000000000000")) == NULL ||
        (d->id = zkr__strdup(id)) == NULL ||
        (d->ready = zkr__join(path, READY)) == NULL) {
        free(node);
        free(d->id);
        free(d);
        return ZKR_ENOMEM;
    }
    rc = zkr__rhandle_init(&d->h, s, node, acl);
    free(node);
    if (rc != 0) {
        free(d->ready);
        free(d->id);
        free(d);
        return rc;
    }
    d->count = count;
    d->name = strrchr(d->h.path, '/') + 1;
    new_name(d);
    if ((rc = zkr__rhandle_gauge(&d->h, &waiters_family, d->h.parent,
                                 waiters_now)) != 0) {
        zkr__rhandle_free(&d->h);
        free(d->ready);
        free(d->id);
        free(d);
        return rc;
    }
    zkr__rhandle_follow(&d->h);
    *out = d;
    return 0;
}

void zkr_dbarrier_free(zkr_dbarrier_t *d)
{
    zkr_session_t *s;

    if (d == NULL)
        return;
    s = d->h.s;
    pthread_mutex_lock(&s->mu);
    /* Entered and never left: its node goes. An operation under way gives
     * it up at its end instead (its create may be in flight). */
    if (d->h.ops == NULL)
        node_give_up(d);
    pthread_mutex_unlock(&s->mu);
    zkr__rhandle_free(&d->h); /* its operations end, and free its paths */
    zkr__cleanup_unreserve(d->reserve);
    free(d->ready);
    free(d->id);
    free(d);
}

const char *zkr_dbarrier_name(const zkr_dbarrier_t *d)
{
    return d != NULL ? d->name : NULL;
}

/* An operation, started (mutex held); NULL with *rc its code. */
static op_t *op_start(zkr_dbarrier_t *d, zkr_dbarrier_op_t kind, int timeout_ms,
                      zkr_dbarrier_completion_t cb, void *cbdata, int *rc)
{
    op_t *o;

    if ((*rc = zkr__rop_may_start(&d->h)) != 0)
        return NULL;
    if (d->h.ops != NULL) {
        *rc = ZKR_ESTATE;
        return NULL;
    }
    o = (op_t *)zkr__rop_new(&d->h, sizeof(op_t), &dbarrier_class, cb != NULL);
    if (o == NULL) {
        *rc = ZKR_ENOMEM;
        return NULL;
    }
    o->d = d;
    o->kind = kind;
    o->cb = cb;
    o->cbdata = cbdata;
    o->sid_seen = d->h.s->sid;
    o->o.deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    op_go(&o->o);
    return o;
}

static int op_check(const zkr_dbarrier_t *d, zkr_dbarrier_op_t kind,
                    int timeout_ms)
{
    return d == NULL ||
                   (kind != ZKR_DBARRIER_ENTER && kind != ZKR_DBARRIER_LEAVE) ||
                   timeout_ms < -1
               ? ZBADARGUMENTS
               : 0;
}

int zkr_dbarrier_async(zkr_dbarrier_t *d, zkr_dbarrier_op_t kind,
                       int timeout_ms, zkr_dbarrier_completion_t cb, void *data)
{
    int rc;

    if (op_check(d, kind, timeout_ms) != 0 || cb == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&d->h.s->mu);
    /* It may end inside op_start: its completion is then posted already. */
    (void)op_start(d, kind, timeout_ms, cb, data, &rc);
    pthread_mutex_unlock(&d->h.s->mu);
    return rc;
}

static int dbarrier_run(zkr_dbarrier_t *d, zkr_dbarrier_op_t kind,
                        int timeout_ms)
{
    zkr_session_t *s;
    op_t *o;
    int rc;

    if (op_check(d, kind, timeout_ms) != 0)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    s = d->h.s;
    pthread_mutex_lock(&s->mu);
    if ((o = op_start(d, kind, timeout_ms, NULL, NULL, &rc)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    rc = zkr__rop_wait(&o->o);
    pthread_mutex_unlock(&s->mu);
    free(o);
    return rc;
}

int zkr_dbarrier_enter(zkr_dbarrier_t *d, int timeout_ms)
{
    return dbarrier_run(d, ZKR_DBARRIER_ENTER, timeout_ms);
}

int zkr_dbarrier_leave(zkr_dbarrier_t *d, int timeout_ms)
{
    return dbarrier_run(d, ZKR_DBARRIER_LEAVE, timeout_ms);
}
