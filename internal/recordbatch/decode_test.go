package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
)

// recrc rewrites the CRC of b so that a test reaches the checks after it.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// edit returns a copy of goldenBatch changed by fn, with a correct CRC.
func edit(fn func(b []byte) []byte) []byte {
	return recrc(fn(append([]byte(nil), goldenBatch...)))
}

func put32(b []byte, off int, v int32) { binary.BigEndian.PutUint32(b[off:], uint32(v)) }

func TestDecodeRejectsMalformedBatches(t *testing.T) {
	bigGzip := func() []byte {
		recs := make([]testRecord, 100)
		for i := range recs {
			recs[i] = testRecord{value: make([]byte, 1000)} // 100 KB of zeros
		}
		return recrc(buildBatch(t, mustCompressor(t, compression.Gzip), recs, 1<<20))
	}()
	require.Less(t, len(bigGzip), 10_000)

	cases := []struct {
		name  string
		batch []byte
		max   int
		want  []error // every one must match with errors.Is
	}{
		{"empty", nil, 0, []error{ErrCorrupt}},
		{"shorter than a header", goldenBatch[:60], 0, []error{ErrCorrupt}},
		{"truncated", goldenBatch[:len(goldenBatch)-1], 0, []error{ErrCorrupt}},
		{"trailing byte", append(append([]byte(nil), goldenBatch...), 0), 0, []error{ErrCorrupt}},
		{"length too small", edit(func(b []byte) []byte { put32(b, offLength, 69); return b }), 0, []error{ErrCorrupt}},
		{"length below header", edit(func(b []byte) []byte { put32(b, offLength, 48); return b }), 0, []error{ErrCorrupt}},
		{"negative length", edit(func(b []byte) []byte { put32(b, offLength, -1); return b }), 0, []error{ErrCorrupt}},
		{"bad magic", edit(func(b []byte) []byte { b[offMagic] = 1; return b }), 0, []error{ErrBadMagic, ErrCorrupt}},
		{"bad crc", func() []byte {
			b := append([]byte(nil), goldenBatch...)
			b[len(b)-1] ^= 1
			return b
		}(), 0, []error{ErrCRCMismatch, ErrCorrupt}},
		{"crc over attributes", func() []byte {
			b := append([]byte(nil), goldenBatch...)
			b[offAttributes+1] |= attrTransactional
			return b
		}(), 0, []error{ErrCRCMismatch}},
		{"zero records", edit(func(b []byte) []byte { put32(b, offNumRecords, 0); put32(b, offLastOffsetDelta, -1); return b }), 0, []error{ErrCorrupt}},
		{"negative count", edit(func(b []byte) []byte { put32(b, offNumRecords, -1); return b }), 0, []error{ErrCorrupt}},
		{"count too high", edit(func(b []byte) []byte { put32(b, offNumRecords, 3); put32(b, offLastOffsetDelta, 2); return b }), 0, []error{ErrCorrupt}},
		{"huge count", edit(func(b []byte) []byte {
			put32(b, offNumRecords, 1<<31-1)
			put32(b, offLastOffsetDelta, 1<<31-2)
			return b
		}), 0, []error{ErrCorrupt}},
		{"count too low", edit(func(b []byte) []byte { put32(b, offNumRecords, 1); put32(b, offLastOffsetDelta, 0); return b }), 0, []error{ErrCorrupt}},
		{"last offset delta", edit(func(b []byte) []byte { put32(b, offLastOffsetDelta, 2); return b }), 0, []error{ErrCorrupt}},
		{"offset delta not consecutive", edit(func(b []byte) []byte { b[74] = 0x04; return b }), 0, []error{ErrCorrupt}},
		{"first offset delta not 0", edit(func(b []byte) []byte { b[64] = 0x02; return b }), 0, []error{ErrCorrupt}},
		{"record longer than batch", edit(func(b []byte) []byte { b[71] = 0x7e; return b }), 0, []error{ErrCorrupt}},
		{"negative record length", edit(func(b []byte) []byte { b[61] = 0x01; return b }), 0, []error{ErrCorrupt}},
		{"bytes left in record", edit(func(b []byte) []byte { b[61] = 0x14; return b }), 0, []error{ErrCorrupt}},
		{"key length -2", edit(func(b []byte) []byte { b[65] = 0x03; return b }), 0, []error{ErrCorrupt}},
		{"key longer than record", edit(func(b []byte) []byte { b[65] = 0x10; return b }), 0, []error{ErrCorrupt}},
		{"null header key", edit(func(b []byte) []byte { b[78] = 0x01; return b }), 0, []error{ErrCorrupt}},
		{"negative header count", edit(func(b []byte) []byte { b[77] = 0x03; return b }), 0, []error{ErrCorrupt}},
		{"header count too high", edit(func(b []byte) []byte { b[77] = 0x04; return b }), 0, []error{ErrCorrupt}},
		{"unterminated varint", edit(func(b []byte) []byte { b[70] = 0x80; return b }), 0, []error{ErrCorrupt}},
		{"unknown codec", edit(func(b []byte) []byte { b[offAttributes+1] |= 5; return b }), 0, []error{compression.ErrUnsupported}},
		{"corrupt compressed records", func() []byte {
			b := append([]byte(nil), bigGzip...)
			for i := HeaderSize + 10; i < len(b)-8; i++ {
				b[i] ^= 0x55
			}
			return recrc(b)
		}(), 0, []error{ErrCorrupt, compression.ErrCorrupt}},
		{"claims gzip but plain", edit(func(b []byte) []byte { b[offAttributes+1] |= byte(compression.Gzip); return b }), 0, []error{ErrCorrupt, compression.ErrCorrupt}},
		{"decompression bomb", bigGzip, 10_000, []error{compression.ErrTooLarge}},
		{"uncompressed above cap", goldenBatch, 20, []error{compression.ErrTooLarge}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			_, err := Decode(tc.batch, max)
			require.Error(t, err)
			for _, want := range tc.want {
				assert.ErrorIs(t, err, want)
			}
			var d Decoder
			_, err = d.Validate(tc.batch, max)
			require.Error(t, err, "Validate")
			for _, want := range tc.want {
				assert.ErrorIs(t, err, want, "Validate")
			}
		})
	}

	// The bomb itself is valid with a large enough cap.
	b, err := Decode(bigGzip, 1<<20)
	require.NoError(t, err)
	assert.Len(t, b.Records, 100)
}

func TestDecodeRejectsNonPositiveCap(t *testing.T) {
	_, err := Decode(goldenBatch, 0)
	assert.Error(t, err)
}

func TestParseHeader(t *testing.T) {
	// ParseHeader accepts bytes after the batch: batches can be walked.
	two := append(append([]byte(nil), goldenBatch...), goldenBatch...)
	n := 0
	for p := two; len(p) > 0; n++ {
		h, err := ParseHeader(p)
		require.NoError(t, err)
		assert.Equal(t, int32(2), h.NumRecords)
		_, err = Decode(p[:12+h.Length], 1<<20)
		require.NoError(t, err)
		p = p[12+h.Length:]
	}
	assert.Equal(t, 2, n)

	h, err := ParseHeader(edit(func(b []byte) []byte { b[offMagic] = 0; return b }))
	assert.ErrorIs(t, err, ErrBadMagic)
	assert.Equal(t, int8(0), h.Magic, "header read even with a bad magic")
	assert.Equal(t, int32(70), h.Length)
}

func TestDecoderHeaderKeysAliasButDecodeCopies(t *testing.T) {
	b := append([]byte(nil), goldenBatch...)
	got, err := Decode(b, 1<<20)
	require.NoError(t, err)
	var d Decoder
	_, recs, err := d.Decode(b, 1<<20)
	require.NoError(t, err)
	b[79] = 'z' // header key "h" in the input
	assert.Equal(t, "h", got.Records[1].Headers[0].Key, "Decode copies header keys")
	assert.Equal(t, "z", recs[1].Headers[0].Key, "Decoder aliases the input, as documented")
}
