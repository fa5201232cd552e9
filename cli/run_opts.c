/* zkr lock / sem / elect / queue take / barrier enter / member: their
 * options, operands and --help. */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

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
          "      --batch N             take up to N items at once and run "
          "COMMAND once per\n"
          "                            item, in order, each acked or nacked "
          "on its own; the\n"
          "                            first run that fails ends it, and "
          "gives the items\n"
          "                            not run yet back at once "
          "(1..1024; default 1)\n"
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

/* zkr barrier enter --help. */
static void help_enter(void)
{
    fputs("usage: zkr barrier enter [options] N PATH [options] [--] COMMAND "
          "[ARG...]\n"
          "       zkr barrier enter [options] N PATH [options] -c STRING\n\n"
          "Enters the double barrier PATH of N participants (kazoo's "
          "DoubleBarrier,\n"
          "Curator's DistributedDoubleBarrier) and runs COMMAND once N have "
          "entered; once\n"
          "every process of the command is gone, leaves. The phase has begun "
          "for all: a\n"
          "lost session does not stop the command (the others count this "
          "participant as\n"
          "left). Signals are forwarded to the command as in zkr lock.\n\n"
          "  -c, --command STRING      run STRING with sh -c instead of "
          "COMMAND\n"
          "  -w, --wait, --timeout SECONDS\n"
          "                            give up entering after SECONDS "
          "(fractions allowed;\n"
          "                            0: look once; default: no limit): "
          "COMMAND not run\n"
          "  -E, --conflict-exit-code CODE\n"
          "                            exit CODE when not entered (or not "
          "all left) in\n"
          "                            time (default 1)\n"
          "      --wait-leave[=SECONDS]\n"
          "                            after the command, wait until every "
          "participant has\n"
          "                            left (at most SECONDS; default: no "
          "limit); without\n"
          "                            it, zkr deletes its own node and "
          "exits\n"
          "      --id ID               the participant node's data (default "
          "host:pid)\n"
          "      --acl open|private    ACL of the nodes it creates (private "
          "needs\n"
          "                            credentials)\n"
          "      --grace SECONDS       after a signal forwarded to the "
          "command, SIGKILL\n"
          "                            after SECONDS (default 5)\n"
          "  -h, --help                this help\n\n"
          "Options, global ones too (zkr --help), may come before N or "
          "after PATH.\n"
          "Exit status: the command's; 1 (-E) not entered within -w (the "
          "command did not\n"
          "run), or with --wait-leave=SECONDS participants still there after "
          "SECONDS (the\n"
          "command exited 0); 64 usage; 69 no server or session; 71 other "
          "error; 77\n"
          "permission denied; 126/127 COMMAND not executable/not found "
          "(found out before\n"
          "entering); 128+N signal N while entering or waiting. See "
          "zkr(1).\n",
          stdout);
}

/* zkr member --help. */
static void help_member(void)
{
    fputs("usage: zkr member [options] PATH [options] [--] COMMAND [ARG...]\n"
          "       zkr member [options] PATH [options] -c STRING\n\n"
          "Joins the group PATH (kazoo's Party; a member is the ephemeral "
          "node\n"
          "PATH/ID__party__ holding DATA), runs COMMAND, and once every "
          "process of the\n"
          "command is gone, leaves. The membership is kept while the "
          "command runs: a\n"
          "node lost with an expired session is made again on the new one, "
          "and a lost\n"
          "session does not stop the command. Signals are forwarded to the "
          "command as\n"
          "in zkr lock. 'zkr members PATH' lists the members.\n\n"
          "  -c, --command STRING      run STRING with sh -c instead of "
          "COMMAND\n"
          "  -w, --wait, --timeout SECONDS\n"
          "                            give up joining after SECONDS "
          "(fractions allowed;\n"
          "                            default: no limit): COMMAND not "
          "run\n"
          "  -E, --conflict-exit-code CODE\n"
          "                            exit CODE when not joined in time "
          "(default 1)\n"
          "      --id ID               the member's id (default "
          "HOST:PID, zkr's PID):\n"
          "                            1..255 bytes of UTF-8, no '/', "
          "control\n"
          "                            characters, U+E000..U+F8FF nor "
          "U+FFF0 and\n"
          "                            above (ZooKeeper refuses them)\n"
          "      --data DATA           the member's data (default: its "
          "id; an\n"
          "                            argument holds at most 128 KiB)\n"
          "      --acl open|private    ACL of the nodes it creates (private "
          "needs\n"
          "                            credentials)\n"
          "      --grace SECONDS       after a signal forwarded to the "
          "command, SIGKILL\n"
          "                            after SECONDS (default 5)\n"
          "  -h, --help                this help\n\n"
          "Options, global ones too (zkr --help), may come before or after "
          "PATH.\n"
          "Exit status: the command's; 1 (-E) not joined within -w (the "
          "command did not\n"
          "run; another member may hold the id); 64 usage; 69 no server or "
          "session; 71\n"
          "other error; 77 permission denied; 126/127 COMMAND not "
          "executable/not found\n"
          "(found out before joining); 128+N signal N while joining. See "
          "zkr(1).\n",
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
           "       zkr %s%s [options] PATH %s STRING\n",
           names[kind], kind == KIND_SEM ? " --permits N" : "", names[kind],
           kind == KIND_SEM ? " --permits N" : "",
           kind == KIND_SEM ? "--command" : "-c");
    if (kind == KIND_LOCK)
        fputs("       zkr lock [options] PATH PATH... -- COMMAND [ARG...]\n"
              "       zkr lock [options] -c STRING PATH PATH...\n"
              "         (several PATHs: all or none, taken in their byte "
              "order, one --wait\n"
              "         for all; $ZKR_FENCES has their tokens in the order "
              "given)\n",
              stdout);
    putchar('\n');
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
    O_DEAD,
    O_BATCH,
    O_LEAVE,
    O_DATA
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
    {"batch", required_argument, NULL, O_BATCH},
    {"wait-leave", optional_argument, NULL, O_LEAVE},
    {"data", required_argument, NULL, O_DATA},
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
    o->leave_ms = -1;
}

/* The options of lock that barrier enter and member do not take (a phase
 * or a membership is no grant: nothing to suspend, lose or delay), by
 * name; NULL for the others. */
static const char *not_enter(int opt)
{
    switch (opt) {
    case 'n':
        return "-n/--nonblock (-w 0 looks once)";
    case O_SUSPEND:
        return "--on-suspend";
    case O_LOST:
        return "--lost-exit-code";
    case O_DELAY:
        return "--lock-delay";
    case O_TRUST:
        return "--trust-foreign-release";
    case O_METRICS:
        return "--metrics-file";
    default:
        return NULL;
    }
}

/* --wait-leave[=SECONDS] of barrier enter. 0 or an exit status. */
static int leave_opt(opts_t *o, const char *arg)
{
    if (o->kind != KIND_DBARRIER)
        return cli_usage_error(o->sub, "--wait-leave is an option of barrier "
                                       "enter");
    o->wait_leave = 1;
    o->leave_ms = -1;
    if (arg != NULL && cli_parse_seconds(arg, &o->leave_ms) != 0)
        return cli_usage_error(o->sub, "invalid --wait-leave '%s'", arg);
    return 0;
}

/* The options of queue take alone: --nack, --max-deliveries, --dead,
 * --batch. */
static int queue_opt(opts_t *o, int opt, const char *arg)
{
    if (o->kind != KIND_QUEUE)
        return cli_usage_error(o->sub, "%s is an option of queue take",
                               opt == O_NACK     ? "--nack"
                               : opt == O_MAXDEL ? "--max-deliveries"
                               : opt == O_BATCH  ? "--batch"
                                                 : "--dead");
    if (opt == O_BATCH) {
        long v;

        if (cli_parse_int(arg, 1, ZKR_WORKQ_BATCH_MAX, &v) != 0)
            return cli_usage_error(o->sub, "--batch wants 1..%d, not '%s'",
                                   ZKR_WORKQ_BATCH_MAX, arg);
        o->batch = (int)v;
    } else if (opt == O_DEAD) {
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
    if ((kind == KIND_DBARRIER || kind == KIND_MEMBER) &&
        not_enter(opt) != NULL)
        return cli_usage_error(sub, "%s is not an option of %s", not_enter(opt),
                               sub);
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
    case O_BATCH:
        return queue_opt(o, opt, arg);
    case O_LEAVE:
        return leave_opt(o, arg);
    case O_DATA:
        if (kind != KIND_MEMBER)
            return cli_usage_error(sub, "--data is an option of member");
        o->data = arg;
        return 0;
    case 'h':
        if (kind == KIND_DBARRIER)
            help_enter();
        else if (kind == KIND_MEMBER)
            help_member();
        else
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

/* Could operand be the COMMAND? An executable file of this machine
 * (/usr/bin/nice, /usr/bin/env): `zkr lock P /usr/bin/nice -- cmd` runs
 * nice under P, as it did before zkr lock took several PATHs. */
static int local_command(const char *operand)
{
    struct stat st;

    return stat(operand, &st) == 0 && S_ISREG(st.st_mode) &&
           access(operand, X_OK) == 0;
}

/* zkr lock's PATHs after the first: the operands that start with '/' and
 * are no executable file here, up to a "--" (all that is left when -c
 * STRING came before them). Without that "--" the next operand is the
 * COMMAND, as with one PATH, so `zkr lock P /bin/sh -c S` keeps its
 * meaning. */
static void more_paths(opts_t *o, int argc, char **argv, int have_command)
{
    int k = optind;

    while (k < argc && argv[k][0] == '/' && !local_command(argv[k]))
        k++;
    if (k == optind ||
        (have_command ? k < argc : k == argc || strcmp(argv[k], "--") != 0))
        return;
    o->more = argv + optind;
    o->nmore = k - optind;
    optind = k;
}

/* Every PATH and --id (member: its --id and --data, by the group's
 * rules). 0 or an exit status. */
static int check_paths(const opts_t *o)
{
    int rc;

    if (o->kind == KIND_MEMBER)
        return cli_check_member(o->sub, o->path, o->id, o->data);
    rc = cli_check_args(o->sub, o->path, o->id);

    for (int i = 0; rc == 0 && i < o->nmore; i++)
        rc = cli_check_args(o->sub, o->more[i], NULL);
    if (rc == 0 && o->kind == KIND_DBARRIER && strcmp(o->path, "/") == 0)
        rc = cli_usage_error(o->sub, "PATH is not the root");
    if (rc == 0 && o->nmore + 1 > ZKR_MULTILOCK_MAX)
        rc = cli_usage_error(o->sub, "more than %d PATHs", ZKR_MULTILOCK_MAX);
    return rc;
}

/* PATH, then the command: -c STRING (also after PATH, flock's order) or
 * [--] COMMAND [ARG]... from argv[optind]. 0 or an exit status. */
static int parse_command(opts_t *o, int argc, char **argv, const char *command)
{
    const char *sub = o->sub;
    kind_t kind = o->kind;
    /* barrier enter's and member's options after PATH were read by
     * getopt: -c STRING, and a "--" (everything after it is the
     * COMMAND). */
    int raw = kind != KIND_DBARRIER && kind != KIND_MEMBER;

    if (o->path == NULL && optind >= argc)
        return cli_usage_error(sub, "missing PATH");
    if (o->path == NULL)
        o->path = argv[optind++];
    if (kind == KIND_LOCK)
        more_paths(o, argc, argv, command != NULL);
    if (raw && command == NULL && optind + 1 == argc &&
        ((kind != KIND_SEM && strcmp(argv[optind], "-c") == 0) ||
         strcmp(argv[optind], "--command") == 0))
        return cli_usage_error(sub, "%s wants a STRING", argv[optind]);
    if (raw && command == NULL && optind + 1 < argc &&
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
        return check_paths(o);
    }
    if (raw && optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc)
        return cli_usage_error(sub, "missing COMMAND");
    o->cmd = argv + optind;
    return check_paths(o);
}

/* The options from argv[optind] up to the first operand (or "--").
 * *command: the -c/--command string. 0, -1 (--help was written), or an
 * exit status. */
static int parse_options(opts_t *o, int argc, char **argv, const char **command)
{
    int opt, rc;

    while ((opt = cli_getopt(argc, argv, "+w:nE:c:h", lopts)) != -1)
        if ((rc = parse_one(o, opt, optarg, argv[optind - 1], command)) != 0)
            return rc;
    return 0;
}

/* barrier enter: N and PATH, then the options that may follow them
 * (enter 3 /p -w 60 -- COMMAND, as well as enter -w 60 3 /p COMMAND). 0,
 * -1 (--help was written), or an exit status. */
static int enter_operands(opts_t *o, int argc, char **argv,
                          const char **command)
{
    if (optind >= argc)
        return cli_usage_error(o->sub, "missing N");
    if (cli_parse_int(argv[optind], 1, 100000, &o->count) != 0)
        return cli_usage_error(o->sub, "N wants 1..100000, not '%s'",
                               argv[optind]);
    if (++optind >= argc)
        return cli_usage_error(o->sub, "missing PATH");
    o->path = argv[optind++];
    return parse_options(o, argc, argv, command);
}

/* member: PATH, then the options that may follow it (member /g --id w1
 * -- COMMAND, as well as member --id w1 /g COMMAND). 0, -1 (--help was
 * written), or an exit status. */
static int member_operands(opts_t *o, int argc, char **argv,
                           const char **command)
{
    if (optind >= argc)
        return cli_usage_error(o->sub, "missing PATH");
    o->path = argv[optind++];
    return parse_options(o, argc, argv, command);
}

/* The subcommand's options and operands: 0, -1 (--help was written), or
 * an exit status (said why). */
int run_parse_opts(kind_t kind, int argc, char **argv, opts_t *o)
{
    const char *command = NULL;
    int rc;

    opts_defaults(o, kind,
                  kind == KIND_QUEUE      ? "queue take"
                  : kind == KIND_DBARRIER ? "barrier enter"
                                          : argv[0]);
    optind = 0;
    opterr = 0;
    if ((rc = parse_options(o, argc, argv, &command)) != 0)
        return rc;
    if (kind == KIND_DBARRIER &&
        (rc = enter_operands(o, argc, argv, &command)) != 0)
        return rc;
    if (kind == KIND_MEMBER &&
        (rc = member_operands(o, argc, argv, &command)) != 0)
        return rc;
    if ((rc = opts_check(o)) != 0)
        return rc;
    return parse_command(o, argc, argv, command);
}
