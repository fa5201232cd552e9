/* zkq: a tiny ZooKeeper query tool for the shell-level tests (the real
 * zkCli.sh starts a JVM per call).
 *
 *   zkq HOSTS ls PATH      children, one per line, sorted by name
 *   zkq HOSTS get PATH     the node's data
 *   zkq HOSTS czxid PATH   the node's czxid (decimal)
 *   zkq HOSTS exists PATH  exit 0 if it exists, 1 if not
 *
 * Exit 0, 1 (no node), or 2 (error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    struct String_vector v = {0, NULL};
    struct Stat st;
    zhandle_t *zh;
    char buf[65536];
    int len = sizeof(buf), rc = ZOK, status = 0;

    if (argc != 4) {
        fprintf(stderr, "usage: zkq HOSTS ls|get|czxid|exists PATH\n");
        return 2;
    }
    if ((zh = zkt_connect(argv[1], 10000)) == NULL) {
        fprintf(stderr, "zkq: cannot connect to %s\n", argv[1]);
        return 2;
    }
    if (strcmp(argv[2], "ls") == 0) {
        rc = zoo_get_children(zh, argv[3], 0, &v);
        if (rc == ZOK) {
            qsort(v.data, (size_t)v.count, sizeof(char *), cmp);
            for (int i = 0; i < v.count; i++)
                printf("%s\n", v.data[i]);
            deallocate_String_vector(&v);
        }
    } else if (strcmp(argv[2], "get") == 0) {
        rc = zoo_get(zh, argv[3], 0, buf, &len, &st);
        if (rc == ZOK && len > 0)
            fwrite(buf, 1, (size_t)len, stdout);
    } else if (strcmp(argv[2], "czxid") == 0) {
        rc = zoo_exists(zh, argv[3], 0, &st);
        if (rc == ZOK)
            printf("%lld\n", (long long)st.czxid);
    } else if (strcmp(argv[2], "exists") == 0) {
        rc = zoo_exists(zh, argv[3], 0, &st);
    } else {
        fprintf(stderr, "zkq: unknown command %s\n", argv[2]);
        status = 2;
    }
    if (rc == ZNONODE)
        status = 1;
    else if (rc != ZOK) {
        fprintf(stderr, "zkq: %s %s: %s\n", argv[2], argv[3], zerror(rc));
        status = 2;
    }
    zookeeper_close(zh);
    return status;
}
