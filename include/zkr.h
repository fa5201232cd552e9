/**
 * \file zkr.h
 * \brief zkr: ZooKeeper coordination recipes for C.
 *
 * zkr builds correct, fenced coordination recipes (an exclusive lock, leader
 * election, a FIFO counting semaphore and a read/write lock, all on one
 * contender-queue engine) on top of the ZooKeeper multi-threaded C client
 * (`libzookeeper_mt`).
 *
 * \section index The calls most programs need
 *
 * - connect, and learn when the session is in doubt: zkr_session_open(),
 *   zkr_session_add_listener(), zkr_session_free()
 * - take and give back an exclusive lock: zkr_lock_new(),
 *   zkr_lock_acquire(), zkr_lock_release(), zkr_lock_free()
 * - stop acting when the lock is lost: zkr_lock_fd(), zkr_lock_state(),
 *   zkr_lock_valid_ms()
 * - make the protected resource reject a late holder: zkr_lock_token(),
 *   zkr_lock_guarded_multi(), zkr_fence_admit()
 * - run as the single leader: zkr_election_new(), zkr_election_run() (or
 *   zkr_election_join() and zkr_election_fd()), zkr_election_free()
 * - route clients to the leader: zkr_observer_new()
 * - limit concurrency to N, or share reads: zkr_semaphore_new(),
 *   zkr_rwlock_new(), then the lock calls
 * - hand out work exactly once: zkr_workq_new(), zkr_workq_put(),
 *   zkr_workq_take(), zkr_item_ack(), zkr_item_nack(), zkr_item_free()
 * - from an event loop: zkr_session_fd(), zkr_session_dispatch(), the
 *   `_async` calls
 * - say what went wrong: zkr_strerror()
 *
 * The groups below follow that order: versions and errors, the session,
 * the contenders of a queue (the type the recipes' listing calls return),
 * the lock, fencing, election, semaphore and read/write lock, the work
 * queue, and metrics last.
 *
 * \section contracts The three contracts
 *
 * **Errors.** Every fallible function returns an `int`: 0 (`ZOK`) on success,
 * a ZooKeeper error code passed through unchanged (`ZCONNECTIONLOSS`,
 * `ZNOAUTH`, `ZBADARGUMENTS`, ...), or one of zkr's own codes, which are all
 * below -1000 (`ZKR_ETIMEDOUT`, `ZKR_ELOST`, ...). zkr_strerror() turns any of
 * them into text. There is no errno side channel. When a function that takes
 * a completion callback returns an error, the callback is never called.
 *
 * **Ownership.** Handles are opaque. Every string passed in is copied before
 * the call returns. Strings handed back are either copied into a buffer the
 * caller provides or allocated and released with the matching `_free`
 * function. Every `_free` function accepts NULL as a harmless no-op.
 *
 * **Threads.** **All handles are thread-safe. Callbacks (session listeners,
 * lock listeners, completions) run on one event thread per session, with no
 * zkr lock held, in the order the events happened. A callback must not block
 * for long, and must not call a blocking zkr function: those return
 * ZKR_EDEADLK when called from a callback; use the `_async` variants.**
 * ZooKeeper's own completion thread never runs zkr's callbacks; it runs
 * only the completions and watchers of requests the application sends
 * itself on zkr's handle (zkr_session_handle(), zkr_session_with_handle()).
 * zkr's own answers arrive on that same thread, so such a completion must
 * be short and must not call zkr: blocking calls and zkr_session_free()
 * return ZKR_EDEADLK there, and the frees of other handles must not be
 * called there. A session
 * opened with `no_event_thread` has no event thread: its callbacks run in
 * zkr_session_dispatch(), on the thread that calls it, under the same rules
 * (see there).
 *
 * \section fork fork() and exec
 *
 * In the child of a fork(), every inherited session is closed: zkr's and
 * the ZooKeeper client's threads do not exist there, and the connection
 * belongs to the parent. The child may only free what it inherited
 * (zkr_lock_free(), zkr_election_free(), zkr_observer_free(), then
 * zkr_session_free()); these return at once, send nothing and delete no
 * node, so the parent's grants are untouched. zkr_lock_release() returns
 * ZKR_ECLOSED there (the parent still holds), in a child forked from
 * inside a callback too (the child is not in a callback); other calls return
 * ZKR_ECLOSED or a connection error; no callback runs in the child (the
 * callbacks queued for the parent are dropped there, and still run in the
 * parent). Calls active on the parent's threads (a zkr_election_run() in
 * its leader function, for one) do not exist in the child: nothing there
 * waits for them. The descriptors the child inherits (zkr_session_fd(),
 * zkr_lock_fd(), zkr_election_fd()) are the parent's: zkr neither reads
 * nor writes them in the child, so they keep signalling the parent's
 * state. Do not fork from a log callback (zkr_log_fn): fork() takes every
 * session's lock.
 *
 * Descriptors zkr creates (zkr_lock_fd()'s pipe) are close-on-exec. The
 * ZooKeeper C client 3.8.0 (as Debian builds it) opens its server socket
 * and its wake-up pipe without close-on-exec, and zkr cannot reach them:
 * a program that forks and execs while a session is open should close
 * descriptors above 2 in the child before exec (on Linux,
 * `close_range(3, ~0U, 0)`).
 *
 * \section fencing Fencing tokens
 *
 * The fencing token of a grant is the `czxid` of the holder's node: a 64-bit
 * number, strictly increasing across successive holders of one lock and never
 * reused. A lock alone cannot stop a paused holder from writing late; the
 * protected resource must reject a token lower than the highest it has
 * already accepted. That rule is for exclusive grants (lock, writer,
 * leader); readers and semaphore permits hold different tokens at once.
 */
#ifndef ZKR_H
#define ZKR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <zookeeper/zookeeper.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(ZKR_BUILDING)
#define ZKR_EXTERN __attribute__((visibility("default")))
#else
#define ZKR_EXTERN
#endif

/** \defgroup zkr_errors Versions, error codes and their names
 *
 * zkr's version (the header's and the library's) and its error codes.
 * Every zkr call that can fail returns an int: 0 on success, or a code:
 * ZooKeeper's own (`ZCONNECTIONLOSS`, `ZNONODE`, `ZNOAUTH`,
 * `ZBADARGUMENTS`, ...), passed through unchanged, or one of zkr's, all
 * below -1000 (ZKR_EBUSY ... ZKR_EREFUSED). zkr_strerror() says what a
 * code means and, for the causes a newcomer meets first (ZNOAUTH,
 * ZINVALIDACL, ZAUTHFAILED, ZKR_EREFUSED, ZKR_ERESOLVE, ZKR_ENOCHROOT),
 * what to check; zkr_errname() gives its name ("ZKR_ELOST").
 *
 * \par RETURN VALUE
 * zkr_version() returns ZKR_VERSION_NUMBER of the library in use;
 * zkr_version_string() its "MAJOR.MINOR.PATCH"; zkr_strerror() and
 * zkr_errname() a static string, never NULL (zkr_errname() gives
 * "UNKNOWN" for a code it does not know).
 *
 * \par ERRORS
 * These calls do not fail. The codes themselves: ZKR_EBUSY (held by
 * another contender, for a try), ZKR_ETIMEDOUT, ZKR_ECANCELED, ZKR_ENOTHELD,
 * ZKR_EALREADY, ZKR_ELOST (ownership lost: session expired or node
 * deleted), ZKR_ECLOSED, ZKR_EDEADLK (a blocking call from a callback),
 * ZKR_ENOMEM, ZKR_ESYS, ZKR_ESTATE, ZKR_EINUSE, ZKR_ESTALE (a grant or
 * token no longer valid), ZKR_EFORMAT, ZKR_ELIMIT, ZKR_EINDOUBT (outcome
 * unknown: the answer was lost with the session), ZKR_EBADADDR,
 * ZKR_ERESOLVE, ZKR_ENOCHROOT, ZKR_EREFUSED.
 *
 * \par EXAMPLE
 * \code
 * int rc = zkr_lock_acquire(l, 5000);
 * if (rc != 0)
 *     fprintf(stderr, "lock: %s (%s)\n", zkr_strerror(rc), zkr_errname(rc));
 * if (zkr_version() < ZKR_VERSION_NUMBER)
 *     fprintf(stderr, "built with zkr %s, running %s\n", ZKR_VERSION_STRING,
 *             zkr_version_string());
 * \endcode
 *
 * \sa %zkr_session(3), %zkr_lock(3), %zkr(7)
 *
 * @{
 */
/**
 * \name Versions
 * The version of this header (configure.ac's AC_INIT; a test checks they
 * agree). zkr_version() gives the library's, which may be newer: the ABI
 * only grows within a major version (each symbol is versioned
 * `ZKR_<major>.<minor>`, the version that introduced it).
 * @{
 */
#define ZKR_VERSION_MAJOR 0
#define ZKR_VERSION_MINOR 4
#define ZKR_VERSION_PATCH 0
/** \cond */
#define ZKR__VERSION_STR2(x) #x
#define ZKR__VERSION_STR(x) ZKR__VERSION_STR2(x)
/** \endcond */
/** The version as text, "MAJOR.MINOR.PATCH" (a string literal made from the
 *  three numbers above). */
#define ZKR_VERSION_STRING                                                     \
    ZKR__VERSION_STR(ZKR_VERSION_MAJOR)                                        \
    "." ZKR__VERSION_STR(ZKR_VERSION_MINOR) "." ZKR__VERSION_STR(              \
        ZKR_VERSION_PATCH)
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define ZKR_VERSION_NUMBER                                                     \
    (ZKR_VERSION_MAJOR * 10000 + ZKR_VERSION_MINOR * 100 + ZKR_VERSION_PATCH)
/** @} */

/** \brief The library's version, as ZKR_VERSION_NUMBER (run time). */
ZKR_EXTERN unsigned zkr_version(void);
/** \brief The library's version as text, as ZKR_VERSION_STRING (run time);
 *  a static string. */
ZKR_EXTERN const char *zkr_version_string(void);

/** Longest accepted recipe path, in bytes, not counting the final NUL. */
#define ZKR_PATH_MAX 1024
/** Buffer size that always fits a contender node's full path and a NUL. */
#define ZKR_NODE_MAX (ZKR_PATH_MAX + 128)
/** Longest accepted contender identifier, in bytes. */
#define ZKR_ID_MAX 1024

/**
 * zkr's own error codes. ZooKeeper's codes (`ZOK`, `ZCONNECTIONLOSS`, ...)
 * are returned unchanged alongside these.
 */
#define ZKR_ERRNO_MAP(X)                                                       \
    X(EBUSY, -1001, "the lock is held by another contender")                   \
    X(ETIMEDOUT, -1002, "timed out")                                           \
    X(ECANCELED, -1003, "operation canceled")                                  \
    X(ENOTHELD, -1004, "not held")                                             \
    X(EALREADY, -1005, "already held or being acquired")                       \
    X(ELOST, -1006, "ownership lost: session expired or node deleted")         \
    X(ECLOSED, -1007, "session closed")                                        \
    X(EDEADLK, -1008, "blocking call from a zkr callback")                     \
    X(ENOMEM, -1009, "out of memory")                                          \
    X(ESYS, -1010, "system call failed")                                       \
    X(ESTATE, -1011, "call not valid in the current state")                    \
    X(EINUSE, -1012, "handle still in use")                                    \
    X(ESTALE, -1013, "stale: the grant or token is no longer valid")           \
    X(EFORMAT, -1014, "malformed sequencer string")                            \
    X(ELIMIT, -1015, "the path is in use with another permit count")           \
    X(EINDOUBT, -1016,                                                         \
      "outcome unknown: the answer was lost with the session")                 \
    X(EBADADDR, -1017,                                                         \
      "a server of the list is not HOST:PORT: check each entry has a port "    \
      "(1..65535)")                                                            \
    X(ERESOLVE, -1018,                                                         \
      "a server's host name does not resolve: check the name and DNS")         \
    X(ENOCHROOT, -1019,                                                        \
      "the chroot does not exist on the server: create it, or check the "      \
      "path after HOST:PORT")                                                  \
    X(EREFUSED, -1020,                                                         \
      "every server refused the connection: check that ZooKeeper runs and "    \
      "listens on the ports listed")

/** zkr's own error codes, all below -1000 (the values and texts of
 *  ZKR_ERRNO_MAP); zkr_strerror() describes each, zkr_errname() names it. */
typedef enum {
#define ZKR__ERR_ENUM(name, val, text) ZKR_##name = (val),
    ZKR_ERRNO_MAP(ZKR__ERR_ENUM)
#undef ZKR__ERR_ENUM
} zkr_errno_t;

/**
 * \brief Describes an error code.
 * \param rc a zkr code, a ZooKeeper code, or 0.
 * \return a static string; never NULL. ZooKeeper codes are described by
 *   ZooKeeper's zerror(); for ZNOAUTH, ZINVALIDACL and ZAUTHFAILED (a
 *   misconfiguration's codes) that text is followed by what to check.
 */
ZKR_EXTERN const char *zkr_strerror(int rc);

/**
 * \brief The symbolic name of an error code ("ZKR_ELOST", "ZCONNECTIONLOSS").
 * \return a static string; never NULL ("UNKNOWN" for unknown codes).
 */
ZKR_EXTERN const char *zkr_errname(int rc);

/** @} */

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_session Sessions: open, listen, dispatch, close
 *
 * A session is one ZooKeeper session, shared by every recipe handle made
 * on it. zkr_session_open() connects (or, with `no_wait`, starts
 * connecting and returns at once); zkr_session_adopt() wraps a handle the
 * application already has. The state moves CONNECTING, CONNECTED,
 * SUSPENDED (connection lost: what is held is in doubt), RECONNECTED (the
 * same session: kept), LOST (expired, or no heartbeat answered before the
 * safe deadline: everything held is gone) and CLOSED; listeners hear each
 * change. After LOST an owned session re-creates itself (new session id)
 * unless `no_reconnect`. Callbacks run on the session's event thread, or
 * with `no_event_thread` on the application's thread in
 * zkr_session_dispatch() when zkr_session_fd() is readable. Thread-safe.
 *
 * \par RETURN VALUE
 * zkr_session_open(), zkr_session_adopt(), zkr_session_free() and
 * zkr_session_wait_connected() return 0 or an error code;
 * zkr_session_dispatch() the number of callbacks it ran;
 * zkr_session_last_error() the length of the last error's text.
 *
 * \par ERRORS
 * - ZBADARGUMENTS: a NULL, empty or malformed argument or option.
 * - ZKR_EBADADDR: an entry of the server list is not HOST:PORT.
 * - ZKR_ERESOLVE: a host name does not resolve.
 * - ZKR_EREFUSED: every server refused the connection.
 * - ZKR_ETIMEDOUT: no connection within the connect timeout.
 * - ZKR_ENOCHROOT: the chroot does not exist on the server.
 * - ZAUTHFAILED: the server refused the credentials.
 * - ZKR_EINUSE: zkr_session_free() with recipe handles still open.
 * - ZKR_EDEADLK: a blocking call from a callback.
 * - ZKR_ENOMEM, ZKR_ESYS, ZSYSTEMERROR.
 *
 * \par EXAMPLE
 * \code
 * zkr_session_t *s;
 * int rc = zkr_session_open(&s, "zk1:2181,zk2:2181,zk3:2181", 10000, NULL);
 * if (rc != 0) {
 *     fprintf(stderr, "zookeeper: %s\n", zkr_strerror(rc));
 *     return 1;
 * }
 * ... recipes ...
 * zkr_session_free(s);
 * \endcode
 * An event-loop daemon that must start while ZooKeeper is down:
 * \code
 * zkr_session_options_t o = {0};
 * o.no_event_thread = 1;  // callbacks in zkr_session_dispatch()
 * o.no_wait = 1;          // return at once, CONNECTING
 * o.listener = on_state;  // hears CONNECTED, SUSPENDED, LOST...
 * rc = zkr_session_open(&s, hosts, 10000, &o);
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_election(3), %zkr_metrics(3), %zkr_errors(3),
 *   %zkr(7), %zkr(1)
 *
 * @{
 */

/** A zkr session: one ZooKeeper handle and its connection state. */
typedef struct zkr_session zkr_session_t;

/**
 * Connection states (README.md, "Sessions and the safe deadline").
 *
 * | state       | meaning                                                  |
 * |-------------|----------------------------------------------------------|
 * | CONNECTING  | no session yet (before the first connection)             |
 * | CONNECTED   | connected with a new session (first time or after LOST)  |
 * | SUSPENDED   | connection lost, session may still live: stop side effects|
 * | RECONNECTED | connected again with the same session                    |
 * | LOST        | session expired, or suspended past the safe deadline     |
 * | CLOSED      | zkr_session_free() has begun                             |
 */
typedef enum {
    ZKR_STATE_CONNECTING = 0,
    ZKR_STATE_CONNECTED = 1,
    ZKR_STATE_SUSPENDED = 2,
    ZKR_STATE_RECONNECTED = 3,
    ZKR_STATE_LOST = 4,
    ZKR_STATE_CLOSED = 5
} zkr_state_t;

/** \brief Name of a state ("CONNECTED"...); never NULL. */
ZKR_EXTERN const char *zkr_state_name(zkr_state_t state);

/** Log levels, most severe first (zkr_session_options_t::log_level). */
typedef enum {
    ZKR_LOG_NONE = -1,   /**< nothing at all */
    ZKR_LOG_DEFAULT = 0, /**< the default: ZKR_LOG_WARN */
    ZKR_LOG_ERROR = 1,
    ZKR_LOG_WARN = 2,
    ZKR_LOG_INFO = 3,
    ZKR_LOG_DEBUG = 4
} zkr_log_level_t;

/**
 * \brief A log sink: receives one message of a session, without a newline.
 *
 * Called on whichever thread logs (the ZooKeeper client's threads, zkr's
 * timer thread, or an application thread inside a zkr call), possibly on
 * several at once, with zkr locks held: it must be quick, thread-safe and
 * must not call zkr. `s` is the session the message is about.
 */
typedef void (*zkr_log_fn)(zkr_session_t *s, zkr_log_level_t level,
                           const char *message, void *data);

/** Session state listener; runs on the session's event thread (or in
 *  zkr_session_dispatch() with `no_event_thread`). */
typedef void (*zkr_session_listener_t)(zkr_session_t *s, zkr_state_t state,
                                       void *data);

/**
 * \brief Options for zkr_session_open().
 *
 * Zero-initialise, then set what you need:
 * `zkr_session_options_t o = {0};`. Every field's zero value is the
 * default, and stays so: the structure keeps its size across versions
 * (options added later take space from `reserved_`), so a program built
 * against an older zkr.h works with a newer library unchanged.
 */
typedef struct zkr_session_options {
    /** "user:password" for ZooKeeper's digest scheme, or NULL. */
    const char *digest;
    /** Chroot applied to every path ("/app"), or NULL. */
    const char *chroot;
    /** How long zkr_session_open() waits for the first connection;
     *  0 = the session timeout, -1 = forever. Not used with `no_wait`. */
    int connect_timeout_ms;
    /** Nonzero: after LOST, do not create a new session automatically. */
    int no_reconnect;
    /** Where this session's messages go, zkr's own and those of its
     *  ZooKeeper handle (passed to zookeeper_init2(), so nothing is set
     *  process-wide). NULL: standard error, as "zkr: LEVEL: message".
     *  The client's callback carries no context, so zkr routes it through
     *  one of 64 slots: beyond 64 sessions open at once, the client's
     *  messages of the extra sessions go to standard error (warnings and
     *  errors); zkr's own still go to log_fn. */
    zkr_log_fn log_fn;
    /** Passed to log_fn. */
    void *log_data;
    /** The most verbose level delivered (a zkr_log_level_t); 0 = warnings
     *  and errors only, so a healthy session logs nothing. The client's
     *  messages arrive only as far as the process-wide
     *  zoo_set_debug_level() lets them (its default: INFO); zkr never
     *  changes that level. While the servers cannot be reached (an open
     *  that does not connect, or an outage), the errors of the repeated
     *  attempts are summarised: the first of the outage comes at its own
     *  level (it names the server and the errno), the repeats at
     *  ZKR_LOG_DEBUG, plus at most one ZKR_LOG_WARN line every 10 s
     *  ("still cannot reach H:P after N attempts in S s (...), last
     *  error: ..."); reaching the servers again is one ZKR_LOG_WARN line
     *  ("reached H:P again after N failed attempts in S s"). */
    int log_level;
    /** Nonzero: no zkr event thread. Callbacks wait until the application
     *  calls zkr_session_dispatch(), for instance from an event loop when
     *  zkr_session_fd() is readable. */
    int no_event_thread;
    /** A listener added before the session starts, as
     *  zkr_session_add_listener() would add it, so that it hears every
     *  change from the first one (with `no_wait`, CONNECTED may come
     *  before zkr_session_open() has returned). Without `no_wait` it
     *  hears nothing until the open has succeeded (then CONNECTED first),
     *  and nothing at all of a session whose open fails. NULL: none. */
    zkr_session_listener_t listener;
    /** Passed to `listener`. */
    void *listener_data;
    /** Nonzero: zkr_session_open() does not wait for a connection. It
     *  returns 0 as soon as the session is started, CONNECTING, or an
     *  error it can tell at once: the same argument and address checks,
     *  ZKR_ERESOLVE and ZSYSTEMERROR (the client could not start),
     *  ZKR_ENOMEM, ZKR_ESYS. The session then connects in the
     *  background for as long as it takes, trying the servers in turn
     *  (connect_timeout_ms does not apply); `listener` hears CONNECTED,
     *  zkr_session_wait_connected() waits for it, and while no server
     *  answers the log says why at the pace described under `log_level`.
     *  Recipe handles may be made and their acquires started meanwhile:
     *  they wait for the connection (an acquire's timeout runs). What the
     *  waiting open returns as an error comes later instead: a chroot
     *  that does not exist is logged (ZKR_LOG_ERROR) once connected, and
     *  requests then fail with ZNONODE; credentials the server refuses
     *  make the session LOST, as they would a connected one's. */
    int no_wait;
    /** Must be zero: room for options of later versions. */
    void *reserved_[5];
} zkr_session_options_t;

/**
 * \brief Opens a session and waits for its first connection (or, with
 *   `opts->no_wait`, starts it and returns at once).
 *
 * After LOST the session re-creates its ZooKeeper handle automatically (new
 * session id, attempts spaced by exponential backoff with full jitter, from
 * 100 ms up to 10 s) unless `opts->no_reconnect` is set.
 *
 * \param out OUT: the new session; set only on success.
 * \param hosts comma-separated "host:port" list.
 * \param session_timeout_ms requested session timeout (the server may
 *   negotiate another; zkr uses the negotiated one). 0 means 10000.
 * \param opts options, or NULL for defaults.
 * \return 0; ZBADARGUMENTS (NULL out or hosts, empty hosts, negative
 *   timeout, invalid chroot or digest, log_level out of range, a nonzero
 *   `reserved_`); ZKR_ETIMEDOUT (no connection within
 *   the connect timeout); ZKR_EREFUSED (no connection within the connect
 *   timeout, and then every address of the list refused a TCP connection
 *   at once: nothing listens there; logged per address); ZAUTHFAILED (digest
 * credentials refused); ZKR_ENOMEM; ZKR_ESYS (thread or pipe creation failed);
 *   ZKR_EBADADDR (an entry of `hosts` is not HOST:PORT, [IPv6]:PORT
 *   included, with a port 1..65535); ZKR_ERESOLVE (the client could not
 *   start and a host name of the list does not resolve: the log says
 *   which); ZKR_ENOCHROOT (connected, but `opts->chroot` does not exist
 *   on the server: zkr does not create it); ZSYSTEMERROR (zookeeper_init
 *   failed otherwise).
 */
ZKR_EXTERN int zkr_session_open(zkr_session_t **out, const char *hosts,
                                int session_timeout_ms,
                                const zkr_session_options_t *opts);

/**
 * \brief Wraps a ZooKeeper handle the application already has.
 *
 * zkr never replaces the application's global watcher: the application must
 * call zkr_session_process_event() from its watcher for every session event
 * (`type == ZOO_SESSION_EVENT`). An adopted session is never re-created:
 * after the server expires it, it stays LOST. If zkr declared it LOST at
 * the safe deadline and the same session then reconnects, zkr starts
 * afresh (CONNECTED): earlier grants stay lost and their nodes are
 * deleted through the handle once it reaches the server again, so they do
 * not block others for as long as the application keeps the handle; never
 * before the server could have expired the session by itself (last heard
 * + T, a tenth of T after LOST: that tenth is the application's to stop
 * using what it held, as for an owned session). The application owns and
 * closes the handle, after
 * zkr_session_free(); it must stop calling zkr_session_process_event()
 * before that. zkr changes no setting of an adopted handle: on the handles
 * it makes itself it calls zoo_set_servers_resolution_delay(zh, 1000)
 * (without it the client resolves its host list on every turn of its I/O
 * loop, most of its CPU under load; docs/PROTOCOL.md [S7]); the
 * application may make the same call on its own handle.
 *
 * \param out OUT: the new session.
 * \param zh a handle from zookeeper_init(); must outlive the session.
 * \return 0; ZBADARGUMENTS; ZKR_ENOMEM; ZKR_ESYS.
 */
ZKR_EXTERN int zkr_session_adopt(zkr_session_t **out, zhandle_t *zh);

/**
 * \brief Feeds a watcher event of an adopted handle to zkr.
 *
 * Call it from the application's global watcher with the event's type and
 * state. Events other than session events are ignored. Safe to call from
 * ZooKeeper's completion thread; never blocks.
 */
ZKR_EXTERN void zkr_session_process_event(zkr_session_t *s, int type,
                                          int state);

/**
 * \brief Closes the session.
 *
 * Every recipe handle of the session must have been freed first. Closes an
 * owned ZooKeeper handle (the server then deletes the session's ephemeral
 * nodes); for an adopted handle, deletes the nodes zkr still has to clean
 * up while the handle is connected, removes zkr's watches, and leaves the
 * handle open. Listeners get CLOSED. Must not be called from a callback.
 * In event-loop mode (`no_event_thread`) it runs the callbacks still due
 * on its caller's thread, after any dispatch running on another thread
 * has ended (see zkr_session_dispatch()).
 *
 * \return 0; ZKR_EINUSE (recipe handles still open: nothing was done, no
 *   callback ran);
 *   ZKR_EDEADLK (called from a callback). NULL is a no-op returning 0.
 */
ZKR_EXTERN int zkr_session_free(zkr_session_t *s);

/** \brief Current state. CLOSED for NULL. */
ZKR_EXTERN zkr_state_t zkr_session_state(zkr_session_t *s);

/**
 * \brief The descriptor of a session opened with `no_event_thread`:
 *   readable (poll() POLLIN) while callbacks are waiting for
 *   zkr_session_dispatch(), and only then.
 *
 * Level-triggered, and quiet once a dispatch has run every callback that
 * was due: a loop that polls it wakes once per batch of events, never
 * more often (a connection that stays suspended makes no events of its
 * own). Do not read from or close it; it is the same for the life of the
 * session, and closed by zkr_session_free(). Close-on-exec.
 * \return the descriptor; -1 for NULL or a session with an event thread.
 */
ZKR_EXTERN int zkr_session_fd(zkr_session_t *s);

/**
 * \brief Runs, on the calling thread, the callbacks of a session opened
 *   with `no_event_thread` that were due when it was called.
 *
 * Every callback of the session (session listeners, recipe state
 * listeners, election listeners, observers, completions) runs here and
 * nowhere else, in the order the events happened, with no zkr lock held;
 * nothing is called between dispatches. While they run the thread is in a
 * callback, with every rule of one: blocking zkr calls return ZKR_EDEADLK,
 * a handle may be freed (its pending completions still come, each once,
 * its state changes no longer), and so on. Callbacks posted while it runs
 * wait for the next call (the descriptor stays readable), so it returns
 * in bounded time. One thread dispatches at a time: a call while another
 * thread dispatches returns 0 at once. A handle freed outside a callback
 * with callbacks still due is finished by a later dispatch, or by
 * zkr_session_free(), which first runs the callbacks still due (and then
 * the listeners' CLOSED) on its caller's thread. A free (zkr_lock_free()
 * and the like) on one thread while another dispatches waits for that
 * dispatch to end, so that no callback of the handle still runs when it
 * returns.
 *
 * Blocking calls remain usable outside callbacks (they do not need a
 * dispatch), but what only a callback reports stays unreported until one:
 * zkr_election_await() on the dispatching thread sees participation end
 * on an error (ZNOAUTH) only after the dispatch that delivers it. So a
 * wait without end there could never see it: on the thread that last
 * called zkr_session_dispatch(), zkr_election_run() and
 * zkr_election_await(e, -1) return ZKR_EDEADLK (poll zkr_election_fd()
 * and call zkr_election_await(e, 0) instead, as examples/evloop.c does,
 * or run the election on another thread).
 * \return how many events it delivered (0 if none was due): each is one
 *   completion, one state change for a recipe's listener, or one round of
 *   the session listeners (a freed handle's state changes are dropped,
 *   not counted); ZKR_ESTATE (the session has an event thread);
 *   ZKR_EDEADLK (called from a callback); ZBADARGUMENTS (NULL).
 */
ZKR_EXTERN int zkr_session_dispatch(zkr_session_t *s);

/**
 * \brief How long the session's ownership claims stay safe, in ms.
 *
 * Counted from the last time the session is proven to have been touched by
 * the ZooKeeper leader (the server that expires sessions), plus the
 * negotiated session timeout T, minus a tenth of T: until then the server
 * cannot have expired the session, so no other client can have been
 * granted what this session holds. Only heartbeats that went through the
 * leader (a sync every T/12) count, never a read a follower answers alone;
 * a follower's touches reach the leader up to half a tick later, so the
 * proof trails the newest answered heartbeat by T/4 (ZooKeeper requires
 * T >= 2 ticks). In steady state about 0.57 T; a reconnection of the same
 * session does not extend it. Measured on CLOCK_BOOTTIME (runs during
 * system suspend). README's "Sessions and the safe deadline" has the table
 * for a standalone server and an ensemble. 0 when LOST, CLOSED, CONNECTING
 * or past the deadline.
 */
ZKR_EXTERN int64_t zkr_session_valid_ms(zkr_session_t *s);

/** \brief The current ZooKeeper session id, or 0 when there is none. */
ZKR_EXTERN int64_t zkr_session_id(zkr_session_t *s);

/** \brief The negotiated session timeout in ms (0 before connecting). */
ZKR_EXTERN int zkr_session_timeout_ms(zkr_session_t *s);

/**
 * \brief The current ZooKeeper handle, for the application's own calls.
 *
 * Unsafe with a session that reconnects: after LOST zkr closes this handle
 * (and frees it) and creates a new one, at a moment the application cannot
 * see, so a pointer obtained here may be freed while a call on it runs.
 * Prefer zkr_session_with_handle(). This call is safe only on a session
 * opened with `no_reconnect` or adopted (zkr_session_adopt()), until
 * zkr_session_free(). Never close the handle. NULL when there is none.
 * Watches the application sets on it are its own: zkr then removes only
 * its own watches (on such a handle, and on an adopted one, a watch zkr
 * takes back stays on the server until the node changes, and the client
 * drops that one notification). The completions of calls made on it run
 * on the client's completion thread, which zkr's own answers share: keep
 * them short and call no zkr function from them (see the top of this
 * file; blocking ones return ZKR_EDEADLK there).
 */
ZKR_EXTERN zhandle_t *zkr_session_handle(zkr_session_t *s);

/** A function run with the session's handle (zkr_session_with_handle()). */
typedef int (*zkr_handle_fn)(zhandle_t *zh, void *arg);

/**
 * \brief Runs `fn(zh, arg)` with the current ZooKeeper handle, which stays
 * open until fn returns.
 *
 * fn runs on the calling thread, with no zkr lock held; it may make any
 * ZooKeeper call on zh (synchronous ones too) but must not close it, keep
 * it after returning, or call zkr_session_free(). While fn runs, a LOST
 * session's handle is not replaced (the replacement waits for fn): keep
 * fn short. The session's own state is unaffected, and zkr's deadline
 * rules still hold: zh may be expired by the time fn uses it. Watches set
 * on zh are the application's (see zkr_session_handle()).
 * \return fn's return value; without calling fn: ZBADARGUMENTS (NULL s or
 *   fn), ZKR_ECLOSED (zkr_session_free() has begun, or a forked child),
 *   ZCONNECTIONLOSS (no connected handle now).
 */
ZKR_EXTERN int zkr_session_with_handle(zkr_session_t *s, zkr_handle_fn fn,
                                       void *arg);

/**
 * \brief Waits until the session is CONNECTED or RECONNECTED.
 * \param timeout_ms -1 forever, 0 check only, otherwise a bound.
 * \return 0; ZKR_ETIMEDOUT; ZKR_ECLOSED; ZKR_ELOST (LOST and not
 *   re-creating); ZBADARGUMENTS; ZKR_EDEADLK (from a callback).
 */
ZKR_EXTERN int zkr_session_wait_connected(zkr_session_t *s, int timeout_ms);

/**
 * \brief The last error the session met, as text: why it cannot reach its
 *   servers, or why it became LOST.
 *
 * Kept whatever `log_level` says (ZKR_LOG_NONE included), as the log
 * would say it: the last failed attempt to reach a server (the ZooKeeper
 * client's words, with the address and the errno), a server that refused
 * the connection or a host that does not resolve (an open that failed
 * says so in the log; this session had its start), a chroot that does not
 * exist, the cause of each LOST ("session 0x... LOST: the server expired
 * the session", "... no heartbeat answered within the safe deadline"), and
 * any other error the log reports. Reaching the servers again does not
 * clear it: it says what went wrong last, history while the session is
 * CONNECTED. For a session opened with `no_wait` it says why it is still
 * CONNECTING. The client's words come through the session's log slot
 * (see `log_fn`), and only as far as the process-wide
 * zoo_set_debug_level() lets them (its errors pass at every level but 0):
 * beyond 64 sessions open at once, an extra session keeps zkr's own
 * errors only, and one opened with `no_wait` that has not connected within
 * a session timeout keeps "no connection to HOSTS within T ms". A LOST
 * session's cause is soon followed by the errors of its reconnection:
 * the text is the last error, not the first. Any thread, callbacks
 * included.
 * \param buf where the text goes, NUL-terminated and cut to fit; NULL
 *   (with len 0) to learn its length.
 * \return the text's length (more than len - 1 when it was cut, as
 *   snprintf()); 0 (buf "") when nothing went wrong yet, or for NULL.
 * \since 0.4 (ZKR_0.4)
 */
ZKR_EXTERN size_t zkr_session_last_error(zkr_session_t *s, char *buf,
                                         size_t len);

/**
 * \brief Adds a listener called on every state change.
 * \return 0; ZBADARGUMENTS; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_session_add_listener(zkr_session_t *s,
                                        zkr_session_listener_t fn, void *data);

/**
 * \brief Removes a listener added with the same fn and data.
 *
 * When it returns, that listener is not running and will not run again
 * (unless called from that listener itself).
 * \return 0; ZBADARGUMENTS (NULL, or no such listener).
 */
ZKR_EXTERN int zkr_session_remove_listener(zkr_session_t *s,
                                           zkr_session_listener_t fn,
                                           void *data);

/** Counters kept by a session, for observability and tests. */
typedef enum {
    /** Node watch notifications that woke a waiter or an observer
     *  (session events and ZKR_COUNTER_HOLDER_EVENTS not counted). */
    ZKR_COUNTER_WATCH_EVENTS = 0,
    /** Contender nodes created. */
    ZKR_COUNTER_CREATES,
    /** Contender nodes deleted by zkr (releases and cleanups). */
    ZKR_COUNTER_DELETES,
    /** Queue listings (getChildren) issued: every grant rests on one. */
    ZKR_COUNTER_LISTS,
    /** Creates whose outcome was unknown and had to be recovered. */
    ZKR_COUNTER_RECOVERIES,
    /** New ZooKeeper sessions established (first one included). */
    ZKR_COUNTER_SESSIONS,
    /** Notifications about a contender's own node: a contender watches
     *  its own node while it waits and while it holds, to learn of a
     *  deletion by someone else at once, so each release (and each
     *  semaphore permit's touch) also notifies the contender's own
     *  session. */
    ZKR_COUNTER_HOLDER_EVENTS,
    ZKR_COUNTER_COUNT_
} zkr_counter_t;

/** \brief Reads a counter; 0 for NULL or an unknown counter. */
ZKR_EXTERN uint64_t zkr_session_counter(zkr_session_t *s, zkr_counter_t c);

/** @} */

/* ------------------------------------------------------------------------ */
/* Contenders (observability)                                                */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_contenders Contenders: who holds and who waits on a path
 *
 * Who holds and who waits on a recipe path, read from ZooKeeper: any
 * process may ask, without a handle of its own, about zkr's contenders and
 * those of Curator and kazoo on the same path (their node names are
 * understood). zkr_contenders_list() lists the path's contenders in queue
 * order with their identifiers, fencing tokens and ages;
 * zkr_contenders_holding() says how many of the first ones hold (the lock
 * holder, the readers before the first writer, a semaphore's permits, an
 * election's leader); zkr_delay_closed() reads a lock-delay still running
 * on the path. `zkr inspect` is built on them.
 *
 * \par RETURN VALUE
 * zkr_contenders_list() returns 0 or an error code, the array in *out
 * (free it with zkr_contenders_free()); zkr_contenders_holding() the
 * number of holders (0 for NULL), or ZKR_ENOMEM; zkr_delay_closed() 1
 * (closed), 0 (open, or no such path) or an error code.
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL or an invalid path.
 * - ZNONODE is not an error: a path that does not exist has no
 *   contenders (count 0).
 * - ZNOAUTH: the path may not be read.
 * - ZCONNECTIONLOSS and the other ZooKeeper codes of the reads.
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * zkr_contender_t *v;
 * int n, h;
 * if (zkr_contenders_list(s, "/app/lock", &v, &n) == 0) {
 *     h = zkr_contenders_holding(v, n);
 *     for (int i = 0; i < n; i++)
 *         printf("%s %s\n", i < h ? "holds" : "waits", v[i].id);
 *     zkr_contenders_free(v, n);
 * }
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_election(3), %zkr(1) (zkr inspect), %zkr(7)
 *
 * @{
 */

/** \brief One contender of a queue, as read from ZooKeeper. */
typedef struct zkr_contender {
    char *node;         /**< full path of the contender's node */
    char *id;           /**< its identifier (the node's data) */
    int32_t seq;        /**< sequence number (signed, as ZooKeeper wrote) */
    int64_t czxid;      /**< fencing token of the node */
    int64_t ctime_ms;   /**< creation time, ms since the epoch (server) */
    int64_t session_id; /**< owning session (ephemeralOwner) */
} zkr_contender_t;

/**
 * \brief Lists the contenders under a recipe path, in queue order.
 *
 * Queue order is creation order, read from the sequence numbers as serial
 * numbers: a node numbered -2147483648 after the counter wrapped comes
 * after 2147483647 (docs/RELIABILITY.md says what this assumes). Recognises the
 * node names of zkr, Curator, kazoo, go-zookeeper and ZooKeeper's contrib
 * recipes; other children are skipped. The first entry holds the lock. Does not
 * create anything.
 *
 * \param out OUT: array of `*count` entries; free with zkr_contenders_free().
 *   NULL with count 0 when the path has no contender or does not exist.
 * \return 0; ZBADARGUMENTS; ZKR_EDEADLK; ZKR_ECLOSED; ZKR_ENOMEM;
 *   ZooKeeper codes (ZCONNECTIONLOSS, ZNOAUTH, ...).
 */
ZKR_EXTERN int zkr_contenders_list(zkr_session_t *s, const char *path,
                                   zkr_contender_t **out, int *count);

/**
 * \brief How many leading entries of a listing hold: the lock's holder,
 *   the granted readers of a read/write lock, a semaphore's permit holders,
 *   an election's leader. Each entry is judged by its recipe's rule, read
 *   from its node name; the holders always form a prefix of the queue.
 *   Entries that share one sequence number (ZooKeeper 3.8 numbers every
 *   child 2147483647 once a directory's counter got there) cannot be told
 *   apart by name: none of them is counted past another.
 *   An election candidate with a lock-delay (zkr_election_set_delay()) that
 *   is first but does not lead yet (waiting out its delay) is not counted,
 *   nor is anyone behind it: 0 while an election has no leader. That is
 *   known for the array as zkr_contenders_list() returned it (the listing
 *   read it from the candidate's node, docs/design/lock-delay.md 1.7); a
 *   copy is judged by names alone.
 * \param v a listing from zkr_contenders_list() (in queue order).
 * \param count its number of entries.
 * \return 0..count (0 for NULL or count <= 0); ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_contenders_holding(const zkr_contender_t *v, int count);

/**
 * \brief Whether a queue is closed by a lock-delay (zkr_lock_set_delay()),
 *   as the directory's data says: a contender waiting out a delay writes
 *   there until when and why.
 *
 * Informational (for zkr inspect and monitoring): the time is the
 * delayed contender's wall clock, and no grant depends on it. Closed
 * means: the directory holds such a record, the contender that wrote it
 * still has its node there (same czxid), and the time has not passed by
 * this machine's clock. Does not create anything.
 * \param until_ms OUT: the end, ms since the epoch; 0 when not closed.
 * \param cause OUT, may be NULL: why, one word ("unreleased": the node
 *   before the delayed contender went without a clean release), at most
 *   len bytes with its NUL; "" when not closed.
 * \param len the size of cause.
 * \return 1 (closed); 0 (not closed, or the path does not exist);
 *   ZBADARGUMENTS; ZKR_EDEADLK (from a callback); ZKR_ECLOSED; ZooKeeper
 *   codes (ZNOAUTH: the directory may not be read).
 */
ZKR_EXTERN int zkr_delay_closed(zkr_session_t *s, const char *path,
                                int64_t *until_ms, char *cause, size_t len);

/** \brief Frees an array from zkr_contenders_list(); NULL is a no-op. */
ZKR_EXTERN void zkr_contenders_free(zkr_contender_t *v, int count);

/** @} */

/* ------------------------------------------------------------------------ */
/* Exclusive lock                                                            */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_lock Distributed exclusive lock with fencing tokens
 *
 * A fair (first come, first served) exclusive lock on a ZooKeeper path,
 * with a fencing token per grant. Each acquire creates an ephemeral
 * sequential node under PATH; the oldest holds, each waiter watches the
 * one before it (no herd). The token is the node's czxid: strictly
 * greater for every later grant of the path, so a resource that keeps the
 * highest token it has seen can refuse a stale holder (zkr_fence(3)).
 * Ownership is watched: the state moves HELD, SUSPENDED (connection
 * lost: stop using what the lock protects), HELD again (re-verified, the
 * same grant) or LOST (session expired, node deleted); the state
 * listener, zkr_lock_fd() and zkr_lock_valid_ms() (how long the grant is
 * safe to use) say so. One lock on one path with Curator's
 * InterProcessMutex and kazoo's Lock (given extra_lock_patterns=["-lock-"]).
 * Thread-safe; blocking and asynchronous forms.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_lock_state() returns the state,
 * zkr_lock_valid_ms() the milliseconds left (0 when not held),
 * zkr_lock_fd() a descriptor (-1 on failure).
 *
 * \par ERRORS
 * - ZKR_ETIMEDOUT: not granted within the timeout.
 * - ZKR_EBUSY: a try (timeout 0) found it held.
 * - ZKR_ECANCELED: zkr_lock_cancel() or zkr_lock_free() ended the acquire.
 * - ZKR_ELOST: the grant was lost (session LOST, node deleted).
 * - ZKR_EALREADY: held or being acquired through this handle already.
 * - ZKR_ENOTHELD: release, token or sequencer of a lock not held.
 * - ZKR_ESTATE: a call not valid now (a release while an acquire is in
 *   progress, a read/write pair's other side has a node).
 * - ZKR_EDEADLK: a blocking call from a callback.
 * - ZKR_ECLOSED: the session is closed.
 * - ZNOAUTH and ZooKeeper's other codes (the ACL of PATH).
 * - ZBADARGUMENTS, ZKR_ENOMEM, ZKR_ESYS.
 *
 * \par EXAMPLE
 * \code
 * zkr_lock_t *l;
 * int64_t token;
 * zkr_lock_new(&l, s, "/app/locks/report", NULL, NULL);
 * if (zkr_lock_acquire(l, 30000) == 0) {
 *     zkr_lock_token(l, &token);  // give it to the resource you write
 *     write_report(token);        // stop if zkr_lock_fd() turns readable
 *     zkr_lock_release(l);
 * }
 * zkr_lock_free(l);
 * \endcode
 *
 * \sa %zkr_fence(3), %zkr_semaphore(3), %zkr_session(3),
 *   %zkr_contenders(3), %zkr(7), %zkr(1) (zkr lock)
 *
 * @{
 */

/** A fair (FIFO) exclusive lock. Thread-safe. */
typedef struct zkr_lock zkr_lock_t;

/** States of a lock handle. */
typedef enum {
    ZKR_LOCK_IDLE = 0,      /**< not held, not acquiring */
    ZKR_LOCK_ACQUIRING = 1, /**< acquire in progress */
    ZKR_LOCK_HELD = 2,      /**< held, connection healthy or re-verified */
    ZKR_LOCK_SUSPENDED = 3, /**< held, but the connection is down */
    ZKR_LOCK_LOST = 4,      /**< ownership is gone (session lost / node gone) */
    ZKR_LOCK_RELEASING = 5, /**< release in progress */
    /** acquiring, next in line, waiting out a lock-delay: the node it
     * followed went without a release (zkr_lock_set_delay()) */
    ZKR_LOCK_DELAYED = 6
} zkr_lock_state_t;

/** \brief Name of a lock state ("HELD"...); never NULL. */
ZKR_EXTERN const char *zkr_lock_state_name(zkr_lock_state_t state);

/**
 * \brief Creates a lock handle. Does not touch ZooKeeper.
 *
 * Several handles on one path, in one process or many, contend with each
 * other. Contender nodes are `PATH/_c_<uuid>-lock-<seq>`, ephemeral and
 * sequential, with the identifier as data; parents are created as container
 * nodes when missing.
 *
 * \param out OUT: the new handle.
 * \param s the session.
 * \param path absolute, no trailing slash, no empty, "." or ".."
 *   component, valid UTF-8, at most ZKR_PATH_MAX bytes, not "/" nor
 *   under "/zookeeper" (the server's own tree).
 * \param id identifier stored in the node (UTF-8, 1..ZKR_ID_MAX bytes), or
 *   NULL for "hostname:pid".
 * \param acl ACL of the nodes zkr creates, or NULL for ZOO_OPEN_ACL_UNSAFE.
 * \return 0; ZBADARGUMENTS (NULL out or s, invalid path, empty or overlong
 *   id, empty acl); ZKR_ECLOSED (session closed); ZKR_ENOMEM; ZKR_ESYS.
 */
ZKR_EXTERN int zkr_lock_new(zkr_lock_t **out, zkr_session_t *s,
                            const char *path, const char *id,
                            const struct ACL_vector *acl);

/**
 * \brief Frees a lock handle.
 *
 * Cancels a pending acquire (its completion gets ZKR_ECANCELED before this
 * returns; so does one already granted whose completion has not run yet:
 * the grant ends with the free, see zkr_lock_acquire_async()), releases a
 * held lock (the node is deleted by the session in the
 * background if the connection is down), and waits for a running callback
 * of this handle, unless called from that callback. NULL is a no-op.
 *
 * Callable from any callback of the session (this handle's or another's):
 * it then returns without waiting, and the handle's pending completions
 * (ZKR_ECANCELED, or a release's result) run, each exactly once, after the
 * current callback returns; its state listener is not called again. The
 * handle must not be used after this call either way.
 */
ZKR_EXTERN void zkr_lock_free(zkr_lock_t *l);

/**
 * \brief Acquires the lock, waiting at most timeout_ms.
 *
 * Grants are FIFO: in the order contenders' nodes were created. The
 * fencing token is available as soon as this returns 0.
 *
 * A waiter watches its own node: if someone else deletes it, the
 * acquire learns it at once and ends ZKR_ELOST; it is never granted
 * without it. A grant lost before this call could return (the process
 * paused past the session's safe deadline, say) is ZKR_ELOST too. A
 * request of the attempt that could not be made (ZKR_ENOMEM, the client's
 * ZMARSHALLINGERROR) is sent again 20 ms later until the deadline where
 * that is safe. On every error, no node of this attempt is left behind:
 * it is deleted before the return when the server can be reached, else by
 * the session as soon as it can.
 *
 * \param timeout_ms -1 waits forever; 0 tries once (it still needs a few
 *   round trips to the server); N waits at most N ms, unless a request of
 *   the attempt is still unanswered then: the acquire must learn whether
 *   its create was applied, and returns with that answer, which comes
 *   within about 2/3 of the session timeout (the client ends a connection
 *   silent that long) or when zkr closes the handle.
 *
 * \retval 0 held
 * \retval ZKR_EBUSY timeout 0, and another contender holds or waits
 *   before us
 * \retval ZKR_ETIMEDOUT not granted in time
 * \retval ZKR_ECANCELED zkr_lock_cancel(); or granted, then released or
 *   freed by another thread before this call returned
 * \retval ZKR_ELIMIT semaphore: the path is in use with another permit
 *   count
 * \retval ZKR_EALREADY held or being acquired already, or a blocking
 *   acquire of this handle has not returned yet
 * \retval ZKR_ESTATE a release is in progress; or the other side of this
 *   zkr_rwlock_new() pair is held, acquiring or releasing
 * \retval ZKR_ELOST the session was lost, or our node deleted, before the
 *   grant could be returned
 * \retval ZKR_ECLOSED the session is closed
 * \retval ZKR_EDEADLK called from a callback
 * \retval ZBADARGUMENTS NULL handle, timeout below -1
 * \retval ZKR_ENOMEM, ZMARSHALLINGERROR a request of the attempt could
 *   not be made
 * \retval other ZooKeeper codes, such as ZNOAUTH: the path's ACL refuses
 *   us
 */
ZKR_EXTERN int zkr_lock_acquire(zkr_lock_t *l, int timeout_ms);

/** Completion of an asynchronous acquire or release: rc first, data last. */
typedef void (*zkr_lock_completion_t)(int rc, zkr_lock_t *l, void *data);

/**
 * \brief Starts acquiring; `cb` gets the result zkr_lock_acquire() would
 *   return. Callable from callbacks.
 *
 * The result is the one when `cb` is called: a grant lost before that (the
 * event thread ran late, behind another callback or a paused process, past
 * the safe deadline) is reported as ZKR_ELOST, which counts as having
 * observed the loss (see zkr_lock_fd()); the listener's LOST follows. A
 * grant the application let go before that (the handle freed, the lock
 * released, or acquired again, before `cb` ran: in event-loop mode before
 * the next zkr_session_dispatch(), or while the event thread runs another
 * callback) is reported as ZKR_ECANCELED: its node is gone or going, and
 * another contender may hold already. `cb` gets 0 only for a grant still
 * held when it is called.
 * \return 0 (cb will be called exactly once); otherwise an error code as
 *   for zkr_lock_acquire() and cb is never called.
 */
ZKR_EXTERN int zkr_lock_acquire_async(zkr_lock_t *l, int timeout_ms,
                                      zkr_lock_completion_t cb, void *data);

/**
 * \brief Cancels a pending acquire from any thread.
 *
 * The acquire returns (or its completion gets) ZKR_ECANCELED, unless it had
 * already been granted.
 * \return 0 (a pending acquire will end with ZKR_ECANCELED); ZKR_ESTATE
 *   (nothing being acquired); ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_lock_cancel(zkr_lock_t *l);

/**
 * \brief Releases the lock: deletes our node and waits for the server's
 *   confirmation (or for the session to end, which deletes it too).
 *
 * The delete also writes a release record into the lock directory's data,
 * in the same transaction, so that waiters with a lock-delay can tell this
 * release from a death (zkr_lock_set_delay()).
 *
 * Idempotent. Local state is never cleared before the delete is confirmed.
 *
 * The release notifies one waiter (the one watching our node), which lists
 * the queue and is granted only if that listing shows it may be: a grant
 * never rests on what a notification seems to say, since any client may
 * write or delete any contender's node.
 * \return 0 (released); ZKR_ENOTHELD (nothing held); ZKR_ELOST (ownership
 *   had been lost; reported once, the handle is then idle); ZKR_ESTATE (an
 *   acquire is in progress: cancel it instead); ZKR_EDEADLK; ZBADARGUMENTS;
 *   ZKR_ECLOSED (in a forked child: the parent still holds, see \ref fork);
 *   ZooKeeper codes such as ZNOAUTH when the server refuses the delete (no
 *   DELETE right on the path): the node stays, so the lock stays HELD.
 */
ZKR_EXTERN int zkr_lock_release(zkr_lock_t *l);

/**
 * \brief Asynchronous release; `cb` gets what zkr_lock_release() would
 *   return. Callable from callbacks.
 * \return 0 (cb will be called once); else an error as for
 *   zkr_lock_release() and cb is never called.
 */
ZKR_EXTERN int zkr_lock_release_async(zkr_lock_t *l, zkr_lock_completion_t cb,
                                      void *data);

/**
 * \brief Current state; ZKR_LOCK_IDLE for NULL. Reading it ends the
 *   signal of earlier changes on zkr_lock_fd() (not of a loss).
 */
ZKR_EXTERN zkr_lock_state_t zkr_lock_state(zkr_lock_t *l);

/**
 * \brief The fencing token (czxid of our node) of the current grant.
 * \param token OUT.
 * \return 0; ZKR_ENOTHELD (not HELD or SUSPENDED); ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_lock_token(zkr_lock_t *l, int64_t *token);

/**
 * \brief Copies the full path of our node (held or waiting) into buf.
 * \return 0; ZKR_ENOTHELD (no node); ZBADARGUMENTS (NULL, or buf shorter
 *   than the path plus NUL; ZKR_NODE_MAX always fits).
 */
ZKR_EXTERN int zkr_lock_node(zkr_lock_t *l, char *buf, size_t len);

/**
 * \brief Milliseconds for which ownership is still guaranteed: the
 *   session's zkr_session_valid_ms() while HELD, else 0.
 */
ZKR_EXTERN int64_t zkr_lock_valid_ms(zkr_lock_t *l);

/**
 * \brief A file descriptor that is readable when the lock's state has
 *   changed since the application last read it, for poll()-based programs.
 *
 * Readable from each change the state listener hears of (SUSPENDED, HELD
 * again after re-verification, LOST, DELAYED) until the application next calls
 * zkr_lock_state(), which reads the state. So a poll() loop that reads the
 * state when woken wakes once per change: it is quiet while the lock stays
 * SUSPENDED, and wakes again when it is re-verified or lost. Once
 * ownership is lost (LOST), it stays readable, reading or not, until the
 * application has observed the loss, i.e. has called zkr_lock_release()
 * (which reports ZKR_ELOST), was told ZKR_ELOST by an acquire or its
 * completion, or acquires again. A release or a new acquire also clears
 * the changes before it. (zkr_election_fd() signals leadership changes,
 * and is quiet after zkr_election_await() has been told of them.)
 * Do not read from or close it. Made on the first call
 * (a handle never asked costs no descriptor), then the same until the
 * handle is freed. -1 for NULL, or when no descriptor can be made (the
 * process is out of descriptors: call again later).
 */
ZKR_EXTERN int zkr_lock_fd(zkr_lock_t *l);

/** Lock state listener: SUSPENDED, HELD (re-verified), LOST, DELAYED. */
typedef void (*zkr_lock_listener_t)(zkr_lock_t *l, zkr_lock_state_t state,
                                    void *data);

/**
 * \brief Sets (or with NULL fn clears) the lock's state listener, called
 *   when a held lock becomes SUSPENDED, HELD again after re-verification,
 *   or LOST, and when an acquire starts to wait out a lock-delay (DELAYED,
 *   see zkr_lock_set_delay()). LOST comes at the safe deadline, on session
 * expiry, or when the holder's node is deleted by someone else (an operator's
 * forced release): a contender that waited has watched its own node since it
 *   began to wait, and one granted at once watches it from 50 ms after the
 *   grant, so it hears within that plus a round trip.
 * \return 0; ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_lock_set_listener(zkr_lock_t *l, zkr_lock_listener_t fn,
                                     void *data);

/**
 * \brief Sets the lock-delay of this handle's next acquires (Chubby's
 *   lock-delay): when the node this contender waited behind disappears
 *   without a clean zkr release (its holder's session expired, its process
 *   was killed, an operator forced the release, or it was a Curator or
 *   kazoo contender, whose releases cannot be told from deaths), the
 *   contender is not granted until delay_ms have passed since it observed
 *   the disappearance, on its own monotonic clock. Meanwhile its state is
 *   ZKR_LOCK_DELAYED, which the state listener and zkr_lock_fd() signal.
 *   A clean release (zkr_lock_release(), or freeing a held handle) is
 *   proved by a record the release writes into the lock directory's data
 *   in the same transaction as the delete: the next grant is immediate.
 *
 * Every zkr release writes that record, whatever its own delay; zkr
 * therefore owns the data of a lock's directory (an application's data
 * there is overwritten). A release whose directory refuses the write
 * (no WRITE right on the directory) still deletes its node, without the
 * record: delayed waiters then take it for a death. A contender that
 * leaves while delayed (timeout, cancel, free) writes how much of the
 * delay was left, and the next waiter serves that remainder; one that
 * dies instead passes on a full delay. A contender granted on its first
 * listing (nobody before it) is not delayed: it observed no
 * disappearance, unless it rejoined (an election candidate whose node or
 * session was lost while it waited or was delayed), which serves what
 * the lost node owed. Design: docs/design/lock-delay.md.
 *
 * For a semaphore permit or a writer, every node before it counts; for a
 * reader, only writers and exclusive nodes. A departure seen while the
 * contender goes on waiting is not forgotten: unless a record proves it
 * released, the grant comes no earlier than the delay after it. When
 * more than one of them went, and the last exclusive node before the
 * contender, whose release vouches for those before it, does not cover
 * them, no single record can prove them all released: the contender
 * waits the delay (safe, maybe needless).
 * \param delay_ms 0 (off, the default) or the delay in milliseconds.
 * \return 0; ZBADARGUMENTS (NULL, delay_ms < 0); ZKR_ESTATE (an acquire is
 *   in progress).
 */
ZKR_EXTERN int zkr_lock_set_delay(zkr_lock_t *l, int delay_ms);

/** Lock-delay flag (zkr_lock_set_delay_flags()): the disappearance of a
 * node whose name is recognisably not zkr's counts as a clean release. */
#define ZKR_DELAY_TRUST_FOREIGN 0x1u

/**
 * \brief Sets how this handle's next acquires judge a disappearance
 *   (zkr_lock_set_delay()). 0, the default: a node that went without a
 *   zkr release record is a death, whoever owned it.
 *   ZKR_DELAY_TRUST_FOREIGN: a node whose name is recognisably foreign
 *   (any name not "_c_" followed by a UUID: kazoo's "<hex>__lock__" and
 *   "__rlock__", ZooKeeper contrib's "x-<session>-", go-zookeeper's
 *   "_c_<32 hex digits>-lock-") is taken as released when it goes, and
 *   never delays the grant; such a node also vouches for no node before it.
 *
 * Curator names its lock nodes "_c_<UUID>-lock-" (and "-__READ__",
 * "-__WRIT__", "-latch-"), exactly as zkr does: they cannot be told from
 * zkr's, so with this flag too a Curator release is a death unless the
 * delay is 0. The flag trusts the other library's clients: a kazoo holder
 * whose session expired is not delayed for either.
 * \param flags 0 or ZKR_DELAY_TRUST_FOREIGN.
 * \return 0; ZBADARGUMENTS (NULL, an unknown flag); ZKR_ESTATE (an acquire
 *   is in progress).
 */
ZKR_EXTERN int zkr_lock_set_delay_flags(zkr_lock_t *l, unsigned flags);

/**
 * \brief Lists this lock's contenders in queue order (the first holds).
 * \return as zkr_contenders_list().
 */
ZKR_EXTERN int zkr_lock_contenders(zkr_lock_t *l, zkr_contender_t **out,
                                   int *count);

/** @} */

/* ------------------------------------------------------------------------ */
/* Fencing: sequencers, guarded writes, resource-side checks                 */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_fence Fencing tokens: sequencers, guarded writes
 * The checks a resource makes on the tokens it is given are here too.
 *
 * A grant is only as good as the resource's check of it: a holder paused
 * past its session's expiry still believes it holds. zkr gives every
 * grant a fencing token (the czxid of its node, strictly increasing per
 * path) and a sequencer (path, node, token, session, mode: a string to
 * pass along). The resource keeps the highest token it has admitted and
 * refuses older ones (zkr_fence_admit()), or asks ZooKeeper whether the
 * grant still stands (zkr_sequencer_check()); a write to ZooKeeper itself
 * can be made conditional on the grant (zkr_lock_guarded_multi(): the
 * multi fails if the lock's node is gone).
 *
 * \par RETURN VALUE
 * 0 on success (the grant stands, the token is admitted, the multi
 * applied, the text is written), or an error code.
 *
 * \par ERRORS
 * - ZKR_ESTALE: the token is older than one admitted, or the grant is
 *   gone (its node deleted, its session expired).
 * - ZKR_ENOTHELD: the handle holds nothing.
 * - ZKR_EFORMAT: not a sequencer string (zkr_sequencer_parse()).
 * - ZCONNECTIONLOSS, ZOPERATIONTIMEOUT, ZSESSIONEXPIRED: no answer that
 *   proves anything; ask again.
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZBADARGUMENTS, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * // The resource (a storage server) admits a write with its token:
 * static int64_t highest;  // kept durably in a real server
 * if (zkr_fence_admit(&highest, token) != 0)
 *     return reject("stale lock holder");
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_election(3), %zkr(7)
 *
 * @{
 */

/** Buffer size that always fits a formatted sequencer and its NUL. */
#define ZKR_SEQUENCER_MAX (ZKR_NODE_MAX + 64)

/**
 * \brief A grant, as something that can travel.
 *
 * Which node holds it, its fencing token, the session that owns it, and
 * the kind of grant. A plain value: copy it freely.
 */
typedef struct zkr_sequencer {
    char path[ZKR_PATH_MAX + 1]; /**< the recipe's path ("/locks/jobs") */
    char node[ZKR_NODE_MAX];     /**< full path of the holder's node */
    int64_t token;               /**< fencing token: czxid of node */
    int64_t session_id;          /**< owning session (ephemeralOwner) */
    char mode; /**< 'x' exclusive lock, 'r' read, 'w' write, 'l' leader,
                    'p' semaphore permit */
} zkr_sequencer_t;

/**
 * \brief The sequencer of the current grant of a lock.
 * \param out OUT.
 * \return 0; ZKR_ENOTHELD (not HELD); ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_lock_sequencer(zkr_lock_t *l, zkr_sequencer_t *out);

/**
 * \brief Formats a sequencer as one line of text:
 *   `zkr1:<mode>:<token>:<session id, 16 hex digits>:<node path>`.
 * \param buf OUT: at least ZKR_SEQUENCER_MAX bytes always suffice.
 * \return 0; ZBADARGUMENTS (NULL, buffer too small, or q not valid: bad
 *   mode, token <= 0, invalid node path, or a node name that a grant of
 *   that mode cannot have: see zkr_sequencer_parse()).
 */
ZKR_EXTERN int zkr_sequencer_format(const zkr_sequencer_t *q, char *buf,
                                    size_t len);

/**
 * \brief Parses a string made by zkr_sequencer_format(), strictly.
 *
 * Rejected: another prefix or version, an unknown mode, a token that is
 * not a positive decimal without leading zeros, a session id that is not
 * exactly 16 lowercase hex digits, a node path that is not valid or whose
 * last component is not a contender name of the mode's recipe (mode 'x':
 * an exclusive lock's name without a permit count, 'p': a semaphore's
 * `-permits-<N>-lock-` name, 'r': a `__READ__` name, 'w': a `__WRIT__`
 * name, 'l': a `-latch-` name), anything missing or extra.
 * \param out OUT: filled only on success.
 * \return 0; ZKR_EFORMAT (malformed or truncated); ZBADARGUMENTS (NULL).
 */
ZKR_EXTERN int zkr_sequencer_parse(const char *str, zkr_sequencer_t *out);

/**
 * \brief Is this grant current? Checks a sequencer against ZooKeeper.
 *
 * Valid only while the node exists with the sequencer's czxid and owning
 * session *and* holds the grant of the sequencer's mode under its recipe's
 * rule, judged on a listing of the directory: 'x' exclusive lock, 'w'
 * writer and 'l' leader: first in the queue; 'r' reader: no writer or
 * exclusive lock before it; 'p' permit: among the first N contenders of a
 * semaphore of N. A node that is still waiting (a queued reader behind a
 * writer, a writer, a waiting permit) is ZKR_ESTALE, whatever its token.
 *
 * The check first syncs the checker's server with the leader (the server
 * may be a follower that lags behind), then reads: the answer reflects
 * every change committed before the call was made. It is still only an
 * answer about that moment: a grant can be lost right after. A resource
 * must compare tokens itself (zkr_fence_admit()) to refuse a late writer.
 *
 * Any process with a session can check any sequencer; it needs READ on
 * the recipe's directory (to list it; ZNOAUTH otherwise).
 * \return 0 (current); ZKR_ESTALE (node gone, re-created by someone else,
 *   or not granted); ZBADARGUMENTS (also a node name the mode's recipe
 *   cannot have, see zkr_sequencer_parse()); ZKR_EDEADLK (from a callback:
 *   use the async form); ZKR_ECLOSED; ZKR_ENOMEM; ZooKeeper codes
 *   (ZCONNECTIONLOSS, ZNOAUTH...).
 */
ZKR_EXTERN int zkr_sequencer_check(zkr_session_t *s, const zkr_sequencer_t *q);

/** One-shot completion: rc first, data last. Runs on the event thread. */
typedef void (*zkr_result_completion_t)(int rc, void *data);

/**
 * \brief Asynchronous zkr_sequencer_check(); `cb` gets its result.
 * \return 0 (cb will be called once); otherwise an error as for the sync
 *   form, and cb is never called.
 */
ZKR_EXTERN int zkr_sequencer_check_async(zkr_session_t *s,
                                         const zkr_sequencer_t *q,
                                         zkr_result_completion_t cb,
                                         void *data);

/**
 * \brief Runs ZooKeeper operations only while the lock is held.
 *
 * Sends one `zoo_multi`: first a check that the grant's node still
 * exists (`check` with version -1), then `ops`. ZooKeeper applies all or
 * nothing, so the operations commit only if the grant was held when the
 * server applied them, whatever happened to this process meanwhile (pause,
 * partition, expiry). Works for every recipe's handle (lock, permit,
 * reader, writer). Initialise ops with zoo_create_op_init() and friends;
 * their buffers must stay valid until the call completes.
 *
 * The guard is the node's existence, not its data version: ZooKeeper
 * cannot check a czxid in a multi, and the version changes while the grant
 * stays current (the semaphore touches a granted permit's node; Curator's
 * revocation and other clients may write it). The node's name is this
 * grant's alone (its UUID and server-assigned sequence); only a client
 * allowed to delete it and create one of the same name by hand could
 * defeat the guard: protect the recipe with an ACL where that matters.
 * The check needs READ on our own node.
 *
 * \param count number of ops (1..1000).
 * \param results OUT: count results. Always filled (except for
 *   ZBADARGUMENTS): by the server when it answered (a failed multi marks
 *   the ops after the failing one ZRUNTIMEINCONSISTENCY); otherwise each
 *   results[i].err is the code returned (connection loss: outcome unknown)
 *   and its other fields are zero.
 *
 * Nothing was applied after any error but a lost answer
 * (ZCONNECTIONLOSS, ZOPERATIONTIMEOUT: the outcome is unknown, as for any
 * ZooKeeper write). ZNOAUTH with every results[i].err
 * ZRUNTIMEINCONSISTENCY is the server refusing the guard itself: this
 * session may not READ its node, and the grant may well be held.
 *
 * \retval 0 all applied
 * \retval ZKR_ENOTHELD the grant is not held: not locally HELD or
 *   SUSPENDED, or the server found our node gone
 * \retval ZBADARGUMENTS NULL arguments, count out of range
 * \retval ZKR_EDEADLK called from a callback
 * \retval ZKR_ECLOSED the session is closed
 * \retval ZKR_ENOMEM out of memory
 * \retval ZCONNECTIONLOSS, ZOPERATIONTIMEOUT outcome unknown
 * \retval ZSESSIONEXPIRED, ZCLOSING the session ended
 * \retval other the ZooKeeper code of the first failing operation (see
 *   results[i].err)
 */
ZKR_EXTERN int zkr_lock_guarded_multi(zkr_lock_t *l, int count,
                                      const zoo_op_t *ops,
                                      zoo_op_result_t *results);

/**
 * \brief Asynchronous zkr_lock_guarded_multi(); `results` is filled before
 *   `cb` is called with the code the sync form would return.
 * \return 0 (cb will be called once); otherwise an error as for the sync
 *   form, and cb is never called.
 */
ZKR_EXTERN int zkr_lock_guarded_multi_async(zkr_lock_t *l, int count,
                                            const zoo_op_t *ops,
                                            zoo_op_result_t *results,
                                            zkr_result_completion_t cb,
                                            void *data);

/**
 * \brief The resource-side rule for exclusive grants: admits a fencing
 *   token unless a higher one was admitted before.
 *
 * For grants held by one holder at a time: a lock ('x'), a writer ('w'),
 * a leader ('l'). Their tokens strictly increase from one holder to the
 * next, so a lower token is a replaced holder's. Concurrent holders of
 * shared grants — readers ('r'), the permits of a semaphore ('p') — hold
 * different tokens at the same time: with one counter, a current holder
 * whose token is lower than another current holder's would be refused.
 * Do not use one counter for them (a reader that writes to a resource
 * should take the write lock).
 *
 * `*highest` is the highest token the resource has accepted (start at 0).
 * A token lower than it comes from a holder that has since been replaced:
 * it is rejected and `*highest` is unchanged. An equal token is the same
 * grant writing again and is admitted. Atomic: several threads may share
 * one counter. For a database, the same rule is one statement:
 *   `UPDATE t SET v = :v, fence = :token WHERE id = :id AND fence <= :token`
 * (`fence < :token` to allow one write per grant), then check that one row
 * changed.
 * \return 0 (admitted, `*highest` = max(`*highest`, token)); ZKR_ESTALE
 *   (rejected); ZBADARGUMENTS (NULL, or token <= 0).
 */
ZKR_EXTERN int zkr_fence_admit(int64_t *highest, int64_t token);

/** @} */

/* ------------------------------------------------------------------------ */
/* Leader election                                                           */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_election Leader election and observers
 *
 * Leader election on a path: candidates queue as for a lock, the oldest
 * leads, each watches the one before it. A candidate that loses its node
 * or session joins again by itself (a new node, at the back) until it
 * leaves. The leader's epoch (its node's czxid) is a fencing token.
 * zkr_election_run() runs a leader function while leading and tells it to
 * stop (zkr_election_fd() turns readable) when leadership is lost or, under
 * the default policy ZKR_POLICY_SUSPEND, in doubt; a poll() loop instead
 * watches zkr_election_fd() and asks zkr_election_await(e, 0). An observer
 * follows who leads without being a candidate. Candidates' nodes are
 * named as Curator's LeaderLatch names its own: both elect one leader on
 * one path.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_election_run() returns the leader
 * function's value (or 0 once the candidate left); zkr_election_is_leader()
 * 1 or 0; zkr_election_fd() a descriptor (-1 on failure).
 *
 * \par ERRORS
 * - ZKR_ETIMEDOUT: zkr_election_await() timed out, not leading.
 * - ZKR_ESTATE: leave() or await() when not joined; join() while a leave
 *   is still finishing.
 * - ZKR_EALREADY: join() when joined already.
 * - ZKR_ENOTHELD: epoch or sequencer while not leading.
 * - ZKR_ELOST: participation ended with the session (no re-creation).
 * - ZKR_EDEADLK: a blocking call from a callback or the dispatching thread.
 * - ZNOAUTH and ZooKeeper's other codes: the automatic rejoin failed
 *   (participation ended).
 * - ZKR_ECLOSED, ZBADARGUMENTS, ZKR_ENOMEM, ZKR_ESYS.
 *
 * \par EXAMPLE
 * \code
 * static int lead(zkr_election_t *e, void *data)
 * {
 *     int fd = zkr_election_fd(e);  // readable: stop leading
 *     while (!readable(fd))
 *         do_leader_work(data);
 *     return 0;
 * }
 * ...
 * zkr_election_t *e;
 * zkr_election_new(&e, s, "/app/leader", "node-7", NULL, ZKR_POLICY_SUSPEND);
 * zkr_election_run(e, lead, &state, 1);  // requeue: joins again at the
 *                                        // back when lead() returns
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_fence(3), %zkr_contenders(3), %zkr(7),
 *   %zkr(1) (zkr elect)
 *
 * @{
 */

/** A candidate in a leader election. Thread-safe. */
typedef struct zkr_election zkr_election_t;

/** What a candidate assumes while its connection is down. */
typedef enum {
    /** Leadership is given up on SUSPENDED, and regained only after the
     *  node is re-verified on RECONNECTED (Curator's default). */
    ZKR_POLICY_SUSPEND = 0,
    /** Leadership is kept through SUSPENDED, given up only at LOST (the
     *  safe deadline or expiry). Only for work that tolerates it. */
    ZKR_POLICY_SESSION = 1
} zkr_loss_policy_t;

/**
 * \brief Creates a candidate. Does not touch ZooKeeper until joined.
 *
 * Candidates are `PATH/_c_<uuid>-latch-<seq>` nodes (Curator's LeaderLatch
 * naming) with the identifier as data; the oldest is the leader. The
 * leader's epoch is the czxid of its node: strictly higher for every new
 * leader, usable as a fencing token.
 *
 * \param path as for zkr_lock_new().
 * \param id as for zkr_lock_new().
 * \param acl as for zkr_lock_new().
 * \param policy what SUSPENDED means for leadership.
 * \return 0; ZBADARGUMENTS (as zkr_lock_new(), or an unknown policy);
 *   ZKR_ECLOSED; ZKR_ENOMEM; ZKR_ESYS.
 */
ZKR_EXTERN int zkr_election_new(zkr_election_t **out, zkr_session_t *s,
                                const char *path, const char *id,
                                const struct ACL_vector *acl,
                                zkr_loss_policy_t policy);

/**
 * \brief Leaves the election (if joined) and frees the candidate. Waits for
 *   a running callback of it, unless called from that callback. NULL is a
 *   no-op. Callable from any callback of the session: its listener is not
 *   called again, and the rest of the free happens after that callback.
 *
 * A zkr_election_run() on another thread is stopped as by a leave: its
 * leader function is told to stop (the descriptor becomes readable, the
 * candidate is no longer leader), and the free waits until run() has
 * returned (fn's value without requeue, else 0) before our node is
 * deleted, so the next leader never starts beside that function. Called
 * from the leader function itself, or from a callback while run() is
 * active, it returns at once and the rest of the free happens when run()
 * returns. Either way the handle must not be used once free was called.
 *
 * A zkr_election_join(), zkr_election_leave() or zkr_election_await() in
 * progress on another thread is waited for too (or, from the function or
 * a callback, the last of them to return finishes the free): a leave
 * finishes its resignation; a join that has not yet started its acquire
 * gives up with ZKR_ESTATE; an await returns ZKR_ESTATE. A call that
 * begins once the free has begun is a use after free.
 */
ZKR_EXTERN void zkr_election_free(zkr_election_t *e);

/**
 * \brief Joins the election; returns at once.
 *
 * The candidate stays in the election until it leaves: after its session
 * is lost it joins again, at the back of the queue, on the new session.
 * A leave is not over until it resigned: while a leave() waits for a
 * leader function to stop, or one made from inside the function waits for
 * it to return and for run() to resign, join() is ZKR_ESTATE.
 * \return 0; ZKR_EALREADY (joined); ZKR_ESTATE (still leaving); ZKR_ELOST
 *   (an adopted session is LOST for good); ZKR_ECLOSED; ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_election_join(zkr_election_t *e);

/**
 * \brief Leaves the election: resigns leadership (the next candidate in
 *   order takes over) or leaves the queue, and waits until our node is
 *   deleted or our session is gone.
 *
 * A leave always wins over a join() or a zkr_election_run() on another
 * thread: once it returns 0 the candidate holds no node and will not lead
 * until joined again; a running leader function is first told to stop
 * (the descriptor) and waited for. Called from the leader function of
 * zkr_election_run() (on its thread), it returns 0 at once without
 * waiting: leadership ends for the application at once (not leader,
 * descriptor readable), and run() resigns and returns as soon as the
 * function returns, so the next leader never starts beside it.
 * \return 0; ZKR_ESTATE (not joined); ZKR_EDEADLK (from a callback);
 *   ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_election_leave(zkr_election_t *e);

/** \brief 1 if this candidate is the leader now (under its policy). */
ZKR_EXTERN int zkr_election_is_leader(zkr_election_t *e);

/**
 * \brief The state of this candidate's own grant, as zkr_lock_state()
 * gives it for a lock: ZKR_LOCK_IDLE (not joined), ACQUIRING (joined, not
 * leader), HELD (leader, verified), SUSPENDED (leader whose connection is
 * suspended, or not yet re-verified after a reconnection; under
 * ZKR_POLICY_SESSION it still leads, see zkr_election_is_leader()), LOST.
 * Lets a leader under the session policy tell "leading, verified" from
 * "leading, connection in doubt" (the zkr command's --on-suspend does). */
ZKR_EXTERN zkr_lock_state_t zkr_election_state(zkr_election_t *e);

/**
 * \brief Waits until this candidate is the leader.
 *
 * Returning 0 is the application's observation that it leads (with the
 * epoch zkr_election_epoch() now gives): a loss or gain signalled earlier
 * on zkr_election_fd() is cleared. Returning anything else is its
 * observation that it does not lead: a loss or suspension signalled
 * earlier is cleared too, and the descriptor is quiet until the
 * candidate leads again (or is lost again). So call it to start a
 * leadership, or when the descriptor wakes a loop that is not leading,
 * never from another thread while a leader works (it would clear that
 * leader's stop signal; use zkr_election_is_leader() or the epoch to
 * check a leadership).
 * \param timeout_ms -1 forever, 0 check, N ms.
 * \return 0 (leader); ZKR_ETIMEDOUT; ZKR_ESTATE (not joined, or it left
 *   meanwhile); ZKR_EDEADLK (from a callback; or, with timeout_ms -1, on
 *   the thread that dispatches the session's callbacks, see
 *   zkr_session_dispatch()); ZBADARGUMENTS; or the error that ended its
 *   participation (e.g. ZNOAUTH).
 */
ZKR_EXTERN int zkr_election_await(zkr_election_t *e, int timeout_ms);

/**
 * Leadership listener: `leader` is 1 when leadership was gained, 0 when it
 * was lost (or given up: a leave, a resignation of zkr_election_run()).
 * Every change is reported, in order, even when the event thread runs
 * late: a loss followed by a new grant is reported as 0 then 1 (the state
 * at delivery may already have moved on; zkr_election_epoch() tells which
 * leadership is current). A leadership the application gave up itself (a
 * leave, a free) before the listener was told of it is not reported at
 * all, neither its gain nor its end: another candidate may lead by then.
 * `rc` is nonzero only when participation ended on
 * an error (the candidate is then no longer joined). An error delivered
 * late, after the application left and joined again, belongs to the
 * candidacy that is over: it is not reported, and the new one goes on.
 */
typedef void (*zkr_election_listener_t)(zkr_election_t *e, int leader, int rc,
                                        void *data);

/** \brief Sets (NULL clears) the listener. \return 0; ZBADARGUMENTS. */
ZKR_EXTERN int zkr_election_set_listener(zkr_election_t *e,
                                         zkr_election_listener_t fn,
                                         void *data);

/**
 * \brief Sets the lock-delay of this candidate, as zkr_lock_set_delay():
 *   a candidate whose predecessor went without a clean leave (resign,
 *   leave, free) does not lead until delay_ms after it observed that.
 *   Meanwhile it is first in line, and observers in any process see that
 *   it does not lead: a candidate with a delay names its node so (a UUID
 *   of version 8) and touches the node (sets the same identifier again)
 *   once it leads; until then zkr_observer_new() reports no leader and
 *   zkr_contenders_holding() counts none (docs/design/lock-delay.md 1.7).
 *   A candidate whose ACL does not let its creator write its node cannot
 *   touch it: it does not announce itself, and is reported as soon as it
 *   is first. Any write to a waiting candidate's node counts as its
 *   touch (readers cannot tell who wrote): a client that writes it makes
 *   it look leading; an ACL that lets only the creator write prevents it.
 * \return 0; ZBADARGUMENTS (NULL, delay_ms < 0); ZKR_ESTATE (joined and
 *   not yet leading).
 */
ZKR_EXTERN int zkr_election_set_delay(zkr_election_t *e, int delay_ms);

/**
 * \brief Sets this candidate's lock-delay flags, as
 *   zkr_lock_set_delay_flags().
 * \return 0; ZBADARGUMENTS (NULL, an unknown flag); ZKR_ESTATE (joined and
 *   not yet leading).
 */
ZKR_EXTERN int zkr_election_set_delay_flags(zkr_election_t *e, unsigned flags);

/**
 * \brief The leader's epoch (czxid of our node) while we lead.
 * \return 0; ZKR_ENOTHELD (not leader); ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_election_epoch(zkr_election_t *e, int64_t *epoch);

/** \brief The leadership as a sequencer (mode 'l'); as zkr_lock_sequencer. */
ZKR_EXTERN int zkr_election_sequencer(zkr_election_t *e, zkr_sequencer_t *out);

/**
 * \brief A descriptor that signals leadership changes the application has
 *   not observed yet: a gain, a loss, and under ZKR_POLICY_SUSPEND a
 *   suspension (a loss under that policy). For a leader it is the stop
 *   signal; for a poll() loop, also the wake-up to lead.
 *
 * Readable (poll() POLLIN) from the moment of any of:
 * - a gain: the candidate became leader (or, under ZKR_POLICY_SUSPEND,
 *   leads again after a suspension that zkr_election_await() reported as
 *   "not leader"). Readable until the application observes the
 *   leadership: zkr_election_await() returning 0, zkr_election_run()
 *   starting the leader function, a leave() or a join().
 * - a loss: the leader's node is deleted (an operator's forced release),
 *   the session is LOST (expiry, the safe deadline), or a leave() asks a
 *   running leader function to stop. It stays readable until the
 *   application has observed it: zkr_election_await() returning 0,
 *   ZKR_ETIMEDOUT, ZKR_ESTATE or the error that ended participation,
 *   zkr_election_run() starting the leader function again, a
 *   leave() or a join(). In particular it stays readable after the
 *   candidate, which rejoins by itself, has become leader again with a
 *   new epoch.
 * - the end of participation: an error such as ZNOAUTH on the automatic
 *   rejoin (the candidate is no longer joined). Readable until
 *   zkr_election_await() has returned that error (or a join()).
 * - under ZKR_POLICY_SUSPEND only, SUSPENDED. A SUSPENDED that ends in
 *   re-verification of the same node (same epoch) clears it again, unless
 *   zkr_election_await() observed it (then the re-verification is a
 *   gain). Under ZKR_POLICY_SESSION SUSPENDED does not make it readable
 *   (the candidate still leads): the listener of zkr_session_add_listener()
 *   and zkr_election_state() report it.
 *
 * A leader function (zkr_election_run()) starts with everything observed,
 * so what makes it readable while the function runs is a stop: a new gain
 * can only follow a loss, which is signalled already. A poll() loop that
 * does not lead yet waits with the descriptor in its set; when woken, it
 * calls zkr_election_await(e, 0): 0 means "lead now", anything else "do
 * not lead", and either way the descriptor is quiet until the next
 * change (no spinning while it waits behind another leader or stays
 * suspended). examples/evloop.c leads this way. Do not read from or
 * close it. -1 for NULL, or when no descriptor can be made.
 */
ZKR_EXTERN int zkr_election_fd(zkr_election_t *e);

/**
 * The work of a leader. It must stop its leader work and return as soon as
 * zkr_election_fd() is readable (poll it; it is quiet when the function
 * starts, and while it runs only a stop makes it readable).
 * zkr_election_is_leader() alone is not enough: after a loss the candidate may
 * lead again, with a new epoch, before the function looks; a function that
 * checks leadership instead must compare zkr_election_epoch() with the epoch it
 * started with. It may call zkr_election_leave() to step down (see there). Its
 * return value is returned by zkr_election_run() (without requeue).
 */
typedef int (*zkr_leader_fn)(zkr_election_t *e, void *data);

/**
 * \brief Runs fn on the calling thread whenever this candidate is leader.
 *
 * Joins if needed and waits for leadership, then calls fn. Without
 * `requeue`, it resigns once fn returns and returns fn's value. With
 * `requeue`, it resigns when fn returns and joins again at the back, and
 * after a loss waits to be leader again; it returns 0 once
 * zkr_election_leave() is called (from another thread, or from fn).
 * When fn returns after its leadership was SUSPENDED while it ran (the
 * descriptor asked it to stop, ZKR_POLICY_SUSPEND), run() does not
 * resign, even if the suspension is already over when fn returns: it
 * waits for the suspension to end and, if the node is re-verified, calls
 * fn again with the same epoch (with or without `requeue`); if it is lost,
 * it goes on as after a loss (without `requeue`, returns fn's value). A
 * function that means to give the leadership up whatever the connection
 * did meanwhile calls zkr_election_leave() before returning.
 * fn never runs on two candidates at once while they respect the stop
 * signal: a loss makes the descriptor readable before the next candidate
 * can be granted wherever the loss is seen first by this process (an
 * expiry past the safe deadline, a leave, a deletion seen by our own
 * watch); a deletion by someone else is seen by both candidates' sessions
 * at about the same time, which fencing with the epoch covers.
 * \return fn's value; 0 (left); ZKR_EDEADLK (from a callback, or on the
 *   thread that dispatches the session's callbacks, see
 *   zkr_session_dispatch()); ZBADARGUMENTS; errors of
 *   zkr_election_join() and zkr_election_await().
 */
ZKR_EXTERN int zkr_election_run(zkr_election_t *e, zkr_leader_fn fn, void *data,
                                int requeue);

/**
 * \brief The candidates in order; the first one is the leader (its czxid is
 *   the epoch) when zkr_contenders_holding() on this listing says 1: with
 *   0, the first candidate is waiting out its lock-delay and nobody leads
 *   yet. As zkr_contenders_list() on the election path; anyone can call it
 *   without joining.
 */
ZKR_EXTERN int zkr_election_participants(zkr_election_t *e,
                                         zkr_contender_t **out, int *count);

/** Watches who leads an election without taking part. Thread-safe. */
typedef struct zkr_observer zkr_observer_t;

/**
 * Called on every change of leader the observer sees, in order: the new
 * leader's identifier and epoch, or NULL and 0 when there is none. The
 * first candidate is the leader, except while it waits out a lock-delay
 * (zkr_election_set_delay(), in any process): then there is none, and the
 * candidate is reported once it leads, one round trip after it knows (it
 * says so in ZooKeeper: docs/design/lock-delay.md 1.7). Foreign candidates
 * (Curator, kazoo) and zkr candidates without a delay lead as soon as they
 * are first. A leadership shorter than one round trip may be missed. When the
 * leader's node (or the election's directory) cannot be read, `leader_id` is
 * NULL and `epoch` is the error, which is negative (ZNOAUTH: the ACL grants us
 * no READ); it is reported once, and the next change as usual.
 */
typedef void (*zkr_observer_fn)(zkr_observer_t *o, const char *leader_id,
                                int64_t epoch, void *data);

/**
 * \brief Starts observing the election at path. Creates no node; the
 *   callback first reports the current leader.
 * \return 0; ZBADARGUMENTS; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_observer_new(zkr_observer_t **out, zkr_session_t *s,
                                const char *path, zkr_observer_fn fn,
                                void *data);

/**
 * \brief Stops observing (removes its watches) and frees the observer;
 *   waits for a running callback unless called from it. NULL is a no-op.
 *   Callable from any callback of the session: its callback is not called
 *   again.
 */
ZKR_EXTERN void zkr_observer_free(zkr_observer_t *o);

/** @} */

/* ------------------------------------------------------------------------ */
/* Counting semaphore and read/write lock                                    */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_semaphore Counting semaphore and read/write lock
 *
 * Two more lock shapes on the lock's handle (zkr_lock_t), acquired,
 * released, watched and fenced with the zkr_lock_* calls. A counting
 * semaphore lets up to N contenders hold at once (N fixed per path, in
 * every node's name, so a contender with another count is refused); a
 * granted permit touches its node so that only the next waiter wakes. A
 * read/write lock is a pair of handles on one path: readers hold together,
 * a writer alone, in arrival order (a waiting writer holds back later
 * readers). The read/write pair shares one path with Curator's
 * InterProcessReadWriteLock and respects kazoo's read and write nodes; the
 * semaphore's layout is zkr's own (README.md says which form meets which
 * peer).
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; the handles in *out (*read, *write).
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, an invalid path, permits < 1.
 * - ZKR_ELIMIT: the path is in use with another permit count.
 * - ZKR_ESTATE: one side of a read/write pair acquired while the other
 *   has a node.
 * - The zkr_lock_* errors otherwise (zkr_lock(3)).
 *
 * \par EXAMPLE
 * \code
 * zkr_lock_t *permit, *rd, *wr;
 * zkr_semaphore_new(&permit, s, "/app/gpu", 4, NULL, NULL);  // 4 at once
 * if (zkr_lock_acquire(permit, -1) == 0) {
 *     train();
 *     zkr_lock_release(permit);
 * }
 * zkr_rwlock_new(&rd, &wr, s, "/app/config-lock", NULL, NULL);
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_fence(3), %zkr(7), %zkr(1) (zkr sem, zkr rwlock)
 *
 * @{
 */

/**
 * \brief Creates one permit handle of a FIFO counting semaphore of
 *   `permits` permits at path.
 *
 * The handle is a zkr_lock_t: acquire (timeout, async, cancel), release,
 * token (each permit has its own, strictly increasing in grant order),
 * sequencer (mode 'p'), loss listener and descriptor all work as for a
 * lock. Permits are granted in enqueue order; a release wakes O(1)
 * waiters. Nodes are `PATH/_c_<uuid>-permits-<N>-lock-<seq>`; an acquire
 * whose N differs from that of the oldest contender on the path fails with
 * ZKR_ELIMIT (contenders already queued with the path's N are not
 * affected). The first N entries of zkr_lock_contenders() hold permits,
 * the rest wait.
 *
 * A granted permit touches its node (writes its own identifier again) to
 * wake the waiter behind it, so the ACL should let the creator write
 * (world:anyone or "auth" with WRITE). With an ACL that does not say so,
 * waiters watch the directory instead (a release then wakes every waiter).
 * Contenders of one path should share the ACL: a waiter watches the node
 * ahead only if that node's ACL lets everyone write or is the same as its
 * own node's (one getACL per node ahead), else the directory. That ACL
 * is read once: if an operator later takes WRITE from the node ahead
 * (setACL), its touch fails when it is granted, and the waiter behind it
 * waits until that node is released, even with a permit free (a liveness
 * limit; never more than `permits` holders).
 *
 * \return as zkr_lock_new(); ZBADARGUMENTS also for permits < 1.
 */
ZKR_EXTERN int zkr_semaphore_new(zkr_lock_t **out, zkr_session_t *s,
                                 const char *path, int permits, const char *id,
                                 const struct ACL_vector *acl);

/**
 * \brief Creates the two sides of a FIFO read/write lock at path: readers
 *   share, a writer excludes everyone.
 *
 * A reader waits only for writers enqueued before it; a writer waits for
 * everyone before it, so writers are not starved. Nodes carry Curator's
 * `__READ__` / `__WRIT__` markers (`_c_<uuid>-__READ__<seq>`). Both handles
 * are zkr_lock_t (modes 'r' and 'w'); free each with zkr_lock_free().
 *
 * The two handles of one call are one owner. Neither side is acquired
 * while the other has a node: zkr_lock_acquire() (or its async form) on
 * one side while the other is held, being acquired or being released
 * returns ZKR_ESTATE at once. There is no upgrade (read to write: the
 * write node would queue behind our own read node and wait for it without
 * end) and no downgrade (write to read, which Curator allows): release
 * one side, then acquire the other, knowing that another contender may be
 * granted in between. Handles of different calls, in one process or many,
 * contend as usual. Once one side is freed, the other acquires freely.
 * \return as zkr_lock_new(); on error neither handle is created.
 */
ZKR_EXTERN int zkr_rwlock_new(zkr_lock_t **read, zkr_lock_t **write,
                              zkr_session_t *s, const char *path,
                              const char *id, const struct ACL_vector *acl);

/** @} */

/* ------------------------------------------------------------------------ */
/* Multi-lock                                                                */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_multilock Multi-lock: several locks, all or nothing
 *
 * Acquires several lock handles (any mix of exclusive locks, read or
 * write sides and semaphore permits, zkr_lock_new(), zkr_rwlock_new(),
 * zkr_semaphore_new()) all or nothing, under one timeout for the whole
 * set, and releases them together. Each member stays an ordinary
 * zkr_lock_t with its own node, state, descriptor and fencing token
 * (zkr_lock_token() of zkr_multilock_member()), so a Curator
 * InterProcessMutex or a kazoo Lock on any one of the paths respects it.
 *
 * **No deadlock.** Members are acquired one at a time in one canonical
 * order, the byte order of their paths (strcmp(); a session's chroot
 * prefixes every path alike, so the order is the server's too), whatever
 * order they were given in. A contender that waits on a path holds only
 * members of smaller paths, so no cycle of multi-locks (or of
 * single-lock holders, who hold one path) can form. Curator's
 * InterProcessMultiLock takes its members in the order of its list: a
 * Curator multi-lock whose list is not in byte order, on paths a zkr
 * multi-lock also takes, can deadlock with it (each holds a path the
 * other waits for) until one's timeout; give Curator the paths sorted.
 *
 * **One timeout.** timeout_ms bounds the whole acquire: each member is
 * given what is left of it (Curator gives each lock the full time, N
 * times t in all). When a member cannot be had (timed out, busy for a
 * try, canceled, lost, refused), the members already granted are
 * released, in reverse order, before the result is returned (or the
 * completion called): the set is not left partly held (should the
 * server refuse to delete one of them, ZNOAUTH, the acquire returns that
 * code with that member still held, and zkr_multilock_release() gives it
 * back once it may). A grant of an
 * earlier member lost while a later one is awaited (a foreign client
 * deleted its node, say) fails the acquire with ZKR_ELOST once the later
 * ones are granted (the loss is checked then; a session's loss ends the
 * awaited member's acquire at once).
 *
 * The members must belong to one session and lie on different paths (a
 * read/write pair's two sides, or two handles of one path, would wait for
 * each other). The multi-lock does not own them: free it before them, and
 * do not acquire, release or free a member through its own calls while
 * the multi-lock has it.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_multilock_state() returns a state,
 * zkr_multilock_fd() a descriptor (-1 on failure).
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, no member, more than #ZKR_MULTILOCK_MAX, a NULL
 *   member, members of two sessions or of one path.
 * - ZKR_ETIMEDOUT, ZKR_EBUSY, ZKR_ECANCELED, ZKR_ELOST, ZKR_ELIMIT,
 *   ZKR_ESTATE, ZKR_EALREADY and ZooKeeper's codes: a member's acquire
 *   ended so (zkr_lock_acquire()); no member is held then, but for one
 *   whose release was refused (its code is then the result).
 * - ZKR_ENOTHELD: a release of a multi-lock not held.
 * - ZKR_EDEADLK: a blocking call from a callback.
 *
 * \par EXAMPLE
 * \code
 * zkr_lock_t *a, *b;
 * zkr_multilock_t *both;
 * zkr_lock_new(&a, s, "/app/accounts/17", NULL, NULL);
 * zkr_lock_new(&b, s, "/app/accounts/4", NULL, NULL);
 * zkr_lock_t *members[] = {b, a};  // any order: /17 is taken before /4
 * zkr_multilock_new(&both, members, 2);
 * if (zkr_multilock_acquire(both, 10000) == 0) {   // 10 s for both
 *     transfer(a, b);                  // zkr_lock_token() of each
 *     zkr_multilock_release(both);
 * }
 * zkr_multilock_free(both);
 * zkr_lock_free(a);
 * zkr_lock_free(b);
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_semaphore(3), %zkr(1) (zkr lock PATH PATH...)
 *
 * @{
 */

/** Several lock handles acquired together. Thread-safe. */
typedef struct zkr_multilock zkr_multilock_t;

/** The most members of one multi-lock. */
#define ZKR_MULTILOCK_MAX 64

/** Completion of an asynchronous acquire or release: rc first, data last. */
typedef void (*zkr_multilock_completion_t)(int rc, zkr_multilock_t *m,
                                           void *data);

/**
 * \brief Creates a multi-lock of `count` lock handles. Does not touch
 *   ZooKeeper, and does not take ownership of the members.
 * \return 0; ZBADARGUMENTS (see the group's errors); ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_multilock_new(zkr_multilock_t **out,
                                 zkr_lock_t *const *members, int count);

/**
 * \brief Frees a multi-lock without waiting for the server (as
 *   zkr_lock_free()): ends an acquire in progress (its completion gets
 *   ZKR_ECANCELED, perhaps after this returns; a blocking acquire of
 *   another thread returns ZKR_ECANCELED) and gives back in the
 *   background the members it holds (or could not give back after a
 *   failed acquire). It waits for a running completion of it, unless
 *   called from a callback or on a session in event-loop mode
 *   (`no_event_thread`). The members are not freed: free them after it
 *   (as soon as it returns, from a callback too). A blocking call of it
 *   already running on another thread returns (ZKR_ECANCELED, or its
 *   result); no new call may start. NULL is a no-op.
 */
ZKR_EXTERN void zkr_multilock_free(zkr_multilock_t *m);

/**
 * \brief Acquires every member, waiting at most timeout_ms in all: the
 *   members' blocking acquires one after another (so, as they, it needs
 *   no event thread or dispatch); after a failure, their blocking
 *   releases.
 * \param timeout_ms -1 forever; 0 tries each member once (ZKR_EBUSY if one
 *   is held by another contender); N at most N ms for the whole set (a
 *   member's acquire may overrun it as zkr_lock_acquire() says).
 * \return 0: every member held; else the error that ended it (see the
 *   group's errors), with no member held; ZKR_EALREADY (held or being
 *   acquired), ZKR_ESTATE (being released), ZKR_EDEADLK (from a callback).
 */
ZKR_EXTERN int zkr_multilock_acquire(zkr_multilock_t *m, int timeout_ms);

/**
 * \brief Starts acquiring; `cb` gets what zkr_multilock_acquire() would
 *   return, on the session's event thread. Callable from callbacks.
 * \return 0 (cb will be called exactly once); else an error and cb is
 *   never called.
 */
ZKR_EXTERN int zkr_multilock_acquire_async(zkr_multilock_t *m, int timeout_ms,
                                           zkr_multilock_completion_t cb,
                                           void *data);

/**
 * \brief Cancels a pending acquire from any thread: it ends with
 *   ZKR_ECANCELED, members granted so far released (unless its last
 *   member was granted already: then it ends with 0).
 * \return 0; ZKR_ESTATE (nothing being acquired); ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_multilock_cancel(zkr_multilock_t *m);

/**
 * \brief Releases every member (in reverse canonical order), each as
 *   zkr_lock_release().
 * After a failed acquire that could not give a member back (see the
 * group), it releases that member.
 * \return 0; ZKR_ELOST (a member's grant had been lost: the others are
 *   released); ZKR_ENOTHELD (not held); ZKR_ESTATE (an acquire or a
 *   release is in progress); ZKR_EDEADLK; or a member's refusal (ZNOAUTH:
 *   that member's node stays, the multi-lock stays held: release again).
 */
ZKR_EXTERN int zkr_multilock_release(zkr_multilock_t *m);

/**
 * \brief Asynchronous release; `cb` gets what zkr_multilock_release()
 *   would return. Callable from callbacks.
 * \return 0 (cb will be called once); else an error and cb is never
 *   called.
 */
ZKR_EXTERN int zkr_multilock_release_async(zkr_multilock_t *m,
                                           zkr_multilock_completion_t cb,
                                           void *data);

/**
 * \brief The state of the set: IDLE, ACQUIRING, RELEASING; once held,
 *   LOST if a member's grant is lost (or was released by its own call),
 *   else SUSPENDED if one is suspended, else HELD. Reads each member's
 *   state (zkr_lock_state()). ZKR_LOCK_IDLE for NULL.
 */
ZKR_EXTERN zkr_lock_state_t zkr_multilock_state(zkr_multilock_t *m);

/** \brief The number of members (0 for NULL). */
ZKR_EXTERN int zkr_multilock_count(zkr_multilock_t *m);

/**
 * \brief The i-th member in canonical order (the order of acquisition),
 *   or NULL when i is out of range. Its zkr_lock_token() is that path's
 *   fencing token.
 */
ZKR_EXTERN zkr_lock_t *zkr_multilock_member(zkr_multilock_t *m, int i);

/**
 * \brief Milliseconds for which every member's grant is still guaranteed
 *   (the least of their zkr_lock_valid_ms()); 0 when not held.
 */
ZKR_EXTERN int64_t zkr_multilock_valid_ms(zkr_multilock_t *m);

/**
 * \brief A descriptor readable while any member's zkr_lock_fd() is (an
 *   epoll descriptor over them): poll it, then read
 *   zkr_multilock_state(). Made on the first call, closed by the free; -1
 *   for NULL or when a descriptor cannot be made (call again later). Do
 *   not read from or close it.
 */
ZKR_EXTERN int zkr_multilock_fd(zkr_multilock_t *m);

/** @} */

/* ------------------------------------------------------------------------ */
/* Work queue (docs/design/workq.md)                                         */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_workq Fenced FIFO work queue with priorities
 *
 * A FIFO work queue with priority levels 0 (served first) to 3. Producers put
 * items; a consumer takes one, and holds it as a lock: it has a fencing
 * token and a state (HELD, SUSPENDED, LOST), and must ack it (done: the
 * item is deleted, exactly once, also when the answer is lost) or nack it
 * (given back). An item whose consumer dies becomes available again; with
 * dead-lettering (zkr_workq_set_dead_letter()) one delivered too often is
 * moved aside. Waiting consumers are served in the order they came; a
 * consumer that finds items claims one without waiting in line.
 * Layout and protocol: docs/design/workq.md.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_workq_take() the item in *out
 * (free it with zkr_item_free()); zkr_workq_len() the count in *count.
 *
 * \par ERRORS
 * - ZKR_ETIMEDOUT: no item within the timeout (take).
 * - ZKR_ECANCELED: zkr_workq_cancel() or zkr_workq_free() ended a take.
 * - ZKR_ESTALE: the claim was lost before the ack or nack: nothing
 *   changed, and another consumer may have the item.
 * - ZKR_EINDOUBT: an ack whose answer was lost with the session: it may
 *   have applied.
 * - ZKR_ESTATE: a call not valid now (acked already, a take in progress).
 * - ZCONNECTIONLOSS: a put that may or may not have been made (the
 *   session changed before its answer).
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZNOAUTH, ZBADARGUMENTS, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * zkr_workq_t *q;
 * zkr_item_t *it;
 * size_t len;
 * zkr_workq_new(&q, s, "/app/jobs", NULL, NULL);
 * zkr_workq_put(q, "resize 4711", 11, 0, NULL, 0);
 * if (zkr_workq_take(q, -1, &it) == 0) {
 *     const char *job = zkr_item_data(it, &len);
 *     if (run(job, len) == 0)
 *         zkr_item_ack(it);
 *     else
 *         zkr_item_nack(it, ZKR_NACK_BACK);
 *     zkr_item_free(it);
 * }
 * \endcode
 *
 * \sa %zkr_lock(3), %zkr_fence(3), %zkr(7), %zkr(1) (zkr queue)
 *
 * @{
 */

/** A fenced FIFO work queue with fair consumers. Thread-safe. (Not
 * `zkr_queue_*`: ZooKeeper's contrib C recipes own those names.) */
typedef struct zkr_workq zkr_workq_t;

/** An item taken from a work queue and claimed by this session, until it
 * is acked, nacked or freed. Thread-safe. */
typedef struct zkr_item zkr_item_t;

/** Priority levels: 0 is served first; FIFO within a level. */
#define ZKR_WORKQ_LEVELS 4
/** The level of zkr_workq_put() (level 0 is above it, 2 and 3 below). */
#define ZKR_WORKQ_LEVEL_DEFAULT 1
/** The largest item, in bytes (an item travels whole in one request, and
 * ZooKeeper refuses requests above jute.maxbuffer, 1 MiB by default). */
#define ZKR_WORKQ_DATA_MAX (512 * 1024)
/** Buffer size that always fits an item id and its NUL. */
#define ZKR_WORKQ_ID_MAX 128

/**
 * \brief Creates a work queue handle at path. Does not touch ZooKeeper.
 *
 * The same path may be used by any number of handles, processes and
 * machines, each a producer, a consumer or both. Layout and protocol:
 * docs/design/workq.md.
 * \param id identifier of this consumer, stored in its claims and in its
 *   place in the line of waiting consumers (UTF-8, 1..ZKR_ID_MAX bytes),
 *   or NULL for "hostname:pid".
 * \param acl ACL of every node zkr creates, or NULL for
 *   ZOO_OPEN_ACL_UNSAFE.
 * \return as zkr_lock_new().
 */
ZKR_EXTERN int zkr_workq_new(zkr_workq_t **out, zkr_session_t *s,
                             const char *path, const char *id,
                             const struct ACL_vector *acl);

/**
 * \brief Frees a work queue handle. A pending take ends with
 *   ZKR_ECANCELED first (its completion runs); items taken through the
 *   handle stay valid and must be freed on their own. Same rules for
 *   callbacks as zkr_lock_free(). NULL is a no-op.
 */
ZKR_EXTERN void zkr_workq_free(zkr_workq_t *q);

/**
 * \brief Dead-lettering: an item that has been delivered `max` times and
 *   becomes available again (its consumer died, or nacked it) is moved to
 *   dead_path instead of being delivered again.
 * \param max 0 (never, the default) or the most deliveries of one item.
 * \param dead_path where dead items go (a persistent node each, named as
 *   in the queue, with the item's data), or NULL for PATH/dead.
 * \return 0; ZBADARGUMENTS (NULL q, max < 0, invalid dead_path);
 *   ZKR_ESTATE (a take is in progress); ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_workq_set_dead_letter(zkr_workq_t *q, int max,
                                         const char *dead_path);

/**
 * \brief Puts an item at the back of a priority level.
 *
 * Exactly once, also when the connection is lost before the answer: the
 * put's transaction also creates an ephemeral receipt (PATH/receipts/,
 * then the put's UUID); a put whose answer was lost reads it (after a
 * sync) in the same session: there, the put applied; gone, it did not
 * and is sent again.
 * If the session changed meanwhile (the receipt went with it), the item
 * is looked for by its UUID in its bucket; not found, the put returns
 * ZCONNECTIONLOSS (may or may not have been put), never a second copy.
 * An applied put whose item was already consumed by the time it looked
 * returns 0 and, as id, the item's id without its sequence number (it
 * ends in the UUID and a '-').
 * \param data the item's bytes (may be NULL when len is 0).
 * \param len 0..ZKR_WORKQ_DATA_MAX.
 * \param level 0..ZKR_WORKQ_LEVELS-1.
 * \param id OUT, may be NULL: the item's id (its node path relative to the
 *   queue's path), NUL-terminated; idlen bytes (ZKR_WORKQ_ID_MAX always
 *   fit).
 *
 * ZCONNECTIONLOSS comes once the session's request timeout passed
 * without an answer, or when the answer was lost and the session expired
 * before the put could prove its outcome. ZNONODE or ZBADVERSION come
 * when the level's nodes kept being changed by others through a bounded
 * number of retries.
 *
 * \retval 0 put
 * \retval ZBADARGUMENTS NULL, len or level out of range, id buffer too
 *   small
 * \retval ZKR_EDEADLK called from a callback: use the async form
 * \retval ZKR_ECLOSED the session is closed
 * \retval ZKR_ENOMEM out of memory
 * \retval ZCONNECTIONLOSS the item may or may not have been put
 * \retval ZNONODE, ZBADVERSION nothing was put (see above)
 * \retval other ZooKeeper codes, such as ZNOAUTH: nothing was put
 */
ZKR_EXTERN int zkr_workq_put(zkr_workq_t *q, const void *data, size_t len,
                             int level, char *id, size_t idlen);

/** Completion of zkr_workq_put_async(): rc, the item's id (NULL unless rc
 * is 0; valid during the call only), data last. */
typedef void (*zkr_put_completion_t)(int rc, const char *item_id, void *data);

/** \brief Asynchronous put; `cb` gets what zkr_workq_put() would return.
 *   The data is copied. Callable from callbacks.
 * \return 0 (cb will be called exactly once); else an error as for
 *   zkr_workq_put() and cb is never called. */
ZKR_EXTERN int zkr_workq_put_async(zkr_workq_t *q, const void *data, size_t len,
                                   int level, zkr_put_completion_t cb,
                                   void *cbdata);

/**
 * \brief Takes the next item: waits at most timeout_ms for one.
 *
 * The item is the oldest available one of the highest level that the
 * take finds: not claimed by a live consumer (a claim is an ephemeral node
 * under the item; nodes that other clients make under an item are not
 * claims, and are deleted so that the item can be taken and completed).
 * It is claimed by this session (an ephemeral node under the item) and
 * its delivery count incremented in one transaction; the claim ends with
 * the session, making the item available again.
 *
 * A take that finds an item claims it at once. A take that finds none,
 * or finds the items it looks at taken by other consumers, joins a FIFO
 * line of zkr lock contenders at PATH/consumers: only the first in line
 * waits for items, so a put wakes one waiting consumer whatever their
 * number, and waiting consumers are served in the order they began
 * waiting. A consumer goes on from where its last take claimed (the rest
 * of that bucket of the level) and lists the queue from the top again
 * when that runs out, when an item is put at a higher level, or when it
 * gave an item back itself: an item that another consumer gave back
 * before that point (a nack to the front, a claim lost) is found by the
 * next take that lists from the top. The first deliveries that one handle
 * takes of one level come in put order. docs/design/workq.md, section 3,
 * has the exact promises.
 *
 * Head of the line: the first in line holds the turn while it waits for
 * an item. If that consumer is cut off (partitioned, paused, SIGSTOPped)
 * the others that wait in line stay behind it until its session expires
 * (at most the session timeout after it was cut off, plus the server's
 * expiry tick) or it comes back: as for a lock holder, this is inherent to
 * a FIFO line. A take that finds an item meanwhile is not held up. Give
 * consumers short session timeouts to bound it.
 *
 * \param timeout_ms -1 forever, 0 only what is there now, N ms (as
 *   zkr_lock_acquire()). A request of the take that is out when the
 *   deadline passes (or a cancel comes) is answered first: a claim sent
 *   is granted and the item returned (0), or not (each claim made counts
 *   a delivery, so none is abandoned half-made while connected). The
 *   take can thus end one answer late; at worst when the client finds
 *   the connection lost.
 * \param out OUT: the item; free it with zkr_item_free().
 * \return 0; ZKR_ETIMEDOUT (nothing within timeout_ms; also for
 *   timeout 0 and an empty queue); ZKR_ECANCELED (zkr_workq_cancel());
 *   ZKR_EALREADY (a take of this handle is in progress: one at a time per
 *   handle); ZKR_ELOST (the session was lost while waiting, or the claim
 *   was lost before the take returned it: the item is not handed over,
 *   and is available again); ZKR_ECLOSED;
 *   ZKR_EDEADLK; ZBADARGUMENTS; ZKR_ENOMEM; ZooKeeper codes (ZNOAUTH).
 */
ZKR_EXTERN int zkr_workq_take(zkr_workq_t *q, int timeout_ms, zkr_item_t **out);

/** Completion of zkr_workq_take_async(): rc, the item (NULL unless rc is
 * 0; then the application owns it), data last. */
typedef void (*zkr_take_completion_t)(int rc, zkr_item_t *item, void *data);

/** \brief Asynchronous take; `cb` gets what zkr_workq_take() would
 *   return, on the session's event thread (a claim lost before cb runs
 *   is ZKR_ELOST, as for zkr_workq_take()). Callable from callbacks;
 *   starts no thread (the take is a chain of asynchronous requests).
 * \return 0 (cb will be called exactly once); else an error as for
 *   zkr_workq_take() and cb is never called. */
ZKR_EXTERN int zkr_workq_take_async(zkr_workq_t *q, int timeout_ms,
                                    zkr_take_completion_t cb, void *data);

/** The most items zkr_workq_take_batch() claims in one take. */
#define ZKR_WORKQ_BATCH_MAX 1024

/**
 * \brief Takes up to max items in one take: waits at most timeout_ms for
 *   the first, as zkr_workq_take() waits for its item, then claims those
 *   it finds available at once, in the same order, up to max in all,
 *   without waiting for more (and without joining the line of waiting
 *   consumers).
 *
 * Each item has its own claim, fencing token, state and delivery count,
 * and is acked, nacked and freed on its own, as an item of
 * zkr_workq_take(). Items not acked or nacked go back at once when they
 * are freed (zkr_item_free()), and with the session. A cancel, the
 * deadline or an error after the first claim ends the batch with the
 * items claimed so far (0); a claim lost before the call returns is
 * freed and not counted.
 *
 * \param max 1..ZKR_WORKQ_BATCH_MAX.
 * \param items OUT: an array of max pointers; the first *count are the
 *   items (the rest NULL).
 * \param count OUT: how many, >= 1 when 0 is returned, else 0.
 * \return 0; otherwise as zkr_workq_take() (nothing claimed);
 *   ZBADARGUMENTS for max out of range.
 */
ZKR_EXTERN int zkr_workq_take_batch(zkr_workq_t *q, int max, int timeout_ms,
                                    zkr_item_t **items, int *count);

/** Completion of zkr_workq_take_batch_async(): rc, the items (an array
 * valid during the call only; the items are the application's), their
 * count (>= 1 when rc is 0), data last. */
typedef void (*zkr_take_batch_completion_t)(int rc, zkr_item_t **items,
                                            int count, void *data);

/** \brief Asynchronous zkr_workq_take_batch(); `cb` gets what it would
 *   return. Callable from callbacks.
 * \return 0 (cb will be called exactly once); else an error as for
 *   zkr_workq_take_batch() and cb is never called. */
ZKR_EXTERN int zkr_workq_take_batch_async(zkr_workq_t *q, int max,
                                          int timeout_ms,
                                          zkr_take_batch_completion_t cb,
                                          void *data);

/** \brief Cancels a pending take from any thread: it ends with
 *   ZKR_ECANCELED unless it already had its item, or a claim it had sent
 *   is granted (zkr_workq_take(): then 0 and the item).
 * \return 0; ZKR_ESTATE (no take pending); ZBADARGUMENTS. */
ZKR_EXTERN int zkr_workq_cancel(zkr_workq_t *q);

/**
 * \brief The number of items in the queue (available and claimed, every
 *   level), from the nodes' child counts: no item listing.
 * \return 0; ZBADARGUMENTS; ZKR_EDEADLK; ZKR_ECLOSED; ZooKeeper codes.
 *   A queue never used counts 0.
 */
ZKR_EXTERN int zkr_workq_len(zkr_workq_t *q, int64_t *count);

/** \brief One item of a queue, as read from ZooKeeper (zkr_workq_items()). */
typedef struct zkr_item_info {
    char *id;          /**< item id (relative to the queue's path) */
    int level;         /**< priority level */
    int deliveries;    /**< times delivered so far */
    int claimed;       /**< claimed by a live consumer now (its first
                          contender node is ephemeral) */
    int64_t claim_sid; /**< the claiming session, when claimed */
    char *claim_id;    /**< the consumer's identifier, when claimed */
    int64_t ctime_ms;  /**< when it was put (server clock) */
    int64_t size;      /**< its data's length */
} zkr_item_info_t;

/**
 * \brief Lists up to max items in the order they would be served (for
 *   zkr inspect and tests): reads bucket by bucket, never the whole queue.
 * \param out OUT: free with zkr_item_infos_free(); NULL when count is 0.
 * \return 0; as zkr_workq_len().
 */
ZKR_EXTERN int zkr_workq_items(zkr_workq_t *q, int max, zkr_item_info_t **out,
                               int *count);

/** \brief Frees an array from zkr_workq_items(); NULL is a no-op. */
ZKR_EXTERN void zkr_item_infos_free(zkr_item_info_t *v, int count);

/** \brief The item's data (valid until zkr_item_free()); its length in
 *   *len (may be NULL). NULL for NULL it. */
ZKR_EXTERN const void *zkr_item_data(const zkr_item_t *it, size_t *len);

/** \brief The item's id (relative to the queue's path); "" for NULL. */
ZKR_EXTERN const char *zkr_item_id(const zkr_item_t *it);

/** \brief How many times the item has been delivered, this delivery
 *   included (1 the first time); 0 for NULL. Counted from the claims made
 *   under the item (its child version: one create and one delete per
 *   claim), so writes to the item's data by others do not count. */
ZKR_EXTERN int zkr_item_deliveries(const zkr_item_t *it);

/** \brief The item's priority level; -1 for NULL. */
ZKR_EXTERN int zkr_item_level(const zkr_item_t *it);

/** \brief State of the claim, as for a lock: ZKR_LOCK_HELD, SUSPENDED,
 *   LOST, or IDLE after an ack or nack; reading it ends the descriptor's
 *   signal of earlier changes (as zkr_lock_state()). */
ZKR_EXTERN zkr_lock_state_t zkr_item_state(zkr_item_t *it);

/** \brief The claim's fencing token (czxid of the claim node): strictly
 *   greater than that of every earlier delivery of any item of the queue's
 *   ZooKeeper ensemble. 0; ZKR_ENOTHELD (not HELD or SUSPENDED);
 *   ZBADARGUMENTS. */
ZKR_EXTERN int zkr_item_token(zkr_item_t *it, int64_t *token);

/** \brief The claim's sequencer (mode 'x': the claim is an exclusive lock
 *   whose directory is the item's node): zkr_sequencer_check() tells
 *   whether the claim is current. 0; ZKR_ENOTHELD; ZBADARGUMENTS. */
ZKR_EXTERN int zkr_item_sequencer(zkr_item_t *it, zkr_sequencer_t *out);

/** \brief Milliseconds for which the claim is still guaranteed (as
 *   zkr_lock_valid_ms()). */
ZKR_EXTERN int64_t zkr_item_valid_ms(zkr_item_t *it);

/** \brief A descriptor readable when the claim's state changed (as
 *   zkr_lock_fd()). */
ZKR_EXTERN int zkr_item_fd(zkr_item_t *it);

/** Claim state listener: SUSPENDED, HELD (re-verified), LOST. */
typedef void (*zkr_item_listener_t)(zkr_item_t *it, zkr_lock_state_t state,
                                    void *data);

/** \brief Sets (NULL fn clears) the claim's state listener. 0;
 *   ZBADARGUMENTS. */
ZKR_EXTERN int zkr_item_set_listener(zkr_item_t *it, zkr_item_listener_t fn,
                                     void *data);

/**
 * \brief Completes the item: one transaction deletes the claim and the
 *   item, and commits only while the claim is still ours (our claim node
 *   exists; writes to the item's data by others do not matter).
 *
 * The claim is lost when the session expired, the process was paused past
 * the safe deadline, or someone deleted the claim node. ZKR_EINDOUBT means
 * the ack was sent, its answer was lost, and the session ended before its
 * outcome could be read: the item may or may not be completed, and
 * another consumer may get it again if it was not. The ack is not sent
 * again then (later calls return ZKR_ESTATE). After a ZooKeeper error the
 * claim stays HELD and the ack may be tried again.
 *
 * \retval 0 completed: no consumer will get the item again
 * \retval ZKR_ESTALE the claim was lost: nothing changed, and another
 *   consumer may have the item
 * \retval ZKR_EINDOUBT the outcome is unknown (see above)
 * \retval ZKR_ESTATE acked or nacked already
 * \retval ZKR_EDEADLK called from a callback
 * \retval ZKR_ECLOSED the session is closed
 * \retval ZBADARGUMENTS NULL item
 * \retval other ZooKeeper codes: nothing changed, the claim is kept
 */
ZKR_EXTERN int zkr_item_ack(zkr_item_t *it);

/** Where zkr_item_nack() puts the item back. */
typedef enum {
    ZKR_NACK_FRONT = 0, /**< where it was: the next take gets it again */
    ZKR_NACK_BACK = 1   /**< at the back of its level */
} zkr_nack_where_t;

/**
 * \brief Gives the item back: available again, at the front (where it
 *   was) or the back of its level, its delivery count kept. Commits only
 *   while the claim is ours, as zkr_item_ack(). To the back, the data
 *   read at the take is put back: if another client wrote the item's data
 *   meanwhile, the nack returns ZKR_ESTALE and the item, with its new
 *   data, is available where it was.
 * \return as zkr_item_ack(); ZBADARGUMENTS also for an unknown where.
 */
ZKR_EXTERN int zkr_item_nack(zkr_item_t *it, zkr_nack_where_t where);

/** Completion of an asynchronous ack or nack: rc first, data last. */
typedef void (*zkr_item_completion_t)(int rc, zkr_item_t *it, void *data);

/** \brief Asynchronous zkr_item_ack(); callable from callbacks. 0 (cb
 *   will be called once) or an error as for zkr_item_ack(). */
ZKR_EXTERN int zkr_item_ack_async(zkr_item_t *it, zkr_item_completion_t cb,
                                  void *data);

/** \brief Asynchronous zkr_item_nack(); callable from callbacks. */
ZKR_EXTERN int zkr_item_nack_async(zkr_item_t *it, zkr_nack_where_t where,
                                   zkr_item_completion_t cb, void *data);

/**
 * \brief Frees an item. A claim still held is given back first
 *   (zkr_item_nack(ZKR_NACK_FRONT), in the background if the connection
 *   is down; the session's end gives it back too). Same rules for
 *   callbacks as zkr_lock_free(). NULL is a no-op.
 */
ZKR_EXTERN void zkr_item_free(zkr_item_t *it);

/** @} */

/* ------------------------------------------------------------------------ */
/* Atomic counter                                                            */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_atomic Atomic counter
 *
 * A signed 64-bit counter in one node's data: get, add, set and
 * compare-and-set, each a read then a write conditional on the version
 * read (a conflict reads again, so every update is applied exactly once
 * or not at all). No node, or empty data, counts as 0; the first update
 * creates the node (and its missing ancestors, persistent, with the
 * handle's ACL). The data is Apache Curator's DistributedAtomicLong
 * encoding by default (8 bytes, big-endian two's complement), or with
 * #ZKR_ATOMIC_TEXT kazoo's Counter encoding (decimal ASCII, "-5"): a
 * Curator or kazoo counter on the same path, with the same encoding, sees
 * every zkr update and zkr sees theirs. Every client of a path must use
 * one encoding.
 *
 * A write whose answer is lost with the connection or the session is not
 * sent again blindly (Curator and kazoo do, and may count twice): once
 * connected, zkr syncs and reads the node. When it shows that the write
 * did not apply (the node as it was read, which zkr then fences with a
 * write of the same bytes at that version so that the lost write can never
 * apply late; or the version after it holding another value; for a lost
 * create, no node and no child of the parent made or deleted since), the
 * operation starts over; otherwise it ends with ZKR_EINDOUBT (the result
 * says from which value to which it may have moved the counter). A set that
 * finds its own value there returns 0: the counter holds what it asked, whoever
 * wrote it. Every write is conditional, also at version -1 (ZooKeeper's
 * versions wrap: a multi checks it).
 *
 * A get reads from the server the session is connected to: it sees every
 * update of this session, and another client's update once that server
 * has it (ZooKeeper's reads). Updates are always made on the latest
 * value, and an answer that rests on a read alone (a compare-and-set that
 * did not match, an add out of range, data that is not a value) comes
 * from a read made after a sync.
 *
 * With #ZKR_ATOMIC_TEXT the data must be exactly `-?[0-9]+` within the
 * 64-bit range ("+5", " 5" and "5\n" are not values, though Python's
 * int() takes them; kazoo never writes them).
 *
 * \par RETURN VALUE
 * 0 on success, or an error code.
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, an invalid path or flag, an add that would leave
 *   the 64-bit range (nothing written).
 * - ZKR_EFORMAT: the node's data is not a value of the handle's encoding.
 * - ZKR_EINDOUBT: an update whose answer was lost, and the node changed
 *   since: it may or may not have applied.
 * - ZCONNECTIONLOSS: no answer within the session timeout plus the
 *   request timeout of the operation's start or its last answer (not
 *   connected); nothing was changed. ZKR_ENOMEM likewise when its requests
 *   could not be sent for want of memory.
 * - ZNONODE: the node could not be created: its parent was missing again
 *   after its ancestors were made, three times (the session's chroot
 *   deleted, say); nothing was changed.
 * - ZKR_ELOST: the session was lost and is not re-created (`no_reconnect`
 *   or an adopted handle); nothing was changed.
 * - ZKR_ECANCELED: zkr_atomic_free() ended an asynchronous operation.
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZNOAUTH, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * zkr_atomic_t *shard;
 * int64_t mine;
 * zkr_atomic_new(&shard, s, "/app/next-shard", 0, NULL);
 * if (zkr_atomic_add(shard, 1, &mine) == 0)
 *     serve_shard(mine - 1);     // 0, 1, 2, ...: each handed out once
 * zkr_atomic_free(shard);
 * \endcode
 *
 * \sa %zkr(7), %zkr(1) (zkr counter)
 *
 * @{
 */

/** An atomic counter at one path. Thread-safe. */
typedef struct zkr_atomic zkr_atomic_t;

/** zkr_atomic_new() flag: kazoo's Counter encoding (decimal text). */
#define ZKR_ATOMIC_TEXT 1

/** The operations of zkr_atomic_async(). */
typedef enum {
    ZKR_ATOMIC_GET = 0, /**< read the value */
    ZKR_ATOMIC_ADD = 1, /**< add a (may be negative) */
    ZKR_ATOMIC_SET = 2, /**< set to a */
    ZKR_ATOMIC_CAS = 3  /**< set to b if the value is a */
} zkr_atomic_op_t;

/** \brief What an atomic counter's operation found and did. */
typedef struct zkr_atomic_result {
    int64_t before; /**< the value the operation read (0: no node) */
    int64_t after;  /**< the value it wrote (with ZKR_EINDOUBT: would have
                         written); the value read when it wrote nothing (a
                         get, a compare-and-set that did not match) */
    int changed;    /**< 1 if it wrote, 0 if not */
} zkr_atomic_result_t;

/** Called once on the session's event thread when an asynchronous
 * operation ends: rc as the blocking call would return, r valid during
 * the call. */
typedef void (*zkr_atomic_completion_t)(int rc, const zkr_atomic_result_t *r,
                                        void *data);

/**
 * \brief Creates a counter handle at path. Sends nothing.
 * \param flags 0 (Curator's encoding) or #ZKR_ATOMIC_TEXT (kazoo's).
 * \param acl the ACL of the nodes it creates; NULL: world:anyone, all.
 * \return 0; ZBADARGUMENTS; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_atomic_new(zkr_atomic_t **out, zkr_session_t *s,
                              const char *path, int flags,
                              const struct ACL_vector *acl);

/**
 * \brief Frees the handle. Asynchronous operations still under way end
 *   with ZKR_ECANCELED (one whose write's outcome is being resolved ends
 *   as resolved, or ZKR_EINDOUBT), after waiting for an answer in flight.
 *   NULL is a no-op; callable from a callback. Not while a blocking call
 *   on it runs.
 */
ZKR_EXTERN void zkr_atomic_free(zkr_atomic_t *c);

/** \brief Reads the value into *value. */
ZKR_EXTERN int zkr_atomic_get(zkr_atomic_t *c, int64_t *value);

/** \brief Adds delta; the value after it in *value (NULL: not wanted). */
ZKR_EXTERN int zkr_atomic_add(zkr_atomic_t *c, int64_t delta, int64_t *value);

/** \brief Sets the value. */
ZKR_EXTERN int zkr_atomic_set(zkr_atomic_t *c, int64_t value);

/**
 * \brief Sets the value to `value` if it is `expect` (no node counts as
 *   0). *swapped is 1 if it did, 0 if the value differed; *now the value
 *   after the call (either may be NULL).
 */
ZKR_EXTERN int zkr_atomic_cas(zkr_atomic_t *c, int64_t expect, int64_t value,
                              int *swapped, int64_t *now);

/**
 * \brief Any operation, blocking, with its whole result in *r (may be
 *   NULL). a and b as zkr_atomic_op_t says.
 */
ZKR_EXTERN int zkr_atomic_run(zkr_atomic_t *c, zkr_atomic_op_t op, int64_t a,
                              int64_t b, zkr_atomic_result_t *r);

/**
 * \brief Starts any operation; cb is called once when it ends.
 * \return 0 (cb will be called); ZBADARGUMENTS (cb NULL too); ZKR_ECLOSED;
 *   ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_atomic_async(zkr_atomic_t *c, zkr_atomic_op_t op, int64_t a,
                                int64_t b, zkr_atomic_completion_t cb,
                                void *data);

/** @} */

/** \defgroup zkr_barrier Barrier: set, clear, wait until cleared
 *
 * A barrier is one node: it stands while the node exists. Set creates
 * it, clear deletes it, and a wait returns once it does not stand. The
 * layout is kazoo's Barrier and Apache Curator's DistributedBarrier (the
 * node at the path, any data): a kazoo or Curator client on the same
 * path sets, clears and waits on the same barrier as zkr.
 *
 * **A setter that dies.** By default the node is ephemeral: it lives as
 * long as the setter's session, so a setter that dies (its session
 * expires) clears the barrier instead of leaving its waiters blocked for
 * ever, as a Curator barrier whose remover dies does. It is not set again
 * on a new session. #ZKR_BARRIER_PERSISTENT makes a persistent node (the
 * layout kazoo and Curator create), which stands until someone clears
 * it: for a barrier set by one process and cleared by another (`zkr
 * barrier set`).
 *
 * **Waiting.** A wait first syncs (a server that lags behind the leader
 * cannot show it a barrier cleared before the call, nor hide one set
 * before it), reads its parent's stat, then watches the node. It returns
 * 0 once the node is gone, or once it sees another node there than the
 * one that stood when it began (one made after that read, or another
 * than the one it first saw: the barrier was cleared and set again, say
 * while the session was being re-created after expiry, when no watch
 * could tell, or while the answer to its first look was lost; not the
 * latter under a parent whose child counter is stuck at 2147483647,
 * where ZooKeeper 3.8 leaves the parent's stat behind). Through a
 * lost connection it waits on (the watch survives a reconnection; after
 * a session expiry it looks again on the new session) until its timeout.
 * It always looks once (the sync, the parent's stat and the read), so on
 * a slow or lagging server a wait may return after its timeout, by up to
 * about twice the session timeout (each of the three requests is
 * answered, or the connection given up, within two thirds of it). A wait that
 * ends leaves no watch behind (a watch whose removal cannot be queued for want
 * of memory stays until the node changes).
 *
 * **Lost answers.** A set or clear whose answer is lost with the
 * connection is not sent again blindly: once connected, zkr syncs and
 * reads the node. A set that finds the barrier standing returns 0
 * (created is 1 only if the node holds this call's data, a UUID of its
 * own); a set that finds no node, and no child of the parent made or
 * deleted since it looked, creates it again; else the barrier may have
 * been set by this call and cleared since, and it returns ZKR_EINDOUBT.
 * A clear that finds no node, or another node than the one it read (a new
 * czxid), returns 0: the barrier was cleared during the call. When the
 * outcome cannot be read (no connection within the bound below, the
 * session lost for good, the handle freed while not connected), a set or
 * clear whose answer was lost returns ZKR_EINDOUBT: it may or may not
 * have applied. A clear deletes at the version it read; ZooKeeper has no
 * delete conditional on the czxid, so a node deleted and set again
 * between the read and the delete (at version 0 again) is deleted too,
 * which is a clear right after that set.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code.
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, an invalid path or flag, the root, a timeout
 *   below -1.
 * - ZKR_ETIMEDOUT: a wait whose timeout passed with the barrier standing.
 * - ZKR_EINDOUBT: a set or clear whose answer was lost, and its outcome
 *   unknown: the barrier may or may not stand (for a set that found it
 *   not standing: this call may have set it, and someone, or the
 *   session's expiry, cleared it since; for an ephemeral set that found
 *   its node owned by a session zkr gave up on: it goes when that session
 *   expires).
 * - ZCONNECTIONLOSS: a set or clear with no answer within the session
 *   timeout plus the request timeout of its start or its last answer
 *   (not connected); the barrier was not changed (missing ancestors may
 *   have been made).
 * - ZNOTEMPTY: a clear of a node that has children (not a barrier).
 * - ZNOCHILDRENFOREPHEMERALS: a set under an ephemeral parent.
 * - ZNONODE: a set whose parent was missing again after its ancestors
 *   were made, three times; the barrier was not set.
 * - ZKR_ELOST: the session was lost and is not re-created
 *   (`no_reconnect` or an adopted handle).
 * - ZKR_ECANCELED: zkr_barrier_free() ended an asynchronous operation.
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZNOAUTH, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * zkr_barrier_t *b;
 * zkr_barrier_new(&b, s, "/app/maintenance", 0, NULL);
 * // operator: zkr_barrier_set(b, NULL); ...; zkr_barrier_clear(b, NULL);
 * // workers:
 * if (zkr_barrier_wait(b, 60000) == 0)
 *     resume_work();              // not in maintenance (any more)
 * zkr_barrier_free(b);
 * \endcode
 *
 * \sa %zkr(7), %zkr(1) (zkr barrier)
 *
 * @{
 */

/** A barrier at one path. Thread-safe. */
typedef struct zkr_barrier zkr_barrier_t;

/** zkr_barrier_new() flag: set makes a persistent node, which stands
 *  until cleared even if the setter dies (kazoo's and Curator's). */
#define ZKR_BARRIER_PERSISTENT 1

/** The operations of zkr_barrier_async(). */
typedef enum {
    ZKR_BARRIER_SET = 0,   /**< create the node */
    ZKR_BARRIER_CLEAR = 1, /**< delete it */
    ZKR_BARRIER_WAIT = 2   /**< wait until it does not stand */
} zkr_barrier_op_t;

/** Called once on the session's event thread when an asynchronous
 * operation ends: rc as the blocking call would return; changed as
 * zkr_barrier_set()'s *created or zkr_barrier_clear()'s *removed (0 for
 * a wait). */
typedef void (*zkr_barrier_completion_t)(int rc, int changed, void *data);

/**
 * \brief Creates a barrier handle at path. Sends nothing.
 * \param flags 0 (ephemeral: the setter's death clears it) or
 *   #ZKR_BARRIER_PERSISTENT.
 * \param acl the ACL of the nodes it creates (the barrier and its missing
 *   ancestors, persistent); NULL: world:anyone, all.
 * \return 0; ZBADARGUMENTS; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_barrier_new(zkr_barrier_t **out, zkr_session_t *s,
                               const char *path, int flags,
                               const struct ACL_vector *acl);

/**
 * \brief Frees the handle. Asynchronous operations still under way end
 *   with ZKR_ECANCELED (a set or clear whose answer was lost is resolved
 *   first while connected), after waiting for an answer in flight. Does
 *   not clear the barrier (an ephemeral one stands until the session
 *   ends). NULL is a no-op; callable from a callback. Not while a
 *   blocking call on it runs.
 */
ZKR_EXTERN void zkr_barrier_free(zkr_barrier_t *b);

/**
 * \brief Sets the barrier (creates the node and its missing ancestors).
 *   0 also when it stood already; *created (may be NULL) is 1 if this
 *   call made the node, 0 if it stood.
 */
ZKR_EXTERN int zkr_barrier_set(zkr_barrier_t *b, int *created);

/**
 * \brief Clears the barrier (deletes the node, whoever set it). 0 also
 *   when it did not stand; *removed (may be NULL) is 1 if this call is
 *   known to have deleted it (0 when it did not, or when its answer was
 *   lost and the node found gone: cleared during the call, by this call
 *   or another).
 */
ZKR_EXTERN int zkr_barrier_clear(zkr_barrier_t *b, int *removed);

/**
 * \brief Waits until the barrier does not stand, for timeout_ms (-1: no
 *   limit; 0: look once; see "Waiting" above for a slow server).
 * \return 0 (not standing, or cleared since the call began);
 *   ZKR_ETIMEDOUT; the errors above.
 */
ZKR_EXTERN int zkr_barrier_wait(zkr_barrier_t *b, int timeout_ms);

/**
 * \brief Starts any operation; cb is called once when it ends. timeout_ms
 *   is a wait's (ignored by set and clear).
 * \return 0 (cb will be called); ZBADARGUMENTS (cb NULL too); ZKR_ECLOSED;
 *   ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_barrier_async(zkr_barrier_t *b, zkr_barrier_op_t op,
                                 int timeout_ms, zkr_barrier_completion_t cb,
                                 void *data);

/** @} */

/** \defgroup zkr_dbarrier Double barrier: start and end a phase together
 *
 * A double barrier starts a phase when N participants have entered and
 * ends it when all have left. Each participant is an ephemeral child of
 * the path named by a random UUID (32 hex digits) holding the handle's
 * id; the phase has begun once the child `ready` exists. The layout is
 * kazoo's DoubleBarrier and Apache Curator's DistributedDoubleBarrier:
 * kazoo, Curator and zkr participants on one path count each other.
 *
 * **Enter** watches `ready`, creates the participant node (and the
 * path), then returns 0 once `ready` exists (its watch tells it, even if
 * `ready` is deleted again at once), or once it counts at least N
 * participants and makes `ready` itself. It makes `ready` in one
 * transaction with a check that each of the N participants it counted
 * still exists, so a participant that died (its session expired) between
 * the count and the create is not counted: no phantom member opens the
 * phase. (When a participant cannot be read, kazoo's or Curator's with an
 * ACL of its own, or when the checks would not fit in one request, about
 * 256 KiB of paths, `ready` is made with the check of its own node only,
 * much as kazoo and Curator make it with none.) A participant that dies counts
 * as leaving (its node goes with its session); so does one whose node someone
 * deletes after its enter returned. While it enters, a participant whose node
 * is deleted by another client makes it again and counts again. Through a lost
 * connection enter waits on; after a session expiry it creates its node
 * again on the new session (its node of the old session, if the server
 * still keeps it, is deleted first); if the phase began and ended while
 * it was away, it waits for the next one. An enter that times out with
 * fewer than N removes its node and returns ZKR_ETIMEDOUT (a participant
 * that counted it in that instant sees a member that entered and left at
 * once).
 *
 * **Leave** deletes the participant node, then returns 0 once no
 * participant is left (it watches the path's children), deleting `ready`
 * (Curator's order; kazoo deletes it at the start of its leave). Every
 * leaver watches the children, so N leavers get up to N*N events (kazoo
 * and Curator chain their leavers, with fewer events and a leave that
 * waits on the lowest participant). A participant of the next round that
 * enters before the last one of this round has left delays this round's
 * leave until it leaves, and may find `ready` still standing and enter at
 * once, as in kazoo and Curator; so does a round after one whose
 * participants all died before leaving: use a new path per round. kazoo's
 * leave deletes `ready` first: a participant that has not looked yet
 * (its enter still on its way to the server) may then count fewer than N
 * and wait, as kazoo's own participants would.
 *
 * **Free** deletes the participant node if it stands (a handle that is
 * gone does not participate any more); an operation under way ends with
 * ZKR_ECANCELED, even one whose answer said it entered.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code.
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, an invalid path (or one longer than
 *   #ZKR_PATH_MAX - 33, with the node's name), the root, count below 1,
 *   an id not of 1 to #ZKR_ID_MAX bytes of UTF-8, a timeout below -1.
 * - ZKR_ETIMEDOUT: an enter with fewer than count participants by its
 *   timeout (its node is removed, or handed to the session's cleanup
 *   when not connected); a leave with participants left by its timeout,
 *   or, when not connected, one that could not look by then (its own
 *   node is deleted, or handed to the session's cleanup). A leave of 0
 *   while not connected is ZKR_ETIMEDOUT at once: wait for the
 *   connection first if the last leaver must delete `ready`.
 * - ZKR_ESTATE: another operation of the handle is under way.
 * - ZNOCHILDRENFOREPHEMERALS: the path is an ephemeral node.
 * - ZNONODE: the path was missing again after its ancestors were made,
 *   three times.
 * - ZKR_ELOST: the session was lost and is not re-created
 *   (`no_reconnect` or an adopted handle).
 * - ZKR_ECANCELED: zkr_dbarrier_free() ended an asynchronous operation.
 * - ZINVALIDACL: an empty ACL given to zkr_dbarrier_new().
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZNOAUTH, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * zkr_dbarrier_t *d;
 * zkr_dbarrier_new(&d, s, "/jobs/nightly/phase1", 4, "worker-7", NULL);
 * if (zkr_dbarrier_enter(d, 600000) == 0) {
 *     run_phase();                  // all 4 workers run it together
 *     zkr_dbarrier_leave(d, -1);    // returns when all 4 are done
 * }
 * zkr_dbarrier_free(d);
 * \endcode
 *
 * \sa %zkr(7), %zkr(1) (zkr barrier enter)
 *
 * @{
 */

/** A double barrier participant at one path. Thread-safe; one operation
 *  at a time. */
typedef struct zkr_dbarrier zkr_dbarrier_t;

/** The operations of zkr_dbarrier_async(). */
typedef enum {
    ZKR_DBARRIER_ENTER = 0, /**< enter: wait for count participants */
    ZKR_DBARRIER_LEAVE = 1  /**< leave: wait for all to leave */
} zkr_dbarrier_op_t;

/** Called once on the session's event thread when an asynchronous
 *  operation ends, with rc as the blocking call would return. */
typedef void (*zkr_dbarrier_completion_t)(int rc, void *data);

/**
 * \brief Creates a participant handle at path for count participants.
 *   Sends nothing.
 * \param id the participant node's data (NULL: "HOST:PID").
 * \param acl the ACL of the nodes it creates: the path and its missing
 *   ancestors, the participant node and `ready` (NULL: world:anyone,
 *   all).
 * \return 0; ZBADARGUMENTS; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_dbarrier_new(zkr_dbarrier_t **out, zkr_session_t *s,
                                const char *path, int count, const char *id,
                                const struct ACL_vector *acl);

/**
 * \brief Frees the handle: its participant node, if it stands, is
 *   deleted (by the session's cleanup). An asynchronous operation under
 *   way ends with ZKR_ECANCELED, after waiting for an answer in flight.
 *   NULL is a no-op; callable from a callback. Not while a blocking call
 *   on it runs.
 */
ZKR_EXTERN void zkr_dbarrier_free(zkr_dbarrier_t *d);

/** The participant node's name (32 hex digits), the same for the life
 *  of d. */
ZKR_EXTERN const char *zkr_dbarrier_name(const zkr_dbarrier_t *d);

/**
 * \brief Enters: waits until count participants have entered, for
 *   timeout_ms (-1: no limit; 0: look once).
 * \return 0 (the phase has begun); ZKR_ETIMEDOUT; the errors above.
 */
ZKR_EXTERN int zkr_dbarrier_enter(zkr_dbarrier_t *d, int timeout_ms);

/**
 * \brief Leaves: deletes the participant node and waits until no
 *   participant is left, for timeout_ms (-1: no limit; 0: look once).
 * \return 0 (all have left); ZKR_ETIMEDOUT; the errors above.
 */
ZKR_EXTERN int zkr_dbarrier_leave(zkr_dbarrier_t *d, int timeout_ms);

/**
 * \brief Starts enter or leave; cb is called once when it ends.
 * \return 0 (cb will be called); ZBADARGUMENTS (cb NULL too); ZKR_ESTATE;
 *   ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_dbarrier_async(zkr_dbarrier_t *d, zkr_dbarrier_op_t op,
                                  int timeout_ms, zkr_dbarrier_completion_t cb,
                                  void *data);

/** @} */

/* ------------------------------------------------------------------------ */
/* Group membership                                                          */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_group Group membership: join, leave, and who is there
 *
 * A group is a path whose members are ephemeral children: a control
 * plane registers its live daemons and watches who is there. A handle
 * (zkr_group_new()) keeps a view of the members current by watches from
 * the moment it is made, whether or not it joins; zkr_group_join() makes
 * it a member too.
 *
 * **Layout** (kazoo's Party): a member is the ephemeral node
 * `PATH/<id>__party__` whose data is the member's data (by default its
 * id). The members of a group are the children of PATH whose names
 * contain `__party__`, as kazoo counts them; a member's id is its node's
 * name without the `__party__` suffix (a kazoo Party member's id is the
 * 32 hex digits of its random name, and its data is kazoo's identifier).
 * So kazoo's Party lists a zkr member by its data, which is its id unless
 * data was given; other children of PATH (a Curator GroupMember's, whose
 * names are its ids) are not members here. Curator's GroupMember with
 * the id `ID__party__` makes a node zkr lists as member `ID` (its payload
 * the data), and lists a zkr member by its whole node name.
 *
 * **Joining.** zkr_group_join() creates the node (and PATH and its
 * ancestors if missing) and returns once it stands. From then on the
 * handle keeps it: a node deleted by another client is made again at once;
 * one lost with the session (expiry) is made again, with the same id and
 * data, as soon as the session is re-created; a reconnection to the same
 * session keeps it. While it is being made again, zkr_group_state() says
 * #ZKR_GROUP_JOINING. An id held by another session (another process
 * with the same id, or this process's own session that zkr gave up on)
 * is waited for: the node is made when that one is deleted (by its
 * session's end, at most a session timeout later for a crashed process).
 * zkr_group_leave() deletes the node; zkr_group_free() deletes it too (by
 * the session's cleanup when not connected). A join with another id while
 * the last one's node may still stand (a leave or a join not confirmed:
 * timed out) deletes that node first; a join with the same id keeps it,
 * and writes its new data, if they differ, before it returns.
 *
 * **The view.** The handle lists PATH's children with a watch, reads each
 * member's node with a watch (so a member that leaves and joins again, or
 * whose data is changed, is read again), and publishes each complete
 * listing as a view: the members sorted by node name, stamped with the
 * highest zxid it reflects (the listing's pzxid and the members'
 * mzxids), never lower than the previous view's. After a reconnection it
 * lists again; after a new session (expiry) it reads every member again.
 * A view is published when it differs from the last one (in members,
 * their data, or their nodes' creation): the listener is called with it,
 * in order, and the descriptor becomes readable. A read that finds the
 * same members again is not reported, but zkr_group_members() gives it,
 * with its zxid, which may be higher than the listener's last. A member
 * that left between a listing (or its data's watch) and its read is left
 * out of that view, whose zxid (the listing's, or the view's before a
 * member's re-read) can be older than the leave; the next listing stamps
 * the same members with the leave's zxid or later. So two views in a row
 * may carry the same zxid: compare members, not zxids, to see a change.
 * A change undone before the handle looked (a member that left and came
 * back with the same node data within one round trip) may not be seen;
 * the final state always is.
 * While not connected the last view stays (zkr_session_state() says
 * whether it can be trusted). A member whose node the ACL lets us list
 * but not read is in the view with no data, czxid 0 and owner 0.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_group_state() a state,
 * zkr_group_fd() a descriptor (-1 on failure).
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, an invalid path, the root, an id that is not 1
 *   to #ZKR_GROUP_ID_MAX bytes of UTF-8 without '/', control characters
 *   or what ZooKeeper refuses in a name (U+E000 to U+F8FF, U+FFF0 and
 *   above), or whose node path would be longer than #ZKR_PATH_MAX),
 *   data longer than #ZKR_GROUP_DATA_MAX, a timeout below -1.
 * - ZKR_ETIMEDOUT: a join whose node did not stand by its timeout (it is
 *   not kept: deleted if it was made), a leave not confirmed by its
 *   timeout (the handle goes on deleting it), a first view not complete
 *   by the timeout of zkr_group_members().
 * - ZKR_EALREADY: a join of a handle that is joined or joining.
 * - ZKR_ENOTHELD: a leave of a handle that is not joined.
 * - ZKR_ESTATE: a join or leave while another one is under way.
 * - ZKR_ELOST: the session was lost and is not re-created
 *   (`no_reconnect` or an adopted handle): a join under way ends so, and
 *   so does zkr_group_members() waiting for a first view.
 * - ZKR_ECANCELED: zkr_group_free() ended an asynchronous join or leave.
 * - ZNOAUTH, ZINVALIDACL, ZNOCHILDRENFOREPHEMERALS: the server refused the
 *   member's node (or PATH); the join ends with that code. ZNOAUTH from
 *   zkr_group_members(): PATH may not be listed, and no view was ever
 *   read (the handle tries again every second).
 * - ZKR_EDEADLK, ZKR_ECLOSED, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * static void changed(zkr_group_t *g, const zkr_group_member_t *m, int n,
 *                     int64_t zxid, void *data)
 * {
 *     for (int i = 0; i < n; i++)
 *         printf("%s %.*s\n", m[i].id, m[i].len, m[i].data);
 * }
 * ...
 * zkr_group_t *g;
 * zkr_group_new(&g, s, "/cluster/workers", NULL, changed, NULL);
 * zkr_group_join(g, "10.0.0.7:8080", "{\"slots\":4}", -1, 10000);
 * ... serve ...
 * zkr_group_free(g);           // leaves
 * \endcode
 *
 * \sa %zkr(7), %zkr(1) (zkr member, zkr members)
 *
 * @{
 */

/** A group handle: a view of a group's members, and this process's
 *  membership. Thread-safe. */
typedef struct zkr_group zkr_group_t;

/** The longest member id, in bytes. */
#define ZKR_GROUP_ID_MAX 255
/** The most data of one member, in bytes (below the server's default
 *  request limit of 1 MB). */
#define ZKR_GROUP_DATA_MAX (512 * 1024)

/** \brief One member of a group's view (its strings live as long as the
 *  view). */
typedef struct zkr_group_member {
    const char *id;   /**< the node's name without its `__party__` suffix */
    const char *name; /**< the node's name */
    const char *data; /**< its data, `len` bytes, then a NUL (not counted) */
    int len;          /**< bytes of data */
    int self;         /**< 1: this handle's own node, on its session */
    int64_t czxid;    /**< the node's creation: when it (last) joined */
    int64_t owner;    /**< the session that holds it (ephemeralOwner) */
} zkr_group_member_t;

/** Membership (zkr_group_state()). */
typedef enum {
    ZKR_GROUP_OUT = 0,     /**< not joined (or left) */
    ZKR_GROUP_JOINING = 1, /**< joined, the node being made (again) */
    ZKR_GROUP_IN = 2       /**< joined, the node stands on this session */
} zkr_group_state_t;

/** Called on the session's event thread with each new view, in order:
 *  the members sorted by node name (valid during the call only), their
 *  count, and the view's zxid. The first view is always reported. */
typedef void (*zkr_group_listener_t)(zkr_group_t *g,
                                     const zkr_group_member_t *members,
                                     int count, int64_t zxid, void *data);

/** Called once on the session's event thread when an asynchronous join
 *  or leave ends, with rc as the blocking call would return. */
typedef void (*zkr_group_completion_t)(int rc, zkr_group_t *g, void *data);

/**
 * \brief Makes a handle on the group at path and starts following its
 *   members (nothing is created until a join).
 * \param acl the ACL of the nodes a join creates (the member node, PATH
 *   and its missing ancestors); NULL: world:anyone, all.
 * \param fn called with each new view; NULL: none (read the view with
 *   zkr_group_members(), zkr_group_fd() says when it changed).
 * \return 0; ZBADARGUMENTS; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_group_new(zkr_group_t **out, zkr_session_t *s,
                             const char *path, const struct ACL_vector *acl,
                             zkr_group_listener_t fn, void *data);

/**
 * \brief Frees the handle: leaves (its node, if it may stand, is deleted
 *   by the session's cleanup), removes its watches; a join or leave under
 *   way ends with ZKR_ECANCELED. Waits for a running listener unless
 *   called from one (its own included), which is allowed: the listener is
 *   not called again. NULL is a no-op. Not while a blocking call on it
 *   runs.
 */
ZKR_EXTERN void zkr_group_free(zkr_group_t *g);

/**
 * \brief Joins: creates the member node `PATH/<id>__party__` holding
 *   data, and waits until it stands, for timeout_ms (-1: no limit). The
 *   handle keeps it until zkr_group_leave() or zkr_group_free().
 * \param id the member's id (NULL: "HOST:PID").
 * \param data its data (NULL: the id).
 * \param len bytes of data; -1: strlen(data).
 * \return 0; ZKR_ETIMEDOUT; ZKR_EALREADY; the errors above.
 */
ZKR_EXTERN int zkr_group_join(zkr_group_t *g, const char *id, const void *data,
                              int len, int timeout_ms);

/**
 * \brief Leaves: deletes the member node and waits until the server has
 *   done so, for timeout_ms (-1: no limit). Not connected, the node is
 *   deleted once connected again (or goes with the session).
 * \return 0; ZKR_ETIMEDOUT; ZKR_ENOTHELD; the errors above.
 */
ZKR_EXTERN int zkr_group_leave(zkr_group_t *g, int timeout_ms);

/**
 * \brief zkr_group_join() (leave: id NULL, data NULL, len 0, leave 1),
 *   asynchronous: cb is called once when it ends.
 * \return 0 (cb will be called); ZBADARGUMENTS (cb NULL too);
 *   ZKR_EALREADY; ZKR_ENOTHELD; ZKR_ESTATE; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_group_async(zkr_group_t *g, int leave, const char *id,
                               const void *data, int len, int timeout_ms,
                               zkr_group_completion_t cb, void *cbdata);

/** \brief The handle's membership (#ZKR_GROUP_OUT on NULL). */
ZKR_EXTERN zkr_group_state_t zkr_group_state(zkr_group_t *g);

/**
 * \brief A copy of the current view: waits for the first complete one
 *   for timeout_ms (-1: no limit; 0: none), and marks the view read
 *   (zkr_group_fd()).
 * \param out OUT: *count members sorted by node name; free with
 *   zkr_group_members_free().
 * \param zxid OUT (may be NULL): the zxid the view reflects.
 * \return 0; ZKR_ETIMEDOUT (no view yet); ZNOAUTH (PATH may not be
 *   listed, no view yet); ZBADARGUMENTS; ZKR_EDEADLK (a wait from a
 *   callback); ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_group_members(zkr_group_t *g, int timeout_ms,
                                 zkr_group_member_t **out, int *count,
                                 int64_t *zxid);

/** \brief Frees a view of zkr_group_members(); NULL is a no-op. */
ZKR_EXTERN void zkr_group_members_free(zkr_group_member_t *members, int count);

/**
 * \brief A descriptor that is readable while a view newer than the last
 *   one read by zkr_group_members() is there (for poll(), epoll or an
 *   event loop; never read or close it). Made at the first call; closed
 *   by zkr_group_free().
 * \return the descriptor, or -1 (ZKR_ENOMEM, ZKR_ESYS: no descriptor
 *   left).
 */
ZKR_EXTERN int zkr_group_fd(zkr_group_t *g);

/** @} */

/* ------------------------------------------------------------------------ */
/* Watched caches                                                            */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_cache Watched caches: a node, or its children, kept current
 *
 * A cache keeps a copy of one node (its data and stat) or of a node's
 * children (their names, and optionally their data and stats) current by
 * watches: a daemon reads its configuration node, or the list of
 * backends, from memory and hears when it changes. Curator's NodeCache,
 * PathChildrenCache and CuratorCache, and kazoo's DataWatch and
 * ChildrenWatch, do this job.
 *
 * **Views.** What a cache holds is a view: the node (one entry, or none
 * while the node does not exist), or the children sorted by name. A view
 * is published once it is complete (every child of a listing read), and
 * when it differs from the last one: the listener is called with it, in
 * order, and the descriptor becomes readable. Each view is stamped with
 * the highest zxid it reflects (the node's mzxid, the listing's pzxid, the
 * children's mzxids; for a node that does not exist, its parent's
 * pzxid, or none if the parent is gone too), never lower than the view
 * before it: no change is reported out of order. A read that finds the
 * same view again (names, data, czxid, mzxid, version, owner) is not
 * reported, but zkr_cache_get() gives it as read: its zxid, and the stat
 * fields left out of that comparison, may have moved. A change undone
 * before the cache looked (a value written and written back between two
 * reads) may not be reported; the last state always is.
 *
 * **Reconnection and expiry.** After a reconnection the cache reads
 * again (the node, or the listing; children whose watch fired are read
 * again); after a new session (expiry) it reads everything again, since
 * no watch survives it. While not connected the last view stays:
 * zkr_session_state() says whether it can be trusted.
 *
 * **Read your writes.** A write made on the cache's session reaches the
 * cache by its watch some time after the write's answer; a write made
 * elsewhere (another process) may not have reached this client's server
 * yet. zkr_cache_sync() asks the server to catch up with the leader
 * (ZooKeeper's sync), reads again, and returns once a view read after that
 * is published: every write acknowledged anywhere before the call is in
 * it.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_cache_fd() a descriptor (-1 on
 * failure).
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL, an invalid path, an unknown kind, a timeout
 *   below -1.
 * - ZKR_ETIMEDOUT: no view by the timeout of zkr_cache_get(), or none read
 *   after the sync by the timeout of zkr_cache_sync().
 * - ZNOAUTH: zkr_cache_get() with no view yet, the last read of the path
 *   refused by its ACL (the cache tries again every second); a
 *   zkr_cache_sync() whose read after the sync was refused.
 * - ZKR_ELOST: the session was lost and is not re-created (a sync, or a
 *   zkr_cache_get() waiting for a first view).
 * - ZKR_EDEADLK: a wait from a callback.
 * - ZKR_ECLOSED, ZKR_ENOMEM.
 *
 * \par EXAMPLE
 * \code
 * static void reload(zkr_cache_t *c, const zkr_cache_entry_t *e, int n,
 *                    int64_t zxid, void *data)
 * {
 *     if (n == 1)
 *         apply_config(e[0].data, e[0].len);   // version e[0].stat.version
 * }
 * ...
 * zkr_cache_t *c;
 * zkr_cache_new(&c, s, "/app/config", ZKR_CACHE_NODE, reload, NULL);
 * ... run ...
 * zkr_cache_free(c);
 * \endcode
 *
 * \sa %zkr_group(3), %zkr(7), %zkr(1) (zkr watch)
 *
 * @{
 */

/** A watched cache of a node or of its children. Thread-safe. */
typedef struct zkr_cache zkr_cache_t;

/** What a cache holds. */
typedef enum {
    ZKR_CACHE_NODE = 0,         /**< the node: its data and stat */
    ZKR_CACHE_CHILDREN = 1,     /**< its children's names */
    ZKR_CACHE_CHILDREN_DATA = 2 /**< its children: names, data and stats
                                     (a data watch on each) */
} zkr_cache_kind_t;

/** \brief One node of a cache's view (its strings live as long as the
 *  view). */
typedef struct zkr_cache_entry {
    const char *name; /**< the node's name (the last component of its path) */
    const char *data; /**< its data, `len` bytes, then a NUL (not counted);
                           "" for #ZKR_CACHE_CHILDREN */
    int len;          /**< bytes of data */
    struct Stat stat; /**< its stat; zero for #ZKR_CACHE_CHILDREN, and for a
                           child the ACL lets us list but not read. A
                           child's stat is as of its last read: its data's
                           changes and its deletion are followed by its
                           watch; the rest of its stat (its own children,
                           its ACL) is read again by zkr_cache_sync() */
} zkr_cache_entry_t;

/** Called on the session's event thread with each new view, in order
 *  (valid during the call only): for #ZKR_CACHE_NODE one entry, or none
 *  while the node does not exist; for the children, sorted by name. The
 *  first view is always reported. */
typedef void (*zkr_cache_listener_t)(zkr_cache_t *c,
                                     const zkr_cache_entry_t *entries,
                                     int count, int64_t zxid, void *data);

/**
 * \brief Starts a cache of path ("/" and the server's own nodes, such
 *   as /zookeeper/config, too): reads it, and keeps it current by
 *   watches until zkr_cache_free().
 * \param fn called with each new view; NULL: none (read the view with
 *   zkr_cache_get(), zkr_cache_fd() says when it changed).
 * \return 0; ZBADARGUMENTS; ZKR_ECLOSED; ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_cache_new(zkr_cache_t **out, zkr_session_t *s,
                             const char *path, zkr_cache_kind_t kind,
                             zkr_cache_listener_t fn, void *data);

/**
 * \brief Stops the cache (its watches are removed) and frees it. Waits
 *   for a running listener unless called from one (its own included),
 *   which is allowed: the listener is not called again. NULL is a no-op.
 *   Not while a blocking call on it runs.
 */
ZKR_EXTERN void zkr_cache_free(zkr_cache_t *c);

/**
 * \brief A copy of the current view: waits for the first one for
 *   timeout_ms (-1: no limit; 0: none), and marks the view read
 *   (zkr_cache_fd()).
 * \param out OUT: *count entries; free with zkr_cache_entries_free().
 * \param zxid OUT (may be NULL): the zxid the view reflects.
 * \return 0; ZKR_ETIMEDOUT; ZNOAUTH; ZBADARGUMENTS; ZKR_EDEADLK;
 *   ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_cache_get(zkr_cache_t *c, int timeout_ms,
                             zkr_cache_entry_t **out, int *count,
                             int64_t *zxid);

/** \brief Frees a view of zkr_cache_get(); NULL is a no-op. */
ZKR_EXTERN void zkr_cache_entries_free(zkr_cache_entry_t *entries, int count);

/**
 * \brief A descriptor that is readable while a view newer than the last
 *   one read by zkr_cache_get() is there (never read or close it). Made
 *   at the first call; closed by zkr_cache_free().
 * \return the descriptor, or -1 (no descriptor left).
 */
ZKR_EXTERN int zkr_cache_fd(zkr_cache_t *c);

/**
 * \brief Read your writes: syncs the server with the leader, reads again,
 *   and waits until a view read after the sync is published, for
 *   timeout_ms (-1: no limit). Then every write acknowledged (to anyone)
 *   before the call is in the view (zkr_cache_get()).
 * \return 0; ZKR_ETIMEDOUT; ZNOAUTH; ZKR_ELOST; ZKR_EDEADLK; ZKR_ECLOSED;
 *   ZBADARGUMENTS.
 */
ZKR_EXTERN int zkr_cache_sync(zkr_cache_t *c, int timeout_ms);

/** @} */

/* ------------------------------------------------------------------------ */
/* Metrics (docs/OBSERVABILITY.md)                                           */
/* ------------------------------------------------------------------------ */
/** \defgroup zkr_metrics Metrics in the Prometheus text format
 *
 * A session's metrics and those of its recipes (per kind and path:
 * grants, waits, hold times, losses, listings per grant; barrier waiters,
 * group members, cache entries and lag; session state, safe time left)
 * in the Prometheus text format, to serve on an HTTP
 * endpoint of the application, to write to node_exporter's textfile
 * directory, or to read one value by name. Cheap: counted where zkr holds
 * its lock anyway. docs/OBSERVABILITY.md lists the families.
 *
 * \par RETURN VALUE
 * 0 on success, or an error code; zkr_metrics_text() the text in *out
 * (free it with zkr_metrics_text_free()).
 *
 * \par ERRORS
 * - ZBADARGUMENTS: NULL session, stream or output.
 * - ZNONODE: zkr_metrics_value() found no such family, kind or path.
 * - ZKR_ENOMEM; ZKR_ESYS (writing to the stream failed).
 *
 * \par EXAMPLE
 * \code
 * char *text;
 * size_t len;
 * if (zkr_metrics_text(s, &text, &len) == 0) {
 *     http_reply(conn, "text/plain; version=0.0.4", text, len);
 *     zkr_metrics_text_free(text);
 * }
 * \endcode
 *
 * \sa %zkr_session(3), %zkr(1) (zkr exporter), %zkr(7)
 *
 * @{
 */

/**
 * \brief Writes the metrics of a session and of its recipes in the
 *   Prometheus text exposition format (version 0.0.4).
 *
 * Session metrics carry no label; recipe metrics carry `path` (the recipe
 * path) and `kind` (`lock`, `read`, `write`, `semaphore`, `election`;
 * `barrier`, `dbarrier`, `group`, `cache` for their gauges), one series
 * per path and kind that a handle of this session has used since the
 * session was opened, freed handles included (their counts stay until
 * zkr_session_free(); the gauges of the barrier, group and cache go with
 * their last handle). Counters and histograms (fixed buckets) are
 * kept by the engine under the lock it already holds, without allocating;
 * writing copies them under that lock and formats them without it, so a
 * slow `f` never delays the session. docs/OBSERVABILITY.md lists every
 * metric and the buckets. Every name starts with `zkr_`. A daemon can
 * serve the text from its own HTTP endpoint, or write it to a file for
 * node_exporter's textfile collector (write a temporary file in the same
 * directory, then rename it: the zkr command's `--metrics-file` does).
 *
 * \param f an open stream; zkr writes to it and neither flushes nor closes
 *   it.
 * \return 0; ZBADARGUMENTS (NULL s or f); ZKR_ENOMEM; ZKR_ESYS (writing to
 *   f failed; errno tells why).
 */
ZKR_EXTERN int zkr_metrics_write(zkr_session_t *s, FILE *f);

/**
 * \brief zkr_metrics_write() into a new NUL-terminated buffer.
 * \param out OUT: the text; release it with zkr_metrics_text_free().
 * \param len OUT (may be NULL): its length, without the NUL.
 * \return 0; ZBADARGUMENTS (NULL s or out); ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_metrics_text(zkr_session_t *s, char **out, size_t *len);

/** \brief Frees a text of zkr_metrics_text(). NULL is a no-op. */
ZKR_EXTERN void zkr_metrics_text_free(char *text);

/**
 * \brief Reads one value that zkr_metrics_write() would write.
 *
 * `name` is a metric's name as written: a counter or gauge
 * ("zkr_acquisitions_total"), or a histogram's "_count" or "_sum"
 * ("zkr_wait_seconds_count"); times are in seconds. For a recipe metric
 * give its `kind` and `path`; for a session metric both must be NULL.
 * `zkr_session_state` and single buckets are not readable here (see
 * zkr_session_state() and the text).
 * \param out OUT: the value.
 * \return 0; ZBADARGUMENTS (NULL s, name or out, an unknown name, kind
 *   and path missing for a recipe metric or given for a session metric;
 *   the gauges of the barrier, group and cache are known once a handle
 *   of their kind was made in the process);
 *   ZNONODE (no handle of this session has used that kind and path, or
 *   for the gauges of the barrier, group and cache none lives there now;
 *   the metric is not one of that kind's, or a gauge not measured yet,
 *   such as the reconnect margin before any reconnection); ZKR_ENOMEM.
 */
ZKR_EXTERN int zkr_metrics_value(zkr_session_t *s, const char *name,
                                 const char *kind, const char *path,
                                 double *out);

/** @} */

#ifdef __cplusplus
}
#endif
#endif /* ZKR_H */
