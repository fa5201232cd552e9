/* The session's events (callbacks run on its event thread, or by
 * zkr_session_dispatch()) and its requests in flight (zkr__op_t). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* ------------------------------------------------------------- events */

static void enqueue(zkr_session_t *s, zkr__event_t *ev, int kind, int a,
                    zkr__member_t *m, void (*fn)(void), void *data);

int zkr__post(zkr_session_t *s, int kind, int a, zkr__member_t *m,
              void (*fn)(void), void *data)
{
    zkr__event_t *ev;

    if (s->forked)
        return 0; /* no event thread in a forked child: nothing runs */
    ev = calloc(1, sizeof(*ev));
    /* A completion must not be lost to a failed allocation: take one of
     * the session's reserve events. */
    if (ev == NULL && (ev = s->ev_spare) != NULL) {
        s->ev_spare = ev->next;
        memset(ev, 0, sizeof(*ev));
    }
    if (ev == NULL)
        return ZKR_ENOMEM;
    enqueue(s, ev, kind, a, m, fn, data);
    return 0;
}

zkr__event_t *zkr__event_new(void)
{
    return calloc(1, sizeof(zkr__event_t));
}

void zkr__post_event(zkr_session_t *s, zkr__event_t *ev, int kind, int a,
                     zkr__member_t *m, void (*fn)(void), void *data)
{
    if (s->forked) {
        free(ev); /* no event thread in a forked child: nothing runs */
        return;
    }
    enqueue(s, ev, kind, a, m, fn, data);
}

/* Appends ev (zeroed) to the session's queue and wakes its runner. */
static void enqueue(zkr_session_t *s, zkr__event_t *ev, int kind, int a,
                    zkr__member_t *m, void (*fn)(void), void *data)
{
    ev->kind = kind;
    ev->a = a;
    ev->m = m;
    ev->fn = fn;
    ev->data = data;
    ev->seq = ++s->ev_seq;
    if (m != NULL)
        m->events++;
    if (s->ev_tail != NULL)
        s->ev_tail->next = ev;
    else
        s->ev_head = ev;
    s->ev_tail = ev;
    pthread_cond_signal(&s->ecv);
    if (s->dispatch && !s->ev_signalled) {
        /* Cannot fail: the pipe is empty (ev_signalled is 0). */
        ssize_t w = write(s->ev_fd[1], "e", 1);
        s->ev_signalled = w == 1;
    }
}

int zkr__post_call(zkr_session_t *s, void (*run)(const zkr__event_t *ev),
                   int rc, void (*fn)(void), void *data)
{
    int r = zkr__post(s, ZKR__EV_CALL, rc, NULL, fn, data);

    if (r == 0)
        s->ev_tail->run = run;
    return r;
}

static void ev_free(zkr_session_t *s, zkr__event_t *ev)
{
    if (ev >= s->ev_reserve && ev < s->ev_reserve + ZKR__EV_RESERVE) {
        ev->next = s->ev_spare;
        s->ev_spare = ev;
    } else {
        free(ev);
    }
}

/* Frees every queued event without running it. */
void zkr__ev_drop_all(zkr_session_t *s)
{
    while (s->ev_head != NULL) {
        zkr__event_t *ev = s->ev_head;
        s->ev_head = ev->next;
        ev_free(s, ev);
    }
    s->ev_tail = NULL;
}

static void run_session_event(zkr_session_t *s, const zkr__event_t *ev)
{
    /* The listeners are called from a snapshot (one may remove itself).
     * A few fit on the stack: no allocation can lose the event. */
    zkr__listener_t few[8], *snap = few, *l;
    int n = 0, i = 0;

    for (l = s->listeners; l != NULL; l = l->next)
        n++;
    if (n > 8 && (snap = calloc((size_t)n, sizeof(*snap))) == NULL) {
        snap = few; /* out of memory: the first few only, never none */
        n = 8;
    }
    for (l = s->listeners; l != NULL && i < n; l = l->next)
        snap[i++] = *l;
    s->ev_busy_session = 1;
    pthread_mutex_unlock(&s->mu);
    for (i = 0; i < n; i++)
        snap[i].fn(s, (zkr_state_t)ev->a, snap[i].data);
    pthread_mutex_lock(&s->mu);
    s->ev_busy_session = 0;
    if (snap != few)
        free(snap);
}

/* Runs one event taken off the queue, mutex held (released around the
 * callbacks); frees it. Returns 1, or 0 when it was dropped (a state
 * change of a freed handle). */
static int run_event(zkr_session_t *s, zkr__event_t *ev)
{
    int n = 1;

    if (ev->kind == ZKR__EV_SESSION) {
        run_session_event(s, ev);
    } else if (ev->kind == ZKR__EV_CALL) {
        pthread_mutex_unlock(&s->mu);
        ev->run(ev);
        pthread_mutex_lock(&s->mu);
    } else {
        /* The last event of a handle freed on this thread (m->freeing)
         * finishes the free. */
        zkr__member_t *m = ev->m;
        n = s->hooks->deliver(ev);
        if (--m->events == 0 && m->freeing)
            s->hooks->dispose(m);
    }
    ev_free(s, ev);
    pthread_cond_broadcast(&s->cv);
    return n;
}

/* Takes the next event, if it was posted no later than the limit. */
static zkr__event_t *ev_take(zkr_session_t *s, uint64_t limit)
{
    zkr__event_t *ev = s->ev_head;

    if (ev == NULL || ev->seq > limit)
        return NULL;
    s->ev_head = ev->next;
    if (s->ev_head == NULL)
        s->ev_tail = NULL;
    return ev;
}

void *zkr__event_main(void *arg)
{
    zkr_session_t *s = arg;

    zkr__tl_event_session = s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        zkr__event_t *ev = s->ev_held ? NULL : ev_take(s, UINT64_MAX);
        if (ev == NULL) {
            if (s->stop)
                break;
            pthread_cond_wait(&s->ecv, &s->mu);
            continue;
        }
        run_event(s, ev);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* A session without an event thread: runs the events posted up to limit
 * on this thread, as its event thread would (a blocking call from one of
 * them returns ZKR_EDEADLK). Mutex held. Returns the events run. */
int zkr__dispatch_locked(zkr_session_t *s, uint64_t limit)
{
    zkr_session_t *outer = zkr__tl_event_session;
    zkr__event_t *ev;
    int n = 0;

    s->dispatching = 1;
    zkr__tl_event_session = s;
    while ((ev = ev_take(s, limit)) != NULL)
        n += run_event(s, ev);
    zkr__tl_event_session = outer;
    s->dispatching = 0;
    pthread_cond_broadcast(&s->cv); /* a free may wait for us to end */
    if (s->ev_head == NULL && s->ev_signalled) {
        char buf[16];
        while (read(s->ev_fd[0], buf, sizeof(buf)) > 0)
            ;
        s->ev_signalled = 0;
    }
    return n;
}

void zkr__set_state(zkr_session_t *s, zkr_state_t st)
{
    if (s->state == st)
        return;
    zkr__metrics_state(s, st, zkr__deadline_of(s) - zkr__now_ms());
    s->state = st;
    zkr__post(s, ZKR__EV_SESSION, (int)st, NULL, NULL, NULL);
    pthread_cond_broadcast(&s->cv);
}

/* --------------------------------------------------------------- ops */

void zkr__retry_later(zkr_session_t *s)
{
    if (s->retry_at < 0) {
        s->retry_at = zkr__now_ms() + ZKR__RETRY_MS;
        zkr__timer_kick(s);
    }
}

zkr__op_t *zkr__op_new(zkr_session_t *s, zkr__member_t *m)
{
    zkr__op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        if (m != NULL)
            m->stalled = 1;
        zkr__retry_later(s);
        return NULL;
    }
    op->s = s;
    op->m = m;
    op->sent = zkr__now_ms();
    op->sid = s->sid;
    if (m != NULL)
        m->busy++;
    s->ops++;
    return op;
}

static void sent_unlink(zkr_session_t *s, zkr__op_t *op)
{
    if (!op->on_sent)
        return;
    if (op->sent_prev != NULL)
        op->sent_prev->sent_next = op->sent_next;
    else
        s->sent = op->sent_next;
    if (op->sent_next != NULL)
        op->sent_next->sent_prev = op->sent_prev;
    op->sent_prev = op->sent_next = NULL;
    op->on_sent = 0;
}

int zkr__op_sent(int rc, zkr__op_t *op, zhandle_t *zh, int kind,
                 void (*cb)(void))
{
    zkr_session_t *s = op->s;

    if (rc != ZOK)
        return rc;
    op->zh = zh;
    op->kind = kind;
    op->cb = cb;
    op->sent_prev = NULL;
    op->sent_next = s->sent;
    if (s->sent != NULL)
        s->sent->sent_prev = op;
    s->sent = op;
    op->on_sent = 1;
    return rc;
}

/* Calls op's completion as the client would for a request that failed
 * with rc: no result. */
static void op_fail(zkr__op_t *op, int rc)
{
    switch (op->kind) {
    case ZKR__CB_VOID:
        ((void_completion_t)op->cb)(rc, op);
        break;
    case ZKR__CB_STAT:
        ((stat_completion_t)op->cb)(rc, NULL, op);
        break;
    case ZKR__CB_DATA:
        ((data_completion_t)op->cb)(rc, NULL, -1, NULL, op);
        break;
    case ZKR__CB_STRINGS:
        ((strings_completion_t)op->cb)(rc, NULL, op);
        break;
    case ZKR__CB_STRINGS_STAT:
        ((strings_stat_completion_t)op->cb)(rc, NULL, NULL, op);
        break;
    case ZKR__CB_STRING:
        ((string_completion_t)op->cb)(rc, NULL, op);
        break;
    case ZKR__CB_ACL:
        ((acl_completion_t)op->cb)(rc, NULL, NULL, op);
        break;
    default: /* ZKR__CB_STRING_STAT */
        ((string_stat_completion_t)op->cb)(rc, NULL, NULL, op);
        break;
    }
}

/* Closes zh, which zkr opened and nobody can use any more (mutex held,
 * released meanwhile: closing runs completions that take it).
 *
 * zookeeper_close() of the multithreaded client 3.8.0 does not reliably
 * call the completions of the requests still in flight: it sets
 * close_requested, then queues a ZCLOSING answer for each request; but its
 * completion thread ends at the first moment it finds its queue empty
 * once close_requested is set, which can be before, or in the middle of,
 * that queueing; and destroy() queues the rest again where no thread will
 * ever take them (process_async() is 0 in that library). A request left
 * without an answer leaves its contender (or a free, or the session's
 * close) waiting for it forever. Once zookeeper_close() has returned, the
 * client's threads are joined and the handle freed: no completion can come
 * any more. So every request still recorded as sent on zh is completed
 * here, with ZCLOSING, exactly once. */
void zkr__close_handle(zkr_session_t *s, zhandle_t *zh)
{
    zkr__op_t *left = NULL, *op, *next;

    pthread_mutex_unlock(&s->mu);
    zookeeper_close(zh);
    pthread_mutex_lock(&s->mu);
    for (op = s->sent; op != NULL; op = next) {
        next = op->sent_next;
        if (op->zh == zh) {
            sent_unlink(s, op);
            op->sent_next = left;
            left = op;
        }
    }
    pthread_mutex_unlock(&s->mu);
    zkr__tl_synthetic = 1;
    while ((op = left) != NULL) {
        left = op->sent_next;
        op->sent_next = NULL;
        op_fail(op, ZCLOSING);
    }
    zkr__tl_synthetic = 0;
    pthread_mutex_lock(&s->mu);
}

void zkr__op_cancel(zkr__op_t *op)
{
    /* The request was not sent: whatever waited for its answer (a
     * contender's step, a cleanup) is taken again by the timer thread. */
    if (op->m != NULL)
        op->m->stalled = 1;
    zkr__retry_later(op->s);
    if (op->m != NULL)
        op->m->busy--;
    sent_unlink(op->s, op);
    op->s->ops--;
    free(op->path);
    free(op);
}

zkr_session_t *zkr__op_begin(zkr__op_t *op, int rc)
{
    zkr_session_t *s = op->s;

    if (!zkr__tl_synthetic)
        zkr__tl_zk_thread = 1;
    pthread_mutex_lock(&s->mu);
    sent_unlink(s, op);
    s->ops--;
    if (op->m != NULL)
        op->m->busy--;
    /* No answer but a heartbeat's moves the deadline: a follower answers
     * reads by itself, even when cut off from the ensemble's leader (see the
     * top of session.c). */
    (void)rc;
    return s;
}

void zkr__op_end(zkr__op_t *op)
{
    zkr_session_t *s = op->s;

    /* The contender was busy with this request: a step it skipped
     * meanwhile (after a reconnection, say) is taken now. Without this a
     * listing that failed on a connection loss after the reconnection had
     * been handled left its waiter pending forever. */
    if (op->m != NULL)
        s->hooks->step(op->m);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(op->path);
    free(op);
}

void zkr__heard(zkr_session_t *s, int64_t sent)
{
    if (sent > s->last_heard)
        s->last_heard = sent;
}

void zkr__timer_kick(zkr_session_t *s)
{
    pthread_cond_signal(&s->tcv);
}

/* Waits on cv (mutex held) until signalled or the deadline, in ms of
 * zkr__now_ms() (CLOCK_BOOTTIME). Condition variables cannot wait on
 * CLOCK_BOOTTIME, so we wait on CLOCK_MONOTONIC for the time left, at most
 * a second at a time: a suspend stops CLOCK_MONOTONIC, and a wait begun
 * before it would otherwise end the suspend's length too late. Every caller
 * re-checks its condition and the time after waking. */
void zkr__wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
    struct timespec ts;
    int64_t left = deadline - zkr__now_ms();

    if (left > 1000)
        left = 1000;
    if (left < 0)
        left = 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

int zkr__wait(zkr_session_t *s, const int *flag, int64_t deadline)
{
    do {
        if (flag != NULL && *flag)
            return 0;
        if (deadline < 0) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else {
            if (zkr__now_ms() >= deadline)
                return ZKR_ETIMEDOUT;
            zkr__wait_until(&s->cv, &s->mu, deadline);
        }
    } while (flag != NULL);
    return 0;
}

int zkr__read_begin(zkr_session_t *s, const char *path, zhandle_t **zh)
{
    if (s == NULL || zkr__check_path(path) != 0)
        return ZBADARGUMENTS;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    return zkr__zh_get(s, zh);
}

int zkr__zh_get(zkr_session_t *s, zhandle_t **zh)
{
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    if (s->closing)
        rc = ZKR_ECLOSED;
    else if (s->zh == NULL || !s->connected)
        rc = ZCONNECTIONLOSS;
    else {
        *zh = s->zh;
        s->zh_users++;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void zkr__zh_put(zkr_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->zh_users--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
