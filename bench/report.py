#!/usr/bin/python3
"""bench/report.py: turns the result lines of bench/run into a table,
a verdict on each target of docs/BENCHMARKS.md, and (with --plots DIR)
gnuplot data and PNG plots.

    bench/report.py RESULTS [--plots DIR]

Each result line is `config=C rep=R impl=I mode=M key=value...` as printed
by zkr-bench and the peers (bench/run adds config and rep). Repeated
measurements are reduced to their median.
"""
import os
import statistics
import subprocess
import sys
from collections import defaultdict

IMPLS = ["zkr", "raw", "curator", "kazoo"]
PEERS = ["raw", "curator", "kazoo"]


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "impl" in fields and "mode" in fields and "config" in fields:
                if fields["mode"] == "failover":  # one workload per kind
                    fields["mode"] = "failover_" + fields.get("kind", "?")
                rows.append(fields)
    return rows


def key_of(r):
    """The workload: mode plus its size parameter."""
    m = r["mode"]
    size = {"contended": "contenders", "herd": "waiters", "scale": "locks",
            "semaphore": "contenders", "election": "candidates",
            "many": "w", "qput": "w", "qtake": "consumers", "multi": "k",
            "qbatch": "consumers",
            "qdrain": "items", "qnotify": "consumers",
            "failover_kill": "candidates",
            "failover_term": "candidates"}.get(m)
    return (m, int(r[size]) if size else 0)


def collect(rows):
    """data[config][(mode, size)][impl][field] = median value."""
    raw = defaultdict(lambda: defaultdict(lambda: defaultdict(
        lambda: defaultdict(list))))
    for r in rows:
        k = key_of(r)
        for f, v in r.items():
            # A run that gave up has no time or rate to compare: it is
            # listed under the runs that failed.
            if r.get("failed") == "1" and f in ("drain_s", "items_per_s",
                                                "cpu_s_per_10k"):
                continue
            try:
                x = float(v)
            except ValueError:
                continue
            raw[r["config"]][k][r["impl"]][f].append(x)
        mn, mx = r.get("min_per_client"), r.get("max_per_client")
        if mn is not None and mx is not None and float(mx) > 0:
            raw[r["config"]][k][r["impl"]]["fairness"].append(
                float(mn) / float(mx))
    data = {}
    for c, ks in raw.items():
        data[c] = {}
        for k, impls in ks.items():
            data[c][k] = {i: {f: statistics.median(v) for f, v in fs.items()}
                          for i, fs in impls.items()}
    return data


# (mode, field, label, lower_is_better)
FIGURES = [
    ("uncontended", "us_per_cycle", "uncontended us/cycle (mean)", True),
    ("uncontended", "p50_us", "uncontended p50 us", True),
    ("uncontended", "p99_us", "uncontended p99 us", True),
    ("uncontended", "req_per_op",
     "uncontended ZooKeeper requests per acquire+release", True),
    ("multi", "us_per_cycle", "multi-lock of K us/cycle (mean), K={n}", True),
    ("multi", "p99_us", "multi-lock of K p99 us, K={n}", True),
    ("multi", "req_per_op",
     "multi-lock of K ZooKeeper requests per acquire+release, K={n}", True),
    ("contended", "grants_per_s", "contended grants/s, K={n}", False),
    ("contended", "fairness", "contended min/max per client, K={n}", False),
    ("contended", "violations", "contended overlap violations, K={n}", True),
    ("contended", "handoff_p50_us", "contended handoff p50 us, K={n}", True),
    ("contended", "handoff_p99_us", "contended handoff p99 us, K={n}", True),
    ("contended", "cpu_s_per_10k_grants",
     "contended client CPU s per 10k grants, K={n}", True),
    ("contended", "req_per_op",
     "contended ZooKeeper requests per grant, K={n}", True),
    ("herd", "watch_events_per_release", "herd watch events/release, W={n}",
     True),
    ("herd", "handoff_p50_us", "herd handoff p50 us, W={n}", True),
    ("herd", "handoff_p99_us", "herd handoff p99 us, W={n}", True),
    ("herd", "req_per_op", "herd ZooKeeper requests per handoff, W={n}",
     True),
    ("scale", "acquires_per_s", "scale acquires/s, N={n}", False),
    ("scale", "bytes_per_lock", "scale client bytes/held lock, N={n}", True),
    ("scale", "req_per_op", "scale ZooKeeper requests per lock, N={n}",
     True),
    ("semaphore", "grants_per_s", "semaphore(4) grants/s, K={n}", False),
    ("semaphore", "fairness", "semaphore(4) min/max per client, K={n}",
     False),
    ("semaphore", "req_per_op",
     "semaphore(4) ZooKeeper requests per grant, K={n}", True),
    ("election", "handoff_p50_us", "election handoff p50 us, K={n}", True),
    ("election", "req_per_op",
     "election ZooKeeper requests per handoff, K={n}", True),
    ("failover_kill", "failover_p50_ms",
     "failover p50 ms, leader process killed, K={n}", True),
    ("failover_kill", "failover_max_ms",
     "failover max ms, leader process killed, K={n}", True),
    ("failover_term", "failover_p50_ms",
     "failover p50 ms, leader resigns (SIGTERM), K={n}", True),
    ("failover_term", "failover_max_ms",
     "failover max ms, leader resigns (SIGTERM), K={n}", True),
    ("floor", "notify_p50_us", "notify floor p50 us (delete to watcher)",
     True),
    ("floor", "notify_p99_us", "notify floor p99 us", True),
    ("floor", "handoff_floor_p50_us",
     "handoff floor p50 us (delete to watcher's write)", True),
    ("floor", "handoff_floor_p99_us", "handoff floor p99 us", True),
    ("many", "locks_per_s", "many distinct locks/s, W={n}", False),
    ("many", "held_bytes_per_lock", "many: client bytes per held lock, W={n}",
     True),
    ("many", "held_fds", "many: open descriptors holding all, W={n}", True),
    ("many", "held_requests_per_s",
     "many: requests/s the session sends holding all, W={n}", True),
    ("many", "req_per_op", "many ZooKeeper requests per lock, W={n}",
     True),
    ("qput", "items_per_s", "queue puts/s, W={n} in flight", False),
    ("qput", "req_per_op", "queue ZooKeeper requests per put, W={n}",
     True),
    ("qtake", "items_per_s", "queue take+ack/s, K={n} consumers", False),
    ("qtake", "cpu_s_per_10k",
     "queue client CPU s per 10k take+ack, K={n}", True),
    ("qtake", "req_per_op",
     "queue ZooKeeper requests per take+ack, K={n} consumers", True),
    ("qbatch", "items_per_s",
     "queue take+ack/s, batches of 16, K={n} consumers", False),
    ("qbatch", "req_per_op",
     "queue ZooKeeper requests per take+ack, batches of 16, K={n}", True),
    ("qdrain", "drain_s", "queue drain of N={n} items, s", True),
    ("qdrain", "cpu_s_per_10k", "queue drain client CPU s per 10k, N={n}",
     True),
    ("qdrain", "req_per_op",
     "queue drain ZooKeeper requests per item, N={n}", True),
    ("qnotify", "watch_events_per_put",
     "queue watch notifications per put, W={n} idle", True),

    ("qnotify", "req_per_op",
     "queue ZooKeeper requests per put, W={n} idle consumers", True),
]

# Where a handoff is compared with the notify floor: (mode, size, label).
FLOOR_HANDOFFS = [("contended", 8, "contended K=8"),
                  ("herd", 500, "herd W=500")]


def fmt(x):
    if x is None:
        return "–"
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.2f" % x


def table(data, config):
    """One table per workload (mode), its figures as rows."""
    head = ["| figure | " + " | ".join(IMPLS) + " | zkr/raw | zkr/curator "
            "| zkr/kazoo |",
            "|---|" + "---:|" * (len(IMPLS) + len(PEERS))]
    d = data.get(config, {})
    out, modes = [], []
    for mode, _, _, _ in FIGURES:
        if mode not in modes:
            modes.append(mode)
    for m in modes:
        rows = []
        for mode, field, label, _ in FIGURES:
            if mode != m:
                continue
            for k in sorted(x for x in d if x[0] == mode):
                vals = {i: d[k].get(i, {}).get(field) for i in IMPLS}
                if all(v is None for v in vals.values()):
                    continue
                ratios = []
                for p in PEERS:
                    z, v = vals["zkr"], vals[p]
                    ratios.append("%.2f" % (z / v) if z is not None and v
                                  else "–")
                rows.append("| %s | %s | %s |" % (
                    label.format(n=k[1]),
                    " | ".join(fmt(vals[i]) for i in IMPLS),
                    " | ".join(ratios)))
        if rows:
            out += ["", "#### " + m, ""] + head + rows
    return "\n".join(out).lstrip("\n")


def get(d, k, impl, field):
    return d.get(k, {}).get(impl, {}).get(field)


def floor_table(data, config):
    """Each library's handoff p50 and p99 as multiples of the notify
    floor's p50 and p99 (raw, floor mode, same server)."""
    d = data.get(config, {})
    n50 = get(d, ("floor", 0), "raw", "notify_p50_us")
    n99 = get(d, ("floor", 0), "raw", "notify_p99_us")
    if not n50 or not n99:
        return ""
    locks = ["zkr", "curator", "kazoo"]
    out = ["| handoff / notify floor (%.0f us p50, %.0f us p99) | %s |"
           % (n50, n99, " | ".join("%s p50 | %s p99" % (i, i)
                                   for i in locks)),
           "|---|" + "---:|" * (2 * len(locks))]
    for mode, size, label in FLOOR_HANDOFFS:
        if (mode, size) not in d:
            continue
        cells = []
        for i in locks:
            for f, n in (("handoff_p50_us", n50), ("handoff_p99_us", n99)):
                v = get(d, (mode, size), i, f)
                cells.append("%.2fx" % (v / n) if v is not None else "–")
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(out)


def verdicts(data, config):
    d = data.get(config, {})
    out = []

    def line(ok, text):
        out.append("- %s %s" % ("MET   " if ok else "MISSED", text))

    z = get(d, ("uncontended", 0), "zkr", "us_per_cycle")
    r = get(d, ("uncontended", 0), "raw", "us_per_cycle")
    if z and r:
        line(z / r <= 1.10, "uncontended within 1.10x of raw: %.2fx "
             "(zkr %.0f us, raw %.0f us)" % (z / r, z, r))
    for k in (8, 32):
        zg = get(d, ("contended", k), "zkr", "grants_per_s")
        if zg is None:
            continue
        for p in ("curator", "kazoo"):
            pg = get(d, ("contended", k), p, "grants_per_s")
            if pg:
                line(zg / pg >= 1.3, "contended K=%d >= 1.3x %s: %.2fx "
                     "(%.0f vs %.0f grants/s)" % (k, p, zg / pg, zg, pg))
        fair = get(d, ("contended", k), "zkr", "fairness")
        line(fair is not None and fair >= 0.9,
             "contended K=%d fairness >= 0.9: %.3f" % (k, fair or 0))
    herds = sorted(k[1] for k in d if k[0] == "herd" and "zkr" in d[k])
    if herds:
        ev = [get(d, ("herd", w), "zkr", "watch_events_per_release")
              for w in herds]
        line(all(abs(e - 1.0) < 0.005 for e in ev),
             "one watch notification per release: %s (W=%s)"
             % (", ".join("%.2f" % e for e in ev),
                ", ".join(map(str, herds))))
        lo = get(d, ("herd", herds[0]), "zkr", "handoff_p50_us")
        hi = get(d, ("herd", herds[-1]), "zkr", "handoff_p50_us")
        if lo and hi:
            line(hi / lo <= 1.2, "herd handoff p50 at W=%d within 1.2x of "
                 "W=%d: %.2fx (%.0f vs %.0f us)"
                 % (herds[-1], herds[0], hi / lo, hi, lo))
    n50 = get(d, ("floor", 0), "raw", "notify_p50_us")
    for mode, size, label in FLOOR_HANDOFFS:
        h = get(d, (mode, size), "zkr", "handoff_p50_us")
        if h and n50:
            line(h / n50 <= 1.5, "%s handoff p50 within 1.5x of the notify "
                 "floor: %.2fx (%.0f vs %.0f us)" % (label, h / n50, h, n50))
    for k in sorted(x for x in d if x[0] == "many"):
        z = get(d, k, "zkr", "locks_per_s")
        r = get(d, k, "raw", "locks_per_s")
        if z and r:
            line(z / r >= 0.9, "many W=%d >= 0.9x the raw pipelined floor: "
                 "%.2fx (%.0f vs %.0f locks/s)" % (k[1], z / r, z, r))
        peers = [(get(d, k, p, "locks_per_s") or 0, p)
                 for p in ("curator", "kazoo")]
        best, who = max(peers)
        if z and best and k[1] == 256:
            line(z / best >= 1.5, "many W=256 >= 1.5x the better peer (%s): "
                 "%.2fx (%.0f vs %.0f locks/s)" % (who, z / best, z, best))
    for k in sorted(x for x in d if x[0] == "qtake" and x[1] >= 4):
        z = get(d, k, "zkr", "items_per_s")
        best, who = max((get(d, k, p, "items_per_s") or 0, p)
                        for p in ("curator", "kazoo"))
        if z and best:
            line(z / best >= 2.0, "queue take+ack K=%d >= 2x the better peer "
                 "(%s): %.2fx (%.0f vs %.0f items/s)"
                 % (k[1], who, z / best, z, best))
    drains = sorted(x for x in d if x[0] == "qdrain")
    if drains:
        k = drains[-1]
        zd, zf = get(d, k, "zkr", "drained"), get(d, k, "zkr", "failed")
        cd, cf = get(d, k, "curator", "drained"), get(d, k, "curator",
                                                          "failed")
        if zd is not None:
            line(zf == 0 and zd == k[1],
                 "queue drains N=%d: zkr %s in %.0f s; Curator %s"
                 % (k[1], "all" if zf == 0 else "%d" % zd,
                    get(d, k, "zkr", "drain_s") or 0,
                    "not run" if cf is None else
                    "FAILED after %d items" % cd if cf else
                    "also drained all (%.0f s)"
                    % (get(d, k, "curator", "drain_s") or 0)))
    notes = sorted(x for x in d if x[0] == "qnotify" and "zkr" in d[x])
    if len(notes) == 1:
        out.append("- (queue notifications per put: one W only, %d: not "
                   "judged)" % notes[0][1])
    elif notes:
        ev = [get(d, k, "zkr", "watch_events_per_put") for k in notes]
        line(ev[-1] <= ev[0] * 1.25 + 0.5,
             "queue notifications per put O(1) in idle consumers: %s "
             "(W=%s)" % (", ".join("%.2f" % e for e in ev),
                         ", ".join(str(k[1]) for k in notes)))
    for k in sorted(x for x in d if x[0] == "scale"):
        b = get(d, k, "zkr", "bytes_per_lock")
        if b is not None:
            line(b < 1024, "%d held locks: %.0f client bytes per lock "
                 "(aim < 1024)" % (k[1], b))
    return "\n".join(out)


def plots(data, outdir):
    os.makedirs(outdir, exist_ok=True)
    series = []  # (file, title, data file, column label)
    for mode, field, name, xlabel, ylabel, logx in (
            ("herd", "handoff_p50_us", "bench-herd",
             "waiters (W)", "handoff p50 (us)", True),
            ("contended", "grants_per_s", "bench-contended",
             "contenders (K)", "grants per second", True),
            ("many", "locks_per_s", "bench-many",
             "locks in flight (W)", "distinct locks per second", True),
            ("contended", "cpu_s_per_10k_grants", "bench-cpu",
             "contenders (K)", "client CPU s per 10,000 grants", True),
            ("qtake", "items_per_s", "bench-queue-take",
             "consumers (K)", "take+ack per second", True),
            ("qnotify", "watch_events_per_put", "bench-queue-notify",
             "idle consumers (W)", "watch notifications per put", True)):
        lines = []
        for config in sorted(data):
            for impl in ("zkr", "raw", "curator", "kazoo"):
                pts = sorted((k[1], v[impl][field])
                             for k, v in data[config].items()
                             if k[0] == mode and impl in v
                             and field in v[impl])
                if not pts:
                    continue
                dat = os.path.join(outdir, "%s-%s-%s.dat"
                                   % (name, config, impl))
                with open(dat, "w") as f:
                    for x, y in pts:
                        f.write("%d %g\n" % (x, y))
                lines.append("'%s' using 1:2 with linespoints title '%s (%s)'"
                             % (dat, impl, config))
        if not lines:
            continue
        script = "\n".join([
            "set terminal pngcairo size 800,500",
            "set output '%s'" % os.path.join(outdir, name + ".png"),
            "set xlabel '%s'" % xlabel, "set ylabel '%s'" % ylabel,
            "set logscale x" if logx else "", "set key outside right",
            "set grid", "plot " + ", ".join(lines), ""])
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        series.append(name + ".png")
    for extra in (failover_plot(data, outdir), floor_plot(data, outdir)):
        if extra:
            series.append(extra)
    for f in os.listdir(outdir):
        if f.endswith(".dat"):
            os.remove(os.path.join(outdir, f))
    return series


def bars(outdir, name, ylabel, columns, groups, logy):
    """A clustered bar chart: one group per row, one bar per column."""
    dat = os.path.join(outdir, name + ".dat")
    with open(dat, "w") as f:
        f.write("group " + " ".join(columns) + "\n")
        for g, vals in groups:
            f.write('"%s" %s\n' % (g, " ".join("%g" % x for x in vals)))
    plot = ", ".join(
        "'%s' using %d%s title columnheader(%d)"
        % (dat if i == 0 else "", i + 2, ":xtic(1)" if i == 0 else "", i + 2)
        for i in range(len(columns)))
    script = "\n".join([
        "set terminal pngcairo size 800,500",
        "set output '%s'" % os.path.join(outdir, name + ".png"),
        "set style data histograms", "set style histogram clustered",
        "set style fill solid 0.8 border -1", "set xtics rotate by -20",
        "set bmargin 5", "set logscale y" if logy else "set yrange [0:*]",
        "set ylabel '%s'" % ylabel, "set grid ytics",
        "set key outside right", "plot " + plot, ""])
    subprocess.run(["gnuplot"], input=script.encode(), check=True)
    return name + ".png"


def floor_plot(data, outdir):
    """Each library's handoff p50 as a multiple of the notify floor."""
    locks = ["zkr", "curator", "kazoo"]
    groups = []
    for config in sorted(data):
        d = data[config]
        n50 = get(d, ("floor", 0), "raw", "notify_p50_us")
        if not n50:
            continue
        for mode, size, label in FLOOR_HANDOFFS:
            if (mode, size) in d:
                groups.append(("%s %s" % (config, label),
                               [(get(d, (mode, size), i, "handoff_p50_us")
                                 or 0) / n50 for i in locks]))
    if not groups:
        return None
    return bars(outdir, "bench-floor", "handoff p50 / notify floor p50",
                locks, groups, False)


def failover_plot(data, outdir):
    """Failover p50 per library, one group per server and kind."""
    locks = ["zkr", "curator", "kazoo"]
    groups = []
    for config in sorted(data):
        for kind in ("kill", "term"):
            ks = [k for k in data[config] if k[0] == "failover_" + kind]
            if ks:
                v = data[config][ks[0]]
                groups.append(("%s %s" % (config, kind),
                               [v.get(i, {}).get("failover_p50_ms", 0)
                                for i in locks]))
    if not groups:
        return None
    return bars(outdir, "bench-failover", "failover p50 (ms, log scale)",
                locks, groups, True)


def failures(rows, config):
    """Runs that did not finish (the queue's drains), with their error:
    printed whole, never averaged away."""
    return "\n".join(
        "- %s %s N=%s K=%s: drained %s in %s s; error: %s"
        % (r["impl"], r["mode"], r.get("items"), r.get("consumers"),
           r.get("drained"), r.get("drain_s"), r.get("error", "-"))
        for r in rows if r["config"] == config and r.get("failed") == "1")


def main(argv):
    if not argv:
        raise SystemExit("usage: report.py RESULTS [--plots DIR]")
    rows = parse(argv[0])
    data = collect(rows)
    for config in sorted(data):
        print("### Server: %s\n" % config)
        print(table(data, config))
        fails = failures(rows, config)
        if fails:
            print("\nRuns that failed (%s):\n\n%s" % (config, fails))
        ft = floor_table(data, config)
        if ft:
            print("\n" + ft)
        print("\nTargets (%s):\n" % config)
        print(verdicts(data, config))
        print()
    if len(argv) == 3 and argv[1] == "--plots":
        for p in plots(data, argv[2]):
            print("plot: %s" % os.path.join(argv[2], p))


if __name__ == "__main__":
    main(sys.argv[1:])
