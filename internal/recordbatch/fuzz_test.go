package recordbatch

import (
	"bytes"
	"errors"
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
			// The body alone reads back to the same fields (ParseBody
			// and Decode share the parser).
			if k, v, hs, err := ParseBody(r.Body); err != nil || !sameFields(k, v, hs, r.Key, r.Value, r.Headers) {
				t.Fatalf("record %d: ParseBody of its body = (%q, %q, %v, %v), Decode gave (%q, %q, %v)", i, k, v, hs, err, r.Key, r.Value, r.Headers)
			}
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

// FuzzParseBody feeds arbitrary bytes to ParseBody: it must never panic,
// and a body it accepts re-encodes (AppendBody) to one that parses to the
// same fields.
func FuzzParseBody(f *testing.F) {
	for _, r := range edgeRecords() {
		f.Add(AppendBody(nil, r.key, r.value, r.headers))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		k, v, hs, err := ParseBody(body)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again := AppendBody(nil, k, v, hs)
		if len(again) != BodySize(k, v, hs) {
			t.Fatalf("AppendBody wrote %d bytes, BodySize says %d", len(again), BodySize(k, v, hs))
		}
		k2, v2, hs2, err := ParseBody(again)
		if err != nil || !sameFields(k2, v2, hs2, k, v, hs) {
			t.Fatalf("re-encoded body parses to (%q, %q, %v, %v), want (%q, %q, %v)", k2, v2, hs2, err, k, v, hs)
		}
	})
}

// sameFields reports whether two records' key, value and headers are
// equal, null (nil) told from empty.
func sameFields(k1, v1 []byte, h1 []Header, k2, v2 []byte, h2 []Header) bool {
	eq := func(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }
	if !eq(k1, k2) || !eq(v1, v2) || len(h1) != len(h2) {
		return false
	}
	for i := range h1 {
		if h1[i].Key != h2[i].Key || !eq(h1[i].Value, h2[i].Value) {
			return false
		}
	}
	return true
}
