package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
)

var allCodecs = []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd}

type testRecord struct {
	ts         int64
	key, value []byte
	headers    []Header
}

// edgeRecords covers null and empty keys, values and header values, and
// negative timestamp deltas.
func edgeRecords() []testRecord {
	return []testRecord{
		{ts: 1_700_000_000_000, key: []byte("key-0"), value: []byte("value-0")},
		{ts: 1_700_000_000_005, key: nil, value: []byte("null key")},
		{ts: 1_699_999_999_000, key: []byte("negative delta"), value: nil},
		{ts: 1_700_000_000_001, key: []byte{}, value: []byte{}},
		{ts: 1_700_000_000_002, key: []byte("hdrs"), value: []byte("v"), headers: []Header{
			{Key: "a", Value: []byte("1")},
			{Key: "null value", Value: nil},
			{Key: "empty value", Value: []byte{}},
			{Key: "", Value: []byte("empty key")},
		}},
		{ts: -5, key: []byte("negative timestamp"), value: []byte("x")},
	}
}

// randomRecords returns n records with random sizes, nulls and timestamps
// around base, some of them before it.
func randomRecords(rng *rand.Rand, n int, base int64) []testRecord {
	bytesOrNil := func(max int) []byte {
		switch rng.IntN(8) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(max)+1)
		for i := range b {
			b[i] = byte('a' + rng.IntN(4)) // compressible
		}
		return b
	}
	recs := make([]testRecord, n)
	for i := range recs {
		r := &recs[i]
		r.ts = base + rng.Int64N(1<<20) - 1<<19
		if rng.IntN(10) == 0 {
			r.ts = base + rng.Int64N(1<<40) - 1<<39 // long varlong deltas
		}
		r.key = bytesOrNil(40)
		r.value = bytesOrNil(300)
		for range rng.IntN(3) {
			r.headers = append(r.headers, Header{Key: string(bytesOrNil(10)), Value: bytesOrNil(20)})
		}
	}
	return recs
}

func buildBatch(t testing.TB, c *compression.Compressor, recs []testRecord, capacity int) []byte {
	t.Helper()
	var b Builder
	b.Reset(make([]byte, 0, capacity))
	for i, r := range recs {
		require.True(t, b.Append(r.ts, r.key, r.value, r.headers), "record %d", i)
	}
	batch, _, err := b.Finish(c, nil)
	require.NoError(t, err)
	return batch
}

func mustCompressor(t testing.TB, ct compression.Type) *compression.Compressor {
	t.Helper()
	c, err := compression.NewCompressor(ct, 0)
	require.NoError(t, err)
	return c
}

func assertRecords(t *testing.T, want []testRecord, got []Record) {
	t.Helper()
	require.Len(t, got, len(want))
	for i, w := range want {
		g := got[i]
		assert.Equal(t, int32(i), g.OffsetDelta)
		assert.Equal(t, w.ts, g.Timestamp, "record %d timestamp", i)
		assert.Equal(t, w.ts-want[0].ts, g.TimestampDelta, "record %d delta", i)
		assert.Equal(t, w.key, g.Key, "record %d key", i) // Equal tells nil from empty
		assert.Equal(t, w.value, g.Value, "record %d value", i)
		if len(w.headers) == 0 {
			assert.Empty(t, g.Headers, "record %d headers", i)
		} else {
			assert.Equal(t, w.headers, g.Headers, "record %d headers", i)
		}
		assert.Equal(t, AppendBody(nil, w.key, w.value, w.headers), g.Body, "record %d body", i)
	}
}

func maxTS(recs []testRecord) int64 {
	m := recs[0].ts
	for _, r := range recs {
		m = max(m, r.ts)
	}
	return m
}

func TestRoundTripEveryCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sets := map[string][]testRecord{
		"edge":   edgeRecords(),
		"one":    {{ts: 7, key: []byte("k"), value: []byte("v")}},
		"random": randomRecords(rng, 200, 1_700_000_000_000),
	}
	for _, ct := range allCodecs {
		for name, recs := range sets {
			t.Run(fmt.Sprintf("%s/%s", ct, name), func(t *testing.T) {
				batch := buildBatch(t, mustCompressor(t, ct), recs, 1<<20)
				Stamp(batch, -1, -1, -1)
				got, err := Decode(batch, 1<<20)
				require.NoError(t, err)
				h := got.Header
				assert.Equal(t, int32(len(recs)), h.NumRecords)
				assert.Equal(t, int32(len(recs)-1), h.LastOffsetDelta)
				assert.Equal(t, recs[0].ts, h.BaseTimestamp)
				assert.Equal(t, maxTS(recs), h.MaxTimestamp)
				assert.Equal(t, int32(-1), h.PartitionLeaderEpoch)
				assert.Equal(t, int64(-1), h.ProducerID)
				assert.False(t, h.Transactional())
				assert.False(t, h.LogAppendTime())
				assert.False(t, h.Control())
				if name == "random" {
					assert.Equal(t, ct, h.Compression(), "compressible records must be compressed")
				}
				assertRecords(t, recs, got.Records)
				kmsgCrossCheck(t, batch, recs)
			})
		}
	}
}

// kmsgCrossCheck parses batch with kmsg (decompressing the records region
// with the compression package) and compares it with recs.
func kmsgCrossCheck(t *testing.T, batch []byte, recs []testRecord) {
	t.Helper()
	var kb kmsg.RecordBatch
	require.NoError(t, kb.ReadFrom(batch))
	assert.Equal(t, int32(len(batch)-12), kb.Length)
	assert.Equal(t, uint32(kb.CRC), crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	raw, err := compression.AppendDecompress(compression.Type(kb.Attributes&7), nil, kb.Records, 1<<24)
	require.NoError(t, err)
	krecs := kmsgRecords(t, raw, int(kb.NumRecords))
	require.Len(t, krecs, len(recs))
	for i, r := range recs {
		k := krecs[i]
		assert.Equal(t, int32(i), k.OffsetDelta)
		assert.Equal(t, r.ts-kb.FirstTimestamp, k.TimestampDelta64)
		assert.Equal(t, r.key, k.Key)
		assert.Equal(t, r.value, k.Value)
		require.Len(t, k.Headers, len(r.headers))
		for j, h := range r.headers {
			assert.Equal(t, h.Key, k.Headers[j].Key)
			assert.Equal(t, h.Value, k.Headers[j].Value)
		}
	}
}

// TestDecodeReadsKmsgEncoding encodes a batch with kmsg, an implementation
// we did not write, and decodes it with ours.
func TestDecodeReadsKmsgEncoding(t *testing.T) {
	recs := edgeRecords()
	for _, ct := range allCodecs {
		t.Run(ct.String(), func(t *testing.T) {
			var raw []byte
			for i, r := range recs {
				kr := kmsg.Record{
					TimestampDelta64: r.ts - recs[0].ts,
					OffsetDelta:      int32(i),
					Key:              r.key,
					Value:            r.value,
				}
				for _, h := range r.headers {
					kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
				}
				body := kr.AppendTo(nil)[1:] // kmsg writes Length first: compute it
				kr.Length = int32(len(body))
				raw = kr.AppendTo(raw)
			}
			compressed, err := mustCompressor(t, ct).AppendCompress(nil, raw)
			require.NoError(t, err)
			kb := kmsg.RecordBatch{
				PartitionLeaderEpoch: -1,
				Magic:                2,
				Attributes:           int16(ct),
				LastOffsetDelta:      int32(len(recs) - 1),
				FirstTimestamp:       recs[0].ts,
				MaxTimestamp:         maxTS(recs),
				ProducerID:           9,
				ProducerEpoch:        1,
				FirstSequence:        100,
				NumRecords:           int32(len(recs)),
				Records:              compressed,
			}
			kb.Length = int32(HeaderSize - 12 + len(compressed))
			batch := kb.AppendTo(nil)
			binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))

			got, err := Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, int64(9), got.Header.ProducerID)
			assert.Equal(t, int32(100), got.Header.BaseSequence)
			assert.Equal(t, ct, got.Header.Compression())
			assertRecords(t, recs, got.Records)
		})
	}
}

// TestKmsgLengthTrick checks the assumption TestDecodeReadsKmsgEncoding
// makes: a record with Length 0 encodes its length in one byte.
func TestKmsgLengthTrick(t *testing.T) {
	assert.Equal(t, byte(0), (&kmsg.Record{}).AppendTo(nil)[0])
}

func TestBuilderRefusesRecordThatDoesNotFitAndStaysUsable(t *testing.T) {
	var b Builder
	b.Reset(make([]byte, 0, 100))
	require.True(t, b.Append(1, []byte("k"), []byte("small"), nil))
	before := b.Len()
	assert.False(t, b.Append(2, nil, make([]byte, 100), nil), "too large")
	assert.Equal(t, before, b.Len(), "a refused record writes nothing")
	assert.Equal(t, 1, b.NumRecords())
	assert.False(t, b.AppendBody(2, AppendBody(nil, nil, make([]byte, 100), nil)))
	assert.Equal(t, before, b.Len())

	// Fill exactly to the limit.
	room := b.Cap() - b.Len()
	var value []byte
	for n := room; n > 0 && value == nil; n-- {
		body := BodySize(nil, make([]byte, n), nil)
		if b.RecordSize(3, body) == room {
			value = make([]byte, n)
		}
	}
	require.NotNil(t, value, "some value size fills the batch exactly")
	require.True(t, b.Append(3, nil, value, nil))
	assert.Equal(t, b.Cap(), b.Len())
	assert.False(t, b.Append(4, nil, nil, nil), "full")

	batch, _, err := b.Finish(nil, nil)
	require.NoError(t, err)
	Stamp(batch, -1, -1, -1)
	got, err := Decode(batch, 1<<20)
	require.NoError(t, err)
	assert.Len(t, got.Records, 2)
	assert.Equal(t, int64(3), got.Header.MaxTimestamp)
}

func TestBuilderNeverGrowsItsBuffer(t *testing.T) {
	buf := make([]byte, 0, 4096)
	var b Builder
	b.Reset(buf)
	for b.Append(0, []byte("key"), []byte("some value"), nil) {
	}
	batch, _, err := b.Finish(nil, nil)
	require.NoError(t, err)
	assert.Same(t, &buf[:1][0], &batch[0], "batch lives in the buffer given to Reset")
	assert.LessOrEqual(t, len(batch), cap(buf))
}

func TestBuilderStates(t *testing.T) {
	var b Builder
	assert.False(t, b.Append(0, nil, nil, nil), "zero Builder")
	_, _, err := b.Finish(nil, nil)
	assert.ErrorIs(t, err, ErrNotOpen)

	b.Reset(make([]byte, 0, HeaderSize-1))
	assert.False(t, b.Append(0, nil, nil, nil), "buffer smaller than a header")

	b.Reset(make([]byte, 0, HeaderSize))
	assert.Equal(t, HeaderSize, b.Len())
	_, _, err = b.Finish(nil, nil)
	assert.ErrorIs(t, err, ErrEmptyBatch)
	assert.False(t, b.Append(0, nil, nil, nil), "no room for any record")

	b.Reset(make([]byte, 0, 200))
	require.True(t, b.Append(0, nil, nil, nil))
	_, _, err = b.Finish(nil, nil)
	require.NoError(t, err)
	assert.False(t, b.Append(0, nil, nil, nil), "finished")
	_, _, err = b.Finish(nil, nil)
	assert.ErrorIs(t, err, ErrNotOpen)

	b.Reset(make([]byte, 0, 200))
	assert.Zero(t, b.NumRecords(), "Reset starts over")
	assert.True(t, b.Append(0, nil, nil, nil))
}

// TestRecordSizePredictsGrowthExactly is a property test: for random
// records, RecordSize and SingleRecordBatchSize equal the growth of Len.
func TestRecordSizePredictsGrowthExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		recs := randomRecords(rng, 100, rng.Int64N(1<<41))
		var b Builder
		b.Reset(make([]byte, 0, 1<<20))
		for i, r := range recs {
			body := BodySize(r.key, r.value, r.headers)
			require.Equal(t, len(AppendBody(nil, r.key, r.value, r.headers)), body)
			want := b.RecordSize(r.ts, body)
			if i == 0 {
				require.Equal(t, SingleRecordBatchSize(body), HeaderSize+want)
			}
			before := b.Len()
			if i%2 == 0 {
				require.True(t, b.Append(r.ts, r.key, r.value, r.headers))
			} else {
				require.True(t, b.AppendBody(r.ts, AppendBody(nil, r.key, r.value, r.headers)))
			}
			require.Equal(t, want, b.Len()-before, "round %d record %d", round, i)
		}
	}
}

func TestAppendBodyEqualsAppend(t *testing.T) {
	recs := edgeRecords()
	var a, b Builder
	a.Reset(make([]byte, 0, 4096))
	b.Reset(make([]byte, 0, 4096))
	for _, r := range recs {
		require.True(t, a.Append(r.ts, r.key, r.value, r.headers))
		require.True(t, b.AppendBody(r.ts, AppendBody(nil, r.key, r.value, r.headers)))
	}
	ba, _, err := a.Finish(nil, nil)
	require.NoError(t, err)
	bb, _, err := b.Finish(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, ba, bb)
}

// TestSplitByBody is how the producer splits a batch after
// MESSAGE_TOO_LARGE: decoded bodies move into new builders unchanged.
func TestSplitByBody(t *testing.T) {
	recs := edgeRecords()
	batch := buildBatch(t, mustCompressor(t, compression.Zstd), recs, 4096)
	Stamp(batch, 1, 0, 0)
	dec, err := Decode(batch, 1<<20)
	require.NoError(t, err)
	var halves [2]Builder
	for i := range halves {
		halves[i].Reset(make([]byte, 0, 4096))
	}
	for i, r := range dec.Records {
		require.True(t, halves[i*2/len(recs)].AppendBody(r.Timestamp, r.Body))
	}
	for i := range halves {
		out, _, err := halves[i].Finish(nil, nil)
		require.NoError(t, err)
		Stamp(out, 1, 0, int32(i*len(recs)/2))
		got, err := Decode(out, 1<<20)
		require.NoError(t, err)
		assertRecords(t, recs[i*len(recs)/2:(i+1)*len(recs)/2], got.Records)
	}
}

func TestFinishKeepsIncompressibleBatchUncompressed(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	value := make([]byte, 2000)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	for _, ct := range allCodecs[1:] {
		t.Run(ct.String(), func(t *testing.T) {
			var b Builder
			buf := make([]byte, 0, 2100)
			b.Reset(buf)
			require.True(t, b.Append(0, nil, value, nil))
			plain := b.Len()
			batch, scratch, err := b.Finish(mustCompressor(t, ct), nil)
			require.NoError(t, err)
			assert.Equal(t, plain, len(batch), "not compressed")
			assert.Equal(t, uint8(0), batch[22]&7, "codec bits 0")
			assert.Zero(t, len(scratch))
			assert.Positive(t, cap(scratch), "scratch returned for reuse")
			Stamp(batch, -1, -1, -1)
			got, err := Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, compression.None, got.Header.Compression())
			assert.Equal(t, value, got.Records[0].Value)
		})
	}
}

func TestFinishReusesScratch(t *testing.T) {
	c := mustCompressor(t, compression.Gzip)
	scratch := make([]byte, 0, 1<<16)
	var b Builder
	b.Reset(make([]byte, 0, 4096))
	for range 20 {
		require.True(t, b.Append(0, []byte("same key"), []byte("same value, compresses well"), nil))
	}
	batch, out, err := b.Finish(c, scratch)
	require.NoError(t, err)
	assert.Equal(t, compression.Gzip, compression.Type(batch[22]&7))
	assert.Same(t, &scratch[:1][0], &out[:1][0], "large enough scratch is used, not replaced")
}

func TestStampThenDecodeGivesStampedIDs(t *testing.T) {
	for _, ct := range allCodecs {
		t.Run(ct.String(), func(t *testing.T) {
			recs := edgeRecords()
			for range 20 { // compressible, so every codec is used
				recs = append(recs, testRecord{ts: 1, key: []byte("same key"), value: []byte("same value")})
			}
			batch := buildBatch(t, mustCompressor(t, ct), recs, 4096)
			_, err := Decode(batch, 1<<20)
			assert.ErrorIs(t, err, ErrCRCMismatch, "unstamped batch has CRC 0")

			Stamp(batch, 1234567890123, 5, 42)
			got, err := Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, int64(1234567890123), got.Header.ProducerID)
			assert.Equal(t, int16(5), got.Header.ProducerEpoch)
			assert.Equal(t, int32(42), got.Header.BaseSequence)
			assert.False(t, got.Header.Transactional())

			// KIP-360 epoch bump: restamp with a new epoch and sequence.
			Stamp(batch, 1234567890123, 6, 0)
			got, err = Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, int16(6), got.Header.ProducerEpoch)
			assert.Equal(t, int32(0), got.Header.BaseSequence)

			StampTransactional(batch, 7, 0, 3)
			got, err = Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.True(t, got.Header.Transactional())
			assert.Equal(t, ct, got.Header.Compression(), "stamping keeps the codec bits")

			Stamp(batch, -1, -1, -1)
			got, err = Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.False(t, got.Header.Transactional())
			assert.Equal(t, int64(-1), got.Header.ProducerID)
			assert.Equal(t, int16(-1), got.Header.ProducerEpoch)
			assert.Equal(t, int32(-1), got.Header.BaseSequence)
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	key, value := []byte("key"), make([]byte, 100)
	hdrs := []Header{{Key: "h", Value: []byte("v")}}
	body := AppendBody(nil, key, value, hdrs)
	buf := make([]byte, 0, 1<<16)
	var b Builder
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset(buf)
		for b.Append(1, key, value, hdrs) && b.AppendBody(2, body) {
		}
	})
	assert.Zero(t, allocs, "Append and AppendBody")

	batch := buildBatch(t, nil, edgeRecords(), 4096)
	Stamp(batch, 1, 2, 3)
	assert.Zero(t, testing.AllocsPerRun(100, func() { Stamp(batch, 1, 2, 3) }), "Stamp")

	var d Decoder
	_, _, err := d.Decode(batch, 1<<20)
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, _, err := d.Decode(batch, 1<<20); err != nil {
			panic(err)
		}
	}), "Decoder.Decode")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := d.Validate(batch, 1<<20); err != nil {
			panic(err)
		}
	}), "Decoder.Validate")
}

func TestDecoderReuseAcrossCodecs(t *testing.T) {
	var d Decoder
	rng := rand.New(rand.NewPCG(7, 8))
	for range 3 {
		for _, ct := range allCodecs {
			recs := randomRecords(rng, 1+rng.IntN(50), 0)
			batch := buildBatch(t, mustCompressor(t, ct), recs, 1<<20)
			Stamp(batch, -1, -1, -1)
			h, got, err := d.Decode(batch, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, int32(len(recs)), h.NumRecords)
			assertRecords(t, recs, got)
			_, err = d.Validate(batch, 1<<20)
			require.NoError(t, err)
		}
	}
}

func TestErrorsWrapErrCorrupt(t *testing.T) {
	assert.True(t, errors.Is(ErrCRCMismatch, ErrCorrupt))
	assert.True(t, errors.Is(ErrBadMagic, ErrCorrupt))
}
