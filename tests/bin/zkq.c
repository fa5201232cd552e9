/* zkq: a tiny ZooKeeper query tool for the shell-level tests (the real
 * zkCli.sh starts a JVM per call).
 *
 *   zkq HOSTS ls PATH      children, one per line, sorted by name
 *   zkq HOSTS get PATH     the node's data
 *   zkq HOSTS czxid PATH   the node's czxid (decimal)
 *   zkq HOSTS exists PATH  exit 0 if it exists, 1 if not
 *   zkq HOSTS acl PATH     the ACL, one "scheme:id:perms" (decimal) a line
 *   zkq HOSTS set PATH     replaces the data with stdin (anonymously)
 *   zkq HOSTS create PATH  creates a persistent node with the open ACL
 *   zkq HOSTS create-nowrite PATH
 *                          ... whose ACL lets anyone read it, create and
 *                          delete children, but nobody set its data
 *   zkq HOSTS create-private PATH
 *                          ... whose ACL gives every right to its creator
 *                          alone (with $ZKQ_AUTH: that digest), none to
 *                          anyone else
 *   zkq HOSTS delete PATH  deletes the node (anonymously)
 *   zkq HOSTS fill PATH N  creates N persistent sequential lock contenders
 *                          (PATH/_c_<zero uuid>-lock-<seq>, data "filler"),
 *                          pipelined: a queue of thousands in a second
 *
 * With $ZKQ_AUTH (USER:PASSWORD), the session adds that digest first.
 * Exit 0, 1 (no node), or 2 (error). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Completions of fill: counted under a lock, the first error kept. */
static pthread_mutex_t fill_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fill_cv = PTHREAD_COND_INITIALIZER;
static int fill_left, fill_rc = ZOK;

static void fill_done(int rc, const char *name, const void *data)
{
    (void)name;
    (void)data;
    pthread_mutex_lock(&fill_mu);
    if (rc != ZOK && fill_rc == ZOK)
        fill_rc = rc;
    if (--fill_left == 0)
        pthread_cond_signal(&fill_cv);
    pthread_mutex_unlock(&fill_mu);
}

static int fill(zhandle_t *zh, const char *path, int n)
{
    char node[1200];
    int rc = ZOK;

    snprintf(node, sizeof(node),
             "%s/_c_00000000-0000-0000-0000-000000000000-lock-", path);
    pthread_mutex_lock(&fill_mu);
    fill_left = n;
    pthread_mutex_unlock(&fill_mu);
    for (int i = 0; i < n; i++) {
        rc = zoo_acreate(zh, node, "filler", 6, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_PERSISTENT_SEQUENTIAL, fill_done, NULL);
        if (rc != ZOK) {
            fill_done(rc, NULL, NULL);
            for (int j = i + 1; j < n; j++)
                fill_done(rc, NULL, NULL);
            break;
        }
    }
    pthread_mutex_lock(&fill_mu);
    while (fill_left > 0)
        pthread_cond_wait(&fill_cv, &fill_mu);
    rc = fill_rc;
    pthread_mutex_unlock(&fill_mu);
    return rc;
}

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

    if (argc != 4 && !(argc == 5 && strcmp(argv[2], "fill") == 0)) {
        fprintf(stderr, "usage: zkq HOSTS ls|get|czxid|exists|acl|set|create|"
                        "create-nowrite|create-private|delete "
                        "PATH\n       zkq HOSTS fill PATH N\n");
        return 2;
    }
    if ((zh = zkt_connect(argv[1], 10000)) == NULL) {
        fprintf(stderr, "zkq: cannot connect to %s\n", argv[1]);
        return 2;
    }
    if (getenv("ZKQ_AUTH") != NULL) /* later requests are ordered after it */
        zoo_add_auth(zh, "digest", getenv("ZKQ_AUTH"),
                     (int)strlen(getenv("ZKQ_AUTH")), NULL, NULL);
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
    } else if (strcmp(argv[2], "acl") == 0) {
        struct ACL_vector acl = {0, NULL};
        rc = zoo_get_acl(zh, argv[3], &acl, &st);
        for (int i = 0; rc == ZOK && i < acl.count; i++)
            printf("%s:%s:%d\n", acl.data[i].id.scheme, acl.data[i].id.id,
                   acl.data[i].perms);
        deallocate_ACL_vector(&acl);
    } else if (strcmp(argv[2], "set") == 0) {
        len = (int)fread(buf, 1, sizeof(buf), stdin);
        rc = zoo_set(zh, argv[3], buf, len, -1);
    } else if (strcmp(argv[2], "create") == 0) {
        rc =
            zoo_create(zh, argv[3], NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    } else if (strcmp(argv[2], "create-nowrite") == 0) {
        struct ACL no_write[] = {
            {ZOO_PERM_READ | ZOO_PERM_CREATE | ZOO_PERM_DELETE,
             ZOO_ANYONE_ID_UNSAFE}};
        struct ACL_vector acl = {1, no_write};
        rc = zoo_create(zh, argv[3], NULL, -1, &acl, 0, NULL, 0);
    } else if (strcmp(argv[2], "create-private") == 0) {
        rc =
            zoo_create(zh, argv[3], NULL, -1, &ZOO_CREATOR_ALL_ACL, 0, NULL, 0);
    } else if (strcmp(argv[2], "delete") == 0) {
        rc = zoo_delete(zh, argv[3], -1);
    } else if (strcmp(argv[2], "fill") == 0) {
        rc = fill(zh, argv[3], atoi(argv[4]));
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
