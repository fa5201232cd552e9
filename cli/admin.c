/* zkr inspect and zkr release --force: the operator's view of a queue and
 * the audited eviction of a holder. */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <locale.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "cli.h"

#define AUDIT_DIR "/zkr/audit"

/* ZooKeeper's permission bits (zookeeper.h has them as variables, which
 * static initialisers cannot use). */
enum {
    PERM_READ = 1,
    PERM_WRITE = 2,
    PERM_CREATE = 4,
    PERM_DELETE = 8,
    PERM_ADMIN = 16,
    PERM_ALL = 31
};

int64_t cli_wall_ms(void)
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

/* An entry's mode, from the marker in its name (the markers of
 * src/base/names.c): "read" (__READ__ Curator, __rlock__ kazoo), "write"
 * (__WRIT__: zkr lock --write, Curator's write lock), "permit" (a
 * semaphore's), "candidate" (-latch-: an election's), else "mutex" (-lock-:
 * zkr lock, Curator InterProcessMutex; __lock__: kazoo Lock and WriteLock;
 * x-SID-: ZooKeeper's contrib recipes), which zkr and kazoo readers treat
 * as a writer and Curator's read/write lock ignores. */
static const char *mode_of(const zkr_contender_t *e)
{
    const char *name = basename_of(e->node);

    if (strstr(name, "__READ__") != NULL || strstr(name, "__rlock__") != NULL)
        return "read";
    if (strstr(name, "__WRIT__") != NULL)
        return "write";
    if (strstr(name, "-latch-") != NULL)
        return "candidate";
    if (strstr(name, "-permits-") != NULL)
        return "permit";
    return "mutex";
}

/* The recipe a queue belongs to, from its entries' modes. */
const char *cli_queue_kind(const zkr_contender_t *v, int n)
{
    const char *m;

    if (n == 0)
        return "none";
    m = mode_of(&v[0]);
    if (strcmp(m, "candidate") == 0)
        return "election";
    if (strcmp(m, "permit") == 0)
        return "semaphore";
    for (int i = 0; i < n; i++) {
        m = mode_of(&v[i]);
        if (strcmp(m, "read") == 0 || strcmp(m, "write") == 0)
            return "rwlock";
    }
    return "lock";
}

/* A semaphore's permit count, from its first entry's name
 * ("-permits-N-"), or 0. */
static long permits_of(const zkr_contender_t *v, int n)
{
    const char *m = n > 0 ? strstr(basename_of(v[0].node), "-permits-") : NULL;

    return m != NULL ? strtol(m + strlen("-permits-"), NULL, 10) : 0;
}

static int list(const cli_t *c, zkr_session_t *s, const char *path,
                zkr_contender_t **v, int *n, int *holding)
{
    int rc = zkr_contenders_list(s, path, v, n);

    if (rc == ZBADARGUMENTS)
        return cli_usage_error(NULL, "invalid PATH '%s'", path);
    if (rc == ZNOAUTH) {
        cli_err("%s: permission denied: its ACL does not let %s read it "
                "(ZooKeeper at %s)",
                path, c->auth != NULL ? "these credentials" : "anonymous",
                c->hosts);
        return CLI_EXIT_NOPERM;
    }
    if (rc != 0)
        return cli_zk_error(c, rc, "%s: cannot list", path);
    *holding = zkr_contenders_holding(*v, *n);
    if (*holding < 0) {
        zkr_contenders_free(*v, *n);
        cli_err("out of memory");
        return CLI_EXIT_OSERR;
    }
    return 0;
}

/* Session ids look the same everywhere: ZKR_SESSION_ID, --json and the
 * sequencer (zkr_sequencer_format()) spell them as 16 hex digits. */
static void session_hex(int64_t id, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, (uint64_t)id);
}

static json_t *json_entry(const zkr_contender_t *e, int64_t now)
{
    int64_t age = now - e->ctime_ms;
    char sid[17];
    json_t *o = json_object();

    session_hex(e->session_id, sid);
    if (o == NULL || cli_json_set_text(o, "node", e->node) != 0 ||
        cli_json_set_text(o, "id", e->id != NULL ? e->id : "") != 0 ||
        json_object_set_new(o, "mode", json_string(mode_of(e))) != 0 ||
        json_object_set_new(o, "token", json_integer(e->czxid)) != 0 ||
        json_object_set_new(o, "session", json_string(sid)) != 0 ||
        json_object_set_new(o, "seq", json_integer(e->seq)) != 0 ||
        json_object_set_new(o, "age_ms", json_integer(age > 0 ? age : 0)) !=
            0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A lock-delay in force (zkr_delay_closed()): its end, or 0, and the
 * token (czxid) of the contender serving it, or 0; and the token of an
 * election's first candidate that does not lead yet, or 0. */
typedef struct closed {
    int64_t until_ms;
    char cause[32];
    int64_t czxid;
    int64_t unled;
} closed_t;

/* The delayed contender's token, from its zkr-closed record in path's data
 * (docs/design/lock-delay.md, 1.2): granted by the queue's rule, it holds
 * nothing yet. 0 if it cannot be read. */
static int64_t closed_czxid(zkr_session_t *s, const char *path)
{
    zhandle_t *zh = zkr_session_handle(s);
    char buf[257], *p;
    int len = (int)sizeof(buf) - 1;
    long long czxid = 0;

    if (zh == NULL || zoo_get(zh, path, 0, buf, &len, NULL) != ZOK || len < 0)
        return 0;
    buf[len] = '\0';
    if (strncmp(buf, "zkr-closed ", 11) != 0 ||
        (p = strstr(buf, " czxid=")) == NULL ||
        sscanf(p + 7, "%lld", &czxid) != 1)
        return 0;
    return czxid;
}

/* Is e the contender serving the delay (shown as "delayed", not holder)? */
static int is_delayed(const zkr_contender_t *e, const closed_t *cl)
{
    return (cl->until_ms > 0 && cl->czxid > 0 && e->czxid == cl->czxid) ||
           (cl->unled != 0 && e->czxid == cl->unled);
}

/* How many of the first holding the rule grants really hold. */
static int really_holding(const zkr_contender_t *v, int holding,
                          const closed_t *cl)
{
    int k = holding;

    for (int i = 0; i < holding; i++)
        k -= is_delayed(&v[i], cl);
    return k;
}

/* What a delay's cause word means, for people. */
static const char *cause_text(const char *cause)
{
    if (strcmp(cause, "unreleased") == 0)
        return "the node before the next holder went without a release: "
               "session expired, process killed, or forced";
    return cause;
}

static int print_json(const char *path, const zkr_contender_t *v, int n,
                      int holding, const closed_t *cl)
{
    int64_t now = cli_wall_ms();
    json_t *top = json_object(), *holders = json_array(),
           *waiters = json_array();
    int bad = top == NULL || holders == NULL || waiters == NULL;

    bad = bad || cli_json_set_text(top, "path", path) != 0 ||
          json_object_set_new(top, "kind", json_string(cli_queue_kind(v, n))) !=
              0;
    if (!bad && strcmp(cli_queue_kind(v, n), "semaphore") == 0)
        bad = json_object_set_new(top, "permits",
                                  json_integer(permits_of(v, n))) != 0;
    if (!bad && cl->until_ms > 0)
        bad = json_object_set_new(top, "closed_until_ms",
                                  json_integer(cl->until_ms)) != 0 ||
              cli_json_set_text(top, "closed_cause", cl->cause) != 0;
    for (int i = 0; !bad && i < n; i++) {
        json_t *o = json_entry(&v[i], now);

        if (o != NULL && is_delayed(&v[i], cl) &&
            json_object_set_new(o, "delayed", json_true()) != 0) {
            json_decref(o);
            o = NULL;
        }
        bad = json_array_append_new(
                  i < holding && !is_delayed(&v[i], cl) ? holders : waiters,
                  o) != 0;
    }
    if (!bad) {
        bad = json_object_set(top, "holders", holders) != 0 ||
              json_object_set(top, "waiters", waiters) != 0 ||
              json_dumpf(top, stdout, JSON_COMPACT) != 0 ||
              fputc('\n', stdout) == EOF;
    }
    json_decref(holders);
    json_decref(waiters);
    json_decref(top);
    if (bad)
        cli_err("cannot write the JSON output: out of memory or stdout "
                "failed");
    return bad ? CLI_EXIT_OSERR : 0;
}

/* The columns a string takes on a terminal: cli_escaped() output is valid
 * UTF-8 without control or format characters, decoded here and measured
 * by wcwidth() in the C.UTF-8 locale whatever the user's locale (an East
 * Asian wide character takes two columns, a combining mark none); one
 * column per character when that locale is missing. */
static int text_width(const char *s)
{
    static locale_t utf8;
    static int tried;
    const unsigned char *p = (const unsigned char *)s;
    locale_t old = (locale_t)0;
    int w = 0;

    if (!tried) {
        tried = 1;
        utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    }
    if (utf8 != (locale_t)0)
        old = uselocale(utf8);
    while (*p != '\0') {
        int len = *p < 0x80 ? 1 : *p < 0xe0 ? 2 : *p < 0xf0 ? 3 : 4, cw = 1;
        wchar_t c = len == 1 ? *p : *p & (0x7f >> len);

        for (int i = 1; i < len && (p[i] & 0xc0) == 0x80; i++)
            c = (wchar_t)((c << 6) | (p[i] & 0x3f));
        if (utf8 != (locale_t)0 && (cw = wcwidth(c)) < 0)
            cw = 1;
        w += cw;
        for (p++; (*p & 0xc0) == 0x80; p++)
            ;
    }
    if (utf8 != (locale_t)0)
        uselocale(old);
    return w;
}

/* Prints s padded with spaces to width columns, then a space. */
static void print_cell(const char *s, int width)
{
    int w = text_width(s);

    fputs(s, stdout);
    printf("%*s", width > w ? width - w : 0, "");
    putchar(' ');
}

enum { COL_ROLE, COL_MODE, COL_NODE, COL_ID, COL_TOKEN, COL_SESSION, COLS };

/* The table of entries: each column as wide as its heading or its widest
 * value, so that a long node name (a semaphore's) or identifier never
 * pushes the columns after it out of line. */
static int print_rows(const zkr_contender_t *v, int n, int holding,
                      const closed_t *cl)
{
    static const char *const head[COLS] = {"ROLE", "MODE",  "NODE",
                                           "ID",   "TOKEN", "SESSION"};
    int64_t now = cli_wall_ms();
    char *(*cell)[COLS] = n > 0 ? calloc((size_t)n, sizeof(*cell)) : NULL;
    int width[COLS], status = 0;

    if (n == 0)
        return 0;
    if (cell == NULL)
        return CLI_EXIT_OSERR;
    for (int k = 0; k < COLS; k++)
        width[k] = text_width(head[k]);
    for (int i = 0; i < n && status == 0; i++) {
        char tok[24], sid[17];

        snprintf(tok, sizeof(tok), "%" PRId64, v[i].czxid);
        session_hex(v[i].session_id, sid);
        cell[i][COL_ROLE] = strdup(is_delayed(&v[i], cl) ? "delayed"
                                   : i < holding         ? "holder"
                                                         : "waiter");
        cell[i][COL_MODE] = strdup(mode_of(&v[i]));
        cell[i][COL_NODE] = cli_escaped(basename_of(v[i].node));
        cell[i][COL_ID] = cli_escaped(v[i].id != NULL ? v[i].id : "");
        cell[i][COL_TOKEN] = strdup(tok);
        cell[i][COL_SESSION] = strdup(sid);
        for (int k = 0; k < COLS; k++) {
            if (cell[i][k] == NULL) {
                status = CLI_EXIT_OSERR;
                break;
            }
            if (text_width(cell[i][k]) > width[k])
                width[k] = text_width(cell[i][k]);
        }
    }
    if (status == 0) {
        for (int k = 0; k < COLS; k++)
            print_cell(head[k], width[k]);
        puts("AGE");
        for (int i = 0; i < n; i++) {
            int64_t age = now - v[i].ctime_ms;

            if (age < 0)
                age = 0;
            for (int k = 0; k < COLS; k++)
                print_cell(cell[i][k], width[k]);
            printf("%" PRId64 ".%01" PRId64 "s\n", age / 1000,
                   (age % 1000) / 100);
        }
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < COLS; k++)
            free(cell[i][k]);
    free(cell);
    return status;
}

/* The table escapes what it prints (cli_escape()): a node name or an
 * identifier with a newline or an escape sequence cannot split a row or
 * reach the terminal. */
static int print_text(const char *path, const zkr_contender_t *v, int n,
                      int holding, const closed_t *cl)
{
    char *p = cli_escaped(path);
    const char *kind = cli_queue_kind(v, n);
    int held = really_holding(v, holding, cl);

    if (p == NULL)
        return CLI_EXIT_OSERR;
    if (strcmp(kind, "semaphore") == 0)
        printf("%s: semaphore of %ld permits, %d holding, %d waiting\n", p,
               permits_of(v, n), held, n - held);
    else
        printf("%s: %s, %d holding, %d waiting\n", p, kind, held, n - held);
    free(p);
    if (cl->until_ms > 0) {
        char when[32], *why = cli_escaped(cause_text(cl->cause));
        time_t t = (time_t)(cl->until_ms / 1000);
        struct tm tm;

        if (why == NULL)
            return CLI_EXIT_OSERR;
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        printf("closed until %s.%03dZ (lock-delay: %s)\n", when,
               (int)(cl->until_ms % 1000), why);
        free(why);
    }
    return print_rows(v, n, holding, cl);
}

/* Whether path is a work queue (zkr queue): its data says so ("zkr-workq
 * ..."), or, should that have been written by someone else, its layout
 * does (a line of consumers or a level). A lock's directory has neither:
 * its children are contenders. */
static int is_workq_on(zhandle_t *zh, void *arg)
{
    static const char *const kids[] = {"consumers", "q0", "q1", "q2", "q3"};
    const char *path = arg;
    char buf[64], sub[ZKR_PATH_MAX + 16];
    int len = (int)sizeof(buf) - 1;
    struct Stat st;

    if (zoo_get(zh, path, 0, buf, &len, NULL) == ZOK && len >= 9 &&
        memcmp(buf, "zkr-workq", 9) == 0)
        return 1;
    for (size_t i = 0; i < sizeof(kids) / sizeof(kids[0]); i++) {
        snprintf(sub, sizeof(sub), "%s/%s", path, kids[i]);
        if (zoo_exists(zh, sub, 0, &st) == ZOK)
            return 1;
    }
    return 0;
}

/* Through zkr_session_with_handle(): the exporter's session re-creates its
 * handle after LOST. */
int cli_is_workq(zkr_session_t *s, const char *path)
{
    return zkr_session_with_handle(s, is_workq_on, (void *)path) == 1;
}

/* Whether path exists: a typo must not look like an idle lock (whose path
 * exists, with no children). Says so when it does not; any other answer
 * (an ACL, a lost connection) is left to the listing, which reports it. */
static int path_exists(const cli_t *c, zkr_session_t *s, const char *path)
{
    zhandle_t *zh = zkr_session_handle(s);
    struct Stat st;
    char *p;

    if (zh == NULL || zoo_exists(zh, path, 0, &st) != ZNONODE)
        return 1;
    p = cli_escaped(path);
    cli_err("inspect: %s does not exist (ZooKeeper at %s)",
            p != NULL ? p : "PATH", c->hosts);
    free(p);
    return 0;
}

int cli_inspect(const cli_t *c, int argc, char **argv)
{
    static const struct option lopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"items", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    zkr_session_t *s = NULL;
    zkr_contender_t *v = NULL;
    closed_t cl = {0, "", 0, 0};
    int json = 0, n = 0, holding = 0, opt, status;
    long items = 20;

    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+jh", lopts)) != -1) {
        if (opt == 'j') {
            json = 1;
        } else if (opt == 'i') {
            if (cli_parse_int(optarg, 0, 100000, &items) != 0)
                return cli_usage_error(
                    "inspect", "--items wants 0..100000, not '%s'", optarg);
        } else if (opt == 'h') {
            printf("usage: zkr inspect [--json] [--items N] PATH\n\n"
                   "Shows the holders and waiters of PATH's queue, and "
                   "whether a lock-delay\n"
                   "keeps it closed (\"closed until ...\"). For a work "
                   "queue (zkr queue): its\n"
                   "length, its first items in serve order (level, "
                   "deliveries, claimed by whom),\n"
                   "their claims, and the consumers waiting for items.\n\n"
                   "  -j, --json   one JSON object on one line (bytes that "
                   "are not UTF-8:\n"
                   "               U+FFFD, exact bytes in KEY_hex; data "
                   "ends at a NUL)\n"
                   "      --items N\n"
                   "               a work queue's items shown (default "
                   "20)\n"
                   "  -h, --help   this help\n\n"
                   "Exit status: 0; 64 usage; 66 PATH does not exist; 69 no "
                   "server or session;\n"
                   "71 other error; 77 permission denied. See zkr(1).\n");
            return 0;
        } else {
            return cli_usage_error("inspect", "unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("inspect", "wants exactly one PATH");
    if ((status = cli_check_args("inspect", argv[optind], NULL)) != 0 ||
        (status = cli_open_admin_session(c, &s)) != 0)
        return status;
    if (!path_exists(c, s, argv[optind])) {
        zkr_session_free(s);
        return CLI_EXIT_NOINPUT;
    }
    if (cli_is_workq(s, argv[optind])) {
        status = cli_inspect_workq(c, s, argv[optind], (int)items, json);
        zkr_session_free(s);
        return status;
    }
    status = list(c, s, argv[optind], &v, &n, &holding);
    /* Shown when it can be read; the queue is the answer either way. */
    if (status == 0 && zkr_delay_closed(s, argv[optind], &cl.until_ms, cl.cause,
                                        sizeof(cl.cause)) != 1)
        cl.until_ms = 0;
    if (status == 0 && cl.until_ms > 0)
        cl.czxid = closed_czxid(s, argv[optind]);
    /* An election with candidates and no holder: the first one says in
     * its node that it does not lead yet (waiting out its lock-delay,
     * docs/design/lock-delay.md 1.7). */
    if (status == 0 && n > 0 && holding == 0 &&
        strcmp(cli_queue_kind(v, n), "election") == 0)
        cl.unled = v[0].czxid;
    if (status == 0) {
        if (json)
            status = print_json(argv[optind], v, n, holding, &cl);
        else
            status = print_text(argv[optind], v, n, holding, &cl);
        zkr_contenders_free(v, n);
    }
    zkr_session_free(s);
    return status;
}

/* ---------------------------------------------------- identities, ACLs */

/* SHA-1 (FIPS 180-4), only to name the digest identity the server derives
 * from --auth: the id "digest:USER:base64(sha1(USER:PASSWORD))" is what
 * ZooKeeper's digest provider gives the session, and what ACLs name. */
static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
    uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    for (int i = 0; i < 80; i++) {
        uint32_t f, k, t;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

static void sha1(const char *msg, size_t len, unsigned char out[20])
{
    uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476,
                     0xc3d2e1f0};
    unsigned char blk[64];
    size_t done = 0;
    uint64_t bits = (uint64_t)len * 8;

    for (; len - done >= 64; done += 64)
        sha1_block(h, (const unsigned char *)msg + done);
    memset(blk, 0, sizeof(blk));
    memcpy(blk, msg + done, len - done);
    blk[len - done] = 0x80;
    if (len - done >= 56) {
        sha1_block(h, blk);
        memset(blk, 0, sizeof(blk));
    }
    for (int i = 0; i < 8; i++)
        blk[63 - i] = (unsigned char)(bits >> (8 * i));
    sha1_block(h, blk);
    for (int i = 0; i < 20; i++)
        out[i] = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* The identity the server authenticated for this session: the digest id
 * derived from --auth, or "" when there is none (anonymous). ZooKeeper's
 * digest provider accepts any USER:PASSWORD, so the id names whoever knows
 * that password, not a registered user: it means something only where an
 * ACL names it. */
static void auth_id(const cli_t *c, char *buf, size_t len)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *colon = c->auth != NULL ? strchr(c->auth, ':') : NULL;
    unsigned char d[21] = {0};
    char enc[29];
    int o = 0;

    if (colon == NULL) {
        snprintf(buf, len, "%s", "");
        return;
    }
    sha1(c->auth, strlen(c->auth), d);
    for (int i = 0; i < 21; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 |
                     (i + 2 < 21 ? d[i + 2] : 0);
        enc[o++] = b64[v >> 18 & 63];
        enc[o++] = b64[v >> 12 & 63];
        enc[o++] = b64[v >> 6 & 63];
        enc[o++] = b64[v & 63];
    }
    /* 20 bytes: 27 characters and one '=' of padding. */
    enc[27] = '=';
    enc[28] = '\0';
    snprintf(buf, len, "digest:%.*s:%s", (int)(colon - c->auth), c->auth, enc);
}

static void perm_letters(int perms, char out[6])
{
    static const struct {
        int bit;
        char c;
    } map[] = {{PERM_CREATE, 'c'},
               {PERM_DELETE, 'd'},
               {PERM_READ, 'r'},
               {PERM_WRITE, 'w'},
               {PERM_ADMIN, 'a'}};
    int n = 0;

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (perms & map[i].bit)
            out[n++] = map[i].c;
    out[n] = '\0';
}

static int is_world(const struct Id *id)
{
    return strcmp(id->scheme, "world") == 0 && strcmp(id->id, "anyone") == 0;
}

/* Whether the ACL `have` grants more than `want` does: each entry may
 * grant at most what `want` grants the same identity, where want's
 * "auth" entry stands for `self` (the session's own id, "scheme:id") and
 * any identity `want` does not name gets `others`. Describes the first
 * excess as "scheme:id:perms" in what. */
static int acl_weaker(const struct ACL_vector *have,
                      const struct ACL_vector *want, const char *self,
                      int others, char *what, size_t len)
{
    for (int i = 0; i < have->count; i++) {
        const struct ACL *e = &have->data[i];
        char full[512], letters[6];
        int ok = others;

        snprintf(full, sizeof(full), "%s:%s", e->id.scheme, e->id.id);
        for (int j = 0; j < want->count; j++) {
            const struct ACL *w = &want->data[j];
            if ((is_world(&w->id) && is_world(&e->id)) ||
                (strcmp(w->id.scheme, "auth") == 0 && self[0] != '\0' &&
                 strcmp(full, self) == 0) ||
                (strcmp(w->id.scheme, e->id.scheme) == 0 &&
                 strcmp(w->id.id, e->id.id) == 0))
                ok = w->perms;
        }
        if (e->perms & ~ok) {
            perm_letters(e->perms, letters);
            snprintf(what, len, "%s:%s", full, letters);
            return 1;
        }
    }
    return 0;
}

int cli_check_path_acl(const cli_t *c, zkr_session_t *s, const char *path,
                       const char *acl_name)
{
    const struct ACL_vector *want = cli_acl(acl_name);
    struct ACL_vector have = {0, NULL};
    char self[512], what[600];
    int rc, weaker;

    if (want == NULL || want == &ZOO_OPEN_ACL_UNSAFE)
        return 0;
    rc = zoo_get_acl(zkr_session_handle(s), path, &have, NULL);
    if (rc != ZOK)
        return cli_zk_error(c, rc, "%s: cannot read its ACL", path);
    auth_id(c, self, sizeof(self));
    weaker = acl_weaker(&have, want, self, 0, what, sizeof(what));
    deallocate_ACL_vector(&have);
    if (weaker) {
        cli_err("%s: its ACL is weaker than --acl %s: it grants %s, so "
                "others could delete a holder's node or queue before it; "
                "change the ACL of %s (setAcl) or use another PATH",
                path, acl_name, what, path);
        return CLI_EXIT_NOPERM;
    }
    return 0;
}

/* ------------------------------------------------------------- release */

/* The audit trail is append-only: anyone may read it and add records;
 * only the administrator identities (every identity the ACL of AUDIT_DIR
 * names besides world:anyone) may change or delete records. The
 * directories are created with the operator's own identity as the
 * administrator ("auth"), or with none for an anonymous operator. */
static struct ACL audit_dir_admin[] = {
    {PERM_READ | PERM_CREATE, {"world", "anyone"}},
    {PERM_ALL, {"auth", ""}},
};
static struct ACL_vector audit_dir_acl = {2, audit_dir_admin};
static struct ACL_vector audit_dir_acl_anon = {1, audit_dir_admin};

static int make_audit_dir(const cli_t *c, zhandle_t *zh)
{
    static const char *const dirs[] = {"/zkr", AUDIT_DIR};

    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        int rc = zoo_create(
            zh, dirs[i], NULL, -1,
            c->auth != NULL ? &audit_dir_acl : &audit_dir_acl_anon, 0, NULL, 0);
        if (rc != ZOK && rc != ZNODEEXISTS)
            return rc;
    }
    return ZOK;
}

/* A record: anyone reads it, no one (but ZooKeeper's super user) can
 * change it or its ACL; the administrators of AUDIT_DIR can delete it. */
static struct ACL audit_record_entry[] = {{PERM_READ, {"world", "anyone"}}};
static struct ACL_vector audit_record_acl = {1, audit_record_entry};

/* Makes sure AUDIT_DIR exists and that its ACL is append-only for
 * world:anyone. 0 or an exit status (said why). */
static int audit_dir_check(const cli_t *c, zhandle_t *zh)
{
    struct ACL_vector have = {0, NULL};
    char what[600];
    int rc, weaker;

    rc = zoo_get_acl(zh, AUDIT_DIR, &have, NULL);
    if (rc == ZNONODE && (rc = make_audit_dir(c, zh)) == ZOK)
        rc = zoo_get_acl(zh, AUDIT_DIR, &have, NULL);
    if (rc != ZOK)
        return cli_zk_error(c, rc,
                            "cannot prepare the audit trail %s (nothing was "
                            "changed)",
                            AUDIT_DIR);
    /* Identities other than world:anyone are administrators. */
    weaker = acl_weaker(&have, &audit_dir_acl_anon, "", PERM_ALL, what,
                        sizeof(what));
    deallocate_ACL_vector(&have);
    if (weaker) {
        cli_err("%s: its ACL grants %s, so anyone could delete or rewrite "
                "audit records; an administrator must restrict it (e.g. "
                "setAcl %s world:anyone:cr,digest:ADMIN:HASH:cdrwa); nothing "
                "was changed",
                AUDIT_DIR, what, AUDIT_DIR);
        return CLI_EXIT_NOPERM;
    }
    return 0;
}

/* Which identities of PATH's ACL allowed this session to delete a child
 * of it (DELETE on the parent): "world:anyone" means the operator's
 * identity was not needed at all. A new JSON array, or NULL. */
static json_t *delete_allowed_by(zhandle_t *zh, const char *path,
                                 const char *self)
{
    struct ACL_vector have = {0, NULL};
    json_t *a = json_array();

    if (a != NULL && zoo_get_acl(zh, path, &have, NULL) == ZOK) {
        for (int i = 0; i < have.count; i++) {
            char full[512];
            const struct ACL *e = &have.data[i];
            snprintf(full, sizeof(full), "%s:%s", e->id.scheme, e->id.id);
            if ((e->perms & PERM_DELETE) &&
                (is_world(&e->id) || strcmp(full, self) == 0))
                json_array_append_new(a, cli_json_text(full));
        }
        deallocate_ACL_vector(&have);
    }
    return a;
}

/* A fresh random id for a record, so that its name is known before the
 * transaction that writes it is sent. */
static void new_uuid(char out[37])
{
    unsigned char r[16];

    if (getentropy(r, sizeof(r)) != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        for (int i = 0; i < 16; i++)
            r[i] = (unsigned char)((ts.tv_nsec >> (i % 4 * 8)) ^ getpid() ^
                                   (i * 37));
    }
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x"
             "%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
             r[11], r[12], r[13], r[14], r[15]);
}

/* The record: what the server vouched for (the session's authenticated
 * identity, the ACL entries that allowed the delete, the holder's node as
 * listed) at the top level, what only the operator's machine says under
 * "claimed". `action` is "release --force", or the marker that blocks a
 * release whose outcome was unknown. Valid JSON whatever the bytes of the
 * holder's identifier or the reason (see cli_json_set_text()). */
static char *audit_record(const cli_t *c, zhandle_t *zh, const char *path,
                          const zkr_contender_t *h, const char *reason,
                          const char *uuid, const char *action)
{
    char self[512], host[256] = "?", when[64], sid[17];
    struct passwd *pw = getpwuid(getuid());
    time_t t = time(NULL);
    struct tm tm;
    json_t *rec = json_object(), *claimed = json_object();
    char *out = NULL;

    auth_id(c, self, sizeof(self));
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    session_hex(h->session_id, sid);
    if (rec != NULL && claimed != NULL &&
        json_object_set_new(rec, "id", json_string(uuid)) == 0 &&
        cli_json_set_text(rec, "action", action) == 0 &&
        cli_json_set_text(rec, "path", path) == 0 &&
        cli_json_set_text(rec, "node", h->node) == 0 &&
        cli_json_set_text(rec, "holder_id", h->id != NULL ? h->id : "") == 0 &&
        json_object_set_new(rec, "token", json_integer(h->czxid)) == 0 &&
        json_object_set_new(rec, "holder_session", json_string(sid)) == 0 &&
        cli_json_set_text(rec, "reason", reason) == 0 &&
        json_object_set_new(rec, "operator",
                            self[0] != '\0' ? cli_json_text(self)
                                            : json_null()) == 0 &&
        json_object_set_new(rec, "delete_allowed_by",
                            delete_allowed_by(zh, path, self)) == 0 &&
        json_object_set_new(claimed, "time", json_string(when)) == 0 &&
        cli_json_set_text(claimed, "os_user", pw != NULL ? pw->pw_name : "?") ==
            0 &&
        cli_json_set_text(claimed, "host", host) == 0 &&
        json_object_set_new(claimed, "pid", json_integer(getpid())) == 0 &&
        json_object_set(rec, "claimed", claimed) == 0)
        out = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(claimed);
    json_decref(rec);
    return out;
}
static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum { OUT_APPLIED, OUT_NOT_APPLIED, OUT_UNKNOWN };

/* Finds out whether the transaction that writes the record `name` (with
 * data `rec`) was applied, after its reply was lost: creates the same
 * name with a marker. If the create succeeds, the transaction was not
 * applied and now never can be (its create would fail on the existing
 * name, so its delete with it); if the name exists, its data says whose
 * it is. Retries across connection loss until the deadline. */
static int resolve(const cli_t *c, zkr_session_t **s, const char *name,
                   const char *rec, const char *marker)
{
    int64_t deadline = mono_ms() + 4 * (int64_t)c->session_timeout_ms;

    while (mono_ms() < deadline) {
        char *buf = NULL;
        int len, rc, left = (int)(deadline - mono_ms());
        struct Stat st;
        zhandle_t *zh;

        rc = zkr_session_wait_connected(*s, left > 0 ? left : 0);
        if (rc == ZKR_ETIMEDOUT)
            break;
        if (rc != 0) {
            /* Session gone (the old one expired): a new one can still read
             * the record. */
            zkr_session_free(*s);
            *s = NULL;
            if (cli_open_admin_session(c, s) != 0)
                return OUT_UNKNOWN;
            continue;
        }
        zh = zkr_session_handle(*s);
        rc = zoo_create(zh, name, marker, (int)strlen(marker),
                        &audit_record_acl, ZOO_PERSISTENT, NULL, 0);
        if (rc == ZOK)
            return OUT_NOT_APPLIED;
        if (rc == ZNODEEXISTS) {
            len = (int)strlen(rec) + (int)strlen(marker) + 16;
            if ((buf = malloc((size_t)len)) == NULL)
                return OUT_UNKNOWN;
            rc = zoo_get(zh, name, 0, buf, &len, &st);
            if (rc == ZOK) {
                int which = OUT_UNKNOWN;
                if ((size_t)len == strlen(rec) && memcmp(buf, rec, len) == 0)
                    which = OUT_APPLIED;
                else if ((size_t)len == strlen(marker) &&
                         memcmp(buf, marker, len) == 0)
                    which = OUT_NOT_APPLIED; /* our marker, reply lost */
                free(buf);
                return which;
            }
            free(buf);
        }
        if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT &&
            rc != ZSESSIONEXPIRED && rc != ZSESSIONMOVED)
            return OUT_UNKNOWN;
        usleep(100 * 1000);
    }
    return OUT_UNKNOWN;
}

/* Deletes the holder's node and writes the audit record in one
 * transaction: either both happen or neither. The record's name carries a
 * UUID chosen before sending, so that a lost reply can be resolved. */
static int evict(const cli_t *c, zkr_session_t **s, const char *path,
                 const zkr_contender_t *h, const char *reason)
{
    zhandle_t *zh = zkr_session_handle(*s);
    char *rec = NULL, *marker = NULL;
    char uuid[37], name[128], when[32], self[512];
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    time_t t = time(NULL);
    struct tm tm;
    int rc, status = CLI_EXIT_OSERR, answered, outcome;

    if ((rc = audit_dir_check(c, zh)) != 0)
        return rc;
    auth_id(c, self, sizeof(self));
    new_uuid(uuid);
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
    /* Sorted by name is sorted by the operator's clock. */
    snprintf(name, sizeof(name), "%s/release-%s-%s", AUDIT_DIR, when, uuid);
    rec = audit_record(c, zh, path, h, reason, uuid, "release --force");
    marker = audit_record(c, zh, path, h, reason, uuid,
                          "release --force: not applied (reply lost; this "
                          "record blocks it)");
    if (rec == NULL || marker == NULL) {
        cli_err("out of memory");
        goto out;
    }
    /* The results are filled only when the server answered. */
    res[0].err = res[1].err = 1;
    zoo_delete_op_init(&ops[0], h->node, -1);
    zoo_create_op_init(&ops[1], name, rec, (int)strlen(rec), &audit_record_acl,
                       ZOO_PERSISTENT, NULL, 0);
    rc = zoo_multi(zh, 2, ops, res);
    answered = rc == ZOK || res[0].err != 1 || res[1].err != 1;
    if (rc == ZOK) {
        outcome = OUT_APPLIED;
    } else if (answered || rc == ZBADARGUMENTS || rc == ZINVALIDSTATE ||
               rc == ZMARSHALLINGERROR) {
        /* The server refused the transaction, or it was never sent. */
        if (res[0].err == ZNOAUTH)
            cli_err("permission denied: %s may not delete %s (deleting a "
                    "contender needs the DELETE right on %s; pass --auth "
                    "with an identity its ACL allows). Nothing was changed.",
                    self[0] != '\0' ? self : "anonymous", h->node, path);
        else if (res[1].err == ZNOAUTH)
            cli_err("permission denied: %s may not add records to %s. "
                    "Nothing was changed.",
                    self[0] != '\0' ? self : "anonymous", AUDIT_DIR);
        else if (res[0].err == ZNONODE)
            cli_err("%s is already gone; nothing was changed", h->node);
        else
            cli_err("cannot release %s: %s; nothing was changed", h->node,
                    zerror(rc));
        status = res[0].err == ZNONODE ? CLI_EXIT_NOT_ACQUIRED
                 : res[0].err == ZNOAUTH || res[1].err == ZNOAUTH
                     ? CLI_EXIT_NOPERM
                     : cli_exit_of(rc);
        goto out;
    } else {
        cli_err("release of %s: outcome unknown (%s): the holder may or may "
                "not have been evicted; finding out from audit record %s",
                h->node, zerror(rc), name);
        outcome = resolve(c, s, name, rec, marker);
    }
    if (outcome == OUT_APPLIED) {
        fprintf(stderr,
                "zkr: released %s of %s (token %" PRId64
                ") as %s\nzkr: audit record %s: %s\n",
                h->node, path, h->czxid, self[0] != '\0' ? self : "anonymous",
                name, rec);
        status = 0;
    } else if (outcome == OUT_NOT_APPLIED) {
        cli_err("the release of %s was not applied, and never will be "
                "(record %s now blocks it): nothing was changed; run "
                "zkr inspect before retrying",
                h->node, name);
    } else {
        cli_err("outcome still unknown: do NOT retry blindly (a retry would "
                "evict the next holder); read %s: if it exists with action "
                "\"release --force\", %s was evicted",
                name, h->node);
    }
out:
    free(rec);
    free(marker);
    return status;
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
    while ((opt = cli_getopt(argc, argv, "+fr:h", lopts)) != -1) {
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
                   "PATH\n\n"
                   "Deletes a holder's node and writes an audit record "
                   "under " AUDIT_DIR ", in one\n"
                   "transaction.\n\n"
                   "  -f, --force         required: this ends another "
                   "process's grant\n"
                   "  -r, --reason TEXT   why (stored in the audit record), "
                   "required\n"
                   "      --node NODE     which holder (name or full path), "
                   "when several hold\n"
                   "  -h, --help          this help\n\n"
                   "Exit status: 0 released; 1 nothing to release; 64 usage; "
                   "69 no server or\n"
                   "session; 71 other error or outcome unknown; 77 permission "
                   "denied.\n"
                   "See zkr(1).\n");
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
    if ((status = cli_check_args("release", path, NULL)) != 0 ||
        (status = cli_open_admin_session(c, &s)) != 0)
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
        status = cli_usage_error("release",
                                 "%s: %d holders; choose one with --node "
                                 "(see zkr inspect)",
                                 path, holding);
    } else {
        status = evict(c, &s, path, &v[pick >= 0 ? pick : 0], reason);
    }
    zkr_contenders_free(v, n);
out:
    zkr_session_free(s);
    return status;
}
