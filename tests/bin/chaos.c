/* The soak behind `make chaos`: lock contenders, electors and runners of
 * leader functions (zkr_election_run(), tests/bin/contender -R) in separate
 * processes (tests/bin/contender -r -d) against one real server, some through
 * the fault proxy, while a fault is injected every 0.5-3 s at random. At
 * the end the history checker (tests/bin/zkr-check) judges every process's
 * events, the server is checked for leftover nodes (getChildren and the
 * ephemerals in "dump") and watches ("wchs"), and one
 * reliability line is printed:
 *
 *   chaos: seconds=... <zkr-check's counters> orphans=N leaked_watches=N
 *          stuck=N
 *
 * (stuck: processes still running 60 s after the end, when every one
 * should have stopped within its 10 s acquire timeout; they are killed,
 * after gdb prints every thread's stack when ZKR_CHAOS_GDB is set.) A
 * failed run keeps its history directory, and so does a clean one when
 * ZKR_CHAOS_KEEP is set (its path on stderr).
 *
 *   chaos [-d SECONDS] [-l LOCKERS] [-e ELECTORS] [-R RUNNERS]
 *         [-f FOREIGN] [-t SESSION_MS] [-D DELAY_MS] [-s SEED] [-E] [-b]
 *         [-Q [-P PRODUCERS] [-C CONSUMERS] [-x MAX]]
 *
 * -D gives the lockers a lock-delay (issue 16) and tells the checker,
 * which then also counts a grant earlier than DELAY_MS after a holder's
 * kill (early_grants).
 *
 * Defaults: 600 s, 6 lockers (half through the proxy), 3 electors (one
 * through the proxy), 2 runners (one through the proxy; each leader
 * function steps for 4 s, writing its epoch to a fenced store, unless its
 * stop descriptor says stop; they share the election with the electors),
 * 1 foreign actor, 3000 ms sessions, seed from the
 * clock. A foreign actor (tests/bin/foreign) is a raw client that joins both
 * queues as Curator- and kazoo-named contenders that wait and leave, and
 * writes ("__REVOKE__") and deletes other contenders' waiting nodes
 * (never the first's); the checker holds every grant against what it
 * did. It plays another client, not a contender under test: faults are
 * not aimed at it. Exit status
 * 0 when the line is clean, 1 otherwise (the history is kept then, and its
 * path printed).
 *
 * Fault kinds: reset (proxy resets every connection), blackhole (proxy
 * drops everything for 0.3 s to 1.5 session timeouts: short blips and
 * partitions with expiry), delay (200 ms each way for 1-3 s),
 * drop-create (the next create's reply is lost), pause (SIGSTOP of one
 * process for 0.2 s to 1.5 session timeouts; a third of the time the
 * lock's holder and a third the election's leader, past its session
 * timeout: a zombie whose late fenced write, or leader step, must be
 * rejected), delete-leader (the election leader's node deleted by the
 * driver's own client, as an operator's `zkr release --force` would;
 * logged as op-delete with the epoch it ends), kill (SIGKILL of
 * one process, restarted at once; the next fault waits for the session
 * timeout so that the handover is measured alone), server-pause (within
 * half the session timeout), server-restart (killed, back within half the
 * session timeout). Every fault is logged to the history (fault-start,
 * fault-stop, and pause/unpause/kill of a process).
 *
 * -E (ensemble, `make chaos-ensemble`): a 3-node ensemble (tickTime
 * 250 ms, syncLimit 5) whose quorum and election links run through fault
 * proxies. Each contender talks to one member only: the proxied ones
 * through the client proxy to member 0, the others directly to member
 * index % 3 (so some to the leader, some to followers); the foreign actor
 * and the driver's own client know every member. The server faults are
 * replaced by faults between members: follower-cut (a follower's links to
 * the leader blackholed for 0.3 s to 1.5 session timeouts), leader-isolated
 * (every link of the leader, as long), follower-lag (a follower's link to
 * the leader delayed 100-500 ms for 2-5 s) and member-restart (one member
 * killed, back within a quarter of the session timeout). After each of
 * these the next fault waits until every member serves again (60 s at
 * most), so that one outage is judged at a time. Their fault-start event
 * names the member (0-2) in its last field.
 *
 * -Q (`make chaos CHAOS_FLAGS=-Q`, issue 17): a work queue at /chaos/queue
 * too, with PRODUCERS (2) putting an item every 100 ms and CONSUMERS (4)
 * taking, working 100 ms and acking (nacking front or back 2 times in 10),
 * dead-lettering after MAX (5) deliveries (tests/bin/contender -Q); every
 * other one through the proxy. They are killed and paused like the others
 * (a fourth of the pauses freeze a consumer past its session: its claim
 * passes on and its late ack must be refused). Once every process has
 * gone and the killed consumers' claims with their sessions, the queue is
 * read (tests/lib/workq_snap.h) into the history, and the checker judges it:
 * nothing lost, nothing acked twice or by a superseded claim, deliveries
 * and tokens growing per item, no claim of a dead session.
 * (-l 0 -e 0 -R 0 -f 0 -Q: the queue alone.)
 *
 * -b: the first locker takes no lock at all, and the first runner's
 * leader function ignores its stop descriptor (tests/bin/contender -b), to
 * show that the checker catches both; the line is then not clean. With
 * -Q, the first consumer acks by deleting its item and every claim of it
 * whatever their versions (the unchecked consume of kazoo's LockingQueue),
 * which becomes a superseded ack when a pause past its session lets
 * another consumer claim its item and the item is still there when it
 * acks (not in every run: the other consumer may have acked it first). */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "seq.h"
#include "workq_snap.h"

#define MAX_PROCS 64
#define LOCK_PATH "/chaos/lock"
#define ELECT_PATH "/chaos/elect"
#define QUEUE_PATH "/chaos/queue"

struct proc {
    pid_t pid;
    int elector;
    int runner; /* runs leader functions (contender -R) */
    int proxied;
    int broken;
    char queue;        /* 'P' a work queue's producer, 'C' its consumer */
    const char *hosts; /* where it connects */
    char id[16];
};

static zkt_server_t *server;
static zkt_proxy_t *proxy;
static zkt_ensemble_t *ens; /* -E: instead of server */
static struct proc procs[MAX_PROCS];
static int nprocs;
static pid_t foreign[8];
static int nforeign = 1;
static char hist[512], store[512], estore[512];
static int session_ms = 3000;
static int delay_ms;             /* -D: the lockers' lock-delay */
static char dead_arg[16] = "5";  /* -x: the consumers' dead-lettering */
static char delay_arg[16] = "0"; /* ... as text */
static int64_t end_ms;
static char *contender;
static zhandle_t *raw; /* direct to the server, for finding the holder */
static int queue_on;   /* -Q: a work queue's producers and consumers too */

/* One driver event; b is the member a fault between members is aimed at
 * (-E), else 0. */
static void event_b(const char *what, const char *arg, int b)
{
    struct timespec ts;
    FILE *f = fopen(hist, "a");

    if (f == NULL)
        exit(3);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(f, "%lld %ld 0 %s %s %d\n",
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)getpid(),
            what, arg, b);
    fclose(f);
}

static void event(const char *what, const char *arg)
{
    event_b(what, arg, 0);
}

static void event_pid(const char *what, pid_t pid)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%ld", (long)pid);
    event(what, buf);
}

static void spawn(struct proc *p)
{
    char secs[32], t[16];
    char *argv[24];
    int k = 0;
    int64_t left = (end_ms - zkt_now_ms()) / 1000;

    snprintf(secs, sizeof(secs), "%lld", (long long)(left > 0 ? left : 0));
    snprintf(t, sizeof(t), "%d", session_ms);
    argv[k++] = contender;
    argv[k++] = "-r";
    argv[k++] = "-d";
    argv[k++] = secs;
    argv[k++] = "-s";
    argv[k++] = (char *)p->hosts;
    argv[k++] = "-p";
    argv[k++] = p->queue                  ? QUEUE_PATH
                : p->elector || p->runner ? ELECT_PATH
                                          : LOCK_PATH;
    argv[k++] = "-H";
    argv[k++] = hist;
    argv[k++] = "-t";
    argv[k++] = t;
    argv[k++] = "-i";
    argv[k++] = p->id;
    argv[k++] = "-h";
    argv[k++] = p->queue == 'P' ? "100"
                : p->queue      ? "100"
                : p->runner     ? "4000"
                : p->elector    ? "50"
                                : "20";
    if (delay_ms > 0 && !p->runner && !p->elector) {
        argv[k++] = "-D";
        argv[k++] = delay_arg;
    }
    if (p->broken)
        argv[k++] = "-b";
    if (p->queue) {
        argv[k++] = "-Q";
        argv[k++] = p->queue == 'P' ? "P" : "C";
        argv[k++] = "-x";
        argv[k++] = dead_arg;
    } else if (p->runner) {
        argv[k++] = "-R";
        argv[k++] = "-F";
        argv[k++] = estore;
    } else if (p->elector) {
        argv[k++] = "-E";
    } else {
        argv[k++] = "-F";
        argv[k++] = store;
    }
    argv[k] = NULL;
    p->pid = zkt_spawn(argv, -1);
    if (p->pid <= 0) {
        fprintf(stderr, "chaos: cannot spawn %s\n", contender);
        exit(3);
    }
}

static int rnd(int lo, int hi)
{
    return lo + rand() % (hi - lo + 1);
}

/* The process whose node is first in the queue at dir right now (node
 * data is the contender's id), or NULL; its node's path and czxid go to
 * node and czxid when given. */
static struct proc *first_of(const char *dir, char *node, size_t len,
                             int64_t *czxid)
{
    struct String_vector v = {0, NULL};
    const char *first = NULL;
    int32_t best = 0, seq;
    char path[256], id[32];
    int idlen = (int)sizeof(id) - 1;
    struct proc *p = NULL;
    struct Stat st;

    memset(&st, 0, sizeof(st));
    if (zoo_get_children(raw, dir, 0, &v) != ZOK)
        return NULL;
    for (int i = 0; i < v.count; i++) {
        if (zkt_name_seq(v.data[i], &seq) != 0)
            continue;
        if (first == NULL || zkt_seq_before(seq, best)) {
            first = v.data[i];
            best = seq;
        }
    }
    if (first != NULL) {
        snprintf(path, sizeof(path), "%s/%s", dir, first);
        if (zoo_get(raw, path, 0, id, &idlen, &st) == ZOK && idlen >= 0) {
            id[idlen] = '\0';
            for (int i = 0; i < nprocs && p == NULL; i++)
                if (strcmp(procs[i].id, id) == 0)
                    p = &procs[i];
        }
        if (node != NULL)
            snprintf(node, len, "%s", path);
        if (czxid != NULL)
            *czxid = st.czxid;
    }
    deallocate_String_vector(&v);
    return p;
}

static struct proc *lock_holder(void)
{
    return first_of(LOCK_PATH, NULL, 0, NULL);
}

/* A consumer of the work queue at random, or NULL. */
static struct proc *a_consumer(void)
{
    int n = 0, k;

    for (int i = 0; i < nprocs; i++)
        n += procs[i].queue == 'C';
    if (n == 0)
        return NULL;
    k = rand() % n;
    for (int i = 0; i < nprocs; i++)
        if (procs[i].queue == 'C' && k-- == 0)
            return &procs[i];
    return NULL;
}

/* The operator's forced release of the election's leader (as `zkr
 * release --force` does): its node deleted by another client. Only a
 * node of ours (the foreign actor keeps its own books). Logged before the
 * delete as op-delete <czxid>, the epoch it ends. */
static void delete_leader(void)
{
    char node[256], buf[32];
    int64_t czxid = 0;

    if (first_of(ELECT_PATH, node, sizeof(node), &czxid) == NULL)
        return;
    snprintf(buf, sizeof(buf), "%lld", (long long)czxid);
    event("op-delete", buf);
    zoo_delete(raw, node, -1);
}

/* Every server: the ensemble's members, or the one server. */
static const char *all_hosts(void)
{
    return ens != NULL ? zkt_ensemble_hosts(ens) : zkt_server_hosts(server);
}

/* A member other than `not`, at random. */
static int other_member(int not )
{
    int m = rand() % (zkt_ensemble_size(ens) - 1);

    return m >= not ? m + 1 : m;
}

/* Heals every link between members and waits (60 s) until every member
 * serves again. */
static void heal_ensemble(void)
{
    for (int i = 0; i < zkt_ensemble_size(ens); i++)
        zkt_ensemble_isolate(ens, i, "pass");
    if (!ZKT_WAIT_UNTIL(zkt_ensemble_serving(ens) == zkt_ensemble_size(ens) &&
                            zkt_ensemble_leader(ens) >= 0,
                        60000))
        fprintf(stderr, "chaos: ensemble not whole again after 60 s\n");
}

/* A fault between members (-E). The leader is waited for (30 s) first;
 * 0 if there was none (no fault then), else 1 with the fault over. */
static int inject_quorum(const char *kind)
{
    int leader = -1, ms;
    char buf[32];

    ZKT_WAIT_UNTIL((leader = zkt_ensemble_leader(ens)) >= 0, 30000);
    if (leader < 0)
        return 0;
    if (strcmp(kind, "follower-cut") == 0) {
        int f = other_member(leader);

        event_b("fault-start", kind, f);
        zkt_ensemble_link(ens, f, leader, "blackhole");
        zkt_sleep_ms(rnd(300, session_ms * 3 / 2));
        zkt_ensemble_link(ens, f, leader, "pass");
    } else if (strcmp(kind, "leader-isolated") == 0) {
        event_b("fault-start", kind, leader);
        zkt_ensemble_isolate(ens, leader, "blackhole");
        zkt_sleep_ms(rnd(300, session_ms * 3 / 2));
        zkt_ensemble_isolate(ens, leader, "pass");
    } else if (strcmp(kind, "follower-lag") == 0) {
        int f = other_member(leader);

        event_b("fault-start", kind, f);
        snprintf(buf, sizeof(buf), "delay %d", rnd(100, 500));
        zkt_ensemble_link(ens, f, leader, buf);
        zkt_sleep_ms(rnd(2000, 5000));
        zkt_ensemble_link(ens, f, leader, "pass");
    } else if (strcmp(kind, "member-restart") == 0) {
        int m = rand() % zkt_ensemble_size(ens);
        zkt_server_t *s = zkt_ensemble_member(ens, m);

        event_b("fault-start", kind, m);
        zkt_server_kill(s);
        zkt_sleep_ms(rnd(0, session_ms / 4));
        if (zkt_server_restart(s) != 0) {
            fprintf(stderr, "chaos: member %d restart failed\n", m);
            exit(3);
        }
    }
    event("fault-stop", kind);
    ms = (int)zkt_now_ms();
    heal_ensemble();
    ms = (int)zkt_now_ms() - ms;
    if (ms > 5000)
        fprintf(stderr, "chaos: %s: every member serves again after %d ms\n",
                kind, ms);
    return 1;
}

/* The foreign actor, direct to the server, until the end. */
static pid_t spawn_foreign(void)
{
    char secs[32];
    char *prog = zkt_build_path("tests/bin/foreign");
    char *argv[] = {prog,       "-s",      (char *)all_hosts(),
                    "-p",       LOCK_PATH, "-e",
                    ELECT_PATH, "-H",      hist,
                    "-d",       secs,      NULL};
    int64_t left = (end_ms - 5000 - zkt_now_ms()) / 1000;
    pid_t pid;

    snprintf(secs, sizeof(secs), "%lld", (long long)(left > 0 ? left : 0));
    pid = zkt_spawn(argv, -1);
    free(prog);
    if (pid <= 0) {
        fprintf(stderr, "chaos: cannot spawn tests/bin/foreign\n");
        exit(3);
    }
    return pid;
}

/* One fault, from start to stop. Returns how long to wait extra after. */
static int inject(const char **kinds, int nkinds)
{
    const char *kind = kinds[rand() % nkinds];
    struct proc *p = &procs[rand() % nprocs];
    int extra = 0;

    if (strstr(kind, "follower-") == kind || strstr(kind, "leader-") == kind ||
        strstr(kind, "member-") == kind)
        return inject_quorum(kind) ? 0 : -1;
    event("fault-start", kind);
    if (strcmp(kind, "reset") == 0) {
        zkt_proxy_cmd(proxy, "reset");
    } else if (strcmp(kind, "blackhole") == 0) {
        zkt_proxy_cmd(proxy, "blackhole");
        zkt_sleep_ms(rnd(300, session_ms * 3 / 2));
        zkt_proxy_cmd(proxy, "pass");
    } else if (strcmp(kind, "delay") == 0) {
        zkt_proxy_cmd(proxy, "delay 200");
        zkt_sleep_ms(rnd(1000, 3000));
        zkt_proxy_cmd(proxy, "pass");
    } else if (strcmp(kind, "drop-create") == 0) {
        zkt_proxy_cmd(proxy, "drop-create-reply");
        zkt_sleep_ms(500);
    } else if (strcmp(kind, "pause") == 0) {
        /* Two times in three, freeze the lock's holder or the
         * election's leader past its session timeout: a zombie that will
         * try a late fenced write (or leader step) when it runs again.
         * With -Q, a fourth of the time a consumer, which holds a claim
         * most of the time, as long: its late ack must be refused. */
        int r = rand() % (queue_on ? 4 : 3);
        struct proc *h = r == 0   ? lock_holder()
                         : r == 1 ? first_of(ELECT_PATH, NULL, 0, NULL)
                         : r == 3 ? a_consumer()
                                  : NULL;
        int ms = h != NULL ? rnd(session_ms * 5 / 4, session_ms * 3 / 2)
                           : rnd(200, session_ms * 3 / 2);

        if (h != NULL)
            p = h;
        event_pid("pause", p->pid);
        kill(p->pid, SIGSTOP);
        zkt_sleep_ms(ms);
        kill(p->pid, SIGCONT);
        event_pid("unpause", p->pid);
    } else if (strcmp(kind, "delete-leader") == 0) {
        delete_leader();
    } else if (strcmp(kind, "kill") == 0) {
        event_pid("kill", p->pid);
        kill(p->pid, SIGKILL);
        zkt_wait_pid(p->pid, -1, NULL);
        spawn(p);
        extra = session_ms + 1000;
    } else if (strcmp(kind, "server-pause") == 0) {
        zkt_server_pause(server);
        zkt_sleep_ms(rnd(200, session_ms / 2));
        zkt_server_resume(server);
    } else if (strcmp(kind, "server-restart") == 0) {
        zkt_server_kill(server);
        zkt_sleep_ms(rnd(0, session_ms / 4));
        if (zkt_server_restart(server) != 0) {
            fprintf(stderr, "chaos: server restart failed\n");
            exit(3);
        }
    }
    event("fault-stop", kind);
    return extra;
}

/* Watches left on every server (-1 if one does not answer). */
/* Prints each node left under path (recursively) with the session that
 * owns it (0: persistent), for a failed run's diagnosis. */
static void show_leftovers(zhandle_t *zh, const char *path)
{
    struct String_vector sv;

    if (zoo_get_children(zh, path, 0, &sv) != ZOK)
        return;
    for (int i = 0; i < sv.count; i++) {
        char child[512];
        struct Stat st;

        snprintf(child, sizeof(child), "%s/%s", path, sv.data[i]);
        if (zoo_exists(zh, child, 0, &st) == ZOK)
            fprintf(stderr, "chaos: left: %s owner 0x%llx czxid 0x%llx\n",
                    child, (unsigned long long)st.ephemeralOwner,
                    (unsigned long long)st.czxid);
        show_leftovers(zh, child);
    }
    deallocate_String_vector(&sv);
}

static int total_watches(void)
{
    long n = 0;

    if (ens == NULL)
        return (int)zkt_total_watches(server);
    for (int i = 0; i < zkt_ensemble_size(ens); i++) {
        long w = zkt_total_watches(zkt_ensemble_member(ens, i));

        if (w < 0)
            return -1;
        n += w;
    }
    return (int)n;
}

/* Runs zkr-check on the history; copies its line (without newline). */
static int check(char *line, size_t cap)
{
    char *prog = zkt_build_path("tests/bin/zkr-check");
    char out[600], t[16];
    char *argv[] = {prog, "-v", "-t", t, "-D", delay_arg, hist, NULL};
    int fd, st = -1;
    FILE *f;

    snprintf(out, sizeof(out), "%s.check", hist);
    snprintf(t, sizeof(t), "%d", session_ms);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || zkt_wait_pid(zkt_spawn(argv, fd), 600000, &st) != 0)
        return -1;
    close(fd);
    f = fopen(out, "r");
    line[0] = '\0';
    if (f != NULL) {
        if (fgets(line, (int)cap, f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    free(prog);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
    static const char *kinds[] = {
        "reset", "blackhole",     "delay",        "drop-create",    "pause",
        "kill",  "delete-leader", "server-pause", "server-restart",
    };
    /* -E: the faults between members count twice as often. */
    static const char *ens_kinds[] = {
        "reset",           "blackhole",       "delay",
        "drop-create",     "pause",           "kill",
        "delete-leader",   "follower-cut",    "follower-cut",
        "leader-isolated", "leader-isolated", "follower-lag",
        "follower-lag",    "member-restart",  "member-restart",
    };
    int seconds = 600, lockers = 6, electors = 3, runners = 2, opt;
    int producers = 2, consumers = 4, nq;
    int faults = 0, rc;
    int ensemble = 0, broken = 0, stuck = 0;
    unsigned seed = (unsigned)time(NULL);
    char *dir, line[2048];
    zhandle_t *zh;
    int orphans, watches;
    int64_t t0;

    while ((opt = getopt(argc, argv, "d:l:e:R:f:t:D:s:EbQP:C:x:")) != -1) {
        switch (opt) {
        case 'd':
            seconds = atoi(optarg);
            break;
        case 'l':
            lockers = atoi(optarg);
            break;
        case 'e':
            electors = atoi(optarg);
            break;
        case 'R':
            runners = atoi(optarg);
            break;
        case 'f':
            nforeign = atoi(optarg);
            break;
        case 't':
            session_ms = atoi(optarg);
            break;
        case 'D':
            delay_ms = atoi(optarg);
            snprintf(delay_arg, sizeof(delay_arg), "%d", delay_ms);
            break;
        case 's':
            seed = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'E':
            ensemble = 1;
            break;
        case 'b':
            broken = 1;
            break;
        case 'Q':
            queue_on = 1;
            break;
        case 'P':
            producers = atoi(optarg);
            break;
        case 'C':
            consumers = atoi(optarg);
            break;
        case 'x':
            snprintf(dead_arg, sizeof(dead_arg), "%d", atoi(optarg));
            break;
        default:
            fprintf(stderr, "usage: chaos [-d SECONDS] [-l LOCKERS] "
                            "[-e ELECTORS] [-R RUNNERS] [-f FOREIGN] "
                            "[-t SESSION_MS] [-D DELAY_MS] "
                            "[-s SEED] [-E] [-b] [-Q [-P PRODUCERS] "
                            "[-C CONSUMERS] [-x MAX]]\n");
            return 2;
        }
    }
    nq = queue_on ? producers + consumers : 0;
    if (lockers + electors + runners + nq > MAX_PROCS || runners < 0 ||
        lockers < 0 || electors < 0 || producers < 0 || consumers < 0 ||
        lockers + electors + runners + nq < 1 || nforeign < 0 || nforeign > 8)
        return 2;
    srand(seed);
    contender = zkt_build_path("tests/bin/contender");
    dir = zkt_mkdtemp("zkr-chaos-");
    if (ensemble) {
        zkt_ensemble_options_t o = {
            .tick_ms = 250, .sync_limit = 5, .quorum_proxies = 1};

        if (zkt_ensemble_start_opts(3, &o, &ens) != 0)
            ens = NULL;
    }
    if (contender == NULL || dir == NULL ||
        (ensemble ? ens == NULL : zkt_server_start(&server) != 0) ||
        zkt_proxy_start(ensemble ? zkt_server_hosts(zkt_ensemble_member(ens, 0))
                                 : zkt_server_hosts(server),
                        &proxy) != 0) {
        fprintf(stderr, "chaos: cannot start the server or proxy\n");
        return 3;
    }
    snprintf(hist, sizeof(hist), "%s/history", dir);
    snprintf(store, sizeof(store), "%s/store", dir);
    snprintf(estore, sizeof(estore), "%s/store-elect", dir);
    fprintf(stderr,
            "chaos: %d s, %d lockers, %d electors, %d runners, %d foreign, "
            "%d producers, %d consumers, session %d ms, seed %u,%s "
            "history %s\n",
            seconds, lockers, electors, runners, nforeign, nq ? producers : 0,
            nq ? consumers : 0, session_ms, seed,
            ensemble ? " 3-node ensemble," : "", hist);
    t0 = zkt_now_ms();
    end_ms = t0 + 1000LL * seconds;
    raw = zkt_connect(all_hosts(), 30000);
    if (raw == NULL)
        return 3;
    for (int i = 0; i < lockers + electors + runners; i++) {
        struct proc *p = &procs[nprocs++];

        p->runner = i >= lockers + electors;
        p->elector = i >= lockers && !p->runner;
        p->proxied = p->runner    ? i == lockers + electors
                     : p->elector ? i == lockers
                                  : i % 2 == 0;
        /* -b: the first locker, and the first runner, break the rules. */
        p->broken = broken && ((i == 0 && !p->elector && !p->runner) ||
                               (p->runner && i == lockers + electors));
        if (p->proxied)
            p->hosts = zkt_proxy_hosts(proxy);
        else if (ensemble)
            p->hosts = zkt_server_hosts(zkt_ensemble_member(ens, i % 3));
        else
            p->hosts = zkt_server_hosts(server);
        snprintf(p->id, sizeof(p->id), "%s%d",
                 p->runner    ? "r"
                 : p->elector ? "e"
                              : "l",
                 i);
        spawn(p);
    }
    /* -Q: producers, then consumers; every other one through the proxy
     * (-b: the first consumer acks without the claim check). */
    for (int i = 0; i < nq; i++) {
        struct proc *p = &procs[nprocs++];

        p->queue = i < producers ? 'P' : 'C';
        p->proxied = i % 2 == 0;
        p->broken = broken && i == producers;
        if (p->proxied)
            p->hosts = zkt_proxy_hosts(proxy);
        else if (ensemble)
            p->hosts = zkt_server_hosts(zkt_ensemble_member(ens, i % 3));
        else
            p->hosts = zkt_server_hosts(server);
        snprintf(p->id, sizeof(p->id), "%s%d", p->queue == 'P' ? "p" : "c", i);
        spawn(p);
    }
    for (int i = 0; i < nforeign; i++)
        foreign[i] = spawn_foreign();
    /* Faults until 5 s before the end, then a quiet finish. */
    while (zkt_now_ms() < end_ms - 5000) {
        int extra;

        zkt_sleep_ms(rnd(500, 3000));
        if (zkt_now_ms() >= end_ms - 5000)
            break;
        extra = ensemble
                    ? inject(ens_kinds,
                             (int)(sizeof(ens_kinds) / sizeof(ens_kinds[0])))
                    : inject(kinds, (int)(sizeof(kinds) / sizeof(kinds[0])));
        if (extra < 0)
            continue;
        faults++;
        if (extra > 0)
            zkt_sleep_ms(extra);
    }
    zkt_proxy_cmd(proxy, "pass");
    if (ens != NULL)
        heal_ensemble();
    /* Every process ends by itself soon after the end (an acquire waits
     * 10 s at most); one still there 60 s after it is stuck: named,
     * counted, and killed (so that its session ends before the check for
     * leftover nodes). */
    for (int i = 0; i < nprocs + nforeign; i++) {
        pid_t pid = i < nprocs ? procs[i].pid : foreign[i - nprocs];
        int64_t left = end_ms + 60000 - zkt_now_ms();

        if (zkt_wait_pid(pid, left > 0 ? (int)left : 0, NULL) != 0) {
            fprintf(stderr,
                    "chaos: %s (pid %ld) still running 60 s after "
                    "the end\n",
                    i < nprocs ? procs[i].id : "foreign", (long)pid);
            stuck++;
            if (getenv("ZKR_CHAOS_GDB") != NULL) {
                /* Where it waits, before it is killed. */
                char cmd[160];

                snprintf(cmd, sizeof(cmd),
                         "gdb -p %ld -batch -ex 'thread apply all bt' "
                         "1>&2 2>/dev/null",
                         (long)pid);
                if (system(cmd) != 0)
                    fprintf(stderr, "chaos: gdb failed on pid %ld\n",
                            (long)pid);
            }
            kill(pid, SIGKILL);
            zkt_wait_pid(pid, -1, NULL);
        }
    }

    /* Nothing may be left once every process has gone. */
    zh = raw;
    ZKT_WAIT_UNTIL(zkt_count_children(zh, LOCK_PATH) == 0 &&
                       zkt_count_children(zh, ELECT_PATH) == 0 &&
                       zkt_count_children(zh, QUEUE_PATH "/consumers") == 0,
                   2 * session_ms + 2000);
    orphans = zkt_count_children(zh, LOCK_PATH) +
              zkt_count_children(zh, ELECT_PATH) +
              zkt_count_children(zh, QUEUE_PATH "/consumers");
    if (orphans != 0) {
        show_leftovers(zh, LOCK_PATH);
        show_leftovers(zh, ELECT_PATH);
        show_leftovers(zh, QUEUE_PATH "/consumers");
    }
    if (queue_on) {
        /* The queue as the run left it, for the checker: claims of killed
         * consumers have gone within their session timeout (the checker
         * judges claims of sessions over for SESSION_MS + 5 s). */
        ZKT_WAIT_UNTIL(zkt_workq_claimed(zh, QUEUE_PATH) == 0,
                       session_ms + 7000);
        if (zkt_workq_snapshot(zh, QUEUE_PATH, hist) < 0)
            fprintf(stderr, "chaos: cannot read the queue at the end\n");
    }
    zookeeper_close(zh);
    {
        /* The server's own view: ephemerals still listed by "dump". */
        int leader = ens != NULL ? zkt_ensemble_leader(ens) : -1;
        char *dump = zkt_4lw(
            ens == NULL ? server
                        : zkt_ensemble_member(ens, leader >= 0 ? leader : 0),
            "dump");
        int in_dump = 0;

        for (char *q = dump; q != NULL && (q = strstr(q, "/chaos/")) != NULL;
             q++)
            in_dump++;
        if (in_dump > 0) /* which sessions still hold which nodes */
            fprintf(stderr, "chaos: the server's dump at the end:\n%s", dump);
        if (dump == NULL || in_dump > orphans)
            orphans = dump == NULL ? -1 : in_dump;
        free(dump);
    }
    ZKT_WAIT_UNTIL((watches = total_watches()) == 0, 5000);

    rc = check(line, sizeof(line));
    printf("chaos: seconds=%lld %s orphans=%d leaked_watches=%d stuck=%d\n",
           (long long)((zkt_now_ms() - t0) / 1000), line, orphans, watches,
           stuck);
    fflush(stdout);
    zkt_proxy_stop(proxy);
    if (ens != NULL)
        zkt_ensemble_stop(ens);
    else
        zkt_server_stop(server);
    if (rc != 0 || orphans != 0 || watches != 0 || stuck != 0) {
        fprintf(stderr, "chaos: FAILED (checker exit %d); history kept in %s\n",
                rc, dir);
        return 1;
    }
    if (getenv("ZKR_CHAOS_KEEP") != NULL) /* a clean run's history too */
        fprintf(stderr, "chaos: history kept in %s\n", dir);
    else
        zkt_rm_rf(dir);
    (void)faults;
    return 0;
}
