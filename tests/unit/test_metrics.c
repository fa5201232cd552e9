/* Unit tests of the metrics exposition (src/engine/metrics.c), no server: the
 * Prometheus text format's rules (text format 0.0.4) checked on a made-up
 * snapshot: label values escaped, `# HELP`/`# TYPE` once per family and
 * before its samples, a family's samples together, histograms as
 * cumulative `_bucket` lines with increasing `le` ending in "+Inf" (equal
 * to `_count`), then `_sum` and `_count`; bucket bounds inclusive.
 *
 * `test_metrics --emit` prints the snapshot's text instead, for
 * tests/cli/test_cli_metrics.sh to validate with `promtool check metrics`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "filter.h"

#include "../../src/internal.h"

/* A path with every character the format escapes. */
#define ODD_PATH "/a\"b\\c\nd"
#define ODD_LABEL "path=\"/a\\\"b\\\\c\\nd\",kind=\"lock\""

static zkr__mrow_t rows[2];
static zkr__msnap_t snap;
static const zkr__gfamily_t lag_cache = {"zkr_cache_lag_seconds", "Lag.",
                                         "cache", 'm', 'x'};
static const zkr__gfamily_t lag_group = {"zkr_cache_lag_seconds", "Lag.",
                                         "group", 'm', 'x'};
static const zkr__gfamily_t waiters = {"zkr_barrier_waiters", "Waiters.",
                                       "barrier", 'n', 's'};
/* As a snapshot sorts them: by family name. */
static struct zkr__grow grows[3] = {
    {&waiters, ODD_PATH, 2}, {&lag_cache, "/c", 1500}, {&lag_group, "/g", 0}};

static void make_snapshot(void)
{
    memset(rows, 0, sizeof(rows));
    memset(&snap, 0, sizeof(snap));
    rows[0].m.kind = "lock";
    rows[0].m.path = ODD_PATH;
    rows[0].m.acquired = 3;
    rows[0].m.timeouts = 1;
    /* One wait of 2 ms (bucket 0.0025), one of 400 s (above the last). */
    rows[0].m.wait.counts[1] = 1;
    rows[0].m.wait.counts[16] = 1;
    rows[0].m.wait.n = 2;
    rows[0].m.wait.sum = 2000 + 400000000ULL;
    rows[0].handles = 2;
    rows[0].holding = 1;
    rows[1].m.kind = "election";
    rows[1].m.leads = 1; /* an election's grant is leadership */
    rows[1].m.path = "/e";
    rows[1].m.leader_changes = 2;
    rows[1].leader_us = 1500000;
    snap.rows = rows;
    snap.nrows = 2;
    snap.grows = grows;
    snap.ngrows = 3;
    snap.state = ZKR_STATE_RECONNECTED;
    snap.valid_ms = 5700;
    snap.timeout_ms = 10000;
    snap.m.reconnect_margin_ms = -1; /* never reconnected: no sample */
    snap.m.hb_last_ms = 3;
    snap.m.reconnects = 1;
    snap.counters[ZKR_COUNTER_SESSIONS] = 1;
}

/* The snapshot's text (malloc'd). */
static char *format(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    assert_int_equal(zkr__metrics_format(f, &snap), 0);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void has(const char *text, const char *line)
{
    char want[1024];

    snprintf(want, sizeof(want), "\n%s\n", line);
    if (strstr(text, want) == NULL)
        fail_msg("missing line '%s'", line);
}

static void lacks(const char *text, const char *piece)
{
    if (strstr(text, piece) != NULL)
        fail_msg("unexpected '%s'", piece);
}

static void test_labels_escaped(void **state)
{
    char *t;

    (void)state;
    make_snapshot();
    t = format();
    has(t, "zkr_acquisitions_total{" ODD_LABEL "} 3");
    has(t, "zkr_acquire_timeouts_total{" ODD_LABEL "} 1");
    has(t, "zkr_handles{" ODD_LABEL "} 2");
    has(t, "zkr_holding{" ODD_LABEL "} 1");
    has(t, "zkr_acquisitions_total{path=\"/e\",kind=\"election\"} 0");
    /* No raw line feed inside a label: every line is a comment or starts
     * with a metric name. */
    for (char *p = t; *p != '\0'; p = strchr(p, '\n') + 1) {
        assert_true(*p == '#' || strncmp(p, "zkr_", 4) == 0);
        if (strchr(p, '\n') == NULL)
            break;
    }
    free(t);
}

/* HELP and TYPE once per family, before its samples; a family's samples
 * are contiguous; only election rows have the leader families; unmeasured
 * gauges are left out; session metrics carry no label. */
static void test_families(void **state)
{
    char *t, *line, *save = NULL;
    char seen[64][64], cur[64] = "";
    int nseen = 0;

    (void)state;
    make_snapshot();
    t = format();
    has(t, "# TYPE zkr_acquisitions_total counter");
    has(t, "# TYPE zkr_wait_seconds histogram");
    has(t, "# TYPE zkr_holding gauge");
    has(t, "zkr_leader_changes_total{path=\"/e\",kind=\"election\"} 2");
    has(t, "zkr_leader_seconds_total{path=\"/e\",kind=\"election\"} 1.500000");
    lacks(t, "zkr_leader_changes_total{path=\"/a");
    lacks(t, "\nzkr_session_reconnect_margin_seconds ");
    has(t, "zkr_session_heartbeat_last_seconds 0.003000");
    has(t, "zkr_session_valid_seconds 5.700000");
    has(t, "zkr_session_reconnects_total 1");
    has(t, "zkr_sessions_total 1");
    has(t, "zkr_session_state{state=\"RECONNECTED\"} 1");
    has(t, "zkr_session_state{state=\"SUSPENDED\"} 0");
    for (line = strtok_r(t, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char name[64];
        if (strncmp(line, "# HELP ", 7) == 0) {
            sscanf(line + 7, "%63s", name);
            for (int i = 0; i < nseen; i++)
                assert_string_not_equal(seen[i], name);
            assert_true(nseen < 64);
            strcpy(seen[nseen++], name);
            strcpy(cur, name);
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            sscanf(line + 7, "%63s", name);
            assert_string_equal(name, cur);
            continue;
        }
        /* A sample belongs to the family announced last. */
        assert_int_equal(strncmp(line, cur, strlen(cur)), 0);
    }
    assert_true(nseen >= 30);
    free(t);
}

/* One histogram's lines, in order, from the one that starts with prefix. */
static void test_histogram_shape(void **state)
{
    static const char *les[] = {"0.001", "0.0025", "0.005", "0.01", "0.025",
                                "0.05",  "0.1",    "0.25",  "0.5",  "1",
                                "2.5",   "5",      "10",    "30",   "60",
                                "300",   "+Inf"};
    char *t, *p, want[512];

    (void)state;
    make_snapshot();
    t = format();
    p = strstr(t, "\nzkr_wait_seconds_bucket{");
    assert_non_null(p);
    p++;
    for (size_t i = 0; i < sizeof(les) / sizeof(les[0]); i++) {
        /* Cumulative: 0 below 2 ms, 1 up to 300 s, 2 in +Inf. */
        snprintf(want, sizeof(want),
                 "zkr_wait_seconds_bucket{" ODD_LABEL ",le=\"%s\"} %d\n",
                 les[i],
                 i == 0   ? 0
                 : i < 16 ? 1
                          : 2);
        assert_int_equal(strncmp(p, want, strlen(want)), 0);
        p += strlen(want);
    }
    snprintf(want, sizeof(want),
             "zkr_wait_seconds_sum{" ODD_LABEL "} 400.002000\n"
             "zkr_wait_seconds_count{" ODD_LABEL "} 2\n");
    assert_int_equal(strncmp(p, want, strlen(want)), 0);
    /* An empty histogram still has every bucket, at 0. */
    has(t, "zkr_hold_seconds_bucket{" ODD_LABEL ",le=\"+Inf\"} 0");
    has(t, "zkr_hold_seconds_count{" ODD_LABEL "} 0");
    has(t, "zkr_grant_listings_bucket{path=\"/e\",kind=\"election\","
           "le=\"64\"} 0");
    /* A session histogram has only the le label. */
    has(t, "zkr_session_heartbeat_seconds_bucket{le=\"+Inf\"} 0");
    free(t);
}

/* The recipes' gauges: one HELP and TYPE per family name, whatever the
 * kinds; seconds from milliseconds; labels escaped. */
static void test_recipe_gauges(void **state)
{
    char *text;

    (void)state;
    make_snapshot();
    text = format();
    assert_non_null(strstr(text,
                           "# HELP zkr_barrier_waiters Waiters.\n"
                           "# TYPE zkr_barrier_waiters gauge\n"
                           "zkr_barrier_waiters{path=\"/a\\\"b\\\\c\\nd\","
                           "kind=\"barrier\"} 2\n"));
    assert_non_null(strstr(text, "# TYPE zkr_cache_lag_seconds gauge\n"
                                 "zkr_cache_lag_seconds{path=\"/c\","
                                 "kind=\"cache\"} 1.500\n"
                                 "zkr_cache_lag_seconds{path=\"/g\","
                                 "kind=\"group\"} 0.000\n"));
    assert_null(strstr(strstr(text, "# TYPE zkr_cache_lag_seconds") + 1,
                       "# TYPE zkr_cache_lag_seconds"));
    free(text);
}

/* Bucket bounds are inclusive ("le"), through the heartbeat hook. */
static void test_bucket_bounds(void **state)
{
    zkr_session_t *s = calloc(1, sizeof(*s));
    const zkr__hist_t *h = &s->metrics.hb;

    (void)state;
    zkr__metrics_init(s);
    zkr__metrics_heartbeat(s, 1);      /* 1 ms: le 0.001 */
    zkr__metrics_heartbeat(s, 2);      /* 2 ms: le 0.0025 */
    zkr__metrics_heartbeat(s, 300000); /* 300 s: le 300 */
    zkr__metrics_heartbeat(s, 300001); /* above: +Inf */
    zkr__metrics_heartbeat(s, -5);     /* a clock step back: 0 */
    assert_int_equal(h->counts[0], 2);
    assert_int_equal(h->counts[1], 1);
    assert_int_equal(h->counts[15], 1);
    assert_int_equal(h->counts[16], 1);
    assert_int_equal(h->n, 5);
    assert_int_equal(h->sum, (1 + 2 + 300000 + 300001) * 1000ULL);
    assert_int_equal(s->metrics.hb_last_ms, 0);
    free(s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_escaped),
        cmocka_unit_test(test_families),
        cmocka_unit_test(test_histogram_shape),
        cmocka_unit_test(test_bucket_bounds),
        cmocka_unit_test(test_recipe_gauges),
    };

    if (argc > 1 && strcmp(argv[1], "--emit") == 0) {
        make_snapshot();
        return zkr__metrics_format(stdout, &snap) != 0;
    }
    zkt_test_filter();
    return cmocka_run_group_tests_name("metrics format", tests, NULL, NULL);
}
