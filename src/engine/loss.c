/* The loss descriptor (a pipe readable while the application must stop)
 * and the notifications of a contender's state: acquire and release
 * completions, state listener events. */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* --------------------------------------------------------- loss fd */

/* The loss descriptor is a pipe made on the first zkr_lock_fd() call: a
 * process holding many locks and never polling them would otherwise spend
 * two descriptors per handle (10,000 locks = 20,000 descriptors, more
 * than a common limit). It is readable once ownership was lost (fd_lost:
 * sticky until the application has observed the loss, zkr__fd_observed()),
 * and besides while the recipe's rule asks (fd_want: its signal hook's
 * answer to each change), or, for a recipe without one, the default rule:
 * while a state change is unread (SUSPENDED, HELD again, LOST, until
 * zkr__contender_read()), so that a poll() loop wakes once per change,
 * not without end while SUSPENDED. fd_written says whether the pipe holds a
 * byte.
 *
 * fd_lost is sticky, and kept by the engine whatever the recipe's rule,
 * because a loss may be followed at once by a new grant: a contender
 * whose recipe rejoins (.rejoins) starts over inside the same critical
 * section and may be granted again, with a new epoch, before the code that
 * ran under its old grant polls. Clearing the descriptor on that rejoin
 * (or grant) would leave that code running, unaware, beside the code of
 * whoever holds next (issue 20). */
static void fd_update(zkr__contender_t *c)
{
    char buf[16];
    int want = c->fd_lost || c->fd_want;

    /* In a forked child the pipe is the parent's: never touched. */
    if (c->fd[1] < 0 || c->s->forked || want == c->fd_written)
        return;
    if (want) {
        char b = 1;
        if (write(c->fd[1], &b, 1) == 1)
            c->fd_written = 1;
    } else {
        while (read(c->fd[0], buf, sizeof(buf)) > 0)
            ;
        c->fd_written = 0;
    }
}

/* Tells the recipe's rule (or the default one) of a change, then
 * updates the descriptor. */
static void fd_tell(zkr__contender_t *c, zkr__fdev_t ev)
{
    if (c->recipe->signal != NULL)
        c->fd_want = c->recipe->signal(c, ev);
    else if (ev == ZKR__FD_OBSERVED)
        c->fd_want = 0;
    else if (ev != ZKR__FD_GRANTED)
        c->fd_want = 1;
    fd_update(c);
}

/* The application has observed the state (a release, a new acquire, an
 * ELOST reported, or a recipe's own observation point): nothing to signal
 * any more. */
void zkr__fd_observed(zkr__contender_t *c)
{
    c->fd_lost = 0;
    fd_tell(c, ZKR__FD_OBSERVED);
}

void zkr__contender_read(zkr__contender_t *c)
{
    if (c->recipe->signal == NULL) /* the default rule: read */
        c->fd_want = 0;
    fd_update(c);
}

int zkr__contender_fd(zkr__contender_t *c)
{
    int fd;

    pthread_mutex_lock(&c->s->mu);
    if (c->fd[0] < 0 && pipe2(c->fd, O_CLOEXEC | O_NONBLOCK) != 0)
        c->fd[0] = c->fd[1] = -1;
    fd_update(c);
    fd = c->fd[0];
    pthread_mutex_unlock(&c->s->mu);
    return fd;
}

void zkr__contender_step(zkr__contender_t *c)
{
    zkr__step(c);
}

void zkr__contender_signal(zkr__contender_t *c)
{
    c->fd_lost = 1;
    fd_update(c);
}

void zkr__contender_observed(zkr__contender_t *c)
{
    zkr__fd_observed(c);
}

/* ----------------------------------------------------- notifications */

void zkr__notify_state(zkr__contender_t *c, zkr_lock_state_t st)
{
    c->pub = st;
    zkr__metrics_lock_state(c, st);
    pthread_cond_broadcast(&c->s->cv);
    if (st == ZKR_LOCK_LOST)
        c->fd_lost = 1;
    fd_tell(c, st == ZKR_LOCK_SUSPENDED ? ZKR__FD_SUSPENDED
               : st == ZKR_LOCK_LOST    ? ZKR__FD_LOST
               : st == ZKR_LOCK_HELD    ? ZKR__FD_HELD
                                        : ZKR__FD_DELAYED);
    if (c->lis_fn != NULL)
        zkr__post(c->s, ZKR__EV_STATE, (int)st, &c->m, c->lis_fn, c->lis_data);
    if (c->task != NULL)
        zkr__task_wake_at(c->s, c->task, 0);
}

void zkr__forget_node(zkr__contender_t *c)
{
    zkr__delay_forget_node(c);
    zkr__metrics_hold_end(c); /* a grant ends with its node */
    zkr__clear_node(c);
    zkr__cleanup_unreserve(c->reserve);
    c->reserve = NULL;
    zkr__clear_watching(c);
    c->czxid = 0;
    c->self_watch = 0;
    c->self_doubt = 0;
    c->touch_due = 0;
    c->tw.seen_czxid = c->tw.seen_mzxid = 0;
    free(c->unreadable);
    c->unreadable = NULL;
    free(c->tw.touchable);
    c->tw.touchable = NULL;
    zkr__acl_free(&c->tw.own_acl);
    c->tw.own_acl.count = 0;
    c->tw.own_acl.data = NULL;
    c->watch_due = -1;
}

/* Did our node's name announce that we touch it once granted? */
int zkr__announces(const zkr__contender_t *c)
{
    return c->node != NULL && zkr__name_announces(strrchr(c->node, '/') + 1);
}

/* Ends the pending acquire with rc (0 = granted). */
void zkr__finish_acquire(zkr__contender_t *c, int rc)
{
    zkr_session_t *s = c->s;

    if (!zkr__is_acquiring(c))
        return;
    zkr__metrics_acquired(c, rc);
    pthread_cond_broadcast(&s->cv);
    if (rc == ZKR_ELOST && zkr__rejoin(c))
        return;
    c->deadline = -1;
    c->abort_rc = 0;
    if (rc == 0) {
        c->phase = ZKR__P_HELD;
        c->pub = ZKR_LOCK_HELD;
        /* A loss before this grant (a rejoin) stays signalled (fd_lost);
         * the recipe's .signal hook may signal the grant (until the
         * application observes it, for instance). */
        fd_tell(c, ZKR__FD_GRANTED);
        /* A contender of a recipe that pokes (.poke) touches its node
         * (step), to wake the successor that watches it; one that
         * announced (ZKR__R_ANNOUNCES), to say that it holds
         * (zkr__new_uuid()). */
        c->touch_due = c->recipe->poke || zkr__announces(c);
        /* A waiter watched its own node already, and keeps that watch. One
         * granted on its first listing sets it a little later (see
         * issue_self_watch): most short holds never need it. */
        if (!c->self_watch) {
            c->watch_due = zkr__now_ms() + ZKR__SELF_WATCH_DELAY_MS;
            zkr__timed_add(c);
        }
        /* Wake the timer only if it would sleep past that: a loop of short
         * holds then costs one timer wake-up per delay, not per grant. */
        if (!c->self_watch &&
            (s->timer_next < 0 || s->timer_next > c->watch_due))
            zkr__timer_kick(s);
    } else {
        c->phase = ZKR__P_IDLE;
        c->pub = ZKR_LOCK_IDLE;
        zkr__forget_node(c);
    }
    c->ld.carry_until = -1; /* the attempt is over */
    c->gen++;               /* any answer still in flight is now stale */
    if (c->acq_sync) {
        c->acq_rc = rc;
        c->acq_gen = c->gen; /* this grant (grant_result) */
        c->acq_letgo = c->letgo;
        c->acq_done = 1;
        pthread_cond_broadcast(&c->done_cv);
    } else if (c->acq_fn != NULL && zkr__post(s, ZKR__EV_ACQUIRED, rc, &c->m,
                                              c->acq_fn, c->acq_data) == 0) {
        s->ev_tail->gen = c->gen; /* this grant (zkr__acquired_recheck) */
        s->ev_tail->letgo = c->letgo;
    }
    c->acq_fn = NULL;
    if (c->task != NULL)
        zkr__task_wake_at(s, c->task, 0);
}

/* Ends a release. rc != 0: the server refused the delete (ZNOAUTH: no
 * DELETE right on the directory), so our node stays, and with it the
 * grant: local state is kept, and the release fails with rc. */
void zkr__finish_release(zkr__contender_t *c, int rc)
{
    zkr_session_t *s = c->s;

    if (rc != 0 && c->node != NULL) {
        c->phase = ZKR__P_HELD;
        c->pub = ZKR_LOCK_HELD;
    } else {
        c->phase = ZKR__P_IDLE;
        c->pub = ZKR_LOCK_IDLE;
        zkr__forget_node(c);
        zkr__fd_observed(c); /* released: the holder stopped by its own will */
    }
    if (c->task != NULL)
        zkr__task_wake_at(s, c->task, 0);
    if (!c->rel_pending)
        return;
    c->rel_pending = 0;
    if (c->rel_sync) {
        c->rel_rc = rc;
        c->rel_done = 1;
        pthread_cond_broadcast(&c->done_cv);
    } else if (c->rel_fn != NULL) {
        zkr__post(s, ZKR__EV_RELEASED, rc, &c->m, c->rel_fn, c->rel_data);
    }
    c->rel_fn = NULL;
}

/* Hands a held node to the cleanup list as a release: its delete and the
 * release record (docs/design/lock-delay.md, 1.2) in one multi, so the
 * record exists only if this very delete removed the node. Written on
 * every release, whatever our own delay: a delayed waiter behind us must
 * not take us for a death. Returns 0 or ZKR_ENOMEM. */
int zkr__release_to_cleanup(zkr__contender_t *c, zkr__member_t *owner)
{
    char text[ZKR__RECORD_MAX + 1];
    zkr__record_t r;
    const char *name = strrchr(c->node, '/') + 1;

    if (c->recipe->flags & ZKR__R_PLAIN_RELEASE)
        return zkr__cleanup_add(c->s, c->node, NULL, NULL, c->node_sid, owner);
    memset(&r, 0, sizeof(r));
    r.kind = ZKR__REC_RELEASE;
    r.czxid = c->czxid;
    if (strlen(name) < sizeof(r.node))
        strcpy(r.node, name);
    if (zkr__record_format(text, sizeof(text), &r) < 0)
        return zkr__cleanup_add(c->s, c->node, NULL, NULL, c->node_sid, owner);
    return zkr__cleanup_add_record(c->s, c->node, c->dir, text, c->node_sid,
                                   owner);
}
