/* bench/zkr-bench.c: zkr's side of the benchmarks in docs/BENCHMARKS.md,
 * and the floor: the plain C client doing what a lock cannot avoid.
 *
 *   zkr-bench [-s HOSTS] [-i zkr|raw] [-t SESSION_TIMEOUT_MS] [-m DIR]
 *             MODE ARGS...
 *
 *   uncontended CYCLES      one session, acquire+release on one lock
 *   multi K CYCLES          one session, acquire+release of a set of K
 *                           uncontended locks (zkr_multilock_*)
 *   contended K SECONDS     K sessions loop acquire+release on one lock
 *   herd W ROUNDS           one holder, W waiters; the holder releases,
 *                           the grantee becomes holder, the old holder
 *                           queues again at the back
 *   scale N                 one session acquires N distinct locks
 *   semaphore P K SECONDS   K sessions loop on a semaphore of P permits
 *   election K ROUNDS       K candidates; the leader leaves and rejoins
 *   floor ROUNDS            (raw only) the notify and handoff floors: B
 *                           watches A's node, A deletes it, B writes
 *   many N W                one session acquires and releases N distinct
 *                           locks, at most W in flight (async API)
 *   qput N W                work queue: N puts, W in flight
 *   qtake K N SECS          work queue: K consumers take+ack N items
 *   qdrain N K SECS         the same (the drain time of N items)
 *   qbatch K N SECS B       qtake, each consumer taking B items at a time
 *                           (zkr_workq_take_batch; zkr only)
 *   qnotify W PUTS          work queue: notifications per put, W idle
 *                           consumers
 *   candidate PATH MS       one election candidate (session timeout MS),
 *                           leading until killed or told to resign
 *                           (bench/failover.py runs K of them)
 *
 * Every mode prints one line of `key=value` fields, starting with
 * `impl=... mode=...`; bench/peers/ print the same lines for Curator and
 * kazoo, and bench/run puts them side by side. The raw implementation
 * (`-i raw`) is the cost floor: zoo_create(ephemeral sequential) +
 * zoo_delete per cycle (pipelined W deep for many), for scale one
 * ephemeral node per "lock", and the floor mode's notification chain; it
 * has no contended, herd, semaphore or election mode (it is not a lock).
 *
 * -m DIR (contended and semaphore): every second, and once at the end,
 * each contender's session writes its library metrics (zkr_metrics_write)
 * to DIR/zkr-bench-<i>.prom, through a temporary file and a rename, so
 * that `zkr exporter --textfile-dir DIR` never serves half a file.
 *
 * Each contender of the contended, herd, semaphore and election modes has
 * its own session (its own ZooKeeper connection); they run as threads of
 * this one process so that an in-process check can see two holders at
 * once. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

static int session_timeout_ms = 10000; /* -t */

static const char *hosts = "127.0.0.1:2181";
static const char *impl = "zkr";
static char root[64]; /* per-run directory: runs never see each other */
static const char *metrics_dir; /* -m */

/* ------------------------------------------------------------ helpers */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "zkr-bench: %s: %s\n", what, zkr_strerror(rc));
    exit(1);
}

/* A growable list of samples in microseconds. */
typedef struct {
    double *v;
    size_t n, cap;
} samples_t;

static void samples_add(samples_t *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof(double));
        if (s->v == NULL)
            die("samples", ZKR_ENOMEM);
    }
    s->v[s->n++] = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile; sorts the samples. 0 when there are none. */
static double percentile(samples_t *s, double p)
{
    size_t i;

    if (s->n == 0)
        return 0;
    qsort(s->v, s->n, sizeof(double), cmp_double);
    i = (size_t)(p / 100.0 * (double)s->n + 0.5);
    if (i > 0)
        i--;
    return s->v[i < s->n ? i : s->n - 1];
}

static zkr_session_t *open_session(void)
{
    zkr_session_t *s;
    int rc = zkr_session_open(&s, hosts, session_timeout_ms, NULL);

    if (rc != 0)
        die(hosts, rc);
    return s;
}

static void ensure_node(zhandle_t *zh, const char *path)
{
    int rc = zoo_create(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);

    if (rc != ZOK && rc != ZNODEEXISTS)
        die(path, rc);
}

/* Resident set size of this process, in KiB (from /proc/self/status). */
static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* ------------------------------------------------------- uncontended */

static int raw_cycle(zhandle_t *zh, const char *prefix)
{
    char path[512];
    int rc = zoo_create(zh, prefix, "bench", 5, &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_EPHEMERAL_SEQUENTIAL, path, sizeof(path));

    return rc != ZOK ? rc : zoo_delete(zh, path, -1);
}

static int zkr_cycle(zkr_lock_t *l)
{
    int rc = zkr_lock_acquire(l, -1);

    return rc != 0 ? rc : zkr_lock_release(l);
}

static void run_uncontended(int cycles)
{
    zkr_session_t *s = open_session();
    zkr_lock_t *l = NULL;
    char dir[128], prefix[160];
    samples_t lat = {0};
    int64_t t0, t;
    int raw = strcmp(impl, "raw") == 0, rc;

    snprintf(dir, sizeof(dir), "%s/uncontended", root);
    snprintf(prefix, sizeof(prefix), "%s/_c_x-lock-", dir);
    ensure_node(zkr_session_handle(s), dir);
    if (!raw && (rc = zkr_lock_new(&l, s, dir, "bench", NULL)) != 0)
        die("zkr_lock_new", rc);
    for (int i = 0; i < cycles / 10 + 10; i++) /* warm up */
        if ((rc = raw ? raw_cycle(zkr_session_handle(s), prefix)
                      : zkr_cycle(l)) != 0)
            die("warm-up cycle", rc);
    t0 = now_ns();
    for (int i = 0; i < cycles; i++) {
        t = now_ns();
        rc = raw ? raw_cycle(zkr_session_handle(s), prefix) : zkr_cycle(l);
        if (rc != 0)
            die("cycle", rc);
        samples_add(&lat, (double)(now_ns() - t) / 1e3);
    }
    t = now_ns() - t0;
    printf("impl=%s mode=uncontended cycles=%d us_per_cycle=%.1f p50_us=%.1f "
           "p99_us=%.1f\n",
           impl, cycles, (double)t / 1e3 / cycles, percentile(&lat, 50),
           percentile(&lat, 99));
    zkr_lock_free(l);
    zkr_session_free(s);
    free(lat.v);
}

/* One session acquires and releases a set of K uncontended locks (K
 * distinct paths), CYCLES times: the multi-lock's cost over its members'. */
static void run_multi(int k, int cycles)
{
    zkr_session_t *s = open_session();
    zkr_lock_t *l[64];
    zkr_multilock_t *m = NULL;
    char dir[160];
    samples_t lat = {0};
    int64_t t0, t;
    int rc;

    if (k < 1 || k > 64)
        die("multi K", ZBADARGUMENTS);
    for (int i = 0; i < k; i++) {
        snprintf(dir, sizeof(dir), "%s/multi-%02d", root, i);
        if ((rc = zkr_lock_new(&l[i], s, dir, "bench", NULL)) != 0)
            die("zkr_lock_new", rc);
    }
    if ((rc = zkr_multilock_new(&m, l, k)) != 0)
        die("zkr_multilock_new", rc);
    for (int i = 0; i < cycles / 10 + 10; i++) /* warm up */
        if ((rc = zkr_multilock_acquire(m, -1)) != 0 ||
            (rc = zkr_multilock_release(m)) != 0)
            die("warm-up cycle", rc);
    t0 = now_ns();
    for (int i = 0; i < cycles; i++) {
        t = now_ns();
        if ((rc = zkr_multilock_acquire(m, -1)) != 0 ||
            (rc = zkr_multilock_release(m)) != 0)
            die("cycle", rc);
        samples_add(&lat, (double)(now_ns() - t) / 1e3);
    }
    t = now_ns() - t0;
    printf("impl=%s mode=multi k=%d cycles=%d us_per_cycle=%.1f p50_us=%.1f "
           "p99_us=%.1f\n",
           impl, k, cycles, (double)t / 1e3 / cycles, percentile(&lat, 50),
           percentile(&lat, 99));
    zkr_multilock_free(m);
    for (int i = 0; i < k; i++)
        zkr_lock_free(l[i]);
    zkr_session_free(s);
    free(lat.v);
}

/* --------------------------------------------- contended and semaphore */

/* State shared by the contenders of one run. The overlap check: a grant
 * adds one to `holding` and a release takes one away before calling
 * zkr_lock_release(); more than `permits` at once is a violation. The
 * handoff is the time from the moment a holder starts its release to the
 * next grant. */
static struct {
    int permits; /* 1 for the lock */
    int seconds;
    pthread_barrier_t ready;
    atomic_int holding;
    atomic_long violations;
    atomic_llong last_release; /* ns, 0 before the first release */
    int64_t start, until;
    pthread_mutex_t mu;
    samples_t handoff;
} run;

typedef struct {
    zkr_session_t *s;
    zkr_lock_t *l;
    long grants;
} contender_t;

static void *contender_main(void *arg)
{
    contender_t *c = arg;
    int rc;

    pthread_barrier_wait(&run.ready);
    for (;;) {
        int64_t t, rel;
        if (now_ns() >= run.until)
            break;
        if ((rc = zkr_lock_acquire(c->l, -1)) != 0)
            die("acquire", rc);
        t = now_ns();
        if (atomic_fetch_add(&run.holding, 1) >= run.permits)
            atomic_fetch_add(&run.violations, 1);
        rel = atomic_load(&run.last_release);
        if (t < run.until) {
            c->grants++;
            if (rel != 0 && run.permits == 1) {
                pthread_mutex_lock(&run.mu);
                samples_add(&run.handoff, (double)(t - rel) / 1e3);
                pthread_mutex_unlock(&run.mu);
            }
        }
        atomic_fetch_sub(&run.holding, 1);
        atomic_store(&run.last_release, now_ns());
        if ((rc = zkr_lock_release(c->l)) != 0)
            die("release", rc);
    }
    return NULL;
}

/* The library metrics of session i into metrics_dir, atomically. */
static void write_metrics(zkr_session_t *s, int i)
{
    char tmp[4096], dst[4096];
    FILE *f;
    int rc;

    snprintf(tmp, sizeof(tmp), "%s/.zkr-bench-%d.prom.tmp", metrics_dir, i);
    snprintf(dst, sizeof(dst), "%s/zkr-bench-%d.prom", metrics_dir, i);
    if ((f = fopen(tmp, "w")) == NULL) {
        perror(tmp);
        exit(1);
    }
    rc = zkr_metrics_write(s, f);
    if (fclose(f) != 0 && rc == 0)
        rc = ZKR_ENOMEM;
    if (rc != 0)
        die("zkr_metrics_write", rc);
    if (rename(tmp, dst) != 0) {
        perror(dst);
        exit(1);
    }
}

/* Until the run's end: the contenders' metrics every second. */
static void write_metrics_loop(contender_t *cs, int k)
{
    struct timespec ts = {1, 0};

    while (metrics_dir != NULL && now_ns() < run.until) {
        nanosleep(&ts, NULL);
        for (int i = 0; i < k; i++)
            write_metrics(cs[i].s, i);
    }
}

static void run_contenders(const char *mode, int permits, int k, int seconds)
{
    contender_t *cs = calloc((size_t)k, sizeof(*cs));
    pthread_t *th = calloc((size_t)k, sizeof(*th));
    char dir[128];
    long total = 0, lo = -1, hi = 0;
    uint64_t lists = 0;
    int rc;

    if (cs == NULL || th == NULL)
        die("calloc", ZKR_ENOMEM);
    run.permits = permits;
    run.seconds = seconds;
    pthread_mutex_init(&run.mu, NULL);
    pthread_barrier_init(&run.ready, NULL, (unsigned)k + 1);
    snprintf(dir, sizeof(dir), "%s/%s", root, mode);
    for (int i = 0; i < k; i++) {
        cs[i].s = open_session();
        rc = strcmp(mode, "semaphore") == 0
                 ? zkr_semaphore_new(&cs[i].l, cs[i].s, dir, permits, "bench",
                                     NULL)
                 : zkr_lock_new(&cs[i].l, cs[i].s, dir, "bench", NULL);
        if (rc != 0)
            die("new", rc);
    }
    run.start = now_ns();
    run.until = run.start + (int64_t)seconds * 1000000000;
    for (int i = 0; i < k; i++)
        pthread_create(&th[i], NULL, contender_main, &cs[i]);
    pthread_barrier_wait(&run.ready);
    write_metrics_loop(cs, k);
    for (int i = 0; i < k; i++) {
        pthread_join(th[i], NULL);
        if (metrics_dir != NULL)
            write_metrics(cs[i].s, i);
        total += cs[i].grants;
        lo = lo < 0 || cs[i].grants < lo ? cs[i].grants : lo;
        hi = cs[i].grants > hi ? cs[i].grants : hi;
        lists += zkr_session_counter(cs[i].s, ZKR_COUNTER_LISTS);
    }
    if (strcmp(mode, "semaphore") == 0)
        printf("impl=%s mode=semaphore permits=%d contenders=%d grants=%ld "
               "grants_per_s=%.0f min_per_client=%ld max_per_client=%ld "
               "violations=%ld\n",
               impl, permits, k, total, (double)total / seconds, lo, hi,
               atomic_load(&run.violations));
    else
        printf("impl=%s mode=contended contenders=%d grants=%ld "
               "grants_per_s=%.0f min_per_client=%ld max_per_client=%ld "
               "violations=%ld handoff_p50_us=%.0f handoff_p99_us=%.0f "
               "lists_per_grant=%.2f\n",
               impl, k, total, (double)total / seconds, lo, hi,
               atomic_load(&run.violations), percentile(&run.handoff, 50),
               percentile(&run.handoff, 99),
               total > 0 ? (double)lists / (double)total : 0.0);
    for (int i = 0; i < k; i++) {
        zkr_lock_free(cs[i].l);
        zkr_session_free(cs[i].s);
    }
    free(cs);
    free(th);
}

/* -------------------------------------------------------------- herd */

/* W waiters queue behind one holder. Each round the main thread releases
 * the holder's lock; the grant completion (on the grantee's event thread)
 * records the time and hands the holder role over; the old holder queues
 * again at the back, so W stay waiting. Watch notifications are the sum
 * over all sessions of ZKR_COUNTER_WATCH_EVENTS, per release. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int granted; /* index of the latest grantee, -1 while none */
    int64_t granted_at;
    int failed;
} herd = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, -1, 0, 0};

/* Records the grant to contender `who` (or the failure rc) at time t. */
static void herd_record(int rc, int who, int64_t t)
{
    pthread_mutex_lock(&herd.mu);
    if (rc != 0)
        herd.failed = rc;
    else {
        herd.granted = who;
        herd.granted_at = t;
    }
    pthread_cond_broadcast(&herd.cv);
    pthread_mutex_unlock(&herd.mu);
}

static void herd_granted(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    herd_record(rc, (int)(intptr_t)data, now_ns());
}

static int herd_wait_grant(void)
{
    int g;

    pthread_mutex_lock(&herd.mu);
    while (herd.granted < 0 && herd.failed == 0)
        pthread_cond_wait(&herd.cv, &herd.mu);
    if (herd.failed != 0)
        die("herd acquire", herd.failed);
    g = herd.granted;
    herd.granted = -1;
    pthread_mutex_unlock(&herd.mu);
    return g;
}

static uint64_t watch_events(zkr_session_t **ss, int n)
{
    uint64_t sum = 0;

    for (int i = 0; i < n; i++)
        sum += zkr_session_counter(ss[i], ZKR_COUNTER_WATCH_EVENTS);
    return sum;
}

/* Waits until the lock directory holds `expect` contender nodes, so that
 * queue order is the order of our calls. A plain getChildren: listing
 * through zkr_lock_contenders() would read every node. */
static void wait_queued(zkr_session_t *s, const char *dir, int expect)
{
    struct String_vector v;

    for (int tries = 0; tries < 10000; tries++) {
        if (zoo_get_children(zkr_session_handle(s), dir, 0, &v) == ZOK) {
            int n = v.count;
            deallocate_String_vector(&v);
            if (n >= expect)
                return;
        }
        usleep(1000);
    }
    die("waiters did not queue", ZKR_ETIMEDOUT);
}

static void run_herd(int w, int rounds)
{
    int n = w + 1, holder, rc;
    zkr_session_t **ss = calloc((size_t)n, sizeof(*ss));
    zkr_lock_t **ls = calloc((size_t)n, sizeof(*ls));
    samples_t hand = {0};
    uint64_t e0, e1;
    char dir[128];

    if (ss == NULL || ls == NULL)
        die("calloc", ZKR_ENOMEM);
    snprintf(dir, sizeof(dir), "%s/herd-%d", root, w);
    for (int i = 0; i < n; i++) {
        ss[i] = open_session();
        if ((rc = zkr_lock_new(&ls[i], ss[i], dir, "bench", NULL)) != 0)
            die("zkr_lock_new", rc);
    }
    if ((rc = zkr_lock_acquire(ls[0], -1)) != 0)
        die("acquire", rc);
    holder = 0;
    for (int i = 1; i < n; i++) {
        if ((rc = zkr_lock_acquire_async(ls[i], -1, herd_granted,
                                         (void *)(intptr_t)i)) != 0)
            die("acquire_async", rc);
        if (i % 50 == 0 || i == n - 1)
            wait_queued(ss[0], dir, i + 1);
    }
    usleep(200000); /* let every waiter set its watch */
    e0 = watch_events(ss, n);
    for (int r = 0; r < rounds; r++) {
        int64_t t0 = now_ns();
        int g;
        if ((rc = zkr_lock_release(ls[holder])) != 0)
            die("release", rc);
        g = herd_wait_grant();
        samples_add(&hand, (double)(herd.granted_at - t0) / 1e3);
        if ((rc = zkr_lock_acquire_async(ls[holder], -1, herd_granted,
                                         (void *)(intptr_t)holder)) != 0)
            die("acquire_async", rc);
        wait_queued(ss[0], dir, n);
        holder = g;
    }
    usleep(200000); /* late notifications count too */
    e1 = watch_events(ss, n);
    printf("impl=%s mode=herd waiters=%d releases=%d watch_events_per_release="
           "%.2f handoff_p50_us=%.0f handoff_p99_us=%.0f\n",
           impl, w, rounds, (double)(e1 - e0) / rounds, percentile(&hand, 50),
           percentile(&hand, 99));
    for (int i = 0; i < n; i++)
        zkr_lock_free(ls[i]); /* cancels the waiters */
    for (int i = 0; i < n; i++)
        zkr_session_free(ss[i]);
    free(ss);
    free(ls);
    free(hand.v);
}

/* ------------------------------------------------------------- scale */

/* One session acquires N distinct locks and holds them all; memory per
 * held lock is the growth of this process's resident set divided by N
 * (client side only: the server's own data is not counted). */
static void run_scale(int n)
{
    zkr_session_t *s = open_session();
    zhandle_t *zh = zkr_session_handle(s);
    zkr_lock_t **ls = calloc((size_t)n, sizeof(*ls));
    char path[256], made[512];
    int raw = strcmp(impl, "raw") == 0, rc;
    long rss0;
    int64_t t0, t;

    if (ls == NULL)
        die("calloc", ZKR_ENOMEM);
    snprintf(path, sizeof(path), "%s/scale", root);
    ensure_node(zh, path);
    rss0 = rss_kib();
    t0 = now_ns();
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/scale/l%06d", root, i);
        if (raw) {
            /* What any lock needs at least: its directory, then its
             * ephemeral node. */
            ensure_node(zh, path);
            strcat(path, "/_c_x-lock-");
            rc = zoo_create(zh, path, "bench", 5, &ZOO_OPEN_ACL_UNSAFE,
                            ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof(made));
        } else if ((rc = zkr_lock_new(&ls[i], s, path, "bench", NULL)) == 0) {
            rc = zkr_lock_acquire(ls[i], -1);
        }
        if (rc != 0)
            die("scale acquire", rc);
    }
    t = now_ns() - t0;
    printf("impl=%s mode=scale locks=%d acquires_per_s=%.0f "
           "bytes_per_lock=%.0f\n",
           impl, n, n / ((double)t / 1e9),
           (double)(rss_kib() - rss0) * 1024.0 / n);
    for (int i = 0; i < n; i++)
        zkr_lock_free(ls[i]);
    zkr_session_free(s);
    free(ls);
}

/* ------------------------------------------------------------- floor */

/* The physical floor of a handoff, with no recipe (impl raw only). Two
 * sessions: B watches (exists) a node of A's; A deletes it (t0, just
 * before the request is sent); B's watcher runs (t1: the notify floor is
 * t1 - t0, one committed write plus its notification); from the watcher B
 * deletes a node of its own, as a grantee hands on (t2, its completion:
 * the handoff floor is t2 - t0). One round at a time. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    zhandle_t *b;
    char mine[256]; /* B's node, deleted from the watcher */
    int64_t t1, t2;
    int rc; /* of B's delete; 1 while pending */
} fl = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, "", 0, 0, 1};

static void floor_written(int rc, const void *data)
{
    int64_t t = now_ns();

    (void)data;
    pthread_mutex_lock(&fl.mu);
    fl.t2 = t;
    fl.rc = rc;
    pthread_cond_signal(&fl.cv);
    pthread_mutex_unlock(&fl.mu);
}

static void floor_notified(zhandle_t *zh, int type, int state, const char *path,
                           void *ctx)
{
    int64_t t = now_ns();
    int rc;

    (void)zh, (void)state, (void)path, (void)ctx;
    if (type != ZOO_DELETED_EVENT)
        return;
    fl.t1 = t;
    if ((rc = zoo_adelete(fl.b, fl.mine, -1, floor_written, NULL)) != ZOK)
        floor_written(rc, NULL);
}

static void floor_sent(int rc, const void *data)
{
    (void)data;
    if (rc != ZOK)
        die("floor delete", rc);
}

static void run_floor(int rounds)
{
    zkr_session_t *sa = open_session(), *sb = open_session();
    zhandle_t *a = zkr_session_handle(sa);
    samples_t notify = {0}, hand = {0};
    char dir[128], theirs[192];
    struct Stat st;
    int rc;

    fl.b = zkr_session_handle(sb);
    snprintf(dir, sizeof(dir), "%s/floor", root);
    snprintf(theirs, sizeof(theirs), "%s/a", dir);
    snprintf(fl.mine, sizeof(fl.mine), "%s/b", dir);
    ensure_node(a, dir);
    for (int r = 0; r < rounds + rounds / 10 + 10; r++) {
        int64_t t0;
        if ((rc = zoo_create(a, theirs, "", 0, &ZOO_OPEN_ACL_UNSAFE,
                             ZOO_EPHEMERAL, NULL, 0)) != ZOK ||
            (rc = zoo_create(fl.b, fl.mine, "", 0, &ZOO_OPEN_ACL_UNSAFE,
                             ZOO_EPHEMERAL, NULL, 0)) != ZOK ||
            (rc = zoo_wexists(fl.b, theirs, floor_notified, NULL, &st)) != ZOK)
            die("floor setup", rc);
        pthread_mutex_lock(&fl.mu);
        fl.rc = 1;
        t0 = now_ns();
        if ((rc = zoo_adelete(a, theirs, -1, floor_sent, NULL)) != ZOK)
            die("floor delete", rc);
        while (fl.rc == 1)
            pthread_cond_wait(&fl.cv, &fl.mu);
        pthread_mutex_unlock(&fl.mu);
        if (fl.rc != ZOK)
            die("floor write", fl.rc);
        if (r >= rounds / 10 + 10) { /* after the warm-up rounds */
            samples_add(&notify, (double)(fl.t1 - t0) / 1e3);
            samples_add(&hand, (double)(fl.t2 - t0) / 1e3);
        }
    }
    printf("impl=%s mode=floor rounds=%d notify_p50_us=%.0f "
           "notify_p99_us=%.0f handoff_floor_p50_us=%.0f "
           "handoff_floor_p99_us=%.0f\n",
           impl, rounds, percentile(&notify, 50), percentile(&notify, 99),
           percentile(&hand, 50), percentile(&hand, 99));
    zkr_session_free(sa);
    zkr_session_free(sb);
    free(notify.v);
    free(hand.v);
}

/* -------------------------------------------------------------- many */

/* One session acquires and releases N distinct uncontended locks, at most
 * W in flight, from completions only (zkr: zkr_lock_acquire_async, then
 * zkr_lock_release_async, then zkr_lock_free and the next lock; raw: the
 * floor, zoo_acreate(ephemeral sequential) then zoo_adelete). The N lock
 * directories are made before the clock starts, for every
 * implementation: the figure is the cost of a lock, not of its
 * directory. zkr then holds N locks at once (W 256) and prints the
 * process's resident set and open descriptors while it holds them. */
typedef struct {
    zkr_lock_t *l;
    int i;
} slot_t;

static struct {
    zkr_session_t *s;
    zhandle_t *zh;
    int n, hold;
    atomic_int next;
    zkr_lock_t **held; /* hold phase: every lock, kept */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active; /* slots still working */
    int failed;
} many = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void many_start(slot_t *sl);

/* Slot sl is done with its lock (or failed with rc): on to the next. */
static void many_next(slot_t *sl, int rc)
{
    if (rc == 0) {
        many_start(sl);
        return;
    }
    pthread_mutex_lock(&many.mu);
    many.failed = rc;
    many.active--;
    pthread_cond_broadcast(&many.cv);
    pthread_mutex_unlock(&many.mu);
}

static void many_path(char *buf, size_t size, int i)
{
    snprintf(buf, size, "%s/many/l%06d", root, i);
}

static void raw_deleted(int rc, const void *data)
{
    many_next((slot_t *)data, rc);
}

static void raw_created(int rc, const char *value, const void *data)
{
    if (rc == ZOK)
        rc = zoo_adelete(many.zh, value, -1, raw_deleted, data);
    if (rc != ZOK)
        many_next((slot_t *)data, rc);
}

static void zkr_released(int rc, zkr_lock_t *l, void *data)
{
    zkr_lock_free(l);
    many_next(data, rc);
}

static void zkr_acquired(int rc, zkr_lock_t *l, void *data)
{
    if (rc == 0 && many.hold)
        many_next(data, 0);
    else if (rc != 0 ||
             (rc = zkr_lock_release_async(l, zkr_released, data)) != 0)
        many_next(data, rc);
}

static void many_start(slot_t *sl)
{
    char path[256];
    int i = atomic_fetch_add(&many.next, 1), rc;

    if (i >= many.n) {
        pthread_mutex_lock(&many.mu);
        many.active--;
        pthread_cond_broadcast(&many.cv);
        pthread_mutex_unlock(&many.mu);
        return;
    }
    many_path(path, sizeof(path), i);
    if (strcmp(impl, "raw") == 0) {
        strcat(path, "/_c_x-lock-");
        rc = zoo_acreate(many.zh, path, "bench", 5, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_EPHEMERAL_SEQUENTIAL, raw_created, sl);
    } else if ((rc = zkr_lock_new(&sl->l, many.s, path, "bench", NULL)) == 0) {
        if (many.hold)
            many.held[i] = sl->l;
        rc = zkr_lock_acquire_async(sl->l, -1, zkr_acquired, sl);
    }
    if (rc != 0)
        many_next(sl, rc);
}

/* Until every slot has finished (many.active 0); dies on a failure. */
static void many_wait(void)
{
    pthread_mutex_lock(&many.mu);
    while (many.active > 0)
        pthread_cond_wait(&many.cv, &many.mu);
    pthread_mutex_unlock(&many.mu);
    if (many.failed != 0)
        die("many", many.failed);
}

/* Runs the N locks through W slots; returns the seconds it took. */
static double many_run(int w)
{
    slot_t *slots = calloc((size_t)w, sizeof(*slots));
    int64_t t0 = now_ns();

    if (slots == NULL)
        die("calloc", ZKR_ENOMEM);
    atomic_store(&many.next, 0);
    many.active = w;
    for (int i = 0; i < w; i++)
        many_start(&slots[i]);
    many_wait();
    free(slots);
    return (double)(now_ns() - t0) / 1e9;
}

static void many_dirs_made(int rc, const char *value, const void *data)
{
    (void)value;
    (void)data;
    if (rc != ZOK && rc != ZNODEEXISTS)
        die("many directory", rc);
}

/* The N directories, pipelined 256 at a time (before the clock starts). */
static void many_dirs(void)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/many", root);
    ensure_node(many.zh, path);
    for (int i = 0; i < many.n; i++) {
        int rc;
        many_path(path, sizeof(path), i);
        rc = zoo_acreate(many.zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
                         many_dirs_made, NULL);
        if (rc != ZOK)
            die("many directory", rc);
        if (i % 256 == 255 || i == many.n - 1) {
            /* A sync round trip: the server answers in order. */
            struct Stat st;
            if ((rc = zoo_exists(many.zh, path, 0, &st)) != ZOK)
                die("many directory", rc);
        }
    }
}

/* Open descriptors of this process (from /proc/self/fd). */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* not the one reading the directory */
}

static void many_released(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    many_next(data, rc);
}

/* Requests the server has received from session sid so far: the
 * "recved" count of its connection in the four-letter word `cons`, asked
 * of every server of -s (loopback addresses); -1 if none knows it. */
static long server_recved(int64_t sid)
{
    char list[512], want[40], *save = NULL;
    long got = -1;

    snprintf(list, sizeof(list), "%s", hosts);
    snprintf(want, sizeof(want), "sid=0x%llx,", (unsigned long long)sid);
    for (char *h = strtok_r(list, ",", &save); h != NULL && got < 0;
         h = strtok_r(NULL, ",", &save)) {
        struct sockaddr_in a = {0};
        char *colon = strrchr(h, ':'), *buf, *hit, *r;
        size_t len = 0, cap = 1 << 20;
        ssize_t k;
        int fd;

        if (colon == NULL)
            continue;
        *colon = '\0';
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, h, &a.sin_addr) != 1 ||
            (fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
            continue;
        if ((buf = malloc(cap + 1)) == NULL ||
            connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
            write(fd, "cons", 4) != 4) {
            free(buf);
            close(fd);
            continue;
        }
        while (len < cap && (k = read(fd, buf + len, cap - len)) > 0)
            len += (size_t)k;
        close(fd);
        buf[len] = '\0';
        if ((hit = strstr(buf, want)) != NULL) {
            /* "(queued=0,recved=N,sent=M,sid=0x...," */
            for (r = hit; r > buf && *r != '('; r--)
                ;
            if ((r = strstr(r, "recved=")) != NULL && r < hit)
                got = atol(r + 7);
        }
        free(buf);
    }
    return got;
}

/* Holds N locks at once; prints RSS, descriptors and
 * (ZKR_BENCH_HOLD_S seconds, default 0: not measured) the requests the
 * session sends meanwhile: its heartbeat traffic while holding; releases them.
 */
static void many_hold(void)
{
    slot_t *slots = calloc((size_t)many.n, sizeof(*slots));
    long rss0 = rss_kib(), rss;
    const char *env = getenv("ZKR_BENCH_HOLD_S");
    int fds, hold_s = env != NULL ? atoi(env) : 0;
    double hold_rps = -1;

    many.held = calloc((size_t)many.n, sizeof(*many.held));
    if (many.held == NULL || slots == NULL)
        die("calloc", ZKR_ENOMEM);
    many.hold = 1;
    many_run(256);
    rss = rss_kib();
    fds = open_fds();
    if (hold_s > 0) {
        int64_t sid = zoo_client_id(many.zh)->client_id;
        long r0, r1;

        sleep(1); /* the holders' self-watches (50 ms after each grant) */
        r0 = server_recved(sid);
        sleep((unsigned)hold_s);
        r1 = server_recved(sid);
        hold_rps = r0 >= 0 && r1 >= r0 ? (double)(r1 - r0) / hold_s : -1;
    }
    /* Release all, pipelined: one slot per lock, each finishing at once. */
    atomic_store(&many.next, many.n);
    many.active = many.n;
    for (int i = 0; i < many.n; i++) {
        int rc = zkr_lock_release_async(many.held[i], many_released, &slots[i]);
        if (rc != 0)
            die("release_async", rc);
    }
    many_wait();
    for (int i = 0; i < many.n; i++)
        zkr_lock_free(many.held[i]);
    printf(" held=%d held_rss_kib=%ld held_bytes_per_lock=%.0f held_fds=%d",
           many.n, rss, (double)(rss - rss0) * 1024.0 / many.n, fds);
    if (hold_s > 0)
        printf(" held_s=%d held_requests_per_s=%.2f", hold_s, hold_rps);
    free(many.held);
    free(slots);
}

static void run_many(int n, int w)
{
    double secs;

    many.s = open_session();
    many.zh = zkr_session_handle(many.s);
    many.n = n;
    many_dirs();
    secs = many_run(w);
    printf("impl=%s mode=many n=%d w=%d locks_per_s=%.0f", impl, n, w,
           n / secs);
    if (strcmp(impl, "zkr") == 0)
        many_hold();
    printf("\n");
    zkr_session_free(many.s);
}

/* ------------------------------------------------------------- queue */

/* The work queue (issue 17), against Curator's DistributedQueue with a
 * lock path and kazoo's LockingQueue (bench/peers/):
 *
 *   qput N W           one session puts N items, W in flight (W 1: the
 *                      synchronous put; else zkr_workq_put_async)
 *   qtake K N SECS     the queue is filled with N items (not timed), then K
 *                      consumers, each its own session, take+ack until it
 *                      is empty; gives up after SECS
 *   qdrain N K SECS    the same, named for the drain time of N items
 *   qnotify W PUTS     W idle consumers wait in take; one producer puts
 *                      PUTS items one at a time, each taken and acked
 *                      before the next: watch notifications per put, the
 *                      sum over every session of ZKR_COUNTER_WATCH_EVENTS
 *
 * Every item's payload is its index ("item-%07d"): the consumers mark
 * each index they ack, so that a loss or a second completion is printed
 * (dups=, and drained= below items= when the run gave up). The client's
 * CPU over the consuming phase alone (getrusage of this process) is
 * printed per 10,000 items as cpu_s_per_10k. */
#define QITEM_LEN 12

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;           /* items expected */
    int done;        /* acks that succeeded */
    int in_flight;   /* puts of the fill or qput not yet completed */
    int next;        /* next item index to put */
    int failed;      /* first error of an asynchronous put */
    int stop;        /* consumers end their loop */
    int batch;       /* items per take (qbatch), else 1 */
    int64_t done_at; /* when the last item was acked */
    unsigned char *seen;
    long dups, stale, bad;
    zkr_workq_t *producer;
} wq = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void queue_path(char *buf, size_t size, const char *mode)
{
    snprintf(buf, size, "%s/%s", root, mode);
}

static double cpu_now_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void qput_start(void);

static void qput_done(int rc, const char *item_id, void *data)
{
    (void)item_id;
    (void)data;
    pthread_mutex_lock(&wq.mu);
    wq.in_flight--;
    if (rc != 0 && wq.failed == 0)
        wq.failed = rc;
    pthread_cond_broadcast(&wq.cv);
    pthread_mutex_unlock(&wq.mu);
    if (rc == 0)
        qput_start();
}

/* Puts the next item if any is left (W slots: each completion starts the
 * next put, from the event thread, which put_async allows). */
static void qput_start(void)
{
    char item[32]; /* "item-%07d": QITEM_LEN bytes below 10,000,000 */
    int i, rc;

    pthread_mutex_lock(&wq.mu);
    if (wq.failed != 0 || wq.next >= wq.n) {
        pthread_mutex_unlock(&wq.mu);
        return;
    }
    i = wq.next++;
    wq.in_flight++;
    pthread_mutex_unlock(&wq.mu);
    snprintf(item, sizeof(item), "item-%07d", i);
    rc = zkr_workq_put_async(wq.producer, item, QITEM_LEN,
                             ZKR_WORKQ_LEVEL_DEFAULT, qput_done, NULL);
    if (rc != 0)
        qput_done(rc, NULL, NULL);
}

/* Puts items first..n-1 through q, w in flight; returns the seconds. */
static double qput_run(zkr_workq_t *q, int first, int n, int w)
{
    int64_t t0 = now_ns();
    int rc;

    wq.producer = q;
    wq.n = n;
    wq.next = first;
    if (w == 1) {
        char item[32]; /* "item-%07d": QITEM_LEN bytes below 10,000,000 */
        for (int i = first; i < n; i++) {
            snprintf(item, sizeof(item), "item-%07d", i);
            if ((rc = zkr_workq_put(q, item, QITEM_LEN, ZKR_WORKQ_LEVEL_DEFAULT,
                                    NULL, 0)) != 0)
                die("zkr_workq_put", rc);
        }
        return (double)(now_ns() - t0) / 1e9;
    }
    for (int i = 0; i < w; i++)
        qput_start();
    pthread_mutex_lock(&wq.mu);
    while (wq.in_flight > 0 || (wq.failed == 0 && wq.next < wq.n))
        pthread_cond_wait(&wq.cv, &wq.mu);
    pthread_mutex_unlock(&wq.mu);
    if (wq.failed != 0)
        die("zkr_workq_put_async", wq.failed);
    return (double)(now_ns() - t0) / 1e9;
}

static void run_qput(int n, int w)
{
    zkr_session_t *s = open_session();
    zkr_workq_t *q;
    char path[128];
    double secs;
    int rc;

    queue_path(path, sizeof(path), "qput");
    if ((rc = zkr_workq_new(&q, s, path, "bench", NULL)) != 0)
        die("zkr_workq_new", rc);
    qput_run(q, 0, n / 10 + 10, 1); /* warm up; makes the queue's nodes */
    secs = qput_run(q, 0, n, w);
    printf("impl=%s mode=qput n=%d w=%d items_per_s=%.0f\n", impl, n, w,
           n / secs);
    zkr_workq_free(q);
    zkr_session_free(s);
}

/* Marks item `it` acked; counts a second completion. */
static void qmark(zkr_item_t *it)
{
    size_t len;
    const char *d = zkr_item_data(it, &len);
    char buf[QITEM_LEN + 1];
    int i = -1;

    if (len == QITEM_LEN) { /* sscanf wants a string: copy it */
        memcpy(buf, d, len);
        buf[len] = '\0';
    }
    if (len == QITEM_LEN && sscanf(buf, "item-%7d", &i) == 1 && i >= 0 &&
        i < wq.n) {
        if (wq.seen[i]++)
            wq.dups++;
    } else {
        wq.bad++;
    }
}

typedef struct {
    zkr_session_t *s;
    zkr_workq_t *q;
    pthread_t th;
    atomic_int exited;
} consumer_t;

/* One ack of a batch's, sent with the others (consumer_main). */
typedef struct {
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *left;
    int rc;
} ack_slot_t;

static void ack_done(int rc, zkr_item_t *it, void *data)
{
    ack_slot_t *a = data;

    (void)it;
    pthread_mutex_lock(a->mu);
    a->rc = rc;
    if (--*a->left == 0)
        pthread_cond_signal(a->cv);
    pthread_mutex_unlock(a->mu);
}

/* Takes (wq.batch items at a time with zkr_workq_take_batch, if more
 * than 1) and acks each, until told to stop (zkr_workq_cancel ends the
 * take). A batch's acks go out together (zkr_item_ack_async), as from a
 * consumer that runs a batch's jobs side by side; one item is acked with
 * zkr_item_ack. */
static void *consumer_main(void *arg)
{
    consumer_t *c = arg;
    zkr_item_t *its[ZKR_WORKQ_BATCH_MAX];
    ack_slot_t acks[ZKR_WORKQ_BATCH_MAX];
    pthread_mutex_t amu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t acv = PTHREAD_COND_INITIALIZER;
    int rc, n, left;

    for (;;) {
        pthread_mutex_lock(&wq.mu);
        rc = wq.stop;
        pthread_mutex_unlock(&wq.mu);
        if (rc)
            break;
        n = 1;
        if (wq.batch > 1)
            rc = zkr_workq_take_batch(c->q, wq.batch, -1, its, &n);
        else
            rc = zkr_workq_take(c->q, -1, &its[0]);
        if (rc == ZKR_ECANCELED)
            continue;
        if (rc != 0)
            die("zkr_workq_take", rc);
        left = n;
        for (int i = 0; i < n; i++) {
            acks[i] = (ack_slot_t){&amu, &acv, &left, 0};
            if (n == 1)
                acks[i].rc = zkr_item_ack(its[i]);
            else if ((rc = zkr_item_ack_async(its[i], ack_done, &acks[i])) != 0)
                die("zkr_item_ack_async", rc);
        }
        pthread_mutex_lock(&amu);
        while (n > 1 && left > 0)
            pthread_cond_wait(&acv, &amu);
        pthread_mutex_unlock(&amu);
        for (int i = 0; i < n; i++) {
            rc = acks[i].rc;
            pthread_mutex_lock(&wq.mu);
            if (rc == 0) {
                qmark(its[i]);
                if (++wq.done == wq.n)
                    wq.done_at = now_ns();
                pthread_cond_broadcast(&wq.cv);
            } else if (rc == ZKR_ESTALE) {
                wq.stale++;
            } else {
                pthread_mutex_unlock(&wq.mu);
                die("zkr_item_ack", rc);
            }
            pthread_mutex_unlock(&wq.mu);
            zkr_item_free(its[i]);
        }
    }
    atomic_store(&c->exited, 1);
    return NULL;
}

static consumer_t *consumers_start(int k, const char *path)
{
    consumer_t *cs = calloc((size_t)k, sizeof(*cs));
    int rc;

    if (cs == NULL)
        die("calloc", ZKR_ENOMEM);
    for (int i = 0; i < k; i++) {
        cs[i].s = open_session();
        if ((rc = zkr_workq_new(&cs[i].q, cs[i].s, path, "bench", NULL)) != 0)
            die("zkr_workq_new", rc);
    }
    for (int i = 0; i < k; i++)
        pthread_create(&cs[i].th, NULL, consumer_main, &cs[i]);
    return cs;
}

/* Stops the consumers: each pending take is cancelled until its thread
 * has seen the stop flag. */
static void consumers_stop(consumer_t *cs, int k)
{
    pthread_mutex_lock(&wq.mu);
    wq.stop = 1;
    pthread_mutex_unlock(&wq.mu);
    for (int i = 0; i < k; i++) {
        while (!atomic_load(&cs[i].exited)) {
            zkr_workq_cancel(cs[i].q); /* ZKR_ESTATE between takes */
            usleep(2000);
        }
        pthread_join(cs[i].th, NULL);
    }
    for (int i = 0; i < k; i++) {
        zkr_workq_free(cs[i].q);
        zkr_session_free(cs[i].s);
    }
    free(cs);
}

static void run_qtake(const char *mode, int k, int n, int secs)
{
    zkr_session_t *s = open_session();
    zkr_workq_t *q;
    consumer_t *cs;
    char path[128];
    double fill, cpu0, cpu, took;
    int64_t t0, until;
    int rc, drained;

    queue_path(path, sizeof(path), mode);
    if ((rc = zkr_workq_new(&q, s, path, "bench", NULL)) != 0)
        die("zkr_workq_new", rc);
    if ((wq.seen = calloc((size_t)n, 1)) == NULL)
        die("calloc", ZKR_ENOMEM);
    fill = qput_run(q, 0, n, 256);
    wq.n = n;
    cpu0 = cpu_now_s();
    t0 = now_ns();
    until = t0 + (int64_t)secs * 1000000000;
    cs = consumers_start(k, path);
    pthread_mutex_lock(&wq.mu);
    while (wq.done < n && now_ns() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&wq.cv, &wq.mu, &ts);
    }
    drained = wq.done;
    took = (double)((drained == n ? wq.done_at : now_ns()) - t0) / 1e9;
    pthread_mutex_unlock(&wq.mu);
    cpu = cpu_now_s() - cpu0;
    consumers_stop(cs, k);
    printf("impl=%s mode=%s consumers=%d items=%d drained=%d "
           "items_per_s=%.0f drain_s=%.2f fill_s=%.2f cpu_s_per_10k=%.3f "
           "dups=%ld stale=%ld failed=%d%s\n",
           impl, mode, k, n, drained, drained / took, took, fill,
           drained > 0 ? cpu * 10000 / drained : 0.0, wq.dups, wq.stale,
           drained < n || wq.bad > 0, drained < n ? " error=deadline" : "");
    zkr_workq_free(q);
    zkr_session_free(s);
    free(wq.seen);
}

static void run_qnotify(int w, int puts)
{
    zkr_session_t *s = open_session(), **ss;
    zkr_workq_t *q;
    consumer_t *cs;
    char path[128], item[32];
    uint64_t e0, e1;
    int rc;

    queue_path(path, sizeof(path), "qnotify");
    if ((rc = zkr_workq_new(&q, s, path, "bench", NULL)) != 0)
        die("zkr_workq_new", rc);
    if ((wq.seen = calloc((size_t)puts + 1, 1)) == NULL ||
        (ss = calloc((size_t)w + 1, sizeof(*ss))) == NULL)
        die("calloc", ZKR_ENOMEM);
    wq.n = puts + 1;
    /* One item before the consumers start: makes the queue's nodes. */
    snprintf(item, sizeof(item), "item-%07d", 0);
    if ((rc = zkr_workq_put(q, item, QITEM_LEN, ZKR_WORKQ_LEVEL_DEFAULT, NULL,
                            0)) != 0)
        die("zkr_workq_put", rc);
    cs = consumers_start(w, path);
    for (int i = 0; i < w; i++)
        ss[i] = cs[i].s;
    ss[w] = s;
    pthread_mutex_lock(&wq.mu);
    while (wq.done < 1)
        pthread_cond_wait(&wq.cv, &wq.mu);
    pthread_mutex_unlock(&wq.mu);
    usleep(500000); /* every consumer waiting, its watches set */
    e0 = watch_events(ss, w + 1);
    for (int i = 1; i <= puts; i++) {
        snprintf(item, sizeof(item), "item-%07d", i);
        if ((rc = zkr_workq_put(q, item, QITEM_LEN, ZKR_WORKQ_LEVEL_DEFAULT,
                                NULL, 0)) != 0)
            die("zkr_workq_put", rc);
        pthread_mutex_lock(&wq.mu);
        while (wq.done < i + 1)
            pthread_cond_wait(&wq.cv, &wq.mu);
        pthread_mutex_unlock(&wq.mu);
        usleep(20000); /* the next consumer in line takes its place */
    }
    usleep(200000); /* late notifications count too */
    e1 = watch_events(ss, w + 1);
    printf("impl=%s mode=qnotify consumers=%d puts=%d "
           "watch_events_per_put=%.2f dups=%ld\n",
           impl, w, puts, (double)(e1 - e0) / puts, wq.dups);
    consumers_stop(cs, w);
    zkr_workq_free(q);
    zkr_session_free(s);
    free(ss);
    free(wq.seen);
}

/* ---------------------------------------------------------- election */

/* K candidates join; each round the leader leaves (the next takes over),
 * and joins again at the back. Handoff: from the start of leave to the
 * next candidate's leadership callback. */
static void elected(zkr_election_t *e, int leader, int rc, void *data)
{
    int64_t t = now_ns();

    (void)e;
    if (getenv("ZKR_BENCH_DEBUG"))
        fprintf(stderr, "elected %d leader=%d rc=%d\n", (int)(intptr_t)data,
                leader, rc);
    if (!leader && rc == 0)
        return;
    herd_record(rc, (int)(intptr_t)data, t);
}

static int candidate(zkr_election_t **e, zkr_session_t *s, const char *dir,
                     int i)
{
    int rc = zkr_election_new(e, s, dir, "bench", NULL, ZKR_POLICY_SUSPEND);

    if (rc == 0)
        rc = zkr_election_set_listener(*e, elected, (void *)(intptr_t)i);
    return rc != 0 ? rc : zkr_election_join(*e);
}

static void run_election(int k, int rounds)
{
    zkr_session_t **ss = calloc((size_t)k, sizeof(*ss));
    zkr_election_t **es = calloc((size_t)k, sizeof(*es));
    samples_t hand = {0};
    char dir[128];
    int leader, rc;

    if (ss == NULL || es == NULL)
        die("calloc", ZKR_ENOMEM);
    snprintf(dir, sizeof(dir), "%s/election", root);
    for (int i = 0; i < k; i++) {
        ss[i] = open_session();
        if ((rc = candidate(&es[i], ss[i], dir, i)) != 0)
            die("election", rc);
        if (i == 0)
            herd_wait_grant();
    }
    leader = 0;
    usleep(200000);
    for (int r = 0; r < rounds; r++) {
        int64_t t0 = now_ns();
        if ((rc = zkr_election_leave(es[leader])) != 0)
            die("leave", rc);
        int g = herd_wait_grant();
        samples_add(&hand, (double)(herd.granted_at - t0) / 1e3);
        /* A fresh candidate, as Curator needs a new LeaderLatch: a
         * zkr_election_t that left and joins again is not reported to its
         * listener when it leads again (its listener never heard of the
         * resignation); see docs/BENCHMARKS.md. */
        zkr_election_free(es[leader]);
        if ((rc = candidate(&es[leader], ss[leader], dir, leader)) != 0)
            die("join", rc);
        leader = g;
    }
    printf("impl=%s mode=election candidates=%d rounds=%d "
           "handoff_p50_us=%.0f handoff_p99_us=%.0f\n",
           impl, k, rounds, percentile(&hand, 50), percentile(&hand, 99));
    for (int i = 0; i < k; i++)
        zkr_election_free(es[i]);
    for (int i = 0; i < k; i++)
        zkr_session_free(ss[i]);
    free(ss);
    free(es);
    free(hand.v);
}

/* --------------------------------------------------------- candidate */

/* One candidate of the failover workload (bench/failover.py starts K of
 * them, each its own process): joins the election at PATH, prints
 * "joined", then "elected <microseconds since the epoch>" when it leads,
 * and leads until it is killed (SIGKILL: its session must expire) or told
 * to resign (SIGTERM: it leaves the election and closes its session). */
static volatile sig_atomic_t cand_term;

static void cand_on_term(int sig)
{
    (void)sig;
    cand_term = 1;
}

static void cand_elected(zkr_election_t *e, int leader, int rc, void *data)
{
    struct timespec ts;

    (void)e;
    (void)data;
    if (!leader || rc != 0)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("elected %lld\n",
           (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
    fflush(stdout);
}

static void run_candidate(const char *path)
{
    struct sigaction sa;
    zkr_session_t *s = open_session();
    zkr_election_t *e;
    int rc;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = cand_on_term;
    sigaction(SIGTERM, &sa, NULL);
    if ((rc = zkr_election_new(&e, s, path, "bench", NULL,
                               ZKR_POLICY_SUSPEND)) != 0 ||
        (rc = zkr_election_set_listener(e, cand_elected, NULL)) != 0 ||
        (rc = zkr_election_join(e)) != 0)
        die("candidate", rc);
    printf("joined\n");
    fflush(stdout);
    while (!cand_term)
        pause();
    (void)zkr_election_leave(e);
    zkr_election_free(e);
    zkr_session_free(s);
}

/* -------------------------------------------------------------- main */

static int usage(void)
{
    fprintf(
        stderr,
        "usage: zkr-bench [-s HOSTS] [-i zkr|raw] [-t MS] [-m DIR] MODE "
        "ARGS\n"
        "  uncontended CYCLES | contended K SECONDS | herd W ROUNDS |\n"
        "  scale N | semaphore PERMITS K SECONDS | election K ROUNDS |\n"
        "  floor ROUNDS (raw only) | many N W |\n"
        "  qput N W | qtake K N SECS | qbatch K N SECS B | qdrain N K SECS |\n"
        "  qnotify W PUTS |\n"
        "  candidate PATH SESSION_MS\n");
    return 2;
}

static int arg(char **argv, int i)
{
    int v = atoi(argv[i]);
    if (v < 1) {
        fprintf(stderr, "zkr-bench: bad number '%s'\n", argv[i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    zkr_session_t *s;
    const char *mode;
    int opt;

    while ((opt = getopt(argc, argv, "s:i:t:m:")) != -1) {
        if (opt == 'm')
            metrics_dir = optarg;
        else if (opt == 's')
            hosts = optarg;
        else if (opt == 't')
            session_timeout_ms = atoi(optarg);
        else if (opt == 'i')
            impl = optarg;
        else
            return usage();
    }
    if (optind >= argc ||
        (strcmp(impl, "zkr") != 0 && strcmp(impl, "raw") != 0))
        return usage();
    mode = argv[optind];
    argv += optind;
    argc -= optind;
    if (strcmp(impl, "raw") == 0 && strcmp(mode, "uncontended") != 0 &&
        strcmp(mode, "scale") != 0 && strcmp(mode, "floor") != 0 &&
        strcmp(mode, "many") != 0) {
        fprintf(stderr, "zkr-bench: -i raw has only uncontended, scale, "
                        "floor and many\n");
        return 2;
    }
    if (strcmp(impl, "raw") != 0 && strcmp(mode, "floor") == 0) {
        fprintf(stderr, "zkr-bench: floor is for -i raw only\n");
        return 2;
    }
    /* Every zkr lock handle owns a pipe (zkr_lock_fd): two descriptors. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536) {
        rl.rlim_cur = rl.rlim_max = 65536;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 &&
            getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    if (strcmp(mode, "candidate") == 0 && argc == 3 &&
        strcmp(impl, "zkr") == 0) {
        session_timeout_ms = arg(argv, 2);
        run_candidate(argv[1]); /* its own path: no per-run directory */
        return 0;
    }
    snprintf(root, sizeof(root), "/zkr-bench/%s-%ld-%d", impl, (long)getpid(),
             (int)(now_ns() % 100000));
    s = open_session();
    ensure_node(zkr_session_handle(s), "/zkr-bench");
    ensure_node(zkr_session_handle(s), root);
    zkr_session_free(s);

    if (strcmp(mode, "uncontended") == 0 && argc == 2)
        run_uncontended(arg(argv, 1));
    else if (strcmp(mode, "multi") == 0 && argc == 3 &&
             strcmp(impl, "raw") != 0)
        run_multi(arg(argv, 1), arg(argv, 2));
    else if (strcmp(mode, "contended") == 0 && argc == 3)
        run_contenders("contended", 1, arg(argv, 1), arg(argv, 2));
    else if (strcmp(mode, "semaphore") == 0 && argc == 4)
        run_contenders("semaphore", arg(argv, 1), arg(argv, 2), arg(argv, 3));
    else if (strcmp(mode, "herd") == 0 && argc == 3)
        run_herd(arg(argv, 1), arg(argv, 2));
    else if (strcmp(mode, "scale") == 0 && argc == 2)
        run_scale(arg(argv, 1));
    else if (strcmp(mode, "election") == 0 && argc == 3)
        run_election(arg(argv, 1), arg(argv, 2));
    else if (strcmp(mode, "floor") == 0 && argc == 2)
        run_floor(arg(argv, 1));
    else if (strcmp(mode, "many") == 0 && argc == 3)
        run_many(arg(argv, 1), arg(argv, 2));
    else if (strcmp(mode, "qput") == 0 && argc == 3)
        run_qput(arg(argv, 1), arg(argv, 2));
    else if (strcmp(mode, "qtake") == 0 && argc == 4)
        run_qtake("qtake", arg(argv, 1), arg(argv, 2), arg(argv, 3));
    else if (strcmp(mode, "qbatch") == 0 && argc == 5 &&
             (wq.batch = arg(argv, 4)) <= ZKR_WORKQ_BATCH_MAX)
        run_qtake("qbatch", arg(argv, 1), arg(argv, 2), arg(argv, 3));
    else if (strcmp(mode, "qdrain") == 0 && argc == 4)
        run_qtake("qdrain", arg(argv, 2), arg(argv, 1), arg(argv, 3));
    else if (strcmp(mode, "qnotify") == 0 && argc == 3)
        run_qnotify(arg(argv, 1), arg(argv, 2));
    else
        return usage();
    return 0;
}
