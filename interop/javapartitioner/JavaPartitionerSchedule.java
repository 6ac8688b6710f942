// Drives kafka-clients' KafkaProducer (its BuiltInPartitioner, KIP-794)
// through a schedule of phases whose broker latencies the Go test sets, and
// prints the records each partition got per phase. javapartitioner_test.go
// runs it and the samsa producer on the same schedule and compares.
//
// Usage: JavaPartitionerSchedule BOOTSTRAP TOPIC ADAPTIVE AVAILABILITY_MS
//        PHASES PHASE_MS RECORD_BYTES BATCH_BYTES RECORDS_PER_SECOND
//
// Protocol on stdin and stdout, one line each:
//   PINFO p leader replicas isr offline   partitionsFor(topic), before any phase
//   PHASE i   then it reads a line (the Go side has set phase i's faults)
//             and sends keyless records for PHASE_MS at RECORDS_PER_SECOND
//   SENT      then it reads a line (faults lifted), flushes, and prints
//   RESULT i p n   records of phase i acknowledged on partition p
//   END
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class JavaPartitionerSchedule {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        boolean adaptive = Boolean.parseBoolean(args[2]);
        long availabilityMs = Long.parseLong(args[3]);
        int phases = Integer.parseInt(args[4]);
        long phaseMs = Long.parseLong(args[5]);
        int recordBytes = Integer.parseInt(args[6]);
        int batchBytes = Integer.parseInt(args[7]);
        long rate = Long.parseLong(args[8]);

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "java-partitioner");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "1");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(batchBytes));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "60000");
        props.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, "false");
        props.put(ProducerConfig.PARTITIONER_ADPATIVE_PARTITIONING_ENABLE_CONFIG, Boolean.toString(adaptive));
        props.put(ProducerConfig.PARTITIONER_AVAILABILITY_TIMEOUT_MS_CONFIG, Long.toString(availabilityMs));

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<PartitionInfo> infos = producer.partitionsFor(topic);
            int partitions = infos.size();
            for (PartitionInfo pi : infos) {
                System.out.println("PINFO " + pi.partition() + " " + (pi.leader() == null ? -1 : pi.leader().id())
                    + " " + ids(pi.replicas()) + " " + ids(pi.inSyncReplicas()) + " " + ids(pi.offlineReplicas()));
            }
            AtomicIntegerArray[] counts = new AtomicIntegerArray[phases];
            AtomicInteger failed = new AtomicInteger();
            byte[] value = new byte[recordBytes];
            for (int ph = 0; ph < phases; ph++) {
                counts[ph] = new AtomicIntegerArray(partitions);
                System.out.println("PHASE " + ph);
                System.out.flush();
                in.readLine();
                final AtomicIntegerArray c = counts[ph];
                long start = System.nanoTime(), sent = 0, total = rate * phaseMs / 1000;
                while (sent < total) {
                    // A fixed rate: the records due by now, then a nap.
                    long due = Math.min(total, (System.nanoTime() - start) / 1000 * rate / 1_000_000);
                    for (; sent < due; sent++) {
                        producer.send(new ProducerRecord<>(topic, value), (md, err) -> {
                            if (err != null) {
                                failed.incrementAndGet();
                            } else {
                                c.incrementAndGet(md.partition());
                            }
                        });
                    }
                    Thread.sleep(1);
                }
            }
            System.out.println("SENT");
            System.out.flush();
            in.readLine();
            producer.flush();
            for (int ph = 0; ph < phases; ph++) {
                for (int p = 0; p < partitions; p++) {
                    System.out.println("RESULT " + ph + " " + p + " " + counts[ph].get(p));
                }
            }
            System.out.println("FAILED " + failed.get());
            System.out.println("END");
            System.out.flush();
            producer.close(Duration.ofSeconds(5));
        }
    }

    private static String ids(Node[] nodes) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < nodes.length; i++) {
            if (i > 0) sb.append(',');
            sb.append(nodes[i].id());
        }
        return sb.append(']').toString();
    }
}
