/* Lock-delay (docs/design/lock-delay.md): a departure that no release
 * record proves delays the grant. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* ------------------------------------------------------- lock-delay */

/* Is e a foreign node whose departure we take for a release
 * (ZKR_DELAY_TRUST_FOREIGN)? */
static int delay_trusted(const zkr__contender_t *c, const zkr__entry_t *e)
{
    return (c->ld.delay_flags & (int)ZKR_DELAY_TRUST_FOREIGN) &&
           zkr__name_foreign(e->name);
}

/* Does our grant depend on e's departure? On the nodes of the kinds the
 * recipe's rule waits on (a reader: WRITE and EXCLUSIVE; READ nodes
 * share), by default on every node before ours. A trusted foreign node's
 * on none: its going is a release. */
static int delay_relevant(const zkr__contender_t *c, const zkr__entry_t *e)
{
    if (delay_trusted(c, e))
        return 0;
    return c->recipe->waits_on == NULL || c->recipe->waits_on(e->kind);
}

/* Is e exclusive (EXCLUSIVE with no holder count, WRITE or LATCH; not a
 * node of a rule that admits several holders)? Its grant
 * needed every node before it gone, so its clean release vouches for all
 * of them. */
static int delay_vouches(const zkr__entry_t *e)
{
    return (e->kind == ZKR__KIND_EXCLUSIVE && e->permits == 0) ||
           e->kind == ZKR__KIND_WRITE || e->kind == ZKR__KIND_LATCH;
}

/* No grant of this attempt before from + our delay. */
static void carry_from(zkr__contender_t *c, int64_t from)
{
    if (from + c->ld.delay_ms > c->ld.carry_until)
        c->ld.carry_until = from + c->ld.delay_ms;
}

/* Our node goes while its grant may owe a delay (docs/design/lock-delay.md,
 * 1.5): the attempt's next node (a rejoin) serves what is left. Delayed:
 * until the end decided, or the full delay while the record was being
 * read; waiting: nodes before us may have gone unseen, so the full delay
 * from now. */
static void carry_observed(zkr__contender_t *c)
{
    if (c->ld.delay_ms <= 0 || !zkr__is_acquiring(c) || c->ld.delay_served)
        return;
    if (c->ld.delay_until > c->ld.carry_until)
        c->ld.carry_until = c->ld.delay_until;
    else if (c->phase == ZKR__P_DELAYED && c->ld.delay_until < 0)
        carry_from(c, c->ld.delay_seen);
    else if (c->ld.before != NULL)
        carry_from(c, zkr__now_ms());
}

/* The nodes before us at the last wait. */
void zkr__forget_before(zkr__contender_t *c)
{
    for (int i = 0; i < c->ld.nbefore; i++)
        free(c->ld.before[i]);
    free(c->ld.before);
    c->ld.before = NULL;
    c->ld.nbefore = 0;
    free(c->ld.vouch);
    c->ld.vouch = NULL;
}

/* Our node goes (zkr__forget_node()): what a rejoin owes is carried, and
 * what we knew of the nodes around ours goes with it. */
void zkr__delay_forget_node(zkr__contender_t *c)
{
    carry_observed(c);
    free(c->ld.behind);
    c->ld.behind = NULL;
    c->ld.behind_czxid = 0;
    zkr__forget_before(c);
    free(c->ld.target);
    c->ld.target = NULL;
    c->ld.target_czxid = 0;
    c->ld.delay_served = 0;
    c->ld.delay_until = -1;
    free(c->ld.leave_record);
    c->ld.leave_record = NULL;
}

static void proof_done(int rc, const char *value, int len,
                       const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    zkr__record_t r;

    (void)stat;
    zkr__op_begin(op, rc);
    if (op->gen == c->gen &&
        (rc != ZOK || zkr__record_parse(value, len, &r) != ZKR__REC_RELEASE ||
         strcmp(r.node, op->path) != 0))
        carry_from(c, op->sent); /* not proved released: a death */
    zkr__op_end(op);
}

/* A new wait (docs/design/lock-delay.md, 1.5): the nodes we waited behind
 * that went since, and may have held (no exclusive node still here was
 * before them), stay owed. One alone may be proved released by the
 * record, read now: its answer comes before any later listing's (one
 * session answers in order). Otherwise our grant waits the delay from
 * now. */
static void note_departures(zkr__contender_t *c, const zkr__entry_t *e, int n)
{
    int gone = 0, blocked = 0;
    const char *last = NULL;
    zkr__op_t *op;

    for (int i = 0; i < c->ld.nbefore; i++) {
        int k = zkr__find_entry(e, n, c->ld.before[i]);

        if (k >= 0)
            blocked |= delay_vouches(&e[k]);
        else if (!blocked && ++gone)
            last = c->ld.before[i];
    }
    if (gone == 0)
        return;
    if (gone == 1 && (op = zkr__cop_new(c)) != NULL) {
        if ((op->path = zkr__strdup(last)) != NULL &&
            zoo_aget(c->s->zh, c->dir, 0, proof_done, op) == ZOK)
            return;
        zkr__op_cancel(op);
    }
    carry_from(c, zkr__now_ms());
}

/* A listing made us wait (docs/design/lock-delay.md, 1.3): remember
 * the nodes before us that our grant depends on, the last exclusive one
 * (it vouches for those before it), and the node we will watch (w, or
 * -1), so that a later grant can ask whether the ones gone by then were
 * released. Departures since the last wait stay owed (note_departures).
 * Returns 0 or ZKR_ENOMEM. */
int zkr__note_wait(zkr__contender_t *c, const zkr__entry_t *e, int n, int self,
                   int w)
{
    int k = self - 1;

    if (c->ld.delay_ms <= 0)
        return 0;
    note_departures(c, e, n);
    zkr__forget_before(c);
    c->ld.delay_served = 0;
    if (w >= 0 &&
        (c->ld.behind == NULL || strcmp(c->ld.behind, e[w].name) != 0)) {
        free(c->ld.behind);
        c->ld.behind_czxid = 0;
        if ((c->ld.behind = zkr__strdup(e[w].name)) == NULL)
            return ZKR_ENOMEM;
    }
    while (k >= 0 && !delay_vouches(&e[k]))
        k--;
    /* A trusted foreign node vouches for nothing: its library may not wait
     * for nodes it does not know (kazoo ignores zkr's). */
    if (k >= 0 && !delay_trusted(c, &e[k]) &&
        (c->ld.vouch = zkr__strdup(e[k].name)) == NULL)
        return ZKR_ENOMEM;
    if (self > 0 &&
        (c->ld.before = calloc((size_t)self, sizeof(char *))) == NULL)
        return ZKR_ENOMEM;
    c->ld.nvouched = 0;
    for (int i = 0; i < self; i++) {
        if (!delay_relevant(c, &e[i]))
            continue;
        if ((c->ld.before[c->ld.nbefore] = zkr__strdup(e[i].name)) == NULL)
            return ZKR_ENOMEM;
        c->ld.nbefore++;
        if (i < k)
            c->ld.nvouched = c->ld.nbefore;
    }
    return 0;
}

/* A listing grants us: which of the nodes we waited behind are gone, and
 * which one a record must name for the grant to be immediate? The last
 * exclusive one covers those before it; any other gone needs its own
 * record. Returns the number gone; *target is that node's name
 * (borrowed), or NULL when no one record covers all that went. */
static int gone_since_wait(const zkr__contender_t *c, const zkr__entry_t *e,
                           int n, const char **target)
{
    int gone = 0, uncovered = 0, vouch_gone;
    const char *last = NULL;

    vouch_gone = c->ld.vouch != NULL && zkr__find_entry(e, n, c->ld.vouch) < 0;
    for (int i = 0; i < c->ld.nbefore; i++) {
        if (zkr__find_entry(e, n, c->ld.before[i]) >= 0)
            continue;
        gone++;
        if (vouch_gone &&
            (i < c->ld.nvouched || strcmp(c->ld.before[i], c->ld.vouch) == 0))
            continue; /* covered by the vouch's release */
        uncovered++;
        last = c->ld.before[i];
    }
    if (vouch_gone)
        *target = uncovered == 0 ? c->ld.vouch : NULL;
    else
        *target = gone == 1 ? last : NULL;
    return gone;
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A record about our own node, of kind, into buf: its text, or NULL. */
static const char *own_record(zkr__contender_t *c, int kind, int64_t remaining,
                              char *buf, size_t size)
{
    zkr__record_t r;
    const char *name = strrchr(c->node, '/') + 1;

    memset(&r, 0, sizeof(r));
    r.kind = kind;
    r.czxid = c->czxid;
    if (strlen(name) < sizeof(r.node))
        strcpy(r.node, name);
    r.remaining_ms = remaining;
    r.until_ms = wall_ms() + remaining;
    strcpy(r.cause, "unreleased");
    return zkr__record_format(buf, size, &r) > 0 ? buf : NULL;
}

static void closed_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;

    (void)stat;
    zkr__op_begin(op, rc);
    zkr__op_end(op);
}

/* Sets the zkr-closed record over the directory's data of version (the
 * data we judged): a release record written since fails the version. */
static void set_closed(zkr__contender_t *c, int version)
{
    char text[ZKR__RECORD_MAX + 1];
    zkr__op_t *op;

    if (c->s->zh == NULL ||
        own_record(c, ZKR__REC_CLOSED, c->ld.delay_until - zkr__now_ms(), text,
                   sizeof(text)) == NULL ||
        (op = zkr__op_new(c->s, NULL)) == NULL)
        return;
    if (zoo_aset(c->s->zh, c->dir, text, (int)strlen(text), version,
                 closed_done, op) != ZOK)
        zkr__op_cancel(op);
}

static void closed_read_done(int rc, const char *value, int len,
                             const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    zkr__record_t r;
    int kind;

    zkr__op_begin(op, rc);
    kind = rc == ZOK ? zkr__record_parse(value, len, &r) : ZKR__REC_NONE;
    /* A release record we did not judge may be what another waiter reads
     * next (docs/design/lock-delay.md, 1.4): left alone. */
    if (rc == ZOK && kind != ZKR__REC_RELEASE && kind != ZKR__REC_LEFT &&
        op->gen == c->gen && c->ld.delay_until >= 0)
        set_closed(c, stat->version);
    zkr__op_end(op);
}

/* Says in ZooKeeper, for zkr inspect and zkr_lock_contenders(), that the
 * queue is closed until a wall-clock time. Informational: nothing reads it
 * to decide (a wall clock may be wrong); sent once, not retried. It
 * replaces only the data of version (the record we judged), or, with
 * version -1 (we judged none), data read now that is no release record. */
static void write_closed(zkr__contender_t *c, int version)
{
    zkr__op_t *op;

    if (!c->s->connected || c->s->zh == NULL)
        return;
    if (version >= 0) {
        set_closed(c, version);
        return;
    }
    if ((op = zkr__cop_new(c)) == NULL)
        return;
    if (zoo_aget(c->s->zh, c->dir, 0, closed_read_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* Does the record say that the node we were behind left cleanly? By
 * czxid when our watch told us it, else by name (the node was gone before
 * our watch was set). */
static int names_behind(const zkr__contender_t *c, const zkr__record_t *r)
{
    if (c->ld.target == NULL)
        return 0; /* more than one went: no one record covers them */
    if (c->ld.target_czxid != 0)
        return r->czxid == c->ld.target_czxid;
    return r->node[0] != '\0' && strcmp(r->node, c->ld.target) == 0;
}

/* Waits out wait ms from our observation, and whatever is owed from
 * before (carry_until): DELAYED for the application too, and said in
 * ZooKeeper (informational; version: write_closed()); the timer ends it. */
static void start_delay(zkr__contender_t *c, int64_t wait, int version)
{
    c->ld.delay_until = c->ld.delay_seen + wait;
    if (c->ld.carry_until > c->ld.delay_until)
        c->ld.delay_until = c->ld.carry_until; /* owed from before (1.5) */
    zkr__timed_add(c);
    zkr__notify_state(c, ZKR_LOCK_DELAYED);
    write_closed(c, version);
    zkr__timer_kick(c->s);
}

/* A listing grants us; if nodes we waited behind went (zkr__note_wait()), we
 * are DELAYED instead: reading the record (step), or, when no one record
 * can cover what went, waiting the full delay at once. Returns 0 or
 * ZKR_ENOMEM. */
int zkr__begin_delay(zkr__contender_t *c, const zkr__entry_t *e, int n)
{
    const char *t;

    if (gone_since_wait(c, e, n, &t) == 0) {
        if (c->ld.carry_until <= zkr__now_ms())
            return 0;              /* nothing we depended on went: granted */
        c->phase = ZKR__P_DELAYED; /* only what is owed from before (1.5) */
        c->ld.delay_seen = zkr__now_ms();
        start_delay(c, 0, -1);
        return 0;
    }
    free(c->ld.target);
    c->ld.target = NULL;
    c->ld.target_czxid = 0;
    if (t != NULL && (c->ld.target = zkr__strdup(t)) == NULL)
        return ZKR_ENOMEM;
    if (t != NULL && c->ld.behind != NULL && strcmp(c->ld.behind, t) == 0)
        c->ld.target_czxid = c->ld.behind_czxid;
    c->phase = ZKR__P_DELAYED;
    c->ld.delay_seen = zkr__now_ms();
    c->ld.delay_until = -1;
    if (c->ld.target == NULL)
        start_delay(c, c->ld.delay_ms, -1);
    return 0;
}

static void record_done(int rc, const char *value, int len,
                        const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr__contender_t *c = zkr__c(op->m);
    zkr__record_t r;
    int64_t wait;
    int kind;

    zkr__op_begin(op, rc);
    if (zkr__stale(op, ZKR__P_DELAYED) || c->ld.delay_until >= 0 ||
        zkr__is_connection_error(rc)) {
        zkr__op_end(op); /* a connection error: read again (step) */
        return;
    }
    if (rc == ZNONODE) {
        /* The directory, so our node, is gone: the listing says so. */
        c->phase = ZKR__P_LISTING;
        zkr__op_end(op);
        return;
    }
    if (rc != ZOK && rc != ZNOAUTH) {
        zkr__abort_acquire(
            c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
        zkr__op_end(op);
        return;
    }
    /* Unreadable (ZNOAUTH), empty, foreign, or about another node: the
     * node we were behind went without a release we can prove. */
    kind = rc == ZOK ? zkr__record_parse(value, len, &r) : ZKR__REC_NONE;
    wait = c->ld.delay_ms;
    if (kind == ZKR__REC_RELEASE && names_behind(c, &r))
        wait = 0;
    else if (kind == ZKR__REC_LEFT && names_behind(c, &r))
        wait = r.remaining_ms < wait ? r.remaining_ms : wait;
    if (wait <= 0 && c->ld.carry_until <= zkr__now_ms()) {
        c->ld.delay_served = 1;
        if (c->self_doubt)
            c->phase = ZKR__P_LISTING; /* is our node still ours? */
        else
            zkr__finish_acquire(c, 0); /* the listing granted us */
    } else {
        start_delay(c, wait, rc == ZOK && stat != NULL ? stat->version : -1);
    }
    zkr__op_end(op);
}

void zkr__issue_record_read(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_aget(c->s->zh, c->dir, 0, record_done, op) != ZOK)
        zkr__op_cancel(op);
}

/* The delay is over: list again. That listing re-verifies our node and
 * the queue, and grants without another delay unless a new node is before
 * us by then. */
void zkr__end_delay(zkr__contender_t *c)
{
    zkr__metrics_delay_served(c, zkr__now_ms() - c->ld.delay_seen);
    c->ld.delay_served = 1;
    c->ld.delay_until = -1;
    c->phase = ZKR__P_LISTING;
    c->pub = ZKR_LOCK_ACQUIRING;
    zkr__step(c);
}

/* Leaving while delayed (timeout, cancel, free): our delete writes how much
 * of the delay was left, so that the next waiter serves the rest. */
void zkr__prepare_leave(zkr__contender_t *c)
{
    char text[ZKR__RECORD_MAX + 1];
    int64_t left = c->ld.delay_until - zkr__now_ms();

    if (c->ld.delay_until < 0 || c->ld.leave_record != NULL)
        return; /* not decided yet: a plain delete, a death to the next */
    if (own_record(c, ZKR__REC_LEFT, left > 0 ? left : 0, text, sizeof(text)) !=
        NULL)
        c->ld.leave_record = zkr__strdup(text);
}

/* Sets a lock-delay option of the next acquires: ZKR_ESTATE while one
 * is in progress. */
static int set_delay_option(zkr__contender_t *c, int *slot, int v)
{
    int rc = 0;

    pthread_mutex_lock(&c->s->mu);
    if (zkr__is_acquiring(c))
        rc = ZKR_ESTATE;
    else
        *slot = v;
    pthread_mutex_unlock(&c->s->mu);
    return rc;
}

int zkr__set_delay(zkr__contender_t *c, int delay_ms)
{
    if (delay_ms < 0)
        return ZBADARGUMENTS;
    return set_delay_option(c, &c->ld.delay_ms, delay_ms);
}

int zkr__set_delay_flags(zkr__contender_t *c, unsigned flags)
{
    if ((flags & ~(unsigned)ZKR_DELAY_TRUST_FOREIGN) != 0)
        return ZBADARGUMENTS;
    return set_delay_option(c, &c->ld.delay_flags, (int)flags);
}

/* The inputs of the grant decision, from the contender and a listing. */
