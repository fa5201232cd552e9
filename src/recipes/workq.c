/* The work queue: a fenced FIFO queue with fair consumers.
 * Protocol, order proof and faults: docs/design/workq.md.
 *
 * Items live in buckets (PATH/q<L>/b<k>/i-<carry>-<uuid>-<seq>) so that no
 * listing grows past B names. Consumers line up on an exclusive zkr lock
 * (PATH/consumers, the engine): only the first in line scans for an item,
 * so a put wakes one consumer whatever their number. A claim is an engine
 * exclusive-lock contender whose directory is the item node, created in
 * one multi with a versioned setData of the item (the delivery count), so
 * fencing, SUSPENDED/LOST, the descriptor and the listener are the
 * engine's. Ack and nack are engine commits: one multi that holds the
 * delete of the claim node, so they apply only while the claim is ours.
 *
 * Puts, scans and listings are synchronous ZooKeeper calls made on the
 * caller's thread; the asynchronous forms run them on a thread of their
 * own and post the completion to the session's event thread. */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recipes.h"

#define WQ_BUCKET_DEFAULT 1024
#define WQ_NAME_MAX 96 /* "i-<carry>-<uuid36>-<seq10>" and more */

#define WQ_REPAIRS 20      /* bounded retries of a put or of a repair */
#define WQ_PIGGYBACK 16    /* receipt deletes carried by one put */
#define WQ_RECEIPTS_MAX 64 /* confirmed receipts kept: beyond, cleanup */

enum { WQ_AGAIN = 1, WQ_EMPTY = 2 }; /* scan results besides 0 and errors */

struct zkr_workq {
    zkr__contender_t turn; /* PATH/consumers: whose turn it is */
    zkr_session_t *s;
    char *path;
    char *id;
    const struct ACL_vector *acl; /* &turn.acl */
    int bucket;                   /* B, 0 until read */
    int made[ZKR_WORKQ_LEVELS];   /* q<L> and b0 exist (cached) */
    int dead_max;
    char *dead_path;
    /* the take (one at a time) */
    int taking;
    int cancel;
    pthread_t thr;    /* an asynchronous take's thread (set under the mutex) */
    int thr_joinable; /* mutex */
    int async_puts;   /* asynchronous puts running */
    /* watches the take set (removed when it ends) */
    char **wpath;
    int *wtype;
    int nw, capw;
    /* receipts of puts whose outcome is known, to delete (session
     * rcpt_sid): they ride on the next put (workq.md, receipts) */
    char *rcpt[WQ_RECEIPTS_MAX];
    int nrcpt;
    int64_t rcpt_sid;
};

struct zkr_item {
    zkr__contender_t c; /* the claim: directory = the item node */
    zkr_session_t *s;
    char *qpath;
    char *id;    /* q<L>/b<k>/<name> */
    char *ipath; /* full path of the item node */
    char *name;
    int level, carry;
    int version;    /* the item's data version our claim wrote (v + 1) */
    int deliveries; /* carry + claims before ours (cversion / 2) + 1 */
    int bucket;     /* B of the queue */
    char *data;
    size_t len;
    int finished; /* acked or nacked */
    /* an ack or nack in flight */
    int busy, sync, done, rc, where; /* where: -1 ack, else the nack's */
    zkr_item_completion_t cb;
    void *cbdata;
    zkr__commit_t cm;
    zoo_op_t ops[6];
    zoo_op_result_t res[6];
    char receipt[340]; /* PATH/receipts/<uuid> of the commit in flight */
    char rdir[300];
    char *tail_path;    /* nack back: q<L>/b<t> */
    char *new_prefix;   /* ... and the new item's name prefix */
    char created[1024]; /* ... its name as created, and (at 512) its prefix */
    int tail;
    int tail_rc;    /* nack back: how b<tail> failed (BADVERSION, NONODE) */
    int tail_tries; /* ... and how often, this commit (WQ_REPAIRS) */
    int rdir_made;  /* the receipts' container made again for this commit */
};

/* ------------------------------------------------------------ names */

/* Parses "i-<carry>-<uuid36>-<seq%010d>": 0, or -1 when not an item. */
static int parse_item(const char *name, int *carry, int32_t *seq)
{
    const char *p = name;
    long c = 0;

    if (strncmp(p, "i-", 2) != 0)
        return -1;
    p += 2;
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p) && c < 1000000)
        c = c * 10 + (*p++ - '0');
    if (*p++ != '-' || strlen(p) != 36 + 1 + 10 || p[36] != '-')
        return -1;
    if (zkr__parse_seq(p + 37, seq) != 0)
        return -1;
    *carry = (int)c;
    return 0;
}

/* "b%010d" -> k, or -1. */
static int parse_bucket(const char *name)
{
    int32_t k;

    if (name[0] != 'b' || strlen(name) != 11 ||
        !isdigit((unsigned char)name[1]))
        return -1;
    return zkr__parse_seq(name + 1, &k) == 0 && k >= 0 ? (int)k : -1;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    const char *name;
    int carry;
    int32_t seq;
} wq_entry_t;

static int cmp_entry(const void *a, const void *b)
{
    const wq_entry_t *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The buckets of a level listing, ascending; *n of them. */
static int *sorted_buckets(const struct String_vector *v, int *n)
{
    int *k = malloc(sizeof(int) * (size_t)(v->count > 0 ? v->count : 1));

    *n = 0;
    if (k == NULL)
        return NULL;
    for (int i = 0; i < v->count; i++)
        if ((k[*n] = parse_bucket(v->data[i])) >= 0)
            (*n)++;
    qsort(k, (size_t)*n, sizeof(int), cmp_int);
    return k;
}

/* The buckets of level directory ql, ascending (*bk to free; NULL and
 * *n 0 when the level does not exist). ZOK, ZKR_ENOMEM or a code. */
static int level_buckets(zhandle_t *zh, const char *ql, int **bk, int *n)
{
    struct String_vector v = {0, NULL};
    int rc = zoo_get_children(zh, ql, 0, &v);

    *bk = NULL;
    *n = 0;
    if (rc != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    *bk = sorted_buckets(&v, n);
    deallocate_String_vector(&v);
    return *bk != NULL ? ZOK : ZKR_ENOMEM;
}

/* The items of a bucket listing by sequence; *n of them. */
static wq_entry_t *sorted_items(const struct String_vector *v, int *n)
{
    wq_entry_t *e = malloc(sizeof(*e) * (size_t)(v->count > 0 ? v->count : 1));

    *n = 0;
    if (e == NULL)
        return NULL;
    for (int i = 0; i < v->count; i++)
        if (parse_item(v->data[i], &e[*n].carry, &e[*n].seq) == 0)
            e[(*n)++].name = v->data[i];
    qsort(e, (size_t)*n, sizeof(*e), cmp_entry);
    return e;
}

/* ------------------------------------------------------- connection */

static int conn_error(int rc)
{
    return zkr__is_connection_error(rc) || rc == ZOPERATIONTIMEOUT;
}

/* Waits until the session is connected again, at most until deadline
 * (-1: the session's timeout from now), or until *cancel (may be NULL) is
 * set: a take is cancelled (or its handle freed) while the connection is
 * down too. 0, ZKR_ETIMEDOUT, ZKR_ECANCELED, ZKR_ECLOSED, ZKR_ELOST. */
static int wait_connected(zkr_session_t *s, int64_t deadline, const int *cancel)
{
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    if (deadline < 0)
        deadline = zkr__now_ms() + (s->timeout > 0 ? s->timeout : 10000) * 2;
    while (rc == 0 && !(s->connected && s->zh != NULL)) {
        if (cancel != NULL && *cancel)
            rc = ZKR_ECANCELED;
        else if (s->closing)
            rc = ZKR_ECLOSED;
        else if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
            rc = ZKR_ELOST;
        else
            rc = zkr__wait(s, NULL, deadline) == ZKR_ETIMEDOUT ? ZKR_ETIMEDOUT
                                                               : 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, rc;
};

static void sync_done(int rc, const char *value, const void *data)
{
    struct sync_wait *w = (struct sync_wait *)data;

    (void)value;
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->done = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* A synchronous sync(path): the server then has applied everything
 * committed before, so a listing that follows shows a create sent earlier
 * (on a connection since lost) if it was applied (engine/create.c,
 * recover_synced). */
static int sync_path(zhandle_t *zh, const char *path)
{
    struct sync_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                          0, 0};
    int rc = (zoo_async)(zh, path, sync_done, &w);

    if (rc != ZOK)
        return rc;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    return w.rc;
}

static void receipts_to_cleanup(zkr_workq_t *q, char **v, int n, int64_t sid);

/* ------------------------------------------------------------ handle */

static void turn_deliver(zkr__contender_t *c, const zkr__event_t *ev)
{
    (void)c;
    (void)ev; /* the turn's release completion: nothing to tell */
}

static const zkr__recipe_t turn_recipe = {
    "-lock-", 'x', 0, zkr__pred_mutex, turn_deliver, 0, NULL,
};

int zkr_workq_new(zkr_workq_t **out, zkr_session_t *s, const char *path,
                  const char *id, const struct ACL_vector *acl)
{
    zkr_workq_t *q;
    char *turn;
    int rc;

    if (out == NULL || s == NULL || zkr__check_path(path) != 0 ||
        strcmp(path, "/") == 0 || strlen(path) > 256)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((q = calloc(1, sizeof(*q))) == NULL)
        return ZKR_ENOMEM;
    turn = zkr__join(path, "consumers");
    q->path = zkr__strdup(path);
    if (turn == NULL || q->path == NULL) {
        free(turn);
        free(q->path);
        free(q);
        return ZKR_ENOMEM;
    }
    rc = zkr__contender_init(&q->turn, s, &turn_recipe, q, turn, id, acl);
    free(turn);
    if (rc != 0) {
        free(q->path);
        free(q);
        return rc;
    }
    q->s = s;
    q->id = q->turn.data;
    q->acl = &q->turn.acl;
    *out = q;
    return 0;
}

static void workq_dispose(void *owner)
{
    zkr_workq_t *q = owner;

    for (int i = 0; i < q->nw; i++)
        free(q->wpath[i]);
    for (int i = 0; i < q->nrcpt; i++)
        free(q->rcpt[i]);
    free(q->wpath);
    free(q->wtype);
    free(q->path);
    free(q->dead_path);
    free(q);
}

static int take_cancel(zkr_workq_t *q);

void zkr_workq_free(zkr_workq_t *q)
{
    zkr_session_t *s;
    int joinable;

    if (q == NULL)
        return;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    take_cancel(q);
    pthread_mutex_unlock(&s->mu);
    zkr__cancel(&q->turn); /* ESTATE when not acquiring: fine */
    pthread_mutex_lock(&s->mu);
    while (q->async_puts > 0 || (q->taking && !q->thr_joinable))
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    /* Receipts not carried away by a put: the session's cleanup deletes
     * them (they are ephemeral anyway). */
    receipts_to_cleanup(q, q->rcpt, q->nrcpt, q->rcpt_sid);
    q->nrcpt = 0;
    joinable = q->thr_joinable;
    pthread_mutex_unlock(&s->mu);
    if (joinable)
        pthread_join(q->thr, NULL);
    zkr__contender_destroy(&q->turn, workq_dispose);
}

int zkr_workq_set_dead_letter(zkr_workq_t *q, int max, const char *dead_path)
{
    char *p = NULL;
    int rc = 0;

    if (q == NULL || max < 0 ||
        (dead_path != NULL &&
         (zkr__check_path(dead_path) != 0 || strcmp(dead_path, "/") == 0)))
        return ZBADARGUMENTS;
    p = zkr__strdup(dead_path != NULL ? dead_path : "");
    if (p == NULL)
        return ZKR_ENOMEM;
    if (dead_path == NULL) {
        free(p);
        if ((p = zkr__join(q->path, "dead")) == NULL)
            return ZKR_ENOMEM;
    }
    pthread_mutex_lock(&q->s->mu);
    if (q->taking) {
        rc = ZKR_ESTATE;
    } else {
        free(q->dead_path);
        q->dead_path = p;
        q->dead_max = max;
        p = NULL;
    }
    pthread_mutex_unlock(&q->s->mu);
    free(p);
    return rc;
}

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
static int make_node(zhandle_t *zh, const char *path, const char *data,
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
static int read_bucket(zkr_workq_t *q, zhandle_t *zh)
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
    if ((rc = make_node(zh, q->path, data, q->acl)) != ZOK)
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
    n = advance_ops(ops, bt, ql, next, t, 0, acl);
    rc = zoo_multi(zh, n, ops, res);
    if (next_exists(rc, res, n)) {
        n = advance_ops(ops, bt, ql, next, t, 1, acl);
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
    int rc = sync_path(zh, bt), hit = 0;

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
static void pause_ms(int ms)
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
static void receipts_to_cleanup(zkr_workq_t *q, char **v, int n, int64_t sid)
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
static int repair_tail(const struct ACL_vector *acl, zhandle_t *zh,
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
        bk = sorted_buckets(&v, &n);
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

static int put_run(zkr_workq_t *q, const void *data, size_t len, int level,
                   int carry, char *id, size_t idlen)
{
    zkr_session_t *s = q->s;
    char uuid[37], ql[300], bt[320], prefix[400], created[512], rdir[300],
        receipt[340];
    int64_t deadline = zkr__now_ms() +
                       (s->req_timeout > 0 ? s->req_timeout : 10000) +
                       (s->timeout > 0 ? s->timeout : 10000);
    int64_t sent_sid = 0;
    int rc, t = -1, bsize, unknown = 0, tries = 0;
    zhandle_t *zh;

    zkr__uuid(uuid);
    snprintf(ql, sizeof(ql), "%s/q%d", q->path, level);
    snprintf(rdir, sizeof(rdir), "%s/receipts", q->path);
    snprintf(receipt, sizeof(receipt), "%s/%s", rdir, uuid);
    created[0] = '\0';
    for (;;) {
        struct Stat st;
        zoo_op_t ops[3 + WQ_PIGGYBACK];
        zoo_op_result_t res[3 + WQ_PIGGYBACK];
        char *carried[WQ_PIGGYBACK];
        int nc = 0, f = -1;
        int64_t sid;
        const char *name;

        if (zkr__now_ms() >= deadline)
            return ZCONNECTIONLOSS;
        if (tries > WQ_REPAIRS)
            return rc; /* the level kept changing under us: nothing put */
        if ((rc = zkr__zh_get(s, &zh)) != 0) {
            if (rc != ZCONNECTIONLOSS)
                return rc;
            if ((rc = wait_connected(s, deadline, NULL)) != 0)
                return rc == ZKR_ETIMEDOUT ? ZCONNECTIONLOSS : rc;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        sid = s->sid;
        pthread_mutex_unlock(&s->mu);
        if (unknown) {
            /* Our answer was lost. The receipt, created in the same
             * transaction as the item and ephemeral, tells whether it
             * applied while the session lasts; after a sync, since the
             * server we reconnected to may lag behind the one that
             * applied it (engine/create.c, recover_synced). */
            char hit[WQ_NAME_MAX + 16];
            int h;

            if (sid == sent_sid) {
                rc = sync_path(zh, rdir);
                if (rc == ZOK || rc == ZNONODE)
                    rc = zoo_exists(zh, receipt, 0, &st);
                if (rc == ZNONODE) {
                    /* Not applied, unless another client deleted the
                     * receipt: the item, by its UUID, tells (B2). */
                    h = bucket_has(zh, bt, uuid, hit, sizeof(hit));
                    zkr__zh_put(s);
                    if (h < 0) {
                        if (!conn_error(h))
                            return h;
                        continue;
                    }
                    if (h == 1) {
                        snprintf(created, sizeof(created), "%s/%s", bt, hit);
                        goto done;
                    }
                    unknown = 0; /* not applied: put again */
                    t = -1;
                    continue;
                }
                if (rc != ZOK) {
                    zkr__zh_put(s);
                    if (!conn_error(rc))
                        return rc;
                    continue;
                }
            }
            /* Applied (receipt there), or unknown (the session changed and
             * the receipt went with it): the item by its UUID. */
            h = bucket_has(zh, bt, uuid, hit, sizeof(hit));
            if (h < 0) {
                zkr__zh_put(s);
                if (!conn_error(h))
                    return h;
                continue;
            }
            zkr__zh_put(s);
            if (h == 1) {
                snprintf(created, sizeof(created), "%s/%s", bt, hit);
            } else if (sid != sent_sid) {
                return ZCONNECTIONLOSS; /* may or may not have been put */
            } else {
                /* Applied and consumed already: its id without the
                 * sequence number (zkr.h). */
                snprintf(created, sizeof(created), "%s/i-%d-%s-", bt, carry,
                         uuid);
            }
            if (sid == sent_sid) {
                pthread_mutex_lock(&s->mu);
                receipt_confirmed(q, receipt, sid);
                pthread_mutex_unlock(&s->mu);
            }
            goto done;
        }
        if ((rc = ensure_level(q, zh, level)) != ZOK)
            goto fail;
        bsize = read_bucket(q, zh);
        if (t < 0) {
            if ((rc = zoo_exists(zh, ql, 0, &st)) != ZOK) {
                if (rc == ZNONODE) {
                    pthread_mutex_lock(&s->mu);
                    q->made[level] = 0; /* deleted by someone: again */
                    pthread_mutex_unlock(&s->mu);
                }
                goto fail;
            }
            t = st.version;
        }
        snprintf(bt, sizeof(bt), "%s/b%010d", ql, t);
        snprintf(prefix, sizeof(prefix), "%s/i-%d-%s-", bt, carry, uuid);
        zoo_check_op_init(&ops[0], bt, 0);
        zoo_create_op_init(&ops[1], prefix, data, (int)len, q->acl,
                           ZOO_PERSISTENT_SEQUENTIAL, created, sizeof(created));
        zoo_create_op_init(&ops[2], receipt, "", 0, q->acl, ZOO_EPHEMERAL, NULL,
                           0);
        /* The receipts confirmed so far ride along (ours, this session). */
        pthread_mutex_lock(&s->mu);
        if (q->rcpt_sid == sid)
            while (q->nrcpt > 0 && nc < WQ_PIGGYBACK)
                carried[nc++] = q->rcpt[--q->nrcpt];
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < nc; i++)
            zoo_delete_op_init(&ops[3 + i], carried[i], -1);
        /* A multi that failed as a whole (not sent, connection lost,
         * session expired) leaves the results as they were: read as ZOK,
         * they name no op. */
        memset(res, 0, sizeof(res));
        rc = zoo_multi(zh, 3 + nc, ops, res);
        if (rc == ZOK) {
            int32_t seq = 0;

            pthread_mutex_lock(&s->mu);
            for (int i = 0; i < nc; i++)
                free(carried[i]);
            receipt_confirmed(q, receipt, sid);
            pthread_mutex_unlock(&s->mu);
            name = strrchr(created, '-') + 1;
            if (zkr__parse_seq(name, &seq) == 0 && seq >= bsize)
                seal(zh, ql, t, q->acl);
            zkr__zh_put(s);
            goto done;
        }
        if (conn_error(rc)) {
            /* Applied or not, the carried deletes are the cleanup's. */
            pthread_mutex_lock(&s->mu);
            receipts_to_cleanup(q, carried, nc, sid);
            pthread_mutex_unlock(&s->mu);
            unknown = 1;
            sent_sid = sid;
            zkr__zh_put(s);
            continue;
        }
        for (int i = 0; i < 3 + nc && f < 0; i++)
            if (res[i].err != ZOK && res[i].err != ZRUNTIMEINCONSISTENCY)
                f = i;
        pthread_mutex_lock(&s->mu);
        if (f >= 3) {
            /* A receipt of ours deleted by someone: the rest are tried
             * by the cleanup; nothing was put. */
            receipts_to_cleanup(q, carried, nc, sid);
        } else {
            for (int i = 0; i < nc; i++) { /* not applied: kept */
                receipt_confirmed(q, carried[i], sid);
                free(carried[i]);
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (f >= 3) {
            zkr__zh_put(s);
            continue;
        }
        if (f == 2 && res[2].err == ZNONODE) {
            /* The receipts' container was reaped (empty): again. */
            rc = zoo_create(zh, rdir, "", 0, q->acl, ZOO_CONTAINER, NULL, 0);
            zkr__zh_put(s);
            if (rc != ZOK && rc != ZNODEEXISTS && !conn_error(rc))
                return rc;
            tries++;
            continue;
        }
        if ((f == 0 && (res[0].err == ZBADVERSION || res[0].err == ZNONODE)) ||
            (f == 1 && res[1].err == ZNOCHILDRENFOREPHEMERALS)) {
            /* Sealed (or deleted, so sealed): the tail moved, unless q<L>
             * still names this bucket: a foreign write; repaired. An
             * ephemeral node there is not a bucket: repaired as missing. */
            int was = t, r;

            rc = f == 1 ? ZNONODE : res[0].err;
            t = -1;
            if (zoo_exists(zh, ql, 0, &st) == ZOK && st.version == was) {
                r = repair_tail(q->acl, zh, ql, was, rc == ZBADVERSION);
                if (r != ZOK && r != ZBADVERSION && !conn_error(r)) {
                    zkr__zh_put(s);
                    return r;
                }
                pause_ms(ZKR__RETRY_MS);
            }
            zkr__zh_put(s);
            tries++;
            continue;
        }
    fail:
        zkr__zh_put(s);
        if (!conn_error(rc))
            return rc;
        t = -1;
    }
done:
    if (id != NULL) {
        const char *rel = created + strlen(q->path) + 1;

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

/* -------------------------------------------------------------- item */

static void item_deliver(zkr__contender_t *c, const zkr__event_t *ev)
{
    zkr_item_t *it = c->owner;

    if (ev->kind == ZKR__EV_STATE)
        ((zkr_item_listener_t)ev->fn)(it, (zkr_lock_state_t)ev->a, ev->data);
    else
        ((zkr_item_completion_t)ev->fn)(ev->a, it, ev->data);
}

/* The claim: an exclusive lock whose directory is the item node, never
 * created by us, released without a lock-delay record (the directory's
 * data is the payload). */
static const zkr__recipe_t claim_recipe = {
    "-lock-",        'x',          0,
    zkr__pred_mutex, item_deliver, ZKR__R_NO_PARENTS | ZKR__R_PLAIN_RELEASE,
    "workq",
};

static void item_dispose(void *owner)
{
    zkr_item_t *it = owner;

    free(it->qpath);
    free(it->id);
    free(it->ipath);
    free(it->name);
    free(it->data);
    free(it->tail_path);
    free(it->new_prefix);
    free(it);
}

/* An item handle for the item node ipath, not claimed yet. */
static zkr_item_t *item_make(zkr_workq_t *q, const char *ipath, int level,
                             const char *name, int carry, int v, int cversion,
                             const char *data, int len, int bucket)
{
    zkr_item_t *it = calloc(1, sizeof(*it));

    if (it == NULL)
        return NULL;
    it->qpath = zkr__strdup(q->path);
    it->ipath = zkr__strdup(ipath);
    it->id = zkr__strdup(ipath + strlen(q->path) + 1);
    it->name = zkr__strdup(name);
    it->data = malloc(len > 0 ? (size_t)len + 1 : 1);
    if (it->qpath == NULL || it->ipath == NULL || it->id == NULL ||
        it->name == NULL || it->data == NULL ||
        zkr__contender_init2(&it->c, q->s, &claim_recipe, it, ipath, q->path,
                             q->id, q->turn.acl_owned ? q->acl : NULL) != 0) {
        it->c.s = NULL;
        item_dispose(it);
        return NULL;
    }
    if (len > 0)
        memcpy(it->data, data, (size_t)len);
    it->data[len > 0 ? len : 0] = '\0';
    it->len = (size_t)(len > 0 ? len : 0);
    it->s = q->s;
    it->level = level;
    it->carry = carry;
    it->version = v + 1; /* written by the claim: exclusivity */
    it->deliveries = carry + (cversion + 1) / 2 + 1;
    it->bucket = bucket;
    if (zkr__set_precondition(&it->c, ipath, data, len > 0 ? len : 0, v) != 0) {
        zkr__contender_destroy(&it->c, item_dispose);
        return NULL;
    }
    return it;
}

void zkr_item_free(zkr_item_t *it)
{
    if (it == NULL)
        return;
    /* Held: the engine's release (a plain delete of the claim, retried
     * across suspension) gives it back as a nack to the front would. */
    zkr__contender_destroy(&it->c, item_dispose);
}

/* -------------------------------------------------------------- take */

static void wq_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if (type == ZOO_SESSION_EVENT || type == ZOO_NOTWATCHING_EVENT ||
        path == NULL)
        return;
    if ((s = zkr__session_lock_live(ctx)) == NULL)
        return;
    zkr__engine(s)->workq_events++;
    s->counters[ZKR_COUNTER_WATCH_EVENTS]++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Remembers a watch the take set, to remove it when the take ends. */
static void note_watch(zkr_workq_t *q, const char *path, int wtype)
{
    for (int i = 0; i < q->nw; i++)
        if (q->wtype[i] == wtype && strcmp(q->wpath[i], path) == 0)
            return;
    if (q->nw == q->capw) {
        int cap = q->capw > 0 ? 2 * q->capw : 8;
        char **p = realloc(q->wpath, sizeof(*p) * (size_t)cap);
        int *t;

        if (p == NULL)
            return;
        q->wpath = p;
        if ((t = realloc(q->wtype, sizeof(*t) * (size_t)cap)) == NULL)
            return;
        q->wtype = t;
        q->capw = cap;
    }
    if ((q->wpath[q->nw] = zkr__strdup(path)) != NULL)
        q->wtype[q->nw++] = wtype;
}

/* The take ends: its watches go (through the session's cleanup list,
 * which retries across disconnections). */
static void drop_watches(zkr_workq_t *q)
{
    zkr_session_t *s = q->s;

    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < q->nw; i++) {
        zkr__cleanup_add_watch(s, q->wpath[i], q->wtype[i], wq_watcher);
        free(q->wpath[i]);
    }
    q->nw = 0;
    pthread_mutex_unlock(&s->mu);
}

static int list(zkr_workq_t *q, zhandle_t *zh, const char *path, int watch,
                struct String_vector *v, struct Stat *st)
{
    struct Stat dummy;
    int rc;

    if (st == NULL)
        st = &dummy;
    if (watch) {
        rc = zoo_wget_children2(zh, path, wq_watcher, q->s, v, st);
        if (rc == ZOK)
            note_watch(q, path, ZWATCHTYPE_CHILD);
    } else {
        rc = zoo_get_children2(zh, path, 0, v, st);
    }
    return rc;
}

/* Moves an item that has been delivered dead_max times to the dead-letter
 * path: its copy and its deletion in one multi. */
static int dead_letter(zkr_workq_t *q, zhandle_t *zh, const char *ipath,
                       const char *name, const char *data, int len, int v)
{
    char dead[600];
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    int rc = ZOK;

    snprintf(dead, sizeof(dead), "%s/%s", q->dead_path, name);
    for (int tries = 0; tries < 3; tries++) {
        zoo_create_op_init(&ops[0], dead, data, len, q->acl, ZOO_PERSISTENT,
                           NULL, 0);
        zoo_delete_op_init(&ops[1], ipath, v);
        /* Results are only written by a multi the server answered: one
         * that failed as a whole (the connection lost: it may or may not
         * have applied) must not read as the dead node already there,
         * which deletes the item alone. */
        memset(res, 0, sizeof(res));
        rc = zoo_multi(zh, 2, ops, res);
        if (rc == ZOK)
            return ZOK;
        if (res[0].err == ZNODEEXISTS) /* moved before, answer lost */
            return zoo_delete(zh, ipath, v) == ZOK ? ZOK : ZOK;
        if (res[0].err == ZNONODE) {
            if ((rc = make_node(zh, q->dead_path, "", q->acl)) != ZOK)
                return rc;
            continue;
        }
        return conn_error(rc) ? rc : ZOK; /* changed meanwhile: rescan */
    }
    return rc;
}

/* Deletes path and what is below it (at most depth levels below): a
 * node another client left under an item. ZOK (gone), or a code. */
static int delete_tree(zhandle_t *zh, const char *path, int depth)
{
    struct String_vector v = {0, NULL};
    int rc = zoo_delete(zh, path, -1);

    if (rc != ZNOTEMPTY || depth <= 0)
        return rc == ZNONODE ? ZOK : rc;
    if ((rc = zoo_get_children(zh, path, 0, &v)) != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    for (int i = 0; i < v.count && rc == ZOK; i++) {
        /* Names of other clients' nodes can be of any length. */
        char *sub = zkr__join(path, v.data[i]);

        rc = sub != NULL ? delete_tree(zh, sub, depth - 1) : ZKR_ENOMEM;
        free(sub);
    }
    deallocate_String_vector(&v);
    if (rc == ZOK)
        rc = zoo_delete(zh, path, -1);
    return rc == ZNONODE ? ZOK : rc;
}

/* Is the item at ipath (with children) claimed? A claim is an ephemeral
 * contender node (engine name, ephemeral owner): anything else under an
 * item is not the queue's and would keep the item from ever being taken
 * or completed, so it is deleted (workq.md, section 3). 1 (claimed by a
 * live session, or a node there that we may not delete: skipped), 0 (not
 * claimed: nothing else left under it), or a connection error or
 * ZKR_ENOMEM (< 0). With watch, a child watch on the item is set. */
static int item_claimed(zkr_workq_t *q, zhandle_t *zh, const char *ipath,
                        int watch)
{
    for (int round = 0; round < 3; round++) {
        struct String_vector cv = {0, NULL};
        zkr__entry_t *e = NULL;
        int n = 0, rc, junk = 0;

        if (watch) {
            rc = zoo_wget_children(zh, ipath, wq_watcher, q->s, &cv);
            if (rc == ZOK)
                note_watch(q, ipath, ZWATCHTYPE_CHILD);
        } else {
            rc = zoo_get_children(zh, ipath, 0, &cv);
        }
        if (rc != ZOK)
            return rc == ZNONODE ? 1 : rc; /* gone: nothing to take */
        if ((rc = zkr__sort_children(&cv, &e, &n)) != 0) {
            deallocate_String_vector(&cv);
            return rc;
        }
        for (int i = 0; i < cv.count && rc == ZOK; i++) {
            char *cpath;
            int claim = 0;

            for (int k = 0; k < n && !claim; k++)
                claim = e[k].name == cv.data[i];
            if (claim)
                continue;
            /* Names of other clients' nodes can be of any length. */
            cpath = zkr__join(ipath, cv.data[i]);
            rc = cpath != NULL ? delete_tree(zh, cpath, 8) : ZKR_ENOMEM;
            free(cpath);
            junk = 1;
        }
        if (rc == ZOK && n > 0) {
            /* The first contender holds the item: a claim only if
             * ephemeral (a persistent node of that name is not one). */
            char *cpath = zkr__join(ipath, e[0].name);
            struct Stat cs;

            rc = cpath != NULL ? zoo_exists(zh, cpath, 0, &cs) : ZKR_ENOMEM;
            if (rc == ZOK && cs.ephemeralOwner != 0) {
                free(cpath);
                free(e);
                deallocate_String_vector(&cv);
                return 1;
            }
            if (rc == ZOK)
                rc = delete_tree(zh, cpath, 8);
            else if (rc == ZNONODE)
                rc = ZOK;
            free(cpath);
            junk = 1;
        }
        free(e);
        deallocate_String_vector(&cv);
        if (rc != ZOK) /* a node we may not delete (ZNOAUTH): skipped */
            return conn_error(rc) || rc == ZKR_ENOMEM ? rc : 1;
        if (!junk)
            return 0;
    }
    return 1; /* still changing: left for the next scan */
}

/* One scan by the consumer whose turn it is: the first available item,
 * claimed. 0 (*out set), WQ_AGAIN (something changed: scan again),
 * WQ_EMPTY, or a code. With watch, every place a new item can appear is
 * watched. */
static int scan(zkr_workq_t *q, int watch, char *buf, zkr_item_t **out)
{
    zkr_session_t *s = q->s;
    struct String_vector top = {0, NULL};
    zhandle_t *zh;
    int rc;

    if ((rc = zkr__zh_get(s, &zh)) != 0)
        return rc;
    rc = list(q, zh, q->path, watch, &top, NULL);
    if (rc == ZNONODE) {
        struct Stat st;

        if (watch && zoo_wexists(zh, q->path, wq_watcher, s, &st) == ZNONODE)
            note_watch(q, q->path, ZWATCHTYPE_DATA);
        zkr__zh_put(s);
        return WQ_EMPTY;
    }
    for (int level = 0; rc == ZOK && level < ZKR_WORKQ_LEVELS; level++) {
        char ql[300], name[8];
        struct String_vector bv = {0, NULL};
        struct Stat qst;
        int found = 0, nb = 0, *bk;
        int bsize = read_bucket(q, zh);

        snprintf(name, sizeof(name), "q%d", level);
        for (int i = 0; i < top.count && !found; i++)
            found = strcmp(top.data[i], name) == 0;
        if (!found)
            continue;
        snprintf(ql, sizeof(ql), "%s/%s", q->path, name);
        if ((rc = list(q, zh, ql, watch, &bv, &qst)) != ZOK) {
            rc = rc == ZNONODE ? ZOK : rc;
            continue;
        }
        /* q<L>'s version names the tail, where puts go: watched too, and
         * so is the tail itself below, as it need not be the last bucket
         * (another client may make one ahead of it). */
        if (watch && zoo_wexists(zh, ql, wq_watcher, s, &qst) == ZOK)
            note_watch(q, ql, ZWATCHTYPE_DATA);
        bk = sorted_buckets(&bv, &nb);
        deallocate_String_vector(&bv);
        if (bk == NULL) {
            rc = ZKR_ENOMEM;
            break;
        }
        for (int b = 0; rc == ZOK && b < nb; b++) {
            char bt[320];
            struct String_vector iv = {0, NULL};
            struct Stat bst;
            wq_entry_t *e;
            int ni = 0, last = b == nb - 1;
            int tail = last || bk[b] == qst.version;

            snprintf(bt, sizeof(bt), "%s/b%010d", ql, bk[b]);
            if ((rc = list(q, zh, bt, watch && tail, &iv, &bst)) != ZOK) {
                rc = rc == ZNONODE ? ZOK : rc;
                continue;
            }
            if ((e = sorted_items(&iv, &ni)) == NULL) {
                deallocate_String_vector(&iv);
                rc = ZKR_ENOMEM;
                break;
            }
            if (ni == 0 && bst.version >= 1 && !last)
                (void)zoo_delete(zh, bt, -1); /* empty and sealed */
            for (int i = 0; rc == ZOK && i < ni; i++) {
                char ipath[512];
                struct Stat st;
                int len = ZKR_WORKQ_DATA_MAX;
                zkr_item_t *it;

                snprintf(ipath, sizeof(ipath), "%s/%s", bt, e[i].name);
                if ((rc = zoo_exists(zh, ipath, 0, &st)) != ZOK) {
                    rc = rc == ZNONODE ? ZOK : rc;
                    continue;
                }
                if (st.numChildren > 0) {
                    /* Claimed: its claim going (a death, a nack) makes it
                     * available again (watched). Children that are not a
                     * live claim are deleted: then it is available. */
                    int r = item_claimed(q, zh, ipath, watch);

                    if (r != 0) {
                        rc = r == 1 ? ZOK : r;
                        continue;
                    }
                }
                if ((rc = zoo_get(zh, ipath, 0, buf, &len, &st)) != ZOK) {
                    rc = rc == ZNONODE ? ZOK : rc;
                    continue;
                }
                if (st.numChildren > 0)
                    continue;
                if (len < 0)
                    len = 0;
                /* Deliveries so far: each claim is one child created and
                 * deleted under the item (its cversion), so writes to the
                 * item's data by others do not count. */
                if (q->dead_max > 0 &&
                    e[i].carry + (st.cversion + 1) / 2 >= q->dead_max) {
                    rc = dead_letter(q, zh, ipath, e[i].name, buf, len,
                                     st.version);
                    continue;
                }
                /* The claim: the zh is given back first (the acquire
                 * waits, and may outlive this handle's connection). */
                it = item_make(q, ipath, level, e[i].name, e[i].carry,
                               st.version, st.cversion, buf, len, bsize);
                free(e);
                deallocate_String_vector(&iv);
                free(bk);
                deallocate_String_vector(&top);
                zkr__zh_put(s);
                if (it == NULL)
                    return ZKR_ENOMEM;
                rc = zkr__acquire(&it->c, 0, NULL, NULL);
                if (rc == 0) {
                    *out = it;
                    return 0;
                }
                zkr_item_free(it);
                /* ESTALE: another consumer (or a writer) got there;
                 * EBUSY: a foreign node in the item. */
                return rc == ZKR_ESTALE || rc == ZKR_EBUSY ? WQ_AGAIN : rc;
            }
            free(e);
            deallocate_String_vector(&iv);
        }
        free(bk);
    }
    deallocate_String_vector(&top);
    zkr__zh_put(s);
    return rc == ZOK ? WQ_EMPTY : rc;
}

static void turn_released(int rc, void *l, void *data)
{
    (void)rc;
    (void)l;
    (void)data;
}

/* Ends a take: watches removed, the turn given back (not awaited). */
static void take_end(zkr_workq_t *q)
{
    drop_watches(q);
    if (zkr__release(&q->turn, (void (*)(void))turn_released, NULL) ==
        ZKR_ESTATE)
        zkr__cancel(&q->turn);
}

static int take_run(zkr_workq_t *q, int timeout_ms, zkr_item_t **out)
{
    zkr_session_t *s = q->s;
    int64_t deadline = timeout_ms > 0 ? zkr__now_ms() + timeout_ms : -1;
    int rc, watch = 0, left;
    char *buf = malloc(ZKR_WORKQ_DATA_MAX);

    *out = NULL;
    if (buf == NULL)
        return ZKR_ENOMEM;
    /* The last take's turn may still be being given back. */
    pthread_mutex_lock(&s->mu);
    while (q->turn.phase == ZKR__P_RELEASING && !q->cancel)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    rc = q->cancel ? ZKR_ECANCELED : 0;
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    left = deadline < 0 ? timeout_ms : (int)(deadline - zkr__now_ms());
    rc = zkr__acquire(&q->turn,
                      timeout_ms <= 0 ? timeout_ms
                      : left > 0      ? left
                                      : 1,
                      NULL, NULL);
    if (rc != 0) {
        free(buf);
        return rc == ZKR_EBUSY ? ZKR_ETIMEDOUT : rc;
    }
    for (;;) {
        uint64_t gen;
        int connected;

        pthread_mutex_lock(&s->mu);
        zkr__enforce_deadline(s);
        if (q->cancel)
            rc = ZKR_ECANCELED;
        else if (q->turn.phase != ZKR__P_HELD)
            rc = ZKR_ELOST;
        else if (deadline >= 0 && zkr__now_ms() >= deadline)
            rc = ZKR_ETIMEDOUT;
        gen = zkr__engine(s)->workq_events;
        connected = s->connected;
        pthread_mutex_unlock(&s->mu);
        if (rc != 0)
            break;
        if (!connected) {
            rc = wait_connected(s, deadline, &q->cancel);
            if (rc == ZKR_ETIMEDOUT && deadline < 0)
                rc = 0;
            if (rc != 0)
                break;
            continue;
        }
        rc = scan(q, watch, buf, out);
        if (rc == 0)
            break;
        if (rc == WQ_AGAIN || conn_error(rc)) {
            rc = 0;
            continue;
        }
        if (rc != WQ_EMPTY)
            break;
        rc = 0;
        if (!watch) {
            watch = 1; /* again, watching: nothing can come unseen */
            continue;
        }
        if (timeout_ms == 0) {
            rc = ZKR_ETIMEDOUT;
            break;
        }
        pthread_mutex_lock(&s->mu);
        while (zkr__engine(s)->workq_events == gen && !q->cancel &&
               q->turn.phase == ZKR__P_HELD && s->connected) {
            int64_t until = zkr__now_ms() + 500;
            if (deadline >= 0 && deadline < until)
                until = deadline;
            zkr__wait(s, NULL, until);
            if (deadline >= 0 && zkr__now_ms() >= deadline)
                break;
        }
        pthread_mutex_unlock(&s->mu);
    }
    take_end(q);
    free(buf);
    return rc;
}

static int take_begin(zkr_workq_t *q, int timeout_ms)
{
    zkr_session_t *s = q->s;
    int rc = 0;

    if (timeout_ms < -1)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&s->mu);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (q->taking)
        rc = ZKR_EALREADY;
    else if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
        rc = ZKR_ELOST;
    else {
        q->taking = 1;
        q->cancel = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void take_finish(zkr_workq_t *q)
{
    pthread_mutex_lock(&q->s->mu);
    q->taking = 0;
    q->cancel = 0;
    pthread_cond_broadcast(&q->s->cv);
    pthread_mutex_unlock(&q->s->mu);
}

int zkr_workq_take(zkr_workq_t *q, int timeout_ms, zkr_item_t **out)
{
    int rc;

    if (q == NULL || out == NULL)
        return ZBADARGUMENTS;
    *out = NULL;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    if ((rc = take_begin(q, timeout_ms)) != 0)
        return rc;
    if (q->thr_joinable) {
        pthread_join(q->thr, NULL);
        q->thr_joinable = 0;
    }
    rc = take_run(q, timeout_ms, out);
    take_finish(q);
    return rc;
}

struct take_job {
    zkr_workq_t *q;
    int timeout_ms;
    zkr_take_completion_t cb;
    void *cbdata;
    zkr_item_t *it;
};

static void take_deliver(const zkr__event_t *ev)
{
    struct take_job *j = ev->data;

    j->cb(ev->a, j->it, j->cbdata);
    free(j);
}

static void *take_thread(void *arg)
{
    struct take_job *j = arg;
    zkr_workq_t *q = j->q;
    zkr_session_t *s = q->s;
    int rc = take_run(q, j->timeout_ms, &j->it);

    pthread_mutex_lock(&s->mu);
    q->taking = 0;
    q->cancel = 0;
    if (zkr__post_call(s, take_deliver, rc, NULL, j) != 0) {
        zkr_item_t *it = j->it;
        free(j);
        pthread_mutex_unlock(&s->mu);
        zkr_item_free(it); /* nobody can be told: give it back */
        pthread_mutex_lock(&s->mu);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int zkr_workq_take_async(zkr_workq_t *q, int timeout_ms,
                         zkr_take_completion_t cb, void *data)
{
    struct take_job *j;
    int rc;

    if (q == NULL || cb == NULL)
        return ZBADARGUMENTS;
    if ((rc = take_begin(q, timeout_ms)) != 0)
        return rc;
    /* The last asynchronous take's thread has ended or is ending. */
    if (q->thr_joinable) {
        pthread_join(q->thr, NULL);
        q->thr_joinable = 0;
    }
    if ((j = calloc(1, sizeof(*j))) == NULL) {
        take_finish(q);
        return ZKR_ENOMEM;
    }
    j->q = q;
    j->timeout_ms = timeout_ms;
    j->cb = cb;
    j->cbdata = data;
    /* The thread and its flag are set under the mutex: the take may end
     * and its completion free q (zkr_workq_free reads them under it)
     * before pthread_create returns here; q is not touched after. */
    pthread_mutex_lock(&q->s->mu);
    if (pthread_create(&q->thr, NULL, take_thread, j) != 0) {
        pthread_mutex_unlock(&q->s->mu);
        free(j);
        take_finish(q);
        return ZKR_ESYS;
    }
    q->thr_joinable = 1;
    pthread_cond_broadcast(&q->s->cv); /* zkr_workq_free may wait for it */
    pthread_mutex_unlock(&q->s->mu);
    return 0;
}

/* Ends the pending take (mutex held; 0 or ZKR_ESTATE). The take may be
 * about to start waiting for its turn: until its acquire is under way (or
 * the turn held, or the take over) the turn cannot be canceled, so this
 * waits for that (briefly: no request stands between). */
static int take_cancel(zkr_workq_t *q)
{
    zkr_session_t *s = q->s;

    if (!q->taking)
        return ZKR_ESTATE;
    q->cancel = 1;
    pthread_cond_broadcast(&s->cv);
    for (int i = 0;
         i < 100 && q->taking && q->turn.phase != ZKR__P_HELD &&
         q->turn.pub != ZKR_LOCK_ACQUIRING && q->turn.pub != ZKR_LOCK_DELAYED;
         i++)
        zkr__wait(s, NULL, zkr__now_ms() + 10);
    return 0;
}

int zkr_workq_cancel(zkr_workq_t *q)
{
    int rc;

    if (q == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&q->s->mu);
    rc = take_cancel(q);
    pthread_mutex_unlock(&q->s->mu);
    if (rc == 0)
        zkr__cancel(&q->turn); /* a wait for the turn ends now */
    return rc;
}

/* ------------------------------------------------------- len, items */

int zkr_workq_len(zkr_workq_t *q, int64_t *count)
{
    zhandle_t *zh;
    int rc;

    if (q == NULL || count == NULL)
        return ZBADARGUMENTS;
    *count = 0;
    if ((rc = zkr__read_begin(q->s, q->path, &zh)) != 0)
        return rc;
    for (int level = 0; rc == ZOK && level < ZKR_WORKQ_LEVELS; level++) {
        char ql[300];
        int nb = 0, *bk;

        snprintf(ql, sizeof(ql), "%s/q%d", q->path, level);
        if ((rc = level_buckets(zh, ql, &bk, &nb)) != ZOK)
            break;
        for (int b = 0; rc == ZOK && b < nb; b++) {
            char bt[320];
            struct Stat st;

            snprintf(bt, sizeof(bt), "%s/b%010d", ql, bk[b]);
            rc = zoo_exists(zh, bt, 0, &st);
            if (rc == ZOK)
                *count += st.numChildren;
            else if (rc == ZNONODE)
                rc = ZOK;
        }
        free(bk);
    }
    zkr__zh_put(q->s);
    return rc;
}

void zkr_item_infos_free(zkr_item_info_t *v, int count)
{
    if (v == NULL)
        return;
    for (int i = 0; i < count; i++) {
        free(v[i].id);
        free(v[i].claim_id);
    }
    free(v);
}

/* Fills one info; 1, 0 (gone), or a code < 0. */
static int item_info(zkr_workq_t *q, zhandle_t *zh, const char *ipath,
                     int level, int carry, zkr_item_info_t *out)
{
    struct Stat st;
    int rc = zoo_exists(zh, ipath, 0, &st);

    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return -rc;
    memset(out, 0, sizeof(*out));
    out->id = zkr__strdup(ipath + strlen(q->path) + 1);
    if (out->id == NULL)
        return ZKR_ENOMEM;
    out->level = level;
    out->deliveries = carry + (st.cversion + 1) / 2; /* a claim now counts */
    out->ctime_ms = st.ctime;
    out->size = st.dataLength;
    if (st.numChildren > 0) {
        struct String_vector cv = {0, NULL};
        zkr__entry_t *e = NULL;
        int n = 0;

        if (zoo_get_children(zh, ipath, 0, &cv) == ZOK &&
            zkr__sort_children(&cv, &e, &n) == 0 && n > 0) {
            char *cpath = zkr__join(ipath, e[0].name), buf[ZKR_ID_MAX + 1];
            int len = ZKR_ID_MAX;
            struct Stat cs;

            /* A claim is ephemeral: a node of another client named as
             * one is not (the next scan deletes it, see item_claimed). */
            if (cpath != NULL && zoo_get(zh, cpath, 0, buf, &len, &cs) == ZOK &&
                cs.ephemeralOwner != 0) {
                buf[len > 0 ? len : 0] = '\0';
                out->claimed = 1;
                out->claim_sid = cs.ephemeralOwner;
                out->claim_id = zkr__strdup(buf);
            }
            free(cpath);
        }
        free(e);
        deallocate_String_vector(&cv);
    }
    return 1;
}

int zkr_workq_items(zkr_workq_t *q, int max, zkr_item_info_t **out, int *count)
{
    zkr_item_info_t *v = NULL;
    zhandle_t *zh;
    int rc, n = 0;

    if (q == NULL || out == NULL || count == NULL || max < 0)
        return ZBADARGUMENTS;
    *out = NULL;
    *count = 0;
    if (max == 0)
        return 0;
    if ((v = calloc((size_t)max, sizeof(*v))) == NULL)
        return ZKR_ENOMEM;
    if ((rc = zkr__read_begin(q->s, q->path, &zh)) != 0) {
        free(v);
        return rc;
    }
    for (int level = 0; rc == ZOK && level < ZKR_WORKQ_LEVELS && n < max;
         level++) {
        char ql[300];
        int nb = 0, *bk;

        snprintf(ql, sizeof(ql), "%s/q%d", q->path, level);
        if ((rc = level_buckets(zh, ql, &bk, &nb)) != ZOK)
            break;
        for (int b = 0; rc == ZOK && b < nb && n < max; b++) {
            char bt[320];
            struct String_vector iv = {0, NULL};
            wq_entry_t *e;
            int ni = 0;

            snprintf(bt, sizeof(bt), "%s/b%010d", ql, bk[b]);
            if ((rc = zoo_get_children(zh, bt, 0, &iv)) != ZOK) {
                rc = rc == ZNONODE ? ZOK : rc;
                continue;
            }
            if ((e = sorted_items(&iv, &ni)) == NULL)
                rc = ZKR_ENOMEM;
            for (int i = 0; rc == ZOK && i < ni && n < max; i++) {
                char ipath[512];
                int r;

                snprintf(ipath, sizeof(ipath), "%s/%s", bt, e[i].name);
                r = item_info(q, zh, ipath, level, e[i].carry, &v[n]);
                if (r < 0)
                    rc = -r;
                else
                    n += r;
            }
            free(e);
            deallocate_String_vector(&iv);
        }
        free(bk);
    }
    zkr__zh_put(q->s);
    if (rc != ZOK || n == 0) {
        zkr_item_infos_free(v, n);
        return rc;
    }
    *out = v;
    *count = n;
    return 0;
}

/* ------------------------------------------------------ item access */

const void *zkr_item_data(const zkr_item_t *it, size_t *len)
{
    if (len != NULL)
        *len = it != NULL ? it->len : 0;
    return it != NULL ? it->data : NULL;
}

const char *zkr_item_id(const zkr_item_t *it)
{
    return it != NULL ? it->id : "";
}

int zkr_item_deliveries(const zkr_item_t *it)
{
    return it != NULL ? it->deliveries : 0;
}

int zkr_item_level(const zkr_item_t *it)
{
    return it != NULL ? it->level : -1;
}

zkr_lock_state_t zkr_item_state(zkr_item_t *it)
{
    zkr_lock_state_t st;

    if (it == NULL)
        return ZKR_LOCK_IDLE;
    zkr__lock_fresh(it->s);
    st = it->c.pub;
    zkr__contender_read(&it->c);
    pthread_mutex_unlock(&it->s->mu);
    return st;
}

int zkr_item_token(zkr_item_t *it, int64_t *token)
{
    int rc = 0;

    if (it == NULL || token == NULL)
        return ZBADARGUMENTS;
    zkr__lock_fresh(it->s);
    if (it->c.phase == ZKR__P_HELD || it->c.phase == ZKR__P_COMMITTING)
        *token = it->c.czxid;
    else
        rc = ZKR_ENOTHELD;
    pthread_mutex_unlock(&it->s->mu);
    return rc;
}

int zkr_item_sequencer(zkr_item_t *it, zkr_sequencer_t *out)
{
    int rc;

    if (it == NULL || out == NULL)
        return ZBADARGUMENTS;
    zkr__lock_fresh(it->s);
    rc = zkr__sequencer(&it->c, out);
    pthread_mutex_unlock(&it->s->mu);
    return rc;
}

int64_t zkr_item_valid_ms(zkr_item_t *it)
{
    return it != NULL ? zkr__valid_ms(&it->c) : 0;
}

int zkr_item_fd(zkr_item_t *it)
{
    return it != NULL ? zkr__contender_fd(&it->c) : -1;
}

int zkr_item_set_listener(zkr_item_t *it, zkr_item_listener_t fn, void *data)
{
    if (it == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&it->s->mu);
    it->c.lis_fn = (void (*)(void))fn;
    it->c.lis_data = data;
    pthread_mutex_unlock(&it->s->mu);
    return 0;
}

/* --------------------------------------------------------- ack/nack */

static void item_done(zkr__commit_t *cm, int rc);

/* The commit's receipt (workq.md): an ephemeral node created by the
 * multi, last op; after a lost answer the engine reads it (after a sync)
 * to tell an applied commit from one to send again. */
static void add_receipt(zkr_item_t *it)
{
    zoo_create_op_init(&it->ops[it->cm.count], it->receipt, "", 0, &it->c.acl,
                       ZOO_EPHEMERAL, NULL, 0);
    it->cm.receipt = it->receipt;
    it->cm.receipt_idx = it->cm.count++;
}

/* The ops of a nack to the back, for tail bucket it->tail. */
static int build_back(zkr_item_t *it)
{
    char tail[320], prefix[420];

    snprintf(tail, sizeof(tail), "%s/q%d/b%010d", it->qpath, it->level,
             it->tail);
    if (it->new_prefix == NULL) {
        char uuid[37];
        zkr__uuid(uuid);
        snprintf(prefix, sizeof(prefix), "i-%d-%s-", it->deliveries, uuid);
        if ((it->new_prefix = zkr__strdup(prefix)) == NULL)
            return ZKR_ENOMEM;
    }
    snprintf(prefix, sizeof(prefix), "%s/%s", tail, it->new_prefix);
    free(it->tail_path);
    it->tail_path = zkr__strdup(tail);
    if (it->tail_path == NULL)
        return ZKR_ENOMEM;
    /* The create's path must outlive the call: kept in created's tail. */
    snprintf(it->created + 512, 512, "%s", prefix);
    zoo_check_op_init(&it->ops[0], it->ipath, it->version);
    zoo_delete_op_init(&it->ops[1], it->c.node, -1);
    zoo_delete_op_init(&it->ops[2], it->ipath, it->version);
    zoo_check_op_init(&it->ops[3], it->tail_path, 0);
    zoo_create_op_init(&it->ops[4], it->created + 512, it->data, (int)it->len,
                       &it->c.acl, ZOO_PERSISTENT_SEQUENTIAL, it->created, 512);
    it->cm.count = 5;
    it->cm.self = 1;
    it->cm.keep = 3;
    it->cm.probe = it->ipath;
    it->cm.probe_version = -1;
    add_receipt(it);
    return 0;
}

static void tail_done(int rc, const struct Stat *stat, const void *data);

/* Mutex held: reads q<L>, whose version names the tail bucket. */
static int tail_lookup(zkr_item_t *it)
{
    zkr_session_t *s = it->s;
    zkr__op_t *op = zkr__cop_new(&it->c);
    char ql[300];

    snprintf(ql, sizeof(ql), "%s/q%d", it->qpath, it->level);
    if (op != NULL && zoo_aexists(s->zh, ql, 0, tail_done, op) == ZOK)
        return 0;
    if (op != NULL)
        zkr__op_cancel(op);
    return op != NULL ? ZCONNECTIONLOSS : ZKR_ENOMEM;
}

struct repair_job {
    zkr_item_t *it;
    zkr__op_t *op; /* counts as the item's call in flight: no free ends it */
    int t, sealed;
};

/* q<L> still names the bucket our nack failed on: the tail repaired as a
 * put repairs it (repair_tail: synchronous calls, so on a thread of its
 * own, after a pause), then the nack sent again. tail_tries, counted by
 * item_done and by repair_start, bounds the rounds (WQ_REPAIRS). */
static void *repair_thread(void *arg)
{
    struct repair_job *j = arg;
    zkr_item_t *it = j->it;
    zkr_session_t *s = it->s;
    char ql[300];
    zhandle_t *zh;
    int r;

    snprintf(ql, sizeof(ql), "%s/q%d", it->qpath, it->level);
    pause_ms(ZKR__RETRY_MS);
    if ((r = zkr__zh_get(s, &zh)) == 0) {
        r = repair_tail(&it->c.acl, zh, ql, j->t, j->sealed);
        zkr__zh_put(s);
    }
    (void)zkr__op_begin(j->op, r);
    if (it->c.dispose != NULL) {
        r = ZKR_ECANCELED; /* freed meanwhile */
    } else if (r == 0 && !j->sealed) {
        /* b<t> is there and q<L> named it then: the same tail (if it was
         * sealed since, the commit's check says so). */
        r = build_back(it);
        if (r == 0)
            r = zkr__commit(&it->c, &it->cm);
    } else if (r == 0 || r == ZBADVERSION || conn_error(r)) {
        r = tail_lookup(it); /* q<L> moved on (by us or not): read again */
    }
    if (r != 0) {
        it->where = -2; /* report r as is */
        item_done(&it->cm, conn_error(r) ? ZCONNECTIONLOSS : r);
    }
    zkr__op_end(j->op);
    free(j);
    return NULL;
}

/* Mutex held: starts repair_thread for bucket t. */
static int repair_start(zkr_item_t *it, int t, int sealed)
{
    struct repair_job *j = calloc(1, sizeof(*j));
    pthread_attr_t a;
    pthread_t thr;
    int rc;

    if (it->tail_tries++ >= WQ_REPAIRS) {
        free(j);
        return it->tail_rc; /* the level keeps changing under us */
    }
    if (j == NULL || (j->op = zkr__cop_new(&it->c)) == NULL) {
        free(j);
        return ZKR_ENOMEM;
    }
    j->it = it;
    j->t = t;
    j->sealed = sealed;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thr, &a, repair_thread, j);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        zkr__op_cancel(j->op);
        free(j);
        return ZKR_ESYS;
    }
    return 0;
}

/* Nack to the back found its tail sealed or gone: q<L>'s version names
 * the tail now; the same one again means a foreign write (F3): repaired. */
static void tail_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr_item_t *it = zkr__c(op->m)->owner;
    int r;

    (void)s;
    if (it->c.dispose != NULL) {
        r = ZKR_ECANCELED; /* freed meanwhile */
    } else if (rc == ZOK && stat->version == it->tail) {
        r = repair_start(it, it->tail, it->tail_rc == ZBADVERSION);
    } else if (rc == ZOK) {
        it->tail = stat->version;
        r = build_back(it);
        if (r == 0)
            r = zkr__commit(&it->c, &it->cm);
    } else {
        r = conn_error(rc) ? ZCONNECTIONLOSS : rc;
    }
    if (r != 0) {
        it->where = -2; /* report r as is */
        item_done(&it->cm, r);
    }
    zkr__op_end(op);
}

struct seal_job {
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
    char bt[320], ql[300], next[320];
    int t, adopt;
};

/* The nack's seal (advance, asynchronously): b<t+1> made by another
 * client ahead of the tail is adopted, as a put's seal adopts it. */
static void seal_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct seal_job *j = op->ctx;
    zkr__op_t *op2;

    op->ctx = NULL;
    if (!j->adopt && next_exists(rc, j->res, 3) && !s->closing &&
        s->zh != NULL && (op2 = zkr__op_new(s, NULL)) != NULL) {
        j->adopt = 1;
        (void)advance_ops(j->ops, j->bt, j->ql, j->next, j->t, 1, NULL);
        op2->ctx = j;
        if (zoo_amulti(s->zh, 3, j->ops, j->res, seal_done, op2) == ZOK)
            j = NULL;
        else
            zkr__op_cancel(op2);
    }
    free(j);
    zkr__op_end(op);
}

/* The receipts' container is there again: the commit, again. */
static void rdir_done(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr_item_t *it = zkr__c(op->m)->owner;
    int r = rc == ZOK || rc == ZNODEEXISTS ? 0
            : conn_error(rc)               ? ZCONNECTIONLOSS
                                           : rc;

    (void)s;
    (void)value;
    if (r == 0)
        r = zkr__commit(&it->c, &it->cm);
    if (r != 0) {
        it->where = -2; /* report r as is */
        item_done(&it->cm, r);
    }
    zkr__op_end(op);
}

/* Mutex held: the engine's answer to our ack or nack. */
static void item_done(zkr__commit_t *cm, int rc)
{
    zkr_item_t *it = (zkr_item_t *)((char *)cm - offsetof(zkr_item_t, cm));
    zkr_session_t *s = it->s;

    if (cm->receipt != NULL && cm->failed == cm->receipt_idx && rc == ZNONODE &&
        !it->rdir_made) {
        /* The receipts' container was reaped (empty): made again, and the
         * same commit sent again (nothing applied, the claim kept). */
        zkr__op_t *op = zkr__cop_new(&it->c);

        it->rdir_made = 1;
        if (op != NULL && zoo_acreate(s->zh, it->rdir, "", 0, &it->c.acl,
                                      ZOO_CONTAINER, rdir_done, op) == ZOK)
            return;
        if (op != NULL)
            zkr__op_cancel(op);
        rc = ZKR_ENOMEM;
    }
    if ((rc == 0 || rc == ZKR_ECANCELED) && cm->receipt != NULL)
        /* Proven, or freed while the multi may still apply (B7): the
         * receipt goes with the session's cleanup, whose delete follows
         * the multi on the session's connection. */
        (void)zkr__cleanup_add(s, it->receipt, NULL, NULL, s->sid, NULL);
    if (it->where == ZKR_NACK_BACK &&
        ((cm->failed == 3 && (rc == ZBADVERSION || rc == ZNONODE)) ||
         (cm->failed == 4 && rc == ZNOCHILDRENFOREPHEMERALS)) &&
        it->tail_tries++ < WQ_REPAIRS) {
        /* The tail we aimed at is sealed or gone (nothing applied, the
         * claim kept): q<L> names the next one, or is repaired (B1). An
         * ephemeral node there is not a bucket: repaired as missing. */
        it->tail_rc = rc == ZNOCHILDRENFOREPHEMERALS ? ZNONODE : rc;
        if ((rc = tail_lookup(it)) == 0)
            return;
    }
    if (rc == 0 && it->where == ZKR_NACK_BACK) {
        const char *dash = strrchr(it->created, '-');
        int32_t seq = 0;
        struct seal_job *j;
        zkr__op_t *op;

        if (dash != NULL && zkr__parse_seq(dash + 1, &seq) == 0 &&
            seq >= it->bucket && (j = calloc(1, sizeof(*j))) != NULL) {
            snprintf(j->ql, sizeof(j->ql), "%s/q%d", it->qpath, it->level);
            snprintf(j->bt, sizeof(j->bt), "%s/b%010d", j->ql, it->tail);
            snprintf(j->next, sizeof(j->next), "%s/b%010d", j->ql,
                     it->tail + 1);
            j->t = it->tail;
            (void)advance_ops(j->ops, j->bt, j->ql, j->next, j->t, 0,
                              &it->c.acl);
            if ((op = zkr__op_new(s, NULL)) == NULL) {
                free(j);
            } else {
                op->ctx = j;
                if (zoo_amulti(s->zh, 3, j->ops, j->res, seal_done, op) !=
                    ZOK) {
                    op->ctx = NULL;
                    zkr__op_cancel(op);
                    free(j);
                }
            }
        }
    }
    it->busy = 0;
    if (rc == 0 || rc == ZKR_EINDOUBT)
        it->finished = 1; /* in doubt: not to be sent again either */
    if (it->sync) {
        it->rc = rc;
        it->done = 1;
        pthread_cond_broadcast(&s->cv);
    } else if (it->cb != NULL) {
        zkr__post(s, ZKR__EV_RELEASED, rc, &it->c.m, (void (*)(void))it->cb,
                  it->cbdata);
    }
    it->cb = NULL;
}

static int item_commit(zkr_item_t *it, int where, zkr_item_completion_t cb,
                       void *data, int sync)
{
    zkr_session_t *s;
    int rc = 0;

    if (it == NULL || (!sync && cb == NULL) ||
        (where != -1 && where != ZKR_NACK_FRONT && where != ZKR_NACK_BACK))
        return ZBADARGUMENTS;
    if (sync && zkr__in_callback())
        return ZKR_EDEADLK;
    s = it->s;
    zkr__lock_fresh(s);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (it->finished || it->busy)
        rc = ZKR_ESTATE;
    if (rc == 0 && it->c.phase == ZKR__P_HELD && it->c.node != NULL) {
        memset(&it->cm, 0, sizeof(it->cm));
        it->cm.ops = it->ops;
        it->cm.results = it->res;
        it->cm.done = item_done;
        it->cm.probe = it->ipath;
        {
            char uuid[37];

            zkr__uuid(uuid);
            snprintf(it->rdir, sizeof(it->rdir), "%s/receipts", it->qpath);
            snprintf(it->receipt, sizeof(it->receipt), "%s/%s", it->rdir, uuid);
        }
        if (where == -1) { /* ack */
            /* Our claim node proves the claim (workq.md, section 4): the
             * item's data version is not checked, as writes to it by
             * others do not count. */
            zoo_delete_op_init(&it->ops[0], it->c.node, -1);
            zoo_delete_op_init(&it->ops[1], it->ipath, -1);
            it->cm.count = 2;
            it->cm.self = 0;
            it->cm.keep = -1;
            it->cm.probe_version = -1;
            add_receipt(it);
        } else if (where == ZKR_NACK_FRONT) {
            zoo_check_op_init(&it->ops[0], it->ipath, -1);
            zoo_delete_op_init(&it->ops[1], it->c.node, -1);
            it->cm.count = 2;
            it->cm.self = 1;
            it->cm.keep = -1;
            it->cm.probe_version = it->version;
            add_receipt(it);
        } else {
            /* The item's own bucket first: a later one if it is sealed. */
            it->tail = atoi(strchr(it->id, '/') + 2);
            rc = build_back(it);
        }
    }
    if (rc == 0) {
        it->where = where;
        it->sync = sync;
        it->done = 0;
        it->cb = cb;
        it->cbdata = data;
        it->busy = 1;
        it->rdir_made = 0;
        it->tail_tries = 0;
        rc = zkr__commit(&it->c, &it->cm);
        if (rc != 0)
            it->busy = 0;
    }
    if (rc == 0 && sync) {
        /* Counted: a free from another thread waits for this wait to
         * end before the item goes. */
        it->c.sync_waiters++;
        while (!it->done)
            zkr__wait(s, &it->done, -1);
        rc = it->rc;
        it->sync = 0;
        it->c.sync_waiters--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr_item_ack(zkr_item_t *it)
{
    return item_commit(it, -1, NULL, NULL, 1);
}

int zkr_item_nack(zkr_item_t *it, zkr_nack_where_t where)
{
    return item_commit(it, (int)where, NULL, NULL, 1);
}

int zkr_item_ack_async(zkr_item_t *it, zkr_item_completion_t cb, void *data)
{
    return item_commit(it, -1, cb, data, 0);
}

int zkr_item_nack_async(zkr_item_t *it, zkr_nack_where_t where,
                        zkr_item_completion_t cb, void *data)
{
    return item_commit(it, (int)where, cb, data, 0);
}
