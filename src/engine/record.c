/* Lock-delay records (docs/design/lock-delay.md): the text a
 * release, or a delayed contender, writes into the queue's directory, so
 * that the next waiter can tell a clean release from a death.
 *
 * The directory's data is written by zkr, but anyone with WRITE on the
 * directory may write anything there. The parser is therefore strict
 * about what it accepts and tolerant only where a future version needs
 * room (unknown keys are skipped): whatever it does not fully understand
 * is "no record", which the engine always takes for a death, the safe side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

static const char *const kind_names[] = {
    [ZKR__REC_RELEASE] = "zkr-release",
    [ZKR__REC_LEFT] = "zkr-delay-left",
    [ZKR__REC_CLOSED] = "zkr-closed",
};

/* A decimal number of at most 18 digits (no sign): fits int64_t. */
static int parse_num(const char *s, size_t n, int64_t *out)
{
    int64_t v = 0;

    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* A word fits dst (with its NUL) and has no byte the format excludes. */
static int copy_word(char *dst, size_t size, const char *s, size_t n)
{
    if (n == 0 || n >= size)
        return -1;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

/* One key=value token. Returns 0, or -1 if the record is invalid. Bit
 * (1 << k) of *seen marks known key k, so a duplicate is refused: two
 * values for one key could be read one way by us and another by a later
 * version. */
static int parse_pair(const char *t, size_t n, zkr__record_t *r, unsigned *seen)
{
    static const char *const keys[] = {"czxid", "node", "remaining_ms", "until",
                                       "cause"};
    const char *eq = memchr(t, '=', n);
    size_t klen, vlen;
    const char *v;
    int k;

    if (eq == NULL || eq == t)
        return -1;
    klen = (size_t)(eq - t);
    v = eq + 1;
    vlen = n - klen - 1;
    for (k = 0; k < 5; k++)
        if (strlen(keys[k]) == klen && memcmp(keys[k], t, klen) == 0)
            break;
    if (k == 5)
        return 0; /* a later version's key: skipped */
    if (*seen & (1u << k))
        return -1;
    *seen |= 1u << k;
    switch (k) {
    case 0:
        return parse_num(v, vlen, &r->czxid) != 0 || r->czxid <= 0 ? -1 : 0;
    case 1:
        return copy_word(r->node, sizeof(r->node), v, vlen);
    case 2:
        return parse_num(v, vlen, &r->remaining_ms);
    case 3:
        return parse_num(v, vlen, &r->until_ms);
    default:
        return copy_word(r->cause, sizeof(r->cause), v, vlen);
    }
}

static int parse_record(const char *data, int len, zkr__record_t *r)
{
    unsigned seen = 0;
    int64_t version;
    size_t n, i = 0, tok = 0;
    int kind = ZKR__REC_NONE;

    memset(r, 0, sizeof(*r));
    if (data == NULL || len <= 0 || len > ZKR__RECORD_MAX)
        return ZKR__REC_NONE;
    n = (size_t)len;
    /* Printable ASCII and spaces only; one trailing newline is allowed
     * (a record written by hand with a shell). */
    if (data[n - 1] == '\n')
        n--;
    for (size_t j = 0; j < n; j++)
        if (data[j] < ' ' || data[j] > '~')
            return ZKR__REC_NONE;
    while (i < n) {
        size_t start, tlen;

        while (i < n && data[i] == ' ')
            i++;
        if (i == n)
            break;
        start = i;
        while (i < n && data[i] != ' ')
            i++;
        tlen = i - start;
        if (tok == 0) {
            for (int k = ZKR__REC_RELEASE; k <= ZKR__REC_CLOSED; k++)
                if (strlen(kind_names[k]) == tlen &&
                    memcmp(kind_names[k], data + start, tlen) == 0)
                    kind = k;
            if (kind == ZKR__REC_NONE)
                return ZKR__REC_NONE;
        } else if (tok == 1) {
            if (parse_num(data + start, tlen, &version) != 0 || version < 1 ||
                version > 1000000)
                return ZKR__REC_NONE;
            r->version = (int)version;
        } else if (parse_pair(data + start, tlen, r, &seen) != 0) {
            return ZKR__REC_NONE;
        }
        tok++;
    }
    /* Required: the version, the czxid, and what the kind is about. */
    if (tok < 2 || !(seen & 1u) ||
        (kind == ZKR__REC_LEFT && !(seen & (1u << 2))) ||
        (kind == ZKR__REC_CLOSED && !(seen & (1u << 3))))
        return ZKR__REC_NONE;
    r->kind = kind;
    return kind;
}

int zkr__record_parse(const char *data, int len, zkr__record_t *r)
{
    int kind = parse_record(data, len, r);

    if (kind == ZKR__REC_NONE) /* nothing half-read is left for a caller */
        memset(r, 0, sizeof(*r));
    return kind;
}

int zkr__record_format(char *buf, size_t size, const zkr__record_t *r)
{
    int n;

    if (r->kind < ZKR__REC_RELEASE || r->kind > ZKR__REC_CLOSED ||
        r->czxid <= 0 || strchr(r->node, ' ') != NULL ||
        strchr(r->cause, ' ') != NULL)
        return -1;
    n = snprintf(buf, size, "%s 1 czxid=%lld", kind_names[r->kind],
                 (long long)r->czxid);
    if (n > 0 && r->node[0] != '\0')
        n += snprintf(buf + n, (size_t)n < size ? size - (size_t)n : 0,
                      " node=%s", r->node);
    if (n > 0 && r->kind == ZKR__REC_LEFT)
        n += snprintf(buf + n, (size_t)n < size ? size - (size_t)n : 0,
                      " remaining_ms=%lld", (long long)r->remaining_ms);
    if (n > 0 && r->kind == ZKR__REC_CLOSED)
        n += snprintf(buf + n, (size_t)n < size ? size - (size_t)n : 0,
                      " until=%lld", (long long)r->until_ms);
    if (n > 0 && r->cause[0] != '\0')
        n += snprintf(buf + n, (size_t)n < size ? size - (size_t)n : 0,
                      " cause=%s", r->cause);
    if (n <= 0 || (size_t)n >= size || n > ZKR__RECORD_MAX)
        return -1;
    return n;
}

/* Is r a zkr-closed record written by a contender whose node is still in
 * dir? */
static int closed_by_live(zhandle_t *zh, const char *dir,
                          const zkr__record_t *r)
{
    struct Stat st;
    char *node;
    int rc;

    if (r->node[0] == '\0' || strchr(r->node, '/') != NULL)
        return 0;
    if ((node = zkr__join(dir, r->node)) == NULL)
        return ZKR_ENOMEM;
    rc = zoo_exists(zh, node, 0, &st);
    free(node);
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return rc;
    return st.czxid == r->czxid;
}

int zkr_delay_closed(zkr_session_t *s, const char *path, int64_t *until_ms,
                     char *cause, size_t len)
{
    char buf[ZKR__RECORD_MAX + 1];
    int n = (int)sizeof(buf), rc;
    struct timespec now;
    zkr__record_t r;
    zhandle_t *zh;

    if (until_ms == NULL || (cause != NULL && len == 0))
        return ZBADARGUMENTS;
    *until_ms = 0;
    if (cause != NULL)
        cause[0] = '\0';
    if ((rc = zkr__read_begin(s, path, &zh)) != 0)
        return rc;
    rc = zoo_get(zh, path, 0, buf, &n, NULL);
    if (rc == ZNONODE)
        rc = 0;
    else if (rc == ZOK && zkr__record_parse(buf, n, &r) == ZKR__REC_CLOSED &&
             (rc = closed_by_live(zh, path, &r)) == 1) {
        clock_gettime(CLOCK_REALTIME, &now);
        rc = r.until_ms > (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    } else if (rc == ZOK) {
        rc = 0;
    }
    zkr__zh_put(s);
    if (rc == 1) {
        *until_ms = r.until_ms;
        if (cause != NULL)
            snprintf(cause, len, "%s", r.cause);
    }
    return rc;
}
