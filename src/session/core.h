/* What the files of the session layer (src/session/) share besides its
 * interface (session.h). */
#ifndef ZKR_SESSION_CORE_H
#define ZKR_SESSION_CORE_H

#include "session.h"

/* session.c */
extern _Thread_local zkr_session_t *zkr__tl_event_session;
extern _Thread_local int zkr__tl_zk_thread;
extern _Thread_local int zkr__tl_synthetic;
int64_t zkr__heartbeat_ms(const zkr_session_t *s);
int64_t zkr__deadline_of(const zkr_session_t *s);
int zkr__is_live(zkr_state_t st);
void zkr__metrics_state(zkr_session_t *s, zkr_state_t st, int64_t margin_ms);

/* open.c: zkr_session_open()'s checks and diagnostics */
int zkr__check_hosts(const char *hosts);
char *zkr__build_hosts(const char *hosts, const char *chroot);
int zkr__why_no_handle(zkr_session_t *s, const char *hosts);
int zkr__why_not_connected(zkr_session_t *s, const char *hosts);
int zkr__open_rc(const zkr_session_t *s);
int zkr__auth_accepted(zkr_session_t *s, int64_t deadline);
int zkr__chroot_missing(zkr_session_t *s, const char *chroot);

/* events.c */
void zkr__ev_drop_all(zkr_session_t *s);
void *zkr__event_main(void *arg);
int zkr__dispatch_locked(zkr_session_t *s, uint64_t limit);
void zkr__set_state(zkr_session_t *s, zkr_state_t st);
void zkr__close_handle(zkr_session_t *s, zhandle_t *zh);
void zkr__wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline);

/* cleanup.c */
void zkr__cleanup_free(zkr__cleanup_t *cl);

/* conn.c */
void zkr__on_session_event(zkr_session_t *s, zhandle_t *zh, int state);
/* A new handle (NULL: failed, logged); *digest_missing: the session's
 * digest is still to be given to it (conn.c, give_digest). */
zhandle_t *zkr__open_handle(zkr_session_t *s, int *digest_missing);
void *zkr__timer_main(void *arg);
/* Logs that the server has no node chroot (then: what follows). */
void zkr__log_no_chroot(zkr_session_t *s, const char *chroot, const char *then);

#endif /* ZKR_SESSION_CORE_H */
