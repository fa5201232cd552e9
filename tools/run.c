/* zkr lock / sem / elect: run a command while holding a lock, a semaphore
 * permit or leadership, and stop it before anyone else can be granted.
 *
 * One thread (main) supervises; zkr's callbacks only write small messages
 * to a pipe. Signals are received through a signalfd, so SIGINT, SIGTERM,
 * SIGHUP and SIGCHLD are blocked in every thread (zkr's threads are
 * created after the mask is set and inherit it).
 *
 * The command runs in its own process group, so that a signal reaches
 * whatever it started. It is killed if zkr dies, even by SIGKILL: its
 * PR_SET_PDEATHSIG is SIGKILL, and a guard process holding one end of a
 * pipe kills the whole group when the other end (ours) closes without a
 * "disarm" byte.
 *
 * What ownership trouble does to the command (--on-suspend):
 *   term    SUSPENDED: SIGTERM to the group; the safe deadline (LOST):
 *           SIGKILL. zkr exits 4.
 *   stop    SUSPENDED: SIGSTOP; HELD again after re-verification: SIGCONT;
 *           LOST: SIGKILL.
 *   ignore  LOST only: SIGTERM, then SIGKILL after --grace.
 * zkr declares LOST at the session's safe deadline (last answered request
 * + 0.9 T), before the server can expire the session and grant anyone
 * else, so with term and stop the command is gone before a successor
 * starts. A holder whose node is deleted by someone else (zkr release
 * --force) is LOST within about 50 ms plus a round trip. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

typedef enum { KIND_LOCK, KIND_SEM, KIND_ELECT } kind_t;
typedef enum { SUSP_TERM, SUSP_STOP, SUSP_IGNORE } susp_t;
typedef enum { OWN_HELD, OWN_SUSPENDED, OWN_GONE } own_t;

typedef struct opts {
    kind_t kind;
    const char *sub;
    int wait_ms; /* -1 forever */
    int fail_code;
    int read;
    long permits;
    const char *id;
    const char *acl;
    susp_t susp;
    int grace_ms;
    int requeue;
    const char *path;
    char **cmd;
} opts_t;

/* Messages from zkr's event thread to the supervisor. */
enum { M_ACQUIRED, M_LOCK_STATE, M_LEADER, M_SESSION };
struct msg {
    int kind, a, b;
};

typedef struct sup {
    const cli_t *cli;
    const opts_t *o;
    zkr_session_t *s;
    zkr_lock_t *l;
    zkr_election_t *e;
    int ev[2];       /* message pipe */
    int sfd;         /* signalfd */
    pid_t child;     /* the command (and its process group), or -1 */
    pid_t guard;     /* the guard process, or -1 */
    int guard_fd;    /* our end of the guard's pipe, or -1 */
    int stopped;     /* we sent SIGSTOP and no SIGCONT yet */
    int softened;    /* acted on SUSPENDED during this run */
    int hard;        /* acted on a loss during this run */
    int lost;        /* ownership was lost (or the command was stopped
                        because of a suspension) during this run */
    int64_t kill_at; /* monotonic ms: SIGKILL the group if still running */
    int signo;       /* last SIGINT/SIGTERM/SIGHUP received */
    int status;      /* the command's wait status */
} sup_t;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------- options */

static int parse_opts(kind_t kind, int argc, char **argv, opts_t *o)
{
    enum { O_READ = 256, O_ID, O_ACL, O_SUSPEND, O_GRACE, O_REQUEUE };
    static const struct option lopts[] = {
        {"wait", required_argument, NULL, 'w'},
        {"nonblock", no_argument, NULL, 'n'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"permits", required_argument, NULL, 'c'},
        {"read", no_argument, NULL, O_READ},
        {"id", required_argument, NULL, O_ID},
        {"acl", required_argument, NULL, O_ACL},
        {"on-suspend", required_argument, NULL, O_SUSPEND},
        {"grace", required_argument, NULL, O_GRACE},
        {"requeue", no_argument, NULL, O_REQUEUE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sub = argv[0];
    int opt;
    long v;

    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->sub = sub;
    o->wait_ms = -1;
    o->fail_code = CLI_EXIT_NOT_ACQUIRED;
    o->grace_ms = 5000;
    o->acl = "open";
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+w:nE:c:h", lopts, NULL)) != -1) {
        if (kind == KIND_ELECT && (opt == 'w' || opt == 'n' || opt == 'E'))
            return cli_usage_error(sub, "-%c is not an option of elect", opt);
        switch (opt) {
        case 'w':
            if (cli_parse_seconds(optarg, &o->wait_ms) != 0)
                return cli_usage_error(sub, "invalid -w '%s'", optarg);
            break;
        case 'n':
            o->wait_ms = 0;
            break;
        case 'E':
            if (cli_parse_int(optarg, 0, 255, &v) != 0)
                return cli_usage_error(sub, "-E wants 0..255, not '%s'",
                                       optarg);
            o->fail_code = (int)v;
            break;
        case 'c':
            if (kind != KIND_SEM)
                return cli_usage_error(sub, "-c is an option of sem");
            if (cli_parse_int(optarg, 1, 100000, &o->permits) != 0)
                return cli_usage_error(sub, "-c wants 1..100000, not '%s'",
                                       optarg);
            break;
        case O_READ:
            if (kind != KIND_LOCK)
                return cli_usage_error(sub, "--read is an option of lock");
            o->read = 1;
            break;
        case O_ID:
            o->id = optarg;
            break;
        case O_ACL:
            if (cli_acl(optarg) == NULL)
                return cli_usage_error(sub, "--acl wants open or private");
            o->acl = optarg;
            break;
        case O_SUSPEND:
            if (strcmp(optarg, "term") == 0)
                o->susp = SUSP_TERM;
            else if (strcmp(optarg, "stop") == 0)
                o->susp = SUSP_STOP;
            else if (strcmp(optarg, "ignore") == 0)
                o->susp = SUSP_IGNORE;
            else
                return cli_usage_error(
                    sub, "--on-suspend wants term, stop or ignore");
            break;
        case O_GRACE:
            if (cli_parse_seconds(optarg, &o->grace_ms) != 0)
                return cli_usage_error(sub, "invalid --grace '%s'", optarg);
            break;
        case O_REQUEUE:
            if (kind != KIND_ELECT)
                return cli_usage_error(sub, "--requeue is an option of elect");
            o->requeue = 1;
            break;
        case 'h':
            printf("usage: zkr %s%s [options] PATH [--] COMMAND [ARG...]\n"
                   "(see zkr --help and zkr(1))\n",
                   sub, kind == KIND_SEM ? " -c PERMITS" : "");
            return -1;
        default:
            return cli_usage_error(sub, "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (kind == KIND_SEM && o->permits == 0)
        return cli_usage_error(sub, "-c PERMITS is required");
    if (optind >= argc)
        return cli_usage_error(sub, "missing PATH");
    o->path = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc)
        return cli_usage_error(sub, "missing COMMAND");
    o->cmd = argv + optind;
    return 0;
}

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

static void on_lock_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
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

/* ------------------------------------------------------------ command */

/* Finds COMMAND like execvp() would, before forking. NULL with *why set
 * to CLI_EXIT_NOTFOUND or CLI_EXIT_NOEXEC. */
static char *resolve(const char *cmd, int *why)
{
    const char *path = getenv("PATH");
    int seen = 0;

    if (strchr(cmd, '/') != NULL) {
        if (access(cmd, X_OK) == 0)
            return strdup(cmd);
        *why = errno == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
        return NULL;
    }
    if (path == NULL || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        char *full = NULL;
        struct stat st;
        if (asprintf(&full, "%.*s/%s", (int)(n != 0 ? n : 1),
                     n != 0 ? path : ".", cmd) < 0)
            break;
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(full, X_OK) == 0)
                return full;
            seen = 1;
        }
        free(full);
        path += n;
        if (*path == ':')
            path++;
    }
    *why = seen ? CLI_EXIT_NOEXEC : CLI_EXIT_NOTFOUND;
    return NULL;
}

static const char *const our_vars[] = {
    "ZKR_FENCE",      "ZKR_LOCK_PATH", "ZKR_LOCK_NODE",
    "ZKR_SESSION_ID", "ZKR_SEQUENCER", "ZKR_LEADER_ID",
};

/* The command's environment: environ without our variables, then ours. */
typedef struct envp {
    char **env;
    char *ours[6];
    int n_ours;
} envp_t;

static void free_env(envp_t *e)
{
    for (int i = 0; i < e->n_ours; i++)
        free(e->ours[i]);
    free(e->env);
    memset(e, 0, sizeof(*e));
}

static int build_env(envp_t *e, const zkr_sequencer_t *q, const char *leader_id)
{
    char seq[ZKR_SEQUENCER_MAX];
    size_t n = 0, k = 0;

    memset(e, 0, sizeof(*e));
    while (environ[n] != NULL)
        n++;
    if ((e->env = calloc(n + 7, sizeof(*e->env))) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int ours = 0;
        for (size_t j = 0; j < sizeof(our_vars) / sizeof(our_vars[0]); j++) {
            size_t len = strlen(our_vars[j]);
            if (strncmp(environ[i], our_vars[j], len) == 0 &&
                environ[i][len] == '=')
                ours = 1;
        }
        if (!ours)
            e->env[k++] = environ[i];
    }
    if (zkr_sequencer_format(q, seq, sizeof(seq)) < 0)
        seq[0] = '\0';
    if (asprintf(&e->ours[e->n_ours++], "ZKR_FENCE=%" PRId64, q->token) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_LOCK_PATH=%s", q->path) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_LOCK_NODE=%s", q->node) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_SESSION_ID=0x%" PRIx64,
                 (uint64_t)q->session_id) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_SEQUENCER=%s", seq) < 0 ||
        (leader_id != NULL &&
         asprintf(&e->ours[e->n_ours++], "ZKR_LEADER_ID=%s", leader_id) < 0)) {
        e->ours[--e->n_ours] = NULL; /* asprintf left it undefined */
        free_env(e);
        return -1;
    }
    for (int i = 0; i < e->n_ours; i++)
        e->env[k++] = e->ours[i];
    e->env[k] = NULL;
    return 0;
}

/* The guard: waits on its pipe; EOF without the disarm byte means zkr is
 * gone, so the command's group is killed. Only async-signal-safe calls
 * (this runs in a fork of a multithreaded process). */
static void guard_main(int fd, pid_t group)
{
    char b;
    ssize_t n;

    do
        n = read(fd, &b, 1);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        kill(-group, SIGKILL);
    _exit(0);
}

/* Starts the command with the grant's environment. Returns 0, or an exit
 * status (command not found, ...) with nothing left running. */
static int spawn(sup_t *p, const zkr_sequencer_t *q, const char *leader_id)
{
    int go[2] = {-1, -1}, err[2] = {-1, -1}, gp[2] = {-1, -1}, why = 0;
    pid_t parent = getpid(), pid, g;
    char *file = resolve(p->o->cmd[0], &why);
    envp_t env = {0};
    sigset_t none;
    int e = 0;
    ssize_t n;

    if (file == NULL) {
        cli_err("%s: %s", p->o->cmd[0],
                why == CLI_EXIT_NOTFOUND ? "command not found"
                                         : "permission denied");
        return why;
    }
    if (build_env(&env, q, leader_id) != 0 || pipe2(go, O_CLOEXEC) != 0 ||
        pipe2(err, O_CLOEXEC) != 0 || pipe2(gp, O_CLOEXEC) != 0) {
        cli_err("cannot start %s: %s", p->o->cmd[0], strerror(errno));
        why = CLI_EXIT_ERROR;
        goto out;
    }
    sigemptyset(&none);
    if ((pid = fork()) < 0) {
        cli_err("fork: %s", strerror(errno));
        why = CLI_EXIT_ERROR;
        goto out;
    }
    if (pid == 0) {
        char b;
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(CLI_EXIT_ERROR);
        close(go[1]);
        /* Start only once the guard is in place. */
        while (read(go[0], &b, 1) < 0 && errno == EINTR)
            ;
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(file, p->o->cmd, env.env);
        e = errno;
        n = write(err[1], &e, sizeof(e));
        (void)n;
        _exit(CLI_EXIT_NOTFOUND);
    }
    setpgid(pid, pid); /* also here: no race with the guard's kill */
    if ((g = fork()) == 0) {
        int keep = gp[0];
        /* Keep only the pipe: no copy of zkr's ZooKeeper socket. */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != keep)
                close(fd);
        guard_main(keep, pid);
    }
    close(gp[0]);
    gp[0] = -1;
    if (g < 0) {
        cli_err("fork: %s", strerror(errno));
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        why = CLI_EXIT_ERROR;
        goto out;
    }
    p->guard = g;
    p->guard_fd = gp[1];
    gp[1] = -1;
    close(go[1]); /* go */
    go[1] = -1;
    close(err[1]);
    err[1] = -1;
    do
        n = read(err[0], &e, sizeof(e));
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(e)) {
        cli_err("%s: %s", p->o->cmd[0], strerror(e));
        waitpid(pid, NULL, 0);
        why = e == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
        goto out;
    }
    p->child = pid;
    p->stopped = p->softened = p->hard = p->lost = 0;
    p->kill_at = -1;
    cli_info(p->cli, "%s %s granted (token %" PRId64 "); started %s, pid %d",
             p->o->path, q->node, q->token, p->o->cmd[0], (int)pid);
out:
    for (int i = 0; i < 2; i++) {
        if (go[i] >= 0)
            close(go[i]);
        if (err[i] >= 0)
            close(err[i]);
        if (gp[i] >= 0)
            close(gp[i]);
    }
    free(file);
    free_env(&env);
    return why;
}

static void signal_group(sup_t *p, int sig)
{
    if (p->child > 0)
        kill(-p->child, sig);
}

/* The command ended: disarm the guard. */
static void disarm(sup_t *p)
{
    if (p->guard_fd >= 0) {
        char b = 'd';
        ssize_t n = write(p->guard_fd, &b, 1);
        (void)n;
        close(p->guard_fd);
        p->guard_fd = -1;
    }
    if (p->guard > 0) {
        waitpid(p->guard, NULL, 0);
        p->guard = -1;
    }
}

/* Reaps the command if it ended. 1 if it did. */
static int reap(sup_t *p)
{
    int st;
    pid_t r;

    if (p->child <= 0)
        return 0;
    do
        r = waitpid(p->child, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r != p->child)
        return 0;
    p->status = st;
    p->child = -1;
    disarm(p);
    return 1;
}

static int exit_status_of(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return CLI_EXIT_ERROR;
}

/* ---------------------------------------------------------- ownership */

static own_t ownership(sup_t *p)
{
    if (p->e != NULL) {
        if (zkr_election_is_leader(p->e))
            return OWN_HELD;
        return zkr_session_state(p->s) == ZKR_STATE_SUSPENDED ? OWN_SUSPENDED
                                                              : OWN_GONE;
    }
    switch (zkr_lock_state(p->l)) {
    case ZKR_LOCK_HELD:
        return OWN_HELD;
    case ZKR_LOCK_SUSPENDED:
        return OWN_SUSPENDED;
    default:
        return OWN_GONE;
    }
}

/* Applies --on-suspend to the current ownership while the command runs. */
static void react(sup_t *p)
{
    own_t own;

    if (p->child <= 0)
        return;
    own = ownership(p);
    if (own == OWN_HELD) {
        if (p->stopped) {
            signal_group(p, SIGCONT);
            p->stopped = 0;
            cli_info(p->cli, "ownership re-verified: SIGCONT");
        }
        if (!p->hard)
            p->kill_at = -1;
    } else if (own == OWN_SUSPENDED && !p->softened && !p->hard) {
        int64_t valid = zkr_session_valid_ms(p->s);
        p->softened = 1;
        if (p->o->susp == SUSP_IGNORE)
            return;
        if (p->o->susp == SUSP_TERM) {
            signal_group(p, SIGTERM);
            p->lost = 1;
            cli_info(p->cli,
                     "connection suspended: SIGTERM, SIGKILL in "
                     "%" PRId64 " ms unless gone",
                     valid);
        } else {
            signal_group(p, SIGSTOP);
            p->stopped = 1;
            cli_info(p->cli, "connection suspended: SIGSTOP");
        }
        p->kill_at = now_ms() + (valid > 0 ? valid : 0);
    } else if (own == OWN_GONE && !p->hard) {
        p->hard = 1;
        p->lost = 1;
        if (p->o->susp == SUSP_IGNORE) {
            signal_group(p, SIGTERM);
            p->kill_at = now_ms() + p->o->grace_ms;
            cli_err("ownership of %s lost: SIGTERM to the command, SIGKILL "
                    "in %d ms",
                    p->o->path, p->o->grace_ms);
        } else {
            signal_group(p, SIGKILL);
            p->kill_at = -1;
            cli_err("ownership of %s lost: command killed", p->o->path);
        }
    }
}

/* ---------------------------------------------------------- main loop */

/* Waits for the next message or signal (or the kill deadline) and handles
 * signals and the deadline itself. Returns 1 with *m filled for a
 * message, 0 otherwise. */
static int wait_event(sup_t *p, struct msg *m)
{
    struct pollfd fds[2] = {{p->ev[0], POLLIN, 0}, {p->sfd, POLLIN, 0}};
    int timeout = -1;

    if (p->kill_at >= 0 && p->child > 0) {
        int64_t left = p->kill_at - now_ms();
        timeout = left > 0 ? (int)left : 0;
    }
    if (poll(fds, 2, timeout) < 0 && errno != EINTR)
        return 0;
    if (p->kill_at >= 0 && p->child > 0 && now_ms() >= p->kill_at) {
        signal_group(p, SIGKILL);
        p->kill_at = -1;
        p->lost = 1;
        cli_err("ownership of %s not re-verified in time: command killed",
                p->o->path);
    }
    if (fds[1].revents & POLLIN) {
        struct signalfd_siginfo si;
        if (read(p->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
            si.ssi_signo != SIGCHLD) {
            p->signo = (int)si.ssi_signo;
            if (p->child > 0)
                signal_group(p, p->signo);
        }
    }
    if (fds[0].revents & POLLIN) {
        if (read(p->ev[0], m, sizeof(*m)) == (ssize_t)sizeof(*m))
            return 1;
    }
    return 0;
}

/* Runs the command until it ends, reacting to ownership changes. */
static void supervise(sup_t *p)
{
    while (!reap(p)) {
        struct msg m;
        wait_event(p, &m);
        react(p);
    }
}

static int setup(sup_t *p, const cli_t *c, const opts_t *o)
{
    sigset_t set;

    memset(p, 0, sizeof(*p));
    p->cli = c;
    p->o = o;
    p->child = p->guard = -1;
    p->guard_fd = -1;
    p->kill_at = -1;
    p->ev[0] = p->ev[1] = p->sfd = -1;
    if (strcmp(o->acl, "private") == 0 && c->auth == NULL)
        return cli_usage_error(o->sub, "--acl private needs --auth");
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0 ||
        (p->sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
        pipe2(p->ev, O_CLOEXEC) != 0) {
        cli_err("setup: %s", strerror(errno));
        return CLI_EXIT_ERROR;
    }
    return cli_open_session(c, &p->s);
}

static void teardown(sup_t *p)
{
    zkr_lock_free(p->l);
    zkr_election_free(p->e);
    if (p->s != NULL) {
        zkr_session_remove_listener(p->s, on_session, p);
        zkr_session_free(p->s);
    }
    if (p->sfd >= 0)
        close(p->sfd);
    if (p->ev[0] >= 0) {
        close(p->ev[0]);
        close(p->ev[1]);
    }
}

/* ---------------------------------------------------------- lock, sem */

static int make_lock(sup_t *p)
{
    const opts_t *o = p->o;
    const struct ACL_vector *acl = cli_acl(o->acl);
    zkr_lock_t *w = NULL;
    int rc;

    if (o->kind == KIND_SEM)
        rc = zkr_semaphore_new(&p->l, p->s, o->path, (int)o->permits, o->id,
                               acl);
    else if (o->read)
        rc = zkr_rwlock_new(&p->l, &w, p->s, o->path, o->id, acl);
    else
        rc = zkr_lock_new(&p->l, p->s, o->path, o->id, acl);
    zkr_lock_free(w);
    if (rc == ZBADARGUMENTS) {
        cli_usage_error(o->sub, "invalid PATH '%s' or --id", o->path);
        return CLI_EXIT_ERROR;
    }
    if (rc != 0) {
        cli_err("%s: %s", o->path, zkr_strerror(rc));
        return CLI_EXIT_ERROR;
    }
    zkr_lock_set_listener(p->l, on_lock_state, p);
    zkr_session_add_listener(p->s, on_session, p);
    return 0;
}

static const char *acquire_error(int rc)
{
    switch (rc) {
    case ZNOAUTH:
        return "permission denied by the path's ACL (see --auth)";
    case ZKR_ELIMIT:
        return "the path is in use with another permit count";
    default:
        return zkr_strerror(rc);
    }
}

/* Waits for the acquire's completion, canceling it on a signal. */
static int await_grant(sup_t *p, int *rc)
{
    struct msg m;

    for (;;) {
        int sig = p->signo;
        if (wait_event(p, &m) && m.kind == M_ACQUIRED) {
            *rc = m.a;
            return 0;
        }
        if (p->signo != 0 && sig == 0)
            zkr_lock_cancel(p->l);
    }
}

static int run_lock(const cli_t *c, const opts_t *o)
{
    sup_t p;
    zkr_sequencer_t q;
    int rc, status;

    if ((status = setup(&p, c, o)) != 0 || (status = make_lock(&p)) != 0)
        goto out;
    if ((rc = zkr_lock_acquire_async(p.l, o->wait_ms, on_acquired, &p)) == 0)
        await_grant(&p, &rc);
    if (rc == ZKR_EBUSY || rc == ZKR_ETIMEDOUT) {
        cli_info(c, "%s: %s", o->path,
                 rc == ZKR_EBUSY ? "held by another contender" : "timed out");
        status = o->fail_code;
        goto out;
    }
    if (rc == ZKR_ECANCELED) {
        status = 128 + p.signo;
        goto out;
    }
    if (rc != 0) {
        cli_err("%s: cannot acquire: %s", o->path, acquire_error(rc));
        status = CLI_EXIT_ERROR;
        goto out;
    }
    if (p.signo != 0) { /* granted just as we were told to stop */
        zkr_lock_release(p.l);
        status = 128 + p.signo;
        goto out;
    }
    if ((rc = zkr_lock_sequencer(p.l, &q)) != 0) {
        /* Lost between the grant and now. */
        cli_err("ownership of %s lost before the command started", o->path);
        status = CLI_EXIT_LOST;
        goto out;
    }
    if ((status = spawn(&p, &q, NULL)) != 0) {
        zkr_lock_release(p.l);
        goto out;
    }
    react(&p); /* a suspension may have come before the command started */
    supervise(&p);
    status = exit_status_of(p.status);
    if (zkr_lock_state(p.l) == ZKR_LOCK_HELD) {
        rc = zkr_lock_release(p.l);
        if (rc == ZKR_ELOST)
            p.lost = 1;
    }
    if (p.lost) {
        cli_info(c, "%s: ownership was lost while the command ran", o->path);
        status = CLI_EXIT_LOST;
    }
out:
    teardown(&p);
    return status;
}

/* --------------------------------------------------------------- elect */

/* Waits until we lead (0), or a signal (128+sig), or the end of our
 * participation (an exit status). */
static int await_leadership(sup_t *p)
{
    struct msg m;

    for (;;) {
        if (zkr_election_is_leader(p->e))
            return 0;
        if (p->signo != 0)
            return 128 + p->signo;
        if (wait_event(p, &m) && m.kind == M_LEADER && m.b != 0) {
            cli_err("%s: election ended: %s", p->o->path, acquire_error(m.b));
            return CLI_EXIT_ERROR;
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

    if ((status = setup(&p, c, o)) != 0)
        goto out;
    if (id == NULL) {
        char host[256] = "localhost";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        snprintf(idbuf, sizeof(idbuf), "%s:%d", host, (int)getpid());
        id = idbuf;
    }
    rc = zkr_election_new(&p.e, p.s, o->path, id, cli_acl(o->acl),
                          o->susp == SUSP_IGNORE ? ZKR_POLICY_SESSION
                                                 : ZKR_POLICY_SUSPEND);
    if (rc != 0) {
        if (rc == ZBADARGUMENTS)
            cli_usage_error(o->sub, "invalid PATH '%s' or --id", o->path);
        else
            cli_err("%s: %s", o->path, zkr_strerror(rc));
        status = CLI_EXIT_ERROR;
        goto out;
    }
    zkr_election_set_listener(p.e, on_leader, &p);
    zkr_session_add_listener(p.s, on_session, &p);
    if ((rc = zkr_election_join(p.e)) != 0) {
        cli_err("%s: cannot join: %s", o->path, zkr_strerror(rc));
        status = CLI_EXIT_ERROR;
        goto out;
    }
    for (;;) {
        if ((status = await_leadership(&p)) != 0)
            break;
        if (zkr_election_sequencer(p.e, &q) != 0) {
            struct msg m; /* lost again already: wait for news */
            wait_event(&p, &m);
            continue;
        }
        if ((status = spawn(&p, &q, id)) != 0)
            break;
        react(&p);
        supervise(&p);
        status = p.lost ? CLI_EXIT_LOST : exit_status_of(p.status);
        if (!o->requeue || p.signo != 0)
            break;
        /* Back of the queue: resign (if still leader) and join again. */
        cli_info(c, "%s: command ended (status %d); joining again", o->path,
                 status);
        zkr_election_leave(p.e);
        if ((rc = zkr_election_join(p.e)) != 0) {
            cli_err("%s: cannot join again: %s", o->path, zkr_strerror(rc));
            status = CLI_EXIT_ERROR;
            break;
        }
    }
out:
    teardown(&p);
    return status;
}

/* ------------------------------------------------------ entry points */

static int run(kind_t kind, const cli_t *c, int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts(kind, argc, argv, &o);

    if (rc != 0)
        return rc < 0 ? 0 : rc; /* -1: --help printed */
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
