// Which broker coordinates a consumer group, or a transactional id, as the cluster itself answers
// (FindCoordinator): for a group through Admin.describeConsumerGroups (classic and KIP-848 groups
// alike), for a transactional id through Admin.describeTransactions (a FindCoordinator request of
// key type TRANSACTION, then DescribeTransactions at that broker).
//
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] HOST:PORT[,...] GROUP
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] --transactional-id HOST:PORT[,...] TXN_ID
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] --elect-preferred HOST:PORT[,...]
//
// --elect-preferred moves every partition's leadership back to its preferred replica (after node
// failures the leaders, hence the coordinators, pile up on the nodes that stayed up) and prints
// `elected=<partitions moved>`.
//
// Prints one line: `coordinator=<node id> host=<host> port=<port> type=<group type> state=<state>`
// for a group, `coordinator=<node id> state=<transaction state> producerId=<id> epoch=<epoch>
// timeoutMs=<transaction.timeout.ms> partitions=<topic-partitions in the open transaction>` for a
// transactional id (which must have been initialised: the coordinator knows it).
// Exit: 0 ok, 1 failure, 2 usage.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTransactionsOptions;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.ElectionNotNeededException;

import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

public class GroupCoordinator {
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
            System.out.println("coordinator=" + c.id() + " host=" + c.host() + " port=" + c.port()
                + " type=" + d.type() + " state=" + d.groupState());
        } catch (Exception e) {
            System.err.println("GroupCoordinator: " + e);
            System.exit(1);
        }
    }
}
