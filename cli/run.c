/* zkr lock / sem / elect / queue take: run a command while holding a lock,
 * a semaphore permit, leadership or the claim of a work queue's item, and
 * stop it before anyone else can be granted.
 *
 * A work queue's claim is contained exactly as a lock is: it is an
 * exclusive lock whose directory is the item's node, with the same states
 * (HELD, SUSPENDED, LOST at the safe deadline), so the same supervisor
 * runs the command; only the end differs: the command's exit status acks
 * (0) or nacks the item, once every process of the command is gone.
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
 * stop_self()).
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
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

typedef enum { KIND_LOCK, KIND_SEM, KIND_ELECT, KIND_QUEUE } kind_t;
typedef enum { SUSP_TERM, SUSP_STOP, SUSP_IGNORE } susp_t;
typedef enum { OWN_HELD, OWN_SUSPENDED, OWN_GONE } own_t;

typedef struct opts {
    kind_t kind;
    const char *sub;
    int64_t wait_ms; /* -1 forever */
    int fail_code;
    int lost_code;   /* --lost-exit-code, default CLI_EXIT_LOST */
    int read, write; /* --read, --write: the sides of a read/write lock */
    long permits;
    const char *id;
    const char *acl;
    susp_t susp;
    int64_t grace_ms;
    int requeue;
    const char *path;
    const char *metrics_file; /* --metrics-file, or NULL */
    int64_t delay_ms;         /* --lock-delay; -1: the session timeout */
    unsigned delay_flags;     /* --trust-foreign-release */
    zkr_nack_where_t nack;    /* queue take: --nack front|back */
    long max_deliveries;      /* queue take: --max-deliveries, 0 none */
    const char *dead_path;    /* queue take: --dead, or NULL */
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
    zkr_workq_t *q;  /* queue take: the queue */
    zkr_item_t *it;  /* queue take: the item taken, once taken */
    int ev[2];       /* message pipe */
    int sfd;         /* signalfd */
    int tty;         /* the controlling terminal, or -1 */
    int handed;      /* the command's group is the terminal's foreground */
    ct_t g;          /* the guard and the command */
    int running;     /* a command's tree may still have processes */
    int exited;      /* the command's first process ended (status set) */
    int orphaned;    /* the guard died: we kill and reap the tree */
    int killing;     /* SIGKILL the tree until it is gone */
    int stopped;     /* we sent SIGSTOP and no SIGCONT yet */
    int softened;    /* acted on the current SUSPENDED */
    int hard;        /* acted on a loss during this run */
    int lost;        /* ownership was lost (or the command was stopped
                        because of a suspension) during this run */
    const char *why; /* what lost it first, for the last word */
    int64_t kill_at; /* CLOCK_BOOTTIME ms: SIGKILL the tree if still there */
    int64_t beat_at; /* next heartbeat to the guard */
    int64_t wake_at; /* -w beyond the library's int: our own deadline */
    int64_t jc_at;   /* a job-control stop forwarded to the command: stop
                        the tree ourselves if it has not stopped by then */
    int jc_sig;      /* that stop's signal */
    int timed_out;   /* we canceled the acquire at wake_at */
    int64_t epoch;   /* elect: the leadership the command runs under */
    int signo;       /* last SIGINT/SIGTERM/SIGHUP received */
    int status;      /* the command's wait status */
} sup_t;

static int64_t now_ms(void)
{
    return ct_now_ms();
}

/* ------------------------------------------------------------- options */

/* zkr queue take --help. */
static void help_take(void)
{
    fputs("usage: zkr queue take [options] PATH [--] COMMAND [ARG...]\n"
          "       zkr queue take [options] PATH -c STRING\n\n"
          "Takes the next item of the work queue PATH (claimed by this "
          "session) and runs\n"
          "COMMAND with the item's data on its standard input and "
          "ZKR_FENCE,\n"
          "ZKR_QUEUE_ITEM, ZKR_QUEUE_DELIVERY in its environment. Once every "
          "process of\n"
          "the command is gone: exit 0 acks the item (done, never delivered "
          "again), any\n"
          "other end nacks it (given back). The command is stopped before "
          "the claim can\n"
          "pass to another consumer, as in zkr lock.\n\n"
          "  -c, --command STRING      run STRING with sh -c instead of "
          "COMMAND\n"
          "  -w, --wait, --timeout SECONDS\n"
          "                            give up after SECONDS without an "
          "item (fractions\n"
          "                            allowed; default: wait forever)\n"
          "  -n, --nonblock            only an item available now\n"
          "  -E, --conflict-exit-code CODE\n"
          "                            exit CODE when no item came "
          "(default 1)\n"
          "      --nack front|back     where a failed item goes back: "
          "where it was\n"
          "                            (front, default) or the back of its "
          "level\n"
          "      --max-deliveries N    an item delivered N times that comes "
          "back goes to\n"
          "                            the dead-letter path instead "
          "(1..1000000)\n"
          "      --dead PATH           the dead-letter path (default "
          "PATH/dead)\n"
          "      --id ID               identifier stored in the claim "
          "(default host:pid)\n"
          "      --acl open|private    ACL of the nodes (private needs "
          "credentials)\n"
          "      --on-suspend term|stop|ignore\n"
          "                            what a connection loss does to the "
          "command\n"
          "      --grace SECONDS       SIGTERM to SIGKILL delay (ignore; "
          "default 5)\n"
          "      --lost-exit-code CODE exit status when the claim is lost "
          "(default 4)\n"
          "      --metrics-file FILE   write the session's metrics there at "
          "exit\n"
          "  -h, --help                this help\n\n"
          "Exit status: the command's (the item was acked if 0, nacked "
          "otherwise); 1 (-E)\n"
          "no item; 4 the claim was lost (the ack or nack found it gone: "
          "another consumer\n"
          "may get the item); 64 usage; 69 no server or session; 71 other "
          "error; 77\n"
          "permission denied; 126/127 COMMAND not executable/not found "
          "(found out\n"
          "before any item is taken, but for what only exec can tell: "
          "see zkr(1)).\n"
          "See zkr(1).\n",
          stdout);
}

/* zkr SUBCOMMAND --help: every option of lock, sem and elect. */
static void help(kind_t kind)
{
    static const char *const names[] = {"lock", "sem", "elect"};

    if (kind == KIND_QUEUE) {
        help_take();
        return;
    }

    printf("usage: zkr %s%s [options] PATH [--] COMMAND [ARG...]\n"
           "       zkr %s%s [options] PATH %s STRING\n\n",
           names[kind], kind == KIND_SEM ? " --permits N" : "", names[kind],
           kind == KIND_SEM ? " --permits N" : "",
           kind == KIND_SEM ? "--command" : "-c");
    if (kind == KIND_SEM)
        fputs("  -c, --permits N           N permits (1..100000), required; "
              "in sem, -c is\n"
              "                            the permit count, not a command\n"
              "      --command STRING      run STRING with sh -c\n",
              stdout);
    else
        fputs("  -c, --command STRING      run STRING with sh -c instead of "
              "COMMAND\n",
              stdout);
    if (kind != KIND_ELECT)
        fputs("  -w, --wait, --timeout SECONDS\n"
              "                            give up after SECONDS (fractions "
              "allowed)\n"
              "  -n, --nonblock            give up at once if not granted\n"
              "  -E, --conflict-exit-code CODE\n"
              "                            exit CODE when not acquired "
              "(default 1)\n",
              stdout);
    if (kind == KIND_LOCK)
        fputs("      --read, --shared      the read side of a read/write lock\n"
              "      --write               the write side of a read/write "
              "lock\n",
              stdout);
    fputs("      --id ID               identifier stored in the node "
          "(default host:pid)\n"
          "      --acl open|private    ACL of the nodes (private needs "
          "credentials)\n"
          "      --on-suspend term|stop|ignore\n"
          "                            what a connection loss does to the "
          "command\n"
          "      --grace SECONDS       SIGTERM to SIGKILL delay (ignore; "
          "default 5)\n"
          "      --lost-exit-code CODE exit status when ownership is lost "
          "(default 4)\n"
          "      --metrics-file FILE   write the session's metrics there at "
          "exit\n"
          "      --lock-delay SECONDS  after a holder died (no clean "
          "release), wait this\n"
          "                            long before taking over (default: "
          "the session\n"
          "                            timeout; 0 off)\n"
          "      --trust-foreign-release\n"
          "                            a kazoo, contrib or go-zookeeper "
          "node that goes\n"
          "                            was released: no lock-delay\n",
          stdout);
    if (kind == KIND_ELECT)
        fputs("      --requeue             run again each time leadership "
              "comes back\n",
              stdout);
    fputs("  -h, --help                this help\n\n"
          "Global options (before the subcommand): see zkr --help. Exit "
          "status: the\n"
          "command's; 1 (-E) not acquired; 4 ownership lost; 64 usage; 69 "
          "no server or\n"
          "session; 71 other error; 77 permission denied. See zkr(1).\n",
          stdout);
}

/* The argv of `sh -c STRING`. */
static char *sh_argv[4] = {"sh", "-c", NULL, NULL};

/* The subcommands' long options; the values above 255 have no letter. */
enum {
    O_READ = 256,
    O_ID,
    O_ACL,
    O_SUSPEND,
    O_GRACE,
    O_REQUEUE,
    O_LOST,
    O_WRITE,
    O_PERMITS,
    O_COMMAND,
    O_METRICS,
    O_DELAY,
    O_TRUST,
    O_NACK,
    O_MAXDEL,
    O_DEAD
};
static const struct option lopts[] = {
    {"wait", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 'w'},
    {"nonblock", no_argument, NULL, 'n'},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"permits", required_argument, NULL, O_PERMITS},
    {"command", required_argument, NULL, O_COMMAND},
    {"read", no_argument, NULL, O_READ},
    {"shared", no_argument, NULL, O_READ},
    {"write", no_argument, NULL, O_WRITE},
    {"id", required_argument, NULL, O_ID},
    {"acl", required_argument, NULL, O_ACL},
    {"on-suspend", required_argument, NULL, O_SUSPEND},
    {"grace", required_argument, NULL, O_GRACE},
    {"requeue", no_argument, NULL, O_REQUEUE},
    {"lost-exit-code", required_argument, NULL, O_LOST},
    {"metrics-file", required_argument, NULL, O_METRICS},
    {"lock-delay", required_argument, NULL, O_DELAY},
    {"trust-foreign-release", no_argument, NULL, O_TRUST},
    {"nack", required_argument, NULL, O_NACK},
    {"max-deliveries", required_argument, NULL, O_MAXDEL},
    {"dead", required_argument, NULL, O_DEAD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void opts_defaults(opts_t *o, kind_t kind, const char *sub)
{
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->sub = sub;
    o->wait_ms = -1;
    o->fail_code = CLI_EXIT_NOT_ACQUIRED;
    o->lost_code = CLI_EXIT_LOST;
    o->grace_ms = 5000;
    o->acl = "open";
    o->delay_ms = -1;
}

/* The options of queue take alone: --nack, --max-deliveries, --dead. */
static int queue_opt(opts_t *o, int opt, const char *arg)
{
    if (o->kind != KIND_QUEUE)
        return cli_usage_error(o->sub, "%s is an option of queue take",
                               opt == O_NACK     ? "--nack"
                               : opt == O_MAXDEL ? "--max-deliveries"
                                                 : "--dead");
    if (opt == O_DEAD) {
        o->dead_path = arg;
    } else if (opt == O_MAXDEL) {
        if (cli_parse_int(arg, 1, 1000000, &o->max_deliveries) != 0)
            return cli_usage_error(
                o->sub, "--max-deliveries wants 1..1000000, not '%s'", arg);
    } else if (strcmp(arg, "front") == 0) {
        o->nack = ZKR_NACK_FRONT;
    } else if (strcmp(arg, "back") == 0) {
        o->nack = ZKR_NACK_BACK;
    } else {
        return cli_usage_error(o->sub, "--nack wants front or back");
    }
    return 0;
}

/* The options that say what holding does to the command: --on-suspend,
 * --grace, --lost-exit-code, --lock-delay, --trust-foreign-release. */
static int holding_opt(opts_t *o, int opt, const char *arg)
{
    long v;

    switch (opt) {
    case O_SUSPEND:
        if (strcmp(arg, "term") == 0)
            o->susp = SUSP_TERM;
        else if (strcmp(arg, "stop") == 0)
            o->susp = SUSP_STOP;
        else if (strcmp(arg, "ignore") == 0)
            o->susp = SUSP_IGNORE;
        else
            return cli_usage_error(o->sub,
                                   "--on-suspend wants term, stop or ignore");
        return 0;
    case O_GRACE:
        if (cli_parse_seconds(arg, &o->grace_ms) != 0)
            return cli_usage_error(o->sub, "invalid --grace '%s'", arg);
        return 0;
    case O_LOST:
        if (cli_parse_int(arg, 0, 255, &v) != 0)
            return cli_usage_error(
                o->sub, "--lost-exit-code wants 0..255, not '%s'", arg);
        o->lost_code = (int)v;
        return 0;
    case O_DELAY:
        if (o->kind == KIND_QUEUE)
            return cli_usage_error(o->sub, "--lock-delay is not an option "
                                           "of queue take");
        if (cli_parse_seconds(arg, &o->delay_ms) != 0 || o->delay_ms > INT_MAX)
            return cli_usage_error(o->sub, "invalid --lock-delay '%s'", arg);
        return 0;
    default: /* O_TRUST */
        if (o->kind == KIND_QUEUE)
            return cli_usage_error(o->sub, "--trust-foreign-release is not "
                                           "an option of queue take");
        o->delay_flags = ZKR_DELAY_TRUST_FOREIGN;
        return 0;
    }
}

/* One option (getopt's answer opt, its argument arg): 0, -1 (--help was
 * written), or an exit status. *command: the -c/--command string. */
static int parse_one(opts_t *o, int opt, const char *arg, const char *given,
                     const char **command)
{
    kind_t kind = o->kind;
    const char *sub = o->sub;
    long v;

    /* Named by the option, not by the word given: that is the option's
     * argument when it has one (-w 1). */
    if (kind == KIND_ELECT && (opt == 'w' || opt == 'n' || opt == 'E'))
        return cli_usage_error(sub, "%s is not an option of elect",
                               opt == 'w'   ? "-w/--wait/--timeout"
                               : opt == 'n' ? "-n/--nonblock"
                                            : "-E/--conflict-exit-code");
    /* -c: the permit count in sem (as it always was), the command string
     * in lock and elect (as in flock(1)). */
    if (opt == 'c')
        opt = kind == KIND_SEM ? O_PERMITS : O_COMMAND;
    switch (opt) {
    case 'w':
        if (cli_parse_seconds(arg, &o->wait_ms) != 0)
            return cli_usage_error(sub, "invalid -w/--wait '%s'", arg);
        return 0;
    case 'n':
        o->wait_ms = 0;
        return 0;
    case 'E':
        if (cli_parse_int(arg, 0, 255, &v) != 0)
            return cli_usage_error(
                sub, "--conflict-exit-code wants 0..255, not '%s'", arg);
        o->fail_code = (int)v;
        return 0;
    case O_PERMITS:
        if (kind != KIND_SEM)
            return cli_usage_error(sub, "--permits is an option of sem");
        if (cli_parse_int(arg, 1, 100000, &o->permits) != 0)
            return cli_usage_error(sub, "--permits wants 1..100000, not '%s'",
                                   arg);
        return 0;
    case O_COMMAND:
        *command = arg;
        return 0;
    case O_READ:
    case O_WRITE:
        if (kind != KIND_LOCK)
            return cli_usage_error(sub, "%s is an option of lock",
                                   opt == O_READ ? "--read" : "--write");
        *(opt == O_READ ? &o->read : &o->write) = 1;
        return 0;
    case O_ID:
        o->id = arg;
        return 0;
    case O_ACL:
        if (cli_acl(arg) == NULL)
            return cli_usage_error(sub, "--acl wants open or private");
        o->acl = arg;
        return 0;
    case O_SUSPEND:
    case O_GRACE:
    case O_LOST:
    case O_DELAY:
    case O_TRUST:
        return holding_opt(o, opt, arg);
    case O_REQUEUE:
        if (kind != KIND_ELECT)
            return cli_usage_error(sub, "--requeue is an option of elect");
        o->requeue = 1;
        return 0;
    case O_METRICS:
        if (*arg == '\0')
            return cli_usage_error(sub, "--metrics-file wants a file");
        o->metrics_file = arg;
        return 0;
    case O_NACK:
    case O_MAXDEL:
    case O_DEAD:
        return queue_opt(o, opt, arg);
    case 'h':
        help(kind);
        return -1;
    default:
        return cli_usage_error(sub, "unknown or incomplete option '%s'", given);
    }
}

/* What the options say together. 0 or an exit status. */
static int opts_check(const opts_t *o)
{
    if (o->kind == KIND_SEM && o->permits == 0)
        return cli_usage_error(o->sub, "--permits N is required");
    if (o->dead_path != NULL && o->max_deliveries == 0)
        return cli_usage_error(o->sub, "--dead needs --max-deliveries");
    if (o->dead_path != NULL && cli_check_args(o->sub, o->dead_path, NULL) != 0)
        return CLI_EXIT_USAGE;
    if (o->read && o->write)
        return cli_usage_error(o->sub, "--read and --write exclude each other");
    return 0;
}

/* PATH, then the command: -c STRING (also after PATH, flock's order) or
 * [--] COMMAND [ARG]... from argv[optind]. 0 or an exit status. */
static int parse_command(opts_t *o, int argc, char **argv, const char *command)
{
    const char *sub = o->sub;
    kind_t kind = o->kind;

    if (optind >= argc)
        return cli_usage_error(sub, "missing PATH");
    o->path = argv[optind++];
    if (command == NULL && optind + 1 == argc &&
        ((kind != KIND_SEM && strcmp(argv[optind], "-c") == 0) ||
         strcmp(argv[optind], "--command") == 0))
        return cli_usage_error(sub, "%s wants a STRING", argv[optind]);
    if (command == NULL && optind + 1 < argc &&
        ((kind != KIND_SEM && strcmp(argv[optind], "-c") == 0) ||
         strcmp(argv[optind], "--command") == 0)) {
        command = argv[optind + 1];
        optind += 2;
    }
    if (command != NULL) {
        if (optind < argc)
            return cli_usage_error(
                sub, "a command string and a COMMAND ('%s') both given",
                argv[optind]);
        sh_argv[2] = (char *)command;
        o->cmd = sh_argv;
        return cli_check_args(sub, o->path, o->id);
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc)
        return cli_usage_error(sub, "missing COMMAND");
    o->cmd = argv + optind;
    return cli_check_args(sub, o->path, o->id);
}

/* The subcommand's options and operands: 0, -1 (--help was written), or
 * an exit status (said why). */
static int parse_opts(kind_t kind, int argc, char **argv, opts_t *o)
{
    const char *command = NULL;
    int opt, rc;

    opts_defaults(o, kind, kind == KIND_QUEUE ? "queue take" : argv[0]);
    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+w:nE:c:h", lopts)) != -1)
        if ((rc = parse_one(o, opt, optarg, argv[optind - 1], &command)) != 0)
            return rc;
    if ((rc = opts_check(o)) != 0)
        return rc;
    return parse_command(o, argc, argv, command);
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

/* The item is handed over before the message: the pipe orders the store
 * before the supervisor's read. */
static void on_taken(int rc, zkr_item_t *it, void *data)
{
    sup_t *p = data;

    p->it = it;
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

/* ------------------------------------------------------------ command */

/* Whether file can be run: 0, or an errno value. A directory, or any
 * file that is not a regular one, cannot (EACCES, as execve() says). */
static int runnable(const char *file)
{
    struct stat st;

    if (stat(file, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? EISDIR : EACCES;
    return access(file, X_OK) == 0 ? 0 : errno;
}

/* The interpreter named by file's "#!" line, if it has one and we can
 * read it (a script the interpreter cannot read fails anyway): 0 if it
 * has none or it can be run, else an errno value (interp: its name). */
static int interpreter(const char *file, char *interp, size_t size)
{
    char line[256];
    ssize_t n;
    size_t i = 2, k = 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0)
        return 0;
    do
        n = read(fd, line, sizeof(line) - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 2 || line[0] != '#' || line[1] != '!')
        return 0;
    line[n] = '\0';
    while (line[i] == ' ' || line[i] == '\t')
        i++;
    while (line[i] != '\0' && line[i] != ' ' && line[i] != '\t' &&
           line[i] != '\n' && k + 1 < size)
        interp[k++] = line[i++];
    interp[k] = '\0';
    if (k == 0)
        return ENOEXEC; /* "#!" alone: execve() refuses it */
    return runnable(interp);
}

/* Finds COMMAND as execvp() would, before forking: a name with a '/' is
 * the file; else the first runnable file of that name in $PATH, and if
 * none, a file of that name that exists is "permission denied" (execvp's
 * EACCES). A file without "#!" that the kernel does not recognize is run
 * with /bin/sh, as execvp() does (ct_spawn()), so it is not looked into;
 * a "#!" interpreter that cannot be run is found out here: through $PATH
 * that file is passed over, as execvp() passes over a file whose execve()
 * fails so (ENOENT, EACCES), and is what is reported if no later one can
 * be run. NULL, after saying why on stderr, with *why set to
 * CLI_EXIT_NOTFOUND or CLI_EXIT_NOEXEC. */
static char *resolve(const char *cmd, int *why)
{
    const char *path = getenv("PATH");
    char interp[256], bad[256] = "";
    char *file = NULL;
    int err = ENOENT, e, bad_err = 0;

    if (strchr(cmd, '/') != NULL) {
        if ((err = runnable(cmd)) == 0 &&
            (bad_err = interpreter(cmd, bad, sizeof(bad))) == 0 &&
            (file = strdup(cmd)) == NULL)
            err = errno;
    } else {
        if (path == NULL || *path == '\0')
            path = "/usr/local/bin:/usr/bin:/bin";
        while (*path != '\0' && file == NULL) {
            size_t n = strcspn(path, ":");
            if (asprintf(&file, "%.*s/%s", (int)(n != 0 ? n : 1),
                         n != 0 ? path : ".", cmd) < 0) {
                file = NULL;
                err = ENOMEM;
                break;
            }
            if ((e = runnable(file)) == 0 &&
                (e = interpreter(file, interp, sizeof(interp))) != 0) {
                if (bad_err == 0) { /* the first one is reported */
                    bad_err = e;
                    memcpy(bad, interp, sizeof(bad));
                }
                e = ENOENT;
            }
            if (e != 0) {
                if (e != ENOENT && e != ENOTDIR)
                    err = e; /* seen, but cannot be run */
                free(file);
                file = NULL;
            }
            path += n;
            if (*path == ':')
                path++;
        }
    }
    if (file == NULL && bad_err != 0) {
        cli_err("%s: bad interpreter %s: %s", cmd, bad, strerror(bad_err));
        *why = CLI_EXIT_NOEXEC;
        return NULL;
    }
    if (file == NULL) {
        *why = err == ENOENT || err == ENOTDIR ? CLI_EXIT_NOTFOUND
                                               : CLI_EXIT_NOEXEC;
        cli_err("%s: %s", cmd,
                *why == CLI_EXIT_NOTFOUND ? "command not found"
                : err == EACCES           ? "permission denied"
                                          : strerror(err));
    }
    return file;
}

/* Resolves COMMAND before anything is acquired or taken: a typo must not
 * wait its turn for a lock or leadership only to fail then, nor take items
 * and give them back (each a delivery, up to --max-deliveries). spawn()
 * resolves it again: it may have changed meanwhile. 0, or the exit status
 * (127, 126) after saying why. */
static int command_runs(const opts_t *o)
{
    int why = 0;
    char *file = resolve(o->cmd[0], &why);

    if (file == NULL)
        return why;
    free(file);
    return 0;
}

/* Every variable zkr sets: an outer zkr's are never passed on. */
static const char *const our_vars[] = {
    "ZKR_FENCE",          "ZKR_LOCK_PATH",   "ZKR_LOCK_NODE",  "ZKR_SESSION_ID",
    "ZKR_SEQUENCER",      "ZKR_LEADER_ID",   "ZKR_QUEUE_PATH", "ZKR_QUEUE_ITEM",
    "ZKR_QUEUE_DELIVERY", "ZKR_QUEUE_LEVEL",
};
#define N_OUR_VARS (sizeof(our_vars) / sizeof(our_vars[0]))

/* The command's environment: environ without our variables, then ours. */
typedef struct envp {
    char **env;
    char *ours[N_OUR_VARS];
    int n_ours;
} envp_t;

static void free_env(envp_t *e)
{
    for (int i = 0; i < e->n_ours; i++)
        free(e->ours[i]);
    free(e->env);
    memset(e, 0, sizeof(*e));
}

/* it: the item of queue take (its claim is q), or NULL. */
static int build_env(envp_t *e, const zkr_sequencer_t *q, const char *leader_id,
                     const char *queue, const zkr_item_t *it)
{
    char seq[ZKR_SEQUENCER_MAX];
    size_t n = 0, k = 0;

    memset(e, 0, sizeof(*e));
    while (environ[n] != NULL)
        n++;
    if ((e->env = calloc(n + N_OUR_VARS + 1, sizeof(*e->env))) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int ours = 0;
        for (size_t j = 0; j < N_OUR_VARS; j++) {
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
        asprintf(&e->ours[e->n_ours++], "ZKR_SESSION_ID=%016" PRIx64,
                 (uint64_t)q->session_id) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_SEQUENCER=%s", seq) < 0 ||
        (leader_id != NULL &&
         asprintf(&e->ours[e->n_ours++], "ZKR_LEADER_ID=%s", leader_id) < 0) ||
        (it != NULL &&
         (asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_PATH=%s", queue) < 0 ||
          asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_ITEM=%s",
                   zkr_item_id(it)) < 0 ||
          asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_DELIVERY=%d",
                   zkr_item_deliveries(it)) < 0 ||
          asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_LEVEL=%d",
                   zkr_item_level(it)) < 0))) {
        e->ours[--e->n_ours] = NULL; /* asprintf left it undefined */
        free_env(e);
        return -1;
    }
    for (int i = 0; i < e->n_ours; i++)
        e->env[k++] = e->ours[i];
    e->env[k] = NULL;
    return 0;
}

/* Whether zkr is in the foreground of its controlling terminal: then the
 * command gets the terminal while it runs, as flock(1)'s would. */
static int foreground(const sup_t *p)
{
    return p->tty >= 0 && tcgetpgrp(p->tty) == getpgrp();
}

/* Gives the terminal to the command's group again (after a stop), if zkr
 * is in the foreground. SIGTTOU is blocked in zkr. */
static void give_tty(sup_t *p)
{
    if (p->running && p->g.cmd > 0 && foreground(p) &&
        tcsetpgrp(p->tty, p->g.cmd) == 0)
        p->handed = 1;
}

/* Whether zkr's job has the terminal: zkr's process group or its
 * command's is the terminal's foreground group. */
static int job_has_tty(const sup_t *p)
{
    pid_t fg;

    if (p->tty < 0 || p->g.cmd <= 0)
        return 0;
    fg = tcgetpgrp(p->tty);
    return fg == getpgrp() || fg == p->g.cmd;
}

/* Gives the terminal to the command's group if zkr's job has it: 1 when
 * the command's group has it now and the command is still in it (a
 * command that moved to another group by setpgid() is not helped by the
 * terminal going to its old one: stopped by the terminal, it stops zkr's
 * job). */
static int hand_tty(sup_t *p)
{
    give_tty(p);
    return p->running && p->g.cmd > 0 && getpgid(p->g.cmd) == p->g.cmd &&
           tcgetpgrp(p->tty) == p->g.cmd;
}

/* Takes the terminal back from the command's group, unless someone (a
 * shell) has given it to another group meanwhile. */
static void take_tty(sup_t *p)
{
    if (p->handed && tcgetpgrp(p->tty) == p->g.cmd)
        tcsetpgrp(p->tty, getpgrp());
    p->handed = 0;
}

/* The standard input of queue take's command: the item's data, in an
 * anonymous file (not a pipe: a command that reads none of it, or part,
 * never blocks us, and any size fits). A descriptor, or -1 after saying
 * why. */
static int item_input(const zkr_item_t *it)
{
    size_t len = 0, off = 0;
    const char *data = zkr_item_data(it, &len);
    int fd = memfd_create("zkr-item", MFD_CLOEXEC);

    while (fd >= 0 && off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            fd = -1;
            break;
        }
        off += (size_t)n;
    }
    if (fd >= 0 && lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        cli_err("cannot pass the item's data to the command: %s",
                strerror(errno));
    return fd;
}

/* Starts the command, under its guard, with the grant's environment (and
 * queue take's item on its standard input). Returns 0, or an exit status
 * (command not found, ...) with nothing left running. */
static int spawn(sup_t *p, const zkr_sequencer_t *q, const char *leader_id)
{
    envp_t env;
    char *file;
    int why = 0, e, rc, fg = foreground(p), in = -1;
    /* The guard's first deadline, read with the clock at the same moment
     * (the PATH search below takes time). */
    int64_t deadline = now_ms() + zkr_session_valid_ms(p->s);

    if ((file = resolve(p->o->cmd[0], &why)) == NULL)
        return why;
    if (p->it != NULL && (in = item_input(p->it)) < 0) {
        free(file);
        return CLI_EXIT_OSERR;
    }
    if (build_env(&env, q, leader_id, p->o->path, p->it) != 0) {
        cli_err("cannot start %s: %s", p->o->cmd[0], strerror(errno));
        free(file);
        if (in >= 0)
            close(in);
        return CLI_EXIT_OSERR;
    }
    rc = ct_spawn(&p->g, file, p->o->cmd, env.env, deadline, fg, in, &e);
    if (in >= 0)
        close(in);
    if (rc != 0) {
        cli_err("%s: %s", p->o->cmd[0], strerror(e));
        why = rc == -1      ? CLI_EXIT_OSERR
              : e == ENOENT ? CLI_EXIT_NOTFOUND
                            : CLI_EXIT_NOEXEC;
    } else {
        p->running = 1;
        p->handed = fg;
        p->exited = p->orphaned = p->killing = 0;
        p->stopped = p->softened = p->hard = p->lost = 0;
        p->why = NULL;
        p->kill_at = p->jc_at = -1;
        p->beat_at = 0;
        cli_info(p->cli,
                 "%s %s granted (token %" PRId64 "); started %s, pid %d",
                 p->o->path, q->node, q->token, p->o->cmd[0], (int)p->g.cmd);
    }
    free(file);
    free_env(&env);
    return why;
}

/* Signals every process of the command. */
static void signal_tree(sup_t *p, int sig)
{
    if (p->running)
        ct_signal_tree(p->g.guard, sig);
}

/* Kills the whole tree, now and at every wake-up until it is gone (a
 * process forking while it is killed leaves a child behind). */
static void kill_tree(sup_t *p)
{
    p->killing = 1;
    p->kill_at = -1;
    ct_kill(&p->g);
    signal_tree(p, SIGKILL);
}

/* A signal zkr received for the command: forwarded to the whole tree,
 * followed by SIGCONT (a stopped process would never see it, as in
 * timeout(1)), and SIGKILL after --grace if anything is left. */
static void forward(sup_t *p, int sig)
{
    if (!p->running)
        return;
    signal_tree(p, sig);
    if (!p->stopped)
        signal_tree(p, SIGCONT);
    if (p->kill_at < 0 && !p->killing)
        p->kill_at = now_ms() + p->o->grace_ms;
}

/* The guard ended. If it was killed, the tree is now ours (we are a
 * subreaper): kill and reap it ourselves. */
static void guard_ended(sup_t *p)
{
    int st = 0;
    pid_t r;

    do
        r = waitpid(p->g.guard, &st, 0);
    while (r < 0 && errno == EINTR);
    if (p->g.ctl >= 0)
        close(p->g.ctl);
    p->g.ctl = -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && p->exited) {
        p->g.guard = -1;
        p->running = 0;
        return;
    }
    cli_err("the guard process of the command died (%s %d): command killed",
            WIFSIGNALED(st) ? "signal" : "status",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    p->g.guard = -1;
    p->orphaned = 1;
    p->killing = 1;
    signal_tree(p, SIGKILL);
}

/* After the guard died: reaps what we inherited; the run ends when none
 * of the command's processes is left. */
static void reap_orphans(sup_t *p)
{
    int st;
    pid_t r;

    signal_tree(p, SIGKILL);
    while ((r = waitpid(-1, &st, WNOHANG)) > 0)
        if (r == p->g.cmd && !p->exited) {
            p->status = st;
            p->exited = 1;
        }
    if (ct_orphans(-1) == 0) {
        if (!p->exited) {
            p->status = SIGKILL; /* as a wait status: killed by SIGKILL */
            p->exited = 1;
        }
        p->running = 0;
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
static void lose(sup_t *p, const char *why)
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

/* ---------------------------------------------------------- ownership */

/* The election's view, for the command: zkr runs elections under the
 * session policy (leadership is kept through SUSPENDED), so that "not
 * leader" means gone. The grant the command runs under is the one of the
 * epoch it started with: a loss followed by a new leadership (the
 * candidate rejoins by itself) is a loss, and so is a loss the descriptor
 * signals that we have not observed (it stays readable until
 * zkr_election_await() reports leadership again). SUSPENDED, until the
 * engine has re-verified the node after a reconnection, is the
 * candidate's own state. */
static own_t ownership(sup_t *p)
{
    if (p->e != NULL) {
        struct pollfd fd = {zkr_election_fd(p->e), POLLIN, 0};
        int64_t epoch;
        if (!zkr_election_is_leader(p->e) ||
            zkr_election_epoch(p->e, &epoch) != 0 || epoch != p->epoch)
            return OWN_GONE;
        if (fd.fd >= 0 && poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN))
            return OWN_GONE;
        if (zkr_election_state(p->e) == ZKR_LOCK_SUSPENDED)
            return OWN_SUSPENDED;
        return OWN_HELD;
    }
    switch (p->it != NULL ? zkr_item_state(p->it) : zkr_lock_state(p->l)) {
    case ZKR_LOCK_HELD:
        return OWN_HELD;
    case ZKR_LOCK_SUSPENDED:
        return OWN_SUSPENDED;
    default:
        return OWN_GONE;
    }
}

/* Applies --on-suspend to the current ownership while the command runs.
 * Each suspension is acted on once (softened); a re-verified HELD ends it,
 * so the next suspension of the same run is acted on again. */
static void react(sup_t *p)
{
    own_t own;

    if (!p->running || p->hard)
        return;
    own = ownership(p);
    if (own == OWN_HELD) {
        if (p->stopped) {
            signal_tree(p, SIGCONT);
            p->stopped = 0;
            cli_info(p->cli, "ownership re-verified: SIGCONT");
        } else if (p->softened) {
            cli_info(p->cli, "ownership re-verified");
        }
        if (p->softened && p->signo == 0)
            p->kill_at = -1;
        p->softened = 0;
    } else if (own == OWN_SUSPENDED && !p->softened) {
        int64_t valid = zkr_session_valid_ms(p->s);
        p->softened = 1;
        if (p->o->susp == SUSP_IGNORE)
            return;
        if (p->o->susp == SUSP_TERM) {
            signal_tree(p, SIGTERM);
            lose(p, "connection lost (suspended), command terminated");
            cli_info(p->cli,
                     "connection suspended: SIGTERM, SIGKILL in "
                     "%" PRId64 " ms unless gone",
                     valid);
        } else if (!p->stopped) {
            signal_tree(p, SIGSTOP);
            p->stopped = 1;
            cli_info(p->cli, "connection suspended: SIGSTOP");
        }
        if (p->kill_at < 0 || p->kill_at > now_ms() + valid)
            p->kill_at = now_ms() + (valid > 0 ? valid : 0);
    } else if (own == OWN_GONE) {
        p->hard = 1;
        lose(p, "the grant is gone (session expired or node deleted)");
        if (p->o->susp == SUSP_IGNORE) {
            signal_tree(p, SIGTERM);
            if (!p->stopped)
                signal_tree(p, SIGCONT);
            p->kill_at = now_ms() + p->o->grace_ms;
            cli_err("ownership of %s lost: SIGTERM to the command, SIGKILL "
                    "in %" PRId64 " ms",
                    p->o->path, p->o->grace_ms);
        } else {
            kill_tree(p);
            cli_err("ownership of %s lost: command killed", p->o->path);
        }
    }
}

/* The guard's deadline: until when the command may run without a word
 * from us. While the grant stands, the session's safe deadline (a stopped
 * or frozen zkr cannot vouch for the grant past it); --on-suspend ignore
 * adds its grace after the loss; a pending SIGKILL comes first. */
static void heartbeat(sup_t *p)
{
    int64_t now = now_ms(), at;

    if (!p->running || p->orphaned)
        return;
    if (p->killing) {
        at = now;
    } else if (p->hard) {
        at = p->kill_at >= 0 ? p->kill_at : now;
    } else {
        at = now + zkr_session_valid_ms(p->s);
        if (p->o->susp == SUSP_IGNORE)
            at += p->o->grace_ms;
        if (p->kill_at >= 0 && p->kill_at < at)
            at = p->kill_at;
    }
    ct_heartbeat(&p->g, at);
    p->beat_at = now + 100;
}

/* ---------------------------------------------------------- main loop */

/* How long a command has to stop after zkr forwarded it a stop signal
 * (it may catch the signal: an editor restores the terminal first) before
 * zkr stops its tree with SIGSTOP. */
#define JC_WAIT_MS 1000

/* Stops zkr by sig (SIGTSTP, SIGTTIN, SIGTTOU), the stop of a job: its
 * parent (a shell, or the guard of an outer zkr) sees a job-control stop.
 * group: the whole process group, as the terminal stops a job. Returns 1
 * once continued. The kernel discards these stops in an orphaned process
 * group (no job control: nobody there would ever continue it): then zkr
 * does not stop either, and 0 is returned at once. SIGCONT is blocked,
 * never read by the signalfd: pending, it tells that we were stopped and
 * continued. The signal's default action is ours for the moment, whatever
 * disposition zkr inherited (the command inherits that one). */
static int stop_as_job(int sig, int group)
{
    struct timespec zero = {0, 0};
    struct sigaction dfl, old;
    sigset_t cont, one;

    sigemptyset(&cont);
    sigaddset(&cont, SIGCONT);
    sigemptyset(&one);
    sigaddset(&one, sig);
    while (sigtimedwait(&cont, NULL, &zero) > 0)
        ; /* an older continuation */
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, &old);
    /* Unblocked in this thread only: the stop is delivered to it, as the
     * call returns. */
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    kill(group ? 0 : getpid(), sig);
    pthread_sigmask(SIG_BLOCK, &one, NULL);
    sigaction(sig, &old, NULL);
    if (sigtimedwait(&cont, NULL, &zero) < 0)
        return 0; /* discarded: not stopped */
    while (sigtimedwait(&cont, NULL, &zero) > 0)
        ;
    return 1;
}

/* Job control: the command's tree is stopped with us, and we stop by sig
 * (group: zkr's whole process group, see stop_as_job()). What the
 * terminal or a nested zkr stopped already is left as it is. While we are
 * stopped the guard keeps the session's safe deadline: past it the
 * command is killed. Continued, the command is given the terminal again
 * (zkr in the foreground) and then continued: its process group and what
 * we stopped (unless --on-suspend stop holds it); a nested zkr, continued
 * so, gives the terminal to its own command and continues it. */
static void stop_self(sup_t *p, int sig, int group)
{
    p->jc_at = -1;
    cli_info(p->cli, "stopped: the command is stopped too");
    if (p->running) {
        ct_stop_tree(p->g.guard);
        heartbeat(p);
    }
    take_tty(p);
    if (!stop_as_job(sig, group))
        cli_err("no job control (orphaned process group): zkr does not "
                "stop; the command is continued");
    give_tty(p);
    if (p->running && !p->stopped && !p->killing)
        ct_cont_tree(p->g.guard, p->g.cmd);
}

/* A stop signal for zkr (Ctrl-Z while zkr has the terminal, a shell's
 * kill -TSTP %1, ...): with a command running, it goes to the command's
 * process group first, as it would to a job, so that a command that
 * handles it (an editor, a nested zkr) stops its own way; its stop then
 * stops zkr (on_report()). Within JC_WAIT_MS zkr stops the tree itself. */
static void job_stop(sup_t *p, int sig)
{
    if (!p->running || p->exited || p->stopped || p->killing) {
        stop_self(p, sig, 0);
    } else if (p->jc_at < 0) {
        p->jc_sig = sig;
        p->jc_at = now_ms() + JC_WAIT_MS;
        ct_signal_group(p->g.guard, p->g.cmd, sig);
    }
}

/* zkr continued without having stopped itself: the shell's fg after bg
 * (zkr and the command were continued with the terminal left to the
 * shell; now it is zkr's group's), or a kill -CONT. As fg does to a job:
 * the terminal to the command if zkr has it, and SIGCONT to the command's
 * group (a nested zkr then does the same for its own command). */
static void continued(sup_t *p)
{
    if (!p->running || p->exited || p->killing)
        return;
    p->jc_at = -1; /* a stop forwarded before is called off */
    give_tty(p);
    if (!p->stopped)
        ct_signal_group(p->g.guard, p->g.cmd, SIGCONT);
}

static void on_signal(sup_t *p, int sig)
{
    switch (sig) {
    case SIGCHLD:
        return;
    case SIGCONT:
        continued(p);
        return;
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
        job_stop(p, sig);
        return;
    default:
        p->signo = sig;
        forward(p, sig);
    }
}

static void on_report(sup_t *p)
{
    int kind, value;

    if (!ct_read(&p->g, &kind, &value)) {
        guard_ended(p);
        return;
    }
    if (kind == CT_EXITED) {
        p->status = value;
        p->exited = 1;
    } else if (kind == CT_STOPPED && !p->killing && !ct_is_stopped(p->g.cmd)) {
        /* Continued since (by fg through us, or by anyone): a stop that
         * is over is no reason to stop the job now. */
    } else if (kind == CT_STOPPED && !p->killing && !p->stopped &&
               (value == SIGTTIN || value == SIGTTOU) && job_has_tty(p) &&
               hand_tty(p)) {
        /* The command touched the terminal while the shell's fg was still
         * on its way down to it (zkr, or a nested zkr, in the foreground
         * but the terminal not yet passed on): now it has the terminal,
         * and continues, as if fg had been quicker. */
        ct_signal_group(p->g.guard, p->g.cmd, SIGCONT);
        cli_info(p->cli, "the command touched the terminal before it was "
                         "given it: given, the command is continued");
    } else if (kind == CT_STOPPED && !p->killing &&
               (value == SIGTSTP || value == SIGTTIN || value == SIGTTOU)) {
        /* Ctrl-Z reached the command (its group owns the terminal), or,
         * zkr in the background, it read or wrote the terminal, or it
         * stopped on a stop signal zkr forwarded, or it is a nested zkr
         * that stopped so. (A SIGSTOP, ours or anyone's, is not job
         * control: left alone.) A stopped command must not hold the grant
         * unseen: zkr stops as a job, with its process group unless the
         * stop was zkr's own, and the guard's deadline ends the command
         * if nobody continues zkr (fg) within the session's safe
         * deadline. */
        cli_err("the command was stopped (%s): zkr stops too; the "
                "command is killed if zkr is not continued within %" PRId64
                " ms",
                strsignal(value), zkr_session_valid_ms(p->s));
        stop_self(p, value, p->jc_at < 0);
    } else if (kind == CT_DEADLINE && !p->killing) {
        p->killing = 1;
        lose(p, "zkr was not heard from by the safe deadline");
        cli_err("no word from zkr by the safe deadline of %s: the guard "
                "killed the command",
                p->o->path);
    }
}

/* Waits for the next message or signal (or a deadline) and handles
 * signals, the guard's reports and deadlines itself. Returns 1 with *m
 * filled for a message, 0 otherwise. */
static int wait_event(sup_t *p, struct msg *m)
{
    struct pollfd fds[3] = {{p->ev[0], POLLIN, 0},
                            {p->sfd, POLLIN, 0},
                            {p->running ? p->g.rep : -1, POLLIN, 0}};
    int64_t timeout = -1, now = now_ms();

    if (!p->running && p->wake_at >= 0)
        timeout = p->wake_at > now ? p->wake_at - now : 0;
    if (p->running) {
        if (p->killing || p->orphaned)
            timeout = 20;
        else if (p->softened || ownership(p) == OWN_SUSPENDED)
            timeout = 50; /* re-verification is not an event */
        else
            timeout = p->beat_at > now ? p->beat_at - now : 0;
        if (p->kill_at >= 0 && p->kill_at - now < timeout)
            timeout = p->kill_at > now ? p->kill_at - now : 0;
        if (p->jc_at >= 0 && p->jc_at - now < timeout)
            timeout = p->jc_at > now ? p->jc_at - now : 0;
    }
    if (timeout > 1000000)
        timeout = 1000000; /* poll() takes an int; we wake and look again */
    if (poll(fds, 3, (int)timeout) < 0 && errno != EINTR)
        return 0;
    if (p->running && p->kill_at >= 0 && now_ms() >= p->kill_at) {
        kill_tree(p);
        if (!p->hard && p->signo == 0) {
            lose(p, "not re-verified in time");
            cli_err("ownership of %s not re-verified in time: command "
                    "killed",
                    p->o->path);
        }
    }
    if (fds[1].revents & POLLIN) {
        struct signalfd_siginfo si;
        if (read(p->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            on_signal(p, (int)si.ssi_signo);
    }
    if (p->running && (fds[2].revents & (POLLIN | POLLHUP | POLLERR)))
        on_report(p);
    if (p->running && p->jc_at >= 0 && now_ms() >= p->jc_at)
        stop_self(p, p->jc_sig, 0); /* the command did not stop */
    if (p->running && p->orphaned)
        reap_orphans(p);
    if (p->running && p->killing)
        signal_tree(p, SIGKILL);
    if (p->running && now_ms() >= p->beat_at)
        heartbeat(p);
    if (fds[0].revents & POLLIN) {
        if (read(p->ev[0], m, sizeof(*m)) == (ssize_t)sizeof(*m))
            return 1;
    }
    return 0;
}

/* Runs the command until every process of it is gone, reacting to
 * ownership changes. */
static void supervise(sup_t *p)
{
    react(p); /* a suspension may have come before the command started */
    heartbeat(p);
    while (p->running) {
        struct msg m;
        wait_event(p, &m);
        react(p);
    }
    take_tty(p);
}

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
                stop_as_job((int)si.ssi_signo, 0);
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
    /* Blocked: a pending SIGCONT tells stop_as_job() that we were stopped
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
    zkr_item_free(p->it); /* a claim still held is given back */
    zkr_workq_free(p->q);
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
    else if (o->write) /* w is the unused side here */
        rc = zkr_rwlock_new(&w, &p->l, p->s, o->path, o->id, acl);
    else
        rc = zkr_lock_new(&p->l, p->s, o->path, o->id, acl);
    zkr_lock_free(w);
    if (rc == ZBADARGUMENTS)
        return cli_usage_error(o->sub, "invalid PATH '%s' or --id", o->path);
    if (rc == 0)
        rc = zkr_lock_set_delay(p->l, lock_delay(o, p->s));
    if (rc == 0)
        rc = zkr_lock_set_delay_flags(p->l, o->delay_flags);
    if (rc != 0)
        return cli_zk_error(p->cli, rc, "%s", o->path);
    zkr_lock_set_listener(p->l, on_lock_state, p);
    zkr_session_add_listener(p->s, on_session, p);
    return 0;
}

/* Cancels the pending acquire or take. */
static void cancel(sup_t *p)
{
    if (p->q != NULL)
        zkr_workq_cancel(p->q);
    else
        zkr_lock_cancel(p->l);
}

/* Waits for the acquire's (take's) completion, canceling it on a signal. */
static int await_grant(sup_t *p, int *rc)
{
    struct msg m;

    for (;;) {
        int sig = p->signo;
        if (wait_event(p, &m) && m.kind == M_ACQUIRED) {
            *rc = m.a;
            if (*rc == ZKR_ECANCELED && p->timed_out)
                *rc = ZKR_ETIMEDOUT;
            return 0;
        }
        if (p->signo != 0 && sig == 0)
            cancel(p);
        if (p->wake_at >= 0 && now_ms() >= p->wake_at && p->signo == 0) {
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
                               o->kind == KIND_QUEUE ? "take" : "acquire");
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
             p->cli, p->s, p->it != NULL ? q.path : o->path, o->acl)) != 0 ||
        (*status = spawn(p, &q, NULL)) != 0)
        return GIVE_BACK;
    /* The grant lasts until every process of the command is gone. */
    supervise(p);
    *status = exit_status_of(p->status);
    return RAN;
}

static int run_lock(const cli_t *c, const opts_t *o)
{
    sup_t p;
    zkr_lock_state_t st;
    int rc, status;
    ran_t ran;

    if ((status = command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0 || (status = make_lock(&p)) != 0)
        goto out;
    /* A wait longer than the library's int of ms: forever, bounded here. */
    if (cli_timeout_arg(o->wait_ms) != o->wait_ms)
        p.wake_at = now_ms() + o->wait_ms;
    rc = zkr_lock_acquire_async(p.l, cli_timeout_arg(o->wait_ms), on_acquired,
                                &p);
    if (rc == 0)
        await_grant(&p, &rc);
    if (!granted(&p, rc, &status))
        goto out;
    if ((ran = run_granted(&p, &status)) == GIVE_BACK)
        zkr_lock_release(p.l);
    if (ran != RAN)
        goto out;
    /* SUSPENDED too: the release waits for the reconnection that confirms
     * the delete, or for the session's end (which deletes the node). */
    st = zkr_lock_state(p.l);
    if (st == ZKR_LOCK_HELD || st == ZKR_LOCK_SUSPENDED) {
        rc = zkr_lock_release(p.l);
        if (rc == ZKR_ELOST && st == ZKR_LOCK_HELD)
            lose(&p, "the node was gone at the release");
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
#define QUEUE_EXIT_IN_DOUBT 5

/* Errors after which an ack or nack may be sent again: nothing was
 * changed, the claim still stands (zkr.h). */
static int retryable(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
           rc == ZKR_ETIMEDOUT;
}

/* Acks (ack) or nacks the item. A connection loss is waited out: the
 * claim is then re-verified (HELD again) or declared LOST at the safe
 * deadline, after which the library answers ZKR_ESTALE without sending;
 * the wait is bounded by two session timeouts all the same. */
static int settle(sup_t *p, int ack)
{
    int64_t until = now_ms() + 2 * (int64_t)zkr_session_timeout_ms(p->s);
    int rc;

    for (;;) {
        rc = ack ? zkr_item_ack(p->it) : zkr_item_nack(p->it, p->o->nack);
        if (!retryable(rc) || now_ms() >= until)
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

static int run_take(const cli_t *c, const opts_t *o)
{
    sup_t p;
    zkr_lock_state_t st;
    int rc, status, ack;
    ran_t ran;

    if ((status = command_runs(o)) != 0)
        return status;
    if ((status = setup(&p, c, o)) != 0 || (status = make_queue(&p)) != 0)
        goto out;
    if (cli_timeout_arg(o->wait_ms) != o->wait_ms)
        p.wake_at = now_ms() + o->wait_ms;
    rc = zkr_workq_take_async(p.q, cli_timeout_arg(o->wait_ms), on_taken, &p);
    if (rc == 0)
        await_grant(&p, &rc);
    if (!granted(&p, rc, &status))
        goto out;
    zkr_item_set_listener(p.it, on_item_state, &p);
    cli_info(c, "%s: took %s (delivery %d)", o->path, zkr_item_id(p.it),
             zkr_item_deliveries(p.it));
    if ((ran = run_granted(&p, &status)) == GIVE_BACK) {
        /* Not run: given back where it was. The delivery counts (the
         * count is the item's number of claims): resolve() found out
         * before the take what can be found out without exec. */
        if ((rc = settle(&p, 0)) != 0)
            cli_err("%s: cannot give %s back: %s", o->path, zkr_item_id(p.it),
                    zkr_strerror(rc));
    }
    if (ran != RAN)
        goto out;
    /* Done only if the command said so (exit 0) and ran undisturbed: a
     * command that zkr signalled (a signal to zkr, a suspension) may have
     * stopped half-way, whatever its status. */
    ack = status == 0 && p.signo == 0 && !p.lost;
    st = zkr_item_state(p.it);
    if (st == ZKR_LOCK_HELD || st == ZKR_LOCK_SUSPENDED) {
        rc = settle(&p, ack);
        if (rc == ZKR_ESTALE) {
            lose(&p, ack ? "the claim was gone at the ack: the item was "
                           "not completed and may be delivered again"
                         : "the claim was gone at the nack");
        } else if (rc == ZKR_EINDOUBT) {
            cli_err("%s: %s %s: the answer was lost with the session: it "
                    "may or may not have applied (ZooKeeper at %s)%s",
                    o->path, ack ? "ack of" : "nack of", zkr_item_id(p.it),
                    c->hosts,
                    ack ? "; the item may be delivered again if it did not"
                        : "");
            if (ack)
                status = QUEUE_EXIT_IN_DOUBT;
        } else if (rc != 0) {
            cli_zk_error(c, rc, "%s: cannot %s %s", o->path,
                         ack ? "ack" : "nack", zkr_item_id(p.it));
            if (ack)
                status = cli_exit_of(rc);
        } else {
            cli_info(c, "%s: %s %s", o->path, ack ? "acked" : "nacked",
                     zkr_item_id(p.it));
        }
    } else {
        /* Lost as the command ended, before we looked: neither acked nor
         * nacked, whatever the command said. */
        lose(&p, "the claim was lost as the command ended: the item was "
                 "not completed and may be delivered again");
    }
    /* 0 says "acked": a command that ended with 0 after zkr forwarded it
     * a signal was nacked, and zkr says why it stopped. */
    if (!ack && status == 0 && p.signo != 0)
        status = 128 + p.signo;
    if (p.lost) {
        lost_word(&p);
        status = o->lost_code;
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
        struct pollfd fd = {p->sfd, POLLIN, 0};
        struct signalfd_siginfo si;
        /* A signal already sent but not read yet counts too. */
        while (poll(&fd, 1, 0) > 0 &&
               read(p->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            on_signal(p, (int)si.ssi_signo);
        if (p->signo != 0)
            return 128 + p->signo;
        /* Observes the leadership (and any loss before it): the epoch
         * is the grant the command will run under. */
        if (zkr_election_await(p->e, 0) == 0 &&
            zkr_election_epoch(p->e, &p->epoch) == 0)
            return 0;
        if (wait_event(p, &m) && m.kind == M_LEADER && m.b != 0) {
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

    if ((status = command_runs(o)) != 0)
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
            wait_event(&p, &m);
            continue;
        }
        if ((status = cli_check_path_acl(c, p.s, o->path, o->acl)) != 0 ||
            (status = spawn(&p, &q, id)) != 0)
            break;
        supervise(&p);
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

/* ------------------------------------------------------ entry points */

static int run(kind_t kind, const cli_t *c, int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts(kind, argc, argv, &o);

    if (rc != 0)
        return rc < 0 ? 0 : rc; /* -1: --help printed */
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
