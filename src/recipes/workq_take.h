/* What the take's files (workq_take.c, workq_junk.c) share: a take is a
 * chain of asynchronous requests and an engine task (workq_take.c). */
#ifndef ZKR_WORKQ_TAKE_H
#define ZKR_WORKQ_TAKE_H

#include "workq.h"

/* The steps of a take (take_t.step): what it waits for. */
enum {
    TK_RELEASING = 1, /* the last take's turn still being given back */
    TK_TURN,          /* the turn's acquire (engine) */
    TK_TOP,           /* PATH's children: which q<L> there are */
    TK_TOP_WATCH,     /* PATH missing: an exists watch on it */
    TK_BSIZE,         /* PATH's data: B */
    TK_LEVEL,         /* q<L>'s children: its buckets */
    TK_LEVEL_WATCH,   /* an exists watch on q<L> (its version: the tail) */
    TK_BUCKET,        /* a bucket's children: its items */
    TK_BUCKET_DEL,    /* an empty sealed bucket deleted */
    TK_ITEM,          /* an item read: data, version, children */
    TK_CL_LIST,       /* an item with children: them */
    TK_CL_FIRST,      /* ... its first contender's stat (ephemeral?) */
    TK_TREE,          /* ... a node there that is no claim deleted */
    TK_DEAD,          /* dead letter: copy and delete in one multi */
    TK_DEAD_DEL,      /* ... the item alone (moved before, answer lost) */
    TK_DEAD_MK,       /* ... the dead-letter path made */
    TK_DEAD_ANC,      /* ... one of its ancestors */
    TK_BIG_WATCH,     /* an item too large, watched (in the line) */
    TK_CLAIM,         /* the claim's acquire (engine) */
    TK_WAIT,          /* nothing available: every place watched */
    TK_BPROBE,        /* a batch's round: its gets (workq_batch.c) */
    TK_BCLAIM,        /* ... its claims */
    TK_ENDED
};

#define TREE_DEPTH 8 /* levels below a foreign node that are deleted */

/* A node being deleted with what is below it (delete_tree): deleted at
 * once, or listed and its children deleted first. */
typedef struct {
    char *path;
    struct String_vector kids;
    int i, depth;
    int listed; /* its children are being deleted */
    int last;   /* its second delete is in flight */
} tree_frame_t;

typedef struct wq_probe wq_probe_t;

typedef struct wq_take {
    zkr__call_t k;    /* its requests */
    zkr__task_t tk;   /* its wake-ups */
    zkr__reader_t rd; /* claims its watches (the session's cleanup) */
    zkr_workq_t *q;
    int step;    /* TK_*, or 0: between scans */
    int running; /* take_go is running: a nested wake only says so */
    int rewake;  /* ... and it did: take_go looks again */
    int orphan;  /* ended, nobody to tell: freed when take_go returns */
    int timeout_ms;
    int64_t deadline;    /* -1: none */
    int64_t pause_until; /* after a request that could not be sent */
    int cancel;          /* zkr_workq_cancel(), or the handle freed */
    int watch;           /* this scan sets watches */
    uint64_t gen;        /* the session's watch events when it began */
    /* the scan */
    wq_listing_t l;
    int lined;        /* in the line (the turn acquired or acquiring) */
    int resumed;      /* the scan went on from the handle's cursor */
    int cw;           /* the scan sets the cursor's watches */
    int keep;         /* ... and its listing may be kept as the cursor */
    int note_new;     /* ... the listing in flight noted its path anew */
    int relisted;     /* its bucket listed again (an item found gone) */
    int32_t gone_seq; /* ... at that item: the new listing goes on after it */
    int misses;       /* items found taken before the line (WQ_MISSES) */
    int retries;      /* claims of the item looked at that found it written */
    int looking;      /* the item at l.i is being looked at (not yet passed or
                         claimed): a batch that ends there goes on from it */
    char ipath[512];
    int again; /* the item is read again after its junk went */
    /* is the item claimed? (item_claimed) */
    struct String_vector cv;
    zkr__entry_t *ce;
    int cn, ci, round, junk, first;
    tree_frame_t tree[TREE_DEPTH + 2];
    int nfr;
    /* a dead letter */
    char dead[ZKR_PATH_MAX + WQ_NAME_MAX + 2]; /* dead_path/<name> */
    char *data;
    int len, version, dead_tries, mk_tries, anc_at;
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    /* the claim, and claims that failed (freed when nothing of theirs is
     * pending any more, at the latest when the take's end is told) */
    zkr_item_t *it;
    zkr_item_t *spent; /* linked by zkr_item_t.spent_next */
    /* the watches it set, removed when it ends */
    char **wpath;
    int *wtype;
    int nw, capw;
    /* its end */
    int ended; /* a blocking take (cb NULL) has ended: its caller frees t */
    int rc;
    zkr_item_t **outs; /* its items (want of them at most): claimed */
    zkr_item_t *one;   /* ... a take of one: outs is &one */
    int want, nout;
    /* a batch's round (workq_batch.c) */
    struct wq_probe *probes;
    int nprobe, nprobing;
    zkr_item_t **claims; /* its claims in flight (want of room) */
    int nclaim;
    int bstop; /* the batch ends after this round's claims */
    zkr_take_completion_t cb;
    zkr_take_batch_completion_t bcb;
    void *cbdata;
    zkr__event_t *ev; /* its completion's event (asynchronous take) */
} take_t;

/* workq_take.c; all with the mutex held */
/* Step st's request issued with code rc: in flight (0), or not sent. */
void zkr__take_issue(take_t *t, int st, int rc);
/* The take ends with rc (0: t->out is its item). */
void zkr__take_end(take_t *t, int rc);
/* The scan stopped on rc: made again (a lost answer), or the end. */
void zkr__take_failed(take_t *t, int rc);
/* The scan goes on with the next item. */
void zkr__take_next_item(take_t *t);
int zkr__take_copy_names(struct String_vector *to,
                         const struct String_vector *v);
void zkr__take_free_names(struct String_vector *v);
void zkr__take_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx);

/* The take's next move (take_go), and a failed claim kept until it can
 * be freed. */
void zkr__take_go(take_t *t);
void zkr__take_spend(take_t *t, zkr_item_t *it);
/* A take that ends (cancel, deadline, closing) stops its claim's acquire,
 * unless its request is out on a live connection: then its answer is
 * awaited (1), so that no claim node is made in vain (each counts a
 * delivery) and a claim granted meanwhile is handed over. */
int zkr__claim_stop(zkr_item_t *it);
/* While the take's claims are out (their ends wake it): the deadline
 * still to come wakes it too (none once over or cancelled), and, while a
 * claim is awaited, a look at its connection every ZKR__RETRY_MS (lost:
 * the claim is stopped). */
void zkr__take_claims_wait(take_t *t, int awaited, int over);

/* workq_batch.c; all with the mutex held */
/* A batch with its first item: the next items of its listing read and
 * claimed together (step TK_BPROBE, then TK_BCLAIM). */
void zkr__batch_round(take_t *t);
/* Have the round's claims all ended? Then the granted ones are the
 * take's items (1); else 0 (an end wakes the take). A cancel or the
 * deadline stops those still trying (zkr__claim_stop). */
int zkr__batch_claims_took(take_t *t);

/* workq_junk.c; all with the mutex held */
/* The item t->ipath has children: a live claim (the scan goes on), or
 * nodes of others deleted and the item read again. */
void zkr__take_claimed(take_t *t);
/* The item (data, version) is moved to the dead letters. */
void zkr__take_dead_letter(take_t *t, const char *data, int len, int version);
/* The answer to a request of either (steps TK_CL_* to TK_DEAD_ANC). */
void zkr__take_junk_next(take_t *t, int step, int rc);
void zkr__take_free_junk(take_t *t);

#endif /* ZKR_WORKQ_TAKE_H */
