/* zkr inspect and zkr release --force: the operator's view of a queue and
 * the audited eviction of a holder. */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define AUDIT_DIR "/zkr/audit"

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *basename_of(const char *node)
{
    const char *slash = strrchr(node, '/');
    return slash != NULL ? slash + 1 : node;
}

/* The recipe a queue belongs to, from its first contender's name. */
static const char *kind_of(const zkr_contender_t *v, int n)
{
    const char *name;

    if (n == 0)
        return "none";
    name = basename_of(v[0].node);
    if (strstr(name, "-latch-") != NULL)
        return "election";
    if (strstr(name, "-permits-") != NULL)
        return "semaphore";
    for (int i = 0; i < n; i++) {
        name = basename_of(v[i].node);
        if (strstr(name, "__READ__") != NULL ||
            strstr(name, "__WRIT__") != NULL ||
            strstr(name, "__rlock__") != NULL)
            return "rwlock";
    }
    return "lock";
}

static int list(const cli_t *c, zkr_session_t *s, const char *path,
                zkr_contender_t **v, int *n, int *holding)
{
    int rc = zkr_contenders_list(s, path, v, n);

    if (rc == ZBADARGUMENTS) {
        cli_err("invalid PATH '%s'", path);
        return CLI_EXIT_ERROR;
    }
    if (rc == ZNOAUTH) {
        cli_err("%s: permission denied: its ACL does not let %s read it", path,
                c->auth != NULL ? "these credentials" : "anonymous");
        return CLI_EXIT_ERROR;
    }
    if (rc != 0) {
        cli_err("%s: cannot list: %s", path, zkr_strerror(rc));
        return CLI_EXIT_ERROR;
    }
    *holding = zkr_contenders_holding(*v, *n);
    if (*holding < 0) {
        zkr_contenders_free(*v, *n);
        cli_err("out of memory");
        return CLI_EXIT_ERROR;
    }
    return 0;
}

static void json_entry(strbuf_t *b, const zkr_contender_t *e, int64_t now)
{
    int64_t age = now - e->ctime_ms;

    sb_printf(b, "{\"node\":");
    sb_json_str(b, e->node);
    sb_printf(b, ",\"id\":");
    sb_json_str(b, e->id != NULL ? e->id : "");
    sb_printf(b,
              ",\"token\":%" PRId64 ",\"session\":\"0x%" PRIx64
              "\",\"seq\":%d,\"age_ms\":%" PRId64 "}",
              e->czxid, (uint64_t)e->session_id, (int)e->seq,
              age > 0 ? age : 0);
}

static void print_json(const char *path, const zkr_contender_t *v, int n,
                       int holding)
{
    strbuf_t b = {0};
    int64_t now = wall_ms();

    sb_printf(&b, "{\"path\":");
    sb_json_str(&b, path);
    sb_printf(&b, ",\"kind\":\"%s\",\"holders\":[", kind_of(v, n));
    for (int i = 0; i < holding; i++) {
        sb_printf(&b, i > 0 ? "," : "");
        json_entry(&b, &v[i], now);
    }
    sb_printf(&b, "],\"waiters\":[");
    for (int i = holding; i < n; i++) {
        sb_printf(&b, i > holding ? "," : "");
        json_entry(&b, &v[i], now);
    }
    sb_printf(&b, "]}\n");
    if (!b.oom)
        fputs(b.p, stdout);
    sb_free(&b);
}

static void print_text(const char *path, const zkr_contender_t *v, int n,
                       int holding)
{
    int64_t now = wall_ms();

    printf("%s: %s, %d holding, %d waiting\n", path, kind_of(v, n), holding,
           n - holding);
    if (n == 0)
        return;
    printf("%-7s %-56s %-16s %-12s %s\n", "ROLE", "NODE", "ID", "TOKEN", "AGE");
    for (int i = 0; i < n; i++) {
        int64_t age = now - v[i].ctime_ms;
        if (age < 0)
            age = 0;
        printf("%-7s %-56s %-16s %-12" PRId64 " %" PRId64 ".%01" PRId64 "s\n",
               i < holding ? "holder" : "waiter", basename_of(v[i].node),
               v[i].id != NULL ? v[i].id : "", v[i].czxid, age / 1000,
               (age % 1000) / 100);
    }
}

int cli_inspect(const cli_t *c, int argc, char **argv)
{
    static const struct option lopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    zkr_session_t *s = NULL;
    zkr_contender_t *v = NULL;
    int json = 0, n = 0, holding = 0, opt, status;

    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+jh", lopts, NULL)) != -1) {
        if (opt == 'j') {
            json = 1;
        } else if (opt == 'h') {
            printf("usage: zkr inspect [--json] PATH\n");
            return 0;
        } else {
            return cli_usage_error("inspect", "unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("inspect", "wants exactly one PATH");
    if ((status = cli_open_session(c, &s)) != 0)
        return status;
    status = list(c, s, argv[optind], &v, &n, &holding);
    if (status == 0) {
        if (json)
            print_json(argv[optind], v, n, holding);
        else
            print_text(argv[optind], v, n, holding);
        zkr_contenders_free(v, n);
    }
    zkr_session_free(s);
    return status;
}

/* ------------------------------------------------------------- release */

/* Creates AUDIT_DIR's ancestors (persistent; they hold the records). */
static int make_audit_dir(zhandle_t *zh)
{
    static const char *const dirs[] = {"/zkr", AUDIT_DIR};

    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        int rc =
            zoo_create(zh, dirs[i], NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        if (rc != ZOK && rc != ZNODEEXISTS)
            return rc;
    }
    return ZOK;
}

static char *audit_record(const cli_t *c, const char *path,
                          const zkr_contender_t *h, const char *reason)
{
    char ident[256], host[256] = "?", when[64];
    struct passwd *pw = getpwuid(getuid());
    time_t t = time(NULL);
    struct tm tm;
    strbuf_t b = {0};

    cli_identity(c, ident, sizeof(ident));
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    sb_printf(
        &b, "{\"time\":\"%s\",\"action\":\"release --force\",\"path\":", when);
    sb_json_str(&b, path);
    sb_printf(&b, ",\"node\":");
    sb_json_str(&b, h->node);
    sb_printf(&b, ",\"holder_id\":");
    sb_json_str(&b, h->id != NULL ? h->id : "");
    sb_printf(&b,
              ",\"token\":%" PRId64 ",\"holder_session\":\"0x%" PRIx64
              "\",\"reason\":",
              h->czxid, (uint64_t)h->session_id);
    sb_json_str(&b, reason);
    sb_printf(&b, ",\"operator\":");
    sb_json_str(&b, ident);
    sb_printf(&b, ",\"os_user\":");
    sb_json_str(&b, pw != NULL ? pw->pw_name : "?");
    sb_printf(&b, ",\"host\":");
    sb_json_str(&b, host);
    sb_printf(&b, "}");
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return b.p;
}

/* Deletes the holder's node and writes the audit record in one
 * transaction: either both happen or neither. */
static int evict(const cli_t *c, zkr_session_t *s, const char *path,
                 const zkr_contender_t *h, const char *reason)
{
    zhandle_t *zh = zkr_session_handle(s);
    char *rec = audit_record(c, path, h, reason);
    char made[512] = "";
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    char ident[256];
    int rc;

    if (rec == NULL) {
        cli_err("out of memory");
        return CLI_EXIT_ERROR;
    }
    cli_identity(c, ident, sizeof(ident));
    for (int attempt = 0; attempt < 2; attempt++) {
        zoo_delete_op_init(&ops[0], h->node, -1);
        zoo_create_op_init(&ops[1], AUDIT_DIR "/release-", rec,
                           (int)strlen(rec), &ZOO_OPEN_ACL_UNSAFE,
                           ZOO_PERSISTENT_SEQUENTIAL, made, sizeof(made));
        rc = zoo_multi(zh, 2, ops, res);
        if (rc == ZOK)
            break;
        if (res[0].err == ZNOAUTH || rc == ZNOAUTH) {
            cli_err("permission denied: %s may not delete %s (deleting a "
                    "contender needs the DELETE right on %s; pass --auth "
                    "with an identity its ACL allows). Nothing was changed.",
                    ident, h->node, path);
            free(rec);
            return CLI_EXIT_ERROR;
        }
        if (res[0].err == ZNONODE) {
            cli_err("%s is already gone; nothing was changed", h->node);
            free(rec);
            return CLI_EXIT_NOT_ACQUIRED;
        }
        if (res[1].err == ZNONODE && attempt == 0 &&
            (rc = make_audit_dir(zh)) == ZOK)
            continue;
        break;
    }
    if (rc != ZOK) {
        cli_err("cannot release %s: %s; nothing was changed", h->node,
                zerror(rc));
        free(rec);
        return CLI_EXIT_ERROR;
    }
    fprintf(stderr,
            "zkr: released %s of %s (holder '%s', token %" PRId64
            ") as %s: %s\nzkr: audit record %s: %s\n",
            h->node, path, h->id != NULL ? h->id : "", h->czxid, ident, reason,
            made, rec);
    free(rec);
    return 0;
}

int cli_release(const cli_t *c, int argc, char **argv)
{
    static const struct option lopts[] = {
        {"force", no_argument, NULL, 'f'},
        {"reason", required_argument, NULL, 'r'},
        {"node", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *reason = NULL, *node = NULL, *path;
    zkr_session_t *s = NULL;
    zkr_contender_t *v = NULL;
    int force = 0, n = 0, holding = 0, opt, status, pick = -1;

    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+fr:h", lopts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            force = 1;
            break;
        case 'r':
            reason = optarg;
            break;
        case 'N':
            node = optarg;
            break;
        case 'h':
            printf("usage: zkr release --force --reason TEXT [--node NODE] "
                   "PATH\n");
            return 0;
        default:
            return cli_usage_error("release",
                                   "unknown or incomplete option "
                                   "'%s'",
                                   argv[optind - 1]);
        }
    }
    if (!force)
        return cli_usage_error("release",
                               "--force is required: this deletes another "
                               "process's grant");
    if (reason == NULL || reason[strspn(reason, " \t")] == '\0')
        return cli_usage_error("release", "--reason TEXT is required");
    if (optind != argc - 1)
        return cli_usage_error("release", "wants exactly one PATH");
    path = argv[optind];
    if ((status = cli_open_session(c, &s)) != 0)
        return status;
    if ((status = list(c, s, path, &v, &n, &holding)) != 0)
        goto out;
    for (int i = 0; node != NULL && i < holding; i++)
        if (strcmp(v[i].node, node) == 0 ||
            strcmp(basename_of(v[i].node), node) == 0)
            pick = i;
    if (holding == 0) {
        cli_err("%s: no holder; nothing was changed", path);
        status = CLI_EXIT_NOT_ACQUIRED;
    } else if (node != NULL && pick < 0) {
        cli_err("%s: %s is not a current holder; nothing was changed", path,
                node);
        status = CLI_EXIT_NOT_ACQUIRED;
    } else if (node == NULL && holding > 1) {
        cli_err("%s: %d holders; choose one with --node (see zkr inspect)",
                path, holding);
        status = CLI_EXIT_ERROR;
    } else {
        status = evict(c, s, path, &v[pick >= 0 ? pick : 0], reason);
    }
    zkr_contenders_free(v, n);
out:
    zkr_session_free(s);
    return status;
}
