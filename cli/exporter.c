/* zkr exporter: serves /metrics (Prometheus text format 0.0.4) describing
 * recipe paths as ZooKeeper sees them, and the exporter's own session.
 *
 * A scrape never talks to ZooKeeper: it renders what a worker thread last
 * learned. The worker learns from watches, and bounds what it reads so
 * that a path with thousands of waiters costs little:
 *
 * - The depth of a queue is the numChildren of its path's stat: one
 *   exists() request, constant in size whatever the number of children.
 *   ZooKeeper 3.8's C client has no persistent watch (addWatch), and a
 *   child watch can only be set by listing the children, so the worker
 *   re-reads that stat every --refresh interval (default 1 s) and after
 *   every watch event, not per scrape.
 * - The holders (identifier, age, fencing token, leader and epoch) come
 *   from a listing (zkr_contenders_list()), taken only when the holders may
 *   have changed: an exists() watch on every holder's node and on the
 *   first waiter's fires (a release, a waiter leaving from the front, which
 *   can let readers behind a writer in), the path's node appears or goes,
 *   the session is new or reconnected, or a child came or went (the
 *   stat's pzxid moved) while every contender held (only then can a
 *   newcomer hold at once: holders are a prefix of the FIFO queue, and a
 *   newcomer behind a waiter waits). Listings of one path are at least
 *   --refresh apart; after a refused one (a node we may not read), twice
 *   the gap before, up to 60 s, until a success, a watch event or a
 *   new connection.
 * - Waiters are the depth minus the holders minus the children that are
 *   not contenders (counted at the last listing), so they follow arrivals
 *   and departures without a listing.
 *
 * Threads: ZooKeeper's completion thread runs the watchers (they only mark
 * a path and signal), zkr's event thread runs the session listener, the
 * worker does every ZooKeeper call, the main thread runs libmicrohttpd's
 * event loop (epoll) and renders. One mutex guards the state; no ZooKeeper
 * call is made while it is held.
 *
 * HTTP clients are bounded so that a client that opens many connections
 * and sends their request headers slowly (a slowloris), from one address
 * or from many, cannot keep a scraper out: a request must arrive whole
 * within --header-timeout, an address holds at most --per-ip-limit
 * connections and all of them at most --max-connections, and a newcomer
 * over a limit closes another connection, one still waiting for its
 * request first (see exporter_http.c). */
#define _GNU_SOURCE
#include <getopt.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "exporter.h"

#define DEFAULT_LISTEN "127.0.0.1:9723"
#define DEFAULT_MAX_CONNECTIONS 128
#define DEFAULT_PER_IP_LIMIT 32
#define DEFAULT_HEADER_TIMEOUT_MS 5000
#define MAX_CONNECTIONS_MAX 100000
/* Opening the session while no server answers: an attempt waits this
 * long at most, and attempts are OPEN_PAUSE_MIN_MS apart, doubling up to
 * OPEN_PAUSE_MAX_MS. Short attempts keep a SIGTERM prompt. */
#define OPEN_ATTEMPT_MS 2000
/* --prefix: the walk's bounds, and the paths watched at most. */
#define DISCOVER_DEPTH 8
#define DISCOVER_NODES 10000
#define MAX_PATHS 1000
#define MAX_PREFIXES 16
#define OPEN_PAUSE_MIN_MS 250
#define OPEN_PAUSE_MAX_MS 5000

int64_t exp_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------- events */

/* Runs on ZooKeeper's completion thread: marks, signals, never calls. */
static void watcher(zhandle_t *zh, int type, int state, const char *path,
                    void *ctx)
{
    exporter_t *x;
    xpath_t *p = ctx;

    (void)zh;
    (void)state;
    (void)path;
    if (type == ZOO_SESSION_EVENT || p == NULL)
        return; /* the session listener handles those */
    x = p->x;
    pthread_mutex_lock(&x->mu);
    p->dirty = 1;
    p->gap_ms = x->refresh_ms;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

/* Runs on zkr's event thread. After SUSPENDED or LOST the values are
 * stale (up 0) until the next listing; a new or resumed session re-reads
 * everything and sets its watches again (a new session has none). */
static void on_state(zkr_session_t *s, zkr_state_t st, void *data)
{
    exporter_t *x = data;
    uint64_t sessions = zkr_session_counter(s, ZKR_COUNTER_SESSIONS);

    pthread_mutex_lock(&x->mu);
    for (int i = 0; i < x->npaths; i++) {
        if (st == ZKR_STATE_SUSPENDED || st == ZKR_STATE_LOST)
            x->paths[i]->up = 0;
        else if (st == ZKR_STATE_RECONNECTED ||
                 (st == ZKR_STATE_CONNECTED &&
                  x->paths[i]->session_listed != sessions)) {
            x->paths[i]->dirty = 1; /* a listing in this session stands */
            x->paths[i]->gap_ms = x->refresh_ms; /* a refusal is old news */
        }
    }
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

/* -------------------------------------------------------------- worker */

/* One ZooKeeper read with the exporter's watcher, made through
 * zkr_session_with_handle(): the session re-creates its handle after
 * LOST, which may free a handle obtained any other way while a call on it
 * runs. */
typedef struct {
    enum { CALL_WEXISTS, CALL_EXISTS, CALL_WGET, CALL_CHILDREN } what;
    const char *path;
    xpath_t *p; /* the watcher's context (CALL_WEXISTS, CALL_WGET) */
    struct Stat st;
    char *buf;
    int len;
    struct String_vector *kids;
} zk_call_t;

static int zk_call_run(zhandle_t *zh, void *arg)
{
    zk_call_t *k = arg;

    switch (k->what) {
    case CALL_WEXISTS:
        return zoo_wexists(zh, k->path, watcher, k->p, &k->st);
    case CALL_EXISTS:
        return zoo_exists(zh, k->path, 0, &k->st);
    case CALL_WGET:
        return zoo_wget(zh, k->path, watcher, k->p, k->buf, &k->len, &k->st);
    default:
        return zoo_get_children(zh, k->path, 0, k->kids);
    }
}

static int zk_call(exporter_t *x, zk_call_t *k)
{
    return zkr_session_with_handle(x->s, zk_call_run, k);
}

/* The exporter is stopping (takes x->mu). */
static int stopping(exporter_t *x)
{
    int stop;

    pthread_mutex_lock(&x->mu);
    stop = x->stop;
    pthread_mutex_unlock(&x->mu);
    return stop;
}

/* Ends a walk of many reads: the session is down or closing. */
static int session_gone(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZKR_ECLOSED;
}

/* The child count of p's path, or (sub not NULL) of its child sub, from
 * one exists() (watched: the path's, for p's worker); a missing node
 * counts none (*exists 0). pzxid (may be NULL): the stat's, which every
 * create or delete of a child moves (a count can stand still through a
 * departure and an arrival); 0 for a missing node. */
static int child_count(exporter_t *x, xpath_t *p, const char *sub, int *exists,
                       int *n, int64_t *pzxid)
{
    char path[ZKR_PATH_MAX + 16];
    zk_call_t k = {.what = sub == NULL ? CALL_WEXISTS : CALL_EXISTS,
                   .path = p->path,
                   .p = p};
    int rc;

    if (sub != NULL) {
        snprintf(path, sizeof(path), "%s/%s", p->path, sub);
        k.path = path;
    }
    rc = zk_call(x, &k);
    *exists = rc == ZOK;
    *n = rc == ZOK ? k.st.numChildren : 0;
    if (pzxid != NULL)
        *pzxid = rc == ZOK ? k.st.pzxid : 0;
    return rc == ZNONODE ? ZOK : rc;
}

/* Watches the holders' nodes and the first waiter's: their deletion (or,
 * for a semaphore, the touch of a permit holder's node) is what changes
 * the holders. A get, not an exists: on a node already gone it leaves no
 * watch behind (sequential names never come back to fire it). The client
 * keeps one registration per node for this watcher and context, however
 * often it is set.
 *
 * The first waiter may also hold by writing its own node: a candidate
 * whose name announces leads once it touches it, and the listing judged
 * it by the version it read then (zkr_contenders_holding() stops before a
 * first node read untouched). A touch between that read and this watch
 * fires nothing, so when the names alone would let that node hold (the
 * listing found it untouched) and this get reads a version other than 0,
 * the listing is stale: ZNONODE, as for a node gone (list again; the next
 * listing reads it touched, so this asks once). A waiter whose data
 * another client wrote is judged by its name and asks for nothing. */
static int watch_front(exporter_t *x, xpath_t *p, const zkr_contender_t *v,
                       int n, int holders)
{
    zkr_contender_t *copy;
    char byte;
    int rc, by_names = holders;

    /* Judged by the names alone: a copy of the array, which the listing's
     * record of untouched nodes does not name. */
    if (holders < n && (copy = malloc((size_t)n * sizeof(*copy))) != NULL) {
        memcpy(copy, v, (size_t)n * sizeof(*copy));
        by_names = zkr_contenders_holding(copy, n);
        free(copy);
    }
    for (int i = 0; i < n && i <= holders; i++) {
        zk_call_t k = {.what = CALL_WGET,
                       .path = v[i].node,
                       .p = p,
                       .buf = &byte,
                       .len = (int)sizeof(byte)};
        rc = zk_call(x, &k);
        if (rc == ZNONODE)
            return ZNONODE; /* already gone: list again */
        if (rc != ZOK)
            return rc;
        if (i == holders && by_names > holders && k.st.version != 0)
            return ZNONODE; /* touched since the listing read it */
    }
    return ZOK;
}

/* moved: the queue's depth changed during the listing; it is shown (a busy
 * queue may never stand still for a listing) and the count of children
 * that are not contenders is kept from before. It is listed again only
 * when the holders may differ from the listing's: every contender held (a
 * newcomer may hold at once), or the path's node came or went. With a
 * waiter listed, an arrival queues behind it, and a departure from the
 * front fires a watch that watch_front() has set (or it failed: relist). */
static void publish_listing(exporter_t *x, xpath_t *p, const zkr_contender_t *v,
                            int n, int holders, int exists, int depth,
                            int64_t pzxid, int moved, int relist)
{
    char *id = n > 0 && v[0].id != NULL ? strdup(v[0].id) : NULL;

    pthread_mutex_lock(&x->mu);
    free(p->holder_id);
    p->holder_id = id;
    p->holder_ctime_ms = n > 0 ? v[0].ctime_ms : 0;
    /* A node's czxid names it for good: another token, another holder. */
    if (holders > 0 && (p->holders == 0 || p->token != v[0].czxid))
        p->held_since_ms = cli_wall_ms();
    p->token = n > 0 ? v[0].czxid : 0;
    snprintf(p->kind, sizeof(p->kind), "%s", cli_queue_kind(v, n));
    p->contenders = n;
    p->holders = holders;
    p->exists = exists;
    p->depth = depth;
    p->pzxid = pzxid;
    if (!moved)
        p->foreign = depth > n ? depth - n : 0;
    p->dirty |= relist;
    p->listed = 1;
    p->up = 1;
    pthread_mutex_unlock(&x->mu);
}

/* A listing between two reads of the stat: when both agree, the children
 * that are not contenders are the difference. Returns 0 or an error (the
 * path is then listed again). */
static int refresh_listing(exporter_t *x, xpath_t *p)
{
    zkr_contender_t *v = NULL;
    int n = 0, holders, ex0, d0, ex1, d1, rc, relist = 0, moved;
    int64_t pz0, pz1;
    uint64_t sessions = zkr_session_counter(x->s, ZKR_COUNTER_SESSIONS);

    if ((rc = child_count(x, p, NULL, &ex0, &d0, &pz0)) != ZOK)
        return rc;
    rc = zkr_contenders_list(x->s, p->path, &v, &n);
    pthread_mutex_lock(&x->mu);
    p->listings++;
    p->last_list_ms = exp_mono_ms();
    p->session_listed = sessions;
    pthread_mutex_unlock(&x->mu);
    if (rc != 0)
        return rc;
    holders = zkr_contenders_holding(v, n);
    if (holders < 0)
        rc = ZKR_ENOMEM;
    else if ((rc = watch_front(x, p, v, n, holders)) == ZNONODE)
        relist = 1;
    if ((rc == ZOK || relist) &&
        (rc = child_count(x, p, NULL, &ex1, &d1, &pz1)) == ZOK) {
        /* A child came or went during the listing (pzxid: even when the
         * count stands still, one leaving and one arriving; the listing
         * skips a node gone before it was read, so nothing watches the
         * newcomer, which may hold). */
        moved = ex0 != ex1 || d0 != d1 || pz0 != pz1;
        relist |= ex0 != ex1 || (moved && holders >= n);
        publish_listing(x, p, v, n, holders, ex1, d1, pz1, moved, relist);
    }
    zkr_contenders_free(v, n);
    return rc;
}

/* The stat alone; asks for a listing when the holders may have changed
 * without a watch saying so: the node came or went, or a child came or
 * went (pzxid) while every contender held. */
static int refresh_depth(exporter_t *x, xpath_t *p)
{
    int64_t pzxid;
    int exists, depth, rc = child_count(x, p, NULL, &exists, &depth, &pzxid);

    pthread_mutex_lock(&x->mu);
    if (rc == ZOK) {
        if (exists != p->exists ||
            (pzxid != p->pzxid && p->holders >= p->contenders) ||
            depth < p->holders + p->foreign)
            p->dirty = 1;
        p->exists = exists;
        p->depth = depth;
        p->pzxid = pzxid;
    }
    pthread_mutex_unlock(&x->mu);
    return rc;
}

/* A work queue's figures: its node, its item count (from the child
 * counts, no listing), the first item in serve order (read bucket by
 * bucket, zkr_workq_items()), its line of consumers and its default
 * dead-letter path. A few requests per --refresh interval, whatever the
 * queue's size. */
static int refresh_workq(exporter_t *x, xpath_t *p)
{
    zkr_item_info_t *v = NULL;
    int exists, depth, n = 0, consumers = 0, dead = 0, sub, rc;
    int64_t items = 0;

    if (p->q == NULL &&
        (rc = zkr_workq_new(&p->q, x->s, p->path, "zkr-exporter", NULL)) != 0)
        return rc;
    if ((rc = child_count(x, p, NULL, &exists, &depth, NULL)) != ZOK ||
        (rc = zkr_workq_len(p->q, &items)) != 0 ||
        (rc = zkr_workq_items(p->q, 1, &v, &n)) != 0 ||
        (rc = child_count(x, p, "consumers", &sub, &consumers, NULL)) != ZOK ||
        (rc = child_count(x, p, "dead", &sub, &dead, NULL)) != ZOK) {
        zkr_item_infos_free(v, n); /* NULL and 0 unless read */
        return rc;
    }
    pthread_mutex_lock(&x->mu);
    p->exists = exists;
    p->items = items;
    p->head_ctime_ms = n > 0 ? v[0].ctime_ms : 0;
    p->consumers = consumers;
    p->dead = dead;
    p->wq_read = 1;
    p->up = 1;
    pthread_mutex_unlock(&x->mu);
    zkr_item_infos_free(v, n);
    return ZOK;
}

/* A path given on the command line: is it a work queue? Asked once its
 * node exists (an idle recipe's may not yet): one exists() until then. */
static void probe_workq(exporter_t *x, xpath_t *p)
{
    zk_call_t k = {.what = CALL_EXISTS, .path = p->path};
    int exists = zk_call(x, &k) == ZOK;
    int workq = exists && cli_is_workq(x->s, p->path);

    pthread_mutex_lock(&x->mu);
    p->workq = workq;
    p->probed = exists;
    pthread_mutex_unlock(&x->mu);
}

static void record_error(exporter_t *x, xpath_t *p, int rc)
{
    pthread_mutex_lock(&x->mu);
    cli_info(x->c, "%s: %s", p->path, zkr_strerror(rc));
    p->dirty = 1;
    p->errors++;
    p->up = 0;
    pthread_mutex_unlock(&x->mu);
}

/* The interval between two walks of the --prefix trees: ten --refresh
 * intervals, from 1 s to 60 s. */
static int64_t discover_every(const exporter_t *x)
{
    int64_t ms = 10 * x->refresh_ms;

    return ms < 1000 ? 1000 : ms > 60000 ? 60000 : ms;
}

/* Waits up to ms on the worker's condition, or until stopped. Called with
 * x->mu held. */
static void worker_wait(exporter_t *x, int64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&x->cv, &x->mu, &ts);
}

/* Adds a path (copied) to watch, known to be a work queue or not yet
 * probed (workq 0); the caller holds x->mu. 0, or -1 when out of memory
 * or at MAX_PATHS. */
static int add_path(exporter_t *x, const char *path, int workq)
{
    xpath_t *p;

    if (x->npaths >= MAX_PATHS)
        return -1;
    if (x->npaths == x->cap) {
        int cap = x->cap > 0 ? 2 * x->cap : 16;
        xpath_t **v = realloc(x->paths, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return -1;
        x->paths = v;
        x->cap = cap;
    }
    if ((p = calloc(1, sizeof(*p))) == NULL ||
        (p->path = strdup(path)) == NULL) {
        free(p);
        return -1;
    }
    p->x = x;
    p->dirty = 1;
    p->gap_ms = x->refresh_ms;
    p->workq = p->probed = workq;
    x->paths[x->npaths++] = p;
    return 0;
}

/* 1 when a child's name ends in a sequence number (ten digits, as
 * ZooKeeper appends to a sequential node): the node above it is taken for
 * a recipe path, whoever's recipe it is (zkr, Curator, kazoo). */
static int sequential(const char *name)
{
    size_t n = strlen(name);

    if (n < 10)
        return 0;
    for (size_t i = n - 10; i < n; i++)
        if ((name[i] < '0' || name[i] > '9') &&
            !(i == n - 10 && name[i] == '-'))
            return 0; /* past 2^31 the server writes "-000000001" */
    return 1;
}

/* 1 when a child's name is one of a zkr work queue's own nodes: the node
 * above may be a work queue (cli_is_workq() decides). */
static int workq_child(const char *name)
{
    return strcmp(name, "consumers") == 0 ||
           (name[0] == 'q' && name[1] >= '0' && name[1] <= '3' &&
            name[2] == '\0');
}

/* Walks the tree below each --prefix (breadth first, at most
 * DISCOVER_DEPTH levels and DISCOVER_NODES nodes a pass) and watches every
 * node with a child named as a sequential node (a lock, read/write lock,
 * semaphore or election), and every zkr work queue, that it does not
 * watch yet; it does not descend below either (a work queue's line and
 * buckets hold sequential nodes too). A path found is watched until the
 * exporter stops (its node may go when idle: exists 0). No ZooKeeper
 * call is made with x->mu held. */
static void discover(exporter_t *x)
{
    char **queue = NULL;
    int *depth = NULL, head = 0, tail = 0, rc = ZOK;

    if ((queue = calloc(DISCOVER_NODES, sizeof(*queue))) == NULL ||
        (depth = calloc(DISCOVER_NODES, sizeof(*depth))) == NULL) {
        free(queue);
        return;
    }
    for (int i = 0; i < x->nprefixes && tail < DISCOVER_NODES; i++)
        if ((queue[tail] = strdup(x->prefixes[i])) != NULL)
            depth[tail++] = 0;
    while (head < tail && !session_gone(rc) && !stopping(x)) {
        struct String_vector kids = {0};
        char *path = queue[head];
        int d = depth[head++], recipe = 0, queue_like = 0, workq;
        zk_call_t call = {.what = CALL_CHILDREN, .path = path, .kids = &kids};

        rc = zk_call(x, &call);
        if (rc == ZNONODE)
            rc = ZOK; /* gone meanwhile, or a prefix not made yet */
        for (int k = 0; rc == ZOK && k < kids.count && !queue_like; k++)
            queue_like = workq_child(kids.data[k]);
        workq = queue_like && cli_is_workq(x->s, path);
        for (int k = 0; rc == ZOK && k < kids.count && !recipe; k++)
            recipe = workq || sequential(kids.data[k]);
        if (recipe) {
            int known = 0;
            pthread_mutex_lock(&x->mu);
            for (int i = 0; i < x->npaths && !known; i++)
                known = strcmp(x->paths[i]->path, path) == 0;
            if (!known && add_path(x, path, workq) == 0)
                x->discoveries++;
            else if (!known)
                x->discovery_skipped++;
            pthread_mutex_unlock(&x->mu);
        }
        for (int k = 0;
             rc == ZOK && !recipe && d < DISCOVER_DEPTH && k < kids.count;
             k++) {
            if (tail == DISCOVER_NODES) {
                pthread_mutex_lock(&x->mu);
                x->discovery_skipped++;
                pthread_mutex_unlock(&x->mu);
                break;
            }
            if (asprintf(&queue[tail], "%s%s%s", path,
                         strcmp(path, "/") == 0 ? "" : "/", kids.data[k]) < 0) {
                queue[tail] = NULL;
                break;
            }
            depth[tail++] = d + 1;
        }
        deallocate_String_vector(&kids);
        if (rc != ZOK) {
            pthread_mutex_lock(&x->mu);
            x->discovery_errors++;
            pthread_mutex_unlock(&x->mu);
            cli_info(x->c, "--prefix: %s: %s", path, zkr_strerror(rc));
            if (!session_gone(rc))
                rc = ZOK; /* ZNOAUTH on one node: go on with the others */
        }
    }
    for (int i = 0; i < tail; i++)
        free(queue[i]);
    free(queue);
    free(depth);
}

/* The reason label of zkr_exporter_down_info for a failed open. */
static const char *open_failure(int rc)
{
    if (rc == ZKR_ETIMEDOUT)
        return "connecting"; /* no server answered in time */
    if (rc == ZKR_EREFUSED)
        return "refused"; /* every server refused the connection */
    if (rc == ZAUTHFAILED)
        return "auth_failed";
    if (rc == ZSYSTEMERROR)
        return "client_init"; /* most often a host that does not resolve */
    return "error";
}

/* Opens the exporter's session, trying again until it opens or the
 * exporter stops: each attempt waits at most OPEN_ATTEMPT_MS (or the
 * session timeout, if shorter) for a server, then the next one starts
 * after a pause that doubles up to OPEN_PAUSE_MAX_MS. Meanwhile x->down
 * says why; a reason is logged when it changes. A server list the client
 * rejects stops the exporter (exit 64). 0, or -1 when stopping. */
static int open_session(exporter_t *x)
{
    const cli_t *c = x->c;
    zkr_session_options_t o = {0};
    int64_t pause = OPEN_PAUSE_MIN_MS;
    const char *logged = NULL;

    o.digest = c->auth;
    o.chroot = c->chroot;
    o.log_level = c->verbose ? ZKR_LOG_WARN : ZKR_LOG_NONE;
    o.connect_timeout_ms = c->session_timeout_ms < OPEN_ATTEMPT_MS
                               ? c->session_timeout_ms
                               : OPEN_ATTEMPT_MS;
    for (;;) {
        zkr_session_t *s = NULL;
        int rc = zkr_session_open(&s, c->servers, c->session_timeout_ms, &o);

        pthread_mutex_lock(&x->mu);
        if (rc == 0 && !x->stop &&
            zkr_session_add_listener(s, on_state, x) == 0) {
            x->s = s;
            x->down = NULL;
            pthread_mutex_unlock(&x->mu);
            cli_info(c, "connected to %s, session %016llx, timeout %d ms",
                     c->hosts, (unsigned long long)zkr_session_id(s),
                     zkr_session_timeout_ms(s));
            return 0;
        }
        if (rc == 0) {
            pthread_mutex_unlock(&x->mu);
            zkr_session_free(s);
            return -1; /* stopping, or out of memory for the listener */
        }
        if (rc == ZBADARGUMENTS) {
            x->fatal = CLI_EXIT_USAGE;
            pthread_mutex_unlock(&x->mu);
            cli_err("invalid server list '%s' or credentials", c->hosts);
            kill(getpid(), SIGTERM); /* serve()'s signalfd takes it */
            return -1;
        }
        x->down = open_failure(rc);
        x->connect_failures++;
        if (x->down != logged)
            cli_err("no session with ZooKeeper at %s yet (%s): serving "
                    "zkr_up 0, trying again",
                    c->hosts, zkr_strerror(rc));
        logged = x->down;
        if (!x->stop)
            worker_wait(x, pause);
        pause = pause * 2 < OPEN_PAUSE_MAX_MS ? pause * 2 : OPEN_PAUSE_MAX_MS;
        if (x->stop) {
            pthread_mutex_unlock(&x->mu);
            return -1;
        }
        pthread_mutex_unlock(&x->mu);
    }
}

static void *worker(void *arg)
{
    exporter_t *x = arg;
    int64_t next_depth = 0;

    if (open_session(x) != 0)
        return NULL;
    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        int64_t now = exp_mono_ms(), wake = next_depth;
        int depth_due = now >= next_depth;
        zkr_state_t st = zkr_session_state(x->s);
        /* While the session is down, nothing is read (a read would only
         * fail): the handle may be replaced meanwhile, and the listener
         * wakes us when the session is back. */
        int up = st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED;
        int npaths = up ? x->npaths : 0;

        if (depth_due)
            next_depth = now + x->refresh_ms;
        if (x->nprefixes > 0 && up && now >= x->next_discovery_ms) {
            x->next_discovery_ms = now + discover_every(x);
            pthread_mutex_unlock(&x->mu);
            discover(x);
            pthread_mutex_lock(&x->mu);
            npaths = x->npaths;
        }
        if (x->nprefixes > 0 && up && x->next_discovery_ms < wake)
            wake = x->next_discovery_ms;
        for (int i = 0; i < npaths && !x->stop; i++) {
            xpath_t *p = x->paths[i];
            int rc = ZOK, list;

            if (!p->probed && depth_due) {
                pthread_mutex_unlock(&x->mu);
                probe_workq(x, p);
                pthread_mutex_lock(&x->mu);
            }
            if (p->workq) {
                p->dirty = 0; /* its node's watch asks for nothing */
                if (!depth_due)
                    continue;
                pthread_mutex_unlock(&x->mu);
                if ((rc = refresh_workq(x, p)) != ZOK)
                    record_error(x, p, rc);
                pthread_mutex_lock(&x->mu);
                p->dirty = 0;
                continue;
            }
            list = p->dirty && now - p->last_list_ms >= p->gap_ms;
            if (p->dirty && !list && p->last_list_ms + p->gap_ms < wake)
                wake = p->last_list_ms + p->gap_ms;
            if (!list && !depth_due)
                continue;
            if (list) {
                p->dirty = 0;
                /* The try counts, even one that fails before it lists. */
                p->last_list_ms = now;
            }
            pthread_mutex_unlock(&x->mu);
            rc = list ? refresh_listing(x, p) : refresh_depth(x, p);
            if (rc != ZOK)
                record_error(x, p, rc);
            pthread_mutex_lock(&x->mu);
            /* A listing refused (a node we may not read, ZNOAUTH) is not
             * asked again every --refresh: each try reads up to that
             * node. A lost connection is the session's to report, and
             * its return lists again (on_state). */
            if (list && (rc == ZNOAUTH || rc == ZKR_ENOMEM))
                p->gap_ms = p->gap_ms * 2 < 60000   ? p->gap_ms * 2
                            : x->refresh_ms > 60000 ? x->refresh_ms
                                                    : 60000;
            else if (list && rc == ZOK)
                p->gap_ms = x->refresh_ms;
            if (p->dirty && p->last_list_ms + p->gap_ms < wake)
                wake = p->last_list_ms + p->gap_ms;
        }
        if (x->stop)
            break;
        now = exp_mono_ms();
        if (wake > now)
            worker_wait(x, wake - now);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    printf("usage: zkr exporter [--listen HOST:PORT] [--refresh SECONDS]\n"
           "                    [--textfile-dir DIR] [--max-connections N]\n"
           "                    [--per-ip-limit N] [--header-timeout "
           "SECONDS]\n"
           "                    [--prefix PATH]... [PATH...]\n"
           "Serves /metrics (Prometheus text format) for each recipe "
           "PATH\n(lock, read/write lock, semaphore, election or work queue).\n"
           "  -l, --listen HOST:PORT  host name or IPv4 address and port, "
           "[IPV6]:PORT,\n"
           "                          or :PORT for every address "
           "(default " DEFAULT_LISTEN ")\n"
           "  -r, --refresh SECONDS   stat interval and least time "
           "between listings\n"
           "                          of a path (default 1)\n"
           "  -p, --prefix PATH       watches every lock, read/write lock, "
           "semaphore,\n"
           "                          election and work queue below PATH\n"
           "                          (repeatable)\n"
           "  -t, --textfile-dir DIR  adds the *.prom files of DIR "
           "(written\n"
           "                          atomically), label source=FILE\n"
           "      --max-connections N HTTP connections held at most "
           "(default %d)\n"
           "      --per-ip-limit N    of them from one client address "
           "(default %d);\n"
           "                          over a limit, a newcomer closes "
           "another\n"
           "                          connection, a waiting one first "
           "(zkr(1))\n"
           "      --header-timeout SECONDS\n"
           "                          time a connection has to send a whole "
           "request\n"
           "                          (default %d)\n"
           "/metrics is served from the start: zkr_up is 0 (and "
           "zkr_exporter_down_info\n"
           "says why) until a session with ZooKeeper is open.\n"
           "Exit status:\n"
           "  0   stopped by SIGINT or SIGTERM (or --help)\n"
           "  64  bad arguments, an unknown --listen host, or a server "
           "list the client\n"
           "      rejects\n"
           "  69  the --listen host could not be resolved now (retryable)\n"
           "  71  the --listen address cannot be bound, or another system "
           "error\n",
           DEFAULT_MAX_CONNECTIONS, DEFAULT_PER_IP_LIMIT,
           DEFAULT_HEADER_TIMEOUT_MS / 1000);
}

/* The HTTP limits' options (x->max_conns, x->per_ip, x->header_ms). 0 or
 * a usage error's status. */
static int parse_http_opt(exporter_t *x, int opt, const char *arg)
{
    long n;

    if (opt == 'T') {
        if (cli_parse_seconds(arg, &x->header_ms) != 0 || x->header_ms < 100 ||
            x->header_ms > 3600000)
            return cli_usage_error(
                "exporter", "--header-timeout wants 0.1 to 3600 seconds");
        return 0;
    }
    if (cli_parse_int(arg, 1, MAX_CONNECTIONS_MAX, &n) != 0)
        return cli_usage_error("exporter", "--%s wants 1 to %d",
                               opt == 'M' ? "max-connections" : "per-ip-limit",
                               MAX_CONNECTIONS_MAX);
    if (opt == 'M')
        x->max_conns = (int)n;
    else
        x->per_ip = (int)n;
    return 0;
}

static int parse_args(int argc, char **argv, const char **listen_at,
                      exporter_t *x)
{
    static const struct option lopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"refresh", required_argument, NULL, 'r'},
        {"textfile-dir", required_argument, NULL, 't'},
        {"max-connections", required_argument, NULL, 'M'},
        {"per-ip-limit", required_argument, NULL, 'P'},
        {"header-timeout", required_argument, NULL, 'T'},
        {"prefix", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *addr = DEFAULT_LISTEN;
    int opt, rc;

    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+l:r:t:p:h", lopts)) != -1) {
        if (opt == 'l') {
            addr = optarg;
        } else if (opt == 'r') {
            if (cli_parse_seconds(optarg, &x->refresh_ms) != 0 ||
                x->refresh_ms < 10 || x->refresh_ms > 3600000)
                return cli_usage_error("exporter",
                                       "--refresh wants 0.01 to 3600 seconds");
        } else if (opt == 't') {
            if (*optarg == '\0')
                return cli_usage_error("exporter",
                                       "--textfile-dir wants a directory");
            x->textfile_dir = optarg;
        } else if (opt == 'p') {
            if (x->nprefixes == MAX_PREFIXES)
                return cli_usage_error("exporter", "at most %d --prefix",
                                       MAX_PREFIXES);
            if (cli_check_args("exporter", optarg, NULL) != 0)
                return CLI_EXIT_USAGE;
            x->prefixes[x->nprefixes++] = optarg;
        } else if (opt == 'M' || opt == 'P' || opt == 'T') {
            if ((rc = parse_http_opt(x, opt, optarg)) != 0)
                return rc;
        } else if (opt == 'h') {
            usage();
            return -1;
        } else {
            return cli_usage_error("exporter",
                                   "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (x->per_ip > x->max_conns)
        return cli_usage_error("exporter",
                               "--per-ip-limit %d over --max-connections %d",
                               x->per_ip, x->max_conns);
    if (optind >= argc && x->nprefixes == 0)
        return cli_usage_error("exporter",
                               "wants at least one PATH or --prefix");
    if (argc - optind > MAX_PATHS)
        return cli_usage_error("exporter", "at most %d PATHs", MAX_PATHS);
    *listen_at = addr;
    for (int i = optind; i < argc; i++)
        if (cli_check_args("exporter", argv[i], NULL) != 0)
            return CLI_EXIT_USAGE;
    return 0;
}

/* Open files for the connections libmicrohttpd may hold: the ones kept,
 * plus as many shut and not yet closed; the soft limit is raised when it
 * is lower. 0, or -1 when the hard limit is too low. */
static int fd_room(const exporter_t *x, rlim_t *need)
{
    struct rlimit rl;

    *need = (rlim_t)x->max_conns * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= *need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < *need)
        return -1;
    rl.rlim_cur = *need;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0 ? 0 : -1;
}

/* Serves until SIGINT or SIGTERM. */
static int serve(exporter_t *x)
{
    struct MHD_Daemon *d = NULL;
    pthread_t th;
    sigset_t set;
    int sfd, rc = CLI_EXIT_OSERR;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if ((sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
        pthread_create(&th, NULL, worker, x) != 0) {
        cli_err("cannot start a thread");
        if (sfd >= 0)
            close(sfd);
        close(x->listen_fd);
        return CLI_EXIT_OSERR;
    }
    if ((d = exp_start_http(x)) == NULL) {
        close(x->listen_fd); /* libmicrohttpd closes it once started */
        cli_err("cannot serve HTTP");
    } else if (exp_http_loop(x, d, sfd) != 0) {
        cli_err("HTTP event loop failed");
    } else {
        rc = 0;
    }
    if (d != NULL)
        MHD_stop_daemon(d); /* closes every connection: notify_conn() */
    close(sfd);
    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(th, NULL);
    return rc;
}

int cli_exporter(const cli_t *c, int argc, char **argv)
{
    exporter_t x = {0};
    const char *prefixes[MAX_PREFIXES];
    const char *listen_at = NULL;
    sigset_t set;
    int status;
    rlim_t need;

    x.c = c;
    x.refresh_ms = 1000;
    x.max_conns = DEFAULT_MAX_CONNECTIONS;
    x.per_ip = DEFAULT_PER_IP_LIMIT;
    x.header_ms = DEFAULT_HEADER_TIMEOUT_MS;
    x.down = "connecting";
    x.prefixes = prefixes;
    if ((status = parse_args(argc, argv, &listen_at, &x)) != 0)
        return status < 0 ? 0 : status;
    if (fd_room(&x, &need) != 0)
        return cli_usage_error("exporter",
                               "--max-connections %d needs %llu open files: "
                               "over the limit (ulimit -n)",
                               x.max_conns, (unsigned long long)need);
    if ((status = exp_open_listen(listen_at, &x.listen_fd)) != 0)
        return status;
    /* Every thread started from here on inherits the mask: only serve()'s
     * signalfd takes SIGINT and SIGTERM. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cv, NULL);
    for (int i = optind; i < argc; i++) {
        if (add_path(&x, argv[i], 0) != 0) {
            close(x.listen_fd);
            status = CLI_EXIT_OSERR;
            goto out;
        }
    }
    /* The worker opens the session: /metrics is served from the start,
     * with zkr_up 0 while ZooKeeper cannot be reached. */
    status = serve(&x);
    if (status == 0 && x.fatal != 0)
        status = x.fatal;
    if (x.s != NULL) {
        /* The worker has ended: its work queue handles go first (a session
         * with handles open is not freed). */
        for (int i = 0; i < x.npaths; i++)
            zkr_workq_free(x.paths[i]->q);
        zkr_session_remove_listener(x.s, on_state, &x);
        zkr_session_free(x.s);
    }
out:
    for (int i = 0; i < x.npaths; i++) {
        free(x.paths[i]->holder_id);
        free(x.paths[i]->path);
        free(x.paths[i]);
    }
    free(x.paths);
    pthread_cond_destroy(&x.cv);
    pthread_mutex_destroy(&x.mu);
    return status;
}
