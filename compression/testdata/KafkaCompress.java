// KafkaCompress compresses a file as the Java client compresses a batch's
// records: with kafka-clients' own Compression classes, at the codec's
// default level unless one is given. It made vectors/records.json.kafka.lz4
// and the Java sizes of TestCompressedSizeNoWorseThanJavaClient:
//
//   java -cp 'interop/kafka/target/lib/*' KafkaCompress.java CODEC IN OUT [LEVEL]
//
// (interop/kafka/start.sh fills interop/kafka/target/lib with kafka-clients
// 4.4.0 and its codecs: snappy-java, lz4-java, zstd-jni.)
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.internals.ByteBufferOutputStream;

public class KafkaCompress {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: KafkaCompress gzip|snappy|lz4|zstd IN OUT [LEVEL]");
            System.exit(2);
        }
        Compression codec = switch (args[0]) {
            case "gzip" -> args.length > 3 ? Compression.gzip().level(Integer.parseInt(args[3])).build() : Compression.gzip().build();
            case "lz4" -> args.length > 3 ? Compression.lz4().level(Integer.parseInt(args[3])).build() : Compression.lz4().build();
            case "zstd" -> args.length > 3 ? Compression.zstd().level(Integer.parseInt(args[3])).build() : Compression.zstd().build();
            default -> Compression.of(args[0]).build();
        };
        byte[] in = Files.readAllBytes(Path.of(args[1]));
        ByteBufferOutputStream out = new ByteBufferOutputStream(in.length / 2 + 64);
        // Magic 2, the record batch format every Kafka 4 client writes.
        try (OutputStream w = codec.wrapForOutput(out, (byte) 2)) {
            w.write(in);
        }
        ByteBuffer b = out.buffer();
        b.flip();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        Files.write(Path.of(args[2]), bytes);
    }
}
