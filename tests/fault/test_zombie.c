/* The paused holder ("zombie"), with separate processes and a real server:
 * a worker holding the lock is stopped (SIGSTOP) past its session timeout;
 * another worker is granted with a higher token and writes; the paused
 * worker resumes still believing it holds the lock, tries its write with
 * the old token, and the store rejects it. zkr must report the loss within
 * a second of the worker resuming. Uses the demo's own worker,
 * examples/lock, so the demo's claim is what is tested. */
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

/* Reads a whole (small) file; "" if missing. Caller frees. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    size_t n = 0;

    assert_non_null(buf);
    if (f != NULL) {
        n = fread(buf, 1, 65535, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* The number after `key` on the first line containing `tag`, or -1. */
static long long field(const char *path, const char *tag, const char *key)
{
    char *text = slurp(path), *line = strstr(text, tag), *k;
    long long v = -1;

    if (line != NULL && (k = strstr(line, key)) != NULL)
        v = atoll(k + strlen(key));
    free(text);
    return v;
}

static int has(const char *path, const char *tag)
{
    char *text = slurp(path);
    int hit = strstr(text, tag) != NULL;
    free(text);
    return hit;
}

static pid_t worker(const char *lock, const char *store, const char *name,
                    const char *session_ms, const char *work_ms,
                    const char *out)
{
    char *prog = zkt_build_path("examples/lock");
    char *argv[] = {prog,
                    "-s",
                    (char *)zkt_server_hosts(server),
                    "-p",
                    (char *)lock,
                    "-f",
                    (char *)store,
                    "-n",
                    "1",
                    "-i",
                    (char *)name,
                    "-T",
                    (char *)session_ms,
                    "-w",
                    (char *)work_ms,
                    NULL};
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;

    assert_true(fd >= 0);
    pid = zkt_spawn(argv, fd);
    close(fd);
    free(prog);
    assert_true(pid > 0);
    return pid;
}

static void one_round(const char *dir, int round)
{
    char lock[64], store[512], zout[512], rout[512];
    long long tz, tr, lost_at, value;
    int64_t t_resume;
    pid_t z, r;
    int st;
    FILE *f;

    snprintf(lock, sizeof(lock), "/z/lock%d", round);
    snprintf(store, sizeof(store), "%s/store%d", dir, round);
    snprintf(zout, sizeof(zout), "%s/zombie%d.out", dir, round);
    snprintf(rout, sizeof(rout), "%s/rescuer%d.out", dir, round);

    /* The zombie: 3 s session, 1 s of work between grant and write. */
    z = worker(lock, store, "zombie", "3000", "1000", zout);
    assert_true(ZKT_WAIT_UNTIL(has(zout, "granted"), 20000));
    assert_int_equal(kill(z, SIGSTOP), 0);
    tz = field(zout, "granted", "token=");
    assert_true(tz > 0);

    /* The rescuer waits in the queue until the server expires the
     * zombie's session, then holds with a higher token and writes. */
    r = worker(lock, store, "rescuer", "10000", "10", rout);
    assert_int_equal(zkt_wait_pid(r, 30000, &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    tr = field(rout, "granted", "token=");
    assert_true(tr > tz);
    assert_true(has(rout, "wrote     counter=1 "));

    /* The zombie resumes: its work is over, it writes at once with its
     * old token, and is rejected; zkr reports the loss promptly. */
    t_resume = zkt_now_ms();
    assert_int_equal(kill(z, SIGCONT), 0);
    assert_int_equal(zkt_wait_pid(z, 20000, &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3); /* its write was rejected */
    assert_true(has(zout, "REJECTED"));
    assert_int_equal(field(zout, "REJECTED", "token="), tz);
    assert_false(has(zout, "wrote"));
    lost_at = field(zout, "lock LOST", "at=");
    assert_true(lost_at >= 0);
    assert_true(lost_at - t_resume < 1000);
    assert_true(has(zout, "release: the lock had been lost"));

    /* The store holds exactly the rescuer's write. */
    f = fopen(store, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lld %lld %*s %*d\n", &tr, &value), 2);
    assert_int_equal(value, 1);
    assert_int_equal(fgetc(f), EOF); /* one line only */
    fclose(f);
    assert_int_equal(tr, field(rout, "granted", "token="));
    assert_true(ZKT_WAIT_UNTIL(children(lock) == 0, 10000));
}

/* Several rounds: the stale write must be rejected every time. */
static void test_paused_holder_is_fenced(void **state)
{
    char *dir = zkt_mkdtemp("zkr-zombie-");

    (void)state;
    for (int round = 0; round < 3; round++)
        one_round(dir, round);
    zkt_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paused_holder_is_fenced),
    };
    zkt_test_filter();
    return cmocka_run_group_tests_name("zombie", tests, setup, teardown);
}
