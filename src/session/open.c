/* What zkr_session_open() checks, waits for and says when it fails: the
 * server list's form, why no handle or no connection came (each address
 * tried and logged), the credentials proved accepted, the chroot's
 * existence. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* Each entry of the comma-separated list is HOST:PORT (HOST nonempty, the
 * port 1..65535 in decimal digits). 0 or ZKR_EBADADDR. */
int zkr__check_hosts(const char *hosts)
{
    const char *p = hosts;

    for (;;) {
        const char *end = strchr(p, ',');
        const char *colon = NULL;
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        long port = 0;
        size_t digits = 0;

        for (size_t i = 0; i < n; i++)
            if (p[i] == ':')
                colon = p + i;
        if (colon == NULL || colon == p)
            return ZKR_EBADADDR;
        for (const char *d = colon + 1; d < p + n; d++, digits++) {
            if (*d < '0' || *d > '9' || digits >= 5)
                return ZKR_EBADADDR;
            port = port * 10 + (*d - '0');
        }
        if (digits == 0 || port < 1 || port > 65535)
            return ZKR_EBADADDR;
        if (end == NULL)
            return 0;
        p = end + 1;
    }
}

/* The entries of a server list checked by zkr__check_hosts(), one at a time:
 * host (without the brackets of an IPv6 address), port, and the entry as
 * it reads in a message (brackets kept). */
typedef struct {
    char *buf, *save;
    const char *host, *port;
    char shown[300];
    int bad; /* the walk stopped at an entry without a port */
} hosts_iter_t;

/* 0 (it->buf to free with hosts_end), or ZKR_ENOMEM. */
static int hosts_begin(hosts_iter_t *it, const char *hosts)
{
    it->save = NULL;
    it->bad = 0;
    it->buf = zkr__strdup(hosts);
    return it->buf != NULL ? 0 : ZKR_ENOMEM;
}

/* The next entry: 1, or 0 at the end. */
static int hosts_next(hosts_iter_t *it)
{
    char *entry = strtok_r(it->save == NULL ? it->buf : NULL, ",", &it->save);
    char *colon, *host;

    if (entry == NULL)
        return 0;
    if ((colon = strrchr(entry, ':')) == NULL) {
        it->bad = 1; /* zkr__check_hosts() admits none */
        return 0;
    }
    host = entry;
    *colon = '\0';
    if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
        host++;
        colon[-1] = '\0';
    }
    it->host = host;
    it->port = colon + 1;
    snprintf(it->shown, sizeof(it->shown),
             strchr(host, ':') != NULL ? "[%s]:%s" : "%s:%s", host, it->port);
    return 1;
}

static void hosts_end(hosts_iter_t *it)
{
    free(it->buf);
    it->buf = NULL;
}

/* The client could not start: ZKR_ERESOLVE (logged) if a host of the
 * list does not resolve, else ZSYSTEMERROR. */
int zkr__why_no_handle(zkr_session_t *s, const char *hosts)
{
    hosts_iter_t it;
    int rc = ZSYSTEMERROR;

    if (hosts_begin(&it, hosts) != 0)
        return ZKR_ENOMEM;
    while (rc != ZKR_ERESOLVE && hosts_next(&it)) {
        struct addrinfo hints = {0}, *res = NULL;
        int g;

        hints.ai_socktype = SOCK_STREAM;
        g = getaddrinfo(it.host, it.port, &hints, &res);
        if (res != NULL)
            freeaddrinfo(res);
        if (g != 0) {
            zkr__log(s, ZKR_LOG_ERROR, "cannot resolve %s: %s", it.shown,
                     g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
            rc = ZKR_ERESOLVE;
        }
    }
    hosts_end(&it);
    return rc;
}

/* No connection within the connect timeout: ZKR_EREFUSED (each address
 * logged) if every address of the list refuses a TCP connection now (an
 * answer, not a silence: nothing listens there), else ZKR_ETIMEDOUT. The
 * probes run at once; an address that neither accepts nor refuses within
 * PROBE_MS counts as not refused. */
#define PROBE_MS 1000
#define PROBE_MAX 64
int zkr__why_not_connected(zkr_session_t *s, const char *hosts)
{
    hosts_iter_t it;
    struct pollfd fds[PROBE_MAX];
    char names[PROBE_MAX][sizeof(it.shown)];
    int n = 0, refused = 0, other = 0;
    int64_t deadline = zkr__now_ms() + PROBE_MS;

    if (hosts_begin(&it, hosts) != 0)
        return ZKR_ETIMEDOUT;
    while (!other && hosts_next(&it)) {
        struct addrinfo hints = {0}, *res = NULL, *ai;

        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(it.host, it.port, &hints, &res) != 0) {
            other = 1;
            break;
        }
        for (ai = res; ai != NULL && !other; ai = ai->ai_next) {
            int fd;
            if (n == PROBE_MAX ||
                (fd = socket(ai->ai_family,
                             SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) <
                    0) {
                other = 1;
                break;
            }
            memcpy(names[n], it.shown, sizeof(names[n]));
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
                (errno != EINPROGRESS && errno != ECONNREFUSED)) {
                close(fd);
                other = 1;
            } else if (errno == ECONNREFUSED) {
                close(fd);
                refused++;
                zkr__log(s, ZKR_LOG_ERROR, "%s refused the connection",
                         names[n]);
            } else {
                fds[n].fd = fd;
                fds[n].events = POLLOUT;
                fds[n].revents = 0;
                n++;
            }
        }
        freeaddrinfo(res);
    }
    other |= it.bad;
    hosts_end(&it);
    /* The connects under way: each must fail with ECONNREFUSED. */
    for (int done = 0; !other && done < n;) {
        int64_t left = deadline - zkr__now_ms();
        int r = left > 0 ? poll(fds, (nfds_t)n, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            other = 1;
            break;
        }
        for (int i = 0; i < n; i++) {
            int err = 0;
            socklen_t len = sizeof(err);
            if (fds[i].fd < 0 || fds[i].revents == 0)
                continue;
            if (getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
                err != ECONNREFUSED) {
                other = 1;
            } else {
                refused++;
                zkr__log(s, ZKR_LOG_ERROR, "%s refused the connection",
                         names[i]);
            }
            close(fds[i].fd);
            fds[i].fd = -1;
            done++;
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    return !other && refused > 0 ? ZKR_EREFUSED : ZKR_ETIMEDOUT;
}

/* The waiting open's code once connected, refused or past its deadline
 * (mutex held): connected at least once is 0. */
int zkr__open_rc(const zkr_session_t *s)
{
    if (s->auth_failed)
        return ZAUTHFAILED;
    if (s->state == ZKR_STATE_CONNECTED || s->state == ZKR_STATE_SUSPENDED ||
        s->state == ZKR_STATE_RECONNECTED)
        return 0;
    return ZKR_ETIMEDOUT;
}

/* LOST, and no new session to come (mutex held). */
static int lost_for_good(const zkr_session_t *s)
{
    return s->state == ZKR_STATE_LOST && s->no_reconnect;
}

/* Just connected with a digest: connected is not enough, the server
 * answers the credentials after the connection is established, and the
 * client's completion of zoo_add_auth() cannot tell (conn.c, auth_done).
 * The client sends the credentials on each connection before any request,
 * and the server answers a connection's packets in order and closes it
 * at a refusal: an answer to a read on that connection proves them
 * accepted (0); a refusal fails the read with ZAUTHFAILED and makes the
 * session LOST (auth_failed). A connection lost first: the read again on
 * the next one, until the deadline (then zkr__open_rc()). */
int zkr__auth_accepted(zkr_session_t *s, int64_t deadline)
{
    zhandle_t *zh;
    struct Stat st;
    int zrc = ZCONNECTIONLOSS, rc = -1;

    while (rc == -1) {
        if (zkr__zh_get(s, &zh) == 0) {
            zrc = zoo_exists(zh, "/", 0, &st);
            zkr__zh_put(s);
        }
        if (zrc == ZOK || zrc == ZNONODE)
            return 0;
        if (zrc == ZAUTHFAILED)
            return ZAUTHFAILED;
        pthread_mutex_lock(&s->mu);
        /* The session's event of the failure (a lost connection) may not
         * have come yet: a short pause, then a new connection awaited. */
        zkr__wait(s, NULL,
                  deadline >= 0 && deadline < zkr__now_ms() + 50
                      ? deadline
                      : zkr__now_ms() + 50);
        while (!s->connected && !s->auth_failed && !lost_for_good(s) &&
               zkr__wait(s, NULL, deadline) == 0)
            ;
        if (s->auth_failed || lost_for_good(s) ||
            (deadline >= 0 && zkr__now_ms() >= deadline))
            rc = zkr__open_rc(s);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

/* Just connected with a chroot: ZKR_ENOCHROOT (logged) if the server has
 * no such node, so that the first request does not fail with ZNONODE
 * instead. Any other answer (a connection lost meanwhile) is left to the
 * requests to come, as without a chroot. */
int zkr__chroot_missing(zkr_session_t *s, const char *chroot)
{
    zhandle_t *zh = NULL;
    struct Stat st;
    int zrc;

    if (zkr__zh_get(s, &zh) != 0)
        return 0;
    zrc = zoo_exists(zh, "/", 0, &st); /* "/" is the chroot */
    zkr__zh_put(s);
    if (zrc != ZNONODE)
        return 0;
    zkr__log_no_chroot(s, chroot, "");
    return ZKR_ENOCHROOT;
}

/* The client's form of the server list, chroot appended: an IPv6 entry
 * "[ADDR]:PORT" becomes "ADDR:PORT" (the client splits an entry at its
 * last colon and does not know brackets). */
char *zkr__build_hosts(const char *hosts, const char *chroot)
{
    size_t a = strlen(hosts), b = chroot ? strlen(chroot) : 0, n = 0;
    char *h = malloc(a + b + 1);

    if (h == NULL)
        return NULL;
    for (const char *p = hosts; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *close = memchr(p, ']', len);

        if (p[0] == '[' && close != NULL && close + 1 < p + len &&
            close[1] == ':') {
            memcpy(h + n, p + 1, (size_t)(close - p - 1));
            n += (size_t)(close - p - 1);
            memcpy(h + n, close + 1, (size_t)(p + len - close - 1));
            n += (size_t)(p + len - close - 1);
        } else {
            memcpy(h + n, p, len);
            n += len;
        }
        p += len;
        if (*p == ',')
            h[n++] = *p++;
    }
    if (chroot != NULL)
        memcpy(h + n, chroot, b);
    h[n + b] = '\0';
    return h;
}
