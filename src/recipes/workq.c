/* The work queue: a fenced FIFO queue with fair consumers.
 * Protocol, order proof and faults: docs/design/workq.md.
 *
 * Items live in buckets (PATH/q<L>/b<k>/i-<carry>-<uuid>-<seq>) so that no
 * listing grows past B names. Consumers line up on an exclusive zkr lock
 * (PATH/consumers, the engine): only the first in line scans for an item,
 * so a put wakes one consumer whatever their number. A claim is an engine
 * exclusive-lock contender whose directory is the item node, created in
 * one multi with a versioned setData of the item (the delivery count), so
 * fencing, SUSPENDED/LOST, the descriptor and the listener are the
 * engine's. Ack and nack are engine commits: one multi that holds the
 * delete of the claim node, so they apply only while the claim is ours.
 *
 * A put and a take are chains of asynchronous requests (zkr__call_t), each
 * taken in the previous one's completion, and a task the engine wakes
 * when the chain waits (a connection, a watch, an acquire's end); their
 * blocking forms wait for the chain's end. No thread of their own. */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workq.h"

/* ------------------------------------------------------------ names */

/* Parses "i-<carry>-<uuid36>-<seq%010d>": 0, or -1 when not an item. */
static int parse_item(const char *name, int *carry, int32_t *seq)
{
    const char *p = name;
    long c = 0;

    if (strncmp(p, "i-", 2) != 0)
        return -1;
    p += 2;
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p) && c < 1000000)
        c = c * 10 + (*p++ - '0');
    if (*p++ != '-' || strlen(p) != 36 + 1 + 10 || p[36] != '-')
        return -1;
    if (zkr__parse_seq(p + 37, seq) != 0)
        return -1;
    *carry = (int)c;
    return 0;
}

/* "b%010d" -> k, or -1. */
static int parse_bucket(const char *name)
{
    int32_t k;

    if (name[0] != 'b' || strlen(name) != 11 ||
        !isdigit((unsigned char)name[1]))
        return -1;
    return zkr__parse_seq(name + 1, &k) == 0 && k >= 0 ? (int)k : -1;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static int cmp_entry(const void *a, const void *b)
{
    const wq_entry_t *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The buckets of a level listing, ascending; *n of them. */
int *zkr__wq_sorted_buckets(const struct String_vector *v, int *n)
{
    int *k = malloc(sizeof(int) * (size_t)(v->count > 0 ? v->count : 1));

    *n = 0;
    if (k == NULL)
        return NULL;
    for (int i = 0; i < v->count; i++)
        if ((k[*n] = parse_bucket(v->data[i])) >= 0)
            (*n)++;
    qsort(k, (size_t)*n, sizeof(int), cmp_int);
    return k;
}

/* The buckets of level directory ql, ascending (*bk to free; NULL and
 * *n 0 when the level does not exist). ZOK, ZKR_ENOMEM or a code. */
static int level_buckets(zhandle_t *zh, const char *ql, int **bk, int *n)
{
    struct String_vector v = {0, NULL};
    int rc = zoo_get_children(zh, ql, 0, &v);

    *bk = NULL;
    *n = 0;
    if (rc != ZOK)
        return rc == ZNONODE ? ZOK : rc;
    *bk = zkr__wq_sorted_buckets(&v, n);
    deallocate_String_vector(&v);
    return *bk != NULL ? ZOK : ZKR_ENOMEM;
}

/* The items of a bucket listing by sequence; *n of them. */
wq_entry_t *zkr__wq_sorted_items(const struct String_vector *v, int *n)
{
    wq_entry_t *e = malloc(sizeof(*e) * (size_t)(v->count > 0 ? v->count : 1));

    *n = 0;
    if (e == NULL)
        return NULL;
    for (int i = 0; i < v->count; i++)
        if (parse_item(v->data[i], &e[*n].carry, &e[*n].seq) == 0)
            e[(*n)++].name = v->data[i];
    qsort(e, (size_t)*n, sizeof(*e), cmp_entry);
    return e;
}

/* B from the queue's data ("zkr-workq 1 bucket=<B>"), or 0 when absent. */
int zkr__wq_parse_bucket(const char *value, int len)
{
    char buf[128];
    const char *b;
    int n = len > 0 && value != NULL ? len : 0;

    if (n > (int)sizeof(buf) - 1)
        n = (int)sizeof(buf) - 1;
    memcpy(buf, n > 0 ? value : "", (size_t)n);
    buf[n] = '\0';
    if (strncmp(buf, "zkr-workq ", 10) == 0 &&
        (b = strstr(buf, "bucket=")) != NULL && atoi(b + 7) > 0)
        return atoi(b + 7);
    return 0;
}

/* ------------------------------------------------------------ handle */

/* The turn's only events are its takes' completions (workq_take.c),
 * posted on it so that the handle's free waits for them. */
static void turn_deliver(zkr__contender_t *c, const zkr__event_t *ev)
{
    (void)c;
    if (ev->kind == ZKR__EV_RELEASED && ev->fn != NULL)
        ((void (*)(int, void *))ev->fn)(ev->a, ev->data);
}

static const zkr__recipe_t turn_recipe = {
    .marker = "-lock-",
    .mode = 'x',
    .kind = "lock", /* the line is a lock on PATH/consumers */
    .pred = zkr__pred_mutex,
    .deliver = turn_deliver,
};

int zkr_workq_new(zkr_workq_t **out, zkr_session_t *s, const char *path,
                  const char *id, const struct ACL_vector *acl)
{
    zkr_workq_t *q;
    char *turn;
    int rc;

    if (out == NULL || s == NULL || zkr__check_path(path) != 0 ||
        strcmp(path, "/") == 0 || strlen(path) > 256)
        return ZBADARGUMENTS;
    *out = NULL;
    if ((q = calloc(1, sizeof(*q))) == NULL)
        return ZKR_ENOMEM;
    turn = zkr__join(path, "consumers");
    q->path = zkr__strdup(path);
    if (turn == NULL || q->path == NULL) {
        free(turn);
        free(q->path);
        free(q);
        return ZKR_ENOMEM;
    }
    rc = zkr__contender_init(&q->turn, s, &turn_recipe, q, turn, id, acl);
    free(turn);
    if (rc != 0) {
        free(q->path);
        free(q);
        return rc;
    }
    q->s = s;
    q->id = q->turn.data;
    q->acl = &q->turn.acl;
    pthread_mutex_lock(&s->mu);
    zkr__wq_cursor_init(q);
    pthread_mutex_unlock(&s->mu);
    *out = q;
    return 0;
}

static void workq_dispose(void *owner)
{
    zkr_workq_t *q = owner;

    for (int i = 0; i < q->nrcpt; i++)
        free(q->rcpt[i]);
    free(q->path);
    free(q->dead_path);
    free(q);
}

void zkr_workq_free(zkr_workq_t *q)
{
    zkr_session_t *s;

    if (q == NULL)
        return;
    s = q->s;
    pthread_mutex_lock(&s->mu);
    /* A take ends at once when cancelled, or when its request in flight
     * or its claim's try is answered; its end posts its completion and
     * does not touch q after. */
    (void)zkr__wq_take_cancel(q);
    while (q->async_puts > 0 || q->take != NULL)
        zkr__wait(s, NULL, zkr__now_ms() + 100);
    /* Receipts not carried away by a put: the session's cleanup deletes
     * them (they are ephemeral anyway). */
    zkr__wq_receipts_to_cleanup(q, q->rcpt, q->nrcpt, q->rcpt_sid);
    q->nrcpt = 0;
    zkr__wq_cursor_end(q);
    pthread_mutex_unlock(&s->mu);
    zkr__contender_destroy(&q->turn, workq_dispose);
}

int zkr_workq_set_dead_letter(zkr_workq_t *q, int max, const char *dead_path)
{
    char *p = NULL;
    int rc = 0;

    if (q == NULL || max < 0 ||
        (dead_path != NULL &&
         (zkr__check_path(dead_path) != 0 || strcmp(dead_path, "/") == 0)))
        return ZBADARGUMENTS;
    p = zkr__strdup(dead_path != NULL ? dead_path : "");
    if (p == NULL)
        return ZKR_ENOMEM;
    if (dead_path == NULL) {
        free(p);
        if ((p = zkr__join(q->path, "dead")) == NULL)
            return ZKR_ENOMEM;
    }
    pthread_mutex_lock(&q->s->mu);
    if (q->take != NULL) {
        rc = ZKR_ESTATE;
    } else {
        free(q->dead_path);
        q->dead_path = p;
        q->dead_max = max;
        p = NULL;
    }
    pthread_mutex_unlock(&q->s->mu);
    free(p);
    return rc;
}

/* ------------------------------------------------------- len, items */

int zkr_workq_len(zkr_workq_t *q, int64_t *count)
{
    zhandle_t *zh;
    int rc;

    if (q == NULL || count == NULL)
        return ZBADARGUMENTS;
    *count = 0;
    if ((rc = zkr__read_begin(q->s, q->path, &zh)) != 0)
        return rc;
    for (int level = 0; rc == ZOK && level < ZKR_WORKQ_LEVELS; level++) {
        char ql[300];
        int nb = 0, *bk;

        snprintf(ql, sizeof(ql), "%s/q%d", q->path, level);
        if ((rc = level_buckets(zh, ql, &bk, &nb)) != ZOK)
            break;
        for (int b = 0; rc == ZOK && b < nb; b++) {
            char bt[320];
            struct Stat st;

            snprintf(bt, sizeof(bt), "%s/b%010d", ql, bk[b]);
            rc = zoo_exists(zh, bt, 0, &st);
            if (rc == ZOK)
                *count += st.numChildren;
            else if (rc == ZNONODE)
                rc = ZOK;
        }
        free(bk);
    }
    zkr__zh_put(q->s);
    return rc;
}

void zkr_item_infos_free(zkr_item_info_t *v, int count)
{
    if (v == NULL)
        return;
    for (int i = 0; i < count; i++) {
        free(v[i].id);
        free(v[i].claim_id);
    }
    free(v);
}

/* Fills one info; 1, 0 (gone), or a code < 0. */
static int item_info(zkr_workq_t *q, zhandle_t *zh, const char *ipath,
                     int level, int carry, zkr_item_info_t *out)
{
    struct Stat st;
    int rc = zoo_exists(zh, ipath, 0, &st);

    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return -rc;
    memset(out, 0, sizeof(*out));
    out->id = zkr__strdup(ipath + strlen(q->path) + 1);
    if (out->id == NULL)
        return ZKR_ENOMEM;
    out->level = level;
    out->deliveries = carry + (st.cversion + 1) / 2; /* a claim now counts */
    out->ctime_ms = st.ctime;
    out->size = st.dataLength;
    if (st.numChildren > 0) {
        struct String_vector cv = {0, NULL};
        zkr__entry_t *e = NULL;
        int n = 0;

        if (zoo_get_children(zh, ipath, 0, &cv) == ZOK &&
            zkr__sort_children(&cv, &e, &n) == 0 && n > 0) {
            char *cpath = zkr__join(ipath, e[0].name), buf[ZKR_ID_MAX + 1];
            int len = ZKR_ID_MAX;
            struct Stat cs;

            /* A claim is ephemeral: a node of another client named as
             * one is not (the next scan deletes it, see item_claimed). */
            if (cpath != NULL && zoo_get(zh, cpath, 0, buf, &len, &cs) == ZOK &&
                cs.ephemeralOwner != 0) {
                buf[len > 0 ? len : 0] = '\0';
                out->claimed = 1;
                out->claim_sid = cs.ephemeralOwner;
                out->claim_id = zkr__strdup(buf);
            }
            free(cpath);
        }
        free(e);
        deallocate_String_vector(&cv);
    }
    return 1;
}

int zkr_workq_items(zkr_workq_t *q, int max, zkr_item_info_t **out, int *count)
{
    zkr_item_info_t *v = NULL;
    zhandle_t *zh;
    int rc, n = 0;

    if (q == NULL || out == NULL || count == NULL || max < 0)
        return ZBADARGUMENTS;
    *out = NULL;
    *count = 0;
    if (max == 0)
        return 0;
    if ((v = calloc((size_t)max, sizeof(*v))) == NULL)
        return ZKR_ENOMEM;
    if ((rc = zkr__read_begin(q->s, q->path, &zh)) != 0) {
        free(v);
        return rc;
    }
    for (int level = 0; rc == ZOK && level < ZKR_WORKQ_LEVELS && n < max;
         level++) {
        char ql[300];
        int nb = 0, *bk;

        snprintf(ql, sizeof(ql), "%s/q%d", q->path, level);
        if ((rc = level_buckets(zh, ql, &bk, &nb)) != ZOK)
            break;
        for (int b = 0; rc == ZOK && b < nb && n < max; b++) {
            char bt[320];
            struct String_vector iv = {0, NULL};
            wq_entry_t *e;
            int ni = 0;

            snprintf(bt, sizeof(bt), "%s/b%010d", ql, bk[b]);
            if ((rc = zoo_get_children(zh, bt, 0, &iv)) != ZOK) {
                rc = rc == ZNONODE ? ZOK : rc;
                continue;
            }
            if ((e = zkr__wq_sorted_items(&iv, &ni)) == NULL)
                rc = ZKR_ENOMEM;
            for (int i = 0; rc == ZOK && i < ni && n < max; i++) {
                char ipath[512];
                int r;

                snprintf(ipath, sizeof(ipath), "%s/%s", bt, e[i].name);
                r = item_info(q, zh, ipath, level, e[i].carry, &v[n]);
                if (r < 0)
                    rc = -r;
                else
                    n += r;
            }
            free(e);
            deallocate_String_vector(&iv);
        }
        free(bk);
    }
    zkr__zh_put(q->s);
    if (rc != ZOK || n == 0) {
        zkr_item_infos_free(v, n);
        return rc;
    }
    *out = v;
    *count = n;
    return 0;
}
