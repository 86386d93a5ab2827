// A transactional producer of Kafka's own Java client, for tests/reference/test_java_transactions_on_floodmark.py.
// Args: bootstrap topic transactional.id group rounds partitions [unflushed-aborts].
// Each round: a transaction that writes "commit-<i>" to partition 0 and "side-<i>" to each other
// partition and commits offset i+1 of the group (sendOffsetsToTransaction), then a transaction
// that writes "abort-<i>" to every partition and aborts (with "unflushed-aborts": aborts at once,
// without flushing, so its EndTxn follows the commit's straight away while the commit's markers
// may still be written, as librdkafka's 0098 test 2 does). Prints, one line each:
//   TV2 <true|false>        whether the client negotiated transaction version 2 (its
//                           TransactionManager, read by reflection: no public API says it)
//   EPOCH <id> <epoch>      the producer id and epoch the client holds after each transaction
//   COMMITTED <i> / ABORTED <i>
//   ELAPSED_MS <ms>         the rounds' wall time (initTransactions excluded)
//   DONE
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    private static Object transactionManager(KafkaProducer<?, ?> producer) throws Exception {
        Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        return f.get(producer);
    }

    private static void printEpoch(Object tm) throws Exception {
        Method m = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
        m.setAccessible(true);
        Object pe = m.invoke(tm);
        Field id = pe.getClass().getField("producerId");
        Field epoch = pe.getClass().getField("epoch");
        System.out.println("EPOCH " + id.get(pe) + " " + epoch.get(pe));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2], group = args[3];
        int rounds = Integer.parseInt(args[4]);
        int partitions = Integer.parseInt(args[5]);
        boolean flushAborts = args.length < 7 || !args[6].equals("unflushed-aborts");
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("acks", "all");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            Object tm = transactionManager(producer);
            producer.initTransactions();
            printEpoch(tm);
            long started = System.nanoTime();
            for (int i = 0; i < rounds; i++) {
                producer.beginTransaction();
                if (i == 0) {
                    Method v2 = tm.getClass().getMethod("isTransactionV2Enabled");
                    System.out.println("TV2 " + v2.invoke(tm));
                }
                producer.send(new ProducerRecord<>(topic, 0, "k", "commit-" + i));
                for (int p2 = 1; p2 < partitions; p2++) {
                    producer.send(new ProducerRecord<>(topic, p2, "k", "side-" + i));
                }
                producer.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(i + 1)),
                    new ConsumerGroupMetadata(group));
                producer.commitTransaction();
                System.out.println("COMMITTED " + i);
                printEpoch(tm);
                producer.beginTransaction();
                for (int p2 = 0; p2 < partitions; p2++) {
                    producer.send(new ProducerRecord<>(topic, p2, "k", "abort-" + i));
                }
                if (flushAborts) {
                    producer.flush();
                }
                producer.abortTransaction();
                System.out.println("ABORTED " + i);
                printEpoch(tm);
            }
            System.out.println("ELAPSED_MS " + (System.nanoTime() - started) / 1_000_000);
        }
        System.out.println("DONE");
    }
}
