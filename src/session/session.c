/* The session layer (SPEC section 1): one ZooKeeper handle, its connection
 * state, the safe deadline, the event and timer threads, and the cleanup of
 * nodes that must be deleted whatever happens.
 *
 * Threads. ZooKeeper's completion thread runs our completions and watchers;
 * they only change state under s->mu and post events. The timer thread
 * sends heartbeats, enforces acquire deadlines, declares LOST at the safe
 * deadline and re-creates the handle after LOST; it never runs application
 * code, so a slow callback cannot delay a loss. The event thread runs every
 * application callback, in order, with no lock held.
 *
 * The safe deadline. The server that expires sessions is the LEADER (a
 * standalone server is its own leader); it expires a session no earlier
 * than T after it last touched it (its expiry buckets round up, never
 * down). Our deadline must rest only on proof that the leader touched the
 * session recently, never on an answer a follower gives by itself: a
 * follower cut off from its leader keeps answering reads for up to
 * syncLimit x tickTime while the leader, hearing nothing, expires the
 * session after T (issue 12.1: a waiter was granted seconds before such a
 * holder's deadline). So:
 *
 *  - The heartbeat is a sync ("/"), which a follower forwards to the
 *    leader and answers only once the leader has answered it; the leader
 *    checks the session (PrepRequestProcessor) before it answers. Only a
 *    sync's answer moves last_heard; reads and writes of the recipes do
 *    not (a follower answers a read by itself). A sync goes out every
 *    H = T/12, one at a time.
 *
 *  - What a sync proves. A request received by a follower touches the
 *    session only in the follower's table; the leader learns of it when
 *    the follower answers the leader's next ping, and the leader pings
 *    every tickTime/2. A sync sent at s reached the follower, which
 *    touched the session and then forwarded the sync, at some f >= s; the
 *    forward reached the leader, so everything the follower wrote to the
 *    leader before f arrived too, among it the answer to the last ping the
 *    follower got before f, at P0 >= f - tickTime/2 - d (d: the leader-to-
 *    follower delay). That answer, or an earlier one, carried every touch
 *    the follower recorded up to P0, and the leader applies a touch on
 *    receipt. So an earlier heartbeat, sent at s1 on the same connection
 *    and ANSWERED at a1 <= s - T/4, reached the follower before P0 (as
 *    T/4 >= tickTime/2 + d: ZooKeeper requires T >= 2 x tickTime, its
 *    default minSessionTimeout, documented as the smallest timeout it
 *    supports; the client cannot know tickTime, so it uses this bound),
 *    and the leader touched the session no earlier than s1. A sync's own
 *    send time proves nothing alone: the link may be cut before the
 *    follower's next ping answer. Hence, on the answer of a sync sent at
 *    s, last_heard = the send time of the newest answered heartbeat of
 *    this connection whose answer came at or before s - T/4 (heartbeats
 *    of an earlier connection went to another server: the proof needs the
 *    same follower, so a reconnection starts a new history and keeps
 *    last_heard). With steady heartbeats last_heard trails the newest
 *    sync's send time by T/4 + H plus a round trip.
 *
 *  - A leader change. An isolated leader answers syncs until it notices
 *    it lost its quorum (syncLimit ticks after its followers' last ack);
 *    the followers leave it syncLimit ticks after its last packet and
 *    elect a new leader, which restarts every session's timeout at its
 *    election. The two moments differ by about 1.5 tickTime, which the
 *    T/4 and the tenth cover when T >= 4 x tickTime (test_ensemble.c,
 *    test_leader_isolated); with T between 2 and 4 ticks this one case is
 *    not proven.
 *
 *  - A new session's last_heard is the time its connection was answered:
 *    the leader created (touched) it after the connect request was sent,
 *    an overestimate by at most that one round trip, covered by the tenth
 *    below. A reconnection of the same session keeps last_heard (the
 *    answer time of a reconnection proves nothing about the leader) and
 *    heartbeats at once.
 *
 *  - LOST at last_heard + T - T/10: the tenth absorbs clock-rate
 *    differences between machines and the time our timer thread takes to
 *    act. With steady heartbeats that is about 0.57 T after the newest
 *    sync was sent. On a standalone server the same rule holds (it is its
 *    own leader, and touches on receipt): zkr cannot tell the two apart,
 *    so it uses the ensemble-safe rule everywhere.
 *
 * Cost: a heartbeat queued behind the session's own writes is answered
 * only after they commit, so a slow commit delays it; a false LOST needs
 * about 0.57 T without a sync answer. The client gives up on a silent
 * connection 2T/3 after its last receipt. */
#define _GNU_SOURCE /* pipe2 */
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

#include "session.h"

/* The session whose event thread this thread is, or NULL. */
static _Thread_local zkr_session_t *tl_event_session;
/* This thread is a ZooKeeper client's completion thread: it has run one of
 * zkr's completions or watchers, as the client runs them. An application
 * that sends its own requests on zkr's handle (zkr_session_handle(),
 * zkr_session_with_handle()) gets their completions on that thread, which
 * zkr's own answers also need: a blocking zkr call there could never be
 * answered, and a zkr_session_free() there would close the handle under
 * the thread that is running (zookeeper_close() can only detach it, and
 * answers still arrive after). Those calls return ZKR_EDEADLK there. */
static _Thread_local int tl_zk_thread;
/* zkr is completing requests itself (close_handle): not the client. */
static _Thread_local int tl_synthetic;

/* Live sessions, so that a watcher left on an application's handle after
 * zkr_session_free() can tell its context is gone. Lock order: live_mu,
 * then a session's mu. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static zkr_session_t *live_head;

static void live_add(zkr_session_t *s)
{
    pthread_mutex_lock(&live_mu);
    s->live_next = live_head;
    live_head = s;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(zkr_session_t *s)
{
    zkr_session_t **pp;

    pthread_mutex_lock(&live_mu);
    for (pp = &live_head; *pp != NULL; pp = &(*pp)->live_next) {
        if (*pp == s) {
            *pp = s->live_next;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

zkr_session_t *zkr__session_lock_live(void *ctx)
{
    zkr_session_t *s;

    pthread_mutex_lock(&live_mu);
    for (s = live_head; s != NULL && s != ctx; s = s->live_next)
        ;
    if (s != NULL)
        pthread_mutex_lock(&s->mu);
    pthread_mutex_unlock(&live_mu);
    return s;
}

/* ----------------------------------------------------------------- fork
 *
 * After fork() the child has one thread: zkr's timer and event threads and
 * the ZooKeeper client's threads are gone, a mutex they held stays held,
 * and the handle's connection belongs to the parent. So around fork() we
 * hold every session's mutex (the state is consistent), and in the child
 * each session becomes closed and disconnected for good: its handle is
 * forgotten (never used nor closed: that would talk to the parent's
 * server connection), requests in flight are forgotten (their answers go
 * to the parent), the callbacks queued are dropped unrun (they are the
 * parent's) and none is queued any more, the descriptors shared with the
 * parent (event-loop and loss pipes) are never read nor written, the
 * counts of calls active on the parent's threads are forgotten (an
 * election's: election.c, forget_parent_calls), the forking thread is no
 * longer a callback's (a fork from inside a callback), and the condition
 * variables, which may count waiters that no longer exist, are made new.
 * The child can then free every handle without the network and without
 * waiting. Lock order as always: live_mu, then each session's mu. */

static void ev_drop_all(zkr_session_t *s);

static void fork_prepare(void)
{
    pthread_mutex_lock(&live_mu);
    for (zkr_session_t *s = live_head; s != NULL; s = s->live_next) {
        pthread_mutex_lock(&s->mu);
        pthread_mutex_lock(&s->log_mu);
    }
}

static void fork_parent(void)
{
    for (zkr_session_t *s = live_head; s != NULL; s = s->live_next) {
        pthread_mutex_unlock(&s->log_mu);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&live_mu);
}

void zkr__cond_renew(pthread_cond_t *cv, int monotonic)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    if (monotonic)
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    memset(cv, 0, sizeof(*cv));
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void fork_child(void)
{
    /* The child's one thread is the forking one, which may be an event
     * thread or a client's completion thread in a callback: neither
     * exists in the child, so its calls are a forked child's (ZKR_ECLOSED),
     * never refused as a callback's (ZKR_EDEADLK). */
    tl_event_session = NULL;
    tl_zk_thread = 0;
    for (zkr_session_t *s = live_head; s != NULL; s = s->live_next) {
        s->forked = 1;
        s->forks++;
        s->closing = 1;
        s->zh_forked = s->zh;
        s->zh = NULL; /* the parent's: neither used nor closed here */
        s->connected = 0;
        s->ops = 0;
        s->sent = NULL; /* the parent's requests, kept by its handle */
        s->zh_users = 0;
        s->swapping = 0;
        s->ping_busy = 0;
        s->ev_busy_session = 0;
        s->replace = 0;
        s->replace_at = -1;
        s->reconnect_at = -1;
        zkr__cond_renew(&s->cv, 1);
        zkr__cond_renew(&s->tcv, 1);
        zkr__cond_renew(&s->ecv, 1);
        for (zkr__member_t *m = s->members; m != NULL; m = m->next) {
            m->busy = 0;
            m->events = 0;
        }
        s->hooks->forked(s);
        /* The parent's callbacks: they run there, never here. The wake-up
         * pipe is the parent's too: the child neither reads nor writes it
         * (it posts nothing, and has nothing signalled to drain). */
        ev_drop_all(s);
        s->ev_signalled = 0;
        pthread_mutex_unlock(&s->log_mu);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&live_mu);
}

/* A forked child's handles stay reachable from here until it exits: they
 * are the parent's, so never closed, but not leaked either (a leak checker
 * in the child would count them lost). */
static zhandle_t **forked_handles;
static size_t forked_n;

static void keep_forked_handle(zhandle_t *zh)
{
    zhandle_t **v = realloc(forked_handles, (forked_n + 1) * sizeof(*v));

    if (v != NULL) {
        forked_handles = v;
        forked_handles[forked_n++] = zh;
    }
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int zkr__in_callback(void)
{
    return tl_event_session != NULL || tl_zk_thread;
}

int zkr__is_dispatcher(zkr_session_t *s)
{
    int r;

    pthread_mutex_lock(&s->mu);
    r = s->dispatched && pthread_equal(s->dispatcher, pthread_self());
    pthread_mutex_unlock(&s->mu);
    return r;
}

int zkr__callbacks_later(const zkr_session_t *s)
{
    return tl_event_session == s || (s->dispatch && !s->dispatching);
}

/* The heartbeat interval H (see the top of the file). */
static int64_t heartbeat_ms(const zkr_session_t *s)
{
    return s->timeout > 0 ? s->timeout / 12 : 1000;
}

static int64_t margin_ms(const zkr_session_t *s)
{
    return s->timeout / 10;
}

static int64_t deadline_of(const zkr_session_t *s)
{
    return s->last_heard + s->timeout - margin_ms(s);
}

static int is_live(zkr_state_t st)
{
    return st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED ||
           st == ZKR_STATE_SUSPENDED;
}

int zkr__is_connection_error(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/* The session's own metrics (metrics.c formats them). */
static void metrics_state(zkr_session_t *s, zkr_state_t st, int64_t margin_ms)
{
    zkr__smetrics_t *sm = &s->metrics;

    if (st == s->state)
        return;
    if (st == ZKR_STATE_SUSPENDED) {
        sm->suspensions++;
    } else if (st == ZKR_STATE_RECONNECTED) {
        sm->reconnects++;
        sm->reconnect_margin_ms = margin_ms > 0 ? margin_ms : 0;
    } else if (st == ZKR_STATE_LOST) {
        sm->losses++;
    }
}

void zkr__metrics_init(zkr_session_t *s)
{
    s->metrics.reconnect_margin_ms = -1;
    s->metrics.hb_last_ms = -1;
}

void zkr__metrics_heartbeat(zkr_session_t *s, int64_t rtt_ms)
{
    if (rtt_ms < 0)
        rtt_ms = 0;
    s->metrics.hb_last_ms = rtt_ms;
    zkr__hist_add(&s->metrics.hb, zkr__time_bounds, ZKR__N_TIME,
                  (uint64_t)rtt_ms * 1000);
}

/* ------------------------------------------------------------- events */

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
    return 0;
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
static void ev_drop_all(zkr_session_t *s)
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

static void *event_main(void *arg)
{
    zkr_session_t *s = arg;

    tl_event_session = s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        zkr__event_t *ev = ev_take(s, UINT64_MAX);
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
static int dispatch_locked(zkr_session_t *s, uint64_t limit)
{
    zkr_session_t *outer = tl_event_session;
    zkr__event_t *ev;
    int n = 0;

    s->dispatching = 1;
    tl_event_session = s;
    while ((ev = ev_take(s, limit)) != NULL)
        n += run_event(s, ev);
    tl_event_session = outer;
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

static void set_state(zkr_session_t *s, zkr_state_t st)
{
    if (s->state == st)
        return;
    metrics_state(s, st, deadline_of(s) - zkr__now_ms());
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
static void close_handle(zkr_session_t *s, zhandle_t *zh)
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
    tl_synthetic = 1;
    while ((op = left) != NULL) {
        left = op->sent_next;
        op->sent_next = NULL;
        op_fail(op, ZCLOSING);
    }
    tl_synthetic = 0;
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

    if (!tl_synthetic)
        tl_zk_thread = 1;
    pthread_mutex_lock(&s->mu);
    sent_unlink(s, op);
    s->ops--;
    if (op->m != NULL)
        op->m->busy--;
    /* No answer but a heartbeat's moves the deadline: a follower answers
     * reads by itself, even when cut off from the leader (see the top). */
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
static void wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
                       int64_t deadline)
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
            wait_until(&s->cv, &s->mu, deadline);
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

/* ----------------------------------------------------------- cleanup */

static void cleanup_free(zkr__cleanup_t *cl)
{
    free(cl->path);
    free(cl->dir);
    free(cl->record);
    free(cl->record_dir);
    free(cl);
}

/* Puts a new entry (not busy) first in the list, and pumps. */
static void cleanup_link(zkr_session_t *s, zkr__cleanup_t *cl, int64_t sid,
                         zkr__member_t *owner)
{
    cl->sid = sid;
    cl->owner = owner;
    if (owner != NULL)
        owner->cleanups_owned++;
    cl->prev = NULL;
    cl->next = s->cleanups;
    if (s->cleanups != NULL)
        s->cleanups->prev = cl;
    s->cleanups = cl;
    s->cleanups_idle++;
    zkr__cleanup_pump(s);
}

/* An entry's operation is in flight (busy) or answered; s->cleanups_idle
 * counts the entries that are not busy, so that a pump that finds none
 * stops instead of walking those that are. */
static void cleanup_busy(zkr_session_t *s, zkr__cleanup_t *cl, int busy)
{
    s->cleanups_idle += cl->busy - busy;
    cl->busy = busy;
}

static void cleanup_disown_one(zkr__cleanup_t *cl)
{
    if (cl->owner != NULL)
        cl->owner->cleanups_owned--;
    cl->owner = NULL;
}

/* Makes an entry (record and record_dir may be NULL) and pumps it. */
static int cleanup_make(zkr_session_t *s, const char *path, const char *dir,
                        const char *uuid, const char *record,
                        const char *record_dir, int64_t sid,
                        zkr__member_t *owner)
{
    zkr__cleanup_t *cl = calloc(1, sizeof(*cl));

    if (cl == NULL)
        return ZKR_ENOMEM;
    cl->path = zkr__strdup(path);
    cl->dir = zkr__strdup(dir);
    cl->record = zkr__strdup(record);
    cl->record_dir = zkr__strdup(record_dir);
    if (uuid != NULL)
        memcpy(cl->uuid, uuid, sizeof(cl->uuid));
    if ((path != NULL && cl->path == NULL) ||
        (dir != NULL && cl->dir == NULL) ||
        (record != NULL && cl->record == NULL) ||
        (record_dir != NULL && cl->record_dir == NULL)) {
        cleanup_free(cl);
        return ZKR_ENOMEM;
    }
    cleanup_link(s, cl, sid, owner);
    return 0;
}

int zkr__cleanup_add(zkr_session_t *s, const char *path, const char *dir,
                     const char *uuid, int64_t sid, zkr__member_t *owner)
{
    return cleanup_make(s, path, dir, uuid, NULL, NULL, sid, owner);
}

int zkr__cleanup_add_record(zkr_session_t *s, const char *path, const char *dir,
                            const char *record, int64_t sid,
                            zkr__member_t *owner)
{
    return cleanup_make(s, path, NULL, NULL, record, dir, sid, owner);
}

int zkr__cleanup_add_watch(zkr_session_t *s, const char *path, int wtype,
                           watcher_fn watcher)
{
    int rc = zkr__cleanup_add(s, NULL, NULL, NULL, s->sid, NULL);

    if (rc == 0) {
        zkr__cleanup_t *cl = s->cleanups;
        /* cleanup_add put it first and may have pumped it: it has no path
         * yet, so the pump skipped it as a search without dir. */
        cl->watch = 1;
        cl->wtype = wtype;
        cl->watcher = watcher;
        cl->path = zkr__strdup(path);
        if (cl->path == NULL)
            cl->dead = 1;
        zkr__cleanup_pump(s);
    }
    return rc;
}

zkr__cleanup_t *zkr__cleanup_reserve(size_t pathlen)
{
    zkr__cleanup_t *cl = calloc(1, sizeof(*cl));

    if (cl != NULL && (cl->path = malloc(pathlen + 1)) == NULL) {
        free(cl);
        cl = NULL;
    }
    return cl;
}

void zkr__cleanup_commit(zkr_session_t *s, zkr__cleanup_t *cl, const char *path,
                         int64_t sid, zkr__member_t *owner)
{
    strcpy(cl->path, path); /* fits: reserved for the longest name */
    cleanup_link(s, cl, sid, owner);
}

void zkr__cleanup_unreserve(zkr__cleanup_t *cl)
{
    if (cl != NULL) {
        free(cl->path);
        free(cl);
    }
}

void zkr__cleanup_disown(zkr_session_t *s, zkr__member_t *m)
{
    for (zkr__cleanup_t *cl = s->cleanups; cl != NULL && m->cleanups_owned > 0;
         cl = cl->next)
        if (cl->owner == m)
            cleanup_disown_one(cl);
}

/* Ends an entry: tells its owner, unlinks and frees it (unless an op still
 * refers to it: then the op's completion frees it). */
static void cleanup_finish(zkr_session_t *s, zkr__cleanup_t *cl, int rc)
{
    zkr__member_t *owner = cl->owner;

    if (rc != 0 && !cl->dead)
        zkr__log(s, ZKR_LOG_WARN,
                 "giving up deleting %s: %s (the server deletes it when "
                 "session 0x%llx ends)",
                 cl->path != NULL ? cl->path : cl->dir, zkr_strerror(rc),
                 (unsigned long long)cl->sid);
    cleanup_disown_one(cl);
    cl->dead = 1;
    if (owner != NULL)
        s->hooks->cleanup_done(owner, rc);
    if (cl->busy)
        return;
    if (cl->prev != NULL)
        cl->prev->next = cl->next;
    else
        s->cleanups = cl->next;
    if (cl->next != NULL)
        cl->next->prev = cl->prev;
    s->cleanups_idle--;
    cleanup_free(cl);
}

static void cleanup_deleted(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;

    cleanup_busy(s, cl, 0);
    if (rc == ZOK)
        s->counters[ZKR_COUNTER_DELETES]++;
    if (cl->dead)
        cleanup_finish(s, cl, 0);
    else if (zkr__is_connection_error(rc))
        ; /* retried by the next pump, after reconnecting */
    else if (rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED ||
             rc == ZCLOSING || rc == ZINVALIDSTATE)
        cleanup_finish(s, cl, 0); /* gone, or gone with its session */
    else
        cleanup_finish(s, cl, rc); /* ZNOAUTH...: cannot be deleted */
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

/* A release's multi: delete(node) + setData(directory, record). */
typedef struct release_multi {
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
} release_multi_t;

/* The release multi is answered. Applied: the node is gone and the record
 * says it was released. The delete refused with ZNONODE: the node was gone
 * already (expired, forced, or our own earlier multi applied before a
 * connection loss hid its answer): nothing was written now, rightly, and
 * the entry is done. The record refused (ZNOAUTH on the directory, or any
 * other error of the setData alone): the release still must happen, so
 * the entry falls back to a plain delete, and successors will see a death
 * (documented). Anything else is what a plain delete's answer would mean
 * (cleanup_deleted). */
static void cleanup_multi_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    release_multi_t *m = op->ctx;
    zkr__cleanup_t *cl = op->cl;

    op->ctx = NULL;
    if (rc != ZOK && !zkr__is_connection_error(rc) && rc != ZCLOSING &&
        m->results[0].err == ZOK && m->results[1].err != ZOK && !cl->dead) {
        zkr_session_t *s = zkr__op_begin(op, rc);

        zkr__log(s, ZKR_LOG_WARN,
                 "cannot write the release record of %s into %s (%s): "
                 "deleting it without one; a waiter with a lock-delay "
                 "will take this release for a death",
                 cl->path, cl->record_dir, zkr_strerror(m->results[1].err));
        s->metrics.records_refused++;
        free(cl->record);
        cl->record = NULL;
        cleanup_busy(s, cl, 0);
        free(m);
        zkr__cleanup_pump(s);
        zkr__op_end(op);
        return;
    }
    free(m);
    cleanup_deleted(rc, data);
}

static int send_release_multi(zkr_session_t *s, zkr__op_t *op)
{
    zkr__cleanup_t *cl = op->cl;
    release_multi_t *m = calloc(1, sizeof(*m));
    int rc;

    if (m == NULL)
        return ZKR_ENOMEM;
    zoo_delete_op_init(&m->ops[0], cl->path, -1);
    zoo_set_op_init(&m->ops[1], cl->record_dir, cl->record,
                    (int)strlen(cl->record), -1, NULL);
    op->ctx = m;
    rc = zoo_amulti(s->zh, 2, m->ops, m->results, cleanup_multi_done, op);
    if (rc != ZOK) {
        op->ctx = NULL;
        free(m);
    }
    return rc;
}

static void watch_removed(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;

    cleanup_busy(s, cl, 0);
    /* ZNOWATCHER: it had fired already; anything but a connection error
     * ends the entry. */
    if (cl->dead || !zkr__is_connection_error(rc))
        cleanup_finish(s, cl, 0);
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

/* Removing all watches of a type on the path sends removeWatches, which
 * also drops the watch on the server; but it removes every watcher the
 * handle has there, so only when the application cannot have set one:
 * on a handle zkr opened and never handed out. Otherwise only zkr's own
 * (watcher, context) pair is removed: that sends checkWatches, and the
 * server keeps its one watch for the connection until the node changes
 * (then the client, with no watcher left, drops the event).
 *
 * zookeeper.h declares the completion as `void_completion_t *`, but the
 * client stores and calls that pointer as the function itself, so we pass
 * the function, converted. We always send local=0: with local=1 this
 * client version crashes. */
static int send_remove_watch(zkr_session_t *s, zkr__op_t *op)
{
    void_completion_t fn = watch_removed;
    void_completion_t *as_declared;

    memcpy(&as_declared, &fn, sizeof(fn));
    if (!s->owned || s->zh_shared)
        return zoo_aremove_watches(s->zh, op->cl->path,
                                   (ZooWatcherType)op->cl->wtype,
                                   op->cl->watcher, s, 0, as_declared, op);
    return zoo_aremove_all_watches(
        s->zh, op->cl->path, (ZooWatcherType)op->cl->wtype, 0, as_declared, op);
}

static void cleanup_listed(int rc, const struct String_vector *v,
                           const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;

    cleanup_busy(s, cl, 0);
    if (cl->dead) {
        cleanup_finish(s, cl, 0);
    } else if (rc == ZOK) {
        const char *hit = NULL;
        for (int i = 0; v != NULL && i < v->count; i++)
            if (strstr(v->data[i], cl->uuid) != NULL)
                hit = v->data[i];
        if (hit == NULL) {
            cleanup_finish(s, cl, 0);
        } else {
            cl->path = zkr__join(cl->dir, hit);
            if (cl->path == NULL)
                cleanup_finish(s, cl, ZKR_ENOMEM);
        }
    } else if (!zkr__is_connection_error(rc)) {
        cleanup_finish(s, cl, rc == ZNONODE ? 0 : rc);
    }
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

/* The sync before a search by UUID is answered: the server we are
 * connected to has applied everything committed before, so "no child with
 * our UUID" in the listing that follows means the create was never
 * applied, not that this server lags (issue 12.8; engine/create.c,
 * recover_synced, says why a create sent earlier cannot commit after the sync).
 * A delete's NONODE needs no sync: the leader decides it, on its latest state.
 */
static void cleanup_synced(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__cleanup_t *cl = op->cl;
    zkr__op_t *op2;

    (void)value;
    if (rc == ZOK && !cl->dead && (op2 = zkr__op_new(s, NULL)) != NULL) {
        op2->cl = cl;
        if (zoo_aget_children(s->zh, cl->dir, 0, cleanup_listed, op2) == ZOK) {
            zkr__op_end(op);
            return;
        }
        zkr__op_cancel(op2);
    }
    cleanup_busy(s, cl, 0);
    if (cl->dead)
        cleanup_finish(s, cl, 0);
    else if (rc != ZOK && !zkr__is_connection_error(rc))
        cleanup_finish(s, cl,
                       rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
                               rc == ZINVALIDSTATE || rc == ZNONODE
                           ? 0
                           : rc);
    zkr__cleanup_pump(s);
    zkr__op_end(op);
}

void zkr__cleanup_pump(zkr_session_t *s)
{
    zkr__cleanup_t *cl, *next;

    if (s->cleanup_at >= 0 && zkr__now_ms() < s->cleanup_at)
        return; /* the timer thread pumps then (declare_lost) */
    s->cleanup_at = -1;
    /* Busy entries are skipped: once none is left idle, nothing is. */
    for (cl = s->cleanups; cl != NULL && s->cleanups_idle > 0; cl = next) {
        zkr__op_t *op;
        int rc;
        next = cl->next;
        if (cl->busy)
            continue;
        if (cl->dead || (s->sid != 0 && cl->sid != s->sid) ||
            (cl->watch && cl->path != NULL &&
             s->hooks->watched(s, cl->path, cl->wtype))) {
            /* Nodes (and watches) of an older session died with it; a
             * watch someone here needs again is kept. */
            cleanup_finish(s, cl, 0);
            continue;
        }
        if (!s->connected || s->zh == NULL ||
            (cl->path == NULL && cl->dir == NULL))
            continue;
        op = zkr__op_new(s, NULL);
        if (op == NULL)
            return;
        op->cl = cl;
        if (cl->watch)
            rc = send_remove_watch(s, op);
        else if (cl->path != NULL && cl->record != NULL)
            rc = send_release_multi(s, op);
        else if (cl->path != NULL)
            rc = zoo_adelete(s->zh, cl->path, -1, cleanup_deleted, op);
        else
            rc = zoo_async(s->zh, cl->dir, cleanup_synced, op);
        if (rc != ZOK) {
            zkr__op_cancel(op);
            /* No such watcher here (it fired, or the application removed
             * it): nothing left to remove. Retrying would keep the entry
             * forever, and zkr_session_free() waiting for it. */
            if (cl->watch && rc == ZNOWATCHER)
                cleanup_finish(s, cl, 0);
            continue;
        }
        cleanup_busy(s, cl, 1);
    }
}

/* ------------------------------------------------- connection state */

/* `ended`: the server said the session is gone (EXPIRED, or a refused
 * digest). Otherwise it may still live on the server until last heard +
 * T, whatever our connection looks like (the client may have reconnected
 * it already, its CONNECTED event not yet run by us), so nothing of ours
 * may end it before then: ending it grants the next contender one round
 * trip after our LOST, while the application (or the zkr command's guard)
 * is only just told to stop. The tenth of T between our LOST and that
 * time is the application's. */
static void declare_lost(zkr_session_t *s, int ended, const char *why)
{
    int64_t at = s->last_heard + s->timeout;
    int wait = !ended && s->timeout > 0 && zkr__now_ms() < at;

    if (s->state == ZKR_STATE_LOST || s->state == ZKR_STATE_CLOSED)
        return;
    zkr__log(s, ZKR_LOG_WARN, "session 0x%llx LOST: %s",
             (unsigned long long)s->sid, why);
    set_state(s, ZKR_STATE_LOST);
    if (!s->owned) {
        /* The same holds for deleting its nodes through its handle. */
        s->cleanup_at = wait ? at : -1;
    }
    s->hooks->lost(s); /* an adopted session's nodes go to the cleanups */
    if (s->owned) {
        /* Close the handle even if it might still reconnect: from now on
         * nothing of this session may be trusted. Its nodes go with it.
         * Closing a connected handle ends the session at once; one closed
         * while disconnected sends nothing, so waiting costs it nothing. */
        for (zkr__cleanup_t *cl = s->cleanups; cl != NULL; cl = cl->next)
            cl->dead = 1;
        if (wait)
            s->replace_at = at;
        else
            s->replace = 1;
    }
    zkr__timer_kick(s);
    zkr__cleanup_pump(s);
}

void zkr__enforce_deadline(zkr_session_t *s)
{
    if (is_live(s->state) && s->timeout > 0 && !s->closing &&
        zkr__now_ms() >= deadline_of(s))
        declare_lost(s, 0, "no heartbeat answered within the safe deadline");
}

void zkr__lock_fresh(zkr_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    zkr__enforce_deadline(s);
}

static void on_session_event(zkr_session_t *s, zhandle_t *zh, int state)
{

    if (zh != s->zh || s->closing)
        return;
    if (state == ZOO_CONNECTED_STATE) {
        const clientid_t *cid = zoo_client_id(zh);
        int64_t sid = cid != NULL ? cid->client_id : 0;
        int64_t now = zkr__now_ms();
        if (s->connected && sid == s->sid)
            goto out; /* told twice (an adopted handle's application
                         forwards what zkr_session_adopt() saw already) */
        s->connected = 1;
        zkr__trace_note("connected", NULL);
        zkr__log_reachable(s);
        s->timeout = zoo_recv_timeout(zh);
        /* A new connection: heartbeat at once, and the proofs of the old
         * one's follower do not carry over (see the top of the file). */
        s->next_ping = now;
        s->hb_n = 0;
        s->connect_deadline = -1;
        if (sid != s->sid || s->state == ZKR_STATE_CONNECTING ||
            s->state == ZKR_STATE_LOST)
            s->last_heard = now; /* a new start: nothing held yet */
        if (sid != s->sid || s->state == ZKR_STATE_LOST ||
            s->state == ZKR_STATE_CONNECTING) {
            /* A session we declared LOST ourselves is never resumed: an
             * owned handle is being replaced. An application's handle
             * that comes back with it starts afresh (CONNECTED): every
             * grant of before stays lost, and the nodes left from then
             * are deleted by the cleanup pump below. */
            if (s->state == ZKR_STATE_LOST && sid == s->sid && s->owned) {
                s->connected = 0;
                return;
            }
            s->sid = sid;
            s->counters[ZKR_COUNTER_SESSIONS]++;
            s->reconnect_attempt = 0;
            zkr__log(s, ZKR_LOG_INFO,
                     "connected: session 0x%llx, timeout %d ms",
                     (unsigned long long)sid, s->timeout);
            set_state(s, ZKR_STATE_CONNECTED);
            s->hooks->connected(s, 1);
        } else {
            set_state(s, ZKR_STATE_RECONNECTED);
            s->hooks->connected(s, 0);
        }
        zkr__cleanup_pump(s);
    } else if (state == ZOO_EXPIRED_SESSION_STATE ||
               state == ZOO_AUTH_FAILED_STATE) {
        s->connected = 0;
        if (state == ZOO_AUTH_FAILED_STATE)
            s->auth_failed = 1;
        else /* the session's nodes and watches went with it */
            for (zkr__cleanup_t *cl = s->cleanups; cl != NULL; cl = cl->next)
                cl->dead = 1;
        if (s->state == ZKR_STATE_CONNECTING && s->owned)
            s->replace = 1; /* never connected: try a fresh handle */
        declare_lost(s, 1,
                     state == ZOO_AUTH_FAILED_STATE
                         ? "the server refused the credentials"
                         : "the server expired the session");
    } else {
        /* CONNECTING, ASSOCIATING, NOTCONNECTED, READONLY: zkr never uses
         * read-only mode, so a read-only connection counts as none. */
        if (s->connected) {
            s->connected = 0;
            if (s->state == ZKR_STATE_CONNECTED ||
                s->state == ZKR_STATE_RECONNECTED) {
                zkr__log(s, ZKR_LOG_INFO,
                         "connection lost: session 0x%llx SUSPENDED",
                         (unsigned long long)s->sid);
                set_state(s, ZKR_STATE_SUSPENDED);
                s->hooks->suspended(s);
            }
        }
    }
out:
    pthread_cond_broadcast(&s->cv);
    zkr__timer_kick(s);
}

static void global_watcher(zhandle_t *zh, int type, int state, const char *path,
                           void *ctx)
{
    zkr_session_t *s = ctx;

    (void)path;
    tl_zk_thread = 1;
    if (type != ZOO_SESSION_EVENT || s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    on_session_event(s, zh, state);
    pthread_mutex_unlock(&s->mu);
}

void zkr_session_process_event(zkr_session_t *s, int type, int state)
{
    if (s == NULL || type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->zh != NULL)
        on_session_event(s, s->zh, state);
    pthread_mutex_unlock(&s->mu);
}

/* -------------------------------------------------------------- timer */

/* A heartbeat sent at `sent` was answered now: the newest earlier one
 * answered at least T/4 before `sent` proves that the leader touched the
 * session no earlier than its own send time (see the top of the file). */
static void heartbeat_answered(zkr_session_t *s, int64_t sent, int64_t now)
{
    for (int i = 0; i < s->hb_n; i++)
        if (s->hb[i].answered <= sent - s->timeout / 4)
            zkr__heard(s, s->hb[i].sent);
    /* Keep the newest 8 (sends are at least H = T/12 apart, so the entry
     * we need, answered about T/4 before, is among them). */
    if (s->hb_n == 8)
        memmove(&s->hb[0], &s->hb[1], 7 * sizeof(s->hb[0]));
    else
        s->hb_n++;
    s->hb[s->hb_n - 1].sent = sent;
    s->hb[s->hb_n - 1].answered = now;
    zkr__metrics_heartbeat(s, now - sent);
}

/* The heartbeat's answer. Only ZOK proves that the leader answered the
 * sync; any error (connection loss, closing, the session gone) proves
 * nothing. */
static void ping_done(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);

    (void)value;
    s->ping_busy = 0;
    if (rc == ZOK && op->sid == s->sid)
        heartbeat_answered(s, op->sent, zkr__now_ms());
    zkr__timer_kick(s); /* the next heartbeat may be due already */
    zkr__op_end(op);
}

static void send_ping(zkr_session_t *s, int64_t now)
{
    zkr__op_t *op = zkr__op_new(s, NULL);

    s->next_ping = now + heartbeat_ms(s);
    if (op == NULL)
        return;
    if (zoo_async(s->zh, "/", ping_done, op) != ZOK)
        zkr__op_cancel(op);
    else
        s->ping_busy = 1;
}

static void auth_done(int rc, const void *data)
{
    (void)rc;
    (void)data; /* a refused digest arrives as ZOO_AUTH_FAILED_STATE */
}

/* How long the client may go without resolving the host list again while
 * it has a socket open (docs/PROTOCOL.md [S7]). Without a socket
 * (connecting, failing over, reconnecting) it resolves on every turn of
 * its I/O loop whatever this says, so it delays no reconnection. */
#define ZKR__RESOLVE_DELAY_MS 1000

static zhandle_t *open_handle(zkr_session_t *s)
{
    zhandle_t *zh = zookeeper_init2(s->hosts, global_watcher, s->req_timeout,
                                    NULL, s, 0, zkr__log_callback(s));

    if (zh == NULL)
        zkr__log_conn_error(s, ZKR_LOG_ERROR,
                            "cannot create a ZooKeeper handle for %s: %s",
                            s->hosts, strerror(errno));
    /* Cannot fail: the value is valid. */
    if (zh != NULL)
        zoo_set_servers_resolution_delay(zh, ZKR__RESOLVE_DELAY_MS);
    if (zh != NULL && s->digest != NULL)
        zoo_add_auth(zh, "digest", s->digest, (int)strlen(s->digest), auth_done,
                     NULL);
    return zh;
}

/* Exponential backoff with full jitter: uniform in [0, min(10 s,
 * 100 ms * 2^attempt)], at least 50 ms. */
static int64_t backoff_ms(int attempt)
{
    int64_t cap = 100;
    unsigned r;

    for (int i = 0; i < attempt && cap < 10000; i++)
        cap *= 2;
    if (cap > 10000)
        cap = 10000;
    if (getentropy(&r, sizeof(r)) != 0)
        r = (unsigned)zkr__now_ms();
    return 50 + (int64_t)(r % (unsigned)cap);
}

/* Closes the current handle (without the mutex: closing runs completions
 * that take it) and, unless told not to, schedules a new one. */
static void replace_handle(zkr_session_t *s)
{
    zhandle_t *old = s->zh;

    s->replace = 0;
    s->replace_at = -1;
    s->zh = NULL;
    s->connected = 0;
    while (s->zh_users > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    if (old != NULL) {
        s->swapping = 1;
        close_handle(s, old);
        s->swapping = 0;
        pthread_cond_broadcast(&s->cv);
    }
    s->reconnect_at = -1;
    if (s->no_reconnect || s->closing || s->stop)
        return;
    s->reconnect_at = zkr__now_ms() + backoff_ms(s->reconnect_attempt++);
}

static void maybe_open(zkr_session_t *s, int64_t now)
{
    zhandle_t *zh;

    if (s->no_reconnect || s->closing || !s->owned) {
        s->reconnect_at = -1; /* nothing to wait for: never spin on it */
        return;
    }
    if (s->zh != NULL || s->reconnect_at < 0 || now < s->reconnect_at)
        return;
    s->reconnect_at = -1;
    zkr__log(s, ZKR_LOG_INFO, "opening a new session with %s (attempt %d)",
             s->hosts, s->reconnect_attempt);
    s->swapping = 1;
    pthread_mutex_unlock(&s->mu);
    zh = open_handle(s);
    pthread_mutex_lock(&s->mu);
    s->swapping = 0;
    pthread_cond_broadcast(&s->cv);
    if (zh != NULL && (s->closing || s->stop)) {
        /* zkr_session_free() began meanwhile: this handle is not wanted. */
        pthread_mutex_unlock(&s->mu);
        zookeeper_close(zh);
        pthread_mutex_lock(&s->mu);
        return;
    }
    if (zh == NULL) {
        s->reconnect_at = now + backoff_ms(s->reconnect_attempt++);
        return;
    }
    s->zh = zh;
    /* A fresh handle that cannot connect within a session timeout is
     * replaced, so hosts are resolved again and attempts are spaced. */
    s->connect_deadline =
        zkr__now_ms() + (s->req_timeout > 0 ? s->req_timeout : 10000);
    /* The handle connected while we opened it without the mutex: its
     * CONNECTED event found s->zh unset and was ignored. Take it now (if
     * the event is still to come, on_session_event ignores the repeat). */
    if (zoo_state(zh) == ZOO_CONNECTED_STATE)
        on_session_event(s, zh, ZOO_CONNECTED_STATE);
}

static int64_t min_time(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

/* A heartbeat goes out when due: connected, none in flight, and the
 * session not given up. */
static int ping_wanted(const zkr_session_t *s)
{
    return s->connected && !s->ping_busy && !s->replace && is_live(s->state);
}

static void *timer_main(void *arg)
{
    zkr_session_t *s = arg;

    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        int64_t now = zkr__now_ms(), next = -1;

        if (s->replace_at >= 0 && now >= s->replace_at) {
            s->replace_at = -1;
            s->replace = 1;
        }
        if (s->replace && s->owned)
            replace_handle(s);
        else
            s->replace = 0; /* an application's handle is never replaced */
        maybe_open(s, now);
        now = zkr__now_ms();
        if (s->zh != NULL && !s->connected && s->connect_deadline >= 0 &&
            now >= s->connect_deadline) {
            /* A re-created handle that could not connect: try another. */
            s->connect_deadline = -1;
            zkr__log_conn_error(s, ZKR_LOG_WARN,
                                "no connection to %s within %d ms", s->hosts,
                                s->req_timeout > 0 ? s->req_timeout : 10000);
            if (s->owned && s->state == ZKR_STATE_LOST) {
                s->replace = 1;
                continue;
            }
        }
        /* Deadline first: a session past it gets no more heartbeats (in
         * a process resumed after a pause both fall due at once). */
        if (is_live(s->state) && s->timeout > 0 && now >= deadline_of(s))
            declare_lost(s, 0,
                         "no heartbeat answered within the safe deadline");
        if (ping_wanted(s) && now >= s->next_ping)
            send_ping(s, now);
        if (s->cleanup_at >= 0 && now >= s->cleanup_at)
            zkr__cleanup_pump(s); /* an adopted session's LOST + T/10 */
        if (s->retry_at >= 0 && now >= s->retry_at) {
            /* Requests that could not be sent: send them again. */
            s->retry_at = -1;
            zkr__cleanup_pump(s);
            s->hooks->retry(s);
        }
        s->hooks->deadline(s, now, &next);
        if (s->retry_at >= 0)
            next = min_time(next, s->retry_at);
        if (s->stop)
            break;
        if (s->replace)
            continue;
        /* Every time below is one whose action the loop above takes when
         * it comes (a time whose action is skipped would be in the past
         * for good: the loop would spin, holding the mutex). */
        if (ping_wanted(s))
            next = min_time(next, s->next_ping);
        next = min_time(next, s->cleanup_at);
        if (is_live(s->state) && s->timeout > 0)
            next = min_time(next, deadline_of(s));
        if (s->zh == NULL && s->reconnect_at >= 0)
            next = min_time(next, s->reconnect_at);
        if (s->replace_at >= 0)
            next = min_time(next, s->replace_at);
        if (s->connect_deadline >= 0 && s->zh != NULL && !s->connected)
            next = min_time(next, s->connect_deadline);
        s->timer_next = next;
        if (next < 0) {
            pthread_cond_wait(&s->tcv, &s->mu);
            s->timer_next = -1;
            continue;
        }
        if (next > zkr__now_ms())
            wait_until(&s->tcv, &s->mu, next);
        s->timer_next = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* --------------------------------------------------------- lifecycle */

static void session_destroy(zkr_session_t *s)
{
    zkr__listener_t *l;

    live_remove(s);
    zkr__log_detach(s);
    if (s->zh_forked != NULL)
        keep_forked_handle(s->zh_forked);
    while ((l = s->listeners) != NULL) {
        s->listeners = l->next;
        free(l);
    }
    while (s->cleanups != NULL) {
        zkr__cleanup_t *cl = s->cleanups;
        s->cleanups = cl->next;
        cleanup_free(cl);
    }
    ev_drop_all(s);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->log_mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->tcv);
    pthread_cond_destroy(&s->ecv);
    if (s->ev_fd[0] >= 0) {
        close(s->ev_fd[0]);
        close(s->ev_fd[1]);
    }
    if (s->engine != NULL)
        s->hooks->fini(s);
    free(s->engine);
    free(s->hosts);
    free(s->digest);
    free(s);
}

static int session_alloc(zkr_session_t **out, const zkr__session_hooks_t *hooks)
{
    zkr_session_t *s = calloc(1, sizeof(*s));
    pthread_condattr_t ca;

    if (s == NULL)
        return ZKR_ENOMEM;
    s->hooks = hooks;
    if ((s->engine = calloc(1, hooks->size)) == NULL) {
        free(s);
        return ZKR_ENOMEM;
    }
    pthread_once(&atfork_once, atfork_register);
    s->timer_next = -1;
    s->log_slot = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->log_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_cond_init(&s->tcv, &ca);
    pthread_cond_init(&s->ecv, &ca);
    pthread_condattr_destroy(&ca);
    s->state = ZKR_STATE_CONNECTING;
    s->reconnect_at = -1;
    s->replace_at = -1;
    s->cleanup_at = -1;
    s->connect_deadline = -1;
    s->retry_at = -1;
    s->ev_fd[0] = s->ev_fd[1] = -1;
    zkr__metrics_init(s);
    for (int i = 0; i < ZKR__EV_RESERVE; i++) {
        s->ev_reserve[i].next = s->ev_spare;
        s->ev_spare = &s->ev_reserve[i];
    }
    live_add(s);
    *out = s;
    return 0;
}

static int start_threads(zkr_session_t *s)
{
    if (!s->dispatch &&
        pthread_create(&s->event_thread, NULL, event_main, s) != 0)
        return ZKR_ESYS;
    if (pthread_create(&s->timer_thread, NULL, timer_main, s) != 0) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->ecv);
        pthread_mutex_unlock(&s->mu);
        if (!s->dispatch)
            pthread_join(s->event_thread, NULL);
        return ZKR_ESYS;
    }
    return 0;
}

static void stop_threads(zkr_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->ecv);
    pthread_cond_signal(&s->tcv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->timer_thread, NULL);
    if (!s->dispatch)
        pthread_join(s->event_thread, NULL);
}

/* Each entry of the comma-separated list is HOST:PORT (HOST nonempty, the
 * port 1..65535 in decimal digits). 0 or ZKR_EBADADDR. */
static int check_hosts(const char *hosts)
{
    const char *p = hosts;

    for (;;) {
        const char *end = strchr(p, ',');
        const char *colon = NULL;
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        long port = 0;
        size_t digits = 0;

        for (size_t i = 0; i < n; i++)
            if (p[i] == ':')
                colon = p + i;
        if (colon == NULL || colon == p)
            return ZKR_EBADADDR;
        for (const char *d = colon + 1; d < p + n; d++, digits++) {
            if (*d < '0' || *d > '9' || digits >= 5)
                return ZKR_EBADADDR;
            port = port * 10 + (*d - '0');
        }
        if (digits == 0 || port < 1 || port > 65535)
            return ZKR_EBADADDR;
        if (end == NULL)
            return 0;
        p = end + 1;
    }
}

/* The client could not start: ZKR_ERESOLVE (logged) if a host of the
 * list does not resolve, else ZSYSTEMERROR. */
static int why_no_handle(zkr_session_t *s, const char *hosts)
{
    char *buf = zkr__strdup(hosts), *entry, *save = NULL;
    int rc = ZSYSTEMERROR;

    if (buf == NULL)
        return ZKR_ENOMEM;
    for (entry = strtok_r(buf, ",", &save); entry != NULL && rc != ZKR_ERESOLVE;
         entry = strtok_r(NULL, ",", &save)) {
        struct addrinfo hints = {0}, *res = NULL;
        char *colon = strrchr(entry, ':'), *host = entry;
        int g;

        *colon = '\0';
        if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
            host++;
            colon[-1] = '\0';
        }
        hints.ai_socktype = SOCK_STREAM;
        g = getaddrinfo(host, colon + 1, &hints, &res);
        if (res != NULL)
            freeaddrinfo(res);
        if (g != 0) {
            zkr__log(s, ZKR_LOG_ERROR, "cannot resolve %s: %s", host,
                     g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
            rc = ZKR_ERESOLVE;
        }
    }
    free(buf);
    return rc;
}

/* No connection within the connect timeout: ZKR_EREFUSED (each address
 * logged) if every address of the list refuses a TCP connection now (an
 * answer, not a silence: nothing listens there), else ZKR_ETIMEDOUT. The
 * probes run at once; an address that neither accepts nor refuses within
 * PROBE_MS counts as not refused. */
#define PROBE_MS 1000
#define PROBE_MAX 64
static int why_not_connected(zkr_session_t *s, const char *hosts)
{
    char *buf = zkr__strdup(hosts), *entry, *save = NULL;
    struct pollfd fds[PROBE_MAX];
    char names[PROBE_MAX][80];
    int n = 0, refused = 0, other = 0;
    int64_t deadline = zkr__now_ms() + PROBE_MS;

    if (buf == NULL)
        return ZKR_ETIMEDOUT;
    for (entry = strtok_r(buf, ",", &save); entry != NULL && !other;
         entry = strtok_r(NULL, ",", &save)) {
        struct addrinfo hints = {0}, *res = NULL, *ai;
        char *colon = strrchr(entry, ':'), *host = entry;

        if (colon == NULL) {
            other = 1;
            break;
        }
        *colon = '\0';
        if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
            host++;
            colon[-1] = '\0';
        }
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
            other = 1;
            break;
        }
        for (ai = res; ai != NULL && !other; ai = ai->ai_next) {
            int fd;
            if (n == PROBE_MAX ||
                (fd = socket(ai->ai_family,
                             SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) <
                    0) {
                other = 1;
                break;
            }
            snprintf(names[n], sizeof(names[n]), "%s:%s", host, colon + 1);
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
                (errno != EINPROGRESS && errno != ECONNREFUSED)) {
                close(fd);
                other = 1;
            } else if (errno == ECONNREFUSED) {
                close(fd);
                refused++;
                zkr__log(s, ZKR_LOG_ERROR, "%s refused the connection",
                         names[n]);
            } else {
                fds[n].fd = fd;
                fds[n].events = POLLOUT;
                fds[n].revents = 0;
                n++;
            }
        }
        freeaddrinfo(res);
    }
    free(buf);
    /* The connects under way: each must fail with ECONNREFUSED. */
    for (int done = 0; !other && done < n;) {
        int64_t left = deadline - zkr__now_ms();
        int r = left > 0 ? poll(fds, (nfds_t)n, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            other = 1;
            break;
        }
        for (int i = 0; i < n; i++) {
            int err = 0;
            socklen_t len = sizeof(err);
            if (fds[i].fd < 0 || fds[i].revents == 0)
                continue;
            if (getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
                err != ECONNREFUSED) {
                other = 1;
            } else {
                refused++;
                zkr__log(s, ZKR_LOG_ERROR, "%s refused the connection",
                         names[i]);
            }
            close(fds[i].fd);
            fds[i].fd = -1;
            done++;
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    return !other && refused > 0 ? ZKR_EREFUSED : ZKR_ETIMEDOUT;
}

/* Just connected with a chroot: ZKR_ENOCHROOT (logged) if the server has
 * no such node, so that the first request does not fail with ZNONODE
 * instead. Any other answer (a connection lost meanwhile) is left to the
 * requests to come, as without a chroot. */
static int check_chroot(zkr_session_t *s, const char *chroot)
{
    zhandle_t *zh = NULL;
    struct Stat st;
    int zrc;

    if (zkr__zh_get(s, &zh) != 0)
        return 0;
    zrc = zoo_exists(zh, "/", 0, &st); /* "/" is the chroot */
    zkr__zh_put(s);
    if (zrc != ZNONODE)
        return 0;
    zkr__log(s, ZKR_LOG_ERROR, "the chroot %s does not exist on %s", chroot,
             s->hosts);
    return ZKR_ENOCHROOT;
}

static char *build_hosts(const char *hosts, const char *chroot)
{
    size_t a = strlen(hosts), b = chroot ? strlen(chroot) : 0;
    char *h = malloc(a + b + 1);

    if (h == NULL)
        return NULL;
    memcpy(h, hosts, a);
    if (chroot != NULL)
        memcpy(h + a, chroot, b);
    h[a + b] = '\0';
    return h;
}

int zkr__session_open(zkr_session_t **out, const char *hosts,
                      int session_timeout_ms, const zkr_session_options_t *opts,
                      const zkr__session_hooks_t *hooks)
{
    zkr_session_options_t o = {0};
    zkr_session_t *s;
    int rc;
    int64_t deadline;

    if (opts != NULL)
        o = *opts;
    if (out == NULL || hosts == NULL || hosts[0] == '\0' ||
        session_timeout_ms < 0 || o.connect_timeout_ms < -1 ||
        strchr(hosts, '/') != NULL)
        return ZBADARGUMENTS;
    if (o.chroot != NULL && zkr__check_path(o.chroot) != 0)
        return ZBADARGUMENTS;
    if (check_hosts(hosts) != 0)
        return ZKR_EBADADDR;
    if (o.digest != NULL &&
        (strchr(o.digest, ':') == NULL || o.digest[0] == ':'))
        return ZBADARGUMENTS;
    if (o.log_level < ZKR_LOG_NONE || o.log_level > ZKR_LOG_DEBUG)
        return ZBADARGUMENTS;
    for (size_t i = 0; i < sizeof(o.reserved_) / sizeof(o.reserved_[0]); i++)
        if (o.reserved_[i] != NULL)
            return ZBADARGUMENTS; /* an option this version does not know */
    if (session_timeout_ms == 0)
        session_timeout_ms = 10000;
    if ((rc = session_alloc(&s, hooks)) != 0)
        return rc;
    s->owned = 1;
    s->log_fn = o.log_fn;
    s->log_data = o.log_data;
    s->log_level = o.log_level;
    zkr__log_attach(s);
    s->req_timeout = session_timeout_ms;
    s->no_reconnect = o.no_reconnect;
    s->dispatch = o.no_event_thread != 0;
    if (s->dispatch && pipe2(s->ev_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        s->ev_fd[0] = s->ev_fd[1] = -1;
        session_destroy(s);
        return ZKR_ESYS;
    }
    s->hosts = build_hosts(hosts, o.chroot);
    s->digest = zkr__strdup(o.digest);
    if (s->hosts == NULL || (o.digest != NULL && s->digest == NULL)) {
        session_destroy(s);
        return ZKR_ENOMEM;
    }
    if ((rc = start_threads(s)) != 0) {
        session_destroy(s);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    s->zh = open_handle(s);
    if (s->zh == NULL) {
        pthread_mutex_unlock(&s->mu);
        rc = why_no_handle(s, hosts);
        stop_threads(s);
        session_destroy(s);
        return rc;
    }
    deadline =
        o.connect_timeout_ms < 0
            ? -1
            : zkr__now_ms() + (o.connect_timeout_ms > 0 ? o.connect_timeout_ms
                                                        : session_timeout_ms);
    while (s->state == ZKR_STATE_CONNECTING && !s->auth_failed &&
           zkr__wait(s, NULL, deadline) == 0)
        ;
    rc = s->state == ZKR_STATE_CONNECTED ? 0
         : s->auth_failed                ? ZAUTHFAILED
                                         : ZKR_ETIMEDOUT;
    pthread_mutex_unlock(&s->mu);
    if (rc == ZKR_ETIMEDOUT)
        rc = why_not_connected(s, hosts);
    if (rc == 0 && o.chroot != NULL)
        rc = check_chroot(s, o.chroot);
    if (rc != 0) {
        zkr_session_t *tmp = s;
        pthread_mutex_lock(&tmp->mu);
        tmp->closing = 1;
        tmp->no_reconnect = 1;
        pthread_mutex_unlock(&tmp->mu);
        zkr_session_free(tmp);
        return rc;
    }
    *out = s;
    return 0;
}

int zkr__session_adopt(zkr_session_t **out, zhandle_t *zh,
                       const zkr__session_hooks_t *hooks)
{
    zkr_session_t *s;
    int rc;

    if (out == NULL || zh == NULL)
        return ZBADARGUMENTS;
    if ((rc = session_alloc(&s, hooks)) != 0)
        return rc;
    s->zh = zh;
    s->no_reconnect = 1;
    s->req_timeout = zoo_recv_timeout(zh);
    if ((rc = start_threads(s)) != 0) {
        session_destroy(s);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    if (zoo_state(zh) == ZOO_CONNECTED_STATE)
        on_session_event(s, zh, ZOO_CONNECTED_STATE);
    pthread_mutex_unlock(&s->mu);
    *out = s;
    return 0;
}

/* Handles not freed yet: those freed with callbacks still due (finished
 * by the last of them) do not count. Mutex held. */
static int open_handles(const zkr_session_t *s)
{
    int n = s->nmembers;

    for (const zkr__member_t *m = s->members; m != NULL; m = m->next)
        n -= m->freeing;
    return n;
}

/* Runs every queued callback on this thread, after the dispatch another
 * thread may be in (one dispatcher at a time). Mutex held. */
static void dispatch_alone(zkr_session_t *s)
{
    while (s->dispatching)
        pthread_cond_wait(&s->cv, &s->mu);
    dispatch_locked(s, UINT64_MAX);
}

int zkr_session_free(zkr_session_t *s)
{
    int64_t until;

    if (s == NULL)
        return 0;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&s->mu);
    /* Open handles: nothing is done (no callback runs either). */
    if (open_handles(s) > 0) {
        pthread_mutex_unlock(&s->mu);
        return ZKR_EINUSE;
    }
    /* Without an event thread, callbacks still queued run here: among
     * them the completions that finish the free of a handle. */
    if (s->dispatch)
        dispatch_alone(s);
    if (s->nmembers > 0) { /* a callback made a new handle */
        pthread_mutex_unlock(&s->mu);
        return ZKR_EINUSE;
    }
    s->closing = 1;
    /* From now on a watcher left on an adopted handle ignores us; one that
     * is running finishes before we go on (it holds our mutex). */
    pthread_mutex_unlock(&s->mu);
    live_remove(s);
    pthread_mutex_lock(&s->mu);
    /* Finish our deletions first (bounded, and only while connected), so a
     * clean close leaves no node behind even if the close request itself
     * is lost; the server's expiry is the fallback. */
    until = zkr__now_ms() + (s->timeout > 0 ? s->timeout / 2 : 2000);
    zkr__cleanup_pump(s);
    while ((s->cleanups != NULL || s->ops > 0) && s->connected &&
           zkr__now_ms() < until) {
        zkr__wait(s, NULL, zkr__now_ms() + 50);
        zkr__cleanup_pump(s);
    }
    for (zkr__cleanup_t *cl = s->cleanups; cl != NULL && !s->forked;
         cl = cl->next) {
        if (!cl->dead) {
            zkr__log(s, ZKR_LOG_WARN,
                     "closing with deletions unfinished (%s): the server "
                     "deletes the nodes when the session ends",
                     s->connected ? "no answer in time" : "not connected");
            break;
        }
    }
    if (s->owned) {
        zhandle_t *zh;
        /* The timer thread may be closing or opening a handle right now,
         * without the mutex: let it finish, then close what is current. */
        while (s->swapping || s->zh_users > 0)
            pthread_cond_wait(&s->cv, &s->mu);
        zh = s->zh;
        s->zh = NULL;
        s->connected = 0;
        if (zh != NULL)
            close_handle(s, zh);
    }
    while (s->ops > 0)
        zkr__wait(s, NULL, zkr__now_ms() + 50);
    set_state(s, ZKR_STATE_CLOSED);
    if (s->dispatch)
        dispatch_alone(s);
    pthread_mutex_unlock(&s->mu);
    if (!s->forked) /* a forked child has none of the threads */
        stop_threads(s);
    session_destroy(s);
    return 0;
}

/* ------------------------------------------------------------ queries */

int zkr_session_fd(zkr_session_t *s)
{
    return s != NULL && s->dispatch ? s->ev_fd[0] : -1;
}

int zkr_session_dispatch(zkr_session_t *s)
{
    int n;

    if (s == NULL)
        return ZBADARGUMENTS;
    if (!s->dispatch)
        return ZKR_ESTATE;
    if (zkr__in_callback())
        return ZKR_EDEADLK;
    pthread_mutex_lock(&s->mu);
    s->dispatched = 1;
    s->dispatcher = pthread_self();
    /* One dispatcher at a time, so callbacks run one by one, in order;
     * the events posted while they run wait for the next call. */
    n = s->dispatching ? 0 : dispatch_locked(s, s->ev_seq);
    pthread_mutex_unlock(&s->mu);
    return n;
}

zkr_state_t zkr_session_state(zkr_session_t *s)
{
    zkr_state_t st;

    if (s == NULL)
        return ZKR_STATE_CLOSED;
    zkr__lock_fresh(s);
    st = s->state;
    pthread_mutex_unlock(&s->mu);
    return st;
}

int64_t zkr__session_valid_locked(zkr_session_t *s)
{
    int64_t v;

    zkr__enforce_deadline(s);
    if (!is_live(s->state) || s->timeout <= 0 || s->closing)
        return 0;
    v = deadline_of(s) - zkr__now_ms();
    return v > 0 ? v : 0;
}

int64_t zkr_session_valid_ms(zkr_session_t *s)
{
    int64_t v;

    if (s == NULL)
        return 0;
    pthread_mutex_lock(&s->mu);
    v = zkr__session_valid_locked(s);
    pthread_mutex_unlock(&s->mu);
    return v;
}

int64_t zkr_session_id(zkr_session_t *s)
{
    int64_t sid;

    if (s == NULL)
        return 0;
    zkr__lock_fresh(s);
    sid = is_live(s->state) ? s->sid : 0;
    pthread_mutex_unlock(&s->mu);
    return sid;
}

int zkr_session_timeout_ms(zkr_session_t *s)
{
    int t;

    if (s == NULL)
        return 0;
    pthread_mutex_lock(&s->mu);
    t = s->timeout;
    pthread_mutex_unlock(&s->mu);
    return t;
}

zhandle_t *zkr_session_handle(zkr_session_t *s)
{
    zhandle_t *zh;

    if (s == NULL)
        return NULL;
    pthread_mutex_lock(&s->mu);
    zh = s->zh;
    s->zh_shared = 1; /* the application may watch on it from now on */
    pthread_mutex_unlock(&s->mu);
    return zh;
}

int zkr_session_with_handle(zkr_session_t *s, zkr_handle_fn fn, void *arg)
{
    zhandle_t *zh = NULL;
    int rc;

    if (s == NULL || fn == NULL)
        return ZBADARGUMENTS;
    /* A user of zh: replace_handle() and zkr_session_free() wait for it. */
    if ((rc = zkr__zh_get(s, &zh)) != 0)
        return rc;
    pthread_mutex_lock(&s->mu);
    s->zh_shared = 1; /* the application may watch on it from now on */
    pthread_mutex_unlock(&s->mu);
    rc = fn(zh, arg);
    zkr__zh_put(s);
    return rc;
}

int zkr_session_wait_connected(zkr_session_t *s, int timeout_ms)
{
    int64_t deadline;
    int rc = 0;

    if (s == NULL || timeout_ms < -1)
        return ZBADARGUMENTS;
    if (timeout_ms != 0 && zkr__in_callback())
        return ZKR_EDEADLK;
    deadline = timeout_ms < 0 ? -1 : zkr__now_ms() + timeout_ms;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->closing) {
            rc = ZKR_ECLOSED;
            break;
        }
        if (s->connected && (s->state == ZKR_STATE_CONNECTED ||
                             s->state == ZKR_STATE_RECONNECTED))
            break;
        if (s->state == ZKR_STATE_LOST && (s->no_reconnect || !s->owned)) {
            rc = ZKR_ELOST;
            break;
        }
        if (zkr__wait(s, NULL, deadline) != 0) {
            rc = ZKR_ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int zkr_session_add_listener(zkr_session_t *s, zkr_session_listener_t fn,
                             void *data)
{
    zkr__listener_t *l, **pp;

    if (s == NULL || fn == NULL)
        return ZBADARGUMENTS;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return ZKR_ENOMEM;
    l->fn = fn;
    l->data = data;
    pthread_mutex_lock(&s->mu);
    for (pp = &s->listeners; *pp != NULL; pp = &(*pp)->next)
        ;
    *pp = l;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int zkr_session_remove_listener(zkr_session_t *s, zkr_session_listener_t fn,
                                void *data)
{
    zkr__listener_t **pp, *l = NULL;

    if (s == NULL || fn == NULL)
        return ZBADARGUMENTS;
    pthread_mutex_lock(&s->mu);
    for (pp = &s->listeners; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->fn == fn && (*pp)->data == data) {
            l = *pp;
            *pp = l->next;
            break;
        }
    }
    /* The event thread works from a snapshot: wait until it is done with
     * it, so the listener does not run after we return. */
    while (l != NULL && s->ev_busy_session && !zkr__in_callback())
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    free(l);
    return l != NULL ? 0 : ZBADARGUMENTS;
}

uint64_t zkr_session_counter(zkr_session_t *s, zkr_counter_t c)
{
    uint64_t v;

    if (s == NULL || (unsigned)c >= ZKR__COUNTERS)
        return 0;
    pthread_mutex_lock(&s->mu);
    v = s->counters[c];
    pthread_mutex_unlock(&s->mu);
    return v;
}

void zkr__session_attach(zkr_session_t *s, zkr__member_t *m)
{
    m->order = ++s->attached;
    m->prev = NULL;
    m->next = s->members;
    if (s->members != NULL)
        s->members->prev = m;
    s->members = m;
    s->nmembers++;
}

void zkr__session_detach(zkr_session_t *s, zkr__member_t *m)
{
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        s->members = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    m->prev = m->next = NULL;
    s->nmembers--;
}

void zkr__session_hold(zkr_session_t *s, int delta)
{
    s->nmembers += delta;
}
