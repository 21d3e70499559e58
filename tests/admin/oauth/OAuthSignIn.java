// Kafka's Java client signing in with SASL/OAUTHBEARER, its token made by the unsecured
// login callback handler (OAuthBearerLoginModule with unsecuredLoginStringClaim_sub):
//   OAuthSignIn BOOTSTRAP TOPIC SCOPE
// creates TOPIC, produces one record and reads it back; prints one JSON line: the value
// read, or the class and message of the error that stopped it.
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class OAuthSignIn {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1], scope = args[2];
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        common.put("security.protocol", "SASL_PLAINTEXT");
        common.put("sasl.mechanism", "OAUTHBEARER");
        common.put("sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                        + "unsecuredLoginStringClaim_sub=\"alice\" "
                        + "unsecuredLoginStringClaim_scope=\"" + scope + "\";");
        common.put("request.timeout.ms", "15000");
        common.put("default.api.timeout.ms", "20000");
        Map<String, Object> report = new LinkedHashMap<>();
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            Properties producing = new Properties();
            producing.putAll(common);
            producing.put("key.serializer", StringSerializer.class.getName());
            producing.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producing)) {
                producer.send(new ProducerRecord<>(topic, 0, null, "signed-in")).get();
            }
            Properties consuming = new Properties();
            consuming.putAll(common);
            consuming.put("key.deserializer", StringDeserializer.class.getName());
            consuming.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consuming)) {
                TopicPartition partition = new TopicPartition(topic, 0);
                consumer.assign(List.of(partition));
                consumer.seekToBeginning(List.of(partition));
                long deadline = System.currentTimeMillis() + 20_000;
                while (!report.containsKey("value") && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                        report.put("value", record.value());
                    }
                }
            }
        } catch (Exception error) {
            Throwable cause = error.getCause() != null ? error.getCause() : error;
            report.put("error", cause.getClass().getName());
            report.put("message", String.valueOf(cause.getMessage()));
            if (System.getenv("OAUTH_DEBUG") != null) {
                System.err.println(Json.describe(error, "OAuthSignIn"));
            }
        }
        Json.emit(report);
    }
}
