/* Chains of asynchronous requests (src/recipes/call.c): what recipes
 * that are no contender build their operations from. */
#ifndef ZKR_CALL_H
#define ZKR_CALL_H

#include "recipes.h"

/* One request at a time of a chain of asynchronous requests (a put, a
 * repair of a level, a counter's update): its answer's completion, under
 * the session's mutex, calls next with the request's code and what came
 * back (stat, strings, value: valid during the call only). m: the handle
 * whose free waits for the requests, or NULL. */
typedef struct zkr__call zkr__call_t;
struct zkr__call {
    zkr_session_t *s;
    zkr__member_t *m;
    void (*next)(zkr__call_t *k, int rc);
    const struct Stat *stat;
    const struct String_vector *strings;
    const char *value;
    int value_len;
    int busy; /* a request in flight */
};

/* Issue k's request (mutex held): 0 when in flight (k->next is told its
 * answer), or the code it was not sent with (ZCONNECTIONLOSS when not
 * connected, ZKR_ECLOSED, ZKR_ENOMEM, the client's code). */
int zkr__call_exists(zkr__call_t *k, const char *path);
int zkr__call_get(zkr__call_t *k, const char *path);
int zkr__call_children(zkr__call_t *k, const char *path);
/* With the stat, and a watch w (ctx wctx) unless w is NULL. */
int zkr__call_children2(zkr__call_t *k, const char *path, watcher_fn w,
                        void *wctx);
int zkr__call_wexists(zkr__call_t *k, const char *path, watcher_fn w,
                      void *wctx);
int zkr__call_wget(zkr__call_t *k, const char *path, watcher_fn w, void *wctx);
int zkr__call_create(zkr__call_t *k, const char *path, const char *data,
                     int len, const struct ACL_vector *acl, int mode);
int zkr__call_delete(zkr__call_t *k, const char *path, int version);
int zkr__call_set(zkr__call_t *k, const char *path, const char *data, int len,
                  int version);
int zkr__call_multi(zkr__call_t *k, int n, const zoo_op_t *ops,
                    zoo_op_result_t *res);
int zkr__call_sync(zkr__call_t *k, const char *path);

/* Sends the create (empty data, acl, mode) of path's next ancestor from
 * the top, the one after the prefix ending at *at (0: none made yet), and
 * moves *at to it: 1 with *rc the code it was issued with (as above), or
 * 0 when no ancestor is left. */
int zkr__call_ancestor(zkr__call_t *k, const char *path, int *at,
                       const struct ACL_vector *acl, int mode, int *rc);

/* The common start of a recipe's watcher whose context is the session:
 * for an event on a node, the session, its mutex taken and the watch
 * event counted (the caller wakes what looks again, then unlocks); NULL
 * for a session event, or once the session is being freed. */
zkr_session_t *zkr__call_watch_event(int type, const char *path, void *ctx);

/* A connection error (or the client's own request timeout). */
int zkr__call_conn_error(int rc);
/* Was the answer lost (or the request never sent) with the connection or
 * the session? Nothing is known of what it asked: a chain asks again once
 * connected (a write's outcome is resolved by what the server shows). */
int zkr__call_lost(int rc);

/* ----------------------------------------------------- operations */

/* A handle of a recipe that is no contender (the counter, the barrier):
 * one node's path, its parent, the ACL of what it creates, and the
 * operations under way, which its free waits for. */
typedef struct zkr__rop zkr__rop_t;
typedef struct zkr__rhandle {
    zkr_session_t *s;
    zkr__rop_t *ops;
    zkr__reader_t rd; /* with zkr__rhandle_follow(): keeps the operations'
                         watches from being removed */
    int following;
    char *path;
    char *parent; /* the path's parent ("/" for a top-level node) */
    struct ACL_vector acl;
    int acl_owned;
    int freeing;        /* being freed: operations end with ZKR_ECANCELED */
    zkr__gauge_t gauge; /* its metric, if any (zkr__rhandle_gauge()) */
} zkr__rhandle_t;

/* What a recipe gives its operations (each call with the mutex held). */
typedef struct zkr__rop_class {
    /* The next step, whatever woke it (a task's wake, an answer, the
     * free): it checks what it waits for. */
    void (*go)(zkr__rop_t *o);
    /* Ends it with rc: the recipe's rule for the code, its own cleanup,
     * then zkr__rop_end(). */
    void (*end)(zkr__rop_t *o, int rc);
    /* Calls an asynchronous operation's completion with o->rc (event
     * thread, no mutex); o is freed after. */
    void (*deliver)(zkr__rop_t *o);
    /* An answer of its chain (zkr__call_t.next). */
    void (*answer)(zkr__call_t *k, int rc);
    /* Does it need the session's watch on path (zkr__rhandle_follow())?
     * NULL: it sets none. */
    int (*watches)(const zkr__rop_t *o, const char *path);
} zkr__rop_class_t;

/* An operation: a chain of requests (k), a task the engine wakes (tk),
 * and its end: a blocking caller woken, or an asynchronous one's
 * completion posted on the event thread (its event made when it began:
 * a completion is never lost for want of memory). A recipe's operation
 * embeds it first. */
struct zkr__rop {
    zkr__rop_t *prev, *next; /* the handle's operations */
    const zkr__rop_class_t *cls;
    zkr__call_t k;
    zkr__task_t tk;
    zkr__event_t *ev;
    zkr__rhandle_t *h;   /* NULL once ended */
    int step;            /* the recipe's: the request in flight, or 0 */
    int unknown;         /* the last write's answer was lost */
    int anc_at;          /* making the path's ancestors: the '/' of the last
                            one made (0: none yet), or -1 */
    int rounds;          /* creates refused for want of a parent */
    int64_t deadline;    /* no answer by then: the end (zkr__rop_bound()) */
    int unsent;          /* the code of the last request not sent */
    int64_t pause_until; /* the next attempt not before */
    int rc;
    int ended;       /* a blocking operation has ended: its caller frees it */
    int64_t watched; /* the session on which it set a watch, or for which
                        another operation's watch was kept for it (0:
                        none): its end removes the watch there */
};

/* The help of zkr_barrier_waiters, which the barrier and the double
 * barrier share (kind "barrier", "dbarrier"). */
#define ZKR__BARRIER_WAITERS_HELP                                              \
    "Waits in progress: zkr_barrier_wait() calls (kind barrier), a double "    \
    "barrier's enter and leave calls (kind dbarrier), of this session's "      \
    "handles on the path."

/* Makes h for path on s: 0; ZBADARGUMENTS (an invalid path, or the
 * root); ZKR_ECLOSED; ZKR_ENOMEM. The session's free is refused while h
 * lives. */
int zkr__rhandle_init(zkr__rhandle_t *h, zkr_session_t *s, const char *path,
                      const struct ACL_vector *acl);
/* Frees what h holds, once its operations have ended: each is told (its
 * go) that h is being freed, and waited for; its gauge is detached. */
void zkr__rhandle_free(zkr__rhandle_t *h);
/* Attaches h's gauge of family fam at path (mutex not held): 0, or
 * ZKR_ENOMEM. */
int zkr__rhandle_gauge(zkr__rhandle_t *h, const zkr__gfamily_t *fam,
                       const char *path,
                       int64_t (*value)(zkr__gauge_t *g, int64_t now));
/* The session's cleanup keeps a watch on a path while an operation of h
 * needs it (its class's watches), and marks those operations (watched)
 * as owing its removal. Once, after zkr__rhandle_init(); mutex not held. */
void zkr__rhandle_follow(zkr__rhandle_t *h);

/* A new operation of size bytes (the recipe's struct, zkr__rop_t first)
 * on h, linked and its task added, with an event ahead if asynchronous;
 * not started (the recipe sets its fields, then calls its go). NULL: no
 * memory. Mutex held. */
zkr__rop_t *zkr__rop_new(zkr__rhandle_t *h, size_t size,
                         const zkr__rop_class_t *cls, int async);
/* Ends o with rc (mutex held): a blocking caller is woken, an asynchronous
 * completion posted. For the recipe's end. */
void zkr__rop_end(zkr__rop_t *o, int rc);
/* Step st's request was issued with code rc (0: in flight). Not sent (not
 * connected, short of memory): a pause, then the recipe's go again; any
 * other code ends it. */
void zkr__rop_issue(zkr__rop_t *o, int st, int rc);
/* A create was refused for want of a parent: its ancestors are made from
 * the top (zkr__rop_ancestor()), a bounded number of times (then
 * ZNONODE). */
void zkr__rop_no_parent(zkr__rop_t *o);
/* Sends the create of the next missing ancestor as step st: 1 when sent
 * (or the operation ended), 0 when none is left. */
int zkr__rop_ancestor(zkr__rop_t *o, int st);
/* The common start of a go (mutex held): 1 when the recipe may send its
 * next request (connected, nothing in flight, no pause); 0 when o waits
 * (woken then, or at its deadline) or has ended: forked, freed (unless a
 * lost write is being resolved), closing, past its deadline when
 * deadline_rc is not 0 (that code; ZKR_ENOMEM instead of ZCONNECTIONLOSS
 * when its requests could not be sent for want of memory), not connected
 * (ZKR_ELOST when the session is lost for good, ZCONNECTIONLOSS when
 * freed). */
int zkr__rop_ready(zkr__rop_t *o, int deadline_rc);
/* The deadline of an operation without an answer: the request timeout
 * plus the session timeout from now. */
int64_t zkr__rop_bound(const zkr_session_t *s);
/* Runs a blocking operation to its end (mutex held, released and taken
 * again while waiting): its code. o stays the caller's to free. */
int zkr__rop_wait(zkr__rop_t *o);
/* The operation whose task t is, or NULL (another kind of task). */
zkr__rop_t *zkr__rop_of_task(zkr__task_t *t);
/* May an operation start on h (mutex held)? 0, or ZKR_ECLOSED. */
int zkr__rop_may_start(const zkr__rhandle_t *h);

#endif /* ZKR_CALL_H */
