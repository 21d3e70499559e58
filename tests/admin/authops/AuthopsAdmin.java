// Kafka's Java Admin client (4.x) for the authorized-operations and per-broker config
// scenarios of tests/admin/test_authops_java.py. Arguments: the bootstrap servers, then
// steps, each printing one JSON line:
//   ops:TOPIC:GROUP       authorized operations of the topic, the cluster and the group
//                         (asked for), and of the topic not asked for
//   set:NODE:NAME:VALUE   incrementalAlterConfigs SET on BROKER NODE ("" cluster-wide)
//   describe:NODE:NAME    describeConfigs of BROKER NODE with synonyms: one config
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;

public final class AuthopsAdmin {
    private static final long TIMEOUT_S = 30;

    private AuthopsAdmin() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            for (int i = 1; i < args.length; i++) {
                String[] step = args[i].split(":", -1);
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("step", args[i]);
                try {
                    switch (step[0]) {
                        case "ops" -> operations(admin, step[1], step[2], line);
                        case "set" -> set(admin, step[1], step[2], step[3]);
                        case "describe" -> describe(admin, step[1], step[2], line);
                        default -> throw new IllegalArgumentException("unknown step " + step[0]);
                    }
                } catch (Exception e) {
                    line.put("error", Json.describe(e, "AuthopsAdmin"));
                }
                Json.emit(line);
            }
        }
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
}
