// tests/cli/CuratorBarrier.java: Apache Curator's DistributedBarrier as a
// peer of `zkr barrier` (tests/cli/test_cli_barrier.sh, which compiles it
// with javac into a scratch directory).
//
//   java -cp DIR:CURATOR-JARS CuratorBarrier HOSTS PATH set
//       sets the barrier (setBarrier: a persistent node).
//   java ... CuratorBarrier HOSTS PATH remove
//       clears it (removeBarrier).
//   java ... CuratorBarrier HOSTS PATH wait SECONDS
//       prints "waiting", then waitOnBarrier(SECONDS): prints true (exit
//       0) once it is cleared, false (exit 1) if the time passed with it
//       standing.

import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.retry.RetryNTimes;

public class CuratorBarrier {
    public static void main(String[] a) throws Exception {
        String hosts = a[0], path = a[1], act = a[2];
        boolean ok = true;
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(
                 hosts, 10000, 10000, new RetryNTimes(3, 200))) {
            c.start();
            if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
                throw new IllegalStateException("no connection to " + hosts);
            DistributedBarrier b = new DistributedBarrier(c, path);
            if (act.equals("set")) {
                b.setBarrier();
            } else if (act.equals("remove")) {
                b.removeBarrier();
            } else if (act.equals("wait")) {
                System.out.println("waiting");
                System.out.flush();
                ok = b.waitOnBarrier(Long.parseLong(a[3]), TimeUnit.SECONDS);
                System.out.println(ok);
            } else {
                throw new IllegalArgumentException("unknown action " + act);
            }
        }
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }
}
