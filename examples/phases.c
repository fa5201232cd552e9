/* examples/phases.c: N workers run a job in phases, together. No worker
 * starts a phase before all N have finished the one before and are ready
 * for it; a worker that dies counts as gone, and the others go on.
 *
 *   phases [-s HOSTS] [-p PATH] [-t SECONDS] N ID PHASES
 *
 * For each phase K (1..PHASES) the worker enters the double barrier
 * PATH/phase-K (default PATH /example/phases) for N participants, at
 * most -t SECONDS (default no limit), prints "ID start K T", works for a
 * moment, prints "ID end K T", and leaves: it returns once all have left.
 * T is CLOCK_MONOTONIC in milliseconds, the same clock for every process
 * of the machine. A new path per phase: a phase's "ready" stands until
 * its last participant has left, and must not let the next phase
 * through early.
 *
 * Exit status: 0; 1 on an error; 2 too few workers came within -t.
 *
 * Build: cc phases.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One phase: 0, or the code that ended it. */
static int phase(zkr_session_t *s, const char *path, int n, const char *id,
                 int k, int timeout_ms)
{
    char p[512];
    zkr_dbarrier_t *d = NULL;
    int rc;

    snprintf(p, sizeof(p), "%s/phase-%d", path, k);
    if ((rc = zkr_dbarrier_new(&d, s, p, n, id, NULL)) != 0)
        return rc;
    if ((rc = zkr_dbarrier_enter(d, timeout_ms)) == 0) {
        printf("%s start %d %lld\n", id, k, now_ms());
        fflush(stdout);
        usleep((useconds_t)(100000 + rand() % 200000)); /* the work */
        printf("%s end %d %lld\n", id, k, now_ms());
        fflush(stdout);
        rc = zkr_dbarrier_leave(d, -1);
    }
    zkr_dbarrier_free(d); /* deletes its node if it still stands */
    return rc;
}

int main(int argc, char **argv)
{
    const char *hosts = "127.0.0.1:2181", *path = "/example/phases";
    zkr_session_t *s = NULL;
    long timeout_s = -1;
    int opt, rc = 0, n, phases;

    while ((opt = getopt(argc, argv, "s:p:t:")) != -1) {
        if (opt == 's')
            hosts = optarg;
        else if (opt == 'p')
            path = optarg;
        else if (opt == 't')
            timeout_s = strtol(optarg, NULL, 10);
        else
            return 1;
    }
    if (optind + 3 != argc || (n = atoi(argv[optind])) < 1 ||
        (phases = atoi(argv[optind + 2])) < 1) {
        fprintf(
            stderr,
            "usage: phases [-s HOSTS] [-p PATH] [-t SECONDS] N ID PHASES\n");
        return 1;
    }
    srand((unsigned)getpid());
    if ((rc = zkr_session_open(&s, hosts, 10000, NULL)) != 0) {
        fprintf(stderr, "phases: %s\n", zkr_strerror(rc));
        return 1;
    }
    for (int k = 1; k <= phases && rc == 0; k++)
        rc = phase(s, path, n, argv[optind + 1], k,
                   timeout_s < 0 ? -1 : (int)timeout_s * 1000);
    if (rc != 0)
        fprintf(stderr, "phases: %s: %s\n", path, zkr_strerror(rc));
    zkr_session_free(s);
    return rc == 0 ? 0 : rc == ZKR_ETIMEDOUT ? 2 : 1;
}
