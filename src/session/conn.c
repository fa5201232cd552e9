/* The session's connection: its state changes (the client's session
 * events), LOST and the safe deadline, and the timer thread (heartbeats,
 * deadlines, re-creating a lost session's handle). */
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
    zkr__log_error(s, ZKR_LOG_WARN, "session 0x%llx LOST: %s",
                   (unsigned long long)s->sid, why);
    zkr__set_state(s, ZKR_STATE_LOST);
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
    if (zkr__is_live(s->state) && s->timeout > 0 && !s->closing &&
        zkr__now_ms() >= zkr__deadline_of(s))
        declare_lost(s, 0, "no heartbeat answered within the safe deadline");
}

void zkr__lock_fresh(zkr_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    zkr__enforce_deadline(s);
}

void zkr__log_no_chroot(zkr_session_t *s, const char *chroot, const char *then)
{
    /* s->hosts ends in the chroot: the servers are what comes before. */
    zkr__log(s, ZKR_LOG_ERROR, "the chroot %s does not exist on %.*s%s", chroot,
             (int)strcspn(s->hosts, "/"), s->hosts, then);
}

/* A session opened with no_wait and a chroot: what the waiting open
 * returns as ZKR_ENOCHROOT is logged once a connection answers (a lost
 * answer asks again at the next connection). */
static void chroot_done(int rc, const struct Stat *st, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);

    (void)st;
    s->chroot_asking = 0;
    if (rc == ZNONODE)
        zkr__log_no_chroot(s, s->chroot,
                           ": requests fail with ZNONODE until it is made");
    if (rc == ZOK || rc == ZNONODE) {
        free(s->chroot);
        s->chroot = NULL;
    }
    zkr__op_end(op);
}

static void chroot_ask(zkr_session_t *s, zhandle_t *zh)
{
    zkr__op_t *op;

    if (s->chroot == NULL || s->chroot_asking ||
        (op = zkr__op_new(s, NULL)) == NULL)
        return;
    if (zoo_aexists(zh, "/", 0, chroot_done, op) != ZOK) /* "/": the chroot */
        zkr__op_cancel(op);
    else
        s->chroot_asking = 1;
}

/* The client's completion of the digest tells nothing the waiting open can
 * use: a connection lost before the answer, even a failed connect attempt,
 * completes it with ZCONNECTIONLOSS, and the answer on a later connection
 * then has none (see auth_accepted() in session.c). It runs on the
 * client's I/O thread, inside the client's lock when it completes with
 * a loss: it must take no zkr lock (a thread holding the session's mutex
 * may be waiting for the client's lock in a zoo_a*() call). A refused
 * digest arrives as ZOO_AUTH_FAILED_STATE. */
static void auth_done(int rc, const void *data)
{
    (void)rc;
    (void)data;
}

/* Gives a handle the session's digest: 0, or the client's refusal. The
 * client refuses it (ZINVALIDSTATE, before keeping it) while the handle's
 * state is 0, which it is between two connect attempts: from a server
 * that refused or dropped the connection to the next attempt, and for
 * recv_timeout/60 after the whole list failed. A first server down makes
 * that window likely right after zookeeper_init. A handle whose digest
 * was refused is not used until it is given (s->digest_missing: see
 * zkr__on_session_event), else its requests would go without the
 * credentials (ZNOAUTH, nodes owned by no one). */
static int give_digest(zkr_session_t *s, zhandle_t *zh)
{
    return zoo_add_auth(zh, "digest", s->digest, (int)strlen(s->digest),
                        auth_done, NULL);
}

void zkr__on_session_event(zkr_session_t *s, zhandle_t *zh, int state)
{

    if (zh != s->zh || s->closing)
        return;
    if (state == ZOO_CONNECTED_STATE) {
        const clientid_t *cid = zoo_client_id(zh);
        int64_t sid = cid != NULL ? cid->client_id : 0;
        int64_t now = zkr__now_ms();
        int zrc;

        if (s->connected && sid == s->sid)
            goto out; /* told twice (an adopted handle's application
                         forwards what zkr_session_adopt() saw already) */
        if (s->digest_missing) {
            /* Given now, before any request of ours: the client sends it
             * ahead of what is queued after, and on every reconnection. */
            if ((zrc = give_digest(s, zh)) != ZOK) {
                zkr__log(s, ZKR_LOG_WARN,
                         "cannot give the credentials to the connection "
                         "(%s): not used",
                         zerror(zrc));
                /* ZINVALIDSTATE: the connection went already, the next
                 * CONNECTED tries again. Anything else (no memory): a
                 * fresh handle does, or none may (LOST). */
                if (zrc == ZINVALIDSTATE)
                    goto out;
                if (s->no_reconnect)
                    declare_lost(s, 1, "the credentials could not be given");
                else if (s->owned)
                    s->replace = 1;
                goto out;
            }
            s->digest_missing = 0;
        }
        s->connected = 1;
        zkr__trace_note("connected", NULL);
        zkr__log_reachable(s);
        s->timeout = zoo_recv_timeout(zh);
        /* A new connection: heartbeat at once, and the proofs of the old
         * one's follower do not carry over (see the top of session.c). */
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
            zkr__set_state(s, ZKR_STATE_CONNECTED);
            s->hooks->connected(s, 1);
        } else {
            zkr__set_state(s, ZKR_STATE_RECONNECTED);
            s->hooks->connected(s, 0);
        }
        chroot_ask(s, zh);
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
                zkr__set_state(s, ZKR_STATE_SUSPENDED);
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
    zkr__tl_zk_thread = 1;
    if (type != ZOO_SESSION_EVENT || s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    zkr__on_session_event(s, zh, state);
    pthread_mutex_unlock(&s->mu);
}

void zkr_session_process_event(zkr_session_t *s, int type, int state)
{
    if (s == NULL || type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->zh != NULL)
        zkr__on_session_event(s, s->zh, state);
    pthread_mutex_unlock(&s->mu);
}

/* -------------------------------------------------------------- timer */

/* A heartbeat sent at `sent` was answered now: the newest earlier one
 * answered at least T/4 before `sent` proves that the ensemble's leader touched
 * the session no earlier than its own send time (see the top of session.c). */
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
    if (sent > s->hb_answered_sent)
        s->hb_answered_sent = sent;
    zkr__metrics_heartbeat(s, now - sent);
}

/* The heartbeat's answer. Only ZOK proves that the ensemble's leader answered
 * the sync; any error (connection loss, closing, the session gone) proves
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

    s->next_ping = now + zkr__heartbeat_ms(s);
    if (op == NULL)
        return;
    if (zoo_async(s->zh, "/", ping_done, op) != ZOK)
        zkr__op_cancel(op);
    else
        s->ping_busy = 1;
}

/* How long the client may go without resolving the host list again while
 * it has a socket open (docs/PROTOCOL.md [S7]). Without a socket
 * (connecting, failing over, reconnecting) it resolves on every turn of
 * its I/O loop whatever this says, so it delays no reconnection. */
#define ZKR__RESOLVE_DELAY_MS 1000

zhandle_t *zkr__open_handle(zkr_session_t *s, int *digest_missing)
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
    *digest_missing =
        zh != NULL && s->digest != NULL && give_digest(s, zh) != ZOK;
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
        zkr__close_handle(s, old);
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
    int missing;

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
    zh = zkr__open_handle(s, &missing);
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
    s->zh_shared = 0; /* a new handle, not handed out: the application's
                         watches were the old one's */
    s->digest_missing = missing;
    /* A fresh handle that cannot connect within a session timeout is
     * replaced, so hosts are resolved again and attempts are spaced. */
    s->connect_deadline =
        zkr__now_ms() + (s->req_timeout > 0 ? s->req_timeout : 10000);
    /* The handle connected while we opened it without the mutex: its
     * CONNECTED event found s->zh unset and was ignored. Take it now (if
     * the event is still to come, on_session_event ignores the repeat). */
    if (zoo_state(zh) == ZOO_CONNECTED_STATE)
        zkr__on_session_event(s, zh, ZOO_CONNECTED_STATE);
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
    return s->connected && !s->ping_busy && !s->replace &&
           zkr__is_live(s->state);
}

void *zkr__timer_main(void *arg)
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
        if (zkr__is_live(s->state) && s->timeout > 0 &&
            now >= zkr__deadline_of(s))
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
        if (zkr__is_live(s->state) && s->timeout > 0)
            next = min_time(next, zkr__deadline_of(s));
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
            zkr__wait_until(&s->tcv, &s->mu, next);
        s->timer_next = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
