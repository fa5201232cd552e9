/* Chains of asynchronous requests, for recipes that are no contender (the
 * work queue's put and take, the counter): one request at a time, each
 * next step taken in the previous answer's completion. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"

/* ------------------------------------------------------- connection */

zkr_session_t *zkr__call_watch_event(int type, const char *path, void *ctx)
{
    zkr_session_t *s;

    if (type == ZOO_SESSION_EVENT || type == ZOO_NOTWATCHING_EVENT ||
        path == NULL || (s = zkr__session_lock_live(ctx)) == NULL)
        return NULL;
    zkr__engine(s)->watch_events++;
    s->counters[ZKR_COUNTER_WATCH_EVENTS]++;
    return s;
}

int zkr__call_conn_error(int rc)
{
    return zkr__is_connection_error(rc) || rc == ZOPERATIONTIMEOUT;
}

int zkr__call_lost(int rc)
{
    return zkr__call_conn_error(rc) || rc == ZSESSIONEXPIRED ||
           rc == ZCLOSING || rc == ZINVALIDSTATE;
}

/* ------------------------------------------------------ call chains */

/* The answer of a chain's request (mutex taken): k->next is told it,
 * with what came back, valid during the call only. next may end the
 * chain and free k: k is not touched after. */
static void call_answer(const void *data, int rc, const struct Stat *stat,
                        const struct String_vector *strings, const char *value,
                        int value_len)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__call_t *k = op->ctx;

    (void)zkr__op_begin(op, rc);
    k->busy = 0;
    k->stat = stat;
    k->strings = strings;
    k->value = value;
    k->value_len = value_len;
    k->next(k, rc);
    zkr__op_end(op);
}

static void call_void(int rc, const void *data)
{
    call_answer(data, rc, NULL, NULL, NULL, 0);
}

static void call_stat(int rc, const struct Stat *stat, const void *data)
{
    call_answer(data, rc, stat, NULL, NULL, 0);
}

static void call_data(int rc, const char *value, int len,
                      const struct Stat *stat, const void *data)
{
    call_answer(data, rc, stat, NULL, value, len);
}

static void call_strings(int rc, const struct String_vector *v,
                         const void *data)
{
    call_answer(data, rc, NULL, v, NULL, 0);
}

static void call_strings_stat(int rc, const struct String_vector *v,
                              const struct Stat *stat, const void *data)
{
    call_answer(data, rc, stat, v, NULL, 0);
}

static void call_string(int rc, const char *value, const void *data)
{
    call_answer(data, rc, NULL, NULL, value, value != NULL ? -1 : 0);
}

/* The op of k's next request, or NULL with *rc set: not connected
 * (ZCONNECTIONLOSS), or short of memory (ZKR_ENOMEM; the engine's retry
 * wakes the session's tasks soon). */
static zkr__op_t *call_op(zkr__call_t *k, int *rc)
{
    zkr_session_t *s = k->s;
    zkr__op_t *op;

    if (s->closing || s->zh == NULL || !s->connected) {
        *rc = s->closing ? ZKR_ECLOSED : ZCONNECTIONLOSS;
        return NULL;
    }
    if ((op = zkr__op_new(s, k->m)) == NULL) {
        *rc = ZKR_ENOMEM;
        return NULL;
    }
    op->ctx = k;
    return op;
}

/* After issuing op's request with code rc: in flight, or undone. */
static int call_sent(zkr__call_t *k, zkr__op_t *op, int rc)
{
    if (rc != ZOK) {
        zkr__op_cancel(op);
        return rc;
    }
    k->busy = 1;
    return 0;
}

int zkr__call_exists(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_aexists(k->s->zh, path, 0, call_stat, op));
}

int zkr__call_get(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op, zoo_aget(k->s->zh, path, 0, call_data, op));
}

int zkr__call_children(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_aget_children(k->s->zh, path, 0,
                                                    call_strings, op));
}

int zkr__call_children2(zkr__call_t *k, const char *path, watcher_fn w,
                        void *wctx)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_awget_children2(k->s->zh, path, w, wctx,
                                                      call_strings_stat, op));
}

int zkr__call_wexists(zkr__call_t *k, const char *path, watcher_fn w,
                      void *wctx)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_awexists(k->s->zh, path, w, wctx,
                                               call_stat, op));
}

int zkr__call_wget(zkr__call_t *k, const char *path, watcher_fn w, void *wctx)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_awget(k->s->zh, path, w, wctx, call_data, op));
}

int zkr__call_create(zkr__call_t *k, const char *path, const char *data,
                     int len, const struct ACL_vector *acl, int mode)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_acreate(k->s->zh, path, data, len, acl,
                                              mode, call_string, op));
}

int zkr__call_delete(zkr__call_t *k, const char *path, int version)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_adelete(k->s->zh, path, version, call_void, op));
}

int zkr__call_set(zkr__call_t *k, const char *path, const char *data, int len,
                  int version)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_aset(k->s->zh, path, data, len, version,
                                           call_stat, op));
}

int zkr__call_multi(zkr__call_t *k, int n, const zoo_op_t *ops,
                    zoo_op_result_t *res)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_amulti(k->s->zh, n, ops, res, call_void, op));
}

int zkr__call_sync(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op, zoo_async(k->s->zh, path, call_string, op));
}

int zkr__call_ancestor(zkr__call_t *k, const char *path, int *at,
                       const struct ACL_vector *acl, int mode, int *rc)
{
    const char *slash = strchr(path + *at + 1, '/');
    char pre[ZKR_PATH_MAX + 1];

    if (slash == NULL || (size_t)(slash - path) >= sizeof(pre))
        return 0;
    *at = (int)(slash - path);
    memcpy(pre, path, (size_t)*at);
    pre[*at] = '\0';
    *rc = zkr__call_create(k, pre, "", 0, acl, mode);
    return 1;
}

/* ------------------------------------------------------ operations */

int zkr__rhandle_init(zkr__rhandle_t *h, zkr_session_t *s, const char *path,
                      const struct ACL_vector *acl)
{
    int rc = 0;

    memset(h, 0, sizeof(*h));
    if (zkr__check_path(path) != 0 || strcmp(path, "/") == 0 ||
        strlen(path) > ZKR_PATH_MAX)
        return ZBADARGUMENTS;
    if ((h->path = zkr__strdup(path)) == NULL ||
        (h->parent = zkr__strdup(path)) == NULL) {
        free(h->path);
        return ZKR_ENOMEM;
    }
    if (strrchr(h->parent, '/') == h->parent)
        h->parent[1] = '\0';
    else
        *strrchr(h->parent, '/') = '\0';
    h->s = s;
    if (acl == NULL)
        h->acl = ZOO_OPEN_ACL_UNSAFE; /* shared, not copied */
    else if ((rc = zkr__acl_copy(&h->acl, acl)) == 0)
        h->acl_owned = 1;
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        if (s->closing)
            rc = ZKR_ECLOSED;
        else
            zkr__session_hold(s, 1); /* zkr_session_free() refuses */
        pthread_mutex_unlock(&s->mu);
    }
    if (rc != 0) {
        if (h->acl_owned)
            zkr__acl_free(&h->acl);
        free(h->parent);
        free(h->path);
    }
    return rc;
}

static zkr__rhandle_t *rhandle_of_reader(zkr__reader_t *r)
{
    return (zkr__rhandle_t *)((char *)r - offsetof(zkr__rhandle_t, rd));
}

/* Do its operations need the session's watch on path? Each that does is
 * marked: its end removes the watch kept for it (asked when a removal is
 * about to be sent, so a watch kept for an operation that then ends
 * before it ever set one is still removed). */
static int rhandle_follows(zkr__reader_t *r, const char *path)
{
    zkr__rhandle_t *h = rhandle_of_reader(r);
    int follows = 0;

    for (zkr__rop_t *o = h->ops; o != NULL; o = o->next)
        if (o->cls->watches != NULL && o->cls->watches(o, path)) {
            o->watched = h->s->sid;
            follows = 1;
        }
    return follows;
}

/* The operations' tasks are woken by the engine on (re)connection and in
 * a forked child: nothing more to do here. */
static void rhandle_nothing(zkr__reader_t *r)
{
    (void)r;
}

static const zkr__reader_ops_t rhandle_reader_ops = {
    rhandle_nothing, rhandle_nothing, rhandle_follows};

void zkr__rhandle_follow(zkr__rhandle_t *h)
{
    h->rd.ops = &rhandle_reader_ops;
    pthread_mutex_lock(&h->s->mu);
    zkr__reader_add(h->s, &h->rd);
    h->following = 1;
    pthread_mutex_unlock(&h->s->mu);
}

int zkr__rhandle_gauge(zkr__rhandle_t *h, const zkr__gfamily_t *fam,
                       const char *path,
                       int64_t (*value)(zkr__gauge_t *g, int64_t now))
{
    int rc;

    pthread_mutex_lock(&h->s->mu);
    rc = zkr__gauge_attach(h->s, &h->gauge, fam, path, value);
    pthread_mutex_unlock(&h->s->mu);
    return rc;
}

void zkr__rhandle_free(zkr__rhandle_t *h)
{
    zkr_session_t *s = h->s;

    pthread_mutex_lock(&s->mu);
    zkr__gauge_detach(s, &h->gauge);
    /* Its operations all end now: their watches need no keeping. */
    if (h->following)
        zkr__reader_remove(s, &h->rd);
    h->following = 0;
    /* Operations end at their next step: one waiting (for a connection, a
     * pause, a watch) now, one with a request in flight when its answer
     * comes (on ZooKeeper's thread, bounded by the client's timeouts); a
     * write of unknown outcome is resolved first while connected. Their
     * ends post their completions, which do not touch h. */
    h->freeing = 1;
    for (zkr__rop_t *o = h->ops, *nx; o != NULL; o = nx) {
        nx = o->next;
        o->cls->go(o);
    }
    while (h->ops != NULL)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    zkr__session_hold(s, -1);
    pthread_mutex_unlock(&s->mu);
    if (h->acl_owned)
        zkr__acl_free(&h->acl);
    free(h->parent);
    free(h->path);
}

int64_t zkr__rop_bound(const zkr_session_t *s)
{
    return zkr__now_ms() + (s->req_timeout > 0 ? s->req_timeout : 10000) +
           (s->timeout > 0 ? s->timeout : 10000);
}

static void rop_wake(zkr__task_t *t)
{
    zkr__rop_t *o = (zkr__rop_t *)((char *)t - offsetof(zkr__rop_t, tk));

    o->cls->go(o);
}

zkr__rop_t *zkr__rop_of_task(zkr__task_t *t)
{
    return t->wake == rop_wake
               ? (zkr__rop_t *)((char *)t - offsetof(zkr__rop_t, tk))
               : NULL;
}

zkr__rop_t *zkr__rop_new(zkr__rhandle_t *h, size_t size,
                         const zkr__rop_class_t *cls, int async)
{
    zkr_session_t *s = h->s;
    zkr__rop_t *o = calloc(1, size);

    if (o == NULL)
        return NULL;
    if (async && (o->ev = zkr__event_new()) == NULL) {
        free(o);
        return NULL;
    }
    o->cls = cls;
    o->h = h;
    o->anc_at = -1;
    o->k.s = s;
    o->k.next = cls->answer;
    o->tk.wake = rop_wake;
    o->tk.wake_at = -1;
    o->deadline = zkr__rop_bound(s);
    o->next = h->ops;
    if (h->ops != NULL)
        h->ops->prev = o;
    h->ops = o;
    zkr__task_add(s, &o->tk);
    return o;
}

static void rop_deliver(const zkr__event_t *ev)
{
    zkr__rop_t *o = ev->data;

    o->cls->deliver(o);
    free(o);
}

void zkr__rop_end(zkr__rop_t *o, int rc)
{
    zkr__rhandle_t *h = o->h;
    zkr_session_t *s = h->s;

    zkr__task_remove(s, &o->tk);
    o->step = 0;
    o->rc = rc;
    o->h = NULL;
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        h->ops = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    pthread_cond_broadcast(&s->cv);
    if (o->ev == NULL) {
        o->ended = 1; /* the caller frees o */
        return;
    }
    if (s->forked) {
        free(o->ev); /* nothing runs in a forked child */
        free(o);
        return;
    }
    o->ev->run = rop_deliver;
    zkr__post_event(s, o->ev, ZKR__EV_CALL, rc, NULL, NULL, o);
}

void zkr__rop_issue(zkr__rop_t *o, int st, int rc)
{
    o->step = st;
    if (rc == 0) {
        o->unsent = 0;
        return;
    }
    o->step = 0;
    if (zkr__call_lost(rc) || rc == ZKR_ENOMEM) {
        o->unsent = rc;
        o->pause_until = zkr__now_ms() + ZKR__RETRY_MS;
        zkr__task_wake_at(o->h->s, &o->tk, o->pause_until);
        return;
    }
    o->cls->end(o, rc);
}

enum { ROP_ROUNDS = 3 }; /* creates refused for want of a parent, at most */

void zkr__rop_no_parent(zkr__rop_t *o)
{
    if (++o->rounds > ROP_ROUNDS) {
        o->cls->end(o, ZNONODE);
        return;
    }
    o->anc_at = 0;
    o->cls->go(o);
}

int zkr__rop_ancestor(zkr__rop_t *o, int st)
{
    int rc;

    if (!zkr__call_ancestor(&o->k, o->h->path, &o->anc_at, &o->h->acl, 0,
                            &rc)) {
        o->anc_at = -1;
        return 0;
    }
    zkr__rop_issue(o, st, rc);
    return 1;
}

int zkr__rop_ready(zkr__rop_t *o, int deadline_rc)
{
    zkr__rhandle_t *h = o->h;
    zkr_session_t *s = h->s;
    int64_t now = zkr__now_ms();

    if (s->forked) {
        o->cls->end(o, ZKR_ECLOSED); /* the parent's requests are not ours */
        return 0;
    }
    if (o->k.busy || o->step != 0)
        return 0; /* its answer goes on */
    if (h->freeing && !o->unknown) {
        o->cls->end(o, ZKR_ECANCELED);
        return 0;
    }
    if (o->pause_until > now) {
        zkr__task_wake_at(s, &o->tk, o->pause_until);
        return 0;
    }
    if (s->closing) {
        o->cls->end(o, ZKR_ECLOSED);
        return 0;
    }
    if (deadline_rc != 0 && o->deadline >= 0 && now >= o->deadline) {
        /* not connected, or nothing could be sent */
        o->cls->end(o, o->unsent == ZKR_ENOMEM && deadline_rc == ZCONNECTIONLOSS
                           ? ZKR_ENOMEM
                           : deadline_rc);
        return 0;
    }
    if (s->zh == NULL || !s->connected) {
        if (zkr__lost_for_good(s))
            o->cls->end(o, ZKR_ELOST);
        else if (h->freeing)
            o->cls->end(o, ZCONNECTIONLOSS);
        else
            zkr__task_wake_at(s, &o->tk, o->deadline);
        return 0;
    }
    return 1;
}

int zkr__rop_wait(zkr__rop_t *o)
{
    zkr_session_t *s = o->k.s;

    while (!o->ended)
        zkr__wait(s, &o->ended, -1);
    return o->rc;
}

int zkr__rop_may_start(const zkr__rhandle_t *h)
{
    const zkr_session_t *s = h->s;

    return s->closing || s->forked || h->freeing ? ZKR_ECLOSED : 0;
}
