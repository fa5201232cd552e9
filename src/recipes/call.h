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

/* A connection error (or the client's own request timeout). */
int zkr__call_conn_error(int rc);
/* Was the answer lost (or the request never sent) with the connection or
 * the session? Nothing is known of what it asked: a chain asks again once
 * connected (a write's outcome is resolved by what the server shows). */
int zkr__call_lost(int rc);

#endif /* ZKR_CALL_H */
