/* What the work queue's files (src/recipes/workq*.c) share. */
#ifndef ZKR_WORKQ_H
#define ZKR_WORKQ_H

#include "call.h"

#define WQ_BUCKET_DEFAULT 1024
#define WQ_NAME_MAX 96 /* "i-<carry>-<uuid36>-<seq10>" and more */

#define WQ_REPAIRS 20      /* bounded retries of a put or of a repair */
#define WQ_PIGGYBACK 16    /* receipt deletes carried by one put */
#define WQ_RECEIPTS_MAX 64 /* confirmed receipts kept: beyond, cleanup */

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

typedef struct {
    const char *name;
    int carry;
    int32_t seq;
} wq_entry_t;

/* workq.c */
int zkr__wq_parse_bucket(const char *value, int len);
int *zkr__wq_sorted_buckets(const struct String_vector *v, int *n);
wq_entry_t *zkr__wq_sorted_items(const struct String_vector *v, int *n);

/* workq_put.c */
void zkr__wq_receipts_to_cleanup(zkr_workq_t *q, char **v, int n, int64_t sid);
int zkr__wq_repair(wq_repair_t *r, const char *ql, int t, int mode);

/* workq_take.c */
/* Ends the take under way with ZKR_ECANCELED unless it has its item
 * already (mutex held): 0, or ZKR_ESTATE (none). */
int zkr__wq_take_cancel(zkr_workq_t *q);

/* workq_item.c */
zkr_item_t *zkr__wq_item_make(zkr_workq_t *q, const char *ipath, int level,
                              const char *name, int carry, int v, int cversion,
                              const char *data, int len, int bucket);
/* Frees an item that is neither claimed nor claiming, mutex held, when
 * nothing of it is pending: 0, or ZKR_EBUSY (zkr_item_free it later). */
int zkr__wq_item_try_free(zkr_item_t *it);

#endif /* ZKR_WORKQ_H */
