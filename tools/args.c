/* The zkr command's value parsing and output escaping: pure functions,
 * unit-tested in tests/unit/test_args.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_parse_seconds(const char *s, int64_t *ms)
{
    char *end;
    double v;

    /* Digits first: no sign, no space, no hex float, no "inf". */
    if (s == NULL || ((*s < '0' || *s > '9') && *s != '.') ||
        strpbrk(s, "xXpP") != NULL)
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 ||
        v > CLI_SECONDS_MAX)
        return -1;
    /* 10^7 s = 10^10 ms: exact in a double, and in 64 bits. */
    *ms = (int64_t)ceil(v * 1000.0);
    return 0;
}

int cli_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cli_timeout_arg(int64_t wait_ms)
{
    return wait_ms < 0 || wait_ms > INT32_MAX ? -1 : (int)wait_ms;
}

void cli_escape(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\r')
            fputs("\\r", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}
