/* zkr counter get / add / set: the atomic counter (zkr_atomic_*) from a
 * shell, on the node layout of Curator's DistributedAtomicLong or, with
 * --text, kazoo's Counter. One operation, its value printed. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help(FILE *f)
{
    fputs("usage: zkr counter get [--text] PATH\n"
          "       zkr counter add [--text] [--acl open|private] PATH N\n"
          "       zkr counter set [--text] [--acl open|private] [--if "
          "EXPECT] PATH N\n"
          "\n"
          "A signed 64-bit counter in PATH's data: get prints it (no node "
          "counts 0); add\n"
          "adds N (negative too) and prints the value after; set makes it "
          "N (with --if,\n"
          "only if it is EXPECT) and prints the value after. Each update "
          "applies once: an\n"
          "update whose answer was lost is never sent again blindly.\n"
          "\n"
          "options:\n"
          "      --text                kazoo's Counter encoding (decimal "
          "text); default:\n"
          "                            Curator's DistributedAtomicLong (8 "
          "bytes)\n"
          "      --if EXPECT           set: only if the value is EXPECT\n"
          "      --acl open|private    ACL of the nodes an update creates\n"
          "\n"
          "Exit status: 0; 1 set --if: the value was not EXPECT (it is "
          "printed); 5 the\n"
          "update's answer was lost and it may or may not have applied (do "
          "not simply\n"
          "retry); 64 usage (N out of range, an add past the 64-bit range); "
          "65 the data\n"
          "is not a counter of this encoding; 69 no server or session; 71 "
          "other error;\n"
          "77 permission denied. See zkr(1).\n",
          f);
}

/* A decimal int64 (optional '-'): 0, or -1. */
static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (s == NULL || *s == '\0' || (*s != '-' && (*s < '0' || *s > '9')))
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

int cli_counter(const cli_t *c, int argc, char **argv)
{
    enum { O_TEXT = 256, O_IF, O_ACL };
    static const struct option lopts[] = {
        {"text", no_argument, NULL, O_TEXT},
        {"if", required_argument, NULL, O_IF},
        {"acl", required_argument, NULL, O_ACL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char sub[32];
    const char *act, *path, *acl = "open";
    zkr_session_t *s = NULL;
    zkr_atomic_t *ctr = NULL;
    zkr_atomic_result_t r = {0, 0, 0};
    zkr_atomic_op_t op;
    int64_t n = 0, expect = 0;
    int flags = 0, has_if = 0, opt, rc, status, want;

    if (argc < 2)
        return cli_usage_error("counter", "wants an action: get, add or set");
    act = argv[1];
    if (strcmp(act, "-h") == 0 || strcmp(act, "--help") == 0) {
        help(stdout);
        return 0;
    }
    if (strcmp(act, "get") == 0)
        op = ZKR_ATOMIC_GET;
    else if (strcmp(act, "add") == 0)
        op = ZKR_ATOMIC_ADD;
    else if (strcmp(act, "set") == 0)
        op = ZKR_ATOMIC_SET;
    else
        return cli_usage_error("counter", "unknown action '%s' (get, add, set)",
                               act);
    snprintf(sub, sizeof(sub), "counter %s", act);
    argc--;
    argv++;
    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+h", lopts)) != -1) {
        switch (opt) {
        case 'h':
            help(stdout);
            return 0;
        case O_TEXT:
            flags |= ZKR_ATOMIC_TEXT;
            break;
        case O_IF:
            if (op != ZKR_ATOMIC_SET)
                return cli_usage_error(sub, "--if is set's");
            if (parse_i64(optarg, &expect) != 0)
                return cli_usage_error(sub,
                                       "--if wants a 64-bit integer, "
                                       "not '%s'",
                                       optarg);
            has_if = 1;
            break;
        case O_ACL:
            if (cli_acl(optarg) == NULL)
                return cli_usage_error(sub, "--acl is open or private");
            acl = optarg;
            break;
        default:
            return cli_usage_error(sub, "unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    want = op == ZKR_ATOMIC_GET ? 1 : 2;
    if (argc - optind != want)
        return cli_usage_error(sub, op == ZKR_ATOMIC_GET
                                        ? "wants exactly one PATH"
                                        : "wants PATH and N");
    path = argv[optind];
    if (want == 2 && parse_i64(argv[optind + 1], &n) != 0)
        return cli_usage_error(sub, "N wants a 64-bit integer, not '%s'",
                               argv[optind + 1]);
    if (strcmp(acl, "private") == 0 && c->auth == NULL)
        return cli_usage_error(sub, "--acl private needs credentials "
                                    "(--auth-file, $ZKR_AUTH or --auth)");
    if ((status = cli_check_args(sub, path, NULL)) != 0)
        return status;
    if (strcmp(path, "/") == 0)
        return cli_usage_error(sub, "PATH is not the root");
    if ((status = cli_open_session(c, &s)) != 0)
        return status;
    rc = zkr_atomic_new(&ctr, s, path, flags, cli_acl(acl));
    if (rc == 0 && has_if)
        rc = zkr_atomic_run(ctr, ZKR_ATOMIC_CAS, expect, n, &r);
    else if (rc == 0)
        rc = zkr_atomic_run(ctr, op, n, 0, &r);
    if (rc == 0) {
        printf("%" PRId64 "\n", r.after);
        status = has_if && !r.changed ? CLI_EXIT_NOT_ACQUIRED : 0;
    } else if (rc == ZKR_EINDOUBT) {
        cli_err("%s: %s: the answer was lost and it may or may not have "
                "applied (%" PRId64 " to %" PRId64 "): read the counter "
                "before trying again",
                sub, path, r.before, r.after);
        status = CLI_EXIT_INDOUBT;
    } else if (rc == ZKR_EFORMAT) {
        cli_err("%s: %s: its data is not a counter in %s encoding%s", sub, path,
                flags & ZKR_ATOMIC_TEXT ? "kazoo's (text)"
                                        : "Curator's (8 bytes)",
                flags & ZKR_ATOMIC_TEXT ? "" : "; kazoo's text: --text");
        status = CLI_EXIT_DATAERR;
    } else if (rc == ZBADARGUMENTS) {
        status = cli_usage_error(sub,
                                 "%" PRId64 " would leave the 64-bit "
                                 "range",
                                 n);
    } else {
        status = cli_zk_error(c, rc, "%s: %s", sub, path);
    }
    zkr_atomic_free(ctr);
    zkr_session_free(s);
    return status;
}
