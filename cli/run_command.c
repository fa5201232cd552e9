/* zkr lock / sem / elect / queue take / barrier enter / member: the
 * command. Found before anything is acquired (entered, joined), started under
 * its guard (contain.c) with the grant's environment. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

extern char **environ;

/* ------------------------------------------------------------ command */

/* Whether file can be run: 0, or an errno value. A directory, or any
 * file that is not a regular one, cannot (EACCES, as execve() says). */
static int runnable(const char *file)
{
    struct stat st;

    if (stat(file, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? EISDIR : EACCES;
    return access(file, X_OK) == 0 ? 0 : errno;
}

/* The interpreter named by file's "#!" line, if it has one and we can
 * read it (a script the interpreter cannot read fails anyway): 0 if it
 * has none or it can be run, else an errno value (interp: its name). */
static int interpreter(const char *file, char *interp, size_t size)
{
    char line[256];
    ssize_t n;
    size_t i = 2, k = 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0)
        return 0;
    do
        n = read(fd, line, sizeof(line) - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 2 || line[0] != '#' || line[1] != '!')
        return 0;
    line[n] = '\0';
    while (line[i] == ' ' || line[i] == '\t')
        i++;
    while (line[i] != '\0' && line[i] != ' ' && line[i] != '\t' &&
           line[i] != '\n' && k + 1 < size)
        interp[k++] = line[i++];
    interp[k] = '\0';
    if (k == 0)
        return ENOEXEC; /* "#!" alone: execve() refuses it */
    return runnable(interp);
}

/* Finds COMMAND as execvp() would, before forking: a name with a '/' is
 * the file; else the first runnable file of that name in $PATH, and if
 * none, a file of that name that exists is "permission denied" (execvp's
 * EACCES). A file without "#!" that the kernel does not recognize is run
 * with /bin/sh, as execvp() does (ct_spawn()), so it is not looked into;
 * a "#!" interpreter that cannot be run is found out here: through $PATH
 * that file is passed over, as execvp() passes over a file whose execve()
 * fails so (ENOENT, EACCES), and is what is reported if no later one can
 * be run. NULL, after saying why on stderr, with *why set to
 * CLI_EXIT_NOTFOUND or CLI_EXIT_NOEXEC. */
static char *resolve(const char *cmd, int *why)
{
    const char *path = getenv("PATH");
    char interp[256], bad[256] = "";
    char *file = NULL;
    int err = ENOENT, e, bad_err = 0;

    if (strchr(cmd, '/') != NULL) {
        if ((err = runnable(cmd)) == 0 &&
            (bad_err = interpreter(cmd, bad, sizeof(bad))) == 0 &&
            (file = strdup(cmd)) == NULL)
            err = errno;
    } else {
        if (path == NULL || *path == '\0')
            path = "/usr/local/bin:/usr/bin:/bin";
        while (*path != '\0' && file == NULL) {
            size_t n = strcspn(path, ":");
            if (asprintf(&file, "%.*s/%s", (int)(n != 0 ? n : 1),
                         n != 0 ? path : ".", cmd) < 0) {
                file = NULL;
                err = ENOMEM;
                break;
            }
            if ((e = runnable(file)) == 0 &&
                (e = interpreter(file, interp, sizeof(interp))) != 0) {
                if (bad_err == 0) { /* the first one is reported */
                    bad_err = e;
                    memcpy(bad, interp, sizeof(bad));
                }
                e = ENOENT;
            }
            if (e != 0) {
                if (e != ENOENT && e != ENOTDIR)
                    err = e; /* seen, but cannot be run */
                free(file);
                file = NULL;
            }
            path += n;
            if (*path == ':')
                path++;
        }
    }
    if (file == NULL && bad_err != 0) {
        cli_err("%s: bad interpreter %s: %s", cmd, bad, strerror(bad_err));
        *why = CLI_EXIT_NOEXEC;
        return NULL;
    }
    if (file == NULL) {
        *why = err == ENOENT || err == ENOTDIR ? CLI_EXIT_NOTFOUND
                                               : CLI_EXIT_NOEXEC;
        cli_err("%s: %s", cmd,
                *why == CLI_EXIT_NOTFOUND ? "command not found"
                : err == EACCES           ? "permission denied"
                                          : strerror(err));
    }
    return file;
}

/* Resolves COMMAND before anything is acquired or taken: a typo must not
 * wait its turn for a lock or leadership only to fail then, nor take items
 * and give them back (each a delivery, up to --max-deliveries). run_spawn()
 * resolves it again: it may have changed meanwhile. 0, or the exit status
 * (127, 126) after saying why. */
int run_command_runs(const opts_t *o)
{
    int why = 0;
    char *file = resolve(o->cmd[0], &why);

    if (file == NULL)
        return why;
    free(file);
    return 0;
}

char *run_command_file(const char *cmd, int *why)
{
    return resolve(cmd, why);
}

/* Every variable zkr sets: an outer zkr's are never passed on. */
static const char *const our_vars[] = {
    "ZKR_FENCE",          "ZKR_LOCK_PATH",   "ZKR_LOCK_NODE",  "ZKR_SESSION_ID",
    "ZKR_SEQUENCER",      "ZKR_LEADER_ID",   "ZKR_QUEUE_PATH", "ZKR_QUEUE_ITEM",
    "ZKR_QUEUE_DELIVERY", "ZKR_QUEUE_LEVEL", "ZKR_FENCES",
};
#define N_OUR_VARS (sizeof(our_vars) / sizeof(our_vars[0]))

/* The command's environment: environ without our variables, then ours. */
typedef struct envp {
    char **env;
    char *ours[N_OUR_VARS];
    int n_ours;
} envp_t;

static void free_env(envp_t *e)
{
    for (int i = 0; i < e->n_ours; i++)
        free(e->ours[i]);
    free(e->env);
    memset(e, 0, sizeof(*e));
}

/* zkr lock with several PATHs: "ZKR_FENCES=T1 T2 ...", the fencing
 * token of each PATH in the order given; NULL with one PATH (or no
 * memory: errno). */
static char *fences(const sup_t *p)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f;

    if (p->m == NULL || (f = open_memstream(&s, &len)) == NULL)
        return NULL;
    fputs("ZKR_FENCES=", f);
    for (int i = 0; i <= p->o->nmore; i++) {
        int64_t t = -1;
        zkr_lock_token(i == 0 ? p->l : p->more[i - 1], &t);
        fprintf(f, "%s%" PRId64, i == 0 ? "" : " ", t);
    }
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* it: the item of queue take (its claim is q), or NULL. fence_list:
 * fences()'s, or NULL. */
static int build_env(envp_t *e, const zkr_sequencer_t *q, const char *leader_id,
                     const char *queue, const zkr_item_t *it, char *fence_list)
{
    char seq[ZKR_SEQUENCER_MAX];
    size_t n = 0, k = 0;

    memset(e, 0, sizeof(*e));
    while (environ[n] != NULL)
        n++;
    if ((e->env = calloc(n + N_OUR_VARS + 1, sizeof(*e->env))) == NULL) {
        free(fence_list);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int ours = 0;
        for (size_t j = 0; j < N_OUR_VARS; j++) {
            size_t len = strlen(our_vars[j]);
            if (strncmp(environ[i], our_vars[j], len) == 0 &&
                environ[i][len] == '=')
                ours = 1;
        }
        if (!ours)
            e->env[k++] = environ[i];
    }
    if (zkr_sequencer_format(q, seq, sizeof(seq)) < 0)
        seq[0] = '\0';
    if (fence_list != NULL) /* ours from now on, freed with the rest */
        e->ours[e->n_ours++] = fence_list;
    if (asprintf(&e->ours[e->n_ours++], "ZKR_FENCE=%" PRId64, q->token) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_LOCK_PATH=%s", q->path) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_LOCK_NODE=%s", q->node) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_SESSION_ID=%016" PRIx64,
                 (uint64_t)q->session_id) < 0 ||
        asprintf(&e->ours[e->n_ours++], "ZKR_SEQUENCER=%s", seq) < 0 ||
        (leader_id != NULL &&
         asprintf(&e->ours[e->n_ours++], "ZKR_LEADER_ID=%s", leader_id) < 0) ||
        (it != NULL &&
         (asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_PATH=%s", queue) < 0 ||
          asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_ITEM=%s",
                   zkr_item_id(it)) < 0 ||
          asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_DELIVERY=%d",
                   zkr_item_deliveries(it)) < 0 ||
          asprintf(&e->ours[e->n_ours++], "ZKR_QUEUE_LEVEL=%d",
                   zkr_item_level(it)) < 0))) {
        e->ours[--e->n_ours] = NULL; /* asprintf left it undefined */
        free_env(e);
        return -1;
    }
    for (int i = 0; i < e->n_ours; i++)
        e->env[k++] = e->ours[i];
    e->env[k] = NULL;
    return 0;
}

/* The standard input of queue take's command: the item's data, in an
 * anonymous file (not a pipe: a command that reads none of it, or part,
 * never blocks us, and any size fits). A descriptor, or -1 after saying
 * why. */
static int item_input(const zkr_item_t *it)
{
    size_t len = 0, off = 0;
    const char *data = zkr_item_data(it, &len);
    int fd = memfd_create("zkr-item", MFD_CLOEXEC);

    while (fd >= 0 && off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            fd = -1;
            break;
        }
        off += (size_t)n;
    }
    if (fd >= 0 && lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        cli_err("cannot pass the item's data to the command: %s",
                strerror(errno));
    return fd;
}

/* Starts the command, under its guard, with the grant's environment (and
 * queue take's item on its standard input). Without a grant (q NULL:
 * barrier enter, member) the command gets zkr's environment as it is: an outer
 * zkr's variables stay true for it (its grant lasts while this zkr runs),
 * and the guard gets no deadline (run_has_grant()). Returns 0, or an exit
 * status (command not found, ...) with nothing left running. */
int run_spawn(sup_t *p, const zkr_sequencer_t *q, const char *leader_id)
{
    envp_t env = {0};
    char *file, *fence_list;
    int why = 0, e, rc, fg = run_foreground(p), in = -1;
    /* The guard's first deadline, read with the clock at the same moment
     * (the PATH search below takes time). */
    int64_t deadline =
        run_has_grant(p) ? ct_now_ms() + zkr_session_valid_ms(p->s) : -1;

    if ((file = resolve(p->o->cmd[0], &why)) == NULL)
        return why;
    if (p->it != NULL && (in = item_input(p->it)) < 0) {
        free(file);
        return CLI_EXIT_OSERR;
    }
    fence_list = q != NULL ? fences(p) : NULL;
    if (q != NULL &&
        ((p->m != NULL && fence_list == NULL) ||
         build_env(&env, q, leader_id, p->o->path, p->it, fence_list) != 0)) {
        cli_err("cannot start %s: %s", p->o->cmd[0], strerror(errno));
        free(file);
        if (in >= 0)
            close(in);
        return CLI_EXIT_OSERR;
    }
    rc = ct_spawn(&p->g, file, p->o->cmd, q != NULL ? env.env : environ,
                  deadline, fg, in, &e);
    if (in >= 0)
        close(in);
    if (rc != 0) {
        cli_err("%s: %s", p->o->cmd[0], strerror(e));
        why = rc == -1      ? CLI_EXIT_OSERR
              : e == ENOENT ? CLI_EXIT_NOTFOUND
                            : CLI_EXIT_NOEXEC;
    } else {
        p->running = 1;
        p->handed = fg;
        p->exited = p->orphaned = p->killing = 0;
        p->stopped = p->softened = p->hard = p->lost = 0;
        p->why = NULL;
        p->kill_at = p->jc_at = -1;
        p->beat_at = 0;
        if (q != NULL)
            cli_info(
                p->cli, "%s %s granted (token %" PRId64 "); started %s, pid %d",
                p->o->path, q->node, q->token, p->o->cmd[0], (int)p->g.cmd);
        else
            cli_info(p->cli, "%s: started %s, pid %d", p->o->path, p->o->cmd[0],
                     (int)p->g.cmd);
    }
    free(file);
    free_env(&env);
    return why;
}
