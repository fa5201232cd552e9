/* The session layer of libzkr (src/session/): one ZooKeeper session, its
 * threads, requests, events, cleanup list and logging. It calls the layer
 * above only through the hooks that layer gives it
 * (zkr__session_hooks_t). */
#ifndef ZKR_SESSION_H
#define ZKR_SESSION_H

#include "../base/base.h"

/* ------------------------------------------------- session metrics */

/* The session's own metrics: counted by the session (records_refused by
 * the cleanup list), written by the engine's metrics.c. */
typedef struct zkr__smetrics {
    uint64_t suspensions, reconnects, losses;
    uint64_t records_refused;    /* releases that fell back to a plain delete */
    int64_t reconnect_margin_ms; /* at the last RECONNECTED, or -1 */
    int64_t hb_last_ms;          /* the last heartbeat's round trip, or -1 */
    zkr__hist_t hb;
} zkr__smetrics_t;
/* Sets the session's metrics to "none yet"; counts a heartbeat's round
 * trip (a negative one, a clock step back, as 0). */
void zkr__metrics_init(zkr_session_t *s);
void zkr__metrics_heartbeat(zkr_session_t *s, int64_t rtt_ms);

/* --------------------------------------------------------- session.c */

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
    zhandle_t *zh;      /* NULL while being replaced */
    int owned;          /* zkr opened zh (and may replace it) */
    int zh_shared;      /* the application may set watches on zh too (adopted,
                           or handed out by zkr_session_handle()) */
    char *hosts;        /* hosts plus chroot, for zookeeper_init */
    char *digest;       /* "user:password" or NULL */
    int digest_missing; /* zh refused it so far: not used until given */
    char *chroot;       /* opened with no_wait and a chroot: checked once a
                           connection answers (conn.c), then NULL */
    int chroot_asking;  /* ... that check is in flight */
    int req_timeout;
    int no_reconnect;
    int timeout; /* negotiated session timeout, ms */
    zkr_state_t state;
    int connected;      /* the ZooKeeper handle is connected now */
    int64_t sid;        /* current session id, 0 = none */
    int64_t last_heard; /* the ensemble's leader touched the session no earlier
                           than this (session.c explains the proof) */
    struct {
        int64_t sent, answered;
    } hb[8];  /* the newest answered heartbeats of this connection */
    int hb_n; /* how many of hb[] are filled, oldest first */
    int64_t hb_answered_sent; /* the send time of the newest answered
                                 heartbeat, of any connection (0: none):
                                 what came before it came in order */
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
    int ev_held; /* a waiting zkr_session_open() has not returned yet: its
                    events wait (the listener given in the options hears
                    nothing of a session whose open fails) */
    const zkr__session_hooks_t *hooks; /* the engine's */
    void *engine;                      /* its state, hooks->size bytes */
    zkr__member_t *members;            /* doubly linked, newest first */
    int nmembers;      /* recipe handles (zkr__session_attach), and
                          handles without a member (zkr__session_hold) */
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
    char last_error[512];    /* zkr_session_last_error() (log.c) */
    int forked; /* this is a forked child's copy: closed, no threads */
    zhandle_t *zh_forked; /* ... and the parent's handle it must not touch */
    unsigned forks;       /* fork()s between the session's opening and this
                             process: objects compare it with what they saw to
                             forget the calls of threads left in the parent */
};

/* ------------------------------------------------------------ logging */

/* How many sessions at once get their client's messages (log.c). */
#define ZKR__LOG_SLOTS 64

/* Logs one message of s (NULL: the default sink). Any thread, any lock.
 * An ERROR is also kept as the session's last error, whatever its log
 * level (zkr_session_last_error()). */
void zkr__log(zkr_session_t *s, zkr_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* zkr__log, and the message is kept as the last error at any level. */
void zkr__log_error(zkr_session_t *s, zkr_log_level_t level, const char *fmt,
                    ...) __attribute__((format(printf, 3, 4)));
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
 * summarised as above; kept as the last error). */
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
/* An event allocated ahead (free() it if never posted), and its post:
 * for a completion that must not fail to post for want of memory when it
 * is due. zkr__post_event cannot fail; it takes ev (in a forked child it
 * frees it: nothing runs there). Mutex held. */
zkr__event_t *zkr__event_new(void);
void zkr__post_event(zkr_session_t *s, zkr__event_t *ev, int kind, int a,
                     zkr__member_t *m, void (*fn)(void), void *data);

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
 * zkr__close_handle). Returns rc. */
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
/* Counts (or uncounts) a handle with no member (a reader) as open:
 * zkr_session_free() refuses while any is. Mutex held. */
void zkr__session_hold(zkr_session_t *s, int delta);

/* zkr_session_open and zkr_session_adopt, for the layer above that hands
 * the session its hooks (src/engine/hooks.c). */
int zkr__session_open(zkr_session_t **out, const char *hosts,
                      int session_timeout_ms, const zkr_session_options_t *opts,
                      const zkr__session_hooks_t *hooks);
int zkr__session_adopt(zkr_session_t **out, zhandle_t *zh,
                       const zkr__session_hooks_t *hooks);
/* The engine's per-session state (hooks->size bytes). */
/* The session is LOST and will not be made again (zkr_session_open() with
 * no reconnection, or a ZooKeeper handle the application owns): what
 * waits for a connection ends ZKR_ELOST. Mutex held. */
static inline int zkr__lost_for_good(const zkr_session_t *s)
{
    return s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned);
}

static inline void *zkr__session_engine(const zkr_session_t *s)
{
    return s->engine;
}

#endif /* ZKR_SESSION_H */
