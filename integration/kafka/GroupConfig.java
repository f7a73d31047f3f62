// Sets a consumer group's dynamic configs (KIP-848 group configs, e.g. consumer.session.timeout.ms,
// within the broker's group.consumer.min/max.* bounds) with Admin.incrementalAlterConfigs on the
// GROUP resource; the group need not exist yet. Reads them back and prints them.
//
//   java -cp "<libs>/*" GroupConfig.java [--timeout-ms MS] HOST:PORT[,...] GROUP KEY=VALUE...
//
// Prints one line: `group=<group> KEY=VALUE ...` (as described back by the cluster).
// Exit: 0 ok, 1 failure, 2 usage.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.config.ConfigResource;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

public class GroupConfig {
    public static void main(String[] args) throws Exception {
        String bootstrap = null, group = null;
        Map<String, String> set = new LinkedHashMap<>();
        int timeoutMs = 10000;
        try {
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals("--timeout-ms")) timeoutMs = Integer.parseInt(args[++i]);
                else if (args[i].startsWith("--")) throw new IllegalArgumentException(args[i]);
                else if (bootstrap == null) bootstrap = args[i];
                else if (group == null) group = args[i];
                else {
                    int eq = args[i].indexOf('=');
                    if (eq <= 0) throw new IllegalArgumentException("not KEY=VALUE: " + args[i]);
                    set.put(args[i].substring(0, eq), args[i].substring(eq + 1));
                }
            }
            if (bootstrap == null || group == null || set.isEmpty())
                throw new IllegalArgumentException("missing HOST:PORT, GROUP or KEY=VALUE");
        } catch (RuntimeException e) {
            System.err.println("usage: GroupConfig [--timeout-ms MS] HOST:PORT GROUP KEY=VALUE...  (" + e.getMessage() + ")");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", String.valueOf(timeoutMs));
        p.put("default.api.timeout.ms", String.valueOf(timeoutMs));
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> e : set.entrySet())
            ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
        try (Admin admin = Admin.create(p)) {
            admin.incrementalAlterConfigs(Map.of(resource, ops), new AlterConfigsOptions().timeoutMs(timeoutMs))
                .all().get(timeoutMs, TimeUnit.MILLISECONDS);
            Config c = admin.describeConfigs(List.of(resource), new DescribeConfigsOptions().timeoutMs(timeoutMs))
                .all().get(timeoutMs, TimeUnit.MILLISECONDS).get(resource);
            StringBuilder line = new StringBuilder("group=" + group);
            for (String key : set.keySet()) {
                ConfigEntry e = c.get(key);
                String v = e == null ? null : e.value();
                if (!set.get(key).equals(v)) throw new IllegalStateException(key + " reads back as " + v);
                line.append(' ').append(key).append('=').append(v);
            }
            System.out.println(line);
        } catch (Exception e) {
            System.err.println("GroupConfig: " + e);
            System.exit(1);
        }
    }
}
