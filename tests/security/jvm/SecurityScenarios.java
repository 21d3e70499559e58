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
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
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
        for (String name : names) {
            runs.add(pool.submit(() -> emit(runOne(name))));
        }
        for (Future<?> run : runs) {
            run.get();
        }
        System.out.flush();
        // Clients a timed-out scenario left behind must not keep the JVM alive.
        System.exit(0);
    }

    static Map<String, Object> runOne(String name) {
        emit(Map.of("start", name));
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
            error = describe(e.getCause());
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

    @FunctionalInterface
    interface Call {
        Object call() throws Exception;
    }

    // {"failed": false} or {"failed": true, "class": ..., "message": ...} of the exception
    // the call ended with (the cause a future's ExecutionException carries).
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
            out.put("description", describe(cause));
        }
        return out;
    }

    // --- client settings ---

    static Properties client(String name, String role) throws Exception {
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
            props.put("sasl.jaas.config", module + " required username=" + quoted(setting(name, "username"))
                    + " password=" + quoted(setting(name, "password")) + ";");
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

    // --- reporting ---

    static synchronized void emit(Map<String, Object> line) {
        System.out.println(Json.of(line));
        System.out.flush();
    }

    static String describe(Throwable error) {
        StringBuilder text = new StringBuilder();
        int depth = 0;
        for (Throwable t = error; t != null && depth < 6; t = t.getCause(), depth++) {
            text.append(depth == 0 ? "" : "caused by ").append(t.getClass().getName())
                    .append(": ").append(t.getMessage()).append('\n');
        }
        int shown = 0;
        for (StackTraceElement frame : error.getStackTrace()) {
            if (frame.getClassName().startsWith("SecurityScenarios") && shown++ < 6) {
                text.append("  at ").append(frame).append('\n');
            }
        }
        return text.toString().strip();
    }
}
