/* Containment of the command zkr runs: every process it starts, however it
 * detaches itself, is found, signalled and reaped before the grant ends.
 *
 *   zkr (subreaper) --- guard "zkr-guard" (subreaper, own process group)
 *                           `-- COMMAND (own process group) -- ...
 *
 * The guard is the command's parent and a child subreaper
 * (PR_SET_CHILD_SUBREAPER): a descendant that backgrounds itself, calls
 * setsid() or double-forks is re-parented to the guard, not to init, so
 * the guard sees the whole tree and exits only once it has reaped every
 * process of it. zkr treats "the guard has exited" as "the command is
 * gone": that is when the grant may end.
 *
 * The guard is in its own process group with its own name, so a signal to
 * zkr's group (a shell's `kill -9 %1`, timeout(1), Ctrl-\) or `killall zkr`
 * does not reach it. It kills the tree (SIGKILL, until no process is left)
 * when zkr dies (EOF on the control pipe, even after SIGKILL of zkr) and
 * when zkr stops sending heartbeats past the deadline zkr gave it (zkr
 * stopped by SIGSTOP, or frozen): the deadline is the session's safe
 * deadline, so a stopped supervisor never leaves its command running
 * after someone else can be granted.
 *
 * zkr is a subreaper too: if the guard itself is killed, the tree is
 * re-parented to zkr, which then kills and reaps it. Processes zkr
 * inherited as children before starting the command (a shell's
 * `2> >(reader)`) are never signalled: they are recorded at start.
 *
 * The guard is a fork of a multithreaded process: it calls only
 * async-signal-safe functions (raw syscalls, no malloc, no stdio). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define SCAN_MAX 32768 /* processes read from /proc in one scan */
#define TREE_MAX 4096  /* processes of one command tree */
#define FOREIGN_MAX 64

typedef struct ent {
    pid_t pid, ppid, pgrp;
    char state; /* /proc's: 'T' stopped, 't' traced, ... */
    char guard; /* named zkr-guard: the guard of a nested zkr */
} ent_t;

static ent_t ents[SCAN_MAX];
static pid_t foreign[FOREIGN_MAX];
static int n_foreign;
/* The processes ct_stop_tree() stopped, for ct_cont_tree(). */
static pid_t held[TREE_MAX];
static int n_held;

int64_t ct_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Decimal digits of s up to end (or a NUL); -1 if anything else. */
static long digits(const char *s, const char *end)
{
    long v = 0;

    if (s == end || *s == '\0')
        return -1;
    for (; s != end && *s != '\0'; s++) {
        if (*s < '0' || *s > '9' || v > 100000000)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* The entry of process name (its pid, in decimal) from /proc/PID/stat:
 * 0, or -1 if it is gone or unreadable. */
static int stat_of(const char *name, ent_t *e)
{
    static const char guard_name[] = "zkr-guard";
    char path[64] = "/proc/", buf[1024];
    size_t n = strlen(path), k = strlen(name);
    const char *lp, *rp, *q;
    ssize_t got;
    int fd;
    long v;

    if (k > 20)
        return -1;
    memcpy(path + n, name, k);
    memcpy(path + n + k, "/stat", 6);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    /* "pid (comm) S ppid pgrp ...": comm may hold ')' itself: take the
     * last. */
    lp = strchr(buf, '(');
    rp = NULL;
    for (q = buf; *q != '\0'; q++)
        if (*q == ')')
            rp = q;
    if (lp == NULL || rp == NULL || rp < lp || rp[1] != ' ' || rp[2] == '\0' ||
        rp[3] != ' ')
        return -1;
    e->state = rp[2];
    e->guard = (size_t)(rp - lp - 1) == sizeof(guard_name) - 1 &&
               memcmp(lp + 1, guard_name, sizeof(guard_name) - 1) == 0;
    for (q = rp + 4; *q >= '0' && *q <= '9'; q++)
        ;
    if ((v = digits(rp + 4, q)) < 0 || *q != ' ')
        return -1;
    e->ppid = (pid_t)v;
    rp = q + 1;
    for (q = rp; *q >= '0' && *q <= '9'; q++)
        ;
    if ((v = digits(rp, q)) < 0)
        return -1;
    e->pgrp = (pid_t)v;
    return 0;
}

/* Every process's entry into ents. Async-signal-safe. */
static int scan(void)
{
    char buf[8192] __attribute__((aligned(8)));
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;

    if (dfd < 0)
        return 0;
    for (;;) {
        long got = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
        if (got <= 0)
            break;
        for (long off = 0; off < got;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(buf + off);
            long pid = digits(d->d_name, NULL);
            off += d->d_reclen;
            if (pid > 0 && n < SCAN_MAX && stat_of(d->d_name, &ents[n]) == 0)
                ents[n++].pid = (pid_t)pid;
        }
    }
    close(dfd);
    return n;
}

static int is_foreign(pid_t pid)
{
    for (int i = 0; i < n_foreign; i++)
        if (foreign[i] == pid)
            return 1;
    return 0;
}

/* The processes descended from root (root excluded), skipping the
 * subtrees of foreign children of root when skip_foreign: their indexes
 * in ents. */
static int tree(pid_t root, int skip_foreign, int *out, int max)
{
    int n = scan(), k = 0;

    for (int i = 0; i < n && k < max; i++)
        if (ents[i].ppid == root && !(skip_foreign && is_foreign(ents[i].pid)))
            out[k++] = i;
    for (int j = 0; j < k; j++)
        for (int i = 0; i < n && k < max; i++)
            if (ents[i].ppid == ents[out[j]].pid)
                out[k++] = i;
    return k;
}

/* The command's tree: while the guard lives, below it. After its death
 * the tree was re-parented to us: our children, but for those recorded
 * as foreign. */
static int command_tree(pid_t guard, int *out)
{
    return guard > 0 ? tree(guard, 0, out, TREE_MAX)
                     : tree(getpid(), 1, out, TREE_MAX);
}

void ct_record_foreign(void)
{
    int n = scan();
    pid_t self = getpid();

    n_foreign = 0;
    for (int i = 0; i < n && n_foreign < FOREIGN_MAX; i++)
        if (ents[i].ppid == self)
            foreign[n_foreign++] = ents[i].pid;
}

/* A guard (of a nested zkr) is never stopped: it keeps its own zkr's
 * safe deadline while that zkr is stopped. */
int ct_signal_tree(pid_t guard, int sig)
{
    static int idx[TREE_MAX];
    int n = command_tree(guard, idx), k = 0;

    for (int i = 0; i < n; i++)
        if (!(sig == SIGSTOP && ents[idx[i]].guard) &&
            kill(ents[idx[i]].pid, sig) == 0)
            k++;
    return k;
}

int ct_is_stopped(pid_t pid)
{
    char name[24];
    ent_t e;

    snprintf(name, sizeof(name), "%ld", (long)pid);
    return stat_of(name, &e) == 0 && (e.state == 'T' || e.state == 't');
}

int ct_signal_group(pid_t guard, pid_t pgrp, int sig)
{
    static int idx[TREE_MAX];
    int n = command_tree(guard, idx), k = 0;

    for (int i = 0; i < n; i++)
        if (ents[idx[i]].pgrp == pgrp && kill(ents[idx[i]].pid, sig) == 0)
            k++;
    return k;
}

int ct_stop_tree(pid_t guard)
{
    static int idx[TREE_MAX];
    int n = command_tree(guard, idx);

    n_held = 0;
    for (int i = 0; i < n; i++) {
        const ent_t *e = &ents[idx[i]];
        if (e->state != 'T' && e->state != 't' && !e->guard &&
            kill(e->pid, SIGSTOP) == 0)
            held[n_held++] = e->pid;
    }
    return n_held;
}

int ct_cont_tree(pid_t guard, pid_t pgrp)
{
    static int idx[TREE_MAX];
    int n = command_tree(guard, idx), k = 0;

    for (int i = 0; i < n; i++) {
        const ent_t *e = &ents[idx[i]];
        int ours = e->pgrp == pgrp;
        for (int j = 0; j < n_held && !ours; j++)
            ours = held[j] == e->pid;
        if (ours && kill(e->pid, SIGCONT) == 0)
            k++;
    }
    n_held = 0;
    return k;
}

int ct_orphans(pid_t guard)
{
    int n = scan(), k = 0;
    pid_t self = getpid();

    for (int i = 0; i < n; i++)
        if (ents[i].ppid == self && ents[i].pid != guard &&
            !is_foreign(ents[i].pid))
            k++;
    return k;
}

/* ------------------------------------------------------------ the guard */

struct ct_msg {
    int kind;
    int value;
    int64_t at;
};

static void send_msg(int fd, int kind, int value, int64_t at)
{
    struct ct_msg m = {kind, value, at};
    ssize_t n;

    do
        n = write(fd, &m, sizeof(m));
    while (n < 0 && errno == EINTR);
}

/* The guard's own signals to its tree: the command's group while its
 * leader is unreaped (its pid cannot be reused before), and every
 * descendant. */
static void guard_signal(pid_t cmd, int sig)
{
    static int idx[TREE_MAX];
    int n = tree(getpid(), 0, idx, TREE_MAX);

    if (cmd > 0)
        kill(-cmd, sig);
    for (int i = 0; i < n; i++)
        kill(ents[idx[i]].pid, sig);
}

/* Whether file is an ELF binary (one the kernel refused: for another
 * machine, or damaged), which /bin/sh must not be given as a script.
 * Async-signal-safe. */
int ct_is_elf(const char *file)
{
    char magic[4];
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY), elf;

    if (fd < 0)
        return 0;
    elf = read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) &&
          memcmp(magic, "\177ELF", 4) == 0;
    close(fd);
    return elf;
}

static void exec_command(int err, const char *file, char **argv, char **sh_argv,
                         char **env, pid_t guard, int fg)
{
    sigset_t none;
    struct sigaction dfl;
    int e;
    ssize_t n;

    setpgid(0, 0);
    /* The command owns the terminal, as in a shell's foreground job: it
     * may read it (a prompt, a password, an editor). SIGTTOU is still
     * blocked (zkr's mask), so a background group may take it. */
    if (fg) {
        int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (tty >= 0) {
            tcsetpgrp(tty, getpid());
            close(tty);
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guard)
        _exit(CLI_EXIT_OSERR);
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(file, argv, env);
    /* A file the kernel does not recognize (a script without "#!"): run
     * by /bin/sh, as execvp() does; not a binary for another machine,
     * which sh would read as words to run (126, as a shell says). */
    e = errno;
    if (e == ENOEXEC && !ct_is_elf(file)) {
        execve(sh_argv[0], sh_argv, env);
        e = errno;
    }
    n = write(err, &e, sizeof(e));
    (void)n;
    _exit(CLI_EXIT_NOTFOUND);
}

/* Closes every descriptor from 3 up but the three given (each >= 3). */
static void close_except(int a, int b, int c)
{
    int keep[3] = {a, b, c}, lo = 3;

    for (int i = 0; i < 3; i++) /* sort */
        for (int j = i + 1; j < 3; j++)
            if (keep[j] < keep[i]) {
                int t = keep[i];
                keep[i] = keep[j];
                keep[j] = t;
            }
    for (int i = 0; i <= 3; i++) {
        unsigned hi = i < 3 ? (unsigned)keep[i] - 1 : ~0U;
        if (i < 3 && keep[i] < lo)
            continue;
        if ((unsigned)lo <= hi && close_range((unsigned)lo, hi, 0) != 0) {
            long max = sysconf(_SC_OPEN_MAX); /* no close_range() */
            for (long fd = lo; fd <= (long)hi && fd < max; fd++)
                close((int)fd);
        }
        if (i < 3)
            lo = keep[i] + 1;
    }
}

static void guard_main(int ctl, int rep, int err, int in, const char *file,
                       char **argv, char **sh_argv, char **env,
                       int64_t deadline, int fg)
{
    struct sigaction ign;
    sigset_t chld;
    pid_t self = getpid(), cmd;
    int sfd, killing = 0;

    setpgid(0, 0);
    prctl(PR_SET_NAME, "zkr-guard");
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_PDEATHSIG, 0);
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL);
    /* The command's standard input (zkr queue take: the item's data); the
     * command inherits it from us. Descriptor 0 itself may be it when zkr
     * was started with 0 closed: then only its close-on-exec goes. */
    if (in == 0)
        fcntl(0, F_SETFD, 0);
    else if (in > 0 && dup2(in, 0) < 0)
        _exit(1);
    /* Keep only our pipes: no copy of zkr's ZooKeeper socket, nor any
     * other descriptor (the command gets 0, 1 and 2 only). */
    close_except(ctl, rep, err);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if ((cmd = fork()) == 0)
        exec_command(err, file, argv, sh_argv, env, self, fg);
    close(err);
    if (cmd < 0) {
        send_msg(rep, CT_FAILED, errno, 0);
        _exit(1);
    }
    setpgid(cmd, cmd); /* also here: no race with a signal to the group */
    send_msg(rep, CT_STARTED, (int)cmd, 0);
    for (;;) {
        struct pollfd fds[2] = {{ctl, POLLIN, 0}, {sfd, POLLIN, 0}};
        int timeout = -1, st;
        pid_t r;
        while ((r = waitpid(-1, &st, WNOHANG | WUNTRACED)) > 0)
            if (r == cmd && WIFSTOPPED(st))
                send_msg(rep, CT_STOPPED, WSTOPSIG(st), 0);
            else if (r == cmd) {
                send_msg(rep, CT_EXITED, st, 0);
                cmd = -1;
            }
        if (r < 0 && errno == ECHILD && cmd < 0)
            _exit(0); /* the whole tree is gone */
        if (!killing && deadline >= 0 && ct_now_ms() >= deadline) {
            killing = 1;
            send_msg(rep, CT_DEADLINE, 0, 0);
        }
        if (killing) {
            guard_signal(cmd, SIGKILL);
            timeout = 20;
        } else if (deadline >= 0) {
            int64_t left = deadline - ct_now_ms();
            timeout = left > 0 ? (int)(left < 1000 ? left : 1000) : 0;
        }
        if (poll(fds, 2, timeout) < 0 && errno != EINTR)
            timeout = 0;
        if (sfd >= 0 && (fds[1].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
        }
        if (ctl >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            struct ct_msg m;
            ssize_t n = read(ctl, &m, sizeof(m));
            if (n == (ssize_t)sizeof(m) && m.kind == CT_HEARTBEAT) {
                /* A deadline that passed while we slept (a suspend, or
                 * our own pause) is acted on, not extended. */
                if (deadline >= 0 && ct_now_ms() >= deadline)
                    killing = 1;
                else
                    deadline = m.at;
            } else if (n == (ssize_t)sizeof(m) && m.kind == CT_KILL)
                killing = 1;
            else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                killing = 1; /* zkr is gone */
                close(ctl);
                ctl = -1;
            }
        }
    }
}

int ct_spawn(ct_t *g, const char *file, char **argv, char **env,
             int64_t deadline, int fg, int in, int *exec_errno)
{
    int ctl[2] = {-1, -1}, rep[2] = {-1, -1}, err[2] = {-1, -1};
    struct ct_msg m;
    ssize_t n;
    int e = 0, rc = -1, argc = 0;
    pid_t pid;
    char **sh_argv = NULL;

    memset(g, 0, sizeof(*g));
    g->guard = g->cmd = -1;
    g->ctl = g->rep = -1;
    *exec_errno = 0;
    /* /bin/sh FILE ARG...: made here, the guard cannot allocate. */
    while (argv[argc] != NULL)
        argc++;
    if ((sh_argv = calloc((size_t)argc + 2, sizeof(*sh_argv))) == NULL) {
        *exec_errno = errno;
        goto out;
    }
    sh_argv[0] = (char *)"/bin/sh";
    sh_argv[1] = (char *)file;
    for (int i = 1; i < argc; i++)
        sh_argv[i + 1] = argv[i];
    if (pipe2(ctl, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0 ||
        pipe2(err, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        goto out;
    }
    if ((pid = fork()) < 0) {
        *exec_errno = errno;
        goto out;
    }
    if (pid == 0)
        guard_main(ctl[0], rep[1], err[1], in, file, argv, sh_argv, env,
                   deadline, fg);
    g->guard = pid;
    close(ctl[0]);
    close(rep[1]);
    close(err[1]);
    ctl[0] = rep[1] = err[1] = -1;
    g->ctl = ctl[1];
    g->rep = rep[0];
    ctl[1] = rep[0] = -1;
    /* A stopped guard must never block us: heartbeats are dropped then. */
    fcntl(g->ctl, F_SETFL, O_NONBLOCK);
    do
        n = read(g->rep, &m, sizeof(m));
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(m) || m.kind != CT_STARTED) {
        *exec_errno = n == (ssize_t)sizeof(m) ? m.value : ECHILD;
        goto out;
    }
    g->cmd = (pid_t)m.value;
    do
        n = read(err[0], &e, sizeof(e));
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(e)) {
        *exec_errno = e;
        rc = -2;
        goto out;
    }
    rc = 0;
out:
    free(sh_argv);
    for (int i = 0; i < 2; i++) {
        if (ctl[i] >= 0)
            close(ctl[i]);
        if (rep[i] >= 0)
            close(rep[i]);
        if (err[i] >= 0)
            close(err[i]);
    }
    if (rc != 0 && g->guard > 0) {
        /* Nothing runs: let the guard finish. */
        close(g->ctl);
        g->ctl = -1;
        waitpid(g->guard, NULL, 0);
        g->guard = -1;
        close(g->rep);
        g->rep = -1;
    }
    return rc;
}

/* The guard never stops by design (it enforces the deadline while zkr is
 * stopped); one that someone stopped is continued with every message. */
void ct_heartbeat(ct_t *g, int64_t deadline)
{
    if (g->ctl >= 0)
        send_msg(g->ctl, CT_HEARTBEAT, 0, deadline);
    if (g->guard > 0)
        kill(g->guard, SIGCONT);
}

void ct_kill(ct_t *g)
{
    if (g->ctl >= 0)
        send_msg(g->ctl, CT_KILL, 0, 0);
    if (g->guard > 0)
        kill(g->guard, SIGCONT);
}

int ct_read(ct_t *g, int *kind, int *value)
{
    struct ct_msg m;
    ssize_t n;

    do
        n = read(g->rep, &m, sizeof(m));
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(m)) {
        *kind = m.kind;
        *value = m.value;
        return 1;
    }
    /* EOF: the guard has exited (or was killed). */
    close(g->rep);
    g->rep = -1;
    return 0;
}
