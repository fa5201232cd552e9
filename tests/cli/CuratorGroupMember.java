// tests/cli/CuratorGroupMember.java: Apache Curator's GroupMember beside
// `zkr member` and `zkr members` (tests/cli/test_cli_group.sh, which
// compiles it with javac into a scratch directory).
//
//   java -cp DIR:CURATOR-JARS CuratorGroupMember HOSTS PATH join ID PAYLOAD STOPFILE
//       joins the group PATH as ID (the ephemeral node PATH/ID holding
//       PAYLOAD), prints "joined" once its node stands, stays until the
//       file STOPFILE exists, then closes (leaves) and prints "left".
//   java -cp DIR:CURATOR-JARS CuratorGroupMember HOSTS PATH list ME WANT SECONDS
//       joins as ME (GroupMember lists only as a member), waits up to
//       SECONDS until getCurrentMembers() has the key WANT, then prints
//       "member KEY DATA" for each entry (DATA as UTF-8) and exits 0; 1
//       when WANT did not come.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.RetryNTimes;

public class CuratorGroupMember {
    public static void main(String[] a) throws Exception {
        String hosts = a[0], path = a[1], what = a[2];
        int status = 0;
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(
                 hosts, 10000, 10000, new RetryNTimes(3, 200))) {
            c.start();
            if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
                throw new IllegalStateException("no connection to " + hosts);
            if (what.equals("join")) {
                String id = a[3];
                GroupMember m = new GroupMember(
                    c, path, id, a[4].getBytes(StandardCharsets.UTF_8));
                m.start();
                String node = path + "/" + id;
                while (c.checkExists().forPath(node) == null)
                    Thread.sleep(50);
                System.out.println("joined");
                System.out.flush();
                while (!Files.exists(Paths.get(a[5])))
                    Thread.sleep(50);
                m.close();
                System.out.println("left");
            } else {
                String want = a[4];
                long until = System.nanoTime() +
                             (long)(Double.parseDouble(a[5]) * 1e9);
                GroupMember m = new GroupMember(c, path, a[3]);
                m.start();
                Map<String, byte[]> got = m.getCurrentMembers();
                while (!got.containsKey(want) && System.nanoTime() < until) {
                    Thread.sleep(50);
                    got = m.getCurrentMembers();
                }
                for (Map.Entry<String, byte[]> e : got.entrySet())
                    System.out.println(
                        "member " + e.getKey() + " " +
                        new String(e.getValue(), StandardCharsets.UTF_8));
                status = got.containsKey(want) ? 0 : 1;
                m.close();
            }
        }
        System.out.flush();
        System.exit(status);
    }
}
