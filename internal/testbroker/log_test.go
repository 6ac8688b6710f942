package testbroker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/recordbatch"
)

// testBatch describes a produced batch for the log tests. The zero value is
// one uncompressed, non-idempotent record.
type testBatch struct {
	n         int   // records; 0 means 1
	ts        int64 // first record's timestamp; records i get ts+i
	codec     compression.Type
	pid       int64 // 0 means -1 (non-idempotent) unless idem is set
	epoch     int16
	seq       int32
	idem      bool
	txn       bool // transactional (attribute bit 4); needs idem
	valueSize int
	headers   []kmsg.Header
	// corrupt lets a case damage the encoded batch; fixCRC then recomputes
	// the CRC so that only the intended defect remains.
	corrupt func(b []byte) []byte
	fixCRC  bool
	// recordOffsetDelta overrides record i's offset delta when set.
	recordOffsetDelta func(i int) int32
}

// build encodes the batch with kmsg's encoder (an implementation we did not
// write), compressing with compression/, and fills in Length and CRC.
func (tb testBatch) build(t testing.TB) []byte {
	t.Helper()
	n := tb.n
	if n == 0 {
		n = 1
	}
	var recs []byte
	for i := 0; i < n; i++ {
		value := bytes.Repeat([]byte{byte('a' + i%26)}, tb.valueSize)
		if tb.valueSize == 0 {
			value = []byte(fmt.Sprintf("value-%d", i))
		}
		delta := int32(i)
		if tb.recordOffsetDelta != nil {
			delta = tb.recordOffsetDelta(i)
		}
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      delta,
			Key:              []byte(fmt.Sprintf("key-%d", i)),
			Value:            value,
			Headers:          tb.headers,
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // the zero Length varint is one byte
		recs = r.AppendTo(recs)
	}
	attrs := int16(tb.codec)
	if tb.txn {
		attrs |= attrTransactional
	}
	if tb.codec != compression.None {
		c, err := compression.NewCompressor(tb.codec, 0)
		require.NoError(t, err)
		recs, err = c.AppendCompress(nil, recs)
		require.NoError(t, err)
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if tb.idem {
		pid, epoch, seq = tb.pid, tb.epoch, tb.seq
	}
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       tb.ts,
		MaxTimestamp:         tb.ts + int64(n-1),
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(n),
		Records:              recs,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	setCRC(b)
	if tb.corrupt != nil {
		b = tb.corrupt(b)
		if tb.fixCRC {
			setCRC(b)
		}
	}
	return b
}

func setCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

var t0 = time.UnixMilli(1_700_000_000_000)

func TestAppendBatchValidation(t *testing.T) {
	put16 := func(off int, v uint16) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], v); return b }
	}
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
	}
	cases := []struct {
		name string
		raw  func(t testing.TB) []byte
		// max gives max.message.bytes from the batch size; nil is the default.
		max   func(size int) int32
		sink  bool
		want  int16
		store bool // the batch must be appended
	}{
		{name: "valid", raw: testBatch{n: 3}.build, want: codeNone, store: true},
		{name: "valid with headers", raw: testBatch{n: 2, headers: []kmsg.Header{{Key: "h", Value: []byte("v")}, {Key: "null"}}}.build, want: codeNone, store: true},
		{name: "empty record set", raw: func(testing.TB) []byte { return nil }, want: codeInvalidRecord},
		{name: "shorter than the magic byte", raw: func(testing.TB) []byte { return make([]byte, 10) }, want: codeCorruptMessage},
		{name: "magic 1", raw: testBatch{corrupt: func(b []byte) []byte { b[16] = 1; return b }}.build, want: codeInvalidRecord},
		{name: "length smaller than a header", raw: testBatch{corrupt: put32(8, 20)}.build, want: codeCorruptMessage},
		{name: "truncated", raw: testBatch{n: 2, corrupt: func(b []byte) []byte { return b[:len(b)-3] }}.build, want: codeCorruptMessage},
		{name: "two batches", raw: func(t testing.TB) []byte {
			return append(testBatch{}.build(t), testBatch{}.build(t)...)
		}, want: codeInvalidRecord},
		{name: "base offset not 0", raw: testBatch{corrupt: func(b []byte) []byte { b[7] = 9; return b }}.build, want: codeInvalidRecord},
		{name: "larger than max.message.bytes", raw: testBatch{n: 4, valueSize: 100}.build, max: func(int) int32 { return 300 }, want: codeMessageTooLarge},
		{name: "exactly max.message.bytes", raw: testBatch{n: 1, valueSize: 100}.build, max: func(size int) int32 { return int32(size) }, want: codeNone, store: true},
		{name: "one byte over max.message.bytes", raw: testBatch{n: 1, valueSize: 100}.build, max: func(size int) int32 { return int32(size) - 1 }, want: codeMessageTooLarge},
		{name: "CRC mismatch", raw: testBatch{n: 2, corrupt: func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }}.build, want: codeCorruptMessage},
		{name: "CRC mismatch in sink mode", sink: true, raw: testBatch{n: 2, corrupt: func(b []byte) []byte { b[30] ^= 1; return b }}.build, want: codeCorruptMessage},
		{name: "unknown codec 6", raw: testBatch{corrupt: put16(21, 6), fixCRC: true}.build, want: codeUnsupportedCompression},
		{name: "count does not match last offset delta", raw: testBatch{n: 2, corrupt: put32(57, 3), fixCRC: true}.build, want: codeInvalidRecord},
		{name: "negative last offset delta", raw: testBatch{corrupt: put32(23, 0xffffffff), fixCRC: true}.build, want: codeInvalidRecord},
		{name: "zero records", raw: testBatch{corrupt: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 0)
			binary.BigEndian.PutUint32(b[23:], 0xffffffff)
			return b
		}, fixCRC: true}.build, want: codeInvalidRecord},
		{name: "control batch", raw: testBatch{corrupt: put16(21, 0x20), fixCRC: true}.build, want: codeInvalidRecord},
		{name: "idempotent batch without sequence", raw: testBatch{idem: true, pid: 7, seq: -1}.build, want: codeInvalidRecord},
		{name: "offset deltas not 0..n-1", raw: testBatch{n: 3, recordOffsetDelta: func(i int) int32 { return int32(2 * i) }}.build, want: codeInvalidRecord},
		{name: "offset deltas unchecked in sink mode", sink: true, raw: testBatch{n: 3, recordOffsetDelta: func(i int) int32 { return int32(2 * i) }}.build, want: codeNone, store: true},
		{name: "record bytes cut short", raw: testBatch{n: 2, corrupt: func(b []byte) []byte {
			b = b[:len(b)-2]
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			return b
		}, fixCRC: true}.build, want: codeInvalidRecord},
		{name: "trailing bytes after the records", raw: testBatch{n: 2, corrupt: func(b []byte) []byte {
			b = append(b, 0, 0, 0)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			return b
		}, fixCRC: true}.build, want: codeInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw(t)
			cfg := logConfig{Sink: tc.sink}
			if tc.max != nil {
				cfg.MaxMessageBytes = tc.max(len(raw))
			}
			l := newPartitionLog(cfg)
			res := l.appendBatch(raw, t0)
			assert.Equal(t, tc.want, res.ErrorCode, "error message: %s", res.ErrorMessage)
			if tc.store {
				assert.Empty(t, res.ErrorMessage)
				assert.Equal(t, int64(0), res.BaseOffset)
				assert.Equal(t, 1, l.numBatches())
				assert.Positive(t, l.highWatermark())
				return
			}
			assert.NotEmpty(t, res.ErrorMessage)
			assert.Equal(t, int64(-1), res.BaseOffset)
			assert.Equal(t, int64(0), l.highWatermark(), "a rejected batch must not move the high watermark")
			assert.Equal(t, 0, l.numBatches())
		})
	}
}

func TestAppendCompressed(t *testing.T) {
	for _, codec := range []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			l := newPartitionLog(logConfig{})
			res := l.appendBatch(testBatch{n: 20, codec: codec, valueSize: 50}.build(t), t0)
			if res.ErrorCode != codeNone && bytes.Contains([]byte(res.ErrorMessage), []byte("not supported yet")) {
				t.Skip("internal/recordbatch does not decompress yet")
			}
			require.Equal(t, codeNone, res.ErrorCode, res.ErrorMessage)
			recs, err := l.records()
			require.NoError(t, err)
			require.Len(t, recs, 20)
			for i, r := range recs {
				assert.Equal(t, int64(i), r.Offset)
				assert.Equal(t, int8(codec), r.Compression)
				assert.Equal(t, bytes.Repeat([]byte{byte('a' + i%26)}, 50), r.Value)
			}
		})
	}
	t.Run("corrupt compressed data", func(t *testing.T) {
		l := newPartitionLog(logConfig{})
		raw := testBatch{n: 5, codec: compression.Gzip}.build(t)
		for i := 61 + 12; i < len(raw)-8; i++ { // damage the deflate stream, keep the gzip header
			raw[i] ^= 0x5a
		}
		setCRC(raw)
		res := l.appendBatch(raw, t0)
		if bytes.Contains([]byte(res.ErrorMessage), []byte("not supported yet")) {
			t.Skip("internal/recordbatch does not decompress yet")
		}
		assert.Equal(t, codeCorruptMessage, res.ErrorCode, res.ErrorMessage)
	})
	t.Run("decompression bomb", func(t *testing.T) {
		l := newPartitionLog(logConfig{MaxUncompressedBytes: 4096})
		res := l.appendBatch(testBatch{n: 10, codec: compression.Zstd, valueSize: 1000}.build(t), t0)
		if bytes.Contains([]byte(res.ErrorMessage), []byte("not supported yet")) {
			t.Skip("internal/recordbatch does not decompress yet")
		}
		assert.Equal(t, codeCorruptMessage, res.ErrorCode, res.ErrorMessage)
	})
}

// TestAppendAssignsOffsets checks what a consumer relies on: offsets are
// contiguous across batches, stored batches carry their base offset and the
// leader epoch, and still pass CRC and decoding.
func TestAppendAssignsOffsets(t *testing.T) {
	l := newPartitionLog(logConfig{})
	l.setLeaderEpoch(4)
	hdrs := []kmsg.Header{{Key: "k1", Value: []byte("v1")}, {Key: "k2"}}
	sizes := []int{3, 2, 5}
	wantBase := []int64{0, 3, 5}
	for i, n := range sizes {
		res := l.appendBatch(testBatch{n: n, ts: 1000 * int64(i), headers: hdrs}.build(t), t0)
		require.Equal(t, codeNone, res.ErrorCode, res.ErrorMessage)
		assert.Equal(t, wantBase[i], res.BaseOffset)
		assert.Equal(t, int64(-1), res.LogAppendTime, "CreateTime logs answer -1")
		assert.Equal(t, int32(n), res.NumRecords)
	}
	assert.Equal(t, int64(10), l.highWatermark())
	assert.Equal(t, 3, l.numBatches())

	recs, err := l.records()
	require.NoError(t, err)
	require.Len(t, recs, 10)
	batch := 0
	for i, r := range recs {
		if batch+1 < len(wantBase) && int64(i) >= wantBase[batch+1] {
			batch++
		}
		inBatch := i - int(wantBase[batch])
		assert.Equal(t, int64(i), r.Offset)
		assert.Equal(t, wantBase[batch], r.BatchBaseOffset)
		assert.Equal(t, 1000*int64(batch)+int64(inBatch), r.Timestamp)
		assert.Equal(t, fmt.Sprintf("key-%d", inBatch), string(r.Key))
		assert.Equal(t, fmt.Sprintf("value-%d", inBatch), string(r.Value))
		assert.Equal(t, []Header{{Key: "k1", Value: []byte("v1")}, {Key: "k2"}}, r.Headers)
		assert.Equal(t, int64(-1), r.ProducerID)
		assert.Equal(t, int32(-1), r.Sequence)
	}

	batches, hw, logStart, code := l.fetch(0, 1<<20)
	require.Equal(t, codeNone, code)
	assert.Equal(t, int64(10), hw)
	assert.Equal(t, int64(0), logStart)
	require.Len(t, batches, 3)
	for i, b := range batches {
		dec, err := recordbatch.Decode(b, 1<<20)
		require.NoError(t, err, "a stored batch must still pass its CRC")
		assert.Equal(t, wantBase[i], dec.Header.BaseOffset)
		assert.Equal(t, int32(4), dec.Header.PartitionLeaderEpoch)
	}
}

func TestAppendDoesNotRetainInput(t *testing.T) {
	l := newPartitionLog(logConfig{})
	raw := testBatch{n: 2}.build(t)
	require.Equal(t, codeNone, l.appendBatch(raw, t0).ErrorCode)
	for i := range raw {
		raw[i] = 0xee // the broker releases request memory to its pool
	}
	recs, err := l.records()
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "value-1", string(recs[1].Value))
}

func TestFetch(t *testing.T) {
	l := newPartitionLog(logConfig{})
	var sizes []int
	for i := 0; i < 4; i++ { // batches at offsets 0-2, 3-5, 6-8, 9-11
		raw := testBatch{n: 3}.build(t)
		sizes = append(sizes, len(raw))
		require.Equal(t, codeNone, l.appendBatch(raw, t0).ErrorCode)
	}
	size := int32(sizes[0])
	cases := []struct {
		name      string
		offset    int64
		maxBytes  int32
		wantBases []int64
		wantCode  int16
	}{
		{name: "from the start, everything", offset: 0, maxBytes: 1 << 20, wantBases: []int64{0, 3, 6, 9}},
		{name: "mid batch returns the whole batch", offset: 4, maxBytes: 1 << 20, wantBases: []int64{3, 6, 9}},
		{name: "max bytes fits two", offset: 0, maxBytes: 2*size + 1, wantBases: []int64{0, 3}},
		{name: "first batch even if larger than max bytes", offset: 6, maxBytes: 1, wantBases: []int64{6}},
		{name: "last offset", offset: 11, maxBytes: 1 << 20, wantBases: []int64{9}},
		{name: "at the high watermark: empty, no error", offset: 12, maxBytes: 1 << 20},
		{name: "above the high watermark", offset: 13, maxBytes: 1 << 20, wantCode: codeOffsetOutOfRange},
		{name: "negative", offset: -1, maxBytes: 1 << 20, wantCode: codeOffsetOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			batches, hw, logStart, code := l.fetch(tc.offset, tc.maxBytes)
			assert.Equal(t, tc.wantCode, code)
			assert.Equal(t, int64(12), hw)
			assert.Equal(t, int64(0), logStart)
			var bases []int64
			for _, b := range batches {
				bases = append(bases, int64(binary.BigEndian.Uint64(b)))
			}
			assert.Equal(t, tc.wantBases, bases)
		})
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	l := newPartitionLog(logConfig{})
	for i := 0; i < 3; i++ { // offsets 0-3, 4-7, 8-11
		require.Equal(t, codeNone, l.appendBatch(testBatch{n: 4}.build(t), t0).ErrorCode)
	}
	l.deleteRecordsBefore(5)
	assert.Equal(t, int64(5), l.logStartOffset())
	assert.Equal(t, int64(12), l.highWatermark())
	assert.Equal(t, 2, l.numBatches(), "the batch ending at 3 is gone, the one holding 5 stays")

	recs, err := l.records()
	require.NoError(t, err)
	require.Len(t, recs, 7)
	assert.Equal(t, int64(5), recs[0].Offset)

	_, _, logStart, code := l.fetch(4, 1<<20)
	assert.Equal(t, codeOffsetOutOfRange, code)
	assert.Equal(t, int64(5), logStart)
	batches, _, _, code := l.fetch(5, 1<<20)
	assert.Equal(t, codeNone, code)
	assert.Len(t, batches, 2)

	off, _ := l.offsetForTimestamp(listOffsetsEarliest)
	assert.Equal(t, int64(5), off)

	l.deleteRecordsBefore(2) // never moves back
	assert.Equal(t, int64(5), l.logStartOffset())
	l.deleteRecordsBefore(100) // capped at the high watermark
	assert.Equal(t, int64(12), l.logStartOffset())
	assert.Equal(t, 0, l.numBatches())
	res := l.appendBatch(testBatch{}.build(t), t0)
	assert.Equal(t, int64(12), res.BaseOffset)
	assert.Equal(t, int64(12), res.LogStartOffset)
}

func TestOffsetForTimestamp(t *testing.T) {
	l := newPartitionLog(logConfig{})
	// Batch timestamps: offsets 0-2 at 100..102, 3-4 at 50..51, 5-7 at 200..202.
	for _, b := range []testBatch{{n: 3, ts: 100}, {n: 2, ts: 50}, {n: 3, ts: 200}} {
		require.Equal(t, codeNone, l.appendBatch(b.build(t), t0).ErrorCode)
	}
	cases := []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTS     int64
	}{
		{name: "latest", ts: listOffsetsLatest, wantOffset: 8, wantTS: -1},
		{name: "earliest", ts: listOffsetsEarliest, wantOffset: 0, wantTS: -1},
		{name: "max timestamp", ts: listOffsetsMaxTimestamp, wantOffset: 7, wantTS: 202},
		{name: "before everything", ts: 0, wantOffset: 0, wantTS: 100},
		{name: "exact", ts: 101, wantOffset: 1, wantTS: 101},
		{name: "first record at or after", ts: 103, wantOffset: 5, wantTS: 200},
		{name: "after everything", ts: 1000, wantOffset: -1, wantTS: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			off, ts := l.offsetForTimestamp(tc.ts)
			assert.Equal(t, tc.wantOffset, off)
			assert.Equal(t, tc.wantTS, ts)
		})
	}
}

func TestLogAppendTime(t *testing.T) {
	l := newPartitionLog(logConfig{LogAppendTime: true})
	res := l.appendBatch(testBatch{n: 3, ts: 5}.build(t), t0)
	require.Equal(t, codeNone, res.ErrorCode, res.ErrorMessage)
	assert.Equal(t, t0.UnixMilli(), res.LogAppendTime)
	recs, err := l.records()
	require.NoError(t, err)
	for _, r := range recs {
		assert.Equal(t, t0.UnixMilli(), r.Timestamp)
	}
	batches, _, _, _ := l.fetch(0, 1<<20)
	require.Len(t, batches, 1)
	dec, err := recordbatch.Decode(batches[0], 1<<20)
	require.NoError(t, err, "the rewritten batch must carry a valid CRC")
	assert.True(t, dec.Header.LogAppendTime())
	off, ts := l.offsetForTimestamp(t0.UnixMilli())
	assert.Equal(t, int64(0), off)
	assert.Equal(t, t0.UnixMilli(), ts)
}

func TestSinkMode(t *testing.T) {
	l := newPartitionLog(logConfig{Sink: true})
	for i := 0; i < 3; i++ {
		res := l.appendBatch(testBatch{n: 4, idem: true, pid: 1, seq: int32(4 * i)}.build(t), t0)
		require.Equal(t, codeNone, res.ErrorCode, res.ErrorMessage)
		assert.Equal(t, int64(4*i), res.BaseOffset)
	}
	// Sequences are still checked: a retry is a duplicate, a gap is refused.
	res := l.appendBatch(testBatch{n: 4, idem: true, pid: 1, seq: 4}.build(t), t0)
	assert.True(t, res.Duplicate)
	assert.Equal(t, int64(4), res.BaseOffset)
	res = l.appendBatch(testBatch{n: 4, idem: true, pid: 1, seq: 20}.build(t), t0)
	assert.Equal(t, codeOutOfOrderSequence, res.ErrorCode)

	assert.Equal(t, int64(12), l.highWatermark())
	assert.Equal(t, 3, l.numBatches(), "sink mode counts appended batches")
	recs, err := l.records()
	require.NoError(t, err)
	assert.Empty(t, recs)
	batches, hw, _, code := l.fetch(0, 1<<20)
	assert.Equal(t, codeNone, code)
	assert.Empty(t, batches)
	assert.Equal(t, int64(12), hw)
}

func TestConcurrentAppendsGetDistinctOffsets(t *testing.T) {
	l := newPartitionLog(logConfig{})
	const writers, perWriter, n = 4, 25, 3
	raws := make([][]byte, writers)
	for w := range raws {
		raws[w] = testBatch{n: n}.build(t)
	}
	var wg sync.WaitGroup
	bases := make(chan int64, writers*perWriter)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(raw []byte) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				bases <- l.appendBatch(raw, t0).BaseOffset
			}
		}(raws[w])
	}
	wg.Wait()
	close(bases)
	seen := map[int64]bool{}
	for b := range bases {
		assert.Zero(t, b%n, "base offset %d", b)
		assert.False(t, seen[b], "base offset %d given twice", b)
		seen[b] = true
	}
	assert.Equal(t, int64(writers*perWriter*n), l.highWatermark())
	recs, err := l.records()
	require.NoError(t, err)
	assert.Len(t, recs, writers*perWriter*n)
}

// BenchmarkAppendSink measures sink-mode ingest (framing, CRC, sequences):
// the test broker's budget for producer benchmarks is >= 500 MB/s.
func BenchmarkAppendSink(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			raw := testBatch{n: size / 100, valueSize: 90}.build(b)
			l := newPartitionLog(logConfig{Sink: true, MaxMessageBytes: 1 << 30})
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if res := l.appendBatch(raw, t0); res.ErrorCode != 0 {
					b.Fatal(res.ErrorMessage)
				}
			}
		})
	}
}

// BenchmarkAppendStore measures the full validation and copy of a stored
// (non-sink) log.
func BenchmarkAppendStore(b *testing.B) {
	for _, codec := range []compression.Type{compression.None, compression.LZ4} {
		b.Run(codec.String(), func(b *testing.B) {
			raw := testBatch{n: 160, valueSize: 90, codec: codec}.build(b)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			l := newPartitionLog(logConfig{})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%10000 == 0 { // bound memory
					b.StopTimer()
					l = newPartitionLog(logConfig{})
					b.StartTimer()
				}
				if res := l.appendBatch(raw, t0); res.ErrorCode != 0 {
					b.Skip(res.ErrorMessage)
				}
			}
		})
	}
}

// FuzzAppendBatch feeds arbitrary record sets to a partition log: it must
// never panic, a rejected batch must leave the log unchanged, and an
// accepted one must advance the high watermark by its record count and read
// back.
func FuzzAppendBatch(f *testing.F) {
	for _, tb := range []testBatch{
		{n: 3},
		{n: 2, codec: compression.Gzip, headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}},
		{n: 4, codec: compression.Snappy},
		{n: 1, codec: compression.LZ4},
		{n: 5, codec: compression.Zstd, idem: true, pid: 3, seq: 0},
		{n: 2, idem: true, pid: 3, seq: 5},
	} {
		f.Add(tb.build(f), false)
		f.Add(tb.build(f), true)
	}
	f.Add([]byte{}, false)
	f.Add(make([]byte, 61), false)
	f.Fuzz(func(t *testing.T, raw []byte, sink bool) {
		l := newPartitionLog(logConfig{Sink: sink, MaxUncompressedBytes: 1 << 20})
		// A first batch from producer 3 so that sequences are checked too.
		require.Equal(t, codeNone, l.appendBatch(testBatch{n: 5, idem: true, pid: 3}.build(t), t0).ErrorCode)
		res := l.appendBatch(raw, t0)
		hw := l.highWatermark()
		if res.ErrorCode != codeNone || res.Duplicate {
			assert.Equal(t, int64(5), hw, "a rejected or duplicate batch must not be appended")
			return
		}
		assert.Equal(t, int64(5), res.BaseOffset)
		assert.Equal(t, 5+int64(res.NumRecords), hw)
		if !sink {
			recs, err := l.records()
			require.NoError(t, err, "an accepted batch must decode")
			assert.Len(t, recs, int(hw))
		}
	})
}
