/* bench/uncontended.c: the cost of an uncontended zkr acquire+release
 * against the floor the server allows, a plain zoo_create + zoo_delete of
 * an ephemeral sequential node, on the same server in the same run.
 *
 *   bench/uncontended HOSTS [ITERATIONS]
 *
 * Prints microseconds per operation (median of 5 rounds) and the ratio.
 * zkr's acquire needs two round trips (create2, then getChildren to check
 * nobody is before us) and release one (delete); the floor is two. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <zkr.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double raw_round(zhandle_t *zh, int n)
{
    char path[256];
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        if (zoo_create(zh, "/zkr-bench/raw/_c_x-lock-", "bench", 5,
                       &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path,
                       sizeof(path)) != ZOK ||
            zoo_delete(zh, path, -1) != ZOK) {
            fprintf(stderr, "raw create/delete failed\n");
            exit(1);
        }
    }
    return (now_us() - t0) / n;
}

static double zkr_round(zkr_lock_t *l, int n)
{
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        int rc = zkr_lock_acquire(l, -1);
        if (rc == 0)
            rc = zkr_lock_release(l);
        if (rc != 0) {
            fprintf(stderr, "zkr: %s\n", zkr_strerror(rc));
            exit(1);
        }
    }
    return (now_us() - t0) / n;
}

int main(int argc, char **argv)
{
    const char *hosts = argc > 1 ? argv[1] : "127.0.0.1:2181";
    int n = argc > 2 ? atoi(argv[2]) : 500;
    double raw[5], lib[5];
    zkr_session_t *s;
    zkr_lock_t *l;
    zhandle_t *zh;

    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    if (zkr_session_open(&s, hosts, 10000, NULL) != 0 ||
        zkr_lock_new(&l, s, "/zkr-bench/zkr", "bench", NULL) != 0) {
        fprintf(stderr, "cannot connect to %s\n", hosts);
        return 2;
    }
    zh = zkr_session_handle(s);
    zoo_create(zh, "/zkr-bench", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, "/zkr-bench/raw", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    raw_round(zh, n / 10 + 1); /* warm up both paths */
    zkr_round(l, n / 10 + 1);
    for (int r = 0; r < 5; r++) { /* interleaved: same conditions */
        raw[r] = raw_round(zh, n);
        lib[r] = zkr_round(l, n);
    }
    qsort(raw, 5, sizeof(double), cmp);
    qsort(lib, 5, sizeof(double), cmp);
    printf("uncontended, %d ops x 5 rounds, median us/op:\n", n);
    printf("  zoo_create+zoo_delete        %8.1f\n", raw[2]);
    printf("  zkr_lock_acquire+release     %8.1f\n", lib[2]);
    printf("  ratio zkr/raw                %8.2f\n", lib[2] / raw[2]);
    zkr_lock_free(l);
    zkr_session_free(s);
    return 0;
}
