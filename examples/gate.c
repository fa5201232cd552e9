/* examples/gate.c: a maintenance gate. An operator closes it for a while;
 * workers pass only while it is open.
 *
 *   gate [-s HOSTS] [-p PATH] close SECONDS
 *   gate [-s HOSTS] [-p PATH] [-t SECONDS] pass
 *
 * close sets the barrier PATH (default /example/gate), prints "closed",
 * keeps it SECONDS, clears it and prints "opened". pass waits until the
 * barrier does not stand (at most -t SECONDS, default no limit) and
 * prints "passed".
 *
 * The barrier is ephemeral (zkr_barrier_new() flags 0): if the closing
 * process dies (kill -9), its session expires and the gate opens by
 * itself, instead of stopping every worker until someone notices.
 *
 * Exit status: 0; 1 on an error; 2 pass: still closed after -t.
 *
 * Build: cc gate.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zkr.h>

int main(int argc, char **argv)
{
    const char *hosts = "127.0.0.1:2181", *path = "/example/gate";
    zkr_session_t *s = NULL;
    zkr_barrier_t *gate = NULL;
    long timeout_s = -1, hold_s = 0;
    int opt, rc, status = 0;

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
    if (optind < argc && strcmp(argv[optind], "close") == 0 &&
        optind + 2 == argc) {
        hold_s = strtol(argv[optind + 1], NULL, 10);
    } else if (!(optind + 1 == argc && strcmp(argv[optind], "pass") == 0)) {
        fprintf(stderr, "usage: gate [-s HOSTS] [-p PATH] close SECONDS\n"
                        "       gate [-s HOSTS] [-p PATH] [-t SECONDS] "
                        "pass\n");
        return 1;
    }
    if ((rc = zkr_session_open(&s, hosts, 10000, NULL)) != 0 ||
        (rc = zkr_barrier_new(&gate, s, path, 0, NULL)) != 0) {
        fprintf(stderr, "gate: %s\n", zkr_strerror(rc));
        zkr_session_free(s);
        return 1;
    }
    if (strcmp(argv[optind], "close") == 0) {
        if ((rc = zkr_barrier_set(gate, NULL)) == 0) {
            printf("closed\n");
            fflush(stdout);
            sleep((unsigned)hold_s);
            rc = zkr_barrier_clear(gate, NULL);
        }
        if (rc == 0)
            printf("opened\n");
    } else {
        rc = zkr_barrier_wait(gate, timeout_s < 0 ? -1 : (int)timeout_s * 1000);
        if (rc == 0)
            printf("passed\n");
        else if (rc == ZKR_ETIMEDOUT)
            status = 2;
    }
    if (rc != 0 && status == 0) {
        fprintf(stderr, "gate: %s: %s\n", path, zkr_strerror(rc));
        status = 1;
    }
    zkr_barrier_free(gate);
    zkr_session_free(s);
    return status;
}
