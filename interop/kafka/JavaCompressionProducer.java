// JavaCompressionProducer produces the records of payload files with the Java
// client (kafka-clients, from the jars start.sh copies into target/lib), for
// interop's TestRealKafkaCompressionNoWorseThanJava, which produces the same
// records with samsa and compares the bytes the broker stores.
//
//   java -cp 'target/lib/*:CLASSES' JavaCompressionProducer BOOTSTRAP BATCH PARTITIONS TOPIC=CODEC=FILE...
//
// FILE holds the record values back to back, each 1024 bytes. Record i goes
// to partition (i / BATCH) % PARTITIONS, with no key and no header; after
// every BATCH × PARTITIONS records the producer flushes, so every batch holds
// exactly BATCH records (linger.ms is long and batch.size large, so nothing
// else closes a batch), the same batches samsa sends. Settings not named
// here are the Java client's defaults (acks=all, idempotence on, the codec's
// default level). Prints one line per topic; any failure exits non-zero.
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class JavaCompressionProducer {
    static final int VALUE_SIZE = 1024;

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: JavaCompressionProducer BOOTSTRAP BATCH PARTITIONS TOPIC=CODEC=FILE...");
            System.exit(2);
        }
        String bootstrap = args[0];
        int batch = Integer.parseInt(args[1]);
        int partitions = Integer.parseInt(args[2]);
        for (String spec : Arrays.copyOfRange(args, 3, args.length)) {
            String[] f = spec.split("=", 3);
            byte[] values = Files.readAllBytes(Path.of(f[2]));
            int n = produce(bootstrap, f[0], f[1], values, batch, partitions);
            System.out.println(f[0] + " " + f[1] + " " + n);
        }
    }

    static int produce(String bootstrap, String topic, String codec, byte[] values, int batch, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "60000");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(256 << 10));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "java-compression-" + codec);
        int n = values.length / VALUE_SIZE;
        Future<?>[] acks = new Future<?>[n];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < n; i++) {
                byte[] v = Arrays.copyOfRange(values, i * VALUE_SIZE, (i + 1) * VALUE_SIZE);
                acks[i] = producer.send(new ProducerRecord<>(topic, (i / batch) % partitions, null, v));
                if ((i + 1) % (batch * partitions) == 0) {
                    producer.flush();
                }
            }
            producer.flush();
            for (Future<?> a : acks) {
                a.get(); // throws if the record failed
            }
        }
        return n;
    }
}
