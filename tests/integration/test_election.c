/* Leader election against a real ZooKeeper server: five candidate
 * processes (examples/election) through resignation, crash and session
 * expiry with a history checker; then, in-process, a middle candidate
 * leaving, a suspended leader under both policies, a candidate whose
 * session changed, and an observer. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../server_test.h"

enum { T = 4000, N = 5 };

/* ------------------------------------------------------------ history */

struct ev {
    char what[16];
    long long at;
    char id[16];
    char rest[64];
};

static int load(const char *path, struct ev *v, int max)
{
    FILE *f = fopen(path, "r");
    char line[256];
    int n = 0;

    if (f == NULL)
        return 0;
    while (n < max && fgets(line, sizeof(line), f) != NULL) {
        v[n].rest[0] = '\0';
        if (sscanf(line, "%15s %lld %15s %63[^\n]", v[n].what, &v[n].at,
                   v[n].id, v[n].rest) >= 3)
            n++;
    }
    fclose(f);
    return n;
}

/* How many `what` events the history holds (of `id`, or of anyone). */
static int count_ev(const char *log, const char *what, const char *id)
{
    struct ev v[256];
    int n = load(log, v, 256), k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].what, what) == 0 &&
            (id == NULL || strcmp(v[i].id, id) == 0))
            k++;
    return k;
}

static int count_on(const char *log, const char *id)
{
    return count_ev(log, "LEADER_ON", id);
}

static long long last_on_at(const char *log, const char *id)
{
    struct ev v[256];
    int n = load(log, v, 256);
    long long at = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].what, "LEADER_ON") == 0 && strcmp(v[i].id, id) == 0)
            at = v[i].at;
    return at;
}

/* The checker: leadership intervals of connected candidates never
 * overlap, and every new leader's epoch is higher than all before. A
 * candidate cut off from outside stops counting as connected when that
 * happened: `cut_id` was killed (crash) or had its session taken over and
 * closed (expiry from outside) at `cut_at`. */
struct cut {
    const char *id;
    long long at;
};

static int check_history(const char *log, const struct cut *cuts, int ncut)
{
    struct ev v[256];
    int n = load(log, v, 256), leaders = 0, bad = 0;
    long long last_epoch = -1;
    char cur[16] = "";

    for (int i = 0; i < n; i++) {
        for (int k = 0; k < ncut; k++) {
            if (cur[0] != '\0' && strcmp(cur, cuts[k].id) == 0 &&
                v[i].at >= cuts[k].at && strcmp(v[i].id, cur) != 0) {
                leaders--; /* its leadership ended when it was cut off */
                cur[0] = '\0';
            }
        }
        if (strcmp(v[i].what, "LEADER_ON") == 0) {
            long long epoch = atoll(v[i].rest);
            if (leaders != 0) {
                print_message("%s became leader while %s still led\n", v[i].id,
                              cur);
                bad++;
            }
            if (epoch <= last_epoch) {
                print_message("epoch %lld after %lld\n", epoch, last_epoch);
                bad++;
            }
            last_epoch = epoch;
            leaders++;
            snprintf(cur, sizeof(cur), "%s", v[i].id);
        } else if (strcmp(v[i].what, "LEADER_OFF") == 0) {
            int was_cut = 0;
            for (int k = 0; k < ncut; k++)
                was_cut |=
                    strcmp(v[i].id, cuts[k].id) == 0 && v[i].at >= cuts[k].at;
            if (was_cut && strcmp(v[i].id, cur) != 0)
                continue; /* its late notice; already counted as ended */
            if (strcmp(v[i].id, cur) != 0) {
                print_message("%s stopped leading but %s led\n", v[i].id, cur);
                bad++;
            }
            leaders--;
            cur[0] = '\0';
        }
    }
    return bad;
}

/* A checker that cannot fail proves nothing: it must reject overlap. */
static void test_checker_catches_two_leaders(void **state)
{
    char *dir = zkt_mkdtemp("zkr-elect-chk-"), log[512];
    FILE *f;

    (void)state;
    snprintf(log, sizeof(log), "%s/log", dir);
    f = fopen(log, "w");
    fputs("LEADER_ON 100 c0 5\nLEADER_ON 150 c1 7\nLEADER_OFF 160 c0 5\n", f);
    fclose(f);
    assert_true(check_history(log, NULL, 0) > 0);
    f = fopen(log, "w");
    fputs("LEADER_ON 100 c0 9\nLEADER_OFF 140 c0 9\nLEADER_ON 150 c1 7\n", f);
    fclose(f);
    assert_true(check_history(log, NULL, 0) > 0); /* epoch went down */
    f = fopen(log, "w");
    fputs("LEADER_ON 100 c0 5\nLEADER_OFF 140 c0 5\nLEADER_ON 150 c1 7\n", f);
    fclose(f);
    assert_int_equal(check_history(log, NULL, 0), 0); /* and a good one */
    f = fopen(log, "w");
    fputs("LEADER_ON 100 c0 5\nLEADER_ON 150 c1 7\nLEADER_OFF 160 c0 5\n", f);
    fclose(f);
    {
        struct cut late = {"c0", 155}, early = {"c0", 120};
        assert_true(check_history(log, &late, 1) > 0); /* cut too late */
        assert_int_equal(check_history(log, &early, 1), 0);
    }
    zkt_rm_rf(dir);
    free(dir);
}

/* ---------------------------------------------------------- processes */

static pid_t candidate(const char *log, const char *id, const char *out)
{
    char *prog = zkt_build_path("examples/election");
    char tms[16];
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;

    snprintf(tms, sizeof(tms), "%d", T);
    char *argv[] = {prog,       "-s",      (char *)zkt_server_hosts(server),
                    "-p",       "/e/five", "-i",
                    (char *)id, "-T",      tms,
                    "-r",       "-l",      (char *)log,
                    NULL};
    assert_true(fd >= 0);
    pid = zkt_spawn(argv, fd);
    close(fd);
    free(prog);
    assert_true(pid > 0);
    return pid;
}

/* Reads the session credentials a candidate printed last. */
static void creds(const char *log, const char *id, clientid_t *cid)
{
    struct ev v[256];
    int n = load(log, v, 256);
    const char *rest = NULL;

    for (int i = 0; i < n; i++)
        if (strcmp(v[i].what, "SESSION") == 0 && strcmp(v[i].id, id) == 0)
            rest = v[i].rest;
    assert_non_null(rest);
    memset(cid, 0, sizeof(*cid));
    unsigned long long sid;
    char pw[40];
    assert_int_equal(sscanf(rest, "%llx %32s", &sid, pw), 2);
    cid->client_id = (int64_t)sid;
    for (int i = 0; i < 16; i++) {
        unsigned b;
        sscanf(pw + 2 * i, "%2x", &b);
        cid->passwd[i] = (char)b;
    }
}

static long long failover[3];

static void test_five_candidates(void **state)
{
    char *dir = zkt_mkdtemp("zkr-elect-"), log[512], out[N][512], id[N][8];
    pid_t pid[N];
    long long t0, killed_at, expired_at;
    clientid_t cid;
    int st;

    (void)state;
    snprintf(log, sizeof(log), "%s/history", dir);
    for (int i = 0; i < N; i++) {
        snprintf(id[i], sizeof(id[i]), "c%d", i);
        snprintf(out[i], sizeof(out[i]), "%s/%s.out", dir, id[i]);
        pid[i] = candidate(log, id[i], out[i]);
        assert_true(ZKT_WAIT_UNTIL(children("/e/five") == i + 1, 10000));
    }
    assert_true(ZKT_WAIT_UNTIL(count_on(log, "c0") == 1, 10000));

    /* Resignation: the next in order leads promptly. */
    t0 = zkt_now_ms();
    kill(pid[0], SIGUSR1);
    assert_true(ZKT_WAIT_UNTIL(count_on(log, "c1") == 1, 3000));
    failover[0] = last_on_at(log, "c1") - t0;

    /* Crash: the next leads once the server expires the dead session. */
    killed_at = zkt_now_ms();
    kill(pid[1], SIGKILL);
    assert_int_equal(zkt_wait_pid(pid[1], 5000, &st), 0);
    assert_true(ZKT_WAIT_UNTIL(count_on(log, "c2") == 1, T + 3000));
    failover[1] = last_on_at(log, "c2") - killed_at;
    assert_true(failover[1] <= T + 1500);

    /* Expiry from outside: the expired leader is told to stop and the
     * next one leads promptly; the expired one rejoins at the back. */
    creds(log, "c2", &cid);
    t0 = expired_at = zkt_now_ms();
    assert_int_equal(zkt_expire_session(zkt_server_hosts(server), &cid, 10000),
                     0);
    assert_true(ZKT_WAIT_UNTIL(count_on(log, "c3") == 1, 3000));
    failover[2] = last_on_at(log, "c3") - t0;
    /* The expired leader's function was told to stop, and stopped. */
    assert_true(ZKT_WAIT_UNTIL(count_ev(log, "LEADER_OFF", "c2") == 1, 3000));

    /* A candidate in the middle of the queue leaves: nobody is promoted. */
    kill(pid[4], SIGTERM);
    assert_int_equal(zkt_wait_pid(pid[4], 10000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(count_on(log, NULL), 4); /* c0, c1, c2, c3 */

    /* c3 resigns: the queue is now c0 (requeued), c2 (rejoined). */
    kill(pid[3], SIGUSR1);
    assert_true(ZKT_WAIT_UNTIL(count_on(log, "c0") == 2, 3000));

    for (int i = 0; i < N; i++) {
        if (i == 1 || i == 4)
            continue;
        kill(pid[i], SIGTERM);
        assert_int_equal(zkt_wait_pid(pid[i], 10000, &st), 0);
    }
    {
        struct cut cuts[] = {{"c1", killed_at}, {"c2", expired_at}};
        assert_int_equal(check_history(log, cuts, 2), 0);
    }
    print_message("failover after resignation %lld ms, crash %lld ms "
                  "(session timeout %d ms), expiry %lld ms\n",
                  failover[0], failover[1], T, failover[2]);
    assert_true(ZKT_WAIT_UNTIL(children("/e/five") == 0, 10000));
    zkt_rm_rf(dir);
    free(dir);
}

/* --------------------------------------------------------- in-process */

struct seen {
    pthread_mutex_t mu;
    int n;
    int lead[32];
    long long at[32];
};

static void on_lead(zkr_election_t *e, int leader, int rc, void *data)
{
    struct seen *v = data;
    (void)e;
    (void)rc;
    pthread_mutex_lock(&v->mu);
    if (v->n < 32) {
        v->lead[v->n] = leader;
        v->at[v->n++] = zkt_now_ms();
    }
    pthread_mutex_unlock(&v->mu);
}

static int seen_n(struct seen *v)
{
    int n;
    pthread_mutex_lock(&v->mu);
    n = v->n;
    pthread_mutex_unlock(&v->mu);
    return n;
}

static zkr_election_t *cand(zkr_session_t *s, const char *path, const char *id,
                            zkr_loss_policy_t p, struct seen *v)
{
    zkr_election_t *e = NULL;
    assert_int_equal(zkr_election_new(&e, s, path, id, NULL, p), 0);
    if (v != NULL)
        zkr_election_set_listener(e, on_lead, v);
    assert_int_equal(zkr_election_join(e), 0);
    return e;
}

/* A suspended leader reports the loss (default policy) before anyone else
 * could be elected, and leads again only after re-verifying its node;
 * under the session policy it keeps leadership through the blip. */
static void suspended_leader(zkr_loss_policy_t policy)
{
    zkr_session_t *a = open_session(10000), *b = open_session(10000);
    /* Static: a callback must never write into a dead stack frame, even
     * after a failed assertion left a candidate behind. */
    static struct seen va, vb;
    const char *path = policy == ZKR_POLICY_SUSPEND ? "/e/susp" : "/e/sess";
    zkr_election_t *ea, *eb;

    memset(&va, 0, sizeof(va));
    memset(&vb, 0, sizeof(vb));
    pthread_mutex_init(&va.mu, NULL);
    pthread_mutex_init(&vb.mu, NULL);
    ea = cand(a, path, "a", policy, &va);
    int64_t epoch1, epoch2;

    assert_int_equal(zkr_election_await(ea, 5000), 0);
    eb = cand(b, path, "b", policy, &vb);
    assert_true(ZKT_WAIT_UNTIL(children(path) == 2, 5000));
    assert_int_equal(zkr_election_epoch(ea, &epoch1), 0);
    zookeeper_close(raw);
    raw = NULL;
    assert_int_equal(zkt_server_kill(server), 0);
    if (policy == ZKR_POLICY_SUSPEND) {
        assert_true(ZKT_WAIT_UNTIL(!zkr_election_is_leader(ea), 8000));
        assert_true(ZKT_WAIT_UNTIL(seen_n(&va) == 2, 2000));
        assert_int_equal(va.lead[1], 0);
    } else {
        assert_true(
            ZKT_WAIT_UNTIL(zkr_session_state(a) == ZKR_STATE_SUSPENDED, 8000));
        assert_true(zkr_election_is_leader(ea));
    }
    assert_int_equal(zkt_server_restart(server), 0);
    raw = zkt_connect(zkt_server_hosts(server), 10000);
    assert_non_null(raw);
    assert_int_equal(zkr_election_await(ea, 10000), 0);
    assert_int_equal(zkr_election_epoch(ea, &epoch2), 0);
    assert_int_equal(epoch1, epoch2); /* the same, re-verified node */
    assert_false(zkr_election_is_leader(eb));
    /* Freeing waits for queued callbacks: then the counts are final. */
    zkr_election_free(eb);
    zkr_election_free(ea);
    assert_int_equal(seen_n(&va), policy == ZKR_POLICY_SUSPEND ? 3 : 1);
    assert_int_equal(seen_n(&vb), 0); /* b never led */
    zkr_session_free(a);
    zkr_session_free(b);
}

/* The listener hears of a resignation and of the next leadership after
 * joining again (a regression: both were missed). */
static void test_listener_leave_and_rejoin(void **state)
{
    zkr_session_t *s = open_session(10000);
    struct seen v = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {0}};
    zkr_election_t *e = cand(s, "/e/relisten", "a", ZKR_POLICY_SUSPEND, &v);

    (void)state;
    assert_true(ZKT_WAIT_UNTIL(seen_n(&v) == 1, 5000));
    assert_int_equal(v.lead[0], 1);
    assert_int_equal(zkr_election_leave(e), 0);
    assert_true(ZKT_WAIT_UNTIL(seen_n(&v) == 2, 5000));
    assert_int_equal(v.lead[1], 0);
    assert_int_equal(zkr_election_join(e), 0);
    assert_true(ZKT_WAIT_UNTIL(seen_n(&v) == 3, 5000));
    assert_int_equal(v.lead[2], 1);
    zkr_election_free(e);
    zkr_session_free(s);
}

static void test_suspended_leader_default_policy(void **state)
{
    (void)state;
    suspended_leader(ZKR_POLICY_SUSPEND);
}

static void test_suspended_leader_session_policy(void **state)
{
    (void)state;
    suspended_leader(ZKR_POLICY_SESSION);
}

/* A candidate whose session changed never regains leadership through its
 * old node: it rejoins with a new node, at the back. */
static void test_session_changed(void **state)
{
    zkr_session_t *a = open_session(T), *b = open_session(T);
    zkr_election_t *ea = cand(a, "/e/changed", "a", ZKR_POLICY_SUSPEND, NULL);
    zkr_election_t *eb;
    zkr_sequencer_t qa1, qa2, qb;
    clientid_t cid;

    (void)state;
    assert_int_equal(zkr_election_await(ea, 5000), 0);
    assert_int_equal(zkr_election_sequencer(ea, &qa1), 0);
    assert_int_equal(qa1.mode, 'l');
    eb = cand(b, "/e/changed", "b", ZKR_POLICY_SUSPEND, NULL);
    assert_true(ZKT_WAIT_UNTIL(children("/e/changed") == 2, 5000));
    cid = *zoo_client_id(zkr_session_handle(a));
    assert_int_equal(zkt_expire_session(zkt_server_hosts(server), &cid, 10000),
                     0);
    assert_int_equal(zkr_election_await(eb, 10000), 0);
    assert_int_equal(zkr_election_sequencer(eb, &qb), 0);
    assert_true(qb.token > qa1.token);
    /* a is back in the queue on its new session, behind b. */
    assert_true(ZKT_WAIT_UNTIL(children("/e/changed") == 2, 15000));
    assert_false(zkr_election_is_leader(ea));
    assert_int_equal(zkr_sequencer_check(b, &qa1), ZKR_ESTALE);
    assert_int_equal(zkr_election_leave(eb), 0);
    assert_int_equal(zkr_election_await(ea, 10000), 0);
    assert_int_equal(zkr_election_sequencer(ea, &qa2), 0);
    assert_string_not_equal(qa1.node, qa2.node);
    assert_true(qa2.token > qb.token);
    assert_int_equal(qa2.session_id, zkr_session_id(a));
    zkr_election_free(eb);
    zkr_election_free(ea);
    zkr_session_free(a);
    zkr_session_free(b);
}

/* The observer sees every change of leader, in order, and participants
 * are listed without joining. */
struct obs {
    pthread_mutex_t mu;
    int n;
    char ids[16][16];
    int64_t epochs[16];
};

static void on_observe(zkr_observer_t *o, const char *id, int64_t epoch,
                       void *data)
{
    struct obs *v = data;
    (void)o;
    pthread_mutex_lock(&v->mu);
    if (v->n < 16) {
        snprintf(v->ids[v->n], 16, "%s", id != NULL ? id : "-");
        v->epochs[v->n++] = epoch;
    }
    pthread_mutex_unlock(&v->mu);
}

static int obs_n(struct obs *v)
{
    int n;
    pthread_mutex_lock(&v->mu);
    n = v->n;
    pthread_mutex_unlock(&v->mu);
    return n;
}

static void test_observer_and_middle_leave(void **state)
{
    zkr_session_t *s = open_session(10000), *w = open_session(10000);
    static struct obs v = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}, {0}};
    zkr_observer_t *o;
    zkr_election_t *e[4];
    zkr_contender_t *list;
    int n;

    (void)state;
    assert_int_equal(zkr_observer_new(&o, w, "/e/obs", on_observe, &v), 0);
    assert_true(ZKT_WAIT_UNTIL(obs_n(&v) == 1, 5000)); /* nobody yet */
    assert_string_equal(v.ids[0], "-");
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof(id), "n%d", i);
        e[i] = cand(s, "/e/obs", id, ZKR_POLICY_SUSPEND, NULL);
        assert_true(ZKT_WAIT_UNTIL(children("/e/obs") == i + 1, 5000));
    }
    assert_true(ZKT_WAIT_UNTIL(obs_n(&v) == 2, 5000));
    assert_int_equal(zkr_election_participants(e[0], &list, &n), 0);
    assert_int_equal(n, 4);
    assert_string_equal(list[0].id, "n0");
    assert_string_equal(list[3].id, "n3");
    zkr_contenders_free(list, n);

    /* n2 (middle) leaves: no leader change, n3 does not jump ahead. */
    assert_int_equal(zkr_election_leave(e[2]), 0);
    assert_int_equal(children("/e/obs"), 3);
    assert_true(zkr_election_is_leader(e[0]));
    assert_false(zkr_election_is_leader(e[3]));
    /* Leaders resign one after another; each change is seen, in order.
     * (Each waits until the observer saw the previous one: a leadership
     * shorter than a round trip is invisible to any ZooKeeper watcher.) */
    for (int i = 0, seen = 2; i < 4; i++) {
        if (i == 2)
            continue;
        assert_int_equal(zkr_election_leave(e[i]), 0);
        seen++;
        assert_true(ZKT_WAIT_UNTIL(obs_n(&v) == seen, 5000));
    }
    assert_string_equal(v.ids[1], "n0");
    assert_string_equal(v.ids[2], "n1");
    assert_string_equal(v.ids[3], "n3");
    assert_string_equal(v.ids[4], "-");
    assert_true(v.epochs[1] < v.epochs[2] && v.epochs[2] < v.epochs[3]);
    for (int i = 0; i < 4; i++)
        zkr_election_free(e[i]);
    zkr_observer_free(o);
    zkr_session_free(s);
    zkr_session_free(w);
    assert_true(ZKT_WAIT_UNTIL(zkt_total_watches(server) == 0, 5000));
}

/* On a session that will never come back (an adopted handle that
 * expired), a candidate does not wait forever: participation ends with
 * ZKR_ELOST. */
static zkr_session_t *adopted;

static void forward(zhandle_t *zh, int type, int state, const char *path,
                    void *ctx)
{
    (void)zh;
    (void)path;
    (void)ctx;
    if (adopted != NULL)
        zkr_session_process_event(adopted, type, state);
}

static void test_adopted_session_lost(void **state)
{
    zhandle_t *zh =
        zookeeper_init(zkt_server_hosts(server), forward, T, NULL, NULL, 0);
    zkr_election_t *e;
    clientid_t cid;

    (void)state;
    assert_non_null(zh);
    assert_int_equal(zkt_wait_connected(zh, 10000), 0);
    assert_int_equal(zkr_session_adopt(&adopted, zh), 0);
    e = cand(adopted, "/e/adopted", "x", ZKR_POLICY_SUSPEND, NULL);
    assert_int_equal(zkr_election_await(e, 5000), 0);
    cid = *zoo_client_id(zh);
    assert_int_equal(zkt_expire_session(zkt_server_hosts(server), &cid, 10000),
                     0);
    /* Until the client hears of it, a takeover is invisible to it. */
    assert_true(
        ZKT_WAIT_UNTIL(zkr_session_state(adopted) == ZKR_STATE_LOST, 10000));
    assert_int_equal(zkr_election_await(e, 10000), ZKR_ELOST);
    assert_false(zkr_election_is_leader(e));
    zkr_election_free(e);
    assert_int_equal(zkr_session_free(adopted), 0);
    adopted = NULL;
    zookeeper_close(zh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_catches_two_leaders),
        cmocka_unit_test(test_five_candidates),
        cmocka_unit_test(test_suspended_leader_default_policy),
        cmocka_unit_test(test_suspended_leader_session_policy),
        cmocka_unit_test(test_session_changed),
        cmocka_unit_test(test_observer_and_middle_leave),
        cmocka_unit_test(test_adopted_session_lost),
        cmocka_unit_test(test_listener_leave_and_rejoin),
    };
    return cmocka_run_group_tests_name("election", tests, setup, teardown);
}
