/* examples/lock.c: a worker that takes a zkr lock and applies a fenced
 * update to a shared store.
 *
 *   lock -s HOSTS -p PATH -f STORE [-n ROUNDS] [-i NAME] [-T SESSION_MS]
 *        [-w WORK_MS]
 *
 * Each round: acquire the lock, note its fencing token, "work" for WORK_MS
 * (default 20), then apply "counter += 1" to the store with that token, and
 * release. The store is a text file, one line per accepted update:
 *   <fencing token> <counter value> <worker name> <queue sequence>
 *
 * The store enforces fencing itself: under its own file lock (standing in
 * for a database transaction) it admits a token only if no higher one was
 * accepted before (zkr_fence_admit), and one write per grant. That is what
 * makes a paused holder harmless: if this process is stopped while it
 * works, loses its session and resumes, it still believes for a moment that
 * it holds the lock, but its late write carries an old token and is
 * rejected. zkr reports the loss (a listener prints it with the monotonic
 * time, "LOST at=<ms>").
 *
 * Build: cc lock.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

static const char *name = "worker";

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Applies "counter += 1" if the store admits the token. Returns the new
 * value, or -1 if the token was rejected as stale (*seen = the highest
 * token the store holds). */
static long fenced_increment(const char *store, int64_t token, long seq,
                             int64_t *seen)
{
    FILE *f = fopen(store, "a+");
    char line[512];
    long long last = 0;
    long value = 0, result = -1;
    int64_t highest;

    if (f == NULL) {
        perror(store);
        exit(3);
    }
    flock(fileno(f), LOCK_EX);
    rewind(f);
    while (fgets(line, sizeof(line), f) != NULL)
        sscanf(line, "%lld %ld", &last, &value);
    highest = last;
    /* One write per grant: the token must be above the last one. */
    if (token != highest && zkr_fence_admit(&highest, token) == 0) {
        /* The read-modify-write is not atomic on its own: only the lock
         * keeps two workers from interleaving here. */
        usleep(2000);
        fprintf(f, "%lld %ld %s %ld\n", (long long)token, value + 1, name, seq);
        fflush(f);
        result = value + 1;
    }
    *seen = highest;
    flock(fileno(f), LOCK_UN);
    fclose(f);
    return result;
}

static long node_seq(zkr_lock_t *l)
{
    char node[ZKR_NODE_MAX];
    const char *m;

    if (zkr_lock_node(l, node, sizeof(node)) != 0)
        return -1;
    m = strstr(node, "-lock-");
    return m != NULL ? strtol(m + 6, NULL, 10) : -1;
}

static void on_lock_state(zkr_lock_t *l, zkr_lock_state_t st, void *data)
{
    (void)l;
    (void)data;
    printf("[%s] lock %s at=%lld\n", name, zkr_lock_state_name(st), mono_ms());
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s -s HOSTS -p PATH -f STORE [-n ROUNDS] [-i NAME] "
            "[-T SESSION_MS] [-w WORK_MS]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *hosts = getenv("ZKR_SERVER"), *path = "/zkr-demo/lock";
    const char *store = "store.txt";
    int rounds = 3, timeout = 10000, work = 20, opt, rc = 0, rejected = 0;
    zkr_session_t *s;
    zkr_lock_t *l;

    while ((opt = getopt(argc, argv, "s:p:f:n:i:T:w:")) != -1) {
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
        case 'n':
            rounds = atoi(optarg);
            break;
        case 'i':
            name = optarg;
            break;
        case 'T':
            timeout = atoi(optarg);
            break;
        case 'w':
            work = atoi(optarg);
            break;
        default:
            usage(argv[0]);
        }
    }
    if (hosts == NULL)
        hosts = "127.0.0.1:2181";
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* zkr reports what matters (SUSPENDED, LOST); the client's own log of
     * socket errors would only be noise in the transcript. */
    zoo_set_log_stream(fopen("/dev/null", "w"));

    rc = zkr_session_open(&s, hosts, timeout, NULL);
    if (rc != 0) {
        fprintf(stderr, "%s: connect %s: %s\n", argv[0], hosts,
                zkr_strerror(rc));
        return 2;
    }
    rc = zkr_lock_new(&l, s, path, name, NULL);
    if (rc != 0) {
        fprintf(stderr, "%s: lock %s: %s\n", argv[0], path, zkr_strerror(rc));
        zkr_session_free(s);
        return 2;
    }
    zkr_lock_set_listener(l, on_lock_state, NULL);
    for (int i = 0; i < rounds; i++) {
        int64_t token, seen;
        long value, seq;

        rc = zkr_lock_acquire(l, 60000);
        if (rc != 0) {
            fprintf(stderr, "[%s] acquire: %s\n", name, zkr_strerror(rc));
            break;
        }
        zkr_lock_token(l, &token);
        seq = node_seq(l);
        printf("[%s] granted   seq=%010ld token=%lld (valid %lld ms) "
               "at=%lld\n",
               name, seq, (long long)token, (long long)zkr_lock_valid_ms(l),
               mono_ms());
        usleep((useconds_t)work * 1000); /* the work; we may be paused */
        value = fenced_increment(store, token, seq, &seen);
        if (value < 0) {
            rejected++;
            printf("[%s] REJECTED  token=%lld is stale: the store has "
                   "token=%lld at=%lld\n",
                   name, (long long)token, (long long)seen, mono_ms());
        } else {
            printf("[%s] wrote     counter=%ld with token=%lld\n", name, value,
                   (long long)token);
        }
        rc = zkr_lock_release(l);
        if (rc == ZKR_ELOST)
            printf("[%s] release: the lock had been lost (%s)\n", name,
                   zkr_errname(rc));
        else if (rc != 0)
            fprintf(stderr, "[%s] release: %s\n", name, zkr_strerror(rc));
    }
    zkr_lock_free(l);
    zkr_session_free(s);
    if (rc != 0 && rc != ZKR_ELOST)
        return 1;
    return rejected > 0 ? 3 : 0;
}
