/* examples/evloop.c: a one-thread daemon on poll() that holds a lock,
 * reacts to its loss, and leads an election.
 *
 *   evloop -s HOSTS [-p PREFIX] [-i ID] [-T SESSION_MS] [-t SECONDS]
 *
 * The session is opened with no_event_thread: zkr starts no thread that
 * runs application code. It is also opened with no_wait: the daemon starts
 * at once whether or not ZooKeeper answers, and its lock and candidacy
 * wait for the connection (the session listener, given in the options,
 * prints SESSION CONNECTED when it comes). zkr_session_fd() sits in the poll()
 * set, and zkr_session_dispatch() runs every callback on this thread, so the
 * program needs no mutex of its own. It acquires PREFIX/lock
 * asynchronously and, after losing it, asks again; it joins the election
 * PREFIX/election and leads when its turn comes. zkr_election_fd() sits
 * in the poll() set too: it is readable when the candidate has become
 * leader or has lost (or, under the default policy, suspended) its
 * leadership, or its candidacy ended (an error such as ZNOAUTH on the
 * automatic rejoin: LEADER ERROR), since the program last asked. Woken
 * by it, the program asks zkr_election_await(e, 0): 0 means "lead now"
 * (and quiets the descriptor), anything else "do not lead" (also quiet
 * until the next change).
 *
 * One line per event on stdout:
 *   SESSION <state>
 *   LOCK HELD <token> | LOCK SUSPENDED | LOCK LOST | LOCK ERROR <code>
 *   LEADER ON <epoch> | LEADER OFF | LEADER ERROR <code>
 *   WAKEUPS <n>   (at exit: how often poll() reported a descriptor)
 * It exits after SECONDS (default: at SIGTERM or SIGINT).
 *
 * Build: cc evloop.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

static volatile sig_atomic_t stop;
static zkr_lock_t *lock;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void on_session(zkr_session_t *s, zkr_state_t st, void *data)
{
    (void)s;
    (void)data;
    printf("SESSION %s\n", zkr_state_name(st));
}

static void on_acquired(int rc, zkr_lock_t *l, void *data);

/* Asks for the lock, without waiting: on_acquired() tells the outcome.
 * A loss is reported twice (the completion's ZKR_ELOST, then the
 * listener's LOST): the second ask finds the first under way. */
static void ask_lock(void)
{
    int rc = zkr_lock_acquire_async(lock, -1, on_acquired, NULL);

    if (rc != 0 && rc != ZKR_EALREADY)
        printf("LOCK ERROR %s\n", zkr_errname(rc));
}

static void on_acquired(int rc, zkr_lock_t *l, void *data)
{
    int64_t token;

    (void)data;
    if (rc == 0 && zkr_lock_token(l, &token) == 0) {
        printf("LOCK HELD %lld\n", (long long)token);
    } else if (rc == ZKR_ELOST) {
        printf("LOCK LOST\n");
        ask_lock(); /* lost before we heard of the grant: try again */
    } else if (rc != ZKR_ECANCELED) {
        printf("LOCK ERROR %s\n", zkr_errname(rc));
    }
}

/* SUSPENDED: stop side effects until HELD again. LOST: someone else may
 * hold it now; ask again (a new acquire observes the loss). */
static void on_lock(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    int64_t token;

    (void)data;
    if (st == ZKR_LOCK_SUSPENDED) {
        printf("LOCK SUSPENDED\n");
    } else if (st == ZKR_LOCK_HELD && zkr_lock_token(l, &token) == 0) {
        printf("LOCK HELD %lld\n", (long long)token);
    } else if (st == ZKR_LOCK_LOST) {
        printf("LOCK LOST\n");
        ask_lock();
    }
}

/* The election's descriptor was readable: look whether we lead. The
 * leadership we act on is its epoch (0: not leading); a loss and a new
 * grant between two looks are a stop, then a start. Returns 0, or the
 * error that ended the candidacy. */
static int look_leader(zkr_election_t *e, int64_t *leading)
{
    int64_t epoch = 0;
    int rc = zkr_election_await(e, 0);

    if (rc == 0 && zkr_election_epoch(e, &epoch) != 0)
        epoch = 0; /* lost again since: the descriptor says so */
    if (*leading != 0 && *leading != epoch) {
        /* Stop the leader's work here, before anything else. */
        printf("LEADER OFF\n");
        *leading = 0;
    }
    if (epoch != 0 && *leading == 0) {
        printf("LEADER ON %lld\n", (long long)epoch);
        *leading = epoch;
    }
    if (rc == 0 || rc == ZKR_ETIMEDOUT)
        return 0;
    printf("LEADER ERROR %s\n", zkr_errname(rc));
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: evloop -s HOSTS [-p PREFIX] [-i ID] "
                    "[-T SESSION_MS] [-t SECONDS]\n");
    return 64;
}

int main(int argc, char **argv)
{
    const char *hosts = NULL, *prefix = "/evloop", *id = NULL;
    char lpath[512], epath[512];
    int timeout_ms = 10000, seconds = -1, opt, rc;
    long wakeups = 0;
    int64_t leading = 0; /* epoch of the leadership we act on, or 0 */
    int candidate = 0;   /* in the election: its descriptor is polled */
    zkr_session_options_t o = {0};
    zkr_session_t *s = NULL;
    zkr_election_t *e = NULL;
    struct timespec t0, now;
    struct sigaction sa;

    while ((opt = getopt(argc, argv, "s:p:i:T:t:")) != -1) {
        switch (opt) {
        case 's':
            hosts = optarg;
            break;
        case 'p':
            prefix = optarg;
            break;
        case 'i':
            id = optarg;
            break;
        case 'T':
            timeout_ms = atoi(optarg);
            break;
        case 't':
            seconds = atoi(optarg);
            break;
        default:
            return usage();
        }
    }
    if (hosts == NULL || optind != argc)
        return usage();
    snprintf(lpath, sizeof(lpath), "%s/lock", prefix);
    snprintf(epath, sizeof(epath), "%s/election", prefix);
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    o.no_event_thread = 1;
    o.no_wait = 1;
    o.listener = on_session;
    if ((rc = zkr_session_open(&s, hosts, timeout_ms, &o)) != 0 ||
        (rc = zkr_lock_new(&lock, s, lpath, id, NULL)) != 0 ||
        (rc = zkr_lock_set_listener(lock, on_lock, NULL)) != 0 ||
        (rc = zkr_election_new(&e, s, epath, id, NULL, ZKR_POLICY_SUSPEND)) !=
            0) {
        fprintf(stderr, "evloop: %s\n", zkr_strerror(rc));
        zkr_lock_free(lock);
        zkr_session_free(s);
        return 1;
    }
    ask_lock();
    if ((rc = zkr_election_join(e)) != 0)
        printf("LEADER ERROR %s\n", zkr_errname(rc));
    candidate = rc == 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!stop) {
        struct pollfd p[2] = {{zkr_session_fd(s), POLLIN, 0},
                              {zkr_election_fd(e), POLLIN, 0}};
        int n = poll(p, candidate ? 2 : 1, 1000);

        if (n < 0 && errno != EINTR) {
            perror("evloop: poll");
            break;
        }
        if (n > 0 && p[0].revents != 0) {
            wakeups++;
            zkr_session_dispatch(s); /* the callbacks run here */
        }
        if (n > 0 && candidate && p[1].revents != 0) {
            wakeups++;
            candidate = look_leader(e, &leading) == 0;
        }
        /* The application's own periodic work would go here. */
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (seconds >= 0 && now.tv_sec - t0.tv_sec >= seconds)
            break;
    }
    printf("WAKEUPS %ld\n", wakeups);
    /* Frees never wait for a dispatch; zkr_session_free() runs what is
     * still due (the last completions and CLOSED) here. */
    zkr_election_free(e);
    zkr_lock_free(lock);
    return zkr_session_free(s) == 0 ? 0 : 1;
}
