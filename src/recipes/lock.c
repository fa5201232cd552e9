/* The exclusive lock: the contender-queue engine with the mutex rule
 * (granted when no contender is before us) and Curator's node naming. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes.h"

struct zkr_lock {
    zkr__contender_t c;
    /* The other side of a read/write lock (zkr_rwlock_new()), or NULL.
     * While one side has a node (acquiring or holding), the other is
     * refused with ZKR_ESTATE: its node would queue behind ours and could
     * wait for it without end. Set and cleared under the session's
     * mutex. */
    zkr_lock_t *pair;
};

/* The read/write lock's rule before an acquire (zkr__recipe_t.refuse). */
static int pair_refuse(const zkr__contender_t *c)
{
    const zkr_lock_t *l = c->owner;

    return l->pair != NULL && zkr__contender_engaged(&l->pair->c) ? ZKR_ESTATE
                                                                  : 0;
}

static void lock_deliver(zkr__contender_t *c, const zkr__event_t *ev)
{
    zkr_lock_t *l = c->owner;

    if (ev->kind == ZKR__EV_STATE)
        ((zkr_lock_listener_t)ev->fn)(l, (zkr_lock_state_t)ev->a, ev->data);
    else
        ((zkr_lock_completion_t)ev->fn)(ev->a, l, ev->data);
}

static const zkr__recipe_t lock_recipe = {
    .marker = "-lock-",
    .mode = 'x',
    .kind = "lock",
    .pred = zkr__pred_mutex,
    .deliver = lock_deliver,
};
static const zkr__recipe_t semaphore_recipe = {
    .marker = "-lock-",
    .mode = 'p',
    .kind = "semaphore",
    .poke = 1,
    .pred = zkr__pred_semaphore,
    .deliver = lock_deliver,
};
/* Curator's InterProcessReadWriteLock names. */
static const zkr__recipe_t read_recipe = {
    .marker = "-__READ__",
    .mode = 'r',
    .kind = "read",
    .pred = zkr__pred_read,
    .waits_on = zkr__read_waits_on,
    .deliver = lock_deliver,
    .refuse = pair_refuse,
};
static const zkr__recipe_t write_recipe = {
    .marker = "-__WRIT__",
    .mode = 'w',
    .kind = "write",
    .pred = zkr__pred_mutex,
    .deliver = lock_deliver,
    .refuse = pair_refuse,
};

static int lock_make(zkr_lock_t **out, zkr_session_t *s, const char *path,
                     const char *id, const struct ACL_vector *acl,
                     const zkr__recipe_t *recipe, int permits)
{
    zkr_lock_t *l;
    int rc;

    if (out == NULL || s == NULL)
        return ZBADARGUMENTS;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return ZKR_ENOMEM;
    rc = zkr__contender_init(&l->c, s, recipe, l, path, id, acl);
    if (rc != 0) {
        free(l);
        return rc;
    }
    if (recipe == &semaphore_recipe) {
        l->c.permits = permits;
        snprintf(l->c.infix, sizeof(l->c.infix), "-permits-%d", permits);
    }
    *out = l;
    return 0;
}

int zkr_lock_new(zkr_lock_t **out, zkr_session_t *s, const char *path,
                 const char *id, const struct ACL_vector *acl)
{
    return lock_make(out, s, path, id, acl, &lock_recipe, 1);
}

int zkr_semaphore_new(zkr_lock_t **out, zkr_session_t *s, const char *path,
                      int permits, const char *id, const struct ACL_vector *acl)
{
    if (permits < 1 || permits > 1000000)
        return ZBADARGUMENTS;
    return lock_make(out, s, path, id, acl, &semaphore_recipe, permits);
}

int zkr_rwlock_new(zkr_lock_t **read, zkr_lock_t **write, zkr_session_t *s,
                   const char *path, const char *id,
                   const struct ACL_vector *acl)
{
    zkr_lock_t *r = NULL;
    int rc;

    if (read == NULL || write == NULL)
        return ZBADARGUMENTS;
    if ((rc = lock_make(&r, s, path, id, acl, &read_recipe, 1)) != 0)
        return rc;
    if ((rc = lock_make(write, s, path, id, acl, &write_recipe, 1)) != 0) {
        zkr_lock_free(r);
        return rc;
    }
    /* One owner: neither side may queue behind the other (zkr.h). */
    pthread_mutex_lock(&s->mu);
    r->pair = *write;
    (*write)->pair = r;
    pthread_mutex_unlock(&s->mu);
    *read = r;
    return 0;
}

zkr_session_t *zkr__lock_session(const zkr_lock_t *l)
{
    return l->c.s;
}

const char *zkr__lock_dir(const zkr_lock_t *l)
{
    return l->c.dir;
}

void zkr_lock_free(zkr_lock_t *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->c.s->mu);
    if (l->pair != NULL)
        l->pair->pair = NULL; /* the other side acquires freely now */
    l->pair = NULL;
    pthread_mutex_unlock(&l->c.s->mu);
    zkr__contender_destroy(&l->c, free);
}

int zkr_lock_acquire(zkr_lock_t *l, int timeout_ms)
{
    if (l == NULL)
        return ZBADARGUMENTS;
    return zkr__acquire(&l->c, timeout_ms, NULL, NULL);
}

int zkr_lock_acquire_async(zkr_lock_t *l, int timeout_ms,
                           zkr_lock_completion_t cb, void *data)
{
    if (l == NULL || cb == NULL)
        return ZBADARGUMENTS;
    return zkr__acquire(&l->c, timeout_ms, (void (*)(void))cb, data);
}

int zkr_lock_cancel(zkr_lock_t *l)
{
    if (l == NULL)
        return ZBADARGUMENTS;
    return zkr__cancel(&l->c);
}

int zkr_lock_release(zkr_lock_t *l)
{
    if (l == NULL)
        return ZBADARGUMENTS;
    return zkr__release(&l->c, NULL, NULL);
}

int zkr_lock_release_async(zkr_lock_t *l, zkr_lock_completion_t cb, void *data)
{
    if (l == NULL || cb == NULL)
        return ZBADARGUMENTS;
    return zkr__release(&l->c, (void (*)(void))cb, data);
}

zkr_lock_state_t zkr_lock_state(zkr_lock_t *l)
{
    zkr_lock_state_t st;

    if (l == NULL)
        return ZKR_LOCK_IDLE;
    zkr__lock_fresh(l->c.s);
    st = l->c.pub;
    zkr__contender_read(&l->c);
    pthread_mutex_unlock(&l->c.s->mu);
    return st;
}

int zkr_lock_token(zkr_lock_t *l, int64_t *token)
{
    int rc = 0;

    if (l == NULL || token == NULL)
        return ZBADARGUMENTS;
    zkr__lock_fresh(l->c.s);
    if (l->c.phase == ZKR__P_HELD)
        *token = l->c.czxid;
    else
        rc = ZKR_ENOTHELD;
    pthread_mutex_unlock(&l->c.s->mu);
    return rc;
}

int zkr_lock_node(zkr_lock_t *l, char *buf, size_t len)
{
    int rc = 0;

    if (l == NULL || buf == NULL || len == 0)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&l->c.s->mu);
    if (l->c.node == NULL)
        rc = ZKR_ENOTHELD;
    else if (strlen(l->c.node) >= len)
        rc = ZBADARGUMENTS;
    else
        strcpy(buf, l->c.node);
    pthread_mutex_unlock(&l->c.s->mu);
    return rc;
}

int64_t zkr_lock_valid_ms(zkr_lock_t *l)
{
    return l != NULL ? zkr__valid_ms(&l->c) : 0;
}

int zkr_lock_fd(zkr_lock_t *l)
{
    return l != NULL ? zkr__contender_fd(&l->c) : -1;
}

int zkr_lock_set_listener(zkr_lock_t *l, zkr_lock_listener_t fn, void *data)
{
    if (l == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&l->c.s->mu);
    l->c.lis_fn = (void (*)(void))fn;
    l->c.lis_data = data;
    pthread_mutex_unlock(&l->c.s->mu);
    return 0;
}

int zkr_lock_set_delay(zkr_lock_t *l, int delay_ms)
{
    return l != NULL ? zkr__set_delay(&l->c, delay_ms) : ZBADARGUMENTS;
}

int zkr_lock_set_delay_flags(zkr_lock_t *l, unsigned flags)
{
    return l != NULL ? zkr__set_delay_flags(&l->c, flags) : ZBADARGUMENTS;
}

int zkr_lock_contenders(zkr_lock_t *l, zkr_contender_t **out, int *count)
{
    if (l == NULL)
        return ZBADARGUMENTS;
    return zkr_contenders_list(l->c.s, l->c.dir, out, count);
}

int zkr_lock_sequencer(zkr_lock_t *l, zkr_sequencer_t *out)
{
    int rc;

    if (l == NULL || out == NULL)
        return ZBADARGUMENTS;
    zkr__lock_fresh(l->c.s);
    rc = zkr__sequencer(&l->c, out);
    pthread_mutex_unlock(&l->c.s->mu);
    return rc;
}

int zkr_lock_guarded_multi(zkr_lock_t *l, int count, const zoo_op_t *ops,
                           zoo_op_result_t *results)
{
    if (l == NULL)
        return ZBADARGUMENTS;
    return zkr__guarded_multi(&l->c, count, ops, results, NULL, NULL);
}

int zkr_lock_guarded_multi_async(zkr_lock_t *l, int count, const zoo_op_t *ops,
                                 zoo_op_result_t *results,
                                 zkr_result_completion_t cb, void *data)
{
    if (l == NULL || cb == NULL)
        return ZBADARGUMENTS;
    return zkr__guarded_multi(&l->c, count, ops, results, cb, data);
}
