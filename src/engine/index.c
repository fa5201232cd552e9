/* The session's index of contenders by the paths of their nodes and
 * watches, and the watch events it routes. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* --------------------------------------------------------- watches */

/* The session's path index: each contender's node and watched path, so
 * that a watch event and zkr__drop_watch() look only at the contenders of its
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

void zkr__set_node(zkr__contender_t *c, char *node)
{
    pidx_set(c, &c->node_link, &c->node, node);
}

void zkr__set_watching(zkr__contender_t *c, char *path)
{
    pidx_set(c, &c->watch_link, &c->watching, path);
}

void zkr__clear_node(zkr__contender_t *c)
{
    char *node = c->node;

    zkr__set_node(c, NULL);
    free(node);
}

void zkr__clear_watching(zkr__contender_t *c)
{
    char *w = c->watching;

    zkr__set_watching(c, NULL);
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
int zkr__path_watched_by_other(zkr_session_t *s, const char *path,
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
void zkr__drop_watch(zkr_session_t *s, const char *path,
                     const zkr__contender_t *self, int wtype)
{
    if (zkr__path_watched_by_other(s, path, self) ||
        zkr__readers_follow(s, path))
        return;
    zkr__cleanup_add_watch(s, path, wtype, zkr__node_watcher);
}

/* We stop watching c->watching and list again. The watch is dropped even
 * if we never set one (our request failed, or found no node): another
 * contender of this session may have left one there that it kept only for
 * our sake (zkr__path_watched_by_other()), such as the exists() watch a waiter
 * sets on its own node, which stays on the server when the node is gone.
 * With no watch there the client answers the removal itself (ZNOWATCHER),
 * without a request. */
void zkr__stop_watching(zkr__contender_t *c)
{
    char *w = c->watching;

    zkr__set_watching(c, NULL);
    c->phase = ZKR__P_LISTING;
    if (w != NULL)
        zkr__drop_watch(c->s, w, c,
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
            zkr__lose_held(c);
        else if (type == ZOO_DELETED_EVENT && zkr__is_waiting(c))
            zkr__lose_waiting(c);
        else if (type != ZOO_DELETED_EVENT &&
                 (c->phase == ZKR__P_HELD || zkr__is_waiting(c))) {
            /* The path may hold someone else's node now (deleted
             * and re-created while we were disconnected: the
             * re-registered watch reports a change): no grant
             * until the exists() shows our czxid again. */
            c->self_doubt = 1;
            zkr__issue_self_watch(c);
        }
    }
    if (c->phase == ZKR__P_WATCHING && c->watching != NULL &&
        strcmp(c->watching, path) == 0) {
        /* Whatever happened (a deletion, a touch, anyone's
         * write) is a hint: only a listing decides. */
        *woke = 1;
        zkr__clear_watching(c);
        c->phase = ZKR__P_LISTING;
        zkr__step(c);
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
            ZKR__EACH_CONTENDER (c, s)
                watch_event(c, type, path, &woke);
        }
        s->counters[woke ? ZKR_COUNTER_WATCH_EVENTS
                         : ZKR_COUNTER_HOLDER_EVENTS]++;
    }
    pthread_mutex_unlock(&s->mu);
}
