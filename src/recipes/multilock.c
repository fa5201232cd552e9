/* The multi-lock: several lock handles acquired all or nothing, one at a
 * time in the byte order of their paths, under one deadline, and released
 * together (zkr.h, zkr_multilock). It is built on the lock's public calls
 * only. Asynchronously, each member's acquire or release completion, on
 * the session's event thread, starts the next step; a blocking call runs
 * the members' blocking calls one after another on its caller's thread
 * (so it needs no event thread, as a lock's does not). Its own mutex (mu)
 * guards its state and is taken before the session's (by the member calls
 * made under it); no zkr lock is held when the member completions call
 * us. */
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "recipes.h"

typedef enum {
    M_IDLE,
    M_ACQUIRING, /* a member's acquire is pending */
    M_UNDOING,   /* the acquire failed: releasing the members granted */
    M_HELD,
    M_RELEASING
} phase_t;

struct zkr_multilock {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    zkr_session_t *s;
    int n;
    zkr_lock_t **mem; /* canonical order */
    int efd;          /* zkr_multilock_fd(), or -1 */
    phase_t phase;
    int got;             /* acquire: members granted; release: members left */
    int rc;              /* the result being made */
    int keep;            /* release: a member refused, the set stays held */
    unsigned char *left; /* members a failed acquire could not give back
                            (refused): a release from IDLE, or the free,
                            gives back those only */
    int nleft;           /* their number */
    int from_idle;       /* the release is such a try */
    int canceled;        /* the acquire was canceled */
    int blocked;         /* a blocking acquire runs ... */
    int in_member;       /* ... and is inside mem[got]'s zkr_lock_acquire() */
    int timeout;         /* the acquire's timeout_ms */
    int64_t until;       /* its deadline (zkr__now_ms()), when timeout > 0 */
    zkr_multilock_completion_t cb;
    void *data;
    int in_cb;    /* our completion is running */
    int users;    /* blocking calls under way */
    int freeing;  /* being freed: no new acquire or release */
    int orphaned; /* freed without waiting: whatever ends last destroys
                     it (last_out()) */
};

static int by_path(const void *a, const void *b)
{
    return strcmp(zkr__lock_dir(*(zkr_lock_t *const *)a),
                  zkr__lock_dir(*(zkr_lock_t *const *)b));
}

int zkr_multilock_new(zkr_multilock_t **out, zkr_lock_t *const *members,
                      int count)
{
    zkr_multilock_t *m;

    if (out == NULL || members == NULL || count < 1 ||
        count > ZKR_MULTILOCK_MAX)
        return ZBADARGUMENTS;
    for (int i = 0; i < count; i++)
        if (members[i] == NULL ||
            zkr__lock_session(members[i]) != zkr__lock_session(members[0]))
            return ZBADARGUMENTS;
    if ((m = calloc(1, sizeof(*m))) == NULL)
        return ZKR_ENOMEM;
    if ((m->mem = malloc(sizeof(*m->mem) * (size_t)count)) == NULL ||
        (m->left = calloc((size_t)count, 1)) == NULL) {
        free(m->mem);
        free(m);
        return ZKR_ENOMEM;
    }
    memcpy(m->mem, members, sizeof(*m->mem) * (size_t)count);
    qsort(m->mem, (size_t)count, sizeof(*m->mem), by_path);
    for (int i = 1; i < count; i++)
        if (by_path(&m->mem[i - 1], &m->mem[i]) == 0) {
            free(m->mem);
            free(m->left);
            free(m);
            return ZBADARGUMENTS; /* one path twice: they would wait */
        }
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->s = zkr__lock_session(members[0]);
    m->n = count;
    m->efd = -1;
    *out = m;
    return 0;
}

static void destroy(zkr_multilock_t *m)
{
    if (m->efd >= 0)
        close(m->efd);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m->mem);
    free(m->left);
    free(m);
}

/* The index of member l. */
static int idx_of(const zkr_multilock_t *m, const zkr_lock_t *l)
{
    int i = 0;

    while (i < m->n - 1 && m->mem[i] != l)
        i++;
    return i;
}

static void ignore(int rc, zkr_lock_t *l, void *data)
{
    (void)rc;
    (void)l;
    (void)data;
}

/* Gives back the members it holds and has no request for, in the
 * background (their completions do not know m), as a lock's free does:
 * the first got in every phase (all, once held), and those a failed
 * acquire could not give back. Used by the free, while
 * the members surely exist: the application may free them as soon as the
 * free returns; the step in flight, if any, then ends the chain. mu
 * held. */
static void let_go(zkr_multilock_t *m)
{
    int held = m->phase == M_HELD ? m->n : m->got;

    for (int i = m->n - 1; i >= 0; i--)
        if (i < held || m->left[i])
            zkr_lock_release_async(m->mem[i], ignore, NULL);
    memset(m->left, 0, (size_t)m->n);
    m->nleft = 0;
    m->got = 0;
    if (m->phase == M_HELD)
        m->phase = M_IDLE;
}

/* Freed, and nothing of it left running (no completion, no blocking
 * call, no member's request for it): destroy it now? mu held. */
static int last_out(const zkr_multilock_t *m)
{
    return m->orphaned && !m->in_cb && m->users == 0 &&
           (m->phase == M_IDLE || m->phase == M_HELD);
}

/* After a step (a completion, a blocking call, a free): wakes those who
 * wait for one, and destroys m if it is the last of a free that could not
 * wait. mu held on entry, released on return. */
static void step_end(zkr_multilock_t *m)
{
    int now = last_out(m);

    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (now)
        destroy(m);
}

/* Ends the current asynchronous acquire or release with rc: calls its
 * completion without mu, then destroys m if it was freed meanwhile.
 * Called with mu held; returns with it released. */
static void finish(zkr_multilock_t *m, int rc)
{
    zkr_multilock_completion_t cb = m->cb;
    void *data = m->data;

    m->cb = NULL;
    m->data = NULL;
    m->in_cb = 1;
    pthread_mutex_unlock(&m->mu);
    cb(rc, m, data);
    pthread_mutex_lock(&m->mu);
    m->in_cb = 0;
    step_end(m);
}

/* A member given back after a failed acquire answered rc: one that stays
 * held (the server refused the delete, or no memory) makes the acquire's
 * result that code, and a release from IDLE tries again (left). mu
 * held. */
static void note_undo(zkr_multilock_t *m, int i, int rc)
{
    if (rc == 0 || rc == ZKR_ELOST || rc == ZKR_ENOTHELD)
        return;
    m->rc = rc;
    if (!m->left[i]) {
        m->left[i] = 1;
        m->nleft++;
    }
}

static void on_undone(int rc, zkr_lock_t *l, void *data);

/* Releases the members granted so far, last first, one completion at a
 * time; then ends the acquire with m->rc. mu held on entry, released on
 * return. */
static void undo_next(zkr_multilock_t *m)
{
    while (m->got > 0) {
        zkr_lock_t *l = m->mem[--m->got];
        int rc = zkr_lock_release_async(l, on_undone, m);
        if (rc == 0) {
            pthread_mutex_unlock(&m->mu);
            return;
        }
        note_undo(m, m->got, rc);
    }
    m->phase = M_IDLE;
    finish(m, m->rc);
}

static void on_undone(int rc, zkr_lock_t *l, void *data)
{
    zkr_multilock_t *m = data;

    pthread_mutex_lock(&m->mu);
    if (!m->orphaned) /* else let_go() gave it back */
        note_undo(m, idx_of(m, l), rc);
    undo_next(m);
}

/* The timeout for the next member: what is left of the set's (-1 and 0
 * as given), or ZKR_ETIMEDOUT when nothing is. */
static int member_timeout(const zkr_multilock_t *m, int *t)
{
    *t = m->timeout;
    if (m->timeout > 0) {
        int64_t left = m->until - zkr__now_ms();
        if (left <= 0)
            return ZKR_ETIMEDOUT;
        *t = left > INT_MAX ? INT_MAX : (int)left;
    }
    return 0;
}

static void on_granted(int rc, zkr_lock_t *l, void *data);

/* Starts the acquire of member m->got. mu held. */
static int acquire_next(zkr_multilock_t *m)
{
    int t, rc = member_timeout(m, &t);

    return rc != 0 ? rc
                   : zkr_lock_acquire_async(m->mem[m->got], t, on_granted, m);
}

/* Every member granted: 0 if each grant still stands (a foreign client
 * may have deleted an earlier member's node while a later one was
 * awaited; a blocking caller may run late), else ZKR_ELOST. mu held. */
static int all_held(zkr_multilock_t *m)
{
    int64_t token;

    for (int i = 0; i < m->n; i++)
        if (zkr_lock_token(m->mem[i], &token) != 0)
            return ZKR_ELOST;
    return 0;
}

static void on_granted(int rc, zkr_lock_t *l, void *data)
{
    zkr_multilock_t *m = data;

    pthread_mutex_lock(&m->mu);
    if (m->orphaned) { /* let_go() gave back the others */
        if (rc == 0)   /* granted, so l is not freed */
            zkr_lock_release_async(l, ignore, NULL);
        m->phase = M_IDLE;
        finish(m, ZKR_ECANCELED);
        return;
    }
    if (rc == 0) {
        m->got++;
        if (m->canceled)
            rc = ZKR_ECANCELED;
        else if (m->got < m->n)
            rc = acquire_next(m);
        else if ((rc = all_held(m)) == 0) {
            m->phase = M_HELD;
            finish(m, 0);
            return;
        }
        if (rc == 0) { /* the next member's acquire is under way */
            pthread_mutex_unlock(&m->mu);
            return;
        }
    }
    m->rc = rc;
    m->phase = M_UNDOING;
    undo_next(m);
}

/* Whether an acquire may start now: 0, or why not. mu held. */
static int acquire_refused(const zkr_multilock_t *m)
{
    if (m->freeing)
        return ZKR_ECLOSED;
    if (m->phase == M_RELEASING)
        return ZKR_ESTATE;
    return m->phase != M_IDLE ? ZKR_EALREADY : 0;
}

/* Sets up an acquire. mu held. */
static void acquire_begin(zkr_multilock_t *m, int timeout_ms)
{
    m->timeout = timeout_ms;
    m->until = zkr__now_ms() + timeout_ms;
    m->got = 0;
    m->rc = 0;
    m->canceled = 0;
}

int zkr_multilock_acquire_async(zkr_multilock_t *m, int timeout_ms,
                                zkr_multilock_completion_t cb, void *data)
{
    int rc;

    if (m == NULL || cb == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&m->mu);
    if ((rc = acquire_refused(m)) == 0) {
        acquire_begin(m, timeout_ms);
        if ((rc = acquire_next(m)) == 0) {
            m->phase = M_ACQUIRING;
            m->cb = cb;
            m->data = data;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* The end of a blocking call: destroys m if a free that could not wait
 * left that to us. mu held on entry, released on return. */
static void blocking_end(zkr_multilock_t *m)
{
    m->users--;
    step_end(m);
}

int zkr_multilock_acquire(zkr_multilock_t *m, int timeout_ms)
{
    int rc;

    if (m == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&m->mu);
    if ((rc = acquire_refused(m)) != 0) {
        pthread_mutex_unlock(&m->mu);
        return rc;
    }
    acquire_begin(m, timeout_ms);
    m->phase = M_ACQUIRING;
    m->blocked = 1;
    m->users++;
    while (rc == 0 && m->got < m->n) {
        zkr_lock_t *l = m->mem[m->got];
        int t;
        if (m->canceled) {
            rc = ZKR_ECANCELED;
            break;
        }
        if ((rc = member_timeout(m, &t)) != 0)
            break;
        m->in_member = 1;
        pthread_mutex_unlock(&m->mu);
        rc = zkr_lock_acquire(l, t);
        pthread_mutex_lock(&m->mu);
        m->in_member = 0;
        if (m->orphaned) { /* freed meanwhile: let_go() gave back the rest */
            if (rc == 0)
                zkr_lock_release_async(l, ignore, NULL);
            rc = ZKR_ECANCELED;
            break;
        }
        if (rc == 0)
            m->got++;
    }
    if (rc == 0)
        rc = all_held(m);
    if (rc != 0) {
        m->rc = rc;
        m->phase = M_UNDOING;
        while (m->got > 0) { /* a free's let_go() ends it (got 0) */
            int i = --m->got;
            pthread_mutex_unlock(&m->mu);
            rc = zkr_lock_release(m->mem[i]);
            pthread_mutex_lock(&m->mu);
            if (!m->orphaned)
                note_undo(m, i, rc);
        }
        rc = m->rc;
    }
    m->phase = rc == 0 ? M_HELD : M_IDLE;
    m->blocked = 0;
    blocking_end(m);
    return rc;
}

int zkr_multilock_cancel(zkr_multilock_t *m)
{
    int rc = 0;

    if (m == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&m->mu);
    if (m->phase == M_UNDOING) {
        if (m->nleft == 0) /* it ends already; nothing is held */
            m->rc = ZKR_ECANCELED;
    } else if (m->phase != M_ACQUIRING) {
        rc = ZKR_ESTATE;
    } else if (!m->canceled) {
        m->canceled = 1;
        if (!m->blocked) {
            /* ZKR_ESTATE when its grant is on the way: on_granted sees
             * canceled. */
            zkr_lock_cancel(m->mem[m->got]);
        } else {
            /* The blocking acquire may be about to enter the member's
             * zkr_lock_acquire(), or be leaving it granted: until the
             * member takes the cancel or the caller is back (and sees
             * canceled), try again. */
            while (m->in_member && zkr_lock_cancel(m->mem[m->got]) != 0) {
                pthread_mutex_unlock(&m->mu);
                poll(NULL, 0, 1);
                pthread_mutex_lock(&m->mu);
            }
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static void on_released(int rc, zkr_lock_t *l, void *data);

/* One member's release answered rc. A member already released by its own
 * call (ZKR_ENOTHELD) counts as released; a lost one makes the result
 * ZKR_ELOST; a refusal (ZNOAUTH: its node stays) is the result, and the
 * set stays held so that a release can be tried again. mu held. */
static void note_release(zkr_multilock_t *m, int i, int rc)
{
    if (m->from_idle && (rc == 0 || rc == ZKR_ENOTHELD || rc == ZKR_ELOST) &&
        m->left[i]) {
        m->left[i] = 0;
        m->nleft--;
    }
    if (rc == 0 || rc == ZKR_ENOTHELD)
        return;
    if (rc != ZKR_ELOST) {
        if (!m->keep)
            m->rc = rc;
        m->keep = 1;
    } else if (m->rc == 0) {
        m->rc = rc;
    }
}

/* Whether a release may start now: 0, or why not. mu held. */
static int release_refused(const zkr_multilock_t *m)
{
    if (m->freeing)
        return ZKR_ECLOSED;
    if (m->phase == M_IDLE)
        return m->nleft > 0 ? 0 : ZKR_ENOTHELD;
    return m->phase != M_HELD ? ZKR_ESTATE : 0;
}

/* Sets up a release: of every member (those not held answer
 * ZKR_ENOTHELD), or from IDLE of those a failed acquire left. mu held. */
static void release_begin(zkr_multilock_t *m)
{
    m->from_idle = m->phase == M_IDLE;
    m->phase = M_RELEASING;
    m->got = m->n;
    m->rc = 0;
    m->keep = 0;
}

/* The release's end. mu held. */
static void release_end(zkr_multilock_t *m)
{
    if (m->from_idle) {
        m->phase = M_IDLE;
    } else {
        m->phase = m->keep ? M_HELD : M_IDLE;
    }
}

/* The next member to release, last first, or -1. mu held. */
static int release_pick(zkr_multilock_t *m)
{
    while (m->got > 0) {
        int i = --m->got;
        if (!m->from_idle || m->left[i])
            return i;
    }
    return -1;
}

/* Starts the release of the next member left: 1 when one is under way, 0
 * when none is left. mu held. */
static int release_next(zkr_multilock_t *m)
{
    int i;

    while ((i = release_pick(m)) >= 0) {
        int rc = zkr_lock_release_async(m->mem[i], on_released, m);
        if (rc == 0)
            return 1;
        note_release(m, i, rc);
    }
    release_end(m);
    return 0;
}

static void on_released(int rc, zkr_lock_t *l, void *data)
{
    zkr_multilock_t *m = data;

    pthread_mutex_lock(&m->mu);
    if (!m->orphaned) /* else let_go() gave the rest back */
        note_release(m, idx_of(m, l), rc);
    if (release_next(m))
        pthread_mutex_unlock(&m->mu);
    else
        finish(m, m->rc);
}

int zkr_multilock_release_async(zkr_multilock_t *m,
                                zkr_multilock_completion_t cb, void *data)
{
    int rc;

    if (m == NULL || cb == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&m->mu);
    if ((rc = release_refused(m)) == 0) {
        int from_idle = m->phase == M_IDLE;
        release_begin(m);
        if (release_next(m)) {
            m->cb = cb;
            m->data = data;
        } else { /* nothing to wait for: cb is not called */
            rc = m->rc != 0 ? m->rc : from_idle ? 0 : ZKR_ENOTHELD;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int zkr_multilock_release(zkr_multilock_t *m)
{
    int rc;

    if (m == NULL)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&m->mu);
    if ((rc = release_refused(m)) != 0) {
        pthread_mutex_unlock(&m->mu);
        return rc;
    }
    release_begin(m);
    m->users++;
    for (int i; (i = release_pick(m)) >= 0;) { /* let_go() ends it */
        pthread_mutex_unlock(&m->mu);
        rc = zkr_lock_release(m->mem[i]);
        pthread_mutex_lock(&m->mu);
        if (!m->orphaned)
            note_release(m, i, rc);
    }
    release_end(m);
    rc = m->rc;
    blocking_end(m);
    return rc;
}

void zkr_multilock_free(zkr_multilock_t *m)
{
    int later;

    if (m == NULL)
        return;
    /* It never waits for the server (as a lock's free does not): it ends
     * an acquire, gives back what the set holds in the background and
     * leaves the rest to whatever step is in flight (a member's
     * completion, a blocking call of another thread), the last of which
     * destroys it (last_out()). It waits only for a running completion of
     * the set, and not even that from a callback or in event-loop mode
     * (its members' completions run in zkr_session_dispatch(), maybe on
     * this thread). */
    pthread_mutex_lock(&m->s->mu);
    later = zkr__in_callback() || m->s->dispatch;
    pthread_mutex_unlock(&m->s->mu);
    pthread_mutex_lock(&m->mu);
    m->freeing = 1; /* no new acquire or release from now on */
    if (m->phase == M_ACQUIRING && !m->canceled) {
        pthread_mutex_unlock(&m->mu);
        zkr_multilock_cancel(m);
        pthread_mutex_lock(&m->mu);
    }
    while (!later && m->in_cb)
        pthread_cond_wait(&m->cv, &m->mu);
    m->orphaned = 1;
    let_go(m);
    step_end(m);
}

zkr_lock_state_t zkr_multilock_state(zkr_multilock_t *m)
{
    zkr_lock_state_t st = ZKR_LOCK_HELD;

    if (m == NULL)
        return ZKR_LOCK_IDLE;
    pthread_mutex_lock(&m->mu);
    /* Every member's state is read (which ends its descriptor's signal of
     * earlier changes) in every phase, so that a poll() loop on
     * zkr_multilock_fd() goes quiet. */
    for (int i = 0; i < m->n; i++) {
        zkr_lock_state_t one = zkr_lock_state(m->mem[i]);
        if (one == ZKR_LOCK_SUSPENDED && st == ZKR_LOCK_HELD)
            st = ZKR_LOCK_SUSPENDED;
        else if (one != ZKR_LOCK_HELD && one != ZKR_LOCK_SUSPENDED)
            st = ZKR_LOCK_LOST;
    }
    if (m->phase == M_IDLE)
        st = ZKR_LOCK_IDLE;
    else if (m->phase == M_ACQUIRING || m->phase == M_UNDOING)
        st = ZKR_LOCK_ACQUIRING;
    else if (m->phase == M_RELEASING)
        st = ZKR_LOCK_RELEASING;
    pthread_mutex_unlock(&m->mu);
    return st;
}

int zkr_multilock_count(zkr_multilock_t *m)
{
    return m != NULL ? m->n : 0;
}

zkr_lock_t *zkr_multilock_member(zkr_multilock_t *m, int i)
{
    return m != NULL && i >= 0 && i < m->n ? m->mem[i] : NULL;
}

int64_t zkr_multilock_valid_ms(zkr_multilock_t *m)
{
    int64_t least = 0;

    if (m == NULL)
        return 0;
    pthread_mutex_lock(&m->mu);
    if (m->phase == M_HELD)
        for (int i = 0; i < m->n; i++) {
            int64_t v = zkr_lock_valid_ms(m->mem[i]);
            if (i == 0 || v < least)
                least = v;
        }
    pthread_mutex_unlock(&m->mu);
    return least;
}

int zkr_multilock_fd(zkr_multilock_t *m)
{
    int fd;

    if (m == NULL)
        return -1;
    pthread_mutex_lock(&m->mu);
    if (m->efd < 0 && (fd = epoll_create1(EPOLL_CLOEXEC)) >= 0) {
        int i;
        for (i = 0; i < m->n; i++) {
            struct epoll_event ev = {.events = EPOLLIN, .data = {.u32 = 0}};
            int one = zkr_lock_fd(m->mem[i]);
            if (one < 0 || epoll_ctl(fd, EPOLL_CTL_ADD, one, &ev) != 0)
                break;
        }
        if (i == m->n)
            m->efd = fd;
        else
            close(fd);
    }
    fd = m->efd;
    pthread_mutex_unlock(&m->mu);
    return fd;
}
