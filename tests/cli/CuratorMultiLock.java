// tests/cli/CuratorMultiLock.java: Apache Curator's InterProcessMultiLock
// (of InterProcessMutex members) as a peer of `zkr lock PATH PATH...`
// (tests/cli/test_cli_multilock.sh, which compiles it with javac into a
// scratch directory).
//
//   java -cp DIR:CURATOR-JARS CuratorMultiLock HOSTS hold FILE PATH...
//       acquires every PATH (in the order given, as Curator does), prints
//       "held", holds until FILE exists, releases.
//   java ... CuratorMultiLock HOSTS try MS PATH...
//       tries for MS milliseconds; prints "0" (acquired, then released)
//       or "1" (not acquired).

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class CuratorMultiLock {
    public static void main(String[] a) throws Exception {
        String hosts = a[0], what = a[1];
        CuratorFramework c = CuratorFrameworkFactory.newClient(
            hosts, 10000, 10000, new RetryNTimes(3, 200));
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
            throw new IllegalStateException("no connection to " + hosts);
        List<InterProcessLock> locks = new ArrayList<>();
        for (int i = 3; i < a.length; i++)
            locks.add(new InterProcessMutex(c, a[i]));
        InterProcessMultiLock m = new InterProcessMultiLock(locks);
        if (what.equals("hold")) {
            m.acquire();
            System.out.println("held");
            System.out.flush();
            while (!new File(a[2]).exists())
                Thread.sleep(50);
            m.release();
        } else {
            boolean got = m.acquire(Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
            if (got)
                m.release();
            System.out.println(got ? "0" : "1");
        }
        c.close();
    }
}
