/* The grant decision: from a listing of the queue's directory to what the
 * contender does next, with no I/O and no state (docs/PROTOCOL.md [G2]-[G6],
 * [K1], [W2], [W3]). list_done() in src/engine/list.c gathers the inputs from
 * the contender and acts on the verdict; tests/unit/test_decide.c checks the
 * rules without a server. */
#include <string.h>

#include "engine.h"

zkr__verdict_t zkr__decide(const zkr__listing_t *in)
{
    zkr__verdict_t d = {ZKR__D_LOST, in->self, ZKR__GRANT, -1};
    int w;

    /* [G2] Our node is not in the listing: deleted by someone else, or
     * our session expired; it can never be granted. */
    if (in->self < 0)
        return d;
    /* [G3] The recipe's rule. */
    w = in->pred(in->e, in->n, in->self, in->permits);
    d.pred = w;
    if (w == ZKR__CONFLICT) {
        d.what = ZKR__D_CONFLICT;
        return d;
    }
    if (w == ZKR__GRANT) {
        if (in->self_doubt)
            d.what = ZKR__D_ASK_SELF; /* [G4] */
        else if (in->delay_due)
            d.what = ZKR__D_DELAY; /* [K1] */
        else if (in->delayed)
            d.what = ZKR__D_DELAYED; /* [K2]: the delay decides */
        else
            d.what = ZKR__D_GRANT; /* [G5] */
        return d;
    }
    if (in->try_once) {
        d.what = ZKR__D_BUSY; /* [G6] */
        return d;
    }
    /* [W2] What to watch. A waiter of a recipe that pokes (.poke: a grant
     * touches its node) is woken by its predecessor's touch: not when no
     * creator of our ACL can write its node, nor behind a node whose name
     * does not state our count of holders; the directory then. */
    if (w >= 0 && in->poke && !in->creator_writes)
        w = ZKR__WATCH_DIR;
    if (w >= 0 && in->poke && in->e[w].permits != in->permits)
        w = ZKR__WATCH_DIR;
    /* A node we may not read cannot be watched. */
    if (w >= 0 && in->unreadable != NULL &&
        strcmp(in->e[w].name, in->unreadable) == 0)
        w = ZKR__WATCH_DIR;
    d.target = w;
    if (w == ZKR__WATCH_DIR)
        d.what = ZKR__D_WATCH_DIR; /* [W3] */
    else if (in->poke &&
             (in->touchable == NULL || strcmp(in->e[w].name, in->touchable)))
        d.what = ZKR__D_ASK_TOUCH; /* a predecessor not known touchable */
    else
        d.what = ZKR__D_WATCH_NODE;
    return d;
}
