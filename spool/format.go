package spool

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"time"
)

// The entry layout (big-endian, as Kafka's):
//
//	length  uint32  bytes of body
//	crc     uint32  CRC32C (Castagnoli) of the 4 length bytes and the body
//	body:
//	  version    uint8   1
//	  seq        uint64  the spool sequence
//	  partition  int32   -1: not assigned yet
//	  timestamp  int64   Unix milliseconds; math.MinInt64 for the zero time
//	  topic      uvarint length, bytes
//	  key        varint length (-1: nil), bytes
//	  value      varint length (-1: nil), bytes
//	  headers    uvarint count, each: uvarint key length, key, varint value length (-1: nil), value
//
// Why not Kafka's record batch v2 (internal/recordbatch): a batch carries
// neither the topic nor the assigned partition, so an entry would need a
// header of its own around it anyway; a batch's 61-byte header per record
// costs more than this layout's 25 bytes; and the spool must be able to
// resynchronise on any entry, which a CRC over the length and the whole
// body gives directly. The producer builds batches from entries when it
// replays them, as it does from Send's records.
const (
	entryHeaderLen = 8
	entryVersion   = 1
	// minBodyLen is the body of an entry with an empty topic, nil key and
	// value and no header.
	minBodyLen = 1 + 8 + 4 + 8 + 1 + 1 + 1 + 1
	// maxEntryLen bounds an entry (header and body): Append refuses a
	// larger record with ErrTooLarge, and the reader never believes a
	// length above it.
	maxEntryLen = 64 << 20
	// noTimestamp stands for the zero time.Time.
	noTimestamp = math.MinInt64
	// seqLimit is the largest sequence Open believes (in a segment's
	// name, an entry or the position file): what is above it is damage,
	// so that next plus a reservation never wraps.
	seqLimit = math.MaxUint64 - 1<<21
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadEntry marks bytes that are not a valid entry.
var errBadEntry = errors.New("spool: bad entry")

// entryLen is the encoded size of rec, header included.
func entryLen(rec *Record) int {
	n := entryHeaderLen + 1 + 8 + 4 + 8
	n += uvarintLen(uint64(len(rec.Topic))) + len(rec.Topic)
	n += bytesLen(rec.Key) + bytesLen(rec.Value)
	n += uvarintLen(uint64(len(rec.Headers)))
	for _, h := range rec.Headers {
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func uvarintLen(v uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], v)
}

func varintLen(v int64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutVarint(tmp[:], v)
}

// appendEntry appends rec's entry with sequence seq to dst.
func appendEntry(dst []byte, seq uint64, rec *Record) []byte {
	start := len(dst)
	dst = appendUnsealedEntry(dst, seq, rec)
	sealEntry(dst[start:])
	return dst
}

// appendUnsealedEntry is appendEntry without the CRC, which sealEntry
// sets: Write leaves it to the writer goroutine, off Send's.
func appendUnsealedEntry(dst []byte, seq uint64, rec *Record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, entryVersion)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, uint32(rec.Partition))
	ms := int64(noTimestamp)
	if !rec.Timestamp.IsZero() {
		ms = rec.Timestamp.UnixMilli()
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(ms))
	dst = binary.AppendUvarint(dst, uint64(len(rec.Topic)))
	dst = append(dst, rec.Topic...)
	dst = appendBytes(dst, rec.Key)
	dst = appendBytes(dst, rec.Value)
	dst = binary.AppendUvarint(dst, uint64(len(rec.Headers)))
	for _, h := range rec.Headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-entryHeaderLen))
	return dst
}

// sealEntry sets the CRC of the entry e (its length already set).
func sealEntry(e []byte) {
	crc := crc32.Update(0, castagnoli, e[:4])
	crc = crc32.Update(crc, castagnoli, e[entryHeaderLen:])
	binary.BigEndian.PutUint32(e[4:], crc)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// decodeBody parses an entry's body (its CRC already checked). With
// copyOut, the entry's byte slices are fresh; otherwise only Seq,
// Partition and Timestamp are set and the rest is only validated.
func decodeBody(body []byte, copyOut bool) (Entry, error) {
	var e Entry
	if len(body) < minBodyLen || body[0] != entryVersion {
		return e, errBadEntry
	}
	e.Seq = binary.BigEndian.Uint64(body[1:])
	e.Partition = int32(binary.BigEndian.Uint32(body[9:]))
	ms := int64(binary.BigEndian.Uint64(body[13:]))
	if ms != noTimestamp {
		e.Timestamp = time.UnixMilli(ms)
	}
	d := decoder{b: body[21:]}
	topic := d.uvarBytes()
	key := d.varBytes()
	value := d.varBytes()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return e, errBadEntry
	}
	var headers []Header
	if copyOut && n > 0 {
		headers = make([]Header, 0, n)
	}
	for range n {
		hk := d.uvarBytes()
		hv := d.varBytes()
		if d.err {
			return e, errBadEntry
		}
		if copyOut {
			headers = append(headers, Header{Key: string(hk), Value: clone(hv)})
		}
	}
	if d.err || len(d.b) != 0 {
		return e, errBadEntry
	}
	if copyOut {
		e.Topic = string(topic)
		e.Key = clone(key)
		e.Value = clone(value)
		e.Headers = headers
	}
	return e, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) take(n uint64) []byte {
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uvarBytes() []byte { return d.take(d.uvarint()) }

func (d *decoder) varBytes() []byte {
	if d.err {
		return nil
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || v < -1 {
		d.err = true
		return nil
	}
	d.b = d.b[n:]
	if v == -1 {
		return nil
	}
	b := d.take(uint64(v))
	if b == nil && !d.err {
		b = []byte{}
	}
	return b
}

// segmentReader reads the entries of one segment in order, skipping
// damage. It reads through a window of the file, never the whole file: its
// memory is its buffer (1 MiB, or one entry if larger).
type segmentReader struct {
	r    io.ReaderAt
	size int64
	// off is the offset of the next entry to read.
	off int64
	// minSeq is the sequence the next entry has: the segment's first,
	// then one above the last entry returned. A segment's sequences are
	// contiguous (Open starts a new segment), so an entry after damage
	// may be above it only by as many entries as the damaged bytes could
	// hold (each takes at least entryHeaderLen+minBodyLen bytes); validEnd
	// is where the last valid entry ended.
	minSeq   uint64
	validEnd int64

	buf    []byte
	bufOff int64

	// damaged counts the damaged regions skipped (resynchronised past);
	// skipped their bytes. tailOff is where a bad tail starts (no valid
	// entry after it), or -1.
	damaged int
	skipped int64
	tailOff int64
	// gapRecords counts the sequences missing across damaged regions.
	gapRecords uint64

	// While resynchronising, a candidate that passes the cheap checks
	// costs a CRC over the length it claims: crafted data with a
	// candidate every few bytes, each claiming the rest of the file,
	// would make the scan quadratic. So a candidate may claim more than
	// maxSeen (the largest entry the spool has seen, and at least
	// resyncFree) only while the reader's resyncBudget of CRC bytes
	// lasts: ordinary damage finds a large entry after it, and crafted
	// data costs at most the budget plus resyncFree (or maxSeen) a
	// candidate.
	maxSeen      int64
	resyncBudget int64
}

const (
	// resyncFree is the length a resync candidate may always claim.
	resyncFree = 4 << 10
	// resyncBudgetBase, plus resyncBudgetPerByte times the segment's
	// size, is a reader's budget of CRC bytes for longer candidates.
	resyncBudgetBase    = 64 << 20
	resyncBudgetPerByte = 4
)

func newSegmentReader(r io.ReaderAt, size int64, minSeq uint64) *segmentReader {
	return &segmentReader{r: r, size: size, tailOff: -1, minSeq: minSeq,
		maxSeen: resyncFree, resyncBudget: resyncBudgetBase + resyncBudgetPerByte*size}
}

// fetch returns the n bytes at off, or nil if the file is shorter or the
// read fails.
func (sr *segmentReader) fetch(off int64, n int) ([]byte, error) {
	if n < 0 || off < 0 || off+int64(n) > sr.size {
		return nil, nil
	}
	if off >= sr.bufOff && off+int64(n) <= sr.bufOff+int64(len(sr.buf)) {
		s := off - sr.bufOff
		return sr.buf[s : s+int64(n)], nil
	}
	want := max(n, 1<<20)
	if rest := sr.size - off; int64(want) > rest {
		want = int(rest)
	}
	if cap(sr.buf) < want {
		sr.buf = make([]byte, want)
	}
	sr.buf = sr.buf[:want]
	got, err := sr.r.ReadAt(sr.buf, off)
	if got < want {
		if err != nil && err != io.EOF {
			sr.buf = sr.buf[:0]
			return nil, err
		}
		// The file is shorter than when it was measured (a partial
		// write taken back while Entries reads the active segment):
		// its end is here.
		sr.size = off + int64(got)
		sr.buf, sr.bufOff = sr.buf[:got], off
		if off+int64(n) > sr.size {
			return nil, nil
		}
	}
	sr.bufOff = off
	return sr.buf[:n], nil
}

// at checks for a valid entry at off and returns its body and total length;
// resync says it is a candidate past damage (see maxSeen).
func (sr *segmentReader) at(off int64, resync bool) (body []byte, n int64, err error) {
	// The cheap checks first (length, version, sequence order), so that
	// resynchronising over garbage rarely computes a CRC.
	h, err := sr.fetch(off, entryHeaderLen+minBodyLen)
	if h == nil {
		return nil, 0, err
	}
	l := binary.BigEndian.Uint32(h)
	if l < minBodyLen || l > maxEntryLen-entryHeaderLen || off+entryHeaderLen+int64(l) > sr.size {
		return nil, 0, nil
	}
	if h[entryHeaderLen] != entryVersion {
		return nil, 0, nil
	}
	if seq := binary.BigEndian.Uint64(h[entryHeaderLen+1:]); seq < sr.minSeq || seq-sr.minSeq > uint64(off-sr.validEnd)/(entryHeaderLen+minBodyLen) || seq > seqLimit {
		return nil, 0, nil
	}
	if total := entryHeaderLen + int64(l); resync && total > sr.maxSeen {
		if total > sr.resyncBudget {
			return nil, 0, nil
		}
		sr.resyncBudget -= total
	}
	crc := binary.BigEndian.Uint32(h[4:])
	var lenBytes [4]byte
	copy(lenBytes[:], h[:4])
	all, err := sr.fetch(off, entryHeaderLen+int(l))
	if all == nil {
		return nil, 0, err
	}
	body = all[entryHeaderLen:]
	c := crc32.Update(0, castagnoli, lenBytes[:])
	if crc32.Update(c, castagnoli, body) != crc {
		return nil, 0, nil
	}
	if _, derr := decodeBody(body, false); derr != nil {
		return nil, 0, nil
	}
	return body, entryHeaderLen + int64(l), nil
}

// next returns the next valid entry's body (valid until the next call)
// and its offset, or ok false at the end. An error is an I/O error
// reading the file; damage is never an error.
func (sr *segmentReader) next() (body []byte, off int64, ok bool, err error) {
	if sr.off >= sr.size {
		return nil, 0, false, nil
	}
	body, n, err := sr.at(sr.off, false)
	if err != nil {
		return nil, 0, false, err
	}
	if body == nil {
		// Damage: look for the next valid entry, one byte at a time.
		bad := sr.off
		found := int64(-1)
		for o := bad + 1; o+entryHeaderLen+minBodyLen <= sr.size; o++ {
			body, n, err = sr.at(o, true)
			if err != nil {
				return nil, 0, false, err
			}
			if body != nil {
				found = o
				break
			}
		}
		if found < 0 {
			sr.tailOff = bad
			sr.off = sr.size
			return nil, 0, false, nil
		}
		sr.damaged++
		sr.skipped += found - bad
		sr.gapRecords += binary.BigEndian.Uint64(body[1:]) - sr.minSeq
		sr.off = found
	}
	off = sr.off
	sr.off += n
	sr.validEnd = sr.off
	sr.maxSeen = max(sr.maxSeen, n)
	sr.minSeq = binary.BigEndian.Uint64(body[1:]) + 1
	return body, off, true, nil
}
