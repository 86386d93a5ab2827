// Kafka's Java consumer (kafka-clients from tools/kafka/pom.xml) as a group member, for
// tests/reference/test_java_consumer_groups_on_floodmark.py. Arguments: bootstrap, group id,
// topic, group.protocol (classic or consumer), client id. Polls until SIGTERM (then closes:
// commits nothing more, leaves the group). Prints one line per event, flushed:
//   ASSIGNED <ms> p,p,...   REVOKED <ms> p,p,...   LOST <ms> p,p,...   (ms: the wall clock at
//                                  the callback, comparable between members on one machine)
//   REC <partition> <offset>       every record, before the commit that covers it
//   COMMITTED <partition>:<offset>,...   after each synchronous commit (the next offsets)
//   ERROR <exception>              a commit or poll that failed (the member goes on)

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class GroupConsumer {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String names(Collection<TopicPartition> partitions) {
        return partitions.stream().map(tp -> Integer.toString(tp.partition())).sorted()
            .collect(Collectors.joining(","));
    }

    public static void main(String[] args) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args[3]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[4]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 100);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                main.join(30_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                say("REVOKED " + System.currentTimeMillis() + " " + names(partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                say("ASSIGNED " + System.currentTimeMillis() + " " + names(partitions));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                say("LOST " + System.currentTimeMillis() + " " + names(partitions));
            }
        });
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    say("REC " + r.partition() + " " + r.offset());
                    next.put(new TopicPartition(r.topic(), r.partition()),
                             new OffsetAndMetadata(r.offset() + 1));
                }
                try {
                    consumer.commitSync(next);
                    say("COMMITTED " + next.entrySet().stream()
                        .map(e -> e.getKey().partition() + ":" + e.getValue().offset())
                        .sorted().collect(Collectors.joining(",")));
                } catch (WakeupException e) {
                    throw e;
                } catch (RuntimeException e) {
                    say("ERROR " + e);
                }
            }
        } catch (WakeupException e) {
            say("CLOSING");
        } finally {
            consumer.close(Duration.ofSeconds(20));
            say("CLOSED");
        }
    }
}
