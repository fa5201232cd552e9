/* zkr exporter: the scrape's text. The exporter's own families, from what
 * the worker last learned (read under x->mu, no ZooKeeper call), and the
 * process_* families; then, merged by family with them, the session's
 * library metrics and the --textfile-dir files. */
#define _GNU_SOURCE
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "exporter.h"

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
int exp_render_all(FILE *out, exporter_t *x)
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
