import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiKeys;

/** Prints, as JSON, the version range of every API a broker listener of the kafka-clients
 * release on the classpath serves: {"key": [oldest, newest stable], ...}. */
public class BrokerApiVersions {
    public static void main(String[] args) {
        Map<Integer, String> ranges = new TreeMap<>();
        for (ApiKeys key : ApiKeys.apisForListener(ApiMessageType.ListenerType.BROKER)) {
            short newest = key.latestVersion(false);
            if (newest >= key.oldestVersion()) {
                ranges.put((int) key.id, "[" + key.oldestVersion() + ", " + newest + "]");
            }
        }
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<Integer, String> entry : ranges.entrySet()) {
            if (out.length() > 1) out.append(", ");
            out.append('"').append(entry.getKey()).append("\": ").append(entry.getValue());
        }
        System.out.println(out.append('}'));
    }
}
