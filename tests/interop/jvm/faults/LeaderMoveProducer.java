import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produces values 0000, 0001, ... to partition 0 of a topic with the Java client's
 * default producer (idempotent, acks=all), a little at a time so that the test can move
 * the partition's leader while it runs; prints {"acked": n, "failed": n} when done.
 *
 * java LeaderMoveProducer -bootstrap HOST:PORT -topic NAME -messages N
 */
public class LeaderMoveProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        int messages = 0;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "-bootstrap" -> bootstrap = args[i + 1];
                case "-topic" -> topic = args[i + 1];
                case "-messages" -> messages = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Properties settings = new Properties();
        settings.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ProducerConfig.CLIENT_ID_CONFIG, "java-leader-move");
        settings.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 20);
        settings.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000);
        int acked = 0;
        int failed = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(settings, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < messages; i++) {
                byte[] value = String.format("%04d", i).getBytes(StandardCharsets.UTF_8);
                sent.add(producer.send(new ProducerRecord<>(topic, 0, null, value)));
                Thread.sleep(2);
            }
            for (Future<RecordMetadata> future : sent) {
                try {
                    future.get();
                    acked++;
                } catch (Exception error) {
                    failed++;
                }
            }
        }
        System.out.println("{\"acked\": " + acked + ", \"failed\": " + failed + "}");
    }
}
