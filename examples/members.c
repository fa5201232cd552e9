/* examples/members.c: workers share a set of shards by group membership.
 * Each worker joins the group PATH as ID and, at every change of the
 * members, takes the shards that are its own: shard K belongs to the
 * member at position K mod N of the view (N members, sorted by node name,
 * the same order in every process). A worker that dies leaves the group
 * when its session ends, and the others take its shards.
 *
 *   members [-s HOSTS] [-p PATH] [-t SECONDS] ID SHARDS
 *
 * Prints "ID view ZXID N: K K K" (its shards) for each view, for -t
 * SECONDS (default: until SIGINT or SIGTERM), then leaves. It waits with
 * poll() on the group's descriptor, as an event loop would.
 *
 * Exit status: 0; 1 on an error.
 *
 * Build: cc members.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zkr.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Prints the shards of the view that are ours: 0, or an error code. */
static int assign(zkr_group_t *g, const char *id, int shards)
{
    zkr_group_member_t *m;
    int n, me = -1, rc;
    int64_t zxid;

    if ((rc = zkr_group_members(g, 0, &m, &n, &zxid)) != 0)
        return rc;
    for (int i = 0; i < n; i++)
        if (m[i].self)
            me = i;
    printf("%s view %lld %d:", id, (long long)zxid, n);
    for (int k = 0; me >= 0 && k < shards; k++)
        if (k % n == me)
            printf(" %d", k);
    printf("\n");
    fflush(stdout);
    zkr_group_members_free(m, n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *hosts = "127.0.0.1:2181", *path = "/example/members", *id;
    zkr_session_t *s = NULL;
    zkr_group_t *g = NULL;
    long timeout_s = -1;
    long long end;
    int opt, rc, shards, fd;
    struct sigaction sa;

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
    if (optind + 2 != argc || (shards = atoi(argv[optind + 1])) < 1) {
        fprintf(stderr,
                "usage: members [-s HOSTS] [-p PATH] [-t SECONDS] ID SHARDS\n");
        return 1;
    }
    id = argv[optind];
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if ((rc = zkr_session_open(&s, hosts, 10000, NULL)) != 0) {
        fprintf(stderr, "members: %s\n", zkr_strerror(rc));
        return 1;
    }
    if ((rc = zkr_group_new(&g, s, path, NULL, NULL, NULL)) != 0 ||
        (rc = zkr_group_join(g, id, NULL, 0, 30000)) != 0 ||
        (fd = zkr_group_fd(g)) < 0) {
        fprintf(stderr, "members: %s: %s\n", path,
                zkr_strerror(rc != 0 ? rc : ZKR_ESYS));
        zkr_group_free(g);
        zkr_session_free(s);
        return 1;
    }
    end = timeout_s < 0 ? -1 : now_ms() + timeout_s * 1000;
    while (!stop && rc == 0 && (end < 0 || now_ms() < end)) {
        struct pollfd p = {fd, POLLIN, 0};
        int wait_ms = end < 0 ? 1000 : (int)(end - now_ms());

        if (poll(&p, 1, wait_ms > 1000 ? 1000 : wait_ms) > 0)
            rc = assign(g, id, shards); /* reading the view clears fd */
    }
    if (rc != 0)
        fprintf(stderr, "members: %s: %s\n", path, zkr_strerror(rc));
    if (rc == 0 && (rc = zkr_group_leave(g, 10000)) != 0)
        fprintf(stderr, "members: leave: %s\n", zkr_strerror(rc));
    zkr_group_free(g);
    zkr_session_free(s);
    return rc == 0 ? 0 : 1;
}
