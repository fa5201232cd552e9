/* zkr exporter: what its files share. exporter.c: the worker, which
 * learns from ZooKeeper, the options and main (the design, the threads
 * and the locking are described there); exporter_render.c: the text of a
 * scrape; exporter_http.c: the HTTP server and the bounds on its
 * connections. */
#ifndef ZKR_TOOLS_EXPORTER_H
#define ZKR_TOOLS_EXPORTER_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"

struct MHD_Daemon;

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

/* A client address with HTTP connections, and one HTTP connection: only
 * exporter_http.c looks inside. */
typedef struct xaddr xaddr_t;
typedef struct xconn xconn_t;

typedef struct exporter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    const cli_t *c;
    zkr_session_t *s; /* NULL until the worker has opened it */
    const char *down; /* why there is no session yet (a reason label) */
    uint64_t connect_failures;
    int fatal;       /* an exit status the worker stopped the exporter for */
    int listen_fd;   /* bound by parse_args()'s address (exp_open_listen()) */
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

/* CLOCK_MONOTONIC in ms (exporter.c). */
int64_t exp_mono_ms(void);

/* Writes the whole scrape to out: the exporter's families, its session's
 * library metrics and the --textfile-dir files, merged by family; takes
 * x->mu. 0, or an error code, and then out may hold part of a scrape, not
 * to be served (exporter_render.c). */
int exp_render_all(FILE *out, exporter_t *x);

/* Resolves --listen s and binds it into *fd: 0 or an exit status, after
 * saying why (exporter_http.c). */
int exp_open_listen(const char *s, int *fd);
/* Starts libmicrohttpd on x->listen_fd, which it closes when stopped; NULL
 * when it cannot start (the socket is then the caller's to close). */
struct MHD_Daemon *exp_start_http(exporter_t *x);
/* Runs d's event loop until SIGINT or SIGTERM is readable on the
 * signalfd sfd: 0, or -1 on an error. */
int exp_http_loop(exporter_t *x, struct MHD_Daemon *d, int sfd);

#endif /* ZKR_TOOLS_EXPORTER_H */
