/* The history checker (tests/bin/zkr-check) on work queues (issue 17): each
 * queue rule is first shown to catch a hand-written broken history; then
 * producers and consumers in their own processes (tests/bin/contender -Q),
 * some killed and one frozen past its session, leave a history the
 * checker passes; and a consumer that acks with plain deletes, without the
 * claim check, after its claim was lost, leaves one it fails while the
 * library's own ack in the same scenario passes. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <inttypes.h>
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
#include "workq_snap.h"

/* The checker's output line and exit status. */
struct check {
    int status;
    char line[2048];
};

/* Runs zkr-check -v -t session_ms on the history file hist. */
static struct check run_checker(const char *dir, int session_ms,
                                const char *hist)
{
    char *prog = zkt_build_path("tests/bin/zkr-check");
    char out[512], t[16];
    char *argv[] = {prog, "-v", "-t", t, (char *)hist, NULL};
    struct check c = {-1, ""};
    int fd, st = -1;
    FILE *f;

    snprintf(out, sizeof(out), "%s/check.out", dir);
    snprintf(t, sizeof(t), "%d", session_ms);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    pid_t pid = zkt_spawn(argv, fd);
    close(fd);
    assert_true(pid > 0);
    assert_int_equal(zkt_wait_pid(pid, 120000, &st), 0);
    assert_true(WIFEXITED(st));
    c.status = WEXITSTATUS(st);
    f = fopen(out, "r");
    assert_non_null(f);
    if (fgets(c.line, sizeof(c.line), f) == NULL)
        c.line[0] = '\0';
    fclose(f);
    print_message("# zkr-check: %s", strstr(c.line, "queue:") != NULL
                                         ? strstr(c.line, "queue:")
                                         : c.line);
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

/* Writes text to dir/synthetic and checks it (session 1 s, margin 5 s). */
static struct check check_text(const char *dir, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/synthetic", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return run_checker(dir, 1000, path);
}

/* The queue counters that must be 0 in a history the checker passes. */
static const char *const violations[] = {
    "items_lost",
    "double_acks",
    "superseded_acks",
    "delivery_regressions",
    "item_token_regressions",
    "dead_claims",
    "acked_present",
    "duplicate_items",
    "consumer_order_inversions",
};
enum { NVIOLATIONS = sizeof(violations) / sizeof(violations[0]) };

/* Asserts that only counter `which` (NULL: none) is non-zero, and the
 * status. */
static void assert_only(const struct check *c, const char *which)
{
    for (int i = 0; i < NVIOLATIONS; i++) {
        long v = field_of(c, violations[i]);

        if (which != NULL && strcmp(which, violations[i]) == 0)
            assert_true(v > 0);
        else
            assert_int_equal(v, 0);
    }
    assert_int_equal(c->status, which != NULL ? 1 : 0);
}

/* A clean history: producer 10 (session aa) puts k1 and k2; consumer 11
 * (bb) takes k1, is killed; consumer 12 (cc) takes k1 again (delivery 2,
 * higher token) and acks; 12 takes k2 and nacks it; the end: k2 queued,
 * unclaimed. HEAD and TAIL are pasted around the middle part. */
#define Q_HEAD                                                                 \
    "1 10 aa put k1 0 0 q1/b0000000000/i-0-u1-0000000000\n"                    \
    "2 10 aa put k2 0 0 q1/b0000000000/i-0-u2-0000000001\n"                    \
    "3 11 bb take-start - 0\n"                                                 \
    "4 11 bb take k1 1 100 q1/b0000000000/i-0-u1-0000000000\n"                 \
    "5 1 0 kill 11 0\n"                                                        \
    "6 12 cc take-start - 0\n"
#define Q_TAKE2 "7 12 cc take k1 2 200 q1/b0000000000/i-0-u1-0000000000\n"
#define Q_ACK2 "8 12 cc ack k1 0 200 -\n"
#define Q_NACK                                                                 \
    "9 12 cc take-start - 0\n"                                                 \
    "10 12 cc take k2 1 300 q1/b0000000000/i-0-u2-0000000001\n"                \
    "11 12 cc nack k2 0 300 front\n"
#define Q_SNAP_K2 "20 1 0 snap-begin - 0\n21 1 0 snap-item k2 1 0 -\n"
#define Q_END "22 1 0 snap-end - 1\n"
/* k1 put, taken by bb, whose ack has begun. */
#define Q_ACK_START                                                            \
    "1 10 aa put k1 0 0 -\n"                                                   \
    "2 11 bb take k1 1 100 -\n"                                                \
    "3 11 bb ack-start k1 0 100 -\n"

/* Each queue rule catches its broken history, and what the failure model
 * allows passes. Times in ns; session 1 s, margin 5 s. */
static void test_checker_queue_rules(void **state)
{
    char *dir = zkt_mkdtemp("zkr-wqhist-");
    struct check c;

    (void)state;
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK Q_SNAP_K2 Q_END);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "puts"), 2);
    assert_int_equal(field_of(&c, "takes"), 3);
    assert_int_equal(field_of(&c, "acks"), 1);
    assert_int_equal(field_of(&c, "nacks"), 1);
    assert_int_equal(field_of(&c, "queued"), 1);
    assert_int_equal(field_of(&c, "snapshot"), 1);

    /* A consumer's first deliveries of a level in put order: 12 takes
     * k2 (put second) and then k1's first delivery ... */
    c = check_text(dir,
                   "1 10 aa put k1 0 0 q1/b0000000000/i-0-u1-0000000000\n"
                   "2 10 aa put k2 0 0 q1/b0000000000/i-0-u2-0000000001\n"
                   "3 12 cc take k2 1 100 q1/b0000000000/i-0-u2-0000000001\n"
                   "4 12 cc ack k2 0 100 -\n"
                   "5 12 cc take k1 1 200 q1/b0000000000/i-0-u1-0000000000\n"
                   "6 12 cc ack k1 0 200 -\n"
                   "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "consumer_order_inversions");
    /* ... across buckets too (b1 after b0, whatever the sequence) ... */
    c = check_text(dir,
                   "1 10 aa put k1 0 0 q1/b0000000000/i-0-u1-0000000005\n"
                   "2 10 aa put k2 0 0 q1/b0000000001/i-0-u2-0000000000\n"
                   "3 12 cc take k2 1 100 q1/b0000000001/i-0-u2-0000000000\n"
                   "4 12 cc ack k2 0 100 -\n"
                   "5 12 cc take k1 1 200 q1/b0000000000/i-0-u1-0000000005\n"
                   "6 12 cc ack k1 0 200 -\n"
                   "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "consumer_order_inversions");
    /* ... but an item back for another delivery (k1 claimed by 11 first),
     * another consumer, or another level is no inversion. */
    c = check_text(dir,
                   "1 10 aa put k1 0 0 q1/b0000000000/i-0-u1-0000000000\n"
                   "2 10 aa put k2 0 0 q1/b0000000000/i-0-u2-0000000001\n"
                   "3 10 aa put k3 0 0 q0/b0000000000/i-0-u3-0000000000\n"
                   "4 12 cc take k2 1 100 q1/b0000000000/i-0-u2-0000000001\n"
                   "5 12 cc ack k2 0 100 -\n"
                   "6 12 cc take k1 2 200 q1/b0000000000/i-0-u1-0000000000\n"
                   "7 12 cc ack k1 0 200 -\n"
                   "8 12 cc take k3 1 300 q0/b0000000000/i-0-u3-0000000000\n"
                   "9 12 cc ack k3 0 300 -\n"
                   "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, NULL);

    /* Lost: k2 was put, never acked, not there at the end. */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
                   "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "items_lost");
    /* ... but a put that failed (it may not have happened) is not. */
    c = check_text(
        dir,
        "1 10 aa put k9 -4 0 -\n" Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK Q_SNAP_K2 Q_END);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "put_errors"), 1);
    /* ... and a dead letter is not lost. */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
                   "20 1 0 snap-begin - 0\n"
                   "21 1 0 snap-dead k2 0 0 i-0-u2-0000000001\n" Q_END);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "dead_letters"), 1);
    /* Killed after it sent its ack, before it could log the answer: the
     * ack may have committed (in doubt, not lost) ... */
    c = check_text(dir, Q_ACK_START "4 1 0 kill 11 0\n"
                                    "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "acks_in_doubt"), 1);
    /* ... so may an ack answered ZKR_EINDOUBT (-1016: its answer lost
     * with the session) ... */
    c = check_text(dir, Q_ACK_START "4 11 bb ack k1 -1016 100 -\n"
                                    "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "acks_in_doubt"), 1);
    /* ... unlike one answered ZKR_ESTALE (-1013: nothing changed) ... */
    c = check_text(dir, Q_ACK_START "4 11 bb ack k1 -1013 100 -\n"
                                    "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "items_lost");
    /* ... but killed before it sent one, the item must come back ... */
    c = check_text(dir, "1 10 aa put k1 0 0 -\n"
                        "2 11 bb take k1 1 100 -\n"
                        "4 1 0 kill 11 0\n"
                        "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "items_lost");
    /* ... and an ack begun by a claim taken over since is no excuse. */
    c = check_text(dir, Q_ACK_START "4 1 0 kill 11 0\n"
                                    "5 12 cc take k1 2 200 -\n"
                                    "6 1 0 kill 12 0\n"
                                    "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "items_lost");
    /* Without a snapshot, a history with puts fails: lost is not judged. */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK);
    assert_int_equal(field_of(&c, "snapshot"), 0);
    assert_int_equal(c.status, 1);

    /* Acked twice: the killed consumer's ack committed too (it was not
     * killed here, so its claim was superseded as well). */
    c = check_text(dir, "1 10 aa put k1 0 0 -\n"
                        "4 11 bb take k1 1 100 -\n"
                        "7 12 cc take k1 2 200 -\n"
                        "8 12 cc ack k1 0 200 -\n"
                        "9 11 bb ack k1 0 100 -\n"
                        "20 1 0 snap-begin - 0\n" Q_END);
    assert_int_equal(field_of(&c, "double_acks"), 1);
    assert_int_equal(field_of(&c, "superseded_acks"), 1);
    assert_int_equal(c.status, 1);
    /* Superseded alone: the first consumer's ack committed after another
     * consumer claimed the item, whose own ack was refused. */
    c = check_text(dir, "1 10 aa put k1 0 0 -\n"
                        "4 11 bb take k1 1 100 -\n"
                        "7 12 cc take k1 2 200 -\n"
                        "8 11 bb ack k1 0 100 -\n"
                        "9 12 cc ack k1 -1011 200 -\n"
                        "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "superseded_acks");
    assert_int_equal(field_of(&c, "acks_refused"), 1);
    /* ... or before it: the item came back after its completion. */
    c = check_text(dir, "1 10 aa put k1 0 0 -\n"
                        "4 11 bb take k1 1 100 -\n"
                        "5 11 bb ack k1 0 100 -\n"
                        "7 12 cc take k1 2 200 -\n"
                        "8 12 cc ack k1 -1011 200 -\n"
                        "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "superseded_acks");

    /* The delivery count did not grow from one claim to the next. */
    c = check_text(dir, Q_HEAD
                   "7 12 cc take k1 1 200 -\n" Q_ACK2 Q_NACK Q_SNAP_K2 Q_END);
    assert_only(&c, "delivery_regressions");
    /* ... or went back by the end (a nack that lost the count). */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
                   "20 1 0 snap-begin - 0\n21 1 0 snap-item k2 0 0 -\n" Q_END);
    assert_only(&c, "delivery_regressions");

    /* Two takes with one token (one claim delivered twice). */
    c = check_text(dir, Q_HEAD
                   "7 12 cc take k1 2 100 -\n" Q_ACK2 Q_NACK Q_SNAP_K2 Q_END);
    assert_int_equal(field_of(&c, "item_token_regressions"), 1);
    assert_int_equal(c.status, 1);
    /* A take logged after another one of the item with a higher token,
     * by a process that was not frozen since it began to take ... */
    c = check_text(dir, "1 10 aa put k1 0 0 -\n"
                        "2 11 bb take-start - 0\n"
                        "3 12 cc take-start - 0\n"
                        "4 12 cc take k1 2 200 -\n"
                        "5 11 bb take k1 1 100 -\n"
                        "6 12 cc ack k1 0 200 -\n"
                        "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, "item_token_regressions");
    /* ... is fine when it was frozen: its report came late. */
    c = check_text(dir, "1 10 aa put k1 0 0 -\n"
                        "2 11 bb take-start - 0\n"
                        "3 1 0 pause 11 0\n"
                        "3 12 cc take-start - 0\n"
                        "4 12 cc take k1 2 200 -\n"
                        "4 1 0 unpause 11 0\n"
                        "5 11 bb take k1 1 100 -\n"
                        "6 12 cc ack k1 0 200 -\n"
                        "7 11 bb ack k1 -1011 100 -\n"
                        "20 1 0 snap-begin - 0\n" Q_END);
    assert_only(&c, NULL);

    /* A claim at the end by the session of the killed consumer (killed at
     * 5 ns, snapshot 7 s later: over for more than 1 s + 5 s). */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
                   "7000000020 1 0 snap-begin - 0\n"
                   "7000000021 1 0 snap-item k2 1 300 bb\n"
                   "7000000022 1 0 snap-end - 1\n");
    assert_only(&c, "dead_claims");
    /* ... or by a session no process of the run had. */
    c = check_text(
        dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
        "20 1 0 snap-begin - 0\n21 1 0 snap-item k2 1 300 ee\n" Q_END);
    assert_only(&c, "dead_claims");
    /* The live consumer's claim is fine; the killed one's 1 s after the
     * kill cannot be judged yet. */
    c = check_text(
        dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
        "20 1 0 snap-begin - 0\n21 1 0 snap-item k2 1 300 cc\n" Q_END);
    assert_only(&c, NULL);
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
                   "1000000020 1 0 snap-begin - 0\n"
                   "1000000021 1 0 snap-item k2 1 300 bb\n"
                   "1000000022 1 0 snap-end - 1\n");
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "claims_unjudged"), 1);
    /* A consumer's old session, replaced (zkr opened a new one after
     * LOST) at 12 ns: over. */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK
                   "12 12 dd take-start - 0\n"
                   "7000000020 1 0 snap-begin - 0\n"
                   "7000000021 1 0 snap-item k2 1 300 cc\n"
                   "7000000022 1 0 snap-end - 1\n");
    assert_only(&c, "dead_claims");

    /* Acked, yet still queued at the end. */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK Q_SNAP_K2
                   "21 1 0 snap-item k1 2 0 -\n" Q_END);
    assert_only(&c, "acked_present");
    /* There twice at the end (a put that was applied twice). */
    c = check_text(dir, Q_HEAD Q_TAKE2 Q_ACK2 Q_NACK Q_SNAP_K2
                   "21 1 0 snap-item k2 1 0 -\n" Q_END);
    assert_only(&c, "duplicate_items");
    zkt_rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------ processes and faults */

#define SESSION_MS 3000

struct worker {
    pid_t pid;
    char kind; /* 'P' producer, 'C' consumer */
    char id[16];
};

static char soak_hist[512];
static struct worker *soak_slow; /* the consumer that works 800 ms */
static int64_t soak_end_ms;

/* The driver's own history event about pid. */
static void driver_event(const char *what, pid_t pid)
{
    struct timespec ts;
    FILE *f = fopen(soak_hist, "a");

    assert_non_null(f);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(f, "%lld %ld 0 %s %ld 0\n",
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)getpid(),
            what, (long)pid);
    fclose(f);
}

/* Lines of the history by pid that are takes. */
static int takes_of(pid_t pid)
{
    char line[512], what[16];
    long long t;
    long p;
    int n = 0;
    FILE *f = fopen(soak_hist, "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += sscanf(line, "%lld %ld %*s %15s", &t, &p, what) == 3 &&
             p == (long)pid && strcmp(what, "take") == 0;
    fclose(f);
    return n;
}

/* Starts w at path until the soak's end (-r -d: keeps going after
 * errors). */
static void worker_spawn(struct worker *w, const char *path)
{
    char *prog = zkt_build_path("tests/bin/contender");
    char secs[24], t[16], kind[2] = {w->kind, '\0'};
    int64_t left = (soak_end_ms - zkt_now_ms()) / 1000;
    char *argv[] = {prog, "-r",
                    "-d", secs,
                    "-s", (char *)zkt_server_hosts(server),
                    "-p", (char *)path,
                    "-H", soak_hist,
                    "-t", t,
                    "-i", w->id,
                    "-h", w->kind == 'P' ? "50" : w == soak_slow ? "800" : "60",
                    "-Q", kind,
                    "-x", "6",
                    NULL};

    snprintf(secs, sizeof(secs), "%lld", (long long)(left > 1 ? left : 1));
    snprintf(t, sizeof(t), "%d", SESSION_MS);
    w->pid = zkt_spawn(argv, -1);
    assert_true(w->pid > 0);
    free(prog);
}

/* A soak of `seconds`: 2 producers (a put every 50 ms each) and 3
 * consumers (60 ms of work per item, 800 for the third) on path; every 3 s a
 * consumer (or, one time in four, a producer) is killed and started
 * again, and once a consumer is frozen past its session. Then the queue
 * is read into the history and checked. */
static struct check soak(const char *dir, const char *path, int seconds)
{
    struct worker w[5];
    int nw = 5, round = 0;
    struct check c;

    snprintf(soak_hist, sizeof(soak_hist), "%s/history", dir);
    soak_slow = &w[2];
    soak_end_ms = zkt_now_ms() + 1000LL * seconds;
    for (int i = 0; i < nw; i++) {
        w[i].kind = i < 2 ? 'P' : 'C';
        snprintf(w[i].id, sizeof(w[i].id), "%c%d", i < 2 ? 'p' : 'c', i);
        worker_spawn(&w[i], path);
    }
    while (zkt_now_ms() < soak_end_ms - 6000) {
        zkt_sleep_ms(3000);
        round++;
        if (round == 3) {
            /* Frozen past its session just after it took an item (it
             * works 800 ms on each): its claim passes on, and its late
             * ack or nack must be refused. */
            struct worker *v = soak_slow;
            int n = takes_of(v->pid);

            assert_true(ZKT_WAIT_UNTIL(takes_of(v->pid) > n, 20000));
            driver_event("pause", v->pid);
            kill(v->pid, SIGSTOP);
            zkt_sleep_ms(SESSION_MS * 3 / 2);
            kill(v->pid, SIGCONT);
            driver_event("unpause", v->pid);
        } else {
            struct worker *v = &w[round % 4 == 0 ? 0 : 2 + round % 3];

            driver_event("kill", v->pid);
            kill(v->pid, SIGKILL);
            assert_int_equal(zkt_wait_pid(v->pid, 10000, NULL), 0);
            worker_spawn(v, path);
        }
    }
    /* Every worker ends by itself (a take waits 10 s at most). */
    for (int i = 0; i < nw; i++)
        assert_int_equal(zkt_wait_pid(w[i].pid,
                                      (int)(soak_end_ms - zkt_now_ms()) + 60000,
                                      NULL),
                         0);
    /* The killed consumers' claims go with their sessions. */
    assert_true(
        ZKT_WAIT_UNTIL(zkt_workq_claimed(raw, path) == 0, SESSION_MS + 10000));
    assert_true(zkt_workq_snapshot(raw, path, soak_hist) >= 0);
    c = run_checker(dir, SESSION_MS, soak_hist);
    return c;
}

/* Producers and consumers with kills and a pause: the history passes
 * every rule, items flowed, the frozen consumer's late ack (or nack) was
 * refused, and the line of consumers is empty. */
static void test_workq_soak(void **state)
{
    char *dir = zkt_mkdtemp("zkr-wqhist-");
    struct check c;

    (void)state;
    c = soak(dir, "/wqh/soak", 30);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "snapshot"), 1);
    assert_true(field_of(&c, "puts") > 100);
    assert_true(field_of(&c, "acks") > 50);
    assert_true(field_of(&c, "acks_refused") + field_of(&c, "nacks_refused") >=
                1);
    assert_int_equal(children("/wqh/soak/consumers"), 0);
    zkt_rm_rf(dir);
    free(dir);
}

/* ------------------------------------------- a broken consume, in-process */

/* A history line of a made-up process pid with session sid. */
static void hline(const char *hist, long pid, const char *sid, const char *what,
                  const char *a, long long b, long long c, const char *d)
{
    struct timespec ts;
    FILE *f = fopen(hist, "a");

    assert_non_null(f);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(f, "%lld %ld %s %s %s %lld %lld %s\n",
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, pid, sid, what, a,
            b, c, d);
    fclose(f);
}

static void sid_of(zkr_session_t *s, char *buf, size_t len)
{
    snprintf(buf, len, "%" PRIx64, (uint64_t)zkr_session_id(s));
}

struct plain_ack {
    const char *path;
};

/* The consume of a queue without the claim check: the item's claims and
 * the item deleted whatever their versions. */
static int plain_ack_fn(zhandle_t *zh, void *arg)
{
    const struct plain_ack *b = arg;
    struct String_vector v = {0, NULL};
    char child[512];
    int rc = zoo_get_children(zh, b->path, 0, &v);

    for (int i = 0; rc == ZOK && i < v.count; i++) {
        snprintf(child, sizeof(child), "%s/%s", b->path, v.data[i]);
        zoo_delete(zh, child, -1);
    }
    deallocate_String_vector(&v);
    return rc == ZOK ? zoo_delete(zh, b->path, -1) : rc;
}

/* Consumer A takes the item; A's session expires (its claim goes, and zkr
 * opens a new session); consumer B takes the item again; then A acks:
 * with zkr_item_ack() (plain = 0) or with plain deletes (plain = 1), and
 * B acks. The history of it, with the snapshot, is checked. */
static struct check lost_claim_then_ack(const char *dir, const char *path,
                                        int plain)
{
    char hist[512], sa[24], sb[24], node[512], key[] = "job-1";
    zkr_session_t *s_a = open_session(SESSION_MS),
                  *s_b = open_session(SESSION_MS);
    zkr_workq_t *qa = NULL, *qb = NULL;
    zkr_item_t *ia = NULL, *ib = NULL;
    int64_t ta = -1, tb = -1, old_a = zkr_session_id(s_a);
    int rc;

    snprintf(hist, sizeof(hist), "%s/history-%d", dir, plain);
    assert_int_equal(zkr_workq_new(&qa, s_a, path, "a", NULL), 0);
    assert_int_equal(zkr_workq_new(&qb, s_b, path, "b", NULL), 0);
    sid_of(s_a, sa, sizeof(sa));
    sid_of(s_b, sb, sizeof(sb));
    assert_int_equal(zkr_workq_put(qb, key, strlen(key), 1, NULL, 0), 0);
    hline(hist, 2, sb, "put", key, 0, 0, "-");

    hline(hist, 1, sa, "take-start", "-", 0, 0, "-");
    assert_int_equal(zkr_workq_take(qa, 10000, &ia), 0);
    assert_int_equal(zkr_item_token(ia, &ta), 0);
    hline(hist, 1, sa, "take", key, zkr_item_deliveries(ia), ta,
          zkr_item_id(ia));

    /* A's session expires: its claim goes with it; zkr opens a new one. */
    expire(s_a);
    assert_true(ZKT_WAIT_UNTIL(
        zkr_session_id(s_a) != old_a && zkr_session_id(s_a) != 0, 30000));

    hline(hist, 2, sb, "take-start", "-", 0, 0, "-");
    assert_int_equal(zkr_workq_take(qb, 10000, &ib), 0);
    assert_int_equal(zkr_item_token(ib, &tb), 0);
    hline(hist, 2, sb, "take", key, zkr_item_deliveries(ib), tb,
          zkr_item_id(ib));

    /* A, late: its ack. The new session's events carry the new id. */
    sid_of(s_a, sa, sizeof(sa));
    if (plain) {
        struct plain_ack b = {node};

        snprintf(node, sizeof(node), "%s/%s", path, zkr_item_id(ia));
        rc = zkr_session_with_handle(s_a, plain_ack_fn, &b);
        assert_int_equal(rc, ZOK); /* the broken queue "completes" it */
    } else {
        rc = zkr_item_ack(ia);
        assert_int_equal(rc, ZKR_ESTALE);
    }
    hline(hist, 1, sa, "ack", key, rc, ta, "-");
    rc = zkr_item_ack(ib);
    assert_int_equal(rc, plain ? ZKR_ESTALE : 0);
    hline(hist, 2, sb, "ack", key, rc, tb, "-");
    zkr_item_free(ia);
    zkr_item_free(ib);
    zkr_workq_free(qa);
    zkr_workq_free(qb);
    zkr_session_free(s_a);
    zkr_session_free(s_b);
    hline(hist, 1, sa, "exit", "0", 0, 0, "-");
    hline(hist, 2, sb, "exit", "0", 0, 0, "-");
    assert_true(zkt_workq_snapshot(raw, path, hist) >= 0);
    return run_checker(dir, SESSION_MS, hist);
}

/* The checker fails a queue whose consume skips the claim check, and
 * passes the library's ack in the same scenario. */
static void test_checker_fails_broken_queue(void **state)
{
    char *dir = zkt_mkdtemp("zkr-wqhist-");
    struct check c;

    (void)state;
    c = lost_claim_then_ack(dir, "/wqh/broken", 1);
    assert_only(&c, "superseded_acks");
    c = lost_claim_then_ack(dir, "/wqh/fenced", 0);
    assert_only(&c, NULL);
    assert_int_equal(field_of(&c, "acks"), 1);
    assert_int_equal(field_of(&c, "acks_refused"), 1);
    zkt_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_queue_rules),
        cmocka_unit_test(test_checker_fails_broken_queue),
        cmocka_unit_test(test_workq_soak),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("workq_history", tests, setup, teardown);
}
