/* The base layer of libzkr (src/base/): the fault-injection seam,
 * utilities, node names and the grant rules' types. Includes nothing of
 * zkr's but the public header. Names use the zkr__ prefix. */
#ifndef ZKR_BASE_H
#define ZKR_BASE_H

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
/* The kinds of node before ours that a rule's grant waits on: those whose
 * departure can grant us (zkr__pred_read's: WRITE and EXCLUSIVE). */
typedef int (*zkr__waits_on_fn)(zkr__kind_t kind);
int zkr__read_waits_on(zkr__kind_t kind);
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

/* ------------------------------------------------ histograms (util.c) */

/* Fixed histogram buckets (docs/OBSERVABILITY.md lists them): times in
 * microseconds, listings as counts. counts[i] holds the observations in
 * (bound[i-1], bound[i]]; counts[nbounds] those above the last bound. */
#define ZKR__HIST_MAX 16
typedef struct zkr__hist {
    uint64_t counts[ZKR__HIST_MAX + 1];
    uint64_t n;
    uint64_t sum; /* microseconds, or listings */
} zkr__hist_t;

/* Upper bounds of the time histograms, in microseconds (util.c). */
extern const uint64_t zkr__time_bounds[];
#define ZKR__N_TIME 16
/* Counts v in h, whose buckets have these upper bounds. */
void zkr__hist_add(zkr__hist_t *h, const uint64_t *bounds, int nb, uint64_t v);

#endif /* ZKR_BASE_H */
