// Package recordbatch encodes and decodes Kafka record batches, format v2
// (magic 2), the only format a modern producer sends.
//
// # Layout
//
// A batch is a 61-byte header followed by records (big-endian integers):
//
//	offset size field
//	     0    8 BaseOffset            0 from a producer; the broker assigns offsets
//	     8    4 Length                bytes after this field
//	    12    4 PartitionLeaderEpoch  -1 from a producer
//	    16    1 Magic                 2
//	    17    4 CRC                   CRC-32C (Castagnoli) of bytes 21..end
//	    21    2 Attributes            bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	    23    4 LastOffsetDelta       NumRecords-1
//	    27    8 BaseTimestamp         first record's timestamp (ms)
//	    35    8 MaxTimestamp          largest record timestamp (ms)
//	    43    8 ProducerID            -1 unless idempotent
//	    51    2 ProducerEpoch         -1 unless idempotent
//	    53    4 BaseSequence          -1 unless idempotent
//	    57    4 NumRecords
//	    61      records, compressed as a whole if the codec bits say so
//
// Each record uses Kafka's zigzag varints (like protobuf sint32/sint64):
//
//	Length varint | Attributes int8 | TimestampDelta varlong | OffsetDelta varint |
//	KeyLen varint | Key | ValueLen varint | Value | HeaderCount varint |
//	HeaderCount × (HeaderKeyLen varint | HeaderKey | HeaderValueLen varint | HeaderValue)
//
// A null key, value or header value has length -1. What follows OffsetDelta
// is the record's body: it does not depend on where the record sits in its
// batch, so a producer can encode a record once (AppendBody), park it, and
// later copy it into a batch (Builder.AppendBody).
//
// # Building a batch
//
// A Builder writes into a buffer the caller owns (from the producer's
// memory pool) and never grows it:
//
//  1. Reset(buf) reserves the header; cap(buf) is the batch's size limit.
//  2. Append or AppendBody add records, each encoded once. RecordSize says
//     beforehand exactly how many bytes the next record takes, so the
//     accumulator can tell when a batch reaches batch.size, and
//     SingleRecordBatchSize lets it reject a record that alone exceeds
//     max.request.size. A record that does not fit is refused whole.
//  3. Finish compresses the records (into a reusable scratch buffer) and
//     writes the header. If compression does not make the records smaller,
//     the batch stays uncompressed (codec bits 0): a batch never outgrows its
//     buffer.
//  4. Stamp writes the producer id, epoch and base sequence and then the
//     CRC. Until then the CRC is 0. The producer stamps when it first drains
//     the batch and again after a KIP-360 epoch bump.
//
// # Decoding
//
// Decode (and the allocation-free Decoder) parse a batch, check the framing,
// magic, CRC, record count and offset deltas, decompress with a size cap and
// return the records. Decoder.Validate makes the same checks without
// building records; the test broker uses it. ParseHeader reads only the
// header. Errors wrap ErrCorrupt (ErrCRCMismatch and ErrBadMagic included)
// or the compression package's sentinels.
package recordbatch
