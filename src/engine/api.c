/* The engine's calls for the recipes: init, acquire, release, cancel,
 * free, and what they read of a contender. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* ------------------------------------------------------ public core */

int zkr__contender_init(zkr__contender_t *c, zkr_session_t *s,
                        const zkr__recipe_t *recipe, void *owner,
                        const char *dir, const char *id,
                        const struct ACL_vector *acl)
{
    int rc;

    if (s == NULL) /* c cleared, ZBADARGUMENTS */
        return zkr__contender_init2(c, s, recipe, owner, dir, NULL, id, acl);
    pthread_mutex_lock(&s->mu);
    rc = zkr__contender_init2(c, s, recipe, owner, dir, NULL, id, acl);
    pthread_mutex_unlock(&s->mu);
    return rc;
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
    c->ld.delay_until = -1;
    c->ld.carry_until = -1;
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
    c->mpath = mpath;
    rc = s->closing ? ZKR_ECLOSED : zkr__metrics_attach(c);
    c->mpath = NULL;
    if (rc != 0) {
        pthread_cond_destroy(&c->done_cv);
        goto fail;
    }
    zkr__session_attach(s, &c->m);
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
    if (zkr__is_acquiring(c)) {
        zkr__abort_acquire(c, ZKR_ECANCELED);
        /* Do not wait for a delete, a create or a recovery in flight: the
         * session deletes what they leave (a create answered after this
         * is stale and deleted; a recovery's node is searched by UUID). */
        zkr__cleanup_disown(s, &c->m);
        if (zkr__is_acquiring(c)) {
            if (c->phase == ZKR__P_RECOVER)
                zkr__cleanup_add(s, NULL, c->dir, c->uuid, c->node_sid, NULL);
            zkr__finish_acquire(c, c->abort_rc);
        }
    } else if (c->phase == ZKR__P_HELD) {
        /* Freed while held: the application let go, a release. Short of
         * memory, the entry reserved before the create (no record). */
        if (zkr__release_to_cleanup(c, NULL) != 0 && c->reserve != NULL) {
            zkr__cleanup_commit(s, c->reserve, c->node, c->node_sid, NULL);
            c->reserve = NULL;
        }
        c->phase = ZKR__P_IDLE;
        zkr__forget_node(c);
    } else if (c->phase == ZKR__P_RELEASING) {
        zkr__cleanup_disown(s, &c->m);
        zkr__finish_release(c, 0);
    } else if (c->phase == ZKR__P_COMMITTING) {
        /* The multi in flight applies or not; either way our node goes
         * (a plain delete of a node already gone is harmless). */
        zkr__hand_over(c);
        zkr__end_commit(c, ZKR_ECANCELED, 0);
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

int zkr__contender_try_destroy(zkr__contender_t *c, void (*dispose)(void *))
{
    if (zkr__contender_engaged(c) || c->m.busy > 0 || c->m.events > 0 ||
        c->m.cleanups_owned > 0 || c->sync_waiters > 0 || c->acq_sync)
        return ZKR_EBUSY;
    c->dispose = dispose;
    c->letgo++;
    c->gen++;
    zkr__contender_dispose(c);
    return 0;
}

void zkr__contender_dispose(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;

    if (c->watching != NULL)
        zkr__drop_watch(s, c->watching, c,
                        c->watch_dir ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA);
    zkr__session_detach(s, &c->m);
    zkr__timed_remove(c);
    zkr__forget_node(c);
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
void zkr__start_attempt(zkr__contender_t *c, int timeout_ms)
{
    zkr_session_t *s = c->s;

    c->lost_unreported = 0;
    zkr__forget_node(c);
    zkr__metrics_attempt(c);
    c->gen++;
    zkr__new_uuid(c);
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
        zkr__timed_add(c);
    zkr__step(c);
    /* Only a deadline gives the timer thread something to do: waking it
     * for every acquire would cost two context switches per grant. */
    if (c->deadline >= 0)
        zkr__timer_kick(s);
}

/* A contender whose recipe's .rejoins hook says so starts over after its
 * node or session is lost, with the recipe's .rejoin_fn as its
 * completion: it stays in the queue until it leaves. Returns 1 if it
 * did. */
int zkr__rejoin(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;

    /* Not when the session will never come back (adopted, or told not to
     * reconnect): the loss then stands, ZKR_ELOST. */
    if (c->recipe->rejoins == NULL || !c->recipe->rejoins(c) || s->closing ||
        zkr__lost_for_good(s))
        return 0;
    c->acq_fn = c->recipe->rejoin_fn;
    c->acq_data = NULL;
    c->acq_sync = 0;
    zkr__start_attempt(c, -1);
    return 1;
}

int zkr__contender_engaged(const zkr__contender_t *c)
{
    return c->phase != ZKR__P_IDLE || zkr__is_acquiring(c);
}

/* Why an acquire of c cannot start now (mutex held), or 0. */
static int acquire_refused(zkr__contender_t *c, int timeout_ms)
{
    zkr_session_t *s = c->s;
    int rc = 0;

    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (zkr__lost_for_good(s))
        rc = ZKR_ELOST;
    else if (c->phase == ZKR__P_RELEASING)
        rc = ZKR_ESTATE;
    else if (c->phase != ZKR__P_IDLE || zkr__is_acquiring(c) || c->acq_sync)
        rc = ZKR_EALREADY; /* acq_sync: a blocking acquire (or a task's) not
                              returned yet, whose completion fields are in
                              use */
    else if (c->recipe->refuse != NULL && (rc = c->recipe->refuse(c)) != 0)
        ; /* the recipe refuses (its .refuse hook) */
    else if (timeout_ms == 0 && !s->connected)
        rc = ZCONNECTIONLOSS;
    return rc;
}

int zkr__acquire_task(zkr__contender_t *c, int timeout_ms, zkr__task_t *t)
{
    int rc;

    if (timeout_ms < -1)
        return ZBADARGUMENTS;
    if ((rc = acquire_refused(c, timeout_ms)) != 0)
        return rc;
    zkr__fd_observed(c);
    c->letgo++;
    /* Its end is recorded as a blocking acquire's, and wakes t. */
    c->acq_sync = 1;
    c->acq_done = 0;
    c->acq_fn = NULL;
    c->acq_data = NULL;
    c->task = t;
    zkr__start_attempt(c, timeout_ms);
    return 0;
}

int zkr__acquire_took(zkr__contender_t *c, int *rc)
{
    if (!c->acq_sync || !c->acq_done)
        return 0;
    *rc = c->acq_rc;
    /* Granted, but the task may run long after: as zkr__acquire. */
    if (*rc == 0)
        *rc = zkr__grant_result(c, c->acq_gen, c->acq_letgo);
    c->acq_sync = 0;
    return 1;
}

int zkr__acquire_still(zkr__contender_t *c)
{
    return zkr__grant_result(c, c->acq_gen, c->acq_letgo);
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
    rc = acquire_refused(c, timeout_ms);
    if (rc != 0) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    zkr__fd_observed(c); /* the application acquires again: it knows */
    c->letgo++;
    /* The completion is in place before the attempt starts: a request
     * that cannot even be sent ends the acquire inside start_attempt. */
    c->acq_sync = sync;
    c->acq_done = 0;
    c->acq_fn = fn;
    c->acq_data = data;
    zkr__start_attempt(c, timeout_ms);
    if (sync) {
        c->sync_waiters++;
        while (!c->acq_done)
            pthread_cond_wait(&c->done_cv, &s->mu);
        rc = c->acq_rc;
        /* Granted, but this thread may run long after (the process was
         * paused, say): a grant lost or let go meanwhile is not returned
         * as held. */
        if (rc == 0)
            rc = zkr__grant_result(c, c->acq_gen, c->acq_letgo);
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
    ev->a = zkr__grant_result(c, ev->gen, ev->letgo);
    if (ev->a != 0)
        ev->gen = c->gen; /* the end is reported now, as current */
}

int zkr__cancel(zkr__contender_t *c)
{
    int rc;

    pthread_mutex_lock(&c->s->mu);
    rc = zkr__cancel_task(c);
    pthread_mutex_unlock(&c->s->mu);
    return rc;
}

int zkr__acquire_sent(const zkr__contender_t *c)
{
    return c->s->connected && !c->s->closing &&
           (c->phase == ZKR__P_LISTING ||
            (c->phase == ZKR__P_CREATING && c->m.busy > 0));
}

int zkr__cancel_task(zkr__contender_t *c)
{
    if (!zkr__is_acquiring(c))
        return ZKR_ESTATE;
    zkr__abort_acquire(c, ZKR_ECANCELED);
    return 0;
}

static int release_locked(zkr__contender_t *c, int sync, void (*fn)(void),
                          void *data);

int zkr__release(zkr__contender_t *c, void (*fn)(void), void *data)
{
    zkr_session_t *s = c->s;
    int sync = fn == NULL, rc;

    if (sync && zkr__in_callback())
        return ZKR_EDEADLK;
    zkr__lock_fresh(s);
    rc = release_locked(c, sync, fn, data);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr__release_task(zkr__contender_t *c)
{
    return release_locked(c, 0, NULL, NULL);
}

/* zkr__release, mutex held: sync waits for its end. */
static int release_locked(zkr__contender_t *c, int sync, void (*fn)(void),
                          void *data)
{
    zkr_session_t *s = c->s;
    int rc = 0;

    if (s->closing) {
        rc = ZKR_ECLOSED; /* in a forked child: the parent still holds */
    } else if (zkr__is_acquiring(c)) {
        rc = ZKR_ESTATE;
    } else if (zkr__take_lost(c)) {
        rc = ZKR_ELOST;
    } else if (c->phase != ZKR__P_HELD) {
        rc = ZKR_ENOTHELD;
    }
    if (rc == 0 || rc == ZKR_ELOST || rc == ZKR_ENOTHELD)
        c->letgo++; /* whatever was granted, the application let go */
    if (rc != 0)
        return rc;
    c->phase = ZKR__P_RELEASING;
    c->pub = ZKR_LOCK_RELEASING;
    zkr__metrics_hold_end(c); /* the application let go */
    c->rel_pending = 1;
    c->rel_sync = sync;
    c->rel_done = 0;
    c->rel_fn = fn;
    c->rel_data = data;
    rc = zkr__release_to_cleanup(c, &c->m);
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
 * *unled: its name announces and it has not touched its node (a first
 * contender of a recipe with ZKR__R_ANNOUNCES waiting out its lock-delay,
 * zkr__new_uuid()). */
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
    return zkr__path_watched_by_other(s, path, NULL) ||
           zkr__readers_follow(s, path);
}
