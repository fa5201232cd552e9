/* A recorder of what zkr's callbacks report, with monotonic times, for the
 * fault tests. Callbacks run on zkr's event thread; tests read under the
 * mutex. Pass a struct rec as the callbacks' data. */
#ifndef ZKR_TESTS_REC_H
#define ZKR_TESTS_REC_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "zkr.h"

struct rec {
    pthread_mutex_t mu;
    int n;
    int what[64];
    int64_t at[64];
};

static inline void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
}

static inline void rec_add(struct rec *r, int what)
{
    pthread_mutex_lock(&r->mu);
    if (r->n < 64) {
        r->what[r->n] = what;
        r->at[r->n++] = zkt_now_ms();
    }
    pthread_mutex_unlock(&r->mu);
}

/* Time of the first record equal to what, or -1. */
static inline int64_t rec_find(struct rec *r, int what)
{
    int64_t t = -1;

    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && t < 0; i++)
        if (r->what[i] == what)
            t = r->at[i];
    pthread_mutex_unlock(&r->mu);
    return t;
}

static inline int rec_count(struct rec *r)
{
    int n;

    pthread_mutex_lock(&r->mu);
    n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Lock state listener: records the state. */
static inline void on_lock_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    rec_add(data, (int)st);
}

/* Session listener: records the state. */
static inline void on_session(zkr_session_t *s, zkr_state_t st, void *data)
{
    (void)s;
    rec_add(data, (int)st);
}

/* Completion: records 1 for success, else the error code. */
static inline void on_done(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    rec_add(data, rc == 0 ? 1 : rc);
}

#endif /* ZKR_TESTS_REC_H */
