package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllAreValidAndNamedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All(DefaultRecords) {
		require.NoError(t, s.Validate(), s.Name)
		assert.False(t, seen[s.Name], "duplicate name %s", s.Name)
		seen[s.Name] = true
		got, err := ByName(s.Name, 10)
		require.NoError(t, err)
		assert.Equal(t, 10, got.Records)
	}
	// The 10 000-partition workload.
	s, err := ByName("100B-keyed-10k-partitions", 1)
	require.NoError(t, err)
	assert.Equal(t, 10_000, s.Partitions)
	assert.Greater(t, s.Keys, s.Partitions, "keys must reach every partition")
}

func TestValidate(t *testing.T) {
	good := Spec{Name: "x", Records: 1, ValueSize: 100, Compression: "none", Partitions: 1}
	cases := []struct {
		name string
		edit func(*Spec)
		err  string
	}{
		{"good", func(*Spec) {}, ""},
		{"no records", func(s *Spec) { s.Records = 0 }, "records 0"},
		{"huge value", func(s *Spec) { s.ValueSize = BatchBytes }, "value size"},
		{"bad codec", func(s *Spec) { s.Compression = "brotli" }, `compression "brotli"`},
		{"no partitions", func(s *Spec) { s.Partitions = 0 }, "partitions 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			err := s.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestPayloadIsDeterministicAndSized(t *testing.T) {
	for _, s := range All(100) {
		t.Run(s.Name, func(t *testing.T) {
			a, b := NewPayload(s), NewPayload(s)
			for i := range 50 {
				assert.Len(t, a.Value(i), s.ValueSize)
				assert.Equal(t, a.Value(i), b.Value(i), "every client sends the same bytes")
				assert.Equal(t, a.Key(i), b.Key(i))
				if s.Keys == 0 {
					assert.Nil(t, a.Key(i), "unkeyed means null keys")
				} else {
					assert.NotEmpty(t, a.Key(i))
				}
			}
			assert.NotEqual(t, a.Value(0), a.Value(1), "values vary")
		})
	}
}

func TestPayloadKeysCoverTheKeySpace(t *testing.T) {
	s, err := ByName("1KiB-zstd-keyed", 0)
	require.NoError(t, err)
	p := NewPayload(s)
	seen := map[string]bool{}
	for i := range s.Keys {
		seen[string(p.Key(i))] = true
	}
	assert.Len(t, seen, s.Keys, "one pass over Keys records uses every key once")
}

func TestPayloadFileRoundTrips(t *testing.T) {
	for _, s := range All(100) {
		t.Run(s.Name, func(t *testing.T) {
			p := NewPayload(s)
			path := filepath.Join(t.TempDir(), "payload")
			require.NoError(t, p.WriteFile(path, s))
			name, back, err := ReadPayloadFile(path)
			require.NoError(t, err)
			assert.Equal(t, s.Name, name)
			for i := range 3 * valuePoolSize {
				assert.Equal(t, p.Value(i), back.Value(i), "value %d", i)
				assert.Equal(t, p.Key(i), back.Key(i), "key %d", i)
			}
		})
	}
}

// fakeClient acknowledges or fails records without a broker.
type fakeClient struct {
	fail    int // records to fail
	openErr error
	closed  bool
}

func (f *fakeClient) Open(context.Context, Spec, []string, *Payload) error { return f.openErr }
func (f *fakeClient) Close() error                                         { f.closed = true; return nil }
func (f *fakeClient) Notes() string                                        { return "fake" }
func (f *fakeClient) Produce(_ context.Context, c *Counter) {
	c.AckN(100 - f.fail)
	if f.fail > 0 {
		c.Fail(f.fail, errors.New("boom"))
	}
}

func TestRunPrintsOneResultLine(t *testing.T) {
	cases := []struct {
		name   string
		fail   int
		acked  int64
		errors int64
		first  string
	}{
		{"all acknowledged", 0, 100, 0, ""},
		{"some failed", 3, 97, 3, "boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			fc := &fakeClient{fail: tc.fail}
			err := run("fake", fc, []string{"-brokers", "127.0.0.1:1", "-workload", "100B", "-records", "100"}, &out)
			require.NoError(t, err)
			assert.True(t, fc.closed)
			var r Result
			require.NoError(t, json.Unmarshal(out.Bytes(), &r))
			assert.Equal(t, "fake", r.Client)
			assert.Equal(t, "100B", r.Workload)
			assert.Equal(t, 100, r.Records)
			assert.Equal(t, tc.acked, r.Acked)
			assert.Equal(t, tc.errors, r.Errors)
			assert.Equal(t, tc.first, r.FirstError)
			assert.Positive(t, r.WallNanos)
			assert.Equal(t, "fake", r.Notes)
		})
	}
}

func TestRunFailsWithoutASetup(t *testing.T) {
	cases := []struct {
		name string
		args []string
		open error
		err  string
	}{
		{"no brokers", []string{"-workload", "100B"}, nil, "-brokers is required"},
		{"unknown workload", []string{"-brokers", "a:1", "-workload", "nope"}, nil, `unknown workload "nope"`},
		{"open fails", []string{"-brokers", "a:1", "-workload", "100B"}, errors.New("refused"), "open: refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run("fake", &fakeClient{openErr: tc.open}, tc.args, &out)
			require.ErrorContains(t, err, tc.err)
			assert.Empty(t, out.String(), "no result line without a run")
		})
	}
}
