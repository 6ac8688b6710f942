package interop

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// TestSamsaToKfakeSecure produces with samsa to kfake over TLS (a CA the
// test makes) with SASL on, for each mechanism kfake serves, and reads every
// record back with kgo authenticating the same way: samsa's TLS and SASL
// against an implementation we did not write.
func TestSamsaToKfakeSecure(t *testing.T) {
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1", "localhost")
	require.NoError(t, err)
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(srv), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", "plain-pw"),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", "scram256-pw"),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", "scram512-pw"))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	tests := []struct {
		name  string
		samsa sasl.Mechanism
		kgo   kgo.Opt
	}{
		{"PLAIN", sasl.Plain("plain-user", "plain-pw"), kgo.SASL(kplain.Auth{User: "plain-user", Pass: "plain-pw"}.AsMechanism())},
		{"SCRAM-SHA-256", sasl.ScramSHA256("scram256-user", "scram256-pw"), kgo.SASL(kscram.Auth{User: "scram256-user", Pass: "scram256-pw"}.AsSha256Mechanism())},
		{"SCRAM-SHA-512", sasl.ScramSHA512("scram512-user", "scram512-pw"), kgo.SASL(kscram.Auth{User: "scram512-user", Pass: "scram512-pw"}.AsSha512Mechanism())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			topic := "secure-" + tt.name
			const partitions, n = 3, 300
			secure := []kgo.Opt{kgo.DialTLSConfig(ca.ClientConfig()), tt.kgo}
			admin := newKgoClient(t, c.ListenAddrs(), secure...)
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 5000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, admin)
			require.NoError(t, err)
			require.Zero(t, resp.Topics[0].ErrorCode)

			p := newSamsaProducer(t, c.ListenAddrs()[:1], producer.Config{TLS: ca.ClientConfig(), SASL: tt.samsa})
			futs := make([]*producer.Future, n)
			for i := range futs {
				futs[i] = p.Send(ctx, &producer.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 13)), Value: []byte(fmt.Sprintf("v%d", i))})
			}
			for _, f := range futs {
				_, err := f.Wait(ctx)
				require.NoError(t, err)
			}

			cons := newKgoClient(t, c.ListenAddrs(), append(secure, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			recs := pollN(ctx, t, cons, topic, n)
			got := map[string]bool{}
			for _, r := range recs {
				got[string(r.Value)] = true
			}
			for i := range n {
				assert.True(t, got[fmt.Sprintf("v%d", i)], "record v%d not read back", i)
			}
		})
	}

	// Bad credentials are not tested here: kfake closes the connection
	// instead of answering SASL_AUTHENTICATION_FAILED (KIP-152), which a
	// client must treat as a broken connection and retry. The test
	// broker's rejection is covered in producer/authfail_test.go.
}
