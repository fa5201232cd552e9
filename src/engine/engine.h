/* The engine of libzkr (src/engine/) as the recipes see it: contenders,
 * the recipe table, commits, lock-delay records and metrics hooks. */
#ifndef ZKR_ENGINE_H
#define ZKR_ENGINE_H

#include "../session/session.h"

typedef struct zkr__contender zkr__contender_t;

/* ---------------------------------------------------- metrics.c sets */

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
    const char *kind;        /* the recipe's (zkr__recipe_t.kind) */
    int leads;  /* the recipe's grant is to lead: its flag ZKR__R_LEADS */
    char *path; /* never changes: read without the mutex */
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

/* A gauge of a recipe that is no contender (the barrier's waiters, a
 * group's members, a cache's lag): its family, which the recipe declares
 * once, and one zkr__gauge_t per handle, attached while the handle lives
 * (zkr__gauge_attach()). The engine reads each value under the session
 * mutex when the metrics are written; the recipe keeps no number for it. */
typedef struct zkr__gfamily {
    const char *name, *help; /* name: "zkr_..." */
    const char *kind;        /* its kind label: the recipe's */
    char unit;  /* 'n' a number, 'm' milliseconds (seconds shown) */
    char merge; /* the handles on one path: 's' summed, 'x' the largest */
} zkr__gfamily_t;

typedef struct zkr__gauge zkr__gauge_t;
/* The entry of a (family, path) in a session while a handle is attached
 * there (a gauge describes live handles: its series goes with the last). */
typedef struct zkr__gset {
    const zkr__gfamily_t *fam;
    char *path;
    uint32_t hash;
    zkr__gauge_t *gauges; /* attached */
    struct zkr__gset *hnext;
} zkr__gset_t;
struct zkr__gauge {
    /* The value now (mutex held; now in zkr__now_ms()); below 0: none. */
    int64_t (*value)(zkr__gauge_t *g, int64_t now);
    zkr__gset_t *set; /* NULL: not attached */
    zkr__gauge_t *prev, *next;
};
/* The entries of a session by hash(family name, path): nindex buckets. */
typedef struct zkr__gsets {
    zkr__gset_t **index;
    size_t nindex, nsets;
} zkr__gsets_t;

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

/* A handle on a session that reads a queue without contending: what the
 * session's changes ask of it. The engine keeps the
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

/* A recipe's chain of requests that is no contender: it issues one request at a
 * time and takes its next step in the answer's completion. When it cannot go on
 * by itself (not connected, a request it could not send, a pause) it waits to
 * be woken: the engine calls wake (mutex held) when the session (re)connects or
 * is lost, when requests that could not be sent are due again, in a forked
 * child's copy, and once wake_at (if >= 0) has passed. A wake finds the chain
 * in any state: it checks what it waits for. */
typedef struct zkr__task zkr__task_t;
struct zkr__task {
    zkr__task_t *prev, *next; /* the session's tasks */
    void (*wake)(zkr__task_t *t);
    int64_t wake_at; /* ms of zkr__now_ms(), -1: none */
    int on;          /* linked */
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
    zkr__task_t *tasks;
    zkr__msets_t msets;    /* metrics by (kind, path) (metrics.c) */
    zkr__gsets_t gsets;    /* recipe gauges by (family, path) (metrics.c) */
    uint64_t watch_events; /* events of recipes' own watchers so far: a
                              recipe waiting for one compares counts */
} zkr__engine_t;

static inline zkr__engine_t *zkr__engine(const zkr_session_t *s)
{
    return (zkr__engine_t *)zkr__session_engine(s);
}

/* What a recipe gives the engine. */
/* What the loss descriptor's rule is told (zkr__recipe_t.signal). */
typedef enum {
    ZKR__FD_OBSERVED,  /* the application observed the state: a release, a
                          new acquire, a loss reported, or the recipe's own
                          observation point (zkr__contender_observed()) */
    ZKR__FD_GRANTED,   /* a new grant */
    ZKR__FD_SUSPENDED, /* the connection is lost: the grant is uncertain */
    ZKR__FD_HELD,      /* the same grant re-verified */
    ZKR__FD_LOST,      /* the grant is lost */
    ZKR__FD_DELAYED    /* granted, but serving a lock-delay first */
} zkr__fdev_t;

typedef struct zkr__recipe {
    const char *marker; /* node name marker, e.g. "-lock-" */
    char mode;          /* sequencer mode: 'x', 'r', 'w', 'l', 'p' */
    int poke;           /* on grant, touch our node: wakes a successor
                           that watches it (under a rule that admits
                           several holders, a predecessor may be granted
                           without leaving) */
    zkr__pred_fn pred;
    /* The kinds of node before ours whose departure our grant waits on
     * (lock-delay counts only theirs). NULL: every kind. */
    zkr__waits_on_fn waits_on;
    /* Delivers an event to the application: casts fn back to the
     * recipe's callback type and calls it with the recipe's handle. */
    void (*deliver)(zkr__contender_t *c, const zkr__event_t *ev);
    int flags;        /* ZKR__R_* */
    const char *kind; /* metrics kind (the label: docs/OBSERVABILITY.md) */
    /* Before an acquire starts, mutex held: a nonzero code refuses it
     * (the acquire returns it). NULL: never refused. */
    int (*refuse)(const zkr__contender_t *c);
    /* After its node or session is lost, mutex held: nonzero starts the
     * contender over (it stays in the queue until it leaves), with
     * rejoin_fn as its acquire completion. NULL: never. */
    int (*rejoins)(const zkr__contender_t *c);
    void (*rejoin_fn)(void);
    /* The loss descriptor's rule besides a loss (always readable until
     * observed): told each change (mutex held), returns nonzero while the
     * descriptor should be readable. NULL: readable while a change is
     * unread (SUSPENDED, HELD again or LOST since zkr__contender_read()).
     * engine/loss.c says why a loss is kept apart. */
    int (*signal)(zkr__contender_t *c, zkr__fdev_t ev);
} zkr__recipe_t;

/* Recipe flags (zkr__recipe_t.flags). */
enum {
    /* The directory is never created: a missing one ends the acquire
     * with ZKR_ESTALE (the claimed item is gone). */
    ZKR__R_NO_PARENTS = 1,
    /* Released by a plain delete: no lock-delay record is written into
     * the directory's data (it is the item's payload). */
    ZKR__R_PLAIN_RELEASE = 2,
    /* With a lock-delay, and able to write its node: the node's name
     * announces that a grant touches it (zkr__name_announces()), so that
     * whoever lists the queue, in any process, can tell a first contender
     * still waiting out its delay from the holder
     * (docs/design/lock-delay.md, 1.7). */
    ZKR__R_ANNOUNCES = 4,
    /* A grant is to lead: the recipe's metrics carry two more families
     * (zkr_leader_changes_total, zkr_leader_seconds_total). */
    ZKR__R_LEADS = 8
};

/* A release by a caller's multi that contains the delete of the
 * contender's own node (zkr__commit): the recipe's own ops and the end of
 * the grant, applied together or not at all. */
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

/* Waking by touch (a recipe with `poke`: a grant writes its node, so a
 * successor watching it lists again; docs/PROTOCOL.md [W2], [H1]): what a
 * waiter knows of the node it waits on. Read and written by
 * engine/list.c; forgotten with our node (zkr__forget_node()). */
typedef struct zkr__touchwake {
    char *touchable; /* the predecessor whose ACL showed that its granter
                        can touch it */
    struct ACL_vector own_acl; /* our node's ACL as stored (count 0: not
                                  read yet) */
    int64_t seen_czxid;        /* the node we wait on, and its last write */
    int64_t seen_mzxid;        /* we listed after (unseen_write()) */
} zkr__touchwake_t;

/* A contender's lock-delay state (docs/design/lock-delay.md, 1.3), kept
 * by engine/lockdelay.c; list.c records the node a watch waits on and
 * asks whether a delay is due, step.c and api.c read and reset the
 * deadlines. */
typedef struct zkr__lockdelay {
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
} zkr__lockdelay_t;

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
    int64_t node_sid;    /* session that created node */
    char *watching;      /* full path of the watched node, or NULL */
    int watch_dir;       /* ... and it is a child watch on our directory */
    char *unreadable;    /* name of a node before us whose watch cannot
                            wake us: we may not read it (the server does
                            not send us its events, watch_done()), or
                            (.poke) its granter may not touch it
                            (pred_acl_done()); we watch the directory
                            instead while it blocks us */
    zkr__touchwake_t tw; /* a recipe whose grant touches its node */
    int64_t watch_due;   /* held: when to set that watch (monotonic ms), or
                            -1 (set, or not held) */
    int self_watch;      /* waiting or held: an exists watch on our own node
                            is set (or being set), to notice its deletion */
    int self_doubt;      /* our node's path changed while watched (a write,
                            or a delete and re-create by someone else while
                            we were away): no grant until an exists() shows
                            it is still ours (self_watch_done()) */
    int touch_due;       /* held (.poke, or announced): our node is to be
                            touched */
    int permits;         /* how many may hold at once (1 unless the rule
                            admits several holders) */
    char infix[24];      /* inserted before the marker: "-permits-<N>" */
    uint64_t gen;        /* bumps per attempt: stale completions ignored */
    int64_t deadline;    /* acquire deadline (monotonic ms), -1 none */
    int try_once;        /* timeout 0 */
    int abort_rc;        /* nonzero: end the acquire with this once safe */
    int parents_made;    /* rounds of parents created in this attempt */
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
    /* A recipe's chain that waits for this contender (zkr__acquire_task):
     * woken (zkr__task_wake_at, now) when an acquire or release of it
     * ends, or its state changes (SUSPENDED, HELD again, LOST). NULL:
     * none; set and cleared by the recipe. */
    zkr__task_t *task;
    /* state listener and loss fd */
    void (*lis_fn)(void);
    void *lis_data;
    int fd[2];      /* loss pipe, made by zkr__contender_fd(); -1 until */
    int fd_lost;    /* readable: lost, until observed (engine/loss.c) */
    int fd_written; /* the pipe holds a byte */
    int fd_want;    /* readable by the recipe's rule: its signal hook's
                       last answer, or (none) SUSPENDED, HELD again or LOST
                       since the state was last read (zkr__contender_read) */
    int lost_unreported;
    uint64_t lost_gen;       /* lost_unreported: c->gen of the grant lost */
    int sync_waiters;        /* threads blocked in acquire/release on it */
    zkr__cleanup_t *reserve; /* while we have a node: its cleanup entry,
                                made before the create was sent */
    void (*dispose)(void *owner); /* frees the recipe's handle */
    zkr__lockdelay_t ld;          /* engine/lockdelay.c's */
    zkr__cmetrics_t metrics;
    const char *mpath; /* during init: the metrics path, or NULL (dir) */
    /* Create precondition (zkr__set_precondition): the create is sent in
     * one multi after setData(pre_path, pre_data, pre_version); its
     * failure ends the acquire with ZKR_ESTALE. */
    char *pre_path;
    char *pre_data;
    int pre_len;
    int pre_version;
    /* ... its failure: what the listing sent behind the multi found in
     * the directory (ZKR__PRE_*), so that the recipe need not read it
     * again (the acquire ends when that answer is in). */
    int pre_seen;
    zkr__commit_t *commit; /* COMMITTING: the caller's multi */
    int commit_unknown;    /* ... its answer was lost: probe first */
};

/* zkr__contender_t.pre_seen: the directory after a failed precondition. */
enum {
    ZKR__PRE_UNKNOWN = 0, /* not listed (no answer, an error, not sent) */
    ZKR__PRE_GONE,        /* the directory is gone */
    ZKR__PRE_CHILDREN,    /* it has children */
    ZKR__PRE_EMPTY        /* it has none */
};

int zkr__contender_init(zkr__contender_t *c, zkr_session_t *s,
                        const zkr__recipe_t *recipe, void *owner,
                        const char *dir, const char *id,
                        const struct ACL_vector *acl);
/* zkr__contender_init with the metrics kept under mpath instead of dir;
 * mutex held. */
int zkr__contender_init2(zkr__contender_t *c, zkr_session_t *s,
                         const zkr__recipe_t *recipe, void *owner,
                         const char *dir, const char *mpath, const char *id,
                         const struct ACL_vector *acl);
/* Sets the create precondition of the next acquires (data copied): 0 or
 * ZKR_ENOMEM. Not while acquiring; mutex held. */
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
/* Has c a node, or is it acquiring one? Mutex held. */
int zkr__contender_engaged(const zkr__contender_t *c);
/* On the event thread, mutex held, just before an acquire completion is
 * delivered: the deadline is enforced now, and a grant lost since the
 * completion was posted (the event thread ran late, the process was
 * paused) is delivered as ZKR_ELOST (in ev->a), as zkr__acquire would
 * return it. */
void zkr__acquired_recheck(zkr__contender_t *c, zkr__event_t *ev);
int zkr__cancel(zkr__contender_t *c);
int zkr__release(zkr__contender_t *c, void (*fn)(void), void *data);
/* For a recipe's chain of requests (a zkr__task_t), mutex held, never
 * waiting. zkr__acquire_task starts an acquire (codes as zkr__acquire's)
 * whose end wakes t (c->task); zkr__acquire_took then says whether it has
 * ended (1, *rc set as zkr__acquire would return it) or not (0).
 * zkr__release_task and zkr__cancel_task are zkr__release (without a
 * completion: its end wakes c->task, if set) and zkr__cancel. */
int zkr__acquire_task(zkr__contender_t *c, int timeout_ms, zkr__task_t *t);
int zkr__acquire_took(zkr__contender_t *c, int *rc);
/* After zkr__acquire_took said granted (0): is the grant still held now,
 * when it reaches the application (the session's deadline enforced)?
 * 0, ZKR_ELOST or ZKR_ECANCELED, as a blocking acquire would return. */
int zkr__acquire_still(zkr__contender_t *c);
int zkr__release_task(zkr__contender_t *c);
int zkr__cancel_task(zkr__contender_t *c);
/* Is the acquire's create, or the listing after it, out on a live
 * connection (its answer will come without a reconnection)? Mutex held. */
int zkr__acquire_sent(const zkr__contender_t *c);
/* Frees a contender that is neither acquiring nor held at once, mutex
 * held, when nothing of it is pending (a request, an event, a cleanup
 * entry): 0, or ZKR_EBUSY (free it later with zkr__contender_destroy). */
int zkr__contender_try_destroy(zkr__contender_t *c, void (*dispose)(void *));
int64_t zkr__valid_ms(zkr__contender_t *c);
/* Issues what the contender's phase needs next (mutex held). */
void zkr__contender_step(zkr__contender_t *c);
/* Makes the loss descriptor readable (a recipe's own stop signal) until
 * observed. Mutex held. */
void zkr__contender_signal(zkr__contender_t *c);
/* The application has observed the loss (a recipe's observation point):
 * the descriptor is no longer readable. Mutex held. */
void zkr__contender_observed(zkr__contender_t *c);
/* The application read the state (zkr_lock_state()): under the default
 * rule the descriptor no longer signals the changes before. Mutex held. */
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

/* What the session calls in the engine (hooks.c gives the table). Mutex
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
/* Adds a task to its session, or removes it (mutex held); a task is
 * removed before it is freed. */
void zkr__task_add(zkr_session_t *s, zkr__task_t *t);
void zkr__task_remove(zkr_session_t *s, zkr__task_t *t);
/* Wakes t at (ms of zkr__now_ms()), or not by time if at < 0. */
void zkr__task_wake_at(zkr_session_t *s, zkr__task_t *t, int64_t at);
/* Does a reader of s need zkr's watches on path? */
int zkr__readers_follow(zkr_session_t *s, const char *path);
void zkr__node_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx);

/* ---------------------------------------------------------- record.c */

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
/* Attaches a handle's gauge of family fam at path, whose value() the
 * engine calls (mutex held): 0, or ZKR_ENOMEM. */
int zkr__gauge_attach(zkr_session_t *s, zkr__gauge_t *g,
                      const zkr__gfamily_t *fam, const char *path,
                      int64_t (*value)(zkr__gauge_t *g, int64_t now));
/* Detaches it (mutex held); one not attached is left alone. */
void zkr__gauge_detach(zkr_session_t *s, zkr__gauge_t *g);

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
    /* The recipe gauges: one row per (family, path), values merged, by
     * family name, then kind and path. */
    struct zkr__grow {
        const zkr__gfamily_t *fam;
        char *path; /* a copy (the entry goes with its last handle) */
        int64_t v;
    } * grows;
    int ngrows;
} zkr__msnap_t;
/* Writes snap in the Prometheus text format; 0, or ZKR_ESYS (a write
 * failed, errno set). */
int zkr__metrics_format(FILE *f, const zkr__msnap_t *snap);

#endif /* ZKR_ENGINE_H */
