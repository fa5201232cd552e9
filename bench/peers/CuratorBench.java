// bench/peers/CuratorBench.java: Apache Curator's side of the benchmarks in
// docs/BENCHMARKS.md, with the workloads and output lines of zkr-bench.
//
//   java -cp BUILD:CURATOR-JARS CuratorBench -s HOSTS MODE ARGS...
//
// MODE is uncontended CYCLES | contended K SECONDS | herd W ROUNDS |
// scale N | semaphore PERMITS K SECONDS | election K ROUNDS | many N W |
// qput N W | qtake K N SECS | qdrain N K SECS | qnotify W PUTS |
// candidate PATH SESSION_MS (one process of bench/failover.py).
// Locks are InterProcessMutex, the semaphore is InterProcessSemaphoreV2,
// the election LeaderLatch, the work queue DistributedQueue with a lock
// path (its at-least-once mode). Every contender has its own CuratorFramework
// (its own ZooKeeper session); they are threads of this one JVM.
// InterProcessMutex must be released by the thread that acquired it, so
// every contender is a thread and the herd's holder is told to release.
//
// Watch notifications (herd, qnotify) are counted by giving Curator a ZooKeeper
// whose getData/exists/getChildren wrap the watcher they are given in a counting one.
// bench/run compiles this file with javac into a scratch directory.

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ZookeeperFactory;
import org.apache.zookeeper.AsyncCallback;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.ZKClientConfig;
import org.apache.zookeeper.data.Stat;

public class CuratorBench {
    static String hosts = "127.0.0.1:2181";
    static String root;
    static final AtomicLong watchEvents = new AtomicLong();

    /** Counts node watch notifications, then hands them to Curator. */
    static final class CountingWatcher implements Watcher {
        final Watcher inner;

        CountingWatcher(Watcher inner) { this.inner = inner; }

        @Override
        public void process(WatchedEvent e) {
            if (e.getType() != Event.EventType.None)
                watchEvents.incrementAndGet();
            inner.process(e);
        }

        // The client keeps one registration per watcher object and path:
        // a wrapper must be equal to another wrapper of the same watcher,
        // or registering twice would call the watcher twice.
        @Override
        public boolean equals(Object o) {
            return o instanceof CountingWatcher && ((CountingWatcher) o).inner.equals(inner);
        }

        @Override
        public int hashCode() { return inner.hashCode(); }
    }

    static Watcher wrap(Watcher w) { return w == null ? null : new CountingWatcher(w); }

    static final class CountingZooKeeper extends ZooKeeper {
        CountingZooKeeper(String c, int t, Watcher w, boolean ro) throws java.io.IOException {
            super(c, t, w, ro);
        }

        @Override
        public byte[] getData(String p, Watcher w, Stat s)
                throws KeeperException, InterruptedException {
            return super.getData(p, wrap(w), s);
        }

        @Override
        public void getData(String p, Watcher w, AsyncCallback.DataCallback cb, Object ctx) {
            super.getData(p, wrap(w), cb, ctx);
        }

        @Override
        public List<String> getChildren(String p, Watcher w)
                throws KeeperException, InterruptedException {
            return super.getChildren(p, wrap(w));
        }

        @Override
        public List<String> getChildren(String p, Watcher w, Stat s)
                throws KeeperException, InterruptedException {
            return super.getChildren(p, wrap(w), s);
        }

        @Override
        public void getChildren(String p, Watcher w, AsyncCallback.ChildrenCallback cb, Object ctx) {
            super.getChildren(p, wrap(w), cb, ctx);
        }

        @Override
        public void getChildren(String p, Watcher w, AsyncCallback.Children2Callback cb, Object ctx) {
            super.getChildren(p, wrap(w), cb, ctx);
        }

        @Override
        public Stat exists(String p, Watcher w) throws KeeperException, InterruptedException {
            return super.exists(p, wrap(w));
        }

        @Override
        public void exists(String p, Watcher w, AsyncCallback.StatCallback cb, Object ctx) {
            super.exists(p, wrap(w), cb, ctx);
        }
    }

    static final ZookeeperFactory COUNTING = new ZookeeperFactory() {
        @Override
        public ZooKeeper newZooKeeper(String c, int t, Watcher w, boolean ro) throws Exception {
            return new CountingZooKeeper(c, t, w, ro);
        }

        @Override
        public ZooKeeper newZooKeeper(String c, int t, Watcher w, boolean ro, ZKClientConfig cfg)
                throws Exception {
            return new CountingZooKeeper(c, t, w, ro);
        }
    };

    static CuratorFramework client() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new RetryNTimes(3, 100))
                .zookeeperFactory(COUNTING)
                .build();
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS))
            throw new IllegalStateException("cannot connect to " + hosts);
        return c;
    }

    /** n clients, connected 16 at a time (one by one takes a minute for 500). */
    static List<CuratorFramework> clients(int n) throws Exception {
        java.util.concurrent.ExecutorService pool =
                java.util.concurrent.Executors.newFixedThreadPool(16);
        List<java.util.concurrent.Future<CuratorFramework>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++)
            fs.add(pool.submit(CuratorBench::client));
        List<CuratorFramework> out = new ArrayList<>();
        for (java.util.concurrent.Future<CuratorFramework> f : fs)
            out.add(f.get());
        pool.shutdown();
        return out;
    }

    static long nowNs() { return System.nanoTime(); }

    static double percentile(List<Double> v, double p) {
        if (v.isEmpty())
            return 0;
        Collections.sort(v);
        int i = (int) (p / 100.0 * v.size() + 0.5);
        if (i > 0)
            i--;
        return v.get(Math.min(i, v.size() - 1));
    }

    static String f1(double x) { return String.format("%.1f", x); }

    static String f0(double x) { return String.format("%.0f", x); }

    // ------------------------------------------------------------ modes

    /**
     * Warms up, then times `cycles` acquire+release of m: the result line's
     * "cycles=... us_per_cycle=... p50_us=... p99_us=...".
     */
    static String timeCycles(InterProcessLock m, int cycles) throws Exception {
        for (int i = 0; i < cycles / 10 + 10; i++) { // warm up (and the JIT)
            m.acquire();
            m.release();
        }
        List<Double> lat = new ArrayList<>(cycles);
        long t0 = nowNs();
        for (int i = 0; i < cycles; i++) {
            long t = nowNs();
            m.acquire();
            m.release();
            lat.add((nowNs() - t) / 1e3);
        }
        double total = (nowNs() - t0) / 1e3;
        return "cycles=" + cycles + " us_per_cycle=" + f1(total / cycles) + " p50_us="
                + f1(percentile(lat, 50)) + " p99_us=" + f1(percentile(lat, 99));
    }

    static void uncontended(int cycles) throws Exception {
        CuratorFramework c = client();
        InterProcessMutex m = new InterProcessMutex(c, root + "/uncontended");
        System.out.println("impl=curator mode=uncontended " + timeCycles(m, cycles));
        c.close();
    }

    static void multi(int k, int cycles) throws Exception {
        CuratorFramework c = client();
        List<InterProcessLock> locks = new ArrayList<>();
        for (int i = 0; i < k; i++)
            locks.add(new InterProcessMutex(c, root + String.format("/multi-%02d", i)));
        InterProcessMultiLock m = new InterProcessMultiLock(locks);
        System.out.println("impl=curator mode=multi k=" + k + " " + timeCycles(m, cycles));
        c.close();
    }

    /** One acquire+release of a contended lock or semaphore. */
    interface Grant {
        void acquire() throws Exception;

        void release() throws Exception;
    }

    static void contenders(String mode, int permits, int k, int seconds) throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        List<Grant> grants = new ArrayList<>();
        String path = root + "/" + mode;
        for (int i = 0; i < k; i++) {
            CuratorFramework c = client();
            clients.add(c);
            if (mode.equals("semaphore")) {
                InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, path, permits);
                AtomicReference<Lease> lease = new AtomicReference<>();
                grants.add(new Grant() {
                    public void acquire() throws Exception { lease.set(s.acquire()); }

                    public void release() throws Exception { s.returnLease(lease.get()); }
                });
            } else {
                InterProcessMutex m = new InterProcessMutex(c, path);
                grants.add(new Grant() {
                    public void acquire() throws Exception { m.acquire(); }

                    public void release() throws Exception { m.release(); }
                });
            }
        }
        AtomicInteger holding = new AtomicInteger();
        AtomicLong violations = new AtomicLong(), lastRelease = new AtomicLong();
        List<Double> handoff = Collections.synchronizedList(new ArrayList<>());
        long[] counts = new long[k];
        CyclicBarrier ready = new CyclicBarrier(k);
        long until = nowNs() + seconds * 1_000_000_000L;
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < k; i++) {
            final int me = i;
            Thread t = new Thread(() -> {
                try {
                    Grant g = grants.get(me);
                    ready.await();
                    while (nowNs() < until) {
                        g.acquire();
                        long t1 = nowNs();
                        if (holding.incrementAndGet() > permits)
                            violations.incrementAndGet();
                        long rel = lastRelease.get();
                        if (t1 < until) {
                            counts[me]++;
                            if (rel != 0 && permits == 1)
                                handoff.add((t1 - rel) / 1e3);
                        }
                        holding.decrementAndGet();
                        lastRelease.set(nowNs());
                        g.release();
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(1);
                }
            });
            threads.add(t);
            t.start();
        }
        long total = 0, lo = Long.MAX_VALUE, hi = 0;
        for (int i = 0; i < k; i++) {
            threads.get(i).join();
            total += counts[i];
            lo = Math.min(lo, counts[i]);
            hi = Math.max(hi, counts[i]);
        }
        if (mode.equals("semaphore"))
            System.out.println("impl=curator mode=semaphore permits=" + permits + " contenders=" + k
                    + " grants=" + total + " grants_per_s=" + f0((double) total / seconds)
                    + " min_per_client=" + lo + " max_per_client=" + hi + " violations="
                    + violations.get());
        else
            System.out.println("impl=curator mode=contended contenders=" + k + " grants=" + total
                    + " grants_per_s=" + f0((double) total / seconds) + " min_per_client=" + lo
                    + " max_per_client=" + hi + " violations=" + violations.get()
                    + " handoff_p50_us=" + f0(percentile(handoff, 50)) + " handoff_p99_us="
                    + f0(percentile(handoff, 99)));
        closeAll(clients);
    }

    /**
     * One holder, W waiters. Each contender thread loops: acquire, report
     * the grant, wait to be told to release, release. The main thread
     * tells the holder to release and waits for the next grant; the old
     * holder then queues again at the back.
     */
    static void herd(int w, int rounds) throws Exception {
        int n = w + 1;
        String path = root + "/herd-" + w;
        List<CuratorFramework> clients = new ArrayList<>();
        Semaphore[] releaseNow = new Semaphore[n];
        long[] releaseAt = new long[n];
        java.util.concurrent.LinkedBlockingQueue<long[]> granted =
                new java.util.concurrent.LinkedBlockingQueue<>();
        AtomicInteger running = new AtomicInteger(1);
        clients.addAll(clients(n));
        for (int i = 0; i < n; i++)
            releaseNow[i] = new Semaphore(0);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int me = i;
            InterProcessMutex m = new InterProcessMutex(clients.get(i), path);
            Thread t = new Thread(() -> {
                try {
                    while (running.get() == 1) {
                        m.acquire();
                        granted.put(new long[] {me, nowNs()});
                        releaseNow[me].acquire();
                        releaseAt[me] = nowNs();
                        m.release();
                    }
                } catch (InterruptedException e) {
                    // shutting down
                } catch (Exception e) {
                    if (running.get() == 1) {
                        e.printStackTrace();
                        System.exit(1);
                    }
                }
            });
            t.setDaemon(true);
            threads.add(t);
            t.start();
            if (i == 0)
                granted.take(); // contender 0 holds
            else
                waitQueued(clients.get(0), path, i + 1);
        }
        Thread.sleep(200);
        int holder = 0;
        List<Double> hand = new ArrayList<>();
        long e0 = watchEvents.get();
        for (int r = 0; r < rounds; r++) {
            releaseNow[holder].release();
            long[] g = granted.take();
            hand.add((g[1] - releaseAt[holder]) / 1e3);
            waitQueued(clients.get(0), path, n);
            holder = (int) g[0];
        }
        Thread.sleep(200);
        long e1 = watchEvents.get();
        System.out.println("impl=curator mode=herd waiters=" + w + " releases=" + rounds
                + " watch_events_per_release=" + String.format("%.2f", (double) (e1 - e0) / rounds)
                + " handoff_p50_us=" + f0(percentile(hand, 50)) + " handoff_p99_us="
                + f0(percentile(hand, 99)));
        running.set(0);
        for (Thread t : threads)
            t.interrupt(); // waiters give up (and delete their nodes)
        for (Thread t : threads)
            t.join(10000);
        closeAll(clients);
    }

    /** Closes clients 16 at a time: each close waits for its I/O thread. */
    static void closeAll(List<CuratorFramework> clients) throws Exception {
        java.util.concurrent.ExecutorService pool =
                java.util.concurrent.Executors.newFixedThreadPool(16);
        for (CuratorFramework c : clients)
            pool.submit(c::close);
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
    }

    static void waitQueued(CuratorFramework c, String path, int expect) throws Exception {
        for (int tries = 0; tries < 10000; tries++) {
            if (c.checkExists().forPath(path) != null
                    && c.getChildren().forPath(path).size() >= expect)
                return;
            Thread.sleep(1);
        }
        throw new IllegalStateException("waiters did not queue");
    }

    static long heapUsed() throws InterruptedException {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        return rt.totalMemory() - rt.freeMemory();
    }

    static void scale(int n) throws Exception {
        CuratorFramework c = client();
        InterProcessMutex[] ms = new InterProcessMutex[n];
        long h0 = heapUsed();
        long t0 = nowNs();
        for (int i = 0; i < n; i++) {
            ms[i] = new InterProcessMutex(c, String.format("%s/scale/l%06d", root, i));
            ms[i].acquire();
        }
        double secs = (nowNs() - t0) / 1e9;
        long h1 = heapUsed();
        System.out.println("impl=curator mode=scale locks=" + n + " acquires_per_s=" + f0(n / secs)
                + " bytes_per_lock=" + f0((double) (h1 - h0) / n));
        for (int i = 0; i < n; i++)
            ms[i].release();
        c.close();
    }

    /** K candidates; the leader closes its latch and a fresh one rejoins. */
    static void election(int k, int rounds) throws Exception {
        String path = root + "/election";
        java.util.concurrent.LinkedBlockingQueue<long[]> led =
                new java.util.concurrent.LinkedBlockingQueue<>();
        List<CuratorFramework> clients = new ArrayList<>();
        LeaderLatch[] latches = new LeaderLatch[k];
        for (int i = 0; i < k; i++) {
            clients.add(client());
            latches[i] = latch(clients.get(i), path, i, led);
            if (i == 0)
                led.take();
        }
        Thread.sleep(200);
        int leader = 0;
        List<Double> hand = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            long t0 = nowNs();
            latches[leader].close();
            long[] g = led.take();
            hand.add((g[1] - t0) / 1e3);
            latches[leader] = latch(clients.get(leader), path, leader, led);
            leader = (int) g[0];
        }
        System.out.println("impl=curator mode=election candidates=" + k + " rounds=" + rounds
                + " handoff_p50_us=" + f0(percentile(hand, 50)) + " handoff_p99_us="
                + f0(percentile(hand, 99)));
        for (int i = 0; i < k; i++)
            latches[i].close();
        closeAll(clients);
    }

    static LeaderLatch latch(CuratorFramework c, String path, int me,
            java.util.concurrent.BlockingQueue<long[]> led) throws Exception {
        LeaderLatch l = new LeaderLatch(c, path, "bench");
        l.addListener(new LeaderLatchListener() {
            public void isLeader() { led.add(new long[] {me, nowNs()}); }

            public void notLeader() {}
        });
        l.start();
        return l;
    }

    /**
     * One session acquires and releases n distinct uncontended locks, with
     * a pool of w threads, each taking the next lock (an InterProcessMutex
     * on its own path): at most w in flight. The n lock directories are
     * made before the clock starts (pipelined, in the background), as for
     * every implementation.
     */
    static void many(int n, int w) throws Exception {
        CuratorFramework c = client();
        String dir = root + "/many";
        c.create().creatingParentsIfNeeded().forPath(dir);
        java.util.concurrent.CountDownLatch made = new java.util.concurrent.CountDownLatch(n);
        AtomicInteger failed = new AtomicInteger();
        for (int i = 0; i < n; i++)
            c.create().inBackground((cl, e) -> {
                if (e.getResultCode() != 0)
                    failed.set(e.getResultCode());
                made.countDown();
            }).forPath(manyPath(i));
        made.await();
        if (failed.get() != 0)
            throw new IllegalStateException("many directory: " + failed.get());
        AtomicInteger next = new AtomicInteger();
        java.util.concurrent.ExecutorService pool =
                java.util.concurrent.Executors.newFixedThreadPool(w);
        ((java.util.concurrent.ThreadPoolExecutor) pool).prestartAllCoreThreads();
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        long t0 = nowNs();
        for (int t = 0; t < w; t++)
            fs.add(pool.submit(() -> {
                for (int i; (i = next.getAndIncrement()) < n;) {
                    InterProcessMutex m = new InterProcessMutex(c, manyPath(i));
                    m.acquire();
                    m.release();
                }
                return null;
            }));
        for (java.util.concurrent.Future<?> f : fs)
            f.get();
        double secs = (nowNs() - t0) / 1e9;
        pool.shutdown();
        System.out.println("impl=curator mode=many n=" + n + " w=" + w + " locks_per_s="
                + f0(n / secs));
        c.close();
    }

    static String manyPath(int i) { return String.format("%s/many/l%06d", root, i); }

    // ------------------------------------------------------- work queue

    /** Item i's bytes: "item-%07d", as zkr-bench's. */
    static final QueueSerializer<Integer> ITEMS = new QueueSerializer<Integer>() {
        public byte[] serialize(Integer i) {
            return String.format("item-%07d", i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        }

        public Integer deserialize(byte[] b) {
            String s = new String(b, java.nio.charset.StandardCharsets.US_ASCII);
            return s.startsWith("item-") ? Integer.parseInt(s.substring(5)) : -1;
        }
    };

    /**
     * A DistributedQueue with a lock path: Curator's at-least-once mode
     * (an item is locked with an ephemeral node while consumed, deleted
     * after consumeMessage returns). consumer null: producer only.
     */
    static DistributedQueue<Integer> workq(CuratorFramework c, String path,
            QueueConsumer<Integer> consumer, boolean background) throws Exception {
        DistributedQueue<Integer> q = QueueBuilder.builder(c, consumer, ITEMS, path + "/items")
                .lockPath(path + "/locks").putInBackground(background).buildQueue();
        q.start();
        return q;
    }

    /** Counts acks (consumeMessage returning), seconds, duplicates. */
    static final class Drain {
        final int n;
        final byte[] seen;
        final AtomicInteger done = new AtomicInteger();
        final AtomicLong dups = new AtomicLong(), doneAt = new AtomicLong();

        Drain(int n) {
            this.n = n;
            seen = new byte[n];
        }

        void consumed(int i) {
            if (i >= 0 && i < n) {
                synchronized (seen) {
                    if (seen[i]++ != 0)
                        dups.incrementAndGet();
                }
            }
            if (done.incrementAndGet() == n)
                doneAt.set(nowNs());
            synchronized (this) {
                notifyAll();
            }
        }
    }

    static QueueConsumer<Integer> consumer(Drain d, AtomicInteger suspended) {
        return new QueueConsumer<Integer>() {
            public void consumeMessage(Integer i) { d.consumed(i); }

            public void stateChanged(CuratorFramework c, org.apache.curator.framework.state.ConnectionState s) {
                if (s == org.apache.curator.framework.state.ConnectionState.SUSPENDED
                        || s == org.apache.curator.framework.state.ConnectionState.LOST)
                    suspended.incrementAndGet();
            }
        };
    }

    /** qput N W: N puts, W threads each putting synchronously. */
    static void qput(int n, int w) throws Exception {
        CuratorFramework c = client();
        DistributedQueue<Integer> q = workq(c, root + "/qput", null, false);
        for (int i = 0; i < n / 10 + 10; i++) // warm up (and the JIT)
            q.put(i);
        AtomicInteger next = new AtomicInteger();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(w);
        ((java.util.concurrent.ThreadPoolExecutor) pool).prestartAllCoreThreads();
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        long t0 = nowNs();
        for (int t = 0; t < w; t++)
            fs.add(pool.submit(() -> {
                for (int i; (i = next.getAndIncrement()) < n;)
                    q.put(i);
                return null;
            }));
        for (java.util.concurrent.Future<?> f : fs)
            f.get();
        double secs = (nowNs() - t0) / 1e9;
        pool.shutdown();
        System.out.println("impl=curator mode=qput n=" + n + " w=" + w + " items_per_s=" + f0(n / secs));
        q.close();
        c.close();
    }

    static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                .getOperatingSystemMXBean()).getProcessCpuTime() / 1e9;
    }

    /**
     * qtake K N SECS / qdrain N K SECS: fill N items (background puts, not
     * timed), then K consumer queues (each its own session) drain them.
     * Gives up after SECS, or after 30 s without progress; a failed run
     * prints the error a plain getChildren of the item directory gets
     * (the 1 MB listing limit, jute.maxbuffer, past about 50,000 names).
     */
    static void qtake(String mode, int k, int n, int secs) throws Exception {
        String path = root + "/" + mode;
        CuratorFramework p = client();
        DistributedQueue<Integer> prod = workq(p, path, null, true);
        long f0 = nowNs();
        for (int i = 0; i < n; i++)
            prod.put(i);
        if (!prod.flushPuts(600, TimeUnit.SECONDS))
            throw new IllegalStateException("fill did not finish");
        double fill = (nowNs() - f0) / 1e9;
        List<CuratorFramework> clients = clients(k);
        Drain d = new Drain(n);
        AtomicInteger suspended = new AtomicInteger();
        List<DistributedQueue<Integer>> qs = new ArrayList<>();
        double cpu0 = cpuSeconds();
        long t0 = nowNs(), until = t0 + secs * 1_000_000_000L;
        for (CuratorFramework c : clients)
            qs.add(workq(c, path, consumer(d, suspended), false));
        int last = 0;
        long lastAt = nowNs();
        synchronized (d) {
            while (d.done.get() < n && nowNs() < until && nowNs() - lastAt < 30_000_000_000L) {
                d.wait(1000);
                if (d.done.get() != last) {
                    last = d.done.get();
                    lastAt = nowNs();
                }
            }
        }
        int drained = d.done.get();
        double took = ((drained >= n ? d.doneAt.get() : nowNs()) - t0) / 1e9;
        double cpu = cpuSeconds() - cpu0;
        String error = "";
        if (drained < n) {
            error = nowNs() >= until ? "deadline" : "no_progress_for_30s";
            try {
                int names = p.getZookeeperClient().getZooKeeper()
                        .getChildren(path + "/items", false).size();
                error += ";getChildren_ok_" + names + "_names";
            } catch (Exception e) {
                error += ";getChildren:" + e.toString();
            }
            error = " error=" + error.replaceAll("\\s+", "_");
        }
        System.out.println("impl=curator mode=" + mode + " consumers=" + k + " items=" + n
                + " drained=" + drained + " items_per_s=" + f0(drained / took) + " drain_s="
                + String.format("%.2f", took) + " fill_s=" + String.format("%.2f", fill)
                + " cpu_s_per_10k=" + String.format("%.3f", drained > 0 ? cpu * 10000 / drained : 0.0)
                + " dups=" + d.dups.get() + " suspended=" + suspended.get() + " failed="
                + (drained < n ? 1 : 0) + error);
        System.out.flush();
        for (DistributedQueue<Integer> q : qs)
            q.close();
        prod.close();
        closeAll(clients);
        p.close();
    }

    /**
     * qnotify W PUTS: W consumer queues wait on an empty queue; a producer
     * puts one item at a time, each consumed before the next. Watch
     * notifications (every watcher invocation in every session) per put.
     */
    static void qnotify(int w, int puts) throws Exception {
        String path = root + "/qnotify";
        CuratorFramework p = client();
        DistributedQueue<Integer> prod = workq(p, path, null, false);
        List<CuratorFramework> clients = clients(w);
        Drain d = new Drain(puts + 1);
        AtomicInteger suspended = new AtomicInteger();
        List<DistributedQueue<Integer>> qs = new ArrayList<>();
        for (CuratorFramework c : clients)
            qs.add(workq(c, path, consumer(d, suspended), false));
        prod.put(0);
        synchronized (d) {
            while (d.done.get() < 1)
                d.wait(1000);
        }
        Thread.sleep(500);
        long e0 = watchEvents.get();
        for (int i = 1; i <= puts; i++) {
            prod.put(i);
            synchronized (d) {
                while (d.done.get() < i + 1)
                    d.wait(1000);
            }
            Thread.sleep(20);
        }
        Thread.sleep(200);
        long e1 = watchEvents.get();
        System.out.println("impl=curator mode=qnotify consumers=" + w + " puts=" + puts
                + " watch_events_per_put=" + String.format("%.2f", (double) (e1 - e0) / puts)
                + " dups=" + d.dups.get());
        System.out.flush();
        for (DistributedQueue<Integer> q : qs)
            q.close();
        prod.close();
        closeAll(clients);
        p.close();
    }

    // ------------------------------------------------------------- main

    static int num(String s) {
        int v = Integer.parseInt(s);
        if (v < 1)
            throw new IllegalArgumentException("bad number " + s);
        return v;
    }

    /**
     * One candidate of the failover workload (bench/failover.py starts K of
     * them, each its own JVM): a LeaderLatch at path, its session timeout
     * sessionMs; prints "joined", then "elected MICROS" (since the epoch)
     * when it leads, and leads until killed (SIGKILL: its session must
     * expire) or told to resign (SIGTERM: the shutdown hook closes the
     * latch and the client).
     */
    static void candidate(String path, int sessionMs) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(hosts)
                .sessionTimeoutMs(sessionMs).connectionTimeoutMs(10000)
                .retryPolicy(new RetryNTimes(3, 100)).build();
        c.start();
        c.blockUntilConnected();
        LeaderLatch l = new LeaderLatch(c, path, "bench");
        l.addListener(new LeaderLatchListener() {
            public void isLeader() {
                java.time.Instant t = java.time.Instant.now();
                System.out.println("elected " + (t.getEpochSecond() * 1000000L + t.getNano() / 1000));
                System.out.flush();
            }

            public void notLeader() {}
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                l.close();
            } catch (Exception e) {
                // resigning anyway: the client's close ends the session
            }
            c.close();
        }));
        l.start();
        System.out.println("joined");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    public static void main(String[] a) throws Exception {
        int i = 0;
        if (a.length > 1 && a[0].equals("-s")) {
            hosts = a[1];
            i = 2;
        }
        if (i >= a.length) {
            System.err.println("usage: CuratorBench -s HOSTS MODE ARGS");
            System.exit(2);
        }
        root = "/zkr-bench/curator-" + ProcessHandle.current().pid() + "-" + (nowNs() % 100000);
        String mode = a[i];
        int n = a.length - i;
        if (mode.equals("uncontended") && n == 2)
            uncontended(num(a[i + 1]));
        else if (mode.equals("multi") && n == 3)
            multi(num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("contended") && n == 3)
            contenders("contended", 1, num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("semaphore") && n == 4)
            contenders("semaphore", num(a[i + 1]), num(a[i + 2]), num(a[i + 3]));
        else if (mode.equals("herd") && n == 3)
            herd(num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("scale") && n == 2)
            scale(num(a[i + 1]));
        else if (mode.equals("election") && n == 3)
            election(num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("many") && n == 3)
            many(num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("qput") && n == 3)
            qput(num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("qtake") && n == 4)
            qtake("qtake", num(a[i + 1]), num(a[i + 2]), num(a[i + 3]));
        else if (mode.equals("qdrain") && n == 4)
            qtake("qdrain", num(a[i + 2]), num(a[i + 1]), num(a[i + 3]));
        else if (mode.equals("qnotify") && n == 3)
            qnotify(num(a[i + 1]), num(a[i + 2]));
        else if (mode.equals("candidate") && n == 3)
            candidate(a[i + 1], num(a[i + 2]));
        else {
            System.err.println("usage: CuratorBench -s HOSTS MODE ARGS");
            System.exit(2);
        }
        System.exit(0);
    }
}
