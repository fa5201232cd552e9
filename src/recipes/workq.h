/* What the work queue's files (src/recipes/workq*.c) share. */
#ifndef ZKR_WORKQ_H
#define ZKR_WORKQ_H

#include "call.h"

#define WQ_BUCKET_DEFAULT 1024
#define WQ_NAME_MAX 96 /* "i-<carry>-<uuid36>-<seq10>" and more */

#define WQ_REPAIRS 20      /* bounded retries of a put or of a repair */
#define WQ_PIGGYBACK 16    /* receipt deletes carried by one put */
#define WQ_RECEIPTS_MAX 64 /* confirmed receipts kept: beyond, cleanup */
#define WQ_MISSES 2        /* items found taken before a take joins the line */
#define WQ_CLAIM_RETRIES 3 /* claims of one item that found it written */

enum { WQ_AGAIN = 1, WQ_EMPTY = 2 }; /* scan results besides 0 and errors */

/* A seal or repair of a level's tail, as a chain (workq_put.c,
 * zkr__wq_repair). The owner sets k.s, k.m, acl and done. */
enum { WQ_SEAL = 1, WQ_REPAIR_SEALED, WQ_REPAIR_MISSING };
typedef struct wq_repair wq_repair_t;
struct wq_repair {
    zkr__call_t k;
    const struct ACL_vector *acl;
    void (*done)(wq_repair_t *r, int rc); /* mutex held; may free r */
    char ql[300], bt[320], bb[320], next[320];
    int t, mode, step;
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
};

typedef struct {
    const char *name;
    int carry;
    int32_t seq;
} wq_entry_t;

/* Where a scan is: the levels, one level's buckets, one bucket's items,
 * and the item looked at (take_t.l, and the handle's cursor). */
typedef struct {
    unsigned levels; /* the q<L> under PATH */
    int level, bsize;
    int *bk, nb, b, qver, tail; /* tail: the bucket's listing is watched */
    int sealed;                 /* the bucket was sealed when listed */
    char ql[300], bt[320];
    struct String_vector iv; /* the bucket's names (owned) */
    wq_entry_t *e;           /* ... its items, oldest first */
    int ni, i;
} wq_listing_t;

#define WQ_CURSOR_WATCHES 16 /* watches a cursor relies on, at most */
#define WQ_CHANGED_TOP (1u << ZKR_WORKQ_LEVELS)

/* A consumer's cursor (workq.md, 3): the listing of its last claim, gone
 * on from by its next take while valid: made in session sid, and no
 * change at PATH or at a level above its own told since (the child
 * watches its listings set; workq_take.c, cursor_event). */
typedef struct {
    zkr__reader_t rd; /* follows those watches, so that none is removed */
    int have;         /* l is kept */
    /* where a change was told since the last listing from the top began:
     * bit L, level L (its tail bucket); bit WQ_CHANGED_TOP, PATH */
    unsigned changed;
    int64_t sid; /* the session its watches are in */
    wq_listing_t l;
    char *wpath[WQ_CURSOR_WATCHES]; /* the watches set, not yet fired */
    int nw;
} wq_cursor_t;

struct zkr_workq {
    zkr__contender_t turn; /* PATH/consumers: whose turn it is */
    zkr_session_t *s;
    char *path;
    char *id;
    const struct ACL_vector *acl; /* &turn.acl */
    int bucket;                   /* B, 0 until read */
    int made[ZKR_WORKQ_LEVELS];   /* q<L> and b0 exist (cached) */
    int dead_max;
    char *dead_path;
    struct wq_take *take; /* the take under way (one at a time), or NULL */
    wq_cursor_t cur;      /* where the last take claimed */
    int async_puts;       /* asynchronous puts running */
    /* receipts of puts whose outcome is known, to delete (session
     * rcpt_sid): they ride on the next put (workq.md, receipts) */
    char *rcpt[WQ_RECEIPTS_MAX];
    int nrcpt;
    int64_t rcpt_sid;
};

struct zkr_item {
    zkr__contender_t c; /* the claim: directory = the item node */
    zkr_session_t *s;
    char *qpath;
    char *id;    /* q<L>/b<k>/<name> */
    char *ipath; /* full path of the item node */
    char *name;
    int level, carry;
    int version;    /* the item's data version our claim wrote (v + 1) */
    int deliveries; /* carry + claims before ours (cversion / 2) + 1 */
    int bucket;     /* B of the queue */
    char *data;
    size_t len;
    int finished; /* acked or nacked */
    int handed;   /* a take gave it to its caller */
    /* an ack or nack in flight */
    int busy, sync, done, rc, where; /* where: -1 ack, else the nack's */
    zkr_item_completion_t cb;
    void *cbdata;
    zkr__commit_t cm;
    zoo_op_t ops[6];
    zoo_op_result_t res[6];
    char receipt[340]; /* PATH/receipts/<uuid> of the commit in flight */
    char rdir[300];
    char *tail_path;    /* nack back: q<L>/b<t> */
    char *new_prefix;   /* ... and the new item's name prefix */
    char created[1024]; /* ... its name as created, and (at 512) its prefix */
    int tail;
    int tail_rc;    /* nack back: how b<tail> failed (BADVERSION, NONODE) */
    int tail_tries; /* ... and how often, this commit (WQ_REPAIRS) */
    int rdir_made;  /* the receipts' container made again for this commit */
    wq_repair_t rp; /* nack back: the repair of the tail */
    zkr_item_t *spent_next; /* a failed claim kept by its take (take_t) */
};

/* workq.c */
int zkr__wq_parse_bucket(const char *value, int len);
int *zkr__wq_sorted_buckets(const struct String_vector *v, int *n);
wq_entry_t *zkr__wq_sorted_items(const struct String_vector *v, int *n);

/* workq_put.c */
/* The receipt of a commit (an ack, a nack) whose outcome is known (mutex
 * held): kept by a handle of the session on the queue, to ride on its
 * next put or be deleted with others in one multi; else the cleanup's. */
void zkr__wq_receipt_done(zkr_session_t *s, const char *qpath,
                          const char *receipt);
void zkr__wq_receipts_to_cleanup(zkr_workq_t *q, char **v, int n, int64_t sid);
int zkr__wq_repair(wq_repair_t *r, const char *ql, int t, int mode);

/* workq_take.c */
/* Ends the take under way with ZKR_ECANCELED unless it has its item
 * already (mutex held): 0, or ZKR_ESTATE (none). */
int zkr__wq_take_cancel(zkr_workq_t *q);
/* The handle's cursor, begun in zkr_workq_new() and ended (its watches
 * to the session's cleanup) in zkr_workq_free(); mutex held. */
void zkr__wq_cursor_init(zkr_workq_t *q);
void zkr__wq_cursor_end(zkr_workq_t *q);
/* An item of queue qpath may be back where it was (a nack to the front,
 * a failed commit, a claim freed while held): the cursors of the
 * session's handles on that queue list from the top next (mutex held). */
void zkr__wq_gave_back(zkr_session_t *s, const char *qpath);
/* Has a change at PATH or at a level above `level` been told to q's
 * cursor since its last listing from the top? (mutex held) */
int zkr__wq_changed_above(const zkr_workq_t *q, int level);
/* A handle of session s on queue qpath, or NULL (mutex held). */
zkr_workq_t *zkr__wq_handle_of(zkr_session_t *s, const char *qpath);

/* workq_item.c */
zkr_item_t *zkr__wq_item_make(zkr_workq_t *q, const char *ipath, int level,
                              const char *name, int carry, int v, int cversion,
                              const char *data, int len, int bucket);
/* Frees an item that is neither claimed nor claiming, mutex held, when
 * nothing of it is pending: 0, or ZKR_EBUSY (zkr_item_free it later). */
int zkr__wq_item_try_free(zkr_item_t *it);

#endif /* ZKR_WORKQ_H */
