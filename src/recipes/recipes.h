/* The recipes of libzkr (src/recipes/): each one a rule and the calls
 * of its public handle, on the engine below. */
#ifndef ZKR_RECIPES_H
#define ZKR_RECIPES_H

#include "../engine/engine.h"

/* A lock handle's session and path, for the multi-lock (lock.c). */
zkr_session_t *zkr__lock_session(const zkr_lock_t *l);
const char *zkr__lock_dir(const zkr_lock_t *l);

#endif /* ZKR_RECIPES_H */
