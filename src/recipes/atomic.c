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
    zkr__rhandle_t h; /* its path, ACL and operations (call.h) */
    int text;         /* ZKR_ATOMIC_TEXT */
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

struct op {
    zkr__rop_t o;    /* its requests, wake-ups and end (call.h) */
    zkr_atomic_t *c; /* its handle */
    zkr_atomic_op_t kind;
    int64_t a, b;
    zkr_atomic_result_t r;
    int synced;             /* its last read came after a sync */
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

static void op_go(zkr__rop_t *r);

static op_t *op_of(zkr__rop_t *r)
{
    return (op_t *)r;
}

static void op_deliver(zkr__rop_t *r)
{
    op_t *o = op_of(r);

    o->cb(r->rc, &o->r, o->cbdata);
}

/* Mutex held: the operation ends with rc. A write whose outcome is not
 * proven may have applied: whatever ends the operation now says so, never
 * "nothing changed". */
static void op_end_rc(zkr__rop_t *r, int rc)
{
    if (rc != 0 && r->unknown)
        rc = ZKR_EINDOUBT;
    zkr__rop_end(r, rc);
}

static void op_end(op_t *o, int rc)
{
    op_end_rc(&o->o, rc);
}

static void op_issue(op_t *o, int st, int rc)
{
    zkr__rop_issue(&o->o, st, rc);
}

/* A setData of data at version v, conditional also at v == -1 (which
 * ZooKeeper takes for "any version": a multi checks that the write made
 * version 0). */
static void op_set(op_t *o, int st, const char *data, int len, int32_t v)
{
    zkr_atomic_t *c = o->c;

    if (v != -1) {
        op_issue(o, st, zkr__call_set(&o->o.k, c->h.path, data, len, v));
        return;
    }
    zoo_set_op_init(&o->ops[0], c->h.path, data, len, -1, NULL);
    zoo_check_op_init(&o->ops[1], c->h.path, 0);
    op_issue(o, st, zkr__call_multi(&o->o.k, 2, o->ops, o->res));
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
    op_issue(o, CS_SYNC, zkr__call_sync(&o->o.k, o->c->h.path));
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
        op_issue(o, CS_PARENT, zkr__call_exists(&o->o.k, c->h.parent));
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

            op_issue(
                o, CS_FENCE,
                zkr__call_create(&o->o.k, c->h.path, zero, n, &c->h.acl, 0));
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
        o->o.unknown = 0; /* never applied: the operation starts over */
        op_go(&o->o);
        return;
    case 1:
        o->o.unknown = 0;
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
    op_t *o = (op_t *)((char *)k - offsetof(zkr__rop_t, k));
    zkr_atomic_t *c = o->c;
    int st = o->o.step;
    int64_t v;

    o->o.step = 0;
    if (!zkr__call_lost(rc)) /* an answer came: the deadline moves */
        o->o.deadline = zkr__rop_bound(c->h.s);
    if (c->h.s->forked) {
        op_end(o, ZKR_ECLOSED);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* A write's answer lost: resolved before anything else is sent.
         * Reads, syncs and fences are asked again. */
        if (st == CS_WRITE || st == CS_CREATE)
            o->o.unknown = 1;
        if (st == CS_ANCESTOR)
            o->o.anc_at = 0; /* it may not have applied: from the top */
        op_go(&o->o);
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
        else if (c->h.freeing)
            op_end(o, o->kind == ZKR_ATOMIC_GET ? 0 : ZKR_ECANCELED);
        else
            op_apply(o, k->stat, v);
        return;
    case CS_SYNC:
        if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->synced = 1; /* the next read is at least as new */
            op_go(&o->o);
        }
        return;
    case CS_PARENT:
        if (rc == ZNONODE) {
            zkr__rop_no_parent(&o->o);
        } else if (rc != ZOK) {
            op_end(o, rc);
        } else {
            o->pczxid = k->stat->czxid;
            o->ppzxid = k->stat->pzxid;
            op_issue(o, CS_CREATE,
                     zkr__call_create(k, c->h.path, o->wdata, o->wlen,
                                      &c->h.acl, 0));
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
            op_go(&o->o); /* another writer was first: read again */
        } else if (rc == ZNONODE) {
            zkr__rop_no_parent(&o->o);
        } else {
            op_end(o, rc);
        }
        return;
    case CS_ANCESTOR:
        /* Whatever an intermediate ancestor says (ZNOAUTH where it exists
         * already, say), the counter's own create decides. */
        op_go(&o->o);
        return;
    case CS_R_SYNC:
        if (rc != ZOK)
            op_end(o, rc);
        else
            op_issue(o, CS_R_READ, zkr__call_get(k, c->h.path));
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
            op_issue(o, CS_R_PARENT, zkr__call_exists(k, c->h.parent));
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
            op_go(&o->o); /* the node moved since: resolve again */
        } else {
            op_end(o, rc);
        }
        return;
    }
}

/* The operation's next request, unless one is under way or a pause; or
 * its end (zkr__rop_ready()). A write of unknown outcome is resolved
 * first, even when freed, while connected. */
static void op_go(zkr__rop_t *r)
{
    op_t *o = op_of(r);
    zkr_atomic_t *c = o->c;

    if (!zkr__rop_ready(r, ZCONNECTIONLOSS))
        return;
    if (r->unknown)
        op_issue(o, CS_R_SYNC, zkr__call_sync(&r->k, c->h.path));
    else if (r->anc_at < 0 || zkr__rop_ancestor(r, CS_ANCESTOR) == 0)
        op_issue(o, CS_READ, zkr__call_get(&r->k, c->h.path));
}

static const zkr__rop_class_t atomic_class = {op_go, op_end_rc, op_deliver,
                                              op_next, NULL};

/* An operation, started (mutex held), or NULL (no memory). */
static op_t *op_start(zkr_atomic_t *c, zkr_atomic_op_t kind, int64_t a,
                      int64_t b, zkr_atomic_completion_t cb, void *cbdata)
{
    op_t *o =
        (op_t *)zkr__rop_new(&c->h, sizeof(op_t), &atomic_class, cb != NULL);

    if (o == NULL)
        return NULL;
    o->c = c;
    o->kind = kind;
    o->a = a;
    o->b = b;
    o->cb = cb;
    o->cbdata = cbdata;
    op_go(&o->o);
    return o;
}

/* ------------------------------------------------------------- the API */

int zkr_atomic_new(zkr_atomic_t **out, zkr_session_t *s, const char *path,
                   int flags, const struct ACL_vector *acl)
{
    zkr_atomic_t *c;
    int rc;

    if (out == NULL || s == NULL || (flags & ~ZKR_ATOMIC_TEXT) != 0)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return ZKR_ENOMEM;
    if ((rc = zkr__rhandle_init(&c->h, s, path, acl)) != 0) {
        free(c);
        return rc;
    }
    c->text = (flags & ZKR_ATOMIC_TEXT) != 0;
    *out = c;
    return 0;
}

void zkr_atomic_free(zkr_atomic_t *c)
{
    if (c == NULL)
        return;
    zkr__rhandle_free(&c->h);
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
    s = c->h.s;
    pthread_mutex_lock(&s->mu);
    if (zkr__rop_may_start(&c->h) != 0) {
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
    s = c->h.s;
    pthread_mutex_lock(&s->mu);
    if (zkr__rop_may_start(&c->h) != 0) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    if ((o = op_start(c, kind, a, b, NULL, NULL)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    rc = zkr__rop_wait(&o->o);
    pthread_mutex_unlock(&s->mu);
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
