// Readiness probe for the integration-test Kafka cluster (kafka-clients only).
//
//   java -cp "<libs>/*" ClusterCheck.java [options] HOST:PORT[,HOST:PORT...]
//
// Sends a real metadata/DescribeCluster request with the Admin client and prints
//   cluster_id=<id> nodes=<n> node_ids=[..] controller=<id> via=<bootstrap>
// Options:
//   --each               check every listed address on its own (one Admin per address)
//   --cluster-id ID      require this cluster id (a leftover broker from an older run fails)
//   --nodes N            require exactly N live brokers
//   --user U --password P  SASL_PLAINTEXT with SCRAM-SHA-512 (--mechanism to change)
//   --sasl-addrs A,..    with --user: check these with SASL as well (each on its own), and
//                        the positional addresses without SASL
//   --timeout-ms MS      bound for one try (default 5000)
//   --wait-ms MS         keep retrying until MS elapsed (default 0 = one try)
//   --watch-pids P,..    while waiting, give up as soon as one of these processes is gone
// Exit: 0 ok, 1 not ready/timeout, 2 usage, 3 authentication failed,
//       4 a watched process exited, 5 wrong cluster id.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.AuthenticationException;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

public class ClusterCheck {
    static final class Fail extends Exception {
        final int code;
        Fail(int code, String msg) { super(msg); this.code = code; }
    }

    public static void main(String[] args) throws Exception {
        String addrs = null, saslAddrs = null, clusterId = null, user = null, password = null, mechanism = "SCRAM-SHA-512";
        int nodes = -1, timeoutMs = 5000;
        long waitMs = 0;
        boolean each = false;
        List<Long> pids = new ArrayList<>();
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--each": each = true; break;
                    case "--cluster-id": clusterId = args[++i]; break;
                    case "--nodes": nodes = Integer.parseInt(args[++i]); break;
                    case "--user": user = args[++i]; break;
                    case "--password": password = args[++i]; break;
                    case "--mechanism": mechanism = args[++i]; break;
                    case "--sasl-addrs": saslAddrs = args[++i]; break;
                    case "--timeout-ms": timeoutMs = Integer.parseInt(args[++i]); break;
                    case "--wait-ms": waitMs = Long.parseLong(args[++i]); break;
                    case "--watch-pids":
                        for (String p : args[++i].split(",")) if (!p.isBlank()) pids.add(Long.parseLong(p.trim()));
                        break;
                    default:
                        if (args[i].startsWith("--") || addrs != null) throw new IllegalArgumentException(args[i]);
                        addrs = args[i];
                }
            }
            if (addrs == null || (user == null) != (password == null) || (saslAddrs != null && user == null))
                throw new IllegalArgumentException("args");
        } catch (RuntimeException e) {
            System.err.println("usage: ClusterCheck [--each] [--cluster-id ID] [--nodes N] [--user U --password P]"
                + " [--sasl-addrs A,..] [--timeout-ms MS] [--wait-ms MS] [--watch-pids P,..] HOST:PORT[,HOST:PORT...]  (" + e.getMessage() + ")");
            System.exit(2);
        }
        List<String> targets = each ? List.of(addrs.split(",")) : List.of(addrs);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        String last = null;
        while (true) {
            try {
                checkPids(pids);
                // one try is bounded by --timeout-ms and (while waiting) by what is left of --wait-ms
                long leftMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                int tryMs = waitMs > 0 ? (int) Math.max(1000, Math.min(timeoutMs, leftMs)) : timeoutMs;
                for (String t : targets)
                    System.out.println(check(t, clusterId, nodes, saslAddrs == null ? user : null, password, mechanism, tryMs, pids));
                if (saslAddrs != null)
                    for (String t : saslAddrs.split(","))
                        System.out.println(check(t, clusterId, nodes, user, password, mechanism, tryMs, pids));
                System.exit(0);
            } catch (Fail f) {
                last = f.getMessage();
                if (f.code != 1 || System.nanoTime() >= deadline) {
                    System.err.println("ClusterCheck: " + last);
                    System.exit(f.code);
                }
            }
            Thread.sleep(300);
        }
    }

    static String check(String bootstrap, String clusterId, int nodes, String user, String password,
                        String mechanism, int timeoutMs, List<Long> pids) throws Fail {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "rx-kafka-it-check");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        p.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, 500);
        if (user != null) {
            p.put("security.protocol", "SASL_PLAINTEXT");
            p.put("sasl.mechanism", mechanism);
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + esc(user) + "\" password=\"" + esc(password) + "\";");
        }
        Admin admin;
        try {
            admin = Admin.create(p);
        } catch (KafkaException e) { // e.g. no resolvable bootstrap address
            throw new Fail(1, "cannot connect to " + bootstrap + ": " + (e.getCause() != null ? e.getCause().getMessage() : e.getMessage()));
        }
        try {
            DescribeClusterResult r = admin.describeCluster(new DescribeClusterOptions().timeoutMs(timeoutMs));
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs + 2000L);
            String id = await(r.clusterId(), end, pids);
            Collection<Node> ns = await(r.nodes(), end, pids);
            Node controller = await(r.controller(), end, pids);
            TreeSet<Integer> ids = new TreeSet<>();
            for (Node n : ns) ids.add(n.id());
            String line = "cluster_id=" + id + " nodes=" + ns.size() + " node_ids=" + ids
                + " controller=" + (controller == null ? "none" : controller.id()) + " via=" + bootstrap
                + (user != null ? " sasl=" + mechanism + ":" + user : "");
            if (clusterId != null && !clusterId.equals(id))
                throw new Fail(5, "wrong cluster id (expected " + clusterId + "): " + line);
            if (nodes >= 0 && ns.size() != nodes)
                throw new Fail(1, "expected " + nodes + " nodes: " + line);
            return line;
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof AuthenticationException) throw new Fail(3, "authentication failed via " + bootstrap + ": " + c.getMessage());
            throw new Fail(1, "no answer from " + bootstrap + ": " + c);
        } catch (TimeoutException e) {
            throw new Fail(1, "no answer from " + bootstrap + " within " + timeoutMs + " ms");
        } catch (InterruptedException e) {
            throw new Fail(1, "interrupted");
        } finally {
            admin.close(Duration.ofMillis(500));
        }
    }

    // wait for f until end, giving up early when a watched process is gone
    static <T> T await(KafkaFuture<T> f, long end, List<Long> pids)
            throws Fail, ExecutionException, InterruptedException, TimeoutException {
        while (true) {
            try {
                return f.get(200, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                checkPids(pids);
                if (System.nanoTime() >= end) throw e;
            }
        }
    }

    static void checkPids(List<Long> pids) throws Fail {
        for (long pid : pids)
            if (!ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false))
                throw new Fail(4, "process " + pid + " exited");
    }

    static String esc(String s) { return s.replace("\\", "\\\\").replace("\"", "\\\""); }
}
