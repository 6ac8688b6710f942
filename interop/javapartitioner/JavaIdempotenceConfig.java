import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigException;

/**
 * Reads cases from stdin, one a line: a name, a tab, then key=value pairs
 * separated by tabs. For each, builds new ProducerConfig(props) with
 * bootstrap.servers and the serializers set, as new KafkaProducer(props)
 * does first, and prints one line: the name, a tab, then either
 * "OK enable.idempotence=... acks=... max.in.flight.requests.per.connection=... retries=..."
 * (the values ProducerConfig holds after its post-processing) or
 * "ERR " and the ConfigException's message. Used by
 * javaconfig_test.go (TestIdempotenceConflictsMatchJava).
 */
public class JavaIdempotenceConfig {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] fields = line.split("\t");
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:9092");
            props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.ByteArraySerializer");
            props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.ByteArraySerializer");
            for (int i = 1; i < fields.length; i++) {
                int eq = fields[i].indexOf('=');
                props.put(fields[i].substring(0, eq), fields[i].substring(eq + 1));
            }
            String out;
            try {
                ProducerConfig c = new ProducerConfig(props);
                out = "OK enable.idempotence=" + c.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG)
                    + " acks=" + c.getString(ProducerConfig.ACKS_CONFIG)
                    + " max.in.flight.requests.per.connection=" + c.getInt(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION)
                    + " retries=" + c.getInt(ProducerConfig.RETRIES_CONFIG);
            } catch (ConfigException e) {
                out = "ERR " + e.getMessage();
            }
            System.out.println(fields[0] + "\t" + out);
        }
    }
}
