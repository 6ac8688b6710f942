package producer

import (
	"testing"
	"time"
)

// gateBatch returns a batch for the send gate's tests: seq is its base
// sequence (-1: none), ambiguous whether an earlier attempt may have been
// written.
func gateBatch(seq int32, ambiguous bool) *batch {
	b := &batch{}
	b.IO.setSequence(seq)
	b.IO.ambiguous = ambiguous
	return b
}

// gateBatches returns n unsequenced batches.
func gateBatches(n int) []*batch {
	out := make([]*batch, n)
	for i := range out {
		out[i] = gateBatch(-1, false)
	}
	return out
}

// TestMayDrain covers each condition of the send gate (sink.mayDrain) on
// hand-built state, without a broker.
func TestMayDrain(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ready := func() *idempotence { return &idempotence{producerID: 7, epoch: 0} }
	tests := []struct {
		name     string
		idem     func() *idempotence // nil: idempotence disabled
		part     ioPart
		ok, more bool
	}{
		{name: "idle partition", part: ioPart{}, ok: true},
		{name: "backing off", part: ioPart{backoff: now.Add(time.Millisecond)}, more: true},
		{name: "backoff over", part: ioPart{backoff: now}, ok: true},
		{name: "backing off with a retry", part: ioPart{backoff: now.Add(time.Second), retry: gateBatches(1)}, more: true},

		{name: "idempotent: no producer id yet", idem: func() *idempotence { return &idempotence{producerID: -1, epoch: -1} }, more: true},
		{name: "idempotent: InitProducerId in flight", idem: func() *idempotence { i := ready(); i.requesting = true; return i }, more: true},
		{name: "idempotent: fenced, waiting for a new id", idem: func() *idempotence { i := ready(); i.needNewID = true; return i }, more: true},
		{name: "idempotent: id ready", idem: ready, ok: true},

		{name: "bump pending: nothing to settle", idem: func() *idempotence { i := ready(); i.needBump = true; return i }},
		{
			name: "bump pending: retry not ambiguous", idem: func() *idempotence { i := ready(); i.needBump = true; return i },
			part: ioPart{retry: []*batch{gateBatch(3, false)}},
		},
		{
			name: "bump pending: ambiguous retry of a gapped partition", idem: func() *idempotence { i := ready(); i.needBump = true; return i },
			part: ioPart{gapped: true, retry: []*batch{gateBatch(3, true)}},
		},
		{
			name: "bump pending: first retry unsequenced", idem: func() *idempotence { i := ready(); i.needBump = true; return i },
			part: ioPart{retry: []*batch{gateBatch(-1, false), gateBatch(5, true)}},
		},
		{
			name: "bump pending: ambiguous sequenced retry settles under the old epoch", idem: func() *idempotence { i := ready(); i.needBump = true; return i },
			part: ioPart{retry: []*batch{gateBatch(3, true)}}, ok: true,
		},
		{
			name: "bump pending: ambiguous retry waits for the partition's in-flight batches", idem: func() *idempotence { i := ready(); i.needBump = true; return i },
			part: ioPart{retry: []*batch{gateBatch(3, true)}, inflight: []*batch{gateBatch(8, false)}},
		},

		{name: "retry waits for in-flight batches", part: ioPart{retry: gateBatches(1), inflight: gateBatches(1)}},
		{name: "retry goes once nothing is in flight", part: ioPart{retry: gateBatches(2)}, ok: true},
		{name: "idempotent: retry before any acknowledgement", idem: ready, part: ioPart{retry: []*batch{gateBatch(0, true)}}, ok: true},

		{name: "idempotent: at the in-flight limit", idem: ready, part: ioPart{confirmed: true, inflight: gateBatches(idempotenceMaxInFlight)}},
		{name: "idempotent: below the in-flight limit", idem: ready, part: ioPart{confirmed: true, inflight: gateBatches(idempotenceMaxInFlight - 1)}, ok: true},
		{name: "idempotent: one in flight before any acknowledgement", idem: ready, part: ioPart{inflight: gateBatches(1)}},
		{name: "idempotent: first batch before any acknowledgement", idem: ready, part: ioPart{}, ok: true},
		{name: "not idempotent: no per-partition limit", part: ioPart{inflight: gateBatches(idempotenceMaxInFlight + 3)}, ok: true},

		{name: "a resent batch is unanswered", part: ioPart{resent: 1, inflight: gateBatches(1)}},
		{name: "idempotent: a resent batch is unanswered", idem: ready, part: ioPart{confirmed: true, resent: 1, inflight: gateBatches(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sink{now: now}
			if tt.idem != nil {
				s.idem = tt.idem()
			}
			ip := tt.part
			ok, more := s.mayDrain(&ip)
			if ok != tt.ok || (!ok && more != tt.more) {
				t.Fatalf("mayDrain = (%v, %v), want (%v, %v)", ok, more, tt.ok, tt.more)
			}
		})
	}
}

// TestMayDrainAfterIdle: a partition with nothing in flight for
// confirmLapse after its last acknowledgement sends its next batch alone
// until it is acknowledged, as for a new epoch (the broker may have
// expired the producer id); one acknowledged within confirmLapse keeps up
// to five in flight.
func TestMayDrainAfterIdle(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tt := range []struct {
		name       string
		ackedAgo   time.Duration
		secondGoes bool
	}{
		{"acknowledged just now", confirmLapse / 2, true},
		{"idle past confirmLapse", confirmLapse, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sink{now: now, idem: &idempotence{producerID: 7}}
			ip := &ioPart{confirmed: true, ackedAt: now.Add(-tt.ackedAgo)}
			ok, _ := s.mayDrain(ip)
			if !ok {
				t.Fatal("the first batch must go")
			}
			ip.inflight = gateBatches(1)
			if ok, _ := s.mayDrain(ip); ok != tt.secondGoes {
				t.Fatalf("a second batch in flight: %v, want %v (confirmed %v)", ok, tt.secondGoes, ip.confirmed)
			}
		})
	}
}
