/* Internal interfaces of zkr. Not installed. Names use the zkr__ prefix. */
#ifndef ZKR_INTERNAL_H
#define ZKR_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zkr.h"

/* ------------------------------------------------ fault injection seam */

/* SQLite-style fault injection, for tests (tests/fault/test_faultinj.c):
 * every allocation zkr makes and every ZooKeeper call it issues passes a
 * numbered fault point; once armed, the nth point of the armed kinds fails
 * (an allocation returns NULL, a ZooKeeper call returns the armed code
 * without being sent). Unarmed, a point costs one relaxed atomic load.
 * The macros below route the calls, so no call site names the seam. */
enum { ZKR__FAULT_ALLOC = 1, ZKR__FAULT_ZK = 2 };
/* Arms: the nth point (1-based) of kinds fails, and with persist every
 * later one too; zkrc is what a failing ZooKeeper call returns. n = 0 (or
 * kinds = 0) disarms. Resets the count of points passed. */
void zkr__fault_arm(int kinds, long n, int persist, int zkrc);
long zkr__fault_points(void); /* points of the armed kinds passed */
long zkr__fault_fired(void);  /* of them, how many failed */
int zkr__fault(int kind);     /* 1: this point fails */
int zkr__fault_rc(void);      /* the armed ZooKeeper code */
/* Link seams for tests, empty (weak) in the library: a test program linked
 * with libzkr_core.la defines its own to act at those points. Called when
 * an armed fault point fails (tests/fault/test_faultinj.c prints where);
 * and where another thread's election leave() can interleave with join()
 * or run() (tests/integration/test_election.c sleeps there to make those
 * races reproducible). The shipped library reads no test setting. */
void zkr__fault_fired_at(void);
void zkr__election_race_point(void);
void *zkr__fault_malloc(size_t n);
void *zkr__fault_calloc(size_t n, size_t size);
void *zkr__fault_realloc(void *p, size_t n);
/* The ZooKeeper call trace, for tests that check the order of requests
 * (a rule such as "sync the path before searching it"): once started,
 * every ZooKeeper call zkr issues appends "name path\n" (path "-" for the
 * calls that take none), and zkr__trace_note adds events ("connected"
 * when a connection is established), until the trace holds
 * ZKR__TRACE_MAX bytes. zkr__trace_take copies it out, NUL-terminated,
 * and stops it. Unstarted, a note costs one relaxed atomic load. */
enum { ZKR__TRACE_MAX = 65536 };
void zkr__trace_start(void);
void zkr__trace_take(char *out, size_t size);
void zkr__trace_note(const char *what, const char *path);
int zkr__fault_zk(const char *fn, const char *path); /* 1: fails */

#ifndef ZKR__FAULT_IMPL
#define malloc(n) zkr__fault_malloc(n)
#define calloc(n, size) zkr__fault_calloc(n, size)
#define realloc(p, n) zkr__fault_realloc(p, n)
#define strdup(s) zkr__strdup(s)
/* A ZooKeeper call that fails before being sent, and is traced: with its
 * path (ZKR__FAULT_PCALL, for calls whose second argument is one) or
 * without. */
#define ZKR__FAULT_CALL(fn, ...)                                               \
    (zkr__fault_zk(#fn, NULL) ? zkr__fault_rc() : (fn)(__VA_ARGS__))
#define ZKR__FAULT_PCALL(fn, zh, path, ...)                                    \
    (zkr__fault_zk(#fn, path) ? zkr__fault_rc() : (fn)(zh, path, __VA_ARGS__))
/* An asynchronous call: its op (the completion's data, always a zkr__op_t)
 * is also registered as in flight on zh once the call is accepted (see
 * zkr__op_sent), with its completion cb of the given kind. */
#define ZKR__ASYNC(kind, fn, zh, cb, op, ...)                                  \
    zkr__op_sent(ZKR__FAULT_PCALL(fn, zh, __VA_ARGS__, cb, op), (op), (zh),    \
                 (kind), (void (*)(void))(cb))
#define zoo_acreate(zh, p, v, n, acl, m, cb, op)                               \
    ZKR__ASYNC(ZKR__CB_STRING, zoo_acreate, zh, cb, op, p, v, n, acl, m)
#define zoo_acreate2(zh, p, v, n, acl, m, cb, op)                              \
    ZKR__ASYNC(ZKR__CB_STRING_STAT, zoo_acreate2, zh, cb, op, p, v, n, acl, m)
#define zoo_adelete(zh, p, ver, cb, op)                                        \
    ZKR__ASYNC(ZKR__CB_VOID, zoo_adelete, zh, cb, op, p, ver)
#define zoo_aexists(zh, p, w, cb, op)                                          \
    ZKR__ASYNC(ZKR__CB_STAT, zoo_aexists, zh, cb, op, p, w)
#define zoo_awexists(zh, p, w, wctx, cb, op)                                   \
    ZKR__ASYNC(ZKR__CB_STAT, zoo_awexists, zh, cb, op, p, w, wctx)
#define zoo_aget(zh, p, w, cb, op)                                             \
    ZKR__ASYNC(ZKR__CB_DATA, zoo_aget, zh, cb, op, p, w)
#define zoo_awget(zh, p, w, wctx, cb, op)                                      \
    ZKR__ASYNC(ZKR__CB_DATA, zoo_awget, zh, cb, op, p, w, wctx)
#define zoo_aset(zh, p, b, n, ver, cb, op)                                     \
    ZKR__ASYNC(ZKR__CB_STAT, zoo_aset, zh, cb, op, p, b, n, ver)
#define zoo_aget_children(zh, p, w, cb, op)                                    \
    ZKR__ASYNC(ZKR__CB_STRINGS, zoo_aget_children, zh, cb, op, p, w)
#define zoo_awget_children(zh, p, w, wctx, cb, op)                             \
    ZKR__ASYNC(ZKR__CB_STRINGS, zoo_awget_children, zh, cb, op, p, w, wctx)
#define zoo_aget_acl(zh, p, cb, op)                                            \
    ZKR__ASYNC(ZKR__CB_ACL, zoo_aget_acl, zh, cb, op, p)
#define zoo_aget_children2(zh, p, w, cb, op)                                   \
    ZKR__ASYNC(ZKR__CB_STRINGS_STAT, zoo_aget_children2, zh, cb, op, p, w)
#define zoo_awget_children2(zh, p, w, wctx, cb, op)                            \
    ZKR__ASYNC(ZKR__CB_STRINGS_STAT, zoo_awget_children2, zh, cb, op, p, w,    \
               wctx)
#define zoo_amulti(zh, n, ops, res, cb, op)                                    \
    zkr__op_sent(ZKR__FAULT_CALL(zoo_amulti, zh, n, ops, res, cb, op), (op),   \
                 (zh), ZKR__CB_VOID, (void (*)(void))(cb))
#define zoo_async(zh, p, cb, op)                                               \
    ZKR__ASYNC(ZKR__CB_STRING, zoo_async, zh, cb, op, p)
#define zoo_aremove_all_watches(zh, p, t, local, cb, op)                       \
    ZKR__ASYNC(ZKR__CB_VOID, zoo_aremove_all_watches, zh, cb, op, p, t, local)
#define zoo_aremove_watches(zh, p, t, w, wctx, local, cb, op)                  \
    ZKR__ASYNC(ZKR__CB_VOID, zoo_aremove_watches, zh, cb, op, p, t, w, wctx,   \
               local)
#define zoo_create(zh, path, ...)                                              \
    ZKR__FAULT_PCALL(zoo_create, zh, path, __VA_ARGS__)
#define zoo_create2(zh, path, ...)                                             \
    ZKR__FAULT_PCALL(zoo_create2, zh, path, __VA_ARGS__)
#define zoo_delete(zh, path, ...)                                              \
    ZKR__FAULT_PCALL(zoo_delete, zh, path, __VA_ARGS__)
#define zoo_exists(zh, path, ...)                                              \
    ZKR__FAULT_PCALL(zoo_exists, zh, path, __VA_ARGS__)
#define zoo_get(zh, path, ...) ZKR__FAULT_PCALL(zoo_get, zh, path, __VA_ARGS__)
#define zoo_get_children(zh, path, ...)                                        \
    ZKR__FAULT_PCALL(zoo_get_children, zh, path, __VA_ARGS__)
#define zoo_multi(...) ZKR__FAULT_CALL(zoo_multi, __VA_ARGS__)
#define zoo_add_auth(...) ZKR__FAULT_CALL(zoo_add_auth, __VA_ARGS__)
/* zookeeper_init fails as it does when it cannot allocate. */
#define zookeeper_init(...)                                                    \
    (zkr__fault(ZKR__FAULT_ZK) ? (errno = ENOMEM, (zhandle_t *)NULL)           \
                               : (zookeeper_init)(__VA_ARGS__))
#endif

/* ------------------------------------------------------------ util.c */

int64_t zkr__now_ms(void);             /* CLOCK_BOOTTIME, milliseconds */
int zkr__check_path(const char *path); /* 0 or ZBADARGUMENTS */
int zkr__check_id(const char *id);     /* 0 or ZBADARGUMENTS */
void zkr__uuid(char out[37]);          /* random (version 4) UUID */
char *zkr__strdup(const char *s);
char *zkr__join(const char *dir, const char *name); /* "dir/name" */
int zkr__acl_copy(struct ACL_vector *dst, const struct ACL_vector *src);
void zkr__acl_free(struct ACL_vector *v);
int zkr__default_id(char *buf, size_t len); /* "hostname:pid" */

/* ----------------------------------------------------------- names.c */

/* Contender kinds, from the marker in the node name. */
typedef enum {
    ZKR__KIND_NONE = 0,  /* not a contender: ignored by every queue */
    ZKR__KIND_EXCLUSIVE, /* "-lock-", "__lock__", "x-<sid>-" */
    ZKR__KIND_READ,      /* "__rlock__", "__READ__" */
    ZKR__KIND_WRITE,     /* "__WRIT__" */
    ZKR__KIND_LATCH      /* "-latch-" */
} zkr__kind_t;

typedef struct zkr__entry {
    const char *name; /* borrowed from the children vector */
    int32_t seq;
    zkr__kind_t kind;
    int permits; /* semaphore size written in the name, 0 if none */
} zkr__entry_t;

/* Parses ZooKeeper's "%010d" sequence suffix: optional '-', 1..10
 * digits, within int32. 0 on success, -1 on junk. */
int zkr__parse_seq(const char *s, int32_t *out);
/* Recognises a contender name; -1 (kind NONE) when not a contender. */
int zkr__parse_name(const char *name, int32_t *seq, zkr__kind_t *kind);
/* Filters the recognised contenders of a child list and sorts them in
 * creation order: by sequence as serial numbers, starting after the widest
 * gap (names.c explains the wrap); entries sharing a sequence are next to
 * each other, and the recipe rules count them as possibly before one
 * another. *out is malloc'd (NULL if n=0). Returns 0 or ZKR_ENOMEM. */
int zkr__sort_children(const struct String_vector *v, zkr__entry_t **out,
                       int *n);
/* Index of name in v, or -1. */
int zkr__find_entry(const zkr__entry_t *v, int n, const char *name);

/* "-permits-<N>" just before the "-lock-" marker, or 0. */
int zkr__parse_permits(const char *name);
/* Is a contender's name recognisably not zkr's (and not Curator's, which
 * zkr shares: "_c_" and a UUID)? 1 or 0. */
int zkr__name_foreign(const char *name);
/* Does a contender's name announce that it touches its node once granted
 * (an election candidate with a lock-delay: UUID version digit 8)? 1/0. */
int zkr__name_announces(const char *name);
/* Notes that entry i of a listing from zkr_contenders_list() announced and
 * does not lead yet (zkr_contenders_holding() stops before it): 0 or
 * ZKR_ENOMEM. The listing's free forgets it. */
int zkr__listing_unled(const zkr_contender_t *v, int i);
void zkr__listing_forget(const zkr_contender_t *v);

/* A recipe's rule: given the sorted queue, our index and our permit count,
 * return ZKR__GRANT, or the index of the one entry (before us) whose
 * deletion or change is the next event that can change the answer (a data
 * watch), or ZKR__WATCH_DIR (a child watch on the directory: any change),
 * or ZKR__CONFLICT (the queue's contenders disagree with us: a semaphore
 * of another size on the same path). */
enum { ZKR__GRANT = -1, ZKR__WATCH_DIR = -2, ZKR__CONFLICT = -3 };
typedef int (*zkr__pred_fn)(const zkr__entry_t *v, int n, int self,
                            int permits);
int zkr__pred_mutex(const zkr__entry_t *v, int n, int self, int permits);
int zkr__pred_semaphore(const zkr__entry_t *v, int n, int self, int permits);
int zkr__pred_read(const zkr__entry_t *v, int n, int self, int permits);
/* The grant decision (decide.c): what a listing means for a contender,
 * with no I/O. */
typedef struct zkr__listing {
    const zkr__entry_t *e; /* the sorted contenders (zkr__sort_children) */
    int n;
    int self;               /* our index in e, -1 if our node is not there */
    zkr__pred_fn pred;      /* the recipe's rule */
    int permits;            /* ours (1 for a lock) */
    int poke;               /* semaphore: a grant touches its node */
    int creator_writes;     /* our ACL lets a node's creator write it */
    const char *unreadable; /* a node found unreadable, or NULL */
    const char *touchable;  /* the predecessor found touchable, or NULL */
    int self_doubt;         /* whether our node is still ours is being asked */
    int delay_due;          /* a lock-delay must be served before a grant */
    int delayed;            /* serving one (phase DELAYED) */
    int try_once;           /* timeout 0 */
} zkr__listing_t;
typedef enum {
    ZKR__D_LOST,       /* our node is gone: ZKR_ELOST */
    ZKR__D_CONFLICT,   /* another permit count on the path: ZKR_ELIMIT */
    ZKR__D_ASK_SELF,   /* granted, but ask whether our node is ours first */
    ZKR__D_DELAY,      /* granted, after a lock-delay begun now */
    ZKR__D_DELAYED,    /* granted; the delay being served decides */
    ZKR__D_GRANT,      /* held */
    ZKR__D_BUSY,       /* not granted, and only one try: ZKR_EBUSY */
    ZKR__D_WATCH_DIR,  /* wait for any change in the directory */
    ZKR__D_WATCH_NODE, /* wait for the deletion or change of e[target] */
    ZKR__D_ASK_TOUCH   /* wait on e[target] once its ACL says it can wake us */
} zkr__decision_t;
typedef struct zkr__verdict {
    zkr__decision_t what;
    int self;   /* our index in the listing, as given */
    int pred;   /* the rule's answer (ZKR__GRANT, an index, ...) */
    int target; /* the entry to watch (WATCH_NODE, ASK_TOUCH), else < 0 */
} zkr__verdict_t;
zkr__verdict_t zkr__decide(const zkr__listing_t *in);

/* How many leading entries of a sorted queue are granted, each judged by
 * the rule of its own marker (mixed queues included). */
int zkr__holding(const zkr__entry_t *v, int n);

/* --------------------------------------------------------- metrics.c */

/* Fixed histogram buckets (docs/OBSERVABILITY.md lists them): times in
 * microseconds, listings as counts. counts[i] holds the observations in
 * (bound[i-1], bound[i]]; counts[nbounds] those above the last bound. */
#define ZKR__HIST_MAX 16
typedef struct zkr__hist {
    uint64_t counts[ZKR__HIST_MAX + 1];
    uint64_t n;
    uint64_t sum; /* microseconds, or listings */
} zkr__hist_t;

/* The metrics of one (kind, path) of a session: every handle of the
 * session on that path and kind adds to it. Made when the first such
 * handle is created, kept until the session is freed, so the counts of a
 * freed handle are still written (the zkr command writes them at exit).
 * Changed only with the session mutex held, where the engine holds it. */
typedef struct zkr__mset {
    struct zkr__mset *next;  /* the session's list, newest first */
    struct zkr__mset *hnext; /* the same bucket of the index */
    uint32_t hash;           /* of kind and path (metrics.c) */
    int row;                 /* its row in the snapshot being taken */
    const char *kind; /* "lock", "read", "write", "semaphore", "election" */
    char *path;       /* never changes: read without the mutex */
    uint64_t acquired, timeouts, cancels, busy, lost_waiting, errors;
    uint64_t handoffs, suspended, lost, leader_changes;
    uint64_t held_us;  /* ended grants, in microseconds */
    uint64_t delays;   /* lock-delays served to their end */
    uint64_t delay_us; /* their total, from observation to end */
    zkr__hist_t wait, hold, lists;
} zkr__mset_t;

/* A contender's part: its entry and the times of its attempt and grant. */
typedef struct zkr__cmetrics {
    zkr__mset_t *set;
    int64_t start_us; /* the attempt began (CLOCK_BOOTTIME us) */
    int64_t grant_us; /* granted at, or -1 when not holding */
    int lists;        /* listings issued in this attempt */
} zkr__cmetrics_t;

/* The sets of a session (the engine's, metrics.c). */
typedef struct zkr__msets {
    zkr__mset_t *sets;
    zkr__mset_t **index; /* sets by hash(kind, path): nindex buckets */
    size_t nindex, nsets;
} zkr__msets_t;

/* Upper bounds of the time histograms, in microseconds (util.c). */
extern const uint64_t zkr__time_bounds[];
#define ZKR__N_TIME 16
/* Counts v in h, whose buckets have these upper bounds. */
void zkr__hist_add(zkr__hist_t *h, const uint64_t *bounds, int nb, uint64_t v);

/* A session's part. */
typedef struct zkr__smetrics {
    uint64_t suspensions, reconnects, losses;
    uint64_t records_refused;    /* releases that fell back to a plain delete */
    int64_t reconnect_margin_ms; /* at the last RECONNECTED, or -1 */
    int64_t hb_last_ms;          /* the last heartbeat's round trip, or -1 */
    zkr__hist_t hb;
} zkr__smetrics_t;

/* --------------------------------------------------------- session.c */

typedef struct zkr__contender zkr__contender_t;
typedef struct zkr__cleanup zkr__cleanup_t;
typedef struct zkr__member zkr__member_t;
typedef struct zkr__event zkr__event_t;

/* A recipe handle as the session sees it: the engine embeds one in each
 * contender (zkr__contender_t.m). The session counts what is in flight
 * for it and never looks further; everything else about it reaches the
 * engine through the session's hooks. */
struct zkr__member {
    zkr__member_t *prev, *next; /* s->members, newest first */
    uint64_t order;             /* s->attached when attached: list order */
    int busy;                   /* requests in flight (zkr__op_new) */
    int stalled;        /* a request of its could not be sent: the hooks'
                           retry takes its step again */
    int events;         /* events queued or running for it */
    int freeing;        /* freed with events due: the last of them
                           finishes the free (hooks' dispose) */
    int cleanups_owned; /* cleanup entries that tell it when done */
};

/* What the session calls in the layer above it (the engine), which hands
 * it this table when the session is made (zkr__session_open). Each is
 * called with the session's mutex held. */
typedef struct zkr__session_hooks {
    /* Bytes of the engine's per-session state (zeroed, zkr__session_engine)
     * and what frees what it holds (the session frees the bytes). */
    size_t size;
    void (*fini)(zkr_session_t *s);
    /* The session (re)connected: new_session when it is a new one. */
    void (*connected)(zkr_session_t *s, int new_session);
    /* The connection was lost (SUSPENDED). */
    void (*suspended)(zkr_session_t *s);
    /* The session is LOST. */
    void (*lost)(zkr_session_t *s);
    /* Requests that could not be sent are due again (timer thread). */
    void (*retry)(zkr_session_t *s);
    /* Timer thread: deadlines due at now; lowers *next to the next one. */
    void (*deadline)(zkr_session_t *s, int64_t now, int64_t *next);
    /* In a forked child's copy: no thread of the parent's runs here. */
    void (*forked)(zkr_session_t *s);
    /* Runs a member's event (ev->m): may unlock around the application's
     * callback; returns 1 if a callback ran. */
    int (*deliver)(zkr__event_t *ev);
    /* A freeing member's last event has run: finish its free. */
    void (*dispose)(zkr__member_t *m);
    /* An answer for m has been handled: take the step it may have
     * skipped meanwhile. */
    void (*step)(zkr__member_t *m);
    /* A cleanup entry m owns is done (rc: the delete's result). */
    void (*cleanup_done)(zkr__member_t *m, int rc);
    /* Does something above still need its watches of this type on path?
     * (A pending removal of them is then dropped.) */
    int (*watched)(zkr_session_t *s, const char *path, int wtype);
} zkr__session_hooks_t;

typedef struct zkr__listener zkr__listener_t;

/* Kinds of events delivered on the session's event thread. */
enum {
    ZKR__EV_SESSION = 1, /* session listeners, state in a */
    ZKR__EV_STATE,       /* recipe state listener, state in a */
    ZKR__EV_ACQUIRED,    /* acquire completion, rc in a */
    ZKR__EV_RELEASED,    /* release completion, rc in a */
    ZKR__EV_CALL         /* run(ev): a one-shot completion, c is NULL */
};

struct zkr__event {
    zkr__event_t *next;
    int kind;
    int a;
    zkr__member_t *m; /* NULL for session events */
    void (*fn)(void); /* the application's callback, cast back by the
                         recipe's deliver function */
    void *data;
    void (*run)(const zkr__event_t *ev); /* ZKR__EV_CALL only */
    uint64_t gen;   /* ZKR__EV_ACQUIRED: c->gen right after the acquire ended */
    uint64_t letgo; /* ZKR__EV_ACQUIRED: c->letgo then */
    uint64_t seq;   /* the session's count of posts when this was posted */
};

struct zkr__listener {
    zkr__listener_t *next;
    zkr_session_listener_t fn;
    void *data;
};

/* A node zkr must delete: by path, or (when a create's outcome is unknown)
 * by searching dir for the contender's UUID. Belongs to one session id; a
 * new session drops entries of older ones (their nodes died with them). */
struct zkr__cleanup {
    zkr__cleanup_t *next, *prev; /* s->cleanups, newest first */
    char *path; /* full node path, or NULL when searching by uuid */
    char *dir;  /* with uuid: the directory to search */
    char uuid[37];
    int64_t sid;
    int busy;             /* an operation is in flight */
    int dead;             /* dropped: free once not busy */
    int watch;            /* remove our watches on path instead: */
    int wtype;            /* ... of this ZooKeeper watcher type */
    watcher_fn watcher;   /* ... set with this watcher (and the session) */
    zkr__member_t *owner; /* told when done (release/abort), or NULL */
    /* A release's (or a delayed contender's) record: delete path and write
     * record into record_dir's data in one multi (docs/design/
     * lock-delay.md, 1.2). NULL: a plain delete. */
    char *record;
    char *record_dir;
};

#define ZKR__COUNTERS ZKR_COUNTER_COUNT_

/* Events kept in the session for when an event cannot be allocated: a
 * completion is never lost to a failed allocation unless this many are
 * queued at once (they return to the reserve as they run). */
#define ZKR__EV_RESERVE 16

/* A request that could not be sent (no memory, or the client refused it
 * at once) is sent again this much later, by the timer thread. */
#define ZKR__RETRY_MS 20

struct zkr_session {
    pthread_mutex_t mu; /* guards everything below and every contender */
    pthread_cond_t cv;  /* broadcast on any change a blocking call awaits */
    pthread_cond_t tcv; /* wakes the timer thread */
    pthread_cond_t ecv; /* wakes the event thread */
    pthread_t timer_thread, event_thread;
    zhandle_t *zh; /* NULL while being replaced */
    int owned;     /* zkr opened zh (and may replace it) */
    int zh_shared; /* the application may set watches on zh too (adopted,
                      or handed out by zkr_session_handle()) */
    char *hosts;   /* hosts plus chroot, for zookeeper_init */
    char *digest;  /* "user:password" or NULL */
    int req_timeout;
    int no_reconnect;
    int timeout; /* negotiated session timeout, ms */
    zkr_state_t state;
    int connected;      /* the ZooKeeper handle is connected now */
    int64_t sid;        /* current session id, 0 = none */
    int64_t last_heard; /* the leader touched the session no earlier than
                           this (session.c explains the proof) */
    struct {
        int64_t sent, answered;
    } hb[8];  /* the newest answered heartbeats of this connection */
    int hb_n; /* how many of hb[] are filled, oldest first */
    int64_t next_ping;
    int64_t timer_next; /* when the timer thread will wake by itself
                           (monotonic ms), -1 if only when kicked */
    int ping_busy;
    int64_t reconnect_at; /* when LOST and re-creating: next attempt */
    int64_t replace_at;   /* LOST declared while the session may live on
                             the server: close the handle then (last heard
                             + T), -1 none */
    int64_t cleanup_at;   /* an adopted session's LOST: send no cleanup
                             before then (last heard + T), -1 none */
    int reconnect_attempt;
    int64_t connect_deadline; /* a fresh handle must connect by then */
    int replace;              /* the timer thread must close and re-create zh */
    int swapping;             /* ... and is doing so now, unlocked */
    int closing;              /* zkr_session_free() running */
    int stop;                 /* threads must exit */
    int auth_failed;
    int ops;              /* zkr operations in flight (completions pending) */
    struct zkr__op *sent; /* of them, those accepted by the client */
    int zh_users;         /* threads using zh outside the mutex (sync calls) */
    zkr__listener_t *listeners;
    int ev_busy_session; /* event thread is running session listeners */
    const zkr__session_hooks_t *hooks; /* the engine's */
    void *engine;                      /* its state, hooks->size bytes */
    zkr__member_t *members;            /* doubly linked, newest first */
    int nmembers;      /* recipe handles (zkr__session_attach), and
                          observers (zkr__session_hold) */
    uint64_t attached; /* members attached so far */
    zkr__cleanup_t *cleanups;
    int cleanups_idle; /* of them, those not busy (session.c) */
    zkr__event_t *ev_head, *ev_tail;
    zkr__event_t ev_reserve[ZKR__EV_RESERVE];
    zkr__event_t *ev_spare; /* unused reserve events */
    uint64_t ev_seq;        /* events posted so far (zkr__event_t.seq) */
    /* No event thread (zkr_session_options_t.no_event_thread): callbacks
     * run in zkr_session_dispatch(), on the caller's thread. ev_fd is a
     * pipe holding one byte while events are queued (ev_signalled). */
    int dispatch;
    int ev_fd[2];
    int ev_signalled;
    int dispatching; /* a thread is in zkr_session_dispatch() */
    int dispatched;  /* ... has been called, last on this thread: */
    pthread_t dispatcher;
    int64_t retry_at; /* a send failed: retry then (monotonic ms), or -1 */
    uint64_t counters[ZKR__COUNTERS];
    zkr__smetrics_t metrics;
    zkr_session_t *live_next; /* registry of live sessions */
    zkr_log_fn log_fn;        /* NULL: standard error */
    void *log_data;
    int log_level; /* zkr_log_level_t; 0 = warnings and errors */
    int log_slot;  /* log.c's trampoline for the client, -1 none */
    /* Repeated connection errors, summarised (log.c); under log_mu. */
    pthread_mutex_t log_mu;
    int log_failing;         /* an error since the last connection */
    unsigned long log_tries; /* failed attempts in this outage */
    unsigned long log_quiet; /* messages held back since the summary */
    int64_t log_fail_since;  /* the outage's first error (monotonic ms) */
    int64_t log_summary_at;  /* last error or summary delivered */
    char log_last[384];      /* the last error held back */
    int forked; /* this is a forked child's copy: closed, no threads */
    zhandle_t *zh_forked; /* ... and the parent's handle it must not touch */
    unsigned forks;       /* fork()s between the session's opening and this
                             process: objects compare it with what they saw to
                             forget the calls of threads left in the parent */
};

/* ------------------------------------------------------------ logging */

/* How many sessions at once get their client's messages (log.c). */
#define ZKR__LOG_SLOTS 64

/* Logs one message of s (NULL: the default sink). Any thread, any lock. */
void zkr__log(zkr_session_t *s, zkr_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Takes / gives back s's slot; log_detach only once no handle of s is
 * open. */
void zkr__log_attach(zkr_session_t *s);
void zkr__log_detach(zkr_session_t *s);
/* The callback for zookeeper_init2() for s's handles. */
log_callback_fn zkr__log_callback(const zkr_session_t *s);

/* Repeated connection errors (the client's and zkr's own) are summarised:
 * the first of an outage is delivered at its level, the next ones at
 * DEBUG, and one WARN summary at most every ZKR__LOG_SUMMARY_MS. */
#define ZKR__LOG_SUMMARY_MS 10000
/* Logs a failed attempt to reach the servers of s (as zkr__log, but
 * summarised as above). */
void zkr__log_conn_error(zkr_session_t *s, zkr_log_level_t level,
                         const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* s has a connection again: the outage ends (one WARN line if errors
 * were logged during it). Called with s->mu held. */
void zkr__log_reachable(zkr_session_t *s);

/* Is the current thread the event thread of some session (running a
 * callback), or a ZooKeeper client's completion thread (running the
 * application's own completion of a request on zkr's handle)? Blocking
 * calls return ZKR_EDEADLK then. */
int zkr__in_callback(void);
/* Must a free on the current thread leave a handle's queued callbacks to
 * run later (the last of them finishes the free), rather than wait for
 * them? Yes on s's event thread, or on the thread inside
 * zkr_session_dispatch(s): they queue behind the callback that is
 * running. Yes too in event-loop mode while no thread dispatches: a later
 * dispatch runs them, and nothing may wait for one. No while another
 * thread dispatches: a callback of the handle may be running there, and
 * the free waits for it (that dispatch ends in bounded time). Mutex held;
 * true or false only until the mutex is released. */
int zkr__callbacks_later(const zkr_session_t *s);
/* Is the current thread the one that calls zkr_session_dispatch(s) (the
 * last to call it)? A wait there without end could never see what only a
 * dispatch delivers. Takes the mutex. */
int zkr__is_dispatcher(zkr_session_t *s);

/* Posts an event; the session mutex must be held. Returns 0/ZKR_ENOMEM. */
int zkr__post(zkr_session_t *s, int kind, int a, zkr__member_t *m,
              void (*fn)(void), void *data);

/* Posts a one-shot completion: run(ev) is called on the event thread with
 * ev->fn, ev->data and ev->a = rc. Mutex held. */
int zkr__post_call(zkr_session_t *s, void (*run)(const zkr__event_t *ev),
                   int rc, void (*fn)(void), void *data);

/* Waits on s->cv until *flag is nonzero, or (flag NULL) for one wake-up,
 * at most until the deadline (monotonic ms, -1 none). Mutex held. Returns
 * 0, or ZKR_ETIMEDOUT once the deadline has passed. */
int zkr__wait(zkr_session_t *s, const int *flag, int64_t deadline);

/* Adds a node to delete; mutex held. */
int zkr__cleanup_add(zkr_session_t *s, const char *path, const char *dir,
                     const char *uuid, int64_t sid, zkr__member_t *owner);
/* Adds a node to delete together with a record written into dir's data,
 * in one multi (a release: nothing is written if the node is gone
 * already); mutex held. */
int zkr__cleanup_add_record(zkr_session_t *s, const char *path, const char *dir,
                            const char *record, int64_t sid,
                            zkr__member_t *owner);
/* Adds a removal of zkr's watches of a type on path, set with watcher and
 * the session as context; mutex held. */
int zkr__cleanup_add_watch(zkr_session_t *s, const char *path, int wtype,
                           watcher_fn watcher);
/* Runs pending cleanups if connected; mutex held. */
void zkr__cleanup_pump(zkr_session_t *s);
/* A node's cleanup entry made before the node is created, so that the
 * node can always be handed to the cleanup list (a node nobody deletes
 * blocks everyone after it for the session's lifetime), even with no
 * memory left: reserve (NULL on ENOMEM) with room for a path of pathlen
 * bytes; commit (mutex held) links it for path as zkr__cleanup_add would;
 * unreserve frees an entry that was not committed (NULL: no-op). */
zkr__cleanup_t *zkr__cleanup_reserve(size_t pathlen);
void zkr__cleanup_commit(zkr_session_t *s, zkr__cleanup_t *cl, const char *path,
                         int64_t sid, zkr__member_t *owner);
void zkr__cleanup_unreserve(zkr__cleanup_t *cl);
/* Detaches a contender from pending cleanups (it is being freed). */
void zkr__cleanup_disown(zkr_session_t *s, zkr__member_t *m);

/* A request could not be sent: the timer thread retries stalled
 * contenders and cleanups ZKR__RETRY_MS later. Mutex held. */
void zkr__retry_later(zkr_session_t *s);

/* Wakes the timer thread (a deadline changed); mutex held. */
void zkr__timer_kick(zkr_session_t *s);

/* Records that the server answered a request sent at `sent`. */
void zkr__heard(zkr_session_t *s, int64_t sent);

/* Declares LOST now if the safe deadline has passed. Mutex held. Called
 * wherever ownership is asked about or used: the timer thread may not
 * have run yet (for instance in a process that was just resumed after
 * SIGSTOP, every thread wakes at once). */
void zkr__enforce_deadline(zkr_session_t *s);
/* Takes the session mutex and enforces the deadline: what every call that
 * reports or uses ownership does first. */
void zkr__lock_fresh(zkr_session_t *s);

/* zkr_session_valid_ms with the mutex held. */
int64_t zkr__session_valid_locked(zkr_session_t *s);

/* Is rc a sign that the connection (not the request) failed? */
int zkr__is_connection_error(int rc);

/* Borrows the handle for synchronous calls made without the mutex; the
 * handle is not closed until returned. 0, ZKR_ECLOSED or ZCONNECTIONLOSS. */
int zkr__zh_get(zkr_session_t *s, zhandle_t **zh);
void zkr__zh_put(zkr_session_t *s);
/* The start of a public read of path (zkr_contenders_list,
 * zkr_delay_closed): checks the arguments and the calling thread, then
 * zkr__zh_get. 0 (return the handle with zkr__zh_put), ZBADARGUMENTS,
 * ZKR_EDEADLK, or zkr__zh_get's codes. */
int zkr__read_begin(zkr_session_t *s, const char *path, zhandle_t **zh);

/* The type of an asynchronous call's completion (zookeeper.h). */
enum {
    ZKR__CB_VOID = 1,     /* void_completion_t */
    ZKR__CB_STAT,         /* stat_completion_t */
    ZKR__CB_DATA,         /* data_completion_t */
    ZKR__CB_STRINGS,      /* strings_completion_t */
    ZKR__CB_STRINGS_STAT, /* strings_stat_completion_t */
    ZKR__CB_STRING,       /* string_completion_t */
    ZKR__CB_STRING_STAT,  /* string_stat_completion_t */
    ZKR__CB_ACL           /* acl_completion_t */
};

/* An asynchronous ZooKeeper call in flight: its completion context. */
typedef struct zkr__op {
    zkr_session_t *s;
    zkr__member_t *m;   /* contender ops (m->busy counts them) */
    zkr__cleanup_t *cl; /* cleanup ops */
    uint64_t gen;
    int64_t sent; /* monotonic ms when issued */
    int64_t sid;  /* session id when issued */
    int last;     /* parents: the last create of the chain */
    int watched;  /* a listing that also set a child watch */
    void *ctx;    /* one-shot calls: their pending state */
    char *path;   /* op-specific path (watched node, adopted node) */
    /* Accepted by the client (zkr__op_sent), answer pending: */
    zhandle_t *zh;                         /* the handle it was sent on */
    int kind;                              /* ZKR__CB_*, the type of cb */
    void (*cb)(void);                      /* its completion */
    struct zkr__op *sent_prev, *sent_next; /* s->sent, doubly linked */
    int on_sent;                           /* linked in s->sent */
} zkr__op_t;

/* Allocates an op and counts it in flight (mutex held); NULL on ENOMEM
 * (the contender, if any, is then stalled: see zkr__retry_later). */
zkr__op_t *zkr__op_new(zkr_session_t *s, zkr__member_t *m);
/* Completion prologue: locks, uncounts, records server contact. */
zkr_session_t *zkr__op_begin(zkr__op_t *op, int rc);
/* Completion epilogue: broadcasts, unlocks, frees op. */
void zkr__op_end(zkr__op_t *op);
/* After an asynchronous call on zh (mutex held): if the client accepted
 * it (rc ZOK), records op as in flight on zh until its completion begins,
 * so that closing zh can complete it if the client does not (session.c,
 * close_handle). Returns rc. */
int zkr__op_sent(int rc, zkr__op_t *op, zhandle_t *zh, int kind,
                 void (*cb)(void));
/* Undo zkr__op_new when the call could not be issued (mutex held); stalls
 * the op's contender, or leaves its cleanup to the retry. */
void zkr__op_cancel(zkr__op_t *op);

/* If ctx is a live (not yet freed) session, locks and returns it; else
 * NULL. For watchers whose handle may outlive the session. */
zkr_session_t *zkr__session_lock_live(void *ctx);

/* Re-initialises a condition variable in a forked child (the parent's
 * waiters are gone); monotonic: on CLOCK_MONOTONIC. */
void zkr__cond_renew(pthread_cond_t *cv, int monotonic);

/* Registers/unregisters a member with its session; mutex held. */
void zkr__session_attach(zkr_session_t *s, zkr__member_t *m);
void zkr__session_detach(zkr_session_t *s, zkr__member_t *m);
/* Counts (or uncounts) a handle with no member (an observer) as open:
 * zkr_session_free() refuses while any is. Mutex held. */
void zkr__session_hold(zkr_session_t *s, int delta);

/* zkr_session_open and zkr_session_adopt, for the layer above that hands
 * the session its hooks (engine.c). */
int zkr__session_open(zkr_session_t **out, const char *hosts,
                      int session_timeout_ms, const zkr_session_options_t *opts,
                      const zkr__session_hooks_t *hooks);
int zkr__session_adopt(zkr_session_t **out, zhandle_t *zh,
                       const zkr__session_hooks_t *hooks);
/* The engine's per-session state (hooks->size bytes). */
static inline void *zkr__session_engine(const zkr_session_t *s)
{
    return s->engine;
}

/* ------------------------------------------------------- src/engine/ */

/* A contender in the session's path index (engine/index.c): its node's path, or
 * the path it watches, is where the watch events that concern it come
 * from. Links sharing a bucket are chained. */
typedef struct zkr__plink {
    struct zkr__plink *next; /* the same bucket */
    zkr__contender_t *c;
    uint32_t hash; /* of the path */
    int on;        /* linked */
} zkr__plink_t;
#define ZKR__PIDX_SMALL 16

/* A handle on a session that reads a queue without contending (an
 * observer): what the session's changes ask of it. The engine keeps the
 * session's readers (zkr__reader_add); each call is made with the
 * session's mutex held. */
typedef struct zkr__reader zkr__reader_t;
typedef struct zkr__reader_ops {
    /* (Re)connected, or a request that could not be sent is due again:
     * look again. */
    void (*refresh)(zkr__reader_t *r);
    /* In a forked child's copy: nothing of the parent's is in flight. */
    void (*forked)(zkr__reader_t *r);
    /* Does it need zkr's watches on path? */
    int (*follows)(zkr__reader_t *r, const char *path);
} zkr__reader_ops_t;
struct zkr__reader {
    zkr__reader_t *next; /* the session's readers */
    const zkr__reader_ops_t *ops;
};

/* The engine's state in each session (zkr__session_engine()). */
typedef struct zkr__engine {
    /* The contenders by the paths of their nodes and of their watches
     * (engine/index.c): pidx has npidx buckets, or is NULL and pidx_small is
     * the table (a failed growth keeps the table it had). */
    zkr__plink_t **pidx;
    size_t npidx, npaths;
    zkr__plink_t *pidx_small[ZKR__PIDX_SMALL];
    /* The contenders that may have a timer (engine/step.c, zkr__timed_add()).
     */
    zkr__contender_t *timed;
    zkr__reader_t *readers;
    zkr__msets_t msets;    /* metrics by (kind, path) (metrics.c) */
    uint64_t workq_events; /* work queue watch events so far (workq.c) */
} zkr__engine_t;

static inline zkr__engine_t *zkr__engine(const zkr_session_t *s)
{
    return (zkr__engine_t *)zkr__session_engine(s);
}

/* What a recipe gives the engine. */
typedef struct zkr__recipe {
    const char *marker; /* node name marker, e.g. "-lock-" */
    char mode;          /* sequencer mode: 'x', 'r', 'w', 'l', 'p' */
    int poke;           /* on grant, touch our node: wakes a successor
                           that watches it (semaphore) */
    zkr__pred_fn pred;
    /* Delivers an event to the application: casts fn back to the
     * recipe's callback type and calls it with the recipe's handle. */
    void (*deliver)(zkr__contender_t *c, const zkr__event_t *ev);
    int flags;        /* ZKR__R_* */
    const char *kind; /* metrics kind, or NULL: from mode */
} zkr__recipe_t;

/* Recipe flags (a work queue's claim, docs/design/workq.md). */
enum {
    /* The directory is never created: a missing one ends the acquire
     * with ZKR_ESTALE (the claimed item is gone). */
    ZKR__R_NO_PARENTS = 1,
    /* Released by a plain delete: no lock-delay record is written into
     * the directory's data (it is the item's payload). */
    ZKR__R_PLAIN_RELEASE = 2
};

/* A release by a caller's multi that contains the delete of the
 * contender's own node (zkr__commit): a work queue's ack and nack. */
typedef struct zkr__commit zkr__commit_t;
struct zkr__commit {
    int count;
    zoo_op_t *ops;
    zoo_op_result_t *results;
    int self; /* index of the delete of our node */
    int keep; /* index whose failure keeps the grant (the caller retries
                 with new ops), or -1 */
    /* An answer lost with the connection, our node gone since: the
     * commit applied iff probe is gone (probe_version -1), or exists with
     * probe_version. */
    const char *probe;
    int probe_version;
    /* Or, when set, a receipt: an ephemeral node the multi creates (op
     * receipt_idx, whose failure keeps the grant as keep's does). After a
     * lost answer: sync, then the receipt there -> applied; gone and our
     * node there -> not applied (sent again); both gone -> ZKR_ESTALE. */
    const char *receipt;
    int receipt_idx;
    int failed; /* OUT: the index of the op that failed, or -1 */
    int sent;   /* the multi is in flight (its answer awaited) */
    /* Called once, mutex held: rc 0 (applied: the contender is IDLE),
     * ZKR_ESTALE (our node was gone, or another op conflicted: nothing
     * applied, the contender is IDLE and its node, if any, deleted),
     * ZKR_ECANCELED (freed meanwhile), or another code (nothing applied,
     * the grant is kept: failed tells which op; keep's failure too). */
    void (*done)(zkr__commit_t *cm, int rc);
};

/* Engine phases: what the contender is doing on the server. */
typedef enum {
    ZKR__P_IDLE = 0,
    ZKR__P_CREATING, /* create to issue or in flight */
    ZKR__P_RECOVER,  /* create outcome unknown: search our UUID */
    ZKR__P_LISTING,  /* list to issue or in flight */
    ZKR__P_WATCHING, /* waiting for the blocking node to go */
    ZKR__P_HELD,
    ZKR__P_ABORTING,  /* deleting our node before failing the acquire */
    ZKR__P_RELEASING, /* deleting our node to release */
    ZKR__P_DELAYED,   /* granted by a listing, but the node we were behind
                         went: reading the directory's record, or waiting
                         out a lock-delay (docs/design/lock-delay.md) */
    ZKR__P_COMMITTING /* held, releasing by a caller's multi (zkr__commit) */
} zkr__phase_t;

/* How long a holder waits before watching its own node (engine/list.c). */
#define ZKR__SELF_WATCH_DELAY_MS 50

struct zkr__contender {
    zkr__member_t m; /* in the session's list; its requests and events */
    /* In the session's path index while node (node_link) or watching
     * (watch_link) is set: both change only through engine/index.c's
     * zkr__set_node() and zkr__set_watching(). */
    zkr__plink_t node_link, watch_link;
    /* In the session's timed list (s->timed, doubly linked) since its
     * deadline or watch_due was last set; zkr__queue_on_deadline drops it
     * once it has neither. */
    zkr__contender_t *tprev, *tnext;
    int timed;
    zkr_session_t *s;
    const zkr__recipe_t *recipe;
    void *owner; /* the recipe's handle */
    char *dir;
    char *data;
    struct ACL_vector acl;
    int acl_owned; /* acl is our copy (else the shared default) */
    zkr__phase_t phase;
    zkr_lock_state_t pub; /* what the application sees */
    char uuid[37];
    char *node; /* full path of our node, or NULL */
    int64_t czxid;
    int64_t node_sid; /* session that created node */
    char *watching;   /* full path of the watched node, or NULL */
    int watch_dir;    /* ... and it is a child watch on our directory */
    char *unreadable; /* name of a node before us whose watch cannot
                         wake us: we may not read it (the server does
                         not send us its events, watch_done()), or
                         (semaphore) its granter may not touch it
                         (pred_acl_done()); we watch the directory
                         instead while it blocks us */
    char *touchable;  /* semaphore: the predecessor whose ACL showed
                         that its granter can touch it */
    /* semaphore: our node's ACL as stored (count 0: not read yet) */
    struct ACL_vector own_acl;
    int64_t seen_czxid; /* semaphore: the node we wait on, and its */
    int64_t seen_mzxid; /* last write we listed after (unseen_write()) */
    int64_t watch_due;  /* held: when to set that watch (monotonic ms), or
                           -1 (set, or not held) */
    int self_watch;     /* waiting or held: an exists watch on our own node
                           is set (or being set), to notice its deletion */
    int self_doubt;     /* our node's path changed while watched (a write,
                           or a delete and re-create by someone else while
                           we were away): no grant until an exists() shows
                           it is still ours (self_watch_done()) */
    int touch_due;      /* held (semaphore): our node is to be touched */
    int permits;        /* semaphore size (1 for the others) */
    char infix[24];     /* inserted before the marker: "-permits-<N>" */
    uint64_t gen;       /* bumps per attempt: stale completions ignored */
    int64_t deadline;   /* acquire deadline (monotonic ms), -1 none */
    int try_once;       /* timeout 0 */
    int abort_rc;       /* nonzero: end the acquire with this once safe */
    int parents_made;   /* parents created in this attempt */
    /* The other side of a pair on one path whose two contenders the
     * application holds as one owner (a read/write lock's read and write
     * sides), or NULL. While one side has a node (acquiring or holding),
     * the other is refused with ZKR_ESTATE: its node would queue behind
     * ours and could wait for it without end. Set and cleared under the
     * session's mutex. */
    zkr__contender_t *pair;
    /* pending acquire / release */
    int acq_sync, acq_done, acq_rc;
    uint64_t acq_gen, acq_letgo; /* synchronous acquire: c->gen and
                                     c->letgo right after it ended */
    /* Bumps each time the application lets go of what it holds or asks
     * for: a free, a release or commit started (or a release told of a
     * loss), a new acquire. A grant delivered after that is not reported
     * as held (`zkr__grant_result` in `src/engine/list.c`). */
    uint64_t letgo;
    /* Signalled only when acq_done or rel_done is set: a blocked acquire
     * or release is not woken by every completion on the session. */
    pthread_cond_t done_cv;
    void (*acq_fn)(void);
    void *acq_data;
    int rel_pending, rel_sync, rel_done, rel_rc;
    void (*rel_fn)(void);
    void *rel_data;
    /* state listener and loss fd */
    void (*lis_fn)(void);
    void *lis_data;
    int fd[2];            /* loss pipe, made by zkr__contender_fd(); -1 until */
    int fd_uncertain;     /* readable: SUSPENDED, until re-verified */
    int fd_lost;          /* readable: lost, until observed (engine/loss.c) */
    int fd_written;       /* the pipe holds a byte */
    int fd_quiet_suspend; /* SUSPENDED leaves the descriptor alone (an
                             election under ZKR_POLICY_SESSION) */
    int fd_level;         /* an election's stop signal: readable while
                             uncertain (fd_uncertain); else (a lock) while
                             a change is unread (fd_changed) */
    int fd_changed;       /* lock: SUSPENDED, HELD again or LOST since the
                             application last called zkr_lock_state() */
    int fd_gained;        /* election: leads, and the application has not
                             observed it yet (readable until observed) */
    int fd_away;          /* election: the application's last observation
                             was "not leading" (zkr__contender_away()) */
    int lost_unreported;
    uint64_t lost_gen;       /* lost_unreported: c->gen of the grant lost */
    uint64_t suspensions;    /* times it became SUSPENDED (an election's run()
                                asks whether its function was told to stop
                                by a suspension while it ran) */
    int rejoin;              /* start over after a loss (elections) */
    void (*rejoin_fn)(void); /* ... with this completion */
    void *rejoin_data;
    int sync_waiters;             /* threads blocked in acquire/release on it */
    zkr__cleanup_t *reserve;      /* while we have a node: its cleanup entry,
                                     made before the create was sent */
    void (*dispose)(void *owner); /* frees the recipe's handle */
    /* Lock-delay (docs/design/lock-delay.md, 1.3). */
    int delay_ms;         /* 0: off */
    int delay_flags;      /* ZKR_DELAY_* */
    char *behind;         /* name of the node our rule last watched */
    int64_t behind_czxid; /* its czxid (from our watch), 0 if unknown */
    char **before;        /* the nodes before us that our grant depends on,
                             at the last listing that made us wait */
    int nbefore;
    char *vouch;          /* the last exclusive node before us in that
                             listing (its release vouches for all before
                             it), or NULL */
    int nvouched;         /* how many of before precede vouch */
    char *target;         /* DELAYED: the node a record must name, or NULL
                             (more than one went: no record can do) */
    int64_t target_czxid; /* its czxid, 0 if unknown */
    int delay_served;     /* the delay for the last departure is over */
    int64_t delay_until;  /* DELAYED: end (monotonic ms), -1 while the
                             record is being read */
    int64_t delay_seen;   /* when the listing that showed behind gone was
                             answered: the delay runs from there */
    int64_t carry_until;  /* no grant before this (monotonic ms), -1:
                             departures this attempt observed that no
                             record proved, kept across a new wait and a
                             rejoin (lock-delay.md, 1.5) */
    char *leave_record;   /* aborting while delayed: the record our
                             delete writes (zkr-delay-left), or NULL */
    zkr__cmetrics_t metrics;
    const char *mpath; /* during init: the metrics path, or NULL (dir) */
    /* Create precondition (zkr__set_precondition): the create is sent in
     * one multi after setData(pre_path, pre_data, pre_version); its
     * failure ends the acquire with ZKR_ESTALE. */
    char *pre_path;
    char *pre_data;
    int pre_len;
    int pre_version;
    zkr__commit_t *commit; /* COMMITTING: the caller's multi */
    int commit_unknown;    /* ... its answer was lost: probe first */
};

int zkr__contender_init(zkr__contender_t *c, zkr_session_t *s,
                        const zkr__recipe_t *recipe, void *owner,
                        const char *dir, const char *id,
                        const struct ACL_vector *acl);
/* zkr__contender_init with the metrics kept under mpath instead of dir. */
int zkr__contender_init2(zkr__contender_t *c, zkr_session_t *s,
                         const zkr__recipe_t *recipe, void *owner,
                         const char *dir, const char *mpath, const char *id,
                         const struct ACL_vector *acl);
/* Sets the create precondition of the next acquires (data copied): 0 or
 * ZKR_ENOMEM. Not while acquiring. */
int zkr__set_precondition(zkr__contender_t *c, const char *path,
                          const char *data, int len, int version);
/* Releases a held grant by cm (mutex held): 0 (cm->done will be called
 * once, maybe before this returns), ZKR_ESTALE (not held: lost, or never
 * granted; a loss is observed), ZKR_ESTATE (a release or commit is in
 * progress). cm stays the caller's, untouched after done. */
int zkr__commit(zkr__contender_t *c, zkr__commit_t *cm);
/* Frees what init allocated, then dispose(owner); cancels/cleans up;
 * waits for callbacks. On the session's event thread it never waits for
 * events (they queue behind the running callback): if any are queued or
 * running, the event thread finishes the free after the last of them. */
void zkr__contender_destroy(zkr__contender_t *c, void (*dispose)(void *));
/* Finishes a free; mutex held (kept). */
void zkr__contender_dispose(zkr__contender_t *c);

int zkr__acquire(zkr__contender_t *c, int timeout_ms, void (*fn)(void),
                 void *data);
/* On the event thread, mutex held, just before an acquire completion is
 * delivered: the deadline is enforced now, and a grant lost since the
 * completion was posted (the event thread ran late, the process was
 * paused) is delivered as ZKR_ELOST (in ev->a), as zkr__acquire would
 * return it. */
void zkr__acquired_recheck(zkr__contender_t *c, zkr__event_t *ev);
int zkr__cancel(zkr__contender_t *c);
int zkr__release(zkr__contender_t *c, void (*fn)(void), void *data);
int64_t zkr__valid_ms(zkr__contender_t *c);
/* Issues what the contender's phase needs next (mutex held). */
void zkr__contender_step(zkr__contender_t *c);
/* Makes the loss descriptor readable (a recipe's own stop signal) until
 * observed. Mutex held. */
void zkr__contender_signal(zkr__contender_t *c);
/* The application has observed the loss (a recipe's observation point):
 * the descriptor is no longer readable. Mutex held. */
void zkr__contender_observed(zkr__contender_t *c);
/* The application has observed that it does not lead (an election's
 * await() that did not return 0): a loss or suspension signalled before is
 * observed, the descriptor is quiet until the next change, and leading
 * again (a grant, or under ZKR_POLICY_SUSPEND a re-verification) is a
 * gain to signal. Mutex held. */
void zkr__contender_away(zkr__contender_t *c);
/* The application read the state (zkr_lock_state()): a lock's
 * descriptor no longer signals the changes before. Mutex held. */
void zkr__contender_read(zkr__contender_t *c);
/* The loss descriptor, made on first use; -1 if it cannot be made. */
int zkr__contender_fd(zkr__contender_t *c);
/* Sets the lock-delay of the next acquires: 0, ZBADARGUMENTS (< 0) or
 * ZKR_ESTATE (acquiring). */
int zkr__set_delay(zkr__contender_t *c, int delay_ms);
/* Sets the lock-delay flags (ZKR_DELAY_*) of the next acquires: 0,
 * ZBADARGUMENTS (unknown flag) or ZKR_ESTATE (acquiring). */
int zkr__set_delay_flags(zkr__contender_t *c, unsigned flags);
/* Fills a sequencer of the current grant; mutex held. 0 or ZKR_ENOTHELD. */
int zkr__sequencer(zkr__contender_t *c, zkr_sequencer_t *out);
/* Guarded multi on a contender's grant (sync when cb is NULL). */
int zkr__guarded_multi(zkr__contender_t *c, int count, const zoo_op_t *ops,
                       zoo_op_result_t *results, zkr_result_completion_t cb,
                       void *data);

/* The contender a member is, and one of the session's members. */
static inline zkr__contender_t *zkr__c(zkr__member_t *m)
{
    return m != NULL
               ? (zkr__contender_t *)((char *)m - offsetof(zkr__contender_t, m))
               : NULL;
}
/* Each contender of session s, newest first. */
#define ZKR__EACH_CONTENDER(c, s)                                              \
    for (zkr__contender_t *c = zkr__c((s)->members); c != NULL;                \
         c = zkr__c(c->m.next))
/* zkr__op_new for a contender's request: the op remembers its attempt. */
zkr__op_t *zkr__cop_new(zkr__contender_t *c);

/* What the session calls in the engine (engine.c gives the table). Mutex
 * held. */
void zkr__queue_on_connected(zkr_session_t *s, int new_session);
void zkr__queue_on_suspended(zkr_session_t *s);
void zkr__queue_on_lost(zkr_session_t *s);
void zkr__queue_on_deadline(zkr_session_t *s, int64_t now, int64_t *next);
void zkr__queue_cleanup_done(zkr__contender_t *c, int rc);
/* Takes again the step of each stalled contender (timer thread). */
void zkr__queue_retry(zkr_session_t *s);
/* Does something of s still need its watches of this type on path? */
int zkr__path_watched(zkr_session_t *s, const char *path, int wtype);
/* Adds a reader to its session, or removes it; mutex held. */
void zkr__reader_add(zkr_session_t *s, zkr__reader_t *r);
void zkr__reader_remove(zkr_session_t *s, zkr__reader_t *r);
/* Does a reader of s need zkr's watches on path? */
int zkr__readers_follow(zkr_session_t *s, const char *path);
void zkr__node_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx);

/* ----------------------------------------------------------- delay.c */

/* Lock-delay records in a queue's directory data (docs/design/
 * lock-delay.md, 1.2): "<kind> <version> key=value ...". */
enum {
    ZKR__REC_NONE = 0, /* no record: read as "not a clean release" */
    ZKR__REC_RELEASE,  /* zkr-release: the node was released by its holder */
    ZKR__REC_LEFT,     /* zkr-delay-left: a delayed contender left, with
                          remaining_ms of its delay still to serve */
    ZKR__REC_CLOSED    /* zkr-closed: a contender waits out a delay until
                          the wall-clock time until_ms (informational) */
};

/* The longest record zkr writes or reads. */
#define ZKR__RECORD_MAX 256

typedef struct zkr__record {
    int kind;             /* ZKR__REC_* */
    int version;          /* as written (1 today) */
    int64_t czxid;        /* the node the record is about */
    char node[128];       /* its name, or "" */
    int64_t remaining_ms; /* ZKR__REC_LEFT */
    int64_t until_ms;     /* ZKR__REC_CLOSED: ms since the epoch */
    char cause[32];       /* a word, or "" */
} zkr__record_t;

/* Parses a directory's data: fills r and returns its kind, or
 * ZKR__REC_NONE (r zeroed) for anything not a complete valid record. */
int zkr__record_parse(const char *data, int len, zkr__record_t *r);
/* Writes r's text to buf: its length, or -1 (invalid, or too long). */
int zkr__record_format(char *buf, size_t size, const zkr__record_t *r);

/* --------------------------------------------------- metrics.c hooks */

/* Hooks, all with the session mutex held. */
/* Joins c to its (kind, path) entry, made if new: 0 or ZKR_ENOMEM. */
int zkr__metrics_attach(struct zkr__contender *c);
void zkr__metrics_attempt(struct zkr__contender *c); /* an attempt begins */
/* The acquire ends with rc (0 granted). */
void zkr__metrics_acquired(struct zkr__contender *c, int rc);
/* The grant ends (release asked, node gone); no-op when not holding. */
void zkr__metrics_hold_end(struct zkr__contender *c);
/* A grant's state changed (SUSPENDED, LOST are counted). */
void zkr__metrics_lock_state(struct zkr__contender *c, zkr_lock_state_t st);
/* A lock-delay served to its end, ms after the observation that began it. */
void zkr__metrics_delay_served(struct zkr__contender *c, int64_t ms);
/* Frees the session's metric sets (the engine's fini hook). */
void zkr__metrics_free(zkr_session_t *s);

/* What zkr_metrics_write() writes, copied under the mutex and written
 * without it: one row per (kind, path) entry, with its gauges. */
typedef struct zkr__mrow {
    zkr__mset_t m;     /* m.next, m.hnext unused; m.path is the entry's own */
    int64_t handles;   /* handles of the session on it now */
    int64_t holding;   /* ... of them holding a grant */
    int64_t waiting;   /* ... acquiring */
    int64_t leader_us; /* held_us plus the grants still running */
} zkr__mrow_t;
typedef struct zkr__msnap {
    zkr__smetrics_t m;
    uint64_t counters[ZKR__COUNTERS];
    zkr_state_t state;
    int64_t valid_ms, timeout_ms;
    zkr__mrow_t *rows;
    int nrows;
} zkr__msnap_t;
/* Writes snap in the Prometheus text format; 0, or ZKR_ESYS (a write
 * failed, errno set). */
int zkr__metrics_format(FILE *f, const zkr__msnap_t *snap);

#endif /* ZKR_INTERNAL_H */
