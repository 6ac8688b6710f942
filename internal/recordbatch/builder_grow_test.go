package recordbatch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGrowKeepsRecords: a batch moved to a larger buffer keeps its records
// and takes more.
func TestGrowKeepsRecords(t *testing.T) {
	var b Builder
	b.Reset(make([]byte, 0, 200))
	n := 0
	for b.Append(int64(n), nil, []byte("0123456789"), nil) {
		n++
	}
	old := b.Grow(make([]byte, 0, 400))
	require.Equal(t, 200, cap(old))
	for range 5 {
		require.True(t, b.Append(int64(n), nil, []byte("0123456789"), nil))
		n++
	}
	raw, _, err := b.Finish(nil, nil)
	require.NoError(t, err)
	Stamp(raw, -1, -1, -1)
	dec, err := Decode(raw, 1<<20)
	require.NoError(t, err)
	require.Len(t, dec.Records, n)
	for i, r := range dec.Records {
		require.Equal(t, int64(i), r.Timestamp)
	}
	require.Panics(t, func() { b.Grow(make([]byte, 0, 10)) }, "a finished builder cannot grow")
}
