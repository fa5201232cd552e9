/* The zkr command: shared declarations of its parts (zkr.c: options and
 * dispatch; run.c: lock, sem, elect, queue take, barrier enter and
 * member; admin.c: inspect and release; queue.c: queue put and len, a
 * queue's inspect; group.c: members; watch.c: watch). */
#ifndef ZKR_TOOLS_CLI_H
#define ZKR_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "zkr.h"

/* Exit statuses (documented in zkr(1)): flock(1)'s, from sysexits.h for
 * zkr's own errors. */
enum {
    CLI_EXIT_NOT_ACQUIRED = 1, /* default of -E; also "nothing to release" */
    CLI_EXIT_LOST = 4,         /* ownership lost while the command ran */
    CLI_EXIT_INDOUBT = 5,      /* an ack or an update whose answer was lost:
                                  it may or may not have applied */
    CLI_EXIT_USAGE = 64,       /* EX_USAGE: bad arguments, nothing tried */
    CLI_EXIT_DATAERR = 65,     /* EX_DATAERR: counter: not a counter's data */
    CLI_EXIT_NOINPUT = 66,     /* EX_NOINPUT: inspect's PATH does not exist */
    CLI_EXIT_UNAVAILABLE = 69, /* EX_UNAVAILABLE: no server or no session
                                  (retryable) */
    CLI_EXIT_OSERR = 71,       /* EX_OSERR: any other error */
    CLI_EXIT_NOPERM = 77,      /* EX_NOPERM: ZNOAUTH, ZAUTHFAILED, or a
                                  PATH's ACL weaker than --acl asks */
    CLI_EXIT_NOEXEC = 126,     /* COMMAND found but not executable */
    CLI_EXIT_NOTFOUND = 127    /* COMMAND not found */
};

/* Global options. */
typedef struct cli {
    const char *hosts;      /* -s, $ZKR_SERVER, 127.0.0.1:2181 (with the
                               chroot, as given: for messages) */
    const char *servers;    /* hosts without the chroot */
    const char *chroot;     /* the chroot suffix of hosts, or NULL */
    int session_timeout_ms; /* --session-timeout */
    int connect_timeout_ms; /* --connect-timeout; 0: the session timeout */
    const char *auth;       /* USER:PASSWORD (--auth, --auth-file,
                               $ZKR_AUTH), or NULL */
    int verbose;            /* -v */
} cli_t;

/* getopt_long() for a subcommand's options (shortopts starts with '+'),
 * which also takes the global options there (zkr lock -s HOST:PORT PATH
 * ...) and applies them itself: a global option whose name or letter the
 * subcommand has (-h, --help) is the subcommand's. At the end of the
 * options, checks the global options as a whole ($ZKR_AUTH, the server
 * list). Exits with the status on a bad global option, and with 0 after
 * --version. */
struct option;
int cli_getopt(int argc, char **argv, const char *shortopts,
               const struct option *lopts);

/* Prints "zkr: <message>" on stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "zkr: <message>" when -v was given. */
void cli_info(const cli_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "zkr <sub>: <message>" and a hint at --help; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Value parsing and escaping (args.c). */
#define CLI_SECONDS_MAX 1e7 /* about 115 days */
/* Parses a non-negative number of seconds (fractions allowed, at most
 * CLI_SECONDS_MAX) into milliseconds, rounding up; 64 bits, so every
 * accepted value fits. 0 or -1. */
int cli_parse_seconds(const char *s, int64_t *ms);
/* Parses a decimal integer in [lo, hi]. 0 or -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);
/* The library's int timeout for a wait of wait_ms (-1 forever): the value
 * itself when it fits, else -1 (forever), zkr then enforcing the deadline
 * itself. */
int cli_timeout_arg(int64_t wait_ms);
/* The length (1..4) of the valid UTF-8 character s starts with, or 0
 * (overlong forms, surrogates, beyond U+10FFFF, truncated: invalid). */
int cli_utf8_len(const char *s);
/* Writes s with backslashes, control characters (C0, DEL, and C1 as
 * \u00NN), invisible and bidirectional format characters (Unicode Cf, the
 * line and paragraph separators, Hangul fillers: \uNNNN, \UNNNNNNNN) and
 * bytes that are not valid UTF-8 (\xNN) escaped: a value never starts a
 * line of its own, reaches a terminal as a control sequence, hides in a
 * row or reorders it. */
void cli_escape(FILE *f, const char *s);
/* cli_escape() into a new string (free() it), or NULL. */
char *cli_escaped(const char *s);

/* The exit status for a failure with code rc (a ZooKeeper or zkr code):
 * CLI_EXIT_NOPERM, CLI_EXIT_UNAVAILABLE (connection, session), or
 * CLI_EXIT_OSERR. */
int cli_exit_of(int rc);
/* Prints "zkr: <message>: <what rc means> (ZooKeeper at HOSTS)" and
 * returns cli_exit_of(rc). */
int cli_zk_error(const cli_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks PATH (and ID, unless NULL) as the library would, before any
 * connection: 0, or CLI_EXIT_USAGE after saying why (args.c). */
int cli_check_args(const char *sub, const char *path, const char *id);

/* Opens the session of the global options; prints why on failure.
 * Returns 0 or an exit status. */
int cli_open_session(const cli_t *c, zkr_session_t **out);
/* The same with no re-creation after LOST (no_reconnect): the session's
 * handle stays the same until zkr_session_free(), so the admin commands
 * may make their own ZooKeeper calls on zkr_session_handle(). */
int cli_open_admin_session(const cli_t *c, zkr_session_t **out);
/* The ACL for --acl NAME ("open" or "private"), or NULL for an unknown
 * name. "private" needs --auth: checked by the caller. */
const struct ACL_vector *cli_acl(const char *name);
/* For an ACL other than "open": checks that PATH's existing ACL grants no
 * one more than acl_name asks (an open PATH lets anyone delete a holder's
 * node). 0, or an exit status after saying why (admin.c). */
int cli_check_path_acl(const cli_t *c, zkr_session_t *s, const char *path,
                       const char *acl_name);

/* Wall-clock time in ms since the epoch (ages of nodes: the server's
 * ctime is on the same clock, give or take the skew between hosts). */
int64_t cli_wall_ms(void);
/* The recipe of a queue listed by zkr_contenders_list(), from its entries'
 * node names: "none" (empty), "election", "semaphore", "rwlock", "lock"
 * (admin.c). */
const char *cli_queue_kind(const zkr_contender_t *v, int n);

/* Containment of the command (contain.c). */
enum {
    CT_STARTED,
    CT_FAILED,
    CT_EXITED,
    CT_STOPPED, /* the command's first process stopped (value: signal) */
    CT_DEADLINE,
    CT_HEARTBEAT,
    CT_KILL
};
typedef struct ct {
    pid_t guard; /* the guard process, or -1 once reaped */
    pid_t cmd;   /* the command's first process (and process group) */
    int ctl;     /* our end of the guard's control pipe, or -1 */
    int rep;     /* our end of the guard's report pipe, or -1 at its EOF */
} ct_t;
/* CLOCK_BOOTTIME in ms: the clock of every deadline, shared with the
 * guard. */
int64_t ct_now_ms(void);
/* Records zkr's children of now: never signalled as the command's. */
void ct_record_foreign(void);
/* Starts the guard and, under it, the command (execve(file, argv, env);
 * a file the kernel does not recognize, ENOEXEC, is run by /bin/sh as
 * execvp() does).
 * The guard kills the command's tree if no heartbeat extends deadline
 * (CLOCK_BOOTTIME ms, -1 none) in time, or when zkr dies. 0; -1 (a system
 * call failed) or -2 (execve failed), with *exec_errno set; nothing is
 * left running then, the guard is reaped. fg: the command's process group
 * becomes the foreground group of the controlling terminal. in: the
 * command's standard input (the caller closes its own copy), or -1 for
 * zkr's. */
/* Whether file is an ELF binary (one the kernel refused with ENOEXEC:
 * for another machine, or damaged), which /bin/sh must not be given as
 * a script. Async-signal-safe. */
int ct_is_elf(const char *file);
int ct_spawn(ct_t *g, const char *file, char **argv, char **env,
             int64_t deadline, int fg, int in, int *exec_errno);
/* Sets the guard's deadline (-1: none). Never blocks. */
void ct_heartbeat(ct_t *g, int64_t deadline);
/* Asks the guard to SIGKILL the tree until none of it is left. */
void ct_kill(ct_t *g);
/* Reads one report of the guard (CT_EXITED with the command's wait status,
 * CT_STOPPED with the stop signal, CT_DEADLINE): 1; or 0 at EOF (the guard
 * ended; g->rep is then -1). */
int ct_read(ct_t *g, int *kind, int *value);
/* Sends sig to every process of the command: those below the guard, or,
 * once the guard is gone (guard -1), those below zkr but for the processes
 * recorded by ct_record_foreign() and theirs. SIGSTOP spares the guards of
 * nested zkrs. Returns how many. */
int ct_signal_tree(pid_t guard, int sig);
/* Sends sig to the processes of the command (as ct_signal_tree()) that are
 * in process group pgrp. Returns how many. */
int ct_signal_group(pid_t guard, pid_t pgrp, int sig);
/* Whether process pid is stopped now (/proc: stopped or traced). */
int ct_is_stopped(pid_t pid);
/* Job control: SIGSTOP to the processes of the command that are not
 * stopped already (nor guards), recorded for ct_cont_tree(). */
int ct_stop_tree(pid_t guard);
/* SIGCONT to the processes of the command that ct_stop_tree() stopped and
 * to those of process group pgrp (the command's: stopped by the terminal);
 * a process stopped by someone else (a nested zkr's command, a job of an
 * interactive shell run as the command) is left to that one. */
int ct_cont_tree(pid_t guard, pid_t pgrp);
/* How many children zkr has besides the guard and the foreign ones. */
int ct_orphans(pid_t guard);

/* JSON output (jansson). Strings that are not valid UTF-8 (node data any
 * client may write) are still valid JSON: each byte that is not part of
 * valid UTF-8 becomes U+FFFD. A new string, or NULL (out of memory). */
json_t *cli_json_text(const char *s);
/* Sets obj[key] to cli_json_text(s) and, when s is not valid UTF-8, also
 * obj[key + "_hex"] to its exact bytes in lowercase hex. 0 or -1. */
int cli_json_set_text(json_t *obj, const char *key, const char *s);

/* Subcommands: argv[0] is the subcommand's name. Each returns zkr's exit
 * status. */
int cli_lock(const cli_t *c, int argc, char **argv);
int cli_sem(const cli_t *c, int argc, char **argv);
int cli_elect(const cli_t *c, int argc, char **argv);
int cli_inspect(const cli_t *c, int argc, char **argv);
int cli_release(const cli_t *c, int argc, char **argv);
int cli_exporter(const cli_t *c, int argc, char **argv);
int cli_queue(const cli_t *c, int argc, char **argv);
/* zkr counter get / add / set (counter.c). */
int cli_counter(const cli_t *c, int argc, char **argv);
/* zkr barrier set / clear / wait / enter (barrier.c). */
int cli_barrier(const cli_t *c, int argc, char **argv);
/* zkr barrier enter (run.c): argv[0] is "enter". */
int cli_barrier_enter(const cli_t *c, int argc, char **argv);
/* zkr member (run.c): runs a command as a member of a group. */
int cli_member(const cli_t *c, int argc, char **argv);
/* zkr members (group.c): a group's members, once or as they change. */
int cli_members(const cli_t *c, int argc, char **argv);
/* Checks member's PATH, ID (NULL: the default) and DATA (NULL: the id) by
 * the group's rules (zkr.h, zkr_group_join()), before any connection: 0,
 * or CLI_EXIT_USAGE after saying why (group.c). */
int cli_check_member(const char *sub, const char *path, const char *id,
                     const char *data);
/* Node data (len bytes, any bytes, followed by a NUL) as zkr members
 * writes it (group.c): cli_escape()'s escapes, a NUL byte as \x00; and as
 * a JSON string obj[key] (U+FFFD for each byte that is not part of valid
 * UTF-8, a NUL as \u0000), with obj[key + "_hex"] the exact bytes when
 * they are not valid UTF-8 (0 or -1). zkr watch writes data so too. */
void cli_escape_bytes(FILE *f, const char *s, int len);
int cli_json_set_bytes(json_t *obj, const char *key, const char *s, int len);
/* zkr watch (watch.c): runs a command at each new view of a node or of
 * its children (zkr_cache_*), or prints the views. */
int cli_watch(const cli_t *c, int argc, char **argv);
/* zkr queue take (run.c): argv[0] is "take". */
int cli_queue_take(const cli_t *c, int argc, char **argv);
/* Whether path is a zkr work queue: its data, or its layout, says so. */
int cli_is_workq(zkr_session_t *s, const char *path);
/* zkr inspect of a work queue (admin.c's inspect found one at path): its
 * items (the first max in serve order), claims and waiting consumers. */
int cli_inspect_workq(const cli_t *c, zkr_session_t *s, const char *path,
                      int max, int json);

#endif /* ZKR_TOOLS_CLI_H */
