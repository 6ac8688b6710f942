// JavaTxnExpiry runs the Java client (kafka-clients, from the jars start.sh
// copies into target/lib) through an expired transactional id, for interop's
// TestRealKafkaSoak (event "txn-id expiry"): what does KafkaProducer do when
// the broker has forgotten its transactional id while it idled?
//
//   java -cp 'target/lib/*:CLASSES' JavaTxnExpiry BOOTSTRAP TOPIC TXNID IDLE_MS
//
// It commits 3 transactions of 10 records (values "c<txn>-<i>"), idles
// IDLE_MS (longer than the broker's transactional.id.expiration.ms), then
// tries a 4th transaction (values "x-<i>") and prints what failed, with the
// exception chain and whether abortTransaction is then allowed (abortable)
// or refused (fatal); then a new KafkaProducer with the same transactional
// id commits a 5th transaction (values "r-<i>"). One line per step:
//
//   COMMITTED 30
//   FAILED <step> <class>: <message> [<- <cause class>: <message>]...
//   ABORT ok | ABORT <class>: <message>
//   RECOVERED 10 | RECOVER-FAILED <class>: <message>
//
// Exits 0 whenever it got that far; a failure before the idle exits 1.
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaTxnExpiry {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: JavaTxnExpiry BOOTSTRAP TOPIC TXNID IDLE_MS");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], txnID = args[2];
        long idle = Long.parseLong(args[3]);
        KafkaProducer<String, String> p = producer(bootstrap, txnID);
        p.initTransactions();
        for (int t = 0; t < 3; t++) {
            p.beginTransaction();
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, "c" + t + "-" + i));
            }
            p.commitTransaction();
        }
        System.out.println("COMMITTED 30");
        System.out.flush();
        Thread.sleep(idle);

        String step = "beginTransaction";
        try {
            p.beginTransaction();
            step = "send";
            Future<?>[] fs = new Future<?>[10];
            for (int i = 0; i < 10; i++) {
                fs[i] = p.send(new ProducerRecord<>(topic, 0, null, "x-" + i));
            }
            step = "flush";
            p.flush();
            step = "send-future";
            for (Future<?> f : fs) {
                f.get();
            }
            step = "commitTransaction";
            p.commitTransaction();
            System.out.println("NO-FAILURE the 4th transaction committed");
        } catch (Exception e) {
            System.out.println("FAILED " + step + " " + chain(e));
            try {
                p.abortTransaction();
                System.out.println("ABORT ok");
            } catch (Exception a) {
                System.out.println("ABORT " + chain(a));
            }
        }
        p.close();

        try (KafkaProducer<String, String> q = producer(bootstrap, txnID)) {
            q.initTransactions();
            q.beginTransaction();
            for (int i = 0; i < 10; i++) {
                q.send(new ProducerRecord<>(topic, 0, null, "r-" + i));
            }
            q.commitTransaction();
            System.out.println("RECOVERED 10");
        } catch (Exception e) {
            System.out.println("RECOVER-FAILED " + chain(e));
        }
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnID) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "java-txn-expiry");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    // chain prints an exception and its causes, outermost first.
    static String chain(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (b.length() > 0) {
                b.append(" <- ");
            }
            b.append(c.getClass().getName()).append(": ").append(String.valueOf(c.getMessage()).replace('\n', ' '));
            if (c.getCause() == c) {
                break;
            }
        }
        return b.toString();
    }
}
