/* The zkr command: shared declarations of its parts (zkr.c: options and
 * dispatch; run.c: lock, sem and elect; admin.c: inspect and release). */
#ifndef ZKR_TOOLS_CLI_H
#define ZKR_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

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

/* Parses a non-negative number of seconds (fractions allowed, at most
 * 10^7) into milliseconds, rounding up. 0 or -1. */
int cli_parse_seconds(const char *s, int *ms);
/* Parses a decimal integer in [lo, hi]. 0 or -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);

/* Opens the session of the global options; prints why on failure.
 * Returns 0 or CLI_EXIT_ERROR. */
int cli_open_session(const cli_t *c, zkr_session_t **out);
/* The ACL for --acl NAME ("open" or "private"), or NULL for an unknown
 * name. "private" needs --auth: checked by the caller. */
const struct ACL_vector *cli_acl(const char *name);
/* The identity an operator acts as: "digest:USER" or "anonymous". */
void cli_identity(const cli_t *c, char *buf, size_t len);

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

#endif /* ZKR_TOOLS_CLI_H */
