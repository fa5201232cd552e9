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

int cli_utf8_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    int n;
    uint32_t cp, min;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1fU, min = 0x80;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0fU, min = 0x800;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07U, min = 0x10000;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also the terminating NUL */
            return 0;
        cp = cp << 6 | (p[i] & 0x3fU);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* The code point of the valid UTF-8 character of n bytes at s. */
static uint32_t code_point(const unsigned char *s, int n)
{
    static const unsigned char lead[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t cp = s[0] & lead[n];

    for (int i = 1; i < n; i++)
        cp = cp << 6 | (s[i] & 0x3fU);
    return cp;
}

/* Characters that print as nothing or change how the rest of a line is
 * shown: Unicode's format characters (general category Cf: soft hyphen,
 * zero-width spaces and joiners, bidirectional embeddings, overrides and
 * isolates, BOM, tags, ...), the line and paragraph separators, and the
 * Hangul fillers (blank letters). */
static int invisible(uint32_t cp)
{
    static const uint32_t ranges[][2] = {
        {0x00ad, 0x00ad},   {0x0600, 0x0605},   {0x061c, 0x061c},
        {0x06dd, 0x06dd},   {0x070f, 0x070f},   {0x0890, 0x0891},
        {0x08e2, 0x08e2},   {0x115f, 0x1160},   {0x180e, 0x180e},
        {0x200b, 0x200f},   {0x2028, 0x202e},   {0x2060, 0x2064},
        {0x2066, 0x206f},   {0x3164, 0x3164},   {0xfeff, 0xfeff},
        {0xffa0, 0xffa0},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd},
        {0x110cd, 0x110cd}, {0x13430, 0x1343f}, {0x1bca0, 0x1bca3},
        {0x1d173, 0x1d17a}, {0xe0001, 0xe0001}, {0xe0020, 0xe007f},
    };

    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
        if (cp >= ranges[i][0] && cp <= ranges[i][1])
            return 1;
    return 0;
}

void cli_escape(FILE *f, const char *s)
{
    while (*s != '\0') {
        unsigned char c = (unsigned char)*s;
        int n = cli_utf8_len(s);
        /* C1 controls (U+0080..U+009F) act on terminals as ESC does. */
        int c1 = n == 2 && c == 0xc2 && (unsigned char)s[1] < 0xa0;

        if (c == '\\')
            fputs("\\\\", f);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (n == 0 || c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else if (c1)
            fprintf(f, "\\u%04x", (unsigned char)s[1]);
        else if (n > 1 && invisible(code_point((const unsigned char *)s, n)))
            fprintf(f, n == 4 ? "\\U%08x" : "\\u%04x",
                    (unsigned)code_point((const unsigned char *)s, n));
        else
            fwrite(s, 1, (size_t)n, f);
        s += n > 0 ? n : 1;
    }
}

char *cli_escaped(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return NULL;
    cli_escape(f, s);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
