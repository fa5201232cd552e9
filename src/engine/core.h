/* The contender-queue engine (SPEC section 2): one implementation of the
 * ordered queue of ephemeral-sequential nodes that every recipe uses. A
 * recipe gives only its marker (node naming) and its predicate (who must
 * go before we are granted).
 *
 * Each contender is a small state machine (zkr__phase_t) driven by
 * ZooKeeper completions, watch events, session state changes and the timer
 * thread, all under the session mutex. zkr__step() looks at the phase and
 * issues the next request when the connection allows it; every completion
 * checks that it still belongs to the current attempt (gen) and phase, so a
 * late answer can never grant or corrupt a newer attempt.
 *
 *   IDLE -> CREATING -> LISTING <-> WATCHING -> HELD -> RELEASING -> IDLE
 *             |  ^
 *             v  |  (connection lost during create: outcome unknown)
 *           RECOVER: find our node by UUID; adopt it only if its
 *                    ephemeralOwner is our current session
 *   any acquiring phase -> ABORTING (delete our node) -> IDLE
 *
 * Evidence for a grant: only a listing (getChildren) answered after our
 * create and after the last notification we acted on, which shows our own
 * node and nothing before it that the recipe's rule forbids. A
 * notification (our predecessor deleted or written, a child added or
 * removed) is only a hint to list again: any client may write or delete
 * any contender's node (Curator's revocation writes waiters' nodes,
 * operators delete them), so what an event seems to say about the queue
 * is never taken for its state. (An earlier handoff that granted without
 * listing, on "the node before me was written, then is gone", was removed
 * for that reason, and so was granting from a cached listing.)
 *
 * Watches, one for the rule and one on our own node: a waiter watches the
 * one node its rule names (its predecessor; the directory when the rule
 * names none, as for the first waiter under a rule that admits several
 * holders, or when that node may not be read), so a release notifies one
 * waiter. It also watches its own node from its
 * first wait on, and keeps that watch once granted: a deletion by someone
 * else ends the acquire with ZKR_ELOST (or the grant with LOST) at once.
 * Events on one connection arrive in zxid order, before the answer to any
 * later request, so no grant can follow our node's deletion unnoticed.
 *
 * Node deletion (release, abort, orphans) is always done by the session's
 * cleanup list, which retries across disconnections until the delete is
 * confirmed or the session is gone: one place guarantees "no node left
 * behind". */

/* The engine's own declarations, shared by its files (src/engine/). */
#ifndef ZKR_ENGINE_CORE_H
#define ZKR_ENGINE_CORE_H

#include "engine.h"

static inline int zkr__is_acquiring(const zkr__contender_t *c)
{
    return c->pub == ZKR_LOCK_ACQUIRING || c->pub == ZKR_LOCK_DELAYED;
}

/* Our node exists and we wait for our turn (listing, watching, or
 * delayed). */
static inline int zkr__is_waiting(const zkr__contender_t *c)
{
    return c->phase == ZKR__P_LISTING || c->phase == ZKR__P_WATCHING ||
           c->phase == ZKR__P_DELAYED;
}

/* loss.c */
void zkr__fd_observed(zkr__contender_t *c);
void zkr__notify_state(zkr__contender_t *c, zkr_lock_state_t st);
void zkr__forget_node(zkr__contender_t *c);
int zkr__announces(const zkr__contender_t *c);
void zkr__finish_acquire(zkr__contender_t *c, int rc);
void zkr__finish_release(zkr__contender_t *c, int rc);
int zkr__release_to_cleanup(zkr__contender_t *c, zkr__member_t *owner);

/* index.c */
void zkr__set_node(zkr__contender_t *c, char *node);
void zkr__set_watching(zkr__contender_t *c, char *path);
void zkr__clear_node(zkr__contender_t *c);
void zkr__clear_watching(zkr__contender_t *c);
int zkr__path_watched_by_other(zkr_session_t *s, const char *path,
                               const zkr__contender_t *self);
void zkr__drop_watch(zkr_session_t *s, const char *path,
                     const zkr__contender_t *self, int wtype);
void zkr__stop_watching(zkr__contender_t *c);

/* create.c */
int zkr__stale(const zkr__op_t *op, zkr__phase_t phase);
void zkr__issue_create(zkr__contender_t *c);
void zkr__issue_recover(zkr__contender_t *c);

/* list.c */
void zkr__poke(zkr__contender_t *c);
void zkr__new_uuid(zkr__contender_t *c);
void zkr__issue_list(zkr__contender_t *c);
int zkr__take_lost(zkr__contender_t *c);
int zkr__grant_result(zkr__contender_t *c, uint64_t gen, uint64_t letgo);
void zkr__lose_waiting(zkr__contender_t *c);
void zkr__lose_held(zkr__contender_t *c);
void zkr__issue_self_watch(zkr__contender_t *c);
void zkr__issue_verify(zkr__contender_t *c);

/* lockdelay.c */
void zkr__forget_before(zkr__contender_t *c);
void zkr__delay_forget_node(zkr__contender_t *c);
int zkr__note_wait(zkr__contender_t *c, const zkr__entry_t *e, int n, int self,
                   int w);
int zkr__begin_delay(zkr__contender_t *c, const zkr__entry_t *e, int n);
void zkr__issue_record_read(zkr__contender_t *c);
void zkr__end_delay(zkr__contender_t *c);
void zkr__prepare_leave(zkr__contender_t *c);

/* commit.c */
void zkr__hand_over(zkr__contender_t *c);
int zkr__commit_gone_rc(const zkr__contender_t *c);
void zkr__end_commit(zkr__contender_t *c, int rc, int keep);
void zkr__issue_commit(zkr__contender_t *c);

/* step.c */
void zkr__step(zkr__contender_t *c);
void zkr__abort_acquire(zkr__contender_t *c, int rc);
void zkr__timed_add(zkr__contender_t *c);
void zkr__timed_remove(zkr__contender_t *c);

/* api.c */
void zkr__start_attempt(zkr__contender_t *c, int timeout_ms);
int zkr__rejoin(zkr__contender_t *c);

#endif
