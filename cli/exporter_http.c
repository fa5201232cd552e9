/* zkr exporter: the HTTP side. libmicrohttpd serves /metrics on the main
 * thread, and every connection is followed so that slow or numerous
 * clients cannot keep a scraper out (the bounds: exporter.c's opening
 * comment, and "HTTP connections" below). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exporter.h"

/* libmicrohttpd's time limit between two reads or writes of a connection:
 * bounds a response that its client does not read. */
#define IDLE_TIMEOUT_S 10u
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

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
    c->since_ms = exp_mono_ms();
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
        c->since_ms = exp_mono_ms();
    }
}

/* Shuts the connections that waited --header-timeout; returns the time in
 * ms until the next one will have, or -1. */
static int64_t reap(exporter_t *x)
{
    int64_t now = exp_mono_ms(), next = -1;

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
        bad = exp_render_all(f, cls) != 0; /* no partial scrape */
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
int exp_open_listen(const char *s, int *fd)
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

struct MHD_Daemon *exp_start_http(exporter_t *x)
{
    /* epoll: no FD_SETSIZE bound on descriptors (select() has one), and
     * an event loop the main thread runs (serve(), exporter.c), with the
     * reaping. */
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
int exp_http_loop(exporter_t *x, struct MHD_Daemon *d, int sfd)
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
