// Package accumulator holds what the producer has accepted but not yet sent:
// per-partition queues of record batches and, for topics whose partitions
// are not known yet, per-topic parking queues (KIP-286).
//
// # Data flow
//
// Send appends a record to its partition's open batch (Partition.Append).
// The batch's memory comes from the producer's bufferpool; when the pool is
// full, Append waits up to max.block.ms, which is the only place Send can
// block. A full batch is sealed and announced to the IO goroutine with an
// Event; a batch that has lingered is sealed by the IO goroutine
// (Partition.Seal).
//
// When a topic's partitions are unknown, Send parks the record instead
// (Topic.Park): the record is encoded once, uncompressed, into parking
// chunks taken from the same pool, and Send returns at once. When metadata
// arrives the IO goroutine moves the parked records, in Send order, into
// partition batches (Topic.MoveParked). While records are parked, later
// Sends to the topic park too, so that no record overtakes an earlier one.
//
// # Types
//
// Accumulator, Topic, Partition, Batch and Event share three type
// parameters: C, the per-record completion a batch keeps for each record,
// and P and B, the IO goroutine's own state per partition (Partition.IO) and
// per batch (Batch.IO: for instance its finished bytes, attempts and
// sequence). The accumulator stores P and B without reading them, so the IO
// goroutine reaches its state from a batch or partition without a map or a
// type assertion. Free zeroes a batch's B before the struct is reused.
//
// A batch's life: open (Partition.Append adds records), sealed (full, or
// Partition.Seal), taken by the IO goroutine (Partition.PeekSealed,
// Partition.NextSealed, or Partition.TakeAll at shutdown), finished and sent
// by it (Batch.Builder), and returned with Accumulator.Free once its records
// are completed. Accumulator.NewDetachedBatch makes a batch outside the
// queues (the halves of a batch split for the broker).
//
// # Concurrency
//
// Send-side methods lock only the topic or the partition they touch; there
// is no accumulator-wide lock on the per-record path. The event list has a
// lock of its own, taken once per batch. The lock order is
// Topic.mu → Partition.mu → Accumulator.mu (events).
//
// # Memory
//
// Every byte of record data lives in pool memory: batch buffers of
// batch.size (or bigger, for one big record) and parking chunks. Batches are
// reused through a free list, so a steady stream of records allocates
// nothing per record in this package.
package accumulator
