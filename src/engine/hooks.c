/* The engine as the session's upper layer: the hooks it hands every
 * session it makes (session.c calls nothing above it by name), its
 * per-session state, and the public calls that make a session. */
#include "core.h"

static void engine_fini(zkr_session_t *s)
{
    free(zkr__engine(s)->pidx);
    zkr__metrics_free(s);
}

void zkr__reader_add(zkr_session_t *s, zkr__reader_t *r)
{
    r->next = zkr__engine(s)->readers;
    zkr__engine(s)->readers = r;
}

void zkr__reader_remove(zkr_session_t *s, zkr__reader_t *r)
{
    for (zkr__reader_t **pp = &zkr__engine(s)->readers; *pp != NULL;
         pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
}

int zkr__readers_follow(zkr_session_t *s, const char *path)
{
    for (zkr__reader_t *r = zkr__engine(s)->readers; r != NULL; r = r->next)
        if (r->ops->follows(r, path))
            return 1;
    return 0;
}

static void readers_refresh(zkr_session_t *s)
{
    for (zkr__reader_t *r = zkr__engine(s)->readers; r != NULL; r = r->next)
        r->ops->refresh(r);
}

void zkr__task_add(zkr_session_t *s, zkr__task_t *t)
{
    zkr__engine_t *e = zkr__engine(s);

    t->prev = NULL;
    t->next = e->tasks;
    if (e->tasks != NULL)
        e->tasks->prev = t;
    e->tasks = t;
    t->on = 1;
}

void zkr__task_remove(zkr_session_t *s, zkr__task_t *t)
{
    if (!t->on)
        return;
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        zkr__engine(s)->tasks = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    t->on = 0;
}

void zkr__task_wake_at(zkr_session_t *s, zkr__task_t *t, int64_t at)
{
    t->wake_at = at;
    if (at >= 0)
        zkr__timer_kick(s);
}

/* Wakes every task (due: only those whose wake_at has passed, lowering
 * *next to the earliest other one). A wake may remove its own task (and
 * free it), or add one: the list is walked from a mark put at its head,
 * so that each task there now is woken once. A wake may also find the
 * session lost and wake every task from within (a nested walk), which
 * steps over this walk's mark. */
static void tasks_wake(zkr_session_t *s, int64_t now, int64_t *next)
{
    zkr__task_t mark = {0}, *t;

    zkr__task_add(s, &mark);
    while ((t = mark.next) != NULL) {
        /* Move the mark past t before t runs. */
        zkr__task_remove(s, &mark);
        mark.prev = t;
        mark.next = t->next;
        if (t->next != NULL)
            t->next->prev = &mark;
        t->next = &mark;
        mark.on = 1;
        if (t->wake == NULL) /* the mark of a walk this one is nested in */
            continue;
        if (next != NULL && (t->wake_at < 0 || t->wake_at > now)) {
            if (t->wake_at >= 0 && (*next < 0 || t->wake_at < *next))
                *next = t->wake_at;
            continue;
        }
        t->wake_at = -1;
        t->wake(t);
    }
    zkr__task_remove(s, &mark);
    /* A wake may have set a new time (a put woken from its pause that now
     * waits for a connection until its deadline): the timer's kick is
     * lost while it runs this, so the times are read again here. */
    for (t = zkr__engine(s)->tasks; next != NULL && t != NULL; t = t->next)
        if (t->wake_at >= 0 && (*next < 0 || t->wake_at < *next))
            *next = t->wake_at;
}

static void engine_connected(zkr_session_t *s, int new_session)
{
    zkr__queue_on_connected(s, new_session);
    readers_refresh(s);
    tasks_wake(s, 0, NULL);
}

static void engine_retry(zkr_session_t *s)
{
    zkr__queue_retry(s);
    readers_refresh(s);
    tasks_wake(s, 0, NULL);
}

static void engine_lost(zkr_session_t *s)
{
    zkr__queue_on_lost(s);
    tasks_wake(s, 0, NULL);
}

static void engine_deadline(zkr_session_t *s, int64_t now, int64_t *next)
{
    zkr__queue_on_deadline(s, now, next);
    tasks_wake(s, now, next);
}

static void engine_forked(zkr_session_t *s)
{
    ZKR__EACH_CONTENDER (c, s) {
        c->sync_waiters = 0;
        zkr__cond_renew(&c->done_cv, 0);
    }
    for (zkr__reader_t *r = zkr__engine(s)->readers; r != NULL; r = r->next)
        r->ops->forked(r);
    tasks_wake(s, 0, NULL);
}

/* A handle freed on this thread (m->freeing) still gets its completions
 * (each exactly once), not its state changes. */
static int engine_deliver(zkr__event_t *ev)
{
    zkr__contender_t *c = zkr__c(ev->m);
    zkr_session_t *s = c->s;
    int run = ev->fn != NULL && !(c->m.freeing && ev->kind == ZKR__EV_STATE);

    if (ev->kind == ZKR__EV_ACQUIRED)
        zkr__acquired_recheck(c, ev);
    pthread_mutex_unlock(&s->mu);
    if (run)
        c->recipe->deliver(c, ev);
    pthread_mutex_lock(&s->mu);
    return run;
}

static void engine_dispose(zkr__member_t *m)
{
    zkr__contender_dispose(zkr__c(m));
}

static void engine_step(zkr__member_t *m)
{
    zkr__contender_step(zkr__c(m));
}

static void engine_cleanup_done(zkr__member_t *m, int rc)
{
    zkr__queue_cleanup_done(zkr__c(m), rc);
}

static const zkr__session_hooks_t engine_hooks = {
    .size = sizeof(zkr__engine_t),
    .fini = engine_fini,
    .connected = engine_connected,
    .suspended = zkr__queue_on_suspended,
    .lost = engine_lost,
    .retry = engine_retry,
    .deadline = engine_deadline,
    .forked = engine_forked,
    .deliver = engine_deliver,
    .dispose = engine_dispose,
    .step = engine_step,
    .cleanup_done = engine_cleanup_done,
    .watched = zkr__path_watched,
};

zkr__op_t *zkr__cop_new(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__op_new(c->s, &c->m);

    if (op != NULL)
        op->gen = c->gen;
    return op;
}

int zkr_session_open(zkr_session_t **out, const char *hosts,
                     int session_timeout_ms, const zkr_session_options_t *opts)
{
    return zkr__session_open(out, hosts, session_timeout_ms, opts,
                             &engine_hooks);
}

int zkr_session_adopt(zkr_session_t **out, zhandle_t *zh)
{
    return zkr__session_adopt(out, zh, &engine_hooks);
}
