package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/samsa-go/samsa/samsatest"
)

// readBackResult is what reading a topic back from the embedded cluster
// found. Each count is of records; first holds the first problem of each
// kind, for the summary.
type readBackResult struct {
	records    int64 // records read
	duplicates int64 // a sequence number seen twice
	missing    int64 // sequence numbers never seen
	corrupt    int64 // wrong value size, unknown sequence number, wrong key
	misplaced  int64 // a key in more than one partition
	disorder   int64 // a key's records out of Send order within its partition
	first      []string
}

func (r *readBackResult) note(count *int64, format string, args ...any) {
	if *count == 0 {
		r.first = append(r.first, fmt.Sprintf(format, args...))
	}
	*count++
}

// orderOK reports whether every key's records are in one partition, in
// Send order.
func (r *readBackResult) orderOK() bool { return r.misplaced == 0 && r.disorder == 0 }

// problem returns "" when every record was read back once, intact and in
// order, or else a sentence naming what went wrong.
func (r *readBackResult) problem() string {
	var found []string
	for _, c := range []struct {
		n    int64
		what string
	}{
		{r.duplicates, "duplicated"},
		{r.missing, "missing"},
		{r.corrupt, "corrupt"},
		{r.misplaced, "in the wrong partition"},
		{r.disorder, "out of order"},
	} {
		if c.n > 0 {
			found = append(found, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(found) == 0 {
		return ""
	}
	return fmt.Sprintf("%d read: %s (first: %s)", r.records, strings.Join(found, ", "), strings.Join(r.first, "; "))
}

// readBack reads every partition of topic from the embedded cluster and
// checks that records 0 to n-1 (as numbered by sendAll) are each there
// exactly once, with their value size and key, and, with keys, that each
// key's records are in one partition in increasing sequence order. It
// reads what a read_committed consumer would (no transaction markers, no
// records of aborted or open transactions), one partition at a time, so
// memory stays near one partition's decoded records, and stops early when
// ctx ends.
func readBack(ctx context.Context, c *samsatest.Cluster, topic string, partitions int, n int64, keys [][]byte, valueSize int) readBackResult {
	var r readBackResult
	seen := make([]uint64, (n+63)/64)
	keyPart := make([]int32, len(keys))
	keyLast := make([]int64, len(keys))
	for i := range keyPart {
		keyPart[i], keyLast[i] = -1, -1
	}
	for part := range int32(partitions) {
		if ctx.Err() != nil {
			return r
		}
		recs, err := c.PartitionCommittedRecords(topic, part)
		if err != nil {
			r.note(&r.missing, "partition %d: %v", part, err)
			continue
		}
		for _, rec := range recs {
			r.records++
			if len(rec.Value) != valueSize {
				r.note(&r.corrupt, "partition %d offset %d: value of %d bytes, want %d", part, rec.Offset, len(rec.Value), valueSize)
				continue
			}
			seq := int64(binary.BigEndian.Uint64(rec.Value))
			if seq < 0 || seq >= n {
				r.note(&r.corrupt, "partition %d offset %d: sequence number %d out of range", part, rec.Offset, seq)
				continue
			}
			if seen[seq/64]&(1<<(seq%64)) != 0 {
				r.note(&r.duplicates, "partition %d offset %d: record %d again", part, rec.Offset, seq)
				continue
			}
			seen[seq/64] |= 1 << (seq % 64)
			if len(keys) == 0 {
				if rec.Key != nil {
					r.note(&r.corrupt, "partition %d offset %d: record %d has a key, want none", part, rec.Offset, seq)
				}
				continue
			}
			k := seq % int64(len(keys))
			if !bytes.Equal(rec.Key, keys[k]) {
				r.note(&r.corrupt, "partition %d offset %d: record %d has key %q, want %q", part, rec.Offset, seq, rec.Key, keys[k])
				continue
			}
			switch {
			case keyPart[k] >= 0 && keyPart[k] != part:
				r.note(&r.misplaced, "key %q in partitions %d and %d", keys[k], keyPart[k], part)
			case seq < keyLast[k]:
				r.note(&r.disorder, "partition %d offset %d: key %q has record %d after record %d", part, rec.Offset, keys[k], seq, keyLast[k])
			}
			keyPart[k], keyLast[k] = part, seq
		}
	}
	for seq := range n {
		if seen[seq/64]&(1<<(seq%64)) == 0 {
			r.note(&r.missing, "record %d", seq)
		}
	}
	return r
}
