// kafka-clients 4.4's KafkaProducer driven line by line over stdin, for
// javadiff_test.go: the cases where samsa departs from Java on purpose are
// run on both clients, and the test reads here what Java did with each
// record and which cluster ids its metadata took.
//
// Usage: JavaDiffProducer TOPIC [KEY=VALUE]...   (producer properties)
//
// Commands on stdin, one a line:
//   send PREFIX N   send N records with values PREFIX-0 ... PREFIX-(N-1)
//   pump PREFIX MS  send PREFIX-0, PREFIX-1, ... one every MS ms until stop
//   stop            stop the pump, then print STOPPED SENT (records pumped)
//   flush           producer.flush(), then print FLUSHED
//   close           producer.close(), print CLOSED and exit
// Lines on stdout:
//   READY                         the producer is built
//   CLUSTER ID                    its metadata took cluster id ID (the value
//                                 serializer is a ClusterResourceListener,
//                                 which KafkaProducer calls on every update)
//   ACK VALUE PARTITION OFFSET    a record acknowledged
//   FAIL VALUE CLASS MESSAGE      a record failed with that exception
// kafka-clients' own log goes to stderr (slf4j-simple): INFO, and DEBUG
// for NetworkClient, whose "Sending PRODUCE request" lines show each
// request's version and topic ids.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ClusterResource;
import org.apache.kafka.common.ClusterResourceListener;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;

// An instance is the producer's value serializer and reports each cluster
// id the producer's metadata takes (one class: javaCommand compiles one
// class file).
public class JavaDiffProducer implements Serializer<String>, ClusterResourceListener {
    static synchronized void out(String line) {
        System.out.println(line.replace('\n', ' '));
        System.out.flush();
    }

    private final StringSerializer inner = new StringSerializer();
    private String last;

    @Override
    public synchronized void onUpdate(ClusterResource cluster) {
        String id = cluster.clusterId();
        if (id != null && !id.equals(last)) {
            last = id;
            out("CLUSTER " + id);
        }
    }

    @Override
    public byte[] serialize(String topic, String value) {
        return inner.serialize(topic, value);
    }

    public static void main(String[] args) throws Exception {
        // kafka-clients' log on stderr (slf4j-simple, read before the first
        // logger is made): INFO, and NetworkClient's DEBUG, which shows
        // each request sent with its version and body.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "info");
        System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "debug");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        String topic = args[0];
        Properties props = new Properties();
        props.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, "false");
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        KafkaProducer<String, String> producer = new KafkaProducer<>(props, new StringSerializer(), new JavaDiffProducer());
        out("READY");
        AtomicBoolean pumping = new AtomicBoolean();
        AtomicInteger pumped = new AtomicInteger();
        Thread pump = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "send":
                    for (int i = 0; i < Integer.parseInt(f[2]); i++) {
                        send(producer, topic, f[1] + "-" + i);
                    }
                    break;
                case "pump":
                    String prefix = f[1];
                    long every = Long.parseLong(f[2]);
                    pumping.set(true);
                    pump = new Thread(() -> {
                        while (pumping.get()) {
                            send(producer, topic, prefix + "-" + pumped.getAndIncrement());
                            try {
                                Thread.sleep(every);
                            } catch (InterruptedException e) {
                                return;
                            }
                        }
                    });
                    pump.start();
                    break;
                case "stop":
                    pumping.set(false);
                    if (pump != null) {
                        pump.join();
                    }
                    out("STOPPED " + pumped.get());
                    break;
                case "flush":
                    producer.flush();
                    out("FLUSHED");
                    break;
                case "close":
                    producer.close();
                    out("CLOSED");
                    return;
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
        }
    }

    static void send(KafkaProducer<String, String> producer, String topic, String value) {
        try {
            producer.send(new ProducerRecord<>(topic, value), (md, err) -> {
                if (err != null) {
                    out("FAIL " + value + " " + err.getClass().getName() + " " + err.getMessage());
                } else {
                    out("ACK " + value + " " + md.partition() + " " + md.offset());
                }
            });
        } catch (Exception e) {
            out("FAIL " + value + " " + e.getClass().getName() + " " + e.getMessage());
        }
    }
}
