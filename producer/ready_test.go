package producer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/conn"
)

// Tests of the IO goroutine's per-broker lists of partitions ready to send.

// TestReadyListHoldsPartitionOnce: a partition whose leader moves away and
// back before the old broker's ready list was served must not be listed
// twice there, or sendOne puts two batches of one partition in one Produce
// request (Kafka keeps only one of them per partition).
func TestReadyListHoldsPartitionOnce(t *testing.T) {
	s := newSink(&Producer{cfg: Config{DisableIdempotence: true}}, conn.Config{})
	s.timer.Stop()
	br1, br2 := &ioBroker{id: 1}, &ioBroker{id: 2}
	s.brokers[1], s.brokers[2] = br1, br2
	ip := &ioPart{leader: 1, readyOn: -1, hasSealed: true}

	s.markReady(ip) // listed on broker 1; broker 1 is dialing or at MaxInFlight
	ip.leader = 2   // metadata, or a KIP-951 CurrentLeader hint
	s.markReady(ip)
	ip.leader = 1 // and back, before broker 1 served its list
	s.markReady(ip)

	n := 0
	for _, x := range br1.ready {
		if x == ip && x.readyOn == br1.id {
			n++
		}
	}
	require.Equal(t, 1, n, "partition listed %d times, live, on broker 1's ready list", n)
}
