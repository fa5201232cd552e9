/* Every cmocka test program calls zkt_test_filter() before running its
 * group: ZKR_TEST_FILTER=GLOB runs only the tests whose names match (as
 * cmocka matches: `*` and `?`), as tests/cli/lib.sh does for the shell
 * tests. Include after <cmocka.h>. */
#ifndef ZKR_TEST_FILTER_H
#define ZKR_TEST_FILTER_H

#include <stdlib.h>

static inline void zkt_test_filter(void)
{
    const char *glob = getenv("ZKR_TEST_FILTER");

    if (glob != NULL && *glob != '\0')
        cmocka_set_test_filter(glob);
}

#endif
