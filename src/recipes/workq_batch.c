/* A batch take's rounds (docs/design/workq.md, 3, step 8): after its
 * first claim, a take of up to N items reads the next items of its
 * listing with one get each, sent together, and claims those available
 * with one engine acquire each, all in flight at once; a round costs the
 * requests of its items and two round trips, whatever their number.
 *
 * Everything here runs with the session's mutex held. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workq_take.h"

/* One get of a round. */
struct wq_probe {
    zkr__call_t k;
    take_t *t;
    int i;  /* the item's index in t->l */
    int rc; /* its answer */
    struct Stat st;
    char *data;
    int len;
};

static void round_claims(take_t *t);

/* A probe's answer: kept; the last one starts the claims. */
static void probe_next(zkr__call_t *k, int rc)
{
    wq_probe_t *p = (wq_probe_t *)k;
    take_t *t = p->t;

    p->rc = rc;
    if (rc == ZOK && k->stat != NULL) {
        p->st = *k->stat;
        p->len = k->value != NULL && k->value_len > 0 ? k->value_len : 0;
        if (p->len > 0 && (p->data = malloc((size_t)p->len)) == NULL)
            p->rc = ZKR_ENOMEM; /* not claimed this round */
        else if (p->len > 0)
            memcpy(p->data, k->value, (size_t)p->len);
    }
    if (--t->nprobing == 0)
        round_claims(t);
}

static void free_probes(take_t *t)
{
    for (int i = 0; i < t->nprobe; i++)
        free(t->probes[i].data);
    free(t->probes);
    t->probes = NULL;
    t->nprobe = 0;
}

/* Does the batch stop here (cancelled, closing, past its deadline)? */
static int batch_over(const take_t *t)
{
    return t->cancel || t->q->s->closing ||
           (t->deadline >= 0 && zkr__now_ms() >= t->deadline);
}

/* The probes are in: each available item (no children, not too large,
 * not due for the dead letters: those are a single take's) is claimed,
 * all at once. At the first item whose get had no answer (lost, not
 * sent) or that cannot be claimed for want of memory, the round stops,
 * and so does the batch after it: the items after it are not taken
 * before it, and the handle's cursor goes on from it. A cancel or the
 * deadline meanwhile ends the batch before any claim. */
static void round_claims(take_t *t)
{
    zkr_workq_t *q = t->q;
    /* A change above the level of a cursor's old listing came in (as a
     * take of one looks at it again at its get's answer): no claim. */
    int stop =
        batch_over(t) || (t->resumed && zkr__wq_changed_above(q, t->l.level));

    if (stop)
        t->keep = 0; /* the items read are not passed: a listing anew */

    t->nclaim = 0;
    for (int i = 0; i < t->nprobe && !stop; i++) {
        wq_probe_t *p = &t->probes[i];
        const wq_entry_t *e = &t->l.e[p->i];
        char path[sizeof(t->ipath)];
        zkr_item_t *it = NULL;

        if (p->rc == ZNONODE ||
            (p->rc == ZOK &&
             (p->st.numChildren > 0 || p->len > ZKR_WORKQ_DATA_MAX ||
              (q->dead_max > 0 &&
               e->carry + (p->st.cversion + 1) / 2 >= q->dead_max))))
            continue; /* gone, claimed, or a single take's */
        if (p->rc == ZOK) {
            snprintf(path, sizeof(path), "%s/%s", t->l.bt, e->name);
            it = zkr__wq_item_make(q, path, t->l.level, e->name, e->carry,
                                   p->st.version, p->st.cversion, p->data,
                                   p->len, t->l.bsize);
        }
        if (it != NULL && zkr__acquire_task(&it->c, 0, &t->tk) != 0) {
            zkr__take_spend(t, it);
            it = NULL;
        }
        if (it == NULL) {
            t->l.i = p->i - 1; /* on from this item, later */
            stop = 1;
            break;
        }
        t->claims[t->nclaim++] = it;
    }
    free_probes(t);
    t->bstop = stop;
    if (t->nclaim == 0) {
        if (stop)
            zkr__take_end(t, 0); /* with the items it has */
        else
            zkr__batch_round(t); /* none available there: the next ones */
        return;
    }
    t->step = TK_BCLAIM;
    zkr__take_go(t);
}

void zkr__batch_round(take_t *t)
{
    zkr_workq_t *q = t->q;
    int want = t->want - t->nout, first = t->l.i + 1, n;

    t->looking = 0; /* the rounds say where the batch goes on (l.i) */

    if (batch_over(t)) {
        zkr__take_end(t, 0); /* with the items it has */
        return;
    }
    if (t->l.e == NULL || first >= t->l.ni || want <= 0) {
        /* The listing's bucket ran out: on as a take goes (the next
         * bucket, the next level), claiming one by one. */
        zkr__take_next_item(t);
        return;
    }
    n = t->l.ni - first < want ? t->l.ni - first : want;
    if ((t->probes = calloc((size_t)n, sizeof(*t->probes))) == NULL ||
        (t->claims == NULL &&
         (t->claims = calloc((size_t)t->want, sizeof(*t->claims))) == NULL)) {
        free(t->probes);
        t->probes = NULL;
        zkr__take_end(t, ZKR_ENOMEM); /* with the items it has */
        return;
    }
    t->nprobe = n;
    t->l.i = first + n - 1; /* the next round goes on after these */
    t->step = TK_BPROBE;
    t->nprobing = n + 1; /* one more until all are sent */
    for (int i = 0; i < n; i++) {
        wq_probe_t *p = &t->probes[i];
        char path[sizeof(t->ipath)];

        p->t = t;
        p->i = first + i;
        p->k.s = q->s;
        p->k.next = probe_next;
        p->rc = ZCONNECTIONLOSS;
        snprintf(path, sizeof(path), "%s/%s", t->l.bt, t->l.e[p->i].name);
        if (zkr__call_get(&p->k, path) != 0)
            t->nprobing--; /* not sent: not claimed this round */
    }
    if (--t->nprobing == 0)
        round_claims(t);
}

int zkr__batch_claims_took(take_t *t)
{
    zkr_session_t *s = t->q->s;
    int over = t->deadline >= 0 && zkr__now_ms() >= t->deadline;
    int rc;

    int awaited = 0;

    for (int i = 0; i < t->nclaim; i++)
        if (t->cancel || over || s->closing)
            awaited |= zkr__claim_stop(t->claims[i]);
    for (int i = 0; i < t->nclaim; i++) {
        zkr_item_t *it = t->claims[i];

        if (it->c.acq_sync && !it->c.acq_done) {
            zkr__take_claims_wait(t, awaited, over);
            return 0;
        }
    }
    /* All ended: the granted ones are the take's, in listing order. */
    for (int i = 0; i < t->nclaim; i++) {
        zkr_item_t *it = t->claims[i];

        if (!zkr__acquire_took(&it->c, &rc))
            rc = ZKR_ESTALE; /* no result: not granted */
        it->c.task = NULL;
        if (rc == 0 && t->nout < t->want) {
            t->outs[t->nout++] = it;
            it->handed = 1;
        } else {
            /* Cancelled, or lost to another consumer: the handle's next
             * take lists anew rather than go on past it. */
            if (rc != ZKR_ESTALE && rc != ZKR_EBUSY)
                t->keep = 0;
            zkr__take_spend(t, it);
        }
    }
    t->nclaim = 0;
    return 1;
}
