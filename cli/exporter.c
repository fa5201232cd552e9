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
 * request first (see "HTTP connections" below). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define DEFAULT_LISTEN "127.0.0.1:9723"
#define DEFAULT_MAX_CONNECTIONS 128
#define DEFAULT_PER_IP_LIMIT 32
#define DEFAULT_HEADER_TIMEOUT_MS 5000
#define MAX_CONNECTIONS_MAX 100000
/* libmicrohttpd's time limit between two reads or writes of a connection:
 * bounds a response that its client does not read. */
#define IDLE_TIMEOUT_S 10u
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
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

typedef struct xpath {
    struct exporter *x; /* for the watcher, whose context is the path */
    char *path;
    int dirty;       /* a listing is due */
    int up;          /* the values below are current */
    int listed;      /* at least one listing succeeded */
    int exists;      /* the path's node exists */
    int depth;       /* numChildren */
    int contenders;  /* at the last listing */
    int holders;     /* at the last listing */
    int foreign;     /* children that are not contenders, at the listing */
    char kind[16];   /* cli_queue_kind() */
    char *holder_id; /* oldest holder's identifier, or NULL */
    int64_t holder_ctime_ms;
    int64_t token;         /* oldest holder's czxid */
    int64_t held_since_ms; /* when we first saw that node hold (wall) */
    int64_t last_list_ms;
    uint64_t session_listed; /* sessions counter when last listed */
    int64_t pzxid;  /* of the path's stat, last read: any child's create
                       or delete moves it */
    int64_t gap_ms; /* least time between two listings: --refresh, doubled
                       by each refused listing (60 s at most), back at
                       --refresh after a success, a watch event or a
                       new connection */
    uint64_t listings, errors;
    /* A zkr work queue (found by --prefix, or a path given that is one):
     * read every --refresh interval, never listed. */
    int workq;
    int probed;            /* a path given: whether it is one was asked */
    zkr_workq_t *q;        /* the worker's handle, made on the first read */
    int wq_read;           /* the values below were read */
    int64_t items;         /* available and claimed (zkr_workq_len()) */
    int consumers;         /* in its line of waiting consumers */
    int dead;              /* dead letters in PATH/dead */
    int64_t head_ctime_ms; /* when the first item in serve order was put
                              (server clock), 0 when there is none */
} xpath_t;

/* A client address with HTTP connections. */
typedef struct xaddr {
    struct xaddr *next;
    unsigned char ip[16]; /* IPv6, or IPv4 mapped (::ffff:a.b.c.d) */
    int n;                /* its connections not closing */
    int refs;             /* its connections */
} xaddr_t;

/* One HTTP connection, from libmicrohttpd's notice of its start to that of
 * its end. It waits while none of its requests is being served: from its
 * opening, and again from the end of each response (keep-alive). */
typedef struct xconn {
    struct xconn *prev, *next;
    xaddr_t *addr; /* its client's address */
    int fd;
    int64_t since_ms; /* start of its wait */
    int serving;      /* a request of it is being served */
    int heard;        /* a request line of it was read, or a request served */
    int closing;      /* shut down: libmicrohttpd closes it at its next turn */
} xconn_t;

typedef struct exporter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    const cli_t *c;
    zkr_session_t *s; /* NULL until the worker has opened it */
    const char *down; /* why there is no session yet (a reason label) */
    uint64_t connect_failures;
    int fatal;       /* an exit status the worker stopped the exporter for */
    int listen_fd;   /* bound by parse_args()'s address (open_listen()) */
    xpath_t **paths; /* each allocated once, freed at exit: watches point
                        to them */
    int npaths, cap;
    const char **prefixes; /* --prefix */
    int nprefixes;
    int64_t next_discovery_ms;
    uint64_t discoveries, discovery_errors, discovery_skipped;
    int64_t refresh_ms;
    const char *textfile_dir; /* --textfile-dir, or NULL */
    uint64_t scrapes, textfile_errors;
    /* HTTP connections: only the main thread (libmicrohttpd's callbacks,
     * the scrape) reads or writes these. */
    xconn_t *conns, *conns_tail; /* oldest first */
    int nconns;                  /* those not closing */
    xaddr_t *addrs;              /* their client addresses */
    int max_conns, per_ip;       /* --max-connections, --per-ip-limit */
    int64_t header_ms;           /* --header-timeout */
    uint64_t closed_timeout, closed_evicted, closed_refused;
} exporter_t;

static int64_t mono_ms(void)
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
    p->last_list_ms = mono_ms();
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
        int64_t now = mono_ms(), wake = next_depth;
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
        now = mono_ms();
        if (wake > now)
            worker_wait(x, wake - now);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* ----------------------------------------------------------- rendering */

/* A label value: backslash, quote and newline escaped as the format asks;
 * bytes that are not well-formed UTF-8 become U+FFFD (Prometheus rejects
 * the whole scrape otherwise). */
static void label(FILE *f, const char *s)
{
    while (*s != '\0') {
        int len = cli_utf8_len(s);

        if (len == 0) {
            fputs("\xef\xbf\xbd", f);
            s++;
        } else if (*s == '\\' || *s == '"') {
            fprintf(f, "\\%c", *s++);
        } else if (*s == '\n') {
            fputs("\\n", f);
            s++;
        } else {
            fwrite(s, 1, (size_t)len, f);
            s += len;
        }
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A counter family of one unlabelled sample. */
static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
    head(f, name, "counter", help);
    fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* One sample per path of a family; a function returning 0 skips the path.
 * Values are integers (tokens are 64-bit: a double would round them),
 * milliseconds for the families in seconds (ms set). */
typedef int (*path_value_fn)(const xpath_t *p, int64_t now, int64_t *v);

static void family(FILE *f, const exporter_t *x, const char *name,
                   const char *type, const char *help, path_value_fn fn, int ms)
{
    int64_t now = cli_wall_ms(), v;

    head(f, name, type, help);
    for (int i = 0; i < x->npaths; i++) {
        if (!fn(x->paths[i], now, &v))
            continue;
        fprintf(f, "%s{path=\"", name);
        label(f, x->paths[i]->path);
        if (ms)
            fprintf(f, "\"} %s%" PRId64 ".%03d\n", v < 0 ? "-" : "",
                    (v < 0 ? -v : v) / 1000, (int)((v < 0 ? -v : v) % 1000));
        else
            fprintf(f, "\"} %" PRId64 "\n", v);
    }
}

#define PATH_VALUE(fname, cond, expr)                                          \
    static int fname(const xpath_t *p, int64_t now, int64_t *v)                \
    {                                                                          \
        (void)now;                                                             \
        if (!(cond))                                                           \
            return 0;                                                          \
        *v = (int64_t)(expr);                                                  \
        return 1;                                                              \
    }

PATH_VALUE(v_up, 1, p->up)
PATH_VALUE(v_exists, p->listed || p->wq_read, p->exists)
PATH_VALUE(v_depth, p->listed, p->depth)
PATH_VALUE(v_holders, p->listed, p->holders)
PATH_VALUE(v_waiters, p->listed,
           p->depth > p->holders + p->foreign
               ? p->depth - p->holders - p->foreign
               : 0)
PATH_VALUE(v_token, p->listed && p->holders > 0, p->token)
PATH_VALUE(v_epoch,
           p->listed && p->holders > 0 && strcmp(p->kind, "election") == 0,
           p->token)
PATH_VALUE(v_since, p->listed && p->holders > 0, p->holder_ctime_ms)
PATH_VALUE(v_age, p->listed && p->holders > 0,
           now > p->holder_ctime_ms ? now - p->holder_ctime_ms : 0)
PATH_VALUE(v_held, p->listed && p->holders > 0,
           now > p->held_since_ms ? now - p->held_since_ms : 0)
PATH_VALUE(v_listings, 1, p->listings)
PATH_VALUE(v_errors, 1, p->errors)
PATH_VALUE(v_wq_items, p->wq_read, p->items)
PATH_VALUE(v_wq_consumers, p->wq_read, p->consumers)
PATH_VALUE(v_wq_dead, p->wq_read, p->dead)
PATH_VALUE(v_wq_head_age, p->wq_read,
           p->head_ctime_ms > 0 && now > p->head_ctime_ms
               ? now - p->head_ctime_ms
               : 0)

/* The oldest holder's identifier (or leader's), as an info metric. */
static void holder_info(FILE *f, const exporter_t *x, const char *name,
                        int leaders)
{
    for (int i = 0; i < x->npaths; i++) {
        const xpath_t *p = x->paths[i];
        if (!p->listed || p->holders == 0 || p->holder_id == NULL ||
            (strcmp(p->kind, "election") == 0) != leaders)
            continue;
        fprintf(f, "%s{path=\"", name);
        label(f, p->path);
        fprintf(f, "\",kind=\"%s\",id=\"", p->kind);
        label(f, p->holder_id);
        fprintf(f, "\"} 1\n");
    }
}

/* Why zkr_up is 0: a label value of a fixed set (docs/OBSERVABILITY.md). */
static const char *down_reason(const exporter_t *x, zkr_state_t st)
{
    if (x->s == NULL)
        return x->down;
    switch (st) {
    case ZKR_STATE_CONNECTED:
    case ZKR_STATE_RECONNECTED:
        return NULL;
    case ZKR_STATE_SUSPENDED:
        return "suspended";
    case ZKR_STATE_LOST:
        return "lost";
    case ZKR_STATE_CLOSED:
        return "closed";
    default:
        return "connecting";
    }
}

/* Called with x->mu held (x->s is set under it). Before the session is
 * open, it is CONNECTING, with nothing established. */
static void render_session(FILE *f, exporter_t *x)
{
    zkr_state_t st =
        x->s != NULL ? zkr_session_state(x->s) : ZKR_STATE_CONNECTING;
    const char *down = down_reason(x, st);

    head(f, "zkr_up", "gauge",
         "1 while the exporter has a session with ZooKeeper (CONNECTED or "
         "RECONNECTED): the per-path values can be current");
    fprintf(f, "zkr_up %d\n", down == NULL);
    head(f, "zkr_exporter_down_info", "gauge",
         "While zkr_up is 0: 1, with the reason (connecting, refused, "
         "client_init, auth_failed, error, suspended, lost, closed)");
    if (down != NULL)
        fprintf(f, "zkr_exporter_down_info{reason=\"%s\"} 1\n", down);
    counter(f, "zkr_exporter_connect_failures_total",
            "Attempts to open the exporter's first session that failed",
            x->connect_failures);

    head(f, "zkr_build_info", "gauge",
         "1, with the zkr command's version and the library's");
    fprintf(f, "zkr_build_info{version=\"%s\",library_version=\"%s\"} 1\n",
            PACKAGE_VERSION, zkr_version_string());
    if (x->nprefixes > 0) {
        counter(f, "zkr_exporter_discovered_paths_total",
                "Recipe paths found below the --prefix paths", x->discoveries);
        counter(f, "zkr_exporter_discovery_errors_total",
                "Failed reads while walking the --prefix trees",
                x->discovery_errors);
        counter(f, "zkr_exporter_discovery_skipped_total",
                "Paths or subtrees left out: over the paths watched at most, "
                "or the nodes a walk visits at most",
                x->discovery_skipped);
    }
    counter(f, "zkr_exporter_scrapes_total", "Scrapes of /metrics served",
            x->scrapes);
    head(f, "zkr_exporter_http_connections", "gauge",
         "HTTP connections open (the scrape's own included)");
    fprintf(f, "zkr_exporter_http_connections %d\n", x->nconns);
    head(f, "zkr_exporter_http_closed_total", "counter",
         "HTTP connections the exporter closed: header_timeout (no whole "
         "request in --header-timeout), evicted (to make room for a "
         "newcomer), refused (a newcomer, no room)");
    fprintf(f,
            "zkr_exporter_http_closed_total{reason=\"header_timeout\"} "
            "%" PRIu64 "\n"
            "zkr_exporter_http_closed_total{reason=\"evicted\"} %" PRIu64 "\n"
            "zkr_exporter_http_closed_total{reason=\"refused\"} %" PRIu64 "\n",
            x->closed_timeout, x->closed_evicted, x->closed_refused);
}

static void render(FILE *f, exporter_t *x)
{
    pthread_mutex_lock(&x->mu);
    x->scrapes++;
    family(f, x, "zkr_path_up", "gauge",
           "1 when the path's values are current (0: session down, or the "
           "last read failed)",
           v_up, 0);
    family(f, x, "zkr_path_exists", "gauge",
           "1 when the path's node exists (0 is normal for an idle recipe, "
           "whose node may be removed when empty)",
           v_exists, 0);
    family(f, x, "zkr_path_queue_depth", "gauge",
           "Children of the path (numChildren): contenders and any other",
           v_depth, 0);
    family(f, x, "zkr_path_holders", "gauge",
           "Contenders that hold (lock holder, readers, permits, leader)",
           v_holders, 0);
    family(f, x, "zkr_path_waiters", "gauge", "Contenders that wait", v_waiters,
           0);
    head(f, "zkr_path_holder_info", "gauge",
         "The oldest holder's identifier (1 while it holds)");
    holder_info(f, x, "zkr_path_holder_info", 0);
    family(f, x, "zkr_path_holder_created_timestamp_seconds", "gauge",
           "Creation time of the oldest holder's node (server clock, "
           "seconds since the epoch)",
           v_since, 1);
    family(f, x, "zkr_path_holder_age_seconds", "gauge",
           "Age of the oldest holder's node: its wait plus its hold so far",
           v_age, 1);
    family(f, x, "zkr_path_holder_held_seconds", "gauge",
           "How long the exporter has seen the oldest holder hold (a lower "
           "bound)",
           v_held, 1);
    family(f, x, "zkr_path_fencing_token", "gauge",
           "Fencing token (czxid) of the oldest holder", v_token, 0);
    head(f, "zkr_path_leader_info", "gauge",
         "An election's leader identifier (1 while it leads)");
    holder_info(f, x, "zkr_path_leader_info", 1);
    family(f, x, "zkr_path_leader_epoch", "gauge",
           "An election's leader epoch (czxid of its node)", v_epoch, 0);
    family(f, x, "zkr_path_listings_total", "counter",
           "Listings of the path's children by the exporter", v_listings, 0);
    family(f, x, "zkr_path_errors_total", "counter",
           "Failed reads of the path (retried)", v_errors, 0);
    family(f, x, "zkr_workq_items", "gauge",
           "Items in a work queue, available and claimed", v_wq_items, 0);
    family(f, x, "zkr_workq_head_item_age_seconds", "gauge",
           "Age of the item at the head of a work queue (the first in serve "
           "order, available or claimed; its put on the server's clock, to "
           "the exporter's); 0 when the queue is empty",
           v_wq_head_age, 1);
    family(f, x, "zkr_workq_consumers_waiting", "gauge",
           "Consumers in a work queue's line, waiting for an item",
           v_wq_consumers, 0);
    family(f, x, "zkr_workq_dead_items", "gauge",
           "Items in a work queue's default dead-letter path (PATH/dead)",
           v_wq_dead, 0);
    render_session(f, x); /* its counters are under the lock too */
    pthread_mutex_unlock(&x->mu);
}

/* The process_* families of the Prometheus client libraries (Linux: from
 * /proc/self), so that the exporter's own CPU, memory and descriptors are
 * watched as any other process's. A family that cannot be read is left
 * out. */
static void render_process(FILE *f)
{
    unsigned long long utime, stime, start, vsize;
    long long rss;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char buf[1024], *p = NULL;
    unsigned long long btime = 0;
    struct rlimit rl;
    FILE *in;
    DIR *d;
    size_t n = 0;

    if ((in = fopen("/proc/self/stat", "r")) != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, in);
        fclose(in);
    }
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold anything */
    /* After ") ": state (3), then fields 4..13, utime (14), stime (15),
     * fields 16..21, starttime (22), vsize (23), rss (24). */
    if (p != NULL && ticks > 0 && page > 0 &&
        sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d "
               "%*d %*d %*d %*d %*d %llu %llu %lld",
               &utime, &stime, &start, &vsize, &rss) == 5) {
        head(f, "process_cpu_seconds_total", "counter",
             "User and system CPU time spent in seconds");
        fprintf(f, "process_cpu_seconds_total %.2f\n",
                (double)(utime + stime) / (double)ticks);
        head(f, "process_virtual_memory_bytes", "gauge",
             "Virtual memory size in bytes");
        fprintf(f, "process_virtual_memory_bytes %llu\n", vsize);
        head(f, "process_resident_memory_bytes", "gauge",
             "Resident memory size in bytes");
        fprintf(f, "process_resident_memory_bytes %lld\n", rss * page);
        if ((in = fopen("/proc/stat", "r")) != NULL) {
            while (fgets(buf, sizeof(buf), in) != NULL &&
                   sscanf(buf, "btime %llu", &btime) != 1)
                ;
            fclose(in);
        }
        if (btime > 0) {
            head(f, "process_start_time_seconds", "gauge",
                 "Start time of the process since unix epoch in seconds");
            fprintf(f, "process_start_time_seconds %.2f\n",
                    (double)btime + (double)start / (double)ticks);
        }
    }
    if ((d = opendir("/proc/self/fd")) != NULL) {
        long fds = -1; /* the directory's own descriptor is not counted */
        while (readdir(d) != NULL)
            fds++;
        closedir(d);
        head(f, "process_open_fds", "gauge", "Number of open file descriptors");
        fprintf(f, "process_open_fds %ld\n", fds - 2); /* . and .. */
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        head(f, "process_max_fds", "gauge",
             "Maximum number of open file descriptors");
        fprintf(f, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
}

/* ------------------------------------------------------------- merging */

/* A scrape is the exporter's own families, its session's library metrics
 * (zkr_metrics_write()) and the *.prom files of --textfile-dir, merged by
 * family as node_exporter's textfile collector does: one HELP and TYPE per
 * family, its samples together. A file's samples get the label
 * source="FILE" (its name without .prom), so that files written by
 * several processes (each its own zkr_metrics_write()) give distinct
 * series. A file that is not in the text format, or gives a family a type
 * the scrape has already given it another, is left out whole. */
typedef struct fam {
    char *name, *help, *type;
    char *buf; /* its samples */
    size_t len;
    FILE *f;
} fam_t;

typedef struct merge {
    fam_t **v; /* each allocated once: its memstream writes to its buf and
                  len, which must not move when v grows */
    int n, cap;
} merge_t;

static fam_t *fam_get(merge_t *m, const char *name, size_t nlen, int add)
{
    fam_t *e;

    for (int i = 0; i < m->n; i++)
        if (strlen(m->v[i]->name) == nlen &&
            memcmp(m->v[i]->name, name, nlen) == 0)
            return m->v[i];
    if (!add)
        return NULL;
    if (m->n == m->cap) {
        int cap = m->cap > 0 ? 2 * m->cap : 64;
        fam_t **v = realloc(m->v, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        m->v = v;
        m->cap = cap;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return NULL;
    if ((e->name = strndup(name, nlen)) == NULL ||
        (e->f = open_memstream(&e->buf, &e->len)) == NULL) {
        free(e->name);
        free(e);
        return NULL;
    }
    m->v[m->n++] = e;
    return e;
}

static void merge_free(merge_t *m)
{
    for (int i = 0; i < m->n; i++) {
        if (m->v[i]->f != NULL)
            fclose(m->v[i]->f);
        free(m->v[i]->buf);
        free(m->v[i]->name);
        free(m->v[i]->help);
        free(m->v[i]->type);
        free(m->v[i]);
    }
    free(m->v);
}

static size_t name_len(const char *s)
{
    size_t n = 0;

    while (s[n] == '_' || s[n] == ':' || (s[n] >= 'a' && s[n] <= 'z') ||
           (s[n] >= 'A' && s[n] <= 'Z') ||
           (n > 0 && s[n] >= '0' && s[n] <= '9'))
        n++;
    return n;
}

/* The family a sample named s (length n) belongs to: the family of the
 * last TYPE when the name is it or, for a histogram or summary, one of its
 * series; else the family of its own name. */
static fam_t *sample_fam(merge_t *m, const fam_t *cur, const char *s, size_t n)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};

    if (cur != NULL) {
        size_t cl = strlen(cur->name);
        if (n == cl && memcmp(s, cur->name, n) == 0)
            return fam_get(m, s, n, 0);
        for (int i = 0; i < 3 && cur->type != NULL &&
                        (strcmp(cur->type, "histogram") == 0 ||
                         strcmp(cur->type, "summary") == 0);
             i++)
            if (n == cl + strlen(sfx[i]) && memcmp(s, cur->name, cl) == 0 &&
                memcmp(s + cl, sfx[i], strlen(sfx[i])) == 0)
                return fam_get(m, cur->name, cl, 0);
    }
    return fam_get(m, s, n, 1);
}

/* 1 when the line l (len bytes) is a sample: NAME[{LABELS}] VALUE
 * [TIMESTAMP]. */
static int sample_ok(const char *l, size_t len)
{
    char buf[128], *end;
    size_t i = name_len(l), j;

    if (i == 0)
        return 0;
    if (i < len && l[i] == '{') {
        int q = 0;
        for (i++; i < len && (q || l[i] != '}'); i++) {
            if (q && l[i] == '\\')
                i++;
            else if (l[i] == '"')
                q = !q;
        }
        if (i++ >= len)
            return 0;
    }
    if (i >= len || l[i] != ' ')
        return 0;
    for (j = ++i; j < len && l[j] != ' '; j++)
        ;
    if (j == i || j - i >= sizeof(buf))
        return 0;
    memcpy(buf, l + i, j - i);
    buf[j - i] = '\0';
    strtod(buf, &end);
    if (*end != '\0')
        return 0;
    for (i = j + (j < len); i < len; i++)
        if ((l[i] < '0' || l[i] > '9') && !(l[i] == '-' && i == j + 1))
            return 0;
    return j == len || j + 1 < len;
}

/* 1 when t (len bytes) is a metric type of the text format. */
static int type_ok(const char *t, size_t len)
{
    static const char *const types[] = {"counter", "gauge", "histogram",
                                        "summary", "untyped"};

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strlen(types[i]) == len && memcmp(types[i], t, len) == 0)
            return 1;
    return 0;
}

/* Checks text (NUL-terminated): 0 when every line is a comment, blank or
 * a sample, every HELP and TYPE line names a metric (and a TYPE one of
 * the format's types: Prometheus rejects a whole scrape for one bad line),
 * and no TYPE contradicts one the merge has. */
static int merge_check(merge_t *m, const char *text)
{
    for (const char *l = text; *l != '\0';) {
        const char *e = strchr(l, '\n');
        size_t len = e != NULL ? (size_t)(e - l) : strlen(l);

        if (strncmp(l, "# TYPE ", 7) == 0) {
            size_t n = name_len(l + 7);
            fam_t *f = fam_get(m, l + 7, n, 0);
            const char *t = l + 7 + n + 1;
            if (n == 0 || 7 + n >= len || l[7 + n] != ' ' ||
                !type_ok(t, len - 8 - n) ||
                (f != NULL && f->type != NULL &&
                 (strlen(f->type) != len - 8 - n ||
                  strncmp(f->type, t, len - 8 - n) != 0)))
                return -1;
        } else if (strncmp(l, "# HELP ", 7) == 0) {
            size_t n = name_len(l + 7);
            if (n == 0 || (7 + n < len && l[7 + n] != ' '))
                return -1;
        } else if (len > 0 && l[0] != '#' && !sample_ok(l, len)) {
            return -1;
        }
        l += e != NULL ? len + 1 : len;
    }
    return 0;
}

/* Adds text (NUL-terminated, checked) to the merge; source: the label to
 * add to each sample, or NULL. */
static int merge_add(merge_t *m, const char *text, const char *source)
{
    fam_t *cur = NULL;

    for (const char *l = text; *l != '\0';) {
        const char *e = strchr(l, '\n');
        size_t len = e != NULL ? (size_t)(e - l) : strlen(l);
        int help = strncmp(l, "# HELP ", 7) == 0;

        if (help || strncmp(l, "# TYPE ", 7) == 0) {
            size_t n = name_len(l + 7);
            char **field;
            if ((cur = fam_get(m, l + 7, n, 1)) == NULL)
                return ZKR_ENOMEM;
            field = help ? &cur->help : &cur->type;
            if (*field == NULL && len > 8 + n &&
                (*field = strndup(l + 8 + n, len - 8 - n)) == NULL)
                return ZKR_ENOMEM;
        } else if (len > 0 && l[0] != '#') {
            size_t n = name_len(l);
            fam_t *f = sample_fam(m, cur, l, n);
            if (f == NULL)
                return ZKR_ENOMEM;
            fwrite(l, 1, n, f->f);
            if (source != NULL) {
                fputs("{source=\"", f->f);
                label(f->f, source);
                fputs(l[n] == '{' && l[n + 1] != '}' ? "\"," : "\"", f->f);
                if (l[n] != '{')
                    fputc('}', f->f);
                n += l[n] == '{';
            }
            fwrite(l + n, 1, len - n, f->f);
            fputc('\n', f->f);
        }
        l += e != NULL ? len + 1 : len;
    }
    return 0;
}

static int prom_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);

    return d->d_name[0] != '.' && n > 5 &&
           strcmp(d->d_name + n - 5, ".prom") == 0;
}

/* Reads a whole file (NUL-terminated), or NULL. */
static char *slurp(const char *dir, const char *name)
{
    char *path = NULL, *buf = NULL;
    size_t len = 0;
    FILE *in = NULL, *out = NULL;
    char chunk[4096];
    size_t got;
    int ok = 0;

    if (asprintf(&path, "%s/%s", dir, name) >= 0 &&
        (in = fopen(path, "r")) != NULL &&
        (out = open_memstream(&buf, &len)) != NULL) {
        while ((got = fread(chunk, 1, sizeof(chunk), in)) > 0)
            fwrite(chunk, 1, got, out);
        ok = !ferror(in);
    }
    if (out != NULL && fclose(out) != 0)
        ok = 0;
    if (in != NULL)
        fclose(in);
    free(path);
    if (!ok || (buf != NULL && strlen(buf) != len)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Adds the *.prom files of dir, in name order; counts those left out. */
static int merge_textfiles(exporter_t *x, merge_t *m, int *files)
{
    struct dirent **names = NULL;
    int n = scandir(x->textfile_dir, &names, prom_file, alphasort), rc = 0;
    uint64_t bad = 0;

    *files = 0;
    if (n < 0)
        bad++;
    for (int i = 0; i < n; i++) {
        char *text = rc == 0 ? slurp(x->textfile_dir, names[i]->d_name) : NULL;
        size_t nl = strlen(names[i]->d_name) - 5;

        if (rc == 0 && (text == NULL || merge_check(m, text) != 0)) {
            bad++;
        } else if (rc == 0) {
            names[i]->d_name[nl] = '\0';
            rc = merge_add(m, text, names[i]->d_name);
            *files += rc == 0;
        }
        free(text);
        free(names[i]);
    }
    free(names);
    pthread_mutex_lock(&x->mu);
    x->textfile_errors += bad;
    pthread_mutex_unlock(&x->mu);
    return rc;
}

static int merge_write(FILE *f, merge_t *m)
{
    for (int i = 0; i < m->n; i++) {
        fam_t *e = m->v[i];
        if (fclose(e->f) != 0) {
            e->f = NULL;
            return ZKR_ENOMEM;
        }
        e->f = NULL;
        if (e->help != NULL)
            fprintf(f, "# HELP %s %s\n", e->name, e->help);
        if (e->type != NULL)
            fprintf(f, "# TYPE %s %s\n", e->name, e->type);
        if (e->len > 0)
            fwrite(e->buf, 1, e->len, f);
    }
    return 0;
}

/* The whole scrape: own families, own library metrics, textfiles. */
static int render_all(FILE *out, exporter_t *x)
{
    merge_t m = {0};
    zkr_session_t *s;
    char *own = NULL, *lib = NULL;
    size_t len = 0;
    int rc, files = 0;
    FILE *f = open_memstream(&own, &len);

    if (f == NULL)
        return ZKR_ENOMEM;
    render(f, x);
    render_process(f);
    if (fclose(f) != 0) {
        free(own);
        return ZKR_ENOMEM;
    }
    pthread_mutex_lock(&x->mu);
    s = x->s; /* set once; freed only after the HTTP loop */
    pthread_mutex_unlock(&x->mu);
    rc = merge_add(&m, own, NULL);
    if (rc == 0 && s != NULL && (rc = zkr_metrics_text(s, &lib, NULL)) == 0)
        rc = merge_add(&m, lib, NULL);
    if (rc == 0 && x->textfile_dir != NULL)
        rc = merge_textfiles(x, &m, &files);
    if (rc == 0 && x->textfile_dir != NULL) {
        fprintf(out,
                "# HELP zkr_exporter_textfiles Files of --textfile-dir "
                "in this scrape\n# TYPE zkr_exporter_textfiles gauge\n"
                "zkr_exporter_textfiles %d\n",
                files);
        pthread_mutex_lock(&x->mu);
        fprintf(out,
                "# HELP zkr_exporter_textfile_errors_total Files of "
                "--textfile-dir left out (unreadable, not the text format, "
                "or a family's type contradicted)\n# TYPE "
                "zkr_exporter_textfile_errors_total counter\n"
                "zkr_exporter_textfile_errors_total %" PRIu64 "\n",
                x->textfile_errors);
        pthread_mutex_unlock(&x->mu);
    }
    if (rc == 0)
        rc = merge_write(out, &m);
    merge_free(&m);
    zkr_metrics_text_free(lib);
    free(own);
    return rc;
}

/* ---------------------------------------------------- HTTP connections */

/* libmicrohttpd's own timeout is reset by every byte, so a client that
 * trickles a header line every few seconds would hold a connection for
 * ever. The exporter follows every connection (notify_conn()) and shuts
 * the socket of one that waited longer than --header-timeout for a whole
 * request (reap()), or that must make room for a newcomer (make_room());
 * libmicrohttpd then reads the end of the socket and closes the
 * connection. Everything here runs on the main thread, which runs
 * libmicrohttpd's event loop: a socket is shut only while libmicrohttpd
 * has not closed it (it calls notify_conn() before closing), so its
 * descriptor is never another's. */

static xconn_t *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci != NULL ? ci->socket_context : NULL;
}

static void conn_shut(exporter_t *x, xconn_t *c, uint64_t *reason)
{
    shutdown(c->fd, SHUT_RDWR);
    c->closing = 1;
    c->addr->n--;
    x->nconns--;
    (*reason)++;
}

/* 1 when v is to be closed before w: from the address holding more
 * connections, then waiting before being served, then heard from before
 * never read, then waiting longer. */
static int before(const xconn_t *v, const xconn_t *w)
{
    if (v->addr->n != w->addr->n)
        return v->addr->n > w->addr->n;
    if (v->serving != w->serving)
        return w->serving;
    if (v->heard != w->heard)
        return v->heard > w->heard;
    return v->since_ms < w->since_ms;
}

/* The connection to close to make room for c: one from c's address when
 * same_addr, the first by before(). Closing from the address that holds
 * the most keeps a scraper on an address of its own out of reach however
 * fast other addresses open connections. A connection being served is
 * not spared either: a client that pipelines requests and reads their
 * responses slowly would otherwise hold its connections for ever. Within
 * an address: a scraper sends its whole request at once, so it is served
 * as soon as libmicrohttpd first reads it; only a connection never read
 * can be a scraper about to be served, and the newest of those are the
 * last to go. NULL when c is the only connection (of its address). */
static xconn_t *victim(exporter_t *x, const xconn_t *c, int same_addr)
{
    xconn_t *best = NULL;

    for (xconn_t *v = x->conns; v != NULL; v = v->next) {
        if (v == c || v->closing || (same_addr && v->addr != c->addr))
            continue;
        if (best == NULL || before(v, best))
            best = v;
    }
    return best;
}

/* Keeps the limits with newcomer c counted: over a limit, closes the
 * victim, or c itself when there is none. */
static void make_room(exporter_t *x, xconn_t *c)
{
    xconn_t *v;

    if (c->addr->n > x->per_ip) {
        if ((v = victim(x, c, 1)) == NULL) {
            conn_shut(x, c, &x->closed_refused);
            return;
        }
        conn_shut(x, v, &x->closed_evicted);
    }
    if (x->nconns > x->max_conns) {
        if ((v = victim(x, c, 0)) == NULL)
            conn_shut(x, c, &x->closed_refused);
        else
            conn_shut(x, v, &x->closed_evicted);
    }
}

/* A client's address as 16 bytes: IPv6, or IPv4 mapped into IPv6, so that
 * an IPv4 client counts as one address whether the listening socket is
 * IPv4 or dual-stack IPv6. */
static void client_key(const struct sockaddr *sa, unsigned char ip[16])
{
    if (sa->sa_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
               16);
    } else if (sa->sa_family == AF_INET) {
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12,
               &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    }
}

static void conn_started(exporter_t *x, struct MHD_Connection *conn, void **ctx)
{
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    unsigned char ip[16] = {0};
    xaddr_t *a;
    xconn_t *c;

    if (fi == NULL)
        return; /* not a socket: nothing to bound */
    if (ai != NULL && ai->client_addr != NULL)
        client_key(ai->client_addr, ip);
    for (a = x->addrs; a != NULL && memcmp(a->ip, ip, sizeof(ip)) != 0;
         a = a->next)
        ;
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        (a == NULL && (a = calloc(1, sizeof(*a))) == NULL)) {
        free(c);
        shutdown(fi->connect_fd, SHUT_RDWR); /* cannot be followed */
        x->closed_refused++;
        return;
    }
    if (a->refs == 0) {
        memcpy(a->ip, ip, sizeof(ip));
        a->next = x->addrs;
        x->addrs = a;
    }
    a->n++;
    a->refs++;
    c->addr = a;
    c->fd = fi->connect_fd;
    c->since_ms = mono_ms();
    c->prev = x->conns_tail;
    if (x->conns_tail != NULL)
        x->conns_tail->next = c;
    else
        x->conns = c;
    x->conns_tail = c;
    x->nconns++;
    *ctx = c;
    make_room(x, c);
}

static void conn_free(exporter_t *x, xconn_t *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        x->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        x->conns_tail = c->prev;
    if (!c->closing) {
        c->addr->n--;
        x->nconns--;
    }
    if (--c->addr->refs == 0) {
        xaddr_t **pa = &x->addrs;
        while (*pa != c->addr)
            pa = &(*pa)->next;
        *pa = c->addr->next;
        free(c->addr);
    }
    free(c);
}

static void notify_conn(void *cls, struct MHD_Connection *conn, void **ctx,
                        enum MHD_ConnectionNotificationCode code)
{
    exporter_t *x = cls;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_started(x, conn, ctx);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *ctx != NULL) {
        conn_free(x, *ctx);
        *ctx = NULL;
    }
}

/* Called once a request line is read: the connection has been heard. */
static void *uri_read(void *cls, const char *uri, struct MHD_Connection *conn)
{
    xconn_t *c = conn_of(conn);

    (void)cls;
    (void)uri;
    if (c != NULL)
        c->heard = 1;
    return NULL;
}

/* A response sent: the connection waits for its next request, which must
 * arrive whole within --header-timeout too. (Other ends close it.) */
static void request_done(void *cls, struct MHD_Connection *conn, void **req,
                         enum MHD_RequestTerminationCode toe)
{
    xconn_t *c = conn_of(conn);

    (void)cls;
    (void)req;
    if (c != NULL && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        c->serving = 0;
        c->heard = 1;
        c->since_ms = mono_ms();
    }
}

/* Shuts the connections that waited --header-timeout; returns the time in
 * ms until the next one will have, or -1. */
static int64_t reap(exporter_t *x)
{
    int64_t now = mono_ms(), next = -1;

    for (xconn_t *c = x->conns; c != NULL; c = c->next) {
        int64_t due = c->since_ms + x->header_ms;
        if (c->closing || c->serving)
            continue;
        if (due <= now)
            conn_shut(x, c, &x->closed_timeout);
        else if (next < 0 || due - now < next)
            next = due - now;
    }
    return next;
}

/* ---------------------------------------------------------------- HTTP */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
                             char *body, size_t len, const char *type)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    int metrics = strcmp(url, "/metrics") == 0;
    unsigned code =
        metrics || strcmp(url, "/") == 0 ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND;
    static int seen; /* *con_cls once the header was seen */
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    xconn_t *c = conn_of(conn);
    char *body = NULL;
    size_t len = 0;
    int bad = 0;
    FILE *f;

    (void)version;
    (void)upload;
    /* A GET is answered once its request is whole (header, and a body if
     * any, dropped): libmicrohttpd keeps the connection for a next request
     * only then. Another method is answered at once, which closes it. */
    if (get && *con_cls == NULL) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (get && *upload_size != 0) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (c != NULL)
        c->serving = 1; /* its request is whole: no longer a slow one */
    if ((f = open_memstream(&body, &len)) == NULL)
        return MHD_NO;
    if (!get) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        fputs("only GET\n", f);
    } else if (metrics) {
        bad = render_all(f, cls) != 0; /* no partial scrape */
    } else {
        fputs("zkr exporter: see /metrics\n", f);
    }
    if (bad || ferror(f) != 0) {
        fclose(f);
        free(body);
        return MHD_NO;
    }
    if (fclose(f) != 0) {
        free(body);
        return MHD_NO;
    }
    return reply(conn, code, body, len, CONTENT_TYPE);
}

/* --listen: "HOST:PORT" (a host name or an IPv4 address), "[IPV6]:PORT",
 * or ":PORT" (every address). Splits it into host ("" for every address)
 * and port. 0, or -1 when malformed. */
static int split_listen(const char *s, char *host, size_t hsize,
                        const char **port)
{
    const char *colon = strrchr(s, ':'), *h = s;
    size_t hl;
    long n;

    if (colon == NULL || cli_parse_int(colon + 1, 1, 65535, &n) != 0)
        return -1;
    hl = (size_t)(colon - s);
    if (hl > 0 && s[0] == '[') {
        if (hl < 3 || s[hl - 1] != ']')
            return -1;
        h = s + 1;
        hl -= 2;
    } else if (memchr(s, ':', hl) != NULL || memchr(s, ']', hl) != NULL) {
        return -1; /* an IPv6 address wants its brackets */
    }
    if (hl >= hsize || memchr(h, '[', hl) != NULL)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = colon + 1;
    return 0;
}

/* A listening TCP socket bound to ai, or -1 (errno set). An IPv6 socket
 * takes IPv4 clients too (IPV6_V6ONLY off): ":PORT" binds "::" for both. */
static int bind_one(const struct addrinfo *ai)
{
    int one = 1, zero = 0, e;
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
        (ai->ai_family != AF_INET6 ||
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) == 0) &&
        bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        listen(fd, SOMAXCONN) == 0 &&
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0)
        return fd;
    e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* Resolves --listen and binds the first of its addresses that can be
 * bound (for ":PORT": "::", IPv6 and IPv4 together, else "0.0.0.0"). 0,
 * CLI_EXIT_USAGE (malformed, or a host name that does not exist),
 * CLI_EXIT_UNAVAILABLE (the name could not be resolved now) or
 * CLI_EXIT_OSERR (no address could be bound). */
static int open_listen(const char *s, int *fd)
{
    static const int any[] = {AF_INET6, AF_INET};
    char host[256];
    const char *port;
    int rc = 0, e = 0;

    *fd = -1;
    if (split_listen(s, host, sizeof(host), &port) != 0)
        return cli_usage_error("exporter",
                               "invalid --listen '%s' (HOST:PORT, "
                               "[IPV6-ADDRESS]:PORT or :PORT)",
                               s);
    for (int i = 0; i < (host[0] == '\0' ? 2 : 1) && *fd < 0; i++) {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        hints.ai_family = host[0] == '\0' ? any[i] : AF_UNSPEC;
        rc = getaddrinfo(host[0] == '\0' ? NULL : host, port, &hints, &res);
        for (const struct addrinfo *ai = res; rc == 0 && ai != NULL && *fd < 0;
             ai = ai->ai_next)
            if ((*fd = bind_one(ai)) < 0)
                e = errno;
        if (res != NULL)
            freeaddrinfo(res);
    }
    if (*fd >= 0)
        return 0;
    if (host[0] != '\0' && (rc == EAI_NONAME || rc == EAI_FAMILY)) {
        cli_err("cannot listen on %s: unknown host %s", s, host);
        return CLI_EXIT_USAGE;
    }
    if (rc != 0 && e == 0) {
        cli_err("cannot listen on %s: cannot resolve %s (%s)", s, host,
                rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return CLI_EXIT_UNAVAILABLE;
    }
    cli_err("cannot listen on %s: %s", s, strerror(e));
    return CLI_EXIT_OSERR;
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

/* libmicrohttpd's messages: one per connection that a client drops or the
 * exporter closes, a flood under attack; shown with -v only. */
static void http_log(void *cls, const char *fmt, va_list ap)
{
    const exporter_t *x = cls;
    char m[512];

    if (!x->c->verbose)
        return;
    vsnprintf(m, sizeof(m), fmt, ap);
    m[strcspn(m, "\n")] = '\0';
    cli_info(x->c, "http: %s", m);
}

static struct MHD_Daemon *start_http(exporter_t *x)
{
    /* epoll: no FD_SETSIZE bound on descriptors (select() has one), and
     * an event loop the main thread runs (serve()), with the reaping. */
    return MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, x,
        MHD_OPTION_EXTERNAL_LOGGER, http_log, x, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)x->listen_fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)x->max_conns * 2, MHD_OPTION_CONNECTION_TIMEOUT,
        IDLE_TIMEOUT_S, MHD_OPTION_NOTIFY_CONNECTION, notify_conn, x,
        MHD_OPTION_URI_LOG_CALLBACK, uri_read, x, MHD_OPTION_NOTIFY_COMPLETED,
        request_done, x, MHD_OPTION_END);
}

/* libmicrohttpd's event loop with the reaping of slow connections, until
 * SIGINT or SIGTERM (blocked: they wait for sfd). 0, or -1 on an error. */
static int http_loop(exporter_t *x, struct MHD_Daemon *d, int sfd)
{
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    MHD_UNSIGNED_LONG_LONG mt;

    if (di == NULL)
        return -1;
    for (;;) {
        int64_t wait = reap(x);
        struct pollfd pf[2] = {{.fd = di->epoll_fd, .events = POLLIN},
                               {.fd = sfd, .events = POLLIN}};
        if (MHD_get_timeout(d, &mt) == MHD_YES &&
            (wait < 0 || mt < (MHD_UNSIGNED_LONG_LONG)wait))
            wait = mt < 60000 ? (int64_t)mt : 60000;
        if (poll(pf, 2, (int)wait) < 0 && errno != EINTR)
            return -1;
        if (pf[1].revents != 0)
            return 0;
        if (MHD_run(d) != MHD_YES)
            return -1;
    }
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
    if ((d = start_http(x)) == NULL) {
        close(x->listen_fd); /* libmicrohttpd closes it once started */
        cli_err("cannot serve HTTP");
    } else if (http_loop(x, d, sfd) != 0) {
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
    if ((status = open_listen(listen_at, &x.listen_fd)) != 0)
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
