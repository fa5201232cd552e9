/* examples/batch.c: batch jobs from many workers, at most N at once, first
 * come first served, through a zkr counting semaphore.
 *
 *   batch -s HOSTS -p PATH -c PERMITS -j JOBS [-i NAME] [-d JOB_MS]
 *
 * Each job takes one permit (FIFO), "runs" for JOB_MS and gives the permit
 * back. The worker prints when each job starts and ends, with the permit's
 * fencing token and the monotonic time, so several workers' transcripts
 * show at most PERMITS jobs at once, started in the order they queued.
 *
 * Build: cc batch.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    const char *hosts = getenv("ZKR_SERVER"), *path = "/zkr-demo/batch";
    const char *name = "worker";
    int permits = 2, jobs = 3, job_ms = 200, opt, rc = 0;
    zkr_session_t *s;
    zkr_lock_t *permit;

    while ((opt = getopt(argc, argv, "s:p:c:j:i:d:")) != -1) {
        switch (opt) {
        case 's':
            hosts = optarg;
            break;
        case 'p':
            path = optarg;
            break;
        case 'c':
            permits = atoi(optarg);
            break;
        case 'j':
            jobs = atoi(optarg);
            break;
        case 'i':
            name = optarg;
            break;
        case 'd':
            job_ms = atoi(optarg);
            break;
        default:
            fprintf(stderr,
                    "usage: %s -s HOSTS -p PATH -c PERMITS -j JOBS "
                    "[-i NAME] [-d JOB_MS]\n",
                    argv[0]);
            return 2;
        }
    }
    if (hosts == NULL)
        hosts = "127.0.0.1:2181";
    setvbuf(stdout, NULL, _IOLBF, 0);
    zoo_set_log_stream(fopen("/dev/null", "w"));
    if ((rc = zkr_session_open(&s, hosts, 10000, NULL)) != 0 ||
        (rc = zkr_semaphore_new(&permit, s, path, permits, name, NULL)) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], zkr_strerror(rc));
        return 2;
    }
    for (int j = 1; j <= jobs && rc == 0; j++) {
        int64_t token;

        if ((rc = zkr_lock_acquire(permit, 60000)) != 0) {
            fprintf(stderr, "[%s] job %d: %s\n", name, j, zkr_strerror(rc));
            break;
        }
        zkr_lock_token(permit, &token);
        printf("START %lld %s job %d token %lld\n", mono_ms(), name, j,
               (long long)token);
        usleep((useconds_t)job_ms * 1000); /* the job */
        printf("END   %lld %s job %d token %lld\n", mono_ms(), name, j,
               (long long)token);
        rc = zkr_lock_release(permit);
    }
    zkr_lock_free(permit);
    zkr_session_free(s);
    return rc == 0 ? 0 : 1;
}
