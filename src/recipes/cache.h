/* Watched views of a node or of a node's children (src/recipes/cache.c):
 * what the caches (zkr_cache_t) and the group's members (group.c) are
 * made of. */
#ifndef ZKR_CACHE_H
#define ZKR_CACHE_H

#include "call.h"

/* One node of a view, as read. */
typedef struct zkr__ventry {
    char *name;
    char *data; /* len bytes and a NUL ("" when not read) */
    int len;
    struct Stat st;   /* zero when not read (children by name only) */
    int64_t read_sid; /* the session on which it was read, with a data
                         watch; 0: to be read (again) */
    int unreadable;   /* read with ZNOAUTH: no watch, read again */
    int reread;       /* to be read again (a sync), its watch standing */
} zkr__ventry_t;

/* A view: the node (0 or 1 entry), or the children (sorted by name). */
typedef struct zkr__vsnap {
    zkr__ventry_t *e;
    int n;
    int64_t zxid;
} zkr__vsnap_t;

enum {
    ZKR__VIEW_NODE = 0,         /* the node: data and stat */
    ZKR__VIEW_CHILDREN = 1,     /* its children's names */
    ZKR__VIEW_CHILDREN_DATA = 2 /* ... read, each with a data watch */
};

typedef struct zkr__view zkr__view_t;

/* What a view's owner gives it (each call with the mutex held, unless
 * said otherwise). */
typedef struct zkr__view_class {
    /* Which children count (NULL: all). */
    int (*filter)(const char *name);
    /* Are two complete reads the same view for the application (NULL:
     * the same names, data, czxid, mzxid, version and owner)? */
    int (*same)(const zkr__vsnap_t *a, const zkr__vsnap_t *b);
    /* The owner's copy of a view for the application: NULL with *ok 0
     * when short of memory (NULL with *ok 1: an empty copy). */
    void *(*export)(zkr__view_t *v, const zkr__vsnap_t *snap, int *ok);
    /* Frees such a copy of n entries (any thread, no mutex). */
    void (*export_free)(void *copy, int n);
    /* Calls the application's listener with a copy (event thread, no
     * mutex); NULL: no listener. */
    void (*deliver)(zkr__view_t *v, const void *copy, int n, int64_t zxid);
    /* The view's last delivery has run after zkr__view_stop() said 0:
     * free the owner (no mutex). */
    void (*dispose)(zkr__view_t *v);
    /* Its metrics: the entries of the published view, and its lag
     * (zkr__view_lag_ms()). */
    const zkr__gfamily_t *count_family, *lag_family;
} zkr__view_class_t;

/* The help of zkr_cache_lag_seconds, which caches and groups share. */
#define ZKR__VIEW_LAG_HELP                                                     \
    "How long the view may have been behind the server: 0 while every "        \
    "change notified is in the published view, else the time since the "       \
    "oldest change notice (a watch event, a reconnection) not yet in it; "     \
    "while not connected, at least since the last answered heartbeat was "     \
    "sent (kind cache: a zkr_cache_t; kind group: a group's member list)."

struct zkr__view {
    zkr__reader_t rd; /* in the session's readers: follows() */
    zkr__task_t tk;
    zkr_session_t *s;
    const zkr__view_class_t *cls;
    char *path;
    int mode;
    zkr__call_t k;
    int step;         /* the request in flight */
    int64_t sid;      /* the session of its watches */
    int64_t pause;    /* its next request not before */
    int stale;        /* read again */
    int rescan;       /* children's data changed: read those again */
    int listing;      /* next is being read */
    int next_i;       /* next's entry being read */
    zkr__vsnap_t cur; /* published */
    zkr__vsnap_t next;
    int loaded;           /* a view is published */
    int refused;          /* the code the last read of the path was refused with
                             (ZNOAUTH, say), until one succeeds */
    uint64_t refused_gen; /* the sync that refused read started after */
    int unread;           /* ... and not read by zkr__view_get() since */
    int fd[2];
    int fd_written;
    /* zkr__view_sync(): the syncs asked for, the last of them when the
     * sync in flight was sent, the last answered (a read after it has
     * all of those), the one the listing under way started after, and the
     * one the published view started after. */
    uint64_t sync_want, sync_sent, sync_done, list_gen, pub_gen;
    /* Its lag: the oldest change notice not yet covered by a read (0:
     * none), and the oldest that the read under way covers (0: none). */
    int64_t behind_at, round_at;
    zkr__gauge_t count_gauge, lag_gauge;
    int gone;         /* stopped */
    int events;       /* deliveries queued or running */
    int free_pending; /* the last of them disposes */
};

/* Starts a view of path (mutex not held): 0; ZKR_ECLOSED; ZKR_ENOMEM.
 * The session's free is refused while it lives. */
int zkr__view_start(zkr__view_t *v, zkr_session_t *s, const char *path,
                    int mode, const zkr__view_class_t *cls);
/* Stops it (mutex not held): its request in flight and its deliveries
 * are waited for, its watches removed. 1: the owner may be freed now; 0:
 * a delivery must run first (on the thread that runs it), and
 * cls->dispose frees the owner after it. */
int zkr__view_stop(zkr__view_t *v);
/* A copy of the view (export), waiting for the first one for timeout_ms
 * (-1: no limit); marks it read. 0; ZKR_ETIMEDOUT; the code a read of
 * the path was refused with, while no view is published; ZKR_EDEADLK;
 * ZKR_ENOMEM. */
int zkr__view_get(zkr__view_t *v, int timeout_ms, void **copy, int *n,
                  int64_t *zxid);
/* A delivery of the owner's own (its completion, posted with events
 * counted up, mutex held) has run (no mutex): the last one after a stop
 * that said 0 disposes. */
void zkr__view_event_done(zkr__view_t *v);
/* The descriptor, readable while a view is unread (-1 on failure). */
int zkr__view_fd(zkr__view_t *v);
/* Syncs the server with the leader, reads again, and waits until a view
 * read after the sync is published, for timeout_ms (-1: no limit). */
int zkr__view_sync(zkr__view_t *v, int timeout_ms);
/* The last component of a path. */
const char *zkr__view_base(const char *path);

#endif /* ZKR_CACHE_H */
