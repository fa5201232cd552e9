/* zkr lock / sem / elect / queue take / barrier enter / member: the
 * supervisor, while the command runs. It follows the grant (--on-suspend;
 * barrier enter and member have none), keeps the guard's deadline,
 * passes signals and job control on to the command's tree, and hands the
 * terminal over and back (run.c says how, at its top). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

typedef enum { OWN_HELD, OWN_SUSPENDED, OWN_GONE } own_t;

/* ------------------------------------------------------------ terminal */

/* Whether zkr is in the foreground of its controlling terminal: then the
 * command gets the terminal while it runs, as flock(1)'s would. */
int run_foreground(const sup_t *p)
{
    return p->tty >= 0 && tcgetpgrp(p->tty) == getpgrp();
}

/* Gives the terminal to the command's group again (after a stop), if zkr
 * is in the foreground. SIGTTOU is blocked in zkr. */
static void give_tty(sup_t *p)
{
    if (p->running && p->g.cmd > 0 && run_foreground(p) &&
        tcsetpgrp(p->tty, p->g.cmd) == 0)
        p->handed = 1;
}

/* Whether zkr's job has the terminal: zkr's process group or its
 * command's is the terminal's foreground group. */
static int job_has_tty(const sup_t *p)
{
    pid_t fg;

    if (p->tty < 0 || p->g.cmd <= 0)
        return 0;
    fg = tcgetpgrp(p->tty);
    return fg == getpgrp() || fg == p->g.cmd;
}

/* Gives the terminal to the command's group if zkr's job has it: 1 when
 * the command's group has it now and the command is still in it (a
 * command that moved to another group by setpgid() is not helped by the
 * terminal going to its old one: stopped by the terminal, it stops zkr's
 * job). */
static int hand_tty(sup_t *p)
{
    give_tty(p);
    return p->running && p->g.cmd > 0 && getpgid(p->g.cmd) == p->g.cmd &&
           tcgetpgrp(p->tty) == p->g.cmd;
}

/* Takes the terminal back from the command's group, unless someone (a
 * shell) has given it to another group meanwhile. */
static void take_tty(sup_t *p)
{
    if (p->handed && tcgetpgrp(p->tty) == p->g.cmd)
        tcsetpgrp(p->tty, getpgrp());
    p->handed = 0;
}

/* ------------------------------------------------------ command's tree */

/* Signals every process of the command. */
static void signal_tree(sup_t *p, int sig)
{
    if (p->running)
        ct_signal_tree(p->g.guard, sig);
}

/* Kills the whole tree, now and at every wake-up until it is gone (a
 * process forking while it is killed leaves a child behind). */
static void kill_tree(sup_t *p)
{
    p->killing = 1;
    p->kill_at = -1;
    ct_kill(&p->g);
    signal_tree(p, SIGKILL);
}

/* A signal zkr received for the command: forwarded to the whole tree,
 * followed by SIGCONT (a stopped process would never see it, as in
 * timeout(1)), and SIGKILL after --grace if anything is left. */
static void forward(sup_t *p, int sig)
{
    if (!p->running)
        return;
    signal_tree(p, sig);
    if (!p->stopped)
        signal_tree(p, SIGCONT);
    if (p->kill_at < 0 && !p->killing)
        p->kill_at = ct_now_ms() + p->o->grace_ms;
}

/* The guard ended. If it was killed, the tree is now ours (we are a
 * subreaper): kill and reap it ourselves. */
static void guard_ended(sup_t *p)
{
    int st = 0;
    pid_t r;

    do
        r = waitpid(p->g.guard, &st, 0);
    while (r < 0 && errno == EINTR);
    if (p->g.ctl >= 0)
        close(p->g.ctl);
    p->g.ctl = -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && p->exited) {
        p->g.guard = -1;
        p->running = 0;
        return;
    }
    cli_err("the guard process of the command died (%s %d): command killed",
            WIFSIGNALED(st) ? "signal" : "status",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    p->g.guard = -1;
    p->orphaned = 1;
    p->killing = 1;
    signal_tree(p, SIGKILL);
}

/* After the guard died: reaps what we inherited; the run ends when none
 * of the command's processes is left. */
static void reap_orphans(sup_t *p)
{
    int st;
    pid_t r;

    signal_tree(p, SIGKILL);
    while ((r = waitpid(-1, &st, WNOHANG)) > 0)
        if (r == p->g.cmd && !p->exited) {
            p->status = st;
            p->exited = 1;
        }
    if (ct_orphans(-1) == 0) {
        if (!p->exited) {
            p->status = SIGKILL; /* as a wait status: killed by SIGKILL */
            p->exited = 1;
        }
        p->running = 0;
    }
}

/* ---------------------------------------------------------- ownership */

/* The election's view, for the command: zkr runs elections under the
 * session policy (leadership is kept through SUSPENDED), so that "not
 * leader" means gone. The grant the command runs under is the one of the
 * epoch it started with: a loss followed by a new leadership (the
 * candidate rejoins by itself) is a loss, and so is a loss the descriptor
 * signals that we have not observed (it stays readable until
 * zkr_election_await() reports leadership again). SUSPENDED, until the
 * engine has re-verified the node after a reconnection, is the
 * candidate's own state. */
static own_t ownership(sup_t *p)
{
    if (!run_has_grant(p))
        return OWN_HELD; /* a phase that has begun: nothing to lose */
    if (p->e != NULL) {
        struct pollfd fd = {zkr_election_fd(p->e), POLLIN, 0};
        int64_t epoch;
        if (!zkr_election_is_leader(p->e) ||
            zkr_election_epoch(p->e, &epoch) != 0 || epoch != p->epoch)
            return OWN_GONE;
        if (fd.fd >= 0 && poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN))
            return OWN_GONE;
        if (zkr_election_state(p->e) == ZKR_LOCK_SUSPENDED)
            return OWN_SUSPENDED;
        return OWN_HELD;
    }
    switch (p->it != NULL ? zkr_item_state(p->it) : run_lock_state(p)) {
    case ZKR_LOCK_HELD:
        return OWN_HELD;
    case ZKR_LOCK_SUSPENDED:
        return OWN_SUSPENDED;
    default:
        return OWN_GONE;
    }
}

/* Applies --on-suspend to the current ownership while the command runs.
 * Each suspension is acted on once (softened); a re-verified HELD ends it,
 * so the next suspension of the same run is acted on again. */
static void react(sup_t *p)
{
    own_t own;

    if (!p->running || p->hard)
        return;
    own = ownership(p);
    if (own == OWN_HELD) {
        if (p->stopped) {
            signal_tree(p, SIGCONT);
            p->stopped = 0;
            cli_info(p->cli, "ownership re-verified: SIGCONT");
        } else if (p->softened) {
            cli_info(p->cli, "ownership re-verified");
        }
        if (p->softened && p->signo == 0)
            p->kill_at = -1;
        p->softened = 0;
    } else if (own == OWN_SUSPENDED && !p->softened) {
        int64_t valid = zkr_session_valid_ms(p->s);
        p->softened = 1;
        if (p->o->susp == SUSP_IGNORE)
            return;
        if (p->o->susp == SUSP_TERM) {
            signal_tree(p, SIGTERM);
            run_lose(p, "connection lost (suspended), command terminated");
            cli_info(p->cli,
                     "connection suspended: SIGTERM, SIGKILL in "
                     "%" PRId64 " ms unless gone",
                     valid);
        } else if (!p->stopped) {
            signal_tree(p, SIGSTOP);
            p->stopped = 1;
            cli_info(p->cli, "connection suspended: SIGSTOP");
        }
        if (p->kill_at < 0 || p->kill_at > ct_now_ms() + valid)
            p->kill_at = ct_now_ms() + (valid > 0 ? valid : 0);
    } else if (own == OWN_GONE) {
        p->hard = 1;
        run_lose(p, "the grant is gone (session expired or node deleted)");
        if (p->o->susp == SUSP_IGNORE) {
            signal_tree(p, SIGTERM);
            if (!p->stopped)
                signal_tree(p, SIGCONT);
            p->kill_at = ct_now_ms() + p->o->grace_ms;
            cli_err("ownership of %s lost: SIGTERM to the command, SIGKILL "
                    "in %" PRId64 " ms",
                    p->o->path, p->o->grace_ms);
        } else {
            kill_tree(p);
            cli_err("ownership of %s lost: command killed", p->o->path);
        }
    }
}

/* The guard's deadline: until when the command may run without a word
 * from us. While the grant stands, the session's safe deadline (a stopped
 * or frozen zkr cannot vouch for the grant past it); --on-suspend ignore
 * adds its grace after the loss; a pending SIGKILL comes first. Without a
 * grant (barrier enter, member) only that SIGKILL: a stopped zkr vouches for
 * nothing, and its command runs on. */
static void heartbeat(sup_t *p)
{
    int64_t now = ct_now_ms(), at;

    if (!p->running || p->orphaned)
        return;
    if (p->killing) {
        at = now;
    } else if (!run_has_grant(p)) {
        at = p->kill_at; /* -1: none */
    } else if (p->hard) {
        at = p->kill_at >= 0 ? p->kill_at : now;
    } else {
        at = now + zkr_session_valid_ms(p->s);
        if (p->o->susp == SUSP_IGNORE)
            at += p->o->grace_ms;
        if (p->kill_at >= 0 && p->kill_at < at)
            at = p->kill_at;
    }
    ct_heartbeat(&p->g, at);
    p->beat_at = now + 100;
}

/* ---------------------------------------------------------- main loop */

/* How long a command has to stop after zkr forwarded it a stop signal
 * (it may catch the signal: an editor restores the terminal first) before
 * zkr stops its tree with SIGSTOP. */
#define JC_WAIT_MS 1000

/* Stops zkr by sig (SIGTSTP, SIGTTIN, SIGTTOU), the stop of a job: its
 * parent (a shell, or the guard of an outer zkr) sees a job-control stop.
 * group: the whole process group, as the terminal stops a job. Returns 1
 * once continued. The kernel discards these stops in an orphaned process
 * group (no job control: nobody there would ever continue it): then zkr
 * does not stop either, and 0 is returned at once. SIGCONT is blocked,
 * never read by the signalfd: pending, it tells that we were stopped and
 * continued. The signal's default action is ours for the moment, whatever
 * disposition zkr inherited (the command inherits that one). */
int run_stop_as_job(int sig, int group)
{
    struct timespec zero = {0, 0};
    struct sigaction dfl, old;
    sigset_t cont, one;

    sigemptyset(&cont);
    sigaddset(&cont, SIGCONT);
    sigemptyset(&one);
    sigaddset(&one, sig);
    while (sigtimedwait(&cont, NULL, &zero) > 0)
        ; /* an older continuation */
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, &old);
    /* Unblocked in this thread only: the stop is delivered to it, as the
     * call returns. */
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    kill(group ? 0 : getpid(), sig);
    pthread_sigmask(SIG_BLOCK, &one, NULL);
    sigaction(sig, &old, NULL);
    if (sigtimedwait(&cont, NULL, &zero) < 0)
        return 0; /* discarded: not stopped */
    while (sigtimedwait(&cont, NULL, &zero) > 0)
        ;
    return 1;
}

/* Job control: the command's tree is stopped with us, and we stop by sig
 * (group: zkr's whole process group, see run_stop_as_job()). What the
 * terminal or a nested zkr stopped already is left as it is. While we are
 * stopped the guard keeps the session's safe deadline: past it the
 * command is killed. Continued, the command is given the terminal again
 * (zkr in the foreground) and then continued: its process group and what
 * we stopped (unless --on-suspend stop holds it); a nested zkr, continued
 * so, gives the terminal to its own command and continues it. */
static void stop_self(sup_t *p, int sig, int group)
{
    p->jc_at = -1;
    cli_info(p->cli, "stopped: the command is stopped too");
    if (p->running) {
        ct_stop_tree(p->g.guard);
        heartbeat(p);
    }
    take_tty(p);
    if (!run_stop_as_job(sig, group))
        cli_err("no job control (orphaned process group): zkr does not "
                "stop; the command is continued");
    give_tty(p);
    if (p->running && !p->stopped && !p->killing)
        ct_cont_tree(p->g.guard, p->g.cmd);
}

/* A stop signal for zkr (Ctrl-Z while zkr has the terminal, a shell's
 * kill -TSTP %1, ...): with a command running, it goes to the command's
 * process group first, as it would to a job, so that a command that
 * handles it (an editor, a nested zkr) stops its own way; its stop then
 * stops zkr (on_report()). Within JC_WAIT_MS zkr stops the tree itself. */
static void job_stop(sup_t *p, int sig)
{
    if (!p->running || p->exited || p->stopped || p->killing) {
        stop_self(p, sig, 0);
    } else if (p->jc_at < 0) {
        p->jc_sig = sig;
        p->jc_at = ct_now_ms() + JC_WAIT_MS;
        ct_signal_group(p->g.guard, p->g.cmd, sig);
    }
}

/* zkr continued without having stopped itself: the shell's fg after bg
 * (zkr and the command were continued with the terminal left to the
 * shell; now it is zkr's group's), or a kill -CONT. As fg does to a job:
 * the terminal to the command if zkr has it, and SIGCONT to the command's
 * group (a nested zkr then does the same for its own command). */
static void continued(sup_t *p)
{
    if (!p->running || p->exited || p->killing)
        return;
    p->jc_at = -1; /* a stop forwarded before is called off */
    give_tty(p);
    if (!p->stopped)
        ct_signal_group(p->g.guard, p->g.cmd, SIGCONT);
}

void run_on_signal(sup_t *p, int sig)
{
    switch (sig) {
    case SIGCHLD:
        return;
    case SIGCONT:
        continued(p);
        return;
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
        job_stop(p, sig);
        return;
    default:
        p->signo = sig;
        forward(p, sig);
    }
}

static void on_report(sup_t *p)
{
    int kind, value;

    if (!ct_read(&p->g, &kind, &value)) {
        guard_ended(p);
        return;
    }
    if (kind == CT_EXITED) {
        p->status = value;
        p->exited = 1;
    } else if (kind == CT_STOPPED && !p->killing && !ct_is_stopped(p->g.cmd)) {
        /* Continued since (by fg through us, or by anyone): a stop that
         * is over is no reason to stop the job now. */
    } else if (kind == CT_STOPPED && !p->killing && !p->stopped &&
               (value == SIGTTIN || value == SIGTTOU) && job_has_tty(p) &&
               hand_tty(p)) {
        /* The command touched the terminal while the shell's fg was still
         * on its way down to it (zkr, or a nested zkr, in the foreground
         * but the terminal not yet passed on): now it has the terminal,
         * and continues, as if fg had been quicker. */
        ct_signal_group(p->g.guard, p->g.cmd, SIGCONT);
        cli_info(p->cli, "the command touched the terminal before it was "
                         "given it: given, the command is continued");
    } else if (kind == CT_STOPPED && !p->killing &&
               (value == SIGTSTP || value == SIGTTIN || value == SIGTTOU)) {
        /* Ctrl-Z reached the command (its group owns the terminal), or,
         * zkr in the background, it read or wrote the terminal, or it
         * stopped on a stop signal zkr forwarded, or it is a nested zkr
         * that stopped so. (A SIGSTOP, ours or anyone's, is not job
         * control: left alone.) A stopped command must not hold the grant
         * unseen: zkr stops as a job, with its process group unless the
         * stop was zkr's own, and the guard's deadline ends the command
         * if nobody continues zkr (fg) within the session's safe
         * deadline. */
        if (run_has_grant(p))
            cli_err("the command was stopped (%s): zkr stops too; the "
                    "command is killed if zkr is not continued within "
                    "%" PRId64 " ms",
                    strsignal(value), zkr_session_valid_ms(p->s));
        else
            cli_err("the command was stopped (%s): zkr stops too",
                    strsignal(value));
        stop_self(p, value, p->jc_at < 0);
    } else if (kind == CT_DEADLINE && !p->killing) {
        p->killing = 1;
        run_lose(p, "zkr was not heard from by the safe deadline");
        cli_err("no word from zkr by the safe deadline of %s: the guard "
                "killed the command",
                p->o->path);
    }
}

/* Waits for the next message or signal (or a deadline) and handles
 * signals, the guard's reports and deadlines itself. Returns 1 with *m
 * filled for a message, 0 otherwise. */
int run_wait_event(sup_t *p, struct msg *m)
{
    struct pollfd fds[3] = {{p->ev[0], POLLIN, 0},
                            {p->sfd, POLLIN, 0},
                            {p->running ? p->g.rep : -1, POLLIN, 0}};
    int64_t timeout = -1, now = ct_now_ms();

    if (!p->running && p->wake_at >= 0)
        timeout = p->wake_at > now ? p->wake_at - now : 0;
    if (p->running) {
        if (p->killing || p->orphaned)
            timeout = 20;
        else if (p->softened || ownership(p) == OWN_SUSPENDED)
            timeout = 50; /* re-verification is not an event */
        else
            timeout = p->beat_at > now ? p->beat_at - now : 0;
        if (p->kill_at >= 0 && p->kill_at - now < timeout)
            timeout = p->kill_at > now ? p->kill_at - now : 0;
        if (p->jc_at >= 0 && p->jc_at - now < timeout)
            timeout = p->jc_at > now ? p->jc_at - now : 0;
    }
    if (timeout > 1000000)
        timeout = 1000000; /* poll() takes an int; we wake and look again */
    if (poll(fds, 3, (int)timeout) < 0 && errno != EINTR)
        return 0;
    if (p->running && p->kill_at >= 0 && ct_now_ms() >= p->kill_at) {
        kill_tree(p);
        if (!p->hard && p->signo == 0) {
            run_lose(p, "not re-verified in time");
            cli_err("ownership of %s not re-verified in time: command "
                    "killed",
                    p->o->path);
        }
    }
    if (fds[1].revents & POLLIN) {
        struct signalfd_siginfo si;
        if (read(p->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            run_on_signal(p, (int)si.ssi_signo);
    }
    if (p->running && (fds[2].revents & (POLLIN | POLLHUP | POLLERR)))
        on_report(p);
    if (p->running && p->jc_at >= 0 && ct_now_ms() >= p->jc_at)
        stop_self(p, p->jc_sig, 0); /* the command did not stop */
    if (p->running && p->orphaned)
        reap_orphans(p);
    if (p->running && p->killing)
        signal_tree(p, SIGKILL);
    if (p->running && ct_now_ms() >= p->beat_at)
        heartbeat(p);
    if (fds[0].revents & POLLIN) {
        if (read(p->ev[0], m, sizeof(*m)) == (ssize_t)sizeof(*m))
            return 1;
    }
    return 0;
}

/* Runs the command until every process of it is gone, reacting to
 * ownership changes. */
void run_supervise(sup_t *p)
{
    react(p); /* a suspension may have come before the command started */
    heartbeat(p);
    while (p->running) {
        struct msg m;
        run_wait_event(p, &m);
        react(p);
    }
    take_tty(p);
}
