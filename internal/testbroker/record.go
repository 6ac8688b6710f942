package testbroker

// Record is one record of a partition as the broker stored it, returned by
// [Cluster.Records] for tests to check what a producer wrote.
type Record struct {
	// Offset is the record's absolute offset in its partition.
	Offset int64
	// Timestamp is the record's timestamp in milliseconds since the Unix
	// epoch: the producer's CreateTime, or the broker's append time when the
	// batch says LogAppendTime.
	Timestamp int64
	// Key and Value are nil for a null key or value, and non-nil (possibly
	// empty) otherwise.
	Key, Value []byte
	// Headers are the record's headers in wire order.
	Headers []Header
	// ProducerID, ProducerEpoch and Sequence come from the record's batch;
	// Sequence is the batch's base sequence plus the record's offset delta.
	// They are -1 for a non-idempotent producer.
	ProducerID    int64
	ProducerEpoch int16
	Sequence      int32
	// Compression is the codec of the batch the record arrived in
	// (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
	Compression int8
	// BatchBaseOffset is the offset of the first record of the record's
	// batch, so a test can tell which records were produced together.
	BatchBaseOffset int64
	// Transactional is set for records of a transactional batch (attribute
	// bit 4), and Control for the commit and abort markers the
	// transaction coordinator writes (bit 5; the key is version 0 and the
	// type, 0 abort or 1 commit, the value version 0 and the coordinator
	// epoch). Records returns markers too: a test that counts data
	// records skips those with Control set.
	Transactional, Control bool
}

// Header is one record header. A null header value is nil.
type Header struct {
	Key   string
	Value []byte
}
