// Kafka's Java Admin (kafka-clients 4.x) placing, moving and electing replicas on a
// three-node cluster, for tests/admin/test_replicas_java.py:
//
//   java -cp <classes>:<kafka-clients 4.x jars> ReplicaDriver -bootstrap HOST:PORT -topic T
//
// Prints one JSON line: each step's outcome ("ok" or the exception's simple class name),
// and what the Admin read back (replicas and ISR per partition, the moves listed, the
// election results).

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
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

public final class ReplicaDriver {
    private ReplicaDriver() {}

    /** "ok", or the simple name of the exception the future failed with. */
    private static String outcome(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get(30, TimeUnit.SECONDS);
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

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i], args[i + 1]);
        }
        String topic = options.get("-topic");
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("-bootstrap"));
        Map<String, Object> report = new LinkedHashMap<>();
        try (Admin admin = Admin.create(props)) {
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
            report.put("error", Json.describe(e, "ReplicaDriver"));
        }
        Json.emit(report);
    }
}
