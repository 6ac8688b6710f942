package producer

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
)

// TestHandleResponseWhileClosing: during shutdown an answer completes its
// batches without retries: what the broker took succeeds, anything else
// fails with ErrClosed (with ErrOutcomeUnknown when the broker may have
// written it), and a batch failed already at its delivery timeout is only
// released.
func TestHandleResponseWhileClosing(t *testing.T) {
	type want struct {
		ok, release, unknown bool
		offset               int64
	}
	partResp := func(code int16, offset int64) *kmsg.ProduceResponse {
		resp := kmsg.NewPtrProduceResponse()
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.BaseOffset = 0, code, offset
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	tests := []struct {
		name      string
		resp      kmsg.Response
		err       error
		expired   bool
		ambiguous bool
		want      want
	}{
		{name: "success", resp: partResp(0, 42), want: want{ok: true, offset: 42}},
		{name: "duplicate is success", resp: partResp(kerr.DuplicateSequenceNumber.Code, 7), want: want{ok: true, offset: 7}},
		{name: "acks=0", want: want{ok: true, offset: -1}},
		{name: "retriable error is not retried", resp: partResp(kerr.NotLeaderOrFollower.Code, -1)},
		{name: "partition left out", resp: kmsg.NewPtrProduceResponse(), want: want{unknown: true}},
		{name: "timed out after append", resp: partResp(kerr.RequestTimedOut.Code, -1), want: want{unknown: true}},
		{name: "too few replicas after append", resp: partResp(kerr.NotEnoughReplicasAfterAppend.Code, -1), want: want{unknown: true}},
		{name: "broken connection", err: errors.New("connection reset"), want: want{unknown: true}},
		{name: "broken connection, earlier attempt ambiguous", err: errors.New("connection reset"), ambiguous: true, want: want{unknown: true}},
		{name: "expired, then answered", resp: partResp(0, 42), expired: true, want: want{release: true}},
		{name: "expired, then broken connection", err: errors.New("connection reset"), expired: true, want: want{release: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Producer{cfg: Config{DisableIdempotence: true}, hooks: &hooks{}, rec: newRecorder()}
			p.completer = newCompleter(p)
			s := newSink(p, conn.Config{})
			br := &ioBroker{id: 1, inflight: 1, stats: p.rec.broker(1, "")}
			s.brokers[1] = br
			s.inflight = 1
			top := &ioTopic{name: "t"}
			ip := &ioPart{topic: top, leader: 1, readyOn: -1, lastAcked: -1}
			b := &batch{}
			b.Partition = &accPartition{ID: 0, IO: ip}
			ip.acc = b.Partition
			b.IO.attempts = 1
			b.IO.expired = tt.expired
			b.IO.ambiguous = tt.ambiguous
			ip.inflight = []*batch{b}

			s.handleResponse(produceResponse{broker: br, batches: []*batch{b}, resp: tt.resp, err: tt.err}, true)

			require.Zero(t, s.inflight)
			require.Zero(t, br.inflight)
			require.Empty(t, ip.inflight, "the batch landed")
			require.Empty(t, ip.retry, "nothing is retried while closing")
			require.Len(t, p.completer.queue, 1, "one outcome per batch")
			o := p.completer.queue[0]
			require.Same(t, b, o.batch)
			require.Equal(t, tt.want.release, o.release, "release only")
			switch {
			case tt.want.release:
			case tt.want.ok:
				require.NoError(t, o.err)
				require.Equal(t, tt.want.offset, o.baseOffset)
			default:
				require.ErrorIs(t, o.err, ErrClosed)
				require.Equal(t, tt.want.unknown, errors.Is(o.err, ErrOutcomeUnknown), "ErrOutcomeUnknown in %v", o.err)
			}
		})
	}
}
