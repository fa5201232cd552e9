/*
 * Test harness: throwaway ZooKeeper servers and helper processes for the
 * integration and fault tests. See harness.h for the API.
 */
/* syscall(SYS_close_range): everything else here is POSIX 2008. */
#define _DEFAULT_SOURCE

#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ZKT_READY_TIMEOUT_MS 60000
#define ZKT_4LW_TIMEOUT_MS 5000
#define ZKT_CONNECT_TIMEOUT_MS 10000
#define ZKT_PROBE_SESSION_MS 10000
#define ZKT_START_ATTEMPTS 5

#define ZKT_CLASSPATH "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
/*
 * Debian's zookeeper.jar names slf4j-api but no binding, so the server
 * would log nothing. Both jars below come with libzookeeper-java's
 * dependencies; they are added only if present.
 */
#define ZKT_LOG_JARS                                                           \
    ":/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
#define ZKT_MAIN "org.apache.zookeeper.server.ZooKeeperServerMain"
#define ZKT_QUORUM_MAIN "org.apache.zookeeper.server.quorum.QuorumPeerMain"

struct zkt_server {
    pid_t pid; /* -1 while not running */
    int port;
    int paused;
    char hosts[32];
    char *dir;      /* scratch dir, removed by zkt_server_stop() */
    char *data_dir; /* <dir>/data */
    char *cfg_path; /* <dir>/zoo.cfg */
    char *log_path; /* <dir>/server.log */
    char *log_opt;  /* -Dzookeeper.log.dir=<dir> */
    char *java;
    char *classpath;
    const char *main_class; /* ZKT_MAIN, or ZKT_QUORUM_MAIN in an ensemble */
    char *servers_cfg;      /* "server.N=..." lines of an ensemble, or NULL */
    int tick_ms;            /* tickTime, 0 = 200 */
    int sync_limit;         /* syncLimit, 0 = 5 */
    zkt_server_t *next;     /* in the list of live servers */
};

/* ------------------------------------------------------------ utilities */

int64_t zkt_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int zkt_scaled_ms(int ms)
{
    const char *env = getenv("ZKR_TEST_TIME_SCALE");
    double k = env != NULL ? strtod(env, NULL) : 1.0;

    if (!(k > 0) || k > 100)
        k = 1.0;
    return (int)(ms * k);
}

void zkt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static char *xasprintf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *buf;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    buf = malloc((size_t)n + 1);
    if (buf == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return buf;
}

static int remaining_ms(int64_t deadline)
{
    int64_t left = deadline - zkt_now_ms();

    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

char *zkt_build_path(const char *rel)
{
    const char *dir = getenv("ZKR_TEST_BUILDDIR");

    if (dir == NULL || *dir == '\0')
        return strdup(rel);
    return xasprintf("%s/%s", dir, rel);
}

static const char *tmp_base(void)
{
    const char *base = getenv("TMPDIR");

    return base != NULL && *base != '\0' ? base : "/tmp";
}

char *zkt_mkdtemp(const char *prefix)
{
    char *tmpl;
    char *real;

    tmpl = xasprintf("%s/%sXXXXXX", tmp_base(), prefix);
    if (tmpl == NULL)
        return NULL;
    if (mkdtemp(tmpl) == NULL) {
        free(tmpl);
        return NULL;
    }
    /* An absolute, canonical path: the server reports it back in "conf". */
    real = realpath(tmpl, NULL);
    if (real == NULL) {
        rmdir(tmpl);
        free(tmpl);
        return NULL;
    }
    free(tmpl);
    return real;
}

/* Removes everything inside the directory open at dfd; closes dfd. */
static int rm_contents(int dfd)
{
    DIR *d = fdopendir(dfd);
    struct dirent *e;
    int rc = 0;

    if (d == NULL) {
        close(dfd);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        struct stat st;

        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
            if (errno != ENOENT)
                rc = -1;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            int cfd = openat(dfd, name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

            if (cfd == -1 || rm_contents(cfd) != 0)
                rc = -1;
            if (unlinkat(dfd, name, AT_REMOVEDIR) == -1 && errno != ENOENT)
                rc = -1;
        } else if (unlinkat(dfd, name, 0) == -1 && errno != ENOENT) {
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

int zkt_rm_rf(const char *path)
{
    struct stat st;
    int fd;
    int rc;

    if (lstat(path, &st) == -1)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd == -1)
        return -1;
    rc = rm_contents(fd);
    if (rmdir(path) == -1 && errno != ENOENT)
        rc = -1;
    return rc;
}

/* ------------------------------------------------------------ processes */

/* Highest descriptor to close in a child if close_range() is missing. */
static int max_fd_to_close(void)
{
    long n = sysconf(_SC_OPEN_MAX);

    if (n < 0 || n > 65536)
        n = 65536;
    return (int)n;
}

/*
 * Runs in the child between fork() and exec: only async-signal-safe calls,
 * since the test process has ZooKeeper's threads running.
 */
static void child_close_from(int lowfd, int maxfd)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0U) == 0)
        return;
#endif
    for (int fd = lowfd; fd < maxfd; fd++)
        close(fd);
}

static void child_setup(pid_t parent, int in_fd, int out_fd, int err_fd,
                        int maxfd)
{
    static const int sigs[] = {SIGPIPE, SIGINT, SIGTERM,
                               SIGQUIT, SIGHUP, SIGCHLD};
    struct sigaction sa;
    sigset_t none;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    setpgid(0, 0);
    /* Die with the test; if the test is already gone, do not start. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != parent)
        _exit(127);
    if (in_fd >= 0 && in_fd != 0 && dup2(in_fd, 0) == -1)
        _exit(127);
    if (out_fd >= 0 && out_fd != 1 && dup2(out_fd, 1) == -1)
        _exit(127);
    if (err_fd >= 0 && err_fd != 2 && dup2(err_fd, 2) == -1)
        _exit(127);
    /* ZooKeeper's client sockets are not close-on-exec: keep them out. */
    child_close_from(3, maxfd);
}

static pid_t spawn_child(char *const argv[], int in_fd, int out_fd, int err_fd)
{
    pid_t parent = getpid();
    int maxfd = max_fd_to_close();
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == -1)
        return -1;
    if (pid == 0) {
        child_setup(parent, in_fd, out_fd, err_fd, maxfd);
        execv(argv[0], argv);
        _exit(127);
    }
    /* Also from the parent, so that kill(-pid) works as soon as we return. */
    setpgid(pid, pid);
    return pid;
}

pid_t zkt_spawn(char *const argv[], int out_fd)
{
    if (argv == NULL || argv[0] == NULL)
        return -1;
    return spawn_child(argv, -1, out_fd, -1);
}

int zkt_wait_pid(pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = zkt_now_ms() + timeout_ms;
    int st;

    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);

        if (r == pid) {
            if (status != NULL)
                *status = st;
            return 0;
        }
        if (r == -1 && errno != EINTR)
            return -1;
        if (timeout_ms >= 0 && zkt_now_ms() >= deadline)
            return -1;
        zkt_sleep_ms(5);
    }
}

/* ---------------------------------------------------- ZooKeeper clients */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void set_log_level(void)
{
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
}

static void quiet_client_log(void)
{
    pthread_once(&log_once, set_log_level);
}

static void noop_watcher(zhandle_t *zh, int type, int state, const char *path,
                         void *ctx)
{
    (void)zh;
    (void)type;
    (void)state;
    (void)path;
    (void)ctx;
}

/*
 * Polls until zh is connected or in a final state, or the deadline passes;
 * returns the last state seen.
 */
static int wait_state(zhandle_t *zh, int64_t deadline)
{
    for (;;) {
        int st = zoo_state(zh);

        if (st == ZOO_CONNECTED_STATE || st == ZOO_EXPIRED_SESSION_STATE ||
            st == ZOO_AUTH_FAILED_STATE || zkt_now_ms() >= deadline)
            return st;
        zkt_sleep_ms(5);
    }
}

int zkt_wait_connected(zhandle_t *zh, int timeout_ms)
{
    int64_t deadline = zkt_now_ms() + timeout_ms;

    return wait_state(zh, deadline) == ZOO_CONNECTED_STATE ? 0 : -1;
}

static zhandle_t *connect_wait(const char *hosts, int session_timeout_ms,
                               const clientid_t *cid, int timeout_ms)
{
    zhandle_t *zh;

    quiet_client_log();
    zh = zookeeper_init(hosts, noop_watcher, session_timeout_ms, cid, NULL, 0);
    if (zh == NULL)
        return NULL;
    if (zkt_wait_connected(zh, timeout_ms) != 0) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

zhandle_t *zkt_connect(const char *hosts, int session_timeout_ms)
{
    return connect_wait(hosts, session_timeout_ms, NULL,
                        ZKT_CONNECT_TIMEOUT_MS);
}

int zkt_expire_session(const char *hosts, const clientid_t *cid, int timeout_ms)
{
    int64_t deadline = zkt_now_ms() + timeout_ms;

    quiet_client_log();
    /*
     * Taking the session over and closing it ends it. But the victim may
     * reconnect and take it back between our "connected" and our close, in
     * which case the close ends nothing. So repeat until a fresh takeover
     * attempt is told the session has expired.
     */
    while (zkt_now_ms() < deadline) {
        zhandle_t *zh = zookeeper_init(hosts, noop_watcher,
                                       ZKT_PROBE_SESSION_MS, cid, NULL, 0);
        int st;

        if (zh == NULL)
            return -1;
        st = wait_state(zh, deadline);
        zookeeper_close(zh);
        if (st == ZOO_EXPIRED_SESSION_STATE)
            return 0;
        if (st != ZOO_CONNECTED_STATE)
            return -1;
    }
    return -1;
}

int zkt_count_children(zhandle_t *zh, const char *path)
{
    struct String_vector sv;
    int total = 0;
    int rc;

    rc = zoo_get_children(zh, path, 0, &sv);
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return -1;
    for (int i = 0; i < sv.count && total >= 0; i++) {
        const char *sep = strcmp(path, "/") == 0 ? "" : "/";
        char *child = xasprintf("%s%s%s", path, sep, sv.data[i]);
        int n = child != NULL ? zkt_count_children(zh, child) : -1;

        free(child);
        total = n < 0 ? -1 : total + 1 + n;
    }
    deallocate_String_vector(&sv);
    return total;
}

/* ------------------------------------------------------ four-letter words */

static int connect_loopback(int port, int64_t deadline)
{
    struct sockaddr_in sa;
    struct pollfd pfd;
    socklen_t len = sizeof(int);
    int err = 0;
    int fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        return fd;
    if (errno != EINPROGRESS)
        goto fail;
    pfd.fd = fd;
    pfd.events = POLLOUT;
    if (poll(&pfd, 1, remaining_ms(deadline)) != 1)
        goto fail;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

static int send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
    while (len > 0) {
        struct pollfd pfd = {fd, POLLOUT, 0};
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n == -1 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (poll(&pfd, 1, remaining_ms(deadline)) != 1)
            return -1;
    }
    return 0;
}

/* Reads until EOF; returns a NUL-terminated malloc'd buffer or NULL. */
static char *recv_all(int fd, int64_t deadline)
{
    size_t cap = 4096;
    size_t len = 0;
    char *buf = malloc(cap);

    while (buf != NULL) {
        struct pollfd pfd = {fd, POLLIN, 0};
        ssize_t n;

        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);

            if (bigger == NULL)
                break;
            buf = bigger;
            cap *= 2;
        }
        n = recv(fd, buf + len, cap - len - 1, 0);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        /* ZooKeeper closes after the reply; a reset after it is fine. */
        if (n == 0 || (n == -1 && errno == ECONNRESET && len > 0)) {
            buf[len] = '\0';
            return buf;
        }
        if (n == -1 && errno != EAGAIN && errno != EINTR)
            break;
        if (poll(&pfd, 1, remaining_ms(deadline)) != 1)
            break;
    }
    free(buf);
    return NULL;
}

static char *four_letter_word(int port, const char *cmd, int timeout_ms)
{
    int64_t deadline = zkt_now_ms() + timeout_ms;
    char *reply = NULL;
    int fd = connect_loopback(port, deadline);

    if (fd == -1)
        return NULL;
    if (send_all(fd, cmd, strlen(cmd), deadline) == 0)
        reply = recv_all(fd, deadline);
    close(fd);
    return reply;
}

char *zkt_4lw(const zkt_server_t *s, const char *cmd)
{
    if (s == NULL || cmd == NULL)
        return NULL;
    return four_letter_word(s->port, cmd, ZKT_4LW_TIMEOUT_MS);
}

long zkt_total_watches(const zkt_server_t *s)
{
    static const char key[] = "Total watches:";
    char *reply = zkt_4lw(s, "wchs");
    char *p;
    char *end;
    long n = -1;

    if (reply == NULL)
        return -1;
    p = strstr(reply, key);
    if (p != NULL) {
        errno = 0;
        n = strtol(p + sizeof(key) - 1, &end, 10);
        if (errno != 0 || end == p + sizeof(key) - 1)
            n = -1;
    }
    free(reply);
    return n;
}

/* --------------------------------------------------------------- server */

/* Can a listener bind 127.0.0.1:port now? */
static int port_bindable(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok;

    if (fd == -1)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* A port for a server to listen on, outside the kernel's ephemeral range
 * (ip_local_port_range). A port from that range (a bind to port 0) is
 * free only until an outgoing connection takes it as its source port,
 * which the many short connections of a test (four-letter words, members
 * connecting to each other) do while a server starts or a killed member
 * is down: CI saw a restarted member's election port taken, and the
 * member exit. Ports outside the range go only to explicit binds; one is
 * drawn at random and checked with a bind. -1 if none is found. */
static int free_port(void)
{
    int lo = 32768, hi = 60999, a, b;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

    if (f != NULL) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) {
            lo = 32768;
            hi = 60999;
        }
        fclose(f);
    }
    /* The larger of the two spans beside the range (10000 up: below are
     * well-known services' ports). */
    if (lo - 10000 >= 65535 - hi) {
        a = 10000;
        b = lo - 1;
    } else {
        a = hi + 1;
        b = 65535;
    }
    for (int i = 0; i < 1000 && b >= a; i++) {
        unsigned r;
        int port;

        if (getentropy(&r, sizeof(r)) != 0)
            r = (unsigned)rand();
        port = a + (int)(r % (unsigned)(b - a + 1));
        if (port_bindable(port))
            return port;
    }
    return -1;
}

static char *find_java(void)
{
    const char *env = getenv("JAVA");
    const char *path = getenv("PATH");
    char *copy;
    char *save = NULL;

    if (env != NULL && *env != '\0')
        return strdup(env);
    copy = strdup(path != NULL ? path : "/usr/bin:/bin");
    if (copy == NULL)
        return NULL;
    for (char *d = strtok_r(copy, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        char *cand = xasprintf("%s/java", *d != '\0' ? d : ".");

        if (cand != NULL && access(cand, X_OK) == 0) {
            free(copy);
            return cand;
        }
        free(cand);
    }
    free(copy);
    return strdup("/usr/bin/java");
}

static char *make_classpath(void)
{
    if (access("/usr/share/java/slf4j-log4j12.jar", R_OK) == 0 &&
        access("/usr/share/java/log4j-1.2.jar", R_OK) == 0)
        return strdup(ZKT_CLASSPATH ZKT_LOG_JARS);
    return strdup(ZKT_CLASSPATH);
}

static int write_config(const zkt_server_t *s)
{
    FILE *f = fopen(s->cfg_path, "w");
    int rc;

    if (f == NULL)
        return -1;
    fprintf(f,
            "tickTime=%d\n"
            "initLimit=10\n"
            "syncLimit=%d\n"
            "dataDir=%s\n"
            "clientPort=%d\n"
            "clientPortAddress=127.0.0.1\n"
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            /* Tests need no durability against power loss: skip fsync. */
            "forceSync=no\n",
            s->tick_ms > 0 ? s->tick_ms : 200,
            s->sync_limit > 0 ? s->sync_limit : 5, s->data_dir, s->port);
    if (s->servers_cfg != NULL)
        fputs(s->servers_cfg, f);
    rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

static int spawn_server(zkt_server_t *s)
{
    char *argv[] = {
        s->java,
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData", /* no hsperfdata files left in /tmp */
        "-Djava.awt.headless=true",
        "-Dzookeeper.root.logger=INFO,CONSOLE",
        s->log_opt,
        "-cp",
        s->classpath,
        (char *)s->main_class,
        s->cfg_path,
        NULL,
    };
    int in_fd;
    int log_fd;

    in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    log_fd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in_fd != -1 && log_fd != -1)
        s->pid = spawn_child(argv, in_fd, log_fd, log_fd);
    if (in_fd != -1)
        close(in_fd);
    if (log_fd != -1)
        close(log_fd);
    s->paused = 0;
    return s->pid > 0 ? 0 : -1;
}

/* Reaps the server if it has exited; returns 1 while it runs. */
static int server_alive(zkt_server_t *s)
{
    int st;

    if (s->pid <= 0)
        return 0;
    if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
        s->pid = -1;
        return 0;
    }
    return 1;
}

/*
 * One readiness probe. "conf" must name our data dir: if another test
 * raced us to the port, its server would answer "imok" too.
 */
static int probe_ready(zkt_server_t *s, int64_t deadline)
{
    char *reply;
    int ok;
    zhandle_t *zh;
    int left;

    reply = zkt_4lw(s, "ruok");
    ok = reply != NULL && strcmp(reply, "imok") == 0;
    free(reply);
    if (!ok)
        return -1;
    reply = zkt_4lw(s, "conf");
    ok = reply != NULL && strstr(reply, s->data_dir) != NULL;
    free(reply);
    if (!ok)
        return -1;
    left = remaining_ms(deadline);
    zh = connect_wait(s->hosts, ZKT_PROBE_SESSION_MS, NULL,
                      left < ZKT_CONNECT_TIMEOUT_MS ? left
                                                    : ZKT_CONNECT_TIMEOUT_MS);
    if (zh == NULL)
        return -1;
    zookeeper_close(zh);
    return 0;
}

/* 0 when ready, -1 on timeout, -2 if the server exited. */
static int wait_ready(zkt_server_t *s, int64_t deadline)
{
    while (zkt_now_ms() < deadline) {
        if (!server_alive(s))
            return -2;
        if (probe_ready(s, deadline) == 0)
            return 0;
        zkt_sleep_ms(50);
    }
    return -1;
}

static int kill_and_reap(zkt_server_t *s)
{
    if (s->pid <= 0)
        return -1;
    if (s->paused)
        kill(-s->pid, SIGCONT);
    kill(-s->pid, SIGKILL);
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) == -1 && errno == EINTR)
        ;
    s->pid = -1;
    s->paused = 0;
    return 0;
}

/* Prints the end of server.log to stderr, under a line saying why. */
static void log_tail(const zkt_server_t *s, const char *why)
{
    char buf[4096];
    FILE *f = fopen(s->log_path, "r");
    size_t n;

    if (f == NULL)
        return;
    if (fseek(f, -(long)(sizeof(buf) - 1), SEEK_END) != 0)
        rewind(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "# harness: ZooKeeper on port %d %s; end of %s:\n%s\n",
            s->port, why, s->log_path, buf);
}

/* For a test that cannot start. */
static void dump_log_tail(const zkt_server_t *s)
{
    log_tail(s, "did not start");
}

/*
 * Live servers, so that an exit() without zkt_server_stop() still cleans
 * up. Only the process that started them acts on the list: a forked test
 * child that calls exit() must not kill its parent's server.
 */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static zkt_server_t *live_servers;
static pid_t live_owner;

static void stop_live_servers(void)
{
    zkt_server_t *s;

    if (getpid() != live_owner)
        return;
    for (;;) {
        pthread_mutex_lock(&live_lock);
        s = live_servers;
        pthread_mutex_unlock(&live_lock);
        if (s == NULL)
            break;
        zkt_server_stop(s);
    }
}

static void live_add(zkt_server_t *s)
{
    pthread_mutex_lock(&live_lock);
    if (live_owner == 0) {
        live_owner = getpid();
        atexit(stop_live_servers);
    }
    s->next = live_servers;
    live_servers = s;
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(zkt_server_t *s)
{
    pthread_mutex_lock(&live_lock);
    for (zkt_server_t **p = &live_servers; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

#define ZKT_DIR_PREFIX "zkt-server-"
#define ZKT_OWNER_FILE "owner"

/* Records which process owns the dir, for sweep_stale_dirs(). */
static int write_owner(const zkt_server_t *s)
{
    char *path = xasprintf("%s/" ZKT_OWNER_FILE, s->dir);
    FILE *f = path != NULL ? fopen(path, "w") : NULL;
    int rc = -1;

    if (f != NULL) {
        rc = fprintf(f, "%ld\n", (long)getpid()) > 0 ? 0 : -1;
        if (fclose(f) != 0)
            rc = -1;
    }
    free(path);
    return rc;
}

/*
 * A test killed before zkt_server_stop() takes its server with it
 * (PR_SET_PDEATHSIG) but leaves the dir behind: remove the dirs whose
 * owner process is gone. Dirs without an owner file are left alone.
 */
static void sweep_stale_dirs(void)
{
    const char *base = tmp_base();
    DIR *d = opendir(base);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *dir;
        char *owner;
        FILE *f;
        long pid = 0;

        if (strncmp(e->d_name, ZKT_DIR_PREFIX, strlen(ZKT_DIR_PREFIX)) != 0)
            continue;
        dir = xasprintf("%s/%s", base, e->d_name);
        owner = xasprintf("%s/" ZKT_OWNER_FILE, dir != NULL ? dir : "");
        f = owner != NULL ? fopen(owner, "r") : NULL;
        if (f != NULL) {
            if (fscanf(f, "%ld", &pid) != 1)
                pid = 0;
            fclose(f);
        }
        if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) == -1 &&
            errno == ESRCH)
            zkt_rm_rf(dir);
        free(owner);
        free(dir);
    }
    closedir(d);
}

static void server_free(zkt_server_t *s)
{
    free(s->dir);
    free(s->data_dir);
    free(s->cfg_path);
    free(s->log_path);
    free(s->log_opt);
    free(s->java);
    free(s->classpath);
    free(s->servers_cfg);
    free(s);
}

static zkt_server_t *server_new(void)
{
    zkt_server_t *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->pid = -1;
    s->dir = zkt_mkdtemp(ZKT_DIR_PREFIX);
    if (s->dir == NULL) {
        server_free(s);
        return NULL;
    }
    s->data_dir = xasprintf("%s/data", s->dir);
    s->cfg_path = xasprintf("%s/zoo.cfg", s->dir);
    s->log_path = xasprintf("%s/server.log", s->dir);
    s->log_opt = xasprintf("-Dzookeeper.log.dir=%s", s->dir);
    s->java = find_java();
    s->classpath = make_classpath();
    s->main_class = ZKT_MAIN;
    if (s->data_dir == NULL || s->cfg_path == NULL || s->log_path == NULL ||
        s->log_opt == NULL || s->java == NULL || s->classpath == NULL ||
        write_owner(s) != 0 || mkdir(s->data_dir, 0755) == -1) {
        zkt_rm_rf(s->dir);
        server_free(s);
        return NULL;
    }
    return s;
}

int zkt_server_start(zkt_server_t **out)
{
    int64_t deadline = zkt_now_ms() + ZKT_READY_TIMEOUT_MS;
    zkt_server_t *s;
    int rc = -1;

    *out = NULL;
    quiet_client_log();
    sweep_stale_dirs();
    s = server_new();
    if (s == NULL)
        return -1;
    /* Retry with a new port if someone else took ours before the bind. */
    for (int i = 0; i < ZKT_START_ATTEMPTS; i++) {
        s->port = free_port();
        if (s->port <= 0)
            break;
        snprintf(s->hosts, sizeof(s->hosts), "127.0.0.1:%d", s->port);
        if (write_config(s) != 0 || spawn_server(s) != 0)
            break;
        rc = wait_ready(s, deadline);
        if (rc == 0) {
            live_add(s);
            *out = s;
            return 0;
        }
        kill_and_reap(s);
        if (rc != -2)
            break;
    }
    dump_log_tail(s);
    zkt_rm_rf(s->dir);
    server_free(s);
    return -1;
}

const char *zkt_server_hosts(const zkt_server_t *s)
{
    return s->hosts;
}

int zkt_server_port(const zkt_server_t *s)
{
    return s->port;
}

pid_t zkt_server_pid(const zkt_server_t *s)
{
    return s->pid;
}

const char *zkt_server_dir(const zkt_server_t *s)
{
    return s->dir;
}

void zkt_server_stop(zkt_server_t *s)
{
    const char *keep = getenv("ZKT_KEEP_SERVER_DIR");

    if (s == NULL)
        return;
    live_remove(s);
    kill_and_reap(s);
    if (keep != NULL && strcmp(keep, "1") == 0) {
        /* Without its owner file the sweep leaves the dir alone. */
        char *owner = xasprintf("%s/" ZKT_OWNER_FILE, s->dir);

        if (owner != NULL)
            unlink(owner);
        free(owner);
        fprintf(stderr, "# harness: kept %s\n", s->dir);
    } else {
        zkt_rm_rf(s->dir);
    }
    server_free(s);
}

int zkt_server_kill(zkt_server_t *s)
{
    return kill_and_reap(s);
}

int zkt_server_restart(zkt_server_t *s)
{
    int64_t deadline = zkt_now_ms() + ZKT_READY_TIMEOUT_MS;

    kill_and_reap(s);
    /*
     * ZooKeeper binds with SO_REUSEADDR, so TIME_WAIT connections from the
     * killed server do not block the port; retry anyway in case the bind
     * fails for a moment.
     */
    while (zkt_now_ms() < deadline) {
        int rc;

        if (spawn_server(s) != 0)
            return -1;
        rc = wait_ready(s, deadline);
        if (rc == 0)
            return 0;
        kill_and_reap(s);
        if (rc != -2)
            break;
        zkt_sleep_ms(250);
    }
    dump_log_tail(s);
    return -1;
}

/* 1 when every thread of pid is stopped (state T or t in its stat). */
static int all_threads_stopped(pid_t pid)
{
    char path[64];
    DIR *d;
    struct dirent *de;
    int stopped = 1;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if ((d = opendir(path)) == NULL)
        return 0;
    while (stopped && (de = readdir(d)) != NULL) {
        char stat[sizeof(path) + 256 + 8], buf[512], *rp;
        FILE *f;
        if (de->d_name[0] == '.')
            continue;
        snprintf(stat, sizeof(stat), "%s/%s/stat", path, de->d_name);
        if ((f = fopen(stat, "r")) == NULL)
            continue; /* the thread is gone */
        if (fgets(buf, sizeof(buf), f) != NULL &&
            (rp = strrchr(buf, ')')) != NULL && rp[1] == ' ')
            stopped = rp[2] == 'T' || rp[2] == 't';
        fclose(f);
    }
    closedir(d);
    return stopped;
}

int zkt_server_pause(zkt_server_t *s)
{
    if (s->pid <= 0 || kill(-s->pid, SIGSTOP) == -1)
        return -1;
    s->paused = 1;
    /* SIGSTOP takes effect asynchronously: a server thread already on a
     * CPU could still answer a request sent right after kill() returns.
     * Wait until every thread is stopped. */
    if (!ZKT_WAIT_UNTIL(all_threads_stopped(s->pid), 5000))
        return -1;
    return 0;
}

int zkt_server_resume(zkt_server_t *s)
{
    if (s->pid <= 0 || kill(-s->pid, SIGCONT) == -1)
        return -1;
    s->paused = 0;
    return 0;
}

/* ---------------------------------------------------------------- proxy */

#define ZKT_PROXY_TIMEOUT_MS 10000

struct zkt_proxy {
    pid_t pid;
    int ctl; /* socketpair end: the proxy's stdin and stdout */
    char hosts[32];
};

/* Reads one line from fd into buf (without the newline). 0 or -1. */
static int read_line(int fd, char *buf, size_t cap, int64_t deadline)
{
    size_t len = 0;

    while (len + 1 < cap) {
        struct pollfd pfd = {fd, POLLIN, 0};
        ssize_t n;

        if (poll(&pfd, 1, remaining_ms(deadline)) != 1)
            return -1;
        n = read(fd, buf + len, 1);
        if (n == 1 && buf[len] == '\n') {
            buf[len] = '\0';
            return 0;
        }
        if (n == 1)
            len++;
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            return -1;
    }
    return -1;
}

int zkt_proxy_start(const char *target_hosts, zkt_proxy_t **out)
{
    zkt_proxy_t *p = calloc(1, sizeof(*p));
    char *prog = zkt_build_path("tests/bin/zkr-proxy");
    char line[64];
    int sv[2] = {-1, -1};
    int port;

    *out = NULL;
    if (p == NULL || prog == NULL ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        goto fail;
    {
        char *argv[] = {prog, (char *)target_hosts, NULL};

        p->pid = spawn_child(argv, sv[1], sv[1], -1);
    }
    close(sv[1]);
    p->ctl = sv[0];
    if (p->pid <= 0)
        goto fail;
    if (read_line(p->ctl, line, sizeof(line),
                  zkt_now_ms() + ZKT_PROXY_TIMEOUT_MS) != 0 ||
        sscanf(line, "port %d", &port) != 1) {
        zkt_proxy_stop(p);
        free(prog);
        return -1;
    }
    snprintf(p->hosts, sizeof(p->hosts), "127.0.0.1:%d", port);
    free(prog);
    *out = p;
    return 0;
fail:
    if (sv[0] >= 0)
        close(sv[0]);
    free(prog);
    free(p);
    return -1;
}

const char *zkt_proxy_hosts(const zkt_proxy_t *p)
{
    return p->hosts;
}

int zkt_proxy_cmd(zkt_proxy_t *p, const char *cmd)
{
    int64_t deadline = zkt_now_ms() + ZKT_PROXY_TIMEOUT_MS;
    char line[256];

    if (send_all(p->ctl, cmd, strlen(cmd), deadline) != 0 ||
        send_all(p->ctl, "\n", 1, deadline) != 0 ||
        read_line(p->ctl, line, sizeof(line), deadline) != 0)
        return -1;
    if (strcmp(line, "ok") != 0) {
        fprintf(stderr, "# harness: proxy: %s: %s\n", cmd, line);
        return -1;
    }
    return 0;
}

void zkt_proxy_stop(zkt_proxy_t *p)
{
    if (p == NULL)
        return;
    if (p->pid > 0) {
        /* EOF on its stdin makes it exit; SIGKILL if it does not. */
        shutdown(p->ctl, SHUT_WR);
        if (zkt_wait_pid(p->pid, 5000, NULL) != 0) {
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
            zkt_wait_pid(p->pid, -1, NULL);
        }
    }
    close(p->ctl);
    free(p);
}

/* ------------------------------------------------------------- ensemble */

struct zkt_ensemble {
    int n;
    zkt_server_t *m[ZKT_ENSEMBLE_MAX];
    char hosts[ZKT_ENSEMBLE_MAX * 24];
    /* With quorum proxies: link[i][j] carries member i's connections to
     * member j's quorum port (i != j), elink[i][j] to its election port;
     * else all NULL. */
    zkt_proxy_t *link[ZKT_ENSEMBLE_MAX][ZKT_ENSEMBLE_MAX];
    zkt_proxy_t *elink[ZKT_ENSEMBLE_MAX][ZKT_ENSEMBLE_MAX];
};

/* The port of member i's route to member k's port (through the proxy p,
 * if any). */
static int port_via(int i, int k, zkt_proxy_t *p, int port)
{
    const char *colon;

    if (i == k || p == NULL)
        return port;
    colon = strrchr(zkt_proxy_hosts(p), ':');
    return colon != NULL ? atoi(colon + 1) : -1;
}

/* Gives member i its ports, myid file and config; 0 or -1. Each member's
 * config names the others' quorum ports as it reaches them (through its
 * own proxies, if any): members need not agree on those addresses, only
 * on their ids and their own listening ports. */
static int ensemble_config(zkt_ensemble_t *e, const int *qport,
                           const int *eport, int i)
{
    zkt_server_t *s = e->m[i];
    char *myid = xasprintf("%s/myid", s->data_dir);
    size_t cap = 128 * (size_t)e->n;
    size_t len = 0;
    FILE *f;
    int rc = -1;

    s->servers_cfg = malloc(cap);
    if (myid == NULL || s->servers_cfg == NULL)
        goto out;
    for (int k = 0; k < e->n; k++)
        len += (size_t)snprintf(s->servers_cfg + len, cap - len,
                                "server.%d=127.0.0.1:%d:%d\n", k + 1,
                                port_via(i, k, e->link[i][k], qport[k]),
                                port_via(i, k, e->elink[i][k], eport[k]));
    f = fopen(myid, "w");
    if (f == NULL)
        goto out;
    fprintf(f, "%d\n", i + 1);
    if (fclose(f) == 0)
        rc = write_config(s);
out:
    free(myid);
    return rc;
}

void zkt_ensemble_stop(zkt_ensemble_t *e)
{
    if (e == NULL)
        return;
    for (int i = 0; i < e->n; i++)
        zkt_server_stop(e->m[i]);
    for (int i = 0; i < e->n; i++)
        for (int j = 0; j < e->n; j++) {
            zkt_proxy_stop(e->link[i][j]);
            zkt_proxy_stop(e->elink[i][j]);
        }
    free(e);
}

int zkt_ensemble_start(int n, zkt_ensemble_t **out)
{
    return zkt_ensemble_start_opts(n, NULL, out);
}

/* Starts the proxies of every ordered pair of members, to the quorum and
 * election ports of the second. 0 or -1. */
static int start_links(zkt_ensemble_t *e, const int *qport, const int *eport)
{
    for (int i = 0; i < e->n; i++)
        for (int j = 0; j < e->n; j++) {
            char q[32], el[32];

            if (i == j)
                continue;
            snprintf(q, sizeof(q), "127.0.0.1:%d", qport[j]);
            snprintf(el, sizeof(el), "127.0.0.1:%d", eport[j]);
            if (zkt_proxy_start(q, &e->link[i][j]) != 0 ||
                zkt_proxy_start(el, &e->elink[i][j]) != 0)
                return -1;
        }
    return 0;
}

int zkt_ensemble_start_opts(int n, const zkt_ensemble_options_t *o,
                            zkt_ensemble_t **out)
{
    int64_t deadline = zkt_now_ms() + ZKT_READY_TIMEOUT_MS;
    int qport[ZKT_ENSEMBLE_MAX], eport[ZKT_ENSEMBLE_MAX];
    zkt_ensemble_t *e;
    size_t len = 0;

    *out = NULL;
    if (n < 1 || n > ZKT_ENSEMBLE_MAX)
        return -1;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return -1;
    quiet_client_log();
    sweep_stale_dirs();
    for (int i = 0; i < n; i++) {
        e->m[i] = server_new();
        if (e->m[i] == NULL)
            goto fail;
        e->n = i + 1;
        live_add(e->m[i]);
        e->m[i]->main_class = ZKT_QUORUM_MAIN;
        if (o != NULL) {
            e->m[i]->tick_ms = o->tick_ms;
            e->m[i]->sync_limit = o->sync_limit;
        }
        e->m[i]->port = free_port();
        qport[i] = free_port();
        eport[i] = free_port();
        if (e->m[i]->port <= 0 || qport[i] <= 0 || eport[i] <= 0)
            goto fail;
        snprintf(e->m[i]->hosts, sizeof(e->m[i]->hosts), "127.0.0.1:%d",
                 e->m[i]->port);
        len += (size_t)snprintf(e->hosts + len, sizeof(e->hosts) - len, "%s%s",
                                i ? "," : "", e->m[i]->hosts);
    }
    if (o != NULL && o->quorum_proxies && start_links(e, qport, eport) != 0)
        goto fail;
    /* All members first: none serves before a quorum has formed. */
    for (int i = 0; i < n; i++)
        if (ensemble_config(e, qport, eport, i) != 0 ||
            spawn_server(e->m[i]) != 0)
            goto fail;
    for (int i = 0; i < n; i++) {
        if (wait_ready(e->m[i], deadline) != 0) {
            dump_log_tail(e->m[i]);
            goto fail;
        }
    }
    *out = e;
    return 0;
fail:
    zkt_ensemble_stop(e);
    return -1;
}

int zkt_ensemble_link(zkt_ensemble_t *e, int i, int j, const char *cmd)
{
    if (i < 0 || j < 0 || i >= e->n || j >= e->n || i == j ||
        e->link[i][j] == NULL)
        return -1;
    if (zkt_proxy_cmd(e->link[i][j], cmd) != 0 ||
        zkt_proxy_cmd(e->link[j][i], cmd) != 0 ||
        zkt_proxy_cmd(e->elink[i][j], cmd) != 0 ||
        zkt_proxy_cmd(e->elink[j][i], cmd) != 0)
        return -1;
    return 0;
}

int zkt_ensemble_isolate(zkt_ensemble_t *e, int i, const char *cmd)
{
    for (int j = 0; j < e->n; j++)
        if (j != i && zkt_ensemble_link(e, i, j, cmd) != 0)
            return -1;
    return 0;
}

const char *zkt_ensemble_hosts(const zkt_ensemble_t *e)
{
    return e->hosts;
}

int zkt_ensemble_size(const zkt_ensemble_t *e)
{
    return e->n;
}

zkt_server_t *zkt_ensemble_member(zkt_ensemble_t *e, int i)
{
    return i >= 0 && i < e->n ? e->m[i] : NULL;
}

/* "Mode: leader" or "Mode: follower" in srvr, else NULL. */
static const char *member_mode(zkt_server_t *s)
{
    char *reply;
    const char *mode = NULL;

    if (s->pid <= 0 || s->paused)
        return NULL;
    reply = four_letter_word(s->port, "srvr", 1000);
    if (reply != NULL && strstr(reply, "Mode: leader") != NULL)
        mode = "leader";
    else if (reply != NULL && strstr(reply, "Mode: follower") != NULL)
        mode = "follower";
    free(reply);
    return mode;
}

int zkt_ensemble_leader(zkt_ensemble_t *e)
{
    for (int i = 0; i < e->n; i++) {
        const char *mode = member_mode(e->m[i]);

        if (mode != NULL && strcmp(mode, "leader") == 0)
            return i;
    }
    return -1;
}

int zkt_ensemble_serving(zkt_ensemble_t *e)
{
    int n = 0;

    for (int i = 0; i < e->n; i++)
        n += member_mode(e->m[i]) != NULL;
    return n;
}

void zkt_ensemble_dump(zkt_ensemble_t *e, const char *why)
{
    for (int i = 0; i < e->n; i++) {
        zkt_server_t *m = e->m[i];
        char *srvr = m->pid > 0 && !m->paused
                         ? four_letter_word(m->port, "srvr", 1000)
                         : NULL;
        char *what = xasprintf("(member %d, pid %d%s, %s) srvr: %s", i,
                               (int)m->pid, m->paused ? ", paused" : "", why,
                               srvr != NULL ? srvr : "(no answer)");

        log_tail(m, what != NULL ? what : why);
        free(what);
        free(srvr);
    }
}
