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

/* Creates path's missing ancestors as containers. */
static int make_ancestors(zhandle_t *zh, const char *path,
                          const struct ACL_vector *acl)
{
    char *p = zkr__strdup(path);
    int rc = ZOK;

    if (p == NULL)
        return ZKR_ENOMEM;
    for (char *slash = strchr(p + 1, '/'); slash != NULL && rc == ZOK;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        rc = zoo_create(zh, p, "", 0, acl, ZOO_CONTAINER, NULL, 0);
        if (rc == ZNODEEXISTS)
            rc = ZOK;
        *slash = '/';
    }
    free(p);
    return rc;
}

/* Creates a persistent node with data; its missing ancestors as
 * containers. ZOK also when it exists. */
int zkr__wq_make_node(zhandle_t *zh, const char *path, const char *data,
                      const struct ACL_vector *acl)
{
    for (int tries = 0; tries < 5; tries++) {
        int rc = zoo_create(zh, path, data, (int)strlen(data), acl,
                            ZOO_PERSISTENT, NULL, 0);
        if (rc == ZOK || rc == ZNODEEXISTS)
            return ZOK;
        if (rc != ZNONODE)
            return rc;
        if ((rc = make_ancestors(zh, path, acl)) != ZOK)
            return rc;
    }
    return ZNONODE;
}

/* B from the queue's data ("zkr-workq 1 bucket=<B>"), 1024 if absent. */
int zkr__wq_read_bucket(zkr_workq_t *q, zhandle_t *zh)
{
    char buf[128];
    int len = sizeof(buf) - 1, b = 0;
    const char *p;

    pthread_mutex_lock(&q->s->mu);
    b = q->bucket;
    pthread_mutex_unlock(&q->s->mu);
    if (b > 0)
        return b;
    if (zoo_get(zh, q->path, 0, buf, &len, NULL) != ZOK)
        return WQ_BUCKET_DEFAULT;
    buf[len > 0 ? len : 0] = '\0';
    b = WQ_BUCKET_DEFAULT;
    if (strncmp(buf, "zkr-workq ", 10) == 0 &&
        (p = strstr(buf, "bucket=")) != NULL && atoi(p + 7) > 0)
        b = atoi(p + 7);
    pthread_mutex_lock(&q->s->mu);
    q->bucket = b;
    pthread_mutex_unlock(&q->s->mu);
    return b;
}

/* PATH and q<L> (with its first bucket) exist. */
static int ensure_level(zkr_workq_t *q, zhandle_t *zh, int level)
{
    char data[64], ql[300], b0[320];
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    int made, rc;

    pthread_mutex_lock(&q->s->mu);
    made = q->made[level];
    pthread_mutex_unlock(&q->s->mu);
    if (made)
        return ZOK;
    snprintf(data, sizeof(data), "zkr-workq 1 bucket=%d", WQ_BUCKET_DEFAULT);
    if ((rc = zkr__wq_make_node(zh, q->path, data, q->acl)) != ZOK)
        return rc;
    /* The puts' receipts (workq.md): a container, made again if reaped. */
    snprintf(ql, sizeof(ql), "%s/receipts", q->path);
    rc = zoo_create(zh, ql, "", 0, q->acl, ZOO_CONTAINER, NULL, 0);
    if (rc != ZOK && rc != ZNODEEXISTS)
        return rc;
    snprintf(ql, sizeof(ql), "%s/q%d", q->path, level);
    snprintf(b0, sizeof(b0), "%s/b%010d", ql, 0);
    zoo_create_op_init(&ops[0], ql, "", 0, q->acl, ZOO_PERSISTENT, NULL, 0);
    zoo_create_op_init(&ops[1], b0, "", 0, q->acl, ZOO_PERSISTENT, NULL, 0);
    rc = zoo_multi(zh, 2, ops, res);
    if (rc != ZOK && rc != ZNODEEXISTS)
        return rc;
    pthread_mutex_lock(&q->s->mu);
    q->made[level] = 1;
    pthread_mutex_unlock(&q->s->mu);
    return ZOK;
}

/* The ops that move level ql's tail from t to t+1: the seal of b<t>
 * (when bt is not NULL: its version 0 -> 1), q<L>'s version t -> t+1, and
 * b<t+1> created or, with adopt, checked to exist: another client may
 * have made it ahead of the tail (an empty bucket, or one with foreign
 * children), and the create failing must not keep b<t> open for ever.
 * No put can have landed in b<t+1> before q<L> names it. n ops. */
int zkr__wq_advance_ops(zoo_op_t *ops, const char *bt, const char *ql,
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
int zkr__wq_next_exists(int rc, const zoo_op_result_t *res, int n)
{
    if (rc != ZNODEEXISTS || res[n - 1].err != ZNODEEXISTS)
        return 0;
    for (int i = 0; i + 1 < n; i++)
        if (res[i].err != ZOK)
            return 0;
    return 1;
}

/* Moves level ql's tail from t to t+1 (sealing bt first unless NULL),
 * creating b<t+1> or adopting it. The multi's code: ZOK, or BADVERSION
 * when b<t> was sealed or q<L> moved by someone else meanwhile. */
static int advance(zhandle_t *zh, const char *ql, int t, const char *bt,
                   const struct ACL_vector *acl)
{
    char next[320];
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
    int n, rc;

    snprintf(next, sizeof(next), "%s/b%010d", ql, t + 1);
    n = zkr__wq_advance_ops(ops, bt, ql, next, t, 0, acl);
    rc = zoo_multi(zh, n, ops, res);
    if (zkr__wq_next_exists(rc, res, n)) {
        n = zkr__wq_advance_ops(ops, bt, ql, next, t, 1, acl);
        rc = zoo_multi(zh, n, ops, res);
    }
    return rc;
}

/* Seals bucket t of level path ql (best effort: anyone may, once). */
static void seal(zhandle_t *zh, const char *ql, int t,
                 const struct ACL_vector *acl)
{
    char bt[320];

    snprintf(bt, sizeof(bt), "%s/b%010d", ql, t);
    (void)advance(zh, ql, t, bt, acl); /* BADVERSION: sealed by another */
}

/* Has bucket bt an item whose name holds uuid (after a sync)? 1, 0, or a
 * ZooKeeper code (< 0). */
static int bucket_has(zhandle_t *zh, const char *bt, const char *uuid,
                      char *name, size_t size)
{
    struct String_vector v = {0, NULL};
    int rc = zkr__wq_sync_path(zh, bt), hit = 0;

    if (rc == ZOK)
        rc = zoo_get_children(zh, bt, 0, &v);
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return rc < 0 ? rc : ZSYSTEMERROR;
    for (int i = 0; i < v.count && !hit; i++)
        if (strstr(v.data[i], uuid) != NULL) {
            hit = 1;
            snprintf(name, size, "%s", v.data[i]);
        }
    deallocate_String_vector(&v);
    return hit;
}

/* Pauses between the bounded retries of a put whose level keeps changing
 * under it (foreign writes): never a spin. */
void zkr__wq_pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

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

/* F3: b<t> (t = q<L>'s data version) is missing, or sealed while q<L>
 * still names it (a foreign write to q<L> or to a bucket, a reaper that
 * deleted an empty tail bucket). Repairs the level so that the tail is
 * an open bucket above every existing one: the highest bucket below t is
 * sealed (if open), b<t> created; a sealed b<t> is followed by b<t+1> with
 * q<L> moved to it. Every step tolerates a concurrent repair. ZOK, or
 * ZBADVERSION when b<t> is missing and q<L> no longer names t (the caller
 * reads q<L> again), or the call's error. */
int zkr__wq_repair_tail(const struct ACL_vector *acl, zhandle_t *zh,
                        const char *ql, int t, int sealed)
{
    char bt[320];
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    int rc;

    if (sealed) {
        rc = advance(zh, ql, t, NULL, acl);
        return rc == ZBADVERSION || rc == ZNONODE ? ZOK : rc;
    } else {
        struct String_vector v = {0, NULL};
        struct Stat st;
        int n = 0, *bk, below = -1;

        /* An ephemeral node of another client at b<t> (made ahead of the
         * tail and adopted, or in place of a deleted tail) can have no
         * items: it is not a bucket. Deleted, it is missing. */
        snprintf(bt, sizeof(bt), "%s/b%010d", ql, t);
        rc = zoo_exists(zh, bt, 0, &st);
        if (rc == ZOK && st.ephemeralOwner != 0)
            rc = zoo_delete(zh, bt, st.version);
        if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION)
            return rc;
        if ((rc = zoo_get_children(zh, ql, 0, &v)) != ZOK)
            return rc;
        bk = zkr__wq_sorted_buckets(&v, &n);
        deallocate_String_vector(&v);
        if (bk == NULL)
            return ZKR_ENOMEM;
        for (int i = 0; i < n; i++)
            if (bk[i] < t)
                below = bk[i];
        free(bk);
        if (below >= 0) {
            char bb[320];

            /* Sealed before b<t> exists: no put can land below it after. */
            snprintf(bb, sizeof(bb), "%s/b%010d", ql, below);
            rc = zoo_set(zh, bb, "sealed", 6, 0);
            if (rc != ZOK && rc != ZBADVERSION && rc != ZNONODE)
                return rc;
        }
        /* Only while q<L> still names t: a repair from an old read must
         * not make a bucket below the tail. */
        zoo_check_op_init(&ops[0], ql, t);
        zoo_create_op_init(&ops[1], bt, "", 0, acl, ZOO_PERSISTENT, NULL, 0);
        rc = zoo_multi(zh, 2, ops, res);
        if (rc == ZNODEEXISTS && res[0].err == ZOK)
            return ZOK; /* b<t> is there, and q<L> names it */
        return rc;      /* ZBADVERSION: q<L> moved, read it again */
    }
}

/* A put in progress (put_run): its item, where it goes, and what is
 * known of its last attempt. */
typedef struct {
    zkr_workq_t *q;
    const void *data;
    size_t len;
    int level, carry;
    char uuid[37], ql[300], bt[320], created[512], rdir[300], receipt[340];
    int64_t sent_sid; /* the session the multi of unknown outcome went on */
    int t;            /* the tail bucket, -1 until read */
    int unknown;      /* the last multi's answer was lost */
    int tries;        /* repairs so far */
    int rc;           /* the last failure */
} put_t;

/* What a step of a put says next. */
enum {
    PUT_DONE = 1, /* put (created names the item) */
    PUT_AGAIN,    /* try again */
    PUT_FAIL,     /* p->rc: a connection error tries again, else returned */
    PUT_RETURN    /* return p->rc */
};

static int put_return(put_t *p, int rc)
{
    p->rc = rc;
    return PUT_RETURN;
}

/* A connection error tries again; another code is returned. */
static int put_again_or_return(put_t *p, int rc)
{
    return zkr__wq_conn_error(rc) ? PUT_AGAIN : put_return(p, rc);
}

/* The last multi's answer was lost. The receipt, created in the same
 * transaction as the item and ephemeral, tells whether it applied while
 * the session lasts; after a sync, since the server we reconnected to may
 * lag behind the one that applied it (engine/create.c, recover_synced). */
static int put_resolve(put_t *p, zhandle_t *zh, int64_t sid)
{
    zkr_workq_t *q = p->q;
    char hit[WQ_NAME_MAX + 16];
    struct Stat st;
    int rc, h;

    if (sid == p->sent_sid) {
        rc = zkr__wq_sync_path(zh, p->rdir);
        if (rc == ZOK || rc == ZNONODE)
            rc = zoo_exists(zh, p->receipt, 0, &st);
        if (rc == ZNONODE) {
            /* Not applied, unless another client deleted the receipt: the
             * item, by its UUID, tells (B2). */
            h = bucket_has(zh, p->bt, p->uuid, hit, sizeof(hit));
            if (h < 0)
                return put_again_or_return(p, h);
            if (h == 1) {
                snprintf(p->created, sizeof(p->created), "%s/%s", p->bt, hit);
                return PUT_DONE;
            }
            p->unknown = 0; /* not applied: put again */
            p->t = -1;
            return PUT_AGAIN;
        }
        if (rc != ZOK)
            return put_again_or_return(p, rc);
    }
    /* Applied (receipt there), or unknown (the session changed and the
     * receipt went with it): the item by its UUID. */
    h = bucket_has(zh, p->bt, p->uuid, hit, sizeof(hit));
    if (h < 0)
        return put_again_or_return(p, h);
    if (h == 1)
        snprintf(p->created, sizeof(p->created), "%s/%s", p->bt, hit);
    else if (sid != p->sent_sid)
        return put_return(p, ZCONNECTIONLOSS); /* may or may not be put */
    else /* applied and consumed already: its id without the sequence
            number (zkr.h) */
        snprintf(p->created, sizeof(p->created), "%s/i-%d-%s-", p->bt, p->carry,
                 p->uuid);
    if (sid == p->sent_sid) {
        pthread_mutex_lock(&q->s->mu);
        receipt_confirmed(q, p->receipt, sid);
        pthread_mutex_unlock(&q->s->mu);
    }
    return PUT_DONE;
}

/* The multi failed at op f (no connection error): the receipts it
 * carried, and what the failure says of the level. */
static int put_failed(put_t *p, zhandle_t *zh, int64_t sid,
                      const zoo_op_result_t *res, int f, char **carried, int nc)
{
    zkr_workq_t *q = p->q;
    zkr_session_t *s = q->s;
    struct Stat st;
    int rc;

    pthread_mutex_lock(&s->mu);
    if (f >= 3) {
        /* A receipt of ours deleted by someone: the rest are tried by the
         * cleanup; nothing was put. */
        zkr__wq_receipts_to_cleanup(q, carried, nc, sid);
    } else {
        for (int i = 0; i < nc; i++) { /* not applied: kept */
            receipt_confirmed(q, carried[i], sid);
            free(carried[i]);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (f >= 3)
        return PUT_AGAIN;
    if (f == 2 && res[2].err == ZNONODE) {
        /* The receipts' container was reaped (empty): again. */
        p->rc = zoo_create(zh, p->rdir, "", 0, q->acl, ZOO_CONTAINER, NULL, 0);
        if (p->rc != ZOK && p->rc != ZNODEEXISTS && !zkr__wq_conn_error(p->rc))
            return PUT_RETURN;
        p->tries++;
        return PUT_AGAIN;
    }
    if ((f == 0 && (res[0].err == ZBADVERSION || res[0].err == ZNONODE)) ||
        (f == 1 && res[1].err == ZNOCHILDRENFOREPHEMERALS)) {
        /* Sealed (or deleted, so sealed): the tail moved, unless q<L>
         * still names this bucket: a foreign write; repaired. An ephemeral
         * node there is not a bucket: repaired as missing. */
        int was = p->t;

        p->rc = f == 1 ? ZNONODE : res[0].err;
        p->t = -1;
        if (zoo_exists(zh, p->ql, 0, &st) == ZOK && st.version == was) {
            rc = zkr__wq_repair_tail(q->acl, zh, p->ql, was,
                                     p->rc == ZBADVERSION);
            if (rc != ZOK && rc != ZBADVERSION && !zkr__wq_conn_error(rc))
                return put_return(p, rc);
            zkr__wq_pause_ms(ZKR__RETRY_MS);
        }
        p->tries++;
        return PUT_AGAIN;
    }
    return PUT_FAIL;
}

/* One attempt: the item, its receipt and the receipts confirmed so far
 * in one multi into the tail bucket; a full bucket sealed after. */
static int put_send(put_t *p, zhandle_t *zh, int64_t sid)
{
    zkr_workq_t *q = p->q;
    zkr_session_t *s = q->s;
    char prefix[400];
    struct Stat st;
    zoo_op_t ops[3 + WQ_PIGGYBACK];
    zoo_op_result_t res[3 + WQ_PIGGYBACK];
    char *carried[WQ_PIGGYBACK];
    int nc = 0, f = -1, bsize;
    int32_t seq = 0;

    if ((p->rc = ensure_level(q, zh, p->level)) != ZOK)
        return PUT_FAIL;
    bsize = zkr__wq_read_bucket(q, zh);
    if (p->t < 0) {
        if ((p->rc = zoo_exists(zh, p->ql, 0, &st)) != ZOK) {
            if (p->rc == ZNONODE) {
                pthread_mutex_lock(&s->mu);
                q->made[p->level] = 0; /* deleted by someone: again */
                pthread_mutex_unlock(&s->mu);
            }
            return PUT_FAIL;
        }
        p->t = st.version;
    }
    snprintf(p->bt, sizeof(p->bt), "%s/b%010d", p->ql, p->t);
    snprintf(prefix, sizeof(prefix), "%s/i-%d-%s-", p->bt, p->carry, p->uuid);
    zoo_check_op_init(&ops[0], p->bt, 0);
    zoo_create_op_init(&ops[1], prefix, p->data, (int)p->len, q->acl,
                       ZOO_PERSISTENT_SEQUENTIAL, p->created,
                       sizeof(p->created));
    zoo_create_op_init(&ops[2], p->receipt, "", 0, q->acl, ZOO_EPHEMERAL, NULL,
                       0);
    /* The receipts confirmed so far ride along (ours, this session). */
    pthread_mutex_lock(&s->mu);
    if (q->rcpt_sid == sid)
        while (q->nrcpt > 0 && nc < WQ_PIGGYBACK)
            carried[nc++] = q->rcpt[--q->nrcpt];
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < nc; i++)
        zoo_delete_op_init(&ops[3 + i], carried[i], -1);
    /* A multi that failed as a whole (not sent, connection lost, session
     * expired) leaves the results as they were: read as ZOK, they name no
     * op. */
    memset(res, 0, sizeof(res));
    p->rc = zoo_multi(zh, 3 + nc, ops, res);
    if (p->rc == ZOK) {
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < nc; i++)
            free(carried[i]);
        receipt_confirmed(q, p->receipt, sid);
        pthread_mutex_unlock(&s->mu);
        if (zkr__parse_seq(strrchr(p->created, '-') + 1, &seq) == 0 &&
            seq >= bsize)
            seal(zh, p->ql, p->t, q->acl);
        return PUT_DONE;
    }
    if (zkr__wq_conn_error(p->rc)) {
        /* Applied or not, the carried deletes are the cleanup's. */
        pthread_mutex_lock(&s->mu);
        zkr__wq_receipts_to_cleanup(q, carried, nc, sid);
        pthread_mutex_unlock(&s->mu);
        p->unknown = 1;
        p->sent_sid = sid;
        return PUT_AGAIN;
    }
    for (int i = 0; i < 3 + nc && f < 0; i++)
        if (res[i].err != ZOK && res[i].err != ZRUNTIMEINCONSISTENCY)
            f = i;
    return put_failed(p, zh, sid, res, f, carried, nc);
}

/* Puts an item: 0 (its id into id, if not NULL), or a code (zkr.h,
 * zkr_workq_put). Each attempt is put_send(), or put_resolve() after a
 * lost answer, until one of them ends it or the deadline passes. */
static int put_run(zkr_workq_t *q, const void *data, size_t len, int level,
                   int carry, char *id, size_t idlen)
{
    zkr_session_t *s = q->s;
    put_t p = {.q = q,
               .data = data,
               .len = len,
               .level = level,
               .carry = carry,
               .t = -1};
    int64_t deadline = zkr__now_ms() +
                       (s->req_timeout > 0 ? s->req_timeout : 10000) +
                       (s->timeout > 0 ? s->timeout : 10000);
    zhandle_t *zh;
    int rc, step;

    zkr__uuid(p.uuid);
    snprintf(p.ql, sizeof(p.ql), "%s/q%d", q->path, level);
    snprintf(p.rdir, sizeof(p.rdir), "%s/receipts", q->path);
    snprintf(p.receipt, sizeof(p.receipt), "%s/%s", p.rdir, p.uuid);
    for (;;) {
        int64_t sid;

        if (zkr__now_ms() >= deadline)
            return ZCONNECTIONLOSS;
        if (p.tries > WQ_REPAIRS) /* the level kept changing: nothing put */
            return p.rc != ZOK && p.rc != ZNODEEXISTS ? p.rc : ZNONODE;
        if ((rc = zkr__zh_get(s, &zh)) != 0) {
            if (rc != ZCONNECTIONLOSS)
                return rc;
            if ((rc = zkr__wq_wait_connected(s, deadline, NULL)) != 0)
                return rc == ZKR_ETIMEDOUT ? ZCONNECTIONLOSS : rc;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        sid = s->sid;
        pthread_mutex_unlock(&s->mu);
        step = p.unknown ? put_resolve(&p, zh, sid) : put_send(&p, zh, sid);
        zkr__zh_put(s);
        if (step == PUT_DONE)
            break;
        if (step == PUT_RETURN ||
            (step == PUT_FAIL && !zkr__wq_conn_error(p.rc)))
            return p.rc;
        if (step == PUT_FAIL)
            p.t = -1;
    }
    if (id != NULL) {
        const char *rel = p.created + strlen(q->path) + 1;

        if (strlen(rel) >= idlen)
            return ZBADARGUMENTS;
        strcpy(id, rel);
    }
    return 0;
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
    int rc = put_check(q, data, len, level);

    if (rc != 0)
        return rc;
    /* "q<L>/b<%010d>/i-0-<uuid>-<%010d>" and its NUL */
    if (id != NULL && idlen < 67)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&q->s->mu);
    rc = q->s->closing ? ZKR_ECLOSED : 0;
    pthread_mutex_unlock(&q->s->mu);
    if (rc != 0)
        return rc;
    return put_run(q, data, len, level, 0, id, idlen);
}

struct put_job {
    zkr_workq_t *q;
    void *data;
    size_t len;
    int level;
    zkr_put_completion_t cb;
    void *cbdata;
    int rc;
    char id[ZKR_WORKQ_ID_MAX + 256];
};

static void put_deliver(const zkr__event_t *ev)
{
    struct put_job *j = ev->data;

    j->cb(ev->a, ev->a == 0 ? j->id : NULL, j->cbdata);
    free(j);
}

static void *put_thread(void *arg)
{
    struct put_job *j = arg;
    zkr_workq_t *q = j->q;
    zkr_session_t *s = q->s;
    int rc = put_run(q, j->data, j->len, j->level, 0, j->id, sizeof(j->id));

    free(j->data);
    j->data = NULL;
    pthread_mutex_lock(&s->mu);
    if (zkr__post_call(s, put_deliver, rc, NULL, j) != 0)
        free(j); /* no event even from the reserve: nothing to tell */
    q->async_puts--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int zkr_workq_put_async(zkr_workq_t *q, const void *data, size_t len, int level,
                        zkr_put_completion_t cb, void *cbdata)
{
    struct put_job *j;
    pthread_attr_t a;
    pthread_t t;
    int rc = put_check(q, data, len, level);

    if (rc != 0 || cb == NULL)
        return ZBADARGUMENTS;
    if ((j = calloc(1, sizeof(*j))) == NULL ||
        (j->data = malloc(len > 0 ? len : 1)) == NULL) {
        free(j);
        return ZKR_ENOMEM;
    }
    if (len > 0)
        memcpy(j->data, data, len);
    j->q = q;
    j->len = len;
    j->level = level;
    j->cb = cb;
    j->cbdata = cbdata;
    pthread_mutex_lock(&q->s->mu);
    if (q->s->closing) {
        pthread_mutex_unlock(&q->s->mu);
        free(j->data);
        free(j);
        return ZKR_ECLOSED;
    }
    q->async_puts++;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &a, put_thread, j);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        q->async_puts--;
        pthread_mutex_unlock(&q->s->mu);
        free(j->data);
        free(j);
        return ZKR_ESYS;
    }
    pthread_mutex_unlock(&q->s->mu);
    return 0;
}
