/* examples/evloop_uv.c: examples/evloop.c on a libuv loop: one thread
 * that holds a lock, reacts to its loss, and takes part in an election.
 *
 *   evloop_uv -s HOSTS [-p PREFIX] [-i ID] [-T SESSION_MS] [-t SECONDS]
 *
 * Same options and output as evloop (see there), but no state listener:
 * three uv_poll_t watch zkr's descriptors. zkr_session_fd() (the session
 * is opened with no_event_thread) runs zkr_session_dispatch(), where the
 * acquire's completion runs; zkr_lock_fd() wakes on SUSPENDED, HELD again
 * and LOST, read with zkr_lock_state(); zkr_election_fd() wakes when the
 * candidate has become leader or has lost (under the default policy, also
 * suspended) its leadership since the program last asked. Woken, it asks
 * zkr_election_await(e, 0): 0 means "lead now" (and quiets the
 * descriptor), anything else "do not lead" (also quiet until the next
 * change).
 *
 * Build: cc evloop_uv.c $(pkg-config --cflags --libs zkr libuv) */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <uv.h>
#include <zkr.h>

static zkr_session_t *s;
static zkr_lock_t *lock;
static zkr_election_t *e;
static uv_poll_t session_w, lock_w, election_w;
static uv_signal_t sigterm_w, sigint_w;
static uv_timer_t timer_w;
static zkr_lock_state_t lock_shown = ZKR_LOCK_IDLE;
static int leading, error_shown;
static int64_t led_epoch;
static long wakeups;

static void on_session(zkr_session_t *zs, zkr_state_t st, void *data)
{
    (void)zs;
    (void)data;
    printf("SESSION %s\n", zkr_state_name(st));
}

/* One line per change of the lock's state that matters to the work. */
static void show_lock(zkr_lock_state_t st)
{
    int64_t token;

    if (st == lock_shown)
        return;
    lock_shown = st;
    if (st == ZKR_LOCK_SUSPENDED)
        printf("LOCK SUSPENDED\n");
    else if (st == ZKR_LOCK_HELD && zkr_lock_token(lock, &token) == 0)
        printf("LOCK HELD %lld\n", (long long)token);
    else if (st == ZKR_LOCK_LOST)
        printf("LOCK LOST\n");
}

static void on_acquired(int rc, zkr_lock_t *l, void *data);

/* Asks for the lock, without waiting (a new acquire also observes a
 * loss); ZKR_EALREADY: the completion's ZKR_ELOST asked already. */
static void ask_lock(void)
{
    int rc = zkr_lock_acquire_async(lock, -1, on_acquired, NULL);

    if (rc != 0 && rc != ZKR_EALREADY)
        printf("LOCK ERROR %s\n", zkr_errname(rc));
}

static void on_acquired(int rc, zkr_lock_t *l, void *data)
{
    (void)data;
    if (rc == 0) {
        show_lock(zkr_lock_state(l));
    } else if (rc == ZKR_ELOST) {
        show_lock(ZKR_LOCK_LOST); /* lost before we heard of the grant */
        ask_lock();
    } else if (rc != ZKR_ECANCELED) {
        printf("LOCK ERROR %s\n", zkr_errname(rc));
    }
}

static void on_fd(uv_poll_t *w, int status, int events);

/* Leads or not, now; prints a change (a new epoch is a loss and a gain). */
static void check_election(void)
{
    int64_t epoch = 0;
    int rc = zkr_election_await(e, 0);
    int now = rc == 0 && zkr_election_is_leader(e) &&
              zkr_election_epoch(e, &epoch) == 0;

    if (rc != 0 && rc != ZKR_ETIMEDOUT && rc != error_shown) {
        error_shown = rc; /* participation ended: once */
        printf("LEADER ERROR %s\n", zkr_errname(rc));
    }
    if (leading && (!now || epoch != led_epoch)) {
        leading = 0;
        printf("LEADER OFF\n");
    }
    if (now && !leading) {
        leading = 1;
        led_epoch = epoch;
        printf("LEADER ON %lld\n", (long long)epoch);
    }
}

/* One of the three descriptors is readable. */
static void on_fd(uv_poll_t *w, int status, int events)
{
    zkr_lock_state_t st;

    (void)status;
    (void)events;
    if (w == &lock_w) {
        st = zkr_lock_state(lock); /* quiets the descriptor */
        show_lock(st);
        if (st == ZKR_LOCK_LOST)
            ask_lock();
        return;
    }
    if (w == &session_w) {
        wakeups++;
        zkr_session_dispatch(s); /* the callbacks run here */
    }
    check_election();
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* SIGTERM, SIGINT or SECONDS: uv_run() returns once all are closed. */
static void on_signal(uv_signal_t *w, int sig)
{
    (void)sig;
    uv_walk(w->loop, close_handle, NULL);
}

static void on_timer(uv_timer_t *w)
{
    uv_walk(w->loop, close_handle, NULL);
}

static int usage(void)
{
    fprintf(stderr, "usage: evloop_uv -s HOSTS [-p PREFIX] [-i ID] "
                    "[-T SESSION_MS] [-t SECONDS]\n");
    return 64;
}

int main(int argc, char **argv)
{
    const char *hosts = NULL, *prefix = "/evloop", *id = NULL;
    char lpath[512], epath[512];
    int timeout_ms = 10000, seconds = -1, opt, rc;
    zkr_session_options_t o = {0};
    uv_loop_t *loop = uv_default_loop();

    while ((opt = getopt(argc, argv, "s:p:i:T:t:")) != -1) {
        if (opt == 's')
            hosts = optarg;
        else if (opt == 'p')
            prefix = optarg;
        else if (opt == 'i')
            id = optarg;
        else if (opt == 'T')
            timeout_ms = atoi(optarg);
        else if (opt == 't')
            seconds = atoi(optarg);
        else
            return usage();
    }
    if (hosts == NULL || optind != argc)
        return usage();
    snprintf(lpath, sizeof(lpath), "%s/lock", prefix);
    snprintf(epath, sizeof(epath), "%s/election", prefix);
    setvbuf(stdout, NULL, _IOLBF, 0);

    o.no_event_thread = 1;
    if ((rc = zkr_session_open(&s, hosts, timeout_ms, &o)) != 0 ||
        (rc = zkr_session_add_listener(s, on_session, NULL)) != 0 ||
        (rc = zkr_lock_new(&lock, s, lpath, id, NULL)) != 0 ||
        (rc = zkr_election_new(&e, s, epath, id, NULL, ZKR_POLICY_SUSPEND)) !=
            0 ||
        zkr_lock_fd(lock) < 0 || zkr_election_fd(e) < 0) {
        fprintf(stderr, "evloop_uv: %s\n",
                rc != 0 ? zkr_strerror(rc) : "no descriptor");
        zkr_election_free(e);
        zkr_lock_free(lock);
        zkr_session_free(s);
        return 1;
    }
    uv_poll_init(loop, &session_w, zkr_session_fd(s));
    uv_poll_start(&session_w, UV_READABLE, on_fd);
    uv_poll_init(loop, &lock_w, zkr_lock_fd(lock));
    uv_poll_start(&lock_w, UV_READABLE, on_fd);
    uv_poll_init(loop, &election_w, zkr_election_fd(e));
    uv_poll_start(&election_w, UV_READABLE, on_fd);
    uv_signal_init(loop, &sigterm_w);
    uv_signal_start(&sigterm_w, on_signal, SIGTERM);
    uv_signal_init(loop, &sigint_w);
    uv_signal_start(&sigint_w, on_signal, SIGINT);
    uv_timer_init(loop, &timer_w);
    if (seconds >= 0)
        uv_timer_start(&timer_w, on_timer, (uint64_t)seconds * 1000, 0);
    ask_lock();
    if ((rc = zkr_election_join(e)) != 0)
        printf("LEADER ERROR %s\n", zkr_errname(rc));

    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    printf("WAKEUPS %ld\n", wakeups);
    /* The descriptors are no longer watched: free the handles (the
     * session's free runs the last completions and CLOSED here). */
    zkr_election_free(e);
    zkr_lock_free(lock);
    return zkr_session_free(s) == 0 ? 0 : 1;
}
