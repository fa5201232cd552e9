/* examples/queue.c: a producer and a consumer of a zkr work queue; the
 * consumer does fenced work.
 *
 *   queue [-s HOSTS] [-p PATH] put N
 *   queue [-s HOSTS] [-p PATH] -f STORE [-i NAME] [-n MAX] [-W WAIT_MS]
 *         [-w WORK_MS] [-T SESSION_MS] work
 *
 * put: puts N jobs, "job-1" to "job-N", and prints each one's id.
 *
 * work: takes jobs until MAX (default: no limit) are done, or until none
 * arrives within WAIT_MS (default 2000). For each job: note its claim's
 * fencing token, "work" for WORK_MS (default 20), write the job's result
 * to the store with that token, then ack. The store is a text file, one
 * line per accepted write:
 *   <job> <fencing token> <worker name> <delivery>
 *
 * The store enforces fencing itself, per job: under its own file lock
 * (standing in for a database transaction) it admits a write for a job
 * only if its token is above every token it accepted for that job before
 * (zkr_fence_admit: one write per claim). A job is redelivered when its
 * consumer dies or is paused past its session: the new claim's token is
 * higher, so the paused consumer's late write is refused, and its ack
 * returns ZKR_ESTALE and changes nothing. The store must also accept the
 * same job twice with rising tokens (a consumer may die after writing and
 * before acking: delivery is at least once, completion at most once); the
 * last write is the job's result.
 *
 * Exit status: 0; 1 on an error; 3 if a write was refused or an ack came
 * too late (ZKR_ESTALE).
 *
 * Build: cc queue.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <zkr.h>

static const char *name = "worker";

/* Writes "<job> <token> <name> <delivery>" if the store admits the token
 * for that job: 0 written; -1 refused (*seen = the job's highest token). */
static int fenced_write(const char *store, const char *job, int64_t token,
                        int delivery, int64_t *seen)
{
    FILE *f = fopen(store, "a+");
    char line[512], other[256];
    long long t;
    int64_t highest = 0;
    int rc = -1;

    if (f == NULL) {
        perror(store);
        exit(1);
    }
    flock(fileno(f), LOCK_EX);
    rewind(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%255s %lld", other, &t) == 2 &&
            strcmp(other, job) == 0 && t > highest)
            highest = t;
    /* One write per claim: the token must be above the job's last one. */
    if (token != highest && zkr_fence_admit(&highest, token) == 0) {
        fprintf(f, "%s %lld %s %d\n", job, (long long)token, name, delivery);
        fflush(f);
        rc = 0;
    }
    *seen = highest;
    flock(fileno(f), LOCK_UN);
    fclose(f);
    return rc;
}

static int put(zkr_workq_t *q, int n)
{
    char job[32], id[ZKR_WORKQ_ID_MAX];
    int rc;

    for (int i = 1; i <= n; i++) {
        snprintf(job, sizeof(job), "job-%d", i);
        rc = zkr_workq_put(q, job, strlen(job), ZKR_WORKQ_LEVEL_DEFAULT, id,
                           sizeof(id));
        if (rc != 0) {
            fprintf(stderr, "put %s: %s\n", job, zkr_strerror(rc));
            return 1;
        }
        printf("put %s id=%s\n", job, id);
    }
    return 0;
}

static int work(zkr_workq_t *q, const char *store, int max, int wait_ms,
                int work_ms)
{
    int done = 0, late = 0, rc;

    while (max <= 0 || done < max) {
        zkr_item_t *it;
        char job[256];
        const void *data;
        size_t len;
        int64_t token, seen;

        rc = zkr_workq_take(q, wait_ms, &it);
        if (rc == ZKR_ETIMEDOUT) {
            printf("[%s] no job within %d ms\n", name, wait_ms);
            break;
        }
        if (rc != 0) {
            fprintf(stderr, "[%s] take: %s\n", name, zkr_strerror(rc));
            return 1;
        }
        data = zkr_item_data(it, &len);
        snprintf(job, sizeof(job), "%.*s", (int)len, (const char *)data);
        if (zkr_item_token(it, &token) != 0) {
            /* Lost between the take and now: someone else will do it. */
            printf("[%s] lost %s before starting\n", name, job);
            zkr_item_free(it);
            continue;
        }
        printf("[%s] took %s id=%s delivery=%d token=%lld\n", name, job,
               zkr_item_id(it), zkr_item_deliveries(it), (long long)token);
        usleep((useconds_t)work_ms * 1000); /* the work; we may be paused */
        if (fenced_write(store, job, token, zkr_item_deliveries(it), &seen) !=
            0) {
            late = 1;
            printf("[%s] REJECTED %s token=%lld: the store has token=%lld\n",
                   name, job, (long long)token, (long long)seen);
        } else {
            printf("[%s] wrote %s token=%lld\n", name, job, (long long)token);
        }
        rc = zkr_item_ack(it);
        if (rc == 0) {
            printf("[%s] acked %s\n", name, job);
        } else if (rc == ZKR_ESTALE) {
            late = 1;
            printf("[%s] ack of %s too late (%s): the job went to another "
                   "consumer\n",
                   name, job, zkr_errname(rc));
        } else {
            fprintf(stderr, "[%s] ack %s: %s\n", name, job, zkr_strerror(rc));
            zkr_item_free(it); /* gives the claim back */
            return 1;
        }
        zkr_item_free(it);
        done++;
    }
    return late ? 3 : 0;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [-s HOSTS] [-p PATH] put N\n"
            "       %s [-s HOSTS] [-p PATH] -f STORE [-i NAME] [-n MAX] "
            "[-W WAIT_MS] [-w WORK_MS] [-T SESSION_MS] work\n",
            argv0, argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *hosts = getenv("ZKR_SERVER"), *path = "/zkr-demo/queue";
    const char *store = NULL;
    int max = 0, wait_ms = 2000, work_ms = 20, timeout = 10000, opt, rc;
    zkr_session_t *s;
    zkr_workq_t *q;

    while ((opt = getopt(argc, argv, "s:p:f:i:n:W:w:T:")) != -1) {
        switch (opt) {
        case 's':
            hosts = optarg;
            break;
        case 'p':
            path = optarg;
            break;
        case 'f':
            store = optarg;
            break;
        case 'i':
            name = optarg;
            break;
        case 'n':
            max = atoi(optarg);
            break;
        case 'W':
            wait_ms = atoi(optarg);
            break;
        case 'w':
            work_ms = atoi(optarg);
            break;
        case 'T':
            timeout = atoi(optarg);
            break;
        default:
            usage(argv[0]);
        }
    }
    if (optind >= argc ||
        !((strcmp(argv[optind], "put") == 0 && optind + 2 == argc) ||
          (strcmp(argv[optind], "work") == 0 && optind + 1 == argc &&
           store != NULL)))
        usage(argv[0]);
    if (hosts == NULL)
        hosts = "127.0.0.1:2181";
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* zkr reports what matters; the client's own log of socket errors
     * would only be noise in the transcript. */
    zoo_set_log_stream(fopen("/dev/null", "w"));

    rc = zkr_session_open(&s, hosts, timeout, NULL);
    if (rc != 0) {
        fprintf(stderr, "%s: connect %s: %s\n", argv[0], hosts,
                zkr_strerror(rc));
        return 1;
    }
    rc = zkr_workq_new(&q, s, path, name, NULL);
    if (rc != 0) {
        fprintf(stderr, "%s: queue %s: %s\n", argv[0], path, zkr_strerror(rc));
        zkr_session_free(s);
        return 1;
    }
    if (strcmp(argv[optind], "put") == 0)
        rc = put(q, atoi(argv[optind + 1]));
    else
        rc = work(q, store, max, wait_ms, work_ms);
    zkr_workq_free(q);
    zkr_session_free(s);
    return rc;
}
