package workload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllAreValidAndNamedOnce(t *testing.T) {
	seen := map[string]bool{}
	ids := map[string]bool{}
	for _, s := range All(DefaultRecords) {
		require.NoError(t, s.Validate(), s.Name)
		assert.False(t, seen[s.Name], "duplicate name %s", s.Name)
		assert.False(t, ids[s.ID], "duplicate ID %s", s.ID)
		seen[s.Name], ids[s.ID] = true, true
		got, err := ByName(s.Name, 10)
		require.NoError(t, err)
		assert.Equal(t, 10, got.Records)
		byID, err := ByName(s.ID, 10)
		require.NoError(t, err)
		assert.Equal(t, got, byID, "an ID names its workload")
		assert.Equal(t, int64(DefaultBufferMemory), got.BufferMemory)
	}
	assert.Len(t, ids, 6, "issue 26's six workloads")
	// The 10 000-partition workload.
	s, err := ByName("W4", 1)
	require.NoError(t, err)
	assert.Equal(t, 10_000, s.Partitions)
	assert.Greater(t, s.Keys, s.Partitions, "keys must reach every partition")
}

// variants returns every workload of All in every key order and with every
// kind of values.
func variants(t *testing.T, records int) []Spec {
	t.Helper()
	var out []Spec
	for _, base := range All(records) {
		for _, k := range KeyOrders {
			ks, err := base.WithKeys(k)
			require.NoError(t, err)
			for _, v := range ValueKinds {
				vs, err := ks.WithValues(v)
				require.NoError(t, err)
				out = append(out, vs)
			}
		}
	}
	return out
}

func TestByNameFindsEveryVariant(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range variants(t, 10) {
		require.NoError(t, s.Validate(), s.Name)
		got, err := ByName(s.Name, 10)
		require.NoError(t, err, s.Name)
		assert.Equal(t, s, got, "a variant's name gives it back")
		seen[s.Name] = true
	}
	// Unkeyed workloads have no key order: 3 unkeyed × 3 values + 3 keyed × 3 orders × 3 values.
	assert.Len(t, seen, 3*3+3*3*3)

	cases := []struct {
		name string
		want string // Spec.Name; "" for unknown
	}{
		{"W2c", "100B-json-lz4"},
		{"w3c", "1KiB-json-zstd-keyed"},
		{"W3-zipf", "1KiB-zstd-keyed-zipf"},
		{"1KiB-zstd-keyed-ordered-letters", "1KiB-zstd-keyed-ordered-letters"},
		{"W1-letters", "100B-letters"},
		{"100B-zipf", ""},                    // unkeyed: no key order
		{"1KiB-zstd-keyed-scattered", ""},    // the default order is not named
		{"100B-text", ""},                    // a workload's own values are not named
		{"1KiB-zstd-keyed-letters-zipf", ""}, // key order before values
		{"zipf", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ByName(tc.name, 10)
			if tc.want == "" {
				require.ErrorContains(t, err, "unknown workload")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Name)
		})
	}
}

func TestValidate(t *testing.T) {
	good := Spec{Name: "x", Records: 1, ValueSize: 100, Values: ValuesText, Compression: "none", Partitions: 1, BufferMemory: DefaultBufferMemory}
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
		{"unknown values", func(s *Spec) { s.Values = "xml" }, `values "xml"`},
		{"keys without an order", func(s *Spec) { s.Keys = 10 }, `key order ""`},
		{"buffer below a batch", func(s *Spec) { s.BufferMemory = BatchBytes - 1 }, "buffer memory"},
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

// fewVariants is the variants of W2 (100-byte values, unkeyed) and W3
// (1 KiB values, keyed) with each kind of values and, for W3, each key
// order once: every generator at both sizes, without making the same
// payload again for every workload.
func fewVariants(t *testing.T, records int) []Spec {
	var out []Spec
	for _, s := range variants(t, records) {
		if s.ID != "W2" && s.ID != "W3" {
			continue
		}
		if s.Values == ValuesText || s.KeyOrder == KeysScattered || s.KeyOrder == "" {
			out = append(out, s)
		}
	}
	return out
}

func TestPayloadIsDeterministicAndSized(t *testing.T) {
	for _, s := range fewVariants(t, 100) {
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

// TestTextValuesAreTheFirstBenchmarks: W1 to W4 send the very bytes the
// first peer benchmark sent (its keys in its scattered order, its
// values), so that their figures compare with the earlier tables.
func TestTextValuesAreTheFirstBenchmarks(t *testing.T) {
	want := map[string]string{
		"W1": "dfdd9cc453ad37ef6723f4a71e7a9c32b77002492068e7bb446b4b494c59e43b",
		"W2": "dfdd9cc453ad37ef6723f4a71e7a9c32b77002492068e7bb446b4b494c59e43b",
		"W3": "f3413ffc36d965a4e1947ac1af60b3e8cd680636e4522c4fc9ed6464f6845bc7",
		"W4": "97f9f9f38fee72c508f9c64312774d8568c2c6a1f61baae31c313f2aa0bae208",
	}
	for id, sum := range want {
		s, err := ByName(id, 1)
		require.NoError(t, err)
		p := NewPayload(s)
		h := sha256.New()
		for i := range valuePoolSize {
			h.Write(p.Value(i))
		}
		for i := range 3 * s.Keys {
			h.Write(p.Key(i))
		}
		assert.Equal(t, sum, hex.EncodeToString(h.Sum(nil)), id)
	}
}

func TestValueKinds(t *testing.T) {
	for _, size := range []int{100, 1024} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			letters := NewPayload(Spec{ValueSize: size, Values: ValuesLetters})
			jsonp := NewPayload(Spec{ValueSize: size, Values: ValuesJSON})
			for i := 0; i < valuePoolSize; i += 7 {
				v := letters.Value(i)
				require.Len(t, v, size)
				for _, c := range v {
					require.True(t, c >= 'A' && c <= 'Z', "ProducerPerformance's letters: %q", c)
				}
				j := jsonp.Value(i)
				require.Len(t, j, size)
				var obj map[string]any
				require.NoError(t, json.Unmarshal(j, &obj), "%s", j)
				assert.EqualValues(t, 1_000_000+i, obj["id"], "ids count up")
			}
			if size == 1024 {
				var obj map[string]any
				require.NoError(t, json.Unmarshal(jsonp.Value(0), &obj))
				assert.NotEmpty(t, obj["items"], "a 1 KiB event carries its cart")
			}
		})
	}
}

// TestKeyOrders checks the three orders as a reader of the table takes
// them: scattered is the first benchmark's stride, ordered walks the keys
// one by one, and zipf is skewed towards the first keys and still
// reaches many.
func TestKeyOrders(t *testing.T) {
	base, err := ByName("W3", 1)
	require.NoError(t, err)
	spec := func(order string) *Payload {
		s, err := base.WithKeys(order)
		require.NoError(t, err)
		return NewPayload(s)
	}
	scattered, ordered, zipf := spec(KeysScattered), spec(KeysOrdered), spec(KeysZipf)
	for _, i := range []int{0, 1, 2, 9_999, 10_000, 123_457} {
		assert.Equal(t, []byte(fmt.Sprintf("key-%08d", (i*KeyStride)%base.Keys)), scattered.Key(i))
		assert.Equal(t, []byte(fmt.Sprintf("key-%08d", i%base.Keys)), ordered.Key(i))
	}
	counts := map[string]int{}
	for i := range ZipfDraws {
		counts[string(zipf.Key(i))]++
	}
	assert.Equal(t, zipf.Key(0), spec(KeysZipf).Key(0), "the draws come from a fixed seed")
	assert.Equal(t, zipf.Key(5), zipf.Key(5+ZipfDraws), "records cycle through the draws")
	top, second := counts["key-00000000"], counts["key-00000001"]
	assert.Greater(t, top, second, "key 0 is the most frequent")
	assert.Greater(t, top, ZipfDraws/20, "the hottest key takes a large share")
	assert.Greater(t, len(counts), base.Keys/4, "and many keys still appear")
}

func TestPayloadFileRoundTrips(t *testing.T) {
	for _, s := range fewVariants(t, 100) {
		t.Run(s.Name, func(t *testing.T) {
			p := NewPayload(s)
			path := filepath.Join(t.TempDir(), "payload")
			require.NoError(t, p.WriteFile(path, s))
			name, back, err := ReadPayloadFile(path)
			require.NoError(t, err)
			assert.Equal(t, s.Name, name)
			for i := range 3 * max(valuePoolSize, s.Keys) {
				if !bytes.Equal(p.Value(i), back.Value(i)) || !bytes.Equal(p.Key(i), back.Key(i)) {
					t.Fatalf("record %d: key %q value %q, read back key %q value %q", i, p.Key(i), p.Value(i), back.Key(i), back.Value(i))
				}
			}
			for _, i := range []int{ZipfDraws - 1, ZipfDraws, 2*ZipfDraws + 17} {
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
	spec    Spec // as Open got it
}

func (f *fakeClient) Open(_ context.Context, s Spec, _ []string, _ *Payload) error {
	f.spec = s
	return f.openErr
}
func (f *fakeClient) Close() error  { f.closed = true; return nil }
func (f *fakeClient) Notes() string { return "fake" }
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
		args   []string
		buffer int64 // Spec.BufferMemory as Open gets it
		acked  int64
		errors int64
		first  string
	}{
		{"all acknowledged", 0, nil, DefaultBufferMemory, 100, 0, ""},
		{"some failed", 3, nil, DefaultBufferMemory, 97, 3, "boom"},
		{"buffer memory from the flag", 0, []string{"-buffer-memory", "33554432"}, 32 << 20, 100, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			fc := &fakeClient{fail: tc.fail}
			args := append([]string{"-brokers", "127.0.0.1:1", "-workload", "100B", "-records", "100"}, tc.args...)
			err := run("fake", fc, args, &out)
			require.NoError(t, err)
			assert.True(t, fc.closed)
			assert.Equal(t, tc.buffer, fc.spec.BufferMemory)
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

// With FreshValues every call returns the same bytes in memory of its own,
// which the caller may keep or change without touching the next record's.
func TestPayloadFreshValues(t *testing.T) {
	shared := NewPayload(Spec{ValueSize: 100, Values: ValuesText})
	fresh := NewPayload(Spec{ValueSize: 100, Values: ValuesText, FreshValues: true})
	a, b := fresh.Value(7), fresh.Value(7)
	require.Equal(t, shared.Value(7), a)
	require.Equal(t, a, b)
	a[0] ^= 0xff
	assert.NotEqual(t, a, b, "two calls share memory")
	assert.Equal(t, shared.Value(7), fresh.Value(7), "a caller's change reached the payload")
	assert.Same(t, &shared.Value(7)[0], &shared.Value(7)[0], "without FreshValues the payload's value itself")
}
