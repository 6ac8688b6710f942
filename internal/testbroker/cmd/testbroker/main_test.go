package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestStatsLine pins the SIGUSR1 line: bench/internal/harness parses it.
func TestStatsLine(t *testing.T) {
	st := testbroker.Stats{
		Requests: map[int16]int64{0: 7, 3: 2, 18: 1},
		Batches:  5, Records: 1234, Bytes: 56789,
	}
	assert.Equal(t, "testbroker stats: requests=10 produce=7 batches=5 records=1234 bytes=56789\n", statsLine(st))
	assert.Equal(t, "testbroker stats: requests=0 produce=0 batches=0 records=0 bytes=0\n",
		statsLine(testbroker.Stats{Requests: map[int16]int64{}}))
}
