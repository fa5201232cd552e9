/* Sequence numbers of contender names, for the test drivers (tests/bin/chaos,
 * tests/bin/foreign): written here from ZooKeeper's rule, not taken from
 * src/base/names.c. A sequential node's name ends with its parent's signed
 * 32-bit counter printed "%010d": "0000000005", "-000000005",
 * "2147483647", "-2147483648"; contender markers end with '-' or '_'
 * ("-lock-", "__lock__", "-latch-"), so a '-' right after one is a sign.
 * Names created by one counter, fewer than 2^31 apart, are in creation
 * order by serial-number arithmetic. */
#ifndef ZKR_TESTS_SEQ_H
#define ZKR_TESTS_SEQ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The sequence at the end of name, or -1 when it has none. */
static inline int zkt_name_seq(const char *name, int32_t *seq)
{
    size_t len = strlen(name);
    const char *p;
    long long v;

    if (len < 11)
        return -1;
    p = name + len - 10;
    for (const char *d = *p == '-' ? p + 1 : p; *d; d++)
        if (*d < '0' || *d > '9')
            return -1;
    v = strtoll(p, NULL, 10);
    if (*p != '-' && p[-1] == '-' && len >= 12 &&
        (p[-2] == '-' || p[-2] == '_'))
        v = -v; /* "-2147483648": eleven characters */
    if (v < INT32_MIN || v > INT32_MAX)
        return -1;
    *seq = (int32_t)v;
    return 0;
}

/* Whether sequence a was created before b (serial-number order). */
static inline int zkt_seq_before(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a - (uint32_t)b) < 0;
}

#endif
