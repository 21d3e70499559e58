// Kafka's Java client against one broker: every scenario in one JVM run, in sequence.
//
// Usage: java -cp <this>:<kafka-clients jars> ClientScenarios BOOTSTRAP [NAME,NAME...]
// Prints to stdout, one JSON object a line: {"start": NAME} before each scenario, then
// {"scenario": NAME, "ok": bool, "error": text-or-null, "data": {...}, "seconds": n}.
// Compiles unchanged against kafka-clients 3.9 and 4.x (APIs both lines have).

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.errors.UnknownTopicIdException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ClientScenarios {
    static final int MIB = 1024 * 1024;
    // Bound on one client call or one wait inside a scenario; the scenario's own timeout
    // (below) is the outer bound.
    static final long WAIT_SECONDS = 30;
    static final Duration POLL = Duration.ofMillis(100);

    static String bootstrap;
    // Every JVM run names its topics and groups apart from any earlier run's.
    static final String RUN = Long.toString(System.currentTimeMillis(), 36);
    static final AtomicInteger NAMES = new AtomicInteger();

    @FunctionalInterface
    interface Body {
        void run(Map<String, Object> data) throws Exception;
    }

    record Scenario(String name, int timeoutSeconds, Body body) {}

    static List<Scenario> catalogue() {
        List<Scenario> all = new ArrayList<>();
        all.add(new Scenario("producer_default_idempotent", 60, ClientScenarios::producerDefaultIdempotent));
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            all.add(new Scenario("producer_codec_" + codec, 45, data -> producerCodec(codec, data)));
        }
        all.add(new Scenario("producer_headers", 45, ClientScenarios::producerHeaders));
        all.add(new Scenario("producer_keyed_partitioning", 45, ClientScenarios::producerKeyedPartitioning));
        all.add(new Scenario("producer_large_record", 60, ClientScenarios::producerLargeRecord));
        all.add(new Scenario("producer_transactional", 60, ClientScenarios::producerTransactional));
        all.add(new Scenario("producer_transactional_fencing", 90, ClientScenarios::producerTransactionalFencing));
        all.add(new Scenario("producer_transactional_consume_transform_produce", 90,
                ClientScenarios::producerTransactionalConsumeTransformProduce));
        all.add(new Scenario("consumer_range_group", 90, ClientScenarios::consumerRangeGroup));
        all.add(new Scenario("consumer_cooperative_sticky", 90, ClientScenarios::consumerCooperativeSticky));
        all.add(new Scenario("consumer_static_membership", 90, ClientScenarios::consumerStaticMembership));
        all.add(new Scenario("consumer_protocol_group", 90, ClientScenarios::consumerProtocolGroup));
        all.add(new Scenario("consumer_seek_position_offsets_for_times", 45, ClientScenarios::consumerSeek));
        all.add(new Scenario("consumer_commit_sync_async", 45, ClientScenarios::consumerCommits));
        all.add(new Scenario("consumer_pause_resume", 45, ClientScenarios::consumerPauseResume));
        all.add(new Scenario("admin_create_topics", 45, ClientScenarios::adminCreateTopics));
        all.add(new Scenario("admin_delete_topics", 45, ClientScenarios::adminDeleteTopics));
        all.add(new Scenario("admin_list_topics", 45, ClientScenarios::adminListTopics));
        all.add(new Scenario("admin_describe_topics", 45, ClientScenarios::adminDescribeTopics));
        all.add(new Scenario("admin_create_partitions", 45, ClientScenarios::adminCreatePartitions));
        all.add(new Scenario("admin_describe_configs", 45, ClientScenarios::adminDescribeConfigs));
        all.add(new Scenario("admin_incremental_alter_configs", 45, ClientScenarios::adminIncrementalAlterConfigs));
        all.add(new Scenario("admin_list_offsets", 45, ClientScenarios::adminListOffsets));
        all.add(new Scenario("admin_consumer_groups", 90, ClientScenarios::adminConsumerGroups));
        all.add(new Scenario("admin_consumer_group_offsets", 90, ClientScenarios::adminConsumerGroupOffsets));
        all.add(new Scenario("admin_describe_cluster", 45, ClientScenarios::adminDescribeCluster));
        all.add(new Scenario("admin_delete_records", 45, ClientScenarios::adminDeleteRecords));
        return all;
    }

    public static void main(String[] args) {
        bootstrap = args[0];
        Set<String> only = args.length > 1 ? new HashSet<>(Arrays.asList(args[1].split(","))) : null;
        for (Scenario scenario : catalogue()) {
            if (only != null && !only.contains(scenario.name())) {
                continue;
            }
            Json.emit(Map.of("start", scenario.name()));
            Json.emit(runOne(scenario));
        }
        System.out.flush();
        // Clients a timed-out scenario left behind must not keep the JVM alive.
        System.exit(0);
    }

    static Map<String, Object> runOne(Scenario scenario) {
        Map<String, Object> data = Collections.synchronizedMap(new LinkedHashMap<>());
        AtomicReference<Thread> worker = new AtomicReference<>();
        ExecutorService executor = Executors.newSingleThreadExecutor(runnable -> {
            Thread thread = new Thread(runnable, "scenario-" + scenario.name());
            thread.setDaemon(true);
            worker.set(thread);
            return thread;
        });
        long started = System.nanoTime();
        String error = null;
        Future<?> running = executor.submit(() -> {
            scenario.body().run(data);
            return null;
        });
        try {
            running.get(scenario.timeoutSeconds(), TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            error = "scenario timed out after " + scenario.timeoutSeconds() + " s; it was at:\n"
                    + threadStack(worker.get());
            running.cancel(true);
        } catch (ExecutionException e) {
            error = Json.describe(e.getCause(), "ClientScenarios");
        } catch (InterruptedException e) {
            error = "interrupted";
            Thread.currentThread().interrupt();
        }
        executor.shutdownNow();
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("scenario", scenario.name());
        result.put("ok", error == null);
        result.put("error", error);
        synchronized (data) {
            result.put("data", new LinkedHashMap<>(data));
        }
        result.put("seconds", (System.nanoTime() - started) / 1e9);
        return result;
    }

    static String threadStack(Thread thread) {
        if (thread == null) {
            return "(no thread)";
        }
        StringBuilder text = new StringBuilder();
        StackTraceElement[] frames = thread.getStackTrace();
        for (int i = 0; i < Math.min(frames.length, 25); i++) {
            text.append("  at ").append(frames[i]).append('\n');
        }
        return text.toString().strip();
    }

    // --- checks ---

    static void check(boolean condition, String message, Object... args) {
        if (!condition) {
            throw new AssertionError(String.format(message, args));
        }
    }

    static void checkEquals(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    // KafkaFuture is a Future too: its get() throws the client's exception as the cause.
    static <T> T await(Future<T> future) throws Exception {
        return future.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    /** The failure `future` must end with; anything else (or success) fails the check. */
    static <E extends Throwable> E expectFailure(Class<E> type, Future<?> future, String what)
            throws Exception {
        try {
            future.get(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (type.isInstance(cause)) {
                return type.cast(cause);
            }
            throw new AssertionError(what + ": expected " + type.getSimpleName() + ", got " + cause, cause);
        }
        throw new AssertionError(what + ": expected " + type.getSimpleName() + ", but it succeeded");
    }

    /** Wait (never longer than WAIT_SECONDS) for `condition`, calling `step` between tries. */
    static void until(BooleanSupplier condition, Runnable step, String what, Supplier<String> state) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what + " did not happen within " + WAIT_SECONDS + " s; " + state.get());
            }
            step.run();
        }
    }

    // --- clients ---

    static String name(String base) {
        return "java-" + base + "-" + RUN + "-" + NAMES.incrementAndGet();
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] value) {
        return value == null ? null : new String(value, StandardCharsets.UTF_8);
    }

    static String hex(byte[] value) {
        if (value == null) {
            return null;
        }
        StringBuilder out = new StringBuilder();
        for (byte b : value) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }

    static String sha256(byte[] value) throws Exception {
        return hex(MessageDigest.getInstance("SHA-256").digest(value));
    }

    /** The client.id a client named `clientId` in this run sends. */
    static String runClientId(String clientId) {
        return clientId + "-" + RUN;
    }

    static Properties common(String clientId) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", runClientId(clientId));
        props.put("request.timeout.ms", "15000");
        props.put("retry.backoff.ms", "50");
        return props;
    }

    static KafkaProducer<byte[], byte[]> producer(String clientId, Map<String, Object> overrides) {
        Properties props = common(clientId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        props.putAll(overrides);
        return new KafkaProducer<>(props);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String clientId, String group, Map<String, Object> overrides) {
        Properties props = common(clientId);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        // close() waits for the fetch in flight, which the broker holds this long when empty.
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        if (group != null && "consumer".equals(overrides.get("group.protocol"))) {
            // Kafka 4's protocol: the broker sets the session and heartbeat interval.
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        } else if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            // Short, but with room for a loaded machine: rebalances here are driven by
            // joins and leaves, never by waiting for a session to run out.
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "200");
            props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        }
        props.putAll(overrides);
        return new KafkaConsumer<>(props);
    }

    static Admin admin() {
        Properties props = common("admin");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return Admin.create(props);
    }

    static Uuid createTopic(Admin admin, String topic, int partitions, Map<String, String> configs)
            throws Exception {
        CreateTopicsResult created = admin.createTopics(
                List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)));
        await(created.all());
        return await(created.topicId(topic));
    }

    static List<ConsumerRecord<byte[], byte[]>> pollFor(KafkaConsumer<byte[], byte[]> consumer, int count, String what) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        until(() -> got.size() >= count,
                () -> consumer.poll(POLL).forEach(got::add),
                what + ": " + count + " records", () -> "got " + got.size());
        return got;
    }

    static void produceValues(String topic, int partition, int count, String prefix) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = producer("filler", Map.of())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, partition, null, bytes(prefix + i))));
            }
            for (Future<RecordMetadata> future : sent) {
                await(future);
            }
        }
    }

    static int nodeId(Admin admin) throws Exception {
        Collection<Node> nodes = await(admin.describeCluster().nodes());
        checkEquals(1, nodes.size(), "nodes in the cluster");
        return nodes.iterator().next().id();
    }

    static Set<String> topicNames(Admin admin) throws Exception {
        return await(admin.listTopics().names());
    }

    // --- producer ---

    static void producerDefaultIdempotent(Map<String, Object> data) throws Exception {
        String topic = name("idempotent");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
        }
        data.put("topic", topic);
        int count = 1000;
        // Default settings: since 3.0 that is enable.idempotence=true with acks=all.
        try (KafkaProducer<byte[], byte[]> producer = producer("idempotent", Map.of())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, bytes("key-" + i), bytes("value-" + i))));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata metadata = await(sent.get(i));
                checkEquals((long) i, metadata.offset(), "offset acknowledged for record " + i);
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("idempotent-reader", null, Map.of())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> got = pollFor(consumer, count, "read back");
            checkEquals(count, got.size(), "records read back");
            for (int i = 0; i < count; i++) {
                ConsumerRecord<byte[], byte[]> record = got.get(i);
                checkEquals((long) i, record.offset(), "offset of record " + i);
                checkEquals("value-" + i, text(record.value()), "value at offset " + i);
                checkEquals("key-" + i, text(record.key()), "key at offset " + i);
            }
        }
        data.put("count", count);
    }

    static void producerCodec(String codec, Map<String, Object> data) throws Exception {
        String topic = name("codec-" + codec);
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
        }
        data.put("topic", topic);
        int count = 200;
        List<String> values = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer("codec-" + codec,
                Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, "20"))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                // Repetitive values, so every codec really compresses.
                String value = codec + "-" + i + "-" + "abcdefgh".repeat(20);
                values.add(value);
                sent.add(producer.send(new ProducerRecord<>(topic, 0, bytes("k" + i), bytes(value))));
            }
            for (Future<RecordMetadata> future : sent) {
                await(future);
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("codec-reader", null, Map.of())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> got = pollFor(consumer, count, codec + " records");
            checkEquals(count, got.size(), "records read back");
            for (int i = 0; i < count; i++) {
                checkEquals((long) i, got.get(i).offset(), "offset of record " + i);
                checkEquals(values.get(i), text(got.get(i).value()), "value at offset " + i);
                checkEquals("k" + i, text(got.get(i).key()), "key at offset " + i);
            }
        }
        data.put("codec", codec);
        data.put("values", values);
    }

    static RecordHeader header(String key, String value) {
        return new RecordHeader(key, value == null ? null : bytes(value));
    }

    static List<List<String>> render(Iterable<Header> headers) {
        List<List<String>> out = new ArrayList<>();
        for (Header header : headers) {
            out.add(Arrays.asList(hex(bytes(header.key())), hex(header.value())));
        }
        return out;
    }

    static void producerHeaders(Map<String, Object> data) throws Exception {
        String topic = name("headers");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
        }
        byte[] everyByte = new byte[256];
        for (int i = 0; i < 256; i++) {
            everyByte[i] = (byte) i;
        }
        List<List<Header>> sets = List.of(
                List.of(),
                List.of(header("trace-id", "abc-123")),
                // Repeated keys keep their order.
                List.of(header("dup", "1"), header("dup", "2"), header("dup", "3")),
                List.of(header("null-value", null), new RecordHeader("empty", new byte[0])),
                List.of(new RecordHeader("binary", everyByte), header("ключ", "значение")));
        List<Object> expected = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer("headers", Map.of())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < sets.size(); i++) {
                // The last record is a tombstone: null value, headers still carried.
                byte[] value = i == sets.size() - 1 ? null : bytes("v" + i);
                sent.add(producer.send(new ProducerRecord<>(topic, 0, bytes("k" + i), value, sets.get(i))));
                expected.add(render(sets.get(i)));
            }
            for (Future<RecordMetadata> future : sent) {
                await(future);
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("headers-reader", null, Map.of())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> got = pollFor(consumer, sets.size(), "records with headers");
            for (int i = 0; i < sets.size(); i++) {
                checkEquals(expected.get(i), render(got.get(i).headers()), "headers of record " + i);
            }
            checkEquals(null, got.get(sets.size() - 1).value(), "value of the tombstone");
        }
        data.put("topic", topic);
        data.put("headers", expected);
    }

    static void producerKeyedPartitioning(Map<String, Object> data) throws Exception {
        String topic = name("keyed");
        int partitions = 12;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, Map.of());
        }
        List<byte[]> keys = new ArrayList<>();
        for (int i = 0; i < 150; i++) {
            keys.add(bytes("user-" + i));
        }
        // Binary keys of every length mod 4, with bytes >= 0x80 (signed in Java).
        for (int i = 0; i < 50; i++) {
            byte[] key = new byte[1 + i % 9];
            for (int j = 0; j < key.length; j++) {
                key[j] = (byte) (i * 37 + j * 101 + 7);
            }
            keys.add(key);
        }
        Set<String> distinct = new HashSet<>();
        keys.forEach(key -> distinct.add(hex(key)));
        checkEquals(200, distinct.size(), "distinct keys");
        Map<String, Integer> placed = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = producer("keyed", Map.of())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (byte[] key : keys) {
                sent.add(producer.send(new ProducerRecord<>(topic, key, bytes("value"))));
            }
            for (int i = 0; i < keys.size(); i++) {
                placed.put(hex(keys.get(i)), await(sent.get(i)).partition());
            }
        }
        Set<Integer> used = new TreeSet<>(placed.values());
        check(used.size() == partitions, "200 keys used only partitions %s of %d", used, partitions);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("keyed-reader", null, Map.of())) {
            List<TopicPartition> all = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                all.add(new TopicPartition(topic, p));
            }
            consumer.assign(all);
            consumer.seekToBeginning(all);
            for (ConsumerRecord<byte[], byte[]> record : pollFor(consumer, keys.size(), "keyed records")) {
                checkEquals(placed.get(hex(record.key())), record.partition(), "partition of key " + hex(record.key()));
            }
        }
        List<Object> pairs = new ArrayList<>();
        placed.forEach((key, partition) -> pairs.add(List.of(key, partition)));
        data.put("topic", topic);
        data.put("partitions", partitions);
        data.put("keys", pairs);
    }

    static void producerLargeRecord(Map<String, Object> data) throws Exception {
        String large = name("large");
        String regular = name("regular-limit");
        try (Admin admin = admin()) {
            createTopic(admin, large, 1, Map.of("max.message.bytes", String.valueOf(2 * MIB)));
            createTopic(admin, regular, 1, Map.of());
        }
        byte[] value = new byte[MIB];
        new Random(20240611L).nextBytes(value);
        try (KafkaProducer<byte[], byte[]> producer = producer("large",
                Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, String.valueOf(4 * MIB)))) {
            RecordMetadata metadata = await(producer.send(new ProducerRecord<>(large, 0, bytes("big"), value)));
            checkEquals(0L, metadata.offset(), "offset of the 1 MiB record");
            checkEquals(MIB, metadata.serializedValueSize(), "serialized value size");
            // The same record is over a default topic's max.message.bytes (1,048,588).
            expectFailure(RecordTooLargeException.class,
                    producer.send(new ProducerRecord<>(regular, 0, bytes("big"), value)),
                    "1 MiB record to a topic with the default max.message.bytes");
        }
        Map<String, Object> limits = Map.of(
                ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(4 * MIB),
                ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(4 * MIB));
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("large-reader", null, limits)) {
            TopicPartition tp = new TopicPartition(large, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            ConsumerRecord<byte[], byte[]> record = pollFor(consumer, 1, "the 1 MiB record").get(0);
            check(Arrays.equals(value, record.value()), "the 1 MiB value came back different (%d bytes)",
                    record.value() == null ? -1 : record.value().length);
        }
        data.put("topic", large);
        data.put("size", value.length);
        data.put("sha256", sha256(value));
    }

    // --- transactions ---

    static Map<String, Object> transactional(String transactionalId) {
        return Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000",
                ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    }

    static List<TopicPartition> partitionsOf(String topic, int count) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    /** [offset, value] lists by partition, the form the scenarios report records in. */
    static Map<Integer, List<List<Object>>> byPartition(List<ConsumerRecord<byte[], byte[]>> records) {
        Map<Integer, List<List<Object>>> out = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            out.computeIfAbsent(record.partition(), p -> new ArrayList<>())
                    .add(List.of(record.offset(), text(record.value())));
        }
        return out;
    }

    /** Two by-partition record lists as one, each partition's in offset order. */
    static Map<Integer, List<List<Object>>> merged(Map<Integer, List<List<Object>>> a, Map<Integer, List<List<Object>>> b) {
        Map<Integer, List<List<Object>>> out = new TreeMap<>();
        for (Map<Integer, List<List<Object>>> side : List.of(a, b)) {
            side.forEach((p, records) -> out.computeIfAbsent(p, k -> new ArrayList<>()).addAll(records));
        }
        out.values().forEach(records -> records.sort((x, y) -> Long.compare((Long) x.get(0), (Long) y.get(0))));
        return out;
    }

    static List<Object> offsets(Map<Integer, List<List<Object>>> records, int partition) {
        List<Object> out = new ArrayList<>();
        records.getOrDefault(partition, List.of()).forEach(record -> out.add(record.get(0)));
        return out;
    }

    static List<Object> offsetRange(long first, int count) {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(first + i);
        }
        return out;
    }

    /**
     * `count` records "PREFIX-P-I" to each partition in the producer's open transaction,
     * flushed and acknowledged: partition -> [offset, value] of each.
     */
    static Map<Integer, List<List<Object>>> sendToEach(KafkaProducer<byte[], byte[]> producer, String topic,
            int partitions, String prefix, int count) throws Exception {
        Map<Integer, List<Future<RecordMetadata>>> sent = new TreeMap<>();
        Map<Integer, List<String>> values = new TreeMap<>();
        for (int i = 0; i < count; i++) {
            for (int p = 0; p < partitions; p++) {
                String value = prefix + "-" + p + "-" + i;
                values.computeIfAbsent(p, k -> new ArrayList<>()).add(value);
                sent.computeIfAbsent(p, k -> new ArrayList<>())
                        .add(producer.send(new ProducerRecord<>(topic, p, null, bytes(value))));
            }
        }
        producer.flush();
        Map<Integer, List<List<Object>>> out = new TreeMap<>();
        for (int p = 0; p < partitions; p++) {
            List<List<Object>> acknowledged = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                RecordMetadata metadata = await(sent.get(p).get(i));
                checkEquals(p, metadata.partition(), "partition acknowledged for " + values.get(p).get(i));
                acknowledged.add(List.of(metadata.offset(), values.get(p).get(i)));
            }
            out.put(p, acknowledged);
        }
        return out;
    }

    /**
     * The end offsets of `partitions` once no transaction is open in them: a real Kafka
     * writes the markers of a transaction after commitTransaction/abortTransaction
     * returns, and until then the last stable offset (the read_committed end) is behind
     * the log end offset.
     */
    static Map<TopicPartition, Long> settledEnds(List<TopicPartition> partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        partitions.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
        Map<TopicPartition, Long> stable = new HashMap<>();
        Map<TopicPartition, Long> end = new HashMap<>();
        try (Admin admin = admin()) {
            until(() -> {
                try {
                    stable.clear();
                    end.clear();
                    await(admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all())
                            .forEach((tp, info) -> stable.put(tp, info.offset()));
                    await(admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all())
                            .forEach((tp, info) -> end.put(tp, info.offset()));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                return stable.equals(end);
            }, () -> sleep(50), "last stable offsets reaching the log end offsets",
                    () -> "read_committed ends " + stable + ", read_uncommitted ends " + end);
        }
        return end;
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RuntimeException(e);
        }
    }

    /** Every record of `partitions` from the beginning up to `ends`, read with `isolation`. */
    static Map<Integer, List<List<Object>>> readAll(String isolation, List<TopicPartition> partitions,
            Map<TopicPartition, Long> ends) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(isolation + "-reader", null,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            checkEquals(ends, new HashMap<>(consumer.endOffsets(partitions)), isolation + " consumer's end offsets");
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            until(() -> partitions.stream().allMatch(tp -> consumer.position(tp) >= ends.get(tp)),
                    () -> consumer.poll(POLL).forEach(got::add),
                    isolation + " read up to " + ends, () -> "got " + byPartition(got));
            return byPartition(got);
        }
    }

    @FunctionalInterface
    interface Call {
        void run() throws Exception;
    }

    /** The exception `call` throws; its success fails the check. */
    static Exception thrown(Call call, String what) {
        try {
            call.run();
        } catch (Exception e) {
            return e;
        }
        throw new AssertionError(what + ": expected an exception, but it succeeded");
    }

    /** The exception `future` fails with; its success fails the check. */
    static Throwable failureOf(Future<?> future, String what) throws Exception {
        try {
            future.get(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError(what + ": expected a failure, but it succeeded");
    }

    static String chain(Throwable error) {
        List<String> names = new ArrayList<>();
        for (Throwable t = error; t != null && names.size() < 4; t = t.getCause()) {
            names.add(t.getClass().getSimpleName());
        }
        return String.join(" <- ", names);
    }

    static void producerTransactional(Map<String, Object> data) throws Exception {
        String topic = name("transactional");
        int partitions = 2;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, Map.of());
        }
        List<TopicPartition> tps = partitionsOf(topic, partitions);
        Map<Integer, List<List<Object>>> first;
        Map<Integer, List<List<Object>>> aborted;
        Map<Integer, List<List<Object>>> second;
        // One producer: a committed transaction, an aborted one, a committed one, each
        // writing to both partitions.
        try (KafkaProducer<byte[], byte[]> producer = producer("transactional", transactional(name("txn")))) {
            producer.initTransactions();
            producer.beginTransaction();
            first = sendToEach(producer, topic, partitions, "first", 5);
            producer.commitTransaction();
            producer.beginTransaction();
            aborted = sendToEach(producer, topic, partitions, "aborted", 2);
            producer.abortTransaction();
            producer.beginTransaction();
            second = sendToEach(producer, topic, partitions, "second", 3);
            producer.commitTransaction();
        }
        // Each transaction's records follow the marker that ended the one before: in each
        // partition "first" at 0-4 (commit marker 5), "aborted" at 6-7 (abort marker 8),
        // "second" at 9-11 (commit marker 12).
        for (int p = 0; p < partitions; p++) {
            checkEquals(offsetRange(0, 5), offsets(first, p), "offsets of the first transaction in " + p);
            checkEquals(offsetRange(6, 2), offsets(aborted, p), "offsets of the aborted transaction in " + p);
            checkEquals(offsetRange(9, 3), offsets(second, p), "offsets of the second transaction in " + p);
        }
        Map<TopicPartition, Long> ends = settledEnds(tps);
        Map<TopicPartition, Long> expectedEnds = new HashMap<>();
        tps.forEach(tp -> expectedEnds.put(tp, 13L));
        checkEquals(expectedEnds, ends, "end offsets (the last commit marker at 12)");
        Map<Integer, List<List<Object>>> committed = merged(first, second);
        checkEquals(committed, readAll("read_committed", tps, ends), "what a read_committed consumer reads");
        checkEquals(merged(committed, aborted), readAll("read_uncommitted", tps, ends),
                "what a read_uncommitted consumer reads");
        data.put("topic", topic);
        data.put("partitions", partitions);
        data.put("committed", committed);
        data.put("aborted", aborted);
        // Which transaction protocol the client chose is read from the broker's recording.
        data.put("producer_client_id", runClientId("transactional"));
    }

    static void producerTransactionalFencing(Map<String, Object> data) throws Exception {
        String topic = name("fencing");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
        }
        List<TopicPartition> tps = partitionsOf(topic, 1);
        List<String> everything = new ArrayList<>();
        List<String> committed = new ArrayList<>();
        // A zombie whose transactional.id a new instance takes over while its transaction
        // is open: the new instance's initTransactions() aborts that transaction, and the
        // zombie learns it is fenced when it tries to commit.
        String commitId = name("zombie-commit");
        try (KafkaProducer<byte[], byte[]> zombie = producer("zombie-commit", transactional(commitId))) {
            zombie.initTransactions();
            zombie.beginTransaction();
            await(zombie.send(new ProducerRecord<>(topic, 0, null, bytes("zombie-a"))));
            everything.add("zombie-a");
            try (KafkaProducer<byte[], byte[]> successor = producer("successor-commit", transactional(commitId))) {
                successor.initTransactions();
                Exception commit = thrown(zombie::commitTransaction, "the zombie's commitTransaction");
                data.put("zombie_commit", chain(commit));
                check(commit instanceof ProducerFencedException,
                        "the zombie's commitTransaction threw %s, not ProducerFencedException", chain(commit));
                // Fenced is fatal: the zombie cannot begin again.
                Exception again = thrown(zombie::beginTransaction, "the fenced zombie's beginTransaction");
                check(again instanceof ProducerFencedException,
                        "the fenced zombie's beginTransaction threw %s", chain(again));
                successor.beginTransaction();
                await(successor.send(new ProducerRecord<>(topic, 0, null, bytes("successor-a"))));
                successor.commitTransaction();
                everything.add("successor-a");
                committed.add("successor-a");
            }
        }
        // A zombie that sends into its open transaction after the new instance started:
        // the send fails, and so does the commit after it.
        String sendId = name("zombie-send");
        try (KafkaProducer<byte[], byte[]> zombie = producer("zombie-send", transactional(sendId))) {
            zombie.initTransactions();
            zombie.beginTransaction();
            await(zombie.send(new ProducerRecord<>(topic, 0, null, bytes("zombie-b"))));
            everything.add("zombie-b");
            try (KafkaProducer<byte[], byte[]> successor = producer("successor-send", transactional(sendId))) {
                successor.initTransactions();
                Throwable send = failureOf(zombie.send(new ProducerRecord<>(topic, 0, null, bytes("zombie-c"))),
                        "the zombie's send after it was fenced");
                data.put("zombie_send", chain(send));
                // What Apache Kafka 3.9 and 4.x answer, to both client lines: the stale
                // epoch's Produce is refused with INVALID_PRODUCER_EPOCH, an abortable
                // error the commit then reports.
                check(send instanceof InvalidProducerEpochException,
                        "the zombie's send failed with %s, not InvalidProducerEpochException", chain(send));
                Exception commit = thrown(zombie::commitTransaction, "the zombie's commitTransaction after the failed send");
                data.put("zombie_commit_after_send", chain(commit));
                check(commit instanceof InvalidProducerEpochException,
                        "the zombie's commitTransaction after the failed send threw %s", chain(commit));
                successor.beginTransaction();
                await(successor.send(new ProducerRecord<>(topic, 0, null, bytes("successor-b"))));
                successor.commitTransaction();
                everything.add("successor-b");
                committed.add("successor-b");
            }
        }
        Map<TopicPartition, Long> ends = settledEnds(tps);
        List<Object> readCommitted = new ArrayList<>();
        readAll("read_committed", tps, ends).getOrDefault(0, List.of()).forEach(r -> readCommitted.add(r.get(1)));
        checkEquals(committed, readCommitted, "what a read_committed consumer reads");
        List<Object> readUncommitted = new ArrayList<>();
        readAll("read_uncommitted", tps, ends).getOrDefault(0, List.of()).forEach(r -> readUncommitted.add(r.get(1)));
        checkEquals(everything, readUncommitted, "what a read_uncommitted consumer reads");
        data.put("topic", topic);
        data.put("committed", committed);
        data.put("everything", everything);
    }

    static String transformed(ConsumerRecord<byte[], byte[]> record) {
        return text(record.value()).toUpperCase(java.util.Locale.ROOT);
    }

    /** One transaction: the records, transformed, to `output` (same partition), and the consumer's next offsets. */
    static void transformInTransaction(KafkaProducer<byte[], byte[]> producer, KafkaConsumer<byte[], byte[]> consumer,
            List<ConsumerRecord<byte[], byte[]>> records, String output) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        producer.beginTransaction();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            sent.add(producer.send(new ProducerRecord<>(output, record.partition(), record.key(), bytes(transformed(record)))));
            next.put(new TopicPartition(record.topic(), record.partition()), new OffsetAndMetadata(record.offset() + 1));
        }
        producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
        producer.flush();
        for (Future<RecordMetadata> future : sent) {
            await(future);
        }
    }

    static void producerTransactionalConsumeTransformProduce(Map<String, Object> data) throws Exception {
        String input = name("ctp-input");
        String output = name("ctp-output");
        String group = name("ctp-group");
        int partitions = 2;
        int perPartition = 20;
        try (Admin admin = admin()) {
            createTopic(admin, input, partitions, Map.of());
            createTopic(admin, output, partitions, Map.of());
        }
        Map<TopicPartition, Long> inputEnds = new HashMap<>();
        Map<Integer, List<Object>> expected = new TreeMap<>();
        for (int p = 0; p < partitions; p++) {
            produceValues(input, p, perPartition, "in-" + p + "-");
            inputEnds.put(new TopicPartition(input, p), (long) perPartition);
            for (int i = 0; i < perPartition; i++) {
                expected.computeIfAbsent(p, k -> new ArrayList<>()).add("IN-" + p + "-" + i);
            }
        }
        List<String> abortedOutput = new ArrayList<>();
        AtomicInteger transactions = new AtomicInteger();
        Map<String, Object> settings = Map.of(
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("ctp-consumer", group, settings);
                KafkaProducer<byte[], byte[]> producer = producer("ctp-producer", transactional(name("ctp-txn")))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            // The first transaction is aborted: neither its output nor its offsets count.
            List<ConsumerRecord<byte[], byte[]>> firstPoll = new ArrayList<>();
            until(() -> !firstPoll.isEmpty(), () -> consumer.poll(POLL).forEach(firstPoll::add),
                    "the first input records", () -> "assignment " + consumer.assignment());
            checkEquals(partitions, consumer.assignment().size(), "partitions assigned to the only member");
            transformInTransaction(producer, consumer, firstPoll, output);
            producer.abortTransaction();
            firstPoll.forEach(record -> abortedOutput.add(transformed(record)));
            // As after any abort, go back to the group's committed offsets: there are none.
            Map<TopicPartition, OffsetAndMetadata> afterAbort = consumer.committed(consumer.assignment());
            check(afterAbort.values().stream().allMatch(Objects::isNull),
                    "offsets committed by the aborted transaction: %s", afterAbort);
            consumer.seekToBeginning(consumer.assignment());
            // Then one transaction a poll until every input record is processed.
            until(() -> inputEnds.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue()),
                    () -> {
                        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
                        consumer.poll(POLL).forEach(records::add);
                        if (records.isEmpty()) {
                            return;
                        }
                        try {
                            transformInTransaction(producer, consumer, records, output);
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                        producer.commitTransaction();
                        transactions.incrementAndGet();
                    },
                    "every input record processed", () -> "positions of " + consumer.assignment());
            check(transactions.get() >= 6, "40 records at most 7 a poll in %d transactions", transactions.get());
            // The committed offsets are the input's end offsets; with read_committed the
            // consumer asks for stable offsets (KIP-447).
            Map<TopicPartition, OffsetAndMetadata> committedOffsets = consumer.committed(inputEnds.keySet());
            Map<TopicPartition, Long> committedAt = new HashMap<>();
            committedOffsets.forEach((tp, offset) -> committedAt.put(tp, offset == null ? null : offset.offset()));
            checkEquals(inputEnds, committedAt, "offsets committed through the transactions");
        }
        List<TopicPartition> outputs = partitionsOf(output, partitions);
        Map<TopicPartition, Long> ends = settledEnds(outputs);
        Map<Integer, List<Object>> readCommitted = new TreeMap<>();
        readAll("read_committed", outputs, ends)
                .forEach((p, records) -> records.forEach(r -> readCommitted.computeIfAbsent(p, k -> new ArrayList<>()).add(r.get(1))));
        checkEquals(expected, readCommitted, "the output a read_committed consumer reads");
        List<Object> readUncommitted = new ArrayList<>();
        readAll("read_uncommitted", outputs, ends).values().forEach(records -> records.forEach(r -> readUncommitted.add(r.get(1))));
        checkEquals(partitions * perPartition + abortedOutput.size(), readUncommitted.size(),
                "records a read_uncommitted consumer reads (the aborted output too)");
        check(readUncommitted.containsAll(abortedOutput), "read_uncommitted misses aborted output %s", abortedOutput);
        data.put("input", input);
        data.put("output", output);
        data.put("group", group);
        data.put("partitions", partitions);
        data.put("per_partition", perPartition);
        data.put("expected", expected);
        data.put("aborted", abortedOutput);
        data.put("transactions", transactions.get());
        data.put("producer_client_id", runClientId("ctp-producer"));
    }

    // --- consumer groups ---

    /** One group member, polled from the scenario's thread; its listener records every callback. */
    static final class Member implements ConsumerRebalanceListener, AutoCloseable {
        final String id;
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<Set<TopicPartition>> revoked = new ArrayList<>();
        final List<Set<TopicPartition>> assigned = new ArrayList<>();
        final List<Set<TopicPartition>> lost = new ArrayList<>();
        final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        boolean closed;

        Member(String id, String group, String topic, Map<String, Object> overrides) {
            this.id = id;
            this.consumer = consumer("member-" + id, group, overrides);
            consumer.subscribe(List.of(topic), this);
        }

        void poll() {
            consumer.poll(POLL).forEach(records::add);
        }

        Set<TopicPartition> assignment() {
            return new HashSet<>(consumer.assignment());
        }

        int generation() {
            return consumer.groupMetadata().generationId();
        }

        void forgetEvents() {
            revoked.clear();
            assigned.clear();
            lost.clear();
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked.add(new HashSet<>(partitions));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned.add(new HashSet<>(partitions));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            lost.add(new HashSet<>(partitions));
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                consumer.close();
            }
        }

        @Override
        public String toString() {
            return id + "=" + sorted(consumer.assignment());
        }
    }

    static List<String> sorted(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        partitions.stream().sorted((a, b) -> Integer.compare(a.partition(), b.partition()))
                .forEach(tp -> out.add(String.valueOf(tp.partition())));
        return out;
    }

    static void pollAll(List<Member> members, BooleanSupplier settled, String what) {
        until(settled, () -> members.forEach(Member::poll), what, members::toString);
    }

    /** Every partition owned by exactly one member, each member within one of the others. */
    static boolean balanced(List<Member> members, int partitions) {
        Set<TopicPartition> union = new HashSet<>();
        int total = 0;
        int least = Integer.MAX_VALUE;
        int most = 0;
        for (Member member : members) {
            Set<TopicPartition> owned = member.assignment();
            union.addAll(owned);
            total += owned.size();
            least = Math.min(least, owned.size());
            most = Math.max(most, owned.size());
        }
        return union.size() == partitions && total == partitions && least >= 1 && most - least <= 1;
    }

    static void closeAll(List<Member> members) {
        for (Member member : members) {
            try {
                member.close();
            } catch (RuntimeException e) {
                // A close that fails must not hide the scenario's own outcome.
            }
        }
    }

    /** Kafka 4's consumer group protocol (group.protocol=consumer): the broker assigns. */
    static void consumerProtocolGroup(Map<String, Object> data) throws Exception {
        String topic = name("kip848");
        String group = name("kip848-group");
        int partitions = 6;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, Map.of());
        }
        Map<String, Object> protocol = Map.of("group.protocol", "consumer");
        List<Member> members = new ArrayList<>();
        try {
            for (String id : List.of("a", "b", "c")) {
                members.add(new Member(id, group, topic, protocol));
            }
            pollAll(members, () -> members.stream().allMatch(m -> m.assignment().size() == 2)
                    && balanced(members, partitions), "3 members with 2 partitions each");
            int perPartition = 100;
            try (KafkaProducer<byte[], byte[]> producer = producer("kip848-filler", Map.of())) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    for (int i = 0; i < perPartition; i++) {
                        sent.add(producer.send(new ProducerRecord<>(topic, p, null, bytes(p + ":" + i))));
                    }
                }
                for (Future<RecordMetadata> future : sent) {
                    await(future);
                }
            }
            int total = partitions * perPartition;
            pollAll(members, () -> members.stream().mapToInt(m -> m.records.size()).sum() >= total,
                    "all " + total + " records consumed");
            Set<String> seen = new HashSet<>();
            for (Member member : members) {
                for (ConsumerRecord<byte[], byte[]> record : member.records) {
                    check(seen.add(record.partition() + "@" + record.offset()),
                            "record %d@%d consumed twice", record.partition(), record.offset());
                }
            }
            checkEquals(total, seen.size(), "distinct records consumed");
            // Commits carry the member epoch; then a fourth member joins and the four share
            // the partitions, each moved only after its owner gave it up.
            for (Member member : members) {
                member.consumer.commitSync();
            }
            members.add(new Member("d", group, topic, protocol));
            pollAll(members, () -> balanced(members, partitions), "4 members sharing 6 partitions");
            Set<TopicPartition> all = new HashSet<>();
            members.forEach(m -> all.addAll(m.assignment()));
            Map<TopicPartition, OffsetAndMetadata> committed = members.get(0).consumer.committed(all);
            for (TopicPartition tp : all) {
                check(committed.get(tp) != null, "no committed offset for %s", tp);
                checkEquals((long) perPartition, committed.get(tp).offset(), "committed offset of " + tp);
            }
            try (Admin admin = admin()) {
                ConsumerGroupDescription described =
                        await(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
                checkEquals(GroupType.CONSUMER, described.type(), "group type");
                checkEquals(4, described.members().size(), "members described");
                Set<TopicPartition> describedPartitions = new HashSet<>();
                for (MemberDescription member : described.members()) {
                    describedPartitions.addAll(member.assignment().topicPartitions());
                }
                checkEquals(all, describedPartitions, "partitions described");
            }
            Map<String, Object> assignment = new TreeMap<>();
            members.forEach(m -> assignment.put(m.id, sorted(m.assignment())));
            data.put("assignment", assignment);
        } finally {
            closeAll(members);
        }
    }

    static void consumerRangeGroup(Map<String, Object> data) throws Exception {
        String topic = name("range");
        String group = name("range-group");
        int partitions = 6;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, Map.of());
        }
        Map<String, Object> range = Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
        List<Member> members = new ArrayList<>();
        try {
            for (String id : List.of("a", "b", "c")) {
                members.add(new Member(id, group, topic, range));
            }
            pollAll(members, () -> members.stream().allMatch(m -> m.assignment().size() == 2)
                    && balanced(members, partitions), "3 members with 2 partitions each");
            // The range assignor hands each member a run of consecutive partitions.
            for (Member member : members) {
                List<Integer> owned = new ArrayList<>();
                member.assignment().forEach(tp -> owned.add(tp.partition()));
                Collections.sort(owned);
                check(owned.get(0) % 2 == 0 && owned.get(1) == owned.get(0) + 1,
                        "range assignment of %s is not a run of 2: %s", member.id, owned);
            }
            int perPartition = 100;
            try (KafkaProducer<byte[], byte[]> producer = producer("range-filler", Map.of())) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    for (int i = 0; i < perPartition; i++) {
                        sent.add(producer.send(new ProducerRecord<>(topic, p, null, bytes(p + ":" + i))));
                    }
                }
                for (Future<RecordMetadata> future : sent) {
                    await(future);
                }
            }
            int total = partitions * perPartition;
            pollAll(members, () -> members.stream().mapToInt(m -> m.records.size()).sum() >= total,
                    "all " + total + " records consumed");
            Set<String> seen = new HashSet<>();
            for (Member member : members) {
                Set<TopicPartition> owned = member.assignment();
                for (ConsumerRecord<byte[], byte[]> record : member.records) {
                    TopicPartition tp = new TopicPartition(record.topic(), record.partition());
                    check(owned.contains(tp), "%s read partition %d it does not own", member.id, record.partition());
                    check(seen.add(record.partition() + "@" + record.offset()),
                            "record %d@%d consumed twice", record.partition(), record.offset());
                }
            }
            checkEquals(total, seen.size(), "distinct records consumed");
            // Generation-checked commits from each member, read back through one of them.
            for (Member member : members) {
                member.consumer.commitSync();
            }
            Set<TopicPartition> all = new HashSet<>();
            members.forEach(m -> all.addAll(m.assignment()));
            Map<TopicPartition, OffsetAndMetadata> committed = members.get(0).consumer.committed(all);
            for (TopicPartition tp : all) {
                check(committed.get(tp) != null, "no committed offset for %s", tp);
                checkEquals((long) perPartition, committed.get(tp).offset(), "committed offset of " + tp);
            }
            Map<String, Object> assignment = new TreeMap<>();
            members.forEach(m -> assignment.put(m.id, sorted(m.assignment())));
            data.put("assignment", assignment);
        } finally {
            closeAll(members);
        }
    }

    static void consumerCooperativeSticky(Map<String, Object> data) throws Exception {
        String topic = name("cooperative");
        String group = name("cooperative-group");
        int partitions = 6;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, Map.of());
        }
        Map<String, Object> cooperative = Map.of(
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        List<Member> members = new ArrayList<>();
        try {
            for (String id : List.of("a", "b", "c")) {
                members.add(new Member(id, group, topic, cooperative));
            }
            pollAll(members, () -> members.stream().allMatch(m -> m.assignment().size() == 2)
                    && balanced(members, partitions), "3 members with 2 partitions each");
            Map<String, Set<TopicPartition>> before = new HashMap<>();
            members.forEach(m -> before.put(m.id, m.assignment()));
            int generationBefore = members.get(0).generation();
            members.forEach(Member::forgetEvents);

            Member fourth = new Member("d", group, topic, cooperative);
            List<Member> everyone = new ArrayList<>(members);
            everyone.add(fourth);
            members.add(fourth);
            pollAll(everyone, () -> !fourth.assignment().isEmpty() && balanced(everyone, partitions),
                    "4 members balanced over 6 partitions");

            Set<TopicPartition> moved = new HashSet<>();
            for (Member member : everyone.subList(0, 3)) {
                Set<TopicPartition> had = before.get(member.id);
                Set<TopicPartition> has = member.assignment();
                check(had.containsAll(has), "%s gained partitions in an incremental rebalance: had %s, has %s",
                        member.id, sorted(had), sorted(has));
                Set<TopicPartition> gone = new HashSet<>(had);
                gone.removeAll(has);
                moved.addAll(gone);
                Set<TopicPartition> revoked = new HashSet<>();
                for (Set<TopicPartition> event : member.revoked) {
                    check(gone.containsAll(event), "%s had %s revoked but keeps some of them (moved: %s)",
                            member.id, sorted(event), sorted(gone));
                    revoked.addAll(event);
                }
                checkEquals(sorted(gone), sorted(revoked), "partitions revoked from " + member.id);
                check(member.lost.isEmpty(), "%s lost partitions: %s", member.id, member.lost);
            }
            checkEquals(sorted(moved), sorted(fourth.assignment()), "partitions the new member got");
            check(fourth.revoked.isEmpty(), "the new member had partitions revoked: %s", fourth.revoked);
            check(fourth.generation() > generationBefore, "generation did not advance: %d -> %d",
                    generationBefore, fourth.generation());
            data.put("moved", sorted(moved));
            data.put("generations", List.of(generationBefore, fourth.generation()));
        } finally {
            closeAll(members);
        }
    }

    static void consumerStaticMembership(Map<String, Object> data) throws Exception {
        String topic = name("static");
        String group = name("static-group");
        int partitions = 4;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, Map.of());
        }
        // The restart below must land well within the session timeout.
        Map<String, Object> base = Map.of(
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName(),
                ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "20000");
        List<Member> members = new ArrayList<>();
        try {
            // a forms the group alone, then rejoins when b comes: its last JoinGroup carries
            // a subscription that names the generation it had, which the restarted instance's
            // cannot. The group's protocol stays the same, so Kafka does not rebalance.
            Map<String, Object> aSettings = new HashMap<>(base);
            aSettings.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, group + "-a");
            Member a = new Member("a", group, topic, aSettings);
            members.add(a);
            pollAll(List.of(a), () -> a.assignment().size() == partitions, "the first member's assignment");
            Map<String, Object> bSettings = new HashMap<>(base);
            bSettings.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, group + "-b");
            Member b = new Member("b", group, topic, bSettings);
            members.add(b);
            pollAll(members, () -> a.assignment().size() == 2 && balanced(members, partitions),
                    "2 static members with 2 partitions each");
            Set<TopicPartition> aHad = a.assignment();
            Set<TopicPartition> bHad = b.assignment();
            int generation = a.generation();
            checkEquals(generation, b.generation(), "generation both members see");
            b.forgetEvents();

            // A static member leaves no LeaveGroup behind when it closes.
            a.close();
            Map<String, Object> settings = new HashMap<>(base);
            settings.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, group + "-a");
            Member restarted = new Member("a-restarted", group, topic, settings);
            members.add(restarted);
            List<Member> live = List.of(restarted, b);
            pollAll(live, () -> !restarted.assignment().isEmpty(), "the restarted member's assignment");
            // A few more rounds, so a rebalance the rejoin started would reach b's listener.
            for (int i = 0; i < 5; i++) {
                live.forEach(Member::poll);
            }
            checkEquals(sorted(aHad), sorted(restarted.assignment()), "assignment of the restarted member");
            checkEquals(sorted(bHad), sorted(b.assignment()), "assignment of the member that stayed");
            check(b.revoked.isEmpty() && b.assigned.isEmpty() && b.lost.isEmpty(),
                    "the member that stayed went through a rebalance: revoked %s, assigned %s, lost %s",
                    b.revoked, b.assigned, b.lost);
            checkEquals(generation, restarted.generation(), "generation of the restarted member");
            checkEquals(generation, b.generation(), "generation of the member that stayed");
            data.put("generation", generation);
        } finally {
            closeAll(members);
        }
    }

    static void consumerSeek(Map<String, Object> data) throws Exception {
        String topic = name("seek");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        // CreateTime an hour back, on a whole second, 10 ms apart.
        long base = (System.currentTimeMillis() - 3_600_000L) / 1000 * 1000;
        int count = 100;
        try (KafkaProducer<byte[], byte[]> producer = producer("seek", Map.of())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, base + i * 10L, null, bytes("v" + i))));
            }
            for (Future<RecordMetadata> future : sent) {
                await(future);
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("seek-reader", null, Map.of())) {
            consumer.assign(List.of(tp));
            checkEquals(Map.of(tp, 0L), consumer.beginningOffsets(List.of(tp)), "beginningOffsets");
            checkEquals(Map.of(tp, (long) count), consumer.endOffsets(List.of(tp)), "endOffsets");
            consumer.seekToBeginning(List.of(tp));
            checkEquals(0L, consumer.position(tp), "position after seekToBeginning");
            consumer.seekToEnd(List.of(tp));
            checkEquals((long) count, consumer.position(tp), "position after seekToEnd");

            consumer.seek(tp, 50);
            checkEquals(50L, consumer.position(tp), "position after seek(50)");
            ConsumerRecord<byte[], byte[]> first = pollFor(consumer, 1, "record after seek(50)").get(0);
            checkEquals(50L, first.offset(), "first offset after seek(50)");
            checkEquals(base + 500, first.timestamp(), "timestamp of offset 50");
            checkEquals("v50", text(first.value()), "value at offset 50");

            consumer.seek(tp, new OffsetAndMetadata(30));
            ConsumerRecord<byte[], byte[]> thirtieth = pollFor(consumer, 1, "record after seek(30)").get(0);
            checkEquals(30L, thirtieth.offset(), "first offset after seek(OffsetAndMetadata(30))");

            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(Map.of(tp, base + 255));
            checkEquals(26L, found.get(tp).offset(), "offsetsForTimes(base + 255) offset");
            checkEquals(base + 260, found.get(tp).timestamp(), "offsetsForTimes(base + 255) timestamp");
            found = consumer.offsetsForTimes(Map.of(tp, base - 60_000));
            checkEquals(0L, found.get(tp).offset(), "offsetsForTimes before every record");
            found = consumer.offsetsForTimes(Map.of(tp, base + 60_000));
            checkEquals(null, found.get(tp), "offsetsForTimes after every record");

            consumer.seek(tp, 99);
            ConsumerRecord<byte[], byte[]> last = pollFor(consumer, 1, "the last record").get(0);
            checkEquals(99L, last.offset(), "offset after seek(99)");
            until(() -> consumer.position(tp) == count, () -> consumer.poll(POLL),
                    "position reaching the end", () -> "position " + consumer.position(tp));
        }
        data.put("base_timestamp", base);
    }

    static void consumerCommits(Map<String, Object> data) throws Exception {
        String topic = name("commits");
        String group = name("commits-group");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 3, Map.of());
        }
        for (int p = 0; p < 3; p++) {
            produceValues(topic, p, 10, "p" + p + "-");
        }
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TopicPartition p2 = new TopicPartition(topic, 2);
        Set<TopicPartition> all = Set.of(p0, p1, p2);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("committer", group, Map.of())) {
            consumer.assign(all);
            checkEquals(null, consumer.committed(all).get(p0), "committed offset before any commit");
            pollFor(consumer, 30, "every record");
            consumer.commitSync();
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(all);
            for (TopicPartition tp : all) {
                checkEquals(10L, committed.get(tp).offset(), "commitSync() of the position of " + tp);
            }

            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(5, "meta-0")));
            AtomicReference<Map<TopicPartition, OffsetAndMetadata>> called = new AtomicReference<>();
            AtomicReference<Exception> failed = new AtomicReference<>();
            consumer.commitAsync(Map.of(p1, new OffsetAndMetadata(7, "meta-1")), (offsets, error) -> {
                failed.set(error);
                called.set(offsets);
            });
            // The callback runs on this thread, inside poll.
            until(() -> called.get() != null, () -> consumer.poll(POLL), "the commitAsync callback", () -> "not called");
            checkEquals(null, failed.get(), "commitAsync callback error");
            checkEquals(Map.of(p1, new OffsetAndMetadata(7, "meta-1")), called.get(), "offsets the callback got");

            committed = consumer.committed(all);
            checkEquals(new OffsetAndMetadata(5, "meta-0"), committed.get(p0), "committed p0");
            checkEquals(new OffsetAndMetadata(7, "meta-1"), committed.get(p1), "committed p1");
            checkEquals(10L, committed.get(p2).offset(), "committed p2");
        }
        // A new consumer of the group starts where the group committed.
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("resumer", group, Map.of())) {
            consumer.assign(List.of(p0));
            checkEquals(5L, consumer.position(p0), "position of a new consumer from the committed offset");
            ConsumerRecord<byte[], byte[]> next = pollFor(consumer, 1, "record after the committed offset").get(0);
            checkEquals("p0-5", text(next.value()), "first record from the committed offset");
        }
        data.put("topic", topic);
        data.put("group", group);
        data.put("offsets", Map.of("0", List.of(5, "meta-0"), "1", List.of(7, "meta-1"), "2", List.of(10, "")));
    }

    static void consumerPauseResume(Map<String, Object> data) throws Exception {
        String topic = name("pause");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 2, Map.of());
        }
        produceValues(topic, 0, 10, "p0-");
        produceValues(topic, 1, 10, "p1-");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("pauser", null, Map.of())) {
            consumer.assign(List.of(p0, p1));
            consumer.seekToBeginning(List.of(p0, p1));
            consumer.pause(List.of(p0));
            checkEquals(Set.of(p0), consumer.paused(), "paused()");
            List<ConsumerRecord<byte[], byte[]>> got = pollFor(consumer, 10, "records of the unpaused partition");
            // More polls: none may bring anything of the paused partition.
            for (int i = 0; i < 5; i++) {
                consumer.poll(POLL).forEach(got::add);
            }
            for (ConsumerRecord<byte[], byte[]> record : got) {
                checkEquals(1, record.partition(), "partition of a record polled while p0 was paused");
            }
            checkEquals(10, got.size(), "records while p0 was paused");
            checkEquals(0L, consumer.position(p0), "position of the paused partition");

            consumer.resume(List.of(p0));
            checkEquals(Set.of(), consumer.paused(), "paused() after resume");
            List<ConsumerRecord<byte[], byte[]>> resumed = pollFor(consumer, 10, "records after resume");
            for (int i = 0; i < 10; i++) {
                checkEquals(0, resumed.get(i).partition(), "partition after resume");
                checkEquals((long) i, resumed.get(i).offset(), "offset after resume");
            }
        }
    }

    // --- admin ---

    static void adminCreateTopics(Map<String, Object> data) throws Exception {
        String topic = name("created");
        try (Admin admin = admin()) {
            CreateTopicsResult created = admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "123456", "cleanup.policy", "compact"))));
            await(created.all());
            checkEquals(3, await(created.numPartitions(topic)), "numPartitions");
            checkEquals(1, await(created.replicationFactor(topic)), "replicationFactor");
            Uuid id = await(created.topicId(topic));
            check(id != null && !Uuid.ZERO_UUID.equals(id), "topic id %s", id);
            // CreateTopics v5+ carries the new topic's configs; without them this is null.
            Config config = await(created.config(topic));
            check(config != null, "CreateTopicsResult.config() is null");
            ConfigEntry retention = config.get("retention.ms");
            check(retention != null, "no retention.ms in %s", config);
            checkEquals("123456", retention.value(), "retention.ms value");
            checkEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
            checkEquals("compact", config.get("cleanup.policy").value(), "cleanup.policy value");
            ConfigEntry maxBytes = config.get("max.message.bytes");
            check(maxBytes != null && maxBytes.value() != null, "no max.message.bytes in %s", config);
            check(maxBytes.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "max.message.bytes reported as set on the topic: %s", maxBytes);

            TopicDescription described = await(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            checkEquals(id, described.topicId(), "topic id from describeTopics");
            checkEquals(3, described.partitions().size(), "partitions described");

            expectFailure(TopicExistsException.class,
                    admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all(), "creating it again");

            // No partition count or replication factor: the broker's num.partitions and 1.
            String defaults = name("broker-defaults");
            CreateTopicsResult fromDefaults = admin.createTopics(
                    List.of(new NewTopic(defaults, Optional.empty(), Optional.empty())));
            await(fromDefaults.all());
            data.put("default_partitions", await(fromDefaults.numPartitions(defaults)));
            checkEquals(1, await(fromDefaults.replicationFactor(defaults)), "default replication factor");

            String validated = name("validate-only");
            await(admin.createTopics(List.of(new NewTopic(validated, 2, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all());
            check(!topicNames(admin).contains(validated), "validateOnly created %s", validated);

            expectFailure(InvalidConfigurationException.class,
                    admin.createTopics(List.of(new NewTopic(name("bad-config"), 1, (short) 1)
                            .configs(Map.of("no.such.config", "1")))).all(), "an unknown topic config");
            expectFailure(InvalidReplicationFactorException.class,
                    admin.createTopics(List.of(new NewTopic(name("bad-rf"), 1, (short) 3))).all(),
                    "replication factor 3 on one broker");
            data.put("topic", topic);
            data.put("topic_id", id.toString());
        }
    }

    static void adminDeleteTopics(Map<String, Object> data) throws Exception {
        String byName = name("delete-by-name");
        String byId = name("delete-by-id");
        try (Admin admin = admin()) {
            createTopic(admin, byName, 2, Map.of());
            Uuid id = createTopic(admin, byId, 1, Map.of());
            await(admin.deleteTopics(List.of(byName)).all());
            check(!topicNames(admin).contains(byName), "%s still listed after deleteTopics", byName);
            expectFailure(UnknownTopicOrPartitionException.class,
                    admin.describeTopics(List.of(byName)).allTopicNames(), "describing a deleted topic");
            await(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all());
            check(!topicNames(admin).contains(byId), "%s still listed after deleteTopics by id", byId);
            expectFailure(UnknownTopicOrPartitionException.class,
                    admin.deleteTopics(List.of(byName)).all(), "deleting a deleted topic");
            expectFailure(UnknownTopicIdException.class,
                    admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all(),
                    "deleting an unknown topic id");
        }
    }

    static void adminListTopics(Map<String, Object> data) throws Exception {
        String first = name("listed");
        String second = name("listed");
        try (Admin admin = admin()) {
            Uuid firstId = createTopic(admin, first, 1, Map.of());
            Uuid secondId = createTopic(admin, second, 3, Map.of());
            Map<String, TopicListing> listed = await(admin.listTopics().namesToListings());
            for (Map.Entry<String, Uuid> expected : Map.of(first, firstId, second, secondId).entrySet()) {
                TopicListing listing = listed.get(expected.getKey());
                check(listing != null, "%s not listed", expected.getKey());
                check(!listing.isInternal(), "%s listed as internal", expected.getKey());
                checkEquals(expected.getValue(), listing.topicId(), "topic id of " + expected.getKey());
            }
            for (TopicListing listing : listed.values()) {
                check(!listing.isInternal(), "internal topic %s listed without listInternal", listing.name());
            }
        }
    }

    static void adminDescribeTopics(Map<String, Object> data) throws Exception {
        String topic = name("described");
        try (Admin admin = admin()) {
            int node = nodeId(admin);
            Uuid id = createTopic(admin, topic, 4, Map.of());
            TopicDescription byName = await(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            checkEquals(topic, byName.name(), "name");
            checkEquals(id, byName.topicId(), "topic id");
            check(!byName.isInternal(), "described as internal");
            checkEquals(4, byName.partitions().size(), "partitions");
            for (int p = 0; p < 4; p++) {
                TopicPartitionInfo info = byName.partitions().get(p);
                checkEquals(p, info.partition(), "partition index");
                checkEquals(node, info.leader().id(), "leader of partition " + p);
                checkEquals(List.of(node), info.replicas().stream().map(Node::id).toList(), "replicas of " + p);
                checkEquals(List.of(node), info.isr().stream().map(Node::id).toList(), "isr of " + p);
            }
            // By id: Metadata v12+ with an empty name and the topic id.
            TopicDescription byId = await(admin.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds()).get(id);
            check(byId != null, "describeTopics by id gave nothing");
            checkEquals(topic, byId.name(), "name described by id");
            checkEquals(id, byId.topicId(), "topic id described by id");
            checkEquals(4, byId.partitions().size(), "partitions described by id");
            expectFailure(UnknownTopicIdException.class,
                    admin.describeTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).allTopicIds(),
                    "describing an unknown topic id");
            expectFailure(UnknownTopicOrPartitionException.class,
                    admin.describeTopics(List.of(name("absent"))).allTopicNames(), "describing an unknown topic");
            data.put("topic", topic);
            data.put("topic_id", id.toString());
        }
    }

    static void adminCreatePartitions(Map<String, Object> data) throws Exception {
        String topic = name("grown");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 2, Map.of());
            await(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all());
            TopicDescription described = await(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            checkEquals(5, described.partitions().size(), "partitions after createPartitions");
            try (KafkaProducer<byte[], byte[]> producer = producer("grown", Map.of())) {
                RecordMetadata metadata = await(producer.send(new ProducerRecord<>(topic, 4, null, bytes("new"))));
                checkEquals(4, metadata.partition(), "partition of a record to a new partition");
                checkEquals(0L, metadata.offset(), "offset in the new partition");
            }
            expectFailure(InvalidPartitionsException.class,
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all(), "shrinking to 3");
            expectFailure(InvalidPartitionsException.class,
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all(), "growing to the same count");
            expectFailure(UnknownTopicOrPartitionException.class,
                    admin.createPartitions(Map.of(name("absent"), NewPartitions.increaseTo(2))).all(),
                    "growing an unknown topic");
        }
    }

    static void adminDescribeConfigs(Map<String, Object> data) throws Exception {
        String topic = name("configs");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of("max.message.bytes", "2000000"));
            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = await(admin.describeConfigs(List.of(topicResource)).all()).get(topicResource);
            ConfigEntry set = config.get("max.message.bytes");
            checkEquals("2000000", set.value(), "max.message.bytes");
            checkEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, set.source(), "source of max.message.bytes");
            check(!set.isDefault(), "max.message.bytes reported as a default");
            ConfigEntry unset = config.get("cleanup.policy");
            check(unset != null, "no cleanup.policy in %s", config);
            checkEquals("delete", unset.value(), "cleanup.policy");
            checkEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, unset.source(), "source of cleanup.policy");
            check(unset.isDefault(), "cleanup.policy not reported as a default");

            int node = nodeId(admin);
            ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node));
            Config brokerConfig = await(admin.describeConfigs(List.of(brokerResource)).all()).get(brokerResource);
            // A setting at Kafka's default is reported as the default; one away from it
            // (minibroker's 0 ms initial rebalance delay, Kafka's 3000) as a static setting.
            ConfigEntry partitions = brokerConfig.get("num.partitions");
            check(partitions != null, "no num.partitions in the broker's configs");
            checkEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, partitions.source(), "source of num.partitions");
            ConfigEntry delay = brokerConfig.get("group.initial.rebalance.delay.ms");
            check(delay != null, "no group.initial.rebalance.delay.ms in the broker's configs");
            checkEquals(ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG, delay.source(), "source of group.initial.rebalance.delay.ms");
            Map<String, Object> brokerValues = new TreeMap<>();
            brokerConfig.entries().forEach(entry -> brokerValues.put(entry.name(), entry.value()));
            expectFailure(UnknownTopicOrPartitionException.class,
                    admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, name("absent")))).all(),
                    "configs of an unknown topic");
            data.put("broker", brokerValues);
            data.put("node_id", node);
        }
    }

    static void adminIncrementalAlterConfigs(Map<String, Object> data) throws Exception {
        String topic = name("altered");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of("retention.ms", "100000"));
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "3000000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)));
            await(admin.incrementalAlterConfigs(ops).all());
            Config config = await(admin.describeConfigs(List.of(resource)).all()).get(resource);
            checkEquals("3000000", config.get("max.message.bytes").value(), "max.message.bytes after SET");
            checkEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, config.get("retention.ms").source(),
                    "source of retention.ms after DELETE");
        }
    }

    static void adminListOffsets(Map<String, Object> data) throws Exception {
        String topic = name("offsets");
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = (System.currentTimeMillis() - 3_600_000L) / 1000 * 1000;
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
            // Offsets 0-8 at base + 10 * offset; offset 9 goes back to base + 45, so the
            // largest timestamp (base + 80, offset 8) is not the last record's.
            try (KafkaProducer<byte[], byte[]> producer = producer("offsets", Map.of())) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    long timestamp = i < 9 ? base + i * 10L : base + 45;
                    sent.add(producer.send(new ProducerRecord<>(topic, 0, timestamp, null, bytes("v" + i))));
                }
                for (Future<RecordMetadata> future : sent) {
                    await(future);
                }
            }
            checkEquals(0L, listOffset(admin, tp, OffsetSpec.earliest()).offset(), "earliest");
            checkEquals(10L, listOffset(admin, tp, OffsetSpec.latest()).offset(), "latest");
            ListOffsetsResultInfo max = listOffset(admin, tp, OffsetSpec.maxTimestamp());
            checkEquals(8L, max.offset(), "maxTimestamp offset");
            checkEquals(base + 80, max.timestamp(), "maxTimestamp timestamp");
            ListOffsetsResultInfo at = listOffset(admin, tp, OffsetSpec.forTimestamp(base + 35));
            checkEquals(4L, at.offset(), "forTimestamp(base + 35) offset");
            checkEquals(base + 40, at.timestamp(), "forTimestamp(base + 35) timestamp");
            checkEquals(0L, listOffset(admin, tp, OffsetSpec.forTimestamp(base - 1000)).offset(),
                    "forTimestamp before every record");
            checkEquals(-1L, listOffset(admin, tp, OffsetSpec.forTimestamp(base + 60_000)).offset(),
                    "forTimestamp after every record");
        }
    }

    static ListOffsetsResultInfo listOffset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        return await(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp));
    }

    static ConsumerGroupListing listed(Admin admin, String group) throws Exception {
        for (ConsumerGroupListing listing : await(admin.listConsumerGroups().all())) {
            if (listing.groupId().equals(group)) {
                return listing;
            }
        }
        return null;
    }

    static ConsumerGroupDescription describeGroup(Admin admin, String group) throws Exception {
        return await(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
    }

    static void adminConsumerGroups(Map<String, Object> data) throws Exception {
        String topic = name("groups");
        String group = name("described-group");
        List<Member> members = new ArrayList<>();
        try (Admin admin = admin()) {
            int node = nodeId(admin);
            createTopic(admin, topic, 2, Map.of());
            Map<String, Object> range = Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
            members.add(new Member("a", group, topic, range));
            members.add(new Member("b", group, topic, range));
            pollAll(members, () -> balanced(members, 2), "2 members with a partition each");

            ConsumerGroupListing listing = listed(admin, group);
            check(listing != null, "listConsumerGroups does not list %s", group);
            check(!listing.isSimpleConsumerGroup(), "listed as a simple group: %s", listing);
            checkEquals(Optional.of(ConsumerGroupState.STABLE), listing.state(), "listed state");

            ConsumerGroupDescription described = describeGroup(admin, group);
            checkEquals(group, described.groupId(), "described group id");
            checkEquals(ConsumerGroupState.STABLE, described.state(), "described state");
            check(!described.isSimpleConsumerGroup(), "described as a simple group");
            checkEquals(GroupType.CLASSIC, described.type(), "group type");
            checkEquals("range", described.partitionAssignor(), "partition assignor");
            checkEquals(node, described.coordinator().id(), "coordinator");
            checkEquals(2, described.members().size(), "members");
            Set<TopicPartition> assigned = new HashSet<>();
            Set<String> memberIds = new HashSet<>();
            for (MemberDescription member : described.members()) {
                check(!member.consumerId().isEmpty(), "member without an id");
                check(member.clientId().startsWith("member-"), "member client id %s", member.clientId());
                check(!member.host().isEmpty(), "member without a host");
                checkEquals(1, member.assignment().topicPartitions().size(), "partitions of " + member.consumerId());
                assigned.addAll(member.assignment().topicPartitions());
                memberIds.add(member.consumerId());
            }
            checkEquals(2, assigned.size(), "partitions assigned over the members");
            checkEquals(2, memberIds.size(), "distinct member ids");

            expectFailure(GroupNotEmptyException.class,
                    admin.deleteConsumerGroups(List.of(group)).all(), "deleting a group with members");

            for (Member member : members) {
                member.consumer.commitSync();
            }
            // Closing sends LeaveGroup for each (dynamic) member.
            closeAll(members);
            ConsumerGroupDescription empty = describeGroup(admin, group);
            checkEquals(ConsumerGroupState.EMPTY, empty.state(), "state once the members left");
            checkEquals(0, empty.members().size(), "members once they left");
            // An emptied group keeps its protocol type "consumer": it is not a simple group.
            check(!empty.isSimpleConsumerGroup(), "the emptied group is described as a simple group");
            ConsumerGroupListing emptyListing = listed(admin, group);
            check(emptyListing != null, "listConsumerGroups no longer lists the emptied group");
            check(!emptyListing.isSimpleConsumerGroup(), "the emptied group is listed as a simple group");
            checkEquals(Optional.of(ConsumerGroupState.EMPTY), emptyListing.state(), "listed state once empty");

            await(admin.deleteConsumerGroups(List.of(group)).all());
            check(listed(admin, group) == null, "%s still listed after deleteConsumerGroups", group);
            try {
                ConsumerGroupDescription gone = describeGroup(admin, group);
                checkEquals(ConsumerGroupState.DEAD, gone.state(), "state of a deleted group");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof GroupIdNotFoundException, "describing a deleted group: %s", e.getCause());
            }
            expectFailure(GroupIdNotFoundException.class,
                    admin.deleteConsumerGroups(List.of(group)).all(), "deleting a deleted group");
            data.put("group", group);
        } finally {
            closeAll(members);
        }
    }

    static void adminConsumerGroupOffsets(Map<String, Object> data) throws Exception {
        String topic = name("group-offsets");
        String group = name("offsets-group");
        String active = name("active-group");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TopicPartition p2 = new TopicPartition(topic, 2);
        List<Member> members = new ArrayList<>();
        try (Admin admin = admin()) {
            createTopic(admin, topic, 3, Map.of());
            for (int p = 0; p < 3; p++) {
                produceValues(topic, p, 5, "r");
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(
                    p0, new OffsetAndMetadata(1, "first"),
                    p1, new OffsetAndMetadata(2),
                    p2, new OffsetAndMetadata(3));
            await(admin.alterConsumerGroupOffsets(group, offsets).all());
            Map<TopicPartition, OffsetAndMetadata> listedOffsets =
                    await(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            checkEquals(new OffsetAndMetadata(1, "first"), listedOffsets.get(p0), "listed p0");
            checkEquals(2L, listedOffsets.get(p1).offset(), "listed p1");
            checkEquals(3L, listedOffsets.get(p2).offset(), "listed p2");
            checkEquals(3, listedOffsets.size(), "partitions listed");

            await(admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all());
            listedOffsets = await(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            checkEquals(Set.of(p1, p2), listedOffsets.keySet(), "partitions left after deleting p0's offset");

            await(admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(4))).all());
            listedOffsets = await(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            checkEquals(4L, listedOffsets.get(p0).offset(), "p0 committed again");

            // A group with a member subscribed to the topic.
            members.add(new Member("a", active, topic, Map.of()));
            pollAll(members, () -> members.get(0).assignment().size() == 3, "the member's assignment");
            members.get(0).consumer.commitSync(Map.of(p0, new OffsetAndMetadata(2)));
            expectFailure(GroupSubscribedToTopicException.class,
                    admin.deleteConsumerGroupOffsets(active, Set.of(p0)).all(),
                    "deleting offsets of a topic the group's member subscribes to");
            expectFailure(UnknownMemberIdException.class,
                    admin.alterConsumerGroupOffsets(active, Map.of(p0, new OffsetAndMetadata(1))).all(),
                    "altering offsets of a group with members");
            checkEquals(2L, await(admin.listConsumerGroupOffsets(active).partitionsToOffsetAndMetadata()).get(p0).offset(),
                    "the member's commit");
            expectFailure(GroupIdNotFoundException.class,
                    admin.deleteConsumerGroupOffsets(name("absent-group"), Set.of(p0)).all(),
                    "deleting offsets of an unknown group");
            data.put("group", group);
            data.put("topic", topic);
        } finally {
            closeAll(members);
        }
    }

    static void adminDescribeCluster(Map<String, Object> data) throws Exception {
        try (Admin admin = admin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = await(cluster.nodes());
            checkEquals(1, nodes.size(), "nodes");
            Node node = nodes.iterator().next();
            Node controller = await(cluster.controller());
            check(controller != null && controller.id() == node.id(), "controller %s is not the node %s", controller, node);
            String clusterId = await(cluster.clusterId());
            check(clusterId != null && !clusterId.isEmpty(), "cluster id %s", clusterId);
            String[] hostPort = bootstrap.split(",")[0].split(":");
            checkEquals(Integer.parseInt(hostPort[hostPort.length - 1]), node.port(), "node port");
            data.put("node_id", node.id());
            data.put("host", node.host());
            data.put("port", node.port());
            data.put("cluster_id", clusterId);
            data.put("controller_id", controller.id());
        }
    }

    static void adminDeleteRecords(Map<String, Object> data) throws Exception {
        String topic = name("delete-records");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
            produceValues(topic, 0, 10, "r");
            DeletedRecords deleted = await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(5)))
                    .lowWatermarks().get(tp));
            checkEquals(5L, deleted.lowWatermark(), "low watermark");
            checkEquals(5L, listOffset(admin, tp, OffsetSpec.earliest()).offset(), "earliest after deleteRecords");
        }
    }
}
