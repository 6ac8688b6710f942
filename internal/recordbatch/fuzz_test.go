package recordbatch

import (
	"bytes"
	"testing"

	"github.com/samsa-go/samsa/compression"
)

// FuzzDecode feeds arbitrary bytes to the decoder: it must never panic, and
// whatever it accepts must be self-consistent. The seeds are valid batches
// of every codec; fuzzing mutates them, and the CRC is recomputed for half of
// the inputs so that mutations reach the record parser.
func FuzzDecode(f *testing.F) {
	f.Add(goldenBatch, false)
	for _, ct := range allCodecs {
		c, err := compression.NewCompressor(ct, 0)
		if err != nil {
			f.Fatal(err)
		}
		recs := edgeRecords()
		for range 10 {
			recs = append(recs, testRecord{ts: 3, key: []byte("k"), value: []byte("compressible compressible")})
		}
		batch := buildBatch(f, c, recs, 1<<16)
		Stamp(batch, 1, 2, 3)
		f.Add(batch, false)
	}
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC && len(b) >= HeaderSize {
			recrc(b)
		}
		const max = 1 << 20
		var d Decoder
		h, recs, err := d.Decode(b, max)
		_, verr := d.Validate(b, max)
		if (err == nil) != (verr == nil) {
			t.Fatalf("Decode error %v, Validate error %v", err, verr)
		}
		if err != nil {
			return
		}
		if int(h.NumRecords) != len(recs) {
			t.Fatalf("%d records, header says %d", len(recs), h.NumRecords)
		}
		// What decodes re-encodes through the builder to records with the
		// same content.
		var bl Builder
		size := HeaderSize
		for _, r := range recs {
			size += len(r.Body) + 20 // length, attributes, deltas
		}
		bl.Reset(make([]byte, 0, size))
		for i, r := range recs {
			if int(r.OffsetDelta) != i {
				t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
			}
			if !bl.Append(r.Timestamp, r.Key, r.Value, r.Headers) {
				t.Fatalf("record %d does not fit", i)
			}
		}
		out, _, err := bl.Finish(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		Stamp(out, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		again, err := Decode(out, 2*max)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		for i, r := range again.Records {
			o := recs[i]
			if r.Timestamp != o.Timestamp || !bytes.Equal(r.Key, o.Key) || !bytes.Equal(r.Value, o.Value) ||
				(r.Key == nil) != (o.Key == nil) || (r.Value == nil) != (o.Value == nil) || len(r.Headers) != len(o.Headers) {
				t.Fatalf("record %d changed in a round trip", i)
			}
		}
	})
}
