/* The history checker (tests/bin/zkr-check) and the histories of contender
 * processes: a clean run of 8 processes passes every check; a broken lock
 * (contender -b) and hand-written bad histories are caught, so the checker
 * can fail; each property's counter moves on its own violation. A foreign
 * actor (tests/bin/foreign) writing and deleting waiters' nodes and joining
 * as Curator and kazoo contenders must not cause two holders. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include "server_test.h"

/* The checker's output line and exit status. */
struct check {
    int status;
    char line[1024];
};

/* The contenders' lock-delay the checker is told (-D), or 0. */
static int check_delay_ms;

/* Runs zkr-check -v on the given history files. */
static struct check run_checker(const char *dir, int session_ms,
                                const char *const *files, int nfiles)
{
    char *prog = zkt_build_path("tests/bin/zkr-check");
    char out[512], t[16], d[16];
    char *argv[16];
    struct check c = {-1, ""};
    int k = 0, fd, st = -1;
    FILE *f;

    snprintf(out, sizeof(out), "%s/check.out", dir);
    snprintf(t, sizeof(t), "%d", session_ms);
    argv[k++] = prog;
    argv[k++] = "-v";
    argv[k++] = "-t";
    argv[k++] = t;
    if (check_delay_ms > 0) {
        snprintf(d, sizeof(d), "%d", check_delay_ms);
        argv[k++] = "-D";
        argv[k++] = d;
    }
    for (int i = 0; i < nfiles && k < 15; i++)
        argv[k++] = (char *)files[i];
    argv[k] = NULL;
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    pid_t pid = zkt_spawn(argv, fd);
    close(fd);
    assert_true(pid > 0);
    assert_int_equal(zkt_wait_pid(pid, 60000, &st), 0);
    assert_true(WIFEXITED(st));
    c.status = WEXITSTATUS(st);
    f = fopen(out, "r");
    assert_non_null(f);
    if (fgets(c.line, sizeof(c.line), f) == NULL)
        c.line[0] = '\0';
    fclose(f);
    print_message("# zkr-check: %s", c.line);
    free(prog);
    return c;
}

/* The value of "key=" in the checker's line, or -1. */
static long field_of(const struct check *c, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), " %s=", key);
    p = strstr(c->line, pat);
    return p != NULL ? atol(p + strlen(pat)) : -1;
}

/* Lines of the history that contain word (" fn-start ", say). */
static int count_word(const char *hist, const char *word)
{
    char line[256];
    int n = 0;
    FILE *f = fopen(hist, "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, word) != NULL;
    fclose(f);
    return n;
}

/* Spawns n contenders on path with history and fenced store in dir. */
static void run_history(const char *dir, const char *path, int n, int iters,
                        int broken)
{
    char *prog = zkt_build_path("tests/bin/contender");
    char hist[512], store[512], iters_s[16], go[512];
    pid_t pids[16];

    snprintf(go, sizeof(go), "%s/go", dir);
    snprintf(hist, sizeof(hist), "%s/history", dir);
    snprintf(store, sizeof(store), "%s/store", dir);
    snprintf(iters_s, sizeof(iters_s), "%d", iters);
    for (int i = 0; i < n; i++) {
        char *argv[] = {prog,    "-s",         (char *)zkt_server_hosts(server),
                        "-p",    (char *)path, "-n",
                        iters_s, "-H",         hist,
                        "-F",    store,        "-t",
                        "4000",  "-h",         broken ? "20" : "3",
                        "-w",    go,           broken ? "-b" : NULL,
                        NULL};
        pids[i] = zkt_spawn(argv, -1);
        assert_true(pids[i] > 0);
    }
    /* Start every loop at once: the broken ones must overlap. */
    assert_true(ZKT_WAIT_UNTIL(count_word(hist, " ready ") == n, 30000));
    fclose(fopen(go, "w"));
    for (int i = 0; i < n; i++) {
        int st = -1;
        assert_int_equal(zkt_wait_pid(pids[i], 120000, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    free(prog);
}

/* Clean contention: 8 processes, 5 grants each; every property holds and
 * nothing is left on the server. */
static void test_clean_contention(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    char hist[512];
    const char *files[] = {hist};
    struct check c;

    (void)state;
    snprintf(hist, sizeof(hist), "%s/history", dir);
    run_history(dir, "/h/clean", 8, 5, 0);
    c = run_checker(dir, 4000, files, 1);
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "acquisitions"), 40);
    assert_int_equal(field_of(&c, "mutex_violations"), 0);
    assert_int_equal(field_of(&c, "fifo_inversions"), 0);
    assert_int_equal(field_of(&c, "stale_rejected"), 0);
    assert_int_equal(children("/h/clean"), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 0, 5000));
    zkt_rm_rf(dir);
    free(dir);
}

/* The self-test: processes that skip the lock (contender -b) overlap, and
 * the checker must say so and fail. */
static void test_checker_fails_broken_lock(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    char hist[512];
    const char *files[] = {hist};
    struct check c;

    (void)state;
    snprintf(hist, sizeof(hist), "%s/history", dir);
    run_history(dir, "/h/broken", 4, 20, 1);
    c = run_checker(dir, 4000, files, 1);
    assert_int_equal(c.status, 1);
    assert_true(field_of(&c, "mutex_violations") > 0);
    assert_true(field_of(&c, "fifo_inversions") > 0);
    zkt_rm_rf(dir);
    free(dir);
}

/* The test driver's own history event, with argument arg. */
static void driver_event_arg(const char *hist, const char *what,
                             const char *arg)
{
    struct timespec ts;
    FILE *f = fopen(hist, "a");

    assert_non_null(f);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(f, "%lld %ld 0 %s %s 0\n",
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)getpid(),
            what, arg);
    fclose(f);
}

/* The test driver's own history event about process pid. */
static void driver_event(const char *hist, const char *what, pid_t pid)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%ld", (long)pid);
    driver_event_arg(hist, what, buf);
}

/* Spawns n electors (contender -E) on path; returns their pids. */
static void spawn_electors(const char *hist, const char *path, int n, int terms,
                           int broken, pid_t *pids)
{
    char *prog = zkt_build_path("tests/bin/contender");
    char terms_s[16];

    snprintf(terms_s, sizeof(terms_s), "%d", terms);
    for (int i = 0; i < n; i++) {
        char id[16];
        char *argv[] = {prog,
                        "-E",
                        "-s",
                        (char *)zkt_server_hosts(server),
                        "-p",
                        (char *)path,
                        "-n",
                        terms_s,
                        "-H",
                        (char *)hist,
                        "-t",
                        "2000",
                        "-h",
                        "20",
                        "-i",
                        id,
                        broken ? "-b" : NULL,
                        NULL};
        snprintf(id, sizeof(id), "e%d", i);
        pids[i] = zkt_spawn(argv, -1);
        assert_true(pids[i] > 0);
    }
    free(prog);
}

/* Election churn: 5 electors take 6 terms each while one is paused for
 * 0.5 s and another killed; never two leaders, epochs only increase, and
 * the killed one's node goes with its session. Then electors that claim
 * leadership without an election are caught. */
static void test_election_churn(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    char hist[512], hist2[512];
    const char *files[] = {hist};
    const char *files2[] = {hist2};
    pid_t pids[5];
    struct check c;
    int st = -1;

    (void)state;
    snprintf(hist, sizeof(hist), "%s/history", dir);
    snprintf(hist2, sizeof(hist2), "%s/broken", dir);
    spawn_electors(hist, "/h/elect", 5, 6, 0, pids);
    zkt_sleep_ms(300);
    driver_event(hist, "pause", pids[1]);
    assert_int_equal(kill(pids[1], SIGSTOP), 0);
    zkt_sleep_ms(500);
    assert_int_equal(kill(pids[1], SIGCONT), 0);
    driver_event(hist, "unpause", pids[1]);
    zkt_sleep_ms(100);
    driver_event(hist, "kill", pids[0]);
    assert_int_equal(kill(pids[0], SIGKILL), 0);
    assert_int_equal(zkt_wait_pid(pids[0], 10000, &st), 0);
    for (int i = 1; i < 5; i++) {
        assert_int_equal(zkt_wait_pid(pids[i], 120000, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    c = run_checker(dir, 2000, files, 1);
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "double_leaders"), 0);
    assert_int_equal(field_of(&c, "epoch_regressions"), 0);
    assert_true(field_of(&c, "leaderships") >= 24);
    assert_true(ZKT_WAIT_UNTIL(children("/h/elect") == 0, 10000));

    spawn_electors(hist2, "/h/elect-broken", 3, 10, 1, pids);
    for (int i = 0; i < 3; i++)
        assert_int_equal(zkt_wait_pid(pids[i], 60000, &st), 0);
    c = run_checker(dir, 2000, files2, 1);
    assert_int_equal(c.status, 1);
    assert_true(field_of(&c, "double_leaders") > 0);
    zkt_rm_rf(dir);
    free(dir);
}

/* Spawns a runner (contender -R -r) on path for 7 s; its leader
 * functions hold 4 s each. */
static pid_t spawn_runner(const char *hist, const char *store, const char *path,
                          const char *id, int broken)
{
    char *prog = zkt_build_path("tests/bin/contender");
    char *argv[] = {prog,
                    "-R",
                    "-r",
                    "-d",
                    "7",
                    "-s",
                    (char *)zkt_server_hosts(server),
                    "-p",
                    (char *)path,
                    "-H",
                    (char *)hist,
                    "-F",
                    (char *)store,
                    "-t",
                    "2000",
                    "-h",
                    "4000",
                    "-i",
                    (char *)id,
                    broken ? "-b" : NULL,
                    NULL};
    pid_t pid = zkt_spawn(argv, -1);

    assert_true(pid > 0);
    free(prog);
    return pid;
}

/* The first node at dir (the leader's): its path, czxid and owner's id
 * (node data); 0, or -1 if there is none. */
static int first_node(const char *dir, char *node, size_t len, int64_t *czxid,
                      char *id, int idlen)
{
    struct Stat st;
    int n = idlen - 1;

    if (first_latch(dir, node, len) != 0 ||
        zoo_get(raw, node, 0, id, &n, &st) != ZOK || n < 0)
        return -1;
    id[n] = '\0';
    *czxid = st.czxid;
    return 0;
}

/* Two runners, a (broken: ignores the stop descriptor, if asked) and b,
 * each leader function holding 4 s unless told to stop. Once a leads and
 * b waits: an operator deletes the leader's node (b takes over at once),
 * and a second later the leader then is frozen for 1.5 session timeouts
 * (the other takes over after the expiry). The checker's verdict. */
static struct check run_two_runners(const char *dir, const char *path,
                                    int broken)
{
    char hist[512], store[512], node[256], id[32], ev[64];
    const char *files[] = {hist};
    pid_t a, b, paused;
    int64_t czxid = 0;

    snprintf(hist, sizeof(hist), "%s/history-%s", dir, broken ? "b" : "ok");
    snprintf(store, sizeof(store), "%s/store-%s", dir, broken ? "b" : "ok");
    a = spawn_runner(hist, store, path, "a", broken);
    assert_true(ZKT_WAIT_UNTIL(count_word(hist, " fn-start ") == 1, 30000));
    b = spawn_runner(hist, store, path, "b", 0);
    assert_true(ZKT_WAIT_UNTIL(children(path) == 2, 30000));

    assert_int_equal(
        first_node(path, node, sizeof(node), &czxid, id, (int)sizeof(id)), 0);
    assert_string_equal(id, "a");
    snprintf(ev, sizeof(ev), "%lld", (long long)czxid);
    driver_event_arg(hist, "op-delete", ev);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    zkt_sleep_ms(1000);

    assert_int_equal(
        first_node(path, node, sizeof(node), &czxid, id, (int)sizeof(id)), 0);
    paused = strcmp(id, "a") == 0 ? a : b;
    driver_event(hist, "pause", paused);
    assert_int_equal(kill(paused, SIGSTOP), 0);
    zkt_sleep_ms(3000);
    assert_int_equal(kill(paused, SIGCONT), 0);
    driver_event(hist, "unpause", paused);

    for (int i = 0; i < 2; i++) {
        int st = -1;
        assert_int_equal(zkt_wait_pid(i ? b : a, 60000, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_true(ZKT_WAIT_UNTIL(children(path) == 0, 10000));
    return run_checker(dir, 2000, files, 1);
}

/* Issue 20, "done when": leader functions of zkr_election_run() that
 * follow the stop contract never interleave their effects, through an
 * operator's delete of the leader's node and a pause past the session
 * timeout; a function that ignores the descriptor is caught. */
static void test_run_functions(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    struct check c;

    (void)state;
    c = run_two_runners(dir, "/h/run", 0);
    assert_int_equal(field_of(&c, "fn_interleavings"), 0);
    assert_int_equal(field_of(&c, "double_leaders"), 0);
    assert_int_equal(field_of(&c, "fencing_violations"), 0);
    assert_true(field_of(&c, "fn_runs") >= 3);
    assert_true(field_of(&c, "effects") > 0);
    assert_int_equal(c.status, 0);

    c = run_two_runners(dir, "/h/run-broken", 1);
    assert_true(field_of(&c, "fn_interleavings") > 0);
    assert_int_equal(c.status, 1);
    zkt_rm_rf(dir);
    free(dir);
}

/* Writes lines to dir/name and checks it; the file name goes in files. */
static struct check check_text(const char *dir, const char *text)
{
    char path[512];
    const char *files[] = {path};
    FILE *f;

    snprintf(path, sizeof(path), "%s/synthetic", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return run_checker(dir, 1000, files, 1);
}

/* Hand-written histories (times in ns, session timeout 1 s, margin 5 s):
 * each violation moves its own counter, and what the failure model
 * excuses (a suspended, paused or killed holder) is not counted. */
static void test_checker_properties(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    struct check c;

    (void)state;
    /* Overlap of two healthy holders. */
    c = check_text(dir, "1 10 a enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 11 b enqueue 0 0\n4 11 b grant 6 2\n");
    assert_int_equal(c.status, 1);
    assert_int_equal(field_of(&c, "mutex_violations"), 1);
    /* The holder reported SUSPENDED first: fine. */
    c = check_text(dir, "2 10 a grant 5 1\n3 10 a suspend 0 0\n"
                        "4 11 b grant 6 2\n");
    assert_int_equal(c.status, 0);
    /* ... but not once it is verified again (held). */
    c = check_text(dir, "2 10 a grant 5 1\n3 10 a suspend 0 0\n"
                        "4 10 a held 0 0\n5 11 b grant 6 2\n");
    assert_int_equal(field_of(&c, "mutex_violations"), 1);
    /* A paused holder (a zombie) is excused, even after it resumes. */
    c = check_text(dir, "2 10 a grant 5 1\n3 1 d pause 10 0\n"
                        "4 11 b grant 6 2\n5 1 d unpause 10 0\n"
                        "6 10 a held 0 0\n7 11 b release 6 0\n");
    assert_int_equal(c.status, 0);
    /* Grants out of queue order. */
    c = check_text(dir, "2 10 a grant 5 2\n3 10 a release 5 0\n"
                        "4 11 b grant 6 1\n");
    assert_int_equal(field_of(&c, "fifo_inversions"), 1);
    assert_int_equal(c.status, 1);
    /* The store admitted a lower token after a higher one. */
    c = check_text(dir, "2 10 a fence-ok 7 0\n3 11 b fence-reject 5 0\n"
                        "4 11 b fence-ok 6 0\n");
    assert_int_equal(field_of(&c, "fencing_violations"), 1);
    assert_int_equal(field_of(&c, "stale_rejected"), 1);
    /* Two leaders at once, and an epoch that went back. */
    c = check_text(dir, "2 10 a leader-on 5 0\n3 11 b leader-on 4 0\n");
    assert_int_equal(field_of(&c, "double_leaders"), 1);
    assert_int_equal(field_of(&c, "epoch_regressions"), 1);
    c = check_text(dir, "2 10 a leader-on 5 0\n3 10 a leader-off 0 0\n"
                        "4 11 b leader-on 6 0\n");
    assert_int_equal(c.status, 0);
    /* Holder killed with a waiter queued: the waiter must be granted
     * within session timeout + margin (6 s here); 7 s is late. */
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 1 d kill 10 0\n7000000003 11 b grant 6 2\n");
    assert_int_equal(field_of(&c, "late_handovers"), 1);
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 1 d kill 10 0\n1500000003 11 b grant 6 2\n");
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "handover_p99_ms"), 1500);
    /* With a lock-delay of 2 s (issue 16), that grant 1.5 s after the kill
     * is early; one 2.5 s after it is not, nor one after a release. */
    check_delay_ms = 2000;
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 1 d kill 10 0\n1500000003 11 b grant 6 2\n");
    assert_int_equal(c.status, 1);
    assert_int_equal(field_of(&c, "early_grants"), 1);
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 1 d kill 10 0\n2500000003 11 b grant 6 2\n");
    assert_int_equal(c.status, 0);
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 10 a release 5 0\n4 11 b grant 6 2\n");
    assert_int_equal(c.status, 0);
    /* A grant 2.5 s after a clean release (released) is delayed: the
     * release record lets the waiter in at once. Not judged when a fault
     * started, or a waiter gave up (its plain delete is a death), in
     * between; and a prompt grant passes. */
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 10 a release 5 0\n4 10 a released 5 0\n"
                        "2500000004 11 b grant 6 2\n");
    assert_int_equal(c.status, 1);
    assert_int_equal(field_of(&c, "delayed_grants"), 1);
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 10 a release 5 0\n4 10 a released 5 0\n"
                        "5 1 d fault-start reset 0\n6 1 d fault-stop reset 0\n"
                        "2500000004 11 b grant 6 2\n");
    assert_int_equal(field_of(&c, "delayed_grants"), 0);
    c = check_text(dir, "1 11 b enqueue 0 0\n1 12 c enqueue 0 0\n"
                        "2 10 a grant 5 1\n3 10 a release 5 0\n"
                        "4 10 a released 5 0\n5 11 b giveup 0 0\n"
                        "2500000004 12 c grant 6 3\n");
    assert_int_equal(field_of(&c, "delayed_grants"), 0);
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 10 a release 5 0\n4 10 a released 5 0\n"
                        "1900000004 11 b grant 6 2\n");
    assert_int_equal(c.status, 0);
    /* The bound on a handover grows by the delay: 7.5 s is not late. */
    c = check_text(dir, "1 11 b enqueue 0 0\n2 10 a grant 5 1\n"
                        "3 1 d kill 10 0\n7500000003 11 b grant 6 2\n");
    assert_int_equal(field_of(&c, "late_handovers"), 0);
    check_delay_ms = 0;
    zkt_rm_rf(dir);
    free(dir);
}

/* The pid of the process holding the lock per the history (its last
 * grant, not released since), or -1. */
static pid_t history_holder(const char *hist)
{
    char line[256], what[32];
    long long t;
    long pid, holder = -1;
    FILE *f = fopen(hist, "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lld %ld %*s %31s", &t, &pid, what) != 3)
            continue;
        if (strcmp(what, "grant") == 0)
            holder = pid;
        else if (strcmp(what, "release") == 0 && pid == holder)
            holder = -1;
    }
    fclose(f);
    return (pid_t)holder;
}

/* Lock-delay (issue 16) in the history: three contenders with a delay
 * longer than their session timeout; the holder is killed (SIGKILL) with
 * waiters queued. Its node goes at its session's expiry; the next grant
 * must come no earlier than the delay after the kill (early_grants), a
 * grant after a clean release must not be delayed (delayed_grants), and
 * every other property holds. */
static void test_delay_after_kill(void **state)
{
    char *prog = zkt_build_path("tests/bin/contender");
    char *dir = zkt_mkdtemp("zkr-history-");
    char hist[512], store[512], go[512];
    const char *files[] = {hist};
    pid_t pids[3], victim = -1;
    struct check c;
    int st = -1;

    (void)state;
    snprintf(hist, sizeof(hist), "%s/history", dir);
    snprintf(store, sizeof(store), "%s/store", dir);
    snprintf(go, sizeof(go), "%s/go", dir);
    for (int i = 0; i < 3; i++) {
        char *argv[] = {prog,   "-s",       (char *)zkt_server_hosts(server),
                        "-p",   "/h/delay", "-n",
                        "3",    "-H",       hist,
                        "-F",   store,      "-t",
                        "2000", "-h",       "800",
                        "-D",   "4000",     "-w",
                        go,     NULL};
        pids[i] = zkt_spawn(argv, -1);
        assert_true(pids[i] > 0);
    }
    assert_true(ZKT_WAIT_UNTIL(count_word(hist, " ready ") == 3, 30000));
    fclose(fopen(go, "w"));
    /* A holder with both others queued behind it. */
    assert_true(ZKT_WAIT_UNTIL(
        count_word(hist, " enqueue ") >= 3 && history_holder(hist) > 0, 30000));
    zkt_sleep_ms(300); /* the others' creates and watches */
    victim = history_holder(hist);
    assert_true(victim > 0);
    driver_event(hist, "kill", victim);
    assert_int_equal(kill(victim, SIGKILL), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zkt_wait_pid(pids[i], 120000, &st), 0);
        if (pids[i] != victim)
            assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    check_delay_ms = 4000;
    c = run_checker(dir, 2000, files, 1);
    check_delay_ms = 0;
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "early_grants"), 0);
    assert_int_equal(field_of(&c, "mutex_violations"), 0);
    assert_true(field_of(&c, "acquisitions") >= 6);
    assert_true(ZKT_WAIT_UNTIL(children("/h/delay") == 0, 10000));
    zkt_rm_rf(dir);
    free(dir);
    free(prog);
}

/* a leads with epoch 5; an operator deletes its node; b leads with 6 and
 * acts; then what a did (tail), checked. */
static struct check check_ousted(const char *dir, const char *tail)
{
    char text[1024];

    snprintf(text, sizeof(text),
             "1 10 a fn-start 5 0\n2 1 d op-delete 5 0\n"
             "3 11 b fn-start 6 0\n4 11 b check 6 500\n"
             "5 11 b effect 6 0\n%s",
             tail);
    return check_text(dir, text);
}

/* a's step 700 ms after its node's deletion (check_ousted()). */
#define LATE_STEP                                                              \
    "700000007 10 a check 5 500\n700000008 10 a effect-reject 5 0\n"

/* a leads with epoch 5; a reset fault from 0.8 to 0.9 s suspends it,
 * then what; the driver deletes its node at 1.7 s, b leads and acts, and
 * a, still unaware, steps 700 ms after the deletion. */
#define EARLIER_FAULT(then)                                                    \
    "1 10 a fn-start 5 0\n800000000 1 d fault-start reset 0\n"                 \
    "810000000 10 a s-suspend 0 0\n900000000 1 d fault-stop reset 0\n" then
#define DELETED_AT_1700_MS                                                     \
    "1700000000 1 d op-delete 5 0\n1700000001 11 b fn-start 6 0\n"             \
    "1700000002 11 b check 6 500\n1700000003 11 b effect 6 0\n"                \
    "2400000000 10 a check 5 500\n2400000001 10 a effect-reject 5 0\n"

/* The leader-function rule in hand-written histories (session 1 s,
 * margin 5 s, grace 500 ms): an older leader's effect after a newer
 * leader's is counted unless the function could not have known (paused
 * between its check and the effect, its valid_ms ran out meanwhile, or its
 * node was deleted by someone else so recently that the deletion could
 * not yet have reached it and its descriptor was not yet readable at the
 * check). */
static void test_checker_functions(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    struct check c;

    (void)state;
    /* a saw its descriptor readable, then still acted. */
    c = check_ousted(dir, "6 10 a fd-on 5 0\n7 10 a check 5 500\n"
                          "8 10 a effect-reject 5 0\n");
    assert_int_equal(field_of(&c, "fn_interleavings"), 1);
    assert_int_equal(field_of(&c, "double_leaders"), 0);
    assert_int_equal(c.status, 1);
    /* Not yet readable: the deletion reached both at about the same time,
     * which the fence covers. */
    c = check_ousted(dir, "7 10 a check 5 500\n8 10 a effect-reject 5 0\n");
    assert_int_equal(field_of(&c, "effects_refused"), 1);
    assert_int_equal(c.status, 0);
    /* ... but not a session timeout (1 s) after the deletion: the stop
     * never came. */
    c = check_ousted(dir, "7000000007 10 a check 5 500\n"
                          "7000000008 10 a effect-reject 5 0\n");
    assert_int_equal(field_of(&c, "fn_interleavings"), 1);
    /* Over a healthy link the deletion reaches the old leader within the
     * grace (500 ms): a step 700 ms after it, still unaware, means the
     * library never told it (review20: an own-node watch set late). */
    c = check_ousted(dir, LATE_STEP);
    assert_int_equal(field_of(&c, "fn_interleavings"), 1);
    assert_int_equal(c.status, 1);
    /* ... unless its link was impaired: a link fault, or a suspension
     * since a session timeout before the deletion (the stop may then take
     * until SUSPENDED or valid_ms), but not the deletion itself. */
    c = check_ousted(dir, "6 1 d fault-start blackhole 0\n" LATE_STEP);
    assert_int_equal(c.status, 0);
    c = check_ousted(
        dir, "6 10 a s-suspend 0 0\n7 10 a s-reconnect 0 0\n" LATE_STEP);
    assert_int_equal(c.status, 0);
    c = check_ousted(dir, "6 1 d fault-start delete-leader 0\n" LATE_STEP);
    assert_int_equal(field_of(&c, "fn_interleavings"), 1);
    /* rereview20: a link fault (and a's suspension) that ended 0.8 s
     * before the deletion, a reconnected since, explains nothing: its
     * watches were set again, so the late step is counted... */
    c = check_text(dir, EARLIER_FAULT("950000000 10 a s-reconnect 0 0\n")
                            DELETED_AT_1700_MS);
    assert_int_equal(field_of(&c, "fn_interleavings"), 1);
    assert_int_equal(c.status, 1);
    /* ... but a still suspended at the deletion, or reconnected only
     * after it, may not have heard of it... */
    c = check_text(dir, EARLIER_FAULT("") DELETED_AT_1700_MS);
    assert_int_equal(c.status, 0);
    c = check_text(dir,
                   EARLIER_FAULT("") "1650000000 1 d op-delete 5 0\n"
                                     "1800000000 10 a s-reconnect 0 0\n"
                                     "1800000001 11 b fn-start 6 0\n"
                                     "1800000002 11 b check 6 500\n"
                                     "1800000003 11 b effect 6 0\n"
                                     "2400000000 10 a check 5 500\n"
                                     "2400000001 10 a effect-reject 5 0\n");
    assert_int_equal(c.status, 0);
    /* ... and a fault that stopped less than GRACE_MS before the deletion
     * counts (the proxy may still pass on what it held back). */
    c = check_text(dir,
                   "1 10 a fn-start 5 0\n"
                   "1300000000 1 d fault-start reset 0\n"
                   "1400000000 1 d fault-stop reset 0\n" DELETED_AT_1700_MS);
    assert_int_equal(c.status, 0);
    /* The deposed function keeps acting after the grace while the new
     * one runs but has not acted yet: two functions overlap (counted once
     * per function); within the grace it could not have known. */
    c = check_text(dir, "1 10 a fn-start 5 0\n2 1 d op-delete 5 0\n"
                        "3 11 b fn-start 6 0\n"
                        "700000000 10 a check 5 500\n"
                        "700000001 10 a effect 5 0\n"
                        "800000000 10 a check 5 500\n"
                        "800000001 10 a effect 5 0\n");
    assert_int_equal(field_of(&c, "double_leaders"), 1);
    assert_int_equal(c.status, 1);
    c = check_text(dir, "1 10 a fn-start 5 0\n2 1 d op-delete 5 0\n"
                        "3 11 b fn-start 6 0\n"
                        "100000000 10 a check 5 500\n"
                        "100000001 10 a effect 5 0\n");
    assert_int_equal(c.status, 0);
    /* It knew, but its valid_ms (1 ms) ran out before the effect. */
    c = check_ousted(dir, "6 10 a fd-on 5 0\n7 10 a check 5 1\n"
                          "3000000 10 a effect-reject 5 0\n");
    assert_int_equal(c.status, 0);
    /* Paused between its check and its effect (a zombie): the new leader
     * starts beside its function, and its late effect is refused. */
    c = check_text(dir, "1 10 a fn-start 5 0\n2 10 a check 5 500\n"
                        "3 1 d pause 10 0\n4 11 b fn-start 6 0\n"
                        "5 11 b check 6 500\n6 11 b effect 6 0\n"
                        "7 1 d unpause 10 0\n8 10 a effect-reject 5 0\n");
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "double_leaders"), 0);
    /* A function that starts beside another one that nothing stopped. */
    c = check_text(dir, "1 10 a fn-start 5 0\n2 11 b fn-start 6 0\n");
    assert_int_equal(field_of(&c, "double_leaders"), 1);
    /* The same leadership's function again (after a re-verified
     * suspension) is no epoch regression; another's would be. */
    c = check_text(dir, "1 10 a fn-start 5 0\n2 10 a fn-return 5 0\n"
                        "3 10 a fn-start 5 0\n4 10 a fn-return 5 0\n");
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "fn_runs"), 2);
    assert_int_equal(field_of(&c, "leaderships"), 1);
    c = check_text(dir, "1 10 a fn-start 5 0\n2 10 a fn-return 5 0\n"
                        "3 11 b fn-start 5 0\n");
    assert_int_equal(field_of(&c, "epoch_regressions"), 1);
    /* An effect the store admitted below one admitted before. */
    c = check_text(dir, "1 11 b effect 6 0\n2 10 a effect 5 0\n");
    assert_int_equal(field_of(&c, "fencing_violations"), 1);
    zkt_rm_rf(dir);
    free(dir);
}

/* Spawns prog with argv (NULL-terminated, prog first). */
static pid_t spawn_args(char **argv)
{
    pid_t pid = zkt_spawn(argv, -1);

    assert_true(pid > 0);
    return pid;
}

/* Lockers and electors (resilient: an error is a giveup, and they go on)
 * run for a few seconds beside the foreign actor, which joins both queues
 * as Curator- and kazoo-named contenders, writes "__REVOKE__" into
 * waiters' nodes and deletes them (never the first's). The checker's rule:
 * never two holders (zkr's or a foreign contender created before the
 * grant), no grant on a deleted node, tokens and epochs only increase. */
static void test_foreign_actor(void **state)
{
    char dir[400], contender[512], foreign[512];
    char hist[512], store[512], secs[16], fsecs[16];
    const char *files[] = {hist};
    pid_t pids[8];
    int n = 0;
    long joins = 0, writes = 0, deletes = 0;
    const char *f;
    struct check c;

    (void)state;
    /* Copies, so that a failed assertion leaks nothing. */
    {
        char *d = zkt_mkdtemp("zkr-history-");
        char *co = zkt_build_path("tests/bin/contender");
        char *fo = zkt_build_path("tests/bin/foreign");

        assert_true(d != NULL && co != NULL && fo != NULL);
        snprintf(dir, sizeof(dir), "%s", d);
        snprintf(contender, sizeof(contender), "%s", co);
        snprintf(foreign, sizeof(foreign), "%s", fo);
        free(d);
        free(co);
        free(fo);
    }
    snprintf(hist, sizeof(hist), "%s/history", dir);
    snprintf(store, sizeof(store), "%s/store", dir);
    snprintf(secs, sizeof(secs), "%d", 8);
    snprintf(fsecs, sizeof(fsecs), "%d", 7);
    for (int i = 0; i < 6; i++) {
        char id[16];
        int e = i >= 4;
        char *argv[] = {contender,
                        "-r",
                        "-d",
                        secs,
                        "-s",
                        (char *)zkt_server_hosts(server),
                        "-p",
                        e ? "/h/foreign-elect" : "/h/foreign-lock",
                        "-H",
                        hist,
                        "-t",
                        "4000",
                        "-h",
                        "20",
                        "-i",
                        id,
                        e ? "-E" : "-F",
                        e ? NULL : store,
                        NULL};
        snprintf(id, sizeof(id), "%c%d", e ? 'e' : 'l', i);
        pids[n++] = spawn_args(argv);
    }
    {
        char *argv[] = {foreign,
                        "-s",
                        (char *)zkt_server_hosts(server),
                        "-p",
                        "/h/foreign-lock",
                        "-e",
                        "/h/foreign-elect",
                        "-H",
                        hist,
                        "-d",
                        fsecs,
                        "-i",
                        "60",
                        NULL};
        pids[n++] = spawn_args(argv);
    }
    for (int i = 0; i < n; i++) {
        int st = -1;
        assert_int_equal(zkt_wait_pid(pids[i], 120000, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    c = run_checker(dir, 4000, files, 1);
    f = strstr(c.line, " foreign=");
    assert_non_null(f);
    assert_int_equal(
        sscanf(f, " foreign=%ld/%ld/%ld", &joins, &writes, &deletes), 3);
    /* The actor did meddle: the run tested something. */
    assert_true(joins > 0);
    assert_true(writes > 0);
    assert_true(deletes > 0);
    assert_true(field_of(&c, "acquisitions") > 0);
    assert_true(field_of(&c, "leaderships") > 0);
    assert_int_equal(field_of(&c, "mutex_violations"), 0);
    assert_int_equal(field_of(&c, "double_leaders"), 0);
    assert_int_equal(field_of(&c, "deleted_grants"), 0);
    assert_int_equal(field_of(&c, "token_regressions"), 0);
    assert_int_equal(field_of(&c, "fencing_violations"), 0);
    assert_int_equal(c.status, 0);
    assert_true(ZKT_WAIT_UNTIL(children("/h/foreign-lock") == 0 &&
                                   children("/h/foreign-elect") == 0,
                               10000));
    zkt_rm_rf(dir);
}

/* The foreign actor's events in hand-written histories: each rule moves
 * its own counter, and what it allows is not counted. */
static void test_checker_foreign(void **state)
{
    char *dir = zkt_mkdtemp("zkr-history-");
    struct check c;

    (void)state;
    /* A grant past a foreign contender created before it (czxid 4 < 6)
     * that is still there: two holders, or a queue jumped. */
    c = check_text(dir, "1 20 f foreign-on 4 0\n2 11 b enqueue 0 0\n"
                        "3 11 b grant 6 2\n");
    assert_int_equal(field_of(&c, "mutex_violations"), 1);
    assert_int_equal(c.status, 1);
    /* ... fine once it left, or if it came later (czxid 7 > 6). */
    c = check_text(dir, "1 20 f foreign-on 4 0\n2 20 f foreign-off 4 0\n"
                        "3 11 b grant 6 2\n4 20 f foreign-on 7 0\n"
                        "5 11 b release 6 0\n6 12 c grant 8 3\n");
    assert_int_equal(field_of(&c, "mutex_violations"), 1);
    c = check_text(dir, "1 20 f foreign-on 4 0\n2 20 f foreign-off 4 0\n"
                        "3 11 b grant 6 2\n4 20 f foreign-on 7 0\n");
    assert_int_equal(c.status, 0);
    /* A foreign latch before a leader. */
    c = check_text(dir, "1 20 f foreign-on 4 1\n2 11 b leader-on 6 0\n");
    assert_int_equal(field_of(&c, "double_leaders"), 1);
    /* A lock's foreign contender does not block an election. */
    c = check_text(dir, "1 20 f foreign-on 4 0\n2 11 b leader-on 6 0\n");
    assert_int_equal(c.status, 0);
    /* A grant on a node deleted as a waiter, earlier or later in time. */
    c = check_text(dir, "1 20 f foreign-delete 6 0\n2 11 b grant 6 2\n");
    assert_int_equal(field_of(&c, "deleted_grants"), 1);
    assert_int_equal(c.status, 1);
    c = check_text(dir, "1 20 f foreign-delete 6 1\n2 11 b grant 6 2\n"
                        "3 20 f foreign-write 7 0\n");
    assert_int_equal(c.status, 0);
    assert_int_equal(field_of(&c, "foreign"), 0);
    /* Tokens of successive grants only increase. */
    c = check_text(dir, "2 10 a grant 6 1\n3 10 a release 6 0\n"
                        "4 11 b grant 5 2\n");
    assert_int_equal(field_of(&c, "token_regressions"), 1);
    assert_int_equal(field_of(&c, "fifo_inversions"), 0);
    assert_int_equal(c.status, 1);
    /* Queue order is serial: -2147483648 comes after 2147483647. */
    c = check_text(dir, "2 10 a grant 6 2147483647\n3 10 a release 6 0\n"
                        "4 11 b grant 7 -2147483648\n");
    assert_int_equal(field_of(&c, "fifo_inversions"), 0);
    assert_int_equal(c.status, 0);
    zkt_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_properties),
        cmocka_unit_test(test_clean_contention),
        cmocka_unit_test(test_checker_fails_broken_lock),
        cmocka_unit_test(test_election_churn),
        cmocka_unit_test(test_delay_after_kill),
        cmocka_unit_test(test_run_functions),
        cmocka_unit_test(test_checker_foreign),
        cmocka_unit_test(test_checker_functions),
        cmocka_unit_test(test_foreign_actor),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("history", tests, setup, teardown);
}
