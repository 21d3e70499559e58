// Kafka's Java client (kafka-clients) as a driver of the client matrix: every step of
// tests/interop/SCENARIOS.md with the client's own Admin, KafkaProducer and KafkaConsumer.
//
//   java -cp <classes>:<kafka-clients jars> MatrixDriver -bootstrap HOST:PORT -topic T -group G -messages N
//
// Compiles unchanged against kafka-clients 3.9 and 4.x (only APIs both lines have).
// Prints one JSON report as its last stdout line; a failure exits 1 naming the step.

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class MatrixDriver {
    static final int PARTITIONS = 3;
    static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");
    static final long WAIT_SECONDS = 20; // one client call or one wait
    static final long DEADLINE_SECONDS = 57; // the whole run, inside the catalogue's 60 s
    static final long SETTLE_MS = 500; // how long an assignment must hold before it counts
    static final Duration POLL = Duration.ofMillis(100);
    static final Duration CLOSE = Duration.ofSeconds(5);
    static final int TXN_KEYS = 5; // records each transaction of the transactions step sends

    static String bootstrap;
    static String topic;
    static String group;
    static int messages = 30;
    static volatile String step = "start";

    public static void main(String[] args) {
        parseFlags(args);
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(DEADLINE_SECONDS));
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("MatrixDriver: step " + step + ": no report after " + DEADLINE_SECONDS + " s");
            Runtime.getRuntime().halt(1);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            System.out.println(Json.of(run()));
            System.out.flush();
        } catch (Throwable error) {
            System.err.println("MatrixDriver: step " + step + ": " + describe(error));
            error.printStackTrace();
            System.exit(1);
        }
        // Client threads left behind must not keep the JVM alive.
        System.exit(0);
    }

    static void parseFlags(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("-")) {
                usage("unexpected argument " + arg);
            }
            String name = arg.replaceFirst("^--?", "");
            String value;
            int equals = name.indexOf('=');
            if (equals >= 0) {
                value = name.substring(equals + 1);
                name = name.substring(0, equals);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                usage("flag -" + name + " needs a value");
                return;
            }
            switch (name) {
                case "bootstrap" -> bootstrap = value;
                case "topic" -> topic = value;
                case "group" -> group = value;
                case "messages" -> messages = Integer.parseInt(value);
                default -> usage("unknown flag -" + name);
            }
        }
        if (bootstrap == null || topic == null || group == null) {
            usage("-bootstrap, -topic and -group are required");
        }
    }

    static void usage(String problem) {
        System.err.println("MatrixDriver: " + problem);
        System.err.println("usage: MatrixDriver -bootstrap HOST:PORT -topic T -group G [-messages N]");
        System.exit(2);
    }

    static Map<String, Object> run() throws Exception {
        Map<String, Object> report = new LinkedHashMap<>();
        List<String> steps = new ArrayList<>();
        report.put("client", "kafka-clients");
        report.put("version", clientVersion());
        report.put("steps", steps);
        report.put("skipped", new LinkedHashMap<String, String>());
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(topic, p));
        }

        // Every client is closed with a short timeout: the defaults wait up to 30 s or more.
        Admin admin = admin();
        try {
            step = "create_topic";
            NewTopic newTopic = new NewTopic(topic, PARTITIONS, (short) 1).configs(Map.of("retention.ms", "3600000"));
            await(admin.createTopics(List.of(newTopic)).all());
            steps.add(step);

            step = "describe_configs";
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = describeConfigs(admin, resource);
            Map<String, String> values = new TreeMap<>();
            Map<String, Boolean> defaults = new TreeMap<>();
            for (ConfigEntry entry : config.entries()) {
                values.put(entry.name(), entry.value());
                defaults.put(entry.name(), entry.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            }
            report.put("topic_configs", values);
            report.put("default_config", defaults);
            steps.add(step);

            step = "produce";
            long now = System.currentTimeMillis();
            long base = now / 1000 * 1000 - (messages + 60) * 1000L;
            Map<String, Integer> produced = new TreeMap<>();
            List<KafkaProducer<String, String>> producers = new ArrayList<>();
            try {
                for (String codec : CODECS) {
                    producers.add(producer(codec));
                }
                for (int i = 0; i < messages; i++) {
                    String key = String.format("key-%03d", i);
                    List<Header> headers = List.of(new RecordHeader("origin", bytes("header-" + key)));
                    ProducerRecord<String, String> record =
                            new ProducerRecord<>(topic, null, base + 1000L * i, key, "value-" + key, headers);
                    RecordMetadata acked = await(producers.get(i % CODECS.size()).send(record));
                    produced.put(key, acked.partition());
                }
            } finally {
                for (KafkaProducer<String, String> producer : producers) {
                    producer.close(CLOSE);
                }
            }
            Set<String> codecs = new TreeSet<>();
            for (int i = 0; i < messages; i++) {
                codecs.add(CODECS.get(i % CODECS.size()));
            }
            report.put("produced", produced);
            report.put("codecs", new ArrayList<>(codecs));
            report.put("base_timestamp", base);
            report.put("partitioner", "murmur2");
            steps.add("produce");
            steps.add("headers");
            steps.add("timestamps");
            steps.add("keyed");

            step = "consume_group";
            Map<String, Object> consumed = new TreeMap<>();
            KafkaConsumer<String, String> consumer = consumer(group, "earliest");
            try {
                consumer.subscribe(List.of(topic));
                until(() -> {
                    for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                        consumed.put(record.key(), recordOf(record));
                    }
                    return consumed.size() >= messages;
                }, () -> "read " + consumed.size() + " of " + messages);
                consumer.commitSync(Duration.ofSeconds(WAIT_SECONDS));
            } finally {
                consumer.close(CLOSE); // leaves the group
            }
            report.put("consumed", consumed);
            steps.add(step);

            step = "committed";
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    await(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            Map<Integer, Long> committed = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
                if (entry.getKey().topic().equals(topic) && entry.getValue() != null) {
                    committed.put(entry.getKey().partition(), entry.getValue().offset());
                }
            }
            report.put("committed", committed);
            steps.add(step);

            step = "list_offsets";
            report.put("oldest", listOffsets(admin, partitions, OffsetSpec.earliest()));
            report.put("newest", listOffsets(admin, partitions, OffsetSpec.latest()));
            steps.add(step);

            step = "offsets_for_time";
            long target = base + 1000L * (messages / 2);
            report.put("time_target", target);
            report.put("offsets_for_time", listOffsets(admin, partitions, OffsetSpec.forTimestamp(target)));
            steps.add(step);

            step = "from_timestamp";
            report.put("from_timestamp", fromTimestamp(partitions, target));
            steps.add(step);

            step = "from_latest";
            report.put("from_latest", fromLatest());
            steps.add(step);

            step = "rebalance";
            rebalance(report);
            steps.add(step);

            step = "list_groups";
            Set<String> groups = new TreeSet<>();
            for (ConsumerGroupListing listing : await(admin.listConsumerGroups().all())) {
                groups.add(listing.groupId());
            }
            report.put("groups", new ArrayList<>(groups));
            steps.add(step);

            step = "describe_group";
            ConsumerGroupDescription described =
                    await(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            // ConsumerGroupState's text is Kafka's own name of the state ("Empty", "Stable").
            report.put("group_state", described.state().toString());
            steps.add(step);

            transactions(admin, report);
            // Done in the order fencing, offsets, read_committed; listed in the catalogue's.
            steps.add("transactions");
            steps.add("transaction_offsets");
            steps.add("fencing");

            step = "delete_topic";
            await(admin.deleteTopics(List.of(topic)).all());
            steps.add(step);
        } finally {
            admin.close(CLOSE);
        }
        return report;
    }

    /**
     * The transactions, transaction_offsets and fencing steps on T-txn (left for the test
     * to delete) with the transactional id and the offsets' group G-txn.
     */
    static void transactions(Admin admin, Map<String, Object> report) throws Exception {
        step = "transactions";
        String txnTopic = topic + "-txn";
        String txnId = group + "-txn";
        await(admin.createTopics(List.of(new NewTopic(txnTopic, PARTITIONS, (short) 1))).all());
        List<TopicPartition> txnPartitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            txnPartitions.add(new TopicPartition(txnTopic, p));
        }

        KafkaProducer<String, String> first = transactionalProducer(txnId);
        KafkaProducer<String, String> second = null;
        try {
            first.initTransactions();

            // transactions (+ transaction_offsets): committed with the offset 1 of T-0 for G-txn.
            first.beginTransaction();
            List<Future<RecordMetadata>> sent = sendKeys(first, txnTopic, "txn-commit-");
            step = "transaction_offsets";
            first.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1)),
                    new ConsumerGroupMetadata(txnId));
            step = "transactions";
            first.commitTransaction();
            awaitAll(sent);

            // Aborted once every record is acknowledged: written, then skipped by read_committed.
            first.beginTransaction();
            sent = sendKeys(first, txnTopic, "txn-abort-");
            first.flush();
            awaitAll(sent);
            first.abortTransaction();

            step = "fencing";
            second = transactionalProducer(txnId);
            second.initTransactions(); // bumps the epoch: the first is a zombie now
            String fenced = null;
            try {
                first.beginTransaction();
                Future<RecordMetadata> zombie =
                        first.send(new ProducerRecord<>(txnTopic, "txn-zombie-000", "value-txn-zombie-000"));
                first.commitTransaction();
                await(zombie);
            } catch (Exception error) {
                if (!isFencing(error)) {
                    throw error;
                }
                fenced = describe(error);
            }
            if (fenced == null) {
                throw new AssertionError("the first producer committed after the second initialised its id");
            }
            report.put("fenced", fenced);
            first.close(CLOSE); // fenced is fatal: it can do nothing more
            first = null;
            second.beginTransaction();
            sent = sendKeys(second, txnTopic, "txn-after-");
            second.commitTransaction();
            awaitAll(sent);
        } finally {
            if (first != null) {
                first.close(CLOSE);
            }
            if (second != null) {
                second.close(CLOSE);
            }
        }

        step = "transaction_offsets";
        Map<Integer, Long> txnOffsets = new TreeMap<>();
        until(() -> {
            Map<TopicPartition, OffsetAndMetadata> got =
                    await(admin.listConsumerGroupOffsets(txnId).partitionsToOffsetAndMetadata());
            txnOffsets.clear();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : got.entrySet()) {
                if (entry.getKey().topic().equals(topic) && entry.getValue() != null) {
                    txnOffsets.put(entry.getKey().partition(), entry.getValue().offset());
                }
            }
            // Kafka makes the offsets visible once the commit's markers are written.
            if (txnOffsets.isEmpty()) {
                Thread.sleep(100);
                return false;
            }
            return true;
        }, () -> txnId + " has no committed offsets of " + topic);
        report.put("transaction_offsets", txnOffsets);

        step = "transactions";
        report.put("read_committed", readCommitted(admin, txnPartitions));
    }

    /** TXN_KEYS keyed records `prefix` + %03d, unacknowledged yet. */
    static List<Future<RecordMetadata>> sendKeys(KafkaProducer<String, String> producer, String to, String prefix) {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < TXN_KEYS; i++) {
            String key = String.format("%s%03d", prefix, i);
            sent.add(producer.send(new ProducerRecord<>(to, key, "value-" + key)));
        }
        return sent;
    }

    static void awaitAll(List<Future<RecordMetadata>> sent) throws Exception {
        for (Future<RecordMetadata> future : sent) {
            await(future);
        }
    }

    /** A zombie's error: fenced by a newer epoch of its transactional id. */
    static boolean isFencing(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                return true;
            }
        }
        return false;
    }

    /**
     * `partitions` read from the earliest offsets to their ends with isolation level
     * read_committed. Kafka writes a transaction's markers after its EndTxn is answered,
     * so the ends are taken once the last stable offsets have caught up with the high
     * watermarks.
     */
    static List<String> readCommitted(Admin admin, List<TopicPartition> partitions) throws Exception {
        Map<Integer, Long> stable = new TreeMap<>();
        Map<Integer, Long> ends = new TreeMap<>();
        until(() -> {
            ends.clear();
            ends.putAll(listOffsets(admin, partitions, OffsetSpec.latest()));
            stable.clear();
            stable.putAll(listOffsets(admin, partitions, OffsetSpec.latest(),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)));
            if (!stable.equals(ends)) {
                Thread.sleep(50);
                return false;
            }
            return true;
        }, () -> "last stable offsets " + stable + " short of the high watermarks " + ends);

        List<String> keys = new ArrayList<>();
        Properties isolation = new Properties();
        isolation.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        KafkaConsumer<String, String> consumer = consumer(null, "earliest", isolation);
        try {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            until(() -> {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    keys.add(record.key());
                }
                // Positions pass the markers and the aborted records as well.
                for (TopicPartition tp : partitions) {
                    if (consumer.position(tp) < ends.get(tp.partition())) {
                        return false;
                    }
                }
                return true;
            }, () -> "read " + keys + " up to the ends " + ends);
        } finally {
            consumer.close(CLOSE);
        }
        return keys;
    }

    static Config describeConfigs(Admin admin, ConfigResource resource) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (true) {
            try {
                return await(admin.describeConfigs(List.of(resource)).values().get(resource));
            } catch (ExecutionException e) {
                // A Kafka broker may learn of a topic a moment after its creation is answered.
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    static Map<String, Object> recordOf(ConsumerRecord<String, String> record) {
        Map<String, String> headers = new TreeMap<>();
        for (Header header : record.headers()) {
            byte[] value = header.value();
            headers.put(header.key(), value == null ? null : new String(value, StandardCharsets.UTF_8));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("value", record.value());
        out.put("partition", record.partition());
        out.put("offset", record.offset());
        out.put("timestamp", record.timestamp());
        out.put("headers", headers);
        return out;
    }

    static Map<Integer, Long> listOffsets(Admin admin, List<TopicPartition> partitions, OffsetSpec spec)
            throws Exception {
        return listOffsets(admin, partitions, spec, new ListOffsetsOptions());
    }

    static Map<Integer, Long> listOffsets(
            Admin admin, List<TopicPartition> partitions, OffsetSpec spec, ListOffsetsOptions options)
            throws Exception {
        Map<TopicPartition, OffsetSpec> asked = new HashMap<>();
        for (TopicPartition tp : partitions) {
            asked.put(tp, spec);
        }
        Map<TopicPartition, ListOffsetsResultInfo> answered = await(admin.listOffsets(asked, options).all());
        Map<Integer, Long> out = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            out.put(tp.partition(), answered.get(tp).offset());
        }
        return out;
    }

    /** Every partition read from its offset for `target` (offsetsForTimes, then seek) to its end. */
    static List<String> fromTimestamp(List<TopicPartition> partitions, long target) throws Exception {
        List<String> keys = new ArrayList<>();
        KafkaConsumer<String, String> consumer = consumer(null, "earliest");
        try {
            consumer.assign(partitions);
            Map<TopicPartition, Long> times = new HashMap<>();
            for (TopicPartition tp : partitions) {
                times.put(tp, target);
            }
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(times);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            for (TopicPartition tp : partitions) {
                OffsetAndTimestamp at = found.get(tp);
                // No record that late: nothing to read there.
                consumer.seek(tp, at == null ? ends.get(tp) : at.offset());
            }
            until(() -> {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    keys.add(record.key());
                }
                for (TopicPartition tp : partitions) {
                    if (consumer.position(tp) < ends.get(tp)) {
                        return false;
                    }
                }
                return true;
            }, () -> "read " + keys);
        } finally {
            consumer.close(CLOSE);
        }
        return keys;
    }

    /** A group consumer with the "latest" reset; late-NNN produced every 200 ms until it reads one. */
    static List<String> fromLatest() throws Exception {
        List<String> keys = new ArrayList<>();
        KafkaProducer<String, String> producer = producer("none");
        KafkaConsumer<String, String> consumer = consumer(group + "-latest", "latest");
        try {
            consumer.subscribe(List.of(topic));
            for (int i = 0; i < 100 && keys.isEmpty(); i++) {
                String key = String.format("late-%03d", i);
                await(producer.send(new ProducerRecord<>(topic, key, "value-" + key)));
                long next = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200);
                while (keys.isEmpty() && System.nanoTime() < next) {
                    long left = Math.max(1, TimeUnit.NANOSECONDS.toMillis(next - System.nanoTime()));
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(left))) {
                        keys.add(record.key());
                    }
                }
            }
        } finally {
            consumer.close(CLOSE);
            producer.close(CLOSE);
        }
        if (keys.isEmpty()) {
            throw new AssertionError("the consumer at the latest offsets read nothing");
        }
        return keys;
    }

    /** One member of G-trio, polling in its own thread; its listener follows its assignment. */
    static final class Member implements ConsumerRebalanceListener, Runnable {
        final KafkaConsumer<String, String> consumer = consumer(group + "-trio", "latest");
        final Set<Integer> owned = new TreeSet<>();
        final Thread thread = new Thread(this, "member");
        volatile boolean running = true;
        volatile Throwable failure;

        Member start() {
            thread.setDaemon(true);
            thread.start();
            return this;
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (running) {
                    consumer.poll(POLL);
                }
            } catch (Throwable error) {
                failure = error;
            } finally {
                consumer.close(CLOSE); // leaves the group
            }
        }

        // Added and taken away, so eager and cooperative protocols are followed alike.
        @Override
        public synchronized void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            partitions.forEach(tp -> owned.add(tp.partition()));
        }

        @Override
        public synchronized void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            partitions.forEach(tp -> owned.remove(tp.partition()));
        }

        @Override
        public synchronized void onPartitionsLost(Collection<TopicPartition> partitions) {
            onPartitionsRevoked(partitions);
        }

        synchronized List<Integer> assignment() {
            return new ArrayList<>(owned);
        }

        void stop() throws InterruptedException {
            running = false;
            thread.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
        }
    }

    static void rebalance(Map<String, Object> report) throws Exception {
        List<Member> members = new ArrayList<>();
        try {
            members.add(new Member().start());
            members.add(new Member().start());
            report.put("group_of_two", settled(members, MatrixDriver::covers));
            members.add(new Member().start());
            report.put("group_of_three", settled(members, got -> {
                for (List<Integer> assigned : got) {
                    if (assigned.size() != 1) {
                        return false;
                    }
                }
                return covers(got);
            }));
        } finally {
            for (Member member : members) {
                member.stop();
            }
        }
        for (Member member : members) {
            if (member.failure != null) {
                throw new AssertionError("a member failed", member.failure);
            }
            if (member.thread.isAlive()) {
                throw new AssertionError("a member did not close within " + WAIT_SECONDS + " s");
            }
        }
    }

    /** Non-empty, disjoint assignments that together hold every partition. */
    static boolean covers(List<List<Integer>> assignments) {
        List<Integer> all = new ArrayList<>();
        for (List<Integer> assigned : assignments) {
            if (assigned.isEmpty()) {
                return false;
            }
            all.addAll(assigned);
        }
        all.sort(null);
        List<Integer> expected = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            expected.add(p);
        }
        return all.equals(expected);
    }

    /** The members' assignments once `expected` has held for SETTLE_MS running. */
    static List<List<Integer>> settled(List<Member> members, Predicate<List<List<Integer>>> expected)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        long since = -1;
        List<List<Integer>> got = new ArrayList<>();
        while (System.nanoTime() < deadline) {
            got = new ArrayList<>();
            for (Member member : members) {
                if (member.failure != null) {
                    throw new AssertionError("a member failed", member.failure);
                }
                got.add(member.assignment());
            }
            if (expected.test(got)) {
                if (since < 0) {
                    since = System.nanoTime();
                } else if (System.nanoTime() - since >= TimeUnit.MILLISECONDS.toNanos(SETTLE_MS)) {
                    return got;
                }
            } else {
                since = -1;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("assignments did not settle within " + WAIT_SECONDS + " s; last " + got);
    }

    // --- clients ---

    static Properties common() {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", "matrix-java");
        props.put("request.timeout.ms", "15000");
        props.put("retry.backoff.ms", "50");
        return props;
    }

    static Admin admin() {
        Properties props = common();
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return Admin.create(props);
    }

    static KafkaProducer<String, String> producer(String codec) {
        return producer(codec, new Properties());
    }

    /** Uncompressed, idempotent, with `id` as its transactional id. */
    static KafkaProducer<String, String> transactionalProducer(String id) {
        Properties extra = new Properties();
        extra.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        extra.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        return producer("none", extra);
    }

    static KafkaProducer<String, String> producer(String codec, Properties extra) {
        Properties props = common();
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        props.putAll(extra);
        return new KafkaProducer<>(props);
    }

    /** A consumer in `group` (none: assign only), starting where `reset` says without an offset. */
    static KafkaConsumer<String, String> consumer(String group, String reset) {
        return consumer(group, reset, new Properties());
    }

    static KafkaConsumer<String, String> consumer(String group, String reset, Properties extra) {
        Properties props = common();
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        // close() waits for the fetch in flight, which an empty partition holds this long.
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            // Members learn of a rebalance at their next heartbeat; 6 s is Kafka's least session.
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "20000");
        }
        props.putAll(extra);
        return new KafkaConsumer<>(props);
    }

    static String clientVersion() {
        // The jar's own version file: AppInfoParser moved between the 3.x and 4.x lines.
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties props = new Properties();
            if (in != null) {
                props.load(in);
            }
            return props.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    // --- waiting ---

    interface Check {
        boolean done() throws Exception;
    }

    interface State {
        String describe();
    }

    static void until(Check check, State state) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (!check.done()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not done within " + WAIT_SECONDS + " s: " + state.describe());
            }
        }
    }

    static <T> T await(java.util.concurrent.Future<T> future) throws Exception {
        return future.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String describe(Throwable error) {
        StringBuilder text = new StringBuilder();
        int depth = 0;
        for (Throwable t = error; t != null && depth < 5; t = t.getCause(), depth++) {
            text.append(depth == 0 ? "" : " caused by ")
                    .append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        return text.toString();
    }
}
