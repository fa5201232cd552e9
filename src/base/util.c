/* Small helpers: time, argument validation, UUIDs, strings, ACLs. */
#define _DEFAULT_SOURCE /* gethostname, getrandom */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ZKR__FAULT_IMPL /* the real allocator, below */
#include <stdatomic.h>

#include "base.h"

/* ------------------------------------------------ fault injection seam */

static atomic_int fault_kinds; /* armed kinds, 0 = inert */
static atomic_long fault_n, fault_points, fault_fired;
static atomic_int fault_persist, fault_zkrc;

void zkr__fault_arm(int kinds, long n, int persist, int zkrc)
{
    atomic_store(&fault_kinds, 0);
    atomic_store(&fault_n, n);
    atomic_store(&fault_points, 0);
    atomic_store(&fault_fired, 0);
    atomic_store(&fault_persist, persist);
    atomic_store(&fault_zkrc, zkrc);
    atomic_store(&fault_kinds, n > 0 ? kinds : 0);
}

long zkr__fault_points(void)
{
    return atomic_load(&fault_points);
}

long zkr__fault_fired(void)
{
    return atomic_load(&fault_fired);
}

int zkr__fault_rc(void)
{
    return atomic_load(&fault_zkrc);
}

__attribute__((weak)) void zkr__fault_fired_at(void)
{
}

int zkr__fault(int kind)
{
    long i, n;

    if ((atomic_load_explicit(&fault_kinds, memory_order_relaxed) & kind) == 0)
        return 0;
    i = atomic_fetch_add(&fault_points, 1) + 1;
    n = atomic_load(&fault_n);
    if (i == n || (i > n && atomic_load(&fault_persist))) {
        atomic_fetch_add(&fault_fired, 1);
        zkr__fault_fired_at();
        return 1;
    }
    return 0;
}

static atomic_int trace_on;
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static char trace_buf[ZKR__TRACE_MAX];
static size_t trace_len;

void zkr__trace_start(void)
{
    pthread_mutex_lock(&trace_mu);
    trace_len = 0;
    trace_buf[0] = '\0';
    atomic_store(&trace_on, 1);
    pthread_mutex_unlock(&trace_mu);
}

void zkr__trace_take(char *out, size_t size)
{
    pthread_mutex_lock(&trace_mu);
    atomic_store(&trace_on, 0);
    if (size > 0) {
        size_t n = trace_len < size - 1 ? trace_len : size - 1;
        memcpy(out, trace_buf, n);
        out[n] = '\0';
    }
    pthread_mutex_unlock(&trace_mu);
}

void zkr__trace_note(const char *what, const char *path)
{
    if (!atomic_load_explicit(&trace_on, memory_order_relaxed))
        return;
    pthread_mutex_lock(&trace_mu);
    if (atomic_load(&trace_on)) {
        size_t room = sizeof(trace_buf) - trace_len;
        int n = snprintf(trace_buf + trace_len, room, "%s %s\n", what,
                         path != NULL ? path : "-");
        if (n > 0 && (size_t)n < room)
            trace_len += (size_t)n;
        else
            trace_buf[trace_len] = '\0'; /* full: keep what fits */
    }
    pthread_mutex_unlock(&trace_mu);
}

int zkr__fault_zk(const char *fn, const char *path)
{
    zkr__trace_note(fn, path);
    return zkr__fault(ZKR__FAULT_ZK);
}

void *zkr__fault_malloc(size_t n)
{
    return zkr__fault(ZKR__FAULT_ALLOC) ? NULL : malloc(n);
}

void *zkr__fault_calloc(size_t n, size_t size)
{
    return zkr__fault(ZKR__FAULT_ALLOC) ? NULL : calloc(n, size);
}

void *zkr__fault_realloc(void *p, size_t n)
{
    return zkr__fault(ZKR__FAULT_ALLOC) ? NULL : realloc(p, n);
}

/* CLOCK_BOOTTIME: unlike CLOCK_MONOTONIC it keeps counting while the
 * machine is suspended, as the server's clock does; a lease measured on it
 * runs out during a suspend instead of resuming where it stopped. */
int64_t zkr__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int valid_utf8(const char *s);

/* A recipe path is absolute, is not the root, has no trailing slash, no
 * empty, "." or ".." component, no control character, is valid UTF-8
 * (ZooKeeper's paths are Java strings: other bytes would be replaced, and
 * two paths could name one node), is not under /zookeeper (the server's
 * own tree), and fits in ZKR_PATH_MAX bytes. ZooKeeper would reject most
 * of these itself; checking first gives one documented code and no round
 * trip. */
int zkr__check_path(const char *path)
{
    size_t len, i, comp = 0;

    if (path == NULL || path[0] != '/')
        return ZBADARGUMENTS;
    len = strlen(path);
    if (len < 2 || len > ZKR_PATH_MAX || path[len - 1] == '/')
        return ZBADARGUMENTS;
    for (i = 1; i <= len; i++) {
        unsigned char ch = (unsigned char)path[i];
        if (ch == '/' || ch == '\0') {
            const char *c = path + i - comp;
            if (comp == 0 || (comp == 1 && c[0] == '.') ||
                (comp == 2 && c[0] == '.' && c[1] == '.'))
                return ZBADARGUMENTS;
            comp = 0;
        } else if (ch < 0x20 || ch == 0x7f) {
            return ZBADARGUMENTS;
        } else {
            comp++;
        }
    }
    if (!valid_utf8(path) || (strncmp(path, "/zookeeper", 10) == 0 &&
                              (path[10] == '\0' || path[10] == '/')))
        return ZBADARGUMENTS;
    return 0;
}

/* Is the string valid UTF-8 (shortest forms, no surrogates, at most
 * U+10FFFF)? */
static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p) {
        int extra;
        uint32_t cp;
        if (*p < 0x80) {
            p++;
            continue;
        } else if ((*p & 0xe0) == 0xc0) {
            extra = 1;
            cp = *p & 0x1f;
        } else if ((*p & 0xf0) == 0xe0) {
            extra = 2;
            cp = *p & 0x0f;
        } else if ((*p & 0xf8) == 0xf0) {
            extra = 3;
            cp = *p & 0x07;
        } else {
            return 0;
        }
        p++;
        for (int k = 0; k < extra; k++, p++) {
            if ((*p & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (*p & 0x3f);
        }
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
            (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
    }
    return 1;
}

/* Identifiers are node data: 1..ZKR_ID_MAX bytes of valid UTF-8. */
int zkr__check_id(const char *id)
{
    size_t len;

    if (id == NULL)
        return ZBADARGUMENTS;
    len = strlen(id);
    if (len == 0 || len > ZKR_ID_MAX || !valid_utf8(id))
        return ZBADARGUMENTS;
    return 0;
}

void zkr__uuid(char out[37])
{
    unsigned char b[16];
    size_t got = 0;

    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n <= 0) {
            /* getrandom cannot fail on Linux >= 3.17 for 16 bytes; keep a
             * weak fallback rather than abort. */
            for (; got < sizeof(b); got++)
                b[got] = (unsigned char)(rand() ^ (zkr__now_ms() >> 3));
            break;
        }
        got += (size_t)n;
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

char *zkr__strdup(const char *s)
{
    size_t n;
    char *d;

    if (s == NULL)
        return NULL;
    n = strlen(s) + 1;
    d = zkr__fault_malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

char *zkr__join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = zkr__fault_malloc(a + b + 2);

    if (p == NULL)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

int zkr__acl_copy(struct ACL_vector *dst, const struct ACL_vector *src)
{
    dst->count = 0;
    dst->data = NULL;
    if (src->count <= 0)
        return ZBADARGUMENTS;
    dst->data = zkr__fault_calloc((size_t)src->count, sizeof(*dst->data));
    if (dst->data == NULL)
        return ZKR_ENOMEM;
    for (int i = 0; i < src->count; i++) {
        const struct ACL *a = &src->data[i];
        if (a->id.scheme == NULL || a->id.id == NULL) {
            zkr__acl_free(dst);
            return ZBADARGUMENTS;
        }
        dst->data[i].perms = a->perms;
        dst->data[i].id.scheme = zkr__strdup(a->id.scheme);
        dst->data[i].id.id = zkr__strdup(a->id.id);
        dst->count = i + 1;
        if (!dst->data[i].id.scheme || !dst->data[i].id.id) {
            zkr__acl_free(dst);
            return ZKR_ENOMEM;
        }
    }
    return 0;
}

void zkr__acl_free(struct ACL_vector *v)
{
    for (int i = 0; i < v->count; i++) {
        free(v->data[i].id.scheme);
        free(v->data[i].id.id);
    }
    free(v->data);
    v->data = NULL;
    v->count = 0;
}

int zkr__default_id(char *buf, size_t len)
{
    char host[256];

    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(buf, len, "%s:%ld", host, (long)getpid());
    return 0;
}

unsigned zkr_version(void)
{
    return ZKR_VERSION_NUMBER;
}

const char *zkr_version_string(void)
{
    return ZKR_VERSION_STRING;
}

/* 1 ms to 5 min. */
const uint64_t zkr__time_bounds[ZKR__N_TIME] = {
    1000,   2500,    5000,    10000,   25000,    50000,    100000,   250000,
    500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000, 300000000,
};

void zkr__hist_add(zkr__hist_t *h, const uint64_t *bounds, int nb, uint64_t v)
{
    int i = 0;

    while (i < nb && v > bounds[i])
        i++;
    h->counts[i]++;
    h->n++;
    h->sum += v;
}
