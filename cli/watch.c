/* zkr watch: a watched cache (zkr_cache_*) from a shell, as consul watch
 * is: runs COMMAND with each new view of a node, or of a node's children,
 * on its standard input, one run at a time; or prints each view.
 *
 * One thread (main) does it all. It polls the cache's descriptor
 * (readable while a view newer than the last one read is there), a
 * signalfd (SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked in every
 * thread: zkr's threads are made after the mask is set and inherit it)
 * and a pipe the session listener writes each state to. While COMMAND
 * runs, the cache's descriptor is left alone: the views that come
 * meanwhile are coalesced by the cache itself (its descriptor says "a
 * newer view is there", zkr_cache_get() copies the newest), so once
 * COMMAND has exited it runs once more, with the newest view, if one came.
 *
 * COMMAND runs in a process group of its own, as zkr lock's does: a
 * signal zkr passes on reaches a pipeline of sh -c whole. It is no
 * grant's: nothing contains it beyond its first process (what it leaves
 * running in the background is its own), and it gets SIGTERM if zkr dies
 * before it. Its standard input is an anonymous file holding the view, as
 * queue take's item: a command that reads none of it, or part, never
 * blocks zkr, and any size fits. */
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

extern char **environ;

/* Before the first view, how often zkr asks the cache whether the server
 * refused PATH: the cache tries again on its own, with no view, and
 * nothing makes its descriptor readable then. */
#define REFUSED_POLL_MS 200

static void help(FILE *f)
{
    fputs("usage: zkr watch [options] PATH [options] [--] [COMMAND "
          "[ARG...]]\n"
          "\n"
          "Watches the node PATH (with --children, its children) and at "
          "each new view\n"
          "runs COMMAND with the view on its standard input: the node's "
          "data as it is\n"
          "(nothing while the node does not exist), or the children's "
          "names, sorted, one\n"
          "a line (with --data: NAME, a tab, then its DATA, escaped as "
          "zkr members\n"
          "escapes). The first view runs it too. One run at a time: the "
          "views that come\n"
          "while it runs are coalesced, and it runs once more with the "
          "newest. Without\n"
          "COMMAND each view is printed, after a line \"# zxid N, ...\" "
          "(a line of it\n"
          "starting with '#' as \\x23), until stdout's reader goes away "
          "(exit 0). Runs\n"
          "until SIGINT, SIGTERM or SIGHUP (exit 0), which a running "
          "COMMAND gets too\n"
          "(and SIGCONT: stopped by reading the terminal) and zkr waits "
          "for.\n"
          "\n"
          "COMMAND gets ZKR_WATCH_PATH and ZKR_WATCH_ZXID (the zxid the "
          "view reflects);\n"
          "for a node also ZKR_WATCH_EXISTS (1 or 0) and ZKR_WATCH_VERSION "
          "(its data\n"
          "version, empty when it does not exist). A COMMAND that exits "
          "non-zero is\n"
          "reported on stderr, and the watch goes on.\n"
          "\n"
          "options:\n"
          "      --children            the children of PATH: their "
          "names\n"
          "      --data                with --children: their data "
          "too\n"
          "      --json                one JSON document per view: "
          "{\"path\",\"zxid\",\n"
          "                            \"exists\" (a node),\"entries\":"
          "[{\"name\",\"data\",\n"
          "                            \"version\",\"mzxid\",\"czxid\"}"
          "...]}\n"
          "  -w, --wait, --timeout SECONDS\n"
          "                            give up when no first view came "
          "within SECONDS\n"
          "                            (default: no limit)\n"
          "  -h, --help                this help\n"
          "\n"
          "Exit status: 0 ended by a signal; 1 no view within -w; 64 "
          "usage; 69 no server\n"
          "or session; 71 other error; 77 permission denied; 126/127 "
          "COMMAND not\n"
          "executable/not found. See zkr(1).\n",
          f);
}

/* PATH by the cache's rule (zkr_cache_new(): "/" too, or a path the
 * library takes), checked before any connection: absolute, no trailing
 * '/', no empty, "." or ".." component, no control character, valid
 * UTF-8, not under /zookeeper, at most ZKR_PATH_MAX bytes. */
static int valid_path(const char *p)
{
    size_t len = strlen(p), comp = 0, i = 1;

    if (strcmp(p, "/") == 0)
        return 1;
    if (p[0] != '/' || len > ZKR_PATH_MAX || p[len - 1] == '/' ||
        (strncmp(p, "/zookeeper", 10) == 0 && (p[10] == '\0' || p[10] == '/')))
        return 0;
    while (i <= len) {
        unsigned char ch = (unsigned char)p[i];
        int n;

        if (ch == '/' || ch == '\0') {
            const char *c = p + i - comp;
            if (comp == 0 || (comp == 1 && c[0] == '.') ||
                (comp == 2 && c[0] == '.' && c[1] == '.'))
                return 0;
            comp = 0;
            i++;
            continue;
        }
        if (ch < 0x20 || ch == 0x7f || (n = cli_utf8_len(p + i)) == 0)
            return 0;
        comp += (size_t)n;
        i += (size_t)n;
    }
    return 1;
}

/* ------------------------------------------------------------- the views */

typedef struct watch {
    const cli_t *cli;
    const char *path;
    zkr_cache_kind_t kind;
    int json;
    char **cmd; /* COMMAND, or NULL: print the views */
    zkr_session_t *s;
    zkr_cache_t *c;
    int sfd;       /* the signalfd */
    int states[2]; /* the session listener's pipe */
    pid_t child;   /* the running COMMAND, or -1 */
    int64_t child_zxid;
    int out;    /* stdout, polled for its reader's end (no COMMAND), or -1 */
    int stop;   /* the signal that ends the watch, or 0 */
    int status; /* the exit status once the watch must end, or -1 */
} watch_t;

/* One entry as a JSON object, or NULL (out of memory). --children has
 * names only: the cache reads no data then. */
static json_t *json_entry(const watch_t *w, const zkr_cache_entry_t *e)
{
    json_t *o = json_object();

    if (o == NULL || cli_json_set_text(o, "name", e->name) != 0)
        goto bad;
    if (w->kind == ZKR_CACHE_CHILDREN)
        return o;
    if (cli_json_set_bytes(o, "data", e->data, e->len) != 0 ||
        json_object_set_new(o, "version", json_integer(e->stat.version)) != 0 ||
        json_object_set_new(o, "mzxid", json_integer(e->stat.mzxid)) != 0 ||
        json_object_set_new(o, "czxid", json_integer(e->stat.czxid)) != 0)
        goto bad;
    return o;
bad:
    json_decref(o);
    return NULL;
}

/* A view as one line of JSON on f. 0 or -1. */
static int write_json(FILE *f, const watch_t *w, const zkr_cache_entry_t *e,
                      int n, int64_t zxid)
{
    json_t *top = json_object(), *a = json_array();
    int bad = top == NULL || a == NULL;

    bad = bad || cli_json_set_text(top, "path", w->path) != 0 ||
          json_object_set_new(top, "zxid", json_integer(zxid)) != 0 ||
          (w->kind == ZKR_CACHE_NODE &&
           json_object_set_new(top, "exists", json_boolean(n > 0)) != 0) ||
          json_object_set(top, "entries", a) != 0;
    for (int i = 0; !bad && i < n; i++) {
        json_t *o = json_entry(w, &e[i]);
        bad = o == NULL || json_array_append_new(a, o) != 0;
    }
    bad = bad || json_dumpf(top, f, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 ||
          fputc('\n', f) == EOF;
    json_decref(a);
    json_decref(top);
    return bad ? -1 : 0;
}

/* The start of a printed line: a leading '#' as \x23 (as cli_escape()
 * writes a byte it escapes), so that only a header starts with '#'.
 * Where the rest of the line begins. */
static const char *line_start(FILE *f, const char *s, int printed)
{
    if (printed && s[0] == '#') {
        fputs("\\x23", f);
        return s + 1;
    }
    return s;
}

/* The children, one a line: NAME, or NAME, a tab, DATA (--data), escaped
 * as zkr members escapes, so that a line is always one child; printed
 * (after a header), a leading '#' too. */
static void write_children(FILE *f, const watch_t *w,
                           const zkr_cache_entry_t *e, int n, int printed)
{
    for (int i = 0; i < n; i++) {
        cli_escape(f, line_start(f, e[i].name, printed));
        if (w->kind == ZKR_CACHE_CHILDREN_DATA) {
            fputc('\t', f);
            cli_escape_bytes(f, e[i].data, e[i].len);
        }
        fputc('\n', f);
    }
}

/* What COMMAND reads: the node's data as it is, the children, or the
 * JSON document. 0 or -1. */
static int write_input(FILE *f, const watch_t *w, const zkr_cache_entry_t *e,
                       int n, int64_t zxid)
{
    if (w->json)
        return write_json(f, w, e, n, zxid);
    if (w->kind != ZKR_CACHE_NODE)
        write_children(f, w, e, n, 0);
    else if (n > 0 && e[0].len > 0)
        fwrite(e[0].data, 1, (size_t)e[0].len, f);
    return ferror(f) ? -1 : 0;
}

/* What zkr prints without COMMAND: the JSON document; or a line "# zxid
 * N, ..." then the children, or the node's data line by line, escaped
 * (a terminal gets no control sequence from it; a leading '#' as \x23,
 * only a header starts with '#'), the newline that ends the data, if one
 * does, ending its last line. 0 or -1. */
static int write_output(FILE *f, const watch_t *w, const zkr_cache_entry_t *e,
                        int n, int64_t zxid)
{
    const char *d, *end;

    if (w->json)
        return write_json(f, w, e, n, zxid);
    if (w->kind != ZKR_CACHE_NODE) {
        fprintf(f, "# zxid %" PRId64 ", %d child%s\n", zxid, n,
                n == 1 ? "" : "ren");
        write_children(f, w, e, n, 1);
        return ferror(f) ? -1 : 0;
    }
    if (n == 0) {
        fprintf(f, "# zxid %" PRId64 ", no node\n", zxid);
        return ferror(f) ? -1 : 0;
    }
    fprintf(f, "# zxid %" PRId64 ", version %d, %d byte%s\n", zxid,
            e[0].stat.version, e[0].len, e[0].len == 1 ? "" : "s");
    for (d = e[0].data, end = d + e[0].len; d < end;) {
        const char *nl = memchr(d, '\n', (size_t)(end - d));
        size_t len = (size_t)((nl != NULL ? nl : end) - d);
        char *line = malloc(len + 1); /* cli_escape_bytes() wants a NUL */

        if (line == NULL)
            return -1;
        memcpy(line, d, len);
        line[len] = '\0';
        if (len > 0 && line[0] == '#') { /* no line poses as a header */
            fputs("\\x23", f);
            cli_escape_bytes(f, line + 1, (int)len - 1);
        } else {
            cli_escape_bytes(f, line, (int)len);
        }
        free(line);
        fputc('\n', f);
        d += len + 1;
    }
    return ferror(f) ? -1 : 0;
}

/* ---------------------------------------------------------- the command */

/* COMMAND's standard input: the view in an anonymous file, at its start.
 * A descriptor, or -1. */
static int view_input(const watch_t *w, const zkr_cache_entry_t *e, int n,
                      int64_t zxid)
{
    int fd = memfd_create("zkr-watch", MFD_CLOEXEC), dup_fd;
    FILE *f;

    if (fd < 0)
        return -1;
    if ((dup_fd = dup(fd)) < 0 || (f = fdopen(dup_fd, "w")) == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        close(fd);
        return -1;
    }
    if ((write_input(f, w, e, n, zxid) != 0) | (fclose(f) != 0) ||
        lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The command's environment: environ without ZKR_WATCH_* (an outer zkr
 * watch's), then ours (in vars, freed by the caller). NULL if no memory. */
static char **build_env(const watch_t *w, const zkr_cache_entry_t *e, int n,
                        int64_t zxid, char *vars[4])
{
    size_t count = 0, k = 0;
    char **env;
    int nv = 0;

    while (environ[count] != NULL)
        count++;
    if ((env = calloc(count + 5, sizeof(*env))) == NULL)
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], "ZKR_WATCH_", 10) != 0)
            env[k++] = environ[i];
    if (asprintf(&vars[nv++], "ZKR_WATCH_PATH=%s", w->path) < 0 ||
        asprintf(&vars[nv++], "ZKR_WATCH_ZXID=%" PRId64, zxid) < 0 ||
        (w->kind == ZKR_CACHE_NODE &&
         (asprintf(&vars[nv++], "ZKR_WATCH_EXISTS=%d", n > 0) < 0 ||
          (n > 0 ? asprintf(&vars[nv++], "ZKR_WATCH_VERSION=%d",
                            e[0].stat.version)
                 : asprintf(&vars[nv++], "ZKR_WATCH_VERSION=")) < 0))) {
        vars[nv - 1] = NULL; /* asprintf left it undefined */
        free(env);
        return NULL;
    }
    for (int i = 0; i < nv; i++)
        env[k++] = vars[i];
    env[k] = NULL;
    return env;
}

/* The child, between fork() and exec: a fork of a multithreaded process,
 * so async-signal-safe calls only. Writes errno to err if no exec. */
static void exec_child(int err, int in, pid_t parent, const char *file,
                       char **argv, char **sh_argv, char **env, int elf)
{
    struct sigaction dfl;
    sigset_t none;
    int e;
    ssize_t n;

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) /* zkr died before the line above */
        _exit(CLI_EXIT_OSERR);
    /* in is 0 itself when zkr was started with 0 closed: then only its
     * close-on-exec goes. */
    if (in == 0 ? fcntl(0, F_SETFD, 0) != 0 : dup2(in, 0) < 0) {
        e = errno;
        n = write(err, &e, sizeof(e));
        (void)n;
        _exit(CLI_EXIT_OSERR);
    }
    /* No copy of the ZooKeeper socket, nor of any other descriptor: 0, 1
     * and 2 only (err goes at the exec too). */
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < max; fd++)
            if (fd != err)
                close((int)fd);
    }
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(file, argv, env);
    /* A file the kernel does not recognize (a script without "#!"): run
     * by /bin/sh, as execvp() does; not a binary for another machine. */
    e = errno;
    if (e == ENOEXEC && !elf) {
        execve(sh_argv[0], sh_argv, env);
        e = errno;
    }
    n = write(err, &e, sizeof(e));
    (void)n;
    _exit(CLI_EXIT_NOTFOUND);
}

/* Forks and execs file (COMMAND's, found), its standard input in, its
 * environment env: 0 with w->child set, or an errno value (nothing left
 * running). */
static int fork_exec(watch_t *w, const char *file, int in, char **env)
{
    int err[2], e = 0, argc = 0, elf = ct_is_elf(file);
    char **sh_argv;
    pid_t pid, self = getpid();
    ssize_t n;

    while (w->cmd[argc] != NULL)
        argc++;
    /* /bin/sh FILE ARG...: made here, the child may not allocate. */
    if ((sh_argv = calloc((size_t)argc + 2, sizeof(*sh_argv))) == NULL)
        return errno;
    sh_argv[0] = (char *)"/bin/sh";
    sh_argv[1] = (char *)file;
    for (int i = 1; i < argc; i++)
        sh_argv[i + 1] = w->cmd[i];
    if (pipe2(err, O_CLOEXEC) != 0) {
        e = errno;
        free(sh_argv);
        return e;
    }
    if ((pid = fork()) == 0)
        exec_child(err[1], in, self, file, w->cmd, sh_argv, env, elf);
    e = errno;
    close(err[1]);
    free(sh_argv);
    if (pid < 0) {
        close(err[0]);
        return e;
    }
    setpgid(pid, pid); /* also here: no race with a signal to its group */
    /* EOF: the exec happened (the pipe is close-on-exec); else its errno. */
    do
        n = read(err[0], &e, sizeof(e));
    while (n < 0 && errno == EINTR);
    close(err[0]);
    if (n == (ssize_t)sizeof(e)) {
        waitpid(pid, NULL, 0);
        return e;
    }
    w->child = pid;
    return 0;
}

/* Starts COMMAND with a view: 0, or the exit status that ends the watch
 * after saying why (126, 127: it cannot be run; 71). COMMAND is found
 * again at each run, as a shell would: it may have changed meanwhile. */
static int run_command(watch_t *w, const zkr_cache_entry_t *e, int n,
                       int64_t zxid)
{
    char *vars[4] = {NULL, NULL, NULL, NULL}, **env = NULL, *file;
    int why = 0, in = -1, err;

    if ((file = run_command_file(w->cmd[0], &why)) == NULL)
        return why;
    if ((in = view_input(w, e, n, zxid)) < 0 ||
        (env = build_env(w, e, n, zxid, vars)) == NULL) {
        cli_err("watch: cannot start %s: %s", w->cmd[0], strerror(errno));
        why = CLI_EXIT_OSERR;
    } else if ((err = fork_exec(w, file, in, env)) != 0) {
        cli_err("watch: %s: %s", w->cmd[0], strerror(err));
        why = err == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
    } else {
        w->child_zxid = zxid;
        cli_info(w->cli, "watch: %s: zxid %" PRId64 ": started %s, pid %d",
                 w->path, zxid, w->cmd[0], (int)w->child);
    }
    if (in >= 0)
        close(in);
    for (int i = 0; i < 4; i++)
        free(vars[i]);
    free(env);
    free(file);
    return why;
}

/* Reaps COMMAND if it has exited; a failure is reported, and the watch
 * goes on (as consul watch's does), but for the death by the signal zkr
 * passed on to end the watch. */
static void reap(watch_t *w)
{
    int st;

    if (w->child < 0 || waitpid(w->child, &st, WNOHANG | WUNTRACED) != w->child)
        return;
    if (WIFSTOPPED(st)) {
        /* In the background of zkr's terminal: a read of it stops
         * COMMAND, which zkr waits for; a signal that ends the watch
         * continues it (read_signals()). */
        if (WSTOPSIG(st) == SIGTTIN || WSTOPSIG(st) == SIGTTOU)
            cli_err("watch: %s: %s (pid %d) stopped by %s: it %s the "
                    "terminal (COMMAND runs in its own process group, in "
                    "the background); SIGINT or SIGTERM end the watch",
                    w->path, w->cmd[0], (int)w->child,
                    WSTOPSIG(st) == SIGTTIN ? "SIGTTIN" : "SIGTTOU",
                    WSTOPSIG(st) == SIGTTIN ? "read" : "wrote to");
        else
            cli_err("watch: %s: %s (pid %d) stopped by signal %d (%s)", w->path,
                    w->cmd[0], (int)w->child, WSTOPSIG(st),
                    strsignal(WSTOPSIG(st)));
        return;
    }
    w->child = -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
        cli_err("watch: %s: %s exited with status %d (the view of zxid "
                "%" PRId64 ")%s",
                w->path, w->cmd[0], WEXITSTATUS(st), w->child_zxid,
                w->stop ? "" : "; watching on");
    else if (WIFSIGNALED(st) && !(w->stop && WTERMSIG(st) == w->stop))
        cli_err("watch: %s: %s killed by signal %d (%s) (the view of zxid "
                "%" PRId64 ")%s",
                w->path, w->cmd[0], WTERMSIG(st), strsignal(WTERMSIG(st)),
                w->child_zxid, w->stop ? "" : "; watching on");
    else
        cli_info(w->cli, "watch: %s: %s ended (zxid %" PRId64 ")", w->path,
                 w->cmd[0], w->child_zxid);
}

/* ------------------------------------------------------------- the loop */

/* The session's states, for the loop (a byte each): heard on the event
 * thread, which must not block. */
static void on_state(zkr_session_t *s, zkr_state_t state, void *data)
{
    watch_t *w = data;
    char b = (char)state;

    (void)s;
    if (write(w->states[1], &b, 1) < 0) {
        /* Full: the loop has states to read already. */
    }
}

static void read_states(watch_t *w)
{
    char b[64];
    ssize_t n;

    while ((n = read(w->states[0], b, sizeof(b))) > 0)
        for (ssize_t i = 0; i < n; i++) {
            cli_info(w->cli, "watch: session %016llx %s",
                     (unsigned long long)zkr_session_id(w->s),
                     zkr_state_name((zkr_state_t)b[i]));
            /* LOST: the cache reads everything again on the new session,
             * unless there is none to come. */
            if (b[i] == ZKR_STATE_LOST && w->status < 0 &&
                zkr_session_wait_connected(w->s, 0) == ZKR_ELOST) {
                cli_err("watch: %s: the session was lost and is not made "
                        "again (ZooKeeper at %s)",
                        w->path, w->cli->hosts);
                w->status = CLI_EXIT_UNAVAILABLE;
            }
        }
}

static void read_signals(watch_t *w)
{
    struct signalfd_siginfo si;

    while (read(w->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;

        if (sig == SIGCHLD)
            continue; /* reap() looks at each wake */
        if (w->stop == 0)
            w->stop = sig;
        if (w->child > 0) {
            cli_info(w->cli, "watch: %s to %s (pid %d), then exit",
                     strsignal(sig), w->cmd[0], (int)w->child);
            kill(-w->child, sig);
            /* A stopped COMMAND (SIGTTIN: it read the terminal) gets
             * the signal only once continued. */
            kill(-w->child, SIGCONT);
        }
    }
}

/* The newest view: printed, or COMMAND started with it. first: before
 * the first view, a look without the descriptor (ZNOAUTH comes so). 1 a
 * view was handled, 0 none yet; w->status set when the watch must end. */
static int take_view(watch_t *w, int first)
{
    zkr_cache_entry_t *e = NULL;
    int64_t zxid = 0;
    int n = 0, rc = zkr_cache_get(w->c, 0, &e, &n, &zxid);

    if (rc == ZKR_ETIMEDOUT) {
        if (!first) /* readable with no view: not ours */
            poll(NULL, 0, 50);
        return 0;
    }
    if (rc != 0) {
        w->status = cli_zk_error(w->cli, rc, "watch: %s", w->path);
        return 0;
    }
    if (w->cmd != NULL) {
        if ((rc = run_command(w, e, n, zxid)) != 0)
            w->status = rc;
    } else if ((write_output(stdout, w, e, n, zxid) != 0) |
               (fflush(stdout) != 0)) {
        if (errno == EPIPE) { /* its reader went away: as tail -f | head */
            cli_info(w->cli, "watch: the output's reader went away");
            w->status = 0;
        } else {
            cli_err("watch: cannot write the output: %s",
                    errno != 0 ? strerror(errno) : "out of memory");
            w->status = CLI_EXIT_OSERR;
        }
    }
    zkr_cache_entries_free(e, n);
    return 1;
}

/* Runs until a stop signal (0, once COMMAND has ended) or an error (an
 * exit status). The first view must come within wait_ms (-1: no limit):
 * otherwise 1. */
static int watch_loop(watch_t *w, int64_t wait_ms)
{
    int fd = zkr_cache_fd(w->c), seen = 0, tried = 0;
    int64_t until = wait_ms >= 0 ? ct_now_ms() + wait_ms : -1;

    if (fd < 0) {
        cli_err("watch: %s: no descriptor for the views: %s", w->path,
                strerror(errno));
        return CLI_EXIT_OSERR;
    }
    for (;;) {
        /* The cache's descriptor only while no COMMAND runs: the views
         * that come meanwhile wait there, coalesced. */
        int idle = w->child < 0 && w->stop == 0 && w->status < 0;
        /* stdout with no event asked: POLLERR (a pipe) or POLLHUP once
         * its reader has gone, even while nothing changes. */
        struct pollfd fds[4] = {{w->sfd, POLLIN, 0},
                                {w->states[0], POLLIN, 0},
                                {idle ? fd : -1, POLLIN, 0},
                                {w->out, 0, 0}};
        int timeout = -1;

        if (w->child < 0 && (w->stop != 0 || w->status >= 0))
            return w->status >= 0 ? w->status : 0;
        if (!seen && idle) {
            int64_t left = until >= 0 ? until - ct_now_ms() : REFUSED_POLL_MS;
            if (left < 0 && tried) {
                cli_err("watch: %s: no view within -w", w->path);
                return CLI_EXIT_NOT_ACQUIRED;
            }
            timeout = left < 0                 ? 0
                      : left < REFUSED_POLL_MS ? (int)left
                                               : REFUSED_POLL_MS;
        }
        if (poll(fds, 4, timeout) < 0 && errno != EINTR) {
            cli_err("watch: poll: %s", strerror(errno));
            return CLI_EXIT_OSERR;
        }
        if (fds[0].revents & POLLIN)
            read_signals(w);
        if (fds[1].revents & POLLIN)
            read_states(w);
        if (fds[3].revents & (POLLERR | POLLHUP) && w->status < 0) {
            cli_info(w->cli, "watch: the output's reader went away");
            w->status = 0;
        }
        reap(w);
        if (w->child < 0 && w->stop == 0 && w->status < 0 &&
            ((fds[2].revents & POLLIN) || !seen))
            seen |= take_view(w, !(fds[2].revents & POLLIN));
        tried = 1; /* a look once the wait is over, before giving up */
    }
}

/* The signals the loop reads (signalfd), blocked from now on in this
 * thread and in every thread made after: the session's. */
static int block_signals(watch_t *w)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0 ||
        (w->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
        pipe2(w->states, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_err("watch: setup: %s", strerror(errno));
        return CLI_EXIT_OSERR;
    }
    return 0;
}

/* ---------------------------------------------------------- the command */

/* Options before PATH and after it, up to COMMAND (the first word that is
 * not an option, or the words after "--"). 0, -1 (--help written), or an
 * exit status. */
static int parse_opts(int argc, char **argv, watch_t *w, int64_t *wait_ms)
{
    enum { O_CHILDREN = 256, O_DATA, O_JSON };
    static const struct option lopts[] = {
        {"children", no_argument, NULL, O_CHILDREN},
        {"data", no_argument, NULL, O_DATA},
        {"json", no_argument, NULL, O_JSON},
        {"wait", required_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int children = 0, data = 0, opt;

    optind = 0;
    opterr = 0;
    for (;;) {
        while ((opt = cli_getopt(argc, argv, "+hw:", lopts)) != -1) {
            switch (opt) {
            case 'h':
                help(stdout);
                return -1;
            case 'w':
                if (cli_parse_seconds(optarg, wait_ms) != 0)
                    return cli_usage_error("watch", "invalid -w/--wait '%s'",
                                           optarg);
                break;
            case O_CHILDREN:
                children = 1;
                break;
            case O_DATA:
                data = 1;
                break;
            case O_JSON:
                w->json = 1;
                break;
            default:
                return cli_usage_error("watch", "unknown option '%s'",
                                       argv[optind - 1]);
            }
        }
        if (w->path != NULL || optind >= argc ||
            strcmp(argv[optind - 1], "--") == 0)
            break;
        w->path = argv[optind++]; /* then the options after it */
    }
    if (w->path == NULL && optind < argc)
        w->path = argv[optind++]; /* "--" before PATH */
    if (w->path == NULL)
        return cli_usage_error("watch", "wants a PATH");
    if (optind < argc)
        w->cmd = argv + optind;
    else if (strcmp(argv[optind - 1], "--") == 0)
        return cli_usage_error("watch", "wants a COMMAND after --");
    if (data && !children)
        return cli_usage_error("watch", "--data goes with --children");
    w->kind = !children ? ZKR_CACHE_NODE
              : data    ? ZKR_CACHE_CHILDREN_DATA
                        : ZKR_CACHE_CHILDREN;
    if (!valid_path(w->path))
        return cli_usage_error("watch",
                               "invalid PATH '%s': it must be absolute, "
                               "without a trailing /, empty, . or .. "
                               "component, control characters, valid UTF-8, "
                               "not under /zookeeper, at most %d bytes",
                               w->path, ZKR_PATH_MAX);
    return 0;
}

int cli_watch(const cli_t *c, int argc, char **argv)
{
    watch_t w = {0};
    int64_t wait_ms = -1;
    int rc, status, why = 0;
    char *file;

    w.cli = c;
    w.child = -1;
    w.status = -1;
    w.sfd = w.states[0] = w.states[1] = w.out = -1;
    if ((status = parse_opts(argc, argv, &w, &wait_ms)) != 0)
        return status < 0 ? 0 : status;
    /* A typo must not wait for the first view to fail. */
    if (w.cmd != NULL) {
        if ((file = run_command_file(w.cmd[0], &why)) == NULL)
            return why;
        free(file);
    } else {
        setvbuf(stdout, NULL, _IOLBF, 0); /* each view is flushed too */
        /* A reader that went away ends the watch with 0 (EPIPE, or
         * POLLERR on stdout while nothing changes), not SIGPIPE. COMMAND
         * gets SIGPIPE's default back (exec_child()). */
        signal(SIGPIPE, SIG_IGN);
        if (fcntl(STDOUT_FILENO, F_GETFD) >= 0)
            w.out = STDOUT_FILENO;
    }
    if ((status = block_signals(&w)) != 0 ||
        (status = cli_open_session(c, &w.s)) != 0)
        goto out;
    if ((rc = zkr_session_add_listener(w.s, on_state, &w)) != 0 ||
        (rc = zkr_cache_new(&w.c, w.s, w.path, w.kind, NULL, NULL)) != 0) {
        status = rc == ZBADARGUMENTS
                     ? cli_usage_error("watch", "invalid PATH '%s'", w.path)
                     : cli_zk_error(c, rc, "watch: %s", w.path);
        goto out;
    }
    status = watch_loop(&w, wait_ms);
out:
    zkr_cache_free(w.c);
    zkr_session_free(w.s); /* the listener goes with it */
    if (w.sfd >= 0)
        close(w.sfd);
    for (int i = 0; i < 2; i++)
        if (w.states[i] >= 0)
            close(w.states[i]);
    return status;
}
