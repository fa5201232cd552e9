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
 *   the session is new or reconnected, or the depth changed while every
 *   contender held (only then can a newcomer hold at once: holders are a
 *   prefix of the FIFO queue, and a newcomer behind a waiter waits).
 *   Listings of one path are at least --refresh apart.
 * - Waiters are the depth minus the holders minus the children that are
 *   not contenders (counted at the last listing), so they follow arrivals
 *   and departures without a listing.
 *
 * Threads: ZooKeeper's completion thread runs the watchers (they only mark
 * a path and signal), zkr's event thread runs the session listener, the
 * worker does every ZooKeeper call, libmicrohttpd's thread renders. One
 * mutex guards the state; no ZooKeeper call is made while it is held. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define DEFAULT_LISTEN "127.0.0.1:9723"
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

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
    uint64_t listings, errors;
} xpath_t;

typedef struct exporter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    const cli_t *c;
    zkr_session_t *s;
    xpath_t *paths;
    int npaths;
    int64_t refresh_ms;
    uint64_t losses, suspensions, scrapes;
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
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

/* Runs on zkr's event thread. After SUSPENDED or LOST the values are
 * stale (up 0) until the next listing; a new or resumed session re-reads
 * everything and sets its watches again (a new session has none). */
static void on_state(zkr_session_t *s, zkr_state_t st, void *data)
{
    exporter_t *x = data;

    (void)s;
    pthread_mutex_lock(&x->mu);
    if (st == ZKR_STATE_LOST)
        x->losses++;
    if (st == ZKR_STATE_SUSPENDED)
        x->suspensions++;
    for (int i = 0; i < x->npaths; i++) {
        if (st == ZKR_STATE_SUSPENDED || st == ZKR_STATE_LOST)
            x->paths[i].up = 0;
        else if (st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED)
            x->paths[i].dirty = 1;
    }
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

/* -------------------------------------------------------------- worker */

/* Reads the path's stat and (re)sets the watch on its node. */
static int read_depth(exporter_t *x, xpath_t *p, int *exists, int *depth)
{
    zhandle_t *zh = zkr_session_handle(x->s);
    struct Stat st;
    int rc;

    if (zh == NULL)
        return ZCONNECTIONLOSS;
    rc = zoo_wexists(zh, p->path, watcher, p, &st);
    *exists = rc == ZOK;
    *depth = rc == ZOK ? st.numChildren : 0;
    return rc == ZNONODE ? ZOK : rc;
}

/* Watches the holders' nodes and the first waiter's: their deletion (or,
 * for a semaphore, the touch of a permit holder's node) is what changes
 * the holders. A get, not an exists: on a node already gone it leaves no
 * watch behind (sequential names never come back to fire it). The client
 * keeps one registration per node for this watcher and context, however
 * often it is set. */
static int watch_front(exporter_t *x, xpath_t *p, const zkr_contender_t *v,
                       int n, int holders)
{
    zhandle_t *zh = zkr_session_handle(x->s);
    struct Stat st;
    char byte;
    int rc, len;

    for (int i = 0; i < n && i <= holders; i++) {
        if (zh == NULL)
            return ZCONNECTIONLOSS;
        len = (int)sizeof(byte);
        rc = zoo_wget(zh, v[i].node, watcher, p, &byte, &len, &st);
        if (rc == ZNONODE)
            return ZNONODE; /* already gone: list again */
        if (rc != ZOK)
            return rc;
    }
    return ZOK;
}

/* moved: the queue changed during the listing; it is shown (a busy queue
 * may never stand still for a listing) and listed again, and the count of
 * children that are not contenders is kept from before. */
static void publish_listing(exporter_t *x, xpath_t *p, const zkr_contender_t *v,
                            int n, int holders, int exists, int depth,
                            int moved)
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
    if (!moved)
        p->foreign = depth > n ? depth - n : 0;
    p->dirty |= moved;
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
    int n = 0, holders, ex0, d0, ex1, d1, rc, moved = 0;

    if ((rc = read_depth(x, p, &ex0, &d0)) != ZOK)
        return rc;
    rc = zkr_contenders_list(x->s, p->path, &v, &n);
    pthread_mutex_lock(&x->mu);
    p->listings++;
    p->last_list_ms = mono_ms();
    pthread_mutex_unlock(&x->mu);
    if (rc != 0)
        return rc;
    holders = zkr_contenders_holding(v, n);
    if (holders < 0)
        rc = ZKR_ENOMEM;
    else if ((rc = watch_front(x, p, v, n, holders)) == ZNONODE)
        moved = 1;
    if ((rc == ZOK || moved) && (rc = read_depth(x, p, &ex1, &d1)) == ZOK) {
        moved |= ex0 != ex1 || d0 != d1;
        publish_listing(x, p, v, n, holders, ex1, d1, moved);
    }
    zkr_contenders_free(v, n);
    return rc;
}

/* The stat alone; asks for a listing when the holders may have changed
 * without a watch saying so. */
static int refresh_depth(exporter_t *x, xpath_t *p)
{
    int exists, depth, rc = read_depth(x, p, &exists, &depth);

    pthread_mutex_lock(&x->mu);
    if (rc == ZOK) {
        if (exists != p->exists ||
            (depth != p->depth && p->holders >= p->contenders) ||
            depth < p->holders + p->foreign)
            p->dirty = 1;
        p->exists = exists;
        p->depth = depth;
    }
    pthread_mutex_unlock(&x->mu);
    return rc;
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

static void *worker(void *arg)
{
    exporter_t *x = arg;
    int64_t next_depth = 0;

    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        int64_t now = mono_ms(), wake = next_depth;
        int depth_due = now >= next_depth;
        zkr_state_t st = zkr_session_state(x->s);
        /* While the session is down, nothing is read (a read would only
         * fail): the handle may be replaced meanwhile, and the listener
         * wakes us when the session is back. */
        int npaths = st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED
                         ? x->npaths
                         : 0;

        if (depth_due)
            next_depth = now + x->refresh_ms;
        for (int i = 0; i < npaths && !x->stop; i++) {
            xpath_t *p = &x->paths[i];
            int rc = ZOK, list;

            list = p->dirty && now - p->last_list_ms >= x->refresh_ms;
            if (p->dirty && !list && p->last_list_ms + x->refresh_ms < wake)
                wake = p->last_list_ms + x->refresh_ms;
            if (!list && !depth_due)
                continue;
            if (list)
                p->dirty = 0;
            pthread_mutex_unlock(&x->mu);
            rc = list ? refresh_listing(x, p) : refresh_depth(x, p);
            if (rc != ZOK)
                record_error(x, p, rc);
            pthread_mutex_lock(&x->mu);
            if (p->dirty && p->last_list_ms + x->refresh_ms < wake)
                wake = p->last_list_ms + x->refresh_ms;
        }
        if (x->stop)
            break;
        now = mono_ms();
        if (wake > now) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (wake - now) / 1000;
            ts.tv_nsec += (long)((wake - now) % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&x->cv, &x->mu, &ts);
        }
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
        if (!fn(&x->paths[i], now, &v))
            continue;
        fprintf(f, "%s{path=\"", name);
        label(f, x->paths[i].path);
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
PATH_VALUE(v_exists, p->listed, p->exists)
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

/* The oldest holder's identifier (or leader's), as an info metric. */
static void holder_info(FILE *f, const exporter_t *x, const char *name,
                        int leaders)
{
    for (int i = 0; i < x->npaths; i++) {
        const xpath_t *p = &x->paths[i];
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

static void render_session(FILE *f, exporter_t *x)
{
    zkr_state_t st = zkr_session_state(x->s);

    head(f, "zkr_exporter_session_state", "gauge",
         "1 for the current state of the exporter's own session");
    for (int i = ZKR_STATE_CONNECTING; i <= ZKR_STATE_CLOSED; i++)
        fprintf(f, "zkr_exporter_session_state{state=\"%s\"} %d\n",
                zkr_state_name((zkr_state_t)i), (int)st == i);
    head(f, "zkr_exporter_session_connected", "gauge",
         "1 while the session is CONNECTED or RECONNECTED");
    fprintf(f, "zkr_exporter_session_connected %d\n",
            st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED);
    head(f, "zkr_exporter_session_valid_seconds", "gauge",
         "How long the session's claims stay safe (zkr_session_valid_ms)");
    fprintf(f, "zkr_exporter_session_valid_seconds %.3f\n",
            (double)zkr_session_valid_ms(x->s) / 1000.0);
    head(f, "zkr_exporter_session_timeout_seconds", "gauge",
         "The negotiated session timeout");
    fprintf(f, "zkr_exporter_session_timeout_seconds %.3f\n",
            (double)zkr_session_timeout_ms(x->s) / 1000.0);
    head(f, "zkr_exporter_sessions_total", "counter",
         "ZooKeeper sessions established, the first one included");
    fprintf(f, "zkr_exporter_sessions_total %" PRIu64 "\n",
            zkr_session_counter(x->s, ZKR_COUNTER_SESSIONS));
    head(f, "zkr_exporter_session_losses_total", "counter",
         "Times the session was LOST (expired or past its safe deadline)");
    fprintf(f, "zkr_exporter_session_losses_total %" PRIu64 "\n", x->losses);
    head(f, "zkr_exporter_session_suspensions_total", "counter",
         "Times the connection was lost (SUSPENDED)");
    fprintf(f, "zkr_exporter_session_suspensions_total %" PRIu64 "\n",
            x->suspensions);
    head(f, "zkr_exporter_scrapes_total", "counter",
         "Scrapes of /metrics served");
    fprintf(f, "zkr_exporter_scrapes_total %" PRIu64 "\n", x->scrapes);
}

static void render(FILE *f, exporter_t *x)
{
    pthread_mutex_lock(&x->mu);
    x->scrapes++;
    family(f, x, "zkr_path_up", "gauge",
           "1 when the path's values are current (0: session down, or the "
           "last read failed)",
           v_up, 0);
    family(f, x, "zkr_path_exists", "gauge", "1 when the path's node exists",
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
    family(f, x, "zkr_path_holder_since_seconds", "gauge",
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
    render_session(f, x); /* its counters are under the lock too */
    pthread_mutex_unlock(&x->mu);
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
    char *body = NULL;
    size_t len = 0;
    FILE *f;

    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    if ((f = open_memstream(&body, &len)) == NULL)
        return MHD_NO;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        fputs("only GET\n", f);
    } else if (metrics) {
        render(f, cls);
    } else {
        fputs("zkr exporter: see /metrics\n", f);
    }
    if (ferror(f) != 0) {
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

/* "HOST:PORT" with an IPv4 HOST. 0 or -1. */
static int parse_listen(const char *s, struct sockaddr_in *sa)
{
    const char *colon = strrchr(s, ':');
    char host[64];
    long port;

    if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof(host) ||
        cli_parse_int(colon + 1, 1, 65535, &port) != 0)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------- main */

static int parse_args(int argc, char **argv, struct sockaddr_in *sa,
                      int64_t *refresh_ms)
{
    static const struct option lopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"refresh", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *addr = DEFAULT_LISTEN;
    int opt;

    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+l:r:h", lopts, NULL)) != -1) {
        if (opt == 'l') {
            addr = optarg;
        } else if (opt == 'r') {
            if (cli_parse_seconds(optarg, refresh_ms) != 0 ||
                *refresh_ms < 10 || *refresh_ms > 3600000)
                return cli_usage_error("exporter",
                                       "--refresh wants 0.01 to 3600 seconds");
        } else if (opt == 'h') {
            printf("usage: zkr exporter [--listen HOST:PORT] [--refresh "
                   "SECONDS] PATH...\n"
                   "Serves /metrics (Prometheus text format) for each recipe "
                   "PATH.\n"
                   "  -l, --listen HOST:PORT  IPv4 address and port "
                   "(default " DEFAULT_LISTEN ")\n"
                   "  -r, --refresh SECONDS   stat interval and least time "
                   "between listings\n"
                   "                          of a path (default 1)\n");
            return -1;
        } else {
            return cli_usage_error("exporter",
                                   "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error("exporter", "wants at least one PATH");
    if (parse_listen(addr, sa) != 0)
        return cli_usage_error(
            "exporter", "invalid --listen '%s' (IPv4-ADDRESS:PORT)", addr);
    for (int i = optind; i < argc; i++)
        if (cli_check_args("exporter", argv[i], NULL) != 0)
            return CLI_EXIT_USAGE;
    return 0;
}

/* Serves until SIGINT or SIGTERM. */
static int serve(exporter_t *x, struct sockaddr_in *sa)
{
    struct MHD_Daemon *d;
    pthread_t th;
    sigset_t set;
    int sig;

    if (pthread_create(&th, NULL, worker, x) != 0) {
        cli_err("cannot start a thread");
        return CLI_EXIT_OSERR;
    }
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                         ntohs(sa->sin_port), NULL, NULL, handle, x,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)sa,
                         MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (d == NULL) {
        char a[INET_ADDRSTRLEN];
        cli_err("cannot listen on %s:%u",
                inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a)),
                ntohs(sa->sin_port));
    } else {
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigwait(&set, &sig);
        MHD_stop_daemon(d);
    }
    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(th, NULL);
    return d != NULL ? 0 : CLI_EXIT_OSERR;
}

int cli_exporter(const cli_t *c, int argc, char **argv)
{
    struct sockaddr_in sa;
    exporter_t x = {0};
    sigset_t set;
    int status;

    x.c = c;
    x.refresh_ms = 1000;
    if ((status = parse_args(argc, argv, &sa, &x.refresh_ms)) != 0)
        return status < 0 ? 0 : status;
    /* Every thread started from here on inherits the mask: only sigwait()
     * takes SIGINT and SIGTERM. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    x.npaths = argc - optind;
    x.paths = calloc((size_t)x.npaths, sizeof(xpath_t));
    if (x.paths == NULL)
        return CLI_EXIT_OSERR;
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cv, NULL);
    status = cli_open_session(c, &x.s);
    for (int i = 0; status == 0 && i < x.npaths; i++) {
        x.paths[i].x = &x;
        x.paths[i].path = argv[optind + i];
        x.paths[i].dirty = 1;
    }
    if (status == 0 && zkr_session_add_listener(x.s, on_state, &x) != 0)
        status = CLI_EXIT_OSERR;
    if (status == 0)
        status = serve(&x, &sa);
    if (x.s != NULL) {
        zkr_session_remove_listener(x.s, on_state, &x);
        zkr_session_free(x.s);
    }
    for (int i = 0; i < x.npaths; i++)
        free(x.paths[i].holder_id);
    free(x.paths);
    pthread_cond_destroy(&x.cv);
    pthread_mutex_destroy(&x.mu);
    return status;
}
