/* examples/lock.c: a worker that takes a zkr lock and applies a fenced
 * update to a shared store.
 *
 *   lock -s HOSTS -p /zkr-demo/lock -f STORE -n ROUNDS -i NAME
 *
 * The store is a text file, one line per accepted update:
 *   <fencing token> <counter value> <worker name> <queue sequence>
 * The store itself enforces fencing: under its own file lock (standing in
 * for a database transaction) it rejects any token not higher than the last
 * one it accepted. That is the rule that makes a paused, late lock holder
 * harmless (SPEC section 3); the lock alone cannot.
 *
 * Build: cc lock.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <zkr.h>

/* Applies "counter += 1" with fencing. Returns the new value, or -1 if the
 * store rejected the token as stale. */
static long fenced_increment(const char *store, int64_t token, const char *name,
                             long seq)
{
    FILE *f = fopen(store, "a+");
    char line[512];
    long long last_token = -1;
    long value = 0, result;

    if (f == NULL) {
        perror(store);
        exit(3);
    }
    flock(fileno(f), LOCK_EX);
    rewind(f);
    while (fgets(line, sizeof(line), f) != NULL)
        sscanf(line, "%lld %ld", &last_token, &value);
    if (token <= last_token) {
        result = -1; /* a lower or equal token after a higher one: stale */
    } else {
        /* The read-modify-write is deliberately not atomic on its own: only
         * the lock keeps two workers from interleaving here. */
        usleep(2000);
        fprintf(f, "%lld %ld %s %ld\n", (long long)token, value + 1, name, seq);
        fflush(f);
        result = value + 1;
    }
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

int main(int argc, char **argv)
{
    const char *hosts = getenv("ZKR_SERVER"), *path = "/zkr-demo/lock";
    const char *store = "store.txt", *name = NULL;
    int rounds = 3, opt, rc;
    zkr_session_t *s;
    zkr_lock_t *l;

    while ((opt = getopt(argc, argv, "s:p:f:n:i:")) != -1) {
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
        default:
            fprintf(stderr,
                    "usage: %s -s HOSTS -p PATH -f STORE -n ROUNDS "
                    "-i NAME\n",
                    argv[0]);
            return 2;
        }
    }
    if (hosts == NULL)
        hosts = "127.0.0.1:2181";
    setvbuf(stdout, NULL, _IOLBF, 0);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

    rc = zkr_session_open(&s, hosts, 10000, NULL);
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
    if (name == NULL)
        name = "worker";
    for (int i = 0; i < rounds; i++) {
        int64_t token;
        long value, seq;

        rc = zkr_lock_acquire(l, 30000);
        if (rc != 0) {
            fprintf(stderr, "[%s] acquire: %s\n", name, zkr_strerror(rc));
            break;
        }
        zkr_lock_token(l, &token);
        seq = node_seq(l);
        printf("[%s] granted   seq=%010ld token=%lld (valid %lld ms)\n", name,
               seq, (long long)token, (long long)zkr_lock_valid_ms(l));
        value = fenced_increment(store, token, name, seq);
        if (value < 0)
            printf("[%s] REJECTED  token=%lld is stale\n", name,
                   (long long)token);
        else
            printf("[%s] wrote     counter=%ld with token=%lld\n", name, value,
                   (long long)token);
        usleep(20000); /* some work while holding the lock */
        rc = zkr_lock_release(l);
        if (rc != 0)
            fprintf(stderr, "[%s] release: %s\n", name, zkr_strerror(rc));
    }
    zkr_lock_free(l);
    zkr_session_free(s);
    return rc == 0 ? 0 : 1;
}
