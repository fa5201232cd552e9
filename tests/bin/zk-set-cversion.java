/* Crafts a ZooKeeper state that no client can reach in a test's time:
 * directories whose sequence counter is near or past the wrap from
 * 2147483647 to -2147483648, with children already there. Run on a stopped
 * standalone server's data dir (Java's single-file source launcher, with
 * Debian's ZooKeeper jars; tests/integration/test_wrap.c does):
 *
 *   java -cp /usr/share/java/zookeeper.jar zk-set-cversion.java \
 *        DATADIR ITEM...
 *
 * ITEM is PATH=N: PATH (created if missing, persistent) gets N as the
 * number of its next sequential child; or PATH: a persistent node created
 * there (its parent's counter unchanged). Items run in order, each at the
 * next zxid, so nodes are created in the order given (their czxids say
 * so). The server's state is loaded the way the server loads it (latest
 * snapshot plus transaction logs) and saved as a new snapshot, which the
 * restarted server loads. Exit status 0 on success.
 *
 * N is the cversion the server stores: a count of the children ever
 * created (PrepRequestProcessor names a sequential node with it and the
 * transaction stores it plus one). The cversion a client reads in a Stat
 * is derived from it (twice the creations minus the children present:
 * creations plus deletions) and is not the next number. */
import java.io.File;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public class SetCversion {
    static DataTree dt = new DataTree();
    static long zxid;

    static void create(String path) throws Exception {
        String parent = path.substring(0, Math.max(path.lastIndexOf('/'), 1));
        int cv = dt.getNode(parent).stat.getCversion();

        /* The parent's count as it is: a node created with a count not
         * above the stored one leaves it alone (the replay rule). */
        dt.createNode(path, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, cv,
                      ++zxid, System.currentTimeMillis());
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: zk-set-cversion DATADIR ITEM...");
            System.exit(2);
        }
        File dir = new File(args[0]);
        FileTxnSnapLog log = new FileTxnSnapLog(dir, dir);
        ConcurrentHashMap<Long, Integer> sessions = new ConcurrentHashMap<>();

        zxid = log.restore(dt, sessions, (hdr, rec, digest) -> {});
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String path = eq < 0 ? args[i] : args[i].substring(0, eq);

            if (eq < 0 || dt.getNode(path) == null)
                create(path);
            if (eq >= 0) {
                /* Set directly: the count may have to go down (past the
                 * wrap), which createNode never does. The snapshot's
                 * digest is recomputed from the nodes when it is loaded. */
                DataNode n = dt.getNode(path);
                n.stat.setCversion(Integer.parseInt(args[i].substring(eq + 1)));
                n.stat.setPzxid(++zxid);
            }
            System.out.println("zk-set-cversion: " + path + " next sequence " +
                               dt.getNode(path).stat.getCversion());
        }
        dt.lastProcessedZxid = zxid;
        log.save(dt, sessions, true);
        log.close();
    }
}
