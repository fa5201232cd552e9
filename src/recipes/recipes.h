/* The recipes of libzkr (src/recipes/): each one a rule and the calls
 * of its public handle, on the engine below. */
#ifndef ZKR_RECIPES_H
#define ZKR_RECIPES_H

#include "../engine/engine.h"

#endif /* ZKR_RECIPES_H */
