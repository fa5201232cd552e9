/* Group membership (kazoo's Party layout): a member is the ephemeral node
 * PATH/<id>__party__ holding its data; the members are PATH's children
 * whose names contain "__party__".
 *
 * A handle is a view of PATH's children with their data (cache.c),
 * filtered by that rule, and a keeper: a chain of requests (call.c), one
 * at a time, woken by its task (a connection, a pause, a deadline) and by
 * the session's watches on its node, that makes the handle's node while
 * it is joined (again after a deletion by another client, and on each
 * new session), and deletes it once it has left. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"

#define SUFFIX "__party__"
#define SUFFIX_LEN (sizeof(SUFFIX) - 1)
/* A refused request of the keeper (ZNOAUTH, say), with nobody to tell:
 * tried again after this long. */
#define REFUSED_PAUSE_MS 1000
/* Creates refused for want of PATH before a join gives up (ZNONODE). */
#define NO_PARENT_ROUNDS 3

/* A join or leave under way: a blocking caller waits for done; an
 * asynchronous one's completion is posted (its event made ahead). */
typedef struct waiter {
    zkr_group_t *g;
    int leave;
    int64_t deadline; /* -1: none */
    int done, rc;
    zkr__event_t *ev;
    zkr_group_completion_t cb;
    void *cbdata;
    /* A join with another id while the last one's node may stand: the id
     * and data it takes once that node is settled (deleted, or known
     * gone), or NULL. */
    char *nid, *ndata;
    int nlen;
} waiter_t;

enum { /* the keeper's request in flight */
       K_NONE,
       K_ANCESTOR, /* PATH or one of its ancestors */
       K_CREATE,   /* the node */
       K_OWN,      /* its stat, after ZNODEEXISTS */
       K_STALE,    /* delete it, made on an older session of ours */
       K_OTHER,    /* exists, with a watch: held by another session */
       K_WATCH,    /* exists of our node, with a watch */
       K_SET,      /* its data, changed by a join while it stood */
       K_L_SYNC,   /* leaving, a create's answer lost: sync first */
       K_L_OWN,    /* leaving: its stat */
       K_DELETE    /* leaving: delete it */
};

struct zkr_group {
    zkr__view_t v;    /* the members (its events count our completions) */
    zkr__reader_t rd; /* in the session's readers: follows() */
    zkr__task_t tk;   /* the keeper's */
    zkr_session_t *s;
    char *path;
    struct ACL_vector acl;
    int acl_owned;
    zkr_group_listener_t fn;
    void *fndata;

    /* membership */
    char *id, *name, *node; /* the id, the node's name, its path */
    char *data;
    int len;
    int want;           /* joined, until a leave */
    int64_t node_sid;   /* the session on which the node stands (0: none) */
    int64_t maybe_sid;  /* one on which a create's answer was lost */
    int64_t made_sid;   /* the last session on which a create was sent: a
                           node of ours there may stand */
    int64_t older_sid;  /* the one before it: a node there is ours too */
    int own_armed;      /* the exists watch on our node is set, not fired */
    int64_t other_sid;  /* the session on which the exists watch on the
                           node of another session, awaited, is set (0:
                           none) */
    int64_t synced_sid; /* leaving: the session on which a sync was
                           answered since a create's answer was lost */
    int data_dirty;     /* the node, standing, holds older data */
    int anc_at;         /* making PATH: the '/' of the last made, or -1 */
    int rounds;         /* creates refused for want of PATH */
    int anc_rc;         /* the code an ancestor's create was refused with */
    int64_t k_pause;    /* the keeper's next request not before */
    int kstep;
    zkr__call_t kk;
    zkr__cleanup_t *reserve; /* the node's cleanup entry, made ahead */
    waiter_t *w;

    int gone; /* being freed */
};

static const zkr__reader_ops_t group_ops;
static void pump(zkr_group_t *g);

static zkr_group_t *group_of(zkr__reader_t *r)
{
    return r->ops == &group_ops
               ? (zkr_group_t *)((char *)r - offsetof(zkr_group_t, rd))
               : NULL;
}

/* ------------------------------------------------------------- watches */

/* A watch on a member node of the session fired: the keeper of each
 * handle whose node it is looks again (deleted: made again). */
static void group_watcher(zhandle_t *zh, int type, int state, const char *path,
                          void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if ((s = zkr__call_watch_event(type, path, ctx)) == NULL)
        return;
    for (zkr__reader_t *rd = zkr__engine(s)->readers; rd != NULL;
         rd = rd->next) {
        zkr_group_t *g = group_of(rd);

        if (g == NULL || g->gone || g->node == NULL ||
            strcmp(path, g->node) != 0)
            continue;
        g->own_armed = 0;
        g->other_sid = 0;
        if (type == ZOO_DELETED_EVENT && g->node_sid == s->sid)
            g->node_sid = 0; /* made again */
        pump(g);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Does the keeper need the session's watch on path? Its node's (or the
 * one of another session it awaits). */
static int follows(zkr__reader_t *rd, const char *path)
{
    zkr_group_t *g = group_of(rd);

    return !g->gone && g->node != NULL && strcmp(path, g->node) == 0 &&
           (g->own_armed || g->other_sid != 0 || g->kstep == K_WATCH ||
            g->kstep == K_OTHER);
}

static void refresh(zkr__reader_t *rd)
{
    pump(group_of(rd));
}

static void forked(zkr__reader_t *rd)
{
    zkr_group_t *g = group_of(rd);

    g->kk.busy = 0;
    g->kstep = K_NONE;
}

static const zkr__reader_ops_t group_ops = {refresh, forked, follows};

/* ------------------------------------------------------------- members */

/* Is name a member's? kazoo's rule: it contains the suffix. */
static int is_member(const char *name)
{
    return strstr(name, SUFFIX) != NULL;
}

/* The public copy of a view: one allocation per member holds its strings
 * (id, name, data). */
static void *members_export(zkr__view_t *v, const zkr__vsnap_t *snap, int *ok)
{
    const zkr_group_t *g = (const zkr_group_t *)v;
    zkr_group_member_t *out;

    *ok = 1;
    if (snap->n == 0)
        return NULL;
    if ((out = calloc((size_t)snap->n, sizeof(*out))) == NULL) {
        *ok = 0;
        return NULL;
    }
    for (int i = 0; i < snap->n; i++) {
        const zkr__ventry_t *m = &snap->e[i];
        size_t nl = strlen(m->name), il = nl;
        char *b;

        if (nl > SUFFIX_LEN && strcmp(m->name + nl - SUFFIX_LEN, SUFFIX) == 0)
            il = nl - SUFFIX_LEN; /* (a node named "__party__" alone: its
                                     name) */
        if ((b = malloc(il + 1 + nl + 1 + (size_t)m->len + 1)) == NULL) {
            zkr_group_members_free(out, i);
            *ok = 0;
            return NULL;
        }
        memcpy(b, m->name, il);
        b[il] = '\0';
        memcpy(b + il + 1, m->name, nl + 1);
        memcpy(b + il + 1 + nl + 1, m->data, (size_t)m->len + 1);
        out[i].id = b;
        out[i].name = b + il + 1;
        out[i].data = b + il + 1 + nl + 1;
        out[i].len = m->len;
        out[i].czxid = m->st.czxid;
        out[i].owner = m->st.ephemeralOwner;
        out[i].self = g->name != NULL && g->s->sid != 0 &&
                      g->s->state != ZKR_STATE_LOST &&
                      m->st.ephemeralOwner == g->s->sid &&
                      strcmp(m->name, g->name) == 0;
    }
    return out;
}

void zkr_group_members_free(zkr_group_member_t *members, int count)
{
    if (members == NULL)
        return;
    for (int i = 0; i < count; i++)
        free((char *)members[i].id);
    free(members);
}

static void members_free(void *copy, int n)
{
    zkr_group_members_free(copy, n);
}

static void members_deliver(zkr__view_t *v, const void *copy, int n,
                            int64_t zxid)
{
    zkr_group_t *g = (zkr_group_t *)v;

    g->fn(g, copy, n, zxid, g->fndata);
}

static void group_destroy(zkr_group_t *g)
{
    if (g->acl_owned)
        zkr__acl_free(&g->acl);
    free(g->id);
    free(g->name);
    free(g->node);
    free(g->data);
    free(g->path);
    free(g);
}

static void members_dispose(zkr__view_t *v)
{
    group_destroy((zkr_group_t *)v);
}

/* Two reads are the same view of the members when they have the same
 * members, with the same data and nodes (a write of the same data again
 * is no change). */
static int members_same(const zkr__vsnap_t *a, const zkr__vsnap_t *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        const zkr__ventry_t *x = &a->e[i], *y = &b->e[i];

        if (strcmp(x->name, y->name) != 0 || x->len != y->len ||
            x->st.czxid != y->st.czxid ||
            x->st.ephemeralOwner != y->st.ephemeralOwner ||
            memcmp(x->data, y->data, (size_t)x->len) != 0)
            return 0;
    }
    return 1;
}

static const zkr__gfamily_t members_family = {
    "zkr_group_members",
    "Members in the group's published view (its member list), the largest "
    "of this session's handles on the group.",
    "group", 'n', 'x'};
static const zkr__gfamily_t lag_family = {
    "zkr_cache_lag_seconds", ZKR__VIEW_LAG_HELP, "group", 'm', 'x'};

static const zkr__view_class_t members_class = {
    is_member,       members_same,    members_export,  members_free,
    members_deliver, members_dispose, &members_family, &lag_family};
static const zkr__view_class_t members_class_quiet = {
    is_member, members_same,    members_export,  members_free,
    NULL,      members_dispose, &members_family, &lag_family};

/* ------------------------------------------------------------- waiters */

static void run_done(const zkr__event_t *ev)
{
    waiter_t *w = ev->data;
    zkr_group_t *g = w->g;

    w->cb(w->rc, g, w->cbdata);
    free(w);
    zkr__view_event_done(&g->v);
}

static int set_member(zkr_group_t *g, const char *id, const void *data,
                      int len);

static void waiter_pending_free(waiter_t *w)
{
    free(w->nid);
    free(w->ndata);
    w->nid = w->ndata = NULL;
}

/* Ends the join or leave under way with rc (mutex held). */
static void waiter_end(zkr_group_t *g, int rc)
{
    waiter_t *w = g->w;
    zkr_session_t *s = g->s;

    if (w == NULL)
        return;
    g->w = NULL;
    waiter_pending_free(w);
    w->rc = rc;
    if (w->ev == NULL) {
        w->done = 1;
        pthread_cond_broadcast(&s->cv);
        return;
    }
    if (s->forked) {
        free(w->ev);
        free(w);
        return;
    }
    w->g = g;
    w->ev->run = run_done;
    g->v.events++; /* its free waits for it, or leaves it the last word */
    zkr__post_event(s, w->ev, ZKR__EV_CALL, rc, NULL, NULL, w);
}

/* Has the join or leave under way ended (mutex held)? A join once its
 * node stands on this session; a leave once no node of ours may stand on
 * it. Its deadline, and a session lost for good, end it too. */
static void waiter_check(zkr_group_t *g)
{
    zkr_session_t *s = g->s;
    waiter_t *w = g->w;
    int lost = zkr__lost_for_good(s);

    if (w == NULL)
        return;
    if (!w->leave && w->nid != NULL && !lost && !s->closing && !g->kk.busy &&
        g->node_sid != s->sid && g->maybe_sid != s->sid) {
        /* The last id's node is settled: the new id's turn. */
        if (set_member(g, w->nid, w->ndata, w->nlen) != 0) {
            waiter_end(g, ZKR_ENOMEM);
            return;
        }
        waiter_pending_free(w);
        g->want = 1;
    }
    if (!w->leave && w->nid == NULL && s->sid != 0 && g->node_sid == s->sid &&
        s->connected && !g->data_dirty && g->kstep != K_SET &&
        g->kstep != K_DELETE) {
        waiter_end(g, 0); /* it stands, with its data */
    } else if (w->leave &&
               !(g->kk.busy && (g->kstep == K_CREATE || g->kstep == K_OWN)) &&
               (lost || (g->node_sid != s->sid && g->maybe_sid != s->sid) ||
                s->sid == 0)) {
        waiter_end(g, 0);
    } else if (lost || s->closing) {
        g->want = 0;
        waiter_end(g, s->closing ? ZKR_ECLOSED : ZKR_ELOST);
    } else if (w->deadline >= 0 && zkr__now_ms() >= w->deadline) {
        if (!w->leave)
            g->want = 0; /* not kept: deleted if it was made */
        waiter_end(g, ZKR_ETIMEDOUT);
    }
}

/* ------------------------------------------------------------- keeper */

static void keeper_next(zkr__call_t *k, int rc);
static void node_give_up(zkr_group_t *g);

/* A refused request: a join under way ends with its code; otherwise
 * (keeping a node made again) it is tried again later. A leave refused
 * (or its request not sent) hands the node to the session's cleanup,
 * which deletes it when it can (or the session's end). */
static void keeper_refused(zkr_group_t *g, int rc)
{
    if (g->w != NULL && !g->w->leave) {
        g->want = 0;
        waiter_end(g, rc);
    } else if (!g->want) {
        node_give_up(g);
        waiter_end(g, rc);
    } else {
        zkr__log(g->s, ZKR_LOG_WARN, "group %s: member %s not made: %s",
                 g->path, g->id, zkr_errname(rc));
        g->k_pause = zkr__now_ms() + REFUSED_PAUSE_MS;
    }
}

/* The keeper's request st was issued with rc (0: in flight). */
static void kissue(zkr_group_t *g, int st, int rc)
{
    if (rc == 0) {
        g->kstep = st;
        return;
    }
    if (zkr__call_lost(rc) || rc == ZKR_ENOMEM)
        g->k_pause = zkr__now_ms() + ZKR__RETRY_MS;
    else
        keeper_refused(g, rc);
}

/* The keeper's next request, if any (mutex held, connected, nothing in
 * flight). */
static void keep(zkr_group_t *g)
{
    zkr_session_t *s = g->s;
    int64_t sid = s->sid;
    int rc;

    if (g->want && g->node_sid != sid && g->other_sid == sid) {
        ; /* another session's node of this id: its deletion wakes us */
    } else if (g->want && g->node_sid != sid) {
        if (g->reserve == NULL &&
            (g->reserve = zkr__cleanup_reserve(strlen(g->node))) == NULL) {
            kissue(g, K_CREATE, ZKR_ENOMEM);
            return;
        }
        if (g->anc_at >= 0) {
            if (zkr__call_ancestor(&g->kk, g->node, &g->anc_at, &g->acl, 0,
                                   &rc)) {
                kissue(g, K_ANCESTOR, rc);
                return;
            }
            g->anc_at = -1;
        }
        if (g->made_sid != sid) {
            g->older_sid = g->made_sid;
            g->made_sid = sid;
        }
        kissue(g, K_CREATE,
               zkr__call_create(&g->kk, g->node, g->data, g->len, &g->acl,
                                ZOO_EPHEMERAL));
    } else if (g->want && g->data_dirty) {
        g->data_dirty = 0; /* set again if the answer is lost */
        kissue(g, K_SET, zkr__call_set(&g->kk, g->node, g->data, g->len, -1));
        if (g->kstep != K_SET)
            g->data_dirty = 1;
    } else if (g->want && !g->own_armed) {
        kissue(g, K_WATCH,
               zkr__call_wexists(&g->kk, g->node, group_watcher, s));
    } else if (!g->want && g->node_sid != sid && g->maybe_sid == sid &&
               g->synced_sid != sid) {
        /* The create may be on its way to the leader while this server
         * (another than the one it was sent to) does not have it yet. */
        kissue(g, K_L_SYNC, zkr__call_sync(&g->kk, g->node));
    } else if (!g->want && (g->node_sid == sid || g->maybe_sid == sid)) {
        kissue(g, K_L_OWN, zkr__call_exists(&g->kk, g->node));
    }
}

static void keeper_next(zkr__call_t *k, int rc)
{
    zkr_group_t *g = (zkr_group_t *)((char *)k - offsetof(zkr_group_t, kk));
    zkr_session_t *s = g->s;
    int st = g->kstep;

    g->kstep = K_NONE;
    if (s->forked)
        return;
    if (zkr__call_lost(rc)) {
        /* Asked again once connected: a create finds its node (or
         * none), a delete none. */
        if (st == K_CREATE) {
            g->maybe_sid = s->sid;
            g->synced_sid = 0;
        }
        if (st == K_SET)
            g->data_dirty = 1;
        if (st == K_ANCESTOR)
            g->anc_at = 0;
        if (st == K_WATCH)
            g->own_armed = 0;
        if (st == K_OTHER)
            g->other_sid = 0;
        pump(g);
        return;
    }
    if (g->gone) { /* its free waits for this answer: nothing more */
        if (st == K_CREATE && rc == ZOK) {
            g->node_sid = s->sid;
            g->maybe_sid = 0;
        }
        return;
    }
    switch (st) {
    case K_ANCESTOR:
        /* Made, or there: the next one (then the node). Missing again:
         * from the top. Refused (it may stand all the same: the server
         * checks the parent's ACL first): kept, and the join's code if
         * the node's create then finds its parent missing. */
        if (rc == ZNONODE)
            g->anc_at = 0;
        else if (rc != ZOK && rc != ZNODEEXISTS)
            g->anc_rc = rc;
        break;
    case K_CREATE:
        if (rc == ZOK) {
            g->node_sid = s->sid;
            g->maybe_sid = 0;
            g->own_armed = 0;
            g->rounds = 0;
            g->anc_rc = 0;
        } else if (rc == ZNODEEXISTS) {
            kissue(g, K_OWN, zkr__call_exists(k, g->node));
            return;
        } else if (rc == ZNONODE && g->anc_rc != 0) {
            rc = g->anc_rc; /* PATH could not be made */
            g->anc_rc = 0;
            g->rounds = 0;
            keeper_refused(g, rc);
        } else if (rc == ZNONODE && ++g->rounds <= NO_PARENT_ROUNDS) {
            g->anc_at = 0;
        } else {
            g->rounds = 0;
            keeper_refused(g, rc);
        }
        break;
    case K_OWN:
        if (rc == ZNONODE) {
            if (!g->want)
                g->maybe_sid = 0; /* left: nothing of ours stands */
        } else if (rc != ZOK) {
            keeper_refused(g, rc);
        } else if (k->stat->ephemeralOwner == s->sid) {
            g->node_sid = s->sid; /* ours: a create whose answer was lost */
            g->maybe_sid = 0;
            g->own_armed = 0;
        } else if (k->stat->ephemeralOwner != 0 &&
                   k->stat->ephemeralOwner == g->older_sid) {
            /* Made on a session of ours that zkr gave up on, which the
             * server keeps for now. */
            kissue(g, K_STALE, zkr__call_delete(k, g->node, k->stat->version));
            return;
        } else {
            /* Another session holds the id: a create of ours whose
             * answer was lost did not make it. Joined, wait for it to
             * go. */
            g->maybe_sid = 0;
            if (!g->want)
                break;
            kissue(g, K_OTHER, zkr__call_wexists(k, g->node, group_watcher, s));
            return;
        }
        break;
    case K_STALE:
        if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION)
            keeper_refused(g, rc);
        break;
    case K_OTHER:
        if (rc == ZOK)
            g->other_sid = s->sid; /* its deletion's event wakes us */
        else if (rc != ZNONODE)
            keeper_refused(g, rc);
        break;
    case K_WATCH:
        if (rc == ZOK)
            g->own_armed = 1;
        else if (rc == ZNONODE)
            g->node_sid = 0; /* deleted by another client: made again */
        else
            keeper_refused(g, rc);
        break;
    case K_SET:
        if (rc == ZNONODE)
            g->node_sid = 0; /* deleted: made again, with its data */
        else if (rc != ZOK)
            keeper_refused(g, rc);
        break;
    case K_L_SYNC:
        if (rc == ZOK)
            g->synced_sid = s->sid;
        else
            keeper_refused(g, rc);
        break;
    case K_L_OWN:
        if (g->want) {
            ; /* joined again meanwhile: kept (the keeper looks again) */
        } else if (rc == ZOK && k->stat->ephemeralOwner == s->sid) {
            kissue(g, K_DELETE, zkr__call_delete(k, g->node, k->stat->version));
            return;
        } else if (rc == ZOK || rc == ZNONODE) {
            g->node_sid = 0; /* gone, or another session's now */
            g->maybe_sid = 0;
        } else {
            keeper_refused(g, rc);
        }
        break;
    case K_DELETE:
        if (rc == ZOK || rc == ZNONODE) {
            g->node_sid = 0;
            g->maybe_sid = 0;
        } else if (rc != ZBADVERSION) { /* changed: its stat again */
            keeper_refused(g, rc);
        }
        break;
    }
    pump(g);
}

/* --------------------------------------------------------------- pump */

/* What the keeper does next, whatever woke it (mutex held): the join or
 * leave under way checked, its next request, and the task's next
 * wake-up. */
static void pump(zkr_group_t *g)
{
    zkr_session_t *s = g->s;
    int64_t now = zkr__now_ms(), at = -1;

    if (s->forked || g->gone)
        return;
    waiter_check(g);
    if (s->connected && s->zh != NULL && !s->closing) {
        if (!g->kk.busy && g->k_pause <= now)
            keep(g);
        waiter_check(g); /* a join whose node stands */
    }
    if (g->k_pause > now)
        at = g->k_pause;
    if (g->w != NULL && g->w->deadline >= 0 && (at < 0 || g->w->deadline < at))
        at = g->w->deadline;
    zkr__task_wake_at(s, &g->tk, at);
}

static void group_wake(zkr__task_t *t)
{
    pump((zkr_group_t *)((char *)t - offsetof(zkr_group_t, tk)));
}

/* ---------------------------------------------------------------- API */

int zkr_group_new(zkr_group_t **out, zkr_session_t *s, const char *path,
                  const struct ACL_vector *acl, zkr_group_listener_t fn,
                  void *data)
{
    zkr_group_t *g;
    int rc = 0;

    if (out == NULL || s == NULL || zkr__check_path(path) != 0 ||
        strcmp(path, "/") == 0)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((g = calloc(1, sizeof(*g))) == NULL)
        return ZKR_ENOMEM;
    if ((g->path = zkr__strdup(path)) == NULL) {
        free(g);
        return ZKR_ENOMEM;
    }
    if (acl == NULL)
        g->acl = ZOO_OPEN_ACL_UNSAFE; /* shared, not copied */
    else if ((rc = zkr__acl_copy(&g->acl, acl)) == 0)
        g->acl_owned = 1;
    g->s = s;
    g->fn = fn;
    g->fndata = data;
    g->anc_at = -1;
    g->kk.s = s;
    g->kk.next = keeper_next;
    g->tk.wake = group_wake;
    g->tk.wake_at = -1;
    g->rd.ops = &group_ops;
    if (rc != 0 ||
        (rc = zkr__view_start(&g->v, s, path, ZKR__VIEW_CHILDREN_DATA,
                              fn != NULL ? &members_class
                                         : &members_class_quiet)) != 0) {
        group_destroy(g);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    zkr__reader_add(s, &g->rd);
    zkr__task_add(s, &g->tk);
    pthread_mutex_unlock(&s->mu);
    *out = g;
    return 0;
}

/* A valid id: 1..ZKR_GROUP_ID_MAX bytes of UTF-8, no '/' or control
 * character, and a valid node path with its suffix. */
static int check_id(const char *path, const char *id)
{
    char *node;
    int rc;

    if (zkr__check_id(id) != 0 || strlen(id) > ZKR_GROUP_ID_MAX ||
        strchr(id, '/') != NULL)
        return ZBADARGUMENTS;
    for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++)
        if (*p < 0x20 || *p == 0x7f ||
            (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) || /* C1 */
            /* what the server refuses in a name too: U+E000..U+F8FF
             * (private use) and U+FFF0..U+FFFF */
            p[0] == 0xee || p[0] >= 0xf0 || /* and beyond U+FFFF */
            (p[0] == 0xef && (p[1] <= 0xa3 || (p[1] == 0xbf && p[2] >= 0xb0))))
            return ZBADARGUMENTS;
    if ((node = malloc(strlen(path) + 1 + strlen(id) + SUFFIX_LEN + 1)) == NULL)
        return ZKR_ENOMEM;
    strcpy(node, path);
    strcat(node, "/");
    strcat(node, id);
    strcat(node, SUFFIX);
    rc = zkr__check_path(node) != 0 ? ZBADARGUMENTS : 0;
    free(node);
    return rc;
}

/* The node of ours that may stand, if any, goes to the session's cleanup
 * (mutex held). */
static void node_give_up(zkr_group_t *g)
{
    zkr_session_t *s = g->s;
    int64_t sid = g->node_sid != 0 ? g->node_sid : g->maybe_sid;

    if (sid != 0 && !s->forked && g->reserve != NULL) {
        zkr__cleanup_commit(s, g->reserve, g->node, sid, NULL);
        g->reserve = NULL;
    }
    g->node_sid = 0;
    g->maybe_sid = 0;
}

/* Sets the member's id, node and data for a join (mutex held): 0, or
 * ZKR_ENOMEM. A node of another id that may stand still is given up. */
static int set_member(zkr_group_t *g, const char *id, const void *data, int len)
{
    char *nid = NULL, *name = NULL, *node = NULL, *d = NULL;

    if ((nid = zkr__strdup(id)) == NULL ||
        (name = malloc(strlen(id) + SUFFIX_LEN + 1)) == NULL ||
        (d = malloc((size_t)len + 1)) == NULL)
        goto nomem;
    strcpy(name, id);
    strcat(name, SUFFIX);
    if ((node = zkr__join(g->path, name)) == NULL)
        goto nomem;
    memcpy(d, data, (size_t)len);
    d[len] = '\0';
    if (g->node != NULL) {
        /* The node of the last id, of an older session if any (one of
         * this session is settled first: start()). */
        node_give_up(g);
        if (!g->s->forked) /* the keeper's watch on it */
            (void)zkr__cleanup_add_watch(g->s, g->node, ZWATCHTYPE_DATA,
                                         group_watcher);
        zkr__cleanup_unreserve(g->reserve);
        g->reserve = NULL;
    }
    g->made_sid = g->older_sid = g->synced_sid = g->other_sid = 0;
    g->own_armed = 0;
    g->data_dirty = 0;
    g->anc_at = -1;
    free(g->id);
    free(g->name);
    free(g->node);
    free(g->data);
    g->id = nid;
    g->name = name;
    g->node = node;
    g->data = d;
    g->len = len;
    return 0;
nomem:
    free(nid);
    free(name);
    free(node);
    free(d);
    return ZKR_ENOMEM;
}

/* Starts a join or leave (mutex held): 0, or its code. w is the caller's
 * (blocking) or made here with its event (asynchronous). */
static int start(zkr_group_t *g, int leave, const char *id, const void *data,
                 int len, int timeout_ms, waiter_t *w)
{
    zkr_session_t *s = g->s;
    int rc;

    if (s->closing || s->forked || g->gone)
        return ZKR_ECLOSED;
    if (g->w != NULL)
        return (g->w->leave == leave && !leave) ? ZKR_EALREADY : ZKR_ESTATE;
    if (!leave && g->want)
        return ZKR_EALREADY;
    if (leave && !g->want)
        return ZKR_ENOTHELD;
    if (!leave && g->node != NULL && strcmp(g->id, id) != 0 &&
        (g->node_sid == s->sid || g->maybe_sid == s->sid || g->kk.busy)) {
        /* Another id while the last one's node may stand on this session
         * (a leave or a join not confirmed): that node is settled first
         * (deleted if ours), then the new id is taken (waiter_check()). */
        if ((w->nid = zkr__strdup(id)) == NULL ||
            (w->ndata = malloc((size_t)len + 1)) == NULL) {
            waiter_pending_free(w);
            return ZKR_ENOMEM;
        }
        memcpy(w->ndata, data, (size_t)len);
        w->ndata[len] = '\0';
        w->nlen = len;
        g->rounds = 0;
        g->anc_rc = 0;
    } else if (!leave) {
        /* The same id with its node still standing (a leave not confirmed
         * yet): kept, its data written if it differs. */
        if (g->node == NULL || strcmp(g->id, id) != 0) {
            if ((rc = set_member(g, id, data, len)) != 0)
                return rc;
        } else if (g->len != len || memcmp(g->data, data, (size_t)len) != 0) {
            char *d = malloc((size_t)len + 1);

            if (d == NULL)
                return ZKR_ENOMEM;
            memcpy(d, data, (size_t)len);
            d[len] = '\0';
            free(g->data);
            g->data = d;
            g->len = len;
            g->data_dirty =
                g->node_sid == s->sid || g->maybe_sid == s->sid || g->kk.busy;
        }
        g->want = 1;
        g->rounds = 0;
        g->anc_rc = 0;
    } else {
        g->want = 0;
        /* A create in flight may make the node: it is settled first. */
        if (g->kk.busy && g->kstep == K_CREATE)
            g->maybe_sid = s->sid;
    }
    w->leave = leave;
    w->deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    g->w = w;
    pump(g);
    return 0;
}

static int check_args(const zkr_group_t *g, int leave, const char **id,
                      const void **data, int *len, int timeout_ms, char *host,
                      size_t hostlen)
{
    if (g == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    if (leave)
        return 0;
    if (*id == NULL) {
        zkr__default_id(host, hostlen);
        *id = host;
    }
    if (check_id(g->path, *id) != 0)
        return ZBADARGUMENTS;
    if (*data == NULL) {
        *data = *id;
        *len = (int)strlen(*id);
    } else if (*len < 0) {
        *len = (int)strlen(*data);
    }
    if (*len > ZKR_GROUP_DATA_MAX)
        return ZBADARGUMENTS;
    return 0;
}

static int run(zkr_group_t *g, int leave, const char *id, const void *data,
               int len, int timeout_ms)
{
    char host[300];
    waiter_t w;
    int rc;

    if (leave ? (g == NULL || timeout_ms < -1)
              : check_args(g, 0, &id, &data, &len, timeout_ms, host,
                           sizeof(host)) != 0)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    memset(&w, 0, sizeof(w));
    pthread_mutex_lock(&g->s->mu);
    if ((rc = start(g, leave, id, data, len, timeout_ms, &w)) == 0) {
        while (!w.done)
            zkr__wait(g->s, &w.done, -1);
        rc = w.rc;
    }
    pthread_mutex_unlock(&g->s->mu);
    return rc;
}

int zkr_group_join(zkr_group_t *g, const char *id, const void *data, int len,
                   int timeout_ms)
{
    return run(g, 0, id, data, len, timeout_ms);
}

int zkr_group_leave(zkr_group_t *g, int timeout_ms)
{
    return run(g, 1, NULL, NULL, 0, timeout_ms);
}

int zkr_group_async(zkr_group_t *g, int leave, const char *id, const void *data,
                    int len, int timeout_ms, zkr_group_completion_t cb,
                    void *cbdata)
{
    char host[300];
    waiter_t *w;
    int rc;

    if (cb == NULL || check_args(g, leave, &id, &data, &len, timeout_ms, host,
                                 sizeof(host)) != 0)
        return ZBADARGUMENTS;
    if ((w = calloc(1, sizeof(*w))) == NULL)
        return ZKR_ENOMEM;
    if ((w->ev = zkr__event_new()) == NULL) {
        free(w);
        return ZKR_ENOMEM;
    }
    w->cb = cb;
    w->cbdata = cbdata;
    pthread_mutex_lock(&g->s->mu);
    rc = start(g, leave != 0, id, data, len, timeout_ms, w);
    pthread_mutex_unlock(&g->s->mu);
    if (rc != 0) {
        free(w->ev);
        free(w);
    }
    return rc;
}

zkr_group_state_t zkr_group_state(zkr_group_t *g)
{
    zkr_group_state_t st;

    if (g == NULL)
        return ZKR_GROUP_OUT;
    pthread_mutex_lock(&g->s->mu);
    st = !g->want ? ZKR_GROUP_OUT
         : g->node_sid != 0 && g->node_sid == g->s->sid &&
                 g->s->state != ZKR_STATE_LOST
             ? ZKR_GROUP_IN
             : ZKR_GROUP_JOINING;
    pthread_mutex_unlock(&g->s->mu);
    return st;
}

int zkr_group_members(zkr_group_t *g, int timeout_ms, zkr_group_member_t **out,
                      int *count, int64_t *zxid)
{
    void *copy;
    int rc;

    if (g == NULL || out == NULL || count == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    rc = zkr__view_get(&g->v, timeout_ms, &copy, count, zxid);
    *out = copy;
    return rc;
}

int zkr_group_fd(zkr_group_t *g)
{
    return g != NULL ? zkr__view_fd(&g->v) : -1;
}

void zkr_group_free(zkr_group_t *g)
{
    zkr_session_t *s;

    if (g == NULL)
        return;
    s = g->s;
    pthread_mutex_lock(&s->mu);
    g->gone = 1;
    g->want = 0;
    waiter_end(g, ZKR_ECANCELED); /* the view's stop waits for it */
    /* An answer in flight comes on ZooKeeper's thread: wait for it (a
     * create's says whether the node stands). */
    while (!s->forked && g->kk.busy)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    zkr__task_remove(s, &g->tk);
    zkr__reader_remove(s, &g->rd);
    if (!s->forked) {
        node_give_up(g);
        if (g->node != NULL) /* the keeper's watch on it */
            (void)zkr__cleanup_add_watch(s, g->node, ZWATCHTYPE_DATA,
                                         group_watcher);
    }
    zkr__cleanup_unreserve(g->reserve);
    g->reserve = NULL;
    pthread_mutex_unlock(&s->mu);
    if (zkr__view_stop(&g->v))
        group_destroy(g);
}
