/* A take's slower paths (workq_take.c drives them): an item with
 * children that may be no claim (another client's nodes, deleted), and
 * an item delivered dead_max times (moved to the dead letters). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workq_take.h"

static void cl_next_junk(take_t *t);
static void dead_send(take_t *t);

static void free_tree(take_t *t)
{
    for (; t->nfr > 0; t->nfr--) {
        free(t->tree[t->nfr - 1].path);
        zkr__take_free_names(&t->tree[t->nfr - 1].kids);
    }
}

static void free_claimed(take_t *t)
{
    free(t->ce);
    t->ce = NULL;
    t->cn = 0;
    zkr__take_free_names(&t->cv);
}

/* ----------------------------------------- is an item with children
 * claimed? A claim is an ephemeral contender node (engine name,
 * ephemeral owner): anything else under an item is not the queue's and
 * would keep it from ever being taken or completed, so it is deleted
 * (workq.md, section 3). */

static void claimed_list(take_t *t)
{
    free_claimed(t);
    zkr__take_issue(t, TK_CL_LIST,
                    zkr__call_children2(&t->k, t->ipath,
                                        t->watch ? zkr__take_watcher : NULL,
                                        t->q->s));
}

/* A round of deleting what is no claim ended with rc. */
static void cl_round_end(take_t *t, int rc)
{
    free_claimed(t);
    if (rc != ZOK) {
        if (zkr__call_conn_error(rc) || rc == ZKR_ENOMEM ||
            rc == ZSESSIONEXPIRED)
            zkr__take_failed(t, rc);
        else
            zkr__take_next_item(
                t); /* a node we may not delete (ZNOAUTH): skipped */
        return;
    }
    if (!t->junk) { /* nothing there now: available, read again */
        t->again = 1;
        zkr__take_issue(t, TK_ITEM, zkr__call_get(&t->k, t->ipath));
    } else if (++t->round < 3) {
        claimed_list(t);
    } else {
        zkr__take_next_item(t); /* still changing: left for the next scan */
    }
}

static void tree_step(take_t *t);

/* Deletes path and what is below it (at most depth levels below). */
static void tree_begin(take_t *t, const char *path, int depth)
{
    tree_frame_t *f = &t->tree[0];

    memset(f, 0, sizeof(*f));
    if ((f->path = zkr__strdup(path)) == NULL) {
        cl_round_end(t, ZKR_ENOMEM);
        return;
    }
    f->depth = depth;
    t->nfr = 1;
    zkr__take_issue(t, TK_TREE, zkr__call_delete(&t->k, f->path, -1));
}

/* The tree's top node is done with rc (ZOK: gone). */
static void tree_pop(take_t *t, int rc)
{
    for (;;) {
        tree_frame_t *f = &t->tree[t->nfr - 1];

        free(f->path);
        zkr__take_free_names(&f->kids);
        if (--t->nfr == 0) {
            /* The first contender deleted ends the round; a junk child
             * lets the next one go. */
            if (rc != ZOK || t->first)
                cl_round_end(t, rc);
            else
                cl_next_junk(t);
            return;
        }
        if (rc == ZOK)
            break;
    }
    tree_step(t);
}

/* The next child of the top node deleted, or the node itself again once
 * they are. */
static void tree_step(take_t *t)
{
    tree_frame_t *f = &t->tree[t->nfr - 1], *c;

    if (f->i >= f->kids.count) {
        f->last = 1;
        zkr__take_issue(t, TK_TREE, zkr__call_delete(&t->k, f->path, -1));
        return;
    }
    c = &t->tree[t->nfr];
    memset(c, 0, sizeof(*c));
    /* Names of other clients' nodes can be of any length. */
    if ((c->path = zkr__join(f->path, f->kids.data[f->i++])) == NULL) {
        tree_pop(t, ZKR_ENOMEM);
        return;
    }
    c->depth = f->depth - 1;
    t->nfr++;
    zkr__take_issue(t, TK_TREE, zkr__call_delete(&t->k, c->path, -1));
}

static void tree_answer(take_t *t, int rc, const struct String_vector *v)
{
    tree_frame_t *f = &t->tree[t->nfr - 1];

    if (f->listed && !f->last) { /* its listing */
        if (rc != ZOK) {
            tree_pop(t, rc == ZNONODE ? ZOK : rc);
            return;
        }
        if (zkr__take_copy_names(&f->kids, v) != 0) {
            tree_pop(t, ZKR_ENOMEM);
            return;
        }
        tree_step(t);
        return;
    }
    if (rc == ZNOTEMPTY && !f->listed && f->depth > 0) {
        f->listed = 1;
        zkr__take_issue(t, TK_TREE, zkr__call_children(&t->k, f->path));
        return;
    }
    tree_pop(t, rc == ZNONODE ? ZOK : rc);
}

/* Deletes the item's child name, which is no claim (first: it is the
 * first contender's name, the round ends after it). */
static void delete_junk(take_t *t, const char *name, int first)
{
    /* Names of other clients' nodes can be of any length. */
    char *path = zkr__join(t->ipath, name);

    if (path == NULL) {
        cl_round_end(t, ZKR_ENOMEM);
        return;
    }
    t->junk = 1;
    t->first = first;
    tree_begin(t, path, TREE_DEPTH);
    free(path);
}

/* The next child of the item that is no contender: deleted; then the
 * first contender's stat. */
static void cl_next_junk(take_t *t)
{
    char *path;

    while (++t->ci < t->cv.count) {
        int claim = 0;

        for (int k = 0; k < t->cn && !claim; k++)
            claim = t->ce[k].name == t->cv.data[t->ci];
        if (claim)
            continue;
        delete_junk(t, t->cv.data[t->ci], 0);
        return;
    }
    if (t->cn == 0) {
        cl_round_end(t, ZOK);
        return;
    }
    if ((path = zkr__join(t->ipath, t->ce[0].name)) == NULL) {
        cl_round_end(t, ZKR_ENOMEM);
        return;
    }
    zkr__take_issue(t, TK_CL_FIRST, zkr__call_exists(&t->k, path));
    free(path);
}

/* ------------------------------------------------------- dead letter */

/* Moves an item that has been delivered dead_max times to the
 * dead-letter path: its copy and its deletion in one multi. */
static void dead_send(take_t *t)
{
    zkr_workq_t *q = t->q;

    if (t->dead_tries++ >= 3) {
        zkr__take_next_item(t);
        return;
    }
    zoo_create_op_init(&t->ops[0], t->dead, t->data, t->len, q->acl,
                       ZOO_PERSISTENT, NULL, 0);
    zoo_delete_op_init(&t->ops[1], t->ipath, t->version);
    /* Results are only written by a multi the server answered. */
    memset(t->res, 0, sizeof(t->res));
    zkr__take_issue(t, TK_DEAD, zkr__call_multi(&t->k, 2, t->ops, t->res));
}

/* The dead-letter path made (persistent), after its missing ancestors
 * (containers, from the root down: dead_anc). */
static void dead_mk(take_t *t)
{
    zkr_workq_t *q = t->q;

    if (t->mk_tries++ >= 5) {
        zkr__take_next_item(t);
        return;
    }
    t->anc_at = 0;
    zkr__take_issue(
        t, TK_DEAD_MK,
        zkr__call_create(&t->k, q->dead_path, "", 0, q->acl, ZOO_PERSISTENT));
}

/* The next ancestor of the dead-letter path below the last one made,
 * or the path itself once they all are. */
static void dead_anc(take_t *t)
{
    zkr_workq_t *q = t->q;
    int rc;

    if (!zkr__call_ancestor(&t->k, q->dead_path, &t->anc_at, q->acl,
                            ZOO_CONTAINER, &rc))
        dead_mk(t);
    else
        zkr__take_issue(t, TK_DEAD_ANC, rc);
}

void zkr__take_dead_letter(take_t *t, const char *data, int len, int version)
{
    zkr_workq_t *q = t->q;
    char *d = realloc(t->data, len > 0 ? (size_t)len : 1);

    if (d == NULL) {
        zkr__take_end(t, ZKR_ENOMEM);
        return;
    }
    t->data = d;
    if (len > 0)
        memcpy(t->data, data, (size_t)len);
    t->len = len;
    t->version = version;
    if (snprintf(t->dead, sizeof(t->dead), "%s/%s", q->dead_path,
                 t->l.e[t->l.i].name) >= (int)sizeof(t->dead)) {
        zkr__take_next_item(t); /* cannot be: item names are short */
        return;
    }
    t->dead_tries = 0;
    t->mk_tries = 0;
    dead_send(t);
}

void zkr__take_claimed(take_t *t)
{
    t->round = 0;
    claimed_list(t);
}

void zkr__take_free_junk(take_t *t)
{
    free_claimed(t);
    free_tree(t);
}

/* Mutex held: the answer to a request of the steps above. */
void zkr__take_junk_next(take_t *t, int step, int rc)
{
    const zkr__call_t *k = &t->k;
    const struct Stat *st = k->stat;

    switch (step) {
    case TK_CL_LIST:
        if (rc != ZOK) {
            if (rc == ZNONODE)
                zkr__take_next_item(t); /* gone: nothing to take */
            else
                zkr__take_failed(t, rc);
            return;
        }
        if (zkr__take_copy_names(&t->cv, k->strings) != 0 ||
            (rc = zkr__sort_children(&t->cv, &t->ce, &t->cn)) != 0) {
            zkr__take_end(t, ZKR_ENOMEM);
            return;
        }
        t->ci = -1;
        t->junk = 0;
        cl_next_junk(t);
        return;
    case TK_CL_FIRST:
        /* The first contender holds the item: a claim only if ephemeral
         * (a persistent node of that name is not one). */
        if (rc == ZOK && st->ephemeralOwner != 0) {
            free_claimed(t);
            zkr__take_next_item(t);
        } else if (rc == ZOK) {
            delete_junk(t, t->ce[0].name, 1);
        } else {
            cl_round_end(t, rc == ZNONODE ? ZOK : rc);
        }
        return;
    case TK_TREE:
        tree_answer(t, rc, k->strings);
        return;
    case TK_DEAD:
        if (rc == ZOK) {
            zkr__take_next_item(t);
        } else if (t->res[0].err == ZNODEEXISTS) { /* moved, answer lost */
            zkr__take_issue(t, TK_DEAD_DEL,
                            zkr__call_delete(&t->k, t->ipath, t->version));
        } else if (t->res[0].err == ZNONODE) {
            dead_mk(t);
        } else if (zkr__call_conn_error(rc)) {
            zkr__take_failed(t, rc);
        } else {
            zkr__take_next_item(t); /* changed meanwhile */
        }
        return;
    case TK_DEAD_DEL:
        zkr__take_next_item(t);
        return;
    case TK_DEAD_MK:
    case TK_DEAD_ANC:
        if (rc == ZOK || rc == ZNODEEXISTS) {
            if (step == TK_DEAD_MK)
                dead_send(t);
            else
                dead_anc(t);
        } else if (rc == ZNONODE) {
            /* the path's parent is missing (made from the root down), or
             * an empty container above it went meanwhile: again, bounded
             * (mk_tries) */
            if (step == TK_DEAD_MK)
                dead_anc(t);
            else
                dead_mk(t);
        } else if (zkr__call_conn_error(rc)) {
            zkr__take_failed(t, rc);
        } else {
            /* refused (ZNOAUTH): the item stays, as a refused move */
            zkr__take_next_item(t);
        }
        return;
    default:
        return;
    }
}
