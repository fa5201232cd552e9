/* The session's cleanup list: the nodes zkr must delete and the watches
 * it must remove, retried across disconnections until done or the
 * session is gone. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* ----------------------------------------------------------- cleanup */

void zkr__cleanup_free(zkr__cleanup_t *cl)
{
    free(cl->path);
    free(cl->dir);
    free(cl->record);
    free(cl->record_dir);
    free(cl);
}

/* Puts a new entry (not busy) first in the list, and pumps. */
static void cleanup_link(zkr_session_t *s, zkr__cleanup_t *cl, int64_t sid,
                         zkr__member_t *owner)
{
    cl->sid = sid;
    cl->owner = owner;
    if (owner != NULL)
        owner->cleanups_owned++;
    cl->prev = NULL;
    cl->next = s->cleanups;
    if (s->cleanups != NULL)
        s->cleanups->prev = cl;
    s->cleanups = cl;
    s->cleanups_idle++;
    zkr__cleanup_pump(s);
}

/* An entry's operation is in flight (busy) or answered; s->cleanups_idle
 * counts the entries that are not busy, so that a pump that finds none
 * stops instead of walking those that are. */
static void cleanup_busy(zkr_session_t *s, zkr__cleanup_t *cl, int busy)
{
    s->cleanups_idle += cl->busy - busy;
    cl->busy = busy;
}

static void cleanup_disown_one(zkr__cleanup_t *cl)
{
    if (cl->owner != NULL)
        cl->owner->cleanups_owned--;
    cl->owner = NULL;
}

/* Makes an entry (record and record_dir may be NULL) and pumps it. */
static int cleanup_make(zkr_session_t *s, const char *path, const char *dir,
                        const char *uuid, const char *record,
                        const char *record_dir, int64_t sid,
                        zkr__member_t *owner)
{
    zkr__cleanup_t *cl = calloc(1, sizeof(*cl));

    if (cl == NULL)
        return ZKR_ENOMEM;
    cl->path = zkr__strdup(path);
    cl->dir = zkr__strdup(dir);
    cl->record = zkr__strdup(record);
    cl->record_dir = zkr__strdup(record_dir);
    if (uuid != NULL)
        memcpy(cl->uuid, uuid, sizeof(cl->uuid));
    if ((path != NULL && cl->path == NULL) ||
        (dir != NULL && cl->dir == NULL) ||
        (record != NULL && cl->record == NULL) ||
        (record_dir != NULL && cl->record_dir == NULL)) {
        zkr__cleanup_free(cl);
        return ZKR_ENOMEM;
    }
    cleanup_link(s, cl, sid, owner);
    return 0;
}

int zkr__cleanup_add(zkr_session_t *s, const char *path, const char *dir,
                     const char *uuid, int64_t sid, zkr__member_t *owner)
{
    return cleanup_make(s, path, dir, uuid, NULL, NULL, sid, owner);
}

int zkr__cleanup_add_record(zkr_session_t *s, const char *path, const char *dir,
                            const char *record, int64_t sid,
                            zkr__member_t *owner)
{
    return cleanup_make(s, path, NULL, NULL, record, dir, sid, owner);
}

int zkr__cleanup_add_watch(zkr_session_t *s, const char *path, int wtype,
                           watcher_fn watcher)
{
    int rc = zkr__cleanup_add(s, NULL, NULL, NULL, s->sid, NULL);

    if (rc == 0) {
        zkr__cleanup_t *cl = s->cleanups;
        /* cleanup_add put it first and may have pumped it: it has no path
         * yet, so the pump skipped it as a search without dir. */
        cl->watch = 1;
        cl->wtype = wtype;
        cl->watcher = watcher;
        cl->path = zkr__strdup(path);
        if (cl->path == NULL)
            cl->dead = 1;
        zkr__cleanup_pump(s);
    }
    return rc;
}

zkr__cleanup_t *zkr__cleanup_reserve(size_t pathlen)
{
    zkr__cleanup_t *cl = calloc(1, sizeof(*cl));

    if (cl != NULL && (cl->path = malloc(pathlen + 1)) == NULL) {
        free(cl);
        cl = NULL;
    }
    return cl;
}

void zkr__cleanup_commit(zkr_session_t *s, zkr__cleanup_t *cl, const char *path,
                         int64_t sid, zkr__member_t *owner)
{
    strcpy(cl->path, path); /* fits: reserved for the longest name */
    cleanup_link(s, cl, sid, owner);
}

void zkr__cleanup_unreserve(zkr__cleanup_t *cl)
{
    if (cl != NULL) {
        free(cl->path);
        free(cl);
    }
}

void zkr__cleanup_disown(zkr_session_t *s, zkr__member_t *m)
{
    for (zkr__cleanup_t *cl = s->cleanups; cl != NULL && m->cleanups_owned > 0;
         cl = cl->next)
        if (cl->owner == m)
            cleanup_disown_one(cl);
}

/* Ends an entry: tells its owner, unlinks and frees it (unless an op still
 * refers to it: then the op's completion frees it). */
static void cleanup_finish(zkr_session_t *s, zkr__cleanup_t *cl, int rc)
{
    zkr__member_t *owner = cl->owner;

    if (rc != 0 && !cl->dead)
        zkr__log(s, ZKR_LOG_WARN,
                 "giving up deleting %s: %s (the server deletes it when "
                 "session 0x%llx ends)",
                 cl->path != NULL ? cl->path : cl->dir, zkr_strerror(rc),
                 (unsigned long long)cl->sid);
    cleanup_disown_one(cl);
    cl->dead = 1;
    if (owner != NULL)
        s->hooks->cleanup_done(owner, rc);
    if (cl->busy)
        return;
    if (cl->prev != NULL)
        cl->prev->next = cl->next;
    else
        s->cleanups = cl->next;
    if (cl->next != NULL)
        cl->next->prev = cl->prev;
    s->cleanups_idle--;
    zkr__cleanup_free(cl);
}

static void cleanup_deleted(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;

    cleanup_busy(s, cl, 0);
    if (rc == ZOK)
        s->counters[ZKR_COUNTER_DELETES]++;
    if (cl->dead)
        cleanup_finish(s, cl, 0);
    else if (zkr__is_connection_error(rc))
        ; /* retried by the next pump, after reconnecting */
    else if (rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED ||
             rc == ZCLOSING || rc == ZINVALIDSTATE)
        cleanup_finish(s, cl, 0); /* gone, or gone with its session */
    else
        cleanup_finish(s, cl, rc); /* ZNOAUTH...: cannot be deleted */
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

/* A release's multi: delete(node) + setData(directory, record). */
typedef struct release_multi {
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
} release_multi_t;

/* The release multi is answered. Applied: the node is gone and the record
 * says it was released. The delete refused with ZNONODE: the node was gone
 * already (expired, forced, or our own earlier multi applied before a
 * connection loss hid its answer): nothing was written now, rightly, and
 * the entry is done. The record refused (ZNOAUTH on the directory, or any
 * other error of the setData alone): the release still must happen, so
 * the entry falls back to a plain delete, and successors will see a death
 * (documented). Anything else is what a plain delete's answer would mean
 * (cleanup_deleted). */
static void cleanup_multi_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    release_multi_t *m = op->ctx;
    zkr__cleanup_t *cl = op->cl;

    op->ctx = NULL;
    if (rc != ZOK && !zkr__is_connection_error(rc) && rc != ZCLOSING &&
        m->results[0].err == ZOK && m->results[1].err != ZOK && !cl->dead) {
        zkr_session_t *s = zkr__op_begin(op, rc);

        zkr__log(s, ZKR_LOG_WARN,
                 "cannot write the release record of %s into %s (%s): "
                 "deleting it without one; a waiter with a lock-delay "
                 "will take this release for a death",
                 cl->path, cl->record_dir, zkr_strerror(m->results[1].err));
        s->metrics.records_refused++;
        free(cl->record);
        cl->record = NULL;
        cleanup_busy(s, cl, 0);
        free(m);
        zkr__cleanup_pump(s);
        zkr__op_end(op);
        return;
    }
    free(m);
    cleanup_deleted(rc, data);
}

static int send_release_multi(zkr_session_t *s, zkr__op_t *op)
{
    zkr__cleanup_t *cl = op->cl;
    release_multi_t *m = calloc(1, sizeof(*m));
    int rc;

    if (m == NULL)
        return ZKR_ENOMEM;
    zoo_delete_op_init(&m->ops[0], cl->path, -1);
    zoo_set_op_init(&m->ops[1], cl->record_dir, cl->record,
                    (int)strlen(cl->record), -1, NULL);
    op->ctx = m;
    rc = zoo_amulti(s->zh, 2, m->ops, m->results, cleanup_multi_done, op);
    if (rc != ZOK) {
        op->ctx = NULL;
        free(m);
    }
    return rc;
}

static void watch_removed(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;

    cleanup_busy(s, cl, 0);
    /* ZNOWATCHER: it had fired already; anything but a connection error
     * ends the entry. */
    if (cl->dead || !zkr__is_connection_error(rc))
        cleanup_finish(s, cl, 0);
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

/* Removing all watches of a type on the path sends removeWatches, which
 * also drops the watch on the server; but it removes every watcher the
 * handle has there, so only when the application cannot have set one:
 * on a handle zkr opened and never handed out. Otherwise only zkr's own
 * (watcher, context) pair is removed: that sends checkWatches, and the
 * server keeps its one watch for the connection until the node changes
 * (then the client, with no watcher left, drops the event).
 *
 * zookeeper.h declares the completion as `void_completion_t *`, but the
 * client stores and calls that pointer as the function itself, so we pass
 * the function, converted. We always send local=0: with local=1 this
 * client version crashes. */
static int send_remove_watch(zkr_session_t *s, zkr__op_t *op)
{
    void_completion_t fn = watch_removed;
    void_completion_t *as_declared;

    memcpy(&as_declared, &fn, sizeof(fn));
    if (!s->owned || s->zh_shared)
        return zoo_aremove_watches(s->zh, op->cl->path,
                                   (ZooWatcherType)op->cl->wtype,
                                   op->cl->watcher, s, 0, as_declared, op);
    return zoo_aremove_all_watches(
        s->zh, op->cl->path, (ZooWatcherType)op->cl->wtype, 0, as_declared, op);
}

static void cleanup_listed(int rc, const struct String_vector *v,
                           const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;

    cleanup_busy(s, cl, 0);
    if (cl->dead) {
        cleanup_finish(s, cl, 0);
    } else if (rc == ZOK) {
        const char *hit = NULL;
        for (int i = 0; v != NULL && i < v->count; i++)
            if (strstr(v->data[i], cl->uuid) != NULL)
                hit = v->data[i];
        if (hit == NULL) {
            cleanup_finish(s, cl, 0);
        } else {
            cl->path = zkr__join(cl->dir, hit);
            if (cl->path == NULL)
                cleanup_finish(s, cl, ZKR_ENOMEM);
        }
    } else if (!zkr__is_connection_error(rc)) {
        cleanup_finish(s, cl, rc == ZNONODE ? 0 : rc);
    }
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

/* The sync before a search by UUID is answered: the server we are
 * connected to has applied everything committed before, so "no child with
 * our UUID" in the listing that follows means the create was never
 * applied, not that this server lags (issue 12.8; engine/create.c,
 * recover_synced, says why a create sent earlier cannot commit after the sync).
 * A delete's NONODE needs no sync: the ensemble's leader decides it, on its
 * latest state.
 */
static void cleanup_synced(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;
    zkr__op_t *op2;

    (void)value;
    if (rc == ZOK && !cl->dead && (op2 = zkr__op_new(s, NULL)) != NULL) {
        op2->cl = cl;
        if (zoo_aget_children(s->zh, cl->dir, 0, cleanup_listed, op2) == ZOK) {
            zkr__op_end(op);
            return;
        }
        zkr__op_cancel(op2);
    }
    cleanup_busy(s, cl, 0);
    if (cl->dead)
        cleanup_finish(s, cl, 0);
    else if (rc != ZOK && !zkr__is_connection_error(rc))
        cleanup_finish(s, cl,
                       rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
                               rc == ZINVALIDSTATE || rc == ZNONODE
                           ? 0
                           : rc);
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

void zkr__cleanup_pump(zkr_session_t *s)
{
    zkr__cleanup_t *cl, *next;

    if (s->cleanup_at >= 0 && zkr__now_ms() < s->cleanup_at)
        return; /* the timer thread pumps then (declare_lost) */
    s->cleanup_at = -1;
    /* Busy entries are skipped: once none is left idle, nothing is. */
    for (cl = s->cleanups; cl != NULL && s->cleanups_idle > 0; cl = next) {
        zkr__op_t *op;
        int rc;
        next = cl->next;
        if (cl->busy)
            continue;
        if (cl->dead || (s->sid != 0 && cl->sid != s->sid) ||
            (cl->watch && cl->path != NULL &&
             s->hooks->watched(s, cl->path, cl->wtype))) {
            /* Nodes (and watches) of an older session died with it; a
             * watch someone here needs again is kept. */
            cleanup_finish(s, cl, 0);
            continue;
        }
        if (!s->connected || s->zh == NULL ||
            (cl->path == NULL && cl->dir == NULL))
            continue;
        op = zkr__op_new(s, NULL);
        if (op == NULL)
            return;
        op->cl = cl;
        if (cl->watch)
            rc = send_remove_watch(s, op);
        else if (cl->path != NULL && cl->record != NULL)
            rc = send_release_multi(s, op);
        else if (cl->path != NULL)
            rc = zoo_adelete(s->zh, cl->path, -1, cleanup_deleted, op);
        else
            rc = zoo_async(s->zh, cl->dir, cleanup_synced, op);
        if (rc != ZOK) {
            zkr__op_cancel(op);
            /* No such watcher here (it fired, or the application removed
             * it): nothing left to remove. Retrying would keep the entry
             * forever, and zkr_session_free() waiting for it. */
            if (cl->watch && rc == ZNOWATCHER)
                cleanup_finish(s, cl, 0);
            continue;
        }
        cleanup_busy(s, cl, 1);
    }
}
