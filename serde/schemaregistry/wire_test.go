package schemaregistry_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sr "github.com/samsa-go/samsa/serde/schemaregistry"
)

func TestHeader(t *testing.T) {
	cases := []struct {
		id   int
		want []byte
	}{
		{1, []byte{0, 0, 0, 0, 1}},
		{0x01020304, []byte{0, 1, 2, 3, 4}},
		{1<<31 - 1, []byte{0, 0x7f, 0xff, 0xff, 0xff}},
		{-1, []byte{0, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tc := range cases {
		got := sr.AppendHeader([]byte("x"), tc.id)
		assert.Equal(t, append([]byte("x"), tc.want...), got)
		id, rest, err := sr.ParseHeader(append(got[1:], "payload"...))
		require.NoError(t, err)
		assert.Equal(t, tc.id, id)
		assert.Equal(t, "payload", string(rest))
	}
}

func TestParseHeaderRejects(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "0 bytes"},
		{"short", []byte{0, 0, 0, 1}, "4 bytes"},
		{"magic 1", []byte{1, 0, 0, 0, 1}, "magic byte 1"},
		{"plain JSON", []byte(`{"a":1}`), "magic byte 123"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := sr.ParseHeader(tc.in)
			require.ErrorIs(t, err, sr.ErrInvalidWireFormat)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMessageIndexes(t *testing.T) {
	cases := []struct {
		indexes []int
		want    []byte
	}{
		// The first message: the single byte 0, as Confluent writes it.
		{[]int{0}, []byte{0}},
		// Otherwise a zig-zag count, then zig-zag indexes.
		{[]int{1}, []byte{2, 2}},
		{[]int{0, 0}, []byte{4, 0, 0}},
		{[]int{2, 1, 64}, []byte{6, 4, 2, 0x80, 0x01}},
	}
	for _, tc := range cases {
		got := sr.AppendMessageIndexes(nil, tc.indexes)
		assert.Equal(t, tc.want, got, "%v", tc.indexes)
		back, rest, err := sr.ParseMessageIndexes(append(got, 0xAA))
		require.NoError(t, err)
		assert.Equal(t, tc.indexes, back)
		assert.Equal(t, []byte{0xAA}, rest)
	}
}

func TestParseMessageIndexesRejects(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"negative count", binary.AppendVarint(nil, -1)},
		{"huge count", binary.AppendVarint(nil, 1<<40)},
		{"truncated", []byte{4, 2}},
		{"negative index", append(binary.AppendVarint(nil, 1), binary.AppendVarint(nil, -3)...)},
		{"overlong varint", bytes.Repeat([]byte{0xff}, 11)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := sr.ParseMessageIndexes(tc.in)
			require.ErrorIs(t, err, sr.ErrInvalidWireFormat)
		})
	}
}

// FuzzParseHeader: any input parses or fails with ErrInvalidWireFormat,
// and what parses re-encodes to the same bytes.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 'x'})
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rest, err := sr.ParseHeader(b)
		if err != nil {
			if !assert.ErrorIs(t, err, sr.ErrInvalidWireFormat) {
				t.Fatal(err)
			}
			return
		}
		if got := append(sr.AppendHeader(nil, id), rest...); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, read %x", got, b)
		}
	})
}

// FuzzParseMessageIndexes: any input parses or fails with
// ErrInvalidWireFormat without allocating more than its own size allows,
// and what parses re-encodes to an array that parses the same.
func FuzzParseMessageIndexes(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{6, 4, 2, 0x80, 0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, rest, err := sr.ParseMessageIndexes(b)
		if err != nil {
			if !assert.ErrorIs(t, err, sr.ErrInvalidWireFormat) {
				t.Fatal(err)
			}
			return
		}
		if len(idx) == 0 || len(idx) > len(b) {
			t.Fatalf("%d indexes from %d bytes", len(idx), len(b))
		}
		for _, i := range idx {
			if i < 0 {
				t.Fatalf("negative index in %v", idx)
			}
		}
		again, rest2, err := sr.ParseMessageIndexes(append(sr.AppendMessageIndexes(nil, idx), rest...))
		if err != nil || !assert.Equal(t, idx, again) || !bytes.Equal(rest, rest2) {
			t.Fatalf("round trip of %v: %v %v", idx, again, err)
		}
	})
}
