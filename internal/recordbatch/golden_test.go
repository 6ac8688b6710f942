package recordbatch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// goldenBatch is a two-record batch written out by hand from the protocol
// spec (KAFKA-FACTS.md, "Record batch v2"), stamped with producer id 42,
// epoch 3 and base sequence 7:
//
//	record 0: ts 1000, key "k", value "v1", no headers
//	record 1: ts 999 (delta -1), null key, empty value, header "h"="x"
//
// The CRC was computed independently with this bitwise CRC-32C in Python
// (reflected polynomial 0x82F63B78; it gives the standard check value
// 0xe3069283 for "123456789"):
//
//	def crc32c(data):
//	    crc = 0xffffffff
//	    for b in data:
//	        crc ^= b
//	        for _ in range(8):
//	            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
//	    return crc ^ 0xffffffff
//
// over bytes 21..81, which gave 0x7eda9d2d.
var goldenBatch = []byte{
	0, 0, 0, 0, 0, 0, 0, 0, // BaseOffset 0
	0, 0, 0, 70, // Length: 82 bytes - 12
	0xff, 0xff, 0xff, 0xff, // PartitionLeaderEpoch -1
	2,                      // Magic
	0x7e, 0xda, 0x9d, 0x2d, // CRC-32C of bytes 21..81
	0, 0, // Attributes: no compression, CreateTime, not transactional
	0, 0, 0, 1, // LastOffsetDelta 1
	0, 0, 0, 0, 0, 0, 0x03, 0xe8, // BaseTimestamp 1000
	0, 0, 0, 0, 0, 0, 0x03, 0xe8, // MaxTimestamp 1000
	0, 0, 0, 0, 0, 0, 0, 42, // ProducerId 42
	0, 3, // ProducerEpoch 3
	0, 0, 0, 7, // BaseSequence 7
	0, 0, 0, 2, // RecordsCount 2

	// record 0
	0x12,      // Length 9 (zigzag 18)
	0,         // Attributes
	0,         // TimestampDelta 0
	0,         // OffsetDelta 0
	0x02, 'k', // KeyLen 1, "k"
	0x04, 'v', '1', // ValueLen 2, "v1"
	0, // HeadersCount 0

	// record 1
	0x14,      // Length 10 (zigzag 20)
	0,         // Attributes
	0x01,      // TimestampDelta -1 (zigzag 1)
	0x02,      // OffsetDelta 1
	0x01,      // KeyLen -1: null key
	0x00,      // ValueLen 0: empty value
	0x02,      // HeadersCount 1
	0x02, 'h', // HeaderKeyLen 1, "h"
	0x02, 'x', // HeaderValueLen 1, "x"
}

func buildGolden(t *testing.T) []byte {
	t.Helper()
	var b Builder
	b.Reset(make([]byte, 0, 128))
	require.True(t, b.Append(1000, []byte("k"), []byte("v1"), nil))
	require.True(t, b.Append(999, nil, []byte{}, []Header{{Key: "h", Value: []byte("x")}}))
	batch, _, err := b.Finish(nil, nil)
	require.NoError(t, err)
	Stamp(batch, 42, 3, 7)
	return batch
}

func TestGoldenBatchMatchesHandEncoding(t *testing.T) {
	require.Len(t, goldenBatch, 82)
	assert.Equal(t, goldenBatch, buildGolden(t))
	// The CRC in goldenBatch is also what hash/crc32 computes.
	assert.Equal(t, binary.BigEndian.Uint32(goldenBatch[17:]), crc32.Checksum(goldenBatch[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func TestGoldenBatchDecodes(t *testing.T) {
	batch, err := Decode(goldenBatch, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, BatchHeader{
		BaseOffset: 0, Length: 70, PartitionLeaderEpoch: -1, Magic: 2, CRC: 0x7eda9d2d,
		LastOffsetDelta: 1, BaseTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, NumRecords: 2,
	}, batch.Header)
	require.Len(t, batch.Records, 2)
	r0, r1 := batch.Records[0], batch.Records[1]
	assert.Equal(t, []byte("k"), r0.Key)
	assert.Equal(t, []byte("v1"), r0.Value)
	assert.Nil(t, r0.Headers)
	assert.Equal(t, int64(1000), r0.Timestamp)
	assert.Nil(t, r1.Key)
	assert.NotNil(t, r1.Value)
	assert.Empty(t, r1.Value)
	assert.Equal(t, int64(-1), r1.TimestampDelta)
	assert.Equal(t, int64(999), r1.Timestamp)
	assert.Equal(t, int32(1), r1.OffsetDelta)
	assert.Equal(t, []Header{{Key: "h", Value: []byte("x")}}, r1.Headers)
	assert.Equal(t, goldenBatch[75:], r1.Body)
}

// TestGoldenBatchReadByKmsg cross-checks the hand encoding with franz-go's
// kmsg, an implementation we did not write.
func TestGoldenBatchReadByKmsg(t *testing.T) {
	var kb kmsg.RecordBatch
	require.NoError(t, kb.ReadFrom(goldenBatch))
	assert.Equal(t, int32(70), kb.Length)
	assert.Equal(t, int8(2), kb.Magic)
	assert.Equal(t, int32(0x7eda9d2d), kb.CRC)
	assert.Equal(t, int64(1000), kb.FirstTimestamp)
	assert.Equal(t, int64(42), kb.ProducerID)
	assert.Equal(t, int16(3), kb.ProducerEpoch)
	assert.Equal(t, int32(7), kb.FirstSequence)
	assert.Equal(t, int32(2), kb.NumRecords)
	recs := kmsgRecords(t, kb.Records, 2)
	assert.Equal(t, []byte("k"), recs[0].Key)
	assert.Equal(t, []byte("v1"), recs[0].Value)
	assert.Nil(t, recs[1].Key)
	assert.Equal(t, int64(-1), recs[1].TimestampDelta64)
	assert.Equal(t, []kmsg.Header{{Key: "h", Value: []byte("x")}}, recs[1].Headers)

	// And kmsg re-encodes the same bytes.
	var out []byte
	out = kb.AppendTo(out)
	assert.True(t, bytes.Equal(goldenBatch, out))
}

// kmsgRecords parses n uncompressed records with kmsg.
func kmsgRecords(t *testing.T, p []byte, n int) []kmsg.Record {
	t.Helper()
	var recs []kmsg.Record
	for i := 0; i < n; i++ {
		l, ln := readVarint32(p)
		require.Positive(t, ln, "record %d length", i)
		end := ln + int(l)
		require.LessOrEqual(t, end, len(p))
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(p[:end]), "record %d", i)
		recs = append(recs, r)
		p = p[end:]
	}
	require.Empty(t, p, "bytes after the records")
	return recs
}

func TestVarintsMatchKafka(t *testing.T) {
	// Values and encodings from Kafka's ByteUtilsTest / the zigzag definition.
	cases := []struct {
		v    int64
		want []byte
	}{
		{0, []byte{0x00}},
		{-1, []byte{0x01}},
		{1, []byte{0x02}},
		{-2, []byte{0x03}},
		{63, []byte{0x7e}},
		{-64, []byte{0x7f}},
		{64, []byte{0x80, 0x01}},
		{-65, []byte{0x81, 0x01}},
		{300, []byte{0xd8, 0x04}},
		{2147483647, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}},
		{-2147483648, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		{9223372036854775807, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{-9223372036854775808, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	}
	for _, tc := range cases {
		got := appendVarint(nil, tc.v)
		assert.Equal(t, tc.want, got, "encode %d", tc.v)
		assert.Equal(t, len(tc.want), varintLen(tc.v), "len %d", tc.v)
		assert.Equal(t, binary.AppendVarint(nil, tc.v), got, "encoding/binary agrees for %d", tc.v)
		v64, n := readVarint64(tc.want)
		assert.Equal(t, tc.v, v64, "decode64 %d", tc.v)
		assert.Equal(t, len(tc.want), n)
		v32, n := readVarint32(tc.want)
		if tc.v >= -1<<31 && tc.v < 1<<31 {
			assert.Equal(t, int32(tc.v), v32, "decode32 %d", tc.v)
			assert.Equal(t, len(tc.want), n)
		} else {
			assert.Zero(t, n, "decode32 of %d must fail", tc.v)
		}
	}
}

func TestReadVarintRejectsMalformed(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		is32 bool
	}{
		{"empty32", nil, true},
		{"empty64", nil, false},
		{"truncated32", []byte{0x80, 0x80}, true},
		{"truncated64", []byte{0xff}, false},
		{"too long 32", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, true},
		{"overflow 32", []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, true},
		{"too long 64", bytes.Repeat([]byte{0x80}, 11), false},
		{"overflow 64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, false},
	}
	for _, tc := range cases {
		var n int
		if tc.is32 {
			_, n = readVarint32(tc.in)
		} else {
			_, n = readVarint64(tc.in)
		}
		assert.Zero(t, n, tc.name)
	}
}
