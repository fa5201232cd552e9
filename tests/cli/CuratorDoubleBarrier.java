// tests/cli/CuratorDoubleBarrier.java: Apache Curator's
// DistributedDoubleBarrier as a participant beside `zkr barrier enter`
// (tests/cli/test_cli_dbarrier.sh, which compiles it with javac into a
// scratch directory).
//
//   java -cp DIR:CURATOR-JARS CuratorDoubleBarrier HOSTS PATH N SECONDS TIMEOUT
//       enters the double barrier PATH of N participants (enter(TIMEOUT
//       seconds)), stays in the phase SECONDS, then leaves (leave(TIMEOUT
//       seconds)). Prints, each with System.nanoTime() in ms (Linux:
//       CLOCK_MONOTONIC, the clock of the test's other participants):
//           entering MS   before enter
//           entered MS    enter returned true: the phase has begun
//           leaving MS    before leave
//           left MS       leave returned true: every participant has left
//       Exit 1 when enter or leave returned false (TIMEOUT passed).

import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.RetryNTimes;

public class CuratorDoubleBarrier {
    static void say(String word) {
        System.out.println(word + " " + System.nanoTime() / 1000000);
        System.out.flush();
    }

    public static void main(String[] a) throws Exception {
        String hosts = a[0], path = a[1];
        int n = Integer.parseInt(a[2]);
        long phaseMs = (long)(Double.parseDouble(a[3]) * 1000);
        long timeout = Long.parseLong(a[4]);
        boolean ok;
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(
                 hosts, 10000, 10000, new RetryNTimes(3, 200))) {
            c.start();
            if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
                throw new IllegalStateException("no connection to " + hosts);
            DistributedDoubleBarrier b = new DistributedDoubleBarrier(c, path, n);
            say("entering");
            ok = b.enter(timeout, TimeUnit.SECONDS);
            if (ok) {
                say("entered");
                Thread.sleep(phaseMs);
                say("leaving");
                ok = b.leave(timeout, TimeUnit.SECONDS);
                if (ok)
                    say("left");
            }
        }
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }
}
