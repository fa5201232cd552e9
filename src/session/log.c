/* Per-session logging (issue 14): zkr's own messages and those of the
 * session's ZooKeeper handle go to the session's sink, filtered by its
 * level. Nothing process-wide is set.
 *
 * The client's per-handle callback (zookeeper_init2) receives only the
 * formatted message, no context. So each owned session takes one of a
 * fixed set of trampolines, each a distinct function that knows its slot;
 * the slot names the session. A session keeps its slot from open to free
 * (its handles are all closed, and their threads joined, before the slot
 * is given back), so a trampoline never sees a freed session. When every
 * slot is taken, the extra sessions' handles get a shared callback that
 * applies the default (standard error, warnings and errors). */
#define _DEFAULT_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "session.h"

static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static zkr_session_t *slots[ZKR__LOG_SLOTS];

static const char *const level_names[] = {"", "ERROR", "WARN", "INFO", "DEBUG"};

static void emit(zkr_session_t *s, zkr_log_level_t level, const char *msg)
{
    zkr_log_fn fn = s != NULL ? s->log_fn : NULL;
    int max = s != NULL ? s->log_level : ZKR_LOG_DEFAULT;

    if (max == ZKR_LOG_DEFAULT)
        max = ZKR_LOG_WARN;
    if ((int)level > max || level < ZKR_LOG_ERROR)
        return;
    if (fn != NULL)
        fn(s, level, msg, s->log_data);
    else
        fprintf(stderr, "zkr: %s: %s\n", level_names[level], msg);
}

/* Keeps msg as the last error of s (zkr_session_last_error()). */
static void keep_error(zkr_session_t *s, const char *msg)
{
    pthread_mutex_lock(&s->log_mu);
    snprintf(s->last_error, sizeof(s->last_error), "%s", msg);
    pthread_mutex_unlock(&s->log_mu);
}

/* Is a message of s at level neither delivered nor kept? */
static int unwanted(const zkr_session_t *s, zkr_log_level_t level, int keep)
{
    return s != NULL && s->log_level == ZKR_LOG_NONE && !keep &&
           level != ZKR_LOG_ERROR;
}

static void log_v(zkr_session_t *s, zkr_log_level_t level, int keep,
                  const char *fmt, va_list ap)
{
    char buf[512];

    if (unwanted(s, level, keep))
        return;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    if (s != NULL && (keep || level == ZKR_LOG_ERROR))
        keep_error(s, buf);
    emit(s, level, buf);
}

void zkr__log(zkr_session_t *s, zkr_log_level_t level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_v(s, level, 0, fmt, ap);
    va_end(ap);
}

void zkr__log_error(zkr_session_t *s, zkr_log_level_t level, const char *fmt,
                    ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_v(s, level, 1, fmt, ap);
    va_end(ap);
}

size_t zkr_session_last_error(zkr_session_t *s, char *buf, size_t len)
{
    int n = 0;

    if (s == NULL) {
        if (buf != NULL && len > 0)
            buf[0] = '\0';
        return 0;
    }
    pthread_mutex_lock(&s->log_mu);
    if (buf != NULL && len > 0)
        n = snprintf(buf, len, "%s", s->last_error);
    else
        n = (int)strlen(s->last_error);
    pthread_mutex_unlock(&s->log_mu);
    return n > 0 ? (size_t)n : 0;
}

/* Messages of the client that report a failed attempt to reach a server
 * (zookeeper 3.8, zookeeper.c), and those that come with every failed
 * round of attempts without being one. */
static const char *const conn_failures[] = {
    "zk retcode=", "getaddrinfo:", "timed out (exceeded timeout by",
    "socket() call failed", "connect() call failed"};
static const char *const conn_noise[] = {
    "Delaying connection after exhaustively trying all servers",
    "failed to send PING request"};

static int matches(const char *msg, const char *const *pats, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(msg, pats[i]) != NULL)
            return 1;
    return 0;
}

/* What to do with one connection error of s: deliver it at `level` (the
 * first of an outage), or hold it back to DEBUG and maybe deliver a
 * summary (into `summary`, nonempty then). */
static zkr_log_level_t conn_error(zkr_session_t *s, zkr_log_level_t level,
                                  const char *msg, int attempt, char *summary,
                                  size_t len)
{
    int64_t now = zkr__now_ms();

    summary[0] = '\0';
    pthread_mutex_lock(&s->log_mu);
    if (!s->log_failing && !attempt) {
        /* Only a failed attempt begins an outage. */
    } else if (!s->log_failing) {
        s->log_failing = 1;
        s->log_tries = 1;
        s->log_fail_since = now;
        s->log_summary_at = now;
        s->log_quiet = 0;
        snprintf(s->log_last, sizeof(s->log_last), "%s", msg);
    } else {
        if (attempt) {
            s->log_tries++;
            snprintf(s->log_last, sizeof(s->log_last), "%s", msg);
        }
        s->log_quiet++;
        if (now - s->log_summary_at >= ZKR__LOG_SUMMARY_MS) {
            snprintf(summary, len,
                     "still cannot reach %s after %lu attempts in %lld s "
                     "(%lu messages at DEBUG), last error: %s",
                     s->hosts, s->log_tries,
                     (long long)((now - s->log_fail_since) / 1000),
                     s->log_quiet, s->log_last);
            s->log_summary_at = now;
            s->log_quiet = 0;
        }
        level = ZKR_LOG_DEBUG;
    }
    pthread_mutex_unlock(&s->log_mu);
    return level;
}

static void deliver(zkr_session_t *s, zkr_log_level_t level, const char *msg,
                    int attempt)
{
    char summary[768];

    if (s == NULL) {
        emit(s, level, msg); /* no session, no summary (beyond the slots) */
        return;
    }
    if (attempt || level == ZKR_LOG_ERROR)
        keep_error(s, msg);
    if (s->log_level == ZKR_LOG_NONE)
        return;
    level = conn_error(s, level, msg, attempt, summary, sizeof(summary));
    emit(s, level, msg);
    if (summary[0] != '\0')
        emit(s, ZKR_LOG_WARN, summary);
}

void zkr__log_conn_error(zkr_session_t *s, zkr_log_level_t level,
                         const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    deliver(s, level, buf, 1);
}

void zkr__log_reachable(zkr_session_t *s)
{
    unsigned long tries;
    int64_t since;
    int failing;

    pthread_mutex_lock(&s->log_mu);
    failing = s->log_failing;
    tries = s->log_tries;
    since = s->log_fail_since;
    s->log_failing = 0;
    s->log_tries = 0;
    s->log_quiet = 0;
    pthread_mutex_unlock(&s->log_mu);
    if (failing)
        zkr__log(s, ZKR_LOG_WARN,
                 "reached %s again after %lu failed attempts in %lld s",
                 s->hosts, tries, (long long)((zkr__now_ms() - since) / 1000));
}

/* The client formats "time:pid(0xthread):ZOO_LEVEL@function@line: text"
 * (zookeeper 3.8, log.c). We keep "function@line: text". Its errors
 * about reaching the servers are summarised (deliver). */
static void from_client(zkr_session_t *s, const char *msg)
{
    static const struct {
        const char *tag;
        zkr_log_level_t level;
    } tags[] = {{":ZOO_ERROR@", ZKR_LOG_ERROR},
                {":ZOO_WARN@", ZKR_LOG_WARN},
                {":ZOO_INFO@", ZKR_LOG_INFO},
                {":ZOO_DEBUG@", ZKR_LOG_DEBUG}};
    const size_t nf = sizeof(conn_failures) / sizeof(conn_failures[0]);
    const size_t nn = sizeof(conn_noise) / sizeof(conn_noise[0]);

    for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
        const char *at = strstr(msg, tags[i].tag);
        if (at != NULL && unwanted(s, tags[i].level, 0))
            return; /* an ERROR is kept even so */
        if (at != NULL) {
            /* Some of the client's messages end in a newline: drop it. */
            char buf[1024];
            size_t n;
            snprintf(buf, sizeof(buf), "%s", at + strlen(tags[i].tag));
            n = strlen(buf);
            while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                buf[--n] = '\0';
            if (tags[i].level <= ZKR_LOG_WARN &&
                (matches(buf, conn_failures, nf) ||
                 matches(buf, conn_noise, nn)))
                deliver(s, tags[i].level, buf, matches(buf, conn_failures, nf));
            else {
                if (tags[i].level == ZKR_LOG_ERROR && s != NULL)
                    keep_error(s, buf);
                emit(s, tags[i].level, buf);
            }
            return;
        }
    }
    emit(s, ZKR_LOG_WARN, msg); /* a format we do not know: keep it */
}

static void from_client_unslotted(const char *msg)
{
    from_client(NULL, msg);
}

/* Trampoline j of row i serves slot 8i + j. */
#define TRAMPOLINE(i, j)                                                       \
    static void tramp_##i##_##j(const char *msg)                               \
    {                                                                          \
        from_client(__atomic_load_n(&slots[(i)*8 + (j)], __ATOMIC_ACQUIRE),    \
                    msg);                                                      \
    }
#define TRAMPOLINE_ROW(i)                                                      \
    TRAMPOLINE(i, 0)                                                           \
    TRAMPOLINE(i, 1)                                                           \
    TRAMPOLINE(i, 2)                                                           \
    TRAMPOLINE(i, 3)                                                           \
    TRAMPOLINE(i, 4)                                                           \
    TRAMPOLINE(i, 5)                                                           \
    TRAMPOLINE(i, 6)                                                           \
    TRAMPOLINE(i, 7)
TRAMPOLINE_ROW(0)
TRAMPOLINE_ROW(1)
TRAMPOLINE_ROW(2)
TRAMPOLINE_ROW(3)
TRAMPOLINE_ROW(4)
TRAMPOLINE_ROW(5)
TRAMPOLINE_ROW(6)
TRAMPOLINE_ROW(7)
#define ROW(i)                                                                 \
    tramp_##i##_0, tramp_##i##_1, tramp_##i##_2, tramp_##i##_3, tramp_##i##_4, \
        tramp_##i##_5, tramp_##i##_6, tramp_##i##_7
static const log_callback_fn tramps[ZKR__LOG_SLOTS] = {
    ROW(0), ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6), ROW(7)};

void zkr__log_attach(zkr_session_t *s)
{
    s->log_slot = -1;
    pthread_mutex_lock(&slots_mu);
    for (int i = 0; i < ZKR__LOG_SLOTS; i++) {
        if (slots[i] == NULL) {
            __atomic_store_n(&slots[i], s, __ATOMIC_RELEASE);
            s->log_slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&slots_mu);
}

void zkr__log_detach(zkr_session_t *s)
{
    if (s->log_slot < 0)
        return;
    pthread_mutex_lock(&slots_mu);
    __atomic_store_n(&slots[s->log_slot], NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&slots_mu);
    s->log_slot = -1;
}

log_callback_fn zkr__log_callback(const zkr_session_t *s)
{
    return s->log_slot >= 0 ? tramps[s->log_slot] : from_client_unslotted;
}
