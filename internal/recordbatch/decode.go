package recordbatch

import (
	"fmt"
	"hash/crc32"
	"unsafe"
)

// Record is one decoded record. Key, Value, Body and header values alias the
// decoded input (or the decompression buffer for a compressed batch).
type Record struct {
	Attributes     int8  // record attributes; unused by Kafka, 0
	TimestampDelta int64 // milliseconds from the batch's BaseTimestamp
	Timestamp      int64 // BaseTimestamp + TimestampDelta, Unix milliseconds
	OffsetDelta    int32 // index of the record in its batch
	Key            []byte
	Value          []byte
	Headers        []Header

	// Body is the record's encoded body (everything after OffsetDelta), as
	// Builder.AppendBody takes it: splitting a batch moves bodies into new
	// builders without re-encoding.
	Body []byte
}

// Batch is a decoded record batch.
type Batch struct {
	Header  BatchHeader
	Records []Record
}

// Decode parses and checks one record batch, which must be all of b, and
// returns its records. Records alias b (or a decompression buffer of their
// own); header keys are copied.
//
// maxUncompressed caps the size of the records region once decompressed,
// which protects against decompression bombs; it must be positive.
//
// Decode checks, in order: framing (header present, Length = len(b)-12),
// magic 2, the CRC-32C, the record count and LastOffsetDelta, the
// decompressed size, and then that every record is well formed, that offset
// deltas run 0..n-1 and that no byte is left over. Errors wrap ErrCorrupt,
// ErrCRCMismatch or ErrBadMagic, or, from decompression, compression.ErrTooLarge
// (also for an uncompressed records region above the cap) or
// compression.ErrUnsupported (unknown codec bits); corrupt compressed data
// wraps both ErrCorrupt and compression.ErrCorrupt.
//
// Decode allocates; a Decoder reuses its memory across batches.
func Decode(b []byte, maxUncompressed int) (*Batch, error) {
	d := Decoder{copyKeys: true}
	h, recs, err := d.Decode(b, maxUncompressed)
	if err != nil {
		return nil, err
	}
	return &Batch{Header: h, Records: recs}, nil
}

// Decoder decodes batches, reusing its decompression buffer and record slices
// from one call to the next, so that it allocates nothing in steady state.
// The zero Decoder is ready to use. It is not safe for concurrent use.
type Decoder struct {
	buf      []byte // decompressed records
	recs     []Record
	hdrs     []Header
	copyKeys bool
}

// Decode is like the package-level Decode, but the records it returns, their
// header keys included, alias b or the decoder's buffers and are valid only
// until the next call on d (or while b is unchanged). Copy what you keep.
func (d *Decoder) Decode(b []byte, maxUncompressed int) (BatchHeader, []Record, error) {
	h, recs, err := d.check(b, maxUncompressed)
	if err != nil {
		return h, nil, err
	}
	d.recs = d.recs[:0]
	d.hdrs = d.hdrs[:0]
	if err := d.walk(&h, recs, true); err != nil {
		return h, nil, err
	}
	return h, d.recs, nil
}

// Validate makes every check Decode makes, without building records. The
// test broker calls it on each produced batch. It allocates nothing in
// steady state.
func (d *Decoder) Validate(b []byte, maxUncompressed int) (BatchHeader, error) {
	h, recs, err := d.check(b, maxUncompressed)
	if err != nil {
		return h, err
	}
	return h, d.walk(&h, recs, false)
}

// minRecordSize is the smallest encoded record: length, attributes,
// timestamp delta, offset delta, key length, value length and header count,
// one byte each.
const minRecordSize = 7

// check verifies framing, magic, CRC and counts, and returns the
// (decompressed) records region.
func (d *Decoder) check(b []byte, maxUncompressed int) (BatchHeader, []byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	if int64(h.Length)+lengthOverhead != int64(len(b)) {
		return h, nil, fmt.Errorf("%w: batch length %d does not match the %d bytes after the length field", ErrCorrupt, h.Length, len(b)-lengthOverhead)
	}
	if crc := crc32.Checksum(b[offAttributes:], castagnoli); crc != h.CRC {
		return h, nil, fmt.Errorf("%w: header says %#08x, bytes give %#08x", ErrCRCMismatch, h.CRC, crc)
	}
	if h.NumRecords <= 0 {
		return h, nil, fmt.Errorf("%w: record count %d", ErrCorrupt, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return h, nil, fmt.Errorf("%w: last offset delta %d with %d records", ErrCorrupt, h.LastOffsetDelta, h.NumRecords)
	}
	if maxUncompressed <= 0 {
		return h, nil, fmt.Errorf("recordbatch: maxUncompressed must be positive, got %d", maxUncompressed)
	}
	recs := b[HeaderSize:]
	codec := h.Attributes & attrCodecMask
	if codec == 0 {
		if len(recs) > maxUncompressed {
			return h, nil, tooLarge(len(recs), maxUncompressed)
		}
	} else {
		d.buf, err = decompress(codec, d.buf[:0], recs, maxUncompressed)
		if err != nil {
			return h, nil, err
		}
		recs = d.buf
	}
	if int64(h.NumRecords)*minRecordSize > int64(len(recs)) {
		return h, nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, h.NumRecords, len(recs))
	}
	return h, recs, nil
}

// walk parses the records region p, checking every record, and appends
// records to d.recs if store.
func (d *Decoder) walk(h *BatchHeader, p []byte, store bool) error {
	for i := int32(0); i < h.NumRecords; i++ {
		l, n := readVarint32(p)
		if n <= 0 || l < 0 || int(l) > len(p)-n {
			return recordErr(i, "bad record length")
		}
		r := p[n : n+int(l)]
		p = p[n+int(l):]
		if len(r) < 1 {
			return recordErr(i, "empty record")
		}
		attrs := int8(r[0])
		r = r[1:]
		tsDelta, n := readVarint64(r)
		if n <= 0 {
			return recordErr(i, "bad timestamp delta")
		}
		r = r[n:]
		off, n := readVarint32(r)
		if n <= 0 {
			return recordErr(i, "bad offset delta")
		}
		if off != i {
			return recordErr(i, fmt.Sprintf("offset delta %d, want %d", off, i))
		}
		body := r[n:]
		first := len(d.hdrs)
		key, value, all, what := readBody(body, d.hdrs, store, d.copyKeys)
		if what != "" {
			return recordErr(i, what)
		}
		if store {
			var hdrs []Header
			if len(all) > first {
				hdrs = all[first:len(all):len(all)]
			}
			d.hdrs = all
			d.recs = append(d.recs, Record{
				Attributes:     attrs,
				TimestampDelta: tsDelta,
				Timestamp:      h.BaseTimestamp + tsDelta,
				OffsetDelta:    off,
				Key:            key,
				Value:          value,
				Headers:        hdrs,
				Body:           body,
			})
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes left over after %d records", ErrCorrupt, len(p), h.NumRecords)
	}
	return nil
}

// ParseBody reads back the key, value and headers of one record body, as
// AppendBody encodes it and Record.Body holds it. Key, value and header
// values alias body; header keys are copied. A null key or value is nil;
// headers is nil when there are none. A malformed body (or bytes left over
// after it) is an error wrapping ErrCorrupt.
func ParseBody(body []byte) (key, value []byte, headers []Header, err error) {
	key, value, headers, what := readBody(body, nil, true, true)
	if what != "" {
		return nil, nil, nil, fmt.Errorf("%w: record body: %s", ErrCorrupt, what)
	}
	return key, value, headers, nil
}

// readBody parses a record body (Decode's records and ParseBody): key,
// value, header count and headers, which must be all of body. When store,
// it appends the headers to hdrs (keys copied if copyKeys, else aliasing
// body) and returns the extended slice. what names the first malformed
// field, "" if none.
func readBody(body []byte, hdrs []Header, store, copyKeys bool) (key, value []byte, _ []Header, what string) {
	r := body
	key, r, ok := readBytes(r)
	if !ok {
		return nil, nil, hdrs, "bad key"
	}
	value, r, ok = readBytes(r)
	if !ok {
		return nil, nil, hdrs, "bad value"
	}
	nh, n := readVarint32(r)
	if n <= 0 || nh < 0 || int(nh) > (len(r)-n)/2 { // a header takes at least 2 bytes
		return nil, nil, hdrs, "bad header count"
	}
	r = r[n:]
	for j := int32(0); j < nh; j++ {
		var hk, hv []byte
		hk, r, ok = readBytes(r)
		if !ok || hk == nil {
			return nil, nil, hdrs, "bad header key"
		}
		hv, r, ok = readBytes(r)
		if !ok {
			return nil, nil, hdrs, "bad header value"
		}
		if store {
			hdrs = append(hdrs, Header{Key: keyString(hk, copyKeys), Value: hv})
		}
	}
	if len(r) != 0 {
		return nil, nil, hdrs, fmt.Sprintf("%d bytes left over in the record", len(r))
	}
	return key, value, hdrs, ""
}

// keyString returns a header key, copied or aliasing b.
func keyString(b []byte, copyKeys bool) string {
	if copyKeys || len(b) == 0 {
		return string(b)
	}
	return unsafe.String(&b[0], len(b))
}

func recordErr(i int32, what string) error {
	return fmt.Errorf("%w: record %d: %s", ErrCorrupt, i, what)
}

// readBytes reads a nullable byte string (varint length, -1 for null).
func readBytes(p []byte) (b, rest []byte, ok bool) {
	l, n := readVarint32(p)
	if n <= 0 || l < -1 || int(l) > len(p)-n {
		return nil, p, false
	}
	if l == -1 {
		return nil, p[n:], true
	}
	return p[n : n+int(l) : n+int(l)], p[n+int(l):], true
}

// readVarint32 reads a zigzag varint of at most 5 bytes, as Kafka's
// ByteUtils.readVarint does. n is the number of bytes read, or 0 if the input
// is truncated or the varint too long.
func readVarint32(p []byte) (v int32, n int) {
	var u uint32
	for i := 0; i < 5 && i < len(p); i++ {
		c := p[i]
		if i == 4 && c > 0x0f {
			return 0, 0 // more than 32 bits
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, 0
}

// readVarint64 reads a zigzag varint of at most 10 bytes (Kafka's varlong).
func readVarint64(p []byte) (v int64, n int) {
	var u uint64
	for i := 0; i < 10 && i < len(p); i++ {
		c := p[i]
		if i == 9 && c > 1 {
			return 0, 0 // more than 64 bits
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, 0
}
