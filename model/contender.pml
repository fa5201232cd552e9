/* The zkr contender (src/engine/), one per session, for the recipe
 * RECIPE (model/zkr.pml): the engine's phases, each answer acted on as the code does.
 * Included by model/zkr.pml. Step IDs ([Q1] ...) are docs/PROTOCOL.md's. */

#define P_CREATING 1
#define P_CREATE_SENT 2
#define P_RECOVER 3
#define P_RECLIST 4
#define P_RECSTAT 5
#define P_LISTING 6
#define P_WATCHING 7
#define P_HELD 8
#define P_RELEASING 9
#define P_ABORTING 10
#define P_DONE 11

/* [G1], [R3] getChildren, answered by the follower from its state (it may lag). */
#define DIRP NS /* pred when watching the directory */

/* [W3] a listing that sets a child watch on the directory (semaphore) */
inline issue_list_w()
{
    lw = 1;
    cw[c] = 1;
    list_()
}

inline issue_list()
{
    lw = 0;
    list_()
}

inline list_()
{
    if
    :: RECIPE == R_SEM -> lz = FZ
    :: else
    fi;
    mask = 0;
    for (i : 0 .. NS - 1) {
        if
        :: LIVE_AT(i, FZ) -> mask = mask | (1 << i)
        :: else
        fi
    }
    ch[c]!R_LIST, mask
}

/* [W1], [H2] exists(own node) with a watch (issue_self_watch): the answer says
 * whether the node is still ours (czxid: slots are never reused; owner). */
inline issue_self_watch()
{
    swp = 1;
    if
    :: LIVE_AT(my, FZ) ->
        sw[c] = 1;
        ch[c]!R_SW, (s_own[my] == nsid)
    :: else -> ch[c]!R_SW, 0
    fi
}

/* [W4] getData(pred) with a watch (watch_node); NONODE leaves no watch. */
inline watch_pred()
{
    if
    :: LIVE_AT(pred, FZ) && RECIPE == R_SEM && f_mz[pred] > lz ->
        /* [W5] unseen_write: written (touched) since we listed: the
         * watch is taken back, list again */
        ch[c]!R_GETD, NONE
    :: LIVE_AT(pred, FZ) && !(RECIPE == R_SEM && f_mz[pred] > lz) ->
        dw[c] = pred + 1;
        ch[c]!R_GETD, pred
    :: else -> ch[c]!R_GETD, NONE
    fi
}

inline finish()
{
    held[c] = 0;
    dw[c] = 0;
    sw[c] = 0;
    cw[c] = 0;
    touch = 0;
    ph = P_DONE;
    phase[c] = ph
}

/* [G2], [W7], [W8], [H6] lose_waiting / lose_held: our node is gone, or not ours. */
inline lose()
{
    printf("MSC: zkr%d loses its node (phase %d): ELOST/LOST\n", c, ph);
    finish()
}

inline grant_ok()
{
    order_check(my);
    held[c] = 1;
#ifndef MUTANT_T
    /* [H1] touch_due (MUTANT_T: (t) a granted permit does not touch) */
    touch = (RECIPE == R_SEM);
#endif
    ph = P_HELD;
    phase[c] = ph;
    grant_token(my);
    printf("MSC: zkr%d HELD (slot %d, token %d)\n", c, my, s_cz[my])
}

/* [G5], [G8] finish_acquire(0); a grant found past the safe deadline is reported as
 * ELOST, never as a grant (zkr__acquire: enforce_deadline, take_lost) */
inline grant()
{
    if
    :: cl_lost[sid] -> lose()
    :: else -> grant_ok()
    fi
}



/* [G3], [G4], [G10]-[G12], [W1], [W2], [W3]: the decision on a listing
 * (zkr__decide in src/engine/decide.c, acted on by list_done). n: the entries
 * before us that block us by our rule; pred: the last of them (for a
 * semaphore, the entry just before us). */
inline decide()
{
    pred = NONE;
    n = 0;
    for (i : 0 .. NS - 1) {
        if
        :: (mask & (1 << i)) && i != my && BLOCKS(i, my) ->
            n++;
            if
            :: pred == NONE || BEFORE(s_seq[pred], s_seq[i]) -> pred = i
            :: else
            fi
        :: else
        fi
    }
#ifdef MUTANT_O
    /* (o) a semaphore that counts permits held instead of entries before
     * it (a barging semaphore): granted when fewer than N contenders hold
     * one, whatever waits before it; else it waits as the rule says */
    k = fheld[0] + fheld[1] + fheld[2];
    for (j : 0 .. NZ - 1) {
        k = k + held[j]
    }
    if
    :: RECIPE == R_SEM && k < SEMN -> n = 0
    :: RECIPE == R_SEM && k >= SEMN && n < SEMN -> n = SEMN
    :: else
    fi;
#endif
    if
#ifdef MUTANT_S
    /* (s) a semaphore granted with N entries before it */
    :: RECIPE == R_SEM && n <= SEMN -> pred = NONE
#else
    :: RECIPE == R_SEM && n < SEMN -> pred = NONE
#endif
    :: RECIPE == R_SEM && n == SEMN -> pred = DIRP /* the first waiter */
#ifndef MUTANT_W
    /* [W2] a predecessor that will not touch its node when granted (a
     * foreign one): watch the directory instead */
    :: RECIPE == R_SEM && n > SEMN && !TOUCHABLE(pred) -> pred = DIRP
#endif
    :: else
    fi;
    if
    :: pred == NONE && doubt ->
        /* our name is listed, but whether the node is still ours is being
         * asked: list again once the answer comes */
        relist = 1;
        if
        :: !sw[c] && !swp -> issue_self_watch()
        :: else
        fi
    :: pred == NONE && !doubt -> grant()
    :: pred == DIRP && !lw ->
        /* [W3] WATCH_DIR from a listing without a child watch */
        issue_list_w()
    :: else ->
        /* wait: watch our own node first, then the predecessor (or the
         * directory, whose watch the listing set) */
        if
        :: !sw[c] && !swp -> issue_self_watch()
        :: else
        fi;
        ph = P_WATCHING;
        phase[c] = ph;
        pchg = 0;
        if
        :: pred != DIRP -> watch_pred()
        :: else
        fi
    fi
}

#if MAXDISC
/* [S1], [H3] The connection drops (-DMAXDISC; src/session/session.c
 * zkr__on_session_event, not connected: SUSPENDED, zkr__queue_on_suspended).
 * The answers that reached the client before are acted on first (the
 * zkr consumed them); every answer still on the way is lost, its callback
 * gets CONNECTIONLOSS; a write in flight was applied (that it may not have
 * been is, for a create, the lost-create branch; for a delete, the same as
 * a later delete, and the disconnection is not taken while a create is in
 * flight). The server drops the connection's watches; the client keeps
 * those whose answer it had and whose event it had not, and re-registers
 * them ([Z7], inline reconnect). j, k, n: the answer of the self-watch,
 * of the getData, of a watched listing was lost. */
inline disconnect()
{
    ndisc++;
    disc[c] = 1;
    d_z[c] = FZ;
    d_fp[c] = 0;
    d_fs[c] = 0;
    d_fc[c] = 0;
    do
    :: nempty(ch[c]) ->
        ch[c]?m, x;
        if
        :: m == R_SW -> j = 1
        :: m == R_GETD -> k = 1
        :: m == R_LIST && lw -> n = 1
        :: m == R_DONE && x == cl ->
            clsent = 0 /* [C3] cleanup_deleted: the pump sends it again */
        :: (m == N_DEL || m == N_CHG) && x == my && !j -> d_fs[c] = 1
        :: (m == N_DEL || m == N_CHG) && x != my && !k ->
            d_fp[c] = 1;
            d_pw[c] = x + 1
        :: m == N_DIR && !n -> d_fc[c] = 1
        :: else /* [G1] list_done: listed again once connected; [H4]
                 * verify_done: verified after the next reconnection */
        fi
    :: empty(ch[c]) -> break
    od;
    /* a write of ours the leader has and the follower not yet: its answer
     * is lost too */
    for (i : FZ + 1 .. Z) {
        if
        :: lg_by[i] == c -> lg_by[i] = NONE; clsent = 0
        :: else
        fi
    }
    d_sw[c] = (sw[c] && !swp) || d_fs[c];
    if
    :: d_fp[c]
    :: !d_fp[c] && dw[c] != 0 && !k -> d_pw[c] = dw[c]
    :: else -> d_pw[c] = 0
    fi;
    d_cw[c] = (cw[c] && !n) || d_fc[c];
    dw[c] = 0;
    sw[c] = 0;
    cw[c] = 0;
    swp = 0; /* [W8] self_watch_done: a connection error, self_watch = 0 */
    if
    :: ph == P_WATCHING && k ->
        ph = P_LISTING /* [W5] watch_done: a connection error */
    :: else
    fi;
    if
    :: ph == P_HELD && !susp[c] -> susp[c] = 1 /* [H3] SUSPENDED */
    :: else
    fi;
    phase[c] = ph;
    printf("MSC: zkr%d disconnected (phase %d)\n", c, ph)
}

/* [Z7] setWatches, for a data watch on slot k re-registered with the last
 * zxid the client saw: gone → NodeDeleted; changed after that zxid (its
 * event was lost, or a write after the disconnection) → NodeDataChanged;
 * else the watch is set again (set). */
#define REREG(k, lost, set) \
    if \
    :: !LIVE_AT(k, FZ) -> ch[c]!N_DEL, k \
    :: LIVE_AT(k, FZ) && (lost || f_mz[k] > d_z[c]) -> ch[c]!N_CHG, k \
    :: else -> set \
    fi

/* [S3] The same session back (RECONNECTED), on the same follower: its
 * state is not older than what the client saw ([Z3]; the model has one
 * follower), and it revalidates the session with the leader (so not
 * while cut off). The client re-registers its watches first; the events
 * they fire reach zkr before the answers to what zkr sends now (one
 * FIFO). Then zkr__queue_on_connected(s, 0): WATCHING lists again (a
 * release may have happened while away), and step: LISTING lists, HELD
 * and SUSPENDED re-verifies ([H4], issue_verify); a cleanup entry is sent
 * by the pump (the cleanup branch). [D8]: the deadline is kept (cl_lost,
 * ld_exp untouched); the heartbeat branch runs again. */
inline reconnect()
{
    disc[c] = 0;
    if
    :: d_sw[c] -> REREG(my, d_fs[c], sw[c] = 1)
    :: else
    fi;
    if
    :: d_pw[c] != 0 -> REREG(d_pw[c] - 1, d_fp[c], dw[c] = d_pw[c])
    :: else
    fi;
    if
    :: d_cw[c] ->
        /* a child created or deleted after that zxid (pzxid) */
        k = d_fc[c];
        for (i : d_z[c] + 1 .. FZ) {
            if
            :: lg_kind[i] == L_CREATE || lg_kind[i] == L_DELETE -> k = 1
            :: else
            fi
        }
        if
        :: k -> ch[c]!N_DIR, 0
        :: else -> cw[c] = 1
        fi
    :: else
    fi;
    d_z[c] = 0;
    d_pw[c] = 0;
    d_sw[c] = 0;
    d_cw[c] = 0;
    d_fp[c] = 0;
    d_fs[c] = 0;
    d_fc[c] = 0;
    if
    :: ph == P_WATCHING -> ph = P_LISTING
    :: else
    fi;
    phase[c] = ph;
    printf("MSC: zkr%d reconnected, same session (phase %d)\n", c, ph);
    if
    :: ph == P_LISTING -> issue_list()
    :: ph == P_HELD && susp[c] ->
        /* [H4] issue_verify: exists(own node), no watch */
        ch[c]!R_VER, (LIVE_AT(my, FZ) && s_own[my] == nsid)
    :: else
    fi
}
#endif

/* Temporaries are zeroed after each step, so that states differ only in
 * what matters. */
#define CLEAR() x = 0; i = 0; j = 0; k = 0; n = 0; hit = 0; mask = 0; m = 0

proctype zkr(byte c)
{
    byte ph = P_CREATING, sid = 2 * c, nsid, my = NONE, uu = 2 * c;
    byte pred = NONE, mask, cl = NONE, x, i, j, k, n, hit, lz;
    bool doubt, relist, swp, pchg, clsent, canceled, lw, touch, kept;
    mtype m;

    phase[c] = ph;
    do
    /* ----------------------------------------------- [Q2], [Q4] create */
    :: atomic {
        ph == P_CREATING && !cut && sess_alive[sid] && !cl_lost[sid] ->
        if
        :: l_create(sid, uu, c, x);
            ph = P_CREATE_SENT
        :: nloss < MAXLOSS ->
            /* connection lost after the create was applied */
            nloss++;
            l_create(sid, uu, NONE, x);
            ph = P_RECOVER;
            printf("MSC: zkr%d create applied (slot %d), answer lost\n", c, x)
        :: nloss < MAXLOSS ->
            /* connection lost before it was applied */
            nloss++;
            ph = P_RECOVER;
            printf("MSC: zkr%d create lost\n", c)
        fi;
        phase[c] = ph;
        CLEAR()
    }
    /* ------------------------ recovery after a lost create [R1]-[R5] */
    :: atomic {
        /* the handle comes back with a new session while the leader still
         * has the old one (zkr__queue_on_connected(new_session), no LOST) */
        NEWSESS && ph == P_RECOVER && sid == 2 * c ->
        abandoned[sid] = 1;
        sid = 2 * c + 1;
        cursid[c] = sid;
        sess_alive[sid] = 1;
        printf("MSC: zkr%d reconnects with a new session %d\n", c, sid)
    }
    :: atomic {
        /* recover_synced: sync first (a follower that lags would not show
         * the node), then list */
        ph == P_RECOVER && !cut && sess_alive[sid] && !cl_lost[sid] ->
        do
        :: FZ < Z -> f_apply1()
        :: else -> break
        od;
        ph = P_RECLIST;
        phase[c] = ph;
        issue_list();
        CLEAR()
    }
    /* ---------------------------------- cleanup list entry [C2], [C3] */
    :: atomic {
        cl != NONE && !clsent && !cut && sess_alive[sid] && !cl_lost[sid] ->
        clsent = 1;
        if
        :: LIVE(cl) -> l_delete(cl, c)
        :: else -> ch[c]!R_DONE, cl /* NONODE */
        fi
    }
    /* ------------------------------------------ holding [L1], [H2] */
    :: atomic {
        /* release: the cleanup list deletes the node */
        ph == P_HELD && !kept ->
        held[c] = 0;
        ph = P_RELEASING;
        phase[c] = ph;
        cl = my;
        clsent = 0;
        printf("MSC: zkr%d releases\n", c)
    }
#ifdef KEEP
    :: atomic {
        /* (-DKEEP) a holder may keep its grant for ever: weak fairness
         * then does not make it release */
        ph == P_HELD && !kept -> kept = 1;
        printf("MSC: zkr%d keeps its grant\n", c)
    }
#endif
    :: atomic {
        /* [H1] a granted permit touches its node (poke), waking the
         * waiter that watches it */
        ph == P_HELD && touch && !cut && sess_alive[sid] && !cl_lost[sid] ->
        touch = 0;
        if
        :: LIVE(my) -> log_(L_SET, my, NONE);
            printf("MSC: zkr%d touches slot %d\n", c, my)
        :: else
        fi
    }
    :: atomic {
        /* the self-watch of a contender granted on its first listing,
         * set ZKR__SELF_WATCH_DELAY_MS later */
        ph == P_HELD && !sw[c] && !swp -> issue_self_watch()
    }
    :: atomic {
        /* [A1]-[A3] cancel (or time out) while waiting: abort_acquire */
        CANCEL && ph == P_WATCHING && !canceled ->
        canceled = 1;
        dw[c] = 0;
        ph = P_ABORTING;
        phase[c] = ph;
        cl = my;
        clsent = 0;
        printf("MSC: zkr%d cancels\n", c)
    }
    /* --------------------------- heartbeat [D1], session [D5], [S5] */
    :: atomic {
        /* a sync answered through the leader: the leader touched us */
        ph != P_DONE && !cut && sess_alive[sid] && !cl_lost[sid] &&
        (ld_exp[sid] || fol_only[sid]) ->
        ld_exp[sid] = 0;
        fol_only[sid] = 0
    }
#ifdef MUTANT_D
    :: atomic {
        /* (d) a heartbeat answered by the follower alone: the client's
         * last heard moves, the leader heard nothing */
        ph != P_DONE && cut && !cl_lost[sid] && !fol_only[sid] ->
        fol_only[sid] = 1;
        printf("MSC: zkr%d heartbeat answered by the cut-off follower\n", c)
    }
#endif
    :: atomic {
        ph != P_DONE && cl_lost[sid] ->
        printf("MSC: zkr%d session LOST (phase %d)\n", c, ph);
        cl = NONE;
        finish()
    }
    /* --------------------------------------- answers and notifications */
    :: atomic {
        ch[c]?m, x ->
        /* (Promela's if picks any true guard: these are exclusive) */
        if
        :: ph == P_DONE -> skip
        :: ph != P_DONE && m == N_EXP -> cl = NONE;
            printf("MSC: zkr%d told its session expired\n", c);
            finish()
        :: ph != P_DONE && m == R_DONE && x == cl ->
            /* the cleanup's delete is confirmed */
            cl = NONE;
            clsent = 0;
            if
            :: ph == P_RELEASING || ph == P_ABORTING -> finish()
            :: else
            fi
        :: m == R_DONE && x != cl && ph == P_CREATE_SENT ->
            /* create_done: our node */
            my = x;
            myslot[c] = x;
            nsid = sid;
            ph = P_LISTING;
            phase[c] = ph;
            printf("MSC: zkr%d created slot %d seq %d czxid %d\n", c, x, s_seq[x], s_cz[x]);
            issue_list()
        :: m == R_LIST && ph == P_RECLIST ->
            /* [R4] recover_list_done: our UUID in the listing? */
            hit = NONE;
            for (i : 0 .. NS - 1) {
                if
                :: (x & (1 << i)) && s_uu[i] == uu -> hit = i
                :: else
                fi
            }
            if
            :: hit != NONE ->
                ph = P_RECSTAT;
                if
                :: LIVE_AT(hit, FZ) -> ch[c]!R_STAT, hit
                :: else -> ch[c]!R_STAT, NONE
                fi
            :: else -> ph = P_CREATING /* never applied: create again */
            fi;
            phase[c] = ph
        :: m == R_STAT && ph == P_RECSTAT ->
            /* [R5] recover_stat_done */
            if
#ifdef MUTANT_E
            /* (e) adopt without the owner check */
            :: x != NONE ->
#else
            :: x != NONE && s_own[x] == sid ->
#endif
                my = x;
                myslot[c] = x;
                nsid = sid;
                ph = P_LISTING;
                printf("MSC: zkr%d adopts slot %d (owner %d)\n", c, x, s_own[x]);
                issue_list()
#ifndef MUTANT_E
            :: x != NONE && s_own[x] != sid ->
                /* an older session's: delete it, start over (new UUID) */
                cl = x;
                clsent = 0;
                uu = 2 * c + 1;
                ph = P_CREATING
#endif
            :: else -> ph = P_CREATING
            fi;
            phase[c] = ph
        :: m == R_LIST && ph == P_LISTING ->
            /* [G1], [G2] list_done: the grant rests on this answer alone */
#ifdef MUTANT_B
            /* (b) no check that our own node is listed */
            mask = x;
            decide()
#else
            if
            :: !(x & (1 << my)) -> lose()
            :: else -> mask = x; decide()
            fi
#endif
        :: m == R_GETD && ph == P_WATCHING && x == NONE ->
            /* [W5] watch_done: gone before we could watch it: list */
#ifdef MUTANT_A
            if
            :: pchg -> grant()
            :: else
            fi;
            if
            :: ph == P_WATCHING ->
#endif
            ph = P_LISTING;
            phase[c] = ph;
            issue_list()
#ifdef MUTANT_A
            :: else
            fi
#endif
        :: ph != P_DONE && m == R_SW ->
            /* [W8] self_watch_done */
            swp = 0;
            if
#ifdef MUTANT_B
            :: !x && ph == P_HELD -> lose()
#else
            :: !x && (ph == P_HELD || ph == P_LISTING || ph == P_WATCHING) -> lose()
#endif
            :: x ->
                doubt = 0;
                if
                :: relist && ph == P_LISTING -> relist = 0; issue_list()
                :: else
                fi
            :: else
            fi
        :: ph != P_DONE && (m == N_DEL || m == N_CHG) && x == my ->
            /* [W7] zkr__node_watcher, our own node */
            if
#ifdef MUTANT_B
            :: m == N_DEL && ph == P_HELD -> lose()
#else
            :: m == N_DEL && (ph == P_HELD || ph == P_LISTING || ph == P_WATCHING) -> lose()
#endif
            :: m == N_CHG && (ph == P_HELD || ph == P_LISTING || ph == P_WATCHING) ->
                doubt = 1;
                issue_self_watch()
            :: else
            fi
        :: m == N_DIR && ph == P_WATCHING && pred == DIRP ->
            /* [W6] a child added or removed: a hint, list again */
            ph = P_LISTING;
            phase[c] = ph;
            issue_list()
        :: (m == N_DEL || m == N_CHG) && x != my && ph == P_WATCHING && x == pred ->
            /* [W6] zkr__node_watcher, the predecessor: a hint, list again */
#ifdef MUTANT_A
            /* (a) the old handoff: the predecessor "changed, then gone"
             * (or just gone) taken as proof that everyone before us is
             * gone, without a listing */
            if
            :: m == N_CHG -> pchg = 1; watch_pred()
            :: m == N_DEL -> grant()
            :: else ->
#endif
#ifdef MUTANT_F
            /* (f) the notification is dropped: the waiter is never woken */
            skip
#else
            ph = P_LISTING;
            phase[c] = ph;
            issue_list()
#endif
#ifdef MUTANT_A
            fi
#endif
#if MAXDISC
        :: m == R_VER && ph == P_HELD && susp[c] ->
            /* [H4] verify_done: owner our session and czxid ours → HELD
             * again (touch again, the self-watch if missing); ZOK with
             * another owner or czxid, or ZNONODE → lose_held */
            vtold[c] = !x;
            if
#ifdef MUTANT_V
            /* (v) HELD again on any answer, the owner and czxid unchecked */
            :: true ->
#else
            :: x ->
#endif
                susp[c] = 0;
                touch = (RECIPE == R_SEM);
                printf("MSC: zkr%d re-verified: HELD\n", c);
                if
                :: !sw[c] && !swp -> issue_self_watch()
                :: else
                fi
#ifndef MUTANT_V
            :: else -> lose()
#endif
            fi
#endif
        :: else -> skip /* stale: an answer to an earlier phase */
        fi;
        CLEAR()
    }
#if MAXDISC
    /* ------------------- disconnection, same session [S1]-[S3], [H3] */
    :: atomic {
        ndisc < MAXDISC && sess_alive[sid] && !cl_lost[sid] &&
        (ph == P_LISTING || ph == P_WATCHING || ph == P_HELD ||
         ph == P_RELEASING || ph == P_ABORTING) ->
        disconnect();
        CLEAR()
    };
    /* disconnected: zkr sends nothing ([Q7] step needs the connection)
     * and hears nothing; the deadline runs on ([D4]) */
    do
    :: atomic {
        !cut && sess_alive[sid] && !cl_lost[sid] ->
        reconnect();
        CLEAR();
        break
    }
    :: cl_lost[sid] || !sess_alive[sid] -> break /* LOST meanwhile [D5] */
    od
#endif
    :: ph == P_DONE && (cl == NONE || cl_lost[sid] || !sess_alive[sid]) -> break
    od;
    ndone++
}
