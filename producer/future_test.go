package producer

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Result reports the outcome without waiting, the error last: nothing
// while pending, then what Wait returns.
func TestFutureResult(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		md   RecordMetadata
		err  error
	}{
		{"acknowledged", RecordMetadata{Topic: "t", Partition: 1, Offset: 42}, nil},
		{"failed", RecordMetadata{Topic: "t", Partition: -1, Offset: -1}, boom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := new(Future)
			md, ok, err := f.Result()
			assert.False(t, ok, "pending")
			assert.NoError(t, err)
			assert.Equal(t, RecordMetadata{}, md)

			f.complete(tc.md, tc.err)
			md, ok, err = f.Result()
			assert.True(t, ok)
			assert.Equal(t, tc.md, md)
			assert.Equal(t, tc.err, err)
			wmd, werr := f.Wait(context.Background())
			assert.Equal(t, md, wmd)
			assert.Equal(t, err, werr)
		})
	}
}
