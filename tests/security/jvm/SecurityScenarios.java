// Kafka's Java client against the broker's security listeners: every scenario of
// tests/security/test_jvm_node_clients.py in one JVM run, a few at a time.
//
// Usage: java -cp <this>:<kafka-clients jars> SecurityScenarios SETTINGS.properties
// SETTINGS names the scenarios (`scenarios=a,b,...`) and, for each, `<name>.<key>`:
//   kind              round_trip (produce, then consume back) or refused (expect failure)
//   bootstrap         HOST:PORT of the listener
//   protocol          the client's security.protocol
//   mechanism, username, password     SASL, when set
//   ca                PEM file of the CA to trust, when set
//   certificate, key  PEM files of the client's certificate chain and PKCS#8 key, when set
//   topic, count      round_trip: the topic to create and how many records go through it
// The ACL scenarios (kinds acl_*) are the steps of one story on a broker enforcing ACLs,
// run in the order given, one after another, beside the others. They also take:
//   topic, group, count     the topic and group the grants name; how many records alice sends
//   admin_user, admin_password        the super user, who manages the ACLs
//   allowed_user, allowed_password    the principal the grants name (alice)
//   refused_user, refused_password    a principal with no grant (bob)
//   grants            the ACLs to create, `;`-separated, each `type,name,pattern,principal,
//                     host,operation,permission` as Kafka names them
//   revoke            the one ACL to delete, in the same form
// Prints to stdout, one JSON object a line: {"start": NAME} as a scenario starts, then
// {"scenario": NAME, "ok": bool, "error": text-or-null, "data": {...}, "seconds": n}.
// A round trip reports the values read back; a refusal what each client call failed
// with (or that it succeeded). The test asserts on both.

import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeleteAclsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class SecurityScenarios {
    // The outer bound on one scenario; its client calls have shorter bounds of their own.
    static final long SCENARIO_SECONDS = 40;
    // How long a client call may block: a refused client must give up within it.
    static final String CALL_MS = "8000";
    static final int PARALLEL = 4;

    static Properties settings;

    public static void main(String[] args) throws Exception {
        settings = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            settings.load(in);
        }
        List<String> names = List.of(settings.getProperty("scenarios").split(","));
        ExecutorService pool = Executors.newFixedThreadPool(PARALLEL, runnable -> {
            Thread thread = new Thread(runnable);
            thread.setDaemon(true);
            return thread;
        });
        List<Future<?>> runs = new ArrayList<>();
        List<String> aclSteps = new ArrayList<>();
        for (String name : names) {
            if (setting(name, "kind").startsWith("acl_")) {
                aclSteps.add(name);
            } else {
                runs.add(pool.submit(() -> Json.emit(runOne(name))));
            }
        }
        // The ACL story's steps build on each other: one after another, in their order.
        if (!aclSteps.isEmpty()) {
            runs.add(pool.submit(() -> {
                try {
                    for (String name : aclSteps) {
                        Json.emit(runOne(name));
                    }
                } finally {
                    AclStory.close();
                }
            }));
        }
        for (Future<?> run : runs) {
            run.get();
        }
        System.out.flush();
        // Clients a timed-out scenario left behind must not keep the JVM alive.
        System.exit(0);
    }

    static Map<String, Object> runOne(String name) {
        Json.emit(Map.of("start", name));
        Map<String, Object> data = Collections.synchronizedMap(new LinkedHashMap<>());
        ExecutorService worker = Executors.newSingleThreadExecutor(runnable -> {
            Thread thread = new Thread(runnable, "scenario-" + name);
            thread.setDaemon(true);
            return thread;
        });
        long started = System.nanoTime();
        String error = null;
        Future<?> running = worker.submit(() -> {
            String kind = setting(name, "kind");
            switch (kind) {
                case "round_trip" -> roundTrip(name, data);
                case "refused" -> refused(name, data);
                case "acl_admin" -> AclStory.admin(name, data);
                case "acl_served" -> AclStory.served(name, data);
                case "acl_produce_refused" -> AclStory.produceRefused(name, data);
                case "acl_consume_refused" -> AclStory.consumeRefused(name, data);
                case "acl_deleted" -> AclStory.deleted(name, data);
                default -> throw new IllegalArgumentException("no scenario kind " + kind);
            }
            return null;
        });
        try {
            running.get(SCENARIO_SECONDS, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            error = "scenario did not finish within " + SCENARIO_SECONDS + " s";
            running.cancel(true);
        } catch (ExecutionException e) {
            error = Json.describe(e.getCause(), "SecurityScenarios");
        } catch (InterruptedException e) {
            error = "interrupted";
            Thread.currentThread().interrupt();
        }
        worker.shutdownNow();
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("scenario", name);
        result.put("ok", error == null);
        result.put("error", error);
        synchronized (data) {
            result.put("data", new LinkedHashMap<>(data));
        }
        result.put("seconds", (System.nanoTime() - started) / 1e9);
        return result;
    }

    // --- the two kinds of scenario ---

    // Creates the topic, produces `count` records with acks=all and reads them back from
    // the earliest offset, every client on the scenario's listener with its security.
    static void roundTrip(String name, Map<String, Object> data) throws Exception {
        String topic = setting(name, "topic");
        int count = Integer.parseInt(setting(name, "count"));
        try (Admin admin = Admin.create(client(name, "admin"))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(20, TimeUnit.SECONDS);
        }
        Properties producerProps = client(name, "producer");
        producerProps.put("acks", "all");
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, topic + "-" + i)));
            }
            for (Future<RecordMetadata> acknowledged : sent) {
                acknowledged.get(20, TimeUnit.SECONDS);
            }
        }
        Properties consumerProps = client(name, "consumer");
        consumerProps.put("key.deserializer", StringDeserializer.class.getName());
        consumerProps.put("value.deserializer", StringDeserializer.class.getName());
        consumerProps.put("enable.auto.commit", "false");
        consumerProps.put("auto.offset.reset", "earliest");
        List<String> values = new ArrayList<>();
        data.put("values", values);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (values.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                }
            }
        }
    }

    // The client must not get in: a producer's send and an admin call each fail, within
    // their bounds; what they failed with is the scenario's data.
    static void refused(String name, Map<String, Object> data) throws Exception {
        String topic = "refused-" + name;
        Properties producerProps = client(name, "producer");
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        Map<String, Object> producerOutcome;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            producerOutcome = outcome(() -> producer.send(new ProducerRecord<>(topic, "v")).get(20, TimeUnit.SECONDS));
            producer.close(Duration.ZERO);
        }
        data.put("producer", producerOutcome);
        try (Admin admin = Admin.create(client(name, "admin"))) {
            data.put("admin", outcome(() -> admin.listTopics().names().get(20, TimeUnit.SECONDS)));
            admin.close(Duration.ZERO);
        }
    }

    // --- the ACL story ---

    // Its steps, in order: the super user grants alice what she needs (and reads the ACLs
    // back); alice is served; bob, with no grant, is refused as a producer and as a
    // consumer; the super user deletes alice's WRITE, and alice is refused from then on.
    static final class AclStory {
        // alice's producer, kept from the step that serves her to the one that revokes
        // her WRITE: her next send goes through it.
        static volatile KafkaProducer<String, String> allowedProducer;

        static Properties as(String name, String role, String user) throws Exception {
            return client(name, role + "-" + user, setting(name, user + "_user"), setting(name, user + "_password"));
        }

        static KafkaProducer<String, String> producer(String name, String role, String user) throws Exception {
            Properties props = as(name, role, user);
            props.put("acks", "all");
            props.put("key.serializer", StringSerializer.class.getName());
            props.put("value.serializer", StringSerializer.class.getName());
            return new KafkaProducer<>(props);
        }

        static KafkaConsumer<String, String> consumer(String name, String role, String user) throws Exception {
            Properties props = as(name, role, user);
            props.put("group.id", setting(name, "group"));
            props.put("key.deserializer", StringDeserializer.class.getName());
            props.put("value.deserializer", StringDeserializer.class.getName());
            props.put("enable.auto.commit", "false");
            props.put("auto.offset.reset", "earliest");
            return new KafkaConsumer<>(props);
        }

        // The super user creates the grants through the admin API and describes every ACL
        // (filter: any); the data is what it read back.
        static void admin(String name, Map<String, Object> data) throws Exception {
            List<AclBinding> grants = new ArrayList<>();
            for (String grant : setting(name, "grants").split(";")) {
                grants.add(binding(grant));
            }
            try (Admin admin = Admin.create(as(name, "admin", "admin"))) {
                admin.createAcls(grants).all().get(20, TimeUnit.SECONDS);
                Collection<AclBinding> described = admin.describeAcls(AclBindingFilter.ANY).values().get(20, TimeUnit.SECONDS);
                data.put("described", described.stream().map(AclStory::fields).toList());
            }
        }

        // alice sends `count` records with acks=all (the default idempotent producer), then
        // reads them back in the group and commits; the data is the values read and the
        // group's committed offset as she then fetches it.
        static void served(String name, Map<String, Object> data) throws Exception {
            String topic = setting(name, "topic");
            int count = Integer.parseInt(setting(name, "count"));
            allowedProducer = producer(name, "producer", "allowed");
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(allowedProducer.send(new ProducerRecord<>(topic, topic + "-" + i)));
            }
            for (Future<RecordMetadata> acknowledged : sent) {
                acknowledged.get(20, TimeUnit.SECONDS);
            }
            List<String> values = new ArrayList<>();
            data.put("values", values);
            TopicPartition partition = new TopicPartition(topic, 0);
            try (KafkaConsumer<String, String> consumer = consumer(name, "consumer", "allowed")) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (values.size() < count && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                        values.add(record.value());
                    }
                }
                consumer.commitSync(Duration.ofSeconds(20));
                OffsetAndMetadata committed = consumer.committed(Set.of(partition), Duration.ofSeconds(20)).get(partition);
                data.put("committed", committed == null ? null : committed.offset());
            }
        }

        // bob, with no grant, sends one record to the topic; then the super user reads the
        // topic's end offset.
        static void produceRefused(String name, Map<String, Object> data) throws Exception {
            data.put("producer", sendOnce(name, "producer", "refused"));
            data.put("end_offset", endOffset(name));
        }

        static long endOffset(String name) throws Exception {
            TopicPartition partition = new TopicPartition(setting(name, "topic"), 0);
            try (Admin admin = Admin.create(as(name, "admin", "admin"))) {
                return admin.listOffsets(Map.of(partition, OffsetSpec.latest())).partitionResult(partition)
                        .get(20, TimeUnit.SECONDS).offset();
            }
        }

        // bob, with no grant, reads the topic in the group: the first poll that fails ends
        // it; the data is that failure, or that he read a record (or nothing, and no error)
        // within the bound. Then he asks for the group's committed offset, which looks up
        // the group alone.
        static void consumeRefused(String name, Map<String, Object> data) throws Exception {
            try (KafkaConsumer<String, String> consumer = consumer(name, "consumer", "refused")) {
                consumer.subscribe(List.of(setting(name, "topic")));
                data.put("consumer", outcome(() -> {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
                    int read = 0;
                    while (read == 0 && System.nanoTime() < deadline) {
                        read += consumer.poll(Duration.ofMillis(200)).count();
                    }
                    return read;
                }));
                consumer.close(Duration.ZERO);
            }
            TopicPartition partition = new TopicPartition(setting(name, "topic"), 0);
            try (KafkaConsumer<String, String> consumer = consumer(name, "offsets", "refused")) {
                data.put("offsets", outcome(() -> consumer.committed(Set.of(partition), Duration.ofSeconds(8))));
                consumer.close(Duration.ZERO);
            }
        }

        // The super user deletes alice's WRITE with a filter that matches exactly it; the
        // data is what the deletion reports, then what alice's next send through her
        // producer and a send through a new producer of hers each end with, and the
        // topic's end offset after them.
        static void deleted(String name, Map<String, Object> data) throws Exception {
            AclBindingFilter revoke = binding(setting(name, "revoke")).toFilter();
            try (Admin admin = Admin.create(as(name, "admin", "admin"))) {
                DeleteAclsResult.FilterResults results = admin.deleteAcls(List.of(revoke)).values().get(revoke).get(20, TimeUnit.SECONDS);
                List<Object> deleted = new ArrayList<>();
                for (DeleteAclsResult.FilterResult result : results.values()) {
                    deleted.add(result.exception() == null ? fields(result.binding()) : Json.describe(result.exception(), "SecurityScenarios"));
                }
                data.put("deleted", deleted);
            }
            String topic = setting(name, "topic");
            KafkaProducer<String, String> held = allowedProducer != null ? allowedProducer : producer(name, "producer", "allowed");
            allowedProducer = held;
            data.put("producer", outcome(() -> held.send(new ProducerRecord<>(topic, "after-revoke")).get(20, TimeUnit.SECONDS)));
            data.put("new_producer", sendOnce(name, "new-producer", "allowed"));
            data.put("end_offset", endOffset(name));
        }

        static Map<String, Object> sendOnce(String name, String role, String user) throws Exception {
            String topic = setting(name, "topic");
            try (KafkaProducer<String, String> producer = producer(name, role, user)) {
                Map<String, Object> sent = outcome(() -> producer.send(new ProducerRecord<>(topic, "v")).get(20, TimeUnit.SECONDS));
                producer.close(Duration.ZERO);
                return sent;
            }
        }

        static void close() {
            if (allowedProducer != null) {
                allowedProducer.close(Duration.ZERO);
                allowedProducer = null;
            }
        }

        // `type,name,pattern,principal,host,operation,permission` as Kafka names them.
        static AclBinding binding(String text) {
            String[] f = text.split(",", -1);
            if (f.length != 7) {
                throw new IllegalArgumentException("not an ACL: " + text);
            }
            return new AclBinding(
                    new ResourcePattern(ResourceType.valueOf(f[0]), f[1], PatternType.valueOf(f[2])),
                    new AccessControlEntry(f[3], f[4], AclOperation.valueOf(f[5]), AclPermissionType.valueOf(f[6])));
        }

        static List<String> fields(AclBinding binding) {
            return List.of(
                    binding.pattern().resourceType().name(),
                    binding.pattern().name(),
                    binding.pattern().patternType().name(),
                    binding.entry().principal(),
                    binding.entry().host(),
                    binding.entry().operation().name(),
                    binding.entry().permissionType().name());
        }
    }

    @FunctionalInterface
    interface Call {
        Object call() throws Exception;
    }

    // {"failed": false} or {"failed": true, "class": ..., "message": ..., "causes": [...]}
    // of the exception the call ended with (the cause a future's ExecutionException
    // carries); "causes" are the classes of the exceptions it wraps, outermost first.
    static Map<String, Object> outcome(Call call) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            call.call();
            out.put("failed", false);
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            out.put("failed", true);
            out.put("class", cause.getClass().getName());
            out.put("message", cause.getMessage());
            List<String> causes = new ArrayList<>();
            for (Throwable t = cause.getCause(); t != null && causes.size() < 6; t = t.getCause()) {
                causes.add(t.getClass().getName());
            }
            out.put("causes", causes);
            out.put("description", Json.describe(cause, "SecurityScenarios"));
        }
        return out;
    }

    // --- client settings ---

    static Properties client(String name, String role) throws Exception {
        return client(name, role, settings.getProperty(name + ".username"), settings.getProperty(name + ".password"));
    }

    static Properties client(String name, String role, String username, String password) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", setting(name, "bootstrap"));
        props.put("client.id", "security-" + name + "-" + role);
        props.put("security.protocol", setting(name, "protocol"));
        props.put("request.timeout.ms", CALL_MS);
        props.put("default.api.timeout.ms", CALL_MS);
        props.put("max.block.ms", CALL_MS);
        props.put("delivery.timeout.ms", "15000");
        props.put("linger.ms", "0");
        props.put("retry.backoff.ms", "100");
        props.put("reconnect.backoff.ms", "100");
        props.put("reconnect.backoff.max.ms", "500");
        String mechanism = settings.getProperty(name + ".mechanism");
        if (mechanism != null) {
            String module = mechanism.equals("PLAIN")
                    ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                    : "org.apache.kafka.common.security.scram.ScramLoginModule";
            props.put("sasl.mechanism", mechanism);
            props.put("sasl.jaas.config", module + " required username=" + quoted(username)
                    + " password=" + quoted(password) + ";");
        }
        String ca = settings.getProperty(name + ".ca");
        if (ca != null) {
            props.put("ssl.truststore.type", "PEM");
            props.put("ssl.truststore.location", ca);
            // The server's certificate names 127.0.0.1 and localhost: verify it as HTTPS does.
            props.put("ssl.endpoint.identification.algorithm", "https");
        }
        String certificate = settings.getProperty(name + ".certificate");
        if (certificate != null) {
            // Kafka's PEM key store: the chain and an unencrypted PKCS#8 key, given inline.
            props.put("ssl.keystore.type", "PEM");
            props.put("ssl.keystore.certificate.chain", read(certificate));
            props.put("ssl.keystore.key", read(setting(name, "key")));
        }
        return props;
    }

    static String setting(String name, String key) {
        String value = settings.getProperty(name + "." + key);
        if (value == null) {
            throw new IllegalArgumentException("scenario " + name + " has no " + key);
        }
        return value;
    }

    static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String read(String path) throws Exception {
        return Files.readString(Path.of(path), StandardCharsets.US_ASCII);
    }
}
