/* The atomic counter: a signed 64-bit value in one node's data, changed by
 * versioned writes (read, compute, setData with the version read; a
 * conflict reads again). The data is Curator's DistributedAtomicLong
 * encoding (8 bytes, big-endian) or, with ZKR_ATOMIC_TEXT, kazoo's
 * Counter encoding (decimal ASCII); empty data or no node is 0.
 *
 * Each operation is a chain of asynchronous requests (call.c) and a task
 * that the engine wakes when the chain waits for a connection or a pause.
 * A write whose answer is lost with the connection or the session is
 * resolved before anything else is sent: once connected, sync, then read
 * the node. It did not apply when the node shows the state it was written
 * against (the same czxid and version; for a create, no node), or a
 * successor state it could not have written (the next version, with other
 * data): the operation starts over. Otherwise it may have applied, and the
 * operation ends with ZKR_EINDOUBT, never a second write (Curator and
 * kazoo retry such a write and may count twice). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"

typedef struct op op_t;

struct zkr_atomic {
    zkr_session_t *s;
    op_t *ops; /* the operations under way: the free waits for them */
    char *path;
    char *parent; /* the path's parent ("/" for a top-level node) */
    int text;     /* ZKR_ATOMIC_TEXT */
    struct ACL_vector acl;
    int acl_owned;
    int freeing; /* being freed: operations end with ZKR_ECANCELED */
};

/* The steps of an operation (op_t.step): the request in flight. */
enum {
    CS_READ = 1, /* the node's data */
    CS_SYNC,     /* before a verdict that rests on a read alone */
    CS_PARENT,   /* the parent's child version, before a create */
    CS_WRITE,    /* setData at the version read */
    CS_CREATE,   /* the node, when there was none */
    CS_ANCESTOR, /* one of its missing ancestors */
    CS_R_SYNC,   /* a lost write's resolution: sync of the node's path */
    CS_R_READ,   /* ... the node */
    CS_R_PARENT, /* ... its parent (a lost create) */
    CS_FENCE     /* ... the write that keeps a late one from applying */
};

#define VALUE_MAX 24 /* "-9223372036854775808" and its NUL */
#define ROUNDS 3     /* creates refused for want of a parent, at most */

struct op {
    op_t *prev, *next; /* the handle's operations */
    zkr__call_t k;     /* its requests */
    zkr__task_t tk;    /* its wake-ups: connected, a pause's end, deadline */
    zkr__event_t *ev;  /* an asynchronous one's completion, made ahead */
    zkr_atomic_t *c;   /* NULL once ended */
    zkr_atomic_op_t kind;
    int64_t a, b;
    zkr_atomic_result_t r;
    int step;               /* CS_*: the request in flight, or 0 */
    int synced;             /* its last read came after a sync */
    int unknown;            /* the last write's answer was lost */
    int wcreate;            /* the write is a create ... */
    int32_t wversion;       /* ... or a setData at this version */
    int64_t wczxid;         /* ... of the node with this czxid */
    int64_t pczxid, ppzxid; /* a create: the parent's czxid and pzxid
                               just before it */
    char wdata[VALUE_MAX];
    int wlen;
    /* The node as a resolution read it (CS_R_READ): */
    int r_exists, r_same;
    int32_t r_version;
    int64_t r_czxid;
    char r_data[VALUE_MAX];
    int r_len; /* -1: not a value (longer than any) */
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    int anc_at;          /* making the path's ancestors: the '/' of the last one
                            made (0: none yet), or -1 */
    int rounds;          /* creates refused for want of a parent */
    int64_t deadline;    /* no answer by then: the end */
    int unsent;          /* the code of the last request not sent */
    int64_t pause_until; /* the next attempt not before */
    int rc;
    int ended; /* a blocking operation has ended: its caller frees it */
    zkr_atomic_completion_t cb;
    void *cbdata;
};

/* ------------------------------------------------------------ encoding */

static int encode(const zkr_atomic_t *c, int64_t v, char *out)
{
    if (c->text)
        return snprintf(out, VALUE_MAX, "%lld", (long long)v);
    for (int i = 0; i < 8; i++)
        out[i] = (char)(unsigned char)((uint64_t)v >> (56 - 8 * i));
    return 8;
}

/* The value of data (len <= 0: none, 0), or ZKR_EFORMAT. Text is exactly
 * -?[0-9]+ (kazoo writes repr(int)). */
static int decode(const zkr_atomic_t *c, const char *data, int len, int64_t *v)
{
    uint64_t u = 0;
    int i = 0, neg = 0;

    if (data == NULL || len <= 0) {
        *v = 0;
        return 0;
    }
    if (!c->text) {
        if (len != 8)
            return ZKR_EFORMAT;
        for (i = 0; i < 8; i++)
            u = (u << 8) | (unsigned char)data[i];
        *v = (int64_t)u;
        return 0;
    }
    if (data[0] == '-')
        neg = i = 1;
    if (i == len)
        return ZKR_EFORMAT;
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)data[i] - '0';

        if (d > 9 || u > (UINT64_C(9223372036854775808) - d) / 10)
            return ZKR_EFORMAT;
        u = u * 10 + d;
    }
    if (u > (uint64_t)INT64_MAX + (uint64_t)neg)
        return ZKR_EFORMAT;
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

/* The version after v: ZooKeeper's versions are signed 32-bit and wrap. */
static int32_t next_version(int32_t v)
{
    return (int32_t)(uint32_t)((uint32_t)v + 1u);
}

/* ----------------------------------------------------------- the chain */

/* How long an operation goes on without an answer (not connected, or its
 * requests not sent): the request timeout plus the session timeout. */
static int64_t op_bound(const zkr_session_t *s)
{
    return (s->req_timeout > 0 ? s->req_timeout : 10000) +
           (s->timeout > 0 ? s->timeout : 10000);
}

static void op_go(op_t *o);

static void op_deliver(const zkr__event_t *ev)
{
    op_t *o = ev->data;

    o->cb(ev->a, &o->r, o->cbdata);
    free(o);
}

/* Mutex held: the operation ends with rc; a blocking caller is woken, an
 * asynchronous one told on the event thread (its event was made when it
 * began: the completion cannot be lost for want of memory). */
static void op_end(op_t *o, int rc)
{
    zkr_atomic_t *c = o->c;
    zkr_session_t *s = c->s;

    zkr__task_remove(s, &o->tk);
    o->step = 0;
    /* A write whose outcome is not proven may have applied: whatever ends
     * the operation now says so, never "nothing changed". */
    if (rc != 0 && o->unknown)
        rc = ZKR_EINDOUBT;
    o->rc = rc;
    o->c = NULL;
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        c->ops = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
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
        zkr__task_wake_at(o->c->s, &o->tk, o->pause_until);
        return;
    }
    op_end(o, rc);
}

/* A setData of data at version v, conditional also at v == -1 (which
 * ZooKeeper takes for "any version": a multi checks that the write made
 * version 0). */
static void op_set(op_t *o, int st, const char *data, int len, int32_t v)
{
    zkr_atomic_t *c = o->c;

    if (v != -1) {
        op_issue(o, st, zkr__call_set(&o->k, c->path, data, len, v));
        return;
    }
    zoo_set_op_init(&o->ops[0], c->path, data, len, -1, NULL);
    zoo_check_op_init(&o->ops[1], c->path, 0);
    op_issue(o, st, zkr__call_multi(&o->k, 2, o->ops, o->res));
}

/* Ends with a verdict that rests on a read alone (a compare that did not
 * match, a value out of range or not a value): once the read came after
 * a sync (a lagging server's read may be older than the call), else
 * after syncing and reading again. */
static void op_verdict(op_t *o, int rc)
{
    if (o->synced) {
        op_end(o, rc);
        return;
    }
    op_issue(o, CS_SYNC, zkr__call_sync(&o->k, o->c->path));
}

/* Writes value: setData at the version read (st the node's stat), or,
 * when there was no node (st NULL), a create after reading the parent's
 * child version (what tells a lost create's fate). */
static void op_write(op_t *o, const struct Stat *st, int64_t value)
{
    zkr_atomic_t *c = o->c;

    o->r.after = value;
    o->wlen = encode(c, value, o->wdata);
    o->wcreate = st == NULL;
    if (st != NULL) {
        o->wversion = st->version;
        o->wczxid = st->czxid;
        op_set(o, CS_WRITE, o->wdata, o->wlen, st->version);
    } else {
        op_issue(o, CS_PARENT, zkr__call_exists(&o->k, c->parent));
    }
}

/* The node read (st NULL: there is none, v 0): the operation's rule. */
static void op_apply(op_t *o, const struct Stat *st, int64_t v)
{
    o->r.before = v;
    o->r.after = v;
    switch (o->kind) {
    case ZKR_ATOMIC_GET:
        op_end(o, 0);
        return;
    case ZKR_ATOMIC_ADD:
        if ((o->a > 0 && v > INT64_MAX - o->a) ||
            (o->a < 0 && v < INT64_MIN - o->a)) {
            op_verdict(o, ZBADARGUMENTS); /* out of range: not written */
            return;
        }
        op_write(o, st, v + o->a);
        return;
    case ZKR_ATOMIC_SET:
        op_write(o, st, o->a);
        return;
    case ZKR_ATOMIC_CAS:
        if (v != o->a) {
            op_verdict(o, 0); /* another value: not swapped (r.changed 0) */
            return;
        }
        op_write(o, st, o->b);
        return;
    }
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

/* A lost write's resolution, once the node (and for a create its parent's
 * stat, pst: NULL when there is none) is read after a sync. 0: it did not
 * apply and cannot (start over), 1: a set whose value is there, 2: not
 * known yet (a fence is sent), -1: unknown (ZKR_EINDOUBT). By [Z4] and
 * [Z9] (docs/PROTOCOL.md) the write has applied by now if it ever will
 * on this session; a fence write covers the case where it still could (an
 * old session zkr gave up on while the server kept it: [V3]). */
static int op_resolve(op_t *o, const struct Stat *pst)
{
    zkr_atomic_t *c = o->c;
    int set = o->kind == ZKR_ATOMIC_SET;

    if (o->r_exists && o->r_same && set)
        return 1;
    if (o->wcreate) {
        /* No node, and no child of the same parent made or deleted since
         * our look (pzxid: a delete always moves it, a create unless the
         * parent's cversion is stuck at its maximum, [Z6]; and our create
         * would have left the node): it did not apply. A node holding 0
         * (no change of value) keeps it from applying later. Anything
         * else (the parent deleted and made again, a node there now) may
         * have been ours. */
        if (!o->r_exists && pst != NULL && pst->czxid == o->pczxid &&
            pst->pzxid == o->ppzxid) {
            char zero[VALUE_MAX];
            int n = encode(c, 0, zero);

            op_issue(o, CS_FENCE,
                     zkr__call_create(&o->k, c->path, zero, n, &c->acl, 0));
            return 2;
        }
        return -1;
    }
    if (!o->r_exists || o->r_czxid != o->wczxid)
        return -1; /* deleted (and made again) since */
    if (o->r_version == o->wversion) {
        /* As before our write: it did not apply. Writing the same bytes
         * at that version keeps it from applying later. */
        op_set(o, CS_FENCE, o->r_data, o->r_len, o->wversion);
        return 2;
    }
    /* The version after ours holds another value: another writer's. */
    return o->r_version == next_version(o->wversion) && !o->r_same ? 0 : -1;
}

/* The resolution's verdict v (op_resolve). */
static void op_resolved(op_t *o, int v)
{
    switch (v) {
    case 0:
        o->unknown = 0; /* never applied: the operation starts over */
        op_go(o);
        return;
    case 1:
        o->unknown = 0;
        o->r.changed = 1;
        op_end(o, 0);
        return;
    case 2:
        return; /* a fence is in flight */
    default:
        op_end(o, ZKR_EINDOUBT);
        return;
    }
}

/* A request's answer (mutex held). */
static void op_next(zkr__call_t *k, int rc)
{
    op_t *o = (op_t *)((char *)k - offsetof(op_t, k));
    zkr_atomic_t *c = o->c;
    int st = o->step;
    int64_t v;

    o->step = 0;
    if (!zkr__call_lost(rc)) /* an answer came: the deadline moves */
        o->deadline = zkr__now_ms() + op_bound(c->s);
    if (c->s->forked) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* A write's answer lost: resolved before anything else is sent.
         * Reads, syncs and fences are asked again. */
        if (st == CS_WRITE || st == CS_CREATE)
            o->unknown = 1;
        if (st == CS_ANCESTOR)
            o->anc_at = 0; /* it may not have applied: from the top */
        op_go(o);
        return;
    }
    switch (st) {
    case CS_READ:
        if (rc == ZNONODE)
            op_apply(o, NULL, 0);
        else if (rc != ZOK)
            op_end(o, rc);
        else if ((rc = decode(c, k->value, k->value_len, &v)) != 0)
            op_verdict(o, rc);
        else if (c->freeing)
            op_end(o, o->kind == ZKR_ATOMIC_GET ? 0 : ZKR_ECANCELED);
        else
            op_apply(o, k->stat, v);
        return;
    case CS_SYNC:
        if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->synced = 1; /* the next read is at least as new */
            op_go(o);
        }
        return;
    case CS_PARENT:
        if (rc == ZNONODE) {
            op_no_parent(o);
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->pczxid = k->stat->czxid;
            o->ppzxid = k->stat->pzxid;
            op_issue(
                o, CS_CREATE,
                zkr__call_create(k, c->path, o->wdata, o->wlen, &c->acl, 0));
        }
        return;
    case CS_WRITE:
    case CS_CREATE:
        if (rc == ZOK) {
            o->r.changed = 1;
            op_end(o, 0);
        } else if (rc == ZBADVERSION || rc == ZNODEEXISTS ||
                   (rc == ZNONODE && st == CS_WRITE)) {
            o->synced = 0;
            op_go(o); /* another writer was first: read again */
        } else if (rc == ZNONODE) {
            op_no_parent(o);
        } else {
            op_end(o, rc);
        }
        return;
    case CS_ANCESTOR:
        /* Whatever an intermediate ancestor says (ZNOAUTH where it exists
         * already, say), the counter's own create decides. */
        op_go(o);
        return;
    case CS_R_SYNC:
        if (rc != ZOK)
            op_end(o, rc);
        else
            op_issue(o, CS_R_READ, zkr__call_get(k, c->path));
        return;
    case CS_R_READ:
        if (rc != ZOK && rc != ZNONODE) {
            op_end(o, rc);
            return;
        }
        o->r_exists = rc == ZOK;
        o->r_same = rc == ZOK && k->value_len == o->wlen &&
                    memcmp(k->value, o->wdata, (size_t)o->wlen) == 0;
        o->r_len = rc == ZOK && k->value_len > 0 ? k->value_len : 0;
        if (o->r_len > VALUE_MAX)
            o->r_len = -1;
        else if (o->r_len > 0)
            memcpy(o->r_data, k->value, (size_t)o->r_len);
        if (rc == ZOK) {
            o->r_version = k->stat->version;
            o->r_czxid = k->stat->czxid;
        }
        if (o->wcreate)
            op_issue(o, CS_R_PARENT, zkr__call_exists(k, c->parent));
        else if (o->r_len < 0 && o->r_exists && o->r_czxid == o->wczxid &&
                 o->r_version == o->wversion)
            op_resolved(o, -1); /* data that cannot be ours or a value */
        else
            op_resolved(o, op_resolve(o, NULL));
        return;
    case CS_R_PARENT:
        if (rc != ZOK && rc != ZNONODE)
            op_end(o, rc);
        else
            op_resolved(o, op_resolve(o, rc == ZOK ? k->stat : NULL));
        return;
    case CS_FENCE:
        if (rc == ZOK) {
            op_resolved(o, 0); /* it can no longer apply: start over */
        } else if (rc == ZBADVERSION || rc == ZNODEEXISTS || rc == ZNONODE) {
            op_go(o); /* the node moved since: resolve again */
        } else {
            op_end(o, rc);
        }
        return;
    }
}

/* Sends the create of the path's next ancestor, from the top: 1 when
 * sent (or the operation ended), 0 when none is left. */
static int op_ancestor(op_t *o)
{
    int rc;

    if (!zkr__call_ancestor(&o->k, o->c->path, &o->anc_at, &o->c->acl, 0,
                            &rc)) {
        o->anc_at = -1;
        return 0;
    }
    op_issue(o, CS_ANCESTOR, rc);
    return 1;
}

/* The operation's next request, unless one is under way or a pause; or
 * its end: the handle freed, the session closing or lost for good, no
 * answer by the deadline (not connected, or nothing could be sent). Not
 * connected, it waits to be woken. A write of unknown outcome is resolved
 * first, even when freed, while connected. */
static void op_go(op_t *o)
{
    zkr_atomic_t *c = o->c;
    zkr_session_t *s = c->s;
    int64_t now = zkr__now_ms();

    if (s->forked) {
        op_end(o, ZKR_ECLOSED); /* the parent's requests are not ours */
        return;
    }
    if (o->k.busy || o->step != 0)
        return; /* its answer goes on */
    if (c->freeing && !o->unknown) {
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
    if (now >= o->deadline) { /* not connected, or nothing could be sent */
        op_end(o, o->unsent == ZKR_ENOMEM ? ZKR_ENOMEM : ZCONNECTIONLOSS);
        return;
    }
    if (s->zh == NULL || !s->connected) {
        if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
            op_end(o, ZKR_ELOST);
        else if (c->freeing)
            op_end(o, ZCONNECTIONLOSS);
        else
            zkr__task_wake_at(s, &o->tk, o->deadline);
        return;
    }
    if (o->unknown)
        op_issue(o, CS_R_SYNC, zkr__call_sync(&o->k, c->path));
    else if (o->anc_at < 0 || op_ancestor(o) == 0)
        op_issue(o, CS_READ, zkr__call_get(&o->k, c->path));
}

static void op_wake(zkr__task_t *t)
{
    op_go((op_t *)((char *)t - offsetof(op_t, tk)));
}

/* An operation, started (mutex held), or NULL (no memory). */
static op_t *op_start(zkr_atomic_t *c, zkr_atomic_op_t kind, int64_t a,
                      int64_t b, zkr_atomic_completion_t cb, void *cbdata)
{
    zkr_session_t *s = c->s;
    op_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        return NULL;
    if (cb != NULL && (o->ev = zkr__event_new()) == NULL) {
        free(o);
        return NULL;
    }
    o->c = c;
    o->kind = kind;
    o->a = a;
    o->b = b;
    o->cb = cb;
    o->cbdata = cbdata;
    o->anc_at = -1;
    o->k.s = s;
    o->k.next = op_next;
    o->tk.wake = op_wake;
    o->tk.wake_at = -1;
    o->deadline = zkr__now_ms() + op_bound(s);
    o->next = c->ops;
    if (c->ops != NULL)
        c->ops->prev = o;
    c->ops = o;
    zkr__task_add(s, &o->tk);
    op_go(o);
    return o;
}

/* ------------------------------------------------------------- the API */

int zkr_atomic_new(zkr_atomic_t **out, zkr_session_t *s, const char *path,
                   int flags, const struct ACL_vector *acl)
{
    zkr_atomic_t *c;
    int rc = 0;

    if (out == NULL || s == NULL || zkr__check_path(path) != 0 ||
        strcmp(path, "/") == 0 || strlen(path) > ZKR_PATH_MAX ||
        (flags & ~ZKR_ATOMIC_TEXT) != 0)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        (c->path = zkr__strdup(path)) == NULL ||
        (c->parent = zkr__strdup(path)) == NULL) {
        if (c != NULL)
            free(c->path);
        free(c);
        return ZKR_ENOMEM;
    }
    if (strrchr(c->parent, '/') == c->parent)
        c->parent[1] = '\0';
    else
        *strrchr(c->parent, '/') = '\0';
    c->s = s;
    c->text = (flags & ZKR_ATOMIC_TEXT) != 0;
    if (acl == NULL)
        c->acl = ZOO_OPEN_ACL_UNSAFE; /* shared, not copied */
    else if ((rc = zkr__acl_copy(&c->acl, acl)) == 0)
        c->acl_owned = 1;
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        if (s->closing)
            rc = ZKR_ECLOSED;
        else
            zkr__session_hold(s, 1); /* zkr_session_free() refuses */
        pthread_mutex_unlock(&s->mu);
    }
    if (rc != 0) {
        if (c->acl_owned)
            zkr__acl_free(&c->acl);
        free(c->parent);
        free(c->path);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void zkr_atomic_free(zkr_atomic_t *c)
{
    zkr_session_t *s;

    if (c == NULL)
        return;
    s = c->s;
    pthread_mutex_lock(&s->mu);
    /* Operations end at their next step: one waiting (for a connection, a
     * pause) now, one with a request in flight when its answer comes (on
     * ZooKeeper's thread, bounded by the client's timeouts); a write of
     * unknown outcome is resolved first while connected. Their ends post
     * their completions, which do not touch c. */
    c->freeing = 1;
    for (op_t *o = c->ops, *nx; o != NULL; o = nx) {
        nx = o->next;
        op_go(o);
    }
    while (c->ops != NULL)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    zkr__session_hold(s, -1);
    pthread_mutex_unlock(&s->mu);
    if (c->acl_owned)
        zkr__acl_free(&c->acl);
    free(c->parent);
    free(c->path);
    free(c);
}

static int op_check(const zkr_atomic_t *c, zkr_atomic_op_t kind)
{
    return c == NULL || kind < ZKR_ATOMIC_GET || kind > ZKR_ATOMIC_CAS
               ? ZBADARGUMENTS
               : 0;
}

int zkr_atomic_async(zkr_atomic_t *c, zkr_atomic_op_t kind, int64_t a,
                     int64_t b, zkr_atomic_completion_t cb, void *data)
{
    zkr_session_t *s;
    op_t *o;

    if (op_check(c, kind) != 0 || cb == NULL)
        return ZBADARGUMENTS;
    s = c->s;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->forked || c->freeing) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    /* It may end inside op_start (a request the client refuses): its
     * completion is then posted already, like any other end. */
    o = op_start(c, kind, a, b, cb, data);
    pthread_mutex_unlock(&s->mu);
    return o != NULL ? 0 : ZKR_ENOMEM;
}

int zkr_atomic_run(zkr_atomic_t *c, zkr_atomic_op_t kind, int64_t a, int64_t b,
                   zkr_atomic_result_t *r)
{
    zkr_session_t *s;
    op_t *o;
    int rc;

    if (op_check(c, kind) != 0)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    s = c->s;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->forked || c->freeing) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    if ((o = op_start(c, kind, a, b, NULL, NULL)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    while (!o->ended)
        zkr__wait(s, &o->ended, -1);
    pthread_mutex_unlock(&s->mu);
    rc = o->rc;
    if (r != NULL)
        *r = o->r;
    free(o);
    return rc;
}

int zkr_atomic_get(zkr_atomic_t *c, int64_t *value)
{
    zkr_atomic_result_t r;
    int rc = value != NULL ? zkr_atomic_run(c, ZKR_ATOMIC_GET, 0, 0, &r)
                           : ZBADARGUMENTS;

    if (rc == 0)
        *value = r.after;
    return rc;
}

int zkr_atomic_add(zkr_atomic_t *c, int64_t delta, int64_t *value)
{
    zkr_atomic_result_t r;
    int rc = zkr_atomic_run(c, ZKR_ATOMIC_ADD, delta, 0, &r);

    if (rc == 0 && value != NULL)
        *value = r.after;
    return rc;
}

int zkr_atomic_set(zkr_atomic_t *c, int64_t value)
{
    return zkr_atomic_run(c, ZKR_ATOMIC_SET, value, 0, NULL);
}

int zkr_atomic_cas(zkr_atomic_t *c, int64_t expect, int64_t value, int *swapped,
                   int64_t *now)
{
    zkr_atomic_result_t r;
    int rc = zkr_atomic_run(c, ZKR_ATOMIC_CAS, expect, value, &r);

    if (rc == 0) {
        if (swapped != NULL)
            *swapped = r.changed;
        if (now != NULL)
            *now = r.after;
    }
    return rc;
}
