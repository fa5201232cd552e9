/* zkr barrier set / clear / wait: the barrier (zkr_barrier_*) from a
 * shell, on the node layout of kazoo's Barrier and Curator's
 * DistributedBarrier. The command sets a persistent node: it ends, and
 * an ephemeral barrier would end with it. zkr barrier enter, the double
 * barrier's (zkr_dbarrier_*), runs a command as zkr lock does: run.c. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help(FILE *f)
{
    fputs("usage: zkr barrier set [--acl open|private] PATH\n"
          "       zkr barrier clear PATH\n"
          "       zkr barrier wait [-w SECONDS] PATH\n"
          "       zkr barrier enter [options] N PATH [--] COMMAND [ARG...]\n"
          "\n"
          "A barrier stands while the node PATH exists (kazoo's Barrier, "
          "Curator's\n"
          "DistributedBarrier). set creates it (persistent, with its "
          "missing ancestors);\n"
          "clear deletes it; wait returns once it does not stand.\n"
          "enter is the double barrier's (kazoo's DoubleBarrier, Curator's\n"
          "DistributedDoubleBarrier): it runs COMMAND once N participants "
          "have entered,\n"
          "then leaves; its options: zkr barrier enter --help.\n"
          "\n"
          "options:\n"
          "  -w, --wait, --timeout SECONDS\n"
          "                            wait: give up after SECONDS (0: look "
          "once);\n"
          "                            default: no limit\n"
          "      --acl open|private    set: ACL of the nodes it creates\n"
          "\n"
          "Exit status: 0 (set: it stands; clear: it does not; wait: it "
          "does not stand,\n"
          "or was cleared since the wait began); 1 wait: it still stands "
          "after SECONDS;\n"
          "5 set or clear: the answer was lost and the outcome is unknown; "
          "64 usage;\n"
          "69 no server or session; "
          "71 other error; 77 permission denied. See zkr(1).\n",
          f);
}

/* A wait of wait_ms (-1: no limit), longer than an int's milliseconds
 * too: in rounds of at most INT32_MAX ms. */
static int wait_for(zkr_barrier_t *b, int64_t wait_ms)
{
    int rc;

    for (;;) {
        int64_t round = wait_ms > INT32_MAX ? INT32_MAX : wait_ms;

        rc = zkr_barrier_wait(b, (int)round);
        if (rc != ZKR_ETIMEDOUT || wait_ms <= INT32_MAX)
            return rc;
        wait_ms -= INT32_MAX;
    }
}

int cli_barrier(const cli_t *c, int argc, char **argv)
{
    enum { O_ACL = 256 };
    static const struct option lopts[] = {
        {"wait", required_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 'w'},
        {"acl", required_argument, NULL, O_ACL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char sub[32];
    const char *act, *path, *acl = "open";
    zkr_session_t *s = NULL;
    zkr_barrier_t *b = NULL;
    zkr_barrier_op_t op;
    int64_t wait_ms = -1;
    int opt, rc, status;

    if (argc < 2)
        return cli_usage_error("barrier",
                               "wants an action: set, clear, wait or enter");
    act = argv[1];
    if (strcmp(act, "-h") == 0 || strcmp(act, "--help") == 0) {
        help(stdout);
        return 0;
    }
    if (strcmp(act, "enter") == 0)
        return cli_barrier_enter(c, argc - 1, argv + 1);
    if (strcmp(act, "set") == 0)
        op = ZKR_BARRIER_SET;
    else if (strcmp(act, "clear") == 0)
        op = ZKR_BARRIER_CLEAR;
    else if (strcmp(act, "wait") == 0)
        op = ZKR_BARRIER_WAIT;
    else
        return cli_usage_error(
            "barrier", "unknown action '%s' (set, clear, wait, enter)", act);
    snprintf(sub, sizeof(sub), "barrier %s", act);
    argc--;
    argv++;
    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+hw:", lopts)) != -1) {
        switch (opt) {
        case 'h':
            help(stdout);
            return 0;
        case 'w':
            if (op != ZKR_BARRIER_WAIT)
                return cli_usage_error(sub, "-w/--wait/--timeout is wait's");
            if (cli_parse_seconds(optarg, &wait_ms) != 0)
                return cli_usage_error(sub, "invalid -w/--wait '%s'", optarg);
            break;
        case O_ACL:
            if (op != ZKR_BARRIER_SET)
                return cli_usage_error(sub, "--acl is set's");
            if (cli_acl(optarg) == NULL)
                return cli_usage_error(sub, "--acl is open or private");
            acl = optarg;
            break;
        default:
            return cli_usage_error(sub, "unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(sub, "wants exactly one PATH");
    path = argv[optind];
    if (strcmp(acl, "private") == 0 && c->auth == NULL)
        return cli_usage_error(sub, "--acl private needs credentials "
                                    "(--auth-file, $ZKR_AUTH or --auth)");
    if ((status = cli_check_args(sub, path, NULL)) != 0)
        return status;
    if (strcmp(path, "/") == 0)
        return cli_usage_error(sub, "PATH is not the root");
    if ((status = cli_open_session(c, &s)) != 0)
        return status;
    rc = zkr_barrier_new(&b, s, path, ZKR_BARRIER_PERSISTENT, cli_acl(acl));
    if (rc == 0)
        rc = op == ZKR_BARRIER_SET     ? zkr_barrier_set(b, NULL)
             : op == ZKR_BARRIER_CLEAR ? zkr_barrier_clear(b, NULL)
             : wait_ms < 0             ? zkr_barrier_wait(b, -1)
                                       : wait_for(b, wait_ms);
    if (rc == 0) {
        status = 0;
    } else if (rc == ZKR_ETIMEDOUT) {
        if (c->verbose)
            cli_err("%s: %s: still standing", sub, path);
        status = CLI_EXIT_NOT_ACQUIRED;
    } else if (rc == ZKR_EINDOUBT) {
        cli_err("%s: %s: the answer was lost and the outcome is unknown (the "
                "barrier may or may not stand): look before trying again",
                sub, path);
        status = CLI_EXIT_INDOUBT;
    } else {
        status = cli_zk_error(c, rc, "%s: %s", sub, path);
    }
    zkr_barrier_free(b);
    zkr_session_free(s);
    return status;
}
