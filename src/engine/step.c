/* The contender's step (the next request its phase needs) and what the
 * session's state changes do to contenders. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* -------------------------------------------------------------- step */

/* Sends the request the contender's phase calls for, if none of its
 * requests is in flight and the connection is up. Every completion of a
 * contender's request calls it (zkr__op_end), so a step that found the
 * contender busy (a reconnection, a new attempt while a watch or a touch
 * was being set) is never lost. */
void zkr__step(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;

    /* An acquire ended (timeout, cancel) while requests of its attempt
     * were in flight: abort_acquire waited for their answers. The last
     * has come: end it now (a create of unknown outcome becomes a search
     * by UUID), not when the connection or a new session comes back. */
    if (!c->m.busy && c->abort_rc != 0 &&
        (c->phase == ZKR__P_CREATING || c->phase == ZKR__P_RECOVER)) {
        zkr__abort_acquire(c, c->abort_rc);
        return;
    }
    /* Nothing goes out on a session we declared LOST, even while its
     * handle stays open until last heard + T (session/conn.c, declare_lost): a
     * node created there would die with it while we hold it. The new
     * session steps us (zkr__queue_on_connected). */
    if (c->m.busy || !s->connected || s->zh == NULL ||
        s->state == ZKR_STATE_LOST)
        return;
    switch (c->phase) {
    case ZKR__P_CREATING:
        zkr__issue_create(c);
        break;
    case ZKR__P_RECOVER:
        zkr__issue_recover(c);
        break;
    case ZKR__P_LISTING:
        zkr__issue_list(c);
        break;
    case ZKR__P_DELAYED:
        if (c->ld.delay_until < 0)
            zkr__issue_record_read(c); /* the record is still to be read */
        break;
    case ZKR__P_HELD:
        if (c->pub == ZKR_LOCK_SUSPENDED)
            zkr__issue_verify(c);
        else if (c->touch_due)
            zkr__poke(c);
        break;
    case ZKR__P_COMMITTING:
        zkr__issue_commit(c);
        break;
    default:
        break;
    }
}

/* Hands an aborting contender's node to the cleanup list: when connected
 * the acquire ends once it is deleted (zkr__queue_cleanup_done), else at
 * once. Short of memory, the entry reserved before the create is used. */
static void abort_handover(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;
    zkr__member_t *owner = s->connected ? &c->m : NULL;

    c->m.stalled = 0;
    if ((c->ld.leave_record != NULL
             ? zkr__cleanup_add_record(s, c->node, c->dir, c->ld.leave_record,
                                       c->node_sid, owner)
             : zkr__cleanup_add(s, c->node, NULL, NULL, c->node_sid, owner)) !=
        0) {
        if (c->reserve == NULL) {
            /* A node adopted by a recovery has no reserved entry: keep it
             * and the acquire until one can be made (zkr__queue_retry). */
            c->m.stalled = 1;
            zkr__retry_later(s);
            return;
        }
        zkr__cleanup_commit(s, c->reserve, c->node, c->node_sid, owner);
        c->reserve = NULL;
    }
    if (owner == NULL)
        zkr__finish_acquire(c, c->abort_rc);
}

void zkr__queue_retry(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER (c, s) {
        if (!c->m.stalled || c->m.busy)
            continue;
        c->m.stalled = 0;
        if (c->phase == ZKR__P_ABORTING)
            abort_handover(c); /* its entry could not be made */
        else if (c->phase == ZKR__P_WATCHING && c->watching == NULL)
            c->phase = ZKR__P_LISTING; /* its watch was not set */
        else if (c->phase == ZKR__P_HELD && c->pub == ZKR_LOCK_HELD &&
                 !c->self_watch && c->watch_due < 0) {
            c->watch_due = zkr__now_ms(); /* set by zkr__queue_on_deadline */
            zkr__timed_add(c);
        }
        zkr__step(c);
    }
}

/* Ends an acquire early with rc once no node of it can be left behind:
 * a create in flight is waited for; a known node is handed to the cleanup
 * list (and, when connected, the acquire returns only once it is gone); a
 * create of unknown outcome while disconnected is handed over as a search
 * by UUID. */
void zkr__abort_acquire(zkr__contender_t *c, int rc)
{
    zkr_session_t *s = c->s;

    if (!zkr__is_acquiring(c))
        return;
    if (c->abort_rc == 0)
        c->abort_rc = rc;
    switch (c->phase) {
    case ZKR__P_CREATING:
        if (c->m.busy == 0)
            zkr__finish_acquire(c, c->abort_rc);
        break;
    case ZKR__P_RECOVER:
        if (c->m.busy == 0) {
            zkr__cleanup_add(s, NULL, c->dir, c->uuid, c->node_sid, NULL);
            zkr__finish_acquire(c, c->abort_rc);
        }
        break;
    case ZKR__P_DELAYED:
        zkr__prepare_leave(c);
        /* fall through */
    case ZKR__P_LISTING:
    case ZKR__P_WATCHING:
        if (c->watching != NULL) {
            char *w = c->watching;
            zkr__set_watching(c, NULL);
            c->phase = ZKR__P_ABORTING;
            zkr__drop_watch(s, w, c,
                            c->watch_dir ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA);
            free(w);
        }
        c->phase = ZKR__P_ABORTING;
        abort_handover(c);
        break;
    default:
        break;
    }
}

/* The session's cleanup list finished deleting a node of ours. */
void zkr__queue_cleanup_done(zkr__contender_t *c, int rc)
{
    if (c->phase == ZKR__P_ABORTING) {
        zkr__forget_node(c);
        zkr__finish_acquire(c, c->abort_rc);
    } else if (c->phase == ZKR__P_RELEASING) {
        zkr__finish_release(c, rc);
    }
}

/* -------------------------------------------------- session hooks */

void zkr__queue_on_connected(zkr_session_t *s, int new_session)
{
    ZKR__EACH_CONTENDER (c, s) {
        /* A node of another session is not ours to hold or wait with
         * (zkr__queue_on_lost ended those it saw; this catches any other). */
        if (new_session && c->node != NULL && c->node_sid != s->sid) {
            if (c->phase == ZKR__P_HELD) {
                zkr__lose_held(c);
                continue;
            }
            if (zkr__is_waiting(c)) {
                zkr__lose_waiting(c);
                continue;
            }
            if (c->phase == ZKR__P_COMMITTING) {
                zkr__end_commit(c, zkr__commit_gone_rc(c),
                                0); /* the session went */
                continue;
            }
        }
        if (c->phase == ZKR__P_WATCHING) {
            /* The client re-registers watches on reconnect, but a release
             * may have happened while we were away: look again. */
            zkr__clear_watching(c);
            c->phase = ZKR__P_LISTING;
        }
        zkr__step(c);
    }
}

void zkr__queue_on_suspended(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER (c, s)
        if ((c->phase == ZKR__P_HELD || c->phase == ZKR__P_COMMITTING) &&
            c->pub == ZKR_LOCK_HELD)
            zkr__notify_state(c, ZKR_LOCK_SUSPENDED);
}

/* An adopted handle outlives our LOST: the server may still keep its
 * session, and with it every node zkr created, which would block everyone
 * else for as long as the application keeps its handle. Hand
 * them to the cleanup list, which deletes them through that handle once it
 * reaches the server (entries of this session id are kept when the same
 * session comes back, dropped when it expires). A create in flight is
 * deleted by its completion (create_done: stale); one of unknown
 * outcome is searched for by UUID. A commit's multi (an ack) that applied
 * deleted the node already: its delete then finds nothing. */
static void adopted_lost_nodes(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER (c, s) {
        if (c->phase == ZKR__P_RECOVER)
            zkr__cleanup_add(s, NULL, c->dir, c->uuid, c->node_sid, NULL);
        else if (c->node != NULL &&
                 (c->phase == ZKR__P_LISTING || c->phase == ZKR__P_WATCHING ||
                  c->phase == ZKR__P_DELAYED || c->phase == ZKR__P_HELD ||
                  c->phase == ZKR__P_COMMITTING))
            zkr__cleanup_add(s, c->node, NULL, NULL, c->node_sid, NULL);
    }
}

void zkr__queue_on_lost(zkr_session_t *s)
{
    if (!s->owned)
        adopted_lost_nodes(s);
    ZKR__EACH_CONTENDER (c, s) {
        zkr__cleanup_disown(s, &c->m);
        if (zkr__is_acquiring(c)) {
            /* Whatever node this attempt had died with the session. */
            c->phase = ZKR__P_IDLE;
            zkr__finish_acquire(c, c->abort_rc != 0 ? c->abort_rc : ZKR_ELOST);
        } else if (c->phase == ZKR__P_HELD) {
            zkr__lose_held(c);
        } else if (c->phase == ZKR__P_RELEASING) {
            zkr__finish_release(c, 0); /* the node went with the session */
        } else if (c->phase == ZKR__P_COMMITTING) {
            zkr__end_commit(c, zkr__commit_gone_rc(c),
                            0); /* zkr__commit_gone_rc() says which */
        }
    }
}

/* The session's timed list: the contenders whose deadline, watch_due or
 * delay_until was set, and has not been seen unset since. Only they can have a
 * timer, so zkr__queue_on_deadline visits only them. */
void zkr__timed_add(zkr__contender_t *c)
{
    zkr__engine_t *e = zkr__engine(c->s);

    if (c->timed)
        return;
    c->timed = 1;
    c->tprev = NULL;
    c->tnext = e->timed;
    if (e->timed != NULL)
        e->timed->tprev = c;
    e->timed = c;
}

void zkr__timed_remove(zkr__contender_t *c)
{
    if (!c->timed)
        return;
    if (c->tprev != NULL)
        c->tprev->tnext = c->tnext;
    else
        zkr__engine(c->s)->timed = c->tnext;
    if (c->tnext != NULL)
        c->tnext->tprev = c->tprev;
    c->tprev = c->tnext = NULL;
    c->timed = 0;
}

/* Whether a timer of c has expired at now. */
static int timer_due(const zkr__contender_t *c, int64_t now)
{
    return (c->phase == ZKR__P_HELD && c->watch_due >= 0 && c->s->connected &&
            now >= c->watch_due) ||
           (c->phase == ZKR__P_DELAYED && c->ld.delay_until >= 0 &&
            now >= c->ld.delay_until) ||
           (zkr__is_acquiring(c) && c->deadline >= 0 && c->abort_rc == 0 &&
            now >= c->deadline);
}

/* Acts on c's expired timers, and lowers *next to its others. */
static void timer_run(zkr__contender_t *c, int64_t now, int64_t *next)
{
    if (c->phase == ZKR__P_HELD && c->watch_due >= 0 && c->s->connected) {
        if (now >= c->watch_due)
            zkr__issue_self_watch(c);
        else if (*next < 0 || c->watch_due < *next)
            *next = c->watch_due;
    }
    if (c->phase == ZKR__P_DELAYED && c->ld.delay_until >= 0) {
        if (now >= c->ld.delay_until)
            zkr__end_delay(c);
        else if (*next < 0 || c->ld.delay_until < *next)
            *next = c->ld.delay_until;
    }
    if (!zkr__is_acquiring(c) || c->deadline < 0 || c->abort_rc != 0)
        return;
    if (now >= c->deadline)
        zkr__abort_acquire(c, ZKR_ETIMEDOUT);
    else if (*next < 0 || c->deadline < *next)
        *next = c->deadline;
}

/* Sorts a list chained by tnext in the session's order (newest first). */
static zkr__contender_t *timed_sort(zkr__contender_t *l)
{
    zkr__contender_t *a = NULL, *b = NULL, **tail;

    if (l == NULL || l->tnext == NULL)
        return l;
    while (l != NULL) { /* split: alternate */
        zkr__contender_t *n = l->tnext;
        l->tnext = a;
        a = l;
        if ((l = n) == NULL)
            break;
        n = l->tnext;
        l->tnext = b;
        b = l;
        l = n;
    }
    a = timed_sort(a);
    b = timed_sort(b);
    tail = &l;
    while (a != NULL && b != NULL) {
        zkr__contender_t **m = a->m.order > b->m.order ? &a : &b;
        *tail = *m;
        tail = &(*m)->tnext;
        *m = (*m)->tnext;
    }
    *tail = a != NULL ? a : b;
    return l;
}

/* The contenders with nothing due only lower *next; those with a timer
 * expired are taken out, then handled in the session's order, each as
 * the whole list's walk handled it. */
void zkr__queue_on_deadline(zkr_session_t *s, int64_t now, int64_t *next)
{
    zkr__contender_t *due = NULL, *c, *n;

    for (c = zkr__engine(s)->timed; c != NULL; c = n) {
        n = c->tnext;
        if (c->watch_due < 0 && c->deadline < 0 && c->ld.delay_until < 0) {
            zkr__timed_remove(c);
        } else if (!timer_due(c, now)) {
            timer_run(c, now, next);
        } else {
            zkr__timed_remove(c);
            c->tnext = due;
            due = c;
        }
    }
    for (c = timed_sort(due); c != NULL; c = n) {
        n = c->tnext;
        zkr__timed_add(c);
        timer_run(c, now, next);
    }
}
