/* Observers: follow who leads an election (the first contender under a
 * path) without creating anything. A child watch on the directory says
 * "something changed"; each change lists the queue again, and when the
 * first node differs from the one last reported, its data (the leader's
 * identifier) and czxid (its epoch) are read and reported. While the
 * directory does not exist, an exists watch waits for it.
 *
 * A first node is the leader as soon as it is first, except one whose name
 * announces that it says when it leads (zkr__name_announces(): a zkr
 * candidate with a lock-delay, docs/design/lock-delay.md 1.7). Such a
 * candidate may be waiting out its delay while first; it touches its node
 * once it leads, so a data version of 0 means "not leading yet": "none"
 * is reported, and a data watch on the node brings the touch. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "recipes.h"

struct zkr_observer {
    zkr__reader_t r; /* in the session's readers */
    zkr_session_t *s;
    char *dir;
    zkr_observer_fn fn;
    void *data;
    char *last;       /* node name last reported; NULL = "no leader" reported */
    char *watched;    /* full path of the node that announced which our data
                         watch is on (set with its last read), or NULL */
    char *reading;    /* path of such a node whose read (setting that data
                         watch) is in flight (the op's), or NULL */
    int last_err;     /* ... and the error reported with it (0: none) */
    int started;      /* something was reported */
    int busy;         /* a request is in flight */
    int again;        /* a change arrived meanwhile: look again */
    int gone;         /* being freed */
    int events;       /* callbacks queued or running */
    int free_pending; /* freed on the event thread: its last queued
                         callback frees it */
};

static void destroy(zkr_observer_t *o)
{
    free(o->watched);
    free(o->last);
    free(o->dir);
    free(o);
}

static void refresh(zkr_observer_t *o);
static const zkr__reader_ops_t observer_ops;

/* The observer a reader of the session is, or NULL. */
static zkr_observer_t *observer_of(zkr__reader_t *r)
{
    return r->ops == &observer_ops
               ? (zkr_observer_t *)((char *)r - offsetof(zkr_observer_t, r))
               : NULL;
}

static void observer_watcher(zhandle_t *zh, int type, int state,
                             const char *path, void *ctx)
{
    zkr_session_t *s;

    (void)state;
    if (type == ZOO_SESSION_EVENT || type == ZOO_NOTWATCHING_EVENT ||
        path == NULL || (s = zkr__session_lock_live(ctx)) == NULL)
        return;
    if (zh == s->zh)
        for (zkr__reader_t *r = zkr__engine(s)->readers; r != NULL;
             r = r->next) {
            zkr_observer_t *o = observer_of(r);
            if (o == NULL)
                continue;
            if (o->watched != NULL && strcmp(o->watched, path) == 0) {
                /* Our data watch on the node fired: it is used up, and
                 * follows() must no longer claim the path (a
                 * contender of this session watching it takes its own
                 * watch back). A read that sets it again records it. */
                free(o->watched);
                o->watched = NULL;
                refresh(o);
            } else if (strcmp(o->dir, path) == 0) {
                refresh(o);
            }
        }
    pthread_mutex_unlock(&s->mu);
}

static int follows(zkr__reader_t *r, const char *path)
{
    zkr_observer_t *o = observer_of(r);

    return !o->gone && (strcmp(o->dir, path) == 0 ||
                        (o->watched != NULL && strcmp(o->watched, path) == 0) ||
                        (o->reading != NULL && strcmp(o->reading, path) == 0));
}

static void forked(zkr__reader_t *r)
{
    zkr_observer_t *o = observer_of(r);

    o->busy = 0;
    o->events = 0;
    o->reading = NULL;
}

static void refresh_reader(zkr__reader_t *r)
{
    refresh(observer_of(r));
}

static const zkr__reader_ops_t observer_ops = {
    .refresh = refresh_reader,
    .forked = forked,
    .follows = follows,
};

/* Delivery on the event thread. The identifier travels in a heap copy. */
struct report {
    zkr_observer_t *o;
    char *id;
    int64_t epoch;
};

static void run_report(const zkr__event_t *ev)
{
    struct report *r = ev->data;
    zkr_observer_t *o = r->o;
    zkr_session_t *s = o->s;
    int dispose, gone;

    pthread_mutex_lock(&s->mu);
    gone = o->gone;
    pthread_mutex_unlock(&s->mu);
    if (!gone)
        o->fn(o, r->id, r->epoch, o->data);
    pthread_mutex_lock(&s->mu);
    o->events--;
    dispose = o->free_pending && o->events == 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (dispose)
        destroy(o);
    free(r->id);
    free(r);
}

/* Reports a new leader (name NULL: none), if it differs from the last.
 * An error (epoch < 0, id NULL) is reported once per leader node (name)
 * or failed listing (name NULL). */
static void report(zkr_observer_t *o, const char *name, const char *id,
                   int64_t epoch)
{
    int err = epoch < 0 ? (int)epoch : 0;
    struct report *r;
    char *last = NULL;

    if (o->started && err == o->last_err &&
        ((name == NULL && o->last == NULL) ||
         (name != NULL && o->last != NULL && strcmp(name, o->last) == 0)))
        return;
    /* Short of memory, nothing changes: a later look (the timer's retry)
     * finds the leader different from the last one reported again. */
    if ((r = calloc(1, sizeof(*r))) == NULL ||
        (id != NULL && (r->id = zkr__strdup(id)) == NULL) ||
        (name != NULL && (last = zkr__strdup(name)) == NULL) ||
        zkr__post_call(o->s, run_report, 0, NULL, r) != 0) {
        if (r != NULL)
            free(r->id);
        free(r);
        free(last);
        zkr__retry_later(o->s);
        return;
    }
    r->o = o;
    r->epoch = epoch;
    free(o->last);
    o->last = last;
    o->last_err = err;
    o->started = 1;
    o->events++;
}

/* An answer that refuses the request itself (ZNOAUTH, say), as opposed to
 * a lost connection or session, which a reconnection retries. */
static int refused(int rc)
{
    return rc != ZOK && rc != ZNONODE && !zkr__is_connection_error(rc) &&
           rc != ZSESSIONEXPIRED && rc != ZCLOSING && rc != ZINVALIDSTATE;
}

static void finish(zkr_observer_t *o)
{
    o->busy = 0;
    pthread_cond_broadcast(&o->s->cv);
    if (o->again && !o->gone) {
        o->again = 0;
        refresh(o);
    }
}

static void leader_read(int rc, const char *value, int len,
                        const struct Stat *st, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr_observer_t *o = op->ctx;

    o->reading = NULL;
    if (rc == ZOK && zkr__name_announces(strrchr(op->path, '/') + 1) &&
        (o->watched == NULL || strcmp(o->watched, op->path) != 0)) {
        /* The read set a data watch on this node: the one on the node
         * read before goes (once this one is recorded, so that
         * follows() no longer claims the old path). */
        char *old = o->watched;

        if ((o->watched = zkr__strdup(op->path)) == NULL)
            o->again = 1; /* short of memory: read again */
        if (old != NULL)
            zkr__cleanup_add_watch(s, old, ZWATCHTYPE_DATA, observer_watcher);
        free(old);
    }
    if (rc == ZOK && !o->gone &&
        zkr__name_announces(strrchr(op->path, '/') + 1) && st->version == 0) {
        /* First, but not leading yet (deciding, or waiting out its
         * lock-delay): none, until its touch fires our data watch. */
        report(o, NULL, NULL, 0);
    } else if (rc == ZOK && !o->gone) {
        char *id = malloc((size_t)(len > 0 ? len : 0) + 1);
        if (id != NULL) {
            memcpy(id, value, (size_t)(len > 0 ? len : 0));
            id[len > 0 ? len : 0] = '\0';
            report(o, strrchr(op->path, '/') + 1, id, st->czxid);
            free(id);
        } else {
            zkr__retry_later(s); /* read again by a later look */
        }
    } else if (rc == ZNONODE) {
        o->again = 1; /* gone before we could read it: list again */
    } else if (!o->gone && refused(rc)) {
        /* A leader we may not read (ZNOAUTH): say so, rather than go on
         * reporting the previous leader as current. The listing's child
         * watch brings the next change. */
        report(o, strrchr(op->path, '/') + 1, NULL, rc);
    }
    finish(o);
    (void)s;
    zkr__op_end(op);
}

static void dir_exists(int rc, const struct Stat *st, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr_observer_t *o = op->ctx;

    (void)st;
    if (rc == ZOK)
        o->again = 1; /* created meanwhile */
    finish(o);
    (void)s;
    zkr__op_end(op);
}

static void listed(int rc, const struct String_vector *v, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr_observer_t *o = op->ctx;
    zkr__op_t *op2 = NULL;
    zkr__entry_t *e = NULL;
    int n = 0;

    o->busy = 0; /* set again below if a follow-up request goes out */
    if (o->gone) {
        ;
    } else if (rc == ZNONODE) {
        /* No directory, no leader; wait for it to appear. */
        report(o, NULL, NULL, 0);
        if ((op2 = zkr__op_new(s, NULL)) != NULL) {
            op2->ctx = o;
            if (zoo_awexists(s->zh, o->dir, observer_watcher, s, dir_exists,
                             op2) == ZOK)
                o->busy = 1;
            else
                zkr__op_cancel(op2);
        }
    } else if (rc == ZOK && zkr__sort_children(v, &e, &n) == 0) {
        if (n == 0)
            report(o, NULL, NULL, 0);
        else if (o->last == NULL || strcmp(o->last, e[0].name) != 0) {
            /* A new leader: read its identifier and epoch. */
            if ((op2 = zkr__op_new(s, NULL)) != NULL) {
                op2->ctx = o;
                op2->path = zkr__join(o->dir, e[0].name);
                /* A node that announces gets a data watch with the read:
                 * its touch says when it leads. */
                if (op2->path != NULL &&
                    (zkr__name_announces(e[0].name)
                         ? zoo_awget(s->zh, op2->path, observer_watcher, s,
                                     leader_read, op2)
                         : zoo_aget(s->zh, op2->path, 0, leader_read, op2)) ==
                        ZOK) {
                    o->busy = 1;
                    /* Until its answer, the session's data watch on the
                     * node (one registration, shared with this session's
                     * other observers) is ours too: a removal for another
                     * observer now would take it away (follows()). */
                    if (zkr__name_announces(e[0].name))
                        o->reading = op2->path;
                } else {
                    zkr__op_cancel(op2);
                }
            }
        }
        free(e);
    } else if (refused(rc)) {
        /* A directory we may not list (ZNOAUTH): report the error. No
         * watch was set; a reconnection lists again. */
        report(o, NULL, NULL, rc);
    } else if (rc == ZOK) {
        zkr__retry_later(s); /* no memory to sort: look again later */
    }
    /* Otherwise (connection errors) the next reconnection refreshes. */
    if (!o->busy)
        finish(o);
    zkr__op_end(op);
}

/* Lists the directory with a child watch, unless a request is in flight
 * (then looks again when it ends). Mutex held. */
static void refresh(zkr_observer_t *o)
{
    zkr_session_t *s = o->s;
    zkr__op_t *op;

    if (o->busy) {
        o->again = 1;
        return;
    }
    if (o->gone || !s->connected || s->zh == NULL ||
        (op = zkr__op_new(s, NULL)) == NULL)
        return;
    op->ctx = o;
    o->busy = 1;
    if (zoo_awget_children(s->zh, o->dir, observer_watcher, s, listed, op) !=
        ZOK) {
        o->busy = 0;
        zkr__op_cancel(op);
    }
}

int zkr_observer_new(zkr_observer_t **out, zkr_session_t *s, const char *path,
                     zkr_observer_fn fn, void *data)
{
    zkr_observer_t *o;

    if (out == NULL || s == NULL || fn == NULL || zkr__check_path(path) != 0)
        return ZBADARGUMENTS;
    if ((o = calloc(1, sizeof(*o))) == NULL ||
        (o->dir = zkr__strdup(path)) == NULL) {
        free(o);
        return ZKR_ENOMEM;
    }
    o->s = s;
    o->fn = fn;
    o->data = data;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        free(o->dir);
        free(o);
        return ZKR_ECLOSED;
    }
    o->r.ops = &observer_ops;
    zkr__reader_add(s, &o->r);
    zkr__session_hold(s,
                      1); /* keeps zkr_session_free() from closing under us */
    refresh(o);
    pthread_mutex_unlock(&s->mu);
    *out = o;
    return 0;
}

void zkr_observer_free(zkr_observer_t *o)
{
    zkr_session_t *s;
    int later;

    if (o == NULL)
        return;
    s = o->s;
    pthread_mutex_lock(&s->mu);
    o->gone = 1;
    /* On the event thread (from any callback, its own included) its
     * queued callbacks cannot run before this returns: they are skipped
     * (o->gone) and the last of them frees it. A request in flight is
     * answered on ZooKeeper's thread: wait for it. */
    while (o->busy)
        pthread_cond_wait(&s->cv, &s->mu);
    while (!(later = o->events > 0 && zkr__callbacks_later(s)) && o->events > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    zkr__reader_remove(s, &o->r);
    zkr__session_hold(s, -1);
    /* Our child and exists watches on the directory go too, and the data
     * watch on a node that announced. */
    zkr__cleanup_add_watch(s, o->dir, ZWATCHTYPE_ANY, observer_watcher);
    if (o->watched != NULL)
        zkr__cleanup_add_watch(s, o->watched, ZWATCHTYPE_DATA,
                               observer_watcher);
    o->free_pending = later;
    pthread_mutex_unlock(&s->mu);
    if (!later)
        destroy(o);
}
