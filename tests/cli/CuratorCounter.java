// tests/cli/CuratorCounter.java: Apache Curator's DistributedAtomicLong as a
// peer of `zkr counter` (tests/cli/test_cli_counter.sh, which compiles it
// with javac into a scratch directory).
//
//   java -cp DIR:CURATOR-JARS CuratorCounter HOSTS PATH get
//       prints the value.
//   java ... CuratorCounter HOSTS PATH add N
//       adds N and prints the value after.
//   java ... CuratorCounter HOSTS PATH loop THREADS ITERATIONS
//       THREADS threads, each with its own session, add 1 ITERATIONS
//       times each; prints "done"; exits 1 if an add did not succeed.

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.retry.RetryNTimes;

public class CuratorCounter {
    static CuratorFramework connect(String hosts) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(
            hosts, 10000, 10000, new RetryNTimes(3, 200));
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
            throw new IllegalStateException("no connection to " + hosts);
        return c;
    }

    // Optimistic tries until one succeeds (each failure means another
    // client's update succeeded).
    static DistributedAtomicLong counter(CuratorFramework c, String path) {
        return new DistributedAtomicLong(c, path, new RetryNTimes(100000, 1));
    }

    public static void main(String[] a) throws Exception {
        String hosts = a[0], path = a[1], act = a[2];
        if (act.equals("loop")) {
            int threads = Integer.parseInt(a[3]);
            int iters = Integer.parseInt(a[4]);
            AtomicInteger bad = new AtomicInteger();
            List<Thread> ts = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                Thread t = new Thread(() -> {
                    try (CuratorFramework c = connect(hosts)) {
                        DistributedAtomicLong n = counter(c, path);
                        for (int k = 0; k < iters; k++)
                            if (!n.increment().succeeded())
                                bad.incrementAndGet();
                    } catch (Exception e) {
                        e.printStackTrace();
                        bad.incrementAndGet();
                    }
                });
                t.start();
                ts.add(t);
            }
            for (Thread t : ts)
                t.join();
            System.out.println(bad.get() == 0 ? "done" : "failed " + bad.get());
            System.exit(bad.get() == 0 ? 0 : 1);
        }
        try (CuratorFramework c = connect(hosts)) {
            DistributedAtomicLong n = counter(c, path);
            AtomicValue<Long> v = act.equals("add")
                ? n.add(Long.parseLong(a[3])) : n.get();
            if (!v.succeeded()) {
                System.out.println("failed");
                System.exit(1);
            }
            System.out.println(v.postValue());
        }
    }
}
