package producer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestIdempotentProducerIDExpiredWhileIdle: the broker forgets an idle
// producer id (producer.id.expiration.ms, KIP-854), then the producer sends
// thousands of records to several partitions with several batches of each
// in flight, and the first request after the idle period fails without
// being written. Kafka 2.5+ takes the first batch it sees of an unknown
// producer id, whatever its sequence, as the start: a later batch in
// flight must not get there first. Brokers before 2.5 answer
// UNKNOWN_PRODUCER_ID, which bumps the epoch. Either way every record is
// stored exactly once, in send order per partition, and none fails.
func TestIdempotentProducerIDExpiredWhileIdle(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unknownErrors bool
	}{
		{"any sequence accepted, Kafka 2.5+", false},
		{"UNKNOWN_PRODUCER_ID, Kafka before 2.5", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const partitions, perPart = 4, 1000
			c := newCluster(t, testbroker.Config{Brokers: 1, UnknownProducerIDErrors: tc.unknownErrors})
			require.NoError(t, c.CreateTopic("t", partitions))
			p := newProducer(t, c, Config{Linger: 5 * time.Millisecond, BatchSize: 512, RequestTimeout: 5 * time.Second, DeliveryTimeout: 20 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			send := func(from, to int) []*Future {
				var fs []*Future
				for i := from; i < to; i++ {
					for part := range int32(partitions) {
						v := fmt.Sprintf("%d-%06d", part, i)
						fs = append(fs, p.Send(ctx, &Record{Topic: "t", Partition: part, ExplicitPartition: true, Value: []byte(v)}))
					}
				}
				return fs
			}
			wait := func(fs []*Future) {
				t.Helper()
				for _, f := range fs {
					_, err := f.Wait(ctx)
					require.NoError(t, err)
				}
			}
			wait(send(0, 100))
			time.Sleep(confirmLapse + 50*time.Millisecond) // idle
			require.Equal(t, partitions, c.ExpireProducerIDs())

			// The first Produce after the idle period is refused unwritten
			// (NOT_ENOUGH_REPLICAS, retriable), while later ones, if any
			// were sent behind it, are taken.
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 19, Delay: 20 * time.Millisecond})
			wait(send(100, perPart))

			for part := range int32(partitions) {
				recs, err := c.Records("t", part)
				require.NoError(t, err)
				got := make([]string, 0, len(recs))
				for _, r := range recs {
					got = append(got, string(r.Value))
				}
				want := make([]string, perPart)
				for i := range want {
					want[i] = fmt.Sprintf("%d-%06d", part, i)
				}
				if !equalStrings(got, want) {
					t.Fatalf("partition %d: %d records stored, want %d, in send order, once each; first difference: %s",
						part, len(got), len(want), firstDiff(got, want))
				}
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			lo := max(0, i-2)
			return "at " + strconv.Itoa(i) + ": got " + strings.Join(got[lo:min(len(got), i+3)], ",") + ", want " + strings.Join(want[lo:min(len(want), i+3)], ",")
		}
	}
	return "at " + strconv.Itoa(min(len(got), len(want))) + ": one ends"
}
