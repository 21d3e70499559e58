// Kafka's Java Admin client (4.x) for the admin scenario catalogue of tests/admin
// (tests/admin/drivers.py builds and runs it). Arguments: the bootstrap servers, then
// named steps, run in order on one Admin:
//   ops:TOPIC:GROUP       one JSON line: authorized operations of the topic, the cluster
//                         and the group (asked for), and of the topic not asked for
//   set:NODE:NAME:VALUE   one JSON line: incrementalAlterConfigs SET on BROKER NODE
//                         ("" cluster-wide)
//   describe:NODE:NAME    one JSON line: describeConfigs of BROKER NODE with synonyms
//   quotas:USER:CLIENT    client quotas set, described by filter, refused and removed:
//                         lines "<what> <count>" and "<what> <entity> <values>"
//   replicas:TOPIC        one JSON line: partitions placed by hand on a three-node
//                         cluster, moved, listed and a preferred leader elected; each
//                         outcome "ok" or the exception's simple class name
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

public final class AdminScenarios {
    private static final long TIMEOUT_S = 30;
    private static final String PROGRAM = "AdminScenarios";

    private AdminScenarios() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            for (int i = 1; i < args.length; i++) {
                String[] step = args[i].split(":", -1);
                switch (step[0]) {
                    case "quotas" -> quotas(admin, step[1], step[2]);
                    case "replicas" -> Json.emit(replicas(admin, step[1]));
                    default -> Json.emit(configStep(admin, args[i], step));
                }
            }
        }
    }

    // --- authorized operations and per-broker configs: a JSON line per step ---------

    private static Map<String, Object> configStep(Admin admin, String arg, String[] step) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", arg);
        try {
            switch (step[0]) {
                case "ops" -> operations(admin, step[1], step[2], line);
                case "set" -> set(admin, step[1], step[2], step[3]);
                case "describe" -> describe(admin, step[1], step[2], line);
                default -> throw new IllegalArgumentException("unknown step " + step[0]);
            }
        } catch (Exception e) {
            line.put("error", Json.describe(e, PROGRAM));
        }
        return line;
    }

    private static List<String> names(Set<AclOperation> operations) {
        if (operations == null) {
            return null;
        }
        Set<String> sorted = new TreeSet<>();
        operations.forEach(operation -> sorted.add(operation.name()));
        return new ArrayList<>(sorted);
    }

    private static void operations(Admin admin, String topic, String group, Map<String, Object> line)
            throws Exception {
        DescribeTopicsOptions asked = new DescribeTopicsOptions().includeAuthorizedOperations(true);
        line.put("topic", names(admin.describeTopics(List.of(topic), asked).allTopicNames()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic).authorizedOperations()));
        line.put("topic_unasked", names(admin.describeTopics(List.of(topic)).allTopicNames()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic).authorizedOperations()));
        line.put("cluster", names(admin.describeCluster(
                new DescribeClusterOptions().includeAuthorizedOperations(true))
                .authorizedOperations().get(TIMEOUT_S, TimeUnit.SECONDS)));
        line.put("group", names(admin.describeConsumerGroups(List.of(group),
                new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                .describedGroups().get(group).get(TIMEOUT_S, TimeUnit.SECONDS)
                .authorizedOperations()));
    }

    private static void set(Admin admin, String node, String name, String value) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER, node);
        Collection<AlterConfigOp> ops =
                List.of(new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET));
        admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    private static void describe(Admin admin, String node, String name, Map<String, Object> line)
            throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER, node);
        ConfigEntry entry = admin.describeConfigs(List.of(resource),
                new DescribeConfigsOptions().includeSynonyms(true)).all()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(resource).get(name);
        line.put("value", entry.value());
        line.put("source", entry.source().name());
        List<Object> synonyms = new ArrayList<>();
        for (ConfigEntry.ConfigSynonym synonym : entry.synonyms()) {
            synonyms.add(List.of(synonym.name(), String.valueOf(synonym.value()),
                    synonym.source().name()));
        }
        line.put("synonyms", synonyms);
    }

    // --- client quotas: lines of text, the same as the other drivers print ----------

    private static void quotas(Admin admin, String user, String clientId) throws Exception {
        Map<String, String> pairNames = new TreeMap<>();
        pairNames.put(ClientQuotaEntity.USER, user);
        pairNames.put(ClientQuotaEntity.CLIENT_ID, clientId);
        ClientQuotaEntity alone = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaEntity pair = new ClientQuotaEntity(pairNames);
        ClientQuotaFilter ofUser = ClientQuotaFilter.contains(
            List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        admin.alterClientQuotas(List.of(
            new ClientQuotaAlteration(alone, List.of(
                new ClientQuotaAlteration.Op("consumer_byte_rate", 2097152.0),
                new ClientQuotaAlteration.Op("request_percentage", 150.5))),
            new ClientQuotaAlteration(pair, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all().get();
        printQuotas("set", describeQuotas(admin, ofUser, 2));

        AlterClientQuotasOptions validateOnly = new AlterClientQuotasOptions().validateOnly(true);
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alone, List.of(
            new ClientQuotaAlteration.Op("producer_byte_rate", 5.0)))), validateOnly).all().get();
        ClientQuotaFilter strict = ClientQuotaFilter.containsOnly(
            List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        printQuotas("validated", describeQuotas(admin, strict, 1));

        for (String key : List.of("no_such_quota", "producer_byte_rate")) {
            double value = key.equals("producer_byte_rate") ? -1.0 : 1.0;
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alone, List.of(
                    new ClientQuotaAlteration.Op(key, value))))).all().get();
                System.out.println("refused " + key + " none");
            } catch (ExecutionException e) {
                System.out.println("refused " + key + " " + e.getCause().getClass().getSimpleName());
            }
        }

        admin.alterClientQuotas(List.of(
            new ClientQuotaAlteration(alone, List.of(
                new ClientQuotaAlteration.Op("consumer_byte_rate", null),
                new ClientQuotaAlteration.Op("request_percentage", null))),
            new ClientQuotaAlteration(pair, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
        printQuotas("removed", describeQuotas(admin, ofUser, 0));
    }

    // The quotas the filter finds, once there are `expected` entities (Kafka applies an
    // alteration a moment after answering it), as sorted lines.
    private static List<String> describeQuotas(Admin admin, ClientQuotaFilter filter, int expected)
            throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            Map<ClientQuotaEntity, Map<String, Double>> found =
                admin.describeClientQuotas(filter).entities().get();
            if (found.size() == expected || System.currentTimeMillis() > deadline) {
                List<String> lines = new ArrayList<>();
                for (Map.Entry<ClientQuotaEntity, Map<String, Double>> entry : found.entrySet()) {
                    lines.add(new TreeMap<>(entry.getKey().entries()) + " "
                        + new TreeMap<>(entry.getValue()));
                }
                Collections.sort(lines);
                return lines;
            }
            Thread.sleep(100);
        }
    }

    private static void printQuotas(String step, List<String> lines) {
        System.out.println(step + " " + lines.size());
        for (String line : lines) {
            System.out.println(step + " " + line);
        }
    }

    // --- replicas: placed by hand, moved, listed, elected --------------------------

    /** "ok", or the simple name of the exception the future failed with. */
    private static String outcome(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get(TIMEOUT_S, TimeUnit.SECONDS);
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (java.util.concurrent.TimeoutException e) {
            return "timeout";
        }
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> found = new ArrayList<>();
        for (Node node : nodes) {
            found.add(node.id());
        }
        return found;
    }

    private static Map<String, Object> replicas(Admin admin, String topic) {
        Map<String, Object> report = new LinkedHashMap<>();
        try {
            Map<Integer, List<Integer>> placed = new TreeMap<>();
            placed.put(0, List.of(0, 1));
            placed.put(1, List.of(1, 2));
            report.put("create", outcome(admin.createTopics(List.of(new NewTopic(topic, placed))).all()));
            Map<Integer, List<Integer>> missing = Map.of(0, List.of(0, 7));
            report.put("create_missing_broker",
                    outcome(admin.createTopics(List.of(new NewTopic(topic + "-x", missing))).all()));
            report.put("grow", outcome(admin.createPartitions(
                    Map.of(topic, NewPartitions.increaseTo(3, List.of(List.of(2, 0))))).all()));
            report.put("grow_missing_broker", outcome(admin.createPartitions(
                    Map.of(topic, NewPartitions.increaseTo(4, List.of(List.of(7, 0))))).all()));

            TopicPartition first = new TopicPartition(topic, 0);
            TopicPartition second = new TopicPartition(topic, 1);
            Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new LinkedHashMap<>();
            moves.put(first, Optional.of(new NewPartitionReassignment(List.of(2, 1))));
            report.put("reassign", outcome(admin.alterPartitionReassignments(moves).all()));
            Map<String, Object> listed = new TreeMap<>();
            for (Map.Entry<TopicPartition, PartitionReassignment> e
                    : admin.listPartitionReassignments().reassignments().get().entrySet()) {
                PartitionReassignment move = e.getValue();
                listed.put(e.getKey().toString(), List.of(
                        move.replicas(), move.addingReplicas(), move.removingReplicas()));
            }
            report.put("listed", listed);
            Map<TopicPartition, Optional<NewPartitionReassignment>> cancel = new LinkedHashMap<>();
            cancel.put(second, Optional.empty());
            report.put("cancel_without_move", outcome(admin.alterPartitionReassignments(cancel).all()));
            Map<TopicPartition, Optional<NewPartitionReassignment>> bad = new LinkedHashMap<>();
            bad.put(second, Optional.of(new NewPartitionReassignment(List.of(7))));
            report.put("reassign_missing_broker", outcome(admin.alterPartitionReassignments(bad).all()));

            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            Map<String, Object> partitions = new TreeMap<>();
            for (TopicPartitionInfo info : described.partitions()) {
                partitions.put(String.valueOf(info.partition()), List.of(
                        info.leader().id(), ids(info.replicas()), ids(info.isr())));
            }
            report.put("described", partitions);

            Map<String, Object> elected = new TreeMap<>();
            for (Map.Entry<TopicPartition, Optional<Throwable>> e : admin.electLeaders(
                    ElectionType.PREFERRED, Set.of(second)).partitions().get().entrySet()) {
                elected.put(e.getKey().toString(),
                        e.getValue().map(t -> t.getClass().getSimpleName()).orElse("ok"));
            }
            report.put("elected", elected);
        } catch (Exception e) {
            report.put("error", Json.describe(e, PROGRAM));
        }
        return report;
    }
}
