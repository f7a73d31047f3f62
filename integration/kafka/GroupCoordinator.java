// Which broker coordinates a consumer group, as the cluster itself answers (FindCoordinator, through
// Admin.describeConsumerGroups): for classic and KIP-848 (consumer) groups alike.
//
//   java -cp "<libs>/*" GroupCoordinator.java [--timeout-ms MS] HOST:PORT[,...] GROUP
//
// Prints one line: `coordinator=<node id> host=<host> port=<port> type=<group type> state=<state>`.
// Exit: 0 ok, 1 failure, 2 usage.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.common.Node;

import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

public class GroupCoordinator {
    public static void main(String[] args) throws Exception {
        String bootstrap = null, group = null;
        int timeoutMs = 10000;
        try {
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals("--timeout-ms")) timeoutMs = Integer.parseInt(args[++i]);
                else if (args[i].startsWith("--")) throw new IllegalArgumentException(args[i]);
                else if (bootstrap == null) bootstrap = args[i];
                else if (group == null) group = args[i];
                else throw new IllegalArgumentException(args[i]);
            }
            if (bootstrap == null || group == null) throw new IllegalArgumentException("missing HOST:PORT or GROUP");
        } catch (RuntimeException e) {
            System.err.println("usage: GroupCoordinator [--timeout-ms MS] HOST:PORT GROUP  (" + e.getMessage() + ")");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", String.valueOf(timeoutMs));
        p.put("default.api.timeout.ms", String.valueOf(timeoutMs));
        try (Admin admin = Admin.create(p)) {
            ConsumerGroupDescription d = admin
                .describeConsumerGroups(List.of(group), new DescribeConsumerGroupsOptions().timeoutMs(timeoutMs))
                .describedGroups().get(group).get(timeoutMs, TimeUnit.MILLISECONDS);
            Node c = d.coordinator();
            System.out.println("coordinator=" + c.id() + " host=" + c.host() + " port=" + c.port()
                + " type=" + d.type() + " state=" + d.groupState());
        } catch (Exception e) {
            System.err.println("GroupCoordinator: " + e);
            System.exit(1);
        }
    }
}
