package producer

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/conn"
)

// TestFailBufferedKeepsOutcomeUnknown: a batch waiting for its retry when
// Close gives up fails with ErrClosed, and with ErrOutcomeUnknown when an
// earlier attempt may have been written (timed out, or its connection
// broke); an error without it says the record was not written.
func TestFailBufferedKeepsOutcomeUnknown(t *testing.T) {
	for _, ambiguous := range []bool{false, true} {
		pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20})
		require.NoError(t, err)
		p := &Producer{cfg: Config{DisableIdempotence: true}}
		p.completer = newCompleter(p)
		p.acc = accumulator.New[completion, *ioPart, sendState](accumulator.Config{BatchSize: 16384, MaxBatchSize: 1 << 20, Pool: pool})
		ts := &topicState{acc: p.acc.NewTopic("t")}
		p.topics.Store("t", ts)
		ap := p.acc.NewPartition(ts.acc, 0)
		ts.acc.SetPartitions([]*accPartition{ap})
		ip := &ioPart{topic: &ioTopic{name: "t", ts: ts}, acc: ap, leader: 1, readyOn: -1, lastAcked: -1}
		ap.IO = ip
		b := &batch{}
		b.Partition = ap
		b.IO.attempts = 1
		b.IO.ambiguous = ambiguous
		ip.retry = []*batch{b}

		newSink(p, conn.Config{}).failBuffered()

		require.Len(t, p.completer.queue, 1, "one outcome for the batch")
		o := p.completer.queue[0]
		require.ErrorIs(t, o.err, ErrClosed)
		require.Equal(t, ambiguous, errors.Is(o.err, ErrOutcomeUnknown), "ambiguous %v: %v", ambiguous, o.err)
		require.Empty(t, ip.retry)
	}
}
