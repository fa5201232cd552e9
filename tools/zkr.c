/* zkr(1): run a command under a ZooKeeper lock, semaphore or leadership;
 * inspect a queue; release a holder by force, with an audit record.
 *
 * This file holds the global options, the dispatch and small helpers. The
 * supervision of a command lives in run.c, the operator's subcommands in
 * admin.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_HOSTS "127.0.0.1:2181"

/* ------------------------------------------------------------ messages */

/* One message, one line: control characters of the message (a newline in
 * an operator's --reason, in a path or an identifier) are escaped, so a
 * value can never forge a line of zkr's output. */
static void vmsg(const char *fmt, va_list ap)
{
    char small[512], *big = NULL;
    const char *m = small;
    va_list ap2;
    int n;

    va_copy(ap2, ap);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n >= (int)sizeof(small) && (big = malloc((size_t)n + 1)) != NULL) {
        vsnprintf(big, (size_t)n + 1, fmt, ap2);
        m = big;
    }
    va_end(ap2);
    fputs("zkr: ", stderr);
    cli_escape(stderr, n < 0 ? "" : m);
    fputc('\n', stderr);
    free(big);
}

void cli_err(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

void cli_info(const cli_t *c, const char *fmt, ...)
{
    va_list ap;

    if (!c->verbose)
        return;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *sub, const char *fmt, ...)
{
    va_list ap;
    char m[512];

    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    fprintf(stderr, "zkr%s%s: ", sub != NULL ? " " : "",
            sub != NULL ? sub : "");
    cli_escape(stderr, m);
    fprintf(stderr, " (see 'zkr %s%s--help')\n", sub != NULL ? sub : "",
            sub != NULL ? " " : "");
    return CLI_EXIT_ERROR;
}

/* ------------------------------------------------------------- session */

int cli_open_session(const cli_t *c, zkr_session_t **out)
{
    zkr_session_options_t o = {0};
    int rc;

    o.digest = c->auth;
    o.log_level =
        c->verbose ? ZKR_LOG_WARN : ZKR_LOG_NONE; /* quiet unless -v */
    rc = zkr_session_open(out, c->hosts, c->session_timeout_ms, &o);
    if (rc == 0) {
        cli_info(c, "connected to %s, session 0x%llx, timeout %d ms", c->hosts,
                 (unsigned long long)zkr_session_id(*out),
                 zkr_session_timeout_ms(*out));
        return 0;
    }
    if (rc == ZKR_ETIMEDOUT)
        cli_err("cannot reach ZooKeeper at %s (no connection within %d ms)",
                c->hosts, c->session_timeout_ms);
    else if (rc == ZAUTHFAILED)
        cli_err("ZooKeeper at %s refused the credentials of --auth", c->hosts);
    else if (rc == ZBADARGUMENTS)
        cli_err("invalid server list '%s' or --auth value", c->hosts);
    else
        cli_err("cannot open a session with %s: %s", c->hosts,
                zkr_strerror(rc));
    return CLI_EXIT_ERROR;
}

/* The authenticated identity (auth:) gets every right; anyone may read, so
 * that `zkr inspect` works without credentials. */
static struct ACL private_acl[] = {
    {0x1f /* ZOO_PERM_ALL */, {"auth", ""}},
    {0x01 /* ZOO_PERM_READ */, {"world", "anyone"}},
};
static struct ACL_vector private_vec = {2, private_acl};

const struct ACL_vector *cli_acl(const char *name)
{
    if (strcmp(name, "open") == 0)
        return &ZOO_OPEN_ACL_UNSAFE;
    if (strcmp(name, "private") == 0)
        return &private_vec;
    return NULL;
}

/* ---------------------------------------------------------------- JSON */

static void sb_reserve(strbuf_t *b, size_t extra)
{
    size_t cap;
    char *p;

    if (b->oom || b->len + extra + 1 <= b->cap)
        return;
    cap = b->cap != 0 ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    if ((p = realloc(b->p, cap)) == NULL) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

void sb_printf(strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    sb_reserve(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sb_json_str(strbuf_t *b, const char *s)
{
    sb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            sb_printf(b, "\\%c", *p);
        else if (*p == '\n')
            sb_printf(b, "\\n");
        else if (*p == '\t')
            sb_printf(b, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            sb_printf(b, "\\u%04x", *p);
        else
            sb_printf(b, "%c", *p);
    }
    sb_printf(b, "\"");
}

void sb_free(strbuf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fputs("usage: zkr [-s HOSTS] [--session-timeout MS] [--auth USER:PASSWORD] "
          "[-v]\n"
          "           SUBCOMMAND ...\n"
          "\n"
          "  zkr lock [-w SECONDS] [-n] [-E CODE] [--read|--write] [--id ID] "
          "[--acl "
          "open|private]\n"
          "           [--on-suspend term|stop|ignore] [--grace SECONDS]\n"
          "           [--lost-exit-code CODE]\n"
          "           PATH [--] COMMAND [ARG...]\n"
          "  zkr sem -c PERMITS [lock options] PATH [--] COMMAND [ARG...]\n"
          "  zkr elect [--id ID] [--acl ...] [--on-suspend ...] [--grace "
          "SECONDS]\n"
          "           [--requeue] PATH [--] COMMAND [ARG...]\n"
          "  zkr inspect [--json] PATH\n"
          "  zkr release --force --reason TEXT [--node NODE] PATH\n"
          "\n"
          "HOSTS defaults to $ZKR_SERVER, else " DEFAULT_HOSTS
          "; the session timeout to\n"
          "10000 ms. The command gets ZKR_FENCE (its fencing token), "
          "ZKR_LOCK_PATH,\n"
          "ZKR_LOCK_NODE, ZKR_SESSION_ID and ZKR_SEQUENCER in its environment "
          "(elect:\n"
          "also ZKR_LEADER_ID); its exit status is zkr's. Exit 1 (or -E): not\n"
          "acquired; 2: usage or ZooKeeper error; 4: ownership lost while it "
          "ran.\n"
          "See zkr(1).\n",
          f);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},
        {"session-timeout", required_argument, NULL, 'T'},
        {"auth", required_argument, NULL, 'a'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    static const struct {
        const char *name;
        int (*fn)(const cli_t *, int, char **);
    } subs[] = {
        {"lock", cli_lock},       {"sem", cli_sem},
        {"elect", cli_elect},     {"inspect", cli_inspect},
        {"release", cli_release},
    };
    cli_t c = {0};
    const char *env = getenv("ZKR_SERVER");
    int opt;
    long v;

    c.hosts = env != NULL && *env != '\0' ? env : DEFAULT_HOSTS;
    c.session_timeout_ms = 10000;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+s:va:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 's':
            c.hosts = optarg;
            break;
        case 'T':
            if (cli_parse_int(optarg, 1, 3600000, &v) != 0)
                return cli_usage_error(NULL, "invalid --session-timeout '%s'",
                                       optarg);
            c.session_timeout_ms = (int)v;
            break;
        case 'a':
            if (strchr(optarg, ':') == NULL || optarg[0] == ':')
                return cli_usage_error(NULL, "--auth wants USER:PASSWORD");
            c.auth = optarg;
            break;
        case 'v':
            c.verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("zkr %s\n", PACKAGE_VERSION);
            return 0;
        default:
            return cli_usage_error(NULL, "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_ERROR;
    }
    /* The client's own log would drown our messages; -v shows its errors. */
    zoo_set_debug_level(c.verbose ? ZOO_LOG_LEVEL_ERROR : 0);
    if (*c.hosts == '\0')
        return cli_usage_error(NULL, "empty server list");
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(argv[optind], subs[i].name) == 0)
            return subs[i].fn(&c, argc - optind, argv + optind);
    return cli_usage_error(NULL, "unknown subcommand '%s'", argv[optind]);
}
