/* A Promela (SPIN) model of zkr's contender queue AS IMPLEMENTED in
 * src/engine/ and src/session/session.c, for the exclusive lock, and with
 * -DRECIPE the read/write lock or a semaphore (issue 13).
 * model/README.md says what is modelled, how abstractly, and what not;
 * `make model` runs the checks, `make model-mutants` the broken variants
 * (-DMUTANT_x, each must yield a counterexample).
 *
 * The world: one ZooKeeper leader (the server state below), one follower
 * that every zkr client is connected to (it lags: it applies the leader's
 * changes one zxid at a time, and its link to the leader can be cut), zkr
 * contenders (one session each), a foreign (Curator-named) contender and a
 * foreign actor that writes and deletes anyone's node (a waiter's node, or,
 * as an operator's forced delete, the holder's). A paused process is any
 * interleaving in which a process takes no step while others do.
 *
 * Each atomic block is one step whose effect the server applies at once. */

#ifndef NZ
#define NZ 2 /* zkr contenders */
#endif
#define NS 6     /* node slots; each is used at most once */
#define NSESS (2 * NZ) /* zkr sessions: contender c uses 2c, then 2c+1 */
#define FSESS NSESS    /* the foreign contender's session (never expires) */
#define SEQM 32  /* the sequence space (ZooKeeper: 2^32), signed halves */
#define MAXZ 24  /* zxids */
#define NONE 255
#ifndef MAXOPS
#define MAXOPS 2 /* writes + deletes by the foreign actor */
#endif
#ifndef MAXLOSS
#define MAXLOSS 1 /* creates whose answer is lost (in all) */
#endif
#ifndef MAXCUTS
#define MAXCUTS 1 /* follower-leader link cuts */
#endif
#ifndef NEWSESS
#define NEWSESS 1 /* a handle may come back with a new session */
#endif
#ifndef CANCEL
#define CANCEL 1 /* a waiter may cancel (or time out) once */
#endif
#ifndef FOREIGN
#define FOREIGN 1 /* the foreign contender takes part */
#endif
#ifndef NF
#define NF 1 /* foreign contenders (at most 3), when FOREIGN */
#endif
#ifndef MAXLAPSE
#define MAXLAPSE 1 /* sessions that go silent for T (besides abandoned ones) */
#endif
#ifndef MAXDISC
#define MAXDISC 0 /* disconnections of a zkr client's connection (same session) */
#endif

/* The recipe ([G10]-[G12]): the exclusive lock (and election, [E1]), the
 * read/write lock (zkr contender 0 and the foreign contender write, the
 * other zkr contenders read), or a semaphore of SEMN permits (every
 * contender takes one; the foreign contender's node cannot be touched). */
#define R_LOCK 0
#define R_RW 1
#define R_SEM 2
#ifndef RECIPE
#define RECIPE R_LOCK
#endif
#ifndef SEMN
#define SEMN 2
#endif
#define FUU 9 /* the foreign contender's UUID */
/* a writer's node (read/write lock): the foreign one or zkr contender 0's */
#define WRITER(i) (s_uu[i] == FUU || s_uu[i] / 2 == 0)
/* a node whose holder touches it when granted ([H1]): a zkr permit */
#define TOUCHABLE(i) (s_uu[i] != FUU)

/* ------------------------------------------------------------ the order */
/* [N3] Creation order is serial-number order over the sequence (RFC 1982):
 * a is older than b when (b - a) mod 2^k is in (0, 2^(k-1)). The model's
 * counter starts at the largest positive signed value, so the second
 * creation wraps to the most negative one. */
#ifdef MUTANT_C
/* (c) signed order: the wrapped (newest) sequence sorts first. */
#define SGN(x) ((x) >= SEQM / 2 -> (x) - SEQM : (x))
#define BEFORE(a, b) (SGN(a) < SGN(b))
#else
#define DIFF(a, b) (((b) - (a) + SEQM) % SEQM)
#define BEFORE(a, b) (DIFF(a, b) > 0 && DIFF(a, b) < SEQM / 2)
#endif

/* --------------------------------------------------------- the leader */
byte Z;                /* last zxid */
byte CV = SEQM / 2 - 1; /* the directory's cversion */
byte nslots;
byte s_seq[NS];
byte s_cz[NS];  /* czxid (0: slot unused) */
byte s_dz[NS];  /* zxid of its deletion (0: alive) */
byte s_own[NS]; /* ephemeralOwner (session) */
byte s_uu[NS];  /* the UUID in its name (zkr: 2c + attempt; foreign: 9) */
byte f_mz[NS];
bool gr[NS];    /* [P5]: granted, and still there (zkr.pml, order_check) */  /* the follower's mzxid of a written node (0: never) */

mtype = { L_CREATE, L_DELETE, L_SET, L_EXPIRE };
mtype lg_kind[MAXZ];
byte lg_slot[MAXZ]; /* the node (L_EXPIRE: the session) */
byte lg_by[MAXZ];   /* the zkr contender answered when applied, or NONE */

#define LIVE(i) (s_cz[i] != 0 && s_dz[i] == 0)
#define LIVE_AT(i, v) (s_cz[i] != 0 && s_cz[i] <= (v) && (s_dz[i] == 0 || s_dz[i] > (v)))

inline log_(kind, slot, by)
{
    Z++;
    assert(Z < MAXZ);
    lg_kind[Z] = kind;
    lg_slot[Z] = slot;
    lg_by[Z] = by
}

inline l_create(own, uu, by, slot)
{
    assert(nslots < NS);
    slot = nslots;
    nslots++;
    log_(L_CREATE, slot, by);
    s_seq[slot] = CV;
    CV = (CV + 1) % SEQM;
    s_cz[slot] = Z;
    s_own[slot] = own;
    s_uu[slot] = uu
}

inline l_delete(slot, by)
{
    log_(L_DELETE, slot, by);
    s_dz[slot] = Z;
    gr[slot] = 0;
    CV = (CV + 1) % SEQM
}

/* ------------------------------------------------------- the follower */
byte FZ;    /* last zxid applied by the follower */
bool cut;   /* its link to the leader is cut */
byte cuts;

/* Data watches it holds for zkr clients (one-shot): on the predecessor,
 * and on the contender's own node. */
byte dw[NZ];   /* slot + 1 */
bool sw[NZ];
bool cw[NZ];   /* a child watch on the directory (semaphore, [W3]) */
byte myslot[NZ];

/* Replies and notifications, in the order the follower sends them
 * (per-session FIFO, notifications in zxid order before any later reply). */
mtype = { R_DONE, R_LIST, R_GETD, R_SW, R_STAT, N_DEL, N_CHG, N_EXP, N_DIR };
chan ch[NZ] = [8] of { mtype, byte };

/* ----------------------------------------------------------- sessions */
bool sess_alive[NSESS + 1];
bool cl_lost[NSESS];  /* zkr declared LOST: its safe deadline has passed */
bool ld_exp[NSESS];   /* the leader has not heard of it for T: may expire it */
bool fol_only[NSESS]; /* its last heartbeat was answered by the follower alone */
bool abandoned[NSESS];
byte lapses;
byte nloss; /* creates whose answer was lost */
byte cursid[NZ];

#if MAXDISC
/* [S1]-[S3] A zkr client's connection drops and comes back with the same
 * session (model/contender.pml, inline disconnect, inline reconnect). */
byte ndisc;      /* disconnections so far */
bool disc[NZ];   /* disconnected */
bool susp[NZ];   /* HELD, pub SUSPENDED ([H3]) */
byte d_z[NZ];    /* the follower's zxid when the connection dropped */
byte d_pw[NZ];   /* the client's watch on the predecessor (slot + 1) */
bool d_sw[NZ];   /* ... on its own node */
bool d_cw[NZ];   /* ... on the directory */
bool d_fp[NZ];   /* its event was lost with the connection: fires again */
bool d_fs[NZ];
bool d_fc[NZ];
bool vtold[NZ];  /* a re-verification answered: our node is gone */
mtype = { R_VER };
#endif

/* ---------------------------------------------------- the properties */
byte phase[NZ];
bool held[NZ];     /* zkr: HELD */
bool forced[NS];   /* deleted by someone else while first in the queue */
bool fheld[3]; /* foreign contender f holds */
byte fslot[3];  /* its node (NONE before it creates one) */
byte last_token; /* the czxid of the last grant */
byte ndone;

/* A holder counts while its deadline has not passed, unless its node
 * was deleted by another client while it was first in the queue (an
 * operator's forced release: the holder is told, but late). */
#if MAXDISC
/* ([AS8]) ... until it is told: a re-verification that found its node gone
 * ends the excuse. A SUSPENDED holder counts ([P1]: every holder whose
 * deadline has not passed; SPEC: LOST is "suspended past the safe
 * deadline", and until then it may still be finishing a side effect). */
#define VALID_Z(c) (held[c] && !cl_lost[cursid[c]] && (!forced[myslot[c]] || vtold[c]))
#else
#define VALID_Z(c) (held[c] && !cl_lost[cursid[c]] && !forced[myslot[c]])
#endif
#define VALID_F1(f) (fheld[f] && !forced[fslot[f]])
#define VALID_F (VALID_F1(0) + VALID_F1(1) + VALID_F1(2))
#if NZ == 3
#define NVALID (VALID_Z(0) + VALID_Z(1) + VALID_Z(2) + VALID_F)
#elif NZ == 1
#define NVALID (VALID_Z(0) + VALID_F)
#else
#define NVALID (VALID_Z(0) + VALID_Z(1) + VALID_F)
#endif
/* [P1], [P2], [P3], [P8]: too many holders */
#if RECIPE == R_SEM
#define BAD (NVALID > SEMN)
#elif RECIPE == R_RW
#define NVW (VALID_Z(0) + VALID_F) /* valid writers */
#define BAD (NVW > 1 || (NVW > 0 && NVALID > NVW))
#else
#define BAD (NVALID > 1)
#endif

/* Whether node j blocks node i by i's rule (before it, and for a reader
 * a writer); a semaphore counts SEMN of them. */
#ifdef MUTANT_R
/* (r) a reader ignores the writers before it */
#define BLOCKS(j, i) (BEFORE(s_seq[j], s_seq[i]) && (RECIPE != R_RW || WRITER(i)))
#else
#define BLOCKS(j, i) (BEFORE(s_seq[j], s_seq[i]) && (RECIPE != R_RW || WRITER(i) || WRITER(j)))
#endif
#if RECIPE == R_SEM
#define LIMIT SEMN
#else
#define LIMIT 1
#endif

/* The recipe's rule on the leader's state: res = 1 when fewer than LIMIT
 * live nodes block `slot`. */
inline eligible(slot, j, n, res)
{
    n = 0;
    for (j : 0 .. NS - 1) {
        if
        :: j != slot && LIVE(j) && BLOCKS(j, slot) -> n++
        :: else
        fi
    }
    res = (n < LIMIT);
    j = 0;
    n = 0
}

/* [P5] Queue order among surviving contenders, from the rule (SPEC, issue
 * 13): when a contender is granted, every node before it in the queue's
 * order ([N3]) that still exists on the leader is granted (its holder was
 * told) or eligible by its own recipe's rule on the leader's state (told
 * or not yet). A later contender never overtakes an earlier one that must
 * still wait. Checked at each grant of a node that exists. gr[j]: node j
 * was granted (its holder may be releasing it); cleared when it goes. */
byte oj, o_n, o_k; /* scratch, zero between steps */
bool oe;
inline order_check(slot)
{
    for (oj : 0 .. NS - 1) {
        if
        :: oj != slot && LIVE(slot) && LIVE(oj) && BEFORE(s_seq[oj], s_seq[slot]) && !gr[oj] ->
            eligible(oj, o_k, o_n, oe);
            if
            :: !oe ->
                printf("MSC: OUT OF ORDER: slot %d granted, slot %d before it waits\n", slot, oj);
                assert(false)
            :: else
            fi
        :: else
        fi
    }
    oj = 0;
    oe = 0;
    gr[slot] = LIVE(slot)
}

/* [P4], [F1] Fencing tokens of successive grants strictly increase. A grant
 * on a node someone deleted while it was first (a forced release) is
 * older than the deletion and every grant after it: not counted. */
inline grant_token(slot)
{
    if
    :: !forced[slot] && (RECIPE == R_LOCK || (RECIPE == R_RW && WRITER(slot))) ->
        assert(s_cz[slot] > last_token);
        last_token = s_cz[slot]
    :: else
    fi
}

/* ---------------------------------------------------- server actions */

/* [Z2], [Z7] The follower applies the next committed change: fires the one-shot
 * watches on it, then answers the zkr request that made it. */
inline f_apply1()
{
    FZ++;
    k = lg_slot[FZ];
    if
    :: lg_kind[FZ] == L_SET -> f_mz[k] = FZ
    :: else
    fi;
    if
    :: lg_kind[FZ] == L_CREATE || lg_kind[FZ] == L_DELETE ->
        j = 0;
        do
        :: j < NZ ->
            if
            :: cw[j] -> cw[j] = 0; ch[j]!N_DIR, 0
            :: else
            fi;
            j++
        :: else -> break
        od
    :: else
    fi;
    if
    :: lg_kind[FZ] == L_DELETE || lg_kind[FZ] == L_SET ->
        j = 0;
        do
        :: j < NZ ->
            if
            :: dw[j] == k + 1 ->
                dw[j] = 0;
                if
                :: lg_kind[FZ] == L_DELETE -> ch[j]!N_DEL, k
                :: else -> ch[j]!N_CHG, k
                fi
            :: else
            fi;
            if
            :: sw[j] && myslot[j] == k ->
                sw[j] = 0;
                if
                :: lg_kind[FZ] == L_DELETE -> ch[j]!N_DEL, k
                :: else -> ch[j]!N_CHG, k
                fi
            :: else
            fi;
            j++
        :: else -> break
        od
    :: lg_kind[FZ] == L_EXPIRE ->
        j = 0;
        do
        :: j < NZ ->
            if
            :: cursid[j] == k -> ch[j]!N_EXP, k
            :: else
            fi;
            j++
        :: else -> break
        od
    :: else
    fi;
    if
    :: lg_by[FZ] != NONE -> ch[lg_by[FZ]]!R_DONE, k
    :: else
    fi
}

active proctype follower()
{
    byte j, k;
end:
    do
    :: atomic { !cut && FZ < Z -> f_apply1(); j = 0; k = 0 }
    :: atomic { !cut && cuts < MAXCUTS -> cut = 1; cuts++ }
    :: atomic { cut -> cut = 0 }
    od
}

/* [Z5], [Z8] Expiry is decided by the leader, T after it last heard of the session:
 * its nodes are deleted, then the session is closed. */
inline expire(s)
{
    j = 0;
    do
    :: j < nslots ->
        if
        :: LIVE(j) && s_own[j] == s ->
            l_delete(j, NONE)
        :: else
        fi;
        j++
    :: else -> break
    od;
    log_(L_EXPIRE, s, NONE);
    sess_alive[s] = 0
}

/* [D1]-[D6] The safe deadline, abstracted: a session that goes silent for T is
 * LOST at the client (its deadline, last heard + T - T/10, comes first)
 * and may then be expired by the leader. The client's "last heard" only
 * moves on a heartbeat answered by the leader (a sync), so the leader's
 * last touch is never older than the client's last heard; the leader
 * alone can lapse only after a heartbeat the follower answered alone
 * (MUTANT_D). */
active proctype clock()
{
    byte s, j;
end:
    do
    :: atomic {
        select(s : 0 .. NSESS - 1);
        if
        :: sess_alive[s] && !cl_lost[s] && (abandoned[s] || lapses < MAXLAPSE) ->
            if
            :: !abandoned[s] -> lapses++
            :: else
            fi;
            cl_lost[s] = 1;
            ld_exp[s] = 1;
            printf("MSC: session %d silent for T: LOST at the client, expirable\n", s)
        :: fol_only[s] && !ld_exp[s] ->
            ld_exp[s] = 1;
            printf("MSC: session %d: the leader has not heard of it for T\n", s)
        :: ld_exp[s] && sess_alive[s] ->
            expire(s);
            printf("MSC: leader expires session %d\n", s)
        :: else
        fi;
        s = 0;
        j = 0 /* no stale temporaries in the state */
    }
    od
}

/* ------------------------------------------------- the foreign actors */

/* [X1] A Curator/kazoo-named contender; its library's rule, run on the
 * leader's state: granted when its own node exists and no node is before
 * it; gives up if its node is deleted. */
proctype foreign(byte f)
{
    byte i, n;
    bool free;
    if
    :: !FOREIGN -> goto fend
    :: else
    fi;
    atomic {
        l_create(FSESS, FUU, NONE, fslot[f]);
        printf("MSC: foreign%d creates slot %d seq %d czxid %d\n", f, fslot[f], s_seq[fslot[f]], s_cz[fslot[f]])
    }
    do
    :: atomic {
        s_dz[fslot[f]] != 0 -> printf("MSC: foreign%d gives up (its node is gone)\n", f);
        goto fend
    }
    :: atomic {
        s_dz[fslot[f]] == 0;
        eligible(fslot[f], i, n, free);
        if
        :: free ->
            order_check(fslot[f]);
            fheld[f] = 1;
            grant_token(fslot[f]);
            printf("MSC: foreign%d HELD (token %d)\n", f, s_cz[fslot[f]]);
            break
        :: else
        fi
    }
    od;
#ifdef KEEP
    /* (-DKEEP) it may keep its grant for ever */
    if
    :: skip
    :: printf("MSC: foreign%d keeps its grant\n", f);
        false
    fi;
#endif
    atomic {
        fheld[f] = 0;
        if
        :: LIVE(fslot[f]) -> l_delete(fslot[f], NONE)
        :: else
        fi;
        printf("MSC: foreign%d releases\n", f)
    }
fend:
    ndone++
}

/* [X2]-[X4] Another client: writes any node (Curator's revocation, a monitoring
 * tool), deletes any node (a buggy peer deleting a waiter's node; an
 * operator's forced delete of the holder's, which excuses that holder
 * until it notices). */
active proctype other()
{
    byte i, ops, j, n;
end:
    do
    :: ops < MAXOPS ->
        atomic {
            select(i : 0 .. NS - 1);
            LIVE(i);
            ops++;
            log_(L_SET, i, NONE);
            printf("MSC: other writes slot %d\n", i);
            i = 0
        }
    :: ops < MAXOPS ->
        atomic {
            select(i : 0 .. NS - 1);
            LIVE(i);
            ops++;
            /* a node its rule grants is a holder's, whether or not its
             * client has been told yet: deleting it is a forced release */
            eligible(i, j, n, forced[i]);
            l_delete(i, NONE);
            if
            :: forced[i] -> printf("MSC: other deletes slot %d, the first (a forced release)\n", i)
            :: else -> printf("MSC: other deletes slot %d, a waiter's\n", i)
            fi;
            i = 0;
            j = 0
        }
    od
}

/* ------------------------------------------------------ the property */
active proctype mutex_monitor()
{
    /* [P1] at most one exclusive holder among contenders whose deadline
     * has not passed (and whose node no operator deleted) */
    atomic { BAD -> printf("MSC: TOO MANY HOLDERS\n"); assert(false) }
}

/* [P7] No node of a finished contender survives its cleanup: once every
 * contender is done, any node left belongs to a session zkr declared LOST
 * or left behind for a new one (the leader deletes it when it expires
 * that session). */
active proctype cleanup_monitor()
{
    byte i;
    atomic {
        ndone == NZ + NF ->
        for (i : 0 .. NS - 1) {
            if
            :: LIVE(i) && s_own[i] < NSESS ->
                printf("MSC: slot %d of session %d left behind\n", i, s_own[i]);
                assert(cl_lost[s_own[i]] || abandoned[s_own[i]])
            :: else
            fi
        }
    }
}

#ifdef LIVENESS
/* [P6] No contender waits forever while nothing is before it: for
 * contender 0 (the model is symmetric), under weak fairness (-DLIVENESS;
 * pan -a -f), in a small configuration (model/check.sh). */
#define BLK0(i) (myslot[0] != i && LIVE(i) && BLOCKS(i, myslot[0]))
#define FREE0 (myslot[0] != NONE && LIVE(myslot[0]) && \
    BLK0(0) + BLK0(1) + BLK0(2) + BLK0(3) + BLK0(4) + BLK0(5) < LIMIT)
#define WAITING0 (phase[0] == 6 || phase[0] == 7)
ltl live0 { [] ((WAITING0 && FREE0) -> <> !WAITING0) }
#endif

/* ------------------------------------------------- the zkr contender */

#include "contender.pml"

init
{
    byte c;
    atomic {
        sess_alive[FSESS] = 1;
        for (c : 0 .. NF - 1) {
            fslot[c] = NONE;
            run foreign(c)
        }
        for (c : 0 .. NZ - 1) {
            cursid[c] = 2 * c;
            sess_alive[2 * c] = 1;
            myslot[c] = NONE;
            run zkr(c)
        }
    }
}
