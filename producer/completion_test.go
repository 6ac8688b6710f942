package producer

import (
	"testing"
	"time"
	"unsafe"
)

// A completion keeps its timestamp, Flush epoch and kind apart, whatever
// order they are set in, and delivers to its own target only.
func TestCompletionPacking(t *testing.T) {
	if n := unsafe.Sizeof(completion{}); n != 32 {
		t.Errorf("completion is %d bytes; the pool charge and the batch layout assume 32", n)
	}
	var got []string
	fut := new(Future)
	ch := make(chan Result, 1)
	rec := &Record{Topic: "t"}
	kinds := []struct {
		name string
		make func() completion
		kind int64
	}{
		{"future", func() completion { return futureCompletion(fut) }, kindFuture},
		{"callback", func() completion {
			return callbackCompletion(func(RecordMetadata, error) { got = append(got, "callback") })
		}, kindCallback},
		{"channel", func() completion { return channelCompletion(ch, rec) }, kindChannel},
	}
	for _, k := range kinds {
		for _, ts := range []int64{0, 1, 1733390000123, maxTimestampMillis} {
			for _, epoch := range []uint8{0, 1} {
				c := k.make()
				c.setEpoch(epoch)
				c.setTS(ts)
				c.setEpoch(epoch) // again, after the timestamp
				if c.ts() != ts || c.epoch() != epoch || c.kind() != k.kind {
					t.Fatalf("%s: set ts %d epoch %d: got ts %d epoch %d kind %d", k.name, ts, epoch, c.ts(), c.epoch(), c.kind())
				}
				*fut, got = Future{}, nil
				c.deliver(RecordMetadata{Topic: "t", Offset: 7}, nil)
				switch k.kind {
				case kindFuture:
					md, done, err := fut.Result()
					if !done || err != nil || md.Offset != 7 || !md.Timestamp.Equal(time.UnixMilli(ts)) {
						t.Fatalf("future: got %+v, %v, %v", md, done, err)
					}
				case kindCallback:
					if len(got) != 1 {
						t.Fatalf("callback ran %d times", len(got))
					}
				case kindChannel:
					r := <-ch
					if r.Record != rec || r.Err != nil || !r.Metadata.Timestamp.Equal(time.UnixMilli(ts)) {
						t.Fatalf("channel: got %+v", r)
					}
				}
			}
		}
	}
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.UnixMilli(-1), 0},
		{time.Unix(-1<<62, 0), 0},
		{unixEpoch, 0},
		{time.UnixMilli(1733390000123), 1733390000123},
		{time.UnixMilli(maxTimestampMillis), maxTimestampMillis},
		{time.UnixMilli(maxTimestampMillis + 1), maxTimestampMillis},
		{time.Unix(18446744073709552, 0), maxTimestampMillis},
	} {
		if got := clampedMillis(tc.t); got != tc.want {
			t.Errorf("clampedMillis(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
	var zero completion
	zero.deliver(RecordMetadata{}, nil) // delivers nowhere, does not panic
	if zero.kind() != kindNone || zero.ts() != 0 || zero.epoch() != 0 {
		t.Fatal("the zero completion is not empty")
	}
}
