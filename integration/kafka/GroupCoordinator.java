// Which broker coordinates a consumer group, or a transactional id, as the cluster itself answers
// (FindCoordinator): for a group through Admin.describeConsumerGroups (classic and KIP-848 groups
// alike), for a transactional id through Admin.describeTransactions (a FindCoordinator request of
// key type TRANSACTION, then DescribeTransactions at that broker). For a group also its
// `__consumer_offsets` partition (`Utils.abs(key.hashCode()) % partitions`, as the broker's
// `GroupCoordinatorService.partitionFor`), its leader, replicas and in-sync replicas, and its
// followers: the replicas that are not its leader (a coordinator's offset writes wait for them until
// the ISR shrinks).
//
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] HOST:PORT[,...] GROUP
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] --transactional-id HOST:PORT[,...] TXN_ID
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] --elect-preferred HOST:PORT[,...]
//
// --elect-preferred moves every partition's leadership back to its preferred replica (after node
// failures the leaders, hence the coordinators, pile up on the nodes that stayed up) and prints
// `elected=<partitions moved>`.
//
// Prints one line: `coordinator=<node id> host=<host> port=<port> type=<group type> state=<state>
// partition=<p> leader=<id> replicas=<id,...> isr=<id,...> followers=<id,...>` (an empty list: `-`)
// for a group, `coordinator=<node id> state=<transaction state> producerId=<id> epoch=<epoch>
// timeoutMs=<transaction.timeout.ms> partitions=<topic-partitions in the open transaction>` for a
// transactional id (which must have been initialised: the coordinator knows it).
// Exit: 0 ok, 1 failure, 2 usage.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.DescribeTransactionsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.utils.Utils;

import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

public class GroupCoordinator {
    static String ids(List<Node> nodes) {
        String s = nodes.stream().map(n -> String.valueOf(n.id())).collect(Collectors.joining(","));
        return s.isEmpty() ? "-" : s;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, key = null;
        int timeoutMs = 10000;
        boolean transactional = false, elect = false;
        try {
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals("--timeout-ms")) timeoutMs = Integer.parseInt(args[++i]);
                else if (args[i].equals("--transactional-id")) transactional = true;
                else if (args[i].equals("--elect-preferred")) elect = true;
                else if (args[i].startsWith("--")) throw new IllegalArgumentException(args[i]);
                else if (bootstrap == null) bootstrap = args[i];
                else if (key == null) key = args[i];
                else throw new IllegalArgumentException(args[i]);
            }
            if (bootstrap == null || (key == null && !elect)) throw new IllegalArgumentException("missing HOST:PORT or GROUP/TXN_ID");
        } catch (RuntimeException e) {
            System.err.println("usage: GroupCoordinator [--timeout-ms MS] [--transactional-id] HOST:PORT GROUP|TXN_ID  (" + e.getMessage() + ")");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", String.valueOf(timeoutMs));
        p.put("default.api.timeout.ms", String.valueOf(timeoutMs));
        try (Admin admin = Admin.create(p)) {
            if (elect) {
                var results = admin.electLeaders(ElectionType.PREFERRED, null).partitions().get(timeoutMs, TimeUnit.MILLISECONDS);
                int moved = 0;
                for (var r : results.entrySet()) {
                    if (r.getValue().isEmpty()) moved++;
                    else if (!(r.getValue().get() instanceof ElectionNotNeededException))
                        System.err.println("GroupCoordinator: " + r.getKey() + ": " + r.getValue().get());
                }
                System.out.println("elected=" + moved);
                return;
            }
            if (transactional) {
                TransactionDescription d = admin
                    .describeTransactions(List.of(key), new DescribeTransactionsOptions().timeoutMs(timeoutMs))
                    .description(key).get(timeoutMs, TimeUnit.MILLISECONDS);
                System.out.println("coordinator=" + d.coordinatorId() + " state=" + d.state()
                    + " producerId=" + d.producerId() + " epoch=" + d.producerEpoch()
                    + " timeoutMs=" + d.transactionTimeoutMs() + " partitions=" + d.topicPartitions().size());
                return;
            }
            ConsumerGroupDescription d = admin
                .describeConsumerGroups(List.of(key), new DescribeConsumerGroupsOptions().timeoutMs(timeoutMs))
                .describedGroups().get(key).get(timeoutMs, TimeUnit.MILLISECONDS);
            Node c = d.coordinator();
            TopicDescription offsets = admin
                .describeTopics(List.of("__consumer_offsets"), new DescribeTopicsOptions().timeoutMs(timeoutMs))
                .allTopicNames().get(timeoutMs, TimeUnit.MILLISECONDS).get("__consumer_offsets");
            int partition = Utils.abs(key.hashCode()) % offsets.partitions().size();
            TopicPartitionInfo info = offsets.partitions().stream()
                .filter(x -> x.partition() == partition).findFirst().orElseThrow();
            Node leader = info.leader();
            List<Node> followers = info.replicas().stream()
                .filter(n -> leader == null || n.id() != leader.id()).collect(Collectors.toList());
            System.out.println("coordinator=" + c.id() + " host=" + c.host() + " port=" + c.port()
                + " type=" + d.type() + " state=" + d.groupState()
                + " partition=" + partition + " leader=" + (leader == null ? -1 : leader.id())
                + " replicas=" + ids(info.replicas()) + " isr=" + ids(info.isr())
                + " followers=" + ids(followers));
        } catch (Exception e) {
            System.err.println("GroupCoordinator: " + e);
            System.exit(1);
        }
    }
}
