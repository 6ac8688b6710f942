// SamsaKafkaSetup is start.sh's and node.sh's one admin step, run on the
// JVM with kafka-clients' Admin: it waits until the cluster's Metadata lists
// the expected brokers, then (optionally) sets the KIP-599 controller
// mutation quota of one client id, and creates the ACL test topic with its
// DENY WRITE ACLs. Each change is read back until the broker serves it, so a
// test that starts right after start.sh sees it.
//
// Usage, formatting storage (one JVM for every node, through the storage
// tool's own entry point; its output goes to stdout):
//   format CONFIG... -- STORAGE_TOOL_FORMAT_ARGS...
//
// Usage, the admin step (every flag is --name value):
//   --bootstrap host:port[,...]   required
//   --nodes N                     brokers that must be registered (default 1)
//   --wait-node ID                also require broker ID to be registered
//   --timeout-sec S               overall deadline (default 120)
//   --quota-client ID --quota-rate R
//   --denied-topic T --deny-principals User:A[,User:B] --rf N
//   --telemetry-subscription NAME --telemetry-metrics P[,P...] --telemetry-interval-ms MS
//     [--telemetry-match client_id=REGEX]   a KIP-714 client metrics subscription
//
// Errors go to stderr and exit with status 1. No secret is ever printed.

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public final class SamsaKafkaSetup {
    private static long deadline;

    public static void main(String[] args) {
        try {
            if (args.length > 0 && args[0].equals("format")) {
                format(args);
                return;
            }
            run(parse(args));
        } catch (Fail f) {
            System.err.println("samsa-kafka-setup: " + f.getMessage());
            System.exit(1);
        } catch (Exception e) {
            System.err.println("samsa-kafka-setup: " + e);
            System.exit(1);
        }
    }

    private static final class Fail extends Exception {
        Fail(String msg) {
            super(msg);
        }
    }

    private static void format(String[] args) throws Fail {
        int sep = List.of(args).indexOf("--");
        if (sep < 2) {
            throw new Fail("usage: format CONFIG... -- STORAGE_TOOL_FORMAT_ARGS...");
        }
        for (int i = 1; i < sep; i++) {
            List<String> a = new ArrayList<>(List.of("format", "--config", args[i]));
            a.addAll(List.of(args).subList(sep + 1, args.length));
            System.out.println("== format " + args[i]);
            int rc = kafka.tools.StorageTool.execute(a.toArray(new String[0]), System.out);
            if (rc != 0) {
                throw new Fail("formatting the storage of " + args[i] + " failed (status " + rc + ")");
            }
        }
    }

    private static Map<String, String> parse(String[] args) throws Fail {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new Fail("bad argument " + args[i] + " (want --name value pairs)");
            }
            o.put(args[i].substring(2), args[i + 1]);
        }
        if (!o.containsKey("bootstrap")) {
            throw new Fail("--bootstrap is required");
        }
        return o;
    }

    private static void run(Map<String, String> o) throws Exception {
        int nodes = Integer.parseInt(o.getOrDefault("nodes", "1"));
        int waitNode = Integer.parseInt(o.getOrDefault("wait-node", "-1"));
        deadline = System.nanoTime()
                + TimeUnit.SECONDS.toNanos(Long.parseLong(o.getOrDefault("timeout-sec", "120")));

        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "samsa-kafka-setup");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "250");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "250");
        try (Admin admin = Admin.create(p)) {
            waitBrokers(admin, nodes, waitNode);
            if (o.containsKey("quota-client")) {
                quota(admin, o.get("quota-client"), Double.parseDouble(o.get("quota-rate")));
            }
            if (o.containsKey("telemetry-subscription")) {
                telemetrySubscription(admin, o.get("telemetry-subscription"), o.get("telemetry-metrics"),
                        o.get("telemetry-interval-ms"), o.getOrDefault("telemetry-match", ""));
            }
            if (o.containsKey("denied-topic")) {
                deniedTopic(admin, o.get("denied-topic"), o.getOrDefault("deny-principals", "User:ANONYMOUS"),
                        Short.parseShort(o.getOrDefault("rf", "1")));
            }
        }
    }

    private static void check(String what) throws Fail {
        if (System.nanoTime() > deadline) {
            throw new Fail("timed out waiting for " + what);
        }
    }

    private static void pause() throws InterruptedException {
        Thread.sleep(100);
    }

    private static void waitBrokers(Admin admin, int nodes, int waitNode) throws Exception {
        String last = "no answer yet";
        while (true) {
            check(nodes + " registered brokers" + (waitNode >= 0 ? " including node " + waitNode : "")
                    + " (last Metadata: " + last + ")");
            try {
                Collection<Node> got = admin.describeCluster(new DescribeClusterOptions().timeoutMs(3000))
                        .nodes().get();
                boolean hasWait = waitNode < 0;
                List<Integer> ids = new ArrayList<>();
                for (Node n : got) {
                    ids.add(n.id());
                    hasWait |= n.id() == waitNode;
                }
                last = "brokers " + ids;
                if (got.size() >= nodes && hasWait) {
                    return;
                }
            } catch (ExecutionException e) {
                last = String.valueOf(e.getCause());
            }
            pause();
        }
    }

    private static void quota(Admin admin, String clientId, double rate) throws Exception {
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, clientId));
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                List.of(new ClientQuotaAlteration.Op("controller_mutation_rate", rate))))).all().get();
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId)));
        while (true) {
            check("the controller_mutation_rate quota of client id " + clientId);
            Map<ClientQuotaEntity, Map<String, Double>> got = admin.describeClientQuotas(filter).entities().get();
            Map<String, Double> q = got.get(entity);
            if (q != null && q.containsKey("controller_mutation_rate")) {
                return;
            }
            pause();
        }
    }

    // telemetrySubscription sets a client metrics subscription (what
    // ClientMetricsCommand --alter does) and waits until it reads back.
    private static void telemetrySubscription(Admin admin, String name, String metrics, String intervalMs, String match)
            throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, name);
        List<AlterConfigOp> ops = new ArrayList<>();
        ops.add(new AlterConfigOp(new ConfigEntry("metrics", metrics), AlterConfigOp.OpType.SET));
        ops.add(new AlterConfigOp(new ConfigEntry("interval.ms", intervalMs), AlterConfigOp.OpType.SET));
        if (!match.isEmpty()) {
            ops.add(new AlterConfigOp(new ConfigEntry("match", match), AlterConfigOp.OpType.SET));
        }
        admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
        while (true) {
            check("the client metrics subscription " + name);
            Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
            ConfigEntry e = c == null ? null : c.get("metrics");
            if (e != null && metrics.equals(e.value())) {
                return;
            }
            pause();
        }
    }

    private static void deniedTopic(Admin admin, String topic, String principals, short rf) throws Exception {
        try {
            admin.createTopics(List.of(new NewTopic(topic, 1, rf))).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
        ResourcePattern pattern = new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL);
        List<AclBinding> acls = new ArrayList<>();
        // Any ACL on a resource turns allow.everyone.if.no.acl.found off for
        // it, so everyone is allowed everything first; DENY wins over ALLOW.
        acls.add(new AclBinding(pattern,
                new AccessControlEntry("User:*", "*", AclOperation.ALL, AclPermissionType.ALLOW)));
        for (String pr : principals.split(",")) {
            acls.add(new AclBinding(pattern,
                    new AccessControlEntry(pr.trim(), "*", AclOperation.WRITE, AclPermissionType.DENY)));
        }
        admin.createAcls(acls).all().get();
        AclBindingFilter filter = new AclBindingFilter(pattern.toFilter(),
                org.apache.kafka.common.acl.AccessControlEntryFilter.ANY);
        while (true) {
            check("the ACLs of topic " + topic);
            Collection<AclBinding> got = admin.describeAcls(filter).values().get();
            if (got.containsAll(acls)) {
                break;
            }
            pause();
        }
        while (true) {
            check("topic " + topic + " in Metadata");
            try {
                if (!admin.describeTopics(Set.of(topic)).allTopicNames().get().get(topic).partitions()
                        .get(0).isr().isEmpty()) {
                    return;
                }
            } catch (ExecutionException e) {
                // not there yet
            }
            pause();
        }
    }
}
