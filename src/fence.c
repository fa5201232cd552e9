/* Fencing (SPEC section 3): sequencers that carry a grant to another
 * process, writes guarded by the grant on the ZooKeeper side, and the
 * resource-side rule.
 *
 * A lock cannot stop a holder that was paused or partitioned from acting
 * late: by the time it runs again its session may have expired and the
 * lock been granted to another. Only a check at the resource itself makes
 * that harmless. Inside ZooKeeper that check is a multi whose first
 * operation requires our node to exist unchanged; outside, it is the
 * fencing token compared with the highest one the resource has seen. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int mode_valid(char m)
{
    return m != '\0' && strchr("xrwlp", m) != NULL;
}

/* The node path must be valid and end in a contender name. */
static int node_valid(const char *node)
{
    const char *base;
    int32_t seq;
    zkr__kind_t kind;

    if (node[0] != '/' || strlen(node) >= ZKR_NODE_MAX)
        return 0;
    base = strrchr(node, '/');
    if (base == node || zkr__parse_name(base + 1, &seq, &kind) != 0)
        return 0;
    /* The directory part must itself be a valid recipe path. */
    {
        char dir[ZKR_NODE_MAX];
        size_t n = (size_t)(base - node);
        if (n > ZKR_PATH_MAX)
            return 0;
        memcpy(dir, node, n);
        dir[n] = '\0';
        if (zkr__check_path(dir) != 0 || strlen(base + 1) == 0)
            return 0;
    }
    return 1;
}

int zkr__sequencer(zkr__contender_t *c, zkr_sequencer_t *out)
{
    if (c->phase != ZKR__P_HELD || c->node == NULL)
        return ZKR_ENOTHELD;
    memset(out, 0, sizeof(*out));
    snprintf(out->path, sizeof(out->path), "%s", c->dir);
    snprintf(out->node, sizeof(out->node), "%s", c->node);
    out->token = c->czxid;
    out->session_id = c->node_sid;
    out->mode = c->recipe->mode;
    return 0;
}

int zkr_sequencer_format(const zkr_sequencer_t *q, char *buf, size_t len)
{
    int n;

    if (q == NULL || buf == NULL || !mode_valid(q->mode) || q->token <= 0 ||
        memchr(q->node, '\0', sizeof(q->node)) == NULL || !node_valid(q->node))
        return ZBADARGUMENTS;
    n = snprintf(buf, len, "zkr1:%c:%" PRId64 ":%016" PRIx64 ":%s", q->mode,
                 q->token, (uint64_t)q->session_id, q->node);
    if (n < 0 || (size_t)n >= len)
        return ZBADARGUMENTS;
    return 0;
}

/* Parses exactly `digits` lowercase hex digits, or 1..19 decimal digits
 * without a leading zero (positive int64); *end after them. */
static int parse_token(const char *p, int64_t *out, const char **end)
{
    uint64_t v = 0;
    int n = 0;

    if (*p < '1' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++, n++) {
        if (n == 19 || v > (uint64_t)(INT64_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = (int64_t)v;
    *end = p;
    return 0;
}

static int parse_hex16(const char *p, int64_t *out)
{
    uint64_t v = 0;

    for (int i = 0; i < 16; i++, p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = (int64_t)v;
    return 0;
}

int zkr_sequencer_parse(const char *str, zkr_sequencer_t *out)
{
    zkr_sequencer_t q;
    const char *p, *slash;

    if (str == NULL || out == NULL)
        return ZBADARGUMENTS;
    memset(&q, 0, sizeof(q));
    if (strncmp(str, "zkr1:", 5) != 0)
        return ZKR_EFORMAT;
    p = str + 5;
    if (!mode_valid(p[0]) || p[1] != ':')
        return ZKR_EFORMAT;
    q.mode = p[0];
    p += 2;
    if (parse_token(p, &q.token, &p) != 0 || *p++ != ':')
        return ZKR_EFORMAT;
    if (strnlen(p, 17) < 17 || parse_hex16(p, &q.session_id) != 0 ||
        p[16] != ':')
        return ZKR_EFORMAT;
    p += 17;
    if (strlen(p) >= sizeof(q.node) || !node_valid(p))
        return ZKR_EFORMAT;
    strcpy(q.node, p);
    slash = strrchr(q.node, '/');
    memcpy(q.path, q.node, (size_t)(slash - q.node));
    q.path[slash - q.node] = '\0';
    *out = q;
    return 0;
}

/* ------------------------------------------------------------- check */

static int judge(int rc, const struct Stat *st, const zkr_sequencer_t *q)
{
    if (rc == ZNONODE)
        return ZKR_ESTALE;
    if (rc != ZOK)
        return rc;
    if (st->czxid != q->token || st->ephemeralOwner != q->session_id)
        return ZKR_ESTALE;
    return 0;
}

static int check_args(zkr_session_t *s, const zkr_sequencer_t *q)
{
    if (s == NULL || q == NULL || !mode_valid(q->mode) || q->token <= 0 ||
        memchr(q->node, '\0', sizeof(q->node)) == NULL || !node_valid(q->node))
        return ZBADARGUMENTS;
    return 0;
}

int zkr_sequencer_check(zkr_session_t *s, const zkr_sequencer_t *q)
{
    struct Stat st;
    zhandle_t *zh;
    int rc;

    if ((rc = check_args(s, q)) != 0)
        return rc;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    if ((rc = zkr__zh_get(s, &zh)) != 0)
        return rc;
    rc = zoo_exists(zh, q->node, 0, &st);
    zkr__zh_put(s);
    return judge(rc, &st, q);
}

/* A one-shot asynchronous call: the application's callback and what the
 * completion needs, freed after delivery. */
struct pending {
    zkr_sequencer_t q;
    zkr_result_completion_t cb;
    void *data;
    zoo_op_t *ops;
    zoo_op_result_t *results, *user_results;
    int count;
};

static void run_pending(const zkr__event_t *ev)
{
    struct pending *p = ev->data;

    p->cb(ev->a, p->data);
    free(p->ops);
    free(p->results);
    free(p);
}

static void check_done(int rc, const struct Stat *st, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct pending *p = op->ctx;

    zkr__post_call(s, run_pending, judge(rc, st, &p->q), NULL, p);
    zkr__op_end(op);
}

int zkr_sequencer_check_async(zkr_session_t *s, const zkr_sequencer_t *q,
                              zkr_result_completion_t cb, void *data)
{
    struct pending *p;
    zkr__op_t *op;
    int rc;

    if (cb == NULL)
        return ZBADARGUMENTS;
    if ((rc = check_args(s, q)) != 0)
        return rc;
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return ZKR_ENOMEM;
    p->q = *q;
    p->cb = cb;
    p->data = data;
    pthread_mutex_lock(&s->mu);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (s->zh == NULL || !s->connected)
        rc = ZCONNECTIONLOSS;
    else if ((op = zkr__op_new(s, NULL)) == NULL)
        rc = ZKR_ENOMEM;
    else {
        op->ctx = p;
        rc = zoo_aexists(s->zh, p->q.node, 0, check_done, op);
        if (rc != ZOK)
            zkr__op_cancel(op);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != 0)
        free(p);
    return rc;
}

/* ----------------------------------------------------- guarded writes */

/* The guard: our node still exists. Its name (UUID and sequence) is ours
 * alone; its version is not checked, as a semaphore permit touches it. */
static struct pending *guard_build(const char *node, int count,
                                   const zoo_op_t *ops,
                                   zoo_op_result_t *results)
{
    struct pending *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    snprintf(p->q.node, sizeof(p->q.node), "%s", node);
    p->count = count;
    p->user_results = results;
    p->ops = calloc((size_t)count + 1, sizeof(*p->ops));
    p->results = calloc((size_t)count + 1, sizeof(*p->results));
    if (p->ops == NULL || p->results == NULL) {
        free(p->ops);
        free(p->results);
        free(p);
        return NULL;
    }
    zoo_check_op_init(&p->ops[0], p->q.node, -1);
    memcpy(p->ops + 1, ops, sizeof(*ops) * (size_t)count);
    return p;
}

/* Hands the caller its results and tells "not held" (the guard failed:
 * nothing was applied) from the operations' own errors. */
static int guard_result(int rc, struct pending *p)
{
    memcpy(p->user_results, p->results + 1,
           sizeof(*p->results) * (size_t)p->count);
    if (rc != ZOK && !zkr__is_connection_error(rc) && p->results[0].err != ZOK)
        return ZKR_ENOTHELD;
    return rc;
}

static void multi_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct pending *p = op->ctx;

    zkr__post_call(s, run_pending, guard_result(rc, p), NULL, p);
    zkr__op_end(op);
}

int zkr__guarded_multi(zkr__contender_t *c, int count, const zoo_op_t *ops,
                       zoo_op_result_t *results, zkr_result_completion_t cb,
                       void *data)
{
    zkr_session_t *s = c->s;
    struct pending *p = NULL;
    zhandle_t *zh = NULL;
    zkr__op_t *op;
    int rc = 0;

    if (count < 1 || count > 1000 || ops == NULL || results == NULL)
        return ZBADARGUMENTS;
    if (cb == NULL && zkr__in_callback())
        return ZKR_EDEADLK;
    zkr__lock_fresh(s);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (c->phase != ZKR__P_HELD || c->node == NULL)
        rc = ZKR_ENOTHELD;
    else if ((p = guard_build(c->node, count, ops, results)) == NULL)
        rc = ZKR_ENOMEM;
    else if (s->zh == NULL || !s->connected)
        rc = ZCONNECTIONLOSS;
    else if (cb == NULL) {
        zh = s->zh;
        s->zh_users++;
    } else if ((op = zkr__op_new(s, NULL)) == NULL) {
        rc = ZKR_ENOMEM;
    } else {
        p->cb = cb;
        p->data = data;
        op->ctx = p;
        rc = zoo_amulti(s->zh, count + 1, p->ops, p->results, multi_done, op);
        if (rc != ZOK)
            zkr__op_cancel(op);
        else
            p = NULL; /* owned by the completion now */
    }
    pthread_mutex_unlock(&s->mu);
    if (zh != NULL) {
        rc = zoo_multi(zh, count + 1, p->ops, p->results);
        zkr__zh_put(s);
        rc = guard_result(rc, p);
    }
    if (p != NULL) {
        free(p->ops);
        free(p->results);
        free(p);
    }
    return rc;
}

/* ------------------------------------------------------ the resource */

int zkr_fence_admit(int64_t *highest, int64_t token)
{
    int64_t cur;

    if (highest == NULL || token <= 0)
        return ZBADARGUMENTS;
    cur = __atomic_load_n(highest, __ATOMIC_ACQUIRE);
    do {
        if (token < cur)
            return ZKR_ESTALE;
        if (token == cur)
            return 0;
    } while (!__atomic_compare_exchange_n(highest, &cur, token, 0,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return 0;
}
