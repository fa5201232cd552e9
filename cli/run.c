/* zkr lock / sem / elect / queue take: run a command while holding a lock,
 * a semaphore permit, leadership or the claim of a work queue's item, and
 * stop it before anyone else can be granted. zkr barrier enter: run a
 * command in a phase of a double barrier. zkr member: run a command as a
 * member of a group.
 *
 * A work queue's claim is contained exactly as a lock is: it is an
 * exclusive lock whose directory is the item's node, with the same states
 * (HELD, SUSPENDED, LOST at the safe deadline), so the same supervisor
 * runs the command; only the end differs: the command's exit status acks
 * (0) or nacks the item, once every process of the command is gone.
 *
 * barrier enter's command runs under the same guard and supervisor, with
 * no grant (run_has_grant()): once N participants have entered, the phase
 * has begun for all of them, and nothing that happens to the session can
 * take it back. So the command is never stopped for the session's sake
 * (its participant node goes with an expired session: the others count it
 * as left), and the guard has no deadline; zkr's own death still kills the
 * command's tree, and signals are forwarded as for a lock. Once every
 * process of the command is gone, zkr leaves.
 *
 * member's command runs the same way, with no grant either: the library
 * keeps the membership (a node lost with an expired session is made again
 * on the new one), so nothing that happens to the session is a reason to
 * stop the command. Once every process of the command is gone, zkr
 * leaves the group.
 *
 * One thread (main) supervises; zkr's callbacks only write small messages
 * to a pipe. Signals are received through a signalfd, so SIGINT, SIGTERM,
 * SIGHUP, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU and SIGCONT are blocked in
 * every thread (zkr's threads are created after the mask is set and
 * inherit it).
 *
 * The command runs under a guard process (contain.c) that is its parent
 * and a subreaper: the grant lasts until every process of the command is
 * reaped, wherever it went (background, setsid); the guard kills the whole
 * tree if zkr dies (even by SIGKILL of zkr's whole process group) or stops
 * sending heartbeats before the session's safe deadline (zkr stopped).
 * Signals for the command reach every process of its tree.
 *
 * Under a terminal, a foreground zkr makes the command's process group the
 * terminal's foreground group (the command may read it) and takes it back
 * when the command is gone. For job control the command's group stands
 * for zkr's: a command stopped by SIGTSTP/SIGTTIN/SIGTTOU stops zkr's
 * group with the same signal, as the terminal would have had the command
 * been in it, so a zkr running a zkr (at any depth) is one job to the
 * shell; a stop signal to zkr goes to the command's group first (see
 * stop_self(), run_supervise.c).
 *
 * What ownership trouble does to the command (--on-suspend):
 *   term    SUSPENDED: SIGTERM to the tree; the safe deadline (LOST):
 *           SIGKILL. zkr exits 4 (--lost-exit-code).
 *   stop    SUSPENDED: SIGSTOP; HELD again after re-verification: SIGCONT;
 *           LOST: SIGKILL.
 *   ignore  LOST only: SIGTERM, then SIGKILL after --grace.
 * Each suspension of a run is acted on: a re-verified HELD ends it.
 * zkr declares LOST at the session's safe deadline (last answered request
 * + 0.9 T), before the server can expire the session and grant anyone
 * else, so with term and stop the command is gone before a successor
 * starts. A holder whose node is deleted by someone else (zkr release
 * --force) is LOST within about 50 ms plus a round trip. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

/* ----------------------------------------------------------- callbacks */

static void post(sup_t *p, int kind, int a, int b)
{
    struct msg m = {kind, a, b};
    ssize_t n;

    do
        n = write(p->ev[1], &m, sizeof(m));
    while (n < 0 && errno == EINTR);
}

static void on_acquired(int rc, zkr_lock_t *l, void *data)
{
    (void)l;
    post(data, M_ACQUIRED, rc, 0);
}

static void on_multi_acquired(int rc, zkr_multilock_t *m, void *data)
{
    (void)m;
    post(data, M_ACQUIRED, rc, 0);
}

static void on_lock_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    post(data, M_LOCK_STATE, (int)st, 0);
}

/* The item is handed over before the message: the pipe orders the store
 * before the supervisor's read. */
static void on_taken(int rc, zkr_item_t *it, void *data)
{
    sup_t *p = data;

    p->it = it;
    post(p, M_ACQUIRED, rc, 0);
}

/* queue take --batch: the items are handed over before the message. */
static void on_taken_batch(int rc, zkr_item_t **items, int count, void *data)
{
    sup_t *p = data;

    for (int i = 0; i < count && i < p->o->batch; i++)
        p->batch[i] = items[i];
    p->nbatch = count;
    post(p, M_ACQUIRED, rc, 0);
}

static void on_item_state(zkr_item_t *it, zkr_lock_state_t st, void *data)
{
    (void)it;
    post(data, M_LOCK_STATE, (int)st, 0);
}

static void on_leader(zkr_election_t *e, int leader, int rc, void *data)
{
    (void)e;
    post(data, M_LEADER, leader, rc);
}

static void on_session(zkr_session_t *s, zkr_state_t st, void *data)
{
    (void)s;
    post(data, M_SESSION, (int)st, 0);
}

/* ---------------------------------------------------------- setup, end */

/* The session is opened on a thread of its own so that a signal ends zkr
 * at once, however long the connection takes. */
typedef struct opener {
    const cli_t *c;
    zkr_session_t *s;
    int rc;
    int fd; /* written when done */
} opener_t;

static void *open_thread(void *arg)
{
    opener_t *op = arg;
    char b = 1;
    ssize_t n;

    op->rc = cli_open_session(op->c, &op->s);
    n = write(op->fd, &b, 1);
    (void)n;
    return NULL;
}

static int open_session(sup_t *p, const cli_t *c)
{
    opener_t op = {c, NULL, CLI_EXIT_OSERR, -1};
    int done[2];
    pthread_t t;

    if (pipe2(done, O_CLOEXEC) != 0)
        return cli_open_session(c, &p->s);
    op.fd = done[1];
    if (pthread_create(&t, NULL, open_thread, &op) != 0) {
        close(done[0]);
        close(done[1]);
        return cli_open_session(c, &p->s);
    }
    for (;;) {
        struct pollfd fds[2] = {{done[0], POLLIN, 0}, {p->sfd, POLLIN, 0}};
        struct signalfd_siginfo si;
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & POLLIN)
            break;
        if ((fds[1].revents & POLLIN) &&
            read(p->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if (si.ssi_signo == SIGTSTP || si.ssi_signo == SIGTTIN ||
                si.ssi_signo == SIGTTOU)
                run_stop_as_job((int)si.ssi_signo, 0);
            else if (si.ssi_signo != SIGCHLD && si.ssi_signo != SIGCONT) {
                /* Nothing was created yet: nothing to clean up. */
                fflush(stderr);
                _exit(128 + (int)si.ssi_signo);
            }
        }
    }
    pthread_join(t, NULL);
    close(done[0]);
    close(done[1]);
    p->s = op.s;
    return op.rc;
}

static int setup(sup_t *p, const cli_t *c, const opts_t *o)
{
    sigset_t set, cont;

    memset(p, 0, sizeof(*p));
    p->cli = c;
    p->o = o;
    p->g.guard = p->g.cmd = -1;
    p->g.ctl = p->g.rep = -1;
    p->kill_at = p->wake_at = p->jc_at = -1;
    p->ev[0] = p->ev[1] = p->sfd = -1;
    p->tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (strcmp(o->acl, "private") == 0 && c->auth == NULL)
        return cli_usage_error(o->sub, "--acl private needs credentials "
                                       "(--auth-file, $ZKR_AUTH or --auth)");
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTSTP);
    sigaddset(&set, SIGTTIN);
    sigaddset(&set, SIGTTOU);
    sigaddset(&set, SIGCONT);
    /* Subreaper: if the guard is killed, the command's tree comes to us
     * rather than to init. What we had as children before is not the
     * command's. */
    ct_record_foreign();
    /* A write to the guard after it ended is EPIPE, not our death. */
    signal(SIGPIPE, SIG_IGN);
    /* Blocked: a pending SIGCONT tells run_stop_as_job() that we were stopped
     * (a continuation happens whatever the mask), which takes it; one that
     * continued us otherwise is read by the signalfd (continued()). */
    sigemptyset(&cont);
    sigaddset(&cont, SIGCONT);
    if (sigprocmask(SIG_BLOCK, &cont, NULL) != 0 ||
        sigprocmask(SIG_BLOCK, &set, NULL) != 0 ||
        (p->sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
        pipe2(p->ev, O_CLOEXEC) != 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        cli_err("setup: %s", strerror(errno));
        return CLI_EXIT_OSERR;
    }
    return open_session(p, c);
}

#define LAST_SUCCESS "zkr_run_last_success_timestamp_seconds"

/* The value of LAST_SUCCESS in the file a previous run wrote, or NULL. */
static char *previous_success(const char *file, char *buf, size_t len)
{
    FILE *f = fopen(file, "r");
    char line[256];
    char *found = NULL;

    if (f == NULL)
        return NULL;
    while (found == NULL && fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(LAST_SUCCESS);
        char *end;
        if (strncmp(line, LAST_SUCCESS, n) != 0 || line[n] != ' ')
            continue;
        line[strcspn(line, "\n")] = '\0';
        (void)strtod(line + n + 1, &end);
        if (end != line + n + 1 && *end == '\0' && strlen(line + n + 1) < len) {
            strcpy(buf, line + n + 1);
            found = buf;
        }
    }
    fclose(f);
    return found;
}

/* What a batch job's monitoring needs beside the session's metrics: when
 * this run ended, its exit status, and when a run last succeeded (exit 0;
 * a failed run carries the time over from the file it replaces, so that
 * an alert on "no success for a day" works with one file per job). */
static void write_run_metrics(FILE *f, const char *file, int status)
{
    struct timespec ts;
    char prev[64], *last = NULL, now[64];

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(now, sizeof(now), "%lld.%03ld", (long long)ts.tv_sec,
             ts.tv_nsec / 1000000);
    fprintf(f,
            "# HELP zkr_run_end_timestamp_seconds When this zkr run ended "
            "(Unix time).\n# TYPE zkr_run_end_timestamp_seconds gauge\n"
            "zkr_run_end_timestamp_seconds %s\n",
            now);
    fprintf(f,
            "# HELP zkr_run_exit_status The exit status of this zkr run.\n"
            "# TYPE zkr_run_exit_status gauge\nzkr_run_exit_status %d\n",
            status);
    last = status == 0 ? now : previous_success(file, prev, sizeof(prev));
    if (last != NULL)
        fprintf(f,
                "# HELP " LAST_SUCCESS " When a run writing this file last "
                "ended with status 0 (Unix time).\n# TYPE " LAST_SUCCESS
                " gauge\n" LAST_SUCCESS " %s\n",
                last);
}

/* --metrics-file: the session's metrics and the run's, written to a
 * temporary file in the same directory and renamed over FILE, so that a
 * reader (such as node_exporter's textfile collector) never sees half a
 * file. A failure is reported but does not change the exit status: the
 * command's result is what the status tells. */
static void write_metrics(const sup_t *p, int status)
{
    const char *file = p->o->metrics_file;
    char tmp[4096];
    FILE *f;
    int rc = ZKR_ESYS;

    if (file == NULL || p->s == NULL)
        return;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid()) >=
        (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
    } else if ((f = fopen(tmp, "w")) != NULL) {
        rc = zkr_metrics_write(p->s, f);
        if (rc == 0)
            write_run_metrics(f, file, status);
        if (fclose(f) != 0 && rc == 0)
            rc = ZKR_ESYS;
        if (rc == 0 && rename(tmp, file) != 0)
            rc = ZKR_ESYS;
        if (rc != 0) {
            int err = errno;
            unlink(tmp);
            errno = err;
        }
    }
    if (rc == ZKR_ESYS)
        cli_err("cannot write --metrics-file %s: %s", file, strerror(errno));
    else if (rc != 0)
        cli_err("cannot write --metrics-file %s: %s", file, zkr_strerror(rc));
}

static void teardown(sup_t *p, int status)
{
    zkr_group_free(p->grp);  /* its node, if it stands, goes */
    zkr_dbarrier_free(p->d); /* its node, if it stands, goes */
    zkr_item_free(p->it);    /* a claim still held is given back */
    for (int i = 0; i < p->nbatch; i++)
        zkr_item_free(p->batch[i]); /* --batch: those not run, back */
    free(p->batch);
    zkr_workq_free(p->q);
    zkr_multilock_free(p->m); /* before its members */
    for (int i = 0; p->more != NULL && i < p->o->nmore; i++)
        zkr_lock_free(p->more[i]);
    free(p->more);
    zkr_lock_free(p->l);
    zkr_election_free(p->e);
    write_metrics(p, status);
    if (p->s != NULL) {
        zkr_session_remove_listener(p->s, on_session, p);
        zkr_session_free(p->s);
    }
    if (p->sfd >= 0)
        close(p->sfd);
    if (p->tty >= 0)
        close(p->tty);
    if (p->ev[0] >= 0) {
        close(p->ev[0]);
        close(p->ev[1]);
    }
}

static int exit_status_of(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return CLI_EXIT_OSERR;
}

/* Records what lost the grant first (for lost_word()). */
void run_lose(sup_t *p, const char *why)
{
    p->lost = 1;
    if (p->why == NULL)
        p->why = why;
}

/* The one line zkr owes when it exits with --lost-exit-code: which grant,
 * why, and the hosts. */
static void lost_word(const sup_t *p)
{
    cli_err("%s: ownership lost while the command ran: %s (ZooKeeper at "
            "%s); exit %d",
            p->o->path, p->why != NULL ? p->why : "lost", p->cli->hosts,
            p->o->lost_code);
}

/* ---------------------------------------------------------- lock, sem */

/* --lock-delay, by default the session's timeout: a holder that was only
 * paused (SIGSTOP, a frozen VM) and resumes within one more session
 * timeout after its session expired learns that it lost the lock, and its
 * command is stopped, before anyone else starts (zkr(1), LOCK-DELAY). */
static int lock_delay(const opts_t *o, zkr_session_t *s)
{
    int64_t d = o->delay_ms >= 0 ? o->delay_ms : zkr_session_timeout_ms(s);

    return d > INT_MAX ? INT_MAX : d < 0 ? 0 : (int)d;
}

/* The lock (permit, side) of one PATH, with its options. 0 or an exit
 * status. */
static int make_one(sup_t *p, const char *path, zkr_lock_t **out)
{
    const opts_t *o = p->o;
    const struct ACL_vector *acl = cli_acl(o->acl);
    zkr_lock_t *w = NULL;
    int rc;

    if (o->kind == KIND_SEM)
        rc = zkr_semaphore_new(out, p->s, path, (int)o->permits, o->id, acl);
    else if (o->read)
        rc = zkr_rwlock_new(out, &w, p->s, path, o->id, acl);
    else if (o->write) /* w is the unused side here */
        rc = zkr_rwlock_new(&w, out, p->s, path, o->id, acl);
    else
        rc = zkr_lock_new(out, p->s, path, o->id, acl);
    zkr_lock_free(w);
    if (rc == ZBADARGUMENTS)
        return cli_usage_error(o->sub, "invalid PATH '%s' or --id", path);
    if (rc == 0)
        rc = zkr_lock_set_delay(*out, lock_delay(o, p->s));
    if (rc == 0)
        rc = zkr_lock_set_delay_flags(*out, o->delay_flags);
    if (rc != 0)
        return cli_zk_error(p->cli, rc, "%s", path);
    zkr_lock_set_listener(*out, on_lock_state, p);
    return 0;
}

/* The lock of PATH and, with more PATHs, theirs and the multi-lock of
 * all. 0 or an exit status. */
static int make_lock(sup_t *p)
{
    const opts_t *o = p->o;
    zkr_lock_t **all;
    int status, rc;

    if ((status = make_one(p, o->path, &p->l)) != 0)
        return status;
    if (o->nmore > 0) {
        if ((p->more = calloc((size_t)o->nmore, sizeof(*p->more))) == NULL ||
            (all = calloc((size_t)o->nmore + 1, sizeof(*all))) == NULL)
            return cli_zk_error(p->cli, ZKR_ENOMEM, "%s", o->path);
        all[0] = p->l;
        for (int i = 0; status == 0 && i < o->nmore; i++)
            if ((status = make_one(p, o->more[i], &p->more[i])) == 0)
                all[i + 1] = p->more[i];
        rc = status == 0 ? zkr_multilock_new(&p->m, all, o->nmore + 1) : 0;
        free(all);
        if (status != 0)
            return status;
        if (rc == ZBADARGUMENTS)
            return cli_usage_error(o->sub, "a PATH is given twice");
        if (rc != 0)
            return cli_zk_error(p->cli, rc, "%s", o->path);
    }
    zkr_session_add_listener(p->s, on_session, p);
    return 0;
}

/* The grant's state: the multi-lock's with several PATHs. */
zkr_lock_state_t run_lock_state(sup_t *p)
{
    return p->m != NULL ? zkr_multilock_state(p->m) : zkr_lock_state(p->l);
}

static int release_grant(sup_t *p)
{
    return p->m != NULL ? zkr_multilock_release(p->m) : zkr_lock_release(p->l);
}

/* Cancels the pending acquire or take; barrier enter's enter or leave,
 * and member's join or leave, end with their handle (ZKR_ECANCELED),
 * which deletes its node. */
static void cancel(sup_t *p)
{
    if (p->grp != NULL) {
        zkr_group_free(p->grp);
        p->grp = NULL;
    } else if (p->d != NULL) {
        zkr_dbarrier_free(p->d);
        p->d = NULL;
    } else if (p->q != NULL)
        zkr_workq_cancel(p->q);
    else if (p->m != NULL)
        zkr_multilock_cancel(p->m);
    else
        zkr_lock_cancel(p->l);
}

/* Waits for the acquire's (take's, barrier enter's enter or leave,
 * member's join or leave) completion, canceling it on a signal or at
 * wake_at. */
static int await_grant(sup_t *p, int *rc)
{
    struct msg m;

    for (;;) {
        int sig = p->signo;
        if (run_wait_event(p, &m) && m.kind == M_ACQUIRED) {
            *rc = m.a;
            if (*rc == ZKR_ECANCELED && p->timed_out)
                *rc = ZKR_ETIMEDOUT;
            return 0;
        }
        if (p->signo != 0 && sig == 0)
            cancel(p);
        if (p->wake_at >= 0 && ct_now_ms() >= p->wake_at && p->signo == 0) {
            p->wake_at = -1;
            p->timed_out = 1;
            cancel(p);
        }
    }
}

/* After the acquire (take) completed with rc: 1 when granted; else 0 with
 * *status zkr's exit status (not granted within -w: -E's code). */
static int granted(sup_t *p, int rc, int *status)
{
    const opts_t *o = p->o;

    p->wake_at = -1;
    if (rc == ZKR_EBUSY || rc == ZKR_ETIMEDOUT) {
        cli_info(p->cli, "%s: %s", o->path,
                 rc == ZKR_EBUSY         ? "held by another contender"
                 : o->kind == KIND_QUEUE ? "no item came in time"
                                         : "timed out");
        *status = o->fail_code;
        return 0;
    }
    if (rc == ZKR_ECANCELED) {
        *status = 128 + p->signo;
        return 0;
    }
    if (rc != 0) {
        *status = cli_zk_error(p->cli, rc, "%s: cannot %s", o->path,
                               o->kind == KIND_QUEUE      ? "take"
                               : o->kind == KIND_DBARRIER ? "enter"
                               : o->kind == KIND_MEMBER   ? "join"
                                                          : "acquire");
        return 0;
    }
    return 1;
}

/* What run_granted() leaves to its caller. */
typedef enum {
    RAN,       /* the command ran and every process of it is gone */
    GIVE_BACK, /* it did not run: the grant is to be given back */
    GONE       /* it did not run: the grant was lost already */
} ran_t;

/* Runs the command under the grant of a lock, a permit or a claim (the
 * one code path of lock, sem and queue take) until every process of the
 * command is gone. *status: the command's exit status (RAN), else zkr's. */
static ran_t run_granted(sup_t *p, int *status)
{
    const opts_t *o = p->o;
    zkr_sequencer_t q;
    int rc;

    if (p->signo != 0) { /* granted just as we were told to stop */
        *status = 128 + p->signo;
        return GIVE_BACK;
    }
    rc = p->it != NULL ? zkr_item_sequencer(p->it, &q)
                       : zkr_lock_sequencer(p->l, &q);
    if (rc == 0 && p->m != NULL) { /* every PATH's grant */
        zkr_lock_state_t st = run_lock_state(p);
        if (st != ZKR_LOCK_HELD && st != ZKR_LOCK_SUSPENDED)
            rc = ZKR_ELOST;
    }
    if (rc != 0) {
        /* Lost between the grant and now. */
        cli_err("ownership of %s lost before the command started", o->path);
        *status = o->lost_code;
        return GONE;
    }
    /* PATH (queue take: the item's node, the claim's directory) exists
     * now: an older, weaker ACL on it would let others delete the holder's
     * node. */
    if ((*status = cli_check_path_acl(
             p->cli, p->s, p->it != NULL ? q.path : o->path, o->acl)) != 0)
        return GIVE_BACK;
    for (int i = 0; i < o->nmore; i++)
        if ((*status = cli_check_path_acl(p->cli, p->s, o->more[i], o->acl)) !=
            0)
            return GIVE_BACK;
    if ((*status = run_spawn(p, &q, NULL)) != 0)
        return GIVE_BACK;
    /* The grant lasts until every process of the command is gone. */
    run_supervise(p);
    *status = exit_status_of(p->status);
    return RAN;
}

static int run_lock(const cli_t *c, const opts_t *o)
{
    sup_t p;
    zkr_lock_state_t st;
    int rc, status;
    ran_t ran;

    if ((status = run_command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0 || (status = make_lock(&p)) != 0)
        goto out;
    /* A wait longer than the library's int of ms: forever, bounded here. */
    if (cli_timeout_arg(o->wait_ms) != o->wait_ms)
        p.wake_at = ct_now_ms() + o->wait_ms;
    rc = p.m != NULL
             ? zkr_multilock_acquire_async(p.m, cli_timeout_arg(o->wait_ms),
                                           on_multi_acquired, &p)
             : zkr_lock_acquire_async(p.l, cli_timeout_arg(o->wait_ms),
                                      on_acquired, &p);
    if (rc == 0)
        await_grant(&p, &rc);
    if (!granted(&p, rc, &status))
        goto out;
    if ((ran = run_granted(&p, &status)) == GIVE_BACK)
        release_grant(&p);
    if (ran != RAN)
        goto out;
    /* SUSPENDED too: the release waits for the reconnection that confirms
     * the delete, or for the session's end (which deletes the node). */
    st = run_lock_state(&p);
    if (st == ZKR_LOCK_HELD || st == ZKR_LOCK_SUSPENDED) {
        rc = release_grant(&p);
        if (rc == ZKR_ELOST && st == ZKR_LOCK_HELD)
            run_lose(&p, "the node was gone at the release");
        else if (rc == ZKR_ELOST)
            cli_err("%s: the connection did not come back after the "
                    "command ended: the node goes with the session",
                    o->path);
        else if (rc != 0)
            cli_err("%s: cannot release: %s", o->path, zkr_strerror(rc));
    }
    if (p.lost) {
        lost_word(&p);
        status = o->lost_code;
    }
out:
    teardown(&p, status);
    return status;
}

/* ---------------------------------------------------------- queue take */

/* zkr queue take's exit status for an ack in doubt (ZKR_EINDOUBT: sent,
 * its answer lost with the session): neither 0 (acked) nor 4 (not
 * completed), as either may be false (zkr(1), EXIT STATUS). */
#define QUEUE_EXIT_IN_DOUBT CLI_EXIT_INDOUBT

/* Errors after which an ack or nack may be sent again: nothing was
 * changed, the claim still stands (zkr.h). */
static int retryable(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
           rc == ZKR_ETIMEDOUT;
}

/* Acks (ack) or nacks the item to where. A connection loss is waited
 * out: the claim is then re-verified (HELD again) or declared LOST at the
 * safe deadline, after which the library answers ZKR_ESTALE without
 * sending; the wait is bounded by two session timeouts all the same. */
static int settle(sup_t *p, int ack, zkr_nack_where_t where)
{
    int64_t until = ct_now_ms() + 2 * (int64_t)zkr_session_timeout_ms(p->s);
    int rc;

    for (;;) {
        rc = ack ? zkr_item_ack(p->it) : zkr_item_nack(p->it, where);
        if (!retryable(rc) || ct_now_ms() >= until)
            return rc;
        cli_info(p->cli, "%s: %s: %s; trying again", p->o->path,
                 ack ? "ack" : "nack", zkr_strerror(rc));
        poll(NULL, 0, 100);
    }
}

static int make_queue(sup_t *p)
{
    const opts_t *o = p->o;
    int rc = zkr_workq_new(&p->q, p->s, o->path, o->id, cli_acl(o->acl));

    if (rc == ZBADARGUMENTS)
        return cli_usage_error(o->sub, "invalid PATH '%s' or --id", o->path);
    if (rc == 0 && o->max_deliveries > 0) {
        rc = zkr_workq_set_dead_letter(p->q, (int)o->max_deliveries,
                                       o->dead_path);
        if (rc == ZBADARGUMENTS)
            return cli_usage_error(o->sub, "invalid --dead '%s'",
                                   o->dead_path != NULL ? o->dead_path : "");
    }
    if (rc != 0)
        return cli_zk_error(p->cli, rc, "%s", o->path);
    zkr_session_add_listener(p->s, on_session, p);
    return 0;
}

/* Runs the command for the item p->it, then acks or nacks it: the exit
 * status of zkr queue take for it. */
static int run_item(sup_t *p)
{
    const cli_t *c = p->cli;
    const opts_t *o = p->o;
    zkr_lock_state_t st;
    int rc, status, ack;
    ran_t ran;

    zkr_item_set_listener(p->it, on_item_state, p);
    cli_info(c, "%s: took %s (delivery %d)", o->path, zkr_item_id(p->it),
             zkr_item_deliveries(p->it));
    if ((ran = run_granted(p, &status)) == GIVE_BACK) {
        /* Not run: given back where it was, whatever --nack says (it
         * is for a command that failed). The delivery counts (the count
         * is the item's number of claims): resolve() found out before
         * the take what can be found out without exec. */
        if ((rc = settle(p, 0, ZKR_NACK_FRONT)) != 0)
            cli_err("%s: cannot give %s back: %s", o->path, zkr_item_id(p->it),
                    zkr_strerror(rc));
    }
    if (ran != RAN)
        return status;
    /* Done only if the command said so (exit 0) and ran undisturbed: a
     * command that zkr signalled (a signal to zkr, a suspension) may have
     * stopped half-way, whatever its status. */
    ack = status == 0 && p->signo == 0 && !p->lost;
    st = zkr_item_state(p->it);
    if (st == ZKR_LOCK_HELD || st == ZKR_LOCK_SUSPENDED) {
        rc = settle(p, ack, o->nack);
        if (rc == ZKR_ESTALE) {
            run_lose(p, ack ? "the claim was gone at the ack: the item was "
                              "not completed and may be delivered again"
                            : "the claim was gone at the nack");
        } else if (rc == ZKR_EINDOUBT) {
            cli_err("%s: %s %s: the answer was lost with the session: it "
                    "may or may not have applied (ZooKeeper at %s)%s",
                    o->path, ack ? "ack of" : "nack of", zkr_item_id(p->it),
                    c->hosts,
                    ack ? "; the item may be delivered again if it did not"
                        : "");
            if (ack)
                status = QUEUE_EXIT_IN_DOUBT;
        } else if (rc != 0) {
            cli_zk_error(c, rc, "%s: cannot %s %s", o->path,
                         ack ? "ack" : "nack", zkr_item_id(p->it));
            if (ack)
                status = cli_exit_of(rc);
        } else {
            cli_info(c, "%s: %s %s", o->path, ack ? "acked" : "nacked",
                     zkr_item_id(p->it));
        }
    } else {
        /* Lost as the command ended, before we looked: neither acked nor
         * nacked, whatever the command said. */
        run_lose(p, "the claim was lost as the command ended: the item was "
                    "not completed and may be delivered again");
    }
    /* 0 says "acked": a command that ended with 0 after zkr forwarded it
     * a signal was nacked, and zkr says why it stopped. */
    if (!ack && status == 0 && p->signo != 0)
        status = 128 + p->signo;
    if (p->lost) {
        lost_word(p);
        status = o->lost_code;
    }
    return status;
}

/* Acts on the signals already sent but not read yet (without waiting). */
static void read_signals(sup_t *p)
{
    struct pollfd fd = {p->sfd, POLLIN, 0};
    struct signalfd_siginfo si;

    while (poll(&fd, 1, 0) > 0 &&
           read(p->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        run_on_signal(p, (int)si.ssi_signo);
}

static int run_take(const cli_t *c, const opts_t *o)
{
    sup_t p;
    int rc, status;

    if ((status = run_command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0 || (status = make_queue(&p)) != 0)
        goto out;
    if (cli_timeout_arg(o->wait_ms) != o->wait_ms)
        p.wake_at = ct_now_ms() + o->wait_ms;
    if (o->batch > 1) {
        if ((p.batch = calloc((size_t)o->batch, sizeof(*p.batch))) == NULL) {
            status = cli_zk_error(c, ZKR_ENOMEM, "%s", o->path);
            goto out;
        }
        rc = zkr_workq_take_batch_async(
            p.q, o->batch, cli_timeout_arg(o->wait_ms), on_taken_batch, &p);
    } else {
        rc = zkr_workq_take_async(p.q, cli_timeout_arg(o->wait_ms), on_taken,
                                  &p);
    }
    if (rc == 0)
        await_grant(&p, &rc);
    if (!granted(&p, rc, &status))
        goto out;
    if (p.batch == NULL) {
        status = run_item(&p);
        goto out;
    }
    /* --batch: one run per item, in order, while they succeed; a signal
     * that came during the last one's ack stops it before the next. */
    for (int i = 0; i < p.nbatch; i++) {
        if (i > 0 && (read_signals(&p), p.signo != 0)) {
            status = 128 + p.signo;
            cli_info(c, "%s: %d item%s not run given back", o->path,
                     p.nbatch - i, p.nbatch - i > 1 ? "s" : "");
            break;
        }
        p.it = p.batch[i];
        p.batch[i] = NULL;
        status = run_item(&p);
        zkr_item_free(p.it); /* a claim still held is given back */
        p.it = NULL;
        if (status != 0 || p.signo != 0) {
            if (i + 1 < p.nbatch)
                cli_info(c, "%s: %d item%s not run given back", o->path,
                         p.nbatch - i - 1, p.nbatch - i - 1 > 1 ? "s" : "");
            break;
        }
    }
out:
    teardown(&p, status);
    return status;
}

/* --------------------------------------------------------------- elect */

/* Waits until we lead (0), or a signal (128+sig), or the end of our
 * participation (an exit status). A signal is looked at first: told to
 * stop, we never start the command, leader or not. */
static int await_leadership(sup_t *p)
{
    struct msg m;

    for (;;) {
        read_signals(p);
        if (p->signo != 0)
            return 128 + p->signo;
        /* Observes the leadership (and any loss before it): the epoch
         * is the grant the command will run under. */
        if (zkr_election_await(p->e, 0) == 0 &&
            zkr_election_epoch(p->e, &p->epoch) == 0)
            return 0;
        if (run_wait_event(p, &m) && m.kind == M_LEADER && m.b != 0) {
            return cli_zk_error(p->cli, m.b, "%s: election ended", p->o->path);
        }
    }
}

static int run_elect(const cli_t *c, const opts_t *o)
{
    sup_t p;
    zkr_sequencer_t q;
    char idbuf[300];
    const char *id = o->id;
    int rc, status;

    if ((status = run_command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0)
        goto out;
    if (id == NULL) {
        char host[256] = "localhost";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        snprintf(idbuf, sizeof(idbuf), "%s:%d", host, (int)getpid());
        id = idbuf;
    }
    /* The session policy, whatever --on-suspend says: see ownership(). */
    rc = zkr_election_new(&p.e, p.s, o->path, id, cli_acl(o->acl),
                          ZKR_POLICY_SESSION);
    if (rc != 0) {
        if (rc == ZBADARGUMENTS)
            status =
                cli_usage_error(o->sub, "invalid PATH '%s' or --id", o->path);
        else
            status = cli_zk_error(c, rc, "%s", o->path);
        goto out;
    }
    zkr_election_set_delay(p.e, lock_delay(o, p.s));
    zkr_election_set_delay_flags(p.e, o->delay_flags);
    zkr_election_set_listener(p.e, on_leader, &p);
    zkr_session_add_listener(p.s, on_session, &p);
    if ((rc = zkr_election_join(p.e)) != 0) {
        status = cli_zk_error(c, rc, "%s: cannot join", o->path);
        goto out;
    }
    for (;;) {
        if ((status = await_leadership(&p)) != 0)
            break;
        if (zkr_election_sequencer(p.e, &q) != 0) {
            struct msg m; /* lost again already: wait for news */
            run_wait_event(&p, &m);
            continue;
        }
        if ((status = cli_check_path_acl(c, p.s, o->path, o->acl)) != 0 ||
            (status = run_spawn(&p, &q, id)) != 0)
            break;
        run_supervise(&p);
        status = p.lost ? o->lost_code : exit_status_of(p.status);
        if (p.lost && !o->requeue)
            lost_word(&p);
        if (o->requeue && p.signo != 0)
            status = 128 + p.signo; /* only a signal ends a requeue loop */
        if (!o->requeue || p.signo != 0)
            break;
        /* Back of the queue: resign (if still leader) and join again. */
        cli_info(c, "%s: command ended (status %d); joining again", o->path,
                 status);
        zkr_election_leave(p.e);
        if ((rc = zkr_election_join(p.e)) != 0) {
            status = cli_zk_error(c, rc, "%s: cannot join again", o->path);
            break;
        }
    }
out:
    teardown(&p, status);
    return status;
}

/* ------------------------------------------------------- barrier enter */

static void on_dbarrier(int rc, void *data)
{
    post(data, M_ACQUIRED, rc, 0);
}

/* With --acl private, a PATH that exists already must not be open to
 * others (they could delete the participants' nodes or "ready"); one that
 * does not is made with the ACL asked for. 0 or an exit status. */
static int check_enter_acl(sup_t *p)
{
    struct Stat st;
    int rc;

    if (strcmp(p->o->acl, "open") == 0)
        return 0;
    rc = zoo_exists(zkr_session_handle(p->s), p->o->path, 0, &st);
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return cli_zk_error(p->cli, rc, "%s", p->o->path);
    return cli_check_path_acl(p->cli, p->s, p->o->path, p->o->acl);
}

static int make_dbarrier(sup_t *p)
{
    const opts_t *o = p->o;
    int rc;

    if ((rc = check_enter_acl(p)) != 0)
        return rc;
    rc = zkr_dbarrier_new(&p->d, p->s, o->path, (int)o->count, o->id,
                          cli_acl(o->acl));
    if (rc == ZBADARGUMENTS)
        return cli_usage_error(o->sub, "invalid PATH '%s' or --id", o->path);
    if (rc != 0)
        return cli_zk_error(p->cli, rc, "%s", o->path);
    zkr_session_add_listener(p->s, on_session, p); /* for await_connected */
    return 0;
}

static int connected(sup_t *p)
{
    zkr_state_t st = zkr_session_state(p->s);

    return st == ZKR_STATE_CONNECTED || st == ZKR_STATE_RECONNECTED;
}

/* A leave that looks once ends at once when it cannot look (zkr.h): after
 * a lost connection or session (the command ran on), it waits for one,
 * for at most a session timeout, so that the last one to leave deletes
 * "ready" still. A signal ends the wait. */
static void await_connected(sup_t *p)
{
    int64_t until = ct_now_ms() + p->cli->session_timeout_ms;
    struct msg m;

    p->wake_at = until;
    while (!connected(p) && p->signo == 0 && ct_now_ms() < until)
        run_wait_event(p, &m);
    p->wake_at = -1;
}

/* Enter (op ZKR_DBARRIER_ENTER) or leave, for ms (-1: no limit; longer
 * than the library's int: bounded here); a signal ends it
 * (ZKR_ECANCELED, the handle freed). The operation's code. */
static int dbarrier_op(sup_t *p, zkr_dbarrier_op_t op, int64_t ms)
{
    int rc;

    p->timed_out = 0;
    p->wake_at = cli_timeout_arg(ms) != ms ? ct_now_ms() + ms : -1;
    rc = zkr_dbarrier_async(p->d, op, cli_timeout_arg(ms), on_dbarrier, p);
    if (rc == 0)
        await_grant(p, &rc);
    p->wake_at = -1;
    return rc;
}

/* Leaves, after the command (or instead of it): with --wait-leave, and
 * no signal received, waits until no participant is left; otherwise
 * deletes its node and looks once. zkr's exit status, from status (the
 * command's, or zkr's if it did not run): a wait for the others that did
 * not end so (--wait-leave's time passed, a signal, an error) says so
 * only when status is 0, so that a command's failure is never hidden. */
static int leave_phase(sup_t *p, int status)
{
    const opts_t *o = p->o;
    int waits = o->wait_leave && p->signo == 0;
    int rc;

    if (o->wait_leave && !waits && status == 0)
        status = 128 + p->signo; /* told to stop: not waited */
    if (p->d == NULL) /* freed on a signal as the enter ended: node gone */
        return status;
    if (!waits && p->signo == 0)
        await_connected(p);
    rc = dbarrier_op(p, ZKR_DBARRIER_LEAVE, waits ? o->leave_ms : 0);
    if (rc == 0) {
        cli_info(p->cli, "%s: left%s", o->path,
                 waits ? "; every participant has left" : "");
    } else if (rc == ZKR_ETIMEDOUT && waits) {
        cli_info(p->cli,
                 "%s: left; participants still there after "
                 "--wait-leave's time",
                 o->path);
        if (status == 0)
            status = o->fail_code;
    } else if (rc == ZKR_ETIMEDOUT) {
        cli_info(p->cli, "%s: left; others are still in the phase", o->path);
    } else if (rc == ZKR_ECANCELED) {
        if (status == 0)
            status = 128 + p->signo;
    } else {
        int e = cli_zk_error(p->cli, rc, "%s: cannot leave", o->path);
        if (status == 0)
            status = e;
    }
    return status;
}

static int run_enter(const cli_t *c, const opts_t *o)
{
    sup_t p;
    int64_t sid;
    int rc, status;

    if ((status = run_command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0 || (status = make_dbarrier(&p)) != 0)
        goto out;
    rc = dbarrier_op(&p, ZKR_DBARRIER_ENTER, o->wait_ms);
    /* Not entered: nothing to leave (a timed-out enter deletes its node,
     * and so does a freed handle). */
    if (!granted(&p, rc, &status))
        goto out;
    sid = zkr_session_id(p.s);
    if (p.signo != 0) { /* entered just as we were told to stop */
        status = 128 + p.signo;
    } else if ((status = run_spawn(&p, NULL, NULL)) == 0) {
        run_supervise(&p);
        status = exit_status_of(p.status);
        if (zkr_session_id(p.s) != sid)
            cli_err("%s: the session was lost while the command ran: the "
                    "other participants counted this one as left then",
                    o->path);
    }
    status = leave_phase(&p, status);
out:
    teardown(&p, status);
    return status;
}

/* -------------------------------------------------------------- member */

static void on_group(int rc, zkr_group_t *g, void *data)
{
    (void)g;
    post(data, M_ACQUIRED, rc, 0);
}

static int make_group(sup_t *p)
{
    const opts_t *o = p->o;
    int rc;

    if ((rc = check_enter_acl(p)) != 0)
        return rc;
    rc = zkr_group_new(&p->grp, p->s, o->path, cli_acl(o->acl), NULL, NULL);
    if (rc == ZBADARGUMENTS)
        return cli_usage_error(o->sub, "invalid PATH '%s'", o->path);
    if (rc != 0)
        return cli_zk_error(p->cli, rc, "%s", o->path);
    return 0;
}

/* Joins (leave 0) or leaves, for ms (-1: no limit; longer than the
 * library's int: bounded here); a signal ends it (ZKR_ECANCELED, the
 * handle freed, which deletes the node). The operation's code. */
static int group_op(sup_t *p, int leave, int64_t ms)
{
    const opts_t *o = p->o;
    int rc;

    p->timed_out = 0;
    p->wake_at = cli_timeout_arg(ms) != ms ? ct_now_ms() + ms : -1;
    rc = zkr_group_async(p->grp, leave, leave ? NULL : o->id,
                         leave ? NULL : o->data, leave ? 0 : -1,
                         cli_timeout_arg(ms), on_group, p);
    if (rc == 0)
        await_grant(p, &rc);
    p->wake_at = -1;
    return rc;
}

/* Leaves after the command (or instead of it). The leave is confirmed
 * by the server within a session timeout, or it is not, and the node goes
 * with the session, which zkr closes as it exits: either way the member
 * is gone, and the exit status stays the command's. */
static void leave_group(sup_t *p)
{
    const opts_t *o = p->o;
    int rc;

    if (p->grp == NULL) /* freed on a signal as the join ended: node gone */
        return;
    rc = group_op(p, 1, zkr_session_timeout_ms(p->s));
    if (rc == 0)
        cli_info(p->cli, "%s: left", o->path);
    else if (rc == ZKR_ETIMEDOUT || rc == ZKR_ECANCELED)
        cli_info(p->cli,
                 "%s: the leave was not confirmed: the node goes as zkr "
                 "closes its session",
                 o->path);
    else
        cli_zk_error(p->cli, rc,
                     "%s: cannot leave (the node goes as zkr closes its "
                     "session)",
                     o->path);
}

static int run_member(const cli_t *c, const opts_t *o)
{
    sup_t p;
    int64_t sid;
    int rc, status;

    if ((status = run_command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0 || (status = make_group(&p)) != 0)
        goto out;
    rc = group_op(&p, 0, o->wait_ms);
    if (rc == ZBADARGUMENTS) { /* what the checks before could not tell */
        status = cli_usage_error(o->sub, "invalid --id or --data");
        goto out;
    }
    /* Not joined: nothing to leave (a join that timed out deletes its
     * node, and so does a freed handle). */
    if (!granted(&p, rc, &status))
        goto out;
    cli_info(c, "%s: joined", o->path);
    sid = zkr_session_id(p.s);
    if (p.signo != 0) { /* joined just as we were told to stop */
        status = 128 + p.signo;
    } else if ((status = run_spawn(&p, NULL, NULL)) == 0) {
        run_supervise(&p);
        status = exit_status_of(p.status);
        if (zkr_session_id(p.s) != sid)
            cli_info(c,
                     "%s: the session was lost while the command ran: the "
                     "member was made again on the new one",
                     o->path);
    }
    leave_group(&p);
out:
    teardown(&p, status);
    return status;
}

/* ------------------------------------------------------ entry points */

static int run(kind_t kind, const cli_t *c, int argc, char **argv)
{
    opts_t o;
    int rc = run_parse_opts(kind, argc, argv, &o);

    if (rc != 0)
        return rc < 0 ? 0 : rc; /* -1: --help printed */
    if (kind == KIND_DBARRIER)
        return run_enter(c, &o);
    if (kind == KIND_MEMBER)
        return run_member(c, &o);
    if (kind == KIND_QUEUE)
        return run_take(c, &o);
    return kind == KIND_ELECT ? run_elect(c, &o) : run_lock(c, &o);
}

int cli_lock(const cli_t *c, int argc, char **argv)
{
    return run(KIND_LOCK, c, argc, argv);
}

int cli_sem(const cli_t *c, int argc, char **argv)
{
    return run(KIND_SEM, c, argc, argv);
}

int cli_elect(const cli_t *c, int argc, char **argv)
{
    return run(KIND_ELECT, c, argc, argv);
}

int cli_queue_take(const cli_t *c, int argc, char **argv)
{
    return run(KIND_QUEUE, c, argc, argv);
}

int cli_barrier_enter(const cli_t *c, int argc, char **argv)
{
    return run(KIND_DBARRIER, c, argc, argv);
}

int cli_member(const cli_t *c, int argc, char **argv)
{
    return run(KIND_MEMBER, c, argc, argv);
}
