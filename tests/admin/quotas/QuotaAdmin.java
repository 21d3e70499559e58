// Client quotas through the Java Admin client (4.x): set, described by filter, refused,
// removed. Prints one line per finding; tests/admin/test_quotas_clients.py checks them.
// Run: java -cp <kafka-clients jars> QuotaAdmin.java <bootstrap> <user> <client-id>

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

public class QuotaAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        String user = args[1];
        String clientId = args[2];
        Map<String, String> pairNames = new TreeMap<>();
        pairNames.put(ClientQuotaEntity.USER, user);
        pairNames.put(ClientQuotaEntity.CLIENT_ID, clientId);
        ClientQuotaEntity alone = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaEntity pair = new ClientQuotaEntity(pairNames);
        ClientQuotaFilter ofUser = ClientQuotaFilter.contains(
            List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        try (Admin admin = Admin.create(props)) {
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(alone, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2097152.0),
                    new ClientQuotaAlteration.Op("request_percentage", 150.5))),
                new ClientQuotaAlteration(pair, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all().get();
            print("set", describe(admin, ofUser, 2));

            AlterClientQuotasOptions validateOnly = new AlterClientQuotasOptions().validateOnly(true);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alone, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 5.0)))), validateOnly).all().get();
            ClientQuotaFilter strict = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
            print("validated", describe(admin, strict, 1));

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
            print("removed", describe(admin, ofUser, 0));
        }
    }

    // The quotas the filter finds, once there are `expected` entities (Kafka applies an
    // alteration a moment after answering it), as sorted lines.
    static List<String> describe(Admin admin, ClientQuotaFilter filter, int expected) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            Map<ClientQuotaEntity, Map<String, Double>> found = admin.describeClientQuotas(filter).entities().get();
            if (found.size() == expected || System.currentTimeMillis() > deadline) {
                List<String> lines = new ArrayList<>();
                for (Map.Entry<ClientQuotaEntity, Map<String, Double>> entry : found.entrySet()) {
                    lines.add(new TreeMap<>(entry.getKey().entries()) + " " + new TreeMap<>(entry.getValue()));
                }
                Collections.sort(lines);
                return lines;
            }
            Thread.sleep(100);
        }
    }

    static void print(String step, List<String> lines) {
        System.out.println(step + " " + lines.size());
        for (String line : lines) {
            System.out.println(step + " " + line);
        }
    }
}
