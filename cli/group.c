/* zkr members: a group's members (zkr_group_*) from a shell, once or as
 * they change (--watch), as text or JSON; and the checks of zkr member's
 * arguments. zkr member, which runs a command as a member of the group,
 * runs it as zkr lock does: run.c. The layout is kazoo's Party (zkr.h): a
 * member is the ephemeral node PATH/ID__party__ holding its data. */
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
#include <unistd.h>

#include "cli.h"

/* The suffix of a member's node name (zkr.h, "Layout"). */
#define PARTY "__party__"

static void help(FILE *f)
{
    fputs("usage: zkr members [--json] [--watch] [-w SECONDS] PATH\n"
          "\n"
          "Prints the members of the group PATH (kazoo's Party; zkr member, "
          "kazoo's\n"
          "Party and Curator's GroupMember with an id ending in __party__ "
          "make them):\n"
          "one line per member, ID, a tab, then its DATA, sorted by node "
          "name. Control\n"
          "characters, backslashes, bytes that are not UTF-8 and invisible "
          "characters\n"
          "are escaped as in C (\\n, \\t, \\\\, \\x00, \\u202e), so a line "
          "is always one member;\n"
          "an ID's leading '#' as \\x23: only --watch's header lines start "
          "with '#'.\n"
          "\n"
          "options:\n"
          "      --json                one JSON document per view: "
          "{\"zxid\":N,\"members\":\n"
          "                            [{\"id\",\"name\",\"data\",\"czxid\","
          "\"owner\"}...]}\n"
          "      --watch               print each new view as it comes (text: "
          "a line\n"
          "                            \"# zxid N, K members\" before each), "
          "until SIGINT\n"
          "                            or SIGTERM, or until stdout's "
          "reader goes\n"
          "                            away (exit 0)\n"
          "  -w, --wait, --timeout SECONDS\n"
          "                            give up when no view came within "
          "SECONDS\n"
          "                            (default: no limit)\n"
          "  -h, --help                this help\n"
          "\n"
          "Exit status: 0; 1 no view within -w; 64 usage; 69 no server or "
          "session; 71\n"
          "other error; 77 permission denied. See zkr(1).\n",
          f);
}

/* ------------------------------------------------------ zkr member's args */

/* Whether id is one by the group's rule (zkr.h, ERRORS): 1 to
 * ZKR_GROUP_ID_MAX bytes of UTF-8, without '/', a control character (C0,
 * DEL, C1) or what ZooKeeper refuses in a name: U+E000 to U+F8FF (UTF-8
 * EE xx xx, EF 80..A3 xx), U+FFF0 and above (EF BF B0..BF, and every
 * 4-byte sequence). */
static int valid_id(const char *id)
{
    size_t len = strlen(id), i = 0;

    if (len == 0 || len > ZKR_GROUP_ID_MAX)
        return 0;
    while (i < len) {
        const unsigned char *u = (const unsigned char *)id + i;
        int n = cli_utf8_len(id + i);

        if (n == 0 || u[0] < 0x20 || u[0] == 0x7f || u[0] == '/' ||
            (u[0] == 0xc2 && u[1] < 0xa0) || n == 4 ||
            (n == 3 && (u[0] == 0xee || (u[0] == 0xef && u[1] <= 0xa3) ||
                        (u[0] == 0xef && u[1] == 0xbf && u[2] >= 0xb0))))
            return 0;
        i += (size_t)n;
    }
    return 1;
}

int cli_check_member(const char *sub, const char *path, const char *id,
                     const char *data)
{
    int rc = cli_check_args(sub, path, NULL);

    if (rc != 0)
        return rc;
    if (strcmp(path, "/") == 0)
        return cli_usage_error(sub, "PATH is not the root");
    if (id != NULL && !valid_id(id))
        return cli_usage_error(sub,
                               "invalid --id: it must be 1..%d bytes of UTF-8 "
                               "without '/', control characters or what "
                               "ZooKeeper refuses in a name (U+E000..U+F8FF, "
                               "U+FFF0 and above: an emoji too)",
                               ZKR_GROUP_ID_MAX);
    if (id != NULL &&
        strlen(path) + 1 + strlen(id) + strlen(PARTY) > ZKR_PATH_MAX)
        return cli_usage_error(sub,
                               "--id too long for PATH: the member's node "
                               "path would be over %d bytes",
                               ZKR_PATH_MAX);
    if (data != NULL && strlen(data) > ZKR_GROUP_DATA_MAX)
        return cli_usage_error(sub, "--data over %d bytes", ZKR_GROUP_DATA_MAX);
    return 0;
}

/* ---------------------------------------------------------------- output */

/* Writes len bytes of s (followed by a NUL) as cli_escape() writes a
 * string, a NUL byte as \x00: data may hold any bytes. */
void cli_escape_bytes(FILE *f, const char *s, int len)
{
    const char *end = s + len;

    while (s < end) {
        cli_escape(f, s); /* up to the next NUL: no UTF-8 crosses one */
        s += strlen(s);
        if (s < end) {
            fputs("\\x00", f);
            s++;
        }
    }
}

/* Sets obj[key] to len bytes of s (followed by a NUL) as a JSON string:
 * each byte that is not part of valid UTF-8 becomes U+FFFD, as
 * cli_json_text() does (a NUL byte is \u0000), and then obj[key + "_hex"]
 * has the exact bytes in lowercase hex, as cli_json_set_text() does. 0 or
 * -1. */
int cli_json_set_bytes(json_t *obj, const char *key, const char *s, int len)
{
    char *fixed = malloc((size_t)len * 3 + 1), *hex = NULL, hexkey[64];
    size_t o = 0;
    int i = 0, valid = 1, rc;

    if (fixed == NULL)
        return -1;
    fixed[0] = '\0'; /* len 0: GCC takes the copy below for unset bytes */
    while (i < len) {
        /* The NUL after the data ends any sequence cut short by len. */
        int n = s[i] == '\0' ? 1 : cli_utf8_len(s + i);
        if (n > 0 && i + n <= len) {
            memcpy(fixed + o, s + i, (size_t)n);
            o += (size_t)n;
            i += n;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            valid = 0;
        }
    }
    rc = json_object_set_new(obj, key, json_stringn(fixed, o));
    free(fixed);
    if (rc != 0 || valid)
        return rc;
    if ((hex = malloc((size_t)len * 2 + 1)) == NULL)
        return -1;
    for (i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
    snprintf(hexkey, sizeof(hexkey), "%s_hex", key);
    rc = json_object_set_new(obj, hexkey, json_stringn(hex, (size_t)len * 2));
    free(hex);
    return rc;
}

/* One member as a JSON object, or NULL (out of memory). */
static json_t *json_member(const zkr_group_member_t *m)
{
    json_t *o = json_object();
    char owner[24];

    /* As ZooKeeper's own tools show an ephemeralOwner. */
    snprintf(owner, sizeof(owner), "0x%" PRIx64, (uint64_t)m->owner);
    if (o == NULL || cli_json_set_text(o, "id", m->id) != 0 ||
        cli_json_set_text(o, "name", m->name) != 0 ||
        cli_json_set_bytes(o, "data", m->data, m->len) != 0 ||
        json_object_set_new(o, "czxid", json_integer(m->czxid)) != 0 ||
        json_object_set_new(o, "owner", json_string(owner)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A view as one line of JSON. 0 or -1. */
static int print_json(const zkr_group_member_t *m, int n, int64_t zxid)
{
    json_t *top = json_object(), *a = json_array();
    int bad = top == NULL || a == NULL;

    bad = bad || json_object_set_new(top, "zxid", json_integer(zxid)) != 0 ||
          json_object_set(top, "members", a) != 0;
    for (int i = 0; !bad && i < n; i++) {
        json_t *o = json_member(&m[i]);
        bad = o == NULL || json_array_append_new(a, o) != 0;
    }
    bad = bad ||
          json_dumpf(top, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 ||
          fputc('\n', stdout) == EOF;
    json_decref(a);
    json_decref(top);
    return bad ? -1 : 0;
}

/* A view as text: ID, a tab, DATA, one line each; with header (--watch),
 * a line "# zxid N, K members" first. A line starts with '#' only as a
 * header: an ID's leading '#' is written \x23, as cli_escape() writes a
 * byte it escapes. 0 or -1. */
static int print_text(const zkr_group_member_t *m, int n, int64_t zxid,
                      int header)
{
    if (header)
        printf("# zxid %" PRId64 ", %d member%s\n", zxid, n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        const char *id = m[i].id;

        if (id[0] == '#') { /* no member poses as a header line */
            fputs("\\x23", stdout);
            id++;
        }
        cli_escape(stdout, id);
        putchar('\t');
        cli_escape_bytes(stdout, m[i].data, m[i].len);
        putchar('\n');
    }
    return ferror(stdout) ? -1 : 0;
}

/* Prints a view, flushed at once (--watch: a reader of a pipe gets each
 * view as it comes). 0, -1 (--watch: stdout's reader went away, EPIPE),
 * or CLI_EXIT_OSERR after saying why. */
static int print_view(const zkr_group_member_t *m, int n, int64_t zxid,
                      int json, int watch)
{
    int rc = json ? print_json(m, n, zxid) : print_text(m, n, zxid, watch);

    int bad = fflush(stdout) != 0 || rc != 0;

    if (bad && watch && errno == EPIPE)
        return -1; /* --watch: the reader went away, as tail -f | head */
    if (bad) {
        cli_err("members: cannot write the output: %s",
                errno != 0 ? strerror(errno) : "out of memory");
        return CLI_EXIT_OSERR;
    }
    return 0;
}

/* ---------------------------------------------------------- the command */

/* A first view within wait_ms (-1: no limit), longer than an int's
 * milliseconds too: in rounds of at most INT32_MAX ms. */
static int first_view(zkr_group_t *g, int64_t wait_ms, zkr_group_member_t **m,
                      int *n, int64_t *zxid)
{
    int rc;

    for (;;) {
        int64_t round = wait_ms > INT32_MAX ? INT32_MAX : wait_ms;

        rc = zkr_group_members(g, (int)round, m, n, zxid);
        if (rc != ZKR_ETIMEDOUT || wait_ms <= INT32_MAX)
            return rc;
        wait_ms -= INT32_MAX;
    }
}

/* A PATH that the server refuses to list (ZNOAUTH) gives no view: the
 * library lists it again until the handle is freed, and the wait for
 * the first view would end only at -w, unexplained. Said at once, as any
 * refusal (77); a later change of its ACL is the library's to follow. 0,
 * or an exit status. */
static int check_readable(const cli_t *c, zkr_session_t *s, const char *path)
{
    struct String_vector v = {0, NULL};
    zhandle_t *zh = zkr_session_handle(s);
    int rc = zh != NULL ? zoo_get_children(zh, path, 0, &v) : ZOK;

    if (rc == ZOK)
        deallocate_String_vector(&v);
    return rc == ZNOAUTH ? cli_zk_error(c, rc, "members: %s", path) : 0;
}

/* --watch: SIGINT and SIGTERM end it with 0. Before the watch begins
 * (the session being opened: a blocking call) they end zkr at once;
 * then they are written to a pipe that the watch polls, so that a view
 * is never cut in the middle. */
static volatile sig_atomic_t watching;
static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig)
{
    int err = errno;
    char b = (char)sig;

    if (!watching)
        _exit(0);
    if (write(stop_pipe[1], &b, 1) < 0) {
        /* Full: a stop is pending already. */
    }
    errno = err;
}

static int catch_stops(void)
{
    struct sigaction sa;

    if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    return 0;
}

/* Prints each new view until a stop (0) or an error (an exit status).
 * The first view must come within wait_ms (-1: no limit): otherwise 1. */
static int watch(const cli_t *c, zkr_group_t *g, const char *path,
                 int64_t wait_ms, int json)
{
    int fd = zkr_group_fd(g), seen = 0;
    int out = fcntl(STDOUT_FILENO, F_GETFD) >= 0 ? STDOUT_FILENO : -1;
    int64_t until = wait_ms >= 0 ? ct_now_ms() + wait_ms : -1;

    if (fd < 0) {
        cli_err("members: %s: no descriptor for the group's views: %s", path,
                strerror(errno));
        return CLI_EXIT_OSERR;
    }
    watching = 1;
    for (;;) {
        /* stdout with no event asked: POLLERR (a pipe) or POLLHUP once
         * its reader has gone, even while nothing changes. */
        struct pollfd fds[3] = {
            {fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}, {out, 0, 0}};
        int64_t left = -1;
        zkr_group_member_t *m;
        int64_t zxid;
        int n, rc, status;

        if (!seen && until >= 0) {
            left = until - ct_now_ms();
            if (left <= 0) {
                cli_err("members: %s: no view of the group within -w", path);
                return CLI_EXIT_NOT_ACQUIRED;
            }
        }
        if (poll(fds, 3, left > INT32_MAX ? INT32_MAX : (int)left) < 0 &&
            errno != EINTR) {
            cli_err("members: poll: %s", strerror(errno));
            return CLI_EXIT_OSERR;
        }
        if (fds[1].revents & POLLIN)
            return 0;
        if (fds[2].revents & (POLLERR | POLLHUP)) {
            cli_info(c, "members: the output's reader went away");
            return 0;
        }
        if (!(fds[0].revents & POLLIN))
            continue;
        rc = zkr_group_members(g, 0, &m, &n, &zxid);
        if (rc == ZKR_ETIMEDOUT) { /* readable with no view: not ours */
            poll(NULL, 0, 50);
            continue;
        }
        if (rc != 0)
            return cli_zk_error(c, rc, "members: %s", path);
        status = print_view(m, n, zxid, json, 1);
        zkr_group_members_free(m, n);
        if (status < 0) {
            cli_info(c, "members: the output's reader went away");
            return 0;
        }
        if (status != 0)
            return status;
        seen = 1;
    }
}

int cli_members(const cli_t *c, int argc, char **argv)
{
    enum { O_JSON = 256, O_WATCH };
    static const struct option lopts[] = {
        {"json", no_argument, NULL, O_JSON},
        {"watch", no_argument, NULL, O_WATCH},
        {"wait", required_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path;
    zkr_session_t *s = NULL;
    zkr_group_t *g = NULL;
    zkr_group_member_t *m = NULL;
    int64_t wait_ms = -1, zxid = 0;
    int json = 0, watch_opt = 0, opt, rc, n = 0, status;

    optind = 0;
    opterr = 0;
    while ((opt = cli_getopt(argc, argv, "+hw:", lopts)) != -1) {
        switch (opt) {
        case 'h':
            help(stdout);
            return 0;
        case 'w':
            if (cli_parse_seconds(optarg, &wait_ms) != 0)
                return cli_usage_error("members", "invalid -w/--wait '%s'",
                                       optarg);
            break;
        case O_JSON:
            json = 1;
            break;
        case O_WATCH:
            watch_opt = 1;
            break;
        default:
            return cli_usage_error("members", "unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("members", "wants exactly one PATH");
    path = argv[optind];
    if ((status = cli_check_args("members", path, NULL)) != 0)
        return status;
    if (strcmp(path, "/") == 0)
        return cli_usage_error("members", "PATH is not the root");
    if (watch_opt) {
        /* Each view is flushed (print_view()); line buffering too, for
         * any other line. */
        setvbuf(stdout, NULL, _IOLBF, 0);
        /* A reader that went away ends the watch with 0 (EPIPE, or
         * POLLERR on stdout while nothing changes), not SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        if (catch_stops() != 0) {
            cli_err("members: setup: %s", strerror(errno));
            return CLI_EXIT_OSERR;
        }
    }
    if ((status = cli_open_session(c, &s)) != 0)
        return status;
    rc = zkr_group_new(&g, s, path, NULL, NULL, NULL);
    if (rc == ZBADARGUMENTS) {
        status = cli_usage_error("members", "invalid PATH '%s'", path);
    } else if (rc != 0) {
        status = cli_zk_error(c, rc, "members: %s", path);
    } else if ((status = check_readable(c, s, path)) != 0) {
        ; /* said why */
    } else if (watch_opt) {
        status = watch(c, g, path, wait_ms, json);
    } else if ((rc = first_view(g, wait_ms, &m, &n, &zxid)) == 0) {
        status = print_view(m, n, zxid, json, 0);
        zkr_group_members_free(m, n);
    } else if (rc == ZKR_ETIMEDOUT) {
        cli_err("members: %s: no view of the group within -w", path);
        status = CLI_EXIT_NOT_ACQUIRED;
    } else {
        status = cli_zk_error(c, rc, "members: %s", path);
    }
    zkr_group_free(g);
    zkr_session_free(s);
    return status;
}
