package producer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStringSerializer(t *testing.T) {
	cases := []string{"", "hello", "héllo wörld", "\x00\xff"}
	for _, v := range cases {
		t.Run(strconv.Quote(v), func(t *testing.T) {
			var s StringSerializer
			b, err := s.Serialize("t", v)
			require.NoError(t, err)
			assert.NotNil(t, b, "an empty string is an empty value, not null")
			assert.Equal(t, v, string(b))

			b, err = s.AppendSerialize([]byte("prefix"), "t", v)
			require.NoError(t, err)
			assert.Equal(t, "prefix"+v, string(b))
		})
	}
}

func TestBytesSerializer(t *testing.T) {
	cases := []struct {
		name string
		v    []byte
	}{
		{"nil stays null", nil},
		{"empty", []byte{}},
		{"data", []byte("data")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := BytesSerializer{}.Serialize("t", tc.v)
			require.NoError(t, err)
			assert.Equal(t, tc.v == nil, b == nil)
			assert.Equal(t, tc.v, b)
		})
	}
}

func TestJSONSerializer(t *testing.T) {
	type order struct {
		ID    int      `json:"id"`
		Items []string `json:"items"`
	}
	b, err := JSONSerializer[order]{}.Serialize("orders", order{ID: 7, Items: []string{"a"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":7,"items":["a"]}`, string(b))

	b, err = JSONSerializer[*order]{}.Serialize("orders", nil)
	require.NoError(t, err)
	assert.Equal(t, "null", string(b))

	_, err = JSONSerializer[float64]{}.Serialize("t", math.NaN())
	assert.Error(t, err, "encoding/json rejects NaN")
}

func TestSerializerFunc(t *testing.T) {
	var s Serializer[int] = SerializerFunc[int](func(topic string, v int) ([]byte, error) {
		if v < 0 {
			return nil, errors.New("negative")
		}
		return fmt.Appendf(nil, "%s:%d", topic, v), nil
	})
	b, err := s.Serialize("t", 42)
	require.NoError(t, err)
	assert.Equal(t, "t:42", string(b))
	_, err = s.Serialize("t", -1)
	assert.EqualError(t, err, "negative")
}

// The built-in serializers satisfy the interfaces TypedProducer looks for.
func TestSerializerInterfaces(t *testing.T) {
	var _ Serializer[string] = StringSerializer{}
	var _ AppendSerializer[string] = StringSerializer{}
	var _ Serializer[[]byte] = BytesSerializer{}
	var _ Serializer[map[string]int] = JSONSerializer[map[string]int]{}
	_, isAppend := any(BytesSerializer{}).(AppendSerializer[[]byte])
	assert.False(t, isAppend, "bytes pass through without a copy")
}

func TestStringAppendSerializeDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = StringSerializer{}.AppendSerialize(buf[:0], "t", "some value")
	})
	assert.Zero(t, allocs)
}

func BenchmarkSerializer(b *testing.B) {
	b.Run("string-append", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = StringSerializer{}.AppendSerialize(buf[:0], "t", "a value of some length, say 40 bytes")
		}
	})
	b.Run("json", func(b *testing.B) {
		v := struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		}{42, "widget"}
		b.ReportAllocs()
		for b.Loop() {
			_, _ = JSONSerializer[struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			}]{}.Serialize("t", v)
		}
	})
}
