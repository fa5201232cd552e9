/* Metrics of a session and of its recipe handles, and their Prometheus
 * text exposition (docs/OBSERVABILITY.md, "Library metrics").
 *
 * Every count lives in the session: one zkr__mset_t per (kind, path) that
 * a handle of the session has used, made when that handle is created and
 * found again through a hash index (the entry and the index's growth are
 * the only allocations), and one zkr__smetrics_t for the session itself. The
 * engine calls the hooks below where it already holds the session mutex,
 * so counting takes no lock of its own and allocates nothing; a hook costs
 * a clock read at most. Writing copies the numbers under the mutex and
 * formats them without it: a slow FILE never stalls the engine. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "engine.h"

/* ----------------------------------------------------------- buckets */

/* Upper bounds of the listings-per-grant histogram. */
static const uint64_t list_bounds[] = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64};
#define N_LIST ((int)(sizeof(list_bounds) / sizeof(list_bounds[0])))

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ------------------------------------------------------------- hooks */

/* FNV-1a of the kind's name and the path (a NUL between them). */
static uint32_t set_hash(const char *kind, const char *path)
{
    uint32_t h = 2166136261u;

    for (const char *p = kind; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h *= 16777619u;
    for (const char *p = path; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

/* Doubles the index (64 buckets at first) once it has as many entries as
 * buckets. If that allocation fails an existing index is kept (longer
 * chains, same answers); with none yet, ZKR_ENOMEM. */
static int index_grow(zkr__msets_t *sm)
{
    size_t n = sm->nindex > 0 ? sm->nindex * 2 : 64;
    zkr__mset_t **ix;

    if (sm->nsets < sm->nindex)
        return 0;
    if ((ix = calloc(n, sizeof(*ix))) == NULL)
        return sm->index != NULL ? 0 : ZKR_ENOMEM;
    for (zkr__mset_t *m = sm->sets; m != NULL; m = m->next) {
        m->hnext = ix[m->hash & (n - 1)];
        ix[m->hash & (n - 1)] = m;
    }
    free(sm->index);
    sm->index = ix;
    sm->nindex = n;
    return 0;
}

int zkr__metrics_attach(zkr__contender_t *c)
{
    zkr__msets_t *sm = &zkr__engine(c->s)->msets;
    const char *kind = c->recipe->kind;
    const char *path = c->mpath != NULL ? c->mpath : c->dir;
    uint32_t h = set_hash(kind, path);
    zkr__mset_t *m = NULL;
    size_t b;

    c->metrics.grant_us = -1;
    if (sm->index != NULL)
        for (m = sm->index[h & (sm->nindex - 1)]; m != NULL; m = m->hnext)
            if (m->hash == h && strcmp(m->kind, kind) == 0 &&
                strcmp(m->path, path) == 0)
                break;
    if (m == NULL) {
        if (index_grow(sm) != 0)
            return ZKR_ENOMEM;
        if ((m = calloc(1, sizeof(*m))) == NULL)
            return ZKR_ENOMEM;
        if ((m->path = strdup(path)) == NULL) {
            free(m);
            return ZKR_ENOMEM;
        }
        m->kind = kind;
        m->leads = (c->recipe->flags & ZKR__R_LEADS) != 0;
        m->hash = h;
        m->next = sm->sets;
        sm->sets = m;
        b = h & (sm->nindex - 1);
        m->hnext = sm->index[b];
        sm->index[b] = m;
        sm->nsets++;
    }
    c->metrics.set = m;
    return 0;
}

void zkr__metrics_attempt(zkr__contender_t *c)
{
    c->metrics.start_us = now_us();
    c->metrics.lists = 0;
}

void zkr__metrics_acquired(zkr__contender_t *c, int rc)
{
    zkr__mset_t *m = c->metrics.set;
    int64_t now = now_us();

    switch (rc) {
    case 0:
        m->acquired++;
        zkr__hist_add(&m->wait, zkr__time_bounds, ZKR__N_TIME,
                      (uint64_t)(now - c->metrics.start_us));
        zkr__hist_add(&m->lists, list_bounds, N_LIST,
                      (uint64_t)c->metrics.lists);
        m->handoffs += c->metrics.lists > 1;
        m->leader_changes++;
        c->metrics.grant_us = now;
        break;
    case ZKR_ETIMEDOUT:
        m->timeouts++;
        break;
    case ZKR_ECANCELED:
        m->cancels++;
        break;
    case ZKR_EBUSY:
        m->busy++;
        break;
    case ZKR_ELOST:
        m->lost_waiting++;
        break;
    default:
        m->errors++;
        break;
    }
}

void zkr__metrics_hold_end(zkr__contender_t *c)
{
    zkr__mset_t *m = c->metrics.set;
    uint64_t d;

    if (m == NULL || c->metrics.grant_us < 0)
        return;
    d = (uint64_t)(now_us() - c->metrics.grant_us);
    zkr__hist_add(&m->hold, zkr__time_bounds, ZKR__N_TIME, d);
    m->held_us += d;
    m->leader_changes++;
    c->metrics.grant_us = -1;
}

void zkr__metrics_lock_state(zkr__contender_t *c, zkr_lock_state_t st)
{
    if (st == ZKR_LOCK_SUSPENDED)
        c->metrics.set->suspended++;
    else if (st == ZKR_LOCK_LOST)
        c->metrics.set->lost++;
}

void zkr__metrics_delay_served(zkr__contender_t *c, int64_t ms)
{
    zkr__mset_t *m = c->metrics.set;

    m->delays++;
    m->delay_us += (uint64_t)(ms > 0 ? ms : 0) * 1000;
}

/* The families a handle of any session has attached a gauge of: what
 * zkr_metrics_value() knows by name besides the engine's (a recipe's
 * families are static, at most a few each). Appended under known_mu (taken with
 * a session mutex held, so never across a fork: fork_prepare holds them all),
 * read without a lock: an entry is written before the count that shows it. */
static pthread_mutex_t known_mu = PTHREAD_MUTEX_INITIALIZER;
static const zkr__gfamily_t *known[32];
static atomic_int nknown;

static void family_known(const zkr__gfamily_t *fam)
{
    int i, n;

    pthread_mutex_lock(&known_mu);
    n = atomic_load_explicit(&nknown, memory_order_relaxed);
    for (i = 0; i < n && known[i] != fam; i++)
        ;
    if (i == n && n < (int)(sizeof(known) / sizeof(known[0]))) {
        known[n] = fam;
        atomic_store_explicit(&nknown, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&known_mu);
}

static int name_known(const char *name)
{
    int n = atomic_load_explicit(&nknown, memory_order_acquire);

    for (int i = 0; i < n; i++)
        if (strcmp(known[i]->name, name) == 0)
            return 1;
    return 0;
}

/* Doubles the gauge index (64 buckets at first) once it has as many
 * entries as buckets; as index_grow(). */
static int gindex_grow(zkr__gsets_t *gs)
{
    size_t n = gs->nindex > 0 ? gs->nindex * 2 : 64;
    zkr__gset_t **ix;

    if (gs->nsets < gs->nindex)
        return 0;
    if ((ix = calloc(n, sizeof(*ix))) == NULL)
        return gs->index != NULL ? 0 : ZKR_ENOMEM;
    for (size_t b = 0; b < gs->nindex; b++)
        for (zkr__gset_t *e = gs->index[b], *nx; e != NULL; e = nx) {
            nx = e->hnext;
            e->hnext = ix[e->hash & (n - 1)];
            ix[e->hash & (n - 1)] = e;
        }
    free(gs->index);
    gs->index = ix;
    gs->nindex = n;
    return 0;
}

int zkr__gauge_attach(zkr_session_t *s, zkr__gauge_t *g,
                      const zkr__gfamily_t *fam, const char *path,
                      int64_t (*value)(zkr__gauge_t *g, int64_t now))
{
    zkr__gsets_t *gs = &zkr__engine(s)->gsets;
    uint32_t h = set_hash(fam->name, path);
    zkr__gset_t *e = NULL;
    size_t b;

    if (gs->index != NULL)
        for (e = gs->index[h & (gs->nindex - 1)]; e != NULL; e = e->hnext)
            if (e->fam == fam && strcmp(e->path, path) == 0)
                break;
    if (e == NULL) {
        if (gindex_grow(gs) != 0)
            return ZKR_ENOMEM;
        if ((e = calloc(1, sizeof(*e))) == NULL)
            return ZKR_ENOMEM;
        if ((e->path = strdup(path)) == NULL) {
            free(e);
            return ZKR_ENOMEM;
        }
        e->fam = fam;
        e->hash = h;
        b = h & (gs->nindex - 1);
        e->hnext = gs->index[b];
        gs->index[b] = e;
        gs->nsets++;
        family_known(fam);
    }
    g->value = value;
    g->set = e;
    g->prev = NULL;
    g->next = e->gauges;
    if (e->gauges != NULL)
        e->gauges->prev = g;
    e->gauges = g;
    return 0;
}

void zkr__gauge_detach(zkr_session_t *s, zkr__gauge_t *g)
{
    zkr__gsets_t *gs = &zkr__engine(s)->gsets;
    zkr__gset_t *e = g->set, **pp;

    if (e == NULL)
        return;
    if (g->prev != NULL)
        g->prev->next = g->next;
    else
        e->gauges = g->next;
    if (g->next != NULL)
        g->next->prev = g->prev;
    g->set = NULL;
    g->prev = g->next = NULL;
    if (e->gauges != NULL)
        return;
    /* Its last handle: the entry goes. */
    for (pp = &gs->index[e->hash & (gs->nindex - 1)]; *pp != e;
         pp = &(*pp)->hnext)
        ;
    *pp = e->hnext;
    gs->nsets--;
    free(e->path);
    free(e);
}

void zkr__metrics_free(zkr_session_t *s)
{
    zkr__msets_t *sm = &zkr__engine(s)->msets;

    /* Every handle detached its gauges before the session could be freed:
     * no entry is left, only the index. */
    free(zkr__engine(s)->gsets.index);
    memset(&zkr__engine(s)->gsets, 0, sizeof(zkr__engine(s)->gsets));

    while (sm->sets != NULL) {
        zkr__mset_t *m = sm->sets;
        sm->sets = m->next;
        free(m->path);
        free(m);
    }
    free(sm->index);
    sm->index = NULL;
    sm->nindex = sm->nsets = 0;
}

/* ------------------------------------------------------ the families */

/* One metric family: where its value is, in a row (recipe families) or
 * in the snapshot (session families). Every value is 64 bits. */
typedef struct family {
    const char *name, *help;
    char type;  /* 'c' counter, 'g' gauge, 'h' histogram */
    char scope; /* 's' session, 'r' every recipe row, 'l' the rows of
                   recipes whose grant is to lead (ZKR__R_LEADS) */
    char unit;  /* 'n' a number, 'u' microseconds, 'm' milliseconds */
    size_t off;
    const uint64_t *bounds; /* histograms */
    int nb;
} family_t;

#define ROW(f) offsetof(zkr__mrow_t, f)
#define SNAP(f) offsetof(zkr__msnap_t, f)
#define CNT(i) (offsetof(zkr__msnap_t, counters) + (i) * sizeof(uint64_t))
#define TIMEB zkr__time_bounds, ZKR__N_TIME

static const family_t families[] = {
    {"zkr_acquisitions_total", "Acquires that were granted.", 'c', 'r', 'n',
     ROW(m.acquired), NULL, 0},
    {"zkr_acquire_timeouts_total",
     "Acquires that ended with ZKR_ETIMEDOUT (the timeout passed).", 'c', 'r',
     'n', ROW(m.timeouts), NULL, 0},
    {"zkr_acquire_cancels_total",
     "Acquires that ended with ZKR_ECANCELED (canceled, or the handle freed).",
     'c', 'r', 'n', ROW(m.cancels), NULL, 0},
    {"zkr_acquire_busy_total",
     "Tries (timeout 0) that ended with ZKR_EBUSY: held by another.", 'c', 'r',
     'n', ROW(m.busy), NULL, 0},
    {"zkr_acquire_lost_total",
     "Acquires that ended with ZKR_ELOST: session lost or node deleted while "
     "waiting.",
     'c', 'r', 'n', ROW(m.lost_waiting), NULL, 0},
    {"zkr_acquire_errors_total",
     "Acquires that ended with any other error (ZNOAUTH, ZKR_ELIMIT, ...).",
     'c', 'r', 'n', ROW(m.errors), NULL, 0},
    {"zkr_wait_seconds",
     "Time from the start of an acquire attempt to its grant, granted "
     "acquires only.",
     'h', 'r', 'u', ROW(m.wait), TIMEB},
    {"zkr_hold_seconds",
     "Time from a grant to its release call or its loss, ended grants only.",
     'h', 'r', 'u', ROW(m.hold), TIMEB},
    {"zkr_grant_listings",
     "Queue listings (getChildren) an attempt issued before its grant.", 'h',
     'r', 'n', ROW(m.lists), list_bounds, N_LIST},
    {"zkr_handoffs_total",
     "Grants that took more than one listing: the contender waited for a "
     "predecessor and was handed the grant.",
     'c', 'r', 'n', ROW(m.handoffs), NULL, 0},
    {"zkr_delays_total",
     "Lock-delays served to their end: grants that waited because a node "
     "before went without a clean release.",
     'c', 'r', 'n', ROW(m.delays), NULL, 0},
    {"zkr_delay_seconds_total",
     "Time those lock-delays lasted, from the observation to the end.", 'c',
     'r', 'u', ROW(m.delay_us), NULL, 0},
    {"zkr_suspended_total",
     "Grants that became SUSPENDED (the connection was lost while held).", 'c',
     'r', 'n', ROW(m.suspended), NULL, 0},
    {"zkr_lost_total",
     "Grants that were LOST (session lost, or node deleted by another).", 'c',
     'r', 'n', ROW(m.lost), NULL, 0},
    {"zkr_handles", "Handles of this session on the path now.", 'g', 'r', 'n',
     ROW(handles), NULL, 0},
    {"zkr_holding", "Of them, holding a grant now (HELD or SUSPENDED).", 'g',
     'r', 'n', ROW(holding), NULL, 0},
    {"zkr_waiting", "Of them, acquiring now.", 'g', 'r', 'n', ROW(waiting),
     NULL, 0},
    {"zkr_leader_changes_total",
     "Times this session's candidates became leader or stopped leading.", 'c',
     'l', 'n', ROW(m.leader_changes), NULL, 0},
    {"zkr_leader_seconds_total",
     "Time this session's candidates led, the current leadership included.",
     'c', 'l', 'u', ROW(leader_us), NULL, 0},
    {"zkr_sessions_total",
     "ZooKeeper sessions established (the first one included).", 'c', 's', 'n',
     CNT(ZKR_COUNTER_SESSIONS), NULL, 0},
    {"zkr_session_suspensions_total",
     "Times the session became SUSPENDED (connection lost).", 'c', 's', 'n',
     SNAP(m.suspensions), NULL, 0},
    {"zkr_session_reconnects_total",
     "Times the session became RECONNECTED (same session, connection back).",
     'c', 's', 'n', SNAP(m.reconnects), NULL, 0},
    {"zkr_session_losses_total",
     "Times the session became LOST (expired, or past the safe deadline).", 'c',
     's', 'n', SNAP(m.losses), NULL, 0},
    {"zkr_release_records_refused_total",
     "Releases whose release record the directory refused (ZNOAUTH): the "
     "node was deleted without it, a death to delayed waiters.",
     'c', 's', 'n', SNAP(m.records_refused), NULL, 0},
    {"zkr_session_valid_seconds",
     "What is left of the safe deadline now (zkr_session_valid_ms()).", 'g',
     's', 'm', SNAP(valid_ms), NULL, 0},
    {"zkr_session_reconnect_margin_seconds",
     "What was left of the safe deadline at the last RECONNECTED.", 'g', 's',
     'm', SNAP(m.reconnect_margin_ms), NULL, 0},
    {"zkr_session_timeout_seconds", "The negotiated session timeout.", 'g', 's',
     'm', SNAP(timeout_ms), NULL, 0},
    {"zkr_session_heartbeat_last_seconds",
     "Round trip of the last answered heartbeat (a sync through the leader).",
     'g', 's', 'm', SNAP(m.hb_last_ms), NULL, 0},
    {"zkr_session_heartbeat_seconds",
     "Round trips of answered heartbeats (millisecond resolution).", 'h', 's',
     'u', SNAP(m.hb), TIMEB},
    {"zkr_session_watch_events_total",
     "Node watch notifications that woke a waiter or an observer.", 'c', 's',
     'n', CNT(ZKR_COUNTER_WATCH_EVENTS), NULL, 0},
    {"zkr_session_holder_events_total",
     "Notifications about a contender's own node.", 'c', 's', 'n',
     CNT(ZKR_COUNTER_HOLDER_EVENTS), NULL, 0},
    {"zkr_session_creates_total", "Contender nodes created.", 'c', 's', 'n',
     CNT(ZKR_COUNTER_CREATES), NULL, 0},
    {"zkr_session_deletes_total", "Contender nodes deleted by zkr.", 'c', 's',
     'n', CNT(ZKR_COUNTER_DELETES), NULL, 0},
    {"zkr_session_lists_total", "Queue listings (getChildren) issued.", 'c',
     's', 'n', CNT(ZKR_COUNTER_LISTS), NULL, 0},
    {"zkr_session_recoveries_total",
     "Creates whose outcome was unknown and had to be recovered.", 'c', 's',
     'n', CNT(ZKR_COUNTER_RECOVERIES), NULL, 0},
};
#define N_FAMILIES ((int)(sizeof(families) / sizeof(families[0])))

static int64_t value_at(const void *base, size_t off)
{
    int64_t v;

    memcpy(&v, (const char *)base + off, sizeof(v));
    return v;
}

/* A value in the family's unit, as Prometheus reads it. */
static double scaled(const family_t *fam, uint64_t v)
{
    return fam->unit == 'u'   ? (double)v / 1e6
           : fam->unit == 'm' ? (double)v / 1e3
                              : (double)v;
}

/* ----------------------------------------------------------- writing */

/* A label value: backslash, double quote and line feed escaped, as the
 * text format requires. */
static void put_label(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '"')
            fputs("\\\"", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* "{path=\"...\",kind=\"...\"" (no closing brace) or "" for a session. */
static void put_labels(FILE *f, const zkr__mrow_t *row, const char *le)
{
    if (row == NULL && le == NULL)
        return;
    fputc('{', f);
    if (row != NULL) {
        fputs("path=\"", f);
        put_label(f, row->m.path);
        fprintf(f, "\",kind=\"%s\"", row->m.kind);
    }
    if (le != NULL)
        fprintf(f, "%sle=\"%s\"", row != NULL ? "," : "", le);
    fputc('}', f);
}

static void put_number(FILE *f, const family_t *fam, uint64_t v)
{
    if (fam->unit == 'n')
        fprintf(f, " %" PRIu64 "\n", v);
    else
        fprintf(f, " %.6f\n", scaled(fam, v));
}

static void put_hist(FILE *f, const family_t *fam, const zkr__mrow_t *row,
                     const zkr__hist_t *h)
{
    uint64_t cum = 0;
    char le[32];

    for (int i = 0; i <= fam->nb; i++) {
        cum += h->counts[i];
        if (i < fam->nb)
            snprintf(le, sizeof(le), "%g", scaled(fam, fam->bounds[i]));
        else
            strcpy(le, "+Inf");
        fprintf(f, "%s_bucket", fam->name);
        put_labels(f, row, le);
        fprintf(f, " %" PRIu64 "\n", cum);
    }
    fprintf(f, "%s_sum", fam->name);
    put_labels(f, row, NULL);
    put_number(f, fam, h->sum);
    fprintf(f, "%s_count", fam->name);
    put_labels(f, row, NULL);
    fprintf(f, " %" PRIu64 "\n", h->n);
}

static void put_sample(FILE *f, const family_t *fam, const zkr__mrow_t *row,
                       const void *base)
{
    int64_t v;

    if (fam->type == 'h') {
        put_hist(f, fam, row,
                 (const zkr__hist_t *)((const char *)base + fam->off));
        return;
    }
    if ((v = value_at(base, fam->off)) < 0)
        return; /* not measured yet */
    fputs(fam->name, f);
    put_labels(f, row, NULL);
    put_number(f, fam, (uint64_t)v);
}

static void put_family(FILE *f, const family_t *fam, const zkr__msnap_t *snap)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name,
            fam->type == 'c'   ? "counter"
            : fam->type == 'g' ? "gauge"
                               : "histogram");
    if (fam->scope == 's') {
        put_sample(f, fam, NULL, snap);
        return;
    }
    for (int i = 0; i < snap->nrows; i++) {
        const zkr__mrow_t *row = &snap->rows[i];
        if (fam->scope == 'r' || row->m.leads)
            put_sample(f, fam, row, row);
    }
}

int zkr__metrics_format(FILE *f, const zkr__msnap_t *snap)
{
    fputs("# HELP zkr_session_state The session's state: 1 for the current "
          "one.\n# TYPE zkr_session_state gauge\n",
          f);
    for (int st = ZKR_STATE_CONNECTING; st <= ZKR_STATE_CLOSED; st++)
        fprintf(f, "zkr_session_state{state=\"%s\"} %d\n",
                zkr_state_name((zkr_state_t)st), st == (int)snap->state);
    for (int i = 0; i < N_FAMILIES; i++)
        put_family(f, &families[i], snap);
    /* The recipe gauges, by family name (sorted so): one HELP and TYPE
     * each. */
    for (int i = 0; i < snap->ngrows; i++) {
        const struct zkr__grow *g = &snap->grows[i];

        if (i == 0 || strcmp(g->fam->name, snap->grows[i - 1].fam->name) != 0)
            fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", g->fam->name,
                    g->fam->help, g->fam->name);
        fputs(g->fam->name, f);
        fputs("{path=\"", f);
        put_label(f, g->path);
        fprintf(f, "\",kind=\"%s\"}", g->fam->kind);
        if (g->fam->unit == 'm')
            fprintf(f, " %.3f\n", (double)g->v / 1e3);
        else
            fprintf(f, " %" PRId64 "\n", g->v);
    }
    return ferror(f) ? ZKR_ESYS : 0;
}

/* --------------------------------------------------------- snapshots */

/* Recipe gauge rows: by family name, kind and path. */
static int grow_cmp(const void *a, const void *b)
{
    const struct zkr__grow *x = a, *y = b;
    int c = strcmp(x->fam->name, y->fam->name);

    if (c == 0)
        c = strcmp(x->fam->kind, y->fam->kind);
    return c != 0 ? c : strcmp(x->path, y->path);
}

static void grows_free(struct zkr__grow *rows, int n)
{
    for (int i = 0; i < n && rows != NULL; i++)
        free(rows[i].path);
    free(rows);
}

/* The recipe gauges, mutex held: 0, or ZKR_ENOMEM. */
static int snapshot_gauges(zkr_session_t *s, zkr__msnap_t *out)
{
    zkr__gsets_t *gs = &zkr__engine(s)->gsets;
    int64_t now = zkr__now_ms();
    int n = 0;

    if (gs->nsets == 0)
        return 0;
    if ((out->grows = calloc(gs->nsets, sizeof(*out->grows))) == NULL)
        return ZKR_ENOMEM;
    for (size_t b = 0; b < gs->nindex; b++)
        for (zkr__gset_t *e = gs->index[b]; e != NULL; e = e->hnext) {
            struct zkr__grow *row = &out->grows[n];

            if ((row->path = strdup(e->path)) == NULL) {
                grows_free(out->grows, n);
                out->grows = NULL;
                return ZKR_ENOMEM;
            }
            n++;
            row->fam = e->fam;
            for (zkr__gauge_t *g = e->gauges; g != NULL; g = g->next) {
                int64_t v = g->value(g, now);

                if (v < 0)
                    continue;
                if (e->fam->merge == 's')
                    row->v += v;
                else if (v > row->v)
                    row->v = v;
            }
        }
    out->ngrows = n;
    return 0;
}

static int snapshot(zkr_session_t *s, zkr__msnap_t *out)
{
    zkr__mset_t *m;
    int n = 0;
    int64_t now;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&s->mu);
    out->valid_ms = zkr__session_valid_locked(s);
    now = now_us();
    for (m = zkr__engine(s)->msets.sets; m != NULL; m = m->next)
        n++;
    if (n > 0 && (out->rows = calloc((size_t)n, sizeof(*out->rows))) == NULL) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_ENOMEM;
    }
    /* Oldest first: the list is newest first. */
    out->nrows = n;
    for (m = zkr__engine(s)->msets.sets; m != NULL; m = m->next) {
        zkr__mrow_t *row = &out->rows[--n];
        m->row = n;
        row->m = *m;
        row->m.next = row->m.hnext = NULL;
        row->leader_us = (int64_t)m->held_us;
    }
    ZKR__EACH_CONTENDER (c, s) {
        zkr__mrow_t *row = &out->rows[c->metrics.set->row];
        row->handles++;
        row->holding += c->pub == ZKR_LOCK_HELD || c->pub == ZKR_LOCK_SUSPENDED;
        row->waiting +=
            c->pub == ZKR_LOCK_ACQUIRING || c->pub == ZKR_LOCK_DELAYED;
        if (c->metrics.grant_us >= 0)
            row->leader_us += now - c->metrics.grant_us;
    }
    out->m = s->metrics;
    memcpy(out->counters, s->counters, sizeof(out->counters));
    out->state = s->state;
    out->timeout_ms = s->timeout;
    if (snapshot_gauges(s, out) != 0) {
        pthread_mutex_unlock(&s->mu);
        free(out->rows);
        return ZKR_ENOMEM;
    }
    pthread_mutex_unlock(&s->mu);
    if (out->ngrows > 1)
        qsort(out->grows, (size_t)out->ngrows, sizeof(*out->grows), grow_cmp);
    return 0;
}

static void snapshot_free(zkr__msnap_t *snap)
{
    free(snap->rows);
    grows_free(snap->grows, snap->ngrows);
}

/* ------------------------------------------------------------ public */

int zkr_metrics_write(zkr_session_t *s, FILE *f)
{
    zkr__msnap_t snap;
    int rc;

    if (s == NULL || f == NULL)
        return ZBADARGUMENTS;
    if ((rc = snapshot(s, &snap)) != 0)
        return rc;
    rc = zkr__metrics_format(f, &snap);
    snapshot_free(&snap);
    return rc;
}

int zkr_metrics_text(zkr_session_t *s, char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f;
    int rc;

    if (s == NULL || out == NULL)
        return ZBADARGUMENTS;
    if ((f = open_memstream(&buf, &n)) == NULL)
        return ZKR_ENOMEM;
    rc = zkr_metrics_write(s, f);
    if (fclose(f) != 0 && rc == 0)
        rc = ZKR_ENOMEM;
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    if (len != NULL)
        *len = n;
    return 0;
}

void zkr_metrics_text_free(char *text)
{
    free(text);
}

/* The family of name, and which part of a histogram ("_count", "_sum")
 * it names: 1, 2; 0 for a counter or gauge. NULL when unknown. */
static const family_t *find_family(const char *name, int *part)
{
    size_t len = strlen(name);

    for (int i = 0; i < N_FAMILIES; i++) {
        const family_t *fam = &families[i];
        size_t fl = strlen(fam->name);
        if (fam->type != 'h' && strcmp(name, fam->name) == 0) {
            *part = 0;
            return fam;
        }
        if (fam->type == 'h' && len > fl && strncmp(name, fam->name, fl) == 0) {
            *part = strcmp(name + fl, "_count") == 0 ? 1
                    : strcmp(name + fl, "_sum") == 0 ? 2
                                                     : -1;
            if (*part > 0)
                return fam;
        }
    }
    return NULL;
}

/* 0, or ZNONODE for a gauge not measured yet. */
static int read_family(const family_t *fam, int part, const void *base,
                       double *out)
{
    const zkr__hist_t *h;

    if (part == 0) {
        int64_t v = value_at(base, fam->off);
        if (v < 0)
            return ZNONODE;
        *out = scaled(fam, (uint64_t)v);
        return 0;
    }
    h = (const zkr__hist_t *)((const char *)base + fam->off);
    *out = part == 1 ? (double)h->n : scaled(fam, h->sum);
    return 0;
}

/* A recipe gauge's value: ZBADARGUMENTS for a name no handle in this
 * process has had a gauge of (or kind or path missing), ZNONODE when no
 * handle of this session of that kind and path is attached. */
static int gauge_value(zkr_session_t *s, const char *name, const char *kind,
                       const char *path, double *out)
{
    zkr__msnap_t snap;
    int rc;

    if (kind == NULL || path == NULL || !name_known(name))
        return ZBADARGUMENTS;
    if ((rc = snapshot(s, &snap)) != 0)
        return rc;
    rc = ZNONODE;
    for (int i = 0; i < snap.ngrows; i++) {
        const struct zkr__grow *g = &snap.grows[i];

        if (strcmp(g->fam->name, name) == 0 &&
            strcmp(g->fam->kind, kind) == 0 && strcmp(g->path, path) == 0) {
            *out = g->fam->unit == 'm' ? (double)g->v / 1e3 : (double)g->v;
            rc = 0;
        }
    }
    snapshot_free(&snap);
    return rc;
}

int zkr_metrics_value(zkr_session_t *s, const char *name, const char *kind,
                      const char *path, double *out)
{
    const family_t *fam;
    zkr__msnap_t snap;
    int part, rc;

    if (s == NULL || name == NULL || out == NULL)
        return ZBADARGUMENTS;
    if ((fam = find_family(name, &part)) == NULL)
        return gauge_value(s, name, kind, path, out);
    if ((fam->scope == 's') != (kind == NULL && path == NULL) ||
        (fam->scope != 's' && (kind == NULL || path == NULL)))
        return ZBADARGUMENTS;
    if ((rc = snapshot(s, &snap)) != 0)
        return rc;
    if (fam->scope == 's') {
        rc = read_family(fam, part, &snap, out);
    } else {
        rc = ZNONODE;
        for (int i = 0; i < snap.nrows; i++) {
            const zkr__mrow_t *row = &snap.rows[i];
            if (strcmp(row->m.kind, kind) == 0 &&
                strcmp(row->m.path, path) == 0 &&
                (fam->scope == 'r' || row->m.leads)) {
                rc = read_family(fam, part, row, out);
            }
        }
    }
    snapshot_free(&snap);
    return rc;
}
