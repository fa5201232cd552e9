/* The contender-queue engine (SPEC section 2): one implementation of the
 * ordered queue of ephemeral-sequential nodes that every recipe uses. A
 * recipe gives only its marker (node naming) and its predicate (who must
 * go before we are granted).
 *
 * Each contender is a small state machine (zkr__phase_t) driven by
 * ZooKeeper completions, watch events, session state changes and the timer
 * thread, all under the session mutex. step() looks at the phase and issues
 * the next request when the connection allows it; every completion checks
 * that it still belongs to the current attempt (gen) and phase, so a late
 * answer can never grant or corrupt a newer attempt.
 *
 *   IDLE -> CREATING -> LISTING <-> WATCHING -> HELD -> RELEASING -> IDLE
 *             |  ^
 *             v  |  (connection lost during create: outcome unknown)
 *           RECOVER: find our node by UUID; adopt it only if its
 *                    ephemeralOwner is our current session
 *   any acquiring phase -> ABORTING (delete our node) -> IDLE
 *
 * Evidence for a grant: only a listing (getChildren) answered after our
 * create and after the last notification we acted on, which shows our own
 * node and nothing before it that the recipe's rule forbids. A
 * notification (our predecessor deleted or written, a child added or
 * removed) is only a hint to list again: any client may write or delete
 * any contender's node (Curator's revocation writes waiters' nodes,
 * operators delete them), so what an event seems to say about the queue
 * is never taken for its state. (An earlier handoff that granted without
 * listing, on "the node before me was written, then is gone", was removed
 * for that reason, and so was granting from a cached listing.)
 *
 * Watches, one for the rule and one on our own node: a waiter watches the
 * one node its rule names (its predecessor; a semaphore's first waiter and
 * a waiter behind a node it may not read watch the directory), so a
 * release notifies one waiter. It also watches its own node from its
 * first wait on, and keeps that watch once granted: a deletion by someone
 * else ends the acquire with ZKR_ELOST (or the grant with LOST) at once.
 * Events on one connection arrive in zxid order, before the answer to any
 * later request, so no grant can follow our node's deletion unnoticed.
 *
 * Node deletion (release, abort, orphans) is always done by the session's
 * cleanup list, which retries across disconnections until the delete is
 * confirmed or the session is gone: one place guarantees "no node left
 * behind". */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static void step(zkr__contender_t *c);
static void abort_acquire(zkr__contender_t *c, int rc);
static void start_attempt(zkr__contender_t *c, int timeout_ms);
static int rejoin(zkr__contender_t *c);
static void issue_list(zkr__contender_t *c);
static void issue_self_watch(zkr__contender_t *c);
static void lose_held(zkr__contender_t *c);
static void lose_waiting(zkr__contender_t *c);
static void issue_record_read(zkr__contender_t *c);
static void end_delay(zkr__contender_t *c);
static void prepare_leave(zkr__contender_t *c);
static void new_uuid(zkr__contender_t *c);

static int is_acquiring(const zkr__contender_t *c)
{
    return c->pub == ZKR_LOCK_ACQUIRING || c->pub == ZKR_LOCK_DELAYED;
}

/* Our node exists and we wait for our turn (listing, watching, or
 * delayed). */
static int is_waiting(const zkr__contender_t *c)
{
    return c->phase == ZKR__P_LISTING || c->phase == ZKR__P_WATCHING ||
           c->phase == ZKR__P_DELAYED;
}

/* --------------------------------------------------------- loss fd */

/* The loss descriptor is a pipe made on the first zkr_lock_fd() call: a
 * process holding many locks and never polling them would otherwise spend
 * two descriptors per handle (10,000 locks = 20,000 descriptors, more
 * than a common limit). It should be readable once ownership was lost
 * (fd_lost: sticky until the application has observed the loss,
 * fd_observed()), and besides: for an election's stop signal (fd_level),
 * while ownership is uncertain (fd_uncertain: SUSPENDED, until
 * re-verified); for a lock, while a state change is unread (fd_changed:
 * SUSPENDED, HELD again, LOST, until zkr_lock_state()), so that a poll()
 * loop wakes once per change, not without end while SUSPENDED.
 * An election's descriptor also signals a gain of leadership the
 * application has not observed yet (fd_gained: a grant, or a
 * re-verification after the application saw it did not lead, fd_away),
 * so that a poll() loop wakes to lead as well as to stop. That cannot
 * hide a stop from a running leader function: it starts with everything
 * observed, so a new grant can only follow a loss (fd_lost), and fd_away
 * is only set by an await() that failed, which the function's run() does
 * not call while the function runs.
 * fd_written says whether the pipe holds a byte.
 *
 * fd_lost is sticky because a loss may be followed at once by a new
 * grant: an election candidate rejoins inside the same critical section
 * and may lead again with a new epoch before its leader function polls.
 * Clearing the descriptor on that rejoin (or grant) would leave the old
 * function running beside the next leader's, unaware (issue 20). */
static void fd_update(zkr__contender_t *c)
{
    char buf[16];
    int want = c->fd_lost || c->fd_gained ||
               (c->fd_level ? c->fd_uncertain : c->fd_changed);

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

/* The application has observed the state (a release, a new acquire, an
 * ELOST reported, or a recipe's own observation point): nothing to signal
 * any more. */
static void fd_observed(zkr__contender_t *c)
{
    c->fd_uncertain = 0;
    c->fd_lost = 0;
    c->fd_changed = 0;
    c->fd_gained = 0;
    c->fd_away = 0;
    fd_update(c);
}

void zkr__contender_read(zkr__contender_t *c)
{
    c->fd_changed = 0;
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
    step(c);
}

void zkr__contender_signal(zkr__contender_t *c)
{
    c->fd_lost = 1;
    fd_update(c);
}

void zkr__contender_observed(zkr__contender_t *c)
{
    fd_observed(c);
}

void zkr__contender_away(zkr__contender_t *c)
{
    fd_observed(c);
    c->fd_away = 1;
}

/* ----------------------------------------------------- notifications */

static void notify_state(zkr__contender_t *c, zkr_lock_state_t st)
{
    c->pub = st;
    zkr__metrics_lock_state(c, st);
    pthread_cond_broadcast(&c->s->cv);
    if (st == ZKR_LOCK_SUSPENDED) {
        c->suspensions++;
        c->fd_uncertain = !c->fd_quiet_suspend;
    } else if (st == ZKR_LOCK_LOST) {
        c->fd_uncertain = 0;
        c->fd_lost = 1;
    } else if (st == ZKR_LOCK_HELD) {
        c->fd_uncertain = 0; /* the same grant, re-verified */
        /* An election that the application saw not leading (suspended,
         * under ZKR_POLICY_SUSPEND) leads again: a gain. */
        c->fd_gained |= c->fd_level && c->fd_away;
    }
    c->fd_changed = 1;
    fd_update(c);
    if (c->lis_fn != NULL)
        zkr__post(c->s, ZKR__EV_STATE, (int)st, &c->m, c->lis_fn, c->lis_data);
}

/* Lock-delay: the nodes before us at the last wait. */
static void forget_before(zkr__contender_t *c)
{
    for (int i = 0; i < c->nbefore; i++)
        free(c->before[i]);
    free(c->before);
    c->before = NULL;
    c->nbefore = 0;
    free(c->vouch);
    c->vouch = NULL;
}

static void clear_node(zkr__contender_t *c);
static void timed_add(zkr__contender_t *c);
static void clear_watching(zkr__contender_t *c);

static void carry_observed(zkr__contender_t *c);

static void forget_node(zkr__contender_t *c)
{
    carry_observed(c);        /* a rejoin serves what this node observed */
    zkr__metrics_hold_end(c); /* a grant ends with its node */
    clear_node(c);
    zkr__cleanup_unreserve(c->reserve);
    c->reserve = NULL;
    clear_watching(c);
    c->czxid = 0;
    c->self_watch = 0;
    c->self_doubt = 0;
    c->touch_due = 0;
    c->seen_czxid = c->seen_mzxid = 0;
    free(c->unreadable);
    c->unreadable = NULL;
    free(c->touchable);
    c->touchable = NULL;
    zkr__acl_free(&c->own_acl);
    c->own_acl.count = 0;
    c->own_acl.data = NULL;
    c->watch_due = -1;
    free(c->behind);
    c->behind = NULL;
    c->behind_czxid = 0;
    forget_before(c);
    free(c->target);
    c->target = NULL;
    c->target_czxid = 0;
    c->delay_served = 0;
    c->delay_until = -1;
    free(c->leave_record);
    c->leave_record = NULL;
}

/* Did our node's name announce that we touch it once granted? */
static int announces(const zkr__contender_t *c)
{
    return c->node != NULL && zkr__name_announces(strrchr(c->node, '/') + 1);
}

/* Ends the pending acquire with rc (0 = granted). */
static void finish_acquire(zkr__contender_t *c, int rc)
{
    zkr_session_t *s = c->s;

    if (!is_acquiring(c))
        return;
    zkr__metrics_acquired(c, rc);
    pthread_cond_broadcast(&s->cv);
    if (rc == ZKR_ELOST && rejoin(c))
        return;
    c->deadline = -1;
    c->abort_rc = 0;
    if (rc == 0) {
        c->phase = ZKR__P_HELD;
        c->pub = ZKR_LOCK_HELD;
        /* A loss before this grant (a rejoin) stays signalled; an
         * election's grant is signalled until the application observes
         * it. */
        c->fd_uncertain = 0;
        c->fd_gained = c->fd_level;
        fd_update(c);
        /* A semaphore permit touches its node (step), to wake the
         * successor that watches it; a candidate that announced, to say
         * that it leads (new_uuid()). */
        c->touch_due = c->recipe->poke || announces(c);
        /* A waiter watched its own node already, and keeps that watch. One
         * granted on its first listing sets it a little later (see
         * issue_self_watch): most short holds never need it. */
        if (!c->self_watch) {
            c->watch_due = zkr__now_ms() + ZKR__SELF_WATCH_DELAY_MS;
            timed_add(c);
        }
        /* Wake the timer only if it would sleep past that: a loop of short
         * holds then costs one timer wake-up per delay, not per grant. */
        if (!c->self_watch &&
            (s->timer_next < 0 || s->timer_next > c->watch_due))
            zkr__timer_kick(s);
    } else {
        c->phase = ZKR__P_IDLE;
        c->pub = ZKR_LOCK_IDLE;
        forget_node(c);
    }
    c->carry_until = -1; /* the attempt is over */
    c->gen++;            /* any answer still in flight is now stale */
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
}

/* Ends a release. rc != 0: the server refused the delete (ZNOAUTH: no
 * DELETE right on the directory), so our node stays, and with it the
 * grant: local state is kept, and the release fails with rc. */
static void finish_release(zkr__contender_t *c, int rc)
{
    zkr_session_t *s = c->s;

    if (rc != 0 && c->node != NULL) {
        c->phase = ZKR__P_HELD;
        c->pub = ZKR_LOCK_HELD;
    } else {
        c->phase = ZKR__P_IDLE;
        c->pub = ZKR_LOCK_IDLE;
        forget_node(c);
        fd_observed(c); /* released: the holder stopped by its own will */
    }
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
static int release_to_cleanup(zkr__contender_t *c, zkr__member_t *owner)
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

/* --------------------------------------------------------- watches */

/* The session's path index: each contender's node and watched path, so
 * that a watch event and drop_watch() look only at the contenders of its
 * path instead of the whole list. Invariant: c->node_link is linked, with
 * the hash of c->node, exactly while c->node is set; likewise watch_link
 * and c->watching. Linking never fails: a table that cannot grow stays as
 * it is (its chains get longer, the answers are the same). */

static uint32_t path_hash(const char *p)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

static const char *link_path(const zkr__plink_t *l)
{
    return l == &l->c->node_link ? l->c->node : l->c->watching;
}

static zkr__plink_t **pidx_table(zkr_session_t *s, size_t *n)
{
    zkr__engine_t *e = zkr__engine(s);

    *n = e->pidx != NULL ? e->npidx : ZKR__PIDX_SMALL;
    return e->pidx != NULL ? e->pidx : e->pidx_small;
}

static void pidx_unlink(zkr_session_t *s, zkr__plink_t *l)
{
    size_t n;
    zkr__plink_t **t = pidx_table(s, &n), **pp;

    if (!l->on)
        return;
    for (pp = &t[l->hash % n]; *pp != l; pp = &(*pp)->next)
        ;
    *pp = l->next;
    l->next = NULL;
    l->on = 0;
    zkr__engine(s)->npaths--;
}

/* Doubles the table once it holds more links than buckets. */
static void pidx_grow(zkr_session_t *s)
{
    zkr__engine_t *e = zkr__engine(s);
    size_t n, m;
    zkr__plink_t **t = pidx_table(s, &n), **u;

    if (e->npaths <= n || n > SIZE_MAX / 2 / sizeof(*u))
        return;
    m = 2 * n;
    if ((u = calloc(m, sizeof(*u))) == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        while (t[i] != NULL) {
            zkr__plink_t *l = t[i];
            t[i] = l->next;
            l->next = u[l->hash % m];
            u[l->hash % m] = l;
        }
    }
    free(e->pidx);
    e->pidx = u;
    e->npidx = m;
}

/* Points *field (c->node or c->watching, whose link is l) at path, NULL
 * included, and indexes it; the old string is the caller's to free. */
static void pidx_set(zkr__contender_t *c, zkr__plink_t *l, char **field,
                     char *path)
{
    zkr_session_t *s = c->s;
    zkr__plink_t **t;
    size_t n;

    pidx_unlink(s, l);
    *field = path;
    if (path == NULL)
        return;
    l->c = c;
    l->hash = path_hash(path);
    l->on = 1;
    zkr__engine(s)->npaths++;
    pidx_grow(s);
    t = pidx_table(s, &n);
    l->next = t[l->hash % n];
    t[l->hash % n] = l;
}

static void set_node(zkr__contender_t *c, char *node)
{
    pidx_set(c, &c->node_link, &c->node, node);
}

static void set_watching(zkr__contender_t *c, char *path)
{
    pidx_set(c, &c->watch_link, &c->watching, path);
}

static void clear_node(zkr__contender_t *c)
{
    char *node = c->node;

    set_node(c, NULL);
    free(node);
}

static void clear_watching(zkr__contender_t *c)
{
    char *w = c->watching;

    set_watching(c, NULL);
    free(w);
}

/* The first link of path's bucket; pidx_next() gives the next one whose
 * path is path. */
static zkr__plink_t *pidx_next(zkr__plink_t *l, uint32_t h, const char *path)
{
    while (l != NULL && (l->hash != h || strcmp(link_path(l), path) != 0))
        l = l->next;
    return l;
}

static zkr__plink_t *pidx_first(zkr_session_t *s, const char *path, uint32_t *h)
{
    size_t n;
    zkr__plink_t **t = pidx_table(s, &n);

    *h = path_hash(path);
    return pidx_next(t[*h % n], *h, path);
}

/* The contenders whose node or watched path is path, each once, in the
 * order of the session's list (newest first): how many (at most max), or
 * -1 when there are more. */
static int pidx_find(zkr_session_t *s, const char *path, zkr__contender_t **out,
                     int max)
{
    uint32_t h;
    int k = 0, i;

    for (zkr__plink_t *l = pidx_first(s, path, &h); l != NULL;
         l = pidx_next(l->next, h, path)) {
        for (i = 0; i < k && out[i] != l->c; i++)
            ;
        if (i < k)
            continue;
        if (k == max)
            return -1;
        for (i = k; i > 0 && out[i - 1]->m.order < l->c->m.order; i--)
            out[i] = out[i - 1];
        out[i] = l->c;
        k++;
    }
    return k;
}

/* ------------------------------------------------------------ watches */

/* Whether another contender than self of this session has path watched:
 * only contenders whose node or watched path is path can. */
static int path_watched_by_other(zkr_session_t *s, const char *path,
                                 const zkr__contender_t *self)
{
    uint32_t h;

    for (zkr__plink_t *l = pidx_first(s, path, &h); l != NULL;
         l = pidx_next(l->next, h, path)) {
        const zkr__contender_t *o = l->c;
        if (o == self)
            continue;
        if (o->watching != NULL && o->phase == ZKR__P_WATCHING &&
            strcmp(o->watching, path) == 0)
            return 1;
        /* The client keeps one registration per path for our watcher, so
         * a holder's watch on its own node is shared with a waiter of the
         * same session watching it. */
        if (o->self_watch && o->node != NULL && strcmp(o->node, path) == 0)
            return 1;
    }
    return 0;
}

/* Removes our data watch on path, unless another contender of this
 * session still waits on it: no leaked watch. The session's cleanup list
 * sends the removal (now, or after reconnecting: the client re-registers
 * its watches on reconnect, so a watch dropped while disconnected would
 * otherwise come back). */
static void drop_watch(zkr_session_t *s, const char *path,
                       const zkr__contender_t *self, int wtype)
{
    if (path_watched_by_other(s, path, self) || zkr__observed(s, path))
        return;
    zkr__cleanup_add_watch(s, path, wtype, zkr__node_watcher);
}

/* We stop watching c->watching and list again. The watch is dropped even
 * if we never set one (our request failed, or found no node): another
 * contender of this session may have left one there that it kept only for
 * our sake (path_watched_by_other()), such as the exists() watch a waiter
 * sets on its own node, which stays on the server when the node is gone.
 * With no watch there the client answers the removal itself (ZNOWATCHER),
 * without a request. */
static void stop_watching(zkr__contender_t *c)
{
    char *w = c->watching;

    set_watching(c, NULL);
    c->phase = ZKR__P_LISTING;
    if (w != NULL)
        drop_watch(c->s, w, c,
                   c->watch_dir ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA);
    free(w);
}

/* A watch event on path, for one contender (its node, or what it watches,
 * may be path). The contenders it can concern are those of path in the
 * index, in the session's order; more than ZKR__WATCH_HITS of them and the
 * whole list is walked instead. Their handling changes only the
 * contender handled (the conditions are read again for each). */
enum { ZKR__WATCH_HITS = 64 };
static void watch_event(zkr__contender_t *c, int type, const char *path,
                        int *woke)
{
    if (c->self_watch && c->node != NULL && strcmp(c->node, path) == 0) {
        /* Our own node, watched while we wait and while we hold:
         * deleted by someone else (an operator, a forced
         * release), it can never be granted and no longer holds;
         * a change (our own touch, or anyone's write) only
         * consumed the watch. Events on one connection arrive in
         * zxid order, so this comes before the answer to any
         * later request of ours: no grant can follow it. */
        c->self_watch = 0;
        if (type == ZOO_DELETED_EVENT && c->phase == ZKR__P_HELD)
            lose_held(c);
        else if (type == ZOO_DELETED_EVENT && is_waiting(c))
            lose_waiting(c);
        else if (type != ZOO_DELETED_EVENT &&
                 (c->phase == ZKR__P_HELD || is_waiting(c))) {
            /* The path may hold someone else's node now (deleted
             * and re-created while we were disconnected: the
             * re-registered watch reports a change): no grant
             * until the exists() shows our czxid again. */
            c->self_doubt = 1;
            issue_self_watch(c);
        }
    }
    if (c->phase == ZKR__P_WATCHING && c->watching != NULL &&
        strcmp(c->watching, path) == 0) {
        /* Whatever happened (a deletion, a touch, anyone's
         * write) is a hint: only a listing decides. */
        *woke = 1;
        clear_watching(c);
        c->phase = ZKR__P_LISTING;
        step(c);
    }
}

void zkr__node_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx)
{
    zkr_session_t *s;

    (void)state;
    /* Session events reach every watcher; the session layer handles them. */
    if (type == ZOO_SESSION_EVENT || type == ZOO_NOTWATCHING_EVENT ||
        path == NULL)
        return;
    /* An application's (adopted) handle may outlive the session that set
     * this watch: only a live session is touched. Returns it locked. */
    if ((s = zkr__session_lock_live(ctx)) == NULL)
        return;
    if (zh == s->zh) {
        zkr__contender_t *hit[ZKR__WATCH_HITS];
        int woke = 0, k = pidx_find(s, path, hit, ZKR__WATCH_HITS);
        if (k >= 0) {
            for (int i = 0; i < k; i++)
                watch_event(hit[i], type, path, &woke);
        } else {
            ZKR__EACH_CONTENDER(c, s)
            watch_event(c, type, path, &woke);
        }
        s->counters[woke ? ZKR_COUNTER_WATCH_EVENTS
                         : ZKR_COUNTER_HOLDER_EVENTS]++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------ create */

static void create_done(int rc, const char *value, const struct Stat *stat,
                        const void *data);
static void parents_done(int rc, const char *value, const void *data);
static int issue_create_multi(zkr__contender_t *c, const char *path,
                              zkr__op_t *op);

static int stale(const zkr__op_t *op, zkr__phase_t phase)
{
    return op->gen != zkr__c(op->m)->gen || zkr__c(op->m)->phase != phase;
}

static void issue_create(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;
    char name[64 + 16];
    char *path;
    zkr__op_t *op;
    int rc;

    snprintf(name, sizeof(name), "_c_%s%s%s", c->uuid, c->infix,
             c->recipe->marker);
    path = zkr__join(c->dir, name);
    op = path != NULL ? zkr__cop_new(c) : NULL;
    /* The node's cleanup entry first, room for the sequence included. */
    if (op != NULL &&
        (op->ctx = zkr__cleanup_reserve(strlen(path) + 11)) == NULL) {
        zkr__op_cancel(op);
        op = NULL;
    }
    if (op == NULL) {
        free(path);
        abort_acquire(c, ZKR_ENOMEM);
        return;
    }
    if (c->pre_path != NULL)
        rc = issue_create_multi(c, path, op);
    else
        rc = zoo_acreate2(s->zh, path, c->data, (int)strlen(c->data), &c->acl,
                          ZOO_EPHEMERAL_SEQUENTIAL, create_done, op);
    free(path);
    if (rc != ZOK) {
        zkr__cleanup_unreserve(op->ctx);
        zkr__op_cancel(op);
        if (rc != ZINVALIDSTATE && !zkr__is_connection_error(rc))
            abort_acquire(c, rc);
        return;
    }
    /* Pipeline the first listing behind the create: a session's requests
     * are applied in order, so the list already contains our node, and an
     * uncontended acquire costs one round trip instead of two. If the
     * create fails, create_done leaves the LISTING phase unset and this
     * answer is discarded as stale. */
    issue_list(c);
}

/* Creates every missing ancestor of dir as a container node (ZooKeeper
 * removes empty containers, so any of them may vanish again later: a
 * NONODE on create simply brings us back here). Requests on one session
 * are applied in order, so we can send them all at once; the last one's
 * completion retries the create. */
static void issue_parents(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;
    size_t len = strlen(c->dir);
    char *p = zkr__strdup(c->dir);

    if (p == NULL) {
        abort_acquire(c, ZKR_ENOMEM);
        return;
    }
    c->parents_made++;
    for (size_t i = 1; i <= len; i++) {
        zkr__op_t *op;
        if (p[i] != '/' && p[i] != '\0')
            continue;
        p[i] = '\0';
        op = zkr__cop_new(c);
        if (op == NULL)
            break;
        op->last = i == len;
        if (zoo_acreate(s->zh, p, "", 0, &c->acl, ZOO_CONTAINER, parents_done,
                        op) != ZOK) {
            zkr__op_cancel(op);
            break;
        }
        p[i] = i == len ? '\0' : '/';
    }
    free(p);
}

static void parents_done(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    (void)value;
    if (op->last && !stale(op, ZKR__P_CREATING) && c->m.busy == 0) {
        if (c->abort_rc != 0)
            finish_acquire(c, c->abort_rc);
        else if (rc == ZOK || rc == ZNODEEXISTS || zkr__is_connection_error(rc))
            step(c);
        else
            finish_acquire(
                c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
    (void)s;
}

/* A create with a precondition (zkr__set_precondition): the setData and
 * the create in one multi, so the node exists only if the write applied
 * (one transaction: the node's czxid is the write's mzxid). */
typedef struct create_multi {
    zkr__cleanup_t *reserve; /* the node's cleanup entry (op->ctx) */
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    struct Stat stat;
    char *created; /* the created path's buffer */
    int created_len;
} create_multi_t;

static void create_multi_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    create_multi_t *m = op->ctx;
    struct Stat st;

    op->ctx = m->reserve;
    memset(&st, 0, sizeof(st));
    if (rc == ZOK) {
        st = m->stat;
        st.czxid = m->stat.mzxid; /* one transaction, one zxid */
    } else if (!zkr__is_connection_error(rc) && rc != ZCLOSING &&
               rc != ZSESSIONEXPIRED && rc != ZINVALIDSTATE &&
               (m->results[0].err == ZBADVERSION ||
                m->results[0].err == ZNONODE || m->results[1].err == ZNONODE)) {
        rc = ZKR_ESTALE; /* the precondition failed: someone got there */
    }
    create_done(rc, rc == ZOK ? m->created : NULL, &st, op);
    free(m->created);
    free(m);
}

static int issue_create_multi(zkr__contender_t *c, const char *path,
                              zkr__op_t *op)
{
    create_multi_t *m = calloc(1, sizeof(*m));
    int rc;

    if (m != NULL) {
        m->created_len = (int)strlen(path) + 16;
        m->created = malloc((size_t)m->created_len);
    }
    if (m == NULL || m->created == NULL) {
        if (m != NULL)
            free(m);
        return ZKR_ENOMEM;
    }
    zoo_set_op_init(&m->ops[0], c->pre_path, c->pre_data, c->pre_len,
                    c->pre_version, &m->stat);
    zoo_create_op_init(&m->ops[1], path, c->data, (int)strlen(c->data), &c->acl,
                       ZOO_EPHEMERAL_SEQUENTIAL, m->created, m->created_len);
    m->reserve = op->ctx;
    op->ctx = m;
    rc = zoo_amulti(c->s->zh, 2, m->ops, m->results, create_multi_done, op);
    if (rc != ZOK) {
        op->ctx = m->reserve;
        free(m->created);
        free(m);
    }
    return rc;
}

static void create_done(int rc, const char *value, const struct Stat *stat,
                        const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__cleanup_t *reserve = op->ctx; /* our node's cleanup entry */

    op->ctx = NULL;
    if (rc == ZOK)
        s->counters[ZKR_COUNTER_CREATES]++;
    else
        zkr__cleanup_unreserve(reserve); /* no node */
    if (stale(op, ZKR__P_CREATING)) {
        /* Nobody wants this node any more (timed out, canceled, lost):
         * delete it, or it would block the queue until our session ends. */
        if (rc == ZOK)
            zkr__cleanup_commit(s, reserve, value, op->sid, NULL);
    } else if (rc == ZOK) {
        set_node(c, zkr__strdup(value));
        c->czxid = stat->czxid;
        c->node_sid = op->sid;
        if (c->node == NULL) {
            zkr__cleanup_commit(s, reserve, value, op->sid, NULL);
            finish_acquire(c, ZKR_ENOMEM);
            zkr__op_end(op);
            return;
        }
        c->reserve = reserve;
        if (c->abort_rc != 0) {
            c->phase = ZKR__P_LISTING;
            abort_acquire(c, c->abort_rc);
        } else {
            c->phase = ZKR__P_LISTING;
            step(c);
        }
    } else if (rc == ZNONODE && c->abort_rc == 0 && c->parents_made < 5 &&
               !(c->recipe->flags & ZKR__R_NO_PARENTS)) {
        issue_parents(c);
    } else if (zkr__is_connection_error(rc)) {
        /* The create may or may not have been applied. */
        s->counters[ZKR_COUNTER_RECOVERIES]++;
        c->phase = ZKR__P_RECOVER;
        c->node_sid = op->sid;
        if (c->abort_rc != 0)
            abort_acquire(c, c->abort_rc);
        else
            step(c);
    } else if (c->abort_rc != 0) {
        finish_acquire(c, c->abort_rc);
    } else if (rc == ZNONODE && (c->recipe->flags & ZKR__R_NO_PARENTS)) {
        finish_acquire(c, ZKR_ESTALE); /* the directory (the item) is gone */
    } else {
        finish_acquire(c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
                                  rc == ZINVALIDSTATE
                              ? ZKR_ELOST
                              : rc);
    }
    zkr__op_end(op);
}

/* ----------------------------------------------------------- recover */

static void recover_stat_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    if (stale(op, ZKR__P_RECOVER)) {
        ;
    } else if (rc == ZOK && stat->ephemeralOwner == s->sid) {
        /* Ours, created by this very session: adopt it. */
        set_node(c, op->path);
        op->path = NULL;
        c->czxid = stat->czxid;
        c->node_sid = s->sid;
        c->phase = ZKR__P_LISTING;
        if (c->abort_rc != 0)
            abort_acquire(c, c->abort_rc);
    } else if (rc == ZOK) {
        /* Created by an older session of ours: never adopt it (that
         * session's ownership is gone); delete it and start over. */
        zkr__cleanup_add(s, op->path, NULL, NULL, s->sid, NULL);
        c->phase = ZKR__P_CREATING;
        new_uuid(c);
        if (c->abort_rc != 0)
            finish_acquire(c, c->abort_rc);
    } else if (rc == ZNONODE) {
        c->phase = ZKR__P_CREATING;
        if (c->abort_rc != 0)
            finish_acquire(c, c->abort_rc);
    }
    step(c);
    zkr__op_end(op);
}

static void recover_list_done(int rc, const struct String_vector *v,
                              const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    const char *hit = NULL;

    if (stale(op, ZKR__P_RECOVER)) {
        zkr__op_end(op);
        return;
    }
    if (rc == ZOK)
        for (int i = 0; v != NULL && i < v->count; i++)
            if (strstr(v->data[i], c->uuid) != NULL)
                hit = v->data[i];
    if (rc == ZOK && hit != NULL) {
        zkr__op_t *op2 = zkr__cop_new(c);
        if (op2 != NULL)
            op2->path = zkr__join(c->dir, hit);
        if (op2 == NULL || op2->path == NULL ||
            zoo_aexists(s->zh, op2->path, 0, recover_stat_done, op2) != ZOK) {
            if (op2 != NULL)
                zkr__op_cancel(op2);
        }
    } else if (rc == ZOK || rc == ZNONODE) {
        /* Never applied: create again (same UUID, nothing to confuse). */
        c->phase = ZKR__P_CREATING;
        if (c->abort_rc != 0)
            finish_acquire(c, c->abort_rc);
        else
            step(c);
    } else if (!zkr__is_connection_error(rc)) {
        abort_acquire(c,
                      rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
}

/* The sync before the recovery listing is answered: the server we are
 * connected to has now applied everything the leader had committed when
 * it got the sync. Our lost create went out on an earlier connection; it
 * was committed before that (a create the leader got later, forwarded by
 * the old server, is refused: the reconnection moved the session, and the
 * leader then refuses the old server's requests for it), or never. So the
 * listing below shows our node if it exists. Without the sync a lagging
 * follower answered "not found" and we created a twin (issue 12.8). */
static void recover_synced(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    (void)value;
    if (stale(op, ZKR__P_RECOVER)) {
        ;
    } else if (rc == ZOK) {
        zkr__op_t *op2 = zkr__cop_new(c);
        if (op2 != NULL &&
            zoo_aget_children(s->zh, c->dir, 0, recover_list_done, op2) != ZOK)
            zkr__op_cancel(op2);
    } else if (!zkr__is_connection_error(rc)) {
        abort_acquire(c,
                      rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
}

static void issue_recover(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_async(c->s->zh, c->dir, recover_synced, op) != ZOK)
        zkr__op_cancel(op);
}

/* -------------------------------------------------------- list/watch */

/* A semaphore waiter watches its predecessor to learn when it is granted:
 * the grant touches the node (poke). If the node was written before our
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
        (st->czxid == c->seen_czxid && st->mzxid == c->seen_mzxid))
        return 0;
    c->seen_czxid = st->czxid;
    c->seen_mzxid = st->mzxid;
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
     * must name (lock-delay, note_wait()). */
    if (rc == ZOK && !stale(op, ZKR__P_WATCHING) && c->behind != NULL &&
        strcmp(strrchr(op->path, '/') + 1, c->behind) == 0)
        c->behind_czxid = stat->czxid;
    if (stale(op, ZKR__P_WATCHING) || c->watching == NULL ||
        strcmp(c->watching, op->path) != 0) {
        /* We moved on while the watch was being set: take it back (a
         * NONODE sets none, but one may be there: stop_watching()). */
        if (rc == ZOK || rc == ZNONODE)
            drop_watch(s, op->path, c, ZWATCHTYPE_DATA);
    } else if (rc == ZNOAUTH) {
        /* Not ours to read (a creator-only ACL, another user's contender):
         * the server would not send us its events either (it filters
         * them by the node's READ right), so no watch on it could wake us.
         * List again, and watch the directory while this node blocks us. */
        free(c->unreadable);
        c->unreadable = zkr__strdup(strrchr(op->path, '/') + 1);
        clear_watching(c);
        c->phase = ZKR__P_LISTING;
        if (c->unreadable == NULL)
            abort_acquire(c, ZKR_ENOMEM);
        else
            step(c);
    } else if (rc == ZNONODE ||
               (rc == ZOK && c->recipe->poke && unseen_write(c, stat))) {
        /* Gone before we could watch it (getData leaves no watch then;
         * stop_watching()), or (semaphore) written since we listed:
         * take the watch back and list. */
        stop_watching(c);
        step(c);
    } else if (zkr__is_connection_error(rc)) {
        clear_watching(c);
        c->phase = ZKR__P_LISTING; /* listed again after reconnecting */
    } else if (rc != ZOK) {
        abort_acquire(c,
                      rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
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

    set_watching(c, zkr__join(c->dir, name));
    c->watch_dir = 0;
    op2 = c->watching != NULL ? zkr__cop_new(c) : NULL;
    if (op2 != NULL)
        op2->path = zkr__strdup(c->watching);
    c->phase = ZKR__P_WATCHING;
    if (op2 == NULL || op2->path == NULL) {
        if (op2 != NULL)
            zkr__op_cancel(op2);
        abort_acquire(c, ZKR_ENOMEM);
    } else if (zoo_awget(s->zh, op2->path, zkr__node_watcher, s, watch_done,
                         op2) != ZOK) {
        zkr__op_cancel(op2);
        clear_watching(c);
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
    if (!stale(op, ZKR__P_HELD) && !zkr__is_connection_error(rc))
        c->touch_due = 0;
    zkr__op_end(op);
}

/* Touches our node so that a successor watching it wakes up and lists
 * (semaphore). */
static void poke(zkr__contender_t *c)
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

/* A new attempt's UUID. An election candidate with a lock-delay, able to
 * write its own node, announces in its name that it touches the node once
 * it leads (zkr__name_announces()): an observer in any process can then
 * tell a first candidate still waiting out its delay (data version 0) from
 * the leader (docs/design/lock-delay.md, 1.7). */
static void new_uuid(zkr__contender_t *c)
{
    zkr__uuid(c->uuid);
    if (c->recipe->mode == 'l' && c->delay_ms > 0 &&
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
 * node's (op->path NULL), which we compare it with. A semaphore waiter
 * watches its predecessor only if the predecessor's granter can touch it
 * (poke()): its ACL lets world:anyone write, or it is the same as our
 * node's and our handle's ACL lets the creator write
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
    if (stale(op, ZKR__P_WATCHING) || c->watching == NULL || c->watch_dir ||
        (op->path != NULL && strcmp(c->watching, op->path) != 0)) {
        zkr__op_end(op);
        return;
    }
    name = strrchr(c->watching, '/') + 1;
    if (rc == ZOK && op->path == NULL) {
        rc = zkr__acl_copy(&c->own_acl, acl);
        if (rc == 0) {
            check_pred(c); /* now the predecessor's */
            zkr__op_end(op);
            return;
        }
    } else if (rc == ZOK &&
               (acl_lets_all_write(acl) || acl_same(acl, &c->own_acl))) {
        free(c->touchable);
        c->touchable = zkr__strdup(name);
        rc = c->touchable != NULL ? 0 : ZKR_ENOMEM;
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
    stop_watching(c); /* no watch of ours was set on it */
    if (rc == ZKR_ENOMEM)
        abort_acquire(c, ZKR_ENOMEM);
    else if (rc == ZOK || rc == ZNONODE)
        step(c); /* NONODE: it (or our node) went: list again */
    else if (!zkr__is_connection_error(rc))
        abort_acquire(c,
                      rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    zkr__op_end(op); /* a connection error: listed again after reconnecting */
}

/* Asks for the ACL of the predecessor c->watching, after our own node's
 * if that is needed and not known yet (see pred_acl_done()). */
static void check_pred(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);
    int own = c->own_acl.count == 0 && !acl_lets_all_write(&c->acl);

    if (op != NULL && !own)
        op->path = zkr__strdup(c->watching);
    if (op == NULL || (!own && op->path == NULL) ||
        zoo_aget_acl(c->s->zh, own ? c->node : c->watching, pred_acl_done,
                     op) != ZOK) {
        if (op != NULL)
            zkr__op_cancel(op);
        clear_watching(c);
        c->phase = ZKR__P_LISTING; /* retried on reconnect */
    }
}

/* ------------------------------------------------------- lock-delay */

/* Is e a foreign node whose departure we take for a release
 * (ZKR_DELAY_TRUST_FOREIGN)? */
static int delay_trusted(const zkr__contender_t *c, const zkr__entry_t *e)
{
    return (c->delay_flags & (int)ZKR_DELAY_TRUST_FOREIGN) &&
           zkr__name_foreign(e->name);
}

/* Does our grant depend on e's departure? A reader's only on writers' and
 * exclusive nodes' (readers share); everyone else's on every node before
 * it. A trusted foreign node's on none: its going is a release. */
static int delay_relevant(const zkr__contender_t *c, const zkr__entry_t *e)
{
    if (delay_trusted(c, e))
        return 0;
    if (c->recipe->pred == zkr__pred_read)
        return e->kind == ZKR__KIND_WRITE || e->kind == ZKR__KIND_EXCLUSIVE;
    return 1;
}

/* Is e exclusive (a lock, a writer, a candidate; not a permit)? Its grant
 * needed every node before it gone, so its clean release vouches for all
 * of them. */
static int delay_vouches(const zkr__entry_t *e)
{
    return (e->kind == ZKR__KIND_EXCLUSIVE && e->permits == 0) ||
           e->kind == ZKR__KIND_WRITE || e->kind == ZKR__KIND_LATCH;
}

/* No grant of this attempt before from + our delay. */
static void carry_from(zkr__contender_t *c, int64_t from)
{
    if (from + c->delay_ms > c->carry_until)
        c->carry_until = from + c->delay_ms;
}

/* Our node goes while its grant may owe a delay (docs/design/lock-delay.md,
 * 1.5): the attempt's next node (a rejoin) serves what is left. Delayed:
 * until the end decided, or the full delay while the record was being
 * read; waiting: nodes before us may have gone unseen, so the full delay
 * from now. */
static void carry_observed(zkr__contender_t *c)
{
    if (c->delay_ms <= 0 || !is_acquiring(c) || c->delay_served)
        return;
    if (c->delay_until > c->carry_until)
        c->carry_until = c->delay_until;
    else if (c->phase == ZKR__P_DELAYED && c->delay_until < 0)
        carry_from(c, c->delay_seen);
    else if (c->before != NULL)
        carry_from(c, zkr__now_ms());
}

static void proof_done(int rc, const char *value, int len,
                       const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    zkr__record_t r;

    (void)stat;
    zkr__op_begin(op, rc);
    if (op->gen == c->gen &&
        (rc != ZOK || zkr__record_parse(value, len, &r) != ZKR__REC_RELEASE ||
         strcmp(r.node, op->path) != 0))
        carry_from(c, op->sent); /* not proved released: a death */
    zkr__op_end(op);
}

/* A new wait (docs/design/lock-delay.md, 1.5): the nodes we waited behind
 * that went since, and may have held (no exclusive node still here was
 * before them), stay owed. One alone may be proved released by the
 * record, read now: its answer comes before any later listing's (one
 * session answers in order). Otherwise our grant waits the delay from
 * now. */
static void note_departures(zkr__contender_t *c, const zkr__entry_t *e, int n)
{
    int gone = 0, blocked = 0;
    const char *last = NULL;
    zkr__op_t *op;

    for (int i = 0; i < c->nbefore; i++) {
        int k = zkr__find_entry(e, n, c->before[i]);

        if (k >= 0)
            blocked |= delay_vouches(&e[k]);
        else if (!blocked && ++gone)
            last = c->before[i];
    }
    if (gone == 0)
        return;
    if (gone == 1 && (op = zkr__cop_new(c)) != NULL) {
        if ((op->path = zkr__strdup(last)) != NULL &&
            zoo_aget(c->s->zh, c->dir, 0, proof_done, op) == ZOK)
            return;
        zkr__op_cancel(op);
    }
    carry_from(c, zkr__now_ms());
}

/* A listing made us wait (docs/design/lock-delay.md, 1.3): remember
 * the nodes before us that our grant depends on, the last exclusive one
 * (it vouches for those before it), and the node we will watch (w, or
 * -1), so that a later grant can ask whether the ones gone by then were
 * released. Departures since the last wait stay owed (note_departures).
 * Returns 0 or ZKR_ENOMEM. */
static int note_wait(zkr__contender_t *c, const zkr__entry_t *e, int n,
                     int self, int w)
{
    int k = self - 1;

    if (c->delay_ms <= 0)
        return 0;
    note_departures(c, e, n);
    forget_before(c);
    c->delay_served = 0;
    if (w >= 0 && (c->behind == NULL || strcmp(c->behind, e[w].name) != 0)) {
        free(c->behind);
        c->behind_czxid = 0;
        if ((c->behind = zkr__strdup(e[w].name)) == NULL)
            return ZKR_ENOMEM;
    }
    while (k >= 0 && !delay_vouches(&e[k]))
        k--;
    /* A trusted foreign node vouches for nothing: its library may not wait
     * for nodes it does not know (kazoo ignores zkr's). */
    if (k >= 0 && !delay_trusted(c, &e[k]) &&
        (c->vouch = zkr__strdup(e[k].name)) == NULL)
        return ZKR_ENOMEM;
    if (self > 0 && (c->before = calloc((size_t)self, sizeof(char *))) == NULL)
        return ZKR_ENOMEM;
    c->nvouched = 0;
    for (int i = 0; i < self; i++) {
        if (!delay_relevant(c, &e[i]))
            continue;
        if ((c->before[c->nbefore] = zkr__strdup(e[i].name)) == NULL)
            return ZKR_ENOMEM;
        c->nbefore++;
        if (i < k)
            c->nvouched = c->nbefore;
    }
    return 0;
}

/* A listing grants us: which of the nodes we waited behind are gone, and
 * which one a record must name for the grant to be immediate? The last
 * exclusive one covers those before it; any other gone needs its own
 * record. Returns the number gone; *target is that node's name
 * (borrowed), or NULL when no one record covers all that went. */
static int gone_since_wait(const zkr__contender_t *c, const zkr__entry_t *e,
                           int n, const char **target)
{
    int gone = 0, uncovered = 0, vouch_gone;
    const char *last = NULL;

    vouch_gone = c->vouch != NULL && zkr__find_entry(e, n, c->vouch) < 0;
    for (int i = 0; i < c->nbefore; i++) {
        if (zkr__find_entry(e, n, c->before[i]) >= 0)
            continue;
        gone++;
        if (vouch_gone &&
            (i < c->nvouched || strcmp(c->before[i], c->vouch) == 0))
            continue; /* covered by the vouch's release */
        uncovered++;
        last = c->before[i];
    }
    if (vouch_gone)
        *target = uncovered == 0 ? c->vouch : NULL;
    else
        *target = gone == 1 ? last : NULL;
    return gone;
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A record about our own node, of kind, into buf: its text, or NULL. */
static const char *own_record(zkr__contender_t *c, int kind, int64_t remaining,
                              char *buf, size_t size)
{
    zkr__record_t r;
    const char *name = strrchr(c->node, '/') + 1;

    memset(&r, 0, sizeof(r));
    r.kind = kind;
    r.czxid = c->czxid;
    if (strlen(name) < sizeof(r.node))
        strcpy(r.node, name);
    r.remaining_ms = remaining;
    r.until_ms = wall_ms() + remaining;
    strcpy(r.cause, "unreleased");
    return zkr__record_format(buf, size, &r) > 0 ? buf : NULL;
}

static void closed_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;

    (void)stat;
    zkr__op_begin(op, rc);
    zkr__op_end(op);
}

/* Sets the zkr-closed record over the directory's data of version (the
 * data we judged): a release record written since fails the version. */
static void set_closed(zkr__contender_t *c, int version)
{
    char text[ZKR__RECORD_MAX + 1];
    zkr__op_t *op;

    if (c->s->zh == NULL ||
        own_record(c, ZKR__REC_CLOSED, c->delay_until - zkr__now_ms(), text,
                   sizeof(text)) == NULL ||
        (op = zkr__op_new(c->s, NULL)) == NULL)
        return;
    if (zoo_aset(c->s->zh, c->dir, text, (int)strlen(text), version,
                 closed_done, op) != ZOK)
        zkr__op_cancel(op);
}

static void closed_read_done(int rc, const char *value, int len,
                             const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    zkr__record_t r;
    int kind;

    zkr__op_begin(op, rc);
    kind = rc == ZOK ? zkr__record_parse(value, len, &r) : ZKR__REC_NONE;
    /* A release record we did not judge may be what another waiter reads
     * next (docs/design/lock-delay.md, 1.4): left alone. */
    if (rc == ZOK && kind != ZKR__REC_RELEASE && kind != ZKR__REC_LEFT &&
        op->gen == c->gen && c->delay_until >= 0)
        set_closed(c, stat->version);
    zkr__op_end(op);
}

/* Says in ZooKeeper, for zkr inspect and zkr_lock_contenders(), that the
 * queue is closed until a wall-clock time. Informational: nothing reads it
 * to decide (a wall clock may be wrong); sent once, not retried. It
 * replaces only the data of version (the record we judged), or, with
 * version -1 (we judged none), data read now that is no release record. */
static void write_closed(zkr__contender_t *c, int version)
{
    zkr__op_t *op;

    if (!c->s->connected || c->s->zh == NULL)
        return;
    if (version >= 0) {
        set_closed(c, version);
        return;
    }
    if ((op = zkr__cop_new(c)) == NULL)
        return;
    if (zoo_aget(c->s->zh, c->dir, 0, closed_read_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* Does the record say that the node we were behind left cleanly? By
 * czxid when our watch told us it, else by name (the node was gone before
 * our watch was set). */
static int names_behind(const zkr__contender_t *c, const zkr__record_t *r)
{
    if (c->target == NULL)
        return 0; /* more than one went: no one record covers them */
    if (c->target_czxid != 0)
        return r->czxid == c->target_czxid;
    return r->node[0] != '\0' && strcmp(r->node, c->target) == 0;
}

/* Waits out wait ms from our observation, and whatever is owed from
 * before (carry_until): DELAYED for the application too, and said in
 * ZooKeeper (informational; version: write_closed()); the timer ends it. */
static void start_delay(zkr__contender_t *c, int64_t wait, int version)
{
    c->delay_until = c->delay_seen + wait;
    if (c->carry_until > c->delay_until)
        c->delay_until = c->carry_until; /* owed from before (1.5) */
    timed_add(c);
    notify_state(c, ZKR_LOCK_DELAYED);
    write_closed(c, version);
    zkr__timer_kick(c->s);
}

/* A listing grants us; if nodes we waited behind went (note_wait()), we
 * are DELAYED instead: reading the record (step), or, when no one record
 * can cover what went, waiting the full delay at once. Returns 0 or
 * ZKR_ENOMEM. */
static int begin_delay(zkr__contender_t *c, const zkr__entry_t *e, int n)
{
    const char *t;

    if (gone_since_wait(c, e, n, &t) == 0) {
        if (c->carry_until <= zkr__now_ms())
            return 0;              /* nothing we depended on went: granted */
        c->phase = ZKR__P_DELAYED; /* only what is owed from before (1.5) */
        c->delay_seen = zkr__now_ms();
        start_delay(c, 0, -1);
        return 0;
    }
    free(c->target);
    c->target = NULL;
    c->target_czxid = 0;
    if (t != NULL && (c->target = zkr__strdup(t)) == NULL)
        return ZKR_ENOMEM;
    if (t != NULL && c->behind != NULL && strcmp(c->behind, t) == 0)
        c->target_czxid = c->behind_czxid;
    c->phase = ZKR__P_DELAYED;
    c->delay_seen = zkr__now_ms();
    c->delay_until = -1;
    if (c->target == NULL)
        start_delay(c, c->delay_ms, -1);
    return 0;
}

static void record_done(int rc, const char *value, int len,
                        const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    zkr__record_t r;
    int64_t wait;
    int kind;

    zkr__op_begin(op, rc);
    if (stale(op, ZKR__P_DELAYED) || c->delay_until >= 0 ||
        zkr__is_connection_error(rc)) {
        zkr__op_end(op); /* a connection error: read again (step) */
        return;
    }
    if (rc == ZNONODE) {
        /* The directory, so our node, is gone: the listing says so. */
        c->phase = ZKR__P_LISTING;
        zkr__op_end(op);
        return;
    }
    if (rc != ZOK && rc != ZNOAUTH) {
        abort_acquire(c,
                      rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
        zkr__op_end(op);
        return;
    }
    /* Unreadable (ZNOAUTH), empty, foreign, or about another node: the
     * node we were behind went without a release we can prove. */
    kind = rc == ZOK ? zkr__record_parse(value, len, &r) : ZKR__REC_NONE;
    wait = c->delay_ms;
    if (kind == ZKR__REC_RELEASE && names_behind(c, &r))
        wait = 0;
    else if (kind == ZKR__REC_LEFT && names_behind(c, &r))
        wait = r.remaining_ms < wait ? r.remaining_ms : wait;
    if (wait <= 0 && c->carry_until <= zkr__now_ms()) {
        c->delay_served = 1;
        if (c->self_doubt)
            c->phase = ZKR__P_LISTING; /* is our node still ours? */
        else
            finish_acquire(c, 0); /* the listing granted us */
    } else {
        start_delay(c, wait, rc == ZOK && stat != NULL ? stat->version : -1);
    }
    zkr__op_end(op);
}

static void issue_record_read(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_aget(c->s->zh, c->dir, 0, record_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* The delay is over: list again. That listing re-verifies our node and
 * the queue, and grants without another delay unless a new node is before
 * us by then. */
static void end_delay(zkr__contender_t *c)
{
    zkr__metrics_delay_served(c, zkr__now_ms() - c->delay_seen);
    c->delay_served = 1;
    c->delay_until = -1;
    c->phase = ZKR__P_LISTING;
    c->pub = ZKR_LOCK_ACQUIRING;
    step(c);
}

/* Leaving while delayed (timeout, cancel, free): our delete writes how much
 * of the delay was left, so that the next waiter serves the rest. */
static void prepare_leave(zkr__contender_t *c)
{
    char text[ZKR__RECORD_MAX + 1];
    int64_t left = c->delay_until - zkr__now_ms();

    if (c->delay_until < 0 || c->leave_record != NULL)
        return; /* not decided yet: a plain delete, a death to the next */
    if (own_record(c, ZKR__REC_LEFT, left > 0 ? left : 0, text, sizeof(text)) !=
        NULL)
        c->leave_record = zkr__strdup(text);
}

/* Sets a lock-delay option of the next acquires: ZKR_ESTATE while one
 * is in progress. */
static int set_delay_option(zkr__contender_t *c, int *slot, int v)
{
    int rc = 0;

    pthread_mutex_lock(&c->s->mu);
    if (is_acquiring(c))
        rc = ZKR_ESTATE;
    else
        *slot = v;
    pthread_mutex_unlock(&c->s->mu);
    return rc;
}

int zkr__set_delay(zkr__contender_t *c, int delay_ms)
{
    if (delay_ms < 0)
        return ZBADARGUMENTS;
    return set_delay_option(c, &c->delay_ms, delay_ms);
}

int zkr__set_delay_flags(zkr__contender_t *c, unsigned flags)
{
    if ((flags & ~(unsigned)ZKR_DELAY_TRUST_FOREIGN) != 0)
        return ZBADARGUMENTS;
    return set_delay_option(c, &c->delay_flags, (int)flags);
}

/* The inputs of the grant decision, from the contender and a listing. */
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
        .touchable = c->touchable,
        .self_doubt = c->self_doubt,
        .delay_due =
            (c->before != NULL || c->carry_until >= 0) && !c->delay_served,
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
    if (note_wait(c, e, n, d.self, d.pred) != 0) {
        abort_acquire(c, ZKR_ENOMEM);
        return;
    }
    /* Our own node first, so that its deletion reaches us before the
     * answer to any later request (see zkr__node_watcher). */
    if (!c->self_watch)
        issue_self_watch(c);
    if (d.what == ZKR__D_WATCH_DIR && !op->watched) {
        /* Any change in the directory matters: list again, with a child
         * watch; that listing decides. */
        issue_list_watched(c);
    } else if (d.what == ZKR__D_WATCH_DIR) {
        set_watching(c, zkr__strdup(c->dir));
        c->watch_dir = 1;
        c->phase = ZKR__P_WATCHING;
        if (c->watching == NULL)
            abort_acquire(c, ZKR_ENOMEM);
    } else if (d.what == ZKR__D_ASK_TOUCH) {
        set_watching(c, zkr__join(c->dir, e[d.target].name));
        c->watch_dir = 0;
        c->phase = ZKR__P_WATCHING;
        if (c->watching == NULL)
            abort_acquire(c, ZKR_ENOMEM);
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

    if (stale(op, ZKR__P_LISTING)) {
        if (op->watched && rc == ZOK)
            drop_watch(s, c->dir, c, ZWATCHTYPE_CHILD);
        zkr__op_end(op);
        return;
    }
    if (zkr__is_connection_error(rc)) {
        zkr__op_end(op); /* listed again after reconnecting */
        return;
    }
    if (rc != ZOK) {
        /* NONODE: the directory (so our node) is gone. */
        abort_acquire(c,
                      rc == ZNONODE || rc == ZSESSIONEXPIRED || rc == ZCLOSING
                          ? ZKR_ELOST
                          : rc);
        zkr__op_end(op);
        return;
    }
    if (zkr__sort_children(v, &e, &n) != 0) {
        abort_acquire(c, ZKR_ENOMEM);
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
        lose_waiting(c);
        break;
    case ZKR__D_CONFLICT:
        abort_acquire(c, ZKR_ELIMIT);
        break;
    case ZKR__D_ASK_SELF:
        /* Our name is in the listing, but whether the node is still ours
         * is being asked (a change was reported on it): list again once
         * the answer comes (zkr__op_end steps us then). */
        if (!c->self_watch)
            issue_self_watch(c);
        break;
    case ZKR__D_DELAY:
        /* The nodes we waited behind are gone: released, or dead? The
         * delay's first step may find no delay is owed: granted now. */
        if (begin_delay(c, e, n) != 0)
            abort_acquire(c, ZKR_ENOMEM);
        else if (c->phase != ZKR__P_DELAYED)
            finish_acquire(c, 0);
        break;
    case ZKR__D_DELAYED:
        break; /* the delay being served decides */
    case ZKR__D_GRANT:
        finish_acquire(c, 0);
        break;
    case ZKR__D_BUSY:
        abort_acquire(c, ZKR_EBUSY);
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
        drop_watch(s, c->dir, c, ZWATCHTYPE_CHILD);
    free(e);
    zkr__op_end(op);
}

static void issue_list(zkr__contender_t *c)
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
static int take_lost(zkr__contender_t *c)
{
    if (!c->lost_unreported)
        return 0;
    c->lost_unreported = 0;
    c->pub = ZKR_LOCK_IDLE;
    fd_observed(c);
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
 * (letgo moved on: the handle freed, the lock released, the candidate
 * left, or acquired again, before it was told) is ZKR_ECANCELED, the
 * code a free gives a pending acquire: its node is gone or going, and
 * another contender may hold already, so 0 would be a lie. Otherwise the
 * grant was lost and the engine rejoined (an election): 0, and the loss
 * follows as a state change, so a late listener hears both in order. */
static int grant_result(zkr__contender_t *c, uint64_t gen, uint64_t letgo)
{
    zkr__enforce_deadline(c->s);
    if (gen == c->gen &&
        (c->phase == ZKR__P_HELD || c->phase == ZKR__P_COMMITTING))
        return 0;
    if (c->lost_unreported && c->lost_gen == gen && take_lost(c))
        return ZKR_ELOST;
    return letgo != c->letgo ? ZKR_ECANCELED : 0;
}

/* Our node was deleted by someone else while we waited: it can never be
 * granted. The acquire ends with ZKR_ELOST (a rejoining recipe starts
 * over), and the watch on our predecessor is taken back. */
static void lose_waiting(zkr__contender_t *c)
{
    if (c->watching != NULL)
        stop_watching(c);
    forget_node(c);
    finish_acquire(c, ZKR_ELOST);
}

/* Ownership of a held node is gone (session lost, node deleted by someone
 * else): the application is told once, and a rejoining recipe starts
 * over. */
static void lose_held(zkr__contender_t *c)
{
    c->phase = ZKR__P_IDLE;
    forget_node(c);
    c->lost_gen = c->gen; /* the grant lost (grant_result) */
    c->gen++;             /* answers about the old node are stale */
    c->lost_unreported = 1;
    notify_state(c, ZKR_LOCK_LOST);
    rejoin(c);
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
            drop_watch(s, op->path, c, ZWATCHTYPE_DATA);
    } else if (rc == ZNONODE ||
               (rc == ZOK && (stat->czxid != c->czxid ||
                              stat->ephemeralOwner != c->node_sid))) {
        /* Gone, or someone else's node at our path: ours was deleted.
         * (exists() leaves a watch on a missing path: take it back; the
         * other's node is not ours to watch either.) */
        c->self_watch = 0;
        c->self_doubt = 0;
        drop_watch(s, op->path, c, ZWATCHTYPE_DATA);
        if (c->phase == ZKR__P_HELD)
            lose_held(c);
        else if (is_waiting(c))
            lose_waiting(c);
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
static void issue_self_watch(zkr__contender_t *c)
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

    if (!stale(op, ZKR__P_HELD) && c->pub == ZKR_LOCK_SUSPENDED) {
        if (rc == ZOK && stat->ephemeralOwner == s->sid &&
            stat->czxid == c->czxid) {
            notify_state(c, ZKR_LOCK_HELD);
            /* A touch lost with the connection would leave a successor
             * watching us for nothing: touch again (step). */
            c->touch_due = c->recipe->poke || announces(c);
            if (!c->self_watch)
                issue_self_watch(c);
        } else if (rc == ZOK || rc == ZNONODE) {
            /* Deleted, or re-created by someone else: ownership is gone. */
            lose_held(c);
        }
        /* connection errors: verified again after the next reconnect */
    }
    zkr__op_end(op);
}

static void issue_verify(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_aexists(c->s->zh, c->node, 0, verify_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* ----------------------------------------------------------- commit */

/* A release by a caller's multi that holds the delete of our own node
 * (a work queue's ack or nack, docs/design/workq.md): the multi applies
 * only while our node exists, so it commits only while the grant is ours.
 * Its answer lost with the connection, an exists() on our node tells
 * (same session): still there, not applied (sent again); gone, the
 * caller's probe path tells. */

/* Hands our node to the cleanup list (a plain delete; short of memory,
 * with the entry reserved before the create). */
static void hand_over(zkr__contender_t *c)
{
    if (c->node == NULL)
        return;
    if (release_to_cleanup(c, NULL) != 0 && c->reserve != NULL) {
        zkr__cleanup_commit(c->s, c->reserve, c->node, c->node_sid, NULL);
        c->reserve = NULL;
    }
}

/* The session went while committing: if our multi may have applied (its
 * answer lost, or awaited still), nothing can tell now (the receipt and
 * our node went with the session): ZKR_EINDOUBT, never ZKR_ESTALE, which
 * says nothing changed. */
static int commit_gone_rc(const zkr__contender_t *c)
{
    return c->commit_unknown || (c->commit != NULL && c->commit->sent)
               ? ZKR_EINDOUBT
               : ZKR_ESTALE;
}

/* Ends the commit with rc: the grant kept (keep), or over (IDLE). */
static void end_commit(zkr__contender_t *c, int rc, int keep)
{
    zkr__commit_t *cm = c->commit;

    c->commit = NULL;
    c->commit_unknown = 0;
    if (keep) {
        c->phase = ZKR__P_HELD; /* a suspension is verified by step() */
    } else {
        c->phase = ZKR__P_IDLE;
        c->pub = ZKR_LOCK_IDLE;
        forget_node(c);
        fd_observed(c); /* the application learns it from rc */
        c->gen++;       /* answers about the old node are stale */
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

    if (stale(op, ZKR__P_COMMITTING) || cm == NULL) {
        zkr__op_end(op);
        return;
    }
    (void)s;
    cm->sent = 0;
    if (rc == ZOK) {
        end_commit(c, 0, 0);
    } else if (zkr__is_connection_error(rc)) {
        c->commit_unknown = 1; /* probed once connected (step) */
    } else if (rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE) {
        end_commit(c, ZKR_ESTALE, 0); /* our node went with the session */
    } else {
        for (int i = 0; i < cm->count && f < 0; i++)
            if (cm->results[i].err != ZOK &&
                cm->results[i].err != ZRUNTIMEINCONSISTENCY)
                f = i;
        if (f >= 0)
            e = cm->results[f].err;
        cm->failed = f;
        if (f == cm->self && e == ZNONODE) {
            end_commit(c, ZKR_ESTALE, 0); /* not ours any more */
        } else if (f >= 0 && (f == cm->keep ||
                              (cm->receipt != NULL && f == cm->receipt_idx))) {
            end_commit(c, e, 1);
        } else if (e == ZBADVERSION || e == ZNONODE || e == ZNODEEXISTS ||
                   e == ZNOTEMPTY) {
            /* Someone else changed what we meant to commit: the grant is
             * given back by a plain delete of our node. */
            hand_over(c);
            end_commit(c, ZKR_ESTALE, 0);
        } else {
            end_commit(c, e, 1); /* ZNOAUTH...: nothing applied, still ours */
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
    if (!stale(op, ZKR__P_COMMITTING) && cm != NULL &&
        !zkr__is_connection_error(rc)) {
        if (rc == ZOK)
            end_commit(c,
                       cm->probe_version >= 0 &&
                               stat->version == cm->probe_version
                           ? 0
                           : ZKR_ESTALE,
                       0);
        else if (rc == ZNONODE)
            end_commit(c, cm->probe_version < 0 ? 0 : ZKR_ESTALE, 0);
        else
            end_commit(c, ZKR_ESTALE, 0);
    }
    zkr__op_end(op);
}

static void commit_node_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__commit_t *cm = c->commit;

    if (stale(op, ZKR__P_COMMITTING) || cm == NULL ||
        zkr__is_connection_error(rc)) {
        ; /* probed again once connected */
    } else if (rc == ZOK && stat->ephemeralOwner == s->sid &&
               stat->czxid == c->czxid) {
        c->commit_unknown = 0; /* not applied: sent again (step) */
    } else if (rc != ZOK && rc != ZNONODE) {
        end_commit(c, commit_gone_rc(c), 0); /* the session went */
    } else if (cm->receipt != NULL) {
        /* Our node is gone and so is the receipt (commit_receipt_done):
         * someone else deleted our node, nothing of ours applied. */
        end_commit(c, ZKR_ESTALE, 0);
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
    if (stale(op, ZKR__P_COMMITTING) || cm == NULL ||
        zkr__is_connection_error(rc)) {
        ; /* probed again once connected */
    } else if (rc == ZOK) {
        end_commit(c, 0, 0);
    } else if (rc == ZNONODE) {
        zkr__op_t *op2 = zkr__cop_new(c);

        if (op2 != NULL &&
            zoo_aexists(s->zh, c->node, 0, commit_node_done, op2) != ZOK)
            zkr__op_cancel(op2);
    } else {
        end_commit(c, commit_gone_rc(c), 0); /* the session went */
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
    if (stale(op, ZKR__P_COMMITTING) || cm == NULL ||
        zkr__is_connection_error(rc)) {
        ; /* probed again once connected */
    } else if (rc == ZOK) {
        zkr__op_t *op2 = zkr__cop_new(c);

        if (op2 != NULL &&
            zoo_aexists(s->zh, cm->receipt, 0, commit_receipt_done, op2) != ZOK)
            zkr__op_cancel(op2);
    } else {
        end_commit(c, commit_gone_rc(c), 0); /* the session went */
    }
    zkr__op_end(op);
}

static void issue_commit(zkr__contender_t *c)
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
            end_commit(c, rc, 1);
    }
}

int zkr__commit(zkr__contender_t *c, zkr__commit_t *cm)
{
    if (c->phase == ZKR__P_RELEASING || c->phase == ZKR__P_COMMITTING)
        return ZKR_ESTATE;
    if (c->phase != ZKR__P_HELD) {
        take_lost(c); /* reported now, as ESTALE */
        return ZKR_ESTALE;
    }
    c->letgo++;
    cm->failed = -1;
    cm->sent = 0;
    c->commit = cm;
    c->commit_unknown = 0;
    c->phase = ZKR__P_COMMITTING;
    step(c);
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
    pthread_mutex_lock(&c->s->mu);
    free(c->pre_path);
    free(c->pre_data);
    c->pre_path = p;
    c->pre_data = d;
    c->pre_len = len;
    c->pre_version = version;
    pthread_mutex_unlock(&c->s->mu);
    return 0;
}

/* -------------------------------------------------------------- step */

/* Sends the request the contender's phase calls for, if none of its
 * requests is in flight and the connection is up. Every completion of a
 * contender's request calls it (zkr__op_end), so a step that found the
 * contender busy (a reconnection, a new attempt while a watch or a touch
 * was being set) is never lost. */
static void step(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;

    /* An acquire ended (timeout, cancel) while requests of its attempt
     * were in flight: abort_acquire waited for their answers. The last
     * has come: end it now (a create of unknown outcome becomes a search
     * by UUID), not when the connection or a new session comes back. */
    if (!c->m.busy && c->abort_rc != 0 &&
        (c->phase == ZKR__P_CREATING || c->phase == ZKR__P_RECOVER)) {
        abort_acquire(c, c->abort_rc);
        return;
    }
    /* Nothing goes out on a session we declared LOST, even while its
     * handle stays open until last heard + T (session.c, declare_lost): a
     * node created there would die with it while we hold it. The new
     * session steps us (zkr__queue_on_connected). */
    if (c->m.busy || !s->connected || s->zh == NULL ||
        s->state == ZKR_STATE_LOST)
        return;
    switch (c->phase) {
    case ZKR__P_CREATING:
        issue_create(c);
        break;
    case ZKR__P_RECOVER:
        issue_recover(c);
        break;
    case ZKR__P_LISTING:
        issue_list(c);
        break;
    case ZKR__P_DELAYED:
        if (c->delay_until < 0)
            issue_record_read(c); /* the record is still to be read */
        break;
    case ZKR__P_HELD:
        if (c->pub == ZKR_LOCK_SUSPENDED)
            issue_verify(c);
        else if (c->touch_due)
            poke(c);
        break;
    case ZKR__P_COMMITTING:
        issue_commit(c);
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
    if ((c->leave_record != NULL
             ? zkr__cleanup_add_record(s, c->node, c->dir, c->leave_record,
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
        finish_acquire(c, c->abort_rc);
}

void zkr__queue_retry(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER(c, s)
    {
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
            timed_add(c);
        }
        step(c);
    }
}

/* Ends an acquire early with rc once no node of it can be left behind:
 * a create in flight is waited for; a known node is handed to the cleanup
 * list (and, when connected, the acquire returns only once it is gone); a
 * create of unknown outcome while disconnected is handed over as a search
 * by UUID. */
static void abort_acquire(zkr__contender_t *c, int rc)
{
    zkr_session_t *s = c->s;

    if (!is_acquiring(c))
        return;
    if (c->abort_rc == 0)
        c->abort_rc = rc;
    switch (c->phase) {
    case ZKR__P_CREATING:
        if (c->m.busy == 0)
            finish_acquire(c, c->abort_rc);
        break;
    case ZKR__P_RECOVER:
        if (c->m.busy == 0) {
            zkr__cleanup_add(s, NULL, c->dir, c->uuid, c->node_sid, NULL);
            finish_acquire(c, c->abort_rc);
        }
        break;
    case ZKR__P_DELAYED:
        prepare_leave(c);
        /* fall through */
    case ZKR__P_LISTING:
    case ZKR__P_WATCHING:
        if (c->watching != NULL) {
            char *w = c->watching;
            set_watching(c, NULL);
            c->phase = ZKR__P_ABORTING;
            drop_watch(s, w, c,
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
        forget_node(c);
        finish_acquire(c, c->abort_rc);
    } else if (c->phase == ZKR__P_RELEASING) {
        finish_release(c, rc);
    }
}

/* -------------------------------------------------- session hooks */

void zkr__queue_on_connected(zkr_session_t *s, int new_session)
{
    ZKR__EACH_CONTENDER(c, s)
    {
        /* A node of another session is not ours to hold or wait with
         * (zkr__queue_on_lost ended those it saw; this catches any other). */
        if (new_session && c->node != NULL && c->node_sid != s->sid) {
            if (c->phase == ZKR__P_HELD) {
                lose_held(c);
                continue;
            }
            if (is_waiting(c)) {
                lose_waiting(c);
                continue;
            }
            if (c->phase == ZKR__P_COMMITTING) {
                end_commit(c, commit_gone_rc(c), 0); /* the session went */
                continue;
            }
        }
        if (c->phase == ZKR__P_WATCHING) {
            /* The client re-registers watches on reconnect, but a release
             * may have happened while we were away: look again. */
            clear_watching(c);
            c->phase = ZKR__P_LISTING;
        }
        step(c);
    }
}

void zkr__queue_on_suspended(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER(c, s)
    if ((c->phase == ZKR__P_HELD || c->phase == ZKR__P_COMMITTING) &&
        c->pub == ZKR_LOCK_HELD)
        notify_state(c, ZKR_LOCK_SUSPENDED);
}

/* An adopted handle outlives our LOST: the server may still keep its
 * session, and with it every node zkr created, which would block everyone
 * else for as long as the application keeps its handle Hand
 * them to the cleanup list, which deletes them through that handle once it
 * reaches the server (entries of this session id are kept when the same
 * session comes back, dropped when it expires). A create in flight is
 * deleted by its completion (create_done: stale); one of unknown
 * outcome is searched for by UUID. */
static void adopted_lost_nodes(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER(c, s)
    {
        if (c->phase == ZKR__P_RECOVER)
            zkr__cleanup_add(s, NULL, c->dir, c->uuid, c->node_sid, NULL);
        else if (c->node != NULL &&
                 (c->phase == ZKR__P_LISTING || c->phase == ZKR__P_WATCHING ||
                  c->phase == ZKR__P_DELAYED || c->phase == ZKR__P_HELD))
            zkr__cleanup_add(s, c->node, NULL, NULL, c->node_sid, NULL);
    }
}

void zkr__queue_on_lost(zkr_session_t *s)
{
    if (!s->owned)
        adopted_lost_nodes(s);
    ZKR__EACH_CONTENDER(c, s)
    {
        zkr__cleanup_disown(s, &c->m);
        if (is_acquiring(c)) {
            /* Whatever node this attempt had died with the session. */
            c->phase = ZKR__P_IDLE;
            finish_acquire(c, c->abort_rc != 0 ? c->abort_rc : ZKR_ELOST);
        } else if (c->phase == ZKR__P_HELD) {
            lose_held(c);
        } else if (c->phase == ZKR__P_RELEASING) {
            finish_release(c, 0); /* the node went with the session */
        } else if (c->phase == ZKR__P_COMMITTING) {
            end_commit(c, commit_gone_rc(c), 0); /* workq.md, section 4 */
        }
    }
}

/* The session's timed list: the contenders whose deadline, watch_due or
 * delay_until was set, and has not been seen unset since. Only they can have a
 * timer, so zkr__queue_on_deadline visits only them. */
static void timed_add(zkr__contender_t *c)
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

static void timed_remove(zkr__contender_t *c)
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
           (c->phase == ZKR__P_DELAYED && c->delay_until >= 0 &&
            now >= c->delay_until) ||
           (is_acquiring(c) && c->deadline >= 0 && c->abort_rc == 0 &&
            now >= c->deadline);
}

/* Acts on c's expired timers, and lowers *next to its others. */
static void timer_run(zkr__contender_t *c, int64_t now, int64_t *next)
{
    if (c->phase == ZKR__P_HELD && c->watch_due >= 0 && c->s->connected) {
        if (now >= c->watch_due)
            issue_self_watch(c);
        else if (*next < 0 || c->watch_due < *next)
            *next = c->watch_due;
    }
    if (c->phase == ZKR__P_DELAYED && c->delay_until >= 0) {
        if (now >= c->delay_until)
            end_delay(c);
        else if (*next < 0 || c->delay_until < *next)
            *next = c->delay_until;
    }
    if (!is_acquiring(c) || c->deadline < 0 || c->abort_rc != 0)
        return;
    if (now >= c->deadline)
        abort_acquire(c, ZKR_ETIMEDOUT);
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
        if (c->watch_due < 0 && c->deadline < 0 && c->delay_until < 0) {
            timed_remove(c);
        } else if (!timer_due(c, now)) {
            timer_run(c, now, next);
        } else {
            timed_remove(c);
            c->tnext = due;
            due = c;
        }
    }
    for (c = timed_sort(due); c != NULL; c = n) {
        n = c->tnext;
        timed_add(c);
        timer_run(c, now, next);
    }
}

/* ------------------------------------------------------ public core */

int zkr__contender_init(zkr__contender_t *c, zkr_session_t *s,
                        const zkr__recipe_t *recipe, void *owner,
                        const char *dir, const char *id,
                        const struct ACL_vector *acl)
{
    return zkr__contender_init2(c, s, recipe, owner, dir, NULL, id, acl);
}

int zkr__contender_init2(zkr__contender_t *c, zkr_session_t *s,
                         const zkr__recipe_t *recipe, void *owner,
                         const char *dir, const char *mpath, const char *id,
                         const struct ACL_vector *acl)
{
    char idbuf[300];
    int rc;

    memset(c, 0, sizeof(*c));
    c->fd[0] = c->fd[1] = -1;
    if (s == NULL || zkr__check_path(dir) != 0)
        return ZBADARGUMENTS;
    if (id == NULL) {
        zkr__default_id(idbuf, sizeof(idbuf));
        id = idbuf;
    }
    if (zkr__check_id(id) != 0 || (acl != NULL && acl->count <= 0))
        return ZBADARGUMENTS;
    c->s = s;
    c->recipe = recipe;
    c->owner = owner;
    c->deadline = -1;
    c->watch_due = -1;
    c->delay_until = -1;
    c->carry_until = -1;
    c->permits = 1;
    c->dir = zkr__strdup(dir);
    c->data = zkr__strdup(id);
    if (c->dir == NULL || c->data == NULL) {
        rc = ZKR_ENOMEM;
        goto fail;
    }
    /* The default ACL is shared, not copied: a process holding many locks
     * saves three allocations per handle. */
    if (acl == NULL)
        c->acl = ZOO_OPEN_ACL_UNSAFE;
    else if ((rc = zkr__acl_copy(&c->acl, acl)) != 0)
        goto fail;
    else
        c->acl_owned = 1;
    if (pthread_cond_init(&c->done_cv, NULL) != 0) {
        rc = ZKR_ESYS;
        goto fail;
    }
    pthread_mutex_lock(&s->mu);
    c->mpath = mpath;
    rc = s->closing ? ZKR_ECLOSED : zkr__metrics_attach(c);
    c->mpath = NULL;
    if (rc != 0) {
        pthread_mutex_unlock(&s->mu);
        pthread_cond_destroy(&c->done_cv);
        goto fail;
    }
    zkr__session_attach(s, &c->m);
    pthread_mutex_unlock(&s->mu);
    return 0;
fail:
    free(c->dir);
    free(c->data);
    if (c->acl_owned)
        zkr__acl_free(&c->acl);
    memset(c, 0, sizeof(*c));
    return rc;
}

void zkr__contender_destroy(zkr__contender_t *c, void (*dispose)(void *))
{
    zkr_session_t *s = c->s;

    pthread_mutex_lock(&s->mu);
    c->dispose = dispose;
    c->letgo++;
    if (is_acquiring(c)) {
        abort_acquire(c, ZKR_ECANCELED);
        /* Do not wait for a delete, a create or a recovery in flight: the
         * session deletes what they leave (a create answered after this
         * is stale and deleted; a recovery's node is searched by UUID). */
        zkr__cleanup_disown(s, &c->m);
        if (is_acquiring(c)) {
            if (c->phase == ZKR__P_RECOVER)
                zkr__cleanup_add(s, NULL, c->dir, c->uuid, c->node_sid, NULL);
            finish_acquire(c, c->abort_rc);
        }
    } else if (c->phase == ZKR__P_HELD) {
        /* Freed while held: the application let go, a release. Short of
         * memory, the entry reserved before the create (no record). */
        if (release_to_cleanup(c, NULL) != 0 && c->reserve != NULL) {
            zkr__cleanup_commit(s, c->reserve, c->node, c->node_sid, NULL);
            c->reserve = NULL;
        }
        c->phase = ZKR__P_IDLE;
        forget_node(c);
    } else if (c->phase == ZKR__P_RELEASING) {
        zkr__cleanup_disown(s, &c->m);
        finish_release(c, 0);
    } else if (c->phase == ZKR__P_COMMITTING) {
        /* The multi in flight applies or not; either way our node goes
         * (a plain delete of a node already gone is harmless). */
        hand_over(c);
        end_commit(c, ZKR_ECANCELED, 0);
    }
    /* A create still in flight ends in create_done, which sees a stale
     * generation and deletes what it made: wait for it (its answer comes
     * on ZooKeeper's thread). Queued callbacks (the canceled completion
     * among them) run on the event thread: another thread waits for them;
     * the event thread itself cannot, they queue behind the callback it is
     * running (this one's, or another handle's), so it leaves the rest of
     * the free to the last of them. In event-loop mode the thread inside
     * zkr_session_dispatch() is the event thread; another thread waits
     * only while that dispatch lasts, and with none running leaves the
     * rest to a later dispatch (zkr__callbacks_later). */
    c->gen++;
    while (c->m.busy > 0 || c->sync_waiters > 0 ||
           (c->m.events > 0 && !zkr__callbacks_later(s)))
        pthread_cond_wait(&s->cv, &s->mu);
    if (c->m.events > 0)
        c->m.freeing = 1;
    else
        zkr__contender_dispose(c);
    pthread_mutex_unlock(&s->mu);
}

void zkr__contender_dispose(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;

    if (c->watching != NULL)
        drop_watch(s, c->watching, c,
                   c->watch_dir ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA);
    zkr__session_detach(s, &c->m);
    timed_remove(c);
    forget_node(c);
    free(c->dir);
    free(c->data);
    free(c->pre_path);
    free(c->pre_data);
    if (c->acl_owned)
        zkr__acl_free(&c->acl);
    if (c->fd[0] >= 0) {
        close(c->fd[0]);
        close(c->fd[1]);
    }
    pthread_cond_destroy(&c->done_cv);
    c->dispose(c->owner);
}

/* Begins a new attempt: a new UUID, a new generation (answers to any
 * earlier attempt become stale), and a deadline. */
static void start_attempt(zkr__contender_t *c, int timeout_ms)
{
    zkr_session_t *s = c->s;

    c->lost_unreported = 0;
    forget_node(c);
    zkr__metrics_attempt(c);
    c->gen++;
    new_uuid(c);
    c->phase = ZKR__P_CREATING;
    c->pub = ZKR_LOCK_ACQUIRING;
    c->abort_rc = 0;
    c->parents_made = 0;
    c->try_once = timeout_ms == 0;
    /* A try still needs round trips; bound it by the session timeout in
     * case the connection drops half-way. */
    c->deadline = timeout_ms > 0 ? zkr__now_ms() + timeout_ms
                  : timeout_ms == 0
                      ? zkr__now_ms() + (s->timeout > 0 ? s->timeout : 10000)
                      : -1;
    if (c->deadline >= 0)
        timed_add(c);
    step(c);
    /* Only a deadline gives the timer thread something to do: waking it
     * for every acquire would cost two context switches per grant. */
    if (c->deadline >= 0)
        zkr__timer_kick(s);
}

/* A contender that rejoins (an election candidate) starts over after its
 * node or session is lost, keeping its completion: it stays in the queue
 * until it leaves. Returns 1 if it did. */
static int rejoin(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;

    /* Not when the session will never come back (adopted, or told not to
     * reconnect): the election then ends with ZKR_ELOST. */
    if (!c->rejoin || s->closing ||
        (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned)))
        return 0;
    c->acq_fn = c->rejoin_fn;
    c->acq_data = c->rejoin_data;
    c->acq_sync = 0;
    start_attempt(c, -1);
    return 1;
}

int zkr__acquire(zkr__contender_t *c, int timeout_ms, void (*fn)(void),
                 void *data)
{
    zkr_session_t *s = c->s;
    int sync = fn == NULL, rc = 0;

    if (timeout_ms < -1)
        return ZBADARGUMENTS;
    if (sync && zkr__in_callback())
        return ZKR_EDEADLK;
    zkr__lock_fresh(s);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
        rc = ZKR_ELOST;
    else if (c->phase == ZKR__P_RELEASING)
        rc = ZKR_ESTATE;
    else if (c->phase != ZKR__P_IDLE || is_acquiring(c) || c->acq_sync)
        rc = ZKR_EALREADY; /* acq_sync: a blocking acquire not returned yet,
                              whose completion fields are in use */
    else if (c->pair != NULL &&
             (c->pair->phase != ZKR__P_IDLE || is_acquiring(c->pair)))
        rc = ZKR_ESTATE; /* the pair's other side has a node (see pair) */
    else if (timeout_ms == 0 && !s->connected)
        rc = ZCONNECTIONLOSS;
    if (rc != 0) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    fd_observed(c); /* the application acquires again: it knows */
    c->letgo++;
    /* The completion is in place before the attempt starts: a request
     * that cannot even be sent ends the acquire inside start_attempt. */
    c->acq_sync = sync;
    c->acq_done = 0;
    c->acq_fn = fn;
    c->acq_data = data;
    start_attempt(c, timeout_ms);
    if (sync) {
        c->sync_waiters++;
        while (!c->acq_done)
            pthread_cond_wait(&c->done_cv, &s->mu);
        rc = c->acq_rc;
        /* Granted, but this thread may run long after (the process was
         * paused, say): a grant lost or let go meanwhile is not returned
         * as held. */
        if (rc == 0)
            rc = grant_result(c, c->acq_gen, c->acq_letgo);
        c->acq_sync = 0;
        c->sync_waiters--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void zkr__acquired_recheck(zkr__contender_t *c, zkr__event_t *ev)
{
    if (ev->a != 0)
        return;
    /* Delivered now, posted maybe long ago: the synchronous acquire's
     * check when it wakes (zkr__acquire), at the time the application
     * learns of the grant. */
    ev->a = grant_result(c, ev->gen, ev->letgo);
    if (ev->a != 0)
        ev->gen = c->gen; /* the end is reported now, as current */
}

int zkr__cancel(zkr__contender_t *c)
{
    int rc = 0;

    pthread_mutex_lock(&c->s->mu);
    if (is_acquiring(c))
        abort_acquire(c, ZKR_ECANCELED);
    else
        rc = ZKR_ESTATE;
    pthread_mutex_unlock(&c->s->mu);
    return rc;
}

int zkr__release(zkr__contender_t *c, void (*fn)(void), void *data)
{
    zkr_session_t *s = c->s;
    int sync = fn == NULL, rc = 0;

    if (sync && zkr__in_callback())
        return ZKR_EDEADLK;
    zkr__lock_fresh(s);
    if (s->closing) {
        rc = ZKR_ECLOSED; /* in a forked child: the parent still holds */
    } else if (is_acquiring(c)) {
        rc = ZKR_ESTATE;
    } else if (take_lost(c)) {
        rc = ZKR_ELOST;
    } else if (c->phase != ZKR__P_HELD) {
        rc = ZKR_ENOTHELD;
    }
    if (rc == 0 || rc == ZKR_ELOST || rc == ZKR_ENOTHELD)
        c->letgo++; /* whatever was granted, the application let go */
    if (rc != 0) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    c->phase = ZKR__P_RELEASING;
    c->pub = ZKR_LOCK_RELEASING;
    zkr__metrics_hold_end(c); /* the application let go */
    c->rel_pending = 1;
    c->rel_sync = sync;
    c->rel_done = 0;
    c->rel_fn = fn;
    c->rel_data = data;
    rc = release_to_cleanup(c, &c->m);
    if (rc != 0 && c->reserve != NULL) { /* short of memory: no record */
        zkr__cleanup_commit(s, c->reserve, c->node, c->node_sid, &c->m);
        c->reserve = NULL;
        rc = 0;
    }
    if (rc != 0) {
        c->phase = ZKR__P_HELD;
        c->pub = ZKR_LOCK_HELD;
        c->rel_pending = 0;
    } else if (sync) {
        c->sync_waiters++;
        while (!c->rel_done)
            pthread_cond_wait(&c->done_cv, &s->mu);
        rc = c->rel_rc;
        c->sync_waiters--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int64_t zkr__valid_ms(zkr__contender_t *c)
{
    int64_t v = 0;

    pthread_mutex_lock(&c->s->mu);
    if (c->pub == ZKR_LOCK_HELD)
        v = zkr__session_valid_locked(c->s);
    pthread_mutex_unlock(&c->s->mu);
    return v;
}

/* ------------------------------------------------------ observation */

void zkr_contenders_free(zkr_contender_t *v, int count)
{
    if (v == NULL)
        return;
    zkr__listing_forget(v);
    for (int i = 0; i < count; i++) {
        free(v[i].node);
        free(v[i].id);
    }
    free(v);
}

/* Reads one contender's data and stat. 1 = filled, 0 = gone, <0 error.
 * *unled: its name announces and it has not touched its node (a candidate
 * waiting out its lock-delay, new_uuid()). */
static int read_contender(zhandle_t *zh, const char *dir, const zkr__entry_t *e,
                          zkr_contender_t *out, int *unled)
{
    char buf[ZKR_ID_MAX + 1];
    int len = ZKR_ID_MAX;
    struct Stat st;
    char *path = zkr__join(dir, e->name);
    int rc;

    if (path == NULL)
        return ZKR_ENOMEM;
    rc = zoo_get(zh, path, 0, buf, &len, &st);
    if (rc == ZNONODE) {
        free(path);
        return 0;
    }
    if (rc != ZOK) {
        free(path);
        return rc;
    }
    buf[len > 0 ? len : 0] = '\0';
    out->node = path;
    out->id = zkr__strdup(buf);
    out->seq = e->seq;
    out->czxid = st.czxid;
    out->ctime_ms = st.ctime;
    out->session_id = st.ephemeralOwner;
    *unled = zkr__name_announces(e->name) && st.version == 0;
    return out->id != NULL ? 1 : ZKR_ENOMEM;
}

int zkr_contenders_list(zkr_session_t *s, const char *path,
                        zkr_contender_t **out, int *count)
{
    struct String_vector kids = {0, NULL};
    zkr__entry_t *e = NULL;
    zkr_contender_t *v = NULL;
    zhandle_t *zh;
    int n = 0, k = 0, rc;

    if (out == NULL || count == NULL)
        return ZBADARGUMENTS;
    *out = NULL;
    *count = 0;
    if ((rc = zkr__read_begin(s, path, &zh)) != 0)
        return rc;
    rc = zoo_get_children(zh, path, 0, &kids);
    if (rc == ZNONODE) {
        rc = 0;
        goto out;
    }
    if (rc != ZOK || (rc = zkr__sort_children(&kids, &e, &n)) != 0 || n == 0)
        goto out;
    v = calloc((size_t)n, sizeof(*v));
    if (v == NULL) {
        rc = ZKR_ENOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int unled = 0, r = read_contender(zh, path, &e[i], &v[k], &unled);
        if (r < 0) {
            rc = r;
            goto out;
        }
        k += r;
        if (r == 1 && unled && (rc = zkr__listing_unled(v, k - 1)) != 0)
            goto out;
    }
    *out = v;
    *count = k;
    v = NULL;
out:
    zkr__zh_put(s);
    zkr_contenders_free(v, k);
    free(e);
    deallocate_String_vector(&kids);
    if (*out != NULL && *count == 0) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int zkr__path_watched(zkr_session_t *s, const char *path, int wtype)
{
    (void)wtype; /* removal is by path and type: spare any user of path */
    return path_watched_by_other(s, path, NULL) || zkr__observed(s, path);
}
