/* The work queue's take: the consumers' line, the scan for the oldest
 * available item, and its claim (docs/design/workq.md). */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workq.h"

/* -------------------------------------------------------------- take */

static void wq_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if (type == ZOO_SESSION_EVENT || type == ZOO_NOTWATCHING_EVENT ||
        path == NULL)
        return;
    if ((s = zkr__session_lock_live(ctx)) == NULL)
        return;
    zkr__engine(s)->watch_events++;
    s->counters[ZKR_COUNTER_WATCH_EVENTS]++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Remembers a watch the take set, to remove it when the take ends. */
static void note_watch(zkr_workq_t *q, const char *path, int wtype)
{
    for (int i = 0; i < q->nw; i++)
        if (q->wtype[i] == wtype && strcmp(q->wpath[i], path) == 0)
            return;
    if (q->nw == q->capw) {
        int cap = q->capw > 0 ? 2 * q->capw : 8;
        char **p = realloc(q->wpath, sizeof(*p) * (size_t)cap);
        int *t;

        if (p == NULL)
            return;
        q->wpath = p;
        if ((t = realloc(q->wtype, sizeof(*t) * (size_t)cap)) == NULL)
            return;
        q->wtype = t;
        q->capw = cap;
    }
    if ((q->wpath[q->nw] = zkr__strdup(path)) != NULL)
        q->wtype[q->nw++] = wtype;
}

/* The take ends: its watches go (through the session's cleanup list,
 * which retries across disconnections). */
static void drop_watches(zkr_workq_t *q)
{
    zkr_session_t *s = q->s;

    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < q->nw; i++) {
        zkr__cleanup_add_watch(s, q->wpath[i], q->wtype[i], wq_watcher);
        free(q->wpath[i]);
    }
    q->nw = 0;
    pthread_mutex_unlock(&s->mu);
}

static int list(zkr_workq_t *q, zhandle_t *zh, const char *path, int watch,
                struct String_vector *v, struct Stat *st)
{
    struct Stat dummy;
    int rc;

    if (st == NULL)
        st = &dummy;
    if (watch) {
        rc = zoo_wget_children2(zh, path, wq_watcher, q->s, v, st);
        if (rc == ZOK)
            note_watch(q, path, ZWATCHTYPE_CHILD);
    } else {
        rc = zoo_get_children2(zh, path, 0, v, st);
    }
    return rc;
}

/* Moves an item that has been delivered dead_max times to the dead-letter
 * path: its copy and its deletion in one multi. */
static int dead_letter(zkr_workq_t *q, zhandle_t *zh, const char *ipath,
                       const char *name, const char *data, int len, int v)
{
    char dead[600];
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    int rc = ZOK;

    snprintf(dead, sizeof(dead), "%s/%s", q->dead_path, name);
    for (int tries = 0; tries < 3; tries++) {
        zoo_create_op_init(&ops[0], dead, data, len, q->acl, ZOO_PERSISTENT,
                           NULL, 0);
        zoo_delete_op_init(&ops[1], ipath, v);
        /* Results are only written by a multi the server answered: one
         * that failed as a whole (the connection lost: it may or may not
         * have applied) must not read as the dead node already there,
         * which deletes the item alone. */
        memset(res, 0, sizeof(res));
        rc = zoo_multi(zh, 2, ops, res);
        if (rc == ZOK)
            return ZOK;
        if (res[0].err == ZNODEEXISTS) /* moved before, answer lost */
            return zoo_delete(zh, ipath, v) == ZOK ? ZOK : ZOK;
        if (res[0].err == ZNONODE) {
            if ((rc = zkr__wq_make_node(zh, q->dead_path, "", q->acl)) != ZOK)
                return rc;
            continue;
        }
        return zkr__wq_conn_error(rc) ? rc
                                      : ZOK; /* changed meanwhile: rescan */
    }
    return rc;
}

/* Deletes path and what is below it (at most depth levels below): a
 * node another client left under an item. ZOK (gone), or a code. */
static int delete_tree(zhandle_t *zh, const char *path, int depth)
{
    struct String_vector v = {0, NULL};
    int rc = zoo_delete(zh, path, -1);

    if (rc != ZNOTEMPTY || depth <= 0)
        return rc == ZNONODE ? ZOK : rc;
    if ((rc = zoo_get_children(zh, path, 0, &v)) != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    for (int i = 0; i < v.count && rc == ZOK; i++) {
        /* Names of other clients' nodes can be of any length. */
        char *sub = zkr__join(path, v.data[i]);

        rc = sub != NULL ? delete_tree(zh, sub, depth - 1) : ZKR_ENOMEM;
        free(sub);
    }
    deallocate_String_vector(&v);
    if (rc == ZOK)
        rc = zoo_delete(zh, path, -1);
    return rc == ZNONODE ? ZOK : rc;
}

/* Is the item at ipath (with children) claimed? A claim is an ephemeral
 * contender node (engine name, ephemeral owner): anything else under an
 * item is not the queue's and would keep the item from ever being taken
 * or completed, so it is deleted (workq.md, section 3). 1 (claimed by a
 * live session, or a node there that we may not delete: skipped), 0 (not
 * claimed: nothing else left under it), or a connection error or
 * ZKR_ENOMEM (< 0). With watch, a child watch on the item is set. */
static int item_claimed(zkr_workq_t *q, zhandle_t *zh, const char *ipath,
                        int watch)
{
    for (int round = 0; round < 3; round++) {
        struct String_vector cv = {0, NULL};
        zkr__entry_t *e = NULL;
        int n = 0, rc, junk = 0;

        if (watch) {
            rc = zoo_wget_children(zh, ipath, wq_watcher, q->s, &cv);
            if (rc == ZOK)
                note_watch(q, ipath, ZWATCHTYPE_CHILD);
        } else {
            rc = zoo_get_children(zh, ipath, 0, &cv);
        }
        if (rc != ZOK)
            return rc == ZNONODE ? 1 : rc; /* gone: nothing to take */
        if ((rc = zkr__sort_children(&cv, &e, &n)) != 0) {
            deallocate_String_vector(&cv);
            return rc;
        }
        for (int i = 0; i < cv.count && rc == ZOK; i++) {
            char *cpath;
            int claim = 0;

            for (int k = 0; k < n && !claim; k++)
                claim = e[k].name == cv.data[i];
            if (claim)
                continue;
            /* Names of other clients' nodes can be of any length. */
            cpath = zkr__join(ipath, cv.data[i]);
            rc = cpath != NULL ? delete_tree(zh, cpath, 8) : ZKR_ENOMEM;
            free(cpath);
            junk = 1;
        }
        if (rc == ZOK && n > 0) {
            /* The first contender holds the item: a claim only if
             * ephemeral (a persistent node of that name is not one). */
            char *cpath = zkr__join(ipath, e[0].name);
            struct Stat cs;

            rc = cpath != NULL ? zoo_exists(zh, cpath, 0, &cs) : ZKR_ENOMEM;
            if (rc == ZOK && cs.ephemeralOwner != 0) {
                free(cpath);
                free(e);
                deallocate_String_vector(&cv);
                return 1;
            }
            if (rc == ZOK)
                rc = delete_tree(zh, cpath, 8);
            else if (rc == ZNONODE)
                rc = ZOK;
            free(cpath);
            junk = 1;
        }
        free(e);
        deallocate_String_vector(&cv);
        if (rc != ZOK) /* a node we may not delete (ZNOAUTH): skipped */
            return zkr__wq_conn_error(rc) || rc == ZKR_ENOMEM ? rc : 1;
        if (!junk)
            return 0;
    }
    return 1; /* still changing: left for the next scan */
}

/* A scan step found an available item (made, not yet claimed). */
#define SCAN_FOUND 1

/* The item e of bucket bt: SCAN_FOUND with *it made if it is available
 * (the claim is the caller's), ZOK if it is not (or was dead-lettered),
 * or a code. */
static int scan_item(zkr_workq_t *q, zhandle_t *zh, int watch, const char *bt,
                     const wq_entry_t *e, int level, int bsize, char *buf,
                     zkr_item_t **it)
{
    char ipath[512];
    struct Stat st;
    int len = ZKR_WORKQ_DATA_MAX, rc;

    snprintf(ipath, sizeof(ipath), "%s/%s", bt, e->name);
    if ((rc = zoo_exists(zh, ipath, 0, &st)) != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    if (st.numChildren > 0) {
        /* Claimed: its claim going (a death, a nack) makes it available
         * again (watched). Children that are not a live claim are
         * deleted: then it is available. */
        int r = item_claimed(q, zh, ipath, watch);

        if (r != 0)
            return r == 1 ? ZOK : r;
    }
    if ((rc = zoo_get(zh, ipath, 0, buf, &len, &st)) != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    if (st.numChildren > 0)
        return ZOK;
    if (len < 0)
        len = 0;
    /* Deliveries so far: each claim is one child created and deleted
     * under the item (its cversion), so writes to the item's data by
     * others do not count. */
    if (q->dead_max > 0 && e->carry + (st.cversion + 1) / 2 >= q->dead_max)
        return dead_letter(q, zh, ipath, e->name, buf, len, st.version);
    *it = zkr__wq_item_make(q, ipath, level, e->name, e->carry, st.version,
                            st.cversion, buf, len, bsize);
    return *it != NULL ? SCAN_FOUND : ZKR_ENOMEM;
}

/* The items of bucket number bucket of level L (ql), oldest first, as
 * scan_item; last: the highest bucket; tail: where puts go (watched). */
static int scan_bucket(zkr_workq_t *q, zhandle_t *zh, int watch, const char *ql,
                       int bucket, int last, int tail, int level, int bsize,
                       char *buf, zkr_item_t **it)
{
    char bt[320];
    struct String_vector iv = {0, NULL};
    struct Stat bst;
    wq_entry_t *e;
    int ni = 0, rc;

    snprintf(bt, sizeof(bt), "%s/b%010d", ql, bucket);
    if ((rc = list(q, zh, bt, watch && tail, &iv, &bst)) != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    if ((e = zkr__wq_sorted_items(&iv, &ni)) == NULL) {
        deallocate_String_vector(&iv);
        return ZKR_ENOMEM;
    }
    if (ni == 0 && bst.version >= 1 && !last)
        (void)zoo_delete(zh, bt, -1); /* empty and sealed */
    for (int i = 0; rc == ZOK && i < ni; i++)
        rc = scan_item(q, zh, watch, bt, &e[i], level, bsize, buf, it);
    free(e);
    deallocate_String_vector(&iv);
    return rc;
}

/* The buckets of level L, oldest first, as scan_item; top: the queue's
 * children. */
static int scan_level(zkr_workq_t *q, zhandle_t *zh, int watch,
                      const struct String_vector *top, int level, char *buf,
                      zkr_item_t **it)
{
    char ql[300], name[16];
    struct String_vector bv = {0, NULL};
    struct Stat qst;
    int found = 0, nb = 0, *bk, rc;
    int bsize = zkr__wq_read_bucket(q, zh);

    snprintf(name, sizeof(name), "q%d", level);
    for (int i = 0; i < top->count && !found; i++)
        found = strcmp(top->data[i], name) == 0;
    if (!found)
        return ZOK;
    snprintf(ql, sizeof(ql), "%s/%s", q->path, name);
    if ((rc = list(q, zh, ql, watch, &bv, &qst)) != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    /* q<L>'s version names the tail, where puts go: watched too, and so is
     * the tail itself below, as it need not be the last bucket (another
     * client may make one ahead of it). */
    if (watch && zoo_wexists(zh, ql, wq_watcher, q->s, &qst) == ZOK)
        note_watch(q, ql, ZWATCHTYPE_DATA);
    bk = zkr__wq_sorted_buckets(&bv, &nb);
    deallocate_String_vector(&bv);
    if (bk == NULL)
        return ZKR_ENOMEM;
    for (int b = 0; rc == ZOK && b < nb; b++)
        rc = scan_bucket(q, zh, watch, ql, bk[b], b == nb - 1,
                         b == nb - 1 || bk[b] == qst.version, level, bsize, buf,
                         it);
    free(bk);
    return rc;
}

/* One scan by the consumer whose turn it is: the first available item,
 * claimed. 0 (*out set), WQ_AGAIN (something changed: scan again),
 * WQ_EMPTY, or a code. With watch, every place a new item can appear is
 * watched. */
static int scan(zkr_workq_t *q, int watch, char *buf, zkr_item_t **out)
{
    zkr_session_t *s = q->s;
    struct String_vector top = {0, NULL};
    zkr_item_t *it = NULL;
    zhandle_t *zh;
    int rc;

    if ((rc = zkr__zh_get(s, &zh)) != 0)
        return rc;
    rc = list(q, zh, q->path, watch, &top, NULL);
    if (rc == ZNONODE) {
        struct Stat st;

        if (watch && zoo_wexists(zh, q->path, wq_watcher, s, &st) == ZNONODE)
            note_watch(q, q->path, ZWATCHTYPE_DATA);
        zkr__zh_put(s);
        return WQ_EMPTY;
    }
    for (int level = 0; rc == ZOK && level < ZKR_WORKQ_LEVELS; level++)
        rc = scan_level(q, zh, watch, &top, level, buf, &it);
    deallocate_String_vector(&top);
    /* The claim: the zh is given back first (the acquire waits, and may
     * outlive this handle's connection). */
    zkr__zh_put(s);
    if (rc != SCAN_FOUND)
        return rc == ZOK ? WQ_EMPTY : rc;
    rc = zkr__acquire(&it->c, 0, NULL, NULL);
    if (rc == 0) {
        *out = it;
        return 0;
    }
    zkr_item_free(it);
    /* ESTALE: another consumer (or a writer) got there; EBUSY: a foreign
     * node in the item. */
    return rc == ZKR_ESTALE || rc == ZKR_EBUSY ? WQ_AGAIN : rc;
}

static void turn_released(int rc, void *l, void *data)
{
    (void)rc;
    (void)l;
    (void)data;
}

/* Ends a take: watches removed, the turn given back (not awaited). */
static void take_end(zkr_workq_t *q)
{
    drop_watches(q);
    if (zkr__release(&q->turn, (void (*)(void))turn_released, NULL) ==
        ZKR_ESTATE)
        zkr__cancel(&q->turn);
}

static int take_run(zkr_workq_t *q, int timeout_ms, zkr_item_t **out)
{
    zkr_session_t *s = q->s;
    int64_t deadline = timeout_ms > 0 ? zkr__now_ms() + timeout_ms : -1;
    int rc, watch = 0, left;
    char *buf = malloc(ZKR_WORKQ_DATA_MAX);

    *out = NULL;
    if (buf == NULL)
        return ZKR_ENOMEM;
    /* The last take's turn may still be being given back. */
    pthread_mutex_lock(&s->mu);
    while (q->turn.phase == ZKR__P_RELEASING && !q->cancel)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    rc = q->cancel ? ZKR_ECANCELED : 0;
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    left = deadline < 0 ? timeout_ms : (int)(deadline - zkr__now_ms());
    rc = zkr__acquire(&q->turn,
                      timeout_ms <= 0 ? timeout_ms
                      : left > 0      ? left
                                      : 1,
                      NULL, NULL);
    if (rc != 0) {
        free(buf);
        return rc == ZKR_EBUSY ? ZKR_ETIMEDOUT : rc;
    }
    for (;;) {
        uint64_t gen;
        int connected;

        pthread_mutex_lock(&s->mu);
        zkr__enforce_deadline(s);
        if (q->cancel)
            rc = ZKR_ECANCELED;
        else if (q->turn.phase != ZKR__P_HELD)
            rc = ZKR_ELOST;
        else if (deadline >= 0 && zkr__now_ms() >= deadline)
            rc = ZKR_ETIMEDOUT;
        gen = zkr__engine(s)->watch_events;
        connected = s->connected;
        pthread_mutex_unlock(&s->mu);
        if (rc != 0)
            break;
        if (!connected) {
            rc = zkr__wq_wait_connected(s, deadline, &q->cancel);
            if (rc == ZKR_ETIMEDOUT && deadline < 0)
                rc = 0;
            if (rc != 0)
                break;
            continue;
        }
        rc = scan(q, watch, buf, out);
        if (rc == 0)
            break;
        if (rc == WQ_AGAIN || zkr__wq_conn_error(rc)) {
            rc = 0;
            continue;
        }
        if (rc != WQ_EMPTY)
            break;
        rc = 0;
        if (!watch) {
            watch = 1; /* again, watching: nothing can come unseen */
            continue;
        }
        if (timeout_ms == 0) {
            rc = ZKR_ETIMEDOUT;
            break;
        }
        pthread_mutex_lock(&s->mu);
        while (zkr__engine(s)->watch_events == gen && !q->cancel &&
               q->turn.phase == ZKR__P_HELD && s->connected) {
            int64_t until = zkr__now_ms() + 500;
            if (deadline >= 0 && deadline < until)
                until = deadline;
            zkr__wait(s, NULL, until);
            if (deadline >= 0 && zkr__now_ms() >= deadline)
                break;
        }
        pthread_mutex_unlock(&s->mu);
    }
    take_end(q);
    free(buf);
    return rc;
}

static int take_begin(zkr_workq_t *q, int timeout_ms)
{
    zkr_session_t *s = q->s;
    int rc = 0;

    if (timeout_ms < -1)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&s->mu);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (q->taking)
        rc = ZKR_EALREADY;
    else if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned))
        rc = ZKR_ELOST;
    else {
        q->taking = 1;
        q->cancel = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void take_finish(zkr_workq_t *q)
{
    pthread_mutex_lock(&q->s->mu);
    q->taking = 0;
    q->cancel = 0;
    pthread_cond_broadcast(&q->s->cv);
    pthread_mutex_unlock(&q->s->mu);
}

int zkr_workq_take(zkr_workq_t *q, int timeout_ms, zkr_item_t **out)
{
    int rc;

    if (q == NULL || out == NULL)
        return ZBADARGUMENTS;
    *out = NULL;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    if ((rc = take_begin(q, timeout_ms)) != 0)
        return rc;
    if (q->thr_joinable) {
        pthread_join(q->thr, NULL);
        q->thr_joinable = 0;
    }
    rc = take_run(q, timeout_ms, out);
    take_finish(q);
    return rc;
}

struct take_job {
    zkr_workq_t *q;
    int timeout_ms;
    zkr_take_completion_t cb;
    void *cbdata;
    zkr_item_t *it;
};

static void take_deliver(const zkr__event_t *ev)
{
    struct take_job *j = ev->data;

    j->cb(ev->a, j->it, j->cbdata);
    free(j);
}

static void *take_thread(void *arg)
{
    struct take_job *j = arg;
    zkr_workq_t *q = j->q;
    zkr_session_t *s = q->s;
    int rc = take_run(q, j->timeout_ms, &j->it);

    pthread_mutex_lock(&s->mu);
    q->taking = 0;
    q->cancel = 0;
    if (zkr__post_call(s, take_deliver, rc, NULL, j) != 0) {
        zkr_item_t *it = j->it;
        free(j);
        pthread_mutex_unlock(&s->mu);
        zkr_item_free(it); /* nobody can be told: give it back */
        pthread_mutex_lock(&s->mu);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int zkr_workq_take_async(zkr_workq_t *q, int timeout_ms,
                         zkr_take_completion_t cb, void *data)
{
    struct take_job *j;
    int rc;

    if (q == NULL || cb == NULL)
        return ZBADARGUMENTS;
    if ((rc = take_begin(q, timeout_ms)) != 0)
        return rc;
    /* The last asynchronous take's thread has ended or is ending. */
    if (q->thr_joinable) {
        pthread_join(q->thr, NULL);
        q->thr_joinable = 0;
    }
    if ((j = calloc(1, sizeof(*j))) == NULL) {
        take_finish(q);
        return ZKR_ENOMEM;
    }
    j->q = q;
    j->timeout_ms = timeout_ms;
    j->cb = cb;
    j->cbdata = data;
    /* The thread and its flag are set under the mutex: the take may end
     * and its completion free q (zkr_workq_free reads them under it)
     * before pthread_create returns here; q is not touched after. */
    pthread_mutex_lock(&q->s->mu);
    if (pthread_create(&q->thr, NULL, take_thread, j) != 0) {
        pthread_mutex_unlock(&q->s->mu);
        free(j);
        take_finish(q);
        return ZKR_ESYS;
    }
    q->thr_joinable = 1;
    pthread_cond_broadcast(&q->s->cv); /* zkr_workq_free may wait for it */
    pthread_mutex_unlock(&q->s->mu);
    return 0;
}

/* Ends the pending take (mutex held; 0 or ZKR_ESTATE). The take may be
 * about to start waiting for its turn: until its acquire is under way (or
 * the turn held, or the take over) the turn cannot be canceled, so this
 * waits for that (briefly: no request stands between). */
int zkr__wq_take_cancel(zkr_workq_t *q)
{
    zkr_session_t *s = q->s;

    if (!q->taking)
        return ZKR_ESTATE;
    q->cancel = 1;
    pthread_cond_broadcast(&s->cv);
    for (int i = 0;
         i < 100 && q->taking && q->turn.phase != ZKR__P_HELD &&
         q->turn.pub != ZKR_LOCK_ACQUIRING && q->turn.pub != ZKR_LOCK_DELAYED;
         i++)
        zkr__wait(s, NULL, zkr__now_ms() + 10);
    return 0;
}

int zkr_workq_cancel(zkr_workq_t *q)
{
    int rc;

    if (q == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&q->s->mu);
    rc = zkr__wq_take_cancel(q);
    pthread_mutex_unlock(&q->s->mu);
    if (rc == 0)
        zkr__cancel(&q->turn); /* a wait for the turn ends now */
    return rc;
}
