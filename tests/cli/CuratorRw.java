// tests/cli/CuratorRw.java: Apache Curator's InterProcessReadWriteLock as a
// peer of `zkr lock --read/--write` (tests/cli/test_cli_curator.sh, which
// compiles it with javac into a scratch directory).
//
//   java -cp DIR:CURATOR-JARS CuratorRw HOSTS PATH hold read|write FILE
//       acquires, prints "held", holds until FILE exists, releases.
//   java ... CuratorRw HOSTS PATH try read|write...
//       for each mode, tries to acquire without waiting and prints
//       "MODE 0" (acquired, then released) or "MODE 1" (not acquired).
//   java ... CuratorRw HOSTS PATH mix CLIENTS ITERATIONS LOG
//       CLIENTS threads, each with its own session, take the read or the
//       write lock at random ITERATIONS times, appending "start R|W NAME"
//       after each grant and "end R|W NAME" before each release to LOG.

import java.io.File;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryNTimes;

public class CuratorRw {
    static CuratorFramework connect(String hosts) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(
            hosts, 10000, 10000, new RetryNTimes(3, 200));
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
            throw new IllegalStateException("no connection to " + hosts);
        return c;
    }

    static InterProcessMutex side(InterProcessReadWriteLock rw, String mode) {
        if (mode.equals("read"))
            return rw.readLock();
        if (mode.equals("write"))
            return rw.writeLock();
        throw new IllegalArgumentException("mode " + mode);
    }

    static FileOutputStream log;

    static synchronized void append(String line) throws Exception {
        log.write((line + "\n").getBytes(StandardCharsets.UTF_8));
    }

    public static void main(String[] a) throws Exception {
        String hosts = a[0], path = a[1], what = a[2];
        if (what.equals("hold")) {
            CuratorFramework c = connect(hosts);
            InterProcessMutex m = side(new InterProcessReadWriteLock(c, path), a[3]);
            m.acquire();
            System.out.println("held");
            System.out.flush();
            while (!new File(a[4]).exists())
                Thread.sleep(50);
            m.release();
            c.close();
        } else if (what.equals("try")) {
            CuratorFramework c = connect(hosts);
            for (int i = 3; i < a.length; i++) {
                InterProcessMutex m = side(new InterProcessReadWriteLock(c, path), a[i]);
                boolean got = m.acquire(0, TimeUnit.MILLISECONDS);
                if (got)
                    m.release();
                System.out.println(a[i] + (got ? " 0" : " 1"));
            }
            c.close();
        } else if (what.equals("mix")) {
            int clients = Integer.parseInt(a[3]), iters = Integer.parseInt(a[4]);
            log = new FileOutputStream(a[5], true);
            List<Thread> ts = new ArrayList<>();
            List<Throwable> errs = new ArrayList<>();
            for (int k = 0; k < clients; k++) {
                final String name = "curator-" + k;
                final long seed = System.nanoTime() + k;
                Thread t = new Thread(() -> {
                    try {
                        CuratorFramework c = connect(hosts);
                        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
                        Random r = new Random(seed);
                        for (int i = 0; i < iters; i++) {
                            boolean w = r.nextBoolean();
                            InterProcessMutex m = w ? rw.writeLock() : rw.readLock();
                            String tag = (w ? "W " : "R ") + name;
                            m.acquire();
                            append("start " + tag);
                            Thread.sleep(10 + r.nextInt(40));
                            append("end " + tag);
                            m.release();
                        }
                        c.close();
                    } catch (Throwable e) {
                        synchronized (errs) {
                            errs.add(e);
                        }
                    }
                });
                t.start();
                ts.add(t);
            }
            for (Thread t : ts)
                t.join();
            log.close();
            if (!errs.isEmpty()) {
                errs.get(0).printStackTrace();
                System.exit(2);
            }
        } else {
            System.err.println("unknown action " + what);
            System.exit(2);
        }
    }
}
