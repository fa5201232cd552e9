/* The work queue's put: an item into the tail bucket, sealing a full
 * bucket and repairing one another client left unsealed
 * (docs/design/workq.md). */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workq.h"

/* --------------------------------------------------------------- put */

/* The ops that move level ql's tail from t to t+1: the seal of b<t>
 * (when bt is not NULL: its version 0 -> 1), q<L>'s version t -> t+1, and
 * b<t+1> created or, with adopt, checked to exist: another client may
 * have made it ahead of the tail (an empty bucket, or one with foreign
 * children), and the create failing must not keep b<t> open for ever.
 * No put can have landed in b<t+1> before q<L> names it. n ops. */
static int advance_ops(zoo_op_t *ops, const char *bt, const char *ql,
                       const char *next, int t, int adopt,
                       const struct ACL_vector *acl)
{
    int n = 0;

    if (bt != NULL)
        zoo_set_op_init(&ops[n++], bt, "sealed", 6, 0, NULL);
    zoo_set_op_init(&ops[n++], ql, "", 0, t, NULL);
    if (adopt)
        zoo_check_op_init(&ops[n++], next, -1);
    else
        zoo_create_op_init(&ops[n++], next, "", 0, acl, ZOO_PERSISTENT, NULL,
                           0);
    return n;
}

/* Did the advance fail only because b<t+1> exists (its last op, the
 * create, NODEEXISTS, every op before it fine)? */
static int next_exists(int rc, const zoo_op_result_t *res, int n)
{
    if (rc != ZNODEEXISTS || res[n - 1].err != ZNODEEXISTS)
        return 0;
    for (int i = 0; i + 1 < n; i++)
        if (res[i].err != ZOK)
            return 0;
    return 1;
}

/* ------------------------------------------------------------ repair */

/* The steps of a repair (wq_repair_t.step): the request in flight. */
enum {
    RP_ADVANCE = 1, /* the advance's multi (creating b<t+1>) */
    RP_ADOPT,       /* ... again, adopting b<t+1> */
    RP_EXISTS,      /* missing: b<t>, an ephemeral node there? */
    RP_DELETE,      /* ... deleted */
    RP_LIST,        /* ... q<L>'s buckets */
    RP_SEAL_BELOW,  /* ... the highest below t sealed */
    RP_CREATE       /* ... b<t> made while q<L> names t */
};

static int repair_send(wq_repair_t *r);

static void repair_end(wq_repair_t *r, int rc)
{
    r->step = 0;
    r->done(r, rc);
}

/* Mutex held: the answer to the repair's request. */
static void repair_next(zkr__call_t *k, int rc)
{
    wq_repair_t *r = (wq_repair_t *)k;
    int n = r->mode == WQ_SEAL ? 3 : 2, below = -1, *bk, nb = 0;

    switch (r->step) {
    case RP_ADVANCE:
    case RP_ADOPT:
        if (r->step == RP_ADVANCE && next_exists(rc, r->res, n)) {
            r->step = RP_ADOPT;
            break;
        }
        if (r->mode == WQ_REPAIR_SEALED && (rc == ZBADVERSION || rc == ZNONODE))
            rc = ZOK; /* moved on by someone else */
        repair_end(r, rc);
        return;
    case RP_EXISTS:
        /* An ephemeral node of another client at b<t> (made ahead of the
         * tail and adopted, or in place of a deleted tail) can have no
         * items: it is not a bucket. Deleted, it is missing. */
        if (rc == ZOK && k->stat->ephemeralOwner != 0) {
            r->step = RP_DELETE;
            if ((rc = zkr__call_delete(k, r->bt, k->stat->version)) != 0)
                repair_end(r, rc);
            return;
        }
        /* fall through */
    case RP_DELETE:
        if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION) {
            repair_end(r, rc);
            return;
        }
        r->step = RP_LIST;
        break;
    case RP_LIST:
        if (rc != ZOK) {
            repair_end(r, rc);
            return;
        }
        if ((bk = zkr__wq_sorted_buckets(k->strings, &nb)) == NULL) {
            repair_end(r, ZKR_ENOMEM);
            return;
        }
        for (int i = 0; i < nb; i++)
            if (bk[i] < r->t)
                below = bk[i];
        free(bk);
        if (below >= 0) {
            /* Sealed before b<t> exists: no put can land below it after. */
            snprintf(r->bb, sizeof(r->bb), "%s/b%010d", r->ql, below);
            r->step = RP_SEAL_BELOW;
        } else {
            r->step = RP_CREATE;
        }
        break;
    case RP_SEAL_BELOW:
        if (rc != ZOK && rc != ZBADVERSION && rc != ZNONODE) {
            repair_end(r, rc);
            return;
        }
        r->step = RP_CREATE;
        break;
    default: /* RP_CREATE */
        if (rc == ZNODEEXISTS && r->res[0].err == ZOK)
            rc = ZOK;      /* b<t> is there, and q<L> names it */
        repair_end(r, rc); /* ZBADVERSION: q<L> moved, read it again */
        return;
    }
    if ((rc = repair_send(r)) != 0)
        repair_end(r, rc);
}

/* Issues the request of r's step: 0, or the code it was not sent with. */
static int repair_send(wq_repair_t *r)
{
    zkr__call_t *k = &r->k;
    int n;

    memset(r->res, 0, sizeof(r->res));
    switch (r->step) {
    case RP_ADVANCE:
    case RP_ADOPT:
        n = advance_ops(r->ops, r->mode == WQ_SEAL ? r->bt : NULL, r->ql,
                        r->next, r->t, r->step == RP_ADOPT, r->acl);
        return zkr__call_multi(k, n, r->ops, r->res);
    case RP_EXISTS:
        return zkr__call_exists(k, r->bt);
    case RP_LIST:
        return zkr__call_children(k, r->ql);
    case RP_SEAL_BELOW:
        return zkr__call_set(k, r->bb, "sealed", 6, 0);
    default: /* RP_CREATE: only while q<L> still names t, so that a
                repair from an old read makes no bucket below the tail */
        zoo_check_op_init(&r->ops[0], r->ql, r->t);
        zoo_create_op_init(&r->ops[1], r->bt, "", 0, r->acl, ZOO_PERSISTENT,
                           NULL, 0);
        return zkr__call_multi(k, 2, r->ops, r->res);
    }
}

/* Anyone may seal a full bucket (once), and repair a level (F3) whose
 * b<t> (t = q<L>'s data version) is missing, or sealed while q<L> still
 * names it (a foreign write to q<L> or to a bucket, a reaper that deleted
 * an empty tail bucket), so that the tail is an open bucket above every
 * existing one: WQ_REPAIR_MISSING seals the highest bucket below t (if
 * open) and creates b<t>; WQ_REPAIR_SEALED follows b<t> by b<t+1> with
 * q<L> moved to it. Every step tolerates a concurrent repair. r->done is
 * told ZOK, or (missing) ZBADVERSION when q<L> no longer names t (read it
 * again), or a request's error; a seal's ZBADVERSION: sealed by another.
 * 0, or the code the first request was not sent with (done not told). */
int zkr__wq_repair(wq_repair_t *r, const char *ql, int t, int mode)
{
    snprintf(r->ql, sizeof(r->ql), "%s", ql);
    snprintf(r->bt, sizeof(r->bt), "%s/b%010d", ql, t);
    snprintf(r->next, sizeof(r->next), "%s/b%010d", ql, t + 1);
    r->t = t;
    r->mode = mode;
    r->step = mode == WQ_REPAIR_MISSING ? RP_EXISTS : RP_ADVANCE;
    r->k.next = repair_next;
    return repair_send(r);
}

/* --------------------------------------------------------------- put */

/* Mutex held: a confirmed receipt of session sid is to be deleted; it
 * rides on the next put's multi (no round trip of its own). Receipts of
 * another session are gone with it. */
static void receipt_confirmed(zkr_workq_t *q, const char *path, int64_t sid)
{
    char *p;

    if (q->rcpt_sid != sid) {
        for (int i = 0; i < q->nrcpt; i++)
            free(q->rcpt[i]);
        q->nrcpt = 0;
        q->rcpt_sid = sid;
    }
    if (q->nrcpt == WQ_RECEIPTS_MAX || (p = zkr__strdup(path)) == NULL) {
        (void)zkr__cleanup_add(q->s, path, NULL, NULL, sid, NULL);
        return;
    }
    q->rcpt[q->nrcpt++] = p;
}

/* A batch of confirmed receipts deleted in one multi (workq.md, 4):
 * those of acks and nacks, which no put of the handle carried away. */
typedef struct {
    zkr__call_t k;
    int64_t sid;
    int n;
    char *path[WQ_PIGGYBACK];
    zoo_op_t ops[WQ_PIGGYBACK];
    zoo_op_result_t res[WQ_PIGGYBACK];
} rcpt_batch_t;

static void batch_done(zkr__call_t *k, int rc)
{
    rcpt_batch_t *b = (rcpt_batch_t *)k;

    /* One of them gone (someone deleted it), or the answer lost: each
     * goes to the session's cleanup, which deletes what is left. */
    for (int i = 0; i < b->n; i++) {
        if (rc != ZOK && b->sid == k->s->sid)
            (void)zkr__cleanup_add(k->s, b->path[i], NULL, NULL, b->sid, NULL);
        free(b->path[i]);
    }
    free(b);
}

/* Mutex held: the receipts kept by q, WQ_PIGGYBACK of them, are deleted
 * in one multi (no put came to carry them). */
static void receipts_flush(zkr_workq_t *q)
{
    rcpt_batch_t *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return; /* kept: a put, the next flush or the free takes them */
    b->k.s = q->s;
    b->k.next = batch_done;
    b->sid = q->rcpt_sid;
    while (q->nrcpt > 0 && b->n < WQ_PIGGYBACK) {
        b->path[b->n] = q->rcpt[--q->nrcpt];
        zoo_delete_op_init(&b->ops[b->n], b->path[b->n], -1);
        b->n++;
    }
    if (zkr__call_multi(&b->k, b->n, b->ops, b->res) != 0)
        batch_done(&b->k, ZCONNECTIONLOSS); /* not sent */
}

void zkr__wq_receipt_done(zkr_session_t *s, const char *qpath,
                          const char *receipt)
{
    zkr_workq_t *q = zkr__wq_handle_of(s, qpath);

    if (q == NULL) {
        (void)zkr__cleanup_add(s, receipt, NULL, NULL, s->sid, NULL);
        return;
    }
    receipt_confirmed(q, receipt, s->sid);
    if (q->nrcpt >= WQ_PIGGYBACK && q->async_puts == 0)
        receipts_flush(q);
}

/* Mutex held: hands the kept receipts of the current session to the
 * session's cleanup (a free; a put whose answer was lost). */
void zkr__wq_receipts_to_cleanup(zkr_workq_t *q, char **v, int n, int64_t sid)
{
    for (int i = 0; i < n; i++) {
        if (sid == q->s->sid)
            (void)zkr__cleanup_add(q->s, v[i], NULL, NULL, sid, NULL);
        free(v[i]);
    }
}

/* A put (zkr_workq_put, _async): a chain of requests (docs/design/
 * workq.md, put), each step taken in the previous answer's completion.
 * An attempt is put_send's: PATH, its receipts' container and q<L> made
 * (once per handle, or again when found deleted), B read (once), q<L>'s
 * version read for the tail bucket t, then one multi with the item, its
 * receipt and the receipts confirmed so far; a full bucket sealed after.
 * After a lost answer, put_resolve's: the receipt tells. */
typedef struct put {
    zkr__call_t k;  /* its requests */
    zkr__task_t tk; /* its wake-ups: connected, a pause's end, the deadline */
    wq_repair_t rp; /* a seal or repair of its level */
    zkr_workq_t *q;
    void *data;
    size_t len;
    int level, carry;
    char uuid[37], ql[300], bt[320], created[512], rdir[300], receipt[340];
    char prefix[400], anc[300];
    int anc_at;       /* making PATH's ancestors: the '/' of the next */
    int path_tries;   /* creates of PATH */
    int64_t sid;      /* the session of the attempt */
    int64_t sent_sid; /* the session the multi of unknown outcome went on */
    int64_t deadline; /* no new attempt after */
    int64_t pause_until;
    int t;            /* the tail bucket, -1 until read */
    int bsize;        /* B */
    int unknown;      /* the last multi's answer was lost */
    int tries;        /* repairs so far */
    int rc;           /* the last failure */
    int step;         /* PS_*: the request in flight, or 0 */
    int was;          /* the tail the multi failed on */
    int receipt_gone; /* resolve: the receipt was not there */
    zoo_op_t ops[3 + WQ_PIGGYBACK];
    zoo_op_result_t res[3 + WQ_PIGGYBACK];
    char *carried[WQ_PIGGYBACK];
    int nc;
    /* its end */
    int ended; /* a blocking put (cb NULL) has ended: its caller frees p */
    zkr_put_completion_t cb;
    void *cbdata;
    char id[ZKR_WORKQ_ID_MAX + 256];
} put_t;

/* The steps of a put (put_t.step): the request in flight. */
enum {
    PS_PATH = 1,   /* PATH created */
    PS_ANCESTOR,   /* ... one of its missing ancestors */
    PS_RCPT_DIR,   /* the receipts' container */
    PS_LEVEL,      /* q<L> and b0 */
    PS_BUCKET,     /* PATH's data: B */
    PS_TAIL,       /* q<L>'s version: t */
    PS_MULTI,      /* the item, its receipt, the confirmed receipts */
    PS_SEAL,       /* b<t> full: sealed (rp) */
    PS_RDIR_MADE,  /* the receipts' container made again */
    PS_LEVEL_READ, /* the multi failed on b<t>: does q<L> still name it? */
    PS_REPAIR,     /* ... it does: repaired (rp) */
    PS_R_SYNC,     /* resolve: sync of the receipts' container */
    PS_R_RECEIPT,  /* ... the receipt */
    PS_R_BSYNC,    /* ... sync of b<t> */
    PS_R_LIST      /* ... b<t>'s names: the item by its UUID */
};

static void put_go(put_t *p);
static void put_send(put_t *p);

/* An asynchronous put's completion, on the event thread. */
static void put_deliver(const zkr__event_t *ev)
{
    put_t *p = ev->data;

    p->cb(ev->a, ev->a == 0 ? p->id : NULL, p->cbdata);
    free(p->data);
    free(p);
}

/* Mutex held: the put ends with rc; a blocking caller is woken, an
 * asynchronous one told on the event thread. */
static void put_end(put_t *p, int rc)
{
    zkr_workq_t *q = p->q;
    zkr_session_t *s = q->s;

    zkr__task_remove(s, &p->tk);
    p->step = 0;
    /* A multi whose outcome is not proven may have applied: whatever
     * ends the put now (the session lost for good, a failed read of the
     * receipt or the bucket) says so (zkr.h), never "nothing was put". */
    if (rc != 0 && p->unknown)
        rc = ZCONNECTIONLOSS;
    if (rc == 0 &&
        snprintf(p->id, sizeof(p->id), "%s",
                 p->created + strlen(q->path) + 1) >= (int)sizeof(p->id))
        rc = ZBADARGUMENTS;
    p->rc = rc;
    pthread_cond_broadcast(&s->cv);
    if (p->cb == NULL) {
        p->ended = 1; /* the caller frees p */
        return;
    }
    q->async_puts--; /* zkr_workq_free waits for none to run */
    if (s->forked || zkr__post_call(s, put_deliver, rc, NULL, p) != 0) {
        free(p->data); /* no event even from the reserve: nothing to tell */
        free(p);
    }
}

/* A step's request was not sent (code rc): not connected or short of
 * memory, the attempt again after a pause; else the put ends. */
static void put_unsent(put_t *p, int rc)
{
    p->step = 0;
    if (zkr__call_lost(rc) || rc == ZKR_ENOMEM) {
        p->rc = rc;
        p->pause_until = zkr__now_ms() + ZKR__RETRY_MS;
        zkr__task_wake_at(p->q->s, &p->tk, p->pause_until);
        return;
    }
    put_end(p, rc);
}

/* Step st's request was issued with code rc (0: in flight; its answer
 * cannot come before the mutex is released). */
static void put_issue(put_t *p, int st, int rc)
{
    p->step = st;
    if (rc != 0)
        put_unsent(p, rc);
}

/* A lost answer tries again; another code is returned. */
static void put_again_or_end(put_t *p, int rc)
{
    p->step = 0;
    if (zkr__call_lost(rc)) {
        p->rc = rc;
        put_go(p);
    } else {
        put_end(p, rc);
    }
}

/* A step of the attempt failed with rc: a lost answer tries again (the
 * tail read again), another code is returned. */
static void put_fail(put_t *p, int rc)
{
    p->t = -1;
    put_again_or_end(p, rc);
}

/* The attempt's next request from PATH's creation on, skipping what is
 * known to exist or known already. */
static void put_level(put_t *p)
{
    zkr_workq_t *q = p->q;
    char data[64];

    if (q->bucket > 0)
        p->bsize = q->bucket;
    if (!q->made[p->level]) {
        snprintf(data, sizeof(data), "zkr-workq 1 bucket=%d",
                 WQ_BUCKET_DEFAULT);
        put_issue(p, PS_PATH,
                  zkr__call_create(&p->k, q->path, data, (int)strlen(data),
                                   q->acl, ZOO_PERSISTENT));
    } else if (p->bsize <= 0) {
        put_issue(p, PS_BUCKET, zkr__call_get(&p->k, q->path));
    } else if (p->t < 0) {
        put_issue(p, PS_TAIL, zkr__call_exists(&p->k, p->ql));
    } else {
        put_send(p);
    }
}

/* The next of PATH's missing ancestors made (as containers), or PATH
 * again once they are. */
static void put_ancestor(put_t *p)
{
    int rc;

    if (!zkr__call_ancestor(&p->k, p->anc, &p->anc_at, p->q->acl, ZOO_CONTAINER,
                            &rc))
        put_level(p);
    else
        put_issue(p, PS_ANCESTOR, rc);
}

/* One attempt's multi: the item, its receipt and the receipts confirmed
 * so far, into the tail bucket b<t>. */
static void put_send(put_t *p)
{
    zkr_workq_t *q = p->q;
    int rc;

    snprintf(p->bt, sizeof(p->bt), "%s/b%010d", p->ql, p->t);
    snprintf(p->prefix, sizeof(p->prefix), "%s/i-%d-%s-", p->bt, p->carry,
             p->uuid);
    zoo_check_op_init(&p->ops[0], p->bt, 0);
    zoo_create_op_init(&p->ops[1], p->prefix, p->data, (int)p->len, q->acl,
                       ZOO_PERSISTENT_SEQUENTIAL, p->created,
                       sizeof(p->created));
    zoo_create_op_init(&p->ops[2], p->receipt, "", 0, q->acl, ZOO_EPHEMERAL,
                       NULL, 0);
    /* The receipts confirmed so far ride along (ours, this session). */
    p->nc = 0;
    if (q->rcpt_sid == p->sid)
        while (q->nrcpt > 0 && p->nc < WQ_PIGGYBACK)
            p->carried[p->nc++] = q->rcpt[--q->nrcpt];
    for (int i = 0; i < p->nc; i++)
        zoo_delete_op_init(&p->ops[3 + i], p->carried[i], -1);
    /* A multi that failed as a whole (not sent, connection lost, session
     * expired) leaves the results as they were: read as ZOK, they name no
     * op. */
    memset(p->res, 0, sizeof(p->res));
    p->step = PS_MULTI;
    if ((rc = zkr__call_multi(&p->k, 3 + p->nc, p->ops, p->res)) != 0) {
        for (int i = 0; i < p->nc; i++) /* not sent: kept */
            q->rcpt[q->nrcpt++] = p->carried[i];
        p->nc = 0;
        put_unsent(p, rc);
    }
}

/* The multi's answer. */
static void put_sent(put_t *p, int rc)
{
    zkr_workq_t *q = p->q;
    int f = -1;
    int32_t seq = 0;

    if (rc == ZOK) {
        for (int i = 0; i < p->nc; i++)
            free(p->carried[i]);
        receipt_confirmed(q, p->receipt, p->sid);
        if (zkr__parse_seq(strrchr(p->created, '-') + 1, &seq) == 0 &&
            seq >= p->bsize) {
            p->rp.k.s = q->s;
            p->rp.acl = q->acl;
            p->step = PS_SEAL;
            if (zkr__wq_repair(&p->rp, p->ql, p->t, WQ_SEAL) == 0)
                return;
        }
        put_end(p, 0);
        return;
    }
    if (zkr__call_lost(rc)) {
        /* Applied or not, the carried deletes are the cleanup's. */
        zkr__wq_receipts_to_cleanup(q, p->carried, p->nc, p->sid);
        p->unknown = 1;
        p->sent_sid = p->sid;
        put_again_or_end(p, rc);
        return;
    }
    for (int i = 0; i < 3 + p->nc && f < 0; i++)
        if (p->res[i].err != ZOK && p->res[i].err != ZRUNTIMEINCONSISTENCY)
            f = i;
    if (f >= 3) {
        /* A receipt of ours deleted by someone: the rest are tried by the
         * cleanup; nothing was put. */
        zkr__wq_receipts_to_cleanup(q, p->carried, p->nc, p->sid);
        put_go(p);
        return;
    }
    for (int i = 0; i < p->nc; i++) { /* not applied: kept */
        receipt_confirmed(q, p->carried[i], p->sid);
        free(p->carried[i]);
    }
    if (f == 2 && p->res[2].err == ZNONODE) {
        /* The receipts' container was reaped (empty): again. */
        put_issue(
            p, PS_RDIR_MADE,
            zkr__call_create(&p->k, p->rdir, "", 0, q->acl, ZOO_CONTAINER));
        return;
    }
    if ((f == 0 &&
         (p->res[0].err == ZBADVERSION || p->res[0].err == ZNONODE)) ||
        (f == 1 && p->res[1].err == ZNOCHILDRENFOREPHEMERALS)) {
        /* Sealed (or deleted, so sealed): the tail moved, unless q<L>
         * still names this bucket: a foreign write; repaired. An ephemeral
         * node there is not a bucket: repaired as missing. */
        p->was = p->t;
        p->rc = f == 1 ? ZNONODE : p->res[0].err;
        p->t = -1;
        put_issue(p, PS_LEVEL_READ, zkr__call_exists(&p->k, p->ql));
        return;
    }
    put_fail(p, rc);
}

/* The last multi's answer was lost. The receipt, created in the same
 * transaction as the item and ephemeral, tells whether it applied while
 * the session lasts; after a sync, since the server we reconnected to may
 * lag behind the one that applied it (engine/create.c, recover_synced).
 * Without it (another session, or another client deleted it) the item by
 * its UUID in b<t> tells (B2). */
static void put_resolve(put_t *p)
{
    p->receipt_gone = 0;
    if (p->sid == p->sent_sid)
        put_issue(p, PS_R_SYNC, zkr__call_sync(&p->k, p->rdir));
    else
        put_issue(p, PS_R_BSYNC, zkr__call_sync(&p->k, p->bt));
}

/* The resolve's search of b<t> found (hit, the name) or not. */
static void put_resolved(put_t *p, const char *hit)
{
    zkr_workq_t *q = p->q;

    if (hit != NULL) {
        snprintf(p->created, sizeof(p->created), "%s/%s", p->bt, hit);
    } else if (p->receipt_gone) {
        p->unknown = 0; /* not applied: put again */
        p->t = -1;
        put_go(p);
        return;
    } else if (p->sid != p->sent_sid) {
        put_end(p, ZCONNECTIONLOSS); /* may or may not be put */
        return;
    } else { /* applied and consumed already: its id without the sequence
                number (zkr.h) */
        snprintf(p->created, sizeof(p->created), "%s/i-%d-%s-", p->bt, p->carry,
                 p->uuid);
    }
    if (p->sid == p->sent_sid && !p->receipt_gone)
        receipt_confirmed(q, p->receipt, p->sid);
    put_end(p, 0);
}

/* A repair or seal of the level (rp) ended with rc. */
static void put_repaired(wq_repair_t *r, int rc)
{
    put_t *p = (put_t *)((char *)r - offsetof(put_t, rp));

    if (p->step == PS_SEAL) { /* best effort: a BADVERSION, sealed by
                                 another */
        put_end(p, 0);
        return;
    }
    p->step = 0;
    if (rc != ZOK && rc != ZBADVERSION && !zkr__call_lost(rc)) {
        put_end(p, rc);
        return;
    }
    p->tries++;
    p->pause_until = zkr__now_ms() + ZKR__RETRY_MS;
    zkr__task_wake_at(p->q->s, &p->tk, p->pause_until);
}

/* Mutex held: the answer to the put's request. */
static void put_next(zkr__call_t *k, int rc)
{
    put_t *p = (put_t *)k;
    zkr_workq_t *q = p->q;
    const char *hit = NULL;
    int b;
    int st = p->step;

    p->step = 0;
    switch (st) {
    case PS_PATH:
        if (rc == ZOK || rc == ZNODEEXISTS) {
            put_issue(
                p, PS_RCPT_DIR,
                zkr__call_create(k, p->rdir, "", 0, q->acl, ZOO_CONTAINER));
        } else if (rc == ZNONODE && ++p->path_tries < 5) {
            snprintf(p->anc, sizeof(p->anc), "%s", q->path);
            p->anc_at = 0;
            put_ancestor(p);
        } else {
            put_fail(p, rc);
        }
        return;
    case PS_ANCESTOR:
        if (rc == ZOK || rc == ZNODEEXISTS)
            put_ancestor(p); /* the next one, or PATH */
        else
            put_fail(p, rc);
        return;
    case PS_RCPT_DIR:
        if (rc != ZOK && rc != ZNODEEXISTS) {
            put_fail(p, rc);
            return;
        }
        {
            char b0[320];

            snprintf(b0, sizeof(b0), "%s/b%010d", p->ql, 0);
            zoo_create_op_init(&p->ops[0], p->ql, "", 0, q->acl, ZOO_PERSISTENT,
                               NULL, 0);
            zoo_create_op_init(&p->ops[1], b0, "", 0, q->acl, ZOO_PERSISTENT,
                               NULL, 0);
            memset(p->res, 0, sizeof(p->res));
            put_issue(p, PS_LEVEL, zkr__call_multi(k, 2, p->ops, p->res));
        }
        return;
    case PS_LEVEL:
        if (rc != ZOK && rc != ZNODEEXISTS) {
            put_fail(p, rc);
            return;
        }
        q->made[p->level] = 1;
        put_level(p);
        return;
    case PS_BUCKET:
        /* B from the queue's data ("zkr-workq 1 bucket=<B>"), 1024 if
         * absent or unreadable (then read again by the next put). */
        p->bsize = WQ_BUCKET_DEFAULT;
        if (rc == ZOK) {
            if ((b = zkr__wq_parse_bucket(k->value, k->value_len)) > 0)
                p->bsize = b;
            q->bucket = p->bsize;
        }
        put_level(p);
        return;
    case PS_TAIL:
        if (rc != ZOK) {
            if (rc == ZNONODE)
                q->made[p->level] = 0; /* deleted by someone: again */
            put_fail(p, rc);
            return;
        }
        p->t = k->stat->version;
        put_send(p);
        return;
    case PS_MULTI:
        put_sent(p, rc);
        return;
    case PS_RDIR_MADE:
        if (rc != ZOK && rc != ZNODEEXISTS && !zkr__call_lost(rc)) {
            put_end(p, rc);
            return;
        }
        p->tries++;
        put_go(p);
        return;
    case PS_LEVEL_READ:
        if (rc == ZOK && k->stat->version == p->was) {
            p->rp.k.s = q->s;
            p->rp.acl = q->acl;
            p->step = PS_REPAIR;
            rc = zkr__wq_repair(&p->rp, p->ql, p->was,
                                p->rc == ZBADVERSION ? WQ_REPAIR_SEALED
                                                     : WQ_REPAIR_MISSING);
            if (rc != 0)
                put_repaired(&p->rp, rc);
            return;
        }
        p->tries++;
        put_go(p);
        return;
    case PS_R_SYNC:
        if (rc == ZOK || rc == ZNONODE) {
            put_issue(p, PS_R_RECEIPT, zkr__call_exists(k, p->receipt));
            return;
        }
        put_again_or_end(p, rc);
        return;
    case PS_R_RECEIPT:
        if (rc == ZNONODE) {
            p->receipt_gone = 1;
            rc = ZOK;
        }
        if (rc != ZOK) {
            put_again_or_end(p, rc);
            return;
        }
        put_issue(p, PS_R_BSYNC, zkr__call_sync(k, p->bt));
        return;
    case PS_R_BSYNC:
        if (rc == ZOK) {
            put_issue(p, PS_R_LIST, zkr__call_children(k, p->bt));
            return;
        }
        /* ZNONODE (no such bucket) or an error: as the listing's */
        /* fall through */
    default: /* PS_R_LIST */
        if (rc == ZNONODE) {
            put_resolved(p, NULL);
            return;
        }
        if (rc != ZOK) {
            put_again_or_end(p, rc < 0 ? rc : ZSYSTEMERROR);
            return;
        }
        for (int i = 0; i < k->strings->count && hit == NULL; i++)
            if (strstr(k->strings->data[i], p->uuid) != NULL)
                hit = k->strings->data[i];
        put_resolved(p, hit);
        return;
    }
}

/* The put's next attempt, unless a request or a pause is under way, or
 * it must end: the deadline, too many repairs, the session closing or
 * lost for good; not connected, it waits to be woken. */
static void put_go(put_t *p)
{
    zkr_workq_t *q = p->q;
    zkr_session_t *s = q->s;
    int64_t now = zkr__now_ms();

    if (s->forked) {
        put_end(p, ZKR_ECLOSED); /* the parent's requests are not ours */
        return;
    }
    if (p->k.busy || p->step != 0)
        return; /* its answer goes on */
    if (p->pause_until > now) {
        zkr__task_wake_at(s, &p->tk, p->pause_until);
        return;
    }
    if (now >= p->deadline) {
        put_end(p, ZCONNECTIONLOSS);
        return;
    }
    if (p->tries > WQ_REPAIRS) { /* the level kept changing: nothing put */
        put_end(p, p->rc != ZOK && p->rc != ZNODEEXISTS ? p->rc : ZNONODE);
        return;
    }
    if (s->closing) {
        put_end(p, ZKR_ECLOSED);
        return;
    }
    if (s->zh == NULL || !s->connected) {
        if (zkr__lost_for_good(s))
            put_end(p, ZKR_ELOST);
        else
            zkr__task_wake_at(s, &p->tk, p->deadline);
        return;
    }
    p->sid = s->sid;
    if (p->unknown)
        put_resolve(p);
    else
        put_level(p);
}

static void put_wake(zkr__task_t *t)
{
    put_go((put_t *)((char *)t - offsetof(put_t, tk)));
}

/* A put of data, copied (mutex held): its first attempt started. */
static put_t *put_start(zkr_workq_t *q, const void *data, size_t len, int level,
                        zkr_put_completion_t cb, void *cbdata)
{
    zkr_session_t *s = q->s;
    put_t *p = calloc(1, sizeof(*p));

    if (p == NULL || (p->data = malloc(len > 0 ? len : 1)) == NULL) {
        free(p);
        return NULL;
    }
    if (len > 0)
        memcpy(p->data, data, len);
    p->q = q;
    p->len = len;
    p->level = level;
    p->cb = cb;
    p->cbdata = cbdata;
    p->t = -1;
    p->k.s = s;
    p->k.next = put_next;
    p->rp.done = put_repaired;
    p->tk.wake = put_wake;
    p->tk.wake_at = -1;
    p->deadline = zkr__now_ms() +
                  (s->req_timeout > 0 ? s->req_timeout : 10000) +
                  (s->timeout > 0 ? s->timeout : 10000);
    zkr__uuid(p->uuid);
    snprintf(p->ql, sizeof(p->ql), "%s/q%d", q->path, level);
    snprintf(p->rdir, sizeof(p->rdir), "%s/receipts", q->path);
    snprintf(p->receipt, sizeof(p->receipt), "%s/%s", p->rdir, p->uuid);
    zkr__task_add(s, &p->tk);
    if (cb != NULL)
        q->async_puts++;
    put_go(p);
    return p;
}

static int put_check(zkr_workq_t *q, const void *data, size_t len, int level)
{
    if (q == NULL || (data == NULL && len > 0) || len > ZKR_WORKQ_DATA_MAX ||
        level < 0 || level >= ZKR_WORKQ_LEVELS)
        return ZBADARGUMENTS;
    return 0;
}

int zkr_workq_put(zkr_workq_t *q, const void *data, size_t len, int level,
                  char *id, size_t idlen)
{
    zkr_session_t *s;
    put_t *p;
    int rc = put_check(q, data, len, level);

    if (rc != 0)
        return rc;
    /* "q<L>/b<%010d>/i-0-<uuid>-<%010d>" and its NUL */
    if (id != NULL && idlen < 67)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    if ((p = put_start(q, data, len, level, NULL, NULL)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    while (!p->ended)
        zkr__wait(s, &p->ended, -1);
    pthread_mutex_unlock(&s->mu);
    rc = p->rc;
    if (rc == 0 && id != NULL) {
        if (strlen(p->id) >= idlen)
            rc = ZBADARGUMENTS;
        else
            strcpy(id, p->id);
    }
    free(p->data);
    free(p);
    return rc;
}

int zkr_workq_put_async(zkr_workq_t *q, const void *data, size_t len, int level,
                        zkr_put_completion_t cb, void *cbdata)
{
    zkr_session_t *s;
    put_t *p;
    int rc = put_check(q, data, len, level);

    if (rc != 0 || cb == NULL)
        return ZBADARGUMENTS;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ECLOSED;
    }
    /* The put may end inside put_start (a request the client refuses):
     * its callback is then posted already, like any other end. */
    p = put_start(q, data, len, level, cb, cbdata);
    pthread_mutex_unlock(&s->mu);
    return p != NULL ? 0 : ZKR_ENOMEM;
}
