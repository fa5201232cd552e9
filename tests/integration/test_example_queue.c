/* examples/queue against a real ZooKeeper server: a producer and two
 * consumer processes complete every job exactly once; and a consumer
 * paused past its session while it works has its late write refused by
 * the store and its ack refused by the queue, while the job, redelivered,
 * is done once by another consumer. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
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

#include "filter.h"

#include "server_test.h"

/* Starts examples/queue with the server's hosts, queue path and args
 * (NULL-terminated), its output into out. */
static pid_t example(const char *out, const char *qpath, ...)
{
    char *prog = zkt_build_path("examples/queue");
    char *argv[32];
    int argc = 0, fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const char *a;
    va_list ap;
    pid_t pid;

    argv[argc++] = prog;
    argv[argc++] = "-s";
    argv[argc++] = (char *)zkt_server_hosts(server);
    argv[argc++] = "-p";
    argv[argc++] = (char *)qpath;
    va_start(ap, qpath);
    while ((a = va_arg(ap, const char *)) != NULL && argc < 31)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    assert_true(fd >= 0);
    pid = zkt_spawn(argv, fd);
    close(fd);
    free(prog);
    assert_true(pid > 0);
    return pid;
}

/* The whole of a file into buf (NUL-terminated; "" if absent). */
static const char *slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;

    if (f != NULL) {
        n = fread(buf, 1, size - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

static int exit_code(pid_t pid, int timeout_ms)
{
    int st;

    assert_int_equal(zkt_wait_pid(pid, timeout_ms, &st), 0);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int64_t queue_len(const char *qpath)
{
    zkr_session_t *s = open_session(10000);
    zkr_workq_t *q;
    int64_t n = -1;

    assert_int_equal(zkr_workq_new(&q, s, qpath, "check", NULL), 0);
    assert_int_equal(zkr_workq_len(q, &n), 0);
    zkr_workq_free(q);
    zkr_session_free(s);
    return n;
}

/* Lines of the store: "<job> <token> <worker> <delivery>". */
struct row {
    char job[32], worker[16];
    long long token;
    int delivery;
};

static int load_store(const char *path, struct row *v, int max)
{
    FILE *f = fopen(path, "r");
    char line[256];
    int n = 0;

    if (f == NULL)
        return 0;
    while (n < max && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%31s %lld %15s %d", v[n].job, &v[n].token,
                   v[n].worker, &v[n].delivery) == 4)
            n++;
    fclose(f);
    return n;
}

enum { JOBS = 20 };

/* Two consumers drain 20 jobs: the store holds each job exactly once,
 * each with its own token, and the queue is empty. */
static void test_two_consumers_do_every_job_once(void **state)
{
    char *dir = zkt_mkdtemp("zkr-exq-"), store[512], out[3][512], buf[16384];
    struct row rows[2 * JOBS];
    int seen[JOBS + 1] = {0}, n, nput;
    pid_t p, c1, c2;
    const char *m;

    (void)state;
    snprintf(store, sizeof(store), "%s/store", dir);
    for (int i = 0; i < 3; i++)
        snprintf(out[i], sizeof(out[i]), "%s/out%d", dir, i);
    p = example(out[0], "/exq/two", "put", "20", NULL);
    assert_int_equal(exit_code(p, 30000), 0);
    for (nput = 0, m = slurp(out[0], buf, sizeof(buf));
         (m = strstr(m, "put job-")) != NULL; m++)
        nput++;
    assert_int_equal(nput, JOBS);
    c1 = example(out[1], "/exq/two", "-f", store, "-i", "c1", "-W", "3000",
                 "work", NULL);
    c2 = example(out[2], "/exq/two", "-f", store, "-i", "c2", "-W", "3000",
                 "work", NULL);
    assert_int_equal(exit_code(c1, 60000), 0);
    assert_int_equal(exit_code(c2, 60000), 0);
    n = load_store(store, rows, 2 * JOBS);
    {
        int by_c1 = 0;
        for (int i = 0; i < n; i++)
            by_c1 += strcmp(rows[i].worker, "c1") == 0;
        print_message("# jobs done by c1: %d, by c2: %d\n", by_c1, n - by_c1);
    }
    assert_int_equal(n, JOBS);
    for (int i = 0; i < n; i++) {
        int j = atoi(rows[i].job + 4);
        assert_int_equal(strncmp(rows[i].job, "job-", 4), 0);
        assert_true(j >= 1 && j <= JOBS);
        seen[j]++;
        assert_int_equal(rows[i].delivery, 1);
        assert_true(rows[i].token > 0);
        for (int k = 0; k < i; k++)
            assert_true(rows[k].token != rows[i].token);
    }
    for (int j = 1; j <= JOBS; j++)
        assert_int_equal(seen[j], 1);
    assert_int_equal(queue_len("/exq/two"), 0);
    zkt_rm_rf(dir);
    free(dir);
}

/* A consumer (session timeout 2 s) takes the one job and is stopped
 * while it works. Its session expires; the job is redelivered to another
 * consumer (delivery 2, a higher token), which writes and acks it. The
 * first one, resumed, has its write refused by the store and its ack
 * refused (ZKR_ESTALE): exit status 3. The store holds the job once, from
 * the second consumer; the queue is empty. */
static void test_paused_consumer_is_fenced_off(void **state)
{
    char *dir = zkt_mkdtemp("zkr-exq-"), store[512], out[3][512], buf[16384];
    struct row rows[4];
    pid_t p, a, b;

    (void)state;
    snprintf(store, sizeof(store), "%s/store", dir);
    for (int i = 0; i < 3; i++)
        snprintf(out[i], sizeof(out[i]), "%s/out%d", dir, i);
    p = example(out[0], "/exq/pause", "put", "1", NULL);
    assert_int_equal(exit_code(p, 30000), 0);
    a = example(out[1], "/exq/pause", "-f", store, "-i", "A", "-n", "1", "-T",
                "2000", "-w", "5000", "work", NULL);
    assert_true(ZKT_WAIT_UNTIL(
        strstr(slurp(out[1], buf, sizeof(buf)), "took job-1") != NULL, 20000));
    kill(a, SIGSTOP);
    b = example(out[2], "/exq/pause", "-f", store, "-i", "B", "-n", "1", "-W",
                "30000", "work", NULL);
    assert_int_equal(exit_code(b, 40000), 0);
    slurp(out[2], buf, sizeof(buf));
    print_message("# B:\n%s", buf);
    assert_non_null(strstr(buf, "took job-1 "));
    assert_non_null(strstr(buf, "delivery=2 "));
    assert_non_null(strstr(buf, "wrote job-1 "));
    assert_non_null(strstr(buf, "acked job-1\n"));
    kill(a, SIGCONT);
    assert_int_equal(exit_code(a, 30000), 3);
    slurp(out[1], buf, sizeof(buf));
    print_message("# A:\n%s", buf);
    assert_non_null(strstr(buf, "REJECTED job-1 "));
    assert_non_null(strstr(buf, "ack of job-1 too late (ZKR_ESTALE)"));
    assert_null(strstr(buf, "acked job-1"));
    assert_int_equal(load_store(store, rows, 4), 1);
    assert_string_equal(rows[0].job, "job-1");
    assert_string_equal(rows[0].worker, "B");
    assert_int_equal(rows[0].delivery, 2);
    assert_int_equal(queue_len("/exq/pause"), 0);
    zkt_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_consumers_do_every_job_once),
        cmocka_unit_test(test_paused_consumer_is_fenced_off),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("example_queue", tests, setup, teardown);
}
