/* The work queue's take: the consumers' line, the scan for the oldest
 * available item, and its claim (docs/design/workq.md).
 *
 * A take is a chain of asynchronous requests (zkr__call_t), each issued in
 * the previous answer's completion under the session's mutex, and a task
 * (zkr__task_t) that the engine wakes when the chain cannot go on by
 * itself: the turn's or the claim's acquire ended (engine, c->task), the
 * session (re)connected or was lost, a watch of the take fired, the
 * deadline passed, or the take was cancelled. No thread of its own: the
 * blocking take starts the chain and waits for its end. */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workq_take.h"

static void take_go(take_t *t);
static void take_next(zkr__call_t *k, int rc);
static void next_level(take_t *t);
static void next_bucket(take_t *t);
static void list_bucket(take_t *t);
static void join_line(take_t *t);
static void missed(take_t *t);
static void read_item(take_t *t);

static void take_wake(zkr__task_t *tk)
{
    take_go((take_t *)((char *)tk - offsetof(take_t, tk)));
}

/* ------------------------------------------------------ the cursor */

/* A consumer goes on from where its last take claimed (workq.md, 3):
 * the rest of that bucket, then the buckets and levels after it, then a
 * new listing from the top. The levels above its own were empty when it
 * listed them; the child watches of that listing (PATH, and the tail
 * bucket of each level above) tell of a change there, and then the next
 * take lists from the top again. */

/* A listing's items (one bucket's), then all of it. */
static void listing_free_items(wq_listing_t *l)
{
    free(l->e);
    l->e = NULL;
    l->ni = 0;
    zkr__take_free_names(&l->iv);
}

static void listing_free(wq_listing_t *l)
{
    free(l->bk);
    l->bk = NULL;
    l->nb = 0;
    listing_free_items(l);
}

static void cursor_drop(wq_cursor_t *c)
{
    if (c->have)
        listing_free(&c->l);
    c->have = 0;
}

static wq_cursor_t *cursor_of(zkr__reader_t *r)
{
    return (wq_cursor_t *)((char *)r - offsetof(wq_cursor_t, rd));
}

/* The handle of a cursor. */
static zkr_workq_t *cursor_handle(wq_cursor_t *c)
{
    return (zkr_workq_t *)((char *)c - offsetof(zkr_workq_t, cur));
}

/* A watch the cursor set fired on path (one of PATH, q<L>, a bucket of
 * q<L>): it is gone, and the change is noted by where it was. */
static void cursor_event(zkr_workq_t *q, const char *path)
{
    wq_cursor_t *c = &q->cur;
    const char *r = path + strlen(q->path); /* all under PATH */
    int i;

    for (i = 0; i < c->nw && strcmp(c->wpath[i], path) != 0; i++)
        ;
    if (i == c->nw)
        return; /* not one of its watches */
    free(c->wpath[i]);
    c->wpath[i] = c->wpath[--c->nw];
    if (r[0] == '/' && r[1] == 'q' && r[2] >= '0' &&
        r[2] < '0' + ZKR_WORKQ_LEVELS)
        c->changed |= 1u << (r[2] - '0');
    else
        c->changed |= WQ_CHANGED_TOP;
}

int zkr__wq_changed_above(const zkr_workq_t *q, int level)
{
    return (q->cur.changed & (WQ_CHANGED_TOP | ((1u << level) - 1))) != 0;
}

/* May the next take go on from the cursor? Made in this session, and
 * nothing told of a change at PATH or at a level above its own. */
static int cursor_valid(const zkr_workq_t *q)
{
    return q->cur.have && q->cur.sid == q->s->sid &&
           !zkr__wq_changed_above(q, q->cur.l.level);
}

static const zkr__reader_ops_t cursor_ops;

/* The session's next queue handle after q (NULL: the first), or NULL:
 * each handle's cursor is one of the session's readers. */
static zkr_workq_t *next_handle(zkr_session_t *s, zkr_workq_t *q)
{
    zkr__reader_t *r = q == NULL ? zkr__engine(s)->readers : q->cur.rd.next;

    while (r != NULL && r->ops != &cursor_ops)
        r = r->next;
    return r != NULL ? cursor_handle(cursor_of(r)) : NULL;
}

static void cursors_event(zkr_session_t *s, const char *path)
{
    for (zkr_workq_t *q = next_handle(s, NULL); q != NULL;
         q = next_handle(s, q))
        cursor_event(q, path);
}

zkr_workq_t *zkr__wq_handle_of(zkr_session_t *s, const char *qpath)
{
    zkr_workq_t *q = next_handle(s, NULL);

    while (q != NULL && strcmp(q->path, qpath) != 0)
        q = next_handle(s, q);
    return q;
}

void zkr__wq_gave_back(zkr_session_t *s, const char *qpath)
{
    for (zkr_workq_t *q = next_handle(s, NULL); q != NULL;
         q = next_handle(s, q))
        if (strcmp(q->path, qpath) == 0)
            q->cur.changed |= WQ_CHANGED_TOP;
}

static int cursor_follows(zkr__reader_t *r, const char *path)
{
    wq_cursor_t *c = cursor_of(r);

    /* Watches of an older session went with it. */
    if (c->sid != cursor_handle(c)->s->sid)
        return 0;
    for (int i = 0; i < c->nw; i++)
        if (strcmp(c->wpath[i], path) == 0)
            return 1;
    return 0;
}

static void cursor_nop(zkr__reader_t *r)
{
    (void)r;
}

static void cursor_forked(zkr__reader_t *r)
{
    cursor_drop(cursor_of(r)); /* the parent's watches are not ours */
}

static const zkr__reader_ops_t cursor_ops = {
    .refresh = cursor_nop,
    .forked = cursor_forked,
    .follows = cursor_follows,
};

/* Notes a watch a scan of the cursor set; 0, or -1 (short of memory: the
 * listing is not kept, as no change there could be told). */
static int cursor_note(wq_cursor_t *c, const char *path)
{
    for (int i = 0; i < c->nw; i++)
        if (strcmp(c->wpath[i], path) == 0)
            return 0;
    if (c->nw == WQ_CURSOR_WATCHES ||
        (c->wpath[c->nw] = zkr__strdup(path)) == NULL)
        return -1;
    c->nw++;
    return 1;
}

/* A note whose listing set no watch (it failed, or was not sent) goes,
 * unless an earlier listing's watch is there (it was noted before). */
static void cursor_unnote(take_t *t, int step)
{
    wq_cursor_t *c = &t->q->cur;
    const char *path = step == TK_TOP ? t->q->path : t->l.bt;

    if (!t->cw || !t->note_new ||
        (step != TK_TOP && !(step == TK_BUCKET && t->l.tail)))
        return;
    t->note_new = 0;
    t->keep = 0; /* no change there could be told */
    for (int i = 0; i < c->nw; i++)
        if (strcmp(c->wpath[i], path) == 0) {
            free(c->wpath[i]);
            c->wpath[i] = c->wpath[--c->nw];
            return;
        }
}

void zkr__wq_cursor_init(zkr_workq_t *q)
{
    q->cur.rd.ops = &cursor_ops;
    zkr__reader_add(q->s, &q->cur.rd);
}

/* The cursor's watches go (the session's cleanup removes them, unless
 * a take of the session needs the same watch), and its listing. */
static void cursor_unwatch(zkr_workq_t *q)
{
    wq_cursor_t *c = &q->cur;
    int n = c->nw;

    cursor_drop(c);
    c->nw = 0; /* followed no more: the removals go out */
    for (int i = 0; i < n; i++) {
        if (!q->s->forked && c->sid == q->s->sid)
            zkr__cleanup_add_watch(q->s, c->wpath[i], ZWATCHTYPE_CHILD,
                                   zkr__take_watcher);
        free(c->wpath[i]);
    }
}

void zkr__wq_cursor_end(zkr_workq_t *q)
{
    zkr__reader_remove(q->s, &q->cur.rd);
    cursor_unwatch(q);
}

/* A watch of a take fired: every take of the session looks again (the
 * watch's context is the session, which outlives any take). */
void zkr__take_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx)
{
    zkr_session_t *s;

    (void)zh;
    (void)state;
    if ((s = zkr__call_watch_event(type, path, ctx)) == NULL)
        return;
    if (type == ZOO_CHILD_EVENT || type == ZOO_DELETED_EVENT)
        cursors_event(s, path); /* the cursor's are child watches */
    for (zkr__task_t *tk = zkr__engine(s)->tasks; tk != NULL; tk = tk->next)
        if (tk->wake == take_wake)
            zkr__task_wake_at(s, tk, 0);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------ bookkeeping */

/* Remembers a watch the take set, to remove it when the take ends. */
static void note_watch(take_t *t, const char *path, int wtype)
{
    for (int i = 0; i < t->nw; i++)
        if (t->wtype[i] == wtype && strcmp(t->wpath[i], path) == 0)
            return;
    if (t->nw == t->capw) {
        int cap = t->capw > 0 ? 2 * t->capw : 8;
        char **p = realloc(t->wpath, sizeof(*p) * (size_t)cap);
        int *w;

        if (p == NULL)
            return;
        t->wpath = p;
        if ((w = realloc(t->wtype, sizeof(*w) * (size_t)cap)) == NULL)
            return;
        t->wtype = w;
        t->capw = cap;
    }
    if ((t->wpath[t->nw] = zkr__strdup(path)) != NULL)
        t->wtype[t->nw++] = wtype;
}

/* A copy of v (valid during an answer only); 0 or ZKR_ENOMEM. */
int zkr__take_copy_names(struct String_vector *to,
                         const struct String_vector *v)
{
    int n = v != NULL ? v->count : 0;

    to->count = 0;
    to->data = calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    if (to->data == NULL)
        return ZKR_ENOMEM;
    for (int i = 0; i < n; i++) {
        if ((to->data[i] = zkr__strdup(v->data[i])) == NULL) {
            to->count = i;
            return ZKR_ENOMEM;
        }
    }
    to->count = n;
    return 0;
}

void zkr__take_free_names(struct String_vector *v)
{
    for (int i = 0; i < v->count; i++)
        free(v->data[i]);
    free(v->data);
    v->data = NULL;
    v->count = 0;
}

static void free_items(take_t *t)
{
    listing_free_items(&t->l);
}

static void free_scan(take_t *t)
{
    listing_free(&t->l);
    zkr__take_free_junk(t);
}

/* Frees what of the failed claims can be freed now (mutex held). */
static void spent_free(take_t *t)
{
    zkr_item_t **pp = &t->spent;

    while (*pp != NULL) {
        zkr_item_t *it = *pp, *next = it->spent_next;

        if (zkr__wq_item_try_free(it) == 0)
            *pp = next;
        else
            pp = &it->spent_next;
    }
}

/* A claim that failed: freed now or later. */
static void spend(take_t *t, zkr_item_t *it)
{
    it->c.task = NULL;
    it->spent_next = t->spent;
    t->spent = it;
    spent_free(t);
}

/* The failed claims freed (mutex not held). */
static void spent_destroy_all(take_t *t)
{
    while (t->spent != NULL) {
        zkr_item_t *it = t->spent;

        t->spent = it->spent_next;
        zkr_item_free(it);
    }
}

/* ----------------------------------------------------------- its end */

/* The claims were granted when the take ended, maybe long before its
 * caller learns it (the event thread ran late, the process was paused):
 * a claim lost meanwhile is reported as lost, as a blocking acquire's
 * would be, and its item freed (mutex not held). The take's code: 0 if
 * an item is left to hand over, else that of the last one lost (ZKR_ELOST
 * or ZKR_ECANCELED). */
static int take_hand_over(take_t *t, int rc)
{
    zkr_session_t *s = t->k.s;
    int n = 0;

    spent_destroy_all(t);
    if (rc != 0)
        return rc;
    for (int i = 0; i < t->nout; i++) {
        int r;

        pthread_mutex_lock(&s->mu);
        r = zkr__acquire_still(&t->outs[i]->c);
        pthread_mutex_unlock(&s->mu);
        if (r == 0) {
            t->outs[n++] = t->outs[i];
        } else {
            zkr_item_free(t->outs[i]);
            rc = r;
        }
    }
    t->nout = n;
    return n > 0 ? 0 : rc;
}

static void take_free(take_t *t)
{
    if (t->outs != &t->one)
        free(t->outs);
    free(t->claims);
    free(t);
}

/* An asynchronous take's completion, on the event thread: an event of
 * the handle's turn (workq.c, turn_deliver), so that the handle's free
 * waits for it (or, freed from a callback, ends after it). */
static void take_complete(int rc, void *arg)
{
    take_t *t = arg;

    rc = take_hand_over(t, rc);
    if (t->bcb != NULL)
        t->bcb(rc, rc == 0 ? t->outs : NULL, rc == 0 ? t->nout : 0, t->cbdata);
    else
        t->cb(rc, rc == 0 ? t->outs[0] : NULL, t->cbdata);
    take_free(t);
}

/* Does the take still need its watch on path (the session's cleanup
 * must not remove it, as a removal of another take's, retried after a
 * reconnection)? */
static int take_follows(zkr__reader_t *r, const char *path)
{
    take_t *t = (take_t *)((char *)r - offsetof(take_t, rd));

    for (int i = 0; i < t->nw; i++)
        if (strcmp(t->wpath[i], path) == 0)
            return 1;
    return 0;
}

static void take_reader_nop(zkr__reader_t *r)
{
    (void)r; /* the take's task is woken by the same changes */
}

static const zkr__reader_ops_t take_reader_ops = {
    .refresh = take_reader_nop,
    .forked = take_reader_nop,
    .follows = take_follows,
};

/* Mutex held: the take ends with rc (0: t->outs are its items). Its
 * watches go, its turn is given back (not awaited); a blocking caller is
 * woken, an asynchronous one told on the event thread. */
void zkr__take_end(take_t *t, int rc)
{
    zkr_workq_t *q = t->q;
    zkr_session_t *s = q->s;

    if (t->nout > 0)
        rc = 0; /* a batch hands over the items it has */
    t->step = TK_ENDED;
    zkr__task_remove(s, &t->tk);
    zkr__reader_remove(s, &t->rd); /* its watches are no longer needed */
    if (t->it != NULL) { /* a forked child's copy: not ours to give back */
        t->it->c.task = NULL;
        t->it = NULL;
    }
    for (int i = 0; i < t->nclaim; i++) /* ... and its batch's claims */
        t->claims[i]->c.task = NULL;
    t->nclaim = 0;
    if (rc == 0 && t->keep && t->l.e != NULL && !s->forked) {
        /* The next take goes on from here (scan_begin): from the item it
         * was looking at, if it neither passed nor claimed it (a batch
         * ended by a cancel, the deadline, a want of memory). */
        if (t->looking && t->l.i >= 0)
            t->l.i--;
        cursor_drop(&q->cur);
        q->cur.l = t->l;
        memset(&t->l, 0, sizeof(t->l));
        q->cur.have = 1;
    }
    free_scan(t);
    free(t->data);
    t->data = NULL;
    for (int i = 0; i < t->nw; i++) {
        if (!s->forked)
            zkr__cleanup_add_watch(s, t->wpath[i], t->wtype[i],
                                   zkr__take_watcher);
        free(t->wpath[i]);
    }
    free(t->wpath);
    free(t->wtype);
    t->wpath = NULL;
    t->wtype = NULL;
    t->nw = 0;
    q->turn.task = NULL;
    /* The turn is not acquiring now (take_go waits for its end): given
     * back if held. Should the release fail, the next take finds it held
     * and uses it (take_step, TK_RELEASING). */
    if (!s->forked)
        (void)zkr__release_task(&q->turn);
    spent_free(t);
    t->rc = rc;
    q->take = NULL;
    pthread_cond_broadcast(&s->cv);
    if (t->cb == NULL && t->bcb == NULL) {
        t->ended = 1; /* the caller frees t */
        return;
    }
    if (!s->forked) {
        /* An event of the handle's turn, so that its free waits for it
         * (or, freed from a callback, ends after it); allocated when the
         * take began, so that this cannot fail for want of memory. */
        zkr__post_event(s, t->ev, ZKR__EV_RELEASED, rc, &q->turn.m,
                        (void (*)(void))take_complete, t);
        return;
    }
    /* A forked child's copy: nobody to tell, nothing of it runs here. */
    free(t->ev);
    if (t->running)
        t->orphan = 1; /* freed when take_go returns */
    else
        take_free(t);
}

/* ------------------------------------------------------------- steps */

/* The take looks again after a pause (woken then). */
static void take_pause(take_t *t)
{
    t->step = 0;
    t->pause_until = zkr__now_ms() + ZKR__RETRY_MS;
    zkr__task_wake_at(t->q->s, &t->tk, t->pause_until);
}

/* The watch that the request of step st, just sent, sets for the take
 * in the line (t->watch), noted for its removal when the take ends. */
static void sent_watch(take_t *t, int st)
{
    if (!t->watch)
        return;
    if (st == TK_TOP)
        note_watch(t, t->q->path, ZWATCHTYPE_CHILD);
    else if (st == TK_TOP_WATCH)
        note_watch(t, t->q->path, ZWATCHTYPE_DATA);
    else if (st == TK_LEVEL)
        note_watch(t, t->l.ql, ZWATCHTYPE_CHILD);
    else if (st == TK_LEVEL_WATCH)
        note_watch(t, t->l.ql, ZWATCHTYPE_DATA);
    else if (st == TK_BUCKET && t->l.tail)
        note_watch(t, t->l.bt, ZWATCHTYPE_CHILD);
    else if (st == TK_CL_LIST)
        note_watch(t, t->ipath, ZWATCHTYPE_CHILD);
    else if ((st == TK_ITEM && t->retries > 0) || st == TK_BIG_WATCH)
        note_watch(t, t->ipath, ZWATCHTYPE_DATA);
}

/* A request of step st issued with code rc: in flight (0), or not sent:
 * the take looks again soon (not connected, short of memory). */
void zkr__take_issue(take_t *t, int st, int rc)
{
    t->step = st;
    if (rc == 0) {
        /* Sent: the watch it sets is noted now, in the same hold of the
         * mutex, so that no removal of the same watch (another take's,
         * ended; the session's cleanup checks who follows a path when it
         * sends one) can go out after it. */
        sent_watch(t, st);
        return;
    }
    cursor_unnote(t, st); /* not sent: no watch */
    t->step = 0;
    if (rc == ZKR_ENOMEM || rc == ZKR_ECLOSED || zkr__call_lost(rc)) {
        take_pause(t);
        return;
    }
    zkr__take_end(t, rc);
}

/* The scan stopped on rc: a lost answer scans again once connected (or
 * after a pause), another code ends the take. */
void zkr__take_failed(take_t *t, int rc)
{
    t->step = 0;
    free_scan(t);
    if (zkr__call_lost(rc)) {
        take_pause(t);
        return;
    }
    zkr__take_end(t, rc);
}

/* Looks again at once (something changed under the scan). */
static void scan_again(take_t *t)
{
    t->step = 0;
    free_scan(t);
    take_go(t);
}

/* Nothing available: a scan that set no watches is made again with
 * them (nothing can come unseen); after one that did, the take waits. */
/* Nothing available: a scan that went on from the cursor lists from the
 * top; one from the top joins the line (the turn), whose holder scans
 * with watches (nothing can come unseen) and then waits for them. */
static void scan_empty(take_t *t)
{
    if (t->nout > 0) { /* a batch: no wait for more */
        zkr__take_end(t, 0);
        return;
    }
    free_scan(t);
    if (t->resumed) {
        t->resumed = 0;
        scan_again(t);
        return;
    }
    if (t->timeout_ms == 0) {
        zkr__take_end(t, ZKR_ETIMEDOUT);
        return;
    }
    if (!t->lined) {
        /* Nothing there: while it waits in line, the cursor's watches
         * would tell it of every put (a herd of notifications); they go,
         * and only the first in line watches. */
        cursor_unwatch(t->q);
        join_line(t);
        return;
    }
    t->step = TK_WAIT;
    take_go(t);
}

/* The take joins the line; its holder goes on from the take's listing,
 * if it has one (scan_begin). */
static void join_line(take_t *t)
{
    t->lined = 1;
    t->step = TK_RELEASING;
    take_go(t);
}

/* The item looked at was taken (gone, claimed, or its claim lost the
 * race): the next one; before the line, after WQ_MISSES of them, the
 * take joins the line, where consumers that find items taken by the
 * others take their turns instead of racing for the same items (a take
 * with timeout 0 never joins it: it looks on). */
static void missed(take_t *t)
{
    t->retries = 0;
    t->looking = 0; /* passed */
    if (!t->lined && t->timeout_ms != 0 && t->nout == 0 &&
        ++t->misses >= WQ_MISSES) {
        join_line(t);
        return;
    }
    zkr__take_next_item(t);
}

/* The watcher of PATH's listing: the take's own (in the line), the
 * cursor's (before it), or none. */
static watcher_fn scan_watcher(const take_t *t)
{
    return t->watch || t->cw ? zkr__take_watcher : NULL;
}

/* ... of q<L>'s: the take's only. (A put at a level above the cursor's
 * goes to its tail bucket, watched; a seal there is made by such a put,
 * so the cursor needs no watch on q<L>.) */
static watcher_fn level_watcher(const take_t *t)
{
    return t->watch ? zkr__take_watcher : NULL;
}

/* A listing of path with the cursor's watch (t->cw): the watch is noted
 * before the request is sent, so that no removal of the same watch (a
 * take's, ended) goes out after it; if it cannot be noted, the listing
 * sets none and is not kept as the cursor. */
static void cursor_watch(take_t *t, const char *path)
{
    int rc = t->cw ? cursor_note(&t->q->cur, path) : 0;

    t->note_new = rc == 1;
    if (rc < 0) {
        t->cw = 0;
        t->keep = 0;
    }
}

/* A scan: in the line, from the top with watches; before it, from the
 * cursor while valid, else from the top with the cursor's watches (room
 * for them kept: PATH, and the tail bucket of every level). */
static void scan_begin(take_t *t)
{
    zkr_workq_t *q = t->q;
    wq_cursor_t *c = &q->cur;

    if (t->lined && !t->watch && t->l.e != NULL) {
        /* Joined the line from a listing: on from there, then from the
         * top with watches. From the item it was looking at, if it did
         * not pass it (its read or claim not sent, or timed out). */
        t->resumed = 1;
        t->relisted = 0;
        if (t->looking && t->l.i >= 0)
            read_item(t);
        else
            zkr__take_next_item(t);
        return;
    }
    free_scan(t);
    t->watch = t->lined;
    t->gen = zkr__engine(q->s)->watch_events;
    if (c->sid != q->s->sid) { /* its watches went with the session */
        for (int i = 0; i < c->nw; i++)
            free(c->wpath[i]);
        c->nw = 0;
        cursor_drop(c);
        c->sid = q->s->sid;
    }
    t->cw = !t->lined && c->nw + 1 + ZKR_WORKQ_LEVELS <= WQ_CURSOR_WATCHES;
    t->keep = t->cw;
    t->relisted = 0;
    if (!t->lined && cursor_valid(q)) {
        t->l = c->l;
        memset(&c->l, 0, sizeof(c->l));
        c->have = 0;
        t->resumed = 1;
        zkr__take_next_item(t);
        return;
    }
    cursor_drop(c);
    t->resumed = 0;
    if (t->cw)
        c->changed = 0; /* what its watches tell from now on */
    t->l.levels = 0;
    t->l.level = -1;
    cursor_watch(t, q->path);
    zkr__take_issue(t, TK_TOP,
                    zkr__call_children2(&t->k, q->path, scan_watcher(t), q->s));
}

/* The next level that exists, from its buckets on; B read first. */
static void next_level(take_t *t)
{
    zkr_workq_t *q = t->q;

    free(t->l.bk);
    t->l.bk = NULL;
    t->l.nb = 0;
    while (++t->l.level < ZKR_WORKQ_LEVELS &&
           !(t->l.levels & (1u << t->l.level)))
        ;
    if (t->l.level >= ZKR_WORKQ_LEVELS) {
        scan_empty(t);
        return;
    }
    if (q->bucket <= 0) {
        zkr__take_issue(t, TK_BSIZE, zkr__call_get(&t->k, q->path));
        return;
    }
    t->l.bsize = q->bucket;
    snprintf(t->l.ql, sizeof(t->l.ql), "%s/q%d", q->path, t->l.level);
    zkr__take_issue(
        t, TK_LEVEL,
        zkr__call_children2(&t->k, t->l.ql, level_watcher(t), q->s));
}

static void next_bucket(take_t *t)
{
    free_items(t);
    t->relisted = 0;
    if (t->l.sealed && t->l.b >= 0 && t->l.b < t->l.nb - 1) {
        /* A sealed bucket walked to its end: deleted if empty (NOTEMPTY:
         * items still claimed, or given back). */
        t->l.sealed = 0;
        zkr__take_issue(t, TK_BUCKET_DEL, zkr__call_delete(&t->k, t->l.bt, -1));
        return;
    }
    if (t->resumed) {
        /* The cursor's bucket ran out: its listing of the buckets and
         * levels after it may be old (an item put back at its own level,
         * a bucket made since): from the top. */
        scan_empty(t);
        return;
    }
    if (++t->l.b >= t->l.nb) {
        next_level(t);
        return;
    }
    snprintf(t->l.bt, sizeof(t->l.bt), "%s/b%010d", t->l.ql, t->l.bk[t->l.b]);
    /* The tail is where puts go: watched. q<L>'s version names it; it
     * need not be the last bucket (another client may make one ahead). */
    t->l.tail = (t->watch || t->cw) &&
                (t->l.b == t->l.nb - 1 || t->l.bk[t->l.b] == t->l.qver);
    list_bucket(t);
}

/* The items of bucket t->l.bt. */
static void list_bucket(take_t *t)
{
    zkr_workq_t *q = t->q;

    if (t->l.tail && !t->watch) {
        cursor_watch(t, t->l.bt);
        if (!t->cw)
            t->l.tail = 0; /* not noted: no watch either */
    }
    zkr__take_issue(t, TK_BUCKET,
                    zkr__call_children2(&t->k, t->l.bt,
                                        t->l.tail ? zkr__take_watcher : NULL,
                                        q->s));
}

void zkr__take_next_item(take_t *t)
{
    if (++t->l.i >= t->l.ni) {
        next_bucket(t);
        return;
    }
    t->retries = 0;
    read_item(t);
}

/* Reads the item at l.i: data, version, children. */
static void read_item(take_t *t)
{
    snprintf(t->ipath, sizeof(t->ipath), "%s/%s", t->l.bt, t->l.e[t->l.i].name);
    t->again = 0;
    t->looking = 1;
    /* Read again after a claim that found it written: in the line, with a
     * data watch, so that the write that fails the next claim wakes the
     * turn's holder should it pass the item over (WQ_CLAIM_RETRIES). */
    zkr__take_issue(
        t, TK_ITEM,
        t->watch && t->retries > 0
            ? zkr__call_wget(&t->k, t->ipath, zkr__take_watcher, t->q->s)
            : zkr__call_get(&t->k, t->ipath));
}

/* The item read (data, stat) has no children: available, unless it has
 * been delivered dead_max times (dead-lettered). Claimed by an engine
 * acquire whose end wakes the take. */
static void item_available(take_t *t, const char *data, int len,
                           const struct Stat *st)
{
    zkr_workq_t *q = t->q;
    const wq_entry_t *e = &t->l.e[t->l.i];
    zkr_item_t *it;
    int rc;

    if (len < 0 || data == NULL)
        len = 0;
    /* Another client's write made it larger than an item can be: its
     * claim (a setData of the whole data) would not fit in a request, nor
     * would its delivery fit what zkr.h promises. Skipped, as a node we
     * may not delete is (zkr inspect shows it). */
    if (len > ZKR_WORKQ_DATA_MAX) {
        /* In the line, watched: a write that makes it fit wakes the
         * turn's holder (TK_BIG_WATCH). */
        if (t->watch)
            zkr__take_issue(
                t, TK_BIG_WATCH,
                zkr__call_wexists(&t->k, t->ipath, zkr__take_watcher, q->s));
        else
            zkr__take_next_item(t);
        return;
    }
    /* Deliveries so far: each claim is one child created and deleted
     * under the item (its cversion), so writes to the item's data by
     * others do not count. */
    if (q->dead_max > 0 && e->carry + (st->cversion + 1) / 2 >= q->dead_max) {
        zkr__take_dead_letter(t, data, len, st->version);
        return;
    }
    it = zkr__wq_item_make(q, t->ipath, t->l.level, e->name, e->carry,
                           st->version, st->cversion, data, len, t->l.bsize);
    if (it == NULL) {
        zkr__take_end(t, ZKR_ENOMEM);
        return;
    }
    if ((rc = zkr__acquire_task(&it->c, 0, &t->tk)) != 0) {
        spend(t, it);
        zkr__take_failed(t, rc);
        return;
    }
    t->it = it;
    t->step = TK_CLAIM;
    /* Its end wakes the take (it may have ended already, inside
     * zkr__acquire_task: that woke it); so does the take's deadline. */
    if (!it->c.acq_done)
        zkr__task_wake_at(q->s, &t->tk, t->deadline);
}

void zkr__take_claims_wait(take_t *t, int awaited, int over)
{
    zkr__task_wake_at(t->q->s, &t->tk,
                      awaited             ? zkr__now_ms() + ZKR__RETRY_MS
                      : t->cancel || over ? -1
                                          : t->deadline);
}

int zkr__claim_stop(zkr_item_t *it)
{
    if (zkr__acquire_sent(&it->c))
        return 1;
    (void)zkr__cancel_task(&it->c);
    return 0;
}

/* ------------------------------------------------------ the answers */

/* Notes the watch that step's answer (rc) says the server set, to
 * remove it when the take ends (whatever happens next: a cancel too). */
static void answer_watch(take_t *t, int step, int rc)
{
    if (t->cw && rc != ZOK)
        cursor_unnote(t, step); /* the cursor's: no watch set */
    /* The take's own were noted when sent (sent_watch): removed when it
     * ends, set or not (a removal of none costs no request). */
}

/* The item looked at is gone: taken by another consumer. Others are
 * ahead, and what they took is gone from a new listing of the bucket (one
 * request where the gone items are one each), made once. The new listing
 * goes on after the gone item: every item before it (sequence numbers
 * grow within a bucket, and an item keeps its name) this handle has
 * claimed or found taken since it last listed from the top, so none of
 * them is a first delivery still to make; one given back meanwhile is
 * found by the next scan from the top (section 3 of workq.md), as it
 * would be if the listing had not been made again. */
static void item_gone(take_t *t)
{
    if (t->relisted) {
        missed(t);
        return;
    }
    t->relisted = 1;
    t->gone_seq = t->l.e[t->l.i].seq;
    free_items(t);
    list_bucket(t);
}

/* Whether the take passes over a claimed item without looking below it
 * (from the cursor or a listing made again, not watching): the next scan
 * from the top checks that its children are a live claim. */
static int skips_claimed(const take_t *t)
{
    return !t->watch && (t->resumed || t->relisted);
}

/* Mutex held: the answer to the take's request. */
static void take_next(zkr__call_t *k, int rc)
{
    take_t *t = (take_t *)k;
    zkr_workq_t *q = t->q;
    const struct Stat *st = k->stat;
    int step = t->step;

    t->step = 0;
    answer_watch(t, step, rc);
    if (t->cancel) {
        take_go(t); /* ends it */
        return;
    }
    switch (step) {
    case TK_TOP:
        if (rc == ZNONODE) {
            if (t->watch)
                zkr__take_issue(
                    t, TK_TOP_WATCH,
                    zkr__call_wexists(&t->k, q->path, zkr__take_watcher, q->s));
            else
                scan_empty(t);
            return;
        }
        if (rc != ZOK) {
            zkr__take_failed(t, rc);
            return;
        }
        for (int i = 0; i < k->strings->count; i++) {
            const char *n = k->strings->data[i];

            if (n[0] == 'q' && n[1] >= '0' && n[1] < '0' + ZKR_WORKQ_LEVELS &&
                n[2] == '\0')
                t->l.levels |= 1u << (n[1] - '0');
        }
        next_level(t);
        return;
    case TK_TOP_WATCH:
        if (rc != ZOK && rc != ZNONODE) {
            zkr__take_failed(t, rc);
            return;
        }
        if (rc == ZOK)
            scan_again(t); /* made meanwhile */
        else
            scan_empty(t);
        return;
    case TK_BSIZE:
        if (rc != ZOK && rc != ZNONODE) {
            zkr__take_failed(t, rc);
            return;
        }
        /* 1024 if absent or unreadable (then read again by the next
         * take). */
        t->l.bsize =
            rc == ZOK ? zkr__wq_parse_bucket(k->value, k->value_len) : 0;
        if (t->l.bsize <= 0)
            t->l.bsize = WQ_BUCKET_DEFAULT;
        if (rc == ZOK)
            q->bucket = t->l.bsize;
        snprintf(t->l.ql, sizeof(t->l.ql), "%s/q%d", q->path, t->l.level);
        zkr__take_issue(
            t, TK_LEVEL,
            zkr__call_children2(&t->k, t->l.ql, level_watcher(t), q->s));
        return;
    case TK_LEVEL:
        if (rc == ZNONODE) {
            next_level(t);
            return;
        }
        if (rc != ZOK) {
            zkr__take_failed(t, rc);
            return;
        }
        if ((t->l.bk = zkr__wq_sorted_buckets(k->strings, &t->l.nb)) == NULL) {
            zkr__take_end(t, ZKR_ENOMEM);
            return;
        }
        t->l.qver = st->version;
        t->l.b = -1;
        /* q<L>'s version names the tail, where puts go: watched too. */
        if (t->watch)
            zkr__take_issue(
                t, TK_LEVEL_WATCH,
                zkr__call_wexists(&t->k, t->l.ql, zkr__take_watcher, q->s));
        else
            next_bucket(t);
        return;
    case TK_LEVEL_WATCH:
        if (rc != ZOK && rc != ZNONODE) {
            zkr__take_failed(t, rc);
            return;
        }
        if (rc == ZNONODE) {
            next_level(t);
            return;
        }
        t->l.qver = st->version;
        next_bucket(t);
        return;
    case TK_BUCKET:
        if (rc == ZNONODE) {
            next_bucket(t);
            return;
        }
        if (rc != ZOK) {
            zkr__take_failed(t, rc);
            return;
        }
        if (zkr__take_copy_names(&t->l.iv, k->strings) != 0 ||
            (t->l.e = zkr__wq_sorted_items(&t->l.iv, &t->l.ni)) == NULL) {
            zkr__take_end(t, ZKR_ENOMEM);
            return;
        }
        t->l.i = -1;
        if (t->relisted) /* on after the item found gone (item_gone) */
            while (t->l.i + 1 < t->l.ni &&
                   t->l.e[t->l.i + 1].seq <= t->gone_seq)
                t->l.i++;
        t->l.sealed = st->version >= 1;
        if (t->l.ni == 0 && st->version >= 1 && t->l.b != t->l.nb - 1) {
            t->l.sealed = 0;
            /* empty and sealed */
            zkr__take_issue(t, TK_BUCKET_DEL,
                            zkr__call_delete(&t->k, t->l.bt, -1));
            return;
        }
        zkr__take_next_item(t);
        return;
    case TK_BUCKET_DEL:
        next_bucket(t); /* gone, or not empty after all: either way */
        return;
    case TK_ITEM:
        if (rc == ZNONODE) {
            item_gone(t);
            return;
        }
        if (rc != ZOK) {
            zkr__take_failed(t, rc);
            return;
        }
        if (st->numChildren > 0) {
            /* Claimed: its claim going (a death, a nack) makes it
             * available again (watched in the line). Children that are
             * not a live claim are deleted: then it is available. */
            if (t->again)
                zkr__take_next_item(t);
            else if (skips_claimed(t))
                missed(t); /* a scan from the top looks below it */
            else
                zkr__take_claimed(t);
            return;
        }
        if (t->resumed && zkr__wq_changed_above(q, t->l.level)) {
            /* A change above the cursor's level came in meanwhile: the
             * server sent its notice before this answer, which it made
             * after the change. From the top. */
            scan_again(t);
            return;
        }
        item_available(t, k->value, k->value_len, st);
        return;
    case TK_BIG_WATCH:
        /* Made to fit between its read and the watch: read again. */
        if (rc != ZOK && rc != ZNONODE) {
            zkr__take_failed(t, rc);
            return;
        }
        if (rc == ZOK && st->dataLength <= ZKR_WORKQ_DATA_MAX)
            read_item(t);
        else
            zkr__take_next_item(t);
        return;
    case TK_CL_LIST:
    case TK_CL_FIRST:
    case TK_TREE:
    case TK_DEAD:
    case TK_DEAD_DEL:
    case TK_DEAD_MK:
    case TK_DEAD_ANC:
        zkr__take_junk_next(t, step, rc);
        return;
    default:
        return;
    }
}

void zkr__take_spend(take_t *t, zkr_item_t *it)
{
    spend(t, it);
}

/* -------------------------------------------------------- the driver */

/* The take's next move (mutex held), whatever woke it: unless a request
 * is in flight, it checks what it waits for, and between scans whether
 * it must end (cancelled, the turn lost, the deadline), waits to be
 * connected, or scans. */
static void take_step(take_t *t)
{
    zkr_workq_t *q = t->q;
    zkr_session_t *s = q->s;
    int64_t now;
    int rc;

    if (t->step == TK_ENDED)
        return;
    if (s->forked) {
        /* In a forked child's copy: the parent's requests and grants are
         * not ours, and no thread of the parent's runs here. */
        zkr__take_end(t, ZKR_ECLOSED);
        return;
    }
    if (t->k.busy)
        return; /* its answer goes on */
    switch (t->step) {
    case TK_RELEASING:
        now = zkr__now_ms();
        if (t->cancel) {
            zkr__take_end(t, ZKR_ECANCELED);
            return;
        }
        if (t->deadline >= 0 && now >= t->deadline) {
            zkr__take_end(t, ZKR_ETIMEDOUT);
            return;
        }
        if (q->turn.phase == ZKR__P_RELEASING) {
            zkr__task_wake_at(s, &t->tk, t->deadline);
            return; /* its end wakes the take (q->turn.task) */
        }
        if (q->turn.phase == ZKR__P_HELD && !q->turn.acq_sync) {
            /* The last take's release failed (refused, or short of
             * memory): the turn is still this handle's. */
            t->step = 0;
            break;
        }
        rc = zkr__acquire_task(
            &q->turn,
            t->deadline < 0 ? t->timeout_ms : (int)(t->deadline - now), &t->tk);
        if (rc != 0) {
            zkr__take_end(t, rc == ZKR_EBUSY ? ZKR_ETIMEDOUT : rc);
            return;
        }
        t->step = TK_TURN;
        return;
    case TK_TURN:
        if (t->cancel)
            (void)zkr__cancel_task(&q->turn);
        if (!zkr__acquire_took(&q->turn, &rc))
            return;
        if (rc != 0) {
            zkr__take_end(t, rc == ZKR_EBUSY ? ZKR_ETIMEDOUT : rc);
            return;
        }
        t->step = 0;
        break;
    case TK_CLAIM: {
        zkr_item_t *it = t->it;
        int seen;

        /* A try: it ends by itself within the session timeout; a cancel
         * or the take's deadline ends it at once (unless granted). */
        int over = t->deadline >= 0 && zkr__now_ms() >= t->deadline;
        int awaited = t->cancel || over ? zkr__claim_stop(it) : 0;

        if (!zkr__acquire_took(&it->c, &rc)) {
            /* Its end wakes the take (it->c.task). */
            zkr__take_claims_wait(t, awaited, over);
            return;
        }
        t->it = NULL;
        t->step = 0;
        it->c.task = NULL;
        if (rc == 0) {
            t->outs[t->nout++] = it;
            it->handed = 1;
            t->retries = 0;
            t->looking = 0;
            /* A batch claims on, without waiting, from where it is. */
            if (t->nout < t->want && !t->cancel && !over && !s->closing &&
                t->l.e != NULL) {
                zkr__batch_round(t);
                return;
            }
            zkr__take_end(t, 0);
            return;
        }
        seen = it->c.pre_seen;
        spend(t, it);
        /* ESTALE: another consumer (or a writer) got there; EBUSY: a
         * foreign node in the item; ETIMEDOUT, ECANCELED: the try's
         * deadline, or the take's end (checked below); a lost answer. */
        if (rc == ZNOCHILDRENFOREPHEMERALS && !t->cancel && !over &&
            !s->closing && t->l.e != NULL) {
            /* Not an item: another client's ephemeral node named as one.
             * Passed over, as a node we may not delete is (zkr inspect
             * shows it). (ZNOAUTH ends the take: a consumer whose
             * credentials may not write the items is told.) */
            zkr__take_next_item(t);
            return;
        }
        if (rc != ZKR_ESTALE && rc != ZKR_EBUSY && rc != ZKR_ETIMEDOUT &&
            rc != ZKR_ECANCELED && rc != ZNOCHILDRENFOREPHEMERALS &&
            !zkr__call_lost(rc)) {
            zkr__take_end(t, rc);
            return;
        }
        /* Another consumer's claim (or a foreign node) sends this one on
         * to the next item. The item's version moved: another consumer's
         * claim, or another client's write to its data, which is no
         * delivery: it is read again (the oldest first), a few times;
         * unless the listing sent behind the claim (seen) found it gone,
         * or claimed where a claimed item is passed over unread (TK_ITEM
         * would do the same with a read's answer). */
        if ((rc == ZKR_ESTALE || rc == ZKR_EBUSY) && !t->cancel && !over &&
            !s->closing && t->l.e != NULL) {
            if (rc == ZKR_ESTALE && seen == ZKR__PRE_GONE) {
                item_gone(t);
                return;
            }
            if (rc == ZKR_ESTALE && seen == ZKR__PRE_CHILDREN &&
                skips_claimed(t)) {
                missed(t);
                return;
            }
            if (rc == ZKR_ESTALE && t->retries++ < WQ_CLAIM_RETRIES) {
                read_item(t);
                return;
            }
            missed(t);
            return;
        }
        break;
    }
    case TK_BCLAIM:
        if (!zkr__batch_claims_took(t))
            return; /* their ends wake the take (and its times) */
        t->step = 0;
        if (t->nout < t->want && !t->bstop) {
            zkr__batch_round(t); /* ends it if cancelled, past... */
            return;
        }
        break; /* ends it with its items */
    case TK_WAIT:
        now = zkr__now_ms();
        if (zkr__engine(s)->watch_events == t->gen && !t->cancel &&
            q->turn.phase == ZKR__P_HELD && s->connected &&
            (t->deadline < 0 || now < t->deadline)) {
            zkr__task_wake_at(s, &t->tk, t->deadline);
            return;
        }
        t->step = 0;
        break;
    case 0:
        break;
    default:
        return; /* a request's answer is awaited */
    }
    /* Between scans. A batch with items ends with them (it waits for
     * the first one only). (The session's safe deadline is the timer's
     * to enforce: a lost session ends the turn, which wakes the take.) */
    if (t->nout > 0) {
        zkr__take_end(t, 0);
        return;
    }
    if (t->cancel)
        rc = ZKR_ECANCELED;
    else if (s->closing)
        rc = ZKR_ECLOSED;
    else if (t->lined && q->turn.phase != ZKR__P_HELD)
        rc = ZKR_ELOST;
    else if (t->deadline >= 0 && zkr__now_ms() >= t->deadline)
        rc = ZKR_ETIMEDOUT;
    else
        rc = 0;
    if (rc != 0) {
        zkr__take_end(t, rc);
        return;
    }
    if (s->zh == NULL || !s->connected) {
        if (zkr__lost_for_good(s))
            zkr__take_end(t, ZKR_ELOST);
        else /* (re)connected or lost, the engine wakes its tasks */
            zkr__task_wake_at(s, &t->tk, t->deadline);
        return;
    }
    if (t->pause_until > zkr__now_ms()) {
        zkr__task_wake_at(s, &t->tk, t->pause_until);
        return;
    }
    scan_begin(t);
}

/* take_step, not nested: an engine call it makes may wake the session's
 * tasks (a session found lost), this one among them; that wake only asks
 * for one more step once the running one is over. */
static void take_go(take_t *t)
{
    if (t->running) {
        t->rewake = 1;
        return;
    }
    t->running = 1;
    do {
        t->rewake = 0;
        take_step(t);
    } while (t->rewake && t->step != TK_ENDED);
    t->running = 0;
    if (t->orphan)
        take_free(t);
}

void zkr__take_go(take_t *t)
{
    take_go(t);
}

/* ---------------------------------------------------------- the API */

/* A take of up to want items (mutex held): started, or NULL with *rc
 * set. cb, or bcb for a batch, is told its end; neither: blocking. */
static take_t *take_start(zkr_workq_t *q, int want, int timeout_ms,
                          zkr_take_completion_t cb,
                          zkr_take_batch_completion_t bcb, void *cbdata,
                          int *rc)
{
    zkr_session_t *s = q->s;
    take_t *t = NULL;

    *rc = 0;
    if (s->closing)
        *rc = ZKR_ECLOSED;
    else if (q->take != NULL)
        *rc = ZKR_EALREADY;
    else if (zkr__lost_for_good(s))
        *rc = ZKR_ELOST;
    else if ((t = calloc(1, sizeof(*t))) == NULL)
        *rc = ZKR_ENOMEM;
    else if (want > 1 &&
             (t->outs = calloc((size_t)want, sizeof(*t->outs))) == NULL) {
        free(t);
        *rc = ZKR_ENOMEM;
    } else if ((cb != NULL || bcb != NULL) &&
               (t->ev = zkr__event_new()) == NULL) {
        free(t->outs);
        free(t);
        *rc = ZKR_ENOMEM;
    }
    if (*rc != 0)
        return NULL;
    if (t->outs == NULL)
        t->outs = &t->one;
    t->want = want;
    t->q = q;
    t->timeout_ms = timeout_ms;
    t->deadline = timeout_ms > 0 ? zkr__now_ms() + timeout_ms : -1;
    t->cb = cb;
    t->bcb = bcb;
    t->cbdata = cbdata;
    t->k.s = s;
    t->k.next = take_next;
    t->tk.wake = take_wake;
    t->tk.wake_at = -1;
    zkr__task_add(s, &t->tk);
    t->rd.ops = &take_reader_ops;
    zkr__reader_add(s, &t->rd);
    q->take = t;
    /* The last take's turn may still be being given back: its end wakes
     * this one, should it join the line (TK_RELEASING). */
    q->turn.task = &t->tk;
    t->step = 0; /* a scan first, before the line */
    take_go(t);
    return t;
}

/* A blocking take of up to want items: 0 and the items in items[] (*n
 * of them), or the error. */
static int take_wait(zkr_workq_t *q, int want, int timeout_ms,
                     zkr_item_t **items, int *n)
{
    zkr_session_t *s;
    take_t *t;
    int rc;

    if (timeout_ms < -1)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    if ((t = take_start(q, want, timeout_ms, NULL, NULL, NULL, &rc)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    while (!t->ended)
        zkr__wait(s, &t->ended, -1);
    pthread_mutex_unlock(&s->mu);
    if ((rc = take_hand_over(t, t->rc)) == 0) {
        memcpy(items, t->outs, sizeof(*items) * (size_t)t->nout);
        *n = t->nout;
    }
    take_free(t);
    return rc;
}

int zkr_workq_take(zkr_workq_t *q, int timeout_ms, zkr_item_t **out)
{
    int n = 0;

    if (q == NULL || out == NULL)
        return ZBADARGUMENTS;
    *out = NULL;
    return take_wait(q, 1, timeout_ms, out, &n);
}

int zkr_workq_take_batch(zkr_workq_t *q, int max, int timeout_ms,
                         zkr_item_t **items, int *count)
{
    if (count != NULL)
        *count = 0;
    if (q == NULL || items == NULL || count == NULL || max < 1 ||
        max > ZKR_WORKQ_BATCH_MAX)
        return ZBADARGUMENTS;
    for (int i = 0; i < max; i++)
        items[i] = NULL;
    return take_wait(q, max, timeout_ms, items, count);
}

int zkr_workq_take_async(zkr_workq_t *q, int timeout_ms,
                         zkr_take_completion_t cb, void *data)
{
    zkr_session_t *s;
    int rc;

    if (q == NULL || cb == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    /* The take may end inside take_start (the session lost for good):
     * its callback is then posted already, like any other end. */
    (void)take_start(q, 1, timeout_ms, cb, NULL, data, &rc);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr_workq_take_batch_async(zkr_workq_t *q, int max, int timeout_ms,
                               zkr_take_batch_completion_t cb, void *data)
{
    zkr_session_t *s;
    int rc;

    if (q == NULL || cb == NULL || timeout_ms < -1 || max < 1 ||
        max > ZKR_WORKQ_BATCH_MAX)
        return ZBADARGUMENTS;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    (void)take_start(q, max, timeout_ms, NULL, cb, data, &rc);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr__wq_take_cancel(zkr_workq_t *q)
{
    if (q->take == NULL)
        return ZKR_ESTATE;
    q->take->cancel = 1;
    take_go(q->take);
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
    return rc;
}
