package sasl_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/sasl"
)

// TestScramRefusesHostileIterationCounts: a broker's server-first message
// asking for more PBKDF2 iterations than Kafka allows (16384) fails at once,
// instead of keeping the dial goroutine (which Close waits for) computing
// 2^31-1 iterations for minutes; Kafka's own maximum still works.
func TestScramRefusesHostileIterationCounts(t *testing.T) {
	for _, tc := range []struct {
		iterations string
		refused    bool
	}{
		{"2147483647", true},
		{"16385", true},
		{"99999999999999999999", true},
		{"16384", false},
		{"4096", false},
	} {
		t.Run(tc.iterations, func(t *testing.T) {
			sess, first, err := sasl.ScramSHA256("user", "secret").Start(context.Background(), "broker:9092")
			require.NoError(t, err)
			i := strings.Index(string(first), "r=")
			require.GreaterOrEqual(t, i, 0)
			serverFirst := "r=" + string(first[i+2:]) + "server,s=" + base64.StdEncoding.EncodeToString([]byte("salt")) + ",i=" + tc.iterations
			done := make(chan error, 1)
			go func() {
				_, _, err := sess.Step([]byte(serverFirst))
				done <- err
			}()
			select {
			case err := <-done:
				if tc.refused {
					require.ErrorContains(t, err, "iterations")
				} else {
					require.NoError(t, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Step still computing after 10 s")
			}
		})
	}
}
