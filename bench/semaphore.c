/* bench/semaphore.c: grants per second of a zkr semaphore under
 * contention: K contenders (each its own session, one thread each) loop
 * acquire+release on a semaphore of N permits for D seconds.
 *
 *   bench/semaphore HOSTS [N] [K] [SECONDS]    (defaults 4 16 5)
 *
 * (The limit itself is tested in tests/integration/test_semaphore.c.) */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <zkr.h>

static const char *hosts;
static int permits = 4, seconds = 5;
static long grants;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *contender(void *arg)
{
    zkr_session_t *s;
    zkr_lock_t *l;
    double until;

    (void)arg;
    if (zkr_session_open(&s, hosts, 10000, NULL) != 0 ||
        zkr_semaphore_new(&l, s, "/zkr-bench/sem", permits, "bench", NULL) != 0)
        exit(2);
    until = now_s() + seconds;
    while (now_s() < until) {
        if (zkr_lock_acquire(l, -1) != 0)
            exit(3);
        pthread_mutex_lock(&mu);
        grants++;
        pthread_mutex_unlock(&mu);
        if (zkr_lock_release(l) != 0)
            exit(3);
    }
    zkr_lock_free(l);
    zkr_session_free(s);
    return NULL;
}

int main(int argc, char **argv)
{
    int k = 16;
    pthread_t th[256];
    double t0;

    hosts = argc > 1 ? argv[1] : "127.0.0.1:2181";
    if (argc > 2)
        permits = atoi(argv[2]);
    if (argc > 3)
        k = atoi(argv[3]);
    if (argc > 4)
        seconds = atoi(argv[4]);
    if (k < 1 || k > 256)
        return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    t0 = now_s();
    for (int i = 0; i < k; i++)
        pthread_create(&th[i], NULL, contender, NULL);
    for (int i = 0; i < k; i++)
        pthread_join(th[i], NULL);
    printf("impl=zkr mode=semaphore permits=%d contenders=%d grants=%ld "
           "grants_per_s=%.0f\n",
           permits, k, grants, grants / (now_s() - t0));
    return 0;
}
