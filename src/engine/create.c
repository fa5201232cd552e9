/* Creating a contender's node, and recovering one whose create had an
 * unknown outcome (found by its UUID). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* ------------------------------------------------------------ create */

static void create_done(int rc, const char *value, const struct Stat *stat,
                        const void *data);
static void parents_done(int rc, const char *value, const void *data);
static int issue_create_multi(zkr__contender_t *c, const char *path,
                              zkr__op_t *op);

int zkr__stale(const zkr__op_t *op, zkr__phase_t phase)
{
    return op->gen != zkr__c(op->m)->gen || zkr__c(op->m)->phase != phase;
}

void zkr__issue_create(zkr__contender_t *c)
{
    zkr_session_t *s = c->s;
    char name[64 + 16];
    char *path;
    zkr__op_t *op;
    int rc;

    snprintf(name, sizeof(name), "_c_%s%s%s", c->uuid, c->infix,
             c->recipe->marker);
    path = zkr__join(c->dir, name);
    op = path != NULL ? zkr__cop_new(c) : NULL;
    /* The node's cleanup entry first, room for the sequence included. */
    if (op != NULL &&
        (op->ctx = zkr__cleanup_reserve(strlen(path) + 11)) == NULL) {
        zkr__op_cancel(op);
        op = NULL;
    }
    if (op == NULL) {
        free(path);
        zkr__abort_acquire(c, ZKR_ENOMEM);
        return;
    }
    c->pre_seen = ZKR__PRE_UNKNOWN;
    if (c->pre_path != NULL)
        rc = issue_create_multi(c, path, op);
    else
        rc = zoo_acreate2(s->zh, path, c->data, (int)strlen(c->data), &c->acl,
                          ZOO_EPHEMERAL_SEQUENTIAL, create_done, op);
    /* The op keeps the name it asked for: a create whose answer is lost
     * after its contender moved on is searched for by this UUID. */
    op->path = path;
    if (rc != ZOK) {
        zkr__cleanup_unreserve(op->ctx);
        zkr__op_cancel(op);
        if (rc != ZINVALIDSTATE && !zkr__is_connection_error(rc))
            zkr__abort_acquire(c, rc);
        return;
    }
    /* Pipeline the first listing behind the create: a session's requests
     * are applied in order, so the list already contains our node, and an
     * uncontended acquire costs one round trip instead of two. If the
     * create fails, create_done leaves the LISTING phase unset and this
     * answer is discarded as stale (or, after a failed precondition, kept
     * in c->pre_seen: list_done). */
    zkr__issue_list(c);
}

/* Creates the directory as a container node, and (all) every ancestor
 * with it (ZooKeeper removes empty containers, so any of them may vanish
 * again later: a NONODE on create simply brings us back here). The
 * directory alone first: its parent is there in the common case (a new
 * lock under a known root), one request where creating every ancestor
 * costs one per level; when it is not (NONODE), all of them, sent at once
 * (requests on one session are applied in order), and the last one's
 * completion retries the create. */
enum { PARENTS_LAST = 1, PARENTS_DIR_ONLY = 2 }; /* zkr__op_t.last */

static void issue_parents(zkr__contender_t *c, int all)
{
    zkr_session_t *s = c->s;
    size_t len = strlen(c->dir);
    char *p = zkr__strdup(c->dir);

    if (p == NULL) {
        zkr__abort_acquire(c, ZKR_ENOMEM);
        return;
    }
    c->parents_made++;
    for (size_t i = all ? 1 : len; i <= len; i++) {
        zkr__op_t *op;
        if (p[i] != '/' && p[i] != '\0')
            continue;
        p[i] = '\0';
        op = zkr__cop_new(c);
        if (op == NULL)
            break;
        op->last = i < len ? 0 : all ? PARENTS_LAST : PARENTS_DIR_ONLY;
        if (zoo_acreate(s->zh, p, "", 0, &c->acl, ZOO_CONTAINER, parents_done,
                        op) != ZOK) {
            zkr__op_cancel(op);
            break;
        }
        p[i] = i == len ? '\0' : '/';
    }
    free(p);
}

static void parents_done(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    (void)value;
    if (op->last && !zkr__stale(op, ZKR__P_CREATING) && c->m.busy == 0) {
        if (c->abort_rc != 0)
            zkr__finish_acquire(c, c->abort_rc);
        else if (rc == ZNONODE && op->last == PARENTS_DIR_ONLY)
            issue_parents(c, 1); /* its parent is missing too */
        else if (rc == ZOK || rc == ZNODEEXISTS || zkr__is_connection_error(rc))
            zkr__step(c);
        else
            zkr__finish_acquire(
                c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
    (void)s;
}

/* A create with a precondition (zkr__set_precondition): the setData and
 * the create in one multi, so the node exists only if the write applied
 * (one transaction: the node's czxid is the write's mzxid). */
typedef struct create_multi {
    zkr__cleanup_t *reserve; /* the node's cleanup entry (op->ctx) */
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    struct Stat stat;
    char *created; /* the created path's buffer */
    int created_len;
} create_multi_t;

static void create_multi_done(int rc, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    create_multi_t *m = op->ctx;
    struct Stat st;

    op->ctx = m->reserve;
    memset(&st, 0, sizeof(st));
    if (rc == ZOK) {
        st = m->stat;
        st.czxid = m->stat.mzxid; /* one transaction, one zxid */
    } else if (!zkr__is_connection_error(rc) && rc != ZCLOSING &&
               rc != ZSESSIONEXPIRED && rc != ZINVALIDSTATE &&
               (m->results[0].err == ZBADVERSION ||
                m->results[0].err == ZNONODE || m->results[1].err == ZNONODE)) {
        rc = ZKR_ESTALE; /* the precondition failed: someone got there */
    }
    create_done(rc, rc == ZOK ? m->created : NULL, &st, op);
    free(m->created);
    free(m);
}

static int issue_create_multi(zkr__contender_t *c, const char *path,
                              zkr__op_t *op)
{
    create_multi_t *m = calloc(1, sizeof(*m));
    int rc;

    if (m != NULL) {
        m->created_len = (int)strlen(path) + 16;
        m->created = malloc((size_t)m->created_len);
    }
    if (m == NULL || m->created == NULL) {
        if (m != NULL)
            free(m);
        return ZKR_ENOMEM;
    }
    zoo_set_op_init(&m->ops[0], c->pre_path, c->pre_data, c->pre_len,
                    c->pre_version, &m->stat);
    zoo_create_op_init(&m->ops[1], path, c->data, (int)strlen(c->data), &c->acl,
                       ZOO_EPHEMERAL_SEQUENTIAL, m->created, m->created_len);
    m->reserve = op->ctx;
    op->ctx = m;
    rc = zoo_amulti(c->s->zh, 2, m->ops, m->results, create_multi_done, op);
    if (rc != ZOK) {
        op->ctx = m->reserve;
        free(m->created);
        free(m);
    }
    return rc;
}

/* The create of op (its name op->path: "<dir>/_c_<UUID>...") may have
 * been applied: the session's cleanup searches the directory for its
 * UUID and deletes what it finds (a node of op's session only). */
static void search_stale_create(zkr_session_t *s, const zkr__op_t *op)
{
    const char *slash = op->path != NULL ? strrchr(op->path, '/') : NULL;
    char *dir, uuid[37];

    if (slash == NULL || strncmp(slash + 1, "_c_", 3) != 0 ||
        strlen(slash + 4) < 36)
        return;
    memcpy(uuid, slash + 4, 36);
    uuid[36] = '\0';
    if ((dir = malloc((size_t)(slash - op->path) + 1)) == NULL)
        return; /* short of memory: as the other cleanups, left */
    memcpy(dir, op->path, (size_t)(slash - op->path));
    dir[slash - op->path] = '\0';
    (void)zkr__cleanup_add(s, NULL, dir, uuid, op->sid, NULL);
    free(dir);
}

static void create_done(int rc, const char *value, const struct Stat *stat,
                        const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    zkr__cleanup_t *reserve = op->ctx; /* our node's cleanup entry */

    op->ctx = NULL;
    if (rc == ZOK)
        s->counters[ZKR_COUNTER_CREATES]++;
    else
        zkr__cleanup_unreserve(reserve); /* no node */
    if (zkr__stale(op, ZKR__P_CREATING)) {
        /* Nobody wants this node any more (timed out, canceled, freed,
         * lost): delete it, or it would block the queue until our session
         * ends. Its answer lost, it may have been made: searched for by
         * the UUID of its name, in the session that sent it. */
        if (rc == ZOK)
            zkr__cleanup_commit(s, reserve, value, op->sid, NULL);
        else if (zkr__is_connection_error(rc) || rc == ZOPERATIONTIMEOUT)
            search_stale_create(s, op);
    } else if (rc == ZOK) {
        zkr__set_node(c, zkr__strdup(value));
        c->czxid = stat->czxid;
        c->node_sid = op->sid;
        if (c->node == NULL) {
            zkr__cleanup_commit(s, reserve, value, op->sid, NULL);
            zkr__finish_acquire(c, ZKR_ENOMEM);
            zkr__op_end(op);
            return;
        }
        c->reserve = reserve;
        if (c->abort_rc != 0) {
            c->phase = ZKR__P_LISTING;
            zkr__abort_acquire(c, c->abort_rc);
        } else {
            c->phase = ZKR__P_LISTING;
            zkr__step(c);
        }
    } else if (rc == ZNONODE && c->abort_rc == 0 && c->parents_made < 8 &&
               !(c->recipe->flags & ZKR__R_NO_PARENTS)) {
        issue_parents(c, 0);
    } else if (zkr__is_connection_error(rc)) {
        /* The create may or may not have been applied. */
        s->counters[ZKR_COUNTER_RECOVERIES]++;
        c->phase = ZKR__P_RECOVER;
        c->node_sid = op->sid;
        if (c->abort_rc != 0)
            zkr__abort_acquire(c, c->abort_rc);
        else
            zkr__step(c);
    } else if (c->abort_rc != 0) {
        zkr__finish_acquire(c, c->abort_rc);
    } else if (rc == ZKR_ESTALE ||
               (rc == ZNONODE && (c->recipe->flags & ZKR__R_NO_PARENTS))) {
        /* The precondition failed, or the directory (the item) is gone.
         * The listing sent behind the create tells the recipe what is in
         * the directory now: the acquire ends with its answer (list_done
         * keeps it, zkr__step ends the acquire), one request and one
         * round trip fewer than a read of its own. */
        if (c->m.busy > 0)
            c->abort_rc = ZKR_ESTALE;
        else
            zkr__finish_acquire(c, ZKR_ESTALE);
    } else {
        zkr__finish_acquire(c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
                                       rc == ZINVALIDSTATE
                                   ? ZKR_ELOST
                                   : rc);
    }
    zkr__op_end(op);
}

/* ----------------------------------------------------------- recover */

static void recover_stat_done(int rc, const struct Stat *stat, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    if (zkr__stale(op, ZKR__P_RECOVER)) {
        ;
    } else if (rc == ZOK && stat->ephemeralOwner == s->sid) {
        /* Ours, created by this very session: adopt it. */
        zkr__set_node(c, op->path);
        op->path = NULL;
        c->czxid = stat->czxid;
        c->node_sid = s->sid;
        c->phase = ZKR__P_LISTING;
        if (c->abort_rc != 0)
            zkr__abort_acquire(c, c->abort_rc);
    } else if (rc == ZOK) {
        /* Created by an older session of ours: never adopt it (that
         * session's ownership is gone); delete it and start over. */
        zkr__cleanup_add(s, op->path, NULL, NULL, s->sid, NULL);
        c->phase = ZKR__P_CREATING;
        zkr__new_uuid(c);
        if (c->abort_rc != 0)
            zkr__finish_acquire(c, c->abort_rc);
    } else if (rc == ZNONODE) {
        c->phase = ZKR__P_CREATING;
        if (c->abort_rc != 0)
            zkr__finish_acquire(c, c->abort_rc);
    }
    zkr__step(c);
    zkr__op_end(op);
}

static void recover_list_done(int rc, const struct String_vector *v,
                              const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);
    const char *hit = NULL;

    if (zkr__stale(op, ZKR__P_RECOVER)) {
        zkr__op_end(op);
        return;
    }
    if (rc == ZOK)
        for (int i = 0; v != NULL && i < v->count; i++)
            if (strstr(v->data[i], c->uuid) != NULL)
                hit = v->data[i];
    if (rc == ZOK && hit != NULL) {
        zkr__op_t *op2 = zkr__cop_new(c);
        if (op2 != NULL)
            op2->path = zkr__join(c->dir, hit);
        if (op2 == NULL || op2->path == NULL ||
            zoo_aexists(s->zh, op2->path, 0, recover_stat_done, op2) != ZOK) {
            if (op2 != NULL)
                zkr__op_cancel(op2);
        }
    } else if (rc == ZOK || rc == ZNONODE) {
        /* Never applied: create again (same UUID, nothing to confuse). */
        c->phase = ZKR__P_CREATING;
        if (c->abort_rc != 0)
            zkr__finish_acquire(c, c->abort_rc);
        else
            zkr__step(c);
    } else if (!zkr__is_connection_error(rc)) {
        zkr__abort_acquire(
            c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
}

/* The sync before the recovery listing is answered: the server we are
 * connected to has now applied everything the ensemble's leader had committed
 * when it got the sync. Our lost create went out on an earlier connection; it
 * was committed before that (a create the leader got later, forwarded by
 * the old server, is refused: the reconnection moved the session, and the
 * leader then refuses the old server's requests for it), or never. So the
 * listing below shows our node if it exists. Without the sync a lagging
 * follower answered "not found" and we created a twin (issue 12.8). */
static void recover_synced(int rc, const char *value, const void *data)
{
    zkr__op_t *op = (zkr__op_t *)data;
    zkr_session_t *s = zkr__op_begin(op, rc);
    zkr__contender_t *c = zkr__c(op->m);

    (void)value;
    if (zkr__stale(op, ZKR__P_RECOVER)) {
        ;
    } else if (rc == ZOK) {
        zkr__op_t *op2 = zkr__cop_new(c);
        if (op2 != NULL &&
            zoo_aget_children(s->zh, c->dir, 0, recover_list_done, op2) != ZOK)
            zkr__op_cancel(op2);
    } else if (!zkr__is_connection_error(rc)) {
        zkr__abort_acquire(
            c, rc == ZSESSIONEXPIRED || rc == ZCLOSING ? ZKR_ELOST : rc);
    }
    zkr__op_end(op);
}

void zkr__issue_recover(zkr__contender_t *c)
{
    zkr__op_t *op = zkr__cop_new(c);

    if (op == NULL)
        return;
    if (zoo_async(c->s->zh, c->dir, recover_synced, op) != ZOK)
        zkr__op_cancel(op);
}
