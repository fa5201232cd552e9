/* The history checker: reads the events that contenders (tests/bin/contender
 * -H), electors and the test driver appended to history files, orders
 * them by time, and checks the safety and liveness properties of one
 * lock and one election.
 *
 *   zkr-check [-t SESSION_MS] [-m MARGIN_MS] [-g GRACE_MS] [-v] HISTORY...
 *
 * A line is "<monotonic ns> <pid> <session hex> <event> <a> <b>"; all
 * processes run on one machine, so CLOCK_MONOTONIC orders them. Events:
 *
 *   enqueue                 a contender starts waiting
 *   grant TOKEN SEQ         acquire returned: it holds the lock
 *   release TOKEN           it stops using the lock (logged before release)
 *   released TOKEN          zkr_lock_release() returned 0 (a clean release)
 *   suspend / held / lost   lock listener: connection down (must stop
 *                           using the lock) / verified again / ownership gone
 *   giveup                  a wait ended without a grant (timeout, cancel)
 *   exit RC                 the process ends
 *   fence-ok / fence-reject TOKEN   a write to the fenced store
 *   leader-on EPOCH / leader-off    an elector's leadership
 *   pause PID / unpause PID / kill PID   the driver froze, thawed, killed
 *   fault-start KIND / fault-stop        the driver injected a fault
 *   s-suspend / s-reconnect / s-lost     the process's session listener
 *   foreign-on CZXID KIND / foreign-off CZXID KIND   a foreign actor's
 *                           contender (tests/bin/foreign) exists from the
 *                           first (logged after its create) to the second
 *                           (logged before its delete); KIND 0 is the
 *                           lock, 1 the election
 *   foreign-write / foreign-delete CZXID KIND   it wrote / deleted another
 *                           contender's waiting node (never the first's)
 *   op-delete EPOCH         the driver deleted the election leader's node
 *                           (an operator's forced release), logged before
 *                           the delete; a foreign-delete of an election
 *                           node counts the same (it may have become the
 *                           leader's meanwhile)
 *   fn-start EPOCH / fn-return EPOCH   a leader function of
 *                           zkr_election_run() (contender -R) starts /
 *                           returns; the same epoch again by the same
 *                           process is the same leadership re-verified
 *   check EPOCH VALID_MS    the function's checks before a step passed:
 *                           stop descriptor quiet, session valid_ms; time
 *                           read before the descriptor was polled
 *   effect / effect-reject EPOCH   the step: one write of the epoch to a
 *                           fenced store, admitted or refused (logged
 *                           under the store's lock, in its order)
 *   fd-on / fd-off EPOCH    a witness thread beside the function saw the
 *                           stop descriptor readable (time after its poll)
 *                           / quiet again (time before its poll)
 *
 * Properties, each a counter in the one output line; the exit status is 1
 * if any violation counter is non-zero:
 *
 *   mutex_violations   a grant while another process held the lock and was
 *                      neither suspended, lost, paused nor killed since its
 *                      grant. This also covers "a holder that was not
 *                      paused reported SUSPENDED or LOST before anyone else
 *                      was granted". Also a grant while a foreign contender
 *                      created before it (lower czxid) was still there: it
 *                      held, or waited behind the holder.
 *   deleted_grants     a grant (or leadership) whose token (epoch) is the
 *                      czxid of a node the foreign actor deleted as a
 *                      waiter: a grant must rest on its own node existing.
 *   token_regressions  a grant whose token is not above the grant before
 *                      it (czxids of successive holders only increase).
 *   fencing_violations the store admitted a token lower than one it had
 *                      admitted before.
 *   fifo_inversions    a grant of a lower queue sequence than the grant
 *                      before it (nodes are granted in creation order).
 *   late_handovers     after a holder was killed, no waiter was granted
 *                      within SESSION_MS + MARGIN_MS + DELAY_MS (only
 *                      counted when a waiter that was neither paused nor
 *                      killed was queued at the kill).
 *   early_grants       (-D DELAY_MS, the contenders' lock-delay) the first
 *                      grant after a holder was killed with a waiter
 *                      queued came less than DELAY_MS after the kill: the
 *                      killed holder's node went no earlier than the kill,
 *                      so a waiter that observed it went waits DELAY_MS
 *                      from then (issue 16).
 *   delayed_grants     (-D DELAY_MS) the first grant after a clean
 *                      release (released) with a waiter queued came
 *                      DELAY_MS or more after the release returned: a
 *                      release's record lets the next waiter in at once
 *                      (issue 16). Judged only when nothing between the
 *                      release and the grant could have made a waiter's
 *                      predecessor go without a record: no link fault
 *                      active or started, no pause, kill, giveup, exit of
 *                      a waiter, suspension, loss, foreign action or
 *                      operator delete.
 *   double_leaders     a leader-on or fn-start while another elector was
 *                      leader and not paused or killed, its node not
 *                      deleted by someone else, and not running a leader
 *                      function that was paused since it started (that
 *                      one's effects are judged instead); or while a
 *                      foreign candidate created before it was still
 *                      there. For functions: one starts only after the
 *                      previous one returned or could not act. Also (once
 *                      per function) a function whose node was deleted by
 *                      someone else that still tries a step after a newer
 *                      leadership began, not excused as below ((a), (b) or
 *                      (c)) and not already an interleaving: it acts beside
 *                      the newer function even if that one has not acted
 *                      yet.
 *   epoch_regressions  a leader-on (fn-start, unless the same leadership
 *                      again) whose epoch is not above the last one.
 *   fn_interleavings   leader functions' effects interleave: an effect
 *                      attempt (admitted or refused: what the function
 *                      did) with an epoch below that of an effect already
 *                      admitted, i.e. an older leader acted after a newer
 *                      one had. Judged at the time of the attempt, never
 *                      over intervals that include a freeze; excused only
 *                      when the function could not have known, which the
 *                      store's fence then covers: (a) its process was
 *                      paused between the check and the attempt (a frozen
 *                      process executes nothing; it may wake between the
 *                      two); (b) the attempt came after check time +
 *                      VALID_MS (the guarantee it checked had run out:
 *                      the process was stalled in between); (c) its node
 *                      was deleted by someone else before the attempt, no
 *                      fd-on was seen before the check, and the check was
 *                      less than GRACE_MS (default 500) after the delete,
 *                      or less than SESSION_MS if its link was impaired:
 *                      a fault other than delete-leader, pause or kill
 *                      was on at some time from GRACE_MS before the
 *                      delete to the attempt, or it was suspended
 *                      (s-suspend) or paused at the delete or since. A
 *                      fault that ended earlier, or a suspension that
 *                      ended in s-reconnect before the delete, does not
 *                      count: the link was healthy again and the watches
 *                      set anew. A deletion reaches the old and the new
 *                      leader at about the same time: over a healthy link
 *                      the old one's own-node watch (set 50 ms after its
 *                      grant at most) tells it within milliseconds, which
 *                      GRACE_MS leaves room for on a loaded machine; over
 *                      a bad one SUSPENDED or its valid_ms stop it within
 *                      a session timeout.
 *                      Rule (c) takes a fd-on as knowledge until a fd-off:
 *                      a correct function polls after reading its check
 *                      time, so a descriptor readable before that time is
 *                      seen, unless re-verification cleared it between the
 *                      witness's samples (2 ms) — which matters only if a
 *                      newer leader acted in that instant.
 *
 * Work queue events (issue 17; KEY is the item's payload, unique per put,
 * which names the item across a nack to the back and dead-lettering; a
 * line may carry two more fields, c and d):
 *
 *   put KEY RC 0 ID         zkr_workq_put() returned RC (the producer)
 *   take-start              a consumer calls zkr_workq_take()
 *   take KEY DELIVERY TOKEN ID   it returned the item: its delivery count
 *                           and its claim's token (-1: not readable) *
 * ack-start KEY 0 TOKEN   a consumer calls zkr_item_ack() of claim TOKEN ack
 * KEY RC TOKEN        zkr_item_ack() of the claim TOKEN returned RC nack KEY RC
 * TOKEN WHERE zkr_item_nack() (front or back) returned RC kill / pause /
 * unpause PID    as above (consumers killed or frozen) snap-begin / snap-end
 * the driver's reading of the queue after the run (tests/lib/workq_snap.h),
 * between which: snap-item KEY DELIVERIES TOKEN SID   an item still queued: its
 * delivery count, and its claim's token and session (hex, as in the first
 * fields) or 0 - snap-dead KEY CARRY     a dead letter (the carry of its name)
 *
 * Queue properties (the second part of the line, "queue: ...", printed
 * when there are queue events):
 *
 *   items_lost         an item put (put returned 0, or it was taken) that
 *                      is neither acked (0), queued nor dead at the end. *
 * Judged only with a snapshot; puts without one fail. Not lost but counted in
 * acks_in_doubt: an item whose last claim's ack was begun (ack-start) with no
 * answer logged (its consumer was killed: the ack may have committed), or
 * answered ZKR_EINDOUBT (its answer lost with the session).
 *   double_acks        an item acked (0) more than once.
 *   superseded_acks    an ack (0) of a claim when the item has a take with
 *                      a higher token: another consumer claimed it after
 *                      that claim, so either the ack committed though the
 *                      claim was superseded, or the item came back after it
 *                      was completed.
 *   delivery_regressions   taken claim after claim (by token), an item's
 *                      delivery count does not grow; or the count at the
 *                      end (of an item still queued) is below its last
 *                      delivery's.
 *   item_token_regressions a take whose token is not above that of every
 *                      take of the item logged before it (equal is never
 *                      excused; lower only when the process was frozen
 *                      since it began to take: its report came late).
 *   dead_claims        a claim at the end by a session that ended more
 *                      than SESSION_MS + MARGIN_MS before (its process was
 *                      killed or exited, or moved to a new session), or by
 *                      a session no process of the run had. A session that
 *                      ended later is counted in claims_unjudged.
 *   acked_present      an item acked (0) and still queued or dead.
 *   duplicate_items    an item more than once in the queue or dead.
 *   consumer_order_inversions  a process took an item's first delivery
 *                      (count 1) after the first delivery of an item of
 *                      the same level put after it (by its id: bucket,
 *                      then sequence number). docs/design/workq.md, 3:
 *                      a take claims the oldest item it finds available,
 *                      and one it passed over was claimed (a delivery) or
 *                      gone.
 *
 * Also reported: acquisitions, leaderships, stale_rejected (fence-reject
 * count), faults and their kinds, foreign (the foreign actor's contenders,
 * writes and deletes), handover_p99_ms (release or kill of a
 * holder with a waiter queued, to the next grant), fn_runs (leader
 * functions), effects (attempts) and effects_refused (by the fence). An
 * effect the fence admitted below one it admitted before counts as a
 * fencing violation. -v prints each violation to stderr.
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ZKR_EINDOUBT of zkr.h, as logged (this checker reads numbers only). */
#define IN_DOUBT_RC (-1016)

struct ev {
    long long t; /* ns */
    long pid;
    char sid[24];
    char what[16];
    char a[64];
    long long b;
    long long c; /* queue events only (0 when absent) */
    char d[80];  /* queue events only ("" when absent) */
    long order;  /* position in input, for a stable sort */
};

struct proc {
    long pid;
    long long epoch;    /* of its current leadership */
    int deposed;        /* its leader node was deleted by someone else */
    int fn;             /* a leader function (fn-start) is running */
    int fn_impaired;    /* ... and was paused since it started */
    int fd_on;          /* its witness saw the stop descriptor readable */
    long long check_t;  /* its last check: time (ns), */
    long long check_v;  /* valid_ms then, */
    int check_knew;     /* whether the descriptor was seen readable, */
    int check_paused;   /* and whether it was paused since */
    int beside;         /* counted as acting beside a newer leader */
    int susp;           /* its session is suspended (s-suspend) */
    long long bad_t;    /* last time its link was impaired (ns) */
    int holding;        /* granted, not released, lost or killed */
    int impaired;       /* suspended, paused or killed since the grant */
    int paused;         /* frozen by the driver right now */
    int waiting;        /* enqueued, not yet granted */
    int leader;         /* leader-on, no leader-off yet */
    int dead;           /* killed or exited */
    long long seq;      /* sequence of the current grant */
    int qpaused;        /* paused since its last take-start */
    long long qlast[4]; /* per level: 1 + the position (bucket, seq) of its
                           last first delivery taken (0: none) */
    char cur_sid[24];   /* session of its last event ("" none yet) */
};

static struct ev *evs;
static size_t nev, capev;
static struct proc *procs;
static size_t nproc, capproc;
static int verbose;
static long long session_ns, grace_ns, margin_ns;
static int link_faults;      /* link faults going on now */
static long long link_bad_t; /* last start or stop of one (ns) */

static struct proc *proc_of(long pid)
{
    for (size_t i = 0; i < nproc; i++)
        if (procs[i].pid == pid)
            return &procs[i];
    if (nproc == capproc) {
        capproc = capproc ? capproc * 2 : 64;
        procs = realloc(procs, capproc * sizeof(*procs));
        if (procs == NULL)
            exit(3);
    }
    memset(&procs[nproc], 0, sizeof(procs[0]));
    procs[nproc].pid = pid;
    procs[nproc].bad_t = LLONG_MIN;
    return &procs[nproc++];
}

static int read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];

    if (f == NULL) {
        perror(path);
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        struct ev e;

        memset(&e, 0, sizeof(e));
        if (sscanf(line, "%lld %ld %23s %15s %63s %lld %lld %79s", &e.t, &e.pid,
                   e.sid, e.what, e.a, &e.b, &e.c, e.d) < 4)
            continue; /* a torn last line of a killed process */
        if (nev == capev) {
            capev = capev ? capev * 2 : 4096;
            evs = realloc(evs, capev * sizeof(*evs));
            if (evs == NULL)
                exit(3);
        }
        e.order = (long)nev;
        evs[nev++] = e;
    }
    fclose(f);
    return 0;
}

static int by_time(const void *x, const void *y)
{
    const struct ev *a = x, *b = y;

    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int cmp_ll(const void *x, const void *y)
{
    long long a = *(const long long *)x, b = *(const long long *)y;

    return a < b ? -1 : a > b;
}

static void violation(const struct ev *e, const char *what, long other)
{
    if (verbose)
        fprintf(stderr, "zkr-check: %s at %lld ns: pid %ld %s %s (other %ld)\n",
                what, e->t, e->pid, e->what, e->a, other);
}

/* Leader nodes deleted by someone else than their owner (the driver's
 * op-delete, or a foreign-delete of an election node): epoch and time. */
struct ousting {
    long long epoch;
    long long t;
};
static struct ousting *ousted;
static size_t nousted, capousted;

static void oust(long long epoch, long long t)
{
    if (nousted == capousted) {
        capousted = capousted ? capousted * 2 : 64;
        ousted = realloc(ousted, capousted * sizeof(*ousted));
        if (ousted == NULL)
            exit(3);
    }
    ousted[nousted].epoch = epoch;
    ousted[nousted++].t = t;
    for (size_t i = 0; i < nproc; i++)
        if (procs[i].leader && procs[i].epoch == epoch)
            procs[i].deposed = 1;
}

/* Time of the first ousting of epoch, or -1. */
static long long ousted_at(long long epoch)
{
    for (size_t i = 0; i < nousted; i++)
        if (ousted[i].epoch == epoch)
            return ousted[i].t;
    return -1;
}

/* Whether p's link may have been impaired at a time that can explain not
 * hearing of a deletion at td until now: a link fault on now, or one that
 * started or stopped since GRACE_MS before td (the proxy may still be
 * passing on what it held back); or p suspended or paused now, or
 * suspended, reconnected, lost, paused or thawed since td. A fault that
 * ended earlier, or a suspension that ended in a reconnection before td,
 * does not count: p's watches were set again at the reconnection. */
static int link_impaired(const struct proc *p, long long td)
{
    return link_faults > 0 || link_bad_t >= td - grace_ns || p->susp ||
           p->paused || p->bad_t >= td;
}

/* Whether an effect attempt by p with epoch x at time t, after a newer
 * leader's effect, is excused (see fn_interleavings at the top): p was
 * paused between its check and the attempt; the valid_ms it saw at the
 * check had run out by the attempt; or x's node was deleted by someone
 * else before the attempt, and at the check p's descriptor had not been
 * seen readable and the deletion was at most GRACE_MS old (SESSION_MS if
 * p's link was impaired). */
static int excused(const struct proc *p, long long x, long long t)
{
    long long td = ousted_at(x);

    if (p->check_paused || t - p->check_t > p->check_v * 1000000LL)
        return 1;
    if (td < 0 || td > t || p->check_knew)
        return 0;
    return p->check_t < td + (link_impaired(p, td) ? session_ns : grace_ns);
}

/* Whether a fault kind may impair the links of all processes (pause and
 * kill are judged per process; delete-leader is no link fault). */
static int link_fault(const char *kind)
{
    return strcmp(kind, "delete-leader") != 0 && strcmp(kind, "pause") != 0 &&
           strcmp(kind, "kill") != 0;
}

/* The foreign actor's contenders alive now, and the waiting nodes it
 * deleted: czxid and kind (0 lock, 1 election). */
struct fnode {
    long long czxid;
    long long kind;
};
static struct fnode *alive, *gone;
static size_t nalive, ngone, capalive, capgone;
static long foreign_joins, foreign_writes, foreign_deletes;

static void fpush(struct fnode **v, size_t *n, size_t *cap, long long czxid,
                  long long kind)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *v = realloc(*v, *cap * sizeof(**v));
        if (*v == NULL)
            exit(3);
    }
    (*v)[*n].czxid = czxid;
    (*v)[(*n)++].kind = kind;
}

static void foreign_event(const struct ev *e, long long czxid)
{
    if (strcmp(e->what, "foreign-on") == 0) {
        fpush(&alive, &nalive, &capalive, czxid, e->b);
        foreign_joins++;
    } else if (strcmp(e->what, "foreign-off") == 0) {
        for (size_t i = 0; i < nalive; i++)
            if (alive[i].czxid == czxid && alive[i].kind == e->b)
                alive[i--] = alive[--nalive];
    } else if (strcmp(e->what, "foreign-lost") == 0) {
        nalive = 0; /* its session expired: its nodes are gone */
    } else if (strcmp(e->what, "foreign-write") == 0) {
        foreign_writes++;
    } else if (strcmp(e->what, "foreign-delete") == 0) {
        fpush(&gone, &ngone, &capgone, czxid, e->b);
        foreign_deletes++;
        if (e->b == 1)
            oust(czxid, e->t);
        for (size_t i = 0; i < nalive; i++) /* another actor's: gone */
            if (alive[i].czxid == czxid && alive[i].kind == e->b)
                alive[i--] = alive[--nalive];
    }
}

/* A grant (kind 0) or leadership (kind 1) with token: not past a foreign
 * contender created before it that is still there (it holds or waits
 * before us), and not on a node that was deleted as a waiter. */
static void foreign_check(const struct ev *e, long long token, int kind,
                          long *overtaken, long *deleted)
{
    for (size_t i = 0; i < nalive; i++) {
        if (alive[i].kind == kind && alive[i].czxid < token) {
            (*overtaken)++;
            violation(e, "granted past a foreign contender", -1);
            break;
        }
    }
    for (size_t i = 0; i < ngone; i++) {
        if (gone[i].kind == kind && gone[i].czxid == token) {
            (*deleted)++;
            violation(e, "granted on a deleted node", -1);
            break;
        }
    }
}

/* A new leadership of p: the other leaders that are not excused (paused
 * now, killed, their node deleted by someone else, or running a leader
 * function that was paused since it started: its effects are judged
 * instead). */
static long other_leaders(const struct proc *p, const struct ev *e)
{
    long n = 0;

    for (size_t k = 0; k < nproc; k++) {
        const struct proc *q = &procs[k];

        if (q != p && q->leader && !q->paused && !q->dead && !q->deposed &&
            !(q->fn && q->fn_impaired)) {
            n++;
            violation(e, "double leader", q->pid);
        }
    }
    return n;
}

/* ---------------------------------------------------------------- queues */

/* One taken delivery of an item: its claim's token and delivery count. */
struct take {
    long long token; /* -1: the consumer could not read it */
    long long delivery;
};

/* What the history says of one item, by its key (the payload the producer
 * gave it: it survives nack-to-back and dead-lettering, the node does
 * not). */
struct item {
    char *key;
    int put_ok;              /* put returned 0 */
    int acks_ok;             /* ack returned 0 */
    int nacks_ok;            /* nack returned 0 */
    int snap_items;          /* in the queue at the end */
    int snap_dead;           /* dead-lettered at the end */
    long long snap_delivery; /* highest delivery count at the end */
    long long max_token;     /* highest token of a take logged so far */
    long long pending_ack;   /* ack-start's token, no result logged yet */
    long long *ack_tokens;   /* tokens of the acks that returned 0 */
    struct take *takes;
    size_t ntakes, captakes, nack_tokens;
};

static struct item **items; /* open addressing, capitems slots */
static size_t nitems, capitems;

static size_t key_hash(const char *k)
{
    size_t h = 5381;

    while (*k != '\0')
        h = h * 33 + (unsigned char)*k++;
    return h;
}

static struct item *item_of(const char *key)
{
    size_t i;

    if (2 * (nitems + 1) > capitems) {
        size_t cap = capitems ? capitems * 2 : 1024;
        struct item **v = calloc(cap, sizeof(*v));

        if (v == NULL)
            exit(3);
        for (size_t k = 0; k < capitems; k++) {
            if (items[k] == NULL)
                continue;
            for (i = key_hash(items[k]->key) % cap; v[i] != NULL;
                 i = (i + 1) % cap)
                ;
            v[i] = items[k];
        }
        free(items);
        items = v;
        capitems = cap;
    }
    for (i = key_hash(key) % capitems; items[i] != NULL; i = (i + 1) % capitems)
        if (strcmp(items[i]->key, key) == 0)
            return items[i];
    items[i] = calloc(1, sizeof(**items));
    if (items[i] == NULL || (items[i]->key = strdup(key)) == NULL)
        exit(3);
    items[i]->max_token = LLONG_MIN;
    items[i]->pending_ack = LLONG_MIN;
    nitems++;
    return items[i];
}

/* Sessions seen in the history: the process whose events carried it,
 * and when it ended (-1: not known to have ended). A session ends when
 * its process is killed or exits, or when the process's events carry a
 * new session (zkr opens one after LOST). */
struct sess {
    char sid[24];
    long pid;
    long long end_t;
};
static struct sess *sessions;
static size_t nsessions, capsessions;

static struct sess *sess_of(const char *sid)
{
    for (size_t i = 0; i < nsessions; i++)
        if (strcmp(sessions[i].sid, sid) == 0)
            return &sessions[i];
    return NULL;
}

/* p's event e: p's session is e's. */
static void sess_note(struct proc *p, const struct ev *e)
{
    struct sess *s;

    if (strcmp(e->sid, "0") == 0 || strcmp(e->sid, p->cur_sid) == 0)
        return;
    if (p->cur_sid[0] != '\0' && (s = sess_of(p->cur_sid)) != NULL &&
        s->end_t < 0)
        s->end_t = e->t;
    snprintf(p->cur_sid, sizeof(p->cur_sid), "%s", e->sid);
    if (sess_of(e->sid) != NULL)
        return;
    if (nsessions == capsessions) {
        capsessions = capsessions ? capsessions * 2 : 64;
        sessions = realloc(sessions, capsessions * sizeof(*sessions));
        if (sessions == NULL)
            exit(3);
    }
    snprintf(sessions[nsessions].sid, sizeof(sessions[0].sid), "%s", e->sid);
    sessions[nsessions].pid = p->pid;
    sessions[nsessions++].end_t = -1;
}

/* p died (killed, or exited) at t: its session ends. */
static void sess_end(const struct proc *p, long long t)
{
    struct sess *s = sess_of(p->cur_sid);

    if (s != NULL && s->end_t < 0)
        s->end_t = t;
}

static struct {
    long puts, put_errors, takes, acks, acks_stale, nacks, nacks_stale;
    long queued, dead;
    long lost, double_acks, superseded, delivery_regr, token_regr;
    long dead_claims, claims_unjudged, acked_present, duplicates;
    long in_doubt, order_inv;
    int snapshot;     /* a complete snapshot (snap-end) was read */
    long long snap_t; /* its start */
} qs;

static void take_push(struct item *it, long long token, long long delivery)
{
    if (it->ntakes == it->captakes) {
        it->captakes = it->captakes ? it->captakes * 2 : 4;
        it->takes = realloc(it->takes, it->captakes * sizeof(*it->takes));
        if (it->takes == NULL)
            exit(3);
    }
    it->takes[it->ntakes].token = token;
    it->takes[it->ntakes++].delivery = delivery;
}

/* The level and position in put order (bucket, then sequence number) of
 * an item id "q<L>/b<%010d>/i-<carry>-<uuid>-<seq>": 0, or -1. */
static int qid_position(const char *id, int *level, long long *pos)
{
    const char *dash = strrchr(id, '-');
    long long b, seq;
    char *end;

    if (id[0] != 'q' || id[1] < '0' || id[1] > '3' || id[2] != '/' ||
        id[3] != 'b' || dash == NULL)
        return -1;
    b = strtoll(id + 4, &end, 10);
    if (*end != '/')
        return -1;
    seq = strtoll(dash + 1, &end, 10);
    if (*end != '\0' || b < 0 || seq < 0)
        return -1;
    *level = id[1] - '0';
    *pos = (b << 32) + seq;
    return 0;
}

/* One queue event, in time order. Returns 0 if e is none. */
static int queue_event(struct proc *p, const struct ev *e)
{
    struct item *it;
    long long pos;
    int lvl;

    if (strcmp(e->what, "take-start") == 0) {
        p->qpaused = p->paused;
        return 1;
    }
    if (strcmp(e->what, "snap-begin") == 0) {
        qs.snap_t = e->t;
        return 1;
    }
    if (strcmp(e->what, "snap-end") == 0) {
        qs.snapshot = 1;
        return 1;
    }
    if (strcmp(e->what, "put") != 0 && strcmp(e->what, "take") != 0 &&
        strcmp(e->what, "ack-start") != 0 && strcmp(e->what, "ack") != 0 &&
        strcmp(e->what, "nack") != 0 && strcmp(e->what, "snap-item") != 0 &&
        strcmp(e->what, "snap-dead") != 0)
        return 0;
    it = item_of(e->a);
    if (strcmp(e->what, "put") == 0) {
        /* b: put's rc. Not 0: it may or may not have been put. */
        if (e->b == 0) {
            qs.puts++;
            it->put_ok++;
        } else {
            qs.put_errors++;
        }
    } else if (strcmp(e->what, "take") == 0) {
        /* b: delivery count, c: token. A token at or below one already
         * logged for this item: its claim came after the other one's
         * (czxids only grow), so the other take's report must have been
         * late, which a process frozen since it began to take explains;
         * anything else cannot. */
        qs.takes++;
        if (e->c >= 0 && it->max_token != LLONG_MIN &&
            (e->c == it->max_token || (e->c < it->max_token && !p->qpaused))) {
            qs.token_regr++;
            violation(e, "item token not above an earlier take's", -1);
        }
        if (e->c > it->max_token)
            it->max_token = e->c;
        take_push(it, e->c, e->b);
        /* A consumer's first deliveries of one level come in put order
         * (docs/design/workq.md, 3): an item it passed over was claimed
         * by another (which counts a delivery), or gone. */
        if (e->b == 1 && qid_position(e->d, &lvl, &pos) == 0) {
            if (p->qlast[lvl] > pos) { /* stored as 1 + position */
                qs.order_inv++;
                violation(e,
                          "a consumer's first delivery before one put "
                          "earlier",
                          -1);
            }
            if (pos + 1 > p->qlast[lvl])
                p->qlast[lvl] = pos + 1;
        }
    } else if (strcmp(e->what, "ack-start") == 0) {
        it->pending_ack = e->c;
    } else if (strcmp(e->what, "ack") == 0) {
        /* b: rc, c: the token of the claim it acked. ZKR_EINDOUBT: the
         * answer was lost with the session: as if never logged. */
        if (it->pending_ack == e->c && e->b != IN_DOUBT_RC)
            it->pending_ack = LLONG_MIN;
        if (e->b == IN_DOUBT_RC) {
            ; /* counted in acks_in_doubt if the item is gone at the end */
        } else if (e->b == 0) {
            qs.acks++;
            it->acks_ok++;
            it->ack_tokens = realloc(it->ack_tokens,
                                     (it->nack_tokens + 1) * sizeof(long long));
            if (it->ack_tokens == NULL)
                exit(3);
            it->ack_tokens[it->nack_tokens++] = e->c;
        } else {
            qs.acks_stale++;
        }
    } else if (strcmp(e->what, "nack") == 0) {
        if (e->b == 0) {
            qs.nacks++;
            it->nacks_ok++;
        } else {
            qs.nacks_stale++;
        }
    } else {
        /* snap-item KEY DELIVERIES CLAIM_TOKEN SID|- (after the run), or
         * snap-dead KEY DELIVERIES. */
        int dead = strcmp(e->what, "snap-dead") == 0;

        if (dead) {
            qs.dead++;
            it->snap_dead++;
        } else {
            qs.queued++;
            it->snap_items++;
        }
        /* A dead letter is a new node: its count is not kept. */
        if (!dead && e->b > it->snap_delivery)
            it->snap_delivery = e->b;
        if (!dead && e->d[0] != '\0' && strcmp(e->d, "-") != 0) {
            const struct sess *s = sess_of(e->d);

            if (s == NULL ||
                (s->end_t >= 0 && e->t - s->end_t > session_ns + margin_ns)) {
                qs.dead_claims++;
                violation(e, "item claimed by a dead session",
                          s != NULL ? s->pid : -1);
            } else if (s->end_t >= 0) {
                qs.claims_unjudged++; /* ended too recently to tell */
            }
        }
    }
    return 1;
}

static int by_token(const void *x, const void *y)
{
    const struct take *a = x, *b = y;

    return a->token < b->token ? -1 : a->token > b->token;
}

/* The rules judged over the whole run, per item. */
static void queue_judge(void)
{
    struct ev e;

    memset(&e, 0, sizeof(e));
    snprintf(e.what, sizeof(e.what), "item");
    for (size_t k = 0; k < capitems; k++) {
        struct item *it = items[k];
        long long last = 0;
        int present;

        if (it == NULL)
            continue;
        snprintf(e.a, sizeof(e.a), "%s", it->key);
        present = it->snap_items + it->snap_dead;
        /* Completion is at most once. */
        if (it->acks_ok > 1) {
            qs.double_acks += it->acks_ok - 1;
            violation(&e, "acked twice", -1);
        }
        /* A successful ack must be of the item's last claim: a take with a
         * higher token means that another consumer claimed it after this
         * claim (the ack committed while superseded), or after the ack
         * (the item came back after completion). */
        for (size_t i = 0; i < it->nack_tokens; i++) {
            for (size_t j = 0; j < it->ntakes; j++) {
                if (it->takes[j].token > it->ack_tokens[i]) {
                    qs.superseded++;
                    violation(&e, "acked by a superseded claim", -1);
                    break;
                }
            }
        }
        /* Deliveries only grow, claim after claim, and the count at the
         * end is no lower than the last delivery's. */
        if (it->ntakes > 1) /* takes is NULL for an item never taken */
            qsort(it->takes, it->ntakes, sizeof(*it->takes), by_token);
        for (size_t j = 0; j < it->ntakes; j++) {
            if (it->takes[j].token < 0)
                continue;
            if (it->takes[j].delivery <= last) {
                qs.delivery_regr++;
                violation(&e, "delivery count not above the last", -1);
            }
            last = it->takes[j].delivery;
        }
        if (it->snap_items > 0 && it->snap_delivery < last) {
            qs.delivery_regr++;
            violation(&e, "delivery count went back by the end", -1);
        }
        if (!qs.snapshot)
            continue;
        /* Nothing lost: an item that was put is acked, still queued or
         * dead-lettered at the end; once, and not both. */
        if ((it->put_ok > 0 || it->ntakes > 0) && it->acks_ok == 0 &&
            present == 0) {
            /* Unless an ack of its last claim was sent and its consumer
             * died before it could log the answer: it may have
             * committed. */
            if (it->pending_ack != LLONG_MIN &&
                it->pending_ack >= it->max_token) {
                qs.in_doubt++;
            } else {
                qs.lost++;
                violation(&e, "item lost", -1);
            }
        }
        if (it->acks_ok > 0 && present > 0) {
            qs.acked_present++;
            violation(&e, "acked yet still there at the end", -1);
        }
        if (present > 1) {
            qs.duplicates += present - 1;
            violation(&e, "there more than once at the end", -1);
        }
    }
}

static void queue_free(void)
{
    for (size_t k = 0; k < capitems; k++) {
        if (items[k] == NULL)
            continue;
        free(items[k]->key);
        free(items[k]->takes);
        free(items[k]->ack_tokens);
        free(items[k]);
    }
    free(items);
    free(sessions);
}

int main(int argc, char **argv)
{
    long long session_ms = 10000, margin_ms = 5000, grace_ms = 500;
    long long delay_ms = 0;
    long early = 0, delayed = 0;
    long long clean_from = -1; /* ns of a clean release with a waiter */
    long mutex = 0, fencing = 0, fifo = 0, late = 0, leaders = 0, epochs = 0;
    long grants = 0, stale = 0, faults = 0, terms = 0, tokens = 0;
    long deleted = 0, fn_runs = 0, attempts = 0, refused = 0, interleaved = 0;
    long long highest_fence = 0, last_seq = 0, last_epoch = 0, last_token = 0;
    long long highest_effect = 0;
    long last_epoch_pid = 0, highest_effect_pid = 0;
    int have_seq = 0;
    long long handover_from = -1; /* ns of a release/kill with a waiter */
    int handover_kill = 0;
    long long *handovers = NULL;
    size_t nho = 0;
    char kinds[512] = "";
    int opt;

    while ((opt = getopt(argc, argv, "t:m:g:D:v")) != -1) {
        switch (opt) {
        case 't':
            session_ms = atoll(optarg);
            break;
        case 'm':
            margin_ms = atoll(optarg);
            break;
        case 'g':
            grace_ms = atoll(optarg);
            break;
        case 'D':
            delay_ms = atoll(optarg);
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            fprintf(stderr, "usage: zkr-check [-t SESSION_MS] [-m MARGIN_MS] "
                            "[-g GRACE_MS] [-D DELAY_MS] [-v] HISTORY...\n");
            return 2;
        }
    }
    if (optind == argc)
        return 2;
    session_ns = session_ms * 1000000LL;
    margin_ns = margin_ms * 1000000LL;
    grace_ns = grace_ms * 1000000LL;
    link_bad_t = LLONG_MIN;
    for (int i = optind; i < argc; i++)
        if (read_file(argv[i]) != 0)
            return 2;
    if (nev > 1)
        qsort(evs, nev, sizeof(*evs), by_time);
    handovers = calloc(nev + 1, sizeof(*handovers));
    if (handovers == NULL)
        return 3;

    for (size_t i = 0; i < nev; i++) {
        struct ev *e = &evs[i];
        struct proc *p = proc_of(e->pid);
        long long arg = atoll(e->a);

        /* A kill waiting for its handover that took too long. */
        if (handover_from >= 0 && handover_kill &&
            e->t - handover_from >
                (session_ms + margin_ms + delay_ms) * 1000000LL) {
            late++;
            violation(e, "late handover after kill", -1);
            handover_from = -1;
        }
        sess_note(p, e);
        if (queue_event(p, e))
            continue;
        /* Anything that may delete a node without a release record, or
         * slow a handover down, ends the judgement of a clean one. */
        if (strcmp(e->what, "released") != 0 && strcmp(e->what, "grant") != 0 &&
            strcmp(e->what, "enqueue") != 0 &&
            strcmp(e->what, "release") != 0 && strcmp(e->what, "held") != 0 &&
            strncmp(e->what, "fence-", 6) != 0 &&
            !(strcmp(e->what, "exit") == 0 && !p->waiting))
            clean_from = -1;
        if (strcmp(e->what, "enqueue") == 0) {
            p->waiting = 1;
        } else if (strcmp(e->what, "grant") == 0) {
            for (size_t k = 0; k < nproc; k++) {
                struct proc *q = &procs[k];

                if (q != p && q->holding && !q->impaired) {
                    mutex++;
                    violation(e, "mutex", q->pid);
                }
            }
            /* Sequences are 32-bit serial numbers (they wrap). */
            if (have_seq &&
                (int32_t)((uint32_t)e->b - (uint32_t)last_seq) <= 0) {
                fifo++;
                violation(e, "fifo", -1);
            }
            last_seq = e->b;
            have_seq = 1;
            if (arg <= last_token) {
                tokens++;
                violation(e, "token regression", -1);
            }
            last_token = arg;
            foreign_check(e, arg, 0, &mutex, &deleted);
            if (handover_from >= 0 && handover_kill &&
                e->t - handover_from < delay_ms * 1000000LL) {
                early++;
                violation(e, "grant within the lock-delay of a kill", -1);
            }
            if (clean_from >= 0 && e->t - clean_from >= delay_ms * 1000000LL) {
                delayed++;
                violation(e, "grant delayed after a clean release", -1);
            }
            clean_from = -1;
            if (handover_from >= 0) {
                handovers[nho++] = e->t - handover_from;
                handover_from = -1;
            }
            grants++;
            p->holding = 1;
            p->impaired = p->paused;
            p->waiting = 0;
            p->seq = e->b;
        } else if (strcmp(e->what, "release") == 0) {
            int waiter = 0;

            for (size_t k = 0; k < nproc; k++)
                waiter |= &procs[k] != p && procs[k].waiting &&
                          !procs[k].dead && !procs[k].paused;
            if (p->holding && !p->impaired && waiter && handover_from < 0) {
                handover_from = e->t;
                handover_kill = 0;
            }
            p->holding = 0;
        } else if (strcmp(e->what, "released") == 0) {
            if (delay_ms > 0 && handover_from >= 0 && !handover_kill &&
                link_faults == 0)
                clean_from = e->t;
        } else if (strcmp(e->what, "suspend") == 0) {
            p->impaired = 1;
        } else if (strncmp(e->what, "s-", 2) == 0) {
            p->susp = strcmp(e->what, "s-suspend") == 0;
            p->bad_t = e->t;
        } else if (strcmp(e->what, "held") == 0) {
            /* Verified again after a suspension: in use again, unless it
             * was paused meanwhile (a zombie does not count as in use). */
            if (p->holding && !p->paused)
                p->impaired = 0;
        } else if (strcmp(e->what, "lost") == 0) {
            p->holding = 0;
        } else if (strcmp(e->what, "giveup") == 0) {
            p->waiting = 0;
        } else if (strcmp(e->what, "exit") == 0) {
            p->holding = p->waiting = p->leader = 0;
            p->dead = 1;
            sess_end(p, e->t);
        } else if (strcmp(e->what, "fence-ok") == 0) {
            if (arg < highest_fence) {
                fencing++;
                violation(e, "fencing", -1);
            } else {
                highest_fence = arg;
            }
        } else if (strcmp(e->what, "fence-reject") == 0) {
            stale++;
        } else if (strcmp(e->what, "leader-on") == 0 ||
                   strcmp(e->what, "fn-start") == 0) {
            int fn = e->what[0] == 'f';
            /* The same leadership's function again (re-verified after a
             * suspension), with no other leader between. */
            int again = fn && arg == last_epoch && p->pid == last_epoch_pid;

            leaders += other_leaders(p, e);
            if (arg <= last_epoch && !again) {
                epochs++;
                violation(e, "epoch regression", -1);
            }
            foreign_check(e, arg, 1, &leaders, &deleted);
            last_epoch = arg;
            last_epoch_pid = p->pid;
            p->leader = 1;
            p->epoch = arg;
            p->deposed = ousted_at(arg) >= 0;
            if (fn) {
                p->fn = 1;
                p->fn_impaired = p->paused;
                p->fd_on = 0;
                p->beside = 0;
                fn_runs++;
            }
            terms += !again;
        } else if (strcmp(e->what, "leader-off") == 0 ||
                   strcmp(e->what, "fn-return") == 0) {
            p->leader = 0;
            p->fn = 0;
        } else if (strcmp(e->what, "fd-on") == 0) {
            p->fd_on = 1;
        } else if (strcmp(e->what, "fd-off") == 0) {
            p->fd_on = 0;
        } else if (strcmp(e->what, "check") == 0) {
            p->check_t = e->t;
            p->check_v = e->b;
            p->check_knew = p->fd_on;
            p->check_paused = p->paused;
        } else if (strcmp(e->what, "effect") == 0 ||
                   strcmp(e->what, "effect-reject") == 0) {
            long long td = ousted_at(arg);

            attempts++;
            if (arg < highest_effect && !excused(p, arg, e->t)) {
                interleaved++;
                violation(e, "leader functions interleave", highest_effect_pid);
            } else if (td >= 0 && td <= e->t && last_epoch > arg && p->fn &&
                       !p->beside && !excused(p, arg, e->t)) {
                p->beside = 1;
                leaders++;
                violation(e, "deposed function acts beside a newer leader",
                          last_epoch_pid);
            }
            if (strcmp(e->what, "effect-reject") == 0) {
                refused++;
            } else if (arg < highest_effect) {
                fencing++;
                violation(e, "fencing (effects)", -1);
            } else {
                highest_effect = arg;
                highest_effect_pid = p->pid;
            }
        } else if (strcmp(e->what, "op-delete") == 0) {
            oust(arg, e->t);
        } else if (strcmp(e->what, "pause") == 0 ||
                   strcmp(e->what, "unpause") == 0 ||
                   strcmp(e->what, "kill") == 0) {
            struct proc *q = proc_of((long)arg);
            int waiter = 0;

            p = NULL; /* proc_of may have moved the array */
            if (strcmp(e->what, "unpause") == 0) {
                q->bad_t = e->t;
                q->paused = 0;
                continue;
            }
            q->bad_t = e->t;
            q->paused = 1;
            q->qpaused = 1;
            q->impaired |= q->holding;
            q->fn_impaired |= q->fn;
            q->check_paused = 1;
            if (strcmp(e->what, "kill") != 0)
                continue;
            for (size_t k = 0; k < nproc; k++)
                waiter |= &procs[k] != q && procs[k].waiting &&
                          !procs[k].dead && !procs[k].paused;
            if (q->holding && waiter && handover_from < 0) {
                handover_from = e->t;
                handover_kill = 1;
            }
            q->holding = q->waiting = q->leader = 0;
            q->dead = 1;
            sess_end(q, e->t);
        } else if (strncmp(e->what, "foreign-", 8) == 0) {
            foreign_event(e, arg);
        } else if (strcmp(e->what, "fault-stop") == 0) {
            if (link_fault(e->a) && link_faults > 0) {
                link_faults--;
                link_bad_t = e->t;
            }
        } else if (strcmp(e->what, "fault-start") == 0) {
            if (link_fault(e->a)) {
                link_faults++;
                link_bad_t = e->t;
            }
            faults++;
            if (strstr(kinds, e->a) == NULL &&
                strlen(kinds) + strlen(e->a) + 2 < sizeof(kinds)) {
                if (kinds[0] != '\0')
                    strcat(kinds, ",");
                strcat(kinds, e->a);
            }
        }
    }
    if (handover_from >= 0 && handover_kill) {
        late++;
        if (verbose)
            fprintf(stderr, "zkr-check: no grant after the last kill\n");
    }
    queue_judge();
    if (qs.puts > 0 && !qs.snapshot && verbose)
        fprintf(stderr, "zkr-check: items were put but no snapshot of the "
                        "queue at the end (snap-end): items_lost not judged\n");
    if (nho > 1)
        qsort(handovers, nho, sizeof(*handovers), cmp_ll);
    printf("events=%zu acquisitions=%ld leaderships=%ld faults=%ld kinds=%s "
           "mutex_violations=%ld fencing_violations=%ld stale_rejected=%ld "
           "fifo_inversions=%ld late_handovers=%ld double_leaders=%ld "
           "epoch_regressions=%ld deleted_grants=%ld token_regressions=%ld "
           "foreign=%ld/%ld/%ld handover_p99_ms=%lld fn_runs=%ld "
           "effects=%ld effects_refused=%ld fn_interleavings=%ld "
           "early_grants=%ld delayed_grants=%ld",
           nev, grants, terms, faults, kinds[0] ? kinds : "none", mutex,
           fencing, stale, fifo, late, leaders, epochs, deleted, tokens,
           foreign_joins, foreign_writes, foreign_deletes,
           nho ? handovers[(nho - 1) * 99 / 100] / 1000000 : 0, fn_runs,
           attempts, refused, interleaved, early, delayed);
    if (qs.puts + qs.put_errors + qs.takes + qs.queued + qs.dead > 0)
        printf(" queue: puts=%ld put_errors=%ld takes=%ld acks=%ld "
               "acks_refused=%ld nacks=%ld nacks_refused=%ld queued=%ld "
               "dead_letters=%ld "
               "snapshot=%d items_lost=%ld double_acks=%ld "
               "superseded_acks=%ld delivery_regressions=%ld "
               "item_token_regressions=%ld dead_claims=%ld "
               "claims_unjudged=%ld acked_present=%ld duplicate_items=%ld "
               "acks_in_doubt=%ld consumer_order_inversions=%ld",
               qs.puts, qs.put_errors, qs.takes, qs.acks, qs.acks_stale,
               qs.nacks, qs.nacks_stale, qs.queued, qs.dead, qs.snapshot,
               qs.lost, qs.double_acks, qs.superseded, qs.delivery_regr,
               qs.token_regr, qs.dead_claims, qs.claims_unjudged,
               qs.acked_present, qs.duplicates, qs.in_doubt, qs.order_inv);
    printf("\n");
    free(handovers);
    free(evs);
    free(procs);
    free(alive);
    free(gone);
    free(ousted);
    queue_free();
    return mutex || fencing || fifo || late || leaders || epochs || deleted ||
                   tokens || interleaved || early || delayed ||
                   (qs.puts > 0 && !qs.snapshot) || qs.lost || qs.double_acks ||
                   qs.superseded || qs.delivery_regr || qs.token_regr ||
                   qs.dead_claims || qs.acked_present || qs.duplicates ||
                   qs.order_inv
               ? 1
               : 0;
}
