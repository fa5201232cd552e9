/* The end-of-run snapshot of a work queue for the history checker
 * (tests/bin/zkr-check): read with a plain ZooKeeper client from the layout
 * the protocol fixes (docs/design/workq.md), not through libzkr, so that
 * what the checker holds the library to is not what the library says of
 * itself. Appends to the history, as the driver (session 0):
 *
 *   snap-begin - 0
 *   snap-item KEY DELIVERIES CLAIM_TOKEN SID|-   each item still queued
 *   snap-dead KEY CARRY 0 NAME                   each dead letter
 *   snap-end - COUNT
 *
 * KEY is the item's data (the producers' payload; blanks made '_', "-"
 * when empty). DELIVERIES = the carry in its name + the claims made under it
 * (each one child created and deleted: its child version, halved, rounded up).
 * A claim is the item's child: its czxid and owner session (hex). */
#ifndef ZKR_TESTS_WORKQ_SNAP_H
#define ZKR_TESTS_WORKQ_SNAP_H

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

static inline void zkt_snap_line(FILE *f, const char *what, const char *key,
                                 long long b, long long c, const char *d)
{
    struct timespec ts;

    if (f == NULL)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(f, "%lld %ld 0 %s %s %lld %lld %s\n",
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)getpid(),
            what, key, b, c, d);
}

/* dir/name into buf (512 bytes); ZBADARGUMENTS if it does not fit. */
static inline int zkt_snap_join(char *buf, const char *dir, const char *name)
{
    int n = snprintf(buf, 512, "%s/%s", dir, name);

    return n < 0 || n >= 512 ? ZBADARGUMENTS : ZOK;
}

/* The data of path as a key (at most 63 bytes); its stat in st. */
static inline int zkt_snap_key(zhandle_t *zh, const char *path, char *key,
                               struct Stat *st)
{
    char buf[64];
    int len = (int)sizeof(buf) - 1;
    int rc = zoo_get(zh, path, 0, buf, &len, st);

    if (rc != ZOK)
        return rc;
    if (len <= 0) {
        strcpy(key, "-");
        return ZOK;
    }
    for (int i = 0; i < len; i++)
        key[i] = isgraph((unsigned char)buf[i]) ? buf[i] : '_';
    key[len] = '\0';
    return ZOK;
}

/* The carry in an item's name "i-<carry>-<uuid>-<seq>", or -1 if the name
 * is not an item's. */
static inline long zkt_snap_carry(const char *name)
{
    char *end;
    long carry;

    if (strncmp(name, "i-", 2) != 0 || !isdigit((unsigned char)name[2]))
        return -1;
    carry = strtol(name + 2, &end, 10);
    return *end == '-' ? carry : -1;
}

/* One item (or dead letter) at path named name; claimed items counted in
 * *nclaimed. */
static inline int zkt_snap_item(zhandle_t *zh, FILE *f, const char *path,
                                const char *name, int dead, int *nclaimed)
{
    struct String_vector claims = {0, NULL};
    struct Stat st, cst;
    char key[64], cpath[512], sid[24] = "-";
    long long token = 0;
    long carry = zkt_snap_carry(name);
    int rc;

    if (carry < 0)
        return ZOK; /* not an item: not ours to judge */
    if ((rc = zkt_snap_key(zh, path, key, &st)) != ZOK)
        return rc;
    if (dead) {
        /* A dead letter's data version is its own: the count it left
         * with is not kept, only the carry of its name. */
        zkt_snap_line(f, "snap-dead", key, carry, 0, name);
        return ZOK;
    }
    if ((rc = zoo_get_children(zh, path, 0, &claims)) != ZOK)
        return rc;
    for (int i = 0; i < claims.count; i++) {
        if (zkt_snap_join(cpath, path, claims.data[i]) != ZOK ||
            zoo_exists(zh, cpath, 0, &cst) != ZOK)
            continue;
        /* The first claim (lowest czxid) is the one that counts. */
        if (token == 0 || cst.czxid < token) {
            token = cst.czxid;
            snprintf(sid, sizeof(sid), "%" PRIx64,
                     (uint64_t)cst.ephemeralOwner);
        }
    }
    deallocate_String_vector(&claims);
    *nclaimed += token != 0;
    zkt_snap_line(f, "snap-item", key, carry + (st.cversion + 1) / 2, token,
                  sid);
    return ZOK;
}

/* Reads the queue at path (dead letters at path/dead) and appends its
 * snapshot to f (NULL: nothing written). Returns the number of items and
 * dead letters, and the claimed items in *nclaimed; or -1 (then no
 * snap-end: the checker does not judge a partial snapshot). */
static inline int zkt_workq_walk(zhandle_t *zh, const char *path, FILE *f,
                                 int *nclaimed)
{
    struct String_vector top = {0, NULL};
    char p1[512], p2[512], p3[512];
    int n = 0, rc;

    *nclaimed = 0;
    zkt_snap_line(f, "snap-begin", "-", 0, 0, "-");
    rc = zoo_get_children(zh, path, 0, &top);
    if (rc == ZNONODE)
        rc = ZOK; /* never used: nothing queued */
    for (int i = 0; rc == ZOK && i < top.count; i++) {
        struct String_vector buckets = {0, NULL};
        int dead = strcmp(top.data[i], "dead") == 0;

        if (!dead &&
            !(top.data[i][0] == 'q' && isdigit((unsigned char)top.data[i][1])))
            continue;
        if ((rc = zkt_snap_join(p1, path, top.data[i])) != ZOK ||
            (rc = zoo_get_children(zh, p1, 0, &buckets)) != ZOK)
            break;
        for (int j = 0; rc == ZOK && j < buckets.count; j++) {
            struct String_vector its = {0, NULL};

            if ((rc = zkt_snap_join(p2, p1, buckets.data[j])) != ZOK)
                break;
            if (dead) {
                rc = zkt_snap_item(zh, f, p2, buckets.data[j], 1, nclaimed);
                n += rc == ZOK && zkt_snap_carry(buckets.data[j]) >= 0;
                continue;
            }
            if ((rc = zoo_get_children(zh, p2, 0, &its)) != ZOK)
                break;
            for (int k = 0; rc == ZOK && k < its.count; k++) {
                if ((rc = zkt_snap_join(p3, p2, its.data[k])) != ZOK)
                    break;
                rc = zkt_snap_item(zh, f, p3, its.data[k], 0, nclaimed);
                n += rc == ZOK && zkt_snap_carry(its.data[k]) >= 0;
            }
            deallocate_String_vector(&its);
        }
        deallocate_String_vector(&buckets);
    }
    deallocate_String_vector(&top);
    if (rc == ZOK)
        zkt_snap_line(f, "snap-end", "-", n, 0, "-");
    return rc == ZOK ? n : -1;
}

/* The snapshot appended to the history file hist: as zkt_workq_walk(). */
static inline int zkt_workq_snapshot(zhandle_t *zh, const char *path,
                                     const char *hist)
{
    FILE *f = fopen(hist, "a");
    int n, claimed;

    if (f == NULL)
        return -1;
    n = zkt_workq_walk(zh, path, f, &claimed);
    fclose(f);
    return n;
}

/* Items claimed now, or -1. */
static inline int zkt_workq_claimed(zhandle_t *zh, const char *path)
{
    int claimed;

    return zkt_workq_walk(zh, path, NULL, &claimed) < 0 ? -1 : claimed;
}

#endif /* ZKR_TESTS_WORKQ_SNAP_H */
