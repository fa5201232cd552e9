/* examples/election.c: a candidate that does work only while it leads.
 *
 *   election -s HOSTS -p PATH -i ID [-T SESSION_MS] [-P session] [-r]
 *            [-l LOG]
 *
 * It runs zkr_election_run(): once leader, its leader function works until
 * leadership is lost (the election's descriptor becomes readable) or it is
 * asked to resign, and returns. With -r it then rejoins at the back of the
 * queue (and after a lost session it is back in the election by itself).
 * A SUSPENDED that ends in re-verification of the node does not cost the
 * leadership: run() calls the function again, with the same epoch.
 * -P session keeps leadership through short disconnections (SUSPENDED).
 *
 * Signals: SIGUSR1 resigns (the next candidate takes over), SIGTERM or
 * SIGINT leaves the election and exits.
 *
 * It appends to LOG (and prints) one line per event, with the monotonic
 * clock shared by all processes of the machine:
 *   SESSION <ms> <id> <session id hex> <password hex>   (each new session)
 *   LEADER_ON <ms> <id> <epoch>
 *   LEADER_OFF <ms> <id> <epoch>
 *
 * Build: cc election.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

/* Set by the main thread (sigwait), read by the leader function's: atomic. */
static atomic_int resign_asked;
static int logfd = -1;
static const char *id = "candidate";

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line, one write(2): lines of several processes never interleave. */
static void event(const char *what, const char *rest)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "%s %lld %s %s\n", what, mono_ms(), id,
                     rest);
    if (logfd >= 0 && write(logfd, line, (size_t)n) != n)
        perror("log");
    fputs(line, stdout);
}

static int lead(zkr_election_t *e, void *data);

struct runner {
    zkr_election_t *e;
    int requeue;
    int rc;
};

/* The election runs on its own thread; the main thread waits for signals
 * and, to leave, calls zkr_election_leave(), which makes the run return. */
static void *run_thread(void *arg)
{
    struct runner *r = arg;
    r->rc = zkr_election_run(r->e, lead, NULL, r->requeue);
    return NULL;
}

static void on_session(zkr_session_t *s, zkr_state_t st, void *data)
{
    zhandle_t *zh = zkr_session_handle(s);
    const clientid_t *cid;
    char rest[128];
    int n;

    static int64_t last_sid;

    (void)data;
    if (st != ZKR_STATE_CONNECTED || zh == NULL ||
        (cid = zoo_client_id(zh)) == NULL || cid->client_id == last_sid)
        return;
    last_sid = cid->client_id;
    n = snprintf(rest, sizeof(rest), "%llx ",
                 (unsigned long long)cid->client_id);
    for (int i = 0; i < 16; i++)
        n += snprintf(rest + n, sizeof(rest) - (size_t)n, "%02x",
                      (unsigned char)cid->passwd[i]);
    event("SESSION", rest);
}

/* The leader's work: here, just stay leader until told otherwise. */
static int lead(zkr_election_t *e, void *data)
{
    struct pollfd p = {zkr_election_fd(e), POLLIN, 0};
    char epoch[32] = "0";
    int64_t ep;

    (void)data;
    resign_asked = 0; /* a request made while not leader does not count */
    if (zkr_election_epoch(e, &ep) == 0)
        snprintf(epoch, sizeof(epoch), "%lld", (long long)ep);
    event("LEADER_ON", epoch);
    /* The descriptor is the stop signal: readable as soon as leadership
     * is lost or uncertain (SUSPENDED under the default policy), and it
     * stays readable even if this candidate leads again meanwhile (a new
     * epoch: not the leadership this function started with). */
    while (!resign_asked && poll(&p, 1, 100) <= 0)
        ;
    event("LEADER_OFF", epoch);
    return 0;
}

int main(int argc, char **argv)
{
    const char *hosts = getenv("ZKR_SERVER"), *path = "/zkr-demo/election";
    const char *logp = NULL;
    zkr_loss_policy_t policy = ZKR_POLICY_SUSPEND;
    int timeout = 10000, requeue = 0, opt, rc;
    sigset_t sigs;
    struct runner r;
    pthread_t th;
    zkr_session_t *s;
    zkr_election_t *e;
    int sig;

    while ((opt = getopt(argc, argv, "s:p:i:T:P:rl:")) != -1) {
        switch (opt) {
        case 's':
            hosts = optarg;
            break;
        case 'p':
            path = optarg;
            break;
        case 'i':
            id = optarg;
            break;
        case 'T':
            timeout = atoi(optarg);
            break;
        case 'P':
            policy = strcmp(optarg, "session") == 0 ? ZKR_POLICY_SESSION
                                                    : ZKR_POLICY_SUSPEND;
            break;
        case 'r':
            requeue = 1;
            break;
        case 'l':
            logp = optarg;
            break;
        default:
            fprintf(stderr,
                    "usage: %s -s HOSTS -p PATH -i ID [-T MS] "
                    "[-P session] [-r] [-l LOG]\n",
                    argv[0]);
            return 2;
        }
    }
    if (hosts == NULL)
        hosts = "127.0.0.1:2181";
    setvbuf(stdout, NULL, _IOLBF, 0);
    zoo_set_log_stream(fopen("/dev/null", "w"));
    if (logp != NULL &&
        (logfd = open(logp, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0) {
        perror(logp);
        return 2;
    }
    /* Signals are taken by sigwait() below, in every thread blocked. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if ((rc = zkr_session_open(&s, hosts, timeout, NULL)) != 0) {
        fprintf(stderr, "%s: connect %s: %s\n", argv[0], hosts,
                zkr_strerror(rc));
        return 2;
    }
    on_session(s, ZKR_STATE_CONNECTED, NULL);
    zkr_session_add_listener(s, on_session, NULL);
    if ((rc = zkr_election_new(&e, s, path, id, NULL, policy)) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], zkr_strerror(rc));
        return 2;
    }
    r.e = e;
    r.requeue = requeue;
    r.rc = 0;
    pthread_create(&th, NULL, run_thread, &r);
    while (sigwait(&sigs, &sig) == 0) {
        if (sig == SIGUSR1) {
            resign_asked = 1; /* the leader function returns */
            continue;
        }
        zkr_election_leave(e); /* stops the leader function first */
        break;
    }
    pthread_join(th, NULL);
    rc = r.rc;
    zkr_election_free(e);
    zkr_session_free(s);
    if (logfd >= 0)
        close(logfd);
    return rc == 0 ? 0 : 1;
}
