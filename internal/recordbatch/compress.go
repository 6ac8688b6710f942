package recordbatch

import (
	"errors"
	"fmt"

	"github.com/samsa-go/samsa/compression"
)

// Compression returns the batch's compression codec (attribute bits 0-2).
func (h BatchHeader) Compression() compression.Type {
	return compression.Type(h.Attributes & attrCodecMask)
}

// Finish ends the batch: it compresses the records with c (nil means no
// compression) and writes every header field except the CRC. Producer id,
// epoch and base sequence are written as -1; the CRC stays 0 until Stamp,
// which must be called before the batch is sent.
//
// Compression goes into scratch, which Finish may grow; it returns the
// possibly grown scratch (length 0) for the caller to reuse. If the
// compressed records are not smaller than the plain ones, the batch is left
// uncompressed with codec bits 0: a batch therefore never outgrows the
// buffer given to Reset, and brokers accept a mix of compressed and
// uncompressed batches.
//
// batch is the whole batch, living in the builder's buffer. Finish fails
// with ErrEmptyBatch if no record was appended, with ErrNotOpen if the
// builder is not open, and with the compressor's error if compression
// fails; in those cases the builder is unchanged and Finish may be called
// again (for example with a nil compressor).
func (b *Builder) Finish(c *compression.Compressor, scratch []byte) (batch, newScratch []byte, err error) {
	if b.state != stateOpen {
		return nil, scratch, ErrNotOpen
	}
	if b.n == 0 {
		return nil, scratch, ErrEmptyBatch
	}
	var attrs uint16
	if c != nil && c.Type() != compression.None {
		recs := b.buf[HeaderSize:]
		out, err := c.AppendCompress(scratch[:0], recs)
		if err != nil {
			return nil, scratch, fmt.Errorf("recordbatch: compressing records with %s: %w", c.Type(), err)
		}
		scratch = out[:0]
		if len(out) < len(recs) {
			b.buf = b.buf[:HeaderSize+copy(recs, out)]
			attrs = uint16(c.Type())
		}
	}
	b.writeHeader(attrs)
	b.state = stateFinished
	return b.buf, scratch, nil
}

func tooLarge(n, max int) error {
	return fmt.Errorf("recordbatch: %w: %d bytes of records, more than %d", compression.ErrTooLarge, n, max)
}

// decompress decompresses the records region. Corrupt data wraps both
// ErrCorrupt and compression.ErrCorrupt; other errors (too large,
// unsupported codec) only the compression sentinel.
func decompress(codec int16, dst, src []byte, max int) ([]byte, error) {
	t := compression.Type(codec)
	out, err := compression.AppendDecompress(t, dst, src, max)
	if err != nil {
		if errors.Is(err, compression.ErrCorrupt) {
			return out, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return out, fmt.Errorf("recordbatch: %w", err)
	}
	return out, nil
}
