/* A contender in its own process, for tests that need separate sessions
 * and processes (mutual exclusion, pausing and killing one contender).
 *
 *   contender -s HOSTS -p PATH [-n ITERS] [-c COUNTER] [-l LOG] [-i ID]
 *             [-t SESSION_MS] [-h HOLD_MS] [-b] [-E | -R | -Q P|C [-x MAX]]
 *
 * Each iteration acquires the lock, does a deliberately non-atomic
 * read-modify-write of the integer in COUNTER (read, sleep HOLD_MS, write
 * back plus one: only the lock prevents lost updates), appends
 *   GRANT <monotonic ms> <id> <seq> <token>
 *   RELEASE <monotonic ms> <id> <seq> <token>
 * lines to LOG (O_APPEND, one write per line) and releases. Exits 0 when
 * every iteration succeeded. -b ("broken") does the same without taking
 * the lock, so a test can show that its checks catch a broken lock.
 *
 * -H HISTORY appends the events the checker (tests/bin/zkr-check) judges, one
 * line each, "<monotonic ns> <pid> <session id, hex> <event> <a> <b>":
 * enqueue, grant <token> <seq>, release <token>, suspend, held (verified
 * again after a suspension), lost (lock listener states), session-level
 * s-suspend/s-reconnect/s-lost (for electors and runners too),
 * fence-ok/fence-reject <token>, exit <rc>.
 * -F STORE makes every grant write once to a fenced store: a file holding
 * the highest token admitted, updated with zkr_fence_admit() under a file
 * lock (the fence event is logged under the same lock, so the history
 * orders writes as the store saw them).
 *
 * -E makes it an elector instead: each iteration joins the election at
 * PATH, waits to lead, logs "leader-on <epoch>", leads HOLD_MS, logs
 * "leader-off" and leaves; a loss reported by the election listener is
 * logged as "leader-off" at once. With -b it claims leadership without an
 * election (epoch = iteration + 1), for the checker's self-test.
 *
 * For the soak (tests/bin/chaos): -d SECONDS runs until that much time has
 * passed instead of ITERS iterations, and -r keeps going after an error
 * (logged as "giveup <rc>"), acquiring with a 10 s timeout. With -F, a
 * holder also writes once more just before releasing, so a holder that was
 * paused or cut off meanwhile tries a late write the store must reject.
 *
 * -R makes it a runner: zkr_election_run() with requeue at PATH, whose
 * leader function follows the stop contract as an application would (see
 * lead_fn): until HOLD_MS have passed it takes a step every STEP_MS, and
 * before each step it looks at its clock, then at zkr_election_fd() (stop
 * and return when readable) and zkr_session_valid_ms() (no step unless
 * at least STEP_BOUND_MS remain). It logs
 *   fn-start <epoch>        the function starts (epoch it leads with)
 *   check <epoch> <valid>   a step's check passed (time: before the poll)
 *   effect / effect-reject <epoch>   the step: one write of the epoch to
 *                           the fenced store -F (admitted or refused)
 *   fn-return <epoch>       the function returns
 * and a witness thread, which polls the descriptor while the function
 * runs (whatever the function does), logs fd-on <epoch> when it sees it
 * readable (time: after the poll) and fd-off <epoch> when quiet again
 * (time: before the poll). With -b the function ignores the descriptor
 * and valid_ms (a function that breaks the contract, for the checker's
 * self-test); the witness still logs. -n counts functions run; at the end
 * (-n or -d) another thread calls zkr_election_leave().
 *
 * -w GOFILE: once its session is open, log "ready" and wait until GOFILE
 * exists, so that a test can start all contenders' loops at once.
 *
 * -D MS gives the lock (or permit) a lock-delay of MS (zkr_lock_set_delay).
 *
 * -Q P or -Q C makes it a work queue's producer or consumer at PATH
 * (issue 17; see run_queue for what it logs), -x MAX its dead-lettering.
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "seq.h"
#include "zkr.h"

static int64_t run_until_ms; /* -d: stop after this time (monotonic ms) */
static int resilient;        /* -r */

/* Whether another iteration is due. */
static int more(int i, int iters)
{
    return run_until_ms > 0 ? zkt_now_ms() < run_until_ms : i < iters;
}

static int hist_fd = -1;
static zkr_session_t *hist_session;

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One history event at time t (ns), one write (O_APPEND keeps lines
 * whole). */
static void hist_at(long long t, const char *event, long long a, long long b)
{
    char buf[160];
    int n;

    if (hist_fd < 0)
        return;
    n = snprintf(buf, sizeof(buf), "%lld %ld %" PRIx64 " %s %lld %lld\n", t,
                 (long)getpid(),
                 hist_session != NULL ? (uint64_t)zkr_session_id(hist_session)
                                      : 0,
                 event, a, b);
    if (write(hist_fd, buf, (size_t)n) != n)
        _exit(5);
}

static void hist(const char *event, long long a, long long b)
{
    hist_at(now_ns(), event, a, b);
}

/* A queue event: a string, two numbers and a string (tests/bin/zkr-check). */
static void hist_str(const char *event, const char *a, long long b, long long c,
                     const char *d)
{
    char buf[256];
    int n;

    if (hist_fd < 0)
        return;
    n = snprintf(buf, sizeof(buf), "%lld %ld %" PRIx64 " %s %s %lld %lld %s\n",
                 now_ns(), (long)getpid(),
                 hist_session != NULL ? (uint64_t)zkr_session_id(hist_session)
                                      : 0,
                 event, a, b, c, d);
    if (n >= (int)sizeof(buf) || write(hist_fd, buf, (size_t)n) != n)
        _exit(5);
}

static void on_session(zkr_session_t *s, zkr_state_t st, void *data)
{
    (void)s;
    (void)data;
    if (st == ZKR_STATE_SUSPENDED)
        hist("s-suspend", 0, 0);
    else if (st == ZKR_STATE_RECONNECTED)
        hist("s-reconnect", 0, 0);
    else if (st == ZKR_STATE_LOST)
        hist("s-lost", 0, 0);
}

static void on_lock(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    (void)data;
    if (st == ZKR_LOCK_SUSPENDED)
        hist("suspend", 0, 0);
    else if (st == ZKR_LOCK_HELD)
        hist("held", 0, 0);
    else if (st == ZKR_LOCK_LOST)
        hist("lost", 0, 0);
}

/* One write to the fenced store with token; logs ok or reject (with the
 * token) under the store's lock, so the history orders the writes as the
 * store saw them. */
static void fenced_write_as(const char *store, int64_t token, const char *ok,
                            const char *reject)
{
    int fd = open(store, O_RDWR | O_CREAT, 0644);
    char buf[64] = "";
    int64_t highest = 0;
    ssize_t n;
    int rc;

    if (fd < 0 || flock(fd, LOCK_EX) != 0)
        exit(8);
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        highest = strtoll(buf, NULL, 10);
    }
    rc = zkr_fence_admit(&highest, token);
    if (rc == 0) {
        n = snprintf(buf, sizeof(buf), "%" PRId64 "\n", highest);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
            exit(8);
    }
    hist(rc == 0 ? ok : reject, token, 0);
    flock(fd, LOCK_UN);
    close(fd);
}

static void fenced_write(const char *store, int64_t token)
{
    fenced_write_as(store, token, "fence-ok", "fence-reject");
}

static void on_leader(zkr_election_t *e, int leader, int rc, void *data)
{
    (void)e;
    (void)rc;
    (void)data;
    if (!leader)
        hist("leader-off", 0, 0);
}

/* The -E loop: iters terms of leadership. */
static int run_elector(zkr_session_t *s, const char *path, const char *id,
                       int iters, int hold, int broken)
{
    zkr_election_t *e = NULL;
    int rc = 0;

    if (zkr_election_new(&e, s, path, id, NULL, ZKR_POLICY_SUSPEND) != 0 ||
        zkr_election_set_listener(e, on_leader, NULL) != 0)
        return 3;
    for (int i = 0; more(i, iters) && (rc == 0 || resilient); i++) {
        int64_t epoch = i + 1;

        if (!broken) {
            hist("enqueue", 0, 0);
            if ((rc = zkr_election_join(e)) != 0 ||
                (rc = zkr_election_await(e, resilient ? 10000 : 60000)) != 0 ||
                (rc = zkr_election_epoch(e, &epoch)) != 0) {
                if (!resilient)
                    break;
                hist("giveup", rc, 0);
                zkr_election_leave(e);
                usleep(50000);
                continue;
            }
        }
        hist("leader-on", epoch, 0);
        usleep((useconds_t)hold * 1000);
        hist("leader-off", 0, 0);
        if (!broken)
            rc = zkr_election_leave(e);
    }
    if (resilient)
        rc = 0;
    zkr_election_free(e);
    return rc;
}

/* -R: a leader function's steps and what the witness needs. */
enum { STEP_MS = 20, STEP_BOUND_MS = 100 };

struct runner {
    zkr_election_t *e;
    zkr_session_t *s;
    const char *store;
    int hold;
    int broken;
    int iters;        /* functions to run (without -d) */
    int64_t epoch;    /* of the running function */
    atomic_int wstop; /* tells the witness to end */
    atomic_int terms; /* functions that returned */
    atomic_int done;  /* the run loop is over */
};

/* Logs when the stop descriptor becomes readable (fd-on, time after the
 * poll that saw it) and quiet again (fd-off, time before the poll that
 * saw it), while the leader function runs. Independent of what the
 * function does, so that the checker knows from when the function could
 * have known. */
static void *witness(void *arg)
{
    struct runner *r = arg;
    struct pollfd p = {zkr_election_fd(r->e), POLLIN, 0};
    int on = 0;

    while (!r->wstop) {
        if (!on) {
            if (poll(&p, 1, 20) > 0) {
                hist("fd-on", r->epoch, 0);
                on = 1;
            }
        } else {
            long long t;

            usleep(2000);
            t = now_ns();
            if (poll(&p, 1, 0) == 0) {
                hist_at(t, "fd-off", r->epoch, 0);
                on = 0;
            }
        }
    }
    return NULL;
}

/* The leader function: HOLD_MS of steps, each after the checks the
 * documentation asks for (see the top). The check's time is read before
 * the descriptor is polled, so a loss written before that time is seen. */
static int lead_fn(zkr_election_t *e, void *data)
{
    struct runner *r = data;
    struct pollfd p = {zkr_election_fd(e), POLLIN, 0};
    int64_t until = zkt_now_ms() + r->hold;
    pthread_t w;

    if (zkr_election_epoch(e, &r->epoch) != 0)
        return 0; /* already lost: the descriptor says so too */
    hist("fn-start", r->epoch, 0);
    r->wstop = 0;
    if (pthread_create(&w, NULL, witness, r) != 0)
        _exit(4);
    while (zkt_now_ms() < until) {
        long long tc = now_ns();
        int64_t valid;

        if (!r->broken && poll(&p, 1, 0) > 0)
            break; /* stop: leadership ended or is in doubt */
        valid = zkr_session_valid_ms(r->s);
        if (!r->broken && valid < STEP_BOUND_MS) {
            poll(&p, 1, 10); /* no step now; stop if told meanwhile */
            continue;
        }
        hist_at(tc, "check", r->epoch, valid);
        fenced_write_as(r->store, r->epoch, "effect", "effect-reject");
        if (r->broken)
            usleep(STEP_MS * 1000);
        else
            poll(&p, 1, STEP_MS);
    }
    r->wstop = 1;
    pthread_join(w, NULL);
    hist("fn-return", r->epoch, 0);
    r->terms++;
    return 0;
}

/* Ends the run loop once no more terms are due: leaves until it is over
 * (a leave between two run() calls finds nothing to leave). */
static void *stopper(void *arg)
{
    struct runner *r = arg;

    while (!atomic_load(&r->done)) {
        usleep(10000);
        if (!more(atomic_load(&r->terms), r->iters))
            zkr_election_leave(r->e);
    }
    return NULL;
}

/* The -R loop: zkr_election_run() with requeue until no more terms are
 * due; under -r an error is logged ("giveup") and run() called again. */
static int run_runner(zkr_session_t *s, const char *path, const char *id,
                      int iters, int hold, int broken, const char *store)
{
    struct runner r;
    pthread_t st;
    int rc = 0;

    memset(&r, 0, sizeof(r));
    r.s = s;
    r.store = store;
    r.hold = hold;
    r.broken = broken;
    r.iters = iters;
    if (store == NULL ||
        zkr_election_new(&r.e, s, path, id, NULL, ZKR_POLICY_SUSPEND) != 0)
        return 3;
    if (pthread_create(&st, NULL, stopper, &r) != 0)
        return 4;
    while (more(atomic_load(&r.terms), iters)) {
        rc = zkr_election_run(r.e, lead_fn, &r, 1);
        if (rc == 0 || !resilient)
            break; /* 0: left (the stopper) */
        hist("giveup", rc, 0);
        usleep(50000);
    }
    atomic_store(&r.done, 1);
    pthread_join(st, NULL);
    zkr_election_free(r.e);
    return resilient ? 0 : rc;
}

/* -Q: a work queue's producer or consumer (issue 17). */
struct broken_ack {
    const char *path; /* the item's node */
};

/* The broken ack of -Q C -b, as a queue without the claim check does it
 * (kazoo's LockingQueue consumes so): every child of the item, then the
 * item, deleted whatever their versions. */
static int broken_ack_fn(zhandle_t *zh, void *arg)
{
    const struct broken_ack *b = arg;
    struct String_vector v = {0, NULL};
    char child[512];
    int rc = zoo_get_children(zh, b->path, 0, &v);

    for (int i = 0; rc == ZOK && i < v.count; i++) {
        snprintf(child, sizeof(child), "%s/%s", b->path, v.data[i]);
        zoo_delete(zh, child, -1);
    }
    deallocate_String_vector(&v);
    return rc == ZOK ? zoo_delete(zh, b->path, -1) : rc;
}

/* The -Q loop. A producer puts items whose data is a key unique in the
 * run ("<pid>.<n>"; a level in turn), HOLD_MS apart, and logs
 *   put <key> <rc> 0 <id>
 * A consumer logs take-start, takes (10 s at most under -r), logs
 *   take <key> <delivery> <token> <id>
 * (token -1 if not readable), works HOLD_MS, then acks 8 times in 10,
 * else nacks to the front or to the back, and logs
 *   ack-start <key> 0 <token>   (before the ack)
 *   ack <key> <rc> <token>   /   nack <key> <rc> <token> front|back
 * -b: its acks skip the claim check (broken_ack_fn), for the checker's
 * self-test. -x MAX: dead-lettering after MAX deliveries. */
static int run_queue(zkr_session_t *s, const char *path, const char *id,
                     int iters, int hold, int broken, int producer,
                     int dead_max)
{
    zkr_workq_t *q = NULL;
    unsigned seed = (unsigned)getpid();
    int rc = 0;

    if (zkr_workq_new(&q, s, path, id, NULL) != 0 ||
        (dead_max > 0 && zkr_workq_set_dead_letter(q, dead_max, NULL) != 0))
        return 3;
    for (int i = 0; more(i, iters) && (rc == 0 || resilient); i++) {
        char key[64], itemid[ZKR_WORKQ_ID_MAX];
        zkr_item_t *it = NULL;
        int64_t token = -1;
        const void *data;
        size_t len = 0;
        int r;

        if (producer) {
            snprintf(key, sizeof(key), "%ld.%d", (long)getpid(), i);
            itemid[0] = '\0';
            rc = zkr_workq_put(q, key, strlen(key), i % ZKR_WORKQ_LEVELS,
                               itemid, sizeof(itemid));
            hist_str("put", key, rc, 0, rc == 0 ? itemid : "-");
            usleep((useconds_t)hold * 1000);
            continue;
        }
        hist("take-start", 0, 0);
        rc = zkr_workq_take(q, resilient ? 10000 : 60000, &it);
        if (rc != 0) {
            hist("giveup", rc, 0);
            if (rc == ZKR_ETIMEDOUT && resilient)
                continue;
            usleep(50000);
            continue;
        }
        data = zkr_item_data(it, &len);
        if (len >= sizeof(key))
            len = sizeof(key) - 1;
        if (len > 0)
            memcpy(key, data, len);
        key[len] = '\0';
        for (size_t k = 0; k < len; k++) /* one word in the history */
            if (!isgraph((unsigned char)key[k]))
                key[k] = '_';
        if (len == 0)
            strcpy(key, "-");
        if (zkr_item_token(it, &token) != 0)
            token = -1; /* lost already (paused, say): still a take */
        hist_str("take", key, zkr_item_deliveries(it), token, zkr_item_id(it));
        usleep((useconds_t)hold * 1000);
        r = rand_r(&seed) % 10;
        if (broken) {
            char node[512];
            struct broken_ack b = {node};

            snprintf(node, sizeof(node), "%s/%s", path, zkr_item_id(it));
            hist_str("ack-start", key, 0, token, "-");
            rc = zkr_session_with_handle(s, broken_ack_fn, &b);
            hist_str("ack", key, rc, token, "-");
        } else if (r < 8) {
            hist_str("ack-start", key, 0, token, "-");
            rc = zkr_item_ack(it);
            hist_str("ack", key, rc, token, "-");
        } else {
            zkr_nack_where_t where = r == 8 ? ZKR_NACK_FRONT : ZKR_NACK_BACK;

            rc = zkr_item_nack(it, where);
            hist_str("nack", key, rc, token,
                     where == ZKR_NACK_FRONT ? "front" : "back");
        }
        zkr_item_free(it);
        /* ESTALE: the claim was lost meanwhile (the point of the soak);
         * EINDOUBT: an ack's answer lost with the session (the checker
         * counts it in acks_in_doubt). */
        if (rc == ZKR_ESTALE || rc == ZKR_EINDOUBT)
            rc = 0;
    }
    zkr_workq_free(q);
    return resilient ? 0 : rc;
}

static void log_line(int fd, const char *what, const char *id, long seq,
                     int64_t token)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s %lld %s %ld %lld\n", what,
                     (long long)zkt_now_ms(), id, seq, (long long)token);
    if (fd >= 0 && write(fd, buf, (size_t)n) != n)
        exit(5);
}

static long read_counter(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

static void write_counter(const char *path, long v)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        exit(6);
    fprintf(f, "%ld\n", v);
    fclose(f);
}

/* Adds delta to the holders count in path ("<now> <max>"), under a file
 * lock, keeping the highest value seen. */
static void count_holders(const char *path, int delta)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    char buf[64] = "";
    long now = 0, max = 0;
    ssize_t n;

    if (fd < 0 || flock(fd, LOCK_EX) != 0)
        exit(7);
    n = read(fd, buf, sizeof(buf) - 1);
    if (n > 0) {
        buf[n] = '\0';
        sscanf(buf, "%ld %ld", &now, &max);
    }
    now += delta;
    if (now > max)
        max = now;
    n = snprintf(buf, sizeof(buf), "%ld %ld\n", now, max);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
        exit(7);
    flock(fd, LOCK_UN);
    close(fd);
}

int main(int argc, char **argv)
{
    const char *hosts = NULL, *path = NULL, *counter = NULL, *logp = NULL;
    const char *id = "contender";
    int iters = 1, timeout = 10000, hold = 2, opt, logfd = -1, rc = 0;
    int broken = 0;  /* -b: skip the lock, to show the checks catch it */
    int elector = 0; /* -E: take part in an election instead */
    int runner = 0;  /* -R: run leader functions instead */
    int permits = 0; /* -P N: a permit of a semaphore of N instead */
    const char *holders = NULL; /* -k FILE: "<now> <max>" holders count */
    const char *history = NULL; /* -H FILE: events for tests/bin/zkr-check */
    const char *store = NULL;   /* -F FILE: fenced store */
    const char *go = NULL;      /* -w FILE: start when it exists */
    int delay = 0;              /* -D MS: the lock's lock-delay */
    int queue = 0;              /* -Q P|C: a work queue's producer/consumer */
    int dead_max = 0;           /* -x MAX: its dead-lettering */
    zkr_session_t *s;
    zkr_lock_t *l;

    while ((opt = getopt(argc, argv,
                         "s:p:n:c:l:i:t:h:bP:k:H:F:ERd:rw:D:Q:x:")) != -1) {
        switch (opt) {
        case 's':
            hosts = optarg;
            break;
        case 'p':
            path = optarg;
            break;
        case 'n':
            iters = atoi(optarg);
            break;
        case 'c':
            counter = optarg;
            break;
        case 'l':
            logp = optarg;
            break;
        case 'i':
            id = optarg;
            break;
        case 't':
            timeout = atoi(optarg);
            break;
        case 'h':
            hold = atoi(optarg);
            break;
        case 'b':
            broken = 1;
            break;
        case 'P':
            permits = atoi(optarg);
            break;
        case 'k':
            holders = optarg;
            break;
        case 'H':
            history = optarg;
            break;
        case 'F':
            store = optarg;
            break;
        case 'E':
            elector = 1;
            break;
        case 'R':
            runner = 1;
            break;
        case 'd':
            run_until_ms = zkt_now_ms() + 1000LL * atoi(optarg);
            break;
        case 'r':
            resilient = 1;
            break;
        case 'w':
            go = optarg;
            break;
        case 'D':
            delay = atoi(optarg);
            break;
        case 'Q':
            queue = optarg[0];
            break;
        case 'x':
            dead_max = atoi(optarg);
            break;
        default:
            return 2;
        }
    }
    if (hosts == NULL || path == NULL)
        return 2;
    /* Under -r (the soak) connection errors are the point: not logged. */
    zoo_set_debug_level(resilient ? (ZooLogLevel)0 : ZOO_LOG_LEVEL_ERROR);
    if (logp != NULL &&
        (logfd = open(logp, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
        return 3;
    if (history != NULL &&
        (hist_fd = open(history, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
        return 3;
    if (zkr_session_open(&s, hosts, timeout, NULL) != 0)
        return 3;
    hist_session = s;
    /* The session's states, for every kind: the checker judges a leader
     * function's late steps by whether its link was impaired. */
    if (history != NULL && zkr_session_add_listener(s, on_session, NULL) != 0)
        return 3;
    if (go != NULL) {
        hist("ready", 0, 0);
        while (access(go, F_OK) != 0)
            usleep(5000);
    }
    if (queue == 'P' || queue == 'C') {
        rc =
            run_queue(s, path, id, iters, hold, broken, queue == 'P', dead_max);
        hist("exit", rc, 0);
        zkr_session_free(s);
        if (rc != 0)
            fprintf(stderr, "contender %s: %s\n", id, zkr_strerror(rc));
        return rc == 0 ? 0 : 1;
    }
    if (elector || runner) {
        rc = runner ? run_runner(s, path, id, iters, hold, broken, store)
                    : run_elector(s, path, id, iters, hold, broken);
        hist("exit", rc, 0);
        zkr_session_free(s);
        if (rc != 0)
            fprintf(stderr, "contender %s: %s\n", id, zkr_strerror(rc));
        return rc == 0 ? 0 : 1;
    }
    if ((permits > 0 ? zkr_semaphore_new(&l, s, path, permits, id, NULL)
                     : zkr_lock_new(&l, s, path, id, NULL)) != 0 ||
        zkr_lock_set_delay(l, delay) != 0)
        return 3;
    if (history != NULL && zkr_lock_set_listener(l, on_lock, NULL) != 0)
        return 3;
    for (int i = 0; more(i, iters) && (rc == 0 || resilient); i++) {
        char node[ZKR_NODE_MAX];
        int64_t token = 0;
        long seq = -1;

        hist("enqueue", 0, 0);
        if (broken) {
            /* No lock at all: the same body with made-up token and seq. */
            token = i + 1;
            seq = i;
        } else {
            rc = zkr_lock_acquire(l, resilient ? 10000 : 60000);
            if (rc != 0 && resilient) {
                hist("giveup", rc, 0);
                usleep(50000);
                continue;
            }
            /* Lost between the return and now (paused, say): the token
             * is refused, and we hold nothing. */
            if (rc == 0 && (rc = zkr_lock_token(l, &token)) != 0) {
                zkr_lock_release(l); /* reports the loss */
                if (resilient) {
                    hist("giveup", rc, 0);
                    continue;
                }
            }
            if (rc != 0)
                break;
            if (zkr_lock_node(l, node, sizeof(node)) == 0) {
                int32_t s32;

                if (zkt_name_seq(node, &s32) == 0)
                    seq = s32;
            }
        }
        if (holders != NULL)
            count_holders(holders, +1);
        hist("grant", token, seq);
        if (store != NULL)
            fenced_write(store, token);
        log_line(logfd, "GRANT", id, seq, token);
        if (counter != NULL) {
            long v = read_counter(counter);
            usleep((useconds_t)hold * 1000);
            write_counter(counter, v + 1);
        } else {
            usleep((useconds_t)hold * 1000);
        }
        if (store != NULL)
            fenced_write(store, token);
        log_line(logfd, "RELEASE", id, seq, token);
        if (holders != NULL)
            count_holders(holders, -1);
        hist("release", token, 0);
        if (broken)
            continue;
        rc = zkr_lock_release(l);
        if (rc == 0)
            hist("released", token, 0);
        if (resilient)
            rc = 0; /* ZKR_ELOST: it was lost meanwhile; go on */
    }
    hist("exit", rc, 0);
    zkr_lock_free(l);
    zkr_session_free(s);
    if (logfd >= 0)
        close(logfd);
    if (rc != 0)
        fprintf(stderr, "contender %s: %s\n", id, zkr_strerror(rc));
    return rc == 0 ? 0 : 1;
}
