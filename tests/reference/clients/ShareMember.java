// Kafka's Java share consumer (KafkaShareConsumer, kafka-clients from tools/kafka/pom.xml) as a
// share-group member, for tests/reference/test_java_share_consumer_on_floodmark.py. Arguments:
// bootstrap, group id, topic, client id, mode. Explicit acknowledgement: a record whose value
// starts with "release:" is RELEASEd at its first delivery and accepted at the next, every other
// record is accepted; the acknowledgements are committed after each poll. Mode "stall": after
// the first poll with records, acknowledge nothing and stop polling (its locks run out).
// Prints one line per event, flushed:
//   REC <offset> <delivery count> <value> <ACCEPT|RELEASE>   each record, before its commit
//   COMMITTED <offsets>            after each commitSync without a failed partition
//   STALLED                        the stalling member stopped polling
//   ERROR <exception>              a poll or commit that failed (the member goes on)
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareMember {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        props.put("share.acknowledgement.mode", "explicit");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        boolean stall = args.length > 4 && args[4].equals("stall");
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                main.join(30_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        consumer.subscribe(List.of(args[2]));
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    throw e;
                } catch (RuntimeException e) {
                    say("ERROR " + e);
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                StringBuilder offsets = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = new String(r.value(), StandardCharsets.UTF_8);
                    short count = r.deliveryCount().orElse((short) -1);
                    AcknowledgeType kind = value.startsWith("release:") && count == 1
                        ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
                    say("REC " + r.offset() + " " + count + " " + value + " "
                        + (stall ? "HELD" : kind.name()));
                    if (!stall) {
                        consumer.acknowledge(r, kind);
                    }
                    offsets.append(r.offset()).append(',');
                }
                if (stall) {
                    say("STALLED");
                    Thread.sleep(Long.MAX_VALUE);
                }
                try {
                    Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                    boolean failed = result.values().stream().anyMatch(Optional::isPresent);
                    say((failed ? "ERROR commit " + result : "COMMITTED " + offsets));
                } catch (WakeupException e) {
                    throw e;
                } catch (RuntimeException e) {
                    say("ERROR " + e);
                }
            }
        } catch (WakeupException | InterruptedException e) {
            say("CLOSING");
        } finally {
            consumer.close(Duration.ofSeconds(20));
            say("CLOSED");
        }
    }
}
