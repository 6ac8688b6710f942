package recordbatch_test

import (
	"fmt"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/recordbatch"
)

// The lifecycle of a batch: Reset, Append, Finish, Stamp; then decode it as
// the broker would.
func Example() {
	zstd, err := compression.NewCompressor(compression.Zstd, 0)
	if err != nil {
		panic(err)
	}

	var b recordbatch.Builder
	b.Reset(make([]byte, 0, 16384)) // in the producer: a buffer from bufferpool
	for i := range 3 {
		key := fmt.Appendf(nil, "key-%d", i)
		if !b.Append(1_700_000_000_000+int64(i), key, []byte("hello, kafka, hello, kafka"), nil) {
			panic("batch full")
		}
	}
	// A record parked as a body earlier is copied in without re-encoding.
	body := recordbatch.AppendBody(nil, nil, []byte("parked"), []recordbatch.Header{{Key: "trace", Value: []byte("1")}})
	b.AppendBody(1_700_000_000_010, body)

	var scratch []byte // reused across Finish calls
	batch, scratch, err := b.Finish(zstd, scratch)
	if err != nil {
		panic(err)
	}
	_ = scratch
	recordbatch.Stamp(batch, -1, -1, -1) // not idempotent

	dec, err := recordbatch.Decode(batch, 1<<20)
	if err != nil {
		panic(err)
	}
	h := dec.Header
	fmt.Println("records:", h.NumRecords, "codec:", h.Compression(), "span ms:", h.MaxTimestamp-h.BaseTimestamp)
	for _, r := range dec.Records {
		fmt.Printf("%d %q %q %d header(s)\n", r.OffsetDelta, r.Key, r.Value, len(r.Headers))
	}
	// Output:
	// records: 4 codec: zstd span ms: 10
	// 0 "key-0" "hello, kafka, hello, kafka" 0 header(s)
	// 1 "key-1" "hello, kafka, hello, kafka" 0 header(s)
	// 2 "key-2" "hello, kafka, hello, kafka" 0 header(s)
	// 3 "" "parked" 1 header(s)
}
