/* Every internal interface of libzkr, for the tests (the library's own
 * files include only their layer's header: src/base/base.h,
 * src/session/session.h, src/engine/engine.h, src/recipes/recipes.h). */
#ifndef ZKR_INTERNAL_H
#define ZKR_INTERNAL_H

#include "recipes/recipes.h"

#endif /* ZKR_INTERNAL_H */
