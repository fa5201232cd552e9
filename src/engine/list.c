/* Listing the queue and acting on the grant decision (decide.c), the
 * watches that wake a waiter, and the watch on our own node. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* -------------------------------------------------------- list/watch */

/* A waiter of a recipe that pokes (.poke: its grant touches its node)
 * watches its predecessor to learn when it is granted: the grant touches
 * the node (zkr__poke()). If the node was written before our
 * watch was set, we may have missed that touch, so we list again; but
 * anyone may write a contender's node (a monitoring tool, Curator's
 * revocation), and a write we have already listed after proves nothing
 * new. A write is recognised by the node's mzxid (mzxid == czxid: never
 * written): only one we have not listed after yet sends us back to
 * listing, so a foreign write costs two listings (its notification's and
 * this one), not a loop. Returns 1 if we must list. */
static int unseen_write(zkr__contender_t *c, const struct Stat *st)
{
    if (st->mzxid == st->czxid ||
        (st->czxid == c->tw.seen_czxid && st->mzxid == c->tw.seen_mzxid))
        return 0;
    c->tw.seen_czxid = st->czxid;
    c->tw.seen_mzxid = st->mzxid;
    return 1;
}

static void watch_done(int rc, const char *value, int len,
                       const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    (void)value;
    (void)len;
    /* The node our rule waits on, by its czxid: what a release record
     * must name (lock-delay, zkr__note_wait()). */
    if (rc == ZOK && !zkr__stale(op, ZKR__P_WATCHING) && c->ld.behind != NULL &&
        strcmp(strrchr(op->path, '/') + 1, c->ld.behind) == 0)
        c->ld.behind_czxid = stat->czxid;
    if (zkr__stale(op, ZKR__P_WATCHING) || c->watching == NULL ||
        strcmp(c->watching, op->path) != 0) {
        /* We moved on while the watch was being set: take it back (a
         * NONODE sets none, but one may be there: zkr__stop_watching()). */
        if (rc == ZOK || rc == ZNONODE)
            zkr__drop_watch(s, op->path, c, ZWATCHTYPE_DATA);
    } else if (rc == ZNOAUTH) {
        /* Not ours to read (a creator-only ACL, another user's contender):
         * the server would not send us its events either (it filters
         * them by the node's READ right), so no watch on it could wake us.
         * List again, and watch the directory while this node blocks us. */
        free(c->unreadable);
        c->unreadable = zkr__strdup(strrchr(op->path, '/') + 1);
        zkr__clear_watching(c);
        c->phase = ZKR__P_LISTING;
        if (c->unreadable == NULL)
            zkr__abort_acquire(c, ZKR_ENOMEM);
        else
            zkr__step(c);
    } else if (rc == ZNONODE ||
               (rc == ZOK && c->recipe->poke && unseen_write(c, stat))) {
        /* Gone before we could watch it (getData leaves no watch then;
         * zkr__stop_watching()), or (.poke) written since we listed:
         * take the watch back and list. */
        zkr__stop_watching(c);
        zkr__step(c);
    } else if (zkr__is_connection_error(rc)) {
        zkr__clear_watching(c);
        c->phase = ZKR__P_LISTING; /* listed again after reconnecting */
    } else if (rc != ZOK) {
        zkr__abort_acquire(
            c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
}

static void list_done(int rc, const struct String_vector *v, const void *data);

/* Waits for the deletion (or change) of one node before us. A getData
 * watch: an exists watch could be set without READ on the node, but the
 * server (3.8) sends a node's events only to sessions that may read it, so
 * such a watch would never fire; getData tells us (ZNOAUTH), and we watch
 * the directory instead (watch_done()). */
static void watch_node(zkr__contender_t *c, const char *name)
{
    zkr_session_t *s = c->s;
    zkr__op_t *op2;

    zkr__set_watching(c, zkr__join(c->dir, name));
    c->watch_dir = 0;
    op2 = c->watching != NULL ? zkr__cop_new(c) : NULL;
    if (op2 != NULL)
        op2->path = zkr__strdup(c->watching);
    c->phase = ZKR__P_WATCHING;
    if (op2 == NULL || op2->path == NULL) {
        if (op2 != NULL)
            zkr__op_cancel(op2);
        zkr__abort_acquire(c, ZKR_ENOMEM);
    } else if (zoo_awget(s->zh, op2->path, zkr__node_watcher, s, watch_done,
                         op2) != ZOK) {
        zkr__op_cancel(op2);
        zkr__clear_watching(c);
        c->phase = ZKR__P_LISTING; /* retried on reconnect */
    }
}

/* Lists with a child watch on the directory (op->watched marks it). */
static void issue_list_watched(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    op->watched = 1;
    c->s->counters[ZKR_COUNTER_LISTS]++;
    c->metrics.lists++;
    if (zoo_awget_children(c->s->zh, c->dir, zkr__node_watcher, c->s, list_done,
                           op) != ZOK)
        zkr__op_cancel(op);
}

static void poke_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);

    (void)stat;
    zkr__op_begin(op, rc);
    /* Done, or impossible (no WRITE: the waiters of a handle whose ACL
     * lets no creator write watch the directory instead, see
     * acl_lets_creator_write()). A connection error leaves it due: sent
     * again once connected (and verified, if we were suspended). */
    if (!zkr__stale(op, ZKR__P_HELD) && !zkr__is_connection_error(rc))
        c->touch_due = 0;
    zkr__op_end(op);
}

/* Touches our node so that a successor watching it wakes up and lists
 * (.poke). */
void zkr__poke(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_aset(c->s->zh, c->node, c->data, (int)strlen(c->data), -1,
                 poke_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* Can the creator of a node with this ACL write it (touch it)? Only what
 * is certain counts: WRITE for world:anyone or for the creator (scheme
 * "auth"). An ACL naming other ids may or may not include us. */
static int acl_lets_creator_write(const struct ACL_vector *acl)
{
    for (int i = 0; i < acl->count; i++) {
        const struct ACL *a = &acl->data[i];
        if ((a->perms & ZOO_PERM_WRITE) &&
            ((strcmp(a->id.scheme, "world") == 0 &&
              strcmp(a->id.id, "anyone") == 0) ||
             strcmp(a->id.scheme, "auth") == 0))
            return 1;
    }
    return 0;
}

/* A new attempt's UUID. A contender of a recipe with ZKR__R_ANNOUNCES and
 * a lock-delay, able to write its own node, announces in its name that it
 * touches the node once granted (zkr__name_announces()): whoever lists
 * the queue, in any process, can then tell a first contender still waiting out
 * its delay (data version 0) from the holder (docs/design/lock-delay.md, 1.7).
 */
void zkr__new_uuid(zkr__contender_t *c)
{
    zkr__uuid(c->uuid);
    if ((c->recipe->flags & ZKR__R_ANNOUNCES) && c->ld.delay_ms > 0 &&
        acl_lets_creator_write(&c->acl))
        c->uuid[14] = '8';
}

/* Whether acl (as stored) lets world:anyone write. */
static int acl_lets_all_write(const struct ACL_vector *acl)
{
    for (int i = 0; i < acl->count; i++)
        if ((acl->data[i].perms & ZOO_PERM_WRITE) &&
            strcmp(acl->data[i].id.scheme, "world") == 0 &&
            strcmp(acl->data[i].id.id, "anyone") == 0)
            return 1;
    return 0;
}

/* Whether two stored ACLs hold the same entries. */
static int acl_same(const struct ACL_vector *a, const struct ACL_vector *b)
{
    if (a->count != b->count)
        return 0;
    for (int i = 0; i < a->count; i++) {
        int found = 0;

        for (int j = 0; j < b->count && !found; j++)
            found = a->data[i].perms == b->data[j].perms &&
                    strcmp(a->data[i].id.scheme, b->data[j].id.scheme) == 0 &&
                    strcmp(a->data[i].id.id, b->data[j].id.id) == 0;
        if (!found)
            return 0;
    }
    return 1;
}

static void check_pred(zkr__contender_t *c);

/* The answer about our predecessor's ACL (c->watching), or about our own
 * node's (op->path NULL), which we compare it with. A waiter of a recipe
 * that pokes watches its predecessor only if the predecessor's granter can
 * touch it (zkr__poke()): its ACL lets world:anyone write, or it is the same as
 * our node's and our handle's ACL lets the creator write
 * (acl_lets_creator_write()), so that a contender of the same ACL and
 * auth created it. Another process's handle may use another ACL (issue
 * 20.5): behind a node its granter may not touch, we watch the directory
 * (c->unreadable). Any other answer: list again. */
static void pred_acl_done(int rc, struct ACL_vector *acl, struct Stat *stat,
                          const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    const char *name;

    (void)stat;
    zkr__op_begin(op, rc);
    if (zkr__stale(op, ZKR__P_WATCHING) || c->watching == NULL ||
        c->watch_dir ||
        (op->path != NULL && strcmp(c->watching, op->path) != 0)) {
        zkr__op_end(op);
        return;
    }
    name = strrchr(c->watching, '/') + 1;
    if (rc == ZOK && op->path == NULL) {
        rc = zkr__acl_copy(&c->tw.own_acl, acl);
        if (rc == 0) {
            check_pred(c); /* now the predecessor's */
            zkr__op_end(op);
            return;
        }
    } else if (rc == ZOK &&
               (acl_lets_all_write(acl) || acl_same(acl, &c->tw.own_acl))) {
        free(c->tw.touchable);
        c->tw.touchable = zkr__strdup(name);
        rc = c->tw.touchable != NULL ? 0 : ZKR_ENOMEM;
        if (rc == 0) {
            char *asked = c->watching; /* name points into it */

            watch_node(c, name); /* sets c->watching again */
            free(asked);
            zkr__op_end(op);
            return;
        }
    } else if (rc == ZOK || rc == ZNOAUTH) {
        /* Its granter may not touch it (or we may not read it). */
        free(c->unreadable);
        c->unreadable = zkr__strdup(name);
        rc = c->unreadable != NULL ? 0 : ZKR_ENOMEM;
    }
    zkr__stop_watching(c); /* no watch of ours was set on it */
    if (rc == ZKR_ENOMEM)
        zkr__abort_acquire(c, ZKR_ENOMEM);
    else if (rc == ZOK || rc == ZNONODE)
        zkr__step(c); /* NONODE: it (or our node) went: list again */
    else if (!zkr__is_connection_error(rc))
        zkr__abort_acquire(
            c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    zkr__op_end(op); /* a connection error: listed again after reconnecting */
}

/* Asks for the ACL of the predecessor c->watching, after our own node's
 * if that is needed and not known yet (see pred_acl_done()). */
static void check_pred(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);
    int own = c->tw.own_acl.count == 0 && !acl_lets_all_write(&c->acl);

    if (op != NULL && !own)
        op->path = zkr__strdup(c->watching);
    if (op == NULL || (!own && op->path == NULL) ||
        zoo_aget_acl(c->s->zh, own ? c->node : c->watching, pred_acl_done,
                     op) != ZOK) {
        if (op != NULL)
            zkr__op_cancel(op);
        zkr__clear_watching(c);
        c->phase = ZKR__P_LISTING; /* retried on reconnect */
    }
}

static zkr__verdict_t decide(const zkr__contender_t *c, const zkr__entry_t *e,
                             int n)
{
    zkr__listing_t in = {
        .e = e,
        .n = n,
        .self = zkr__find_entry(e, n, strrchr(c->node, '/') + 1),
        .pred = c->recipe->pred,
        .permits = c->permits,
        .poke = c->recipe->poke,
        .creator_writes = acl_lets_creator_write(&c->acl),
        .unreadable = c->unreadable,
        .touchable = c->tw.touchable,
        .self_doubt = c->self_doubt,
        .delay_due = (c->ld.before != NULL || c->ld.carry_until >= 0) &&
                     !c->ld.delay_served,
        .delayed = c->phase == ZKR__P_DELAYED,
        .try_once = c->try_once,
    };

    return zkr__decide(&in);
}

/* The listing says wait ([W1]-[W3]): on the directory, on e[d.target], or
 * on e[d.target] once its ACL is known to let its touch wake us. */
static void wait_on(zkr__contender_t *c, const zkr__op_t *op,
                    const zkr__entry_t *e, int n, zkr__verdict_t d)
{
    if (zkr__note_wait(c, e, n, d.self, d.pred) != 0) {
        zkr__abort_acquire(c, ZKR_ENOMEM);
        return;
    }
    /* Our own node first, so that its deletion reaches us before the
     * answer to any later request (see zkr__node_watcher). */
    if (!c->self_watch)
        zkr__issue_self_watch(c);
    if (d.what == ZKR__D_WATCH_DIR && !op->watched) {
        /* Any change in the directory matters: list again, with a child
         * watch; that listing decides. */
        issue_list_watched(c);
    } else if (d.what == ZKR__D_WATCH_DIR) {
        zkr__set_watching(c, zkr__strdup(c->dir));
        c->watch_dir = 1;
        c->phase = ZKR__P_WATCHING;
        if (c->watching == NULL)
            zkr__abort_acquire(c, ZKR_ENOMEM);
    } else if (d.what == ZKR__D_ASK_TOUCH) {
        zkr__set_watching(c, zkr__join(c->dir, e[d.target].name));
        c->watch_dir = 0;
        c->phase = ZKR__P_WATCHING;
        if (c->watching == NULL)
            zkr__abort_acquire(c, ZKR_ENOMEM);
        else
            check_pred(c);
    } else {
        watch_node(c, e[d.target].name);
    }
}

static void list_done(int rc, const struct String_vector *v, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__entry_t *e = NULL;
    zkr__verdict_t d;
    int n = 0;

    if (op->gen == c->gen && c->phase == ZKR__P_CREATING &&
        c->abort_rc == ZKR_ESTALE && c->pre_path != NULL) {
        /* The listing behind a create whose precondition failed
         * (create_done): what the directory holds now. */
        c->pre_seen = rc == ZNONODE  ? ZKR__PRE_GONE
                      : rc != ZOK    ? ZKR__PRE_UNKNOWN
                      : v->count > 0 ? ZKR__PRE_CHILDREN
                                     : ZKR__PRE_EMPTY;
    }
    if (zkr__stale(op, ZKR__P_LISTING)) {
        if (op->watched && rc == ZOK)
            zkr__drop_watch(s, c->dir, c, ZWATCHTYPE_CHILD);
        zkr__op_end(op);
        return;
    }
    if (zkr__is_connection_error(rc)) {
        zkr__op_end(op); /* listed again after reconnecting */
        return;
    }
    if (rc != ZOK) {
        /* NONODE: the directory (so our node) is gone. */
        zkr__abort_acquire(c, rc == ZNONODE || rc == ZSESSIONEXPIRED ||
                                      rc == ZCLOSING
                                  ? ZKR_ELOST
                                  : rc);
        zkr__op_end(op);
        return;
    }
    if (zkr__sort_children(v, &e, &n) != 0) {
        zkr__abort_acquire(c, ZKR_ENOMEM);
        zkr__op_end(op);
        return;
    }
    /* The grant rests on this answer alone: it came after our create and
     * after the last notification we acted on, and it shows our node and
     * who is before it. What it means is decided without I/O (decide.c);
     * here it is acted on. */
    d = decide(c, e, n);
    switch (d.what) {
    case ZKR__D_LOST:
        zkr__lose_waiting(c);
        break;
    case ZKR__D_CONFLICT:
        zkr__abort_acquire(c, ZKR_ELIMIT);
        break;
    case ZKR__D_ASK_SELF:
        /* Our name is in the listing, but whether the node is still ours
         * is being asked (a change was reported on it): list again once
         * the answer comes (zkr__op_end steps us then). */
        if (!c->self_watch)
            zkr__issue_self_watch(c);
        break;
    case ZKR__D_DELAY:
        /* The nodes we waited behind are gone: released, or dead? The
         * delay's first step may find no delay is owed: granted now. */
        if (zkr__begin_delay(c, e, n) != 0)
            zkr__abort_acquire(c, ZKR_ENOMEM);
        else if (c->phase != ZKR__P_DELAYED)
            zkr__finish_acquire(c, 0);
        break;
    case ZKR__D_DELAYED:
        break; /* the delay being served decides */
    case ZKR__D_GRANT:
        zkr__finish_acquire(c, 0);
        break;
    case ZKR__D_BUSY:
        zkr__abort_acquire(c, ZKR_EBUSY);
        break;
    case ZKR__D_WATCH_DIR:
    case ZKR__D_WATCH_NODE:
    case ZKR__D_ASK_TOUCH:
        wait_on(c, op, e, n, d);
        break;
    }
    /* A child watch we set but no longer need is taken back. */
    if (op->watched &&
        !(d.what == ZKR__D_WATCH_DIR && c->phase == ZKR__P_WATCHING))
        zkr__drop_watch(s, c->dir, c, ZWATCHTYPE_CHILD);
    free(e);
    zkr__op_end(op);
}

void zkr__issue_list(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    c->s->counters[ZKR_COUNTER_LISTS]++;
    c->metrics.lists++;
    if (zoo_aget_children(c->s->zh, c->dir, 0, list_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* ----------------------------------------------------- own node */

/* A held grant was lost (lose_held) and the application is now told so
 * by a ZKR_ELOST return or completion: once, and the loss is observed. */
int zkr__take_lost(zkr__contender_t *c)
{
    if (!c->lost_unreported)
        return 0;
    c->lost_unreported = 0;
    c->pub = ZKR_LOCK_IDLE;
    zkr__fd_observed(c);
    return 1;
}

/* What an acquire granted at generation gen returns when the
 * application learns of it (a completion delivered, or a synchronous
 * acquire woken), maybe long after the grant. The grant is still held
 * while c->gen is unchanged (only a loss, a free, a commit's end or a new
 * attempt changes it) and the phase is still HELD or COMMITTING (a
 * release moves it on without a new generation): 0. A recorded loss of
 * this grant is ZKR_ELOST, reported once, here; a loss of a later grant
 * (the lock released and acquired again before this was told) is left
 * for that grant's own completion, which must not say 0. A grant the
 * application let go itself
 * (letgo moved on: the handle freed, the grant released or given up, or
 * acquired again, before it was told) is ZKR_ECANCELED, the
 * code a free gives a pending acquire: its node is gone or going, and
 * another contender may hold already, so 0 would be a lie. Otherwise the
 * grant was lost and the engine rejoined (the recipe's .rejoins): 0, and the
 * loss follows as a state change, so a late listener hears both in order. */
int zkr__grant_result(zkr__contender_t *c, uint64_t gen, uint64_t letgo)
{
    zkr__enforce_deadline(c->s);
    if (gen == c->gen &&
        (c->phase == ZKR__P_HELD || c->phase == ZKR__P_COMMITTING))
        return 0;
    if (c->lost_unreported && c->lost_gen == gen && zkr__take_lost(c))
        return ZKR_ELOST;
    return letgo != c->letgo ? ZKR_ECANCELED : 0;
}

/* Our node was deleted by someone else while we waited: it can never be
 * granted. The acquire ends with ZKR_ELOST (a rejoining recipe starts
 * over), and the watch on our predecessor is taken back. */
void zkr__lose_waiting(zkr__contender_t *c)
{
    if (c->watching != NULL)
        zkr__stop_watching(c);
    zkr__forget_node(c);
    zkr__finish_acquire(c, ZKR_ELOST);
}

/* Ownership of a held node is gone (session lost, node deleted by someone
 * else): the application is told once, and a rejoining recipe starts
 * over. */
void zkr__lose_held(zkr__contender_t *c)
{
    c->phase = ZKR__P_IDLE;
    zkr__forget_node(c);
    c->lost_gen = c->gen; /* the grant lost (grant_result) */
    c->gen++;             /* answers about the old node are stale */
    c->lost_unreported = 1;
    zkr__notify_state(c, ZKR_LOCK_LOST);
    zkr__rejoin(c);
}

static void self_watch_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    /* Still about the node we have? (Our paths are never reused by us;
     * anyone else may create a node at one: its czxid or owner differs.) */
    if (c->node == NULL || strcmp(c->node, op->path) != 0 || !c->self_watch) {
        if (rc == ZNONODE)
            zkr__drop_watch(s, op->path, c, ZWATCHTYPE_DATA);
    } else if (rc == ZNONODE ||
               (rc == ZOK && (stat->czxid != c->czxid ||
                              stat->ephemeralOwner != c->node_sid))) {
        /* Gone, or someone else's node at our path: ours was deleted.
         * (exists() leaves a watch on a missing path: take it back; the
         * other's node is not ours to watch either.) */
        c->self_watch = 0;
        c->self_doubt = 0;
        zkr__drop_watch(s, op->path, c, ZWATCHTYPE_DATA);
        if (c->phase == ZKR__P_HELD)
            zkr__lose_held(c);
        else if (zkr__is_waiting(c))
            zkr__lose_waiting(c);
    } else if (rc != ZOK) {
        /* Not set (connection lost): set again once re-verified (held),
         * or by the next listing that makes us wait. */
        c->self_watch = 0;
    } else {
        c->self_doubt = 0; /* still ours: a listing may grant again */
    }
    zkr__op_end(op);
}

/* We watch our own node while we wait and while we hold. A waiter whose
 * node an operator deleted must fail (it can never be granted) instead of
 * waiting on; a holder whose node was deleted (zkr release --force) must
 * learn it promptly, not at its next disconnection, since the next
 * contender is granted right away. A waiter sets the watch as soon as a
 * listing tells it to wait, and keeps it once granted. A contender granted
 * on its first listing sets it ZKR__SELF_WATCH_DELAY_MS after the grant,
 * by the timer thread: a hold shorter than that never pays the extra
 * request, and a deletion before it is set is found by the exists()
 * itself (NONODE), so it is noticed at most that delay plus one round trip
 * late. The client re-registers the watch after a reconnection; our own
 * delete consumes it. */
void zkr__issue_self_watch(zkr__contender_t *c)
{
    zkr__op_t *op;

    c->watch_due = -1;
    op = zkr__cop_new(c);
    if (op != NULL)
        op->path = zkr__strdup(c->node);
    if (op == NULL || op->path == NULL) {
        if (op != NULL)
            zkr__op_cancel(op);
        return; /* out of memory: detected at the next re-verification */
    }
    c->self_watch = 1;
    if (zoo_awexists(c->s->zh, op->path, zkr__node_watcher, c->s,
                     self_watch_done, op) != ZOK) {
        zkr__op_cancel(op);
        c->self_watch = 0;
    }
}

/* ------------------------------------------------------ re-verify */

static void verify_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    if (!zkr__stale(op, ZKR__P_HELD) && c->pub == ZKR_LOCK_SUSPENDED) {
        if (rc == ZOK && stat->ephemeralOwner == s->sid &&
            stat->czxid == c->czxid) {
            zkr__notify_state(c, ZKR_LOCK_HELD);
            /* A touch lost with the connection would leave a successor
             * watching us for nothing: touch again (step). */
            c->touch_due = c->recipe->poke || zkr__announces(c);
            if (!c->self_watch)
                zkr__issue_self_watch(c);
        } else if (rc == ZOK || rc == ZNONODE) {
            /* Deleted, or re-created by someone else: ownership is gone. */
            zkr__lose_held(c);
        }
        /* connection errors: verified again after the next reconnect */
    }
    zkr__op_end(op);
}

void zkr__issue_verify(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_aexists(c->s->zh, c->node, 0, verify_done, op) != ZOK)
        zkr__op_cancel(op);
}
