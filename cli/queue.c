/* zkr queue put / take / len, and zkr inspect of a work queue.
 *
 * take runs a command under an item's claim: it lives in run.c, with the
 * supervisor that contains the commands of lock, sem and elect (the claim
 * is an exclusive lock whose directory is the item's node). This file
 * holds the rest: put and len (one request each, no command), the
 * subcommand's dispatch and help, and the operator's view of a queue. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static void help(FILE *f)
{
    fputs("usage: zkr queue put [-l LEVEL] [options] PATH [DATA | -]\n"
          "       zkr queue take [options] PATH [--] COMMAND [ARG...]\n"
          "       zkr queue len PATH\n"
          "\n"
          "A fenced FIFO work queue at PATH: put adds an item (DATA, or "
          "standard input\n"
          "with -, or nothing) at the back of its level and prints the "
          "item's id; take\n"
          "runs COMMAND on the next item (its data on standard input): exit "
          "0 acks it,\n"
          "anything else gives it back; len prints how many items there are "
          "(claimed\n"
          "ones included). Levels 0..3, 0 served first, FIFO within a level. "
          "zkr inspect\n"
          "PATH shows the items, the claims and the waiting consumers.\n"
          "\n"
          "put options:\n"
          "  -l, --level LEVEL         priority level 0..3 (default 1)\n"
          "      --acl open|private    ACL of the nodes put creates\n"
          "'zkr queue take --help' lists take's options.\n"
          "\n"
          "Exit status: 0; take: the command's, 1 (-E) no item, 4 claim "
          "lost; 64 usage\n"
          "(also DATA over 524288 bytes); 69 no server or session; 71 other "
          "error; 77\n"
          "permission denied. See zkr(1).\n",
          f);
}

/* Reads all of standard input, at most ZKR_WORKQ_DATA_MAX bytes. 0; 1
 * (too long); -1 (read error, errno set). */
static int read_input(char **out, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);

    if (b == NULL)
        return -1;
    for (;;) {
        ssize_t r;
        if (n == cap) {
            char *nb;
            if (cap > ZKR_WORKQ_DATA_MAX) {
                free(b);
                return 1;
            }
            if ((nb = realloc(b, cap * 2)) == NULL) {
                free(b);
                return -1;
            }
            b = nb;
            cap *= 2;
        }
        r = read(0, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > ZKR_WORKQ_DATA_MAX) {
        free(b);
        return 1;
    }
    *out = b;
    *len = n;
    return 0;
}

static int open_queue(const cli_t *c, const char *sub, const char *path,
                      const char *id, const char *acl, zkr_session_t **s,
                      zkr_workq_t **q)
{
    int status, rc;

    if (acl != NULL && strcmp(acl, "private") == 0 && c->auth == NULL)
        return cli_usage_error(sub, "--acl private needs credentials "
                                    "(--auth-file, $ZKR_AUTH or --auth)");
    if ((status = cli_check_args(sub, path, id)) != 0 ||
        (status = cli_open_session(c, s)) != 0)
        return status;
    rc = zkr_workq_new(q, *s, path, id, acl != NULL ? cli_acl(acl) : NULL);
    if (rc == ZBADARGUMENTS)
        return cli_usage_error(sub, "invalid PATH '%s' or --id", path);
    if (rc != 0)
        return cli_zk_error(c, rc, "%s", path);
    return 0;
}

static int put(const cli_t *c, int argc, char **argv)
{
    enum { O_ACL = 256 };
    static const struct option lopts[] = {
        {"level", required_argument, NULL, 'l'},
        {"acl", required_argument, NULL, O_ACL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sub = "queue put", *acl = "open", *path;
    char item[ZKR_WORKQ_ID_MAX], *buf = NULL;
    const char *data = "";
    size_t len = 0;
    zkr_session_t *s = NULL;
    zkr_workq_t *q = NULL;
    long level = ZKR_WORKQ_LEVEL_DEFAULT;
    int opt, rc, status;

    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+l:h", lopts)) != -1) {
        switch (opt) {
        case 'l':
            if (cli_parse_int(optarg, 0, ZKR_WORKQ_LEVELS - 1, &level) != 0)
                return cli_usage_error(sub, "--level wants 0..%d, not '%s'",
                                       ZKR_WORKQ_LEVELS - 1, optarg);
            break;
        case O_ACL:
            if (cli_acl(optarg) == NULL)
                return cli_usage_error(sub, "--acl wants open or private");
            acl = optarg;
            break;
        case 'h':
            help(stdout);
            return 0;
        default:
            return cli_usage_error(sub, "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error(sub, "missing PATH");
    if (argc - optind > 2)
        return cli_usage_error(sub, "wants PATH and at most one DATA (quote "
                                    "it, or use - for standard input)");
    path = argv[optind];
    if (optind + 1 < argc && strcmp(argv[optind + 1], "-") == 0) {
        rc = read_input(&buf, &len);
        if (rc > 0)
            return cli_usage_error(sub, "the data is longer than %d bytes",
                                   ZKR_WORKQ_DATA_MAX);
        if (rc < 0) {
            cli_err("cannot read the data from standard input: %s",
                    strerror(errno));
            return CLI_EXIT_OSERR;
        }
        data = buf;
    } else if (optind + 1 < argc) {
        data = argv[optind + 1];
        len = strlen(data);
        if (len > ZKR_WORKQ_DATA_MAX)
            return cli_usage_error(sub, "the data is longer than %d bytes",
                                   ZKR_WORKQ_DATA_MAX);
    }
    status = open_queue(c, sub, path, NULL, acl, &s, &q);
    if (status == 0) {
        rc = zkr_workq_put(q, data, len, (int)level, item, sizeof(item));
        if (rc == 0) {
            printf("%s\n", item);
            if (fflush(stdout) != 0) {
                cli_err("cannot write the item's id: %s", strerror(errno));
                status = CLI_EXIT_OSERR;
            }
        } else if (rc == ZBADARGUMENTS) {
            status = cli_usage_error(sub, "invalid PATH '%s'", path);
        } else {
            /* ZCONNECTIONLOSS once the request timeout passed: the item
             * may or may not have been put (zkr.h). */
            status = cli_zk_error(
                c, rc, "%s: cannot put%s", path,
                rc == ZCONNECTIONLOSS ? " (the item may have been put)" : "");
        }
    }
    zkr_workq_free(q);
    zkr_session_free(s);
    free(buf);
    return status;
}

static int len_of(const cli_t *c, int argc, char **argv)
{
    const char *sub = "queue len";
    zkr_session_t *s = NULL;
    zkr_workq_t *q = NULL;
    static const struct option lopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t count = 0;
    int rc, status, opt;

    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+h", lopts)) != -1) {
        if (opt == 'h') {
            help(stdout);
            return 0;
        }
        return cli_usage_error(sub, "unknown option '%s'", argv[optind - 1]);
    }
    if (optind != argc - 1)
        return cli_usage_error(sub, "wants exactly one PATH");
    status = open_queue(c, sub, argv[optind], NULL, NULL, &s, &q);
    if (status == 0) {
        rc = zkr_workq_len(q, &count);
        if (rc == 0)
            printf("%" PRId64 "\n", count);
        else
            status = cli_zk_error(c, rc, "%s: cannot count", argv[optind]);
    }
    zkr_workq_free(q);
    zkr_session_free(s);
    return status;
}

int cli_queue(const cli_t *c, int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("queue", "wants an action: put, take or len");
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "put") == 0)
        return put(c, argc - 1, argv + 1);
    if (strcmp(argv[1], "take") == 0)
        return cli_queue_take(c, argc - 1, argv + 1);
    if (strcmp(argv[1], "len") == 0)
        return len_of(c, argc - 1, argv + 1);
    return cli_usage_error("queue", "unknown action '%s' (put, take, len)",
                           argv[1]);
}

/* ------------------------------------------------------------- inspect */

static void sid_hex(int64_t id, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, (uint64_t)id);
}

static const char *last_name(const char *node)
{
    const char *b = strrchr(node, '/');

    return b != NULL ? b + 1 : node;
}

static int64_t age_of(int64_t ctime_ms, int64_t now)
{
    return now > ctime_ms ? now - ctime_ms : 0;
}

/* What zkr inspect reads of a queue: the first items in serve order, the
 * claims of those that are claimed (each item's node is the directory of
 * its claim, an exclusive lock), and the line of waiting consumers. */
typedef struct view {
    int64_t total;
    zkr_item_info_t *items;
    int n_items;
    zkr_contender_t **claims; /* per item: its claim nodes, or NULL */
    int *n_claims;
    zkr_contender_t *consumers;
    int n_consumers;
} view_t;

static void view_free(view_t *v)
{
    for (int i = 0; i < v->n_items && v->claims != NULL; i++)
        zkr_contenders_free(v->claims[i], v->n_claims[i]);
    free(v->claims);
    free(v->n_claims);
    zkr_item_infos_free(v->items, v->n_items);
    zkr_contenders_free(v->consumers, v->n_consumers);
}

static int view_read(zkr_session_t *s, const char *path, int max, view_t *v)
{
    zkr_workq_t *q = NULL;
    char sub[ZKR_PATH_MAX + ZKR_WORKQ_ID_MAX + 16];
    int rc;

    memset(v, 0, sizeof(*v));
    if ((rc = zkr_workq_new(&q, s, path, "zkr-inspect", NULL)) != 0)
        return rc;
    rc = zkr_workq_len(q, &v->total);
    if (rc == 0 && max > 0)
        rc = zkr_workq_items(q, max, &v->items, &v->n_items);
    zkr_workq_free(q);
    if (rc == 0 && v->n_items > 0 &&
        ((v->claims = calloc((size_t)v->n_items, sizeof(*v->claims))) == NULL ||
         (v->n_claims = calloc((size_t)v->n_items, sizeof(int))) == NULL))
        rc = ZKR_ENOMEM;
    /* An item claimed a moment ago may be done by now: no claim then. */
    for (int i = 0; rc == 0 && i < v->n_items; i++) {
        if (!v->items[i].claimed)
            continue;
        snprintf(sub, sizeof(sub), "%s/%s", path, v->items[i].id);
        rc = zkr_contenders_list(s, sub, &v->claims[i], &v->n_claims[i]);
        if (rc == ZNONODE)
            rc = 0;
    }
    snprintf(sub, sizeof(sub), "%s/consumers", path);
    if (rc == 0 && (rc = zkr_contenders_list(s, sub, &v->consumers,
                                             &v->n_consumers)) == ZNONODE)
        rc = 0;
    return rc;
}

static int claimed_count(const view_t *v)
{
    int k = 0;

    for (int i = 0; i < v->n_items; i++)
        k += v->items[i].claimed != 0;
    return k;
}

static json_t *json_claim(const zkr_item_info_t *it, const zkr_contender_t *e,
                          int64_t now)
{
    char sid[17];
    json_t *o = json_object();

    sid_hex(e->session_id, sid);
    if (o == NULL || cli_json_set_text(o, "item", it->id) != 0 ||
        cli_json_set_text(o, "node", e->node) != 0 ||
        cli_json_set_text(o, "id", e->id != NULL ? e->id : "") != 0 ||
        json_object_set_new(o, "token", json_integer(e->czxid)) != 0 ||
        json_object_set_new(o, "session", json_string(sid)) != 0 ||
        json_object_set_new(o, "age_ms",
                            json_integer(age_of(e->ctime_ms, now))) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *json_item(const zkr_item_info_t *it, int64_t now)
{
    char sid[17];
    json_t *o = json_object();

    sid_hex(it->claim_sid, sid);
    if (o == NULL || cli_json_set_text(o, "id", it->id) != 0 ||
        json_object_set_new(o, "level", json_integer(it->level)) != 0 ||
        json_object_set_new(o, "deliveries", json_integer(it->deliveries)) !=
            0 ||
        json_object_set_new(o, "size", json_integer(it->size)) != 0 ||
        json_object_set_new(o, "age_ms",
                            json_integer(age_of(it->ctime_ms, now))) != 0 ||
        json_object_set_new(o, "claimed", json_boolean(it->claimed)) != 0 ||
        (it->claimed &&
         (cli_json_set_text(o, "claimed_by",
                            it->claim_id != NULL ? it->claim_id : "") != 0 ||
          json_object_set_new(o, "claim_session", json_string(sid)) != 0))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *json_consumer(const zkr_contender_t *e, int turn, int64_t now)
{
    char sid[17];
    json_t *o = json_object();

    sid_hex(e->session_id, sid);
    if (o == NULL || cli_json_set_text(o, "node", e->node) != 0 ||
        cli_json_set_text(o, "id", e->id != NULL ? e->id : "") != 0 ||
        json_object_set_new(o, "turn", json_boolean(turn)) != 0 ||
        json_object_set_new(o, "session", json_string(sid)) != 0 ||
        json_object_set_new(o, "seq", json_integer(e->seq)) != 0 ||
        json_object_set_new(o, "age_ms",
                            json_integer(age_of(e->ctime_ms, now))) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int print_json(const char *path, const view_t *v)
{
    int64_t now = cli_wall_ms();
    json_t *top = json_object(), *items = json_array(), *claims = json_array(),
           *cons = json_array();
    int bad = top == NULL || items == NULL || claims == NULL || cons == NULL;

    bad = bad || cli_json_set_text(top, "path", path) != 0 ||
          json_object_set_new(top, "kind", json_string("workq")) != 0 ||
          json_object_set_new(top, "length", json_integer(v->total)) != 0;
    for (int i = 0; !bad && i < v->n_items; i++) {
        bad = json_array_append_new(items, json_item(&v->items[i], now)) != 0;
        for (int j = 0; !bad && j < v->n_claims[i]; j++)
            bad = json_array_append_new(
                      claims,
                      json_claim(&v->items[i], &v->claims[i][j], now)) != 0;
    }
    for (int i = 0; !bad && i < v->n_consumers; i++)
        bad = json_array_append_new(
                  cons, json_consumer(&v->consumers[i], i == 0, now)) != 0;
    if (!bad)
        bad = json_object_set(top, "items", items) != 0 ||
              json_object_set(top, "claims", claims) != 0 ||
              json_object_set(top, "consumers", cons) != 0 ||
              json_dumpf(top, stdout, JSON_COMPACT) != 0 ||
              fputc('\n', stdout) == EOF;
    json_decref(items);
    json_decref(claims);
    json_decref(cons);
    json_decref(top);
    if (bad)
        cli_err("cannot write the JSON output: out of memory or stdout "
                "failed");
    return bad ? CLI_EXIT_OSERR : 0;
}

/* Prints s escaped (cli_escape()), padded to width (escaping may lengthen
 * it), and a space. 0 or -1. */
static int cell(const char *s, int width)
{
    char *e = cli_escaped(s);

    if (e == NULL)
        return -1;
    printf("%-*s ", width, e);
    free(e);
    return 0;
}

/* "12.3s" */
static const char *age_text(int64_t age_ms, char buf[32])
{
    snprintf(buf, 32, "%" PRId64 ".%01" PRId64 "s", age_ms / 1000,
             (age_ms % 1000) / 100);
    return buf;
}

static int print_text(const char *path, const view_t *v)
{
    int64_t now = cli_wall_ms();
    char sid[17], age[32], *p = cli_escaped(path);
    int bad = p == NULL;

    if (bad)
        return CLI_EXIT_OSERR;
    printf("%s: work queue, %" PRId64 " item%s (first %d in serve order "
           "below), %d consumer%s waiting\n",
           p, v->total, v->total == 1 ? "" : "s", v->n_items, v->n_consumers,
           v->n_consumers == 1 ? "" : "s");
    free(p);
    if (v->n_items > 0)
        printf("%-68s %-5s %-10s %-8s %-8s %s\n", "ITEM", "LEVEL", "DELIVERIES",
               "SIZE", "AGE", "STATE");
    for (int i = 0; !bad && i < v->n_items; i++) {
        const zkr_item_info_t *it = &v->items[i];
        bad = cell(it->id, 68) != 0;
        printf("%-5d %-10d %-8" PRId64 " %-8s ", it->level, it->deliveries,
               it->size, age_text(age_of(it->ctime_ms, now), age));
        if (it->claimed) {
            fputs("claimed by ", stdout);
            cli_escape(stdout, it->claim_id != NULL ? it->claim_id : "");
        } else {
            fputs("available", stdout);
        }
        putchar('\n');
    }
    if (!bad && claimed_count(v) > 0) {
        printf("\n%-68s %-16s %-12s %-16s %s\n", "CLAIM OF ITEM", "ID", "TOKEN",
               "SESSION", "AGE");
        for (int i = 0; !bad && i < v->n_items; i++)
            for (int j = 0; !bad && j < v->n_claims[i]; j++) {
                const zkr_contender_t *e = &v->claims[i][j];
                sid_hex(e->session_id, sid);
                bad = cell(v->items[i].id, 68) != 0 ||
                      cell(e->id != NULL ? e->id : "", 16) != 0;
                printf("%-12" PRId64 " %-16s %s\n", e->czxid, sid,
                       age_text(age_of(e->ctime_ms, now), age));
            }
    }
    if (!bad && v->n_consumers > 0) {
        printf("\n%-8s %-56s %-16s %-16s %s\n", "CONSUMER", "NODE", "ID",
               "SESSION", "AGE");
        for (int i = 0; !bad && i < v->n_consumers; i++) {
            const zkr_contender_t *e = &v->consumers[i];
            sid_hex(e->session_id, sid);
            /* The first in line is the one looking for items. */
            printf("%-8s ", i == 0 ? "turn" : "waiting");
            bad = cell(last_name(e->node), 56) != 0 ||
                  cell(e->id != NULL ? e->id : "", 16) != 0;
            printf("%-16s %s\n", sid, age_text(age_of(e->ctime_ms, now), age));
        }
    }
    return bad ? CLI_EXIT_OSERR : 0;
}

int cli_inspect_workq(const cli_t *c, zkr_session_t *s, const char *path,
                      int max, int json)
{
    view_t v;
    int rc = view_read(s, path, max, &v), status;

    if (rc == ZNOAUTH) {
        cli_err("%s: permission denied: its ACL does not let %s read it "
                "(ZooKeeper at %s)",
                path, c->auth != NULL ? "these credentials" : "anonymous",
                c->hosts);
        status = CLI_EXIT_NOPERM;
    } else if (rc != 0) {
        status = cli_zk_error(c, rc, "%s: cannot read the queue", path);
    } else {
        status = json ? print_json(path, &v) : print_text(path, &v);
    }
    view_free(&v);
    return status;
}
