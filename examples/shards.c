/* examples/shards.c: workers share out numbered shards with an atomic
 * counter, each shard to exactly one worker, and count what they did on a
 * second counter with asynchronous adds.
 *
 *   shards [-s HOSTS] [-p PATH] [-n SHARDS]
 *
 * Claims shards 0, 1, 2, ... from PATH/next (zkr_atomic_add: the value
 * before the add is this worker's shard) until SHARDS (default 10) are
 * given out, prints "shard K" for each one it got, and adds 1 to PATH/done
 * per shard without waiting (zkr_atomic_async), then waits for those adds.
 * Run several at once: every shard is printed by exactly one of them.
 *
 * An add whose answer was lost is never sent twice; when zkr cannot tell
 * whether it applied, it says ZKR_EINDOUBT. A shard number that may have
 * been taken must not be served, and not be claimed again either: this
 * worker reports it (another run can reconcile from the done count).
 *
 * Exit status: 0; 1 on an error; 3 if a shard's claim was in doubt.
 *
 * Build: cc shards.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zkr.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending, failed;

/* On the session's event thread: one asynchronous add ended. */
static void counted(int rc, const zkr_atomic_result_t *r, void *data)
{
    (void)r;
    (void)data;
    pthread_mutex_lock(&mu);
    if (rc != 0) {
        fprintf(stderr, "done count: %s\n", zkr_strerror(rc));
        failed = 1;
    }
    pending--;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    const char *hosts = "127.0.0.1:2181", *path = "/example/shards";
    char next_path[256], done_path[256];
    zkr_session_t *s = NULL;
    zkr_atomic_t *next = NULL, *done = NULL;
    long shards = 10;
    int opt, rc, status = 0;

    while ((opt = getopt(argc, argv, "s:p:n:")) != -1) {
        if (opt == 's')
            hosts = optarg;
        else if (opt == 'p')
            path = optarg;
        else if (opt == 'n')
            shards = strtol(optarg, NULL, 10);
        else
            return 1;
    }
    snprintf(next_path, sizeof(next_path), "%s/next", path);
    snprintf(done_path, sizeof(done_path), "%s/done", path);
    if ((rc = zkr_session_open(&s, hosts, 10000, NULL)) != 0 ||
        (rc = zkr_atomic_new(&next, s, next_path, 0, NULL)) != 0 ||
        (rc = zkr_atomic_new(&done, s, done_path, 0, NULL)) != 0) {
        fprintf(stderr, "shards: %s\n", zkr_strerror(rc));
        return 1;
    }
    for (;;) {
        int64_t after;

        rc = zkr_atomic_add(next, 1, &after);
        if (rc == ZKR_EINDOUBT) {
            /* It may have applied: that shard number may be ours or
             * nobody's. Do not serve it, do not claim again blindly. */
            fprintf(stderr, "shards: a claim is in doubt\n");
            status = 3;
            break;
        }
        if (rc != 0) {
            fprintf(stderr, "shards: %s\n", zkr_strerror(rc));
            status = 1;
            break;
        }
        if (after > shards)
            break; /* all given out (ours is past the end) */
        printf("shard %lld\n", (long long)(after - 1));
        fflush(stdout);
        pthread_mutex_lock(&mu);
        pending++;
        pthread_mutex_unlock(&mu);
        if ((rc = zkr_atomic_async(done, ZKR_ATOMIC_ADD, 1, 0, counted,
                                   NULL)) != 0) {
            fprintf(stderr, "done count: %s\n", zkr_strerror(rc));
            pthread_mutex_lock(&mu);
            pending--;
            failed = 1;
            pthread_mutex_unlock(&mu);
        }
    }
    pthread_mutex_lock(&mu);
    while (pending > 0)
        pthread_cond_wait(&cv, &mu);
    if (failed && status == 0)
        status = 1;
    pthread_mutex_unlock(&mu);
    zkr_atomic_free(done);
    zkr_atomic_free(next);
    zkr_session_free(s);
    return status;
}
