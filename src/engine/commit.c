/* A release by the caller's multi (zkr__commit): the delete of the
 * contender's node and the recipe's own ops, applied together or not at
 * all. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* ----------------------------------------------------------- commit */

/* A release by a caller's multi that holds the delete of our own node
 * besides the recipe's own ops (zkr__commit_t): the multi applies
 * only while our node exists, so it commits only while the grant is ours.
 * Its answer lost with the connection, an exists() on our node tells
 * (same session): still there, not applied (sent again); gone, the
 * caller's probe path tells. */

/* Hands our node to the cleanup list (a plain delete; short of memory,
 * with the entry reserved before the create). */
void zkr__hand_over(zkr__contender_t *c)
{
    if (c->node == NULL)
        return;
    if (zkr__release_to_cleanup(c, NULL) != 0 && c->reserve != NULL) {
        zkr__cleanup_commit(c->s, c->reserve, c->node, c->node_sid, NULL);
        c->reserve = NULL;
    }
}

/* The session went while committing: if our multi may have applied (its
 * answer lost, or awaited still), nothing can tell now (the receipt and
 * our node went with the session): ZKR_EINDOUBT, never ZKR_ESTALE, which
 * says nothing changed. */
int zkr__commit_gone_rc(const zkr__contender_t *c)
{
    return c->commit_unknown || (c->commit != NULL && c->commit->sent)
               ? ZKR_EINDOUBT
               : ZKR_ESTALE;
}

/* Ends the commit with rc: the grant kept (keep), or over (IDLE). */
void zkr__end_commit(zkr__contender_t *c, int rc, int keep)
{
    zkr__commit_t *cm = c->commit;

    c->commit = NULL;
    c->commit_unknown = 0;
    if (keep) {
        c->phase = ZKR__P_HELD; /* a suspension is verified by zkr__step() */
    } else {
        c->phase = ZKR__P_IDLE;
        c->pub = ZKR_LOCK_IDLE;
        zkr__forget_node(c);
        zkr__fd_observed(c); /* the application learns it from rc */
        c->gen++;            /* answers about the old node are stale */
    }
    pthread_cond_broadcast(&c->s->cv);
    if (cm != NULL)
        cm->done(cm, rc);
}

static void commit_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__commit_t *cm = c->commit;
    int f = -1, e = rc;

    if (zkr__stale(op, ZKR__P_COMMITTING) || cm == NULL) {
        zkr__op_end(op);
        return;
    }
    (void)s;
    cm->sent = 0;
    if (rc == ZOK) {
        zkr__end_commit(c, 0, 0);
    } else if (zkr__is_connection_error(rc)) {
        c->commit_unknown = 1; /* probed once connected (step) */
    } else if (rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE) {
        zkr__end_commit(c, ZKR_ESTALE, 0); /* our node went with the session */
    } else {
        for (int i = 0; i < cm->count && f < 0; i++)
            if (cm->results[i].err != ZOK &&
                cm->results[i].err != ZRUNTIMEINCONSISTENCY)
                f = i;
        if (f >= 0)
            e = cm->results[f].err;
        cm->failed = f;
        if (f == cm->self && e == ZNONODE) {
            zkr__end_commit(c, ZKR_ESTALE, 0); /* not ours any more */
        } else if (f >= 0 && (f == cm->keep ||
                              (cm->receipt != NULL && f == cm->receipt_idx))) {
            zkr__end_commit(c, e, 1);
        } else if (e == ZBADVERSION || e == ZNONODE || e == ZNODEEXISTS ||
                   e == ZNOTEMPTY) {
            /* Someone else changed what we meant to commit: the grant is
             * given back by a plain delete of our node. */
            zkr__hand_over(c);
            zkr__end_commit(c, ZKR_ESTALE, 0);
        } else {
            zkr__end_commit(c, e,
                            1); /* ZNOAUTH...: nothing applied, still ours */
        }
    }
    zkr__op_end(op);
}

static void probe_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__commit_t *cm = c->commit;

    (void)s;
    if (!zkr__stale(op, ZKR__P_COMMITTING) && cm != NULL &&
        !zkr__is_connection_error(rc)) {
        if (rc == ZOK)
            zkr__end_commit(c,
                            cm->probe_version >= 0 &&
                                    stat->version == cm->probe_version
                                ? 0
                                : ZKR_ESTALE,
                            0);
        else if (rc == ZNONODE)
            zkr__end_commit(c, cm->probe_version < 0 ? 0 : ZKR_ESTALE, 0);
        else
            zkr__end_commit(c, ZKR_ESTALE, 0);
    }
    zkr__op_end(op);
}

static void commit_node_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__commit_t *cm = c->commit;

    if (zkr__stale(op, ZKR__P_COMMITTING) || cm == NULL ||
        zkr__is_connection_error(rc)) {
        ; /* probed again once connected */
    } else if (rc == ZOK && stat->ephemeralOwner == s->sid &&
               stat->czxid == c->czxid) {
        c->commit_unknown = 0; /* not applied: sent again (step) */
    } else if (rc != ZOK && rc != ZNONODE) {
        zkr__end_commit(c, zkr__commit_gone_rc(c), 0); /* the session went */
    } else if (cm->receipt != NULL) {
        /* Our node is gone and so is the receipt (commit_receipt_done):
         * someone else deleted our node, nothing of ours applied. */
        zkr__end_commit(c, ZKR_ESTALE, 0);
    } else {
        /* Our node is gone: by our multi, or not. The probe tells. */
        zkr__op_t *op2 = zkr__cop_new(c);

        if (op2 != NULL &&
            zoo_aexists(s->zh, cm->probe, 0, probe_done, op2) != ZOK)
            zkr__op_cancel(op2);
    }
    zkr__op_end(op);
}

/* The receipt of a commit whose answer was lost: there, the multi
 * applied; gone, our node tells whether it is still to be sent. */
static void commit_receipt_done(int rc, const struct Stat *stat,
                                const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__commit_t *cm = c->commit;

    (void)stat;
    if (zkr__stale(op, ZKR__P_COMMITTING) || cm == NULL ||
        zkr__is_connection_error(rc)) {
        ; /* probed again once connected */
    } else if (rc == ZOK) {
        zkr__end_commit(c, 0, 0);
    } else if (rc == ZNONODE) {
        zkr__op_t *op2 = zkr__cop_new(c);

        if (op2 != NULL &&
            zoo_aexists(s->zh, c->node, 0, commit_node_done, op2) != ZOK)
            zkr__op_cancel(op2);
    } else {
        zkr__end_commit(c, zkr__commit_gone_rc(c), 0); /* the session went */
    }
    zkr__op_end(op);
}

/* The sync before the receipt is read: the server we reconnected to may
 * lag behind the one that applied our multi (as recover_synced). */
static void commit_synced(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__commit_t *cm = c->commit;

    (void)value;
    if (zkr__stale(op, ZKR__P_COMMITTING) || cm == NULL ||
        zkr__is_connection_error(rc)) {
        ; /* probed again once connected */
    } else if (rc == ZOK) {
        zkr__op_t *op2 = zkr__cop_new(c);

        if (op2 != NULL &&
            zoo_aexists(s->zh, cm->receipt, 0, commit_receipt_done, op2) != ZOK)
            zkr__op_cancel(op2);
    } else {
        zkr__end_commit(c, zkr__commit_gone_rc(c), 0); /* the session went */
    }
    zkr__op_end(op);
}

void zkr__issue_commit(zkr__contender_t *c)
{
    zkr__commit_t *cm = c->commit;
    zkr__op_t *op = zkr__cop_new(c);
    int rc;

    if (op == NULL)
        return;
    if (c->commit_unknown && cm->receipt != NULL)
        rc = zoo_async(c->s->zh, "/", commit_synced, op);
    else if (c->commit_unknown)
        rc = zoo_aexists(c->s->zh, c->node, 0, commit_node_done, op);
    else if ((rc = zoo_amulti(c->s->zh, cm->count, cm->ops, cm->results,
                              commit_done, op)) == ZOK)
        cm->sent = 1;
    if (rc != ZOK) {
        zkr__op_cancel(op);
        if (rc == ZBADARGUMENTS)
            zkr__end_commit(c, rc, 1);
    }
}

int zkr__commit(zkr__contender_t *c, zkr__commit_t *cm)
{
    if (c->phase == ZKR__P_RELEASING || c->phase == ZKR__P_COMMITTING)
        return ZKR_ESTATE;
    if (c->phase != ZKR__P_HELD) {
        zkr__take_lost(c); /* reported now, as ESTALE */
        return ZKR_ESTALE;
    }
    c->letgo++;
    cm->failed = -1;
    cm->sent = 0;
    c->commit = cm;
    c->commit_unknown = 0;
    c->phase = ZKR__P_COMMITTING;
    zkr__step(c);
    return 0;
}

int zkr__set_precondition(zkr__contender_t *c, const char *path,
                          const char *data, int len, int version)
{
    char *p = zkr__strdup(path), *d = malloc(len > 0 ? (size_t)len : 1);

    if (p == NULL || d == NULL) {
        free(p);
        free(d);
        return ZKR_ENOMEM;
    }
    if (len > 0)
        memcpy(d, data, (size_t)len);
    free(c->pre_path);
    free(c->pre_data);
    c->pre_path = p;
    c->pre_data = d;
    c->pre_len = len;
    c->pre_version = version;
    return 0;
}
