/* rereview20: zkr_election_free() on one thread while zkr_election_leave()
 * on another waits for run()'s leader function. free() waits for run() to
 * return, but not for the leave(): both wake when run() returns; free
 * disposes of the handle while leave() goes on into resign(e) with it.
 * Run under valgrind: Invalid read/write in zkr_election_leave / resign. */
#define _DEFAULT_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "zkr.h"
#include "../tests/harness.h"

static volatile int started;

static int leader(zkr_election_t *e, void *data)
{
    struct pollfd p = {zkr_election_fd(e), POLLIN, 0};
    (void)data;
    started = 1;
    while (poll(&p, 1, 1000) == 0)
        ;
    usleep(300000); /* stops its work: 300 ms */
    return 0;
}

static void *runner(void *arg)
{
    int rc = zkr_election_run(arg, leader, NULL, 0);
    fprintf(stderr, "run -> %d\n", rc);
    return NULL;
}

static void *leaver(void *arg)
{
    int rc = zkr_election_leave(arg);
    fprintf(stderr, "leave -> %d\n", rc);
    return NULL;
}

int main(int argc, char **argv)
{
    zkt_server_t *srv;
    zkr_session_t *s;
    int n = argc > 1 ? atoi(argv[1]) : 5;

    if (zkt_server_start(&srv) != 0)
        return 3;
    if (zkr_session_open(&s, zkt_server_hosts(srv), 10000, NULL) != 0)
        return 3;
    for (int i = 0; i < n; i++) {
        zkr_election_t *e;
        pthread_t a, b;

        if (zkr_election_new(&e, s, "/rr20/free", NULL, NULL,
                             ZKR_POLICY_SUSPEND) != 0)
            return 3;
        started = 0;
        pthread_create(&a, NULL, runner, e);
        while (!started)
            usleep(1000);
        pthread_create(&b, NULL, leaver, e);
        usleep(100000); /* leave() waits for the function */
        zkr_election_free(e); /* waits for run(), not for leave() */
        fprintf(stderr, "free returned (%d)\n", i);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    }
    zkr_session_free(s);
    zkt_server_stop(srv);
    return 0;
}
