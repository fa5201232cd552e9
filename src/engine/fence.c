/* Fencing (SPEC section 3): sequencers that carry a grant to another
 * process, writes guarded by the grant on the ZooKeeper side, and the
 * resource-side rule.
 *
 * A lock cannot stop a holder that was paused or partitioned from acting
 * late: by the time it runs again its session may have expired and the
 * lock been granted to another. Only a check at the resource itself makes
 * that harmless. Inside ZooKeeper that check is a multi whose first
 * operation requires our node to exist (see "guarded writes" for why not
 * its version); outside, it is the fencing token compared with the
 * highest one the resource has seen, and a sequencer checked against the
 * queue tells another process whether a grant is current. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int mode_valid(char m)
{
    return m != '\0' && strchr("xrwlp", m) != NULL;
}

/* Is a contender name of this kind (and holder count) one that a grant of
 * this mode is held by? Each mode is one naming of the nodes
 * (zkr__recipe_t.mode and .marker; ZKR__KIND_* in base.h): a sequencer
 * whose mode its node cannot have is refused before anything else, so
 * that a READ node can never pass as a WRITE node's grant, nor a node of
 * a rule that admits several holders as an exclusive one. */
static int mode_matches(char mode, zkr__kind_t kind, int permits)
{
    switch (mode) {
    case 'x':
        return kind == ZKR__KIND_EXCLUSIVE && permits == 0;
    case 'p':
        return kind == ZKR__KIND_EXCLUSIVE && permits > 0;
    case 'r':
        return kind == ZKR__KIND_READ;
    case 'w':
        return kind == ZKR__KIND_WRITE;
    case 'l':
        return kind == ZKR__KIND_LATCH;
    default:
        return 0;
    }
}

/* The node path must be valid and end in a contender name that a grant of
 * this mode can have. */
static int node_valid(const char *node, char mode)
{
    const char *base;
    int32_t seq;
    zkr__kind_t kind;

    if (node[0] != '/' || strlen(node) >= ZKR_NODE_MAX)
        return 0;
    base = strrchr(node, '/');
    if (base == node || zkr__parse_name(base + 1, &seq, &kind) != 0 ||
        !mode_matches(mode, kind, zkr__parse_permits(base + 1)))
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
        memchr(q->node, '\0', sizeof(q->node)) == NULL ||
        !node_valid(q->node, q->mode))
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
    if (strlen(p) >= sizeof(q.node) || !node_valid(p, q.mode))
        return ZKR_EFORMAT;
    strcpy(q.node, p);
    slash = strrchr(q.node, '/');
    memcpy(q.path, q.node, (size_t)(slash - q.node));
    q.path[slash - q.node] = '\0';
    *out = q;
    return 0;
}

/* ------------------------------------------------------------- check */

/* Is a sequencer's grant current? Three requests, sent back to back on
 * the checker's session:
 *
 *   1. sync(dir): the checker's server may be a follower that lags the
 *      ensemble's leader (it answers reads from its own copy, and one cut
 *      off from the leader goes on answering for up to syncLimit x
 *      tickTime). A lagging copy can still show a holder whose session the
 *      leader has expired and whose lock it has granted to another. A
 *      session's requests are processed in order, and a read sent after a
 *      sync is answered from a state at least as new as the leader's when
 *      the sync reached it: so the two reads below see every change
 *      committed before this call was made.
 *   2. getChildren2(dir): the queue, and the directory's pzxid (the zxid
 *      of its last change of children).
 *   3. exists(node): the node's czxid and ephemeralOwner.
 *
 * The grant is current when the node exists with the sequencer's czxid and
 * owner, was among the children listed (its czxid is not above the
 * listing's pzxid: the name listed was this very node, not an older one of
 * the same name), and the recipe's rule grants it in that listing
 * (zkr__holding() in names.c: the same rules the engine grants by). The
 * node, having the same czxid in a later read, existed without a break
 * from the listing on, so nothing the recipe's rule forbids could have
 * come before it meanwhile (later contenders sort after it).
 *
 * The answer is about the moment the reads were served: a check that
 * passes says the grant was current after the call began, not that it
 * still is when the caller acts. Only the fencing token compared at the
 * resource (zkr_fence_admit()) covers that gap. */
struct check {
    zkr_sequencer_t q;
    char dir[ZKR_NODE_MAX];     /* the node's directory (q.path is not
                                   trusted to agree with q.node) */
    zkr_result_completion_t cb; /* NULL for the synchronous form */
    void *data;
    int left;     /* requests still in flight */
    int done, rc; /* synchronous form: finished, and the verdict */
    int send_rc;  /* a request could not be sent (the others still end) */
    int sync_rc, list_rc, stat_rc;
    int granted;   /* the listing grants the node (list_rc == 0) */
    int64_t pzxid; /* ... the listing's pzxid */
    struct Stat st;
};

static int check_verdict(const struct check *k)
{
    if (k->send_rc != 0)
        return k->send_rc;
    if (k->sync_rc != ZOK)
        return k->sync_rc;
    if (k->stat_rc == ZNONODE)
        return ZKR_ESTALE;
    if (k->stat_rc != ZOK)
        return k->stat_rc;
    if (k->st.czxid != k->q.token || k->st.ephemeralOwner != k->q.session_id)
        return ZKR_ESTALE;
    if (k->list_rc == ZNONODE)
        return ZKR_ESTALE;
    if (k->list_rc != ZOK)
        return k->list_rc;
    if (k->st.czxid > k->pzxid || !k->granted)
        return ZKR_ESTALE;
    return 0;
}

static void run_check(const zkr__event_t *ev)
{
    struct check *k = ev->data;

    k->cb(ev->a, k->data);
    free(k);
}

/* Every completion: counts down; the last one (they arrive in order, but
 * the count does not rely on it) delivers the verdict. Mutex held. */
static void check_step(zkr_session_t *s, struct check *k)
{
    if (--k->left > 0)
        return;
    if (k->cb == NULL) {
        k->rc = check_verdict(k);
        k->done = 1; /* zkr__op_end() wakes the waiter */
    } else if (zkr__post_call(s, run_check, check_verdict(k), NULL, k) != 0) {
        free(k); /* cannot deliver: as if the session had closed */
    }
}

static void check_synced(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct check *k = op->ctx;

    (void)value;
    k->sync_rc = rc;
    check_step(s, k);
    zkr__op_end(op);
}

static void check_listed(int rc, const struct String_vector *kids,
                         const struct Stat *dir, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct check *k = op->ctx;
    zkr__entry_t *e = NULL;
    int n = 0, self;

    k->list_rc = rc;
    if (rc == ZOK && (k->list_rc = zkr__sort_children(kids, &e, &n)) == 0) {
        self = zkr__find_entry(e, n, strrchr(k->q.node, '/') + 1);
        k->granted = self >= 0 && self < zkr__holding(e, n);
        k->pzxid = dir->pzxid;
        free(e);
    }
    check_step(s, k);
    zkr__op_end(op);
}

static void check_stat(int rc, const struct Stat *st, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct check *k = op->ctx;

    k->stat_rc = rc;
    if (rc == ZOK)
        k->st = *st;
    check_step(s, k);
    zkr__op_end(op);
}

/* Sends the three requests; mutex held. 0: the completions will deliver
 * (k is theirs); otherwise nothing was sent and k is the caller's. */
static int check_send(zkr_session_t *s, struct check *k)
{
    zkr__op_t *op[3] = {NULL, NULL, NULL};
    int rc = 0;

    if (s->closing)
        return ZKR_ECLOSED;
    if (s->zh == NULL || !s->connected)
        return ZCONNECTIONLOSS;
    for (int i = 0; i < 3; i++) {
        if ((op[i] = zkr__op_new(s, NULL)) == NULL) {
            for (int j = 0; j < i; j++)
                zkr__op_cancel(op[j]);
            return ZKR_ENOMEM;
        }
        op[i]->ctx = k;
    }
    for (int i = 0; i < 3; i++) {
        if (rc == 0) {
            if (i == 0)
                rc = zoo_async(s->zh, k->dir, check_synced, op[i]);
            else if (i == 1)
                rc = zoo_aget_children2(s->zh, k->dir, 0, check_listed, op[i]);
            else
                rc = zoo_aexists(s->zh, k->q.node, 0, check_stat, op[i]);
        }
        if (rc != ZOK) {
            zkr__op_cancel(op[i]);
            continue;
        }
        k->left++;
    }
    if (k->left == 0)
        return rc;
    /* The reads must not be judged without the sync: if one could not be
     * sent, the check fails with that error once the others have ended. */
    k->send_rc = rc;
    return 0;
}

static int check_args(zkr_session_t *s, const zkr_sequencer_t *q)
{
    if (s == NULL || q == NULL || !mode_valid(q->mode) || q->token <= 0 ||
        memchr(q->node, '\0', sizeof(q->node)) == NULL ||
        !node_valid(q->node, q->mode))
        return ZBADARGUMENTS;
    return 0;
}

static struct check *check_new(const zkr_sequencer_t *q,
                               zkr_result_completion_t cb, void *data)
{
    struct check *k = calloc(1, sizeof(*k));

    if (k != NULL) {
        k->q = *q;
        snprintf(k->dir, sizeof(k->dir), "%.*s",
                 (int)(strrchr(q->node, '/') - q->node), q->node);
        k->cb = cb;
        k->data = data;
    }
    return k;
}

int zkr_sequencer_check(zkr_session_t *s, const zkr_sequencer_t *q)
{
    struct check *k;
    int rc;

    if ((rc = check_args(s, q)) != 0)
        return rc;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    if ((k = check_new(q, NULL, NULL)) == NULL)
        return ZKR_ENOMEM;
    pthread_mutex_lock(&s->mu);
    if ((rc = check_send(s, k)) == 0) {
        /* The completions always come: an answer, or the client's own
         * connection-loss or closing error for each request. */
        zkr__wait(s, &k->done, -1);
        rc = k->rc;
    }
    pthread_mutex_unlock(&s->mu);
    free(k);
    return rc;
}

int zkr_sequencer_check_async(zkr_session_t *s, const zkr_sequencer_t *q,
                              zkr_result_completion_t cb, void *data)
{
    struct check *k;
    int rc;

    if (cb == NULL)
        return ZBADARGUMENTS;
    if ((rc = check_args(s, q)) != 0)
        return rc;
    if ((k = check_new(q, cb, data)) == NULL)
        return ZKR_ENOMEM;
    pthread_mutex_lock(&s->mu);
    rc = check_send(s, k);
    pthread_mutex_unlock(&s->mu);
    if (rc != 0)
        free(k);
    return rc;
}

/* ----------------------------------------------------- guarded writes */

/* The guard is `check(node, -1)`: the holder's node exists. What the
 * server can check in a multi is a node's existence and data version,
 * never its czxid or owner, so the guard rests on the node's name instead:
 * it carries this contender's UUID and the sequence the server assigned
 * at its create, and no zkr contender ever creates a name it was not
 * given, so while a node of that name exists it is this grant's node. Our
 * node going away (release, forced release, session expiry) is exactly
 * what ends the grant, and no later contender can come before it in the
 * queue: existence is the grant, for every recipe (a holder under a
 * shared rule, or under one that admits several holders, stays granted
 * while its node lives, as an exclusive holder does).
 *
 * The data version is not checked, on purpose: it changes while the grant
 * stays current. A recipe that pokes (.poke) touches a granted node to
 * wake its successor (at a moment the holder does not control, and again if
 * that touch is retried), Curator's revocation writes holders' nodes, and any
 * client may write a node it can see; a version guard would refuse the
 * writes of a current holder (ZKR_ENOTHELD while held) after each. Nor
 * would it close the one gap existence leaves: a client that deletes our
 * node and creates one of the same name by hand gets version 0, the
 * version an untouched lock node has. That needs CREATE and DELETE on the
 * directory; a protected ACL on the recipe is the defence (the header says
 * so).
 *
 * Results: the server fills a result only when it answers the multi. Each
 * result starts as UNANSWERED, so that a result the server did not fill
 * (connection loss, closing, session expired, a local refusal) reads as
 * the code the call returns, never as ZOK or as stale memory. */
#define UNANSWERED INT32_MIN

struct pending {
    zkr_result_completion_t cb;
    void *data;
    zoo_op_t *ops; /* the guard, then the caller's ops */
    zoo_op_result_t *results;
    zoo_op_result_t *user_results;
    int count;    /* the caller's ops */
    int done, rc; /* synchronous form: finished, and its code */
    char node[ZKR_NODE_MAX];
};

static struct pending *guard_build(const char *node, int count,
                                   const zoo_op_t *ops,
                                   zoo_op_result_t *results)
{
    struct pending *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    snprintf(p->node, sizeof(p->node), "%s", node);
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
    zoo_check_op_init(&p->ops[0], p->node, -1);
    memcpy(p->ops + 1, ops, sizeof(*ops) * (size_t)count);
    for (int i = 0; i <= count; i++)
        p->results[i].err = UNANSWERED;
    return p;
}

static void pending_free(struct pending *p)
{
    if (p != NULL) {
        free(p->ops);
        free(p->results);
        free(p);
    }
}

/* Results of a call the server never answered: each says rc. */
static void results_unanswered(zoo_op_result_t *results, int count, int rc)
{
    for (int i = 0; i < count; i++) {
        memset(&results[i], 0, sizeof(results[i]));
        results[i].err = rc;
    }
}

/* Hands the caller its results and tells "not held" from everything else:
 * only the server saying the guard's node does not exist (ZNONODE on the
 * guard; nothing was applied) is ZKR_ENOTHELD. The guard refused for
 * another reason (ZNOAUTH: this session may not READ its own node, which
 * a check needs) says nothing about the grant and passes through, as do
 * the operations' own errors. */
static int guard_result(int rc, struct pending *p)
{
    if (rc == ZOK && p->results[0].err == UNANSWERED)
        rc = ZSYSTEMERROR; /* a success with no result: cannot happen */
    for (int i = 0; i <= p->count; i++) {
        if (p->results[i].err == UNANSWERED)
            p->results[i].err = rc;
        if (i > 0)
            p->user_results[i - 1] = p->results[i];
    }
    if (rc != ZOK && p->results[0].err == ZNONODE)
        return ZKR_ENOTHELD;
    return rc;
}

static void run_multi(const zkr__event_t *ev)
{
    struct pending *p = ev->data;

    p->cb(ev->a, p->data);
    pending_free(p);
}

static void multi_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    struct pending *p = op->ctx;

    rc = guard_result(rc, p);
    if (p->cb == NULL) {
        p->rc = rc;
        p->done = 1; /* zkr__op_end() wakes the waiter */
    } else if (zkr__post_call(s, run_multi, rc, NULL, p) != 0) {
        pending_free(p);
    }
    zkr__op_end(op);
}

/* Both forms send with zoo_amulti(): the synchronous zoo_multi() of
 * Debian's client (3.8.0) neither fills the results nor frees its
 * per-operation completions when the connection is lost, whereas the
 * asynchronous one reports the loss to each. */
int zkr__guarded_multi(zkr__contender_t *c, int count, const zoo_op_t *ops,
                       zoo_op_result_t *results, zkr_result_completion_t cb,
                       void *data)
{
    zkr_session_t *s = c->s;
    struct pending *p = NULL;
    zkr__op_t *op;
    int rc = 0, sent = 0;

    if (count < 1 || count > 1000 || ops == NULL || results == NULL)
        return ZBADARGUMENTS;
    if (cb == NULL && zkr__in_callback()) {
        results_unanswered(results, count, ZKR_EDEADLK);
        return ZKR_EDEADLK;
    }
    zkr__lock_fresh(s);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (c->phase != ZKR__P_HELD || c->node == NULL)
        rc = ZKR_ENOTHELD;
    else if ((p = guard_build(c->node, count, ops, results)) == NULL)
        rc = ZKR_ENOMEM;
    else if (s->zh == NULL || !s->connected)
        rc = ZCONNECTIONLOSS;
    else if ((op = zkr__op_new(s, NULL)) == NULL)
        rc = ZKR_ENOMEM;
    else {
        p->cb = cb;
        p->data = data;
        op->ctx = p;
        rc = zoo_amulti(s->zh, count + 1, p->ops, p->results, multi_done, op);
        if (rc != ZOK) {
            zkr__op_cancel(op);
        } else if (cb != NULL) {
            sent = 1;
            p = NULL; /* owned by the completion now */
        } else {
            /* The completion always comes: the answer, or the client's
             * connection-loss or closing error. */
            sent = 1;
            zkr__wait(s, &p->done, -1);
            rc = p->rc;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!sent)
        results_unanswered(results, count, rc);
    pending_free(p);
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
