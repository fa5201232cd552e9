/* zkr lock / sem / elect / queue take / barrier enter / member: what
 * their files share. run.c:
 * the design (at its top), zkr's callbacks, setup and end, and each
 * subcommand's run; run_opts.c: options and --help; run_command.c: finding
 * and starting the command; run_supervise.c: the supervisor while the
 * command runs. */
#ifndef ZKR_TOOLS_RUN_H
#define ZKR_TOOLS_RUN_H

#include <stdint.h>

#include "cli.h"

/* KIND_DBARRIER (barrier enter) runs its command in a phase of a double
 * barrier, KIND_MEMBER (member) as a member of a group: neither is a
 * grant, nothing to lose, no safe deadline (run_has_grant()). */
typedef enum {
    KIND_LOCK,
    KIND_SEM,
    KIND_ELECT,
    KIND_QUEUE,
    KIND_DBARRIER,
    KIND_MEMBER
} kind_t;
typedef enum { SUSP_TERM, SUSP_STOP, SUSP_IGNORE } susp_t;

typedef struct opts {
    kind_t kind;
    const char *sub;
    int64_t wait_ms; /* -1 forever */
    int fail_code;
    int lost_code;   /* --lost-exit-code, default CLI_EXIT_LOST */
    int read, write; /* --read, --write: the sides of a read/write lock */
    long permits;
    const char *id;
    const char *data; /* member: --data, or NULL (the id) */
    const char *acl;
    susp_t susp;
    int64_t grace_ms;
    int requeue;
    const char *path;
    char **more;              /* lock: the PATHs after the first */
    int nmore;                /* ... their number (0: one lock) */
    const char *metrics_file; /* --metrics-file, or NULL */
    int64_t delay_ms;         /* --lock-delay; -1: the session timeout */
    unsigned delay_flags;     /* --trust-foreign-release */
    zkr_nack_where_t nack;    /* queue take: --nack front|back */
    long max_deliveries;      /* queue take: --max-deliveries, 0 none */
    int batch;                /* queue take: --batch N, 0 or 1: one item */
    const char *dead_path;    /* queue take: --dead, or NULL */
    long count;               /* barrier enter: N */
    int wait_leave;           /* barrier enter: --wait-leave given */
    int64_t leave_ms;         /* ... its SECONDS; -1 forever */
    char **cmd;
} opts_t;

/* Messages from zkr's event thread to the supervisor. */
enum { M_ACQUIRED, M_LOCK_STATE, M_LEADER, M_SESSION };
struct msg {
    int kind, a, b;
};

typedef struct sup {
    const cli_t *cli;
    const opts_t *o;
    zkr_session_t *s;
    zkr_lock_t *l;      /* the lock of PATH (the first PATH) */
    zkr_lock_t **more;  /* the locks of o->more */
    zkr_multilock_t *m; /* with more: all of them, or NULL */
    zkr_election_t *e;
    zkr_workq_t *q; /* queue take: the queue */
    zkr_item_t *it; /* queue take: the item taken, once taken */
    /* queue take --batch: the items taken (those not run yet; NULL once
     * run or given back), and how many */
    zkr_item_t **batch;
    int nbatch;
    /* barrier enter: the participant (NULL once freed) */
    zkr_dbarrier_t *d;
    /* member: the group (NULL once freed) */
    zkr_group_t *grp;
    int ev[2];       /* message pipe */
    int sfd;         /* signalfd */
    int tty;         /* the controlling terminal, or -1 */
    int handed;      /* the command's group is the terminal's foreground */
    ct_t g;          /* the guard and the command */
    int running;     /* a command's tree may still have processes */
    int exited;      /* the command's first process ended (status set) */
    int orphaned;    /* the guard died: we kill and reap the tree */
    int killing;     /* SIGKILL the tree until it is gone */
    int stopped;     /* we sent SIGSTOP and no SIGCONT yet */
    int softened;    /* acted on the current SUSPENDED */
    int hard;        /* acted on a loss during this run */
    int lost;        /* ownership was lost (or the command was stopped
                        because of a suspension) during this run */
    const char *why; /* what lost it first, for the last word */
    int64_t kill_at; /* CLOCK_BOOTTIME ms: SIGKILL the tree if still there */
    int64_t beat_at; /* next heartbeat to the guard */
    int64_t wake_at; /* -w beyond the library's int: our own deadline */
    int64_t jc_at;   /* a job-control stop forwarded to the command: stop
                        the tree ourselves if it has not stopped by then */
    int jc_sig;      /* that stop's signal */
    int timed_out;   /* we canceled the acquire at wake_at */
    int64_t epoch;   /* elect: the leadership the command runs under */
    int signo;       /* last SIGINT/SIGTERM/SIGHUP received */
    int status;      /* the command's wait status */
} sup_t;

/* Whether the command runs under a grant it can lose (lock, sem, elect,
 * queue take: followed, with the session's safe deadline as the guard's);
 * barrier enter's command runs in a phase that has begun, whatever
 * happens to the session then, and member's as a member that the library
 * keeps (its node made again after an expiry). */
static inline int run_has_grant(const sup_t *p)
{
    return p->o->kind != KIND_DBARRIER && p->o->kind != KIND_MEMBER;
}

/* The state of zkr lock's (sem's) grant: the lock's, or with several
 * PATHs the multi-lock's (run.c). */
zkr_lock_state_t run_lock_state(sup_t *p);

/* The subcommand's options and operands: 0, -1 (--help was written), or
 * an exit status (said why) (run_opts.c). */
int run_parse_opts(kind_t kind, int argc, char **argv, opts_t *o);

/* Finds COMMAND before anything is acquired: 0, or 127 or 126 after saying
 * why (run_command.c). */
int run_command_runs(const opts_t *o);
/* The file COMMAND (cmd) names, found as execvp() would (a free()'d
 * string), or NULL after saying why, with *why 127 or 126; zkr watch
 * finds its command so, at each run (run_command.c). */
char *run_command_file(const char *cmd, int *why);
/* Starts the command under its guard, with the grant q's environment
 * (NULL: no grant, zkr's own environment as it is): 0, or an exit status
 * with nothing left running. */
int run_spawn(sup_t *p, const zkr_sequencer_t *q, const char *leader_id);

/* Whether zkr is in the foreground of its terminal (run_supervise.c). */
int run_foreground(const sup_t *p);
/* Stops zkr (its process group if group) by the job-control signal sig;
 * 1 once continued, 0 when the stop was discarded. */
int run_stop_as_job(int sig, int group);
/* Handles a signal zkr received (the signalfd's). */
void run_on_signal(sup_t *p, int sig);
/* Waits for the next message, signal or deadline: 1 with *m filled for a
 * message, else 0. */
int run_wait_event(sup_t *p, struct msg *m);
/* Runs the command until every process of it is gone. */
void run_supervise(sup_t *p);

/* Records what lost the grant first, for the last word (run.c). */
void run_lose(sup_t *p, const char *why);

#endif /* ZKR_TOOLS_RUN_H */
