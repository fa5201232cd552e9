/* A taken item: its data and delivery count, ack and nack (engine
 * commits), and the receipts that prove an ack whose answer was lost
 * (docs/design/workq.md). */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workq.h"

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
    .marker = "-lock-",
    .mode = 'x',
    .pred = zkr__pred_mutex,
    .deliver = item_deliver,
    .flags = ZKR__R_NO_PARENTS | ZKR__R_PLAIN_RELEASE,
    .kind = "workq",
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

/* An item handle for the item node ipath, not claimed yet (mutex
 * held). */
zkr_item_t *zkr__wq_item_make(zkr_workq_t *q, const char *ipath, int level,
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
        (void)zkr__contender_try_destroy(&it->c, item_dispose); /* new: 0 */
        return NULL;
    }
    return it;
}

int zkr__wq_item_try_free(zkr_item_t *it)
{
    return zkr__contender_try_destroy(&it->c, item_dispose);
}

void zkr_item_free(zkr_item_t *it)
{
    if (it == NULL)
        return;
    /* Held: the engine's release (a plain delete of the claim, retried
     * across suspension) gives it back as a nack to the front would. */
    if (it->handed) {
        pthread_mutex_lock(&it->s->mu);
        if (!it->finished)
            zkr__wq_gave_back(it->s, it->qpath);
        pthread_mutex_unlock(&it->s->mu);
    }
    zkr__contender_destroy(&it->c, item_dispose);
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

/* The repair of the tail our nack failed on (it->rp) ended with rc. */
static void item_repaired(wq_repair_t *rp, int rc)
{
    zkr_item_t *it = (zkr_item_t *)((char *)rp - offsetof(zkr_item_t, rp));
    int r = rc;

    if (it->c.dispose != NULL) {
        r = ZKR_ECANCELED; /* freed meanwhile */
    } else if (rc == 0 && rp->mode == WQ_REPAIR_MISSING) {
        /* b<t> is there and q<L> named it then: the same tail (if it was
         * sealed since, the commit's check says so). */
        r = build_back(it);
        if (r == 0)
            r = zkr__commit(&it->c, &it->cm);
    } else if (rc == 0 || rc == ZBADVERSION || zkr__call_conn_error(rc) ||
               rc == ZCLOSING || rc == ZSESSIONEXPIRED) {
        /* q<L> moved on (by us or not), or the answer was lost (ZCLOSING:
         * our handle closed with the request in flight): read again; not
         * connected, that ends the nack with ZCONNECTIONLOSS. */
        r = tail_lookup(it);
    }
    if (r != 0) {
        it->where = -2; /* report r as is */
        item_done(&it->cm, zkr__call_conn_error(r) ? ZCONNECTIONLOSS : r);
    }
}

/* Mutex held: q<L> still names the bucket t our nack failed on: the tail
 * repaired as a put repairs it (zkr__wq_repair), then the nack sent
 * again. tail_tries, counted by item_done and here, bounds the rounds
 * (WQ_REPAIRS). Its requests count as the item's: no free ends it. */
static int repair_start(zkr_item_t *it, int t, int sealed)
{
    char ql[300];

    if (it->tail_tries++ >= WQ_REPAIRS)
        return it->tail_rc; /* the level keeps changing under us */
    snprintf(ql, sizeof(ql), "%s/q%d", it->qpath, it->level);
    it->rp.k.s = it->s;
    it->rp.k.m = &it->c.m;
    it->rp.acl = &it->c.acl;
    it->rp.done = item_repaired;
    return zkr__wq_repair(&it->rp, ql, t,
                          sealed ? WQ_REPAIR_SEALED : WQ_REPAIR_MISSING);
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
        r = zkr__call_conn_error(rc) ? ZCONNECTIONLOSS : rc;
    }
    if (r != 0) {
        it->where = -2; /* report r as is */
        item_done(&it->cm, r);
    }
    zkr__op_end(op);
}

/* The nack's seal of a full bucket ended: nothing to tell. */
static void seal_free(wq_repair_t *r, int rc)
{
    (void)rc;
    free(r);
}

/* The receipts' container is there again: the commit, again. */
static void rdir_done(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr_item_t *it = zkr__c(op->m)->owner;
    int r = rc == ZOK || rc == ZNODEEXISTS ? 0
            : zkr__call_conn_error(rc)     ? ZCONNECTIONLOSS
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
    if (rc == 0 && cm->receipt != NULL)
        /* Proven: deleted later, with others (workq.md, 4). */
        zkr__wq_receipt_done(s, it->qpath, it->receipt);
    else if (rc == ZKR_ECANCELED && cm->receipt != NULL)
        /* Freed while the multi may still apply (B7): the receipt goes
         * with the session's cleanup, whose delete follows the multi on
         * the session's connection. */
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
        wq_repair_t *r;
        char ql[300];

        /* A full bucket sealed (best effort, as a put seals it): the seal
         * outlives the item, so it counts for nobody. */
        if (dash != NULL && zkr__parse_seq(dash + 1, &seq) == 0 &&
            seq >= it->bucket && (r = calloc(1, sizeof(*r))) != NULL) {
            snprintf(ql, sizeof(ql), "%s/q%d", it->qpath, it->level);
            r->k.s = s;
            r->acl = &it->c.acl; /* for the first request only */
            r->done = seal_free;
            if (zkr__wq_repair(r, ql, it->tail, WQ_SEAL) != 0)
                free(r);
        }
    }
    it->busy = 0;
    if (rc == 0 || rc == ZKR_EINDOUBT)
        it->finished = 1; /* in doubt: not to be sent again either */
    if (rc != 0 || it->where == ZKR_NACK_FRONT)
        zkr__wq_gave_back(s, it->qpath); /* maybe back where it was */
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
