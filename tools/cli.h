/* The zkr command: shared declarations of its parts (zkr.c: options and
 * dispatch; run.c: lock, sem and elect; admin.c: inspect and release). */
#ifndef ZKR_TOOLS_CLI_H
#define ZKR_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "zkr.h"

/* Exit statuses (documented in zkr(1)). */
enum {
    CLI_EXIT_NOT_ACQUIRED = 1, /* default of -E; also "nothing to release" */
    CLI_EXIT_ERROR = 2,        /* usage, connection, permission, ... */
    CLI_EXIT_LOST = 4,         /* ownership lost while the command ran */
    CLI_EXIT_NOEXEC = 126,     /* COMMAND found but not executable */
    CLI_EXIT_NOTFOUND = 127    /* COMMAND not found */
};

/* Global options. */
typedef struct cli {
    const char *hosts;      /* -s, $ZKR_SERVER, 127.0.0.1:2181 */
    int session_timeout_ms; /* --session-timeout */
    const char *auth;       /* --auth USER:PASSWORD, or NULL */
    int verbose;            /* -v */
} cli_t;

/* Prints "zkr: <message>" on stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "zkr: <message>" when -v was given. */
void cli_info(const cli_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "zkr <sub>: <message>" and a hint at --help; returns
 * CLI_EXIT_ERROR. */
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
/* Writes s with control characters and backslashes escaped (\n, \xNN):
 * a value never starts a line of its own. */
void cli_escape(FILE *f, const char *s);

/* Opens the session of the global options; prints why on failure.
 * Returns 0 or CLI_EXIT_ERROR. */
int cli_open_session(const cli_t *c, zkr_session_t **out);
/* The ACL for --acl NAME ("open" or "private"), or NULL for an unknown
 * name. "private" needs --auth: checked by the caller. */
const struct ACL_vector *cli_acl(const char *name);
/* For an ACL other than "open": checks that PATH's existing ACL grants no
 * one more than acl_name asks (an open PATH lets anyone delete a holder's
 * node). 0, or CLI_EXIT_ERROR after saying why (admin.c). */
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
enum { CT_STARTED, CT_FAILED, CT_EXITED, CT_DEADLINE, CT_HEARTBEAT, CT_KILL };
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
/* Starts the guard and, under it, the command (execve(file, argv, env)).
 * The guard kills the command's tree if no heartbeat extends deadline
 * (CLOCK_BOOTTIME ms, -1 none) in time, or when zkr dies. 0; -1 (a system
 * call failed) or -2 (execve failed), with *exec_errno set; nothing is
 * left running then, the guard is reaped. */
int ct_spawn(ct_t *g, const char *file, char **argv, char **env,
             int64_t deadline, int *exec_errno);
/* Sets the guard's deadline (-1: none). Never blocks. */
void ct_heartbeat(ct_t *g, int64_t deadline);
/* Asks the guard to SIGKILL the tree until none of it is left. */
void ct_kill(ct_t *g);
/* Reads one report of the guard (CT_EXITED with the command's wait status,
 * CT_DEADLINE): 1; or 0 at EOF (the guard ended; g->rep is then -1). */
int ct_read(ct_t *g, int *kind, int *value);
/* Sends sig to every process of the command: those below the guard, or,
 * once the guard is gone (guard -1), those below zkr but for the processes
 * recorded by ct_record_foreign() and theirs. Returns how many. */
int ct_signal_tree(pid_t guard, int sig);
/* How many children zkr has besides the guard and the foreign ones. */
int ct_orphans(pid_t guard);

/* A growable string for JSON output. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
    int oom;
} strbuf_t;
void sb_printf(strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included. */
void sb_json_str(strbuf_t *b, const char *s);
void sb_free(strbuf_t *b);

/* Subcommands: argv[0] is the subcommand's name. Each returns zkr's exit
 * status. */
int cli_lock(const cli_t *c, int argc, char **argv);
int cli_sem(const cli_t *c, int argc, char **argv);
int cli_elect(const cli_t *c, int argc, char **argv);
int cli_inspect(const cli_t *c, int argc, char **argv);
int cli_release(const cli_t *c, int argc, char **argv);
int cli_exporter(const cli_t *c, int argc, char **argv);

#endif /* ZKR_TOOLS_CLI_H */
