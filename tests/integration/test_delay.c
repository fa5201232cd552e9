/* Lock-delay (issue 16; docs/design/lock-delay.md) against a real
 * ZooKeeper server: the release record that makes a zkr release provable,
 * and the delay a waiter serves when the node it was behind went without
 * one. The oracles come from the design: a record exists only if the
 * holder's own release deleted its node. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "filter.h"

#include <poll.h>
#include <pthread.h>

#include "../../src/internal.h"
#include "rec.h"
#include "server_test.h"

/* A metric of session s (kind and path NULL: a session metric). */
static double metric(zkr_session_t *s, const char *name, const char *kind,
                     const char *path)
{
    double v = -1;

    assert_int_equal(zkr_metrics_value(s, name, kind, path, &v), 0);
    return v;
}

/* The directory's data as a record (kind), or ZKR__REC_NONE. */
static int dir_record(const char *dir, zkr__record_t *r)
{
    char buf[ZKR__RECORD_MAX + 1];
    int len = sizeof(buf);

    if (zoo_get(raw, dir, 0, buf, &len, NULL) != ZOK)
        return -1;
    return zkr__record_parse(buf, len, r);
}

static void mkdirs(const char *dir)
{
    char p[256];

    snprintf(p, sizeof(p), "%s", dir);
    for (char *q = p + 1; *q != '\0'; q++) {
        if (*q != '/')
            continue;
        *q = '\0';
        zoo_create(raw, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        *q = '/';
    }
    zoo_create(raw, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
}

static void set_dir(const char *dir, const char *data)
{
    assert_int_equal(zoo_set(raw, dir, data, (int)strlen(data), -1), ZOK);
}

static void assert_dir_data(const char *dir, const char *want)
{
    char buf[ZKR__RECORD_MAX + 1];
    int len = sizeof(buf) - 1;

    assert_int_equal(zoo_get(raw, dir, 0, buf, &len, NULL), ZOK);
    buf[len > 0 ? len : 0] = '\0';
    assert_string_equal(buf, want);
}

/* ------------------------------------------------- the release record */

/* A release leaves "zkr-release" naming the released node by czxid and
 * name; so does freeing a held handle (the application let go). */
static void test_release_writes_record(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/rec/lock", "A");
    zkr__record_t r;
    char node[ZKR_NODE_MAX];
    int64_t tok;

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    tok = token_of(l);
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_int_equal(dir_record("/d/rec/lock", &r), ZKR__REC_RELEASE);
    assert_true(r.czxid == tok);
    assert_string_equal(r.node, strrchr(node, '/') + 1);

    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    tok = token_of(l);
    zkr_lock_free(l); /* the session deletes the node after the free */
    assert_true(ZKT_WAIT_UNTIL(children("/d/rec/lock") == 0, 10000));
    assert_int_equal(dir_record("/d/rec/lock", &r), ZKR__REC_RELEASE);
    assert_true(r.czxid == tok);
    zkr_session_free(s);
}

/* A node deleted by someone else (a forced release) or by the session's
 * expiry leaves no record: the holder's later release finds its node gone
 * and writes nothing. */
static void test_death_writes_no_record(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/death/lock", "A");
    char node[ZKR_NODE_MAX];

    (void)state;
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    set_dir("/d/death/lock", "before");
    assert_int_equal(zkr_lock_node(l, node, sizeof(node)), 0);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK); /* forced */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(l) == ZKR_LOCK_LOST, 10000));
    assert_int_equal(zkr_lock_release(l), ZKR_ELOST);
    assert_dir_data("/d/death/lock", "before");

    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    expire(s);
    assert_true(ZKT_WAIT_UNTIL(children("/d/death/lock") == 0, 10000));
    assert_dir_data("/d/death/lock", "before");
    zkr_lock_free(l);
    zkr_session_free(s);
    assert_dir_data("/d/death/lock", "before");
}

/* A directory that lets us delete children but not write its data: the
 * release still happens (a plain delete), without a record. */
static void test_record_refused_release_happens(void **state)
{
    struct ACL a[] = {
        {ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN,
         {"world", "anyone"}}};
    struct ACL_vector acl = {1, a};
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/nowrite/lock", "A");

    (void)state;
    mkdirs("/d/nowrite/lock");
    set_dir("/d/nowrite/lock", "before");
    assert_int_equal(zoo_set_acl(raw, "/d/nowrite/lock", -1, &acl), ZOK);
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_true(metric(s, "zkr_release_records_refused_total", NULL, NULL) ==
                0);
    assert_int_equal(zkr_lock_release(l), 0);
    assert_true(metric(s, "zkr_release_records_refused_total", NULL, NULL) ==
                1);
    assert_int_equal(zkr_lock_state(l), ZKR_LOCK_IDLE);
    assert_int_equal(children("/d/nowrite/lock"), 0);
    assert_dir_data("/d/nowrite/lock", "before");
    zkr_lock_free(l);
    zkr_session_free(s);
    assert_int_equal(
        zoo_set_acl(raw, "/d/nowrite/lock", -1, &ZOO_OPEN_ACL_UNSAFE), ZOK);
}

/* ------------------------------------------------------ the delay */

/* A waiter's grant, timed by its completion (on the event thread). */
struct grant {
    int done;
    int rc;
    int64_t at; /* zkt_now_ms() of the completion */
};

static void granted(int rc, zkr_lock_t *l, void *data)
{
    struct grant *g = data;

    (void)l;
    g->rc = rc;
    g->at = zkt_now_ms();
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
}

static int grant_done(struct grant *g)
{
    return __atomic_load_n(&g->done, __ATOMIC_ACQUIRE);
}

/* w (completing into g) becomes DELAYED, then is granted no earlier than
 * d ms after t0 (a time before the node it waited behind went). */
static void expect_delayed(zkr_lock_t *w, struct grant *g, int64_t t0, int d)
{
    assert_true(ZKT_WAIT_UNTIL(
        zkr_lock_state(w) == ZKR_LOCK_DELAYED || grant_done(g), 10000));
    assert_false(grant_done(g));
    assert_true(ZKT_WAIT_UNTIL(grant_done(g), 10000 + d));
    assert_int_equal(g->rc, 0);
    assert_true(g->at - t0 >= d);
}

/* g's acquire is granted promptly after t0: well within the long delays
 * (60 s) the tests give for this, however loaded the machine. */
static void expect_prompt(struct grant *g, int64_t t0)
{
    assert_true(ZKT_WAIT_UNTIL(grant_done(g), 20000));
    assert_int_equal(g->rc, 0);
    assert_true(g->at - t0 < 20000);
}

/* Handle l (a lock, a semaphore permit, a reader, a writer) waits with a
 * delay, queued behind n nodes already in dir: returns once its node is
 * listed and it had time to set its watch. */
static zkr_lock_t *shared_waiter(zkr_lock_t *l, const char *dir, int delay_ms,
                                 int n, struct grant *g)
{
    memset(g, 0, sizeof(*g));
    assert_int_equal(zkr_lock_set_delay(l, delay_ms), 0);
    assert_int_equal(zkr_lock_acquire_async(l, -1, granted, g), 0);
    assert_true(ZKT_WAIT_UNTIL(children(dir) == n + 1, 10000));
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_false(grant_done(g));
    return l;
}

/* A new lock of session s waiting as shared_waiter(). */
static zkr_lock_t *waiter(zkr_session_t *s, const char *dir, int delay_ms,
                          int n, struct grant *g)
{
    return shared_waiter(new_lock(s, dir, "W"), dir, delay_ms, n, g);
}

static zkr_lock_t *holder(zkr_session_t *s, const char *dir, char *node,
                          size_t len)
{
    zkr_lock_t *l = new_lock(s, dir, "H");

    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_node(l, node, len), 0);
    return l;
}

/* A clean release (by a holder without a delay of its own) lets a waiter
 * with a long delay in at once. */
static void test_clean_release_no_delay(void **state)
{
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000);
    char node[ZKR_NODE_MAX];
    zkr_lock_t *h = holder(s1, "/d/clean", node, sizeof(node));
    struct grant g;
    zkr_lock_t *w = waiter(s2, "/d/clean", 60000, 1, &g);
    int64_t t0;

    (void)state;
    t0 = zkt_now_ms();
    assert_int_equal(zkr_lock_release(h), 0);
    expect_prompt(&g, t0);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_HELD);
    assert_true(metric(s2, "zkr_delays_total", "lock", "/d/clean") == 0);
    assert_true(metric(s1, "zkr_release_records_refused_total", NULL, NULL) ==
                0);
    assert_int_equal(zkr_lock_release(w), 0);
    zkr_lock_free(w);
    zkr_lock_free(h);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

/* The holder's node goes without a release (how: kill) while a delayed
 * waiter watches it: the waiter is DELAYED, says so in the directory, and
 * is granted no earlier than D after the node went. */
static void delayed_after(const char *dir,
                          void (*kill)(zkr_session_t *s, const char *node))
{
    const int d = zkt_scaled_ms(1000);
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000);
    char node[ZKR_NODE_MAX], wnode[ZKR_NODE_MAX];
    zkr_lock_t *h = holder(s1, dir, node, sizeof(node));
    struct grant g;
    zkr_lock_t *w = waiter(s2, dir, d, 1, &g);
    zkr__record_t r;
    struct rec states;
    struct pollfd pfd = {zkr_lock_fd(w), POLLIN, 0};
    int64_t t0, wtok;

    rec_init(&states);
    assert_int_equal(zkr_lock_set_listener(w, on_lock_state, &states), 0);
    assert_true(pfd.fd >= 0);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_ACQUIRING); /* read */
    assert_int_equal(poll(&pfd, 1, 0), 0);
    t0 = zkt_now_ms(); /* the node goes after this */
    kill(s1, node);
    /* The listener hears DELAYED, and the descriptor signals the change. */
    assert_true(ZKT_WAIT_UNTIL(
        rec_find(&states, ZKR_LOCK_DELAYED) >= 0 || grant_done(&g), 10000));
    assert_false(grant_done(&g));
    assert_int_equal(poll(&pfd, 1, 0), 1);
    assert_true(ZKT_WAIT_UNTIL(
        zkr_lock_state(w) == ZKR_LOCK_DELAYED || grant_done(&g), 10000));
    assert_false(grant_done(&g));
    assert_int_equal(zkr_lock_node(w, wnode, sizeof(wnode)), 0);
    assert_true(ZKT_WAIT_UNTIL(dir_record(dir, &r) == ZKR__REC_CLOSED, 5000));
    assert_string_equal(r.node, strrchr(wnode, '/') + 1);
    assert_string_equal(r.cause, "unreleased");
    /* The API says so too, while the waiter is delayed. */
    {
        int64_t until = 0;
        char cause[32];
        int closed = zkr_delay_closed(s2, dir, &until, cause, sizeof(cause));

        if (!grant_done(&g)) {
            assert_int_equal(closed, 1);
            assert_true(until > 0);
            assert_string_equal(cause, "unreleased");
        }
    }
    assert_true(ZKT_WAIT_UNTIL(grant_done(&g), 10000 + d));
    assert_int_equal(g.rc, 0);
    assert_true(g.at - t0 >= d);
    wtok = token_of(w);
    {
        int64_t until = 1;
        char cause[32];

        /* The writer of the closed record holds now: not closed. */
        assert_int_equal(
            zkr_delay_closed(s2, dir, &until, cause, sizeof(cause)), 0);
        assert_true(until == 0);
        assert_string_equal(cause, "");
    }
    assert_int_equal(zkr_lock_release(w), 0);
    assert_int_equal(dir_record(dir, &r), ZKR__REC_RELEASE);
    assert_true(r.czxid == wtok);
    zkr_lock_free(w);
    zkr_lock_free(h);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

static void kill_expire(zkr_session_t *s, const char *node)
{
    (void)node;
    expire(s);
}

static void kill_forced(zkr_session_t *s, const char *node)
{
    (void)s;
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
}

/* Anyone may write the directory and the holder's node; none of it may
 * make a death look like a release: junk, and a release record naming the
 * holder by name but not by its czxid. */
static void kill_forged(zkr_session_t *s, const char *node)
{
    char rec[ZKR__RECORD_MAX];
    char dir[ZKR_NODE_MAX];
    const char *slash = strrchr(node, '/');
    size_t len = slash != NULL ? (size_t)(slash - node) : 0;

    (void)s;
    if (len >= sizeof(dir))
        len = sizeof(dir) - 1;
    memcpy(dir, node, len);
    dir[len] = '\0';
    assert_int_equal(zoo_set(raw, node, "junk", 4, -1), ZOK);
    snprintf(rec, sizeof(rec), "zkr-release 1 czxid=1 node=%s",
             strrchr(node, '/') + 1);
    set_dir(dir, rec);
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
}

static void test_expired_holder_delays(void **state)
{
    (void)state;
    delayed_after("/d/expired", kill_expire);
}

static void test_forced_release_delays(void **state)
{
    (void)state;
    delayed_after("/d/forced", kill_forced);
}

static void test_foreign_writes_cannot_fake_release(void **state)
{
    (void)state;
    delayed_after("/d/forged", kill_forged);
}

/* A delayed waiter that gives up passes on what is left of its delay: the
 * waiter behind it (with a much longer delay of its own) serves that
 * remainder, so the lock stays closed until D after the death, and no
 * longer. */
static void test_delayed_waiter_leaves(void **state)
{
    const int d = zkt_scaled_ms(1500), d2 = 60000;
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000),
                  *s3 = open_session(10000);
    char node[ZKR_NODE_MAX];
    zkr_lock_t *h = holder(s1, "/d/leave", node, sizeof(node));
    struct grant g1, g2;
    zkr_lock_t *w1 = waiter(s2, "/d/leave", d, 1, &g1);
    zkr_lock_t *w2 = waiter(s3, "/d/leave", d2, 2, &g2);
    zkr__record_t r;
    int64_t t0, t1;

    (void)state;
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(w1) == ZKR_LOCK_DELAYED, 10000));
    zkt_sleep_ms(d / 3);
    t1 = zkt_now_ms();
    assert_int_equal(zkr_lock_cancel(w1), 0);
    assert_true(ZKT_WAIT_UNTIL(grant_done(&g1), 10000));
    assert_int_equal(g1.rc, ZKR_ECANCELED);
    /* w2 read w1's record, or w2 wrote its own closed record since. */
    assert_true(ZKT_WAIT_UNTIL(grant_done(&g2), 20000 + d));
    assert_int_equal(g2.rc, 0);
    assert_true(g2.at - t0 >= d);    /* never shorter than the first delay */
    assert_true(g2.at - t1 < 20000); /* the remainder, not w2's own 60 s */
    assert_int_equal(zkr_lock_release(w2), 0);
    assert_int_equal(dir_record("/d/leave", &r), ZKR__REC_RELEASE);
    zkr_lock_free(w2);
    zkr_lock_free(w1);
    zkr_lock_free(h);
    zkr_session_free(s3);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

/* A Curator-style contender releases with a plain delete: by default a
 * delayed zkr waiter behind it takes that for a death, serves the delay,
 * and then is granted: shareable, no deadlock. */
static void test_foreign_contender(void **state)
{
    const int d = zkt_scaled_ms(1000);
    zkr_session_t *s = open_session(10000);
    char foreign[256];
    struct grant g;
    zkr_lock_t *w;
    int64_t t0;

    (void)state;
    mkdirs("/d/curator");
    assert_int_equal(
        zoo_create(raw,
                   "/d/curator/_c_5b7d0e8e-1111-4222-8333-944445555666-lock-",
                   "curator", 7, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                   foreign, sizeof(foreign)),
        ZOK);
    w = waiter(s, "/d/curator", d, 1, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, foreign, -1), ZOK);
    expect_delayed(w, &g, t0, d);
    /* Counted once, for at least d (it ran from after t0 to the end). */
    assert_true(metric(s, "zkr_delays_total", "lock", "/d/curator") == 1);
    assert_true(metric(s, "zkr_delay_seconds_total", "lock", "/d/curator") >=
                d / 1000.0);
    assert_int_equal(zkr_lock_release(w), 0);
    zkr_lock_free(w);
    zkr_session_free(s);
}

/* A Curator-named node ("_c_" and a UUID, as zkr's) cannot be told from
 * zkr's: ZKR_DELAY_TRUST_FOREIGN does not trust its going either. */
static void test_trust_foreign_not_curator(void **state)
{
    const int d = zkt_scaled_ms(1000);
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *w = new_lock(s, "/d/curatortrust", "W");
    char foreign[256];
    struct grant g;
    int64_t t0;

    (void)state;
    mkdirs("/d/curatortrust");
    assert_int_equal(
        zoo_create(
            raw,
            "/d/curatortrust/_c_5b7d0e8e-1111-4222-8333-944445555666-lock-",
            "curator", 7, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
            foreign, sizeof(foreign)),
        ZOK);
    assert_int_equal(zkr_lock_set_delay_flags(w, ZKR_DELAY_TRUST_FOREIGN), 0);
    shared_waiter(w, "/d/curatortrust", d, 1, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, foreign, -1), ZOK);
    expect_delayed(w, &g, t0, d);
    assert_int_equal(zkr_lock_release(w), 0);
    zkr_lock_free(w);
    zkr_session_free(s);
}

/* A real kazoo Lock (python3-kazoo), driven line by line: it acquires
 * PATH and prints "held NODE"; a line on its input releases (it prints
 * "released"); a second line (or EOF) ends it. */
static const char kazoo_script[] =
    "import sys\n"
    "from kazoo.client import KazooClient\n"
    "zk = KazooClient(hosts=sys.argv[1], timeout=10)\n"
    "zk.start()\n"
    "lk = zk.Lock(sys.argv[2], 'kazoo')\n"
    "lk.acquire()\n"
    "print('held', lk.node, flush=True)\n"
    "sys.stdin.readline()\n"
    "lk.release()\n"
    "print('released', flush=True)\n"
    "sys.stdin.readline()\n"
    "zk.stop()\n";

struct kazoo {
    pid_t pid;
    FILE *to, *from;
};

static void kazoo_start(struct kazoo *k, const char *dir, char *node,
                        size_t len)
{
    int in[2], out[2];
    char line[512];

    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    k->pid = fork();
    assert_true(k->pid >= 0);
    if (k->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl("/usr/bin/python3", "python3", "-c", kazoo_script,
              zkt_server_hosts(server), dir, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    k->to = fdopen(in[1], "w");
    k->from = fdopen(out[0], "r");
    if (fgets(line, sizeof(line), k->from) == NULL ||
        strncmp(line, "held ", 5) != 0)
        fail_msg("the kazoo peer did not take the lock (is the Debian "
                 "package python3-kazoo installed? scripts/check "
                 "installs it)");
    line[strcspn(line, "\n")] = '\0';
    snprintf(node, len, "%s", line + 5);
}

/* Tells the kazoo holder to release; returns once it says it did. */
static void kazoo_release(struct kazoo *k)
{
    char line[64];

    fputs("release\n", k->to);
    fflush(k->to);
    assert_non_null(fgets(line, sizeof(line), k->from));
    assert_string_equal(line, "released\n");
}

static void kazoo_end(struct kazoo *k)
{
    int status;

    fclose(k->to);
    fclose(k->from);
    assert_int_equal(waitpid(k->pid, &status, 0), k->pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A kazoo holder releases cleanly while a zkr waiter with delay d waits:
 * by default that is a death (granted no earlier than d after); trusting
 * foreign releases, the grant is prompt (d is long). No deadlock either
 * way. */
static void kazoo_round(const char *dir, unsigned flags, int d)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *w = new_lock(s, dir, "W");
    char node[512];
    struct kazoo k;
    struct grant g;
    int64_t t0;

    mkdirs(dir);
    kazoo_start(&k, dir, node, sizeof(node));
    assert_non_null(strstr(node, "__lock__"));
    assert_int_equal(zkr_lock_set_delay_flags(w, flags), 0);
    shared_waiter(w, dir, d, 1, &g);
    t0 = zkt_now_ms();
    kazoo_release(&k);
    if (flags & ZKR_DELAY_TRUST_FOREIGN)
        expect_prompt(&g, t0);
    else
        expect_delayed(w, &g, t0, d);
    assert_int_equal(zkr_lock_state(w), ZKR_LOCK_HELD);
    assert_int_equal(zkr_lock_release(w), 0);
    kazoo_end(&k);
    zkr_lock_free(w);
    zkr_session_free(s);
}

static void test_kazoo_release_is_death(void **state)
{
    (void)state;
    kazoo_round("/d/kazoo", 0, zkt_scaled_ms(1000));
}

static void test_kazoo_release_trusted(void **state)
{
    (void)state;
    kazoo_round("/d/kazootrust", ZKR_DELAY_TRUST_FOREIGN, 60000);
}

static zkr_lock_t *semaphore(zkr_session_t *s, const char *dir)
{
    zkr_lock_t *l = NULL;

    assert_int_equal(zkr_semaphore_new(&l, s, dir, 2, "S", NULL), 0);
    return l;
}

/* The side (0 read, 1 write) of a new read/write lock at dir. */
static zkr_lock_t *rw_side(zkr_session_t *s, const char *dir, int write)
{
    zkr_lock_t *r = NULL, *w = NULL;

    assert_int_equal(zkr_rwlock_new(&r, &w, s, dir, "RW", NULL), 0);
    zkr_lock_free(write ? r : w);
    return write ? w : r;
}

static void hold(zkr_lock_t *l, char *node, size_t len)
{
    assert_int_equal(zkr_lock_acquire(l, -1), 0);
    assert_int_equal(zkr_lock_node(l, node, len), 0);
}

/* A semaphore of 2: a clean release of a permit lets the waiter in at
 * once; a permit holder's node deleted (a death) delays it. */
static void test_semaphore_delay(void **state)
{
    const int d = zkt_scaled_ms(1000);
    zkr_session_t *s = open_session(10000), *s2 = open_session(10000);
    zkr_lock_t *h1 = semaphore(s, "/d/sem"), *h2 = semaphore(s, "/d/sem");
    char n1[ZKR_NODE_MAX], n2[ZKR_NODE_MAX];
    struct grant g;
    zkr_lock_t *w;
    int64_t t0;

    (void)state;
    hold(h1, n1, sizeof(n1));
    hold(h2, n2, sizeof(n2));
    w = shared_waiter(semaphore(s2, "/d/sem"), "/d/sem", 60000, 2, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_lock_release(h2), 0);
    expect_prompt(&g, t0);
    assert_int_equal(zkr_lock_release(w), 0);
    zkr_lock_free(w);

    hold(h2, n2, sizeof(n2));
    w = shared_waiter(semaphore(s2, "/d/sem"), "/d/sem", d, 2, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, n1, -1), ZOK); /* h1 dies */
    expect_delayed(w, &g, t0, d);
    assert_int_equal(zkr_lock_release(w), 0);
    assert_int_equal(zkr_lock_release(h2), 0);
    zkr_lock_free(w);
    zkr_lock_free(h2);
    zkr_lock_free(h1);
    zkr_session_free(s2);
    zkr_session_free(s);
}

/* A read/write lock. A writer behind two readers: the first reader dies,
 * the second (the one it watches) releases cleanly; one record cannot
 * prove both released, so the writer is delayed. A reader behind a writer
 * that releases cleanly is granted at once; behind one that dies, it is
 * delayed. */
static void test_rwlock_delay(void **state)
{
    const int d = zkt_scaled_ms(1000);
    zkr_session_t *s = open_session(10000), *s2 = open_session(10000);
    zkr_lock_t *r1 = rw_side(s, "/d/rw", 0), *r2 = rw_side(s, "/d/rw", 0);
    zkr_lock_t *wr, *rd;
    char n1[ZKR_NODE_MAX], n2[ZKR_NODE_MAX], nw[ZKR_NODE_MAX];
    struct grant g;
    int64_t t0;

    (void)state;
    hold(r1, n1, sizeof(n1));
    hold(r2, n2, sizeof(n2));
    wr = shared_waiter(rw_side(s2, "/d/rw", 1), "/d/rw", d, 2, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, n1, -1), ZOK); /* r1 dies */
    assert_true(ZKT_WAIT_UNTIL(zkr_lock_state(r1) == ZKR_LOCK_LOST, 10000));
    assert_int_equal(zkr_lock_release(r2), 0); /* r2 releases */
    expect_delayed(wr, &g, t0, d);

    /* A reader behind the writer: a clean release lets it in at once. */
    rd = shared_waiter(rw_side(s2, "/d/rw", 0), "/d/rw", 60000, 1, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_lock_release(wr), 0);
    expect_prompt(&g, t0);
    assert_int_equal(zkr_lock_release(rd), 0);
    zkr_lock_free(rd);

    /* ... a writer's death delays it. */
    assert_int_equal(zkr_lock_release(r1), ZKR_ELOST);
    hold(wr, nw, sizeof(nw));
    rd = shared_waiter(rw_side(s2, "/d/rw", 0), "/d/rw", d, 1, &g);
    t0 = zkt_now_ms();
    assert_int_equal(zoo_delete(raw, nw, -1), ZOK);
    expect_delayed(rd, &g, t0, d);
    assert_int_equal(zkr_lock_release(rd), 0);
    zkr_lock_free(rd);
    zkr_lock_free(wr);
    zkr_lock_free(r2);
    zkr_lock_free(r1);
    zkr_session_free(s2);
    zkr_session_free(s);
}

/* A reader's grant never waits on another reader (docs/design/lock-delay.md:
 * a delay is owed for the departures the grant depends on; readers share).
 * Queue: writer w holding, reader r1 waiting, reader R waiting with a long
 * delay. r1 dies (its node deleted: no record), then w releases cleanly:
 * R is granted at once, for r1's death could never have granted it. */
static void test_reader_owes_no_delay_for_reader(void **state)
{
    zkr_session_t *s = open_session(10000), *s2 = open_session(10000);
    zkr_lock_t *w = rw_side(s, "/d/rr", 1), *r1 = rw_side(s, "/d/rr", 0);
    zkr_lock_t *rd;
    char nw[ZKR_NODE_MAX], n1[ZKR_NODE_MAX];
    struct grant g1, g;
    int64_t t0;

    (void)state;
    hold(w, nw, sizeof(nw));
    shared_waiter(r1, "/d/rr", 0, 1, &g1);
    assert_int_equal(zkr_lock_node(r1, n1, sizeof(n1)), 0);
    rd = shared_waiter(rw_side(s2, "/d/rr", 0), "/d/rr", 60000, 2, &g);
    assert_int_equal(zoo_delete(raw, n1, -1), ZOK); /* r1 dies */
    assert_true(ZKT_WAIT_UNTIL(grant_done(&g1), 10000));
    assert_int_not_equal(g1.rc, 0);
    t0 = zkt_now_ms();
    assert_int_equal(zkr_lock_release(w), 0);
    expect_prompt(&g, t0);
    assert_int_equal(zkr_lock_release(rd), 0);
    zkr_lock_free(rd);
    zkr_lock_free(r1);
    zkr_lock_free(w);
    zkr_session_free(s2);
    zkr_session_free(s);
}

/* An election: the leader's session expires; the next candidate, with a
 * delay, is DELAYED and leads no earlier than D after the leader's node
 * went. A leader that leaves cleanly hands over at once. */
static void test_election_delay(void **state)
{
    const int d = zkt_scaled_ms(1000);
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000);
    zkr_election_t *e1 = NULL, *e2 = NULL;
    int64_t t0, led;

    (void)state;
    assert_int_equal(
        zkr_election_new(&e1, s1, "/d/elect", "one", NULL, ZKR_POLICY_SUSPEND),
        0);
    assert_int_equal(
        zkr_election_new(&e2, s2, "/d/elect", "two", NULL, ZKR_POLICY_SUSPEND),
        0);
    assert_int_equal(zkr_election_set_delay(e2, d), 0);
    assert_int_equal(zkr_election_join(e1), 0);
    assert_int_equal(zkr_election_await(e1, 10000), 0);
    assert_int_equal(zkr_election_join(e2), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/d/elect") == 2, 10000));
    zkt_sleep_ms(zkt_scaled_ms(300));
    assert_int_equal(zkr_election_set_delay(e2, d), ZKR_ESTATE);
    /* A clean leave: the second leads without a delay. */
    t0 = zkt_now_ms();
    assert_int_equal(zkr_election_leave(e1), 0);
    assert_int_equal(zkr_election_await(e2, 20000), 0);
    assert_true(zkt_now_ms() - t0 < 20000);
    assert_int_equal(zkr_election_state(e2), ZKR_LOCK_HELD);
    /* Now the first rejoins behind it, with a delay; the leader dies. */
    assert_int_equal(zkr_election_set_delay(e1, d), 0);
    assert_int_equal(zkr_election_join(e1), 0);
    assert_true(ZKT_WAIT_UNTIL(children("/d/elect") == 2, 10000));
    zkt_sleep_ms(zkt_scaled_ms(300));
    t0 = zkt_now_ms();
    expire(s2);
    assert_true(ZKT_WAIT_UNTIL(zkr_election_state(e1) == ZKR_LOCK_DELAYED ||
                                   zkr_election_is_leader(e1),
                               10000));
    assert_false(zkr_election_is_leader(e1));
    assert_int_equal(zkr_election_await(e1, 10000 + d), 0);
    led = zkt_now_ms();
    assert_true(led - t0 >= d);
    zkr_election_free(e2);
    zkr_election_free(e1);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

/* An observer in its own session follows an election whose leader dies
 * (its session expires) with a candidate C behind it that has a delay of
 * three session timeouts. The observer routes clients to the leader, so
 * it may report C only once C leads: never while zkr_election_is_leader(C)
 * is 0 (each report is checked against C's state as it is delivered, and
 * C's state is polled against the last report), and it reports C, with
 * C's epoch, once C leads. The participants' listing shows C first all
 * along; zkr_contenders_holding() counts it only once it leads. */
struct watch_c {
    pthread_mutex_t mu;
    zkr_election_t *c;
    int reports;   /* reports received */
    int early;     /* reports of C while C did not lead */
    int last_is_c; /* the last report named C */
    int last_none; /* the last report was "no leader" */
    int64_t epoch; /* ... and its epoch */
};

static void on_watch_c(zkr_observer_t *o, const char *id, int64_t epoch,
                       void *data)
{
    struct watch_c *w = data;

    (void)o;
    pthread_mutex_lock(&w->mu);
    w->reports++;
    w->last_is_c = id != NULL && strcmp(id, "C") == 0;
    w->last_none = id == NULL && epoch == 0;
    w->epoch = epoch;
    if (w->last_is_c && !zkr_election_is_leader(w->c))
        w->early++;
    pthread_mutex_unlock(&w->mu);
}

static int watch_get(struct watch_c *w, const int *field)
{
    int v;

    pthread_mutex_lock(&w->mu);
    v = *field;
    pthread_mutex_unlock(&w->mu);
    return v;
}

/* Entries listed and holding, from the participants' listing of e. */
static int holding_of(zkr_election_t *e, int *count, char *first, size_t len)
{
    zkr_contender_t *v = NULL;
    int n = 0, h;

    assert_int_equal(zkr_election_participants(e, &v, &n), 0);
    h = zkr_contenders_holding(v, n);
    *count = n;
    snprintf(first, len, "%s", n > 0 ? v[0].id : "");
    zkr_contenders_free(v, n);
    return h;
}

/* dir: the election's path; closed_record: whether C can write its
 * informational zkr-closed record there (else the directory's ACL gives
 * nobody WRITE, and only C's own node tells). */
static void observer_round(const char *dir, int closed_record)
{
    const int t = 2000, d = 3 * t;
    zkr_session_t *s1 = open_session(t), *s2 = open_session(t),
                  *s3 = open_session(10000);
    zkr_election_t *l = NULL, *c = NULL;
    zkr_observer_t *o = NULL;
    struct watch_c w = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char first[ZKR_ID_MAX + 1];
    int64_t t0, epoch = 0;
    int n = 0, checks = 0;
    int64_t until;

    if (!closed_record) {
        struct ACL no_write[] = {
            {ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
             ZOO_ANYONE_ID_UNSAFE}};
        struct ACL_vector acl = {1, no_write};

        mkdirs("/d");
        assert_int_equal(zoo_create(raw, dir, "", 0, &acl, 0, NULL, 0), ZOK);
    }
    assert_int_equal(
        zkr_election_new(&l, s1, dir, "L", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(
        zkr_election_new(&c, s2, dir, "C", NULL, ZKR_POLICY_SUSPEND), 0);
    w.c = c;
    assert_int_equal(zkr_election_set_delay(c, d), 0);
    assert_int_equal(zkr_election_join(l), 0);
    assert_int_equal(zkr_election_await(l, zkt_scaled_ms(5 * t)), 0);
    assert_int_equal(zkr_election_join(c), 0);
    assert_true(ZKT_WAIT_UNTIL(children(dir) == 2, 5 * t));
    assert_int_equal(zkr_observer_new(&o, s3, dir, on_watch_c, &w), 0);
    assert_true(ZKT_WAIT_UNTIL(watch_get(&w, &w.reports) > 0, 5 * t));
    assert_false(watch_get(&w, &w.last_is_c)); /* L leads */
    assert_false(watch_get(&w, &w.last_none));

    t0 = zkt_now_ms();
    expire(s1); /* L dies: its node goes without a release */
    assert_true(ZKT_WAIT_UNTIL(zkr_election_state(c) == ZKR_LOCK_DELAYED ||
                                   zkr_election_is_leader(c),
                               zkt_scaled_ms(5 * t)));
    assert_false(zkr_election_is_leader(c));
    /* L's node is gone and C waits out its delay: no leader. */
    assert_true(ZKT_WAIT_UNTIL(watch_get(&w, &w.last_none), 5 * t));
    while (!zkr_election_is_leader(c) && zkt_now_ms() - t0 < 3 * d) {
        int h = holding_of(c, &n, first, sizeof(first));

        if (zkr_election_is_leader(c))
            break;           /* led meanwhile: the listing may show either */
        assert_true(n >= 1); /* L rejoins with a new session, behind C */
        assert_string_equal(first, "C"); /* listed, first */
        assert_int_equal(h, 0);          /* but not holding */
        assert_false(watch_get(&w, &w.last_is_c));
        if (!closed_record) /* C could not say it there */
            assert_int_equal(zkr_delay_closed(s3, dir, &until, NULL, 0), 0);
        checks++;
        zkt_sleep_ms(t / 10);
    }
    assert_true(checks > 0);
    assert_true(zkr_election_is_leader(c));
    assert_true(zkt_now_ms() - t0 >= d);
    assert_int_equal(zkr_election_epoch(c, &epoch), 0);
    /* Once C leads the observer says so, with C's epoch, and the listing
     * counts it. */
    assert_true(ZKT_WAIT_UNTIL(watch_get(&w, &w.last_is_c), 5 * t));
    pthread_mutex_lock(&w.mu);
    assert_true(w.epoch == epoch);
    assert_int_equal(w.early, 0);
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(holding_of(c, &n, first, sizeof(first)), 1);
    assert_string_equal(first, "C");
    zkr_observer_free(o);
    zkr_election_free(c);
    zkr_election_free(l);
    zkr_session_free(s3);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

static void test_observer_waits_out_delay(void **state)
{
    (void)state;
    observer_round("/d/observed", 1);
}

/* The same when the directory's ACL lets nobody write its data: no
 * zkr-closed record, the candidate's node alone says it does not lead. */
static void test_observer_waits_out_delay_unrecorded(void **state)
{
    (void)state;
    observer_round("/d/observed-nowrite", 0);
}

/* An observer keeps a data watch on a leader that announced (to hear its
 * touch); freeing the observer takes it back with the directory's: the
 * server holds as many watches as before the observer. */
static void test_observer_free_leaves_no_watch(void **state)
{
    zkr_session_t *s2 = open_session(10000), *s3 = open_session(10000);
    zkr_election_t *c = NULL;
    zkr_observer_t *o = NULL;
    struct watch_c w = {.mu = PTHREAD_MUTEX_INITIALIZER};
    long w0;

    (void)state;
    assert_int_equal(
        zkr_election_new(&c, s2, "/d/obs-free", "C", NULL, ZKR_POLICY_SUSPEND),
        0);
    w.c = c;
    assert_int_equal(zkr_election_set_delay(c, 60000), 0);
    assert_int_equal(zkr_election_join(c), 0);
    assert_int_equal(zkr_election_await(c, zkt_scaled_ms(10000)), 0);
    zkt_sleep_ms(zkt_scaled_ms(500)); /* C's own watches are set */
    w0 = zkt_total_watches(server);
    assert_true(w0 >= 0);
    assert_int_equal(zkr_observer_new(&o, s3, "/d/obs-free", on_watch_c, &w),
                     0);
    assert_true(ZKT_WAIT_UNTIL(watch_get(&w, &w.last_is_c), 10000));
    /* The data watch on C's node ("wchs" counts data watches). */
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0 + 1, 10000));
    zkr_observer_free(o);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0, 10000));
    assert_int_equal(watch_get(&w, &w.early), 0);
    zkr_election_free(c);
    zkr_session_free(s3);
    zkr_session_free(s2);
}

/* An observer's data watch on an announcing leader's node is used up when
 * the node changes (here a client writes it): the observer, which reported
 * that leader already, reads it no more and holds no watch there. A
 * candidate of the observer's session that waits behind that leader
 * watches its node; when it leaves, it takes that watch back: the server
 * holds as many watches as before it joined. */
static void test_observer_fired_watch_not_kept(void **state)
{
    const char *dir = "/d/obs-fired";
    zkr_session_t *s2 = open_session(10000), *s3 = open_session(10000);
    zkr_election_t *c = NULL, *d = NULL;
    zkr_observer_t *o = NULL;
    struct watch_c w = {.mu = PTHREAD_MUTEX_INITIALIZER};
    zkr_contender_t *v = NULL;
    char node[512];
    int n = 0;
    long wa, w0;

    (void)state;
    assert_int_equal(
        zkr_election_new(&c, s2, dir, "C", NULL, ZKR_POLICY_SUSPEND), 0);
    w.c = c;
    assert_int_equal(zkr_election_set_delay(c, 60000), 0);
    assert_int_equal(zkr_election_join(c), 0);
    assert_int_equal(zkr_election_await(c, zkt_scaled_ms(10000)), 0);
    assert_int_equal(zkr_observer_new(&o, s3, dir, on_watch_c, &w), 0);
    assert_true(ZKT_WAIT_UNTIL(watch_get(&w, &w.last_is_c), 10000));
    zkt_sleep_ms(zkt_scaled_ms(500)); /* C's own watches are set */
    assert_int_equal(zkr_election_participants(c, &v, &n), 0);
    assert_int_equal(n, 1);
    snprintf(node, sizeof(node), "%s", v[0].node);
    zkr_contenders_free(v, n);
    wa = zkt_total_watches(server);
    assert_true(wa >= 2); /* the observer's on the directory and on C */
    /* A write to C's node uses up the observer's data watch on it (C's
     * own watch on its node is set again by C). */
    assert_int_equal(zoo_set(raw, node, "C", 1, -1), ZOK);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == wa - 1, 10000));
    zkt_sleep_ms(zkt_scaled_ms(500));
    w0 = zkt_total_watches(server);
    assert_int_equal(w0, wa - 1);
    /* D, in the observer's session, waits behind C, then leaves. */
    assert_int_equal(
        zkr_election_new(&d, s3, dir, "D", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(zkr_election_join(d), 0);
    assert_true(ZKT_WAIT_UNTIL(children(dir) == 2, 10000));
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) > w0, 10000));
    assert_int_equal(zkr_election_leave(d), 0);
    assert_true(ZKT_WAIT_UNTIL(children(dir) == 1, 10000));
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == w0, 10000));
    assert_true(watch_get(&w, &w.last_is_c));
    assert_int_equal(watch_get(&w, &w.early), 0);
    zkr_election_free(d);
    zkr_observer_free(o);
    zkr_election_free(c);
    zkr_session_free(s3);
    zkr_session_free(s2);
}

/* Observers of one session share its data watch on an announcing first
 * candidate (one registration per path). An observer freed while another
 * one's read of that node is in flight must not take the shared watch
 * away: the remaining observer reports the candidate once it leads. */
static void test_observer_free_keeps_others_watch(void **state)
{
    const char *dir = "/d/obs-share";
    const int t = 2000, d = 4 * t;
    zkr_session_t *s1 = open_session(t), *s2 = open_session(t),
                  *s3 = open_session(10000);
    zkr_election_t *l = NULL, *c = NULL;
    zkr_observer_t *a = NULL, *b = NULL;
    struct watch_c wa = {.mu = PTHREAD_MUTEX_INITIALIZER},
                   wb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct watch_c *cur = &wa, *next = &wb;
    int64_t t0;
    long k;

    (void)state;
    assert_int_equal(
        zkr_election_new(&l, s1, dir, "L", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(
        zkr_election_new(&c, s2, dir, "C", NULL, ZKR_POLICY_SUSPEND), 0);
    wa.c = wb.c = c;
    assert_int_equal(zkr_election_set_delay(c, d), 0);
    assert_int_equal(zkr_election_join(l), 0);
    assert_int_equal(zkr_election_await(l, zkt_scaled_ms(5 * t)), 0);
    assert_int_equal(zkr_election_join(c), 0);
    assert_true(ZKT_WAIT_UNTIL(children(dir) == 2, 5 * t));
    t0 = zkt_now_ms();
    expire(s1);
    assert_true(ZKT_WAIT_UNTIL(zkr_election_state(c) == ZKR_LOCK_DELAYED,
                               zkt_scaled_ms(5 * t)));
    assert_int_equal(zkr_observer_new(&a, s3, dir, on_watch_c, &wa), 0);
    assert_true(ZKT_WAIT_UNTIL(watch_get(&wa, &wa.last_none), 5 * t));
    zkt_sleep_ms(zkt_scaled_ms(300));
    k = zkt_total_watches(server); /* includes the data watch on C */
    /* Replace the observer by a new one, freeing the old one at moments
     * around the new one's read, while C waits out its delay; until the
     * server holds our session's data watch on C no more (then the
     * current observer has to hear C's touch without it). */
    for (int i = 0;
         i < 200 && !zkr_election_is_leader(c) && zkt_now_ms() - t0 < d / 2;
         i++) {
        memset(next, 0, sizeof(*next));
        pthread_mutex_init(&next->mu, NULL);
        next->c = c;
        assert_int_equal(zkr_observer_new(&b, s3, dir, on_watch_c, next), 0);
        usleep((useconds_t)(i % 8) * 150);
        zkr_observer_free(a);
        a = b;
        pthread_mutex_destroy(&cur->mu);
        cur = next;
        next = cur == &wa ? &wb : &wa;
        assert_true(ZKT_WAIT_UNTIL(watch_get(cur, &cur->last_none), 5 * t));
        if (!ZKT_WAIT_UNTIL(zkt_total_watches(server) == k, 200))
            break;
    }
    assert_false(zkr_election_is_leader(c));
    /* C leads once its delay is over; the observer says so. */
    assert_true(ZKT_WAIT_UNTIL(zkr_election_is_leader(c), 3 * d));
    assert_true(ZKT_WAIT_UNTIL(watch_get(cur, &cur->last_is_c), 5 * t));
    assert_int_equal(watch_get(cur, &cur->early), 0);
    zkr_observer_free(a);
    zkr_election_free(c);
    zkr_election_free(l);
    zkr_session_free(s3);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

/* Arguments and states of the API. */
/* Issue 16 review (F2): a writer behind readers r1, r2, watching r2. r2's
 * session expires: the writer lists again, sees r1, waits on. r1 then
 * releases cleanly. r2 may have held (it was a reader, beside r1): its
 * death stays owed, so the writer is granted no earlier than D after it. */
static void test_writer_keeps_earlier_death(void **state)
{
    const int d = 3000;
    const char *dir = "/d/rw-f2";
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000),
                  *s3 = open_session(10000);
    zkr_lock_t *r1 = rw_side(s1, dir, 0), *r2 = rw_side(s2, dir, 0), *w;
    char n1[ZKR_NODE_MAX], n2[ZKR_NODE_MAX];
    struct grant g;
    int64_t t0;

    (void)state;
    mkdirs(dir);
    hold(r1, n1, sizeof(n1));
    hold(r2, n2, sizeof(n2));
    w = shared_waiter(rw_side(s3, dir, 1), dir, d, 2, &g);
    t0 = zkt_now_ms();
    expire(s2); /* r2, the node the writer watches, dies */
    assert_true(ZKT_WAIT_UNTIL(children(dir) == 2, 10000));
    zkt_sleep_ms(zkt_scaled_ms(300)); /* the writer listed again: waits */
    assert_false(grant_done(&g));
    assert_int_equal(zkr_lock_release(r1), 0); /* clean */
    assert_true(ZKT_WAIT_UNTIL(grant_done(&g), 10000 + d));
    assert_int_equal(g.rc, 0);
    assert_true(g.at - t0 >= d);
    assert_int_equal(zkr_lock_release(w), 0);
    zkr_lock_free(w);
    zkr_lock_free(r2);
    zkr_lock_free(r1);
    zkr_session_free(s3);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

/* Issue 16 review (F3): writers w1, w2 and readers ra, rb behind them,
 * both readers with a long delay. w1 and w2 release cleanly: only clean
 * releases, so both readers are granted at once. (w2 vouches for w1 to
 * rb too; one reader's informational zkr-closed record never replaces the
 * release record the other reads.) */
static void test_readers_after_clean_releases(void **state)
{
    const char *dir = "/d/rw-f3";
    zkr_session_t *s1 = open_session(10000), *s2 = open_session(10000),
                  *s3 = open_session(10000), *s4 = open_session(10000);
    zkr_lock_t *w1 = rw_side(s1, dir, 1), *w2, *ra, *rb;
    char n1[ZKR_NODE_MAX];
    struct grant g2, ga, gb;
    int64_t t0;

    (void)state;
    mkdirs(dir);
    hold(w1, n1, sizeof(n1));
    w2 = shared_waiter(rw_side(s2, dir, 1), dir, 0, 1, &g2);
    ra = shared_waiter(rw_side(s3, dir, 0), dir, 60000, 2, &ga);
    rb = shared_waiter(rw_side(s4, dir, 0), dir, 60000, 3, &gb);
    assert_int_equal(zkr_lock_release(w1), 0);
    assert_true(ZKT_WAIT_UNTIL(grant_done(&g2), 10000));
    zkt_sleep_ms(zkt_scaled_ms(300));
    t0 = zkt_now_ms();
    assert_int_equal(zkr_lock_release(w2), 0);
    expect_prompt(&ga, t0);
    expect_prompt(&gb, t0);
    zkr_lock_free(rb);
    zkr_lock_free(ra);
    zkr_lock_free(w2);
    zkr_lock_free(w1);
    zkr_session_free(s4);
    zkr_session_free(s3);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

/* Issue 16 review (F1): a candidate DELAYED by the leader's death loses
 * its own node (deleted by an operator, or its session expires) and
 * rejoins inside the library: the new node still serves the delay, so
 * it leads no earlier than D after the death. */
static void rejoin_while_delayed(const char *dir, int expire_self)
{
    const int d = 3000;
    zkr_session_t *s1 = open_session(4000), *s2 = NULL;
    zkr_election_t *e1 = NULL, *e2 = NULL;
    zkr_session_options_t o;
    char node[ZKR_NODE_MAX];
    struct String_vector v;
    int64_t t0;

    memset(&o, 0, sizeof(o));
    o.no_reconnect = 1; /* the dead leader does not come back */
    assert_int_equal(zkr_session_open(&s2, zkt_server_hosts(server), 4000, &o),
                     0);
    mkdirs(dir);
    assert_int_equal(
        zkr_election_new(&e2, s2, dir, "two", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(
        zkr_election_new(&e1, s1, dir, "one", NULL, ZKR_POLICY_SUSPEND), 0);
    assert_int_equal(zkr_election_join(e2), 0);
    assert_int_equal(zkr_election_await(e2, 10000), 0);
    assert_int_equal(zkr_election_set_delay(e1, d), 0);
    assert_int_equal(zkr_election_join(e1), 0);
    assert_true(ZKT_WAIT_UNTIL(children(dir) == 2, 10000));
    zkt_sleep_ms(zkt_scaled_ms(300));
    t0 = zkt_now_ms();
    expire(s2); /* the leader dies */
    assert_true(
        ZKT_WAIT_UNTIL(zkr_election_state(e1) == ZKR_LOCK_DELAYED, 10000));
    if (expire_self) {
        expire(s1);
    } else {
        assert_int_equal(zoo_get_children(raw, dir, 0, &v), ZOK);
        assert_int_equal(v.count, 1);
        snprintf(node, sizeof(node), "%s/%s", dir, v.data[0]);
        deallocate_String_vector(&v);
        assert_int_equal(zoo_delete(raw, node, -1), ZOK);
    }
    assert_int_equal(zkr_election_await(e1, 20000 + d), 0);
    assert_true(zkt_now_ms() - t0 >= d);
    zkr_election_free(e1);
    zkr_election_free(e2);
    zkr_session_free(s2);
    zkr_session_free(s1);
}

static void test_rejoin_after_own_node_deleted(void **state)
{
    (void)state;
    rejoin_while_delayed("/d/elect-del", 0);
}

static void test_rejoin_after_own_session_expired(void **state)
{
    (void)state;
    rejoin_while_delayed("/d/elect-exp", 1);
}

static void test_delay_api(void **state)
{
    zkr_session_t *s = open_session(10000);
    zkr_lock_t *l = new_lock(s, "/d/api", "A"), *sem = NULL, *r = NULL,
               *wr = NULL;
    zkr_election_t *e = NULL;

    (void)state;
    assert_string_equal(zkr_lock_state_name(ZKR_LOCK_DELAYED), "DELAYED");
    assert_int_equal(zkr_lock_set_delay(NULL, 5), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_set_delay(l, -1), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_set_delay(l, 0), 0);
    assert_int_equal(zkr_lock_set_delay(l, 1000), 0);
    assert_int_equal(zkr_semaphore_new(&sem, s, "/d/apisem", 2, NULL, NULL), 0);
    assert_int_equal(zkr_lock_set_delay(sem, 1000), 0);
    assert_int_equal(zkr_lock_set_delay(sem, -1), ZBADARGUMENTS);
    assert_int_equal(zkr_rwlock_new(&r, &wr, s, "/d/apirw", NULL, NULL), 0);
    assert_int_equal(zkr_lock_set_delay(r, 1000), 0);
    assert_int_equal(zkr_lock_set_delay(wr, 1000), 0);
    assert_int_equal(
        zkr_election_new(&e, s, "/d/apiel", NULL, NULL, ZKR_POLICY_SESSION), 0);
    assert_int_equal(zkr_election_set_delay(NULL, 1), ZBADARGUMENTS);
    assert_int_equal(zkr_election_set_delay(e, -1), ZBADARGUMENTS);
    assert_int_equal(zkr_election_set_delay(e, 1000), 0);
    assert_int_equal(zkr_lock_set_delay_flags(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_set_delay_flags(l, 0x2), ZBADARGUMENTS);
    assert_int_equal(zkr_lock_set_delay_flags(l, ZKR_DELAY_TRUST_FOREIGN), 0);
    assert_int_equal(zkr_lock_set_delay_flags(l, 0), 0);
    assert_int_equal(zkr_election_set_delay_flags(NULL, 0), ZBADARGUMENTS);
    assert_int_equal(zkr_election_set_delay_flags(e, ~0u), ZBADARGUMENTS);
    assert_int_equal(zkr_election_set_delay_flags(e, ZKR_DELAY_TRUST_FOREIGN),
                     0);
    {
        int64_t until;
        char cause[8];

        assert_int_equal(zkr_delay_closed(NULL, "/d/api", &until, NULL, 0),
                         ZBADARGUMENTS);
        assert_int_equal(zkr_delay_closed(s, "d/api", &until, NULL, 0),
                         ZBADARGUMENTS);
        assert_int_equal(zkr_delay_closed(s, "/d/api", NULL, NULL, 0),
                         ZBADARGUMENTS);
        assert_int_equal(zkr_delay_closed(s, "/d/api", &until, cause, 0),
                         ZBADARGUMENTS);
        assert_int_equal(
            zkr_delay_closed(s, "/d/nosuch", &until, cause, sizeof(cause)), 0);
    }
    zkr_election_free(e);
    zkr_lock_free(wr);
    zkr_lock_free(r);
    zkr_lock_free(sem);
    zkr_lock_free(l);
    zkr_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_writes_record),
        cmocka_unit_test(test_death_writes_no_record),
        cmocka_unit_test(test_record_refused_release_happens),
        cmocka_unit_test(test_clean_release_no_delay),
        cmocka_unit_test(test_expired_holder_delays),
        cmocka_unit_test(test_forced_release_delays),
        cmocka_unit_test(test_foreign_writes_cannot_fake_release),
        cmocka_unit_test(test_delayed_waiter_leaves),
        cmocka_unit_test(test_foreign_contender),
        cmocka_unit_test(test_trust_foreign_not_curator),
        cmocka_unit_test(test_kazoo_release_is_death),
        cmocka_unit_test(test_kazoo_release_trusted),
        cmocka_unit_test(test_semaphore_delay),
        cmocka_unit_test(test_rwlock_delay),
        cmocka_unit_test(test_reader_owes_no_delay_for_reader),
        cmocka_unit_test(test_election_delay),
        cmocka_unit_test(test_observer_waits_out_delay),
        cmocka_unit_test(test_observer_waits_out_delay_unrecorded),
        cmocka_unit_test(test_observer_free_leaves_no_watch),
        cmocka_unit_test(test_observer_fired_watch_not_kept),
        cmocka_unit_test(test_observer_free_keeps_others_watch),
        cmocka_unit_test(test_writer_keeps_earlier_death),
        cmocka_unit_test(test_readers_after_clean_releases),
        cmocka_unit_test(test_rejoin_after_own_node_deleted),
        cmocka_unit_test(test_rejoin_after_own_session_expired),
        cmocka_unit_test(test_delay_api),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("delay", tests, setup, teardown);
}
