// Kafka's Java share consumer (KafkaShareConsumer, kafka-clients 4.x) and its Admin's share
// group offset calls, driven line by line for tests/share/share_clients.py:
//
//   java -cp <classes>:<kafka-clients 4.x jars> ShareDriver -bootstrap HOST:PORT -group G -mode explicit|implicit
//
// Each command on stdin gets one JSON line on stdout:
//   subscribe TOPIC             {"ok":true}
//   poll MILLIS                 {"records":[[partition, offset, value, deliveryCount or null], ...]}
//   ack PARTITION OFFSET TYPE   {"ok":true}            (TYPE: accept, release or reject)
//   commit                      {"errors":{"partition":"message", ...}}
//   alter-offsets TOPIC P=O...  {"ok":true}            (Admin.alterShareGroupOffsets)
//   delete-offsets TOPIC        {"ok":true}            (Admin.deleteShareGroupOffsets)
//   list-offsets TOPIC P...     {"offsets":{"partition":startOffset or null, ...}}
//   close                       {"ok":true}, then exits
// A failed command answers {"error":"..."} and the driver goes on reading.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class ShareDriver {
    private final String bootstrap;
    private final String group;
    private final String mode;
    private KafkaShareConsumer<String, String> consumer;
    private Admin admin;
    private String topic;
    // The last poll's records by "partition:offset": what `ack` acknowledges.
    private final Map<String, ConsumerRecord<String, String>> polled = new LinkedHashMap<>();

    private ShareDriver(String bootstrap, String group, String mode) {
        this.bootstrap = bootstrap;
        this.group = group;
        this.mode = mode;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> flags = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            flags.put(args[i].replaceFirst("^-+", ""), args[i + 1]);
        }
        ShareDriver driver = new ShareDriver(
                flags.get("bootstrap"), flags.get("group"), flags.getOrDefault("mode", "implicit"));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.strip().split(" ");
            if (words[0].isEmpty()) {
                continue;
            }
            Map<String, Object> answer;
            try {
                answer = driver.run(words);
            } catch (Exception e) {
                answer = new LinkedHashMap<>();
                answer.put("error", Json.describe(e, "ShareDriver"));
            }
            Json.emit(answer);
            if (words[0].equals("close")) {
                break;
            }
        }
        driver.shutdown();
    }

    private Map<String, Object> run(String[] words) throws Exception {
        Map<String, Object> answer = new LinkedHashMap<>();
        switch (words[0]) {
            case "subscribe" -> {
                topic = words[1];
                consumer().subscribe(List.of(topic));
                answer.put("ok", true);
            }
            case "poll" -> {
                List<Object> records = new ArrayList<>();
                polled.clear();
                for (ConsumerRecord<String, String> record :
                        consumer().poll(Duration.ofMillis(Long.parseLong(words[1])))) {
                    Optional<Short> count = record.deliveryCount();
                    polled.put(record.partition() + ":" + record.offset(), record);
                    records.add(Arrays.asList(
                            record.partition(),
                            record.offset(),
                            String.valueOf(record.value()),
                            count.isPresent() ? count.get().intValue() : null));
                }
                answer.put("records", records);
            }
            case "ack" -> {
                ConsumerRecord<String, String> record = polled.get(words[1] + ":" + words[2]);
                if (record == null) {
                    throw new IllegalArgumentException(words[1] + ":" + words[2] + " was not in the last poll");
                }
                consumer().acknowledge(record, AcknowledgeType.valueOf(words[3].toUpperCase()));
                answer.put("ok", true);
            }
            case "commit" -> {
                Map<String, Object> errors = new TreeMap<>();
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> result :
                        consumer().commitSync(Duration.ofSeconds(30)).entrySet()) {
                    result.getValue().ifPresent(
                            e -> errors.put(String.valueOf(result.getKey().partition()), e.toString()));
                }
                answer.put("errors", errors);
            }
            case "alter-offsets" -> {
                Map<TopicPartition, Long> offsets = new LinkedHashMap<>();
                for (int i = 2; i < words.length; i++) {
                    String[] pair = words[i].split("=");
                    offsets.put(new TopicPartition(words[1], Integer.parseInt(pair[0])),
                            Long.parseLong(pair[1]));
                }
                admin().alterShareGroupOffsets(group, offsets).all().get();
                answer.put("ok", true);
            }
            case "delete-offsets" -> {
                admin().deleteShareGroupOffsets(group, Set.of(words[1])).all().get();
                answer.put("ok", true);
            }
            case "list-offsets" -> {
                List<TopicPartition> partitions = new ArrayList<>();
                for (int i = 2; i < words.length; i++) {
                    partitions.add(new TopicPartition(words[1], Integer.parseInt(words[i])));
                }
                Map<TopicPartition, SharePartitionOffsetInfo> found = admin()
                        .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(partitions)))
                        .partitionsToOffsetInfo(group).get();
                Map<String, Object> offsets = new TreeMap<>();
                for (TopicPartition partition : partitions) {
                    SharePartitionOffsetInfo info = found.get(partition);
                    offsets.put(String.valueOf(partition.partition()), info == null ? null : info.startOffset());
                }
                answer.put("offsets", offsets);
            }
            case "close" -> {
                if (consumer != null) {
                    consumer.close(Duration.ofSeconds(30));
                    consumer = null;
                }
                answer.put("ok", true);
            }
            default -> throw new IllegalArgumentException("unknown command " + words[0]);
        }
        return answer;
    }

    private KafkaShareConsumer<String, String> consumer() {
        if (consumer == null) {
            Properties settings = new Properties();
            settings.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            settings.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            settings.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-share");
            settings.put("share.acknowledgement.mode", mode);
            // At most this many records acquired per poll, so that consumers share a partition.
            settings.put("share.acquire.mode", "record_limit");
            settings.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
            settings.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            settings.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            consumer = new KafkaShareConsumer<>(settings);
        }
        return consumer;
    }

    private Admin admin() {
        if (admin == null) {
            Properties settings = new Properties();
            settings.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            admin = Admin.create(settings);
        }
        return admin;
    }

    private void shutdown() {
        if (consumer != null) {
            consumer.close(Duration.ofSeconds(10));
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(10));
        }
    }
}
