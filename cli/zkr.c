/* zkr(1): run a command under a ZooKeeper lock, semaphore or leadership,
 * or on the items of a work queue; inspect a queue; release a holder by
 * force, with an audit record.
 *
 * This file holds the global options, the dispatch and small helpers. The
 * supervision of a command lives in run.c, the operator's subcommands in
 * admin.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    return CLI_EXIT_USAGE;
}

int cli_exit_of(int rc)
{
    switch (rc) {
    case ZNOAUTH:
    case ZAUTHFAILED:
        return CLI_EXIT_NOPERM;
    case ZKR_ETIMEDOUT:
    case ZKR_EREFUSED:
    case ZKR_ELOST:
    case ZKR_ECLOSED:
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZCLOSING:
        return CLI_EXIT_UNAVAILABLE;
    default:
        return CLI_EXIT_OSERR;
    }
}

int cli_zk_error(const cli_t *c, int rc, const char *fmt, ...)
{
    char m[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    cli_err("%s: %s (ZooKeeper at %s)", m,
            rc == ZNOAUTH ? "permission denied by the path's ACL"
                          : zkr_strerror(rc),
            c->hosts);
    return cli_exit_of(rc);
}

/* ------------------------------------------------------------- session */

/* Splits "host:port,host:port/chroot" into the list and the chroot (the
 * client's own syntax: the chroot starts at the first '/'), and checks
 * every entry is HOST:PORT with a port of 1..65535, before any connection.
 * 0, or CLI_EXIT_USAGE after saying why. */
static int parse_servers(cli_t *c)
{
    static char servers[4096];
    char buf[sizeof(servers)];
    const char *slash = strchr(c->hosts, '/');
    size_t n = slash != NULL ? (size_t)(slash - c->hosts) : strlen(c->hosts);
    char *entry, *save = NULL;

    if (n == 0 || n >= sizeof(buf))
        return cli_usage_error(NULL, "invalid server list '%s'", c->hosts);
    memcpy(servers, c->hosts, n);
    servers[n] = '\0';
    memcpy(buf, servers, n + 1);
    c->servers = servers;
    c->chroot = slash;
    for (entry = strtok_r(buf, ",", &save); entry != NULL;
         entry = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(entry, ':');
        long port;
        if (colon == NULL || colon == entry ||
            cli_parse_int(colon + 1, 1, 65535, &port) != 0)
            return cli_usage_error(NULL,
                                   "server '%s' of '%s' is not HOST:PORT "
                                   "(port 1..65535)",
                                   entry, c->hosts);
    }
    return 0;
}

/* After the client failed to start: says which host does not resolve, if
 * one does not. 1 if so. */
static int unresolved(const cli_t *c)
{
    char buf[4096], *entry, *save = NULL;

    snprintf(buf, sizeof(buf), "%s", c->servers);
    for (entry = strtok_r(buf, ",", &save); entry != NULL;
         entry = strtok_r(NULL, ",", &save)) {
        struct addrinfo hints = {0}, *res = NULL;
        char *colon = strrchr(entry, ':'), *host = entry;
        int rc;
        *colon = '\0';
        if (host[0] == '[' && colon[-1] == ']') { /* [IPv6]:PORT */
            host++;
            colon[-1] = '\0';
        }
        hints.ai_socktype = SOCK_STREAM;
        rc = getaddrinfo(host, colon + 1, &hints, &res);
        if (res != NULL)
            freeaddrinfo(res);
        if (rc != 0) {
            cli_err("cannot reach ZooKeeper at %s: cannot resolve %s (%s)",
                    c->hosts, host,
                    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
            return 1;
        }
    }
    return 0;
}

static int open_session(const cli_t *c, zkr_session_t **out, int no_reconnect)
{
    zkr_session_options_t o = {0};
    int rc;

    o.no_reconnect = no_reconnect;
    o.digest = c->auth;
    o.log_level =
        c->verbose ? ZKR_LOG_WARN : ZKR_LOG_NONE; /* quiet unless -v */
    o.chroot = c->chroot;
    o.connect_timeout_ms = c->connect_timeout_ms;
    rc = zkr_session_open(out, c->servers, c->session_timeout_ms, &o);
    if (rc == 0) {
        cli_info(c, "connected to %s, session %016llx, timeout %d ms", c->hosts,
                 (unsigned long long)zkr_session_id(*out),
                 zkr_session_timeout_ms(*out));
        return 0;
    }
    if (rc == ZKR_ETIMEDOUT) {
        cli_err("cannot reach ZooKeeper at %s (no session within %d ms)",
                c->hosts,
                c->connect_timeout_ms > 0 ? c->connect_timeout_ms
                                          : c->session_timeout_ms);
        return CLI_EXIT_UNAVAILABLE;
    }
    if (rc == ZKR_EREFUSED) {
        cli_err("cannot reach ZooKeeper at %s: connection refused (no "
                "session within %d ms; is it running, on that port?)",
                c->hosts,
                c->connect_timeout_ms > 0 ? c->connect_timeout_ms
                                          : c->session_timeout_ms);
        return CLI_EXIT_UNAVAILABLE;
    }
    if (rc == ZAUTHFAILED) {
        cli_err("ZooKeeper at %s refused the credentials", c->hosts);
        return CLI_EXIT_NOPERM;
    }
    if (rc == ZBADARGUMENTS) {
        cli_err("invalid server list '%s' or credentials", c->hosts);
        return CLI_EXIT_USAGE;
    }
    /* The client could not start: most often a host it cannot resolve
     * (a DNS failure may pass: retryable). */
    if ((rc == ZSYSTEMERROR || rc == ZKR_ERESOLVE) && unresolved(c))
        return CLI_EXIT_UNAVAILABLE;
    return cli_zk_error(c, rc, "cannot open a session");
}

int cli_open_session(const cli_t *c, zkr_session_t **out)
{
    return open_session(c, out, 0);
}

int cli_open_admin_session(const cli_t *c, zkr_session_t **out)
{
    return open_session(c, out, 1);
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

/* ------------------------------------------------------ arguments, JSON */

int cli_check_args(const char *sub, const char *path, const char *id)
{
    zkr_sequencer_t q;
    char line[ZKR_SEQUENCER_MAX];
    size_t i = 0, len = id != NULL ? strlen(id) : 0;
    int n;

    /* A node under PATH formats as a sequencer only if PATH is a valid
     * recipe path: the library's own rule, checked without a server. */
    memset(&q, 0, sizeof(q));
    q.mode = 'x';
    q.token = 1;
    n = snprintf(q.node, sizeof(q.node), "%s/%s", path != NULL ? path : "",
                 "_c_00000000-0000-0000-0000-000000000000-lock-0000000001");
    if (path == NULL || n < 0 || (size_t)n >= sizeof(q.node) ||
        zkr_sequencer_format(&q, line, sizeof(line)) != 0)
        return cli_usage_error(sub,
                               "invalid PATH '%s': it must be absolute, not "
                               "/, without a trailing /, empty, . or .. "
                               "component, control characters, at most %d "
                               "bytes",
                               path != NULL ? path : "", ZKR_PATH_MAX);
    /* Identifiers: 1..ZKR_ID_MAX bytes of UTF-8 (zkr_lock_new()). */
    if (id == NULL)
        return 0;
    while (i < len && (n = cli_utf8_len(id + i)) > 0)
        i += (size_t)n;
    if (len == 0 || len > ZKR_ID_MAX || i < len)
        return cli_usage_error(sub,
                               "invalid --id: it must be 1..%d bytes of "
                               "UTF-8",
                               ZKR_ID_MAX);
    return 0;
}

json_t *cli_json_text(const char *s)
{
    json_t *j = json_string(s);
    char *fixed;
    size_t o = 0;

    if (j != NULL)
        return j;
    /* Not UTF-8: each stray byte becomes U+FFFD (3 bytes). */
    if ((fixed = malloc(strlen(s) * 3 + 1)) == NULL)
        return NULL;
    while (*s != '\0') {
        int n = cli_utf8_len(s);
        if (n > 0) {
            memcpy(fixed + o, s, (size_t)n);
            o += (size_t)n;
            s += n;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            s++;
        }
    }
    j = json_stringn(fixed, o);
    free(fixed);
    return j;
}

int cli_json_set_text(json_t *obj, const char *key, const char *s)
{
    char hexkey[64], *hex;
    size_t len = strlen(s);
    json_t *probe = json_string(s);
    int rc = json_object_set_new(obj, key, cli_json_text(s));

    if (probe != NULL || rc != 0) {
        json_decref(probe);
        return rc;
    }
    /* Not UTF-8: the exact bytes too, in hex, under KEY_hex. */
    if ((hex = malloc(len * 2 + 1)) == NULL)
        return -1;
    for (size_t i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
    snprintf(hexkey, sizeof(hexkey), "%s_hex", key);
    rc = json_object_set_new(obj, hexkey, json_string(hex));
    free(hex);
    return rc;
}

/* --------------------------------------------------------- credentials */

/* Reads USER:PASSWORD from the first line of file into buf, refusing, as
 * ssh does with a private key, a file that others may read or write. Only
 * a regular file: a FIFO would block (it is opened without blocking and
 * refused), a directory has no line. A first line that does not fit in
 * buf is refused rather than cut. 0, or CLI_EXIT_USAGE / CLI_EXIT_NOPERM
 * after saying why. */
static int read_auth_file(const char *file, char *buf, size_t len)
{
    struct stat st;
    ssize_t n;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0) {
        cli_err("--auth-file %s: %s", file, strerror(errno));
        return errno == EACCES ? CLI_EXIT_NOPERM : CLI_EXIT_USAGE;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_err("--auth-file %s: not a regular file", file);
        close(fd);
        return CLI_EXIT_USAGE;
    }
    if ((st.st_mode & 077) != 0) {
        cli_err("--auth-file %s: permissions %04o are too open: others may "
                "read or change it (chmod 600 %s)",
                file, (unsigned)(st.st_mode & 07777), file);
        close(fd);
        return CLI_EXIT_NOPERM;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        cli_err("--auth-file %s: %s", file, strerror(errno));
        return CLI_EXIT_OSERR;
    }
    buf[n] = '\0';
    if (strcspn(buf, "\r\n") == len - 1) {
        cli_err("--auth-file %s: the first line is longer than %zu bytes", file,
                len - 2);
        return CLI_EXIT_USAGE;
    }
    buf[strcspn(buf, "\r\n")] = '\0'; /* the first line */
    return 0;
}

/* An identity as the digest scheme wants it: USER:PASSWORD, USER not
 * empty. */
static int auth_valid(const char *a)
{
    return a != NULL && a[0] != ':' && strchr(a, ':') != NULL;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fputs("usage: zkr [GLOBAL OPTIONS] SUBCOMMAND [OPTIONS] ...\n"
          "\n"
          "  zkr lock [options] PATH [--] COMMAND [ARG...]   (or PATH -c "
          "STRING)\n"
          "  zkr sem --permits N [options] PATH [--] COMMAND [ARG...]\n"
          "  zkr elect [options] PATH [--] COMMAND [ARG...]  (or PATH -c "
          "STRING)\n"
          "  zkr queue put [-l LEVEL] PATH [DATA | -]       (prints the "
          "item's id)\n"
          "  zkr queue take [options] PATH [--] COMMAND [ARG...]  (item's "
          "data on stdin;\n"
          "                                 exit 0 acks it, else it goes "
          "back)\n"
          "  zkr queue len PATH\n"
          "  zkr counter get|add|set [--text] PATH [N]     (prints the "
          "value)\n"
          "  zkr barrier set|clear|wait [-w SECONDS] PATH\n"
          "  zkr barrier enter [options] N PATH [--] COMMAND [ARG...]  (runs "
          "it once N\n"
          "                                 have entered, then leaves)\n"
          "  zkr member [--id ID] [--data DATA] PATH [--] COMMAND [ARG...]  "
          "(a member of\n"
          "                                 the group while it runs)\n"
          "  zkr members [--json] [--watch] PATH           (one line per "
          "member: ID, DATA)\n"
          "  zkr watch [--children [--data]] [--json] PATH [--] [COMMAND "
          "[ARG...]]\n"
          "                                 (each new view on its stdin; "
          "without COMMAND,\n"
          "                                 printed)\n"
          "  zkr inspect [--json] [--items N] PATH\n"
          "  zkr release --force --reason TEXT [--node NODE] PATH\n"
          "  zkr exporter [--listen HOST:PORT] [--refresh SECONDS] PATH...\n"
          "\n"
          "'zkr SUBCOMMAND --help' lists the options of each.\n"
          "\n"
          "Global options, before SUBCOMMAND or after it, up to its PATH "
          "(there -h and\n"
          "--help are the subcommand's help):\n"
          "  -s, --server HOSTS        ZooKeeper servers (default "
          "$ZKR_SERVER, else\n"
          "                            " DEFAULT_HOSTS ")\n"
          "      --session-timeout MS  session timeout (default 10000)\n"
          "      --connect-timeout MS  how long to wait for a first session "
          "(default:\n"
          "                            the session timeout)\n"
          "      --auth-file FILE      digest credentials USER:PASSWORD from "
          "the first\n"
          "                            line of FILE (mode 0600 or "
          "stricter)\n"
          "  -a, --auth USER:PASSWORD  the same on the command line (visible "
          "in ps;\n"
          "                            prefer --auth-file or $ZKR_AUTH)\n"
          "  -v, --verbose             say what zkr does, on stderr\n"
          "  -h, --help                this help\n"
          "  -V, --version             zkr's version\n"
          "\n"
          "The command gets ZKR_FENCE (its fencing token), ZKR_LOCK_PATH, "
          "ZKR_LOCK_NODE,\n"
          "ZKR_SESSION_ID and ZKR_SEQUENCER in its environment (elect: also "
          "ZKR_LEADER_ID),\n"
          "and descriptors 0, 1 and 2 only; queue take adds ZKR_QUEUE_ITEM,\n"
          "ZKR_QUEUE_DELIVERY, ZKR_QUEUE_PATH, ZKR_QUEUE_LEVEL, and the "
          "item's data on\n"
          "stdin; barrier enter's and member's get zkr's environment as it "
          "is. Exit\n"
          "status: the command's; 1 (or -E) not acquired, no item, not "
          "entered or joined\n"
          "in time; 4 ownership (a claim) lost while the command ran or at "
          "the ack; 64\n"
          "usage error; 66 inspect: PATH does not exist; 69 ZooKeeper "
          "unreachable or no\n"
          "session (retryable); 71 other error; 77 permission denied; "
          "126/127 COMMAND\n"
          "not executable/not found. See zkr(1).\n",
          f);
}

/* The global options: given before the subcommand (main) or after it
 * (cli_getopt), into one cli_t. */
enum {
    G_SERVER = 0x10000, /* beyond any subcommand's option values */
    G_TIMEOUT,
    G_CONNECT_TIMEOUT,
    G_AUTH,
    G_AUTH_FILE,
    G_VERBOSE,
    G_HELP,
    G_VERSION
};

static const struct {
    struct option lo;
    int letter; /* its short form, or 0 */
} globals[] = {
    {{"server", required_argument, NULL, G_SERVER}, 's'},
    {{"session-timeout", required_argument, NULL, G_TIMEOUT}, 0},
    {{"connect-timeout", required_argument, NULL, G_CONNECT_TIMEOUT}, 0},
    {{"auth", required_argument, NULL, G_AUTH}, 'a'},
    {{"auth-file", required_argument, NULL, G_AUTH_FILE}, 0},
    {{"verbose", no_argument, NULL, G_VERBOSE}, 'v'},
    {{"help", no_argument, NULL, G_HELP}, 'h'},
    {{"version", no_argument, NULL, G_VERSION}, 'V'},
};
enum { N_GLOBALS = sizeof(globals) / sizeof(globals[0]) };

static cli_t cli;
static const char *auth_from = "ZKR_AUTH";

/* Applies global option g (a G_ value) with its argument: -1 to go on,
 * else the exit status (0 after --help or --version). */
static int global_opt(int g, const char *arg)
{
    static char auth_buf[1024];
    long v;
    int rc;

    switch (g) {
    case G_SERVER:
        cli.hosts = arg;
        return -1;
    case G_TIMEOUT:
        if (cli_parse_int(arg, 1, 3600000, &v) != 0)
            return cli_usage_error(NULL, "invalid --session-timeout '%s'", arg);
        cli.session_timeout_ms = (int)v;
        return -1;
    case G_CONNECT_TIMEOUT:
        if (cli_parse_int(arg, 1, 3600000, &v) != 0)
            return cli_usage_error(NULL, "invalid --connect-timeout '%s'", arg);
        cli.connect_timeout_ms = (int)v;
        return -1;
    case G_AUTH:
        cli.auth = arg;
        auth_from = "--auth";
        return -1;
    case G_AUTH_FILE:
        if ((rc = read_auth_file(arg, auth_buf, sizeof(auth_buf))) != 0)
            return rc;
        cli.auth = auth_buf;
        auth_from = "--auth-file";
        return -1;
    case G_VERBOSE:
        cli.verbose = 1;
        return -1;
    case G_HELP:
        usage(stdout);
        return 0;
    default:
        printf("zkr %s\n", PACKAGE_VERSION);
        return 0;
    }
}

/* After the last option: $ZKR_AUTH, and the checks of the global options
 * that need them all. 0 or an exit status. */
static int globals_done(void)
{
    const char *env = getenv("ZKR_AUTH");

    if (cli.auth == NULL && env != NULL && *env != '\0')
        cli.auth = env;
    if (cli.auth != NULL && !auth_valid(cli.auth))
        return cli_usage_error(NULL, "%s wants USER:PASSWORD", auth_from);
    /* The client's own log would drown our messages; -v shows its errors. */
    zoo_set_debug_level(cli.verbose ? ZOO_LOG_LEVEL_ERROR : 0);
    if (*cli.hosts == '\0')
        return cli_usage_error(NULL, "empty server list");
    return parse_servers(&cli);
}

/* Does the subcommand's table (shortopts, lopts) have global option k's
 * name or letter? Then the subcommand's meaning wins there. */
static int shadowed(int k, const char *shortopts, const struct option *lopts)
{
    int letter = globals[k].letter;

    if (letter != 0 && strchr(shortopts, letter) != NULL)
        return 1;
    for (const struct option *o = lopts; o->name != NULL; o++)
        if (strcmp(o->name, globals[k].lo.name) == 0 ||
            (letter != 0 && o->val == letter))
            return 1;
    return 0;
}

int cli_getopt(int argc, char **argv, const char *shortopts,
               const struct option *lopts)
{
    static struct option all[64];
    static char so[64];
    int n = 0, opt, rc;
    size_t m = strlen(shortopts);

    memcpy(so, shortopts, m + 1);
    while (lopts[n].name != NULL && n < 64 - N_GLOBALS - 1) {
        all[n] = lopts[n];
        n++;
    }
    for (int k = 0; k < N_GLOBALS; k++) {
        if (shadowed(k, shortopts, lopts))
            continue;
        all[n++] = globals[k].lo;
        if (globals[k].letter != 0 && m + 3 < sizeof(so)) {
            so[m++] = (char)globals[k].letter;
            if (globals[k].lo.has_arg == required_argument)
                so[m++] = ':';
            so[m] = '\0';
        }
    }
    memset(&all[n], 0, sizeof(all[n]));
    for (;;) {
        int g = 0;

        opt = getopt_long(argc, argv, so, all, NULL);
        if (opt == -1) {
            if ((rc = globals_done()) != 0)
                exit(rc);
            return -1;
        }
        if (opt >= G_SERVER && opt <= G_VERSION)
            g = opt;
        for (int k = 0; k < N_GLOBALS && g == 0; k++)
            if (opt == globals[k].letter && !shadowed(k, shortopts, lopts))
                g = globals[k].lo.val;
        if (g == 0)
            return opt;
        if ((rc = global_opt(g, optarg)) >= 0)
            exit(rc);
    }
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(const cli_t *, int, char **);
    } subs[] = {
        {"lock", cli_lock},       {"sem", cli_sem},
        {"elect", cli_elect},     {"inspect", cli_inspect},
        {"release", cli_release}, {"exporter", cli_exporter},
        {"queue", cli_queue},     {"counter", cli_counter},
        {"barrier", cli_barrier}, {"member", cli_member},
        {"members", cli_members}, {"watch", cli_watch},
    };
    struct option lopts[N_GLOBALS + 1];
    const char *env = getenv("ZKR_SERVER");
    int opt, rc;

    for (int k = 0; k < N_GLOBALS; k++)
        lopts[k] = globals[k].lo;
    memset(&lopts[N_GLOBALS], 0, sizeof(lopts[N_GLOBALS]));
    cli.hosts = env != NULL && *env != '\0' ? env : DEFAULT_HOSTS;
    cli.session_timeout_ms = 10000;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+s:va:hV", lopts, NULL)) != -1) {
        int g = opt;

        for (int k = 0; k < N_GLOBALS; k++)
            if (opt == globals[k].letter)
                g = globals[k].lo.val;
        if (g < G_SERVER || g > G_VERSION)
            return cli_usage_error(NULL, "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        if ((rc = global_opt(g, optarg)) >= 0)
            return rc;
    }
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    /* The subcommand's options may include global ones (cli_getopt()),
     * which it checks once it has them all. */
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(argv[optind], subs[i].name) == 0)
            return subs[i].fn(&cli, argc - optind, argv + optind);
    return cli_usage_error(NULL, "unknown subcommand '%s'", argv[optind]);
}
