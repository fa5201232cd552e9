/* Leader election: the contender-queue engine with the mutex rule (the
 * oldest candidate leads), Curator LeaderLatch naming, a loss policy, and a
 * candidate that rejoins after losing its session. Plus observers, which
 * follow the leader without creating anything.
 *
 * Leadership is derived, never stored: a candidate leads while the engine
 * says its grant is HELD, or also while SUSPENDED under the session policy.
 * The engine already re-verifies a grant after reconnecting (our node must
 * exist with our czxid and belong to our current session) before it says
 * HELD again, which is the check whose absence gave Curator double leaders
 * (CURATOR-696, -620, -652). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recipes.h"

struct zkr_election {
    zkr__contender_t c;
    zkr_loss_policy_t policy;
    /* Guarded by the session mutex: */
    int joined;       /* the application's intent: in the election */
    int joining;      /* threads between marking joined and starting the
                         acquire: leave() waits for them (see enter()) */
    int reported;     /* leadership last told to the listener (event
                         thread) */
    int error;        /* what ended participation, if anything */
    int running;      /* zkr_election_run() is inside the leader function */
    pthread_t runner; /* ... on this thread */
    int self_left;    /* the leader function called leave(): run()
                         resigns once it returns */
    int stopping;     /* leave asked it to stop: not leader meanwhile,
                         and join() says ZKR_ESTATE until it resigned */
    int busy;         /* threads inside join(), leave(), await() or run()
                         (busy_enter()) */
    int closing;      /* zkr_election_free() was called: it waits for the
                         busy ones (or left the free to the last of them:
                         free_deferred) */
    int free_deferred;
    int rejoin; /* a loss starts the candidacy over (rejoins()) */
    /* The descriptor's rule (election_signal()), guarded by the mutex: */
    int uncertain;        /* SUSPENDED, until re-verified (under the
                             suspend policy: a stop signal) */
    int gained;           /* leads, and the application has not observed it
                             yet: readable until observed */
    int away;             /* the application's last observation was "not
                             leading" (an await() that did not return 0) */
    uint64_t suspensions; /* times it became SUSPENDED: run() asks whether
                             its function was told to stop by one */
    unsigned forks;       /* the session's fork count these counts belong to */
    zkr_election_listener_t fn;
    void *data;
};

/* The engine only needs a non-NULL completion and state listener to post
 * events; what they mean is decided in election_deliver. */
static void marker(void)
{
}

/* Where another thread's leave() can interleave with join() or run(): a
 * link seam (src/base/base.h), empty here. */
__attribute__((weak)) void zkr__election_race_point(void)
{
}

static int leading(const zkr_election_t *e)
{
    if (e->stopping)
        return 0;
    return e->c.pub == ZKR_LOCK_HELD ||
           (e->policy == ZKR_POLICY_SESSION && e->c.pub == ZKR_LOCK_SUSPENDED);
}

/* The leadership an engine event reports: a grant leads, a re-verified
 * grant leads, SUSPENDED leads only under the session policy, a loss or a
 * resignation (IDLE, posted by resign()) does not. Derived from the event,
 * never from the state at delivery: the event thread may run late, after a
 * loss and a new grant, and the current state would then hide both. */
static int event_leads(const zkr_election_t *e, const zkr__event_t *ev)
{
    if (ev->kind == ZKR__EV_ACQUIRED)
        return ev->a == 0;
    if (ev->kind != ZKR__EV_STATE)
        return e->reported;
    if (ev->a == ZKR_LOCK_HELD)
        return 1;
    if (ev->a == ZKR_LOCK_SUSPENDED)
        return e->policy == ZKR_POLICY_SESSION;
    return 0;
}

/* Runs on the event thread: turns engine events, in order, into "leader or
 * not" and tells the listener of every change. */
static void election_deliver(zkr__contender_t *c, const zkr__event_t *ev)
{
    zkr_election_t *e = c->owner;
    zkr_election_listener_t fn;
    void *data;
    int lead, rc = 0, tell;

    pthread_mutex_lock(&c->s->mu);
    if (c->m.freeing) { /* freed from a callback: no more news */
        pthread_mutex_unlock(&c->s->mu);
        return;
    }
    if (ev->kind == ZKR__EV_ACQUIRED && ev->a != 0 && ev->a != ZKR_ECANCELED &&
        ev->gen != c->gen) {
        /* The error of an attempt that is over: a leave() and a join()
         * came between its end and its delivery, and the new candidacy
         * goes on. Ending it here would un-join a candidate that still
         * queues (and may lead), so that leave() would not resign. */
        pthread_mutex_unlock(&c->s->mu);
        return;
    }
    if (ev->kind == ZKR__EV_ACQUIRED && ev->a != 0 && ev->a != ZKR_ECANCELED) {
        /* Not a loss (those rejoin inside the engine): an error such as
         * ZNOAUTH ended participation. That is a change a poll() loop
         * must hear of: the descriptor is readable until an await()
         * reports the error. */
        e->joined = 0;
        e->rejoin = 0;
        e->error = rc = ev->a;
        zkr__contender_signal(c);
        pthread_cond_broadcast(&c->s->cv);
    }
    if (ev->kind == ZKR__EV_STATE && ev->a == ZKR_LOCK_LOST && e->joined &&
        c->pub == ZKR_LOCK_LOST) {
        /* Lost, and the engine did not rejoin: the session will never come
         * back (adopted, or no reconnection). Participation is over. */
        e->joined = 0;
        e->rejoin = 0;
        e->error = rc = ZKR_ELOST;
        pthread_cond_broadcast(&c->s->cv);
    }
    lead = event_leads(e, ev);
    tell = lead != e->reported || rc != 0;
    e->reported = lead;
    fn = e->fn;
    data = e->data;
    pthread_mutex_unlock(&c->s->mu);
    if (tell && fn != NULL)
        fn(e, lead, rc, data);
}

/* A candidate still in the election starts over after a loss. */
static int election_rejoins(const zkr__contender_t *c)
{
    const zkr_election_t *e = c->owner;

    return e->rejoin;
}

/* The descriptor says "stop" while leadership is uncertain (SUSPENDED,
 * under the suspend policy: under the session policy a candidate keeps
 * leading through SUSPENDED, and a poll loop on a descriptor saying stop
 * would spin for the whole disconnection), and signals a gain of
 * leadership the application has not observed yet (a grant, or a
 * re-verification after the application saw it did not lead), so that a
 * poll() loop wakes to lead as well as to stop. That cannot hide a stop
 * from a running leader function: it starts with everything observed, so
 * a new grant can only follow a loss (which the engine keeps signalled),
 * and away is only set by an await() that failed, which run() does not
 * call while the function runs. Mutex held. */
static int election_signal(zkr__contender_t *c, zkr__fdev_t ev)
{
    zkr_election_t *e = c->owner;

    switch (ev) {
    case ZKR__FD_OBSERVED:
        e->uncertain = e->gained = e->away = 0;
        break;
    case ZKR__FD_GRANTED:
        e->uncertain = 0;
        e->gained = 1;
        break;
    case ZKR__FD_SUSPENDED:
        e->suspensions++;
        e->uncertain = e->policy != ZKR_POLICY_SESSION;
        break;
    case ZKR__FD_HELD: /* the same grant, re-verified */
        e->uncertain = 0;
        e->gained |= e->away; /* seen not leading, leads again: a gain */
        break;
    case ZKR__FD_LOST:
        e->uncertain = 0;
        break;
    case ZKR__FD_DELAYED:
        break;
    }
    return e->uncertain || e->gained;
}

static const zkr__recipe_t election_recipe = {
    .marker = "-latch-",
    .mode = 'l',
    .pred = zkr__pred_mutex,
    .deliver = election_deliver,
    .kind = "election",
    .flags = ZKR__R_ANNOUNCES | ZKR__R_LEADS,
    .rejoins = election_rejoins,
    .rejoin_fn = marker,
    .signal = election_signal,
};

int zkr_election_new(zkr_election_t **out, zkr_session_t *s, const char *path,
                     const char *id, const struct ACL_vector *acl,
                     zkr_loss_policy_t policy)
{
    zkr_election_t *e;
    int rc;

    if (out == NULL || s == NULL ||
        (policy != ZKR_POLICY_SUSPEND && policy != ZKR_POLICY_SESSION))
        return ZBADARGUMENTS;
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return ZKR_ENOMEM;
    rc = zkr__contender_init(&e->c, s, &election_recipe, e, path, id, acl);
    if (rc != 0) {
        free(e);
        return rc;
    }
    e->policy = policy;
    pthread_mutex_lock(&s->mu);
    e->forks = s->forks;
    e->c.lis_fn = marker;
    pthread_mutex_unlock(&s->mu);
    *out = e;
    return 0;
}

/* In a forked child (mutex held): the calls active in the parent (a
 * run() in its leader function, a leave() waiting for it, ...) were on
 * threads that do not exist here, and nothing may wait for them. */
static void forget_parent_calls(zkr_election_t *e)
{
    if (e->forks == e->c.s->forks)
        return;
    e->forks = e->c.s->forks;
    e->busy = 0;
    e->joining = 0;
    e->running = 0;
    e->self_left = 0;
    e->stopping = 0;
}

void zkr_election_free(zkr_election_t *e)
{
    zkr_session_t *s;

    if (e == NULL)
        return;
    s = e->c.s;
    pthread_mutex_lock(&s->mu);
    forget_parent_calls(e);
    e->joined = 0;
    e->rejoin = 0;
    e->fn = NULL; /* the listener is not called after free returns */
    if (e->busy > 0) {
        /* Another call is active: a run()'s leader function stops before
         * our node goes (as for a leave), a join() in its gap gives up,
         * and each returns without touching the handle again. From the
         * function itself, or from a callback (which must not wait), the
         * last of them to return frees. */
        e->closing = 1;
        e->stopping = 1;
        zkr__contender_signal(&e->c);
        pthread_cond_broadcast(&s->cv);
        if ((e->running && pthread_equal(e->runner, pthread_self())) ||
            zkr__in_callback()) {
            e->free_deferred = 1;
            pthread_mutex_unlock(&s->mu);
            return;
        }
        while (e->busy > 0)
            pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    zkr__contender_destroy(&e->c, free); /* cancels, or deletes our node */
}

/* Counts a call of the application's into e (join, leave, await, run), so
 * that a zkr_election_free() on another thread waits for it. Refused
 * (ZKR_ESTATE) once the free has begun. */
static int busy_enter(zkr_election_t *e)
{
    int rc = 0;

    pthread_mutex_lock(&e->c.s->mu);
    forget_parent_calls(e);
    if (e->closing)
        rc = ZKR_ESTATE;
    else
        e->busy++;
    pthread_mutex_unlock(&e->c.s->mu);
    return rc;
}

/* Ends busy_enter() and returns rc. Nothing of e may be touched after:
 * the free waiting for us may dispose of it at once, or (a free deferred
 * from the leader function or a callback) we are the last and free it. */
static int busy_exit(zkr_election_t *e, int rc)
{
    zkr_session_t *s = e->c.s;
    int last;

    pthread_mutex_lock(&s->mu);
    last = --e->busy == 0 && e->free_deferred;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (last)
        zkr__contender_destroy(&e->c, free);
    return rc;
}

/* Marks the candidate joined and starts its acquire. fresh: a join (the
 * candidate must not be joined); else run()'s return to the queue after
 * resigning (only if still joined: a leave() meanwhile wins). The mark
 * and the start cannot be one critical section (the engine's acquire takes
 * the mutex itself), so `joining` covers the gap: a leave() waits until
 * the acquire has started, then cancels it. Without that, a leave() in
 * the gap returned 0 and the acquire then made a phantom leader. A join
 * while a leave waits for the leader function to stop (or, left from
 * inside it, for run() to resign) is refused: that resignation would
 * give away what the join won and leave it joined with no node. */
static int enter(zkr_election_t *e, int fresh)
{
    zkr_session_t *s = e->c.s;
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    if (fresh && e->stopping)
        rc = ZKR_ESTATE; /* a leave is still waiting for the function */
    else if (fresh && e->joined)
        rc = ZKR_EALREADY;
    else if (!fresh && !e->joined)
        rc = ZKR_ESTATE;
    if (rc != 0) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    e->joined = 1;
    e->error = 0;
    e->rejoin = 1;
    e->joining++;
    pthread_mutex_unlock(&s->mu);
    zkr__election_race_point();
    /* A free began in the gap: give up (it waits for us). */
    pthread_mutex_lock(&s->mu);
    rc = e->closing ? ZKR_ESTATE : 0;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        rc = zkr__acquire(&e->c, -1, marker, e);
    pthread_mutex_lock(&s->mu);
    e->joining--;
    if (rc != 0 && e->joined) {
        e->joined = 0;
        e->rejoin = 0;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr_election_join(zkr_election_t *e)
{
    int rc;

    if (e == NULL)
        return ZBADARGUMENTS;
    if ((rc = busy_enter(e)) != 0)
        return rc;
    return busy_exit(e, enter(e, 1));
}

/* Gives up our place (leadership or queue) and waits until it is gone,
 * then has the event thread tell the listener (a resignation posts no
 * engine event; the listener would otherwise miss it, and the next grant
 * after a join would look unchanged to it). */
static int resign(zkr_election_t *e)
{
    zkr_session_t *s = e->c.s;
    int acquiring, rc;

    pthread_mutex_lock(&s->mu);
    e->rejoin = 0;
    acquiring = e->c.pub == ZKR_LOCK_ACQUIRING || e->c.pub == ZKR_LOCK_DELAYED;
    pthread_mutex_unlock(&s->mu);
    if (acquiring && zkr__cancel(&e->c) == 0) {
        pthread_mutex_lock(&s->mu);
        while (e->c.pub == ZKR_LOCK_ACQUIRING || e->c.pub == ZKR_LOCK_DELAYED)
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    rc = zkr__release(&e->c, NULL, NULL);
    pthread_mutex_lock(&s->mu);
    /* run() and a leave() may resign at once: the one whose release found
     * the other's in flight returns only when the node is gone too. */
    while (e->c.pub == ZKR_LOCK_RELEASING)
        pthread_cond_wait(&s->cv, &s->mu);
    zkr__post(s, ZKR__EV_STATE, (int)ZKR_LOCK_IDLE, &e->c.m, marker, NULL);
    pthread_mutex_unlock(&s->mu);
    /* Not holding, or held by a session now lost: either way it is gone. */
    return rc == ZKR_ENOTHELD || rc == ZKR_ELOST ? 0 : rc;
}

/* zkr_election_leave() without its bookkeeping of active calls. */
static int leave(zkr_election_t *e)
{
    zkr_session_t *s = e->c.s;
    int joined, rc;

    pthread_mutex_lock(&s->mu);
    if (e->running && pthread_equal(e->runner, pthread_self())) {
        /* From the leader function: it is the caller, so waiting for it
         * would deadlock. Leadership ends now for the application (not
         * leader, descriptor readable); run() resigns as soon as the
         * function returns, so the next leader cannot start beside it. */
        joined = e->joined;
        if (joined) {
            e->joined = 0;
            e->rejoin = 0;
            e->self_left = 1;
            e->stopping = 1;
            zkr__contender_signal(&e->c);
        }
        pthread_mutex_unlock(&s->mu);
        return joined ? 0 : ZKR_ESTATE;
    }
    pthread_mutex_unlock(&s->mu);
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&s->mu);
    joined = e->joined;
    e->joined = 0;
    e->rejoin = 0;
    /* A join() between its mark and its acquire: let the acquire start,
     * so that resign() below cancels it. */
    while (e->joining > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    /* A leader function still running must stop before our node goes,
     * or it would overlap with the next leader's: tell it (is_leader is 0
     * and the descriptor readable from now on) and wait for it. */
    if (e->running) {
        e->stopping = 1;
        zkr__contender_signal(&e->c);
        while (e->running)
            pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (!joined)
        return ZKR_ESTATE;
    rc = resign(e);
    pthread_mutex_lock(&s->mu);
    e->stopping = 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr_election_leave(zkr_election_t *e)
{
    int rc;

    if (e == NULL)
        return ZBADARGUMENTS;
    if ((rc = busy_enter(e)) != 0)
        return rc;
    return busy_exit(e, leave(e));
}

int zkr_election_is_leader(zkr_election_t *e)
{
    int lead;

    if (e == NULL)
        return 0;
    zkr__lock_fresh(e->c.s);
    lead = leading(e);
    pthread_mutex_unlock(&e->c.s->mu);
    return lead;
}

zkr_lock_state_t zkr_election_state(zkr_election_t *e)
{
    zkr_lock_state_t st;

    if (e == NULL)
        return ZKR_LOCK_IDLE;
    zkr__lock_fresh(e->c.s);
    st = e->c.pub;
    pthread_mutex_unlock(&e->c.s->mu);
    return st;
}

int zkr_election_await(zkr_election_t *e, int timeout_ms)
{
    zkr_session_t *s;
    int64_t deadline;
    int rc = 0;

    if (e == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    if (timeout_ms != 0 && zkr__in_callback())
        return ZKR_EDEADLK;
    /* The event loop's own thread: the end of participation is delivered
     * by its dispatch, which could not run while we wait without end. */
    if (timeout_ms < 0 && zkr__is_dispatcher(e->c.s))
        return ZKR_EDEADLK;
    if ((rc = busy_enter(e)) != 0)
        return rc;
    s = e->c.s;
    deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        zkr__enforce_deadline(s);
        if (leading(e)) {
            /* The application learns it leads: a loss before this was
             * observed, the descriptor now signals only later ones. */
            zkr__contender_observed(&e->c);
            break;
        }
        if (!e->joined) {
            rc = e->error != 0 ? e->error : ZKR_ESTATE;
            break;
        }
        if (zkr__wait(s, NULL, deadline) != 0) {
            rc = ZKR_ETIMEDOUT;
            break;
        }
    }
    /* Or it learns it does not lead: a loss or suspension before this
     * was observed, and the descriptor is quiet until it leads (or is
     * lost) again, so that a poll() loop does not spin meanwhile. */
    if (rc != 0) {
        zkr__contender_observed(&e->c);
        e->away = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return busy_exit(e, rc);
}

int zkr_election_set_listener(zkr_election_t *e, zkr_election_listener_t fn,
                              void *data)
{
    if (e == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&e->c.s->mu);
    e->fn = fn;
    e->data = data;
    pthread_mutex_unlock(&e->c.s->mu);
    return 0;
}

int zkr_election_set_delay(zkr_election_t *e, int delay_ms)
{
    return e != NULL ? zkr__set_delay(&e->c, delay_ms) : ZBADARGUMENTS;
}

int zkr_election_set_delay_flags(zkr_election_t *e, unsigned flags)
{
    return e != NULL ? zkr__set_delay_flags(&e->c, flags) : ZBADARGUMENTS;
}

int zkr_election_epoch(zkr_election_t *e, int64_t *epoch)
{
    int rc = 0;

    if (e == NULL || epoch == NULL)
        return ZBADARGUMENTS;
    zkr__lock_fresh(e->c.s);
    if (leading(e))
        *epoch = e->c.czxid;
    else
        rc = ZKR_ENOTHELD;
    pthread_mutex_unlock(&e->c.s->mu);
    return rc;
}

int zkr_election_sequencer(zkr_election_t *e, zkr_sequencer_t *out)
{
    int rc;

    if (e == NULL || out == NULL)
        return ZBADARGUMENTS;
    zkr__lock_fresh(e->c.s);
    rc = leading(e) ? zkr__sequencer(&e->c, out) : ZKR_ENOTHELD;
    pthread_mutex_unlock(&e->c.s->mu);
    return rc;
}

int zkr_election_fd(zkr_election_t *e)
{
    return e != NULL ? zkr__contender_fd(&e->c) : -1;
}

int zkr_election_participants(zkr_election_t *e, zkr_contender_t **out,
                              int *count)
{
    if (e == NULL)
        return ZBADARGUMENTS;
    return zkr_contenders_list(e->c.s, e->c.dir, out, count);
}

/* The leader function returned after its leadership was suspended while
 * it ran (the descriptor told it to stop, under the default policy): that
 * is the stop the contract asks for, not a resignation, even when the
 * function took so long to stop that the suspension is already over.
 * Waits, mutex held, for a suspension still going on to end: 1 if the
 * same grant was re-verified (same node, same epoch: nobody else can have
 * led meanwhile), and run() calls the function again; 0 if it was lost,
 * or the candidate left or is being freed, or no suspension was signalled
 * since the function started (suspensions still at seen). */
static int resumes(zkr_election_t *e, int64_t epoch, uint64_t seen)
{
    zkr__contender_t *c = &e->c;

    if (e->policy == ZKR_POLICY_SESSION || e->suspensions == seen)
        return 0;
    for (;;) {
        zkr__enforce_deadline(c->s); /* past the safe deadline: LOST */
        if (!e->joined || e->stopping || c->czxid != epoch)
            return 0;
        if (c->pub != ZKR_LOCK_SUSPENDED)
            return c->pub == ZKR_LOCK_HELD;
        zkr__wait(c->s, NULL, -1);
    }
}

/* zkr_election_run() without its bookkeeping of active runs. */
static int run(zkr_election_t *e, zkr_leader_fn fn, void *data, int requeue)
{
    zkr_session_t *s = e->c.s;
    int rc, again = 0;

    rc = zkr_election_join(e);
    if (rc != 0 && rc != ZKR_EALREADY)
        return rc;
    pthread_mutex_lock(&s->mu);
    for (;;) { /* the mutex is held here */
        int ret, joined, self, closing;
        int64_t epoch;
        uint64_t seen;

        if (!again) {
            pthread_mutex_unlock(&s->mu);
            rc = zkr_election_await(e, -1);
            if (rc == ZKR_ESTATE)
                return 0; /* left from another thread */
            if (rc != 0)
                return rc;
            /* Check and mark under one lock: a concurrent leave either
             * sees the function running (and waits for it) or makes us
             * see that we left (and the function never starts). */
            pthread_mutex_lock(&s->mu);
            if (!e->joined) {
                pthread_mutex_unlock(&s->mu);
                return 0;
            }
            if (!leading(e))
                continue;
        }
        /* The descriptor is cleared here, for this function: any loss
         * from now on shows. */
        e->running = 1;
        e->runner = pthread_self();
        epoch = e->c.czxid;
        seen = e->suspensions;
        zkr__contender_observed(&e->c);
        pthread_mutex_unlock(&s->mu);
        ret = fn(e, data);
        pthread_mutex_lock(&s->mu);
        e->running = 0;
        self = e->self_left;
        e->self_left = 0;
        pthread_cond_broadcast(&s->cv);
        /* Back in the same leadership: run fn again, the mutex still held
         * from the check, so nothing can come between. */
        again = !self && resumes(e, epoch, seen);
        if (again)
            continue;
        joined = e->joined;
        closing = e->closing;
        pthread_mutex_unlock(&s->mu);
        if (closing || (!joined && !self))
            return requeue ? 0 : ret; /* the free or leave() resigns */
        /* Hand leadership on (the next candidate takes over). */
        rc = resign(e);
        if (self) {
            pthread_mutex_lock(&s->mu);
            e->stopping = 0;
            pthread_mutex_unlock(&s->mu);
            return requeue ? 0 : ret;
        }
        if (!requeue) {
            pthread_mutex_lock(&s->mu);
            e->joined = 0;
            pthread_mutex_unlock(&s->mu);
            return rc != 0 ? rc : ret;
        }
        /* Back of the queue, unless a leave() came meanwhile. */
        zkr__election_race_point();
        rc = enter(e, 0);
        if (rc == ZKR_ESTATE)
            return 0;
        if (rc != 0)
            return rc;
        pthread_mutex_lock(&s->mu);
    }
}

int zkr_election_run(zkr_election_t *e, zkr_leader_fn fn, void *data,
                     int requeue)
{
    int rc;

    if (e == NULL || fn == NULL)
        return ZBADARGUMENTS;
    if (zkr__in_callback() || zkr__is_dispatcher(e->c.s))
        return ZKR_EDEADLK; /* as zkr_election_await(e, -1) */
    if ((rc = busy_enter(e)) != 0)
        return rc;
    return busy_exit(e, run(e, fn, data, requeue));
}
