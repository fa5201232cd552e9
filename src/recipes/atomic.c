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
    int text; /* ZKR_ATOMIC_TEXT */
    struct ACL_vector acl;
    int acl_owned;
    int freeing; /* being freed: operations end with ZKR_ECANCELED */
};

/* The steps of an operation (op_t.step): the request in flight. */
enum {
    CS_READ = 1, /* the node's data */
    CS_WRITE,    /* setData at the version read */
    CS_CREATE,   /* the node, when there was none */
    CS_ANCESTOR, /* one of its missing ancestors */
    CS_R_SYNC,   /* resolve: sync of the node's path */
    CS_R_READ    /* ... the node */
};

#define VALUE_MAX 24 /* "-9223372036854775808" and its NUL */

struct op {
    op_t *prev, *next; /* the handle's operations */
    zkr__call_t k;     /* its requests */
    zkr__task_t tk;    /* its wake-ups: connected, a pause's end, deadline */
    zkr_atomic_t *c;   /* NULL once ended */
    zkr_atomic_op_t kind;
    int64_t a, b;
    zkr_atomic_result_t r;
    int step;       /* CS_*: the request in flight, or 0 */
    int unknown;    /* the last write's answer was lost */
    int wversion;   /* the write: the version it was made against, or -1
                       for a create */
    int64_t wczxid; /* ... and the node's czxid then */
    char wdata[VALUE_MAX];
    int wlen;
    int anc_at;          /* making the path's ancestors: the '/' of the
                            last one made (0: none yet), or -1 */
    int64_t deadline;    /* not connected after it: the end */
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

/* The value of data (len <= 0: none, 0), or ZKR_EFORMAT. */
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

/* ----------------------------------------------------------- the chain */

static void op_go(op_t *o);

static void op_deliver(const zkr__event_t *ev)
{
    op_t *o = ev->data;

    o->cb(ev->a, &o->r, o->cbdata);
    free(o);
}

/* Mutex held: the operation ends with rc; a blocking caller is woken, an
 * asynchronous one told on the event thread. */
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
    if (s->forked || zkr__post_call(s, op_deliver, rc, NULL, o) != 0)
        free(o); /* no event even from the reserve: nothing to tell */
}

/* Step st's request was issued with code rc (0: in flight; its answer
 * cannot come before the mutex is released). Not sent: not connected or
 * short of memory, the operation goes on after a pause; else it ends. */
static void op_issue(op_t *o, int st, int rc)
{
    o->step = st;
    if (rc == 0)
        return;
    o->step = 0;
    if (zkr__call_lost(rc) || rc == ZKR_ENOMEM) {
        o->pause_until = zkr__now_ms() + ZKR__RETRY_MS;
        zkr__task_wake_at(o->c->s, &o->tk, o->pause_until);
        return;
    }
    op_end(o, rc);
}

/* Writes value: setData at the version read (st the node's stat), or a
 * create when there was no node (st NULL). */
static void op_write(op_t *o, const struct Stat *st, int64_t value)
{
    zkr_atomic_t *c = o->c;

    o->r.after = value;
    o->wlen = encode(c, value, o->wdata);
    if (st != NULL) {
        o->wversion = st->version;
        o->wczxid = st->czxid;
        op_issue(o, CS_WRITE,
                 zkr__call_set(&o->k, c->path, o->wdata, o->wlen, st->version));
    } else {
        o->wversion = -1;
        o->wczxid = 0;
        op_issue(
            o, CS_CREATE,
            zkr__call_create(&o->k, c->path, o->wdata, o->wlen, &c->acl, 0));
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
            op_end(o, ZBADARGUMENTS); /* out of range: nothing written */
            return;
        }
        op_write(o, st, v + o->a);
        return;
    case ZKR_ATOMIC_SET:
        op_write(o, st, o->a);
        return;
    case ZKR_ATOMIC_CAS:
        if (v != o->a) {
            op_end(o, 0); /* another value: not swapped (r.changed 0) */
            return;
        }
        op_write(o, st, o->b);
        return;
    }
}

/* After a lost write's sync, the node read (rc ZOK or ZNONODE, st, data):
 * did the write apply? 0: no, 1: the value is what a set asked, -1:
 * unknown. By [Z4] and [Z9] (docs/PROTOCOL.md), after the sync the write
 * has applied if it ever will. */
static int write_applied(const op_t *o, int rc, const struct Stat *st,
                         const char *data, int len)
{
    int same = rc == ZOK && len == o->wlen &&
               memcmp(data, o->wdata, (size_t)o->wlen) == 0;
    int set = o->kind == ZKR_ATOMIC_SET;

    if (rc == ZNONODE) /* a create did not apply; a write's node went */
        return o->wversion == -1 ? 0 : -1;
    if (o->wversion == -1) /* a create: made by someone else with other
                              data, or (same data) maybe by us */
        return st->version == 0 && !same ? 0 : (same && set ? 1 : -1);
    if (st->czxid != o->wczxid)
        return same && set ? 1 : -1; /* deleted and made again since */
    if (st->version == o->wversion)
        return 0; /* as before the write: it never applied */
    if (st->version == o->wversion + 1 && !same)
        return 0; /* the version after it holds another writer's value */
    return same && set ? 1 : -1;
}

/* A request's answer (mutex held). */
static void op_next(zkr__call_t *k, int rc)
{
    op_t *o = (op_t *)((char *)k - offsetof(op_t, k));
    zkr_atomic_t *c = o->c;
    int st = o->step;
    int64_t v;

    o->step = 0;
    if (c->s->forked) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* A write's answer lost: resolved before anything else is sent.
         * Reads and syncs are asked again. */
        if (st == CS_WRITE || st == CS_CREATE)
            o->unknown = 1;
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
            op_end(o, rc);
        else if (c->freeing)
            op_end(o, o->kind == ZKR_ATOMIC_GET ? 0 : ZKR_ECANCELED);
        else
            op_apply(o, k->stat, v);
        return;
    case CS_WRITE:
    case CS_CREATE:
        if (rc == ZOK) {
            o->r.changed = 1;
            op_end(o, 0);
        } else if (rc == ZBADVERSION || rc == ZNODEEXISTS ||
                   (rc == ZNONODE && st == CS_WRITE)) {
            op_go(o); /* another writer was first: read again */
        } else if (rc == ZNONODE) {
            o->anc_at = 0; /* no parent: make the ancestors, then again */
            op_go(o);
        } else {
            op_end(o, rc);
        }
        return;
    case CS_ANCESTOR:
        if (rc != ZOK && rc != ZNODEEXISTS && rc != ZNONODE) {
            op_end(o, rc);
            return;
        }
        if (rc == ZNONODE) /* one above went meanwhile: from the top */
            o->anc_at = 0;
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
        switch (write_applied(o, rc, k->stat, k->value, k->value_len)) {
        case 0:
            o->unknown = 0; /* never applied: the operation starts over */
            op_go(o);
            return;
        case 1:
            o->unknown = 0;
            o->r.changed = 1;
            op_end(o, 0);
            return;
        default:
            if (rc == ZOK)
                (void)decode(c, k->value, k->value_len, &o->r.after);
            op_end(o, ZKR_EINDOUBT);
            return;
        }
    }
}

/* Sends the create of the path's next missing ancestor, from the top:
 * 1 when sent (or the operation ended), 0 when none is left. */
static int op_ancestor(op_t *o)
{
    zkr_atomic_t *c = o->c;
    char anc[1024];
    const char *p = strchr(c->path + o->anc_at + 1, '/');

    if (p == NULL) {
        o->anc_at = -1;
        return 0;
    }
    o->anc_at = (int)(p - c->path);
    memcpy(anc, c->path, (size_t)o->anc_at); /* the path is < 1024 */
    anc[o->anc_at] = '\0';
    op_issue(o, CS_ANCESTOR,
             zkr__call_create(&o->k, anc, NULL, -1, &c->acl, 0));
    return 1;
}

/* The operation's next request, unless one is under way or a pause; or
 * its end: the handle freed, the session closing or lost for good, the
 * deadline while not connected. Not connected, it waits to be woken. A
 * write of unknown outcome is resolved first, even when freed. */
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
    if (s->zh == NULL || !s->connected) {
        if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
            op_end(o, ZKR_ELOST);
        else if (now >= o->deadline || c->freeing)
            op_end(o, ZCONNECTIONLOSS);
        else
            zkr__task_wake_at(s, &o->tk, o->deadline);
        return;
    }
    /* Connected: the deadline counts from here. */
    o->deadline = now + (s->req_timeout > 0 ? s->req_timeout : 10000) +
                  (s->timeout > 0 ? s->timeout : 10000);
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
    o->deadline = zkr__now_ms() +
                  (s->req_timeout > 0 ? s->req_timeout : 10000) +
                  (s->timeout > 0 ? s->timeout : 10000);
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
        strcmp(path, "/") == 0 || strlen(path) >= 1024 ||
        (flags & ~ZKR_ATOMIC_TEXT) != 0)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        (c->path = zkr__strdup(path)) == NULL) {
        free(c);
        return ZKR_ENOMEM;
    }
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
