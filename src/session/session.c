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
 * The safe deadline. The server that expires sessions is the ensemble's LEADER
 * (a standalone server is its own leader); it expires a session no earlier than
 * T after it last touched it (its expiry buckets round up, never down). Our
 * deadline must rest only on proof that the leader touched the session
 * recently, never on an answer a follower gives by itself: a follower cut off
 * from its leader keeps answering reads for up to syncLimit x tickTime while
 * the leader, hearing nothing, expires the session after T (issue 12.1: a
 * waiter was granted seconds before such a holder's deadline). So:
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
 *    it lost its quorum (syncLimit ticks after its followers' last
 *    acknowledgement);
 *    the followers leave it syncLimit ticks after its last packet and
 *    elect a new leader, which restarts every session's timeout when it
 *    takes over. The two moments differ by about 1.5 tickTime, which the
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* The session whose event thread this thread is, or NULL. */
_Thread_local zkr_session_t *zkr__tl_event_session;
/* This thread is a ZooKeeper client's completion thread: it has run one of
 * zkr's completions or watchers, as the client runs them. An application
 * that sends its own requests on zkr's handle (zkr_session_handle(),
 * zkr_session_with_handle()) gets their completions on that thread, which
 * zkr's own answers also need: a blocking zkr call there could never be
 * answered, and a zkr_session_free() there would close the handle under
 * the thread that is running (zookeeper_close() can only detach it, and
 * answers still arrive after). Those calls return ZKR_EDEADLK there. */
_Thread_local int zkr__tl_zk_thread;
/* zkr is completing requests itself (zkr__close_handle): not the client. */
_Thread_local int zkr__tl_synthetic;

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
 * counts of calls active on the parent's threads are forgotten (a handle
 * compares its count of forks with the session's), the forking thread is no
 * longer a callback's (a fork from inside a callback), and the condition
 * variables, which may count waiters that no longer exist, are made new.
 * The child can then free every handle without the network and without
 * waiting. Lock order as always: live_mu, then each session's mu. */

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
    zkr__tl_event_session = NULL;
    zkr__tl_zk_thread = 0;
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
        zkr__ev_drop_all(s);
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
    return zkr__tl_event_session != NULL || zkr__tl_zk_thread;
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
    return zkr__tl_event_session == s || (s->dispatch && !s->dispatching);
}

/* The heartbeat interval H (see the top of the file). */
int64_t zkr__heartbeat_ms(const zkr_session_t *s)
{
    return s->timeout > 0 ? s->timeout / 12 : 1000;
}

static int64_t margin_ms(const zkr_session_t *s)
{
    return s->timeout / 10;
}

int64_t zkr__deadline_of(const zkr_session_t *s)
{
    return s->last_heard + s->timeout - margin_ms(s);
}

int zkr__is_live(zkr_state_t st)
{
    return st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED ||
           st == ZKR_STATE_SUSPENDED;
}

int zkr__is_connection_error(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/* Counts the session's state changes (its own metrics). */
void zkr__metrics_state(zkr_session_t *s, zkr_state_t st, int64_t margin_ms)
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
        zkr__cleanup_free(cl);
    }
    zkr__ev_drop_all(s);
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
    free(s->chroot);
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
        pthread_create(&s->event_thread, NULL, zkr__event_main, s) != 0)
        return ZKR_ESYS;
    if (pthread_create(&s->timer_thread, NULL, zkr__timer_main, s) != 0) {
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

/* Options of later versions take their room from reserved_: the structure
 * keeps its size. */
_Static_assert(sizeof(zkr_session_options_t) -
                       offsetof(zkr_session_options_t, listener) ==
                   8 * sizeof(void *),
               "zkr_session_options_t keeps its size");

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
    if (zkr__check_hosts(hosts) != 0)
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
    s->hosts = zkr__build_hosts(hosts, o.chroot);
    s->digest = zkr__strdup(o.digest);
    if (o.no_wait && o.chroot != NULL)
        s->chroot = zkr__strdup(o.chroot);
    if (s->hosts == NULL || (o.digest != NULL && s->digest == NULL) ||
        (o.no_wait && o.chroot != NULL && s->chroot == NULL) ||
        (o.listener != NULL &&
         zkr_session_add_listener(s, o.listener, o.listener_data) != 0)) {
        session_destroy(s);
        return ZKR_ENOMEM;
    }
    /* A waiting open holds the session's events until it has returned 0:
     * the listener given in the options must not hear a session that the
     * open then frees (it could make a handle on it, which would keep the
     * session alive out of the application's reach). */
    s->ev_held = !o.no_wait;
    if ((rc = start_threads(s)) != 0) {
        session_destroy(s);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    s->zh = zkr__open_handle(s, &s->digest_missing);
    if (s->zh == NULL) {
        pthread_mutex_unlock(&s->mu);
        rc = zkr__why_no_handle(s, hosts);
        stop_threads(s);
        session_destroy(s);
        return rc;
    }
    if (o.no_wait) {
        /* The handle connects in the background (conn.c checks the
         * chroot then); it is never replaced while CONNECTING: the client
         * tries the servers in turn for as long as it takes. A session
         * without a log slot never sees its client's messages, so if it
         * has not connected within a session timeout the timer thread
         * says so itself (once, kept as its last error). */
        if (s->log_slot < 0) {
            s->connect_deadline = zkr__now_ms() + s->req_timeout;
            zkr__timer_kick(s);
        }
        pthread_mutex_unlock(&s->mu);
        *out = s;
        return 0;
    }
    deadline =
        o.connect_timeout_ms < 0
            ? -1
            : zkr__now_ms() + (o.connect_timeout_ms > 0 ? o.connect_timeout_ms
                                                        : session_timeout_ms);
    while (s->state == ZKR_STATE_CONNECTING && !s->auth_failed &&
           zkr__wait(s, NULL, deadline) == 0)
        ;
    rc = zkr__open_rc(s);
    pthread_mutex_unlock(&s->mu);
    if (rc == 0 && s->digest != NULL)
        rc = zkr__auth_accepted(s, deadline);
    if (rc == ZKR_ETIMEDOUT)
        rc = zkr__why_not_connected(s, hosts);
    if (rc == 0 && o.chroot != NULL)
        rc = zkr__chroot_missing(s, o.chroot);
    pthread_mutex_lock(&s->mu);
    if (rc != 0) {
        zkr__listener_t *l;
        /* No session for the application: its listener hears nothing,
         * neither the changes held so far nor the close. */
        while ((l = s->listeners) != NULL) {
            s->listeners = l->next;
            free(l);
        }
        s->closing = 1;
        s->no_reconnect = 1;
    }
    s->ev_held = 0;
    pthread_cond_signal(&s->ecv);
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        zkr_session_free(s);
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
        zkr__on_session_event(s, zh, ZOO_CONNECTED_STATE);
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
    zkr__dispatch_locked(s, UINT64_MAX);
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
            zkr__close_handle(s, zh);
    }
    while (s->ops > 0)
        zkr__wait(s, NULL, zkr__now_ms() + 50);
    zkr__set_state(s, ZKR_STATE_CLOSED);
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
    n = s->dispatching ? 0 : zkr__dispatch_locked(s, s->ev_seq);
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
    if (!zkr__is_live(s->state) || s->timeout <= 0 || s->closing)
        return 0;
    v = zkr__deadline_of(s) - zkr__now_ms();
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
    sid = zkr__is_live(s->state) ? s->sid : 0;
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
        if (zkr__lost_for_good(s)) {
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
