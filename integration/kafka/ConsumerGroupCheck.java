// Smoke test of the KIP-848 consumer group protocol against the test cluster.
//
//   java -cp "<libs>/*" ConsumerGroupCheck.java [options] HOST:PORT[,...]
//
// Creates a topic (if missing), produces one record per partition, subscribes a
// KafkaConsumer with group.protocol=consumer (KIP-848), polls until partitions
// are assigned and all records are read, commits, and prints the group type and
// state as the broker describes it.
// Options: --topic T (default rx-it-smoke) --partitions P (3) --rf R (1)
//          --group G (random) --protocol consumer|classic (consumer)
//          --timeout-ms MS (30000) --user U --password P (SASL_PLAINTEXT SCRAM-SHA-512)
// Exit: 0 ok, 1 failure, 2 usage.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;

public class ConsumerGroupCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = null, topic = "rx-it-smoke", group = "rx-it-smoke-" + UUID.randomUUID(), protocol = "consumer";
        String user = null, password = null;
        int partitions = 3, rf = 1;
        long timeoutMs = 30000;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--topic": topic = args[++i]; break;
                    case "--partitions": partitions = Integer.parseInt(args[++i]); break;
                    case "--rf": rf = Integer.parseInt(args[++i]); break;
                    case "--group": group = args[++i]; break;
                    case "--protocol": protocol = args[++i]; break;
                    case "--timeout-ms": timeoutMs = Long.parseLong(args[++i]); break;
                    case "--user": user = args[++i]; break;
                    case "--password": password = args[++i]; break;
                    default:
                        if (args[i].startsWith("--") || bootstrap != null) throw new IllegalArgumentException(args[i]);
                        bootstrap = args[i];
                }
            }
            if (bootstrap == null) throw new IllegalArgumentException("missing HOST:PORT");
        } catch (RuntimeException e) {
            System.err.println("usage: ConsumerGroupCheck [--topic T] [--partitions P] [--rf R] [--group G]"
                + " [--protocol consumer|classic] [--timeout-ms MS] [--user U --password P] HOST:PORT  (" + e.getMessage() + ")");
            System.exit(2);
        }
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        if (user != null) {
            common.put("security.protocol", "SASL_PLAINTEXT");
            common.put("sasl.mechanism", "SCRAM-SHA-512");
            common.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        }
        long t0 = System.nanoTime();
        try (Admin admin = Admin.create(common)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) rf))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
            Properties pp = new Properties();
            pp.putAll(common);
            pp.put("acks", "all");
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int p = 0; p < partitions; p++) producer.send(new ProducerRecord<>(topic, p, "k" + p, "v" + p)).get();
            }
            Properties cp = new Properties();
            cp.putAll(common);
            cp.put("group.id", group);
            cp.put("group.protocol", protocol);
            cp.put("auto.offset.reset", "earliest");
            cp.put("enable.auto.commit", "false");
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
                long tSub = System.nanoTime(), tAssigned = -1;
                int records = 0;
                while (System.nanoTime() < deadline && (tAssigned < 0 || records < partitions)) {
                    ConsumerRecords<String, String> rs = consumer.poll(Duration.ofMillis(200));
                    records += rs.count();
                    if (tAssigned < 0 && !consumer.assignment().isEmpty()) tAssigned = System.nanoTime();
                }
                if (tAssigned < 0 || records < partitions) {
                    System.err.println("ConsumerGroupCheck: FAILED: assignment=" + consumer.assignment() + " records=" + records
                        + " after " + timeoutMs + " ms");
                    System.exit(1);
                }
                consumer.commitSync();
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                System.out.printf("ok group=%s protocol=%s type=%s state=%s members=%d assignment=%s records=%d"
                        + " assigned_after_ms=%d total_ms=%d%n",
                    group, protocol, d.type(), d.groupState(), d.members().size(), consumer.assignment(), records,
                    (tAssigned - tSub) / 1_000_000, (System.nanoTime() - t0) / 1_000_000);
            }
        }
    }
}
