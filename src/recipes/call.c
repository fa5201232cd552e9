/* Chains of asynchronous requests, for recipes that are no contender (the
 * work queue's put and take, the counter): one request at a time, each
 * next step taken in the previous answer's completion. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"

/* ------------------------------------------------------- connection */

int zkr__call_conn_error(int rc)
{
    return zkr__is_connection_error(rc) || rc == ZOPERATIONTIMEOUT;
}

int zkr__call_lost(int rc)
{
    return zkr__call_conn_error(rc) || rc == ZSESSIONEXPIRED ||
           rc == ZCLOSING || rc == ZINVALIDSTATE;
}

/* ------------------------------------------------------ call chains */

/* The answer of a chain's request (mutex taken): k->next is told it,
 * with what came back, valid during the call only. next may end the
 * chain and free k: k is not touched after. */
static void call_answer(const void *data, int rc, const struct Stat *stat,
                        const struct String_vector *strings, const char *value,
                        int value_len)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__call_t *k = op->ctx;

    (void)zkr__op_begin(op, rc);
    k->busy = 0;
    k->stat = stat;
    k->strings = strings;
    k->value = value;
    k->value_len = value_len;
    k->next(k, rc);
    zkr__op_end(op);
}

static void call_void(int rc, const void *data)
{
    call_answer(data, rc, NULL, NULL, NULL, 0);
}

static void call_stat(int rc, const struct Stat *stat, const void *data)
{
    call_answer(data, rc, stat, NULL, NULL, 0);
}

static void call_data(int rc, const char *value, int len,
                      const struct Stat *stat, const void *data)
{
    call_answer(data, rc, stat, NULL, value, len);
}

static void call_strings(int rc, const struct String_vector *v,
                         const void *data)
{
    call_answer(data, rc, NULL, v, NULL, 0);
}

static void call_strings_stat(int rc, const struct String_vector *v,
                              const struct Stat *stat, const void *data)
{
    call_answer(data, rc, stat, v, NULL, 0);
}

static void call_string(int rc, const char *value, const void *data)
{
    call_answer(data, rc, NULL, NULL, value, value != NULL ? -1 : 0);
}

/* The op of k's next request, or NULL with *rc set: not connected
 * (ZCONNECTIONLOSS), or short of memory (ZKR_ENOMEM; the engine's retry
 * wakes the session's tasks soon). */
static zkr__op_t *call_op(zkr__call_t *k, int *rc)
{
    zkr_session_t *s = k->s;
    zkr__op_t *op;

    if (s->closing || s->zh == NULL || !s->connected) {
        *rc = s->closing ? ZKR_ECLOSED : ZCONNECTIONLOSS;
        return NULL;
    }
    if ((op = zkr__op_new(s, k->m)) == NULL) {
        *rc = ZKR_ENOMEM;
        return NULL;
    }
    op->ctx = k;
    return op;
}

/* After issuing op's request with code rc: in flight, or undone. */
static int call_sent(zkr__call_t *k, zkr__op_t *op, int rc)
{
    if (rc != ZOK) {
        zkr__op_cancel(op);
        return rc;
    }
    k->busy = 1;
    return 0;
}

int zkr__call_exists(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_aexists(k->s->zh, path, 0, call_stat, op));
}

int zkr__call_get(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op, zoo_aget(k->s->zh, path, 0, call_data, op));
}

int zkr__call_children(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_aget_children(k->s->zh, path, 0,
                                                    call_strings, op));
}

int zkr__call_children2(zkr__call_t *k, const char *path, watcher_fn w,
                        void *wctx)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_awget_children2(k->s->zh, path, w, wctx,
                                                      call_strings_stat, op));
}

int zkr__call_wexists(zkr__call_t *k, const char *path, watcher_fn w,
                      void *wctx)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_awexists(k->s->zh, path, w, wctx,
                                               call_stat, op));
}

int zkr__call_wget(zkr__call_t *k, const char *path, watcher_fn w, void *wctx)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_awget(k->s->zh, path, w, wctx, call_data, op));
}

int zkr__call_create(zkr__call_t *k, const char *path, const char *data,
                     int len, const struct ACL_vector *acl, int mode)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_acreate(k->s->zh, path, data, len, acl,
                                              mode, call_string, op));
}

int zkr__call_delete(zkr__call_t *k, const char *path, int version)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_adelete(k->s->zh, path, version, call_void, op));
}

int zkr__call_set(zkr__call_t *k, const char *path, const char *data, int len,
                  int version)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL ? rc
                      : call_sent(k, op,
                                  zoo_aset(k->s->zh, path, data, len, version,
                                           call_stat, op));
}

int zkr__call_multi(zkr__call_t *k, int n, const zoo_op_t *ops,
                    zoo_op_result_t *res)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op,
                           zoo_amulti(k->s->zh, n, ops, res, call_void, op));
}

int zkr__call_sync(zkr__call_t *k, const char *path)
{
    int rc;
    zkr__op_t *op = call_op(k, &rc);

    return op == NULL
               ? rc
               : call_sent(k, op, zoo_async(k->s->zh, path, call_string, op));
}

int zkr__call_ancestor(zkr__call_t *k, const char *path, int *at,
                       const struct ACL_vector *acl, int mode, int *rc)
{
    const char *slash = strchr(path + *at + 1, '/');
    char pre[ZKR_PATH_MAX + 1];

    if (slash == NULL || (size_t)(slash - path) >= sizeof(pre))
        return 0;
    *at = (int)(slash - path);
    memcpy(pre, path, (size_t)*at);
    pre[*at] = '\0';
    *rc = zkr__call_create(k, pre, "", 0, acl, mode);
    return 1;
}
