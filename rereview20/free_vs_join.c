/* rereview20: zkr_election_free() while zkr_election_join() on another
 * thread is between marking the candidate joined and starting its acquire
 * (e->joining > 0). free() does not wait for `joining` (leave() does):
 * the join's zkr__acquire() then runs on a freed handle. The gap is
 * widened with the library's own test hook ZKR_TEST_ELECTION_DELAY_US. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "zkr.h"
#include "../tests/harness.h"

static void *joiner(void *arg)
{
    int rc = zkr_election_join(arg);
    fprintf(stderr, "join -> %d\n", rc);
    return NULL;
}

int main(void)
{
    zkt_server_t *srv;
    zkr_session_t *s;
    zkr_election_t *e;
    pthread_t b;

    setenv("ZKR_TEST_ELECTION_DELAY_US", "300000", 1);
    if (zkt_server_start(&srv) != 0)
        return 3;
    if (zkr_session_open(&s, zkt_server_hosts(srv), 10000, NULL) != 0)
        return 3;
    if (zkr_election_new(&e, s, "/rr20/join", NULL, NULL,
                         ZKR_POLICY_SUSPEND) != 0)
        return 3;
    pthread_create(&b, NULL, joiner, e);
    usleep(100000); /* join() is in its gap */
    zkr_election_free(e);
    fprintf(stderr, "free returned\n");
    pthread_join(b, NULL);
    sleep(1);
    zkr_session_free(s);
    zkt_server_stop(srv);
    return 0;
}
