/* Shared fixture of the tests that run against a real ZooKeeper server:
 * one server per test binary (started by the group setup), a plain handle
 * for checks, and small helpers. Include after <cmocka.h>. */
#ifndef ZKR_TESTS_SERVER_TEST_H
#define ZKR_TESTS_SERVER_TEST_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "zkr.h"

static zkt_server_t *server;
static zhandle_t *raw; /* plain client for checks; NULL while restarting */

static int setup(void **state)
{
    (void)state;
    if (zkt_server_start(&server) != 0)
        return -1;
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    return raw != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (raw != NULL)
        zookeeper_close(raw);
    zkt_server_stop(server);
    return 0;
}

static inline zkr_session_t *open_session(int timeout_ms)
{
    zkr_session_t *s = NULL;
    assert_int_equal(
        zkr_session_open(&s, zkt_server_hosts(server), timeout_ms, NULL), 0);
    return s;
}

static inline zkr_lock_t *new_lock(zkr_session_t *s, const char *path,
                                   const char *id)
{
    zkr_lock_t *l = NULL;
    assert_int_equal(zkr_lock_new(&l, s, path, id, NULL), 0);
    return l;
}

static inline int64_t token_of(zkr_lock_t *l)
{
    int64_t t = -1;
    assert_int_equal(zkr_lock_token(l, &t), 0);
    return t;
}

/* Expires a zkr session from outside (another handle takes it over and
 * closes it), as the server would after a partition. */
static inline void expire(zkr_session_t *s)
{
    clientid_t cid = *zoo_client_id(zkr_session_handle(s));
    assert_int_equal(zkt_expire_session(zkt_server_hosts(server), &cid, 10000),
                     0);
}

/* A node's stat as another client reads it: ZOK or ZNONODE. */
static inline int raw_stat(const char *path, struct Stat *st)
{
    int rc = zoo_exists(raw, path, 0, st);

    assert_true(rc == ZOK || rc == ZNONODE);
    return rc;
}

static inline int raw_exists(const char *path)
{
    struct Stat st;

    return raw_stat(path, &st) == ZOK;
}

/* Another client makes path and its missing ancestors (persistent, no
 * data); those that exist already are fine. */
static inline void raw_ensure(const char *path)
{
    char buf[ZKR_PATH_MAX + 2], *p;
    int rc;

    snprintf(buf, sizeof(buf), "%s/", path);
    for (p = strchr(buf + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        rc = zoo_create(raw, buf, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        assert_true(rc == ZOK || rc == ZNODEEXISTS);
        *p = '/';
    }
}

/* Whether session sid has a watch on path, by the server's "wchc": its
 * block lists one tab-indented path a line. */
static inline int session_watches(int64_t sid, const char *path)
{
    char head[32], *wchc = zkt_4lw(server, "wchc"), *p;
    int found = 0;

    assert_non_null(wchc);
    snprintf(head, sizeof(head), "0x%llx\n", (unsigned long long)sid);
    if ((p = strstr(wchc, head)) != NULL) {
        for (p += strlen(head); *p == '\t' && !found;) {
            size_t n = strcspn(p + 1, "\n");

            found = n == strlen(path) && strncmp(p + 1, path, n) == 0;
            p += 1 + n;
            if (*p == '\n')
                p++;
        }
    }
    free(wchc);
    return found;
}

/* Number of nodes below path (0 if it does not exist). */
static inline int children(const char *path)
{
    return zkt_count_children(raw, path);
}

/* The path of the oldest election candidate (the leader's "-latch-" node)
 * below dir into node; 0, or -1 if there is none. */
static inline int first_latch(const char *dir, char *node, size_t len)
{
    struct String_vector v = {0, NULL};
    const char *first = NULL;

    if (zoo_get_children(raw, dir, 0, &v) != ZOK)
        return -1;
    for (int i = 0; i < v.count; i++) {
        const char *m = strstr(v.data[i], "-latch-");
        if (m != NULL &&
            (first == NULL || strcmp(m, strstr(first, "-latch-")) < 0))
            first = v.data[i];
    }
    if (first != NULL)
        snprintf(node, len, "%s/%s", dir, first);
    deallocate_String_vector(&v);
    return first != NULL ? 0 : -1;
}

/* Issue 19 (review): contenders of one session made by mk() in dir
 * queue behind a holder made by mk() in another session, and an operator
 * deletes each waiter's node as soon as it shows, rounds times n of them. A
 * waiter watches its own node with exists(), which leaves a watch on the server
 * when the node is already gone; the waiter behind it, whose request
 * about that node found it gone too, set no watch but was counted as
 * needing that one, so nobody removed it. Every acquire must end with
 * ZKR_ELOST (its node can never be granted), and once the waiters are
 * freed the server may hold no more watches than before, with the
 * holder's own. The deletions race the requests: rounds make a leak likely. */
enum { DELETED_WAITERS_MAX = 64 };
static atomic_int deleted_got[DELETED_WAITERS_MAX],
    deleted_rc[DELETED_WAITERS_MAX];

static inline void deleted_done(int rc, zkr_lock_t *l, void *data)
{
    int i = (int)(intptr_t)data;

    (void)l;
    deleted_rc[i] = rc;
    deleted_got[i]++;
}

static inline void deleted_waiters_leave_no_watch(
    const char *dir, zkr_lock_t *(*mk)(zkr_session_t *s, const char *dir),
    int n, int rounds)
{
    zkr_session_t *a = open_session(10000), *s = open_session(10000);
    zkr_lock_t *h = mk(a, dir), *l[DELETED_WAITERS_MAX];
    long w0 = zkt_total_watches(server) + 1; /* and the holder's own */
    char hnode[ZKR_NODE_MAX];

    assert_true(n <= DELETED_WAITERS_MAX);
    assert_int_equal(zkr_lock_acquire(h, -1), 0);
    assert_int_equal(zkr_lock_node(h, hnode, sizeof(hnode)), 0);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0, 5000));
    for (int r = 0; r < rounds; r++) {
        int left = n;

        for (int i = 0; i < n; i++) {
            deleted_got[i] = 0;
            l[i] = mk(s, dir);
            assert_int_equal(zkr_lock_acquire_async(l[i], -1, deleted_done,
                                                    (void *)(intptr_t)i),
                             0);
        }
        for (int64_t end = zkt_now_ms() + 10000;
             left > 0 && zkt_now_ms() < end;) {
            struct String_vector v = {0, NULL};

            if (zoo_get_children(raw, dir, 0, &v) == ZOK) {
                for (int k = 0; k < v.count; k++) {
                    char full[512];

                    snprintf(full, sizeof(full), "%s/%s", dir, v.data[k]);
                    if (strcmp(full, hnode) != 0)
                        zoo_delete(raw, full, -1);
                }
            }
            deallocate_String_vector(&v);
            left = 0;
            for (int i = 0; i < n; i++)
                left += deleted_got[i] == 0;
        }
        for (int i = 0; i < n; i++) {
            assert_int_equal(deleted_got[i], 1);
            assert_int_equal(deleted_rc[i], ZKR_ELOST);
            zkr_lock_free(l[i]);
        }
    }
    assert_int_equal(children(dir), 1);
    if (!ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0, 5000)) {
        char *wp = zkt_4lw(server, "wchp");

        print_message("%ld watches, %ld expected:\n%s\n",
                      zkt_total_watches(server), w0, wp != NULL ? wp : "?");
        free(wp);
        fail();
    }
    assert_int_equal(zkr_lock_release(h), 0);
    zkr_lock_free(h);
    zkr_session_free(s);
    zkr_session_free(a);
    assert_int_equal(children(dir), 0);
}

/* What a run of contender processes (tests/bin/contender) left behind. */
struct verdict {
    long long counter;   /* final shared counter (locks only), else -1 */
    int grants;          /* GRANT lines */
    int max_holders;     /* most holders at once, from the log */
    int counted_max;     /* most holders at once, counted under a file lock */
    int token_backwards; /* grants whose token was not above the last */
    int seq_backwards;   /* grants out of queue (FIFO) order */
    int dup_tokens;      /* tokens granted twice */
};

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Runs `procs` contender processes of `iters` iterations each on path:
 * a lock (permits 0; each does a non-atomic read-modify-write of a shared
 * counter) or a permit of a semaphore of `permits`. broken: they skip the
 * lock (and hold 20 ms, so their runs surely overlap although they start a
 * few ms apart). Judges the log and the counters. */
static inline struct verdict run_contenders(const char *path, int procs,
                                            int iters, int permits, int broken)
{
    char *dir = zkt_mkdtemp("zkr-contenders-"), counter[512], logp[512];
    char holders_file[512], iters_s[16], permits_s[16];
    char *prog = zkt_build_path("tests/bin/contender");
    struct verdict r = {-1, 0, 0, 0, 0, 0, 0};
    pid_t pids[64];
    long long tokens[1024];
    FILE *f;
    char what[16], id[64];
    long long t, tok, last_tok = -1, last_seq = -1, now, max;
    long seq;
    int holders = 0;

    assert_true(procs <= 64 && procs * iters <= 1024);
    snprintf(counter, sizeof(counter), "%s/counter", dir);
    snprintf(logp, sizeof(logp), "%s/log", dir);
    snprintf(holders_file, sizeof(holders_file), "%s/holders", dir);
    snprintf(iters_s, sizeof(iters_s), "%d", iters);
    snprintf(permits_s, sizeof(permits_s), "%d", permits);
    for (int i = 0; i < procs; i++) {
        char ids[16];
        char *argv[20];
        int k = 0;
        snprintf(ids, sizeof(ids), "p%d", i);
        argv[k++] = prog;
        argv[k++] = "-s";
        argv[k++] = (char *)zkt_server_hosts(server);
        argv[k++] = "-p";
        argv[k++] = (char *)path;
        argv[k++] = "-n";
        argv[k++] = iters_s;
        argv[k++] = "-l";
        argv[k++] = logp;
        argv[k++] = "-k";
        argv[k++] = holders_file;
        argv[k++] = "-i";
        argv[k++] = ids;
        argv[k++] = "-h";
        argv[k++] = broken ? "20" : permits > 0 ? "20" : "3";
        if (permits > 0) {
            argv[k++] = "-P";
            argv[k++] = permits_s;
        } else {
            argv[k++] = "-c";
            argv[k++] = counter;
        }
        if (broken)
            argv[k++] = "-b";
        argv[k] = NULL;
        pids[i] = zkt_spawn(argv, -1);
        assert_true(pids[i] > 0);
    }
    for (int i = 0; i < procs; i++) {
        int st = -1;
        assert_int_equal(zkt_wait_pid(pids[i], 120000, &st), 0);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    if (permits == 0) {
        f = fopen(counter, "r");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%lld", &r.counter), 1);
        fclose(f);
    }
    f = fopen(holders_file, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lld %lld", &now, &max), 2);
    fclose(f);
    assert_int_equal(now, 0); /* every grant was given back */
    r.counted_max = (int)max;
    f = fopen(logp, "r");
    assert_non_null(f);
    while (fscanf(f, "%15s %lld %63s %ld %lld", what, &t, id, &seq, &tok) ==
           5) {
        if (strcmp(what, "GRANT") == 0) {
            tokens[r.grants++] = tok;
            holders++;
            r.token_backwards += tok <= last_tok;
            r.seq_backwards += seq <= last_seq;
            last_tok = tok;
            last_seq = seq;
        } else {
            holders--;
        }
        if (holders > r.max_holders)
            r.max_holders = holders;
    }
    fclose(f);
    qsort(tokens, (size_t)r.grants, sizeof(tokens[0]), cmp_ll);
    for (int i = 1; i < r.grants; i++)
        r.dup_tokens += tokens[i] == tokens[i - 1];
    zkt_rm_rf(dir);
    free(dir);
    free(prog);
    return r;
}

#endif
