package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// These tests check the real Apache Kafka clusters that interop/kafka's
// start.sh starts (make test does, see interop/kafka/README.md): that each
// answers, runs Kafka 4.x with every broker registered, and has the quota,
// ACLs and SASL_SSL users the other real-Kafka tests rely on. Without
// SAMSA_KAFKA_BROKERS they are skipped.

// kafkaClusterEnv returns the environment variable key, skipping the test
// when it is unset.
func kafkaClusterEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Skipf("%s not set: no real Kafka cluster (interop/kafka/start.sh, or make test, starts one)", key)
	}
	return v
}

// kafkaClusterClient returns a kgo client of the cluster, closed by the
// test's cleanup.
func kafkaClusterClient(t *testing.T, brokers string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.RetryTimeout(10 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func TestKafkaClusterAnswers(t *testing.T) {
	kafkaClusterEnv(t, "SAMSA_KAFKA_BROKERS")
	nodes1, _ := strconv.Atoi(os.Getenv("SAMSA_KAFKA_NODES"))
	for _, tc := range []struct {
		name, brokersKey string
		nodes            int
	}{
		{"first", "SAMSA_KAFKA_BROKERS", nodes1},
		{"three-node", "SAMSA_KAFKA3_BROKERS", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := kafkaClusterEnv(t, tc.brokersKey)
			require.Len(t, strings.Split(brokers, ","), tc.nodes, "%s lists one address per node", tc.brokersKey)
			ctx := testContext(t)
			cl := kafkaClusterClient(t, brokers)

			// Every broker, not only the first to answer, runs 4.x:
			// Kafka 4.0 dropped Fetch v0-v3 (KIP-896; it kept Produce
			// v0-v2), so a 4.x broker's lowest Fetch version is 4.
			for _, addr := range strings.Split(brokers, ",") {
				one := kafkaClusterClient(t, addr)
				av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, one)
				require.NoError(t, err, "ApiVersions to %s", addr)
				require.NoError(t, kerr.ErrorForCode(av.ErrorCode), "ApiVersions to %s", addr)
				var fetch *kmsg.ApiVersionsResponseApiKey
				for i := range av.ApiKeys {
					if av.ApiKeys[i].ApiKey == kmsg.Fetch.Int16() {
						fetch = &av.ApiKeys[i]
					}
				}
				require.NotNil(t, fetch, "%s lists Fetch", addr)
				require.GreaterOrEqual(t, fetch.MinVersion, int16(4), "%s is Kafka 4.x (no Fetch v0-v3)", addr)
				var mv *kmsg.ApiVersionsResponseFinalizedFeature
				for i := range av.FinalizedFeatures {
					if av.FinalizedFeatures[i].Name == "metadata.version" {
						mv = &av.FinalizedFeatures[i]
					}
				}
				require.NotNil(t, mv, "%s finalizes metadata.version (KRaft)", addr)
				// KIP-714's APIs only with start.sh -telemetry's plugin.
				telemetryAPIs := 0
				for _, k := range av.ApiKeys {
					if k.ApiKey == kmsg.GetTelemetrySubscriptions.Int16() || k.ApiKey == kmsg.PushTelemetry.Int16() {
						telemetryAPIs++
					}
				}
				wantTelemetry := 0
				if tc.name == "first" && os.Getenv("SAMSA_KAFKA_TELEMETRY_DIR") != "" {
					wantTelemetry = 2
				}
				require.Equal(t, wantTelemetry, telemetryAPIs, "%s advertises GetTelemetrySubscriptions and PushTelemetry only with a client metrics plugin", addr)
			}

			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Len(t, md.Brokers, tc.nodes, "brokers registered")
			require.GreaterOrEqual(t, md.ControllerID, int32(0), "a controller is elected")
			for _, b := range md.Brokers {
				require.Equal(t, "127.0.0.1", b.Host)
			}
		})
	}
	require.True(t, strings.HasPrefix(os.Getenv("SAMSA_KAFKA_VERSION"), "4."), "SAMSA_KAFKA_VERSION")
}

func TestKafkaClusterQuota(t *testing.T) {
	brokers := kafkaClusterEnv(t, "SAMSA_KAFKA_BROKERS")
	clientID := kafkaClusterEnv(t, "SAMSA_KAFKA_QUOTA_CLIENT_ID")
	rate, err := strconv.ParseFloat(os.Getenv("SAMSA_KAFKA_QUOTA_RATE"), 64)
	require.NoError(t, err, "SAMSA_KAFKA_QUOTA_RATE")
	cl := kafkaClusterClient(t, brokers)

	req := kmsg.NewPtrDescribeClientQuotasRequest()
	comp := kmsg.NewDescribeClientQuotasRequestComponent()
	comp.EntityType = "client-id"
	comp.MatchType = 0 // exact
	comp.Match = &clientID
	req.Components = append(req.Components, comp)
	req.Strict = true
	resp, err := req.RequestWith(testContext(t), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.Len(t, resp.Entries, 1, "one quota entity for client id %s", clientID)
	got := map[string]float64{}
	for _, v := range resp.Entries[0].Values {
		got[v.Key] = v.Value
	}
	require.Equal(t, map[string]float64{"controller_mutation_rate": rate}, got)
}

func TestKafkaClusterACL(t *testing.T) {
	brokers := kafkaClusterEnv(t, "SAMSA_KAFKA_BROKERS")
	topic := kafkaClusterEnv(t, "SAMSA_KAFKA_DENIED_TOPIC")
	ctx := testContext(t)
	cl := kafkaClusterClient(t, brokers, kgo.DefaultProduceTopic(topic))

	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourceName = &topic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	denied := map[string]bool{}
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			if a.Operation == kmsg.ACLOperationWrite && a.PermissionType == kmsg.ACLPermissionTypeDeny {
				denied[a.Principal] = true
			}
		}
	}
	require.True(t, denied["User:ANONYMOUS"], "DENY WRITE for User:ANONYMOUS on %s, got %v", topic, denied)
	if u := os.Getenv("SAMSA_KAFKA_ACL_USER"); u != "" {
		require.True(t, denied["User:"+u], "DENY WRITE for User:%s on %s, got %v", u, topic, denied)
	}

	// The plaintext listener's User:ANONYMOUS may describe the topic but not
	// write it.
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("denied")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
}

func TestKafkaClusterSASLSSL(t *testing.T) {
	brokers := kafkaClusterEnv(t, "SAMSA_KAFKA_SASL_SSL_BROKERS")
	caPEM, err := os.ReadFile(kafkaClusterEnv(t, "SAMSA_KAFKA_CA"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM), "SAMSA_KAFKA_CA holds a PEM certificate")
	scramAuth := scram.Auth{User: os.Getenv("SAMSA_KAFKA_SCRAM_USER"), Pass: os.Getenv("SAMSA_KAFKA_SCRAM_PASSWORD")}
	plainAuth := plain.Auth{User: os.Getenv("SAMSA_KAFKA_PLAIN_USER"), Pass: os.Getenv("SAMSA_KAFKA_PLAIN_PASSWORD")}
	badScram := scram.Auth{User: scramAuth.User, Pass: scramAuth.Pass + "-wrong"}
	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
		ok   bool
	}{
		{"scram-sha-256", scramAuth.AsSha256Mechanism(), true},
		{"scram-sha-512", scramAuth.AsSha512Mechanism(), true},
		{"plain", plainAuth.AsMechanism(), true},
		{"wrong-password", badScram.AsSha512Mechanism(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, addr := range strings.Split(brokers, ",") {
				cl := kafkaClusterClient(t, addr,
					kgo.DialTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}),
					kgo.SASL(tc.mech))
				ctx, cancel := context.WithTimeout(testContext(t), 20*time.Second)
				_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
				cancel()
				if tc.ok {
					require.NoError(t, err, "Metadata over SASL_SSL from %s", addr)
				} else {
					require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "%s", addr)
				}
			}
		})
	}
}
